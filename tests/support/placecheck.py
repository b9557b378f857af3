"""Every op of the library, batched into a few kernels, compiled by the accelerator
scheduler and checked against the interpreter on the untransformed kernel.

``OPS`` maps each kernel-level op of :mod:`polyc.ops` to the tensor-level call that
builds it (the wrappers are these calls with the output named ``out``), so that a
batch holds many ops in one kernel and one compile. Tolerances: float32 within
``1e-4 * (|want| + max |want|)`` (the engines sum in their own order), integers
exactly.
"""

from __future__ import annotations

import numpy as np

import polyc
from polyc import compute as pc
from polyc.ops import nn

X4 = (2, 3, 6, 5)

# op -> (builder over placeholders, [(shape, dtype, kind)]); kind: n(ormal),
# p(ositive), i(ndex), s(mall integers)
OPS = {
    "matmul": (lambda a, b: nn.matmul(a, b), [((9, 7), "float32", "n"), ((7, 10), "float32", "n")]),
    "batch_matmul": (lambda a, b: nn.batch_matmul(a, b), [((2, 5, 6), "float32", "n"), ((2, 6, 7), "float32", "n")]),
    "linear": (lambda x, w, b: nn.linear(x, w, b), [((2, 3, 6), "float32", "n"), ((5, 6), "float32", "n"), ((5,), "float32", "n")]),
    "conv2d": (lambda x, w, b: nn.conv2d(x, w, b, stride=2, padding=1, groups=3), [(X4, "float32", "n"), ((6, 1, 3, 3), "float32", "n"), ((6,), "float32", "n")]),
    "conv_transpose2d": (lambda x, w, b: nn.conv_transpose2d(x, w, b, stride=2, padding=1), [(X4, "float32", "n"), ((3, 2, 2, 3), "float32", "n"), ((2,), "float32", "n")]),
    "upsample_nearest2d": (lambda x: nn.upsample_nearest2d(x, scale_factor=2), [(X4, "float32", "n")]),
    "relu": (nn.relu, [(X4, "float32", "n")]),
    "relu6": (nn.relu6, [(X4, "float32", "n")]),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.2), [(X4, "float32", "n")]),
    "clamp": (lambda x: nn.clamp(x, -0.5, 0.75), [(X4, "float32", "n")]),
    "gelu": (nn.gelu, [(X4, "float32", "n")]),
    "sigmoid": (nn.sigmoid, [(X4, "float32", "n")]),
    "silu": (nn.silu, [(X4, "float32", "n")]),
    "hardswish": (nn.hardswish, [(X4, "float32", "n")]),
    "hardsigmoid": (nn.hardsigmoid, [(X4, "float32", "n")]),
    "tanh": (nn.tanh, [(X4, "float32", "n")]),
    "exp": (nn.exp, [(X4, "float32", "n")]),
    "log": (nn.log, [(X4, "float32", "p")]),
    "sqrt": (nn.sqrt, [(X4, "float32", "p")]),
    "rsqrt": (nn.rsqrt, [(X4, "float32", "p")]),
    "erf": (nn.erf, [(X4, "float32", "n")]),
    "sin": (nn.sin, [(X4, "float32", "n")]),
    "cos": (nn.cos, [(X4, "float32", "n")]),
    "neg": (nn.neg, [(X4, "float32", "n")]),
    "abs": (nn.abs, [(X4, "float32", "n")]),
    "reciprocal": (nn.reciprocal, [(X4, "float32", "p")]),
    "cast": (lambda x: nn.cast(x, "int32"), [(X4, "float32", "n")]),
    "add": (lambda a, b: nn.add(a, b), [(X4, "float32", "n"), ((6, 1), "float32", "n")]),
    "sub": (lambda a, b: nn.sub(a, b), [(X4, "float32", "n"), ((5,), "float32", "n")]),
    "mul": (lambda a: nn.mul(a, 0.5), [(X4, "float32", "n")]),
    "div": (lambda a, b: nn.div(a, b), [(X4, "float32", "n"), ((3, 1, 1), "float32", "p")]),
    "maximum": (lambda a, b: nn.maximum(a, b), [(X4, "float32", "n"), (X4, "float32", "n")]),
    "minimum": (lambda a, b: nn.minimum(a, b), [(X4, "float32", "n"), (X4, "float32", "n")]),
    "pow": (lambda a: nn.pow(a, 3), [(X4, "float32", "n")]),
    "bias_add": (lambda x, b: nn.bias_add(x, b), [(X4, "float32", "n"), ((3,), "float32", "n")]),
    "requantize": (lambda a, m: nn.requantize(a, m, -5, relu=True), [(X4, "int32", "s"), ((3,), "float32", "p")]),
    "sum": (lambda x: nn.sum(x, (1, 2), True), [(X4, "float32", "n")]),
    "mean": (lambda x: nn.mean(x, -1), [(X4, "float32", "n")]),
    "max": (lambda x: nn.max(x, 1), [(X4, "float32", "n")]),
    "min": (lambda x: nn.min(x, -1), [(X4, "float32", "n")]),
    "softmax": (lambda x: nn.softmax(x, 1), [(X4, "float32", "n")]),
    "log_softmax": (lambda x: nn.log_softmax(x, -1), [(X4, "float32", "n")]),
    "layer_norm": (lambda x, w, b: nn.layer_norm(x, (6, 5), w, b), [(X4, "float32", "n"), ((6, 5), "float32", "n"), ((6, 5), "float32", "n")]),
    "batch_norm": (lambda x, m, v, w, b: nn.batch_norm(x, m, v, w, b), [(X4, "float32", "n"), ((3,), "float32", "n"), ((3,), "float32", "p"), ((3,), "float32", "n"), ((3,), "float32", "n")]),
    "max_pool2d": (lambda x: nn.max_pool2d(x, 2, 1, 1), [(X4, "float32", "n")]),
    "avg_pool2d": (lambda x: nn.avg_pool2d(x, 3, padding=1, ceil_mode=True), [(X4, "float32", "n")]),
    "adaptive_avg_pool2d": (lambda x: nn.adaptive_avg_pool2d(x, (2, 3)), [(X4, "float32", "n")]),
    "adaptive_max_pool2d": (lambda x: nn.adaptive_max_pool2d(x, (4, 2)), [(X4, "float32", "n")]),
    "transpose": (lambda x: nn.transpose(x, 1, 3), [(X4, "float32", "n")]),
    "permute": (lambda x: nn.permute(x, (0, 2, 3, 1)), [(X4, "float32", "n")]),
    "reshape": (lambda x: nn.reshape(x, (6, -1)), [(X4, "float32", "n")]),
    "flatten": (lambda x: nn.flatten(x, 1), [(X4, "float32", "n")]),
    "squeeze": (lambda x: nn.squeeze(x, 1), [((4, 1, 5), "float32", "n")]),
    "unsqueeze": (lambda x: nn.unsqueeze(x, 1), [((4, 5), "float32", "n")]),
    "expand": (lambda x: nn.expand(x, (3, 4, 5)), [((4, 1), "float32", "n")]),
    "slice": (lambda x: nn.slice(x, 2, 1, 6, 2), [(X4, "float32", "n")]),
    "pad": (lambda x: nn.pad(x, (1, 0, 2, 2)), [(X4, "float32", "n")]),
    "concat": (lambda a, b, c: nn.concat([a, b, c], 1), [((2, 3), "float32", "n"), ((2, 1), "float32", "n"), ((2, 4), "float32", "n")]),
    "embedding": (lambda i, w: nn.embedding(i, w), [((2, 3), "int64", "i"), ((6, 4), "float32", "n")]),
}  # fmt: skip

