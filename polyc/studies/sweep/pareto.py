"""Pareto fronts of a co-design study: (latency, energy, area) per hardware point.

A study of whole models runs every model on every hardware point of a grid. Per
model, each point is one row (:meth:`SweepResult.rows`); for the workload (every
model of the study together) :func:`workload` sums each config's latencies and
energies over the models, which all must have run there, and keeps its area. A
point is on the front when no other point is at least as good in every objective
and better in one (all are minimised). :func:`table` prints the front;
:func:`plot` draws the three 2-D projections with the front highlighted and the
chosen points (the best of each objective and of EDP) labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: what a co-design front minimises, in the order tables and plots show them
OBJECTIVES = ("latency_s", "energy_j", "area_mm2")
#: plotted as (axis label, scale)
_AXES = {
    "latency_s": ("latency (ms)", 1e3),
    "energy_j": ("energy (mJ)", 1e3),
    "area_mm2": ("area (mm2)", 1.0),
}


def points(rows: Sequence[dict], label: str | None = None) -> list[dict]:
    """The rows that ran and have every objective (of model ``label``, or all)."""
    return [
        r
        for r in rows
        if r["status"] == "ok"
        and (label is None or r["label"] == label)
        and all(r.get(k) is not None for k in OBJECTIVES)
    ]


def workload(rows: Sequence[dict]) -> list[dict]:
    """One point per config that ran every model of the study: latency and energy
    summed over the models (one inference of each), area the config's, EDP their
    product, and ``models`` the number of models. Configs where a model failed are
    left out (their sums would flatter them)."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    by_config: dict[str, dict[str, dict]] = {}
    for r in points(rows):
        by_config.setdefault(r["config"], {})[r["label"]] = r
    out = []
    for config, runs in by_config.items():
        if len(runs) != len(labels):
            continue
        latency = sum(r["latency_s"] for r in runs.values())
        energy = sum(r["energy_j"] for r in runs.values())
        out.append(
            {
                "config": config,
                "label": "+".join(labels),
                "status": "ok",
                "latency_s": latency,
                "energy_j": energy,
                "area_mm2": next(iter(runs.values()))["area_mm2"],
                "edp_js": latency * energy,
                "power_w": energy / latency if latency else 0.0,
                "models": len(runs),
            }
        )
    return out


def dominates(a: dict, b: dict, objectives: Sequence[str] = OBJECTIVES) -> bool:
    """Whether ``a`` is at least as good as ``b`` in every objective and better in
    one (all minimised)."""
    return all(a[k] <= b[k] for k in objectives) and any(
        a[k] < b[k] for k in objectives
    )


def front(pts: Sequence[dict], objectives: Sequence[str] = OBJECTIVES) -> list[dict]:
    """The points no other point dominates, by increasing first objective."""
    keep = [p for p in pts if not any(dominates(q, p, objectives) for q in pts)]
    return sorted(keep, key=lambda p: tuple(p[k] for k in objectives))


def chosen(pts: Sequence[dict]) -> dict[str, dict]:
    """The points a designer would look at first: the best of each objective and
    of EDP (``{"min latency_s": point, ...}``; one point may hold several)."""
    if not pts:
        return {}
    keys = [*OBJECTIVES, "edp_js"]
    # ties go to the point better in the other objectives (one on the front)
    return {
        f"min {k}": min(
            pts, key=lambda p: (p[k], *(p[o] for o in OBJECTIVES), p["config"])
        )
        for k in keys
        if all(p.get(k) is not None for p in pts)
    }


