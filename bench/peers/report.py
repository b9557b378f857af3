"""The tables of ``docs/fidelity.md``, rendered from ``bench/results/fidelity.json``.

``python -m bench.results_md`` and ``python -m bench.fidelity --report`` call these
(the sections are listed in :data:`bench.results_md.SECTIONS`). A peer's cell shows
its cycles and how far they are from polyc's simulated cycles; a difference above
:data:`EXPLAIN` is marked, and the prose of docs/fidelity.md explains each one.
"""

from __future__ import annotations

#: differences above this fraction of polyc's cycles are marked for explanation
EXPLAIN = 0.10
PEERS = {"zigzag": "ZigZag", "stream": "Stream", "scalesim": "SCALE-Sim"}
DATAFLOW_NAMES = {"ws": "weight stat.", "os": "output stat.", "is": "input stat."}


def _n(v) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def _record(data: dict, tool: str, layer: str) -> dict:
    return data.get("results", {}).get(tool, {}).get(layer, {})


def _estimate(tool: str, rec: dict) -> int | None:
    """A peer's whole-layer estimate (SCALE-Sim's only when it ran with DRAM)."""
    if "error" in rec:
        return None
    if tool == "scalesim":
        return rec.get("cycles") if rec.get("source") == "run" else None
    return rec.get("cycles")


def differences(data: dict) -> list[tuple[str, str, float]]:
    """(layer, peer, peer / polyc - 1) for every estimate more than
    :data:`EXPLAIN` away from polyc's simulated cycles."""
    out = []
    for lay in data.get("layers", []):
        ours = _record(data, "polyc", lay["name"]).get("cycles")
        for tool in PEERS:
            theirs = _estimate(tool, _record(data, tool, lay["name"]))
            if ours and theirs:
                d = theirs / ours - 1
                if abs(d) > EXPLAIN:
                    out.append((lay["name"], tool, d))
    return out


