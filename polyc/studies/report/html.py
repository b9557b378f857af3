"""One self-contained HTML page per compiled kernel or model: no network, no CDN,
inline CSS, a little inline JavaScript and SVG drawn here.

Sections, in order: the summary (cycles against the prediction and both bounds),
the collapsible schedule tree (:mod:`polyc.ir.treeview`; a click on a node
highlights the loop-nest lines and C lines of its statements and copies), the
memory map per on-chip level (:mod:`.memory`, peak marked), DRAM traffic per
tensor, the engine timeline (:mod:`.timeline`, spans named by layer, a title per
span for hover, decimated), per-layer cycles against both bounds and the
scheduler's prediction, and the roofline plot.

Size is bounded on purpose (Halide's statement view is known for 10 MB pages that
stall the browser): the timeline draws at most ``MAX_SPANS`` slices per engine, the
C and the loop nest are cut after ``MAX_LINES`` lines each (the page says so), and
no text is repeated per node: the tree links to lines by statement names.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

from polyc.studies.report import memory, timeline

#: lines of C and of loop nest shown at most (each)
MAX_LINES = 6000
_TOKEN = re.compile(r"\b(pc_(?:in|out|mac|zero)_\w+|S\d+)\b")
#: a band's comment in the loop nest (``# band L0``) and the C (``/* band L0 */``)
_BAND = re.compile(r"\bband (\w+)")


def report_html(compiled, report=None, path=None, title: str | None = None) -> str:
    """The page for ``report``, a run of ``compiled`` (default: its last run);
    written to ``path`` when given. Returns the HTML text.

    Raises:
        ArgumentError: when there is no run to report on.
    """
    from polyc.errors import ArgumentError
    from polyc.studies.model_report import model_report

    report = report if report is not None else compiled.last_report
    if report is None:
        raise ArgumentError(
            "report_html: there is no run to report on because compiled.run() was "
            "not called. Run it first, or pass its report."
        )
    mr = model_report(compiled, report)
    names = timeline.event_names(compiled, report)
    title = title or f"{compiled.name} on {report.config}"
    body = [
        f"<h1>{_e(title)}</h1>",
        _summary(compiled, report),
        _tree_section(compiled),
        _memory_section(compiled, report),
        _dma_section(compiled, report),
        "<section id='timeline'><h2>Engine timeline</h2>"
        "<p class='note'>One lane per engine; spans coloured and named by layer; "
        "hover a span for its operations. Spans of one layer in one slice of the "
        f"run (1/{timeline.MAX_SPANS}) are merged.</p>"
        + timeline.timeline_svg(report, names)
        + "</section>",
        _layers_section(compiled, mr),
        _roofline_section(mr, report),
    ]
    text = _page(title, "\n".join(body))
    if path is not None:
        Path(path).write_text(text)
    return text


def _e(text) -> str:
    return html.escape(str(text))


def _summary(compiled, r) -> str:
    rows = [("cycles", f"{r.cycles:,}")]
    choice = compiled.choice
    if choice is not None and choice.predicted_cycles:
        p = choice.predicted_cycles
        rows.append(("predicted", f"{p:,.0f} ({p / max(1, r.cycles):.2f}x simulated)"))
    if r.roofline is not None:
        rows.append(
            (
                "roofline",
                f"{r.roofline_cycles:,} ({r.roofline.bound}-bound; {r.ratio:.2f}x)",
            )
        )
    if r.engine_bound is not None:
        rows.append(
            (
                "engine bound",
                f"{r.engine_bound_cycles:,} ({r.engine_bound.bound}-bound; "
                f"{r.engine_ratio:.2f}x)",
            )
        )
    rows += [
        ("mode", r.mode),
        ("DRAM bytes", f"{r.dram_bytes:,}"),
        ("energy", f"{r.energy_pj / 1e6:,.3f} uJ"),
        (
            "engines busy",
            ", ".join(f"{e.name} {e.utilization:.0%}" for e in r.engines),
        ),
        ("trace events", f"{len(r.events):,} ({r.events_dropped:,} dropped)"),
    ]
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<section id='summary'><table class='kv'>{cells}</table></section>"


def _tree_section(compiled) -> str:
    from polyc.ir.printing import loop_nest_text
    from polyc.ir.treeview import tree_nodes

    kernel = compiled.kernel
    nodes = tree_nodes(kernel.schedule)
    tree = _tree_html(nodes)
    nest = _lines_html(loop_nest_text(kernel).splitlines(), "nest")
    c = _lines_html(compiled.c_source.splitlines(), "c")
    return (
        "<section id='tree'><h2>Schedule tree</h2>"
        "<p class='note'>Click a node: the loop-nest lines and C lines of its "
        "statements and copies are highlighted (a link to "
        "<code>#node=PATH</code> selects one on load).</p>"
        f"<div class='cols'><div class='col' id='tree-view'>{tree}</div>"
        "<div class='col'><details open><summary>loop nest</summary>"
        f"{nest}</details><details><summary>C ({len(compiled.c_source):,} chars)"
        f"</summary>{c}</details></div></div></section>"
    )


def _tree_html(nodes) -> str:
    """Nested ``<details>`` (one per node with children) / ``<div>`` (leaves)."""
    out: list[str] = []
    depth_open: list[int] = []
    for i, n in enumerate(nodes):
        while depth_open and depth_open[-1] >= n.depth:
            out.append("</details>")
            depth_open.pop()
        has_children = i + 1 < len(nodes) and nodes[i + 1].depth > n.depth
        engine = f" <span class='eng'>[{_e(n.engine)}]</span>" if n.engine else ""
        tokens = sorted(n.stmts)
        band = _BAND.search(n.text) if n.kind == "band" else None
        if band:  # its own loops: the band's comment line in the nest and the C
            tokens.append(f"band:{band.group(1)}")
        attrs = (
            f"class='node k-{n.kind}' data-s='{_e(' '.join(tokens))}' "
            f"data-path='{'.'.join(map(str, n.path))}'"
        )
        label = f"<span {attrs}>{_e(n.text)}</span>{engine}"
        if has_children:
            out.append(f"<details open><summary>{label}</summary>")
            depth_open.append(n.depth)
        else:
            out.append(f"<div class='leaf'>{label}</div>")
    out.extend("</details>" for _ in depth_open)
    return "".join(out)


def _lines_html(lines: list[str], kind: str) -> str:
    cut = len(lines) > MAX_LINES
    shown = lines[:MAX_LINES]
    parts = []
    for line in shown:
        tokens = set(_TOKEN.findall(line))
        tokens.update(f"band:{b}" for b in _BAND.findall(line))
        text = _e(line)
        if tokens:
            parts.append(
                f"<span class='ln' data-s='{' '.join(sorted(tokens))}'>{text}</span>"
            )
        else:
            parts.append(text)
    note = (
        f"<p class='note'>cut after {MAX_LINES:,} of {len(lines):,} lines</p>"
        if cut
        else ""
    )
    return f"<pre class='code {kind}'>" + "\n".join(parts) + f"</pre>{note}"


def _memory_section(compiled, report) -> str:
    maps = memory.memory_map(compiled, report) if compiled.mode != "DRAM-direct" else []
    if not maps:
        return (
            "<section id='memory'><h2>Memory map</h2><p>No on-chip buffers: the "
            "kernel ran DRAM-direct.</p></section>"
        )
    parts = ["<section id='memory'><h2>Memory map</h2>"]
    for m in maps:
        parts.append(
            f"<h3>{_e(m.name)} ({m.capacity:,} B): peak {m.peak_bytes:,} B of "
            f"scheduled blocks at cycle {m.peak_at:,} (simulated peak "
            f"{m.simulated_peak:,} B)</h3>"
        )
        parts.append(_memory_svg(m, max(1, report.cycles)))
    parts.append("</section>")
    return "".join(parts)


def _memory_svg(m, cycles: int, width: int = 1100, height: int = 220) -> str:
    left, top, plot_w, plot_h = 70, 10, width - 80, height - 30
    sx = plot_w / cycles
    sy = plot_h / max(1, m.capacity)
    palette = timeline.colors(b.array or b.name for b in m.blocks)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="memmap" width="{width}" '
        f'height="{height}" data-level="{_e(m.name)}">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
        'class="lane-bg"/>',
        f'<text x="4" y="{top + 10}" class="axis">{m.capacity:,} B</text>'
        f'<text x="4" y="{top + plot_h}" class="axis">0</text>',
    ]
    for b in m.blocks:
        if b.end <= b.start:
            continue
        x = left + b.start * sx
        w = max(1.0, (b.end - b.start) * sx)
        y = top + plot_h - (b.offset + b.bytes) * sy
        h = max(1.0, b.bytes * sy)
        tip = (
            f"{b.name} ({b.array or 'zero block'}): {b.bytes:,} B at offset "
            f"{b.offset:,}, cycles {b.start:,}-{b.end:,}"
        )
        out.append(
            f'<rect class="block" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
            f'height="{h:.1f}" fill="{palette[b.array or b.name]}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    px = left + m.peak_at * sx
    out.append(
        f'<line class="peak" x1="{px:.1f}" x2="{px:.1f}" y1="{top}" '
        f'y2="{top + plot_h}"/><text class="peak-label" x="{px + 3:.1f}" '
        f'y="{top + 12}">peak {m.peak_bytes:,} B</text>'
    )
    out.append("</svg>")
    return "".join(out)


def _dma_section(compiled, report) -> str:
    rows = memory.dma_table(compiled, report)
    head = (
        "<tr><th>tensor</th><th>role</th><th>size B</th><th>DRAM read B</th>"
        "<th>DRAM written B</th><th>transfers</th><th>on-chip B</th>"
        "<th>minimum B</th><th>reuse (DRAM / minimum)</th></tr>"
    )
    body = []
    for t in rows:
        reuse = f"{t.reuse:.2f}x" if t.reuse is not None else "-"
        flag = " class='over'" if t.reuse is not None and t.reuse > 1.5 else ""
        body.append(
            f"<tr{flag}><td>{_e(t.array)}</td><td>{t.role}</td><td>{t.nbytes:,}</td>"
            f"<td>{t.dram_read:,}</td><td>{t.dram_written:,}</td>"
            f"<td>{t.transfers:,}</td><td>{t.on_chip:,}</td><td>{t.minimum:,}</td>"
            f"<td>{reuse}</td></tr>"
        )
    note = (
        ""
        if report.events_dropped == 0
        else "<p class='note'>The trace dropped events: the table misses their "
        "bytes (compile with a larger trace_limit).</p>"
    )
    return (
        "<section id='dma'><h2>DRAM traffic per tensor</h2>"
        f"<table class='grid' id='dma-table'>{head}{''.join(body)}</table>{note}"
        "</section>"
    )


def _layers_section(compiled, mr) -> str:
    predicted = _predicted(compiled, mr)
    head = (
        "<tr><th>layer</th><th>cycles</th><th>predicted</th><th>roofline</th>"
        "<th>x roofline</th><th>engine bound</th><th>x engine</th>"
        "<th>DRAM B</th><th>MACs</th></tr>"
    )
    rows = []
    for c in [*mr.layers, mr.total]:
        p = predicted.get(c.name)
        name = c.name if c.name != "(other)" or len(mr.layers) > 1 else mr.kernel
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{c.cycles:,}</td>"
            f"<td>{'-' if p is None else f'{p:,.0f}'}</td>"
            f"<td>{c.roofline_cycles:,}</td><td>{_x(c.ratio)}</td>"
            f"<td>{c.engine_bound:,}</td><td>{_x(c.engine_ratio)}</td>"
            f"<td>{c.dram_bytes:,}</td><td>{c.macs:,}</td></tr>"
        )
    return (
        "<section id='layers'><h2>Layers: cycles against both bounds and the "
        "prediction</h2>"
        f"<p>{_e(mr.summary())}</p>"
        f"<table class='grid' id='layer-table'>{head}{''.join(rows)}</table>"
        "</section>"
    )


def _x(ratio) -> str:
    return "-" if ratio is None else f"{ratio:,.2f}x"


def _predicted(compiled, mr) -> dict[str, float]:
    """The scheduler's predicted cycles per report row: the sum of its layers'
    (a scheduler layer lies inside one row: rows join fused units)."""
    choice = compiled.choice
    if choice is None:
        return {}
    row_of = {s: c.name for c in mr.layers for s in c.statements}
    out: dict[str, float] = {}
    for lc in choice.layers:
        if lc.candidate is None:
            continue
        rows = {row_of.get(s.name) for s in lc.layer.stmts} - {None}
        if len(rows) == 1:
            row = rows.pop()
            out[row] = out.get(row, 0.0) + lc.candidate.cycles
    if choice.predicted_cycles:
        out["total"] = choice.predicted_cycles
    return out


def _roofline_section(mr, report, width: int = 560, height: int = 360) -> str:
    rf = report.roofline
    if rf is None:
        return ""
    peak = rf.peak_macs_per_cycle
    bw = rf.dram_bytes_per_cycle
    points = [
        (c.name, c.macs / c.dram_bytes, c.macs / c.cycles)
        for c in mr.layers
        if c.macs and c.dram_bytes and c.cycles
    ]
    total = mr.total
    if total.macs and total.dram_bytes and total.cycles:
        points.append(
            ("whole run", total.macs / total.dram_bytes, total.macs / total.cycles)
        )
    xs = [p[1] for p in points] + [peak / bw]
    lo_x = 10 ** math.floor(math.log10(min(xs) / 2))
    hi_x = 10 ** math.ceil(math.log10(max(xs) * 2))
    lo_y = 10 ** math.floor(math.log10(min([p[2] for p in points] + [peak]) / 2))
    hi_y = 10 ** math.ceil(math.log10(peak * 2))
    left, top, pw, ph = 60, 10, width - 80, height - 50

    def px(x):
        return left + (math.log10(x) - math.log10(lo_x)) / math.log10(hi_x / lo_x) * pw

    def py(y):
        frac = (math.log10(y) - math.log10(lo_y)) / math.log10(hi_y / lo_y)
        return top + ph - frac * ph

    ridge = peak / bw
    roof = [(lo_x, min(peak, lo_x * bw)), (ridge, peak), (hi_x, peak)]
    if ridge <= lo_x:
        roof = [(lo_x, peak), (hi_x, peak)]
    path = " ".join(f"{px(x):.1f},{py(max(y, lo_y)):.1f}" for x, y in roof)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="roofline" width="{width}" '
        f'height="{height}"><rect x="{left}" y="{top}" width="{pw}" height="{ph}" '
        'class="lane-bg"/>',
        f'<polyline class="roof" points="{path}"/>',
        f'<text class="axis" x="{left + pw / 2}" y="{height - 8}" '
        'text-anchor="middle">MACs per DRAM byte (log)</text>',
        f'<text class="axis" x="4" y="{top + 10}">{hi_y:g}</text>'
        f'<text class="axis" x="4" y="{top + ph}">{lo_y:g}</text>'
        f'<text class="axis" x="{left}" y="{top + ph + 14}">{lo_x:g}</text>'
        f'<text class="axis" x="{left + pw}" y="{top + ph + 14}" '
        f'text-anchor="end">{hi_x:g}</text>',
        f'<text class="axis" x="{left + 4}" y="{py(peak) - 4:.1f}">peak {peak:g} '
        f"MACs/cycle, DRAM {bw:g} B/cycle</text>",
    ]
    for name, x, y in points:
        cls = "pt whole" if name == "whole run" else "pt"
        out.append(
            f'<circle class="{cls}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="4">'
            f"<title>{_e(name)}: {x:.2f} MACs/B, {y:.2f} MACs/cycle</title></circle>"
        )
    out.append("</svg>")
    return (
        "<section id='roofline'><h2>Roofline</h2><p class='note'>Each layer at its "
        "MACs per DRAM byte and achieved MACs per cycle; the line is the roof.</p>"
        + "".join(out)
        + "</section>"
    )


_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin-top:24px;border-bottom:1px solid #ccc}
h3{font-size:13px}.note{color:#666}
table.kv th{text-align:left;padding-right:12px}
table.grid{border-collapse:collapse}table.grid td,table.grid th{border:1px solid #ddd;
padding:2px 6px;text-align:right}table.grid td:first-child{text-align:left}
tr.over td{background:#fff3e0}
.cols{display:flex;gap:12px}.col{flex:1;min-width:0;overflow:auto;max-height:600px}
#tree-view{font:12px monospace}#tree-view details{margin-left:14px}
#tree-view .leaf{margin-left:28px}.node{cursor:pointer}.node.sel{background:#ffe082}
.k-band{color:#1565c0}.k-buffer,.k-scope{color:#6a1b9a}.k-tensorize,.k-vector{
color:#2e7d32}.eng{color:#888}
pre.code{font:11px monospace;margin:0}.ln.hit{background:#ffe082}
svg text{font:10px sans-serif}.lane-bg{fill:#f5f5f5}.span:hover,.block:hover{
stroke:#000}.peak{stroke:#d32f2f;stroke-width:1.5}.peak-label{fill:#d32f2f}
.roof{fill:none;stroke:#333;stroke-width:2}.pt{fill:#1976d2}.pt.whole{fill:#d32f2f}
"""

