"""``pc_gather`` calls for a statement marked ``@gather`` (an indirect DMA).

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
from polyc.ir.gathers import GatherForm, form
from polyc.ir.kernel import Kernel


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


__all__ = ["emit"]
