"""Contractions: matmul, batch_matmul, linear, conv2d and conv_transpose2d (PyTorch
layouts).

Every contraction is two statements, an initialisation (zero, or the bias) and an
update ``out += a * b`` over the reduction axes, accumulating in
``dtypes.accumulator(dtype)``: int8 operands are widened to int32 and the result is
int32, bfloat16 operands to float32 and the result is float32 (round it with
``nn.cast``, as PyTorch rounds its float32 sums once); other dtypes accumulate in
themselves. Padding of conv2d is an affine condition
on the update's domain (no padded copy) unless ``materialize_padding=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from polyc.errors import ArgumentError, DTypeError, ShapeError
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType
from polyc.ir.expr import Expr, cast
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    accumulator,
    broadcast_shapes,
    check_dtype,
    choice,
    fresh,
    ints,
    same_dtype,
    shape_text,
    squeeze_index,
    tensor,
)

CONTRACT = ("float32", "float16", "bfloat16", "float64", "int8", "int32")


def contraction(
    name: str,
    shape: Sequence[Aff],
    dtype: DType,
    var_names: Sequence[str],
    term: Callable[..., Expr],
    init: Callable[..., Expr] | None = None,
    where: Callable[..., Expr] | None = None,
) -> Tensor:
    """``out[ix] = init(ix)`` then ``out[ix] += term(ix)`` (reduction axes inside).

    ``term`` reads reduction axes made by the caller just before (so the update
    finds them); ``where`` restricts the update (e.g. padding).
    """
    out = pc.tensor(name, shape, dtype)
    ix = pc.indices(" ".join(var_names))
    out[ix] = init(*ix) if init is not None else pc.const(0, dtype)
    out.set(ix, out[ix] + term(*ix), where=where(*ix) if where else None)
    return out


def _widen(x: Expr, acc: DType) -> Expr:
    return x if x.dtype == acc else cast(x, acc)


def _operands(op: str, a: Tensor, b: Tensor, b_what: str) -> tuple[DType, DType]:
    check_dtype(op, a, CONTRACT)
    dt = same_dtype(op, a, b, b_what)
    return dt, accumulator(dt)


def _bias(op: str, bias, size: Aff, acc: DType) -> Tensor | None:
    if bias is None:
        return None
    bias = tensor(op, bias, "bias")
    if bias.dtype != acc:
        raise DTypeError(
            f"{op}: bias {bias.name} is {bias.dtype} but the output accumulates in "
            f"{acc} because contractions over the inputs' dtype return {acc}. Cast the "
            f"bias: nn.cast({bias.name}, '{acc}')."
        )
    if bias.ndim != 1 or bias.shape[0] != size:
        raise ShapeError(
            f"{op}: bias {bias.name} has shape {shape_text(bias.shape)} but the output "
            f"has {size} channels because the bias adds one value per output channel. "
            f"Pass a bias of shape ({size},)."
        )
    return bias


def matmul(input: Tensor, other: Tensor, name: str | None = None) -> Tensor:
    """Matrix product with ``torch.matmul`` semantics.

    1-D x 1-D is a dot product (a 0-d tensor); a 1-D operand is a vector on that
    side; N-D operands are stacks of matrices whose batch dims broadcast.

    Raises:
        ShapeError: when the contracted dims differ or batch dims do not broadcast.
        DTypeError: when the dtypes differ.
    """
    a, b = tensor("matmul", input), tensor("matmul", other, "other")
    _, acc = _operands("matmul", a, b, "other")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            "matmul: an operand is 0-d because matmul needs at least one dim per "
            "operand. Use nn.mul for scalars."
        )
    ka, kb = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise ShapeError(
            f"matmul: {a.name} {shape_text(a.shape)} and {b.name} "
            f"{shape_text(b.shape)} do not chain because dim -1 of {a.name} is {ka} "
            f"but dim {-2 if b.ndim > 1 else 0} of {b.name} is {kb}. Transpose or "
            "reshape one operand so the contracted sizes agree."
        )
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    batch = broadcast_shapes("matmul", [(a.name, a_batch), (b.name, b_batch)])
    rows = a.shape[-2:-1] if a.ndim > 1 else ()
    cols = b.shape[-1:] if b.ndim > 1 else ()
    shape = batch + rows + cols
    names = [f"b{d}" for d in range(len(batch))] + ["i"] * len(rows) + ["j"] * len(cols)
    k = pc.reduce_axis(ka, "k")
    nb = len(batch)

    def term(*ix):
        bix, rest = ix[:nb], ix[nb:]
        i = rest[:1] if rows else ()
        j = rest[-1:] if cols else ()
        ai = squeeze_index(a_batch, batch, bix) + i + (k,)
        bi = squeeze_index(b_batch, batch, bix) + (k,) + j
        return _widen(a[ai], acc) * _widen(b[bi], acc)

    return contraction(fresh("matmul", name), shape, acc, names, term)


def batch_matmul(input: Tensor, mat2: Tensor, name: str | None = None) -> Tensor:
    """``[B, M, K] x [B, K, N] -> [B, M, N]`` (``torch.bmm``).

    Raises:
        ShapeError: when an operand is not 3-D or the sizes do not chain.
    """
    a, b = tensor("batch_matmul", input), tensor("batch_matmul", mat2, "mat2")
    for t in (a, b):
        if t.ndim != 3:
            raise ShapeError(
                f"batch_matmul: {t.name} has shape {shape_text(t.shape)} but "
                "batch_matmul takes 3-D operands [B, M, K] and [B, K, N] because it is "
                "torch.bmm. Reshape it, or use nn.matmul to broadcast."
            )
    if a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"batch_matmul: batch sizes differ because dim 0 is {a.shape[0]} in "
            f"{a.name} but {b.shape[0]} in {b.name}. Pass equal batch sizes (or use "
            "nn.matmul to broadcast)."
        )
    return matmul(a, b, name=fresh("batch_matmul", name))


def linear(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, name: str | None = None
) -> Tensor:
    """``input @ weight.T + bias`` over the leading dims of ``input``.

    ``weight`` is ``[out_features, in_features]`` and ``bias`` ``[out_features]``
    (PyTorch's layout); the bias initialises the accumulator (int32 for int8).

    Raises:
        ShapeError: feature counts that differ, or a bias of the wrong length.
        DTypeError: operand dtypes that differ, or a bias not in the accumulator dtype.
    """
    x, w = tensor("linear", input), tensor("linear", weight, "weight")
    _, acc = _operands("linear", x, w, "weight")
    if w.ndim != 2 or x.ndim < 1 or w.shape[1] != x.shape[-1]:
        raise ShapeError(
            f"linear: input {x.name} {shape_text(x.shape)} and weight {w.name} "
            f"{shape_text(w.shape)} do not fit because the weight must be [out, in] "
            f"with in equal to the input's last dim ({x.shape[-1] if x.ndim else '-'})."
            f" Pass a weight of shape (out_features, {x.shape[-1] if x.ndim else 1})."
        )
    b = _bias("linear", bias, w.shape[0], acc)
    shape = x.shape[:-1] + (w.shape[0],)
    names = [f"b{d}" for d in range(x.ndim - 1)] + ["j"]
    k = pc.reduce_axis(x.shape[-1], "k")

    def term(*ix):
        return _widen(x[ix[:-1] + (k,)], acc) * _widen(w[ix[-1], k], acc)

    init = (lambda *ix: b[ix[-1]]) if b is not None else None
    return contraction(fresh("linear", name), shape, acc, names, term, init)


def _padding(op, padding, kernel: tuple, dilation: tuple, stride: tuple) -> tuple:
    """((top, bottom), (left, right)) from an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        choice(op, padding, ("valid", "same"), "padding")
        if padding == "valid":
            return ((0, 0), (0, 0))
        if stride != (1, 1):
            raise ArgumentError(
                f"{op}: padding='same' is not supported with stride={stride} because "
                "the output size would not equal the input size. Pass explicit "
                "padding, or stride=1."
            )
        out = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            out.append((total // 2, total - total // 2))
        return tuple(out)
    p = ints(op, padding, 2, "padding")
    return ((p[0], p[0]), (p[1], p[1]))


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    dilation=1,
    groups: int = 1,
    padding_mode: str = "zeros",
    materialize_padding: bool = False,
    name: str | None = None,
) -> Tensor:
    """2-D convolution, NCHW input and OIHW weight (``torch.nn.functional.conv2d``).

    ``out[n, o, h, w] = bias[o] + sum_{c, kh, kw} input[n, g*Cg + c, h*sh - pt + kh*dh,
    w*sw - pl + kw*dw] * weight[o, c, kh, kw]`` with ``g = o // (O / groups)`` and
    ``Cg = C / groups``; ``groups == C`` is a depthwise convolution. ``padding`` is
    an int, a pair, ``"valid"`` or ``"same"`` (stride 1); zero padding is a condition
    on the reduction domain, or a padded copy (:func:`polyc.ops.nn.pad`) when
    ``materialize_padding`` is set.

    Raises:
        ShapeError: ranks, channel counts or a bias that do not fit; an empty output.
        DTypeError: operand dtypes that differ.
        ArgumentError: invalid stride, padding, dilation, groups or padding_mode.
    """
    op = "conv2d"
    out_name = fresh(op, name)
    x, wt = tensor(op, input), tensor(op, weight, "weight")
    _, acc = _operands(op, x, wt, "weight")
    choice(op, padding_mode, ("zeros",), "padding_mode")
    for t, what in ((x, "input [N, C, H, W]"), (wt, "weight [O, C/groups, KH, KW]")):
        if t.ndim != 4:
            raise ShapeError(
                f"{op}: {t.name} has shape {shape_text(t.shape)} but conv2d needs a "
                f"4-D {what} because it follows PyTorch's NCHW/OIHW layouts. Reshape "
                "it (nn.unsqueeze for a single image)."
            )
    stride = ints(op, stride, 2, "stride", 1)
    dilation = ints(op, dilation, 2, "dilation", 1)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ArgumentError(
            f"{op}: groups={groups!r} is invalid because groups must be a positive "
            "int. Pass groups=1, or the channel count for depthwise."
        )
    kernel = _concrete_kernel(op, wt)
    pads = _padding(op, padding, kernel, dilation, stride)
    out_ch, cg = wt.shape[0], wt.shape[1]
    _check_groups(op, x, wt, groups)
    b = _bias(op, bias, out_ch, acc)
    if materialize_padding and any(p for pair in pads for p in pair):
        from polyc.ops.shape import pad

        flat = (pads[1][0], pads[1][1], pads[0][0], pads[0][1])
        x = pad(x, flat, name=f"{out_name}_pad")
        pads = ((0, 0), (0, 0))
    sizes = []
    for d in range(2):
        span = x.shape[2 + d] + sum(pads[d]) - dilation[d] * (kernel[d] - 1)
        size = (span - 1) // stride[d] + 1
        if span.is_constant and span.const < 1:
            raise ShapeError(
                f"{op}: the output would be empty because the padded input's "
                f"{'HW'[d]} ({x.shape[2 + d]} + {sum(pads[d])}) is smaller than the "
                f"dilated kernel ({dilation[d] * (kernel[d] - 1) + 1}). Pad more or use "
                "a smaller kernel."
            )
        sizes.append(size)
    shape = (x.shape[0], out_ch, sizes[0], sizes[1])
    rc = pc.reduce_axis(cg, "rc")
    rh = pc.reduce_axis(kernel[0], "rh")
    rw = pc.reduce_axis(kernel[1], "rw")
    og = out_ch.const // groups if groups > 1 else None

    def coords(h, w):
        ih = h * stride[0] - pads[0][0] + rh * dilation[0]
        iw = w * stride[1] - pads[1][0] + rw * dilation[1]
        return ih, iw

    def term(n, o, h, w):
        ic = rc if og is None else (o // og) * cg.const + rc
        ih, iw = coords(h, w)
        return _widen(x[n, ic, ih, iw], acc) * _widen(wt[o, rc, rh, rw], acc)

    def where(n, o, h, w):
        ih, iw = coords(h, w)
        return (ih >= 0) & (ih < x.shape[2]) & (iw >= 0) & (iw < x.shape[3])

    padded = any(p for pair in pads for p in pair)
    init = (lambda n, o, h, w: b[o]) if b is not None else None
    return contraction(
        out_name,
        shape,
        acc,
        ("n", "o", "h", "w"),
        term,
        init,
        where if padded else None,
    )


def _concrete_kernel(op: str, wt: Tensor) -> tuple[int, int]:
    for d in (2, 3):
        if not wt.shape[d].is_constant:
            raise ArgumentError(
                f"{op}: the kernel size {wt.shape[d]} of {wt.name} (dim {d}) is "
                "symbolic because it was declared with a parameter. Give the kernel a "
                "fixed size."
            )
    return wt.shape[2].const, wt.shape[3].const


def _check_groups(op: str, x: Tensor, wt: Tensor, groups: int) -> None:
    channels, out_ch, cg = x.shape[1], wt.shape[0], wt.shape[1]
    if groups == 1:
        if channels != cg:
            raise ShapeError(
                f"{op}: input {x.name} has {channels} channels (dim 1 of "
                f"{shape_text(x.shape)}) but weight {wt.name} expects {cg} (dim 1 of "
                f"{shape_text(wt.shape)}) because weight is [O, C/groups, KH, KW]. "
                f"Pass a weight with {channels} input channels, or set groups."
            )
        return
    for what, size in (("input channels", channels), ("output channels", out_ch)):
        if not size.is_constant or size.const % groups:
            raise ShapeError(
                f"{op}: {what} ({size}) are not divisible by groups={groups} because "
                "each group takes an equal share. Pass a groups that divides both "
                "channel counts."
            )
    if not cg.is_constant or cg.const * groups != channels.const:
        raise ShapeError(
            f"{op}: weight {wt.name} {shape_text(wt.shape)} has {cg} channels per "
            f"group but input {x.name} has {channels} channels over groups={groups}, "
            f"so {channels.const // groups} per group. Pass a weight of shape "
            f"({out_ch}, {channels.const // groups}, KH, KW)."
        )


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
    name: str | None = None,
) -> Tensor:
    """Transposed 2-D convolution (``F.conv_transpose2d``): NCHW input, weight
    ``[C, O / groups, KH, KW]``.

    ``out[n, o, y, x] = bias[o] + sum input[n, c, iy, ix] * weight[c, o % Og, kh, kw]``
    over the input channels ``c`` of ``o``'s group and the taps with
    ``iy = (y + pt - kh*dh) / sh`` whole and inside the input (likewise ``ix``): the
    divisibility and the bounds are affine conditions on the reduction domain.

    Raises:
        ShapeError: ranks, channel counts or a bias that do not fit.
        DTypeError: operand dtypes that differ.
        ArgumentError: invalid stride, padding, output_padding, dilation or groups.
    """
    op = "conv_transpose2d"
    out_name = fresh(op, name)
    x, wt = tensor(op, input), tensor(op, weight, "weight")
    _, acc = _operands(op, x, wt, "weight")
    for t, what in ((x, "input [N, C, H, W]"), (wt, "weight [C, O/groups, KH, KW]")):
        if t.ndim != 4:
            raise ShapeError(
                f"{op}: {t.name} has shape {shape_text(t.shape)} but {op} needs a 4-D "
                f"{what} because it follows PyTorch's layouts. Reshape it."
            )
    stride = ints(op, stride, 2, "stride", 1)
    dilation = ints(op, dilation, 2, "dilation", 1)
    pads = ints(op, padding, 2, "padding", 0)
    extra = ints(op, output_padding, 2, "output_padding", 0)
    if any(e >= max(s, d) for e, s, d in zip(extra, stride, dilation)):
        raise ArgumentError(
            f"{op}: output_padding={output_padding!r} is invalid because it must be "
            f"smaller than stride {stride} or dilation {dilation}. Pass a smaller "
            "output_padding."
        )
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ArgumentError(
            f"{op}: groups={groups!r} is invalid because groups must be a positive "
            "int. Pass groups=1."
        )
    channels, og = x.shape[1], wt.shape[1]
    if wt.shape[0] != channels or (
        groups > 1 and (not channels.is_constant or channels.const % groups)
    ):
        raise ShapeError(
            f"{op}: weight {wt.name} {shape_text(wt.shape)} does not fit input "
            f"{x.name} {shape_text(x.shape)} because dim 0 of the weight must equal "
            f"the {channels} input channels, divisible by groups={groups}. Pass a "
            f"weight of shape ({channels}, out_channels / groups, KH, KW)."
        )
    kernel = _concrete_kernel(op, wt)
    out_ch = og * groups
    b = _bias(op, bias, out_ch, acc)
    sizes = tuple(
        (x.shape[2 + d] - 1) * stride[d]
        - 2 * pads[d]
        + dilation[d] * (kernel[d] - 1)
        + extra[d]
        + 1
        for d in range(2)
    )
    for d, size in enumerate(sizes):
        if size.is_constant and size.const < 1:
            raise ShapeError(
                f"{op}: the output would be empty because padding {pads[d]} removes "
                f"more than the {'HW'[d]} the transposed convolution produces. Pad less."
            )
    shape = (x.shape[0], out_ch, sizes[0], sizes[1])
    cg = channels.const // groups if groups > 1 else None
    rc = pc.reduce_axis(channels if cg is None else cg, "rc")
    rh = pc.reduce_axis(kernel[0], "rh")
    rw = pc.reduce_axis(kernel[1], "rw")

    def taps(y, xx):
        return (
            y + pads[0] - rh * dilation[0],
            xx + pads[1] - rw * dilation[1],
        )

    def term(n, o, y, xx):
        ic = rc if cg is None else (o // og.const) * cg + rc
        oc = o if cg is None else o % og.const
        ty, tx = taps(y, xx)
        value = x[n, ic, ty // stride[0], tx // stride[1]]
        return _widen(value, acc) * _widen(wt[ic, oc, rh, rw], acc)

    def where(n, o, y, xx):
        ty, tx = taps(y, xx)
        cond = (ty >= 0) & (ty < x.shape[2] * stride[0]) & (tx >= 0)
        cond = cond & (tx < x.shape[3] * stride[1])
        for t, s in ((ty, stride[0]), (tx, stride[1])):
            if s > 1:
                cond = cond & (t % s).eq(0)
        return cond

    init = (lambda n, o, y, xx: b[o]) if b is not None else None
    return contraction(out_name, shape, acc, ("n", "o", "h", "w"), term, init, where)
