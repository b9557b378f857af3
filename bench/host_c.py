"""The scheduling benchmark from C sources: source-to-source against the compilers.

    python -m bench.host_c [--only NAME ...] [--repeat 3] [--schedule auto]

For each kernel of ``bench/c_sources`` (matmul 1024^3, 2mm, syrk, Jacobi-2D 100 steps
on 1000^2, Seidel-2D, conv2d 3x3 64->64 on 56^2, softmax 1024^2, and atax, bicg and
doitgen at PolyBench's LARGE sizes) it builds, in one run,
side by side:

- the original file with ``gcc -O3 -march=native`` (the baseline);
- ``polyc compile --schedule auto`` of it, with the same gcc flags (sequential:
  OMP_NUM_THREADS=1, so the column measures the schedule, not threads);
- the original with ``clang-19 -O3 -march=native -mllvm -polly`` where installed.

The three run in turns, ``--repeat`` rounds; it reports the best time of each, the
speedups over the baseline and whether every
build's checksum equals the baseline's, writes ``bench/results/host_c.json``, prints
the markdown table and regenerates it in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import results_md
from bench.common import RESULTS, geomean, machine

SOURCES = Path(__file__).parent / "c_sources"
KERNELS = [
    "matmul",
    "2mm",
    "syrk",
    "jacobi_2d",
    "seidel_2d",
    "conv2d",
    "softmax",
    "atax",
    "bicg",
    "doitgen",
]
#: no FMA contraction, so that results compare bit for bit (gcc and clang contract
#: multiply-adds in different places otherwise, which moves roundings)
FLAGS = ["-O3", "-march=native", "-ffp-contract=off"]


def _compile(cc: list[str], src: Path, exe: Path, repeat: int) -> float:
    start = time.perf_counter()
    cmd = [*cc, *FLAGS, f"-DREPEAT={repeat}", f"-I{SOURCES}", str(src), "-o", str(exe)]
    subprocess.run([*cmd, "-lm"], check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def _run(exe: Path) -> tuple[float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True, env=env
    ).stdout
    values = dict(line.split() for line in out.splitlines() if line.strip())
    return float(values["time"]), float(values["checksum"])


def polly_command() -> list[str] | None:
    """clang-19 with Polly as a compiler command, or None where it is missing."""
    clang = shutil.which("clang-19")
    if clang is None:
        return None
    probe = subprocess.run(
        [clang, "-O3", "-mllvm", "-polly", "-x", "c", "-", "-fsyntax-only"],
        input="int main(void) { return 0; }\n",
        capture_output=True,
        text=True,
    )
    return [clang, "-mllvm", "-polly"] if probe.returncode == 0 else None


def run_kernel(name: str, work: Path, repeat: int, schedule: str, polly) -> dict:
    """Build the three versions, then run them in turns (``repeat`` rounds, best
    time of each), so that a load change on the machine hits all of them alike."""
    from polyc.integrations.c_source import compile_c

    src = SOURCES / f"{name}.c"
    row: dict = {"kernel": name, "schedule": schedule}
    builds = {"gcc": work / f"{name}.gcc"}
    _compile(["gcc"], src, builds["gcc"], 1)
    start = time.perf_counter()
    result = compile_c(src, schedule=None if schedule == "original" else schedule)
    row["polyc_compile_s"] = time.perf_counter() - start
    rewritten = work / f"{name}.polyc.c"
    rewritten.write_text(result.text)
    builds["polyc"] = work / f"{name}.polyc"
    _compile(["gcc", "-fopenmp"], rewritten, builds["polyc"], 1)
    if polly is not None:
        try:
            _compile(polly, src, work / f"{name}.polly", 1)
            builds["polly"] = work / f"{name}.polly"
        except subprocess.CalledProcessError as err:
            row["polly_error"] = f"compile failed ({err.returncode})"
    best: dict[str, float] = {}
    sums: dict[str, float] = {}
    for _ in range(repeat):
        for key, exe in list(builds.items()):
            try:
                t, total = _run(exe)
            except subprocess.CalledProcessError as err:
                row[f"{key}_error"] = f"exit status {err.returncode}"
                del builds[key]
                continue
            best[key] = min(best.get(key, float("inf")), t)
            sums[key] = total
    row["gcc_s"] = best["gcc"]
    for key in ("polyc", "polly"):
        if key in best:
            row[f"{key}_s"] = best[key]
            row[f"{key}_checksum_equal"] = sums[key] == sums["gcc"]
            row[f"{key}_speedup"] = best["gcc"] / best[key]
    return row


#: the kernels as the tables name them (sizes fixed by their C sources)
LABELS = {
    "matmul": "matmul 1024^3",
    "2mm": "2mm 800^3",
    "syrk": "syrk 1000^2",
    "jacobi_2d": "jacobi-2d 100 x 1000^2",
    "seidel_2d": "seidel-2d 20 x 1000^2",
    "conv2d": "conv2d 3x3 64->64 56^2",
    "softmax": "softmax 1024^2",
    "atax": "atax 1900 x 2100",
    "bicg": "bicg 2100 x 1900",
    "doitgen": "doitgen 150 x 140 x 160",
}


def _yes(equal: bool) -> str:
    return "yes" if equal else "no"


def table(rows: list[dict]) -> str:
    """The docs/results.md table of ``rows`` (host_c.json's): best times, speedups
    over gcc -O3 and whether each build computed the baseline's bits, then the
    geometric-mean speedups."""
    polly = any("polly_s" in r for r in rows)
    head = "| kernel | gcc -O3 (s) | polyc + gcc -O3 (s) | speedup | same bits |"
    sep = "|---|---:|---:|---:|:---:|"
    if polly:
        head += " clang-19 Polly (s) | speedup | same bits |"
        sep += "---:|---:|:---:|"
    lines = [head, sep]
    for r in rows:
        line = (
            f"| {LABELS.get(r['kernel'], r['kernel'])} | {r['gcc_s']:.3f} | "
            f"{r['polyc_s']:.3f} | {r['polyc_speedup']:.2f}x | "
            f"{_yes(r['polyc_checksum_equal'])} |"
        )
        if polly:
            line += (
                f" {r['polly_s']:.3f} | {r['polly_speedup']:.2f}x | "
                f"{_yes(r['polly_checksum_equal'])} |"
                if "polly_s" in r
                else f" {r.get('polly_error', '-')} | - | - |"
            )
        lines.append(line)
    means = [f"polyc {geomean(r['polyc_speedup'] for r in rows):.2f}x"]
    if polly:
        pr = [r["polly_speedup"] for r in rows if "polly_s" in r]
        means.append(f"Polly {geomean(pr):.2f}x")
    lines.append(f"\nGeometric mean over gcc -O3: {', '.join(means)}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, choices=KERNELS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--schedule",
        default=None,
        choices=["auto", "original"],
        help="the schedule of the polyc column (default: auto)",
    )
    args = parser.parse_args(argv)
    schedule = args.schedule or "auto"
    polly = polly_command()
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyc-cbench-") as tmp:
        for name in args.only or KERNELS:
            row = run_kernel(name, Path(tmp), args.repeat, schedule, polly)
            print(json.dumps(row), flush=True)
            rows.append(row)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "benchmark": "host_c",
        "machine": machine(),
        "flags": FLAGS,
        "polly": polly is not None,
        "rows": rows,
    }
    path = RESULTS / "host_c.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(table(rows))
    results_md.regenerate_for(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
