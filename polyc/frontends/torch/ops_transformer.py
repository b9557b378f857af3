"""PyTorch's fused eval fast path of ``nn.TransformerEncoderLayer``,
``aten._transformer_encoder_layer_fwd``, decomposed into the op library.

``torch.export`` traces the layer's Python path, but ``torch.compile`` (and a direct
call) reaches the fused op, whose arguments are the layer's weights. It computes,
for ``src`` of shape ``[B, S, E]`` (the fast path needs ``batch_first``)::

    sa(x) = out_proj(attention(split_heads(x @ qkv_weight.T + qkv_bias)))
    ff(x) = linear2(relu_or_gelu(linear1(x)))
    norm_first: x = x + sa(norm1(x)); x = x + ff(norm2(x))
    otherwise:  x = norm1(x + sa(x));  x = norm2(x + ff(x))

A boolean mask is True where attention is masked out: ``mask_type`` 0 is a
``[S, S]`` attention mask, 1 a ``[B, S]`` key padding mask, 2 a merged
``[B, H, S, S]`` one; a float mask is added to the scores.
"""

from __future__ import annotations

import math

from polyc.frontends.torch.registry import lowering
from polyc.ir import dtypes
from polyc.ops import logic, nn


@lowering("aten._transformer_encoder_layer_fwd", keep=True)
def transformer_encoder_layer(
    ctx,
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    # the layer takes its fast path only for batched [B, S, E] input
    embed, heads = int(embed_dim), int(num_heads)

    def sub(name):
        return ctx.sub(name)

    def norm(x, weight, bias, label):
        return nn.layer_norm(x, [embed], weight, bias, eps, name=sub(label))

    def attention(x):
        qkv = nn.linear(x, qkv_weight, qkv_bias, name=sub("qkv"))
        batch, seq = (int(d.const) for d in x.shape[:2])
        parts = []
        for n, label in enumerate("qkv"):
            part = nn.slice(qkv, 2, n * embed, (n + 1) * embed, 1, name=sub(label))
            part = nn.reshape(
                part, [batch, seq, heads, embed // heads], name=sub(f"{label}_heads")
            )
            parts.append(nn.permute(part, [0, 2, 1, 3], name=sub(f"{label}_bhsd")))
        q, k, v = parts
        kt = nn.transpose(k, -2, -1, name=sub("keyT"))
        scores = nn.matmul(q, kt, name=sub("scores"))
        scale = 1.0 / math.sqrt(embed // heads)
        scores = nn.mul(scores, scale, name=sub("scaled"))
        if mask is not None:
            scores = _masked(ctx, scores, mask, mask_type, batch, seq)
        probs = nn.softmax(scores, -1, name=sub("probs"))
        y = nn.matmul(probs, v, name=sub("context"))
        y = nn.permute(y, [0, 2, 1, 3], name=sub("context_bshd"))
        y = nn.reshape(y, [batch, seq, embed], name=sub("context_bse"))
        return nn.linear(y, proj_weight, proj_bias, name=sub("attn_out"))

    def feed_forward(x):
        h = nn.linear(x, ffn_weight_1, ffn_bias_1, name=sub("ffn1"))
        h = nn.gelu(h, name=sub("gelu")) if use_gelu else nn.relu(h, name=sub("relu"))
        return nn.linear(h, ffn_weight_2, ffn_bias_2, name=sub("ffn2"))

    x = src
    if norm_first:
        x = nn.add(
            x, attention(norm(x, norm_weight_1, norm_bias_1, "norm1")), name=sub("res1")
        )
        y = feed_forward(norm(x, norm_weight_2, norm_bias_2, "norm2"))
        return nn.add(x, y, name=ctx.name)
    x = norm(
        nn.add(x, attention(x), name=sub("res1")), norm_weight_1, norm_bias_1, "norm1"
    )
    y = nn.add(x, feed_forward(x), name=sub("res2"))
    return nn.layer_norm(y, [embed], norm_weight_2, norm_bias_2, eps, name=ctx.name)


def _masked(ctx, scores, mask, mask_type, batch, seq):
    """``scores`` with ``mask`` applied (True: masked out; a float mask adds)."""
    if mask_type == 1 or (
        mask_type is None and mask.ndim == 2 and mask.shape[0] != mask.shape[1]
    ):
        mask = nn.reshape(mask, [batch, 1, 1, seq], name=ctx.sub("padding"))
    if mask.dtype == dtypes.bool_:
        return logic.masked_fill(scores, mask, float("-inf"), name=ctx.sub("masked"))
    if mask.dtype != scores.dtype:
        mask = nn.cast(mask, scores.dtype, name=ctx.sub("mask_cast"))
    return nn.add(scores, mask, name=ctx.sub("masked"))
