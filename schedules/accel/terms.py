"""The terms of the accelerator cost model, at every candidate of a grid at once.

:meth:`schedules.accel.model.LayerModel.evaluate` composes them, one buffer at a
time and then for the whole layer:

- :func:`footprint`: the SRAM bytes of a buffer (its slots of aligned boxes);
- :func:`tile_copies`: the DMA work of a buffer's per-tile copies (bytes moved
  between DRAM, or the staging level, and the engines' level), through
  :meth:`schedules.accel.routes.Route.copy`, the one rule by which a copy is
  cut into calls;
- :func:`staging_copy`: a re-read operand copied whole from DRAM to the level
  above the engines' once, before the tiles;
- :func:`schedules.accel.work.engines`: the MAC array's, the vector unit's and
  the scalar core's work (a module of its own);
- :func:`overlap`: double buffering: the busiest engine's total plus the first
  tile's loads and the last tile's stores, or, where DRAM is the bottleneck,
  every byte but the last stores, then the last tile's compute and its stores;
- :func:`store_windows`: the loads that fall behind the compute while a store
  holds its channels (two or more channels).

Every value is a numpy array over the candidates (or a number that broadcasts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from accelerator.hardware.spec import DMA, Spec
from schedules.accel.evaluate import descriptors
from schedules.accel.routes import Route, Routes
from schedules.accel.work import Work, engines

if TYPE_CHECKING:
    from schedules.accel.estimate import TileBox
    from schedules.accel.model import LayerModel, TileBuffer


@dataclass(frozen=True)
class Copies:
    """The DMA work of a buffer over the whole layer."""

    dram_bytes: np.ndarray  # bytes between DRAM and the chip
    dram_writes: np.ndarray  # ... of which stored to DRAM
    channel_cycles: np.ndarray  # the channels' busy time, summed
    calls: np.ndarray  # DMA calls
    streams: np.ndarray | float  # calls that overlap the compute (double buffered)
    alone: np.ndarray  # time of its copy before the first (after the last) tile
    fixed: np.ndarray | float = 0.0  # ... of which set-up and latency
    latency: np.ndarray | float = 0.0  # ... of which latency
    # the loads' part (copies into the chip): channel time, of which set-up,
    # calls, and calls that overlap the compute
    load_cycles: np.ndarray | float = 0.0
    load_setup: np.ndarray | float = 0.0
    setup: np.ndarray | float = 0.0  # the set-up of all its calls
    load_calls: np.ndarray | float = 0.0
    load_streams: np.ndarray | float = 0.0


def footprint(buf: TileBuffer, box: TileBox, stream_slots: int, align: int):
    """The SRAM bytes of a buffer: one aligned box per slot. A copy that runs more
    than once is double buffered: ``stream_slots`` slots for an operand streamed
    through a reduction or only read, two for a written one."""
    slots = np.where(
        box.copies > 1, stream_slots if buf.streamed or not buf.written else 2, 1
    )
    return slots * np.ceil(box.elements * buf.itemsize / align) * align


def staged_here(buf: TileBuffer, box: TileBox, allowed: bool) -> np.ndarray:
    """Per candidate, whether ``buf`` (``allowed`` to be staged) is: only where its
    tiles re-read it (their copies move more bytes than its box)."""
    reread = box.copies * box.moved_bytes > 1.001 * buf.whole_bytes
    return reread & allowed


def tile_copies(
    buf: TileBuffer, box: TileBox, use: np.ndarray, routes: Routes, dma: DMA
) -> Copies:
    """The per-tile copies of ``buf`` in each of its directions (in, out): from
    DRAM, or from the staging level where ``use`` holds (no DRAM bytes then)."""
    src = buf.whole if use.any() else buf.shape
    ext = list(box.extents)
    if box.phased is not None:  # a copy per phase: every factor-th row
        ext[box.phased] = np.ceil(ext[box.phased] / box.phases)
    desc = descriptors(ext, src, dma.max_dims, box.phased)
    route = routes.upper.where(use, routes.direct)
    t = route.copy(box.moved_bytes, desc, dma.setup_cycles, box.phases)
    directions = buf.directions
    loads = int(buf.copy_in)
    return Copies(
        np.where(use, 0, box.copies * box.moved_bytes * directions),
        np.where(use, 0, box.copies * box.moved_bytes * int(buf.copy_out)),
        box.copies * t.per_call * t.calls * directions,
        box.copies * directions * t.calls,
        np.where(box.copies > 1, t.calls, 0) * directions,
        t.alone,
        t.fixed,
        t.latency,
        box.copies * t.per_call * t.calls * loads,
        box.copies * t.calls * (t.fixed - t.latency) * loads,
        box.copies * t.calls * (t.fixed - t.latency) * directions,
        box.copies * t.calls * loads,
        np.where(box.copies > 1, t.calls, 0) * loads,
    )


def staging_copy(buf: TileBuffer, use: np.ndarray, route: Route, dma: DMA) -> Copies:
    """The copy of ``buf``'s whole box from DRAM to the staging level, once before
    the tile loops, where ``use`` holds; its time adds to the first tile's copy."""
    whole = buf.whole_bytes
    box = [np.full(1, float(e)) for e in buf.whole]
    desc = descriptors(box, buf.shape, dma.max_dims)[0]
    t = route.copy(whole, desc, dma.setup_cycles)
    cycles = np.where(use, t.per_call * t.calls, 0)
    calls = np.where(use, t.calls, 0)
    setup = np.where(use, t.calls * (t.fixed - t.latency), 0)
    return Copies(
        np.where(use, whole, 0),
        0.0,
        cycles,
        calls,
        0.0,
        np.where(use, t.alone, 0),
        load_cycles=cycles,
        load_setup=setup,
        setup=setup,
        load_calls=calls,
    )


