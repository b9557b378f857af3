"""Schedules in and out: isl's YAML form, union maps, and replaying a history."""

from __future__ import annotations

from collections.abc import Iterable

import islpy as isl

from polyc.errors import ScheduleError
from polyc.ir import tree
from polyc.ir.kernel import Kernel, Step, point_values
from schedules import stree
from schedules.common import step
from schedules.legality import check


def to_yaml(kernel_or_schedule: Kernel | isl.Schedule) -> str:
    """A kernel's schedule tree in isl's YAML form (block style), with band names.

    The text can be saved, edited and loaded back with :func:`apply_schedule`.
    """
    sched = (
        kernel_or_schedule.schedule
        if isinstance(kernel_or_schedule, Kernel)
        else kernel_or_schedule
    )
    p = isl.Printer.to_str(sched.get_ctx()).set_yaml_style(isl.yaml_style.BLOCK)
    return p.print_schedule(sched).get_str()


def apply_schedule(
    kernel: Kernel, schedule: isl.Schedule | isl.UnionMap | str
) -> Kernel:
    """The kernel under a whole new schedule, after the legality check.

    ``schedule`` is an ``isl.Schedule``, isl's YAML text of one (as printed by
    :func:`to_yaml`, flow or block style), or an ``isl.UnionMap`` (or its text) from
    statement instances to time. It must schedule every instance of the kernel exactly
    once. Bands without a name mark get one (see ``stree.name_bands``); a union map
    becomes one band ``T(c0, c1, ...)``. ::

        apply_schedule(k, "{ S0[i, j] -> [j, i] }")

        for i in 0..N-1:                for j in 0..M-1:
          for j in 0..M-1:      ->        for i in 0..N-1:
            S0(i, j)                        S0(i, j)

    Raises:
        ScheduleError: text that isl cannot read, a schedule that misses or adds
            instances, a union map that gives an instance two times, or a band mark
            whose member count differs from its band's.
        IllegalTransformError: when the schedule runs a dependence backwards.
    """
    op = "apply_schedule"
    sched = _as_schedule(kernel, schedule, op)
    _check_domain(kernel, sched.get_domain(), op)
    root = stree.from_isl(sched)
    _check_marks(root, op)
    root = stree.name_bands(root)
    new = stree.to_isl(root)
    check(
        kernel,
        root,
        (),
        op,
        "the schedule is illegal",
        "Load a schedule that keeps every dependence forward (schedules.auto "
        "computes one).",
    )
    return kernel.with_schedule(new, step(op, to_yaml(new)))


def _as_schedule(kernel: Kernel, schedule, op: str) -> isl.Schedule:
    if isinstance(schedule, isl.Schedule):
        return schedule
    if isinstance(schedule, str):
        text = schedule.strip()
        try:
            if "domain" in text:
                return isl.Schedule(text)
            schedule = isl.UnionMap(text)
        except isl.Error as err:
            raise ScheduleError(
                f"{op}: the text is not an isl schedule or union map because isl "
                f"says: {err}. Write it as schedules.to_yaml prints it, or as "
                "'{ S0[i, j] -> [i, j] }'."
            ) from None
    if isinstance(schedule, isl.Map):
        schedule = isl.UnionMap.from_map(schedule)
    if not isinstance(schedule, isl.UnionMap):
        raise ScheduleError(
            f"{op}: cannot use a {type(schedule).__name__} as a schedule because it "
            "is no isl.Schedule, YAML text or union map. Pass one of those."
        )
    return _from_union_map(kernel, schedule, op)


def _from_union_map(kernel: Kernel, umap: isl.UnionMap, op: str) -> isl.Schedule:
    umap = umap.intersect_domain(kernel.domain)
    _check_domain(kernel, umap.domain(), op)
    if not umap.is_single_valued():
        maps: list[isl.Map] = []
        umap.foreach_map(maps.append)
        for m in maps:
            if not m.is_single_valued():
                pt = m.domain().sample_point()
                inst = _instance(kernel, pt)
                raise ScheduleError(
                    f"{op}: the union map gives instance {inst} more than one time "
                    "because it is not single-valued. Give each instance one time."
                )
    flat = tree.flat_map(umap)
    width = _width(flat)
    sched = isl.Schedule.from_domain(kernel.domain)
    if width == 0:
        return sched
    mupa = isl.MultiUnionPwAff.from_union_map(flat)
    sched = sched.insert_partial_schedule(mupa)
    members = [f"c{d}" for d in range(width)]
    node = sched.get_root().child(0).insert_mark(isl.Id(tree.band_mark("T", members)))
    return node.get_schedule()


def _width(umap: isl.UnionMap) -> int:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return max((m.dim(isl.dim_type.out) for m in maps), default=0)


def _check_domain(kernel: Kernel, dom: isl.UnionSet, op: str) -> None:
    want = kernel.domain.intersect_params(kernel.context)
    have = dom.intersect_params(kernel.context)
    missing = want.subtract(have)
    if not missing.is_empty():
        inst = _instance(kernel, missing.sample_point())
        raise ScheduleError(
            f"{op}: the schedule does not cover the kernel because instance {inst} is "
            "missing from its domain. Schedule every instance of every statement "
            "(start from schedules.to_yaml(kernel))."
        )
    extra = have.subtract(want)
    if not extra.is_empty():
        pt = extra.sample_point()
        raise ScheduleError(
            f"{op}: the schedule runs instances the kernel does not have because "
            f"{pt} is not in any statement's domain. Restrict the schedule's domain to "
            "the kernel's (schedules.to_yaml(kernel) shows it)."
        )


def _instance(kernel: Kernel, point: isl.Point) -> str:
    name = point.get_space().get_tuple_name(isl.dim_type.set)
    try:
        stmt = kernel.statement(name)
    except Exception:
        return str(point)
    return stmt.instance(point_values(point, stmt.depth))


def _check_marks(root: stree.Node, op: str) -> None:
    for _, node in stree.walk(root):
        if not isinstance(node, stree.Mark):
            continue
        parsed = tree.parse_band_mark(node.name)
        if parsed is None:
            continue
        nb = stree.named_at(node)
        if nb is None:
            raise ScheduleError(
                f"{op}: mark {node.name!r} names a band but is not above one because "
                "a band mark must sit directly above its band (attribute marks may come "
                "between). Move or remove the mark."
            )
        if len(nb.members) != nb.band.n_member:
            raise ScheduleError(
                f"{op}: mark {node.name!r} lists {len(nb.members)} members but its band "
                f"has {nb.band.n_member} because the mark and the band disagree. List "
                "one name per band member."
            )


#: transformations that a history may name, filled by ``schedules/__init__``
TRANSFORMATIONS: dict[str, object] = {}


def replay(original: Kernel, history: Iterable[Step]) -> Kernel:
    """Apply a recorded history (``kernel.history``) to ``original`` step by step;
    every step runs its legality check again.

    Raises:
        ScheduleError: a step that names no transformation.
        IllegalTransformError: a step that is illegal on this kernel (e.g. a history
            recorded under a context assumption that ``original`` lacks).
    """
    kernel = original
    for st in history:
        fn = TRANSFORMATIONS.get(st.name)
        if fn is None:
            raise ScheduleError(
                f"replay: step {st} names no transformation because the known ones are "
                f"{', '.join(sorted(TRANSFORMATIONS))}. Edit the history."
            )
        kernel = fn(kernel, *st.args, **dict(st.kwargs))
    return kernel
