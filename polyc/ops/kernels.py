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

from polyc import compute as pc
from polyc import dtypes
from polyc.ir import Kernel
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


def linear(input: Sequence, weight: Sequence, bias=True, dtype="float32") -> Kernel:
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


# element-wise ---------------------------------------------------------------------


def _unary(op: str) -> Callable[..., Kernel]:
    fn = getattr(nn, op)

    def wrapper(input: Sequence, dtype="float32", **kwargs) -> Kernel:
        return _kernel(
            op,
            lambda input: fn(input, name="out", **kwargs),
            input=(input, _dt(dtype)),
        )

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = (
        f"Element-wise ``{op}`` over an ``input`` of the given shape (sizes may be "
        f"symbolic); output ``out``. Keyword arguments go to "
        f":func:`polyc.ops.nn.{op}`."
    )
    return wrapper


relu = _unary("relu")
relu6 = _unary("relu6")
leaky_relu = _unary("leaky_relu")
clamp = _unary("clamp")
gelu = _unary("gelu")
sigmoid = _unary("sigmoid")
silu = _unary("silu")
hardswish = _unary("hardswish")
hardsigmoid = _unary("hardsigmoid")
tanh = _unary("tanh")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
neg = _unary("neg")
abs = _unary("abs")
reciprocal = _unary("reciprocal")


def _binary(op: str) -> Callable[..., Kernel]:
    fn = getattr(nn, op)

    def wrapper(input: Sequence, other, dtype="float32", **kwargs) -> Kernel:
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


def cast(input: Sequence, dtype="float32", to="int32") -> Kernel:
    """``out = input`` converted from ``dtype`` to ``to`` (C conversion)."""
    return _kernel(
        "cast", lambda input: nn.cast(input, to, name="out"), input=(input, _dt(dtype))
    )


def bias_add(input: Sequence, dim: int = 1, dtype="float32") -> Kernel:
    """``out = input + bias`` with ``bias`` 1-D along ``dim`` (channels by default)."""
    dim_size = input[dim]
    return _kernel(
        "bias_add",
        lambda input, bias: nn.bias_add(input, bias, dim, name="out"),
        input=(input, _dt(dtype)),
        bias=((dim_size,), _dt(dtype)),
    )


# reductions and normalisation ------------------------------------------------------


def _reduction(op: str) -> Callable[..., Kernel]:
    fn = getattr(nn, op)

    def wrapper(input: Sequence, dim=None, keepdim=False, dtype="float32") -> Kernel:
        return _kernel(
            op,
            lambda input: fn(input, dim, keepdim, name="out"),
            input=(input, _dt(dtype)),
        )

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = (
        f"``{op}`` of ``input`` over ``dim`` (int, tuple or None for all), keeping "
        f"reduced dims with ``keepdim``; output ``out``."
    )
    return wrapper


sum = _reduction("sum")
mean = _reduction("mean")
max = _reduction("max")
min = _reduction("min")


def softmax(input: Sequence, dim: int = -1, dtype="float32") -> Kernel:
    """``out = softmax(input, dim)`` (max, exp, sum, divide)."""
    return _kernel(
        "softmax",
        lambda input: nn.softmax(input, dim, name="out"),
        input=(input, _dt(dtype)),
    )


def log_softmax(input: Sequence, dim: int = -1, dtype="float32") -> Kernel:
    """``out = log_softmax(input, dim)``."""
    return _kernel(
        "log_softmax",
        lambda input: nn.log_softmax(input, dim, name="out"),
        input=(input, _dt(dtype)),
    )


def layer_norm(
    input: Sequence, normalized_shape, weight=True, bias=True, eps=1e-5, dtype="float32"
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


def batch_norm(input: Sequence, weight=True, bias=True, eps=1e-5, dtype="float32"):
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


# pooling ----------------------------------------------------------------------------


def _pool(op: str) -> Callable[..., Kernel]:
    fn = getattr(nn, op)

    def wrapper(input: Sequence, *args, dtype="float32", **kwargs) -> Kernel:
        return _kernel(
            op,
            lambda input: fn(input, *args, name="out", **kwargs),
            input=(input, _dt(dtype)),
        )

    wrapper.__name__ = wrapper.__qualname__ = op
    wrapper.__doc__ = (
        f"``F.{op}`` over an ``input`` of the given shape ([N, C, H, W] or [C, H, W]); "
        f"the other arguments are PyTorch's (see :func:`polyc.ops.nn.{op}`); output "
        "``out``."
    )
    return wrapper


max_pool2d = _pool("max_pool2d")
avg_pool2d = _pool("avg_pool2d")
adaptive_avg_pool2d = _pool("adaptive_avg_pool2d")
adaptive_max_pool2d = _pool("adaptive_max_pool2d")


# data movement ----------------------------------------------------------------------


def _movement(op: str) -> Callable[..., Kernel]:
    wrapper = _pool(op)
    wrapper.__doc__ = (
        f"``{op}`` of an ``input`` of the given shape; the other arguments are those "
        f"of :func:`polyc.ops.nn.{op}`; output ``out``."
    )
    return wrapper


transpose = _movement("transpose")
permute = _movement("permute")
reshape = _movement("reshape")
flatten = _movement("flatten")
squeeze = _movement("squeeze")
unsqueeze = _movement("unsqueeze")
expand = _movement("expand")
slice = _movement("slice")
pad = _movement("pad")


def concat(tensors: Sequence[Sequence], dim: int = 0, dtype="float32") -> Kernel:
    """``torch.cat`` of inputs ``tensors_0``, ``tensors_1``, ... (their shapes) along
    ``dim``; output ``out``."""
    dt = _dt(dtype)
    specs = {f"tensors_{n}": (tuple(s), dt) for n, s in enumerate(tensors)}
    return _kernel(
        "concat",
        lambda **parts: nn.concat(list(parts.values()), dim, name="out"),
        **specs,
    )


def embedding(input: Sequence, weight: Sequence, dtype="float32", index_dtype="int64"):
    """``F.embedding``: integer ``input`` (indices, ``index_dtype``) and ``weight``
    ``[num_embeddings, embedding_dim]``; output ``out`` ``[*input, embedding_dim]``."""
    return _kernel(
        "embedding",
        lambda input, weight: nn.embedding(input, weight, name="out"),
        input=(input, _dt(index_dtype)),
        weight=(weight, _dt(dtype)),
    )
