"""ATen op -> :mod:`polyc.ops.nn`: the lowering of each supported op.

Each handler takes the lowering context ``ctx`` and the node's arguments as ATen's
schema names them (tensors already lowered to :class:`polyc.compute.Tensor`), and
returns a Tensor (or a tuple for multi-output ops) named ``ctx.name``. Handlers only
translate arguments: the computation is the op library's. ``KEEP`` lists the
composite ops that stay whole through torch's decompositions because polyc lowers
them directly (so convolution, linear, layer norm, softmax and attention remain
recognisable to the scheduler). The other families live in ``ops_compare``,
``ops_scan``, ``ops_norm``, ``ops_resize`` and ``ops_transformer``; all register in
:mod:`polyc.frontends.torch.registry`.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from polyc.frontends.torch.registry import KEEP, LOWERINGS, lowering
from polyc.ir import dtypes
from polyc.lang.compute import Tensor
from polyc.ops import nn, norm

KEEP.extend(
    (
        "aten.conv1d",
        "aten.conv2d",
        "aten.conv_transpose2d",
        "aten.linear",
        "aten.matmul",
        "aten.layer_norm",
        "aten.softmax",
        "aten.log_softmax",
        "aten.scaled_dot_product_attention",
        "aten.silu",
        "aten.hardswish",
        "aten.hardsigmoid",
        "aten.relu6",
        "aten.adaptive_avg_pool2d",
        "aten.max_pool2d",
        "aten.flatten",
        "aten.t",
        "aten.transpose",
        "aten.reshape",
        "aten.unflatten",
        "aten.contiguous",
    )
)


def _alias(ctx, x, *args, **kwargs):
    return x


for _p in (
    "aten.clone",
    "aten.contiguous",
    "aten.alias",
    "aten.detach",
    "aten.lift_fresh_copy",
):
    LOWERINGS[_p] = _alias


def _check_only(ctx, *args, **kwargs):
    """Runtime assertions torch.export records (shapes and dtypes are static here)."""
    return None


for _p in (
    "aten._assert_tensor_metadata",
    "aten._assert_async",
    "aten._assert_scalar",
    "aten._functional_assert_async",
    "aten.sym_constrain_range",
    "aten.sym_constrain_range_for_size",
):
    LOWERINGS[_p] = _check_only


def _pair(v, n=2):
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    return v * n if len(v) == 1 else v


def _promote(ctx, *values):
    """Cast tensor operands to the node's result dtype (torch's type promotion)."""
    want = ctx.result_dtype()
    if want is None:
        return values
    return tuple(
        nn.cast(v, want, name=ctx.sub(f"cast{n}"))
        if isinstance(v, Tensor) and v.dtype != want
        else v
        for n, v in enumerate(values)
    )


# structure ---------------------------------------------------------------------


@lowering("getitem")
def getitem(ctx, value, index):
    item = value[index]
    if item is None and ctx.node.users:
        raise ctx.error(
            f"output {index} of {ctx.node.args[0].name} is not computed by polyc "
            "because it is an auxiliary result (pooling indices or normalisation "
            "statistics)",
            "Use only the op's main output",
        )
    return item


@lowering("aten.dropout")
def dropout(ctx, x, p, train):
    if train and p > 0:
        raise ctx.error(
            "dropout in training mode is random", "Call module.eval() before import"
        )
    return x


@lowering("aten._to_copy")
def to_copy(ctx, x, *, dtype=None, **_):
    if dtype is None:
        return x
    return nn.cast(x, dtype, name=ctx.name)


# contractions ------------------------------------------------------------------


@lowering("aten.conv2d")
def conv2d(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if isinstance(padding, (list, tuple)):
        padding = _pair(padding)
    return nn.conv2d(
        x,
        weight,
        bias,
        stride=_pair(stride),
        padding=padding,
        dilation=_pair(dilation),
        groups=groups,
        name=ctx.name,
    )


@lowering("aten.conv1d")
def conv1d(ctx, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    x4 = nn.unsqueeze(x, -2, name=ctx.sub("in2d"))
    w4 = nn.unsqueeze(weight, -2, name=ctx.sub("w2d"))
    pad = padding if isinstance(padding, str) else (0, _pair(padding, 1)[0])
    y = nn.conv2d(
        x4,
        w4,
        bias,
        stride=(1, _pair(stride, 1)[0]),
        padding=pad,
        dilation=(1, _pair(dilation, 1)[0]),
        groups=groups,
        name=ctx.sub("2d"),
    )
    return nn.squeeze(y, -2, name=ctx.name)


@lowering("aten.convolution")
def convolution(
    ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    if transposed:
        if x.ndim != 4:
            raise ctx.error(
                f"a {x.ndim - 2}-D transposed convolution is not supported because "
                "polyc lowers 2-D transposed convolutions",
                "Use ConvTranspose2d",
            )
        return conv_transpose2d(
            ctx, x, weight, bias, stride, padding, output_padding, groups, dilation
        )
    if x.ndim == 3:
        return conv1d(ctx, x, weight, bias, stride[0], padding[0], dilation[0], groups)
    if x.ndim != 4:
        raise ctx.error(
            f"a {x.ndim - 2}-D convolution is not supported because polyc lowers 1-D "
            "and 2-D convolutions",
            "Use Conv1d or Conv2d",
        )
    return conv2d(ctx, x, weight, bias, stride, padding, dilation, groups)


@lowering("aten.conv_transpose2d")
def conv_transpose2d(
    ctx,
    x,
    weight,
    bias=None,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
):
    return nn.conv_transpose2d(
        x,
        weight,
        bias,
        stride=_pair(stride),
        padding=_pair(padding),
        output_padding=_pair(output_padding),
        groups=groups,
        dilation=_pair(dilation),
        name=ctx.name,
    )


@lowering("aten.linear")
def linear(ctx, x, weight, bias=None):
    return nn.linear(x, weight, bias, name=ctx.name)


@lowering("aten.mm", "aten.matmul")
def matmul(ctx, a, b):
    return nn.matmul(*_promote(ctx, a, b), name=ctx.name)


@lowering("aten.bmm")
def bmm(ctx, a, b):
    return nn.batch_matmul(*_promote(ctx, a, b), name=ctx.name)


@lowering("aten.addmm")
def addmm(ctx, bias, m1, m2, *, beta=1, alpha=1):
    prod = nn.matmul(m1, m2, name=ctx.sub("mm"))
    if alpha != 1:
        prod = nn.mul(prod, alpha, name=ctx.sub("alpha"))
    if beta == 0:
        return nn.mul(prod, 1, name=ctx.name)
    if beta != 1:
        bias = nn.mul(bias, beta, name=ctx.sub("beta"))
    return nn.add(prod, bias, name=ctx.name)


@lowering("aten.scaled_dot_product_attention")
def sdpa(
    ctx,
    q,
    k,
    v,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    *,
    scale=None,
    enable_gqa=False,
):
    """``softmax(q @ k^T * scale + mask) @ v``, as torch's math reference."""
    if dropout_p:
        raise ctx.error(
            f"attention dropout (dropout_p={dropout_p}) is random",
            "Pass dropout_p=0 (call module.eval())",
        )
    if q.shape[:-2] != k.shape[:-2]:
        raise ctx.error(
            "grouped-query attention (fewer key/value heads) is not supported",
            "Repeat the key and value heads to match the query heads",
        )
    scale = 1.0 / math.sqrt(int(q.shape[-1].const)) if scale is None else scale
    kt = nn.transpose(k, -2, -1, name=ctx.sub("keyT"))
    scores = nn.matmul(q, kt, name=ctx.sub("scores"))
    scores = nn.mul(scores, float(scale), name=ctx.sub("scaled"))
    rows, cols = int(q.shape[-2].const), int(k.shape[-2].const)
    if is_causal:
        causal = np.triu(np.full((rows, cols), -np.inf, np.float32), 1)
        scores = nn.add(
            scores, ctx.new_constant("causal", causal), name=ctx.sub("causal_scores")
        )
    if attn_mask is not None and not _masks_nothing(ctx.constant(attn_mask)):
        mask = attn_mask
        if mask.dtype.name == "bool":
            value = ctx.constant(mask)
            if value is None:
                raise ctx.error(
                    "a boolean attention mask that is not a constant of the model "
                    "is not supported",
                    "Pass the mask as a float tensor (0 where attended, -inf "
                    "elsewhere)",
                )
            additive = np.where(value, 0.0, -np.inf).astype(scores.dtype.numpy)
            mask = ctx.new_constant("mask", additive)
        scores = nn.add(scores, mask, name=ctx.sub("masked"))
    if q.dtype == dtypes.bfloat16:
        return _sdpa_bfloat16(ctx, scores, v)
    probs = nn.softmax(scores, -1, name=ctx.sub("probs"))
    return nn.matmul(probs, v, name=ctx.name)


