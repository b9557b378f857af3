"""The Kernel is a frozen value: one analysis cache, filled only by the kernel
itself, and ``replace`` for copies with changes."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from polyc import compute as pc
from polyc.ir.kernel import Kernel
from polyc.ops import polybench as ex


def _counting():
    calls = []

    def analysis(k: Kernel) -> str:
        calls.append(k)
        return k.name

    return analysis, calls


def test_a_kernel_is_immutable():
    k = ex.matmul(3, m=4, k=5)
    with pytest.raises(dataclasses.FrozenInstanceError, match="name"):
        k.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError, match="live_in"):
        k.live_in = None  # no attribute can be added either
    with pytest.raises(TypeError):
        k.arrays["D"] = k.arrays["C"]
    with pytest.raises(TypeError):
        k.data["A"] = None
    assert isinstance(k.statements, tuple) and isinstance(k.params, tuple)


def test_replace_gives_a_new_kernel_with_the_change_and_no_analyses():
    k = ex.matmul(3, m=4, k=5)
    analysis, calls = _counting()
    deps = k.deps
    assert k.analysis("test.name", analysis) == "matmul"
    r = k.replace(name="renamed")
    assert r is not k and r.name == "renamed" and k.name == "matmul"
    assert r.statements == k.statements and r.schedule is k.schedule
    assert r.analysis("test.name", analysis) == "renamed"
    assert calls == [k, r]
    assert r.deps is not deps and k.deps is deps


def test_replace_refuses_a_field_that_does_not_exist():
    k = ex.matmul(3, m=4, k=5)
    with pytest.raises(TypeError):
        k.replace(nmae="x")
    with pytest.raises(ValueError, match="_analyses"):
        k.replace(_analyses=None)


def test_one_kernels_analysis_never_appears_in_anothers():
    a, b = ex.matmul(3, m=4, k=5), ex.matmul(3, m=4, k=5)
    analysis, calls = _counting()
    a.analysis("test.name", analysis)
    b.analysis("test.name", analysis)
    a.with_context("1 = 1").analysis("test.name", analysis)
    assert len(calls) == 3
    # the dependences are a function of the program's text: equal programs
    # share them (polyc.ir.deps.by_program), another program has its own
    assert a.deps is b.deps
    assert ex.matmul(3, m=4, k=6).deps is not a.deps


def test_kernels_of_one_program_share_its_analyses():
    """A transformation keeps the program, so the dependences are computed once."""
    k = ex.matmul(3, m=4, k=5)
    analysis, calls = _counting()
    k.analysis("test.name", analysis)
    moved = k.with_schedule(k.schedule).with_data({}).original
    assert moved.analysis("test.name", analysis) == "matmul"
    assert len(calls) == 1 and moved.deps is k.deps


def test_an_analysis_is_keyed_by_a_name():
    k = ex.matmul(3, m=4, k=5)
    with pytest.raises(TypeError, match="name"):
        k.analysis((1, "x"), lambda k: None)


def test_a_pickled_kernel_keeps_its_program_and_has_no_analyses():
    k = ex.matmul(3, m=4, k=5)
    moved = k.with_schedule(k.schedule)
    k.deps  # noqa: B018 (computed before the pickle)
    back = pickle.loads(pickle.dumps(moved))
    assert "ir.deps" not in back._analyses
    assert str(back.program_schedule) == str(k.program_schedule)
    assert back.deps.flow.is_equal(k.deps.flow)
    # an equal program: its dependences are the ones this process computed
    # (polyc.ir.deps.by_program)
    assert back.deps is k.deps


def test_program_schedule_defaults_to_the_schedule():
    X = pc.placeholder("X", (4,))
    Y = pc.compute("Y", (4,), lambda i: X[i] * 2.0)
    k = pc.kernel("double", outputs=[Y])
    assert k.program_schedule is k.schedule and k.part_of is None
