"""A layer's sub-kernel: its own analyses, and the whole program's dependences
between its statements."""

from __future__ import annotations

from polyc import compute as pc
from schedules.accel.layers import sub_kernel
from schedules.legality import dependences


def _overwritten():
    """S0 writes T, S1 overwrites it, S2 reads it: S1 kills S0's values."""
    X, Y = pc.placeholder("X", (8,)), pc.placeholder("Y", (8,))
    (i,) = pc.indices("i")
    T = pc.tensor("T", (8,))
    T[i] = X[i]
    T[i] = Y[i]
    Z = pc.compute("Z", (8,), lambda i: T[i] + 1.0)
    return pc.kernel("overwritten", outputs=[Z])


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
