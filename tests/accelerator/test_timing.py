"""The timing model, driven through the runtime's Python bindings.

Every expected cycle count is written out from the config's numbers, so a change in
the model shows up as arithmetic that no longer holds. The tiny config: the scalar
core spends ISSUE = 1 cycle to issue a command; DMA: SETUP = 4 cycles, 8 B/cycle per
channel, DRAM 8 B/cycle with LAT = 20 cycles (L1: four banks of 128 B/cycle, wide
enough that no test here meets a bank conflict, 2 cycles); a 4x4
weight-stationary MAC array with double-buffered weights (its calls are timed by
``mac_timing``, whose closed forms tests/accelerator/test_dataflow.py checks); a
4-lane vector unit.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import tomllib

from accelerator.hardware.config import CONFIG_DIR, from_dict, load_config
from accelerator.hardware.dataflow import mac_timing
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime

ISSUE, SETUP, DRAM_BW, LAT = 1, 4, 8, 20


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


def tiny_with(**edits):
    """The tiny spec with ``section.key=value`` edits (``dma__bytes_per_cycle=4``)."""
    with open(CONFIG_DIR / "tiny.toml", "rb") as f:
        data = copy.deepcopy(tomllib.load(f))
    for path, value in edits.items():
        *head, last = path.split("__")
        node = data
        for h in head:
            node = node[int(h)] if h.isdigit() else node[h]
        node[last] = value
    return from_dict(data)


def test_one_dma(rt):
    sim = Simulator(rt, load_config("tiny"))
    B = 1024
    src = sim.bind("A", np.arange(B, dtype=np.uint8))
    dst = sim.alloc("l1", 0, B, "A_l1")
    sim.dma((dst, 0, [1]), (src, 0, [1]), [B], 1, channel=0)
    # issued at 0 (the scalar core is busy 1 cycle), then set-up, data, latency;
    # the channel is free once the data has moved (the next transfer's requests
    # go out while these are in flight)
    expected = ISSUE + SETUP + B // DRAM_BW + LAT
    assert sim.ready(dst) == expected
    report = sim.finish()
    assert report.cycles == expected
    assert report.engine("dma0").busy == expected - ISSUE - LAT
    assert report.engine("dma1").busy == 0
    assert report.dram_bytes == B
    assert report.level("l1").bytes_written == B
    assert np.array_equal(sim.array(dst, np.uint8, [B]), np.arange(B, dtype=np.uint8))


def test_two_dmas_share_dram_bandwidth(rt):
    """Each channel alone could use all of DRAM's 8 B/cycle: run together they
    share it. The first runs alone for the one cycle the second's issue takes,
    then both move 4 B/cycle; the second ends alone, one cycle after the first
    (tests/accelerator/test_dram_sharing.py has the other cases)."""
    sim = Simulator(rt, load_config("tiny"))
    B = 1024
    src = sim.bind("A", np.zeros(2 * B, dtype=np.uint8))
    d0 = sim.alloc("l1", 0, B, "x")
    d1 = sim.alloc("l1", B, B, "y")
    sim.dma((d0, 0, [1]), (src, 0, [1]), [B], 1, channel=0)
    sim.dma((d1, 0, [1]), (src, B, [1]), [B], 1, channel=1)
    data = ISSUE + SETUP  # the first's data phase starts
    first = data + 1 + (B - DRAM_BW) // (DRAM_BW // 2) + LAT
    second = data + 2 * B // DRAM_BW + LAT  # DRAM was busy all along
    assert (sim.ready(d0), sim.ready(d1)) == (first, second)
    assert sim.finish().cycles == second


def test_two_slow_channels_do_not_contend(rt):
    """With 4 B/cycle channels, two transfers fit in DRAM's 8 B/cycle side by side."""
    sim = Simulator(rt, tiny_with(dma__bytes_per_cycle=4.0))
    B = 512
    src = sim.bind("A", np.zeros(2 * B, dtype=np.uint8))
    d0 = sim.alloc("l1", 0, B, "x")
    d1 = sim.alloc("l1", B, B, "y")
    sim.dma((d0, 0, [1]), (src, 0, [1]), [B], 1, channel=0)
    sim.dma((d1, 0, [1]), (src, B, [1]), [B], 1, channel=1)
    assert sim.ready(d0) == ISSUE + SETUP + B // 4 + LAT
    assert sim.ready(d1) == 2 * ISSUE + SETUP + B // 4 + LAT


