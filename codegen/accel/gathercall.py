"""``pc_gather`` calls for a statement marked ``@gather`` (an indirect DMA), and
the ``pc_dma`` of each chunk of a copy marked ``@prefetch`` (a weight fetched
ahead into its home: :func:`prefetch`).

The statement's indirect-DMA form (:func:`polyc.ir.gathers.form`, the predicate
the scheduler marked it by) gives the rows one call moves and the loops around
the calls; the loops the schedule tree holds below the mark are not emitted: the
DMA channel reads the index block and moves the rows itself, so the scalar core
issues one call per run of rows and nothing per element.
"""

from __future__ import annotations

import cgen as c

from codegen.accel import names
from codegen.accel.names import CTX
from polyc.errors import CodegenError
from polyc.ir import prefetches
from polyc.ir.gathers import GatherForm, form
from polyc.ir.kernel import Kernel
from polyc.ir.prefetches import Chunk


def _var(it: str) -> str:
    return f"pc_gi_{it}"


def emit(kernel: Kernel, stmt_name: str) -> list[c.Generable]:
    """The calls that gather statement ``stmt_name`` (buffers: the arrays'
    own, in DRAM or at their homes).

    Raises:
        CodegenError: when the statement lost its indirect-DMA form (the tree
            was edited after the scheduler marked it).
    """
    f = form(kernel, kernel.statement(stmt_name))
    if not isinstance(f, GatherForm):
        raise CodegenError(
            f"codegen: {stmt_name} is marked @gather but cannot run as an indirect "
            f"DMA because {f}. Remove the mark (schedules.unmark)."
        )
    b = names.dram_buffer
    label = names.cstr(f"{stmt_name}: {f.table} rows by {f.index}")
    call = c.Statement(
        f"pc_gather({CTX}, -1, {f.elem}, {f.rows}, {f.row_elems}, "
        f"{b(f.target)}, {f.dst_off.to_c(_var)}, {f.dst_stride}, "
        f"{b(f.table)}, {f.src_off.to_c(_var)}, {f.src_stride}, {f.table_rows}, "
        f"{b(f.index)}, {f.idx_off.to_c(_var)}, {f.idx_stride}, {f.idx_elem}, "
        f"{label})"
    )
    body: list[c.Generable] = [call]
    for it, lo, hi in reversed(f.loops):
        v = _var(it)
        body = [c.For(f"long {v} = {lo}", f"{v} <= {hi}", f"{v} += 1", c.Block(body))]
    summary = (
        f"{stmt_name}: gather {f.rows * f.calls} rows of {f.row_bytes} bytes "
        f"({f.calls} call{'s' if f.calls > 1 else ''})"
    )
    return [c.Comment(summary), *body]


def chunks(kernel: Kernel) -> list[Chunk]:
    """The chunks of the weights fetched ahead (:func:`polyc.ir.prefetches.chunks`),
    checked: each copy still a whole input's, its copy at a home on chip.

    Raises:
        CodegenError: when a marked copy lost that form (the kernel was edited
            after the scheduler marked it).
    """
    out = prefetches.chunks(kernel)
    for ch in out:
        rows = prefetches.rows(kernel.arrays[ch.weight])
        if not kernel.arrays[ch.copy].home or not 0 <= ch.lo <= ch.hi <= rows:
            raise CodegenError(
                f"codegen: {ch.stmt} is marked @prefetch but its rows {ch.lo} to "
                f"{ch.hi} are not a chunk of {ch.weight}'s {rows} rows into a home "
                "on chip because the kernel was edited after the scheduler marked "
                "it. Remove the mark (schedules.unmark)."
            )
    return out


def prefetch(kernel: Kernel, ch: Chunk) -> list[c.Generable]:
    """The DMA of one chunk of a weight fetched ahead into its home: rows
    ``[lo, hi)`` of its first dimension, one contiguous block, DRAM to chip
    (the copy's array is bound at its home, :mod:`schedules.accel.prefetch`)."""
    arr = kernel.arrays[ch.weight]
    off, count = prefetches.span(kernel, ch)
    if count <= 0:
        return []
    b = names.dram_buffer
    label = names.cstr(f"{ch.stmt}: {ch.weight} ahead")
    nbytes = count * arr.dtype.itemsize
    return [
        c.Comment(
            f"{ch.stmt}: rows {ch.lo}..{ch.hi - 1} of {ch.weight} ({nbytes:,} bytes) "
            "fetched ahead"
        ),
        c.Block(
            [
                c.Line(f"const int64_t pc_pf_n[1] = {{{count}}}, pc_pf_s[1] = {{1}};"),
                c.Statement(
                    f"pc_dma({CTX}, PC_LAST_CHANNEL, {arr.dtype.itemsize}, 1, pc_pf_n, "
                    f"{b(ch.copy)}, {off}, pc_pf_s, {b(ch.weight)}, {off}, pc_pf_s, "
                    f"{label})"
                ),
            ]
        ),
    ]


__all__ = ["chunks", "emit", "prefetch"]
