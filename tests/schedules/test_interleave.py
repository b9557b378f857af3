"""Independent recurrences interleaved (schedules.host.interleave): the rows of a
dependence-free loop run together inside the loop that carries each row's
recurrence, every schedule checked, the original's bits kept."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from polyc.integrations.c_source import compile_c as rewrite
from polyc.lang.program import Program
from schedules.host import chain, interleave
from schedules.host.profit import innermost_steps, recurrent_statements
from schedules.host.scheduler import AS_WRITTEN, auto_found
from tests.support.cfront_corpus import bench_checksums
from tests.support.paths import CORPUS
from tests.support.sched import assert_same


def _sweeps(dtype: str = "int32"):
    """adi's shape: per row ``i`` (independent), a forward recurrence along ``j``
    after its boundary value, then a backward one."""
    p = Program("sweeps")
    N = p.param("N")
    A = p.array("A", (N, N), dtype)
    P = p.array("P", (N, N), dtype, role="inout")
    V = p.array("V", (N, N), dtype, role="inout")
    with p.loop("i", 0, N) as i:
        P[i, 0] = A[i, 0]
        with p.loop("j", 1, N) as j:
            P[i, j] = P[i, j - 1] * 3 + A[i, j]
        V[i, N - 1] = P[i, N - 1]
        with p.loop("j", 1, N) as j:
            V[i, N - 1 - j] = V[i, N - j] * 5 - P[i, N - 1 - j]
    return p.kernel()


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_rows_of_recurrences_run_together_and_compute_the_same(dtype):
    k = _sweeps(dtype)
    found = auto_found(k, params={"N": 512})
    # both recurrences' innermost loop is now the row loop i: a unit step moves
    # i and nothing else, so no recurrence is left on an innermost loop
    chains = [s.name for s in k.statements if s.depth == 2]
    steps = innermost_steps(found.kernel)
    for name in chains:
        np.testing.assert_allclose(steps[name], [1, 0])
    assert recurrent_statements(found.kernel) == set()
    history = [s.name for s in found.kernel.history]
    assert "distribute" in history and history.count("merge_bands") == 2
    for n in (5, 8 * interleave.ROWS + 3):
        assert_same(k, found.kernel, N=n)


def test_the_program_order_keeps_its_one_chain_per_row_without_it(monkeypatch):
    # the rewrite is what removes the recurrence from the innermost loops
    import schedules.host.scheduler as scheduler

    k = _sweeps()
    monkeypatch.setattr(scheduler, "interleave_recurrences", lambda k, m: k)
    found = auto_found(k, params={"N": 512})
    assert recurrent_statements(found.kernel)


def test_a_loop_of_fewer_than_two_tiles_of_rows_is_left_alone():
    k = _sweeps()
    found = auto_found(k, params={"N": 2 * interleave.ROWS - 1})
    assert "distribute" not in [s.name for s in found.kernel.history]
    assert recurrent_statements(found.kernel)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_adi_interleaves_its_sweeps_and_keeps_its_bits(tmp_path):
    # adi: each half step's forward and backward sweeps run 8 rows at a time
    # (1.7x of gcc's time on the original at LARGE, where isl's distributed
    # schedule was 0.98x); a stencil of divisions reorders no sum: bit for bit
    text = (CORPUS / "adi.c").read_text()
    (region,) = rewrite(text, schedule="auto", include_dirs=[CORPUS]).regions
    assert recurrent_statements(region.kernel) == set()
    history = [s.name for s in region.kernel.history]
    assert history.count("distribute") == 2 and history.count("permute") == 4
    for sizes in ({"tsteps": 3, "n": 21}, {"tsteps": 2, "n": 37}):
        steps, original, polyc = bench_checksums("adi", sizes, tmp_path)
        assert steps[0] not in (AS_WRITTEN, chain.TIME_TILES), steps
        assert original == polyc and original, sizes
