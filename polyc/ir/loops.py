"""A plain Python view of isl's AST: loops, guards, marks and statement calls.

isl generates the loop nest from a schedule tree (``AstBuild.node_from_schedule``);
this module turns isl's AST into small immutable Python nodes that the printer, the
interpreter's scanner and the C code generator all walk. Expressions are kept as a tiny
tree (:class:`LExpr`) that renders to C or Python and evaluates vectorised with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl
import numpy as np

_OP = isl.ast_expr_op_type
_OP_NAMES = {
    _OP.and_: "and",
    _OP.and_then: "and",
    _OP.or_: "or",
    _OP.or_else: "or",
    _OP.max: "max",
    _OP.min: "min",
    _OP.minus: "neg",
    _OP.add: "add",
    _OP.sub: "sub",
    _OP.mul: "mul",
    _OP.div: "div",
    _OP.fdiv_q: "fdiv_q",
    _OP.pdiv_q: "pdiv_q",
    _OP.pdiv_r: "pdiv_r",
    _OP.zdiv_r: "zdiv_r",
    _OP.cond: "select",
    _OP.select: "select",
    _OP.eq: "eq",
    _OP.le: "le",
    _OP.lt: "lt",
    _OP.ge: "ge",
    _OP.gt: "gt",
    _OP.call: "call",
}


@dataclass(frozen=True)
class LExpr:
    """An AST expression: ``op`` is "int", "id" or an operator name; ``args`` holds
    the value (int), the name (str) or the operand LExprs."""

    op: str
    args: tuple

    def __str__(self) -> str:
        return to_py(self)


@dataclass(frozen=True)
class For:
    var: str
    init: LExpr
    cond: LExpr
    step: int
    body: tuple
    degenerate: bool = False

    def upper(self) -> tuple[LExpr, bool] | None:
        """``(bound, inclusive)`` when the condition is ``var <= b`` / ``var < b``."""
        c = self.cond
        if c.op in ("le", "lt") and c.args[0] == LExpr("id", (self.var,)):
            return c.args[1], c.op == "le"
        return None


@dataclass(frozen=True)
class If:
    cond: LExpr
    then: tuple
    orelse: tuple


@dataclass(frozen=True)
class Call:
    """One statement instance: ``stmt(args)`` with ``args`` its iterator values."""

    stmt: str
    args: tuple


@dataclass(frozen=True)
class Mark:
    name: str
    body: tuple


def calls_below(nodes) -> set[str]:
    """The statements called anywhere in ``nodes`` (a loop nest's nodes)."""
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, Call):
            out.add(n.stmt)
        elif isinstance(n, (For, Mark)):
            out |= calls_below(n.body)
        elif isinstance(n, If):
            out |= calls_below(n.then) | calls_below(n.orelse)
    return out


def build_ast(schedule: isl.Schedule, context: isl.Set) -> isl.AstNode:
    """isl's AST for ``schedule`` under parameter ``context``."""
    build = isl.AstBuild.from_context(context)
    return build.node_from_schedule(schedule)


def from_isl(node: isl.AstNode) -> tuple:
    """Convert an isl AST node into a tuple of loop-nest nodes."""
    t = node.get_type()
    T = isl.ast_node_type
    if t == T.block:
        out: list = []
        node.block_get_children().foreach(lambda n: out.extend(from_isl(n)))
        return tuple(out)
    if t == T.for_:
        return (
            For(
                var=_expr(node.for_get_iterator()).args[0],
                init=_expr(node.for_get_init()),
                cond=_expr(node.for_get_cond()),
                step=int(node.for_get_inc().get_val().to_python()),
                body=from_isl(node.for_get_body()),
                degenerate=bool(node.for_is_degenerate()),
            ),
        )
    if t == T.if_:
        orelse = from_isl(node.if_get_else_node()) if node.if_has_else_node() else ()
        return (
            If(_expr(node.if_get_cond()), from_isl(node.if_get_then_node()), orelse),
        )
    if t == T.user:
        e = _expr(node.user_get_expr())
        name = e.args[0].args[0]
        return (Call(name, e.args[1:]),)
    if t == T.mark:
        return (Mark(node.mark_get_id().get_name(), from_isl(node.mark_get_node())),)
    raise NotImplementedError(f"isl AST node type {t}")


