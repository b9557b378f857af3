"""The accelerator scheduler plans the buffers of a network once, at its last
placement: the layers before only check that they fit
(``place(..., plan="check")``, :func:`schedules.accel.memplan.check`), and the
walks after each layer read only that layer's subtree. Planning at every layer
redid the whole network's plan each time (quadratic in the layers: about 10 s of
hf-mobilenetv2's compile). These tests hold the shortcuts to the answers of the
long ways: the same error at the same capacities, the same chosen kernel as its
history replayed (where every placement plans), the same misplaced buffers."""

from __future__ import annotations

import dataclasses

import pytest

import schedules as S
from accelerator import load_config
from polyc import compute as pc
from polyc.errors import ArgumentError, PlacementError
from polyc.ir import macmap
from polyc.ir import marks as pm
from polyc.ir.tree import unrelated_children
from polyc.ops import nn
from schedules.accel import levels, memplan
from schedules.accel.scheduler import schedule
from schedules.apply import replay
from tests.schedules.accel.test_levels_walk import _move
from tests.schedules.accel.test_operand_levels import three_sram


def _two_convs():
    """Two padded 3x3 convolutions in a row (their input boxes leave the arrays:
    clamped copies, so the level keeps a zero block)."""
    x = pc.placeholder("x", (1, 8, 10, 10), "int8")
    w1 = pc.placeholder("w1", (16, 8, 3, 3), "int8")
    w2 = pc.placeholder("w2", (16, 16, 3, 3), "int32")
    y = nn.relu(nn.conv2d(x, w1, None, stride=1, padding=1))
    z = nn.relu(nn.conv2d(y, w2, None, stride=1, padding=1))
    return pc.kernel("two_convs", [z])


def _with_capacity(spec, level: str, capacity: int):
    memory = tuple(
        dataclasses.replace(m, capacity_bytes=capacity) if m.name == level else m
        for m in spec.memory
    )
    return dataclasses.replace(spec, memory=memory)


def _outcome(fn):
    try:
        fn()
    except PlacementError as err:
        return str(err)
    return None


def test_the_fit_check_fails_exactly_where_planning_fails():
    """At every capacity around the largest layer's total (with and without the
    zero block a clamped copy keeps), the check raises what the planner raises."""
    spec = load_config("edge-npu")
    chosen = schedule(_two_convs(), spec).kernel
    plain = memplan._drop_scopes(chosen.schedule)
    bufs = memplan.buffers(plain)
    assert any(b.clamp for b in bufs) and len({b.name for b in bufs}) >= 4
    align = spec.memory[bufs[0].level_index].alignment_bytes
    per_layer = [
        sum(
            memplan.round_up(memplan._buffer(t).bytes, align)
            for t in layer
            if pm.kind(t) == "buffer"
        )
        for layer in memplan._layer_marks(plain)
    ]
    top = max(per_layer)
    zero = memplan.round_up(memplan.ZERO_BYTES, align)
    outcomes = set()
    for capacity in range(top - 2 * align, top + zero + 2 * align, align // 2):
        small = _with_capacity(spec, "sram", capacity)
        planned = _outcome(lambda s=small: memplan.replan(s, plain, kernel=chosen))
        checked = _outcome(lambda s=small: memplan.check(s, plain, kernel=chosen))
        assert checked == planned, capacity
        outcomes.add(planned is None)
    assert outcomes == {True, False}  # both sides of the boundary were tried


def test_a_placement_that_only_checks_raises_what_planning_raises():
    k = S.tile(_matmul(), "S1", {"i": 32, "j": 16, "k": 8})
    for plan in (True, "check"):
        with pytest.raises(
            PlacementError,
            match=r"place: the buffers do not fit in level l1 because it holds "
            r"16,384 bytes and 3 buffers live at once ask for 30,208 bytes",
        ):
            S.place(
                _matmul(),
                "S1",
                ["out", "A", "B"],
                "l1",
                config="tiny",
                depth=0,
                plan=plan,
            )
    with pytest.raises(
        ArgumentError,
        match=r"place: plan='later' is not supported because plan is True, False "
        r'or "check"',
    ):
        S.place(k, "S1_t", "A", "l1", config="tiny", plan="later")
    placed = S.place(k, "S1_t", ["A", "B"], "l1", config="tiny", plan="check")
    assert memplan.buffers(placed.schedule)  # placed, not yet planned
    assert "@scope" not in str(placed.schedule)


def _matmul():
    from polyc import ops

    return ops.matmul(64, 48, 40)


@pytest.mark.parametrize("config", ["edge-npu", "datacenter"])
def test_the_chosen_kernel_is_its_history_replayed(config):
    """The history records every layer's last placement as planning, so its
    replay plans at each layer: it ends with the kernel the scheduler chose."""
    chosen = schedule(_two_convs(), load_config(config)).kernel
    assert sum(1 for st in chosen.history if st.name == "place") >= 4
    again = replay(chosen.original, chosen.history)
    # the same tree (isl may list the pieces of a union in another order)
    assert again.schedule.plain_is_equal(chosen.schedule)
    assert "@scope" in str(chosen.schedule)


def test_the_walks_of_one_layer_find_what_the_whole_walks_find(monkeypatch):
    """As the scheduler walks them after each layer's placements, before the
    plan's marks (a zero block's ``@scope`` above the root sequence: then they
    walk everything, as before). The two convolutions are two layers here
    (since the DMA cut rule of issue 14's sixth stop the fusion search fuses
    them: the cut keeps the layers these walks were written for)."""
    from schedules.accel import groups

    monkeypatch.setattr(groups, "fusion_cuts", lambda *_a, **_k: {3})
    spec = three_sram()
    chosen = schedule(_two_convs(), spec).kernel
    assert unrelated_children(chosen.schedule.get_root(), {"S0"}) == set()
    chosen = chosen.with_schedule(memplan._drop_scopes(chosen.schedule))
    assert unrelated_children(chosen.schedule.get_root(), {"S0"}) == {1}
    wrong = chosen.with_schedule(_move(chosen.schedule, "outbuf", "inbuf"))
    everything = levels.misplaced(wrong, spec)
    assert {m.use.stmt for m in everything} >= {"S1", "S2", "S4", "S5"}
    for names in ({"S0", "S1", "S2"}, {"S3", "S4", "S5"}):
        mine = levels.misplaced(wrong, spec, names)
        assert mine == [m for m in everything if m.use.stmt in names]
        got = macmap.placed(chosen, names)
        whole = macmap.placed(chosen)
        assert {s: whole[s] for s in names if s in whole} == {
            s: got[s] for s in names if s in got
        }
