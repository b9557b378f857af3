"""Reordering and reshaping the members of named bands: interchange, permute, skew,
shift, and splitting or merging nested bands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import islpy as isl

from polyc.errors import ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.common import integer, mapping, step
from schedules.legality import finish, is_legal


def interchange(kernel: Kernel, band: str, a: str, b: str) -> Kernel:
    """Swap two members (loops) of a band. ::

        interchange(k, "S1", "j", "k")

        for i:                 for i:
          for j:       ->        for k:
            for k:                 for j:
              S1(i, j, k)            S1(i, j, k)

    Raises:
        ScheduleError: unknown band or member.
        IllegalTransformError: when the swap reverses a dependence (a wavefront);
            the message gives a skew that makes it legal when one exists.
    """
    op = "interchange"
    root = stree.from_isl(kernel.schedule)
    _, nb = stree.find(root, band, op)
    order = list(nb.members)
    pa, pb = stree.member_index(nb, a, op), stree.member_index(nb, b, op)
    order[pa], order[pb] = order[pb], order[pa]
    what = f'members {a} and {b} of band "{band}" cannot be interchanged'
    return _reorder_members(kernel, root, nb, order, step(op, band, a, b), what)


def permute(kernel: Kernel, band: str, order: Sequence[str]) -> Kernel:
    """Reorder all members of a band; ``order`` lists them outermost first. ::

        permute(k, "S1", ["k", "i", "j"])

        for i:                 for k:
          for j:       ->        for i:
            for k:                 for j:
              S1(i, j, k)            S1(i, j, k)

    Raises:
        ScheduleError: unknown band, or ``order`` is not a permutation of the members.
        IllegalTransformError: when the new order reverses a dependence.
    """
    op = "permute"
    root = stree.from_isl(kernel.schedule)
    _, nb = stree.find(root, band, op)
    order = list(order)
    if sorted(order) != sorted(nb.members):
        raise ScheduleError(
            f"{op}: {order} is not a permutation of band {band!r} because its members "
            f"are {', '.join(nb.members)}. List each member once."
        )
    what = f'band "{band}" cannot be permuted to ({", ".join(order)})'
    return _reorder_members(kernel, root, nb, order, step(op, band, tuple(order)), what)


def _reorder_members(kernel, root, nb, order, record, what) -> Kernel:
    path, _ = stree.find(root, nb.name, record.name)
    positions = [nb.members.index(m) for m in order]
    band = stree.sub_band(nb.band, positions, nb.band.child)
    new_nb = stree.Named(nb.name, tuple(order), nb.attrs, band)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    return finish(
        kernel,
        new,
        path,
        record,
        what,
        lambda v: _skew_fix(kernel, root, path, nb, order),
    )


def _skew_fix(kernel, root, path, nb, order) -> str:
    """A skew of one member by another after which the new order is legal."""
    positions = [nb.members.index(m) for m in order]
    n = len(nb.members)
    for target in range(n):
        for source in range(n):
            if source == target:
                continue
            for factor in (1, 2):
                skewed = skewed_band(nb.band, target, {source: factor})
                band = stree.sub_band(skewed, positions, nb.band.child)
                cand = stree.Named(nb.name, tuple(order), nb.attrs, band)
                new = stree.replace_at(root, path, lambda _n, c=cand: c.node())
                if is_legal(kernel, new, path):
                    return (
                        f"Skew first: skew(kernel, {nb.name!r}, {nb.members[target]!r}, "
                        f"{{{nb.members[source]!r}: {factor}}})."
                    )
    return "Keep the current order: no single skew makes this order legal."


def skewed_band(
    band: stree.Band, target: int, factors: Mapping[int, int]
) -> stree.Band:
    """``band`` with member ``target`` replaced by ``target + sum(f * member)``."""
    members = [band.member(p) for p in range(band.n_member)]
    new = members[target]
    for pos, f in factors.items():
        new = new.add(members[pos].scale_val(isl.Val(f)))
    members[target] = new
    # a skewed member is no longer known to be dependence-free
    flags = tuple(f and p != target for p, f in enumerate(band.coincident))
    return stree.Band(stree.mupa_from(members), band.child, False, flags)


def skew(kernel: Kernel, band: str, member: str, factors: Mapping[str, int]) -> Kernel:
    """Add multiples of other members of the same band to one member.

    The loop ``member`` then runs over ``member + sum(f * other)``; the statement
    instances are the same, visited along diagonals. Skewing makes a stencil with a
    time loop tileable (time tiling of Jacobi and Seidel). ::

        skew(k, "L0", "i", {"t": 1})

        for t in 0..T-1:              for t in 0..T-1:
          for i in 1..N-2:      ->      for i in t+1..t+N-2:     # i' = i + t
            S0(t, i)                      S0(t, i - t)

    Raises:
        ScheduleError: unknown band or member, or ``member`` among the factors.
        ArgumentError: factors that are not integers.
        IllegalTransformError: when the skew reverses a dependence (a negative factor).
    """
    op = "skew"
    factors = mapping(op, "factors", factors)
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    target = stree.member_index(nb, member, op)
    by_pos: dict[int, int] = {}
    for other, f in factors.items():
        pos = stree.member_index(nb, other, op)
        if pos == target:
            raise ScheduleError(
                f"{op}: member {member!r} cannot be skewed by itself because that "
                "would scale the loop, not skew it. Name other members of the band."
            )
        by_pos[pos] = integer(op, f"the factor of {other}", f)
    new_nb = stree.Named(
        nb.name, nb.members, nb.attrs, skewed_band(nb.band, target, by_pos)
    )
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    terms = " + ".join(f"{f}*{o}" for o, f in factors.items())
    return finish(
        kernel,
        new,
        path,
        step(op, band, member, factors),
        f'member {member} of band "{band}" cannot be skewed to {member} + {terms}',
        "Use non-negative factors, or skew by another member.",
    )


def shift(
    kernel: Kernel,
    band: str,
    offsets: Mapping[str, int],
    *,
    statement: str | None = None,
) -> Kernel:
    """Add constant offsets to members of a band, for every statement of the band or
    only for ``statement``. Shifting one statement against another lets a later
    fusion keep every dependence forward (e.g. the copy-back of Jacobi). ::

        shift(k, "L2", {"i": 1})

        for i in 1..N-2:             for i in 2..N-1:           # i' = i + 1
          S1(i)              ->        S1(i - 1)

    Raises:
        ScheduleError: unknown band, member or statement.
        ArgumentError: offsets that are not integers.
        IllegalTransformError: when the shift reverses a dependence.
    """
    op = "shift"
    offsets = mapping(op, "offsets", offsets)
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    dom = stree.domain(nb.band)
    if statement is not None:
        stmts = stree.statements(nb.band)
        if statement not in stmts:
            raise ScheduleError(
                f"{op}: statement {statement!r} is not in band {band!r} because the "
                f"band runs {', '.join(stmts)}. Name one of those."
            )
        dom = _statement_domain(dom, statement)
    members = [nb.band.member(p) for p in range(nb.band.n_member)]
    for m, off in offsets.items():
        pos = stree.member_index(nb, m, op)
        off = integer(op, f"the offset of {m}", off)
        const = isl.UnionPwAff.val_on_domain(dom, isl.Val(off))
        members[pos] = members[pos].union_add(const)
    band_ = stree.Band(
        stree.mupa_from(members), nb.band.child, nb.band.permutable, nb.band.coincident
    )
    new_nb = stree.Named(nb.name, nb.members, nb.attrs, band_)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    who = f" for {statement}" if statement else ""
    return finish(
        kernel,
        new,
        path,
        step(op, band, offsets, statement=statement),
        f'band "{band}" cannot be shifted by {offsets}{who}',
        "Shift by the opposite amount, or shift the other statement.",
    )


def _statement_domain(dom: isl.UnionSet, name: str) -> isl.UnionSet:
    sets: list[isl.Set] = []
    dom.foreach_set(sets.append)
    return isl.UnionSet.from_set(next(s for s in sets if s.get_tuple_name() == name))


def split_band(
    kernel: Kernel, band: str, at: str | int, *, name: str | None = None
) -> Kernel:
    """Split a band into two nested bands before member ``at`` (a name or position).

    The outer band keeps the name and the attribute marks; the inner one is named
    ``<band>_<member>`` (or ``name``). The loops do not move. ::

        split_band(k, "S1", "k")

        # band S1(i, j, k)          # band S1(i, j)
        for i: for j: for k:   ->   for i: for j:
                                      # band S1_k(k)
                                      for k: ...

    Raises:
        ScheduleError: unknown band or member, splitting at the first member, or an
            inner name already taken.
    """
    op = "split_band"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    pos = at if isinstance(at, int) else stree.member_index(nb, at, op)
    if not 0 < pos < len(nb.members):
        raise ScheduleError(
            f"{op}: cannot split band {band!r} at position {pos} because it has "
            f"{len(nb.members)} members and a split needs members on both sides. "
            f"Split at one of {', '.join(nb.members[1:]) or '(none)'}."
        )
    inner_name = stree.fresh_name(root, name or f"{band}_{nb.members[pos]}", op)
    n = len(nb.members)
    inner = stree.Named(
        inner_name,
        nb.members[pos:],
        (),
        stree.sub_band(nb.band, range(pos, n), nb.band.child),
    )
    outer = stree.Named(
        nb.name,
        nb.members[:pos],
        nb.attrs,
        stree.sub_band(nb.band, range(pos), inner.node()),
    )
    new = stree.replace_at(root, path, lambda _n: outer.node())
    return finish(
        kernel,
        new,
        path,
        step(op, band, at, name=name),
        f'band "{band}" cannot be split',
        "Keep the band whole.",
    )


def merge_bands(kernel: Kernel, outer: str, inner: str) -> Kernel:
    """Merge band ``inner``, the only child of band ``outer``, into ``outer``.

    A merged band can be tiled, skewed and permuted as one (e.g. the time loop of a
    stencil with its space loops). ::

        # band L0(t)                      # band L0(t, i, j)
        for t:                      ->    for t: for i: for j: ...
          # band L1(i, j)
          for i: for j: ...

    Raises:
        ScheduleError: unknown bands, ``inner`` not directly below ``outer``, or
            ``inner`` carrying attribute marks (remove them with ``unmark`` first).
    """
    op = "merge_bands"
    root = stree.from_isl(kernel.schedule)
    path, o = stree.find(root, outer, op)
    _, i = stree.find(root, inner, op)
    below = stree.named_at(o.band.child)
    if below is None or below.name != inner:
        raise ScheduleError(
            f"{op}: band {inner!r} is not directly below band {outer!r} because "
            f"{outer!r} encloses {_describe(o.band.child)}. Fuse or distribute first "
            "so that the inner band is the only child."
        )
    if i.attrs:
        raise ScheduleError(
            f"{op}: band {inner!r} carries {', '.join(i.attrs)} because it was marked "
            "before. Remove the marks with schedules.unmark first."
        )
    clash = set(o.members) & set(i.members)
    if clash:
        raise ScheduleError(
            f"{op}: bands {outer!r} and {inner!r} both have members named "
            f"{', '.join(sorted(clash))} because their loops share names. Rename is "
            "not supported: merge bands whose member names differ."
        )
    mupa = o.band.schedule.flat_range_product(i.band.schedule)
    flags = tuple(_flags(o.band)) + tuple(_flags(i.band))
    merged = stree.Named(
        outer,
        o.members + i.members,
        o.attrs,
        stree.Band(mupa, i.band.child, False, flags),
    )
    new = stree.replace_at(root, path, lambda _n: merged.node())
    return finish(
        kernel,
        new,
        path,
        step(op, outer, inner),
        f'bands "{outer}" and "{inner}" cannot be merged',
        "Keep them nested.",
    )


def _flags(band: stree.Band) -> list[bool]:
    out = list(band.coincident) + [False] * band.n_member
    return out[: band.n_member]


def _describe(node: stree.Node) -> str:
    nb = stree.named_at(node)
    if nb is not None:
        return f"band {nb.name!r}"
    if isinstance(node, stree.Sequence_):
        return f"a sequence of {len(node.children)} children"
    if isinstance(node, stree.Leaf):
        return "statements directly"
    return "other nodes"


__all__ = [
    "interchange",
    "merge_bands",
    "permute",
    "shift",
    "skew",
    "split_band",
]
