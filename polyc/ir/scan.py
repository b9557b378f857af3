"""Enumerate the integer points of an isl set as a numpy array, vectorised.

isl builds a loop nest that scans the set; instead of running it point by point we run
it over whole arrays: every ``for`` expands the current rows by the loop's trip count
(``np.repeat``), every ``if`` filters them. The result is sorted lexicographically.
"""

from __future__ import annotations

import islpy as isl
import numpy as np

from polyc.ir import loops

_NAME = "P__scan"


def scan(points: isl.Set) -> np.ndarray:
    """All points of a bounded, parameter-free set: shape ``(n, dim)``, lex order.

    The result is the transpose of a C-contiguous ``(dim, n)`` array, so each
    coordinate (``pts[:, d]``, or ``pts.T[d]``) is contiguous.
    """
    ndim = points.dim(isl.dim_type.set)
    if points.is_empty():
        return np.zeros((ndim, 0), dtype=np.int64).T
    if ndim == 0:
        return np.zeros((0, 1), dtype=np.int64).T
    s = points.set_tuple_name(_NAME)
    ident = isl.Map.identity(s.get_space().map_from_set()).intersect_domain(s)
    ident = ident.reset_tuple_id(isl.dim_type.out)
    build = isl.AstBuild.from_context(isl.Set.universe(s.params().get_space()))
    nest = loops.from_isl(build.node_from_schedule_map(isl.UnionMap.from_map(ident)))
    chunks: list[np.ndarray] = []
    _run(nest, {}, 1, chunks)
    if not chunks:
        return np.zeros((ndim, 0), dtype=np.int64).T
    if len(chunks) == 1:
        return chunks[0].T  # one perfectly nested scan is already in lex order
    cols = np.concatenate(chunks, axis=1)
    order = np.lexsort(cols[::-1])
    return np.ascontiguousarray(cols[:, order]).T


def scan_chunks(points: isl.Set, limit: int = 1 << 20, free: int | None = None):
    """Yield the points of ``points`` in lexicographic order, in chunks of at most
    about ``limit`` rows, so that huge domains never sit in memory at once.

    ``free``: how many trailing dimensions determine a point (the others are
    functions of them); the size estimate uses only those.
    """
    ndim = points.dim(isl.dim_type.set)
    if points.is_empty():
        return
    extents = []
    for d in range(ndim):
        lo, hi = points.dim_min_val(d), points.dim_max_val(d)
        extents.append(int(hi.sub(lo).to_python()) + 1)
    counted = extents[ndim - free :] if free is not None else extents
    total = int(np.prod(counted, dtype=np.float64)) if counted else 1
    split = next((d for d, e in enumerate(extents) if e > 1), None)
    if total <= limit or split is None:
        yield scan(points)
        return
    inner = max(1, total // extents[split]) if split >= ndim - (free or ndim) else total
    width = max(1, limit // max(inner, 1))
    lo = int(points.dim_min_val(split).to_python())
    hi = int(points.dim_max_val(split).to_python())
    for start in range(lo, hi + 1, width):
        piece = points.lower_bound_val(isl.dim_type.set, split, start)
        piece = piece.upper_bound_val(
            isl.dim_type.set, split, min(start + width, hi + 1) - 1
        )
        yield from scan_chunks(piece, limit, free)


def _run(nodes, env: dict, n: int, out: list[np.ndarray]) -> None:
    for node in nodes:
        if n == 0:
            return
        if isinstance(node, loops.For):
            bound = node.upper()
            if bound is None:
                raise NotImplementedError(f"scan: loop condition {node.cond}")
            lo = _as_rows(loops.evaluate(node.init, env), n)
            hi = _as_rows(loops.evaluate(bound[0], env), n)
            if not bound[1]:
                hi = hi - 1
            counts = np.maximum(0, (hi - lo) // node.step + 1)
            total = int(counts.sum())
            if total == 0:
                continue
            rep = {k: np.repeat(_as_rows(v, n), counts) for k, v in env.items()}
            starts = np.repeat(np.cumsum(counts) - counts, counts)
            offset = np.arange(total, dtype=np.int64) - starts
            rep[node.var] = np.repeat(lo, counts) + offset * node.step
            _run(node.body, rep, total, out)
        elif isinstance(node, loops.If):
            mask = _as_rows(loops.evaluate(node.cond, env), n).astype(bool)
            if mask.any():
                _run(node.then, _filter(env, mask, n), int(mask.sum()), out)
            if node.orelse and not mask.all():
                _run(node.orelse, _filter(env, ~mask, n), int((~mask).sum()), out)
        elif isinstance(node, loops.Mark):
            _run(node.body, env, n, out)
        elif isinstance(node, loops.Call):
            cols = np.empty((len(node.args), n), dtype=np.int64)
            for d, a in enumerate(node.args):
                cols[d] = _as_rows(loops.evaluate(a, env), n)
            out.append(cols)


def _as_rows(value, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.int64)
    return np.broadcast_to(arr, (n,)) if arr.ndim == 0 else arr


def _filter(env: dict, mask: np.ndarray, n: int) -> dict:
    return {k: _as_rows(v, n)[mask] for k, v in env.items()}


def fix_params(s: isl.Set | isl.Map, values: dict[str, int]):
    """Specialise a set or map to concrete parameter values (and drop them)."""
    for name, value in values.items():
        pos = s.find_dim_by_name(isl.dim_type.param, name)
        if pos >= 0:
            s = s.fix_val(isl.dim_type.param, pos, value)
            s = s.project_out(isl.dim_type.param, pos, 1)
    return s
