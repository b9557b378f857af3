"""The scheduler's layers searched at once in forked workers
(schedules/accel/cache.py search_layers): the same candidates, the same schedule and
the same C as one search after the other, and the cache counts the same."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

import polyc
from accelerator.hardware.config import load_config
from codegen.accel import placed
from schedules.accel import attention, cache, search
from schedules.accel.layers import per_statement, split
from schedules.accel.scheduler import schedule
from tests.support.depthwise import depthwise_pair
from tests.support.small_kernels import overwritten


def _mlp():
    """Four linear layers: three distinct searches (the middle two are one)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers).eval()
    return polyc.from_torch(model, (torch.randn(8, 32),))


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "1")
    monkeypatch.setattr(cache, "_MEMORY", {})
    cache.STATS.clear()
    return tmp_path


def _scheduled(monkeypatch, jobs: str):
    monkeypatch.setenv("POLYC_JOBS", jobs)
    monkeypatch.setattr(cache, "_MEMORY", {})
    cache.STATS.clear()
    choice = schedule(_mlp(), load_config("edge-npu"))
    source, mode = placed.generate(choice.kernel)
    cands = [lc.candidate for lc in choice.layers]
    return cands, source.text, mode, dict(cache.STATS)


@pytest.mark.parametrize("cached", ["1", "0"])
def test_layers_searched_in_workers_schedule_as_one_after_the_other(
    tmp_path, monkeypatch, cached
):
    monkeypatch.setenv("POLYC_SEARCH_CACHE", cached)
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "serial"))
    serial = _scheduled(monkeypatch, "1")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "parallel"))
    parallel = _scheduled(monkeypatch, "2")
    assert parallel == serial
    if cached == "1":  # the counts are equal too (in the tuples): the layers and
        assert serial[3]["searched"] >= 3  # the fusion groups' pieces, searched


def test_search_layers_gives_each_layer_its_own_search(fresh, monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "2")
    spec = load_config("edge-npu")
    kernel, _ = per_statement(_mlp())
    layers = [layer for layer in split(kernel) if not layer.opaque]
    got = cache.search_layers(kernel, layers, spec)
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    assert got == [search.search(kernel, layer, spec) for layer in layers]


@pytest.mark.parametrize("cached", ["1", "0"])
def test_depthwise_splits_chosen_in_workers_are_the_ones_chosen_in_turn(
    tmp_path, monkeypatch, cached
):
    """schedules.accel.share chooses each layer's split on the layer as a
    program of its own, in workers where it can (share._chosen_ahead): the
    same splits, schedule and C as choosing them one after the other."""
    from schedules.accel import share

    monkeypatch.setenv("POLYC_SEARCH_CACHE", cached)
    spec = load_config("edge-npu")
    ahead = []
    chosen_ahead = share._chosen_ahead

    @contextlib.contextmanager
    def recorded(*args):
        with chosen_ahead(*args) as got:
            ahead.append(len(got))
            yield got

    monkeypatch.setattr(share, "_chosen_ahead", recorded)
    out = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("POLYC_JOBS", jobs)
        monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / jobs))
        monkeypatch.setattr(cache, "_MEMORY", {})
        choice = schedule(depthwise_pair()[0], spec)
        source, _ = placed.generate(choice.kernel)
        cands = [lc.candidate for lc in choice.layers]
        out[jobs] = (choice.shared, cands, source.text)
    assert ahead == [0, 2]  # both layers chosen in the workers
    assert out["2"] == out["1"]
    assert out["1"][0]  # a layer was split


def test_workers_never_collect_the_heap_they_inherit(monkeypatch):
    """The caller's objects are frozen when the workers fork (their collector
    would walk, and so copy, the whole inherited heap), and thawed in the
    caller once they are: nothing stays frozen, and each task's result comes
    back."""
    import gc

    monkeypatch.setenv("POLYC_JOBS", "2")
    kept = [object() for _ in range(1000)]  # the caller's heap, in part
    done = cache.in_workers(lambda n: (n, gc.get_freeze_count()), 3)
    assert sorted(done) == [0, 1, 2]
    assert all(done[n][0] == n for n in done)
    assert all(done[n][1] >= len(kept) for n in done)  # frozen in each worker
    assert gc.get_freeze_count() == 0  # and not in the caller


def test_a_heap_frozen_by_the_caller_stays_frozen_after_the_workers(monkeypatch):
    """Within :func:`cache.frozen_heap` (a compile's), the workers' fork thaws
    nothing: the caller's objects stay frozen until the compile ends, and are
    thawed then (tenth round: before, the first workers thawed a compile's
    frozen heap, and a user's own ``gc.freeze`` with it)."""
    import gc

    monkeypatch.setenv("POLYC_JOBS", "2")
    assert gc.get_freeze_count() == 0
    with cache.frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        done = cache.in_workers(lambda n: n, 2)
        assert sorted(done) == [0, 1]
        # thawed, the count would be 0; a frozen object freed meanwhile (by a
        # thread an earlier test left finishing) leaves it, so it may fall a
        # little (871,062 against 871,064 in one run of the suite)
        assert gc.get_freeze_count() >= frozen // 2
        with cache.frozen_heap():  # already frozen: left as it is on exit
            pass
        assert gc.get_freeze_count() >= frozen // 2
    assert gc.get_freeze_count() == 0