#: int8 contractions accumulate in int32 and must be exact
INT8 = {
    "matmul_int8": (lambda a, b: nn.matmul(a, b), [((9, 7), "int8", "s"), ((7, 10), "int8", "s")]),
    "conv2d_int8": (lambda x, w, b: nn.conv2d(x, w, b, stride=2, padding=1), [((1, 3, 7, 7), "int8", "s"), ((4, 3, 3, 3), "int8", "s"), ((4,), "int32", "s")]),
    "linear_int8": (lambda x, w: nn.linear(x, w), [((4, 6), "int8", "s"), ((5, 6), "int8", "s")]),
}  # fmt: skip


def values(shape, dtype: str, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "i":
        return rng.integers(0, 6, shape).astype(dtype)
    if kind == "s":
        return rng.integers(-100, 100, shape).astype(dtype)
    if kind == "p":
        return rng.uniform(0.25, 4.0, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def batch(name: str, ops: dict, rng: np.random.Generator):
    """One kernel computing every op of ``ops``
    and its input data (inputs named ``x_<op>_<n>``)."""
    data: dict[str, np.ndarray] = {}
    outs = []
    for op, (build, specs) in ops.items():
        holders = []
        for n, (shape, dtype, kind) in enumerate(specs):
            arg = f"x_{op}_{n}"
            data[arg] = values(shape, dtype, kind, rng)
            holders.append(pc.placeholder(arg, shape, dtype))
        outs.append(build(*holders))
    return pc.kernel(name, outs), data


def check(kernel: polyc.Kernel, got: dict, data: dict, what: str) -> None:
    """``got`` equals the interpreter on the untransformed kernel."""
    want = polyc.interpret(kernel.original, data)
    for name, ref in want.items():
        out = got[name]
        assert out.shape == ref.shape, (
            f"{what} {name}: shape {out.shape} != {ref.shape}"
        )
        if np.issubdtype(ref.dtype, np.integer):
            bad = np.flatnonzero(out != ref)
            assert bad.size == 0, f"{what} {name}: {bad.size} integers differ"
            continue
        ref64 = ref.astype(np.float64)
        scale = max(1.0, float(np.abs(ref64).max())) if ref.size else 1.0
        err = np.abs(out.astype(np.float64) - ref64)
        bad = np.flatnonzero(~(err <= 1e-4 * (np.abs(ref64) + scale)))
        assert bad.size == 0, (
            f"{what} {name}: {bad.size} of {ref.size} elements off by more than 1e-4 "
            f"relative; worst {err.max():.3g}"
        )
