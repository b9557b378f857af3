"""DRAM bytes per tensor of a placed run, from the run's DMA trace.

Every copy between DRAM and a chip buffer is one DMA event whose label names its
array and direction (``"<array> in"``, ``"<array> out"``, ``"zero <array>"``
for a halo fill), cut to the runtime's label length. The bytes of the events
whose source or destination is DRAM add up per array; a label cut so short
that several arrays share it goes to the one of them that has a buffer copied
in that direction, or, when that is still several, to all of their names
joined by ``|``. What runs DRAM-direct (scalar statements reading and writing
DRAM) is not a DMA, so it counts under :data:`DIRECT`, and DMA events dropped
past the trace limit are missing (:attr:`TensorDram.complete` says so)::

    compiled = polyc.compile(kernel, config="edge-npu")
    _, report = compiled.run(**inputs)
    td = dram_by_tensor(compiled, report)
    td.bytes["scaled_dot_product_attention_probs"]  # 0 when it stays on chip
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: the runtime's label buffer holds this many characters (PC_NAME less its NUL)
LABEL_CHARS = 31
#: DRAM bytes of statements that ran DRAM-direct (no DMA, no tensor named)
DIRECT = "(DRAM-direct statements)"


@dataclass(frozen=True)
class TensorDram:
    """DRAM bytes (read plus written) per array of one run, every array of the
    kernel listed (0 for one that never left the chip), and the arrays that
    hold attention score matrices."""

    bytes: dict[str, int]
    scores: tuple[str, ...] = ()
    complete: bool = True
    unattributed: dict[str, int] = field(default_factory=dict)

    @property
    def score_bytes(self) -> int:
        """DRAM bytes of the attention score matrices (0: they stay on chip)."""
        return sum(self.bytes.get(a, 0) for a in self.scores)

    def largest(self, n: int = 8) -> list[tuple[str, int]]:
        """The ``n`` arrays that move the most DRAM bytes, most first."""
        moved = [(a, b) for a, b in self.bytes.items() if b]
        return sorted(moved, key=lambda ab: (-ab[1], ab[0]))[:n]

    def lines(self) -> list[str]:
        """For the model report: the largest movers and the score matrices."""
        out = [
            "  DRAM bytes per tensor (largest): "
            + ", ".join(f"{_short(a)} {b:,}" for a, b in self.largest())
        ]
        if self.scores:
            out.append(
                f"  attention score matrices: {self.score_bytes:,} DRAM bytes ("
                + ", ".join(f"{a} {self.bytes.get(a, 0):,}" for a in self.scores)
                + ")"
            )
        if not self.complete:
            out.append(
                "  note: the trace dropped events, so some DMA bytes are missing "
                "from the per-tensor figure; compile with a larger trace_limit"
            )
        return out

    def to_dict(self) -> dict:
        return {
            "bytes": dict(self.bytes),
            "scores": list(self.scores),
            "score_bytes": self.score_bytes,
            "complete": self.complete,
        }


def _short(name: str) -> str:
    """A joined name (arrays whose cut labels the trace cannot tell apart) as
    their common prefix and how many they are."""
    if "|" not in name:
        return name
    parts = name.split("|")
    n = 0
    while all(len(p) > n and p[n] == parts[0][n] for p in parts):
        n += 1
    return f"{parts[0][:n]}* ({len(parts)} arrays)"


def dram_by_tensor(compiled, report) -> TensorDram:
    """DRAM bytes per array of ``report``, a run of ``compiled`` (see the module
    docstring). A DRAM-direct run has no DMA: all its bytes count under
    :data:`DIRECT`."""
    from schedules.accel.attention import score_arrays
    from schedules.accel.memplan import buffers

    kernel = compiled.kernel
    names = list(kernel.arrays)
    per: Counter = Counter({a: 0 for a in names})
    directions = {"in": set(), "out": set()}
    for b in buffers(kernel.schedule):
        if b.copy_in:
            directions["in"].add(b.array)
        if b.copy_out:
            directions["out"].add(b.array)
    labels = _labels(names, directions)
    dram = report.levels[0].name
    dma = 0
    for ev in report.events:
        if ev.kind != "dma" or dram not in (ev.src, ev.dst) or ev.src == ev.dst:
            continue
        owner = labels.get(ev.label)
        if owner is None:
            continue  # not a copy of a kernel array
        per[owner] += ev.amount
        dma += ev.amount
    rest = report.dram_bytes - dma
    if rest > 0 and report.events_dropped == 0:
        per[DIRECT] += rest
    scores = tuple(a for a in score_arrays(kernel) if a in per)
    return TensorDram(dict(per), scores, complete=report.events_dropped == 0)


def _labels(names: list[str], directions: dict[str, set]) -> dict[str, str]:
    """Each DMA label the code generator writes -> the array (or arrays) it
    names, cut as the runtime cuts it."""
    owners: dict[str, list[str]] = {}
    for a in names:
        for label, way in ((f"{a} in", "in"), (f"{a} out", "out"), (f"zero {a}", "in")):
            owners.setdefault(label[:LABEL_CHARS], []).append((a, way))
    out = {}
    for label, cands in owners.items():
        arrays = list(dict.fromkeys(a for a, _ in cands))
        if len(arrays) > 1:
            copied = [a for a, way in cands if a in directions[way]]
            arrays = list(dict.fromkeys(copied)) or arrays
        out[label] = arrays[0] if len(arrays) == 1 else "|".join(arrays)
    return out
