"""What one simulated run cost: cycles, engines, traffic, energy, roofline, trace.

``print(report)`` is a readable table; ``report.to_dict()`` is plain JSON-able data;
``report.write_trace(path)`` writes Chrome trace-event JSON that Perfetto
(ui.perfetto.dev) and chrome://tracing load: one track per engine, one slice per
operation.

The records here are plain values; :mod:`.readout` fills them from a finished
context, and this module imports nothing of the driver.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from accelerator.hardware.bound import ENGINES, EngineBound
from accelerator.hardware.roofline import Roofline
from accelerator.sim.trace import render_table, trace_events


@dataclass(frozen=True)
class EngineUse:
    name: str
    busy: int
    idle: int
    ops: int

    @property
    def utilization(self) -> float:
        total = self.busy + self.idle
        return self.busy / total if total else 0.0


@dataclass(frozen=True)
class LevelUse:
    name: str
    kind: str
    bytes_read: int
    bytes_written: int
    energy_pj: float
    peak_bytes: int


@dataclass(frozen=True)
class StatementUse:
    """What the scalar core spent on one statement; ``bytes_read``/``bytes_written``
    (per memory level, like ``Report.levels``) and ``energy_pj`` are totals over its
    instances."""

    name: str
    instances: int
    cycles_per_instance: int
    bytes_read: tuple[int, ...] = ()
    bytes_written: tuple[int, ...] = ()
    energy_pj: float = 0.0

    @property
    def cycles(self) -> int:
        return self.instances * self.cycles_per_instance


class TraceEvent(NamedTuple):
    engine: str
    kind: str
    start: int
    end: int
    amount: int
    src: str
    dst: str
    label: str


@dataclass(frozen=True)
class Report:
    """The cost of one run (all cycle counts are integers, all energies pJ).

    ``macs`` are the useful multiply-accumulates: the instances of the kernel's
    ``T += x * y`` statements (what the roofline counts), whichever engine ran
    them; ``mac_array_macs`` is what the MAC array executed, which includes the
    multiplies by padding of a tile's rectangular hull (a padded convolution's
    taps outside the input). Without a roofline (a :class:`Simulator` driven by
    hand) ``macs`` is what the engines executed. ``LevelUse.peak_bytes`` is the
    most bytes of buffers live at once in the level."""

    kernel: str
    config: str
    clock_ghz: float
    mode: str
    checks: bool
    cycles: int
    engines: tuple[EngineUse, ...]
    levels: tuple[LevelUse, ...]
    macs: int
    mac_array_macs: int
    vector_ops: dict[str, int]
    scalar_ops: dict[str, int]
    scalar_instances: int
    dma_transfers: int
    dma_descriptors: int
    energy: dict[str, float]
    statements: tuple[StatementUse, ...] = ()
    roofline: Roofline | None = None
    #: the engine bound (accelerator.hardware.bound): every engine that can run a
    #: statement's work counted at its best rate, and DRAM
    engine_bound: EngineBound | None = None
    events: tuple[TraceEvent, ...] = field(default=(), repr=False)
    events_dropped: int = 0
    #: where the compiled program does less than the hardware allows (layers run
    #: DRAM-direct, fused less, statements on the scalar core), each with its reason
    #: and fix; filled by ``polyc.compile``'s ``Compiled.run``
    fallbacks: tuple[str, ...] = ()

    # the public numbers ----------------------------------------------------------
    @property
    def dram_bytes(self) -> int:
        """Bytes read from plus written to DRAM."""
        d = self.levels[0]
        return d.bytes_read + d.bytes_written

    @property
    def energy_pj(self) -> float:
        return float(sum(self.energy.values()))

    @property
    def roofline_cycles(self) -> int | None:
        return self.roofline.cycles if self.roofline else None

    @property
    def ratio(self) -> float | None:
        """Simulated cycles over the roofline bound (1.0 is the bound itself)."""
        return self.cycles / self.roofline.cycles if self.roofline else None

    @property
    def engine_bound_cycles(self) -> int | None:
        return self.engine_bound.cycles if self.engine_bound else None

    @property
    def engine_ratio(self) -> float | None:
        """Simulated cycles over the engine bound: the ratio the scheduler is
        judged by (1.0 is the bound itself)."""
        eb = self.engine_bound
        return self.cycles / eb.cycles if eb else None

    @property
    def time_us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    @property
    def mac_utilization(self) -> float | None:
        """Useful MACs over what the MAC array could do in ``cycles`` at its peak:
        the roofline's compute cycles over the run's (per dtype, each at its own
        peak), so at most 1 whenever the run respects its bound. Padding the array
        executed (``mac_array_macs - macs``) does not count."""
        if not self.roofline or not self.cycles:
            return None
        return self.roofline.compute_cycles / self.cycles

    def engine(self, name: str) -> EngineUse:
        for e in self.engines:
            if e.name == name:
                return e
        raise KeyError(name)

    def level(self, name: str) -> LevelUse:
        for m in self.levels:
            if m.name == name:
                return m
        raise KeyError(name)

    # forms -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """Plain data (JSON-able): every number of the report, no trace events."""
        r, eb = self.roofline, self.engine_bound
        return {
            "kernel": self.kernel,
            "config": self.config,
            "clock_ghz": self.clock_ghz,
            "mode": self.mode,
            "checks": self.checks,
            "fallbacks": list(self.fallbacks),
            "cycles": self.cycles,
            "time_us": self.time_us,
            "roofline_cycles": self.roofline_cycles,
            "ratio": self.ratio,
            "roofline": None
            if r is None
            else {
                "bound": r.bound,
                "macs": r.macs,
                "compute_cycles": r.compute_cycles,
                "peak_macs_per_cycle": r.peak_macs_per_cycle,
                "min_dram_bytes": r.min_dram_bytes,
                "memory_cycles": r.memory_cycles,
            },
            "engine_bound_cycles": self.engine_bound_cycles,
            "engine_ratio": self.engine_ratio,
            "engine_bound": None if self.engine_bound is None else _bound_dict(eb),
            "min_dram_bytes": r.min_dram_bytes if r else None,
            "dram_bytes": self.dram_bytes,
            "macs": self.macs,
            "mac_array_macs": self.mac_array_macs,
            "mac_utilization": self.mac_utilization,
            "vector_ops": dict(self.vector_ops),
            "scalar_ops": dict(self.scalar_ops),
            "scalar_instances": self.scalar_instances,
            "dma_transfers": self.dma_transfers,
            "dma_descriptors": self.dma_descriptors,
            "energy_pj": self.energy_pj,
            "energy": dict(self.energy),
            "engines": {
                e.name: {"busy": e.busy, "idle": e.idle, "ops": e.ops}
                for e in self.engines
            },
            "levels": {
                m.name: {
                    "bytes_read": m.bytes_read,
                    "bytes_written": m.bytes_written,
                    "energy_pj": m.energy_pj,
                    "peak_bytes": m.peak_bytes,
                }
                for m in self.levels
            },
            "statements": {
                s.name: {
                    "instances": s.instances,
                    "cycles_per_instance": s.cycles_per_instance,
                    "bytes_read": list(s.bytes_read),
                    "bytes_written": list(s.bytes_written),
                    "energy_pj": s.energy_pj,
                }
                for s in self.statements
            },
            "trace_events": len(self.events),
            "trace_events_dropped": self.events_dropped,
        }

    def trace(self, names=None) -> dict:
        """The run as Chrome trace-event JSON data (timestamps in microseconds);
        ``names``: one name per event (a model's layer; see
        :func:`accelerator.sim.trace.trace_events`)."""
        return trace_events(self, names)

    def write_trace(self, path: str | Path, names=None) -> Path:
        """Write the trace (see :meth:`trace`) to ``path``; returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.trace(names), separators=(",", ":")))
        return path

    def __str__(self) -> str:
        return render_table(self)


def _bound_dict(eb: EngineBound) -> dict:
    return {
        "bound": eb.bound,
        "compute_cycles": eb.compute_cycles,
        "memory_cycles": eb.memory_cycles,
        "weights": dict(zip(ENGINES, eb.weights)),
    }
