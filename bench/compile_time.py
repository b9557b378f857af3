"""Compile time of PyTorch models from an empty cache: from an ``nn.Module`` to a
simulated run.

    python -m bench.compile_time [--quick] [--config NAME] [--models a,b]

For polyc's ResNet-18 at 64x64 (the issue's goal: at most 3 s from an empty cache,
gcc included), two transformers of the model suite (:mod:`bench.zoo`: ``hf-bert``
and ``hf-llama``) and its slowest CNN to compile (``hf-mobilenetv2``), each in a
process of its own with an empty cache directory, so that nothing is reused: each
phase as a user meets it, ``torch.export`` (after
torch's one-time warm-up, timed on its own), lowering to one polyc Kernel,
``polyc.compile`` from the empty cache (the simulator's runtime library included: it
builds in the background while the scheduler runs) with its stages (schedule,
codegen, build: ``Compiled.stage_seconds``; no runtime library installed by
``polyc prebuild`` either), the first simulated run (with its
report), the same compile again in the process and as a later process finds it
(from the compile cache on disk, polyc/reuse.py), a compile from another empty
cache with the runtime library already built (what a compile costs once the
library is there), and ``polyc.build`` (host C) for comparison. Wall seconds and
CPU seconds (the process plus the C compilers and search workers it waits for).
Writes ``bench/results/compile_time.json`` (``compile_time_quick.json`` with
``--quick``) and regenerates its table in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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


#: the models (``--quick``: the first two, ResNet-18 smaller); hf-mobilenetv2
#: is the suite's slowest to compile on edge-npu (its depthwise layers split
#: across the engines, docs/compile-time.md)
MODELS = ("resnet18", "hf-bert", "hf-llama", "hf-mobilenetv2")


def model(name: str, quick: bool):
    """``(label, module, inputs)`` of a model of :data:`MODELS`."""
    import torch

    if name == "resnet18":
        from polyc.frontends.torch.models import ResNet18, randomize_batch_norms

        torch.manual_seed(0)
        size, width = (32, 16) if quick else (64, 64)
        net = randomize_batch_norms(ResNet18(num_classes=10, width=width)).eval()
        label = f"ResNet-18 {size}x{size} width {width}"
        return label, net, (torch.randn(1, 3, size, size),)
    from bench import zoo

    m = zoo.model(name)
    module, inputs = m.build("float32")
    if m.family == "transformer":
        return f"{name} ({zoo.TOKENS} tokens)", module, inputs
    return f"{name} ({zoo.IMAGE}x{zoo.IMAGE})", module, inputs


def measure(name: str, quick: bool, config: str) -> dict:
    """One model's phases, in this process, from the cache directory it has
    (empty: :func:`main` gives each model a process and a directory of its own)."""
    import polyc
    from polyc.frontends.torch.export import export, from_exported

    label, module, inputs = model(name, quick)
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    clock = Clock()
    with clock.phase("export"):
        ep = export(module, inputs)
    with clock.phase("lower"):
        kernel = from_exported(ep, name="model")
    with clock.phase("compile"):
        compiled = polyc.compile(kernel, config=config)
    stages = dict(compiled.stage_seconds)
    with clock.phase("simulate"):
        _, report = compiled.run(**feeds)
    with clock.phase("compile_again"):  # the same program: an earlier compile's
        again = polyc.compile(kernel, config=config)
    _forget()  # as a later process finds the caches: on disk only, and a new
    rebuilt = from_exported(ep, name="model")  # Kernel, whose key is not yet known
    with clock.phase("compile_from_disk"):
        later = polyc.compile(rebuilt, config=config)
    if again.c_source != compiled.c_source or later.c_source != compiled.c_source:
        raise SystemExit(f"{name}: a reused compile's C differs from the first's")
    with tempfile.TemporaryDirectory(prefix="polyc-bench-cache-") as other:
        os.environ["POLYC_CACHE_DIR"] = other  # empty again; the runtime is built
        _forget()
        with clock.phase("compile_runtime_built"):
            polyc.compile(from_exported(ep, name="model"), config=config)
    with clock.phase("host_build"):
        polyc.build(kernel)
    p = clock.phases
    total = sum(p[k]["wall_s"] for k in ("export", "lower", "compile", "simulate"))
    total_cpu = sum(p[k]["cpu_s"] for k in ("export", "lower", "compile", "simulate"))
    return {
        "model": label,
        "statements": len(kernel.statements),
        "simulated_cycles": report.cycles,
        "phases": p,
        "compile_stages_s": stages,
        "module_to_simulated_run_wall_s": total,
        "module_to_simulated_run_cpu_s": total_cpu,
        "load_average": round(os.getloadavg()[0], 2),
    }


def _forget() -> None:
    """Drop the compile and search caches' in-memory copies."""
    from polyc import reuse
    from schedules.accel import cache

    reuse._MEMORY.clear()
    cache._MEMORY.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small models")
    parser.add_argument("--config", default="edge-npu")
    parser.add_argument("--models", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a model, in this process
    args = parser.parse_args(argv)
    if args.one:
        return _one(args)
    names = args.models.split(",") if args.models else list(MODELS)
    names = names[:2] if args.quick and not args.models else names
    runs = [_in_process(n, args) for n in names]
    path = write_json(
        "compile_time" + ("_quick" if args.quick else ""),
        {
            "config": args.config,
            "quick": args.quick,
            "import_torch_s": max(r["import_torch_s"] for r in runs),
            "export_warm_up_s": max(r["export_warm_up_s"] for r in runs),
            "results": [r["result"] for r in runs],
        },
    )
    print(table([r["result"] for r in runs]))
    print(stages_table([r["result"] for r in runs]))
    print(f"wrote {path}")
    results_md.regenerate_for(path)
    return 0


def _in_process(name: str, args) -> dict:
    """:func:`_one` of ``name`` in a new process with an empty cache directory."""
    cmd = [sys.executable, "-m", "bench.compile_time", "--one", name]
    cmd += ["--config", args.config] + (["--quick"] if args.quick else [])
    with tempfile.TemporaryDirectory(prefix="polyc-bench-cache-") as tmp:
        # nothing built at all: not even the runtime library ``make`` installs
        # (``polyc prebuild``); the "runtime library built before" column is
        # what a compile costs with it, as after ``make``
        installed = os.path.join(tmp, "nothing-installed")
        env = {**os.environ, "POLYC_CACHE_DIR": tmp, "POLYC_INSTALLED_DIR": installed}
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench.compile_time: {name} failed:\n{out.stderr}")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    r = run["result"]
    print(
        f"{r['model']}: compile {r['phases']['compile']['wall_s']:.1f} s wall, "
        f"{r['phases']['compile']['cpu_s']:.1f} s CPU (load {r['load_average']})",
        flush=True,
    )
    return run


def _one(args) -> int:
    start = time.perf_counter()
    import torch

    from polyc.frontends.torch.export import export

    imported = time.perf_counter() - start
    warm = Clock()
    with warm.phase("warm-up"):
        export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),))
    result = measure(args.one, args.quick, args.config)
    print(
        json.dumps(
            {
                "import_torch_s": imported,
                "export_warm_up_s": warm.phases["warm-up"]["wall_s"],
                "result": result,
            }
        )
    )
    return 0