def _sdpa_bfloat16(ctx, scores, v):
    """The rest of bfloat16 attention as PyTorch's CPU flash-attention kernel does
    it (``scores`` in float32): ``e = exp(s - max)`` and its sum in float32, ``e``
    rounded to bfloat16 for the product with ``v`` (float32 sums), then divided by
    the sum in float32 (:mod:`polyc.frontends.torch.bf16` rounds the result)."""
    top = nn.amax(scores, -1, keepdim=True, name=ctx.sub("max"))
    e = nn.exp(nn.sub(scores, top, name=ctx.sub("shifted")), name=ctx.sub("exp"))
    total = nn.sum(e, -1, keepdim=True, name=ctx.sub("sum"))
    probs = nn.cast(e, "bfloat16", name=ctx.sub("probs"))
    weighted = nn.matmul(probs, v, name=ctx.sub("weighted"))
    return nn.div(weighted, total, name=ctx.name)


def _masks_nothing(value: np.ndarray | None) -> bool:
    """Whether a constant attention mask leaves every score as it is: all True
    (boolean) or all zero (additive). ``transformers`` builds such a mask from
    ``arange`` under ``torch.export`` and none under Dynamo; dropping it gives
    ``from_torch`` and ``torch.compile`` the same kernel (``x + 0`` is ``x``)."""
    if value is None:
        return False
    return bool(value.all()) if value.dtype == np.bool_ else not value.any()


