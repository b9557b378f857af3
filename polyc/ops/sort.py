"""Sorting small dimensions as affine code: topk, sort and argsort.

**topk** takes ``k`` passes of an argmax that skips the indices already taken.
Pass ``p`` finds, along ``dim``, the best value among the indices not taken by
passes ``0 .. p-1`` and the smallest index that holds it::

    taken_p(j) = idx_0 == j or ... or idx_{p-1} == j
    best_p     = max over j not taken_p(j) of x[j]           (NaN left out)
    idx_p      = min j such that not taken_p(j) and x[j] == best_p

A NaN counts as larger than every number (PyTorch's order), so ``largest=True``
takes the first NaN left before any number and ``largest=False`` takes NaNs only
when no number is left. Each pass reads ``x`` a constant number of times:
``O(k^2 n)`` work per row, so ``k`` is small (at most :data:`TOPK_MAX_K`) but
``n`` may be a vocabulary.

**sort** ranks every element by counting the elements that go before it (a
smaller value, or an equal one at a smaller index; NaNs last, or first when
descending), then fills each output position ``r`` with the element of rank
``r``: three ``n x n`` contractions per row, so ``n`` is small (at most
:data:`SORT_MAX_N`). Equal elements keep their order: the stable sort. PyTorch's
CPU sort is stable up to 16 elements whether or not ``stable=True`` is asked for;
past that its order of equal elements is unspecified unless ``stable=True``.

Indices are int64, as PyTorch's. ``-0.0`` and ``0.0`` compare equal, as in
PyTorch: ``sort`` keeps them in their order (stable), ``topk`` takes the smaller
index first, and both return each element as it is (its sign kept): a value is the
element at its index, never a sum or a max of equal values.
"""

from __future__ import annotations

import numpy as np

from polyc.errors import ArgumentError
from polyc.ir import dtypes
from polyc.ir.expr import Expr, cast, select
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import SIGNED, axis, check_dtype, flag, fresh, tensor

#: the largest k of topk: k passes of O(k n) each
TOPK_MAX_K = 16
#: the largest dimension sort ranks: O(n^2) per row
SORT_MAX_N = 64


def _lowest(dt) -> Expr:
    """The value below every number of ``dt`` (-inf for floats)."""
    if dt.is_float:
        return pc.const(float("-inf"), dt)
    return pc.const(int(np.iinfo(dt.numpy).min), dt)


def _highest(dt) -> Expr:
    if dt.is_float:
        return pc.const(float("inf"), dt)
    return pc.const(int(np.iinfo(dt.numpy).max), dt)


def _isnan(v: Expr) -> Expr:
    return v.ne(v)


def _number(v: Expr) -> Expr:
    """Whether ``v`` is not a NaN (always, for integers)."""
    return v.eq(v)


def _place(ix, d: int, value) -> tuple:
    """``ix`` with ``value`` put at position ``d`` (the outer indices -> a source)."""
    return tuple(ix[:d]) + (value,) + tuple(ix[d:])


def _outer(ix, d: int) -> tuple:
    return tuple(ix[:d]) + tuple(ix[d + 1 :])


