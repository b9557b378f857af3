"""PT2E-quantized models: quantize/dequantize pairs folded into int8 kernels.

A model quantized with PyTorch 2 export quantization (``prepare_pt2e``, calibration,
``convert_pt2e``) computes in float32 between ``quantized_decomposed`` quantize and
dequantize nodes: PyTorch's reference representation of an int8 model::

    xq = quantize_per_tensor(x, s_x, z_x, -128, 127, int8)
    y  = conv2d(dequantize_per_tensor(xq, s_x, z_x, ...),
                dequantize_per_channel(w_int8, s_w, 0, axis=0, ...), bias)
    yq = quantize_per_tensor(relu(y), s_y, z_y, -128, 127, int8)

:func:`fold` rewrites a copy of the graph so that polyc computes it in int8:

- a ``conv2d``/``convolution``/``linear`` from a dequantized int8 input with
  constant int8 weights (zero point 0, per tensor or per output channel), through
  an optional ``relu``/``hardtanh``/``clamp``, into a ``quantize_per_tensor``
  becomes one :func:`int8_conv2d`/:func:`int8_linear` node: an int8 contraction
  into int32 with the input zero point folded into the int32 bias, then
  :func:`polyc.ops.quant.requantize` (per-channel multipliers, the output zero
  point, the activation folded into the clamp); a ``matmul``/``bmm``/``mm`` of two
  dequantized int8 tensors becomes :func:`int8_matmul` (the zero points'
  cross terms subtracted with the operands' row and column sums);
- an element-wise region (``add``, ``sub``, ``mul``, ``relu``, ``hardtanh``,
  ``clamp``) from dequantized int8 tensors into a ``quantize_per_tensor`` becomes
  one :func:`int8_elementwise` node: dequantize, the float32 ops and quantize in
  one statement, the arithmetic of the reference;
- a value-preserving op (flatten, view, permute, max pool, cat, ...) between a
  dequantize and a quantize with the same parameters runs on the int8 values, and
  a quantize of a dequantize with the same parameters is the int8 tensor itself.

Every other quantize and dequantize is lowered as the reference defines it
(:mod:`polyc.frontends.torch.ops_quant`), so whatever is not folded computes in
float32 as the converted model does. :func:`check` refuses what polyc cannot hold
(dynamic quantization, quantized dtypes other than int8) before anything else.
"""

from __future__ import annotations

from polyc.errors import FrontendError
from polyc.frontends.torch import source as src

QD = "quantized_decomposed."
Q = QD + "quantize_per_tensor.default"
DQ = QD + "dequantize_per_tensor.default"
Q_CH = QD + "quantize_per_channel.default"
DQ_CH = QD + "dequantize_per_channel.default"
#: the quantized_decomposed ops polyc imports (static quantization)
SUPPORTED = (Q, DQ, Q_CH, DQ_CH)

_RELU = ("aten.relu.default", "aten.relu_.default")
_CLAMP = ("aten.hardtanh.default", "aten.clamp.default")
_CONV = ("aten.conv2d.default", "aten.convolution.default")
_LINEAR = "aten.linear.default"
_MATMUL = ("aten.matmul.default", "aten.bmm.default", "aten.mm.default")
#: element-wise ops folded into one int8 statement: name -> kind
_ELEMENTWISE = {
    "aten.add.Tensor": "add",
    "aten.add.Scalar": "add",
    "aten.sub.Tensor": "sub",
    "aten.sub.Scalar": "sub",
    "aten.mul.Tensor": "mul",
    "aten.mul.Scalar": "mul",
    **{r: "relu" for r in _RELU},
    **{c: "clamp" for c in _CLAMP},
}
#: ops that move or select int8 values without changing them: with the same
#: quantization on both sides, they commute with dequantize
_PASS_THROUGH = {
    "aten.flatten.using_ints",
    "aten.view.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.permute.default",
    "aten.transpose.int",
    "aten.t.default",
    "aten.squeeze.dim",
    "aten.squeeze.dims",
    "aten.unsqueeze.default",
    "aten.clone.default",
    "aten.contiguous.default",
    "aten.expand.default",
    "aten.slice.Tensor",
    "aten.select.int",
    "aten.max_pool2d.default",
    "aten.cat.default",
}


# the targets of folded nodes (lowered by ops_quant; never run by torch) --------------


def int8_conv2d(x, weight, weight_scale, bias, **params):
    """An int8 convolution with its requantization (see :func:`fold`)."""
    raise NotImplementedError("lowered by polyc.frontends.torch.ops_quant")


def int8_linear(x, weight, weight_scale, bias, **params):
    """An int8 linear layer with its requantization (see :func:`fold`)."""
    raise NotImplementedError("lowered by polyc.frontends.torch.ops_quant")


