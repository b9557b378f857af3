"""What a placed run kept where, and what it moved: the data of the report's memory
map and per-tensor DMA table.

- **Memory map**: each ``@scope`` mark of the schedule allocates its buffers at
  fixed offsets of a level while its subtree runs. A block's time is the span of
  the run's events that belong to the scope's statements (an event belongs to the
  statement :func:`accelerator.sim.attribution.owners` gives it: a copy-in to the
  compute it feeds). The peak is the largest sum of the blocks live at one
  instant; the simulator's own peak (``LevelUse.peak_bytes``) is shown beside it.
- **DMA per tensor**: every DMA event's label names its array and direction
  (:mod:`polyc.studies.tensor_dram`); per array the bytes read from and written to
  DRAM, the transfers, the bytes moved between on-chip levels, and the reuse
  factor: DRAM bytes over the minimum (an input read once, an output written once,
  an intermediate never, when it can stay on chip).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.ir import marks as pm
from polyc.ir.kernel import Role


@dataclass(frozen=True)
class Block:
    """One buffer's allocation: ``offset``/``bytes`` in its level, live from
    cycle ``start`` to ``end`` (both 0 when no event of its scope ran)."""

    name: str
    array: str
    offset: int
    bytes: int
    start: int
    end: int


@dataclass(frozen=True)
class LevelMap:
    name: str
    capacity: int
    blocks: tuple[Block, ...]
    peak_bytes: int
    peak_at: int
    simulated_peak: int


def memory_map(compiled, report) -> list[LevelMap]:
    """The on-chip levels' blocks over time (see the module docstring); empty for
    a DRAM-direct compile."""
    from accelerator.sim.attribution import owners
    from polyc.ir.treeview import tree_nodes

    kernel = compiled.kernel
    nodes = tree_nodes(kernel.schedule)
    stmts = [s.name for s in kernel.statements]
    own = owners(report.events, {s: i for i, s in enumerate(stmts)})
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for ev, g in zip(report.events, own):
        if g < 0 or ev.kind == "wait":
            continue
        s = stmts[g]
        first[s] = min(first.get(s, ev.start), ev.start)
        last[s] = max(last.get(s, ev.end), ev.end)
    arrays = _buffer_arrays(kernel.schedule)
    per_level: dict[int, list[Block]] = {}
    for node in nodes:
        if node.kind != "scope":
            continue
        mark = _mark_at(kernel.schedule, node.path)
        mine = [s for s in node.stmts if s in first]
        start = min((first[s] for s in mine), default=0)
        end = max((last[s] for s in mine), default=0)
        for a in pm.ScopeMark.parse(mark).allocations:
            per_level.setdefault(a.level_index, []).append(
                Block(a.name, arrays.get(a.name, ""), a.offset, a.bytes, start, end)
            )
    out = []
    for index, blocks in sorted(per_level.items()):
        level = compiled.spec.memory[index]
        peak, at = _peak(blocks)
        sim = next((m.peak_bytes for m in report.levels if m.name == level.name), 0)
        out.append(
            LevelMap(level.name, level.capacity_bytes, tuple(blocks), peak, at, sim)
        )
    return out


def _mark_at(schedule, path) -> str:
    from polyc.ir import tree

    return tree.mark_name(tree.at(schedule, path)) or ""


def _buffer_arrays(schedule) -> dict[str, str]:
    from polyc.ir import tree

    out = {}
    for text in tree.marks(schedule):
        if pm.kind(text) == "buffer":
            b = pm.BufferMark.parse(text)
            out[b.name] = b.array
    return out


def _peak(blocks: list[Block]) -> tuple[int, int]:
    """The largest sum of blocks live at one instant, and the first such cycle."""
    edges = []
    for b in blocks:
        if b.end > b.start:
            edges += [(b.start, 1, b.bytes), (b.end, 0, -b.bytes)]
    edges.sort()
    live = peak = at = 0
    for t, _, delta in edges:
        live += delta
        if live > peak:
            peak, at = live, t
    return peak, at


@dataclass(frozen=True)
class TensorTraffic:
    """One array's data movement in a run (see the module docstring)."""

    array: str
    role: str
    nbytes: int
    dram_read: int
    dram_written: int
    transfers: int
    on_chip: int
    minimum: int

    @property
    def dram(self) -> int:
        return self.dram_read + self.dram_written

    @property
    def reuse(self) -> float | None:
        """DRAM bytes over the minimum (1.0: each element moved once)."""
        return self.dram / self.minimum if self.minimum else None


def dma_table(compiled, report) -> list[TensorTraffic]:
    """Per array of the kernel, most DRAM bytes first (see the module docstring)."""
    from polyc.studies.tensor_dram import _labels
    from schedules.accel.memplan import buffers

    kernel = compiled.kernel
    names = list(kernel.arrays)
    directions: dict[str, set] = {"in": set(), "out": set()}
    for b in buffers(kernel.schedule):
        if b.copy_in:
            directions["in"].add(b.array)
        if b.copy_out:
            directions["out"].add(b.array)
    labels = _labels(names, directions)
    dram = report.levels[0].name
    moved = {a: [0, 0, 0, 0] for a in names}  # read, written, transfers, on chip
    for ev in report.events:
        owner = labels.get(ev.label) if ev.kind == "dma" else None
        if owner is None or owner not in moved:
            continue
        row = moved[owner]
        row[2] += 1
        if ev.src == dram and ev.dst != dram:
            row[0] += ev.amount
        elif ev.dst == dram and ev.src != dram:
            row[1] += ev.amount
        else:
            row[3] += ev.amount
    out = []
    for a in kernel.arrays.values():
        try:
            nbytes = a.nbytes({})
        except Exception:  # a symbolic size the run fixed: no minimum to compare
            nbytes = 0
        minimum = {
            Role.INPUT: nbytes,
            Role.OUTPUT: nbytes,
            Role.INOUT: 2 * nbytes,
        }.get(a.role, 0)
        r, w, n, chip = moved[a.name]
        out.append(
            TensorTraffic(a.name, a.role.name.lower(), nbytes, r, w, n, chip, minimum)
        )
    out.sort(key=lambda t: (-t.dram, -t.transfers, t.array))
    return out
