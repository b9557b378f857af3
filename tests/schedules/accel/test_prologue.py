"""A vector prologue and its MAC calls a tile ahead of the vector epilogue.

A layer norm fused ahead of a linear layer and its GELU: issued in program
order, the vector unit runs tile t's GELU before tile t + 1's layer norm, which
tile t + 1's MAC calls wait for, so nothing overlaps the array
(:func:`schedules.accel.work._chain`). With the layer norm and the calls
shifted a tile ahead (:func:`schedules.accel.pipeline.prologue`, a checked
``shift`` of the fused band), the vector unit runs tile t + 1's layer norm and
then tile t's GELU while the array computes tile t + 1.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from schedules.accel import pipeline


def _kernel():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.LayerNorm(32), torch.nn.Linear(32, 128), torch.nn.GELU()
    ).eval()
    x = torch.randn(1, 256, 32)
    return polyc.from_torch(module, (x,)), {"arg0": x.numpy()}


def test_the_prologue_runs_a_tile_ahead_and_the_numbers_hold(monkeypatch):
    kernel, feeds = _kernel()
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    compiled = polyc.compile(kernel, config="datacenter")
    (layer,) = compiled.choice.layers
    st = layer.candidate.structure
    assert st.ahead and dict(st.engine)[st.ahead[-1]] == "mac", st.ahead
    out, report = compiled.run(**feeds)
    want = polyc.interpret(kernel, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-4, atol=1e-4)
    # in program order the same layer takes turns on the two engines
    monkeypatch.setattr(pipeline, "prologue", lambda layer, engine: False)
    serial = polyc.compile(kernel, config="datacenter")
    assert not serial.choice.layers[0].candidate.structure.ahead
    assert report.cycles < 0.9 * serial.run(**feeds)[1].cycles
