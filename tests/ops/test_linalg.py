"""matmul, batch_matmul, linear and conv2d against torch, interpreted and compiled.

int8 operands accumulate in int32 and are compared exactly (numpy int64 reference);
float32 against float64 references; float16 with the looser 2e-2 tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

import polyc
from polyc import compute as pc
from polyc import ops
from polyc.ops import nn
from tests.support.opcheck import Batch, f64

MATMUL_SHAPES = [(1, 1, 1), (1, 5, 3), (7, 1, 4), (5, 3, 1), (13, 11, 9)]


def test_matmul_float32_shapes(rng):
    b = Batch("matmul_f32", rng)
    for n, (m, k, p) in enumerate(MATMUL_SHAPES):
        x, y = b.randn(f"a{n}", (m, k)), b.randn(f"b{n}", (k, p))
        b.check(nn.matmul(x, y), f64(b[f"a{n}"]) @ f64(b[f"b{n}"]))
    v, w = b.randn("v", (6,)), b.randn("w", (6, 3))
    u = b.randn("u", (4, 6))
    b.check(nn.matmul(v, w), f64(b["v"]) @ f64(b["w"]))  # vector @ matrix
    b.check(nn.matmul(u, v), f64(b["u"]) @ f64(b["v"]))  # matrix @ vector
    b.check(nn.matmul(v, v), f64(b["v"]) @ f64(b["v"]))  # dot product, 0-d
    s = b.randn("s", (2, 1, 3, 6))
    t = b.randn("t", (4, 6, 5))
    b.check(nn.matmul(s, t), f64(b["s"]) @ f64(b["t"]))  # batch dims broadcast
    b.check(nn.matmul(s, w), f64(b["s"]) @ f64(b["w"]))
    b.run()


def test_batch_matmul_and_linear(rng):
    b = Batch("bmm_linear", rng)
    for n, (bs, m, k, p) in enumerate([(1, 1, 1, 1), (3, 5, 7, 2), (2, 1, 4, 6)]):
        x, y = b.randn(f"x{n}", (bs, m, k)), b.randn(f"y{n}", (bs, k, p))
        b.check(nn.batch_matmul(x, y), f64(b[f"x{n}"]) @ f64(b[f"y{n}"]))
    for n, lead in enumerate([(1,), (5,), (2, 3), (2, 1, 3)]):
        x = b.randn(f"in{n}", lead + (7,))
        w, bias = b.randn(f"w{n}", (4, 7)), b.randn(f"bias{n}", (4,))
        ref = F.linear(f64(b[f"in{n}"]), f64(b[f"w{n}"]), f64(b[f"bias{n}"]))
        b.check(nn.linear(x, w, bias), ref)
        b.check(nn.linear(x, w), F.linear(f64(b[f"in{n}"]), f64(b[f"w{n}"])))
    b.run()


def test_int8_contractions_accumulate_in_int32_exactly(rng):
    b = Batch("int8_contractions", rng)
    x = b.randint("x", (9, 33), -128, 128)
    y = b.randint("y", (33, 5), -128, 128)
    w = b.randint("w", (4, 33), -128, 128)
    bias = b.randint("bias", (4,), -1000, 1000, "int32")
    img = b.randint("img", (1, 3, 6, 5), -128, 128)
    k = b.randint("k", (4, 3, 3, 3), -128, 128)
    cb = b.randint("cb", (4,), -1000, 1000, "int32")
    wide = {n: b[n].astype(np.int64) for n in ("x", "y", "w", "bias", "img", "k", "cb")}
    mm = nn.matmul(x, y)
    assert mm.dtype.name == "int32"
    b.check(mm, wide["x"] @ wide["y"])
    b.check(nn.linear(x, w, bias), wide["x"] @ wide["w"].T + wide["bias"])
    conv = F.conv2d(f64(wide["img"]), f64(wide["k"]), f64(wide["cb"]), padding=1)
    b.check(nn.conv2d(img, k, cb, padding=1), conv.numpy().astype(np.int64))
    xi = b.randint("xi", (3, 4), -1000, 1000, "int32")
    yi = b.randint("yi", (4, 2), -1000, 1000, "int32")
    b.check(nn.matmul(xi, yi), b["xi"].astype(np.int64) @ b["yi"])
    b.run()


def test_float16_contractions(rng):
    b = Batch("f16_contractions", rng)
    x, y = b.randn("x", (5, 16), "float16"), b.randn("y", (16, 3), "float16")
    img = b.randn("img", (1, 2, 5, 5), "float16")
    k = b.randn("k", (3, 2, 3, 3), "float16", scale=0.5)
    b.check(nn.matmul(x, y), f64(b["x"]) @ f64(b["y"]))
    b.check(
        nn.conv2d(img, k, padding=1), F.conv2d(f64(b["img"]), f64(b["k"]), padding=1)
    )
    b.run()


CONV_CASES = [
    # input shape, weight shape, kwargs
    ((1, 1, 1, 1), (1, 1, 1, 1), {}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": 1}),
    ((1, 3, 9, 8), (5, 3, 3, 2), {"stride": 2, "padding": (1, 0)}),
    ((1, 2, 9, 9), (3, 2, 3, 3), {"stride": (2, 3), "padding": 2, "dilation": 2}),
    ((1, 4, 5, 7), (6, 2, 3, 1), {"groups": 2, "padding": (1, 0)}),
    ((2, 3, 6, 5), (3, 1, 3, 3), {"groups": 3, "padding": 1}),  # depthwise
    ((1, 3, 6, 5), (6, 1, 5, 3), {"groups": 3, "padding": "same"}),  # multiplier 2
    ((1, 2, 5, 6), (2, 2, 4, 3), {"padding": "same", "dilation": (1, 2)}),
    ((1, 2, 7, 5), (3, 2, 2, 2), {"padding": "valid", "stride": 3}),
]


TRANSPOSED_CASES = [
    ((1, 1, 1, 1), (1, 1, 1, 1), {}),
    ((1, 2, 4, 3), (2, 3, 3, 3), {}),
    (
        (2, 4, 3, 5),
        (4, 2, 3, 2),
        {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
    ),
    (
        (1, 3, 4, 4),
        (3, 1, 4, 4),
        {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1), "groups": 3},
    ),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_conv2d_stride_padding_dilation_groups(rng):
    """conv2d cases, and conv_transpose2d (strides are divisibility conditions)."""
    b = Batch("conv2d", rng)
    for n, (xs, ws, kw) in enumerate(CONV_CASES):
        x, w = b.randn(f"x{n}", xs), b.randn(f"w{n}", ws, scale=0.5)
        bias = b.randn(f"bias{n}", (ws[0],))
        args = f64(b[f"x{n}"]), f64(b[f"w{n}"]), f64(b[f"bias{n}"])
        b.check(nn.conv2d(x, w, bias, **kw), F.conv2d(*args, **kw))
    for n, (xs, ws, kw) in enumerate(TRANSPOSED_CASES):
        x, w = b.randn(f"tx{n}", xs), b.randn(f"tw{n}", ws, scale=0.5)
        bias = b.randn(f"tb{n}", (ws[1] * kw.get("groups", 1),))
        args = f64(b[f"tx{n}"]), f64(b[f"tw{n}"]), f64(b[f"tb{n}"])
        b.check(nn.conv_transpose2d(x, w, bias, **kw), F.conv_transpose2d(*args, **kw))
    x, w = b.randn("xm", (1, 2, 5, 4)), b.randn("wm", (3, 2, 3, 3))
    padded = nn.conv2d(x, w, None, 1, (2, 1), materialize_padding=True)
    b.check(padded, F.conv2d(f64(b["xm"]), f64(b["wm"]), padding=(2, 1)))
    b.run()


def test_conv2d_padding_is_a_condition_not_a_copy():
    x = pc.placeholder("x", (1, 2, 5, 5))
    w = pc.placeholder("w", (3, 2, 3, 3))
    plain = pc.kernel("conv", [nn.conv2d(x, w, padding=1, name="y")])
    assert set(plain.arrays) == {"x", "w", "y"}
    update = plain.statements[1]
    text = str(update.domain)
    assert "rh" in text and "h" in text  # the window is clipped at the border
    copied = pc.kernel(
        "conv_pad", [nn.conv2d(x, w, padding=1, materialize_padding=True, name="z")]
    )
    assert "z_pad" in copied.arrays


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_kernel_level_wrappers_name_inputs_like_pytorch(dtype, rng):
    k = ops.matmul(3, 4, 5, dtype=dtype)
    assert [a.name for a in k.inputs] == ["A", "B"] and k.outputs[0].name == "out"
    conv = ops.conv2d((1, 2, 5, 5), (3, 2, 3, 3), padding=1, dtype=dtype)
    assert [a.name for a in conv.inputs] == ["input", "weight", "bias"]
    assert conv.arrays["bias"].dtype.name == ("int32" if dtype == "int8" else dtype)
    lin = ops.linear((2, 6), (4, 6), bias=False, dtype=dtype)
    assert [a.name for a in lin.inputs] == ["input", "weight"]
    bmm = ops.batch_matmul(2, 3, 4, 5, dtype=dtype)
    assert [a.name for a in bmm.inputs] == ["input", "mat2"]


def test_matmul_kernel_with_symbolic_sizes(rng):
    m, n = pc.param("M"), pc.param("N")
    kernel = ops.matmul(m, n, 6)
    module = polyc.build(kernel)
    for rows, cols in ((1, 1), (3, 7), (8, 2)):
        a = rng.standard_normal((rows, 6)).astype(np.float32)
        bb = rng.standard_normal((6, cols)).astype(np.float32)
        ref = a.astype(np.float64) @ bb
        for got in (polyc.interpret(kernel, {"A": a, "B": bb}), module(A=a, B=bb)):
            np.testing.assert_allclose(got["out"], ref, rtol=1e-5, atol=1e-5)


def test_conv2d_symbolic_batch(rng):
    x = pc.placeholder("x", (pc.param("N"), 2, 6, 5))
    w = pc.placeholder("w", (3, 2, 3, 3))
    kernel = pc.kernel("conv_n", [nn.conv2d(x, w, stride=2, padding=1, name="y")])
    for batch in (1, 3):
        xa = rng.standard_normal((batch, 2, 6, 5)).astype(np.float32)
        wa = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
        got = polyc.interpret(kernel, {"x": xa, "w": wa})["y"]
        ref = F.conv2d(f64(xa), f64(wa), stride=2, padding=1).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
