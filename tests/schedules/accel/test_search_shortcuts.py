"""The search's shortcuts change nothing it returns: structures whose candidates
cannot reach its best are neither modelled nor checked for a realisable MAC
mapping (:mod:`schedules.accel.ranking`), and an evaluation with other stream
slots reuses the copies and work of the last one."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from accelerator import load_config
from polyc import ops
from schedules.accel import estimate, ranking, search, space
from schedules.accel import model as model_module
from schedules.accel.layers import per_statement, split


def _layers(kernel):
    kernel, _ = per_statement(kernel)
    return kernel, [la for la in split(kernel) if not la.opaque]


def _conv():
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU())
    return polyc.from_torch(conv.eval(), (torch.randn(1, 8, 12, 12),), name="conv")


def _softmax():
    from polyc.ops import kernels

    return kernels.softmax((64, 128), dim=-1)


def _layer_norm():
    from polyc.ops import kernels

    return kernels.layer_norm((32, 256), 256)


CASES = [
    (lambda: ops.matmul(64, 48, 80), "edge-npu"),
    (lambda: ops.matmul(64, 48, 80), "datacenter"),
    (_conv, "edge-npu"),
    (_conv, "hw-a"),
    # vector work only: the floor is the vector unit's
    (_softmax, "edge-npu"),
    (_layer_norm, "datacenter"),
]


@pytest.mark.parametrize("build, config", CASES)
def test_skipping_structures_keeps_the_search_result(build, config, monkeypatch):
    spec = load_config(config)
    kernel, layers = _layers(build())
    quick = [search.search(kernel, la, spec) for la in layers]
    calls = []

    def never(*args):
        # no structure is skipped: every one is modelled and checked
        calls.append(args)
        return False

    monkeypatch.setattr(ranking, "beyond", never)
    fresh, _ = _layers(build())  # no model cached from the quick search
    full = [search.search(fresh, la, spec) for la in split(fresh) if not la.opaque]
    assert calls  # the exhaustive version ran
    assert [[repr(c) for c in cands] for cands in quick] == [
        [repr(c) for c in cands] for cands in full
    ]
    assert any(quick)


def test_the_second_slots_reuse_the_first_evaluation_exactly():
    spec = load_config("edge-npu")
    kernel, layers = _layers(ops.matmul(64, 48, 80))
    layer = layers[0]
    level = space.engine_level(spec)
    st = next(space.structures(kernel, layer, spec, private=False))
    grid_values = np.array([8.0, 16.0, 32.0, 64.0])

    def grid(model):
        return {s: grid_values for s in model.syms}

    shared = search.layer_model(kernel, layer, spec, st, level)
    first = shared.evaluate(grid(shared), stream_slots=3)
    second = shared.evaluate(grid(shared), stream_slots=2)
    estimate._LAST_MOVES.clear()
    alone = model_module.LayerModel(kernel, layer, spec, st, level)
    again = alone.evaluate(grid(alone), stream_slots=2)
    for a, b in ((second, again),):
        assert a.cycles.tolist() == b.cycles.tolist()
        assert a.sram_bytes.tolist() == b.sram_bytes.tolist()
        assert a.dram_bytes.tolist() == b.dram_bytes.tolist()
        assert {k: v.tolist() for k, v in a.edges.items()} == {
            k: v.tolist() for k, v in b.edges.items()
        }
    # the slots do change what the buffers take
    assert (first.sram_bytes >= second.sram_bytes).all()


@pytest.mark.parametrize("build, config", CASES)
def test_the_floor_bounds_every_structure_by_its_busiest_engine(build, config):
    """The bound the search skips structures by is at most the fewest cycles
    of every structure (each point modelled, fitting or not), and a layer
    with vector work alone has one (the MAC array's time alone gave it 0, so
    every structure of a softmax was modelled)."""
    spec = load_config(config)
    kernel, layers = _layers(build())
    level = space.engine_level(spec)
    vector_only = 0
    for layer in layers:
        for private in (False, True):
            for st in space.structures(kernel, layer, spec, private):
                model = search.layer_model(kernel, layer, spec, st, level)
                _, grid = search._points(kernel, layer, st, model)
                floor = model.floor(grid)
                cycles = model.evaluate(grid, stream_slots=st.stream_slots).cycles
                assert 0 <= floor <= cycles.min()
                engines = {e for _, e in st.engine}
                if engines == {"vector"}:
                    vector_only += 1
                    assert floor > 0
    if build in (_softmax, _layer_norm):
        assert vector_only