# element-wise --------------------------------------------------------------------


def _unary(fn):
    def handler(ctx, x):
        return fn(x, name=ctx.name)

    handler.__name__ = fn.__name__
    return handler


for _p, _fn in {
    "aten.relu": nn.relu,
    "aten.relu6": nn.relu6,
    "aten.silu": nn.silu,
    "aten.sigmoid": nn.sigmoid,
    "aten.tanh": nn.tanh,
    "aten.hardswish": nn.hardswish,
    "aten.hardsigmoid": nn.hardsigmoid,
    "aten.exp": nn.exp,
    "aten.log": nn.log,
    "aten.sqrt": nn.sqrt,
    "aten.rsqrt": nn.rsqrt,
    "aten.erf": nn.erf,
    "aten.neg": nn.neg,
    "aten.abs": nn.abs,
    "aten.reciprocal": nn.reciprocal,
    "aten.sin": nn.sin,
    "aten.cos": nn.cos,
}.items():
    LOWERINGS[_p] = _unary(_fn)


@lowering("aten.gelu")
def gelu(ctx, x, *, approximate="none"):
    return nn.gelu(x, approximate=approximate, name=ctx.name)


@lowering("aten.leaky_relu")
def leaky_relu(ctx, x, negative_slope=0.01):
    return nn.leaky_relu(x, negative_slope, name=ctx.name)


