"""MAC-array calls for a tensorized tile: ``pc_mac`` over strided 2-D views.

In one tile every access of the contraction is an affine function of the
iterators, so its element offset in its buffer is ``base + sum(coef[i] * x_i)``
with constant ``coef`` (array strides of the buffer times the index
coefficients). A MAC dimension is one iterator or several fused into one index:
``(h, w)`` fuse when, in every access that uses them, ``coef[h] = P * coef[w]``
for one pitch ``P`` (rows of an output buffer padded to the input's row pitch).
M and N may run over padding (it lands in unused buffer elements: the output's
padding, never a real element, since ``P`` is at least the span of the inner
iterators); K may not (a padded K would add products), so a fused K needs
``P`` equal to that span in every tile. The remaining iterators loop around the
call; each call accumulates into the output buffer, which the init statement
filled.
"""

from __future__ import annotations

import cgen as c

from codegen.placed_info import (
    bvar,
    constant_extent,
    functions,
    max_extent,
    pw_to_c,
)
from codegen.sim import CTX, _cstr
from polyc import placemarks as pm
from polyc.errors import CodegenError


def emit(em, stmt, tm: pm.TensorizeMark, active: dict, args: list[str]):
    """The C of one tile: the loops of ``tm.loops`` around ``pc_mac`` calls."""
    its = stmt.iterators
    lo_f, hi_f = functions(tm.lo), functions(tm.hi)
    lines: list[c.Generable] = [
        c.Line(f"const long pc_a{i} = {a};") for i, a in enumerate(args)
    ]
    for i in range(len(args)):
        lines.append(c.Statement(f"(void)pc_a{i}"))
    for it, lo, hi in zip(its, lo_f, hi_f):
        lines.append(
            c.Line(
                f"const long pc_lo_{it} = {pw_to_c(lo, args)}, "
                f"pc_hi_{it} = {pw_to_c(hi, args)};"
            )
        )
    loads = {"c": stmt.target, "a": stmt.reads[tm.a], "b": stmt.reads[tm.b]}
    bufs = {}
    for key, ld in loads.items():
        name = active.get(ld.array)
        if name is None:
            raise CodegenError(
                f"codegen: {stmt.name} runs on the MAC array but {ld.array} has no "
                "buffer around it because it was not placed. Place A, B and the "
                "output of a tensorized statement in the MAC array's levels."
            )
        bufs[key] = em.info.buffers[name]

    def coef(key: str, it: str) -> int:
        return buffer_coefficient(stmt, bufs[key], loads[key], it)

    extents = {it: max_extent(lo, hi) for it, lo, hi in zip(its, lo_f, hi_f)}
    exact = {it: constant_extent(lo, hi) for it, lo, hi in zip(its, lo_f, hi_f)}
    dims = {}
    for role, users in (("m", "ca"), ("n", "cb"), ("k", "ab")):
        group = getattr(tm, role)
        dims[role] = _dimension(stmt, role, group, users, coef, extents, exact)
    names = {it: (f"pc_x_{it}" if it in tm.loops else f"pc_lo_{it}") for it in its}
    views = {}
    for key, ld in loads.items():
        b = bufs[key]
        index = [a.to_c(lambda n: names.get(n, n)) for a in ld.index]
        views[key] = (b, em._offset(b, index))
    m_ext, m_str = dims["m"]
    n_ext, n_str = dims["n"]
    k_ext, k_str = dims["k"]

    def view(key: str, rows: dict, cols: dict) -> str:
        b, off = views[key]
        return (
            f"((pc_view){{{_bvar(b)}, {off}, {rows.get(key, 0)}, {cols.get(key, 0)}}})"
        )

    acc = "1"
    if tm.init:
        # the first contribution to each output element overwrites it: the calls
        # whose reduction loops are at their first value, after the folded init
        target = {n for a in stmt.target.index for n in a.names()}
        first = [f"pc_x_{it} == pc_lo_{it}" for it in tm.loops if it not in target]
        acc = f"!(pc_fresh_{stmt.name}{''.join(' && ' + f for f in first)})"
    call = (
        f"pc_mac({CTX}, {tm.mode}, {m_ext}, {n_ext}, {k_ext}, {acc}, "
        f"{view('a', m_str, k_str)}, {view('b', k_str, n_str)}, "
        f"{view('c', m_str, n_str)}, {_cstr(stmt.name)})"
    )
    inner: list[c.Generable] = [*em.flush(), c.Statement(call)]
    for it in reversed(tm.loops):
        v = f"pc_x_{it}"
        inner = [
            c.For(
                f"long {v} = pc_lo_{it}",
                f"{v} <= pc_hi_{it}",
                f"{v}++",
                c.Block(inner),
            )
        ]
    if tm.init:
        inner.append(c.Statement(f"pc_fresh_{stmt.name} = 0"))
    return [c.Comment(f"{pm.MAC}{stmt.name}"), c.Block(lines + inner)]


def buffer_coefficient(stmt, b: pm.BufferMark, ld, it: str) -> int:
    """Element stride of iterator ``it`` through access ``ld`` in buffer ``b``. In
    a polyphase dimension of factor ``f`` the iterator must move by multiples of
    ``f`` (it then stays in one phase and moves ``coefficient / f`` rows)."""
    out = 0
    for d, (st, a) in enumerate(zip(b.strides, ld.index)):
        q, r = divmod(a.coefficient(it), b.phase(d))
        if r:
            raise CodegenError(
                f"codegen: {it} of {stmt.name} cannot run inside one MAC call over "
                f"{b.name} because it moves {a.coefficient(it)} elements along "
                f"dimension {d}, which is stored in {b.phase(d)} phases. Loop over "
                f"{it} around the call or place {b.array} without phases."
            )
        out += st * q
    return out


def _bvar(b: pm.BufferMark) -> str:
    return bvar(b.name)


def _dimension(stmt, role, group, users, coef, extents, exact):
    """``(extent C expression, {access: element stride})`` of one MAC dimension."""
    if not group:
        return "1", {}
    inner = group[-1]
    unit = {key: coef(key, inner) for key in users}
    if any(u == 0 for u in unit.values()):
        raise CodegenError(
            f"codegen: MAC dimension {role} of {stmt.name} ({inner}) does not move "
            f"through {' and '.join(k for k, u in unit.items() if u == 0)} because its "
            "buffer stride is 0. Pick an iterator of that role."
        )
    ratios = []
    for it in group:
        rs = set()
        for key in users:
            q, r = divmod(coef(key, it), unit[key])
            if r:
                rs.add(None)
            rs.add(q)
        if len(rs) != 1 or None in rs:
            raise _fuse_error(stmt, role, group, it)
        ratios.append(rs.pop())
    span = 1
    for it, q in zip(reversed(group), reversed(ratios)):
        if it != inner:
            ok = (
                q == span and exact[group[group.index(it) + 1]]
                if role == "k"
                else q >= span
            )
            if not ok:
                raise _fuse_error(stmt, role, group, it)
        span += (extents[it] - 1) * q
    extent = " + ".join(
        [f"(pc_hi_{it} - pc_lo_{it}) * {q}" for it, q in zip(group, ratios)] + ["1"]
    )
    return f"({extent})", unit


def _fuse_error(stmt, role, group, it):
    return CodegenError(
        f"codegen: iterators {', '.join(group)} of {stmt.name} cannot fuse into MAC "
        f"dimension {role} because the buffer strides of {it} are not one pitch times "
        "the inner iterator's in every access (or would overlap). Tensorize with "
        f"{role}=({group[-1]!r},) or place the buffers with matching row pitches."
    )