def int8_matmul(a, b, **params):
    """A matmul of two int8 tensors with its requantization (see :func:`fold`)."""
    raise NotImplementedError("lowered by polyc.frontends.torch.ops_quant")


def int8_elementwise(leaves, expr, **params):
    """Dequantize, element-wise float32 ops, quantize (see :func:`fold`)."""
    raise NotImplementedError("lowered by polyc.frontends.torch.ops_quant")


# checks ---------------------------------------------------------------------------


def is_quantized(graph) -> bool:
    """Whether ``graph`` has quantized_decomposed nodes."""
    return any(_name(n).startswith(QD) for n in graph.nodes)


def check(graph, operation: str = "from_torch") -> None:
    """Refuse quantized_decomposed nodes polyc cannot import.

    Raises:
        FrontendError: for dynamic quantization (scales chosen at run time), a
            quantized dtype other than int8 (int32 only for constants, e.g. a
            quantized bias), or a quantized_decomposed op polyc does not know.
    """
    import torch

    for node in graph.nodes:
        name = _name(node)
        if not name.startswith(QD):
            continue
        if name not in SUPPORTED:
            why = (
                "it chooses scales at run time (dynamic quantization)"
                if "choose_qparams" in name or ".tensor" in name or "token" in name
                else "polyc imports per-tensor and per-channel static quantization"
            )
            raise _error(
                operation,
                node,
                f"is not supported because {why}",
                "Quantize with a static int8 quantizer (XNNPACKQuantizer with "
                "get_symmetric_quantization_config(is_per_channel=True), "
                "is_dynamic=False)",
            )
        dtype = node.args[5] if name in (Q, DQ) else node.args[6]
        if dtype == torch.int8 or (dtype == torch.int32 and _is_constant(node)):
            continue
        raise _error(
            operation,
            node,
            f"quantizes to {dtype} but polyc computes quantized values in int8 "
            "(int8 activations and weights, int32 accumulators)",
            "Use a quantizer whose activations and weights are torch.int8, e.g. "
            "XNNPACKQuantizer with get_symmetric_quantization_config()",
        )


def _error(operation: str, node, what: str, fix: str) -> FrontendError:
    loc = src.node_location(node)
    where = f"node {node.name}" + (f" at {loc}" if loc else "")
    return FrontendError(f"{operation}: {_name(node)} ({where}) {what}. {fix}.")


# the rewrite ------------------------------------------------------------------------


def fold(graph, bindings):
    """``(graph', bindings')``: a copy of ``graph`` with the int8 patterns of the
    module docstring folded, and ``bindings`` under the copy's placeholder names.

    ``bindings`` maps placeholder names to what they are bound to (constants must
    be known to fold a weight). ``graph`` itself is not changed.
    """
    g, bindings = _copy(graph, bindings)
    for node in list(g.nodes):
        if _name(node) == Q and node.users:
            new = _fold_quantize(g, node, bindings)
            if new is not None:
                node.replace_all_uses_with(new)
    g.eliminate_dead_code()
    return g, bindings


def _copy(graph, bindings):
    """The copy and its bindings: the copy may rename a placeholder (FX renames
    one called ``input``, a Python builtin)."""
    import torch.fx

    g = torch.fx.Graph()
    values: dict = {}
    out = g.graph_copy(graph, values)
    g.output(out)
    renamed = {
        values[n].name: bindings[n.name]
        for n in graph.nodes
        if n.op == "placeholder" and n.name in bindings
    }
    return g, renamed


def _fold_quantize(g, q, bindings):
    out = _qparams(q)
    if out is None:
        return None
    value = q.args[0]
    if _name(value) == DQ and _qparams(value) == out:
        return value.args[0]  # q(dq(x)) with the same parameters is x
    for rule in (_contraction, _passthrough, _elementwise):
        made = rule(g, q, out, bindings)
        if made is not None:
            return made
    return None


def _qparams(node) -> tuple | None:
    """``(scale, zero_point, qmin, qmax)`` of a per-tensor int8 quantize or
    dequantize with Python-number parameters, else None."""
    import torch

    if _name(node) not in (Q, DQ) or node.args[5] != torch.int8:
        return None
    scale, zp, qmin, qmax = node.args[1:5]
    if not all(isinstance(v, (int, float)) for v in (scale, zp, qmin, qmax)):
        return None
    return (float(scale), int(zp), int(qmin), int(qmax))


def _node(g, q, like, target, args, kwargs=None):
    with g.inserting_before(q):
        new = g.call_function(target, tuple(args), kwargs or {})
    new.meta = dict(like.meta)
    new.meta["val"] = q.meta.get("val")
    return new


# contractions ---------------------------------------------------------------------


