"""Compile time of PyTorch models from an empty cache: from an ``nn.Module`` to a
simulated run.

    python -m bench.compile_time [--quick] [--config NAME] [--models a,b] [--out PATH]

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
(from the compile cache on disk, polyc/reuse.py), and ``polyc.build`` (host C) for
comparison. The "runtime library built before" column is the compile after
``make``: measured the same way as the first, in a second new process with an
empty cache directory, the runtime library installed beforehand by ``polyc
prebuild`` into a directory of its own (``$POLYC_INSTALLED_DIR``); nothing else
of the first process is reused (imports, in-memory memos). Wall seconds and CPU
seconds (the process plus the C compilers and search workers it waits for).
Writes ``bench/results/compile_time.json`` (``compile_time_quick.json`` with
``--quick``) and regenerates its table in docs/results.md; with ``--out`` the JSON
goes there and docs/results.md is left as it is.
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
from bench.common import machine, out_argument, write_json


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


def _exported(name: str, quick: bool, clock: Clock):
    """``(label, inputs, exported program, kernel)`` of a model, the export and the
    lowering timed by ``clock``."""
    from polyc.frontends.torch.export import export, from_exported

    label, module, inputs = model(name, quick)
    with clock.phase("export"):
        ep = export(module, inputs)
    with clock.phase("lower"):
        kernel = from_exported(ep, name="model")
    return label, inputs, ep, kernel


def measure(name: str, quick: bool, config: str) -> dict:
    """One model's phases, in this process, from the cache directory it has
    (empty: :func:`main` gives each model a process and a directory of its own)."""
    import polyc
    from polyc.frontends.torch.export import from_exported

    clock = Clock()
    label, inputs, ep, kernel = _exported(name, quick, clock)
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
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
        "c_sha256": _digest(compiled.c_source),
    }


def measure_after_make(name: str, quick: bool, config: str) -> dict:
    """The compile of a model in this process as after ``make``: the runtime
    library found installed (``$POLYC_INSTALLED_DIR``, :func:`_in_process` runs
    ``polyc prebuild`` into it first), the cache directory empty.

    Raises:
        SystemExit: the runtime library was built rather than found installed.
    """
    import polyc
    from codegen import build as cbuild
    from codegen.accel.direct import build_runtime

    clock = Clock()
    _, _, _, kernel = _exported(name, quick, clock)
    with clock.phase("compile"):
        compiled = polyc.compile(kernel, config=config)
    runtime = build_runtime().path
    if runtime.parent != cbuild.installed_dir():
        raise SystemExit(
            f"{name}: the runtime library was built ({runtime}) instead of found "
            f"in {cbuild.installed_dir()}, so the compile is not one after make"
        )
    return {
        "phases": clock.phases,
        "compile_stages_s": dict(compiled.stage_seconds),
        "load_average": round(os.getloadavg()[0], 2),
        "c_sha256": _digest(compiled.c_source),
    }


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


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
    parser.add_argument("--after-make", action="store_true", help=argparse.SUPPRESS)
    out_argument(parser)
    args = parser.parse_args(argv)
    if args.one:
        return _one(args)
    names = args.models.split(",") if args.models else list(MODELS)
    names = names[:2] if args.quick and not args.models else names
    runs = [_in_process(n, args) for n in names]
    payload = {
        "config": args.config,
        "quick": args.quick,
        "import_torch_s": max(r["import_torch_s"] for r in runs),
        "export_warm_up_s": max(r["export_warm_up_s"] for r in runs),
        "results": [r["result"] for r in runs],
    }
    if args.out is None:
        path = write_json("compile_time" + ("_quick" if args.quick else ""), payload)
    else:
        path = args.out
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    print(table([r["result"] for r in runs]))
    print(stages_table([r["result"] for r in runs]))
    print(f"wrote {path}")
    if args.out is None:
        results_md.regenerate_for(path)
    return 0


def _in_process(name: str, args) -> dict:
    """:func:`_one` of ``name`` in a new process with an empty cache directory and
    nothing installed, then its compile after ``make`` in another new process
    (:func:`measure_after_make`): its phase ``compile_runtime_built`` and stages
    ``compile_runtime_built_stages_s`` in the result."""
    cmd = [sys.executable, "-m", "bench.compile_time", "--one", name]
    cmd += ["--config", args.config] + (["--quick"] if args.quick else [])
    with tempfile.TemporaryDirectory(prefix="polyc-bench-cache-") as tmp:
        # nothing built at all: not even the runtime library ``make`` installs
        # (``polyc prebuild``)
        run = _run(name, cmd, tmp, os.path.join(tmp, "nothing-installed"))
    with tempfile.TemporaryDirectory(prefix="polyc-bench-installed-") as installed:
        env = {**os.environ, "POLYC_INSTALLED_DIR": installed}
        prebuild = [sys.executable, "-m", "polyc.cli", "prebuild"]
        done = subprocess.run(prebuild, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench.compile_time: prebuild failed:\n{done.stderr}")
        with tempfile.TemporaryDirectory(prefix="polyc-bench-cache-") as tmp:
            after = _run(name, [*cmd, "--after-make"], tmp, installed)
    if after["c_sha256"] != run["result"]["c_sha256"]:
        raise SystemExit(f"{name}: the compile after make gives another C")
    r = run["result"]
    r["phases"]["compile_runtime_built"] = after["phases"]["compile"]
    r["compile_runtime_built_stages_s"] = after["compile_stages_s"]
    for key, label in (
        ("compile", "empty cache"),
        ("compile_runtime_built", "after make"),
    ):
        p = r["phases"][key]
        print(
            f"{r['model']}: compile, {label}: {p['wall_s']:.1f} s wall, "
            f"{p['cpu_s']:.1f} s CPU",
            flush=True,
        )
    return run


def _run(name: str, cmd: list[str], cache: str, installed: str) -> dict:
    """The JSON a new process running ``cmd`` prints, with the cache directory
    ``cache`` and the installed modules of ``installed``."""
    env = {**os.environ, "POLYC_CACHE_DIR": cache, "POLYC_INSTALLED_DIR": installed}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench.compile_time: {name} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _one(args) -> int:
    start = time.perf_counter()
    import torch

    from polyc.frontends.torch.export import export

    imported = time.perf_counter() - start
    warm = Clock()
    with warm.phase("warm-up"):
        export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),))
    if args.after_make:
        print(json.dumps(measure_after_make(args.one, args.quick, args.config)))
        return 0
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
