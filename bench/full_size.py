"""ResNet-50 at 224x224 in a co-design study: what each point costs, and where.

    python -m bench.full_size [--quick]

ResNet-50 is ``transformers``' ``ResNetModel`` with ResNet-50's configuration
(bottleneck blocks, depths 3, 4, 6, 3, hidden sizes 256 to 2048, a 64-channel
stem; random weights, nothing downloaded), batch 1, float32, a 224x224 image,
through ``polyc.from_torch`` as the model suite builds its models
(``bench.zoo``). One fresh process with empty caches (its own
``POLYC_CACHE_DIR``; ``POLYC_JOBS=1``, as a sweep worker searches) compiles it
with objective EDP and runs it timing-only on :data:`POINTS` in turn, as a study
worker meets them: edge-npu as shipped (the first compile, cold), edge-npu with
DRAM at twice the energy per byte (every layer's search from the per-layer
search cache), then a 32x32 array (a new model view: every model built again)
at 512 KiB / 32 B/cycle and at other SRAM sizes and DRAM bandwidths (models, and
for SRAM alone estimates, shared). Per point: the compile's stages (the
schedule stage split into the layers' searches and applying the choice:
tensorize, place, legality; codegen; gcc), the timing-only run, CPU seconds
(this process's and gcc's), resident memory. Then, on two points, the
functional run beside the timing-only one in turns (timing, functional,
timing, functional): their wall and CPU seconds, and reports that must be
equal (cycles, busy time, bytes and energy per level, the trace) or the run
fails. Writes ``bench/results/full_size.json`` (``full_size_quick.json`` with
``--quick``: ResNet-50's blocks at depths 1, 1, 1, 1 on a 64x64 image) and
regenerates the tables of docs/codesign.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench.common import RESULTS, machine
from polyc.studies.sweep.task import _cpu

ROOT = Path(__file__).resolve().parent.parent


def _wide(sram: int, dram: float) -> dict:
    """edge-npu's edits for a 32x32 array, ``sram`` bytes of SRAM and ``dram``
    bytes per cycle of DRAM."""
    return {
        "mac_array.rows": 32,
        "mac_array.cols": 32,
        "memory.sram.capacity_bytes": sram,
        "memory.dram.bytes_per_cycle": dram,
    }


#: (label, what it shows, edits of edge-npu as accelerator.vary's keys)
POINTS = (
    ("edge-npu", "first compile, cold", {}),
    (
        "edge-npu, DRAM 2x pJ/B",
        "same schedule view: searches cached",
        {"memory.dram.read_pj_per_byte": 320.0, "memory.dram.write_pj_per_byte": 320.0},
    ),
    ("32x32, 512 KiB, 32 B/c", "new array: models built", _wide(524288, 32.0)),
    ("32x32, 2 MiB, 32 B/c", "SRAM only: estimates shared", _wide(2097152, 32.0)),
    ("32x32, 2 MiB, 8 B/c", "DRAM only: models shared", _wide(2097152, 8.0)),
    ("32x32, 512 KiB, 8 B/c", "SRAM only: estimates shared", _wide(524288, 8.0)),
)
#: the points whose functional run is compared with the timing-only one
FUNCTIONAL = ("edge-npu", "32x32, 512 KiB, 32 B/c")
OBJECTIVE = "edp"


def resnet50(quick: bool = False):
    """``(module, inputs)``: ResNet-50 from ``transformers`` (random weights), its
    last hidden state as output, a 224x224 image; with ``quick`` one block per
    stage and a 64x64 image."""
    import torch

    from bench import zoo

    t = zoo.transformers_module()
    torch.manual_seed(0)
    cfg = t.ResNetConfig(
        embedding_size=64,
        hidden_sizes=[256, 512, 1024, 2048],
        depths=[1, 1, 1, 1] if quick else [3, 4, 6, 3],
        layer_type="bottleneck",
    )
    module = zoo.hidden(torch)(t.ResNetModel(cfg)).eval()
    side = 64 if quick else 224
    return module, (torch.randn(1, 3, side, side),)


def spec_of(edits: dict):
    """edge-npu with ``edits``, a Spec as a study's grid makes it."""
    import accelerator

    if not edits:
        return accelerator.load_config("edge-npu")
    [spec] = accelerator.vary("edge-npu", {k: [v] for k, v in edits.items()})
    return spec


# the worker ------------------------------------------------------------------------