@dataclass
class Traffic:
    """The layer's DMA work, summed over its buffers (see :meth:`add`)."""

    dram_bytes: np.ndarray
    dram_writes: np.ndarray  # ... of which stores
    channel_cycles: np.ndarray
    transfers: np.ndarray  # DMA calls
    streams: np.ndarray  # calls in flight beside the compute
    most: np.ndarray  # copies of the most often copied buffer
    first_in: np.ndarray  # DRAM bytes loaded before the first tile
    first_time: np.ndarray  # the longest of those loads
    first_calls: np.ndarray  # ... and their DMA calls
    next_in: np.ndarray  # bytes of the next tile's loads (copies run more than once)
    next_calls: np.ndarray
    out_serial: np.ndarray  # one tile's stores one after the other on one channel
    last_out: np.ndarray  # bytes stored after the last tile
    last_time: np.ndarray
    first_fixed: np.ndarray  # set-up and latency of the first tile's loads
    last_fixed: np.ndarray  # ... and of the last tile's stores
    stored: list = field(default_factory=list)  # copies of each copied-out buffer
    loads: list = field(default_factory=list)  # (copies, alone, fixed) per load
    # (copies, alone, fixed, bytes, calls) per store
    stores: list = field(default_factory=list)
    # (copies, one copy's calls one after the other on one channel) per load
    serial_in: list = field(default_factory=list)
    # array -> the time of its copy before the first tile (copied-in buffers)
    first_loads: dict = field(default_factory=dict)
    first_latency: np.ndarray | float = 0.0  # the first tile's loads' latency
    load_cycles: np.ndarray | float = 0.0  # the loads' part of channel_cycles
    load_setup: np.ndarray | float = 0.0  # ... of which set-up
    setup: np.ndarray | float = 0.0  # the set-up of all the calls
    load_calls: np.ndarray | float = 0.0  # ... of transfers
    load_streams: np.ndarray | float = 0.0  # ... of streams
    # per staged operand: (its first tile copy's time alone, its tile copies,
    # the time one more tile copy adds beside it at the source's bandwidth, the
    # DRAM bytes of its staging copy's calls)
    hops: list = field(default_factory=list)
    # the channel time of the copies that move no DRAM bytes (from a home on
    # chip, or a staged operand's tiles), and the streams of those that do
    chip_cycles: np.ndarray | float = 0.0
    dram_streams: np.ndarray | float = 0.0

    @classmethod
    def zeros(cls, n: int) -> Traffic:
        z = np.zeros
        return cls(*(z(n) for _ in range(5)), np.ones(n), *(z(n) for _ in range(10)))

    def add(
        self,
        buf: TileBuffer,
        box: TileBox,
        use: np.ndarray,
        moves,
        dram: bool = True,
        want: float | np.ndarray = np.inf,
    ) -> None:
        """Add buffer ``buf``'s copies ``moves`` (:class:`Copies`: its tile copies,
        then its staging copy where ``use`` holds); ``dram=False`` for an array
        with a home on chip, whose loads take no DRAM bandwidth; ``want``: the
        bandwidth of the staging level's end of its tile copies."""
        alone = 0.0
        for c in moves:
            self.dram_bytes += c.dram_bytes
            self.dram_writes += c.dram_writes
            self.channel_cycles += c.channel_cycles
            self.transfers += c.calls
            self.streams += c.streams
            self.load_cycles = self.load_cycles + c.load_cycles
            self.load_setup = self.load_setup + c.load_setup
            self.setup = self.setup + c.setup
            self.load_calls = self.load_calls + c.load_calls
            self.load_streams = self.load_streams + c.load_streams
            on_chip = np.asarray(c.dram_bytes) <= 0
            self.chip_cycles = self.chip_cycles + np.where(on_chip, c.channel_cycles, 0)
            self.dram_streams = self.dram_streams + np.where(on_chip, 0, c.streams)
            alone = alone + c.alone
        self.most = np.maximum(self.most, box.copies)
        if buf.copy_out:
            self.stored.append(box.copies)
        if buf.copy_in:
            if dram:
                self.first_in += np.where(use, buf.whole_bytes, box.moved_bytes)
            self.first_time = np.maximum(self.first_time, alone)
            self.first_loads[buf.name] = np.maximum(
                self.first_loads.get(buf.name, 0.0), alone
            )
            self.first_fixed = np.maximum(self.first_fixed, moves[0].fixed)
            self.first_latency = np.maximum(self.first_latency, moves[0].latency)
            calls = moves[0].calls / np.maximum(box.copies * buf.directions, 1)
            self.first_calls += calls
            again = (box.copies > 1) & ~use
            self.next_in += np.where(again & dram, box.moved_bytes, 0)
            self.next_calls += np.where(again, calls, 0)
            one = _one_by_one(alone, moves[0].latency, calls)
            self.serial_in.append((np.where(use, 0, box.copies), one))
            self.loads.append((np.where(use, 0, box.copies), alone, moves[0].fixed))
            if use.any():
                self.hops.append(
                    (
                        np.where(use, moves[0].alone, 0),
                        box.copies,
                        np.where(use, box.moved_bytes / want, 0),
                        buf.whole_bytes / np.maximum(moves[-1].calls, 1),
                    )
                )
        if buf.copy_out:
            if dram:
                self.last_out += box.moved_bytes
            self.last_time = np.maximum(self.last_time, alone)
            self.last_fixed = np.maximum(self.last_fixed, moves[0].fixed)
            calls = moves[0].calls / np.maximum(box.copies * buf.directions, 1)
            self.out_serial += _one_by_one(alone, moves[0].latency, calls)
            self.stores.append(
                (box.copies, alone, moves[0].fixed, box.moved_bytes, calls)
            )


