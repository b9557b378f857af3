"""Element-wise ops: unary math, activations, broadcasting binary ops, casts.

Each op is one statement ``out[ix] = f(x[ix], ...)``. Binary ops follow numpy's
broadcasting rules and accept Python numbers on either side; both tensor operands must
share a dtype (a DTypeError names the cast that fixes a mismatch).
"""

from __future__ import annotations

import math

from polyc.errors import DTypeError, ShapeError
from polyc.ir import dtypes
from polyc.ir.expr import Expr, binary, select, unary
from polyc.ir.expr import cast as cast_expr
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    DTYPES,
    FLOATS,
    SIGNED,
    axis,
    broadcast,
    check_dtype,
    choice,
    element,
    fresh,
    number,
    operand,
    same_dtype,
    scalar,
    shape_text,
    tensor,
)


def map1(op: str, x: Tensor, fn, name: str | None, allowed=DTYPES) -> Tensor:
    """``out[ix] = fn(x[ix])`` over ``x``'s shape."""
    x = tensor(op, x)
    check_dtype(op, x, allowed)
    return pc.compute(fresh(op, name), x.shape, lambda *ix: fn(x[ix]))


def _c(x: Expr, value: float) -> Expr:
    """``value`` as a constant of ``x``'s dtype."""
    return pc.const(value, x.dtype)


# unary ------------------------------------------------------------------------------


def relu(input: Tensor, name: str | None = None) -> Tensor:
    """``max(input, 0)``."""
    return map1("relu", input, lambda v: binary("max", v, _c(v, 0)), name, SIGNED)


def relu6(input: Tensor, name: str | None = None) -> Tensor:
    """``min(max(input, 0), 6)``."""
    return map1(
        "relu6",
        input,
        lambda v: binary("min", binary("max", v, _c(v, 0)), _c(v, 6)),
        name,
        SIGNED,
    )


def leaky_relu(input: Tensor, negative_slope: float = 0.01, name=None) -> Tensor:
    """``input`` where ``input > 0``, else ``negative_slope * input``."""
    negative_slope = number("leaky_relu", negative_slope, "negative_slope")
    return map1(
        "leaky_relu",
        input,
        lambda v: select(v > _c(v, 0), v, v * _c(v, negative_slope)),
        name,
        FLOATS,
    )


def clamp(input: Tensor, min: float | None = None, max: float | None = None, name=None):
    """``min(max(input, min), max)``; either bound may be None (PyTorch's clamp)."""
    input = tensor("clamp", input)

    def fn(v):
        if min is not None:
            v = binary("max", v, scalar("clamp", min, input))
        if max is not None:
            v = binary("min", v, scalar("clamp", max, input))
        return v

    return map1("clamp", input, fn, name, SIGNED)


def gelu(input: Tensor, approximate: str = "none", name: str | None = None) -> Tensor:
    """GELU: ``input * Phi(input)`` with the exact erf form (``approximate="none"``) or the
    tanh approximation (``approximate="tanh"``), as PyTorch's ``F.gelu``."""
    choice("gelu", approximate, ("none", "tanh"), "approximate")
    if approximate == "none":

        def fn(v):
            return _c(v, 0.5) * v * (_c(v, 1) + unary("erf", v * _c(v, 0.5**0.5)))

    else:

        def fn(v):
            inner = _c(v, math.sqrt(2 / math.pi)) * (v + _c(v, 0.044715) * v * v * v)
            return _c(v, 0.5) * v * (_c(v, 1) + unary("tanh", inner))

    return map1("gelu", input, fn, name, FLOATS)


def sigmoid(input: Tensor, name: str | None = None) -> Tensor:
    """``1 / (1 + exp(-input))``."""
    return map1("sigmoid", input, lambda v: unary("sigmoid", v), name, FLOATS)


def silu(input: Tensor, name: str | None = None) -> Tensor:
    """``input * sigmoid(input)`` (swish)."""
    return map1("silu", input, lambda v: v * unary("sigmoid", v), name, FLOATS)


def hardswish(input: Tensor, name: str | None = None) -> Tensor:
    """``input * relu6(input + 3) / 6``."""

    def fn(v):
        r6 = binary("min", binary("max", v + _c(v, 3), _c(v, 0)), _c(v, 6))
        return v * r6 / _c(v, 6)

    return map1("hardswish", input, fn, name, FLOATS)


