"""Packing of a contraction's panels (schedules.host.pack, codegen.pack) and the
vector form of its register tiles (codegen.accumulate): the products keep the
original's bits on sizes that leave ragged edges (not multiples of MR, NR or
KC), the copy is made only where it pays, and a body the vector form cannot
take keeps the scalar tile."""

from __future__ import annotations

import re

import pytest

import schedules as S
from polyc.errors import ArgumentError, ScheduleError
from polyc.integrations.c_source import compile_c as rewrite
from polyc.ops import polybench as ex
from schedules.host.cache_model import Cache, Model, host_vector_bytes, parse_cache
from schedules.host.pack import pays
from tests.schedules.test_register import SOURCES
from tests.support.cfront_corpus import assert_same_bits, build_and_run
from tests.support.paths import CORPUS
from tests.support.sched import assert_same, compile_c, inputs_for, run_c

#: caches small enough that products of a few dozen rows are cache-tiled (and
#: their panels packed), with AVX-512's 64-byte vectors: 8 x 16 register tiles
WIDE = Cache(l1=4096, l2=128 * 1024, l3=1 << 20, vector=64)
#: the same for doubles (twice the bytes: twice the cache for tiles of 16 x 16)
WIDE8 = Cache(l1=4096, l2=256 * 1024, l3=1 << 20, vector=64)
#: sizes whose rows, columns and reduction are not multiples of 8, 16 or 32
RAGGED = (37, 53, 100)


def _steps(kernel):
    return [s.name for s in kernel.history]


@pytest.mark.parametrize("dtype,cache", [("float64", WIDE8), ("float32", WIDE)])
def test_packed_matmul_computes_the_untransformed_bits_on_ragged_sizes(dtype, cache):
    k = ex.matmul(None, dtype)
    a = S.auto(k, cache=cache, params={"N": 256})
    assert _steps(a)[-4:] == ["accumulate", "permute", "split_band", "pack"]
    text = compile_c(a)[2].text
    assert re.search(r"_pc_pack1_0\[\d+\] __attribute__\(\(aligned\(64\)\)\)", text)
    assert "vector_size(64)" in text
    for n in (*RAGGED, 64):
        inputs = inputs_for(k, seed=n, N=n)
        want = run_c(k, {x: v.copy() for x, v in inputs.items()}, N=n)
        got = run_c(a, {x: v.copy() for x, v in inputs.items()}, N=n)
        for name in want:
            assert want[name].tobytes() == got[name].tobytes(), (n, name)


def test_packed_integer_matmul_equals_the_interpreter():
    k = ex.matmul(None, "int32")
    a = S.auto(k, cache=WIDE, params={"N": 256})
    assert "pack" in _steps(a)
    for n in RAGGED:
        assert_same(k, a, N=n)


def test_replay_repeats_the_packing():
    k = ex.matmul(None, "float64")
    a = S.auto(k, cache=WIDE8, params={"N": 256})
    again = S.replay(a.original, a.history)
    assert again.schedule.plain_is_equal(a.schedule)


def test_packed_products_from_c_keep_their_bits_at_o3_native(tmp_path):
    # gemm and 2mm as PolyBench writes them, at sizes with full and partial
    # tiles, built the way the benchmark builds them (the vector form in the
    # host's widest registers)
    rewritten = {}
    for name, text in SOURCES.items():
        out = rewrite(text, schedule="auto", include_dirs=[CORPUS], cache=WIDE)
        steps = _steps(out.regions[0].kernel)
        assert steps.count("pack") == (1 if name == "gemm_reg" else 2), steps
        assert "_pc_pack" in out.text
        rewritten[name] = out.text
    flags = ["-O3", "-march=native", "-fopenmp"]
    runs = build_and_run(
        {"original": (SOURCES, flags), "rewritten": (rewritten, flags)}, tmp_path
    )
    assert_same_bits(runs, SOURCES)


def test_a_small_product_is_not_packed():
    # one cache tile holds the whole product: nothing to tile, KC is the
    # problem size (not a constant), and the panel's rows stay in L1
    k = ex.matmul(None, "float64")
    a = S.auto(k, cache=WIDE, params={"N": 24})
    assert "pack" not in _steps(a)


