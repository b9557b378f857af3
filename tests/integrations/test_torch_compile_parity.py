"""``torch.compile(model, backend="polyc")`` gives the kernel ``from_torch``
gives, and the same cycles on the accelerator, on ``transformers`` models from
tiny configs (:mod:`tests.support.hf_models`). ``python -m bench.torch_parity``
does the same for every model of the suite at its own sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import polyc
from bench.torch_parity import kernel_difference
from polyc.integrations.torch_compile import backend as torch_compile
from tests.integrations.test_torch_compile import (  # noqa: F401 (an autouse fixture)
    conv_bn_relu,
    fresh_dynamo,
)
from tests.support import hf_models
from tests.support.torchcheck import check

CONFIG = "edge-npu"
SLOW = {"mobilenetv2", "llama", "gpt2", "vit"}


def _both(module, inputs, config=CONFIG):
    """``(from_torch's kernel, its cycles, torch.compile's kernel, its cycles)``."""
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    direct = polyc.from_torch(module, inputs)
    _, report = polyc.compile(direct, config).run(**feeds)
    compiled = torch.compile(module, backend="polyc", options={"config": config})
    with torch.no_grad():
        got = compiled(*inputs)
        ref = module(*inputs)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-5)
    (record,) = torch_compile.records()
    (kernel,) = record.kernels
    (run,) = record.compiled
    return direct, report.cycles, kernel, run.last_report.cycles


@pytest.mark.parametrize("name", hf_models.params(SLOW))
def test_torch_compile_gives_from_torchs_kernel_and_cycles(name):
    module, inputs = hf_models.build(name)
    direct, cycles, kernel, compiled_cycles = _both(module, inputs)
    assert kernel_difference(direct, kernel) is None
    assert compiled_cycles == cycles


class Scaled(nn.Module):
    """``body(x) * scale``, ``scale`` a buffer."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.register_buffer("scale", torch.linspace(0.5, 2, 4))

    def forward(self, x):
        return self.body(x) * self.scale


def test_bound_weights_keep_from_torchs_names():
    """The backend bound the weights Dynamo passes as inputs under generic names
    (``b__polyc_static3``); placement breaks ties by array name, so hf-convnext
    ran 528,677 cycles under torch.compile against from_torch's 528,669 on
    edge-npu. They now have from_torch's names, parameters and buffers alike."""
    model = Scaled(nn.Sequential(conv_bn_relu(), nn.Flatten(), nn.Linear(288, 4)))
    x = torch.randn(1, 3, 12, 12)
    direct, cycles, kernel, compiled_cycles = _both(model.eval(), (x,), "tiny")
    assert list(kernel.arrays) == list(direct.arrays)
    assert {"p_body_2_weight", "b_scale"} <= set(kernel.arrays)
    assert kernel_difference(direct, kernel) is None
    assert compiled_cycles == cycles


class MaskedAttention(nn.Module):
    """Attention with the mask ``transformers`` builds from ``arange`` when no
    padding mask is passed (all True under ``torch.export``)."""

    def __init__(self, additive=False):
        super().__init__()
        self.proj = nn.Linear(8, 24)
        self.additive = additive

    def forward(self, x):
        q, k, v = self.proj(x).unsqueeze(1).chunk(3, dim=-1)
        n = x.shape[1]
        mask = (torch.arange(n)[None, :] >= 0).expand(n, n)
        if self.additive:
            mask = torch.zeros(n, n).masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Unmasked(MaskedAttention):
    def forward(self, x):
        q, k, v = self.proj(x).unsqueeze(1).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize("additive", [False, True])
def test_an_attention_mask_that_masks_nothing_is_dropped(additive):
    """hf-bert and hf-vit had one more statement per layer through from_torch
    than through torch.compile (the add of an all-True mask, which Dynamo's
    trace of transformers does not build), and different cycles."""
    torch.manual_seed(3)
    model = MaskedAttention(additive)
    x = torch.randn(1, 6, 8)
    masked = check(model, [x], targets=("interpret",))
    plain = Unmasked()
    plain.load_state_dict(model.state_dict())
    unmasked = check(plain, [x], targets=("interpret",))
    assert kernel_difference(masked, unmasked) is None


def test_a_mask_that_masks_something_is_kept():
    class Causal(MaskedAttention):
        def forward(self, x):
            q, k, v = self.proj(x).unsqueeze(1).chunk(3, dim=-1)
            n = x.shape[1]
            mask = torch.arange(n)[None, :] <= torch.arange(n)[:, None]
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    torch.manual_seed(4)
    model = Causal()
    x = torch.randn(1, 6, 8)
    kernel = check(model, [x], targets=("interpret",))
    plain = Unmasked()
    plain.load_state_dict(model.state_dict())
    assert len(kernel.statements) == len(polyc.from_torch(plain, (x,)).statements) + 1


#: a module reached through a global, as transformers' kernel hub wraps
#: apply_rotary_pos_emb in Llama
HELPER = nn.ReLU()


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return HELPER(self.fc(x)) * 2


def test_a_global_module_is_not_a_layer_of_its_own():
    """Under Dynamo the relu of a global module was filed under the layer
    "G['HELPER']" (hf-llama's rotary embeddings under
    "G['__import_transformers_dot_models_dot_llama_dot_modeling_llama']
    .apply_rotary_pos_emb"), where from_torch files it under the module that
    called it: the model report's layers had other names."""
    from polyc.frontends.torch.export import layer_of

    model = nn.Sequential(Inner()).eval()
    x = torch.randn(2, 4)
    direct = polyc.from_torch(model, (x,))
    torch.compile(model, backend="polyc", options={"target": "interpret"})(x)
    (kernel,) = torch_compile.records()[0].kernels
    layers = [layer_of(s.origin) for s in kernel.statements]
    assert layers == [layer_of(s.origin) for s in direct.statements]
    assert layers == ["0.fc", "0.fc", "0", "0"]
