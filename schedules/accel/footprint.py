"""Footprints of tiles: which array elements the instances of one tile touch.

A *placement point* is a position in the schedule tree: a node, plus the first
``depth`` members of the band at that node. Its *prefix* is the schedule above the
point (outer bands and those first members); the instances below the point that
share one prefix value form one *tile*. For an array ``A`` the tile footprint is
``P^-1 . acc``: ``{ [p] -> A[e] }``, the elements that the tile with prefix ``p``
reads (or writes). Placement copies the rectangular hull of a footprint (a box);
:class:`Box` holds the hull's bounds as isl piecewise affine functions of the
prefix, its largest extent over all tiles (the buffer size), and whether the
footprint is exactly its box in every tile.

Everything here needs concrete sizes: parameters must be fixed by the kernel's
context (ML kernels have concrete shapes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import islpy as isl

from polyc.errors import PlacementError
from polyc.ir.kernel import Kernel, access_map


@dataclass(frozen=True)
class Box:
    """The rectangular hull of a footprint, per tile.

    ``lo[d]`` and ``hi[d]`` are functions of the prefix ``[p0, ...]`` (isl
    ``PwAff``); ``extent[d]`` is the largest ``hi - lo + 1`` over all tiles;
    ``exact`` tells whether every tile's footprint equals its box.
    """

    tuple_name: str
    lo: tuple[isl.PwAff, ...]
    hi: tuple[isl.PwAff, ...]
    extent: tuple[int, ...]
    exact: bool
    #: the tile space ``[p]`` (only needed for a 0-d array, whose box has no dims)
    space: isl.Space | None = None

    @property
    def elements(self) -> int:
        n = 1
        for e in self.extent:
            n *= e
        return n

    def multi(self, which: str) -> isl.PwMultiAff:
        """``lo`` or ``hi`` as one ``PwMultiAff`` ``[p] -> [e0, e1, ...]``."""
        parts = self.lo if which == "lo" else self.hi
        if not parts and self.space is not None:
            # a 0-d array: the tile space mapped to the empty tuple
            space = isl.Space.map_from_domain_and_range(
                self.space, isl.Space.set_alloc(self.space.get_ctx(), 0, 0)
            )
            space = space.align_params(self.space)
            return isl.PwMultiAff.from_multi_aff(isl.MultiAff.zero(space))
        return pw_multi(parts)


def pw_multi(parts: Iterable[isl.PwAff]) -> isl.PwMultiAff:
    """Several ``PwAff`` on one domain as a ``PwMultiAff`` (zero parts: an empty
    tuple over that domain is not representable, so callers avoid it)."""
    parts = list(parts)
    out = isl.PwMultiAff.from_pw_aff(parts[0])
    for pa in parts[1:]:
        out = out.flat_range_product(isl.PwMultiAff.from_pw_aff(pa))
    return out


# prefixes -------------------------------------------------------------------------


def prefix_map(kernel: Kernel, node: isl.ScheduleNode, depth: int = 0) -> isl.UnionMap:
    """``{ S[x] -> [p0, ...] }`` for the kernel's statements below ``node``: the
    schedule above ``node`` and, when ``node`` is a band, its first ``depth``
    members. Extension statements (copies) are left out."""
    pre = node.get_prefix_schedule_union_map()
    if depth:
        band = node.band_get_partial_schedule()
        members = [band.get_at(i) for i in range(depth)]
        mupa = isl.MultiUnionPwAff.from_union_pw_aff(members[0])
        for m in members[1:]:
            mupa = mupa.flat_range_product(isl.MultiUnionPwAff.from_union_pw_aff(m))
        inner = isl.UnionMap.from_multi_union_pw_aff(mupa)
        pre = pre.flat_range_product(inner) if _width(pre) else inner
    pre = pre.intersect_domain(kernel.domain).intersect_params(kernel.context)
    return _anonymous(pre)


def _width(umap: isl.UnionMap) -> int:
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    return max((m.dim(isl.dim_type.out) for m in maps), default=0)


def _anonymous(umap: isl.UnionMap) -> isl.UnionMap:
    """Every piece into one anonymous range space (isl may name it per statement)."""
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    out = None
    for m in maps:
        m = m.reset_tuple_id(isl.dim_type.out)
        piece = isl.UnionMap.from_map(m)
        out = piece if out is None else out.union(piece)
    return out if out is not None else umap


def statements_below(prefix: isl.UnionMap) -> list[str]:
    """Statement names in a prefix map's domain, sorted."""
    names: list[str] = []
    prefix.domain().foreach_set(lambda s: names.append(s.get_tuple_name()))
    return sorted(names)


def tile_instances(prefix: isl.UnionMap, stmt: str) -> isl.Map:
    """``{ [p] -> S[x] }``: the instances of ``stmt`` in the tile with prefix p."""
    maps: list[isl.Map] = []
    prefix.foreach_map(maps.append)
    for m in maps:
        if m.get_tuple_name(isl.dim_type.in_) == stmt:
            return m.reverse()
    raise KeyError(stmt)


# footprints -----------------------------------------------------------------------


def accesses(
    kernel: Kernel, array: str, kind: str, stmts: Iterable[str] | None = None
) -> isl.UnionMap:
    """``{ S[x] -> A[e] }`` of ``array`` by ``stmts`` (all by default); ``kind`` is
    ``"read"``, ``"write"`` or ``"all"``."""
    wanted = None if stmts is None else set(stmts)
    out = isl.UnionMap.empty(kernel.context.get_space())
    for s in kernel.statements:
        if wanted is not None and s.name not in wanted:
            continue
        loads = []
        if kind in ("write", "all"):
            loads.append(s.target)
        if kind in ("read", "all"):
            loads.extend(s.reads)
        for ld in loads:
            if ld.array == array:
                out = out.union(isl.UnionMap.from_map(access_map(s, ld, kernel.params)))
    return out


