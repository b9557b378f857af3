"""Each transformation: the loop nest it makes, equal results (interpreter and compiled
C against the interpreter on the original), and replay of the recorded history."""

from __future__ import annotations

import pytest

import schedules as S
from codegen.host import generate
from polyc import IllegalTransformError
from polyc.lang.program import Program
from polyc.ops import polybench as ex
from tests.support.sched import assert_same, compile_c, jacobi_time_tiled


def replayed(kernel):
    again = S.replay(kernel.original, kernel.history)
    assert again.schedule.plain_is_equal(kernel.schedule)
    assert again.history == kernel.history
    return kernel


def test_tile_all_members_with_partial_tiles():
    k = ex.matmul(10, "int32")
    t = replayed(S.tile(k, "S1", {"i": 4, "j": 3, "k": 7}))
    nest = t.loop_nest()
    assert "band S1_t" in nest and "for i_t in 0..2" in nest
    assert "for k in 7 * k_t..min(9, 7 * k_t + 6)" in nest
    assert_same(k, t)


def test_tile_symbolic_sizes_keeps_results_for_several_n():
    k = ex.matmul(None, "int32")
    t = S.tile(k, "S1", [4, 4, 4])
    for n in (3, 4, 9):
        assert_same(k, t, N=n)


def test_tile_subset_of_members_and_two_levels():
    k = ex.matmul(12, "int32")
    sub = replayed(S.tile(k, "S1", {"i": 4, "k": 4}))
    assert "S1_t(i_t, k_t)" in str(sub.schedule)
    two = replayed(S.tile(k, "S1", {"i": (8, 2), "j": (8, 4)}))
    nest = two.loop_nest()
    assert "band S1_t1" in nest and "band S1_t2" in nest and "i_t2" in nest
    assert_same(k, sub)
    assert_same(k, two)


def test_strip_mine_adds_member_in_place():
    k = ex.matmul(9, "int32")
    t = replayed(S.strip_mine(k, "S0", "j", 4))
    assert "S0(i, j_o, j)" in str(t.schedule)
    assert_same(k, t)


def test_interchange_and_permute():
    k = ex.matmul(6, "int32")
    t = replayed(S.interchange(k, "S1", "j", "k"))
    assert "S1(i, k, j)" in str(t.schedule)
    p = replayed(S.permute(k, "S1", ["k", "j", "i"]))
    assert "S1(k, j, i)" in str(p.schedule)
    assert_same(k, t)
    assert_same(k, p)


def test_fuse_then_distribute_and_reorder():
    k = ex.producer_consumer(7, "int32")
    f = replayed(S.fuse(k, ["S0", "S1"]))
    assert len(S.to_yaml(f).split("schedule:")) == 2  # one band for both
    d = replayed(S.distribute(f, "S0_S1", names=["P", "Q"]))
    assert "P(i, j)" in str(d.schedule) and "Q(i, j)" in str(d.schedule)
    assert_same(k, f)
    assert_same(k, d)


def test_fuse_longer_band_keeps_its_name_for_the_rest():
    k = ex.matmul(5, "int32")
    f = replayed(S.fuse(k, ["S0", "S1"], name="F"))
    assert "F(i, j)" in str(f.schedule) and "S1(k)" in str(f.schedule)
    assert_same(k, f)


def test_reorder_independent_statements():
    from polyc import compute as pc

    A = pc.placeholder("A", (6,), "int32")
    X = pc.compute("X", (6,), lambda i: A[i] + 1)
    Y = pc.compute("Y", (6,), lambda i: A[i] * 3)
    k = pc.kernel("two", outputs=[X, Y])
    r = replayed(S.reorder(k, ["S1", "S0"]))
    assert r.loop_nest().index("S1") < r.loop_nest().index("S0")
    assert_same(k, r)


def test_time_tiling_jacobi2d():
    k, t = jacobi_time_tiled()
    replayed(t)
    assert "band L0_t" in t.loop_nest()
    assert_same(k, t)


def test_time_tiling_seidel2d_with_wavefront_parallel_tiles():
    k = ex.seidel2d(11, 4, "int32")
    t = S.skew(k, "L0", "i", {"t": 1})
    t = S.skew(t, "L0", "j", {"t": 1, "i": 1})
    t = S.tile(t, "L0", {"t": 3, "i": 3, "j": 3})
    t = S.skew(t, "L0_t", "t_t", {"i_t": 1})
    t = S.split_band(t, "L0_t", "i_t", name="W")
    t = replayed(S.parallel(t, "W"))
    assert "#pragma omp parallel for" in compile_c(t)[2].text
    assert_same(k, t)


