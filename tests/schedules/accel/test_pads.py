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


def _int8_block():
    """Three PT2E-quantized 3x3 convolutions, the first two with ReLU: the
    later ones' input padding is the zero point (-128), which stays as a copy
    and a fill."""
    import warnings

    from bench import zoo

    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
    ).eval()
    x = torch.randn(1, 8, 16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchao's deprecations
        return polyc.from_torch(zoo.int8(module, (x,)), (x,))


def test_a_padding_that_stays_runs_its_copy_over_its_source():
    """pad[i] = X[i - 1] becomes pad[i + 1] = X[i]: the same instances, read at
    the requantization's own index, so the two fuse element for element."""
    from schedules.accel import pads

    pytest.importorskip("torchao")
    kernel = _int8_block()
    shifted = pads._shifted_copies(kernel)
    assert shifted, "the int8 block keeps a padding copy reading its source shifted"
    aligned = pads.align_pads(kernel)
    for copy, _ in shifted:
        before, after = kernel.statement(copy), aligned.statement(copy)
        assert any(a.const for a in before.body.index)
        assert not any(a.const for a in after.body.index)  # X[i0, i1, i2, i3]
        assert after.domain.count_val() == before.domain.count_val()
    assert pads._shifted_copies(aligned) == []
    x = numpy_inputs(kernel, np.random.default_rng(0))
    want, got = interpret(kernel, x), interpret(aligned, x)
    for name, v in want.items():
        np.testing.assert_array_equal(got[name], v)
    assert [st.name for st in aligned.history][-1] == "translate_iterators"
    replayed = S.replay(kernel, aligned.history)
    assert [str(s) for s in replayed.statements] == [str(s) for s in aligned.statements]


def test_the_int8_convolution_tiles_its_rows_with_its_padding_copy_aligned(
    monkeypatch,
):
    """Fused with its requantization and the next convolution's padding copy,
    the middle convolution's layer kept its rows whole while the copy read them
    shifted: its MAC calls and its requantization ran one after the other
    (15,212 cycles on edge-npu; 13,396 aligned, the layer 4,468 -> 2,714
    predicted)."""
    from schedules.accel import pads

    pytest.importorskip("torchao")
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")  # one kernel, compiled twice
    kernel = _int8_block()
    x = numpy_inputs(kernel, np.random.default_rng(2))
    aligned = polyc.compile(kernel, config="edge-npu", verify=True)
    _, report = aligned.run(**x)  # verified against the interpreter
    monkeypatch.setattr(pads, "align_pads", lambda k: k)
    plain = polyc.compile(kernel, config="edge-npu")
    _, before = plain.run(**x)

    def row_tiled(compiled):
        return [
            lc.layer.name
            for lc in compiled.choice.layers
            if lc.candidate is not None
            and any(s.reduction for s in lc.layer.stmts)
            and sum(type(v).__name__ == "SharedTile" for v, _ in lc.candidate.sizes)
            >= 2  # channels and rows
        ]

    assert row_tiled(aligned) and not row_tiled(plain)
    assert report.cycles < 0.95 * before.cycles
