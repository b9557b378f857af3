"""Which of the automatic scheduler's finished candidates to keep.

isl's scheduler maximises fusion and parallelism; it does not know the cache. On
atax and bicg it distributes the two products over ``A`` into two nests, the second
of which walks ``A`` column by column (0.37x of the program order's speed with gcc),
and on doitgen it shifts the copy-back loop into the innermost reduction loop behind
a guard. So the scheduler finishes every candidate of the chain (tiled and marked,
see :mod:`schedules.host.scheduler`), adds the program as written (its own loops,
parallel marks only) last, so that no rewrite the model judges worse than the
input is kept, and :func:`choose` compares them:

1. a candidate that runs fewer statement instances under a ``@parallel`` loop than
   another (by more than :data:`STRIDED_MARGIN`) is never taken;
2. fewer estimated bytes streamed from memory (:func:`streamed_bytes`), when one
   streams more than :data:`MARGIN` times the other and neither schedule has a
   skewed loop (one that combines two iterators: the model's bounding boxes then
   cover whole diagonals);
3. fewer far strided accesses along the innermost loop per statement instance
   (by more than :data:`STRIDED_MARGIN` per instance): strided accesses
   to an array larger than the tile budget (half the L2) whose innermost loop
   runs over more lines than the L1 holds (its trip count, a line per element).
   Such a walk (down a column) fetches a line per element from beyond the L1,
   and from beyond the L2 the first time, which the hardware prefetchers do not
   see coming (it crosses a page per element); that costs more than the few
   cycles of floating-point latency a recurrence adds to an instance. A short
   walk (a point loop of a tile, 128 elements) finds its lines in the L1 again
   at the next iteration around it. Cholesky: isl's
   right-looking schedule reads ``A[j][k]`` down a column under its
   recurrence-free innermost loop, 0.50x of gcc's time on the program order's
   dot products at LARGE; trisolv's column sweep of ``L``, 0.45x;
4. fewer statement instances whose innermost loop carries a recurrence (a
   dependence of the statement on itself), by more than :data:`STRIDED_MARGIN`:
   without ``-ffast-math`` the C compiler vectorises no such loop, while a
   dependence-free one vectorises even with strided accesses (isl's wavefront for
   Seidel-2D ran 3x faster than gcc on the original, whose ``j`` loop carries one);
4. fewer guards in innermost loops that test the loop's own iterator (isl's AST
   for the schedule, see :func:`guards`);
6. fewer strided accesses along the innermost loop, weighted by how many instances
   make them (by more than :data:`STRIDED_MARGIN`);
7. the earlier candidate of the chain (isl's own schedule first).

Model of the bytes streamed (stated, not measured): the program runs as a sequence
of top-level nests (the children of the outermost sequences and sets), each
streamed on its own (see :func:`nest_traffic`): a nest's loops are fixed outermost first; at the
first loop whose one iteration touches at most the tile budget (half the L2 cache),
consecutive iterations share what is in cache, and the loop around it streams its
whole footprint once per iteration. Footprints are bounding boxes of the elements
reached (one per group of overlapping accesses of an array), counted in cache
lines along the last index, at the cost model's problem sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import islpy as isl
import numpy as np

from polyc.ir import loops
from polyc.ir.kernel import Kernel, access_map
from schedules import stree
from schedules.host.cache_model import Model, access_kind

#: how many times more bytes a candidate must stream to lose on bytes alone (the
#: model is rough: a smaller difference is a tie, decided by the next criteria)
MARGIN = 1.5
#: relative difference in strided accesses below which two candidates tie
STRIDED_MARGIN = 0.1
#: cache line size in bytes
LINE = 64
#: the trip count :func:`_trip` assumes when isl finds no bound
DEFAULT_TRIP = 1024


@dataclass(frozen=True)
class Score:
    """What :func:`choose` compares (see the module docstring)."""

    parallel: float
    devectorised: float
    skewed: bool
    recurrent: float
    streamed: float
    guards: int
    strided: float
    #: far strided accesses per statement instance (criterion 3)
    far_strided: float = 0.0


def choose(kernels: list[Kernel], model: Model) -> int:
    """The index of the candidate to keep among ``kernels`` (finished schedules of
    one program, in chain order)."""
    scores = [score(k, model) for k in kernels]
    most = max(s.parallel for s in scores)
    best = None
    for n, s in enumerate(scores):
        if s.parallel < most * (1 - STRIDED_MARGIN):
            continue
        if best is None or better(s, scores[best]):
            best = n
    assert best is not None
    return best


def better(a: Score, b: Score) -> bool:
    """Whether ``a`` is strictly preferred to ``b`` (parallelism aside)."""
    if a.devectorised < b.devectorised * (1 - STRIDED_MARGIN):
        return True
    if b.devectorised < a.devectorised * (1 - STRIDED_MARGIN):
        return False
    if not (a.skewed or b.skewed):
        if a.streamed * MARGIN < b.streamed:
            return True
        if b.streamed * MARGIN < a.streamed:
            return False
    if a.far_strided < b.far_strided - STRIDED_MARGIN:
        return True
    if b.far_strided < a.far_strided - STRIDED_MARGIN:
        return False
    if a.recurrent < b.recurrent * (1 - STRIDED_MARGIN):
        return True
    if b.recurrent < a.recurrent * (1 - STRIDED_MARGIN):
        return False
    if a.guards != b.guards:
        return a.guards < b.guards
    return a.strided < b.strided * (1 - STRIDED_MARGIN)


def score(kernel: Kernel, model: Model) -> Score:
    """The :class:`Score` of a kernel's schedule."""
    root = stree.from_isl(kernel.schedule)
    under = {
        name
        for _, n in stree.walk(root)
        if isinstance(n, stree.Mark) and n.name == "@parallel"
        for name in stree.statements(n)
    }
    parallel = sum(_instances(model, kernel.statement(name)) for name in under)
    inner = _innermost(kernel)
    recurring = recurrent(kernel, model)
    strided = far = work = 0.0
    budget = model.cache.tile_budget
    for stmt in kernel.statements:
        count = _instances(model, stmt)
        work += count
        if stmt.name not in inner:
            continue
        step, dim = inner[stmt.name]
        run = None  # lines one run of the innermost loop walks, when strided
        for ld in (stmt.target, *stmt.reads):
            if access_kind(ld.index, stmt.iterators, step) != "strided":
                continue
            strided += count
            if kernel.arrays[ld.array].nbytes(model.values) <= budget:
                continue
            if run is None:
                run = _trip(kernel, model, stmt.name, dim) * LINE
            if run > model.cache.l1:
                far += count
    return Score(
        parallel,
        devectorised(kernel, model),
        _skewed(kernel),
        recurring,
        streamed_bytes(kernel, model),
        guards(kernel),
        strided,
        far / max(work, 1.0),
    )


