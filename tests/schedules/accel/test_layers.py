"""A layer's sub-kernel: its own analyses, and the whole program's dependences
between its statements."""

from __future__ import annotations

from schedules.accel.layers import sub_kernel
from schedules.legality import dependences
from tests.support.small_kernels import overwritten as _overwritten
from tests.support.small_kernels import window as _window


def test_a_part_has_the_whole_programs_dependences_between_its_statements():
    whole = _overwritten()
    part = sub_kernel(whole, (0, 2))
    assert [s.name for s in part.statements] == ["S0", "S2"]
    assert part.part_of is whole
    # on its own the part would see a flow S0 -> S2; in the program S1 kills it
    assert dependences(part) == []
    alone = part.replace(part_of=None)
    assert [(kind, a) for kind, a, _ in dependences(alone)] == [("flow", "T")]


def test_a_part_fills_only_its_own_analyses():
    whole = _overwritten()
    part = sub_kernel(whole, (0, 2))
    assert "schedules.dependences" not in part._analyses
    assert part.deps is not whole.deps
    assert dependences(part) == []
    assert "schedules.dependences" in part._analyses
    assert sub_kernel(whole, (0, 2)) is part  # memoised by the whole
    tiled = part.with_schedule(part.schedule)
    assert dependences(tiled) is dependences(part)


def _fusion_check(kernel, d: int = 1):
    """``(refused without dependences, can_fuse)`` of the last statement (the
    sum) with the ones before it (Y and the sum's init)."""
    from schedules.accel.layers import _runs_backwards, _simple, top_children
    from schedules.fusion import can_fuse

    items = [_simple(kernel, c) for c in top_children(kernel)]
    group, (stmt, band) = items[:-1], items[-1]
    fast = _runs_backwards(kernel, [s for s, _ in group], stmt, d)
    full = can_fuse(kernel, [b for _, b in group] + [band], depth=d)
    return fast, full


def test_a_fusion_that_reverses_a_flow_is_refused_without_the_dependences():
    # Z[i] reads Y[i + 1] and Y[i + 2], written at later i: fused on i, the
    # flow runs backwards
    assert _fusion_check(_window(later=True)) == (True, False)


def test_a_fusion_the_accesses_do_not_refuse_is_left_to_can_fuse():
    assert _fusion_check(_window(later=False)) == (False, True)
