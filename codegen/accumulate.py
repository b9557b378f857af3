"""C for ``@accumulate(NR, MR)``: a reduction loop whose accumulators stay in
registers (the register tile of a contraction, :mod:`schedules.host.register`).

The mark sits on a reduction loop ``k`` above two loops, ``l`` (the vector loop,
at most ``NR`` values) and ``p`` (the rows, at most ``MR``), around one statement
whose target ``X[f]`` the scheduler has checked to be, for fixed enclosing loops,
a bijection of ``(l, p)`` that does not move with ``k`` (and the only element of
``X`` the statement reads). On a full tile the target elements are copied into a
local ``MR x NR`` array before ``k`` and back after it, and the loops run constant
trip counts with ``p`` unrolled, so that gcc keeps the array in vector registers::

    {
      const long l0 = <l's lower bound>, p0 = <p's lower bound at l0>;
      if (<l's count> == NR && <p's count> == MR at l0 and at l0 + NR - 1) {
        double acc[MR][NR];
        ... acc[p - p0][l - l0] = X[f];                        (copy in)
        for (k ...)
          for (long l = l0; l < l0 + NR; l += 1)
            #pragma GCC unroll MR
            for (long p = p0; p < p0 + MR; p += 1)
              acc[p - p0][l - l0] = <body, X[f] read as acc[p - p0][l - l0]>;
        ... X[f] = acc[p - p0][l - l0];                        (copy out)
      } else
        <the loops as they are>
    }

The same operations run in the same order on every element, so the results are
the same bit for bit. A loop nest of another shape (isl elided a loop, guards)
is emitted as it is.
"""

from __future__ import annotations

import re

import cgen as c

from polyc.ir import dtypes, loops

MARK = "@accumulate"


