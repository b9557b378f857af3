"""Placed kernels in MLIR: buffers in memory space 1 (edge-npu's SRAM), copies as
affine.dma_start/dma_wait, verified by mlir-opt; the same program with its copies
as element loops runs through the host lowering equal to the interpreter (the
buffers' offsets and boxes are right)."""

from __future__ import annotations

import pytest

import polyc
from codegen.mlir import tools
from polyc import ops
from tests.support import mlircheck as mc


@pytest.fixture(scope="module")
def placed():
    kernels = {
        "gemm": ops.matmul(64, 64, 64),
        "conv": ops.conv2d((1, 8, 16, 16), (16, 8, 3, 3), padding=1),
        "conv_int8_s2": ops.conv2d(
            (1, 3, 9, 9), (4, 3, 3, 3), stride=2, padding=1, dtype="int8"
        ),
    }
    return {n: polyc.compile(k, config="edge-npu").kernel for n, k in kernels.items()}


def test_placed_gemm_has_sram_buffers_and_dma(placed):
    text = polyc.to_mlir(placed["gemm"])
    tools.verify(text)
    assert 'memref.alloc() {polyc.level = "sram"' in text
    assert ": memref<32x8xf32, 1>" in text  # A's tile in SRAM (memory space 1)
    assert text.count("affine.dma_start") == 3  # A and B in, out back
    assert text.count("affine.dma_wait") == 3
    assert "affine.load %A_sram_0[%i - 32*%i_t, %k - 8*%k_t]" in text
    assert 'polyc.engine = "mac"' in text


def test_placed_conv_clips_its_padded_box_and_zeroes_the_halo(placed):
    text = polyc.to_mlir(placed["conv"])
    tools.verify(text)
    assert "max affine_map<(d0) -> (4*d0 - 1, 0)>(%h_t)" in text
    assert "affine.store %" in text and "%input_sram_0_z0" in text
    assert "affine.dma_start %input[" in text


def test_placed_kernels_run_equal_to_the_interpreter_with_copies_as_loops(placed):
    assert mc.check(placed) == {n: None for n in placed}


@pytest.mark.slow
def test_placed_ops_on_every_config_verify_and_run_equal():
    kernels = {}
    for config in ("tiny", "edge-npu", "datacenter"):
        for k in (
            ops.matmul(96, 80, 72),
            ops.conv2d((1, 16, 14, 14), (32, 16, 3, 3), padding=1, stride=2),
            ops.softmax((8, 64), 1),
            ops.layer_norm((4, 8, 32), (32,)),
            ops.max_pool2d((1, 8, 12, 12), 3, 2, 1),
        ):
            placed = polyc.compile(k, config=config).kernel
            tools.verify(polyc.to_mlir(placed))
            kernels[f"{config}_{k.name}"] = placed
    assert mc.check(kernels) == {n: None for n in kernels}


def test_placed_mlir_enters_an_mlir_pipeline_and_is_not_imported_back(placed):
    text = polyc.to_mlir(placed["gemm"])
    lowered = tools.opt(text, "--lower-affine")  # affine.dma_* -> memref.dma_*
    assert "memref.dma_start" in lowered and "affine." not in lowered
    with pytest.raises(polyc.FrontendError, match="has a memory space or a layout"):
        polyc.from_mlir(text)
