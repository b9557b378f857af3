"""The routes of the cost model's copies: between which memory levels a copy
runs, at what rate per channel, what bandwidth it wants and into how many calls
it is cut (:func:`schedules.accel.placement.copy_rates` and
:func:`~schedules.accel.placement.worth_cutting`, the rules placement cuts the
copies by), and the time of one copy on a route (:class:`Transfer`). Every
value is a number or a numpy array over the candidates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelerator.hardware.spec import MemoryLevel, Spec
from schedules.accel.placement import copy_rates, free_rates, worth_cutting


@dataclass(frozen=True)
class Route:
    """The DMA path between two memory levels (the simulator's rules): the slower
    end's ``latency``, a channel's ``rate`` (at most the SRAM ends' bandwidth),
    the bandwidth a copy ``wants`` (the slower end's), and ``split``, the calls a
    large copy is cut into so that that many channels together reach it.
    ``rate`` and ``want`` are those of a copy within one bank of a banked end
    (:func:`~schedules.accel.placement.copy_rates`, which placement cuts the
    copies by); ``banks`` holds each banked end's bytes per cycle and bytes
    per bank, and ``free`` the channel's rate and the bandwidth wanted without
    the banks: a copy over several banks moves at the banks' it covers
    (:meth:`copy`)."""

    latency: int | np.ndarray
    rate: float | np.ndarray
    want: float | np.ndarray
    split: int | np.ndarray
    banks: tuple[tuple[float, float], ...] = ()
    free: tuple[float, float] | None = None

    @classmethod
    def between(cls, spec: Spec, a: MemoryLevel | None, b: MemoryLevel | None):
        """The route from ``a`` to ``b`` (a placeholder when either is absent)."""
        if a is None or b is None:
            return cls(0, 1.0, 1.0, 1)
        rate, want, split = copy_rates(spec, a, b)
        banks = tuple(
            (m.bytes_per_cycle / m.banks, m.capacity_bytes / m.banks)
            for m in (a, b)
            if m.kind == "sram" and m.banks > 1
        )
        free = free_rates(spec, a, b)
        latency = max(a.latency_cycles, b.latency_cycles)
        return cls(latency, rate, want, split, banks, free)

    def where(self, use: np.ndarray, other: Route) -> Either:
        """Per candidate, this route where ``use`` holds, else ``other``."""
        return Either(use, self, other)

    def copy(self, nbytes, desc, setup: int, phases: int = 1) -> Transfer:
        """One copy of ``nbytes`` in ``desc`` descriptors on this route: cut into
        ``split`` calls on as many channels where that pays
        (:func:`~schedules.accel.placement.worth_cutting`, as placement cuts it),
        and each of a buffer's ``phases`` is a copy of its own."""
        cut = worth_cutting(nbytes, self.split, self.rate, self.want, setup)
        calls = np.where(cut, self.split, 1) * phases
        rate, want = self.rates(nbytes, calls)
        start = desc * setup + self.latency
        return Transfer(
            calls,
            desc * setup + nbytes / calls / rate,
            start + nbytes / np.minimum(calls * rate, want),
            start,
            self.latency,
        )

    def rates(self, nbytes, calls):
        """A call's bytes per cycle and the bandwidth the copy wants, for a
        copy of ``nbytes`` in ``calls`` calls. A banked end's banks are
        block-partitioned and the simulator shares each among the bytes in
        it: a call whose bytes cover ``k`` banks moves at ``k`` banks' rate (up
        to the level's and the channel's), not one bank's (fuzz seed 964 case
        321: a 480-byte tile into 64-byte banks of an eighth of a byte per
        cycle each, 528 cycles a copy, predicted 3,856)."""
        if self.free is None or not self.banks:
            return self.rate, self.want
        rate, want = self.free
        for per_cycle, size in self.banks:
            rate = np.minimum(rate, per_cycle * np.maximum(1.0, nbytes / calls / size))
            want = np.minimum(want, per_cycle * np.maximum(1.0, nbytes / size))
        return rate, want


@dataclass(frozen=True)
class Either:
    """Per candidate, route ``a`` where ``use`` holds, else ``b``."""

    use: np.ndarray
    a: Route
    b: Route

    def copy(self, nbytes, desc, setup: int, phases: int = 1) -> Transfer:
        """:meth:`Route.copy` on each candidate's route."""
        if not self.use.any():
            return self.b.copy(nbytes, desc, setup, phases)
        one = self.a.copy(nbytes, desc, setup, phases)
        two = self.b.copy(nbytes, desc, setup, phases)
        return Transfer(
            *(
                np.where(self.use, getattr(one, f), getattr(two, f))
                for f in ("calls", "per_call", "alone", "fixed", "latency")
            )
        )


@dataclass(frozen=True)
class Transfer:
    """The calls of one copy, each call's channel time (set-up and data: the
    channel issues the next call's requests while this one's are in flight),
    and the copy's time when it runs alone (its calls in parallel, up to the
    bandwidth it wants, then the latency)."""

    calls: np.ndarray
    per_call: np.ndarray
    alone: np.ndarray
    fixed: np.ndarray  # set-up and latency: what moves no bytes
    latency: int | np.ndarray = 0


@dataclass(frozen=True)
class Routes:
    """The routes a buffer's copies take: ``direct`` DRAM -> engines' level;
    with staging, ``staging`` DRAM -> the level above, ``upper`` from there."""

    direct: Route
    staging: Route
    upper: Route

    def home(self) -> Routes:
        """The routes of copies between an array's home in the level above
        (``upper``, at one bank's bandwidth) and the engines' level."""
        return Routes(self.upper, self.upper, self.upper)

    @classmethod
    def of(cls, spec: Spec, upper: MemoryLevel | None, level: MemoryLevel):
        return cls(
            Route.between(spec, spec.dram, level),
            Route.between(spec, spec.dram, upper),
            Route.between(spec, upper, level),
        )
