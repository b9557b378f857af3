"""The compute API: definitions lower to the statements, domains and errors we expect."""

from __future__ import annotations

import pickle

import islpy as isl
import numpy as np
import pytest

import polyc
from polyc import compute as pc
from polyc.errors import DefinitionError


def matmul(M=4, N=3, K=5):
    A = pc.placeholder("A", (M, K))
    B = pc.placeholder("B", (K, N))
    k = pc.reduce_axis(K, "k")
    C = pc.compute("C", (M, N), lambda i, j: pc.sum(A[i, k] * B[k, j], k))
    return pc.kernel("matmul", [C])


def test_matmul_lowers_to_init_and_update():
    kern = matmul()
    s0, s1 = kern.statements
    assert s0.iterators == ("i", "j") and s1.iterators == ("i", "j", "k")
    assert str(s0) == "S0: C[i, j] = 0.0"
    assert str(s1) == "S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]"
    assert s1.reduction == "add" and s0.reduction is None
    assert s1.domain.is_equal(
        isl.Set("{ S1[i, j, k] : 0 <= i < 4 and 0 <= j < 3 and 0 <= k < 5 }")
    )
    assert [a.role.value for a in kern.arrays.values()] == ["input", "input", "output"]


def test_assignment_form_and_update_equal_functional_form(rng):
    i, j = pc.indices("i j")
    k = pc.reduce_axis(5, "k")
    A = pc.placeholder("A", (4, 5))
    B = pc.placeholder("B", (5, 3))
    C = pc.tensor("C", (4, 3))
    C[i, j] = 0.0
    C[i, j] += A[i, k] * B[k, j]
    kern = pc.kernel("mm2", [C])
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    got = polyc.interpret(kern, {"A": a, "B": b})["C"]
    want = polyc.interpret(matmul(), {"A": a, "B": b})["C"]
    np.testing.assert_array_equal(got, want)


def test_print_shows_statements_and_loop_nest():
    text = str(matmul())
    assert "S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]" in text
    assert "for k in 0..4:" in text
    assert "C[i, j] = C[i, j] + A[i, k] * B[k, j]  # S1" in text


def test_symbolic_shapes_become_parameters(rng):
    N = pc.param("N")
    X = pc.placeholder("X", (N, N + 2))
    Y = pc.compute("Y", (N, N), lambda i, j: X[i, j + 2] - X[i, j])
    kern = pc.kernel("diff", [Y])
    assert kern.params == ("N",)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    np.testing.assert_array_equal(
        polyc.interpret(kern, {"X": x})["Y"], x[:, 2:] - x[:, :6]
    )


def test_conditions_restrict_the_domain(rng):
    x = pc.placeholder("x", (6,))
    i = pc.index("i", 8)
    y = pc.tensor("y", (8,))
    y[i] = 0.0
    y.set(i, x[i - 1] * 2.0, where=(i >= 1) & (i <= 6))
    out = polyc.interpret(pc.kernel("pad", [y]), {"x": np.arange(6, dtype=np.float32)})[
        "y"
    ]
    np.testing.assert_array_equal(out, [0, 0, 2, 4, 6, 8, 10, 0])


def test_nested_reduction_goes_through_a_temporary(rng):
    x = pc.placeholder("x", (3, 4))
    k = pc.reduce_axis(4, "k")
    mean = pc.compute("mean", (3,), lambda i: pc.sum(x[i, k], k) / 4.0)
    kern = pc.kernel("mean", [mean])
    assert any(a.role.value == "temp" for a in kern.arrays.values())
    v = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(
        polyc.interpret(kern, {"x": v})["mean"], v.mean(1), rtol=1e-6
    )


def test_kernel_pickles_and_keeps_its_schedule():
    kern = matmul()
    back = pickle.loads(pickle.dumps(kern))
    assert str(back.schedule) == str(kern.schedule)
    assert [str(s) for s in back.statements] == [str(s) for s in kern.statements]


# errors -----------------------------------------------------------------------------


def test_product_of_indices_is_not_affine():
    A = pc.placeholder("A", (16,))
    with pytest.raises(
        polyc.AffineError,
        match=r"A\[i \* j\]: the index is not affine because it multiplies",
    ):
        pc.compute("B", (4, 4), lambda i, j: A[i * j])


def test_data_dependent_index_is_a_gather():
    A = pc.placeholder("A", (16,))
    idx = pc.placeholder("idx", (4,), "int32")
    k = pc.kernel("g", [pc.compute("B", (4,), lambda i: A[idx[i]])])
    (s,) = k.statements
    assert s.data_dependent and [g.array for g in s.gathers] == ["A"]
    assert [ld.array for ld in s.reads] == ["idx"]  # the affine reads
    x = pc.placeholder("x", (4,))
    with pytest.raises(polyc.DTypeError, match=r"a float32 value.*Index with an"):
        pc.compute("C", (4,), lambda i: A[x[i]])


def test_reduction_axis_outside_reduction():
    A = pc.placeholder("A", (4, 5))
    k = pc.reduce_axis(5, "k")
    B = pc.compute("B", (4,), lambda i: A[i, k])
    with pytest.raises(
        polyc.ReductionError, match="reduction axis k is used outside a reduction"
    ):
        pc.kernel("bad", [B])


def test_cycle_among_definitions():
    a, b = pc.tensor("a", (4,)), pc.tensor("b", (4,))
    (i,) = pc.indices("i")
    a[i] = b[i] + 1.0
    b[i] = a[i] * 2.0
    with pytest.raises(polyc.CycleError, match=r"cycle (a -> b -> a|b -> a -> b)"):
        pc.kernel("cyc", [a])


def test_dtype_mismatch_names_the_cast():
    A = pc.placeholder("A", (4,), "float32")
    B = pc.placeholder("B", (4,), "int8")
    with pytest.raises(polyc.DTypeError, match=r"dtypes float32 and int8.*astype"):
        pc.compute("C", (4,), lambda i: A[i] + B[i])


def test_wrong_number_of_indices():
    A = pc.placeholder("A", (4, 4))
    with pytest.raises(
        polyc.ShapeError, match="1 indices given but A has 2 dimensions"
    ):
        pc.compute("C", (4,), lambda i: A[i])


def test_out_of_bounds_access_has_a_witness():
    A = pc.placeholder("A", (4,))
    C = pc.compute("C", (4,), lambda i: A[i + 1])
    with pytest.raises(
        polyc.DefinitionError,
        match=r"outside A's shape \(4\) because instance S0\[i=3\]",
    ):
        pc.kernel("oob", [C])


def test_a_definition_with_no_instances_is_dropped_and_an_output_needs_one():
    """A strided convolution whose every tap reads padding has an update with an
    empty domain; isl failed building its band (found by the fuzzer). It is
    dropped; an output whose only definition is empty is an error."""
    x = pc.placeholder("x", (2,))
    r = pc.reduce_axis(2, "r")
    y = pc.compute(
        "y",
        (3,),
        lambda i: pc.sum(
            x[i * 3 - 1 + r], r, where=(i * 3 - 1 + r >= 0) & (i * 3 - 1 + r < 0)
        ),
    )
    k = pc.kernel("empty", [y])
    assert len(k.statements) == 1  # the zero init only
    assert (polyc.interpret(k, {"x": np.ones(2, np.float32)})["y"] == 0).all()
    z = pc.tensor("z", (3,))
    i = pc.indices("i")
    z.set(i, x[0] * 2.0, where=i[0] > 5)
    with pytest.raises(DefinitionError, match="output z is never written because"):
        pc.kernel("none", [z])