def _contraction(g, q, out, bindings):
    scale, zp, qmin, qmax = out
    act, c = _activation(q.args[0])
    if act is False or not _is_call(c) or len(c.users) != 1:
        return None
    name = _name(c)
    lo, hi = qmin, qmax
    if act is not None:
        lo, hi = clamp_range(act[1], act[2], scale, zp, qmin, qmax)
    if name in _MATMUL:
        return _matmul(g, q, c, (scale, zp, lo, hi))
    if name in _CONV:
        params = _conv_params(c)
        target = int8_conv2d
    elif name == _LINEAR:
        params, target = {}, int8_linear
    else:
        return None
    if params is None:
        return None
    x, w, b = (list(c.args) + [None])[:3]
    xp = _qparams(x)
    weight = _weight(w, bindings)
    if xp is None or weight is None or not _constant_or_none(b, bindings):
        return None
    src_w, w_scale = weight
    params.update(
        x_scale=xp[0],
        x_zero_point=xp[1],
        out_scale=scale,
        out_zero_point=zp,
        qmin=lo,
        qmax=hi,
    )
    return _node(g, q, c, target, (x.args[0], src_w, w_scale, b), params)


def _matmul(g, q, c, out):
    """A matmul of two dequantized int8 tensors (activations: any zero points)
    with the same batch dims, into the quantize ``out`` (scale, zero point,
    range)."""
    a, b = c.args[:2]
    pa, pb = _qparams(a), _qparams(b)
    if pa is None or pb is None or _name(a) != DQ or _name(b) != DQ:
        return None
    va, vb = a.meta.get("val"), b.meta.get("val")
    if va is None or vb is None or va.dim() < 2 or va.dim() != vb.dim():
        return None
    if tuple(va.shape[:-2]) != tuple(vb.shape[:-2]):
        return None  # broadcast batch dims: lowered in float as the reference is
    scale, zp, lo, hi = out
    params = {
        "a_scale": pa[0],
        "a_zero_point": pa[1],
        "b_scale": pb[0],
        "b_zero_point": pb[1],
        "out_scale": scale,
        "out_zero_point": zp,
        "qmin": lo,
        "qmax": hi,
    }
    return _node(g, q, c, int8_matmul, (a.args[0], b.args[0]), params)


def _activation(y):
    """``(activation, producer)``: the activation between a contraction and its
    quantize (None when there is none; False for one that cannot fold)."""
    name = _name(y)
    if name not in (*_RELU, *_CLAMP):
        return None, y
    if len(y.users) != 1:
        return False, y
    if name in _RELU:
        return ("clamp", 0.0, None), y.args[0]
    lo, hi = _bounds(y)
    if lo is False:
        return False, y
    return ("clamp", lo, hi), y.args[0]


def _bounds(node):
    """The numeric (lo, hi) of a hardtanh or clamp; (False, False) otherwise."""
    if _name(node) == "aten.hardtanh.default":
        args = list(node.args[1:]) + [-1.0, 1.0][len(node.args) - 1 :]
        lo, hi = args[0], args[1]
    else:
        lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
        hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    ok = all(v is None or isinstance(v, (int, float)) for v in (lo, hi))
    return (lo, hi) if ok else (False, False)


def clamp_range(lo, hi, scale, zp, qmin, qmax) -> tuple[int, int]:
    """The int8 range of a float32 clamp to ``[lo, hi]`` (None: unbounded) followed
    by the reference's quantize: multiplying by a positive float32 and rounding
    are monotone, so clamping before them is clamping to the quantized bounds
    after them, exactly (a range outside ``[qmin, qmax]`` gives a constant)."""
    import numpy as np

    inv = np.float32(1.0 / scale)

    def q(v):
        return int(np.rint(np.float32(v) * inv)) + zp

    qlo = qmin if lo is None else max(qmin, min(qmax, q(lo)))
    qhi = qmax if hi is None else min(qmax, max(qmin, q(hi)))
    return qlo, qhi


def _conv_params(c) -> dict | None:
    args = list(c.args)
    if _name(c) == "aten.convolution.default":
        stride, padding, dilation, transposed, _, groups = args[3:9]
        if transposed or len(stride) != 2:
            return None
    else:
        defaults = [None, None, None, [1, 1], [0, 0], [1, 1], 1]
        args = args + defaults[len(args) :]
        stride, padding, dilation, groups = args[3:7]
        if isinstance(padding, str):
            return None  # "same"/"valid": lowered in float as the reference is
    meta = c.args[0].meta.get("val") if hasattr(c.args[0], "meta") else None
    if meta is None or meta.dim() != 4:
        return None
    return {
        "stride": _pair(stride),
        "padding": _pair(padding),
        "dilation": _pair(dilation),
        "groups": int(groups),
    }


def _pair(v) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    v = list(v)
    return (int(v[0]), int(v[-1])) if len(v) in (1, 2) else (int(v[0]), int(v[1]))


