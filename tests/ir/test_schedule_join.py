"""Schedules combined in pairs (polyc.ir.tree.joined): the same schedule as
combined one after the other, children in order, for any count of parts."""

from __future__ import annotations

import islpy as isl
import pytest

from polyc.ir import tree
from schedules import stree
from tests.support.small_kernels import overwritten


def _parts(n: int) -> list[isl.Schedule]:
    return [
        isl.Schedule.from_domain(isl.UnionSet(f"{{ S{i}[j] : 0 <= j < {i + 2} }}"))
        for i in range(n)
    ]


def _one_after_the_other(parts, combine):
    out = parts[0]
    for p in parts[1:]:
        out = combine(out, p)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 33])
@pytest.mark.parametrize("combine", [isl.Schedule.sequence, isl.Schedule.set])
def test_joined_in_pairs_is_the_schedule_joined_in_turn(n, combine):
    got = tree.joined(_parts(n), combine)
    want = _one_after_the_other(_parts(n), combine)
    assert got.plain_is_equal(want)
    if n > 1:
        root = got.get_root().child(0)
        assert root.n_children() == n  # one flat node: isl flattens the pairs
        names = [
            root.child(i).filter_get_filter().get_set_list().get_at(0).get_tuple_name()
            for i in range(n)
        ]
        assert names == [f"S{i}" for i in range(n)]


def test_a_programs_tree_rebuilds_its_schedule():
    """(isl's filters of a rebuilt sequence are the statements' spaces, where
    the frontend's are their domains: the same schedule, not plainly equal.)"""
    kernel = overwritten(12, "chain")
    root = stree.from_isl(kernel.schedule)
    again = stree.to_isl(root)
    assert tree.flat_map(again).is_equal(tree.flat_map(kernel.schedule))
    assert stree.statements(stree.from_isl(again)) == stree.statements(root)
    in_turn = _one_after_the_other(
        [stree.to_isl(c) for c in root.children], isl.Schedule.sequence
    )
    assert again.plain_is_equal(in_turn)