class _Clock:
    """Wall and CPU seconds (this process's) spent in a few steps of the
    compile, wrapped for this run: the layers' searches, applying the choice
    (tensorize, place, legality), the whole schedule stage and codegen."""

    STEPS = (
        ("schedules.accel.cache", "search_layers", "search"),
        ("schedules.accel.scheduler", "_build_first", "apply"),
        ("polyc.stages", "_schedule", "schedule"),
        ("codegen.accel.placed", "generate", "codegen"),
    )

    def __init__(self):
        import importlib

        self.seconds: dict[str, float] = {}
        for module, name, label in self.STEPS:
            self._wrap(importlib.import_module(module), name, label)

    def _wrap(self, module, name: str, label: str) -> None:
        fn = getattr(module, name)

        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                for key, now, then in (
                    (f"{label}_s", time.perf_counter(), wall),
                    (f"{label}_cpu_s", time.process_time(), cpu),
                ):
                    self.seconds[key] = self.seconds.get(key, 0.0) + now - then

        setattr(module, name, timed)

    @contextmanager
    def reading(self, into: dict):
        self.seconds = {}
        yield
        into["steps"] = {k: round(v, 3) for k, v in self.seconds.items()}


def _rss_mb() -> tuple[float, float]:
    """This process's resident memory now and at its peak, MiB."""
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return now / 2**20, peak / 2**20


def _counts() -> dict:
    from schedules.accel import cache, estimate_cache, models

    return {
        "search": dict(cache.STATS),
        "models": dict(models.STATS),
        "estimates": dict(estimate_cache.STATS),
    }


def worker(out: str, quick: bool) -> None:
    """Every point compiled and run timing-only, then the functional runs."""
    import polyc

    clock = _Clock()
    start = time.perf_counter()
    module, inputs = resnet50(quick)
    kernel = polyc.from_torch(module, inputs)
    result = {
        "frontend_s": time.perf_counter() - start,
        "statements": len(kernel.statements),
        "macs": None,
        "points": [],
        "functional": [],
    }
    del module
    compiled_at = {}
    for label, shows, edits in POINTS:
        spec = spec_of(edits)
        row = {"label": label, "shows": shows, "config": spec.name}
        row["load"] = os.getloadavg()[0]
        cpu0, t0 = _cpu(), time.perf_counter()
        with clock.reading(row):
            compiled = polyc.compile(kernel, config=spec, objective=OBJECTIVE)
        t1 = time.perf_counter()
        _, report = compiled.run({}, functional=False)
        t2, cpu1 = time.perf_counter(), _cpu()
        row.update({k: round(v, 3) for k, v in compiled.stage_seconds.items()})
        row.update(
            compile_s=t1 - t0,
            timing_run_s=t2 - t1,
            cpu_s=cpu1[0] - cpu0[0],
            gcc_cpu_s=cpu1[1] - cpu0[1],
            cycles=report.cycles,
            dram_bytes=report.dram_bytes,
            energy_pj=report.energy_pj,
            counts=_counts(),
        )
        row["rss_mb"], row["peak_rss_mb"] = _rss_mb()
        result["macs"] = report.mac_array_macs
        print(
            f"full_size: {label}: compile {row['compile_s']:.1f} s, timing-only run "
            f"{row['timing_run_s']:.2f} s, {report.cycles:,} cycles, "
            f"{row['rss_mb']:.0f} MiB",
            flush=True,
        )
        result["points"].append(row)
        if label in FUNCTIONAL:
            compiled_at[label] = compiled
    for label, compiled in compiled_at.items():
        result["functional"].append(_both(label, kernel, compiled))
    Path(out).write_text(json.dumps(result))


def _both(label: str, kernel, compiled) -> dict:
    """The timing-only and the functional run of ``compiled``, in turns; their
    reports must be equal."""
    import numpy as np

    from codegen.accel.direct import numpy_inputs

    feeds = numpy_inputs(kernel, np.random.default_rng(0))
    runs: dict[str, list] = {"timing": [], "functional": []}
    reports = {}
    for _ in range(2):
        for mode in runs:
            cpu0, t0 = _cpu(), time.perf_counter()
            _, report = compiled.run(feeds, functional=mode == "functional")
            took = (time.perf_counter() - t0, _cpu()[0] - cpu0[0])
            runs[mode].append(took)
            reports[mode] = report
    timed, full = reports["timing"], reports["functional"]
    if timed.to_dict() != full.to_dict() or timed.events != full.events:
        raise SystemExit(f"full_size: {label}: the timing-only report differs")
    row = {"label": label, "cycles": full.cycles, "reports_equal": True}
    for mode, took in runs.items():
        row[f"{mode}_s"] = [w for w, _ in took]
        row[f"{mode}_cpu_s"] = [c for _, c in took]
    print(
        f"full_size: {label}: functional {min(row['functional_s']):.2f} s, "
        f"timing-only {min(row['timing_s']):.2f} s, reports equal",
        flush=True,
    )
    return row


