"""An immutable Python mirror of isl schedule trees, for rewriting them.

isl's schedule-node API edits one node in place of a cursor; fusion, distribution and
reordering need whole-subtree surgery that it does not offer. Transformations therefore
read the kernel's ``isl.Schedule`` into these small frozen nodes, rebuild the part they
change, and write a new ``isl.Schedule`` back (:func:`to_isl`). The node kinds keep
isl's words: ``Band`` (a partial schedule with its permutable and coincident flags),
``Mark``, ``Sequence`` and ``Set`` (ordered and unordered children), ``Leaf``. Filters
are implicit: every subtree knows its domain, and a sequence's filters are the domains
of its children.

A *named band* is ``Mark("NAME(m0, m1)") -> [Mark("@attr")]* -> Band``; :class:`Named`
is that chain taken apart, and :meth:`Named.node` puts it back together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polyc.errors import ScheduleError
from polyc.ir import tree


@dataclass(frozen=True, eq=False)
class Leaf:
    domain: isl.UnionSet


@dataclass(frozen=True, eq=False)
class Band:
    schedule: isl.MultiUnionPwAff
    child: Node
    permutable: bool = False
    coincident: tuple[bool, ...] = ()

    @property
    def n_member(self) -> int:
        return self.schedule.dim(isl.dim_type.set)

    def member(self, pos: int) -> isl.UnionPwAff:
        return self.schedule.get_at(pos)


@dataclass(frozen=True, eq=False)
class Mark:
    name: str
    child: Node


@dataclass(frozen=True, eq=False)
class Sequence_:
    children: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Set_:
    children: tuple[Node, ...]


Node = Leaf | Band | Mark | Sequence_ | Set_
Path = tuple[int, ...]


# isl -> python --------------------------------------------------------------------
def from_isl(schedule: isl.Schedule) -> Node:
    """The tree below the domain node of ``schedule``.

    Raises:
        ScheduleError: on node kinds polyc's transformations do not handle
            (extension, expansion).
    """
    return _from_node(schedule.get_root().child(0))


def _from_node(node: isl.ScheduleNode) -> Node:
    T = isl.schedule_node_type
    t = node.get_type()
    if t == T.leaf:
        return Leaf(node.get_domain())
    if t == T.band:
        n = node.band_n_member()
        return Band(
            node.band_get_partial_schedule(),
            _from_node(node.child(0)),
            bool(node.band_get_permutable()),
            tuple(bool(node.band_member_get_coincident(i)) for i in range(n)),
        )
    if t == T.mark:
        return Mark(node.mark_get_id().get_name(), _from_node(node.child(0)))
    if t in (T.sequence, T.set):
        kids = tuple(_from_node(node.child(i)) for i in range(node.n_children()))
        return Sequence_(kids) if t == T.sequence else Set_(kids)
    if t in (T.filter, T.context, T.guard):
        return _from_node(node.child(0))
    raise ScheduleError(
        f"schedule: a {t} node is not supported by polyc's transformations because "
        "they rewrite band, mark, sequence, set and filter nodes only. Remove it."
    )


# python -> isl --------------------------------------------------------------------
def to_isl(node: Node) -> isl.Schedule:
    """The ``isl.Schedule`` of a tree (its domain is the union of the leaves')."""
    if isinstance(node, Leaf):
        return isl.Schedule.from_domain(node.domain)
    if isinstance(node, Band):
        inner = to_isl(node.child)
        mupa = node.schedule.intersect_domain(inner.get_domain())
        sched = inner.insert_partial_schedule(mupa)
        band = sched.get_root().child(0)
        band = band.band_set_permutable(int(node.permutable))
        for i, flag in enumerate(node.coincident[: node.n_member]):
            band = band.band_member_set_coincident(i, int(flag))
        return band.get_schedule()
    if isinstance(node, Mark):
        inner = to_isl(node.child)
        return inner.get_root().child(0).insert_mark(isl.Id(node.name)).get_schedule()
    combine = isl.Schedule.sequence if isinstance(node, Sequence_) else isl.Schedule.set
    return tree.joined([to_isl(c) for c in node.children], combine)


# queries --------------------------------------------------------------------------
def domain(node: Node) -> isl.UnionSet:
    """The statement instances of a subtree."""
    if isinstance(node, Leaf):
        return node.domain
    if isinstance(node, (Band, Mark)):
        return domain(node.child)
    out = domain(node.children[0])
    for c in node.children[1:]:
        out = out.union(domain(c))
    return out


def statements(node: Node) -> list[str]:
    """Names of the statements in a subtree, in tree order."""
    out: list[str] = []
    for leaf in leaves(node):
        sets: list[isl.Set] = []
        leaf.domain.foreach_set(sets.append)
        for s in sorted(sets, key=lambda x: x.get_tuple_name()):
            if s.get_tuple_name() not in out:
                out.append(s.get_tuple_name())
    return out


def leaves(node: Node) -> Iterator[Leaf]:
    for _, n in walk(node):
        if isinstance(n, Leaf):
            yield n


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (Band, Mark)):
        return (node.child,)
    if isinstance(node, (Sequence_, Set_)):
        return node.children
    return ()


