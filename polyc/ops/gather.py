"""Gathers: embedding, index_select and gather along one dimension.

Each reads its table through a data-dependent index (:class:`polyc.ir.expr.
Gather`): ``out[..., e] = weight[{indices[...]}, e]``. The lookup costs what it
reads (one row per index), where the one-hot contraction it replaces cost
indices x rows x dim MACs and read the whole table; on the accelerator it is an
indirect DMA (:mod:`schedules.accel.gather`), on the host an indexed load. An
index outside the table is an error in every backend, as in PyTorch
(:class:`polyc.errors.IndexRangeError` from the interpreter and the host,
``SimulationError`` from the simulator).
"""

from __future__ import annotations

from polyc.errors import ArgumentError, ShapeError
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import axis, check_dtype, fresh, shape_text, tensor

_INDEX_DTYPES = ("int32", "int64")


def embedding(
    indices: Tensor, weight: Tensor, padding_idx=None, max_norm=None, name=None
):
    """Rows of ``weight`` ([num_embeddings, dim]) picked by integer ``indices``:
    ``out[..., e] = weight[{indices[...]}, e]`` (a gather). ``padding_idx`` only
    matters for training and is accepted.

    Raises:
        DTypeError: ``indices`` not int32/int64.
        ShapeError: ``weight`` not 2-D.
        ArgumentError: ``max_norm`` (renormalisation is not supported).
    """
    op = "embedding"
    idx = tensor(op, indices, "indices")
    w = tensor(op, weight, "weight")
    check_dtype(op, idx, _INDEX_DTYPES)
    check_dtype(op, w)
    if max_norm is not None:
        raise ArgumentError(
            f"{op}: max_norm={max_norm!r} is not supported because renormalising "
            "rows writes the table. Pass max_norm=None."
        )
    if w.ndim != 2:
        raise ShapeError(
            f"{op}: weight {w.name} has shape {shape_text(w.shape)} but embedding "
            "needs [num_embeddings, embedding_dim] because it looks up rows. Reshape "
            "the table."
        )
    n = idx.ndim
    return pc.compute(
        fresh(op, name),
        idx.shape + (w.shape[1],),
        lambda *ix: w[idx[tuple(ix[:n])], ix[n]],
    )


def index_select(input: Tensor, dim: int, index: Tensor, name=None) -> Tensor:
    """``torch.index_select``: ``out`` is ``input`` with dimension ``dim``
    replaced by the entries ``index`` (1-D) picks:
    ``out[.., i, ..] = input[.., {index[i]}, ..]``.

    Raises:
        DTypeError: ``index`` not int32/int64.
        ShapeError: ``index`` not 1-D (or 0-D).
    """
    op = "index_select"
    x = tensor(op, input)
    idx = tensor(op, index, "index")
    check_dtype(op, idx, _INDEX_DTYPES)
    d = axis(op, dim, x.ndim)
    if idx.ndim > 1:
        raise ShapeError(
            f"{op}: index {idx.name} has shape {shape_text(idx.shape)} but "
            "index_select takes a 1-D index because it picks entries of one "
            "dimension. Flatten the index, or use gather."
        )
    count = idx.shape[0] if idx.ndim else 1
    shape = x.shape[:d] + (count,) + x.shape[d + 1 :]

    def body(*ix):
        at = idx[ix[d]] if idx.ndim else idx[()]
        return x[tuple(ix[:d]) + (at,) + tuple(ix[d + 1 :])]

    return pc.compute(fresh(op, name), shape, body)


def gather(input: Tensor, dim: int, index: Tensor, name=None) -> Tensor:
    """``torch.gather``: ``out[i0, .., ik] = input[i0, .., {index[i0, .., ik]},
    .., ik]`` with the data-dependent index in dimension ``dim``; ``out`` has
    ``index``'s shape, which is no larger than ``input``'s in the other
    dimensions.

    Raises:
        DTypeError: ``index`` not int32/int64.
        ShapeError: ``index`` of another rank, or larger than ``input`` in a
            dimension other than ``dim``.
    """
    op = "gather"
    x = tensor(op, input)
    idx = tensor(op, index, "index")
    check_dtype(op, idx, _INDEX_DTYPES)
    d = axis(op, dim, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(
            f"{op}: index {idx.name} has {idx.ndim} dimensions but {x.name} has "
            f"{x.ndim} because gather pairs them dimension by dimension. Give the "
            "index the input's rank."
        )
    for k in range(x.ndim):
        if k == d:
            continue
        a, b = idx.shape[k], x.shape[k]
        if a.is_constant and b.is_constant and a.const > b.const:
            raise ShapeError(
                f"{op}: index {idx.name} is {a} long in dimension {k} but {x.name} "
                f"only {b} because gather reads input at the index's positions "
                "there. Shrink the index."
            )
    return pc.compute(
        fresh(op, name),
        idx.shape,
        lambda *ix: x[tuple(ix[:d]) + (idx[tuple(ix)],) + tuple(ix[d + 1 :])],
    )


__all__ = ["embedding", "gather", "index_select"]
