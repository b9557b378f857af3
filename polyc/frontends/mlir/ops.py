"""One MLIR operation or attribute at a time: types, affine expressions, and the
``arith``/``math`` operations of the subset as :mod:`polyc.ir.expr` nodes."""

from __future__ import annotations

from polyc.errors import FrontendError
from polyc.ir import dtypes
from polyc.ir.affine import Aff
from polyc.ir.expr import Const, Expr, Index, binary, cast, select, unary

_FLOATS = {16: "float16", 32: "float32", 64: "float64"}
_INTS = {1: "bool", 8: "int8", 16: "int16", 32: "int32", 64: "int64"}
_BINARY = {
    "arith.addf": "add",
    "arith.addi": "add",
    "arith.subf": "sub",
    "arith.subi": "sub",
    "arith.mulf": "mul",
    "arith.muli": "mul",
    "arith.divf": "div",
    "arith.divsi": "div",
    "arith.remf": "mod",
    "arith.remsi": "mod",
    "arith.floordivsi": "floordiv",
    "arith.maximumf": "max",
    "arith.maxnumf": "max",
    "arith.maxsi": "max",
    "arith.minimumf": "min",
    "arith.minnumf": "min",
    "arith.minsi": "min",
    "arith.andi": "and",
    "arith.ori": "or",
    "math.powf": "pow",
}
_UNARY = {
    "arith.negf": "neg",
    "math.exp": "exp",
    "math.log": "log",
    "math.sqrt": "sqrt",
    "math.rsqrt": "rsqrt",
    "math.tanh": "tanh",
    "math.erf": "erf",
    "math.sin": "sin",
    "math.cos": "cos",
    "math.absf": "abs",
    "math.absi": "abs",
    "math.floor": "floor",
    "math.ceil": "ceil",
    "math.round": "round",
    "math.roundeven": "rint",
}
_CASTS = {
    "arith.extf",
    "arith.truncf",
    "arith.sitofp",
    "arith.fptosi",
    "arith.extsi",
    "arith.trunci",
}
# arith.cmpf predicates by number; unordered ones differ from ordered only on NaN
_CMPF = {1: "eq", 2: "gt", 3: "ge", 4: "lt", 5: "le", 8: "eq", 9: "gt", 10: "ge"}
_CMPF.update({11: "lt", 12: "le", 13: "ne"})
_CMPI = {0: "eq", 1: "ne", 2: "lt", 3: "le", 4: "gt", 5: "ge"}


def where(op, filename: str = "<mlir>") -> str:
    """``file:line:col`` of an xDSL operation (its location, when it has one)."""
    loc = getattr(op, "location", None)
    line = getattr(getattr(loc, "line", None), "data", None)
    if line is None:
        return filename
    return f"{loc.filename.data}:{line}:{loc.column.data}"


_where = where


def is_index(t) -> bool:
    return t.name == "index"


def dtype(op, t, filename: str):
    """The polyc dtype of an MLIR element type (signless integers are signed)."""
    name = getattr(t, "name", "")
    width = getattr(getattr(t, "width", None), "data", None)
    if name.startswith("f") and name[1:].isdigit():
        width = int(name[1:])
    text = None
    if name == "integer_type" and width in _INTS:
        sign = getattr(getattr(t, "signedness", None), "data", None)
        if sign is None or sign.name == "SIGNLESS":
            text = _INTS[width]
    elif width in _FLOATS and name.startswith("f"):
        text = _FLOATS[width]
    if text is None:
        raise FrontendError(
            f"{_where(op, filename)}: from_mlir: the element type {t} is not one "
            "polyc computes in because it is none of f16, f32, f64, i1, i8, i16, "
            "i32, i64. Convert the program to one of those types."
        )
    return dtypes.as_dtype(text)


def memref(op, t, filename: str):
    """``(dtype, shape)`` of a memref type (-1 for a dynamic extent)."""
    from xdsl.dialects.builtin import MemRefType, NoneAttr

    if not isinstance(t, MemRefType):
        raise FrontendError(
            f"{_where(op, filename)}: from_mlir: the argument type {t} is neither a "
            "memref nor an index because the program was not bufferized. Bufferize "
            "it (mlir-opt --one-shot-bufferize=bufferize-function-boundaries)."
        )
    layout_ok = isinstance(t.layout, NoneAttr) or "identity" in type(t.layout).__name__
    if not isinstance(t.memory_space, NoneAttr) or not layout_ok:
        raise FrontendError(
            f"{_where(op, filename)}: from_mlir: the memref {t} has a memory space "
            "or a layout because it is a view or an on-chip buffer; polyc imports "
            "plain row-major arrays in memory. Import the program before placement "
            "(polyc places it itself)."
        )
    return dtype(op, t.element_type, filename), [int(n) for n in t.get_shape()]


