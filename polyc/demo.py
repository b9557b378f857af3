"""``polyc demo`` (what ``make run`` runs): one multi-op kernel, end to end.

A small transformer-style MLP block, ``softmax(gelu(x @ W + b))``, is defined with the
compute API, lowered to an affine program, checked against the reference interpreter,
compiled to C, run, and reported.
"""

from __future__ import annotations

import time

import numpy as np

from polyc.lang import compute as pc


def mlp_block(tokens: int, width: int, hidden: int):
    x = pc.placeholder("x", (tokens, width))
    w = pc.placeholder("w", (width, hidden))
    b = pc.placeholder("b", (hidden,))
    k = pc.reduce_axis(width, "k")
    h = pc.compute("h", (tokens, hidden), lambda i, j: pc.sum(x[i, k] * w[k, j], k))
    g = pc.compute(
        "g",
        (tokens, hidden),
        lambda i, j: (
            0.5
            * (h[i, j] + b[j])
            * (1.0 + pc.erf((h[i, j] + b[j]) * 0.7071067811865476))
        ),
    )
    m = pc.reduce_axis(hidden, "m")
    mx = pc.compute("mx", (tokens,), lambda i: pc.max(g[i, m], m))
    e = pc.compute("e", (tokens, hidden), lambda i, j: pc.exp(g[i, j] - mx[i]))
    s = pc.compute("s", (tokens,), lambda i: pc.sum(e[i, m], m))
    out = pc.compute("out", (tokens, hidden), lambda i, j: e[i, j] / s[i])
    return pc.kernel("mlp_block", [out])


def _reference(x, w, b):
    from math import erf

    h = x.astype(np.float64) @ w.astype(np.float64) + b
    g = 0.5 * h * (1.0 + np.vectorize(erf)(h / np.sqrt(2.0)))
    e = np.exp(g - g.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run_demo(size: int = 64) -> int:
    import polyc

    t0 = time.perf_counter()
    kernel = mlp_block(tokens=size // 2, width=size, hidden=2 * size)
    t_lower = time.perf_counter() - t0
    print(kernel)
    print()
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((size // 2, size), dtype=np.float32),
        "w": (
            rng.standard_normal((size, 2 * size), dtype=np.float32) / np.sqrt(size)
        ).astype(np.float32),
        "b": rng.standard_normal(2 * size, dtype=np.float32),
    }
    t0 = time.perf_counter()
    want = polyc.interpret(kernel, inputs)["out"]
    t_interp = time.perf_counter() - t0
    t0 = time.perf_counter()
    module = polyc.build(kernel)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = module(inputs)["out"]
    t_run = time.perf_counter() - t0
    err_interp = float(np.max(np.abs(want - _reference(**inputs))))
    err_c = float(np.max(np.abs(got - want)))
    ok = err_c <= 1e-5 and err_interp <= 1e-5
    print("report")
    print(f"  statements            {len(kernel.statements)}")
    print(
        f"  generated C           {len(module.c_source):,} bytes, "
        f"{module.c_source.count(chr(10)):,} lines ({'cached' if module.cached else 'compiled'})"
    )
    print(f"  interpreter vs numpy  max |diff| = {err_interp:.2e}")
    print(
        f"  compiled C vs interp  max |diff| = {err_c:.2e}  -> {'OK' if ok else 'MISMATCH'}"
    )
    print(
        f"  time                  lower {t_lower * 1e3:.1f} ms, interpret {t_interp * 1e3:.1f} ms, "
        f"build {t_build * 1e3:.1f} ms, run {t_run * 1e3:.2f} ms"
    )
    # the same kernel on the simulated accelerator (placed by the accelerator scheduler)
    compiled = polyc.compile(kernel, config="edge-npu")
    sim_out, report = compiled.run(inputs)
    err_sim = float(np.max(np.abs(sim_out["out"] - want)))
    ok = ok and err_sim <= 1e-5
    print(f"  simulator vs interp   max |diff| = {err_sim:.2e}")
    print()
    print(report)
    return 0 if ok else 1
