"""Scans and index reductions: cumsum, cumprod (affine scans), argmax, argmin and
max/min with indices.

A scan is two definitions of one tensor: the first element along ``dim`` copies
the input, every later one combines its predecessor with the input::

    out[.., 0, ..] = x[.., 0, ..]
    out[.., j, ..] = out[.., j - 1, ..] + x[.., j, ..]      (j >= 1)

so the sequential dependence is an ordinary flow dependence on ``out`` that every
schedule must respect (the scan dim cannot be parallel or reordered). float16 scans
accumulate in float32 and round each element back, as PyTorch does on CPU.

The index reductions take the maximum (or minimum) first and then the smallest
index that holds it: PyTorch's rule that the first of equal elements wins. Over
floats a third reduction finds the first NaN, which wins when there is one (PyTorch
orders NaN above and below everything).
"""

from __future__ import annotations

from polyc.ir import dtypes
from polyc.ir.expr import Expr, cast, select
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import SIGNED, axis, check_dtype, flag, fresh, tensor
from polyc.ops.reduce import amax, amin
from polyc.ops.shape import reshape


def _scan(op: str, combine, input: Tensor, dim: int, name) -> Tensor:
    x = tensor(op, input)
    dt = check_dtype(op, x, SIGNED)
    d = axis(op, dim, x.ndim)
    out = fresh(op, name)
    acc_dt = dtypes.opmath(dt)
    acc = pc.tensor(out if acc_dt == dt else f"{out}_acc", x.shape, acc_dt)
    ix = pc.indices(" ".join(f"i{k}" for k in range(x.ndim)))
    before = tuple(v - 1 if k == d else v for k, v in enumerate(ix))

    def value(idx) -> Expr:
        v = x[idx]
        return v if v.dtype == acc_dt else cast(v, acc_dt)

    acc.set(ix, value(ix), where=ix[d] < 1)
    acc.set(ix, combine(acc[before], value(ix)), where=ix[d] >= 1)
    if acc_dt == dt:
        return acc
    return pc.compute(out, x.shape, lambda *i: cast(acc[i], dt))


def cumsum(input: Tensor, dim: int, name: str | None = None) -> Tensor:
    """Running sum along ``dim`` (``torch.cumsum``; cast first for another dtype)."""
    return _scan("cumsum", lambda a, b: a + b, input, dim, name)


def cumprod(input: Tensor, dim: int, name: str | None = None) -> Tensor:
    """Running product along ``dim`` (``torch.cumprod``)."""
    return _scan("cumprod", lambda a, b: a * b, input, dim, name)


def _first(op: str, x: Tensor, d: int, keepdim: bool, name: str, hit) -> Tensor:
    """The smallest index along ``d`` where ``hit(x element, outer indices)``
    holds, or the size of ``d`` where it never does (int64)."""
    size = x.shape[d]
    r = pc.reduce_axis(size, f"r{d}")

    def body(*ix):
        if keepdim:
            outer = tuple(ix[:d]) + tuple(ix[d + 1 :])
            src = tuple(ix[:d]) + (r,) + tuple(ix[d + 1 :])
        else:
            outer = tuple(ix)
            src = tuple(ix[:d]) + (r,) + tuple(ix[d:])
        found = hit(x[src], outer)
        none = pc.const(int(size.const), dtypes.int64)
        return pc.min(select(found, cast(r, dtypes.int64), none), r)

    shape = [s for k, s in enumerate(x.shape) if k != d]
    if keepdim:
        shape.insert(d, 1)
    return pc.compute(name, tuple(shape), body, dtype=dtypes.int64)


def _index_of(op: str, x: Tensor, best: Tensor, d: int, keepdim: bool, name):
    """The smallest index along ``d`` where ``x`` equals ``best``; for floats, the
    first NaN when there is one (PyTorch orders NaN above and below everything,
    whatever the maximum's own NaN handling)."""

    def equal(v, outer):
        return v.eq(best[outer] if best.ndim else best[()])

    if not x.dtype.is_float:
        return _first(op, x, d, keepdim, name, equal)
    nan = _first(op, x, d, keepdim, f"{name}_nan", lambda v, _: v.ne(v))
    value = _first(op, x, d, keepdim, f"{name}_value", equal)
    size = pc.const(int(x.shape[d].const), dtypes.int64)
    return pc.compute(
        name, nan.shape, lambda *ix: select(nan[ix] < size, nan[ix], value[ix])
    )


def _arg(op: str, best_fn, input: Tensor, dim, keepdim, name) -> Tensor:
    x = tensor(op, input)
    check_dtype(op, x, SIGNED)
    keepdim = flag(op, keepdim, "keepdim")
    out = fresh(op, name)
    if dim is None:
        flat = reshape(x, [-1], name=f"{out}_flat")
        if not keepdim:
            return _arg(op, best_fn, flat, 0, False, out)
        idx = _arg(op, best_fn, flat, 0, False, f"{out}_flat_index")
        return reshape(idx, [1] * x.ndim, name=out)
    d = axis(op, dim, x.ndim)
    best = best_fn(x, d, False, name=f"{out}_best")
    return _index_of(op, x, best, d, keepdim, out)


def argmax(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Index of the maximum along ``dim`` (of the flattened tensor when None), the
    first one among equals (``torch.argmax``; int64)."""
    return _arg("argmax", amax, input, dim, keepdim, name)


def argmin(input: Tensor, dim=None, keepdim: bool = False, name=None) -> Tensor:
    """Index of the minimum along ``dim``, the first among equals (int64)."""
    return _arg("argmin", amin, input, dim, keepdim, name)


def _with_indices(op: str, best_fn, input: Tensor, dim: int, keepdim, name):
    x = tensor(op, input)
    check_dtype(op, x, SIGNED)
    keepdim = flag(op, keepdim, "keepdim")
    d = axis(op, dim, x.ndim)
    out = fresh(op, name)
    best = best_fn(x, d, False, name=f"{out}_values" if keepdim else out)
    index = _index_of(op, x, best, d, keepdim, f"{out}_indices")
    if keepdim:
        shape = list(best.shape)
        shape.insert(d, 1)
        best = pc.compute(
            out,
            tuple(shape),
            lambda *ix: best[tuple(ix[:d]) + tuple(ix[d + 1 :])],
        )
    return best, index


def max_with_indices(input: Tensor, dim: int, keepdim: bool = False, name=None):
    """``(values, indices)`` of the maximum along ``dim`` (``torch.max(x, dim)``)."""
    return _with_indices("max", amax, input, dim, keepdim, name)


def min_with_indices(input: Tensor, dim: int, keepdim: bool = False, name=None):
    """``(values, indices)`` of the minimum along ``dim`` (``torch.min(x, dim)``)."""
    return _with_indices("min", amin, input, dim, keepdim, name)


__all__ = [
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "max_with_indices",
    "min_with_indices",
]
