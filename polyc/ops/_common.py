"""Helpers every op shares: names, argument checks, broadcasting, dtype rules.

Ops take :class:`polyc.compute.Tensor` operands and build new tensors with
:func:`polyc.compute.compute` (or assignments for multi-statement definitions). An op's
output gets a unique name (``relu_1``, ``relu_2``, ...) unless ``name=`` is given; the
temporaries an op needs are named after its output (``softmax_1_max``).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from polyc.errors import ArgumentError, DTypeError, ShapeError
from polyc.ir import dtypes
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType
from polyc.ir.expr import Const, Expr, constant
from polyc.lang.compute import Tensor

#: dtypes the op library computes in (int8 contractions accumulate in int32)
DTYPES = ("float32", "float16", "bfloat16", "int8", "int32", "float64", "int64")
#: the float dtypes, and the signed ones (floats and signed integers)
FLOATS = ("float32", "float16", "bfloat16", "float64")
SIGNED = (*FLOATS, "int8", "int32", "int64")

_counters: dict[str, int] = {}


def fresh(base: str, name: str | None = None) -> str:
    """``name`` when given (checked), else a new unique ``<base>_<n>``."""
    if name is not None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(
                f"{base}: name={name!r} is not a valid tensor name because names must "
                "be identifiers. Use letters, digits and underscores, e.g. 'conv1'."
            )
        return name
    n = _counters.get(base, 0) + 1
    _counters[base] = n
    return f"{base}_{n}"


def reset_names() -> None:
    """Restart the automatic numbering (``relu_1`` again); for reproducible output."""
    _counters.clear()


def shape_text(shape: Sequence[Aff]) -> str:
    inner = ", ".join(str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def tensor(op: str, x: object, what: str = "input") -> Tensor:
    """``x`` when it is a Tensor, else an ArgumentError naming the argument."""
    if isinstance(x, Tensor):
        return x
    raise ArgumentError(
        f"{op}: {what} is a {type(x).__name__}, not a polyc Tensor, because op "
        "operands must be placeholders or op results. Declare it with "
        f"compute.placeholder('{what}', shape, dtype)."
    )


def check_dtype(op: str, x: Tensor, allowed: Sequence[str] = DTYPES) -> DType:
    """``x.dtype`` when it is one of ``allowed``, else a DTypeError with the cast."""
    if x.dtype.name in allowed:
        return x.dtype
    want = "float32" if "float32" in allowed else allowed[0]
    raise DTypeError(
        f"{op}: {x.name} is {x.dtype} but {op} accepts {', '.join(allowed)} because "
        f"it is defined on those types only. Cast it first: nn.cast({x.name}, "
        f"'{want}')."
    )


def check_float(op: str, x: Tensor) -> DType:
    return check_dtype(op, x, FLOATS)


def same_dtype(op: str, a: Tensor, b: Tensor, b_what: str | None = None) -> DType:
    """The common dtype of ``a`` and ``b``; a DTypeError with the fixing cast."""
    if a.dtype == b.dtype:
        return a.dtype
    raise DTypeError(
        f"{op}: {b_what or b.name} ({b.name}) is {b.dtype} but {a.name} is {a.dtype} "
        "because they were declared with different dtypes. Cast one of them, e.g. "
        f"nn.cast({b.name}, '{a.dtype}')."
    )


def scalar(op: str, value: object, like: Tensor) -> Const:
    """A Python number as a constant of ``like``'s dtype (exact or refused)."""
    dt = like.dtype
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(
            f"{op}: operand {value!r} is a {type(value).__name__}, neither a Tensor "
            "nor a Python number, because ops combine tensors and scalars only. Pass "
            "a Tensor, an int or a float."
        )
    if isinstance(value, float) and not dt.is_float:
        if value.is_integer():
            value = int(value)
        else:
            raise DTypeError(
                f"{op}: the scalar {value} is a float but {like.name} is {dt} because "
                "integer tensors combine with integers only. Cast the tensor first: "
                f"nn.cast({like.name}, 'float32')."
            )
    if dt.is_int:
        import numpy as np

        info = np.iinfo(dt.numpy)
        if not info.min <= value <= info.max:
            raise DTypeError(
                f"{op}: the scalar {value} does not fit {dt} because {dt} holds "
                f"{info.min}..{info.max}. Cast {like.name} to a wider type first: "
                f"nn.cast({like.name}, 'int32')."
            )
    return constant(value, dt)


def axis(op: str, dim: object, ndim: int, what: str = "dim") -> int:
    """A normalised axis (negative counts from the end)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ArgumentError(
            f"{op}: {what}={dim!r} is not an axis because axes are ints. Pass an int "
            f"in [{-ndim}, {ndim})."
        )
    if ndim == 0:
        raise ArgumentError(
            f"{op}: {what}={dim} names no axis because the tensor is 0-d (a scalar). "
            "Reshape it to (1,) first."
        )
    if not -ndim <= dim < ndim:
        raise ArgumentError(
            f"{op}: {what}={dim} is out of range because the tensor has {ndim} "
            f"dimensions. Pass an axis in [{-ndim}, {ndim - 1}]."
        )
    return dim % ndim


def axes(op: str, dims: object, ndim: int, what: str = "dim") -> tuple[int, ...]:
    """Sorted distinct axes from an int, a sequence of ints, or None or an empty
    sequence (all axes, as PyTorch)."""
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        return tuple(range(ndim))
    seq = dims if isinstance(dims, (tuple, list)) else (dims,)
    out = [axis(op, d, ndim, what) for d in seq]
    if len(set(out)) != len(out):
        raise ArgumentError(
            f"{op}: {what}={dims!r} repeats an axis because {out} has duplicates. "
            "Name each axis once."
        )
    return tuple(sorted(out))


def flag(op: str, value: object, what: str) -> bool:
    """``value`` when it is a bool, else an ArgumentError."""
    if isinstance(value, bool):
        return value
    raise ArgumentError(
        f"{op}: {what}={value!r} is not a bool because {what} is a switch. Pass True "
        "or False."
    )


def number(op: str, value: object, what: str) -> float:
    """``value`` when it is a real Python number, else an ArgumentError."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise ArgumentError(
        f"{op}: {what}={value!r} is not a number because {what} is a scalar "
        "parameter. Pass an int or a float."
    )


