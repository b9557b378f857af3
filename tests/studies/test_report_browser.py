"""The inspection page in a real browser: headless Chromium loads each page, runs
its script, and the tests read the DOM it leaves (tree nodes, table rows,
timeline lanes, the node a link selects) and its console. How fast a page
renders is measured by bench/report_pages.py, never asserted here."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch

import polyc
from polyc.ir.treeview import tree_nodes
from tests.support import browser


def _run(kernel, config, trace_limit=1 << 16, **options):
    compiled = polyc.compile(kernel, config=config, trace_limit=trace_limit, **options)
    rng = np.random.default_rng(0)
    data = {
        a.name: rng.random(a.concrete_shape({}), np.float32) for a in kernel.free_inputs
    }
    _, report = compiled.run(data)
    return compiled, report


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("pages")
    made = {}
    for name, kernel, config in [
        ("gemm", polyc.ops.matmul(64, 64, 64), "edge-npu"),
        ("conv", polyc.ops.conv2d((1, 8, 16, 16), (16, 8, 3, 3), padding=1), "tiny"),
    ]:
        compiled, report = _run(kernel, config)
        path = out / f"{name}.html"
        compiled.report_html(path)
        made[name] = (path, compiled, report)
    relu = polyc.ops.relu((16, 16))
    compiled, report = _run(relu, "tiny", schedule=relu)  # DRAM-direct
    compiled.report_html(out / "direct.html")
    made["direct"] = (out / "direct.html", compiled, report)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 8 * 8, 10),
    ).eval()
    kernel = polyc.from_torch(model, (torch.randn(1, 3, 8, 8),))
    compiled, report = _run(kernel, "edge-npu")
    compiled.report_html(out / "model.html")
    made["model"] = (out / "model.html", compiled, report)
    return made


def _attr(dom: str, name: str) -> str | None:
    body = re.search(r"<body([^>]*)>", dom).group(1)
    hit = re.search(rf'{name}="([^"]*)"', body)
    return hit.group(1) if hit else None


@pytest.mark.parametrize("name", ["gemm", "conv", "direct", "model"])
def test_the_page_loads_and_its_script_runs(pages, name):
    from polyc.studies.model_report import model_report

    path, compiled, report = pages[name]
    dom, console = browser.load(path)
    assert _attr(dom, "data-ready") == "1"
    assert _attr(dom, "data-errors") is None
    assert browser.console_errors(console) == []
    nodes = len(tree_nodes(compiled.kernel.schedule))
    assert _attr(dom, "data-nodes") == str(nodes)
    assert len(re.findall(r'<g class="lane"', dom)) == len(report.engines)
    dma_rows = re.search(r"<table class=\"grid\" id=\"dma-table\">(.*?)</table>", dom)
    assert dma_rows.group(1).count("<tr") == 1 + len(compiled.kernel.arrays)
    layers = re.search(r"<table class=\"grid\" id=\"layer-table\">(.*?)</table>", dom)
    rows = len(model_report(compiled, report).layers)
    assert layers.group(1).count("<tr") == 2 + rows  # head, the rows, total
    for c in model_report(compiled, report).layers:
        # a kernel that is not a model is one row, shown by the kernel's name
        shown = c.name if rows > 1 else compiled.name
        assert f"<td>{html.escape(shown)}</td>" in layers.group(1)
    if name == "model":
        assert rows > 1
    placed = name != "direct"
    assert dom.count('class="memmap"') == (1 if placed else 0)


def test_a_link_to_a_node_highlights_its_lines(pages):
    path, compiled, _ = pages["conv"]
    mac = next(n for n in tree_nodes(compiled.kernel.schedule) if n.kind == "tensorize")
    where = ".".join(map(str, mac.path))
    dom, console = browser.load(path, f"#node={where}")
    assert _attr(dom, "data-selected") == where
    hits = re.findall(r'<span class="ln hit"[^>]*>([^<]*)</span>', dom)
    assert hits and all("S1" in h for h in hits), hits
    assert any(h.strip().startswith("pc_mac_S1(") for h in hits)
    assert browser.console_errors(console) == []
    # a band's node also finds its own loops: its comment in the nest and the C
    band = next(n for n in tree_nodes(compiled.kernel.schedule) if "L0_h_t(" in n.text)
    dom, _ = browser.load(path, "#node=" + ".".join(map(str, band.path)))
    hits = [
        h.strip() for h in re.findall(r'<span class="ln hit"[^>]*>([^<]*)</span>', dom)
    ]
    assert "# band L0_h_t" in hits and "/* band L0_h_t */" in hits


def test_a_broken_script_is_caught(tmp_path):
    """The checks above can fail: a page whose script throws is seen doing so."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>"
        "window.addEventListener('error',function(){"
        "document.body.setAttribute('data-errors','1');});"
        "</script><script>no_such_function();</script></body></html>"
    )
    dom, console = browser.load(page)
    assert _attr(dom, "data-errors") == "1"
    assert browser.console_errors(console)


def test_screenshots(pages, tmp_path):
    """A screenshot of each page; with ``POLYC_SCREENSHOTS=DIR`` they are kept
    there too (docs/images/report-*.png, which docs/inspection.md shows, were
    taken so)."""
    for name in ("gemm", "conv", "model"):
        path = pages[name][0]
        shot = browser.screenshot(path, tmp_path / f"{name}.png")
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
        browser.keep(shot, f"report-{name}.png")


@pytest.mark.slow
def test_resnet18_page_stays_small_and_loads(tmp_path):
    from bench import zoo

    model, inputs = zoo.model("resnet18").build()
    kernel = polyc.from_torch(model, inputs)
    compiled = polyc.compile(kernel, config="edge-npu", trace_limit=1 << 20)
    feeds = {kernel.free_inputs[0].name: inputs[0].numpy()}
    _, report = compiled.run(feeds)
    assert report.events_dropped == 0
    path = tmp_path / "resnet18.html"
    text = compiled.report_html(path)
    assert len(text.encode()) < 5_000_000
    dom, console = browser.load(path)
    assert _attr(dom, "data-ready") == "1" and browser.console_errors(console) == []
    assert "layer1.0" in dom and "conv1" in dom
    browser.keep(
        browser.screenshot(path, tmp_path / "resnet18.png"), "report-resnet18.png"
    )
