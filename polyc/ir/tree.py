"""Helpers on isl schedule trees that every layer needs.

Bands are named by mark nodes that polyc inserts directly above them. A band mark
reads ``NAME(m0, m1, ...)``: the band's name and the names of its members, so a
schedule printed as YAML and read back keeps its names. Marks that carry attributes
start with ``@`` (``@parallel``, ``@unroll``, ``@vectorize``, ``@tensorize(matmul)``)
and sit between the band mark and the band they modify.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import islpy as isl

from polyc.errors import ArgumentError, ScheduleError

_BAND_MARK = re.compile(r"^([A-Za-z_][\w.]*)\(([\w, ]*)\)$")


def band_mark(name: str, members: Sequence[str]) -> str:
    """The mark text naming a band and its members, e.g. ``S1(i, j, k)``."""
    return f"{name}({', '.join(members)})"


def parse_band_mark(text: str) -> tuple[str, tuple[str, ...]] | None:
    """``(name, members)`` for a band mark, None for any other mark."""
    m = _BAND_MARK.match(text)
    if not m:
        return None
    members = tuple(s.strip() for s in m.group(2).split(",") if s.strip())
    return m.group(1), members


def is_attribute(text: str) -> bool:
    return text.startswith("@")


def initial_schedule(
    domains: Sequence[tuple[str, isl.Set, Sequence[str]]],
) -> isl.Schedule:
    """Program-order schedule: statements in sequence, each in its own named band.

    ``domains`` lists ``(band name, domain, iterator names)`` per statement.
    """
    if not domains:
        raise ScheduleError("schedule: a kernel needs at least one statement.")
    union = isl.UnionSet.from_set(domains[0][1])
    for _, dom, _ in domains[1:]:
        union = union.union(isl.UnionSet.from_set(dom))
    schedule = isl.Schedule.from_domain(union)
    root = schedule.get_root().child(0)
    if len(domains) > 1:
        filters = isl.UnionSetList.alloc(union.get_ctx(), len(domains))
        for _, dom, _ in domains:
            filters = filters.add(isl.UnionSet.from_set(dom))
        root = root.insert_sequence(filters)
    for pos, (name, dom, iters) in enumerate(domains):
        node = root.child(pos).child(0) if len(domains) > 1 else root
        if dom.dim(isl.dim_type.set) == 0 or dom.is_empty():
            root = _up_to_top(node, len(domains) > 1)
            continue
        node = node.insert_partial_schedule(identity_mupa(dom))
        node = node.insert_mark(isl.Id(band_mark(name, iters)))
        root = _up_to_top(node, len(domains) > 1)
    return root.get_schedule()


def _up_to_top(node: isl.ScheduleNode, in_sequence: bool) -> isl.ScheduleNode:
    """Walk back up to the node just below the domain (the sequence, or the band)."""
    while node.get_tree_depth() > 1:
        node = node.parent()
    return node


def identity_mupa(dom: isl.Set) -> isl.MultiUnionPwAff:
    """The partial schedule ``{ S[i, j] -> [i, j] }`` of a statement's domain."""
    space = dom.get_space()
    ident = isl.MultiAff.identity(space.map_from_set())
    ident = ident.reset_tuple_id(isl.dim_type.out)
    pma = isl.PwMultiAff.from_multi_aff(ident).intersect_domain(dom)
    return isl.MultiUnionPwAff.from_union_pw_multi_aff(
        isl.UnionPwMultiAff.from_pw_multi_aff(pma)
    )


Path = tuple[int, ...]  # child indices from a node (the root, for a schedule)


def walk_paths(
    top: isl.Schedule | isl.ScheduleNode,
) -> Iterator[tuple[Path, isl.ScheduleNode]]:
    """Pre-order ``(path, node)`` below ``top`` (a schedule's root, or a node; paths
    are relative to it). An explicit stack: nested generators would cost the depth
    of the tree per node."""
    root = top.get_root() if isinstance(top, isl.Schedule) else top
    stack = [((), root)]
    while stack:
        path, node = stack.pop()
        yield path, node
        for i in range(node.n_children() - 1, -1, -1):
            stack.append((path + (i,), node.child(i)))


