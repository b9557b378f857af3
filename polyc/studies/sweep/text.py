"""The text table of a sweep: one line per point, the failures, and per config and
schedule the geometric mean of simulated cycles over the engine bound (what the
scheduler is judged by) and over the roofline bound."""

from __future__ import annotations

import math

_MAX_LABEL = 44


def _int(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:,.2f}x"


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def energy_text(pj) -> str:
    """An energy in pJ with a readable unit."""
    if pj is None:
        return "-"
    for unit, div in (("J", 1e12), ("mJ", 1e9), ("uJ", 1e6), ("nJ", 1e3)):
        if pj >= div:
            return f"{pj / div:.3g} {unit}"
    return f"{pj:.3g} pJ"


def _short(text: str, width: int = _MAX_LABEL) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _align(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def geomean(values) -> float | None:
    """Geometric mean of the positive values (None when there are none)."""
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def render_table(
    rows: list[dict], ok: list[dict], failed: list[dict], meta: dict
) -> str:
    """The table (see the module docstring) of a sweep's flat ``rows`` (one per
    point), its ``ok`` and ``failed`` records, and its ``meta``."""
    where = meta.get("executor", "")
    wall = meta.get("wall_s")
    extra = ", ".join(
        p for p in (where, f"{wall:.1f} s" if wall is not None else "") if p
    )
    bad = f", {len(failed)} failed" if failed else ""
    lines = [
        f"polyc sweep: {len(rows)} points, {len(ok)} ok{bad}"
        + (f" ({extra})" if extra else "")
    ]
    if not rows:
        return lines[0]
    table = [
        [
            "#",
            "layer",
            "schedule",
            "config",
            "cycles",
            "engine bnd",
            "x engine",
            "roofline",
            "ratio",
            "MAC util",
            "DRAM bytes",
            "min DRAM",
            "energy",
            "status",
        ]
    ]
    for r in rows:
        table.append(
            [
                str(r["index"]),
                _short(r["label"]),
                _short(r["schedule"], 20),
                r["config"],
                _int(r["cycles"]),
                _int(r.get("engine_bound_cycles")),
                _ratio(r.get("engine_ratio")),
                _int(r["roofline_cycles"]),
                _ratio(r["ratio"]),
                _pct(r["mac_utilization"]),
                _int(r["dram_bytes"]),
                _int(r["min_dram_bytes"]),
                energy_text(r["energy_pj"]),
                r["status"],
            ]
        )
    lines += _align(table, right={0, *range(4, 13)})
    if failed:
        lines.append("")
        lines.append("not ok:")
        for r in failed:
            lines.append(
                f"  #{r['index']} {r['label']} / {r['schedule']} / {r['config']}: "
                f"{r['error_type']}: {r['error']}"
            )
    for key, what in (("engine_ratio", "engine bound"), ("ratio", "roofline")):
        summary = _summary(rows, key)
        if summary:
            lines.append("")
            lines.append(f"cycles / {what}, geometric mean over the layers that ran:")
            lines += summary
    return "\n".join(lines)


def _summary(rows: list[dict], key: str) -> list[str]:
    configs = list(dict.fromkeys(r["config"] for r in rows))
    schedules = list(dict.fromkeys(r["schedule"] for r in rows))
    table = [["schedule", *configs]]
    any_value = False
    for s in schedules:
        line = [_short(s, 20)]
        for c in configs:
            g = geomean(
                r.get(key)
                for r in rows
                if r["schedule"] == s and r["config"] == c and r["status"] == "ok"
            )
            any_value = any_value or g is not None
            line.append(_ratio(g))
        table.append(line)
    if not any_value:
        return []
    return _align(table, right=set(range(1, len(configs) + 1)))
