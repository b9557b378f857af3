"""Time tiles for stencils: the time loop skewed against the space loops and tiled.

A time-iterated stencil (Jacobi, heat, FDTD) sweeps whole arrays once per time
step; when one step touches more than the cache holds, each step streams every
array from memory again. Tiling time with space (Pluto's tiles, "Wonnacott and
Strout" in PPCG's words) runs several time steps over a block of space while it
is in cache. Space has to be skewed by time first, since an element at step
``t + 1`` needs its neighbours at step ``t``:

    for t:                         for T, X1, X2:          (tile loops, skewed)
      for i: for j: S0(t, i, j)  ->   for t:                (original order inside)
      for i: for j: S1(t, i, j)         for i: for j: S0(t, i, j)   if in the tile
                                        for i: for j: S1(t, i, j)   if in the tile

The tile band's hyperplanes, for a statement at position ``k`` of the ``K``
statements of one time step that writes ``A[x1, ..., xd]``: the combined time
``tau = K * t + k`` (so that the statements of one step follow each other, as
Pluto's scalar dimensions do) and ``s_m * tau + x_m`` for each space dimension, each
divided by its tile size and rounded down. The skew ``s_m`` is the smallest that
gives every dependence a non-negative distance along the hyperplane (Pluto finds
the same hyperplanes with its ILP; for the stencils here ``s = 1``). Every
dependence then goes to the same tile or a later one in every tile loop (the band
is permutable), so the tiles run in any lexicographic order, and inside a tile
the statements run in the program's own order: the innermost loop is the
program's innermost space loop, unskewed and dependence-free, which the C
compiler vectorises (Polly's skewed point loops do not). The whole schedule is
checked against the exact dependences by ``apply_schedule``.

Applies when (:func:`stencil_of`): the program is one outermost loop ``t`` around
all statements, each statement writes an element of a rank ``d`` array that does
not depend on ``t`` (the same arrays are written again every step), and no
statement's innermost loop carries a dependence on itself (Seidel's in-place
sweep does: its isl wavefront vectorises, time tiles in program order would not).
Pays (:func:`time_tiles`) when one time step touches more than the tile budget
(half the L2 cache) and a tile of two time steps or more fits in it.

Tile sizes (model, stated): a tile runs ``tau / K`` time steps over ``sigma_m``
values of each hyperplane and touches ``prod_m (sigma_m + s_m tau + 2)`` elements
of each array (the skewed tile's shadow plus the stencil's halo); among powers of
two that fit the budget, the one with the most statement instances per element
touched wins, the innermost dimension's size at least 128 so that the vector loop
stays long. With unknown sizes the model assumes 1024 (``DEFAULT_PARAM``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import islpy as isl
import numpy as np

from polyc.ir.kernel import Kernel, access_map
from schedules import stree
from schedules.apply import apply_schedule
from schedules.host.cache_model import Model
from schedules.host.parallel import attempt

#: the name of the tile band time tiling inserts
TILES = "tiles"
#: the largest skew factor tried per space dimension
MAX_SKEW = 4
#: tile sizes tried for the outer space hyperplanes, and for the innermost one
OUTER_SIZES = (256, 128, 64, 32, 16, 8)
INNER_SIZES = (256, 128)
#: time tile sizes tried, in time steps
TIME_STEPS = (64, 32, 16, 8, 4, 2)


@dataclass(frozen=True)
class Stencil:
    """A time-iterated program: per statement, its combined time ``K * t + k``
    and the index it writes (``isl.PwAff`` on its domain)."""

    steps: int
    time: dict[str, isl.PwAff]
    space: dict[str, list[isl.PwAff]]
    arrays: tuple[str, ...]

    @property
    def rank(self) -> int:
        return len(next(iter(self.space.values())))


def stencil_of(kernel: Kernel) -> Stencil | None:
    """The :class:`Stencil` of ``kernel``'s program order, or None when the
    program is not one (see the module docstring)."""
    original = kernel.original
    root = stree.from_isl(original.schedule)
    band, below = _first_band(root)
    names = {s.name for s in kernel.statements}
    if band is None or set(stree.statements(band)) != names:
        return None
    if band.n_member > 1:  # one perfect nest: t is its first member
        parts: tuple = (band,)
    else:
        parts = below.children if isinstance(below, stree.Sequence_) else (below,)
    position = {n: k for k, part in enumerate(parts) for n in stree.statements(part)}
    times: dict[str, isl.PwAff] = {}
    band.member(0).foreach_pw_aff(lambda pa: times.__setitem__(_name(pa), pa))
    time, space, arrays = {}, {}, set()
    for stmt in kernel.statements:
        if stmt.depth < 2 or stmt.name not in times:
            return None
        t = times[stmt.name]
        if not _is_iterator(t):
            return None
        target = access_map(stmt, stmt.target, kernel.params)
        pma = isl.PwMultiAff.from_map(target)
        index = [pma.get_pw_aff(d) for d in range(pma.dim(isl.dim_type.out))]
        if not index or any(_depends_on(x, _iterator_pos(t)) for x in index):
            return None  # a statement writing new elements each step (a product)
        time[stmt.name] = t.scale_val(_val(len(parts))).add_constant_val(
            _val(position[stmt.name])
        )
        space[stmt.name] = index
        arrays.add(stmt.target.array)
    if len({len(x) for x in space.values()}) != 1:
        return None
    return Stencil(len(parts), time, space, tuple(sorted(arrays)))


def time_tiles(kernel: Kernel, model: Model) -> Kernel | None:
    """``kernel`` with its time loop tiled against its space loops (checked by
    ``apply_schedule``), or None when it is not a stencil, its innermost loops
    carry a recurrence, one time step fits in the tile budget, no skew makes the
    hyperplanes legal, or no tile of two steps or more fits."""
    from schedules.host.profit import recurrent

    found = stencil_of(kernel)
    if found is None or recurrent(kernel.original, model) > 0:
        return None
    space = extents(kernel, found, model)
    item = sum(kernel.arrays[a].dtype.itemsize for a in found.arrays)
    if item * float(np.prod(space)) <= model.cache.tile_budget:
        return None
    skews = skew_factors(kernel, found)
    if skews is None:
        return None
    sizes = tile_sizes(found, skews, space, item, model)
    if sizes is None:
        return None
    root = stree.from_isl(kernel.original.schedule)
    fused = fused_rows(found, skews, root)
    for inside in (fused, root) if fused is not None else (root,):
        tiles = _tile_band(found, skews, sizes, inside)
        out = attempt(lambda t=tiles: apply_schedule(kernel, stree.to_isl(t)), None)
        if out is not None:
            return out
    return None


def fused_rows(found: Stencil, skews: list[int], root: stree.Node) -> stree.Node | None:
    """The inside of a tile with the statements of a time step fused along the
    first space hyperplane (None for a stencil of rank 1, whose one space loop
    would then hold no loop to vectorise, or when a statement's instances are
    not one per time step and element)::

        for t:                               for t:
          for i: for j: S0(t, i, j)    ->      for h = s_1 * tau + i:
          for i: for j: S1(t, i, j)              for j: S0(t, h - s_1 * tau_0, j)
                                                 for j: S1(t, h - s_1 * tau_1, j)

    A statement at row ``h`` reads what the statements before it in the step
    wrote at rows up to ``h`` (the skew makes every distance along ``h``
    non-negative), so the rows of a step run one after the other, each statement
    over a row that is still in the L1, where the unfused tile streamed every
    statement's block of the tile from the L2 (Polly fuses fdtd-2d the same way:
    ``[t, t + i, k, j]``). The innermost loops stay the unskewed space loops.
    ``apply_schedule`` checks it; :func:`time_tiles` falls back to the program's
    order inside the tile when it is refused.
    """
    if found.rank < 2:
        return None
    domains: dict[str, isl.Set] = {}
    stree.domain(root).foreach_set(lambda s: domains.__setitem__(s.get_tuple_name(), s))
    position = {n: _position(found, n, domains[n]) for n in found.time}
    rows: list[isl.UnionPwAff] = [None, None]  # type: ignore[list-item]
    kids: list[stree.Node] = []
    for name in sorted(found.time, key=position.__getitem__):
        if not hyperplanes(found, name).is_injective():
            return None
        tau = found.time[name]
        step = tau.add_constant_val(_val(-position[name])).scale_down_val(
            _val(found.steps)
        )
        row = tau.scale_val(_val(skews[0])).add(found.space[name][0])
        for p, pa in enumerate((step, row)):
            upa = isl.UnionPwAff.from_pw_aff(pa)
            rows[p] = upa if rows[p] is None else rows[p].union_add(upa)
        inner = [isl.UnionPwAff.from_pw_aff(x) for x in found.space[name][1:]]
        leaf = stree.Leaf(isl.UnionSet.from_set(domains[name]))
        kids.append(stree.Band(stree.mupa_from(inner), leaf, True))
    return stree.Band(stree.mupa_from(rows), stree.Sequence_(tuple(kids)), True)


def _position(found: Stencil, name: str, domain: isl.Set) -> int:
    """The statement's position ``k`` in its time step (``tau - K * t``)."""
    tau = found.time[name]
    k = tau.sub(
        tau.scale_down_val(_val(found.steps)).floor().scale_val(_val(found.steps))
    )
    return int(k.intersect_domain(domain).max_val().to_python())