def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the ``k`` largest (or smallest) elements along
    ``dim``, best first (``torch.topk(x, k, dim, largest, sorted=True)``). Among
    equal values the smaller index comes first.

    Raises:
        ArgumentError: when ``k`` is not in ``0 .. size`` or exceeds
            :data:`TOPK_MAX_K`.
    """
    op = "topk"
    x = tensor(op, input)
    dt = check_dtype(op, x, SIGNED)
    largest = flag(op, largest, "largest")
    d = axis(op, dim, x.ndim)
    size = int(x.shape[d].const)
    if not isinstance(k, int) or not 0 <= k <= size:
        raise ArgumentError(
            f"{op}: k={k!r} is out of range because dim {d} has {size} elements. "
            f"Pass 0 <= k <= {size}."
        )
    if k > TOPK_MAX_K:
        raise ArgumentError(
            f"{op}: k={k} is too large because polyc takes topk as k passes of an "
            f"argmax over the {size} elements (at most {TOPK_MAX_K}). Take at most "
            f"{TOPK_MAX_K}, or sort (dims up to {SORT_MAX_N})."
        )
    out = fresh(op, name)
    outer_shape = tuple(s for n, s in enumerate(x.shape) if n != d)
    nothing = pc.const(size, dtypes.int64)
    taken: list[Tensor] = []
    values: list[Tensor] = []
    for p in range(k):
        tag = f"{out}_{p}"

        def free(oi, r, also: Expr, chosen=tuple(taken)) -> Expr:
            """``also``, and index ``r`` not taken by an earlier pass."""
            j = cast(r, dtypes.int64)
            for c in chosen:
                also = also & c[oi].ne(j)
            return also

        r = pc.reduce_axis(x.shape[d], f"r{d}")
        worst = _lowest(dt) if largest else _highest(dt)
        pick = pc.max if largest else pc.min
        best = pc.compute(
            f"{tag}_best",
            outer_shape,
            lambda *oi, free=free, r=r, worst=worst, pick=pick: pick(
                select(
                    free(oi, r, _number(x[_place(oi, d, r)])),
                    x[_place(oi, d, r)],
                    worst,
                ),
                r,
            ),
        )
        first = pc.compute(
            f"{tag}_first",
            outer_shape,
            lambda *oi, free=free, r=r, best=best: pc.min(
                select(
                    free(oi, r, x[_place(oi, d, r)].eq(best[oi])),
                    cast(r, dtypes.int64),
                    nothing,
                ),
                r,
            ),
        )
        if dt.is_float:
            nan = pc.compute(
                f"{tag}_nan",
                outer_shape,
                lambda *oi, free=free, r=r: pc.min(
                    select(
                        free(oi, r, _isnan(x[_place(oi, d, r)])),
                        cast(r, dtypes.int64),
                        nothing,
                    ),
                    r,
                ),
            )
            nan_value = pc.const(float("nan"), dt)
            if largest:  # a NaN left goes first

                def use_nan(oi, nan=nan):
                    return nan[oi] < nothing
            else:  # NaNs only when no number is left

                def use_nan(oi, first=first):
                    return first[oi].eq(nothing)

            index = pc.compute(
                f"{tag}_index",
                outer_shape,
                lambda *oi, nan=nan, first=first, use_nan=use_nan: select(
                    use_nan(oi), nan[oi], first[oi]
                ),
            )
            # the element at the index, not ``best``: -0.0 and 0.0 compare equal,
            # and the max of equal values may be either
            chosen = pc.compute(
                f"{tag}_chosen",
                outer_shape,
                lambda *oi, r=r, first=first: pc.max(
                    select(
                        cast(r, dtypes.int64).eq(first[oi]),
                        x[_place(oi, d, r)],
                        _lowest(dt),
                    ),
                    r,
                ),
            )
            value = pc.compute(
                f"{tag}_value",
                outer_shape,
                lambda *oi, chosen=chosen, use_nan=use_nan, nan_value=nan_value: select(
                    use_nan(oi), nan_value, chosen[oi]
                ),
            )
        else:
            index, value = first, best
        taken.append(index)
        values.append(value)
    shape = list(x.shape)
    shape[d] = k
    return _stack(f"{out}_values", shape, d, values), _stack(
        f"{out}_indices", shape, d, taken
    )


def _stack(name: str, shape, d: int, parts: list[Tensor]) -> Tensor:
    """``parts[p]`` at position ``p`` of dim ``d``."""
    dt = parts[0].dtype if parts else dtypes.int64

    def body(*ix):
        oi = _outer(ix, d)
        v = parts[-1][oi]
        for p in range(len(parts) - 2, -1, -1):
            v = select(cast(ix[d], dtypes.int64).eq(p), parts[p][oi], v)
        return v

    if not parts:
        return pc.compute(name, tuple(shape), lambda *ix: pc.const(0, dt), dtype=dt)
    return pc.compute(name, tuple(shape), body)


def sort(
    input: Tensor, dim: int = -1, descending: bool = False, name: str | None = None
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of ``input`` sorted along ``dim``, equal elements in
    their order (``torch.sort(x, dim, descending, stable=True)``); NaNs last
    (first when descending).

    Raises:
        ArgumentError: when the dim has more than :data:`SORT_MAX_N` elements.
    """
    op = "sort"
    x = tensor(op, input)
    dt = check_dtype(op, x, SIGNED)
    descending = flag(op, descending, "descending")
    d = axis(op, dim, x.ndim)
    size = int(x.shape[d].const)
    if size > SORT_MAX_N:
        raise ArgumentError(
            f"{op}: dim {d} has {size} elements, too many because polyc sorts by "
            f"ranking every pair of elements (at most {SORT_MAX_N}). Sort a "
            f"smaller dim, or take the few best with topk (k up to {TOPK_MAX_K})."
        )
    out = fresh(op, name)

    def before(a: Expr, b: Expr, ja: Expr, jb: Expr) -> Expr:
        """Whether element ``a`` (at ``ja``) goes before ``b`` (at ``jb``)."""
        ahead = (a > b) if descending else (a < b)
        tie = a.eq(b)
        if dt.is_float:
            nan_a, nan_b = _isnan(a), _isnan(b)
            # NaN above every number: last ascending, first descending
            ahead = ahead | ((nan_a & ~nan_b) if descending else (~nan_a & nan_b))
            tie = tie | (nan_a & nan_b)
        return ahead | (tie & (cast(ja, dtypes.int64) < cast(jb, dtypes.int64)))

    one, zero = pc.const(1, dtypes.int64), pc.const(0, dtypes.int64)
    j = pc.reduce_axis(x.shape[d], f"r{d}")

    def rank_body(*ix):
        other = x[_place(_outer(ix, d), d, j)]
        return pc.sum(select(before(other, x[ix], j, ix[d]), one, zero), j)

    rank = pc.compute(f"{out}_rank", x.shape, rank_body, dtype=dtypes.int64)

    def fill(what, dt_out, name):
        """``out[.., r, ..] = what(j)`` for the ``j`` of rank ``r``: the max over
        ``j`` of it there and the lowest value elsewhere (a max, not a sum of
        zeros, so that a ``-0.0`` keeps its sign)."""
        k = pc.reduce_axis(x.shape[d], f"r{d}")

        def body(*ix):
            src = _place(_outer(ix, d), d, k)
            hit = rank[src].eq(cast(ix[d], dtypes.int64))
            return pc.max(select(hit, what(src, k), _lowest(dt_out)), k)

        return pc.compute(name, x.shape, body, dtype=dt_out)

    indices = fill(lambda src, k: cast(k, dtypes.int64), dtypes.int64, f"{out}_indices")
    values = fill(lambda src, k: x[src], dt, f"{out}_values")
    return values, indices


__all__ = ["SORT_MAX_N", "TOPK_MAX_K", "sort", "topk"]
