"""The reference interpreter: numpy references, schedule-order exactness, input checks."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.ops import polybench as ex
from polyc.oracle.interpreter import _plan


def _jacobi_ref(a, b, steps):
    a, b = a.copy(), b.copy()
    for _ in range(steps):
        b[1:-1, 1:-1] = 0.2 * (
            a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1]
        )
        a[1:-1, 1:-1] = 0.2 * (
            b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1] + b[:-2, 1:-1]
        )
    return a, b


def test_matmul_matches_numpy_and_runs_whole_statements(rng):
    kern = ex.matmul(5, m=7, k=9)
    a = rng.integers(-5, 5, (7, 9)).astype(np.float32)
    b = rng.integers(-5, 5, (9, 5)).astype(np.float32)
    np.testing.assert_array_equal(polyc.interpret(kern, {"A": a, "B": b})["C"], a @ b)
    assert _plan(kern).depth == 0  # no per-instance fallback for a reduction


def test_jacobi2d_steps_in_time_batches(rng):
    kern = ex.jacobi2d(None, None, "float64")
    a, b = rng.random((10, 10)), rng.random((10, 10))
    out = polyc.interpret(kern, {"A": a, "B": b}, T=4)
    want_a, want_b = _jacobi_ref(a, b, 4)
    np.testing.assert_array_equal(out["A"], want_a)
    np.testing.assert_array_equal(out["B"], want_b)
    assert _plan(kern).depth == 1


def test_seidel2d_is_sequential_per_instance(rng):
    kern = ex.seidel2d(None, None, "float64")
    a = rng.random((7, 7))
    want = a.copy()
    for _ in range(2):
        for i in range(1, 6):
            for j in range(1, 6):
                want[i, j] = want[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    got = polyc.interpret(kern, {"A": a}, T=2)["A"]
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_lu_factorises(rng):
    n = 8
    m = rng.random((n, n)) + n * np.eye(n)
    out = polyc.interpret(ex.lu_right_looking(), {"A": m})["A"]
    # rows of U are scaled by their pivot (A[k][j] /= A[k][k]): A = tril(out) @ unit U
    unit_upper = np.triu(out, 1) + np.eye(n)
    np.testing.assert_allclose(np.tril(out) @ unit_upper, m, rtol=1e-12)


def test_inputs_are_not_modified_and_inout_is_copied(rng):
    a = rng.random((6, 6))
    before = a.copy()
    polyc.interpret(ex.jacobi2d(None, None, "float64"), {"A": a, "B": a.copy()}, T=1)
    np.testing.assert_array_equal(a, before)


def test_missing_input():
    with pytest.raises(polyc.InputError, match=r"missing input\(s\) B"):
        polyc.interpret(ex.matmul(3, m=4, k=5), {"A": np.zeros((4, 5), np.float32)})


def test_unknown_input():
    z = np.zeros((4, 5), np.float32)
    with pytest.raises(
        polyc.InputError,
        match=r"unknown input\(s\) X because the kernel's inputs are A, B",
    ):
        polyc.interpret(ex.matmul(3, m=4, k=5), {"A": z, "B": z.T.copy(), "X": z})


def test_wrong_shape():
    with pytest.raises(
        polyc.InputError,
        match=r"input B has shape \(4, 5\) but the kernel expects \(5, 3\)",
    ):
        polyc.interpret(
            ex.matmul(3, m=4, k=5),
            {"A": np.zeros((4, 5), np.float32), "B": np.zeros((4, 5), np.float32)},
        )


def test_wrong_dtype():
    with pytest.raises(
        polyc.InputError,
        match=r"input A has dtype float64 but the kernel expects float32.*astype",
    ):
        polyc.interpret(
            ex.matmul(3, m=4, k=5),
            {"A": np.zeros((4, 5)), "B": np.zeros((5, 3), np.float32)},
        )


def test_parameter_that_no_shape_determines():
    with pytest.raises(
        polyc.InputError, match=r"no value for parameter\(s\) T .* T=\.\.\."
    ):
        polyc.interpret(
            ex.jacobi2d(None, None, "float64"),
            {"A": np.zeros((5, 5)), "B": np.zeros((5, 5))},
        )


def test_placed_kernel_with_whole_array_copies_interprets():
    """A placed kernel whose weight is staged whole (a zero-dimensional copy
    statement) interprets like the original. The copy's filter outlived its
    extension node in the schedule map, and the interpreter looked it up among the
    kernel's statements (KeyError ``pc_out_weight_sram_0``)."""
    from polyc import ops
    from polyc.studies.sweep.task import make_inputs

    kernel = ops.conv2d(
        (1, 8, 16, 16), (16, 8, 3, 3), bias=False, stride=2, padding=1, dtype="int8"
    )
    placed = polyc.compile(kernel, "edge-npu").kernel
    inputs = make_inputs(kernel, "random", 0)
    want = polyc.interpret(kernel, inputs)["out"]
    np.testing.assert_array_equal(polyc.interpret(placed, inputs)["out"], want)
