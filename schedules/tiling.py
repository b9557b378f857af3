"""Tiling and strip-mining of named bands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import islpy as isl

from polyc.errors import ArgumentError, ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.common import positive_int, step
from schedules.legality import Violation, finish, is_legal


def tile(
    kernel: Kernel,
    band: str,
    sizes: Mapping[str, int | Sequence[int]] | Sequence[int],
    *,
    name: str | None = None,
) -> Kernel:
    """Tile some or all members of a band, on one or several levels.

    ``sizes`` maps member names to a tile size (one level) or to a tuple of sizes,
    outermost level first (several levels); a plain sequence gives one size per member
    in order. Members left out are not tiled. Tile loops count tiles (``i_t`` runs over
    ``0 .. ceil(N / 32) - 1``); the point band keeps its name, members and marks, and
    the last tile of each loop is partial when the size does not divide the extent,
    for any extent, symbolic ones included. A new band ``<band>_t`` (one level) or
    ``<band>_t1 .. <band>_tL`` (``L`` levels) holds the tile loops. ::

        tile(k, "S1", {"i": 32, "k": 32})

        for i in 0..N-1:                     for i_t in 0..(N-1)//32:
          for j in 0..N-1:           ->        for k_t in 0..(N-1)//32:
            for k in 0..N-1:                     for i in 32*i_t..min(N, 32*i_t+32)-1:
              S1(i, j, k)                          for j in 0..N-1:
                                                     for k in 32*k_t..min(...)-1:
                                                       S1(i, j, k)

    Args:
        kernel: the kernel to transform.
        band: the band's name (``print(kernel)`` shows the names).
        sizes: tile sizes as described above.
        name: the name of the (outermost) tile band instead of ``<band>_t``.

    Raises:
        ScheduleError: unknown band or member, or a tile band name already taken.
        ArgumentError: sizes that are not positive integers, or levels that differ.
        IllegalTransformError: when tiling reverses a dependence (the band is not
            permutable on these members); the message gives a skew that fixes it when
            one exists.
    """
    op = "tile"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    levels = _levels(op, nb, sizes)
    n_levels = len(next(iter(levels.values())))
    suffixes = ["_t"] if n_levels == 1 else [f"_t{k + 1}" for k in range(n_levels)]
    names = [f"{band}{s}" for s in suffixes]
    if name is not None:
        names[0] = name
    for n in names:
        stree.fresh_name(root, n, op)
    new = stree.replace_at(root, path, lambda node: _tiled(nb, levels, names, suffixes))
    members = ", ".join(levels)
    what = f'band "{band}" cannot be tiled on {members}'
    recorded = {m: (v[0] if len(v) == 1 else tuple(v)) for m, v in levels.items()}
    return finish(
        kernel,
        new,
        path,
        step(op, band, recorded, name=name),
        what,
        lambda v: _tile_fix(kernel, root, path, nb, levels, names, suffixes, v),
    )


def _levels(op: str, nb: stree.Named, sizes) -> dict[str, tuple[int, ...]]:
    if isinstance(sizes, Mapping):
        items = list(sizes.items())
    elif isinstance(sizes, Sequence) and not isinstance(sizes, str):
        if len(sizes) != len(nb.members):
            raise ArgumentError(
                f"{op}: {len(sizes)} sizes for band {nb.name!r} because it has "
                f"{len(nb.members)} members ({', '.join(nb.members)}). Pass one size "
                "per member, or a mapping {member: size}."
            )
        items = list(zip(nb.members, sizes))
    else:
        raise ArgumentError(
            f"{op}: sizes must be a mapping or a sequence, but it is {sizes!r}. "
            "Pass e.g. {'i': 32, 'j': 32}."
        )
    if not items:
        raise ArgumentError(f"{op}: no sizes given. Pass e.g. {{'i': 32}}.")
    out: dict[str, tuple[int, ...]] = {}
    for member, value in items:
        stree.member_index(nb, member, op)
        vals = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if not vals:
            raise ArgumentError(f"{op}: member {member!r} has no tile size.")
        out[member] = tuple(
            positive_int(op, f"the tile size of {member}", v) for v in vals
        )
    depths = {len(v) for v in out.values()}
    if len(depths) > 1:
        raise ArgumentError(
            f"{op}: the members get {sorted(depths)} levels of tiling because their "
            "size tuples differ in length. Give every member the same number of sizes."
        )
    # keep the band's member order
    return {m: out[m] for m in nb.members if m in out}


def _tiled(nb, levels, names, suffixes) -> stree.Node:
    node = nb.node()
    positions = [nb.members.index(m) for m in levels]
    n_levels = len(next(iter(levels.values())))
    for lv in range(n_levels - 1, -1, -1):
        members = [
            nb.band.member(p).scale_down_val(isl.Val(levels[m][lv])).floor()
            for m, p in zip(levels, positions)
        ]
        flags = tuple(
            nb.band.coincident[p] if p < len(nb.band.coincident) else False
            for p in positions
        )
        band = stree.Band(stree.mupa_from(members), node, nb.band.permutable, flags)
        member_names = [f"{m}{suffixes[lv]}" for m in levels]
        node = stree.Named(names[lv], tuple(member_names), (), band).node()
    return node


def _tile_fix(kernel, root, path, nb, levels, names, suffixes, v: Violation) -> str:
    """Look for a skew of one tiled member by an earlier one that makes tiling legal."""
    from schedules.bands import skewed_band

    tiled = list(levels)
    for a in range(len(tiled)):
        for b in range(a + 1, len(tiled)):
            for factor in (1, 2):
                band = skewed_band(
                    nb.band,
                    nb.members.index(tiled[b]),
                    {nb.members.index(tiled[a]): factor},
                )
                cand = stree.Named(nb.name, nb.members, nb.attrs, band)
                new = stree.replace_at(
                    root, path, lambda _n, c=cand: _tiled(c, levels, names, suffixes)
                )
                if is_legal(kernel, new, path):
                    return (
                        f"Skew the band first: skew(kernel, {nb.name!r}, "
                        f"{tiled[b]!r}, {{{tiled[a]!r}: {factor}}}), then tile."
                    )
    return (
        "Tile fewer members (those the dependence does not cross), or skew the band "
        "first (schedules.skew)."
    )


def strip_mine(kernel: Kernel, band: str, member: str, size: int) -> Kernel:
    """Split one member of a band into an outer loop over blocks and an inner loop.

    The band gets a new member ``<member>_o`` (the block index) just before
    ``member``; nothing else moves. ::

        strip_mine(k, "S0", "j", 8)

        for i in 0..N-1:                  for i in 0..N-1:
          for j in 0..M-1:        ->        for j_o in 0..(M-1)//8:
            S0(i, j)                          for j in 8*j_o..min(M, 8*j_o+8)-1:
                                                S0(i, j)

    Raises:
        ScheduleError: unknown band or member, or ``<member>_o`` already a member.
        ArgumentError: a size that is not a positive integer.
        IllegalTransformError: never for a legal kernel (strip-mining keeps the
            order), but the check runs as for every transformation.
    """
    op = "strip_mine"
    positive_int(op, "the strip size", size)
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    pos = stree.member_index(nb, member, op)
    outer = f"{member}_o"
    if outer in nb.members:
        raise ScheduleError(
            f"{op}: band {band!r} already has a member {outer!r} because {member} was "
            "strip-mined before. Tile the band instead, or strip-mine another member."
        )
    ups = [nb.band.member(p) for p in range(nb.band.n_member)]
    ups.insert(pos, ups[pos].scale_down_val(isl.Val(size)).floor())
    flags = list(nb.band.coincident) + [False] * nb.band.n_member
    flags = flags[: nb.band.n_member]
    flags.insert(pos, flags[pos])
    new_band = stree.Band(
        stree.mupa_from(ups), nb.band.child, nb.band.permutable, tuple(flags)
    )
    members = list(nb.members)
    members.insert(pos, outer)
    new_nb = stree.Named(nb.name, tuple(members), nb.attrs, new_band)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    return finish(
        kernel,
        new,
        path,
        step(op, band, member, size),
        f'member {member} of band "{band}" cannot be strip-mined',
        "Keep the loop as it is.",
    )
