"""ATen topk, sort and argsort on small sizes -> :mod:`polyc.ops.sort` (affine
code: k passes of an argmax that skips the indices taken, or a ranking of every
pair). A size past the limits is refused here, naming the node and the fix.

Values equal PyTorch's. Indices do too wherever the values along the dim are
distinct; among equal values polyc puts the smaller index first. That is what
``torch.sort`` does on CPU up to 16 elements (and at any size with
``stable=True``); ``torch.topk``'s order of equal values comes from
``std::partial_sort``/``nth_element`` and is unspecified, as is
``sorted=False``'s order, where polyc returns the sorted one.
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering
from polyc.ops import sort as sorting


def _size(x, dim: int) -> int:
    return int(x.shape[dim % x.ndim].const)


@lowering("aten.topk")
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    if k > sorting.TOPK_MAX_K:
        raise ctx.error(
            f"topk with k={k} is too large because polyc lowers topk as k passes "
            f"of an argmax over the {_size(x, dim)} elements (k at most "
            f"{sorting.TOPK_MAX_K})",
            f"Take k <= {sorting.TOPK_MAX_K}, or run the topk in PyTorch on "
            "polyc's output",
        )
    return sorting.topk(x, k, dim, largest, name=ctx.name)


def _check_sort(ctx, x, dim, what: str) -> None:
    size = _size(x, dim)
    if size > sorting.SORT_MAX_N:
        raise ctx.error(
            f"{what} along a dim of {size} elements is too large because polyc "
            f"sorts by ranking every pair of elements (at most "
            f"{sorting.SORT_MAX_N})",
            f"Sort a dim of at most {sorting.SORT_MAX_N}, take the few largest "
            f"with torch.topk (k <= {sorting.TOPK_MAX_K}), or sort in PyTorch on "
            "polyc's output",
        )


@lowering("aten.sort")
def sort(ctx, x, dim=-1, descending=False, *, stable=None):
    _check_sort(ctx, x, dim, "sort")
    return sorting.sort(x, dim, descending, name=ctx.name)


@lowering("aten.argsort")
def argsort(ctx, x, dim=-1, descending=False, *, stable=None):
    _check_sort(ctx, x, dim, "argsort")
    return sorting.sort(x, dim, descending, name=ctx.name)[1]
