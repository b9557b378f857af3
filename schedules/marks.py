"""Attribute marks on bands: parallel, vectorize, unroll (and removing them).

A mark sits between a band's name mark and the band and applies to the band's outer
loop. The host code generator turns ``@parallel`` into ``#pragma omp parallel for``,
``@vectorize`` into ``#pragma omp simd`` and ``@unroll(n)`` into
``#pragma GCC unroll n``; the accelerator records them. ``@parallel`` and
``@vectorize`` promise that iterations may run at once, so the legality check
requires that the loop carries no dependence, and re-checks it after every later
transformation.
"""

from __future__ import annotations

from polyc.errors import ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.common import positive_int, step
from schedules.legality import finish, is_legal


def parallel(kernel: Kernel, band: str) -> Kernel:
    """Run the outer loop of a band in parallel (OpenMP on the host). ::

        parallel(k, "S1_t")

        for i_t in ...:             #pragma omp parallel for
          ...              ->       for i_t in ...:
                                      ...

    Raises:
        ScheduleError: unknown band.
        IllegalTransformError: when the loop carries a dependence (iterations would
            race); the message names a member or split that is parallel when one is.
    """
    return _mark(kernel, band, "@parallel", "parallel", "run in parallel")


def vectorize(kernel: Kernel, band: str) -> Kernel:
    """Vectorise the outer loop of a band (``#pragma omp simd``); usually the band of
    an innermost loop (split it off with ``split_band``). ::

        vectorize(k, "S0_j")

        for j in 0..N-1:            #pragma omp simd
          S0(i, j)          ->      for j in 0..N-1:
                                      S0(i, j)

    Raises:
        ScheduleError: unknown band.
        IllegalTransformError: when the loop carries a dependence.
    """
    return _mark(kernel, band, "@vectorize", "vectorize", "be vectorised")


def unroll(kernel: Kernel, band: str, factor: int) -> Kernel:
    """Unroll the outer loop of a band ``factor`` times (``#pragma GCC unroll``).
    Unrolling keeps the order of instances, so it is always legal. ::

        unroll(k, "S0_j", 4)

        for j in 0..N-1:            #pragma GCC unroll 4
          S0(i, j)          ->      for j in 0..N-1:
                                      S0(i, j)

    Raises:
        ScheduleError: unknown band.
        ArgumentError: a factor that is not a positive integer.
    """
    positive_int("unroll", "the unroll factor", factor)
    return _mark(kernel, band, f"@unroll({factor})", "unroll", "be unrolled", factor)


def unmark(kernel: Kernel, band: str, attribute: str | None = None) -> Kernel:
    """Remove attribute marks from a band: ``attribute`` such as ``"@parallel"``
    (``"@unroll"`` matches any factor), or all of them when None.

    Raises:
        ScheduleError: unknown band, or the band does not carry ``attribute``.
    """
    op = "unmark"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    if attribute is None:
        kept: tuple[str, ...] = ()
    else:
        kept = tuple(a for a in nb.attrs if not _matches(a, attribute))
        if len(kept) == len(nb.attrs):
            raise ScheduleError(
                f"{op}: band {band!r} carries no {attribute} mark because its marks "
                f"are {', '.join(nb.attrs) or '(none)'}. Name one of those."
            )
    new_nb = stree.Named(nb.name, nb.members, kept, nb.band)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    return finish(
        kernel,
        new,
        path,
        step(op, band, attribute=attribute),
        f'the marks of band "{band}" cannot be removed',
        "Keep them.",
    )


def _matches(mark: str, attribute: str) -> bool:
    return mark == attribute or mark.split("(")[0] == attribute.split("(")[0]


def _mark(kernel: Kernel, band: str, attr: str, op: str, verb: str, *args) -> Kernel:
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    attrs = tuple(a for a in nb.attrs if not _matches(a, attr)) + (attr,)
    new_nb = stree.Named(nb.name, nb.members, attrs, nb.band)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    what = f'band "{band}" cannot {verb} on its loop {nb.members[0]}'
    return finish(
        kernel,
        new,
        path,
        step(op, band, *args),
        what,
        lambda v: _concurrent_fix(kernel, root, path, nb, attr),
    )


def _concurrent_fix(kernel, root, path, nb: stree.Named, attr: str) -> str:
    """A permutation or split after which some member of the band can carry ``attr``."""
    n = len(nb.members)
    for p in range(1, n):
        order = [p] + [q for q in range(n) if q != p]
        band = stree.sub_band(nb.band, order, nb.band.child)
        members = tuple(nb.members[q] for q in order)
        cand = stree.Named(nb.name, members, nb.attrs + (attr,), band)
        if is_legal(
            kernel, stree.replace_at(root, path, lambda _n, c=cand: c.node()), path
        ):
            return (
                f"Loop {nb.members[p]} carries no dependence: permute(kernel, "
                f"{nb.name!r}, {list(members)}) first."
            )
    for p in range(1, n):
        inner = stree.Named(
            f"{nb.name}_{nb.members[p]}",
            nb.members[p:],
            (attr,),
            stree.sub_band(nb.band, range(p, n), nb.band.child),
        )
        outer = stree.Named(
            nb.name,
            nb.members[:p],
            nb.attrs,
            stree.sub_band(nb.band, range(p), inner.node()),
        )
        if is_legal(
            kernel, stree.replace_at(root, path, lambda _n, o=outer: o.node()), path
        ):
            return (
                f"Loop {nb.members[p]} carries no dependence once the outer loops are "
                f"fixed: split_band(kernel, {nb.name!r}, {nb.members[p]!r}) and mark "
                f"{inner.name!r}."
            )
    return (
        "No loop of this band is dependence-free: tile it and skew the tile loops "
        "(a wavefront) to run tiles in parallel, or mark another band."
    )
