"""ATen scans and index reductions -> :mod:`polyc.ops.scan`: ``cumsum``,
``cumprod``, ``argmax``, ``argmin`` and ``max``/``min`` in all three of their forms
(over everything, along a dim with indices, element-wise against another tensor).
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering
from polyc.ir import dtypes
from polyc.lang.compute import Tensor
from polyc.ops import elementwise, reduce, scan


def _result_dtype(ctx, x: Tensor, dtype) -> Tensor:
    """``x`` cast to the dtype torch gives the result (int scans widen to int64)."""
    want = dtypes.as_dtype(dtype) if dtype is not None else ctx.result_dtype()
    if x.dtype == want:
        return x
    return elementwise.cast(x, want, name=ctx.sub("cast"))


@lowering("aten.cumsum")
def cumsum(ctx, x, dim, *, dtype=None):
    return scan.cumsum(_result_dtype(ctx, x, dtype), dim, name=ctx.name)


@lowering("aten.cumprod")
def cumprod(ctx, x, dim, *, dtype=None):
    return scan.cumprod(_result_dtype(ctx, x, dtype), dim, name=ctx.name)


@lowering("aten.argmax")
def argmax(ctx, x, dim=None, keepdim=False):
    return scan.argmax(x, dim, keepdim, name=ctx.name)


@lowering("aten.argmin")
def argmin(ctx, x, dim=None, keepdim=False):
    return scan.argmin(x, dim, keepdim, name=ctx.name)


def _extremum(which: str):
    """``aten.max`` / ``aten.min``: one packet, three overloads."""
    whole = reduce.amax if which == "max" else reduce.amin
    with_indices = scan.max_with_indices if which == "max" else scan.min_with_indices
    pairwise = elementwise.maximum if which == "max" else elementwise.minimum

    def handler(ctx, x, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            a, b = x, dim
            want = dtypes.as_dtype(ctx.node.meta["val"].dtype)
            a, b = (
                elementwise.cast(v, want, name=ctx.sub(f"cast{n}"))
                if v.dtype != want
                else v
                for n, v in enumerate((a, b))
            )
            return pairwise(a, b, name=ctx.name)
        if dim is None:
            return whole(x, None, False, name=ctx.name)
        return with_indices(x, dim, keepdim, name=ctx.name)

    handler.__name__ = which
    return handler


lowering("aten.max")(_extremum("max"))
lowering("aten.min")(_extremum("min"))
