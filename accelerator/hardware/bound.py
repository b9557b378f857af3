"""The engine bound of a kernel on a config: no schedule runs it in fewer cycles.

The roofline (:mod:`accelerator.hardware.roofline`) counts only multiply-accumulates
at the MAC array's peak and the unavoidable DRAM bytes, so a softmax, a layer norm
or a depthwise convolution, whose work the MAC array cannot do or does at a
fraction of its peak, seems to miss its bound many times over. The engine bound
counts every statement's work on the engines that can execute it, each at the
best rate the simulator's runtime (``accelerator/sim/runtime``) ever charges:

- the **MAC array** runs a contraction ``C += A * B`` of a dtype it takes, at the
  utilisation its shape allows: the ``X`` values of the iterators mapped on its
  ``R`` rows times the ``Y`` on its ``C`` columns (the product of the extents of
  the iterators of that role; which roles go where follows the dataflow) take at
  least :func:`spatial_folds` folds (``ceil(X / R) * Y / min(Y, C)``, or the
  same exchanged: 17 rows of work on 16 rows take two folds), and a fold
  streaming ``T`` elements takes at least ``max(T / rate, R)`` cycles (folds
  start at least ``R`` cycles apart), so a depthwise convolution (no
  output-channel dimension in the weights' sense: one column of the array) or a
  ``K`` below the rows does not reach peak;
- the **vector unit** runs any statement at ``max(1, sum of its ops' cycles) /
  lanes`` cycles per instance (``pc_vector``: cycles per group of ``lanes``);
- the **scalar core** runs any statement at ``statement_cycles`` plus its ops'
  cycles, the lowest latency of a level it could read and one cycle of transfer
  per instance (``pc_stmt``).

Work that costs nothing on some engine is left out: the zero init of a
contraction's output (the MAC calls overwrite instead of accumulating), an
int8 requantization when the MAC array's output path requantizes, and data
movement: a copy (a body that loads another array's element as it is, a view,
transpose or gather) and a zero fill, which the DMA engines move (a reader
reads through an inlined copy with the composed strides; a padding's taps
are skipped or read from a zeroed halo). Counting them on the vector unit
made the bound no bound: on HW-A, whose float32 work all runs there,
hf-mobilenetv2 simulated 311,900 cycles against a "bound" of 321,653 (its
view and padding copies, which the scheduler inlines, charged as vector
passes). Their bytes between on-chip levels are not counted either, which
only lowers the bound.

**Why this is a lower bound.** Any schedule runs each statement's instances on
engines that can execute them; let ``f[i, e]`` be the fraction of statement
``i``'s ``w[i]`` instances engine ``e`` runs, at no less than ``t[i, e]`` cycles
each. Every engine is busy at most the run's ``T`` cycles, so for any weights
``lam[e] >= 0`` summing to 1::

    T >= sum_e lam[e] * busy[e] >= sum_i w[i] * min_e lam[e] * t[i, e] = g(lam)

The bound is the largest ``g(lam)``: by LP duality it equals the least makespan of
the fractional assignment (each engine's load at most ``T``), the best any
schedule could do were it free to split every statement across its engines. When
each engine runs all the work it can at one rate, ``lam`` on a set ``S`` of
engines in proportion to their rates gives ``(work only S can do) / (sum of their
rates)``, the form of the issue. ``g`` is concave and linear between the lines
where two engines tie for a statement, so its maximum over the simplex of ``lam``
is at a vertex of those lines: :func:`_best_weights` evaluates them all, exactly.
The MAC array's per-fold floor of ``R`` cycles holds for every fold but the last
one the array runs, so ``lam[mac] * R`` comes off when the floor was used. DRAM
is a separate resource: the bound is the larger of that and the unavoidable DRAM
bytes over the bandwidth (and the reads, the writes over their caps, where DRAM
has them). Issue cycles, DMA set-up, latencies and bank conflicts only add to a
run, so they are not counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from accelerator.hardware.roofline import _fix, count_points, dram_bytes, mac_dtype
from accelerator.hardware.spec import Spec
from polyc.ir import marks as pm
from polyc.ir import requant
from polyc.ir.expr import Binary, Cast, Const, Load, ops_count, same
from polyc.ir.kernel import Kernel, Statement

#: the compute engines, in the order of :attr:`EngineBound.weights`
ENGINES = ("mac_array", "vector", "scalar")
#: candidate weight vectors evaluated per chunk (bounds the temporary array)
_CHUNK = 4096


@dataclass(frozen=True)
class Work:
    """One statement's work: its instances and the fewest cycles per instance on
    each engine (None where the engine cannot run it)."""

    stmt: str
    instances: int
    cycles: tuple[float | None, ...]  # per engine of ENGINES


@dataclass(frozen=True)
class EngineBound:
    """The engine bound and how it was obtained."""

    work: tuple[Work, ...]
    compute_cycles: float  # the engines' bound: max over weights of g
    weights: tuple[float, ...]  # the maximising weights, per engine of ENGINES
    memory_cycles: float  # unavoidable DRAM bytes over the bandwidth (or caps)
    min_dram_bytes: int

    @property
    def cycles(self) -> int:
        """The bound in whole cycles (at least 1)."""
        return max(1, math.ceil(max(self.compute_cycles, self.memory_cycles) - 1e-9))

    @property
    def binding(self) -> tuple[str, ...]:
        """The engines whose time sets the compute bound (positive weight)."""
        return tuple(e for e, lam in zip(ENGINES, self.weights) if lam > 1e-9)

    @property
    def bound(self) -> str:
        """``"memory"``, or the binding engines joined by ``+`` (``"vector"``,
        ``"mac_array+vector"``)."""
        if self.memory_cycles >= self.compute_cycles:
            return "memory"
        return "+".join(self.binding) or "mac_array"

    def alone(self, engine: str) -> float:
        """Cycles ``engine`` would need for all the work only it can do."""
        e = ENGINES.index(engine)
        return sum(
            w.instances * w.cycles[e]
            for w in self.work
            if w.cycles[e] is not None and sum(c is not None for c in w.cycles) == 1
        )


def engine_bound(kernel: Kernel, spec: Spec, params: Mapping[str, int]) -> EngineBound:
    """The engine bound of ``kernel`` with parameter values ``params`` on ``spec``
    (see the module docstring); memoised per program and config."""
    key = ("accelerator.engine_bound", spec, tuple(sorted(params.items())))
    return kernel.analysis(key, lambda k: _compute(k, spec, params))


def _compute(kernel: Kernel, spec: Spec, params: Mapping[str, int]) -> EngineBound:
    pieces = tuple(
        w for s in kernel.statements if (w := _work(kernel, s, spec, params))
    )
    slack = 0.0
    if any(_floored(kernel.statement(w.stmt), spec, params) for w in pieces):
        slack = float(spec.mac_array.rows)
    value, weights = _best_weights(pieces, slack)
    reads, writes = dram_bytes(kernel, params)
    d = spec.dram
    memory = (reads + writes) / d.bytes_per_cycle
    if d.read_bytes_per_cycle:
        memory = max(memory, reads / d.read_bytes_per_cycle)
    if d.write_bytes_per_cycle:
        memory = max(memory, writes / d.write_bytes_per_cycle)
    return EngineBound(pieces, value, weights, memory, reads + writes)


def _work(
    kernel: Kernel, stmt: Statement, spec: Spec, params: Mapping[str, int]
) -> Work | None:
    """``stmt``'s work, or None when it costs nothing on some engine."""
    if _free(kernel, stmt, spec):
        return None
    n = count_points(_fix(stmt.domain, params))
    if n == 0:
        return None
    ops = ops_count(stmt.body)
    vec = spec.vector
    vector = max(1, sum(c * vec.cycles[k] for k, c in ops.items())) / vec.lanes
    sc = spec.scalar
    scalar = sc.statement_cycles + sum(c * sc.cycles[k] for k, c in ops.items())
    if stmt.reads:
        scalar += min(m.latency_cycles for m in spec.memory)
    scalar += 1  # at least one cycle to move its bytes at some level
    return Work(stmt.name, n, (_mac_cycles(stmt, spec, params), vector, scalar))


