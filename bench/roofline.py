"""The accelerator scheduler against the roofline, on a fixed suite of layers.

    python -m bench.roofline [--configs tiny edge-npu datacenter] [--layers ...]
                             [--jobs 2]

Every layer of the suite (issue 5: square GEMMs, a GEMV, transformer projections,
ResNet-50 convolutions, a depthwise convolution, attention for 128 tokens and 12
heads of 64) is compiled by ``polyc.compile(kernel, config=...)`` (the
accelerator-aware scheduler) in float16 and simulated in full (functional and
timing) on every config, one process per layer and config. Each record has the
simulated cycles, the roofline bound and their ratio, DRAM bytes against the
unavoidable minimum, MAC-array utilisation, energy, the scheduler's predicted
cycles, compile and simulation time, and ``baseline_cycles``: what the
DRAM-direct program (``polyc.compile(kernel, schedule=kernel)``: every statement
on the scalar core, reading and writing DRAM) takes. The baseline is computed with
the runtime's own per-instance formula times the instance counts (its run is a
sum of per-statement charges with nothing overlapping: see docs/accelerator.md;
``tests/schedules/accel/test_scheduler.py`` checks the formula against the simulator),
because simulating 4096^3 scalar instances would take hours.

Writes ``bench/results/roofline.json`` (a list of records), prints the two tables
docs/results.md shows (the records; the geometric mean of cycles / roofline per
config) and regenerates them there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from bench import results_md
from bench.common import RESULTS, machine

DTYPE = "float16"
CONFIGS = ("tiny", "edge-npu", "datacenter")


def suite() -> dict:
    """name -> (builder, description) of the fixed layer suite."""
    from polyc import ops

    dt = DTYPE
    out = {}
    for n in (256, 1024, 4096):
        out[f"gemm_{n}"] = (lambda n=n: ops.matmul(n, n, n, dt), f"{n}x{n}x{n}")
    out["gemv_4096"] = (lambda: ops.matmul(1, 4096, 4096, dt), "1x4096x4096")
    for m, k, n in ((128, 768, 768), (128, 768, 3072), (128, 3072, 768)):
        out[f"proj_{m}x{k}x{n}"] = (
            lambda m=m, k=k, n=n: ops.matmul(m, n, k, dt),
            f"{m}x{k}x{n} (tokens x in x out)",
        )
    convs = {
        "conv7x7s2_224": ((1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1, "7x7/2 224x224x3->64"),
        "conv3x3_56": ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "3x3 56x56x64->64"),
        "conv1x1_28": ((1, 512, 28, 28), (128, 512, 1, 1), 1, 0, 1, "1x1 28x28x512->128"),
        "conv3x3s2_28": ((1, 128, 28, 28), (128, 128, 3, 3), 2, 1, 1, "3x3/2 28x28x128->128"),
        "dwconv3x3_112": ((1, 32, 112, 112), (32, 1, 3, 3), 1, 1, 32, "depthwise 3x3 112x112x32"),
    }  # fmt: skip
    for name, (x, w, s, p, g, what) in convs.items():
        out[name] = (
            lambda x=x, w=w, s=s, p=p, g=g: ops.conv2d(
                x, w, bias=False, stride=s, padding=p, groups=g, dtype=dt
            ),
            what,
        )
    out["attn_qk"] = (
        lambda: ops.batch_matmul(12, 128, 128, 64, dtype=dt),
        "Q K^T: 12 heads, 128 tokens, 64 per head",
    )
    out["attn_softmax"] = (
        lambda: ops.softmax((12, 128, 128), dim=-1, dtype=dt),
        "softmax over 12x128x128 scores",
    )
    out["attn_pv"] = (
        lambda: ops.batch_matmul(12, 128, 64, 128, dtype=dt),
        "P V: 12 heads, 128x128 by 128x64",
    )
    return out


def baseline_cycles(kernel, spec) -> int:
    """Cycles of the DRAM-direct program: per statement, its instances times the
    runtime's per-instance cost (``pc_stmt``: statement cycles, its operations,
    the DRAM latency of its reads, its DRAM bytes at the DRAM's rate)."""
    from accelerator.hardware.roofline import count_points
    from accelerator.hardware.spec import OP_CLASSES
    from polyc.ir.expr import ops_count

    total = 0
    dram = spec.dram
    sc = spec.scalar
    for s in kernel.statements:
        ops = ops_count(s.body)
        loads = [s.target, *s.reads]
        nbytes = sum(ld.dtype.itemsize for ld in loads)
        per = (
            sc.statement_cycles
            + sum(ops.get(c, 0) * sc.cycles[c] for c in OP_CLASSES)
            + (dram.latency_cycles if s.reads else 0)
            + math.ceil(nbytes / dram.bytes_per_cycle)
        )
        total += per * count_points(s.domain)
    return total


