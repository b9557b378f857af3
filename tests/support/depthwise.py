"""A depthwise convolution and normal random inputs, shared by the tests of the
vector layers and of a layer split across engines."""

from __future__ import annotations

from polyc import ops


def depthwise(channels: int, size: int):
    """A 3x3 depthwise convolution (padding 1, no bias) of ``channels`` channels
    on a ``size`` x ``size`` image."""
    return ops.conv2d(
        (1, channels, size, size),
        (channels, 1, 3, 3),
        bias=False,
        padding=1,
        groups=channels,
    )


def normal_inputs(kernel, rng) -> dict:
    """Standard normal values for each free input of ``kernel``."""
    return {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }


def depthwise_pair():
    """Two depthwise convolutions with their ReLU6 and a pointwise one between,
    imported from torch: two layers that ``schedules.accel.share`` may split
    across the engines (a split adds statements the program lacks, ``S3_1``),
    and its input."""
    import torch
    from torch import nn

    import polyc

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(32, 32, 3, padding=1, groups=32),
        nn.ReLU6(),
        nn.Conv2d(32, 32, 1),
        nn.Conv2d(32, 32, 3, padding=1, groups=32),
        nn.ReLU6(),
    ).eval()
    x = torch.randn(1, 32, 8, 8)
    return polyc.from_torch(model, (x,)), x
