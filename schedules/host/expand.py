"""Rows of a product through a reused temporary: expand the temporary along its
row loop, so that the product is a matrix product the register tiles take.

doitgen computes each row ``(r, q)`` of ``A`` times ``C4`` into a one-row
temporary ``sum`` and copies it back::

    for r: for q:                           for r:
      for p: sum[p] = 0                       for q: for p: sum_x[q][p] = 0
        for s: sum[p] += A[r][q][s]*C4[s][p]  for q: for p: for s:
      for p: A[r][q][p] = sum[p]       ->       sum_x[q][p] += A[r][q][s]*C4[s][p]
                                              for q: for p: A[r][q][p] = sum_x[q][p]
                                            for p: sum[p] = sum_x[NQ - 1][p]

With ``sum`` reused by every ``q``, each row's product must end before the next
begins: the product is a vector times a matrix, ``q`` after ``q``. Expanded
along ``q`` (:func:`expand_rows`), the rows are independent and ``sum_x[q][p] +=
A[r][q][s] * C4[s][p]`` is an ``(NQ x NP) x (NP x NP)`` product for each ``r``,
which :mod:`schedules.host.register` tiles (``q`` the rows, ``p`` the columns,
``s`` the reduction) and :mod:`schedules.host.pack` packs. The last statement
restores the temporary's final value where the caller can see it (the values
its last writes left, now in the row of the last ``q``).

It is legal when, exactly (isl's dataflow): no access to the temporary uses the
row loop, every read of it finds its value in the region, and every value flows
within one iteration of the row loop. Then the last write of ``sum[p]`` before a
read, an instance of the same ``q``, is also the last write of ``sum_x[q][p]``
before it; and each element's final value is in ``sum_x`` at the ``q`` of its
last write. Every operation and its operands are the same: the bits are the
same.
"""

from __future__ import annotations

import islpy as isl

from polyc.ir import tree
from polyc.ir.affine import Aff, var
from polyc.ir.expr import Load
from polyc.ir.kernel import Array, Kernel, Role, Statement, access_map
from schedules import stree
from schedules.bands import split_band
from schedules.host.register import accumulates

#: the suffix of an expanded temporary's name (``sum`` -> ``sum_x``)
SUFFIX = "_x"


def expand_rows(kernel: Kernel) -> Kernel | None:
    """``kernel`` (its program) with the first temporary that a product
    accumulates into along a row loop that the temporary does not follow
    expanded along that loop (the module docstring), as a new program in
    program order; None when no array is such a temporary or the expansion is
    not exact. The new program's analyses and history start empty, as for any
    new program (:meth:`polyc.ir.kernel.Kernel.replace`)."""
    for stmt in kernel.statements:
        if not _accumulates(stmt):
            continue
        array = stmt.target.array
        pos = _row_loop(kernel, array)
        if pos is not None:
            out = _expand(kernel, array, pos)
            if out is not None:
                return out
    return None


def _accumulates(stmt: Statement) -> bool:
    """Whether ``stmt`` adds to its target (:func:`schedules.host.register.accumulates`)
    along at least two loops the target does not use: a row loop to expand along
    and the product's reduction loop."""
    if not accumulates(stmt):
        return False
    used = set().union(*(aff.names() for aff in stmt.target.index))
    return len(set(stmt.iterators) - used) >= 2


def _users(kernel: Kernel, array: str) -> list[Statement]:
    return [
        s
        for s in kernel.statements
        if s.target.array == array or any(ld.array == array for ld in s.reads)
    ]


def _row_loop(kernel: Kernel, array: str) -> int | None:
    """The innermost loop position shared by every statement that accesses
    ``array`` (the same iterator at the same depth) that no access to it uses
    and along which no value of it flows, or None."""
    users = _users(kernel, array)
    if any(g.array == array for s in users for g in s.gathers):
        return None
    prefix = 0
    while all(
        len(s.iterators) > prefix and s.iterators[prefix] == users[0].iterators[prefix]
        for s in users
    ):
        prefix += 1
    used: set[str] = set()
    for s in users:
        for ld in (s.target, *s.reads):
            if ld.array == array:
                used |= set().union(*(aff.names() for aff in ld.index))
    deps = kernel.deps
    elements = isl.UnionSet(f"{{ {array}[{_dims(kernel, array)}] }}")
    if not deps.live_in_accesses.range().intersect(elements).is_empty():
        return None  # a read of a value from before the region
    flow = deps.by_array("flow").get(array)
    for pos in reversed(range(prefix)):
        if users[0].iterators[pos] in used:
            continue
        if flow is None or _within(flow, pos):
            return pos
    return None


def _dims(kernel: Kernel, array: str) -> str:
    return ", ".join(f"x{d}" for d in range(kernel.arrays[array].ndim))


def _within(flow: isl.UnionMap, pos: int) -> bool:
    """Whether every dependence of ``flow`` keeps loop ``pos`` of its source and
    sink equal."""
    maps: list[isl.Map] = []
    flow.foreach_map(maps.append)
    return all(
        m.is_subset(m.equate(isl.dim_type.in_, pos, isl.dim_type.out, pos))
        for m in maps
    )


