"""Statement bodies as C expressions, with the same semantics as the interpreter.

Narrow types (int8, int16, float16) are cast back after every operation, which is
what numpy does, so compiled results match the interpreter bit for bit on integers.

bfloat16 is stored as ``uint16_t`` (the upper half of a float's bits) and computed in
float: a load widens (``pc_bf16_ld``: bits << 16, exact), every operation of dtype
bfloat16 computes in float and rounds its result to bfloat16 (``pc_bf16``: round to
nearest even, a NaN kept a quiet NaN of its sign, as ``ml_dtypes`` rounds), and a
store keeps the upper half (``pc_bf16_st``). A cast to bfloat16 goes through float
first, as PyTorch's ``c10::BFloat16`` conversion does. Those helpers (:data:`BF16`)
are emitted only into files with a bfloat16 array.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from polyc.ir import dtypes
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType
from polyc.ir.expr import (
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Opaque,
    Select,
    Unary,
)

# C helper functions every generated file defines (see PRELUDE)
_FLOAT_FN = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "erf": "erf",
    "sin": "sin",
    "cos": "cos",
    "abs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round",
    "rint": "nearbyint",
}

PRELUDE = r"""#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define min(x, y) ((x) < (y) ? (x) : (y))
#define max(x, y) ((x) > (y) ? (x) : (y))
/* NaN propagates, as numpy's minimum/maximum and torch's min/max do (a != a is a
 * NaN test; always false for integers) */
#define PC_MINMAX(T, S) \
  static inline T pc_min_##S(T a, T b) { return (a < b || a != a) ? a : b; } \
  static inline T pc_max_##S(T a, T b) { return (a > b || a != a) ? a : b; }
PC_MINMAX(float, f32)
PC_MINMAX(double, f64)
PC_MINMAX(_Float16, f16)
PC_MINMAX(int8_t, i8)
PC_MINMAX(int16_t, i16)
PC_MINMAX(int32_t, i32)
PC_MINMAX(int64_t, i64)
PC_MINMAX(uint8_t, u8)
static inline int64_t pc_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
"""

#: bfloat16 in C (see the module docstring): emitted after PRELUDE into files with a
#: bfloat16 array
BF16 = r"""/* bfloat16: stored as the upper 16 bits of a float, computed in float */
static inline float pc_bf16_ld(uint16_t b) {
  union { uint32_t u; float f; } v = {(uint32_t)b << 16};
  return v.f;
}
static inline uint16_t pc_bf16_st(float x) { /* round to nearest even */
  union { float f; uint32_t u; } v = {x};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16 & 0x8000u) | 0x7fc0u);
  return (uint16_t)((v.u + 0x7fffu + (v.u >> 16 & 1u)) >> 16);
}
static inline float pc_bf16(float x) { return pc_bf16_ld(pc_bf16_st(x)); }
"""

_SUFFIX = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
}


def c_type(dt: DType) -> str:
    return dt.c_type


def _widen(element: str, dt: DType) -> str:
    """An element as a value: a bfloat16 element as the float it holds."""
    return f"pc_bf16_ld({element})" if dt == dtypes.bfloat16 else element


def uses_bfloat16(kernel) -> bool:
    """Whether ``kernel`` has a bfloat16 array (its C then needs :data:`BF16`)."""
    return any(a.dtype == dtypes.bfloat16 for a in kernel.arrays.values())


def literal(value, dt: DType) -> str:
    """A C literal of ``value`` in ``dt`` (a bfloat16 literal is the float of the
    value rounded to bfloat16 through float, as the interpreter rounds it)."""
    if dt == dtypes.bool_:
        return "1" if value else "0"
    if dt == dtypes.bfloat16:
        return literal(float(dtypes.to_bfloat16(value)), dtypes.float32)
    if dt.is_float:
        v = float(value)
        if math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        elif math.isnan(v):
            text = "NAN"
        else:
            text = repr(v)
            if "e" not in text and "." not in text:
                text += ".0"
            if dt == dtypes.float32 or dt == dtypes.float16:
                text += "f"
        if dt == dtypes.float16:
            return f"((_Float16){text})"
        if dt == dtypes.float32 and (math.isinf(v) or math.isnan(v)):
            return text
        return text if v >= 0 or text.startswith("(") else f"({text})"
    v = int(value)
    if dt == dtypes.int64:
        return f"INT64_C({v})"
    if dt in (dtypes.int32,) and v == -(2**31):
        return "INT32_MIN"
    return str(v) if v >= 0 else f"({v})"


#: the host's check of a gather's data-dependent index (emitted once per file that
#: gathers, see :data:`GATHER_HOST`): an index outside ``[0, n)`` is recorded (the
#: first one) and row 0 is read instead, so no load leaves the array; the kernel's
#: ``<function>_gather_error`` entry point hands the record to the caller, which
#: raises (:class:`polyc.errors.IndexRangeError`). The record is the module's (one
#: call at a time; under OpenMP one of the bad indices is recorded, not always the
#: first).
GATHER_HOST = r"""static int64_t pc_gather_bad[3] = {0, 0, 0}; /* failed, value, extent */
static inline int64_t pc_index(int64_t v, int64_t n) {
  if (v >= 0 && v < n) return v;
  if (!pc_gather_bad[0]) {
    pc_gather_bad[0] = 1, pc_gather_bad[1] = v, pc_gather_bad[2] = n;
  }
  return 0;
}
"""


def gather_index_host(g: Gather, by: str, extent: str) -> str:
    """The host's checked index of a gather (:data:`GATHER_HOST`)."""
    return f"pc_index((int64_t)({by}), {extent})"