def _free(kernel: Kernel, stmt: Statement, spec: Spec) -> bool:
    """Work some engine does at no cost: the zero init of a contraction the MAC
    array runs (folded into its calls), a requantization in the array's output
    path, a copy or a zero fill (the DMA engines move them)."""
    if spec.mac_array.requantize and requant.match(stmt.body) is not None:
        return True
    body = stmt.body
    if isinstance(body, Const) and body.value == 0:
        # a zero fill the DMA engines do (which covers the zero init a MAC
        # contraction folds into its calls), or one that contraction folds
        return stmt.reduction is None or any(
            s.target.array == stmt.target.array and _mac_dtype(s, spec)
            for s in kernel.statements
            if s is not stmt
        )
    # a copy: the DMA engines move it
    return (
        stmt.reduction is None
        and isinstance(body, Load)
        and body.dtype == stmt.target.dtype
    )


def _mac_dtype(stmt: Statement, spec: Spec) -> str | None:
    """The operand dtype when the MAC array can run ``stmt`` (a contraction of a
    MAC mode over two loads, the dtype in the config)."""
    dtype = mac_dtype(stmt)
    if dtype is None or (dtype, stmt.target.dtype.name) not in pm.MAC_MODES:
        return None
    if _operands(stmt) is None or not spec.mac_array.peak_macs_per_cycle(dtype):
        return None
    return dtype


