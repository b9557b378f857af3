"""The compute API: tensors, index variables, reductions and element definitions.

A tensor-expression language in the spirit of Halide and TVM's ``te``::

    from polyc import compute as pc

    M, N, K = 64, 48, 32
    A = pc.placeholder("A", (M, K), "float32")
    B = pc.placeholder("B", (K, N), "float32")
    k = pc.reduce_axis(K, "k")
    C = pc.compute("C", (M, N), lambda i, j: pc.sum(A[i, k] * B[k, j], k))
    kernel = pc.kernel("matmul", outputs=[C])

Definitions can also be written as assignments, which allows several definitions of
one tensor (updates) and multi-statement kernels with intermediate tensors::

    i, j = pc.indices("i j")
    C = pc.tensor("C", (M, N), "float32")
    C[i, j] = 0.0
    C[i, j] += A[i, k] * B[k, j]

Sizes may be symbolic: ``N = pc.param("N")`` is an isl parameter.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import islpy as isl

from polyc.errors import (
    AffineError,
    ArgumentError,
    CycleError,
    DefinitionError,
    DTypeError,
    ReductionError,
    ShapeError,
)
from polyc.ir import dtypes
from polyc.ir.affine import Aff, var
from polyc.ir.dtypes import DType
from polyc.ir.expr import (
    REDUCTION_OPS,
    Binary,
    Cast,
    Const,
    Expr,
    Index,
    Load,
    Select,
    Unary,
    binary,
    cast,
    identity,
    lift,
    render,
    select,
    unary,
)
from polyc.ir.kernel import Array, Kernel, Role, Statement, make_domain, params_head

__all__ = [
    "IndexVar",
    "Reduce",
    "Tensor",
    "compute",
    "indices",
    "kernel",
    "max",
    "maximum",
    "min",
    "minimum",
    "param",
    "placeholder",
    "prod",
    "reduce_axis",
    "select",
    "sum",
    "tensor",
]

_counter = itertools.count()
#: the latest index variable of each name; definitions snapshot it when made
_VARS: dict[str, IndexVar] = {}
_PARAMS: set[str] = set()


@dataclass(frozen=True, eq=False, repr=False)
class TensorLoad(Load):
    """A Load made through a Tensor: it remembers the tensor for lowering."""

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
class _Definition:
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
        self.definitions: list[_Definition] = []

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
        index = tuple(_index(self.name, x) for x in idx)
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
        snapshot = {n: _VARS[n] for n in names if n in _VARS and n not in _PARAMS}
        for n in rhs.walk():
            if isinstance(n, Reduce):
                snapshot.update({a.name: a for a in n.axes})
        for x in idx:
            if isinstance(x, IndexVar):
                snapshot[x.name] = x
        self.definitions.append(_Definition(load.index, rhs, cond, name, snapshot))
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


def _index(array: str, x) -> Aff:
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
            "by constants); gather through a one-hot reduction or a frontend op instead."
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


# lowering ---------------------------------------------------------------------------


def kernel(
    name: str,
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor] | None = None,
    context: str | None = None,
) -> Kernel:
    """Lower the definitions reachable from ``outputs`` into one Kernel.

    Inputs are the tensors without definitions (in ``inputs`` order when given);
    tensors defined but not requested as outputs become temporaries.

    Raises:
        CycleError: when tensors are defined in terms of each other.
        ReductionError: when a reduction axis is used outside a reduction.
        AffineError: when a condition is not affine.
    """
    outputs = list(outputs)
    for o in outputs:
        if not isinstance(o, Tensor):
            raise ArgumentError(f"kernel: outputs must be Tensors, not {o!r}.")
        if not o.definitions:
            raise DefinitionError(
                f"kernel: output {o.name} has no definition. Define it, e.g. "
                f"{o.name}[i, j] = ..."
            )
    order = _topological(outputs)
    input_order = list(inputs) if inputs is not None else []
    for t in order:
        if not t.definitions and t not in input_order:
            input_order.append(t)
    names: dict[str, Tensor] = {}
    for t in order + input_order:
        if names.get(t.name, t) is not t:
            raise DefinitionError(
                f"kernel: two different tensors are named {t.name!r}. Give them "
                "distinct names."
            )
        names[t.name] = t
    arrays = [Array(t.name, t.shape, t.dtype, Role.INPUT) for t in input_order]
    lowering = _Lowering()
    for t in order:
        if t.definitions:
            role = Role.OUTPUT if t in outputs else Role.TEMP
            arrays.append(Array(t.name, t.shape, t.dtype, role))
            for d in t.definitions:
                lowering.lower(t, d)
    arrays.extend(lowering.temps)
    params = {p for a in arrays for d in a.shape for p in d.names()}
    for s in lowering.statements:
        params |= set(s.domain.get_var_dict(isl.dim_type.param))
    params = sorted(params)
    ctx = " and ".join(f"{p} >= 1" for p in params)
    if context:
        ctx = f"{ctx} and {context}" if ctx else context
    stmts = _aligned(lowering.statements, params)
    stmts = _nonempty(stmts, outputs)
    return Kernel.create(name, arrays, stmts, params, ctx or None)


def _nonempty(stmts: list[Statement], outputs) -> list[Statement]:
    """The statements that have instances: a definition whose domain is empty
    (every tap of a strided convolution in its padding, say) contributes nothing.

    Raises:
        DefinitionError: when an output is then left with no definition.
    """
    kept = [s for s in stmts if not s.domain.is_empty()]
    written = {s.target.array for s in kept}
    for o in outputs:
        if o.name not in written:
            raise DefinitionError(
                f"kernel: output {o.name} is never written because every definition "
                "of it has an empty domain (its conditions exclude every index). "
                "Check its where= conditions and sizes."
            )
    return kept


def _aligned(statements: list[Statement], params: list[str]) -> list[Statement]:
    """Give every domain the kernel's full parameter list, in one order."""
    space = isl.Set(f"{params_head(params)}{{ : }}").get_space()
    return [
        Statement(
            s.name,
            s.iterators,
            s.domain.align_params(space),
            s.target,
            s.body,
            s.origin,
        )
        for s in statements
    ]


