"""Affine expressions, maps and integer sets as MLIR text.

isl's AST gives loop bounds and guards as :class:`polyc.ir.loops.LExpr` trees; the
kernel's accesses are :class:`polyc.ir.affine.Aff`. Both become MLIR's affine
expressions here: a bound is one map whose results MLIR combines with ``max`` (lower)
or ``min`` (upper), a guard is an ``affine_set`` of ``>= 0`` and ``== 0``
constraints, an access is an inline expression of SSA values (``%i floordiv 4``,
``symbol(%N)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.errors import CodegenError
from polyc.ir.affine import Aff
from polyc.ir.loops import LExpr, to_c


def to_aff(e: LExpr) -> Aff:
    """An isl AST expression as an Aff (``+ - *const`` and division by constants).

    Raises:
        CodegenError: for min, max, select or a product of two variables.
    """
    op, args = e.op, e.args
    if op == "int":
        return Aff(const=args[0])
    if op == "id":
        return Aff({args[0]: 1})
    if op == "neg":
        return -to_aff(args[0])
    if op in ("add", "sub", "mul"):
        a, b = to_aff(args[0]), to_aff(args[1])
        if op == "mul" and not (a.is_constant or b.is_constant):
            raise _unaffine(e, "it multiplies two variables")
        return a + b if op == "add" else a - b if op == "sub" else a * b
    if op in ("fdiv_q", "pdiv_q", "div", "pdiv_r", "zdiv_r"):
        a, b = to_aff(args[0]), to_aff(args[1])
        if not b.is_constant or b.const <= 0:
            raise _unaffine(e, "it divides by a non-constant")
        return a % b.const if op in ("pdiv_r", "zdiv_r") else a // b.const
    raise _unaffine(e, f"it uses {op}")


def _unaffine(e: LExpr, why: str) -> CodegenError:
    return CodegenError(
        f"to_mlir: the loop expression {to_c(e)} is not an affine expression because "
        f"{why}. Give the schedule affine bounds (no data-dependent or non-affine "
        "loop bounds)."
    )


def split(e: LExpr, op: str) -> list[LExpr]:
    """The operands of a top-level ``min``/``max`` (nested ones flattened)."""
    if e.op == op:
        return [x for a in e.args for x in split(a, op)]
    return [e]


def render(aff: Aff, name) -> str:
    """MLIR affine-expression text of ``aff`` with ``name(var)`` for variables."""
    return aff.render(name, lambda num, den: f"(({num}) floordiv {den})")


@dataclass
class Operands:
    """Collects the dims and symbols of one affine map: parameters become symbols,
    everything else (loop variables, values bound by ``affine.apply``) dims."""

    params: frozenset[str]

    def __post_init__(self):
        self.dims: list[str] = []
        self.syms: list[str] = []

    def name(self, var: str) -> str:
        if var in self.params:
            if var not in self.syms:
                self.syms.append(var)
            return f"s{self.syms.index(var)}"
        if var not in self.dims:
            self.dims.append(var)
        return f"d{self.dims.index(var)}"

    def head(self) -> str:
        syms = f"[{', '.join(f's{i}' for i in range(len(self.syms)))}]"
        return f"({', '.join(f'd{i}' for i in range(len(self.dims)))})" + (
            syms if self.syms else ""
        )

    def args(self, ssa) -> str:
        text = f"({', '.join(ssa(d) for d in self.dims)})"
        return text + (f"[{', '.join(ssa(s) for s in self.syms)}]" if self.syms else "")


def affine_map(affs: list[Aff], params: frozenset[str], ssa) -> str:
    """``affine_map<(d..)[s..] -> (results)>(%dims)[%syms]``."""
    ops = Operands(params)
    results = ", ".join(render(a, ops.name) for a in affs)
    return f"affine_map<{ops.head()} -> ({results})>{ops.args(ssa)}"


def bound(affs: list[Aff], keyword: str, params: frozenset[str], ssa) -> str:
    """A loop bound: a constant, a lone parameter, or ``max``/``min`` of a map."""
    if len(affs) == 1:
        (a,) = affs
        if a.is_constant:
            return str(a.const)
        if a.terms == ((next(iter(a.names())), 1),) and a.const == 0:
            (name,) = a.names()
            if name in params:
                return ssa(name)
        return affine_map(affs, params, ssa)
    return f"{keyword} {affine_map(affs, params, ssa)}"


def inline(aff: Aff, params: frozenset[str], ssa) -> str:
    """An access subscript: ``%i + symbol(%N) * 2``."""
    return render(aff, lambda v: f"symbol({ssa(v)})" if v in params else ssa(v))


# guards --------------------------------------------------------------------------

_FLIP = {"le": "ge", "lt": "gt", "ge": "le", "gt": "lt", "eq": "eq"}


def constraints(e: LExpr) -> list[list[tuple[Aff, bool]]] | None:
    """A guard as a disjunction of conjunctions of ``(aff, is_equality)`` meaning
    ``aff >= 0`` or ``aff == 0``; None when it is not affine."""
    if e.op == "and":
        left, right = constraints(e.args[0]), constraints(e.args[1])
        if left is None or right is None:
            return None
        return [a + b for a in left for b in right]
    if e.op == "or":
        left, right = constraints(e.args[0]), constraints(e.args[1])
        if left is None or right is None:
            return None
        return left + right
    if e.op not in _FLIP:
        return None
    op, a, b = e.op, e.args[0], e.args[1]
    if op in ("le", "lt"):  # a <= b  ->  b >= a
        op, a, b = _FLIP[op], b, a
    # now a >= b, a > b or a == b; a min on the left or a max on the right splits
    # into a conjunction; the other way round it would be a disjunction
    lefts = split(a, "min") if op != "eq" else [a]
    rights = split(b, "max") if op != "eq" else [b]
    out: list[tuple[Aff, bool]] = []
    try:
        for x in lefts:
            for y in rights:
                if x.op == "max" or y.op == "min" or x.op == "min" or y.op == "max":
                    return None
                diff = to_aff(x) - to_aff(y) - (1 if op == "gt" else 0)
                out.append((diff, op == "eq"))
    except CodegenError:
        return None
    return [out]


def integer_set(conj: list[tuple[Aff, bool]], params: frozenset[str], ssa) -> str:
    """``affine_set<(d..)[s..] : (c >= 0, ...)>(%dims)[%syms]``."""
    ops = Operands(params)
    parts = [f"{render(a, ops.name)} {'==' if eq else '>='} 0" for a, eq in conj]
    return f"affine_set<{ops.head()} : ({', '.join(parts)})>{ops.args(ssa)}"
