"""Forms of a Report: Chrome trace-event JSON and the readable table.

Trace-event format: a JSON object with ``traceEvents``, a list of events. Metadata
events (``"ph": "M"``) name the process (the run) and one thread per engine;
complete events (``"ph": "X"``) are operations with ``ts`` and ``dur`` in
microseconds. The simulator's cycle counts are in ``args`` so nothing is lost to
rounding.

This module only reads a Report's fields: :mod:`.report` imports it (for
``Report.trace`` and ``str(report)``), never the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from accelerator.sim.report import Report

PID = 1


def trace_events(report: Report, names=None) -> dict:
    """Trace-event JSON data for ``report`` (see the module docstring).

    ``names``: one name per event of ``report.events`` (a model's layer, say; None
    keeps an event's own label). A named event keeps its label, the statement or
    copy it came from, as the argument ``label``.
    """
    us_per_cycle = 1.0 / (report.clock_ghz * 1e3)
    events: list[dict] = [
        {
            "ph": "M",
            "pid": PID,
            "tid": 0,
            "name": "process_name",
            "args": {"name": f"polyc {report.kernel} on {report.config}"},
        }
    ]
    for tid, e in enumerate(report.engines):
        events.append(
            {
                "ph": "M",
                "pid": PID,
                "tid": tid,
                "name": "thread_name",
                "args": {"name": e.name},
            }
        )
        events.append(
            {
                "ph": "M",
                "pid": PID,
                "tid": tid,
                "name": "thread_sort_index",
                "args": {"sort_index": tid},
            }
        )
    tids = {e.name: i for i, e in enumerate(report.engines)}
    for n, ev in enumerate(report.events):
        args = {"start_cycle": ev.start, "end_cycle": ev.end}
        name = names[n] if names is not None and names[n] else None
        if name is not None:
            args["label"] = ev.label
        if ev.kind == "dma":
            args.update(bytes=ev.amount, src=ev.src, dst=ev.dst)
        elif ev.kind == "mac":
            args["macs"] = ev.amount
        elif ev.kind == "vector":
            args["elements"] = ev.amount
        elif ev.kind == "scalar":
            args["instances"] = ev.amount
        events.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": tids[ev.engine],
                "name": name or ev.label or ev.kind,
                "cat": ev.kind,
                "ts": ev.start * us_per_cycle,
                "dur": (ev.end - ev.start) * us_per_cycle,
                "args": args,
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "kernel": report.kernel,
            "config": report.config,
            "cycles": report.cycles,
            "roofline_cycles": report.roofline_cycles,
            "engine_bound_cycles": report.engine_bound_cycles,
            "events_dropped": report.events_dropped,
        },
    }


def _n(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1 or x == 0 else f"{x:.3g}"


def _energy(pj: float) -> str:
    for unit, div in (("J", 1e12), ("mJ", 1e9), ("uJ", 1e6), ("nJ", 1e3)):
        if pj >= div:
            return f"{pj / div:.3g} {unit}"
    return f"{pj:.3g} pJ"


def render_table(r: Report) -> str:
    """The report as aligned text."""
    lines = [
        f"polyc report: {r.kernel} on {r.config} ({r.clock_ghz:g} GHz), "
        f"{r.mode or 'runtime'}, checks {'on' if r.checks else 'off'}",
        f"  cycles         {_n(r.cycles):>16}   ({r.time_us:,.3f} us)",
    ]
    if r.fallbacks:
        lines.append(f"  fallbacks ({len(r.fallbacks)}):")
        lines += [f"    {n}" for n in r.fallbacks]
    if r.roofline:
        rf = r.roofline
        lines += [
            f"  roofline       {_n(rf.cycles):>16}   {rf.bound}-bound: "
            f"{_n(rf.macs)} MACs / {rf.peak_macs_per_cycle:g} per cycle = "
            f"{_n(rf.compute_cycles)}; {_n(rf.min_dram_bytes)} B / "
            f"{rf.dram_bytes_per_cycle:g} B/cycle = {_n(rf.memory_cycles)}",
            f"  ratio          {r.ratio:>16,.2f}x",
        ]
    if r.engine_bound:
        eb = r.engine_bound
        lines += [
            f"  engine bound   {_n(eb.cycles):>16}   {eb.bound}-bound: each "
            f"statement on the engines that can run it, {_n(eb.compute_cycles)}; "
            f"DRAM {_n(eb.memory_cycles)}",
            f"  engine ratio   {r.engine_ratio:>16,.2f}x",
        ]
    util = r.mac_utilization
    lines += [
        f"  MACs           {_n(r.macs):>16}   useful"
        + ("" if util is None else f", {util:.1%} of peak")
        + f"; the MAC array executed {_n(r.mac_array_macs)}"
        + (" (padding included)" if r.mac_array_macs > r.macs else ""),
        f"  DRAM bytes     {_n(r.dram_bytes):>16}"
        + (f"   (unavoidable {_n(r.roofline.min_dram_bytes)})" if r.roofline else ""),
        f"  energy         {_energy(r.energy_pj):>16}   "
        + ", ".join(f"{k} {_energy(v)}" for k, v in r.energy.items() if v),
        "",
        f"  {'engine':<10} {'busy':>14} {'idle':>14} {'busy %':>7} {'ops':>12}",
    ]
    for e in r.engines:
        lines.append(
            f"  {e.name:<10} {_n(e.busy):>14} {_n(e.idle):>14} "
            f"{e.utilization:>7.1%} {_n(e.ops):>12}"
        )
    lines += [
        "",
        f"  {'level':<10} {'read B':>14} {'written B':>14} {'peak live B':>12}",
    ]
    for m in r.levels:
        peak = "" if m.kind == "dram" else _n(m.peak_bytes)
        lines.append(
            f"  {m.name:<10} {_n(m.bytes_read):>14} {_n(m.bytes_written):>14} "
            f"{peak:>12}"
        )
    scalar = [s for s in r.statements if s.instances]
    if scalar:
        lines += ["", "  scalar statements (instances x cycles each):"]
        for s in scalar:
            lines.append(
                f"    {s.name:<12} {_n(s.instances):>14} x {s.cycles_per_instance}"
            )
    elif r.statements:
        lines += ["", "  scalar statements: none ran on the scalar core"]
    lines.append(
        f"\n  trace: {len(r.events)} events"
        + (
            f" ({r.events_dropped} dropped: raise trace_limit)"
            if r.events_dropped
            else ""
        )
    )
    return "\n".join(lines)
