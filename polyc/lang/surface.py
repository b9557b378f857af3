"""The surface of the compute API: index variables, reductions, tensors and their
element definitions, as the user writes them (see :mod:`polyc.lang.compute`).

Nothing here builds isl objects: a definition is recorded on its tensor, with the
index variables it uses, and :mod:`polyc.lang.lower` turns the definitions into
statements and a Kernel.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from polyc.errors import (
    AffineError,
    ArgumentError,
    DefinitionError,
    DTypeError,
    ReductionError,
    ShapeError,
)
from polyc.ir import dtypes
from polyc.ir.affine import Aff, var
from polyc.ir.dtypes import DType
from polyc.ir.expr import (
    Const,
    Expr,
    Gather,
    Index,
    Load,
    binary,
    cast,
    gather,
    lift,
    render,
    unary,
)

_counter = itertools.count()
#: the latest index variable of each name; definitions snapshot it when made
_VARS: dict[str, IndexVar] = {}
_PARAMS: set[str] = set()


def param_names() -> frozenset[str]:
    """The names declared with :func:`param` so far."""
    return frozenset(_PARAMS)


def index_names() -> frozenset[str]:
    """The names of the index variables made so far."""
    return frozenset(_VARS)


@dataclass(frozen=True, eq=False, repr=False)
class TensorLoad(Load):
    """A Load made through a Tensor: it remembers the tensor for lowering."""

    tensor: Tensor | None = None


@dataclass(frozen=True, eq=False, repr=False)
class TensorGather(Gather):
    """A Gather made through a Tensor (``table[idx[i], j]``): it remembers the
    tensor for lowering."""

    tensor: Tensor | None = None


# index variables -------------------------------------------------------------------


class IndexVar(Index):
    """An index variable. A pure variable takes its range from the dimension it
    indexes on the left of a definition; a reduction axis has its own range."""

    def __init__(self, name: str, extent=None, lo=0, reduce: bool = False):
        object.__setattr__(self, "aff", var(name))
        object.__setattr__(self, "dtype", dtypes.int64)
        object.__setattr__(self, "name", name)
        self_range = None if extent is None else (Aff.lift(lo), _size(extent, name))
        object.__setattr__(self, "range", self_range)
        object.__setattr__(self, "is_reduce", reduce)
        _VARS[name] = self

    def __repr__(self) -> str:
        kind = "reduce_axis" if self.is_reduce else "index"
        return f"<{kind} {self.name}>"


def indices(names: str) -> tuple[IndexVar, ...]:
    """Pure index variables, e.g. ``i, j = indices("i j")``."""
    return tuple(IndexVar(n) for n in names.replace(",", " ").split())


def index(name: str, extent=None, lo=0) -> IndexVar:
    """One index variable, optionally with an explicit range ``[lo, lo + extent)``."""
    return IndexVar(name, extent, lo)


def reduce_axis(extent, name: str = "k", lo=0) -> IndexVar:
    """A reduction axis over ``[lo, extent)`` when ``extent`` is a size, or over
    ``[lo, hi)`` when given a pair."""
    if isinstance(extent, tuple):
        lo, hi = extent
        return IndexVar(name, Aff.lift(_aff(hi)) - Aff.lift(_aff(lo)), _aff(lo), True)
    return IndexVar(name, extent, lo, reduce=True)


def param(name: str) -> Index:
    """A symbolic size (an isl parameter); use it in shapes and ranges."""
    if not name.isidentifier():
        raise ArgumentError(f"param: {name!r} is not an identifier. Use e.g. 'N'.")
    _PARAMS.add(name)
    return Index(var(name))


def _aff(x) -> Aff:
    if isinstance(x, Index):
        return x.aff
    return Aff.lift(x)


def _size(extent, what: str) -> Aff:
    try:
        a = _aff(extent)
    except AffineError:
        raise ShapeError(
            f"shape: extent {extent!r} of {what} is not a size because it is not an "
            "integer or an affine expression of parameters. Use ints or pc.param()."
        ) from None
    if a.is_constant and a.const < 1:
        raise ShapeError(
            f"shape: extent {a.const} of {what} is not positive because sizes start at "
            "1. Use a positive size."
        )
    return a


# reductions ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(Expr):
    """``op`` over ``axes`` of ``body`` (only where ``where`` holds)."""

    op: str
    body: Expr
    axes: tuple[IndexVar, ...]
    where: Expr | None
    dtype: DType

    def children(self):
        return (self.body,) + ((self.where,) if self.where is not None else ())


def _reduce(op: str, body, axis, where=None) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    for a in axes:
        if not isinstance(a, IndexVar) or not a.is_reduce:
            raise ReductionError(
                f"{op}: {a!r} is not a reduction axis because it was not made by "
                "reduce_axis(). Declare it with pc.reduce_axis(extent, name)."
            )
    e = lift(body)
    if isinstance(e, Index):
        raise DTypeError(
            f"{op}: the body {render(e)} is an index value, not data. Cast it with "
            ".astype(dtype) first."
        )
    return Reduce(op, e, axes, None if where is None else lift(where), e.dtype)


def sum(body, axis, where=None) -> Reduce:
    """Sum of ``body`` over reduction ``axis`` (one axis or a tuple)."""
    return _reduce("add", body, axis, where)


def prod(body, axis, where=None) -> Reduce:
    return _reduce("mul", body, axis, where)


def max(body, axis, where=None) -> Reduce:
    """Maximum of ``body`` over ``axis`` (element-wise max: :func:`maximum`)."""
    return _reduce("max", body, axis, where)


def min(body, axis, where=None) -> Reduce:
    return _reduce("min", body, axis, where)


def maximum(a, b) -> Expr:
    return binary("max", a, b)


def minimum(a, b) -> Expr:
    return binary("min", a, b)


def exp(x) -> Expr:
    return unary("exp", x)


def log(x) -> Expr:
    return unary("log", x)


def sqrt(x) -> Expr:
    return unary("sqrt", x)


def rsqrt(x) -> Expr:
    return unary("rsqrt", x)


def tanh(x) -> Expr:
    return unary("tanh", x)


def erf(x) -> Expr:
    return unary("erf", x)


def sigmoid(x) -> Expr:
    return unary("sigmoid", x)


def abs(x) -> Expr:
    return unary("abs", x)


def const(value, dtype) -> Const:
    from polyc.ir.expr import constant

    return constant(value, dtype)


# tensors -------------------------------------------------------------------------


@dataclass
class Definition:
    """One definition ``T[lhs] = rhs`` (where ``where`` holds), with the index
    variables it uses as they were when it was made."""

    lhs: tuple[Aff, ...]
    rhs: Expr
    where: Expr | None
    name: str | None
    vars: dict[str, IndexVar]
    seq: int = field(default_factory=lambda: next(_counter))


class Tensor:
    """A named multi-dimensional tensor: an input (placeholder) or defined by
    element definitions ``T[i, j] = expr``."""

    def __init__(self, name: str, shape, dtype, is_placeholder: bool = False):
        if not name.isidentifier():
            raise ArgumentError(f"tensor: name {name!r} is not an identifier.")
        self.name = name
        self.shape = tuple(_size(d, f"{name} dim {n}") for n, d in enumerate(shape))
        self.dtype = dtypes.as_dtype(dtype)
        self.is_placeholder = is_placeholder
        self.definitions: list[Definition] = []

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"<Tensor {self.name}: {self.dtype}[{dims}]>"

    def __getitem__(self, idx) -> Load:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.ndim:
            raise ShapeError(
                f"{self.name}[...]: {len(idx)} indices given but {self.name} has "
                f"{self.ndim} dimensions (shape {self.shape_text}). Index every dimension."
            )
        data = [d for d, x in enumerate(idx) if _data_dependent(x)]
        if len(data) == 1:  # one index read from data: a gather
            d = data[0]
            comps = [
                x if k == d else affine_index(self.name, x) for k, x in enumerate(idx)
            ]
            g = gather(self.name, comps, self.dtype, d)
            return TensorGather(g.array, g.index, g.dim, g.by, g.dtype, self)
        if len(data) > 1:
            raise AffineError(
                f"{self.name}[...]: dimensions {data} are indexed by data because "
                "their indices read array elements; polyc gathers along one "
                "dimension at a time. Gather one dimension, then index the result."
            )
        index = tuple(affine_index(self.name, x) for x in idx)
        return TensorLoad(self.name, index, self.dtype, self)

    def __setitem__(self, idx, value) -> None:
        self.set(idx, value)

    def set(self, idx, value, where=None, name: str | None = None) -> Tensor:
        """Define ``self[idx] = value`` where the affine condition ``where`` holds."""
        if self.is_placeholder:
            raise DefinitionError(
                f"{self.name}: a placeholder is an input, so it cannot be defined. "
                f"Declare it with pc.tensor('{self.name}', ...) instead."
            )
        idx = idx if isinstance(idx, tuple) else (idx,)
        load = self[idx]
        rhs = lift(value, load)
        if isinstance(rhs, Index):
            rhs = cast(rhs, self.dtype)
        if rhs.dtype != self.dtype:
            raise DTypeError(
                f"{self.name}[...] = ...: the value is {rhs.dtype} but {self.name} is "
                f"{self.dtype} because they were declared so. Cast the value with "
                f".astype('{self.dtype}')."
            )
        cond = None if where is None else lift(where)
        names = set().union(*(a.names() for a in load.index))
        for e in (rhs, cond):
            for n in e.walk() if e is not None else ():
                if isinstance(n, Index):
                    names |= n.aff.names()
                elif isinstance(n, Load):
                    names |= set().union(set(), *(a.names() for a in n.index))
                elif isinstance(n, Gather):
                    names |= set().union(set(), *(a.names() for _, a in n.affine()))
        snapshot = {n: _VARS[n] for n in names if n in _VARS and n not in _PARAMS}
        for n in rhs.walk():
            if isinstance(n, Reduce):
                snapshot.update({a.name: a for a in n.axes})
        for x in idx:
            if isinstance(x, IndexVar):
                snapshot[x.name] = x
        self.definitions.append(Definition(load.index, rhs, cond, name, snapshot))
        return self

    @property
    def shape_text(self) -> str:
        return "(" + ", ".join(map(str, self.shape)) + ")"

    def astype(self, dtype) -> Tensor:
        """A new tensor holding this one's elements cast to ``dtype``."""
        dt = dtypes.as_dtype(dtype)
        return compute(
            f"{self.name}_{dt.name}", self.shape, lambda *ix: cast(self[ix], dt)
        )


