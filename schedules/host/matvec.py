"""Matrix-vector products on the host: the matrix walked row by row, and the
sums of several rows at once in registers.

A band of two members ``(p, r)`` whose statements accumulate into vectors is
rewritten by checked transformations, in one of two ways:

- **a column walk** (``x[i] += A[j][i] * y[j]`` with ``j`` innermost: the matrix
  is read with a stride of a row), when the cost model wants the outer member
  innermost (:meth:`~schedules.host.cache_model.Model.innermost`) and that member
  carries no dependence: ``permute`` makes it innermost, so the loop reads the
  matrix contiguously and updates the vector as an axpy that the C compiler
  vectorises. Each element's sum keeps its order (only the loops over different
  elements are swapped), so the bits stay the same::

      for i: for j:                          for j: for i:
        x[i] += A[j][i] * y[j]       ->        x[i] += A[j][i] * y[j]

- **rows of dot products** (``x[i] += A[i][j] * y[j]``, the reduction loop ``j``
  innermost and contiguous): one dot product is a chain of dependent additions,
  one per cycle of the adder's latency at best. ``tile`` by :data:`MR` rows,
  ``permute`` the row loop below ``j``, ``split_band`` and
  :func:`~schedules.host.register.accumulate` make ``MR`` independent chains that
  share each load of ``y`` and stay in registers across ``j``. Statements of the
  band that update another vector along ``j`` (bicg's ``s[j] += r[i] * A[i][j]``)
  stay in the loop, which then reads each element of ``A`` once for both::

      for i: for j:                          for i_t:  for j:  # @accumulate(8; S)
        x[i] += A[i][j] * y[j]       ->        for i in 8 rows:
                                                 x[i] += A[i][j] * y[j]

  Every sum runs in its original order, so the bits stay the same.

Two nested one-member bands whose outer loop the cost model wants innermost and
carries no dependence (gramschmidt's ``A[i][j] -= Q[i][k] * R[k][j]``, ``j`` outer
and ``i`` inner inside the ``k`` loop, which the scheduler does not tile) are
merged and permuted the same way. The rewrites run before the parallel marks: a
column walk whose fork pays is tiled by :data:`COLUMNS` first, so the mark takes
the tile loop and the row walk stays.

``MR`` = 8: eight chains cover the adder's latency (4 cycles) twice over at two
additions per cycle. Chosen by hand on PolyBench's mvt at LARGE (n = 2000,
gcc -O3 -march=native -ffp-contract=off, one run of each side by side): 8 rows
5.3 ms, 4 rows 9.6 ms, the original 33.6 ms. bench.host_c_corpus measures the
result.
"""

from __future__ import annotations

from polyc.errors import IllegalTransformError, ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.bands import merge_bands, permute, split_band
from schedules.fusion import fuse
from schedules.host.cache_model import Model, access_kind
from schedules.host.parallel import _work_per_entry, band_at, is_coincident
from schedules.host.register import accumulate, each_innermost_band
from schedules.tiling import tile

#: rows of a matrix-vector register tile
MR = 8
#: elements of the vector a tile of a parallel column walk updates (4 KiB of
#: doubles: it stays in L1 while the tile's rows of the matrix stream by)
COLUMNS = 512


def matvec_tiles(kernel: Kernel, model: Model) -> Kernel:
    """Rewrite every innermost two-member band of vector accumulations (see the
    module docstring); a band where a step is refused stays as it is."""
    return each_innermost_band(kernel, model, _rewrite)


def _rewrite(kernel: Kernel, name: str, model: Model, done: set[str]) -> Kernel:
    outer, nb = band_at(kernel, name)
    if nb.band.n_member == 1:
        return _nested(kernel, name, model)
    band = nb.band
    if band.n_member != 2:
        return kernel
    kinds = _target_kinds(model, outer, nb)
    if kinds is None:
        return kernel
    best = model.innermost(outer, band)
    if best == 0 and all(k[1] == "invariant" for k in kinds):
        if not is_coincident(band, 0):
            return kernel
        return _column_walk(kernel, name, model)
    if best != 1 or not any(k == ("strided", "invariant") for k in kinds):
        return kernel
    if model.extent(band.member(0), stree.domain(band)) < MR:
        return kernel
    return _row_tiles(kernel, name, nb.members, done)


