"""The C corpus at PolyBench's LARGE sizes: gcc, polyc + gcc, Polly, Polly on polyc.

    python -m bench.host_c_corpus [--only NAME ...] [--repeat 2] [--size LARGE]
        [--timeout 120] [--threads N]

For each kernel of ``tests/c_corpus`` a driver is generated that allocates the
arrays of its kernel function (and sets the global arrays of its file) at PolyBench
4.2.1's sizes (:data:`LARGE`; :data:`DATASET` names the few run at MEDIUM, so that
a run of the whole corpus stays within its time), fills them deterministically,
calls the kernel once, prints its wall time and a checksum (C99 hex float) of every
array. Sizes are the kernel's ``int`` parameters or the macros its file defines
(:func:`prepare` sets those in a copy of the file; pointer parameters take their
extents from :data:`POINTERS`). Four builds, all with
``-O3 -march=native -ffp-contract=off`` (no FMA contraction, so results compare
bit for bit):

- ``gcc``: the original file with gcc (the baseline);
- ``polyc``: ``polyc compile --schedule auto`` of it with gcc (``-fopenmp``,
  run with OMP_NUM_THREADS=1: the column measures the schedule, not threads);
- ``polly``: the original with ``clang-19 -mllvm -polly``;
- ``polly_polyc``: polyc's output with ``clang-19 -mllvm -polly``.

With ``--threads N`` (N > 1) a fifth build, ``polyc_mt``: polyc's output scheduled
with ``wavefront=True`` (time-tiled stencils run their tiles in parallel
wavefronts; other kernels get the same parallel marks as ``polyc``), run on N
OpenMP threads and reported in a table of its own, so that the main table's
numbers stay single-thread.

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
from bench.common import RESULTS, geomean, machine, out_argument
from bench.host_c import polly_command

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "c_corpus"
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-w"]
VARIANTS = ("gcc", "polyc", "polly", "polly_polyc")

#: PolyBench/C 4.2.1's LARGE_DATASET sizes, by the corpus's names for them (the
#: kernel's ``int`` parameters, or the macros its file defines)
LARGE: dict[str, dict[str, int]] = {
    "2mm": {"ni": 800, "nj": 900, "nk": 1100, "nl": 1200},
    "3mm": {"ni": 800, "nj": 900, "nk": 1000, "nl": 1100, "nm": 1200},
    "adi": {"tsteps": 500, "n": 1000},
    "atax": {"NX": 1900, "NY": 2100},
    "bicg": {"m": 1900, "n": 2100},
    "cholesky": {"n": 2000},
    "correlation": {"m": 1200, "n": 1400},
    "covariance": {"m": 1200, "n": 1400},
    "deriche": {"w": 4096, "h": 2160},
    "doitgen": {"nr": 150, "nq": 140, "np": 160},
    "durbin": {"n": 2000},
    "fdtd_2d": {"TMAX": 500, "NX": 1000, "NY": 1200},
    "floyd_warshall": {"n": 2800},
    "gemm": {"ni": 1000, "nj": 1100, "nk": 1200},
    "gemver": {"n": 2000},
    "gesummv": {"n": 1300},
    "gramschmidt": {"m": 1000, "n": 1200},
    "heat_3d": {"tsteps": 500, "n": 120},
    "jacobi_1d": {"TSTEPS": 500, "N": 2000},
    "jacobi_2d": {"tsteps": 500, "n": 1300},
    "lu": {"N": 2000},
    "ludcmp": {"n": 2000},
    "mvt": {"n": 2000},
    "nussinov": {"n": 2500},
    "seidel_2d": {"tsteps": 500, "N": 2000},
    "symm": {"m": 1000, "n": 1200},
    "syrk": {"N": 1200, "M": 1000},
    "tiled_mm": {"n": 1000, "m": 1200},
    "trisolv": {"n": 2000},
    "trmm": {"m": 1000, "n": 1200},
}
#: PolyBench/C 4.2.1's MEDIUM_DATASET sizes of the kernels :data:`DATASET` runs
#: at MEDIUM
MEDIUM: dict[str, dict[str, int]] = {
    "floyd_warshall": {"n": 500},
}
#: kernels whose default dataset is not LARGE, and why (``--size LARGE-ALL`` runs
#: them at LARGE too): floyd-warshall at LARGE is 2800^3 = 22e9 updates, about
#: 10 s per build and run here (76 ms at n = 560, times 125), 80 s or more per
#: kernel for its four builds in two rounds, which the run of the whole corpus
#: cannot afford on the shared machine
DATASET: dict[str, str] = {"floyd_warshall": "MEDIUM"}
#: a fifth of LARGE on every size (MEDIUM-like; for a quick look)
SMALLER = {k: {p: max(v // 5, 2) for p, v in s.items()} for k, s in LARGE.items()}
#: extents of pointer parameters, whose sizes the signature does not say
POINTERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("atax", "A"): ("NX", "NY"),
    ("atax", "x"): ("NY",),
    ("atax", "y"): ("NY",),
    ("atax", "tmp"): ("NX",),
    ("trisolv", "L"): ("n", "n"),
    ("trisolv", "x"): ("n",),
    ("trisolv", "b"): ("n",),
}
#: text edits of a corpus file for the benchmark, ``{size}`` formatted with its
#: sizes: trisolv's rows have a fixed length of 12, which must be ``n``'s value
EDITS: dict[str, tuple[tuple[str, str], ...]] = {
    "trisolv": (("(*L)[12]", "(*L)[{n}]"),),
}
#: square matrices that must be well conditioned (diagonal made dominant)
DOMINANT = {("cholesky", "A"), ("ludcmp", "A"), ("lu", "A"), ("trisolv", "L")}
#: scalars the kernels read
SCALARS = {"alpha": 1.5, "beta": 1.2, "eps": 0.1}

_PARAM = re.compile(
    r"^(?:const\s+)?(int|double|float|char)\s*"
    r"(?:(\w+)|\*\s*(\w+)|\(\s*\*\s*(\w+)\s*\))((?:\s*\[[^\]]+\])*)$"
)
_GLOBAL = re.compile(
    r"^(?:static\s+)?(int|double|float|char)\s+(\w+)((?:\[[^\]]+\])+)\s*;", re.M
)
_MACRO = re.compile(r"^#define\s+(\w+)\s+(\d+)\s*$", re.M)


def dataset(name: str, size: str) -> tuple[str, dict[str, int]]:
    """``(dataset name, sizes)`` of kernel ``name`` for the run's ``--size``:
    ``LARGE`` gives :data:`DATASET`'s choice (LARGE unless stated),
    ``LARGE-ALL`` LARGE for every kernel, ``SMALLER`` a fifth of LARGE."""
    if size == "SMALLER":
        return "SMALLER", SMALLER[name]
    chosen = DATASET.get(name, "LARGE") if size == "LARGE" else "LARGE"
    return chosen, (MEDIUM if chosen == "MEDIUM" else LARGE)[name]


def signature(text: str, name: str) -> list[tuple[str, str, list[str]]]:
    """``(type, name, dims)`` for each parameter of ``kernel_<name>`` in ``text``;
    a pointer parameter's dims are those of :data:`POINTERS` (the first dim of
    ``double (*A)[NY]`` is not in the text).

    Raises:
        ValueError: a parameter that is not an int/float scalar, a VLA or
            fixed-size array, or a pointer whose extents :data:`POINTERS` has.
    """
    out = []
    for raw in _split_params(_prototype(text, name).group(1)):
        p = _PARAM.match(" ".join(raw.split()))
        if p is None:
            raise ValueError(f"parameter {raw.strip()!r} is not a scalar or array")
        pname = p.group(2) or p.group(3) or p.group(4)
        dims = re.findall(r"\[([^\]]+)\]", p.group(5))
        if p.group(2) is None:  # a pointer: the extents come from the table
            if (name, pname) not in POINTERS:
                raise ValueError(f"parameter {raw.strip()!r} is a pointer of no extent")
            dims = list(POINTERS[(name, pname)])
        out.append((p.group(1), pname, dims))
    return out


def _prototype(text: str, name: str) -> re.Match:
    """The match of ``void kernel_<name>(...)`` (group 1: the parameters).

    Raises:
        ValueError: when the file has no such function.
    """
    m = re.search(
        rf"^(?:static\s+)?void kernel_{name}\(([^{{;]*?)\)(?=[ \t]*$)", text, re.M
    )
    if m is None:
        raise ValueError(f"no kernel_{name}(...) in the file")
    return m


def _split_params(text: str) -> list[str]:
    """The parameters of a prototype (commas inside parentheses do not split)."""
    text = " ".join(text.split())
    if text in ("", "void"):
        return []
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def globals_of(text: str) -> list[tuple[str, str, list[str]]]:
    """``(type, name, dims)`` of the arrays the file declares at file scope."""
    return [
        (m.group(1), m.group(2), re.findall(r"\[([^\]]+)\]", m.group(3)))
        for m in _GLOBAL.finditer(text)
    ]


def prepare(name: str, text: str, sizes: dict[str, int]) -> str:
    """The corpus file as the benchmark builds it: the ``#define`` of every size
    in ``sizes`` set to its value, :data:`EDITS` applied, and ``static`` dropped
    from file-scope arrays and from the kernel function, so that the driver (a
    separate file) reaches them."""

    def define(m: re.Match) -> str:
        if m.group(1) in sizes:
            return f"#define {m.group(1)} {sizes[m.group(1)]}"
        return m.group(0)

    text = _MACRO.sub(define, text)
    for old, new in EDITS.get(name, ()):
        text = text.replace(old, new.format(**sizes))
    text = re.sub(rf"^static\s+(void\s+kernel_{name}\()", r"\1", text, flags=re.M)
    return re.sub(
        r"^static\s+((?:int|double|float|char)\s+\w+\[)", r"\1", text, flags=re.M
    )


def driver(name: str, text: str, sizes: dict[str, int]) -> str:
    """C for a ``main`` that sets up ``kernel_<name>``'s arguments and the file's
    global arrays at ``sizes``, times one call and prints ``time``, then
    ``sum <array> <hex float>`` lines. ``text`` is the corpus file (its macros
    are defined again here at ``sizes``; :func:`prepare` makes the file that
    links with this one)."""
    text = prepare(name, text, sizes)
    params = signature(text, name)
    macros = {m for m, _ in _MACRO.findall(text)}
    proto = _prototype(text, name).group(0).removeprefix("static").strip()
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <time.h>",
        *(f"#define {m} {v}" for m, v in sizes.items() if m in macros),
        f"{proto};",
    ]
    arrays = []  # (ctype, name, dims, expression of its address)
    for ctype, gname, dims in globals_of(text):
        lines.append(f"extern {ctype} {gname}{''.join(f'[{d}]' for d in dims)};")
        arrays.append((ctype, gname, dims, f"({ctype} *){gname}"))
    lines += ["int main(void) {", "  struct timespec pc_t0, pc_t1;"]
    args = []
    for ctype, pname, dims in params:
        if not dims and ctype == "int":
            lines.append(f"  int {pname} = {sizes[pname]};")
            args.append(pname)
        elif not dims:
            value = SCALARS.get(pname, float(sizes.get("n", 1)))
            lines.append(f"  {ctype} {pname} = {value!r};")
            args.append(pname)
        else:
            arrays.append((ctype, pname, dims, None))
            args.append(f"(void *){pname}")
    for salt, (ctype, aname, dims, address) in enumerate(arrays):
        count = " * ".join(f"(long)({d})" for d in dims)
        lines.append(f"  long {aname}_n = {count};")
        if address is None:
            lines.append(f"  {ctype} *{aname} = malloc(sizeof({ctype}) * {aname}_n);")
        else:
            lines.append(f"  {ctype} *pc_{aname} = {address};")
        ptr = aname if address is None else f"pc_{aname}"
        lines.append(f"  for (long pc_x = 0; pc_x < {aname}_n; pc_x++)")
        lines.append(f"    {ptr}[pc_x] = {_value(name, ctype, aname, salt)};")
        if (name, aname) in DOMINANT:
            lines.append(f"  for (long pc_x = 0; pc_x < {dims[0]}; pc_x++)")
            lines.append(f"    {ptr}[pc_x * {dims[-1]} + pc_x] += {dims[0]};")
    lines += [
        "  clock_gettime(CLOCK_MONOTONIC, &pc_t0);",
        f"  kernel_{name}({', '.join(args)});",
        "  clock_gettime(CLOCK_MONOTONIC, &pc_t1);",
        '  printf("time %.6f\\n", (pc_t1.tv_sec - pc_t0.tv_sec) + 1e-9 * '
        "(pc_t1.tv_nsec - pc_t0.tv_nsec));",
    ]
    for _ctype, aname, _dims, address in arrays:
        ptr = aname if address is None else f"pc_{aname}"
        lines += [
            "  {",
            "    double pc_sum = 0.0;",
            f"    for (long pc_x = 0; pc_x < {aname}_n; pc_x++)",
            f"      pc_sum += (double){ptr}[pc_x] * (double)(1 + pc_x % 7);",
            f'    printf("sum {aname} %a\\n", pc_sum);',
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


def _run(exe: Path, timeout: float, threads: int = 1) -> tuple[float, dict[str, str]]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
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


def run_kernel(
    name: str,
    work: Path,
    repeat: int,
    sizes,
    polly,
    timeout,
    dataset: str = "",
    threads: int = 1,
) -> dict:
    """Build the four versions of one kernel, run them in turns and compare; with
    ``threads`` above 1, a fifth: ``polyc_mt``, polyc's output scheduled with
    ``wavefront=True`` (time-tiled stencils' tiles in parallel wavefronts), run
    on that many OpenMP threads."""
    from polyc.integrations.c_source import compile_c

    text = (CORPUS / f"{name}.c").read_text()
    row: dict = {"kernel": name, "sizes": sizes, "load": os.getloadavg()[0]}
    if dataset:
        row["dataset"] = dataset
    src = work / f"{name}.c"
    src.write_text(prepare(name, text, sizes))
    drv = work / f"{name}_driver.c"
    drv.write_text(driver(name, text, sizes))
    start = time.perf_counter()
    result = compile_c(src, schedule="auto", include_dirs=[str(CORPUS)])
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
    if threads > 1:
        row["threads"] = threads
        mt = compile_c(src, schedule="auto", include_dirs=[str(CORPUS)], wavefront=True)
        row["polyc_mt_step"] = ",".join(r.step or "" for r in mt.regions)
        (work / f"{name}.polyc_mt.c").write_text(mt.text)
        plan["polyc_mt"] = (["gcc", "-fopenmp"], work / f"{name}.polyc_mt.c")
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
                t, total = _run(exe, timeout, threads if key == "polyc_mt" else 1)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
                row[f"{key}_error"] = type(err).__name__
                del builds[key]
                continue
            best[key] = min(best.get(key, math.inf), t)
            sums[key] = total
    for key in (*VARIANTS, "polyc_mt"):
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
        data = r.get("dataset", "LARGE")
        cells = [r["kernel"] + ("" if data == "LARGE" else f" ({data})")]
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
            f"{label} {geomean(r[f'{k}_speedup'] for r in full):.2f}x"
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
    threaded = [r for r in rows if "polyc_mt_s" in r]
    if threaded:
        lines += ["", _threads_table(threaded)]
    return "\n".join(lines)


def _threads_table(rows: list[dict]) -> str:
    """The multi-thread runs, apart from the single-thread table: polyc's output
    scheduled with wavefronts on ``threads`` OpenMP threads, against gcc and
    polyc's own single-thread build (same run, in turns)."""
    lines = [
        "| kernel | threads | polyc, 1 thread (s) | polyc, wavefronts (s) "
        "| wavefronts / gcc | wavefronts / polyc 1 thread | same bits |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        one = r.get("polyc_s")
        cells = [
            r["kernel"],
            str(r.get("threads", "")),
            f"{one:.3f}" if one else "failed",
            f"{r['polyc_mt_s']:.3f}",
            f"{r['polyc_mt_speedup']:.2f}x" if "polyc_mt_speedup" in r else "-",
            f"{one / r['polyc_mt_s']:.2f}x" if one else "-",
            "yes" if r.get("polyc_mt_same_bits") else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(LARGE))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--size",
        default="LARGE",
        choices=["LARGE", "LARGE-ALL", "SMALLER"],
        help="LARGE: PolyBench's LARGE but MEDIUM for the kernels of DATASET; "
        "LARGE-ALL: LARGE for all; SMALLER: a fifth of LARGE",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per run of a build"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="above 1: also build polyc's output with wavefronts and run it on "
        "this many OpenMP threads (a separate table; the main table stays one "
        "thread)",
    )
    out_argument(parser)
    args = parser.parse_args(argv)
    polly = polly_command()
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyc-corpus-bench-") as tmp:
        for name in args.only or sorted(LARGE):
            data, sizes = dataset(name, args.size)
            row = run_kernel(
                name,
                Path(tmp),
                args.repeat,
                sizes,
                polly,
                args.timeout,
                data,
                args.threads,
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    suffix = {"LARGE": "", "LARGE-ALL": "_large_all", "SMALLER": "_smaller"}[args.size]
    path = args.out or RESULTS / f"host_c_corpus{suffix}.json"
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(table(payload))
    if args.out is None:
        results_md.regenerate_for(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
