"""Compile time of PyTorch models: from an ``nn.Module`` to a simulated run.

    python -m bench.compile_time [--quick]

For the ResNet-18-style network at 64x64 (the issue's goal: under 30 s from module to
simulated run) and the transformer encoder block, side by side in one process, each
phase as a user meets it: ``torch.export`` (after torch's one-time warm-up, measured
on its own), lowering to one polyc Kernel, ``polyc.compile`` with an empty build cache
(the C compiler runs, for the kernel; the simulator's runtime library is built once
before, and timed on its own; checks on, the default, and compiled out), the first simulated
run (with its report and roofline), the same compile again in the process and as a later
process finds it (from the compile cache on disk, polyc/reuse.py), and for comparison
``polyc.build`` (host C, empty cache). Wall seconds and CPU seconds (this process plus the C compiler it runs).
Writes ``bench/results/compile_time.json`` (``compile_time_quick.json`` with
``--quick``) and regenerates its table in docs/results.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from contextlib import contextmanager

from bench import results_md
from bench.common import write_json


@contextmanager
def fresh_cache():
    """An empty build cache, so the C compiler really runs."""
    old = os.environ.get("POLYC_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="polyc-bench-cache-") as tmp:
        os.environ["POLYC_CACHE_DIR"] = tmp
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("POLYC_CACHE_DIR", None)
            else:
                os.environ["POLYC_CACHE_DIR"] = old


class Clock:
    """Wall and CPU seconds (self + waited-for children such as gcc) per phase."""

    def __init__(self):
        self.phases: dict[str, dict[str, float]] = {}

    @contextmanager
    def phase(self, name: str):
        t0, c0 = time.perf_counter(), _cpu()
        yield
        self.phases[name] = {
            "wall_s": time.perf_counter() - t0,
            "cpu_s": _cpu() - c0,
        }


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def models(quick: bool):
    import torch

    from polyc.frontends.torch.models import (
        ResNet18,
        TransformerBlock,
        randomize_batch_norms,
    )

    torch.manual_seed(0)
    size, width = (32, 16) if quick else (64, 64)
    resnet = randomize_batch_norms(ResNet18(num_classes=10, width=width)).eval()
    tokens, d = (16, 64) if quick else (64, 256)
    block = TransformerBlock(d, 8, 4 * d).eval()
    return [
        (
            f"ResNet-18 {size}x{size} width {width}",
            resnet,
            torch.randn(1, 3, size, size),
        ),
        (
            f"transformer block {tokens} tokens width {d}",
            block,
            torch.randn(1, tokens, d),
        ),
    ]


def measure(name: str, model, x, config: str) -> dict:
    import polyc
    from polyc.frontends.torch.export import export, from_exported

    clock = Clock()
    with clock.phase("export"):
        ep = export(model, (x,))
    with clock.phase("lower"):
        kernel = from_exported(ep, name="model")
    with clock.phase("compile"):
        compiled = polyc.compile(kernel, config=config)
    with clock.phase("simulate"):
        _, report = compiled.run(arg0=x.numpy())
    with clock.phase("compile_again"):  # the same program: an earlier compile's
        again = polyc.compile(kernel, config=config)
    _forget()  # as a later process finds the caches: on disk only, and a new
    rebuilt = from_exported(ep, name="model")  # Kernel, whose key is not yet known
    with clock.phase("compile_from_disk"):
        later = polyc.compile(rebuilt, config=config)
    if again.c_source != compiled.c_source or later.c_source != compiled.c_source:
        raise SystemExit(f"{name}: a reused compile's C differs from the first's")
    with clock.phase("compile_nochecks"):
        polyc.compile(kernel, config=config, checks=False)
    with clock.phase("host_build"):
        polyc.build(kernel)
    p = clock.phases
    total = sum(p[k]["wall_s"] for k in ("export", "lower", "compile", "simulate"))
    total_cpu = sum(p[k]["cpu_s"] for k in ("export", "lower", "compile", "simulate"))
    return {
        "model": name,
        "statements": len(kernel.statements),
        "simulated_cycles": report.cycles,
        "phases": p,
        "module_to_simulated_run_wall_s": total,
        "module_to_simulated_run_cpu_s": total_cpu,
    }


def _forget() -> None:
    """Drop the compile and search caches' in-memory copies."""
    from polyc import reuse
    from schedules.accel import cache

    reuse._MEMORY.clear()
    cache._MEMORY.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models")
    parser.add_argument("--config", default="edge-npu")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    import torch  # noqa: F401

    imported = time.perf_counter() - start
    with fresh_cache():
        return _run(args, imported)


def _run(args, imported: float) -> int:
    import torch

    from codegen.accel.direct import build_runtime
    from polyc.frontends.torch.export import export

    warm = Clock()
    with warm.phase("warm-up"):
        export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),))
    with warm.phase("runtime"):
        build_runtime()
    results = [measure(name, m, x, args.config) for name, m, x in models(args.quick)]
    path = write_json(
        "compile_time" + ("_quick" if args.quick else ""),
        {
            "config": args.config,
            "quick": args.quick,
            "import_torch_s": imported,
            "export_warm_up_s": warm.phases["warm-up"]["wall_s"],
            "simulator_runtime_build_s": warm.phases["runtime"]["wall_s"],
            "results": results,
        },
    )
    print(
        f"import torch + polyc frontend: {imported:.1f} s; first torch.export "
        f"warm-up: {warm.phases['warm-up']['wall_s']:.1f} s (once per process); "
        f"simulator runtime build: {warm.phases['runtime']['wall_s']:.1f} s (once, "
        "cached)"
    )
    print(table(results))
    print(f"wrote {path}")
    results_md.regenerate_for(path)
    return 0


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.2f}"


def table(results: list[dict]) -> str:
    """The docs/results.md table of ``results`` (compile_time.json's): wall seconds
    per phase, module to simulated run in bold, and the host build for comparison."""
    lines = [
        "| model | statements | export | lower | `polyc.compile` | first run + report "
        "| module to simulated run | simulated cycles | `polyc.build` (host) "
        "| compile again | again, from disk |",
        "|" + "---|" * 11,
    ]
    for r in results:
        p = {k: v["wall_s"] for k, v in r["phases"].items()}
        cells = [
            r["model"],
            str(r["statements"]),
            *(_s(p[k]) for k in ("export", "lower", "compile", "simulate")),
            f"**{_s(r['module_to_simulated_run_wall_s'])}**",
            f"{r['simulated_cycles']:,}",
            _s(p["host_build"]),
            *(
                _s(p[k]) if k in p else "-"
                for k in ("compile_again", "compile_from_disk")
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
