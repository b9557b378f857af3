"""Layer models and dependences shared across hardware points and rebuilt programs
(schedules/accel/models.py, polyc/ir/deps.py): a point of a grid that differs
from an earlier one only in SRAM capacity or DRAM bandwidth reuses each layer's
cost model, and a program the scheduler rebuilds equal reuses its dependences,
and either way every number is the one a model or analysis of its own gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import accelerator
import polyc
from accelerator.hardware.spec import model_view, schedule_view
from polyc.ir import deps as deps_module
from schedules.accel import models, search, space
from schedules.accel.bias import defer_all
from schedules.accel.layers import per_statement, split
from schedules.accel.model import LayerModel


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """No search or compile reused from disk or memory; no model kept."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    models.clear()
    models.STATS.clear()
    yield
    models.clear()


def _grid(**axes):
    return accelerator.vary("edge-npu", axes)


def test_model_view_drops_sram_capacity_and_dram_bandwidth_only():
    small, big = _grid(**{"memory.sram.capacity_bytes": [131072, 1 << 20]})
    slow, fast = _grid(**{"memory.dram.bytes_per_cycle": [8, 64]})
    assert schedule_view(small) != schedule_view(big)
    assert model_view(small) == model_view(big) == model_view(slow)
    assert model_view(slow) == model_view(fast)
    for axes in (
        {"mac_array.rows": [8, 16]},
        {"mac_array.dataflow": ["weight_stationary", "output_stationary"]},
        {"memory.sram.bytes_per_cycle": [128, 256]},
        {"memory.dram.latency_cycles": [50, 100]},
    ):
        one, two = _grid(**axes)
        assert model_view(one) != model_view(two), axes


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(8, 16, 3, padding=1)
        self.b = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 32)

    def forward(self, x):
        x = torch.relu(self.b(torch.relu(self.a(x))))
        return self.fc(x.flatten(1))


def _net():
    torch.manual_seed(0)
    return polyc.from_torch(_Net().eval(), (torch.randn(1, 8, 8, 8),))


def _estimates_equal(one, two) -> None:
    for field in ("cycles", "dram_bytes", "sram_bytes", "transfers"):
        np.testing.assert_array_equal(getattr(one, field), getattr(two, field))
    assert one.engines.keys() == two.engines.keys()
    for e in one.engines:
        np.testing.assert_array_equal(one.engines[e], two.engines[e])
    assert one.level_bytes.keys() == two.level_bytes.keys()
    for i in one.level_bytes:
        np.testing.assert_array_equal(one.level_bytes[i], two.level_bytes[i])


def test_a_model_on_another_point_evaluates_as_that_points_own_model(fresh):
    base, other = _grid(
        **{"memory.sram.capacity_bytes": [131072, 1 << 20]},
        **{"memory.dram.bytes_per_cycle": 8},
    )
    [other] = accelerator.vary(other, {"memory.dram.bytes_per_cycle": [64]})
    kernel, _ = per_statement(defer_all(_net(), base))
    layers = [la for la in split(kernel) if not la.opaque]
    level = space.engine_level(base)
    checked = 0
    for layer in layers:
        for st in list(space.structures(kernel, layer, base, False, False))[:6]:
            shared = LayerModel(kernel, layer, base, st, level)
            _, grid = search._points(kernel, layer, st, shared)
            shared.evaluate(grid)  # built for the first point
            moved = shared.on(other)
            own = LayerModel(kernel, layer, other, st, level)
            assert moved._built is shared._built  # the expressions are shared
            _estimates_equal(moved.evaluate(grid), own.evaluate(grid))
            # and the first point's own evaluation is unchanged
            _estimates_equal(
                shared.evaluate(grid),
                LayerModel(kernel, layer, base, st, level).evaluate(grid),
            )
            checked += 1
    assert checked >= 6


def _compile_all(specs):
    kernel = _net()
    out = []
    for spec in specs:
        compiled = polyc.compile(kernel, config=spec, objective="edp")
        _, report = compiled.run({}, functional=False)
        out.append((compiled.c_source, report.to_dict()))
    return out


def test_a_grid_compiled_with_shared_models_equals_one_compiled_without(
    fresh, monkeypatch
):
    """The fast path (models shared across the grid's points, dependences
    shared across the programs each point's scheduler rebuilds) gives every
    point the C and the report the slow path gives it."""
    specs = _grid(
        **{"memory.sram.capacity_bytes": [32768, 262144]},
        **{"memory.dram.bytes_per_cycle": [8, 64]},
    )
    fast = _compile_all(specs)
    assert models.STATS["shared"] > 0, "the points shared models"
    monkeypatch.setenv("POLYC_SHARED_ANALYSES", "0")
    models.clear()
    slow = _compile_all(specs)
    assert len({c for c, _ in slow}) > 1, "the points schedule differently"
    for (c_fast, r_fast), (c_slow, r_slow), spec in zip(fast, slow, specs):
        assert c_fast == c_slow, spec.name
        assert r_fast == r_slow, spec.name


def test_equal_programs_share_their_dependences_and_others_do_not():
    one, two = _net(), _net()
    assert one is not two
    assert deps_module.program_text(one) == deps_module.program_text(two)
    assert one.deps is two.deps
    own = deps_module.Deps(two)
    for kind in ("flow", "anti", "output", "live_in", "live_out"):
        assert getattr(one.deps, kind).is_equal(getattr(own, kind)), kind
    torch.manual_seed(0)
    smaller = polyc.from_torch(_Net().eval(), (torch.randn(1, 8, 8, 8),))
    # the same layers on a wider image: another program
    wider = nn.Conv2d(8, 16, 3, padding=1).eval()
    other = polyc.from_torch(wider, (torch.randn(1, 8, 10, 10),))
    assert smaller.deps is one.deps
    assert deps_module.program_text(other) != deps_module.program_text(one)
    assert other.deps is not one.deps