def test_dma_beyond_descriptor_dims_pays_setup_per_descriptor(rt):
    sim = Simulator(rt, load_config("tiny"))  # 2-D descriptors
    src = sim.bind("A", np.zeros((4, 8, 8), dtype=np.float32))
    dst = sim.alloc("l1", 0, 4 * 4 * 4 * 4, "t")
    # a 4x4x4 block of a 4x8x8 array: three dimensions that cannot merge
    sim.dma((dst, 0, [16, 4, 1]), (src, 0, [64, 8, 1]), [4, 4, 4], 4, channel=0)
    descriptors, nbytes = 4, 4 * 4 * 4 * 4
    assert sim.ready(dst) == ISSUE + descriptors * SETUP + nbytes // DRAM_BW + LAT
    assert sim.finish().dma_descriptors == descriptors


@pytest.mark.parametrize(
    "dtype,rate,m,n,k",
    [("float32", 1.0, 10, 6, 7), ("float16", 0.5, 4, 4, 7), ("int8", 2.0, 9, 3, 16)],
)
def test_mac_tile(rt, dtype, rate, m, n, k):
    spec = tiny_with(**{f"mac_array__dtypes__{dtype}__macs_per_cycle": rate})
    sim = Simulator(rt, spec)
    es = np.dtype(dtype).itemsize
    a = sim.alloc("l1", 0, 1024, "a")
    b = sim.alloc("l1", 1024, 1024, "b")
    c = sim.alloc("l1", 2048, 1024, "c")
    sim.mac(m, n, k, (a, 0, k, 1), (b, 0, n, 1), (c, 0, n, 1), dtype=dtype)
    t = mac_timing(spec.mac_array, m, n, k, rate)
    # weight stationary: ceil(k/4) ceil(n/4) folds, each streaming ceil(m/rate) rows
    assert t.folds == math.ceil(k / 4) * math.ceil(n / 4)
    assert t.stream == math.ceil(m / rate)
    report = sim.finish()
    assert report.cycles == ISSUE + t.alone
    assert report.engine("mac_array").busy == t.steady + t.first
    assert report.mac_array_macs == m * n * k
    acc = 4 if dtype == "int8" else es
    # what the array moves, not the footprints: A streams once per column fold,
    # B loads once, and the partial sums leave the array after every K fold
    # and are read back before every K fold but the first
    col_folds, k_folds = math.ceil(n / 4), math.ceil(k / 4)
    assert report.level("l1").bytes_read == (
        col_folds * m * k * es + k * n * es + (k_folds - 1) * m * n * acc
    )
    assert report.level("l1").bytes_written == k_folds * m * n * acc


def test_vector_ops(rt):
    sim = Simulator(rt, load_config("tiny"))  # 4 lanes; add 1, trans 8, reduce 2
    x = sim.alloc("l1", 0, 4096, "x")
    y = sim.alloc("l1", 4096, 4096, "y")
    n = 10
    sim.vec_binary("add", "float32", 1, n, (y, 0, 0, 1), (x, 0, 0, 1), (x, 0, 0, 1))
    t = ISSUE + math.ceil(n / 4) * 1
    assert sim.ready(y) == t
    sim.vec_unary("exp", "float32", 1, n, (x, 0, 0, 1), (y, 0, 0, 1))
    t = max(t, 2 * ISSUE) + math.ceil(n / 4) * 8  # waits for y
    assert sim.ready(x) == t
    rows = 3
    sim.vec_reduce("sum", "float32", rows, n, (y, 0, 1, 0), (x, 0, n, 1))
    t += rows * (math.ceil(n / 4) * 1 + 2)
    assert sim.ready(y) == t
    work = {"add": 1, "mul": 2, "transcendental": 1}  # e.g. x * y + exp(x) * 2
    sim.vector(n, work, [(x, False, 0, 4 * n), (y, True, 0, 4 * n)], label="fused")
    t += math.ceil(n / 4) * (1 + 2 * 1 + 8)
    assert sim.ready(y) == t
    report = sim.finish()
    assert report.cycles == t
    assert report.vector_ops["transcendental"] == 2 * n
    assert report.vector_ops["reduce"] == rows


