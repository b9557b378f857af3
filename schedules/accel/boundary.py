"""Consecutive layers overlap at their boundary.

The memory planner (:func:`schedules.accel.memplan.plan_overlapped`) keeps a
layer's buffers off the bytes of the layer before (and of the one before that:
a one-tile layer in between does not shield it) wherever they fit together,
so the next layer's first loads wait for no write-after-read hazard on the
previous layer's bytes: they run while the previous layer's last tile computes and
its stores drain. What they really depend on still waits: a load of an array the
previous layer writes waits for its store to reach DRAM.

The cost model predicts each layer alone, its first tile's loads (the *fill*)
before anything starts and its last tile's compute and stores (the *tail*) after
the rest. At a boundary the next layer's fill, except the copies of what the
previous layer writes, hides under the previous layer's tail:

    waits   = the longest first copy of an array prev writes (it follows the tail)
    credit  = tail + fill - max(tail + waits, fill, DRAM bytes of both / bandwidth)

that is min(tail, fill - waits) where DRAM has room for both, scaled by the
share of the DMA channels the tail's stores and the waiting loads leave to the
other loads (a channel runs its transfers in order). Zero where the two layers'
buffers do not fit the engines' level together: the planner then reuses the
previous layer's bytes, as before.

The next layer's first loads are issued as soon as the scalar core has issued
the previous layer's last command, which may be long before its tail: an
engine queues ``queue_depth`` commands, so a layer that issues no more than
that is issued all at once, when its own first loads are, and otherwise its
last ``queue_depth`` commands' stretch remains (:func:`issued`). In a program
(:func:`credits`) the tail above is that *window* where it is longer, with the
DRAM bytes the previous layer moves in it, on the load channels its own loads
leave (on edge-npu's one, behind them); and where the previous layer was
issued at once, the window also holds the one before it (the planner keeps a
layer's buffers off the two layers before it where the three fit). On
datacenter hf-vit's first attention (float32) loaded its key and value
projections' weights (347 cycles of fill) under the layer norm and the query
projection, issued at once with the one-operation bias layer before it, whose
tail (17 cycles) was all the credit had counted: the model over-predicted
hf-vit by 10%.

The program's predicted cycles are the layers' sum less these credits, and
the fusion search compares layers apart with their credit alone
(:mod:`schedules.accel.groups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelerator.hardware.spec import Spec
from schedules.accel.layers import Layer
from schedules.accel.search import Candidate, edge_figures
from schedules.accel.space import engine_level
from schedules.accel.terms import load_channels


def written(layer: Layer) -> frozenset[str]:
    """The arrays the statements of ``layer`` write."""
    return frozenset(s.target.array for s in layer.stmts)


def credit(
    spec: Spec,
    prev: Candidate,
    writes: Iterable[str],
    nxt: Candidate,
    window: tuple[float, float] | None = None,
) -> float:
    """Cycles of ``nxt``'s fill that run under ``prev``'s tail (see the module
    docstring); ``writes``: the arrays the previous layer writes. ``window``:
    ``(cycles, DRAM bytes)`` of the stretch before ``prev``'s end in which the
    scalar core has issued ``nxt``'s first loads, where it is longer than the
    tail (:func:`credits`). Zero for candidates without boundary figures (an
    older search cache's)."""
    a, b = edge_figures(prev), edge_figures(nxt)
    if a is None or b is None or not _fit(spec, (prev, nxt)):
        return 0.0
    writes = set(writes)
    after = [t for array, t in nxt.first_loads if array in writes]
    waits = max(after, default=0.0)
    tail, tail_bytes, fill = a["tail"], a["tail_bytes"], b["fill"]
    if window is not None and window[0] > tail:
        # before the tail, the loads go on the channels the previous layer's
        # own loads leave (in order on each: behind them on edge-npu's one)
        share = (load_channels(spec) - a["fill_calls"]) / max(b["fill_calls"], 1.0)
        share = min(max(share, 0.0), 1.0)
        tail += (window[0] - tail) * share
        tail_bytes += max(window[1] - tail_bytes, 0.0) * share
    dram = (tail_bytes + b["fill_bytes"]) / spec.dram.bytes_per_cycle
    hidden = max(0.0, tail + fill - max(tail + waits, fill, dram))
    # a channel runs its transfers in order: the tail's stores and the loads
    # that wait for them hold theirs, and the other loads share what is left
    free = spec.dma.channels - a["tail_calls"] - len(after)
    loads = max(b["fill_calls"] - len(after), 1.0)
    return hidden * min(1.0, max(free, 0.0) / loads)


def credits(
    spec: Spec, layers: Sequence[tuple[Layer, Candidate | None]]
) -> list[float]:
    """The credit of each of consecutive layers (each with its candidate, or
    None where it runs DRAM-direct) at its boundary with the one before: zero
    for the first and after a DRAM-direct one. Each boundary's window is the
    previous layer's stretch after the scalar core has issued its last command
    (:func:`issued`); where that layer issues all its commands at once, they
    and the next layer's first loads are issued when its own first loads were,
    so the window also holds the one before it (one layer further back at
    most: the memory planner keeps a layer's buffers off the two before it,
    where the three fit together)."""
    out: list[float] = []
    # per layer since the last DRAM-direct one: layer, candidate, its cycles
    # less its credit, and its own window
    chain: list[tuple[Layer, Candidate, float, tuple[float, float]]] = []
    for layer, cand in layers:
        if edge_figures(cand) is None:
            out.append(0.0)
            chain = []
            continue
        got = 0.0
        if chain:
            prev_layer, prev, net, window = chain[-1]
            if len(chain) > 1 and _at_once(spec, prev):
                before = chain[-2]
                if _fit(spec, (before[1], prev, cand)):
                    window = (net + before[3][0], prev.dram_bytes + before[3][1])
            got = credit(spec, prev, written(prev_layer), cand, window)
        out.append(got)
        net = cand.cycles - got
        chain.append((layer, cand, net, issued(spec, cand, net, got)))
    return out


def issued(spec: Spec, cand: Candidate, net: float, hidden: float = 0.0):
    """``(cycles, DRAM bytes)``: the stretch before a layer's end after the
    scalar core has issued its last command (so it issues the next layer's
    first loads), of ``net`` cycles in the program (its cycles less its
    credit, the ``hidden`` part of its fill). An engine queues
    ``queue_depth`` commands: a layer that issues no more runs all of its
    ``net`` cycles with them issued, and otherwise the last ``queue_depth`` of
    its commands, at least its tail."""
    e = edge_figures(cand)
    fill, tail = e["fill"], e["tail"]
    if _at_once(spec, cand):
        moved = cand.dram_bytes - e["fill_bytes"] * min(hidden / max(fill, 1.0), 1.0)
        return max(net, tail), moved
    share = spec.scalar.queue_depth / max(e["issues"], 1.0)
    cycles = tail + max(net - tail, 0.0) * share
    middle = max(cand.dram_bytes - e["fill_bytes"] - e["tail_bytes"], 0.0)
    rate = middle / max(cand.cycles - fill - tail, 1.0)
    return cycles, e["tail_bytes"] + min(rate * (cycles - tail), middle)


def _at_once(spec: Spec, cand: Candidate) -> bool:
    """Whether the scalar core issues all of a layer's commands without
    stalling: no more than an engine queues."""
    return edge_figures(cand)["issues"] <= spec.scalar.queue_depth


def _fit(spec: Spec, cands) -> bool:
    """Whether the candidates' buffers fit the engines' level together."""
    capacity = spec.memory[engine_level(spec)].capacity_bytes
    return sum(c.sram_bytes for c in cands) <= capacity


def program_cycles(
    spec: Spec,
    layers: Sequence[tuple[Layer, Candidate | None]],
    windows: bool = True,
) -> float:
    """The predicted cycles of consecutive layers (each with its candidate, or
    None where it runs DRAM-direct): their sum less the credit of each boundary
    between two placed layers (:func:`credits`; with ``windows=False`` the
    previous layer's tail alone, as the fusion search compares pieces)."""
    placed = sum(cand.cycles for _, cand in layers if cand is not None)
    if windows:
        return placed - sum(credits(spec, layers))
    total, prev = placed, None
    for layer, cand in layers:
        if cand is not None and prev is not None:
            total -= credit(spec, prev[1], written(prev[0]), cand)
        prev = None if cand is None else (layer, cand)
    return total
