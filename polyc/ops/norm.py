"""Vector norms and the normalisations over groups of channels: ``vector_norm``,
``normalize``, ``group_norm`` and ``instance_norm`` (statistics of each sample).

The group of a channel ``c`` is ``c // (C // groups)``, a quasi-affine index, so
the statistics are reductions over a channel range and the spatial dims with no
reshape. Statistics of float16 inputs are computed in float32 and the result
rounded back, as PyTorch does on CPU; the variance is the biased one.
"""

from __future__ import annotations

import math

from polyc.errors import ArgumentError, ShapeError
from polyc.ir import dtypes
from polyc.ir.expr import Expr, binary, cast, unary
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    axes,
    check_float,
    flag,
    fresh,
    number,
    same_dtype,
    shape_text,
    tensor,
)
from polyc.ops.reduce import _split


def _as(e: Expr, dt) -> Expr:
    return e if e.dtype == dt else cast(e, dt)


def vector_norm(
    input: Tensor, ord: float = 2, dim=None, keepdim: bool = False, name=None
) -> Tensor:
    """``sum(|x| ** ord) ** (1 / ord)`` over ``dim`` (all dims when None), as
    ``torch.linalg.vector_norm``: ``ord`` 2 is ``sqrt(sum(x * x))``, 1 is
    ``sum(|x|)``, ``inf``/``-inf`` the largest/smallest ``|x|``, 0 the count of
    non-zeros.

    Raises:
        ArgumentError: for a non-numeric ``ord``.
    """
    op = "vector_norm"
    x = tensor(op, input)
    dt = check_float(op, x)
    p = number(op, ord, "ord")
    ax = axes(op, dim, x.ndim)
    keepdim = flag(op, keepdim, "keepdim")
    ot = dtypes.opmath(dt)
    shape, index = _split(x, ax, keepdim)
    r = tuple(pc.reduce_axis(x.shape[d], f"r{d}") for d in ax)
    out = fresh(op, name)

    def element(ix) -> Expr:
        return _as(x[index(ix, r)], ot)

    zero = pc.const(0, ot)
    if math.isinf(p):
        red = pc.max if p > 0 else pc.min
        body = lambda *ix: red(unary("abs", element(ix)), r)  # noqa: E731
        final = lambda v: v  # noqa: E731
    elif p == 0:
        body = lambda *ix: pc.sum(  # noqa: E731
            pc.select(element(ix).ne(zero), pc.const(1, ot), zero), r
        )
        final = lambda v: v  # noqa: E731
    elif p == 1:
        body = lambda *ix: pc.sum(unary("abs", element(ix)), r)  # noqa: E731
        final = lambda v: v  # noqa: E731
    elif p == 2:
        body = lambda *ix: pc.sum(element(ix) * element(ix), r)  # noqa: E731
        final = lambda v: unary("sqrt", v)  # noqa: E731
    else:
        power = pc.const(float(p), ot)
        body = lambda *ix: pc.sum(  # noqa: E731
            binary("pow", unary("abs", element(ix)), power), r
        )
        final = lambda v: binary("pow", v, pc.const(1.0 / p, ot))  # noqa: E731
    acc = pc.compute(f"{out}_acc", shape, body, dtype=ot)
    return pc.compute(out, shape, lambda *ix: _as(final(acc[ix]), dt), dtype=dt)


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, name=None
) -> Tensor:
    """``x / max(vector_norm(x, p, dim, keepdim=True), eps)`` (``F.normalize``)."""
    x = tensor("normalize", input)
    out = fresh("normalize", name)
    n = vector_norm(x, p, dim, True, name=f"{out}_norm")
    eps = pc.const(number("normalize", eps, "eps"), x.dtype)

    def body(*ix):
        nix = tuple(0 if n.shape[d] == 1 else v for d, v in enumerate(ix))
        return x[ix] / binary("max", n[nix], eps)

    return pc.compute(out, x.shape, body)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    name: str | None = None,
) -> Tensor:
    """Normalise each sample's channel groups of ``input`` ([N, C, ...]) by their
    mean and biased variance, then scale by ``weight[c]`` and shift by ``bias[c]``
    (``F.group_norm``).

    Raises:
        ShapeError: when ``C`` is not a multiple of ``num_groups``, or a weight or
            bias is not ``[C]``.
    """
    op = "group_norm"
    x = tensor(op, input)
    check_float(op, x)
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: {x.name} has shape {shape_text(x.shape)} but {op} needs "
            "[N, C, ...] because it normalises groups of channels (dim 1). Add a "
            "batch dim."
        )
    channels = int(x.shape[1].const)
    if not isinstance(num_groups, int) or num_groups < 1 or channels % num_groups:
        raise ShapeError(
            f"{op}: num_groups={num_groups!r} does not divide the {channels} channels "
            f"of {x.name} because every group holds the same number of channels. "
            "Pass a divisor of the channel count."
        )
    _check_channels(op, x, weight, bias)
    return _grouped(op, x, num_groups, weight, bias, eps, True, name)