def devectorised(kernel: Kernel, model: Model) -> float:
    """Instances of the statements whose innermost loop in the program order
    vectorises (no recurrence, no strided access) and in ``kernel``'s schedule
    makes a strided access: a fusion or interchange that turned a contiguous
    sweep into a walk down columns (deriche's ``imgOut = y1 + y2`` fused into
    its column recurrences ran at 0.65x of gcc's speed)."""
    original = kernel.original
    before = innermost_steps(original)
    after = innermost_steps(kernel)
    recurring = recurrent_statements(original)
    total = 0.0
    for stmt in kernel.statements:
        old, new = before.get(stmt.name), after.get(stmt.name)
        if old is None or new is None:
            continue
        accesses = (stmt.target, *stmt.reads)
        kinds = [access_kind(ld.index, stmt.iterators, old) for ld in accesses]
        if "strided" in kinds or stmt.name in recurring:
            continue
        if any(
            access_kind(ld.index, stmt.iterators, new) == "strided" for ld in accesses
        ):
            total += _instances(model, stmt)
    return total


def _skewed(kernel: Kernel) -> bool:
    """Whether a loop of the schedule combines two iterators of a statement (a
    skewed or wavefront loop), where the footprint boxes of
    :func:`streamed_bytes` cover whole diagonals and say nothing."""
    from schedules.legality import statement_times

    for t in statement_times(kernel.schedule).values():
        rows = _rows(t)
        if rows and any(np.count_nonzero(r) > 1 for r in rows):
            return True
    return False