def _expand(kernel: Kernel, array: str, pos: int) -> Kernel | None:
    users = _users(kernel, array)
    row = users[0].iterators[pos]
    bounds = _range(kernel, users, pos)
    if bounds is None:
        return None
    low, high = bounds
    name = array + SUFFIX
    while name in kernel.arrays:
        name += SUFFIX
    old = kernel.arrays[array]
    arrays = dict(kernel.arrays)
    arrays[name] = Array(name, (high - low + 1, *old.shape), old.dtype, Role.TEMP)

    def fix(node):
        if isinstance(node, Load) and node.array == array:
            return Load(name, (var(row) - low, *node.index), node.dtype)
        return None

    names = {s.name for s in users}
    statements = []
    for s in kernel.statements:
        if s.name in names:
            s = Statement(
                s.name,
                s.iterators,
                s.domain,
                s.target if s.target.array != array else fix(s.target),
                s.body.map(fix),
                s.origin,
            )
        statements.append(s)
    schedule = kernel.program_schedule
    if old.role != Role.TEMP:
        restore = _restore(kernel, statements, array, name)
        if restore is not None:
            statements.append(restore)
            tail = tree.initial_schedule(
                [(restore.name, restore.domain, restore.iterators)]
            )
            schedule = schedule.sequence(tail)
    out = Kernel.create(
        kernel.name,
        arrays.values(),
        statements,
        kernel.params,
        kernel.context,
        schedule,
        kernel.data,
    )
    # the row loop heads a band of its own (the loops above it another), so
    # that the product's band can take it without the loops the rows share
    for _path, node in stree.walk(stree.from_isl(schedule)):
        nb = stree.named_at(node)
        if nb is not None and row in nb.members[1:]:
            split = split_band(out, nb.name, row).schedule
            return out.replace(schedule=split, program_schedule=split)
    return out


def _range(kernel: Kernel, users: list[Statement], pos: int) -> tuple[Aff, Aff] | None:
    """The least and the greatest value of loop ``pos`` over the statements'
    domains, each an affine expression of the parameters (one piece), or None."""
    values = None
    for s in users:
        dom = s.domain.project_out(isl.dim_type.set, pos + 1, s.depth - pos - 1)
        dom = dom.project_out(isl.dim_type.set, 0, pos).reset_tuple_id()
        values = dom if values is None else values.union(dom)
    values = values.intersect_params(kernel.context).coalesce()
    out = []
    for pw in (values.dim_min(0), values.dim_max(0)):
        pieces = pw.coalesce().get_pieces()
        if len(pieces) != 1:
            return None
        aff = _param_aff(pieces[0][1])
        if aff is None:
            return None
        out.append(aff)
    return out[0], out[1]


def _param_aff(aff: isl.Aff) -> Aff | None:
    """An ``isl.Aff`` of the parameters with integer coefficients and no
    division as an :class:`Aff`, or None."""
    if aff.dim(isl.dim_type.div):
        return None
    out = Aff()
    terms = [(aff.get_constant_val(), None)] + [
        (
            aff.get_coefficient_val(isl.dim_type.param, p),
            aff.get_dim_name(isl.dim_type.param, p),
        )
        for p in range(aff.dim(isl.dim_type.param))
    ]
    if not aff.get_denominator_val().is_one():
        return None
    for val, name in terms:
        if not val.is_int():
            return None
        value = int(val.to_python())
        out = out + (Aff(const=value) if name is None else value * var(name))
    return out


def _restore(
    kernel: Kernel, statements: list[Statement], array: str, name: str
) -> Statement | None:
    """``array[x] = name[a][x]`` for each element ``x`` of ``array`` whose final
    value the region writes, ``a`` the row of its last write (the instances
    whose writes are live out in the original program), or None when the
    region leaves no value in ``array``."""
    last = kernel.deps.live_out_instances
    where = None
    for old, new in zip(kernel.statements, statements):
        if old.target.array != array:
            continue
        mine = last.intersect(isl.UnionSet.from_set(old.domain))
        if mine.is_empty():
            continue
        writes = isl.UnionMap.from_map(access_map(new, new.target, kernel.params))
        piece = writes.intersect_domain(mine).range()
        where = piece if where is None else where.union(piece)
    if where is None:
        return None
    sets: list[isl.Set] = []
    where.coalesce().foreach_set(sets.append)
    (elements,) = sets
    rank = elements.dim(isl.dim_type.set)
    taken = {it for s in kernel.statements for it in s.iterators} | set(kernel.params)
    iters = []
    for d in range(rank):
        it = f"e{d}"
        while it in taken:
            it += "_"
        iters.append(it)
    stmt_name = "S_" + name
    while any(s.name == stmt_name for s in kernel.statements):
        stmt_name += "_"
    domain = elements.set_tuple_name(stmt_name)
    for d, it in enumerate(iters):
        domain = domain.set_dim_name(isl.dim_type.set, d, it)
    dtype = kernel.arrays[array].dtype
    return Statement(
        stmt_name,
        tuple(iters),
        domain,
        Load(array, tuple(var(it) for it in iters[1:]), dtype),
        Load(name, tuple(var(it) for it in iters), dtype),
        f"the final value of {array} (expanded along its rows into {name})",
    )
