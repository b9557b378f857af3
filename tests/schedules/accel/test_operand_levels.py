"""One on-chip SRAM per operand role (inputs, weights, outputs), the usual
accelerator shape and what the peer tools assume (issue 13).

The MAC array reads A (the input operand) from ``mac_array.input_levels``, B (the
weight operand) from ``weight_levels`` and accumulates C in ``accumulator_levels``;
the vector unit works in ``vector.levels``. Before, a layer's buffers all sat in
one level: on such a config the scheduler put A and B in the output SRAM and the
simulator stopped at the first MAC call (``pc_mac S1: the operand buffer
A_outbuf_0 is in level outbuf ..., but the MAC array cannot read it from that
level``). Now each buffer goes where its engines reach it, each level's capacity
is checked on its own, and a buffer no engine can reach is refused at compile
time.
"""

from __future__ import annotations

import numpy as np
import pytest
import tomllib

import polyc
import schedules as S
from accelerator.hardware.config import CONFIG_DIR, from_dict, load_config
from accelerator.hardware.spec import Spec
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc import compute as pc
from polyc import ops
from polyc.errors import PlacementError, SimulationError
from polyc.ops import nn
from schedules.accel import memplan
from schedules.accel.tensorize import contraction

KIB = 1024


def three_sram(
    vector=("outbuf",), wbuf=256 * KIB, shared=False, shorthand=False
) -> Spec:
    """Edge-npu's engines over HW-A's memories: DRAM at 32 B/cycle and three
    256 KiB SRAMs, one per operand role (``shared``: one SRAM of the three's
    total instead, read by every engine; ``shorthand``: the MAC array reads A and
    B from either operand SRAM, spelled ``operand_levels``)."""
    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = "three-sram"
    sram = d["memory"][1]
    d["memory"] = [dict(d["memory"][0], bytes_per_cycle=32.0)]
    a = d["mac_array"]
    if shared:
        d["memory"].append(dict(sram, capacity_bytes=512 * KIB + wbuf))
        return from_dict(d)
    for name, cap in (("inbuf", 256 * KIB), ("wbuf", wbuf), ("outbuf", 256 * KIB)):
        d["memory"].append(dict(sram, name=name, capacity_bytes=cap))
    a["accumulator_levels"] = ["outbuf"]
    if shorthand:
        a["operand_levels"] = ["inbuf", "wbuf"]
    else:
        del a["operand_levels"]
        a.update(input_levels=["inbuf"], weight_levels=["wbuf"])
    d["vector"]["levels"] = list(vector)
    return from_dict(d)


def conv_bias_relu():
    x = pc.placeholder("x", (1, 16, 12, 12), "int8")
    w = pc.placeholder("w", (32, 16, 3, 3), "int8")
    b = pc.placeholder("bias", (32,), "int32")
    return pc.kernel("cbr", [nn.relu(nn.conv2d(x, w, b, stride=1, padding=1))])