def walk(top: isl.Schedule | isl.ScheduleNode) -> Iterator[isl.ScheduleNode]:
    """Pre-order traversal of a schedule (sub)tree."""
    for _, node in walk_paths(top):
        yield node


def at(schedule: isl.Schedule, path: Path) -> isl.ScheduleNode:
    """The node at ``path`` from the root."""
    node = schedule.get_root()
    for i in path:
        node = node.child(i)
    return node


def path_of(node: isl.ScheduleNode) -> Path:
    """The path of ``node`` from its tree's root."""
    out: list[int] = []
    while node.has_parent():
        out.append(node.get_child_position())
        node = node.parent()
    return tuple(reversed(out))


def mark_name(node: isl.ScheduleNode) -> str | None:
    """The text of a mark node (None for other nodes)."""
    if node.get_type() != isl.schedule_node_type.mark:
        return None
    return node.mark_get_id().get_name()


def marks(schedule: isl.Schedule) -> list[str]:
    """The text of every mark, in pre-order."""
    out: list[str] = []
    mark = isl.schedule_node_type.mark

    def visit(node: isl.ScheduleNode) -> bool:
        if node.get_type() == mark:
            out.append(node.mark_get_id().get_name())
        return True

    # isl's own traversal: about 3x faster than :func:`walk`, whose every
    # ``child()`` copies the node's path from the root
    schedule.get_root().foreach_descendant_top_down(visit)
    return out


def _first_mark(schedule: isl.Schedule, match) -> isl.ScheduleNode | None:
    """The first mark node in pre-order whose text satisfies ``match``."""
    found: list[isl.ScheduleNode] = []
    mark = isl.schedule_node_type.mark

    def visit(node: isl.ScheduleNode) -> bool:
        if found:
            return False  # isl has no early stop: skip every subtree from here on
        if node.get_type() == mark and match(node.mark_get_id().get_name()):
            found.append(node.copy())  # the callback's node dies when it returns
            return False
        return True

    schedule.get_root().foreach_descendant_top_down(visit)
    return found[0] if found else None


def band_below(mark: isl.ScheduleNode) -> isl.ScheduleNode:
    """The node under a band's name mark and its attribute marks."""
    node = mark.child(0)
    while node.get_type() == isl.schedule_node_type.mark:
        node = node.child(0)
    return node


def find_band_mark(
    schedule: isl.Schedule, name: str, op: str = "schedule"
) -> isl.ScheduleNode:
    """The name mark of the band ``name``.

    Raises:
        ScheduleError: when no band has that name; the message lists the names.
    """

    def match(text: str) -> bool:
        if not text.startswith(f"{name}("):  # cheaper than the pattern
            return False
        parsed = parse_band_mark(text)
        return parsed is not None and parsed[0] == name

    node = _first_mark(schedule, match)
    if node is not None:
        return node
    raise ScheduleError(
        f"{op}: there is no band named {name!r} because the schedule's bands are "
        f"{', '.join(band_names(schedule)) or '(none)'}. Use one of those names "
        "(print(kernel) shows the loop nest)."
    )


def find_band(
    schedule: isl.Schedule, name: str, op: str = "schedule"
) -> isl.ScheduleNode:
    """The band node named ``name`` (below its name mark and attribute marks).

    Raises:
        ScheduleError: when no band has that name; the message lists the names.
    """
    child = band_below(find_band_mark(schedule, name, op))
    if child.get_type() != isl.schedule_node_type.band:
        raise ScheduleError(f"{op}: mark {name!r} is not above a band.")
    return child


def band_names(schedule: isl.Schedule) -> list[str]:
    out = []
    for text in marks(schedule):
        parsed = parse_band_mark(text)
        if parsed:
            out.append(parsed[0])
    return out


def band_members(schedule: isl.Schedule, name: str) -> tuple[str, ...]:
    node = find_band(schedule, name)
    mark = node.parent()
    while not parse_band_mark(mark.mark_get_id().get_name()):
        mark = mark.parent()
    return parse_band_mark(mark.mark_get_id().get_name())[1]


