"""The C corpus at PolyBench's LARGE sizes: gcc, polyc + gcc, Polly, Polly on polyc.

    python -m bench.host_c_corpus [--only NAME ...] [--repeat 2] [--size LARGE]

For each kernel of ``tests/c_corpus`` whose kernel function takes its sizes as
``int`` parameters and its arrays as C99 VLA parameters (23 of the 30; the other
seven fix their sizes with macros or globals, see :data:`SKIPPED`), a driver is
generated that allocates the arrays at PolyBench 4.2.1's sizes (:data:`LARGE`),
fills them deterministically, calls the kernel once, prints its wall time and
a checksum (C99 hex float) of every array. Four builds, all with
``-O3 -march=native -ffp-contract=off`` (no FMA contraction, so results compare
bit for bit):

- ``gcc``: the original file with gcc (the baseline);
- ``polyc``: ``polyc compile --schedule auto`` of it with gcc (``-fopenmp``,
  run with OMP_NUM_THREADS=1: the column measures the schedule, not threads);
- ``polly``: the original with ``clang-19 -mllvm -polly``;
- ``polly_polyc``: polyc's output with ``clang-19 -mllvm -polly``.

The builds run in turns (A B C D A B C D ...), ``--repeat`` rounds, best time of
each, so a change of load on the shared machine hits them alike (each row
records the load average when its kernel started). It writes
``bench/results/host_c_corpus.json`` (with ``--only``, the rows of the other
kernels already in it are kept) and regenerates the table in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from bench import results_md
from bench.common import RESULTS, machine
from bench.host_c import polly_command

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "c_corpus"
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-w"]
VARIANTS = ("gcc", "polyc", "polly", "polly_polyc")

#: PolyBench/C 4.2.1's LARGE_DATASET sizes, by the corpus's parameter names
LARGE: dict[str, dict[str, int]] = {
    "2mm": {"ni": 800, "nj": 900, "nk": 1100, "nl": 1200},
    "3mm": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "nm": 1200},
    "adi": {"tsteps": 500, "n": 1000},
    "bicg": {"m": 1900, "n": 2100},
    "cholesky": {"n": 2000},
    "correlation": {"m": 1200, "n": 1400},
    "covariance": {"m": 1200, "n": 1400},
    "deriche": {"w": 4096, "h": 2160},
    "doitgen": {"nr": 150, "nq": 140, "np": 160},
    "durbin": {"n": 2000},
    "floyd_warshall": {"n": 2800},
    "gemm": {"ni": 1000, "nj": 1100, "nk": 1200},
    "gemver": {"n": 2000},
    "gesummv": {"n": 1300},
    "gramschmidt": {"m": 1000, "n": 1200},
    "heat_3d": {"tsteps": 500, "n": 120},
    "jacobi_2d": {"tsteps": 500, "n": 1300},
    "ludcmp": {"n": 2000},
    "mvt": {"n": 2000},
    "nussinov": {"n": 2500},
    "symm": {"m": 1000, "n": 1200},
    "tiled_mm": {"n": 1000, "m": 1200},
    "trmm": {"m": 1000, "n": 1200},
}
#: a fifth of LARGE on every size (MEDIUM-like; for a quick look)
SMALLER = {k: {p: max(v // 5, 2) for p, v in s.items()} for k, s in LARGE.items()}
#: corpus files this benchmark does not drive, and why
SKIPPED = {
    "atax": "sizes are macros (bench.host_c runs it at LARGE)",
    "fdtd_2d": "sizes are macros",
    "jacobi_1d": "sizes are macros",
    "lu": "arrays are globals",
    "seidel_2d": "arrays are globals",
    "syrk": "arrays are globals (bench.host_c runs a syrk)",
    "trisolv": "a fixed row length",
}
#: square matrices that must be well conditioned (diagonal made dominant)
DOMINANT = {("cholesky", "A"), ("ludcmp", "A")}
#: scalars the kernels read
SCALARS = {"alpha": 1.5, "beta": 1.2, "eps": 0.1}

_PARAM = re.compile(r"^(?:const\s+)?(int|double|float|char)\s+(\w+)((?:\[[^\]]+\])*)$")


def signature(text: str, name: str) -> list[tuple[str, str, list[str]]]:
    """``(type, name, dims)`` for each parameter of ``kernel_<name>`` in ``text``.

    Raises:
        ValueError: a parameter that is not an int/float scalar or a VLA array.
    """
    m = re.search(rf"^void kernel_{name}\(([^)]*)\)", text, re.M | re.S)
    if m is None:
        raise ValueError(f"no kernel_{name}(...) in the file")
    out = []
    for raw in m.group(1).split(","):
        p = _PARAM.match(" ".join(raw.split()))
        if p is None:
            raise ValueError(f"parameter {raw.strip()!r} is not a scalar or VLA")
        dims = re.findall(r"\[([^\]]+)\]", p.group(3))
        out.append((p.group(1), p.group(2), dims))
    return out


def driver(name: str, text: str, sizes: dict[str, int]) -> str:
    """C for a ``main`` that sets up ``kernel_<name>``'s arguments at ``sizes``,
    times one call and prints ``time``, then ``sum <array> <hex float>`` lines."""
    params = signature(text, name)
    proto = re.search(rf"^void kernel_{name}\([^)]*\)", text, re.M | re.S).group(0)
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <time.h>",
        f"{proto};",
        "int main(void) {",
        "  struct timespec pc_t0, pc_t1;",
    ]
    args = []
    for ctype, pname, dims in params:
        if not dims and ctype == "int":
            lines.append(f"  int {pname} = {sizes[pname]};")
        elif not dims:
            value = SCALARS.get(pname, float(sizes.get("n", 1)))
            lines.append(f"  {ctype} {pname} = {value!r};")
        args.append(pname)
    for salt, (ctype, pname, dims) in enumerate(params):
        if not dims:
            continue
        count = " * ".join(f"(long)({d})" for d in dims)
        lines.append(f"  long {pname}_n = {count};")
        lines.append(f"  {ctype} *{pname} = malloc(sizeof({ctype}) * {pname}_n);")
        lines.append(f"  for (long pc_x = 0; pc_x < {pname}_n; pc_x++)")
        lines.append(f"    {pname}[pc_x] = {_value(name, ctype, pname, salt)};")
        if (name, pname) in DOMINANT:
            lines.append(f"  for (long pc_x = 0; pc_x < {dims[0]}; pc_x++)")
            lines.append(f"    {pname}[pc_x * {dims[0]} + pc_x] += {dims[0]};")
    lines += [
        "  clock_gettime(CLOCK_MONOTONIC, &pc_t0);",
        f"  kernel_{name}({', '.join(args)});",
        "  clock_gettime(CLOCK_MONOTONIC, &pc_t1);",
        '  printf("time %.6f\\n", (pc_t1.tv_sec - pc_t0.tv_sec) + 1e-9 * '
        "(pc_t1.tv_nsec - pc_t0.tv_nsec));",
    ]
    for _ctype, pname, dims in params:
        if dims:
            lines += [
                "  {",
                "    double pc_sum = 0.0;",
                f"    for (long pc_x = 0; pc_x < {pname}_n; pc_x++)",
                f"      pc_sum += (double){pname}[pc_x] * (double)(1 + pc_x % 7);",
                f'    printf("sum {pname} %a\\n", pc_sum);',
                "  }",
            ]
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def _value(name: str, ctype: str, array: str, salt: int) -> str:
    """The value of element ``pc_x`` (names the kernels do not use)."""
    if ctype == "char":
        return "(char)((pc_x * 7 + 3) % 4)"
    if ctype == "int":
        return f"(int)((pc_x * 37 + {salt} * 7 + 3) % 97 + 1)"
    scale = " / 2000.0" if name == "durbin" else ""
    return f"({ctype})((double)((pc_x * 37 + {salt} * 7 + 3) % 97) / 97.0{scale})"


def _build(cc: list[str], files: list[Path], exe: Path) -> None:
    cmd = [*cc, *FLAGS, f"-I{CORPUS}", *map(str, files), "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def _run(exe: Path, timeout: float) -> tuple[float, dict[str, str]]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True, env=env, timeout=timeout
    ).stdout
    t, sums = 0.0, {}
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "time":
            t = float(parts[1])
        elif parts[0] == "sum":
            sums[parts[1]] = parts[2]
    return t, sums


def run_kernel(name: str, work: Path, repeat: int, sizes, polly, timeout) -> dict:
    """Build the four versions of one kernel, run them in turns and compare."""
    from polyc.integrations.c_source import compile_c

    src = CORPUS / f"{name}.c"
    text = src.read_text()
    row: dict = {"kernel": name, "sizes": sizes, "load": os.getloadavg()[0]}
    drv = work / f"{name}_driver.c"
    drv.write_text(driver(name, text, sizes))
    start = time.perf_counter()
    result = compile_c(src, schedule="auto")
    row["polyc_compile_s"] = round(time.perf_counter() - start, 3)
    row["polyc_step"] = ",".join(r.step or "" for r in result.regions)
    rewritten = work / f"{name}.polyc.c"
    rewritten.write_text(result.text)
    builds: dict[str, Path] = {}
    plan = {
        "gcc": (["gcc"], src),
        "polyc": (["gcc", "-fopenmp"], rewritten),
    }
    if polly is not None:
        plan["polly"] = (polly, src)
        plan["polly_polyc"] = (polly, rewritten)
    for key, (cc, file) in plan.items():
        exe = work / f"{name}.{key}"
        try:
            _build(cc, [file, drv], exe)
            builds[key] = exe
        except subprocess.CalledProcessError as err:
            row[f"{key}_error"] = f"build failed: {err.stderr.strip()[:200]}"
    best: dict[str, float] = {}
    sums: dict[str, dict[str, str]] = {}
    for _ in range(repeat):
        for key, exe in list(builds.items()):
            try:
                t, total = _run(exe, timeout)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
                row[f"{key}_error"] = type(err).__name__
                del builds[key]
                continue
            best[key] = min(best.get(key, math.inf), t)
            sums[key] = total
    for key in VARIANTS:
        if key in best:
            row[f"{key}_s"] = best[key]
            if "gcc" in best and key != "gcc":
                row[f"{key}_speedup"] = best["gcc"] / best[key]
                row[f"{key}_same_bits"] = sums[key] == sums["gcc"]
    return row


def table(payload: dict) -> str:
    """The docs/results.md table: best seconds, speedups over gcc, whether each
    build computed gcc's bits; geometric means over the rows where all ran."""
    rows = payload["rows"]
    head = (
        "| kernel | gcc (s) | polyc + gcc (s) | Polly (s) | Polly on polyc (s) "
        "| polyc / gcc | Polly / gcc | Polly on polyc / gcc | polyc / Polly "
        "| same bits |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    full = []
    for r in rows:
        cells = [r["kernel"]]
        for key in VARIANTS:
            cells.append(f"{r[key + '_s']:.3f}" if key + "_s" in r else "failed")
        for key in ("polyc", "polly", "polly_polyc"):
            sp = r.get(f"{key}_speedup")
            cells.append(f"{sp:.2f}x" if sp else "-")
        if "polyc_s" in r and "polly_s" in r:
            cells.append(f"{r['polly_s'] / r['polyc_s']:.2f}x")
        else:
            cells.append("-")
        same = [r.get(f"{k}_same_bits") for k in VARIANTS[1:] if f"{k}_s" in r]
        cells.append("yes" if same and all(same) else "no")
        lines.append("| " + " | ".join(cells) + " |")
        if all(f"{k}_speedup" in r for k in VARIANTS[1:]):
            full.append(r)
    if full:
        means = ", ".join(
            f"{label} {_geomean(r[f'{k}_speedup'] for r in full):.2f}x"
            for k, label in (
                ("polyc", "polyc"),
                ("polly", "Polly"),
                ("polly_polyc", "Polly on polyc"),
            )
        )
        lines.append(
            f"\nGeometric mean over gcc on the {len(full)} kernels where every "
            f"build ran: {means}."
        )
    return "\n".join(lines)


def _geomean(values) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(LARGE))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--size", default="LARGE", choices=["LARGE", "SMALLER"])
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per run of a build"
    )
    args = parser.parse_args(argv)
    table_sizes = LARGE if args.size == "LARGE" else SMALLER
    polly = polly_command()
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyc-corpus-bench-") as tmp:
        for name in args.only or sorted(LARGE):
            row = run_kernel(
                name, Path(tmp), args.repeat, table_sizes[name], polly, args.timeout
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    suffix = "" if args.size == "LARGE" else "_smaller"
    path = RESULTS / f"host_c_corpus{suffix}.json"
    if args.only and path.exists():  # the other kernels' rows of an earlier run
        ran = {r["kernel"] for r in rows}
        kept = [
            r for r in json.loads(path.read_text())["rows"] if r["kernel"] not in ran
        ]
        rows = sorted(kept + rows, key=lambda r: r["kernel"])
    payload = {
        "benchmark": "host_c_corpus",
        "machine": machine(),
        "size": args.size,
        "repeat": args.repeat,
        "flags": FLAGS,
        "load_average_at_end": os.getloadavg(),
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(table(payload))
    results_md.regenerate_for(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
