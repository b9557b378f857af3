"""Weights fetched ahead: a later layer's weights moved on chip while earlier
layers compute.

On edge-npu some layers leave DRAM idle for much of their time (bound by the
MAC array or the vector unit: attention, a normalisation, a CNN's first
stage), while others are bound by DRAM, streaming weights the array waits for
(a transformer's MLP, a CNN's last stage). Each layer alone is near its own
bound, and the model is not: the engine bound lets any layer's transfers run
during any other's compute. Moving later weights on chip during the earlier
layers' compute, into SRAM they leave free, wins part of that.

:func:`prefetch` rewrites the program: a copy of the weight ``W`` into a new
intermediate ``W_pf`` runs first, and every reader reads ``W_pf`` instead::

    PF0: W_pf[o, c, kh, kw] = W[o, c, kh, kw]        (first in program order)
    ...
    S33: out[...] += x[...] * W_pf[o, c, kh, kw]     (was W)

the same values, so it is exact and always legal (``W`` is an input, never
written). ``W_pf`` gets a home below the intermediates' homes
(:mod:`schedules.accel.homes`): its reader uses it in place, with no DMA of
its own. The copy is marked ``@prefetch`` (:func:`prefetch_dma`), a layer of its
own that the code generator runs as DMA chunks of whole rows of ``W``'s first
dimension, each issued just before the layer the scheduler put it under
(``polyc.ir.prefetches.mark``), on the DMA's last channel, which the layers'
loads take last (edge-npu's stores take it): DRAM's bandwidth is shared with
the layer's own transfers. The reader's engines wait for the copy only if it
has not arrived (the runtime's byte-range hazards).

What to fetch is decided once the program is placed without it
(:func:`ahead`, from the layers' chosen candidates):

- a weight qualifies when one layer alone reads it, that layer's predicted DMA
  time exceeds its engines', and the weight has :data:`MIN_BYTES` or more;
- the weights that save the most go first (a layer saves at most its DMA
  time beyond its engines'), each in the time the layers before its reader
  leave DMA idle, the nearest first, when they leave at least :data:`COVER`
  of it (the rest goes just before the reader): a layer's
  predicted cycles less twice its DMA time (a chunk takes half of DRAM's
  bandwidth while the layer's transfers move, so they run up to twice as long:
  a layer whose DMA is busy half its time or more takes no chunk);
- its home lives from the layer of its first chunk to its reader's (its
  *span*, :func:`polyc.ir.prefetches.spans`): it fits below the
  intermediates' homes and the zero block, above the chosen buffers of the
  layers of its span before its reader, clear of the copies whose spans meet
  it, with the copies live in any layer at most :data:`SHARE` of the level
  (:func:`_home`). The layers outside its span lay their buffers over its
  bytes (:mod:`schedules.accel.memplan`), the code generator binds it before
  its first chunk and frees it after its reader, and the runtime orders the
  chunks after the last use of the bytes they overwrite. Until the eleventh
  session a copy's home was the kernel's, above every layer's buffers.

The scheduler then places the rewritten program again (its layers' searches
come from the cache: the search plans each layer in the room below the
intermediates' homes, :func:`schedules.accel.memplan.below_homes`, but a
reader of a copy, which plans below the copies live in it) and keeps it
when it is predicted :data:`MARGIN` faster; not at all where the weights
could not save that much (their readers' DMA time beyond their engines'). The cost model charges each copy
what its chunks' layers leave no idle time for, and the time each chunk takes
from the first loads it is issued beside (:func:`annotate`). It does
not see the vector unit's and the DMA's share of a bank: the copies' homes
may take a bank the layers' buffers had, and a layer's transfers into banks
its engines use then run slower than predicted (hf-convnext in float32 on
edge-npu, predicted 0.6% faster, ran 4.5% slower), hence the margin.
"""

from __future__ import annotations

import dataclasses
import os

from accelerator.hardware.spec import Spec
from polyc.errors import ArgumentError, ScheduleError
from polyc.ir import affine, prefetches, tree
from polyc.ir.expr import Load
from polyc.ir.kernel import Kernel, Role, Statement, make_domain
from polyc.ir.prefetches import MARK, ORIGIN, copies
from schedules import stree
from schedules.accel import homes
from schedules.accel.layers import top_children
from schedules.accel.routes import Route
from schedules.accel.search import edge_figures
from schedules.accel.terms import load_rate
from schedules.common import step
from schedules.legality import carry

