"""Loop fusion, distribution (fission) and reordering of sequence children."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import islpy as isl

from polyc.errors import ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.common import step
from schedules.legality import (
    concurrent_violation,
    finish,
    first_violation,
    is_legal,
    memory_dependences,
)


def fuse(
    kernel: Kernel,
    bands: Sequence[str],
    *,
    name: str | None = None,
    depth: int | None = None,
) -> Kernel:
    """Fuse sibling bands (children of one sequence) into one band.

    The outer ``depth`` members (default: as many as the shortest band has) of each
    band become one band named ``name`` (default: the names joined by ``_``) with the
    first band's member names; inside it the bands' remaining parts run in the order
    they are listed. A band longer than ``depth`` keeps its name for its remaining
    members. The fused band sits where the first of them was; attribute marks of the
    fused bands are dropped (mark the fused band again). ::

        fuse(k, ["S0", "S1"])

        for i in 0..N-1:                  for i in 0..N-1:        # band S0_S1
          B[i] = f(A[i])        # S0  ->    B[i] = f(A[i])
        for i in 0..N-1:                    C[i] = g(B[i])
          C[i] = g(B[i])        # S1

    Raises:
        ScheduleError: unknown bands, fewer than two, bands that are not children of
            one sequence, or ``depth`` larger than a band.
        IllegalTransformError: when fusion reverses a dependence (a consumer would
            read before its producer wrote); the message gives a shift that makes the
            fusion legal when one exists.
    """
    op = "fuse"
    bands = list(bands)
    root, seq_path, positions, nbs, depth, fused_name, new = _fusion(
        kernel, bands, name, depth, op
    )
    what = f"bands {', '.join(repr(b) for b in bands)} cannot be fused"
    shortest = min(len(nb.members) for nb in nbs)
    return finish(
        kernel,
        new,
        seq_path,
        step(op, tuple(bands), name=name, depth=depth if depth != shortest else None),
        what,
        lambda v: _shift_fix(kernel, root, seq_path, positions, nbs, depth, fused_name),
    )


def can_fuse(kernel: Kernel, bands: Sequence[str], *, depth: int | None = None) -> bool:
    """Whether :func:`fuse` of ``bands`` at ``depth`` is legal: the same check,
    without building the kernel or the error's hint (which searches for a shift).

    The memory-based dependences are asked first
    (:func:`schedules.legality.memory_dependences`): when the fused tree runs
    them all forward it runs the exact ones forward, and the program's
    dataflow analysis is not needed (a layer's part of a network, a program
    made of one layer); otherwise the exact ones decide. The same answer
    either way.

    Raises:
        ScheduleError: as :func:`fuse` does for bands it cannot fuse at all.
    """
    _, seq_path, _, _, _, _, new = _fusion(kernel, bands, None, depth, "fuse")
    if concurrent_violation(kernel, new, seq_path) is not None:
        return False
    memory = memory_dependences(kernel)
    if first_violation(kernel, root=new, path=seq_path, deps=memory) is None:
        return True
    return first_violation(kernel, root=new, path=seq_path) is None


def _fusion(kernel, bands, name, depth, op):
    """The tree :func:`fuse` checks, with what it was built from."""
    bands = list(bands)
    if len(bands) < 2 or len(set(bands)) != len(bands):
        raise ScheduleError(
            f"{op}: needs at least two different bands because fusion merges loops, "
            f"but got {bands}. Name two or more sibling bands."
        )
    root = stree.from_isl(kernel.schedule)
    seq_path, positions, nbs = _siblings(root, bands, op)
    shortest = min(len(nb.members) for nb in nbs)
    depth = shortest if depth is None else depth
    if not 0 < depth <= shortest:
        raise ScheduleError(
            f"{op}: cannot fuse {depth} members because the shortest band has "
            f"{shortest}. Pass depth between 1 and {shortest}."
        )
    fused_name = name or "_".join(bands)
    taken = [n for n in stree.band_names(root) if n not in bands]
    if fused_name in taken:
        stree.fresh_name(root, fused_name, op)
    new = _fused_tree(root, seq_path, positions, nbs, depth, fused_name)
    return root, seq_path, positions, nbs, depth, fused_name, new


def _siblings(root, bands, op):
    found = [stree.find(root, b, op) for b in bands]
    parents = {p[:-1] for p, _ in found}
    parent = stree.at(root, found[0][0][:-1]) if found[0][0] else None
    if len(parents) != 1 or not isinstance(parent, stree.Sequence_):
        raise ScheduleError(
            f"{op}: bands {', '.join(repr(b) for b in bands)} are not children of one "
            "sequence because they sit at different places in the schedule tree. Fuse "
            "bands that follow each other at the same loop level (distribute or "
            "split the enclosing bands first)."
        )
    return found[0][0][:-1], [p[-1] for p, _ in found], [nb for _, nb in found]


def _fused_tree(root, seq_path, positions, nbs, depth, fused_name) -> stree.Node:
    heads, rests = [], []
    for nb in nbs:
        n = len(nb.members)
        heads.append(stree.sub_band(nb.band, range(depth), nb.band.child))
        if n > depth:
            rest = stree.Named(
                nb.name,
                nb.members[depth:],
                (),
                stree.sub_band(nb.band, range(depth, n), nb.band.child),
            ).node()
        else:
            rest = nb.band.child
        rests.append(rest)
    mupa = heads[0].schedule
    for h in heads[1:]:
        mupa = mupa.union_add(h.schedule)
    flags = tuple(all(h.coincident[d] for h in heads) for d in range(depth))
    inner = rests[0] if len(rests) == 1 else stree.Sequence_(tuple(rests))
    band = stree.Band(mupa, inner, False, flags)
    fused = stree.Named(fused_name, nbs[0].members[:depth], (), band).node()

    def rebuild(seq: stree.Node) -> stree.Node:
        kids = list(stree.children(seq))
        first = min(positions)
        out = []
        for i, c in enumerate(kids):
            if i == first:
                out.append(fused)
            elif i not in positions:
                out.append(c)
        return out[0] if len(out) == 1 else stree.Sequence_(tuple(out))

    return stree.replace_at(root, seq_path, rebuild)


def _shift_fix(kernel, root, seq_path, positions, nbs, depth, fused_name) -> str:
    """Shifts of the later bands (same amount on each) after which fusion is legal."""
    for amount in (1, 2):
        for members in _member_choices(depth):
            shifted = [nbs[0]]
            for nb in nbs[1:]:
                shifted.append(_shifted(nb, members, amount))
            new = _fused_tree(root, seq_path, positions, shifted, depth, fused_name)
            if is_legal(kernel, new, seq_path):
                offs = {nbs[1].members[m]: amount for m in members}
                later = ", ".join(repr(nb.name) for nb in nbs[1:])
                return (
                    f"Shift the later band(s) {later} first, e.g. shift(kernel, "
                    f"{nbs[1].name!r}, {offs}), then fuse."
                )
    return "Keep the bands distributed: no small shift makes this fusion legal."


def _member_choices(depth: int):
    every = tuple(range(depth))
    yield every
    for r in range(1, depth):
        yield from itertools.combinations(range(depth), r)


def _shifted(nb: stree.Named, members, amount) -> stree.Named:
    dom = stree.domain(nb.band)
    ups = [nb.band.member(p) for p in range(nb.band.n_member)]
    for m in members:
        ups[m] = ups[m].union_add(isl.UnionPwAff.val_on_domain(dom, isl.Val(amount)))
    band = stree.Band(stree.mupa_from(ups), nb.band.child, False, nb.band.coincident)
    return stree.Named(nb.name, nb.members, nb.attrs, band)


def distribute(
    kernel: Kernel, band: str, *, names: Sequence[str] | None = None
) -> Kernel:
    """Distribute a band over the children of the sequence directly below it (loop
    fission): each child gets its own copy of the loops, named ``<band>_0``,
    ``<band>_1``... (or ``names``) and carrying the band's attribute marks. ::

        distribute(k, "F")

        for i in 0..N-1:      # band F          for i in 0..N-1:     # band F_0
          B[i] = f(A[i])              ->          B[i] = f(A[i])
          C[i] = g(B[i])                        for i in 0..N-1:     # band F_1
                                                  C[i] = g(B[i])

    Raises:
        ScheduleError: unknown band, no sequence directly below it, or a wrong
            number of names.
        IllegalTransformError: when distribution reverses a dependence (a value
            flows from a later child to an earlier one in a later iteration).
    """
    op = "distribute"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    seq = nb.band.child
    if not isinstance(seq, (stree.Sequence_, stree.Set_)):
        raise ScheduleError(
            f"{op}: band {band!r} has no sequence directly below it because its loop "
            "body is a single statement or band. Distribute the band that encloses "
            "several statements directly."
        )
    kids = seq.children
    names = (
        list(names) if names is not None else [f"{band}_{k}" for k in range(len(kids))]
    )
    if len(names) != len(kids):
        raise ScheduleError(
            f"{op}: {len(names)} names for {len(kids)} pieces because band {band!r} "
            f"encloses {len(kids)} children. Pass one name per child."
        )
    for n in names:
        if n != band:
            stree.fresh_name(root, n, op)
    pieces = []
    for child, piece_name in zip(kids, names):
        dom = stree.domain(child)
        b = stree.Band(
            nb.band.schedule.intersect_domain(dom),
            child,
            nb.band.permutable,
            nb.band.coincident,
        )
        pieces.append(stree.Named(piece_name, nb.members, nb.attrs, b).node())
    new = stree.replace_at(root, path, lambda _n: stree.Sequence_(tuple(pieces)))
    return finish(
        kernel,
        new,
        path,
        step(op, band, names=tuple(names) if names != _default(band, kids) else None),
        f'band "{band}" cannot be distributed',
        "Keep the statements fused, or reorder the children first (schedules.reorder).",
    )


def _default(band, kids) -> list[str]:
    return [f"{band}_{k}" for k in range(len(kids))]


def reorder(kernel: Kernel, order: Sequence[str]) -> Kernel:
    """Reorder children of one sequence. Each name is a band at the top of a child or
    a statement that is alone in its child; the named children take their places in
    the order given, the others stay. ::

        reorder(k, ["S1", "S0"])

        for i: A[i] = 1      # S0          for i: B[i] = 2      # S1
        for i: B[i] = 2      # S1    ->    for i: A[i] = 1      # S0

    Raises:
        ScheduleError: a name that is no child of a sequence, or children of
            different sequences.
        IllegalTransformError: when the new order runs a consumer before its producer.
    """
    op = "reorder"
    order = list(order)
    new, seq_path = _reordered(kernel, order, op)
    return finish(
        kernel,
        new,
        seq_path,
        step(op, tuple(order)),
        f"the children {', '.join(order)} cannot run in this order",
        "Keep producers before their consumers.",
    )


def _reordered(kernel: Kernel, order: list[str], op: str):
    """``(tree, path)``: the kernel's tree with the children ``order`` names
    in that order, and the path of their sequence."""
    root = stree.from_isl(kernel.schedule)
    located = [_child_path(root, name, op) for name in order]
    parents = {p[:-1] for p in located}
    if len(parents) != 1 or len(set(located)) != len(located):
        raise ScheduleError(
            f"{op}: {order} are not distinct children of one sequence because they "
            "sit at different places in the schedule tree. Name children of the same "
            "sequence."
        )
    seq_path = located[0][:-1]
    slots = sorted(p[-1] for p in located)

    def rebuild(seq):
        kids = list(seq.children)
        old = list(kids)
        for slot, p in zip(slots, located):
            kids[slot] = old[p[-1]]
        return stree.Sequence_(tuple(kids))

    return stree.replace_at(root, seq_path, rebuild), seq_path


def _child_path(root: stree.Node, name: str, op: str) -> stree.Path:
    for path, node in stree.walk(root):
        if not isinstance(node, stree.Sequence_):
            continue
        for i, child in enumerate(node.children):
            nb = stree.named_at(child)
            if nb is not None and nb.name == name:
                return path + (i,)
            if stree.statements(child) == [name]:
                return path + (i,)
    raise ScheduleError(
        f"{op}: {name!r} is not a child of a sequence because no sequence has a child "
        f"that is band {name!r} or statement {name!r} alone. Name a sibling band "
        f"({', '.join(stree.band_names(root))}) or statement."
    )