def test_scalar_statement_cost(rt):
    spec = load_config("tiny")
    sim = Simulator(rt, spec)
    s = sim.stmt(
        "S1",
        ops={"add": 1, "mul": 1},
        access=[
            ("dram", 4, False),
            ("dram", 4, False),
            ("dram", 4, False),
            ("dram", 4, True),
        ],
        macs=1,
    )
    sim.scalar(s, 100)
    # statement 1 + add 1 + mul 1 + one DRAM latency for the reads + 16 B at 8 B/cycle
    per = 1 + 1 + 1 + LAT + 16 // DRAM_BW
    report = sim.finish()
    assert report.cycles == 100 * per
    assert report.macs == 100 and report.mac_array_macs == 0
    assert report.level("dram").bytes_read == 1200
    assert report.statements[0].cycles_per_instance == per
    pj = spec.scalar.pj_per_op * 200 + 1600 * spec.dram.read_pj_per_byte
    assert report.energy_pj == pytest.approx(pj)


def _tiled_loop(rt, tiles, n, double_buffer=True, store=True):
    """Per tile: load a 4x16 float32 tile of A (256 B), then C += A_t @ B on the MAC
    array (B, 16 x n, already resident). Loads run on channel 0."""
    sim = Simulator(rt, load_config("tiny"))
    A = sim.bind("A", np.ones((tiles * 4, 16), dtype=np.float32))
    Cd = sim.bind("C", np.zeros((4, n), dtype=np.float32))
    tile = 4 * 16 * 4
    bufs = [sim.alloc("l1", 0, tile, "a0")]
    bufs.append(sim.alloc("l1", tile, tile, "a1") if double_buffer else bufs[0])
    b = sim.alloc("l1", 2 * tile, 16 * n * 4, "b")
    sim.array(b, np.float32, (16, n))[:] = 1.0
    c = sim.alloc("l1", 2 * tile + 16 * n * 4, 4 * n * 4, "c")

    def load(t):
        sim.dma((bufs[t % 2], 0, [1]), (A, t * 64, [1]), [64], 4, channel=0)

    load(0)
    for t in range(tiles):
        if t + 1 < tiles:
            load(t + 1)
        sim.mac(
            4,
            n,
            16,
            (bufs[t % 2], 0, 16, 1),
            (b, 0, n, 1),
            (c, 0, n, 1),
            accumulate=t > 0,
        )
    if store:
        sim.dma((Cd, 0, [1]), (c, 0, [1]), [4 * n], 4, channel=1)
    report = sim.finish()
    assert np.all(sim.array(c, np.float32, (4, n)) == 16 * tiles)
    return report


DMA_TILE = SETUP + 256 // DRAM_BW + LAT  # 56 cycles per 256-byte tile alone
DMA_BUSY = DMA_TILE - LAT  # 36 on its channel: the next one issues during the latency


def test_compute_bound_loop_hides_its_loads(rt):
    """MAC 4x16x16 = 16 folds of 4 cycles back to back = 64 cycles > 56 per load:
    after the first load, every load runs under the previous tile's compute, and
    the calls pipeline (only the last drain shows: the first call's weights,
    resident, shift into the array while it waits for the first tile)."""
    T, n = 6, 16
    t = mac_timing(load_config("tiny").mac_array, 4, n, 16, 1.0)
    mac = t.steady
    assert (mac, t.first, t.tail) == (16 * 4, 4, 4 + 4 - 2)
    assert mac > DMA_TILE
    report = _tiled_loop(rt, T, n)
    store = SETUP + 4 * n * 4 // DRAM_BW + LAT
    assert report.cycles == (ISSUE + DMA_TILE) + T * mac + t.tail + store
    assert report.engine("mac_array").busy == t.first + T * mac
    assert report.engine("dma0").busy == T * DMA_BUSY
    # the MAC array waits only for the first load (less its weights' load, which
    # runs under it), its last drain and the store
    assert (
        report.engine("mac_array").idle == ISSUE + DMA_TILE - t.first + t.tail + store
    )
    # the timeline shows it: loads of tiles 2.. run while the MAC array computes
    # (tile 1's goes out during the latency of tile 0's, before any compute)
    macs = [e for e in report.events if e.kind == "mac"]
    loads = [e for e in report.events if e.kind == "dma" and e.engine == "dma0"]
    assert loads[1].start == loads[0].end
    for load in loads[2:]:
        assert any(m.start <= load.start and load.end <= m.end for m in macs)
    # one buffer instead of two: each load waits for the previous tile's compute,
    # and each call's weights shift in while it waits for its tile
    single = _tiled_loop(rt, T, n, double_buffer=False)
    per_tile = DMA_TILE + mac
    assert single.cycles == ISSUE + T * per_tile + t.tail + store