@dataclass(frozen=True)
class Moves:
    """What :meth:`LayerModel.evaluate` computes before the slots matter: each
    buffer's tile, the layer's copies and the engines' work (never changed once
    made: each evaluation with other slots reads them)."""

    boxes: dict[str, TileBox]
    traffic: Traffic
    work: Work
    staged: dict[str, np.ndarray]  # array -> staged at each point


def moves(model: LayerModel, ev, n: int, staged: tuple, upper) -> Moves:
    """The tiles and copies of ``model``'s buffers and its engines' work at ``n``
    candidates (``ev`` maps an expression to its values there), with the
    ``staged`` operands staged in ``upper`` where that pays."""
    spec = model.spec
    routes = {}
    traffic = Traffic.zeros(n)
    boxes = {}
    staged_at = {}
    for name, buf in model.buffers.items():
        index = model.levels[name]
        box = boxes[name] = model.tile_box(buf, ev, n)
        if name in model.resident:  # the engines use it at its home: no copy
            staged_at[name] = np.zeros(n, dtype=bool)
            continue
        home = model.kernel.arrays[name].home
        if home:  # the array lives on chip: its copies move no DRAM bytes
            staged_at[name] = no = np.zeros(n, dtype=bool)
            route = Routes.of(spec, spec.memory[home], spec.memory[index])
            # laid out as the array (its descriptors), no bytes through DRAM
            copies = tile_copies(buf, box, no, route.home(), spec.dma)
            copies = replace(copies, dram_bytes=0 * no, dram_writes=0 * no)
            traffic.add(buf, box, no, [copies], dram=False)
            continue
        if index not in routes:
            routes[index] = Routes.of(spec, upper, spec.memory[index])
        use = staged_here(buf, box, name in staged and upper is not None)
        staged_at[name] = use
        route = routes[index]
        copies = [tile_copies(buf, box, use, route, spec.dma)]
        if use.any():
            copies.append(staging_copy(buf, use, route.staging, spec.dma))
        traffic.add(buf, box, use, copies, want=route.upper.want)
    return Moves(boxes, traffic, engines(model, ev, n), staged_at)


def _one_by_one(alone, latency, calls):
    """The time of ``calls`` copies of ``alone`` cycles each (``latency`` of it
    the latency) one after the other on a channel: each call's latency runs
    under the next one's, the last one's shows."""
    return np.maximum(alone - latency, 0) * calls + latency


