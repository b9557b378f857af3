"""A stock ``nn.TransformerEncoderLayer`` in eval mode, and PyTorch's fused fast
path ``aten._transformer_encoder_layer_fwd`` that ``torch.compile`` reaches (see
tests/integrations/test_torch_compile.py), against torch eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.support.torchcheck import check


def layer(**options):
    torch.manual_seed(0)
    options = {"dropout": 0.0, "batch_first": True, **options}
    return nn.TransformerEncoderLayer(8, 2, 16, **options).eval()


class Fused(nn.Module):
    """Calls the fused op with the layer's weights, as the layer's fast path does."""

    def __init__(self, t: nn.TransformerEncoderLayer, mask_type=None):
        super().__init__()
        self.t, self.mask_type = t, mask_type

    def forward(self, x, mask=None):
        t, attn = self.t, self.t.self_attn
        return torch._transformer_encoder_layer_fwd(
            x,
            attn.embed_dim,
            attn.num_heads,
            attn.in_proj_weight,
            attn.in_proj_bias,
            attn.out_proj.weight,
            attn.out_proj.bias,
            t.activation_relu_or_gelu == 2,
            t.norm_first,
            t.norm1.eps,
            t.norm1.weight,
            t.norm1.bias,
            t.norm2.weight,
            t.norm2.bias,
            t.linear1.weight,
            t.linear1.bias,
            t.linear2.weight,
            t.linear2.bias,
            mask,
            self.mask_type,
        )


def test_stock_layer_interpreted_and_on_edge_npu():
    check(layer(), [torch.randn(2, 5, 8)], targets=("interpret", "edge-npu"))


@pytest.mark.parametrize(
    "options",
    [{"norm_first": True, "activation": "gelu"}, {"batch_first": False}],
    ids=["norm_first_gelu", "sequence_first"],
)
def test_stock_layer_variants(options):
    x = (
        torch.randn(2, 5, 8)
        if options.get("batch_first", True)
        else torch.randn(5, 2, 8)
    )
    check(layer(**options), [x], targets=("interpret",))


@pytest.mark.parametrize("norm_first", [False, True])
def test_fused_fast_path_decomposed(norm_first):
    fused = Fused(layer(norm_first=norm_first, activation="gelu"))
    check(fused, [torch.randn(2, 5, 8)], targets=("interpret", "host"))


def test_fused_fast_path_with_a_key_padding_mask():
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    check(Fused(layer(), mask_type=1), [torch.randn(2, 5, 8), padding])
