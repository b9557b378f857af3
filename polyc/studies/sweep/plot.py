"""Plots of a sweep (matplotlib, Agg; PNG or SVG by the file suffix).

Figures are made with ``matplotlib.figure.Figure`` directly, never through pyplot, so
plotting changes no global matplotlib state (a notebook's backend stays as it was).
Every function takes the flat rows of :meth:`SweepResult.rows` and plots the points
that ran (``status == "ok"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from polyc.errors import ArgumentError

FORMATS = ("png", "svg")
_MARKERS = "osD^vP*X<>"
_TOP = ("mac_array", "vector", "scalar")
#: roofline points are labelled with their layer up to this many points
_LABELLED = 12


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, path: Path) -> Path:
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise ArgumentError(
            f"sweep plot: cannot write {str(path)!r} because its suffix names no "
            f"supported format. Use one of {', '.join('.' + f for f in FORMATS)}."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # no dates or random ids in the file: the same sweep gives the same SVG
    meta = {"Date": None} if fmt == "svg" else {}
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": "polyc", "svg.fonttype": "none"}):
        fig.savefig(path, format=fmt, dpi=120, metadata=meta)
    return path


def _ok(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok" and r["cycles"]]


def _colors(configs: Sequence[str]) -> dict[str, str]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {c: cmap(i % 10) for i, c in enumerate(configs)}


def _log_axis(ax, which: str) -> None:
    """Log scale with plain tick labels (mathtext labels cost seconds to lay out)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(_tick))
    axis.set_minor_formatter(NullFormatter())


def _tick(value: float, _pos) -> str:
    if value >= 1e4 or value < 1e-2:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{value:g}"


def _empty(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no points with {what}", ha="center", va="center")
    ax.set_axis_off()


def _groups(rows: Sequence[dict]) -> list[tuple[str, str]]:
    """(layer, schedule) pairs in order of first appearance."""
    return list(dict.fromkeys((r["label"], r["schedule"]) for r in rows))


def _group_label(group: tuple[str, str], schedules: int) -> str:
    label, schedule = group
    text = _wrap(label)
    return f"{text}\n[{schedule}]" if schedules > 1 else text


def _wrap(text: str, width: int = 22) -> str:
    """Break long labels at commas so tick labels stay narrow."""
    out, line = [], ""
    for part in text.replace(",", ",\x00").split("\x00"):
        if line and len(line) + len(part) > width:
            out.append(line)
            line = ""
        line += part
    out.append(line)
    return "\n".join(out)


# roofline --------------------------------------------------------------------------


def roofline(rows: Sequence[dict], path: Path) -> Path:
    """MACs per DRAM byte moved (x) against achieved MACs per cycle (y), log-log, with
    each config's roof ``min(peak MACs/cycle, DRAM bytes/cycle x intensity)``."""
    ok = [r for r in _ok(rows) if r["macs"] and r["dram_bytes"]]
    fig = _figure(7.5, 5.0)
    ax = fig.add_subplot()
    if not ok:
        _empty(ax, "multiply-accumulates")
        return _save(fig, path)
    configs = list(dict.fromkeys(r["config"] for r in ok))
    schedules = list(dict.fromkeys(r["schedule"] for r in ok))
    colors = _colors(configs)
    xs = [r["intensity"] for r in ok]
    knees = [r["peak_macs_per_cycle"] / r["dram_bytes_per_cycle"] for r in ok]
    lo, hi = min(*xs, *knees) / 4, max(*xs, *knees) * 4
    for c in configs:
        mine = [r for r in ok if r["config"] == c]
        bw = mine[0]["dram_bytes_per_cycle"]
        for peak in sorted({r["peak_macs_per_cycle"] for r in mine}):
            knee = peak / bw
            px = [lo, knee, hi] if lo < knee < hi else [lo, hi]
            py = [min(peak, bw * x) for x in px]
            ax.plot(
                px,
                py,
                color=colors[c],
                linewidth=1.5,
                label=f"{c} roof: {peak:g} MACs/cycle, {bw:g} B/cycle",
            )
    for si, s in enumerate(schedules):
        for c in configs:
            pts = [r for r in ok if r["config"] == c and r["schedule"] == s]
            if not pts:
                continue
            ax.scatter(
                [r["intensity"] for r in pts],
                [r["macs_per_cycle"] for r in pts],
                color=colors[c],
                marker=_MARKERS[si % len(_MARKERS)],
                s=36,
                zorder=3,
                label=f"{c}, {s}" if len(schedules) > 1 else c,
            )
            for r in pts if len(ok) <= _LABELLED else ():
                ax.annotate(
                    _wrap(r["label"], 18),
                    (r["intensity"], r["macs_per_cycle"]),
                    textcoords="offset points",
                    xytext=(4, 3),
                    fontsize=6,
                    color="0.3",
                )
    _log_axis(ax, "x")
    _log_axis(ax, "y")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte moved)")
    ax.set_ylabel("achieved MACs per cycle")
    skipped = len(_ok(rows)) - len(ok)
    note = f" ({skipped} points without MACs not shown)" if skipped else ""
    ax.set_title("Roofline" + note)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


# bars per layer --------------------------------------------------------------------


