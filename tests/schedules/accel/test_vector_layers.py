"""Vector-unit layers near their engine bound (issue 14).

A depthwise convolution on the vector unit used to run its nine taps innermost,
so every output element folded its run of contributions across lanes: one
horizontal reduction step (6 cycles on datacenter) per output, 27x its engine
bound. The scheduler now runs a vector reduction's reduction loops outside its
output loops (``tensorize.vertical_order``), each lane accumulates its own
element, and the simulator charges a reduction step only for a run of two or more
contributions to one element. Simulated cycles are deterministic: these are not
timings.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
import schedules as S
from polyc import ops
from schedules.accel.tensorize import vertical_order
from tests.support.depthwise import depthwise, normal_inputs


def _depthwise(channels: int = 64, size: int = 16):
    return depthwise(channels, size)


_inputs = normal_inputs


# (config, the most cycles over the engine bound); on main they ran 35x and 6x
DEPTHWISE = {"datacenter": 1.7, "edge-npu": 1.9}


@pytest.mark.parametrize("config", DEPTHWISE)
def test_depthwise_conv_runs_near_its_engine_bound(config, rng):
    kernel = _depthwise()
    compiled = polyc.compile(kernel, config=config)
    inputs = _inputs(kernel, rng)
    out, report = compiled.run(inputs)
    assert report.engine_ratio <= DEPTHWISE[config], str(compiled)
    # lanes accumulate their own outputs: no horizontal reduction step
    assert report.vector_ops["reduce"] == 0
    np.testing.assert_array_equal(out["out"], polyc.interpret(kernel, inputs)["out"])


def test_vertical_order_puts_the_reduction_loops_outside():
    kernel = _depthwise(4, 4)
    assert vertical_order(kernel, "S1") == ("rc", "rh", "rw", "n", "o", "h", "w")
    # the zero init reduces nothing: kept as it is
    assert vertical_order(kernel, "S0") is None


def _row_sum(order):
    """A row sum ``out[i] += x[i, r1]`` as one vector operation, the point loops
    in ``order``."""
    kernel = ops.sum((8, 64), 1)
    k = S.tile(kernel, "S0", {"i": 8})
    k = S.tile(k, "S1", {"i": 8})
    k = S.fuse(k, ["S0_t", "S1_t"], depth=1, name="T")
    k = S.permute(k, "S1", order)
    k = S.map_vector(S.map_vector(k, "S0"), "S1")
    k = S.place(k, "T", ["input", "out"], "local", config="datacenter")
    return kernel, polyc.compile(kernel, config="datacenter", schedule=k)


@pytest.mark.parametrize("order, steps", [(("i", "r1"), 8), (("r1", "i"), 0)])
def test_a_reduction_step_folds_each_run_of_two_or_more_contributions(
    order, steps, rng
):
    """Row by row, each row's 64 contributions fold across lanes: one step per
    row. Column by column, consecutive instances add into different rows, each
    lane its own: no step (main charged one per instance, 512 steps)."""
    kernel, compiled = _row_sum(order)
    inputs = _inputs(kernel, rng)
    out, report = compiled.run(inputs)
    np.testing.assert_array_equal(out["out"], polyc.interpret(kernel, inputs)["out"])
    assert report.vector_ops["reduce"] == steps * compiled.spec.vector.lanes


def test_a_fused_layers_vector_reduction_runs_its_own_tile_loops_first(rng):
    """A 1x1 convolution fused with its bias and ReLU6 on hw-a, whose MAC array
    takes int8 only: float32 runs on the vector unit, and the fused layer tiles
    the convolution's reduction by a private tile loop of its own. Its point
    band kept that statement's order (the private loop leads it, and the
    placement reads its position), so the reduction ran innermost and every
    output paid a horizontal step: 3.4x the layer's engine bound. Now only the
    point loops after the private ones are reordered: each lane accumulates
    its own element and the layer runs within 5% of its bound."""
    torch = pytest.importorskip("torch")

    module = torch.nn.Sequential(torch.nn.Conv2d(32, 64, 1), torch.nn.ReLU6()).eval()
    x = torch.randn(1, 32, 8, 8)
    compiled = polyc.compile(polyc.from_torch(module, (x,)), config="hw-a")
    text = str(compiled)
    assert "rc(S1)=" in text, text  # the reduction tiled by a private loop
    out, report = compiled.run(arg0=x.numpy())
    np.testing.assert_allclose(
        next(iter(out.values())), module(x).detach().numpy(), rtol=1e-5, atol=1e-5
    )
    assert not [e for e in report.events if e.label.endswith(" reduce")]
    assert report.cycles <= 1.05 * report.engine_bound.cycles, (
        report.cycles,
        report.engine_bound.cycles,
    )
