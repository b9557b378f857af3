"""A small performance study: CNN and transformer layers x schedules x hardware.

Runs every layer below with each schedule on each shipped config, in a local process
pool (or on a Dask cluster with ``--cluster tcp://host:8786``), prints the table and
writes ``sweep.json``, ``sweep.csv`` and the plots (roofline, cycles against the
roofline bound, MAC utilisation, energy by component; PNG and SVG) to ``--out``::

    .venv/bin/python examples/study.py --out study/
    .venv/bin/python examples/study.py --quick          # smaller layers

The same study from the shell, one layer: ``polyc sweep --ops
gemm=matmul:M=256,N=256,K=256 --configs tiny edge-npu datacenter --schedule none
default --out study/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polyc


def layers(quick: bool) -> dict[str, object]:
    """The layers of the study as ``{label: op spec}`` (see polyc.sweep.spec)."""
    s = 2 if quick else 1  # --quick divides spatial sizes and widths
    return {
        "gemm": f"matmul:M={256 // s},N={256 // s},K={256 // s}",
        "attn-proj": (
            "linear",
            {"input": (64 // s, 256 // s), "weight": (256 // s, 256 // s)},
        ),
        "conv3x3": (
            "conv2d",
            {
                "input": (1, 32 // s, 28 // s, 28 // s),
                "weight": (32 // s, 32 // s, 3, 3),
                "padding": 1,
            },
        ),
        "conv1x1": (
            "conv2d",
            {
                "input": (1, 64 // s, 28 // s, 28 // s),
                "weight": (32 // s, 64 // s, 1, 1),
            },
        ),
        "dwconv3x3": (
            "conv2d",
            {
                "input": (1, 32 // s, 56 // s, 56 // s),
                "weight": (32 // s, 1, 3, 3),
                "padding": 1,
                "groups": 32 // s,
            },
        ),
        "softmax": f"softmax:input={128 // s}x{512 // s},dim=1",
        "gelu": f"gelu:input={128 // s}x{1024 // s}",
    }


def schedules() -> list[str]:
    """The program order (DRAM-direct: the baseline) and polyc's default (the
    accelerator scheduler: placement, tensorization, double buffering).

    ``auto`` (``schedules.auto``, the host scheduler) is left out: a kernel given
    to ``polyc.compile`` as its schedule is compiled as it is, and the host's loop
    order without placement runs DRAM-direct, at the same cycles as ``none``."""
    return ["none", "default"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="study", help="output directory")
    parser.add_argument("--jobs", type=int, help="local processes (default: cores)")
    parser.add_argument("--cluster", help="Dask scheduler address instead")
    parser.add_argument("--quick", action="store_true", help="smaller layers")
    parser.add_argument(
        "--configs", nargs="+", default=["tiny", "edge-npu", "datacenter"]
    )
    parser.add_argument(
        "--schedules", nargs="+", help="default: none, default and auto"
    )
    args = parser.parse_args(argv)

    chosen = args.schedules or schedules()
    points = polyc.sweep.grid(layers(args.quick), chosen, args.configs)
    result = polyc.sweep(points, jobs=args.jobs, cluster=args.cluster)
    print(result.table())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result.to_json(out / "sweep.json")
    result.to_csv(out / "sweep.csv")
    written = result.plot(out)
    print(f"\nwrote {out}/sweep.json, sweep.csv and {len(written)} plots")
    return 1 if result.failed else 0


if __name__ == "__main__":  # workers import this file again: keep the guard
    sys.exit(main())