def test_bandwidth_bound_loop_hides_its_compute(rt):
    """MAC 4x4x16 = a 4-cycle load + 4 folds of 4 + a 6-cycle drain = 26 cycles
    < 36 per load on the channel: each load issues its requests while the one
    before is in flight, so the channel runs them back to back until a load
    finds both buffers taken, and waits for the compute two tiles back to free
    one (its buffer is free once the array has read it, 16 cycles after the
    call begins to stream: each call finds the array idle, and its resident
    weights shift in while it waits for its tile, so none pays its load).
    Only the last load's latency and the last tile's compute show."""
    T, n = 6, 4
    t = mac_timing(load_config("tiny").mac_array, 4, n, 16, 1.0)
    mac = t.first + t.steady
    assert (mac, t.alone) == (20, 26)
    report = _tiled_loop(rt, T, n, store=False)
    moved, calls = [], []  # per tile: its data has moved; its call streams
    for i in range(T):
        free = calls[i - 2] + t.steady if i >= 2 else 0  # the buffer it loads into
        start = max(moved[-1] if moved else ISSUE, free)
        moved.append(start + DMA_BUSY)
        calls.append(max(moved[-1] + LAT, calls[-1] + t.steady if calls else 0))
    assert report.cycles == calls[-1] + t.alone - t.load == 259  # 271 before
    assert report.engine("dma0").busy == T * DMA_BUSY
    assert report.engine("mac_array").busy == T * mac


def test_a_call_loads_its_weights_while_its_activations_are_computed(rt):
    """A MAC call whose A operand the vector unit writes: its weights (B, the
    operand a weight-stationary array holds), resident, shift into the array's
    second register while the vector unit runs (a weight FIFO of their own,
    TPU v1), so the call streams as soon as A is ready; before, it began to
    load them only then, t.load cycles later. Weights the vector unit writes
    after A load once they are written."""
    spec = load_config("tiny")
    t = mac_timing(spec.mac_array, 4, 4, 16, 1.0)
    assert (t.load, t.steady, t.first) == (4, 16, 4)
    n = 64  # 16 groups of 4 lanes
    exp = math.ceil(n / 4) * 8  # tiny's transcendental: 8 cycles a group

    def run(weights_by_vector: bool):
        sim = Simulator(rt, spec)
        a = sim.alloc("l1", 0, 4 * n, "a")
        b = sim.alloc("l1", 256, 4 * n, "b")
        c = sim.alloc("l1", 512, 64, "c")
        sim.vector(n, {"transcendental": 1}, [(a, True, 0, 4 * n)], label="act")
        if weights_by_vector:
            sim.vector(n, {"add": 1}, [(b, True, 0, 4 * n)], label="w")
        sim.mac(4, 4, 16, (a, 0, 16, 1), (b, 0, 4, 1), (c, 0, 4, 1), label="mm")
        report = sim.finish()
        (mac,) = [e for e in report.events if e.kind == "mac"]
        return mac, report

    a_ready = ISSUE + exp
    mac, report = run(False)
    # its load in the 4 cycles before A is ready, its folds streaming from then
    assert (mac.start, mac.end) == (
        a_ready - t.load,
        a_ready + t.first + t.steady - t.load,
    )
    assert report.cycles == a_ready + t.first + t.steady - t.load + t.tail
    # the weights written after A (16 cycles of adds): they load after them
    b_ready = a_ready + math.ceil(n / 4)
    mac, report = run(True)
    assert (mac.start, mac.end) == (b_ready, b_ready + t.first + t.steady)