def top_level(schedule: isl.Schedule) -> tuple[Node, ...]:
    """The children of ``schedule``'s root sequence, or its root alone: a
    program's top-level loop nests."""
    root = from_isl(schedule)
    return root.children if isinstance(root, Sequence_) else (root,)


def walk(node: Node, path: Path = ()) -> Iterator[tuple[Path, Node]]:
    """Pre-order ``(path, node)`` pairs; a path lists child positions from the top."""
    yield path, node
    for i, c in enumerate(children(node)):
        yield from walk(c, path + (i,))


def at(node: Node, path: Path) -> Node:
    for i in path:
        node = children(node)[i]
    return node


def with_children(node: Node, kids: Sequence[Node]) -> Node:
    if isinstance(node, (Band, Mark)):
        return replace(node, child=kids[0])
    if isinstance(node, (Sequence_, Set_)):
        return replace(node, children=tuple(kids))
    return node


def replace_at(node: Node, path: Path, fn: Callable[[Node], Node]) -> Node:
    """The tree with the subtree at ``path`` replaced by ``fn(subtree)``."""
    if not path:
        return fn(node)
    kids = list(children(node))
    kids[path[0]] = replace_at(kids[path[0]], path[1:], fn)
    return with_children(node, kids)


def bands_above(node: Node, path: Path) -> list[Band]:
    """The bands strictly above ``path``, outermost first."""
    out = []
    for k in range(len(path)):
        n = at(node, path[:k])
        if isinstance(n, Band):
            out.append(n)
    return out


# named bands ----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Named:
    """A band with its name mark and attribute marks."""

    name: str
    members: tuple[str, ...]
    attrs: tuple[str, ...]
    band: Band

    def node(self) -> Node:
        inner: Node = self.band
        for a in reversed(self.attrs):
            inner = Mark(a, inner)
        return Mark(tree.band_mark(self.name, self.members), inner)


def named_at(node: Node) -> Named | None:
    """The named band whose name mark is ``node``, if it is one."""
    if not isinstance(node, Mark):
        return None
    parsed = tree.parse_band_mark(node.name)
    if not parsed:
        return None
    attrs = []
    inner = node.child
    while isinstance(inner, Mark) and tree.is_attribute(inner.name):
        attrs.append(inner.name)
        inner = inner.child
    if not isinstance(inner, Band):
        return None
    return Named(parsed[0], parsed[1], tuple(attrs), inner)


def find(node: Node, name: str, op: str) -> tuple[Path, Named]:
    """The path to the name mark of band ``name`` and the band.

    Raises:
        ScheduleError: when no band has that name (the message lists the names).
    """
    for path, n in walk(node):
        nb = named_at(n)
        if nb is not None and nb.name == name:
            return path, nb
    names = band_names(node)
    raise ScheduleError(
        f"{op}: there is no band named {name!r} because the schedule's bands are "
        f"{', '.join(names) or '(none)'}. Use one of those names (print(kernel) shows "
        "the loop nest)."
    )


def band_names(node: Node) -> list[str]:
    return [nb.name for _, n in walk(node) if (nb := named_at(n)) is not None]


def bands_by_statements(node: Node) -> dict[tuple[str, ...], str]:
    """Each named band's name, by the statements it runs (in tree order)."""
    return {
        tuple(statements(nb.node())): nb.name
        for _, n in walk(node)
        if (nb := named_at(n)) is not None
    }


def fresh_name(node: Node, wanted: str, op: str) -> str:
    """``wanted`` when no band has that name yet.

    Raises:
        ScheduleError: when a band already has that name.
    """
    if wanted in band_names(node):
        raise ScheduleError(
            f"{op}: the band name {wanted!r} is taken because another band already "
            "has it. Pass another name."
        )
    return wanted


