"""Lowerings of quantized graphs: the int8 nodes :mod:`polyc.frontends.torch.quant`
folds, and the quantize and dequantize nodes it leaves, as PyTorch's reference
(``torch.ao.quantization.fx._decomposed``) computes them.

- :func:`quantize` ``int8(clamp(rint(x * float32(1 / scale)) + zero_point, qmin,
  qmax))`` and :func:`dequantize` ``(float32(q) - zero_point) * scale`` are the
  reference's own arithmetic in float32, so a graph part that stays in float
  computes what the converted model computes.
- ``int8_conv2d`` / ``int8_linear``: an int8 x int8 contraction into int32, the
  float bias quantized to the accumulator's scale ``input_scale * weight_scale``
  (round half to even), the input zero point folded into it (padding is filled
  with the zero point, real 0), then :func:`polyc.ops.quant.requantize` with the
  float32 multiplier ``input_scale * weight_scale / output_scale`` per output
  channel. The reference computes the same sum in float32 from the dequantized
  values; the two differ only where float rounding or the bias's rounding moves a
  value across a rounding boundary, by one int8 step at most in practice.
- ``int8_matmul``: both operands int8 activations with their zero points, the
  cross terms taken off the int32 product with the row and column sums.
- ``int8_elementwise``: dequantize the int8 leaves, the float32 ops, quantize: one
  statement, the reference's arithmetic (a ReLU or clamp last becomes the
  quantize's range, which is exact: scaling and rounding are monotone).
"""

from __future__ import annotations

import numpy as np

from polyc.frontends.torch import quant as q
from polyc.frontends.torch.registry import lowering
from polyc.ir import dtypes
from polyc.ir.expr import Const, Expr, binary, cast, unary
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops import nn

_F32 = dtypes.float32
_INT32 = (np.iinfo(np.int32).min, np.iinfo(np.int32).max)


def _f(value: float) -> Const:
    return Const(float(np.float32(value)), _F32)


def quantize(v: Expr, scale: float, zero_point: int, qmin: int, qmax: int) -> Expr:
    """The reference's quantize of a float32 value: int8."""
    v = binary("mul", cast(v, _F32), _f(1.0 / scale))
    v = binary("add", unary("rint", v), _f(zero_point))
    v = binary("min", binary("max", v, _f(qmin)), _f(qmax))
    return cast(v, dtypes.int8)


def dequantize(v: Expr, scale, zero_point) -> Expr:
    """The reference's dequantize of an int8 value: float32. ``scale`` and
    ``zero_point`` are numbers or float32 expressions (per channel)."""
    s = scale if isinstance(scale, Expr) else _f(scale)
    z = zero_point if isinstance(zero_point, Expr) else _f(zero_point)
    return binary("mul", binary("sub", cast(v, _F32), z), s)


# the reference's nodes ---------------------------------------------------------------


@lowering(q.Q)
def quantize_per_tensor(ctx, x, scale, zero_point, qmin, qmax, dtype):
    return pc.compute(
        ctx.name,
        x.shape,
        lambda *ix: quantize(x[ix], scale, zero_point, qmin, qmax),
    )


@lowering(q.DQ)
def dequantize_per_tensor(ctx, x, scale, zero_point, qmin, qmax, dtype, **kw):
    _float_result(ctx, kw)
    return pc.compute(
        ctx.name, x.shape, lambda *ix: dequantize(x[ix], scale, zero_point)
    )


@lowering(q.DQ_CH)
def dequantize_per_channel(ctx, x, scales, zero_points, axis, qmin, qmax, dtype, **kw):
    _float_result(ctx, kw)
    d = axis % x.ndim
    s = nn.cast(scales, "float32", name=ctx.sub("scale"))
    z = None
    if zero_points is not None:
        z = nn.cast(zero_points, "float32", name=ctx.sub("zero_point"))

    def body(*ix):
        return dequantize(x[ix], s[ix[d]], _f(0) if z is None else z[ix[d]])

    return pc.compute(ctx.name, x.shape, body)


@lowering(q.Q_CH)
def quantize_per_channel(ctx, x, *args):
    raise ctx.error(
        "a per-channel quantize of a computed tensor is not supported because polyc "
        "quantizes activations per tensor (weights, which are constants, may be "
        "per channel)",
        "Quantize activations per tensor",
    )


def _float_result(ctx, kw) -> None:
    out = kw.get("out_dtype")
    if out is not None and str(out) != "torch.float32":
        raise ctx.error(
            f"dequantizing to {out} is not supported because the reference "
            "dequantizes to float32 here",
            "Dequantize to float32",
        )


# folded int8 nodes -------------------------------------------------------------------


@lowering("int8_conv2d")
def int8_conv2d(ctx, x, weight, weight_scale, bias, **p):
    w = _int8_weight(ctx, weight)
    bias32, mult = _bias_and_multiplier(ctx, w, weight_scale, bias, p)
    ph, pw = p["padding"]
    zp = p["x_zero_point"]
    if ph or pw:  # the reference pads real 0, which is the zero point
        x = nn.pad(x, (pw, pw, ph, ph), value=zp, name=ctx.sub("pad"))
    acc = nn.conv2d(
        x,
        weight,
        ctx.new_constant("bias", bias32),
        stride=p["stride"],
        dilation=p["dilation"],
        groups=p["groups"],
        name=ctx.sub("acc"),
    )
    return _requantize(ctx, acc, mult, p, axis=1)