@lowering("aten.hardtanh")
def hardtanh(ctx, x, min_val=-1.0, max_val=1.0):
    return nn.clamp(x, min_val, max_val, name=ctx.name)


@lowering("aten.clamp")
def clamp(ctx, x, min=None, max=None):
    return nn.clamp(x, min, max, name=ctx.name)


@lowering("aten.add")
def add(ctx, a, b, alpha=1):
    return nn.add(*_promote(ctx, a, b), alpha=alpha, name=ctx.name)


@lowering("aten.sub")
def sub(ctx, a, b, alpha=1):
    return nn.sub(*_promote(ctx, a, b), alpha=alpha, name=ctx.name)


@lowering("aten.rsub")
def rsub(ctx, a, b, alpha=1):
    return nn.sub(*_promote(ctx, b, a), alpha=alpha, name=ctx.name)


@lowering("aten.mul")
def mul(ctx, a, b):
    return nn.mul(*_promote(ctx, a, b), name=ctx.name)


@lowering("aten.div")
def div(ctx, a, b, *, rounding_mode=None):
    a, b = _promote(ctx, a, b)
    return nn.div(a, b, rounding_mode=rounding_mode, name=ctx.name)


@lowering("aten.pow")
def pow_(ctx, a, b):
    return nn.pow(*_promote(ctx, a, b), name=ctx.name)


@lowering("aten.maximum")
def maximum(ctx, a, b):
    return nn.maximum(*_promote(ctx, a, b), name=ctx.name)


@lowering("aten.minimum")
def minimum(ctx, a, b):
    return nn.minimum(*_promote(ctx, a, b), name=ctx.name)


# normalisation and reductions ------------------------------------------------------


@lowering("aten.layer_norm")
def layer_norm(ctx, x, normalized_shape, weight=None, bias=None, eps=1e-5, _c=True):
    return nn.layer_norm(x, list(normalized_shape), weight, bias, eps, name=ctx.name)


@lowering("aten.native_layer_norm")
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    return (layer_norm(ctx, x, normalized_shape, weight, bias, eps), None, None)


@lowering("aten._native_batch_norm_legit_no_training")
def batch_norm_inference(ctx, x, weight, bias, mean, var, momentum, eps):
    y = _batch_norm(ctx, x, weight, bias, mean, var, eps)
    return (y, None, None)


def _batch_norm(ctx, x, weight, bias, mean, var, eps):
    """Inference batch norm; for a bfloat16 model (constant parameters) as
    PyTorch's CPU kernel computes it: ``x * alpha[c] + beta[c]`` in float32 with
    ``alpha = 1 / sqrt(var + eps) * weight`` and ``beta = bias - mean * alpha``
    (float32, computed here, at import)."""
    params = [ctx.constant(t) if t is not None else None for t in (weight, bias)]
    stats = [ctx.constant(mean), ctx.constant(var)]
    if (
        not ctx.opmath
        or any(v is None for v in stats)
        or (any(p is None for p, t in zip(params, (weight, bias)) if t is not None))
    ):
        return nn.batch_norm(x, mean, var, weight, bias, eps=eps, name=ctx.name)
    f = np.float32
    mu, sigma2 = (np.asarray(v, dtype=f) for v in stats)
    alpha = f(1) / np.sqrt(sigma2 + f(eps))
    if params[0] is not None:
        alpha = alpha * np.asarray(params[0], dtype=f)
    beta = -(mu * alpha) if params[1] is None else params[1] - mu * alpha
    shape = (-1,) + (1,) * (x.ndim - 2)
    a = ctx.new_constant("alpha", alpha.astype(f).reshape(shape))
    b = ctx.new_constant("beta", np.asarray(beta, dtype=f).reshape(shape))
    return nn.add(nn.mul(x, a, name=ctx.sub("scaled")), b, name=ctx.name)


