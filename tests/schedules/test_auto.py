"""The automatic scheduler: legal, same results, tiles and parallel loops where the
model says so, fusion options, the operation budget."""

from __future__ import annotations

import islpy as isl
import pytest

import schedules as S
from polyc import compute as pc
from polyc import ops
from polyc.errors import BudgetError
from polyc.ops import polybench as ex
from schedules import stree
from schedules.host.cache_model import Cache, Model
from tests.support.sched import assert_same, compile_c

TINY = Cache(l1=1024, l2=4096, l3=8192)  # 2 KiB per tile: tiles of 8 on test sizes
HOST = Cache(l1=32 * 1024, l2=512 * 1024, l3=32 * 1024 * 1024)

KERNELS = {
    "matmul": lambda: ex.matmul(None, "int32"),
    "two_mm": lambda: ex.two_mm(None, "int32"),
    "syrk": lambda: ex.syrk(None, "int32"),
    "lu": lambda: ex.lu(None, "float64"),  # integer LU divides by zero
    "jacobi2d": lambda: ex.jacobi2d(None, None, "int32"),
    "seidel2d": lambda: ex.seidel2d(None, None, "int32"),
    "producer_consumer": lambda: ex.producer_consumer(None, "int32"),
}
SIZES = {"N": 19, "T": 5}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_auto_is_legal_and_gives_the_same_results(name):
    k = KERNELS[name]()
    sizes = {p: SIZES[p] for p in k.params}
    a = S.auto(k, cache=TINY, params=sizes)
    assert S.first_violation(a, a.schedule) is None
    assert S.replay(a.original, a.history).schedule.plain_is_equal(a.schedule)
    assert_same(k, a, **sizes)


def test_auto_tiles_matmul_and_marks_the_outer_tile_loop_parallel():
    # 512^3 = 134M instances in the one fork of the outer tile loop
    a = S.auto(ex.matmul(None, "int32"), cache=TINY, params={"N": 512})
    steps = [s.name for s in a.history]
    assert steps[:4] == ["apply_schedule", "permute", "tile", "parallel"]
    # the innermost point loop is j: B[k, j] and C[i, j] are contiguous along it
    assert a.history[1].args[1][-1] == "j"
    # then the register tile of the product (the zero init apart)
    assert steps[4:] == ["distribute", "tile", "permute", "split_band", "accumulate"]
    text = compile_c(a)[2].text
    # j tiles of 8: a row of the register tile is one 32-byte vector of int32
    assert "#pragma omp parallel for" in text and "_pc_vec1 _pc_acc1[4][1];" in text


def test_auto_parallelises_a_time_tiled_stencil_along_a_wavefront():
    k = ex.seidel2d(None, None, "int32")
    a = S.auto(k, cache=TINY, params={"N": 64, "T": 16}, min_parallel_work=0)
    assert [s.name for s in a.history][-3:] == ["skew", "split_band", "parallel"]
    # 64 x 64 x 16 instances over ~20 wavefront steps: too little work per fork
    small = S.auto(k, cache=TINY, params={"N": 64, "T": 16})
    assert "parallel" not in [s.name for s in small.history]


def test_stencil_whose_step_streams_past_the_tile_budget_gets_sequential_time_tiles():
    # one time step of Jacobi-2D on 1000 x 1000 floats touches 8 MB, past half the
    # L2: the time loop is tiled against skewed space (schedules.host.stencil), and
    # the tiles run in order, without a fork (this used to ask isl for outer
    # coincidence instead, since the step fits in the last-level cache; time
    # tiles ran 1.4x faster at PolyBench's LARGE, see docs/c.md)
    k = ex.jacobi2d(None, None)
    a = S.auto(k, cache=HOST, params={"N": 1000, "T": 100})
    assert [s.name for s in a.history] == ["apply_schedule"]
    text = compile_c(a)[2].text
    assert "for (long t_t = " in text and "omp parallel" not in text
    # asked for wavefronts, with the threshold lowered, the tile loops are skewed
    # into wavefronts and the inner one is marked
    low = S.auto(
        k,
        cache=HOST,
        params={"N": 1000, "T": 100},
        min_parallel_work=1e5,
        wavefront=True,
    )
    names = [s.name for s in low.history]
    assert names == ["apply_schedule", "skew", "split_band", "parallel"]
    assert_same(k, low, N=12, T=3)


def test_fusion_strategies():
    def chain():
        A = pc.placeholder("A", (32,), "int32")
        B = pc.compute("B", (32,), lambda i: A[i] + 1)
        C = pc.compute("C", (32,), lambda i: A[i] * 2)
        return pc.kernel("chain", outputs=[B, C])

    fused = S.auto(chain(), fusion="max", tile=False, parallel=False)
    apart = S.auto(chain(), fusion="none", tile=False, parallel=False)
    assert S.to_yaml(fused).count("schedule:") == 1
    assert S.to_yaml(apart).count("schedule:") == 2
    for k in (fused, apart):
        assert_same(chain(), k)