def skew_factors(kernel: Kernel, found: Stencil) -> list[int] | None:
    """The smallest ``s_m`` (up to :data:`MAX_SKEW`) per space dimension that gives
    every dependence a non-negative distance along ``s_m * tau + x_m`` (None
    when some dimension has none). The combined time itself never runs backwards:
    dependences follow the program order, which the time loop and the order of
    the statements in a step give."""
    from schedules.legality import dependences

    hyper = {n: hyperplanes(found, n) for n in found.time}
    distances: list[isl.Set] = []  # per dependence: its (tau, x...) distances
    for _, _, dep in dependences(kernel):
        src = dep.get_tuple_name(isl.dim_type.in_)
        dst = dep.get_tuple_name(isl.dim_type.out)
        if src not in hyper or dst not in hyper:
            return None
        deltas = dep.apply_domain(hyper[src]).apply_range(hyper[dst]).deltas()
        deltas = deltas.intersect_params(kernel.context)
        if deltas.is_empty():
            continue
        distances.append(deltas)
    out = []
    for m in range(found.rank):
        for s in range(MAX_SKEW + 1):
            if all(_min_along(d, s, m + 1) for d in distances):
                out.append(s)
                break
        else:
            return None
    return out


def tile_sizes(
    found: Stencil, skews: list[int], extents: list[int], item: int, model: Model
) -> tuple[int, list[int]] | None:
    """``(tau, sigmas)``: the time tile in combined-time units (``K`` per step) and
    one size per space hyperplane, by the model of the module docstring; None
    when no tile of two time steps or more fits the tile budget."""
    budget = model.cache.tile_budget
    d = found.rank
    best, best_score = None, 0.0
    outer_choices = [OUTER_SIZES] * (d - 1)
    for steps in TIME_STEPS:
        tau = steps * found.steps
        for inner in INNER_SIZES:
            for outer in itertools.product(*outer_choices):
                sigmas = [*outer, inner]
                shadow = [
                    min(s + k * tau + 2, e)
                    for s, k, e in zip(sigmas, skews, extents, strict=True)
                ]
                if item * float(np.prod(shadow)) > budget:
                    continue
                work = steps * float(np.prod(np.minimum(sigmas, extents)))
                score = work / float(np.prod(shadow))
                if score > best_score * 1.0001:
                    best, best_score = (tau, sigmas), score
    return best