def _expr(e: isl.AstExpr) -> LExpr:
    T = isl.ast_expr_type
    t = e.get_type()
    if t == T.int:
        return LExpr("int", (int(e.get_val().to_python()),))
    if t == T.id:
        return LExpr("id", (e.get_id().get_name(),))
    op = _OP_NAMES.get(e.get_op_type())
    if op is None:
        raise NotImplementedError(f"isl AST op {e.get_op_type()}")
    args = tuple(_expr(e.get_op_arg(i)) for i in range(e.get_op_n_arg()))
    return LExpr(op, args)


def expr_from_isl(e: isl.AstExpr) -> LExpr:
    """An isl AST expression as an :class:`LExpr`."""
    return _expr(e)


def loop_nest(
    schedule: isl.Schedule, context: isl.Set, reserved: frozenset[str] = frozenset()
) -> tuple:
    """The loop nest of ``schedule`` as Python nodes.

    Loops of a named band take the band's member names (``i``, ``j``, ``i_t``) where
    that clashes with no enclosing loop and no name in ``reserved`` (parameters,
    arrays); other loops keep isl's ``c<depth>``.
    """
    nest = from_isl(build_ast(schedule, context))
    depths = _band_depths(schedule)
    params = set(context.get_var_dict(isl.dim_type.param))
    return _rename(nest, depths, {}, frozenset(reserved) | params)


def _band_depths(schedule: isl.Schedule) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Band name -> (schedule depth of its first member, member names)."""
    from polyc.ir.tree import parse_band_mark

    out: dict[str, tuple[int, tuple[str, ...]]] = {}

    def visit(node: isl.ScheduleNode, depth: int) -> None:
        t = node.get_type()
        if t == isl.schedule_node_type.mark:
            parsed = parse_band_mark(node.mark_get_id().get_name())
            if parsed:
                out[node.mark_get_id().get_name()] = (depth, parsed[1])
        if t == isl.schedule_node_type.band:
            depth += node.band_n_member()
        for i in range(node.n_children()):
            visit(node.child(i), depth)

    visit(schedule.get_root(), 0)
    return out


#: marks that name the band's outer loop; dropped where isl elides that loop
LOOP_MARKS = ("@parallel", "@vectorize", "@unroll")


def _rename(
    nodes: tuple, depths, names: dict[str, str], reserved, first: str | None = None
) -> tuple:
    """Rename isl's loops to member names. ``first`` is isl's name for the outer loop
    of the band whose attribute marks are being walked: a loop mark (``@parallel``)
    whose first loop is another one (isl dropped a single-iteration outer member)
    names a loop that does not exist, and is dropped rather than moved to a loop that
    the legality check never looked at."""
    out = []
    for n in nodes:
        if isinstance(n, Mark) and n.name in depths:
            depth, members = depths[n.name]
            inner = dict(names)
            taken = set(names.values()) | reserved
            for m, member in enumerate(members):
                iso = f"c{depth + m}"
                if member and member not in taken and member not in inner:
                    inner[iso] = member
                    taken.add(member)
            body = _rename(n.body, depths, inner, reserved, f"c{depth}")
            out.append(Mark(n.name, body))
        elif isinstance(n, Mark):
            body = _rename(n.body, depths, names, reserved, first)
            if n.name.split("(")[0] in LOOP_MARKS and not _first_loop_is(n.body, first):
                out.extend(body)
            else:
                out.append(Mark(n.name, body))
        elif isinstance(n, For):
            out.append(
                For(
                    names.get(n.var, n.var),
                    _subst(n.init, names),
                    _subst(n.cond, names),
                    n.step,
                    _rename(n.body, depths, names, reserved),
                    n.degenerate,
                )
            )
        elif isinstance(n, If):
            out.append(
                If(
                    _subst(n.cond, names),
                    _rename(n.then, depths, names, reserved),
                    _rename(n.orelse, depths, names, reserved),
                )
            )
        elif isinstance(n, Call):
            out.append(Call(n.stmt, tuple(_subst(a, names) for a in n.args)))
        else:
            out.append(n)
    return tuple(out)


def _first_loop_is(body: tuple, iso: str | None) -> bool:
    """Whether the first loop under a chain of marks is isl's loop ``iso``."""
    while body and isinstance(body[0], Mark):
        body = body[0].body
    return (
        iso is None or not body or not isinstance(body[0], For) or (body[0].var == iso)
    )


def _subst(e: LExpr, names: dict[str, str]) -> LExpr:
    if not names:
        return e
    if e.op == "id":
        new = names.get(e.args[0])
        return LExpr("id", (new,)) if new else e
    if e.op == "int":
        return e
    return LExpr(e.op, tuple(_subst(a, names) for a in e.args))


