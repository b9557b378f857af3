"""The automatic scheduler: isl's scheduler, then tiling and parallel marks.

1. isl computes a schedule from the exact dependences (Pluto-style: validity keeps
   every dependence forward, proximity pulls dependent instances together for
   locality, coincidence asks for dependence-free loops to run in parallel). The
   fusion strategy picks isl's clustering: ``"max"`` schedules all statements as a
   whole, independent ones included (maximal fusion), ``"smart"`` lets isl merge clusters when
   that keeps parallel loops (isl's default), ``"none"`` schedules strongly
   connected components one after the other (no fusion).
2. When a band would need skewed (time) tiles but one iteration of it fits in the
   last-level cache, isl is asked again with outer coincidence, for a schedule whose
   space loops stay parallel and vectorisable (see :mod:`schedules.host.cache_model`).
   Every outermost permutable band is tiled with sizes from :mod:`schedules.host.cache_model`
   (cache footprint of a tile), after ordering its members so that the innermost
   point loop is the one with contiguous accesses.
3. The outermost loop that carries no dependence is marked ``@parallel``: a
   coincident tile loop moved to the front, or, for a band with none (a time-tiled
   stencil), the inner tile loop of a wavefront (the outer tile loop skewed by the
   next one); only where one fork of it runs enough work to pay for the fork/join
   (:data:`schedules.host.cache_model.MIN_PARALLEL_WORK`).

Before tiling, when isl has left the contiguous loop (stride-1 accesses) of a nest
above nested bands (the filter loops of a convolution), the nested bands are merged
and that loop is permuted innermost.

Each decision is made through the public transformations, so ``kernel.history``
shows them and :func:`schedules.replay` repeats them. isl runs under an operation
budget so that a hard input raises :class:`~polyc.errors.BudgetError` instead of
hanging the compiler.
"""

from __future__ import annotations

from collections.abc import Mapping

import islpy as isl

from polyc.errors import (
    ArgumentError,
    BudgetError,
    IllegalTransformError,
    ScheduleError,
)
from polyc.ir.deps import operation_budget, over_budget
from polyc.ir.kernel import Kernel, access_map
from schedules import stree
from schedules.apply import apply_schedule
from schedules.bands import merge_bands, permute
from schedules.host.bounded import TIMEOUT, bounded_compute
from schedules.host.cache_model import MIN_PARALLEL_WORK, Cache, Model
from schedules.host.parallel import (
    attempt,
    band_at,
    is_coincident,
    mark_parallel_below,
    parallel_tiles,
)
from schedules.tiling import tile as tile_band

FUSION = ("max", "smart", "none")
#: isl operations allowed to the scheduler: a 20-statement kernel needs ~250k; a hard
#: random 4-statement program hits the limit after ~0.8 s (isl counts only some of
#: its work, so the budget is kept well below the point where time runs away)
DEFAULT_BUDGET = 600_000
#: CPU-time bound on one call of isl's scheduler (see bounded_compute)
DEFAULT_SECONDS = 5.0


