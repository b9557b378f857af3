"""One test per error the schedules package raises, matching its message."""

from __future__ import annotations

import pytest

import schedules as S
from polyc import ArgumentError, BudgetError, IllegalTransformError, ScheduleError
from polyc.lang.program import Program
from polyc.ops import polybench as ex


@pytest.fixture(scope="module")
def seidel():
    return ex.seidel2d(None, None)


@pytest.fixture(scope="module")
def jacobi():
    return ex.jacobi2d(None, None)


def test_tiling_a_non_permutable_band_names_the_skew(seidel):
    with pytest.raises(
        IllegalTransformError,
        match=r'^tile: band "L0" cannot be tiled on t, i because the flow dependence '
        r"S0\[t=0, i=4, j=1\] -> S0\[t=1, i=3, j=1\] on A would run backwards "
        r"\(with N=6, T=2\)\. Skew the band first: skew\(kernel, 'L0', 'i', "
        r"\{'t': 1\}\), then tile\.$",
    ):
        S.tile(seidel, "L0", {"t": 4, "i": 4})


def test_tiling_without_a_single_skew_fix_says_so(seidel):
    with pytest.raises(
        IllegalTransformError,
        match=r"cannot be tiled on t, i, j because the flow dependence .* on A would "
        r"run backwards .*Tile fewer members",
    ):
        S.tile(seidel, "L0", {"t": 4, "i": 4, "j": 4})


def test_fusing_across_a_dependence_that_fusion_reverses(jacobi):
    with pytest.raises(
        IllegalTransformError,
        match=r"^fuse: bands 'L1', 'L2' cannot be fused because the flow dependence "
        r"S0\[t=0, i=1, j=2\] -> S1\[t=0, i=1, j=1\] on B would run backwards "
        r"\(with N=4, T=1\)\. Shift the later band\(s\) 'L2' first, e\.g\. "
        r"shift\(kernel, 'L2', \{'i': 1, 'j': 1\}\), then fuse\.$",
    ):
        S.fuse(jacobi, ["L1", "L2"])


def test_interchanging_a_wavefront(seidel):
    with pytest.raises(
        IllegalTransformError,
        match=r"^interchange: members t and i of band \"L0\" cannot be interchanged "
        r"because the flow dependence S0\[t=0, i=2, j=1\] -> S0\[t=1, i=1, j=1\] on A "
        r"would run backwards \(with N=4, T=2\)\. Skew first: skew\(kernel, 'L0', "
        r"'i', \{'t': 1\}\)\.$",
    ):
        S.interchange(seidel, "L0", "t", "i")


def test_loading_an_illegal_schedule_file(tmp_path):
    k = ex.matmul(None)
    path = tmp_path / "matmul.yaml"
    path.write_text(
        S.to_yaml(k).replace("S1[i, j, k] -> [(k)]", "S1[i, j, k] -> [(-k)]")
    )
    with pytest.raises(
        IllegalTransformError,
        match=r"^apply_schedule: the schedule is illegal because the flow dependence "
        r"S1\[i=0, j=0, k=0\] -> S1\[i=0, j=0, k=1\] on C would run backwards "
        r"\(with N=2\)\. Load a schedule that keeps every dependence forward",
    ):
        S.apply_schedule(k, path.read_text())


def test_loading_a_schedule_that_runs_dependent_instances_together():
    k = ex.producer_consumer(None)
    with pytest.raises(
        IllegalTransformError,
        match=r"flow dependence S0\[i=0, j=0\] -> S1\[i=0, j=0\] on B would run both "
        r"at the same time",
    ):
        S.apply_schedule(k, "[N] -> { S0[i, j] -> [i, j]; S1[i, j] -> [i, j] }")


def test_parallel_loop_that_carries_a_dependence_names_a_fix():
    k = ex.matmul(None)
    k = S.interchange(k, "S1", "i", "k")
    with pytest.raises(
        IllegalTransformError,
        match=r"^parallel: band \"S1\" cannot run in parallel on its loop k because the "
        r"flow dependence S1\[i=0, j=0, k=0\] -> S1\[i=0, j=0, k=1\] on C crosses "
        r"iterations of the @parallel loop k of band \"S1\" \(with N=2\)\. Loop j "
        r"carries no dependence: permute\(kernel, 'S1', \['j', 'k', 'i'\]\) first\.$",
    ):
        S.parallel(k, "S1")


def test_parallel_without_any_parallel_loop_suggests_a_wavefront(seidel):
    with pytest.raises(IllegalTransformError, match=r"skew the tile loops"):
        S.parallel(seidel, "L0")


def test_negative_skew(seidel):
    with pytest.raises(
        IllegalTransformError,
        match=r"^skew: member t of band \"L0\" cannot be skewed to t \+ -1\*i because "
        r"the flow dependence S0\[t=0, i=1, j=1\] -> S0\[t=0, i=2, j=1\] on A would "
        r"run backwards",
    ):
        S.skew(seidel, "L0", "t", {"i": -1})


def test_shift_that_reverses_a_dependence(jacobi):
    with pytest.raises(
        IllegalTransformError,
        match=r"^shift: band \"L0\" cannot be shifted by \{'t': -1\} for S1 because "
        r"the flow dependence S0\[t=0, i=1, j=1\] -> S1\[t=0, i=1, j=1\] on B",
    ):
        S.shift(jacobi, "L0", {"t": -1}, statement="S1")


