"""Fold inference batch norms into the convolutions that feed them.

``bn(conv(x, W, b)) = conv(x, W * s, (b - mean) * s + beta)`` with
``s = gamma / sqrt(var + eps)`` per output channel. It holds when the batch norm runs
with its running statistics (inference), every parameter is a constant, and the
convolution's output is read by the batch norm alone. The folded weights are computed
in float64 and rounded once to the weights' dtype; a batch norm that cannot be folded
is lowered on its own. A bfloat16 convolution keeps its batch norm: eager PyTorch
rounds the convolution's output to bfloat16 before normalising it, and weights scaled
and rounded to bfloat16 would give results several bfloat16 units away from it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from polyc.frontends.torch.lower import Placeholder

CONVOLUTIONS = {"aten.conv2d.default", "aten.convolution.default"}
BATCH_NORMS = {
    # op -> positions of (weight, bias, running_mean, running_var) and of eps
    "aten._native_batch_norm_legit_no_training.default": ((1, 2, 3, 4), 6),
    "aten.batch_norm.default": ((1, 2, 3, 4), 7),
}


def fold_batch_norms(graph, bindings: Mapping[str, Placeholder]) -> dict:
    """``{"conv": {conv_node: (W', b')}, "absorbed": {bn_node: conv_node}}``."""
    conv: dict = {}
    absorbed: dict = {}
    for node in graph.nodes:
        producer = node.args[0] if node.op == "call_function" and node.args else None
        if _foldable(node, producer):
            folded = _fold(node, producer, bindings)
            if folded is not None:
                conv[producer] = folded
                absorbed[node] = producer
    return {"conv": conv, "absorbed": absorbed}


def _foldable(node, producer) -> bool:
    """An inference batch norm whose input is a convolution read by it alone."""
    target = str(node.target)
    if target not in BATCH_NORMS:
        return False
    if target == "aten.batch_norm.default" and node.args[5]:
        return False  # training mode
    return (
        getattr(producer, "op", None) == "call_function"
        and str(producer.target) in CONVOLUTIONS
        and len(producer.users) == 1
        and not _transposed(producer)
        and str(getattr(producer.meta.get("val"), "dtype", "")) != "torch.bfloat16"
    )


def _fold(node, producer, bindings):
    """The folded (weight, bias), or None when a parameter is not a constant."""
    (gi, bi, mi, vi), ei = BATCH_NORMS[str(node.target)]
    weight = _const(producer.args[1], bindings)
    bias_arg = producer.args[2] if len(producer.args) > 2 else None
    bias = _const(bias_arg, bindings)
    gamma, beta, mean, var = (_const(node.args[i], bindings) for i in (gi, bi, mi, vi))
    missing = (
        weight is None
        or mean is None
        or var is None
        or (bias_arg is not None and bias is None)
        or (node.args[gi] is not None and gamma is None)
        or (node.args[bi] is not None and beta is None)
    )
    if missing:
        return None
    eps = float(node.args[ei]) if len(node.args) > ei else 1e-5
    return _folded(weight, bias, gamma, beta, mean, var, eps)


def _transposed(node) -> bool:
    return str(node.target) == "aten.convolution.default" and bool(node.args[6])


def _const(arg, bindings) -> np.ndarray | None:
    if arg is None or not hasattr(arg, "op") or arg.op != "placeholder":
        return None
    b = bindings.get(arg.name)
    return np.asarray(b.value) if b is not None and b.kind == "const" else None


def _folded(weight, bias, gamma, beta, mean, var, eps):
    w = weight.astype(np.float64)
    channels = w.shape[0]
    g = np.ones(channels) if gamma is None else gamma.astype(np.float64)
    s = g / np.sqrt(var.astype(np.float64) + eps)
    b0 = np.zeros(channels) if bias is None else bias.astype(np.float64)
    shift = np.zeros(channels) if beta is None else beta.astype(np.float64)
    w_new = w * s.reshape((channels,) + (1,) * (w.ndim - 1))
    b_new = (b0 - mean.astype(np.float64)) * s + shift
    return w_new.astype(weight.dtype), b_new.astype(weight.dtype)
