"""C integer expressions as isl piecewise quasi-affine functions and conditions as sets.

Loop bounds, ``if`` conditions and subscripts must be affine in the loop iterators and
the parameters. They are translated into ``isl.PwAff`` (``isl.Set`` for conditions)
with C's semantics: ``/`` and ``%`` truncate toward zero, a ternary is a piecewise
function, and the usual spellings of ``min``, ``max``, ``floord`` and ``ceild`` (macros
that expand to ternaries or to ``floor((double)n / d)``, or functions by those names)
come out exact. Anything else raises :class:`NotAffine`, which the region walker turns
into a ``FrontendError`` that points at the construct.
"""

from __future__ import annotations

from fractions import Fraction

import islpy as isl
from pycparser import c_ast

from polyc.frontends.c.types import float_literal, int_literal
from polyc.ir.affine import Aff, FloorDiv

_MIN_NAMES = {"min", "MIN", "imin", "min_int"}
_MAX_NAMES = {"max", "MAX", "imax", "max_int"}
_FLOORD = {"floord", "FLOORD", "floor_div", "floordiv"}
_CEILD = {"ceild", "CEILD", "ceil_div", "ceildiv"}
_FLOOR = {"floor", "floorf"}
_CEIL = {"ceil", "ceilf"}
_INT_CASTS = {"int", "long", "short", "char", "signed", "unsigned", "size_t"}


class NotAffine(Exception):
    """``node`` is not affine; ``why`` says what it is instead."""

    def __init__(self, node, why: str):
        super().__init__(why)
        self.node = node
        self.why = why


class _Float:
    """A real-valued PwAff (from a cast to double), allowed only under floor/ceil."""

    def __init__(self, pw: isl.PwAff):
        self.pw = pw


