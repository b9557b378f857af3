"""The op library at kernel level: each function returns a one-op :class:`Kernel`.

Conventions (all wrappers):

- A tensor argument of the PyTorch functional op is given here by its **shape**, under
  the same argument name, and becomes an input array of that name: ``input``,
  ``weight``, ``bias``, ``other``, ... (matmul is the exception: ``matmul(M, N, K)``
  with inputs ``A`` and ``B``). An optional tensor (``bias``, a norm's ``weight``) is
  ``True``/``False``: its shape follows from the others.
- Non-tensor arguments (``stride``, ``dim``, ``eps``, ...) are PyTorch's, with its
  defaults.
- ``dtype`` is the element type of the inputs; the output is ``out``. Contractions
  and sums over int8 return int32 (``dtypes.accumulator``), and so does their bias.
- Sizes are ints, or symbolic (``compute.param("N")``) where the op stays affine
  (matmul, element-wise ops, the batch dim of most ops).

Example::

    k = polyc.ops.conv2d(input=(1, 3, 32, 32), weight=(8, 3, 3, 3), padding=1)
    polyc.interpret(k, {"input": x, "weight": w, "bias": b})["out"]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from polyc.ir import dtypes
from polyc.ir.kernel import Kernel
from polyc.lang import compute as pc
from polyc.ops import nn
from polyc.ops._common import accumulator


def _kernel(name: str, build: Callable[..., pc.Tensor], **inputs) -> Kernel:
    """Placeholders for ``inputs`` ({name: (shape, dtype) or None}), then
    ``build(**placeholders)`` named ``out``, as one kernel."""
    holders = {
        n: pc.placeholder(n, spec[0], spec[1])
        for n, spec in inputs.items()
        if spec is not None
    }
    out = build(**holders)
    return pc.kernel(name, [out], inputs=list(holders.values()))


def _dt(dtype) -> dtypes.DType:
    return dtypes.as_dtype(dtype)


def _opt(flag, shape, dtype):
    """An optional tensor's spec: None when absent, else (shape, dtype)."""
    if flag is False or flag is None:
        return None
    return (tuple(flag) if isinstance(flag, (tuple, list)) else shape, dtype)


# contractions ---------------------------------------------------------------------


def matmul(M, N, K, dtype="float32") -> Kernel:
    """``out[M, N] = A[M, K] @ B[K, N]``; sizes may be symbolic.

    Inputs ``A``, ``B``; output ``out`` (int32 for int8 inputs).
    """
    dt = _dt(dtype)
    return _kernel(
        "matmul",
        lambda A, B: nn.matmul(A, B, name="out"),
        A=((M, K), dt),
        B=((K, N), dt),
    )


def batch_matmul(B, M, N, K, dtype="float32") -> Kernel:
    """``out[B, M, N] = input[B, M, K] @ mat2[B, K, N]`` (``torch.bmm``).

    Inputs ``input``, ``mat2``; output ``out``.
    """
    dt = _dt(dtype)
    return _kernel(
        "batch_matmul",
        lambda input, mat2: nn.batch_matmul(input, mat2, name="out"),
        input=((B, M, K), dt),
        mat2=((B, K, N), dt),
    )


def linear(input: Sequence, weight: Sequence, bias=True, *, dtype="float32") -> Kernel:
    """``out = input @ weight.T + bias`` (``F.linear``).

    Args:
        input: shape ``[..., in_features]``.
        weight: shape ``[out_features, in_features]``.
        bias: True for a ``bias`` input ``[out_features]`` (int32 for int8).
    """
    dt = _dt(dtype)
    return _kernel(
        "linear",
        lambda input, weight, bias=None: nn.linear(input, weight, bias, name="out"),
        input=(input, dt),
        weight=(weight, dt),
        bias=_opt(bias, (weight[0],), accumulator(dt)),
    )


def conv2d(
    input: Sequence,
    weight: Sequence,
    bias=True,
    stride=1,
    padding=0,
    dilation=1,
    groups=1,
    *,
    dtype="float32",
    materialize_padding: bool = False,
) -> Kernel:
    """2-D convolution (``F.conv2d``); see :func:`polyc.ops.nn.conv2d`.

    Args:
        input: shape ``[N, C, H, W]``.
        weight: shape ``[O, C // groups, KH, KW]``.
        bias: True for a ``bias`` input ``[O]`` (int32 for int8).
    """
    dt = _dt(dtype)
    return _kernel(
        "conv2d",
        lambda input, weight, bias=None: nn.conv2d(
            input,
            weight,
            bias,
            stride,
            padding,
            dilation,
            groups,
            materialize_padding=materialize_padding,
            name="out",
        ),
        input=(input, dt),
        weight=(weight, dt),
        bias=_opt(bias, (weight[0],), accumulator(dt)),
    )