def run_one(name: str, config: str) -> dict:
    """Compile and simulate one layer on one config; returns its record."""
    import polyc
    from accelerator import load_config

    build, what = suite()[name]
    kernel = build()
    spec = load_config(config)
    t0 = time.perf_counter()
    compiled = polyc.compile(kernel, config=spec, checks=False)
    t1 = time.perf_counter()
    rng = np.random.default_rng(0)
    inputs = {
        a.name: (rng.standard_normal(a.concrete_shape({})) * 0.1).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }
    _, report = compiled.run(inputs)
    t2 = time.perf_counter()
    r = report.roofline
    return {
        "layer": name,
        "what": what,
        "config": config,
        "dtype": DTYPE,
        "cycles": report.cycles,
        "roofline_cycles": report.roofline_cycles,
        "ratio": report.ratio,
        "bound": r.bound,
        "engine_bound_cycles": report.engine_bound_cycles,
        "engine_ratio": report.engine_ratio,
        "engine_bound": report.engine_bound.bound,
        "dram_bytes": report.dram_bytes,
        "min_dram_bytes": r.min_dram_bytes,
        "mac_utilization": report.mac_utilization,
        "energy_pj": report.energy_pj,
        "baseline_cycles": baseline_cycles(kernel, spec),
        "predicted_cycles": compiled.choice.predicted_cycles,
        "simulation": "full",
        "compile_s": round(t1 - t0, 2),
        "simulate_s": round(t2 - t1, 2),
        "dma_transfers": report.dma_transfers,
    }


def _cost(job) -> float:
    """Rough host cost of a job, to start the heavy ones first."""
    name, config = job
    return {"gemm_4096": 100.0, "gemm_1024": 2.0}.get(name, 1.0) * (
        2.0 if config == "tiny" else 1.0
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--layers", nargs="*", default=None)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--only",
        action="store_true",
        help="update the given layers/configs in the existing results",
    )
    args = parser.parse_args(argv)
    names = args.layers or list(suite())
    jobs = sorted(
        ((n, c) for n in names for c in args.configs), key=_cost, reverse=True
    )
    start = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, n, c) for n, c in jobs]
        records = [f.result() for f in futures]
    order = {n: i for i, n in enumerate(suite())}
    path = RESULTS / "roofline.json"
    if args.only and path.exists():
        old = json.loads(path.read_text())
        keep = {(r["layer"], r["config"]) for r in records}
        records += [r for r in old if (r["layer"], r["config"]) not in keep]
    records.sort(key=lambda r: (CONFIGS.index(r["config"]), order[r["layer"]]))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=2) + "\n")
    meta = {
        "machine": machine(),
        "seconds": round(time.perf_counter() - start, 1),
        # the run's own jobs: with --only the records also hold older runs' rows
        "configs": args.configs,
        "layers": names,
        "only": args.only,
    }
    (RESULTS / "roofline_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(render(records), summary(records), sep="\n\n")
    print(f"\nwrote {path} ({meta['seconds']} s on {args.jobs} processes)")
    results_md.regenerate_for(path)
    return 0


#: the layers bound by the vector unit, which the roofline (MACs and DRAM) ignores
VECTOR_BOUND = {"attn_softmax": "softmax", "dwconv3x3_112": "depthwise"}
#: the suite's goal: geomean cycles / roofline at most this, no layer above 2.0
TARGET = 1.3


def render(records: list[dict]) -> str:
    """The docs/results.md table of ``records`` (roofline.json): one row per layer
    and config."""
    head = (
        "| config | layer | cycles | roofline | ratio | DRAM / min | MAC util "
        "| energy uJ | DRAM-direct / placed | predicted / simulated |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in records:
        cells = [
            r["config"],
            r["layer"],
            f"{r['cycles']:,}",
            f"{r['roofline_cycles']:,}",
            f"{r['ratio']:.2f}",
            f"{r['dram_bytes'] / max(1, r['min_dram_bytes']):.2f}",
            f"{r['mac_utilization'] or 0.0:.2f}",
            f"{r['energy_pj'] / 1e6:,.1f}",
            f"{r['baseline_cycles'] / r['cycles']:,.0f}x",
            f"{r['predicted_cycles'] / r['cycles']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(records: list[dict]) -> str:
    """The per-config table of docs/results.md: geometric mean of cycles over the
    roofline, without the vector-bound layers, and the layers above 2.0 (a
    geomean within :data:`TARGET` in bold)."""
    without = " and ".join(sorted(VECTOR_BOUND.values(), reverse=True))
    count = {len([r for r in records if r["config"] == c]) for c in CONFIGS} - {0}
    layers = f" ({count.pop()} layers)" if len(count) == 1 else ""
    lines = [
        f"| config | geomean cycles / roofline{layers} | without {without} "
        "| layers above 2.0 |",
        "|---|---|---|---|",
    ]
    for config in CONFIGS:
        rows = [r for r in records if r["config"] == config]
        if not rows:
            continue
        mean = statistics.geometric_mean([r["ratio"] for r in rows])
        rest = [r["ratio"] for r in rows if r["layer"] not in VECTOR_BOUND]
        above = sorted((r for r in rows if r["ratio"] > 2.0), key=lambda r: r["ratio"])
        cells = [
            config,
            f"**{mean:.2f}**" if mean <= TARGET else f"{mean:.2f}",
            f"{statistics.geometric_mean(rest):.2f}" if rest else "-",
            ", ".join(
                f"{VECTOR_BOUND.get(r['layer'], r['layer'])} {r['ratio']:.3g}"
                for r in above
            )
            or "none",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
