"""A depthwise convolution's filter window as the MAC array's K: ``k=(rh, rw)``.

A depthwise convolution's input channel is its output's (``input[n, o + rc, ...]``),
so its taps cannot fuse with the channels the way a dense convolution's do
(:func:`schedules.accel.space._channels_last`), and the MAC array ran it with one
row of taps on its rows (3 of edge-npu's 16 for a 3x3 filter, 7 of datacenter's 64
for ConvNeXt's 7x7) and the filter rows around the calls. The search now also
offers the whole window as K (:func:`schedules.accel.space._taps`): A reads it
with two strides, the input row's pitch and the tap's, B steps the filter row by
the tap's span. Numbers are compared with ``polyc.interpret`` on the
untransformed kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from accelerator.hardware.config import load_config
from schedules.accel import space
from schedules.accel.layers import per_statement, split
from schedules.accel.split import split_layer
from tests.support.depthwise import depthwise, normal_inputs


def _layer(kernel, name: str):
    (layer,) = [la for la in split(kernel) if any(s.name == name for s in la.stmts)]
    return layer


def test_the_search_offers_the_window_where_a_row_of_taps_leaves_rows_idle():
    kernel = depthwise(8, 8)
    layer = _layer(kernel, "S1")
    s = kernel.statement("S1")
    ks = {groups[2] for groups, *_ in space.mac_groups(layer, s, 16)}
    assert ("rh", "rw") in ks
    # an array no taller than a row of taps gains nothing from it
    assert ("rh", "rw") not in {g[2] for g, *_ in space.mac_groups(layer, s, 3)}


def test_the_mac_part_of_a_split_depthwise_runs_the_window_and_is_right(rng):
    kernel = depthwise(8, 8)
    k = split_layer(kernel, ("S0", "S1"), "o", 4)
    compiled = polyc.compile(k, config="edge-npu")
    (line,) = [x for x in str(compiled).splitlines() if "S1_1: out" in x]
    assert "k=rh*rw" in line, line
    inputs = normal_inputs(kernel, rng)
    out, report = compiled.run(inputs)
    np.testing.assert_allclose(
        out["out"], polyc.interpret(kernel, inputs)["out"], rtol=1e-5, atol=1e-5
    )
    assert {e.name: e.busy for e in report.engines}["mac_array"] > 0


def test_a_split_layer_keeps_its_structures_under_the_cap_on_combinations(
    monkeypatch,
):
    """The vector part's bias init was offered a fold into its contraction,
    which runs on the vector unit: under the cap on engine combinations only
    each statement's first option is kept, the fold, and every combination was
    refused, so the split layer fitted nothing (the inverted residual's
    depthwise layer on edge-npu stayed whole: 115,040 cycles, 100,884 split)."""
    torch = pytest.importorskip("torch")
    from schedules.accel import bias, inline

    conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
    module = torch.nn.Sequential(conv, torch.nn.ReLU6()).eval()
    kernel = polyc.from_torch(module, (torch.randn(1, 16, 8, 8),))
    k, _ = per_statement(inline.inline_all(bias.defer_all(kernel)))
    stmts = tuple(s.name for s in k.statements)
    its = tuple(s.iterators[1] for s in k.statements)
    both = split_layer(k, stmts, its, 3, 4)
    (layer,) = [la for la in split(both) if len(la.stmts) == 2 * len(stmts)]
    monkeypatch.setattr(space, "MAX_ENGINE_COMBOS", 1)
    spec = load_config("edge-npu")
    structures = list(space.structures(both, layer, spec, False, False))
    assert structures
    assert all(dict(st.engine)[n] != "fold" for st in structures for n in stmts[:1]), (
        "the vector part's init folds into nothing"
    )


def test_under_the_cap_a_contraction_off_the_mac_array_keeps_its_init(monkeypatch):
    """Under the cap on engine combinations, the first contraction keeps all
    its engines and the other statements their first option; its zero init's
    first option is the fold into its MAC calls, so the contraction on the
    vector unit had no init and no structure put it there (a depthwise
    convolution fused with the 1x1 convolution after it, 179,652 cycles
    predicted with the depthwise on the MAC array, 96,840 with it on the
    vector unit). The init keeps its vector engine for that case; with the
    contraction on the MAC array it still folds."""
    torch = pytest.importorskip("torch")
    from schedules.accel import bias, inline

    conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
    module = torch.nn.Sequential(conv, torch.nn.ReLU6()).eval()
    kernel = polyc.from_torch(module, (torch.randn(1, 16, 8, 8),))
    k, _ = per_statement(inline.inline_all(bias.defer_all(kernel)))
    (layer,) = split(k)
    init, dw = layer.stmts[0].name, layer.stmts[1].name
    monkeypatch.setattr(space, "MAX_ENGINE_COMBOS", 1)
    spec = load_config("edge-npu")
    engines = [dict(st.engine) for st in space.structures(k, layer, spec, False, False)]
    assert any(e[dw] == "vector" and e[init] == "vector" for e in engines), engines
    assert all(e[init] == "fold" for e in engines if e[dw] == "mac")


def test_the_vector_unit_is_charged_the_points_of_a_padded_window(monkeypatch):
    """A 7x7 depthwise convolution with padding 3 on a 4x4 image: of each
    channel's 784 taps in its box, 256 fall inside the image. The vector unit
    runs those (the padding inlined into the domain), and the cost model
    charged the box: ConvNeXt's third-stage layer on edge-npu ran 4,967
    cycles, predicted 15,191. The vector unit's predicted busy cycles now
    match the simulator's."""
    torch = pytest.importorskip("torch")
    from schedules.accel import share

    monkeypatch.setattr(share, "MARGIN", 1.0)  # the vector unit alone
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 7, padding=3, groups=64).eval()
    x = torch.randn(1, 64, 4, 4)
    kernel = polyc.from_torch(conv, (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    (layer,) = compiled.choice.layers
    predicted = dict(layer.candidate.engines)
    assert predicted["mac"] == 0
    out, report = compiled.run(arg0=x.numpy())
    want = polyc.interpret(kernel, {"arg0": x.numpy()})
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    busy = {e.name: e.busy for e in report.engines}["vector"]
    assert abs(predicted["vector"] / busy - 1) <= 0.05, (predicted["vector"], busy)
