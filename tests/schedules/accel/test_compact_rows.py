"""A MAC call over several output rows of a convolution into a compact output.

M = (h, w) used to fuse only over an output padded to the input row's pitch, so a
4 x 4 output tile of a 3x3 convolution (input rows of 6 pixels) ran 22 rows of the
array for 16 outputs: two folds of a 16-row array for one fold's work. A's view
now splits its rows too (``pc_view`` ``rspan`` / ``rps``): the output stays
compact, A is read at its own pitch (polyc.ir.macmap, the M split).
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from accelerator import load_config
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc import ops
from polyc.errors import SimulationError
from polyc.ir import macmap
from schedules.accel import space
from tests.support.macmap_conv import conv_operands, conv_tile


def _data(kernel, seed=0):
    rng = np.random.default_rng(seed)
    return {
        a.name: rng.integers(-3, 4, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }


# the predicate ---------------------------------------------------------------------


def test_predicate_reads_compact_output_rows_at_the_input_row_pitch():
    # 8 x 8 outputs (compact: h steps the output by 8), input rows of 10 pixels of
    # 4 channels (h steps it by 40 elements, w by 4)
    groups = {"m": ("h", "w"), "n": ("o",), "k": ("rc",)}
    dims = macmap.check("S1", groups, conv_operands(), *conv_tile())
    m = dims["m"]
    assert m.ratios == (8, 1) and m.unit == (("c", 1), ("a", 4))
    assert m.split_of("a") == (8, 40) and m.split_of("c") is None


def test_predicate_wants_the_inner_row_whole_in_every_tile():
    # a partial last tile of w would change the span from tile to tile: no split,
    # and the plain fusion refuses the two pitches
    extents, exact = conv_tile()
    exact["w"] = False
    groups = {"m": ("h", "w"), "n": ("o",), "k": ("rc",)}
    got = macmap.check("S1", groups, conv_operands(), extents, exact)
    assert isinstance(got, macmap.Refusal)
    assert "cannot fuse into MAC dimension m" in got.what


# the runtime -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


def _sim(rt):
    sim = Simulator(rt, load_config("tiny"))
    bufs = tuple(
        sim.alloc("l1", off, 512, n) for off, n in ((0, "a"), (512, "b"), (1024, "c"))
    )
    return sim, bufs


def test_runtime_reads_a_row_split_view(rt):
    # A: 6 x 4, row r at (r // 3) * 20 + (r % 3) * 2 of a 100-element buffer
    sim, (a, b, c) = _sim(rt)
    rng = np.random.default_rng(0)
    src = rng.integers(-8, 8, 100).astype(np.float32)
    sim.array(a, np.float32, (100,))[:] = src
    w = rng.integers(-8, 8, (4, 3)).astype(np.float32)
    sim.array(b, np.float32, (4, 3))[:] = w
    sim.mac(6, 3, 4, (a, 1, 2, 5, 0, 0, 3, 20), (b, 0, 3, 1), (c, 0, 3, 1))
    rows = [(r // 3) * 20 + (r % 3) * 2 for r in range(6)]
    want = np.stack([src[1 + row + 5 * np.arange(4)] for row in rows]) @ w
    np.testing.assert_array_equal(sim.array(c, np.float32, (6, 3)), want)


def test_runtime_refuses_partial_row_spans_and_split_outputs(rt):
    sim, (a, b, c) = _sim(rt)
    with pytest.raises(SimulationError, match=r"pc_mac S: the view's 5 rows do not"):
        sim.mac(
            5, 2, 2, (a, 0, 1, 8, 0, 0, 3, 20), (b, 0, 2, 1), (c, 0, 2, 1), label="S"
        )
    sim, (a, b, c) = _sim(rt)
    with pytest.raises(SimulationError, match=r"pc_mac S: the C view splits"):
        sim.mac(
            6, 2, 2, (a, 0, 1, 8), (b, 0, 2, 1), (c, 0, 2, 1, 0, 0, 3, 4), label="S"
        )


# the scheduler ---------------------------------------------------------------------


@pytest.mark.parametrize("config", ["tiny", "edge-npu", "datacenter"])
def test_compact_rows_match_the_interpreter(config):
    kernel = ops.conv2d((1, 8, 6, 6), (16, 8, 3, 3), bias=False, padding=1)
    compiled = polyc.compile(kernel, config=config)
    data = _data(kernel)
    got, _ = compiled.run(data)
    np.testing.assert_array_equal(got["out"], polyc.interpret(kernel, data)["out"])


def _compile(kernel, monkeypatch, compact: bool):
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    groups = space.mac_groups

    def only(*args, **kwargs):
        out = groups(*args, **kwargs)
        return [g for g in out if len(g[0][0]) < 2 or g[1] != compact]

    monkeypatch.setattr(space, "mac_groups", only)
    return polyc.compile(kernel, config="edge-npu")


def test_a_small_feature_map_runs_no_padding_rows(monkeypatch):
    """conv 3x3 64->64 on 4 x 4 (padding 1) on edge-npu's 16 x 16 array: the 16
    outputs of a channel are one fold of 16 rows over a compact output, where
    an output padded to the input's 6-pixel pitch took 22 rows (two folds), and
    one output row per call four folds of 4 rows."""
    kernel = ops.conv2d((1, 64, 4, 4), (64, 64, 3, 3), bias=False, padding=1)
    data = _data(kernel)
    want = polyc.interpret(kernel, data)["out"]
    runs = {}
    for compact in (True, False):
        compiled = _compile(kernel, monkeypatch, compact)
        (lc,) = [lc for lc in compiled.choice.layers if lc.candidate is not None]
        st = lc.candidate.structure
        got, report = compiled.run(data)
        np.testing.assert_array_equal(got["out"], want)
        runs[compact] = (st.groups_of("S1")[0], st.pitched, report)
    m, pitched, report = runs[True]
    assert m == ("h", "w") and not pitched
    m, pitched, other = runs[False]

    def busy(r):
        return {e.name: e.busy for e in r.engines}["mac_array"]

    # the withheld mapping's best (the padded pitch or one row per call) keeps
    # the array busy longer for the same MACs
    assert busy(other) > busy(report) and other.cycles > report.cycles
