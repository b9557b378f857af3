"""A convolution's whole filter window in one MAC call: K = rh x rw x rc.

The tensorizer used to fuse at most a row of taps with the channels into K
(``k=(rw, rc)``) and loop over the filter rows ``rh`` around the calls, so a
first-layer convolution (3 input channels) used 9 of HW-A's 32 array rows per call
and paid the partial folds in full. Now K may fuse the filter row too: A (the
input) is then read with two strides, the input row's pitch for ``rh`` and the
channels-last stride for ``(rw, rc)`` (:func:`polyc.ir.macmap.check`, ``pc_view``
``span``/``ps`` in the runtime), an im2col window of the input buffer. The search
offers it where a row of taps is shorter than the array's K dimension.

Numbers are compared with ``polyc.interpret`` on the untransformed kernel: int8
exactly, float32 at rtol 1e-5 (atol 1e-5 of the output's largest magnitude: the
MAC array sums each output in its own order).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

import polyc
from accelerator import load_config
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc import ops
from polyc.errors import SimulationError
from polyc.ir import macmap
from schedules.accel import scheduler, search, space
from schedules.accel.layers import split
from tests.support.macmap_conv import conv_operands, conv_tile

HWA = "hw-a"
WINDOW = ("rh", "rw", "rc")


def _data(kernel, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape({})
        if a.dtype.name == "int8":
            out[a.name] = rng.integers(-8, 8, shape).astype(np.int8)
        else:
            out[a.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def _window_schedule(kernel, spec):
    """The kernel placed with its convolution's K over the whole filter window:
    the best tile sizes of the best such structure (the search's own, offered
    as on an array with many rows), the other layers as the scheduler chose."""
    chosen = [lc.candidate for lc in polyc.compile(kernel, config=spec).choice.layers]
    layers = split(kernel)
    (i,) = [i for i, lay in enumerate(layers) if any(s.name == "S1" for s in lay.stmts)]
    wide = replace(spec, mac_array=replace(spec.mac_array, rows=1 << 20))
    level = space.engine_level(spec)
    capacity = search.capacities(kernel, layers[i], spec)
    best = []
    for st in space.structures(kernel, layers[i], wide, False, all_orders=False):
        if st.groups and st.groups_of("S1")[2] == WINDOW:
            best += search._best(kernel, layers[i], spec, st, level, capacity, 1)
    assert best, "no realisable window mapping"
    chosen[i] = min(best, key=lambda c: c.cycles)
    return scheduler.build(kernel, layers, chosen, spec)


CASES = {
    "3x3_s1_p1": dict(input=(1, 3, 10, 10), weight=(8, 3, 3, 3), padding=1),
    "3x3_s2_p1": dict(input=(1, 2, 11, 11), weight=(6, 2, 3, 3), padding=1, stride=2),
    "7x7_s2_p3": dict(input=(1, 3, 16, 16), weight=(8, 3, 7, 7), padding=3, stride=2),
    "7x7_s1_p0": dict(input=(1, 1, 12, 12), weight=(4, 1, 7, 7)),
}


@functools.cache
def _kernel(case: str, dtype: str):
    return ops.conv2d(bias=False, dtype=dtype, **CASES[case])


#: every case on tiny (float32) and HW-A (int8), two on the other configs
MATRIX = [
    *((case, config, dtype) for config, dtype in (("tiny", "float32"), (HWA, "int8"))
      for case in CASES),
    *((case, config, dtype)
      for config, dtype in (("edge-npu", "int8"), ("datacenter", "float32"))
      for case in ("3x3_s1_p1", "7x7_s2_p3")),
]  # fmt: skip


@pytest.mark.parametrize("case,config,dtype", MATRIX)
def test_window_mapping_matches_the_interpreter(case, config, dtype):
    kernel = _kernel(case, dtype)
    spec = load_config(config)
    placed = _window_schedule(kernel, spec)
    assert macmap.refusals(placed) == []
    (tm, _), *_ = macmap.placed(placed).values()
    assert tm.k == WINDOW
    data = _data(kernel)
    want = polyc.interpret(kernel, data)
    got, _ = polyc.compile(kernel, config=spec, schedule=placed).run(data)
    for name, ref in want.items():
        if dtype == "int8":
            np.testing.assert_array_equal(got[name], ref)
        else:
            scale = float(np.abs(ref).max())
            np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-5 * scale)


def test_dilated_taps_fuse_with_the_channels_by_a_split_read():
    # dilation 2: a tap moves two channel rows of the input and one of the
    # weight, so (rw, rc) is one K read from A with two strides
    kernel = ops.conv2d((1, 2, 12, 12), (4, 2, 3, 3), bias=False, padding=2, dilation=2)
    compiled = polyc.compile(kernel, config="tiny")
    (lc,) = [lc for lc in compiled.choice.layers if lc.candidate is not None]
    assert lc.candidate.structure.groups_of("S1")[2] == ("rw", "rc")
    data = _data(kernel)
    want = polyc.interpret(kernel, data)
    got, _ = compiled.run(data)
    ref = want["out"]
    np.testing.assert_allclose(got["out"], ref, rtol=1e-5, atol=1e-5 * abs(ref).max())


# the predicate ---------------------------------------------------------------------


def test_predicate_reads_the_window_with_the_input_row_pitch():
    groups = {"m": ("w",), "n": ("o",), "k": WINDOW}
    dims = macmap.check("S1", groups, conv_operands(), *conv_tile())
    k = dims["k"]
    # K = 3 x 3 x 4 = 36: rh steps the weight by 12 (the span of (rw, rc)) and the
    # input by its row pitch, 10 pixels of 4 channels
    assert k.ratios == (12, 4, 1) and k.unit == (("a", 1), ("b", 1))
    assert k.split_of("a") == (12, 40) and k.split_of("b") is None


def test_predicate_refuses_a_window_whose_row_of_taps_does_not_fuse():
    extents, exact = conv_tile()
    groups = {"m": ("w",), "n": ("o",), "k": WINDOW}
    got = macmap.check("S1", groups, conv_operands(2), extents, exact)
    assert isinstance(got, macmap.Refusal)
    # dilated, (rw, rc) itself needs A's second stride, so rh has none left
    assert got.message("codegen").startswith(
        "codegen: iterators rh, rw, rc of S1 cannot fuse into MAC dimension k "
        "because the buffer strides of rh are not one pitch times the inner "
        "iterator's in every access"
    )
    # a row of taps that is not whole in every tile: the window would fold
    got = macmap.check("S1", groups, conv_operands(), extents, {**exact, "rw": False})
    assert isinstance(got, macmap.Refusal) and "cannot fuse" in got.what


def test_search_offers_the_window_only_where_a_row_of_taps_is_short():
    layer = lambda k: next(x for x in split(k) if any(s.name == "S1" for s in x.stmts))  # noqa: E731
    few = _kernel("3x3_s1_p1", "int8")  # a row of taps: 3 x 3 = 9
    many = ops.conv2d((1, 16, 8, 8), (8, 16, 3, 3), bias=False)  # 3 x 16 = 48
    for kernel, rows, offered in ((few, 32, True), (few, 9, False), (many, 32, False)):
        s1 = kernel.statement("S1")
        ks = [g[0][2] for g in space.mac_groups(layer(kernel), s1, rows)]
        assert (WINDOW in ks) is offered, (kernel.name, rows)


def test_many_mappings_do_not_cut_the_contractions_own_alternatives():
    # a strided conv on datacenter: S1's MAC mappings (with the window) and the
    # vector unit, times its init's two options (folded, or on the vector unit),
    # pass the cap of engine combinations. The cap kept the options of the first
    # statement that had several, the init, and cut the contraction to its first
    # mapping (before this fix the window option took datacenter's 128-channel
    # 3x3/2 conv from 10,043 to 33,413 cycles that way)
    kernel = ops.conv2d(
        (1, 16, 14, 14), (16, 16, 3, 3), bias=False, stride=2, padding=1
    )
    spec = load_config("datacenter")
    lay = next(x for x in split(kernel) if any(s.name == "S1" for s in x.stmts))
    ks = {
        st.groups_of("S1")[2]
        for st in space.structures(kernel, lay, spec, False, all_orders=False)
        if st.engine_of("S1") == "mac"
    }
    assert ks == {("rc",), ("rw", "rc"), WINDOW}


# the runtime -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


def test_runtime_reads_a_split_view_as_an_im2col_window(rt):
    # A: 5 x 12, column k at (k // 6) * 20 + (k % 6) of a 60-element buffer
    spec = load_config("tiny")
    sim = Simulator(rt, spec)
    a, b, c = (
        sim.alloc("l1", off, 512, n) for off, n in ((0, "a"), (512, "b"), (1024, "c"))
    )
    rng = np.random.default_rng(0)
    # small integers: every sum is exact whatever the order
    src = rng.integers(-8, 8, 100).astype(np.float32)
    sim.array(a, np.float32, (100,))[:] = src
    w = rng.integers(-8, 8, (12, 3)).astype(np.float32)
    sim.array(b, np.float32, (12, 3))[:] = w
    sim.mac(5, 3, 12, (a, 2, 7, 1, 6, 20), (b, 0, 3, 1), (c, 0, 3, 1))
    cols = [(k // 6) * 20 + k % 6 for k in range(12)]
    im2col = np.stack([src[2 + 7 * i + np.array(cols)] for i in range(5)])
    got = sim.array(c, np.float32, (5, 3))
    np.testing.assert_array_equal(got, im2col @ w)


def test_runtime_refuses_a_split_view_of_partial_spans(rt):
    sim = Simulator(rt, load_config("tiny"))
    a, b, c = (
        sim.alloc("l1", off, 512, n) for off, n in ((0, "a"), (512, "b"), (1024, "c"))
    )
    with pytest.raises(
        SimulationError, match=r"pc_mac S: the view's 10 columns do not"
    ):
        sim.mac(2, 2, 10, (a, 0, 10, 1, 6, 20), (b, 0, 2, 1), (c, 0, 2, 1), label="S")
    sim = Simulator(rt, load_config("tiny"))
    a, b, c = (
        sim.alloc("l1", off, 512, n) for off, n in ((0, "a"), (512, "b"), (1024, "c"))
    )
    # B's span splits its rows (K; the exchanged call's im2col operand)
    with pytest.raises(SimulationError, match=r"pc_mac S: the view's 3 rows do not"):
        sim.mac(2, 2, 3, (a, 0, 3, 1), (b, 0, 2, 1, 2, 4), (c, 0, 2, 1), label="S")


# HW-A's first-layer convolution ----------------------------------------------------


def test_first_layer_conv_on_hwa_fills_the_array_rows():
    """conv 3x3 3->32 on 112x112 (stride 1, padding 1), int8 on HW-A: the search
    picks K = 27 (of 32 rows, one fold per call, N = the 32 output channels on
    the 32 columns), and the MAC array is busy the closed form of its calls.
    Per output tile (o_t x h_t x w_t) the calls run back to back: the first
    loads its weights (R = 32 cycles), each streams its M rows at one per cycle
    (max(M, R): the next call's weights load under it), and the output path's
    requantization then ends the chain. The first call of every tile after
    the first waits for its input tile, and its weights (those of the call
    before, resident) shift in meanwhile (the runtime's pc_head_from), so only
    the first tile pays R. M = w_t with h_t calls per tile, or one
    call of M = (h_t - 1) x (w_t + 2) + w_t when M fuses output rows over the
    input row's pitch (w_t + 2 pixels)."""
    from bench import fidelity
    from bench.peers.hwa import layer

    kernel = fidelity.kernel(layer("conv3x3_c3"))
    compiled = polyc.compile(kernel, config=HWA, checks=False)
    (lc,) = [lc for lc in compiled.choice.layers if lc.candidate is not None]
    st = lc.candidate.structure
    (name,) = [s for s, e in st.engine if e == "mac"]
    m, n, k = st.groups_of(name)
    assert k == WINDOW and n == ("o",)
    sizes = {str(v): s for v, s in lc.candidate.sizes}
    ot, ht, wt = (sizes[f"SharedTile(position={p})"] for p in (1, 2, 3))
    assert ot == 32
    tiles = (112 // ht) * (112 // wt)
    if m == ("h", "w") and name in st.pitched:
        rows, calls = (ht - 1) * (wt + 2) + wt, 1
    elif m == ("h", "w"):
        rows, calls = ht * wt, 1
    else:
        rows, calls = wt, ht
    _, report = compiled.run(_data(kernel))
    busy = {e.name: e.busy for e in report.engines}["mac_array"]
    assert busy == 32 + tiles * calls * max(rows, 32)  # 32 x 32 more before
    # the cost model's MAC term is the same sum, a load per output tile and the
    # last call's drain (R + C - 2): it charges the loads the runtime hides
    # under the input tiles' waits, on a layer its DMA bounds (predicted 14,544
    # cycles, simulated 14,344); it used to charge the load once per layer
    assert dict(lc.candidate.engines)["mac"] == busy + (tiles - 1) * 32 + 62
    assert report.mac_array_macs == tiles * calls * rows * 32 * 27
    # K = rw x rc = 9 per call (the filter rows around the calls) took 39,424
    assert busy < 39_424 / 2
