"""Readable text for kernels: their arrays, statements and loop nest as pseudo-code."""

from __future__ import annotations

from collections.abc import Mapping

import islpy as isl

from polyc.ir import loops, tree
from polyc.ir import marks as placemarks
from polyc.ir.affine import Aff, var
from polyc.ir.expr import render, substitute_indices
from polyc.ir.treeview import tree_text


def kernel_text(kernel) -> str:
    lines = [
        f"kernel {kernel.name}({', '.join(kernel.params)})"
        if kernel.params
        else f"kernel {kernel.name}"
    ]
    for a in kernel.arrays.values():
        bound = "  (bound)" if a.name in kernel.data else ""
        lines.append(f"  {a}{bound}")
    extra = _context_text(kernel)
    if extra:
        lines.append(f"  assuming {extra}")
    lines.append("statements:")
    for s in kernel.statements:
        dom = str(s.domain.remove_redundancies())
        dom = dom[dom.index("{") :] if "{" in dom else dom
        lines.append(f"  {s.name}: {s.target} = {render(s.body)}")
        lines.append(f"      for {dom}")
    lines.append("schedule tree:")
    lines.append(_indent(tree_text(kernel.schedule), 2))
    lines.append("loop nest:")
    lines.append(_indent(loop_nest_text(kernel), 2))
    if kernel.history:
        lines.append("history:")
        lines.extend(f"  {step}" for step in kernel.history)
    return "\n".join(lines)


def _context_text(kernel) -> str:
    ctx = kernel.context
    trivial = isl.Set(
        f"{_head(kernel.params)}{{ : {' and '.join(f'{p} >= 1' for p in kernel.params) or '1 = 1'} }}"
    )
    if ctx.is_equal(trivial) or ctx.is_equal(isl.Set.universe(ctx.get_space())):
        return ""
    text = str(ctx)
    return text[text.index("{") :]


def _head(params) -> str:
    return f"[{', '.join(params)}] -> " if params else ""


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


def loop_nest_text(kernel, params: Mapping[str, int] | None = None) -> str:
    """The loop nest of ``kernel.schedule`` (specialised to ``params`` when given)."""
    ctx = kernel.context
    if params:
        fix = " and ".join(f"{p} = {v}" for p, v in params.items())
        ctx = ctx.intersect(isl.Set(f"{_head(kernel.params)}{{ : {fix} }}"))
    nest = loops.loop_nest(kernel.schedule, ctx, frozenset(kernel.arrays))
    stmts = {s.name: s for s in kernel.statements}
    out: list[str] = []
    folded = {
        t.init: t.stmt
        for t in (
            placemarks.TensorizeMark.parse(m)
            for m in tree.marks(kernel.schedule)
            if placemarks.kind(m) == "tensorize"
        )
        if t.init
    }
    _emit(nest, stmts, out, 0, folded)
    return "\n".join(out)


def _emit(nodes, stmts, out: list[str], depth: int, folded=None) -> None:
    """Append the lines of ``nodes``; ``folded``: zero inits folded into MAC calls
    (init -> the MAC statement), whose loops do not run."""
    folded = folded or {}
    pad = "  " * depth
    for n in nodes:
        if isinstance(n, loops.For):
            bound = n.upper()
            if bound is not None:
                hi, inclusive = bound
                hi_text = loops.to_py(hi if inclusive else loops.minus_one(hi))
                step = f" step {n.step}" if n.step != 1 else ""
                out.append(
                    f"{pad}for {n.var} in {loops.to_py(n.init)}..{hi_text}{step}:"
                )
            else:
                out.append(
                    f"{pad}for {n.var} = {loops.to_py(n.init)}; {loops.to_py(n.cond)}; "
                    f"{n.var} += {n.step}:"
                )
            _emit(n.body, stmts, out, depth + 1, folded)
        elif isinstance(n, loops.If):
            out.append(f"{pad}if {loops.to_py(n.cond)}:")
            _emit(n.then, stmts, out, depth + 1, folded)
            if n.orelse:
                out.append(f"{pad}else:")
                _emit(n.orelse, stmts, out, depth + 1, folded)
        elif isinstance(n, loops.Mark):
            parsed = tree.parse_band_mark(n.name)
            label = f"band {parsed[0]}" if parsed else placemarks.summary(n.name)
            below = loops.calls_below(n.body)
            if below and all(c in folded for c in below):
                # codegen emits no loops for it: the next MAC calls overwrite
                into = ", ".join(
                    sorted({f"{placemarks.MAC}{folded[c]}" for c in below})
                )
                out.append(
                    f"{pad}# {label}: {', '.join(sorted(below))} folded into {into}"
                )
                continue
            out.append(f"{pad}# {label}")
            body = n.body
            if placemarks.kind(n.name) == "tensorize":
                # what runs is the MAC call; the statement's scalar loops below it
                # are what it replaced (codegen emits only the calls)
                body = tuple(x for x in body if isinstance(x, loops.Call))
            _emit(body, stmts, out, depth, folded)
            if placemarks.kind(n.name) == "vector":
                vm = placemarks.VectorMark.parse(n.name)
                unit = "MAC array output path" if vm.unit == "mac" else "vector unit"
                out.append(
                    f"{pad}pc_vector({', '.join(vm.stmts)})  # the tile's instances "
                    f"as one {unit} operation"
                )
        elif isinstance(n, loops.Call):
            out.append(f"{pad}{statement_call_text(stmts.get(n.stmt), n)}")


def statement_call_text(stmt, call: loops.Call) -> str:
    """``C[c0, c1] = ...  # S1`` with the loop variables substituted."""
    if stmt is None:
        args = ", ".join(loops.to_py(a) for a in call.args)
        return f"{call.stmt}({args})"
    mapping: dict[str, Aff] = {}
    simple = True
    for it, arg in zip(stmt.iterators, call.args):
        aff = _lexpr_aff(arg)
        if aff is None:
            simple = False
            break
        mapping[it] = aff
    if not simple:
        args = ", ".join(loops.to_py(a) for a in call.args)
        return f"{stmt.name}({args})"
    target = substitute_indices(stmt.target, mapping)
    body = substitute_indices(stmt.body, mapping)
    return f"{render(target)} = {render(body)}  # {stmt.name}"


def _lexpr_aff(e: loops.LExpr) -> Aff | None:
    if e.op == "int":
        return Aff(const=e.args[0])
    if e.op == "id":
        return var(e.args[0])
    parts = [_lexpr_aff(a) for a in e.args]
    if any(p is None for p in parts):
        return None
    try:
        if e.op == "add":
            return parts[0] + parts[1]
        if e.op == "sub":
            return parts[0] - parts[1]
        if e.op == "neg":
            return -parts[0]
        if e.op == "mul":
            return parts[0] * parts[1]
        if e.op in ("fdiv_q", "pdiv_q") and parts[1].is_constant:
            return parts[0] // parts[1]
    except Exception:
        return None
    return None
