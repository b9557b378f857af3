"""Engine mapping: contractions onto the MAC array, element-wise and reduction work
onto the vector unit.

A statement ``C[f] = C[f] + A[g] * B[h]`` (casts allowed where they are the MAC
array's: int8 operands into an int32 accumulator, float16 into float32) is a
*contraction*. Its iterators take roles from where they appear: **M** (in C and A),
**N** (in C and B), **K** (in A and B), batch (in all three) and the rest. One MAC
call ``C[m, n] += A[m, k] @ B[k, n]`` covers one group of iterators per MAC
dimension over strided 2-D views of the buffers; the other iterators (batch, the
second spatial dimension and the filter taps K does not fuse) run as C loops
around the call, so the implicit GEMM of conv2d (strided, dilated, grouped) needs no
im2col copy. K may fuse a convolution's whole filter window, ``k=("rh", "rw",
"rc")`` over channels-last buffers: A then reads the window from the input buffer
with two strides, the input row's pitch for ``rh`` (an im2col read in place,
:func:`polyc.ir.macmap.check`). :func:`tensorize` marks a point band for this::

    @tensorize(matmul) S1: m=i n=j k=k
    extension { [i_t, j_t, k_t] -> pc_mac_S1[i_t, j_t, k_t] }
      band S1(i, j, k)           <- one MAC call per tile, not these loops

The MAC array runs the rectangular hull of each tile: for a padded convolution the
extra instances read the zero halo of the input buffer (placement fills it), and
:func:`tensorize` refuses a statement whose extra instances would add anything
else (a triangular or strided-divisibility domain). The engine sums each output
element in its own order (reassociation, as every BLAS does): integers stay exact,
floats round differently within a few ulps.

:func:`map_vector` marks a band whose statements run as one vector-unit operation
per tile (``@vector``); it refuses a statement whose instances depend on each
other other than by a reduction into its target (a scan, an in-place stencil).
Unmarked statements run on the scalar core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import islpy as isl

from polyc.errors import ArgumentError, IllegalTransformError
from polyc.ir import marks as pm
from polyc.ir import requant, tree
from polyc.ir.expr import Binary, Cast, Expr, Load
from polyc.ir.kernel import Kernel, Statement, access_map, array_extent
from schedules import stree
from schedules.accel import footprint as F
from schedules.accel import isltree
from schedules.common import step

ROLES = ("m", "n", "k")


@dataclass(frozen=True)
class Contraction:
    """A statement that the MAC array can run."""

    stmt: Statement
    a: int  # position of the A operand in stmt.reads
    b: int
    mode: int
    operand: str  # operand dtype name
    roles: dict  # iterator -> "m" | "n" | "k" | "batch" | "other"

    def members(self, role: str) -> tuple[str, ...]:
        return tuple(i for i in self.stmt.iterators if self.roles[i] == role)


#: where :func:`contraction` keeps its answer on the statement (a frozen Statement
#: never changes, and the cost model asks for the same one thousands of times)
_MEMO = "_contraction"


def contraction(stmt: Statement) -> Contraction | None:
    """The contraction form of ``stmt``, or None when it is not one."""
    memo = stmt.__dict__
    if _MEMO not in memo:
        memo[_MEMO] = _contraction(stmt)
    return memo[_MEMO]


def depthwise(stmt: Statement) -> bool:
    """Whether ``stmt`` is a depthwise convolution: a contraction with no N
    iterator, each output channel computed from its own input channel."""
    con = contraction(stmt)
    return con is not None and not con.members("n")


def _contraction(stmt: Statement) -> Contraction | None:
    if stmt.reduction != "add":
        return None
    body = stmt.body
    rest = body.b if _is_target(body.a, stmt) else body.a
    if not (isinstance(rest, Binary) and rest.op == "mul"):
        return None
    loads = [_uncast(rest.a, stmt), _uncast(rest.b, stmt)]
    if any(ld is None for ld in loads) or loads[0].dtype != loads[1].dtype:
        return None
    acc = stmt.target.dtype.name
    if rest.dtype.name != acc:
        return None
    mode = pm.MAC_MODES.get((loads[0].dtype.name, acc))
    if mode is None:
        return None
    positions = []
    for ld in loads:
        pos = next(
            (
                n
                for n, r in enumerate(stmt.reads)
                if r.array == ld.array and r.index == ld.index
            ),
            None,
        )
        positions.append(pos)
    c, a, b = stmt.target, loads[0], loads[1]
    roles = {}
    for it in stmt.iterators:
        where = tuple(_uses(ld, it) for ld in (c, a, b))
        if "floor" in where:
            roles[it] = "other"
            continue
        inc, ina, inb = (w == "linear" for w in where)
        if inc and ina and not inb:
            roles[it] = "m"
        elif inc and inb and not ina:
            roles[it] = "n"
        elif ina and inb and not inc:
            roles[it] = "k"
        elif inc and ina and inb:
            roles[it] = "batch"
        else:
            roles[it] = "other"
    return Contraction(stmt, positions[0], positions[1], mode, a.dtype.name, roles)


def _is_target(e: Expr, stmt: Statement) -> bool:
    return (
        isinstance(e, Load)
        and e.array == stmt.target.array
        and e.index == stmt.target.index
    )


def _uncast(e: Expr, stmt: Statement) -> Load | None:
    """The load under at most one cast to the accumulator dtype."""
    if isinstance(e, Cast):
        if e.dtype != stmt.target.dtype:
            return None
        e = e.x
    return e if isinstance(e, Load) else None


def _uses(ld: Load, it: str) -> str:
    """``"floor"`` when ``it`` appears inside a floor or modulo of an index,
    ``"linear"`` when it appears with a coefficient, else ``""``."""
    for a in ld.index:
        for atom, _ in a.terms:
            if not isinstance(atom, str) and it in atom.num.names():
                return "floor"
    return "linear" if any(a.coefficient(it) for a in ld.index) else ""


def tensorize(
    kernel: Kernel,
    band: str,
    *,
    m: Sequence[str] | None = None,
    n: Sequence[str] | None = None,
    k: Sequence[str] | None = None,
    init: str | None = None,
    exchange: bool = False,
) -> Kernel:
    """Run the contraction in point band ``band`` on the MAC array, one call per tile
    (see the module docstring).

    ``exchange=True`` runs each call as the transposed product ``C^T = B^T A^T``:
    B enters the array's A port and A its B port, so a weight-stationary array
    holds A (a convolution's im2col input) in its PEs and streams B (the
    weights): a layer with few output channels then fills the array's columns
    with pixels instead of leaving them idle. ``m``, ``n``, ``k`` keep naming
    the roles of A and B; every C element sums its products in the same order,
    so the results are the unexchanged call's bit for bit.

    ``init`` names the statement that zeroes the output tile before the
    contraction (``out = 0``): it is folded into the calls (the first contribution
    to each output element overwrites instead of accumulating), so it costs
    nothing and the calls need not wait for it.

    ``m``, ``n``, ``k`` list the iterators fused into each MAC dimension,
    outermost first (default: the innermost iterator of each role); their strides
    in the buffers must allow the fusion (:func:`polyc.ir.macmap.check`, applied to
    the placed buffers when the kernel is compiled).
    The other iterators become loops around the call.

    Raises:
        ScheduleError: unknown band.
        ArgumentError: the band holds more than one statement, or a statement that
            is not a contraction the MAC array runs, or iterators in the wrong role.
        IllegalTransformError: when the rectangular hull of a tile adds instances
            that would change the result (not a zero-padded halo), or ``init`` is
            not a zero init of the same output tiles.
    """
    op = "tensorize"
    mark = tree.find_band_mark(kernel.schedule, band, op)
    stmts = sorted(s for s in isltree.statements_of(mark) if not s.startswith("pc_"))
    if len(stmts) != 1:
        raise ArgumentError(
            f"{op}: band {band!r} runs {', '.join(stmts)} because it was fused or "
            "holds an init. Tensorize the point band of the contraction alone "
            "(distribute or tile it first)."
        )
    stmt = kernel.statement(stmts[0])
    con = contraction(stmt)
    if con is None:
        raise ArgumentError(
            f"{op}: {stmt} is not a contraction the MAC array runs because its body "
            "is not target + x * y over two loads of one dtype (with casts to an "
            "int32 or float32 accumulator only). Map it to the vector unit "
            "(schedules.map_vector) instead."
        )
    groups = {}
    for role, given in zip(ROLES, (m, n, k)):
        groups[role] = _group(op, con, role, given)
    prefix = F.prefix_map(kernel, mark)
    box = F.tile_box(prefix, stmt.name)
    _check_hull(op, kernel, con, prefix, box)
    used = {i for g in groups.values() for i in g}
    loops = tuple(i for i in stmt.iterators if i not in used)
    if init is not None:
        _check_init(op, kernel, stmt, init, mark, prefix)
    tmark = pm.TensorizeMark(
        stmt=stmt.name,
        mode=con.mode,
        a=con.a,
        b=con.b,
        m=groups["m"],
        n=groups["n"],
        k=groups["k"],
        loops=loops,
        lo=str(box.multi("lo")),
        hi=str(box.multi("hi")),
        init=init or "",
        exchange=exchange,
    )
    tiles = F.pw_multi(box.lo).domain()
    ident = isl.Map.identity(isl.Space.map_from_set(tiles.get_space()))
    ext = ident.intersect_domain(tiles).set_tuple_name(
        isl.dim_type.out, pm.MAC + stmt.name
    )
    graft = isl.ScheduleNode.from_extension(isl.UnionMap.from_map(ext))
    node = mark.graft_before(graft)
    while node.get_type() != isl.schedule_node_type.extension:
        node = node.parent()
    node = node.insert_mark(isl.Id(tmark.text()))
    return kernel.with_schedule(
        node.get_schedule(),
        step(
            op,
            band,
            m=tuple(m) if m is not None else None,
            n=tuple(n) if n is not None else None,
            k=tuple(k) if k is not None else None,
            init=init,
            exchange=exchange or None,
        ),
    )


def _check_init(
    op, kernel: Kernel, stmt: Statement, init: str, mark, at_mark: isl.UnionMap
) -> None:
    """``init`` writes zeros to exactly the output elements of each tile that the
    contraction then accumulates, just before it, in the same tile (``at_mark``:
    the prefix map at the contraction's ``mark``)."""
    from polyc.ir.expr import Const

    s0 = kernel.statement(init)
    if not (isinstance(s0.body, Const) and s0.body.value == 0):
        raise ArgumentError(
            f"{op}: {init} cannot be folded into the MAC calls of {stmt.name} because "
            f"it writes {s0.body}, not zero. Keep it as its own statement."
        )
    if s0.target.array != stmt.target.array:
        raise ArgumentError(
            f"{op}: {init} cannot be folded into {stmt.name} because it writes "
            f"{s0.target.array}, not {stmt.target.array}. Name the output's init."
        )
    other = tree.find_band_mark(kernel.schedule, _band_of(kernel, init), op)
    a, b = tree.path_of(mark), tree.path_of(other)
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    node = tree.at(kernel.schedule, a[:common])
    prefix = F.prefix_map(kernel, node)
    mine = prefix.intersect_domain(isl.UnionSet.from_set(stmt.domain))
    fp1 = F.footprint(kernel, mine, stmt.target.array, "write", None)
    only0 = prefix.intersect_domain(isl.UnionSet.from_set(s0.domain))
    fp0 = F.footprint(kernel, only0, s0.target.array, "write", None)
    if fp0 is None or fp1 is None or not fp0.is_equal(fp1):
        raise IllegalTransformError(
            f"{op}: {init} cannot be folded into the MAC calls of {stmt.name} because "
            "the output elements it zeroes per tile are not those the contraction "
            "accumulates in that tile. Fuse the init with the contraction's tile "
            "loops first."
        )
    # the calls overwrite until the first tile after the init is done: within one
    # iteration of the common band, every call must write the same output tile
    # (a tile loop over an output dimension inside it would leave the second
    # tile accumulating onto what the init never wrote)
    calls = at_mark.intersect_domain(isl.UnionSet.from_set(stmt.domain))
    per_call = F.footprint(kernel, calls, stmt.target.array, "write", None)
    whole = calls.reverse().apply_range(mine).apply_range(fp1)
    if per_call is None or not isl.UnionMap.from_map(per_call).is_equal(whole):
        raise IllegalTransformError(
            f"{op}: {init} cannot be folded into the MAC calls of {stmt.name} because "
            "the contraction tiles an output dimension inside the loops it shares "
            "with the init, so only its first output tile would start from the "
            "init's zeros. Fuse the init with those tile loops, or keep it as its "
            "own statement."
        )
    flow = kernel.deps.by_array("flow").get(s0.target.array)
    same = prefix.apply_range(prefix.reverse())
    if flow is not None:
        out = flow.intersect_domain(isl.UnionSet.from_set(s0.domain)).subtract(same)
        if not out.is_empty():
            raise IllegalTransformError(
                f"{op}: {init} cannot be folded into {stmt.name} because its zeros "
                "are read outside the tile. Keep it as its own statement."
            )


def _band_of(kernel: Kernel, stmt: str) -> str:
    """The innermost named band that runs ``stmt`` alone."""
    best = None
    names = {s.name for s in kernel.statements}
    for top in _running(kernel.schedule, stmt):
        for _, node in tree.walk_paths(top):
            name = tree.mark_name(node)
            parsed = tree.parse_band_mark(name) if name else None
            if parsed and isltree.statements_of(node) & names == {stmt}:
                best = parsed[0]
    if best is None:
        raise ArgumentError(
            f"tensorize: {stmt} has no band of its own because it is fused with "
            "other statements. Tile it so that its point band runs it alone."
        )
    return best


def _running(schedule: isl.Schedule, stmt: str) -> list[isl.ScheduleNode]:
    """The subtrees to look for ``stmt``'s bands in, in pre-order: the children
    of the root sequence whose filters hold it (no node above them is a mark,
    and no other child runs it), else the whole tree."""
    first = schedule.get_root().child(0)
    if first.get_type() != isl.schedule_node_type.sequence:
        return [schedule.get_root()]
    children = (first.child(i) for i in range(first.n_children()))
    # a child's own filter: the domain that reaches a filter node is its
    # parent's, every statement (each of a network's 190 children was walked
    # for each contraction's init, 0.3 CPU s of hf-mobilenetv2's build)
    return [child for child in children if stmt in _filtered(child)]


def _filtered(node: isl.ScheduleNode) -> set[str]:
    """The statements a filter node lets through."""
    names: set[str] = set()
    node.filter_get_filter().foreach_set(lambda s: names.add(s.get_tuple_name()))
    return names


def _group(op, con: Contraction, role: str, given) -> tuple[str, ...]:
    members = con.members(role)
    if given is None:
        return members[-1:]
    given = tuple(given)
    wrong = [i for i in given if con.roles.get(i) != role]
    if wrong:
        have = ", ".join(f"{i}: {r}" for i, r in con.roles.items())
        raise ArgumentError(
            f"{op}: {', '.join(wrong)} cannot be MAC dimension {role} of "
            f"{con.stmt.name} because the roles of its iterators are {have} (m: in "
            "the output and A, n: in the output and B, k: in A and B). Pick "
            f"{role} from {', '.join(members) or '(none)'}."
        )
    return given


def _check_hull(op, kernel: Kernel, con: Contraction, prefix, box: F.Box) -> None:
    """Instances of a tile's hull that are not in the domain must read a zero of the
    halo (an operand index outside its array), and every hull instance must write
    inside the output array."""
    stmt = con.stmt
    like = F.tile_instances(prefix, stmt.name)
    hull = F.hull_instances(box, like).range()
    domain = stmt.domain.intersect_params(kernel.context)
    extra = hull.subtract(domain)
    loads = [stmt.target, stmt.reads[con.a], stmt.reads[con.b]]
    inside = []
    for ld in loads:
        arr = kernel.arrays[ld.array]
        acc = _plain_access(kernel, stmt, ld)
        inside.append(acc.intersect_range(array_extent(arr, kernel.params)).domain())
    out_of_c = hull.subtract(inside[0])
    if not out_of_c.is_empty():
        raise IllegalTransformError(
            f"{op}: the tiles of {stmt.name} are not rectangular and their hull "
            f"writes {stmt.target.array} outside the array because "
            f"{_point(stmt, out_of_c)} is in a tile's hull. Tensorize a band whose "
            "tiles are boxes, or map the statement to the vector unit."
        )
    bad = extra.intersect(inside[1]).intersect(inside[2])
    if not bad.is_empty():
        raise IllegalTransformError(
            f"{op}: the MAC array would run {_point(stmt, bad)}, which is in the "
            f"rectangular hull of a tile of {stmt.name} but not in its domain, and "
            "its operands are inside their arrays, so it would add a non-zero "
            "product. Map the statement to the vector unit (schedules.map_vector)."
        )


def _plain_access(kernel: Kernel, stmt: Statement, ld: Load) -> isl.Map:
    idx = ", ".join(a.to_isl() for a in ld.index)
    head = f"[{', '.join(kernel.params)}] -> " if kernel.params else ""
    its = ", ".join(stmt.iterators)
    return isl.Map(f"{head}{{ {stmt.name}[{its}] -> {ld.array}[{idx}] }}")


def _point(stmt: Statement, s: isl.Set) -> str:
    """The lexicographically smallest instance of ``s`` (a stable witness)."""
    p = s.lexmin().sample_point()
    vals = [
        int(p.get_coordinate_val(isl.dim_type.set, d).to_python())
        for d in range(stmt.depth)
    ]
    return stmt.instance(vals)


# vector unit ----------------------------------------------------------------------


def may_self_depend(kernel: Kernel, stmt: Statement) -> bool:
    """Whether two instances of ``stmt`` access one element, one of them writing
    it: a superset of the statement's dependences on itself (no write of another
    statement kills any), decided on its own accesses, so that an element-wise
    statement does not wait for the whole program's dataflow analysis."""
    write = access_map(stmt, stmt.target, kernel.params)
    pairs = write.apply_range(write.reverse())
    for ld in stmt.reads:
        if ld.array == stmt.target.array:
            read = access_map(stmt, ld, kernel.params)
            pairs = pairs.union(write.apply_range(read.reverse()))
    return not pairs.subtract(isl.Map.identity(pairs.get_space())).is_empty()


def vector_ok(kernel: Kernel, stmt: Statement, prefix: isl.UnionMap) -> str | None:
    """None when ``stmt``'s instances in one tile can run as one vector operation,
    else the reason (a dependence between them that is not a reduction)."""
    if stmt.reduction is not None or not may_self_depend(kernel, stmt):
        return None  # the second: decided without the program's dataflow
    mine = isl.UnionSet.from_set(stmt.domain)
    deps = kernel.deps.validity.intersect_domain(mine).intersect_range(mine)
    if deps.is_empty():
        return None
    same = prefix.apply_range(prefix.reverse())
    inside = deps.intersect(same)
    if inside.is_empty():
        return None
    maps: list[isl.Map] = []
    inside.foreach_map(maps.append)
    pair = maps[0].wrap().lexmin().sample_point()
    n = stmt.depth
    vals = [
        int(pair.get_coordinate_val(isl.dim_type.set, d).to_python())
        for d in range(2 * n)
    ]
    return (
        f"{stmt.instance(vals[:n])} -> {stmt.instance(vals[n:])} depend on each "
        "other inside one tile"
    )


def vertical_order(kernel: Kernel, band: str, keep: int = 0) -> tuple[str, ...] | None:
    """The member order of point band ``band`` that runs a vector reduction's
    reduction loops outside its output loops, or None when the band is not one
    statement's reduction or is in that order already. The first ``keep``
    members stay where they are (a fused layer's private tile loops of the
    statement, which lead its point band: the placement reads their positions).

    In that order consecutive instances accumulate into different elements, so the
    vector unit adds them lane by lane; with a reduction loop innermost, every
    output's run of contributions needs a horizontal reduction step (the simulator
    charges one per run of two or more contributions to one element), which costs
    more than the whole run's arithmetic when the run is short (a depthwise
    convolution's nine taps). Each element still sums its contributions in the
    same order, so results are unchanged bit for bit."""
    _, nb = stree.find(stree.from_isl(kernel.schedule), band, "map_vector")
    mark = tree.find_band_mark(kernel.schedule, band, "map_vector")
    names = [s for s in isltree.statements_of(mark) if not s.startswith("pc_")]
    if len(names) != 1:
        return None
    stmt = kernel.statement(names[0])
    head, rest = list(nb.members[:keep]), nb.members[keep:]
    if stmt.reduction is None or not set(rest) <= set(stmt.iterators):
        return None
    out = {n for a in stmt.target.index for n in a.names()}
    order = tuple(
        head + [m for m in rest if m not in out] + [m for m in rest if m in out]
    )
    return order if order != tuple(nb.members) else None


def map_vector(kernel: Kernel, band: str, unit: str = "vector") -> Kernel:
    """Run the statements of band ``band`` on the vector unit: all their instances in
    one execution of the band are one vector operation (element-wise work, and
    reductions into the statement's own target). ::

        map_vector(k, "S2")

        # band S2                       # @vector S2
        for i, j:                ->     for i, j:       <- one vector op per tile
          e[i,j] = exp(x[i,j] - m[i])     e[i,j] = exp(x[i,j] - m[i])

    ``unit="mac"`` runs them instead in the MAC array's output path: an int8
    requantization of a contraction's accumulators (``[mac_array] requantize``).

    Raises:
        ScheduleError: unknown band.
        ArgumentError: a statement whose instances depend on each other inside one
            execution of the band other than by a reduction (run it on the scalar
            core: leave it unmarked); ``unit="mac"`` for a statement that is not a
            requantization (:func:`polyc.ir.requant.match`).
    """
    op = "map_vector"
    choice = ("vector", "mac")
    if unit not in choice:
        raise ArgumentError(
            f"{op}: unit={unit!r} is not an engine because the units are "
            f"{', '.join(choice)}. Pass one of those."
        )
    mark = tree.find_band_mark(kernel.schedule, band, op)
    names = sorted(s for s in isltree.statements_of(mark) if not s.startswith("pc_"))
    prefix = F.prefix_map(kernel, mark)
    for name in names:
        why = vector_ok(kernel, kernel.statement(name), prefix)
        if why is not None:
            raise ArgumentError(
                f"{op}: {name} cannot run as one vector operation per tile of band "
                f"{band!r} because {why}. Leave it on the scalar core, or tile so "
                "that dependent instances fall in different tiles."
            )
        if unit == "mac" and requant.match(kernel.statement(name).body) is None:
            raise ArgumentError(
                f"{op}: {name} cannot run in the MAC array's output path because "
                "it is not an int8 requantization (polyc.ops.quant.requantize). "
                "Map it to the vector unit (unit='vector')."
            )
    node = mark.insert_mark(isl.Id(pm.VectorMark(tuple(names), unit).text()))
    extra = {} if unit == "vector" else {"unit": unit}
    return kernel.with_schedule(node.get_schedule(), step(op, band, **extra))
