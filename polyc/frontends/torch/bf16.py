"""bfloat16 models: each ATen op computed as PyTorch's CPU kernels compute it.

The rule (checked op by op against eager PyTorch in
``tests/frontends/torch/test_bfloat16.py``): an op reads its bfloat16 operands
widened to float32 (exactly), computes in float32 ("opmath") and rounds its result to
bfloat16 once, round to nearest even. So

- element-wise ops, reductions (``sum``, ``mean``), ``softmax``, ``layer_norm``,
  ``group_norm``, activations (``gelu``, ``silu``) and the rest run in float32
  between a widening of their bfloat16 operands and one rounding of their results
  (a Python scalar operand stays a float32 constant, as PyTorch's
  ``original_scalar_value<opmath_t>``);
- contractions (``linear``, ``addmm``, ``mm``, ``bmm``, ``matmul``, convolutions) keep
  their bfloat16 operands (the MAC array's bfloat16 mode) and accumulate in float32
  (:func:`polyc.ir.dtypes.accumulator`); a bias is added in float32 before the one
  rounding, as oneDNN's fused bias;
- ``scaled_dot_product_attention`` follows PyTorch's CPU flash-attention kernel:
  scores in float32, ``exp(s - max)`` in float32 summed in float32, the
  probabilities rounded to bfloat16 for the second product, and the normalisation
  ``(P @ V) / sum`` in float32 before the one rounding;
- ops that only move, select or compare elements (views, ``cat``, indexing,
  ``embedding``, ``max``/``min``, ``max_pool2d``, ``relu``, comparisons, ``where``,
  ``sort``/``topk``) run on bfloat16 directly: their results are operands, exactly
  (a comparison with a Python scalar rounds the scalar to bfloat16 first, as
  PyTorch does); so does ``pow``, which PyTorch computes on bfloat16 values
  (``x ** 3`` is ``(x * x) * x``, each product rounded);
- a batch norm after a bfloat16 convolution is not folded into it
  (:mod:`polyc.frontends.torch.fold`).

Results equal eager PyTorch bit for bit where the summation order matches and within
one bfloat16 unit in the last place otherwise (a float32 sum in another order, or a
float32 transcendental from another library, that lands on the other side of a
bfloat16 rounding boundary). Not reproduced: PyTorch's flash-attention kernel takes
``exp`` from a 20-bit polynomial (``exp_u20``) for whole vectors of 16 scores (the C
library's for the rest); over 16 keys or more polyc's attention is within one ULP of
its largest output element, not of each element.
"""

from __future__ import annotations

import numpy as np

from polyc.ir import dtypes
from polyc.lang.compute import Tensor
from polyc.ops import nn

#: ops run on bfloat16 values as they are: those whose results are elements of
#: their operands, comparisons (PyTorch rounds a scalar operand to bfloat16), and
#: ``pow`` (PyTorch's kernel multiplies bfloat16 values, rounding each product:
#: ``x ** 3`` rounds twice; a scalar exponent is rounded to bfloat16)
_IN_BFLOAT16_OPS = """
    _unsafe_view alias cat clone concat constant_pad_nd contiguous detach dropout
    embedding expand flatten gather index index_select lift_fresh_copy permute
    reshape select slice split split_with_sizes squeeze t transpose unflatten
    unsqueeze view pad masked_fill where max_pool2d max_pool2d_with_indices
    adaptive_max_pool2d amax amin max min maximum minimum relu argmax argmin
    argsort sort topk eq ne lt le gt ge pow
"""
IN_BFLOAT16 = {f"aten.{op}" for op in _IN_BFLOAT16_OPS.split()} | {"getitem"}
#: contractions: bfloat16 operands, float32 accumulation; the position and keyword
#: of the argument added in float32 (a bias, an attention mask), if any
CONTRACTIONS = {
    "aten.linear": (2, "bias"),
    "aten.addmm": (0, "self"),
    "aten.conv1d": (2, "bias"),
    "aten.conv2d": (2, "bias"),
    "aten.convolution": (2, "bias"),
    "aten.conv_transpose2d": (2, "bias"),
    "aten.mm": None,
    "aten.bmm": None,
    "aten.matmul": None,
    "aten.scaled_dot_product_attention": (3, "attn_mask"),
}


