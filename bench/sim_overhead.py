"""What simulating costs: host time per simulated MAC, against the plain host C.

    python -m bench.sim_overhead [--quick]

Side by side in one run, for each kernel: the kernel compiled for the host
(``polyc.build``, no simulator), and the same kernel run on the simulator in
DRAM-direct mode (``polyc.compile(kernel, config="edge-npu", schedule=kernel)``) with the per-access
checks on and compiled out. Times are whole calls as a user makes them (input
preparation, context, run, report). Writes ``bench/results/sim_overhead.json`` and
regenerates its table in docs/results.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import polyc
from bench import results_md
from bench.common import write_json
from codegen.accel.direct import numpy_inputs
from polyc import ops


def kernels(quick: bool):
    n = 96 if quick else 256
    c = 16 if quick else 64
    hw = 14 if quick else 28
    return [
        (f"matmul {n}^3 float32", ops.matmul(n, n, n)),
        (f"matmul {n}^3 int8", ops.matmul(n, n, n, dtype="int8")),
        (
            f"conv2d 3x3 {c}->{c} {hw}x{hw} float32",
            ops.conv2d((1, c, hw, hw), (c, c, 3, 3), padding=1),
        ),
    ]


def interleaved(fns, rounds: int) -> list[float]:
    """Best CPU time of each function over ``rounds`` rounds that run them in turn
    (so a slow period of the machine hits every variant alike)."""
    best = [float("inf")] * len(fns)
    for fn in fns:
        fn()  # warm-up
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.thread_time()
            fn()
            best[i] = min(best[i], time.thread_time() - start)
    return best


def measure(name: str, kernel, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    x = numpy_inputs(kernel, rng)
    host = polyc.build(kernel)
    checked = polyc.compile(kernel, config="edge-npu", schedule=kernel)
    fast = polyc.compile(kernel, config="edge-npu", schedule=kernel, checks=False)
    want = host(x)
    for compiled in (checked, fast):
        got, report = compiled.run(x)
        for k, v in want.items():
            np.testing.assert_array_equal(got[k], v)
    macs = report.macs
    t_host, t_checked, t_fast = interleaved(
        [lambda: host(x), lambda: checked.run(x), lambda: fast.run(x)], repeat
    )
    return {
        "kernel": name,
        "macs": macs,
        "simulated_cycles": report.cycles,
        "host_ns_per_mac": 1e9 * t_host / macs,
        "sim_checks_ns_per_mac": 1e9 * t_checked / macs,
        "sim_nochecks_ns_per_mac": 1e9 * t_fast / macs,
        "ratio_checks": t_checked / t_host,
        "ratio_nochecks": t_fast / t_host,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke)")
    args = parser.parse_args(argv)
    rows = [measure(n, k, 3 if args.quick else 5) for n, k in kernels(args.quick)]
    path = write_json(
        "sim_overhead" + ("_quick" if args.quick else ""),
        {"config": "edge-npu", "mode": "DRAM-direct", "rows": rows},
    )
    print(table(rows))
    print(f"\nwritten {path}")
    results_md.regenerate_for(path)
    return 0


def table(rows: list[dict]) -> str:
    """The docs/results.md table of ``rows`` (sim_overhead.json's): host ns per MAC
    and the simulator's, with checks compiled out and on, with their ratios."""
    lines = [
        "| kernel | MACs | host ns/MAC | simulator, checks compiled out "
        "| simulator, checks on |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['macs'] / 1e6:.1f}M | {r['host_ns_per_mac']:.2f} | "
            f"{r['sim_nochecks_ns_per_mac']:.2f} ns ({r['ratio_nochecks']:.2f}x) | "
            f"{r['sim_checks_ns_per_mac']:.2f} ns ({r['ratio_checks']:.2f}x) |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