def hardsigmoid(input: Tensor, name: str | None = None) -> Tensor:
    """``relu6(input + 3) / 6``."""

    def fn(v):
        return binary("min", binary("max", v + _c(v, 3), _c(v, 0)), _c(v, 6)) / _c(v, 6)

    return map1("hardsigmoid", input, fn, name, FLOATS)


def _math(op: str, doc: str):
    def f(input: Tensor, name: str | None = None) -> Tensor:
        return map1(op, input, lambda v: unary(op, v), name, FLOATS)

    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"{doc} (float tensors)."
    return f


tanh = _math("tanh", "Hyperbolic tangent")
exp = _math("exp", "``e ** x``")
log = _math("log", "Natural logarithm")
sqrt = _math("sqrt", "Square root")
rsqrt = _math("rsqrt", "``1 / sqrt(x)``")
erf = _math("erf", "The error function")
sin = _math("sin", "Sine")
cos = _math("cos", "Cosine")


def neg(input: Tensor, name: str | None = None) -> Tensor:
    """``-input``."""
    return map1("neg", input, lambda v: -v, name, SIGNED)


def abs(input: Tensor, name: str | None = None) -> Tensor:
    """``|input|``."""
    return map1("abs", input, lambda v: unary("abs", v), name, SIGNED)


def reciprocal(input: Tensor, name: str | None = None) -> Tensor:
    """``1 / input``."""
    return map1("reciprocal", input, lambda v: unary("recip", v), name, FLOATS)


def cast(input: Tensor, dtype, name: str | None = None) -> Tensor:
    """``input`` converted to ``dtype`` (C conversion: floats truncate toward zero;
    to ``bool``: non-zero is True, as PyTorch's ``.bool()``)."""
    dt = dtypes.as_dtype(dtype)
    allowed = (*DTYPES, "bool")
    choice("cast", dt.name, allowed, "dtype")
    if dt == dtypes.bool_:
        return map1("cast", input, lambda v: _truth(v), name, allowed)
    return map1("cast", input, lambda v: cast_expr(v, dt), name, allowed)


def _truth(v: Expr) -> Expr:
    return v if v.dtype == dtypes.bool_ else v.ne(_c(v, 0))


# binary -----------------------------------------------------------------------------