def twenty_statements():
    """A 20-statement kernel: element-wise ops, row reductions and a contraction."""
    n = 16
    X = pc.placeholder("X", (n, n), "int32")
    W = pc.placeholder("W", (n, n), "int32")
    t = X
    outs = []
    for s in range(19):
        kind = s % 4
        prev = t
        if kind == 0:
            t = pc.compute(f"T{s}", (n, n), lambda i, j, p=prev: p[i, j] + 1)
        elif kind == 1:
            t = pc.compute(f"T{s}", (n, n), lambda i, j, p=prev: p[i, j] * 3 - p[j, i])
        elif kind == 2:
            r = pc.reduce_axis(n, f"r{s}")
            t = pc.compute(
                f"T{s}", (n, n), lambda i, j, p=prev, r=r: pc.sum(p[i, r] * W[r, j], r)
            )
        else:
            t = pc.compute(f"T{s}", (n, n), lambda i, j, p=prev: pc.maximum(p[i, j], 0))
    outs.append(t)
    return pc.kernel("twenty", outputs=outs)


def test_auto_on_a_twenty_statement_kernel():
    k = twenty_statements()
    assert len(k.statements) >= 20
    a = S.auto(k, cache=TINY)
    assert_same(k, a)


def test_cost_model_footprint_of_a_matmul_tile():
    k = ex.matmul(None)
    model = Model(k, {"N": 1024}, Cache(l1=32768, l2=512 * 1024))
    root = stree.from_isl(k.schedule)
    _, nb = stree.find(root, "S1", "test")
    # A[i, k], B[k, j], C[i, j]: three 32 x 32 float tiles
    assert model.footprint([], nb.band, {0: 32, 1: 32, 2: 32}) == 3 * 32 * 32 * 4
    # untiled k spans all 1024 values: A and B tiles are 32 x 1024
    assert model.footprint([], nb.band, {0: 32, 1: 32}) == (2 * 32 * 1024 + 32 * 32) * 4
    # half of 512 KiB holds three 128 x 128 float tiles (192 KiB) but not 256 x 256
    assert model.tile_sizes([], nb.band) == {0: 128, 1: 128, 2: 128}


def test_isl_scheduler_is_stopped_at_its_deadline():
    """isl's operation budget does not bound every loop of its scheduler; a
    CPU-time deadline does (the scheduler runs in a forked child). A bound of 0 s
    refuses every answer, however fast: matmul's takes isl ~3 ms, which a child
    used to finish before the kernel's first clock tick about one time in four."""
    from schedules.host.bounded import bounded_compute

    k = ex.matmul(32)
    for _ in range(10):
        with pytest.raises(
            BudgetError, match=r"ran past its deadline of 0 s because matmul"
        ):
            S.auto(k, max_seconds=0)
    sc = isl.ScheduleConstraints.on_domain(k.domain).set_validity(k.deps.validity)
    assert str(bounded_compute(sc, 30.0)) == str(sc.compute_schedule())


def test_softmax_rows_are_not_forked_for():
    # 1024 rows of 1024: 3M instances in the row loop, below MIN_PARALLEL_WORK
    k = ops.softmax((1024, 1024))
    a = S.auto(k, cache=HOST)
    assert "parallel" not in [s.name for s in a.history]
    assert "parallel" in [s.name for s in S.auto(k, min_parallel_work=1e6).history]
    big = S.auto(ops.softmax((8192, 4096)), cache=HOST)  # 100M instances per fork
    assert "parallel" in [s.name for s in big.history]


def _innermost_loops(kernel) -> dict[str, str]:
    """For each statement, the variable of the innermost loop around its call."""
    out, loops = {}, []
    for line in str(kernel.loop_nest()).splitlines():
        depth = len(line) - len(line.lstrip())
        text = line.strip()
        loops = [(d, v) for d, v in loops if d < depth]
        if text.startswith("for "):
            loops.append((depth, text.split()[1]))
        elif "  # S" in text and loops:
            out[text.rsplit("# ", 1)[1]] = loops[-1][1]
    return out


def test_auto_moves_the_contiguous_loop_of_a_convolution_innermost():
    # isl puts the 3x3 filter loops rh, rw in bands nested below (o, h, w, rc), so
    # w, along which out and input are contiguous, is not innermost
    k = ops.conv2d(
        (1, 16, 24, 24), (16, 16, 3, 3), bias=False, padding=1, dtype="int32"
    )
    plain = S.auto(k, tile=False, parallel=False)
    assert _innermost_loops(plain)["S1"] == "rw"
    # 32 KiB per tile: one o-row of the input (16 x 26 x 26 ints) does not fit
    a = S.auto(k, cache=Cache(l1=8192, l2=65536, l3=1 << 20), min_parallel_work=0)
    assert _innermost_loops(a)["S1"] == "w"
    steps = [s.name for s in a.history]
    assert steps[1:3] == ["merge_bands", "merge_bands"]
    assert a.history[3].name == "permute" and a.history[3].args[1][-1] == "w"
    # filter loops stay whole: only output channel, spatial and input channel loops
    # are tiled, w (innermost, 24 long) is kept whole
    tiled = next(s for s in a.history if s.name == "tile").args[1]
    assert set(tiled) <= {"o", "h", "rc"} and "o" in tiled
    assert S.replay(a.original, a.history).schedule.plain_is_equal(a.schedule)
    assert_same(k, a)


