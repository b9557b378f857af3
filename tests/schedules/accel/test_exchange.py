"""The MAC call with its operands exchanged: ``C^T = B^T A^T``.

A weight-stationary array holds B (k on its rows, n on its columns) and streams
A's m rows through it: a convolution with 16 output channels on datacenter's 64
columns leaves 48 of them idle while it streams every pixel, at float32's 0.25
MACs per PE per cycle 4 cycles a pixel. Exchanged, B (the weights) enters the A
port and is streamed (16 channels: 64 cycles a fold), A (the im2col input) is
held, its pixels on the 64 columns: 12 folds of 64 cycles for a 16 x 16 output
tile against 3 of 1,024. The im2col view moves with A into the B port, where
``pc_view``'s span splits the rows (K) and its rspan the columns (the pixels).
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
import schedules as S
from accelerator import load_config
from accelerator.hardware import dataflow
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc import ops
from polyc.errors import PlacementError, SimulationError
from polyc.ir import macmap, tree
from polyc.ir import marks as pm
from schedules.accel import layers, space
from schedules.accel.tensorize import contraction
from schedules.apply import replay
from tests.schedules.accel.test_operand_levels import three_sram
from tests.support.macmap_conv import conv_operands, conv_tile

# the runtime -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


def _sim(rt):
    sim = Simulator(rt, load_config("tiny"))
    bufs = tuple(
        sim.alloc("l1", off, 1024, n)
        for off, n in ((0, "a"), (1024, "b"), (2048, "c"), (3072, "d"))
    )
    return sim, bufs


def _transposed(view):
    buf, off, rs, cs, *split = view
    return (buf, off, cs, rs, *split)


@pytest.mark.parametrize(
    "dtype, acc", [("float32", "float32"), ("float16", "float16"), ("int8", "int32")]
)
def test_runtime_exchanged_call_is_the_plain_call_bit_for_bit(rt, dtype, acc):
    """A with both spans (an im2col window over several output rows): the same
    call with every view transposed and the operands exchanged writes the same
    bits, each element summed in k order."""
    sim, (a, b, c, d) = _sim(rt)
    rng = np.random.default_rng(1)
    src = rng.standard_normal(200).astype(np.float32)
    if dtype == "int8":
        src = rng.integers(-100, 100, 200)
    sim.array(a, dtype, (200,))[:] = src.astype(dtype)
    w = (
        rng.standard_normal((6, 5))
        if dtype != "int8"
        else rng.integers(-99, 99, (6, 5))
    )
    sim.array(b, dtype, (6, 5))[:] = w.astype(dtype)
    # A: 4 x 6, m = (r // 2) * 40 + (r % 2) * 3, k = (k // 3) * 10 + (k % 3) * 2
    av = (a, 1, 3, 2, 3, 10, 2, 40)
    bv, cv = (b, 0, 5, 1), (c, 0, 5, 1)
    sim.mac(4, 5, 6, av, bv, cv, dtype=dtype, acc_dtype=acc)
    sim.mac(5, 4, 6, _transposed(bv), _transposed(av), (d, 0, 1, 5), dtype, acc)
    plain, exchanged = (sim.array(x, acc, (4, 5)) for x in (c, d))
    np.testing.assert_array_equal(plain.view(np.uint8), exchanged.view(np.uint8))
    rows = [(r // 2) * 40 + (r % 2) * 3 for r in range(4)]
    cols = [(k // 3) * 10 + (k % 3) * 2 for k in range(6)]
    got = sim.array(a, dtype, (200,))
    lhs = np.array([[got[1 + r + q] for q in cols] for r in rows], dtype=np.float64)
    want = lhs @ sim.array(b, dtype, (6, 5)).astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(plain, want)
    else:
        np.testing.assert_allclose(
            plain, want, rtol=1e-2 if dtype == "float16" else 1e-5
        )


def test_runtime_checks_b_spans_on_its_rows_and_columns(rt):
    sim, (a, b, c, _) = _sim(rt)
    # B's span splits its 5 rows (K): 5 is no multiple of 2
    with pytest.raises(SimulationError, match=r"pc_mac S: the view's 5 rows do not"):
        sim.mac(2, 4, 5, (a, 0, 5, 1), (b, 0, 1, 4, 2, 16), (c, 0, 4, 1), label="S")
    sim, (a, b, c, _) = _sim(rt)
    # B's rspan splits its 3 columns (N): 3 is no multiple of 2
    with pytest.raises(SimulationError, match=r"pc_mac S: the view's 3 columns do"):
        sim.mac(
            2, 3, 2, (a, 0, 2, 1), (b, 0, 1, 2, 0, 0, 2, 16), (c, 0, 3, 1), label="S"
        )
    sim, (a, b, c, _) = _sim(rt)
    # its window is bounds-checked through the split: row 3 of span 2 at pitch
    # 300 elements is past the 1 KiB buffer (256 elements)
    with pytest.raises(SimulationError, match=r"pc_mac S"):
        sim.mac(2, 2, 4, (a, 0, 4, 1), (b, 0, 1, 2, 2, 300), (c, 0, 2, 1), label="S")


# the mark and the predicate -------------------------------------------------------


def _mark(exchange: bool) -> pm.TensorizeMark:
    return pm.TensorizeMark(
        "S1", 3, 0, 1, ("w",), ("o",), ("rc",), ("h",), "{}", "{}", "", exchange
    )


def test_mark_round_trips_and_names_its_ports():
    plain, swapped = _mark(False), _mark(True)
    assert "exchange" not in plain.text()  # other schedules' marks unchanged
    assert pm.TensorizeMark.parse(swapped.text()) == swapped
    assert pm.TensorizeMark.parse(plain.text()) == plain
    assert "exchanged" in pm.summary(swapped.text())
    assert plain.ports == (0, 1) and swapped.ports == (1, 0)


def test_predicate_is_the_same_for_either_port_order():
    """The im2col and row-pitch exceptions are A's, whichever port it sits in:
    the runtime reads the B port's spans on its rows (K) and columns, so the
    realisable mappings are the same and so are the refusals."""
    groups = {"m": ("h", "w"), "n": ("o",), "k": ("rh", "rw", "rc")}
    dims = macmap.check("S1", groups, conv_operands(), *conv_tile())
    assert dims["k"].split_of("a") == (12, 40) and dims["m"].split_of("a") == (8, 40)
    # a dilated tap does not fuse with the channels: refused, exchanged or not
    got = macmap.check("S1", groups, conv_operands(dilation=2), *conv_tile())
    assert isinstance(got, macmap.Refusal)
    assert "cannot fuse into MAC dimension k" in got.what


# the scheduler ---------------------------------------------------------------------


def _data(kernel):
    # small integers: every sum is exact in float32, in any order
    rng = np.random.default_rng(0)
    return {
        a.name: rng.integers(-3, 4, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }


def _compile(kernel, config, monkeypatch, offer: bool = True):
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    if not offer:
        monkeypatch.setattr(space, "exchange_pays", lambda *args: False)
    compiled = polyc.compile(kernel, config=config)
    monkeypatch.undo()
    (lc,) = [lc for lc in compiled.choice.layers if lc.candidate is not None]
    return compiled, lc.candidate


def _marks(kernel) -> list[pm.TensorizeMark]:
    return [
        pm.TensorizeMark.parse(t)
        for t in tree.marks(kernel.schedule)
        if pm.kind(t) == "tensorize"
    ]


def test_few_output_channels_exchange_on_datacenter_float32(monkeypatch):
    """res-blocks' conv 3x3 16->16 on 16 x 16: exchanged, the calls hold the
    pixels and stream the channels; the simulated run takes less than half the
    cycles of the best unexchanged schedule, the model predicts it, and the
    numbers are the interpreter's."""
    kernel = ops.conv2d((1, 16, 16, 16), (16, 16, 3, 3), bias=False, padding=1)
    data = _data(kernel)
    want = polyc.interpret(kernel, data)["out"]
    compiled, cand = _compile(kernel, "datacenter", monkeypatch)
    assert cand.structure.exchanged == ("S1",)
    assert [t.exchange for t in _marks(compiled.kernel)] == [True]
    got, report = compiled.run(data)
    np.testing.assert_array_equal(got["out"], want)
    plain, plain_cand = _compile(kernel, "datacenter", monkeypatch, offer=False)
    assert plain_cand.structure.exchanged == ()
    assert [t.exchange for t in _marks(plain.kernel)] == [False]
    got_plain, plain_report = plain.run(data)
    np.testing.assert_array_equal(got_plain["out"], want)
    assert report.cycles < plain_report.cycles / 2
    assert 0.85 < cand.cycles / report.cycles < 1.15
    # the history replays to the same schedule, the exchange included
    again = replay(kernel, compiled.kernel.history)
    assert [t.exchange for t in _marks(again)] == [True]