def _operands(stmt: Statement) -> tuple[Load, Load] | None:
    body = stmt.body
    assert isinstance(body, Binary)
    rest = body.b if same(body.a, stmt.target) else body.a
    while isinstance(rest, Cast):
        rest = rest.x
    assert isinstance(rest, Binary)
    loads = []
    for x in (rest.a, rest.b):
        while isinstance(x, Cast):
            x = x.x
        if not isinstance(x, Load):
            return None
        loads.append(x)
    return loads[0], loads[1]


def _extents(stmt: Statement, params: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per role pair, the product of the hull extents of the iterators used by
    exactly those two of (C, A, B): ``m`` (C, A), ``n`` (C, B), ``k`` (A, B)."""
    dom = _fix(stmt.domain, params)
    c, (a, b) = stmt.target, _operands(stmt)
    out = {"m": 1, "n": 1, "k": 1}
    for d, it in enumerate(stmt.iterators):
        used = tuple(any(x.coefficient(it) for x in ld.index) for ld in (c, a, b))
        role = {(1, 1, 0): "m", (1, 0, 1): "n", (0, 1, 1): "k"}.get(used)
        if role is None:
            continue
        lo = dom.dim_min_val(d).to_python()
        hi = dom.dim_max_val(d).to_python()
        out[role] *= hi - lo + 1
    return out


def _fold_dims(stmt: Statement, spec: Spec, params, swap: bool) -> tuple[int, ...]:
    """(extent on the rows, on the columns, streamed) for the config's dataflow;
    ``swap`` exchanges M and N (either load may be the array's A operand)."""
    x = _extents(stmt, params)
    m, n, k = (x["n"], x["m"], x["k"]) if swap else (x["m"], x["n"], x["k"])
    flow = spec.mac_array.dataflow
    if flow == "output_stationary":
        return m, n, k
    if flow == "input_stationary":
        return k, m, n
    return k, n, m  # weight stationary


def _mac_cycles(stmt: Statement, spec: Spec, params) -> float | None:
    """The fewest MAC-array cycles per instance of ``stmt`` (None: it cannot)."""
    dtype = _mac_dtype(stmt, spec)
    if dtype is None:
        return None
    arr = spec.mac_array
    rate = arr.dtypes[dtype].macs_per_cycle
    best = math.inf
    for swap in (False, True):
        rows, cols, t = _fold_dims(stmt, spec, params, swap)
        folds = spatial_folds(rows, cols, arr.rows, arr.cols)
        best = min(best, folds * max(t / rate, arr.rows) / (rows * cols * t))
    return best


def spatial_folds(x: int, y: int, r: int, c: int) -> float:
    """The fewest folds of an ``r`` x ``c`` array that hold every pair of an
    ``x`` x ``y`` grid (the values of the iterators mapped on its rows, times
    those on its columns): a fold holds a product set, at most ``r`` row values
    times ``c`` column values (processing element ``(i, j)`` pairs the operand
    row on row ``i`` with the operand column on column ``j``). Each column value
    is paired with all ``x`` row values, at most ``r`` per fold, so it is in at
    least ``ceil(x / r)`` folds, and a fold holds at most ``min(y, c)`` column
    values: at least ``ceil(x / r) * y / min(y, c)`` folds; the same with rows
    and columns exchanged. So ViT's 17 tokens on 16 rows take two folds per
    column tile, the second with one row busy (17/32 of the peak), where the
    product of the extents alone (17/16 folds) would claim all of it."""
    return max(math.ceil(x / r) * y / min(y, c), math.ceil(y / c) * x / min(x, r))


def _floored(stmt: Statement, spec: Spec, params) -> bool:
    """Whether a fold of ``stmt`` streams in fewer cycles than the array's rows
    (its per-fold floor was charged)."""
    dtype = _mac_dtype(stmt, spec)
    if dtype is None:
        return False
    rate = spec.mac_array.dtypes[dtype].macs_per_cycle
    return any(
        _fold_dims(stmt, spec, params, swap)[2] / rate < spec.mac_array.rows
        for swap in (False, True)
    )


def _best_weights(
    work: tuple[Work, ...], slack: float = 0.0
) -> tuple[float, tuple[float, ...]]:
    """``max over lam of g(lam) - lam[mac] * slack`` and its ``lam`` (see the
    module docstring), by evaluating every vertex of the lines where two engines
    tie for some statement, within the simplex."""
    n = len(ENGINES)
    if not work:
        return 0.0, (0.0,) * n
    cost = np.array(
        [[w.instances * c if c is not None else np.inf for c in w.cycles] for w in work]
    )
    lines = {tuple(np.eye(n)[e]) for e in range(n)}  # the simplex's edges
    for row in np.unique(cost, axis=0):
        for e in range(n):
            for f in range(e + 1, n):
                if np.isfinite(row[e]) and np.isfinite(row[f]):
                    line = np.zeros(n)
                    line[e], line[f] = row[e], -row[f]
                    lines.add(tuple(np.round(line / np.abs(line).max(), 12)))
    ls = np.array(sorted(lines))
    i, j = np.triu_indices(len(ls), 1)
    points = np.cross(ls[i], ls[j])
    total = points.sum(axis=1)
    keep = np.abs(total) > 1e-12
    points = points[keep] / total[keep, None]
    points = points[(points >= -1e-12).all(axis=1)].clip(min=0.0)
    points /= points.sum(axis=1, keepdims=True)
    finite = np.isfinite(cost)
    known = np.where(finite, cost, 0.0)
    best, arg = -np.inf, None
    for lo in range(0, len(points), _CHUNK):
        p = points[lo : lo + _CHUNK]
        # min over engines of lam[e] * cost[i, e]; an engine that cannot run a
        # statement never holds its minimum (inf), even at weight 0
        scaled = np.where(finite[None], p[:, None, :] * known[None], np.inf)
        values = scaled.min(axis=2).sum(axis=1) - p[:, 0] * slack
        k = int(values.argmax())
        if values[k] > best:
            best, arg = float(values[k]), p[k]
    return max(0.0, best), tuple(float(x) for x in arg)
