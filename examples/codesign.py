"""A hardware-software co-design study: two whole models over a grid of edge NPUs.

ResNet-18 (polyc's, 16 channels wide, a 32x32 image) and a BERT-style encoder block
(4 heads, width 128, 16 tokens) are compiled, scheduled with objective EDP and
simulated on every point of a grid over edge-npu: MAC array 8x8 to 64x64 (4
sizes), SRAM 128 KiB to 8 MiB (7 sizes), DRAM 8 to 64 B/cycle (4), weight- or
output-stationary (224 points). Points are simulated timing-only (the functional
run's cycles, bytes and energy without moving data); 4 of them also run
functionally and must agree (``polyc.sweep``'s ``functional_sample``). Each
point's area, latency, energy (with leakage) and EDP come from the config's area
model; the Pareto front of (latency, energy, area) over both models together is
printed, tabulated and plotted. Points are committed to ``OUT/study.db`` as they
finish: run the same command again to resume a study that was stopped::

    .venv/bin/python examples/codesign.py --out codesign/       # see docs/codesign.md
    .venv/bin/python examples/codesign.py --quick --out cd/     # two layers, 2 configs
    polyc sweep --from codesign/study.db --out replot/          # while it runs, too

``bench/codesign.py`` runs it for ``docs/codesign.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polyc

#: the grid of the study (accelerator.vary's text form)
GRID = (
    "edge-npu:mac_array.rows=8..64*2;mac_array.cols=rows;"
    "memory.sram.capacity_bytes=131072..8388608*2;"
    "memory.dram.bytes_per_cycle=8..64*2;"
    "mac_array.dataflow=weight_stationary,output_stationary"
)
QUICK_GRID = "edge-npu:mac_array.rows=8,16;mac_array.cols=rows"
OBJECTIVE = "edp"


def resnet18():
    """ResNet-18 (polyc.frontends.torch.models), 16 channels wide, 32x32 image."""
    import torch

    from polyc.frontends.torch.models import ResNet18, randomize_batch_norms

    torch.manual_seed(0)
    net = randomize_batch_norms(ResNet18(num_classes=10, width=16)).eval()
    return polyc.from_torch(net, (torch.randn(1, 3, 32, 32),))


def encoder():
    """A BERT-style encoder block: attention (4 heads, width 128) and an MLP
    (hidden 512), 16 tokens."""
    import torch

    from polyc.frontends.torch.models import TransformerBlock

    torch.manual_seed(0)
    block = TransformerBlock(128, 4, 512).eval()
    return polyc.from_torch(block, (torch.randn(1, 16, 128),))


def models(quick: bool) -> dict[str, object]:
    """``{label: op}``: the whole models, or two small layers with ``quick``."""
    if quick:
        return {
            "gemm": "matmul:M=32,N=32,K=32",
            "conv": "conv2d:input=1x8x8x8,weight=8x8x3x3,padding=1",
        }
    return {"resnet18": resnet18, "encoder": encoder}


def run(
    out: Path,
    quick: bool = False,
    jobs=None,
    cluster=None,
    progress=True,
    limit: int | None = None,
):
    """Run (or resume) the study into ``out``; returns the SweepResult. ``limit``:
    only the first points of the (config by config, array shape by array shape,
    shuffled) order: whole configs, every model of each, of the first shapes."""
    points = config_major(
        polyc.sweep.grid(models(quick), [OBJECTIVE], [QUICK_GRID if quick else GRID])
    )
    if limit is not None:
        points = points[:limit]
    out.mkdir(parents=True, exist_ok=True)
    return polyc.sweep(
        points,
        jobs=jobs,
        cluster=cluster,
        progress=progress,
        db=out / "study.db",
        study="codesign-quick" if quick else "codesign",
    )


def config_major(points: list, seed: int = 0) -> list:
    """``points`` (op-major, as :func:`polyc.sweep.grid` gives them) ordered by
    config, the models of one config side by side. Configs of one array shape
    and dataflow (here they differ only in SRAM capacity and DRAM bandwidth,
    which do not change a layer's cost model: :mod:`schedules.accel.models`)
    run one after the other, so that each worker's models serve its next
    points; those groups and the configs within each in a fixed shuffled order.
    A study stopped early (or still running) then holds whole configs, every
    model of each, from the first groups."""
    import random

    from accelerator.hardware.spec import model_view

    by_model: dict[object, list] = {}
    for p in points:
        by_model.setdefault(p.label, []).append(p)
    groups: dict[object, list] = {}
    for same in zip(*by_model.values()):
        groups.setdefault(model_view(same[0].config), []).append(same)
    rng = random.Random(seed)
    order = list(groups.values())
    rng.shuffle(order)
    for group in order:
        rng.shuffle(group)
    return [p for group in order for same in group for p in same]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="codesign", help="results directory")
    p.add_argument("--quick", action="store_true", help="two layers, 2 configs")
    p.add_argument("--jobs", "-j", type=int, help="local worker processes")
    p.add_argument("--cluster", help="a Dask scheduler address instead")
    p.add_argument("--limit", type=int, help="only the first N points (a sample)")
    args = p.parse_args(argv)
    out = Path(args.out)
    result = run(out, args.quick, args.jobs, args.cluster, limit=args.limit)
    print(result.table())
    print()
    print(result.pareto_table())
    for label in dict.fromkeys(r["label"] for r in result.records):
        print()
        print(result.pareto_table(label))
    result.to_json(out / "sweep.json")
    result.to_csv(out / "sweep.csv")
    result.plot(out, formats=("png", "svg"))
    print(f"\nwrote {out}/: study.db, sweep.json, sweep.csv, pareto.png/svg, plots")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
