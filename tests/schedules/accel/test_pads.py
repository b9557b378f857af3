"""Zero padding read by a contraction, inlined into it (schedules/accel/pads.py)."""

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
from schedules.accel.pads import inline_pads, zero_pads


class _Stem(nn.Module):
    """EfficientNet's stem: "same" padding written out, then a 3x3/2 convolution
    of 3 channels with no padding of its own."""

    def __init__(self, after=None):
        super().__init__()
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))
        self.conv = nn.Conv2d(3, 8, 3, 2, bias=False)
        self.after = after or nn.Identity()

    def forward(self, x):
        return self.after(self.conv(self.pad(x)))


def _kernel(model, side=16):
    torch.manual_seed(0)
    return polyc.from_torch(model.eval(), (torch.randn(1, 3, side, side),))


def test_the_padding_goes_and_the_outputs_stay_the_same():
    kernel = _kernel(_Stem())
    pairs = zero_pads(kernel)
    assert len(pairs) == 1
    inlined = inline_pads(kernel)
    gone = set(pairs[0])
    assert {s.name for s in inlined.statements} == {
        s.name for s in kernel.statements
    } - gone
    (conv,) = [s for s in inlined.statements if s.reduction == "add"]
    assert {ld.array for ld in conv.reads} >= {"arg0"}  # reads the input itself
    assert zero_pads(inlined) == []
    x = numpy_inputs(kernel, np.random.default_rng(0))
    want, got = interpret(kernel, x), interpret(inlined, x)
    for name, v in want.items():
        np.testing.assert_allclose(got[name], v, rtol=1e-6, atol=1e-6)
    assert [st.name for st in inlined.history][-1] == "inline_zero_pad"
    replayed = S.replay(kernel, inlined.history)
    assert [str(s) for s in replayed.statements] == [str(s) for s in inlined.statements]


def test_a_padding_read_by_an_element_wise_statement_stays():
    class _Padded(nn.Module):
        def forward(self, x):
            return torch.relu(nn.functional.pad(x, (1, 1)))

    kernel = _kernel(_Padded())
    assert zero_pads(kernel) == []
    names = [s.name for s in kernel.statements]
    with pytest.raises(
        IllegalTransformError,
        match=r"inline_zero_pad: S\d+ and S\d+ cannot be inlined into their readers "
        r"because S\d+ reads .* and is not a contraction",
    ):
        S.inline_zero_pad(kernel, names[0], names[1])


def test_the_stem_tiles_its_rows_once_its_padding_is_inlined():
    """Fused with its padding (33 x 33 where the convolution writes 16 x 16) the
    stem's layer could not tile its rows: on edge-npu it ran its loads, MAC calls
    and SiLU one after another (64x64 image: 23,666 cycles in the model suite,
    11,387 now)."""
    kernel = _kernel(_Stem(nn.SiLU()), side=32)
    compiled = polyc.compile(kernel, config="edge-npu", verify=True)
    (layer,) = [lc for lc in compiled.choice.layers if lc.candidate is not None]
    assert all(s.target.array != "pad" for s in layer.layer.stmts)
    assert len(layer.candidate.structure.free) >= 2  # channels and rows
    x = numpy_inputs(kernel, np.random.default_rng(1))
    compiled.run(**x)  # verified against the interpreter