def test_distribution_that_breaks_a_recurrence():
    p = Program("recurrence")
    N = p.param("N")
    A = p.array("A", (N,), "int32", role="inout")
    B = p.array("B", (N,), "int32", role="inout")
    with p.loop("i", 1, N, band="L") as i:
        A[i] = B[i - 1] + 1
        B[i] = A[i] * 2
    k = p.kernel()
    with pytest.raises(
        IllegalTransformError,
        match=r"^distribute: band \"L\" cannot be distributed because the flow "
        r"dependence S1\[i=1\] -> S0\[i=2\] on B would run backwards \(with N=3\)",
    ):
        S.distribute(k, "L")


def test_reorder_consumer_before_producer():
    k = ex.producer_consumer(None)
    with pytest.raises(
        IllegalTransformError,
        match=r"^reorder: the children S1, S0 cannot run in this order because the flow "
        r"dependence S0\[i=0, j=0\] -> S1\[i=0, j=0\] on B would run backwards",
    ):
        S.reorder(k, ["S1", "S0"])


def test_unknown_band_lists_the_names():
    with pytest.raises(
        ScheduleError,
        match=r"^tile: there is no band named 'S9' because the schedule's bands are "
        r"S0, S1\. Use one of those names",
    ):
        S.tile(ex.matmul(4), "S9", [2, 2])


def test_unknown_member():
    with pytest.raises(
        ScheduleError,
        match=r"band 'S1' has no member 'x' because its members are i, j, k",
    ):
        S.interchange(ex.matmul(4), "S1", "i", "x")


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"i": 0}, r"the tile size of i must be a positive integer"),
        ([2, 2], r"2 sizes for band 'S1' because it has 3 members"),
        ({"i": (4, 2), "j": 4}, r"levels of tiling because their size tuples differ"),
    ],
)
def test_bad_tile_sizes(sizes, message):
    with pytest.raises(ArgumentError, match=message):
        S.tile(ex.matmul(4), "S1", sizes)


def test_tile_band_name_taken():
    k = S.tile(ex.matmul(8), "S1", [2, 2, 2])
    with pytest.raises(ScheduleError, match=r"the band name 'S0' is taken"):
        S.tile(k, "S1", [2, 2, 2], name="S0")


def test_fuse_needs_siblings():
    k = S.split_band(ex.matmul(4), "S1", "j")
    with pytest.raises(ScheduleError, match=r"are not children of one sequence"):
        S.fuse(k, ["S0", "S1_j"])


def test_distribute_needs_a_sequence_below():
    with pytest.raises(ScheduleError, match=r"has no sequence directly below it"):
        S.distribute(ex.matmul(4), "S1")


def test_merge_needs_the_inner_band_directly_below():
    with pytest.raises(ScheduleError, match=r"band 'L1' is not directly below band"):
        S.merge_bands(ex.jacobi2d(None, None), "L0", "L1")


def test_split_at_first_member():
    with pytest.raises(ScheduleError, match=r"a split needs members on both sides"):
        S.split_band(ex.matmul(4), "S1", "i")


def test_permute_needs_a_permutation():
    with pytest.raises(ScheduleError, match=r"is not a permutation of band 'S1'"):
        S.permute(ex.matmul(4), "S1", ["i", "i", "k"])


def test_schedule_text_isl_cannot_read():
    with pytest.raises(ScheduleError, match=r"^apply_schedule: the text is not an isl"):
        S.apply_schedule(ex.matmul(4), "{ S0[i, j] -> [i, j }")


def test_schedule_missing_instances():
    with pytest.raises(
        ScheduleError,
        match=r"does not cover the kernel because instance S1\[i=\d, j=\d, k=\d\] is "
        r"missing",
    ):
        S.apply_schedule(ex.matmul(4), "{ S0[i, j] -> [0, i, j, 0] }")


def test_schedule_with_two_times_for_an_instance():
    with pytest.raises(ScheduleError, match=r"more than one time"):
        S.apply_schedule(
            ex.producer_consumer(3),
            "{ S0[i, j] -> [0, i, j]; S0[i, j] -> [0, j, i]; S1[i, j] -> [1, i, j] }",
        )


def test_schedule_mark_member_count_mismatch():
    text = S.to_yaml(ex.matmul(4)).replace('"S1(i, j, k)"', '"S1(i, j)"')
    with pytest.raises(ScheduleError, match=r"lists 2 members but its band has 3"):
        S.apply_schedule(ex.matmul(4), text)


def test_unknown_fusion_strategy():
    with pytest.raises(ArgumentError, match=r"fusion='all' is not a strategy"):
        S.auto(ex.matmul(4), fusion="all")


def test_budget_error_when_isl_runs_out_of_operations():
    with pytest.raises(
        BudgetError,
        match=r"^auto: isl's scheduler ran past its budget of 100 operations because "
        r"seidel2d \(1 statements\)",
    ):
        # untiled: with tiles, Seidel's time steps run as wavefronts without isl
        S.auto(ex.seidel2d(None, None), max_operations=100, tile=False)


def test_replay_of_an_unknown_step():
    from polyc.ir.kernel import Step

    with pytest.raises(ScheduleError, match=r"names no transformation"):
        S.replay(ex.matmul(4), [Step("explode", ("S1",))])


def test_unmark_missing_attribute():
    with pytest.raises(ScheduleError, match=r"carries no @parallel mark"):
        S.unmark(ex.matmul(4), "S1", "@parallel")
