"""Copies folded into their producers: a re-layout written where it lands.

:mod:`schedules.accel.inline` removes a copy by making its readers read its
source; it cannot when the copy's read index has a floor division (a reshape
that merges dimensions: the composed index would not be a box per tile).
Attention's heads merged back are such a copy: the frontends write the
output of ``P @ V`` per head, then transpose it and view it as rows of the
model's width::

    S36: sdpa[b, h, t, d] += probs[b, h, t, k] * v[b, h, k, d]
    S37: transpose_3[b, t, h, d] = sdpa[b, h, t, d]
    S38: view_7[b, t, l] = transpose_3[b, t, l // 32, l - 32 * (l // 32)]

Read the other way, the copy is affine: the element ``transpose_3[b, t, a, c]``
lands in ``view_7[b, t, 32 a + c]``. :func:`fold_copy` rewrites the producers
of the copy's source to write (and read back, for a sum) the copy's target
there instead, and removes the copy and its source: the transpose ``S37``
folded into ``P @ V`` (``S35``, ``S36`` then write ``transpose_3``), then the
view ``S38`` into them::

    S36: view_7[b, t, 32 h + d] += probs[b, h, t, k] * v[b, h, k, d]

so the MAC calls write the merged rows in place, and the two copies (on
datacenter a layer of 190-490 cycles per attention, with its boundary) go.
The same values are written to the same elements: exact.

A copy folds when:

- it copies another array of its dtype as it is (a load), into a temporary
  only it writes, which no statement reads before it;
- its source is a temporary written by statements before it alone (its
  producers), which read it only as they accumulate into it, and read by the
  copy alone;
- the map from the source's elements to the target's (the copy's read
  access reversed, then its write) is a function, one to one, affine
  without floor divisions, defined on every element the producers touch;
- the schedule is the program order (one loop nest per statement, as the
  frontends give).

:func:`fold_copy` folds one copy (a replayable transformation, checked as
above); :func:`fold_all` every copy that folds, in program order, until none
does.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.errors import IllegalTransformError
from polyc.ir.affine import Aff
from polyc.ir.expr import Load, loads
from polyc.ir.kernel import Kernel, Role, Statement, Step, access_map
from schedules.accel.inline import _program_order, rebuilt
from schedules.accel.pads import _not_a_copy


def foldable(kernel: Kernel) -> list[str]:
    """The copies :func:`fold_copy` can fold, in program order."""
    if not _program_order(kernel):
        return []
    stmts = list(kernel.statements)
    return [
        s.name
        for s in stmts
        if _why_not(stmts, kernel.arrays, kernel.params, s.name)[0] is None
    ]


def fold_all(kernel: Kernel) -> Kernel:
    """``kernel`` with every copy that folds folded into its producers (a chain
    of copies folds one by one); the program order is rebuilt once."""
    if not _program_order(kernel):
        return kernel
    stmts, arrays, done = list(kernel.statements), dict(kernel.arrays), []
    while True:
        for s in stmts:
            why, moved = _why_not(stmts, arrays, kernel.params, s.name)
            if why is None:
                stmts, arrays = _folded(stmts, arrays, s, moved)
                done.append(s.name)
                break
        else:
            break
    if not done:
        return kernel
    steps = tuple(Step("fold_copy", (c,)) for c in done)
    return rebuilt(kernel, stmts, arrays, steps)


def fold_copy(kernel: Kernel, copy: str) -> Kernel:
    """``kernel`` without the copy ``copy``: its source's producers write its
    target where the copy would put each element (see the module docstring).

    Raises:
        IllegalTransformError: when ``copy`` cannot fold, with the reason.
    """
    stmts = list(kernel.statements)
    if not _program_order(kernel):
        why = "the schedule is no longer the program order, one loop nest per statement"
    else:
        why, moved = _why_not(stmts, kernel.arrays, kernel.params, copy)
    if why is not None:
        raise IllegalTransformError(
            f"fold_copy: {copy} cannot be folded into its producers because {why}. "
            "Leave the copy in place."
        )
    c = next(s for s in stmts if s.name == copy)
    stmts, arrays = _folded(stmts, dict(kernel.arrays), c, moved)
    return rebuilt(kernel, stmts, arrays, (Step("fold_copy", (copy,)),))


def _why_not(stmts: list[Statement], arrays, params, copy: str):
    """``(reason, map)``: why ``copy`` cannot fold (None when it can) and, when
    it can, the map of its source's index to its target's (one :class:`Aff`
    per target dimension over the source's dimensions ``d0, d1, ...``)."""
    names = [s.name for s in stmts]
    if copy not in names:
        return f"the kernel has no statement {copy}", None
    pos = names.index(copy)
    c = stmts[pos]
    why = _not_a_copy(c, arrays)  # of another array, its dtype, into a temporary
    if why is not None:
        return why, None
    body, t = c.body, c.target.array
    x = body.array
    if arrays[x].role != Role.TEMP:
        return f"{x} is an {arrays[x].role} of the kernel", None
    producers = []
    for i, s in enumerate(stmts):
        if s.name == copy:
            continue
        if any(g.array in (x, t) for g in s.gathers):
            return f"{s.name} gathers from {x} or {t}", None
        if s.target.array == t:
            return f"{s.name} also writes {t}", None
        reads_t = any(ld.array == t for ld in loads(s.body))
        if reads_t and i < pos:
            return f"{s.name} reads {t} before the copy writes it", None
        if s.target.array == x:
            if i > pos:
                return f"{s.name} writes {x} after the copy", None
            producers.append(s)
        elif any(ld.array == x for ld in loads(s.body)):
            return f"{s.name} reads {x} besides the copy", None
    if not producers:
        return f"no statement before {copy} writes {x}", None
    read = access_map(c, body, params)
    write = access_map(c, c.target, params)
    m = read.reverse().apply_range(write)
    if not m.is_single_valued() or not m.is_injective():
        return f"{copy} does not put each element of {x} in one place of {t}", None
    touched = None
    for s in producers:
        for ld in (s.target, *[ld for ld in loads(s.body) if ld.array == x]):
            got = access_map(s, ld, params).range()
            touched = got if touched is None else touched.union(got)
    if not touched.is_subset(m.domain()):
        return f"{copy} does not copy every element of {x} its producers touch", None
    index = _affine(m)
    if index is None:
        return f"the place of an element of {x} in {t} is not affine", None
    return None, index


def _affine(m: isl.Map) -> tuple[Aff, ...] | None:
    """The map's function as one affine expression per output dimension over
    input dimensions ``d0, d1, ...``; None when it has several pieces, a floor
    division, a term in a size parameter or a fractional coefficient."""
    pma = isl.PwMultiAff.from_map(m)
    if pma.n_piece() != 1:
        return None
    pieces = []
    pma.foreach_piece(lambda _set, maff: pieces.append(maff))
    maff = pieces[0]
    n_in = maff.dim(isl.dim_type.in_)
    out = []
    for k in range(maff.dim(isl.dim_type.out)):
        aff = maff.get_aff(k)
        if aff.dim(isl.dim_type.div) or any(
            not aff.get_coefficient_val(isl.dim_type.param, j).is_zero()
            for j in range(aff.dim(isl.dim_type.param))
        ):
            return None  # a floor division, or a term in a size parameter
        terms = {}
        for j in range(n_in):
            v = aff.get_coefficient_val(isl.dim_type.in_, j)
            if not v.is_int():
                return None
            terms[f"d{j}"] = v.to_python()
        const = aff.get_constant_val()
        if not const.is_int():
            return None
        out.append(Aff(terms, const.to_python()))
    return tuple(out)


def _folded(stmts, arrays, c: Statement, index):
    """The statements and arrays with copy ``c`` gone, its source's producers
    writing (and reading) its target at ``index`` of their source index."""
    x, target = c.body.array, c.target

    def moved(ld: Load) -> Load:
        at = {f"d{j}": a for j, a in enumerate(ld.index)}
        return Load(target.array, tuple(a.substitute(at) for a in index), ld.dtype)

    def rewrite(node):
        if isinstance(node, Load) and node.array == x:
            return moved(node)
        return None

    kept = []
    for s in stmts:
        if s.name == c.name:
            continue
        if s.target.array == x:
            s = dataclasses.replace(s, target=moved(s.target), body=s.body.map(rewrite))
        kept.append(s)
    return kept, {n: a for n, a in arrays.items() if n != x}


__all__ = ["fold_all", "fold_copy", "foldable"]