def test_conv_tile_keeps_the_filter_loops_and_the_short_row_whole():
    k = ops.conv2d((1, 64, 56, 56), (64, 64, 3, 3), bias=False, padding=1)
    a = S.auto(k, cache=HOST)
    assert _innermost_loops(a)["S1"] == "w"
    tiled = next(s for s in a.history if s.name == "tile").args[1]
    assert tiled == {"o": 16, "h": 16, "rc": 16}
    assert a.history[-1].name == "parallel"


def test_matmul_keeps_its_single_band():
    # one band already has the contiguous j innermost: nothing merged
    a = S.auto(ex.matmul(None, "int32"), cache=TINY, params={"N": 512})
    assert "merge_bands" not in [s.name for s in a.history]


def test_a_dependence_free_innermost_loop_is_not_traded_for_a_recurrence():
    # isl's outer-coincidence schedule for Seidel-2D ends in a dependence-free loop
    # (it vectorises); the contiguous j-like loop carries j-1 -> j and would not
    a = S.auto(ex.seidel2d(None, None), cache=HOST, params={"N": 1000, "T": 100})
    assert "merge_bands" not in [s.name for s in a.history]
    assert "permute" not in [s.name for s in a.history]


class _Constraints:
    """Stands in for isl.ScheduleConstraints: ``compute_schedule`` spins until it
    has used ``cpu`` seconds of CPU time, or sleeps ``wall`` seconds (waiting like
    a descheduled or stuck process), then leaves a note in ``done`` (when given)
    and answers."""

    def __init__(self, cpu: float = 0.0, wall: float = 0.0, done=None):
        self.cpu, self.wall, self.done = cpu, wall, done

    def compute_schedule(self):
        import time

        while time.process_time() < self.cpu:  # the child's own CPU time
            pass
        time.sleep(self.wall)
        if self.done is not None:
            self.done.write_text("finished")
        return ex.matmul(4).schedule


def test_isl_deadline_counts_cpu_time_not_wall_time():
    from schedules.host.bounded import bounded_compute

    # 1.5 s of waiting but no CPU, under a 1 s bound: a loaded machine must not
    # turn a fast schedule into a BudgetError
    got = bounded_compute(_Constraints(wall=1.5), 1.0)
    assert str(got) == str(ex.matmul(4).schedule)


def test_isl_child_is_stopped_at_its_cpu_bound(tmp_path):
    from schedules.host.bounded import TIMEOUT, bounded_compute

    # it would need 5 s of CPU to finish: stopped (SIGXCPU) at 1 s, it never does
    done = tmp_path / "done"
    with pytest.raises(isl.Error, match=TIMEOUT):
        bounded_compute(_Constraints(cpu=5.0, done=done), 1.0)
    assert not done.exists()


def test_isl_answer_past_a_fractional_bound_is_refused():
    from schedules.host.bounded import TIMEOUT, bounded_compute

    # RLIMIT_CPU counts whole seconds, so the kernel lets this child finish at
    # 0.3 s; its answer still cost more than the 0.1 s asked for
    with pytest.raises(isl.Error, match=TIMEOUT):
        bounded_compute(_Constraints(cpu=0.3), 0.1)
    assert str(bounded_compute(_Constraints(cpu=0.3), 2.0)) == str(
        ex.matmul(4).schedule
    )


def test_isl_child_that_uses_no_cpu_is_stopped_as_stuck(monkeypatch, tmp_path):
    from schedules.host import bounded

    # a child that sleeps uses no CPU, so RLIMIT_CPU never stops it; once it has
    # used none for STALL_SECONDS it is taken to be stuck and killed
    monkeypatch.setattr(bounded, "STALL_SECONDS", 0.5)
    done = tmp_path / "done"
    with pytest.raises(isl.Error, match=bounded.TIMEOUT):
        bounded.bounded_compute(_Constraints(wall=60.0, done=done), 1.0)
    assert not done.exists()


class _Interrupted(Exception):
    pass


def test_isl_child_is_killed_when_the_caller_is_interrupted(tmp_path):
    import signal

    from schedules.host.bounded import bounded_compute

    # an alarm (a fuzz case's time limit, or Ctrl-C) ends the wait at once: the
    # child, 5 s of CPU from finishing under a 30 s bound, is killed, not waited for
    def interrupt(signum, frame):
        raise _Interrupted

    done = tmp_path / "done"
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(_Interrupted):
            bounded_compute(_Constraints(cpu=5.0, done=done), 30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not done.exists()
