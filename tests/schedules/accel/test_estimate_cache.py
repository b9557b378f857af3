"""The layer models' estimates kept across hardware points within a byte budget
(schedules/accel/estimate_cache.py): past it the other evaluation views' go first,
then a view's new estimates are not kept, and a point that asks again for one
not kept gets the same values; a grid compiled under a
budget that keeps almost nothing gives every point the C and the report it
gets with every estimate kept."""

from __future__ import annotations

import numpy as np
import pytest

import accelerator
from schedules.accel import estimate_cache, models
from schedules.accel.estimate import Estimate
from tests.schedules.accel.test_shared_models import _compile_all


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """No search or compile reused from disk or memory; no model or estimate
    kept."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    models.clear()
    estimate_cache.clear()
    estimate_cache.STATS.clear()
    yield
    models.clear()
    estimate_cache.clear()


def _estimate(n: int, value: float) -> Estimate:
    return Estimate(np.full(n, value), np.zeros(n), np.zeros(n), {"mac": np.ones(n)})


def test_past_the_budget_other_views_go_and_then_new_estimates_stay_unkept(
    fresh, monkeypatch
):
    # an estimate of 100 points holds 4 arrays of 800 bytes
    monkeypatch.setattr(estimate_cache, "BUDGET", 2 * 3200)
    memo: dict = {}
    built = []

    def ask(key, view, value):
        def make():
            built.append(key)
            return _estimate(100, value)

        return estimate_cache.kept(memo, (key,), view, make)

    one = ask("a", 0, 1.0)
    assert not one.cycles.flags.writeable  # shared: read-only
    ask("b", 0, 2.0)
    assert estimate_cache.used() == 2 * 3200
    # the budget is full of view 0's: a third is not kept, and the first two
    # stay (dropping the oldest would push out the next one a scan asks for)
    ask("c", 0, 3.0)
    assert set(memo) == {("a",), ("b",)}
    assert ask("a", 0, 9.0) is one  # not built again
    assert built == ["a", "b", "c"]
    # another view makes room: all of view 0 goes at once
    ask("d", 1, 4.0)
    assert set(memo) == {("d",)}
    assert estimate_cache.used() == 3200
    again = ask("a", 0, 1.0)  # built again, the same values
    np.testing.assert_array_equal(again.cycles, np.full(100, 1.0))
    assert built == ["a", "b", "c", "d", "a"]
    assert set(memo) == {("a",), ("d",)}  # room for both
    assert estimate_cache.STATS["dropped"] == 2
    assert estimate_cache.STATS["unkept"] == 1


def test_a_grid_under_a_tiny_budget_compiles_as_with_every_estimate_kept(
    fresh, monkeypatch
):
    specs = accelerator.vary(
        "edge-npu",
        {
            "memory.sram.capacity_bytes": [32768, 262144],
            "memory.dram.bytes_per_cycle": [8, 64],
        },
    )
    kept = _compile_all(specs)
    assert estimate_cache.STATS["reused"] > 0, "SRAM sizes reuse estimates"
    assert estimate_cache.STATS["dropped"] == 0
    models.clear()
    estimate_cache.clear()
    monkeypatch.setattr(estimate_cache, "BUDGET", 1)
    tight = _compile_all(specs)
    assert estimate_cache.STATS["unkept"] > 0
    assert estimate_cache.used() == 0  # none kept
    for (c_kept, r_kept), (c_tight, r_tight), spec in zip(kept, tight, specs):
        assert c_kept == c_tight, spec.name
        assert r_kept == r_tight, spec.name


def test_a_grid_digest_tells_grids_apart():
    a = [np.arange(4.0), np.ones(4)]
    b = [np.arange(4.0), np.full(4, 2.0)]
    assert estimate_cache.grid_digest(a) == estimate_cache.grid_digest(
        [x.copy() for x in a]
    )
    assert estimate_cache.grid_digest(a) != estimate_cache.grid_digest(b)
    # the same values split differently between the symbols
    assert estimate_cache.grid_digest([np.arange(2.0)]) != estimate_cache.grid_digest(
        [np.arange(1.0), np.arange(1.0, 2.0)]
    )
