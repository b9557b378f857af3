"""Checks made on a part of the program answer as the whole program's would: a
rewrite inside a few consecutive loop nests of a network (an MLP core's loop
order and its init moved, :mod:`schedules.accel.mlp`) is checked on their own
dependences (:func:`schedules.accel.layers.own_part`)."""

from __future__ import annotations

import pytest
import torch

import polyc
from polyc.errors import IllegalTransformError
from polyc.lang.program import Program
from schedules import fusion, legality, stree
from schedules.accel import mlp, reindex
from schedules.accel.layers import _simple, own_part, top_children
from tests.support.small_kernels import overwritten


class _MLPs(torch.nn.Module):
    """Four MLP blocks with residual adds: each core is a few loop nests of a
    program four times longer."""

    def __init__(self, d: int, h: int, n: int = 4):
        super().__init__()
        self.fc1 = torch.nn.ModuleList(torch.nn.Linear(d, h) for _ in range(n))
        self.fc2 = torch.nn.ModuleList(torch.nn.Linear(h, d) for _ in range(n))

    def forward(self, x):
        for fc1, fc2 in zip(self.fc1, self.fc2):
            x = x + fc2(torch.nn.functional.gelu(fc1(x)))
        return x


def _mlps():
    torch.manual_seed(0)
    return polyc.from_torch(_MLPs(16, 32).eval(), (torch.randn(1, 4, 16),))


def _relations(deps):
    return sorted((kind, array, str(m)) for kind, array, m in deps)


def _whole(monkeypatch):
    """Every check on the whole program's dependences, as before the parts."""
    monkeypatch.setattr(reindex, "own_part", lambda kernel, positions: None)
    monkeypatch.setattr(mlp, "own_part", lambda kernel, positions: None)


def test_a_part_has_the_programs_dependences_between_its_statements():
    whole = overwritten(12, "chain")
    for positions in [(0, 1, 2), (1, 2), (2, 3, 4), (5,)]:
        part = own_part(whole, positions)
        assert part is not None and part.part_of is None
        names = {s.name for s in part.statements}
        want = legality._between(legality.dependences(whole), names)
        assert _relations(legality.dependences(part)) == _relations(want)


def test_no_part_when_the_question_needs_the_program():
    whole = overwritten(12, "chain")
    assert own_part(whole, (0, 2)) is None  # not consecutive: S1 kills S0
    assert own_part(whole, tuple(range(6))) is None  # more than a quarter
    # children that run statements apart in the program order: S0 and S2,
    # with S1 between them (a kill, in general) outside
    swapped = fusion.reorder(_skewed_in_a_network(), ["S2", "S1"])
    assert [stree.statements(c) for c in top_children(swapped)][:3] == [
        ["S0"],
        ["S2"],
        ["S1"],
    ]
    assert own_part(swapped, (0, 1)) is None


def test_a_part_of_a_transformed_program_has_its_programs_dependences():
    """Where the schedule is no longer the program order (loop nests fused,
    children reordered, as an earlier MLP core's rewrite leaves them), a part
    whose statements are consecutive children of the program order has their
    program order as its own, and the program's dependences between its
    statements (hf-convnext's MLP planner computed the network's dataflow
    for three of its five cores, 2.2 CPU s, for want of it)."""
    whole = overwritten(12, "chain")
    bands = [b for _, b in _items(whole)]
    fused = fusion.fuse(whole, bands[4:6])
    assert not fused.schedule.plain_is_equal(fused.program_schedule)
    for positions in [(0, 1, 2), (4,), (3, 4)]:
        part = own_part(fused, positions)
        assert part is not None and part.part_of is None
        names = {s.name for s in part.statements}
        want = legality._between(legality.dependences(fused), names)
        assert _relations(legality.dependences(part)) == _relations(want)
    # the fused child runs S4 and S5: its program order, two loop nests
    part = own_part(fused, (4,))
    assert len(top_children(part.original)) == 2
    assert len(top_children(part)) == 1
    swapped = fusion.reorder(_skewed_in_a_network(), ["S2", "S1"])
    assert [s.name for s in own_part(swapped, (1,)).statements] == ["S2"]


def test_an_mlp_rewrite_checked_on_its_core_gives_the_same_kernel(monkeypatch):
    kernel = _mlps()
    cores = mlp.cores(kernel)
    assert sum(own_part(kernel, core.window) is not None for core in cores) >= 4
    quick = [mlp.rewrite(kernel, core) for core in cores]
    _whole(monkeypatch)
    slow = [mlp.rewrite(kernel, core) for core in cores]
    assert sum(k is not None for k in quick) >= 4
    assert [k is None for k in quick] == [k is None for k in slow]
    for a, b in zip(quick, slow):
        if a is None:
            continue
        assert a.history == b.history
        assert a.schedule.plain_is_equal(b.schedule)
        assert a.program_schedule.plain_is_equal(b.program_schedule)
        assert [s.name for s in a.statements] == [s.name for s in b.statements]
        assert [str(s.domain) for s in a.statements] == [
            str(s.domain) for s in b.statements
        ]


def test_rewrites_after_a_rewrite_are_checked_on_their_cores(monkeypatch):
    """Once a core is rewritten (its init moved: the schedule no longer the
    program order), the next cores' rewrites are still checked on their own
    loop nests, as the MLP planner makes them, and give the same kernels as
    checks on the whole program."""
    kernel = _mlps()
    cores = mlp.cores(kernel)
    first = mlp.rewrite(kernel, cores[0])
    assert not first.schedule.plain_is_equal(first.program_schedule)
    later = cores[2:]  # (the second overlaps the first: the planner skips it)
    assert all(own_part(first, core.window) is not None for core in later)
    quick = [mlp.rewrite(first, core) for core in later]
    _whole(monkeypatch)
    slow = [mlp.rewrite(first, core) for core in later]
    assert all(k is not None for k in quick)
    for a, b in zip(quick, slow):
        assert a.history == b.history
        assert a.schedule.plain_is_equal(b.schedule)
        assert a.program_schedule.plain_is_equal(b.program_schedule)


def _skewed_in_a_network():
    """``a[i, j] = a[i - 1, j + 1] / 2`` (j may not run outside i) among
    other loop nests."""
    p = Program("skewed")
    a = p.array("a", (6, 6), "float32", role="output")
    bs = [p.array(f"b{n}", (6,), "float32", role="output") for n in range(5)]
    with p.loop("i", 1, 6) as i, p.loop("j", 0, 5) as j:
        a[i, j] = a[i - 1, j + 1] * 0.5
    for b in bs:
        with p.loop("k", 0, 6) as k:
            b[k] = a[k, 0] + 1.0
    return p.kernel()


def test_a_permutation_checked_on_its_loop_nest_refuses_as_the_program(
    monkeypatch,
):
    kernel = _skewed_in_a_network()
    assert own_part(kernel, (0,)) is not None
    with pytest.raises(IllegalTransformError) as quick:
        reindex.permute_iterators(kernel, "S0", ("j", "i"))
    _whole(monkeypatch)
    with pytest.raises(IllegalTransformError) as slow:
        reindex.permute_iterators(_skewed_in_a_network(), "S0", ("j", "i"))
    assert str(quick.value) == str(slow.value)
    assert "flow dependence" in str(quick.value)


def _items(kernel):
    return [_simple(kernel, c) for c in top_children(kernel)]