def test_exchange_is_explained():
    kernel = ops.conv2d((1, 16, 16, 16), (16, 16, 3, 3), bias=False, padding=1)
    compiled = polyc.compile(kernel, config="datacenter")
    text = str(compiled)
    assert (
        "operands exchanged" in text and "exchanged" in text.split("schedule tree")[1]
    )


@pytest.mark.parametrize(
    "config, dtype, channels",
    [
        ("datacenter", "float16", 16),  # 1 MAC per PE per cycle: 3 x 256 = 12 x 64
        ("datacenter", "float32", 64),  # the weights fill the columns already
        ("edge-npu", "float32", 16),  # output-stationary: the same folds
        ("hw-a", "int8", 16),  # an input SRAM and a weight SRAM
    ],
)
def test_exchange_is_not_offered_where_it_cannot_pay(config, dtype, channels):
    kernel = ops.conv2d(
        (1, channels, 16, 16),
        (channels, channels, 3, 3),
        bias=False,
        padding=1,
        dtype=dtype,
    )
    spec = load_config(config)
    (layer,) = [x for x in layers.split(kernel) if not x.opaque]
    (stmt,) = [s for s in layer.stmts if contraction(s) is not None]
    options = space.mac_groups(layer, stmt, spec.mac_array.rows)
    assert options
    for groups, *_ in options:
        assert not space.exchange_pays(layer, stmt, spec, groups)