class CExpr:
    """Renders expressions; ``load(ld, index_texts)`` renders an array element and
    ``name(iterator)`` renders an iterator (already substituted by the caller);
    ``gather_index(g, value_text, extent_text)`` renders a gather's checked
    data-dependent index."""

    def __init__(
        self,
        load: Callable[[Load, list[str]], str],
        name: Callable[[str], str],
        gather_index: Callable[[Gather, str, str], str] = gather_index_host,
        extent: Callable[[Gather], str] | None = None,
    ):
        self.load = load
        self.name = name
        self.gather_index = gather_index
        self.extent = extent

    def aff(self, a: Aff) -> str:
        return a.to_c(self.name)

    def __call__(self, e: Expr) -> str:
        dt = e.dtype
        if isinstance(e, Const):
            return literal(e.value, dt)
        if isinstance(e, Index):
            return f"({self.aff(e.aff)})"
        if isinstance(e, Load):
            return _widen(self.load(e, [self.aff(a) for a in e.index]), dt)
        if isinstance(e, Gather):
            if self.extent is None:
                raise TypeError(f"codegen: no array extents to gather {e!r}")
            texts = [
                self.gather_index(e, self(e.by), self.extent(e))
                if a is None
                else self.aff(a)
                for a in e.index
            ]
            index = tuple(Aff(const=0) if a is None else a for a in e.index)
            return _widen(self.load(Load(e.array, index, e.dtype), texts), dt)
        if isinstance(e, Cast):
            inner = self(e.x)
            if dt == dtypes.bool_:
                return f"(({inner}) != 0)"
            if dt == dtypes.bfloat16:
                return f"pc_bf16((float)({inner}))"
            if e.x.dtype == dtypes.bfloat16 and dt == dtypes.float32:
                return inner  # already a float, exactly
            return f"(({c_type(dt)})({inner}))"
        if isinstance(e, Select):
            return f"({self(e.cond)} ? {self(e.a)} : {self(e.b)})"
        if isinstance(e, Unary):
            return self._unary(e)
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Opaque):
            return e.text
        raise TypeError(f"codegen: unknown expression {e!r}")

    def store(self, target: Load, value: str) -> str:
        """The assignment ``target = value`` (``value`` rendered by this object; a
        bfloat16 element stores the upper half of the float)."""
        elem = self.load(target, [self.aff(a) for a in target.index])
        if target.dtype == dtypes.bfloat16:
            return f"{elem} = pc_bf16_st({value})"
        return f"{elem} = {value}"

    def _narrow(self, text: str, dt: DType) -> str:
        """Round back to a narrow type after an operation (C promotes to int/float)."""
        if dt == dtypes.bfloat16:
            return f"pc_bf16({text})"
        if dt.itemsize < 4 and dt != dtypes.bool_:
            return f"(({c_type(dt)})({text}))"
        return text

    def _unary(self, e: Unary) -> str:
        x = self(e.x)
        dt = e.dtype
        if e.op == "neg":
            return self._narrow(f"(-{x})", dt)
        if e.op == "not":
            return f"(!{x})"
        if not dt.is_float:
            if e.op == "abs":
                fn = "llabs" if dt.itemsize == 8 else "abs"
                return self._narrow(f"{fn}({x})", dt)
            return x  # floor/ceil/round of an integer is itself
        f = "f" if dt != dtypes.float64 else ""
        arg = f"(float)({x})" if dt == dtypes.float16 else x
        one = "1.0" + f
        if e.op in _FLOAT_FN:
            text = f"{_FLOAT_FN[e.op]}{f}({arg})"
        elif e.op == "rsqrt":
            text = f"({one} / sqrt{f}({arg}))"
        elif e.op == "sigmoid":
            text = f"({one} / ({one} + exp{f}(-({arg}))))"
        elif e.op == "recip":
            text = f"({one} / ({arg}))"
        else:
            raise NotImplementedError(e.op)
        if dt == dtypes.bfloat16:
            return f"pc_bf16({text})"
        return f"((_Float16){text})" if dt == dtypes.float16 else text

    def _binary(self, e: Binary) -> str:
        a, b = self(e.a), self(e.b)
        op, dt = (
            e.op,
            e.a.dtype if e.op in ("lt", "le", "gt", "ge", "eq", "ne") else e.dtype,
        )
        infix = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">"}
        infix.update({"ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"})
        if op in infix:
            text = f"({a} {infix[op]} {b})"
            return text if op not in ("add", "sub", "mul") else self._narrow(text, dt)
        if op in ("min", "max"):  # of two bfloat16 values (floats): one of them
            suffix = "f32" if dt == dtypes.bfloat16 else _SUFFIX[dt.name]
            return f"pc_{op}_{suffix}({a}, {b})"
        f = "f" if dt in (dtypes.float32, dtypes.float16, dtypes.bfloat16) else ""
        if op == "div":
            return self._narrow(f"({a} / {b})", dt)
        if op == "floordiv":
            if dt.is_float:
                return self._narrow(f"floor{f}({a} / {b})", dt)
            return self._narrow(f"pc_floordiv({a}, {b})", dt)
        if op == "mod":
            if dt.is_float:
                return self._narrow(f"fmod{f}({a}, {b})", dt)
            return self._narrow(f"({a} % {b})", dt)
        if op == "pow":
            return self._narrow(f"pow{f}({a}, {b})", dt)
        raise NotImplementedError(op)