def _tile_band(
    found: Stencil, skews: list[int], sizes: tuple[int, list[int]], child
) -> stree.Node:
    """The named tile band ``tiles(t_t, x1_t, ...)`` above ``child``."""
    from polyc.ir import tree

    tau, sigmas = sizes
    members: list[isl.UnionPwAff | None] = [None] * (1 + found.rank)
    for name, t in found.time.items():
        affs = [t.scale_down_val(_val(tau)).floor()]
        for m, x in enumerate(found.space[name]):
            h = t.scale_val(_val(skews[m])).add(x)
            affs.append(h.scale_down_val(_val(sigmas[m])).floor())
        for p, pa in enumerate(affs):
            upa = isl.UnionPwAff.from_pw_aff(pa)
            members[p] = upa if members[p] is None else members[p].union_add(upa)
    band = stree.Band(stree.mupa_from(members), child, True, (False,) * len(members))
    names = ("t_t", *(f"x{m + 1}_t" for m in range(found.rank)))
    return stree.Mark(tree.band_mark(TILES, names), band)


def hyperplanes(found: Stencil, name: str) -> isl.Map:
    """``{ S[x] -> [tau, x1, ..., xd] }`` for statement ``name``."""
    affs = [found.time[name], *found.space[name]]
    out = isl.Map.from_pw_aff(affs[0])
    for pa in affs[1:]:
        out = out.flat_range_product(isl.Map.from_pw_aff(pa))
    return out


