"""PyTorch's eager quantized modules (``torch.ao.nn.quantized``) as an int8 Kernel.

``torch.export`` cannot trace these modules (their packed weights are TorchScript
objects), so this frontend reads a chain of them directly::

    model = nn.Sequential(nnq.Quantize(0.05, 128, torch.quint8),
                          nniq.ConvReLU2d(...), nnq.Conv2d(...), nnq.DeQuantize())
    q = from_quantized(model, (1, 3, 32, 32))
    y = polyc.interpret(q.kernel, {"arg0": q.to_int8(x_quint8)})["out"]

Supported, in a chain (``nn.Sequential`` or any module whose children run one
after the other): ``Quantize`` (first: its scale and zero point describe the
input), ``Conv2d``/``ConvReLU2d`` (any stride, padding, dilation, groups),
``Linear``/``LinearReLU``, ``ReLU``, ``Flatten``, and ``DeQuantize`` (last,
optional). Each layer becomes an int8 contraction into int32 and a
:func:`polyc.ops.quant.requantize` with the layer's output scale and zero point
and a fused ReLU where the module has one, so the accelerator scheduler keeps the
accumulator on chip and writes int8.

Values: PyTorch's activations are ``quint8`` with a zero point; the kernel holds
them as int8 ``q - 128`` (zero point ``zp - 128``), input ``arg0`` and output
``out`` alike (:meth:`Quantized.to_int8`, :meth:`Quantized.to_uint8`). Weights must
be ``qint8`` with zero point 0 (PyTorch's default observers). The input zero point
folds into the int32 bias; padding is filled with the zero point (real 0), as
PyTorch does. A float bias is quantized as qnnpack quantizes it (round half to
even of ``bias / (input_scale * weight_scale)`` into int32), so results are
bit-exact with the qnnpack engine; fbgemm adds the float bias after its int32
accumulation, which an int32 bias matches only when the bias is a multiple of the
accumulator's scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyc.errors import FrontendError
from polyc.ir.kernel import Kernel
from polyc.lang import compute as pc
from polyc.ops import nn, quant


@dataclass(frozen=True)
class Quantized:
    """The imported kernel and the quantization of its input and output."""

    kernel: Kernel
    input_scale: float
    input_zero_point: int  # uint8 convention
    output_scale: float
    output_zero_point: int  # uint8 convention

    @staticmethod
    def to_int8(q) -> np.ndarray:
        """A ``quint8`` tensor's values as the kernel's int8 (``q - 128``)."""
        return (q.int_repr().numpy().astype(np.int16) - 128).astype(np.int8)

    @staticmethod
    def to_uint8(a: np.ndarray) -> np.ndarray:
        """The kernel's int8 values back as PyTorch's uint8 (``a + 128``)."""
        return (np.asarray(a).astype(np.int16) + 128).astype(np.uint8)


def from_quantized(module, input_shape, *, name: str | None = None) -> Quantized:
    """Import a chain of PyTorch quantized modules (see the module docstring).

    Args:
        module: an ``nn.Module`` whose children run in order, the first a
            ``Quantize``.
        input_shape: the shape of the float input the ``Quantize`` takes.
        name: the kernel's name (default: the module's class name).

    Raises:
        FrontendError: a child that is not supported, a chain that does not start
            with ``Quantize``, or weights that are not qint8 with zero point 0.
    """
    import torch

    children = list(module.named_children()) or [("0", module)]
    first = children[0][1]
    if type(first).__name__ != "Quantize":
        raise FrontendError(
            f"from_quantized: {children[0][0]} is a {type(first).__name__} because "
            "the chain does not start by quantizing its input. Put a "
            "torch.ao.nn.quantized.Quantize (a converted QuantStub) first."
        )
    if first.dtype != torch.quint8:
        raise FrontendError(
            f"from_quantized: the input is quantized to {first.dtype} because of its "
            "Quantize module, but activations must be torch.quint8. Quantize to "
            "quint8."
        )
    nn.reset_names()
    x = pc.placeholder("arg0", tuple(input_shape), "int8")
    state = _State(x, float(first.scale), int(first.zero_point))
    data: dict[str, np.ndarray] = {}
    body = [(n, c) for n, c in children[1:] if type(c).__name__ != "DeQuantize"]
    if not body:
        raise FrontendError(
            "from_quantized: the chain computes nothing because it has no module "
            "between Quantize and DeQuantize. Add the quantized layers."
        )
    for i, (label, child) in enumerate(body):
        state.name = "out" if i == len(body) - 1 else None
        _lower(label, child, state, data)
    kernel = pc.kernel(name or type(module).__name__, [state.t], [x])
    used = {k: v for k, v in data.items() if k in kernel.arrays}
    return Quantized(
        kernel.with_data(used),
        float(first.scale),
        int(first.zero_point),
        state.scale,
        state.zp,
    )


class _State:
    """The chain so far: the int8 tensor and its quantization (uint8 zero point)."""

    def __init__(self, t, scale: float, zp: int):
        self.t, self.scale, self.zp = t, scale, zp
        self.name: str | None = None  # the name of the next tensor ("out": last)


def _lower(label: str, child, st: _State, data: dict) -> None:
    kind = type(child).__name__
    if kind in ("Conv2d", "ConvReLU2d") and hasattr(child, "_weight_bias"):
        _conv(label, child, st, data, relu=kind == "ConvReLU2d")
    elif kind in ("Linear", "LinearReLU") and hasattr(child, "_weight_bias"):
        _linear(label, child, st, data, relu=kind == "LinearReLU")
    elif kind == "ReLU":  # real 0 is the zero point
        st.t = nn.maximum(st.t, st.zp - 128, name=st.name)
    elif kind == "Flatten":
        st.t = nn.flatten(st.t, child.start_dim, child.end_dim, name=st.name)
    else:
        raise FrontendError(
            f"from_quantized: {label} is a {kind} because the chain has it, but "
            "polyc lowers only Quantize, Conv2d, ConvReLU2d, Linear, LinearReLU, "
            "ReLU, Flatten and DeQuantize. Keep that module outside the chain."
        )


def _weights(label: str, child, st: _State):
    import torch

    w, bias = child._weight_bias()
    if w.dtype != torch.qint8:
        raise FrontendError(
            f"from_quantized: {label}'s weight is {w.dtype} because of its observer, "
            "but polyc takes qint8 weights. Quantize the weights to qint8."
        )
    if w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
        scales = w.q_per_channel_scales().numpy().astype(np.float64)
        zps = w.q_per_channel_zero_points().numpy()
    else:
        scales = np.full(w.shape[0], w.q_scale(), np.float64)
        zps = np.array([w.q_zero_point()])
    if np.any(zps != 0):
        raise FrontendError(
            f"from_quantized: {label}'s weight has zero point {int(zps[zps != 0][0])} "
            "because its observer is asymmetric, but polyc takes weights with zero "
            "point 0. Use a symmetric weight observer (PyTorch's default)."
        )
    weight = w.int_repr().numpy().astype(np.int8)
    # qnnpack's bias: round half to even of bias / (input_scale * weight_scale)
    qbias = np.zeros(weight.shape[0], np.int64)
    if bias is not None:
        b = bias.detach().numpy().astype(np.float64)
        qbias = np.rint(b / (st.scale * scales)).astype(np.int64)
    mult = quant.multiplier(st.scale, scales, float(child.scale))
    return weight, qbias, mult


def _conv(label, child, st: _State, data, relu: bool) -> None:
    weight, qbias, mult = _weights(label, child, st)
    if child.padding_mode != "zeros":
        raise FrontendError(
            f"from_quantized: {label} pads with {child.padding_mode!r} because of "
            "its padding_mode, but polyc pads with zeros only. Use "
            "padding_mode='zeros'."
        )
    ph, pw = child.padding
    t = st.t
    if ph or pw:  # PyTorch pads with the zero point (real 0), not with int8 0
        t = nn.pad(t, (pw, pw, ph, ph), value=st.zp - 128)
    # a grouped weight [O, C/groups, ...] sums each channel's own group: the same
    bias = quant.fold_zero_point(weight, st.zp - 128, qbias)
    st.t = nn.conv2d(
        t,
        _bind(data, f"{label}_weight", weight),
        _bind(data, f"{label}_bias", bias),
        child.stride,
        0,
        child.dilation,
        child.groups,
    )
    _requant(label, child, st, data, mult, relu)


def _linear(label, child, st: _State, data, relu: bool) -> None:
    weight, qbias, mult = _weights(label, child, st)
    bias = quant.fold_zero_point(weight, st.zp - 128, qbias)
    st.t = nn.linear(
        st.t,
        _bind(data, f"{label}_weight", weight),
        _bind(data, f"{label}_bias", bias),
    )
    _requant(label, child, st, data, mult, relu)


def _requant(label, child, st: _State, data, mult, relu: bool) -> None:
    zp = int(child.zero_point)
    m = _bind(data, f"{label}_scale", mult)
    st.t = nn.requantize(st.t, m, zp - 128, axis=1, relu=relu, name=st.name)
    st.scale, st.zp = float(child.scale), zp


def _bind(data: dict, name: str, value: np.ndarray):
    key = "m" + name.replace(".", "_")  # child labels may start with a digit
    data[key] = value
    return pc.placeholder(key, value.shape, str(value.dtype))
