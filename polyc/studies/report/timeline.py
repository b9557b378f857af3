"""A run's engine timeline, named by layer: for Perfetto, as an SVG for the HTML
report, and as a Gantt image (PNG or SVG, matplotlib) for docs.

The simulator labels an engine operation with its statement (``S3``) or its copy
(``conv2d_w in``). A row of :func:`polyc.studies.model_report.layer_groups` (a
model's layer, ``layer1.0.conv1``, or layers fused into one unit) owns the events
that :func:`accelerator.sim.attribution.owners` gives it: a compute event its
statement's row, a copy-in the row of the compute it feeds, a copy-out the row
before. :func:`event_names` is that name per event; the trace keeps the original
label as an argument.

A long run has too many operations to draw one rectangle each: :func:`lanes`
merges, per engine, the operations of one row that fall in one slice of the run
(``max_spans`` slices) into one span that says how many it holds.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

#: default slices of a run per engine lane (what the HTML timeline draws at most)
MAX_SPANS = 1200


def event_names(compiled, report) -> list[str]:
    """The row (model layer) of every event of ``report``; the event's own label
    where no row owns it."""
    from accelerator.sim.attribution import owners
    from polyc.studies.model_report import layer_groups

    groups = layer_groups(compiled)
    names = list(groups)
    group_of = {s: n for n, g in enumerate(names) for s in groups[g]}
    own = owners(report.events, group_of)
    return [names[g] if g >= 0 else ev.label for g, ev in zip(own, report.events)]


def write_trace(compiled, report, path) -> Path:
    """Write the run's Chrome trace-event JSON to ``path``, events named by layer
    (the statement or copy label kept as the argument ``label``)."""
    return report.write_trace(path, event_names(compiled, report))


@dataclass(frozen=True)
class Span:
    """Operations of one row on one engine, merged: ``start``/``end`` cycles,
    ``busy`` cycles inside, ``count`` operations, ``kind`` (mac, dma, ...), the
    first operation's ``label``."""

    start: int
    end: int
    name: str
    busy: int
    count: int
    kind: str
    label: str
    amount: int


def lanes(report, names, max_spans: int = MAX_SPANS) -> dict[str, list[Span]]:
    """Per engine (in the report's order), the spans of the run (see the module
    docstring); waits are left out (the stalled scalar core does no work)."""
    total = max(1, report.cycles)
    bucket = max(1, -(-total // max_spans))
    out: dict[str, list[Span]] = {e.name: [] for e in report.engines}
    open_: dict[tuple[str, str, int], list] = {}
    for ev, name in zip(report.events, names):
        if ev.kind == "wait":
            continue
        key = (ev.engine, name, ev.start // bucket)
        cur = open_.get(key)
        if cur is None:
            open_[key] = [ev.start, ev.end, ev.end - ev.start, 1, ev.kind, ev.label]
            open_[key].append(ev.amount)
        else:
            cur[0] = min(cur[0], ev.start)
            cur[1] = max(cur[1], ev.end)
            cur[2] += ev.end - ev.start
            cur[3] += 1
            cur[6] += ev.amount
    for (engine, name, _), v in open_.items():
        out.setdefault(engine, []).append(Span(v[0], v[1], name, *v[2:]))
    for spans in out.values():
        spans.sort(key=lambda s: (s.start, s.end))
    return out


def colors(names) -> dict[str, str]:
    """A stable colour per row name (hues spread by a golden-ratio step)."""
    out: dict[str, str] = {}
    for n, name in enumerate(dict.fromkeys(names)):
        hue = (n * 137.508) % 360
        out[name] = f"hsl({hue:.0f},60%,58%)"
    return out


def timeline_svg(report, names, width: int = 1100, max_spans: int = MAX_SPANS) -> str:
    """The engine timeline as inline SVG: one lane per engine, one rectangle per
    span with a ``<title>`` (row, cycles, operations) for hover; rectangles narrower
    than a pixel are drawn one pixel wide."""
    per = lanes(report, names, max_spans)
    palette = colors(s.name for spans in per.values() for s in spans)
    label_w, lane_h, top = 90, 22, 18
    plot_w = width - label_w - 10
    scale = plot_w / max(1, report.cycles)
    height = top + lane_h * len(per) + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">',
        f'<text x="{label_w}" y="12" class="axis">0</text>'
        f'<text x="{width - 10}" y="12" class="axis" text-anchor="end">'
        f"{report.cycles:,} cycles</text>",
    ]
    for i, (engine, spans) in enumerate(per.items()):
        y = top + i * lane_h
        parts.append(
            f'<g class="lane" data-engine="{html.escape(engine)}">'
            f'<text x="4" y="{y + 15}" class="lane-name">{html.escape(engine)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{lane_h - 4}" '
            'class="lane-bg"/>'
        )
        for s in spans:
            x = label_w + s.start * scale
            w = max(1.0, (s.end - s.start) * scale)
            what = f"{s.count:,} ops" if s.count > 1 else s.label
            tip = (
                f"{s.name} on {engine}: {what}, cycles {s.start:,}-{s.end:,} "
                f"(busy {s.busy:,})"
            )
            if s.kind == "dma":
                tip += f", {s.amount:,} B"
            parts.append(
                f'<rect class="span" x="{x:.1f}" y="{y + 1}" width="{w:.1f}" '
                f'height="{lane_h - 6}" fill="{palette[s.name]}">'
                f"<title>{html.escape(tip)}</title></rect>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def save_timeline(compiled, report, path, max_spans: int = 2000, legend: int = 12):
    """A Gantt chart of the run (lanes per engine, colours per layer, the largest
    ``legend`` layers named) written with matplotlib to ``path`` (``.png`` or
    ``.svg``, by its suffix); returns the path.

    Raises:
        ArgumentError: for a suffix matplotlib should not guess.
    """
    from polyc.errors import ArgumentError

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ArgumentError(
            f"timeline: {path} has the suffix {path.suffix or '(none)'} because "
            "only PNG and SVG images are written. Name the file .png or .svg."
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = event_names(compiled, report)
    per = lanes(report, names, max_spans)
    busy: dict[str, int] = {}
    for spans in per.values():
        for s in spans:
            busy[s.name] = busy.get(s.name, 0) + s.busy
    order = sorted(busy, key=lambda n: -busy[n])
    cmap = plt.get_cmap("tab20")
    color = {n: cmap(i % 20) for i, n in enumerate(order)}
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(per) + 1.8))
    engines = list(per)
    for i, engine in enumerate(engines):
        bars = [(s.start, max(1, s.end - s.start)) for s in per[engine]]
        cols = [color[s.name] for s in per[engine]]
        if bars:
            ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=cols, linewidth=0)
    ax.set_yticks(range(len(engines)), engines)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1, report.cycles))
    ax.set_xlabel("cycles")
    ax.set_title(f"{report.kernel} on {report.config}: {report.cycles:,} cycles")
    handles = [Patch(color=color[n], label=_cut(n)) for n in order[:legend]]
    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7,
            frameon=False,
        )
    fig.tight_layout()
    # the same run gives the same file (no date, fixed SVG ids)
    with plt.rc_context({"svg.hashsalt": "polyc"}):
        fig.savefig(
            path, dpi=110, metadata={"Date": None} if path.suffix == ".svg" else {}
        )
    plt.close(fig)
    return path


def _cut(name: str, width: int = 32) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
