"""Which statements copy a weight ahead into a home on chip: the scheduler's
:mod:`schedules.accel.prefetch` makes them, the accelerator code generator runs
each as DMA chunks (the ``@prefetch`` mark), and the array each fills is the generated code's own (the
user's program has no such array: it is declared in the C, not passed)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from polyc.ir import tree
from polyc.ir.expr import Load
from polyc.ir.kernel import Array, Kernel, Role

#: the origin of a prefetch's copy statement (``prefetch W``)
ORIGIN = "prefetch"
#: the attribute mark of a band whose copy runs as DMA chunks ahead of its
#: reader: ``@prefetch PF0 | before=S3,S10 | rows=4,12`` (the chunk of rows
#: [0, 4) of the weight's first dimension issued before the layer that runs
#: S3, rows [4, 16) before the one that runs S10)
MARK = "@prefetch"


@dataclass(frozen=True)
class Chunk:
    """Rows ``[lo, hi)`` of a weight's first dimension, copied into ``copy``
    before the layer that runs statement ``before``."""

    stmt: str
    weight: str
    copy: str
    before: str
    lo: int
    hi: int


def rows(weight: Array) -> int:
    """The rows of ``weight``'s first dimension, which its chunks divide (one
    for a scalar)."""
    return int(weight.concrete_shape({})[0]) if weight.ndim else 1


def span(kernel: Kernel, ch: Chunk) -> tuple[int, int]:
    """``(offset, count)``: the elements of ``ch``'s rows in its weight, one
    contiguous block (rows of a row-major array)."""
    arr = kernel.arrays[ch.weight]
    row = math.prod(arr.concrete_shape({})[1:])
    return ch.lo * row, (ch.hi - ch.lo) * row


def mark(stmt: str, before: tuple[str, ...], rows: tuple[int, ...]) -> str:
    """The ``@prefetch`` mark of copy ``stmt`` issued in chunks of ``rows`` rows,
    each before the layer that runs the statement of ``before`` at its place."""
    return (
        f"{MARK} {stmt} | before={','.join(before)} | "
        f"rows={','.join(str(r) for r in rows)}"
    )


def chunks(kernel: Kernel) -> list[Chunk]:
    """The chunks of every ``@prefetch`` mark of ``kernel``'s schedule, in order."""
    pairs = copies(kernel)
    if not pairs:
        return []
    out = []
    for text in tree.marks(kernel.schedule):
        if not text.startswith(MARK + " "):
            continue
        head, *fields = text.split(" | ")
        stmt = head.split()[1]
        if stmt not in pairs:
            continue
        got = dict(f.split("=", 1) for f in fields)
        before = got["before"].split(",")
        counts = [int(r) for r in got["rows"].split(",")]
        lo = 0
        for b, r in zip(before, counts):
            out.append(Chunk(stmt, *pairs[stmt], b, lo, lo + r))
            lo += r
    return out


def spans(kernel: Kernel, layers) -> dict[str, tuple[int, int]]:
    """Per copy of a weight fetched in chunks: the first and the last of
    ``layers`` (the statement names below each top-level node of the program,
    in order) its home is live in. It is bound before the first layer a chunk
    of it goes before, or a reader of it (where the code generator issues what
    is left), and freed after the last layer that reads it: outside that span
    the bytes hold other layers' buffers."""
    found = chunks(kernel)
    if not found:
        return {}
    reads: dict[str, set[str]] = {}
    for s in kernel.statements:
        for ld in s.reads:
            reads.setdefault(ld.array, set()).add(s.name)
    out: dict[str, tuple[int, int]] = {}
    for copy in {ch.copy for ch in found}:
        first = {ch.before for ch in found if ch.copy == copy}
        readers = reads.get(copy, set())
        at = [i for i, names in enumerate(layers) if names & (first | readers)]
        last = [i for i, names in enumerate(layers) if names & readers]
        if at and last:
            out[copy] = (min(at), max(last))
    return out


def ceilings(kernel: Kernel, layers) -> dict[tuple[int, int], int]:
    """Per (level, index into ``layers``), the lowest home of a copy live in
    that layer (:func:`spans`): where the layer's buffers must end."""
    out: dict[tuple[int, int], int] = {}
    for copy, (lo, hi) in spans(kernel, layers).items():
        arr = kernel.arrays[copy]
        for layer in range(lo, hi + 1):
            key = (arr.home, layer)
            out[key] = min(out.get(key, arr.home_offset), arr.home_offset)
    return out


def copies(kernel: Kernel) -> dict[str, tuple[str, str]]:
    """The prefetch copies of ``kernel``: statement -> (weight, its copy), where
    the statement still copies the whole input into a temporary of its shape."""
    out = {}
    for s in kernel.statements:
        if not s.origin.startswith(ORIGIN + " ") or not isinstance(s.body, Load):
            continue
        weight, copy = kernel.arrays[s.body.array], kernel.arrays[s.target.array]
        if (
            weight.role == Role.INPUT
            and copy.role == Role.TEMP
            and copy.shape == weight.shape
            and copy.dtype == weight.dtype
        ):
            out[s.name] = (weight.name, copy.name)
    return out


__all__ = [
    "MARK",
    "ORIGIN",
    "Chunk",
    "ceilings",
    "chunks",
    "copies",
    "mark",
    "rows",
    "span",
    "spans",
]