#: the share of the engines' level the fetched weights may take, below the
#: intermediates' homes
SHARE = 0.5
#: the predicted gain below which the program placed with weights fetched ahead
#: is not kept: their homes may take a bank the layers' buffers had, and the
#: cost model does not charge the vector unit's and the DMA's share of a bank
MARGIN = 0.02
#: overrides :data:`MARGIN` (the fuzzer sets it below zero on some cases, so
#: that every fetch that fits is kept and the path runs often)
MARGIN_ENV = "POLYC_PREFETCH_MARGIN"
#: the smallest weight worth a fetch of its own (a bias is moved with its tiles)
MIN_BYTES = 4096
#: the share of a weight's transfer that the DMA time the layers before its
#: reader leave idle must cover for it to be fetched ahead; the rest is issued
#: just before its reader, which waits for it (:func:`annotate` charges it).
#: All of it (1.0) kept hf-llama's second MLP weight out on edge-npu in float16
#: once its attention's head-merge copies, a layer that left DMA idle, were
#: folded away (:mod:`schedules.accel.fold`): 50,058 -> 53,988 cycles; with half,
#: 51,174
COVER = 0.5


def prefetch(kernel: Kernel, array: str) -> Kernel:
    """``kernel`` with input ``array`` copied into a new intermediate
    ``<array>_pf`` first in program order, every reader reading the copy (see
    the module docstring). The copy has no home yet: :func:`ahead` gives it
    one (:func:`schedules.accel.homes.home`), and :func:`prefetch_dma` its
    chunks.

    Raises:
        ArgumentError: ``array`` is not an input of the kernel, or the sizes
            are symbolic.
    """
    op = "prefetch"
    arr = kernel.arrays.get(array)
    if arr is None or arr.role != Role.INPUT:
        what = "not an array" if arr is None else f"its {arr.role}"
        raise ArgumentError(
            f"{op}: {array!r} cannot be fetched ahead because it is {what} of "
            f"{kernel.name}: only the caller's inputs (weights) are read as they "
            "are from start to end. Pass an input."
        )
    if kernel.params:
        raise ArgumentError(
            f"{op}: {array} cannot be fetched ahead because the sizes are symbolic "
            f"({', '.join(kernel.params)}). Specialize the kernel first."
        )
    name = _fresh(kernel.arrays, f"{array}_pf")
    its = tuple(f"i{d}" for d in range(arr.ndim))
    index = tuple(affine.var(i) for i in its)
    stmt_name = _fresh({s.name for s in kernel.statements}, "PF0", numbered=True)
    bounds = [(affine.const(0), extent) for extent in arr.shape]
    copy = Statement(
        stmt_name,
        its,
        make_domain(stmt_name, its, bounds, kernel.params),
        Load(name, index, arr.dtype),
        Load(array, index, arr.dtype),
        origin=f"{ORIGIN} {array}",
    )

    def read_copy(node):
        if isinstance(node, Load) and node.array == array:
            return Load(name, node.index, node.dtype)
        return None

    stmts = [copy] + [
        dataclasses.replace(s, body=s.body.map(read_copy))
        if any(ld.array == array for ld in s.reads)
        else s
        for s in kernel.statements
    ]
    arrays = dict(kernel.arrays)
    arrays[name] = dataclasses.replace(arr, name=name, role=Role.TEMP, home=0)
    first = stree.from_isl(tree.initial_schedule([(stmt_name, copy.domain, its)]))
    root = stree.Sequence_((first, *top_children(kernel)))
    return kernel.replace(
        arrays=arrays,
        statements=tuple(stmts),
        schedule=stree.to_isl(root),
        program_schedule=None,
        history=kernel.history + (step(op, array),),
    )


def _chunks(kernel: Kernel, array: str, copy: str, chunks, op: str):
    """``chunks`` of weight ``array`` checked (statements of the kernel,
    positive rows adding up to its first dimension), or the whole weight before
    the first reader of its ``copy``.

    Raises:
        ArgumentError: for an unknown statement or rows that do not add up.
    """
    rows = prefetches.rows(kernel.arrays[array])
    names = [s.name for s in kernel.statements]
    if chunks is None:
        first = next(
            s.name for s in kernel.statements if any(ld.array == copy for ld in s.reads)
        )
        return [(first, rows)]
    out = [(str(b), r) for b, r in chunks]
    bad = [b for b, r in out if b not in names or not isinstance(r, int) or r < 1]
    if bad or sum(r for _, r in out) != rows:
        raise ArgumentError(
            f"{op}: the chunks {out} of {array} are not statements of "
            f"{kernel.name} with positive rows adding up to its {rows} rows. "
            "Pass (statement, rows) pairs that cover the first dimension."
        )
    return out