def _min_along(deltas: isl.Set, s: int, pos: int) -> bool:
    """Whether ``s * delta_tau + delta_x`` (``x`` at ``pos``) is never negative."""
    coefs = [0] * deltas.dim(isl.dim_type.set)
    coefs[0], coefs[pos] = s, 1
    low = lowest(deltas, coefs)
    return not (low.is_neginfty() or low.is_nan() or low.is_neg())


def lowest(deltas: isl.Set, coefs: list[int]) -> isl.Val:
    """The smallest value of ``sum_i coefs[i] * delta_i`` over ``deltas``."""
    names = [f"d{i}" for i in range(len(coefs))]
    combined = " + ".join(f"{c} * d{i}" for i, c in enumerate(coefs)) or "0"
    params = deltas.get_space().params()
    head = isl.Map(f"{{ [{', '.join(names)}] -> [{combined}] }}")
    return deltas.apply(head.align_params(params)).dim_min_val(0)


def extents(kernel: Kernel, found: Stencil, model: Model) -> list[int]:
    """Per space dimension, the largest extent of the written arrays (at the
    model's sizes)."""
    shapes = [kernel.arrays[a].concrete_shape(model.values) for a in found.arrays]
    return [max(int(s[m]) for s in shapes) for m in range(found.rank)]


def _first_band(root: stree.Node) -> tuple[stree.Band | None, stree.Node | None]:
    """The first band below marks at the root, and the node below it (marks
    skipped)."""
    node = root
    while isinstance(node, stree.Mark):
        node = node.child
    if not isinstance(node, stree.Band):
        return None, None
    below = node.child
    while isinstance(below, stree.Mark):
        below = below.child
    return node, below


def _is_iterator(pa: isl.PwAff) -> bool:
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return False
    aff = pieces[0][1]
    coefs = [
        aff.get_coefficient_val(isl.dim_type.in_, d).to_python()
        for d in range(aff.dim(isl.dim_type.in_))
    ]
    return sorted(coefs)[-1] == 1 and sum(abs(c) for c in coefs) == 1


def _iterator_pos(pa: isl.PwAff) -> int:
    aff = pa.get_pieces()[0][1]
    return next(
        d
        for d in range(aff.dim(isl.dim_type.in_))
        if not aff.get_coefficient_val(isl.dim_type.in_, d).is_zero()
    )


def _depends_on(pa: isl.PwAff, pos: int) -> bool:
    """Whether the value of ``pa`` (not its domain) changes with input ``pos``."""
    return any(
        not aff.get_coefficient_val(isl.dim_type.in_, pos).is_zero()
        for _, aff in pa.get_pieces()
    )


def _name(pa: isl.PwAff) -> str:
    return pa.get_domain_space().get_tuple_name(isl.dim_type.set)


def _val(n: int) -> isl.Val:
    return isl.Val.int_from_si(isl.DEFAULT_CONTEXT, n)
