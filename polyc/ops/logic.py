"""Conditions as values: comparisons, logical ops, ``where`` and ``masked_fill``.

A comparison makes a ``bool`` tensor (one byte per element, as PyTorch stores
``torch.bool``); the logical ops read any dtype as "non-zero is true", as
``torch.logical_and`` does, and return ``bool``; ``where`` picks between two
operands element-wise. All broadcast as numpy does and accept Python numbers on
either side (a Python bool only where the other side is ``bool``).
"""

from __future__ import annotations

from polyc.errors import DTypeError
from polyc.ir import dtypes
from polyc.ir.expr import Const, Expr, binary, select, unary
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    DTYPES,
    broadcast,
    check_dtype,
    element,
    fresh,
    same_dtype,
    scalar,
    tensor,
)

#: dtypes conditions and values may have here
ANY = (*DTYPES, "bool")
_COMPARE = ("gt", "ge", "lt", "le", "eq", "ne")


def _operand(op: str, value, like: Tensor) -> Tensor | Const:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, bool):
        if like.dtype != dtypes.bool_:
            return scalar(op, int(value), like)
        return pc.const(value, dtypes.bool_)
    if like.dtype == dtypes.bool_:
        raise DTypeError(
            f"{op}: the number {value!r} meets the bool tensor {like.name} because "
            "bool tensors combine with True and False only. Cast the tensor first: "
            f"nn.cast({like.name}, 'float32')."
        )
    return scalar(op, value, like)


def _elementwise(op: str, operands, fn, name: str | None) -> Tensor:
    """``out = fn(*elements)`` over the broadcast shape of the tensor operands."""
    tensors = [v for v in operands if isinstance(v, Tensor)]
    if not tensors:
        tensor(op, operands[0])
    shape = broadcast(op, tensors)

    def body(*ix):
        return fn(*(element(v, shape, ix) for v in operands))

    return pc.compute(fresh(op, name), shape, body)


def _truth(v: Expr) -> Expr:
    """``v`` as a condition: itself when bool, else ``v != 0``."""
    return v if v.dtype == dtypes.bool_ else v.ne(pc.const(0, v.dtype))


def compare(op: str, input, other, name: str | None = None) -> Tensor:
    """``input <op> other`` as a bool tensor; ``op`` is one of gt, ge, lt, le, eq, ne
    (``torch.gt`` ... ``torch.ne``).

    Raises:
        DTypeError: when two tensors have different dtypes (cast one first).
    """
    if op not in _COMPARE:
        raise ValueError(op)
    like = tensor(op, input if isinstance(input, Tensor) else other)
    check_dtype(op, like, ANY)
    a, b = _operand(op, input, like), _operand(op, other, like)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        same_dtype(op, a, b, "other")
    return _elementwise(op, [a, b], lambda x, y: binary(op, x, y), name)


def gt(input, other, name=None) -> Tensor:
    """``input > other`` (bool)."""
    return compare("gt", input, other, name)


def ge(input, other, name=None) -> Tensor:
    """``input >= other`` (bool)."""
    return compare("ge", input, other, name)


def lt(input, other, name=None) -> Tensor:
    """``input < other`` (bool)."""
    return compare("lt", input, other, name)


def le(input, other, name=None) -> Tensor:
    """``input <= other`` (bool)."""
    return compare("le", input, other, name)


def eq(input, other, name=None) -> Tensor:
    """``input == other`` (bool)."""
    return compare("eq", input, other, name)


def ne(input, other, name=None) -> Tensor:
    """``input != other`` (bool)."""
    return compare("ne", input, other, name)


def _logical(op: str, input: Tensor, other, name) -> Tensor:
    a = tensor(f"logical_{op}", input)
    check_dtype(f"logical_{op}", a, ANY)
    b = tensor(f"logical_{op}", other, "other")
    check_dtype(f"logical_{op}", b, ANY)

    def fn(x, y):
        x, y = _truth(x), _truth(y)
        if op == "xor":
            return x.ne(y)
        return binary(op, x, y)

    return _elementwise(f"logical_{op}", [a, b], fn, name)


def logical_and(input: Tensor, other: Tensor, name=None) -> Tensor:
    """Both non-zero (bool), as ``torch.logical_and``."""
    return _logical("and", input, other, name)


def logical_or(input: Tensor, other: Tensor, name=None) -> Tensor:
    """Either non-zero (bool), as ``torch.logical_or``."""
    return _logical("or", input, other, name)


def logical_xor(input: Tensor, other: Tensor, name=None) -> Tensor:
    """Exactly one non-zero (bool), as ``torch.logical_xor``."""
    return _logical("xor", input, other, name)


def logical_not(input: Tensor, name=None) -> Tensor:
    """Zero (bool), as ``torch.logical_not``."""
    x = tensor("logical_not", input)
    check_dtype("logical_not", x, ANY)
    return _elementwise("logical_not", [x], lambda v: unary("not", _truth(v)), name)


def where(condition: Tensor, input, other, name: str | None = None) -> Tensor:
    """``input`` where ``condition`` holds, else ``other`` (``torch.where``); both
    sides broadcast against the condition, and a Python number takes the dtype of
    the tensor on the other side.

    Raises:
        DTypeError: when the condition is not bool, or the two tensor sides have
            different dtypes.
    """
    cond = tensor("where", condition, "condition")
    check_dtype("where", cond, ("bool",))
    like = input if isinstance(input, Tensor) else other
    like = tensor("where", like)
    check_dtype("where", like, ANY)
    a, b = _operand("where", input, like), _operand("where", other, like)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        same_dtype("where", a, b, "other")
    return _elementwise("where", [cond, a, b], select, name)


def masked_fill(input: Tensor, mask: Tensor, value, name: str | None = None) -> Tensor:
    """``input`` with ``value`` where ``mask`` holds (``Tensor.masked_fill``); the
    mask broadcasts to ``input``'s shape, ``value`` is a number or a 0-d tensor."""
    x = tensor("masked_fill", input)
    m = tensor("masked_fill", mask, "mask")
    check_dtype("masked_fill", m, ("bool",))
    if isinstance(value, Tensor) and value.ndim == 0:
        same_dtype("masked_fill", x, value, "value")
        v = value[()]
    else:
        v = _operand("masked_fill", value, x)
    return _elementwise("masked_fill", [m, v, x], lambda c, a, b: select(c, a, b), name)
