"""Whole-tensor reductions (0-d results) placed on the accelerator: the footprint
box of a 0-d array has no dimensions, so its lo/hi map is the tile space mapped to
the empty tuple (it ended in an IndexError in placement)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import compute as pc
from polyc.ops import nn


def _same(outputs, config="edge-npu"):
    kernel = pc.kernel("zero_dim", outputs)
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    ref = polyc.interpret(kernel, {"x": x})
    got = polyc.compile(kernel, config)({"x": x})
    for o in outputs:
        np.testing.assert_allclose(got[o.name], ref[o.name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", ["edge-npu", "tiny"])
def test_whole_tensor_sum_and_max(config):
    x = pc.placeholder("x", (4, 6))
    total = nn.sum(x, None, name="total")
    _same([nn.mul(total, 2.0, name="twice"), nn.amax(x, None, name="top")], config)


def test_whole_tensor_argmax_on_edge_npu():
    """Its last vector layers read and write only 0-d intermediates at their
    homes, so they place no buffer; the buffers were planned at the last
    layer's placement, which never came, and the input's buffer was never
    allocated (``pc_dma: buffer -1 is not live``). The last layer that places
    a buffer plans now."""
    x = pc.placeholder("x", (4, 6))
    _same([nn.argmax(x, None, name="where")])
