"""The C names of the accelerator target, in one place.

The DRAM-direct emitter (:mod:`codegen.accel.direct`), the placed one
(:mod:`codegen.accel.placed`), its copies (:mod:`codegen.accel.copies`) and MAC
calls (:mod:`codegen.accel.maccall`) and the mark reader (:mod:`codegen.accel.info`)
all name the same variables of the generated function; each name is spelled here
once, so two modules cannot drift apart. Every name starts with ``pc_`` and each
kind has its own prefix below. Names local to one emitted block (a copy's box
bounds, a MAC tile's ranges) stay in the module that emits the block.
"""

from __future__ import annotations

import cgen as c

from codegen.emit import c_ident

#: the runtime context every kernel function receives (``pc_ctx *``)
CTX = "_pc_ctx"
#: the vector unit's access mask (one per kernel function)
VMASK = "pc_vmask"
#: whether the run computes values (``PC_DATA``: 0 in a timing-only run), read
#: once at the top of the kernel function
DATA = "pc_data"


# an array in DRAM, a statement, its counters -------------------------------------


def dram_buffer(array: str) -> str:
    """The runtime's buffer id of an array bound in DRAM."""
    return f"pc_b_{array}"


def stmt_desc(stmt: str) -> str:
    """The statement's static descriptor (ops, bytes per level) for ``pc_stmt``."""
    return f"pc_d_{stmt}"


def stmt_id(stmt: str) -> str:
    """The runtime's id of a statement (``pc_stmt``'s result)."""
    return f"pc_s_{stmt}"


def count(stmt: str) -> str:
    """Scalar-core instances of a statement since the last flush."""
    return f"pc_n_{stmt}"


def mask(stmt: str, is_write: bool) -> str:
    """Buffers the statement wrote (read) since the last flush (checked builds)."""
    return f"pc_{'w' if is_write else 'r'}_{stmt}"


def fresh(stmt: str) -> str:
    """Set when the next MAC calls of ``stmt`` overwrite (a folded zero init)."""
    return f"pc_fresh_{stmt}"


def vector_count(stmt: str) -> str:
    """Instances of a vector-mapped statement in the current tile."""
    return f"pc_v_{stmt}"


def vector_runs(stmt: str) -> str:
    """Runs of two or more consecutive contributions of a vector reduction to one
    element in the current tile (each takes a horizontal reduction step)."""
    return f"pc_vr_{stmt}"


def vector_span(stmt: str, k: int) -> tuple[str, str]:
    """The lowest and highest element offset (slot included) that a
    vector-mapped statement touches in its ``k``-th buffer in the current tile."""
    return f"pc_vlo_{stmt}_{k}", f"pc_vhi_{stmt}_{k}"


def vector_arc(stmt: str, k: int) -> tuple[str, str]:
    """The lowest and highest of the element offsets that a vector-mapped
    statement touches in its ``k``-th buffer in the current tile, modulo the
    buffer's :func:`codegen.accel.placed.period` (the runs of a row tile in
    each channel)."""
    return f"pc_valo_{stmt}_{k}", f"pc_vahi_{stmt}_{k}"


def vector_lone(stmt: str) -> str:
    """Set while the vector reduction's current run has one contribution."""
    return f"pc_vl_{stmt}"


def vector_last(stmt: str) -> str:
    """The element offset the vector reduction wrote last (-1: none yet)."""
    return f"pc_vp_{stmt}"


# a placed buffer -----------------------------------------------------------------


def buffer(buf: str) -> str:
    """The runtime's buffer id of an on-chip buffer (``pc_alloc``'s result)."""
    return f"pc_b_{c_ident(buf)}"


def pointer(buf: str) -> str:
    """The typed pointer to the buffer's storage."""
    return f"pc_p_{c_ident(buf)}"


def slot(buf: str) -> str:
    """The slot the current tile uses (-1 before the first copy)."""
    return f"pc_slot_{c_ident(buf)}"


def halo_key(buf: str) -> str:
    """Per slot of a clamped buffer, the halo its last fill left zeroed: per
    dimension the widths below and above the array and the box's extent less
    one (-1 before the first fill)."""
    return f"pc_z_{c_ident(buf)}"


def origin(buf: str, d: int) -> str:
    """The array index of the tile's first element along dimension ``d``."""
    return f"pc_o_{c_ident(buf)}_{d}"


# a call's arguments ----------------------------------------------------------------


def arg(i: int) -> str:
    """The ``i``-th argument of a copy or MAC call, as the marks' functions read it
    (:func:`codegen.accel.info.pw_to_c`)."""
    return f"pc_a{i}"


def bind_args(args: list[str]) -> list[c.Generable]:
    """``const long pc_a<i> = <arg>;`` for a call's arguments (the prefix)."""
    return [c.Line(f"const long {arg(i)} = {a};") for i, a in enumerate(args)] + [
        c.Statement(f"(void){arg(i)}") for i in range(len(args))
    ]


# C literals ------------------------------------------------------------------------


def cstr(text: str) -> str:
    """``text`` as a C string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def i64_list(items: list[str]) -> str:
    """A C compound literal ``(const int64_t[]){...}`` (a null pointer when empty)."""
    if not items:
        return "((const int64_t *)0)"
    return f"((const int64_t[]){{{', '.join(items)}}})"
