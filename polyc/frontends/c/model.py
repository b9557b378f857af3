"""From a walked region to its Kernel: inferred extents, the in-bounds context,
privatised scalars and array roles (the analyses that need the whole region)."""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc.frontends.c.affine import NotAffine, isl_aff_to_aff
from polyc.frontends.c.region import ArrayInfo, Walked
from polyc.ir.affine import Aff, var
from polyc.ir.expr import Load
from polyc.ir.kernel import Array, Kernel, Role, Statement, access_map, array_extent


def finish(walked: Walked, name: str, outside: set[str]):
    """The region's Kernel and its privatisation plan ``{array: iterators}``.

    ``outside`` are the names the function uses outside the region (a variable
    not among them is dead after the region).

    Raises:
        NotAffine: for an extent that cannot be inferred, or an access outside its
            array for every value of the parameters.
    """
    p = walked.program
    params = list(walked.params)
    for info in walked.arrays.values():
        if info.inferred:
            p.resize(info.name, _inferred_shape(p, info, params))
    p.assume(_in_bounds(p, params, name))
    first = p.kernel()
    dead = {
        a
        for a, info in walked.arrays.items()
        if info.var.scope in ("region", "hoisted", "local", "param")
        and not (info.var.scope == "param" and info.var.ctype.ndim)
        and info.var.name not in outside
    }
    plan = _privatization(first, walked, dead)
    arrays, statements = _rewrite(first, plan)
    arrays = _roles(first, arrays, dead, plan)
    kernel = Kernel.create(
        name, arrays, statements, params, first.context, schedule=first.schedule
    )
    return kernel, {a: tuple(its) for a, (its, _, _) in plan.items()}


def _accesses(p, params) -> list[tuple[Statement, Load, isl.Map]]:
    out = []
    for s in p.statements:
        for ld in (s.target, *s.reads):
            out.append((s, ld, access_map(s, ld, params)))
    return out


def _inferred_shape(p, info: ArrayInfo, params) -> list[Aff]:
    arr = p.arrays[info.name]
    shape = list(arr.shape)
    elements = None
    for _, ld, m in _accesses(p, params):
        if ld.array == info.name:
            r = m.range()
            elements = r if elements is None else elements.union(r)
    for d in info.inferred:
        if elements is None or elements.is_empty():
            shape[d] = Aff(const=1)
            continue
        hi = elements.dim_max(d).coalesce()
        lo = elements.dim_min(d).coalesce()
        pieces = hi.get_pieces()
        if len(pieces) != 1:
            raise NotAffine(
                info.var.node,
                f"an array whose extent in dimension {d} polyc cannot infer (the "
                f"largest index is {hi}); declare the extent, e.g. "
                f"{info.var.name}[n]",
            )
        low = lo.min_val() if lo.is_cst() else None
        shape[d] = isl_aff_to_aff(pieces[0][1], params, []) + 1
        if low is not None and low.is_neg():
            raise NotAffine(
                info.var.node, f"an array indexed below 0 in dimension {d} (at {low})"
            )
    return shape


def _in_bounds(p, params, name) -> isl.Set:
    """Parameter values for which every access is inside its array."""
    head = f"[{', '.join(params)}] -> " if params else ""
    ctx = isl.Set(f"{head}{{ : }}")
    witness = None
    for s, ld, m in _accesses(p, params):
        arr = p.arrays[ld.array]
        outside = m.range().subtract(array_extent(arr, params))
        if not outside.is_empty():
            bad = m.intersect_range(outside).domain().params()
            ctx = ctx.subtract(bad)
            witness = witness or (s, ld, arr)
    if ctx.is_empty():
        s, ld, arr = witness
        raise NotAffine(
            Origin(s.origin),
            f"an access {ld} outside {arr.name}'s extent "
            f"({', '.join(map(str, arr.shape))}) for every value of the parameters",
        )
    return ctx


class Origin:
    """A stand-in node for a statement's origin text (``file:line:col: text``)."""

    def __init__(self, origin: str):
        parts = origin.split(":", 3)
        self.coord = None
        if len(parts) >= 3 and parts[1].isdigit():
            self.coord = _Coord(parts[0], int(parts[1]), int(parts[2]))
        self.text = parts[3].strip() if len(parts) == 4 else origin

    def children(self):
        return ()


@dataclass
class _Coord:
    file: str
    line: int
    column: int


