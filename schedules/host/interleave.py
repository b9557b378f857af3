"""Independent recurrences interleaved: the rows of a dependence-free loop run
together inside the loop that carries each row's recurrence.

A loop that carries a recurrence (``p[i][j] = -c / (a * p[i][j - 1] + b)`` along
``j``) runs one chain of dependent operations: a division waits for the one
before it, whatever the width of the machine. When the loop around it carries
no dependence (each ``i`` is a chain of its own), :data:`ROWS` chains can run
together: ``tile`` the outer loop by ``ROWS``, ``distribute`` its point loop over
the statements below it, and in each piece whose band carries a recurrence,
``merge_bands`` and ``permute`` the point loop innermost::

    for i:                                   for i_t:              # step ROWS
      p[i][0] = 0                              for i in ROWS: p[i][0] = 0
      for j:                          ->       for j:
        p[i][j] = f(p[i][j - 1])                 for i in ROWS:
                                                   p[i][j] = f(p[i][j - 1])

The ``ROWS`` operations of one ``j`` are independent, so they overlap in the
pipelines (or share a vector), and the ``ROWS`` rows' lines of ``p`` stay in the
L1 across ``j``. Each statement instance computes what it did, from the same
values (only independent instances change order), so the bits stay the same.
Each step is checked; a refused one leaves the band as it was.

``ROWS`` = 8: by hand on PolyBench's adi at LARGE (n = 1000, 500 steps, gcc -O3
-march=native -ffp-contract=off, CPU time, one run each at load 6): the
original 10.6 s, isl's distributed schedule 11.0 s, 8 rows 8.0 s, 16 rows
7.7 s, 32 rows 9.5 s. bench.host_c_corpus measures the result.
"""

from __future__ import annotations

from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.bands import merge_bands, permute
from schedules.fusion import distribute
from schedules.host.cache_model import Model
from schedules.host.matvec import _try
from schedules.host.parallel import band_at, is_coincident
from schedules.tiling import tile

#: rows whose recurrences run together
ROWS = 8


def interleave_recurrences(kernel: Kernel, model: Model) -> Kernel:
    """Interleave :data:`ROWS` rows of every one-member dependence-free band
    above a one-member innermost band that carries a recurrence of its
    statements (see the module docstring)."""
    from schedules.host.profit import recurrent_statements

    recurring = recurrent_statements(kernel)
    if not recurring:
        return kernel
    for name in _rows_above_chains(kernel, recurring):
        kernel = _interleave(kernel, name, model, recurring)
    return kernel


def _rows_above_chains(kernel: Kernel, recurring: set[str]) -> list[str]:
    """The named one-member coincident bands with a chain below them
    (:func:`_chain`), directly or as a child of the sequence below them."""
    out = []
    for _, node in stree.walk(stree.from_isl(kernel.schedule)):
        nb = stree.named_at(node)
        if nb is None or nb.attrs or nb.band.n_member != 1:
            continue
        if not is_coincident(nb.band, 0):
            continue
        child = nb.band.child
        kids = child.children if isinstance(child, stree.Sequence_) else (child,)
        if any(_chain(kid, recurring) for kid in kids):
            out.append(nb.name)
    return out


def _chain(node: stree.Node, recurring: set[str]) -> stree.Named | None:
    """``node`` as a named one-member band with no band below it whose
    statements carry a recurrence along it, or None."""
    nb = stree.named_at(node)
    if nb is None or nb.attrs or nb.band.n_member != 1:
        return None
    if any(isinstance(n, stree.Band) for _, n in stree.walk(nb.band.child)):
        return None
    return nb if set(stree.statements(nb.band)) & recurring else None


def _interleave(kernel: Kernel, name: str, model: Model, recurring) -> Kernel:
    _, nb = band_at(kernel, name)
    if model.extent(nb.band.member(0), stree.domain(nb.band)) < 2 * ROWS:
        return kernel
    out = _try(lambda: tile(kernel, name, {nb.members[0]: ROWS}, name=f"{name}_rows"))
    if out is None:
        return kernel
    pieces = [name]
    if isinstance(nb.band.child, stree.Sequence_):
        out = _try(lambda k=out: distribute(k, name))
        if out is None:
            return kernel
        pieces = [f"{name}_{k}" for k in range(len(nb.band.child.children))]
    changed = False
    for piece in pieces:
        _, pnb = band_at(out, piece)
        below = _chain(pnb.band.child, recurring)
        if below is None:
            continue
        merged = _try(lambda k=out, p=piece, b=below: merge_bands(k, p, b.name))
        if merged is None:
            continue
        order = [below.members[0], pnb.members[0]]
        permuted = _try(lambda k=merged, p=piece, o=order: permute(k, p, o))
        if permuted is not None:
            out, changed = permuted, True
    return out if changed else kernel
