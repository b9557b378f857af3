"""C for ``@pack(KC)``: the panels of a contraction's operand copied into a
contiguous buffer once, for every register tile of a column of them (the packing
of GotoBLAS and BLIS; :mod:`schedules.host.pack` places the mark).

The mark sits on the loop over the row tiles, above an ``@accumulate(NR, MR, VB)``
mark whose micro-kernel has a vector form (:func:`codegen.accumulate.vector_plan`)::

    for (c3 ...)                             {
      <@accumulate: for k, l, p:               const long k0 = <k's first value>;
        X[p][l] += A[p][k] * B[k][l]>  ->      const long l0 = <l's first value>;
                                               double pack[KC * NR];  (64-byte aligned)
                                               const bool ready = <l's count> == NR
                                                             && <k's count> <= KC;
                                               if (ready)
                                                 for (k ...) for (l = l0; l < l0 + NR; l++)
                                                   pack[(k - k0) * NR + (l - l0)] = B[k][l];
                                               for (c3 ...)
                                                 <@accumulate, reading B from pack>
                                             }

Each load of the body that moves with ``l`` (the target's aside) gets a buffer.
The copy is valid for every row tile because the loops' bounds of ``k`` and ``l``
do not use the row tile's loop (checked here; another shape is emitted as it is)
and the row tiles write only the target, which no packed load reads (one
statement, reading its target only at the element it writes: the checks of
:func:`schedules.host.register.accumulate`). The micro-kernel reads the buffer only
on a full tile with ``ready`` set, so a ragged edge (fewer than ``NR`` columns,
fewer than ``MR`` rows) runs the loops as written. The values are copied, not
computed: the bits are the same.

Why: ``KC`` rows of ``B`` spaced a matrix row apart fall into few sets of the L1
cache (all into one at 1024 doubles a row), so the micro-kernels of a column
evict each other's panel; the packed panel is ``KC x NR`` consecutive elements
(matmul 1024^3 in doubles, by hand: 0.058 s without the copy, 0.046 s with it).
"""

from __future__ import annotations

import re

import cgen as c

from codegen import accumulate
from polyc.ir import loops

MARK = "@pack"
#: alignment of the buffers (a cache line, and an AVX-512 register)
ALIGN = 64
#: the largest buffer placed on the stack (a thread's stack is a few MiB); a mark
#: asking for more is emitted as the loops are
MAX_BYTES = 1 << 20


def panel_rows(name: str) -> int | None:
    """``KC`` of a ``@pack(KC)`` mark, None for other marks."""
    m = re.fullmatch(r"@pack\((\d+)\)", name)
    return int(m.group(1)) if m else None


def emit(emitter, node: loops.Mark, counter: int) -> list[c.Generable] | None:
    """The C of ``node`` (a ``@pack`` mark) for ``emitter``, or None when the loops
    below it do not have the shape of the module docstring."""
    kc = panel_rows(node.name)
    rows = accumulate._only(node.body, loops.For)
    inner = _accumulate_below(rows.body) if rows is not None else None
    if kc is None or inner is None or rows.degenerate:
        return None
    plan = accumulate.vector_plan(emitter, inner)
    if plan is None or plan.k.step != 1 or plan.k.upper() is None:
        return None
    k, lo = plan.k, plan.lo
    bounds = accumulate._names(k.init) | accumulate._names(k.cond)
    bounds |= accumulate._names(lo.init) | accumulate._names(lo.upper()[0])
    if rows.var in bounds:
        return None
    stmt = plan.stmt
    args = {it: f"({loops.to_c(a)})" for it, a in zip(stmt.iterators, plan.call.args)}
    render = emitter.renderer(args)
    moving = plan.moving()
    texts = [render(ld) for ld in moving]
    inside = (rows.var, plan.po.var)
    if not moving or any(re.search(rf"\b{v}\b", t) for t in texts for v in inside):
        return None
    nr = plan.nv * plan.vl
    itemsize = emitter.kernel.arrays[stmt.target.array].dtype.itemsize
    if kc * nr * itemsize > MAX_BYTES:
        return None
    k0, l0 = f"_pc_pk{counter}_k0", f"_pc_pk{counter}_l0"
    ready = f"_pc_pk{counter}_ready"
    names = {
        (ld.array, ld.index): f"_pc_pack{counter}_{n}" for n, ld in enumerate(moving)
    }
    at = f"({k.var} - {k0}) * {nr} + ({lo.var} - {l0})"
    copies = [
        c.Statement(f"{names[(ld.array, ld.index)]}[{at}] = {text}")
        for ld, text in zip(moving, texts)
    ]
    fill = accumulate._loop(
        k,
        [
            c.For(
                f"long {lo.var} = {l0}",
                f"{lo.var} < {l0} + {nr}",
                f"{lo.var} += 1",
                c.Block(copies),
            )
        ],
    )
    packed = accumulate.Packed(names, k0, ready)
    tiled = accumulate.emit(emitter, inner, counter, packed)
    if tiled is None:
        return None
    row_loop = c.For(
        f"long {rows.var} = {loops.to_c(rows.init)}",
        loops.to_c(rows.cond),
        f"{rows.var} += {rows.step}",
        c.Block(tiled),
    )
    decls = [
        c.Line(f"{plan.ctype} {buf}[{kc * nr}] __attribute__((aligned({ALIGN})));")
        for buf in names.values()
    ]
    return [
        c.Block(
            [
                c.Line(f"const long {k0} = {loops.to_c(k.init)};"),
                c.Line(f"const long {l0} = {loops.to_c(lo.init)};"),
                *decls,
                c.Line(
                    f"const int {ready} = {accumulate._count(lo)} - {l0} == {nr} "
                    f"&& {accumulate._count(k)} - {k0} <= {kc};"
                ),
                c.If(ready, c.Block([fill])),
                row_loop,
            ]
        )
    ]


def _accumulate_below(body: tuple) -> loops.Mark | None:
    """The ``@accumulate`` mark that is ``body``'s one node (below band name
    marks)."""
    while len(body) == 1 and isinstance(body[0], loops.Mark):
        if body[0].name.startswith(accumulate.MARK):
            return body[0]
        if body[0].name.startswith("@"):
            return None
        body = body[0].body
    return None
