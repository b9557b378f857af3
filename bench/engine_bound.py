"""The roofline suite's recorded cycles against the engine bound.

    python -m bench.engine_bound [--results bench/results/roofline.json]

Reads the records ``python -m bench.roofline`` wrote (simulated cycles per layer and
config), computes each layer's engine bound (``accelerator.hardware.bound``: no
simulation, only the kernel and the config) and prints per layer the cycles over
the roofline and over the engine bound, the binding engines, and per config the
geometric means of both ratios. A record whose cycles are below its engine bound
would be a bug in the bound (or in the simulator): the script exits 1 then.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.common import RESULTS


def measure(records: list[dict]) -> list[dict]:
    """``records`` with ``engine_bound_cycles``, ``engine_ratio`` and
    ``engine_bound`` (the binding engines) computed for each."""
    from accelerator import load_config
    from accelerator.hardware.bound import engine_bound
    from bench.roofline import suite

    layers = suite()
    kernels: dict = {}
    specs: dict = {}
    out = []
    for r in records:
        name, config = r["layer"], r["config"]
        if name not in kernels:
            kernels[name] = layers[name][0]()
        if config not in specs:
            specs[config] = load_config(config)
        eb = engine_bound(kernels[name], specs[config], {})
        out.append(
            dict(
                r,
                engine_bound_cycles=eb.cycles,
                engine_ratio=r["cycles"] / eb.cycles,
                engine_bound=eb.bound,
            )
        )
    return out


def table(records: list[dict]) -> str:
    """One line per layer and config, then the geometric means per config."""
    lines = [
        f"{'config':<11} {'layer':<20} {'cycles':>14} {'roofline':>14} {'x roof':>7} "
        f"{'engine bound':>14} {'x engine':>8}  binding"
    ]
    for r in records:
        lines.append(
            f"{r['config']:<11} {r['layer']:<20} {r['cycles']:>14,} "
            f"{r['roofline_cycles']:>14,} {r['ratio']:>7.2f} "
            f"{r['engine_bound_cycles']:>14,} {r['engine_ratio']:>8.2f}  "
            f"{r['engine_bound']}"
        )
    lines.append("")
    for config in dict.fromkeys(r["config"] for r in records):
        mine = [r for r in records if r["config"] == config]
        roof = statistics.geometric_mean([r["ratio"] for r in mine])
        eng = statistics.geometric_mean([r["engine_ratio"] for r in mine])
        lines.append(
            f"{config}: geomean cycles / roofline {roof:.2f}, / engine bound {eng:.2f}"
            f" ({len(mine)} layers)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS / "roofline.json")
    args = ap.parse_args(argv)
    data = json.loads(args.results.read_text())
    records = measure(data["records"] if isinstance(data, dict) else data)
    print(table(records))
    below = [r for r in records if r["cycles"] < r["engine_bound_cycles"]]
    for r in below:
        print(f"below its engine bound: {r['layer']} on {r['config']}")
    return 1 if below else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