def table(pts: Sequence[dict], title: str = "workload") -> str:
    """The front of ``pts`` as an aligned text table (and the points chosen)."""
    best = front(pts)
    marks: dict[str, list[str]] = {}
    for why, p in chosen(pts).items():
        marks.setdefault(p["config"], []).append(why.removeprefix("min ").split("_")[0])
    head = [
        "config",
        "latency ms",
        "energy mJ",
        "area mm2",
        "power W",
        "EDP uJ s",
        "best",
    ]
    lines = [
        [
            p["config"],
            f"{p['latency_s'] * 1e3:.4g}",
            f"{p['energy_j'] * 1e3:.4g}",
            f"{p['area_mm2']:.3g}",
            f"{p.get('power_w') or 0:.3g}",
            f"{(p.get('edp_js') or 0) * 1e6:.4g}",
            ",".join(marks.get(p["config"], [])),
        ]
        for p in best
    ]
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]

    def fmt(row):
        return "  ".join(
            c.ljust(w) if i in (0, len(row) - 1) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    text = [
        f"Pareto front of (latency, energy, area), {title}: {len(best)} of "
        f"{len(pts)} points",
        fmt(head),
        *(fmt(r) for r in lines),
    ]
    return "\n".join(text)


def markdown(pts: Sequence[dict]) -> str:
    """The front of ``pts`` as a Markdown table."""
    lines = [
        "| config | latency ms | energy mJ | area mm2 | power W | EDP uJ s |",
        "|---|---|---|---|---|---|",
    ]
    for p in front(pts):
        lines.append(
            f"| `{p['config']}` | {p['latency_s'] * 1e3:.4g} | "
            f"{p['energy_j'] * 1e3:.4g} | {p['area_mm2']:.3g} | "
            f"{p.get('power_w') or 0:.3g} | {(p.get('edp_js') or 0) * 1e6:.4g} |"
        )
    return "\n".join(lines)


def plot(pts: Sequence[dict], path: Path, title: str = "workload") -> Path:
    """Three 2-D projections of (latency, energy, area), log-log: every point in
    grey, the 3-D front in colour, each projection's own 2-D front as a step line,
    the chosen points labelled; the format follows the suffix."""
    from polyc.studies.sweep.plot import _empty, _figure, _save

    fig = _figure(15, 5)
    axes = fig.subplots(1, 3)
    pairs = [
        ("latency_s", "energy_j"),
        ("latency_s", "area_mm2"),
        ("energy_j", "area_mm2"),
    ]
    best = front(pts)
    on_front = {p["config"] for p in best}
    labels: dict[str, tuple[dict, list[str]]] = {}
    for why, p in chosen(pts).items():
        name = why.removeprefix("min ").split("_")[0]
        labels.setdefault(p["config"], (p, []))[1].append(name)
    for ax, (kx, ky) in zip(axes, pairs):
        if not pts:
            _empty(ax, "latency, energy and area")
            continue
        x, y = _scaled(kx), _scaled(ky)
        rest = [p for p in pts if p["config"] not in on_front]
        ax.scatter(
            [x(p) for p in rest],
            [y(p) for p in rest],
            s=14,
            color="0.7",
            label=f"dominated ({len(rest)})",
        )
        ax.scatter(
            [x(p) for p in best],
            [y(p) for p in best],
            s=30,
            color="tab:red",
            zorder=3,
            label=f"on the 3-D front ({len(best)})",
        )
        flat = front(pts, (kx, ky))
        ax.step(
            [x(p) for p in flat],
            [y(p) for p in flat],
            where="post",
            color="tab:blue",
            lw=1,
            label="2-D front",
        )
        for i, (p, whys) in enumerate(labels.values()):
            note = ax.annotate(
                f"{chr(65 + i)}: {', '.join(whys)}",
                (x(p), y(p)),
                xytext=(8, 8 + 8 * (i % 2)),
                textcoords="offset points",
                fontsize=7,
                arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.3"},
            )
            note.set_in_layout(False)  # labels never squeeze the axes
        for which in "xy":
            _log(ax, which)
        ax.margins(0.15)
        ax.set_xlabel(_AXES[kx][0])
        ax.set_ylabel(_AXES[ky][0])
        ax.grid(True, which="major", lw=0.3)
    if pts:
        axes[0].legend(fontsize=7, loc="best")
        key = [f"{chr(65 + i)}: {c}" for i, c in enumerate(labels)]
        fig.supxlabel("\n".join(key), fontsize=7, ha="left", x=0.02)
    fig.suptitle(f"Pareto front of (latency, energy, area): {title}")
    return _save(fig, path)


class _scaled:
    """``p[_scaled("latency_s")]``-style access: a point's objective in the
    plot's unit (see :data:`_AXES`), by ``__call__``."""

    def __init__(self, key: str):
        self.key = key

    def __call__(self, p: dict) -> float:
        return p[self.key] * _AXES[self.key][1]


def _log(ax, which: str) -> None:
    """Log scale with plain labels at 1, 2 and 5 of each decade (plots span
    narrow ranges; mathtext labels would cost seconds and overlap)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from polyc.studies.sweep.plot import _tick

    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, pos: _tick(v * 1.0, pos)))
    axis.set_minor_formatter(NullFormatter())
