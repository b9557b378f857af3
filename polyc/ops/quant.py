"""int8 quantization: the requantization epilogue of int8 contractions, and the
numpy reference of the same arithmetic.

An int8 ``conv2d``/``linear``/``matmul`` accumulates and returns int32;
:func:`requantize` brings it back to int8 as PyTorch's quantized kernels do
(float32 multiplier, round half to even, zero point, saturation; the arithmetic
is written once, in :mod:`polyc.ir.requant`)::

    acc = nn.conv2d(x, w, b)                       # int8 x int8 -> int32
    y = quant.requantize(acc, m, zero_point=-128, relu=True)   # int8

It is an element-wise statement on the accumulator, so the accelerator scheduler
fuses it into the contraction's layer like a bias or a ReLU: the int32
accumulator stays on chip and only int8 goes to DRAM. It runs on the vector unit,
or in the MAC array's output path when the config says ``[mac_array] requantize
= true``.

The numpy side (:func:`multiplier`, :func:`fold_zero_point`, :func:`reference`)
computes the parameters as PyTorch does and is the reference the tests compare
the interpreter, the host C and the simulator with, bit for bit.
"""

from __future__ import annotations

import numpy as np

from polyc.errors import ArgumentError, ShapeError
from polyc.ir import dtypes, requant
from polyc.ir.expr import Const
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import axis, check_dtype, flag, fresh, shape_text, tensor

QMIN, QMAX = requant.QMIN, requant.QMAX


def requantize(
    input: Tensor,
    multiplier: float | Tensor,
    zero_point: int = 0,
    *,
    axis: int = 1,
    qmin: int = QMIN,
    qmax: int = QMAX,
    relu: bool = False,
    name: str | None = None,
) -> Tensor:
    """``int8(clamp(rint(float32(input) * multiplier) + zero_point, qmin, qmax))``.

    Args:
        input: the int32 accumulator of an int8 contraction.
        multiplier: ``input_scale * weight_scale / output_scale`` (see
            :func:`multiplier`): a Python float for one per tensor, or a 1-D
            float32 Tensor with one per channel along ``axis``.
        zero_point: the output zero point, in [-128, 127].
        axis: the channel axis of a per-channel multiplier (NCHW: 1).
        qmin, qmax: the output activation range, within [-128, 127] (a fused
            clamp: an int8 accelerator saturates to it for free).
        relu: fuse a ReLU: the range starts at the zero point (real 0).

    Raises:
        DTypeError: ``input`` is not int32, or the multiplier Tensor not float32.
        ShapeError: the multiplier Tensor does not have one value per channel.
        ArgumentError: a zero point or range outside int8, or an empty range.
    """
    op = "requantize"
    input = tensor(op, input)
    check_dtype(op, input, ("int32",))
    relu = flag(op, relu, "relu")
    zp, lo, hi = _range(op, zero_point, qmin, qmax, relu)
    if isinstance(multiplier, Tensor):
        m = multiplier
        check_dtype(op, m, ("float32",))
        d = _channel_axis(op, input, m, axis)

        def scale(ix):
            return m[ix[d]]

    else:
        value = _positive(op, multiplier)

        def scale(ix):
            return Const(value, dtypes.float32)

    return pc.compute(
        fresh(op, name),
        input.shape,
        lambda *ix: requant.build(input[ix], scale(ix), zp, lo, hi),
    )


def _int(op: str, value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(
            f"{op}: {what}={value!r} is not an int because int8 values are "
            "integers. Pass an int in [-128, 127]."
        )
    v = int(value)
    if not QMIN <= v <= QMAX:
        raise ArgumentError(
            f"{op}: {what}={v} is outside int8 because int8 holds -128..127. Pass "
            "an int in [-128, 127] (a uint8 zero point z is z - 128 in int8)."
        )
    return v


def _range(op, zero_point, qmin, qmax, relu) -> tuple[int, int, int]:
    zp = _int(op, zero_point, "zero_point")
    lo, hi = _int(op, qmin, "qmin"), _int(op, qmax, "qmax")
    if relu:
        lo = max(lo, zp)
    if lo > hi:
        raise ArgumentError(
            f"{op}: the output range [{lo}, {hi}] is empty because qmin > qmax"
            f"{' after the ReLU raised qmin to the zero point' if relu else ''}. "
            "Pass qmin <= qmax."
        )
    return zp, lo, hi


def _positive(op: str, value: object) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value <= 0:
        raise ArgumentError(
            f"{op}: multiplier={value!r} is not a positive finite number because it "
            "is input_scale * weight_scale / output_scale. Pass a positive float or "
            "a float32 Tensor of one multiplier per channel."
        )
    return float(np.float32(value))


def _channel_axis(op: str, input: Tensor, m: Tensor, dim: object) -> int:
    d = axis(op, dim, input.ndim, "axis")
    if m.ndim != 1 or m.shape[0] != input.shape[d]:
        raise ShapeError(
            f"{op}: multiplier {m.name} has shape {shape_text(m.shape)} but axis {d} "
            f"of {input.name} {shape_text(input.shape)} is {input.shape[d]} because "
            "a per-channel multiplier has one value per channel. Pass a multiplier "
            f"of shape ({input.shape[d]},), or a float for one per tensor."
        )
    return d


# numpy: the parameters and the reference ---------------------------------------------


def multiplier(input_scale, weight_scale, output_scale) -> np.ndarray:
    """``input_scale * weight_scale / output_scale`` in float32, as PyTorch's
    quantized conv and linear compute it (each scale rounded to float32 first);
    ``weight_scale`` may be an array (per channel). Returns a float32 array."""
    a = np.float32(input_scale)
    w = np.asarray(weight_scale, dtype=np.float32)
    return np.asarray((a * w) / np.float32(output_scale), dtype=np.float32)


def fold_zero_point(weight, input_zero_point: int, bias=None) -> np.ndarray:
    """The int32 bias that makes an int8 contraction over ``x`` compute the one over
    ``x - input_zero_point``: ``bias - input_zero_point * sum(weight[o, ...])``
    per output channel ``o`` (``weight`` is ``[out, ...]``: OIHW or linear's
    ``[out, in]``). Exact where every tap reads the input (no zero padding: a
    padded tap would need the zero point, not 0)."""
    w = np.asarray(weight).astype(np.int64)
    sums = w.reshape(w.shape[0], -1).sum(axis=1)
    b = np.zeros(w.shape[0], np.int64) if bias is None else np.asarray(bias, np.int64)
    return (b - int(input_zero_point) * sums).astype(np.int32)


def reference(
    acc,
    multiplier,
    zero_point: int = 0,
    qmin: int = QMIN,
    qmax: int = QMAX,
    *,
    axis: int = 1,
    relu: bool = False,
) -> np.ndarray:
    """The requantization in numpy (the arithmetic of :mod:`polyc.ir.requant`):
    int32 ``acc``, a float32 multiplier per tensor or per channel along ``axis``.
    Returns an int8 array."""
    acc = np.asarray(acc, dtype=np.int32)
    m = np.asarray(multiplier, dtype=np.float32)
    if m.ndim == 1:
        shape = [1] * acc.ndim
        shape[axis] = m.shape[0]
        m = m.reshape(shape)
    lo = max(qmin, zero_point) if relu else qmin
    v = np.rint(acc.astype(np.float32) * m) + np.float32(zero_point)
    v = np.minimum(np.maximum(v, np.float32(lo)), np.float32(qmax))
    return v.astype(np.int8)
