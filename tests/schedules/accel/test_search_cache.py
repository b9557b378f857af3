"""The accelerator search's cache (schedules/accel/cache.py): a layer that differs
from another only in names gets the other's candidates under its own names, the
same as its own search would give; results survive the process on disk, and a
stale, corrupt or foreign file costs a search, never a wrong schedule."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import polyc
from accelerator.hardware.config import load_config
from schedules.accel import cache, homes, search
from schedules.accel.bias import defer_all
from schedules.accel.layers import per_statement, split


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty search cache on disk and in memory, and zeroed counters; whole
    compiles are not reused (polyc/reuse.py), so every compile schedules."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "1")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setattr(cache, "_MEMORY", {})
    cache.STATS.clear()
    return tmp_path / "search"


class _Block(nn.Module):
    """A linear layer, a ReLU and a transpose: the transpose reads across the rows,
    so the blocks do not fuse into one layer."""

    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.linear(x)).t()


def _mlp():
    """Four blocks of one width: the middle layers are the same layer but for their
    names (a temporary in, a temporary out that the next layer reads)."""
    torch.manual_seed(0)
    width = 32
    model = nn.Sequential(*[_Block(width) for _ in range(4)]).eval()
    return polyc.from_torch(model, (torch.randn(width, width),))


def _layers(kernel):
    kernel, _ = per_statement(defer_all(kernel))
    return kernel, [layer for layer in split(kernel) if not layer.opaque]


def test_layers_that_differ_in_names_search_to_the_same_candidates_renamed():
    spec = load_config("edge-npu")
    kernel, layers = _layers(_mlp())
    one, two = layers[1], layers[2]
    assert one.name != two.name
    sig_one = cache.signature(kernel, one, spec)
    sig_two = cache.signature(kernel, two, spec)
    assert sig_one.digest == sig_two.digest
    assert sig_one.matches(sig_two.domains)
    got_one = search.search(kernel, one, spec)
    got_two = search.search(kernel, two, spec)
    assert got_one, "the layer has candidates"
    canon_one = [search.renamed(c, sig_one.names) for c in got_one]
    canon_two = [search.renamed(c, sig_two.names) for c in got_two]
    assert canon_one == canon_two


def test_a_different_layer_has_a_different_signature():
    spec = load_config("edge-npu")
    kernel, layers = _layers(_mlp())
    first, middle, last = layers[0], layers[1], layers[-1]
    digests = {cache.signature(kernel, x, spec).digest for x in (first, middle, last)}
    assert len(digests) == 3  # an input in, a temporary in, an output out
    other = load_config("datacenter")
    assert (
        cache.signature(kernel, middle, other).digest
        != cache.signature(kernel, middle, spec).digest
    )


def test_the_room_other_arrays_homes_leave_is_part_of_the_signature():
    """A layer's text names only its own arrays; the homes of the others take
    room below which its buffers are planned, so a layer searched in one
    program must not hand its candidates to the same layer in a program whose
    homes leave it less room (they may not fit there)."""
    spec = load_config("edge-npu")
    kernel, layers = _layers(_mlp())
    layer = layers[1]
    other = next(
        a.name
        for a in kernel.arrays.values()
        if a.role.value == "temp" and a.name not in layer.arrays
    )
    size = kernel.arrays[other].nbytes()
    mem = spec.memory[spec.level_index("sram")]
    homed = homes.home(kernel, other, "sram", mem.capacity_bytes - 4 * size, spec)
    room = search.capacities(homed, layer, spec)
    assert room != search.capacities(kernel, layer, spec)
    assert (
        cache.signature(homed, layer, spec).digest
        != cache.signature(kernel, layer, spec).digest
    )


def test_a_second_compile_reads_every_search_from_disk_and_builds_the_same(fresh):
    kernel = _mlp()
    first = polyc.compile(kernel, config="edge-npu", checks=False)
    searched = cache.STATS["searched"]
    assert searched >= 3 and cache.STATS["memory"] >= 1  # the repeated layer
    assert len(list(fresh.glob("*.json"))) == cache.STATS["written"]
    cache._MEMORY.clear()  # as a new process finds it
    cache.STATS.clear()
    second = polyc.compile(kernel, config="edge-npu", checks=False)
    assert cache.STATS["searched"] == 0
    assert cache.STATS["disk"] == searched
    assert second.choice.predicted_cycles == first.choice.predicted_cycles
    assert second.c_source == first.c_source


def test_the_cached_schedule_is_the_one_the_search_gives(fresh, monkeypatch):
    kernel = _mlp()
    cached = polyc.compile(kernel, config="tiny", checks=False)
    polyc.compile(kernel, config="tiny", checks=False)  # all from the cache
    assert cache.STATS["memory"] >= 4
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    cache.STATS.clear()
    searched = polyc.compile(kernel, config="tiny", checks=False)
    assert cache.STATS["uncached"] >= 4 and not cache.STATS["memory"]
    assert searched.c_source == cached.c_source


def test_a_corrupt_or_foreign_cache_file_costs_a_search_and_is_rewritten(fresh):
    kernel = _mlp()
    polyc.compile(kernel, config="tiny", checks=False)
    files = sorted(fresh.glob("*.json"))
    assert files
    files[0].write_text("{ not json")  # a torn write, an old format
    if len(files) > 1:
        data = json.loads(files[1].read_text())
        data["signature"] += " (another layer's text under this digest)"
        files[1].write_text(json.dumps(data))
    (fresh / ".leftover.tmp").write_text("a writer killed before its rename")
    cache._MEMORY.clear()
    cache.STATS.clear()
    polyc.compile(kernel, config="tiny", checks=False)
    assert cache.STATS["searched"] == min(len(files), 2)
    assert json.loads(files[0].read_text())["format"] == cache.FORMAT


def test_edited_scheduler_code_never_reads_an_old_result(fresh, monkeypatch):
    kernel = _mlp()
    polyc.compile(kernel, config="tiny", checks=False)
    searched = cache.STATS["searched"]
    cache._MEMORY.clear()
    cache.STATS.clear()
    monkeypatch.setattr(cache, "_code_digest", lambda: "an-edited-cost-model")
    polyc.compile(kernel, config="tiny", checks=False)
    assert cache.STATS["searched"] == searched and not cache.STATS["disk"]


def _energy_point(base, factor: float):
    """``base`` with other energies and leakage (a grid point of its own name)."""
    import accelerator

    axes = {
        "memory.dram.read_pj_per_byte": [base.dram.read_pj_per_byte * factor],
        "memory.sram.write_pj_per_byte": [base.level("sram").write_pj_per_byte * 2],
        "vector.pj_per_op": [base.vector.pj_per_op * factor],
        "area.leakage_mw_per_mm2": [base.area.leakage_mw_per_mm2 * factor],
    }
    [point] = accelerator.vary(base, axes)
    assert point.name != base.name
    return point


@pytest.mark.parametrize("objective", ["cycles", "edp"])
def test_a_point_differing_only_in_energies_and_area_reuses_every_search(
    fresh, objective
):
    """Energies, leakage and the config's name are not in a layer's search key:
    the search ranks by cycles, and the objective re-ranks its result (with
    energies) after the cache. A second point that differs only in those does no
    search; with objective cycles it also gets the same C, so no gcc build."""
    kernel = _mlp()
    base = load_config("edge-npu")
    first = polyc.compile(kernel, config=base, checks=False, objective=objective)
    assert cache.STATS["searched"] >= 3
    cache.STATS.clear()
    point = _energy_point(base, 3.0)
    second = polyc.compile(kernel, config=point, checks=False, objective=objective)
    assert cache.STATS["searched"] == 0 and cache.STATS["memory"] >= 4
    if objective == "cycles":
        assert second.c_source == first.c_source
        assert second.module.built.cached  # the first point's module: no gcc
    # the same program, charged at the point's energies
    _, one = first.run(functional=False)
    _, two = second.run(functional=False)
    if second.c_source == first.c_source:
        assert two.cycles == one.cycles
    assert two.energy["dram"] > one.energy["dram"]


def test_a_point_with_other_timing_searches_again(fresh):
    import accelerator

    kernel, layers = _layers(_mlp())
    base = load_config("edge-npu")
    [wider] = accelerator.vary(base, {"memory.dram.bytes_per_cycle": [64]})
    [cheaper] = accelerator.vary(base, {"memory.dram.read_pj_per_byte": [1.0]})
    layer = layers[1]
    digest = cache.signature(kernel, layer, base).digest
    assert cache.signature(kernel, layer, cheaper).digest == digest
    assert cache.signature(kernel, layer, wider).digest != digest
