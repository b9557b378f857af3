"""The walks of the level check (:func:`schedules.accel.levels.misplaced`) and of
the placed MAC mappings (:func:`polyc.ir.macmap.placed`) take their shortcuts
without changing their answer: the statements read off the path to a leaf
(:class:`polyc.ir.tree.Reach`) are isl's universe domain there, and a config whose
engines share one level has no buffer to refuse."""

from __future__ import annotations

import islpy as isl

from accelerator import load_config
from polyc.ir import tree
from schedules.accel import levels
from schedules.accel.scheduler import schedule
from tests.schedules.accel.test_operand_levels import conv_bias_relu, three_sram

T = isl.schedule_node_type


def _leaves(kernel):
    """``(leaf, the walk's statement names there)`` for every leaf."""
    out = []

    def visit(node, reach):
        if node.get_type() in tree.REACH_TYPES:
            reach = tree.Reach(reach, node)
        if node.get_type() == T.leaf:
            out.append((node, reach.names()))
        for i in range(node.n_children()):
            visit(node.child(i), reach)

    visit(kernel.schedule.get_root(), None)
    return out


def test_the_statements_read_off_the_path_are_the_universe_domain():
    chosen = schedule(conv_bias_relu(), three_sram()).kernel
    leaves = _leaves(chosen)
    assert len(leaves) > 10  # copies, MAC calls and the epilogue
    for leaf, names in leaves:
        assert names == tree.tuple_names(leaf.get_universe_domain())


def test_the_placed_mac_calls_see_their_buffers():
    from polyc.ir import macmap

    chosen = schedule(conv_bias_relu(), three_sram()).kernel
    found = macmap.placed(chosen)
    assert found and all(bufs for _, bufs in found.values())
    assert macmap.refusals(chosen) == []


def test_only_a_level_every_engine_reaches_is_skipped():
    assert levels.reached_by_all(load_config("edge-npu")) == {"sram"}
    assert levels.reached_by_all(load_config("datacenter")) == {"local"}
    assert levels.reached_by_all(three_sram()) == frozenset()


def test_a_misplaced_buffer_is_still_found_on_three_srams():
    """The conv's output sits in outbuf, which the MAC array reaches as C: moved
    by hand to inbuf, every use of it there is reported."""
    spec = three_sram()
    chosen = schedule(conv_bias_relu(), spec).kernel
    assert levels.misplaced(chosen, spec) == []
    text = chosen.schedule.get_root().get_schedule()
    wrong = _move(text, "outbuf", "inbuf")
    bad = levels.misplaced(chosen.with_schedule(wrong), spec)
    assert bad and {m.level for m in bad} == {"inbuf"}
    assert {m.use.role for m in bad} >= {"accumulator"}


def _move(schedule_: isl.Schedule, old: str, new: str) -> isl.Schedule:
    """``schedule_`` with every ``@buffer`` mark in level ``old`` moved to ``new``
    (the mark's text only, as a hand edit would)."""
    node = schedule_.get_root()
    stack = [()]
    paths = []
    while stack:
        path = stack.pop()
        n = node
        for i in path:
            n = n.child(i)
        if n.get_type() == T.mark:
            name = n.mark_get_id().get_name()
            if name.startswith("@buffer ") and f"level={old} " in name:
                paths.append(path)
        stack.extend(path + (i,) for i in range(n.n_children()))
    for path in paths:
        n = schedule_.get_root()
        for i in path:
            n = n.child(i)
        text = n.mark_get_id().get_name().replace(f" in {old},", f" in {new},")
        text = text.replace(f"level={old} ", f"level={new} ")
        schedule_ = n.delete().insert_mark(isl.Id(text)).get_schedule()
    return schedule_