def _fresh(taken, base: str, numbered: bool = False) -> str:
    """``base``, or ``base`` with a number (``PF0``, ``PF1``...) not in ``taken``."""
    if not numbered and base not in taken:
        return base
    stem = base.rstrip("0123456789")
    n = 0 if numbered else 1
    while f"{stem}{n}" in taken:
        n += 1
    return f"{stem}{n}"


# the marks ----------------------------------------------------------------------


def prefetch_dma(kernel: Kernel, band: str, chunks=None) -> Kernel:
    """Run the copy of ``band`` (a :func:`prefetch` copy) as DMA chunks: mark it
    ``@prefetch``. ``chunks``: pairs ``(statement, rows)`` of the weight's first
    dimension, in order, each issued before the layer that runs the statement;
    by default the whole weight before its first reader. The loops are
    unchanged, so it is always legal.

    Raises:
        ScheduleError: unknown band, or its statement is not a prefetch copy.
        ArgumentError: the chunks are not statements with rows that cover the
            weight's first dimension.
    """
    op = "prefetch_dma"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    names = stree.statements(nb.node())
    if len(names) != 1 or names[0] not in copies(kernel):
        raise ScheduleError(
            f"{op}: band {band!r} cannot run as a prefetch because it does not run "
            "one prefetch copy (schedules.accel.prefetch.prefetch makes them). "
            "Mark the band of a PF statement."
        )
    if any(a.startswith(MARK) for a in nb.attrs):
        return kernel
    weight, copy = copies(kernel)[names[0]]
    chunks = tuple(_chunks(kernel, weight, copy, chunks, op))
    before, rows = zip(*chunks)
    text = prefetches.mark(names[0], before, rows)
    named = stree.Named(nb.name, nb.members, nb.attrs + (text,), nb.band)
    new = stree.replace_at(root, path, lambda _n: named.node())
    return kernel.with_schedule(stree.to_isl(new), step(op, band, chunks=chunks))


# cost --------------------------------------------------------------------------


def cycles(spec: Spec, nbytes: int) -> float:
    """Cycles of one prefetch alone: set-up, its bytes at its rate
    (:func:`rate`), the read latency."""
    return (
        spec.dma.setup_cycles + nbytes / rate(spec, nbytes) + spec.dram.latency_cycles
    )


def rate(spec: Spec, nbytes: float) -> float:
    """Bytes per cycle of a copy of ``nbytes`` from DRAM into a home on chip:
    DRAM's read rate and the DMA channel's, and at most what the banks of
    the home's level it covers take (:meth:`schedules.accel.routes.Route.rates`:
    300 bytes into one bank of an eighth of a byte per cycle took 2,401
    cycles, fuzz seed 964 case 285, and the model charged 151)."""
    home = spec.memory[homes.resident_level(spec)]
    into = Route.between(spec, spec.dram, home).rates(nbytes, 1)[0]
    return float(min(load_rate(spec), into))


def annotate(kernel: Kernel, spec: Spec, choices) -> None:
    """Each layer that is one marked prefetch copy: the cycles of its chunks
    that the layers they go before leave no idle DMA time for, and the time a
    chunk takes from the first loads of the layer it is issued with: DRAM
    shares its bandwidth, so they move at half their rate while it runs and
    the layer waits their DRAM time once more (hf-mobilenetv2 on edge-npu,
    float16: a chunk of 67,648 B beside a layer's first load of 16 KiB, which
    took 2,064 cycles instead of 1,040, and the layer ran 970 longer)
    (``LayerChoice.extra_cycles``; the layers' candidates are chosen)."""
    found = prefetches.chunks(kernel)
    if not found:
        return
    at = {s.name: i for i, lc in enumerate(choices) for s in lc.layer.stmts}
    idle = [_idle(lc.candidate) for lc in choices]
    fills = [_fill(spec, lc.candidate) for lc in choices]
    exposed: dict[str, float] = {}
    for ch in found:
        nbytes = (
            prefetches.span(kernel, ch)[1] * kernel.arrays[ch.weight].dtype.itemsize
        )
        t = spec.dma.setup_cycles + nbytes / rate(spec, nbytes)
        j = at.get(ch.before)
        hidden = 0.0
        if j is not None:
            # issued with the layer's first loads, the chunk takes half of
            # DRAM from them: the layer waits what they move meanwhile
            delay = min(t, fills[j])
            fills[j] -= delay
            hidden = min(t - delay, idle[j])
            idle[j] -= hidden
        exposed[ch.stmt] = exposed.get(ch.stmt, 0.0) + t - hidden
    pairs = copies(kernel)
    for lc in choices:
        stmts = lc.layer.stmts
        if len(stmts) != 1 or stmts[0].name not in exposed:
            continue
        weight = pairs[stmts[0].name][0]
        nbytes = kernel.arrays[weight].nbytes()
        n = sum(1 for ch in found if ch.stmt == stmts[0].name)
        lc.extra_cycles = max(float(spec.dma.setup_cycles), exposed[stmts[0].name])
        lc.note = (
            f"prefetch: {weight} ({nbytes:,} bytes) into its home on chip in {n} "
            f"DMA chunk{'s' if n > 1 else ''} under earlier layers, "
            f"{cycles(spec, nbytes):,.0f} cycles alone"
        )


