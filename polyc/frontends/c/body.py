"""C expressions in statement bodies as typed polyc expressions, with C's semantics.

Every node gets the type C gives it (integer promotion, the usual arithmetic
conversions, ``double`` math functions and their ``f`` variants), made explicit with
casts, so that the interpreter and the generated C compute bit for bit what the
original C computes. Comparisons are ``bool`` in the IR and become ``int`` where C
uses them as numbers.
"""

from __future__ import annotations

from pycparser import c_ast

from polyc.frontends.c.affine import NotAffine
from polyc.frontends.c.types import (
    char_literal,
    common,
    float_literal,
    int_literal,
    promote,
)
from polyc.ir import dtypes
from polyc.ir.dtypes import DType
from polyc.ir.expr import Binary, Const, Expr, Select, Unary, cast

#: C math function -> (IR op, argument/result dtype, arity)
MATH = {}
for _op, _names in {
    "sqrt": ("sqrt",),
    "exp": ("exp",),
    "log": ("log",),
    "sin": ("sin",),
    "cos": ("cos",),
    "tanh": ("tanh",),
    "erf": ("erf",),
    "abs": ("fabs",),
    "floor": ("floor",),
    "ceil": ("ceil",),
    "round": ("round",),
}.items():
    for _n in _names:
        MATH[_n] = (_op, dtypes.float64, 1)
        MATH[_n + "f"] = (_op, dtypes.float32, 1)
MATH.update(
    {
        "pow": ("pow", dtypes.float64, 2),
        "powf": ("pow", dtypes.float32, 2),
        "fmin": ("min", dtypes.float64, 2),
        "fminf": ("min", dtypes.float32, 2),
        "fmax": ("max", dtypes.float64, 2),
        "fmaxf": ("max", dtypes.float32, 2),
        "fmod": ("mod", dtypes.float64, 2),
        "fmodf": ("mod", dtypes.float32, 2),
        "abs": ("abs", dtypes.int32, 1),
        "labs": ("abs", dtypes.int64, 1),
        "llabs": ("abs", dtypes.int64, 1),
    }
)

_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}
_CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


class BodyBuilder:
    """Translates body expressions; ``resolve(node)`` is the walker's callback for
    names and array elements (it returns an Expr, or raises NotAffine)."""

    def __init__(self, resolve, typedefs=None):
        self.resolve = resolve
        self.typedefs = typedefs or {}

    def value(self, node) -> Expr:
        """The value of ``node`` (an Expr typed as C types it). Raises NotAffine."""
        if isinstance(node, c_ast.Constant):
            return self._constant(node)
        if isinstance(node, (c_ast.ID, c_ast.ArrayRef)):
            return self.resolve(node)
        if isinstance(node, c_ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, c_ast.BinaryOp):
            return self._binary(node)
        if isinstance(node, c_ast.TernaryOp):
            c = self.truth(node.cond)
            a, b = self.value(node.iftrue), self.value(node.iffalse)
            dt = common(a.dtype, b.dtype)
            return Select(c, cast(a, dt), cast(b, dt), dt)
        if isinstance(node, c_ast.Cast):
            dt = self._cast_type(node)
            return cast(self.number(node.expr), dt)
        if isinstance(node, c_ast.FuncCall):
            return self._call(node)
        if isinstance(node, c_ast.Assignment):
            raise NotAffine(node, "an assignment inside an expression")
        if isinstance(node, c_ast.StructRef):
            raise NotAffine(node, "a struct member access")
        if isinstance(node, c_ast.ExprList):
            raise NotAffine(node, "a comma expression")
        raise NotAffine(node, f"a {type(node).__name__} expression")

    def number(self, node) -> Expr:
        """The value as a number (a comparison becomes C's int 0 or 1)."""
        e = self.value(node)
        return cast(e, dtypes.int32) if e.dtype == dtypes.bool_ else e

    def truth(self, node) -> Expr:
        """The value as a condition (non-zero is true)."""
        e = self.value(node)
        if e.dtype == dtypes.bool_:
            return e
        return Binary("ne", e, cast(Const(0, dtypes.int32), e.dtype), dtypes.bool_)

    # nodes ---------------------------------------------------------------------------
    def _constant(self, node: c_ast.Constant) -> Expr:
        t = node.type
        if t == "char":
            return Const(char_literal(node.value), dtypes.int32)
        if t in ("float", "double"):
            value, dt = float_literal(node.value)
            if node.value.rstrip("fF").endswith(("l", "L")):
                raise NotAffine(
                    node, "a long double constant (polyc has no long double)"
                )
            return Const(value, dt)
        if "int" in t:
            value, dt = int_literal(node.value)
            if "unsigned" in t and value > 2**31 - 1:
                raise NotAffine(node, "an unsigned constant beyond int's range")
            return Const(value, dt)
        raise NotAffine(node, f"a {t} constant")

    def _unary(self, node: c_ast.UnaryOp) -> Expr:
        op = node.op
        if op in ("-", "+"):
            x = self.number(node.expr)
            dt = promote(x.dtype)
            x = cast(x, dt)
            return Unary("neg", x, dt) if op == "-" else x
        if op == "!":
            return Unary("not", self.truth(node.expr), dtypes.bool_)
        if op in ("p++", "p--", "++", "--"):
            raise NotAffine(node, "an increment inside an expression (a side effect)")
        if op == "*":
            raise NotAffine(node, "a pointer dereference")
        if op == "&":
            raise NotAffine(node, "taking an address")
        if op == "sizeof":
            raise NotAffine(node, "sizeof")
        raise NotAffine(node, f"the operator '{op}' (polyc bodies have no bitwise ops)")

    def _binary(self, node: c_ast.BinaryOp) -> Expr:
        op = node.op
        if op in ("&&", "||"):
            a, b = self.truth(node.left), self.truth(node.right)
            return Binary("and" if op == "&&" else "or", a, b, dtypes.bool_)
        if op in _CMP:
            a, b = self.number(node.left), self.number(node.right)
            dt = common(a.dtype, b.dtype)
            return Binary(_CMP[op], cast(a, dt), cast(b, dt), dtypes.bool_)
        if op in _ARITH:
            a, b = self.number(node.left), self.number(node.right)
            dt = common(a.dtype, b.dtype)
            if op == "%" and dt.is_float:
                raise NotAffine(node, "'%' on floating-point operands (use fmod)")
            return Binary(_ARITH[op], cast(a, dt), cast(b, dt), dt)
        raise NotAffine(node, f"the operator '{op}' (polyc bodies have no bitwise ops)")

    def _cast_type(self, node: c_ast.Cast) -> DType:
        from polyc.frontends.c.types import resolve

        t = resolve(node.to_type.type, self.typedefs)
        dt = t.dtype if t is not None and not t.ndim else None
        if dt is None:
            raise NotAffine(node, "a cast to a type polyc has no dtype for")
        return dt

    def _call(self, node: c_ast.FuncCall) -> Expr:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name not in MATH:
            raise NotAffine(
                node,
                f"a call to {name or 'a function pointer'}, which may have side effects",
            )
        op, dt, arity = MATH[name]
        args = list(node.args.exprs) if node.args is not None else []
        if len(args) != arity:
            raise NotAffine(node, f"{name} with {len(args)} arguments")
        vals = [cast(self.number(a), dt) for a in args]
        if arity == 1:
            return Unary(op, vals[0], dt)
        return Binary(op, vals[0], vals[1], dt)
