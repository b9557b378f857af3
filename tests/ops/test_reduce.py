"""Reductions, softmax, log_softmax, layer_norm and batch_norm against torch."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from polyc.ops import nn
from tests.support.opcheck import Batch, f64

# (shape, dims) pairs: odd sizes, size-1 dims, negative axes, all axes
REDUCE_CASES = [
    ((1,), None),
    ((7,), 0),
    ((3, 1, 5), (0, 2)),
    ((2, 3, 4, 5), (0, 2)),
    ((2, 3, 4, 5), -1),
    ((2, 3, 4, 5), (1, -1)),
    ((2, 3, 4, 5), None),
    ((3, 1, 5), 1),
]


def test_sum_mean_max_min_over_axes_with_keepdim(rng):
    b = Batch("reductions", rng)
    for n, (shape, dims) in enumerate(REDUCE_CASES):
        x = b.randn(f"x{n}", shape)
        t = f64(b[f"x{n}"])
        tdims = tuple(range(len(shape))) if dims is None else dims
        keep = n % 2 == 1  # every other case keeps the reduced dims
        b.check(nn.sum(x, dims, keep), t.sum(tdims, keepdim=keep))
        b.check(nn.mean(x, dims, keep), t.mean(tdims, keepdim=keep))
        b.check(nn.max(x, dims, keep), t.amax(tdims, keepdim=keep))
        b.check(nn.min(x, dims, keep), t.amin(tdims, keepdim=keep))
    b.run()


def test_integer_and_float16_reductions(rng):
    b = Batch("reductions_int", rng)
    x = b.randint("x", (5, 33), -128, 128)
    i = b.randint("i", (3, 4), -1000, 1000, "int32")
    h = b.randn("h", (4, 9), "float16")
    s8 = nn.sum(x, 1)
    assert s8.dtype.name == "int32"  # int8 sums accumulate in int32
    b.check(s8, b["x"].astype(np.int64).sum(1))
    b.check(nn.max(x, 0), b["x"].max(0))
    b.check(nn.min(i, None), b["i"].min())
    b.check(nn.sum(i, 0, keepdim=True), b["i"].sum(0, keepdims=True))
    b.check(nn.mean(h, 1), f64(b["h"]).mean(1))
    b.check(nn.sum(h, 1), f64(b["h"]).sum(1))
    b.run()


def test_softmax_and_log_softmax(rng):
    b = Batch("softmax", rng)
    for n, (shape, dim) in enumerate(
        [((1,), 0), ((7,), -1), ((3, 1, 5), 1), ((2, 3, 4, 5), 2), ((4, 9), -1)]
    ):
        x = b.randn(f"x{n}", shape, scale=3.0)
        t = f64(b[f"x{n}"])
        b.check(nn.softmax(x, dim), torch.softmax(t, dim))
        b.check(nn.log_softmax(x, dim), torch.log_softmax(t, dim))
    big = b.input("big", np.array([[1000.0, 1001.0, -1000.0]], np.float32))
    b.check(nn.softmax(big, -1), torch.softmax(f64(b["big"]), -1))  # no overflow
    h = b.randn("h", (3, 8), "float16", scale=3.0)
    b.check(nn.softmax(h, -1), torch.softmax(f64(b["h"]), -1))
    b.check(nn.log_softmax(h, 0), torch.log_softmax(f64(b["h"]), 0))
    b.run()


def test_layer_norm_over_trailing_dims(rng):
    b = Batch("layer_norm", rng)
    x = b.randn("x", (2, 3, 5), scale=2.0)
    w2, b2 = b.randn("w2", (3, 5)), b.randn("b2", (3, 5))
    w1 = b.randn("w1", (5,))
    one = b.randn("one", (4, 1))
    t = f64(b["x"])
    b.check(nn.layer_norm(x, 5), F.layer_norm(t, (5,)))
    b.check(nn.layer_norm(x, (5,), weight=w1), F.layer_norm(t, (5,), f64(b["w1"])))
    b.check(
        nn.layer_norm(x, (3, 5), w2, b2, eps=1e-3),
        F.layer_norm(t, (3, 5), f64(b["w2"]), f64(b["b2"]), eps=1e-3),
    )
    b.check(nn.layer_norm(one, 1), F.layer_norm(f64(b["one"]), (1,)))
    h = b.randn("h", (3, 16), "float16")
    b.check(nn.layer_norm(h, 16), F.layer_norm(f64(b["h"]), (16,)))
    b.run()


def test_norms_take_one_rsqrt_per_row_or_channel():
    """The reciprocal standard deviation is computed once per normalised row and
    the elements multiply by it, as torch does: a transcendental per element
    cost the vector unit 8x the cycles of the normalisation on edge-npu."""
    from polyc.ir.expr import Unary
    from polyc.lang import compute as pc

    x = pc.placeholder("x", (17, 64))
    kernel = pc.kernel("ln", [nn.layer_norm(x, 64, name="y")])
    rsqrt = {
        s.target.array: sum(
            isinstance(n, Unary) and n.op == "rsqrt" for n in s.body.walk()
        )
        for s in kernel.statements
    }
    assert rsqrt == {**dict.fromkeys(rsqrt, 0), "y_rstd": 1}, rsqrt
    shape = {a.name: a.shape for a in kernel.arrays.values()}
    assert shape["y_rstd"] == (17,)
    # batch norm likewise, once per channel
    x4 = pc.placeholder("x4", (1, 8, 5, 5))
    mean, var = pc.placeholder("mean", (8,)), pc.placeholder("var", (8,))
    bn = pc.kernel("bn", [nn.batch_norm(x4, mean, var, name="z")])
    per = {
        s.target.array: any(
            isinstance(n, Unary) and n.op == "rsqrt" for n in s.body.walk()
        )
        for s in bn.statements
    }
    assert per == {"z_rstd": True, "z": False}, per
    # the per-channel rsqrt reads only parameters: it comes before the input's
    # producer, so the normalisation stays next to it, an epilogue it can fuse
    # with (after it, the normalisation fused into the next convolution instead:
    # an EfficientNet layer on hw-a ran 10x its bound)
    y = pc.compute("y", (1, 8, 5, 5), lambda n, c, h, w: x4[n, c, h, w] * 2.0)
    order = [
        s.target.array
        for s in pc.kernel("ybn", [nn.batch_norm(y, mean, var, name="u")]).statements
    ]
    assert order == ["u_rstd", "y", "u"], order


def test_batch_norm_inference(rng):
    b = Batch("batch_norm", rng)
    for n, shape in enumerate([(1, 1), (2, 3), (2, 3, 5), (1, 4, 3, 2)]):
        c = shape[1]
        x = b.randn(f"x{n}", shape)
        mean, var = b.randn(f"m{n}", (c,)), b.positive(f"v{n}", (c,))
        w, bias = b.randn(f"w{n}", (c,)), b.randn(f"b{n}", (c,))
        t = [f64(b[f"{p}{n}"]) for p in "xmvwb"]
        b.check(nn.batch_norm(x, mean, var, w, bias), F.batch_norm(*t))
        b.check(
            nn.batch_norm(x, mean, var, eps=0.1),
            F.batch_norm(t[0], t[1], t[2], eps=0.1),
        )
    h, hm = b.randn("h", (2, 3, 4), "float16"), b.randn("hm", (3,), "float16")
    hv = b.positive("hv", (3,), "float16")
    ref = F.batch_norm(f64(b["h"]), f64(b["hm"]), f64(b["hv"]))
    b.check(nn.batch_norm(h, hm, hv), ref)
    b.run()