class AffineBuilder:
    """Translates expressions over ``iters`` (the enclosing loop variables, outermost
    first) and ``params``. ``known`` holds the values of macro parameters: a product
    of two variable expressions is affine once a macro in it takes its value."""

    def __init__(
        self,
        params: list[str],
        iters: list[str],
        known: dict[str, int],
        pinned: set[str] | None = None,
    ):
        self.params = list(params)
        self.iters = list(iters)
        self.known = known
        #: macros whose value was substituted: the region holds for that value only
        self.pinned = pinned if pinned is not None else set()
        self._head = f"[{', '.join(params)}] -> " if params else ""
        self._dims = ", ".join(iters)
        self._substitute = False

    # leaves ------------------------------------------------------------------------
    def const(self, value) -> isl.PwAff:
        return isl.PwAff(f"{self._head}{{ [{self._dims}] -> [({value})] }}")

    def name(self, name: str) -> isl.PwAff:
        if self._substitute and name in self.known:
            self.pinned.add(name)
            return self.const(self.known[name])
        return isl.PwAff(f"{self._head}{{ [{self._dims}] -> [({name})] }}")

    def universe(self) -> isl.Set:
        return isl.Set(f"{self._head}{{ [{self._dims}] }}")

    # expressions -------------------------------------------------------------------
    def expr(self, node) -> isl.PwAff:
        """The value of ``node`` as a PwAff. Raises NotAffine."""
        out = self._expr(node)
        if isinstance(out, _Float):
            raise NotAffine(node, "a floating-point value")
        return out

    def _expr(self, node):
        if isinstance(node, c_ast.Constant):
            if node.type in ("int", "long int", "unsigned int", "long long int") or (
                "int" in node.type
            ):
                return self.const(int_literal(node.value)[0])
            if node.type == "char":
                from polyc.frontends.c.types import char_literal

                return self.const(char_literal(node.value))
            if node.type in ("double", "float"):
                value = Fraction(float_literal(node.value)[0])
                return _Float(self._fraction(node, value))
            raise NotAffine(node, f"a {node.type} constant")
        if isinstance(node, c_ast.ID):
            if node.name in self.iters or node.name in self.params:
                return self.name(node.name)
            if node.name in self.known:  # a macro taken as its value
                return self.const(self.known[node.name])
            raise NotAffine(node, f"the variable {node.name}, which is not a parameter")
        if isinstance(node, c_ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, c_ast.BinaryOp):
            return self._binary(node)
        if isinstance(node, c_ast.TernaryOp):
            cond = self.cond(node.cond)
            a, b = self._expr(node.iftrue), self._expr(node.iffalse)
            if isinstance(a, _Float) or isinstance(b, _Float):
                fa, fb = _as_float(a), _as_float(b)
                return _Float(_select(cond, fa.pw, fb.pw))
            return _select(cond, a, b)
        if isinstance(node, c_ast.Cast):
            return self._cast(node)
        if isinstance(node, c_ast.FuncCall):
            return self._call(node)
        if isinstance(node, c_ast.ArrayRef):
            raise NotAffine(node, "a value read from an array (data-dependent)")
        raise NotAffine(node, f"a {type(node).__name__} expression")

    def _fraction(self, node, value: Fraction) -> isl.PwAff:
        pw = self.const(value.numerator)
        if value.denominator != 1:
            pw = pw.div(self.const(value.denominator))
        return pw

    def _unary(self, node: c_ast.UnaryOp):
        if node.op == "-":
            x = self._expr(node.expr)
            return _Float(x.pw.neg()) if isinstance(x, _Float) else x.neg()
        if node.op == "+":
            return self._expr(node.expr)
        if node.op in ("p++", "p--", "++", "--"):
            raise NotAffine(
                node, f"an increment ({node.op.strip('p')}) with a side effect"
            )
        raise NotAffine(node, f"the operator '{node.op}'")

    def _binary(self, node: c_ast.BinaryOp):
        op = node.op
        if op in ("+", "-"):
            a, b = self._expr(node.left), self._expr(node.right)
            if isinstance(a, _Float) or isinstance(b, _Float):
                fa, fb = _as_float(a).pw, _as_float(b).pw
                return _Float(fa.add(fb) if op == "+" else fa.sub(fb))
            return a.add(b) if op == "+" else a.sub(b)
        if op == "*":
            return self._mul(node)
        if op in ("/", "%"):
            a, b = self._expr(node.left), self._divisor(node.right)
            if isinstance(a, _Float) or isinstance(b, _Float):
                if op == "%":
                    raise NotAffine(node, "'%' on a floating-point value")
                d = _constant(_as_float(b).pw)
                if d is None or d == 0:
                    raise NotAffine(node, "a division by a non-constant")
                return _Float(_as_float(a).pw.scale_down_val(isl.Val(str(d))))
            d = _constant(b)
            if d is None:
                raise NotAffine(node, f"a '{op}' by a value that is not constant")
            if d == 0:
                raise NotAffine(node, f"a '{op}' by zero")
            divisor = self.const(abs(d))
            if op == "/":
                q = a.tdiv_q(divisor)
                return q.neg() if d < 0 else q
            return a.tdiv_r(divisor)
        if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
            raise NotAffine(node, f"a condition ('{op}') used as a number")
        raise NotAffine(node, f"the operator '{op}'")

    def _divisor(self, node):
        """A divisor: macros take their values (a division by a macro is affine)."""
        old, self._substitute = self._substitute, bool(self.known)
        try:
            return self._expr(node)
        finally:
            self._substitute = old

    def _mul(self, node: c_ast.BinaryOp):
        a, b = self._expr(node.left), self._expr(node.right)
        fa, fb = isinstance(a, _Float), isinstance(b, _Float)
        pa, pb = (a.pw if fa else a), (b.pw if fb else b)
        wrap = _Float if (fa or fb) else (lambda x: x)
        if pa.is_cst():
            return wrap(pb.mul(pa))
        if pb.is_cst():
            return wrap(pa.mul(pb))
        if self.known and not self._substitute:
            self._substitute = True
            try:
                return self._mul(node)
            finally:
                self._substitute = False
        raise NotAffine(node, "a product of two variables")

    def _cast(self, node: c_ast.Cast):
        words = _type_words(node.to_type)
        x = self._expr(node.expr)
        if words & {"double", "float"}:
            return x if isinstance(x, _Float) else _Float(x)
        if words and words <= _INT_CASTS:
            if isinstance(x, _Float):
                # C converts toward zero: floor for x >= 0, ceil below
                pw = x.pw
                return _select(pw.nonneg_set(), pw.floor(), pw.ceil())
            return x
        raise NotAffine(node, f"a cast to {' '.join(sorted(words)) or 'a pointer'}")

    def _call(self, node: c_ast.FuncCall):
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        args = list(node.args.exprs) if node.args is not None else []
        if name in _MIN_NAMES | _MAX_NAMES and len(args) == 2:
            a, b = self.expr(args[0]), self.expr(args[1])
            return a.min(b) if name in _MIN_NAMES else a.max(b)
        if name in _FLOORD | _CEILD and len(args) == 2:
            a, b = self.expr(args[0]), self._divisor(args[1])
            d = _constant(b)
            if d is None or d <= 0:
                raise NotAffine(
                    node, f"{name} by a value that is not a positive constant"
                )
            q = a.div(self.const(d))
            return q.floor() if name in _FLOORD else q.ceil()
        if name in _FLOOR | _CEIL and len(args) == 1:
            x = self._expr(args[0])
            pw = x.pw if isinstance(x, _Float) else x
            return pw.floor() if name in _FLOOR else pw.ceil()
        raise NotAffine(node, f"a call to {name or 'a function pointer'}")

    # conditions --------------------------------------------------------------------
    def cond(self, node) -> isl.Set:
        """The set of iterations where ``node`` is true. Raises NotAffine."""
        if isinstance(node, c_ast.BinaryOp):
            op = node.op
            if op == "&&":
                return self.cond(node.left).intersect(self.cond(node.right))
            if op == "||":
                return self.cond(node.left).union(self.cond(node.right))
            if op in ("<", "<=", ">", ">=", "==", "!="):
                a, b = self._expr(node.left), self._expr(node.right)
                if isinstance(a, _Float) or isinstance(b, _Float):
                    a, b = _as_float(a).pw, _as_float(b).pw
                fn = {
                    "<": "lt_set",
                    "<=": "le_set",
                    ">": "gt_set",
                    ">=": "ge_set",
                    "==": "eq_set",
                    "!=": "ne_set",
                }[op]
                return getattr(a, fn)(b)
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return self.universe().subtract(self.cond(node.expr))
        return self.expr(node).non_zero_set()


