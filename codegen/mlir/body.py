"""Statement bodies as ``arith`` and ``math`` operations, with the interpreter's
semantics (those of :mod:`codegen.cexpr`): C's truncating integer division,
``fmod``, ``a < b ? a : b`` for float min, ordered float comparisons (``!=`` is
unordered), float16 transcendental functions computed in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from codegen.cexpr import _SUFFIX
from polyc.errors import CodegenError
from polyc.ir import dtypes
from polyc.ir.dtypes import DType
from polyc.ir.expr import Binary, Cast, Const, Expr, Index, Load, Select, Unary

# the element types polyc computes in (integers are signless: uint8 is i8)
_TYPE = {**_SUFFIX, "uint8": "i8", "bool": "i1"}
# float ops MLIR's math dialect has under the same meaning as the C the host runs
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf"}
_MATH.update({"sin": "sin", "cos": "cos", "abs": "absf", "floor": "floor"})
_MATH.update({"ceil": "ceil", "round": "round", "rint": "roundeven"})
_ROUNDING = ("floor", "ceil", "round", "rint")
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UCMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}


def mlir_type(dt: DType) -> str:
    """The MLIR element type of ``dt`` (integers are signless; uint8 is i8).

    Raises:
        CodegenError: for bfloat16, which the MLIR export does not write yet.
    """
    if dt.name not in _TYPE:
        raise CodegenError(
            f"mlir: {dt} has no MLIR export because polyc writes the MLIR types of "
            f"{', '.join(sorted(_TYPE))} only. Cast the kernel's {dt} arrays to "
            "float32 or float16 before exporting it."
        )
    return _TYPE[dt.name]


def constant(value, dt: DType) -> str:
    """The attribute text of ``value`` in ``dt``: a float is rounded to ``dt`` once
    (by numpy, as the interpreter does) and written as that value's shortest
    decimal, which MLIR reads back exactly (inf and NaN as their bits)."""
    t = mlir_type(dt)
    if dt == dtypes.bool_:
        return "true" if value else "false"
    if dt.is_float:
        rounded = float(np.asarray(value, dtype=dt.numpy))
        if math.isfinite(rounded):  # the exact decimal of the rounded value
            text = repr(rounded)
            return f"{text if ('.' in text or 'e' in text) else text + '.0'} : {t}"
        bits = np.asarray(value, dtype=dt.numpy).view(f"uint{8 * dt.itemsize}")
        return f"0x{int(bits):0{2 * dt.itemsize}X} : {t}"
    v = int(np.asarray(value).astype(dt.numpy).astype(np.int64))
    if not dt.is_signed and v >= 128:
        v -= 256
    return f"{v} : {t}"


class Body:
    """Emits one statement instance's value into ``lines``.

    ``load(ld)`` returns the SSA value of a Load (it emits the ``affine.load``),
    ``index(aff)`` the ``index`` value of an affine expression of the statement's
    iterators (it emits an ``affine.apply``); ``fresh()`` names a new value.
    """

    def __init__(
        self,
        lines: list[str],
        fresh: Callable[[], str],
        load: Callable[[Load], str],
        index: Callable[[object], str],
    ):
        self.lines = lines
        self.fresh = fresh
        self.load = load
        self.index = index
        self._memo: dict[int, tuple[Expr, str]] = {}

    def op(self, text: str) -> str:
        v = self.fresh()
        self.lines.append(f"{v} = {text}")
        return v

    def __call__(self, e: Expr) -> str:
        """The SSA value of ``e``; a node the tree shares is emitted once."""
        done = self._memo.get(id(e))
        if done is not None:
            return done[1]
        expanded = expand(e)
        v = self._emit(e) if expanded is None else self(expanded)
        self._memo[id(e)] = (e, v)  # the node is kept, so its id stays its own
        return v

    def _emit(self, e: Expr) -> str:
        t = mlir_type(e.dtype)
        if isinstance(e, Const):
            return self.op(f"arith.constant {constant(e.value, e.dtype)}")
        if isinstance(e, Index):
            idx = self.index(e.aff)
            return self.op(f"arith.index_cast {idx} : index to i64")
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Cast):
            return self.cast(self(e.x), e.x.dtype, e.dtype)
        if isinstance(e, Select):
            c, a, b = self(e.cond), self(e.a), self(e.b)
            return self.op(f"arith.select {c}, {a}, {b} : {t}")
        if isinstance(e, Unary):
            return self.unary(e.op, self(e.x), e.dtype)
        if isinstance(e, Binary):
            return self.binary(e.op, self(e.a), self(e.b), e.a.dtype)
        raise CodegenError(
            f"to_mlir: the expression {e} has no MLIR form because it is a "
            f"{type(e).__name__}. Build the body from loads, constants and the ops "
            "of polyc.ir.expr."
        )

    def unary(self, op: str, x: str, dt: DType) -> str:
        t = mlir_type(dt)
        if op == "not":
            true = self.op("arith.constant true")
            return self.op(f"arith.xori {x}, {true} : i1")
        if op == "neg":
            if dt.is_float:
                return self.op(f"arith.negf {x} : {t}")
            zero = self.op(f"arith.constant {constant(0, dt)}")
            return self.op(f"arith.subi {zero}, {x} : {t}")
        if not dt.is_float:
            if op == "abs":
                return self.op(f"math.absi {x} : {t}")
            raise CodegenError(f"to_mlir: {op} of an integer ({dt}) is not supported.")
        if op in _MATH:
            return self.op(f"math.{_MATH[op]} {x} : {t}")
        raise CodegenError(f"to_mlir: unary op {op} has no MLIR form.")

    def binary(self, op: str, a: str, b: str, dt: DType) -> str:
        t = mlir_type(dt)
        fl = dt.is_float
        signed = dt.is_signed
        if op in _FCMP:
            if fl:
                return self.op(f"arith.cmpf {_FCMP[op]}, {a}, {b} : {t}")
            table = _ICMP if signed else _UCMP
            return self.op(f"arith.cmpi {table[op]}, {a}, {b} : {t}")
        if op in ("and", "or"):
            return self.op(f"arith.{op}i {a}, {b} : i1")
        if op in ("add", "sub", "mul"):
            return self.op(f"arith.{op}{'f' if fl else 'i'} {a}, {b} : {t}")
        if op in ("min", "max"):  # integers (floats were expanded)
            kind = "si" if signed else "ui"
            return self.op(f"arith.{op}{kind} {a}, {b} : {t}")
        if op == "div":
            if fl:
                return self.op(f"arith.divf {a}, {b} : {t}")
            return self.op(f"arith.div{'si' if signed else 'ui'} {a}, {b} : {t}")
        if op == "floordiv":  # integers
            if not signed:
                return self.op(f"arith.divui {a}, {b} : {t}")
            return self.op(f"arith.floordivsi {a}, {b} : {t}")
        if op == "mod":
            if fl:
                return self.op(f"arith.remf {a}, {b} : {t}")
            return self.op(f"arith.rem{'si' if signed else 'ui'} {a}, {b} : {t}")
        if op == "pow":  # float32/64 (the others were expanded)
            return self.op(f"math.powf {a}, {b} : {t}")
        raise CodegenError(f"to_mlir: binary op {op} has no MLIR form.")

    def cast(self, x: str, src: DType, dst: DType) -> str:
        """``(dst) x`` as C converts."""
        if src == dst or (mlir_type(src) == mlir_type(dst) and src.is_float):
            return x
        s, d = mlir_type(src), mlir_type(dst)
        if dst == dtypes.bool_:
            zero = self.op(f"arith.constant {constant(0, src)}")
            if src.is_float:
                return self.op(f"arith.cmpf une, {x}, {zero} : {s}")
            return self.op(f"arith.cmpi ne, {x}, {zero} : {s}")
        unsigned = src == dtypes.bool_ or not src.is_signed
        if src.is_float and dst.is_float:
            op = "extf" if dst.itemsize > src.itemsize else "truncf"
        elif src.is_float:
            op = "fptosi" if dst.is_signed else "fptoui"
        elif dst.is_float:
            op = "uitofp" if unsigned else "sitofp"
        elif s == d:
            return x
        elif _width(dst) > _width(src):
            op = "extui" if unsigned else "extsi"
        else:
            op = "trunci"
        return self.op(f"arith.{op} {x} : {s} to {d}")


def expand(e: Expr) -> Expr | None:
    """``e`` in the ops MLIR has, as the C the host runs computes it (None when it
    has them already): float min/max as C's ``a < b ? a : b``, sigmoid, rsqrt and
    reciprocals through a division, float floordiv through floor, float16
    transcendental functions in float32, integer and float16 pow in a wider float.
    An expansion is a tree of primitive nodes, so that the MLIR polyc.from_mlir
    reads back is exported to the same text."""
    dt = e.dtype
    if isinstance(e, Unary) and dt.is_float:
        if dt == dtypes.float16 and e.op not in ("abs", "neg"):
            wide = Unary(e.op, Cast(e.x, dtypes.float32), dtypes.float32)
            return Cast(wide, dtypes.float16)
        one = Const(1.0, dt)
        if e.op == "rsqrt":
            return Binary("div", one, Unary("sqrt", e.x, dt), dt)
        if e.op == "recip":
            return Binary("div", one, e.x, dt)
        if e.op == "sigmoid":
            den = Binary("add", one, Unary("exp", Unary("neg", e.x, dt), dt), dt)
            return Binary("div", one, den, dt)
    if isinstance(e, Unary) and not dt.is_float and e.op in _ROUNDING:
        return e.x  # an integer rounds to itself
    if isinstance(e, Binary) and dt.is_float:
        if e.op in ("min", "max"):  # NaN propagates, as the interpreter's
            test = Binary("lt" if e.op == "min" else "gt", e.a, e.b, dtypes.bool_)
            nan = Binary("ne", e.a, e.a, dtypes.bool_)
            return Select(Binary("or", test, nan, dtypes.bool_), e.a, e.b, dt)
        if e.op == "floordiv":
            return Unary("floor", Binary("div", e.a, e.b, dt), dt)
    if (isinstance(e, Binary) and e.op == "pow" and dt in (dtypes.float16,)) or (
        isinstance(e, Binary) and e.op == "pow" and not dt.is_float
    ):
        wide = dtypes.float32 if dt.is_float else dtypes.float64
        a, b = Cast(e.a, wide), Cast(e.b, wide)
        return Cast(Binary("pow", a, b, wide), dt)
    return None


def _width(dt: DType) -> int:
    return 1 if dt == dtypes.bool_ else 8 * dt.itemsize