@dataclass(frozen=True)
class Busy:
    """The layer's predicted cycles, and each engine's busy cycles; ``edges``:
    what the layer before and the layer after may overlap (see
    :mod:`schedules.accel.boundary`): ``fill``, the first tile's loads before
    anything starts, ``tail``, the last tile's compute and stores, the DRAM
    bytes and DMA calls of each (``fill_bytes``, ``tail_bytes``, ``fill_calls``,
    ``tail_calls``), the commands the scalar core issues (``issues``), and per
    copied-in array
    ``in:<array>``, its first copy."""

    cycles: np.ndarray
    engines: dict
    edges: dict = field(default_factory=dict)


def staged_fill(traffic: Traffic, channels: int, ahead: int, fill_bytes, bw):
    """When a staged operand's first tile can compute (zero without one): its
    staging copy lands first (DRAM shares its bandwidth max-min fairly, so while
    it moves its bytes each of the other transfers of the fill moves as many:
    on the channels its tile copies, queued behind it, leave), then the first
    tile's copy and those of the ``ahead`` tiles after it, all waiting for it,
    start together and share the staging level's end (one bank: datacenter's
    staged activations in a 64 B/cycle ``shared`` bank), so they end together."""
    out = 0.0
    for alone, copies, more, nbytes in traffic.hops:
        together = np.minimum(np.maximum(copies - 1, 0), ahead)
        beside = np.maximum(channels - 1 - together, 1)
        lands = traffic.first_fixed + np.minimum(fill_bytes, beside * nbytes) / bw
        out = np.maximum(out, np.where(alone > 0, lands + alone + together * more, 0))
    return out