def _weight(w, bindings):
    """``(int8 weight node, scale)`` of a dequantized constant weight with zero point
    0 along the output channels (axis 0): the scale is a float or the node of the
    per-channel scales. None for anything else."""
    import numpy as np

    name = _name(w)
    if name == DQ:
        p = _qparams(w)
        ok = p is not None and p[1] == 0
        return (w.args[0], p[0]) if ok and _is_constant(w.args[0], bindings) else None
    if name != DQ_CH:
        return None
    source, scales, zps, axis = w.args[:4]
    if axis != 0 or not _is_constant(source, bindings):
        return None
    scale_value = _value(scales, bindings)
    if scale_value is None:
        return None
    if zps is not None:
        zp_value = _value(zps, bindings)
        if zp_value is None or np.any(np.asarray(zp_value) != 0):
            return None
    return source, scales


# element-wise regions ----------------------------------------------------------------


def _elementwise(g, q, out, bindings):
    shape = tuple(q.meta["val"].shape) if "val" in q.meta else None
    leaves: list = []
    expr = _region(q.args[0], q.args[0], shape, leaves)
    if expr is None or not leaves:
        return None
    scale, zp, qmin, qmax = out
    params = {"out_scale": scale, "out_zero_point": zp, "qmin": qmin, "qmax": qmax}
    return _node(g, q, q.args[0], int8_elementwise, (leaves, expr), params)


def _region(node, root, shape, leaves):
    """The expression of an element-wise region as nested tuples, or None."""
    if isinstance(node, bool):
        return None
    if isinstance(node, (int, float)):
        return ("const", float(node))
    p = _qparams(node)
    if p is not None and _name(node) == DQ:
        val = node.args[0].meta.get("val")
        if val is None or tuple(val.shape) != shape:
            return None
        leaves.append(node.args[0])
        return ("dq", len(leaves) - 1, p[0], p[1])
    kind = _ELEMENTWISE.get(_name(node))
    if kind is None or (node is not root and len(node.users) != 1):
        return None
    if kind in ("relu", "clamp"):
        inner = _region(node.args[0], root, shape, leaves)
        if kind == "relu":
            lo, hi = 0.0, None
        else:
            lo, hi = _bounds(node)
        if inner is None or lo is False:
            return None
        return ("clamp", inner, _float(lo), _float(hi))
    a = _region(node.args[0], root, shape, leaves)
    b = _region(node.args[1], root, shape, leaves) if a is not None else None
    if b is None:
        return None
    if kind == "mul":
        return ("mul", a, b)
    alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        return None
    return (kind, a, b, float(alpha))


def _float(v):
    return None if v is None else float(v)


# pass-through ------------------------------------------------------------------------


def _passthrough(g, q, out, bindings):
    v = q.args[0]
    if _name(v) not in _PASS_THROUGH:
        return None
    first = v.args[0]
    sources = list(first) if isinstance(first, (list, tuple)) else [first]
    if not sources or any(_qparams(s) != out or _name(s) != DQ for s in sources):
        return None
    ints = [s.args[0] for s in sources]
    head = ints if isinstance(first, (list, tuple)) else ints[0]
    return _node(g, q, v, v.target, (head, *v.args[1:]), dict(v.kwargs))


# constants ---------------------------------------------------------------------------


def _is_call(node) -> bool:
    return getattr(node, "op", None) == "call_function"


def _name(node) -> str:
    if not _is_call(node):
        return ""
    return src.op_name(node.target)


def _is_constant(node, bindings=None) -> bool:
    """A bound constant, or a quantize/dequantize of constants (folded to one)."""
    if getattr(node, "op", None) == "placeholder":
        if bindings is None:
            return False
        b = bindings.get(node.name)
        return b is not None and b.kind == "const"
    if not _is_call(node):
        return False
    if bindings is None:  # check() runs before bindings: its input is a weight
        return _name(node.args[0]) == "" and node.args[0].op == "placeholder"
    args = [a for a in node.args if hasattr(a, "op")]
    return _name(node).startswith(QD) and all(_is_constant(a, bindings) for a in args)


def _constant_or_none(node, bindings) -> bool:
    return node is None or _is_constant(node, bindings)


def _value(node, bindings):
    """The value of a constant node (evaluated with torch for quantize/dequantize
    of constants), or None."""
    import torch

    if getattr(node, "op", None) == "placeholder":
        b = bindings.get(node.name)
        return b.value if b is not None and b.kind == "const" else None
    if not _is_constant(node, bindings):
        return None

    def arg(a):
        if hasattr(a, "op"):
            return torch.as_tensor(_value(a, bindings))
        return a

    return node.target(*map(arg, node.args)).numpy()


__all__ = [
    "SUPPORTED",
    "check",
    "fold",
    "int8_conv2d",
    "int8_elementwise",
    "int8_linear",
    "int8_matmul",
    "is_quantized",
]
