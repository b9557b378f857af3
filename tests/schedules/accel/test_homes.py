"""Intermediates on chip for the whole kernel (``schedules/accel/homes.py``): on
datacenter every intermediate of a small model lives in the ``shared`` SRAM,
its copies move no DRAM bytes, the layers' buffers are planned below the homes
(the simulator refuses an overlap), the outputs are the interpreter's, and the
cost model predicts the run within the usual tolerance."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import polyc
from accelerator.hardware.config import load_config
from polyc.errors import ArgumentError
from polyc.ir.kernel import Role
from schedules.accel import homes
from schedules.accel.tensorize import contraction

TOLERANCE = 0.25


def _mlp():
    from polyc.frontends.torch.models import MLP

    torch.manual_seed(0)
    model = MLP(64, 128, 10).eval()
    x = torch.randn(4, 64)
    return polyc.from_torch(model, (x,)), {"arg0": x.numpy()}


def _run(kernel, feeds, monkeypatch, on_chip: bool, config="datacenter"):
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    if not on_chip:
        monkeypatch.setattr(homes, "assign", lambda kernel, spec: kernel)
    compiled = polyc.compile(kernel, config=config)
    out, report = compiled.run(**feeds)
    monkeypatch.undo()
    return compiled, out, report


def test_intermediates_live_in_the_level_above_the_engines(monkeypatch):
    """On datacenter an intermediate lives where the engines work (``local``,
    its top quarter, smallest first: resident, read in place); those that do
    not fit there live in ``shared`` above, copied to the layers' buffers."""
    spec = load_config("datacenter")
    local, shared = spec.level_index("local"), spec.level_index("shared")
    kernel, _ = _mlp()
    got = homes.assign(kernel, spec)
    for arr in got.arrays.values():
        assert arr.home == (local if arr.role == Role.TEMP else 0)
    # room in local for one 4 KiB activation of the conv chain
    monkeypatch.setattr(homes, "RESIDENT_SHARE", 6000 / (512 << 10))
    conv = homes.assign(_conv_chain()[0], spec)
    where = [a.home for a in conv.arrays.values() if a.role == Role.TEMP]
    assert where.count(local) == 1 and where.count(shared) == len(where) - 1
    for placed, level in ((got, local), (conv, local), (conv, shared)):
        temps = sorted(
            (a.home_offset, a.nbytes())
            for a in placed.arrays.values()
            if a.home == level
        )
        for (lo, size), (nxt, _) in itertools.pairwise(temps):  # apart, at the top
            assert lo + size <= nxt
        assert temps[-1][0] + temps[-1][1] <= spec.memory[level].capacity_bytes
    assert got.history[-1].name == "home"


def test_on_chip_intermediates_move_no_dram_bytes_and_run_faster(monkeypatch):
    kernel, feeds = _mlp()
    with_homes, out, report = _run(kernel, feeds, monkeypatch, on_chip=True)
    _, _, before = _run(kernel, feeds, monkeypatch, on_chip=False)
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5)
    # the activations' stores and loads left DRAM: only the input, the
    # weights and the output are moved (the 4x128 float activations were)
    assert report.dram_bytes < before.dram_bytes - 2 * 4 * 128 * 4
    assert report.cycles < before.cycles
    ratio = with_homes.choice.predicted_cycles / report.cycles
    assert abs(ratio - 1) <= TOLERANCE


def test_a_home_for_what_the_caller_passes_is_refused():
    kernel, _ = _mlp()
    with pytest.raises(ArgumentError, match="only to intermediates"):
        homes.home(kernel, "arg0", "shared", 0, "datacenter")
    temp = next(a.name for a in kernel.arrays.values() if a.role == Role.TEMP)
    with pytest.raises(ArgumentError, match="misaligned"):
        homes.home(kernel, temp, "shared", 3, "datacenter")
    with pytest.raises(ArgumentError, match="SRAM level"):
        homes.home(kernel, temp, "dram", 0, "datacenter")