def _as_float(x) -> _Float:
    return x if isinstance(x, _Float) else _Float(x)


def _select(cond: isl.Set, a: isl.PwAff, b: isl.PwAff) -> isl.PwAff:
    universe = isl.Set.universe(cond.get_space())
    return a.intersect_domain(cond).union_add(
        b.intersect_domain(universe.subtract(cond))
    )


def _constant(pw: isl.PwAff):
    """The value of a constant PwAff (an int or a Fraction), else None."""
    if not pw.is_cst():
        return None
    pieces = pw.get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    f = Fraction(aff.get_constant_val().to_str())
    return int(f) if f.denominator == 1 else f


def _type_words(type_node) -> set[str]:
    node = getattr(type_node, "type", None)
    if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
        return set(node.type.names)
    return set()


def to_aff(pw: isl.PwAff, domain: isl.Set, params: list[str], iters: list[str]) -> Aff:
    """The single quasi-affine piece of ``pw`` on ``domain``, as a polyc Aff.

    Raises:
        ValueError: when ``pw`` has several pieces on the domain (a ternary, a
            truncating division of a value that may be negative) or is not defined
            on all of it.
    """
    pw = pw.gist(domain).coalesce()
    pieces = pw.get_pieces()
    if len(pieces) != 1:
        raise ValueError(f"{len(pieces)} pieces")
    dom, aff = pieces[0]
    if not domain.is_subset(dom):
        raise ValueError("not defined everywhere")
    return isl_aff_to_aff(aff, params, iters)


def isl_aff_to_aff(aff: isl.Aff, params: list[str], iters: list[str]) -> Aff:
    """An ``isl.Aff`` with integer values as a polyc :class:`Aff` (floors kept).

    Raises:
        ValueError: when a coefficient is not an integer.
    """
    out = Aff(const=_integer(aff.get_constant_val()))
    for kind in (isl.dim_type.param, isl.dim_type.in_):
        for pos in range(aff.dim(kind)):
            c = _integer(aff.get_coefficient_val(kind, pos))
            if c:
                out = out + Aff({aff.get_dim_name(kind, pos): c})
    for k in range(aff.dim(isl.dim_type.div)):
        c = _integer(aff.get_coefficient_val(isl.dim_type.div, k))
        if c:
            div = aff.get_div(k)  # the rational expression under the floor
            den = Fraction(div.get_denominator_val().to_str())
            inner = isl_aff_to_aff(div.scale_val(isl.Val(str(den))), params, iters)
            out = out + Aff({FloorDiv(inner, int(den)): c})
    return out


def _integer(v: isl.Val) -> int:
    f = Fraction(v.to_str())
    if f.denominator != 1:
        raise ValueError(f"a rational coefficient {f}")
    return int(f)


def _dim_names(aff: isl.Aff, kind) -> list[str]:
    return [aff.get_dim_name(kind, k) for k in range(aff.dim(kind))]