def _data_dependent(x) -> bool:
    """An index that reads an array element (a gather's), not an affine one."""
    return (
        isinstance(x, Expr)
        and not isinstance(x, Index)
        and any(isinstance(n, Load) for n in x.walk())
    )


def affine_index(array: str, x) -> Aff:
    """``x`` (an index variable, an int or an affine expression) as an index of
    ``array``.

    Raises:
        AffineError: when ``x`` is not affine (a data-dependent index, a product of
            index variables).
    """
    if isinstance(x, Index):
        return x.aff
    if isinstance(x, (int, Aff)) and not isinstance(x, bool):
        return Aff.lift(x)
    if isinstance(x, Expr):
        why = (
            "it reads an array element (a data-dependent index)"
            if any(isinstance(n, Load) for n in x.walk())
            else "it multiplies index variables or applies a non-affine function"
        )
        raise AffineError(
            f"{array}[{render(x)}]: the index is not affine because {why}. Polyhedral "
            "indices must be sums of index variables times constants (plus // and % "
            "by constants); an index read from an integer tensor (x[idx[i], j]) "
            "gathers."
        )
    raise AffineError(
        f"{array}[{x!r}]: the index is not affine because it is a {type(x).__name__}. "
        "Use index variables and integers."
    )


def placeholder(name: str, shape, dtype="float32") -> Tensor:
    """An input tensor."""
    return Tensor(name, shape, dtype, is_placeholder=True)


