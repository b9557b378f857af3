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

For the matrix products (:data:`BLAS`: matmul, 2mm, doitgen) two more, in the same
turns: polyc's output built with ``-ffp-contract=fast`` (``polyc_fma``: gcc fuses
each multiply-add into an FMA, one rounding instead of two, so its checksum is
compared within a relative 1e-12, not bit for bit), and the same products through
numpy's BLAS on one thread (``blas``: OpenBLAS, ``OPENBLAS_NUM_THREADS=1``, the
same inputs, timed around the calls only; BLAS sums in its own order, so its
checksum's relative difference is reported too), the baseline a hardware
engineer compares a matrix product with.

The builds run in turns, ``--repeat`` rounds; it reports the best time of each, the
speedups over the baseline and whether every
build's checksum equals the baseline's, writes ``bench/results/host_c.json`` (with
``--only``, the rows of the other kernels already in it are kept), prints the
markdown tables and regenerates them in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import results_md
from bench.common import RESULTS, geomean, machine, out_argument

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


#: the same products through numpy's BLAS: the C file's inputs (its ``init``), the
#: kernel as numpy calls, and the array its checksum reads; ``{N}``-style names
#: are the file's ``#define``s
BLAS = {
    "matmul": (
        "i, j = np.indices((N, N))\n"
        "A = ((i * j + 1) % N) / N\nB = ((i + 2 * j) % N) / N\n"
        "C = np.zeros((N, N))",
        "C += A @ B",
        "C",
    ),
    "2mm": (
        "i, j = np.indices((N, N))\n"
        "A = ((i * j + 1) % N) / N\nB = (i * (j + 1) % N) / N\n"
        "C = ((i * (j + 3) + 1) % N) / N\nD = (i * (j + 2) % N) / N",
        "tmp = (1.5 * A) @ B\nD = 1.2 * D + tmp @ C",
        "D",
    ),
    "doitgen": (
        "r, q, s = np.indices((NR, NQ, NP))\nA = ((r * q + s) % NP) / NP\n"
        "i, j = np.indices((NP, NP))\nC4 = (i * j % NP) / NP",
        "A = (A.reshape(NR * NQ, NP) @ C4).reshape(NR, NQ, NP)",
        "A",
    ),
}
#: the relative difference of checksums allowed where sums round differently
#: (FMA contraction, BLAS's own order)
TOLERANCE = 1e-12


def _compile(
    cc: list[str], src: Path, exe: Path, repeat: int, extra: tuple[str, ...] = ()
) -> float:
    start = time.perf_counter()
    cmd = [*cc, *FLAGS, *extra, f"-DREPEAT={repeat}", f"-I{SOURCES}", str(src)]
    subprocess.run(
        [*cmd, "-o", str(exe), "-lm"], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - start


def _blas_script(name: str, work: Path, repeat: int) -> Path:
    """A Python program that runs kernel ``name``'s products through numpy
    ``repeat`` times and prints the best time and the C file's checksum."""
    defines = re.findall(
        r"^#define (\w+) (\d+)$", (SOURCES / f"{name}.c").read_text(), re.M
    )
    init, call, out = BLAS[name]
    lines = ["import time", "import numpy as np"]
    lines += [f"{k} = {v}" for k, v in defines]
    lines += [
        "best = 1e30",
        f"for _ in range({repeat}):",
        *("    " + x for x in init.splitlines()),
        "    t0 = time.perf_counter()",
        *("    " + x for x in call.splitlines()),
        "    best = min(best, time.perf_counter() - t0)",
        f"p = np.ascontiguousarray({out}).ravel()",
        "s = float(np.sum(p * (1 + np.arange(p.size) % 7)))",
        "print(f'time {best:.6f}\\nchecksum {s!r}')",
    ]
    path = work / f"{name}_blas.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(exe: Path) -> tuple[float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(exe)] if exe.suffix == ".py" else [str(exe)]
    out = subprocess.run(
        cmd, check=True, capture_output=True, text=True, env=env
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
    if name in BLAS:
        builds["polyc_fma"] = work / f"{name}.polyc_fma"
        fma = ("-ffp-contract=fast",)  # after FLAGS' off: the last one counts
        _compile(["gcc", "-fopenmp"], rewritten, builds["polyc_fma"], 1, fma)
        builds["blas"] = _blas_script(name, work, 1)
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
    for key in ("polyc_fma", "blas"):
        if key in best:
            row[f"{key}_s"] = best[key]
            diff = abs(sums[key] - sums["gcc"]) / max(abs(sums["gcc"]), 1e-300)
            row[f"{key}_checksum_rel_diff"] = diff
            row[f"{key}_checksum_close"] = diff <= TOLERANCE
    row["load_average"] = os.getloadavg()[0]
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


def blas_table(rows: list[dict]) -> str:
    """The docs/results.md table of the matrix products against numpy's BLAS on
    one thread: polyc's output (bit for bit, no FMA) and with FMA contraction,
    each as a multiple of BLAS's time."""
    lines = [
        "| kernel | BLAS, 1 thread (s) | polyc + gcc -O3 (s) | x BLAS "
        "| polyc + FMA (s) | x BLAS | checksum rel. diff.: FMA, BLAS |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "blas_s" not in r:
            continue
        blas = r["blas_s"]
        fma = r.get("polyc_fma_s")
        lines.append(
            f"| {LABELS.get(r['kernel'], r['kernel'])} | {blas:.4f} | "
            f"{r['polyc_s']:.4f} | {r['polyc_s'] / blas:.2f}x | "
            + (
                f"{fma:.4f} | {fma / blas:.2f}x | "
                f"{r['polyc_fma_checksum_rel_diff']:.1e}, "
                if fma is not None
                else "- | - | -, "
            )
            + f"{r['blas_checksum_rel_diff']:.1e} |"
        )
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
    out_argument(parser)
    args = parser.parse_args(argv)
    schedule = args.schedule or "auto"
    polly = polly_command()
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyc-cbench-") as tmp:
        for name in args.only or KERNELS:
            row = run_kernel(name, Path(tmp), args.repeat, schedule, polly)
            print(json.dumps(row), flush=True)
            rows.append(row)
    path = args.out or RESULTS / "host_c.json"
    if args.only and path.exists():  # the other kernels' rows of an earlier run
        ran = {r["kernel"] for r in rows}
        kept = [
            r for r in json.loads(path.read_text())["rows"] if r["kernel"] not in ran
        ]
        rows = sorted(kept + rows, key=lambda r: KERNELS.index(r["kernel"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "benchmark": "host_c",
        "machine": machine(),
        "flags": FLAGS,
        "polly": polly is not None,
        "rows": rows,
    }
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(table(rows))
    print(blas_table(rows))
    if args.out is None:
        results_md.regenerate_for(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
