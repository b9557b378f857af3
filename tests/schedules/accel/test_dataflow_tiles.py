"""The scheduler sees the dataflow: on a weight-stationary 32 x 32 int8 array the
reduction tile it picks fills the array's rows.

Before the MAC array was timed by its dataflow, the search picked a K tile of 8 for
GEMM 256 on this array (fill/drain once per call, a K tile shorter than the rows
free), which a weight-stationary array runs at a quarter of its rate."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tomllib

import polyc
from accelerator.hardware.config import CONFIG_DIR, from_dict
from accelerator.hardware.dataflow import mac_timing
from polyc import ops


def array32(fast: bool, dataflow="weight_stationary"):
    """edge-npu with a 32 x 32 array (and DRAM fast enough to be compute bound)."""
    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = "edge-32x32"
    d["mac_array"].update(rows=32, cols=32, dataflow=dataflow)
    # banks that feed the 32x32 array's int32 accumulators: this is about dataflow
    d["memory"][1]["bytes_per_cycle"] = 4096.0
    if fast:
        d["memory"][0]["bytes_per_cycle"] = 64.0
        d["dma"]["bytes_per_cycle"] = 64.0
    return from_dict(d)


def _k_tile(compiled) -> int:
    """The reduction extent of one MAC call of the chosen schedule."""
    (lc,) = compiled.choice.layers
    cand = lc.candidate
    ((name, (_, _, k_group)),) = cand.structure.groups
    sizes = {v.loop(lc.layer)[1]: s for v, s in cand.sizes}
    stmt = next(s for s in lc.layer.stmts if s.name == name)
    return math.prod(sizes.get(it, lc.layer.extent(stmt, it)) for it in k_group)


GEMM = (lambda: ops.matmul(256, 256, 256, "int8"), 256**3)
CONV = (
    lambda: ops.conv2d(
        (1, 64, 56, 56), (64, 64, 3, 3), bias=False, padding=1, dtype="int8"
    ),
    56 * 56 * 64 * 64 * 9,
)


@pytest.mark.parametrize(
    "layer,fast",
    [
        (GEMM, True),
        (GEMM, False),
        pytest.param(CONV, True, marks=pytest.mark.slow),
    ],
    ids=["gemm_256", "gemm_256-dram16", "conv3x3_56"],
)
def test_weight_stationary_search_fills_the_rows_or_pays(layer, fast):
    """A K tile that fills the rows, or one the model charged for its idle rows
    (ceil(K/R) folds of R rows for K of them), and the simulator agrees."""
    make, macs = layer
    spec = array32(fast)
    a = spec.mac_array
    compiled = polyc.compile(make(), config=spec, checks=False)
    k = _k_tile(compiled)
    (lc,) = compiled.choice.layers
    predicted = dict(lc.candidate.engines)["mac"]
    if fast:  # compute bound: the rows are worth filling
        assert k % a.rows == 0, k
    used = k / (a.rows * math.ceil(k / a.rows))
    assert predicted >= macs / (a.rows * a.cols) / used
    _, report = compiled.run(
        {
            x.name: np.ones(x.concrete_shape({}), x.dtype.numpy)
            for x in compiled.kernel.free_inputs
        }
    )
    # (the model takes every call back to back; a call that waits for its loads
    # pays its weights again, and the runtime loads a call's weights only once
    # both its operands are in: 16 of the 64 calls here, 3.1%)
    assert report.engine("mac_array").busy == pytest.approx(predicted, rel=0.05)
    # a partial fold costs a whole one
    assert mac_timing(a, 64, 64, 8, 1.0).steady == mac_timing(a, 64, 64, 32, 1.0).steady


def test_a_single_buffered_array_is_scheduled():
    """Regression: without double buffering the once-per-statement term was the
    number 0, which the model's evaluator could not take (AttributeError: 'int'
    object has no attribute 'is_Symbol', found by the fuzzer)."""
    with open(CONFIG_DIR / "tiny.toml", "rb") as f:
        d = tomllib.load(f)
    d["mac_array"].update(double_buffered=False, dataflow="input_stationary")
    spec = from_dict(d)
    compiled = polyc.compile(ops.matmul(8, 12, 16, "float32"), config=spec)
    x = np.ones((8, 16), np.float32)
    w = np.ones((16, 12), np.float32)
    names = [a.name for a in compiled.kernel.free_inputs]
    out, report = compiled.run(dict(zip(names, (x, w))))
    assert compiled.mode == "placed" and report.mac_array_macs == 8 * 12 * 16
    (y,) = out.values() if isinstance(out, dict) else (out,)
    assert np.all(np.asarray(y) == 16)