def recurrent(kernel: Kernel, model: Model) -> float:
    """Instances of the statements whose innermost loop carries a dependence of the
    statement on itself (a recurrence the C compiler does not vectorise)."""
    return sum(
        _instances(model, kernel.statement(n)) for n in recurrent_statements(kernel)
    )


def recurrent_statements(kernel: Kernel) -> set[str]:
    """The statements :func:`recurrent` counts: those whose innermost loop
    carries a dependence of the statement on itself."""
    from schedules.legality import dependences, statement_times

    times = statement_times(kernel.schedule)
    out: set[str] = set()
    for stmt in kernel.statements:
        t = times.get(stmt.name)
        rows = _rows(t) if t is not None else None
        if not rows:
            continue
        varying = [d for d, r in enumerate(rows) if np.any(r)]
        if not varying:
            continue
        inner = varying[-1]
        for _, _, m in dependences(kernel):
            if m.get_tuple_name(isl.dim_type.in_) != stmt.name:
                continue
            if m.get_tuple_name(isl.dim_type.out) != stmt.name:
                continue
            deltas = m.apply_domain(t).apply_range(t).deltas()
            for d in range(inner):
                deltas = deltas.fix_val(isl.dim_type.set, d, 0)
            if not deltas.fix_val(isl.dim_type.set, inner, 0).is_equal(deltas):
                out.add(stmt.name)
                break
    return out


def streamed_bytes(kernel: Kernel, model: Model) -> float:
    """Estimated bytes the kernel's schedule streams from memory, the sum over its
    top-level nests of :func:`nest_traffic`."""
    from schedules.legality import statement_times

    times = statement_times(kernel.schedule)
    total = 0.0
    for nest in _nests(stree.from_isl(kernel.schedule)):
        names = [n for n in stree.statements(nest) if n in times]
        if names:
            total += nest_traffic(kernel, model, {n: times[n] for n in names})
    return total


