"""Exact dependences equal hand-written isl relations."""

from __future__ import annotations

import islpy as isl

from polyc.ops import polybench as ex


def _eq(got: isl.UnionMap, text: str) -> None:
    want = isl.UnionMap(text)
    assert got.is_equal(want), f"\n got: {got.coalesce()}\nwant: {want.coalesce()}"


def test_matmul():
    d = ex.matmul(3, m=4, k=5).deps
    _eq(
        d.flow,
        "{ S0[i, j] -> S1[i, j, 0] : 0 <= i < 4 and 0 <= j < 3;"
        " S1[i, j, k] -> S1[i, j, k + 1] : 0 <= i < 4 and 0 <= j < 3 and 0 <= k < 4 }",
    )
    _eq(
        d.anti,
        "{ S1[i, j, k] -> S1[i, j, k + 1] : 0 <= i < 4 and 0 <= j < 3 and 0 <= k < 4 }",
    )
    _eq(
        d.output,
        "{ S0[i, j] -> S1[i, j, 0] : 0 <= i < 4 and 0 <= j < 3;"
        " S1[i, j, k] -> S1[i, j, k + 1] : 0 <= i < 4 and 0 <= j < 3 and 0 <= k < 4 }",
    )
    assert d.live_in.is_equal(
        isl.UnionSet(
            "{ A[i, k] : 0 <= i < 4 and 0 <= k < 5;"
            " B[k, j] : 0 <= k < 5 and 0 <= j < 3 }"
        )
    )
    assert d.live_out.is_equal(isl.UnionSet("{ C[i, j] : 0 <= i < 4 and 0 <= j < 3 }"))


def test_producer_consumer():
    d = ex.producer_stencil(16).deps
    _eq(d.flow, "{ S0[i] -> S1[i'] : 0 <= i' < 15 and (i' = i or i' = i - 1) }")
    assert d.anti.is_empty() and d.output.is_empty()


_STENCIL = (
    "(i' = i and j' = j) or (i' = i and j' = j - 1) or (i' = i and j' = j + 1)"
    " or (i' = i - 1 and j' = j) or (i' = i + 1 and j' = j)"
)


def test_jacobi2d_with_time_loop():
    d = ex.jacobi2d(None, None, "float64").deps
    dom = (
        "1 <= i' <= N - 2 and 1 <= j' <= N - 2 and 1 <= i <= N - 2 and 1 <= j <= N - 2"
    )
    flow = d.by_array("flow")
    _eq(
        flow["B"],
        f"[T, N] -> {{ S0[t, i, j] -> S1[t, i', j'] : 0 <= t < T and {dom} and ({_STENCIL}) }}",
    )
    _eq(
        flow["A"],
        f"[T, N] -> {{ S1[t, i, j] -> S0[t + 1, i', j'] : 0 <= t < T - 1 and {dom} and ({_STENCIL}) }}",
    )
    # S1 overwrites the A elements S0 read in the same step; S0 of the next step
    # overwrites B elements S1 read
    anti = d.by_array("anti")
    _eq(
        anti["A"],
        f"[T, N] -> {{ S0[t, i', j'] -> S1[t, i, j] : 0 <= t < T and {dom} and ({_STENCIL}) }}",
    )
    _eq(
        anti["B"],
        f"[T, N] -> {{ S1[t, i', j'] -> S0[t + 1, i, j] : 0 <= t < T - 1 and {dom} and ({_STENCIL}) }}",
    )


def test_lu_triangular_nest():
    d = ex.lu_right_looking().deps
    want = (
        "[N] -> {"
        # the scaled row k feeds the update of every row below it
        " S0[k, j] -> S1[k, i, j] : 0 <= k and k + 1 <= i < N and k + 1 <= j < N;"
        # an element updated at step k is updated again at step k + 1
        " S1[k, i, j] -> S1[k + 1, i, j] : 0 <= k and k + 2 <= i < N and k + 2 <= j < N;"
        # column k + 1 (as A[i][k+1]) and the row k + 1 feed step k + 1
        " S1[k, i, k + 1] -> S1[k + 1, i, j] : 0 <= k and k + 2 <= i < N and k + 2 <= j < N;"
        " S1[k, k + 1, j] -> S0[k + 1, j] : 0 <= k and k + 2 <= j < N;"
        # the pivot A[k+1][k+1] last written by step k
        " S1[k, k + 1, k + 1] -> S0[k + 1, j] : 0 <= k and k + 2 <= j < N"
        " }"
    )
    _eq(d.flow, want)


def test_deps_print_names_kinds_and_arrays():
    text = str(ex.producer_stencil(16).deps)
    assert "flow on B:" in text and "anti: none" in text and "live-in:" in text


def test_analysis_past_its_operation_budget_is_a_budget_error(monkeypatch):
    """isl's dataflow analysis can run for hours on parametric strided accesses (the
    slow property run found one); it runs under an operation budget. The interpreter
    then runs one instance at a time, in schedule order, without dependences."""
    import numpy as np
    import pytest

    import polyc
    import schedules as S
    from polyc.ir import deps as D

    rng = np.random.default_rng(0)
    a = rng.random((6, 6))
    want = polyc.interpret(ex.seidel2d(None, None, "float64"), {"A": a.copy()}, T=2)[
        "A"
    ]
    monkeypatch.setattr(D, "MAX_OPERATIONS", 200)
    k = ex.seidel2d(None, None, "float64")
    message = (
        r"^dependences: isl's flow analysis of seidel2d ran past its budget of 200 "
        r"operations because its accesses are hard for isl to summarise \(parametric, "
        r"strided subscripts\)\. Fix the sizes"
    )
    with pytest.raises(polyc.BudgetError, match=message):
        assert k.deps.flow is None  # raises
    with pytest.raises(polyc.BudgetError, match=message):  # remembered, not redone
        S.tile(k, "L0", {"i": 2})
    got = polyc.interpret(k, {"A": a.copy()}, T=2)["A"]
    np.testing.assert_array_equal(got, want)
