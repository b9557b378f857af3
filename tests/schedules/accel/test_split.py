"""One layer split across the MAC array and the vector unit (issue 14).

``split_layer`` cuts a depthwise convolution's init and contraction at a channel
into two parts (an index-set split, checked against the exact dependences); the
scheduler's search then runs the first part on the vector unit and the second on
the MAC array, fused in the same tile loops. A vector operation declares the
bytes of its elements (not its whole buffer slot), so the MAC calls on the other
channels of the same output slot run beside it. Simulated cycles are
deterministic: no timing is asserted.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
import schedules as S
from polyc.errors import ArgumentError, IllegalTransformError
from polyc.lang.program import Program
from schedules.accel.split import split_layer, split_side
from tests.support.depthwise import depthwise, normal_inputs


def _depthwise(channels: int = 8, size: int = 8):
    return depthwise(channels, size)


_inputs = normal_inputs


def test_split_partitions_the_domains_and_replays(rng):
    kernel = _depthwise()
    k = split_layer(kernel, ("S0", "S1"), "o", 3)
    # the MAC array's part (the second) first: the vector unit's runs beside it
    assert [s.name for s in k.statements] == ["S0_1", "S1_1", "S0", "S1"]
    # the channel runs inside the iterators the statements share (their tiles)
    assert k.statement("S1").iterators == ("n", "h", "w", "o", "rc", "rh", "rw")
    for name in ("S0", "S1"):
        a, b = k.statement(name), k.statement(f"{name}_1")
        assert a.domain.intersect(b.domain.set_tuple_name(name)).is_empty()
        whole = kernel.statement(name)
        assert a.domain.count_val().to_python() + b.domain.count_val().to_python() == (
            whole.domain.count_val().to_python()
        )
    assert (split_side(k, "S1"), split_side(k, "S1_1"), split_side(k, "x")) == (
        0,
        1,
        None,
    )
    again = S.replay(kernel, k.history)
    assert str(again.schedule) == str(k.schedule)
    inputs = _inputs(kernel, rng)
    np.testing.assert_array_equal(
        polyc.interpret(k, inputs)["out"], polyc.interpret(kernel, inputs)["out"]
    )


def _stencil():
    """``t[i] = x[i]; y[i] = t[i + 1]``: the second statement reads the element
    the first writes one step later."""
    p = Program("stencil")
    x = p.array("x", (8,), "float32", role="input")
    t = p.array("t", (8,), "float32", role="temp")
    y = p.array("y", (7,), "float32", role="output")
    with p.loop("i", 0, 8) as i:
        t[i] = x[i]
    with p.loop("i", 0, 7) as i:
        y[i] = t[i + 1]
    return p.kernel()


def test_split_refuses_an_order_that_breaks_a_dependence():
    kernel = _stencil()
    with pytest.raises(IllegalTransformError) as err:
        split_layer(kernel, ("S0", "S1"), "i", 4)
    msg = str(err.value)
    assert msg.startswith("split_layer: S0, S1 cannot be cut at i = 4 because the flow")
    assert "S0[i=4] -> S1[i=3] on t would run backwards" in msg


def test_split_refuses_bad_arguments():
    kernel = _depthwise()
    with pytest.raises(ArgumentError, match="are not consecutive statements"):
        split_layer(kernel, ("S1", "S0"), "o", 3)
    with pytest.raises(ArgumentError, match="S0 has no iterator rh"):
        split_layer(kernel, ("S0", "S1"), "rh", 1)
    with pytest.raises(ArgumentError, match="is empty because o does not reach"):
        split_layer(kernel, ("S0", "S1"), "o", 8)
    tiled = S.tile(kernel, "S1", {"h": 4})
    with pytest.raises(ArgumentError, match="is not its program order"):
        split_layer(tiled, ("S0", "S1"), "o", 3)


def _overlap(report) -> int:
    """Cycles during which the MAC array and the vector unit are both busy."""
    macs = [(e.start, e.end) for e in report.events if e.engine == "mac_array"]
    vecs = [(e.start, e.end) for e in report.events if e.engine == "vector"]
    return sum(max(0, min(b, d) - max(a, c)) for a, b in macs for c, d in vecs if c < b)


@pytest.mark.parametrize("config", ["tiny", "edge-npu", "datacenter"])
def test_split_runs_on_both_engines_at_once(config, rng):
    kernel = _depthwise(8, 8)
    k = split_layer(kernel, ("S0", "S1"), "o", 4)
    compiled = polyc.compile(k, config=config)
    inputs = _inputs(kernel, rng)
    out, report = compiled.run(inputs)
    np.testing.assert_allclose(
        out["out"], polyc.interpret(kernel, inputs)["out"], rtol=1e-5, atol=1e-5
    )
    text = str(compiled)
    assert "S1: " in text and "S1_1: " in text
    assert "[vector unit" in text.split("S1: out")[1].splitlines()[0]
    assert "[MAC array" in text.split("S1_1: out")[1].splitlines()[0]
    busy = {e.name: e.busy for e in report.engines}
    assert busy["mac_array"] > 0 and busy["vector"] > 0
    # fused in one layer, the two parts' work overlaps in time
    assert _overlap(report) > 0


def test_the_scheduler_splits_a_depthwise_conv_where_it_pays(rng, monkeypatch):
    """edge-npu: the vector unit takes 0.125 cycles per tap, the MAC array's
    one-column mapping about 0.34 (its bound 0.25), so a quarter of the channels
    on the array and the rest on the vector unit beats either alone. The
    scheduler chooses that from the cost model, and the simulation agrees."""
    kernel = _depthwise(96, 16)
    inputs = _inputs(kernel, rng)
    compiled = polyc.compile(kernel, config="edge-npu")
    text = str(compiled)
    assert "S1_1: out" in text, text
    (line,) = [x for x in text.splitlines() if "S0_1+S1_1+S0+S1:" in x]
    assert "og=1" in line
    out, report = compiled.run(inputs)
    np.testing.assert_allclose(
        out["out"], polyc.interpret(kernel, inputs)["out"], rtol=1e-5, atol=1e-5
    )
    assert _overlap(report) > 0
    # the split replays on the program (its history starts with the split)
    assert compiled.kernel.history[0].name == "split_layer"
    # the cost model predicts the split layer within 10% (0.95x measured)
    predicted = compiled.choice.predicted_cycles
    assert 0.9 <= predicted / report.cycles <= 1.1, (predicted, report.cycles)
    # and the split beats the same layer on the vector unit alone
    from accelerator.hardware.config import load_config
    from schedules.accel import scheduler, share

    monkeypatch.setattr(share, "MARGIN", 1.0)  # no split is predicted that good
    unsplit = scheduler.schedule(kernel, load_config("edge-npu")).kernel
    assert all(st.name != "split_layer" for st in unsplit.history)
    alone = polyc.compile(kernel, config="edge-npu", schedule=unsplit)
    assert report.cycles < alone.run(inputs)[1].cycles


def test_no_split_where_the_mac_array_is_far_slower(rng, monkeypatch):
    """datacenter, the calls' operands in their own ports: the one-column
    mapping is 13x below the bound's MAC rate, so the vector unit alone is
    predicted fastest and the layer stays whole."""
    from schedules.accel import space

    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setattr(space, "exchange_pays", lambda *args: False)
    kernel = _depthwise(96, 16)
    compiled = polyc.compile(kernel, config="datacenter")
    assert "S1_1" not in str(compiled)
    assert all(st.name != "split_layer" for st in compiled.kernel.history)


def test_split_where_the_exchanged_calls_pay(rng, monkeypatch):
    """datacenter again, the calls' operands exchanged (C^T = B^T A^T): the
    array holds 64 pixels of a channel and streams its one weight per tap, 4
    folds of 64 cycles for 256 pixels where the plain call streamed them through
    one column in 1,024. The MAC array's part now pays: the layer splits, and
    runs in fewer simulated cycles than the vector unit alone, with the
    interpreter's numbers."""
    from schedules.accel import space

    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    kernel = _depthwise(96, 16)
    inputs = _inputs(kernel, rng)
    want = polyc.interpret(kernel, inputs)
    compiled = polyc.compile(kernel, config="datacenter")
    assert "S1_1" in str(compiled) and "operands exchanged" in str(compiled)
    got, report = compiled.run(inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(space, "exchange_pays", lambda *args: False)
    whole = polyc.compile(kernel, config="datacenter")
    assert report.cycles < whole.run(inputs)[1].cycles


def _run_checked(split, kernel, rng):
    """``(compiled, report)``: ``split`` compiled for edge-npu and run on
    random inputs, its outputs the interpreter's on ``kernel``."""
    compiled = polyc.compile(split, config="edge-npu")
    inputs = _inputs(kernel, rng)
    out, report = compiled.run(inputs)
    want = polyc.interpret(kernel, inputs)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5)
    return compiled, report


