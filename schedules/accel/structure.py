"""What the accelerator scheduler's search chooses for a layer, tile sizes aside: a
:class:`Structure` (each statement's engine, the MAC mappings, the order of the
tile loops, the buffers' layouts, slots and phases, the statements issued a tile
ahead), and how a strided convolution's input is stored in phases
(:func:`polyphase`). :mod:`schedules.accel.model` prices a structure;
:mod:`schedules.accel.search` enumerates them.
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.ir.kernel import Statement
from schedules.accel.tilevars import TileVar

#: slots of an operand buffer copied per tile (streamed through a statement's
#: reduction loops, or only read by the layer): the next two tiles load while one
#: is in use (2 is also tried where memory is short)
STREAM_SLOTS = 3


@dataclass(frozen=True)
class Structure:
    """The discrete choices of a layer's schedule (tile sizes aside)."""

    # (stmt, "mac" | "vector" | "scalar" | "fold" | "mac_out": requantized in the
    # MAC array's output path)
    engine: tuple[tuple[str, str], ...]
    groups: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = ()  # stmt -> (m,n,k)
    pitched: tuple[str, ...] = ()  # mac statements whose output rows take A's pitch
    order: tuple[int, ...] = ()  # shared positions, outermost tile loop first
    free: tuple[TileVar, ...] = ()  # the loops to tile
    layouts: tuple[tuple[str, tuple[int, ...]], ...] = ()  # buffer dim orders
    stream_slots: int = STREAM_SLOTS  # slots of operands streamed by reductions
    phased: tuple[str, ...] = ()  # pitched mac statements whose A rows are polyphase
    # statements issued one tile of the innermost tiled shared loop ahead of the
    # others (an attention's QK^T: see schedules.accel.pipeline)
    ahead: tuple[str, ...] = ()
    # mac statements whose calls exchange the operands (C^T = B^T A^T: B in the
    # array's A port; schedules.accel.tensorize.tensorize's ``exchange``)
    exchanged: tuple[str, ...] = ()

    def engine_of(self, stmt: str) -> str:
        return dict(self.engine)[stmt]

    def groups_of(self, stmt: str) -> tuple[tuple[str, ...], ...]:
        return dict(self.groups)[stmt]


@dataclass(frozen=True)
class Polyphase:
    """A pitched MAC statement's A operand stored in phases: along ``dim`` the
    outer fused M iterator moves by ``factor`` rows, so the rows of one residue
    sit together and it moves one row of a phase; dimension ``inner`` (where the
    inner M iterator moves by ``multiple``) is padded to a multiple of
    ``multiple``, so that a phase row is a whole pitch ``padded / multiple`` of
    the inner iterator's steps."""

    array: str
    dim: int
    factor: int
    inner: int
    multiple: int

    def pitch(self, padded):
        return padded / self.multiple


def polyphase(stmt: Statement, groups) -> Polyphase | None:
    """How to store the A operand of a pitched MAC statement in phases so that the
    fused M rows of a strided convolution stop skipping rows (``None`` when its
    outer M iterator moves by one row, or some iterator of a MAC dimension would
    cross phases inside a call)."""
    from schedules.accel.tensorize import contraction

    con = contraction(stmt)
    a = stmt.reads[con.a]
    m = groups[0]
    if len(m) != 2:
        return None
    h, w = m
    dims = [d for d, aff in enumerate(a.index) if aff.coefficient(h)]
    inner = [d for d, aff in enumerate(a.index) if aff.coefficient(w)]
    if len(dims) != 1 or len(inner) != 1 or dims == inner:
        return None
    d, e = dims[0], inner[0]
    f = abs(a.index[d].coefficient(h))
    if f < 2 or any(a.index[d].coefficient(it) % f for g in groups for it in g):
        return None
    return Polyphase(a.array, d, f, e, abs(a.index[e].coefficient(w)))
