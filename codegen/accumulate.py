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

With a third size, ``@accumulate(NR, MR, VB)``, the local array is one of
``MR x NR / VL`` vectors of ``VB`` bytes (``VL`` elements; GCC's vector
extensions, which clang shares) when the body is made of ``+``, ``-`` and ``*`` of
the target's type (:func:`vector_plan`)::

        typedef double vec __attribute__((vector_size(VB), aligned(8), may_alias));
        vec acc[MR][NR / VL];
        ... acc[p - p0][v] = *(vec *)&X[p][l0 + VL * v];       (copy in)
        for (k ...)
          #pragma GCC unroll MR
          for (long p = p0; p < p0 + MR; p += 1)
            #pragma GCC unroll NR / VL
            for (long v = 0; v < NR / VL; v += 1)
              acc[p - p0][v] = acc[p - p0][v] + A[p][k] * *(vec *)&B[k][l0 + VL * v];

A load that does not move with ``l`` (``A[p][k]``) is a scalar, which C's vector
arithmetic applies to every lane. One that moves with ``l`` by more than one
element (syrk's ``A[j][k]``, a column) is gathered: ``(vec){A[l0 + VL * v][k],
A[l0 + VL * v + 1][k], ...}``, ``VL`` scalar loads once per ``k`` for the ``MR``
rows of the tile (syrk at LARGE, by hand: 0.74 s with the scalar array, 0.28 to
0.32 s gathered). gcc keeps such an array in registers, where it
spills the scalar ``MR x NR`` array to the stack on every iteration of ``k``
(matmul 1024^3 in doubles: 0.12 s scalar, 0.058 s in vectors, by hand). Every lane
computes its element's operations in the original order, so the bits are the
same. Under an ``@pack`` mark (:mod:`codegen.pack`) the loads of ``B`` read the
packed panel instead.

The same operations run in the same order on every element, so the results are
the same bit for bit. A loop nest of another shape (isl elided a loop, guards)
is emitted as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import cgen as c

from polyc.ir import dtypes, loops
from polyc.ir.expr import Binary, Const, Expr, Load, Opaque, Unary, loads

MARK = "@accumulate"


_SIZES = re.compile(r"@accumulate\((\d+),\s*(\d+)(?:,\s*(\d+))?\)")
#: element types the vector form handles (no narrowing casts after each operation)
VECTOR_TYPES = ("float32", "float64", "int32", "int64")


