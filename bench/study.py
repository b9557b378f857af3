"""The study of ``examples/study.py`` as a benchmark: layers x schedules x configs.

    python -m bench.study [--quick] [--jobs 2]

Runs the study's layers (its full sizes unless ``--quick``) with each of its
schedules (``none``: the kernel as written, DRAM-direct on the scalar core;
``default``: what ``polyc.compile`` chooses) on every shipped config, through
``polyc.sweep`` on a local pool. The simulated cycles do not depend on the host, so
the record is the same on every machine; the wall time is the one host number.
Writes ``bench/results/study.json`` (``study_quick.json`` with ``--quick``): per
point its layer, schedule, config, cycles and roofline bound; and regenerates the
geometric-mean table in docs/results.md.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import results_md
from bench.common import geomean, write_json

CONFIGS = ("tiny", "edge-npu", "datacenter")


def _ratio(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}x"
    return f"{value:.1f}x" if value >= 100 else f"{value:.2f}x"


def table(payload: dict) -> str:
    """The docs/results.md table of ``payload`` (study.json): per schedule and
    config, the geometric mean of simulated cycles over the roofline bound of the
    points that ran."""
    points = [p for p in payload["points"] if p["status"] == "ok"]
    configs = [c for c in CONFIGS if any(p["config"] == c for p in points)]
    schedules = list(dict.fromkeys(p["schedule"] for p in points))
    lines = [
        "| schedule | " + " | ".join(configs) + " |",
        "|---|" + "---|" * len(configs),
    ]
    for s in schedules:
        cells = []
        for c in configs:
            ratios = [
                p["ratio"] for p in points if p["schedule"] == s and p["config"] == c
            ]
            cells.append(_ratio(geomean(ratios)) if ratios else "-")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the study, write its JSON, print and regenerate its table."""
    import polyc
    from examples.study import layers, schedules

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the study's --quick")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    grid = polyc.sweep.grid(layers(args.quick), schedules(), list(CONFIGS))
    start = time.perf_counter()
    result = polyc.sweep(grid, jobs=args.jobs, progress=False)
    wall = time.perf_counter() - start
    points = [
        {
            k: row[k]
            for k in ("label", "schedule", "config", "status", "cycles")
            + ("roofline_cycles", "ratio")
        }
        for row in result.rows()
    ]
    payload = {
        "quick": args.quick,
        "jobs": args.jobs,
        "wall_s": wall,
        "load_average": os.getloadavg(),
        "points": points,
    }
    path = write_json("study" + ("_quick" if args.quick else ""), payload)
    print(table(payload))
    print(f"\n{len(points)} points in {wall:.1f} s on {args.jobs} processes; {path}")
    results_md.regenerate_for(path)
    return 1 if result.failed else 0


if __name__ == "__main__":  # workers import this module again: keep the guard
    raise SystemExit(main())
