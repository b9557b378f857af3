"""Statement bodies: typed expression trees over array elements and index values.

Bodies may be any expression (exp, sqrt, max, select, casts); only the indices of a
:class:`Load` must be affine. The one data-dependent read is a :class:`Gather`: one
index component is the value of an expression (an element of an index array), the
others are affine; it is not a Load, so nothing that walks Loads takes it for an
affine access. Nodes are immutable and compare by identity; use
:func:`same` for structural equality. Arithmetic operators build nodes, so
``A[i, k] * B[k, j]`` in the compute API is an expression here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from polyc.errors import AffineError, DTypeError
from polyc.ir import dtypes
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType

# op name -> (arity, op class for the vector unit's cost table)
UNARY_OPS = {
    "neg": "add",
    "abs": "add",
    "not": "compare",
    "exp": "transcendental",
    "log": "transcendental",
    "sqrt": "transcendental",
    "rsqrt": "transcendental",
    "tanh": "transcendental",
    "erf": "transcendental",
    "sigmoid": "transcendental",
    "sin": "transcendental",
    "cos": "transcendental",
    "floor": "add",
    "ceil": "add",
    "round": "add",
    "rint": "add",
    "recip": "divide",
}
BINARY_OPS = {
    "add": "add",
    "sub": "add",
    "mul": "mul",
    "div": "divide",
    "floordiv": "divide",
    "mod": "divide",
    "pow": "transcendental",
    "min": "compare",
    "max": "compare",
    "lt": "compare",
    "le": "compare",
    "gt": "compare",
    "ge": "compare",
    "eq": "compare",
    "ne": "compare",
    "and": "compare",
    "or": "compare",
}
COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}
LOGICAL = {"and", "or", "not"}
#: reductions a statement may perform on its own target, with their identities
REDUCTION_OPS = ("add", "mul", "max", "min")


class Expr:
    """Base of expression nodes. Every node has a ``dtype``."""

    dtype: DType

    # arithmetic builds nodes ------------------------------------------------
    def __add__(self, o):
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        return binary("mul", self, o)

    def __rmul__(self, o):
        return binary("mul", o, self)

    def __truediv__(self, o):
        return binary("div", self, o)

    def __rtruediv__(self, o):
        return binary("div", o, self)

    def __floordiv__(self, o):
        return binary("floordiv", self, o)

    def __mod__(self, o):
        return binary("mod", self, o)

    def __pow__(self, o):
        return binary("pow", self, o)

    def __neg__(self):
        return unary("neg", self)

    def __abs__(self):
        return unary("abs", self)

    def __lt__(self, o):
        return binary("lt", self, o)

    def __le__(self, o):
        return binary("le", self, o)

    def __gt__(self, o):
        return binary("gt", self, o)

    def __ge__(self, o):
        return binary("ge", self, o)

    def __and__(self, o):
        return binary("and", self, o)

    def __rand__(self, o):
        return binary("and", o, self)

    def __or__(self, o):
        return binary("or", self, o)

    def __ror__(self, o):
        return binary("or", o, self)

    def __invert__(self):
        return unary("not", self)

    def eq(self, o) -> Expr:
        """Element-wise ``==`` (``==`` itself keeps Python's identity meaning)."""
        return binary("eq", self, o)

    def ne(self, o) -> Expr:
        return binary("ne", self, o)

    def astype(self, dtype) -> Expr:
        return cast(self, dtype)

    def __bool__(self):
        raise TypeError(
            "expression: a polyc expression has no truth value because it is evaluated "
            "per element. Use polyc.compute.select(cond, a, b) or & | ~ instead of "
            "if/and/or/not."
        )

    # traversal ---------------------------------------------------------------
    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        """Pre-order traversal of this node and its descendants."""
        yield self
        for child in self.children():
            yield from child.walk()

    def map(self, fn: Callable[[Expr], Expr | None]) -> Expr:
        """Rebuild bottom-up; ``fn`` returns a replacement or None to keep the node."""
        return _map(self, fn)

    def __str__(self) -> str:
        return render(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {render(self)}>"

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False, repr=False)
class Const(Expr):
    value: float | int | bool
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Index(Expr):
    """The integer value of an affine expression of index variables and parameters.

    Index values are weakly typed: combined with data they take the data's dtype.
    """

    aff: Aff
    dtype: DType = dtypes.int64


@dataclass(frozen=True, eq=False, repr=False)
class Load(Expr):
    """Read of ``array[index]``; every index component is affine."""

    array: str
    index: tuple[Aff, ...]
    dtype: DType


@dataclass(frozen=True, eq=False, repr=False)
class Gather(Expr):
    """Read of ``array[index]`` whose component ``dim`` is data: the value of
    ``by`` (an integer expression, normally a :class:`Load` of an index array).
    ``index[dim]`` is None; every other component is affine.

    A data-dependent access: its access relation (:func:`polyc.ir.kernel.
    gather_access_map`) is over-approximated by the whole extent of dimension
    ``dim``, so dependences and legality assume any row may be read. Reading a
    value of ``by`` outside ``[0, extent)`` is an error in every backend (the
    interpreter, host C and the simulator raise; PyTorch raises too).
    """

    array: str
    index: tuple[Aff | None, ...]
    dim: int
    by: Expr
    dtype: DType

    def children(self):
        return (self.by,)

    def affine(self) -> list[tuple[int, Aff]]:
        """The affine components as ``(position, Aff)``."""
        return [(d, a) for d, a in enumerate(self.index) if d != self.dim]


@dataclass(frozen=True, eq=False, repr=False)
class Unary(Expr):
    op: str
    x: Expr
    dtype: DType

    def children(self):
        return (self.x,)


@dataclass(frozen=True, eq=False, repr=False)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: DType

    def children(self):
        return (self.a, self.b)


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType

    def children(self):
        return (self.cond, self.a, self.b)


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    x: Expr
    dtype: DType

    def children(self):
        return (self.x,)


@dataclass(frozen=True, eq=False, repr=False)
class Opaque(Expr):
    """A value the frontend could not express otherwise (never produced by the APIs)."""

    text: str
    dtype: DType = field(default=dtypes.float32)


# constructors with type checking ---------------------------------------------


def lift(value: object, like: Expr | None = None) -> Expr:
    """Turn a Python number into a Const (typed like ``like`` when given)."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(value, dtypes.bool_)
    if isinstance(value, int):
        if like is not None and not isinstance(like, Index):
            return Const(value, like.dtype)
        return Index(Aff(const=value))
    if isinstance(value, float):
        dtype = (
            like.dtype if like is not None and like.dtype.is_float else dtypes.float32
        )
        return Const(value, dtype)
    if isinstance(value, Aff):
        return Index(value)
    raise DTypeError(
        f"expression: {value!r} cannot be used in an expression because it is a "
        f"{type(value).__name__}. Use numbers, tensors' elements and index variables."
    )


def _is_weak(e: Expr) -> bool:
    return isinstance(e, Index) or (isinstance(e, Const) and getattr(e, "_weak", False))


def _unify(op: str, a: Expr, b: Expr) -> tuple[Expr, Expr, DType]:
    """Make both operands one dtype (index values and literals adapt); else raise."""
    if isinstance(a, Index) and not isinstance(b, Index):
        a = cast(a, b.dtype) if b.dtype != dtypes.bool_ else a
    elif isinstance(b, Index) and not isinstance(a, Index):
        b = cast(b, a.dtype) if a.dtype != dtypes.bool_ else b
    if a.dtype != b.dtype:
        raise DTypeError(
            f"{op}: operands have dtypes {a.dtype} and {b.dtype} because they come from "
            f"different tensors ({render(a)} and {render(b)}). Cast one side with "
            f".astype('{a.dtype}') or .astype('{b.dtype}')."
        )
    return a, b, a.dtype


def binary(op: str, a: object, b: object) -> Expr:
    """Build ``a <op> b``; affine index arithmetic folds back into an Index."""
    if op not in BINARY_OPS:
        raise DTypeError(f"expression: unknown binary op {op!r}.")
    if isinstance(a, (Aff, Index)) or isinstance(b, (Aff, Index)):
        folded = _fold_index(op, a, b)
        if folded is not None:
            return folded
    ea = lift(a, b if isinstance(b, Expr) else None)
    eb = lift(b, ea)
    if not isinstance(a, Expr) and isinstance(eb, Expr) and not isinstance(eb, Index):
        ea = lift(a, eb)
    ea, eb, dtype = _unify(op, ea, eb)
    if op in COMPARISONS or op in LOGICAL:
        if op in LOGICAL and dtype != dtypes.bool_:
            raise DTypeError(
                f"{op}: operands must be conditions (bool) because {op} is logical, "
                f"but they are {dtype}. Compare first, e.g. (x > 0) & (y > 0)."
            )
        return Binary(op, ea, eb, dtypes.bool_)
    if dtype == dtypes.bool_:
        raise DTypeError(
            f"{op}: operands are conditions (bool) because they come from comparisons. "
            "Use select(cond, a, b) to turn a condition into a number."
        )
    return Binary(op, ea, eb, dtype)


def _fold_index(op: str, a: object, b: object) -> Expr | None:
    """Index op Index (or int) stays an affine Index where the result is affine."""

    def as_aff(x):
        if isinstance(x, Index):
            return x.aff
        if isinstance(x, Aff):
            return x
        if isinstance(x, int) and not isinstance(x, bool):
            return Aff(const=x)
        return None

    fa, fb = as_aff(a), as_aff(b)
    if fa is None or fb is None:
        return None
    try:
        if op == "add":
            return Index(fa + fb)
        if op == "sub":
            return Index(fa - fb)
        if op == "mul":
            return Index(fa * fb)
        if op == "floordiv" and fb.is_constant:
            return Index(fa // fb)
        if op == "mod" and fb.is_constant:
            return Index(fa % fb)
    except AffineError:
        return None  # stays a data expression; an index use reports it
    return None


def unary(op: str, x: object) -> Expr:
    if op not in UNARY_OPS:
        raise DTypeError(f"expression: unknown unary op {op!r}.")
    e = lift(x)
    if op == "neg" and isinstance(e, Index):
        return Index(-e.aff)
    if op == "not":
        if e.dtype != dtypes.bool_:
            raise DTypeError(
                f"not: operand is {e.dtype}, not a condition because it is a number. "
                "Compare first, e.g. ~(x > 0)."
            )
        return Unary(op, e, dtypes.bool_)
    if UNARY_OPS[op] == "transcendental" and not e.dtype.is_float:
        raise DTypeError(
            f"{op}: operand {render(e)} is {e.dtype} because it is an integer value; "
            f"{op} needs a float. Cast it first with .astype('float32')."
        )
    return Unary(op, e, e.dtype)


def select(cond: object, a: object, b: object) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (both evaluated; no short circuit)."""
    c = lift(cond)
    if c.dtype != dtypes.bool_:
        raise DTypeError(
            f"select: the condition {render(c)} is {c.dtype} because it is not a "
            "comparison. Compare it, e.g. select(x > 0, x, 0)."
        )
    ea = lift(a, b if isinstance(b, Expr) else None)
    eb = lift(b, ea)
    if not isinstance(a, Expr):
        ea = lift(a, eb)
    ea, eb, dtype = _unify("select", ea, eb)
    return Select(c, ea, eb, dtype)


def cast(x: object, dtype) -> Expr:
    e = lift(x)
    dt = dtypes.as_dtype(dtype)
    if e.dtype == dt and not isinstance(e, Index):
        return e
    if isinstance(e, Const):
        return Const(_convert(e.value, dt), dt)
    return Cast(e, dt)


def gather(array: str, index, dtype, dim: int) -> Gather:
    """``array[index]`` whose component ``dim`` is the integer expression
    ``index[dim]`` (a data-dependent index); the others are Affs.

    Raises:
        DTypeError: when the data-dependent index is not an integer.
    """
    by = lift(index[dim])
    if by.dtype.is_float or by.dtype == dtypes.bool_:
        raise DTypeError(
            f"{array}[...]: the index of dimension {dim} is {render(by)}, a "
            f"{by.dtype} value, because it reads {by.dtype} data. Index with an "
            "integer tensor (int32 or int64)."
        )
    comps = tuple(None if d == dim else Aff.lift(a) for d, a in enumerate(index))
    return Gather(array, comps, dim, by, dtypes.as_dtype(dtype))


def constant(value, dtype) -> Const:
    dt = dtypes.as_dtype(dtype)
    return Const(_convert(value, dt), dt)


def _convert(value, dt: DType):
    if dt.is_float:
        return float(value)
    if dt == dtypes.bool_:
        return bool(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise DTypeError(f"cast: {value} has no {dt} value because it is not finite.")
    return int(value)


def identity(op: str, dtype: DType) -> Const:
    """The identity of a reduction ``op`` in ``dtype`` (0, 1, -inf/min, +inf/max)."""
    import numpy as np

    if op == "add":
        return constant(0, dtype)
    if op == "mul":
        return constant(1, dtype)
    if dtype.is_float:
        return Const(-math.inf if op == "max" else math.inf, dtype)
    info = np.iinfo(dtype.numpy)
    return Const(int(info.min if op == "max" else info.max), dtype)


# traversal helpers -------------------------------------------------------------


def _map(e: Expr, fn) -> Expr:
    if isinstance(e, Unary):
        x = _map(e.x, fn)
        e = e if x is e.x else Unary(e.op, x, e.dtype)
    elif isinstance(e, Binary):
        a, b = _map(e.a, fn), _map(e.b, fn)
        e = e if (a is e.a and b is e.b) else Binary(e.op, a, b, e.dtype)
    elif isinstance(e, Select):
        c, a, b = _map(e.cond, fn), _map(e.a, fn), _map(e.b, fn)
        if not (c is e.cond and a is e.a and b is e.b):
            e = Select(c, a, b, e.dtype)
    elif isinstance(e, Cast):
        x = _map(e.x, fn)
        e = e if x is e.x else Cast(x, e.dtype)
    elif isinstance(e, Gather):
        by = _map(e.by, fn)
        e = e if by is e.by else Gather(e.array, e.index, e.dim, by, e.dtype)
    out = fn(e)
    return e if out is None else out


def loads(e: Expr) -> list[Load]:
    """Every Load in ``e`` in evaluation order (duplicates kept)."""
    return [n for n in e.walk() if isinstance(n, Load)]


def gathers(e: Expr) -> list[Gather]:
    """Every data-dependent read (:class:`Gather`) in ``e``, in evaluation order."""
    return [n for n in e.walk() if isinstance(n, Gather)]


def substitute_indices(e: Expr, mapping: dict[str, Aff]) -> Expr:
    """Replace index variables in every Load and Gather index and Index value."""

    def fn(n: Expr):
        if isinstance(n, Load):
            return Load(n.array, tuple(a.substitute(mapping) for a in n.index), n.dtype)
        if isinstance(n, Gather):
            index = tuple(None if a is None else a.substitute(mapping) for a in n.index)
            return Gather(n.array, index, n.dim, n.by, n.dtype)
        if isinstance(n, Index):
            return Index(n.aff.substitute(mapping), n.dtype)
        return None

    return e.map(fn)


def same(a: Expr, b: Expr) -> bool:
    """Structural equality of two expressions."""
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Const):
        return a.value == b.value or (a.value != a.value and b.value != b.value)
    if isinstance(a, Index):
        return a.aff == b.aff
    if isinstance(a, Load):
        return a.array == b.array and a.index == b.index
    if isinstance(a, Gather):
        return (a.array, a.index, a.dim) == (b.array, b.index, b.dim) and same(
            a.by, b.by
        )
    if isinstance(a, Opaque):
        return a.text == b.text
    if getattr(a, "op", None) != getattr(b, "op", None):
        return False
    return all(same(x, y) for x, y in zip(a.children(), b.children()))


def ops_count(e: Expr) -> dict[str, int]:
    """Operations per op class (add, mul, compare, divide, transcendental)."""
    out: dict[str, int] = {}
    for n in e.walk():
        if isinstance(n, Unary):
            cls = UNARY_OPS[n.op]
        elif isinstance(n, Binary):
            cls = BINARY_OPS[n.op]
        elif isinstance(n, Select):
            cls = "compare"
        else:
            continue
        out[cls] = out.get(cls, 0) + 1
    return out


# rendering ---------------------------------------------------------------------

_INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&",
    "or": "|",
}
_PREC = {"or": 1, "and": 2, "lt": 3, "le": 3, "gt": 3, "ge": 3, "eq": 3, "ne": 3}
_PREC.update({"add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5, "mod": 5})


def describe(e: Expr, array=None, text=None) -> str:
    """Every field of an expression, for keys that must tell apart what
    :func:`render` prints alike (a Const's dtype, a Load's dtype): ``array`` maps
    each array name and ``text`` each index's text (a renaming; both identity by
    default)."""
    array = array or (lambda a: a)
    text = text or (lambda t: t)
    if isinstance(e, Load):
        index = ", ".join(text(str(a)) for a in e.index)
        return f"{array(e.array)}[{index}]:{e.dtype}"
    if isinstance(e, Index):
        return f"({text(str(e.aff))}):{e.dtype}"
    if isinstance(e, Gather):
        parts = [
            "{" + describe(e.by, array, text) + "}" if a is None else text(str(a))
            for a in e.index
        ]
        return f"{array(e.array)}[{', '.join(parts)}]:{e.dtype}"
    if isinstance(e, Opaque):
        return f"opaque({text(e.text)}):{e.dtype}"
    fields = [
        f"{f.name}={getattr(e, f.name)}"
        for f in dataclasses.fields(e)
        if not isinstance(getattr(e, f.name), Expr)
    ]
    kids = ", ".join(describe(c, array, text) for c in e.children())
    return f"{type(e).__name__}<{' '.join(fields)}>({kids})"


def render(e: Expr, prec: int = 0) -> str:
    """Readable pseudo-code for an expression (``A[i, k] * B[k, j]``)."""
    if isinstance(e, Const):
        if isinstance(e.value, float):
            text = repr(e.value) if math.isfinite(e.value) else str(e.value)
        else:
            text = str(e.value)
        return text
    if isinstance(e, Index):
        text = str(e.aff)
        return (
            f"({text})"
            if prec > 4
            and not e.aff.is_constant
            and len(e.aff.terms) + (e.aff.const != 0) > 1
            else text
        )
    if isinstance(e, Load):
        return f"{e.array}[{', '.join(str(i) for i in e.index)}]"
    if isinstance(e, Gather):  # braces mark the data-dependent component
        parts = ["{" + render(e.by) + "}" if a is None else str(a) for a in e.index]
        return f"{e.array}[{', '.join(parts)}]"
    if isinstance(e, Unary):
        if e.op == "neg":
            return f"-{render(e.x, 6)}"
        if e.op == "not":
            return f"~{render(e.x, 6)}"
        return f"{e.op}({render(e.x)})"
    if isinstance(e, Binary):
        if e.op in _INFIX:
            p = _PREC[e.op]
            text = f"{render(e.a, p)} {_INFIX[e.op]} {render(e.b, p + 1)}"
            return f"({text})" if p < prec else text
        return f"{e.op}({render(e.a)}, {render(e.b)})"
    if isinstance(e, Select):
        return f"select({render(e.cond)}, {render(e.a)}, {render(e.b)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({render(e.x)})"
    if isinstance(e, Opaque):
        return e.text
    return "?"
