"""ATen vector norms and group/instance normalisation -> :mod:`polyc.ops.norm`.

``F.normalize`` arrives as ``linalg_vector_norm``, ``clamp_min`` and ``div``;
``nn.GroupNorm`` as ``native_group_norm``; ``nn.InstanceNorm2d`` in eval mode
without running statistics as ``_native_batch_norm_legit.no_stats`` on the input
(the statistics of each sample and channel) or, after torch's decompositions, on
the input reshaped to ``[1, N * C, H, W]``: either way batch statistics per
channel of what it is given.
"""

from __future__ import annotations

from polyc.frontends.torch.registry import lowering
from polyc.ir import dtypes
from polyc.ops import elementwise, nn, norm


@lowering("aten.linalg_vector_norm")
def linalg_vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = elementwise.cast(x, dtypes.as_dtype(dtype), name=ctx.sub("cast"))
    dims = None if dim is None or len(dim) == 0 else list(dim)
    return norm.vector_norm(x, float(ord), dims, keepdim, name=ctx.name)


@lowering("aten.group_norm")
def group_norm(ctx, x, num_groups, weight=None, bias=None, eps=1e-5, _cudnn=True):
    return norm.group_norm(x, num_groups, weight, bias, eps, name=ctx.name)


@lowering("aten.native_group_norm")
def native_group_norm(ctx, x, weight, bias, n, c, hw, group, eps):
    return (norm.group_norm(x, group, weight, bias, eps, name=ctx.name), None, None)


@lowering("aten.instance_norm")
def instance_norm(
    ctx, x, weight, bias, mean, var, use_input_stats, momentum, eps, _cudnn=True
):
    if not use_input_stats:
        return nn.batch_norm(x, mean, var, weight, bias, eps=eps, name=ctx.name)
    return norm.instance_norm(x, weight, bias, eps, name=ctx.name)


@lowering("aten._native_batch_norm_legit")
def batch_norm_batch_stats(ctx, x, weight, bias, *rest):
    """Normalise each channel by the statistics of the batch: the ``no_stats``
    overload ``(x, weight, bias, training, momentum, eps)``, or the one that also
    updates running statistics, whose update from_torch refuses (a buffer
    mutation) before any op is lowered."""
    eps = rest[-1]
    return (norm.batch_stat_norm(x, weight, bias, eps, name=ctx.name), None, None)