# the choice --------------------------------------------------------------------


def ahead(kernel: Kernel, spec: Spec, layers, chosen, predicted: float):
    """``(kernel, notes)`` with the weights worth fetching ahead fetched and
    marked (see the module docstring), given the layers placed without them,
    their chosen candidates and the program's predicted cycles; None when none
    is worth it, or they could not save :data:`MARGIN` of those cycles (their
    readers' DMA time beyond their engines' at most: the program is not
    placed again). The rewritten program takes the dependences the program
    has computed (:func:`schedules.legality.carry`): only those through the
    weights and their copies are computed again."""
    level = homes.resident_level(spec)
    if level is None or kernel.params or copies(kernel):
        return None
    from schedules.accel.memplan import ZERO_BYTES, below_homes, round_up

    mem = spec.memory[level]
    align = mem.alignment_bytes
    # the copies' homes go below the intermediates' and the zero block above
    # the layers' buffers (memplan.zero_block)
    top = below_homes(spec, kernel).memory[level].capacity_bytes // align * align
    top -= round_up(ZERO_BYTES, align)
    picked, saving = _pick(kernel, spec, layers, chosen, top)
    if not picked or saving < margin() * predicted:
        return None
    notes, program, changed = {}, kernel, set()
    for weight, chunks, offset in picked:
        kernel = prefetch(kernel, weight)
        stmt, copy = kernel.statements[0].name, kernel.statements[0].target.array
        kernel = homes.home(kernel, copy, mem.name, offset, spec)
        kernel = prefetch_dma(kernel, stmt, chunks)  # its band is named after it
        changed |= {weight, copy}
        notes[stmt] = (
            f"it fetches {weight} ({kernel.arrays[weight].nbytes():,} bytes) ahead "
            f"into its home on chip in {len(chunks)} DMA chunk(s), while the layers "
            "before its reader compute"
        )
    # the copies and their readers changed the accesses to the weights alone,
    # the copies first: the rest of the dependences are the program's
    return carry(program, kernel, changed), notes


def margin() -> float:
    """:data:`MARGIN`, or ``$POLYC_PREFETCH_MARGIN`` where it is set."""
    text = os.environ.get(MARGIN_ENV)
    return MARGIN if text is None else float(text)


def shifted(kernel: Kernel, cuts, wide):
    """The fusion cuts and wide spans of a program, for the same program with
    ``kernel``'s prefetch copies first (each top-level position that many
    later)."""
    n = len(copies(kernel))
    return {c + n for c in cuts}, tuple(tuple(p + n for p in w) for w in wide)