def test_pays_follows_the_rule():
    k = ex.matmul(None, "float64")
    model = Model(k, {"N": 1024}, Cache(l1=48 * 1024))
    stmt = next(s for s in k.statements if s.depth == 3)
    assert pays(model, stmt, 128, 16, 128)
    assert not pays(model, stmt, None, 16, 128)  # no constant KC: no buffer size
    assert not pays(model, stmt, 8, 16, 128)  # fewer rows than MIN_PANEL_ROWS
    assert not pays(model, stmt, 128, 1, 128)  # one row tile: no reuse
    assert not pays(model, stmt, 512, 16, 128)  # the panel (64 KiB) is past L1
    small = Model(k, {"N": 16}, Cache(l1=48 * 1024))  # 16 rows of 128 bytes fit
    assert not pays(small, stmt, 16, 16, 128)


def test_a_body_the_vectors_cannot_take_keeps_the_scalar_tile():
    # exp(A[i][k]) * B[k][j]: exp has no vector form in C's vector arithmetic,
    # so the micro-kernel keeps the scalar local array (and no panel is packed:
    # the copy is for the vector form's loads)
    from polyc import compute as pc

    A = pc.placeholder("A", (256, 256), "float64")
    B = pc.placeholder("B", (256, 256), "float64")
    r = pc.reduce_axis(256, "k")
    C = pc.compute("C", (256, 256), lambda i, j: pc.sum(pc.exp(A[i, r]) * B[r, j], r))
    k = pc.kernel("mm_exp", [C])
    a = S.auto(k, cache=WIDE8)
    assert "accumulate" in _steps(a)
    text = compile_c(a)[2].text
    assert "_pc_vec" not in text and "_pc_pack" not in text
    assert re.search(r"double _pc_acc\d+\[8\]\[16\];", text)
    inputs = inputs_for(k, seed=3)
    want = run_c(k, {x: v.copy() for x, v in inputs.items()})
    got = run_c(a, {x: v.copy() for x, v in inputs.items()})
    for name in want:
        assert want[name].tobytes() == got[name].tobytes(), name


def test_pack_refuses_a_band_that_is_not_over_register_tiles():
    k = ex.matmul(None, "float64")
    with pytest.raises(ScheduleError, match="is not a loop over register tiles"):
        S.pack(k, "S1", 64)
    a = S.auto(k, cache=WIDE8, params={"N": 256})
    with pytest.raises(ArgumentError, match="rows must be a positive integer"):
        S.pack(a, "S0_S1_1_reg_rows", 0)


def test_accumulate_refuses_a_vector_width_that_is_not_positive():
    k = ex.matmul(None, "int32")
    t = S.tile(k, "S1", {"i": 4, "j": 8}, name="R")
    t = S.split_band(S.permute(t, "S1", ["k", "j", "i"]), "S1", "j", name="M")
    with pytest.raises(ArgumentError, match="vector must be a positive integer"):
        S.accumulate(t, "S1", vector=-32)


def test_the_vector_width_comes_from_the_cpu_flags_and_can_be_set():
    assert host_vector_bytes("flags\t: fpu sse2 avx avx2 avx512f\n") == 64
    assert host_vector_bytes("flags\t: fpu sse2 avx avx2 fma\n") == 32
    assert host_vector_bytes("flags\t: fpu sse2\n") == 16
    assert host_vector_bytes("processor : 0\n") == Cache.vector
    assert parse_cache("vector=16", base=WIDE) == Cache(4096, 128 * 1024, 1 << 20, 16)


def test_a_panel_too_large_for_the_stack_is_not_copied():
    # a hand-set mark asking for 2^20 rows (16 MiB of buffer) runs the loops as
    # they are, with the same bits
    k = ex.matmul(None, "float64")
    a = S.pack(S.auto(k, cache=WIDE8, params={"N": 256}), "S0_S1_1_reg_rows", 1 << 20)
    text = compile_c(a)[2].text
    assert "_pc_pack" not in text and "_pc_vec" in text
    inputs = inputs_for(k, seed=5, N=53)
    want = run_c(k, {x: v.copy() for x, v in inputs.items()}, N=53)
    got = run_c(a, {x: v.copy() for x, v in inputs.items()}, N=53)
    for name in want:
        assert want[name].tobytes() == got[name].tobytes(), name
