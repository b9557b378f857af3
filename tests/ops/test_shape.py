"""Data movement against numpy/torch: permute, reshape (affine // and %), pad,
concat, slice, select, expand (gathers: test_gather.py). All exact."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

import polyc
from polyc import compute as pc
from polyc.ops import nn
from tests.support.opcheck import Batch


def test_permute_transpose_reshape_flatten(rng):
    b = Batch("movement", rng)
    x = b.randn("x", (2, 3, 4, 5))
    v = b.randn("v", (7,))
    s = b.randn("s", (1, 3, 1))
    a = b["x"]
    b.check(nn.permute(x, (2, 0, 3, 1)), a.transpose(2, 0, 3, 1))
    b.check(nn.permute(x, (-1, 1, 2, 0)), a.transpose(3, 1, 2, 0))
    b.check(nn.transpose(x), a.swapaxes(-2, -1))
    b.check(nn.transpose(x, 0, 2), a.swapaxes(0, 2))
    for shape in [(6, 20), (4, -1, 3), (120,), (2, 3, 20), (5, 4, 3, 2), (1, 120, 1)]:
        b.check(nn.reshape(x, shape), a.reshape(shape))
    b.check(nn.view(v, (7, 1)), b["v"].reshape(7, 1))
    b.check(nn.flatten(x), a.reshape(-1))
    b.check(nn.flatten(x, 1), a.reshape(2, -1))
    b.check(nn.flatten(x, 1, 2), a.reshape(2, 12, 5))
    b.check(nn.squeeze(s), b["s"].reshape(3))
    b.check(nn.squeeze(s, 0), b["s"].reshape(3, 1))
    b.check(nn.unsqueeze(v, 0), b["v"][None])
    b.check(nn.unsqueeze(v, -1), b["v"][:, None])
    b.check(nn.expand(s, (2, 3, 4)), np.broadcast_to(b["s"], (2, 3, 4)))
    b.check(nn.expand(v, (3, -1)), np.broadcast_to(b["v"], (3, 7)))
    o = b.randn("o", (3, 1, 5))  # odd sizes and a size-1 dim
    c = b["o"]
    b.check(nn.permute(o, (1, 2, 0)), c.transpose(1, 2, 0))
    b.check(nn.transpose(o, 0, 1), c.swapaxes(0, 1))
    b.check(nn.reshape(o, (5, 3)), c.reshape(5, 3))
    b.check(nn.reshape(o, (15, 1, 1)), c.reshape(15, 1, 1))
    b.check(nn.flatten(o, 0, 1), c.reshape(3, 5))
    one = b.randn("one", (1,))
    b.check(nn.reshape(one, ()), b["one"].reshape(()))
    b.check(nn.reshape(nn.reshape(one, ()), (1, 1)), b["one"].reshape(1, 1))
    b.run()


def test_slice_select_pad_concat(rng):
    b = Batch("regions", rng)
    x = b.randn("x", (2, 3, 5, 4))
    y = b.randn("y", (2, 1, 5, 4))
    z = b.randn("z", (2, 2, 5, 4))
    a = b["x"]
    b.check(nn.slice(x, 2, 1, None, 2), a[:, :, 1::2])
    b.check(nn.slice(x, -1, -3, -1), a[..., -3:-1])
    b.check(nn.slice(x, 1, 0, 100), a)
    b.check(nn.select(x, 1, -1), a[:, -1])
    b.check(nn.select(x, 3, 0), a[..., 0])
    o = b.randn("o", (1, 7))
    b.check(nn.slice(o, 1, 2, 7, 3), b["o"][:, 2:7:3])
    b.check(nn.slice(o, 0), b["o"])
    b.check(nn.select(o, 0, 0), b["o"][0])
    b.check(nn.pad(o, (0, 0, 1, 0)), np.pad(b["o"], ((1, 0), (0, 0))))
    for pads, value in [((1, 2), 0), ((0, 1, 2, 0), -1.5), ((1, 1, 1, 1, 1, 1), 2.0)]:
        ref = F.pad(torch.from_numpy(a), pads, value=value).numpy()
        b.check(nn.pad(x, pads, value=value), ref)
    b.check(
        nn.pad(x, (-1, 1, 0, -2)), F.pad(torch.from_numpy(a), (-1, 1, 0, -2)).numpy()
    )
    b.check(nn.concat([x, y, z], 1), np.concatenate([a, b["y"], b["z"]], 1))
    b.check(nn.cat([x, x], -1), np.concatenate([a, a], -1))
    b.check(nn.concat([y]), b["y"])
    i = b.randint("i", (3, 2), -5, 5, "int32")
    j = b.randint("j", (1, 2), -5, 5, "int32")
    b.check(nn.concat([i, j, i], 0), np.concatenate([b["i"], b["j"], b["i"]], 0))
    b.check(
        nn.pad(i, (2, 0), value=7), np.pad(b["i"], ((0, 0), (2, 0)), constant_values=7)
    )
    b.run()


def test_reshape_keeps_a_symbolic_leading_dim(rng):
    n = pc.param("N")
    x = pc.placeholder("x", (n, 3, 4))
    flat = nn.flatten(x, 1, name="flat")
    back = nn.reshape(flat, (n, 2, 6), name="back")
    kernel = pc.kernel("sym_reshape", [flat, back])
    xa = rng.standard_normal((5, 3, 4)).astype(np.float32)
    for got in (polyc.interpret(kernel, {"x": xa}), polyc.build(kernel)(x=xa)):
        np.testing.assert_array_equal(got["flat"], xa.reshape(5, 12))
        np.testing.assert_array_equal(got["back"], xa.reshape(5, 2, 6))
