"""Wavefronts inside each time step for in-place stencils
(schedules.host.gauss_seidel): Seidel-2D's recurrence along j traded for a
dependence-free diagonal per time step, the original's results at two sizes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from polyc.ops import polybench as ex
from schedules.host import gauss_seidel, profit
from schedules.host.cache_model import Cache, Model
from schedules.host.gauss_seidel import STEP_WAVEFRONTS, hyperplane
from schedules.host.scheduler import auto_found
from schedules.host.stencil import stencil_of
from tests.support.cfront_corpus import bench_checksums
from tests.support.sched import assert_same

HOST = Cache(l1=32 * 1024, l2=2 * 1024 * 1024, l3=32 * 1024 * 1024)
PARAMS = {"N": 2000, "T": 500}


def test_seidel2d_runs_each_time_step_along_2i_plus_j():
    k = ex.seidel2d(None, None, "int32")
    assert hyperplane(k, stencil_of(k)) == (2, 1)
    found = auto_found(k, cache=HOST, params=PARAMS)
    assert found.step == STEP_WAVEFRONTS
    model = Model(k, PARAMS, HOST)
    # the program order's innermost j carries j - 1 -> j; the wavefront's does not
    assert profit.recurrent(k, model) > 0
    assert profit.recurrent(found.kernel, model) == 0
    # one step of the innermost loop: i + 1 and j - 2 (a diagonal), t unchanged
    (step,) = profit.innermost_steps(found.kernel).values()
    np.testing.assert_allclose(step, [0, 1, -2])


@pytest.mark.parametrize("sizes", [{"N": 9, "T": 3}, {"N": 23, "T": 6}])
def test_the_wavefronts_compute_what_the_original_does(sizes):
    # the interpreter on the original is the oracle; integers: bit for bit
    k = ex.seidel2d(None, None, "int32")
    found = auto_found(k, cache=HOST, params=PARAMS)
    assert found.step == STEP_WAVEFRONTS
    assert_same(k, found.kernel, **sizes)


def test_no_wavefront_when_a_diagonal_does_not_fit_in_cache():
    # 2000 rows x 3 row offsets x 64 bytes = 375 KiB: more than the tile budget
    # of a 512 KiB L2; the chain's candidates decide instead
    small = Cache(l1=32 * 1024, l2=512 * 1024, l3=32 * 1024 * 1024)
    k = ex.seidel2d(None, None, "int32")
    assert gauss_seidel.step_wavefronts(k, Model(k, PARAMS, small)) is None
    assert gauss_seidel.step_wavefronts(k, Model(k, PARAMS, HOST)) is not None


def test_stencils_without_a_recurrence_keep_their_time_tiles():
    k = ex.jacobi2d(None, None, "int32")
    assert gauss_seidel.step_wavefronts(k, Model(k, PARAMS, HOST)) is None


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("sizes", [{"N": 31, "tsteps": 4}, {"N": 57, "tsteps": 7}])
def test_corpus_seidel2d_wavefronts_give_the_original_bits(sizes, tmp_path):
    # a Gauss-Seidel sweep reorders no sum: the checksum (hex float) of A is the
    # original's
    steps, original, polyc = bench_checksums("seidel_2d", sizes, tmp_path, cache=HOST)
    assert steps == [STEP_WAVEFRONTS]
    assert original == polyc and original


def test_a_row_that_depends_on_one_of_its_elements_is_no_chain(tmp_path):
    # Floyd-Warshall: path[i][j] reads path[i][k], written in the same j loop at
    # j = k: a recurrence by the chooser's count, but not a chain of latencies
    # (the wavefront ran at 0.43x of gcc's speed at MEDIUM)
    from bench import host_c_corpus as hc
    from polyc.frontends.c.parse import parse_c
    from tests.support.paths import CORPUS

    src = tmp_path / "floyd.c"
    text = (CORPUS / "floyd_warshall.c").read_text()
    src.write_text(hc.prepare("floyd_warshall", text, {}))
    (region,) = parse_c(src, include_dirs=[CORPUS])
    k = region.kernel
    model = Model(k, {"n": 500}, HOST)
    assert stencil_of(k) is not None and profit.recurrent(k, model) > 0
    assert gauss_seidel.step_wavefronts(k, model) is None
