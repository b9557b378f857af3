"""int8 requantization (polyc.ops.quant): the interpreter, the host C and the numpy
reference agree bit for bit, and so does PyTorch's quantized reference.

The edge cases are the ones integer epilogues get wrong: ties (x.5 rounds to even,
not away from zero), saturation at both ends (and int32 accumulators far beyond
the float multiplier's range), negative zero points, a fused ReLU, per-tensor and
per-channel multipliers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import polyc
from polyc import compute as pc
from polyc.errors import ArgumentError, DTypeError, ShapeError
from polyc.ir import requant
from polyc.ops import nn, quant


def _both(kernel, inputs, name):
    """The output ``name`` from the interpreter and from the host C."""
    interp = polyc.interpret(kernel, inputs)[name]
    host = polyc.build(kernel)(**inputs)[name]
    return interp, host


def test_ties_round_to_even_and_saturate_at_both_ends():
    # multiplier 0.5 makes every odd accumulator a tie; the large ones saturate
    acc = np.array(
        [[1, 3, 5, -1, -3, -5, 7, -7, 255, 256, 257, -255, -257, 2**31 - 1, -(2**31)]],
        dtype=np.int32,
    )
    a = pc.placeholder("acc", acc.shape, "int32")
    y = nn.requantize(a, 0.5, zero_point=0, name="y")
    k = pc.kernel("ties", [y])
    want = np.array(
        [[0, 2, 2, 0, -2, -2, 4, -4, 127, 127, 127, -128, -128, 127, -128]], np.int8
    )
    ref = quant.reference(acc, 0.5)
    np.testing.assert_array_equal(ref, want)
    for got in _both(k, {"acc": acc}, "y"):
        np.testing.assert_array_equal(got, want)


def test_per_channel_negative_zero_point_relu_and_clamp():
    rng = np.random.default_rng(3)
    acc = rng.integers(-(2**20), 2**20, (2, 5, 3, 4)).astype(np.int32)
    acc[0, 0, 0, :] = [-1, 1, 3, -3]  # ties around the zero point
    m = np.array([0.5, 1e-3, 2**-10, 3e-5, 0.25], np.float32)
    a = pc.placeholder("acc", acc.shape, "int32")
    mt = pc.placeholder("m", (5,), "float32")
    outs = [
        nn.requantize(a, mt, zero_point=-7, name="plain"),
        nn.requantize(a, mt, zero_point=-7, relu=True, name="relu"),
        nn.requantize(a, mt, zero_point=12, qmin=-20, qmax=40, name="clamped"),
        nn.requantize(a, 1e-4, zero_point=-128, name="tensor"),
    ]
    k = pc.kernel("perchannel", outs)
    inputs = {"acc": acc, "m": m}
    refs = {
        "plain": quant.reference(acc, m, -7),
        "relu": quant.reference(acc, m, -7, relu=True),
        "clamped": quant.reference(acc, m, 12, -20, 40),
        "tensor": quant.reference(acc, np.float32(1e-4), -128),
    }
    assert refs["relu"].min() == -7 and refs["plain"].min() == -128
    assert list(refs["plain"][0, 0, 0]) == [-7, -7, -5, -9]  # -0.5, 0.5, 1.5, -1.5
    interp = polyc.interpret(k, inputs)
    host = polyc.build(k)(**inputs)
    for name, ref in refs.items():
        np.testing.assert_array_equal(interp[name], ref, err_msg=name)
        np.testing.assert_array_equal(host[name], ref, err_msg=name)


def test_kernel_level_requantize():
    k = polyc.ops.requantize(input=(3, 4), multiplier=True, zero_point=5, axis=0)
    acc = np.arange(-6, 6, dtype=np.int32).reshape(3, 4) * 1001
    m = np.array([0.01, 0.002, 0.3], np.float32)
    got = polyc.interpret(k, {"input": acc, "multiplier": m})["out"]
    np.testing.assert_array_equal(got, quant.reference(acc, m, 5, axis=0))


def test_the_expression_is_recognised_and_nothing_else():
    a = pc.placeholder("acc", (4,), "int32")
    y = nn.requantize(a, 0.25, zero_point=-3, relu=True)
    k = pc.kernel("m", [y])
    got = requant.match(k.statements[0].body)
    assert (got.acc.array, got.zero_point, got.qmin, got.qmax) == ("acc", -3, -3, 127)
    k2 = pc.kernel("r", [nn.relu(a)])
    assert requant.match(k2.statements[0].body) is None


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"zero_point": 200}, ArgumentError, r"zero_point=200 is outside int8"),
        ({"qmin": 10, "qmax": 5}, ArgumentError, r"range \[10, 5\] is empty"),
        ({"zero_point": 50, "qmax": 20, "relu": True}, ArgumentError, "raised qmin"),
        ({"multiplier": -1.0}, ArgumentError, "multiplier=-1.0 is not a positive"),
        ({"relu": 1}, ArgumentError, "relu=1 is not a bool"),
    ],
)
def test_requantize_argument_errors(kwargs, error, match):
    a = pc.placeholder("acc", (2, 3), "int32")
    kwargs = {"multiplier": 0.5, **kwargs}
    with pytest.raises(error, match=match):
        nn.requantize(a, **kwargs)


def test_requantize_dtype_and_shape_errors():
    with pytest.raises(DTypeError, match="requantize: x is int8 but requantize accep"):
        nn.requantize(pc.placeholder("x", (2, 3), "int8"), 0.5)
    a = pc.placeholder("acc", (2, 3), "int32")
    with pytest.raises(ShapeError, match=r"multiplier m has shape \(2,\) but axis 1"):
        nn.requantize(a, pc.placeholder("m", (2,), "float32"))


# PyTorch's quantized reference -------------------------------------------------------


@pytest.fixture(params=["qnnpack", "fbgemm"])
def engine(request):
    """The engine and the largest uint8 activation it accumulates exactly: qnnpack
    every uint8 value; fbgemm's AVX2 kernels pair products in int16 with
    saturation, which is why PyTorch's observers give it 7-bit activations
    (``reduce_range``), so its inputs stay below 128."""
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = request.param
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of quantized tensors
        yield 256 if request.param == "qnnpack" else 128
    torch.backends.quantized.engine = old


def _qtensor(xu8: np.ndarray, scale: float, zp: int) -> torch.Tensor:
    return torch._make_per_tensor_quantized_tensor(torch.from_numpy(xu8), scale, zp)


def _qweight(w: np.ndarray, scales: np.ndarray) -> torch.Tensor:
    zeros = torch.zeros(len(scales), dtype=torch.long)
    return torch._make_per_channel_quantized_tensor(
        torch.from_numpy(w), torch.from_numpy(scales.astype(np.float64)), zeros, 0
    )


def test_linear_matches_torch_quantized_linear(engine):
    """int8 ``linear`` + requantize == ``torch.ops.quantized.linear`` (per-channel
    weights, uint8 activations with a zero point, which is int8 ``x - 128``)."""
    rng = np.random.default_rng(5)
    xu = rng.integers(0, engine, (16, 40)).astype(np.uint8)
    w = rng.integers(-128, 128, (24, 40)).astype(np.int8)
    ws = rng.uniform(1e-3, 2e-2, 24)
    xs, xz, os_, oz = 0.031, 141 * engine // 256, 0.47, 77
    packed = torch.ops.quantized.linear_prepack(_qweight(w, ws), None)
    want = torch.ops.quantized.linear(_qtensor(xu, xs, xz), packed, os_, oz)
    want = want.int_repr().numpy().astype(np.int16) - 128

    x = pc.placeholder("x", (16, 40), "int8")
    wt = pc.placeholder("w", (24, 40), "int8")
    b = pc.placeholder("b", (24,), "int32")
    m = pc.placeholder("m", (24,), "float32")
    y = nn.requantize(nn.linear(x, wt, b), m, oz - 128, name="y")
    k = pc.kernel("qlinear", [y])
    inputs = {
        "x": (xu.astype(np.int16) - 128).astype(np.int8),
        "w": w,
        "b": quant.fold_zero_point(w, xz - 128),
        "m": quant.multiplier(xs, ws, os_),
    }
    for got in _both(k, inputs, "y"):
        np.testing.assert_array_equal(got.astype(np.int16), want)


def test_conv_relu_matches_torch_quantized_conv2d_relu(engine):
    rng = np.random.default_rng(6)
    xu = rng.integers(0, engine, (1, 6, 9, 9)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 6, 3, 3)).astype(np.int8)
    ws = rng.uniform(1e-3, 1e-2, 8)
    xs, xz, os_, oz = 0.05, 119 * engine // 256, 0.11, 3
    packed = torch.ops.quantized.conv2d_prepack(
        _qweight(w, ws), None, [1, 1], [0, 0], [1, 1], 1
    )
    want = torch.ops.quantized.conv2d_relu(_qtensor(xu, xs, xz), packed, os_, oz)
    want = want.int_repr().numpy().astype(np.int16) - 128

    x = pc.placeholder("x", xu.shape, "int8")
    wt = pc.placeholder("w", w.shape, "int8")
    b = pc.placeholder("b", (8,), "int32")
    m = pc.placeholder("m", (8,), "float32")
    y = nn.requantize(nn.conv2d(x, wt, b), m, oz - 128, relu=True, name="y")
    k = pc.kernel("qconv", [y])
    inputs = {
        "x": (xu.astype(np.int16) - 128).astype(np.int8),
        "w": w,
        "b": quant.fold_zero_point(w, xz - 128),
        "m": quant.multiplier(xs, ws, os_),
    }
    for got in _both(k, inputs, "y"):
        np.testing.assert_array_equal(got.astype(np.int16), want)
