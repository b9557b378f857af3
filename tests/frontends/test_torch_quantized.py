"""PyTorch's eager quantized modules in (polyc.frontends.torch.quantized): the
imported int8 kernel equals the modules' own output (qnnpack) bit for bit, through
the interpreter, the host C and the accelerator."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq

import accelerator
import polyc
from polyc.errors import FrontendError
from polyc.frontends.torch.quantized import Quantized, from_quantized


@pytest.fixture(autouse=True)
def qnnpack():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of quantized tensors
        yield
    torch.backends.quantized.engine = old


def _per_channel(out_c: int, in_c: int, k: int | None, rng) -> torch.Tensor:
    shape = (out_c, in_c, k, k) if k else (out_c, in_c)
    w = rng.integers(-128, 128, shape).astype(np.int8)
    scales = torch.from_numpy(rng.uniform(2e-3, 8e-3, out_c))
    return torch._make_per_channel_quantized_tensor(
        torch.from_numpy(w), scales, torch.zeros(out_c, dtype=torch.long), 0
    )


def _model(rng) -> torch.nn.Module:
    c1 = nniq.ConvReLU2d(3, 8, 3, padding=1)
    c1.set_weight_bias(_per_channel(8, 3, 3, rng), torch.randn(8) * 0.5)
    c1.scale, c1.zero_point = 0.09, 0
    c2 = nnq.Conv2d(8, 8, 3, stride=2, groups=2)
    c2.set_weight_bias(_per_channel(8, 4, 3, rng), torch.randn(8) * 0.5)
    c2.scale, c2.zero_point = 0.13, 117
    fc = nniq.LinearReLU(8 * 3 * 3, 10)
    fc.set_weight_bias(_per_channel(10, 72, None, rng), torch.randn(10))
    fc.scale, fc.zero_point = 0.2, 30
    return torch.nn.Sequential(
        nnq.Quantize(0.04, 131, torch.quint8),
        c1,
        c2,
        torch.nn.Flatten(),
        fc,
        nnq.DeQuantize(),
    ).eval()


def test_a_quantized_chain_is_bit_exact_with_pytorch():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = _model(rng)
    x = torch.randn(1, 3, 8, 8) * 2
    q = from_quantized(model, (1, 3, 8, 8))
    xq = model[0](x)
    want = model[:-1](x).int_repr().numpy()  # all but the DeQuantize
    arg = Quantized.to_int8(xq)
    got = polyc.interpret(q.kernel, {"arg0": arg})["out"]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(Quantized.to_uint8(got), want)
    host = polyc.build(q.kernel)(arg0=arg)["out"]
    np.testing.assert_array_equal(Quantized.to_uint8(host), want)
    spec = accelerator.load_config("edge-npu")
    fused = dataclasses.replace(
        spec, mac_array=dataclasses.replace(spec.mac_array, requantize=True)
    )
    for config in (spec, fused):
        out, _ = polyc.compile(q.kernel, config=config).run(arg0=arg)
        np.testing.assert_array_equal(Quantized.to_uint8(out["out"]), want)
    assert (q.output_scale, q.output_zero_point) == (0.2, 30)
    assert len(np.unique(want)) > 3  # not all saturated


def test_unsupported_modules_are_named():
    chain = torch.nn.Sequential(
        nnq.Quantize(0.1, 128, torch.quint8), torch.nn.Hardswish()
    )
    with pytest.raises(FrontendError, match="1 is a Hardswish because the chain"):
        from_quantized(chain, (1, 4))
    with pytest.raises(FrontendError, match="0 is a ReLU because the chain does not"):
        from_quantized(torch.nn.Sequential(torch.nn.ReLU()), (1, 4))
