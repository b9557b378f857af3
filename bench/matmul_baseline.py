"""Baseline: polyc's untransformed matmul C against numpy and against gcc -O3.

    python -m bench.matmul_baseline [--size 512]

Side by side in one run: the C polyc generates for the untransformed 512^3 float32
matmul (no scheduling yet), numpy's ``@`` (OpenBLAS), and the same i-j-k loop nest
written by hand and compiled with ``gcc -O3 -march=native`` directly. Writes
bench/results/matmul_baseline.json and regenerates its table in docs/results.md.
This is the baseline scheduling must improve.
"""

from __future__ import annotations

import argparse
import ctypes

import numpy as np

import polyc
from bench import results_md
from bench.common import best_time, compile_native, write_json
from polyc import compute as pc

NATIVE = r"""
void matmul(long n, const float *restrict A, const float *restrict B, float *restrict C) {
  for (long i = 0; i < n; i++)
    for (long j = 0; j < n; j++) {
      C[i * n + j] = 0.0f;
      for (long k = 0; k < n; k++)
        C[i * n + j] += A[i * n + k] * B[k * n + j];
    }
}
"""


def run(size: int = 512) -> dict:
    A = pc.placeholder("A", (size, size))
    B = pc.placeholder("B", (size, size))
    k = pc.reduce_axis(size, "k")
    C = pc.compute("out", (size, size), lambda i, j: pc.sum(A[i, k] * B[k, j], k))
    kern = pc.kernel("matmul", [C])
    names = [a.name for a in kern.free_inputs]
    rng = np.random.default_rng(0)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    inputs = dict(zip(names, (a, b)))
    module = polyc.build(kern)
    out_name = kern.outputs[0].name
    c_polyc = module(inputs)[out_name]

    native = compile_native(NATIVE, "matmul")
    c_native = np.zeros((size, size), np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)

    def call_native():
        native(
            ctypes.c_long(size),
            a.ctypes.data_as(ptr),
            b.ctypes.data_as(ptr),
            c_native.ctypes.data_as(ptr),
        )

    call_native()
    want = a.astype(np.float64) @ b.astype(np.float64)
    for got in (c_polyc, c_native, a @ b):
        np.testing.assert_allclose(got, want, rtol=1e-4)

    t_polyc = best_time(lambda: module(inputs), repeat=3)
    t_native = best_time(call_native, repeat=3)
    t_numpy = best_time(lambda: a @ b, repeat=3)
    flops = 2.0 * size**3
    rows = [
        {
            "variant": "polyc (untransformed)",
            "seconds": t_polyc,
            "GFLOP/s": flops / t_polyc / 1e9,
            "vs polyc": 1.0,
        },
        {
            "variant": "gcc -O3 plain loop nest",
            "seconds": t_native,
            "GFLOP/s": flops / t_native / 1e9,
            "vs polyc": t_polyc / t_native,
        },
        {
            "variant": "numpy @ (BLAS)",
            "seconds": t_numpy,
            "GFLOP/s": flops / t_numpy / 1e9,
            "vs polyc": t_polyc / t_numpy,
        },
    ]
    payload = {
        "benchmark": "matmul_baseline",
        "size": size,
        "rows": rows,
        "ratios": {
            "native_over_polyc": t_polyc / t_native,
            "numpy_over_polyc": t_polyc / t_numpy,
        },
    }
    path = write_json("matmul_baseline", payload)
    print(table(rows))
    print(f"wrote {path}")
    results_md.regenerate_for(path)
    return payload


#: the variants of the JSON as the table names them
LABELS = {
    "polyc (untransformed)": "polyc, untransformed schedule",
    "gcc -O3 plain loop nest": (
        "same loop nest, hand-written C, `gcc -O3 -march=native`"
    ),
    "numpy @ (BLAS)": "numpy `@` (OpenBLAS)",
}


def table(rows: list[dict]) -> str:
    """The docs/results.md table of ``rows`` (matmul_baseline.json's): seconds,
    GFLOP/s and each variant's speed relative to polyc's."""
    lines = ["| variant | seconds | GFLOP/s | ratio to polyc |", "|---|---|---|---|"]
    for r in rows:
        ratio = r["vs polyc"]
        label = LABELS.get(r["variant"], r["variant"])
        lines.append(
            f"| {label} | {r['seconds']:.3f} | {r['GFLOP/s']:.2f} | "
            + (f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.2f}")
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    run(parser.parse_args(argv).size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