_JS = """
window.__errors=[];
window.addEventListener('error',function(e){window.__errors.push(String(e.message));
document.body.setAttribute('data-errors',window.__errors.length);});
document.addEventListener('DOMContentLoaded',function(){
var nodes=document.querySelectorAll('.node');
nodes.forEach(function(n){n.addEventListener('click',function(ev){
ev.preventDefault();
document.querySelectorAll('.sel').forEach(function(x){x.classList.remove('sel');});
document.querySelectorAll('.ln.hit').forEach(function(x){x.classList.remove('hit');});
n.classList.add('sel');
var want=new Set(n.dataset.s.split(' ').filter(Boolean));
var first=null;
document.querySelectorAll('.ln').forEach(function(l){
if(l.dataset.s.split(' ').some(function(t){return want.has(t)||
want.has(t.replace(/^pc_mac_/,''));})){l.classList.add('hit');first=first||l;}});
if(first){first.scrollIntoView({block:'nearest'});}
document.body.setAttribute('data-selected',n.dataset.path);});});
document.body.setAttribute('data-nodes',nodes.length);
var m=/^#node=([0-9.]*)$/.exec(location.hash);
if(m){var t=document.querySelector(".node[data-path='"+m[1]+"']");if(t){t.click();}}
document.body.setAttribute('data-ready','1');
document.body.setAttribute('data-ready-ms',Math.round(performance.now()));});
"""


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{_CSS}</style><script>{_JS}</script>"
        f"</head><body>{body}</body></html>\n"
    )