def applies(node) -> bool:
    """Whether ``node`` reads or makes a bfloat16 tensor."""
    import torch

    vals = [a.meta.get("val") for a in node.all_input_nodes] + [node.meta.get("val")]
    flat = [v for x in vals for v in (x if isinstance(x, (list, tuple)) else (x,))]
    return any(getattr(v, "dtype", None) == torch.bfloat16 for v in flat)


def lower(ctx, key: str, handler, args, kwargs):
    """``handler``'s lowering of a bfloat16 node by the rule of the module docstring."""
    if key in IN_BFLOAT16:
        return handler(ctx, *args, **kwargs)
    args, kwargs = list(args), dict(kwargs)
    if key in CONTRACTIONS:
        pos, word = CONTRACTIONS[key] or (None, None)
        if pos is not None and pos < len(args):
            args[pos] = _widen(ctx, args[pos])
        elif word in kwargs:
            kwargs[word] = _widen(ctx, kwargs[word])
    else:
        args, kwargs = _widen(ctx, args), _widen(ctx, kwargs)
        ctx.opmath = True
    name = ctx.name
    ctx.out_names[ctx.node] = ctx.sub("opmath")  # the rounding takes the name
    try:
        result = handler(ctx, *args, **kwargs)
    finally:
        ctx.out_names[ctx.node], ctx.opmath = name, False
    return _round(ctx, result, name)


def _widen(ctx, value):
    """bfloat16 tensors in ``value`` as float32 (exact), other values as they are."""
    if isinstance(value, Tensor):
        if value.dtype != dtypes.bfloat16:
            return value
        const = ctx.constant(value)
        if const is not None:  # a weight: widened once, at import
            return ctx.new_constant(f"{value.name}_f32", const.astype(np.float32))
        return nn.cast(value, "float32", name=ctx.sub(f"{value.name}_f32"))
    if isinstance(value, (list, tuple)):
        return type(value)(_widen(ctx, v) for v in value)
    if isinstance(value, dict):
        return {k: _widen(ctx, v) for k, v in value.items()}
    return value


def _round(ctx, result, name: str):
    """float32 results that torch says are bfloat16, rounded to bfloat16 once."""
    want = ctx.node.meta.get("val")
    if isinstance(result, Tensor):
        return _round_one(result, want, name)
    if isinstance(result, (list, tuple)):
        wants = want if isinstance(want, (list, tuple)) else [None] * len(result)
        return type(result)(
            _round_one(r, w, f"{name}_{n}")
            for n, (r, w) in enumerate(zip(result, wants))
        )
    return result


def _round_one(t, want, name: str):
    import torch

    if not isinstance(t, Tensor) or t.dtype == dtypes.bfloat16:
        return t
    if getattr(want, "dtype", None) != torch.bfloat16:
        return t
    return nn.cast(t, "bfloat16", name=name)


def to_numpy(t) -> np.ndarray:
    """A torch tensor as a numpy array; bfloat16 as ``ml_dtypes.bfloat16``, exactly
    (through float32: numpy has no bfloat16 of its own)."""
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        return t.float().numpy().astype(dtypes.bfloat16_numpy())
    return t.numpy()


def to_torch(a: np.ndarray):
    """A numpy array as a torch tensor; ``ml_dtypes.bfloat16`` as torch.bfloat16."""
    import torch

    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a)


def ulp_distance(got, want) -> np.ndarray:
    """How many bfloat16 values lie between ``got`` and ``want`` (bfloat16 arrays),
    element-wise: 0 where both are NaN; -0 and +0 are one apart."""
    a, b = (np.asarray(x).view(np.int16).astype(np.int32) for x in (got, want))
    a, b = (np.where(x < 0, -32769 - x, x) for x in (a, b))  # monotone order
    f32 = np.float32
    nan = np.isnan(np.asarray(got, f32)) & np.isnan(np.asarray(want, f32))
    return np.where(nan, 0, np.abs(a - b))
