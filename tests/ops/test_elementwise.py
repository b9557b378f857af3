"""Element-wise ops against torch (float64 references), interpreted and compiled.

Each test gathers every op of a family over several shapes (odd sizes, size 1, 0-d)
into one kernel, so each compiles once.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from polyc import compute as pc
from polyc.ops import nn
from tests.support.opcheck import Batch, f64

# element-wise ops do not care about rank: the 4-D cases live in test_compose
SHAPES = [(), (1,), (7,), (3, 1, 5)]

UNARY = {
    "relu": (nn.relu, torch.relu),
    "relu6": (nn.relu6, F.relu6),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.2), lambda t: F.leaky_relu(t, 0.2)),
    "clamp": (lambda x: nn.clamp(x, -0.5, 0.75), lambda t: t.clamp(-0.5, 0.75)),
    "clamp_min": (lambda x: nn.clamp(x, min=0.1), lambda t: t.clamp(min=0.1)),
    "gelu": (nn.gelu, F.gelu),
    "gelu_tanh": (
        lambda x: nn.gelu(x, approximate="tanh"),
        lambda t: F.gelu(t, approximate="tanh"),
    ),
    "sigmoid": (nn.sigmoid, torch.sigmoid),
    "silu": (nn.silu, F.silu),
    "hardswish": (nn.hardswish, F.hardswish),
    "hardsigmoid": (nn.hardsigmoid, F.hardsigmoid),
    "tanh": (nn.tanh, torch.tanh),
    "exp": (nn.exp, torch.exp),
    "erf": (nn.erf, torch.erf),
    "sin": (nn.sin, torch.sin),
    "cos": (nn.cos, torch.cos),
    "neg": (nn.neg, torch.neg),
    "abs": (nn.abs, torch.abs),
}
POSITIVE = {
    "log": (nn.log, torch.log),
    "sqrt": (nn.sqrt, torch.sqrt),
    "rsqrt": (nn.rsqrt, torch.rsqrt),
    "reciprocal": (nn.reciprocal, torch.reciprocal),
}


def _unary_batch(dtype: str, shapes, rng) -> Batch:
    b = Batch(f"unary_{dtype}", rng)
    for n, shape in enumerate(shapes):
        x = b.randn(f"x{n}", shape, dtype, scale=2.0)
        p = b.positive(f"p{n}", shape, dtype)
        for table, src, name in ((UNARY, x, f"x{n}"), (POSITIVE, p, f"p{n}")):
            for _op, (ours, theirs) in table.items():
                b.check(ours(src), theirs(f64(b[name])))
    return b


def test_unary_float32(rng):
    _unary_batch("float32", SHAPES, rng).run()


def test_float16_elementwise(rng):
    """float16: every op rounds to float16 after each operation (tolerance 2e-2)."""
    b = _unary_batch("float16", [(3, 5)], rng)
    x, y = b.randn("fa", (2, 1, 5), "float16"), b.positive("fb", (3, 1), "float16")
    ta, tb = f64(b["fa"]), f64(b["fb"])
    for _op, (ours, theirs) in BINARY.items():
        b.check(ours(x, y), theirs(ta, tb))
    b.check(nn.mul(x, 0.5), ta * 0.5)
    b.run()


def test_signed_int_unary_ops_are_exact(rng):
    b = Batch("unary_int", rng)
    for dtype in ("int8", "int32"):
        x = b.randint(f"x_{dtype}", (4, 7), -100, 100, dtype)
        ref = b[f"x_{dtype}"].astype(np.int64)
        b.check(nn.relu(x), np.maximum(ref, 0))
        b.check(nn.relu6(x), np.clip(ref, 0, 6))
        b.check(nn.neg(x), -ref)
        b.check(nn.abs(x), np.abs(ref))
        b.check(nn.clamp(x, -3, 9), np.clip(ref, -3, 9))
    b.run()


BINARY = {
    "add": (nn.add, torch.add),
    "sub": (nn.sub, torch.sub),
    "mul": (nn.mul, torch.mul),
    "div": (nn.div, torch.div),
    "maximum": (nn.maximum, torch.maximum),
    "minimum": (nn.minimum, torch.minimum),
}
# pairs of shapes that broadcast, numpy-style
PAIRS = [
    ((1,), (1,)),
    ((5,), (1,)),
    ((3, 1, 5), (4, 1)),
    ((2, 1, 4), (3, 1)),
    ((1, 3, 1, 7), (2, 1, 6, 7)),
    ((), (3, 2)),
]


def test_binary_float32_broadcasting(rng):
    b = Batch("binary_f32", rng)
    for n, (sa, sb) in enumerate(PAIRS):
        x, y = b.randn(f"a{n}", sa), b.positive(f"b{n}", sb)
        ta, tb = f64(b[f"a{n}"]), f64(b[f"b{n}"])
        for _op, (ours, theirs) in BINARY.items():
            b.check(ours(x, y), theirs(ta, tb))
        b.check(nn.pow(y, x), torch.pow(tb, ta))
    b.run()


def test_binary_with_python_scalars(rng):
    b = Batch("scalars", rng)
    x = b.randn("x", (3, 4))
    t = f64(b["x"])
    b.check(nn.add(x, 2), t + 2)
    b.check(nn.add(1.5, x), 1.5 + t)
    b.check(nn.add(x, x, alpha=3), t + 3 * t)
    b.check(nn.sub(x, 0.25, alpha=2), t - 0.5)
    b.check(nn.sub(1, x), 1 - t)
    b.check(nn.mul(x, -3.0), -3 * t)
    b.check(nn.div(x, 4), t / 4)
    b.check(nn.div(1, nn.add(nn.abs(x), 1)), 1 / (t.abs() + 1))
    b.check(nn.pow(x, 2), t**2)
    b.check(nn.maximum(x, 0.1), t.clamp(min=0.1))
    b.check(nn.minimum(0, x), t.clamp(max=0))
    b.check(
        nn.div(x, 0.3, rounding_mode="floor"), torch.div(t, 0.3, rounding_mode="floor")
    )
    b.check(
        nn.div(x, 0.3, rounding_mode="trunc"), torch.div(t, 0.3, rounding_mode="trunc")
    )
    b.run()


@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_integer_binary_ops_are_exact_and_wrap_like_c(dtype, rng):
    b = Batch(f"binary_{dtype}", rng)
    x = b.randint("x", (3, 1, 5), -100, 100, dtype)
    y = b.randint("y", (4, 1), 1, 20, dtype)
    xa, ya = b["x"], b["y"]
    with np.errstate(over="ignore"):
        b.check(nn.add(x, y), xa + ya)
        b.check(nn.sub(x, y), xa - ya)
        b.check(nn.mul(x, y), xa * ya)  # int8 wraps around, as numpy does
        b.check(nn.mul(x, 3), xa * np.array(3, dtype))
    b.check(nn.maximum(x, y), np.maximum(xa, ya))
    b.check(nn.minimum(x, -2), np.minimum(xa, np.array(-2, dtype)))
    trunc = np.trunc(xa.astype(np.float64) / ya).astype(dtype)
    b.check(nn.div(x, y, rounding_mode="trunc"), trunc)
    b.check(nn.div(x, y, rounding_mode="floor"), np.floor_divide(xa, ya))
    b.check(nn.pow(y, 2), (ya.astype(np.int64) ** 2).astype(dtype))
    b.check(nn.pow(y, 0), np.ones_like(ya))
    b.run()


def test_casts_between_dtypes(rng):
    b = Batch("casts", rng)
    x = b.input("x", (rng.standard_normal((3, 5)) * 50).astype(np.float32))
    i = b.randint("i", (3, 5), -128, 128, "int8")
    h = b.randn("h", (2, 7), "float16")
    b.check(nn.cast(x, "int32"), b["x"].astype(np.int32))  # C truncates toward zero
    b.check(nn.cast(x, "float16"), b["x"].astype(np.float16), tol=1e-3)
    b.check(nn.cast(i, "float32"), b["i"].astype(np.float32))
    b.check(nn.cast(i, "int32"), b["i"].astype(np.int32))
    b.check(nn.cast(h, "float32"), b["h"].astype(np.float32))
    b.check(nn.cast(nn.cast(i, "int32"), "int8"), b["i"])
    b.run()


def test_bias_add_along_channels_and_any_dim(rng):
    b = Batch("bias_add", rng)
    x = b.randn("x", (2, 3, 4, 5))
    c = b.randn("c", (3,))
    last = b.randn("last", (5,))
    i8 = b.randint("i8", (2, 3), dtype="int8")
    i8b = b.randint("i8b", (3,), dtype="int8")
    b.check(nn.bias_add(x, c), f64(b["x"]) + f64(b["c"])[:, None, None])
    b.check(nn.bias_add(x, last, dim=-1), f64(b["x"]) + f64(b["last"]))
    b.check(nn.bias_add(i8, i8b, dim=1), b["i8"] + b["i8b"])
    b.run()


def test_symbolic_sizes_elementwise(rng):
    """Element-wise ops over a parameter N: one kernel serves every size."""
    n = pc.param("N")
    x = pc.placeholder("x", (n, 3))
    y = pc.placeholder("y", (3,))
    out = nn.gelu(nn.add(x, y), name="out")
    kernel = pc.kernel("sym_elementwise", [out])
    import polyc

    module = polyc.build(kernel)
    for size in (1, 4, 9):
        xa = rng.standard_normal((size, 3)).astype(np.float32)
        ya = rng.standard_normal(3).astype(np.float32)
        ref = F.gelu(f64(xa) + f64(ya)).numpy()
        for got in (polyc.interpret(kernel, {"x": xa, "y": ya}), module(x=xa, y=ya)):
            np.testing.assert_allclose(got["out"], ref, rtol=1e-5, atol=1e-6)


def test_float_squares_and_cubes_are_multiplies_as_in_torch():
    """``x ** 2`` and ``x ** 3`` on a float tensor are ``x * x`` and ``x * x * x``:
    PyTorch's CPU kernel computes them so (bit for bit in float32, where C's
    ``pow`` rounds once), and a multiply costs the vector unit what a
    transcendental costs sixteen times (GPT-2's GELU cubes, RMSNorm squares)."""
    import polyc
    from polyc.ir.expr import ops_count

    t = torch.randn(64, dtype=torch.float32) * 3
    x = pc.placeholder("x", (64,), "float32")
    for e in (2, 3, 2.0, 3.0):
        y = nn.pow(x, e)
        k = pc.kernel(f"pow{e}", outputs=[y])
        (stmt,) = k.statements
        assert ops_count(stmt.body).get("transcendental", 0) == 0
        assert ops_count(stmt.body)["mul"] == int(e) - 1
        got = polyc.interpret(k, {"x": t.numpy()})[y.name]
        np.testing.assert_array_equal(got, torch.pow(t, e).numpy())
    k = pc.kernel("pow_half", outputs=[nn.pow(x, 2.5)])
    assert ops_count(k.statements[0].body)["transcendental"] == 1
