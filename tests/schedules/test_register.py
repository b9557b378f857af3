"""Register tiles for contractions (schedules.host.register, codegen.accumulate):
the products get a micro-kernel whose accumulators stay in a local array across
the reduction loop, full tiles and partial ones compute the original's bits."""

from __future__ import annotations

import re

import pytest

import schedules as S
from polyc.errors import IllegalTransformError, ScheduleError
from polyc.integrations.c_source import compile_c as rewrite
from polyc.ops import polybench as ex
from schedules.host import cache_model
from schedules.host.cache_model import Cache
from schedules.host.register import rows_of_tile
from tests.support.cfront_corpus import assert_same_bits, build_and_run
from tests.support.paths import CORPUS
from tests.support.sched import assert_same, compile_c

#: the decisions tested are for one cache model, not this machine's
pytestmark = pytest.mark.usefixtures("pinned_host_cache")

HOST = Cache(l1=48 * 1024, l2=2 * 1024 * 1024, l3=32 * 1024 * 1024)
TINY = Cache(l1=1024, l2=4096, l3=8192)

#: gemm and 2mm as PolyBench writes them (sizes are parameters: the cost model
#: takes 1024 and tiles), each with a run function at sizes that leave full
#: register tiles and partial ones (rows not a multiple of 4, columns of 16)
SOURCES = {
    "gemm_reg": """
#include "dump.h"
#include <stdlib.h>
void kernel_gemm_reg(int ni, int nj, int nk, double alpha, double beta,
                     double C[ni][nj], double A[ni][nk], double B[nk][nj])
{
#pragma scop
  for (int i = 0; i < ni; i++) {
    for (int j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (int k = 0; k < nk; k++)
      for (int j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
#pragma endscop
}
void run_gemm_reg(void)
{
  int ni = 37, nj = 45, nk = 29;
  double (*C)[45] = malloc(sizeof(double) * 37 * 45);
  double (*A)[29] = malloc(sizeof(double) * 37 * 29);
  double (*B)[45] = malloc(sizeof(double) * 29 * 45);
  for (int i = 0; i < ni; i++) for (int j = 0; j < nj; j++) C[i][j] = val(i, j, 1);
  for (int i = 0; i < ni; i++) for (int j = 0; j < nk; j++) A[i][j] = val(i, j, 2);
  for (int i = 0; i < nk; i++) for (int j = 0; j < nj; j++) B[i][j] = val(i, j, 3);
  kernel_gemm_reg(ni, nj, nk, 1.5, 1.2, C, A, B);
  dump_d("out", "C", &C[0][0], ni * nj);
}
""",
    "mm2_reg": """
#include "dump.h"
#include <stdlib.h>
void kernel_mm2_reg(int ni, int nj, int nk, int nl, double alpha, double beta,
                    double tmp[ni][nj], double A[ni][nk], double B[nk][nj],
                    double C[nj][nl], double D[ni][nl])
{
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      tmp[i][j] = 0.0;
      for (int k = 0; k < nk; ++k)
        tmp[i][j] += alpha * A[i][k] * B[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nl; j++) {
      D[i][j] *= beta;
      for (int k = 0; k < nj; ++k)
        D[i][j] += tmp[i][k] * C[k][j];
    }
#pragma endscop
}
void run_mm2_reg(void)
{
  int ni = 18, nj = 33, nk = 7, nl = 50;
  double *tmp = malloc(sizeof(double) * ni * nj), *A = malloc(sizeof(double) * ni * nk);
  double *B = malloc(sizeof(double) * nk * nj), *C = malloc(sizeof(double) * nj * nl);
  double *D = malloc(sizeof(double) * ni * nl);
  for (int x = 0; x < ni * nk; x++) A[x] = val(x, 1, 1);
  for (int x = 0; x < nk * nj; x++) B[x] = val(x, 2, 2);
  for (int x = 0; x < nj * nl; x++) C[x] = val(x, 3, 3);
  for (int x = 0; x < ni * nl; x++) D[x] = val(x, 4, 4);
  kernel_mm2_reg(ni, nj, nk, nl, 1.5, 1.2, (void *)tmp, (void *)A, (void *)B,
                 (void *)C, (void *)D);
  dump_d("out", "tmp", tmp, ni * nj);
  dump_d("out", "D", D, ni * nl);
}
""",
}