def _torch_depthwise(channels: int, size: int, stride: int = 1):
    """A torch depthwise 3x3 convolution with its bias and ReLU6 on one image
    of ``channels`` x ``size`` x ``size``: ``(kernel, k, splittable)``, the
    program, it as the scheduler prepares it (the bias deferred, a statement
    per loop nest), and the depthwise layer's statements, channel iterators
    and extent (``share._splittable`` on edge-npu)."""
    torch = pytest.importorskip("torch")
    from accelerator.hardware.config import load_config
    from schedules.accel import bias, inline, share
    from schedules.accel.layers import per_statement

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(channels, channels, 3, stride, padding=1, groups=channels)
    module = torch.nn.Sequential(conv, torch.nn.ReLU6()).eval()
    kernel = polyc.from_torch(module, (torch.randn(1, channels, size, size),))
    k, _ = per_statement(inline.inline_all(bias.defer_all(kernel)))
    spec = load_config("edge-npu")
    (layer,) = [la for la in share._pieces(k) if share._splittable(k, la, spec)]
    return kernel, k, share._splittable(k, layer, spec)


def test_split_with_an_iterator_per_statement(rng):
    """The torch frontend names each loop nest's iterators its own way (the
    epilogue runs over i, j, l, m): each statement is cut along its own channel
    iterator; the inverted residual's depthwise layer with its bias and ReLU6,
    split and scheduled on edge-npu, equals the interpreter."""
    kernel, k, (stmts, its, extent) = _torch_depthwise(16, 8)
    assert len(stmts) == 3 and its[0] != its[2] and extent == 16
    split = split_layer(k, stmts, its, 3, 4)
    again = S.replay(kernel, split.history)
    assert [(s.name, s.iterators, str(s)) for s in again.statements] == [
        (s.name, s.iterators, str(s)) for s in split.statements
    ]
    assert all(
        a.domain.is_equal(b.domain) for a, b in zip(again.statements, split.statements)
    )
    _, report = _run_checked(split, kernel, rng)
    assert _overlap(report) > 0


