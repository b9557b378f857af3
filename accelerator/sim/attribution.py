"""Who spent what in a run: a placed run's engine work divided among groups of
statements (the layers of an imported model, say).

A DRAM-direct run charges every statement instance to its statement
(:class:`accelerator.sim.report.StatementUse`). A placed run mostly issues engine
operations (MAC tiles, vector ops, DMA copies), which the runtime records as trace
events labelled with their statement (``S3``, ``S3 reduce``) or, for a copy, with its
array and direction (``A in``, ``C out``). This module reads those events:

- a compute event belongs to its statement's group; so does an indirect (gather)
  DMA, labelled with its statement (``S0: W rows by idx``): it is the gathering
  statement's whole work; a copy-in, and the zero fill of a halo before one, to
  the group of the next compute event (the data is fetched for it), a copy-out or
  a wait to the group of the compute or gather event before it;
- **cycles**: the run's timeline is cut at every event boundary; an instant when k
  groups have an operation in flight counts 1/k to each (a wait is not an
  operation: the stalled scalar core does no group's work), an instant when none has
  counts to the group whose operation starts next (it is waiting for it), the tail
  to the last group. The shares add up to the run's cycles;
- **DRAM bytes**: the copies whose source or destination is DRAM;
- **energy**: each of the report's energy terms (MAC array, vector unit, each
  memory level) is shared in proportion to the group's MACs, vector elements and
  copied bytes touching that level; scalar energy is the statements' own.

Events beyond the run's trace limit are dropped by the runtime; then only the
recorded stretch of the run is divided (cycles and bytes up to the last recorded
event, no engine energy), ``Attribution.complete`` is False, and a caller shows the
rest apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COMPUTE = ("mac", "vector", "scalar")


@dataclass(frozen=True)
class Share:
    """One group's part of a run."""

    cycles: int
    dram_bytes: int
    energy_pj: float


@dataclass(frozen=True)
class Attribution:
    shares: dict[str, Share]
    complete: bool


def attribute(report, groups: dict[str, list[str]]) -> Attribution:
    """Divide ``report``'s cycles, DRAM bytes and energy among ``groups`` (group name
    -> statement names) from its trace events and per-statement costs."""
    names = list(groups)
    group_of = {s: n for n, g in enumerate(names) for s in groups[g]}
    events = report.events
    complete = report.events_dropped == 0
    owner = _owners(events, group_of)
    # with dropped events, only the recorded stretch of the run is divided
    span = report.cycles if complete else max((e.end for e in events), default=0)
    cycles = _timeline(events, owner, len(names), span)
    dram_level = report.levels[0].name
    dram = np.zeros(len(names), np.int64)
    activity: dict[str, np.ndarray] = {}
    for e, g in zip(events, owner):
        if g < 0:
            continue
        if e.kind == "dma":
            if dram_level in (e.src, e.dst):
                dram[g] += e.amount
            for level in {e.src, e.dst}:
                activity.setdefault(level, np.zeros(len(names)))[g] += e.amount
        elif e.kind == "mac":
            activity.setdefault("mac_array", np.zeros(len(names)))[g] += e.amount
        elif e.kind == "vector":
            activity.setdefault("vector", np.zeros(len(names)))[g] += e.amount
    energy = np.zeros(len(names))
    per_statement = {u.name: u for u in report.statements}
    for s, g in group_of.items():  # statements run on the scalar core
        use = per_statement.get(s)
        if use is not None:
            energy[g] += use.energy_pj
            if use.bytes_read:
                dram[g] += use.bytes_read[0] + use.bytes_written[0]
    for term, total in report.energy.items():
        weights = activity.get(term)
        if term == "scalar" or weights is None or not weights.sum() or not complete:
            continue
        energy += total * weights / weights.sum()
    shares = {
        g: Share(int(cycles[n]), int(dram[n]), float(energy[n]))
        for n, g in enumerate(names)
    }
    return Attribution(shares, complete)


