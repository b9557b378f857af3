"""Bad op arguments raise ShapeError, DTypeError or ArgumentError at the call, with
a message that says what, why, and the fix."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polyc import ArgumentError, DTypeError, ShapeError, ops
from polyc import compute as pc
from polyc.ops import nn


def ph(name, shape, dtype="float32"):
    return pc.placeholder(name, shape, dtype)


# shape mismatches ------------------------------------------------------------------


def test_broadcast_mismatch_names_the_dims():
    with pytest.raises(
        ShapeError,
        match=r"add: shapes \(2, 3\) of a and \(4, 3\) of b "
        r"do not broadcast because dim -2 is 2 in a but 4 in b\. Make",
    ):
        nn.add(ph("a", (2, 3)), ph("b", (4, 3)))


def test_matmul_inner_dims_must_chain():
    with pytest.raises(ShapeError, match=r"dim -1 of a is 3 but dim -2 of b is 4"):
        nn.matmul(ph("a", (2, 3)), ph("b", (4, 5)))
    with pytest.raises(ShapeError, match=r"batch_matmul takes 3-D operands"):
        nn.batch_matmul(ph("a", (2, 3)), ph("b", (3, 5)))


def test_linear_feature_count_and_bias_length():
    with pytest.raises(ShapeError, match=r"in equal to the input's last dim \(5\)"):
        nn.linear(ph("x", (2, 5)), ph("w", (3, 6)))
    with pytest.raises(
        ShapeError,
        match=r"bias b has shape \(4,\) but the output has "
        r"3 channels",
    ):
        nn.linear(ph("x", (2, 5)), ph("w", (3, 5)), ph("b", (4,)))


def test_conv2d_channel_and_group_errors():
    x = ph("x", (1, 4, 8, 8))
    with pytest.raises(
        ShapeError,
        match=r"input x has 4 channels .* but weight w "
        r"expects 3",
    ):
        nn.conv2d(x, ph("w", (2, 3, 3, 3)))
    with pytest.raises(ShapeError, match=r"not divisible by groups=3"):
        nn.conv2d(x, ph("w", (3, 1, 3, 3)), groups=3)
    with pytest.raises(ShapeError, match=r"so 2 per group"):
        nn.conv2d(x, ph("w", (4, 1, 3, 3)), groups=2)
    with pytest.raises(
        ShapeError,
        match=r"output would be empty because the padded "
        r"input's H \(2 \+ 0\) is smaller than the dilated kernel \(3\)",
    ):
        nn.conv2d(ph("s", (1, 1, 2, 5)), ph("k", (1, 1, 3, 3)))
    with pytest.raises(ShapeError, match=r"needs a 4-D input"):
        nn.conv2d(ph("v", (4, 8, 8)), ph("k4", (1, 4, 3, 3)))
    with pytest.raises(
        ShapeError, match=r"dim 0 of the weight must equal the 4 input channels"
    ):
        nn.conv_transpose2d(x, ph("t", (2, 4, 3, 3)))


def test_other_shape_errors():
    x = ph("x", (2, 3, 4))
    with pytest.raises(
        ShapeError,
        match=r"cannot view x \(2, 3, 4\) as \(5, 5\) "
        r"because the element counts differ \(24 vs 25\)",
    ):
        nn.reshape(x, (5, 5))
    with pytest.raises(ShapeError, match=r"cannot infer -1"):
        nn.reshape(x, (5, -1))
    with pytest.raises(ShapeError, match=r"all dims but dim 0 must agree"):
        nn.concat([x, ph("y", (2, 4, 4))], 0)
    with pytest.raises(
        ShapeError,
        match=r"normalized_shape \(3,\) does not match .* "
        r"e\.g\. normalized_shape=\(4,\)\.",
    ):
        nn.layer_norm(x, 3)
    with pytest.raises(ShapeError, match=r"e\.g\. normalized_shape=\(2, 3, 4\)\."):
        nn.layer_norm(x, (5, 2, 3, 4))
    with pytest.raises(
        ShapeError,
        match=r"running_mean m has shape \(2,\) but x has 3 "
        r"channels",
    ):
        nn.batch_norm(x, ph("m", (2,)), ph("v", (3,)))
    with pytest.raises(ShapeError, match=r"only size-1 dims can grow"):
        nn.expand(x, (2, 5, 4))
    with pytest.raises(ShapeError, match=r"the output would be empty"):
        nn.max_pool2d(ph("p", (1, 1, 2, 2)), 3, padding=1, dilation=2)
    with pytest.raises(
        ShapeError, match=r"bias_add: bias c has shape \(4,\) but dim 1"
    ):
        nn.bias_add(x, ph("c", (4,)))


# dtype mismatches ------------------------------------------------------------------


def test_dtype_mismatch_names_the_cast():
    with pytest.raises(
        DTypeError,
        match=r"add: other \(b\) is float16 but a is float32 "
        r"because .* nn\.cast\(b, 'float32'\)",
    ):
        nn.add(ph("a", (3,)), ph("b", (3,), "float16"))
    with pytest.raises(DTypeError, match=r"nn\.cast\(w, 'int8'\)"):
        nn.matmul(ph("a", (2, 3), "int8"), ph("w", (3, 2)))


def test_integer_specific_dtype_errors():
    i8 = ph("q", (2, 4), "int8")
    with pytest.raises(DTypeError, match=r"the scalar 0.5 is a float but q is int8"):
        nn.mul(i8, 0.5)
    with pytest.raises(DTypeError, match=r"the scalar 300 does not fit int8"):
        nn.add(i8, 300)
    with pytest.raises(
        DTypeError,
        match=r"true division of int8 tensor q .* "
        r"rounding_mode='trunc'",
    ):
        nn.div(i8, 2)
    with pytest.raises(
        DTypeError,
        match=r"sigmoid: q is int8 but sigmoid accepts "
        r"float32, float16, bfloat16, float64 .* nn\.cast\(q, 'float32'\)",
    ):
        nn.sigmoid(i8)
    with pytest.raises(DTypeError, match=r"mean: q is int8"):
        nn.mean(i8)
    with pytest.raises(
        DTypeError,
        match=r"bias b is int8 but the output accumulates "
        r"in int32 .* nn\.cast\(b, 'int32'\)",
    ):
        nn.linear(i8, ph("w", (3, 4), "int8"), ph("b", (3,), "int8"))
    with pytest.raises(DTypeError, match=r"non-negative int exponent"):
        nn.pow(i8, i8)
    with pytest.raises(
        DTypeError,
        match=r"embedding: i is float32 but embedding "
        r"accepts int32, int64",
    ):
        nn.embedding(ph("i", (3,)), ph("t", (5, 2)))


# invalid arguments -----------------------------------------------------------------


def test_invalid_arguments_list_the_accepted_values():
    x = ph("x", (1, 2, 6, 6))
    w = ph("w", (2, 2, 3, 3))
    with pytest.raises(
        ArgumentError,
        match=r"gelu: approximate='fast' is not supported "
        r"because the accepted values are 'none', 'tanh'",
    ):
        nn.gelu(x, approximate="fast")
    with pytest.raises(ArgumentError, match=r"padding_mode='reflect' .* 'zeros'"):
        nn.conv2d(x, w, padding_mode="reflect")
    with pytest.raises(ArgumentError, match=r"padding='full' .* 'valid', 'same'"):
        nn.conv2d(x, w, padding="full")
    with pytest.raises(
        ArgumentError,
        match=r"padding='same' is not supported with "
        r"stride=\(2, 2\)",
    ):
        nn.conv2d(x, w, padding="same", stride=2)
    with pytest.raises(
        ArgumentError,
        match=r"stride=0 is invalid because it must be an "
        r"int >= 1",
    ):
        nn.conv2d(x, w, stride=0)
    with pytest.raises(ArgumentError, match=r"groups=0 is invalid"):
        nn.conv2d(x, w, groups=0)
    with pytest.raises(
        ArgumentError,
        match=r"rounding_mode='round' .* None, 'trunc', "
        r"'floor'",
    ):
        nn.div(x, 2.0, rounding_mode="round")
    with pytest.raises(ArgumentError, match=r"mode='reflect' .* 'constant'"):
        nn.pad(x, (1, 1), mode="reflect")
    with pytest.raises(ArgumentError, match=r"training=True is not supported"):
        c = ph("c", (2,))
        nn.batch_norm(x, c, c, training=True)
    with pytest.raises(ArgumentError, match=r"return_indices=True is not supported"):
        nn.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(
        ArgumentError, match=r"padding 2 exceeds half the kernel size 3"
    ):
        nn.max_pool2d(x, 3, padding=2)
    with pytest.raises(
        ArgumentError,
        match=r"output_padding=2 is invalid because it must be smaller than stride "
        r"\(2, 2\)",
    ):
        nn.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(
        ArgumentError,
        match=r"scale_factor=1.5 is not supported because only whole factors",
    ):
        nn.upsample_nearest2d(x, scale_factor=1.5)
    with pytest.raises(
        ArgumentError, match=r"exactly one of them sets the output size"
    ):
        nn.upsample_nearest2d(x)


def test_invalid_axes_and_names():
    x = ph("x", (2, 3, 4))
    with pytest.raises(
        ArgumentError,
        match=r"sum: dim=3 is out of range because the "
        r"tensor has 3 dimensions",
    ):
        nn.sum(x, 3)
    with pytest.raises(ArgumentError, match=r"dim=\(0, -3\) repeats an axis"):
        nn.sum(x, (0, -3))
    with pytest.raises(ArgumentError, match=r"dims=\(0, 0, 1\) is not a permutation"):
        nn.permute(x, (0, 0, 1))
    with pytest.raises(ArgumentError, match=r"softmax: dim=None is ambiguous"):
        nn.softmax(x, None)
    with pytest.raises(
        ArgumentError,
        match=r"relu: name='my relu' is not a valid tensor "
        r"name",
    ):
        nn.relu(x, name="my relu")
    with pytest.raises(
        ArgumentError,
        match=r"relu: input is a list, not a polyc "
        r"Tensor",
    ):
        nn.relu([1.0, 2.0])
    with pytest.raises(
        ArgumentError,
        match=r"shape entry 0 is invalid because sizes "
        r"are positive ints",
    ):
        nn.reshape(x, (0, 24))
    with pytest.raises(ArgumentError, match=r"has 2 entries -1"):
        nn.reshape(x, (-1, -1))
    with pytest.raises(ArgumentError, match=r"index=3 is out of range"):
        nn.select(x, 0, 3)


def test_symbolic_sizes_where_the_op_needs_fixed_ones():
    n = pc.param("N")
    x = ph("x", (1, 2, n, n))
    with pytest.raises(
        ArgumentError,
        match=r"adaptive_avg_pool2d: dim 2 of x is the "
        r"symbolic size N .* adaptive windows need fixed sizes",
    ):
        nn.adaptive_avg_pool2d(x, 1)
    with pytest.raises(ArgumentError, match=r"ceil_mode needs fixed sizes"):
        nn.max_pool2d(x, 2, ceil_mode=True)
    with pytest.raises(
        ArgumentError,
        match=r"merging dims of sizes N and N is not "
        r"affine",
    ):
        nn.flatten(x, 2)


def test_kernel_wrappers_report_the_same_errors():
    with pytest.raises(ShapeError, match=r"conv2d: input input has 3 channels"):
        ops.conv2d((1, 3, 5, 5), (2, 4, 3, 3))
    with pytest.raises(ArgumentError, match=r"approximate='x'"):
        ops.gelu((3,), approximate="x")


def test_argument_types_are_checked():
    x = ph("x", (2, 3))
    with pytest.raises(ArgumentError, match=r"sum: keepdim=2 is not a bool"):
        nn.sum(x, 0, 2)
    with pytest.raises(
        ArgumentError,
        match=r"dim=0 names no axis because the tensor "
        r"is 0-d",
    ):
        nn.softmax(ph("s", ()), 0)
    with pytest.raises(ArgumentError, match=r"permute: dims=1 is not a sequence"):
        nn.permute(x, 1)
    with pytest.raises(ArgumentError, match=r"negative_slope=None is not a number"):
        nn.leaky_relu(x, None)
    with pytest.raises(ArgumentError, match=r"batch_norm: running_mean is a NoneType"):
        nn.batch_norm(x, None, ph("v", (3,)))
    with pytest.raises(ArgumentError, match=r"slice: start=1.5 is not an index"):
        nn.slice(x, 0, 1.5)


# every op, fed odd arguments, either builds a tensor or raises a PolycError --------

_ODD = [None, 0, -1, 1, 2, 1.5, (1, 2), (0, 0), [1, 2, 3], "same", "x", True, (-1,)]
_FIRST = {
    "conv2d": ("a", "w", "b"),
    "conv_transpose2d": ("a", "w", "b"),
    "linear": ("t", "t"),
    "matmul": ("t", "a"),
    "batch_matmul": ("a", "a"),
    "embedding": ("i", "t"),
    "layer_norm": ("a", 5),
    "batch_norm": ("a", "b", "b"),
    "bias_add": ("a", "b"),
}


@settings(max_examples=400)
@given(
    op=st.sampled_from(
        [n for n in nn.__all__ if n not in ("reset_names", "concat", "cat")]
    ),
    position=st.integers(0, 6),
    value=st.sampled_from(_ODD),
)
def test_odd_arguments_raise_polyc_errors_only(op, position, value):
    import inspect

    import polyc

    tensors = {
        "a": ph("a", (2, 3, 6, 5)),
        "w": ph("w", (3, 3, 3, 3)),
        "b": ph("b", (3,)),
        "i": ph("i", (4,), "int64"),
        "t": ph("t", (6, 5)),
    }
    fn = getattr(nn, op)
    args = [tensors[a] if isinstance(a, str) else a for a in _FIRST.get(op, ("a",))]
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "name"]
    rest = params[len(args) :]
    if not rest:
        return
    target = rest[position % len(rest)]
    kwargs = {p.name: 2 for p in rest if p.default is inspect.Parameter.empty}
    kwargs[target.name] = value
    try:
        out = fn(*args, **kwargs)
    except polyc.PolycError:
        return
    outs = out if isinstance(out, tuple) else (out,)  # max_with_indices: a pair
    assert all(isinstance(o, pc.Tensor) for o in outs)