@lowering("aten.batch_norm")
def batch_norm(ctx, x, weight, bias, mean, var, training, momentum, eps, _cudnn=True):
    if mean is None and var is None:
        # no running statistics (track_running_stats=False): batch statistics,
        # in eval mode too, and nothing to update
        return norm.batch_stat_norm(x, weight, bias, eps, name=ctx.name)
    if training:
        raise ctx.error(
            "batch norm in training mode normalises with batch statistics and "
            "updates the running ones",
            "Call module.eval() before import",
        )
    return _batch_norm(ctx, x, weight, bias, mean, var, eps)


@lowering("aten.softmax", "aten._softmax")
def softmax(ctx, x, dim, dtype=None):
    if dtype is not None and not isinstance(dtype, bool):
        x = nn.cast(x, dtype, name=ctx.sub("cast"))
    return nn.softmax(x, dim, name=ctx.name)


@lowering("aten.log_softmax", "aten._log_softmax")
def log_softmax(ctx, x, dim, dtype=None):
    if dtype is not None and not isinstance(dtype, bool):
        x = nn.cast(x, dtype, name=ctx.sub("cast"))
    return nn.log_softmax(x, dim, name=ctx.name)


def _reduction(fn):
    def handler(ctx, x, dim=None, keepdim=False, *, dtype=None):
        if dtype is None and x.dtype.name == "bool":
            dtype = ctx.node.meta["val"].dtype  # torch sums bool as int64
        if dtype is not None:
            x = nn.cast(x, dtype, name=ctx.sub("cast"))
        dims = None if dim is None or len(dim) == 0 else list(dim)
        return fn(x, dims, keepdim, name=ctx.name)

    handler.__name__ = fn.__name__
    return handler


LOWERINGS["aten.mean"] = _reduction(nn.mean)
LOWERINGS["aten.sum"] = _reduction(nn.sum)
LOWERINGS["aten.amax"] = _reduction(nn.amax)
LOWERINGS["aten.amin"] = _reduction(nn.amin)


# pooling -------------------------------------------------------------------------