def _grouped(op, x, groups, weight, bias, eps, per_sample: bool, name) -> Tensor:
    """Normalise channel groups by statistics over each sample (``per_sample``) or
    over the whole batch."""
    dt = x.dtype
    eps = number(op, eps, "eps")
    per = int(x.shape[1].const) // groups
    ot = dtypes.opmath(dt)
    out = fresh(op, name)
    spatial = x.shape[2:]
    count = per * (1 if per_sample else int(x.shape[0].const))
    for s in spatial:
        count *= int(s.const)
    rc = pc.reduce_axis(per, "rc")
    rs = tuple(pc.reduce_axis(s, f"rs{k}") for k, s in enumerate(spatial))
    rn = None if per_sample else pc.reduce_axis(x.shape[0], "rn")
    raxes = (rc, *rs) if per_sample else (rn, rc, *rs)
    shape = (x.shape[0], groups) if per_sample else (groups,)

    def member(stat) -> Expr:
        n, g = stat if per_sample else (rn, stat[0])
        return _as(x[(n, g * per + rc, *rs)], ot)

    def stat_of(ix):
        """The statistics' indices for an element ``ix`` of ``x``."""
        g = ix[1] // per
        return (ix[0], g) if per_sample else (g,)

    names = "n g" if per_sample else "g"
    mean = pc.tensor(f"{out}_mean", shape, ot)
    iv = pc.indices(names)
    mean[iv] = pc.sum(member(iv), raxes)
    mean[iv] = mean[iv] / pc.const(count, ot)
    var = pc.tensor(f"{out}_var", shape, ot)
    iv = pc.indices(names)
    centred = member(iv) - mean[iv]
    var[iv] = pc.sum(centred * centred, raxes)
    var[iv] = var[iv] / pc.const(count, ot)
    rstd = pc.compute(
        f"{out}_rstd",
        shape,
        lambda *i: unary("rsqrt", var[i] + pc.const(eps, ot)),
    )

    def value(*ix):
        c, st = ix[1], stat_of(ix)
        v = (_as(x[ix], ot) - mean[st]) * rstd[st]
        if weight is not None:
            v = v * _as(weight[c], ot)
        if bias is not None:
            v = v + _as(bias[c], ot)
        return _as(v, dt)

    return pc.compute(out, x.shape, value, dtype=dt)


def batch_stat_norm(
    input: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    name: str | None = None,
) -> Tensor:
    """Normalise each channel of ``input`` ([N, C, ...]) by the mean and biased
    variance of that channel over the whole batch (batch norm with batch
    statistics, updating nothing), then scale and shift per channel."""
    op = "batch_stat_norm"
    x = tensor(op, input)
    check_float(op, x)
    _check_channels(op, x, weight, bias)
    return _grouped(op, x, int(x.shape[1].const), weight, bias, eps, False, name)


def _check_channels(op, x, weight, bias) -> None:
    channels = int(x.shape[1].const)
    for what, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        t = tensor(op, t, what)
        same_dtype(op, x, t, what)
        if t.ndim != 1 or int(t.shape[0].const) != channels:
            raise ShapeError(
                f"{op}: {what} {t.name} has shape {shape_text(t.shape)} but {x.name} "
                f"has {channels} channels because {what} holds one value per channel. "
                f"Pass a {what} of shape ({channels},)."
            )


def instance_norm(
    input: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    name: str | None = None,
) -> Tensor:
    """Normalise each channel of each sample over its spatial dims (the instance
    statistics of ``F.instance_norm`` in eval mode without running statistics):
    ``group_norm`` with one group per channel."""
    x = tensor("instance_norm", input)
    if x.ndim < 3:
        raise ArgumentError(
            f"instance_norm: {x.name} has shape {shape_text(x.shape)} but "
            "instance_norm needs [N, C, spatial...] because it normalises each "
            "channel over its spatial dims. Pass at least one spatial dim."
        )
    return group_norm(x, int(x.shape[1].const), weight, bias, eps, name)
