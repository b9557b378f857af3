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
   space loops stay parallel and vectorisable (see :mod:`schedules.cost`).
   Every outermost permutable band is tiled with sizes from :mod:`schedules.cost`
   (cache footprint of a tile), after ordering its members so that the innermost
   point loop is the one with contiguous accesses.
3. The outermost loop that carries no dependence is marked ``@parallel``: a
   coincident tile loop moved to the front, or, for a band with none (a time-tiled
   stencil), the inner tile loop of a wavefront (the outer tile loop skewed by the
   next one).

Each decision is made through the public transformations, so ``kernel.history``
shows them and :func:`schedules.replay` repeats them. isl runs under an operation
budget so that a hard input raises :class:`~polyc.errors.BudgetError` instead of
hanging the compiler.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Mapping

import islpy as isl
import numpy as np

from polyc.errors import (
    ArgumentError,
    BudgetError,
    IllegalTransformError,
    ScheduleError,
)
from polyc.ir import Kernel, access_map
from schedules import stree
from schedules.bands import permute, skew, split_band
from schedules.cost import Cache, Model
from schedules.io import apply_schedule
from schedules.marks import parallel as mark_parallel
from schedules.tiling import tile as tile_band

FUSION = ("max", "smart", "none")
#: isl operations allowed to the scheduler: a 20-statement kernel needs ~250k; a hard
#: random 4-statement program hits the limit after ~0.8 s (isl counts only some of
#: its work, so the budget is kept well below the point where time runs away)
DEFAULT_BUDGET = 600_000
#: wall-clock bound on one call of isl's scheduler (see bounded_compute)
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
        max_seconds: a wall-clock bound on each call of isl's scheduler. isl does not
            count every step against its operation budget (some problems spin in
            its LP solver for minutes), so the scheduler runs in a forked child that
            is stopped at the deadline.

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
    model = Model(kernel, params, cache)
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
        out = _mark_parallel_below(out, model)
    return out


def isl_schedule(
    kernel: Kernel,
    fusion: str,
    max_operations: int,
    outer_coincidence: bool = False,
    max_seconds: float = DEFAULT_SECONDS,
) -> isl.Schedule:
    """isl's schedule for the kernel's dependences under an operation budget and a
    wall-clock deadline; ``outer_coincidence`` asks isl to put dependence-free loops
    outermost.

    Raises:
        BudgetError: when isl runs past ``max_operations`` or ``max_seconds``.
    """
    deps = kernel.deps.validity.intersect_params(kernel.context)
    ctx = isl.DEFAULT_CONTEXT
    saved = (
        ctx.get_schedule_whole_component(),
        ctx.get_schedule_serialize_sccs(),
        ctx.get_max_operations(),
        ctx.get_schedule_separate_components(),
        ctx.get_schedule_outer_coincidence(),
    )
    ctx.set_schedule_outer_coincidence(int(outer_coincidence))
    ctx.set_schedule_whole_component(1 if fusion == "max" else 0)
    ctx.set_schedule_separate_components(0 if fusion == "max" else 1)
    ctx.set_schedule_serialize_sccs(1 if fusion == "none" else 0)
    ctx.reset_operations()
    ctx.set_max_operations(max_operations)
    failure = None
    try:
        sc = isl.ScheduleConstraints.on_domain(kernel.domain)
        sc = sc.set_context(kernel.context)
        proximity = deps.union(_input_reuse(kernel)) if fusion == "max" else deps
        sc = sc.set_validity(deps).set_proximity(proximity).set_coincidence(deps)
        return bounded_compute(sc, max_seconds)
    except isl.Error as err:
        failure = str(err)  # raised below, outside this handler: isl errors do
        # not compare, and chained exceptions get compared by test tools
    finally:
        ctx.set_max_operations(saved[2])
        ctx.reset_operations()
        ctx.set_schedule_whole_component(saved[0])
        ctx.set_schedule_serialize_sccs(saved[1])
        ctx.set_schedule_separate_components(saved[3])
        ctx.set_schedule_outer_coincidence(saved[4])
    if failure == _TIMEOUT:
        raise BudgetError(
            f"auto: isl's scheduler ran past its deadline of {max_seconds:g} s "
            f"because {kernel.name} ({len(kernel.statements)} statements) is a hard "
            "scheduling problem for it. Pass a larger max_seconds=, or fusion='none'."
        )
    if "operations" in failure:
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


_TIMEOUT = "polyc: deadline"


def bounded_compute(sc: isl.ScheduleConstraints, seconds: float) -> isl.Schedule:
    """``sc.compute_schedule()`` stopped after ``seconds`` of wall time.

    The computation runs in a forked child (copy-on-write: nothing is re-imported)
    that writes the schedule back as text through a pipe; at the deadline the child
    is killed and ``isl.Error(_TIMEOUT)`` is raised. Without fork (not POSIX) the
    call runs in this process, bounded only by isl's operation budget.
    """
    if not hasattr(os, "fork"):
        return sc.compute_schedule()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: compute, report, and leave without running any cleanup
        status = 0
        try:
            os.close(read_end)
            try:
                text = "ok\n" + str(sc.compute_schedule())
            except isl.Error as err:
                text = "error\n" + str(err)
            data = text.encode()
            while data:
                data = data[os.write(write_end, data) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            ready = (
                select.select([read_end], [], [], max(left, 0))[0] if left > 0 else []
            )
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise isl.Error(_TIMEOUT)
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    kind, _, body = b"".join(chunks).decode().partition("\n")
    if kind == "ok":
        return isl.Schedule(body)
    raise isl.Error(body or "the scheduler's process stopped without an answer")


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


def _band(kernel: Kernel, name: str):
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, name, "auto")
    band_path = path + (0,) * (1 + len(nb.attrs))
    return stree.bands_above(root, band_path), nb


