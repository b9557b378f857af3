"""A contraction's bias init moved into its epilogue (schedules/accel/bias.py),
and what it buys on the accelerator."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import polyc
import schedules as S
from codegen.accel.direct import numpy_inputs
from polyc.errors import IllegalTransformError
from polyc.oracle.interpreter import interpret
from schedules.accel.bias import defer_all, deferrable


class _LinearGelu(nn.Module):
    def __init__(self, d=32, e=64):
        super().__init__()
        self.linear = nn.Linear(d, e)

    def forward(self, x):
        return nn.functional.gelu(self.linear(x))


def _kernel(module, *shape):
    torch.manual_seed(0)
    return polyc.from_torch(module.eval(), (torch.randn(*shape),))


def _inputs(kernel):
    return numpy_inputs(kernel, np.random.default_rng(0))


def test_the_bias_moves_into_the_epilogue_and_the_outputs_stay_the_same():
    kernel = _kernel(_LinearGelu(), 4, 32)
    assert deferrable(kernel) == ["S0"]
    moved = defer_all(kernel)
    assert str(moved.statement("S0")).endswith("= 0")
    assert "p_linear_bias" in str(moved.statement("S2"))
    x = _inputs(kernel)
    want, got = interpret(kernel, x), interpret(moved, x)
    for name, v in want.items():
        np.testing.assert_allclose(got[name], v, rtol=1e-5, atol=1e-6)
    assert moved.history[-1].name == "defer_bias"
    replayed = S.replay(kernel, moved.history)
    assert [str(s) for s in replayed.statements] == [str(s) for s in moved.statements]


def test_a_conv_bias_moves_with_its_channel_index():
    """conv2d[n, o, h, w] = bias[o]: the epilogue reads conv2d[i, j, l, m], so it
    adds bias[j]."""
    module = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
    kernel = _kernel(module, 1, 3, 6, 6)
    moved = defer_all(kernel)
    epilogue = str(moved.statement("S2"))
    assert "p_0_bias[j]" in epilogue, epilogue
    x = _inputs(kernel)
    want, got = interpret(kernel, x), interpret(moved, x)
    for name, v in want.items():
        np.testing.assert_allclose(got[name], v, rtol=1e-5, atol=1e-5)


def test_a_result_read_twice_or_returned_keeps_its_init():
    """The rewrite needs exactly one reader and a temporary accumulator."""

    class TwoReaders(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            y = self.linear(x)
            return torch.relu(y) + torch.sigmoid(y)

    assert deferrable(_kernel(TwoReaders(), 2, 8)) == []
    plain = _kernel(nn.Linear(8, 8), 2, 8)  # the contraction writes the output
    assert deferrable(plain) == []
    with pytest.raises(
        IllegalTransformError,
        match="defer_bias: S0 cannot move into its epilogue because out is an "
        "output of the kernel",
    ):
        S.defer_bias(plain, "S0")


def test_the_mac_array_no_longer_waits_for_the_epilogue():
    """Linear 128 -> 512 + GELU on edge-npu: with the bias init on the vector unit
    the array waited, every tile, for the epilogue of the tile before (the vector
    unit runs in issue order and the next tile's init queued behind it): 29,556
    cycles before the move, and the cost model now charges the first tile's init
    and the last tile's epilogue outside the array's time."""
    kernel = _kernel(_LinearGelu(128, 512), 1, 16, 128)
    compiled = polyc.compile(kernel, config="edge-npu")
    _, report = compiled.run(_inputs(kernel))
    mac = report.engine("mac_array")
    assert report.cycles < 29_556
    # the array is busy for more than half of the run (it was 55% before)
    assert mac.busy > 0.55 * report.cycles


def test_the_bias_stays_an_init_where_the_mac_array_does_not_take_the_dtype():
    """HW-A's MAC array takes int8 only: a float contraction runs on the vector
    unit, where a zero init folds into no MAC call, so moving the bias would only
    add the epilogue's add (the float transformer block on HW-A ran 528,422
    cycles with its biases moved, 373,175 without)."""
    from accelerator import load_config

    kernel = _kernel(_LinearGelu(), 4, 32)
    assert deferrable(kernel, load_config("edge-npu")) == ["S0"]
    assert deferrable(kernel, load_config("hw-a")) == []
    compiled = polyc.compile(kernel, config="hw-a")
    assert "defer_bias" not in [st.name for st in compiled.kernel.history]
    x = _inputs(kernel)
    got, _ = compiled.run(x)
    want = interpret(kernel, x)
    for name, v in want.items():
        np.testing.assert_allclose(got[name], v, rtol=1e-5, atol=1e-6)


def _int8_conv():
    """A PT2E-quantized conv + ReLU: its int32 accumulator starts at the bias
    and one statement requantizes it to int8."""
    import warnings

    from bench import zoo

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 8, 8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchao's deprecations
        return polyc.from_torch(zoo.int8(module, (x,)), (x,))


def test_an_int8_bias_moves_into_the_requantization_without_an_output_stage():
    """Without a requantizing output stage the requantization is vector work like
    any epilogue: left an init, the bias made each tile's init wait behind the
    requantization of the tile before. With one (HW-A) the stage takes the
    requantization as it is, so the bias stays an init there. The sum is the
    same either way (int32 additions wrap)."""
    from accelerator import load_config

    pytest.importorskip("torchao")
    kernel = _int8_conv()
    with_stage = load_config("hw-a")
    assert with_stage.mac_array.requantize
    inits = deferrable(kernel, load_config("edge-npu"))
    assert len(inits) == 1
    assert deferrable(kernel, with_stage) == []
    assert deferrable(kernel) == []  # no config: as where an output stage might be
    moved = defer_all(kernel, load_config("edge-npu"))
    x = _inputs(kernel)
    want = interpret(kernel, x)
    for name, v in interpret(moved, x).items():
        np.testing.assert_array_equal(v, want[name])
    compiled = polyc.compile(kernel, config="edge-npu")
    assert "defer_bias" in [st.name for st in compiled.kernel.history]
    got, _ = compiled.run(x)
    for name, v in want.items():
        np.testing.assert_array_equal(got[name], v)
