"""The co-design study of ``examples/codesign.py`` and the area model's calibration.

    python -m bench.codesign [--out DIR] [--quick]

Runs (or resumes: its points are committed to ``DIR/study.db``) the example study,
two whole models over 64 edge-npu points with objective EDP, then writes
``bench/results/codesign.json`` (per point: config, model, status, cycles,
latency, energy, area, power, EDP; the runs' wall seconds and the machine) and
``docs/codesign/pareto.png``, and regenerates the tables of ``docs/codesign.md``:
the Pareto front of the two models together, the best point per objective, and
the area model against TPU v1's published floorplan (computed here, no run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import polyc
from bench.common import DOCS, RESULTS, machine

ROOT = Path(__file__).resolve().parent.parent
OUT = RESULTS / "codesign_study"
JSON = RESULTS / "codesign.json"
PLOT = DOCS / "codesign" / "pareto.png"
#: the record fields kept per point (the full records stay in the study's db)
FIELDS = (
    "label",
    "config",
    "status",
    "cycles",
    "dram_bytes",
    "latency_s",
    "energy_j",
    "dynamic_energy_j",
    "leakage_energy_j",
    "area_mm2",
    "power_w",
    "edp_js",
    "error_type",
)


#: a point's timing parts (polyc.studies.sweep.task), which add up to its work
POINT_PARTS = ("kernel_s", "schedule_s", "compile_s", "run_s", "functional_s")
#: compile_s by stage
COMPILE_STAGES = ("compile_schedule_s", "compile_codegen_s", "compile_build_s")
#: a point's CPU seconds: its worker's and the C compiler's (polyc.sweep's task)
CPU_PARTS = ("cpu_s", "child_cpu_s")


class LoadSampler:
    """The machine's 1-minute load average, sampled every ``every`` seconds while
    the block runs (the study shares the machine: its wall time means little
    without it)."""

    def __init__(self, every: float = 20.0):
        import threading

        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import os

        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [0.0]
        return {
            "samples": len(self.samples),
            "every_s": self.every,
            "min": min(s),
            "mean": sum(s) / len(s),
            "max": max(s),
        }


def _example():
    path = ROOT / "examples" / "codesign.py"
    spec = importlib.util.spec_from_file_location("codesign_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the co-design study and calibration")
    p.add_argument("--out", default=str(OUT), help="the study's directory")
    p.add_argument("--quick", action="store_true", help="the example's --quick")
    p.add_argument("--jobs", "-j", type=int, help="local worker processes")
    p.add_argument(
        "--limit",
        type=int,
        help="only the first N points (the example's order: config by config, "
        "shuffled, so a sample of the grid with both models of each config)",
    )
    args = p.parse_args(argv)
    example = _example()
    out = Path(args.out)
    with LoadSampler() as load:
        result = example.run(out, args.quick, args.jobs, limit=args.limit)
    meta = dict(result.meta)
    runs = meta.get("runs") or [{"wall_s": meta.get("wall_s"), "ran": len(result)}]
    seconds = {
        k: sum((r.get("timing") or {}).get(k) or 0.0 for r in result.records)
        for k in (*POINT_PARTS, *COMPILE_STAGES, *CPU_PARTS)
    }
    payload = {
        "machine": machine(),
        "grid": example.QUICK_GRID if args.quick else example.GRID,
        "grid_points": len(example.models(args.quick))
        * len(
            polyc.sweep.expand_configs(
                [example.QUICK_GRID if args.quick else example.GRID]
            )
        ),
        "limit": args.limit,
        "objective": example.OBJECTIVE,
        "models": list(dict.fromkeys(r["label"] for r in result.records)),
        "runs": runs,
        "wall_s": sum(r["wall_s"] or 0 for r in runs),
        "point_s": sum(seconds[k] for k in POINT_PARTS),
        "seconds": seconds,
        "load": load.summary(),
        "simulated": meta.get("simulated"),
        "functional_sample": meta.get("functional_sample"),
        "points": [{k: row.get(k) for k in FIELDS} for row in result.rows()],
        "calibration": calibration(),
    }
    path = JSON if not args.quick else RESULTS / "codesign_quick.json"
    payload["load_runs"] = _load_runs(path, runs, payload["load"])
    path.write_text(json.dumps(payload, indent=1) + "\n")
    if not args.quick:
        PLOT.parent.mkdir(parents=True, exist_ok=True)
        result.plot_pareto(PLOT)
        from bench import results_md

        results_md.regenerate_for(path)
    print(front(payload))
    return 1 if result.failed else 0


def _load_runs(path: Path, runs: list, load: dict) -> list:
    """The load of every run of the study: the previous JSON's (when its runs are
    the first of these, i.e. this run resumed that study), then this run's."""
    try:
        before = json.loads(path.read_text())
    except (OSError, ValueError):
        return [load]
    if before.get("runs") != runs[: len(before.get("runs") or [None])]:
        return [load]
    return [*before.get("load_runs", [before.get("load")]), load]