@lowering("int8_linear")
def int8_linear(ctx, x, weight, weight_scale, bias, **p):
    w = _int8_weight(ctx, weight)
    bias32, mult = _bias_and_multiplier(ctx, w, weight_scale, bias, p)
    acc = nn.linear(x, weight, ctx.new_constant("bias", bias32), name=ctx.sub("acc"))
    return _requantize(ctx, acc, mult, p, axis=acc.ndim - 1)


def _int8_weight(ctx, weight: Tensor) -> np.ndarray:
    w = ctx.constant(weight)
    if w is None or w.dtype != np.int8:
        raise ctx.error(
            "the weight is not a constant int8 tensor, which the fold assumed",
            "This is a bug in polyc's quantized import; please report it",
        )
    return w


def _bias_and_multiplier(ctx, w, weight_scale, bias, p):
    """The int32 bias (the float bias quantized, the input zero point folded in)
    and the float32 requantization multipliers, one per output channel."""
    from polyc.ops import quant

    out_channels = w.shape[0]
    if isinstance(weight_scale, Tensor):
        scales = ctx.constant(weight_scale).astype(np.float64).reshape(-1)
    else:
        scales = np.full(out_channels, float(weight_scale))
    acc_scale = np.float64(np.float32(p["x_scale"])) * scales
    qbias = np.zeros(out_channels, np.int64)
    if bias is not None:
        b = ctx.constant(bias).astype(np.float64)
        qbias = np.rint(b / acc_scale)
    sums = w.reshape(out_channels, -1).astype(np.int64).sum(axis=1)
    folded = qbias - int(p["x_zero_point"]) * sums
    if np.any(folded < _INT32[0]) or np.any(folded > _INT32[1]):
        o = int(np.flatnonzero((folded < _INT32[0]) | (folded > _INT32[1]))[0])
        raise ctx.error(
            f"the bias of output channel {o} is {folded[o]:.4g} accumulator units, "
            "outside int32, because its weight scale is tiny "
            f"({scales[o]:.3g}: the channel's weights are near zero)",
            "Remove or retrain the dead channel, or leave this layer unquantized",
        )
    mult = quant.multiplier(p["x_scale"], scales, p["out_scale"])
    return folded.astype(np.int32), mult


def _requantize(ctx, acc: Tensor, mult: np.ndarray, p, axis: int) -> Tensor:
    m = float(mult[0]) if np.all(mult == mult[0]) else ctx.new_constant("scale", mult)
    return nn.requantize(
        acc,
        m,
        p["out_zero_point"],
        axis=axis,
        qmin=p["qmin"],
        qmax=p["qmax"],
        name=ctx.name,
    )


@lowering("int8_matmul")
def int8_matmul(ctx, a, b, **p):
    """``sum((a - za) * (b - zb)) = sum(a * b) - zb * rowsum(a) - za * colsum(b)
    + K * za * zb``: an int8 matmul into int32, the zero points' terms, then the
    requantization (one multiplier: both operands are per tensor)."""
    from polyc.ops import quant

    acc = nn.matmul(a, b, name=ctx.sub("acc"))
    za, zb = int(p["a_zero_point"]), int(p["b_zero_point"])
    if za or zb:
        k = int(a.shape[-1].const)
        rows = nn.sum(a, -1, name=ctx.sub("rowsum")) if zb else None
        cols = nn.sum(b, -2, name=ctx.sub("colsum")) if za else None
        i32 = dtypes.int32

        def body(*ix):
            v = acc[ix]
            if zb:
                v = binary("sub", v, binary("mul", Const(zb, i32), rows[ix[:-1]]))
            if za:
                col = cols[(*ix[:-2], ix[-1])]
                v = binary("sub", v, binary("mul", Const(za, i32), col))
            if za and zb:
                v = binary("add", v, Const(k * za * zb, i32))
            return v

        acc = pc.compute(ctx.sub("centred"), acc.shape, body)
    mult = quant.multiplier(p["a_scale"], p["b_scale"], p["out_scale"])
    return nn.requantize(
        acc,
        float(mult),
        p["out_zero_point"],
        axis=acc.ndim - 1,
        qmin=p["qmin"],
        qmax=p["qmax"],
        name=ctx.name,
    )


@lowering("int8_elementwise")
def int8_elementwise(ctx, leaves, expr, **p):
    shape = leaves[0].shape
    scale, zp, lo, hi = p["out_scale"], p["out_zero_point"], p["qmin"], p["qmax"]
    while expr[0] == "clamp":  # the last clamp (a ReLU) folds into the range, exactly
        lo, hi = q.clamp_range(expr[2], expr[3], scale, zp, lo, hi)
        expr = expr[1]

    def body(*ix):
        return quantize(_evaluate(expr, [t[ix] for t in leaves]), scale, zp, lo, hi)

    return pc.compute(ctx.name, shape, body)


def _evaluate(e, loads) -> Expr:
    """The float32 expression of a folded region (tuples made by quant._region)."""
    kind = e[0]
    if kind == "const":
        return _f(e[1])
    if kind == "dq":
        return dequantize(loads[e[1]], e[2], e[3])
    if kind == "clamp":
        v = _evaluate(e[1], loads)
        if e[2] is not None:
            v = binary("max", v, _f(e[2]))
        if e[3] is not None:
            v = binary("min", v, _f(e[3]))
        return v
    a, b = _evaluate(e[1], loads), _evaluate(e[2], loads)
    if kind == "mul":
        return binary("mul", a, b)
    if e[3] != 1.0:
        b = binary("mul", b, _f(e[3]))
    return binary(kind, a, b)