def _inputs(kernel, rng):
    return {
        a.name: rng.integers(-4, 4, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }


def _run(kernel, spec, rng):
    x = _inputs(kernel, rng)
    compiled = polyc.compile(kernel, config=spec)
    out, report = compiled.run(**x)
    want = polyc.interpret(kernel, x)
    for name, ref in want.items():
        assert np.array_equal(out[name], ref), name
    assert report.mode == "placed"
    return compiled, report


def _levels(compiled) -> dict[str, set[str]]:
    """The levels the placed buffers of each array sit in."""
    out: dict[str, set[str]] = {}
    for b in memplan.buffers(compiled.kernel.schedule):
        out.setdefault(b.array, set()).add(b.level)
    return out


# the config ------------------------------------------------------------------------


def test_operand_levels_is_shorthand_for_input_and_weight_levels():
    tiny = load_config("tiny").mac_array
    assert tiny.input_levels == tiny.weight_levels == ("l1",)
    assert tiny.operand_levels == ("l1",)
    a = three_sram().mac_array
    assert (a.input_levels, a.weight_levels, a.accumulator_levels) == (
        ("inbuf",),
        ("wbuf",),
        ("outbuf",),
    )
    assert a.operand_levels == ("inbuf", "wbuf")


def test_sibling_srams_may_grow_after_a_smaller_one():
    """On-chip levels listed one after another are siblings here, not a
    hierarchy: a 256 KiB output SRAM after a 16 KiB weight SRAM is valid (the old
    rule refused any level larger than the one listed before it)."""
    spec = three_sram(wbuf=16 * KIB)
    assert [m.capacity_bytes for m in spec.sram_levels] == [
        256 * KIB,
        16 * KIB,
        256 * KIB,
    ]


# each operand where its engine reads it --------------------------------------------


CASES = {
    "gemm": lambda: ops.matmul(128, 96, 128, dtype="int8"),
    "conv": lambda: ops.conv2d(
        (1, 16, 20, 20), (32, 16, 3, 3), bias=False, padding=1, dtype="int8"
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_operand_sits_in_its_roles_sram_and_the_result_is_exact(name, rng):
    """Failed on the old code: A and B were placed in outbuf, and the run stopped
    with 'the operand buffer A_outbuf_0 is in level outbuf'."""
    kernel = CASES[name]()
    compiled, report = _run(kernel, three_sram(), rng)
    con = kernel.statements[-1]
    roles = contraction(con)
    a, b = con.reads[roles.a].array, con.reads[roles.b].array
    assert _levels(compiled) == {
        a: {"inbuf"},
        b: {"wbuf"},
        con.target.array: {"outbuf"},
    }, str(compiled)
    assert report.mac_array_macs > 0
    for level in ("inbuf", "wbuf", "outbuf"):
        assert report.level(level).bytes_read + report.level(level).bytes_written > 0


def test_the_issues_config_compiles_and_runs(rng):
    """The issue's failure, in the spelling the old code took (``operand_levels``
    over the two operand SRAMs): the scheduler put A, B and the output in
    outbuf, and the run stopped with ``pc_mac S1: the operand buffer A_outbuf_0
    is in level outbuf because it was placed there, but the MAC array cannot
    read it from that level``."""
    compiled, _ = _run(
        ops.matmul(64, 64, 64, dtype="int8"), three_sram(shorthand=True), rng
    )
    at = _levels(compiled)
    assert at["out"] == {"outbuf"} and at["A"] | at["B"] <= {"inbuf", "wbuf"}


def test_a_conv_bias_relu_keeps_its_epilogue_beside_the_accumulator(rng):
    """The vector unit reaches the output SRAM: the bias init, the MAC calls and
    the ReLU stay in one layer and the accumulator never leaves the chip."""
    kernel = conv_bias_relu()
    compiled, _ = _run(kernel, three_sram(), rng)
    at = _levels(compiled)
    assert at["x"] == {"inbuf"} and at["w"] == {"wbuf"}, str(compiled)
    conv = kernel.statements[1].target.array
    assert at[conv] == {"outbuf"} and at["bias"] == {"outbuf"}
    assert len(compiled.choice.layers) == 1
    assert not compiled.fallbacks()


def test_an_accumulator_no_vector_level_reaches_goes_through_dram(rng):
    """With the vector unit on the input SRAM only, no level serves both the MAC
    array's accumulator and the bias/ReLU on the vector unit: the fused layer ran
    everything on the vector unit (102,616 predicted cycles); it is split so that
    the conv runs on the array, its output through DRAM (about 11,000)."""
    kernel = conv_bias_relu()
    compiled, _ = _run(kernel, three_sram(vector=("inbuf",)), rng)
    conv = kernel.statements[1].target.array
    assert _levels(compiled)[conv] == {"inbuf", "outbuf"}, str(compiled)
    engines = {
        s: e for lc in compiled.choice.layers for s, e in lc.candidate.structure.engine
    }
    assert engines[kernel.statements[1].name] == "mac"
    notes = compiled.fallbacks()
    assert any("has no level all its engines reach" in n for n in notes), notes
    assert compiled.choice.predicted_cycles < 20_000


# each level's capacity on its own ---------------------------------------------------


def test_a_weight_tile_too_large_for_its_sram_is_retiled(rng):
    """In one shared SRAM of the three's total the scheduler takes a weight tile
    larger than a 4 KiB weight SRAM; with the weight SRAM it takes one that fits
    there (the capacity check used to count every buffer against one level)."""
    kernel = ops.matmul(128, 128, 128, dtype="int8")
    small = 4 * KIB

    def weight_bytes(compiled):
        (b,) = [b for b in memplan.buffers(compiled.kernel.schedule) if b.array == "B"]
        return b.slots * b.slot_bytes

    shared, _ = _run(kernel, three_sram(wbuf=small, shared=True), rng)
    assert weight_bytes(shared) > small, str(shared)
    split, _ = _run(kernel, three_sram(wbuf=small), rng)
    assert weight_bytes(split) <= small, str(split)
    assert _levels(split)["B"] == {"wbuf"}


def test_a_hand_placed_weight_tile_too_large_for_its_sram_is_refused():
    k = S.tile(ops.matmul(64, 64, 64, dtype="int8"), "S1", {"i": 32, "j": 64, "k": 64})
    with pytest.raises(PlacementError, match=r"do not fit in level wbuf because"):
        S.place(k, "S1_t", "B", "wbuf", config=three_sram(wbuf=4 * KIB), slots=2)


# the mismatch is refused at compile time --------------------------------------------


def _tiled():
    k = ops.matmul(64, 64, 64, dtype="int8")
    k = S.tile(k, "S0", {"i": 32, "j": 32})
    k = S.tile(k, "S1", {"i": 32, "j": 32, "k": 32})
    return S.fuse(k, ["S0_t", "S1_t"], depth=2, name="T")


def _tensorized():
    return S.map_vector(S.tensorize(_tiled(), "S1"), "S0")


def test_placing_an_operand_where_the_mac_array_cannot_read_it_is_refused():
    """Was: accepted, compiled, and stopped at the first MAC call of the run."""
    spec = three_sram()
    k = S.place(_tensorized(), "S1_t", "B", "wbuf", config=spec)
    with pytest.raises(
        PlacementError,
        match=r"place: the buffer A_outbuf_0 of A is in level outbuf, which its "
        r"engine cannot reach, because the MAC array reaches it as its input "
        r"operand for S1 only in inbuf \(mac_array.input_levels\)\. Place A for S1 "
        r"in inbuf\.",
    ):
        S.place(k, "S1_t", "A", "outbuf", config=spec)


def test_a_refusal_in_the_second_loop_nest_of_a_program():
    """``place`` walks only the children of the root sequence that run the
    placed band's statements (the new buffers are active nowhere else): the
    init's loop nest is another child, and the refusal is the same."""
    k = ops.matmul(64, 64, 64, dtype="int8")
    k = S.tile(k, "S0", {"i": 32, "j": 32})
    k = S.tile(k, "S1", {"i": 32, "j": 32, "k": 32})
    k = S.map_vector(S.tensorize(k, "S1"), "S0")
    assert k.schedule.get_root().child(0).n_children() == 2  # S0's, then S1's
    spec = three_sram()
    k = S.place(k, "S1_t", "B", "wbuf", config=spec)
    with pytest.raises(
        PlacementError,
        match=r"place: the buffer A_outbuf_0 of A is in level outbuf, which its "
        r"engine cannot reach, because the MAC array reaches it as its input "
        r"operand for S1 only in inbuf",
    ):
        S.place(k, "S1_t", "A", "outbuf", config=spec)
    assert S.place(k, "S1_t", "A", "inbuf", config=spec).schedule is not None


def test_a_hand_schedule_placed_before_tensorize_is_refused_at_compile():
    """``place`` before ``tensorize`` cannot know the roles yet: ``polyc.compile``
    refuses the schedule before any C is built or run."""
    spec = three_sram()
    k = S.place(_tiled(), "T", "out", "inbuf", config=spec)
    k = S.place(k, "S1_t", "A", "inbuf", config=spec)
    k = S.place(k, "S1_t", "B", "wbuf", config=spec)
    k = S.map_vector(S.tensorize(k, "S1"), "S0")
    with pytest.raises(
        PlacementError,
        match=r"compile: the buffer out_inbuf_0 of out is in level inbuf, which its "
        r"engine cannot reach, because .* only in outbuf",
    ):
        polyc.compile(k.original, config=spec, schedule=k)


def test_a_hand_schedule_in_the_roles_levels_runs(rng):
    spec = three_sram()
    k = _tensorized()
    k = S.place(k, "T", "out", "outbuf", config=spec)
    k = S.place(k, "S1_t", "A", "inbuf", config=spec)
    k = S.place(k, "S1_t", "B", "wbuf", config=spec)
    x = _inputs(k, rng)
    out, _ = polyc.compile(k.original, config=spec, schedule=k).run(**x)
    assert np.array_equal(out["out"], polyc.interpret(k.original, x)["out"])


# the runtime checks each role against its own levels --------------------------------


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


@pytest.mark.parametrize(
    "a,b,c,refused",
    [
        ("wbuf", "wbuf", "outbuf", "input buffer a is in level wbuf"),
        ("inbuf", "inbuf", "outbuf", "weight buffer b is in level inbuf"),
        ("inbuf", "wbuf", "wbuf", "accumulator buffer c is in level wbuf"),
        ("inbuf", "wbuf", "outbuf", None),
    ],
)
def test_pc_mac_checks_a_b_and_c_against_their_roles_levels(rt, a, b, c, refused):
    sim = Simulator(rt, three_sram())
    bufs = [
        sim.alloc(level, offset, 256, name)
        for level, offset, name in ((a, 0, "a"), (b, 256, "b"), (c, 512, "c"))
    ]
    views = [(buf, 0, 4, 1) for buf in bufs]
    if refused is None:
        sim.mac(4, 4, 4, *views, dtype="int8", acc_dtype="int32", accumulate=False)
        return
    with pytest.raises(SimulationError, match=refused):
        sim.mac(4, 4, 4, *views, dtype="int8", acc_dtype="int32", accumulate=False)


# not only toy kernels ---------------------------------------------------------------


@pytest.mark.slow
def test_two_resnet_blocks_run_on_three_srams():
    """Every conv on the MAC array with its operands in their SRAMs, the
    residual adds and ReLUs on the vector unit beside the accumulators."""
    import torch

    from tests.schedules.accel.test_fallbacks import _two_blocks

    model, x = _two_blocks(8, 8)
    kernel = polyc.from_torch(model, (x,))
    compiled = polyc.compile(kernel, config=three_sram())
    (arg,) = [a.name for a in kernel.free_inputs]
    (got,) = compiled.run(**{arg: x.numpy()})[0].values()
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)
    assert compiled.last_report.mode == "placed"
    convs = [s.name for s in kernel.statements if s.reduction is not None]
    engines = {
        s: e
        for lc in compiled.choice.layers
        if lc.candidate
        for s, e in lc.candidate.structure.engine
    }
    assert convs and all(engines.get(s) == "mac" for s in convs), str(compiled)