# the tables ------------------------------------------------------------------------


def _workload(payload: dict) -> list[dict]:
    from polyc.studies.sweep import pareto

    return pareto.workload(payload["points"])


def front(payload: dict) -> str:
    """The Pareto front of the study's models together, as Markdown."""
    from polyc.studies.sweep import pareto

    pts = _workload(payload)
    n = len(pareto.front(pts))
    ok = sum(p["status"] == "ok" for p in payload["points"])
    total = payload.get("grid_points")
    of = f" of the grid's {total}" if total and total != len(payload["points"]) else ""
    head = (
        f"{len(payload['points'])}{of} points ({ok} ok), {len(pts)} configs that "
        f"ran every model; {n} on the front. Study wall time "
        f"{payload['wall_s'] / 60:.1f} min ({payload['point_s'] / 60:.1f} min of "
        f"point work) on {payload['machine'].get('cpus', '?')} cores"
    )
    loads = [x for x in payload.get("load_runs") or [payload.get("load")] if x]
    if loads:
        n = sum(x["samples"] for x in loads)
        mean = sum(x["mean"] * x["samples"] for x in loads) / n
        head += (
            f", 1-minute load average {mean:.1f} on average "
            f"({min(x['min'] for x in loads):.1f} to "
            f"{max(x['max'] for x in loads):.1f}"
            + (f", over {len(loads)} runs" if len(loads) > 1 else "")
            + ")"
        )
    head += "." + _where(payload) + "\n\n"
    return head + pareto.markdown(pts)


def _where(payload: dict) -> str:
    """Where the point work went, as a sentence (empty for an older JSON)."""
    sec = payload.get("seconds")
    if not sec or not payload.get("point_s"):
        return ""
    total = payload["point_s"]
    parts = {
        "schedule (the search)": sec.get("compile_schedule_s", 0),
        "codegen": sec.get("compile_codegen_s", 0),
        "gcc": sec.get("compile_build_s", 0),
        "timing-only runs": sec.get("run_s", 0),
        "functional checks": sec.get("functional_s", 0),
        "building the models": sec.get("kernel_s", 0),
    }
    rest = total - sum(parts.values())
    text = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts.items())
    out = f" Point work: {text}, the rest {100 * rest / total:.0f}%."
    cpu = sec.get("cpu_s", 0) + sec.get("child_cpu_s", 0)
    if cpu:  # recorded since the sweep's records hold CPU seconds
        n = len(payload["points"])
        out += (
            f" CPU: {cpu / 60:.1f} min ({cpu / n:.2f} s per point, gcc "
            f"{100 * sec.get('child_cpu_s', 0) / cpu:.0f}%), {cpu / 120:.1f} min "
            "on two idle cores."
        )
    return out


