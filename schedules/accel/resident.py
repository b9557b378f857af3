"""Which arrays a layer's engines use at their home, in place (no buffer, no
copy), and the questions that decide it: whether a MAC reads an array through
a window (:func:`windowed`) and whether a later statement reads what the layer writes
(:func:`read_later`). The cost model (:mod:`schedules.accel.model`) and the
placement (:mod:`schedules.accel.scheduler`) ask the same function, so what
the model charges is what the scheduler places. Homes themselves are chosen by
:mod:`schedules.accel.homes`."""

from __future__ import annotations

from polyc.ir.kernel import Kernel
from schedules.accel.layers import Layer
from schedules.accel.structure import Structure, polyphase


def windowed(statements) -> set[str]:
    """The arrays a MAC operand of ``statements`` reads other than one iterator
    per dimension, as it is (a matrix product's and a 1x1 convolution's are
    plain): a window (``x[h + kh]``), a stride or an offset reads a box that may
    leave the array, which a buffer clips and zero-fills and a home in place
    cannot."""
    from schedules.accel.tensorize import contraction

    out = set()
    for stmt in statements:
        con = contraction(stmt)
        if con is None:
            continue
        for k in (con.a, con.b):
            ld = stmt.reads[k]
            for aff in ld.index:
                names = aff.names()
                if (
                    aff.const
                    or not aff.is_linear
                    or len(names) > 1
                    or (names and aff.coefficient(next(iter(names))) != 1)
                ):
                    out.add(ld.array)
    return out


def resident_arrays(kernel: Kernel, layer: Layer, st: Structure, at) -> frozenset:
    """The arrays of ``layer`` its engines use at their home in the engines'
    level (:mod:`schedules.accel.homes`; ``at`` maps each array to the level
    its engines reach it in): no buffer, no copy. An array the structure lays out otherwise (a
    layout, phases, a pitch) keeps a buffer, copied from the home, and so does
    one the layer writes and no later layer reads."""
    relaid = {a for a, _ in st.layouts}
    for name in st.phased:
        ph = polyphase(kernel.statement(name), st.groups_of(name))
        if ph is not None:
            relaid.add(ph.array)
    for name in st.pitched:
        stmt = kernel.statement(name)
        relaid.add(stmt.target.array)
        relaid.update(ld.array for ld in stmt.reads)
    # an intermediate the layer makes and uses up keeps the tile buffers it
    # streams through (a MAC output under its epilogue): a home pays where a
    # layer leaves what the next one reads
    written = {s.target.array for s in layer.stmts}
    inside = {a for a in written if not read_later(kernel, layer, a)}
    # a MAC reading through a window (a 3x3 convolution's input) reads a box
    # that may leave the array: its buffer, copied from the home, clips and
    # zero-fills it
    relaid |= windowed(layer.stmts)
    return frozenset(
        a
        for a in layer.arrays
        if a not in relaid
        and a not in inside
        and at[a] > 0
        and kernel.arrays[a].home == at[a]
    )


def read_later(kernel: Kernel, layer: Layer, array: str) -> bool:
    """Whether a statement after ``layer`` reads ``array`` (what the cost model
    asks of the rest of the kernel; the search cache keys by it too). Memoised
    with the program: each structure's model asks, and the answer walks every
    statement."""
    key = ("accel.read_later", tuple(s.name for s in layer.stmts), array)
    return kernel.analysis(key, lambda k: _read_later(k, layer, array))


def _read_later(kernel: Kernel, layer: Layer, array: str) -> bool:
    mine = {s.name for s in layer.stmts}
    after = False
    for s in kernel.statements:
        if s.name in mine:
            after = True
        elif after and any(ld.array == array for ld in (*s.reads, *s.gathers)):
            return True
    return False


__all__ = ["read_later", "resident_arrays", "windowed"]
