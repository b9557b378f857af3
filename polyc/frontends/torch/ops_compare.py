"""ATen comparisons, logical ops, ``where`` and masks -> :mod:`polyc.ops.logic`.

``x > 0`` arrives as ``aten.gt.Scalar``, ``a < b`` as ``aten.lt.Tensor``; ``&``,
``|``, ``^`` and ``~`` on bool tensors as ``aten.bitwise_*``. Tensor operands are
first cast to the dtype PyTorch's type promotion gives the pair, so
``int_tensor > 0.5`` compares in float32 as it does in eager mode.
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering, packet
from polyc.ir import dtypes
from polyc.lang.compute import Tensor
from polyc.ops import elementwise, logic, reduce


def _probe(value):
    """A stand-in with ``value``'s dtype and dimensionality, for type promotion."""
    import torch

    if isinstance(value, Tensor):
        shape = () if value.ndim == 0 else (0,)
        return torch.empty(shape, dtype=getattr(torch, _torch_name(value.dtype)))
    return value


def _torch_name(dt) -> str:
    return "bool" if dt == dtypes.bool_ else dt.name


def _promoted(ctx, a, b):
    """``a`` and ``b`` with their tensors cast to PyTorch's promoted dtype."""
    import torch

    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return a, b
    first, second = (a, b) if isinstance(a, Tensor) else (b, a)
    want = dtypes.as_dtype(torch.result_type(_probe(first), _probe(second)))
    return tuple(
        elementwise.cast(v, want, name=ctx.sub(f"cast{n}"))
        if isinstance(v, Tensor) and v.dtype != want
        else v
        for n, v in enumerate((a, b))
    )


def _comparison(op: str):
    def handler(ctx, a, b):
        return logic.compare(op, *_promoted(ctx, a, b), name=ctx.name)

    handler.__name__ = op
    return handler


for _op in ("gt", "ge", "lt", "le", "eq", "ne"):
    lowering(f"aten.{_op}")(_comparison(_op))


_LOGICAL = {
    "aten.logical_and": logic.logical_and,
    "aten.logical_or": logic.logical_or,
    "aten.logical_xor": logic.logical_xor,
    "aten.bitwise_and": logic.logical_and,
    "aten.bitwise_or": logic.logical_or,
    "aten.bitwise_xor": logic.logical_xor,
}


@lowering(*_LOGICAL)
def logical(ctx, a, b):
    key = packet(ctx.node.target)
    _tensors_only(ctx, a, b)
    if key.startswith("aten.bitwise"):
        _bool_only(ctx, a, b)
    return _LOGICAL[key](a, b, name=ctx.name)


@lowering("aten.logical_not", "aten.bitwise_not")
def logical_not(ctx, a):
    if packet(ctx.node.target) == "aten.bitwise_not":
        _bool_only(ctx, a)
    return logic.logical_not(a, name=ctx.name)


def _tensors_only(ctx, *values):
    if not all(isinstance(v, Tensor) for v in values):
        raise ctx.error(
            "a logical op between a tensor and a Python value is not supported "
            "because polyc lowers it between tensors",
            "Compare the tensor instead (x != 0), or drop the constant operand",
        )


def _bool_only(ctx, *values):
    for v in values:
        if v.dtype != dtypes.bool_:
            raise ctx.error(
                f"bitwise ops on {v.dtype} tensors are not supported because polyc "
                "has bit operations only on bool tensors (where they are logical)",
                "Use it on bool tensors (masks), or on integers outside the model",
            )


@lowering("aten.where")
def where(ctx, condition, input, other):
    # one-argument torch.where is nonzero, refused as data-dependent before this
    a, b = _promoted(ctx, input, other)
    return logic.where(condition, a, b, name=ctx.name)


@lowering("aten.masked_fill")
def masked_fill(ctx, x, mask, value):
    if isinstance(value, Tensor) and value.dtype != x.dtype:
        value = elementwise.cast(value, x.dtype, name=ctx.sub("value"))
    if isinstance(value, float) and not x.dtype.is_float and value.is_integer():
        value = int(value)
    return logic.masked_fill(x, mask, value, name=ctx.name)


@lowering("aten.clamp_min")
def clamp_min(ctx, x, min):
    if isinstance(min, Tensor):
        return elementwise.maximum(*_promoted(ctx, x, min), name=ctx.name)
    return elementwise.clamp(x, min, None, name=ctx.name)


@lowering("aten.clamp_max")
def clamp_max(ctx, x, max):
    if isinstance(max, Tensor):
        return elementwise.minimum(*_promoted(ctx, x, max), name=ctx.name)
    return elementwise.clamp(x, None, max, name=ctx.name)


def _any_all(which: str):
    """``aten.any`` / ``aten.all``: the largest / smallest truth (0 or 1) of the
    elements over ``dim`` (all dims when absent), as a bool."""
    extreme = reduce.amax if which == "any" else reduce.amin

    def handler(ctx, x, dim=None, keepdim=False):
        dims = [dim] if isinstance(dim, int) else dim
        dims = None if dims is None or len(dims) == 0 else list(dims)
        truth = elementwise.cast(
            elementwise.cast(x, "bool", name=ctx.sub("truth")),
            "int32",
            name=ctx.sub("truth_int"),
        )
        best = extreme(truth, dims, keepdim, name=ctx.sub(which))
        return logic.compare("ne", best, 0, name=ctx.name)

    handler.__name__ = which
    return handler


lowering("aten.any")(_any_all("any"))
lowering("aten.all")(_any_all("all"))
