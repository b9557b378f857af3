"""Pooling over the last two dims ([N, C, H, W] or [C, H, W]): max_pool2d,
avg_pool2d, adaptive_avg_pool2d and adaptive_max_pool2d, as in PyTorch; and
nearest-neighbour upsampling, which shares their window arithmetic.

A window is a reduction whose domain is restricted by affine conditions where it
overlaps the padding (max pooling never sees padded values; average pooling counts
them only with ``count_include_pad``). Output sizes follow PyTorch, including
``ceil_mode`` (a last window must start inside the input or its left padding).
"""

from __future__ import annotations

import builtins

from polyc.errors import ArgumentError, ShapeError
from polyc.ir.affine import Aff
from polyc.ir.expr import Expr, Index, binary, cast
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    check_dtype,
    check_float,
    concrete,
    fresh,
    ints,
    number,
    sequence,
    shape_text,
    tensor,
)


def _spatial(op: str, x: Tensor) -> None:
    if x.ndim not in (3, 4):
        raise ShapeError(
            f"{op}: {x.name} has shape {shape_text(x.shape)} but {op} needs [N, C, H, "
            "W] or [C, H, W] because it pools the last two dims. Reshape the input."
        )


def _out_size(op, size: Aff, k: int, s: int, p: int, d: int, ceil: bool, x, dim):
    """PyTorch's pooling output size along one dim."""
    span = size + 2 * p - d * (k - 1) - 1
    if not ceil:
        out = span // s + 1
        if out.is_constant and out.const < 1:
            raise ShapeError(
                f"{op}: the output would be empty because {x.name}'s dim {dim} "
                f"({size}) plus padding {2 * p} is smaller than the window "
                f"{d * (k - 1) + 1}. Use a smaller kernel_size or more padding."
            )
        return out
    (n,) = concrete(op, x, [dim], "ceil_mode needs fixed sizes")
    out = -(-(n + 2 * p - d * (k - 1) - 1) // s) + 1
    if (out - 1) * s >= n + p:
        out -= 1
    if out < 1:
        raise ShapeError(
            f"{op}: the output would be empty because {x.name}'s dim {dim} ({n}) is "
            "smaller than the window. Use a smaller kernel_size or more padding."
        )
    return Aff(const=out)


def _windows(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (kernel, stride, padding, dilation) pairs and the output shape."""
    _spatial(op, x)
    k = ints(op, kernel_size, 2, "kernel_size", 1)
    s = k if stride is None or stride == [] else ints(op, stride, 2, "stride", 1)
    p = ints(op, padding, 2, "padding", 0)
    d = ints(op, dilation, 2, "dilation", 1)
    for a in range(2):
        if p[a] * 2 > k[a]:
            raise ArgumentError(
                f"{op}: padding={padding!r} is invalid because padding {p[a]} exceeds "
                f"half the kernel size {k[a]}, so a window could hold only padding. "
                f"Pass padding <= {k[a] // 2}."
            )
    lead = x.ndim - 2
    sizes = tuple(
        _out_size(op, x.shape[lead + a], k[a], s[a], p[a], d[a], ceil_mode, x, lead + a)
        for a in range(2)
    )
    return k, s, p, d, x.shape[:lead] + sizes


def _window(x, ix, k, s, p, d, names=("rh", "rw")):
    """Reduce axes over the window of output ``ix``, the input element, and the
    condition keeping the window inside the input (None when it always is)."""
    lead = x.ndim - 2
    rh, rw = pc.reduce_axis(k[0], names[0]), pc.reduce_axis(k[1], names[1])
    ih = ix[lead] * s[0] - p[0] + rh * d[0]
    iw = ix[lead + 1] * s[1] - p[1] + rw * d[1]
    inside = (ih >= 0) & (ih < x.shape[lead]) & (iw >= 0) & (iw < x.shape[lead + 1])
    return (rh, rw), x[tuple(ix[:lead]) + (ih, iw)], inside


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
    name: str | None = None,
) -> Tensor:
    """Maximum over each window (``F.max_pool2d``); padding is never selected.

    Raises:
        ArgumentError: invalid window arguments, or ``return_indices=True``.
        ShapeError: an input that is not 3-D/4-D, or an empty output.
    """
    op = "max_pool2d"
    x = tensor(op, input)
    check_dtype(op, x)
    if return_indices:
        raise ArgumentError(
            f"{op}: return_indices=True is not supported because the IR has no "
            "argmax. Pass return_indices=False."
        )
    k, s, p, d, shape = _windows(
        op, x, kernel_size, stride, padding, dilation, ceil_mode
    )
    clip = ceil_mode or any(p)

    def body(*ix):
        axes, value, inside = _window(x, ix, k, s, p, d)
        return pc.max(value, axes, where=inside if clip else None)

    return pc.compute(fresh(op, name), shape, body)


def _value(n, dt) -> Expr:
    """An integer count (int, Index or integer expression) as a value of ``dt``."""
    if isinstance(n, Index) and n.aff.is_constant:
        n = n.aff.const
    return pc.const(n, dt) if isinstance(n, int) else cast(n, dt)


def _count_1d(o: Index, size: Aff, osize: Aff, k: int, s: int, p: int, include_pad):
    """PyTorch's divisor along one dim: an int when it is the same everywhere."""
    if size.is_constant and osize.is_constant:
        n = size.const
        counts = set()
        for i in range(osize.const):
            start = i * s - p
            end = builtins.min(start + k, n + p)
            if not include_pad:
                end, start = builtins.min(end, n), builtins.max(start, 0)
            counts.add(end - start)
        if len(counts) == 1:
            return counts.pop()
    start = o * s - p
    end = binary("min", start + k, Index(size + p))
    if not include_pad:
        end = binary("min", end, Index(size))
        start = binary("max", start, Index(Aff(const=0)))
    return end - start


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Mean over each window (``F.avg_pool2d``), with PyTorch's divisor: the window
    clipped to the padded input (``count_include_pad``) or to the input.

    Raises:
        ArgumentError: invalid window arguments or divisor_override.
        ShapeError: an input that is not 3-D/4-D, or an empty output.
    """
    op = "avg_pool2d"
    x = tensor(op, input)
    dt = check_float(op, x)
    if divisor_override is not None:
        ints(op, divisor_override, 1, "divisor_override", 1)
    k, s, p, _, shape = _windows(op, x, kernel_size, stride, padding, 1, ceil_mode)
    lead = x.ndim - 2
    out = fresh(op, name)
    clip = ceil_mode or any(p)

    def total(*ix):
        axes, value, inside = _window(x, ix, k, s, p, (1, 1))
        return pc.sum(value, axes, where=inside if clip else None)

    sums = pc.compute(f"{out}_sum", shape, total)

    def divisor(ix) -> Expr:
        if divisor_override is not None:
            return pc.const(divisor_override, dt)
        ch, cw = (
            _count_1d(
                ix[lead + a],
                x.shape[lead + a],
                shape[lead + a],
                k[a],
                s[a],
                p[a],
                count_include_pad,
            )
            for a in range(2)
        )
        return _value(ch * cw, dt)

    return pc.compute(out, shape, lambda *ix: sums[ix] / divisor(ix))


def _adaptive_windows(op: str, x: Tensor, output_size):
    """The output shape and ``window(ix) -> ((h0, h1), (w0, w1))`` as Index values."""
    _spatial(op, x)
    lead = x.ndim - 2
    sizes = concrete(op, x, [lead, lead + 1], "adaptive windows need fixed sizes")
    outs = (output_size, output_size) if isinstance(output_size, int) else output_size
    if not isinstance(outs, (tuple, list)) or len(outs) != 2:
        raise ArgumentError(
            f"{op}: output_size={output_size!r} is invalid because it must be an int "
            "or a pair (entries may be None to keep the input size). Pass e.g. "
            "output_size=1."
        )
    outs = ints(
        op,
        tuple(n if o is None else o for o, n in zip(outs, sizes)),
        2,
        "output_size",
        1,
    )
    shape = x.shape[:lead] + tuple(Aff(const=o) for o in outs)

    def window(ix):
        return tuple(
            ((ix[lead + a] * n) // o, ((ix[lead + a] + 1) * n + o - 1) // o)
            for a, (n, o) in enumerate(zip(sizes, outs))
        )

    return lead, shape, window


def _adaptive(op: str, input, output_size, name, average: bool) -> Tensor:
    x = tensor(op, input)
    dt = check_float(op, x) if average else check_dtype(op, x)
    lead, shape, window = _adaptive_windows(op, x, output_size)
    out = fresh(op, name)

    def body(*ix):
        (h0, h1), (w0, w1) = window(ix)
        rh, rw = pc.reduce_axis((h0, h1), "rh"), pc.reduce_axis((w0, w1), "rw")
        value = x[tuple(ix[:lead]) + (rh, rw)]
        return pc.sum(value, (rh, rw)) if average else pc.max(value, (rh, rw))

    if not average:
        return pc.compute(out, shape, body)
    sums = pc.compute(f"{out}_sum", shape, body)

    def mean(*ix):
        (h0, h1), (w0, w1) = window(ix)
        return sums[ix] / _value((h1 - h0) * (w1 - w0), dt)

    return pc.compute(out, shape, mean)


def adaptive_avg_pool2d(input: Tensor, output_size, name: str | None = None) -> Tensor:
    """Average over PyTorch's adaptive windows: output ``i`` covers input rows
    ``[floor(i*H/OH), ceil((i+1)*H/OH))``; ``output_size=1`` is global pooling.

    Raises:
        ArgumentError: a symbolic H/W or an invalid output_size.
        ShapeError: an input that is not 3-D/4-D.
    """
    return _adaptive("adaptive_avg_pool2d", input, output_size, name, True)


def adaptive_max_pool2d(input: Tensor, output_size, name: str | None = None) -> Tensor:
    """Maximum over PyTorch's adaptive windows (see :func:`adaptive_avg_pool2d`)."""
    return _adaptive("adaptive_max_pool2d", input, output_size, name, False)


def upsample_nearest2d(
    input: Tensor, size=None, scale_factor=None, name: str | None = None
) -> Tensor:
    """Nearest-neighbour resize of the last two dims (``F.interpolate(...,
    mode="nearest")``): output row ``y`` reads input row ``floor(y * H / OH)``.

    Give ``size`` (an int or a pair) or an integer ``scale_factor`` (an int or a
    pair); the index map is affine either way.

    Raises:
        ArgumentError: both or neither given, a non-integer scale factor, or a
            symbolic H/W.
        ShapeError: an input that is not 3-D/4-D.
    """
    op = "upsample_nearest2d"
    x = tensor(op, input)
    _spatial(op, x)
    lead = x.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ArgumentError(
            f"{op}: size={size!r} and scale_factor={scale_factor!r} because exactly "
            "one of them sets the output size. Pass one of them."
        )
    sizes = concrete(op, x, [lead, lead + 1], "the source index needs fixed sizes")
    if size is not None:
        outs = ints(op, size, 2, "size", 1)
    else:
        factors = (
            (scale_factor, scale_factor)
            if isinstance(scale_factor, (int, float))
            else sequence(op, scale_factor, "scale_factor")
        )
        factors = tuple(number(op, f, "scale_factor") for f in factors)
        if not all(float(f).is_integer() for f in factors):
            raise ArgumentError(
                f"{op}: scale_factor={scale_factor!r} is not supported because only "
                "whole factors give an exact affine source index. Pass size= instead."
            )
        factors = ints(op, tuple(int(f) for f in factors), 2, "scale_factor", 1)
        outs = tuple(n * f for n, f in zip(sizes, factors))
    shape = x.shape[:lead] + tuple(Aff(const=o) for o in outs)

    def body(*ix):
        src = tuple((ix[lead + a] * sizes[a]) // outs[a] for a in range(2))
        return x[tuple(ix[:lead]) + src]

    return pc.compute(fresh(op, name), shape, body)