def best(payload: dict) -> str:
    """Per model and for both together, the best point of each objective."""
    from polyc.studies.sweep import pareto

    lines = [
        "| models | objective | config | latency ms | energy mJ | area mm2 | EDP uJ s |",
        "|---|---|---|---|---|---|---|",
    ]
    groups = {"both": _workload(payload)}
    for label in payload["models"]:
        groups[label] = pareto.points(payload["points"], label)
    for name, pts in groups.items():
        for why, p in pareto.chosen(pts).items():
            lines.append(
                f"| {name} | {why.removeprefix('min ')} | `{p['config']}` | "
                f"{p['latency_s'] * 1e3:.4g} | {p['energy_j'] * 1e3:.4g} | "
                f"{p['area_mm2']:.3g} | {p['edp_js'] * 1e6:.4g} |"
            )
    return "\n".join(lines)


# calibration -----------------------------------------------------------------------

#: TPU v1 (Jouppi et al., "In-Datacenter Performance Analysis of a Tensor
#: Processing Unit", ISCA 2017): 28 nm, die <= 331 mm2, 700 MHz, 256x256 int8
#: MACs, 24 MiB unified buffer, 4 MiB of accumulators, DDR3 at 34 GB/s; the
#: floorplan's shares of the die, read off its figure (approximate)
TPU_V1 = {
    "die_mm2": 331.0,
    "shares": {
        "mac_array": 0.24,
        "sram.unified_buffer": 0.29,
        "sram.accumulators": 0.06,
        "vector": 0.06,
        "dram_phy": 0.03,
    },
    "fitted": ("mac_array", "sram.unified_buffer", "dram_phy"),
}


def tpu_v1_spec():
    """hw-a reshaped as TPU v1, its area coefficients scaled from 45 to 28 nm by
    (28/45)^2 (the DRAM PHY, analog, is not scaled)."""
    import accelerator

    s = (28 / 45) ** 2
    base = accelerator.load_config("hw-a").area
    (spec,) = accelerator.vary(
        "hw-a",
        {
            "clock_ghz": 0.7,
            "mac_array.rows": 256,
            "mac_array.cols": 256,
            "vector.lanes": 256,
            "memory.sram_in.capacity_bytes": 24 << 20,
            "memory.sram_w.capacity_bytes": 256 << 10,
            "memory.sram_out.capacity_bytes": 4 << 20,
            "memory.dram.bytes_per_cycle": 34 / 0.7,
            "area.node_nm": 28,
            "area.mac_um2.int8": base.mac_um2["int8"] * s,
            "area.vector_lane_um2": base.vector_lane_um2 * s,
            "area.scalar_core_um2": base.scalar_core_um2 * s,
            "area.sram_um2_per_kib": base.sram_um2_per_kib * s,
            "area.sram_bank_um2": base.sram_bank_um2 * s,
            "area.dma_channel_um2": base.dma_channel_um2 * s,
        },
    )
    return spec


def calibration() -> list[dict]:
    """Per TPU v1 component: the model's mm2 against the floorplan's."""
    import accelerator

    parts = accelerator.area(tpu_v1_spec()).components
    names = {
        "sram.sram_in": "sram.unified_buffer",
        "sram.sram_out": "sram.accumulators",
    }
    model = {names.get(k, k): v for k, v in parts.items()}
    rows = []
    for comp, share in TPU_V1["shares"].items():
        published = share * TPU_V1["die_mm2"]
        rows.append(
            {
                "component": comp,
                "model_mm2": model[comp],
                "published_mm2": published,
                "fitted": comp in TPU_V1["fitted"],
            }
        )
    return rows


def calibration_table(rows: list[dict]) -> str:
    lines = [
        "| TPU v1 component | model mm2 | floorplan mm2 | model / floorplan | |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["model_mm2"] / r["published_mm2"]
        how = "fitted (the default's source)" if r["fitted"] else "predicted"
        lines.append(
            f"| {r['component']} | {r['model_mm2']:.1f} | {r['published_mm2']:.1f} "
            f"| {ratio:.2f} | {how} |"
        )
    return "\n".join(lines)


def calibration_section(payload: dict) -> str:
    return calibration_table(payload["calibration"])


if __name__ == "__main__":
    raise SystemExit(main())
