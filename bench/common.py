"""Helpers shared by the benchmarks: timing, native baselines, JSON and tables."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def best_time(
    fn: Callable[[], object], repeat: int = 5, min_time: float = 0.2
) -> float:
    """Best wall time of ``fn`` in seconds over ``repeat`` runs (after one warm-up).

    Each run repeats ``fn`` until ``min_time`` has passed, so short kernels are timed
    over many calls.
    """
    fn()
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def compile_native(
    source: str, function: str, flags: Sequence[str] = ("-O3", "-march=native")
):
    """Compile a C function with gcc directly (no polyc) and return it via ctypes."""
    tmp = Path(tempfile.mkdtemp(prefix="polyc-bench-"))
    c_file, so_file = tmp / "native.c", tmp / "native.so"
    c_file.write_text(source)
    subprocess.run(
        ["gcc", *flags, "-fPIC", "-shared", str(c_file), "-o", str(so_file), "-lm"],
        check=True,
    )
    return getattr(ctypes.CDLL(str(so_file)), function)


def machine() -> dict:
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/results/<name>.json`` atomically; return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def table(rows: list[dict], columns: Sequence[str]) -> str:
    """A markdown table of ``rows`` restricted to ``columns``."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def geomean(values: Sequence[float]) -> float:
    return statistics.geometric_mean(values)
