"""Wavefronts inside each time step, for in-place (Gauss-Seidel) stencils.

Seidel-2D updates ``A[i][j]`` in place from its eight neighbours, those before it
in the sweep (``i - 1``, ``j - 1``) already at the new time step. Its innermost
loop carries the recurrence ``j - 1 -> j``: each element waits for the chain of
adds and the division of the one before, and the C compiler vectorises no such
loop. Time tiles in the program's order (:mod:`schedules.host.stencil`) would
keep that chain. Within one time step, though, the elements on a hyperplane
``h = a_1 x_1 + ... + a_(d-1) x_(d-1) + x_d`` do not depend on each other when
every dependence inside the step moves ``h`` forward (Seidel-2D: ``h = 2i + j``),
so the step can run hyperplane after hyperplane::

    for t:                          for t:
      for i:                   ->     for h:                    (the wavefront)
        for j: S(t, i, j)               for i: S(t, i, h - 2i)   (dependence-free)

The innermost loop walks a diagonal (a row minus ``a_(d-1)`` per element) and
vectorises; consecutive hyperplanes touch the same cache lines (``h + 1`` moves
``x_d`` by one), so a time step streams each array once, as the program does.
isl's own schedule for Seidel-2D is a wavefront over time and space together
(``4t + 2i + j``): its diagonals cross every time step in flight and touch a new
cache line per element (at PolyBench's LARGE, 2000 x 2000, slower than the
original). By hand at LARGE (50 steps, load about 1.5): 0.64 s against gcc's 2.1 s
for the original order, the same bits.

Applies when (:func:`step_wavefronts`): the program is a stencil
(:func:`schedules.host.stencil.stencil_of`) whose statements each run as their own
part of a time step, one of which depends on itself one element before along the
last space dimension in the same step (a chain of latencies along its innermost
loop; Floyd-Warshall's row that depends on one element of it is none);
coefficients ``a_m`` in ``0..MAX_SKEW`` give every dependence inside one part of
one step a distance of at least one along ``h`` (the smallest sum wins); and the
cache lines of a few consecutive hyperplanes fit the tile budget (model, stated:
the rows a hyperplane crosses, the product of the space extents but the last,
times the distinct outer indices of each array's accesses, one line each).
"""

from __future__ import annotations

import itertools

import islpy as isl
import numpy as np

from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.apply import apply_schedule
from schedules.host.cache_model import Model
from schedules.host.parallel import attempt
from schedules.host.profit import LINE, recurrent
from schedules.host.stencil import (
    MAX_SKEW,
    Stencil,
    extents,
    hyperplanes,
    lowest,
    stencil_of,
)

#: what :class:`schedules.host.scheduler.Found` names as its step when the
#: scheduler ran a Gauss-Seidel stencil's time steps as wavefronts
STEP_WAVEFRONTS = "step-wavefronts"


def step_wavefronts(kernel: Kernel, model: Model) -> Kernel | None:
    """``kernel`` with each time step run along hyperplanes (module docstring),
    checked by ``apply_schedule``; None when it does not apply or pay."""
    found = stencil_of(kernel)
    if found is None or len(found.time) != found.steps:
        return None  # not a stencil, or statements sharing a part of a step
    if any(s.depth != 1 + found.rank for s in kernel.statements):
        return None  # [tau, h, x_1, ...] would not order every instance
    if recurrent(kernel.original, model) == 0 or not _chained(kernel, found):
        return None  # time tiles (or nothing) in the program's own order
    coefs = hyperplane(kernel, found)
    if coefs is None or not _fits(kernel, found, model):
        return None
    band = _band(kernel, found, coefs)
    root = stree.name_bands(band)
    return attempt(lambda: apply_schedule(kernel, stree.to_isl(root)), None)


