"""The accelerator cost model's parts: tile variables, per-array buffers, the DMA
rule that cuts a copy into calls, stream slots, and the cached model per layer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

import polyc
from accelerator.hardware.config import load_config
from polyc import ops
from schedules.accel import search, space
from schedules.accel.model import LayerModel
from schedules.accel.routes import Route
from schedules.accel.tilevars import PrivateTile, SharedTile, loop_extent, tile_var


@pytest.fixture(scope="module")
def gemm():
    """The fused init + contraction of a 64x48x80 GEMM as tiny tiles it:
    ``(kernel, layer, spec, structure)``."""
    compiled = polyc.compile(ops.matmul(64, 48, 80), config="tiny", checks=False)
    lc = compiled.choice.layers[0]
    kernel, spec = lc.context
    return kernel, lc.layer, spec, lc.candidate.structure


def test_tile_variables_name_their_loops(gemm):
    _, layer, _, st = gemm
    init, mac = layer.stmts
    i, j, k = SharedTile(0), SharedTile(1), PrivateTile("S1", "k")
    assert st.free == (i, j, k)
    assert [tile_var(layer, mac, it) for it in mac.iterators] == [i, j, k]
    assert [tile_var(layer, init, it) for it in init.iterators] == [i, j]
    assert j.loop(layer) == (init, "j") and k.loop(layer) == (mac, "k")
    assert [loop_extent(layer, v) for v in (i, j, k)] == [64, 48, 80]
    assert [v.label(layer) for v in (i, j, k)] == ["i", "j", "k(S1)"]
    assert k.symbol(layer) == sp.Symbol("T_S1_k", positive=True, integer=True)
    assert sorted([k, j, i], key=lambda v: space._position(layer, v)) == [i, j, k]


def test_each_array_has_one_buffer_record(gemm):
    kernel, layer, spec, st = gemm
    model = LayerModel(kernel, layer, spec, st, space.engine_level(spec))
    assert set(model.buffers) == {"A", "B", "out"}
    a, out = model.buffers["A"], model.buffers["out"]
    # out is zeroed by the layer's init: stored, never loaded
    assert out.written and out.copy_out and not out.copy_in and out.directions == 1
    assert a.read and a.copy_in and not a.copy_out and a.streamed
    assert a.shape == (64, 80) and a.whole == (64, 80)
    assert a.whole_bytes == 64 * 80 * 4
    # A moves along i and k: its box is one tile of each
    t_i, t_k = (sp.Symbol(n, positive=True, integer=True) for n in ("T_i", "T_S1_k"))
    assert a.extents == (t_i, t_k)


def test_a_copy_is_cut_into_as_many_calls_as_channels_reach_its_bandwidth():
    """Cut where the time saved alone (``n / 8`` on one channel, ``n / 12`` on
    two) pays for the second call's set-up (10) and each call moves 4 KiB at
    least (placement.MIN_CALL_BYTES): from 8 KiB on."""
    route = Route(latency=100, rate=8.0, want=12.0, split=2)
    nbytes = np.array([200.0, 40000.0])
    t = route.copy(nbytes, desc=np.array([1.0, 2.0]), setup=10)
    assert t.calls.tolist() == [1, 2]
    # a channel's time: setup per descriptor + each call's bytes at its rate
    # (the latency runs while the channel issues the next call)
    assert t.per_call.tolist() == [10 + 200 / 8, 20 + 40000 / 2 / 8]
    # alone, the calls run in parallel up to the bandwidth the copy wants
    assert t.alone.tolist() == [10 + 100 + 200 / 8, 20 + 100 + 40000 / 12]
    assert route.copy(np.array([8192.0]), desc=np.array([1.0]), setup=10).calls == 2
    assert route.copy(np.array([8000.0]), desc=np.array([1.0]), setup=10).calls == 1
    phased = route.copy(nbytes, desc=np.array([1.0, 1.0]), setup=10, phases=2)
    assert phased.calls.tolist() == [2, 4]


def test_placement_cuts_a_copy_where_the_cost_model_does():
    """Placement's DMA calls per copy (:func:`placement.chunks`) and the cost
    model's (``Route.copy``) agree, on datacenter (eight 64 B/cycle channels
    under 151.7 B/cycle of DRAM: three calls reach it): a 16 KiB tile is cut
    (a single call took 256 cycles of data where three take 108, for 64 of
    set-up more; before, only copies of 48 KiB or more were cut), a 2 KiB one
    is not."""
    from polyc.ir import marks as pm
    from schedules.accel.placement import chunks

    spec = load_config("datacenter")
    level = space.engine_level(spec)
    route = Route.between(spec, spec.dram, spec.memory[level])
    for rows, want in ((64, 3), (8, 1)):
        mark = pm.BufferMark(
            "w_local_0",
            "w",
            "local",
            level,
            4,
            1,
            (rows, 64),
            (64, 1),
            rows * 64,
            True,
            False,
            False,
            "",
            "",
        )
        assert chunks(spec, 0, level, mark) == want
        nbytes = np.array([rows * 64 * 4.0])
        t = route.copy(nbytes, desc=np.array([1.0]), setup=spec.dma.setup_cycles)
        assert t.calls.tolist() == [want]


def test_a_route_takes_the_slower_end_and_enough_channels(gemm):
    _, _, spec, _ = gemm
    level = spec.memory[space.engine_level(spec)]
    route = Route.between(spec, spec.dram, level)
    assert route.latency == max(spec.dram.latency_cycles, level.latency_cycles)
    assert route.rate == min(spec.dma.bytes_per_cycle, level.bytes_per_cycle)
    want = min(spec.dram.bytes_per_cycle, level.bytes_per_cycle)
    assert route.want == want
    assert route.split == min(
        spec.dma.channels, max(1, -(-int(want) // int(route.rate)))
    )
    assert Route.between(spec, spec.dram, None) == Route(0, 1.0, 1.0, 1)


def test_stream_slots_change_the_buffers_and_how_far_loads_run_ahead(gemm):
    """A third slot costs SRAM; in time it only lets the loads run one more tile
    ahead (the simulator's DRAM sharing and slot hazards: a load slower than a
    tile's compute paces the tiles by (compute + load) / slots, and the fill
    shares DRAM with the tiles ahead). The 16-tile candidate, paced by its loads,
    gets faster; the 32-tile one, whose compute hides its loads, does not move."""
    kernel, layer, spec, st = gemm
    model = LayerModel(kernel, layer, spec, st, space.engine_level(spec))
    grid = {s: np.array([16.0, 32.0]) for s in model.syms}
    three = model.evaluate(grid, stream_slots=3)
    two = model.evaluate(grid, stream_slots=2)
    assert three.cycles[0] < two.cycles[0]
    assert three.cycles[1] == two.cycles[1]
    assert (three.sram_bytes > two.sram_bytes).all()
    assert model.evaluate(grid).sram_bytes.tolist() == three.sram_bytes.tolist()


def test_a_cached_layer_model_is_not_changed_by_its_next_user(gemm):
    """Structures that differ in slots only share one cached model; the search
    used to set the cached model's structure to each user's in turn, so a model
    already handed out changed under its holder."""
    kernel, layer, spec, st = gemm
    level = space.engine_level(spec)
    first = search.layer_model(kernel, layer, spec, st, level)
    held = first.st
    second = search.layer_model(kernel, layer, spec, replace(st, stream_slots=2), level)
    assert second is first
    assert first.st == held
