"""The automatic scheduler's fallback chain (schedules.host.chain): every valid
kernel gets a schedule, each step is checked, and the step that won is reported;
budgets the caller sets still raise."""

from __future__ import annotations

import islpy as isl
import pytest

import schedules as S
from polyc.errors import ArgumentError, BudgetError, ScheduleError
from polyc.frontends.c.parse import parse_c
from polyc.ops import polybench as ex
from schedules.host import chain
from schedules.host.cache_model import Cache
from schedules.host.scheduler import auto_found
from tests.support.paths import CORPUS
from tests.support.sched import assert_same

TINY = Cache(l1=1024, l2=4096, l3=8192)

#: FDTD-2D as PolyBench 4.2.1 writes it: arrays sized by the dataset's macros,
#: loops bounded by the function's parameters. The context that says every access
#: is in bounds is a union of four pieces, and isl's scheduler on the dependences
#: intersected with it ran past its 5 s deadline (it still had no answer after 60 s)
FDTD_POLYBENCH = """\
#define TMAX 500
#define NX 1000
#define NY 1200
void kernel_fdtd_2d(int tmax, int nx, int ny, double ex[NX + 0][NY + 0],
                    double ey[NX + 0][NY + 0], double hz[NX + 0][NY + 0],
                    double _fict_[TMAX + 0])
{
  int t, i, j;
#pragma scop
  for (t = 0; t < tmax; t++) {
    for (j = 0; j < ny; j++)
      ey[0][j] = _fict_[t];
    for (i = 1; i < nx; i++)
      for (j = 0; j < ny; j++)
        ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j]);
    for (i = 0; i < nx; i++)
      for (j = 1; j < ny; j++)
        ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1]);
    for (i = 0; i < nx - 1; i++)
      for (j = 0; j < ny - 1; j++)
        hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
#pragma endscop
}
"""


def test_deriche_gets_a_schedule_where_the_operation_budget_gave_up():
    # 47 statements: isl needs ~2M operations, past the old default of 600,000
    (region,) = parse_c(CORPUS / "deriche.c")
    k = region.kernel
    assert len(k.statements) == 47
    found = auto_found(k)
    assert found.step in chain.STEPS
    assert found.failures == ()
    assert S.first_violation(found.kernel, found.kernel.schedule) is None
    # a budget the caller sets is still a hard limit
    with pytest.raises(BudgetError, match=r"budget of 600000 operations because"):
        S.auto(k, max_operations=600_000)


def _fdtd(tmp_path):
    src = tmp_path / "fdtd.c"
    src.write_text(FDTD_POLYBENCH)
    (region,) = parse_c(src)
    return region.kernel


def test_a_polybench_context_is_scheduled_relaxed(tmp_path, monkeypatch):
    monkeypatch.setattr(chain, "STEP_SECONDS", 0.5)  # the relaxed step takes ~10 ms
    k = _fdtd(tmp_path)
    assert k.context.coalesce().n_basic_set() > 1  # a union of pieces
    # with tiles FDTD-2D at these sizes gets time tiles before the chain runs
    # (test_stencil_time_tiles); the chain is what this test is about
    found = auto_found(k, tile=False)
    assert found.failures == ()  # the exact problem is not even tried
    assert found.compared[0] == "isl-relaxed"
    assert S.first_violation(found.kernel, found.kernel.schedule) is None
    assert_same(k, found.kernel, c=False, tmax=3, nx=6, ny=5)


def test_the_exact_problem_of_a_polybench_context_runs_past_its_bound(
    tmp_path, monkeypatch
):
    # what the relaxed step avoids: isl on the dependences split by the context
    monkeypatch.setattr(chain, "STEP_SECONDS", 0.5)
    k = _fdtd(tmp_path)
    with pytest.raises(BudgetError, match=r"ran past its deadline of 0\.5 s"):
        chain.isl_schedule(k, "smart", chain.Budget(max_seconds=0.5))


def _failing(monkeypatch, failing: set[str]):
    """Make the chain's isl steps in ``failing`` find nothing."""
    real = chain.isl_schedule

    def fake(
        kernel, fusion, budget, outer_coincidence=False, relaxed=False, feautrier=False
    ):
        step = (
            "feautrier"
            if feautrier
            else "isl-sccs"
            if relaxed and fusion == "none"
            else "isl-relaxed"
            if relaxed
            else "isl"
        )
        if step in failing:
            raise ScheduleError(f"auto: isl's scheduler failed because {step} (test)")
        return real(kernel, fusion, budget, outer_coincidence, relaxed, feautrier)

    monkeypatch.setattr(chain, "isl_schedule", fake)


@pytest.mark.parametrize(
    "failing, winner",
    [
        ({"isl"}, "isl-relaxed"),
        ({"isl", "isl-relaxed"}, "isl-sccs"),
        ({"isl", "isl-relaxed", "isl-sccs"}, "feautrier"),
        ({"isl", "isl-relaxed", "isl-sccs", "feautrier"}, "program-order"),
    ],
)
def test_each_step_of_the_chain_is_legal(monkeypatch, failing, winner):
    _failing(monkeypatch, failing)
    k = ex.two_mm(None, "int32")
    found = auto_found(k, cache=TINY, params={"N": 19}, parallel=False)
    assert found.compared[0] == winner
    assert [f.split(":")[0] for f in found.failures] == [
        s for s in chain.STEPS if s in failing
    ]
    assert S.first_violation(found.kernel, found.kernel.schedule) is None
    assert_same(k, found.kernel, N=19)


def test_the_program_order_is_still_tiled_and_marked_parallel(monkeypatch):
    _failing(monkeypatch, {"isl", "isl-relaxed", "isl-sccs", "feautrier"})
    k = ex.matmul(None, "int32")
    found = auto_found(k, cache=TINY, params={"N": 512})
    assert found.step == "program-order"
    names = [s.name for s in found.kernel.history]
    assert names[names.index("parallel") - 1] == "tile"
    assert names[-1] == "accumulate"  # and the product's register tile
    assert_same(k, found.kernel, N=19)


def test_program_order_flags_come_from_the_dependences():
    # matmul C[i, j] += A[i, k] * B[k, j] in one band (i, j, k) below the init:
    # i and j carry nothing, k carries the sum, and every distance is >= 0
    root = chain.program_order(ex.matmul(None, "int32"))
    bands = []
    node = root.get_root()

    def visit(n: isl.ScheduleNode) -> None:
        if n.get_type() == isl.schedule_node_type.band:
            bands.append(
                (
                    n.band_get_permutable(),
                    [n.band_member_get_coincident(p) for p in range(n.band_n_member())],
                )
            )
        for c in range(n.n_children()):
            visit(n.child(c))

    visit(node)
    assert (True, [True, True, False]) in bands or (True, [True, True]) in bands


def test_lower_bounds_keep_only_the_parameters_lower_bounds():
    ctx = isl.Set("[n, m] -> { : n >= 3 and m <= 10 and m >= n - 5 }")
    assert chain.lower_bounds(ctx).is_equal(
        isl.Set("[n, m] -> { : n >= 3 and m >= -2 }")
    )
    union = isl.Set("[t, n] -> { : t <= 0 or (t > 0 and n <= 120) }")
    assert chain.lower_bounds(union).is_equal(isl.Set("[t, n] -> { : }"))


def test_a_negative_budget_is_refused():
    with pytest.raises(ArgumentError, match=r"max_seconds=-1 is not a budget"):
        S.auto(ex.matmul(8), max_seconds=-1)
    with pytest.raises(ArgumentError, match=r"max_operations='many' is not a budget"):
        S.auto(ex.matmul(8), max_operations="many")