def sizes(name: str) -> tuple[int, int] | None:
    """``(NR, MR)`` of an ``@accumulate(NR, MR[, VB])`` mark, None for other
    marks."""
    m = _SIZES.fullmatch(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _bfloat16(emitter, stmt) -> bool:
    """A bfloat16 target is not promoted to a register (its C element is not the
    value it holds: see :mod:`codegen.cexpr`); its nest runs as written."""
    return emitter.kernel.arrays[stmt.target.array].dtype == dtypes.bfloat16


def vector_bytes(name: str) -> int | None:
    """``VB`` of an ``@accumulate(NR, MR, VB)`` mark, None without one."""
    m = _SIZES.fullmatch(name)
    return int(m.group(3)) if m and m.group(3) else None


def rows(name: str) -> tuple[int, tuple[str, ...]] | None:
    """``(MR, statements)`` of an ``@accumulate(MR; S1, S2)`` mark (the rows of
    a matrix-vector product), None for other marks."""
    m = re.fullmatch(r"@accumulate\((\d+);\s*([\w, ]+)\)", name)
    if m is None:
        return None
    return int(m.group(1)), tuple(s.strip() for s in m.group(2).split(","))


@dataclass(frozen=True)
class Packed:
    """Panels an enclosing ``@pack`` mark (:mod:`codegen.pack`) has copied: for
    each load (array, index) that moves with ``l``, the local buffer holding its
    ``KC x NR`` elements at ``[(k - k0) * NR + (l - l0)]``; ``ready`` is the C
    flag that says the copy was made (a full ``l`` tile, at most ``KC`` values of
    ``k``)."""

    buffers: dict
    k0: str
    ready: str


@dataclass(frozen=True)
class Plan:
    """The vector form of the micro-kernel below an ``@accumulate(NR, MR, VB)``
    mark (:func:`vector_plan`): its loops and statement, the statement iterator
    that moves with ``l`` (``lane``), elements per vector and vectors per row."""

    k: loops.For
    lo: loops.For
    po: loops.For
    call: loops.Call
    stmt: object
    lane: str
    vl: int
    nv: int
    ctype: str

    def moving(self) -> list[Load]:
        """The loads of the body, other than the target's, that move with ``l``
        (the ``B`` of ``X[p][l] += A[p][k] * B[k][l]``), without repeats."""
        out: dict = {}
        for ld in loads(self.stmt.body):
            if ld.array != self.stmt.target.array and _moves(ld, self.lane):
                out.setdefault((ld.array, ld.index), ld)
        return list(out.values())


def vector_plan(emitter, node: loops.Mark) -> Plan | None:
    """The vector form of an ``@accumulate(NR, MR, VB)`` mark's micro-kernel, or
    None when the mark has no ``VB``, the loops have another shape, the body has
    an operation other than ``+``, ``-``, ``*`` or a type other than the target's
    (:data:`VECTOR_TYPES`). A load that moves with ``l`` but not to consecutive
    elements is gathered (the module docstring)."""
    found, vb, shape = sizes(node.name), vector_bytes(node.name), _shape(node)
    if found is None or vb is None or shape is None:
        return None
    nr, _mr = found
    k, lo, po, call = shape
    stmt = emitter.stmts.get(call.stmt)
    if stmt is None:
        return None
    dt = emitter.kernel.arrays[stmt.target.array].dtype
    if dt.name not in VECTOR_TYPES or vb % dt.itemsize or nr * dt.itemsize % vb:
        return None
    on_l = [it for it, a in zip(stmt.iterators, call.args) if lo.var in _names(a)]
    if len(on_l) != 1:
        return None
    lane = on_l[0]
    if call.args[stmt.iterators.index(lane)] != loops.LExpr("id", (lo.var,)):
        return None
    if not _vectorisable(stmt.body, dt) or not _contiguous(stmt.target, lane):
        return None
    vl = vb // dt.itemsize
    ctype = emitter.value_type(dt)
    return Plan(k, lo, po, call, stmt, lane, vl, nr // vl, ctype)


def _vectorisable(e: Expr, dt) -> bool:
    if e.dtype != dt:
        return False
    if type(e) in (Const, Load):
        return True
    if isinstance(e, Opaque):  # a scalar variable of the user's (alpha)
        return re.fullmatch(r"[A-Za-z_]\w*", e.text) is not None
    if isinstance(e, Binary):
        return e.op in ("add", "sub", "mul") and all(
            _vectorisable(x, dt) for x in (e.a, e.b)
        )
    if isinstance(e, Unary):
        return e.op == "neg" and _vectorisable(e.x, dt)
    return False


def _moves(ld, lane: str) -> bool:
    return any(lane in a.names() for a in ld.index)


def _contiguous(ld, lane: str) -> bool:
    """Whether consecutive values of ``lane`` read consecutive elements of ``ld``:
    only its last index uses it, with coefficient 1 outside any floor."""
    if not ld.index or any(lane in a.names() for a in ld.index[:-1]):
        return False
    last = ld.index[-1]
    floors = {
        n
        for atom, _ in last.terms
        if not isinstance(atom, str)
        for n in atom.num.names()
    }
    return last.coefficient(lane) == 1 and lane not in floors


def emit(
    emitter, node: loops.Mark, counter: int, packed: Packed | None = None
) -> list[c.Generable] | None:
    """The register-tiled C of ``node`` (an ``@accumulate`` mark) for ``emitter``
    (a :class:`codegen.emit.CEmitter`), or None when the loops below it do not
    have the expected shape. ``packed``: the panels an enclosing ``@pack`` mark
    copied (the vector form reads them)."""
    if rows(node.name) is not None:
        return _emit_rows(emitter, node, counter)
    found = sizes(node.name)
    shape = _shape(node)
    if found is None or shape is None:
        return None
    nr, mr = found
    _k, lo, po, call = shape
    stmt = emitter.stmts.get(call.stmt)
    if stmt is None or _bfloat16(emitter, stmt):
        return None
    l0, p0 = f"_pc_{lo.var}0_{counter}", f"_pc_{po.var}0_{counter}"
    plan = vector_plan(emitter, node)
    if plan is not None:
        full = _vector_full(emitter, plan, counter, (l0, p0), (nr, mr), packed)
    else:
        packed = None
        full = _scalar_full(emitter, shape, stmt, counter, (l0, p0), (nr, mr))
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
    if packed is not None:
        test.append(packed.ready)
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


def _scalar_full(emitter, shape, stmt, counter, starts, tile_sizes):
    """The full tile with a scalar ``MR x NR`` local array (the module
    docstring's first form)."""
    k, lo, po, call = shape
    (l0, p0), (nr, mr) = starts, tile_sizes
    target = stmt.target
    acc = f"_pc_acc{counter}"
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
    return [
        c.Line(f"{ctype} {acc}[{mr}][{nr}];"),
        tile([c.Statement(f"{local} = {x}")], False),
        _loop(k, [compute]),
        tile([c.Statement(f"{x} = {local}")], False),
    ]


def _vector_full(emitter, plan: Plan, counter, starts, tile_sizes, packed):
    """The full tile with ``MR x NR / VL`` vector accumulators (the module
    docstring's second form); loads in ``packed`` read its buffers."""
    (l0, p0), (nr, mr) = starts, tile_sizes
    k, po, stmt = plan.k, plan.po, plan.stmt
    target = stmt.target
    vec, v, acc = f"_pc_vec{counter}", f"_pc_v{counter}", f"_pc_acc{counter}"
    args = {it: f"({loops.to_c(a)})" for it, a in zip(stmt.iterators, plan.call.args)}
    args[plan.lane] = f"({l0} + {plan.vl} * {v})"
    local = f"{acc}[{po.var} - {p0}][{v}]"
    buffers = packed.buffers if packed else {}

    def element(ld, idx):
        if ld.array == target.array:
            return local
        if not _moves(ld, plan.lane):
            return emitter.element(ld.array, idx)
        buf = buffers.get((ld.array, ld.index))
        if buf is not None:
            at = f"({k.var} - {packed.k0}) * {nr} + {plan.vl} * {v}"
            return f"(*({vec} *)&{buf}[{at}])"
        if not _contiguous(ld, plan.lane):  # a lane per element, gathered
            lanes = []
            for e in range(plan.vl):
                at = {**args, plan.lane: f"({l0} + {plan.vl} * {v} + {e})"}
                lanes.append(emitter.renderer(at)(ld))
            return f"(({vec}){{{', '.join(lanes)}}})"
        return f"(*({vec} *)&{emitter.element(ld.array, idx)})"

    x = f"(*({vec} *)&{emitter.renderer(args)(target)})"
    body = emitter.renderer(args, element)(_cast_scalars(stmt.body, plan.ctype))

    def tile(inner: c.Generable) -> list[c.Generable]:
        lanes = c.For(
            f"long {v} = 0", f"{v} < {plan.nv}", f"{v} += 1", c.Block([inner])
        )
        rows_loop = c.For(
            f"long {po.var} = {p0}",
            f"{po.var} < {p0} + {mr}",
            f"{po.var} += 1",
            c.Block([c.Pragma(f"GCC unroll {plan.nv}"), lanes]),
        )
        return [c.Pragma(f"GCC unroll {mr}"), rows_loop]

    size = plan.vl * emitter.kernel.arrays[target.array].dtype.itemsize
    align = emitter.kernel.arrays[target.array].dtype.itemsize
    return [
        c.Line(
            f"typedef {plan.ctype} {vec} __attribute__((vector_size({size}), "
            f"aligned({align}), may_alias));"
        ),
        c.Line(f"{vec} {acc}[{mr}][{plan.nv}];"),
        *tile(c.Statement(f"{local} = {x}")),
        _loop(k, tile(c.Statement(f"{local} = {body}"))),
        *tile(c.Statement(f"{x} = {local}")),
    ]


def _cast_scalars(e: Expr, ctype: str) -> Expr:
    """``e`` with each user's scalar variable cast to ``ctype``, so that C's vector
    arithmetic accepts it beside a vector (it converts a scalar of the element type
    to every lane; the usual arithmetic conversions did the same to the scalar)."""
    if isinstance(e, Opaque):
        return Opaque(f"(({ctype})({e.text}))", e.dtype)
    if isinstance(e, Binary):
        a, b = _cast_scalars(e.a, ctype), _cast_scalars(e.b, ctype)
        return Binary(e.op, a, b, e.dtype)
    if isinstance(e, Unary):
        return Unary(e.op, _cast_scalars(e.x, ctype), e.dtype)
    return e


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