def _pick(kernel: Kernel, spec: Spec, layers, chosen, top: int):
    """The weights to fetch ahead, their chunks and their homes' offsets, and
    the most they save: a weight one layer alone
    reads, where that layer's DMA is busier than its engines, fetched in the
    DMA time the layers before it leave idle when they leave at least
    :data:`COVER` of it (the rest before its reader's layer, or the one before
    it) and its copy fits below ``top`` over its span (:func:`_home`). The
    weights that save the most go first
    (a layer's saving is at most its DMA time beyond its engines'); each takes
    the idle time nearest before its reader, leaving the earlier layers' to
    the weights read earlier. A chunk is whole rows of the weight's first
    dimension; the chunks are issued in program order. With a margin below
    zero (:func:`margin`: the fuzzer's) every weight one layer alone reads is
    fetched that fits, whatever it saves: what the idle time does not cover
    goes before the reader's layer, or the one before it."""
    force = margin() < 0
    mem = spec.memory[homes.resident_level(spec)]
    align = mem.alignment_bytes
    share = int(mem.capacity_bytes * SHARE)
    readers: dict[str, set[int]] = {}
    for i, layer in enumerate(layers):
        for s in layer.stmts:
            for ld in (*s.reads, *s.gathers):
                readers.setdefault(ld.array, set()).add(i)
    idle = [_idle(c) for c in chosen]
    excess, wanted = {}, []
    for i, (layer, cand) in enumerate(zip(layers, chosen)):
        if cand is None:
            continue
        busy = dict(cand.engines)
        compute = max((v for k, v in busy.items() if k != "dma"), default=0.0)
        excess[i] = busy.get("dma", 0.0) - compute
        for a in layer.arrays:
            arr = kernel.arrays[a]
            if (
                arr.role == Role.INPUT
                and arr.ndim
                and readers.get(a) == {i}
                and (force or arr.nbytes() >= MIN_BYTES)
            ):
                t = arr.nbytes() / rate(spec, arr.nbytes())
                wanted.append((i, a, spec.dma.setup_cycles + t))
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, size)
    out, saving = [], 0.0
    while wanted:
        i, weight, t = max(wanted, key=lambda w: (min(w[2], excess[w[0]]), -w[0]))
        wanted.remove((i, weight, t))
        size = -(-kernel.arrays[weight].nbytes() // align) * align
        short = excess[i] <= 0 or sum(idle[:i]) < COVER * t
        if short and not force:
            continue
        pieces, need, left = [], t, list(idle)
        for j in range(i - 1, -1, -1):  # the nearest idle time first
            got = min(left[j], need)
            if got > 0:
                left[j] -= got
                need -= got
                pieces.append((j, got))
            if need <= 0:
                break
        if need > 0:  # the rest before the reader or the layer before
            pieces.append((max(i - 1, 0), need))
        first = min(j for j, _ in pieces)
        offset = _home(chosen, placed, first, i, size, top, share, align)
        if offset is None:
            continue
        idle = left
        placed.append((first, i, offset, size))
        chunks = _rows(kernel, weight, layers, sorted(pieces), t)
        out.append((i, weight, chunks, offset))
        saving += max(0.0, min(t, excess[i]))
        excess[i] -= t
    return [(w, chunks, off) for _, w, chunks, off in sorted(out)], saving


def _home(chosen, placed, first: int, last: int, size: int, top, share, align):
    """The highest offset below ``top`` for a copy of ``size`` bytes live from
    layer ``first`` to its reader ``last``: above the chosen buffers of the
    layers before its reader in that span (they keep their candidates), clear
    of the copies ``placed`` whose spans meet it, with the copies live in any
    layer of the span taking at most ``share`` bytes; None when there is no
    such room. Its reader plans again below it
    (:func:`schedules.accel.search.capacities`)."""
    floor = max((c.sram_bytes for c in chosen[first:last] if c is not None), default=0)
    floor = -(-int(floor) // align) * align
    meet = [(lo, hi, off, n) for lo, hi, off, n in placed if lo <= last and first <= hi]
    for layer in range(first, last + 1):
        live = sum(n for lo, hi, _, n in meet if lo <= layer <= hi)
        if live + size > share:
            return None
    offset = (top - size) // align * align
    while offset >= floor:
        clash = [
            off for _, _, off, n in meet if off < offset + size and offset < off + n
        ]
        if not clash:
            return offset
        offset = (min(clash) - size) // align * align
    return None


def _rows(kernel: Kernel, weight: str, layers, pieces, t: float):
    """``pieces`` (layer index, cycles) of a transfer of ``t`` cycles as chunks
    of whole rows of ``weight``'s first dimension, each before the layer's
    first statement."""
    rows = prefetches.rows(kernel.arrays[weight])
    chunks, done, cum = [], 0, 0.0
    for n, (j, got) in enumerate(pieces):
        cum += got
        upto = rows if n == len(pieces) - 1 else min(rows, round(rows * cum / t))
        if upto > done:
            chunks.append((layers[j].stmts[0].name, upto - done))
            done = upto
    return tuple(chunks)


def _fill(spec: Spec, cand) -> float:
    """The DRAM time of a layer's first loads (its fill's bytes at the load
    rate; zero for a layer without boundary figures)."""
    figures = edge_figures(cand)
    return 0.0 if figures is None else figures["fill_bytes"] / load_rate(spec)


def _idle(cand) -> float:
    """The DMA time a layer's candidate leaves a chunk fetched ahead: its
    cycles less twice its DMA time (a chunk takes half of DRAM's bandwidth
    while the layer's own transfers move, DRAM being shared fairly, so they
    may run twice as long)."""
    if cand is None:
        return 0.0
    return max(0.0, cand.cycles - 2 * dict(cand.engines).get("dma", 0.0))


__all__ = [
    "MARGIN",
    "ahead",
    "annotate",
    "cycles",
    "margin",
    "prefetch",
    "prefetch_dma",
    "shifted",
]
