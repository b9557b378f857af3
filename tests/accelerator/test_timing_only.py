"""Timing-only runs (``Compiled.run(..., functional=False)``): the same generated
program and timing model with no data moved or computed give exactly the report of
the functional run -- cycles, busy time per engine, bytes and energy per level,
per-statement costs and the trace -- on every op of the library's wrappers, the
DRAM-direct path, an int8 requantizing epilogue, a gather, and the model suite's
small models."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import ops
from polyc.errors import ArgumentError
from tests.ops.test_kernels import CASES, _data


def _same_report(compiled, data):
    """Run ``compiled`` functionally and timing-only; assert equal reports and
    return them."""
    outputs, full = compiled.run(data)
    assert outputs  # the functional run computes its outputs
    none, timed = compiled.run(data, functional=False)
    assert none == {}
    assert timed.to_dict() == full.to_dict()
    assert timed.events == full.events  # the trace too, event by event
    assert timed.statements == full.statements
    return full, timed


@pytest.mark.parametrize("op", sorted(CASES))
def test_every_library_op_costs_the_same_timing_only(op, rng):
    kernel = CASES[op][0]()
    compiled = polyc.compile(kernel, config="tiny")
    full, _ = _same_report(compiled, _data(kernel, rng))
    assert full.cycles > 0


def test_dram_direct_scalar_statements_cost_the_same_timing_only(rng):
    kernel = ops.softmax((3, 7), 1)
    compiled = polyc.compile(kernel, config="tiny", schedule=kernel)
    assert compiled.mode == "DRAM-direct"
    full, _ = _same_report(compiled, _data(kernel, rng))
    assert full.scalar_instances > 0


def test_int8_requantizing_output_path_costs_the_same_timing_only():
    """examples/int8_chain.py (three int8 convs, each requantized) with the
    requantization fused into the MAC array's output path (pc_mac_output)."""
    import dataclasses

    import accelerator
    from examples import int8_chain as chain

    spec = accelerator.load_config("edge-npu")
    spec = dataclasses.replace(
        spec, mac_array=dataclasses.replace(spec.mac_array, requantize=True)
    )
    c = chain.make()
    compiled = polyc.compile(chain.kernel(c), config=spec)
    assert "pc_mac_output(_pc_ctx" in compiled.c_source
    _same_report(compiled, chain.inputs(c))


def test_a_gather_costs_the_same_whatever_its_indices(rng):
    """A gather reads its indices to move rows, but its cost depends on the row
    count alone: timing-only (which reads no index) equals functional runs with
    different indices."""
    kernel = ops.embedding((4, 8), (64, 16))
    compiled = polyc.compile(kernel, config="edge-npu")
    assert "pc_gather(_pc_ctx" in compiled.c_source
    weight = rng.standard_normal((64, 16)).astype(np.float32)
    reports = []
    for ids in (np.zeros((4, 8)), rng.integers(0, 64, (4, 8))):
        data = {"input": ids.astype(np.int64), "weight": weight}
        reports.append(_same_report(compiled, data)[0].to_dict())
    assert reports[0] == reports[1]


def test_timing_only_takes_missing_inputs_as_zeros():
    kernel = ops.matmul(16, 16, 16)
    compiled = polyc.compile(kernel, config="tiny")
    a = np.ones((16, 16), np.float32)
    _, full = compiled.run(A=a, B=a)
    _, timed = compiled.run(functional=False)
    assert timed.to_dict() == full.to_dict()


def test_timing_only_refuses_a_verified_compile():
    kernel = ops.matmul(8, 8, 8)
    compiled = polyc.compile(kernel, config="tiny", verify=True)
    with pytest.raises(ArgumentError, match=r"verify=True but functional=False"):
        compiled.run(functional=False)


@pytest.mark.parametrize("name", ["mlp", "inverted-residual"])
def test_the_model_suites_small_models_cost_the_same_timing_only(name):
    from bench import zoo

    model = next(m for m in zoo.MODELS if m.name == name)
    module, inputs = model.build("float32")
    kernel = polyc.from_torch(module, inputs)
    compiled = polyc.compile(kernel, config="edge-npu")
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    full, _ = _same_report(compiled, feeds)
    assert full.mac_array_macs > 0


def test_a_resnet50_stages_bottleneck_blocks_cost_the_same_timing_only():
    """ResNet-50's bottleneck blocks (transformers' ResNetBottleNeckLayer: 1x1
    reduce, 3x3, 1x1 expand, batch norms, ReLUs, the residual add) as a stage
    starts: a strided block with its projection shortcut, then one with the
    identity, at an eighth of stage 2's channels (32 -> 64, 16 in the middle)
    on a 16x16 image."""
    import torch
    from transformers.models.resnet.modeling_resnet import ResNetBottleNeckLayer

    from bench import zoo
    from polyc.frontends.torch.models import randomize_batch_norms

    zoo.transformers_module()
    torch.manual_seed(0)
    stage = torch.nn.Sequential(
        ResNetBottleNeckLayer(32, 64, stride=2), ResNetBottleNeckLayer(64, 64)
    )
    stage = randomize_batch_norms(stage).eval()
    x = torch.randn(1, 32, 16, 16)
    kernel = polyc.from_torch(stage, (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    full, _ = _same_report(compiled, {"arg0": x.numpy()})
    assert full.mac_array_macs > 0
    assert full.dram_bytes > 0 and full.energy_pj > 0
