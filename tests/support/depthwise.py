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
