"""The reference interpreter: runs a Kernel with numpy, in its schedule's order.

On the program-order schedule it is the oracle for every other test. It is exact with
respect to the schedule: it executes statement instances in an order that differs from
the schedule's only between instances with no dependence, which changes no value (not
even a rounding), because every value is computed from the same operands by the same
operations in the same order.

How it is fast: it finds the smallest depth ``d`` of the schedule such that, for every
fixed value of the first ``d`` time dimensions, running each statement over all its
instances at once (in statement order) respects every dependence. Reductions
``T[f] = T[f] op g`` run as ``ufunc.at`` in time order, so their chains stay sequential.
Most op kernels run at depth 0 (whole statements as numpy), a time-stepped stencil at
depth 1, and only a Gauss-Seidel-like nest falls back to single instances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl
import numpy as np

from polyc.errors import BudgetError, IndexRangeError, ScheduleError
from polyc.ir import dtypes, tree
from polyc.ir.affine import Aff
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
    render,
    same,
)
from polyc.ir.inputs import prepare
from polyc.ir.kernel import Kernel, Statement
from polyc.ir.scan import fix_params, scan, scan_chunks


def interpret(
    kernel: Kernel, inputs: Mapping[str, object] | None = None, **params: int
) -> dict[str, np.ndarray]:
    """Run ``kernel`` on numpy ``inputs``; return ``{output name: array}``.

    Parameters that no input shape determines are passed as keyword arguments.

    Raises:
        InputError: for missing, unknown or mis-shaped inputs.
    """
    arrays, values = prepare(kernel, dict(inputs or {}), params)
    plan = kernel.analysis(("interpret", str(kernel.schedule)), _plan)
    _execute(kernel, plan, arrays, values)
    return {a.name: arrays[a.name] for a in kernel.outputs}


@dataclass(frozen=True)
class _Plan:
    order: tuple[str, ...]  # statements in the order a batch runs them
    depth: int  # time dimensions fixed per batch
    width: int  # time dimensions in all
    times: dict  # statement -> isl.Map S[x] -> [t] (padded to width)
    lex_order: frozenset  # statements whose time order is their domain's lex order


def _plan(kernel: Kernel) -> _Plan:
    times_union = tree.flat_map(kernel.schedule)
    times: dict[str, isl.Map] = {}
    times_union.foreach_map(
        lambda m: times.__setitem__(m.get_tuple_name(isl.dim_type.in_), m)
    )
    width = next(iter(times.values())).dim(isl.dim_type.out) if times else 0
    order = _leaf_order(kernel)
    rank = {name: r for r, name in enumerate(order)}
    try:
        bad = _batch_hazards(kernel, rank)
    except BudgetError:  # no dependences to batch by: one instance at a time
        bad = None
    for depth in range(width + 1):
        if bad is None and depth < width:
            continue
        if (
            bad is None
            or bad.is_empty()
            or bad.intersect(_same_prefix(times_union, depth, width)).is_empty()
        ):
            doms = {
                s.name: s.domain.intersect_params(kernel.context)
                for s in kernel.statements
            }
            lex = frozenset(
                n for n, m in times.items() if _preserves_lex_order(m, doms[n])
            )
            return _Plan(tuple(order), depth, width, times, lex)
    raise ScheduleError(
        f"interpret: the schedule of {kernel.name} runs dependent instances at the same "
        "time, so no sequential order exists. Load a schedule that orders them."
    )


def _preserves_lex_order(m: isl.Map, domain: isl.Set) -> bool:
    """True when time order equals the lexicographic order of the domain, i.e.
    ``x <lex y`` implies ``T(x) <lex T(y)`` (checked exactly with isl)."""
    m = m.intersect_domain(domain)
    before = domain.lex_lt_set(domain)
    return before.is_subset(m.lex_lt_map(m))


def _leaf_order(kernel: Kernel) -> list[str]:
    """Statements in the order their first instances appear in the tree (DFS);
    statements added by extension nodes (copies) are not the kernel's and are left
    out."""
    own = {s.name for s in kernel.statements}
    seen: list[str] = []
    for node in tree.walk(tree.without_extensions(kernel.schedule).get_root()):
        if node.get_type() == isl.schedule_node_type.leaf:
            sets: list[isl.Set] = []
            node.get_domain().foreach_set(sets.append)
            for s in sorted(sets, key=lambda x: x.get_tuple_name()):
                name = s.get_tuple_name()
                if name in own and name not in seen:
                    seen.append(name)
    for s in kernel.statements:
        if s.name not in seen:
            seen.append(s.name)
    return seen


def _accumulator_tag(stmt: Statement) -> str | None:
    if stmt.reduction is None:
        return None
    for n, ld in enumerate(stmt.reads, start=1):
        if same(ld, stmt.target):
            return f"{stmt.name}__r{n}"
    return None


def _batch_hazards(kernel: Kernel, rank: dict[str, int]) -> isl.UnionMap:
    """Dependences that running a whole statement at once could break."""
    deps = kernel.deps
    acc = {t for s in kernel.statements if (t := _accumulator_tag(s))}
    bad = isl.UnionMap.empty(kernel.context.get_space())
    flows: list[isl.Map] = []
    deps.flow_tagged.foreach_map(flows.append)
    for m in flows:
        src = m.domain().unwrap().domain().get_tuple_name()
        sink_tag = m.range().unwrap().range().get_tuple_name()
        sink = m.range().unwrap().domain().get_tuple_name()
        if src == sink and sink_tag not in acc:
            untagged = m.domain_factor_domain().range_factor_domain()
            bad = bad.union(isl.UnionMap.from_map(untagged))
    every: list[isl.Map] = []
    deps.validity.foreach_map(every.append)
    for m in every:
        src = m.get_tuple_name(isl.dim_type.in_)
        sink = m.get_tuple_name(isl.dim_type.out)
        if src != sink and rank[src] > rank[sink]:
            bad = bad.union(isl.UnionMap.from_map(m))
    return bad.intersect_params(kernel.context)


def _same_prefix(times: isl.UnionMap, depth: int, width: int) -> isl.UnionMap:
    """Pairs of instances whose first ``depth`` time coordinates are equal."""
    maps: list[isl.Map] = []
    times.foreach_map(maps.append)
    prefix = isl.UnionMap.empty(times.get_space())
    for m in maps:
        prefix = prefix.union(
            isl.UnionMap.from_map(m.project_out(isl.dim_type.out, depth, width - depth))
        )
    return prefix.apply_range(prefix.reverse())


def _execute(kernel: Kernel, plan: _Plan, arrays: dict, params: dict) -> None:
    stmts = {s.name: s for s in kernel.statements}

    def instances(name: str) -> isl.Set:
        """``{ [t..., x...] }``: time vector then iterators, of every instance."""
        s = stmts[name]
        m = plan.times[name].intersect_domain(s.domain).intersect_params(kernel.context)
        return fix_params(m, params).reverse().wrap().flatten()

    if plan.depth == 0:  # whole statements, chunk by chunk in time order
        for name in plan.order:
            s = stmts[name]
            if name in plan.lex_order:  # time order is the domain's own order
                dom = fix_params(s.domain.intersect_params(kernel.context), params)
                for chunk in scan_chunks(dom):
                    _batch(s, chunk, arrays, params)
                continue
            for chunk in scan_chunks(instances(name), free=s.depth):
                _batch(s, chunk[:, plan.width :], arrays, params)
        return
    points = {name: scan(instances(name)) for name in plan.order}
    batches = []
    for r, name in enumerate(plan.order):
        pts = points[name]
        if len(pts) == 0:
            continue
        keys = pts[:, : plan.depth]
        change = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(pts)]))
        for a, b in zip(starts.tolist(), ends.tolist()):
            batches.append((tuple(keys[a].tolist()), r, name, a, b))
    batches.sort(key=lambda e: (e[0], e[1]))
    for _, _, name, a, b in batches:
        _batch(stmts[name], points[name][a:b, plan.width :], arrays, params)


_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _batch(stmt: Statement, inst: np.ndarray, arrays: dict, params: dict) -> None:
    """Run instances ``inst`` (rows in time order) of ``stmt`` at once."""
    n = len(inst)
    if n == 0:
        return
    env = dict(params)
    cols = inst.T
    for c, it in enumerate(stmt.iterators):
        env[it] = np.ascontiguousarray(cols[c])
    target = arrays[stmt.target.array]
    flat_target = target.reshape(-1)
    flat = _flat_index(stmt.target, env, target.shape, n)
    if stmt.reduction is not None:
        b = stmt.body
        rest = b.b if same(b.a, stmt.target) else b.a
        vals = np.broadcast_to(evaluate(rest, env, arrays), (n,))
        _AT[stmt.reduction].at(flat_target, flat, vals.astype(target.dtype, copy=False))
        return
    vals = np.broadcast_to(evaluate(stmt.body, env, arrays), (n,))
    if n > 1 and np.unique(flat).size < n:
        # several instances write one element: the last in time order wins
        rev = flat[::-1]
        _, first = np.unique(rev, return_index=True)
        keep = n - 1 - first
        flat, vals = flat[keep], vals[keep]
    flat_target[flat] = vals


def flat_aff(index: tuple, shape: tuple) -> Aff:
    """The row-major offset of ``array[index]`` as one affine expression."""
    flat, stride = Aff(const=0), 1
    for a, extent in zip(reversed(index), reversed(shape)):
        flat = flat + a * stride
        stride *= int(extent)
    return flat


def _flat_index(ld: Load, env: dict, shape: tuple, n: int) -> np.ndarray:
    if not shape:
        return np.zeros(n, dtype=np.int64)
    value = np.asarray(flat_aff(ld.index, shape).evaluate(env), dtype=np.int64)
    return np.broadcast_to(value, (n,))


# expression evaluation ----------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def evaluate(e: Expr, env: dict, arrays: dict):
    """Evaluate an expression with C semantics for each node's dtype."""
    dt = e.dtype.numpy
    if e.dtype == dtypes.bfloat16 and isinstance(e, (Const, Cast, Unary, Binary)):
        return _bfloat16(e, env, arrays)
    if isinstance(e, Const):
        return np.array(e.value, dtype=dt)
    if isinstance(e, Index):
        return np.asarray(e.aff.evaluate(env), dtype=np.int64)
    if isinstance(e, Load):
        arr = arrays[e.array]
        if arr.ndim == 0:
            return arr[()]
        return arr.reshape(-1)[flat_aff(e.index, arr.shape).evaluate(env)]
    if isinstance(e, Gather):
        return _gather(e, env, arrays)
    if isinstance(e, Cast):
        return np.asarray(evaluate(e.x, env, arrays)).astype(dt)
    if isinstance(e, Select):
        c = evaluate(e.cond, env, arrays)
        return np.where(
            c, evaluate(e.a, env, arrays), evaluate(e.b, env, arrays)
        ).astype(dt)
    if isinstance(e, Unary):
        return _unary(e.op, np.asarray(evaluate(e.x, env, arrays)), dt)
    if isinstance(e, Binary):
        a = np.asarray(evaluate(e.a, env, arrays))
        b = np.asarray(evaluate(e.b, env, arrays))
        return _binary(e.op, a, b, dt)
    if isinstance(e, Opaque):
        raise NotImplementedError(f"interpret: opaque expression {e.text}")
    raise TypeError(f"interpret: unknown expression {e!r}")


