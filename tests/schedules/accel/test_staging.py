"""Two-level tiling by the accelerator scheduler: on a config with an SRAM level
above the engines' one (datacenter's ``shared``), operands that the local tiles
re-read from DRAM are staged whole there once, when the cost model says that pays.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from accelerator import load_config
from polyc import ops
from schedules.accel import scheduler as accel
from schedules.accel.space import upper_level

TOLERANCE = 0.25  # as tests/schedules/accel/test_scheduler.py


def _gemm():
    # int8 2048x2048, K=256: the 512 KiB local level re-reads A and B across
    # tiles, so the layer is DRAM-bound on the single-level placement
    return ops.matmul(2048, 2048, 256, "int8")


@pytest.mark.parametrize("stage", [False, True])
def test_staged_operands_come_from_shared_and_dram_is_read_once(stage, rng):
    kernel = _gemm()
    spec = load_config("datacenter")
    single = accel.schedule(kernel, spec, stage=False)
    if stage:  # the scheduler behind polyc.compile, and its explanation
        compiled = polyc.compile(kernel, config="datacenter")
        choice = compiled.choice
        text = str(compiled)
        assert "staged whole in shared (read from DRAM once" in text
        assert "A_shared_0" in text and "B_shared_0" in text
    else:
        choice = single
        compiled = polyc.compile(kernel, config="datacenter", schedule=choice.kernel)
    cand = choice.layers[-1].candidate
    assert cand.staged == (("A", "B") if stage else ())
    inputs = {
        a.name: rng.integers(-8, 8, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }
    got, report = compiled.run(inputs)
    a, b = (inputs[x.name].astype(np.int64) for x in kernel.free_inputs)
    np.testing.assert_array_equal(got["out"], a @ b)
    loads = [
        (e.src, e.dst, e.amount) for e in report.events if e.kind == "dma" and e.amount
    ]
    staged = [x for x in loads if (x[0], x[1]) == ("dram", "shared")]
    if stage:
        # each operand crosses DRAM once (a copy cut into channel-sized calls)
        assert sum(x[2] for x in staged) == a.size + b.size
        assert not [x for x in loads if (x[0], x[1]) == ("dram", "local")]
        assert [x for x in loads if (x[0], x[1]) == ("shared", "local")]
        assert report.dram_bytes < single.layers[-1].candidate.dram_bytes
        assert report.dram_bytes == a.size + b.size + 4 * a.shape[0] * b.shape[1]
    else:
        assert not staged
    predicted = choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= TOLERANCE, (predicted, report)


def test_one_sram_level_stages_nothing():
    kernel = _gemm()
    assert upper_level(load_config("datacenter")) is not None
    for config in ("tiny", "edge-npu"):
        assert upper_level(load_config(config)) is None
        choice = accel.schedule(kernel, load_config(config))
        assert all(not lc.candidate or not lc.candidate.staged for lc in choice.layers)
