"""The automatic scheduler: isl's scheduler, then tiling and parallel marks.

1. isl computes a schedule from the exact dependences (Pluto-style: validity keeps
   every dependence forward, proximity pulls dependent instances together for
   locality, coincidence asks for dependence-free loops to run in parallel). The
   fusion strategy picks isl's clustering: ``"max"`` schedules all statements as a
   whole, independent ones included (maximal fusion), ``"smart"`` lets isl merge clusters when
   that keeps parallel loops (isl's default), ``"none"`` schedules strongly
   connected components one after the other (no fusion). When isl runs out of
   time or finds nothing, the fallback chain of :mod:`schedules.host.chain` tries
   simpler schedulers, down to the program order; every candidate it returns is
   checked against the exact dependences, finished (steps 2 and 3) and
   :mod:`schedules.host.profit` keeps the best by its model, or the program as
   written (:data:`AS_WRITTEN`) when no candidate beats it.
2. When a band would need skewed (time) tiles but one iteration of it fits in the
   last-level cache, isl is asked again with outer coincidence, for a schedule whose
   space loops stay parallel and vectorisable (see :mod:`schedules.host.cache_model`).
   Every outermost permutable band is tiled with sizes from :mod:`schedules.host.cache_model`
   (cache footprint of a tile), after ordering its members so that the innermost
   point loop is the one with contiguous accesses.
   A stencil (Jacobi, heat, FDTD) whose time step does not fit gets time tiles
   (:mod:`schedules.host.stencil`); an in-place one whose innermost loop carries
   a recurrence (Gauss-Seidel) runs each time step as wavefronts with a
   dependence-free innermost loop (:mod:`schedules.host.gauss_seidel`); either
   is kept without asking the chain. So is a product whose rows run through a
   reused temporary (doitgen's ``sum[p]``) when, expanded along its rows
   (:mod:`schedules.host.expand`), its product gets register tiles in the
   program's order (:data:`ROW_PRODUCTS`).
3. The outermost loop that carries no dependence is marked ``@parallel``: a
   coincident tile loop moved to the front, or, for a band with none (a time-tiled
   stencil), the inner tile loop of a wavefront (the outer tile loop skewed by the
   next one); only where one fork of it runs enough work to pay for the fork/join
   (:data:`schedules.host.cache_model.MIN_PARALLEL_WORK`).

4. Matrix-vector products (:mod:`schedules.host.matvec`): a column walk is
   permuted into a row walk, and rows of dot products get register tiles, in
   every candidate before they are compared (the tiles leave no recurrence on the
   innermost loop, which :mod:`schedules.host.profit` counts); the contractions'
   register tiles (:mod:`schedules.host.register`) follow on the one kept.

Before tiling, when isl has left the contiguous loop (stride-1 accesses) of a nest
above nested bands (the filter loops of a convolution), the nested bands are merged
and that loop is permuted innermost.

Each decision is made through the public transformations, so ``kernel.history``
shows them and :func:`schedules.replay` repeats them. isl runs under a CPU-time
bound per step of the chain, so that a hard input falls back instead of hanging
the compiler; a caller who sets a budget gets :class:`~polyc.errors.BudgetError`
instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polyc.errors import (
    ArgumentError,
    BudgetError,
    IllegalTransformError,
    ScheduleError,
)
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.apply import apply_schedule
from schedules.bands import merge_bands, permute
from schedules.host import chain, profit
from schedules.host.cache_model import MIN_PARALLEL_WORK, Cache, Model
from schedules.host.expand import expand_rows
from schedules.host.gauss_seidel import STEP_WAVEFRONTS, step_wavefronts
from schedules.host.interleave import interleave_recurrences
from schedules.host.matvec import fuse_row_tiles, matvec_tiles
from schedules.host.parallel import (
    attempt,
    band_at,
    is_coincident,
    mark_parallel_below,
    parallel_tiles,
)
from schedules.host.register import (
    blocking,
    has_matrix_tile,
    register_tiles,
    separate_reductions,
)
from schedules.host.stencil import TILES, time_tiles
from schedules.tiling import tile as tile_band

FUSION = ("max", "smart", "none")
#: what :class:`Found` names as its step when the chooser kept the program's own
#: loops untiled (the input as written, with parallel marks)
AS_WRITTEN = "as-written"
#: what :class:`Found` names as its step when a product's reused temporary was
#: expanded along its rows (:mod:`schedules.host.expand`) and register-tiled
ROW_PRODUCTS = "row-products"


@dataclass(frozen=True)
class Found:
    """What :func:`auto_found` found: the scheduled kernel, the step of the
    fallback chain whose schedule it kept (:data:`schedules.host.chain.STEPS`), the
    candidates it compared and why the steps that found nothing failed."""

    kernel: Kernel
    step: str
    compared: tuple[str, ...]
    failures: tuple[str, ...]


def auto(
    kernel: Kernel,
    *,
    fusion: str = "smart",
    tile: bool = True,
    parallel: bool = True,
    params: Mapping[str, int] | None = None,
    cache: Cache | None = None,
    max_operations: int | None = None,
    max_seconds: float | None = None,
    min_parallel_work: int = MIN_PARALLEL_WORK,
    wavefront: bool = False,
) -> Kernel:
    """A schedule for ``kernel`` computed from its dependences (see module docstring).

    Args:
        kernel: the kernel; its current schedule is replaced.
        fusion: ``"max"``, ``"smart"`` or ``"none"``.
        tile: tile the outermost permutable bands.
        parallel: mark the outermost dependence-free loop ``@parallel``.
        params: problem sizes the cost model assumes for symbolic parameters
            (default 1024 each).
        cache: cache capacities for the cost model (default: this host's).
        max_operations: isl's operation budget for each call of its scheduler;
            unset (the default), none.
        max_seconds: a CPU-time bound on each call of isl's scheduler (see
            :func:`schedules.host.bounded.bounded_compute`; wall time only stops a
            child that is stuck); unset (the default),
            :data:`schedules.host.chain.STEP_SECONDS` per step of the fallback
            chain. An answer that cost more CPU time than the bound is refused,
            so ``max_seconds=0`` always raises.
        min_parallel_work: statement instances one entry of a loop (one
            fork/join) must run for the loop to be marked ``@parallel`` (see
            :data:`schedules.host.cache_model.MIN_PARALLEL_WORK`).
        wavefront: with ``parallel``, run a time-tiled stencil's tiles in
            wavefronts (the outer tile loop skewed by the next, which is then
            marked ``@parallel``) where a fork pays. Off by default: on one thread
            the wavefront order loses the reuse between neighbouring tiles
            (heat-3d at LARGE: 0.76x of gcc's time with it, 1.2x without).

    ``auto`` never fails on a valid kernel when no budget is set: when isl runs out
    of time or finds nothing, the fallback chain of :mod:`schedules.host.chain`
    tries simpler schedulers and ends at the program order; :func:`auto_found` says
    which step won.

    Raises:
        ArgumentError: an unknown fusion strategy, or a negative budget.
        BudgetError: when ``max_operations`` or ``max_seconds`` is set and isl's
            scheduler runs past it.
    """
    return auto_found(
        kernel,
        fusion=fusion,
        tile=tile,
        parallel=parallel,
        params=params,
        cache=cache,
        max_operations=max_operations,
        max_seconds=max_seconds,
        min_parallel_work=min_parallel_work,
        wavefront=wavefront,
    ).kernel


def auto_found(
    kernel: Kernel,
    *,
    fusion: str = "smart",
    tile: bool = True,
    parallel: bool = True,
    params: Mapping[str, int] | None = None,
    cache: Cache | None = None,
    max_operations: int | None = None,
    max_seconds: float | None = None,
    min_parallel_work: int = MIN_PARALLEL_WORK,
    wavefront: bool = False,
) -> Found:
    """:func:`auto`, with the step of the fallback chain that won (same arguments
    and errors).

    Every candidate of the chain is applied (checked against the exact
    dependences; a refused one is dropped), tiled and marked, and
    :func:`schedules.host.profit.choose` keeps one.
    """
    if fusion not in FUSION:
        raise ArgumentError(
            f"auto: fusion={fusion!r} is not a strategy because the strategies are "
            f"{', '.join(FUSION)}. Pass one of those."
        )
    budget = _budget(max_operations, max_seconds)
    model = Model(kernel, params, cache, min_parallel_work)
    if tile:
        tiled = time_tiles(kernel, model)
        if tiled is not None:
            if parallel and wavefront:
                tiled = parallel_tiles(tiled, TILES, model)
            return Found(tiled, chain.TIME_TILES, (chain.TIME_TILES,), ())
        waves = step_wavefronts(kernel, model)
        if waves is not None:
            return Found(waves, STEP_WAVEFRONTS, (STEP_WAVEFRONTS,), ())
        rows = _row_products(kernel, model, fusion, budget, parallel)
        if rows is not None:
            return Found(rows, ROW_PRODUCTS, (ROW_PRODUCTS,), ())
    attempts = chain.candidates(kernel, fusion, budget)
    failures = list(attempts.failures)
    finished: list[tuple[str, Kernel]] = []
    kept: dict[str, chain.Candidate] = {}
    for cand in attempts.candidates:
        try:
            out = _finish(kernel, cand, fusion, budget, model, tile, parallel)
        except IllegalTransformError as err:  # the check is the judge
            failures.append(f"{cand.step}: {err}")
            continue
        finished.append((cand.step, out))
        kept[cand.step] = cand
    if tile:
        # never slower than the input, as far as the model sees: the program's
        # own loops, untiled (parallel marks only), last so that it wins only
        # when it is better than every rewrite by some criterion of the chooser
        own = attempts.candidates[-1]
        if own.step == "program-order":
            out = _finish(kernel, own, fusion, budget, model, False, parallel)
            finished.append((AS_WRITTEN, out))
    pick = profit.choose([k for _, k in finished], model) if len(finished) > 1 else 0
    step, out = finished[pick]
    if tile and step != AS_WRITTEN:
        # the products' cache blocks after the choice: the chooser's byte model
        # (a tile's footprint within half the L2) would count the L3-sized
        # blocks of B as streamed from memory
        blocked = _finish(
            kernel, kept[step], fusion, budget, model, tile, parallel, True
        )
        out = register_tiles(blocked, model)
    return Found(out, step, tuple(s for s, _ in finished), tuple(failures))


def _row_products(
    kernel: Kernel, model: Model, fusion: str, budget: chain.Budget, parallel: bool
) -> Kernel | None:
    """The program with a product's reused temporary expanded along its rows
    (:func:`schedules.host.expand.expand_rows`) in its own order, its product's
    band separated, blocked and register-tiled; None when nothing is expanded or
    the expanded product gets no register tile (its temporary is then kept as
    it was: the expansion only pays as a matrix product)."""
    expanded = expand_rows(kernel)
    if expanded is None:
        return None
    model = Model(expanded, model.values, model.cache, model.min_parallel_work)
    own = chain.Candidate("program-order", chain.program_order(expanded))
    # the product's band runs below the loops the rows share (doitgen's r),
    # where ``_finish`` does not tile it: the parallel marks come after its
    # register tiles, on their tile loops
    out = _finish(expanded, own, fusion, budget, model, True, False, True)
    out = register_tiles(out, model)
    if parallel:
        out = mark_parallel_below(out, model)
    return out if has_matrix_tile(out) else None


def _budget(max_operations, max_seconds) -> chain.Budget:
    for name, value in (
        ("max_operations", max_operations),
        ("max_seconds", max_seconds),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
        ):
            raise ArgumentError(
                f"auto: {name}={value!r} is not a budget because a budget is a "
                "non-negative number. Pass one, or leave it unset."
            )
    return chain.Budget(max_operations, max_seconds)


def _finish(
    kernel: Kernel,
    cand: chain.Candidate,
    fusion: str,
    budget: chain.Budget,
    model: Model,
    tile: bool,
    parallel: bool,
    blocks: bool = False,
) -> Kernel:
    """A candidate applied (checked), then tiled and marked parallel; with
    ``blocks``, the bands of products tiled by their cache blocks
    (:func:`schedules.host.register.blocking`) instead of the footprint model's
    sizes."""
    sched = cand.schedule
    if (
        tile
        and cand.step != "program-order"
        and _time_tiling_does_not_pay(sched, model)
    ):
        relaxed = cand.step != "isl"
        try:
            alt = chain.isl_schedule(
                kernel,
                "none" if cand.step == "isl-sccs" else fusion,
                budget,
                outer_coincidence=True,
                relaxed=relaxed,
                feautrier=cand.step == "feautrier",
            )
        except BudgetError:
            if budget.explicit:
                raise
            alt = None
        except ScheduleError:
            alt = None
        if alt is not None and _has_coincident(stree.from_isl(alt)):
            sched = alt
    root = stree.name_bands(stree.from_isl(sched))
    out = apply_schedule(kernel, stree.to_isl(root))
    if not (tile or parallel):
        return out
    merged: set[str] = set()
    if tile:
        out, merged = separate_reductions(out, model)
    for name in _outermost_bands(out):
        out = _optimise_band(out, name, model, tile, parallel, name in merged, blocks)
    if tile:
        # before the candidates are compared (the register tiles of the rows
        # leave no recurrence on the innermost loop, which profit counts) and
        # before the parallel marks (the tile loop of the rows is the one to mark)
        out = fuse_row_tiles(matvec_tiles(out, model), model)
        out = interleave_recurrences(out, model)
    if parallel:
        out = mark_parallel_below(out, model)
    return out


def _time_tiling_does_not_pay(sched: isl.Schedule, model: Model) -> bool:
    """Whether an outermost band has no dependence-free member (tiling it needs
    skewed tiles) while one iteration of it fits in the last-level cache."""
    root = stree.from_isl(sched)
    for path, node in stree.walk(root):
        if not isinstance(node, stree.Band) or stree.bands_above(root, path):
            continue
        skewed = node.n_member >= 2 and node.permutable and not any(node.coincident)
        if skewed and not model.streams_past_llc([], node):
            return True
    return False


def _has_coincident(root: stree.Node) -> bool:
    return any(
        isinstance(n, stree.Band) and any(n.coincident) for _, n in stree.walk(root)
    )


def _outermost_bands(kernel: Kernel) -> list[str]:
    """Named bands with no band above them, in tree order."""
    root = stree.from_isl(kernel.schedule)
    out = []
    for path, node in stree.walk(root):
        nb = stree.named_at(node)
        if nb is not None and not stree.bands_above(root, path):
            out.append(nb.name)
    return out


def _optimise_band(
    kernel: Kernel,
    name: str,
    model: Model,
    tile: bool,
    parallel: bool,
    merged: bool = False,
    blocks: bool = False,
) -> Kernel:
    kernel, chained = _contiguous_innermost(kernel, name, model)
    merged = merged or chained
    outer, nb = band_at(kernel, name)
    band = nb.band
    sizes = None
    # a merged band is not marked permutable (its members' dependence distances
    # are not all non-negative), but its long members often are: the exact check
    # of ``tile`` decides
    tileable = tile and (band.permutable or merged) and band.n_member >= 2
    inner = model.innermost(outer, band)
    if tileable and not model.iteration_fits(outer, band):
        sizes = model.tile_sizes(outer, band, inner)
    if sizes is None:
        return kernel
    order = [p for p in range(band.n_member) if p != inner] + [inner]
    if order != list(range(band.n_member)):
        kernel = permute(kernel, name, [nb.members[p] for p in order])
        outer, nb = band_at(kernel, name)
        sizes = {order.index(p): s for p, s in sizes.items()}
    found = blocking(model, outer, nb) if blocks else None
    if found is not None:  # a product: GotoBLAS's cache blocks
        sizes = found
    if not sizes:
        return kernel
    by_member = {nb.members[p]: s for p, s in sorted(sizes.items())}
    tiled = attempt(lambda: tile_band(kernel, name, by_member), None)
    if tiled is None:
        return kernel
    kernel = tiled
    if parallel:
        kernel = parallel_tiles(kernel, f"{name}_t", model)
    return kernel


def _contiguous_innermost(
    kernel: Kernel, name: str, model: Model
) -> tuple[Kernel, bool]:
    """Merge the chain of bands nested below band ``name`` into it when the loop the
    cost model wants innermost (stride-1 accesses) sits in an outer band of the
    chain, and permute that loop to the end; ``(kernel, merged)``.

    isl splits a nest into nested bands where its dependence distances stop being
    non-negative (the filter loops of a convolution below the output loops), so
    the contiguous output loop ``w`` ends up above the filter loops ``rh, rw``.
    Each step is a checked transformation; a refused one keeps the nest as it is.
    """
    chain = _nested_chain(kernel, name)
    if len(chain) < 2:
        return kernel, False
    merged = kernel
    for inner in chain[1:]:
        merged = _merge(merged, name, inner)
        if merged is None:
            return kernel, False
    outer, nb = band_at(merged, name)
    best = model.innermost(outer, nb.band)
    n_last = len(band_at(kernel, chain[-1])[1].members)
    if best >= nb.band.n_member - n_last:  # already in the innermost band
        return kernel, False
    last = nb.band.n_member - 1
    if is_coincident(nb.band, last) and not is_coincident(nb.band, best):
        # a dependence-free innermost loop vectorises even with strided accesses
        # (Seidel-2D's wavefront); a contiguous one carrying a recurrence does not
        return kernel, False
    order = [m for p, m in enumerate(nb.members) if p != best] + [nb.members[best]]
    permuted = attempt(lambda: permute(merged, name, order), None)
    if permuted is None:
        return kernel, False
    return permuted, True


def _merge(kernel: Kernel, name: str, inner: str) -> Kernel | None:
    """``merge_bands``, or None when it is illegal or the two bands' members share a
    name (isl's nested bands can both have a ``t``; found by the property test)."""
    try:
        return merge_bands(kernel, name, inner)
    except (IllegalTransformError, ScheduleError):
        return None


def _nested_chain(kernel: Kernel, name: str) -> list[str]:
    """``name`` and the named bands below it, each the only child of the one above
    and carrying no attribute marks."""
    _, nb = band_at(kernel, name)
    chain = [name]
    below = stree.named_at(nb.band.child)
    while below is not None and not below.attrs:
        chain.append(below.name)
        below = stree.named_at(below.band.child)
    return chain
