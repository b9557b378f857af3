"""Packing of a contraction's operand panels (GotoBLAS, BLIS): the ``KC x NR``
panel of ``B`` that every register tile of a column reads is copied once into a
contiguous buffer, and the micro-kernels read it there.

After :mod:`schedules.host.register` has register-tiled a product, the loops of
its tiles run rows outermost; where packing pays (:func:`pays`) the two tile loops
are swapped, so that the row tiles of one column of tiles run one after the
other, and the row tiles' loop is marked ``@pack(KC)``::

    for c3 (rows, step MR):             for c4 (columns, step NR):
      for c4 (columns, step NR):  ->      for c3:    # @pack(KC): B[k][c4 tile] copied
        for k: # @accumulate              for k:   # @accumulate, reads the copy
          ...                                ...

``KC`` is the most values the reduction loop takes in one cache tile (the
buffer's rows). Each step is a checked transformation (``permute``,
``split_band``); :func:`pack` then places the mark, a promise the host code
generator keeps (:mod:`codegen.pack`) where the loops have the shape it
expects, and emits as they are elsewhere. Values are copied, not computed: the
bits are the same.

When it pays (a stated rule, not a fitted one): the reduction loop takes a known
number ``KC`` >= :data:`MIN_PANEL_ROWS` of values per cache tile (the buffer has a
constant size), the packed panel (``KC x NR`` elements) fits in the L1 cache
(where the micro-kernels of a column reuse it; this also bounds the buffer on
the stack), a column has at least two row tiles (the copy is reused), and the
panel's ``KC`` rows, a matrix row apart, span more than the L1 cache (below that
they stay in L1 as they are: a small matrix, or rows that are already ``NR``
elements long). Measured by hand on matmul 1024^3 in doubles (see
:mod:`codegen.pack`): 0.058 s without the copy, 0.046 s with it.
"""

from __future__ import annotations

from polyc.errors import IllegalTransformError, ScheduleError
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.bands import permute, split_band
from schedules.common import positive_int
from schedules.host.cache_model import Model
from schedules.marks import _mark

MARK = "@pack"
#: the fewest rows of a packed panel (fewer: the copy costs what it saves)
MIN_PANEL_ROWS = 16


def pack(kernel: Kernel, band: str, rows: int) -> Kernel:
    """Copy the operand panels of the register tiles below band ``band`` into
    contiguous buffers of ``rows`` rows: mark ``band`` (one member, the loop over
    row tiles, directly above a band marked ``@accumulate``) with
    ``@pack(rows)``. ::

        pack(k, "S1_rows", 128)

        for c3:                              for c3:    # @pack(128)
          for k:  # @accumulate(16, 8, 64)     for k:   # @accumulate(16, 8, 64)
            ...                        ->        ...    (B[k][l] read from a copy
                                                         made once before c3)

    The code generator copies only where the reduction loop takes at most
    ``rows`` values and the loops have the shape it expects; elsewhere the loops
    run as they are.

    Raises:
        ScheduleError: unknown band, or not one member directly above a band
            marked ``@accumulate``.
        ArgumentError: ``rows`` is not a positive integer.
    """
    op = "pack"
    positive_int(op, "rows", rows)
    _path, nb = stree.find(stree.from_isl(kernel.schedule), band, op)
    below = stree.named_at(nb.band.child)
    if (
        len(nb.members) != 1
        or below is None
        or not any(a.startswith("@accumulate") for a in below.attrs)
    ):
        raise ScheduleError(
            f"{op}: band {band!r} is not a loop over register tiles because "
            + (
                f"it has {len(nb.members)} members"
                if len(nb.members) != 1
                else "the band below it has no @accumulate mark"
            )
            + ". Register-tile the product first (accumulate) and split its tile "
            "band (split_band)."
        )
    return _mark(kernel, band, f"{MARK}({rows})", op, "copy its panels", rows)


def pays(
    model: Model,
    stmt,
    panel_rows: int | None,
    row_tiles: int | None,
    row_bytes: int,
) -> bool:
    """Whether packing the panels of ``stmt``'s register tiles pays (the module
    docstring's rule): ``panel_rows`` values of the reduction loop per cache tile
    (None: not a constant), ``row_tiles`` register tiles in a column (None: not a
    constant, as many as the whole extent), ``row_bytes`` bytes in a row of a
    register tile (the packed panel is ``panel_rows`` such rows)."""
    if panel_rows is None or panel_rows < MIN_PANEL_ROWS:
        return False
    if panel_rows * row_bytes > model.cache.l1:
        return False
    if row_tiles is not None and row_tiles < 2:
        return False
    lanes = stmt.target.index[-1].names() & set(stmt.iterators)
    for ld in stmt.reads:
        if ld.array == stmt.target.array or not ld.index:
            continue
        if not ld.index[-1].names() & lanes:
            continue
        arr = model.kernel.arrays[ld.array]
        stride = int(arr.shape[-1].evaluate(model.values)) * arr.dtype.itemsize
        if panel_rows * stride > model.cache.l1:
            return True
    return False


def pack_panels(
    kernel: Kernel,
    reg: str,
    model: Model,
    panel_rows: int | None,
    row_tiles: int | None,
    row_bytes: int,
) -> Kernel:
    """``kernel`` with the register tiles of band ``reg`` (two members: the row
    tile loop, then the column tile loop, above the reduction band marked
    ``@accumulate``, which takes ``panel_rows`` values per cache tile, with
    ``row_tiles`` values of the row tile loop, rows of ``row_bytes``: see
    :func:`pays`) reordered and
    packed where :func:`pays`; unchanged where it does not or a step is
    refused."""
    root = stree.from_isl(kernel.schedule)
    nb = stree.find(root, reg, "pack")[1]
    names = stree.statements(nb.band)
    if len(nb.members) != 2 or len(names) != 1:
        return kernel
    stmt = kernel.statement(names[0])
    if not pays(model, stmt, panel_rows, row_tiles, row_bytes):
        return kernel
    assert panel_rows is not None
    rows_t, cols_t = nb.members
    rows_band = f"{reg}_rows"
    try:
        out = permute(kernel, reg, [cols_t, rows_t])
        out = split_band(out, reg, rows_t, name=rows_band)
        return pack(out, rows_band, panel_rows)
    except (IllegalTransformError, ScheduleError):
        return kernel
