"""The lowering of the compute API: tensor definitions become statements (isl
domains, accesses as affine loads, reductions as an init and an update) and one
:class:`~polyc.ir.kernel.Kernel`.

:func:`kernel` (``pc.kernel``) is the entry: it orders the tensors reachable from
the outputs, gives every array its role and lowers each definition.
"""

from __future__ import annotations

from collections.abc import Sequence

import islpy as isl

from polyc.errors import (
    AffineError,
    ArgumentError,
    CycleError,
    DefinitionError,
    DTypeError,
    ReductionError,
)
from polyc.ir import dtypes
from polyc.ir.affine import Aff, var
from polyc.ir.expr import (
    REDUCTION_OPS,
    Binary,
    Cast,
    Const,
    Expr,
    Gather,
    Index,
    Load,
    Unary,
    binary,
    identity,
    render,
)
from polyc.ir.kernel import Array, Kernel, Role, Statement, make_domain, params_head
from polyc.lang.surface import (
    Definition,
    IndexVar,
    Reduce,
    Tensor,
    TensorGather,
    TensorLoad,
    index_names,
    param_names,
)


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
    lowering = _Lowering(param_names(), index_names())
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
                if isinstance(n, (TensorLoad, TensorGather)) and n.tensor is not t:
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
        if isinstance(n, TensorGather):
            return Gather(n.array, n.index, n.dim, n.by, n.dtype)
        return None

    return e.map(fn)


class _Lowering:
    """Turns definitions into statements (reductions become init + update)."""

    def __init__(self, params: frozenset[str], index_names: frozenset[str]):
        self.params = params  # names declared with pc.param
        self.index_names = index_names
        self.statements: list[Statement] = []
        self.temps: list[Array] = []

    def _name(self) -> str:
        return f"S{len(self.statements)}"

    def lower(self, t: Tensor, d: Definition) -> None:
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
        free = _free_names(rhs) - set(pure) - self.params
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

    def _pure_vars(self, t: Tensor, d: Definition) -> dict[str, tuple[Aff, Aff]]:
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
        allowed = set(pure) | {a.name for a in red.axes} | self.params
        for n in _free_names(body) - allowed:
            if n in self.index_names:
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
        cons = [affine_condition(c) for c in conditions if c is not None]
        # bounds may mention enclosing iterators (a window starting at i): those
        # are dimensions of the domain, not parameters
        params = sorted(
            (
                set().union(set(), *(lo.names() | hi.names() for lo, hi in bounds))
                | _params_in(self.params, target, body)
                | _params_in(self.params, *(c for c in conditions if c is not None))
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
        elif isinstance(n, Gather):
            for _, a in n.affine():
                out |= a.names()
        elif isinstance(n, Reduce):
            inner = _free_names(n.body) - {a.name for a in n.axes}
            out |= inner
    return out


def _first_use(e: Expr, name: str) -> tuple[int, int, str]:
    """Where ``name`` first appears: (node, index position); ties break by name so
    the order of extra loops never depends on set iteration (string hashing)."""
    for pos, n in enumerate(e.walk()):
        if isinstance(n, Index) and name in n.aff.names():
            return (pos, 0, name)
        if isinstance(n, (Load, Gather)):
            for k, a in enumerate(n.index):
                if a is not None and name in a.names():
                    return (pos, k, name)
    return (1 << 30, 0, name)


def _params_in(params: frozenset[str], *exprs: Expr) -> set[str]:
    """The parameters among the names ``exprs`` use."""
    names: set[str] = set()
    for e in exprs:
        names |= _free_names(e)
    return names & params


def affine_condition(e: Expr) -> str:
    """An affine condition as isl text.

    Raises:
        AffineError: when the condition compares data or non-affine values.
    """
    if isinstance(e, Binary) and e.op in ("and", "or"):
        return f"(({affine_condition(e.a)}) {e.op} ({affine_condition(e.b)}))"
    if isinstance(e, Unary) and e.op == "not":
        return f"(not ({affine_condition(e.x)}))"
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
