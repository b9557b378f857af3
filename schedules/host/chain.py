"""The fallback chain of the automatic scheduler: a schedule for every valid kernel.

isl's scheduler can run for minutes on a legal program (a 47-statement filter, a
3-D stencil whose parameter context is a union of many pieces) or fail outright
("unable to carry dependences"). :func:`candidates` asks for a schedule in steps,
each one cheaper or more robust than the one before, each under its own CPU-time
bound (:data:`STEP_SECONDS`, in a forked child: see :mod:`schedules.host.bounded`):

1. ``isl``: isl's scheduler on the exact dependences and the kernel's context;
2. ``isl-relaxed``: the same with the parameter context relaxed to the lower bounds
   of the parameters, and the dependences simplified (``gist``) under the true
   context. The C frontend's context says every access is in bounds, which for
   PolyBench's ``A[N][N]`` walked up to ``n`` is a union of one piece per case
   (``n <= 0``, ``0 < n <= N``, ...); intersected with the dependences it splits
   each of them into as many pieces, and isl's LP grows with every piece. The
   simplified dependences agree with the exact ones wherever the context holds, so
   the schedule is as legal (and is checked again anyway);
3. ``isl-sccs``: relaxed, one strongly connected component after the other, no
   fusion (isl's ``serialize_sccs``): a smaller problem per component;
4. ``feautrier``: relaxed, isl's Feautrier scheduler (one dimension at a time,
   carrying as many dependences as possible; no proximity);
5. ``program-order``: the program's own schedule, its bands annotated with which
   members are permutable and dependence-free (so that the scheduler still tiles
   and marks parallel loops where that is legal). It always exists.

Steps 1 and 2 both run (when the first succeeds, the second usually returns the
same schedule), unless the context holds nothing but lower bounds (then the second
is the first again). When the context is a union of pieces, step 2 runs first and
step 1 only when it found nothing: on such contexts the exact problem is the one
that runs past its bound (PolyBench's adi, heat-3d, fdtd-2d, 3mm and doitgen at every
dataset size), and trying it first cost 2 s each time. Steps 3 and 4 run only when
neither found a schedule. Every
schedule returned here is checked against the exact dependences by
``apply_schedule`` before it is used.

Budgets: by default each isl step gets :data:`STEP_SECONDS` of CPU time and no
operation limit, and a step that runs past it is recorded and skipped. A caller who
sets ``max_operations`` or ``max_seconds`` gets those bounds for every isl step and
:class:`~polyc.errors.BudgetError` when one is exceeded, as before the chain.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import islpy as isl

from polyc.errors import BudgetError, ScheduleError
from polyc.ir.deps import operation_budget, over_budget
from polyc.ir.kernel import Kernel, access_map
from schedules import stree
from schedules.host.bounded import TIMEOUT, bounded_compute

#: the steps, in the order they are tried
STEPS = ("isl", "isl-relaxed", "isl-sccs", "feautrier", "program-order")
#: what :class:`schedules.host.scheduler.Found` names as its step when the
#: scheduler time-tiled a stencil (:mod:`schedules.host.stencil`) before the chain
TIME_TILES = "time-tiles"
#: CPU seconds each isl step may take when the caller sets no budget
STEP_SECONDS = 2.0


@dataclass(frozen=True)
class Budget:
    """The bounds on one isl step; ``explicit`` when the caller set one of them
    (then running past it raises instead of moving to the next step)."""

    max_operations: int | None = None
    max_seconds: float | None = None

    @property
    def explicit(self) -> bool:
        return self.max_operations is not None or self.max_seconds is not None

    @property
    def seconds(self) -> float:
        return STEP_SECONDS if self.max_seconds is None else self.max_seconds


@dataclass(frozen=True)
class Candidate:
    """A schedule one step of the chain found (not yet checked)."""

    step: str
    schedule: isl.Schedule


@dataclass(frozen=True)
class Attempts:
    """The candidates in chain order, and why each step that found none failed
    (``"isl: ran past its deadline of 2 s"``)."""

    candidates: tuple[Candidate, ...]
    failures: tuple[str, ...]


def candidates(kernel: Kernel, fusion: str, budget: Budget) -> Attempts:
    """The schedules of the chain's steps for ``kernel`` (see the module docstring);
    the program order is always the last.

    Raises:
        BudgetError: only for an explicit budget, when an isl step runs past it.
    """
    found: list[Candidate] = []
    failures: list[str] = []

    def run(step: str, **options) -> None:
        try:
            sched = isl_schedule(
                kernel, options.pop("fusion", fusion), budget, **options
            )
        except BudgetError as err:
            if budget.explicit:
                raise
            failures.append(f"{step}: {_reason(err)}")
            return
        except ScheduleError as err:
            failures.append(f"{step}: {_reason(err)}")
            return
        if not any(c.schedule.plain_is_equal(sched) for c in found):
            found.append(Candidate(step, sched))

    context = kernel.context
    if context.coalesce().n_basic_set() > 1:
        # a union of pieces: isl on the exact problem is the one that runs away
        run("isl-relaxed", relaxed=True)
        if not found:
            run("isl")
    else:
        run("isl")
        if not found or not lower_bounds(context).is_equal(context):
            run("isl-relaxed", relaxed=True)  # else the same problem again
    if not found:
        run("isl-sccs", relaxed=True, fusion="none")
    if not found:
        run("feautrier", relaxed=True, feautrier=True)
    found.append(Candidate("program-order", program_order(kernel)))
    return Attempts(tuple(found), tuple(failures))


def _reason(err: Exception) -> str:
    """The middle of an ``auto: <what> because <why>. <fix>`` message."""
    text = str(err).removeprefix("auto: ")
    return text.split(" because ", 1)[0]


def isl_schedule(
    kernel: Kernel,
    fusion: str,
    budget: Budget,
    outer_coincidence: bool = False,
    relaxed: bool = False,
    feautrier: bool = False,
) -> isl.Schedule:
    """isl's schedule for the kernel's dependences under ``budget``.

    ``outer_coincidence`` asks isl to put dependence-free loops outermost;
    ``relaxed`` schedules under the lower bounds of the parameters with the
    dependences simplified under the context; ``feautrier`` uses isl's Feautrier
    algorithm instead of the Pluto-style one.

    Raises:
        BudgetError: when isl runs past the budget's operations or seconds.
        ScheduleError: when isl finds no schedule.
    """
    deps = kernel.deps.validity
    context = kernel.context
    if relaxed:
        deps = deps.gist_params(context)
        context = lower_bounds(context)
    else:
        deps = deps.intersect_params(context)
    ctx = isl.DEFAULT_CONTEXT
    saved = _options(ctx)
    ctx.set_schedule_outer_coincidence(int(outer_coincidence))
    ctx.set_schedule_whole_component(1 if fusion == "max" else 0)
    ctx.set_schedule_separate_components(0 if fusion == "max" else 1)
    ctx.set_schedule_serialize_sccs(1 if fusion == "none" else 0)
    ctx.set_schedule_algorithm(1 if feautrier else 0)
    failure, exhausted = None, False
    ops = budget.max_operations
    try:
        with operation_budget(ops) if ops is not None else nullcontext():
            sc = isl.ScheduleConstraints.on_domain(kernel.domain)
            sc = sc.set_context(context)
            proximity = deps.union(_input_reuse(kernel)) if fusion == "max" else deps
            sc = sc.set_validity(deps).set_proximity(proximity).set_coincidence(deps)
            return bounded_compute(sc, budget.seconds)
    except isl.Error as err:
        failure = str(err)  # raised below, outside this handler: isl errors do
        # not compare, and chained exceptions get compared by test tools
        exhausted = over_budget(err)
    finally:
        _restore(ctx, saved)
    what = f"{kernel.name} ({len(kernel.statements)} statements)"
    if failure == TIMEOUT:
        raise BudgetError(
            f"auto: isl's scheduler ran past its deadline of {budget.seconds:g} s "
            f"because {what} is a hard scheduling problem for it. Pass a larger "
            "max_seconds=, or leave the budgets unset (auto then falls back to "
            "simpler schedulers)."
        )
    if exhausted:
        raise BudgetError(
            f"auto: isl's scheduler ran past its budget of {ops} operations because "
            f"{what} is a hard scheduling problem for it. Pass a larger "
            "max_operations=, or leave the budgets unset (auto then falls back to "
            "simpler schedulers)."
        )
    raise ScheduleError(
        f"auto: isl's scheduler failed because isl says: {failure}. Try another "
        "fusion strategy, or schedule the kernel by hand."
    )


_OPTIONS = (
    "whole_component",
    "serialize_sccs",
    "separate_components",
    "outer_coincidence",
    "algorithm",
)


def _options(ctx: isl.Context) -> tuple[int, ...]:
    return tuple(getattr(ctx, f"get_schedule_{name}")() for name in _OPTIONS)


def _restore(ctx: isl.Context, saved: tuple[int, ...]) -> None:
    for name, value in zip(_OPTIONS, saved, strict=True):
        getattr(ctx, f"set_schedule_{name}")(value)


def lower_bounds(context: isl.Set) -> isl.Set:
    """The constraints ``p >= c`` on single parameters that hold in all of
    ``context`` (the universe when none does)."""
    out = isl.Set.universe(context.get_space())
    if context.is_empty():
        return out
    for pos in range(context.dim(isl.dim_type.param)):
        alone = context.move_dims(isl.dim_type.set, 0, isl.dim_type.param, pos, 1)
        low = alone.dim_min_val(0)
        if not low.is_int():
            continue
        name = context.get_dim_name(isl.dim_type.param, pos)
        piece = isl.Set(
            f"[{name}] -> {{ : {name} >= {low.to_python()} }}"
        ).align_params(context.get_space())
        out = out.intersect(piece)
    return out


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


# the program order ---------------------------------------------------------------


def program_order(kernel: Kernel) -> isl.Schedule:
    """The program-order schedule with each band's ``permutable`` and
    ``coincident`` flags computed from the exact dependences: a member is
    coincident when every dependence between instances the outer bands do not
    order has distance 0 along it, and the band is permutable when every such
    distance is non-negative along every member."""
    from schedules.legality import dependences

    deps = dependences(kernel)
    root = stree.from_isl(kernel.original.schedule)

    def visit(node: stree.Node, path: stree.Path) -> stree.Node:
        kids = [visit(c, path + (n,)) for n, c in enumerate(stree.children(node))]
        node = stree.with_children(node, kids) if kids else node
        if not isinstance(node, stree.Band):
            return node
        permutable, coincident = _band_flags(root, path, node, deps)
        return stree.Band(node.schedule, node.child, permutable, coincident)

    return stree.to_isl(visit(root, ()))


def _band_flags(
    root: stree.Node, path: stree.Path, band: stree.Band, deps
) -> tuple[bool, tuple[bool, ...]]:
    dom = stree.domain(band)
    inside = set(stree.statements(band))
    prefix = stree.per_statement([b.schedule for b in stree.bands_above(root, path)])
    members = stree.per_statement([band.schedule])
    n = band.n_member
    nonneg = [True] * n
    zero = [True] * n
    for _, _, m in deps:
        src = m.get_tuple_name(isl.dim_type.in_)
        dst = m.get_tuple_name(isl.dim_type.out)
        if src not in inside or dst not in inside:
            continue
        m = m.intersect_domain(_part(dom, src)).intersect_range(_part(dom, dst))
        if prefix:
            m = m.intersect(prefix[src].apply_range(prefix[dst].reverse()))
        if m.is_empty():
            continue
        deltas = m.apply_domain(members[src]).apply_range(members[dst]).deltas()
        for p in range(n):
            if not zero[p] and not nonneg[p]:
                continue
            low = deltas.dim_min_val(p)
            lo_ok = not (low.is_neginfty() or low.is_neg() or low.is_nan())
            zero[p] = zero[p] and lo_ok and deltas.dim_max_val(p).is_zero()
            nonneg[p] = nonneg[p] and lo_ok
    return all(nonneg), tuple(zero)


def _part(dom: isl.UnionSet, name: str) -> isl.Set:
    sets: list[isl.Set] = []
    dom.foreach_set(sets.append)
    return next(s for s in sets if s.get_tuple_name() == name)
