"""Checking ops against numpy/torch through the interpreter and the compiled C.

A :class:`Batch` gathers many ops (each an output tensor with its float64 or exact
reference) into ONE kernel, so a test file compiles a handful of C modules instead of
one per op. ``run()`` executes the kernel with ``polyc.interpret`` and with
``polyc.build`` and compares every output with its reference.

Tolerances (elementwise, ``scale`` = the largest ``|ref|`` of that output, at least 1):

- float32: ``|got - ref| <= 1e-5 * (|ref| + scale)`` against a float64 reference; the
  ``scale`` term admits the cancellation of sums whose result is near zero.
- float16: ``2e-2`` in place of ``1e-5`` (10-bit mantissa, and contractions
  accumulate in float16).
- integers: exact.
"""

from __future__ import annotations

import numpy as np
import torch

import polyc
from polyc import compute as pc

TOL = {"float32": 1e-5, "float16": 2e-2, "float64": 1e-12}


def f64(a: np.ndarray) -> torch.Tensor:
    """A numpy array as a float64 torch tensor (the reference's precision)."""
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def close(got: np.ndarray, ref, dtype: str, what: str, tol: float | None = None):
    ref = ref.numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    if np.issubdtype(got.dtype, np.integer):
        bad = np.flatnonzero(got.astype(np.int64) != ref.astype(np.int64))
        assert bad.size == 0, (
            f"{what}: {bad.size} of {got.size} integers differ, first at flat index "
            f"{bad[0]}: {got.flat[bad[0]]} != {ref.flat[bad[0]]}"
        )
        return
    rtol = tol if tol is not None else TOL[dtype]
    ref = ref.astype(np.float64)
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    err = np.abs(got.astype(np.float64) - ref)
    limit = rtol * (np.abs(ref) + scale)
    bad = np.flatnonzero(~(err <= limit))
    assert bad.size == 0, (
        f"{what}: {bad.size} of {got.size} elements off by more than {rtol} relative; "
        f"worst {err.max():.3g} at flat index {int(np.argmax(err))} "
        f"(got {got.flat[int(np.argmax(err))]}, ref {ref.flat[int(np.argmax(err))]})"
    )


class Batch:
    """Several ops in one kernel, each with a reference."""

    def __init__(self, name: str, rng: np.random.Generator | None = None):
        self.name = name
        self.rng = rng or np.random.default_rng(0)
        self.data: dict[str, np.ndarray] = {}
        self.holders: dict[str, pc.Tensor] = {}
        self.checks: list[tuple[pc.Tensor, object, float | None]] = []

    def input(self, name: str, array) -> pc.Tensor:
        """A placeholder bound to ``array`` (its shape and dtype)."""
        array = np.ascontiguousarray(array)
        self.data[name] = array
        self.holders[name] = pc.placeholder(name, array.shape, array.dtype)
        return self.holders[name]

    def randn(self, name: str, shape, dtype="float32", scale=1.0) -> pc.Tensor:
        a = self.rng.standard_normal(shape) * scale
        return self.input(name, a.astype(dtype))

    def randint(self, name: str, shape, lo=-8, hi=8, dtype="int8") -> pc.Tensor:
        return self.input(name, self.rng.integers(lo, hi, shape).astype(dtype))

    def positive(self, name: str, shape, dtype="float32") -> pc.Tensor:
        a = self.rng.uniform(0.25, 4.0, shape)
        return self.input(name, a.astype(dtype))

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def check(self, out: pc.Tensor, ref, tol: float | None = None) -> None:
        """Expect ``out`` to equal ``ref`` (numpy array or torch tensor)."""
        self.checks.append((out, ref, tol))

    def kernel(self) -> polyc.Kernel:
        outs = [t for t, _, _ in self.checks]
        return pc.kernel(self.name, outs)

    def run(self, compiled: bool = True) -> polyc.Kernel:
        """Interpret (and compile and run) the batch; assert every output."""
        kernel = self.kernel()
        inputs = {a.name: self.data[a.name] for a in kernel.inputs}
        results = [("interpret", polyc.interpret(kernel, inputs))]
        if compiled:
            results.append(("compiled C", polyc.build(kernel)(**inputs)))
        for how, got in results:
            for t, ref, tol in self.checks:
                close(got[t.name], ref, t.dtype.name, f"{how} {t.name}", tol)
        return kernel