def affine(op, e, dims: list[Aff], syms: list[Aff], filename: str) -> Aff:
    """An xDSL affine expression over ``dims``/``syms`` as an Aff."""
    from xdsl.ir.affine import (
        AffineBinaryOpExpr,
        AffineBinaryOpKind,
        AffineConstantExpr,
        AffineDimExpr,
        AffineSymExpr,
    )

    if isinstance(e, AffineConstantExpr):
        return Aff(const=e.value)
    if isinstance(e, AffineDimExpr):
        return dims[e.position]
    if isinstance(e, AffineSymExpr):
        return syms[e.position]
    assert isinstance(e, AffineBinaryOpExpr)
    a = affine(op, e.lhs, dims, syms, filename)
    b = affine(op, e.rhs, dims, syms, filename)
    k = e.kind
    if k == AffineBinaryOpKind.Add:
        return a + b
    if k == AffineBinaryOpKind.Mul:
        return a * b
    if not b.is_constant or b.const <= 0:
        raise FrontendError(
            f"{_where(op, filename)}: from_mlir: {e} divides by {b}, which is not "
            "a positive constant. Divide by constants only."
        )
    if k == AffineBinaryOpKind.Mod:
        return a % b.const
    if k == AffineBinaryOpKind.FloorDiv:
        return a // b.const
    return -((-a) // b.const)  # ceildiv


def prop(op, name: str):
    """A property or attribute of ``op`` (generic printing puts some in either)."""
    value = op.properties.get(name)
    return value if value is not None else op.attributes.get(name)


def data(item) -> Expr:
    kind, value = item
    return Index(value) if kind == "aff" else value


def value(op, operand, filename: str):
    """The value an ``arith``/``math`` operation defines: ``("aff", Aff)`` for
    index arithmetic, ``("expr", Expr)`` for data.

    Raises:
        FrontendError: for an operation outside the subset.
    """
    name = op.name
    args = [operand(v) for v in op.operands]
    if len(op.results) != 1:
        raise _unsupported(op, filename)
    rtype = op.results[0].type
    if name == "arith.constant":
        attr = prop(op, "value")
        if is_index(rtype):
            return ("aff", Aff(const=int(attr.value.data)))
        dt = dtype(op, rtype, filename)
        v = attr.value.data
        return ("expr", Const(bool(v) if dt == dtypes.bool_ else v, dt))
    if is_index(rtype):  # index arithmetic stays affine
        if name in ("arith.addi", "arith.subi", "arith.muli") and all(
            k == "aff" for k, _ in args
        ):
            a, b = args[0][1], args[1][1]
            try:
                return (
                    "aff",
                    a + b
                    if name == "arith.addi"
                    else a - b
                    if name == "arith.subi"
                    else a * b,
                )
            except Exception:
                pass
        raise _unsupported(op, filename, "an index computed outside affine maps")
    if name == "arith.index_cast" and args[0][0] == "aff":
        return ("expr", cast(Index(args[0][1]), dtype(op, rtype, filename)))
    xs = [data(a) for a in args]
    if name in _BINARY:
        return ("expr", binary(_BINARY[name], xs[0], xs[1]))
    if name in _UNARY:
        return ("expr", unary(_UNARY[name], xs[0]))
    if name in _CASTS or (
        name in ("arith.extui", "arith.uitofp") and xs[0].dtype == dtypes.bool_
    ):
        return ("expr", cast(xs[0], dtype(op, rtype, filename)))
    if name == "arith.select":
        return ("expr", select(xs[0], xs[1], xs[2]))
    if name == "arith.xori" and xs[0].dtype == dtypes.bool_:
        other = [x for x in xs if isinstance(x, Const)]
        if other and other[0].value is True:
            rest = xs[1] if xs[0] is other[0] else xs[0]
            return ("expr", unary("not", rest))
    if name in ("arith.cmpf", "arith.cmpi"):
        pred = prop(op, "predicate")
        table = _CMPF if name == "arith.cmpf" else _CMPI
        p = table.get(int(pred.value.data))
        if p is not None:
            return ("expr", binary(p, xs[0], xs[1]))
    raise _unsupported(op, filename)


def _unsupported(op, filename: str, why: str | None = None) -> FrontendError:
    return FrontendError(
        f"{_where(op, filename)}: from_mlir: {op.name} is outside the subset polyc "
        f"imports because {why or 'it has no polyc expression'}. Lower it to affine "
        "loads and stores with arith and math values (docs/mlir.md lists the "
        "subset)."
    )
