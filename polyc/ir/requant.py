"""int8 requantization: the one expression every backend computes, and its recogniser.

An int8 convolution or matmul accumulates in int32; its epilogue brings the
accumulator back to int8. polyc uses the arithmetic of PyTorch's quantized CPU
kernels (fbgemm, and qnnpack's fp32 requantization), which is also what an
accelerator's output stage with a float32 multiplier computes::

    q = int8(min(max(rint(float32(acc) * multiplier) + zero_point, qmin), qmax))

- ``float32(acc)``: the int32 accumulator converted to float32 (round to nearest
  even beyond 2**24, as ``_mm256_cvtepi32_ps`` and numpy's ``astype`` do);
- ``multiplier``: float32, per tensor (a constant) or per output channel (a
  float32 array indexed by the channel), ``input_scale * weight_scale /
  output_scale`` computed in float32 (:func:`polyc.ops.quant.multiplier`);
- ``rint``: round half to even, C's ``nearbyintf`` in the default rounding mode
  (fbgemm's ``nearbyint``/``lrintf``, qnnpack's magic-number rounding);
- the zero point is added and the range clamped in float32, which equals the
  integer clamp of the reference wherever that one is defined: below 2**24 the
  float sums are exact, and beyond it both saturate;
- ``[qmin, qmax]`` is the output activation range: ``[-128, 127]`` plain,
  ``[zero_point, 127]`` with a fused ReLU.

gemmlowp/TFLite (and the accelerators built for TFLite models) instead multiply by
an int32 fixed-point multiplier with a rounding doubling high multiply and a
rounding right shift (ties away from zero); its results differ from the float form
by one unit on some inputs, so polyc keeps one form, the one PyTorch's reference
computes, and is bit-exact with it.

:func:`build` writes the expression; :func:`match` recognises it in a statement
body (the scheduler fuses a matched epilogue into the MAC array's output path when
the config's ``[mac_array] requantize`` says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.ir import dtypes
from polyc.ir.expr import Binary, Cast, Const, Expr, Load, Unary, binary, cast, unary

#: the int8 range
QMIN, QMAX = -128, 127


def build(acc: Expr, multiplier: Expr, zero_point: int, qmin: int, qmax: int) -> Expr:
    """The requantization of the int32 value ``acc`` (see the module docstring).

    Args:
        acc: an int32 expression (the accumulator element).
        multiplier: a float32 expression (a constant, or a load of the channel's).
        zero_point: the output zero point, in ``[qmin, qmax]``.
        qmin, qmax: the output range, within ``[-128, 127]``.
    """
    f32 = dtypes.float32
    v = binary("mul", cast(acc, f32), multiplier)
    v = binary("add", unary("rint", v), Const(float(zero_point), f32))
    v = binary("max", v, Const(float(qmin), f32))
    v = binary("min", v, Const(float(qmax), f32))
    return cast(v, dtypes.int8)


@dataclass(frozen=True)
class Requant:
    """A recognised requantization: ``acc`` (the int32 load), its multiplier (a
    float32 Const or Load), the zero point and the clamp range."""

    acc: Load
    multiplier: Expr
    zero_point: int
    qmin: int
    qmax: int


def match(body: Expr) -> Requant | None:
    """The parts of ``body`` when it is exactly :func:`build`'s expression over an
    int32 load, else None."""
    if not (isinstance(body, Cast) and body.dtype == dtypes.int8):
        return None
    hi = body.x
    if not _is(hi, "min") or not _const(hi.b):
        return None
    lo = hi.a
    if not _is(lo, "max") or not _const(lo.b):
        return None
    add = lo.a
    if not _is(add, "add") or not _const(add.b):
        return None
    rnd = add.a
    if not (isinstance(rnd, Unary) and rnd.op == "rint"):
        return None
    mul = rnd.x
    if not _is(mul, "mul"):
        return None
    conv, m = mul.a, mul.b
    if not (isinstance(conv, Cast) and isinstance(conv.x, Load)):
        return None
    if conv.x.dtype != dtypes.int32 or not isinstance(m, (Const, Load)):
        return None
    zp, qmin, qmax = add.b.value, lo.b.value, hi.b.value
    if not all(float(v).is_integer() for v in (zp, qmin, qmax)):
        return None
    return Requant(conv.x, m, int(zp), int(qmin), int(qmax))


def _is(e: Expr, op: str) -> bool:
    return isinstance(e, Binary) and e.op == op and e.dtype == dtypes.float32


def _const(e: Expr) -> bool:
    return isinstance(e, Const) and e.dtype == dtypes.float32