def overlap(spec: Spec, traffic: Traffic, work: Work, ahead: int = 1) -> Busy:
    """With double buffering the engines overlap: the busiest one's total (DMA:
    the larger of DRAM bytes over its bandwidth and the busiest channel group's
    time, :func:`channel_time`; the scalar core also issues every call), plus the first
    tile's loads before anything starts and the last tile's stores after.

    DRAM as the simulator shares it: the transfers in flight divide its bytes per
    cycle max-min fairly, re-rated whenever one starts or ends, so it never idles
    while one has bytes left: the DRAM time of a stretch is its bytes over the
    bandwidth, whoever issued first (a store no longer holds up the loads beside
    it). Reads and writes also fill their own caps (``read_bytes_per_cycle``,
    ``write_bytes_per_cycle``). The first tile's loads share DRAM with the loads
    of the ``ahead`` tiles after it (their slots are free, so they are issued at
    once) on the channels they leave free, so the fill moves those bytes too, and
    the DRAM time between fill and drain moves only the other bytes. The fill's
    loads start together, so DRAM idles through their set-up and latency (the
    drain's stores likewise).

    What DRAM sharing does not remove, and the model charges: on one channel a
    store waiting for its tile's compute holds up the loads queued behind it (each
    boundary between stored tiles exposes both); with more channels a store holds
    its own and the loads beside it fall behind (:func:`store_windows`); a load
    (store) slower than the compute it overlaps paces the tiles through the slots
    of its buffer. And the last tile's compute waits for its loads, which DRAM
    moves after every byte but the last tile's stores (the loads alone where the
    last tile's slot is free from the start, as with ``ahead + 1`` tiles or
    fewer): where DRAM is the bottleneck that compute is exposed between them."""
    dma = spec.dma
    bw, read_bw, write_bw = _dram_rates(spec)
    issues = traffic.transfers + work.calls
    scalar = work.scalar + issues * spec.scalar.issue_cycles
    # the fill and the drain move their own bytes; the rest moves between them
    free = np.maximum(dma.channels - traffic.first_calls, 0)
    filled = np.minimum(free / np.maximum(traffic.next_calls, 1), ahead)
    beside = traffic.next_in * filled
    fill_bytes = np.minimum(traffic.first_in + beside, traffic.dram_bytes)
    # the fill's loads start together: DRAM idles through their set-up and the
    # latency after their last bytes (likewise the drain's stores); a staged
    # operand's first tiles wait for its staging copy (:func:`staged_fill`)
    fill = np.maximum(traffic.first_time, traffic.first_fixed + fill_bytes / read_bw)
    fill = np.maximum(
        fill, staged_fill(traffic, dma.channels, ahead, fill_bytes, read_bw)
    )
    drain = np.maximum(
        traffic.last_time, traffic.last_fixed + traffic.last_out / write_bw
    )
    writes = np.maximum(traffic.dram_writes - traffic.last_out, 0)
    reads = np.maximum(traffic.dram_bytes - traffic.dram_writes - fill_bytes, 0)
    dram_time = np.maximum(
        np.maximum((reads + writes) / bw, reads / read_bw), writes / write_bw
    )
    dma_time = np.maximum(dram_time, channel_time(spec, traffic, reads, writes))
    dma_time = np.maximum(dma_time, held_channels(spec, traffic, dram_time))
    # one channel: a store waiting for its tile's compute holds up the next
    # tile's loads queued behind it, so each boundary between stored tiles
    # exposes the store and those loads
    # (a load copied every other tile, a weight over two tiles of pixels,
    # counts at every other boundary)
    stored = max(traffic.stored, key=np.sum) if traffic.stored else 0
    most = np.maximum(traffic.most, 1)
    stalls = np.zeros(len(issues))
    if dma.channels == 1:
        ins = sum((t * np.minimum(c, most) / most for c, t in traffic.serial_in), 0.0)
        stalls = np.maximum(stored - 1, 0) * (traffic.out_serial + ins)
    # a tile's load starts when the compute of the tile `ahead + 1` before it has
    # freed its slot: with loads longer than the compute, a tile takes
    # (compute + load) / (ahead + 1); the load shares DRAM with the tile's other
    # transfers, so it takes at least its fixed part and the tile's DRAM bytes
    # the compute a tile's loads feed: the MAC array's, or the vector unit's in
    # a layer that has no MAC work
    compute = np.where(work.mac > 0, work.mac, work.vector)
    tile = compute / np.maximum(traffic.most, 1)
    per_tile = traffic.dram_bytes / np.maximum(traffic.most, 1) / bw
    load = np.zeros(len(issues))
    for copies, alone, fixed in traffic.loads:  # the longest load of every tile
        t = np.maximum(alone, fixed + per_tile)
        load = np.maximum(load, np.where(copies >= traffic.most, t, 0))
    period = np.maximum(tile, (tile + load) / (ahead + 1))
    paced = np.maximum(traffic.most - 1, 0) * (period - tile)
    # likewise a stored buffer's two slots: the compute of its tile after next
    # waits for its store (at no more than the write bandwidth)
    for copies, alone, fixed, nbytes, _ in traffic.stores:
        store = np.maximum(alone, fixed + nbytes / write_bw)
        out_tile = compute / np.maximum(copies, 1)
        wait = np.maximum((store - out_tile) / 2, 0)
        paced = np.maximum(paced, np.maximum(copies - 1, 0) * wait)
    # the loads' slowdown beside a store is a wait for loads too: the larger
    # of the two estimates stands
    paced = np.maximum(paced, store_windows(spec, traffic, work, ahead, filled))
    busiest = np.maximum(
        np.where(
            work.mac > 0,
            np.maximum(work.mac + np.maximum(stalls, paced), work.vector),
            work.vector + paced,
        ),
        np.maximum(dma_time, scalar),
    )
    # DRAM moves nothing into banks that MAC calls fill while they run (one
    # bank below a weight fetched ahead: :func:`schedules.accel.banks.left`).
    # Not the DMA's busy time: DRAM idles meanwhile, and a weight fetched ahead
    # into banks of its own moves then (:mod:`schedules.accel.prefetch`)
    busiest = np.maximum(busiest, dma_time + work.blocked)
    # loads that do not fit under the MAC time they may overlap wait for it
    busiest = np.maximum(busiest, work.mac + np.maximum(dma_time - work.lead, 0))
    busiest = np.maximum(
        busiest, work.vector + np.maximum(dma_time - work.vector_lead, 0)
    )
    # the last tile computes after its loads, and DRAM moves those after every
    # byte but the last tile's stores: where DRAM is the bottleneck the last
    # tile's compute (and the array's fill and skew) is exposed between them.
    # Where the last tile's slot is free from the start its loads go with the
    # fill, before any store: then only the loads precede them
    loaded = traffic.dram_bytes - traffic.dram_writes
    earlier = np.where(traffic.most - 1 <= ahead, 0, writes)
    reads_done = traffic.first_fixed + np.maximum(
        np.maximum((loaded + earlier) / bw, loaded / read_bw), earlier / write_bw
    )
    # the last tile's MAC step, then its output tile's epilogue: that runs once
    # per output tile, after the tile's last step, so where the weights stream
    # in many steps per output tile it is not the layer's vector work over its
    # steps (an MLP's GELU over 16x128 outputs, 2,816 cycles on edge-npu, was
    # charged 176: the fc1 layer ran 21,836 cycles, predicted 19,666)
    last_tile = np.maximum(
        (work.mac - work.once) / most + work.once + work.epi, work.vector / most
    )
    cycles = np.maximum(busiest + fill + drain, reads_done + last_tile + drain)
    # the first tile's init precedes every MAC call and the last tile's epilogue
    # follows them all: the array's time does not hide them (but the first
    # call's held operand shifts in under the init)
    cycles = np.maximum(
        cycles,
        fill
        + work.pro
        + work.mac
        - work.hidden
        + np.maximum(stalls, paced)
        + work.epi
        + drain,
    )
    # with both, each tile's prologue waits behind the epilogue before it
    cycles = np.maximum(
        cycles, fill + work.mac + work.exposed + np.maximum(stalls, paced) + drain
    )
    # one channel, its stores holding up the next tile's loads: the tiles run
    # one after the other, loads, compute and stores (the engine that computes
    # them: a layer without MAC work is the vector unit's)
    cycles = np.maximum(
        cycles,
        fill
        + np.where(work.mac > 0, work.mac, work.vector) * (stalls > 0)
        + stalls
        + drain,
    )
    cycles = np.maximum(
        cycles, _chained(work, dma_time, fill, drain, spec.scalar.queue_depth)
    )
    # MAC and vector work that wait for each other run in turn, not beside
    # each other (schedules.accel.work.in_order)
    cycles = np.maximum(cycles, fill + work.chain + drain)
    edges = {
        "fill": fill,
        "fill_bytes": fill_bytes,
        "tail": last_tile + drain,
        "tail_bytes": traffic.last_out,
        "fill_calls": traffic.first_calls,
        "tail_calls": sum((c[4] for c in traffic.stores), np.zeros(len(issues))),
        "issues": issues,
    }
    edges.update({f"in:{a}": t for a, t in traffic.first_loads.items()})
    return Busy(
        cycles,
        {"mac": work.mac, "vector": work.vector, "dma": dma_time, "scalar": scalar},
        edges,
    )