def owners(events, group_of: dict[str, int]) -> list[int]:
    """The group index of every event (-1: no group): a compute event's statement's,
    a copy-in's the next compute event's, a copy-out's or a wait's the one before
    (see the module docstring); ``group_of`` maps statements to group indices."""
    return _owners(events, group_of)


def _owners(events, group_of: dict[str, int]) -> list[int]:
    """The group index of every event (-1: no group); ``group_of`` maps statements
    to group indices."""
    owner = [-1] * len(events)
    last = -1
    pending: list[int] = []  # copies-in waiting for the compute they feed
    for n, e in enumerate(events):
        if e.kind in COMPUTE:
            g = group_of.get(e.label.split(" ")[0], -1)
            for p in pending:
                owner[p] = g
            pending.clear()
            owner[n] = last = g
        elif e.kind == "dma" and (g := _gathering(e.label, group_of)) is not None:
            # the copies-in before it feed the compute after it: still pending
            owner[n] = last = g
        elif e.kind == "dma" and _feeds_next(e.label):
            pending.append(n)
        else:  # copy-out, waits
            owner[n] = last
    for p in pending:  # copies-in after the last compute
        owner[p] = last
    return owner


def _gathering(label: str, group_of: dict[str, int]) -> int | None:
    """The group of the statement an indirect DMA runs (``S0: W rows by idx``,
    codegen.accel.gathercall), or None for any other copy."""
    head = label.split(" ", 1)[0]
    if not head.endswith(":"):
        return None
    return group_of.get(head[:-1])


def _feeds_next(label: str) -> bool:
    """A copy into on-chip memory for the compute that follows: a load (``A in``)
    or the zero fill of a halo before one (``zero A``)."""
    return label.endswith(" in") or label.startswith("zero ")


def _timeline(events, owner: list[int], n_groups: int, total: int) -> np.ndarray:
    """Cycles per group: in-flight time split among the groups in flight, idle time
    to the group that starts next (the tail to the last one), integers that add up
    to ``total``.

    A wait is no work: the scalar core stalls while the engines run what it issued
    (often a later group's commands, issued ahead), so a wait is never in flight;
    counting it would take time from the group the engines are working for."""
    out = np.zeros(n_groups)
    mine = [
        (e.start, e.end, g)
        for e, g in zip(events, owner)
        if g >= 0 and e.kind != "wait"
    ]
    if not mine or not n_groups:
        return out.astype(np.int64)
    starts = np.array([m[0] for m in mine], np.int64)
    ends = np.array([m[1] for m in mine], np.int64)
    groups = np.array([m[2] for m in mine], np.int64)
    cuts = np.unique(np.concatenate([[0, total], starts, ends]))
    cuts = cuts[(cuts >= 0) & (cuts <= total)]
    lengths = np.diff(cuts).astype(float)
    # in flight: +1 at the segment where an operation starts, -1 where it ends
    flight = np.zeros((n_groups, len(cuts)), np.int64)
    np.add.at(flight, (groups, np.searchsorted(cuts, starts)), 1)
    np.add.at(flight, (groups, np.searchsorted(cuts, ends)), -1)
    active = (np.cumsum(flight, axis=1)[:, :-1] > 0).astype(float)
    count = active.sum(axis=0)
    busy = count > 0
    out += (active[:, busy] / count[busy]) @ lengths[busy]
    # idle segments: the group whose operation starts next (the last one at the tail)
    idle = np.flatnonzero(~busy)
    if len(idle):
        order = np.argsort(starts, kind="stable")
        first_at = np.searchsorted(starts[order], cuts[idle + 1], side="left")
        first_at = np.minimum(first_at, len(order) - 1)
        np.add.at(out, groups[order[first_at]], lengths[idle])
    return _round(out, total)


def _round(values: np.ndarray, total: int) -> np.ndarray:
    """Integers that add up to ``total`` (largest remainders get the rest)."""
    floor = np.floor(values).astype(np.int64)
    rest = int(total - floor.sum())
    if rest > 0:
        floor[np.argsort(floor - values)[:rest]] += 1
    return floor