def _column_walk(kernel: Kernel, name: str, model: Model) -> Kernel:
    """Band ``name`` (``p, r``) permuted to ``r, p``. When a fork of the band
    pays (:meth:`~schedules.host.cache_model.Model.pays_to_fork`), ``p`` is
    first tiled by :data:`COLUMNS`, so that the parallel marks that follow take
    the tile loop and leave the contiguous loop innermost (they would move the
    dependence-free ``p`` back in front of ``r`` otherwise)."""
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, name, "auto")
    p, r = nb.members
    base = kernel
    if model.pays_to_fork(_work_per_entry(root, path, nb, model)):
        base = _try(lambda: tile(kernel, name, {p: COLUMNS}), None)
        if base is None:
            return kernel
    return _try(lambda: permute(base, name, [r, p]), kernel)


def _nested(kernel: Kernel, name: str, model: Model) -> Kernel:
    """Two nested one-member bands, ``name`` the inner one, whose outer loop the
    cost model wants innermost (contiguous accesses) and carries no dependence:
    merged and permuted (gramschmidt's ``A[i][j] -= Q[i][k] * R[k][j]``, whose
    program order walks ``A`` by columns inside the ``k`` loop, which the
    scheduler does not tile). Kept as they are otherwise."""
    parent = _parent_band(kernel, name)
    if parent is None:
        return kernel
    merged = _try(lambda: merge_bands(kernel, parent, name))
    if merged is None:
        return kernel
    outer, nb = band_at(merged, parent)
    if model.innermost(outer, nb.band) != 0 or not is_coincident(nb.band, 0):
        return kernel
    order = [nb.members[1], nb.members[0]]
    return _try(lambda: permute(merged, parent, order), kernel)


def _parent_band(kernel: Kernel, name: str) -> str | None:
    """The one-member band without marks whose only child is band ``name``."""
    for _, node in stree.walk(stree.from_isl(kernel.schedule)):
        nb = stree.named_at(node)
        if nb is None or nb.attrs or nb.band.n_member != 1:
            continue
        below = stree.named_at(nb.band.child)
        if below is not None and below.name == name and not below.attrs:
            return nb.name
    return None


def _row_tiles(kernel: Kernel, name: str, members, done: set[str]) -> Kernel:
    """``MR`` rows of band ``name`` (members ``p, r``) in registers across ``r``."""
    p, r = members
    micro = f"{name}_{p}"
    out = _try(lambda: tile(kernel, name, {p: MR}, name=f"{name}_reg"), None)
    if out is not None:
        out = _try(lambda k=out: permute(k, name, [r, p]), None)
    if out is not None:
        out = _try(lambda k=out: split_band(k, name, p, name=micro), None)
    if out is None:
        return kernel
    done.update((micro, f"{name}_reg"))
    return _try(lambda: accumulate(out, name), kernel)


def _target_kinds(model: Model, outer, nb: stree.Named):
    """How each statement's target moves along the two members, ``(kind of p,
    kind of r)`` per statement (``"invariant"``, ``"contiguous"``, ``"strided"``),
    or None when a statement does not accumulate into a vector."""
    out = []
    for name in stree.statements(nb.band):
        stmt = model.kernel.statement(name)
        target = stmt.target
        same = [ld for ld in stmt.reads if ld.array == target.array]
        if len(target.index) != 1 or not same:
            return None
        if any(ld.index != target.index for ld in same):
            return None
        pair = []
        for q in range(2):
            d = model._direction(stmt, outer, nb.band, q)
            if d is None:
                return None
            pair.append(access_kind(target.index, stmt.iterators, d))
        # a vector's element moves by one along a member: call it a row of the
        # matrix product, whatever its stride (access_kind says "contiguous")
        out.append(tuple("strided" if k == "contiguous" else k for k in pair))
    return out or None


def _try(fn, fallback=None):
    """``fn()``, or ``fallback`` when a step is refused."""
    try:
        return fn()
    except (IllegalTransformError, ScheduleError):
        return fallback


