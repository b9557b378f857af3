"""Fusion across contractions chosen with the cost model (schedules/accel/groups.py)."""

from __future__ import annotations

import torch
from torch import nn

import polyc
from accelerator.hardware.config import load_config
from schedules.accel.bias import defer_all
from schedules.accel.groups import fusion_cuts
from schedules.accel.layers import split


def _kernel(model, *shape):
    torch.manual_seed(0)
    kernel = polyc.from_torch(model.eval(), (torch.randn(*shape),))
    return defer_all(kernel)  # as the scheduler sees it


def test_a_convolution_and_a_depthwise_one_are_kept_apart():
    """Fused (legal: with the biases in the epilogues the two share their batch
    loop) they ran 124,494 cycles on edge-npu, apart 59,528: the depthwise layer
    wants the vector unit and tiles of its own."""
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1, groups=32),
        nn.ReLU(),
    )
    kernel = _kernel(model, 1, 3, 32, 32)
    (fused,) = [layer for layer in split(kernel) if not layer.opaque]
    assert len(fused.stmts) == 6
    cuts = fusion_cuts(kernel, load_config("edge-npu"), True, {})
    assert cuts == {0, fused.children[3]}  # the depthwise's init starts a layer
    compiled = polyc.compile(kernel, config="edge-npu")
    assert len(compiled.choice.layers) == 2


def test_linear_layers_whose_intermediates_fit_stay_fused():
    """Four 32-wide linear layers on 8 rows: fused, no intermediate goes to DRAM
    (2,196 cycles against 3,560 layer by layer on edge-npu)."""
    layers = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    kernel = _kernel(nn.Sequential(*layers), 8, 32)
    assert fusion_cuts(kernel, load_config("edge-npu"), True, {}) == {0}
    compiled = polyc.compile(kernel, config="edge-npu")
    assert len(compiled.choice.layers) == 1
