"""Numbers out of the cost model's expressions: evaluation over a grid of tile sizes,
DMA descriptor counts, and the tile sizes worth trying."""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp


def numeric(e: sp.Expr, env: dict, memo: dict):
    """Evaluate ``e`` with numpy arrays for its symbols (what ``lambdify`` does,
    without generating code for every expression)."""
    if e in memo:
        return memo[e]
    if e.is_Symbol:
        out = env[e]
    elif e.is_Number:
        out = float(e)
    else:
        args = [numeric(a, env, memo) for a in e.args]
        if e.is_Add:
            out = sum(args[1:], args[0])
        elif e.is_Mul:
            out = args[0]
            for a in args[1:]:
                out = out * a
        elif e.is_Pow:
            out = np.power(args[0], args[1])
        elif isinstance(e, sp.ceiling):
            out = np.ceil(args[0] - 1e-9)
        elif isinstance(e, sp.floor):
            out = np.floor(args[0] + 1e-9)
        elif isinstance(e, sp.Max):
            out = args[0]
            for a in args[1:]:
                out = np.maximum(out, a)
        elif isinstance(e, sp.Min):
            out = args[0]
            for a in args[1:]:
                out = np.minimum(out, a)
        else:  # pragma: no cover - the model builds only the forms above
            raise TypeError(f"cost model: cannot evaluate {e!r}")
    memo[e] = out
    return out


def descriptors(
    ext: list[np.ndarray], shape, max_dims: int, apart: int | None = None
) -> np.ndarray:
    """DMA descriptors of a box copy: dimensions that stay after merging the ones the
    box covers fully, beyond the descriptor's dimensions, need one each (computed
    for every candidate at once). Walking the dimensions innermost first, one of
    extent 1 is skipped, one after a fully covered kept dimension merges into it,
    any other starts a new kept dimension; the count is the product of the extents
    that went into kept dimensions past the first ``max_dims``. Dimension
    ``apart`` steps over the source's rows (one phase of a polyphase operand
    reads every ``factor``-th row): it merges with neither neighbour."""
    if not ext:
        return np.ones(1)
    count = np.zeros(len(ext[0]), dtype=int)  # kept dimensions so far
    full = np.zeros(len(ext[0]), dtype=bool)  # the last kept one is covered whole
    out = np.ones(len(ext[0]))
    for d in reversed(range(len(ext))):
        e = np.minimum(ext[d], shape[d])
        skip = e <= 1
        merges = (count > 0) & full & (d != apart)
        count = count + (~skip & ~merges)
        out = np.where(~skip & (count > max_dims), out * e, out)
        full = np.where(skip, full, (e >= shape[d]) & (d != apart))
    return out


def candidates(extent: int, cap: int = 11) -> list[int]:
    """Tile sizes worth trying for a loop of ``extent`` iterations: the extent, the
    powers of two below it and its larger divisors, thinned to ``cap`` values
    spread on a log scale from 1 to the extent (so that small memories find small
    tiles and large ones large tiles)."""
    return list(_candidates(extent, cap))


@functools.lru_cache(maxsize=4096)
def _candidates(extent: int, cap: int) -> tuple[int, ...]:
    """:func:`candidates`, once per loop length (every structure of every layer
    asks)."""
    out = {extent}
    p = 1
    while p < extent:
        out.add(p)
        p *= 2
    for d in range(1, math.isqrt(extent) + 1):
        if extent % d == 0:
            for v in (d, extent // d):
                if 8 * v >= extent or v % 8 == 0:
                    out.add(v)
    vals = sorted(out)
    while len(vals) > cap:
        # drop the value closest (in log) to its neighbours, never the ends
        gaps = [
            math.log(vals[i + 1]) - math.log(vals[i - 1])
            for i in range(1, len(vals) - 1)
        ]
        del vals[1 + gaps.index(min(gaps))]
    return tuple(vals)
