"""A finished context read back into a :class:`~accelerator.sim.report.Report`.

The runtime leaves its results in C: ``pc_stats`` (cycles, busy time per engine,
bytes and energy per level), one ``pc_stmt_stat`` per scalar statement, and the
bounded array of ``pc_event``. This module turns them into the Report's plain
records; it reads the structs through cffi, so their layout is the header's, and
the numbers that index them (engine slots, event kinds, op classes) come from
:mod:`.abi`.
"""

from __future__ import annotations

import numpy as np

from accelerator.hardware.bound import EngineBound
from accelerator.hardware.roofline import Roofline
from accelerator.hardware.spec import OP_CLASSES, VECTOR_CLASSES
from accelerator.sim.abi import CLASS_INDEX, EVENT_KINDS, NAME_BYTES, engine_names
from accelerator.sim.report import EngineUse, LevelUse, Report, StatementUse, TraceEvent


def collect(
    sim,
    stats,
    *,
    kernel: str,
    roofline: Roofline | None,
    mode: str,
    checks,
    engine_bound: EngineBound | None = None,
):
    """Build a Report from a finished context (``pc_stats *``)."""
    spec = sim.spec
    ffi, lib = sim.ffi, sim.lib
    cycles = int(stats.cycles)
    names = engine_names(spec)
    engines = tuple(
        EngineUse(n, int(stats.busy[i]), cycles - int(stats.busy[i]), int(stats.ops[i]))
        for i, n in enumerate(names)
    )
    levels = tuple(
        LevelUse(
            m.name,
            m.kind,
            int(stats.bytes_read[i]),
            int(stats.bytes_written[i]),
            float(stats.energy_level[i]),
            int(stats.peak_sram[i]),
        )
        for i, m in enumerate(spec.memory)
    )
    energy = {
        "mac_array": float(stats.energy_mac),
        "vector": float(stats.energy_vector),
        "scalar": float(stats.energy_scalar),
    }
    for m in levels:
        energy[m.name] = m.energy_pj
    out = ffi.new("pc_stmt_stat *")
    n = lib.pc_stmt_stats(sim.ctx, 0, out)
    statements = []
    for i in range(n):
        lib.pc_stmt_stats(sim.ctx, i, out)
        k = int(out.instances)
        nlev = len(spec.memory)
        statements.append(
            StatementUse(
                ffi.string(out.name).decode(),
                k,
                int(out.cycles_per_instance),
                tuple(k * int(out.bytes_read[lv]) for lv in range(nlev)),
                tuple(k * int(out.bytes_written[lv]) for lv in range(nlev)),
                k * float(out.energy_pj),
            )
        )
    return Report(
        kernel=kernel,
        config=spec.name,
        clock_ghz=spec.clock_ghz,
        mode=mode,
        checks=checks,
        cycles=cycles,
        engines=engines,
        levels=levels,
        macs=int(stats.macs) if roofline is None else roofline.macs,
        mac_array_macs=int(stats.mac_array_macs),
        vector_ops={c: int(stats.vector_ops[CLASS_INDEX[c]]) for c in VECTOR_CLASSES},
        scalar_ops={c: int(stats.scalar_ops[CLASS_INDEX[c]]) for c in OP_CLASSES},
        scalar_instances=int(stats.scalar_instances),
        dma_transfers=int(stats.dma_transfers),
        dma_descriptors=int(stats.dma_descriptors),
        energy=energy,
        statements=tuple(statements),
        roofline=roofline,
        engine_bound=engine_bound,
        events=_events(sim, names),
        events_dropped=int(stats.events_dropped),
    )


def _events(sim, names: list[str]) -> tuple[TraceEvent, ...]:
    """The recorded events, read in one go through a numpy view of the C array."""
    ffi = sim.ffi
    count = ffi.new("int64_t *")
    ptr = sim.lib.pc_events(sim.ctx, count)
    n = int(count[0])
    if n == 0:
        return ()
    fields = ("start", "end", "engine", "kind", "src_level", "dst_level", "amount")
    types = ("<i8", "<i8", "<i4", "<i4", "<i4", "<i4", "<i8")
    dtype = np.dtype(
        {
            "names": [*fields, "label"],
            "formats": [*types, f"S{NAME_BYTES}"],
            "offsets": [ffi.offsetof("pc_event", f) for f in (*fields, "label")],
            "itemsize": ffi.sizeof("pc_event"),
        }
    )
    raw = np.frombuffer(ffi.buffer(ptr, n * ffi.sizeof("pc_event")), dtype=dtype)
    levels = [m.name for m in sim.spec.memory]
    out = []
    for e in raw.tolist():
        start, end, engine, kind, src, dst, amount, label = e
        out.append(
            TraceEvent(
                names[engine],
                EVENT_KINDS[kind],
                start,
                end,
                amount,
                levels[src] if src >= 0 else "",
                levels[dst] if dst >= 0 else "",
                label.split(b"\0", 1)[0].decode(errors="replace"),
            )
        )
    return tuple(out)