def fuse_row_tiles(kernel: Kernel, model: Model) -> Kernel:
    """Fuse the tile loop of each band of rows of dot products (:func:`_row_tiles`)
    with the neighbouring loops of its sequence that share an array with it, each
    tiled by the same :data:`MR` rows first, so that the rows a tile of dot
    products reads are read again by the next loop while they are in the cache
    (atax's ``y[j] += A[i][j] * tmp[i]`` after ``tmp[i] += A[i][j] * x[j]``)::

        for i: tmp[i] = 0                   for i_t:
        for i_t: for j: # @accumulate         for i in 8 rows: tmp[i] = 0
          for i in 8 rows:                    for j: # @accumulate
            tmp[i] += A[i][j] * x[j]   ->       for i in 8 rows:
        for i: for j:                             tmp[i] += A[i][j] * x[j]
          y[j] += A[i][j] * tmp[i]            for i in 8 rows: for j:
                                                y[j] += A[i][j] * tmp[i]

    Distributed, the second nest streams ``A`` from memory again (the program
    order's fused loop, without the register rows, keeps one chain of dependent
    additions per dot product). Neighbours are taken one at a time, nearest
    first, and each fusion is checked; a refused one (atax's ``y[i] = 0``, which
    every tile reads whole) ends the run on that side, and so does a neighbour
    whose outer loop does not run over as many rows as the tiles do (a column
    walk already tiled by :data:`COLUMNS` for its parallel mark). No statement instance
    changes its order relative to one it depends on, so the bits stay the same.
    """
    for name in _row_tile_bands(kernel):
        kernel = _fuse_neighbours(kernel, name, model)
    return kernel


def _row_tile_bands(kernel: Kernel) -> list[str]:
    """The one-member tile bands directly above an ``@accumulate`` band of
    rows, children of a sequence."""
    root = stree.from_isl(kernel.schedule)
    out = []
    for path, node in stree.walk(root):
        nb = stree.named_at(node)
        if nb is None or nb.band.n_member != 1 or not path:
            continue
        below = stree.named_at(nb.band.child)
        parent = stree.at(root, path[:-1])
        if (
            below is not None
            and any(a.startswith("@accumulate") for a in below.attrs)
            and isinstance(parent, stree.Sequence_)
        ):
            out.append(nb.name)
    return out


def _fuse_neighbours(kernel: Kernel, name: str, model: Model) -> Kernel:
    for side in (-1, 1):
        while True:
            fused = _fuse_next(kernel, name, side, model)
            if fused is None:
                break
            kernel = fused
    return kernel


def _fuse_next(kernel: Kernel, name: str, side: int, model: Model) -> Kernel | None:
    """Band ``name`` fused with its neighbour on ``side`` (tiled by ``MR`` on its
    first member), or None when there is none that shares an array with it or
    the fusion is refused."""
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, name, "auto")
    seq = stree.at(root, path[:-1]) if path else None
    k = path[-1] + side if path else -1
    if not isinstance(seq, stree.Sequence_) or not 0 <= k < len(seq.children):
        return None
    other = stree.named_at(seq.children[k])
    if other is None or other.attrs:
        return None
    if not _arrays(kernel, other.band) & _arrays(kernel, nb.band):
        return None
    rows = model.extent(other.band.member(0), stree.domain(other.band))
    tiles = model.extent(nb.band.member(0), stree.domain(nb.band))
    if -(-rows // MR) != tiles:
        return None
    tiled = _try(lambda: tile(kernel, other.name, {other.members[0]: MR}), None)
    if tiled is None:
        return None
    tile_band = f"{other.name}_t"
    order = [tile_band, name] if side < 0 else [name, tile_band]
    return _try(lambda: fuse(tiled, order, name=name), None)


def _arrays(kernel: Kernel, node: stree.Node) -> set[str]:
    """The arrays the statements of a subtree access."""
    out = set()
    for s in stree.statements(node):
        stmt = kernel.statement(s)
        out.update(ld.array for ld in (stmt.target, *stmt.reads))
    return out