def hyperplane(kernel: Kernel, found: Stencil) -> tuple[int, ...] | None:
    """``(a_1, ..., a_(d-1), 1)``: the coefficients of ``h`` over the space
    dimensions, the smallest sum that moves every dependence inside one part of a
    time step forward by at least one (None when none up to :data:`MAX_SKEW`)."""
    from schedules.legality import dependences

    planes = {n: hyperplanes(found, n) for n in found.time}
    inside: list[isl.Set] = []  # (tau, x...) distances with tau's distance 0
    for _, _, dep in dependences(kernel):
        src = dep.get_tuple_name(isl.dim_type.in_)
        dst = dep.get_tuple_name(isl.dim_type.out)
        deltas = dep.apply_domain(planes[src]).apply_range(planes[dst]).deltas()
        deltas = deltas.intersect_params(kernel.context).fix_val(isl.dim_type.set, 0, 0)
        if not deltas.is_empty():
            inside.append(deltas)
    choices = itertools.product(range(MAX_SKEW + 1), repeat=found.rank - 1)
    for outer in sorted(choices, key=sum):
        coefs = (*outer, 1)
        if all(_forward(d, coefs) for d in inside):
            return coefs
    return None


def _chained(kernel: Kernel, found: Stencil) -> bool:
    """Whether a statement depends on itself one element before along the last
    space dimension in the same step, at (almost) every instance (Seidel's
    ``A[i][j - 1] -> A[i][j]``): a chain of latencies. A dependence of a row on
    one of its elements (Floyd-Warshall's ``path[i][k]``, read along ``j``, has
    that distance only at ``j = k + 1``) is none: its loop runs at the speed of
    the loads, which a diagonal walk only slows down."""
    from schedules.legality import dependences

    n = 1 + found.rank
    src = [f"d{i}" for i in range(n)]
    dst = [*src[:-1], f"{src[-1]} + 1"]
    step = isl.Map(f"{{ [{', '.join(src)}] -> [{', '.join(dst)}] }}")
    for _, _, dep in dependences(kernel):
        name = dep.get_tuple_name(isl.dim_type.in_)
        if name != dep.get_tuple_name(isl.dim_type.out):
            continue
        plane = hyperplanes(found, name)
        pairs = dep.apply_domain(plane).apply_range(plane)
        pairs = pairs.intersect_params(kernel.context)
        chained = pairs.intersect(step.align_params(pairs.get_space().params()))
        if chained.is_empty():
            continue
        if _equalities(chained.range()) == _equalities(pairs.range()):
            return True
    return False


def _equalities(s: isl.Set) -> int:
    """The equalities of ``s``'s affine hull (fewer: more dimensions)."""
    hull = s.affine_hull()
    return sum(c.is_equality() for c in hull.get_constraints())


def _forward(deltas: isl.Set, coefs: tuple[int, ...]) -> bool:
    low = lowest(deltas, [0, *coefs])
    return not (low.is_neginfty() or low.is_nan()) and low.cmp_si(1) >= 0


def _fits(kernel: Kernel, found: Stencil, model: Model) -> bool:
    """Whether the lines a few consecutive hyperplanes touch fit the tile budget
    (model of the module docstring)."""
    rows = float(np.prod(extents(kernel, found, model)[:-1]))
    outer = {
        (ld.array, tuple(str(x) for x in ld.index[:-1]))
        for stmt in kernel.statements
        for ld in (stmt.target, *stmt.reads)
        if ld.index
    }
    return rows * len(outer) * LINE <= model.cache.tile_budget


def _band(kernel: Kernel, found: Stencil, coefs: tuple[int, ...]) -> stree.Band:
    """One band ``[tau, h, x_1, ..., x_(d-1)]`` over all statements, its members
    below ``h`` dependence-free."""
    members: list[isl.UnionPwAff | None] = [None] * (found.rank + 1)
    for name, t in found.time.items():
        space = found.space[name]
        h = space[-1]
        for c, x in zip(coefs[:-1], space[:-1], strict=True):
            h = h.add(x.scale_val(isl.Val.int_from_si(isl.DEFAULT_CONTEXT, c)))
        for p, pa in enumerate([t, h, *space[:-1]]):
            upa = isl.UnionPwAff.from_pw_aff(pa)
            members[p] = upa if members[p] is None else members[p].union_add(upa)
    coincident = (False, False, *([True] * (found.rank - 1)))
    leaf = stree.Leaf(kernel.schedule.get_domain())
    return stree.Band(stree.mupa_from(members), leaf, False, coincident)