def member_index(nb: Named, member: str, op: str) -> int:
    """Position of ``member`` in a named band.

    Raises:
        ScheduleError: when the band has no such member.
    """
    if member not in nb.members:
        raise ScheduleError(
            f"{op}: band {nb.name!r} has no member {member!r} because its members are "
            f"{', '.join(nb.members)}. Use one of those."
        )
    return nb.members.index(member)


def mupa_from(members: Sequence[isl.UnionPwAff]) -> isl.MultiUnionPwAff:
    """A multi union piecewise affine function from its members."""
    out = isl.MultiUnionPwAff.from_union_pw_aff(members[0])
    for m in members[1:]:
        out = out.flat_range_product(isl.MultiUnionPwAff.from_union_pw_aff(m))
    return out


def sub_band(band: Band, positions: Sequence[int], child: Node) -> Band:
    """A band made of some members of ``band`` (flags kept), above ``child``."""
    return Band(
        mupa_from([band.member(p) for p in positions]),
        child,
        band.permutable,
        tuple(_flag(band, p) for p in positions),
    )


def _flag(band: Band, pos: int) -> bool:
    return band.coincident[pos] if pos < len(band.coincident) else False


# naming unnamed bands -------------------------------------------------------------
def name_bands(node: Node, taken: Sequence[str] = ()) -> Node:
    """Put a name mark above every band that has none.

    A band over one statement is named after it (``S1``, then ``S1_1``...), others
    after their statements joined by ``_`` (``S0_S1``), or ``B<n>`` past three. A
    member is named after the statement iterator it equals in every statement when
    there is one (``i``), else ``t<depth>``.
    """
    used = set(taken) | set(band_names(node))

    def pick(base: str) -> str:
        name, n = base, 1
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        return name

    def visit(n: Node, named: bool, depth: int) -> Node:
        if isinstance(n, Mark):
            is_name = tree.parse_band_mark(n.name) is not None
            return Mark(n.name, visit(n.child, named or is_name, depth))
        if isinstance(n, Band):
            child = visit(n.child, False, depth + n.n_member)
            band = replace(n, child=child)
            if named:
                return band
            stmts = statements(n)
            base = stmts[0] if len(stmts) == 1 else "_".join(stmts)
            if len(stmts) > 3:
                base = "B"
            members = member_names(n, depth)
            return Mark(tree.band_mark(pick(base), members), band)
        kids = [visit(c, False, depth) for c in children(n)]
        return with_children(n, kids) if kids else n

    return visit(node, False, 0)


def member_names(band: Band, depth: int) -> tuple[str, ...]:
    out: list[str] = []
    for pos in range(band.n_member):
        name = _iterator_of(band.member(pos))
        if name is None or name in out:
            name = f"t{depth + pos}"
        out.append(name)
    return tuple(out)


def _iterator_of(upa: isl.UnionPwAff) -> str | None:
    """The iterator name when the member is exactly one iterator in every piece."""
    names: set[str] = set()
    pieces: list[isl.PwAff] = []
    upa.foreach_pw_aff(pieces.append)
    for pa in pieces:
        affs = [aff for _, aff in pa.get_pieces()]
        for aff in affs:
            if aff.is_cst():
                continue  # a statement this member does not move (a fused init)
            if not aff.get_constant_val().is_zero():
                return None
            if aff.get_denominator_val().to_python() != 1:
                return None
            nz = [
                d
                for d in range(aff.dim(isl.dim_type.in_))
                if not aff.get_coefficient_val(isl.dim_type.in_, d).is_zero()
            ]
            if len(nz) != 1:
                return None
            if aff.get_coefficient_val(isl.dim_type.in_, nz[0]).to_python() != 1:
                return None
            if any(
                not aff.get_coefficient_val(isl.dim_type.param, d).is_zero()
                for d in range(aff.dim(isl.dim_type.param))
            ):
                return None
            names.add(aff.get_dim_name(isl.dim_type.in_, nz[0]))
    return names.pop() if len(names) == 1 else None


def per_statement(mupas: list[isl.MultiUnionPwAff]) -> dict[str, isl.Map]:
    """``{statement: S[x] -> [members of mupas, in order]}``: the bands'
    schedules joined and split by statement."""
    if not mupas:
        return {}
    total = mupas[0]
    for m in mupas[1:]:
        total = total.flat_range_product(m)
    out: dict[str, isl.Map] = {}
    isl.UnionMap.from_multi_union_pw_aff(total).foreach_map(
        lambda m: out.__setitem__(m.get_tuple_name(isl.dim_type.in_), m)
    )
    return out
