"""The op library at tensor level: functions on :class:`polyc.compute.Tensor` that
return Tensors and compose into one multi-op program (also ``polyc.ops.t``)::

    from polyc import compute as pc
    from polyc.ops import nn

    x = pc.placeholder("x", (1, 3, 32, 32))
    w = pc.placeholder("w", (8, 3, 3, 3))
    b = pc.placeholder("b", (8,))
    y = nn.relu(nn.conv2d(x, w, b, padding=1))
    kernel = pc.kernel("block", [y])

Layouts follow PyTorch (NCHW activations, OIHW conv weights, ``[out, in]`` linear
weights) and so do argument names and defaults. Every op names its output uniquely
(``relu_1``, ``relu_2``, ...) unless ``name=`` is given; temporaries are named after
the output (``softmax_1_max``). Dtypes: float32, float16, int8, int32 (and float64,
int64); int8 contractions and sums accumulate and return int32; comparisons and
logical ops make ``bool`` tensors, which ``where``, ``masked_fill`` and ``cast`` read.

Errors: :class:`~polyc.errors.ShapeError` names the dims that disagree,
:class:`~polyc.errors.DTypeError` names the cast that fixes a dtype mismatch,
:class:`~polyc.errors.ArgumentError` names an invalid argument and the accepted values.
"""

from __future__ import annotations

from polyc.ops._common import reset_names
from polyc.ops.elementwise import (
    abs,
    add,
    bias_add,
    cast,
    clamp,
    cos,
    div,
    erf,
    exp,
    gelu,
    hardsigmoid,
    hardswish,
    leaky_relu,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    reciprocal,
    relu,
    relu6,
    rsqrt,
    sigmoid,
    silu,
    sin,
    sqrt,
    sub,
    tanh,
)
from polyc.ops.gather import embedding, gather, index_select
from polyc.ops.linalg import batch_matmul, conv2d, conv_transpose2d, linear, matmul
from polyc.ops.logic import (
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    masked_fill,
    ne,
    where,
)
from polyc.ops.norm import (
    batch_stat_norm,
    group_norm,
    instance_norm,
    normalize,
    vector_norm,
)
from polyc.ops.pool import (
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool2d,
    max_pool2d,
    upsample_nearest2d,
)
from polyc.ops.quant import requantize
from polyc.ops.reduce import (
    amax,
    amin,
    batch_norm,
    layer_norm,
    log_softmax,
    max,
    mean,
    min,
    softmax,
    sum,
)
from polyc.ops.resize import interpolate
from polyc.ops.scan import (
    argmax,
    argmin,
    cumprod,
    cumsum,
    max_with_indices,
    min_with_indices,
)
from polyc.ops.shape import (
    broadcast_to,
    cat,
    concat,
    expand,
    flatten,
    pad,
    permute,
    reshape,
    select,
    slice,
    squeeze,
    transpose,
    unsqueeze,
    view,
)
from polyc.ops.sort import sort, topk

bmm = batch_matmul

__all__ = [
    # contractions
    "matmul",
    "batch_matmul",
    "bmm",
    "linear",
    "conv2d",
    "conv_transpose2d",
    # element-wise
    "relu",
    "relu6",
    "leaky_relu",
    "clamp",
    "gelu",
    "sigmoid",
    "silu",
    "hardswish",
    "hardsigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "erf",
    "sin",
    "cos",
    "neg",
    "abs",
    "reciprocal",
    "cast",
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "pow",
    "bias_add",
    # conditions as values
    "gt",
    "ge",
    "lt",
    "le",
    "eq",
    "ne",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "where",
    "masked_fill",
    # quantization
    "requantize",
    # reductions and normalisation
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "softmax",
    "log_softmax",
    "layer_norm",
    "batch_norm",
    "vector_norm",
    "normalize",
    "group_norm",
    "instance_norm",
    "batch_stat_norm",
    # scans and index reductions
    "cumsum",
    "cumprod",
    "argmax",
    "argmin",
    "max_with_indices",
    "min_with_indices",
    # small sorts
    "topk",
    "sort",
    # pooling
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "upsample_nearest2d",
    "interpolate",
    # data movement
    "permute",
    "transpose",
    "reshape",
    "view",
    "flatten",
    "squeeze",
    "unsqueeze",
    "expand",
    "broadcast_to",
    "slice",
    "select",
    "pad",
    "concat",
    "cat",
    "embedding",
    "gather",
    "index_select",
    "reset_names",
]