def _bfloat16(e: Expr, env: dict, arrays: dict):
    """A bfloat16 node as the generated C computes it: operands widened to float32
    (exactly), the operation in float32, its result rounded to bfloat16 once
    (round to nearest even; a cast from float64 or an integer goes through
    float32 first, as PyTorch converts)."""
    if isinstance(e, Const):
        return dtypes.to_bfloat16(e.value)
    if isinstance(e, Cast):
        return dtypes.to_bfloat16(np.asarray(evaluate(e.x, env, arrays)))
    f32 = np.dtype(np.float32)
    if isinstance(e, Unary):
        x = np.asarray(evaluate(e.x, env, arrays)).astype(f32)
        return dtypes.to_bfloat16(_unary(e.op, x, f32))
    a = np.asarray(evaluate(e.a, env, arrays)).astype(f32)
    b = np.asarray(evaluate(e.b, env, arrays)).astype(f32)
    return dtypes.to_bfloat16(_binary(e.op, a, b, f32))


def _gather(e: Gather, env: dict, arrays: dict):
    """The elements a gather reads; an index outside the gathered dimension
    raises (as PyTorch does), never wraps or reads another row."""
    arr = arrays[e.array]
    by = np.asarray(evaluate(e.by, env, arrays)).astype(np.int64)
    extent = arr.shape[e.dim]
    bad = (by < 0) | (by >= extent)
    if np.any(bad):
        value = int(np.broadcast_to(by, bad.shape)[bad].reshape(-1)[0])
        raise IndexRangeError(
            f"gather: {render(e)} reads index {value} of {e.array}'s dimension "
            f"{e.dim}, outside 0..{extent - 1}, because the index data holds it. "
            f"Pass indices in 0..{extent - 1} (PyTorch raises on them too)."
        )
    affine = tuple(Aff(const=0) if a is None else a for a in e.index)
    stride = int(np.prod(arr.shape[e.dim + 1 :], dtype=np.int64))
    flat = np.asarray(flat_aff(affine, arr.shape).evaluate(env)) + by * stride
    return arr.reshape(-1)[flat]