def _binary(op: str, a, b, fn, name: str | None, allowed=DTYPES) -> Tensor:
    """``out = fn(a, b)`` with broadcasting; one side may be a Python number."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        tensor(op, a, "input")
    like = a if isinstance(a, Tensor) else b
    check_dtype(op, like, allowed)
    ea, eb = operand(op, a, like), operand(op, b, like)
    tensors = [t for t in (ea, eb) if isinstance(t, Tensor)]
    if len(tensors) == 2:
        same_dtype(op, tensors[0], tensors[1], "other")
    shape = broadcast(op, tensors)

    def body(*ix):
        return fn(element(ea, shape, ix), element(eb, shape, ix))

    return pc.compute(fresh(op, name), shape, body)


def add(input, other, alpha=1, name: str | None = None) -> Tensor:
    """``input + alpha * other`` with broadcasting (PyTorch's ``torch.add``)."""
    if alpha == 1:
        return _binary("add", input, other, lambda a, b: a + b, name)
    like = input if isinstance(input, Tensor) else other
    k = scalar("add", alpha, like)
    return _binary("add", input, other, lambda a, b: a + k * b, name)


def sub(input, other, alpha=1, name: str | None = None) -> Tensor:
    """``input - alpha * other`` with broadcasting."""
    if alpha == 1:
        return _binary("sub", input, other, lambda a, b: a - b, name)
    like = input if isinstance(input, Tensor) else other
    k = scalar("sub", alpha, like)
    return _binary("sub", input, other, lambda a, b: a - k * b, name)


def mul(input, other, name: str | None = None) -> Tensor:
    """``input * other`` with broadcasting."""
    return _binary("mul", input, other, lambda a, b: a * b, name)


def div(input, other, rounding_mode: str | None = None, name=None) -> Tensor:
    """``input / other`` with broadcasting.

    ``rounding_mode`` as in ``torch.div``: None (true division; float tensors only),
    ``"trunc"`` (round toward zero) or ``"floor"``. Integer division by zero is
    undefined, as in C (the compiled kernel may trap).

    Raises:
        DTypeError: true division of integer tensors (cast, or pick a rounding mode).
    """
    choice("div", rounding_mode, (None, "trunc", "floor"), "rounding_mode")
    like = input if isinstance(input, Tensor) else other
    like = tensor("div", like)
    if rounding_mode is None:
        if not like.dtype.is_float:
            raise DTypeError(
                f"div: true division of {like.dtype} tensor {like.name} has no "
                f"{like.dtype} result because it is fractional. Cast first "
                f"(nn.cast({like.name}, 'float32')) or pass rounding_mode='trunc'."
            )
        return _binary("div", input, other, lambda a, b: a / b, name)
    if rounding_mode == "floor":
        return _binary("div", input, other, lambda a, b: binary("floordiv", a, b), name)
    if like.dtype.is_float:
        return _binary(
            "div",
            input,
            other,
            lambda a, b: select(
                (a / b) < _c(a, 0),
                unary("ceil", a / b),
                unary("floor", a / b),
            ),
            name,
        )
    return _binary("div", input, other, lambda a, b: a / b, name)


def maximum(input, other, name: str | None = None) -> Tensor:
    """Element-wise maximum with broadcasting."""
    return _binary("maximum", input, other, lambda a, b: binary("max", a, b), name)


def minimum(input, other, name: str | None = None) -> Tensor:
    """Element-wise minimum with broadcasting."""
    return _binary("minimum", input, other, lambda a, b: binary("min", a, b), name)


def pow(input, exponent, name: str | None = None) -> Tensor:
    """``input ** exponent`` with broadcasting.

    Float tensors use C's ``pow``, except a float tensor to the scalar power 2
    or 3, which is ``x * x`` or ``x * x * x``, as PyTorch computes those
    (its CPU pow kernel special-cases them): the same roundings, and multiplies
    where ``pow`` would cost a transcendental (GPT-2's tanh GELU cubes its
    input, Llama's RMSNorm squares it). Integer tensors take a non-negative
    Python int exponent only, expanded into exact multiplications.

    Raises:
        DTypeError: an integer tensor with a tensor or negative exponent.
    """
    like = input if isinstance(input, Tensor) else exponent
    like = tensor("pow", like)
    if like.dtype.is_float:
        if (
            isinstance(input, Tensor)
            and isinstance(exponent, (int, float))
            and not isinstance(exponent, bool)
            and exponent in (2, 3)
        ):
            times = int(exponent)
            return map1(
                "pow", input, lambda v: v * v if times == 2 else v * v * v, name
            )
        return _binary("pow", input, exponent, lambda a, b: binary("pow", a, b), name)
    if not (
        isinstance(input, Tensor)
        and isinstance(exponent, int)
        and not isinstance(exponent, bool)
        and exponent >= 0
    ):
        raise DTypeError(
            f"pow: {like.name} is {like.dtype} and the exponent is {exponent!r} "
            "because integer powers are exact only with a non-negative int exponent. "
            f"Cast first: nn.cast({like.name}, 'float32')."
        )

    def power(v):
        out = _c(v, 1) if exponent == 0 else v
        for _ in range(exponent - 1):
            out = out * v
        return out

    return map1("pow", input, power, name)


def bias_add(input: Tensor, bias: Tensor, dim: int = 1, name=None) -> Tensor:
    """``input + bias`` with the 1-D ``bias`` along ``dim`` (channels of NCHW by
    default).

    Raises:
        ShapeError: when ``bias`` is not 1-D or its length is not the dim's size.
    """
    input = tensor("bias_add", input)
    bias = tensor("bias_add", bias, "bias")
    d = axis("bias_add", dim, input.ndim)
    same_dtype("bias_add", input, bias, "bias")
    if bias.ndim != 1 or bias.shape[0] != input.shape[d]:
        raise ShapeError(
            f"bias_add: bias {bias.name} has shape {shape_text(bias.shape)} but "
            f"dim {d} of {input.name} {shape_text(input.shape)} is {input.shape[d]} "
            f"because the bias needs one value per element of dim {d}. Pass a bias "
            f"of shape ({input.shape[d]},)."
        )
    return pc.compute(
        fresh("bias_add", name), input.shape, lambda *ix: input[ix] + bias[ix[d]]
    )