def _bars(rows, value, ylabel: str, title: str, log: bool, what: str):
    """Grouped bars: one group per (layer, schedule), one bar per config."""
    ok = [r for r in _ok(rows) if value(r) is not None]
    groups = _groups(ok)
    configs = list(dict.fromkeys(r["config"] for r in ok))
    fig = _figure(max(6.0, 1.0 + 0.35 * len(groups) * max(len(configs), 1)), 4.8)
    ax = fig.add_subplot()
    if not ok:
        _empty(ax, what)
        return fig, ax, [], []
    colors = _colors(configs)
    width = 0.8 / len(configs)
    placed = []
    for ci, c in enumerate(configs):
        xs, ys = [], []
        for gi, g in enumerate(groups):
            r = next(
                (
                    r
                    for r in ok
                    if (r["label"], r["schedule"]) == g and r["config"] == c
                ),
                None,
            )
            if r is not None:
                x = gi - 0.4 + width * (ci + 0.5)
                xs.append(x)
                ys.append(value(r))
                placed.append((x, r))
        ax.bar(xs, ys, width=width * 0.92, color=colors[c], label=c)
    ax.set_xticks(range(len(groups)))
    schedules = len({g[1] for g in groups})
    ax.set_xticklabels([_group_label(g, schedules) for g in groups], fontsize=7)
    if log:
        _log_axis(ax, "y")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.25)
    return fig, ax, placed, configs


def cycles(rows: Sequence[dict], path: Path) -> Path:
    """Simulated cycles (bars, log scale) with each point's two bounds: the engine
    bound (a red tick across its bar: what the scheduler is judged by) and the
    roofline bound (a black tick)."""
    fig, ax, placed, configs = _bars(
        rows,
        lambda r: r["cycles"],
        "cycles (log scale)",
        "Simulated cycles against the engine and roofline bounds",
        log=True,
        what="a report",
    )
    if placed:
        width = 0.8 / len(configs) * 0.92
        for key, color, style, label in (
            ("roofline_cycles", "black", "solid", "roofline bound"),
            ("engine_bound_cycles", "tab:red", "dashed", "engine bound"),
        ):
            bound = [(x, r.get(key)) for x, r in placed if r.get(key)]
            if not bound:
                continue
            ax.hlines(
                [b for _, b in bound],
                [x - width / 2 for x, _ in bound],
                [x + width / 2 for x, _ in bound],
                colors=color,
                linestyles=style,
                linewidth=2,
                label=label,
            )
        ax.legend(fontsize=7)
    return _save(fig, path)


def utilization(rows: Sequence[dict], path: Path) -> Path:
    """MAC-array utilisation in % of peak, per layer and schedule, per config."""
    fig, ax, placed, _ = _bars(
        rows,
        lambda r: None if r["mac_utilization"] is None else 100 * r["mac_utilization"],
        "MAC utilisation (% of peak)",
        "MAC-array utilisation",
        log=False,
        what="multiply-accumulates",
    )
    if placed:
        top = max(100 * r["mac_utilization"] for _, r in placed)
        ax.set_ylim(0, max(1.0, min(100.0, top * 1.25)))
        for x, r in placed:
            ax.annotate(
                f"{100 * r['mac_utilization']:.2g}%",
                (x, 100 * r["mac_utilization"]),
                ha="center",
                va="bottom",
                fontsize=6,
            )
        ax.legend(fontsize=7)
    return _save(fig, path)


def energy(rows: Sequence[dict], path: Path) -> Path:
    """Energy per point split by component, as shares of its total (stacked
    horizontal bars), with the total written at the end of each bar."""
    from polyc.studies.sweep.text import energy_text

    ok = [r for r in _ok(rows) if r["energy_pj"]]
    parts = [
        k
        for k in dict.fromkeys(k for r in ok for k in r if k.startswith("energy."))
        if any(r.get(k) for r in ok)
    ]
    parts.sort(
        key=lambda k: (k[7:] not in _TOP, _TOP.index(k[7:]) if k[7:] in _TOP else 0)
    )
    fig = _figure(8.0, max(2.5, 1.2 + 0.32 * len(ok)))
    ax = fig.add_subplot()
    if not ok:
        _empty(ax, "energy")
        return _save(fig, path)
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    ys = list(range(len(ok)))[::-1]
    left = [0.0] * len(ok)
    for i, part in enumerate(parts):
        share = [100 * (r.get(part) or 0.0) / r["energy_pj"] for r in ok]
        ax.barh(ys, share, left=left, color=cmap(i % 10), label=part[7:], height=0.7)
        left = [a + b for a, b in zip(left, share)]
    for y, r in zip(ys, ok):
        ax.text(101, y, energy_text(r["energy_pj"]), va="center", fontsize=7)
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [f"{r['label']} [{r['schedule']}] on {r['config']}" for r in ok], fontsize=7
    )
    ax.set_xlim(0, 118)
    ax.set_ylim(-0.6, len(ok) - 0.4)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("share of the point's energy (%); total at the right")
    ax.set_title("Energy by component")
    fig.legend(fontsize=7, loc="outside lower center", ncol=min(6, len(parts)))
    return _save(fig, path)


PLOTS = {
    "roofline": roofline,
    "cycles": cycles,
    "utilization": utilization,
    "energy": energy,
}


def plot_all(rows: Sequence[dict], out_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Every plot of :data:`PLOTS` in every format, as ``out_dir/<plot>.<format>``."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ArgumentError(
            f"sweep plot: format {bad[0]!r} is not supported because only "
            f"{', '.join(FORMATS)} are written. Pick among those."
        )
    out = []
    for name, fn in PLOTS.items():
        for fmt in formats:
            out.append(fn(rows, out_dir / f"{name}.{fmt}"))
    return out
