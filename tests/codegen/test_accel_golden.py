"""Golden C for placed accelerator kernels (``pytest --update-golden`` rewrites them).

Each kernel is compiled for ``tiny`` with the default (accelerator-aware) scheduler,
so a golden pins the scheduler's choice and the placed emitter's text together: a
refactor of either that changes no behaviour changes no golden. The runtime's header
(``polyc_rt.h``), which every kernel's translation unit starts with, is left out:
it belongs to the runtime, not to the kernel.
"""

from __future__ import annotations

import pytest

import polyc
from accelerator.sim import abi
from polyc import compute as pc
from polyc import ops
from polyc.ops import elementwise, nn


def linear_relu():
    """``relu(x @ w.T + b)``: init, contraction and epilogue fused in one layer."""
    x = pc.placeholder("x", (16, 32), "float16")
    w = pc.placeholder("w", (24, 32), "float16")
    b = pc.placeholder("b", (24,), "float16")
    out = elementwise.relu(nn.linear(x, w, b, name="lin"), name="out")
    return pc.kernel("linear_relu", [out], inputs=[x, w, b])


CASES = {
    "gemm": lambda: ops.matmul(16, 16, 16, dtype="float16"),
    "conv": lambda: ops.conv2d(
        (1, 4, 6, 6), (8, 4, 3, 3), bias=False, padding=1, dtype="float16"
    ),
    "linear_relu": linear_relu,
}


def kernel_c(compiled) -> str:
    """The kernel's part of the generated translation unit (after the header)."""
    text = compiled.c_source
    header = abi.header()
    assert text.startswith(header)
    return text[len(header) :]


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_placed_c_on_tiny(golden, name):
    compiled = polyc.compile(CASES[name](), config="tiny")
    assert compiled.mode == "placed"
    golden(f"accel_tiny_{name}.c", kernel_c(compiled))


def test_the_fused_case_is_one_layer_on_the_mac_array_and_vector_unit():
    # what the linear_relu golden is meant to pin: one layer, MAC and vector unit;
    # the bias init became a zero init folded into the MAC calls (the epilogue
    # adds the bias: schedules/accel/bias.py)
    compiled = polyc.compile(linear_relu(), config="tiny")
    (layer,) = compiled.choice.layers
    assert len(layer.layer.stmts) == 3
    engines = {s: layer.candidate.structure.engine_of(s) for s in ("S0", "S1", "S2")}
    assert engines == {"S0": "fold", "S1": "mac", "S2": "vector"}
