"""The whole program's prediction against what the simulator does between and
beside layers (issue 14: "the cost model predicts the simulator"): on-chip
copies waiting for the channels DRAM loads hold (``terms.held_channels``), a
layer's first loads hiding under the layers the scalar core issued at once
(``boundary.credits``), and a weight's chunk fetched ahead slowing the first
loads of the layer it is issued with (``prefetch.annotate``). The arithmetic is
written out in each test."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import schedules as S
from accelerator.hardware.config import load_config
from schedules.accel import boundary, prefetch, terms
from schedules.accel.search import EDGES, Candidate
from schedules.accel.work import Work
from tests.schedules.accel.test_prefetch import _kernel, _weight


def _mlp_reading_a_home(channels: int):
    """hf-llama's second MLP on edge-npu (float16) with its gate weight fetched
    ahead into a home and copied from there tile by tile: between fill and
    drain the up and down weights' 122,880 bytes stream from DRAM (two
    streams), and the gate weight's 128 copies of 512 B from its home take
    6,400 cycles of channel time (50 each: set-up, 512 B at 16 B/cycle, the
    scratchpad's latency); 15,120 channel cycles in all."""
    spec = load_config("edge-npu")
    spec = replace(spec, dma=replace(spec.dma, channels=channels))
    t = terms.Traffic.zeros(1)
    t.dram_bytes = np.array([122_880.0])
    t.channel_cycles = np.array([15_120.0])
    t.load_cycles = t.channel_cycles
    t.transfers = np.array([161.0])
    t.load_calls = t.transfers
    t.streams = np.array([3.0])
    t.load_streams = t.streams
    t.chip_cycles = np.array([6_400.0])
    t.dram_streams = np.array([2.0])
    zero = np.zeros(1)
    return spec, t, Work(zero, zero, zero, zero)


def test_copies_from_a_home_wait_for_the_channels_dram_loads_hold():
    """DRAM moves the two streams' 122,880 bytes in 7,680 cycles at 16
    B/cycle, each stream at half of it on its own channel, so both of
    edge-npu's channels are held all that time, and the home's 6,400 channel
    cycles run on the two once DRAM is done: 7,680 + 6,400 / 2 = 10,880 (the
    simulator: channels busy 11,200 and 11,360 cycles, the layer 12,686). The
    channels' sum alone, 15,120 / 2 = 7,560, is under DRAM's time: before, the
    model charged 7,680 and took the copies from the home as free, so the
    search copied the fetched weight tile by tile rather than use it in
    place."""
    spec, t, work = _mlp_reading_a_home(2)
    busy = terms.overlap(spec, t, work)
    assert busy.engines["dma"][0] == pytest.approx(7_680 + 6_400 / 2)
    # with eight channels the six the two streams leave take the copies
    # (6 x 7,680 channel cycles > 6,400) beside DRAM's time
    spec8, t8, _ = _mlp_reading_a_home(8)
    assert terms.held_channels(spec8, t8, np.array([7_680.0]))[0] == 7_680
    # no copy on chip: nothing held
    t.chip_cycles = np.zeros(1)
    assert terms.overlap(spec, t, work).engines["dma"][0] == pytest.approx(7_680)


def _cand(cycles, dram, fill, fill_bytes, fill_calls, tail, issues, loads=()):
    edges = dict.fromkeys(EDGES, 0.0)
    edges.update(
        fill=fill,
        fill_bytes=fill_bytes,
        fill_calls=fill_calls,
        tail=tail,
        issues=issues,
    )
    return Candidate(
        None,
        (),
        cycles,
        dram,
        1024.0,
        edges=tuple(edges[e] for e in EDGES),
        first_loads=loads,
    )


def _layer(array: str):
    """A layer as the boundary sees it: the array its statement writes."""
    return SimpleNamespace(stmts=[SimpleNamespace(target=SimpleNamespace(array=array))])


def test_first_loads_hide_under_the_layers_the_scalar_core_issued_at_once():
    """hf-vit's first attention on datacenter (float32): its fill (the key and
    value projections' weights, 347 cycles) ran under the query projection
    and its bias layer, issued at once before them (16 commands queue per
    engine), while the credit counted the bias layer's 17-cycle tail alone.

    A: 600 cycles, 12 commands, its last 200 its tail, 15,170 DRAM bytes;
    B: one vector operation (2 commands), a 186-cycle fill from a home, no
    DRAM bytes, a 17-cycle tail; C: a 347-cycle fill of 30,340 bytes in 4
    calls. A issues all of its commands at once, so B's fill hides under all
    of A's 600 cycles: 186 (as before: it fits A's tail). B does too, so C's
    first loads are issued with B's, 614 cycles before B ends (its 14 cycles
    after its credit, and A's 600), and DRAM moves A's and C's bytes in
    (15,170 + 30,340) / 151.7 = 300 cycles of them: all 347 hide. Before, C's
    credit was B's tail, 17: 2,800 - 186 - 17 = 2,597 cycles, now 2,800 -
    186 - 347 = 2,267."""
    spec = load_config("datacenter")
    bw = spec.dram.bytes_per_cycle
    assert spec.scalar.queue_depth == 16 and bw == pytest.approx(151.7)
    a = _cand(600.0, 15_170.0, 300.0, 15_170.0, 2.0, 200.0, 12.0)
    b = _cand(200.0, 0.0, 186.0, 0.0, 0.0, 17.0, 2.0)
    c = _cand(2000.0, 30_340.0, 347.0, 30_340.0, 4.0, 900.0, 40.0, (("w", 347.0),))
    layers = [(_layer("x"), a), (_layer("y"), b), (_layer("z"), c)]
    assert boundary.program_cycles(spec, layers) == pytest.approx(2_267.0)
    assert boundary.credits(spec, layers) == [0.0, 186.0, pytest.approx(347.0)]
    # a layer that issues more than a queue holds: its last 16 of 40
    # commands' stretch, at least its tail
    net = c.cycles
    assert boundary.issued(spec, c, net)[0] == pytest.approx(900 + 1100 * 16 / 40)
    # what C loads of B's output still waits for B's stores
    layers[1] = (_layer("w"), b)
    assert boundary.credits(spec, layers)[2] == 0.0


def test_a_chunk_fetched_ahead_slows_the_first_loads_it_is_issued_with():
    """hf-mobilenetv2 on edge-npu (float16): a chunk of 67,648 B issued before
    a layer took half of DRAM from the layer's first load (16 KiB: 2,064
    cycles instead of 1,040), and the layer ran 970 cycles longer, though its
    idle DMA time held the whole chunk. The chunk of the linear layer's weight
    (20,480 B: 16 + 20,480 / 16 = 1,296 cycles) before a layer of 10,000
    cycles whose DMA is busy 1,000 (8,000 idle) and whose first loads move
    1,600 B (100 cycles at 16 B/cycle): 100 cycles exposed. Before, all of it
    hid (the copy's layer charged its set-up, 16)."""
    spec = load_config("edge-npu")
    kernel = _kernel()
    w = _weight(kernel)
    rows = kernel.arrays[w].concrete_shape({})[0]
    got = S.prefetch(kernel, w)
    host = got.statements[1]
    marked = S.prefetch_dma(got, "PF0", chunks=((host.name, rows),))
    cand = _cand(10_000.0, 0.0, 100.0, 1_600.0, 1.0, 100.0, 4.0)
    cand = replace(cand, engines=(("dma", 1_000.0),))
    choices = [
        SimpleNamespace(
            layer=SimpleNamespace(stmts=[s]),
            candidate=None if s.name == "PF0" else cand,
            extra_cycles=0.0,
            note="",
        )
        for s in marked.statements
    ]
    prefetch.annotate(marked, spec, choices)
    assert marked.arrays[w].nbytes() == 20_480
    assert choices[0].extra_cycles == pytest.approx(100.0)