def nest_traffic(kernel: Kernel, model: Model, times: dict[str, isl.Map]) -> float:
    """Bytes one nest streams: ``times`` maps its statements to their (flat) times.

    The time dimensions are fixed one by one, outermost first, each to a value in
    the middle of its range (dimensions that only order the children of a
    sequence are left free). ``F(d)`` is the footprint of what runs at one value of
    the dimensions up to ``d`` (in cache lines), ``F(-1)`` that of the whole nest.
    At the first ``d`` where ``F(d)`` fits in the tile budget, consecutive
    iterations of ``d`` share data in cache but iterations of ``d - 1`` do not:
    the nest streams ``F(d - 1)`` once per iteration of ``d - 1``.
    """
    fixed = model.fixed
    maps = {}
    for n, m in times.items():
        dom = kernel.statement(n).domain.intersect_params(fixed)
        maps[n] = m.intersect_params(fixed).intersect_domain(dom)
    region = {n: m.range() for n, m in maps.items()}
    region = {n: r for n, r in region.items() if not r.is_empty()}
    if not region:
        return 0.0
    width = next(iter(region.values())).dim(isl.dim_type.set)
    foot = _footprint(kernel, maps, region)
    count = 1.0
    for d in range(width):
        lows, highs, single = [], [], True
        for r in region.values():
            low, high = r.dim_min_val(d), r.dim_max_val(d)
            if not (low.is_int() and high.is_int()):
                return count * foot
            lows.append(int(low.to_python()))
            highs.append(int(high.to_python()))
            single = single and lows[-1] == highs[-1]
        lo, hi = min(lows), max(highs)
        if single:  # a sequence position (or a loop of one iteration)
            continue
        value = _value_near(region, d, (lo + hi) // 2, lo)
        inside = {n: r.fix_val(isl.dim_type.set, d, value) for n, r in region.items()}
        inside = {n: r for n, r in inside.items() if not r.is_empty()}
        new = _footprint(kernel, maps, inside)
        if new <= model.cache.tile_budget:
            return count * foot
        count *= hi - lo + 1
        region, foot = inside, new
    return count * foot


def _value_near(region: dict, d: int, mid: int, lo: int) -> int:
    """The smallest value at least ``mid`` that dimension ``d`` takes (``lo``
    when none does)."""
    best = None
    for r in region.values():
        above = r.lower_bound_val(isl.dim_type.set, d, mid)
        if above.is_empty():
            continue
        v = int(above.dim_min_val(d).to_python())
        best = v if best is None else min(best, v)
    return lo if best is None else best


def _footprint(kernel: Kernel, maps: dict, region: dict) -> float:
    """Bytes (whole cache lines along the last index) of the bounding boxes of the
    elements reached by the instances whose times lie in ``region``."""
    boxes: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for n, times in region.items():
        stmt = kernel.statement(n)
        inst = maps[n].intersect_range(times).domain()
        for ld in (stmt.target, *stmt.reads):
            if ld.index:
                box = _box(
                    access_map(stmt, ld, kernel.params).intersect_domain(inst).range()
                )
            else:
                box = (np.zeros(1), np.zeros(1))
            if box is not None:
                boxes[ld.array] = _add_box(boxes.get(ld.array, []), box)
    total = 0.0
    for array, found in boxes.items():
        size = kernel.arrays[array].dtype.itemsize
        for lo, hi in found:
            ext = np.maximum(hi - lo + 1, 1)
            last = math.ceil(ext[-1] * size / LINE) * LINE
            total += float(np.prod(ext[:-1])) * last
    return total


def _add_box(boxes: list, box: tuple) -> list:
    """``boxes`` (of one array) with ``box`` added: merged into the bounding box
    of those it overlaps (a stencil's shifted accesses), kept apart from those it
    does not (a transposed copy's row and column, ``corr[j][i] = corr[i][j]``,
    instead of the square around both)."""
    lo, hi = box
    apart = list(boxes)
    grown = True
    while grown:  # a grown hull may overlap a box it missed before
        grown = False
        for n, (olo, ohi) in enumerate(apart):
            if np.all(lo <= ohi) and np.all(olo <= hi):
                lo, hi = np.minimum(lo, olo), np.maximum(hi, ohi)
                del apart[n]
                grown = True
                break
    return [*apart, (lo, hi)]


def _nests(root: stree.Node) -> list[stree.Node]:
    """The top-level nests: the children of the outermost sequences and sets
    (reached without passing a band; nested ones flattened), or the whole tree."""
    node = root
    while not isinstance(node, (stree.Band, stree.Sequence_, stree.Set_, stree.Leaf)):
        kids = stree.children(node)
        if len(kids) != 1:
            break
        node = kids[0]
    if isinstance(node, (stree.Sequence_, stree.Set_)):
        return [nest for kid in node.children for nest in _nests(kid)]
    return [root]


def _box(reach: isl.Set) -> tuple[np.ndarray, np.ndarray] | None:
    if reach.is_empty():
        return None
    n = reach.dim(isl.dim_type.set)
    lo, hi = np.zeros(n), np.zeros(n)
    for d in range(n):
        low, high = reach.dim_min_val(d), reach.dim_max_val(d)
        if not (low.is_int() and high.is_int()):
            return None
        lo[d], hi[d] = low.to_python(), high.to_python()
    return lo, hi


def _instances(model: Model, stmt) -> float:
    return float(np.prod(model.iterator_extents(stmt)))


def innermost_steps(kernel: Kernel) -> dict[str, np.ndarray]:
    """``{statement: change of its iterators when its innermost loop steps by
    one}``: the innermost loop is the last schedule dimension that varies with the
    statement's iterators (the others held fixed), or the one above it below an
    ``@accumulate`` mark, whose last loop the C compiler unrolls (the rows of a
    register tile). Statements outside any loop are left out."""
    return {name: step for name, (step, _) in _innermost(kernel).items()}


def _innermost(kernel: Kernel) -> dict[str, tuple[np.ndarray, int]]:
    """:func:`innermost_steps`, each with the position of the innermost loop's
    dimension in the statement's flat schedule."""
    from schedules.legality import statement_times

    root = stree.from_isl(kernel.schedule)
    unrolled = {
        name
        for _, n in stree.walk(root)
        if isinstance(n, stree.Mark) and n.name.startswith("@accumulate")
        for name in stree.statements(n)
    }
    out: dict[str, tuple[np.ndarray, int]] = {}
    for name, m in statement_times(kernel.schedule).items():
        rows = _rows(m)
        if rows is None:
            continue
        varying = [d for d, r in enumerate(rows) if np.any(r)]
        if name in unrolled and len(varying) > 1:
            varying = varying[:-1]
        if not varying:
            continue
        R = np.array([rows[d] for d in varying])
        rhs = np.zeros(len(varying))
        rhs[-1] = 1.0
        x, *_ = np.linalg.lstsq(R, rhs, rcond=None)
        if np.allclose(R @ x, rhs, atol=1e-9):
            out[name] = (x, varying[-1])
    return out


def _trip(kernel: Kernel, model: Model, name: str, dim: int) -> int:
    """The most iterations one run of dimension ``dim`` of statement ``name``'s
    flat schedule makes (its outer dimensions fixed), at the model's sizes."""
    from schedules.legality import statement_times

    stmt = kernel.statement(name)
    times = statement_times(kernel.schedule)[name].intersect_params(model.fixed)
    region = times.intersect_domain(stmt.domain.intersect_params(model.fixed)).range()
    if region.is_empty():
        return 0
    pairs = isl.Map.from_domain_and_range(region, region)
    for d in range(dim):
        pairs = pairs.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
    span = pairs.deltas().dim_max_val(dim)
    return int(span.to_python()) + 1 if span.is_int() else DEFAULT_TRIP


def _rows(m: isl.Map) -> list[np.ndarray] | None:
    """Iterator coefficients of each output dimension of a statement's flat
    schedule map (None when one is not a single affine piece)."""
    pma = isl.PwMultiAff.from_map(m)
    out = []
    for d in range(pma.dim(isl.dim_type.out)):
        pieces = pma.get_pw_aff(d).get_pieces()
        if len(pieces) != 1:
            return None
        aff = pieces[0][1]
        den = float(aff.get_denominator_val().to_python())
        n_in = aff.dim(isl.dim_type.in_)
        out.append(
            np.array(
                [
                    float(aff.get_coefficient_val(isl.dim_type.in_, i).to_python())
                    / den
                    for i in range(n_in)
                ]
            )
        )
    return out


def guards(kernel: Kernel) -> int:
    """Guards in the innermost loops of isl's AST for the kernel's schedule that
    test the innermost loop's own iterator (``if (p == 159 && t3 == 159)`` inside
    the ``t3`` loop): one that tests only outer iterators is loop-invariant, and
    the C compiler hoists it out of the loop (unswitching)."""
    ast = loops.build_ast(kernel.schedule, kernel.context)

    def count(nodes, inner: str | None) -> int:
        total = 0
        for n in nodes:
            if isinstance(n, loops.For):
                total += count(n.body, inner if n.degenerate else n.var)
            elif isinstance(n, loops.If):
                branches = (*n.then, *n.orelse)
                if inner in _ids(n.cond) and not _has_loop(branches):
                    total += 1
                total += count(n.then, inner) + count(n.orelse, inner)
            elif isinstance(n, loops.Mark):
                total += count(n.body, inner)
        return total

    return count(loops.from_isl(ast), None)


def _ids(e: loops.LExpr) -> set[str]:
    if e.op == "id":
        return {e.args[0]}
    out: set[str] = set()
    for a in e.args:
        if isinstance(a, loops.LExpr):
            out |= _ids(a)
    return out


def _has_loop(nodes) -> bool:
    for n in nodes:
        if isinstance(n, loops.For):
            return True
        if isinstance(n, loops.If) and _has_loop((*n.then, *n.orelse)):
            return True
        if isinstance(n, loops.Mark) and _has_loop(n.body):
            return True
    return False