def sizes(name: str) -> tuple[int, int] | None:
    """``(NR, MR)`` of an ``@accumulate(NR, MR)`` mark, None for other marks."""
    m = re.fullmatch(r"@accumulate\((\d+),\s*(\d+)\)", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _bfloat16(emitter, stmt) -> bool:
    """A bfloat16 target is not promoted to a register (its C element is not the
    value it holds: see :mod:`codegen.cexpr`); its nest runs as written."""
    return emitter.kernel.arrays[stmt.target.array].dtype == dtypes.bfloat16


def rows(name: str) -> tuple[int, tuple[str, ...]] | None:
    """``(MR, statements)`` of an ``@accumulate(MR; S1, S2)`` mark (the rows of
    a matrix-vector product), None for other marks."""
    m = re.fullmatch(r"@accumulate\((\d+);\s*([\w, ]+)\)", name)
    if m is None:
        return None
    return int(m.group(1)), tuple(s.strip() for s in m.group(2).split(","))


def emit(emitter, node: loops.Mark, counter: int) -> list[c.Generable] | None:
    """The register-tiled C of ``node`` (an ``@accumulate`` mark) for ``emitter``
    (a :class:`codegen.emit.CEmitter`), or None when the loops below it do not
    have the expected shape."""
    if rows(node.name) is not None:
        return _emit_rows(emitter, node, counter)
    found = sizes(node.name)
    shape = _shape(node)
    if found is None or shape is None:
        return None
    nr, mr = found
    k, lo, po, call = shape
    stmt = emitter.stmts.get(call.stmt)
    if stmt is None or _bfloat16(emitter, stmt):
        return None
    target = stmt.target
    acc = f"_pc_acc{counter}"
    l0, p0 = f"_pc_{lo.var}0_{counter}", f"_pc_{po.var}0_{counter}"
    args = {it: f"({loops.to_c(a)})" for it, a in zip(stmt.iterators, call.args)}
    local = f"{acc}[{po.var} - {p0}][{lo.var} - {l0}]"

    def element(ld, idx):
        if ld.array == target.array:
            return local
        return emitter.element(ld.array, idx)

    plain = emitter.renderer(args)
    promoted = emitter.renderer(args, element)
    x = plain(target)
    ctype = emitter.value_type(emitter.kernel.arrays[target.array].dtype)

    def tile(inner: list[c.Generable], unroll: bool) -> c.Generable:
        p_loop: list[c.Generable] = [c.Pragma(f"GCC unroll {mr}")] if unroll else []
        p_loop.append(
            c.For(
                f"long {po.var} = {p0}",
                f"{po.var} < {p0} + {mr}",
                f"{po.var} += 1",
                c.Block(inner),
            )
        )
        return c.For(
            f"long {lo.var} = {l0}",
            f"{lo.var} < {l0} + {nr}",
            f"{lo.var} += 1",
            c.Block(p_loop),
        )

    compute = tile([c.Statement(f"{local} = {promoted(stmt.body)}")], True)
    full = [
        c.Line(f"{ctype} {acc}[{mr}][{nr}];"),
        tile([c.Statement(f"{local} = {x}")], False),
        _loop(k, [compute]),
        tile([c.Statement(f"{x} = {local}")], False),
    ]
    # p's bounds may depend on l (a triangle: i <= j): they are min/max of affine
    # functions of l, so p's count is concave in l and, never above MR, is MR
    # over the whole tile when it is MR at both ends of l's range
    test = [f"{_count(lo)} - {l0} == {nr}"]
    if lo.var in _names(po.init) | _names(po.upper()[0]):
        last = f"({l0} + {nr - 1})"
        for at in (l0, last):
            name = _at(lo.var, at)
            lower = loops.to_c(po.init, name)
            test.append(f"{_count(po, name)} - ({lower}) == {mr}")
        test.append(f"{loops.to_c(po.init, _at(lo.var, last))} == {p0}")
    else:
        test.append(f"{_count(po)} - {p0} == {mr}")
    return [
        c.Block(
            [
                c.Line(f"const long {l0} = {loops.to_c(lo.init)};"),
                c.Line(f"const long {p0} = {loops.to_c(po.init, _at(lo.var, l0))};"),
                c.If(
                    " && ".join(test), c.Block(full), c.Block(emitter.body(node.body))
                ),
            ]
        )
    ]


def _shape(node: loops.Mark):
    """``(k, l, p, call)`` for ``k { l { p { call } } }`` with steps of one, whose
    ``l`` and ``p`` bounds do not depend on ``k``, and ``p``'s depend on ``l`` only
    through min/max of affine expressions."""
    k = _only(node.body, loops.For)
    lo = _only(k.body, loops.For) if k else None
    po = _only(lo.body, loops.For) if lo else None
    call = _only(po.body, loops.Call) if po else None
    if call is None:
        return None
    for loop, banned in ((lo, {k.var}), (po, {k.var})):
        if loop.degenerate or loop.step != 1 or loop.upper() is None:
            return None
        if (_names(loop.init) | _names(loop.upper()[0])) & banned:
            return None
    if lo.var in _names(po.init) | _names(po.upper()[0]) and not (
        _piecewise_affine(po.init) and _piecewise_affine(po.upper()[0])
    ):
        return None
    if k.degenerate:
        return None
    return k, lo, po, call


def _only(body: tuple, kind):
    """The one node of ``body`` (below band name marks) when it is a ``kind``."""
    while len(body) == 1 and isinstance(body[0], loops.Mark):
        if body[0].name.startswith("@"):
            return None
        body = body[0].body
    return body[0] if len(body) == 1 and isinstance(body[0], kind) else None


def _count(loop: loops.For, name=lambda n: n) -> str:
    """C for one past the loop's last value (``name`` renames variables)."""
    bound, inclusive = loop.upper()
    text = f"({loops.to_c(bound, name)})"
    return f"{text} + 1" if inclusive else text


def _at(var: str, value: str):
    """A renaming for :func:`polyc.ir.loops.to_c` that puts ``value`` for ``var``."""
    return lambda n: f"({value})" if n == var else n


def _piecewise_affine(e: loops.LExpr) -> bool:
    """Whether ``e`` is a min/max of affine expressions (no division, products
    only by constants)."""
    if e.op in ("int", "id"):
        return True
    if e.op in ("add", "sub", "neg", "min", "max"):
        return all(_piecewise_affine(a) for a in e.args)
    if e.op == "mul":
        return any(a.op == "int" for a in e.args) and all(
            _piecewise_affine(a) for a in e.args
        )
    return False


def _names(e: loops.LExpr) -> set[str]:
    if e.op == "id":
        return {e.args[0]}
    if e.op == "int":
        return set()
    out: set[str] = set()
    for a in e.args:
        if isinstance(a, loops.LExpr):
            out |= _names(a)
    return out


def _loop(k: loops.For, inner: list[c.Generable]) -> c.Generable:
    return c.For(
        f"long {k.var} = {loops.to_c(k.init)}",
        loops.to_c(k.cond),
        f"{k.var} += {k.step}",
        c.Block(inner),
    )


def _emit_rows(emitter, node: loops.Mark, counter: int) -> list[c.Generable] | None:
    """C for ``@accumulate(MR; S1, ...)``: a reduction loop ``k`` above one row
    loop ``p`` (at most ``MR`` values) around the calls of several statements;
    the targets of the named ones (each, for fixed enclosing loops, a bijection
    of ``p`` that does not move with ``k``, and touched by no other statement
    below) stay in a local array per statement across ``k`` on full tiles::

        for (k ...)                            double acc[MR]; (copy in)
          for (p ...)               ->         for (k ...)
            { S1(p, k); S2(p, k); }              #pragma GCC unroll MR
                                                 for (p = p0; p < p0 + MR; p++)
                                                   { acc[p - p0] = ...; S2(p, k); }
                                               (copy out)

    The other statements run as written, in the same order."""
    mr, names = rows(node.name)
    k = _only(node.body, loops.For)
    po = _only(k.body, loops.For) if k else None
    if po is None or k.degenerate or po.degenerate or po.step != 1:
        return None
    if po.upper() is None or k.var in _names(po.init) | _names(po.upper()[0]):
        return None
    calls = po.body
    if not calls or not all(isinstance(x, loops.Call) for x in calls):
        return None
    p0 = f"_pc_{po.var}0_{counter}"
    promoted: dict[str, tuple[str, str]] = {}  # target array -> (local, C element)
    body: list[c.Generable] = []
    copy_in: list[c.Generable] = []
    for n, call in enumerate(calls):
        stmt = emitter.stmts.get(call.stmt)
        if stmt is None or _bfloat16(emitter, stmt):
            return None
        args = {it: f"({loops.to_c(a)})" for it, a in zip(stmt.iterators, call.args)}
        if call.stmt not in names:
            body.extend(emitter.call(call))
            continue
        target = stmt.target
        x = emitter.renderer(args)(target)
        if re.search(rf"\b{re.escape(k.var)}\b", x) or target.array in promoted:
            return None  # the element is written in terms of the reduction loop
        local = f"_pc_acc{counter}_{n}[{po.var} - {p0}]"
        promoted[target.array] = (local, x)
        ctype = emitter.value_type(emitter.kernel.arrays[target.array].dtype)
        copy_in += [c.Line(f"{ctype} _pc_acc{counter}_{n}[{mr}];")]

        def element(ld, idx, local=local, array=target.array):
            return local if ld.array == array else emitter.element(ld.array, idx)

        expr = emitter.renderer(args, element)(stmt.body)
        body.append(c.Statement(f"{local} = {expr}"))
    if set(names) - {x.stmt for x in calls}:
        return None

    def each_row(inner: list[c.Generable], unroll: bool) -> list[c.Generable]:
        head: list[c.Generable] = [c.Pragma(f"GCC unroll {mr}")] if unroll else []
        return [
            *head,
            c.For(
                f"long {po.var} = {p0}",
                f"{po.var} < {p0} + {mr}",
                f"{po.var} += 1",
                c.Block(inner),
            ),
        ]

    loads = [c.Statement(f"{loc} = {x}") for loc, x in promoted.values()]
    stores = [c.Statement(f"{x} = {loc}") for loc, x in promoted.values()]
    full = [
        *copy_in,
        *each_row(loads, False),
        _loop(k, each_row(body, True)),
        *each_row(stores, False),
    ]
    return [
        c.Block(
            [
                c.Line(f"const long {p0} = {loops.to_c(po.init)};"),
                c.If(
                    f"{_count(po)} - {p0} == {mr}",
                    c.Block(full),
                    c.Block(emitter.body(node.body)),
                ),
            ]
        )
    ]