def test_a_compiled_kernel_with_homes_compiles_again_as_a_given_schedule(monkeypatch):
    """``polyc.compile(kernel, schedule=compiled.kernel)``: where the
    intermediates live is the schedule's, the program is the same one."""
    from polyc import compute as pc

    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    a = pc.placeholder("A", (64, 64), "float32")
    w = pc.placeholder("W", (64, 64), "float32")
    k = pc.reduce_axis(64, "k")
    h = pc.compute("H", (64, 64), lambda i, j: pc.sum(a[i, k] * w[k, j], k))
    r = pc.compute("R", (64, 64), lambda i, j: pc.maximum(h[i, j], 0.0))
    k2 = pc.reduce_axis(64, "k2")
    out = pc.compute("O", (64, 64), lambda i, j: pc.sum(r[i, k2] * w[k2, j], k2))
    kernel = pc.kernel("two", [out])
    compiled = polyc.compile(kernel, config="datacenter")
    assert {n for n, x in compiled.kernel.arrays.items() if x.home} == {"H", "R"}
    again = polyc.compile(kernel, config="datacenter", schedule=compiled.kernel)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((64, 64)).astype(np.float32) for n in "AW"}
    got, report = again.run(**feeds)
    want, first = compiled.run(**feeds)
    assert report.cycles == first.cycles
    np.testing.assert_allclose(got["O"], want["O"])


def test_a_home_in_a_bank_slower_than_a_byte_per_cycle_is_one_call():
    """Random hardware (fuzz batch 913, cases 9 and 94): a level of 4 B/cycle
    in 8 banks gives a home half a byte per cycle; the copies' calls were
    computed with integer rates and divided by zero."""
    import dataclasses

    from polyc.ir import marks as pm
    from schedules.accel.placement import chunks
    from schedules.accel.routes import Routes

    spec = load_config("datacenter")
    shared, local = spec.level_index("shared"), spec.level_index("local")
    slow = dataclasses.replace(spec.memory[shared], bytes_per_cycle=4.0)
    memory = tuple(slow if i == shared else m for i, m in enumerate(spec.memory))
    spec = dataclasses.replace(spec, memory=memory)
    routes = Routes.of(spec, spec.memory[shared], spec.memory[local])
    home = routes.home().direct
    assert home.split == 1 and home.want == 0.5
    mark = pm.BufferMark(
        "t_local_0", "t", "local", local, 4, 1, (64, 64), (64, 1), 4096,
        True, False, False, "", "",
    )  # fmt: skip
    assert chunks(spec, shared, local, mark) == 1


def test_a_copy_to_or_from_a_banked_level_gets_one_banks_bandwidth():
    """datacenter's ``shared``: 8 banks of 64 B/cycle. A staged operand or a
    home sits in one bank, so its copies reach 64 B/cycle, not the level's
    512 (nor DRAM's 151.7 with three calls). Charged so, the roofline's
    attn_qk on datacenter runs 6,043 cycles predicted at 6,250; charged the
    level's bandwidth, the search staged K^T whole, cut into three calls the
    model thought ran at 151.7 B/cycle: 9,047 simulated, 6,122 predicted."""
    from schedules.accel.placement import copy_rates

    spec = load_config("datacenter")
    dram, shared, local = (spec.level(n) for n in ("dram", "shared", "local"))
    assert copy_rates(spec, dram, shared) == (64.0, 64.0, 1)
    assert copy_rates(spec, shared, local) == (64.0, 64.0, 1)
    rate, want, calls = copy_rates(spec, dram, local)  # local's banks: 1 KiB/cycle
    assert (rate, want, calls) == (64.0, 151.7, 3)


def test_on_one_scratchpad_intermediates_live_where_the_engines_work():
    """edge-npu has one SRAM, which every engine reaches: an intermediate's home
    is there, in the top quarter, smallest first, one a MAC reads through a
    window (a 3x3 convolution's input) too."""
    kernel, _ = _mlp()
    spec = load_config("edge-npu")
    sram = spec.level_index("sram")
    got = homes.assign(kernel, spec)
    temps = [a for a in got.arrays.values() if a.role == Role.TEMP]
    assert temps and all(a.home == sram for a in temps)
    cap = spec.memory[sram].capacity_bytes
    assert min(a.home_offset for a in temps) >= cap * (1 - homes.RESIDENT_SHARE)
    got = homes.assign(_conv_chain()[0], spec)
    assert _windowed(got) <= {a.name for a in got.arrays.values() if a.home}


def _windowed(kernel) -> set[str]:
    """The intermediates a MAC reads through a (3x3) window."""
    out = set()
    for s in kernel.statements:
        con = contraction(s)
        for ld in [s.reads[con.a], s.reads[con.b]] if con else []:
            if kernel.arrays[ld.array].role != Role.TEMP:
                continue
            if any(len(x.names()) > 1 for x in ld.index) and any(
                x.const for x in ld.index
            ):
                out.add(ld.array)
    assert out
    return out


