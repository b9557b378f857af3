"""An int8 CNN block on edge-npu: three 3x3 conv + requantize + ReLU layers with
per-channel weight scales and int8 activations between them, bit-exact with a numpy
reference and with PyTorch's quantized conv (``torch.ops.quantized.conv2d_relu``,
qnnpack engine)::

    .venv/bin/python examples/int8_chain.py

It runs the block twice: with the requantization on the vector unit (edge-npu as
shipped) and fused into the MAC array's output path (the same config with
``[mac_array] requantize = true``), and prints cycles, engine busy time and DRAM
bytes; then one layer with its int32 accumulator as the output beside the same
layer requantized, to show the output traffic drop (4x).

Quantization follows PyTorch's convention: activations are uint8 with a zero point
(here stored as int8 ``q - 128``, so the zero point is ``zp - 128``), weights int8
per output channel with zero point 0, and the input zero point is folded into the
int32 bias (valid convolutions: no padding tap reads anything but the input).
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from dataclasses import dataclass

import numpy as np

import polyc
from polyc import compute as pc
from polyc.ops import nn, quant

#: (input channels, output channels) of each 3x3 valid convolution
LAYERS = ((8, 16), (16, 16), (16, 8))
SIZE = 14  # input height and width


@dataclass(frozen=True)
class Layer:
    weight: np.ndarray  # int8 [out, in, 3, 3]
    weight_scale: np.ndarray  # float64 [out]
    out_scale: float
    out_zp: int  # uint8 convention (0..255)


@dataclass(frozen=True)
class Chain:
    x: np.ndarray  # uint8 [1, C, H, W]
    x_scale: float
    x_zp: int  # uint8 convention
    layers: tuple[Layer, ...]


def make(seed: int = 0) -> Chain:
    """Random data, weights and scales (the scales keep outputs away from
    all-saturated, so ties, clamps and ordinary values all occur)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (1, LAYERS[0][0], SIZE, SIZE)).astype(np.uint8)
    layers = []
    for cin, cout in LAYERS:
        w = rng.integers(-128, 128, (cout, cin, 3, 3)).astype(np.int8)
        layers.append(
            Layer(w, rng.uniform(2e-3, 6e-3, cout), float(rng.uniform(0.2, 0.4)), 0)
        )
    return Chain(x, 0.02, 128, tuple(layers))


def kernel(chain: Chain, layers: int | None = None, int32_out: bool = False):
    """The block (its first ``layers`` layers) as one kernel: inputs ``x``,
    ``w<i>``, ``b<i>``, ``m<i>``; output ``y``, int8, or with ``int32_out`` the
    last layer's int32 accumulator (for comparison)."""
    nn.reset_names()
    chosen = chain.layers[:layers]
    t = pc.placeholder("x", chain.x.shape, "int8")
    holders = [t]
    for i, layer in enumerate(chosen):
        cout = layer.weight.shape[0]
        w = pc.placeholder(f"w{i}", layer.weight.shape, "int8")
        b = pc.placeholder(f"b{i}", (cout,), "int32")
        holders += [w, b]
        last = i == len(chosen) - 1
        if last and int32_out:
            t = nn.conv2d(t, w, b, name="y")
            break
        m = pc.placeholder(f"m{i}", (cout,), "float32")
        holders.append(m)
        zp = layer.out_zp - 128
        acc = nn.conv2d(t, w, b)
        t = nn.requantize(acc, m, zp, relu=True, name="y" if last else None)
    return pc.kernel("int32_out" if int32_out else "int8_block", [t], holders)


def inputs(chain: Chain, layers: int | None = None, int32_out: bool = False):
    """The kernel's inputs: int8 data, biases with the input zero point folded in,
    float32 multipliers (computed as PyTorch does)."""
    out = {"x": (chain.x.astype(np.int16) - 128).astype(np.int8)}
    scale, zp = chain.x_scale, chain.x_zp
    chosen = chain.layers[:layers]
    for i, layer in enumerate(chosen):
        out[f"w{i}"] = layer.weight
        out[f"b{i}"] = quant.fold_zero_point(layer.weight, zp - 128)
        if not (int32_out and i == len(chosen) - 1):
            out[f"m{i}"] = quant.multiplier(scale, layer.weight_scale, layer.out_scale)
        scale, zp = layer.out_scale, layer.out_zp
    return out