# the driver ------------------------------------------------------------------------


def run(quick: bool) -> dict:
    """The worker in a fresh process with empty caches."""
    with tempfile.TemporaryDirectory(prefix="polyc-full-size-") as tmp:
        env = {**os.environ, "POLYC_CACHE_DIR": tmp, "POLYC_JOBS": "1"}
        out = Path(tmp) / "run.json"
        load = os.getloadavg()[0]
        t = time.perf_counter()
        cmd = [sys.executable, "-m", "bench.full_size", "--worker", str(out)]
        subprocess.run(
            cmd + (["--quick"] if quick else []), env=env, cwd=ROOT, check=True
        )
        got = json.loads(out.read_text())
    got.update(wall_s=time.perf_counter() - t, load=[load, os.getloadavg()[0]])
    return got


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one block per stage, 64x64")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.quick)
        return 0
    payload = {"machine": machine(), "objective": OBJECTIVE, **run(args.quick)}
    path = RESULTS / ("full_size_quick.json" if args.quick else "full_size.json")
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(table(payload))
    print()
    print(functional_table(payload))
    if not args.quick:
        from bench import results_md

        results_md.regenerate_for(path)
    return 0


def table(payload: dict) -> str:
    """One row per point: CPU seconds by step, wall seconds, memory, cycles."""
    lines = [
        "| point | what it shows | CPU s: search | apply | rest of schedule "
        "| codegen | gcc | other | all | wall s | timing-only run s | RSS MiB "
        "| cycles | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["points"]:
        c = _split(r)
        lines.append(
            f"| {r['label']} | {r['shows']} | {c['search']:.1f} | "
            f"{c['apply']:.1f} | {c['schedule']:.1f} | {c['codegen']:.1f} | "
            f"{r['gcc_cpu_s']:.1f} | {c['other']:.1f} | "
            f"{r['cpu_s'] + r['gcc_cpu_s']:.1f} | "
            f"{r['compile_s'] + r['timing_run_s']:.1f} | {r['timing_run_s']:.2f} | "
            f"{r['rss_mb']:,.0f} | {r['cycles']:,} | {r['load']:.1f} |"
        )
    lo, hi = payload["load"]
    lines.append("")
    lines.append(
        f"{payload['statements']} statements, {payload['macs'] / 1e9:.2f} G MACs; "
        f"frontend (transformers model to Kernel) {payload['frontend_s']:.1f} s. "
        "CPU seconds are this process's (compile and timing-only run: `other` is "
        "the rest of it, the run included) and gcc's; wall seconds the compile "
        f"and the run. The whole run took {payload['wall_s']:.0f} s, 1-minute "
        f"load average {lo:.1f} at its start and {hi:.1f} at its end (2 cores)."
    )
    return "\n".join(lines)


def _split(r: dict) -> dict[str, float]:
    """A point's CPU seconds by step, each without the steps inside it."""
    steps = r["steps"]

    def cpu(name):
        return steps.get(f"{name}_cpu_s", 0.0)

    out = {"search": cpu("search"), "apply": cpu("apply"), "codegen": cpu("codegen")}
    out["schedule"] = cpu("schedule") - out["search"] - out["apply"]
    out["other"] = r["cpu_s"] - cpu("schedule") - out["codegen"]
    return out


def functional_table(payload: dict) -> str:
    """The functional and the timing-only run of the same compiled model, best of
    two turns each."""
    lines = [
        "| point | cycles | functional run s (CPU s) | timing-only run s (CPU s) "
        "| functional / timing-only (CPU) | reports equal |",
        "|---|---|---|---|---|---|",
    ]
    for r in payload["functional"]:
        f, t = min(r["functional_s"]), min(r["timing_s"])
        fc, tc = min(r["functional_cpu_s"]), min(r["timing_cpu_s"])
        lines.append(
            f"| {r['label']} | {r['cycles']:,} | {f:.2f} ({fc:.2f}) | "
            f"{t:.2f} ({tc:.2f}) | {fc / tc:.1f}x | "
            f"{'yes' if r['reports_equal'] else 'no'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
