"""Placement's helpers on isl schedule trees that hold extension nodes.

The transformations of :mod:`schedules.stree` rebuild whole trees and do not take
extension nodes (placement's copies). Placement and engine mapping come last in a
schedule and edit the isl tree in place of a cursor instead; these helpers find
their way around it: positions are paths of child indices from the root (the
traversal itself, ``walk_paths``/``at``/``path_of``/``find_band_mark``, is
:mod:`polyc.ir.tree`'s).
"""

from __future__ import annotations

from collections.abc import Callable

import islpy as isl

from polyc.errors import ScheduleError
from polyc.ir import marks as placemarks
from polyc.ir import tree

T = isl.schedule_node_type
Path = tree.Path


def body_of(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Skip placement wrappers (``@buffer``/``@scope`` marks, a copy extension and
    its sequence) down to the node they wrap."""
    while True:
        name = tree.mark_name(node)
        if name and placemarks.kind(name) in ("buffer", "scope"):
            node = node.child(0)
            continue
        if node.get_type() == T.extension:
            seq = node.child(0)
            node = _kernel_child(seq).child(0)
            continue
        if node.get_type() == T.filter and node.has_parent():
            node = node.child(0)
            continue
        return node


def _kernel_child(seq: isl.ScheduleNode) -> isl.ScheduleNode:
    """The filter child of a copy sequence that holds the kernel's statements."""
    for i in range(seq.n_children()):
        f = seq.child(i)
        sets: list[isl.Set] = []
        f.filter_get_filter().foreach_set(sets.append)
        if any(not s.get_tuple_name().startswith("pc_") for s in sets):
            return f
    raise ScheduleError("schedule: a copy sequence has no kernel statement.")


def replace_mark(
    schedule: isl.Schedule, match: Callable[[str], bool], text: str | None
) -> isl.Schedule:
    """Replace (``text``) or delete (None) the first mark whose name matches."""
    for node in tree.walk(schedule):
        name = tree.mark_name(node)
        if name is not None and match(name):
            node = node.delete()
            if text is not None:
                node = node.insert_mark(isl.Id(text))
            return node.get_schedule()
    return schedule


def statements_of(node: isl.ScheduleNode) -> set[str]:
    """Names of the statements (kernel and copies) below ``node``."""
    names: set[str] = set()
    node.get_universe_domain().foreach_set(lambda s: names.add(s.get_tuple_name()))
    return names


def layer_top(schedule: isl.Schedule, path: Path) -> Path:
    """The path of the layer that contains ``path``: a child of the root sequence's
    filters, or the root's child when the root has no sequence."""
    root = schedule.get_root()
    first = root.child(0)
    if first.get_type() == T.sequence and len(path) >= 3:
        return path[:3]
    return path[:1]


def layers(schedule: isl.Schedule) -> list[Path]:
    """Paths of every layer top (see :func:`layer_top`)."""
    first = schedule.get_root().child(0)
    if first.get_type() == T.sequence:
        return [(0, i, 0) for i in range(first.n_children())]
    return [(0,)]