def without_extensions(schedule: isl.Schedule) -> isl.Schedule:
    """The schedule with every extension node deleted.

    Extension nodes add statements that are not in the domain (placement's DMA copies);
    the copies are transparent to the computation, so the schedule of the kernel's own
    statements is the tree without them. isl cannot build a schedule map of a tree that
    has extension nodes.
    """
    while True:
        found = None
        for node in walk(schedule):
            if node.get_type() == isl.schedule_node_type.extension:
                found = node
                break
        if found is None:
            return schedule
        schedule = found.delete().get_schedule()


def flat_map(schedule: isl.Schedule | isl.UnionMap) -> isl.UnionMap:
    """The schedule as one union map into a single anonymous time space.

    Ranges of different statements are padded with zeros to one dimension so that
    lexicographic comparisons across statements are defined. Extension nodes (copy
    statements) are left out: see :func:`without_extensions`.
    """
    if isinstance(schedule, isl.UnionMap):
        umap = schedule
    else:
        # a zero-dimensional copy's filter outlives its extension node (isl keeps
        # the point), so the map is cut down to the domain
        umap = (
            without_extensions(schedule)
            .get_map()
            .intersect_domain(schedule.get_domain())
        )
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    if not maps:
        return umap
    width = max(m.dim(isl.dim_type.out) for m in maps)
    out = None
    for m in maps:
        m = m.reset_tuple_id(isl.dim_type.out)
        n = m.dim(isl.dim_type.out)
        if n < width:
            m = m.add_dims(isl.dim_type.out, width - n)
            for d in range(n, width):
                m = m.fix_val(isl.dim_type.out, d, 0)
        piece = isl.UnionMap.from_map(m)
        out = piece if out is None else out.union(piece)
    return out


def specialize_schedule(schedule: isl.Schedule, fixed: isl.Set) -> isl.Schedule:
    """``schedule`` with the parameters that ``fixed`` pins (a parameter set such as
    ``[N] -> { : N = 64 }``) replaced by their values and dropped from every node.

    Raises:
        ArgumentError: on an extension node (specialize before placement).
    """
    ids = _param_ids(fixed)
    return _specialized(schedule.get_root().child(0), fixed, ids)


def _param_ids(fixed: isl.Set) -> isl.IdList:
    n = fixed.dim(isl.dim_type.param)
    ids = isl.IdList.alloc(fixed.get_ctx(), n)
    for i in range(n):
        ids = ids.add(fixed.get_dim_id(isl.dim_type.param, i))
    return ids


def fix_params(obj, fixed: isl.Set, ids: isl.IdList):
    """A Set, UnionSet, UnionMap or MultiUnionPwAff with the parameters of
    ``fixed`` bound to its values and projected out."""
    if isinstance(obj, isl.Set):
        return obj.intersect_params(fixed).project_out_param_id_list(ids)
    if isinstance(obj, isl.UnionSet):
        sets: list[isl.Set] = []
        obj.foreach_set(sets.append)
        out = isl.UnionSet.empty(fix_params(obj.params(), fixed, ids).get_space())
        for s in sets:
            out = out.union(isl.UnionSet.from_set(fix_params(s, fixed, ids)))
        return out
    if isinstance(obj, isl.UnionMap):
        return obj.intersect_params(fixed).project_out_param_id_list(ids)
    if isinstance(obj, isl.MultiUnionPwAff):
        umap = isl.UnionMap.from_multi_union_pw_aff(obj)
        return isl.MultiUnionPwAff.from_union_map(fix_params(umap, fixed, ids))
    raise TypeError(f"cannot specialize a {type(obj).__name__}")


def joined(parts: list[isl.Schedule], combine) -> isl.Schedule:
    """``parts`` combined in order by ``combine`` (``isl.Schedule.sequence`` or
    ``.set``) into one node of them all: in pairs, then pairs of pairs (isl
    flattens the nested ones). One after the other, each step copied the
    union of the domains so far, quadratic in a network's hundreds of loop
    nests (66 ms for hf-mobilenetv2's 219, 11 ms so)."""
    while len(parts) > 1:
        pairs = [combine(a, b) for a, b in zip(parts[::2], parts[1::2])]
        parts = pairs + parts[len(pairs) * 2 :]
    return parts[0]