def minus_one(e: LExpr) -> LExpr:
    """``e - 1`` folded into a trailing constant where there is one."""
    if e.op == "int":
        return LExpr("int", (e.args[0] - 1,))
    if e.op == "sub" and e.args[1].op == "int":
        return LExpr("sub", (e.args[0], LExpr("int", (e.args[1].args[0] + 1,))))
    if e.op == "add" and e.args[1].op == "int":
        c = e.args[1].args[0] - 1
        if c == 0:
            return e.args[0]
        return LExpr("add", (e.args[0], LExpr("int", (c,))))
    return LExpr("sub", (e, LExpr("int", (1,))))


# rendering -----------------------------------------------------------------------

_C_INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "eq": "==",
    "le": "<=",
    "lt": "<",
    "ge": ">=",
    "gt": ">",
    "and": "&&",
    "or": "||",
    "pdiv_r": "%",
    "zdiv_r": "%",
    "pdiv_q": "/",
}
_PY_INFIX = dict(_C_INFIX, **{"and": "and", "or": "or", "pdiv_q": "//"})
_PREC = {"or": 1, "and": 2, "eq": 3, "le": 4, "lt": 4, "ge": 4, "gt": 4}
_PREC.update({"add": 5, "sub": 5, "mul": 6, "div": 6, "pdiv_q": 6, "pdiv_r": 6})
_PREC["zdiv_r"] = 6


def to_c(e: LExpr, name=lambda n: n, prec: int = 0) -> str:
    """C text; ``floord``, ``min``/``max`` are macros the generated file defines."""
    return _render(e, name, prec, _C_INFIX, c_style=True)


def to_py(e: LExpr, name=lambda n: n, prec: int = 0) -> str:
    return _render(e, name, prec, _PY_INFIX, c_style=False)


def _render(e: LExpr, name, prec, infix, c_style) -> str:
    def r(x, p=0):
        return _render(x, name, p, infix, c_style)

    if e.op == "int":
        v = e.args[0]
        return f"({v})" if v < 0 and prec > 0 else str(v)
    if e.op == "id":
        return name(e.args[0])
    if e.op == "neg":
        return f"-{r(e.args[0], 7)}"
    if e.op in infix:
        p = _PREC[e.op]
        text = f"{r(e.args[0], p)} {infix[e.op]} {r(e.args[1], p + 1)}"
        return f"({text})" if p < prec else text
    if e.op == "fdiv_q":
        if c_style:
            return f"floord({r(e.args[0])}, {r(e.args[1])})"
        return f"({r(e.args[0], 6)} // {r(e.args[1], 7)})"
    if e.op in ("min", "max"):
        out = r(e.args[0])
        for a in e.args[1:]:
            out = f"{e.op}({out}, {r(a)})"
        return out
    if e.op == "select":
        c, a, b = (r(x, 1) for x in e.args)
        text = f"{c} ? {a} : {b}" if c_style else f"{a} if {c} else {b}"
        return f"({text})"
    if e.op == "call":
        return f"{r(e.args[0])}({', '.join(r(a) for a in e.args[1:])})"
    raise NotImplementedError(e.op)


def evaluate(e: LExpr, env: dict):
    """Evaluate with numpy: ``env`` maps names to ints or int64 arrays."""
    op, args = e.op, e.args
    if op == "int":
        return args[0]
    if op == "id":
        return env[args[0]]
    vals = [evaluate(a, env) for a in args]
    if op == "add":
        return vals[0] + vals[1]
    if op == "sub":
        return vals[0] - vals[1]
    if op == "mul":
        return vals[0] * vals[1]
    if op == "neg":
        return -vals[0]
    if op in ("fdiv_q", "pdiv_q", "div"):
        return np.floor_divide(vals[0], vals[1])
    if op in ("pdiv_r", "zdiv_r"):
        return np.remainder(vals[0], vals[1])  # operands are non-negative where used
    if op == "min":
        out = vals[0]
        for v in vals[1:]:
            out = np.minimum(out, v)
        return out
    if op == "max":
        out = vals[0]
        for v in vals[1:]:
            out = np.maximum(out, v)
        return out
    if op == "select":
        return np.where(vals[0], vals[1], vals[2])
    if op == "and":
        return np.logical_and(vals[0], vals[1])
    if op == "or":
        return np.logical_or(vals[0], vals[1])
    cmp = {"eq": np.equal, "le": np.less_equal, "lt": np.less}
    cmp.update({"ge": np.greater_equal, "gt": np.greater})
    if op in cmp:
        return cmp[op](vals[0], vals[1])
    raise NotImplementedError(op)
