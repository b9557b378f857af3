"""Matrix-vector products on the host (schedules.host.matvec, the rows form of
codegen.accumulate): a column walk becomes a row walk, rows of dot products
keep eight sums in registers across the reduction loop, and every output keeps
the original's bits (no sum is reordered)."""

from __future__ import annotations

import re

import pytest

import schedules as S
from polyc.errors import IllegalTransformError
from polyc.integrations.c_source import compile_c as rewrite
from polyc.lang.program import Program
from schedules.host import profit
from tests.support.cfront_corpus import assert_same_bits, build_and_run
from tests.support.paths import CORPUS
from tests.support.sched import assert_same, compile_c

#: the decisions tested are for one cache model, not this machine's
pytestmark = pytest.mark.usefixtures("pinned_host_cache")

#: corpus kernel -> the bands marked ``@accumulate(8; ...)`` with their promoted
#: statements, and how many bands are permuted to walk the matrix row by row
SHAPES = {
    "gesummv": ({"S2, S3"}, 0),
    "mvt": ({"S0"}, 1),
    "gemver": ({"S3"}, 1),
    "bicg": ({"S3"}, 0),
    # atax: the axpys over the same rows fused into each tile of dot products
    # (test_profit's atax test checks the fusion)
    "atax": ({"S2"}, 0),
}


def _marks(text: str) -> set[str]:
    return set(re.findall(r"@accumulate\(8; ([\w, ]+)\)", text))


def test_corpus_matvec_kernels_get_row_tiles_and_keep_their_bits(tmp_path):
    sources, rewritten = {}, {}
    for name, (marked, permuted) in SHAPES.items():
        text = (CORPUS / f"{name}.c").read_text()
        out = rewrite(text, schedule="auto", include_dirs=[CORPUS])
        (region,) = out.regions
        kernel = region.kernel
        assert _marks(str(kernel.schedule)) == marked, name
        steps = kernel.history
        turned = {s.args[0] for s in steps if s.name == "permute"}
        turned -= {s.args[0] for s in steps if s.name == "accumulate"}
        assert len(turned) == permuted, (name, steps)
        assert "#pragma GCC unroll 8" in out.text
        assert re.search(r"(double|float) _pc_acc\d+_\d+\[8\];", out.text)
        sources[name], rewritten[name] = text, out.text
    runs = build_and_run(
        {"original": (sources, []), "rewritten": (rewritten, ["-fopenmp"])}, tmp_path
    )
    assert_same_bits(runs, SHAPES)


def _mvt(dtype: str = "int32"):
    """mvt: ``x1 += A y1`` (rows of dot products), ``x2 += A^T y2`` (a column
    walk), sizes symbolic."""
    p = Program("mvt")
    N = p.param("N")
    A = p.array("A", (N, N), dtype)
    y1 = p.array("y1", (N,), dtype)
    y2 = p.array("y2", (N,), dtype)
    x1 = p.array("x1", (N,), dtype, role="inout")
    x2 = p.array("x2", (N,), dtype, role="inout")
    with p.loop("i", 0, N) as i, p.loop("j", 0, N) as j:
        x1[i] = x1[i] + A[i, j] * y1[j]
    with p.loop("i", 0, N) as i, p.loop("j", 0, N) as j:
        x2[i] = x2[i] + A[j, i] * y2[j]
    return p.kernel()


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_host_build_of_mvt_equals_the_interpreter(dtype):
    k = _mvt(dtype)
    a = S.auto(k, params={"N": 2000})
    names = [s.name for s in a.history]
    assert names.count("accumulate") == 1
    # the column walk permuted, the rows tiled and permuted
    assert sum(s.args[1] == ("j", "i") for s in a.history if s.name == "permute") == 2
    assert "_pc_acc1_0[8]" in compile_c(a)[2].text
    # 19 rows: two full tiles of 8 and a partial one; 5: partial only
    assert_same(k, a, N=19)
    assert_same(k, a, N=5)
    assert S.replay(k, a.history).schedule.plain_is_equal(a.schedule)


def _rows_by_hand(kernel):
    t = S.tile(kernel, "L0", {"i": 8}, name="R")
    t = S.permute(t, "L0", ["j", "i"])
    return S.split_band(t, "L0", "i", name="M")


def test_accumulate_rows_by_hand_is_checked_and_exact():
    k = _mvt()
    a = S.accumulate(_rows_by_hand(k), "L0")
    assert "@accumulate(8; S0)" in str(a.schedule)
    assert_same(k, a, N=21)


def test_accumulate_rows_refuses_a_statement_that_reads_a_promoted_array():
    p = Program("dots")
    N = p.param("N")
    A = p.array("A", (N, N), "int32")
    y = p.array("y", (N,), "int32")
    x = p.array("x", (N,), "int32", role="inout")
    z = p.array("z", (N, N), "int32", role="inout")
    with p.loop("i", 0, N) as i, p.loop("j", 0, N) as j:
        x[i] = x[i] + A[i, j] * y[j]
        z[i, j] = x[i]
    k = p.kernel()
    with pytest.raises(IllegalTransformError, match="S1 accesses x, which S0 holds"):
        S.accumulate(_rows_by_hand(k), "L0")


def test_gramschmidt_update_walks_a_by_rows_and_keeps_its_bits(tmp_path):
    # A[i][j] -= Q[i][k] * R[k][j] ran j outer, i inner inside the k loop (a
    # column walk over A the scheduler does not tile): its two nested bands are
    # merged and permuted, j innermost
    text = (CORPUS / "gramschmidt.c").read_text()
    out = rewrite(text, schedule="auto", include_dirs=[CORPUS])
    (region,) = out.regions
    kernel = region.kernel
    update = next(s.name for s in kernel.statements if s.target.array == "A")
    steps = profit.innermost_steps(kernel)
    j = kernel.statement(update).iterators.index("j")
    assert steps[update][j] == 1.0 and sum(abs(steps[update])) == 1.0
    assert [s.name for s in kernel.history].count("merge_bands") >= 2
    runs = build_and_run(
        {
            "original": ({"gramschmidt": text}, []),
            "rewritten": ({"gramschmidt": out.text}, []),
        },
        tmp_path,
    )
    assert_same_bits(runs, ["gramschmidt"])


def test_large_mvt_keeps_row_walks_under_its_parallel_marks():
    # at N = 20000 a fork pays: the parallel marks would move the column walk's
    # dependence-free i back in front of j (a column walk again); tiled by 512
    # first, the tile loop takes the mark and j, i stay in row order
    k = _mvt("float64")
    a = S.auto(k, params={"N": 20000})
    steps = [(s.name, s.args) for s in a.history]
    walk = next(args[0] for name, args in steps if args[1:] == ({"i": 512},))
    assert ("permute", (walk, ("j", "i"))) in steps
    assert ("permute", (walk, ("i", "j"))) not in steps
    assert ("parallel", (f"{walk}_t",)) in steps
    assert [name for name, _ in steps].count("accumulate") == 1
    assert_same(k, a, N=1030)
