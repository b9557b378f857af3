"""Benchmark of the automatic scheduler on the host (one run, side by side).

For each kernel: the plain loop nest compiled by ``gcc -O3 -march=native``; polyc's C
for the untransformed kernel (program order); polyc's C after ``schedules.auto`` on
one thread (no parallel marks) and with its OpenMP parallel loops (all cores); and,
when ``clang-19`` with Polly is installed, the plain loop nest through
``clang -O3 -mllvm -polly`` (serial and with ``-polly-parallel``). Every variant runs
on the same inputs and is checked against polyc's untransformed C before it is timed.

Run: ``.venv/bin/python -m bench.sched`` (``--quick`` for small sizes). Writes
``bench/results/schedules.json``, prints a markdown table and regenerates it in
docs/schedules.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import results_md
from bench.common import RESULTS, geomean, write_json

CONTRACTIONS = ("matmul", "2mm", "syrk", "conv2d")
#: rounds of the variants in turns (best of each)
ROUNDS = 5


@dataclass
class Case:
    name: str
    build: object  # () -> Kernel
    plain: tuple[list[str], str]
    flops: float


def cases(quick: bool) -> list[Case]:
    from bench import plain_c
    from polyc import ops
    from polyc.ops import polybench as ex

    n_mm, n_2mm, n_syrk = (256, 200, 256) if quick else (1024, 800, 1024)
    n_st, steps = (200, 20) if quick else (1000, 100)
    hw, ch = (28, 16) if quick else (56, 64)
    n_sm = 256 if quick else 1024
    return [
        Case("matmul", lambda: ex.matmul(n_mm), plain_c.matmul(n_mm), 2 * n_mm**3),
        Case("2mm", lambda: ex.two_mm(n_2mm), plain_c.two_mm(n_2mm), 4 * n_2mm**3),
        Case("syrk", lambda: ex.syrk(n_syrk), plain_c.syrk(n_syrk), n_syrk**3),
        Case(
            "conv2d",
            lambda: ops.conv2d((1, ch, hw, hw), (ch, ch, 3, 3), bias=False, padding=1),
            plain_c.conv2d(ch, ch, hw),
            2 * ch * ch * 9 * hw * hw,
        ),
        Case(
            "jacobi2d",
            lambda: ex.jacobi2d(n_st, steps),
            plain_c.jacobi2d(n_st, steps),
            10 * steps * (n_st - 2) ** 2,
        ),
        Case(
            "seidel2d",
            lambda: ex.seidel2d(n_st, steps),
            plain_c.seidel2d(n_st, steps),
            9 * steps * (n_st - 2) ** 2,
        ),
        Case(
            "softmax",
            lambda: ops.softmax((n_sm, n_sm)),
            plain_c.softmax(n_sm),
            5 * n_sm * n_sm,
        ),
    ]


# compilers ---------------------------------------------------------------------------
def polly_compiler() -> str | None:
    """A clang that runs Polly (``-mllvm -polly``), or None."""
    for cc in ("clang-19", "clang"):
        path = shutil.which(cc)
        if not path:
            continue
        src = Path(tempfile.mkdtemp()) / "t.c"
        src.write_text("void f(float *a) { for (int i = 0; i < 8; i++) a[i] = 0; }\n")
        proc = subprocess.run(
            [path, "-O3", "-mllvm", "-polly", "-c", str(src), "-o", os.devnull],
            capture_output=True,
        )
        if proc.returncode == 0:
            return path
    return None


_BUILD_DIR = Path(tempfile.mkdtemp(prefix="polyc-bench-"))


def compile_plain(cc: str, flags: list[str], names: list[str], body: str):
    """``fn(arrays)`` running the plain C ``plain(...)`` built with ``cc flags``."""
    import cffi

    from bench.plain_c import HEADER

    text = HEADER + body
    key = hashlib.sha256((cc + " ".join(flags) + text).encode()).hexdigest()[:16]
    c_file, so_file = _BUILD_DIR / f"p{key}.c", _BUILD_DIR / f"p{key}.so"
    c_file.write_text(text)
    cmd = [cc, *flags, "-fPIC", "-shared", str(c_file), "-o", str(so_file), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    ffi = cffi.FFI()
    ffi.cdef(f"void plain({', '.join('float *' for _ in names)});")
    lib = ffi.dlopen(str(so_file))

    def run(arrays: dict) -> None:
        lib.plain(*[ffi.from_buffer("float *", arrays[n]) for n in names])

    return run


# measuring ---------------------------------------------------------------------------
def timed_in_turns(variants: dict, arrays_of, rounds: int = ROUNDS) -> dict:
    """Best time of each variant over ``rounds`` rounds in which every variant runs
    once in turn (so a burst of load on the shared machine hits all of them); a
    variant stops after a run over 2 s."""
    best = {label: math.inf for label in variants}
    for _ in range(rounds):
        for label, fn in variants.items():
            if best[label] > 2.0 and best[label] < math.inf:
                continue
            arrays = arrays_of()
            t0 = time.perf_counter()
            fn(arrays)
            best[label] = min(best[label], time.perf_counter() - t0)
    return best


def rel_error(got: dict, want: dict) -> float:
    worst = 0.0
    for name, ref in want.items():
        scale = float(np.max(np.abs(ref))) or 1.0
        worst = max(worst, float(np.max(np.abs(got[name] - ref))) / scale)
    return worst


def run_case(case: Case, polly: str | None) -> dict:
    import polyc
    import schedules
    from polyc.ir.inputs import prepare

    kernel = case.build()
    rng = np.random.default_rng(0)
    inputs = {
        a.name: rng.uniform(0, 1, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }

    def arrays_of():
        return prepare(kernel, {k: v.copy() for k, v in inputs.items()})[0]

    t0 = time.perf_counter()
    _ = kernel.deps  # exact dependences, computed once per kernel and cached
    deps_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    auto = schedules.auto(kernel)
    auto_seconds = time.perf_counter() - t0
    serial = schedules.auto(kernel, parallel=False)

    variants = {}
    for label, k in (
        ("polyc untransformed", kernel),
        ("polyc auto, 1 thread", serial),
        ("polyc auto", auto),
    ):
        module = polyc.build(k)
        variants[label] = lambda arrays, m=module: m.call(arrays, {})
    names, body = case.plain
    native = ["-O3", "-march=native"]
    variants["gcc -O3"] = compile_plain("gcc", native, names, body)
    if polly:
        polly_flags = [*native, "-mllvm", "-polly"]
        variants["clang Polly"] = compile_plain(polly, polly_flags, names, body)
        par = [*polly_flags, "-mllvm", "-polly-parallel", "-fopenmp"]
        variants["clang Polly parallel"] = compile_plain(polly, par, names, body)

    outputs = [a.name for a in kernel.outputs]
    reference = arrays_of()
    variants["polyc untransformed"](reference)
    want = {n: reference[n] for n in outputs}
    result = {"name": case.name, "flops": case.flops, "times": {}, "errors": {}}
    for label, fn in variants.items():
        arrays = arrays_of()
        fn(arrays)  # checked, and a warm-up run
        result["errors"][label] = rel_error({n: arrays[n] for n in outputs}, want)
    result["times"] = timed_in_turns(variants, arrays_of)
    for label, seconds in result["times"].items():
        print(f"  {case.name:9s} {label:22s} {seconds:9.4f} s", flush=True)
    result["auto_seconds"] = auto_seconds
    result["deps_seconds"] = deps_seconds
    result["history"] = [str(s)[:120] for s in auto.history]
    return result


def labels(polly: bool) -> list[str]:
    """The variants of the table, in column order (Polly's when it ran)."""
    out = ["gcc -O3", "polyc untransformed", "polyc auto, 1 thread", "polyc auto"]
    return [*out, "clang Polly", "clang Polly parallel"] if polly else out


def render(payload: dict) -> str:
    """The docs/schedules.md table of ``payload`` (schedules.json as written)."""
    return table(payload["results"], labels(bool(payload["polly"])))


def table(results: list[dict], labels: list[str]) -> str:
    """A markdown table of ``results``: milliseconds per variant of ``labels``,
    auto's speedup and the time auto (and the dependences) took."""
    head = ["kernel", *labels, "auto / untransformed", "auto (+ deps) time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        t = r["times"]
        cells = [f"{t[label] * 1e3:.1f} ms" if label in t else "-" for label in labels]
        speedup = t["polyc untransformed"] / t["polyc auto"]
        lines.append(
            f"| {r['name']} | "
            + " | ".join(cells)
            + f" | {speedup:.2f}x | {r['auto_seconds'] * 1e3:.0f}"
            + f" (+{r.get('deps_seconds', 0) * 1e3:.0f}) ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--only", nargs="*", help="kernel names to run")
    args = parser.parse_args(argv)
    polly = polly_compiler()
    name = "schedules_quick" if args.quick else "schedules"
    previous = {}
    if args.only and (RESULTS / f"{name}.json").exists():  # refresh some rows
        old = json.loads((RESULTS / f"{name}.json").read_text())
        previous = {r["name"]: r for r in old["results"]}
    results = []
    for case in cases(args.quick):
        if args.only and case.name not in args.only:
            if case.name in previous:
                results.append(previous[case.name])
            continue
        print(f"{case.name}:", flush=True)
        results.append(run_case(case, polly))

    def speedups(names, over="polyc untransformed", of="polyc auto"):
        rs = [r for r in results if r["name"] in names]
        return geomean([r["times"][over] / r["times"][of] for r in rs])

    everything = [r["name"] for r in results]
    summary = {
        "auto_vs_untransformed_contractions": speedups(CONTRACTIONS),
        "auto_vs_untransformed_all": speedups(everything),
        "auto_1thread_vs_untransformed_contractions": speedups(
            CONTRACTIONS, of="polyc auto, 1 thread"
        ),
        "auto_vs_gcc_O3_all": speedups(everything, over="gcc -O3"),
    }
    if polly:
        summary["auto_vs_polly_parallel_all"] = speedups(
            everything, over="clang Polly parallel"
        )
    report = {
        "load_average": os.getloadavg(),
        "polly": polly,
        "quick": args.quick,
        "results": results,
        "geomean": summary,
        "table": table(results, labels(bool(polly))),
    }
    path = write_json(name, report)
    print(report["table"])
    for key, value in summary.items():
        print(f"geomean {key}: {value:.2f}x")
    results_md.regenerate_for(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
