"""MLIR from outside polyc: linalg on tensors written as a producer writes it
(examples/mlir), lowered to affine loops by mlir-opt, imported, scheduled and
placed by polyc, simulated on edge-npu, equal to torch; and the command line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyc
from codegen.mlir import tools
from polyc.cli import main
from tests.support.paths import EXAMPLES

MLIR = EXAMPLES / "mlir"


def _affine(name: str, tmp_path) -> str:
    text = tools.opt((MLIR / name).read_text(), *tools.FROM_LINALG)
    path = tmp_path / name.replace(".mlir", ".affine.mlir")
    path.write_text(text)
    return str(path)


def _run(kernel):
    rng = np.random.default_rng(0)
    inputs = {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(np.float32)
        for a in kernel.free_inputs
    }
    compiled = polyc.compile(kernel, config="edge-npu")
    outputs, report = compiled.run(inputs)
    return compiled, inputs, outputs, report


def test_linalg_mlp_lowered_by_mlir_opt_runs_on_edge_npu(tmp_path):
    kernel = polyc.from_mlir(_affine("mlp.mlir", tmp_path))
    assert kernel.name == "mlp"
    assert [a.role.value for a in kernel.arrays.values()] == [
        "input",
        "input",
        "input",
        "output",
        "temp",
    ]
    compiled, inputs, outputs, report = _run(kernel)
    x, w, b = (inputs[n].astype(np.float64) for n in ("arg0", "arg1", "arg2"))
    np.testing.assert_allclose(
        outputs["arg3"], np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5
    )
    assert "MAC array" in str(compiled)  # the matmul went to the MAC array
    # regression: bands named L<n> (the Program's default) made the scheduler's
    # fused layer name L0 collide, and the four loop nests ran as four layers
    assert "S0+S1+S2+S3:" in str(compiled)
    assert "fused less" not in str(compiled)
    assert report.cycles > 0


@pytest.mark.slow
def test_linalg_conv_relu_lowered_by_mlir_opt_runs_on_edge_npu(tmp_path):
    kernel = polyc.from_mlir(_affine("conv_relu.mlir", tmp_path))
    _, inputs, outputs, _ = _run(kernel)
    x, w = (torch.from_numpy(inputs[n]).double() for n in ("arg0", "arg1"))
    want = torch.relu(torch.nn.functional.conv2d(x, w)).numpy()
    np.testing.assert_allclose(outputs["arg2"], want, rtol=1e-5, atol=1e-5)


def test_cli_runs_an_mlir_file_on_the_accelerator(tmp_path, capsys):
    path = _affine("mlp.mlir", tmp_path)
    assert main(["compile", path, "--config", "edge-npu", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "outputs match the interpreter: yes" in out


def test_cli_emits_scheduled_and_placed_mlir(tmp_path, capsys):
    path = _affine("mlp.mlir", tmp_path)
    assert main(["compile", path, "--config", "edge-npu", "--emit", "mlir"]) == 0
    placed = capsys.readouterr().out
    assert "affine.dma_start" in placed
    tools.verify(placed)
    gemm = str(EXAMPLES.parent / "tests" / "c_corpus" / "gemm.c")
    assert main(["compile", gemm, "--emit", "mlir", "--schedule", "auto"]) == 0
    text = capsys.readouterr().out
    assert "affine.parallel" in text
    tools.verify(text)


def test_cli_refuses_tensor_mlir_with_exit_2(capsys):
    assert main(["compile", str(MLIR / "mlp.mlir")]) == 2
    err = capsys.readouterr().err
    assert "Bufferize with results as out-parameters" in err
    assert "Traceback" not in err