def _specialized(node: isl.ScheduleNode, fixed, ids) -> isl.Schedule:
    T = isl.schedule_node_type
    t = node.get_type()
    if t == T.leaf:
        return isl.Schedule.from_domain(fix_params(node.get_domain(), fixed, ids))
    if t == T.band:
        inner = _specialized(node.child(0), fixed, ids)
        mupa = fix_params(node.band_get_partial_schedule(), fixed, ids)
        band = (
            inner.insert_partial_schedule(mupa.intersect_domain(inner.get_domain()))
            .get_root()
            .child(0)
            .band_set_permutable(node.band_get_permutable())
        )
        for i in range(node.band_n_member()):
            band = band.band_member_set_coincident(
                i, node.band_member_get_coincident(i)
            )
        return band.get_schedule()
    if t == T.mark:
        inner = _specialized(node.child(0), fixed, ids)
        return inner.get_root().child(0).insert_mark(node.mark_get_id()).get_schedule()
    if t in (T.sequence, T.set):
        combine = isl.Schedule.sequence if t == T.sequence else isl.Schedule.set
        parts = [
            _specialized(node.child(i), fixed, ids) for i in range(node.n_children())
        ]
        return joined(parts, combine)
    if t in (T.filter, T.context, T.guard):
        return _specialized(node.child(0), fixed, ids)
    raise ArgumentError(
        f"specialize: the schedule has a {t} node because it is placed. Specialize "
        "the kernel before placing it."
    )


class Reach:
    """The names of the statements whose instances reach a node, computed only
    when a leaf asks (isl's universe domain of a leaf walks the whole path from
    the root each time): the domain's, narrowed by each filter, widened by each
    extension's range. A walk makes one per domain, filter, extension and
    expansion node on its way down; ``names()`` is None below an expansion, which
    renames instances (then ask isl: ``node.get_universe_domain()``)."""

    __slots__ = ("_done", "_value", "node", "parent")

    def __init__(self, parent: Reach | None, node: isl.ScheduleNode):
        self.parent, self.node = parent, node
        self._value: frozenset[str] | None = None
        self._done = False

    def names(self) -> frozenset[str] | None:
        if not self._done:
            self._value, self._done = self._compute(), True
        return self._value

    def _compute(self) -> frozenset[str] | None:
        t = self.node.get_type()
        if t == isl.schedule_node_type.domain:
            return tuple_names(self.node.domain_get_domain())
        above = self.parent.names() if self.parent is not None else None
        if above is None or t == isl.schedule_node_type.expansion:
            return None
        if t == isl.schedule_node_type.filter:
            return above & tuple_names(self.node.filter_get_filter())
        return above | tuple_names(self.node.extension_get_extension().range())


def unrelated_children(root: isl.ScheduleNode, stmts) -> set[int]:
    """The positions of the children of the root sequence (``root``: a schedule's
    domain node) whose filters keep none of the statements ``stmts``: a walk
    after those statements' nodes may skip them. Empty when the root has no
    sequence."""
    seq = root.child(0)
    if seq.get_type() != isl.schedule_node_type.sequence:
        return set()
    wanted = set(stmts)
    return {
        i
        for i in range(seq.n_children())
        if not wanted & tuple_names(seq.child(i).filter_get_filter())
    }


#: the node types that change which statements reach the nodes below
REACH_TYPES = (
    isl.schedule_node_type.domain,
    isl.schedule_node_type.filter,
    isl.schedule_node_type.extension,
    isl.schedule_node_type.expansion,
)


def tuple_names(uset: isl.UnionSet) -> frozenset[str]:
    """The tuple names of the spaces of a union set."""
    names: list[str] = []
    uset.foreach_set(lambda s: names.append(s.get_tuple_name()))
    return frozenset(names)
