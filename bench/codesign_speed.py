"""The co-design study's point work with and without analyses shared across points.

    python -m bench.codesign_speed [--turns 2]

Compiles with objective EDP and simulates timing-only the same 16 points of the
example study's grid (``examples/codesign.py``): one array shape and dataflow
(32x32, output-stationary), SRAM 128 KiB, 512 KiB, 2 MiB and 8 MiB, DRAM 8 and
32 B/cycle, both models, config by config, in one fresh process per run as a
sweep worker runs them (the models built once, each run from empty caches: its
own ``POLYC_CACHE_DIR``). Runs take turns: analyses shared across points (layer
models across SRAM capacities and DRAM bandwidths, ``schedules.accel.models``;
dependences across equal programs, ``polyc.ir.deps.by_program``), then not
(``POLYC_SHARED_ANALYSES=0``), and again. CPU seconds (the process's and the C
compiler's) say more than wall time on a shared machine; both are recorded, with
the load. Every point's report and C must be the same in both modes (the run
fails otherwise). Writes ``bench/results/codesign_speed.json`` and regenerates
the table of ``docs/codesign.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, machine

JSON = RESULTS / "codesign_speed.json"
ROOT = Path(__file__).resolve().parent.parent
#: the points: one array shape and dataflow of the study's grid, a spread of its
#: SRAM sizes and DRAM bandwidths
SHAPE = {"rows": 32, "dataflow": "output_stationary"}
SRAM = (131072, 524288, 2097152, 8388608)
DRAM = (8.0, 32.0)
MODES = {"shared": "1", "unshared": "0"}


def points():
    """The example's points of :data:`SHAPE`, :data:`SRAM` and :data:`DRAM`,
    config by config (both models of a config side by side)."""
    from bench.codesign import _example

    example = _example()
    import polyc

    grid = polyc.sweep.grid(example.models(False), ["edp"], [example.GRID])

    def wanted(p) -> bool:
        s = p.config
        return (
            s.mac_array.rows == SHAPE["rows"]
            and s.mac_array.dataflow == SHAPE["dataflow"]
            and s.sram_levels[0].capacity_bytes in SRAM
            and s.dram.bytes_per_cycle in DRAM
        )

    return example, example.config_major([p for p in grid if wanted(p)])


def _cpu() -> tuple[float, float]:
    from polyc.studies.sweep.task import _cpu

    return _cpu()


def worker(out: str) -> None:
    """One run, in this process: every point compiled and run timing-only."""
    import polyc

    example, pts = points()
    start = _cpu()
    built = {"resnet18": example.resnet18(), "encoder": example.encoder()}
    ready = _cpu()
    rows = []
    for p in pts:
        before, t = _cpu(), time.perf_counter()
        compiled = polyc.compile(built[p.label], config=p.config, objective="edp")
        _, report = compiled.run({}, functional=False)
        after = _cpu()
        rows.append(
            {
                "label": p.label,
                "config": p.config.name,
                "cpu_s": after[0] - before[0],
                "gcc_cpu_s": after[1] - before[1],
                "wall_s": time.perf_counter() - t,
                "report": report.to_dict(),
                "c_sha256": hashlib.sha256(compiled.c_source.encode()).hexdigest(),
            }
        )
    result = {"models_cpu_s": ready[0] - start[0], "points": rows}
    Path(out).write_text(json.dumps(result))


def run(mode: str) -> dict:
    """One run of ``mode`` in a fresh process with empty caches."""
    with tempfile.TemporaryDirectory(prefix="polyc-speed-") as tmp:
        env = {
            **os.environ,
            "POLYC_CACHE_DIR": tmp,
            "POLYC_SHARED_ANALYSES": MODES[mode],
            # a sweep worker searches in turn (a pool's process forks none)
            "POLYC_JOBS": "1",
        }
        out = Path(tmp) / "run.json"
        t = time.perf_counter()
        load = os.getloadavg()[0]
        cmd = [sys.executable, "-m", "bench.codesign_speed", "--worker", str(out)]
        subprocess.run(cmd, env=env, cwd=ROOT, check=True)
        got = json.loads(out.read_text())
    got.update(mode=mode, wall_s=time.perf_counter() - t)
    got["load"] = [load, os.getloadavg()[0]]
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=2, help="runs of each mode")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    runs = []
    for turn in range(args.turns):
        for mode in MODES:
            print(f"codesign_speed: turn {turn + 1}, {mode}", flush=True)
            runs.append(run(mode))
    first = {r["mode"]: r["points"] for r in runs[:2]}
    for r in runs:
        for a, b in zip(r["points"], first["shared"]):
            if (a["report"], a["c_sha256"]) != (b["report"], b["c_sha256"]):
                raise SystemExit(
                    f"codesign_speed: {a['label']} on {a['config']} differs between "
                    f"runs ({r['mode']} against shared): a shared analysis is wrong"
                )
    for r in runs:  # the reports are the same: keep one copy
        for row in r["points"]:
            row.pop("report")
    payload = {
        "machine": machine(),
        "shape": SHAPE,
        "sram": SRAM,
        "dram": DRAM,
        "runs": runs,
    }
    JSON.write_text(json.dumps(payload, indent=1) + "\n")
    from bench import results_md

    results_md.regenerate_for(JSON)
    print(table(payload))
    return 0


def _totals(r: dict) -> dict:
    pts = r["points"]
    cpu = sum(p["cpu_s"] for p in pts)
    gcc = sum(p["gcc_cpu_s"] for p in pts)
    return {"n": len(pts), "cpu": cpu, "gcc": gcc, "per": (cpu + gcc) / len(pts)}


def table(payload: dict) -> str:
    """Each run's CPU and wall seconds, and the ratios of the turns."""
    lines = [
        "| turn | analyses | points | CPU s (Python) | CPU s (gcc) | CPU s per point "
        "| wall s | load (start, end) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    per: dict[str, list[float]] = {}
    for i, r in enumerate(payload["runs"]):
        t = _totals(r)
        per.setdefault(r["mode"], []).append(t["per"])
        lines.append(
            f"| {i // len(MODES) + 1} | {r['mode']} | {t['n']} | {t['cpu']:.1f} | "
            f"{t['gcc']:.1f} | {t['per']:.2f} | {r['wall_s']:.0f} | "
            f"{r['load'][0]:.1f}, {r['load'][1]:.1f} |"
        )
    ratios = ", ".join(
        f"{u / s:.2f}" for s, u in zip(per.get("shared", []), per.get("unshared", []))
    )
    lines.append("")
    lines.append(
        f"CPU seconds per point, unshared / shared, turn by turn: {ratios}. Every "
        "point's report and C are the same in every run."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