def test_the_exchange_formula_is_the_dataflows():
    """res-blocks' call 256 x 16 x 144 on datacenter's float32: 3 folds of 1,024
    cycles streaming the pixels, against 12 of 64 streaming the channels."""
    array = load_config("datacenter").mac_array
    plain = dataflow.mac_timing(array, 256, 16, 144, 0.25)
    swapped = dataflow.mac_timing(array, 16, 256, 144, 0.25)
    assert (plain.folds, plain.stream, plain.steady) == (3, 1024, 3072)
    assert (swapped.folds, swapped.stream, swapped.steady) == (12, 64, 768)


# a hand schedule: the ports' levels ------------------------------------------------


def _exchanged_matmul():
    k = ops.matmul(64, 64, 64, dtype="int8")
    k = S.tile(k, "S0", {"i": 32, "j": 32})
    k = S.tile(k, "S1", {"i": 32, "j": 32, "k": 32})
    k = S.fuse(k, ["S0_t", "S1_t"], depth=2, name="T")
    return S.map_vector(S.tensorize(k, "S1", exchange=True), "S0")


def test_an_exchanged_operand_is_placed_for_the_port_it_sits_in():
    """Exchanged, B enters the array's input port and A its weight port: on a
    config with an SRAM per port each must sit in its port's SRAM, and the
    refusal says which."""
    spec = three_sram()
    k = S.place(_exchanged_matmul(), "T", "out", "outbuf", config=spec)
    with pytest.raises(
        PlacementError,
        match=r"place: the buffer B_wbuf_0 of B is in level wbuf, which its engine "
        r"cannot reach, because the MAC array reaches it as its input operand for "
        r"S1 only in inbuf",
    ):
        S.place(k, "S1_t", "B", "wbuf", config=spec)
    with pytest.raises(PlacementError, match=r"as its weight operand for S1 only in"):
        S.place(k, "S1_t", "A", "inbuf", config=spec)


def test_a_hand_exchanged_schedule_runs_exactly():
    spec = three_sram()
    k = S.place(_exchanged_matmul(), "T", "out", "outbuf", config=spec)
    k = S.place(k, "S1_t", "A", "wbuf", config=spec)
    k = S.place(k, "S1_t", "B", "inbuf", config=spec)
    x = _data(k.original)
    compiled = polyc.compile(k.original, config=spec, schedule=k)
    (call,) = [x for x in compiled.c_source.splitlines() if "pc_mac(_pc_ctx" in x]
    # rows j (B's), columns i (A's); B's view first, in the input port
    assert call.strip().startswith("pc_mac(_pc_ctx, 0, ((pc_hi_j - pc_lo_j)")
    assert call.index("pc_b_B_inbuf") < call.index("pc_b_A_wbuf")
    out, _ = compiled.run(**x)
    np.testing.assert_array_equal(out["out"], polyc.interpret(k.original, x)["out"])
