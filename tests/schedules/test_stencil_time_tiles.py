"""Time tiles for stencils (schedules.host.stencil): the time loop tiled against
skewed space, the program's own unskewed loops inside a tile, every schedule
checked, the original's bits at two sizes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import schedules as S
from polyc.ops import polybench as ex
from schedules import stree
from schedules.host import chain, stencil
from schedules.host.cache_model import Cache
from schedules.host.profit import innermost_steps
from schedules.host.scheduler import auto_found
from schedules.host.stencil import TILES, stencil_of
from tests.support.cfront_corpus import bench_checksums
from tests.support.paths import CORPUS
from tests.support.sched import assert_same
from tests.support.sched import compile_c as generate

#: 8 KiB per tile: Jacobi-2D's tiles at N = 64 are 2 time steps over 8 rows
SMALL = Cache(l1=1024, l2=16 * 1024, l3=32 * 1024)
PARAMS = {"N": 64, "T": 16}


def _tile_band(kernel) -> stree.Named:
    root = stree.from_isl(kernel.schedule)
    named = stree.named_at(root)
    assert named is not None and named.name == TILES, root
    return named


def test_jacobi2d_gets_time_tiles_over_its_own_unskewed_loops():
    k = ex.jacobi2d(None, None, "int32")
    found = auto_found(k, cache=SMALL, params=PARAMS)
    assert found.step == chain.TIME_TILES
    tiles = _tile_band(found.kernel)
    assert tiles.members == ("t_t", "x1_t", "x2_t") and tiles.band.permutable
    # the time tile loop is a function of the combined time alone (S0 at step t
    # is 2t, S1 2t + 1; tiles of 2 steps), the space ones skew it: 2t + i
    time = str(tiles.band.member(0)).replace(" ", "")
    assert "S0[t,i,j]->[(floor((t)/2))]" in time
    assert "S1[t,i,j]->[(floor((1+2t)/4))]" in time
    space = str(tiles.band.member(1)).replace(" ", "")
    assert "S0[t,i,j]->[(floor((2t+i)/8))]" in space, space
    # inside a tile: the program's order, innermost loop j unskewed (a unit step
    # of the innermost loop moves j by one and nothing else)
    for step in innermost_steps(found.kernel).values():
        np.testing.assert_allclose(step, [0, 0, 1])
    text = generate(found.kernel)[2].text
    assert "omp parallel" not in text  # sequential tiles unless asked
    replayed = S.replay(found.kernel.original, found.kernel.history)
    assert replayed.schedule.plain_is_equal(found.kernel.schedule)


@pytest.mark.parametrize("sizes", [{"N": 13, "T": 5}, {"N": 29, "T": 11}])
def test_time_tiled_jacobi2d_computes_what_the_original_does(sizes):
    # the interpreter on the original is the oracle; integers: bit for bit
    k = ex.jacobi2d(None, None, "int32")
    found = auto_found(k, cache=SMALL, params=PARAMS)
    assert found.step == chain.TIME_TILES
    assert_same(k, found.kernel, **sizes)


def test_wavefront_marks_the_tiles_parallel_and_keeps_the_results():
    k = ex.jacobi2d(None, None, "int32")
    found = auto_found(
        k, cache=SMALL, params=PARAMS, wavefront=True, min_parallel_work=0
    )
    assert [s.name for s in found.kernel.history][-3:] == [
        "skew",
        "split_band",
        "parallel",
    ]
    assert "omp parallel for" in generate(found.kernel)[2].text
    assert_same(k, found.kernel, N=17, T=6)


def test_seidel_is_left_to_its_vectorisable_wavefront():
    # Gauss-Seidel's innermost loop carries a recurrence: time tiles in program
    # order would keep it; isl's wavefront has a dependence-free innermost loop
    k = ex.seidel2d(None, None, "int32")
    assert stencil_of(k) is not None
    found = auto_found(k, cache=SMALL, params=PARAMS)
    assert found.step != chain.TIME_TILES


def test_a_stencil_whose_time_step_fits_in_cache_is_not_time_tiled():
    k = ex.jacobi2d(None, None, "int32")
    big = Cache(l1=32 * 1024, l2=4 * 1024 * 1024, l3=32 * 1024 * 1024)
    found = auto_found(k, cache=big, params={"N": 64, "T": 16})  # 32 KiB per step
    assert found.step != chain.TIME_TILES


def test_products_are_not_stencils():
    # gemm's outer loop i writes new rows each iteration: not a time loop
    assert stencil_of(ex.matmul(None, "int32")) is None


#: corpus stencils, two sizes each (macros or int parameters) and the L2 cache
#: (bytes) under which one time step does not fit and a small tile does
CORPUS_SIZES = {
    "jacobi_1d": ([{"TSTEPS": 7, "N": 45}, {"TSTEPS": 12, "N": 100}], 1024),
    "jacobi_2d": ([{"tsteps": 5, "n": 23}, {"tsteps": 9, "n": 40}], 16 * 1024),
    "heat_3d": ([{"tsteps": 4, "n": 11}, {"tsteps": 7, "n": 17}], 128 * 1024),
    "fdtd_2d": (
        [{"TMAX": 5, "NX": 40, "NY": 37}, {"TMAX": 9, "NX": 45, "NY": 50}],
        16 * 1024,
    ),
}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("name", sorted(CORPUS_SIZES))
def test_time_tiled_corpus_stencils_compute_the_original_bits(
    name, tmp_path, monkeypatch
):
    # a stencil reorders no sum: every array's checksum (hex float) is the
    # original's, at two sizes; small tiles (the innermost one too) so that
    # partial tiles appear at these sizes
    monkeypatch.setattr(stencil, "INNER_SIZES", (16, 8))
    monkeypatch.setattr(stencil, "OUTER_SIZES", (8, 4))
    monkeypatch.setattr(stencil, "TIME_STEPS", (4, 2))
    runs, l2 = CORPUS_SIZES[name]
    cache = Cache(l1=1024, l2=l2, l3=4 * l2)
    for sizes in runs:
        steps, original, polyc = bench_checksums(name, sizes, tmp_path, cache=cache)
        assert steps == [chain.TIME_TILES], sizes
        assert original == polyc and original, (name, sizes)


def test_the_cli_passes_wavefront_to_the_scheduler(tmp_path):
    from polyc.cli import main

    out = tmp_path / "out.c"
    args = ["compile", str(CORPUS / "jacobi_2d.c"), "-o", str(out)]
    args += ["--schedule", "auto", "--cache", "l2=2M"]
    assert main(args) == 0
    assert "for (long t_t = " in out.read_text()
    assert "omp parallel" not in out.read_text()
    assert main([*args, "--wavefront"]) == 0
    assert "omp parallel for" in out.read_text()


def test_wavefront_without_the_automatic_scheduler_is_refused(tmp_path, capsys):
    from polyc.cli import main

    args = ["compile", str(CORPUS / "jacobi_2d.c"), "--wavefront"]
    assert main(args) == 2
    assert "--wavefront has no effect because" in capsys.readouterr().err


def test_polybench_fdtd2d_with_its_union_context_gets_time_tiles(tmp_path):
    # PolyBench's own FDTD-2D (arrays sized by macros, loops by parameters): the
    # chain needed its relaxed step for it; time tiles come first, checked
    # against the exact dependences, and compute what the original does
    from polyc.frontends.c.parse import parse_c
    from tests.schedules.test_fallback import FDTD_POLYBENCH

    src = tmp_path / "fdtd.c"
    src.write_text(FDTD_POLYBENCH)
    (region,) = parse_c(src)
    k = region.kernel
    l2 = Cache(l1=32 * 1024, l2=2 * 1024 * 1024, l3=32 * 1024 * 1024)
    found = auto_found(k, cache=l2)
    assert found.step == chain.TIME_TILES
    assert S.first_violation(found.kernel, found.kernel.schedule) is None
    assert_same(k, found.kernel, c=False, tmax=4, nx=9, ny=7)


def test_inside_a_time_tile_the_statements_of_a_step_are_fused_by_rows():
    # below the tile band: one band (t, 2t + k + i) over both statements, then
    # each statement's own j loop (Polly's [t, t + i, k, j] for fdtd-2d): the rows
    # a statement reads were written at the same or an earlier row of the step,
    # so each row of every statement runs while its neighbours are in the L1
    # (the unfused tile streamed each statement's block of the tile from the L2)
    k = ex.jacobi2d(None, None, "int32")
    found = auto_found(k, cache=SMALL, params=PARAMS)
    rows = stree.named_at(_tile_band(found.kernel).band.child)
    assert rows is not None and rows.band.n_member == 2
    assert set(stree.statements(rows.band)) == {"S0", "S1"}
    step = str(rows.band.member(0)).replace(" ", "")
    assert "S0[t,i,j]->[(t)]" in step and "S1[t,i,j]->[(t)]" in step, step
    row = str(rows.band.member(1)).replace(" ", "")
    assert "S0[t,i,j]->[(2t+i)]" in row and "S1[t,i,j]->[(1+2t+i)]" in row, row
    assert isinstance(rows.band.child, stree.Sequence_)
    assert_same(k, found.kernel, N=21, T=7)


def test_a_stencil_of_one_space_dimension_keeps_its_steps_unfused():
    # fused rows would leave no loop inside a row to vectorise
    from polyc.lang.program import Program

    p = Program("jacobi1d")
    N, T = p.param("N"), p.param("T")
    A = p.array("A", (N,), "int32", role="inout")
    B = p.array("B", (N,), "int32", role="inout")
    with p.loop("t", 0, T):
        with p.loop("i", 1, N - 1) as i:
            B[i] = A[i - 1] + A[i] + A[i + 1]
        with p.loop("i", 1, N - 1) as i:
            A[i] = B[i - 1] + B[i] + B[i + 1]
    k = p.kernel()
    found = stencil_of(k)
    assert found is not None and found.rank == 1
    root = stree.from_isl(k.schedule)
    assert stencil.fused_rows(found, [1], root) is None