def _tensors_read(t: Tensor) -> list[Tensor]:
    out: list[Tensor] = []
    for d in t.definitions:
        for e in (d.rhs, d.where):
            for n in e.walk() if e is not None else ():
                if isinstance(n, TensorLoad) and n.tensor is not t:
                    out.append(n.tensor)
    return out


def _topological(outputs: list[Tensor]) -> list[Tensor]:
    """Tensors reachable from ``outputs``, each after the tensors it reads."""
    state: dict[int, str] = {}
    order: list[Tensor] = []

    def visit(t: Tensor, path: list[str]) -> None:
        mark = state.get(id(t))
        if mark == "done":
            return
        if mark == "active":
            cycle = path[path.index(t.name) :] + [t.name]
            raise CycleError(
                f"kernel: definitions form a cycle {' -> '.join(cycle)} because each "
                "of these tensors is defined from the next. Break the cycle: compute "
                "one of them from inputs only."
            )
        state[id(t)] = "active"
        for r in _tensors_read(t):
            visit(r, path + [t.name])
        state[id(t)] = "done"
        order.append(t)

    for o in outputs:
        visit(o, [])
    return order


def _plain(e: Expr) -> Expr:
    """Strip the tensor references from loads (the IR keeps names only)."""

    def fn(n: Expr):
        if isinstance(n, TensorLoad):
            return Load(n.array, n.index, n.dtype)
        return None

    return e.map(fn)


