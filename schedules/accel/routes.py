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
from schedules.accel.placement import copy_rates, worth_cutting


@dataclass(frozen=True)
class Route:
    """The DMA path between two memory levels (the simulator's rules): the slower
    end's ``latency``, a channel's ``rate`` (at most the SRAM ends' bandwidth),
    the bandwidth a copy ``wants`` (the slower end's), and ``split``, the calls a
    large copy is cut into so that that many channels together reach it."""

    latency: int | np.ndarray
    rate: float | np.ndarray
    want: float | np.ndarray
    split: int | np.ndarray

    @classmethod
    def between(cls, spec: Spec, a: MemoryLevel | None, b: MemoryLevel | None):
        """The route from ``a`` to ``b`` (a placeholder when either is absent)."""
        if a is None or b is None:
            return cls(0, 1.0, 1.0, 1)
        rate, want, split = copy_rates(spec, a, b)
        return cls(max(a.latency_cycles, b.latency_cycles), rate, want, split)

    def where(self, use: np.ndarray, other: Route) -> Route:
        """Per candidate, this route where ``use`` holds, else ``other``."""
        return Route(
            np.where(use, self.latency, other.latency),
            np.where(use, self.rate, other.rate),
            np.where(use, self.want, other.want),
            np.where(use, self.split, other.split),
        )

    def copy(self, nbytes, desc, setup: int, phases: int = 1) -> Transfer:
        """One copy of ``nbytes`` in ``desc`` descriptors on this route: cut into
        ``split`` calls on as many channels where that pays
        (:func:`~schedules.accel.placement.worth_cutting`, as placement cuts it),
        and each of a buffer's ``phases`` is a copy of its own."""
        cut = worth_cutting(nbytes, self.split, self.rate, self.want, setup)
        calls = np.where(cut, self.split, 1) * phases
        start = desc * setup + self.latency
        return Transfer(
            calls,
            desc * setup + nbytes / calls / self.rate,
            start + nbytes / np.minimum(calls * self.rate, self.want),
            start,
            self.latency,
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