def test_products_from_c_are_register_tiled_and_keep_their_bits(tmp_path):
    rewritten = {}
    for name, text in SOURCES.items():
        out = rewrite(text, schedule="auto", include_dirs=[CORPUS])
        (region,) = out.regions
        steps = [s.name for s in region.kernel.history]
        assert steps.count("accumulate") == (1 if name == "gemm_reg" else 2), steps
        # the accumulators are vectors of this host's SIMD width (gcc keeps them
        # in registers; a scalar array it spilled on every iteration)
        vb = cache_model.host_cache().vector
        mr, nv = rows_of_tile(vb), 128 // vb
        assert re.search(rf"_pc_vec\d+ _pc_acc\d+\[{mr}\]\[{nv}\];", out.text)
        assert f"vector_size({vb})" in out.text
        assert f"#pragma GCC unroll {mr}" in out.text
        rewritten[name] = out.text
    runs = build_and_run(
        {"original": (SOURCES, []), "rewritten": (rewritten, ["-fopenmp"])}, tmp_path
    )
    assert_same_bits(runs, SOURCES)


#: syrk as PolyBench writes it, sizes as parameters (the cost model takes 1024:
#: register tiles), run at 45 x 29: full 8 x 16 tiles (or 4 x 16), the diagonal's
#: partial ones and ragged edges
SYRK = """
#include "dump.h"
#include <stdlib.h>
void kernel_syrk_reg(int n, int m, double alpha, double beta, double C[n][n],
                     double A[n][m])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j <= i; j++)
      C[i][j] *= beta;
    for (int k = 0; k < m; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += alpha * A[i][k] * A[j][k];
  }
#pragma endscop
}
void run_syrk_reg(void)
{
  int n = 45, m = 29;
  double (*C)[45] = malloc(sizeof(double) * 45 * 45);
  double (*A)[29] = malloc(sizeof(double) * 45 * 29);
  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) C[i][j] = val(i, j, 1);
  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) A[i][j] = val(i, j, 2);
  kernel_syrk_reg(n, m, 1.5, 1.2, C, A);
  dump_d("out", "C", &C[0][0], n * n);
}
"""


def test_a_column_operand_is_gathered_into_vectors_with_the_same_bits(tmp_path):
    # syrk's A[j][k] moves with the vector loop j by a row of A: each vector of
    # it is gathered from VL scalar loads (before, the whole tile fell back to
    # the scalar local array, 2.0-2.4x slower at LARGE by hand)
    out = rewrite(SYRK, schedule="auto", include_dirs=[CORPUS])
    vb = cache_model.host_cache().vector
    mr, vl = rows_of_tile(vb), vb // 8
    assert re.search(rf"_pc_vec\d+ _pc_acc\d+\[{mr}\]\[{16 // vl}\];", out.text)
    gathered = re.search(r"\(\(_pc_vec\d+\)\{([^}]*)\}\)", out.text)
    assert gathered is not None
    assert gathered.group(1).count("A[") == vl
    runs = build_and_run(
        {
            "original": ({"syrk_reg": SYRK}, []),
            "rewritten": ({"syrk_reg": out.text}, []),
        },
        tmp_path,
    )
    assert_same_bits(runs, ["syrk_reg"])


def test_2mm_products_leave_their_initialisations_and_tile_whole():
    # the program order nests each product's k loop below the i, j band of its
    # initialisation: the product's band is separated and merged with k, then
    # tiled with j innermost and register-tiled
    out = rewrite(SOURCES["mm2_reg"], schedule="auto", include_dirs=[CORPUS])
    steps = [(s.name, s.args) for s in out.regions[0].kernel.history]
    assert ("merge_bands", ("L0_1", "L1")) in steps
    assert ("merge_bands", ("L2_1", "L3")) in steps


@pytest.mark.parametrize("dtype,nr", [("int32", 32), ("float32", 32)])
def test_host_build_of_a_register_tiled_matmul_equals_the_interpreter(dtype, nr):
    k = ex.matmul(None, dtype)
    a = S.auto(k, cache=HOST, params={"N": 512})
    assert [s.name for s in a.history][-4:] == [
        "accumulate",
        "permute",
        "split_band",
        "pack",
    ]
    tile = next(s for s in a.history if s.kwargs == (("name", "S0_S1_1_reg"),))
    assert tile.args[1] == {"i": 4, "j": nr}  # 128 bytes of a row
    # HOST's vectors are 32 bytes: a row of the tile is 4 of them
    assert "_pc_vec1 _pc_acc1[4][4];" in compile_c(a)[2].text
    # 70 = 2 full register tiles of 32 columns and a partial one; 37 rows
    assert_same(k, a, N=70)
    assert_same(k, a, N=37)


def test_replay_repeats_the_register_tile():
    k = ex.matmul(None, "int32")
    a = S.auto(k, cache=TINY, params={"N": 512})
    again = S.replay(a.original, a.history)
    assert again.schedule.plain_is_equal(a.schedule)