def footprint(
    kernel: Kernel,
    prefix: isl.UnionMap,
    array: str,
    kind: str = "all",
    hulls: dict[str, isl.Map] | None = None,
) -> isl.Map | None:
    """``{ [p] -> A[e] }``: elements of ``array`` that tile ``p`` accesses (None when
    no statement below the point accesses it).

    ``hulls`` maps statements to their instances per tile (``{ [p] -> S[x] }``) to
    use instead of the exact ones: a tensorized statement runs the rectangular hull
    of its tile, and its footprint is that of the hull.
    """
    hulls = hulls or {}
    total = None
    for stmt in statements_below(prefix):
        acc = accesses(kernel, array, kind, [stmt])
        if acc.is_empty():
            continue
        inst = hulls.get(stmt)
        if inst is None:
            inst = tile_instances(prefix, stmt)
        else:  # the hull's instances, not clipped to the domain
            acc = _unrestricted(kernel, array, kind, stmt)
        piece = isl.UnionMap.from_map(inst).apply_range(acc)
        total = piece if total is None else total.union(piece)
    if total is None or total.is_empty():
        return None
    maps: list[isl.Map] = []
    total.foreach_map(maps.append)
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out.coalesce()


def _unrestricted(kernel: Kernel, array: str, kind: str, stmt: str) -> isl.UnionMap:
    """The access relations of ``stmt`` on ``array`` over all integer points (not
    only the statement's domain): a hull instance may lie outside the domain."""
    s = kernel.statement(stmt)
    out = isl.UnionMap.empty(kernel.context.get_space())
    loads = []
    if kind in ("write", "all"):
        loads.append(s.target)
    if kind in ("read", "all"):
        loads.extend(s.reads)
    universe = isl.Set.universe(s.domain.get_space())
    for ld in loads:
        if ld.array != array:
            continue
        idx = ", ".join(a.to_isl() for a in ld.index)
        its = ", ".join(s.iterators)
        head = f"[{', '.join(kernel.params)}] -> " if kernel.params else ""
        m = isl.Map(f"{head}{{ {s.name}[{its}] -> {array}[{idx}] }}")
        out = out.union(isl.UnionMap.from_map(m.intersect_domain(universe)))
    return out


# boxes ----------------------------------------------------------------------------


def box_of(fp: isl.Map, what: str = "placement") -> Box:
    """The rectangular hull of a footprint ``{ [p] -> A[e] }`` per tile.

    Raises:
        PlacementError: when an extent is unbounded (symbolic sizes that the
            context does not fix).
    """
    n = fp.dim(isl.dim_type.out)
    lo, hi, extent = [], [], []
    for d in range(n):
        lo_d = fp.dim_min(d).coalesce()
        hi_d = fp.dim_max(d).coalesce()
        size = hi_d.sub(lo_d).add_constant_val(isl.Val(1)).coalesce()
        top = size.max_val()
        if not top.is_int():
            raise PlacementError(
                f"{what}: the footprint of {fp.get_tuple_name(isl.dim_type.out)} has "
                f"no largest extent in dimension {d} because its size is symbolic "
                f"({size}). Fix the sizes (kernel.with_context('N = 128')) or compile "
                "without placement."
            )
        lo.append(lo_d)
        hi.append(hi_d)
        extent.append(max(1, int(top.to_python())))
    name = fp.get_tuple_name(isl.dim_type.out)
    space = fp.get_space().domain()
    box = Box(name, tuple(lo), tuple(hi), (), False, space)
    exact = box_map(box, fp).is_subset(fp)
    return Box(box.tuple_name, box.lo, box.hi, tuple(extent), exact, space)


def box_map(box: Box, like: isl.Map) -> isl.Map:
    """``{ [p] -> A[e] : lo(p) <= e <= hi(p) }`` in the space of ``like``."""
    space = like.get_space()
    wrapped = isl.Set.universe(space.wrap())
    n_in = like.dim(isl.dim_type.in_)
    ls = isl.LocalSpace.from_space(wrapped.get_space())
    proj = isl.MultiAff.domain_map(space)
    out = wrapped
    for d, (lo, hi) in enumerate(zip(box.lo, box.hi)):
        var = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, n_in + d))
        lo_w = lo.pullback_multi_aff(proj)
        hi_w = hi.pullback_multi_aff(proj)
        out = out.intersect(lo_w.le_set(var)).intersect(var.le_set(hi_w))
    return out.unwrap()


def grows_when_hoisted(inner: Box, outer: Box) -> bool:
    """Whether hoisting a copy from the inner point to the outer one makes the
    buffer larger (the footprint depends on the loops in between)."""
    return outer.elements > inner.elements


def inside_extents(box: Box, prefix_domain: isl.Set, shape: tuple[int, ...]) -> bool:
    """Whether every tile's box lies inside an array of ``shape``."""
    for lo, hi, dim in zip(box.lo, box.hi, shape):
        lo_min = lo.intersect_domain(prefix_domain).min_val()
        hi_max = hi.intersect_domain(prefix_domain).max_val()
        if lo_min.to_python() < 0 or hi_max.to_python() > dim - 1:
            return False
    return True


def tile_box(prefix: isl.UnionMap, stmt: str) -> Box:
    """The rectangular hull of ``stmt``'s instances per tile (its iterators' ranges
    as functions of the prefix)."""
    return box_of(tile_instances(prefix, stmt), "tensorize")


def hull_instances(box: Box, like: isl.Map) -> isl.Map:
    """``{ [p] -> S[x] }``: every point of the per-tile rectangular hull."""
    return box_map(box, like)