def test_the_model_moves_both_parts_channels_of_a_split_layer(rng):
    """hf-mobilenetv2's stride-2 depthwise convolution (48 channels, 16x16 in)
    split 5 and 3 of every 8 channels: the vector unit's part runs over
    channels 0-4 of a tile, the MAC array's over 5-7, and placement moves the
    hull of both, every channel. The model took the larger part's box (5 of
    the 8 channels) and predicted 39,600 DRAM bytes for the 63,360 the layer
    moves: 3,504 cycles for 5,080 simulated, which made the split look 1,696
    cycles faster than the layer on the vector unit alone (fifteenth
    session). Each access now starts where its statement's range does."""
    kernel, k, (stmts, its, extent) = _torch_depthwise(48, 16, stride=2)
    assert extent == 48
    split = split_layer(k, stmts, its, 5, 8)
    compiled, report = _run_checked(split, kernel, rng)
    moved = sum(lc.candidate.dram_bytes for lc in compiled.choice.layers)
    assert moved == report.dram_bytes == 4 * (48 * 16 * 16 + 48 * 8 * 8 + 48 * 10)
    predicted = compiled.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= 0.1, (predicted, report.cycles)


def test_a_depthwise_conv_splits_apart_from_the_layer_norm_after_it(rng):
    """ConvNeXt's 7x7 depthwise convolution is followed by a layer norm over its
    channels, which does not run along them: the layer was not split at all
    (its vector unit ran 13,948 of the stage's 15,076 cycles on datacenter).
    Now the convolution and its epilogue split, and the layer norm becomes a
    layer of its own, when the cost model predicts the two faster."""
    torch = pytest.importorskip("torch")
    from accelerator.hardware.config import load_config
    from schedules.accel import bias, inline, share
    from schedules.accel.layers import per_statement

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = torch.nn.Conv2d(32, 32, 7, padding=3, groups=32)
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, x):
            return self.norm(self.dw(x).permute(0, 2, 3, 1))

    torch.manual_seed(0)
    x = torch.randn(1, 32, 16, 16)
    kernel = polyc.from_torch(Block().eval(), (x,))
    spec = load_config("datacenter")
    k, _ = per_statement(inline.inline_all(bias.defer_all(kernel, spec)))
    (layer,) = [la for la in share._pieces(k) if share._splittable(k, la, spec)]
    stmts, _, extent = share._splittable(k, layer, spec)
    assert extent == 32 and 0 < len(stmts) < len(layer.stmts)
    compiled = polyc.compile(kernel, config=spec)
    assert any(st.name == "split_layer" for st in compiled.kernel.history)
    out, report = compiled.run(arg0=x.numpy())
    want = polyc.interpret(kernel, {"arg0": x.numpy()})
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    assert _overlap(report) > 0