def auto(
    kernel: Kernel,
    *,
    fusion: str = "smart",
    tile: bool = True,
    parallel: bool = True,
    params: Mapping[str, int] | None = None,
    cache: Cache | None = None,
    max_operations: int = DEFAULT_BUDGET,
    max_seconds: float = DEFAULT_SECONDS,
    min_parallel_work: int = MIN_PARALLEL_WORK,
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
        max_operations: isl's operation budget for the scheduler.
        max_seconds: a CPU-time bound on each call of isl's scheduler (see
            :func:`schedules.host.bounded.bounded_compute`; wall time only stops a
            child that is stuck). isl does not count every step against its
            operation budget (some problems spin in its LP solver for minutes), so
            the scheduler runs in a forked child that is stopped at the deadline;
            an answer that cost more CPU time than the bound is refused, so
            ``max_seconds=0`` always raises.
        min_parallel_work: statement instances one entry of a loop (one
            fork/join) must run for the loop to be marked ``@parallel`` (see
            :data:`schedules.host.cache_model.MIN_PARALLEL_WORK`).

    When isl finds no schedule (it can fail on legal programs), ``auto`` retries
    without fusion and then keeps the program order, tiling and marking what it can.

    Raises:
        ArgumentError: an unknown fusion strategy.
        BudgetError: when isl's scheduler runs past ``max_operations`` or
            ``max_seconds``.
    """
    if fusion not in FUSION:
        raise ArgumentError(
            f"auto: fusion={fusion!r} is not a strategy because the strategies are "
            f"{', '.join(FUSION)}. Pass one of those."
        )
    try:
        sched = isl_schedule(kernel, fusion, max_operations, max_seconds=max_seconds)
    except ScheduleError:
        # isl can fail to find a schedule for legal programs ("unable to carry
        # dependences"); fall back to no fusion, then to the program order
        try:
            sched = isl_schedule(
                kernel, "none", max_operations, max_seconds=max_seconds
            )
        except ScheduleError:
            sched = kernel.original.schedule
    model = Model(kernel, params, cache, min_parallel_work)
    if tile and _time_tiling_does_not_pay(sched, model):
        try:
            alt = isl_schedule(
                kernel, fusion, max_operations, True, max_seconds=max_seconds
            )
        except ScheduleError:
            alt = None
        if alt is not None and _has_coincident(stree.from_isl(alt)):
            sched = alt
    root = stree.name_bands(stree.from_isl(sched))
    out = apply_schedule(kernel, stree.to_isl(root))
    if not (tile or parallel):
        return out
    for name in _outermost_bands(out):
        out = _optimise_band(out, name, model, tile, parallel)
    if parallel:
        out = mark_parallel_below(out, model)
    return out


def isl_schedule(
    kernel: Kernel,
    fusion: str,
    max_operations: int,
    outer_coincidence: bool = False,
    max_seconds: float = DEFAULT_SECONDS,
) -> isl.Schedule:
    """isl's schedule for the kernel's dependences under an operation budget and a
    CPU-time deadline; ``outer_coincidence`` asks isl to put dependence-free loops
    outermost.

    Raises:
        BudgetError: when isl runs past ``max_operations`` or ``max_seconds``.
    """
    deps = kernel.deps.validity.intersect_params(kernel.context)
    ctx = isl.DEFAULT_CONTEXT
    saved = (
        ctx.get_schedule_whole_component(),
        ctx.get_schedule_serialize_sccs(),
        ctx.get_schedule_separate_components(),
        ctx.get_schedule_outer_coincidence(),
    )
    ctx.set_schedule_outer_coincidence(int(outer_coincidence))
    ctx.set_schedule_whole_component(1 if fusion == "max" else 0)
    ctx.set_schedule_separate_components(0 if fusion == "max" else 1)
    ctx.set_schedule_serialize_sccs(1 if fusion == "none" else 0)
    failure, exhausted = None, False
    try:
        with operation_budget(max_operations):
            sc = isl.ScheduleConstraints.on_domain(kernel.domain)
            sc = sc.set_context(kernel.context)
            proximity = deps.union(_input_reuse(kernel)) if fusion == "max" else deps
            sc = sc.set_validity(deps).set_proximity(proximity).set_coincidence(deps)
            return bounded_compute(sc, max_seconds)
    except isl.Error as err:
        failure = str(err)  # raised below, outside this handler: isl errors do
        # not compare, and chained exceptions get compared by test tools
        exhausted = over_budget(err)
    finally:
        ctx.set_schedule_whole_component(saved[0])
        ctx.set_schedule_serialize_sccs(saved[1])
        ctx.set_schedule_separate_components(saved[2])
        ctx.set_schedule_outer_coincidence(saved[3])
    if failure == TIMEOUT:
        raise BudgetError(
            f"auto: isl's scheduler ran past its deadline of {max_seconds:g} s "
            f"because {kernel.name} ({len(kernel.statements)} statements) is a hard "
            "scheduling problem for it. Pass a larger max_seconds=, or fusion='none'."
        )
    if exhausted:
        raise BudgetError(
            f"auto: isl's scheduler ran past its budget of {max_operations} "
            f"operations because {kernel.name} ({len(kernel.statements)} "
            "statements) is a hard scheduling problem for it. Pass a larger "
            "max_operations=, or fusion='none'."
        )
    raise ScheduleError(
        f"auto: isl's scheduler failed because isl says: {failure}. Try another "
        "fusion strategy, or schedule the kernel by hand."
    )


def _input_reuse(kernel: Kernel) -> isl.UnionMap:
    """Pairs of instances of different statements that read the same element, the
    earlier statement first (read-after-read: locality that maximal fusion wants)."""
    reads = None
    for s in kernel.statements:
        for ld in s.reads:
            m = isl.UnionMap.from_map(access_map(s, ld, kernel.params))
            reads = m if reads is None else reads.union(m)
    if reads is None:
        return isl.UnionMap.empty(kernel.context.get_space())
    rank = {s.name: n for n, s in enumerate(kernel.statements)}
    pairs = reads.apply_range(reads.reverse())
    out = isl.UnionMap.empty(pairs.get_space())
    maps: list[isl.Map] = []
    pairs.foreach_map(maps.append)
    for m in maps:
        src = m.get_tuple_name(isl.dim_type.in_)
        dst = m.get_tuple_name(isl.dim_type.out)
        if rank[src] < rank[dst]:
            out = out.union(isl.UnionMap.from_map(m))
    return out.intersect_params(kernel.context)


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
    kernel: Kernel, name: str, model: Model, tile: bool, parallel: bool
) -> Kernel:
    kernel, merged = _contiguous_innermost(kernel, name, model)
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
