"""A contraction's odd rows on the vector unit (issue 14, hf-vit's M=17 cliff).

Seventeen tokens on the 16 rows of an output-stationary array take two folds per
column tile, the second with one row busy: the MAC array runs at 17/32 of its
peak. ``schedules.accel.share`` cuts such a layer at its last full fold of rows
(``split_layer`` without a period, checked against the exact dependences): the
MAC array runs the 16 rows in full folds and the vector unit the odd row beside
them, in the same tiles. Simulated cycles are deterministic: no timing is
asserted.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
import schedules as S
from accelerator import load_config
from accelerator.hardware.bound import engine_bound
from polyc.errors import ArgumentError
from polyc.ir import macmap
from polyc.ir.affine import var
from schedules.accel.split import split_engine, split_layer
from tests.support.depthwise import depthwise

torch = pytest.importorskip("torch")


def _linear(tokens: int = 17, k: int = 256, n: int = 64):
    torch.manual_seed(0)
    module = torch.nn.Linear(k, n, bias=False).eval()
    x = torch.randn(1, tokens, k)
    return module, x


def _compile(config: str, tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    module, x = _linear()
    kernel = polyc.from_torch(module, (x,))
    return kernel, module, x, polyc.compile(kernel, config=config)


def test_split_engine_names_each_part():
    kernel = depthwise(8, 8)
    odd = split_layer(kernel, ("S0", "S1"), "o", 7, vector="second")
    assert [split_engine(odd, n) for n in ("S1", "S1_1", "x")] == [
        "mac",
        "vector",
        None,
    ]
    for k in (
        split_layer(kernel, ("S0", "S1"), "o", 3, 4),
        split_layer(kernel, ("S0", "S1"), "o", 3),
    ):
        assert [split_engine(k, n) for n in ("S1", "S1_1")] == ["vector", "mac"]
    # the choice is recorded: replaying the history runs the same parts
    again = S.replay(kernel, odd.history)
    assert [split_engine(again, n) for n in ("S1", "S1_1")] == ["mac", "vector"]
    with pytest.raises(ArgumentError, match="vector='both' names no part"):
        split_layer(kernel, ("S0", "S1"), "o", 7, vector="both")


def test_seventeen_rows_split_their_odd_row_to_the_vector_unit(tmp_path, monkeypatch):
    kernel, module, x, c = _compile("edge-npu", tmp_path, monkeypatch)
    assert any("rows below 16" in note for note in c.choice.shared)
    (layer,) = c.choice.layers
    engine = dict(layer.candidate.structure.engine)
    contraction = next(n for n, e in engine.items() if e == "mac")
    assert engine[f"{contraction}_1"] == "vector"
    out, rep = c.run(arg0=x.numpy())
    got = np.asarray(next(iter(out.values())) if isinstance(out, dict) else out)
    want = module(x).detach().numpy()
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    bound = engine_bound(kernel, load_config("edge-npu"), {}).cycles
    # one engine with two folds per column tile ran 8,816 cycles (1.62x the
    # bound); the odd row beside the full folds runs 6,726
    assert rep.cycles < 1.4 * bound


def test_weight_stationary_arrays_stream_their_rows_unsplit(tmp_path, monkeypatch):
    _, _, _, c = _compile("datacenter", tmp_path, monkeypatch)
    assert not any("rows below" in note for note in c.choice.shared)


def _rows_operands(batch: int):
    """``out[b0, b1, j] += x[b0, b1, k] * w[k, j]`` through buffers of 17 rows
    (``batch`` of them), 16 columns and 64 terms."""
    b0, b1, j, k = (var(n) for n in ("b0", "b1", "j", "k"))
    c = macmap.Operand("out_sram", (b0, b1, j), (17 * 16, 16, 1), box=(batch, 17, 16))
    a = macmap.Operand("x_sram", (b0, b1, k), (17 * 64, 64, 1), box=(batch, 17, 64))
    b = macmap.Operand("w_sram", (k, j), (16, 1), box=(64, 16))
    return {"c": c, "a": a, "b": b}


def test_sixteen_of_seventeen_rows_map_when_the_batch_is_one():
    # the MAC array's call over rows 0..15 of a 17-row output leaves row 16 (the
    # vector unit's) alone: a batch iterator of one point never steps to the next
    # pitch, so no padding row is written over it
    groups = {"m": ("b0", "b1"), "n": ("j",), "k": ("k",)}
    exact = dict.fromkeys(("b0", "b1", "j", "k"), True)
    one = {"b0": 1, "b1": 16, "j": 16, "k": 64}
    dims = macmap.check("S1", groups, _rows_operands(1), one, exact)
    assert not isinstance(dims, macmap.Refusal), dims
    # two batches: the call would run on into the next batch's rows over row 16
    two = macmap.check("S1", groups, _rows_operands(2), {**one, "b0": 2}, exact)
    assert isinstance(two, macmap.Refusal)
    assert "skips to the next pitch" in two.because
