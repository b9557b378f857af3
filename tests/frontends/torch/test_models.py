"""Whole models through from_torch, against torch eager (float32, rtol 1e-4, atol 1e-5).

The models are defined in :mod:`polyc.frontends.torch.models` (no torchvision).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from polyc.frontends.torch.export import layer_of
from polyc.frontends.torch.models import (
    MLP,
    InvertedResidual,
    ResNet18,
    TransformerBlock,
    randomize_batch_norms,
)
from tests.support.torchcheck import check


def seeded(seed: int = 0):
    torch.manual_seed(seed)


def test_mlp_one_kernel_weights_bound():
    seeded()
    kernel = check(MLP(), [torch.randn(8, 64)])
    assert [a.name for a in kernel.free_inputs] == ["arg0"]
    assert set(kernel.data) == {
        f"p_fc{n}_{w}" for n in (1, 2, 3) for w in ("weight", "bias")
    }
    layers = {layer_of(s.origin) for s in kernel.statements}
    assert {"fc1", "fc2", "fc3"} <= layers


@pytest.fixture(scope="module")
def resnet():
    seeded(1)
    model = randomize_batch_norms(ResNet18(num_classes=10)).eval()
    return model, torch.randn(1, 3, 64, 64)


def test_resnet18_compiled_c(resnet):
    model, x = resnet
    kernel = check(model, [x], targets=("host",))
    # every batch norm is folded into its convolution: no statement normalises
    assert not any("batch_norm" in s.origin for s in kernel.statements)
    layers = {layer_of(s.origin) for s in kernel.statements}
    assert {"conv1", "layer1.0.conv1", "layer4.1.conv2", "fc"} <= layers


@pytest.mark.slow
def test_resnet18_interpreted(resnet):
    model, x = resnet
    check(model, [x], targets=("interpret",))


def test_resnet_width8_interpreted():
    """ResNet-18's topology at a narrow width: the interpreter path in the suite."""
    seeded(2)
    model = randomize_batch_norms(ResNet18(num_classes=10, width=8))
    check(model, [torch.randn(1, 3, 64, 64)], targets=("interpret",))


def test_mobilenetv2_blocks_depthwise():
    seeded(3)
    model = randomize_batch_norms(
        nn.Sequential(InvertedResidual(16, 16), InvertedResidual(16, 24, stride=2))
    )
    kernel = check(model, [torch.randn(1, 16, 16, 16)])
    assert any(layer_of(s.origin) == "0.block.3" for s in kernel.statements)


def test_batch_norm_lowered_alone_when_not_folded():
    seeded(4)
    model = randomize_batch_norms(
        nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    )
    x = torch.randn(2, 3, 8, 8)
    folded = check(model, [x], targets=("interpret",))
    alone = check(model, [x], targets=("interpret",), fold_batch_norm=False)
    # the batch norm's per-channel rsqrt and its per-element statement
    assert len(alone.statements) == len(folded.statements) + 2
    assert any(layer_of(s.origin) == "1" for s in alone.statements)


def test_transformer_block():
    seeded(5)
    kernel = check(TransformerBlock(256, 8, 1024), [torch.randn(1, 64, 256)])
    layers = {layer_of(s.origin) for s in kernel.statements}
    assert {"attn", "norm1", "fc1", "fc2", "norm2"} <= layers