class _Lowering:
    """Turns definitions into statements (reductions become init + update)."""

    def __init__(self):
        self.statements: list[Statement] = []
        self.temps: list[Array] = []

    def _name(self) -> str:
        return f"S{len(self.statements)}"

    def lower(self, t: Tensor, d: _Definition) -> None:
        origin = d.name or f"definition of {t.name}"
        pure = self._pure_vars(t, d)
        target = Load(t.name, d.lhs, t.dtype)
        rhs = d.rhs
        if isinstance(rhs, Reduce):
            self._reduction(target, rhs, pure, d, origin)
            return
        rhs = self._lift_nested(rhs, pure, d, origin, t)
        is_update = any(
            isinstance(n, Load) and n.array == t.name and n.index == d.lhs
            for n in rhs.walk()
        )
        free = _free_names(rhs) - set(pure) - _PARAMS
        extra: list[IndexVar] = []
        for n in sorted(free, key=lambda x: _first_use(rhs, x)):
            v = d.vars.get(n)
            if v is None:
                continue  # a parameter
            if v.is_reduce and not is_update:
                raise ReductionError(
                    f"{t.name}[...] = {render(rhs)}: reduction axis {n} is used "
                    "outside a reduction because no sum/max/min encloses it. Wrap the "
                    f"value in pc.sum(..., {n}) or write an update {t.name}[...] += ..."
                )
            if not v.is_reduce:
                raise DefinitionError(
                    f"{t.name}[...] = {render(rhs)}: index {n} appears on the right "
                    "but not on the left, so its range is unknown. Index the left "
                    f"side with {n}, or make it a reduce_axis."
                )
            extra.append(v)
        ranges = {**pure, **{v.name: v.range for v in extra}}
        self._emit(target, _plain(rhs), ranges, [d.where], origin)

    def _pure_vars(self, t: Tensor, d: _Definition) -> dict[str, tuple[Aff, Aff]]:
        """Ranges ``(lo, extent)`` of the left side's variables."""
        ranges: dict[str, tuple[Aff, Aff]] = {}
        for pos, aff in enumerate(d.lhs):
            for n in sorted(aff.names()):
                v = d.vars.get(n)
                if v is None or n in ranges:
                    continue
                if v.is_reduce:
                    raise ReductionError(
                        f"{t.name}[...]: reduction axis {n} indexes the left side "
                        "because it was declared with reduce_axis. Use a plain index "
                        "variable on the left."
                    )
                if v.range is not None:
                    ranges[n] = v.range
                elif aff == var(n):
                    ranges[n] = (Aff(const=0), t.shape[pos])
                else:
                    raise DefinitionError(
                        f"{t.name}[{', '.join(map(str, d.lhs))}]: the range of {n} is "
                        f"unknown because it appears inside {aff}. Give it one with "
                        f"pc.index('{n}', extent)."
                    )
        return ranges

    def _reduction(self, target, red: Reduce, pure, d, origin) -> None:
        if red.dtype != target.dtype:
            raise DTypeError(
                f"{target.array}[...] = {red.op}(...): the reduction is {red.dtype} "
                f"but {target.array} is {target.dtype}. Cast the body."
            )
        init = identity(red.op, target.dtype)
        self._emit(target, init, pure, [d.where], f"{origin} (init)")
        body = _plain(red.body)
        self._check_body_vars(body, pure, red, target.array)
        update = binary(red.op, target, body) if red.op in REDUCTION_OPS else None
        ranges = {**pure, **{a.name: a.range for a in red.axes}}
        self._emit(target, update, ranges, [d.where, red.where], f"{origin} (update)")

    def _check_body_vars(self, body: Expr, pure, red: Reduce, array: str) -> None:
        allowed = set(pure) | {a.name for a in red.axes} | _PARAMS
        for n in _free_names(body) - allowed:
            if n in _VARS:
                raise ReductionError(
                    f"{array}[...] = {red.op}(...): index {n} is neither on the left "
                    f"nor a reduced axis of this reduction. Add it to the axes."
                )

    def _lift_nested(self, rhs: Expr, pure, d, origin, t: Tensor) -> Expr:
        """Move reductions nested inside an expression into temporaries."""
        reds = [n for n in rhs.walk() if isinstance(n, Reduce)]
        if not reds:
            return rhs
        names = list(pure)
        extents = [pure[n][1] for n in names]
        replace: dict[int, Expr] = {}
        for red in reds:
            tmp = Array(
                f"{t.name}_{red.op}{len(self.temps)}",
                tuple(extents),
                red.dtype,
                Role.TEMP,
            )
            self.temps.append(tmp)
            index = tuple(var(n) - pure[n][0] for n in names)
            target = Load(tmp.name, index, tmp.dtype)
            self._reduction(target, red, pure, d, f"{origin} ({red.op})")
            replace[id(red)] = target
        return rhs.map(lambda n: replace.get(id(n)))

    def _emit(self, target, body, ranges, conditions, origin) -> None:
        name = self._name()
        iters = list(ranges)
        bounds = [(lo, lo + ext) for lo, ext in ranges.values()]
        cons = [_condition(c) for c in conditions if c is not None]
        # bounds may mention enclosing iterators (a window starting at i): those
        # are dimensions of the domain, not parameters
        params = sorted(
            (
                set().union(set(), *(lo.names() | hi.names() for lo, hi in bounds))
                | _params_in(target, body)
                | set().union(
                    set(), *(_cond_names(c) for c in conditions if c is not None)
                )
            )
            - set(iters)
        )
        dom = make_domain(name, iters, bounds, params, cons)
        self.statements.append(Statement(name, tuple(iters), dom, target, body, origin))


