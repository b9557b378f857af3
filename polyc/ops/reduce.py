"""Reductions and normalisations: sum/mean/max/min, softmax, log_softmax,
layer_norm, batch_norm (inference).

Reductions over int8 accumulate and return int32, over bfloat16 float32
(``dtypes.accumulator``). float16 and bfloat16 inputs of mean, softmax and the norms
compute their statistics in float32 and round the result back, as PyTorch does on
CPU (``dtypes.opmath``); float16 ``sum`` accumulates in float16.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from polyc.errors import ArgumentError, ShapeError
from polyc.ir import dtypes
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType
from polyc.ir.expr import Expr, Index, cast, unary
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    accumulator,
    axes,
    axis,
    check_dtype,
    check_float,
    flag,
    fresh,
    number,
    same_dtype,
    sequence,
    shape_text,
    tensor,
)


def _as(e: Expr, dt: DType) -> Expr:
    return e if e.dtype == dt else cast(e, dt)


def _split(x: Tensor, ax: Sequence[int], keepdim: bool):
    """Output shape, and a function from (output indices, reduce axes) to x's."""
    shape = []
    for d in range(x.ndim):
        if d not in ax:
            shape.append(x.shape[d])
        elif keepdim:
            shape.append(1)

    def index(ix, raxes):
        out, pos, r = [], 0, 0
        for d in range(x.ndim):
            if d in ax:
                out.append(raxes[r])
                r += 1
                pos += keepdim
            else:
                out.append(ix[pos])
                pos += 1
        return tuple(out)

    return tuple(shape), index


def _reduction(op, x, dim, keepdim, name, red, dt, fn=lambda v: v) -> Tensor:
    """``out = red(fn(x))`` over ``dim`` into dtype ``dt``."""
    ax = axes(op, dim, x.ndim)
    keepdim = flag(op, keepdim, "keepdim")
    shape, index = _split(x, ax, keepdim)
    raxes = tuple(pc.reduce_axis(x.shape[d], f"r{d}") for d in ax)
    if not raxes:
        return pc.compute(fresh(op, name), x.shape, lambda *ix: _as(fn(x[ix]), dt))
    return pc.compute(
        fresh(op, name),
        shape,
        lambda *ix: red(_as(fn(x[index(ix, raxes)]), dt), raxes),
    )


