"""What a timing-only run saves: ``Compiled.run(..., functional=False)`` against the
functional run of the same compiled module.

    python -m bench.timing_only [--quick]

Side by side in one run, for a few layers and a whole model on edge-npu (each
compiled once, auto-scheduled): the CPU time of whole ``run()`` calls (context,
run, report), functional and timing-only, best of interleaved rounds, and a check
that both reports are equal (cycles, bytes, energy, the trace). Writes
``bench/results/timing_only.json`` (``timing_only_quick.json`` with ``--quick``)
and regenerates its table in docs/results.md.
"""

from __future__ import annotations

import argparse

import numpy as np

import polyc
from bench import results_md
from bench.common import write_json
from bench.sim_overhead import interleaved
from codegen.accel.direct import numpy_inputs
from polyc import ops

CONFIG = "edge-npu"


def cases(quick: bool):
    """``(name, make, schedule)``: a kernel maker, and ``"dram"`` for a
    DRAM-direct run (every statement on the scalar core)."""
    n = 128 if quick else 256
    c = 16 if quick else 64
    hw = 14 if quick else 28
    out = [
        (f"matmul {n}^3 float16", lambda: ops.matmul(n, n, n, dtype="float16"), None),
        (
            f"conv2d 3x3 {c}->{c} {hw}x{hw} float32",
            lambda: ops.conv2d((1, c, hw, hw), (c, c, 3, 3), padding=1),
            None,
        ),
        (
            f"layer_norm {4 * n}x{n} float32",
            lambda: ops.layer_norm((4 * n, n), (n,)),
            None,
        ),
        (
            f"matmul {n // 2}^3 float32, DRAM-direct",
            lambda: ops.matmul(n // 2, n // 2, n // 2),
            "dram",
        ),
    ]
    if not quick:
        out.append(("ResNet-18 (16 wide, 32x32 image)", _resnet18, None))
    return out


def _resnet18():
    import torch

    from polyc.frontends.torch.models import ResNet18, randomize_batch_norms

    torch.manual_seed(0)
    net = randomize_batch_norms(ResNet18(num_classes=10, width=16)).eval()
    return polyc.from_torch(net, (torch.randn(1, 3, 32, 32),))


def measure(name: str, kernel, schedule, rounds: int) -> dict:
    rng = np.random.default_rng(0)
    x = numpy_inputs(kernel, rng)
    compiled = polyc.compile(
        kernel, config=CONFIG, schedule=kernel if schedule == "dram" else None
    )
    _, full = compiled.run(x)
    _, timed = compiled.run(x, functional=False)
    if full.to_dict() != timed.to_dict() or full.events != timed.events:
        raise AssertionError(f"{name}: the timing-only report differs")
    t_full, t_timed = interleaved(
        [lambda: compiled.run(x), lambda: compiled.run(x, functional=False)], rounds
    )
    return {
        "kernel": name,
        "mode": compiled.mode,
        "macs": full.macs,
        "cycles": full.cycles,
        "functional_ms": 1e3 * t_full,
        "timing_only_ms": 1e3 * t_timed,
        "speedup": t_full / t_timed,
        "reports_equal": True,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke)")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 5
    rows = [measure(n, make(), s, rounds) for n, make, s in cases(args.quick)]
    path = write_json(
        "timing_only" + ("_quick" if args.quick else ""),
        {"config": CONFIG, "rounds": rounds, "rows": rows},
    )
    print(table(rows))
    print(f"\nwritten {path}")
    if not args.quick:
        results_md.regenerate_for(path)
    return 0


def table(rows: list[dict]) -> str:
    """The docs/results.md table of ``rows`` (timing_only.json's)."""
    lines = [
        "| kernel | mode | MACs | cycles | functional ms | timing-only ms "
        "| speed-up | reports equal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['mode']} | {r['macs'] / 1e6:.1f}M | "
            f"{r['cycles']:,} | {r['functional_ms']:.2f} | "
            f"{r['timing_only_ms']:.2f} | {r['speedup']:.1f}x | "
            f"{'yes' if r['reports_equal'] else 'no'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
