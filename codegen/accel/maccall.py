"""MAC-array calls for a tensorized tile: ``pc_mac`` over strided 2-D views.

In one tile every access of the contraction is an affine function of the
iterators, so its element offset in its buffer is ``base + sum(coef[i] * x_i)``
with constant ``coef`` (array strides of the buffer times the index
coefficients). A K fused over a convolution's filter rows reads A with two
strides (``pc_view`` ``span`` and ``ps``, an im2col window of the input buffer),
and so does an M fused over output rows into a compact output (``rspan`` and
``rps``: A's rows at the input's own pitch). With the operands exchanged
(``@tensorize ... exchanged``) the call computes ``C^T = B^T A^T``: every view is
transposed and B sits in the array's A port, A (with its spans) in its B port.
Whether the MAC dimensions of the ``@tensorize`` mark can run as
such views over the placed buffers is :func:`polyc.ir.macmap.check`, the predicate
the scheduler's search applies too, so what the scheduler proposes is what this
module emits; a refusal here comes from a hand schedule. The remaining iterators
loop around the call; each call accumulates into the output buffer, which the
init statement filled (or overwrites it, for a folded zero init).
"""

from __future__ import annotations

import cgen as c

from codegen.accel import names
from codegen.accel.info import functions, pw_to_c
from codegen.accel.names import CTX
from polyc.errors import CodegenError
from polyc.ir import macmap
from polyc.ir import marks as pm


def emit(em, stmt, tm: pm.TensorizeMark, active: dict, args: list[str]):
    """The C of one tile: the loops of ``tm.loops`` around ``pc_mac`` calls."""
    its = stmt.iterators
    lo_f, hi_f = functions(tm.lo), functions(tm.hi)
    lines = names.bind_args(args)
    for it, lo, hi in zip(its, lo_f, hi_f):
        lines.append(
            c.Line(
                f"const long pc_lo_{it} = {pw_to_c(lo, args)}, "
                f"pc_hi_{it} = {pw_to_c(hi, args)};"
            )
        )
    loads = macmap.loads(stmt, tm)
    placed = {
        a: em.info.buffers[name] for a, name in active.items() if a in _arrays(loads)
    }
    dims = macmap.from_marks(stmt, tm, placed)
    if isinstance(dims, macmap.Refusal):
        raise CodegenError(dims.message("codegen"))
    bufs = {key: placed[ld.array] for key, ld in loads.items()}
    at = {it: (f"pc_x_{it}" if it in tm.loops else f"pc_lo_{it}") for it in its}
    views = {}
    for key, ld in loads.items():
        b = bufs[key]
        index = [a.to_c(lambda n: at.get(n, n)) for a in ld.index]
        views[key] = (b, em._offset(b, index))
    m_ext, m_str = _extent(dims["m"]), dict(dims["m"].unit)
    n_ext, n_str = _extent(dims["n"]), dict(dims["n"].unit)
    k_ext, k_str = _extent(dims["k"]), dict(dims["k"].unit)

    def view(key: str, rows: dict, cols: dict) -> str:
        b, off = views[key]
        row, col = rows.get(key, 0), cols.get(key, 0)
        # A's K split (span, ps) and M split (rspan, rps), whichever port A is in
        k_split = dims["k"].split_of(key) if key == "a" else None
        m_split = dims["m"].split_of(key) if key == "a" else None
        tail = ""
        if k_split or m_split:
            tail = ", {}, {}".format(*(k_split or (0, 0)))
        if m_split:
            tail += ", {}, {}".format(*m_split)
        return f"((pc_view){{{names.buffer(b.name)}, {off}, {row}, {col}{tail}}})"

    acc = "1"
    if tm.init:
        # the first contribution to each output element overwrites it: the calls
        # whose reduction loops are at their first value, after the folded init
        target = {n for a in stmt.target.index for n in a.names()}
        first = [f"pc_x_{it} == pc_lo_{it}" for it in tm.loops if it not in target]
        acc = f"!({names.fresh(stmt.name)}{''.join(' && ' + f for f in first)})"
    a, b, c_ = view("a", m_str, k_str), view("b", k_str, n_str), view("c", m_str, n_str)
    rows, cols = m_ext, n_ext
    if tm.exchange:
        # C^T = B^T A^T: each view transposed (rows and columns exchanged), B in
        # the A port; A's spans keep splitting its K and M (pc_view: in the B
        # port, span splits the rows and rspan the columns)
        a, b, c_ = (
            view("b", n_str, k_str),
            view("a", k_str, m_str),
            view("c", n_str, m_str),
        )
        rows, cols = n_ext, m_ext
    call = (
        f"pc_mac({CTX}, {tm.mode}, {rows}, {cols}, {k_ext}, {acc}, "
        f"{a}, {b}, {c_}, {names.cstr(stmt.name)})"
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
        inner.append(c.Statement(f"{names.fresh(stmt.name)} = 0"))
    return [c.Comment(f"{pm.MAC}{stmt.name}"), c.Block(lines + inner)]


def _arrays(loads: dict) -> set[str]:
    return {ld.array for ld in loads.values()}


def _extent(dim: macmap.Dimension) -> str:
    """C expression of a MAC dimension's extent in one tile: the fused index runs
    from 0 to the sum of each iterator's range times its ratio."""
    if not dim.group:
        return "1"
    terms = [f"(pc_hi_{it} - pc_lo_{it}) * {q}" for it, q in zip(dim.group, dim.ratios)]
    return f"({' + '.join(terms + ['1'])})"
