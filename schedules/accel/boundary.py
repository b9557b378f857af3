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
previous layer's bytes, as before. The program's predicted cycles are the
layers' sum less these credits, and the fusion search compares layers apart
with their credit (:mod:`schedules.accel.groups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelerator.hardware.spec import Spec
from schedules.accel.layers import Layer
from schedules.accel.search import EDGES, Candidate
from schedules.accel.space import engine_level


def written(layer: Layer) -> frozenset[str]:
    """The arrays the statements of ``layer`` write."""
    return frozenset(s.target.array for s in layer.stmts)


def credit(spec: Spec, prev: Candidate, writes: Iterable[str], nxt: Candidate) -> float:
    """Cycles of ``nxt``'s fill that run under ``prev``'s tail (see the module
    docstring); ``writes``: the arrays the previous layer writes. Zero for
    candidates without boundary figures (an older search cache's)."""
    if len(prev.edges) != len(EDGES) or len(nxt.edges) != len(EDGES):
        return 0.0
    a, b = dict(zip(EDGES, prev.edges)), dict(zip(EDGES, nxt.edges))
    capacity = spec.memory[engine_level(spec)].capacity_bytes
    if prev.sram_bytes + nxt.sram_bytes > capacity:
        return 0.0
    writes = set(writes)
    after = [t for array, t in nxt.first_loads if array in writes]
    waits = max(after, default=0.0)
    tail, fill = a["tail"], b["fill"]
    dram = (a["tail_bytes"] + b["fill_bytes"]) / spec.dram.bytes_per_cycle
    hidden = max(0.0, tail + fill - max(tail + waits, fill, dram))
    # a channel runs its transfers in order: the tail's stores and the loads
    # that wait for them hold theirs, and the other loads share what is left
    free = spec.dma.channels - a["tail_calls"] - len(after)
    loads = max(b["fill_calls"] - len(after), 1.0)
    return hidden * min(1.0, max(free, 0.0) / loads)


def program_cycles(
    spec: Spec, layers: Sequence[tuple[Layer, Candidate | None]]
) -> float:
    """The predicted cycles of consecutive layers (each with its candidate, or
    None where it runs DRAM-direct): their sum less the credit of each boundary
    between two placed layers."""
    total, prev = 0.0, None
    for layer, cand in layers:
        if cand is None:
            prev = None
            continue
        total += cand.cycles
        if prev is not None:
            total -= credit(spec, prev[1], written(prev[0]), cand)
        prev = (layer, cand)
    return total