def test_full_command_queue_stalls_the_scalar_core(rt):
    """tiny's engines queue 4 commands: issuing a 6th MAC waits until the 2nd starts
    (a command leaves the queue when its engine starts it: the 2nd call's weights
    begin to load when the 1st call's last fold begins to stream)."""
    sim = Simulator(rt, load_config("tiny"))
    buf = sim.alloc("l1", 0, 4096, "x")
    k = 42
    t = mac_timing(load_config("tiny").mac_array, 4, 4, k, 1.0)
    assert (t.steady, t.first, t.tail) == (11 * 4, 4, 6)  # 11 folds of 4 rows
    for _ in range(6):
        sim.mac(4, 4, k, (buf, 0, k, 1), (buf, 0, 4, 1), (buf, 512, 4, 1))
    second_start = ISSUE + t.first + t.steady - t.stream
    assert sim.now == second_start + ISSUE
    report = sim.finish()
    assert report.cycles == ISSUE + t.first + 6 * t.steady + t.tail
    stalls = [e for e in report.events if e.kind == "wait"]
    assert [(e.label, e.end) for e in stalls] == [("queue full", second_start)]


def test_wait_advances_the_scalar_core(rt):
    sim = Simulator(rt, load_config("tiny"))
    src = sim.bind("A", np.zeros(64, dtype=np.uint8))
    dst = sim.alloc("l1", 0, 64, "x")
    sim.dma((dst, 0, [1]), (src, 0, [1]), [64], 1)
    assert sim.now == ISSUE
    sim.wait(dst)
    assert sim.now == ISSUE + SETUP + 64 // DRAM_BW + LAT
    report = sim.finish()
    kinds = [e.kind for e in report.events]
    assert kinds == ["dma", "wait"]


def test_reused_space_waits_for_its_last_reader(rt):
    """A buffer allocated over freed space inherits the space's busy time, so a new
    DMA into it cannot overwrite data the old buffer's consumer still reads."""
    sim = Simulator(rt, load_config("tiny"))
    src = sim.bind("A", np.zeros(1024, dtype=np.uint8))
    old = sim.alloc("l1", 0, 1024, "old")
    sim.dma((old, 0, [1]), (src, 0, [1]), [1024], 1, channel=0)
    busy = sim.ready(old)
    sim.free(old)
    new = sim.alloc("l1", 512, 256, "new")
    sim.dma((new, 0, [1]), (src, 0, [1]), [256], 1, channel=1)
    assert sim.ready(new) == busy + SETUP + 256 // DRAM_BW + LAT


def test_timing_is_deterministic(rt):
    a = _tiled_loop(rt, 4, 16).to_dict()
    b = _tiled_loop(rt, 4, 16).to_dict()
    assert a == b


def test_a_load_into_one_slot_does_not_wait_for_the_calls_reading_another(rt):
    """Regression (HW-A conv 3x3, 72 MAC calls per tile, queue depth 64): the calls
    in flight reading slot 0 of a two-slot buffer were more than the ranges a
    buffer remembers; the oldest went into a whole-buffer floor, so the next
    tile's load into slot 1 waited for the array to pass them (the conv ran
    129,951 cycles, predicted 113,840; now 114,727). Overlapping ranges of one
    engine merge into one, and the load starts when it is issued."""
    sim = Simulator(rt, tiny_with(scalar__queue_depth=16))
    src = sim.bind("A", np.zeros(4096, dtype=np.float32))
    x = sim.alloc("l1", 0, 2 * 256, "x")  # two slots of 64 floats
    b = sim.alloc("l1", 1024, 256, "b")
    c = sim.alloc("l1", 2048, 1024, "c")
    calls = 12  # in flight: more than the 8 ranges a buffer remembers
    for i in range(calls):  # 64 rows of 16 floats of slot 0, each at its own offset
        sim.mac(64, 4, 16, (x, i, 0, 1), (b, 0, 4, 1), (c, 0, 4, 1), dtype="float32")
    issued = sim.now
    sim.dma((x, 64, [1]), (src, 0, [1]), [64], 4, channel=0)  # slot 1
    report = sim.finish()
    load = next(e for e in report.events if e.kind == "dma")
    assert load.start == issued + ISSUE
    assert load.end < report.cycles / 2  # long before the calls end