def test_a_split_layers_epilogue_waits_behind_the_vector_units_part(rng):
    """A depthwise convolution with its ReLU6 (96 channels of 8x8, as a
    mobilenet's), split: the vector unit runs its commands in order, so the
    MAC array's part (its init and contraction) comes first in each tile, then
    the vector unit's part, then the MAC part's epilogue. With the epilogue
    before the vector part, the vector unit waited for the array in every tile
    and the layer took 1.9x its prediction (11,442 cycles simulated, 5,956
    predicted); now 5,952 against 5,655 (the halo zeroing of each slot's first
    fill is not in the model)."""
    torch = pytest.importorskip("torch")

    conv = torch.nn.Conv2d(96, 96, 3, padding=1, groups=96)
    module = torch.nn.Sequential(conv, torch.nn.ReLU6()).eval()
    x = torch.randn(1, 96, 8, 8)
    kernel = polyc.from_torch(module, (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    k = compiled.kernel
    assert any(st.name == "split_layer" for st in k.history)
    from schedules.accel.split import split_engine

    parts = [s.name for s in k.statements if split_engine(k, s.name)]
    engines = [split_engine(k, n) for n in parts]
    # MAC init and contraction, the vector part, the MAC part's epilogue
    assert engines == ["mac", "mac", "vector", "vector", "vector", "mac"], parts
    out, report = compiled.run(arg0=x.numpy())
    np.testing.assert_allclose(
        next(iter(out.values())), module(x).detach().numpy(), rtol=1e-4, atol=1e-4
    )
    predicted = compiled.choice.predicted_cycles
    assert 0.85 <= predicted / report.cycles <= 1.15, (predicted, report.cycles)
    # each tile's box is the whole padded image: the input's halo is zeroed in
    # each of its 3 slots once (4 slabs), not in every one of the 32 tiles (128)
    zeroed = [e for e in report.events if e.label.startswith("zero ")]
    assert len(zeroed) == 4 * 3, len(zeroed)


def test_a_split_already_checked_is_split_layers_kernel_without_the_check(
    monkeypatch,
):
    """:func:`split_checked` (a split whose search checked it on the
    statements alone, :mod:`schedules.accel.share`) makes the kernel
    :func:`split_layer` makes, the same statements, schedule and history,
    and asks no legality check (fourteenth round: about 35 ms per depthwise
    layer of hf-mobilenetv2's network, checked again when applied)."""
    from schedules.accel import split

    kernel = _depthwise()
    want = split_layer(kernel, ("S0", "S1"), "o", 2, 4)
    monkeypatch.setattr(split, "_check", lambda *a: pytest.fail("checked again"))
    got = split.split_checked(kernel, ("S0", "S1"), "o", 2, 4)
    assert str(got.schedule) == str(want.schedule)
    assert got.history == want.history
    assert [(s.name, str(s.domain), s.iterators) for s in got.statements] == [
        (s.name, str(s.domain), s.iterators) for s in want.statements
    ]
    with pytest.raises(ArgumentError, match="are not consecutive statements"):
        split.split_checked(kernel, ("S1", "S0"), "o", 3)


def test_a_plan_checks_each_split_once_where_it_is_searched(monkeypatch):
    """The depthwise splits :func:`schedules.accel.share.plan` applies were
    checked when their points were searched (on the layer as a program of its
    own): applying the chosen one checks nothing again, and the plan is the
    one that checks it."""
    from accelerator.hardware.config import load_config
    from schedules.accel import share, split

    monkeypatch.setenv("POLYC_JOBS", "1")
    kernel = _depthwise(96, 16)
    spec = load_config("edge-npu")
    checked = []
    real = split._check
    monkeypatch.setattr(
        split, "_check", lambda op, prog, *a: checked.append(prog) or real(op, prog, *a)
    )
    plan = share.plan(kernel, spec)
    assert plan.layers and checked
    assert all(prog.name != kernel.name for prog in checked)  # the layer's own
    monkeypatch.setattr(share, "split_checked", split_layer)
    again = share.plan(_depthwise(96, 16), spec)
    assert any(prog.name == kernel.name for prog in checked)  # the old way
    assert str(again.kernel.schedule) == str(plan.kernel.schedule)
    assert (again.layers, again.notes) == (plan.layers, plan.notes)