def reference(chain: Chain) -> np.ndarray:
    """The block in numpy: exact int64 convolutions and :func:`quant.reference`."""
    data = inputs(chain)
    t = data["x"]
    for i, layer in enumerate(chain.layers):
        acc = _conv(t, data[f"w{i}"]) + data[f"b{i}"].reshape(1, -1, 1, 1)
        t = quant.reference(acc, data[f"m{i}"], layer.out_zp - 128, relu=True)
    return t


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    win = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), (3, 3), (2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.int64)).astype(np.int32)


def torch_reference(chain: Chain) -> np.ndarray:
    """The block with PyTorch's quantized conv2d_relu (qnnpack: exact int32
    accumulation for every uint8 input), as int8 ``q - 128``."""
    import torch

    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensors are deprecated
            t = torch._make_per_tensor_quantized_tensor(
                torch.from_numpy(chain.x), chain.x_scale, chain.x_zp
            )
            for layer in chain.layers:
                w = torch._make_per_channel_quantized_tensor(
                    torch.from_numpy(layer.weight),
                    torch.from_numpy(layer.weight_scale),
                    torch.zeros(len(layer.weight_scale), dtype=torch.long),
                    0,
                )
                packed = torch.ops.quantized.conv2d_prepack(
                    w, None, [1, 1], [0, 0], [1, 1], 1
                )
                t = torch.ops.quantized.conv2d_relu(
                    t, packed, layer.out_scale, layer.out_zp
                )
            return (t.int_repr().numpy().astype(np.int16) - 128).astype(np.int8)
    finally:
        torch.backends.quantized.engine = old


def fused(spec_name: str = "edge-npu"):
    """``spec_name`` with the requantization in the MAC array's output path."""
    import accelerator

    spec = accelerator.load_config(spec_name)
    mac = dataclasses.replace(spec.mac_array, requantize=True)
    return dataclasses.replace(spec, name=f"{spec.name}+requantize", mac_array=mac)


def main(argv: list[str] | None = None) -> int:
    chain = make()
    k, data = kernel(chain), inputs(chain)
    ref, ref_torch = reference(chain), torch_reference(chain)
    exact = np.array_equal(ref, ref_torch)
    print(f"numpy reference == PyTorch quantized conv2d_relu (qnnpack): {exact}")
    rows = []
    for spec in ("edge-npu", fused()):
        out, rep = polyc.compile(k, config=spec).run(**data)
        y = out["y"]
        name = spec if isinstance(spec, str) else spec.name
        busy = {e.name: e.busy for e in rep.engines}
        dram = rep.levels[0]
        same = y.dtype == np.int8 and np.array_equal(y, ref)
        exact = exact and same
        rows.append(
            (name, rep.cycles, busy["mac_array"], busy["vector"], dram.bytes_read,
             dram.bytes_written, same)
        )  # fmt: skip
    print(f"{'config':24} {'cycles':>8} {'mac busy':>9} {'vector':>7} "
          f"{'DRAM read':>10} {'written':>8}  bit-exact")  # fmt: skip
    for r in rows:
        print(f"{r[0]:24} {r[1]:>8,} {r[2]:>9,} {r[3]:>7,} {r[4]:>10,} {r[5]:>8,}  "
              f"{r[6]}")  # fmt: skip
    one = {}
    for label, int32_out in (("int32 accumulator out", True), ("int8 out", False)):
        kk, d = kernel(chain, 1, int32_out), inputs(chain, 1, int32_out)
        _, rep = polyc.compile(kk, config="edge-npu").run(**d)
        one[label] = rep.levels[0].bytes_written
        print(f"layer 1 alone, {label:21}: DRAM written {one[label]:>6,} B")
    ratio = one["int32 accumulator out"] / one["int8 out"]
    print(f"output traffic: {ratio:.2f}x less with the requantization epilogue")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
