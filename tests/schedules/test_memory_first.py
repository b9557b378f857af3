"""The legality check of a concrete kernel asks the memory-based dependences
first (:func:`schedules.legality.memory_dependences`): the same answers as the
exact dependences alone, and the exact anti and output analysis only when a
memory-based dependence runs backwards."""

from __future__ import annotations

import pytest

import schedules as S
from polyc import IllegalTransformError
from polyc.ops import polybench as ex
from schedules import legality, stree
from schedules.accel import tensorize
from schedules.apply import _as_schedule


def test_a_legal_tiling_needs_no_anti_or_output_analysis():
    k = ex.matmul(8)
    tiled = S.tile(k, "S1", {"i": 4, "j": 4})
    assert tiled.history[-1].name == "tile"
    assert "_false" not in vars(k.deps)  # isl's anti/output analysis never ran


def test_a_refused_tiling_names_the_exact_violation():
    k = ex.seidel2d(8, 3)  # concrete: the memory-based dependences refuse first
    with pytest.raises(
        IllegalTransformError,
        match=r"the flow dependence S0\[t=0, i=4, j=1\] -> S0\[t=1, i=3, j=1\] "
        r"on A would run backwards",
    ):
        S.tile(k, "L0", {"t": 4, "i": 4})


def test_memory_first_gives_the_exact_check_violation():
    """Legal and illegal trees: the same violation (or none) either way."""
    k = ex.seidel2d(8, 3)
    trees = [stree.from_isl(k.schedule)]
    for text in ("{ S0[t, i, j] -> [i, t, j] }", "{ S0[t, i, j] -> [t, j, i] }"):
        trees.append(stree.from_isl(_as_schedule(k, text, "test")))
    answers = [legality.first_violation(k, root=tree) for tree in trees]
    assert answers[0] is None and answers[1] is not None
    for tree, exact in zip(trees, answers):
        assert legality._first_violation(k, tree, ()) == exact


def test_vector_ok_decides_an_element_wise_statement_on_its_accesses():
    k = ex.matmul(8)
    init = k.statements[0]  # C[i, j] = 0: never touches one element twice
    assert not tensorize.may_self_depend(k, init)
    assert tensorize.may_self_depend(k, k.statements[1])  # the reduction
