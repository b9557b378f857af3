"""MAC mappings: the scheduler proposes only what the code generator emits.

Dilated, causal and reversed-tap convolutions used to fail on every shipped
config with ``CodegenError: iterators rw, rc of S1 cannot fuse into MAC dimension
k``: the search fused the filter taps with the channels into K (channels-last),
which is a pitch only when a tap moves one channel row in both operands. Now
:func:`polyc.ir.macmap.check` decides for the search (on the buffers its model
predicts), the build (on the placed marks) and codegen alike, and these
convolutions run on the MAC array with the taps looping around the call, or
fused with the channels where A may read them by a second stride (a dilated tap:
``tests/schedules/accel/test_filter_window.py``).

Floats are compared with the interpreter on the untransformed kernel at rtol 1e-5
(atol 1e-5 of the output's largest magnitude: the MAC array sums in its own
order, so elements near zero differ by a few ulps of the larger terms).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

import polyc
from accelerator import load_config
from polyc import compute as pc
from polyc import ops
from polyc.ir import macmap
from polyc.ir.affine import Aff, var
from schedules.accel import scheduler as accel
from schedules.accel import search, space
from schedules.accel.layers import split
from schedules.accel.tensorize import contraction
from tests.support.macmap_conv import conv_operands, conv_tile

CONFIGS = ("tiny", "edge-npu", "datacenter")


# 32 output channels: with 8 the vector unit beats the array's few columns on
# datacenter (see dilated_conv2d)
def causal_conv1d(C=8, Co=32, T=16, R=3):
    """``y[o, t] = sum_{c, r} x[c, t - r] * w[o, c, r]`` over ``t - r >= 0``."""
    x = pc.placeholder("x", (C, T), "float32")
    w = pc.placeholder("w", (Co, C, R), "float32")
    c, r = pc.reduce_axis(C, "c"), pc.reduce_axis(R, "r")
    y = pc.compute(
        "y",
        (Co, T),
        lambda o, t: pc.sum(x[c, t - r] * w[o, c, r], (c, r), where=t - r >= 0),
    )
    return pc.kernel("causal", outputs=[y])


def reversed_tap_conv1d(C=8, Co=32, T=16, R=3):
    """A padded conv whose tap index runs backwards: ``xp[rc, t + R - 1 - r]``."""
    xp = pc.placeholder("xp", (C, T + R - 1), "float32")
    w = pc.placeholder("w", (Co, C, R), "float32")
    rc, r = pc.reduce_axis(C, "rc"), pc.reduce_axis(R, "r")
    y = pc.compute(
        "y",
        (Co, T),
        lambda o, t: pc.sum(xp[rc, t + R - 1 - r] * w[o, rc, r], (rc, r)),
    )
    return pc.kernel("revtap", outputs=[y])


@functools.cache
def dilated_conv2d():
    # 32 output channels: with 8 the vector unit, accumulating each output in its
    # own lane, beats the array's few columns on datacenter
    return ops.conv2d(
        input=(1, 4, 12, 12), weight=(32, 4, 3, 3), padding=2, dilation=2, bias=False
    )


@functools.cache
def dilated_conv1d_torch():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Conv1d(8, 32, 3, dilation=2, padding=2).eval()
    return polyc.from_torch(model, (torch.randn(1, 8, 16),))


KERNELS = {
    "dilated_conv2d": dilated_conv2d,
    "dilated_conv1d": dilated_conv1d_torch,
    "causal_conv1d": causal_conv1d,
    "reversed_tap_conv1d": reversed_tap_conv1d,
}


def _inputs(kernel, seed=0):
    rng = np.random.default_rng(seed)
    return {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(np.float32)
        for a in kernel.free_inputs
    }


def _statements_on_mac(compiled) -> list[str]:
    """Statements that ``print(compiled)`` lists as running on the MAC array."""
    text = str(compiled).split("  statements:\n", 1)[1]
    return [
        line.split(":")[0].strip() for line in text.splitlines() if "[MAC array" in line
    ]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_convolution_compiles_tensorized_and_correct(name, config):
    kernel = KERNELS[name]()
    data = _inputs(kernel)
    want = polyc.interpret(kernel, data)
    compiled = polyc.compile(kernel, config=config)
    got, _ = compiled.run(data)
    for out, ref in want.items():
        np.testing.assert_allclose(
            got[out], ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max())
        )
    contractions = [s.name for s in kernel.statements if contraction(s) is not None]
    assert contractions and _statements_on_mac(compiled) == contractions
    assert "@tensorize" in str(compiled.kernel.schedule)


def test_torch_dilated_conv2d_runs_on_the_mac_array():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Conv2d(6, 8, 3, dilation=2, padding=2).eval()
    x = torch.randn(1, 6, 10, 10)
    kernel = polyc.from_torch(model, (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    (out,) = kernel.outputs
    got, _ = compiled.run({"arg0": x.numpy()})
    want = model(x).detach().numpy()
    np.testing.assert_allclose(got[out.name], want, rtol=1e-5, atol=1e-5)
    assert len(_statements_on_mac(compiled)) == 1


# the predicate ---------------------------------------------------------------------


def test_predicate_refuses_taps_fused_with_channels_with_the_reason():
    extents, exact = conv_tile()
    fused = {"m": ("w",), "n": ("o",), "k": ("rw", "rc")}
    # a weight buffer whose taps are 8 elements apart, not the 4 channels: the
    # fused index would skip weights (only A may take a second stride)
    ops_ = conv_operands(2)
    ops_["b"] = replace(ops_["b"], strides=(72, 1, 24, 8))
    got = macmap.check("S1", fused, ops_, extents, exact)
    assert isinstance(got, macmap.Refusal)
    assert got.message("codegen") == (
        "codegen: iterators rw, rc of S1 cannot fuse into MAC dimension k because "
        "the buffer strides of rw are not one pitch times the inner iterator's in "
        "every access (or would overlap): rw moves 8 in input_l1_0 (where rc moves "
        "1) and 8 in weight_l1_0 (where rc moves 1), and the pitch must be one "
        "integer equal to the span of the iterators inside it. Tensorize with "
        "k=('rc',) and loop over the others, or place the buffers with matching "
        "row pitches."
    )
    # undilated, a tap moves one channel row in both: (rw, rc) is one K of 12
    dims = macmap.check("S1", fused, conv_operands(1), extents, exact)
    assert dims["k"].ratios == (4, 1) and dims["k"].unit == (("a", 1), ("b", 1))
    assert dims["k"].split == ()
    # dilated, a tap moves two channel rows of A and one of B: A reads K by two
    # strides (spans of 4 channels, 8 elements apart)
    dims = macmap.check("S1", fused, conv_operands(2), extents, exact)
    assert dims["k"].split_of("a") == (4, 8) and dims["k"].split_of("b") is None
    # K over the channels alone with the taps around the call
    alone = macmap.check("S1", {**fused, "k": ("rc",)}, conv_operands(2), *conv_tile())
    assert not isinstance(alone, macmap.Refusal)


def test_predicate_refuses_a_k_that_is_not_whole_in_every_tile_and_phase_crossing():
    extents, exact = conv_tile()
    fused = {"m": ("w",), "n": ("o",), "k": ("rw", "rc")}
    got = macmap.check("S1", fused, conv_operands(1), extents, {**exact, "rc": False})
    assert isinstance(got, macmap.Refusal) and "cannot fuse" in got.what
    ops_ = conv_operands(1)
    ops_["a"] = replace(ops_["a"], phases=(1, 1, 1, 2))  # w stored in 2 phases
    got = macmap.check("S1", fused, ops_, extents, exact)
    assert got.message("codegen").startswith(
        "codegen: w of S1 cannot run inside one MAC call over input_l1_0 because it "
        "moves 1 elements along dimension 3, which is stored in 2 phases"
    )
    # an inner iterator that does not move through one operand
    ops_ = conv_operands(1)
    ops_["b"] = replace(ops_["b"], index=(var("o"), var("rc"), var("rh"), Aff(0)))
    got = macmap.check("S1", {**fused, "k": ("rw",)}, ops_, extents, exact)
    assert got.what == "MAC dimension k of S1 (rw) does not move through weight_l1_0"


# the scheduler -----------------------------------------------------------------------


def _conv_layer(kernel):
    (layer,) = [x for x in split(kernel) if any(s.name == "S1" for s in x.stmts)]
    return split(kernel), layer


def test_search_proposes_only_mappings_the_placement_realises():
    kernel = dilated_conv2d()
    spec = load_config("edge-npu")
    layers, layer = _conv_layer(kernel)
    cands = search.search(kernel, layer, spec, keep=4)
    macs = [c for c in cands if c.structure.engine_of("S1") == "mac"]
    assert macs
    for cand in macs:
        # no filter window: a dilated row of taps takes A's second stride
        assert cand.structure.groups_of("S1")[2] in (("rc",), ("rw", "rc"))
        placed = accel.build(kernel, layers, [cand], spec)
        assert macmap.refusals(placed) == []


def test_build_refuses_a_candidate_codegen_could_not_emit():
    # the safety net behind the search: a candidate with the dilated filter
    # window fused into K (its rows would need a third stride of A) fails its
    # layer, so the next is taken
    kernel = dilated_conv2d()
    spec = load_config("edge-npu")
    layers, layer = _conv_layer(kernel)
    cand = search.search(kernel, layer, spec)[0]
    st = cand.structure
    s1 = kernel.statement("S1")
    con = contraction(s1)
    window, layouts = space._filter_rows(s1, con, space._channels_last(layer, s1, con))
    m, n, _ = st.groups_of("S1")
    bad = replace(
        cand, structure=replace(st, groups=(("S1", (m, n, window)),), layouts=layouts)
    )
    with pytest.raises(
        accel.LayerFailed, match=r"tensorize: iterators rh, rw, rc of S1"
    ):
        accel.build(kernel, layers, [bad], spec)
