"""Consecutive layers overlap at their boundary: the memory planner keeps a
layer's buffers off the previous layer's bytes where both fit
(``memplan.plan_overlapped``), so the next layer's first loads need not wait for
the previous layer's last reads, and the cost model credits that overlap
(``schedules/accel/boundary.py``).

Cost model tolerance: the whole program's predicted cycles within 25% of the
simulated ones, as for single layers (tests/schedules/accel/test_scheduler.py).
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

import polyc
from accelerator.hardware.config import load_config
from polyc.errors import PlacementError
from schedules.accel import boundary
from schedules.accel.memplan import Request, plan, plan_overlapped

TOLERANCE = 0.25


def _mlp():
    """Linear 64 -> 128, ReLU, linear 128 -> 128, GELU, linear 128 -> 10 on 4
    rows (the model suite's ``mlp``): on datacenter the scheduler fuses the first
    two linear layers and runs the third as a layer of its own."""
    from polyc.frontends.torch.models import MLP

    torch.manual_seed(0)
    model = MLP(64, 128, 10).eval()
    x = torch.randn(4, 64)
    return polyc.from_torch(model, (x,)), {"arg0": x.numpy()}


@pytest.fixture(scope="module")
def mlp_run():
    """The MLP compiled with its layers as written: fusing the second and third
    along their hidden dimension (schedules.accel.mlp) moves the third's bias
    init into a layer of its own between the two, and a layer's loads overlap
    only the layer before it."""
    from schedules.accel import homes, mlp

    kernel, feeds = _mlp()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYC_COMPILE_CACHE", "0")
        mp.setattr(mlp, "cores", lambda _kernel: [])
        mp.setattr(homes, "assign", lambda kernel, _spec: kernel)  # DRAM
        compiled = polyc.compile(kernel, config="datacenter", trace_limit=100_000)
    out, report = compiled.run(**feeds)
    return kernel, feeds, compiled, out, report


def test_the_next_layers_weights_load_while_the_previous_layer_computes(mlp_run):
    """The third linear layer's weights and bias are loaded while the first
    layer's MAC calls still run. Before, its buffers took the bytes of the
    previous layer's weights and inputs, and their loads waited for the last MAC
    call that read those bytes (the bias at 1,084, the weights at 1,952; the last
    MAC call of the fused layer ends at 1,826)."""
    _, _, compiled, _, report = mlp_run
    layers = [lc.layer for lc in compiled.choice.layers]
    assert len(layers) == 2
    first = {s.name for s in layers[0].stmts}
    last_mac = max(e.end for e in report.events if e.kind == "mac" and e.label in first)
    loads = [
        e
        for e in report.events
        if e.kind == "dma" and e.label in ("p_fc3_weight in", "p_fc3_bias in")
    ]
    assert loads
    assert min(e.start for e in loads) < last_mac
    assert max(e.start for e in loads) < last_mac


def test_weights_load_under_the_layer_two_before_when_a_bias_layer_sits_between():
    """The MLP as the scheduler fuses it on datacenter: the first linear layer,
    the third's bias initialisation (a one-tile layer), then the second and
    third fused along the hidden dimension. That layer's weights load while the
    first layer's MAC calls still run. Before, its buffers kept off the bias
    layer's bytes only and took the first layer's: its first weight load
    started at 671, after the first layer's last MAC call (545). The
    intermediates stay in DRAM here (no homes: schedules.accel.homes)."""
    from schedules.accel import homes

    kernel, feeds = _mlp()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYC_COMPILE_CACHE", "0")
        mp.setattr(homes, "assign", lambda kernel, _spec: kernel)
        compiled = polyc.compile(kernel, config="datacenter", trace_limit=100_000)
    layers = [lc.layer for lc in compiled.choice.layers]
    assert len(layers) == 3 and len(layers[1].stmts) == 1
    out, report = compiled.run(**feeds)
    first = {s.name for s in layers[0].stmts}
    last_mac = max(e.end for e in report.events if e.kind == "mac" and e.label in first)
    loads = [e for e in report.events if e.label == "p_fc2_weight in"]
    assert loads and min(e.start for e in loads) < last_mac
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5)


def test_the_overlapped_layers_compute_what_the_interpreter_does(mlp_run):
    kernel, feeds, _, out, _ = mlp_run
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5)


def test_the_program_prediction_counts_the_overlap_within_the_tolerance(mlp_run):
    _, _, compiled, _, report = mlp_run
    choice = compiled.choice
    alone = sum(lc.candidate.cycles for lc in choice.layers)
    assert choice.predicted_cycles <= alone
    assert abs(choice.predicted_cycles / report.cycles - 1) <= TOLERANCE


def test_a_conv_and_a_depthwise_conv_apart_are_predicted_within_the_tolerance():
    """Two layers on edge-npu (the depthwise one on the vector unit): equal to
    the interpreter, and the program's prediction within the tolerance."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16),
        nn.ReLU(),
    ).eval()
    x = torch.randn(1, 3, 16, 16)
    kernel = polyc.from_torch(model, (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    assert len(compiled.choice.layers) == 2
    out, report = compiled.run(arg0=x.numpy())
    (got,) = out.values()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert abs(ratio - 1) <= TOLERANCE


def _spec():
    return load_config("tiny")  # one 16 KiB L1 in banks, alignment 64


def test_layers_that_fit_together_get_disjoint_bytes():
    spec = _spec()
    reqs = [
        Request("a", "a", 1, 2, 2048, 0, 0),
        Request("b", "b", 1, 1, 4096, 1, 1),
    ]
    got = plan_overlapped(spec, reqs)
    a, b = got["a"], got["b"]
    assert a.offset + a.bytes <= b.offset or b.offset + b.bytes <= a.offset
    # without the overlap the planner reuses layer 0's bytes
    old = plan(spec, reqs, bank_aware=False)
    assert old["a"].offset == old["b"].offset == 0


def test_a_layer_keeps_off_the_bytes_of_the_two_layers_before():
    """A one-tile layer in between (a bias initialisation) does not put the
    next layer back on the bytes of the layer before it; where the three do
    not fit together, it keeps off the one before only."""
    spec = _spec()
    reqs = [
        Request("a", "a", 1, 1, 4096, 0, 0),
        Request("b", "b", 1, 1, 256, 1, 1),
        Request("c", "c", 1, 1, 4096, 2, 2),
    ]
    got = plan_overlapped(spec, reqs)
    for x, y in (("a", "c"), ("b", "c"), ("a", "b")):
        p, q = got[x], got[y]
        assert p.offset + p.bytes <= q.offset or q.offset + q.bytes <= p.offset
    big = [replace(r, slot_bytes=8192) if r.name != "b" else r for r in reqs]
    got = plan_overlapped(spec, big)  # a and c together fill the 16 KiB
    b, c = got["b"], got["c"]
    assert b.offset + b.bytes <= c.offset or c.offset + c.bytes <= b.offset


def test_a_layer_keeps_off_the_layer_before_where_its_banks_are_taken():
    """linear-stack in float32 on datacenter (local: eight banks of 64 KiB): the
    first layer's buffers, spread over the banks, leave no gap where each 32 KiB
    slot of the second layer's weight buffer lies in one bank. The bank rule is
    a preference: that buffer takes the first gap that keeps it off the first
    layer's bytes. Before, the second layer gave up keeping off and its weight
    buffer took the first one's bytes, so its first loads waited for the first
    layer's last MAC call (6,540 cycles; 5,859 now)."""
    spec = load_config("datacenter")
    local = spec.level_index("local")

    def req(name, slots, size, layer):
        return Request(name, name, local, slots, size, layer, layer)

    reqs = [
        req("p_0_bias", 3, 512, 0),
        req("linear", 2, 8192, 0),
        req("arg0", 3, 4096, 0),
        req("p_0_weight", 3, 32768, 0),
        req("p_2_bias", 3, 256, 1),
        req("linear_1", 2, 4096, 1),
        req("p_2_weight", 3, 32768, 1),
    ]
    got = plan_overlapped(spec, reqs)
    for x in reqs[:4]:
        for y in reqs[4:]:
            p, q = got[x.name], got[y.name]
            assert p.offset + p.bytes <= q.offset or q.offset + q.bytes <= p.offset, (
                x.name,
                y.name,
            )


def test_the_plan_falls_back_when_two_layers_do_not_fit_together():
    """Two layers of 12 KiB each in 16 KiB: they cannot keep apart, so the plan
    is the one without overlap (the second layer reuses the first's bytes)."""
    spec = _spec()
    reqs = [
        Request("a", "a", 1, 1, 12 * 1024, 0, 0),
        Request("b", "b", 1, 1, 12 * 1024, 1, 1),
    ]
    assert plan_overlapped(spec, reqs) == plan(spec, reqs)


def test_the_overlapped_plan_never_fails_where_the_plan_succeeds():
    """Random layers of buffers: where :func:`plan` succeeds so does
    :func:`plan_overlapped`, no two buffers of the same or of consecutive
    layers that it keeps apart share a byte, and it refuses what :func:`plan`
    refuses."""
    spec = _spec()
    rng = random.Random(7)
    for _ in range(200):
        reqs = []
        for layer in range(rng.randint(1, 5)):
            for j in range(rng.randint(1, 4)):
                size = rng.choice([64, 256, 1024, 3000, 4096, 6000])
                slots = rng.randint(1, 3)
                reqs.append(Request(f"l{layer}b{j}", "x", 1, slots, size, layer, layer))
        try:
            want = plan(spec, reqs)
        except PlacementError:
            with pytest.raises(PlacementError):
                plan_overlapped(spec, reqs)
            continue
        got = plan_overlapped(spec, reqs)
        assert set(got) == set(want)
        for r in reqs:  # within a layer no two buffers share a byte
            for s in reqs:
                if r is s or r.end != s.end:
                    continue
                x, y = got[r.name], got[s.name]
                assert x.offset + x.bytes <= y.offset or y.offset + y.bytes <= x.offset


def test_no_credit_when_two_layers_do_not_fit_together():
    from schedules.accel.search import Candidate

    spec = load_config("edge-npu")
    # fill, its bytes and calls; tail, its bytes and calls; the commands it
    # issues (search.EDGES)
    edges = (400.0, 1024.0, 1.0, 500.0, 0.0, 0.0, 20.0)

    def cand(sram):
        loads = (("w", 400.0),)
        return Candidate(None, (), 1000.0, 0.0, sram, edges=edges, first_loads=loads)

    # the fill (400 cycles) hides under the tail (500): DRAM moves its 1 KiB in
    # 64 cycles and both channels are free
    assert boundary.credit(spec, cand(1024), (), cand(1024)) == 400.0
    # what waits for the previous layer's stores does not hide
    assert boundary.credit(spec, cand(1024), ("w",), cand(1024)) == 0.0
    # nor anything when the two layers do not fit together
    assert boundary.credit(spec, cand(600_000), (), cand(600_000)) == 0.0