def _free_names(e: Expr) -> set[str]:
    out: set[str] = set()
    for n in e.walk():
        if isinstance(n, Index):
            out |= n.aff.names()
        elif isinstance(n, Load):
            for a in n.index:
                out |= a.names()
        elif isinstance(n, Reduce):
            inner = _free_names(n.body) - {a.name for a in n.axes}
            out |= inner
    # names inside a Reduce body that are its axes are bound there
    for n in e.walk():
        if isinstance(n, Reduce):
            pass
    return out


def _first_use(e: Expr, name: str) -> tuple[int, int, str]:
    """Where ``name`` first appears: (node, index position); ties break by name so
    the order of extra loops never depends on set iteration (string hashing)."""
    for pos, n in enumerate(e.walk()):
        if isinstance(n, Index) and name in n.aff.names():
            return (pos, 0, name)
        if isinstance(n, Load):
            for k, a in enumerate(n.index):
                if name in a.names():
                    return (pos, k, name)
    return (1 << 30, 0, name)


def _params_in(*exprs: Expr) -> set[str]:
    names: set[str] = set()
    for e in exprs:
        names |= _free_names(e)
    return {n for n in names if n in _PARAMS}


def _cond_names(e: Expr) -> set[str]:
    return {n for n in _free_names(e) if n in _PARAMS}


def _condition(e: Expr) -> str:
    """An affine condition as isl text.

    Raises:
        AffineError: when the condition compares data or non-affine values.
    """
    if isinstance(e, Binary) and e.op in ("and", "or"):
        return f"(({_condition(e.a)}) {e.op} ({_condition(e.b)}))"
    if isinstance(e, Unary) and e.op == "not":
        return f"(not ({_condition(e.x)}))"
    if isinstance(e, Const) and e.dtype == dtypes.bool_:
        return "(1 = 1)" if e.value else "(1 = 0)"
    ops = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "=", "ne": "!="}
    if isinstance(e, Binary) and e.op in ops:
        a, b = _unwrap_index(e.a), _unwrap_index(e.b)
        if a is not None and b is not None:
            if e.op == "ne":
                return f"({a.to_isl()} < {b.to_isl()} or {a.to_isl()} > {b.to_isl()})"
            return f"{a.to_isl()} {ops[e.op]} {b.to_isl()}"
    raise AffineError(
        f"where={render(e)}: the condition is not affine because it compares data or "
        "non-affine values. Use comparisons of index expressions combined with & | ~, "
        "or compute the value with pc.select instead."
    )


def _unwrap_index(e: Expr) -> Aff | None:
    if isinstance(e, Index):
        return e.aff
    if isinstance(e, Cast) and isinstance(e.x, Index):
        return e.x.aff
    return None


# keep names used by the ops library importable from here
_ = (Select, select)
