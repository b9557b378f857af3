"""A MAC call's held operand (the weights of a weight-stationary array) shifts
into the array while the call waits for its other operands (the runtime's
``pc_head_from``): the cost model's chain (:func:`schedules.accel.work.in_order`)
and its first tile's prologue term charge only what is left of that load.
Predictions against the simulator, outputs against the interpreter."""

from __future__ import annotations

import numpy as np
import torch

import polyc
from accelerator.sim.attribution import attribute
from schedules.accel.work import in_order
from tests.schedules.accel.test_chain import _stmt

#: predicted over simulated cycles of the layer
TOLERANCE = 0.10


def _mlp_steps(held: str):
    """fc1 (MAC, 100 cycles, holding w1), its activation (vector, 50 cycles)
    and fc2 (MAC, 80 cycles, holding ``held``); each MAC statement's load on
    an idle array is 10 cycles, its held operand's shift 8, its skew 30."""
    return [
        (_stmt("F1", "h", "x", "w1"), "mac", np.array([100.0]), 10.0, 30.0, ("w1", 8)),
        (_stmt("A", "a", "h"), "vector", np.array([50.0]), 0.0, 0.0, None),
        (_stmt("F2", "y", "a", "w2"), "mac", np.array([80.0]), 10.0, 30.0, (held, 8)),
    ]


def test_the_held_operand_loads_while_the_call_waits_for_the_other():
    # F1 0..110 (ready 140), A 140..190; F2's w2, which nothing in the layer
    # writes, shifted in while the array idled: F2 streams at 190 and ends at
    # 190 + 80 + 10 - 8 (ready 302); before, it loaded after A (310)
    span = in_order(_mlp_steps("w2"), np.array([1.0]), 1)[0]
    assert span == 110 + 30 + 50 + (80 + 10 - 8) + 30 == 302
    # the array holding the activation (the call exchanged) loads it after A
    held = in_order(_mlp_steps("a"), np.array([1.0]), 1)[0]
    assert held == 110 + 30 + 50 + (80 + 10) + 30 == 310


class _MLP(torch.nn.Module):
    """The model suite's mlp (bench.zoo): two linear layers with activations on
    4 rows, too few to fill the 64x64 array: each hand-off from the array to the
    vector unit and back is latency."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 128)
        self.fc3 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.nn.functional.relu(self.fc1(x))
        return self.fc3(torch.nn.functional.gelu(self.fc2(x)))


def test_fc2s_weights_load_under_fc1s_activation_on_datacenter():
    """On datacenter (float16) fc1, its ReLU, fc2 and its GELU are one layer of
    one tile: fc2's first call shifts its weights in (R = 64 cycles) while the
    vector unit runs the ReLU, and streams when the ReLU is done. The layer's
    prediction follows the simulator; the outputs are the interpreter's."""
    torch.manual_seed(0)
    x = torch.randn(4, 64).half()
    kernel = polyc.from_torch(_MLP().eval().half(), (x,))
    compiled = polyc.compile(kernel, config="datacenter")
    out, report = compiled.run(arg0=x.numpy())
    want = polyc.interpret(kernel, {"arg0": x.numpy()})
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=2e-2, atol=2e-2)
    (lc,) = [
        lc
        for lc in compiled.choice.layers
        if lc.candidate is not None
        and sum(
            lc.candidate.structure.engine_of(s.name) == "mac" for s in lc.layer.stmts
        )
        == 2
    ]
    names = [s.name for s in lc.layer.stmts]
    events = [e for e in report.events if e.label.split(" ")[0] in names]
    macs = [e for e in events if e.kind == "mac"]
    vector = [e for e in events if e.kind == "vector"]
    relu_end = vector[0].end
    (fc2,) = [e for e in macs if e.start < relu_end < e.end]
    assert fc2.start == relu_end - 64  # its load, then it streams from relu_end
    groups = {
        c.layer.name: [s.name for s in c.layer.stmts] for c in compiled.choice.layers
    }
    share = attribute(report, groups).shares[lc.layer.name]
    assert abs(lc.candidate.cycles / share.cycles - 1) <= TOLERANCE, (
        lc.candidate.cycles,
        share.cycles,
    )


def test_the_first_calls_weights_load_under_the_first_tiles_prologue():
    """A layer norm fused ahead of a linear layer and its GELU, 16 tokens on
    datacenter: the first tile's calls wait for the layer norm, and the first
    call's weights (which the layer norm does not write) shift into the array
    meanwhile, up to R = 64 cycles of it (:func:`schedules.accel.work._chain`,
    charged by the model's first-tile term)."""
    import sympy as sp

    from schedules.accel import space
    from schedules.accel.evaluate import numeric
    from schedules.accel.model import LayerModel
    from schedules.accel.work import _chain

    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.LayerNorm(64), torch.nn.Linear(64, 256), torch.nn.GELU()
    ).eval()
    x = torch.randn(1, 16, 64)
    kernel = polyc.from_torch(module, (x,))
    compiled = polyc.compile(kernel, config="datacenter")
    (lc,) = compiled.choice.layers
    placed, spec = lc.context
    model = LayerModel(
        placed, lc.layer, spec, lc.candidate.structure, space.engine_level(spec)
    )
    env = {v.symbol(lc.layer): np.array([float(s)]) for v, s in lc.candidate.sizes}

    def ev(e):
        return numeric(sp.sympify(e), env, {})

    pro, _epi, _exposed, _tiles, hidden = _chain(model, ev)
    assert pro[0] > 64
    assert hidden[0] == 64