def test_vectorize_alone_compiles_with_openmp():
    k = S.vectorize(S.split_band(ex.matmul(8, "int32"), "S0", "j"), "S0_j")
    source = compile_c(k)[2]
    assert "#pragma omp simd" in source.text and source.uses_openmp


def test_marks_become_pragmas():
    k = ex.matmul(8, "int32")
    t = S.interchange(k, "S1", "j", "k")
    t = S.split_band(t, "S1", "j")
    t = S.parallel(t, "S1")
    t = S.vectorize(t, "S1_j")
    t = replayed(S.unroll(t, "S0", 2))
    source = compile_c(t)[2]
    assert source.uses_openmp
    for pragma in ("omp parallel for", "omp simd", "GCC unroll 2"):
        assert f"#pragma {pragma}" in source.text
    assert_same(k, t)
    plain = replayed(S.unmark(t, "S1", "@parallel"))
    assert "@parallel" not in str(plain.schedule)


def test_split_and_merge_bands_round_trip():
    k = ex.matmul(5, "int32")
    s = S.split_band(k, "S1", 1)
    assert "S1(i)" in str(s.schedule) and "S1_j(j, k)" in str(s.schedule)
    m = replayed(S.merge_bands(s, "S1", "S1_j"))
    assert "S1(i, j, k)" in str(m.schedule)
    assert_same(k, m, c=False)


def test_parameter_assumption_makes_a_transformation_legal():
    from polyc.lang.program import Program

    p = Program("offset")
    N, M = p.param("N"), p.param("M", minimum=0)
    A = p.array("A", (N + M,), "int32", role="inout")
    with p.loop("i", 0, N, band="L") as i:
        A[i] = A[i + M] + 1
    k = p.kernel()
    with pytest.raises(IllegalTransformError, match=r"anti dependence .* on A"):
        S.parallel(k, "L")
    ok = S.parallel(k.with_context("M >= N"), "L")
    assert "@parallel" in str(ok.schedule)
    assert_same(ok.original, ok, N=5, M=6)


def test_parallel_mark_is_checked_again_by_later_transformations():
    k = S.parallel(ex.matmul(6, "int32"), "S1")
    with pytest.raises(
        IllegalTransformError,
        match=r'permute: band "S1" cannot be permuted to \(k, i, j\) because the flow '
        r"dependence S1\[i=0, j=0, k=0\] -> S1\[i=0, j=0, k=1\] on C crosses "
        r'iterations of the @parallel loop k of band "S1"',
    ):
        S.permute(k, "S1", ["k", "i", "j"])


def test_parallel_mark_on_a_band_whose_outer_loop_isl_elides_is_not_moved_inward():
    """Found by the property test: the tile band's outer member has one iteration, so
    isl emits no loop for it; the @parallel mark (checked on that member) must not
    land on the next loop, which carries the output dependence on Y[1, 0]."""
    p = Program("elided")
    X = p.array("X", (8,), "int32", role="input")
    Y = p.array("Y", (2,), "int32", role="inout")
    with p.loop("i", 0, 4) as i:
        Y[1] = X[i]
    k = S.strip_mine(S.shift(p.kernel(), "L0", {"i": 2}), "L0", "i", 3)
    k = S.parallel(S.tile(k, "L0", {"i_o": 3, "i": 2}, name="T"), "T")
    assert "for i_t in 1..2" in k.loop_nest() and "@parallel" not in k.loop_nest()
    assert "omp parallel" not in generate(k).text
    assert_same(k.original, k)


def test_can_fuse_is_fuse_check_without_the_kernel():
    from schedules.fusion import can_fuse

    k = ex.producer_consumer(7, "int32")
    assert can_fuse(k, ["S0", "S1"])
    jacobi = ex.jacobi2d(None, None)
    assert not can_fuse(jacobi, ["L1", "L2"])  # fuse refuses it (test_errors)
    with pytest.raises(IllegalTransformError):
        S.fuse(jacobi, ["L1", "L2"])