def _s(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.2f}"


def table(results: list[dict]) -> str:
    """The docs/results.md table of ``results`` (compile_time.json's): wall seconds
    per phase, the compile from an empty cache in bold with its CPU seconds, and
    the host build for comparison."""
    lines = [
        "| model | statements | export | lower | `polyc.compile`, empty cache "
        "| CPU s | runtime library built before | first run + report "
        "| module to simulated run | `polyc.build` (host) | compile again "
        "| again, from disk |",
        "|" + "---|" * 12,
    ]
    for r in results:
        p = {k: v["wall_s"] for k, v in r["phases"].items()}
        cells = [
            r["model"],
            str(r["statements"]),
            _s(p["export"]),
            _s(p["lower"]),
            f"**{_s(p['compile'])}**",
            _s(r["phases"]["compile"]["cpu_s"]),
            _s(p["compile_runtime_built"]) if "compile_runtime_built" in p else "-",
            _s(p["simulate"]),
            _s(r["module_to_simulated_run_wall_s"]),
            _s(p["host_build"]),
            *(
                _s(p[k]) if k in p else "-"
                for k in ("compile_again", "compile_from_disk")
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stages_table(results: list[dict]) -> str:
    """The stages of the compile from an empty cache (wall seconds)."""
    lines = [
        "| model | schedule | codegen | build (gcc, waits for the runtime library) "
        "| load average |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        st = r.get("compile_stages_s", {})
        cells = [r["model"], *(_s(st.get(k, 0.0)) for k in ("schedule", "codegen"))]
        cells += [_s(st.get("build", 0.0)), str(r.get("load_average", "-"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