def conv_transpose2d(
    input: Sequence,
    weight: Sequence,
    bias=True,
    stride=1,
    padding=0,
    output_padding=0,
    groups=1,
    dilation=1,
    *,
    dtype="float32",
) -> Kernel:
    """Transposed 2-D convolution (``F.conv_transpose2d``).

    Args:
        input: shape ``[N, C, H, W]``.
        weight: shape ``[C, O // groups, KH, KW]``.
        bias: True for a ``bias`` input ``[O]`` (int32 for int8).
    """
    dt = _dt(dtype)
    return _kernel(
        "conv_transpose2d",
        lambda input, weight, bias=None: nn.conv_transpose2d(
            input,
            weight,
            bias,
            stride,
            padding,
            output_padding,
            groups,
            dilation,
            name="out",
        ),
        input=(input, dt),
        weight=(weight, dt),
        bias=_opt(bias, (weight[1] * groups,), accumulator(dt)),
    )


# one-input ops ----------------------------------------------------------------------

_DOCS = {
    "unary": "Element-wise ``{op}`` of ``input`` (sizes may be symbolic).",
    "reduction": "``{op}`` of ``input`` over ``dim`` (an int, a tuple, or None for "
    "all), keeping reduced dims with ``keepdim``.",
    "softmax": "``{op}`` of ``input`` along ``dim`` (max, exp, sum, divide).",
    "pool": "``F.{op}`` of ``input`` ([N, C, H, W] or [C, H, W]).",
    "movement": "``{op}`` of ``input``.",
}


def _single(op: str, kind: str) -> Callable[..., Kernel]:
    """The wrapper of an op with one tensor argument ``input``:
    ``op(input_shape, *args, dtype=..., **kwargs)``, the extra arguments being those
    of :mod:`polyc.ops.nn`'s op."""
    fn = getattr(nn, op)

    def wrapper(input: Sequence, *args, dtype="float32", **kwargs) -> Kernel:
        return _kernel(
            op,
            lambda input: fn(input, *args, name="out", **kwargs),
            input=(input, _dt(dtype)),
        )

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = (
        f"{_DOCS[kind].format(op=op)} Input ``input`` (its shape), output ``out``; "
        f"other arguments as :func:`polyc.ops.nn.{op}`."
    )
    return wrapper


relu = _single("relu", "unary")
relu6 = _single("relu6", "unary")
leaky_relu = _single("leaky_relu", "unary")
clamp = _single("clamp", "unary")
gelu = _single("gelu", "unary")
sigmoid = _single("sigmoid", "unary")
silu = _single("silu", "unary")
hardswish = _single("hardswish", "unary")
hardsigmoid = _single("hardsigmoid", "unary")
tanh = _single("tanh", "unary")
exp = _single("exp", "unary")
log = _single("log", "unary")
sqrt = _single("sqrt", "unary")
rsqrt = _single("rsqrt", "unary")
erf = _single("erf", "unary")
sin = _single("sin", "unary")
cos = _single("cos", "unary")
neg = _single("neg", "unary")
abs = _single("abs", "unary")
reciprocal = _single("reciprocal", "unary")
cast = _single("cast", "unary")

sum = _single("sum", "reduction")
mean = _single("mean", "reduction")
max = _single("max", "reduction")
min = _single("min", "reduction")
softmax = _single("softmax", "softmax")
log_softmax = _single("log_softmax", "softmax")

max_pool2d = _single("max_pool2d", "pool")
avg_pool2d = _single("avg_pool2d", "pool")
adaptive_avg_pool2d = _single("adaptive_avg_pool2d", "pool")
adaptive_max_pool2d = _single("adaptive_max_pool2d", "pool")
upsample_nearest2d = _single("upsample_nearest2d", "pool")

transpose = _single("transpose", "movement")
permute = _single("permute", "movement")
reshape = _single("reshape", "movement")
flatten = _single("flatten", "movement")
squeeze = _single("squeeze", "movement")
unsqueeze = _single("unsqueeze", "movement")
expand = _single("expand", "movement")
slice = _single("slice", "movement")
pad = _single("pad", "movement")