def sum(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Sum over ``dim`` (an int, a tuple, or None for all); int8 sums in int32 and
    bfloat16 in float32, returned in that dtype (``dtypes.accumulator``)."""
    x = tensor("sum", input)
    dt = accumulator(check_dtype("sum", x))
    return _reduction("sum", x, dim, keepdim, name, pc.sum, dt)


def max(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Maximum over ``dim`` (values only; PyTorch's ``amax``)."""
    x = tensor("max", input)
    return _reduction("max", x, dim, keepdim, name, pc.max, check_dtype("max", x))


def min(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Minimum over ``dim`` (values only; PyTorch's ``amin``)."""
    x = tensor("min", input)
    return _reduction("min", x, dim, keepdim, name, pc.min, check_dtype("min", x))


amax, amin = max, min


def _count(x: Tensor, ax: Sequence[int], dt: DType) -> Expr:
    """The number of elements over ``ax`` as a value of ``dt``."""
    n = Aff(const=1)
    for d in ax:
        n = x.shape[d] * n
    return pc.const(n.const, dt) if n.is_constant else cast(Index(n), dt)


def _scaled_sum(op, x, ax, keepdim, name, dt, fn=lambda v: v) -> Tensor:
    """``sum(fn(x)) / count`` over ``ax`` in dtype ``dt`` (two updates, one array)."""
    s = _reduction(op, x, ax, keepdim, name, pc.sum, dt, fn)
    ix = pc.indices(" ".join(f"i{d}" for d in range(len(s.shape))))
    s[ix] = s[ix] / _count(x, ax, dt)
    return s


def mean(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Arithmetic mean over ``dim`` (float tensors; float16 sums in float32)."""
    x = tensor("mean", input)
    dt = check_float("mean", x)
    ax = axes("mean", dim, x.ndim)
    out = fresh("mean", name)
    ot = dtypes.opmath(dt)
    inner = out if ot == dt else f"{out}_{ot}"
    m = _scaled_sum("mean", x, ax, keepdim, inner, ot, lambda v: _as(v, ot))
    if ot == dt:
        return m
    return pc.compute(out, m.shape, lambda *ix: cast(m[ix], dt))


def _drop(ix: Sequence, d: int) -> tuple:
    return tuple(ix[:d]) + tuple(ix[d + 1 :])


def _stable(op: str, input: Tensor, dim: int, name) -> tuple:
    """The shared part of softmax and log_softmax: the max along ``dim``, the
    shifted exponentials and their sum.

    Returns ``(x, out name, dtype, dim, shifted(ix), exp tensor, sum tensor)``.
    """
    x = tensor(op, input)
    dt = check_float(op, x)
    if dim is None:
        raise ArgumentError(
            f"{op}: dim=None is ambiguous because {op} normalises along one axis. "
            "Pass dim explicitly, e.g. dim=-1."
        )
    d = axis(op, dim, x.ndim)
    out = fresh(op, name)
    ot = dtypes.opmath(dt)
    mx = _reduction(op, x, d, False, f"{out}_max", pc.max, dt)

    def shifted(ix):
        return _as(x[ix], ot) - _as(mx[_drop(ix, d)], ot)

    e = pc.compute(f"{out}_exp", x.shape, lambda *ix: unary("exp", shifted(ix)))
    s = _reduction(op, e, d, False, f"{out}_sum", pc.sum, ot)
    return x, out, dt, d, shifted, e, s


def softmax(input: Tensor, dim: int = -1, name: str | None = None) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``dim`` (numerically stable)."""
    x, out, dt, d, _, e, s = _stable("softmax", input, dim, name)
    return pc.compute(
        out, x.shape, lambda *ix: _as(e[ix] / s[_drop(ix, d)], dt), dtype=dt
    )


def log_softmax(input: Tensor, dim: int = -1, name: str | None = None) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``dim``."""
    x, out, dt, d, shifted, _, s = _stable("log_softmax", input, dim, name)
    return pc.compute(
        out,
        x.shape,
        lambda *ix: _as(shifted(ix) - unary("log", s[_drop(ix, d)]), dt),
        dtype=dt,
    )


def layer_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    name: str | None = None,
) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims (biased variance), then
    scale by ``weight`` and shift by ``bias`` (both of ``normalized_shape``).

    Raises:
        ShapeError: when the trailing dims, weight or bias do not match.
    """
    op = "layer_norm"
    x = tensor(op, input)
    dt = check_float(op, x)
    norm = (
        (normalized_shape,)
        if isinstance(normalized_shape, int)
        else sequence(op, normalized_shape, "normalized_shape")
    )
    k = len(norm)
    if k == 0 or k > x.ndim or any(a != b for a, b in zip(x.shape[-k:], norm)):
        raise ShapeError(
            f"{op}: normalized_shape {tuple(norm)} does not match the trailing dims of "
            f"{x.name} {shape_text(x.shape)} because layer_norm normalises over them. "
            "Pass the trailing dims, e.g. normalized_shape="
            f"{shape_text(x.shape[-builtins.min(builtins.max(k, 1), x.ndim) :])}."
        )
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            t = tensor(op, t, what)
            same_dtype(op, x, t, what)
            if t.shape != x.shape[-k:]:
                raise ShapeError(
                    f"{op}: {what} {t.name} has shape {shape_text(t.shape)} but "
                    f"normalized_shape is {shape_text(x.shape[-k:])} because the "
                    f"{what} applies element-wise over it. Pass a {what} of that shape."
                )
    eps = number(op, eps, "eps")
    out = fresh(op, name)
    ot = dtypes.opmath(dt)
    ax = tuple(range(x.ndim - k, x.ndim))
    lead = x.ndim - k
    mu = _scaled_sum(op, x, ax, False, f"{out}_mean", ot, lambda v: _as(v, ot))

    def centred(ix):
        return _as(x[ix], ot) - mu[ix[:lead]]

    def sq(v):
        return v * v

    var = pc.tensor(f"{out}_var", mu.shape, ot)
    raxes = tuple(pc.reduce_axis(x.shape[d], f"r{d}") for d in ax)
    iv = pc.indices(" ".join(f"i{d}" for d in range(lead)))
    var[iv] = pc.sum(sq(centred(tuple(iv) + raxes)), raxes)
    var[iv] = var[iv] / _count(x, ax, ot)
    # once per row, as torch does: per element it was a transcendental per lane
    # (on edge-npu 16 of the vector unit's cycles per 16 elements, against 2 for
    # the multiply and subtract it leaves)
    rstd = pc.compute(
        f"{out}_rstd", mu.shape, lambda *r: unary("rsqrt", var[r] + pc.const(eps, ot))
    )

    def value(*ix):
        v = centred(ix) * rstd[ix[:lead]]
        if weight is not None:
            v = v * _as(weight[ix[lead:]], ot)
        if bias is not None:
            v = v + _as(bias[ix[lead:]], ot)
        return _as(v, dt)

    return pc.compute(out, x.shape, value, dtype=dt)


def batch_norm(
    input: Tensor,
    running_mean: Tensor,
    running_var: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
    name: str | None = None,
) -> Tensor:
    """Inference-mode batch norm over dim 1 of ``input`` ([N, C, ...]):
    ``(x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]``.

    Raises:
        ArgumentError: for ``training=True`` (only inference is supported).
        ShapeError: when a per-channel tensor is not ``[C]``.
    """
    op = "batch_norm"
    x = tensor(op, input)
    dt = check_float(op, x)
    if training:
        raise ArgumentError(
            f"{op}: training=True is not supported because polyc compiles inference "
            "graphs (running statistics are inputs). Pass training=False."
        )
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: {x.name} has shape {shape_text(x.shape)} but batch_norm needs "
            "[N, C, ...] because it normalises per channel (dim 1). Add a batch dim."
        )
    channels = x.shape[1]
    running_mean = tensor(op, running_mean, "running_mean")
    running_var = tensor(op, running_var, "running_var")
    eps = number(op, eps, "eps")
    params = {"running_mean": running_mean, "running_var": running_var}
    params.update(weight=weight, bias=bias)
    for what, t in params.items():
        if t is None:
            continue
        t = tensor(op, t, what)
        same_dtype(op, x, t, what)
        if t.ndim != 1 or t.shape[0] != channels:
            raise ShapeError(
                f"{op}: {what} {t.name} has shape {shape_text(t.shape)} but {x.name} "
                f"has {channels} channels (dim 1) because {what} holds one value per "
                f"channel. Pass a {what} of shape ({channels},)."
            )
    ot = dtypes.opmath(dt)
    out = fresh(op, name)
    # once per channel, as for layer_norm's rows
    rstd = pc.compute(
        f"{out}_rstd",
        (channels,),
        lambda c: unary("rsqrt", _as(running_var[c], ot) + pc.const(eps, ot)),
    )

    def value(*ix):
        c = ix[1]
        # rstd read first: the program computes it before the input's producer,
        # so the normalisation stays next to that producer, an epilogue it can
        # fuse with (the product is the same either way round)
        v = rstd[c] * (_as(x[ix], ot) - _as(running_mean[c], ot))
        if weight is not None:
            v = v * _as(weight[c], ot)
        if bias is not None:
            v = v + _as(bias[c], ot)
        return _as(v, dt)

    return pc.compute(out, x.shape, value, dtype=dt)