def test_a_tile_of_rows_waits_only_for_the_rows_it_reads(rt):
    """A tile of rows of a channel-major array ([C][H][W]) is one run of bytes
    per channel: its hazards are those runs', not their hull's. Regression: a
    layer's first tile of rows 0-3 of every channel waited for the previous
    layer's writes of rows 4-7, whose hull (channel 0's row 4 to channel 3's row
    7) covers most of the array; on datacenter every layer boundary of a CNN
    waited for the whole previous layer (res-blocks float32 7,886 -> 7,565
    cycles)."""
    sim = Simulator(rt, load_config("tiny"))
    C, H, W = 4, 8, 8
    src = sim.bind("A", np.arange(C * H * W, dtype=np.float32))
    x = sim.alloc("l1", 0, C * H * W * 4, "x")
    y = sim.alloc("l1", 1024, C * 4 * W * 4, "y")
    z = sim.alloc("l1", 2048, C * 4 * W * 4, "z")
    rows = [C, 4, W]  # four rows of every channel
    # rows 4-7 of every channel from DRAM: set-up, 512 bytes, latency
    sim.dma((x, 4 * W, [H * W, W, 1]), (src, 4 * W, [H * W, W, 1]), rows, 4, channel=0)
    write_end = ISSUE + SETUP + C * 4 * W * 4 // DRAM_BW + LAT
    # rows 0-3 touch none of its bytes: issued at once
    sim.dma((y, 0, [4 * W, W, 1]), (x, 0, [H * W, W, 1]), rows, 4, channel=1)
    # rows 3-6 read rows 4-6 it writes: after it
    sim.dma((z, 0, [4 * W, W, 1]), (x, 3 * W, [H * W, W, 1]), rows, 4, channel=1)
    report = sim.finish()
    write, first, second = [e for e in report.events if e.kind == "dma"]
    assert write.end + LAT == write_end
    assert first.start == 2 * ISSUE
    assert second.start >= write_end
    assert np.array_equal(  # the rows it wrote, as written
        sim.array(z, np.float32, [C, 4, W])[:, 1:],
        np.arange(C * H * W, dtype=np.float32).reshape(C, H, W)[:, 4:7],
    )


def test_more_tiles_than_a_buffer_remembers_still_wait_for_their_writers(rt):
    """Twenty writes of disjoint row tiles of a channel-major array, more than
    the 16 ranges a buffer remembers: the oldest fold into the whole-buffer
    floor, so a read of any tile still starts after the write of it (later, at
    worst: never before)."""
    sim = Simulator(rt, load_config("tiny"))
    C, H, W = 2, 40, 4
    src = sim.bind("A", np.arange(C * H * W, dtype=np.float32))
    x = sim.alloc("l1", 0, C * H * W * 4, "x")
    y = sim.alloc("l1", 2048, C * 2 * W * 4, "y")
    strides = [H * W, W, 1]
    for t in range(20):  # rows 2t, 2t+1 of both channels, one after another
        sim.dma(
            (x, 2 * t * W, strides), (src, 2 * t * W, strides), [C, 2, W], 4, channel=0
        )
    for t in (0, 7, 19):
        sim.dma((y, 0, [2 * W, W, 1]), (x, 2 * t * W, strides), [C, 2, W], 4, channel=1)
    report = sim.finish()
    dmas = [e for e in report.events if e.kind == "dma"]
    writes, reads = dmas[:20], dmas[20:]
    for t, read in zip((0, 7, 19), reads):
        assert read.start >= writes[t].end + LAT
    assert np.array_equal(
        sim.array(y, np.float32, [C, 2, W]),
        np.arange(C * H * W, dtype=np.float32).reshape(C, H, W)[:, 38:40],
    )


def test_a_vector_op_on_rows_of_every_channel_accounts_the_bytes_of_its_rows(rt):
    """A vector operation's bytes (its energy and the level's byte counts) are
    those of its arcs where its range is periodic: rows 1-2 of 4 rows in each
    of 8 channels of 16-byte rows are 8 x 32 = 256 bytes, not their hull's
    7 x 64 + 32 = 480; an arc that wraps (rows 3 and 0) counts the same."""
    sim = Simulator(rt, load_config("tiny"))
    x = sim.alloc("l1", 0, 8 * 64, "x")  # [8 channels][4 rows][16 bytes]
    sim.vector(64, {"add": 1}, [(x, True, 16, 7 * 64 + 48, 64, 16, 32)])
    sim.vector(64, {"add": 1}, [(x, False, 0, 8 * 64, 64, 48, 32)])  # rows 3, 0
    report = sim.finish()
    assert report.level("l1").bytes_written == 8 * 32
    assert report.level("l1").bytes_read == 8 * 32
