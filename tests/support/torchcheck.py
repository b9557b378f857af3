"""Checking imported PyTorch models against torch eager.

``check(module, inputs, targets)`` imports ``module`` with ``polyc.from_torch``, runs
the Kernel on each target (``"interpret"``: the reference interpreter, ``"host"``: the
compiled C, ``"edge-npu"``: ``polyc.compile`` on that config, simulated) and compares every output with eager PyTorch in float32 at the issue's
tolerance: ``|got - ref| <= atol + rtol * |ref|`` with rtol 1e-4, atol 1e-5.
bfloat16 outputs are compared in units in the last place (:func:`bf16_ulps`): each
element within one bfloat16 ULP of eager PyTorch's, or within one ULP of the
output's largest magnitude (where a one-ULP difference upstream met cancellation).
"""

from __future__ import annotations

import numpy as np
import torch

import polyc
from polyc.frontends.torch.bf16 import to_numpy
from polyc.frontends.torch.bf16 import ulp_distance as bf16_ulps

RTOL, ATOL = 1e-4, 1e-5


def eager(module, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [to_numpy(o) for o in outs]


def assert_bf16_close(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    """Every element within one bfloat16 ULP of ``ref``'s, or within one ULP of
    ``ref``'s largest finite magnitude (see the module docstring)."""
    g, r = (np.asarray(x, np.float32) for x in (got, ref))
    finite = np.abs(r[np.isfinite(r)])
    top = float(finite.max()) if finite.size else 0.0
    ulp_top = 2.0 ** (np.floor(np.log2(top)) - 7) if top > 0 else 0.0
    with np.errstate(invalid="ignore"):
        ok = (bf16_ulps(got, ref) <= 1) | (np.abs(g - r) <= ulp_top)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {ok.size} bfloat16 elements differ by more than one "
        f"ULP, first at {bad[0]}: {g.flat[bad[0]]} vs {r.flat[bad[0]]}"
    )


def assert_close(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    if ref.dtype.name == "bfloat16":
        assert_bf16_close(got, ref, what)
        return
    if not np.issubdtype(ref.dtype, np.floating):
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL, err_msg=what)


def run(kernel, inputs, target: str) -> list[np.ndarray]:
    arrays = {f"arg{n}": to_numpy(t) for n, t in enumerate(inputs)}
    if target == "interpret":
        result = polyc.interpret(kernel, arrays)
    elif target == "host":
        result = polyc.build(kernel)(arrays)
    elif target == "edge-npu":
        result = polyc.compile(kernel, target)(arrays)
    else:
        raise ValueError(target)
    return [result[a.name] for a in kernel.outputs]


def check(module, inputs, targets=("interpret", "host"), **options):
    """Import, run on ``targets`` and compare with eager; returns the Kernel."""
    module = module.eval()
    kernel = polyc.from_torch(module, tuple(inputs), **options)
    refs = eager(module, inputs)
    names = ["out"] if len(refs) == 1 else [f"out{n}" for n in range(len(refs))]
    assert [a.name for a in kernel.outputs] == names
    for target in targets:
        for name, got, ref in zip(names, run(kernel, inputs, target), refs):
            assert_close(got, ref, f"{kernel.name}.{name} via {target}")
    return kernel


def all_of(cases: dict) -> tuple[torch.nn.Module, list]:
    """One module running every ``(module, inputs)`` of ``cases`` (by name,
    sorted), and its inputs: one C build for them all."""
    names = sorted(cases)

    class All(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cases = torch.nn.ModuleList([cases[n][0] for n in names])

        def forward(self, *xs):
            outs, pos = [], 0
            for n, m in zip(names, self.cases):
                k = len(cases[n][1])
                y = m(*xs[pos : pos + k])
                outs.extend(y if isinstance(y, tuple) else (y,))
                pos += k
            return tuple(outs)

    return All().eval(), [t for n in names for t in cases[n][1]]