def render_table(data: dict) -> str:
    """The HW-A table: polyc's simulated and predicted cycles beside each peer's
    estimate and the roofline, one row per layer."""
    head = (
        "| layer | roofline | polyc simulated | polyc predicted / simulated | ZigZag "
        "| Stream | SCALE-Sim (DRAM 11/11/10) | SCALE-Sim compute only "
        "| polyc / best peer |"
    )
    lines = [head, "|" + "---|" * 9]
    for lay in data.get("layers", []):
        name = lay["name"]
        ours = _record(data, "polyc", name)
        cycles = ours.get("cycles")
        cells = [f"{name} ({lay['what']})", _n(lay["roofline"])]
        if cycles:
            cells += [_n(cycles), f"{ours['predicted_cycles'] / cycles:.2f}"]
        else:
            cells += ["not run" if not ours else "fails (see below)", "-"]
        estimates = []
        for tool in PEERS:
            rec = _record(data, tool, name)
            est = _estimate(tool, rec)
            if est is None:
                cells.append("error" if "error" in rec else "-")
                continue
            estimates.append(est)
            mark = ""
            if cycles:
                d = est / cycles - 1
                pct = f"{d:+.1%}" if round(d, 3) else "0.0%"
                mark = f" ({pct}){' †' if abs(d) > EXPLAIN else ''}"
            cells.append(_n(est) + mark)
        ss = _record(data, "scalesim", name)
        compute = ss.get("compute_cycles")
        src = " (formula)" if ss.get("source") == "formula" else ""
        cells.append(_n(compute) + src if compute else "-")
        best = min(estimates) if estimates else None
        cells.append(f"{cycles / best:.2f}" if cycles and best else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_runtime(data: dict) -> str:
    """Seconds each tool took per layer (polyc: compile + simulate; a peer: its
    own call, then its whole process with imports in parentheses)."""
    lines = ["| layer | polyc | ZigZag | Stream | SCALE-Sim |", "|---|---|---|---|---|"]
    for lay in data.get("layers", []):
        name = lay["name"]
        cells = [name]
        for tool in ("polyc", *PEERS):
            rec = _record(data, tool, name)
            if "wall_s" not in rec:
                cells.append("formula" if rec.get("source") == "formula" else "-")
                continue
            extra = f" ({rec['process_s']:.1f})" if "process_s" in rec else ""
            cells.append(f"{rec['wall_s']:.1f}{extra}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_breakdown(data: dict) -> str:
    """Where each tool's cycles go, per layer (the terms each model adds up)."""
    lines = [
        "| layer | polyc: MAC busy / DMA busy / DRAM bytes | ZigZag: temporal + stall "
        "+ onload + offload + drain (spatial util.) | Stream: tiles x per tile - "
        "overlaps + fill | SCALE-Sim: compute + stall (incl. prefetch); DRAM bytes "
        "written |",
        "|---|---|---|---|---|",
    ]
    for lay in data.get("layers", []):
        name = lay["name"]
        p = _record(data, "polyc", name)
        z = _record(data, "zigzag", name).get("breakdown", {})
        s = _record(data, "stream", name).get("breakdown", {})
        c = _record(data, "scalesim", name)
        cells = [name]
        cells.append(
            f"{_n(p['mac_busy'])} / {_n(p['dma_busy'])} / {_n(p['dram_bytes'])}"
            if "cycles" in p
            else "-"
        )
        cells.append(
            f"{_n(z['ideal_temporal_cycle'])} + {_n(z['stall_slack_comb'])} + "
            f"{_n(z['data_onloading_cycle'])} + {_n(z['data_offloading_cycle'])} + "
            f"{_n(z['systolic_drain_cycle'])} ({z['mac_spatial_utilization']:.2f})"
            if z
            else "-"
        )
        cells.append(_stream(s) if s else "-")
        cells.append(
            f"{_n(c['compute_cycles'])} + {_n(c['stall_cycles'])} "
            f"({_n(c['incl_prefetch'])}); {_n(c.get('dram_writes'))}"
            if c.get("source") == "run"
            else "-"
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _stream(s: dict) -> str:
    """Stream's decomposition ``n x P - (n - 1) x O + F``, with the tile count
    ``n`` solved from its total."""
    total, p, o, f = (
        s.get(k)
        for k in ("total", "per_iteration", "overlap_between_iterations", "fill")
    )
    if not all(isinstance(v, int) for v in (total, p, o, f)) or p == o:
        return "-"
    n = (total - f - o) // (p - o)
    return f"{n} x {p:,} - {n - 1} x {o:,} + {f:,}"


def render_compute(data: dict) -> str:
    """Compute only (operands on chip, one MAC call): SCALE-Sim's cycles beside
    polyc's MAC-array busy cycles for the same dataflow, with the stationary
    register single buffered (SCALE-Sim's model: folds do not overlap) and double
    buffered (HW-A as shipped)."""
    head = "| case (M x N x K) | dataflow | SCALE-Sim | polyc, folds in series "
    head += "| polyc, HW-A (double-buffered) |"
    lines = [head, "|---|---|---|---|---|"]
    for row in data.get("compute_only", []):
        case = f"{row['case']} ({row['m']} x {row['n']} x {row['k']})"
        for df, what in DATAFLOW_NAMES.items():
            e = row[df]
            formula = e["scalesim_formula"]
            run = e.get("scalesim_run")
            ss = _n(formula)
            if run is not None:
                ss += " (run: same)" if run == formula else f" (run: {run:,})"
            cells = [case, what, ss]
            for key in ("polyc_no_overlap", "polyc"):
                ours = e.get(key, {}).get("cycles")
                cells.append(f"{ours:,} ({ours - formula:+,})" if ours else "-")
            lines.append("| " + " | ".join(cells) + " |")
            case = ""
    return "\n".join(lines)


def render_errors(data: dict) -> str:
    """Every run that failed, with its message (polyc's first)."""
    lines = []
    for tool in ("polyc", *PEERS):
        for name, rec in data.get("results", {}).get(tool, {}).items():
            if "error" in rec:
                first = rec["error"].strip().splitlines()[0]
                lines.append(f"- {PEERS.get(tool, tool)} on {name}: {first}")
    return "\n".join(lines) or "none"
