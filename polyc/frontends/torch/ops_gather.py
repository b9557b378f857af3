"""ATen gathers -> :mod:`polyc.ops.gather`: ``embedding``, ``index_select``,
``gather`` and ``index.Tensor`` with one index tensor (``x[idx]``,
``x[:, idx]``). Each reads its table through a data-dependent index (an indirect
DMA on the accelerator, an indexed load on the host), costing the rows it looks
up; an index out of range raises, as in PyTorch.
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops import nn


@lowering("aten.embedding")
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad=False, sparse=False):
    return nn.embedding(indices, weight, name=ctx.name)


@lowering("aten.index_select")
def index_select(ctx, x, dim, index):
    return nn.index_select(x, dim, index, name=ctx.name)


@lowering("aten.gather")
def gather(ctx, x, dim, index, sparse_grad=False):
    return nn.gather(x, dim, index, name=ctx.name)


@lowering("aten.index")
def index(ctx, x, indices):
    """``x[idx]`` with one integer index tensor, after leading ``:``; a negative
    index counts from the end, as in PyTorch."""
    given = [(d, t) for d, t in enumerate(indices) if t is not None]
    if len(given) != 1 or any(t is not None for t in indices[: given[0][0]]):
        raise ctx.error(
            "indexing with several index tensors is not supported because polyc "
            "gathers along one dimension at a time",
            "Index one dimension per step (x[idx][:, jdx])",
        )
    d, idx = given[0]
    if not isinstance(idx, Tensor) or idx.dtype.name not in ("int32", "int64"):
        raise ctx.error(
            "indexing with a boolean mask is not supported because the result's "
            "size would depend on the data",
            "Use torch.where(mask, x, other) to keep the shape",
        )
    n = x.shape[d]
    shape = x.shape[:d] + idx.shape + x.shape[d + 1 :]
    k = idx.ndim

    def body(*ix):
        i = idx[tuple(ix[d : d + k])]
        at = pc.select(i < 0, i + n, i)  # PyTorch's negative indices
        return x[tuple(ix[:d]) + (at,) + tuple(ix[d + k :])]

    return pc.compute(ctx.name, shape, body)
