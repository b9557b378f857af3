"""Gathers on the accelerator: an indirect (gather) DMA per statement, and what
it costs.

A statement that reads through a data-dependent index (``out[b, s, d] =
W[{idx[b, s]}, d]``, an embedding) has no footprint the placement could tile:
which rows it reads is data. The scheduler keeps it whole, as a layer of its own
(:func:`schedules.accel.layers.split` makes every gathering statement opaque), and
when the statement has the indirect-DMA form (:func:`polyc.ir.gathers.form`)
marks its band ``@gather``: the code generator then issues one ``pc_gather`` per
run of rows, on a DMA channel that reads the index block and fetches each
indexed row from the table (DRAM) into the output (its DRAM buffer, or its
on-chip home). A gather without that form runs on the scalar core, each index
checked. Either way the legality of every transformation around it is decided
on its over-approximated accesses (the whole gathered dimension).

The cost (:func:`cycles`) is the simulator's: per call ``(1 + rows)``
descriptors of set-up, the index and row bytes at the slower of the DMA's and
DRAM's bandwidth, and two DRAM latencies (the rows' addresses come back with the
indices); calls on one channel follow one another, each call's latency
overlapping the next call. The calls go to the channels the runtime picks for
them (``pc__pick_channel``: the least busy; every channel for a gather into a
home on chip, the stores' half for one into DRAM), DRAM's bandwidth shared
among those that run together. Until the fourteenth session the model put them
all on one channel: a gather of 16 calls on datacenter's eight channels was
predicted 5,955 cycles and ran 714 (fuzz seed 963, case 464).
"""

from __future__ import annotations

from accelerator.hardware.spec import Spec
from polyc.errors import ScheduleError
from polyc.ir import tree
from polyc.ir.gathers import GatherForm, form
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.accel.terms import load_rate
from schedules.common import step

#: the attribute mark of a band whose statement runs as an indirect DMA
#: (``@gather S3``: the statement's name follows)
MARK = "@gather"


def gather_dma(kernel: Kernel, band: str) -> Kernel:
    """Run the gathering statement of ``band`` as indirect DMA (mark it
    ``@gather``). The loop order is unchanged, so it is always legal. ::

        for b, s, d:                          @gather
          out[b, s, d] = W[{idx[b, s]}, d]    pc_gather(W rows by idx[b, :])

    Raises:
        ScheduleError: unknown band, or its statement does not gather in the
            indirect-DMA form (the message says why).
    """
    op = "gather_dma"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    names = stree.statements(nb.node())
    stmt = kernel.statement(names[0]) if len(names) == 1 else None
    found = form(kernel, stmt) if stmt is not None and stmt.gathers else None
    if not isinstance(found, GatherForm):
        why = found or "it does not run one gathering statement"
        raise ScheduleError(
            f"{op}: band {band!r} cannot run as an indirect DMA because {why}. "
            "Leave it on the scalar core (the default)."
        )
    if any(a.startswith(MARK) for a in nb.attrs):
        return kernel
    named = stree.Named(
        nb.name, nb.members, nb.attrs + (f"{MARK} {stmt.name}",), nb.band
    )
    new = stree.replace_at(root, path, lambda _n: named.node())
    return kernel.with_schedule(stree.to_isl(new), step(op, band))


def mark_all(kernel: Kernel) -> tuple[Kernel, dict[str, str]]:
    """Every gathering statement in the indirect-DMA form marked ``@gather``,
    and per gathering statement (by name) what runs it, for the explanation."""
    notes: dict[str, str] = {}
    if not any(s.gathers for s in kernel.statements):
        return kernel, notes
    bands = stree.bands_by_statements(stree.from_isl(kernel.schedule))
    for s in kernel.statements:
        if not s.gathers:
            continue
        found = form(kernel, s)
        band = bands.get((s.name,))
        if isinstance(found, GatherForm) and band is not None:
            kernel = gather_dma(kernel, band)
            notes[s.name] = (
                f"it gathers {found.rows * found.calls} rows of {found.row_bytes} "
                f"bytes from {found.table} through an indirect DMA"
            )
        else:
            why = found if isinstance(found, str) else "its loops are fused"
            notes[s.name] = (
                "it reads through a data-dependent index, on the scalar core "
                f"(no indirect DMA because {why})"
            )
    return kernel, notes


def annotate(kernel: Kernel, spec: Spec, choices) -> None:
    """Each opaque layer that is one gather marked ``@gather``: its predicted
    cycles (:func:`cycles`) in ``choices`` (``LayerChoice.extra_cycles``)."""
    marked = _marked(kernel)
    for lc in choices:
        stmts = lc.layer.stmts
        if len(stmts) == 1 and stmts[0].name in marked:
            found = form(kernel, stmts[0])
            if isinstance(found, GatherForm):
                on_chip = kernel.arrays[found.target].home != 0
                lc.extra_cycles = cycles(spec, found, on_chip)
                lc.note = (
                    f"indirect DMA: {found.rows * found.calls} rows of "
                    f"{found.row_bytes} bytes from {found.table} by {found.index} "
                    f"in {found.calls} call{'s' if found.calls > 1 else ''}"
                )


def _marked(kernel: Kernel) -> set[str]:
    """The statements of the ``@gather S3`` marks (read as text: a placed tree
    holds extension nodes)."""
    if not any(s.gathers for s in kernel.statements):
        return set()
    return {m.split()[1] for m in tree.marks(kernel.schedule) if m.startswith(MARK)}


def cycles(spec: Spec, f: GatherForm, on_chip: bool) -> float:
    """Predicted cycles of a statement's gathers into a home on chip
    (``on_chip``) or into DRAM: the simulator's charge, the calls spread over
    the channels the runtime gives them, in sequence on each, their latencies
    overlapping, and those running together sharing DRAM's bandwidth."""
    n = spec.dma.channels
    # pc__pick_channel: a transfer that writes DRAM takes the upper half of
    # the channels; one that only reads it any (no store waits in a gather's
    # layer of its own)
    channels = n if on_chip or n < 2 else n // 2
    together = min(channels, f.calls)
    rate = min(load_rate(spec), spec.dram.bytes_per_cycle / together)
    busy = (1 + f.rows) * spec.dma.setup_cycles + (
        f.rows * (f.idx_elem + f.row_bytes)
    ) / rate
    # a channel is free again once a call's data moved: the latencies of
    # consecutive calls overlap, the last one's shows
    return -(-f.calls // channels) * busy + 2 * spec.dram.latency_cycles


__all__ = ["MARK", "annotate", "cycles", "gather_dma", "mark_all"]