def _privatization(kernel: Kernel, walked: Walked, dead: set[str]):
    """Scalars to expand along their enclosing loops: ``{array: (iterators, lows,
    extents)}``. A scalar is privatised over the outer loops that no flow of its
    value crosses, when it is dead after the region and reads no value from before."""
    plan: dict[str, tuple[list[str], list[Aff], list[Aff]]] = {}
    live_in = _live_in(kernel)
    for a, info in walked.arrays.items():
        if not info.scalar or a not in dead:
            continue
        stmts = [
            s
            for s in kernel.statements
            if s.target.array == a or any(ld.array == a for ld in s.reads)
        ]
        if not any(s.target.array == a for s in stmts):
            continue
        if not live_in.intersect(isl.UnionSet(f"{{ {a}[] }}")).is_empty():
            continue
        prefix = _common_prefix([walked.stmt_loops[s.name] for s in stmts])
        k = len(prefix)
        flow = _flow(kernel, a)
        while k > 0 and not _within(flow, k):
            k -= 1
        if k == 0:
            continue
        iters = list(stmts[0].iterators[:k])
        space = None
        for s in stmts:
            d = s.domain.project_out(isl.dim_type.set, k, s.depth - k)
            d = d.reset_tuple_id()
            space = d if space is None else space.union(d)
        space = space.intersect_params(kernel.context).coalesce()
        lows, extents = [], []
        for d in range(k):
            lo, hi = space.dim_min(d).coalesce(), space.dim_max(d).coalesce()
            if len(lo.get_pieces()) != 1 or len(hi.get_pieces()) != 1:
                break
            lo_aff = isl_aff_to_aff(lo.get_pieces()[0][1], kernel.params, [])
            hi_aff = isl_aff_to_aff(hi.get_pieces()[0][1], kernel.params, [])
            lows.append(lo_aff)
            extents.append(hi_aff - lo_aff + 1)
        k = len(lows)
        if k:
            plan[a] = (iters[:k], lows, extents)
    return plan


def _accesses_of(kernel: Kernel, array: str | None = None):
    """Union maps of reads and writes (of ``array`` only, when given)."""
    reads = writes = isl.UnionMap.empty(kernel.context.get_space())
    for s in kernel.statements:
        for ld, is_write in [(s.target, True)] + [(ld, False) for ld in s.reads]:
            if array is not None and ld.array != array:
                continue
            m = isl.UnionMap.from_map(access_map(s, ld, kernel.params))
            if is_write:
                writes = writes.union(m)
            else:
                reads = reads.union(m)
    return reads, writes


def _dataflow(kernel: Kernel, array: str | None = None):
    reads, writes = _accesses_of(kernel, array)
    info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
    return info.set_schedule(kernel.schedule).compute_flow()


def _live_in(kernel: Kernel) -> isl.UnionSet:
    """Elements some statement reads before the region writes them (the kernel's
    program-order dataflow; cheaper than the full dependence analysis)."""
    return kernel.analysis(
        "c.live_in", lambda k: _dataflow(k.original).get_may_no_source().range()
    )


def _flow(kernel: Kernel, array: str) -> isl.UnionMap:
    """Flow dependences through ``array`` (value-based)."""
    return _dataflow(kernel, array).get_may_dependence()


def _common_prefix(seqs) -> tuple:
    out = []
    for items in zip(*seqs):
        if all(x == items[0] for x in items):
            out.append(items[0])
        else:
            break
    return tuple(out)


def _within(flow: isl.UnionMap, k: int) -> bool:
    """Every dependence stays within one iteration of the first ``k`` loops."""
    maps: list[isl.Map] = []
    flow.foreach_map(maps.append)
    for m in maps:
        same = m
        for d in range(k):
            same = same.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
        if not m.is_subset(same):
            return False
    return True


def _rewrite(kernel: Kernel, plan):
    arrays = dict(kernel.arrays)
    for a, (_iters, _lows, extents) in plan.items():
        old = arrays[a]
        arrays[a] = Array(a, tuple(extents), old.dtype, Role.TEMP)
    if not plan:
        return arrays, list(kernel.statements)

    def fix(ld: Load) -> Load:
        if ld.array not in plan:
            return ld
        iters, lows, _ = plan[ld.array]
        return Load(
            ld.array, tuple(var(i) - lo for i, lo in zip(iters, lows)), ld.dtype
        )

    statements = []
    for s in kernel.statements:
        body = s.body.map(lambda n: fix(n) if isinstance(n, Load) else None)
        statements.append(
            Statement(s.name, s.iterators, s.domain, fix(s.target), body, s.origin)
        )
    return arrays, statements


def _roles(kernel: Kernel, arrays: dict[str, Array], dead: set[str], plan):
    written: dict[str, isl.Set] = {}
    for s in kernel.statements:
        r = access_map(s, s.target, kernel.params).range()
        a = s.target.array
        written[a] = written[a].union(r) if a in written else r
    live_in = _live_in(kernel)
    out = []
    for a, arr in arrays.items():
        if a in plan or arr.role == Role.TEMP:
            role = Role.TEMP
        elif a not in written:
            role = Role.INPUT
        elif a in dead:
            role = Role.TEMP if _no_live_in(live_in, a) else Role.INOUT
        else:
            extent = array_extent(arr, kernel.params).intersect_params(kernel.context)
            full = extent.subtract(written[a]).is_empty()
            role = Role.OUTPUT if full and _no_live_in(live_in, a) else Role.INOUT
        out.append(Array(a, arr.shape, arr.dtype, role))
    return out


def _no_live_in(live_in: isl.UnionSet, array: str) -> bool:
    sets: list[isl.Set] = []
    live_in.foreach_set(sets.append)
    return not any(s.get_tuple_name() == array and not s.is_empty() for s in sets)
