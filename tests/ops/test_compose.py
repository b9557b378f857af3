"""Multi-op programs from polyc.ops.nn against torch, interpreted and compiled."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

import polyc
from polyc import compute as pc
from polyc.ops import nn
from tests.support.opcheck import Batch, close, f64


def test_conv_bias_relu_pool_linear_block(rng):
    b = Batch("cnn_block", rng)
    x = b.randn("x", (2, 3, 9, 7))
    w = b.randn("w", (5, 3, 3, 3), scale=0.5)
    bias = b.randn("bias", (5,))
    fc = b.randn("fc", (4, 5 * 5 * 4), scale=0.2)
    fcb = b.randn("fcb", (4,))
    y = nn.relu(nn.conv2d(x, w, bias, stride=1, padding=1))
    p = nn.max_pool2d(y, 2, ceil_mode=True)
    z = nn.gelu(nn.linear(nn.flatten(p, 1), fc, fcb))
    ty = torch.relu(F.conv2d(f64(b["x"]), f64(b["w"]), f64(b["bias"]), padding=1))
    tp = F.max_pool2d(ty, 2, ceil_mode=True)
    tz = F.gelu(F.linear(tp.flatten(1), f64(b["fc"]), f64(b["fcb"])))
    b.check(y, ty)
    b.check(z, tz)
    b.run()


def test_attention_qkt_softmax_pv(rng):
    """A small single-head attention: softmax(Q K^T / sqrt(d)) V over a batch."""
    b = Batch("attention", rng)
    q = b.randn("q", (2, 5, 8))
    k = b.randn("k", (2, 7, 8))
    v = b.randn("v", (2, 7, 3))
    scores = nn.mul(nn.batch_matmul(q, nn.transpose(k, 1, 2)), 1 / math.sqrt(8))
    out = nn.batch_matmul(nn.softmax(scores, dim=-1), v)
    ts = f64(b["q"]) @ f64(b["k"]).transpose(1, 2) / math.sqrt(8)
    b.check(out, torch.softmax(ts, -1) @ f64(b["v"]))
    b.run()


def test_unique_names_compose_without_clashes():
    x = pc.placeholder("x", (3, 4))
    y = nn.add(nn.relu(x), nn.relu(x))
    kernel = pc.kernel("twice", [y])
    names = [a for a in kernel.arrays if a.startswith("relu_")]
    assert len(names) == 2 and names[0] != names[1]


def test_linear_gelu_layer_norm_residual(rng):
    b = Batch("mlp_block", rng)
    x = b.randn("x", (3, 6))
    w1 = b.randn("w1", (10, 6), scale=0.4)
    w2 = b.randn("w2", (6, 10), scale=0.4)
    g = b.randn("g", (6,))
    h = nn.linear(nn.gelu(nn.linear(x, w1), approximate="tanh"), w2)
    y = nn.layer_norm(nn.add(x, h), 6, weight=g)
    tx = f64(b["x"])
    th = F.linear(F.gelu(F.linear(tx, f64(b["w1"])), approximate="tanh"), f64(b["w2"]))
    b.check(y, F.layer_norm(tx + th, (6,), f64(b["g"])))
    b.run()


def test_symbolic_batch_through_many_ops(rng):
    """One kernel over a parameter N serves every N, interpreted and compiled."""
    n = pc.param("N")
    x = pc.placeholder("x", (n, 5))
    w = pc.placeholder("w", (3, 5))
    img = nn.reshape(x, (1, 1, n, 5))
    outs = {
        "sm": (nn.softmax(x, -1, name="sm"), lambda t, _: torch.softmax(t, -1)),
        "ln": (nn.layer_norm(x, 5, name="ln"), lambda t, _: F.layer_norm(t, (5,))),
        "mn": (nn.mean(x, 0, name="mn"), lambda t, _: t.mean(0)),
        "cc": (nn.concat([x, x], 0, name="cc"), lambda t, _: torch.cat([t, t])),
        "pd": (nn.pad(x, (1, 1, 2, 0), name="pd"), lambda t, _: F.pad(t, (1, 1, 2, 0))),
        "li": (nn.linear(x, w, name="li"), F.linear),
        "mp": (
            nn.max_pool2d(img, 2, name="mp"),
            lambda t, _: F.max_pool2d(t[None, None], 2),
        ),
        "ap": (
            nn.avg_pool2d(img, 2, padding=1, count_include_pad=False, name="ap"),
            lambda t, _: F.avg_pool2d(
                t[None, None], 2, padding=1, count_include_pad=False
            ),
        ),
    }
    kernel = pc.kernel("symbolic_batch", [t for t, _ in outs.values()])
    module = polyc.build(kernel)
    wa = rng.standard_normal((3, 5)).astype(np.float32)
    for size in (2, 5):
        xa = rng.standard_normal((size, 5)).astype(np.float32)
        for how, got in (
            ("interpret", polyc.interpret(kernel, {"x": xa, "w": wa})),
            ("compiled C", module(x=xa, w=wa)),
        ):
            for name, (_, ref) in outs.items():
                close(
                    got[name],
                    ref(f64(xa), f64(wa)),
                    "float32",
                    f"{how} {name} N={size}",
                )