def _binary(op: str) -> Callable[..., Kernel]:
    fn = getattr(nn, op)

    def wrapper(input: Sequence, other, *, dtype="float32", **kwargs) -> Kernel:
        dt = _dt(dtype)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            scalar = other
            return _kernel(
                op,
                lambda input: fn(input, scalar, name="out", **kwargs),
                input=(input, dt),
            )
        return _kernel(
            op,
            lambda input, other: fn(input, other, name="out", **kwargs),
            input=(input, dt),
            other=(other, dt),
        )

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = (
        f"Element-wise ``{op}`` with numpy broadcasting: inputs ``input`` and "
        "``other`` (their shapes), or ``input`` and a Python number ``other``; "
        f"output ``out``. Keyword arguments go to :func:`polyc.ops.nn.{op}`."
    )
    return wrapper


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
maximum = _binary("maximum")
minimum = _binary("minimum")
pow = _binary("pow")


def bias_add(input: Sequence, dim: int = 1, *, dtype="float32") -> Kernel:
    """``out = input + bias`` with ``bias`` 1-D along ``dim`` (channels by default).

    Inputs ``input`` and ``bias`` (``[input[dim]]``); output ``out``."""
    return _kernel(
        "bias_add",
        lambda input, bias: nn.bias_add(input, bias, dim, name="out"),
        input=(input, _dt(dtype)),
        bias=((input[dim],), _dt(dtype)),
    )


# normalisation --------------------------------------------------------------------


def layer_norm(
    input: Sequence,
    normalized_shape,
    weight=True,
    bias=True,
    eps=1e-5,
    *,
    dtype="float32",
) -> Kernel:
    """``F.layer_norm``: inputs ``input``, ``weight`` and ``bias`` (both of
    ``normalized_shape``, when True); output ``out``."""
    dt = _dt(dtype)
    norm = (
        (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    )
    norm = tuple(norm)
    return _kernel(
        "layer_norm",
        lambda input, weight=None, bias=None: nn.layer_norm(
            input, norm, weight, bias, eps, name="out"
        ),
        input=(input, dt),
        weight=_opt(weight, norm, dt),
        bias=_opt(bias, norm, dt),
    )


def batch_norm(input: Sequence, weight=True, bias=True, eps=1e-5, *, dtype="float32"):
    """Inference ``F.batch_norm``: inputs ``input`` ``[N, C, ...]``,
    ``running_mean``, ``running_var``, ``weight``, ``bias`` (each ``[C]``); output
    ``out``."""
    dt = _dt(dtype)
    c = (input[1],)
    return _kernel(
        "batch_norm",
        lambda input, running_mean, running_var, weight=None, bias=None: nn.batch_norm(
            input, running_mean, running_var, weight, bias, eps=eps, name="out"
        ),
        input=(input, dt),
        running_mean=(c, dt),
        running_var=(c, dt),
        weight=_opt(weight, c, dt),
        bias=_opt(bias, c, dt),
    )


# several inputs -------------------------------------------------------------------


def concat(tensors: Sequence[Sequence], dim: int = 0, *, dtype="float32") -> Kernel:
    """``torch.cat`` of inputs ``tensors_0``, ``tensors_1``, ... (their shapes) along
    ``dim``; output ``out``."""
    dt = _dt(dtype)
    specs = {f"tensors_{n}": (tuple(s), dt) for n, s in enumerate(tensors)}
    return _kernel(
        "concat",
        lambda **parts: nn.concat(list(parts.values()), dim, name="out"),
        **specs,
    )


def embedding(
    input: Sequence, weight: Sequence, *, dtype="float32", index_dtype="int64"
):
    """``F.embedding``: integer ``input`` (indices, ``index_dtype``) and ``weight``
    ``[num_embeddings, embedding_dim]``; output ``out`` ``[*input, embedding_dim]``."""
    return _kernel(
        "embedding",
        lambda input, weight: nn.embedding(input, weight, name="out"),
        input=(input, _dt(index_dtype)),
        weight=(weight, _dt(dtype)),
    )


# quantization ---------------------------------------------------------------------


def requantize(
    input: Sequence,
    multiplier=1.0,
    zero_point: int = 0,
    *,
    axis: int = 1,
    qmin: int = -128,
    qmax: int = 127,
    relu: bool = False,
) -> Kernel:
    """int32 ``input`` requantized to int8 ``out``; see
    :func:`polyc.ops.quant.requantize`.

    Args:
        input: the accumulator's shape (int32).
        multiplier: a float (per tensor), or True for a float32 input
            ``multiplier`` with one value per channel along ``axis``.
    """
    per_channel = multiplier is True

    def build(input, multiplier_=None):
        return nn.requantize(
            input,
            multiplier_ if per_channel else multiplier,
            zero_point,
            axis=axis,
            qmin=qmin,
            qmax=qmax,
            relu=relu,
            name="out",
        )

    return _kernel(
        "requantize",
        lambda input, multiplier=None: build(input, multiplier),
        input=(input, dtypes.int32),
        multiplier=((input[axis],), dtypes.float32) if per_channel else None,
    )