@lowering("aten.max_pool2d")
def max_pool2d(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return nn.max_pool2d(
        x,
        _pair(kernel_size),
        _pair(stride) if stride else None,
        _pair(padding),
        _pair(dilation),
        ceil_mode,
        name=ctx.name,
    )


@lowering("aten.max_pool2d_with_indices")
def max_pool2d_with_indices(
    ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    return (max_pool2d(ctx, x, kernel_size, stride, padding, dilation, ceil_mode), None)


@lowering("aten.avg_pool2d")
def avg_pool2d(
    ctx,
    x,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return nn.avg_pool2d(
        x,
        _pair(kernel_size),
        _pair(stride) if stride else None,
        _pair(padding),
        ceil_mode,
        count_include_pad,
        divisor_override,
        name=ctx.name,
    )


@lowering("aten.adaptive_avg_pool2d", "aten._adaptive_avg_pool2d")
def adaptive_avg_pool2d(ctx, x, output_size):
    return nn.adaptive_avg_pool2d(x, _pair(output_size), name=ctx.name)


@lowering("aten.adaptive_max_pool2d")
def adaptive_max_pool2d(ctx, x, output_size):
    return (nn.adaptive_max_pool2d(x, _pair(output_size), name=ctx.name), None)


@lowering("aten.upsample_nearest2d")
def upsample_nearest2d(ctx, x, output_size=None, *scales):
    factors = scales[0] if len(scales) == 1 else scales
    if any(f is not None and float(f) != int(f) for f in factors or ()):
        raise ctx.error(
            f"nearest upsampling by the non-integer scale {factors} is not supported "
            "because torch then rounds source rows by the scale, not by the sizes",
            "Pass size= (or an integer scale_factor)",
        )
    size = tuple(int(d) for d in ctx.node.meta["val"].shape[-2:])
    return nn.upsample_nearest2d(x, size=size, name=ctx.name)


# shapes --------------------------------------------------------------------------


def _same_shape(x: Tensor, shape) -> bool:
    return len(shape) == x.ndim and all(
        d.is_constant and int(d.const) == int(s) for d, s in zip(x.shape, shape)
    )


@lowering("aten.view", "aten._unsafe_view", "aten.reshape")
def reshape(ctx, x, shape):
    val = ctx.node.meta.get("val")
    target = tuple(val.shape) if hasattr(val, "shape") else tuple(shape)
    if _same_shape(x, target):
        return x
    return nn.reshape(x, [int(s) for s in target], name=ctx.name)


@lowering("aten.unflatten")
def unflatten(ctx, x, dim, sizes):
    return reshape(ctx, x, None)


@lowering("aten.flatten")
def flatten(ctx, x, start_dim=0, end_dim=-1):
    return reshape(ctx, x, None)


@lowering("aten.unsqueeze")
def unsqueeze(ctx, x, dim):
    return nn.unsqueeze(x, dim, name=ctx.name)


@lowering("aten.squeeze")
def squeeze(ctx, x, dim=None):
    return reshape(ctx, x, None)


@lowering("aten.permute")
def permute(ctx, x, dims):
    dims = [d % x.ndim for d in dims]
    if dims == list(range(x.ndim)):
        return x
    return nn.permute(x, dims, name=ctx.name)


@lowering("aten.transpose")
def transpose(ctx, x, dim0, dim1):
    if dim0 % x.ndim == dim1 % x.ndim:
        return x
    return nn.transpose(x, dim0, dim1, name=ctx.name)


@lowering("aten.t")
def t(ctx, x):
    return x if x.ndim < 2 else nn.transpose(x, 0, 1, name=ctx.name)


@lowering("aten.expand")
def expand(ctx, x, size, *, implicit=False):
    if _same_shape(x, [s if s != -1 else x.shape[k].const for k, s in enumerate(size)]):
        return x
    return nn.expand(x, list(size), name=ctx.name)


@lowering("aten.select")
def select(ctx, x, dim, index):
    return nn.select(x, dim, index, name=ctx.name)


@lowering("aten.slice")
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    size = int(x.shape[dim].const)
    lo, hi, st = slice(start, end, step).indices(size)
    if (lo, hi, st) == (0, size, 1):
        return x
    return nn.slice(x, dim, lo, hi, st, name=ctx.name)


@lowering("aten.split_with_sizes")
def split_with_sizes(ctx, x, sizes, dim=0):
    """Consecutive slices of ``sizes`` along ``dim`` (a tuple, read by getitem)."""
    parts, lo = [], 0
    for n, size in enumerate(sizes):
        hi = lo + int(size)
        if len(sizes) == 1:
            parts.append(x)
        else:
            parts.append(nn.slice(x, dim, lo, hi, 1, name=ctx.sub(f"part{n}")))
        lo = hi
    return tuple(parts)


@lowering("aten.split")
def split(ctx, x, split_size, dim=0):
    """``torch.split`` by one size (the last part takes what remains) or by a
    list of sizes."""
    if not isinstance(split_size, int):
        return split_with_sizes(ctx, x, split_size, dim)
    total = int(x.shape[dim].const)
    sizes = [min(split_size, total - lo) for lo in range(0, total, split_size)]
    return split_with_sizes(ctx, x, sizes or [total], dim)


@lowering("aten.cat", "aten.concat")
def cat(ctx, tensors, dim=0):
    tensors = _promote(ctx, *tensors)
    return nn.concat(list(tensors), dim, name=ctx.name)


@lowering("aten.constant_pad_nd")
def constant_pad(ctx, x, pad, value=0):
    return nn.pad(x, list(pad), value=value, name=ctx.name)


@lowering("aten.pad")
def pad(ctx, x, pad, mode="constant", value=None):
    if mode != "constant":
        raise ctx.error(
            f"padding mode {mode!r} is not supported because polyc pads with a "
            "constant",
            "Use mode='constant'",
        )
    return constant_pad(ctx, x, pad, 0 if value is None else value)


LOWERINGS[operator.getitem.__name__] = getitem
