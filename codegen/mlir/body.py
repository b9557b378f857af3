"""Statement bodies as ``arith`` and ``math`` operations, with the interpreter's
semantics (those of :mod:`codegen.cexpr`): C's truncating integer division,
``fmod``, ``a < b ? a : b`` for float min, ordered float comparisons (``!=`` is
unordered), float16 transcendental functions computed in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from polyc.errors import CodegenError
from polyc.ir import dtypes
from polyc.ir.dtypes import DType
from polyc.ir.expr import Binary, Cast, Const, Expr, Index, Load, Select, Unary

_TYPE = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "i8",
    "bool": "i1",
}
# float ops MLIR's math dialect has under the same meaning as the C the host runs
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf"}
_MATH.update({"sin": "sin", "cos": "cos", "abs": "absf", "floor": "floor"})
_MATH.update({"ceil": "ceil", "round": "round", "rint": "roundeven"})
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ICMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UCMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}


def mlir_type(dt: DType) -> str:
    """The MLIR element type of ``dt`` (integers are signless; uint8 is i8)."""
    return _TYPE[dt.name]


def constant(value, dt: DType) -> str:
    """The attribute text of ``value`` in ``dt``: floats as their exact bits (the
    interpreter's value, rounded once by numpy)."""
    t = mlir_type(dt)
    if dt == dtypes.bool_:
        return "true" if value else "false"
    if dt.is_float:
        bits = np.asarray(value, dtype=dt.numpy).view(f"uint{8 * dt.itemsize}")
        if math.isfinite(float(value)) and float(np.asarray(value, dt.numpy)) == float(
            value
        ):
            text = repr(float(value))
            return f"{text if ('.' in text or 'e' in text) else text + '.0'} : {t}"
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

    def op(self, text: str) -> str:
        v = self.fresh()
        self.lines.append(f"{v} = {text}")
        return v

    def __call__(self, e: Expr) -> str:
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
            return self.op(f"arith.select {c}, {a}, {b} : {mlir_type(e.dtype)}")
        if isinstance(e, Unary):
            return self.unary(e.op, self(e.x), e.dtype)
        if isinstance(e, Binary):
            return self.binary(e.op, self(e.a), self(e.b), e.a.dtype)
        raise CodegenError(
            f"to_mlir: the expression {e} has no MLIR form because it is a "
            f"{type(e).__name__}. Build the body from loads, constants and the ops "
            "of polyc.ir.expr."
        )

    def const(self, value, dt: DType) -> str:
        return self.op(f"arith.constant {constant(value, dt)}")

    def unary(self, op: str, x: str, dt: DType) -> str:
        t = mlir_type(dt)
        if op == "not":
            true = self.op("arith.constant true")
            return self.op(f"arith.xori {x}, {true} : i1")
        if op == "neg":
            if dt.is_float:
                return self.op(f"arith.negf {x} : {t}")
            return self.op(f"arith.subi {self.const(0, dt)}, {x} : {t}")
        if not dt.is_float:
            if op == "abs":
                return self.op(f"math.absi {x} : {t}")
            if op in ("floor", "ceil", "round", "rint"):
                return x
            raise CodegenError(f"to_mlir: {op} of an integer ({dt}) is not supported.")
        if dt == dtypes.float16 and op not in ("abs",):
            wide = self.op(f"arith.extf {x} : f16 to f32")
            r = self.unary(op, wide, dtypes.float32)
            return self.op(f"arith.truncf {r} : f32 to f16")
        if op in _MATH:
            return self.op(f"math.{_MATH[op]} {x} : {t}")
        one = self.const(1.0, dt)
        if op == "rsqrt":
            root = self.op(f"math.sqrt {x} : {t}")
            return self.op(f"arith.divf {one}, {root} : {t}")
        if op == "recip":
            return self.op(f"arith.divf {one}, {x} : {t}")
        if op == "sigmoid":
            neg = self.op(f"arith.negf {x} : {t}")
            ex = self.op(f"math.exp {neg} : {t}")
            den = self.op(f"arith.addf {one}, {ex} : {t}")
            return self.op(f"arith.divf {one}, {den} : {t}")
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
        if op in ("min", "max"):
            if fl:  # C's a < b ? a : b, NaN and signed zeros included
                c = self.op(
                    f"arith.cmpf {'olt' if op == 'min' else 'ogt'}, {a}, {b} : {t}"
                )
                return self.op(f"arith.select {c}, {a}, {b} : {t}")
            kind = "si" if signed else "ui"
            return self.op(f"arith.{op}{kind} {a}, {b} : {t}")
        if op == "div":
            if fl:
                return self.op(f"arith.divf {a}, {b} : {t}")
            return self.op(f"arith.div{'si' if signed else 'ui'} {a}, {b} : {t}")
        if op == "floordiv":
            if fl:
                q = self.op(f"arith.divf {a}, {b} : {t}")
                return self.unary("floor", q, dt)
            if not signed:
                return self.op(f"arith.divui {a}, {b} : {t}")
            return self.op(f"arith.floordivsi {a}, {b} : {t}")
        if op == "mod":
            if fl:
                return self.op(f"arith.remf {a}, {b} : {t}")
            return self.op(f"arith.rem{'si' if signed else 'ui'} {a}, {b} : {t}")
        if op == "pow":
            if fl and dt != dtypes.float16:
                return self.op(f"math.powf {a}, {b} : {t}")
            wide = dtypes.float32 if fl else dtypes.float64
            fa, fb = (self.cast(v, dt, wide) for v in (a, b))
            r = self.op(f"math.powf {fa}, {fb} : {mlir_type(wide)}")
            return self.cast(r, wide, dt)
        raise CodegenError(f"to_mlir: binary op {op} has no MLIR form.")

    def cast(self, x: str, src: DType, dst: DType) -> str:
        """``(dst) x`` as C converts."""
        if src == dst or (mlir_type(src) == mlir_type(dst) and src.is_float):
            return x
        s, d = mlir_type(src), mlir_type(dst)
        if dst == dtypes.bool_:
            zero = self.const(0, src)
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


def _width(dt: DType) -> int:
    return 1 if dt == dtypes.bool_ else 8 * dt.itemsize