def _unary(op: str, x: np.ndarray, dt: np.dtype):
    with np.errstate(all="ignore"):
        if op == "neg":
            r = -x
        elif op == "abs":
            r = np.abs(x)
        elif op == "not":
            r = np.logical_not(x)
        elif op == "exp":
            r = np.exp(x)
        elif op == "log":
            r = np.log(x)
        elif op == "sqrt":
            r = np.sqrt(x)
        elif op == "rsqrt":
            r = np.asarray(1, dtype=dt) / np.sqrt(x)
        elif op == "tanh":
            r = np.tanh(x)
        elif op == "erf":
            r = _erf(x.astype(np.float64))
        elif op == "sigmoid":
            one = np.asarray(1, dtype=dt)
            r = one / (one + np.exp(-x))
        elif op == "sin":
            r = np.sin(x)
        elif op == "cos":
            r = np.cos(x)
        elif op == "floor":
            r = np.floor(x)
        elif op == "ceil":
            r = np.ceil(x)
        elif op == "round":  # C round(): half away from zero
            r = np.copysign(np.floor(np.abs(x) + np.asarray(0.5, dtype=dt)), x)
        elif op == "rint":  # C nearbyint(): half to even, as IEEE's default mode
            r = np.rint(x)
        elif op == "recip":
            r = np.asarray(1, dtype=dt) / x
        else:
            raise NotImplementedError(op)
    return np.asarray(r).astype(dt, copy=False)


_CMP = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _binary(op: str, a: np.ndarray, b: np.ndarray, dt: np.dtype):
    if op in _CMP:
        return _CMP[op](a, b)
    if op == "and":
        return np.logical_and(a, b)
    if op == "or":
        return np.logical_or(a, b)
    is_int = np.issubdtype(dt, np.integer)
    with np.errstate(all="ignore"):
        if op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "div":
            r = _trunc_div(a, b) if is_int else a / b
        elif op == "floordiv":
            r = np.floor_divide(a, b) if is_int else np.floor(a / b)
        elif op == "mod":  # C semantics: the sign follows the dividend
            r = a - _trunc_div(a, b) * b if is_int else np.fmod(a, b)
        elif op == "pow":
            r = np.power(a, b)
        elif op == "min":
            r = np.minimum(a, b)
        elif op == "max":
            r = np.maximum(a, b)
        else:
            raise NotImplementedError(op)
    return np.asarray(r).astype(dt, copy=False)


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix
