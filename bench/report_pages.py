"""The inspection page's size and load time on the suite's large models.

    python -m bench.report_pages [--models resnet18,transformer-block]

Per model (bench.zoo, float32, edge-npu, the trace kept whole): compile, run once,
write ``compiled.report_html``, then load it in headless Chromium (``--dump-dom``)
three times. Recorded: the page's bytes, the milliseconds from navigation to the
page's script finishing (``data-ready-ms``, measured by the page itself with
``performance.now()``), the wall seconds of a whole browser run on the page and on
an empty page (Chromium's own start-up, to subtract), and the seconds
``report_html`` took. The issue's budget: under 5 MB, rendered in under 2 s.
Writes ``bench/results/report_pages.json``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import zoo
from bench.common import write_json

MODELS = ("resnet18", "transformer-block")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]


def _load(browser: str, page: Path) -> tuple[float, int | None]:
    start = time.perf_counter()
    done = subprocess.run(
        [browser, *FLAGS, "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall = time.perf_counter() - start
    hit = re.search(r'data-ready-ms="(\d+)"', done.stdout)
    return wall, int(hit.group(1)) if hit else None


def measure(name: str, browser: str, out: Path) -> dict:
    import polyc

    model, inputs = zoo.model(name).build()
    kernel = polyc.from_torch(model, inputs)
    compiled = polyc.compile(kernel, config="edge-npu", trace_limit=1 << 20)
    feeds = dict(
        zip(
            [a.name for a in kernel.free_inputs],
            [x.numpy() for x in inputs],
            strict=True,
        )
    )
    _, report = compiled.run(feeds)
    page = out / f"{name}.html"
    start = time.perf_counter()
    text = compiled.report_html(page)
    html_s = time.perf_counter() - start
    empty = out / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>")
    loads = [_load(browser, page) for _ in range(3)]
    blank = min(_load(browser, empty)[0] for _ in range(3))
    return {
        "model": name,
        "config": "edge-npu",
        "cycles": report.cycles,
        "trace_events": len(report.events),
        "bytes": len(text.encode()),
        "report_html_s": round(html_s, 3),
        "ready_ms": min(ms for _, ms in loads if ms is not None),
        "browser_wall_s": round(min(w for w, _ in loads), 3),
        "empty_page_wall_s": round(blank, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("bench.report_pages: chromium is not installed (make chromium)")
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            row = measure(name, browser, Path(tmp))
            rows.append(row)
            print(
                f"{name}: {row['bytes'] / 1e6:.2f} MB, script done at "
                f"{row['ready_ms']} ms, browser run {row['browser_wall_s']} s "
                f"(empty page {row['empty_page_wall_s']} s), report_html "
                f"{row['report_html_s']} s",
                flush=True,
            )
    print(f"wrote {write_json('report_pages', {'rows': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