def _optimise_band(
    kernel: Kernel, name: str, model: Model, tile: bool, parallel: bool
) -> Kernel:
    outer, nb = _band(kernel, name)
    band = nb.band
    sizes = None
    tileable = tile and band.permutable and band.n_member >= 2
    if tileable and not model.iteration_fits(outer, band):
        sizes = model.tile_sizes(outer, band)
    if sizes is None:
        return kernel
    inner = model.innermost(outer, band)
    order = [p for p in range(band.n_member) if p != inner] + [inner]
    if order != list(range(band.n_member)):
        kernel = permute(kernel, name, [nb.members[p] for p in order])
        outer, nb = _band(kernel, name)
        sizes = {order.index(p): s for p, s in sizes.items()}
    kernel = tile_band(
        kernel, name, {nb.members[p]: s for p, s in sorted(sizes.items())}
    )
    if parallel:
        kernel = _parallel_tiles(kernel, f"{name}_t")
    return kernel


#: statement instances a parallel loop must run per entry to pay for the fork/join
MIN_PARALLEL_WORK = 100_000


def _mark_parallel_below(kernel: Kernel, model: Model) -> Kernel:
    """Mark the outermost dependence-free loop on every path that has none yet
    (bands that were not tiled, e.g. the space loops of a stencil's time step),
    when one entry of it runs at least ``MIN_PARALLEL_WORK`` instances."""
    tried: set = set()
    while True:
        root = stree.from_isl(kernel.schedule)
        todo = None
        for path, node in stree.walk(root):
            nb = stree.named_at(node)
            if nb is None or "@parallel" in nb.attrs or not any(nb.band.coincident):
                continue
            if _marked_above(root, path) or (path, nb.name) in tried:
                continue
            if _work_per_entry(root, path, nb, model) < MIN_PARALLEL_WORK:
                continue
            todo = (path, nb)
            break
        if todo is None:
            return kernel
        tried.add((todo[0], todo[1].name))
        kernel = _parallel_band(kernel, todo[1])


def _work_per_entry(root, path, nb: stree.Named, model: Model) -> float:
    """Statement instances below the band divided by the times it is entered (the
    product of the extents of the enclosing band members)."""
    dom = stree.domain(nb.band)
    total = 0.0
    for name in stree.statements(nb.band):
        total += float(np.prod(model.iterator_extents(model.kernel.statement(name))))
    entries = 1.0
    for band in stree.bands_above(root, path):
        for p in range(band.n_member):
            entries *= max(model.extent(band.member(p), dom), 1)
    return total / entries


def _marked_above(root: stree.Node, path: stree.Path) -> bool:
    return any(
        isinstance(n := stree.at(root, path[:k]), stree.Mark) and n.name == "@parallel"
        for k in range(len(path))
    )


def _parallel_band(kernel: Kernel, nb: stree.Named) -> Kernel:
    """Mark ``nb`` parallel, moving its first coincident member to the front when the
    band is permutable."""
    name, band = nb.name, nb.band
    first = next(p for p in range(band.n_member) if _coincident(band, p))
    if first and band.permutable:
        order = [nb.members[first]] + [
            m for p, m in enumerate(nb.members) if p != first
        ]
        kernel = _try(lambda: permute(kernel, name, order), kernel)
    return _try(lambda: mark_parallel(kernel, name), kernel)


def _parallel_tiles(kernel: Kernel, name: str) -> Kernel:
    _, nb = _band(kernel, name)
    band = nb.band
    coincident = [p for p in range(band.n_member) if _coincident(band, p)]
    if coincident:
        first = coincident[0]
        if first:
            order = [nb.members[first]] + [
                m for p, m in enumerate(nb.members) if p != first
            ]
            kernel = _try(lambda: permute(kernel, name, order), kernel)
        return _try(lambda: mark_parallel(kernel, name), kernel)
    if band.n_member < 2:
        return kernel

    def wavefront() -> Kernel:
        k = skew(kernel, name, nb.members[0], {nb.members[1]: 1})
        k = split_band(k, name, 1)
        return mark_parallel(k, f"{name}_{nb.members[1]}")

    return _try(wavefront, kernel)


def _coincident(band: stree.Band, p: int) -> bool:
    return p < len(band.coincident) and band.coincident[p]


def _try(fn, fallback: Kernel) -> Kernel:
    """``fn()``, or ``fallback`` when the check refuses it (the model's guess of a
    parallel loop can be wrong; the exact check decides)."""
    try:
        return fn()
    except IllegalTransformError:
        return fallback
