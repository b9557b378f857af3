"""The memory planner: byte offsets for the on-chip buffers of every level.

Each buffer asks for ``slots x slot_bytes`` in one level for a lifetime (an
interval of layer positions: buffers of different layers never live at once).
Offsets come from interval-graph fit: buffers sorted by lifetime start and
decreasing size take an offset, aligned to the level's ``alignment_bytes``, that
no buffer with an overlapping lifetime uses. On a level of several banks
(block-partitioned: bank ``offset // (capacity / banks)``, as the simulator's banks,
docs/accelerator.md) the offset is bank-aware: a slot that fits in one bank never
straddles two, and of the offsets that fit the planner takes the one whose slots
share the fewest banks with the slots of the other buffers live at the same time
(the MAC array reads its inputs and weights at once, and writes its
accumulators), then the one that takes no more free banks than leaves one for
each buffer still to place, then the one whose own slots share the fewest banks
(the DMA fills one slot of a double buffer while an engine reads another), the
lowest such offset on a tie (:func:`_bank_fit`). A double buffer whose slots each
fit in a bank may so sit across a bank boundary, one slot on either side. When
the bank rule leaves no gap for some buffer, the plan is packed again by plain
first fit (lowest offset). A level that cannot hold what is live at once
raises :class:`~polyc.errors.PlacementError` with the level, its capacity and
the buffers with their sizes.

A level whose copies zero-fill halos keeps a small block of zeros (the source of
those fills) at its top for the whole kernel.

Homes (:mod:`schedules.accel.homes`) sit above all of this: an intermediate's
for the whole kernel (the level is cut below it, :func:`below_homes`), a
weight's copy fetched ahead only over its span (:func:`polyc.ir.prefetches.spans`):
the layers of the span have a *ceiling* at its offset, the others plan over its
bytes.

:func:`replan` plans every ``@buffer`` of a schedule and writes the result as one
``@scope`` mark per layer (the code generator allocates a layer's buffers there).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import islpy as isl

from accelerator.hardware.spec import MemoryLevel, Spec
from polyc.errors import PlacementError
from polyc.ir import marks as pm
from polyc.ir import prefetches, tree
from polyc.ir.marks import Allocation
from polyc.ir.prefetches import copies
from schedules.accel import isltree

#: bytes of the zero block a level keeps for zero-filling copies (one element of
#: any dtype, repeated with stride 0; the alignment rounds it up)
ZERO_BYTES = 8


@dataclass(frozen=True)
class Request:
    """One buffer to place: ``slots`` slots of ``slot_bytes`` in level
    ``level_index``, live from layer ``start`` to layer ``end`` (inclusive)."""

    name: str
    array: str
    level_index: int
    slots: int
    slot_bytes: int
    start: int
    end: int
    #: filled on chip rather than by DMA (an accumulator, an intermediate): the
    #: engines stream it while the DMA fills the layer's other buffers
    produced: bool = False
    #: the buffers one MAC call reads or writes with this one (its other
    #: operands, its accumulator): a call stretches by its tightest bank's
    #: bytes, so these keep off its banks first
    partners: frozenset[str] = frozenset()
    #: the banks of its level that the homes its MAC calls use occupy (an
    #: accumulator on chip for the whole kernel, above the planned bytes): kept
    #: off as its partners' are
    partner_banks: frozenset[int] = frozenset()

    @property
    def bytes(self) -> int:
        return self.slots * self.slot_bytes


def round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def zero_block(spec: Spec, level_index: int) -> Allocation:
    """The zero block of a level: its last aligned bytes."""
    level = spec.memory[level_index]
    size = round_up(ZERO_BYTES, level.alignment_bytes)
    return Allocation(
        f"{pm.ZERO}{level.name}", level_index, level.capacity_bytes - size, size
    )


def plan(
    spec: Spec,
    requests: Sequence[Request],
    zero_levels: Sequence[int] = (),
    bank_aware: bool = True,
    ceiling: Mapping[tuple[int, int], int] | None = None,
) -> dict[str, Allocation]:
    """Offsets for ``requests`` (see the module docstring; ``bank_aware=False``:
    plain first fit, the plan to compare the bank-aware one with). ``ceiling``:
    per (level, layer), where that layer's buffers end when it is below the
    level's end (the home of a weight fetched ahead, live in that layer).

    Raises:
        PlacementError: when the buffers live at once in a level do not fit.
    """
    ceiling = ceiling or {}
    for req in requests:  # what is live at once must fit, before any packing
        capacity = _room(spec, req, zero_levels, ceiling)
        live = [
            r
            for r in requests
            if r.level_index == req.level_index
            and r.start <= req.end
            and req.start <= r.end
            and r is not req
        ]
        align = spec.memory[req.level_index].alignment_bytes
        if sum(round_up(r.bytes, align) for r in [*live, req]) > capacity:
            _overflow(spec, req, live, capacity)
    if bank_aware:
        try:
            return _pack(spec, requests, zero_levels, banked=True, ceiling=ceiling)
        except _NoGap:
            pass  # the bank rule is a preference (fewer conflicts): pack without it
    try:
        return _pack(spec, requests, zero_levels, banked=False, ceiling=ceiling)
    except _NoGap as gap:
        _overflow(spec, gap.req, gap.live, gap.capacity)
    raise AssertionError  # pragma: no cover


#: how many layers before its own a layer's buffers keep off, where they all
#: fit together: two, so that a one-tile layer in between (a bias
#: initialisation) does not put the next layer's loads back behind the reads of
#: the layer before it
BACK = 2


def plan_overlapped(
    spec: Spec,
    requests: Sequence[Request],
    zero_levels: Sequence[int] = (),
    bank_aware: bool = True,
    ceiling: Mapping[tuple[int, int], int] | None = None,
) -> dict[str, Allocation]:
    """Offsets for ``requests`` of one layer each (``start == end``) where each
    layer's buffers also keep off the bytes of the layers before (up to
    :data:`BACK`), in every level where those layers fit together: the next
    layer's first loads then wait for no write-after-read hazard on the bytes
    the previous layers still read, and its first tiles may run beside the
    previous layer's last ones (what really depends on the previous layer still
    waits, through DRAM's hazards). A (layer, level) whose extended lifetime
    leaves some buffer no gap keeps off one layer fewer, down to none (planned
    as before, one at a time). A buffer kept off the layers before that finds
    no gap under the bank rule takes the first gap that keeps it off them (the
    bank rule is a preference): in linear-stack in float32 on datacenter, the
    first layer's buffers spread over local's eight banks left the second
    layer's 3 x 32 KiB weight buffer no gap of whole-bank slots, and it gave
    up keeping off, so its first loads waited for the first layer's last MAC
    call (6,540 cycles, 5,859 with the first gap). The bank-aware packing (:func:`plan`) is tried
    first, with overlap and then without; first fit with overlap only where the
    bank rule finds no gap even without it. With nothing left to extend this is
    :func:`plan`: it never fails where :func:`plan` succeeds.

    ``ceiling``: as :func:`plan`'s.

    Raises:
        PlacementError: as :func:`plan`.
    """
    ceiling = ceiling or {}
    sizes: dict[tuple[int, int], int] = {}
    for r in requests:
        align = spec.memory[r.level_index].alignment_bytes
        key = (r.end, r.level_index)
        sizes[key] = sizes.get(key, 0) + round_up(r.bytes, align)
    extend: dict[tuple[int, int], int] = {}  # (layer, level) -> layers kept off
    for layer, level in sizes:
        room = _capacity(spec, level, zero_levels)
        room = min(room, ceiling.get((level, layer), room))
        if any(r.start != r.end for r in requests if r.end == layer):
            continue
        total, back = sizes[(layer, level)], 0
        while back < min(BACK, layer):
            total += sizes.get((layer - back - 1, level), 0)
            room = min(room, ceiling.get((level, layer - back - 1), room))
            if total > room:
                break
            back += 1
        if back:
            extend[(layer, level)] = back
    if bank_aware:  # the bank rule is a preference, as in plan
        got = _extended(spec, requests, zero_levels, extend, True, ceiling)
        if got is not None:
            return got
        try:  # today's bank-aware plan rather than overlap without banks
            return _pack(spec, requests, zero_levels, banked=True, ceiling=ceiling)
        except _NoGap:
            pass
    got = _extended(spec, requests, zero_levels, extend, False, ceiling)
    if got is not None:
        return got
    return plan(spec, requests, zero_levels, bank_aware, ceiling)


def _extended(spec, requests, zero_levels, extend, banked: bool, ceiling):
    """The plan with the requests of each (layer, level) of ``extend`` live from
    that many layers before, keeping off one layer fewer where a buffer finds no
    gap; None when nothing is left to extend or the gap is not theirs."""
    extend = dict(extend)
    while extend:
        extended = [
            replace(r, start=r.start - extend.get((r.end, r.level_index), 0))
            for r in requests
        ]
        try:
            return _pack(spec, extended, zero_levels, banked=banked, ceiling=ceiling)
        except _NoGap as gap:
            layer, level = gap.req.end, gap.req.level_index
            # the buffer's own layer, else the nearest later layer kept off it
            keys = [
                (layer + j, level)
                for j in range(BACK + 1)
                if extend.get((layer + j, level), -1) >= j
            ]
            if not keys:
                return None
            key = keys[0]
            extend[key] -= 1
            if not extend[key]:
                del extend[key]
    return None


class _NoGap(Exception):
    def __init__(self, req, live, capacity):
        self.req, self.live, self.capacity = req, live, capacity


def _pack(
    spec, requests, zero_levels, banked: bool, ceiling=None
) -> dict[str, Allocation]:
    """Place by lifetime and decreasing size (``banked``: bank-aware, see the
    module docstring; else plain first fit; ``ceiling``: as :func:`plan`'s).

    Raises:
        _NoGap: naming the first buffer that finds no gap.
    """
    out: dict[str, Allocation] = {}
    # by layer (a lifetime's end: a layer's buffers before those of the next
    # one that keep off its bytes), then decreasing size
    order = sorted(requests, key=lambda r: (r.level_index, r.end, -r.bytes, r.name))
    placed: list[tuple[Request, int]] = []
    for i, req in enumerate(order):
        level = spec.memory[req.level_index]
        capacity = _room(spec, req, zero_levels, ceiling or {})
        live = [
            (r, off)
            for r, off in placed
            if r.level_index == req.level_index
            and r.start <= req.end
            and req.start <= r.end
        ]
        size = round_up(req.bytes, level.alignment_bytes)
        if banked and level.banks > 1:
            # banks are shared out among the buffers of one layer; those of the
            # layer before only take their bytes (they overlap at the boundary)
            later = sum(
                r.level_index == req.level_index and r.end == req.end
                for r in order[i + 1 :]
            )
            mine = [(r, off) for r, off in live if r.end == req.end]
            taken = _taken(live, level.alignment_bytes)
            offset = _bank_fit(req, mine, later, level, capacity, taken)
            if offset is None and req.start < req.end:
                # kept off the layers before (plan_overlapped): the bank rule
                # is a preference, keeping off them is the point
                offset = _first_fit(req, live, level.alignment_bytes)
        else:
            offset = _first_fit(req, live, level.alignment_bytes)
        if offset is None or offset + size > capacity:
            raise _NoGap(req, [r for r, _ in live], capacity)
        placed.append((req, offset))
        out[req.name] = Allocation(req.name, req.level_index, offset, size)
    return out


def _capacity(spec: Spec, level_index: int, zero_levels) -> int:
    if level_index in zero_levels:
        return zero_block(spec, level_index).offset
    return spec.memory[level_index].capacity_bytes


def _room(spec: Spec, req: Request, zero_levels, ceiling) -> int:
    """Where ``req``'s bytes must end: its level's capacity, or below the
    ceiling of any layer of its lifetime."""
    room = _capacity(spec, req.level_index, zero_levels)
    for layer in range(req.start, req.end + 1):
        room = min(room, ceiling.get((req.level_index, layer), room))
    return room


def _taken(live: list[tuple[Request, int]], align: int) -> list[tuple[int, int]]:
    return sorted((off, off + round_up(r.bytes, align)) for r, off in live)


def _free(offset: int, size: int, taken: list[tuple[int, int]]) -> bool:
    return all(hi <= offset or offset + size <= lo for lo, hi in taken)


def _first_fit(req: Request, live: list[tuple[Request, int]], align: int) -> int:
    size = round_up(req.bytes, align)
    taken = _taken(live, align)
    offset = 0
    while True:
        clash = next(
            ((lo, hi) for lo, hi in taken if lo < offset + size and offset < hi), None
        )
        if clash is None:
            return offset
        offset = round_up(clash[1], align)


def _slot_banks(req: Request, offset: int, bank: int, align: int) -> list[range]:
    """The banks each slot of ``req`` at ``offset`` occupies. A slot after the
    first starts less than one alignment unit early when its buffer was aligned
    down to put it at a bank boundary; those few bytes do not count."""
    out = []
    for i in range(req.slots):
        lo, hi = offset + i * req.slot_bytes, offset + (i + 1) * req.slot_bytes
        early = -lo % bank  # bytes before the next bank boundary
        if i and 0 < early < min(align, hi - lo):
            lo += early
        out.append(range(lo // bank, (hi - 1) // bank + 1))
    return out


def _bank_fit(
    req: Request,
    live: list[tuple[Request, int]],
    later: int,
    level: MemoryLevel,
    capacity: int,
    taken: list[tuple[int, int]] | None = None,
) -> int | None:
    """The bank-aware offset of ``req`` (see the module docstring), None if no
    offset keeps each one-bank slot in one bank. ``later`` buffers live beside it
    are still to be placed: it spreads its slots over free banks only while a free
    bank is left for each of them.

    The offsets are ranked by the banks its slots share with its partners' (the
    other buffers of its MAC calls), then with other buffers' (two
    engines, or the array's two operands, at once), then by the free banks it
    takes beyond its share, then by the banks its own slots share (the DMA filling
    one slot beside the engine reading another, at the DMA's lower rate), then low
    offset first. ``taken``: the byte ranges to keep off (by default those of
    ``live``)."""
    align, bank = level.alignment_bytes, level.bank_size
    size = round_up(req.bytes, align)
    if taken is None:
        taken = _taken(live, align)
    others = [b for r, off in live for b in _slot_banks(r, off, bank, align)]
    partner = {
        i
        for r, off in live
        if r.name in req.partners or req.name in r.partners
        for b in _slot_banks(r, off, bank, align)
        for i in b
    } | set(req.partner_banks)
    used = {i for b in others for i in b}
    hot, cold = set(), set()  # banks of buffers produced on chip / filled by DMA
    for r, off in live:
        for b in _slot_banks(r, off, bank, align):
            (hot if r.produced else cold).update(b)
    spare = max(1, level.banks - len(used) - later)
    candidates = {0}
    candidates.update(round_up(hi, align) for _, hi in taken)
    for k in range(1, level.banks):
        candidates.add(round_up(k * bank, align))
        if req.slot_bytes <= bank:  # slot j first in bank k
            for j in range(1, req.slots):
                at = k * bank - j * req.slot_bytes
                candidates.add(max(0, at // align * align))
    best = None
    for offset in sorted(candidates):
        if offset + size > capacity or not _free(offset, size, taken):
            continue
        mine = _slot_banks(req, offset, bank, align)
        if req.slot_bytes <= bank and any(len(b) > 1 for b in mine):
            continue
        own = sum(
            len(set(a) & set(b)) for i, a in enumerate(mine) for b in mine[i + 1 :]
        )
        cross = sum(len(set(a) & set(b)) for a in mine for b in others)
        mixed = len({i for b in mine for i in b} & (hot if not req.produced else cold))
        new = len({i for b in mine for i in b} - used)
        clash = len({i for b in mine for i in b} & partner)
        key = (clash, mixed, cross, max(0, new - spare), own, offset)
        if best is None or key < best:
            best = key
    return None if best is None else best[-1]


def _overflow(spec: Spec, req: Request, live: list[Request], capacity: int):
    level = spec.memory[req.level_index]
    everyone = sorted([*live, req], key=lambda r: -r.bytes)
    listing = ", ".join(
        f"{r.name} ({r.array}) {r.bytes:,} B"
        + (f" = {r.slots} x {r.slot_bytes:,} B" if r.slots > 1 else "")
        for r in everyone
    )
    total = sum(round_up(r.bytes, level.alignment_bytes) for r in everyone)
    raise PlacementError(
        f"place: the buffers do not fit in level {level.name} because it holds "
        f"{capacity:,} bytes and {len(everyone)} buffers live at once ask for "
        f"{total:,} bytes: {listing}. Use smaller tiles, one slot instead of two, "
        "or another level."
    )


# the @scope marks of a schedule ---------------------------------------------------


_BUFFER_NAME = re.compile(r"@buffer (\w+):")


def buffer_names(schedule: isl.Schedule) -> list[str]:
    """Names of the buffers of a schedule, in tree order."""
    return [
        m.group(1)
        for text in tree.marks(schedule)
        if (m := _BUFFER_NAME.match(text)) is not None
    ]


def buffers(schedule: isl.Schedule) -> list[pm.BufferMark]:
    """Every ``@buffer`` mark of a schedule, in tree order."""
    return [_buffer(t) for t in tree.marks(schedule) if pm.kind(t) == "buffer"]


def below_homes(spec: Spec, kernel, ahead: bool = True, skip=None) -> Spec:
    """``spec`` with each level that holds homes of ``kernel`` (intermediates on
    chip for the whole kernel, :mod:`schedules.accel.homes`) ending where they
    begin: what the planner may give the layers' buffers. ``ahead=False``: but
    the homes of weights fetched ahead (:mod:`schedules.accel.prefetch`), which
    take room the layers of their span leave (the search plans without them,
    but for a layer that reads one: :func:`schedules.accel.search.capacities`).
    ``skip``: the arrays whose homes to leave out (by default as ``ahead``
    says)."""
    if kernel is None:
        return spec
    if skip is None:
        skip = set() if ahead else {c for _, c in copies(kernel).values()}
    low: dict[int, int] = {}
    for arr in kernel.arrays.values():
        if arr.home and arr.name not in skip:
            low[arr.home] = min(low.get(arr.home, arr.home_offset), arr.home_offset)
    if not low:
        return spec
    memory = tuple(
        _below(m, low[i]) if i in low else m for i, m in enumerate(spec.memory)
    )
    return replace(spec, memory=memory)


def _below(level, end: int):
    """``level`` cut to the bytes below ``end`` with the simulator's banks: the
    planner's bank of an offset is ``offset // bank_size``, as the simulator's,
    so the cut keeps the banks' size, its last bank partly below the homes."""
    end = min(end, level.capacity_bytes)
    if level.banks <= 1:
        return replace(level, capacity_bytes=end)
    size = level.bank_size
    return replace(level, capacity_bytes=end, banks=-(-end // size), bank_bytes=size)


def check(spec: Spec, schedule: isl.Schedule, kernel=None) -> None:
    """Raise what :func:`replan` would raise for ``schedule``, without planning
    (placements that plan only at the last one check each layer's fit with this,
    at a cost that does not grow with the layers already planned).

    :func:`replan` gives every buffer the lifetime of its layer alone, so the
    buffers live at once in a level are those of one layer: it fails exactly
    when, in some layer and level, they add up (each rounded up to the level's
    alignment) to more than the level holds, less its zero block when some
    buffer of the kernel in that level is clamped (the packing never fails
    otherwise: first fit lays one layer's buffers end to end). Then
    :func:`replan` runs, to raise its own error.

    Raises:
        PlacementError: as :func:`replan`.
    """
    texts = _layer_marks(schedule)
    clean = schedule
    if any(pm.kind(t) == "scope" for layer in texts for t in layer):
        clean = _drop_scopes(schedule)
        texts = _layer_marks(clean)  # as replan sees it
    spec, ceiling = below_live_homes(spec, clean, kernel)
    per_layer = [
        [_buffer(t) for t in layer if pm.kind(t) == "buffer"] for layer in texts
    ]
    zero_levels = {b.level_index for bufs in per_layer for b in bufs if b.clamp}
    for layer, bufs in enumerate(per_layer):
        total: dict[int, int] = {}
        for b in bufs:
            align = spec.memory[b.level_index].alignment_bytes
            size = round_up(b.slots * b.slot_bytes, align)
            total[b.level_index] = total.get(b.level_index, 0) + size
        room = {level: _capacity(spec, level, zero_levels) for level in total}
        if any(
            size > min(room[level], ceiling.get((level, layer), room[level]))
            for level, size in total.items()
        ):
            replan(spec, schedule, kernel=kernel)  # raises, naming the buffers
            return  # pragma: no cover - replan raised


def _layer_marks(schedule: isl.Schedule) -> list[list[str]]:
    """The text of every mark of each layer (:func:`isltree.layers`), in tree
    order, with isl's own traversal (see :func:`polyc.ir.tree.marks`)."""
    first = schedule.get_root().child(0)
    if first.get_type() == isl.schedule_node_type.sequence:
        tops = [first.child(i) for i in range(first.n_children())]
    else:
        tops = [first]
    mark = isl.schedule_node_type.mark
    out: list[list[str]] = []
    for top in tops:
        texts: list[str] = []

        def visit(node: isl.ScheduleNode, texts=texts) -> bool:
            if node.get_type() == mark:
                texts.append(node.mark_get_id().get_name())
            return True

        top.foreach_descendant_top_down(visit)
        out.append(texts)
    return out


@functools.lru_cache(maxsize=8192)
def _buffer(text: str) -> pm.BufferMark:
    """A ``@buffer`` mark's text parsed (once per text: :func:`check` reads the
    marks of every layer at each layer's placement)."""
    return pm.BufferMark.parse(text)


def replan(
    spec: Spec, schedule: isl.Schedule, bank_aware: bool = True, kernel=None
) -> isl.Schedule:
    """Plan every buffer (each lives for its layer) and write one ``@scope`` mark
    per layer that has buffers (``bank_aware``: see :func:`plan`). With
    ``kernel``, the buffers of the operands and the accumulator of each MAC
    call are partners (:class:`Request`).

    Raises:
        PlacementError: when a layer's buffers do not fit.
    """
    schedule = _drop_scopes(schedule)
    spec, ceiling = below_live_homes(spec, schedule, kernel)
    layer_paths = isltree.layers(schedule)
    requests, per_layer = [], {}
    zero_levels = set()
    partners, homes = _partners(schedule, kernel) if kernel is not None else ({}, {})
    for path, node in tree.walk_paths(schedule):
        name = tree.mark_name(node)
        if not name or pm.kind(name) != "buffer":
            continue
        b = pm.BufferMark.parse(name)
        layer = layer_paths.index(isltree.layer_top(schedule, path))
        requests.append(
            Request(
                b.name,
                b.array,
                b.level_index,
                b.slots,
                b.slot_bytes,
                layer,
                layer,
                produced=not b.copy_in,
                partners=frozenset(partners.get(b.name, ())),
                partner_banks=_home_banks(spec, kernel, b, homes.get(b.name, ())),
            )
        )
        per_layer.setdefault(layer, []).append(b.name)
        if b.clamp:
            zero_levels.add(b.level_index)
    allocs = plan_overlapped(spec, requests, sorted(zero_levels), bank_aware, ceiling)
    for layer in sorted(per_layer, reverse=True):
        scope = pm.ScopeMark(tuple(allocs[n] for n in per_layer[layer]))
        node = tree.at(schedule, layer_paths[layer])
        schedule = node.insert_mark(isl.Id(scope.text())).get_schedule()
    for level in sorted(zero_levels):
        z = zero_block(spec, level)
        schedule = (
            schedule.get_root()
            .child(0)
            .insert_mark(isl.Id(pm.ScopeMark((z,)).text()))
            .get_schedule()
        )
    return schedule


def below_live_homes(spec: Spec, schedule: isl.Schedule, kernel):
    """``(spec, ceiling)``: ``spec`` cut below the homes of ``kernel`` that live
    for the whole kernel (:func:`below_homes`), and per (level, layer) of
    ``schedule`` where the layer's buffers end below the homes of the weights
    fetched in chunks that are live in it (:func:`polyc.ir.prefetches.spans`:
    from the layer of their first chunk to their last reader's). Outside its
    span a copy's bytes hold other layers' buffers."""
    if kernel is None:
        return spec, {}
    lazy = {ch.copy for ch in prefetches.chunks(kernel)}
    spec = below_homes(spec, kernel, skip=lazy)
    if not lazy:
        return spec, {}
    tops = [
        isltree.statements_of(tree.at(schedule, p)) for p in isltree.layers(schedule)
    ]
    return spec, prefetches.ceilings(kernel, tops)


def _home_banks(spec: Spec, kernel, b: pm.BufferMark, arrays) -> frozenset[int]:
    """The banks of ``b``'s level that the homes of ``arrays`` occupy."""
    level = spec.memory[b.level_index]
    if level.banks <= 1:
        return frozenset()
    out: set[int] = set()
    for name in arrays:
        arr = kernel.arrays[name]
        if arr.home == b.level_index:
            first, last = arr.home_offset, arr.home_offset + arr.nbytes() - 1
            out.update(range(first // level.bank_size, last // level.bank_size + 1))
    return frozenset(out)


def _partners(schedule: isl.Schedule, kernel):
    """``(partners, homes)``: per buffer, the other buffers some MAC call reads
    or writes with it (per ``@tensorize`` mark, the innermost enclosing buffer
    of its statement's target and of its two operands), and the arrays of
    those calls that no buffer encloses and have a home (on chip for the
    whole kernel: their bytes are the home's)."""
    out: dict[str, set[str]] = {}
    homes: dict[str, set[str]] = {}
    names = {s.name: s for s in kernel.statements}
    enclosing: list[tuple[tuple, pm.BufferMark]] = []
    for path, node in tree.walk_paths(schedule):
        name = tree.mark_name(node)
        if not name:
            continue
        kind = pm.kind(name)
        if kind == "buffer":
            enclosing.append((tuple(path), pm.BufferMark.parse(name)))
            continue
        if kind != "tensorize":
            continue
        tm = pm.TensorizeMark.parse(name)
        stmt = names.get(tm.stmt)
        if stmt is None:
            continue
        arrays = {stmt.target.array, stmt.reads[tm.a].array, stmt.reads[tm.b].array}
        here = tuple(path)
        mine: dict[str, str] = {}
        for at, b in enclosing:  # walk order: outer buffers first
            if b.array in arrays and here[: len(at)] == at:
                mine[b.array] = b.name
        group = set(mine.values())
        housed = {a for a in arrays - set(mine) if kernel.arrays[a].home}
        for b in group:
            out.setdefault(b, set()).update(group - {b})
            homes.setdefault(b, set()).update(housed)
    return out, homes


def _drop_scopes(schedule: isl.Schedule) -> isl.Schedule:
    """The schedule without its ``@scope`` marks (deleted last first, so that the
    paths of the others stay valid)."""
    paths = [
        path
        for path, node in tree.walk_paths(schedule)
        if (name := tree.mark_name(node)) and pm.kind(name) == "scope"
    ]
    for path in reversed(paths):
        schedule = tree.at(schedule, path).delete().get_schedule()
    return schedule