def test_a_compile_never_collects_its_callers_heap(monkeypatch):
    """``polyc.compile`` runs with the objects alive before it frozen (the
    collector walked torch's and the model's on every full collection of
    hf-mobilenetv2's compile), and thaws them when it returns."""
    import gc

    from polyc import stages

    seen = []
    compile_ = stages._compile
    monkeypatch.setattr(
        stages,
        "_compile",
        lambda *a, **k: seen.append(gc.get_freeze_count()) or compile_(*a, **k),
    )
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    polyc.compile(overwritten(0), config="edge-npu")
    assert seen and seen[0] > 0
    assert gc.get_freeze_count() == 0


def test_the_fusion_checks_of_the_workers_depthwise_splits_come_back(
    tmp_path, monkeypatch
):
    """The workers that choose the depthwise splits (share._chosen_ahead) hand
    back the fusion checks of the split layers' parts, which the parent asks
    next when it splits the network so: the answers it would have found
    itself."""
    from schedules.accel import layers, share

    spec = load_config("edge-npu")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(layers, "_FUSES", {})
    monkeypatch.setattr(layers, "_OWN", {})
    seen = []
    learned = {}
    chosen_ahead = share._chosen_ahead

    @contextlib.contextmanager
    def recorded(kernel, pieces, spec, stage):
        seen.append((kernel, pieces, stage))
        with chosen_ahead(kernel, pieces, spec, stage) as got:
            yield got

    def learn(answers):  # what comes back from the workers
        learned.update(answers)
        layers.learn(answers)

    monkeypatch.setattr(share, "_chosen_ahead", recorded)
    monkeypatch.setattr(share, "learn", learn)
    monkeypatch.setenv("POLYC_JOBS", "2")
    schedule(depthwise_pair()[0], spec)
    ((kernel, pieces, stage),) = seen
    assert learned
    # the same checks, made in this process
    monkeypatch.setattr(layers, "_FUSES", {})
    monkeypatch.setattr(layers, "_OWN", {})
    for piece in pieces:
        found = share._candidate(kernel, piece, spec)
        if found is not None:
            choose, *args = found
            choose(kernel, piece, spec, stage, *args)
    assert learned.items() <= layers.fusion_answers().items()


def test_the_caller_uses_a_workers_result_while_the_others_still_work(
    tmp_path, monkeypatch
):
    """``cache.workers`` hands each result back as its worker finishes: here
    the second task waits for what the caller does with the first (the
    parent applies the depthwise splits chosen so far while the workers still
    choose the others: share._chosen_ahead)."""
    import time

    monkeypatch.setenv("POLYC_JOBS", "2")
    mark = tmp_path / "first-used"

    def task(n: int):
        if n == 0:
            return "first"
        give_up = time.monotonic() + 30
        while not mark.exists():  # the caller's use of the first result
            if time.monotonic() > give_up:
                raise TimeoutError("the first result was not handed back")
            time.sleep(0.01)
        return "second"

    with cache.workers(task, 2) as running:
        assert running.get(0) == ("first",)
        mark.write_text("used")
        assert running.get(1) == ("second",)


def test_a_planners_variants_are_searched_in_one_set_of_workers(fresh, monkeypatch):
    """attention.plan compares variants of the program, each its own layers:
    their searches run in one set of workers (the last searches of one variant
    beside the first of the next), where each variant had its own; the same
    plan as one search after the other."""
    from tests.schedules.accel.test_attention import _mha

    spec = load_config("edge-npu")
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    kernel, _ = per_statement(_mha()[0])
    pools = []
    real = cache.in_workers
    monkeypatch.setattr(
        cache, "in_workers", lambda task, n, *a: pools.append(n) or real(task, n, *a)
    )
    plans = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("POLYC_JOBS", jobs)
        got = attention.plan(kernel, spec)
        plans[jobs] = (str(got.kernel.schedule), got.cuts, got.wide, got.note)
    assert len(pools) == 1 and pools[0] > 2  # every variant's layers at once
    assert plans["2"] == plans["1"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_search_into_runs_meanwhile_once_with_workers_or_without(
    fresh, monkeypatch, jobs
):
    """``meanwhile`` (mlp.depthwise_kept weighs the depthwise splits there) is
    called once: while the workers search, or after the searches in turn;
    the memo is the same."""
    monkeypatch.setenv("POLYC_JOBS", jobs)
    spec = load_config("edge-npu")
    kernel, _ = per_statement(_mlp())
    layers = [layer for layer in split(kernel) if not layer.opaque]
    calls = []
    memo: dict = {}
    cache.search_into(memo, [(kernel, layers)], spec, meanwhile=lambda: calls.append(1))
    assert calls == [1]
    assert set(memo) == {cache.memo_key(layer) for layer in layers}
    again: dict = dict(memo)  # nothing left to search: still called, once
    cache.search_into(
        again, [(kernel, layers)], spec, meanwhile=lambda: calls.append(2)
    )
    assert calls == [1, 2] and again == memo
