"""bfloat16 in the interpreter, the host C and the simulated accelerator.

The C stores bfloat16 as ``uint16_t`` and computes in float, rounding every result
to nearest even (:mod:`codegen.cexpr`); the interpreter holds ``ml_dtypes.bfloat16``
arrays and rounds the same way (:mod:`polyc.oracle.interpreter`). Both must agree
bit for bit with each other and with PyTorch's conversion; the MAC array runs
bfloat16 operands into float32 accumulators at the float16 peak where the config
lists bfloat16 (edge-npu), and a config that does not list it says so.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyc
from accelerator.hardware.config import load_config
from polyc import compute as pc
from polyc.ir import dtypes
from polyc.ops import nn

BF16 = dtypes.bfloat16_numpy()

#: float32 values whose rounding to bfloat16 tells the rounding rule apart: ties
#: (to even, both ways), just above a tie, the largest float (to inf), the smallest
#: denormal, the largest bfloat16, infinities, signed zeros
EDGES = np.array(
    [
        1 + 2**-8,  # tie: down to 1 (even)
        1 + 3 * 2**-8,  # tie: up to 1 + 2**-6 (even)
        -(1 + 2**-8),
        1 + 2**-8 + 2**-20,  # above the tie: up
        np.finfo(np.float32).max,  # rounds to inf
        3.3895313892515355e38,  # the largest bfloat16
        1e-45,  # the smallest float32 denormal: to 0
        9.2e-41,  # a bfloat16 denormal
        np.inf,
        -np.inf,
        -0.0,
        0.0,
        1 / 3,
    ],
    dtype=np.float32,
)


def _bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint16)


def _cast_kernel(src: str):
    x = pc.placeholder("x", (len(EDGES) + 1,), src)
    out = nn.cast(x, "bfloat16", name="out")
    return pc.kernel(f"to_bf16_{src}", [out], inputs=[x])


@pytest.mark.parametrize("src", ["float32", "float64"])
def test_rounding_to_bfloat16_equals_torchs_in_the_interpreter_and_the_c(src):
    values = np.append(EDGES, np.nan).astype(src)
    if src == "float64":  # a double rounds through float first, as in c10
        values[3] = 1 + 2**-8 + 2**-30
    kernel = _cast_kernel(src)
    want = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy()
    for got in (
        polyc.interpret(kernel, {"x": values})["out"],
        polyc.build(kernel)({"x": values})["out"],
    ):
        assert got.dtype.name == "bfloat16"
        np.testing.assert_array_equal(_bits(got)[:-1], want.view(np.uint16)[:-1])
        assert np.isnan(np.float32(got[-1]))  # NaN stays a (quiet) NaN


def _arith_kernel():
    x = pc.placeholder("x", (48,), "bfloat16")
    y = pc.placeholder("y", (48,), "bfloat16")
    outs = [
        nn.add(nn.mul(x, y), 0.1, name="fma_like"),
        nn.div(x, y, name="quotient"),
        nn.exp(x, name="e"),
        nn.gelu(y, name="g"),
        nn.maximum(x, y, name="top"),
        nn.cast(nn.sum(x, name="total"), "bfloat16", name="total_bf16"),
    ]
    return pc.kernel("bf16_arith", outs, inputs=[x, y])


def _inputs(seed=0, **shapes):
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(s) * 2).astype(BF16) for k, s in shapes.items()}


def test_bfloat16_arithmetic_is_the_same_in_the_interpreter_the_c_and_the_simulator():
    kernel = _arith_kernel()
    feeds = _inputs(x=(48,), y=(48,))
    ref = polyc.interpret(kernel, feeds)
    for got in (polyc.build(kernel)(feeds), polyc.compile(kernel, "edge-npu")(feeds)):
        for a in kernel.outputs:
            assert got[a.name].dtype == ref[a.name].dtype, a.name
            np.testing.assert_array_equal(
                got[a.name].view(np.uint16 if a.dtype.itemsize == 2 else np.uint32),
                ref[a.name].view(np.uint16 if a.dtype.itemsize == 2 else np.uint32),
                err_msg=a.name,
            )


def _matmul(dt: str):
    a = pc.placeholder("a", (32, 48), dt)
    b = pc.placeholder("b", (48, 40), dt)
    return pc.kernel(f"mm_{dt}", [nn.matmul(a, b, name="out")], inputs=[a, b])


def test_a_bfloat16_matmul_runs_on_the_mac_array_at_the_float16_peak():
    spec = load_config("edge-npu")
    peak = spec.mac_array.peak_macs_per_cycle
    assert peak("bfloat16") == peak("float16") > 0
    kernel = _matmul("bfloat16")
    assert kernel.outputs[0].dtype == dtypes.float32  # float32 accumulation
    feeds = _inputs(a=(32, 48), b=(48, 40))
    compiled = polyc.compile(kernel, "edge-npu")
    got, report = compiled.run(feeds)
    assert "[MAC array" in str(compiled)
    assert compiled.fallbacks() == []
    # the MAC array's float32 sums, in the program's k order: bit for bit
    np.testing.assert_array_equal(got["out"], polyc.interpret(kernel, feeds)["out"])
    half = _matmul("float16")
    feeds16 = {k: v.astype(np.float16) for k, v in feeds.items()}
    _, report16 = polyc.compile(half, "edge-npu").run(feeds16)
    assert report.roofline.compute_cycles == report16.roofline.compute_cycles


def test_a_config_without_bfloat16_says_where_the_contraction_runs_instead():
    assert load_config("tiny").mac_array.peak_macs_per_cycle("bfloat16") == 0
    compiled = polyc.compile(_matmul("bfloat16"), "tiny")
    (note,) = compiled.fallbacks()
    assert note.endswith(
        "is a bfloat16 contraction but runs on the vector unit because the MAC "
        "array of tiny lists no bfloat16 rate. Use a config whose "
        "[mac_array.dtypes] has bfloat16, or cast the operands to one it has "
        "(int8, float16, float32)"
    )
    feeds = _inputs(a=(32, 48), b=(48, 40))
    np.testing.assert_array_equal(
        compiled(feeds)["out"], polyc.interpret(compiled.kernel, feeds)["out"]
    )


def test_mlir_export_of_a_bfloat16_kernel_is_refused_with_the_cast():
    from polyc.errors import CodegenError

    x = pc.placeholder("x", (8,), "bfloat16")
    kernel = pc.kernel("k", [nn.exp(x, name="out")], inputs=[x])
    with pytest.raises(
        CodegenError,
        match=r"^mlir: bfloat16 has no MLIR export because polyc writes the MLIR "
        r"types of bool, float16, .* only\. Cast the kernel's bfloat16 arrays to "
        r"float32 or float16 before exporting it\.$",
    ):
        polyc.to_mlir(kernel)