def channel_time(spec: Spec, traffic: Traffic, reads, writes) -> np.ndarray:
    """The busiest DMA channel's time over the layer, as the simulator picks
    channels at issue (``pc__pick_channel``).

    Each double-buffered stream overlaps the compute, so the transfers spread
    over the channels (less one where a store of every tile waits: it holds its
    channel's queue). With two channels or more, though, the stores to DRAM take
    the last ``channels // 2``, and a load goes to one of those only when no
    store waits in its queue (a store waits at its channel's head for the compute
    that writes its data, and a load queued behind it would too). A stored
    buffer's store waits from its issue until its tile's compute ends: through
    the ``queue_depth`` load calls queued ahead of that compute on each channel
    of the first half and about as many issued while it runs, so a store
    period's load calls all, where they are fewer (on edge-npu's two
    channels the loads then run on channel 0 alone and the stores on channel 1).
    Loads and stores on their own channels share DRAM max-min fairly (while both
    move, each gets half): each side's data moves no faster than its own bytes
    plus as many of the other side's over DRAM's bandwidth, between the fill and
    the drain (``reads`` and ``writes``: the DRAM bytes loaded and stored
    there)."""
    n = spec.dma.channels
    cycles = traffic.channel_cycles
    # a store of every tile waits at the head of a channel's queue, so the rest
    # get one channel fewer: a floor that also stands for the halo's zero fills
    # (copies the model does not count, which queue with the loads)
    waiting = np.zeros(np.shape(cycles), dtype=bool)
    for copies in traffic.stored:
        waiting |= (copies >= traffic.most) & (traffic.most > 1)
    spread = cycles / np.clip(traffic.streams, 1, np.maximum(n - waiting, 1))
    if n < 2:
        return spread
    half = load_channels(spec)
    bw = spec.dram.bytes_per_cycle
    # the stores, on the last half
    out = np.clip(traffic.streams - traffic.load_streams, 1, n // 2)
    setup = traffic.setup - traffic.load_setup
    moving = (writes + np.minimum(reads, writes)) / bw * out
    stores = np.maximum(cycles - traffic.load_cycles, setup + moving) / out
    # the loads issued while a store waits, on the first half
    periods = np.max(np.array(traffic.stored, dtype=float), axis=0, initial=0.0)
    per_period = traffic.load_calls / np.maximum(periods, 1)
    ahead = 2 * spec.scalar.queue_depth * half
    waits = np.where(periods > 1, np.minimum(ahead / np.maximum(per_period, 1), 1), 0)
    width = np.clip(traffic.load_streams, 1, half)
    moving = (reads + np.minimum(writes, reads)) / bw * width
    loads = np.maximum(traffic.load_cycles, traffic.load_setup + moving) / width
    return np.maximum(np.maximum(spread, stores), waits * loads)


def held_channels(spec: Spec, traffic: Traffic, dram_time) -> np.ndarray:
    """The DMA time of a layer whose on-chip copies (from a home, or a staged
    operand's tiles) queue on the channels its DRAM transfers hold.

    DRAM shares its bandwidth among the transfers in flight, so ``k`` streams
    of DRAM copies on ``k`` channels each run ``k`` times their time alone and
    hold their channels for all of ``dram_time``; the on-chip copies then run
    on the ``channels - k`` others, and what those cannot take waits for a
    channel, on all of them once DRAM is done. On edge-npu's two channels a
    weight fetched ahead into its home, copied tile by tile into the MLP's
    buffer beside the two other weights' DRAM loads (hf-llama's second MLP,
    float16: 128 copies of 512 B, 48 to 66 cycles each), added half their
    channel time to the layer's: 12,686 cycles simulated, 8,446 predicted when
    only DRAM's time counted."""
    n = spec.dma.channels
    k = np.minimum(traffic.dram_streams, n)
    rest = np.maximum(traffic.chip_cycles - (n - k) * dram_time, 0)
    return np.where(traffic.chip_cycles > 0, dram_time + rest / n, 0.0)


def _chained(work: Work, dma_time, fill, drain, depth: int):
    """The cycles of a layer whose tiles chain MAC, vector and MAC work (an
    attention: QK^T, softmax, PV). Every engine runs its commands in issue
    order: issued in program order, tile t + 1's QK^T queues behind tile t's
    PV, which waits for tile t's softmax, so the tiles run one after another,
    each its MAC or DMA work (whichever is longer) and its softmax. Where a
    tile's PV takes ``queue_depth`` calls or more, the scalar core stalls on
    the full queue behind them, and the next tile's loads, issued after them,
    start only when the softmax is done: each tile also pays the first loads.
    With the QK^T a tile ahead the vector unit runs the softmaxes back to
    back, after the first tile's QK^T and before the last tile's PV (from
    the start at every iteration of the loops outside the pipelined one)."""
    if not np.any(work.mid):
        return 0.0
    tiles = np.maximum(work.mid_tiles, 1)
    per_tile = np.maximum(work.mac, dma_time) / tiles
    inner = np.maximum(np.minimum(work.ahead, tiles), 1)
    runs = tiles / inner
    pipelined = runs * (fill + per_tile + inner * (work.mid + work.mid_wait)) + drain
    serial = fill + tiles * (per_tile + work.mid) + drain
    serial = serial + np.where(work.stalls, (tiles - 1) * fill, 0)
    return np.where(work.ahead > 1, pipelined, serial)


def load_channels(spec: Spec) -> int:
    """The DMA channels the loads take while stores wait: the first half (with
    two or more, the stores to DRAM take the last half; the runtime's
    ``pc__pick_channel``)."""
    n = spec.dma.channels
    return n - n // 2


def load_rate(spec: Spec) -> float:
    """Bytes a cycle of one DMA load from DRAM alone: the channel's rate, DRAM's
    and its read split (a gather's rows, a weight fetched ahead)."""
    return min(spec.dma.bytes_per_cycle, _dram_rates(spec)[1])


def _dram_rates(spec: Spec) -> tuple[float, float, float]:
    """DRAM's bytes per cycle in all, for reads and for writes (each split capped
    by the total; no split: the total)."""
    dram = spec.dram
    bw = dram.bytes_per_cycle
    read_bw = min(bw, dram.read_bytes_per_cycle or bw)
    return bw, read_bw, min(bw, dram.write_bytes_per_cycle or bw)


def store_windows(
    spec: Spec, traffic: Traffic, work: Work, ahead: int, filled=0.0
) -> np.ndarray:
    """The compute's wait for loads while a stored tile's store runs (two or more
    channels; :func:`overlap` charges one channel's blocking itself).

    A store holds its channels until it ends. The next tiles' loads then have the
    other channels, each call paying its set-up on them (its latency runs
    under the next call's, the last one's shows), and share
    DRAM fairly with the store, which takes all it can while they are in set-up,
    latency or waiting for a free slot: where a tile's loads take longer than its
    compute, the compute falls behind over the window. The lead the loads had
    absorbs it: all ``ahead`` tiles for the first store (the fill gives it), then
    what they win back between stores where they run faster than the compute.
    The loads of the ``filled`` tiles after the first moved with the fill, before
    any store."""
    dma = spec.dma
    n = len(traffic.dram_bytes)
    if dma.channels < 2 or not traffic.stores:
        return np.zeros(n)
    bw, read_bw, write_bw = _dram_rates(spec)
    rate = dma.bytes_per_cycle
    most = np.maximum(traffic.most, 1)
    tile = np.maximum(work.mac, work.vector) / most
    load_calls = np.maximum(traffic.next_calls, 1)
    fixed_in = traffic.first_fixed
    lat = traffic.first_latency
    setup_in = fixed_in - lat
    alone = (
        load_calls * setup_in / dma.channels
        + lat
        + traffic.next_in / min(read_bw, dma.channels * rate)
    )
    full = np.maximum(ahead * tile - fixed_in, 0)
    out = np.zeros(n)
    for copies, _, fixed, nbytes, calls in traffic.stores:
        calls = np.maximum(calls, 1)
        free = np.maximum(dma.channels - calls, 1)
        beside = np.minimum(free, load_calls)
        cap = np.minimum(calls * rate, write_bw)
        shared = np.minimum(cap, bw * calls / (calls + beside))
        load_rate = np.maximum(
            np.minimum(np.minimum(bw - shared, read_bw), beside * rate), 1e-9
        )
        moving = traffic.next_in / load_rate
        loads = load_calls * setup_in / beside + lat + moving
        # the share of the window the loads move bytes in: the rest is the store's
        duty = moving / np.maximum(np.maximum(loads, tile), 1e-9)
        window = fixed + nbytes / (duty * shared + (1 - duty) * cap)
        behind = window * np.maximum(1 - tile / np.maximum(loads, 1e-9), 0)
        period = most / np.maximum(copies, 1) * tile
        won = _won(period - window, tile, alone)
        # the tiles whose loads the fill moved (``filled``) are past any store
        stores = np.maximum(copies - 1 - filled * copies / most, 0)
        out = np.maximum(out, _behind(behind, full, won, stores))
    return np.where((tile > 0) & (traffic.next_in > 0), out, 0)


def _won(between, tile, alone):
    """The lead the loads win back in ``between`` cycles of compute, running a
    tile's loads in ``alone`` cycles against its compute's ``tile``."""
    return (
        np.maximum(between, 0) * np.maximum(tile - alone, 0) / np.maximum(alone, 1e-9)
    )


def _behind(behind, full, won, windows):
    """The compute's wait over ``windows`` stores, each putting the loads
    ``behind`` cycles of compute back, with a lead of ``full`` before the first
    and ``won`` back after each: the lead before window ``j`` is
    ``max(full - j (behind - won), won)``, the wait there ``behind`` less it."""
    won = np.minimum(won, full)
    delta = behind - won
    first = behind - full
    step = np.maximum(delta, 1e-9)
    # from window `sat` on the lead is down to `won`; the one before it waits less
    sat = np.clip(np.ceil(1 - first / step), 0, windows)
    before = sat - 1
    partial = np.where(before >= 0, np.maximum(first + before * delta, 0), 0)
    out = (windows - sat) * delta + np.where(before < windows, partial, 0)
    return np.where(delta > 0, out, windows * np.maximum(first, 0))


def direct_cycles(kernel, layer, spec: Spec) -> float:
    """The cycles of a layer that runs DRAM-direct on the scalar core (no tiling
    of it fits, or its loop nest stays whole), as the simulator's runtime charges
    each instance (``pc_stmt``): the statement's cycles and its operations', the
    slowest latency among the levels it reads, and its bytes at each level's
    rate, each array where it lives (DRAM, or its home on chip). A layer with
    no candidate was charged nothing: the JACOBI loop chain on tiny ran 3,960
    cycles, predicted 0."""
    from accelerator.hardware.roofline import _fix, count_points
    from polyc.ir.expr import ops_count

    if kernel.params:  # the accelerator's sizes are fixed before scheduling
        return 0.0
    sc = spec.scalar
    total = 0.0
    for stmt in layer.stmts:
        ops = ops_count(stmt.body)
        per = sc.statement_cycles + sum(c * sc.cycles[k] for k, c in ops.items())
        nbytes: dict[int, int] = {}
        latency = 0
        for ld, write in ((stmt.target, True), *((r, False) for r in stmt.reads)):
            level = kernel.arrays[ld.array].home
            nbytes[level] = nbytes.get(level, 0) + ld.dtype.itemsize
            if not write:
                latency = max(latency, spec.memory[level].latency_cycles)
        per += latency + sum(
            math.ceil(b / spec.memory[level].bytes_per_cycle)
            for level, b in nbytes.items()
        )
        total += count_points(_fix(stmt.domain, {})) * per
    return float(total)
