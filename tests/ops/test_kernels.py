"""Kernel-level wrappers (``polyc.ops.<op>``): PyTorch input names, output ``out``,
and the numbers of the op, through the interpreter (every wrapper) and the compiled
C (a few: the statements are those of polyc.ops.nn, compiled in the other files)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import polyc
from polyc import ops
from tests.support.opcheck import close, f64

X4 = (2, 3, 5, 4)


def _data(kernel, rng):
    out = {}
    for a in kernel.inputs:
        shape = tuple(int(d.const) for d in a.shape)
        if a.dtype.is_float:
            values = rng.standard_normal(shape)
            if a.name == "running_var":
                values = np.abs(values) + 0.5
        elif a.name == "input":  # embedding indices
            values = rng.integers(0, 6, shape)
        else:
            values = rng.integers(-50, 50, shape)
        out[a.name] = values.astype(a.dtype.numpy)
    return out


def _t(arrays):
    return {
        k: f64(v) if v.dtype.kind == "f" else torch.from_numpy(v)
        for k, v in arrays.items()
    }


CASES = {
    "matmul": (lambda: ops.matmul(3, 5, 4), lambda d: d["A"] @ d["B"]),
    "batch_matmul": (
        lambda: ops.batch_matmul(2, 3, 5, 4),
        lambda d: d["input"] @ d["mat2"],
    ),
    "linear": (
        lambda: ops.linear((2, 3, 6), (4, 6)),
        lambda d: F.linear(d["input"], d["weight"], d["bias"]),
    ),
    "conv2d": (
        lambda: ops.conv2d(X4, (6, 1, 3, 3), groups=3, stride=2, padding=1),
        lambda d: F.conv2d(d["input"], d["weight"], d["bias"], 2, 1, 1, 3),
    ),
    "conv_transpose2d": (
        lambda: ops.conv_transpose2d(X4, (3, 2, 2, 3), stride=2, padding=1),
        lambda d: F.conv_transpose2d(d["input"], d["weight"], d["bias"], 2, 1),
    ),
    "upsample_nearest2d": (
        lambda: ops.upsample_nearest2d(X4, scale_factor=2),
        lambda d: F.interpolate(d["input"], scale_factor=2, mode="nearest"),
    ),
    "relu": (lambda: ops.relu(X4), lambda d: torch.relu(d["input"])),
    "gelu": (
        lambda: ops.gelu(X4, approximate="tanh"),
        lambda d: F.gelu(d["input"], approximate="tanh"),
    ),
    "add": (lambda: ops.add(X4, (5, 1)), lambda d: d["input"] + d["other"]),
    "mul_scalar": (lambda: ops.mul(X4, 0.5), lambda d: d["input"] * 0.5),
    "bias_add": (
        lambda: ops.bias_add(X4),
        lambda d: d["input"] + d["bias"][:, None, None],
    ),
    "sum": (lambda: ops.sum(X4, (1, 2), True), lambda d: d["input"].sum((1, 2), True)),
    "mean": (lambda: ops.mean(X4, -1), lambda d: d["input"].mean(-1)),
    "softmax": (lambda: ops.softmax(X4, 1), lambda d: torch.softmax(d["input"], 1)),
    "log_softmax": (
        lambda: ops.log_softmax(X4),
        lambda d: torch.log_softmax(d["input"], -1),
    ),
    "layer_norm": (
        lambda: ops.layer_norm(X4, (5, 4)),
        lambda d: F.layer_norm(d["input"], (5, 4), d["weight"], d["bias"]),
    ),
    "batch_norm": (
        lambda: ops.batch_norm(X4),
        lambda d: F.batch_norm(
            *(d[k] for k in ("input", "running_mean", "running_var", "weight", "bias"))
        ),
    ),
    "max_pool2d": (
        lambda: ops.max_pool2d(X4, 2, 1, 1),
        lambda d: F.max_pool2d(d["input"], 2, 1, 1),
    ),
    "avg_pool2d": (
        lambda: ops.avg_pool2d(X4, 3, padding=1, ceil_mode=True),
        lambda d: F.avg_pool2d(d["input"], 3, padding=1, ceil_mode=True),
    ),
    "adaptive_avg_pool2d": (
        lambda: ops.adaptive_avg_pool2d(X4, (2, 3)),
        lambda d: F.adaptive_avg_pool2d(d["input"], (2, 3)),
    ),
    "permute": (
        lambda: ops.permute(X4, (0, 2, 3, 1)),
        lambda d: d["input"].permute(0, 2, 3, 1),
    ),
    "reshape": (lambda: ops.reshape(X4, (6, -1)), lambda d: d["input"].reshape(6, -1)),
    "flatten": (lambda: ops.flatten(X4, 1), lambda d: d["input"].flatten(1)),
    "pad": (
        lambda: ops.pad(X4, (1, 0, 2, 2)),
        lambda d: F.pad(d["input"], (1, 0, 2, 2)),
    ),
    "concat": (
        lambda: ops.concat([(2, 3), (2, 1), (2, 4)], 1),
        lambda d: torch.cat([d["tensors_0"], d["tensors_1"], d["tensors_2"]], 1),
    ),
    "embedding": (
        lambda: ops.embedding((2, 3), (6, 4)),
        lambda d: F.embedding(d["input"], d["weight"]),
    ),
    "cast": (lambda: ops.cast(X4, "int32"), lambda d: d["input"].to(torch.int32)),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_wrapper_equals_torch_in_the_interpreter(op, rng):
    make, ref = CASES[op]
    kernel = make()
    assert [a.name for a in kernel.outputs] == ["out"]
    data = _data(kernel, rng)
    expect = ref(_t(data))
    got = polyc.interpret(kernel, data)["out"]
    close(got, expect, kernel.outputs[0].dtype.name, op)


@pytest.mark.parametrize("op", ["conv2d", "layer_norm"])
def test_wrapper_compiles(op, rng):
    make, ref = CASES[op]
    kernel = make()
    data = _data(kernel, rng)
    close(polyc.build(kernel)(**data)["out"], ref(_t(data)), "float32", op)


def test_int8_conv_wrapper_accumulates_in_int32(rng):
    kernel = ops.conv2d((1, 2, 5, 5), (3, 2, 3, 3), padding=1, dtype="int8")
    assert kernel.arrays["bias"].dtype.name == "int32"
    assert kernel.arrays["out"].dtype.name == "int32"
    data = _data(kernel, rng)
    wide = {k: f64(v.astype(np.int64)) for k, v in data.items()}
    ref = F.conv2d(wide["input"], wide["weight"], wide["bias"], padding=1)
    close(
        polyc.interpret(kernel, data)["out"],
        ref.numpy().astype(np.int64),
        "int32",
        "conv",
    )