def tensor(name: str, shape, dtype="float32") -> Tensor:
    """A tensor to be defined by assignments ``T[i, j] = ...``."""
    return Tensor(name, shape, dtype)


def compute(name: str, shape, fn: Callable[..., object], dtype=None) -> Tensor:
    """A tensor whose element ``[i, j, ...]`` is ``fn(i, j, ...)``.

    The dtype is the expression's unless given. Index variables are named ``i, j, k,
    l, ...`` (``i0, i1, ...`` past six dimensions) so the loop nest reads naturally.
    """
    names = _var_names(len(shape), fn)
    ivars = tuple(IndexVar(n) for n in names)
    value = lift(fn(*ivars))
    dt = dtypes.as_dtype(dtype) if dtype is not None else None
    if dt is None:
        dt = value.dtype if not isinstance(value, Index) else dtypes.int32
    if dt != value.dtype and not isinstance(value, Index):
        value = cast(value, dt)
    t = Tensor(name, shape, dt)
    t.set(ivars, value)
    return t


def _var_names(n: int, fn) -> list[str]:
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_argcount == n and not code.co_flags & 0x04:
        names = list(code.co_varnames[:n])
        if len(set(names)) == n and all(x.isidentifier() for x in names):
            return names
    base = ["i", "j", "l", "m", "n", "o"]
    return base[:n] if n <= len(base) else [f"i{d}" for d in range(n)]