def _by_hand(order, at, tile=True):
    """matmul's S1 (i, j, k) register-tiled by hand: tiled by 4 x 8 on i, j,
    permuted to ``order`` and split before ``at`` (band ``M`` below ``S1``)."""
    k = ex.matmul(None, "int32")
    t = S.tile(k, "S1", {"i": 4, "j": 8}, name="R") if tile else k
    t = S.permute(t, "S1", order)
    return k, S.split_band(t, "S1", at, name="M")


def test_accumulate_by_hand_is_checked_replayed_and_exact():
    k, t = _by_hand(["k", "j", "i"], "j")
    a = S.accumulate(t, "S1")
    assert a.history[-1].name == "accumulate"
    assert "_pc_acc1[4][8]" in compile_c(a)[2].text
    assert S.replay(k, a.history).schedule.plain_is_equal(a.schedule)
    assert_same(k, a, N=19)


def test_accumulate_refuses_a_target_that_moves_with_the_marked_loop():
    _, t = _by_hand(["j", "k", "i"], "k")
    with pytest.raises(IllegalTransformError, match="moves with the loop of band"):
        S.accumulate(t, "S1")


def test_accumulate_refuses_bands_that_are_not_a_reduction_above_a_tile():
    k = ex.matmul(None, "int32")
    with pytest.raises(ScheduleError, match="not a reduction loop above a band"):
        S.accumulate(k, "S1")  # three members, no band below
    _, untiled = _by_hand(["k", "j", "i"], "j", tile=False)
    with pytest.raises(ScheduleError, match="no constant extent"):
        S.accumulate(untiled, "S1")


def test_a_nest_of_another_shape_is_emitted_as_it_is():
    # codegen keeps its promise only for k { l { p { one statement } } }: a
    # mark whose loops isl elided (one row) is emitted plainly and stays right
    k = ex.matmul(None, "int32")
    a = S.auto(k, cache=TINY, params={"N": 512})
    assert_same(k, a, N=1)
    assert_same(k, a, N=3)


def _correlation(m: int, n: int) -> str:
    """The corpus's correlation with its run function at ``m`` columns, ``n`` rows."""
    text = (CORPUS / "correlation.c").read_text()
    text = text.replace("int m = 8, n = 10;", f"int m = {m}, n = {n};")
    return text.replace(
        "double data[10][8], corr[8][8], mean[8], stddev[8];",
        (f"double data[{n}][{m}], corr[{m}][{m}], mean[{m}], stddev[{m}];"),
    )


def test_correlation_product_gets_its_own_band_and_register_tile(tmp_path):
    # corr[i][i] = 1 runs in the i loop above the product's j, k loops: the
    # product is separated from it in two steps (j then i) and merged into one
    # band i, j, k (it was left as isl's k-innermost dot products, strided over
    # data's columns: 0.14x of Polly at LARGE); at 37 columns the triangle
    # j > i has full 4 x 16 tiles and partial ones
    source = {"correlation": _correlation(37, 21)}
    out = rewrite(source["correlation"], schedule="auto", include_dirs=[CORPUS])
    (region,) = out.regions
    assert region.step == "program-order"
    marks = re.findall(r"@accumulate\(\d+, \d+, \d+\)", str(region.kernel.schedule))
    vb = cache_model.host_cache().vector
    assert marks == [f"@accumulate(16, {rows_of_tile(vb)}, {vb})"]
    merged = [s.args for s in region.kernel.history if s.name == "merge_bands"]
    assert len(merged) >= 2
    runs = build_and_run(
        {"original": (source, []), "rewritten": ({"correlation": out.text}, [])},
        tmp_path,
    )
    assert_same_bits(runs, ["correlation"])


def test_products_are_tiled_by_cache_blocks_from_the_caches():
    # register.blocking: KC = 8 KiB of L1 / 128-byte panel rows = 64, MC = half
    # the 64 KiB L2 over a KC row of doubles = 64, NC = half the 256 KiB L3 over
    # the same = 256 (before: the footprint model's one size for all, 32 here)
    from polyc.ops import polybench as ex
    from schedules.host.cache_model import Cache

    k = ex.matmul(None, "float64")
    cache = Cache(l1=8 * 1024, l2=64 * 1024, l3=256 * 1024, vector=32)
    out = S.auto(k, params={"N": 700}, cache=cache)
    (first, *_) = [s.args[1] for s in out.history if s.name == "tile"]
    assert first == {"i": 64, "k": 64, "j": 256}
    assert "@pack(64)" in str(out.schedule)
    assert_same(k, out, N=83)