def test_a_windowed_read_copies_from_the_home_on_chip(monkeypatch):
    """The 3x3 convolution reads its input through a window, whose box leaves
    the array at the padding: that layer keeps a buffer of it, copied from the
    home by an on-chip DMA (no DRAM bytes), which clips and zero-fills; the
    outputs are the interpreter's. Before, a windowed intermediate had no home
    and went to DRAM and back (hf-mobilenetv2 on edge-npu: 290,710 -> 270,534
    cycles with it)."""
    kernel, feeds = _conv_chain()
    compiled, out, report = _run(kernel, feeds, monkeypatch, True, "edge-npu")
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    for name in _windowed(compiled.kernel):
        assert compiled.kernel.arrays[name].home
        assert f"{name}_sram_" in compiled.c_source  # a buffer of its own
        moved = [e for e in report.events if e.kind == "dma" and name in e.label]
        assert moved and all("dram" not in (e.src, e.dst) for e in moved)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert abs(ratio - 1) <= TOLERANCE


def _conv_chain():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 8, 1),
    ).eval()
    x = torch.randn(1, 8, 8, 8)
    return polyc.from_torch(model, (x,)), {"arg0": x.numpy()}


@pytest.mark.parametrize(
    ("config", "level"), [("edge-npu", "sram"), ("datacenter", "local")]
)
def test_engines_read_and_write_resident_homes_in_place(monkeypatch, config, level):
    """On edge-npu, and on datacenter's local memory below its shared SRAM, the
    layers use a resident intermediate with no buffer and no copy (no DMA names
    it), the outputs are the interpreter's, the run is faster than with no
    homes (every intermediate through DRAM), and the cost model predicts it."""
    kernel, feeds = _mlp()
    compiled, out, report = _run(kernel, feeds, monkeypatch, True, config)
    _, _, before = _run(kernel, feeds, monkeypatch, False, config)
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    resident = {
        a.name
        for a in compiled.kernel.arrays.values()
        if a.home and f"{a.name}_{level}_" not in compiled.c_source
    }
    assert resident
    copied = {e.label.split()[0] for e in report.events if e.kind == "dma"}
    assert not resident & copied
    assert report.dram_bytes < before.dram_bytes
    assert report.cycles < before.cycles
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert abs(ratio - 1) <= TOLERANCE


def test_a_layer_streams_what_it_makes_and_uses_up_through_its_buffers(
    monkeypatch,
):
    """A convolution's output under its epilogue, made and used up in one
    layer, keeps its tile buffers though it has a home: written straight
    into the home (one bank, the whole array) the first layer of an inverted
    residual block ran 28% slower (25,374 -> 32,556 cycles) at the same
    predicted cycles. Same outputs, no slower than without homes."""
    from schedules.accel.resident import read_later

    kernel, feeds = _conv_chain()
    compiled, out, report = _run(kernel, feeds, monkeypatch, True, "edge-npu")
    _, _, before = _run(kernel, feeds, monkeypatch, False, "edge-npu")
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    inside = set()  # homed, made and used up inside one layer
    for lc in compiled.choice.layers:
        k = lc.context[0]
        for s in lc.layer.stmts:
            a = k.arrays[s.target.array]
            if a.home and not read_later(k, lc.layer, a.name):
                inside.add(a.name)
    assert inside
    for name in inside:  # a buffer of its own
        assert f"{name}_sram_" in compiled.c_source
    assert report.cycles <= before.cycles


def test_the_planner_below_the_homes_keeps_the_simulators_banks():
    """The planner's bank of an offset is offset // (capacity / banks), as the
    simulator's: planned below the homes, the level keeps its banks' size (it
    had kept their number over less capacity, so on edge-npu with homes in its
    top bank the planner's bank 1 began inside the simulator's bank 0, and a
    MAC call's weights and accumulators it meant apart shared one)."""
    from schedules.accel import memplan, search

    kernel, _ = _mlp()
    spec = load_config("edge-npu")
    got = homes.assign(kernel, spec)
    sram = spec.level_index("sram")
    full = spec.memory[sram]
    below = memplan.below_homes(spec, got).memory[sram]
    start = min(a.home_offset for a in got.arrays.values() if a.home)
    assert below.capacity_bytes == start
    # the homes take part of the top bank: the planner keeps its rest
    assert below.banks == full.banks and below.bank_size == full.bank_size
    for offset in (0, full.bank_size - 1, full.bank_size, start - 1):
        assert offset // below.bank_size == offset // full.bank_size
    layer = next(iter(_layers(got)))
    assert search.capacities(got, layer, spec)[sram] <= below.capacity_bytes


def _layers(kernel):
    from schedules.accel.layers import per_statement, split

    kernel, _ = per_statement(kernel)
    return split(kernel)