def sequence(op: str, value: object, what: str) -> tuple:
    """``value`` as a tuple when it is a list or tuple, else an ArgumentError."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    raise ArgumentError(
        f"{op}: {what}={value!r} is not a sequence because {what} lists one entry "
        "per dim. Pass a tuple or a list."
    )


def ints(op: str, value: object, n: int, what: str, minimum: int = 0) -> tuple:
    """An int or a sequence of ``n`` ints (each >= ``minimum``) as an n-tuple."""
    seq = (value,) * n if isinstance(value, int) else value
    ok = (
        isinstance(seq, (tuple, list))
        and len(seq) == n
        and all(isinstance(v, int) and not isinstance(v, bool) for v in seq)
    )
    if not ok or builtins.min(seq) < minimum:
        raise ArgumentError(
            f"{op}: {what}={value!r} is invalid because it must be an int >= "
            f"{minimum} or a sequence of {n} such ints. Pass e.g. {what}="
            f"{builtins.max(minimum, 1)}."
        )
    return tuple(seq)


def choice(op: str, value: object, accepted: Sequence[object], what: str) -> object:
    """``value`` when it is one of ``accepted``, else an ArgumentError listing them."""
    if value in accepted:
        return value
    listed = ", ".join(repr(a) for a in accepted)
    raise ArgumentError(
        f"{op}: {what}={value!r} is not supported because the accepted values are "
        f"{listed}. Pass one of those."
    )


def concrete(op: str, x: Tensor, dims: Sequence[int], why: str) -> tuple[int, ...]:
    """The sizes of ``x``'s ``dims`` as ints; an ArgumentError when one is symbolic."""
    out = []
    for d in dims:
        a = x.shape[d]
        if not a.is_constant:
            raise ArgumentError(
                f"{op}: dim {d} of {x.name} is the symbolic size {a} because it was "
                f"declared with a parameter, but {why}. Give that dim a fixed size."
            )
        out.append(a.const)
    return tuple(out)


def broadcast(op: str, operands: Sequence[Tensor]) -> tuple[Aff, ...]:
    """numpy broadcasting of the operands' shapes.

    Raises:
        ShapeError: naming the first dim where two operands disagree.
    """
    return broadcast_shapes(op, [(t.name, t.shape) for t in operands])


def broadcast_shapes(
    op: str, shapes: Sequence[tuple[str, Sequence[Aff]]]
) -> tuple[Aff, ...]:
    """numpy broadcasting of named shapes ``[(name, shape), ...]``."""
    ndim = builtins.max((len(s) for _, s in shapes), default=0)
    out: list[Aff] = []
    for d in range(ndim):
        size: Aff | None = None
        owner: tuple[str, Sequence[Aff]] | None = None
        for name, shp in shapes:
            k = d - (ndim - len(shp))
            if k < 0 or shp[k] == 1:
                continue
            if size is None:
                size, owner = shp[k], (name, shp)
            elif shp[k] != size:
                raise ShapeError(
                    f"{op}: shapes {shape_text(owner[1])} of {owner[0]} and "
                    f"{shape_text(shp)} of {name} do not broadcast because dim "
                    f"{d - ndim} is {size} in {owner[0]} but {shp[k]} in {name}. Make "
                    "the dims equal or 1 (reshape or unsqueeze one operand)."
                )
        out.append(size if size is not None else Aff(const=1))
    return tuple(out)


def broadcast_index(t: Tensor, out_shape: Sequence[Aff], ix: Sequence) -> tuple:
    """Indices into ``t`` for output indices ``ix`` under broadcasting."""
    return squeeze_index(t.shape, out_shape, ix)


def squeeze_index(shape: Sequence[Aff], out_shape: Sequence[Aff], ix: Sequence):
    """Indices into an array of ``shape`` broadcast to ``out_shape`` (the trailing
    dims align; a size-1 dim is indexed by 0)."""
    lead = len(out_shape) - len(shape)
    return tuple(
        0 if shape[k] == 1 and out_shape[lead + k] != 1 else ix[lead + k]
        for k in range(len(shape))
    )


def operand(op: str, value: object, like: Tensor) -> Tensor | Const:
    """A Tensor operand as is; a Python number as a constant typed like ``like``."""
    if isinstance(value, Tensor):
        return value
    return scalar(op, value, like)


def element(value: Tensor | Expr, out_shape: Sequence[Aff], ix: Sequence) -> Expr:
    """The element of a broadcast operand at output indices ``ix``."""
    if isinstance(value, Tensor):
        return value[broadcast_index(value, out_shape, ix)]
    return value


def accumulator(dt: DType) -> DType:
    """The dtype contractions over ``dt`` accumulate and return in."""
    return dtypes.accumulator(dt)
