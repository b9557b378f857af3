"""Every error the torch frontend raises, with its message."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import polyc
from polyc.errors import ArgumentError, FrontendError


def line_of(fn, text: str) -> int:
    """The source line of ``fn`` that contains ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(n for n, line in enumerate(lines) if text in line)


class SpecialI0(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return torch.special.i0(y)


def test_unsupported_op_names_op_node_and_line_only():
    line = line_of(SpecialI0.forward, "i0")
    with pytest.raises(FrontendError) as info:
        polyc.from_torch(SpecialI0().eval(), torch.randn(2, 4))
    msg = str(info.value)
    assert msg == (
        "from_torch: aten.i0.default is not supported because polyc has no "
        f"lowering for it (node i0 at test_errors.py:{line} `return "
        "torch.special.i0(y)`). Express that line with supported operations, or keep "
        "it outside the compiled module."
    )


class Branchy(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def test_data_dependent_branch():
    line = line_of(Branchy.forward, "if x.sum()")
    with pytest.raises(
        FrontendError,
        match=rf"from_torch: the model has data-dependent control flow at "
        rf"test_errors.py:{line} `if x.sum\(\) > 0:` because a branch or a size "
        r"depends on the values in a tensor\. Compute both branches and pick with "
        r"torch.where",
    ):
        polyc.from_torch(Branchy(), torch.randn(3))


class Nonzero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x).sum() * x


def test_data_dependent_shape():
    with pytest.raises(
        FrontendError,
        match=r"data-dependent control flow .*(nonzero|a branch or a size)",
    ):
        polyc.from_torch(Nonzero(), torch.randn(3))


def test_training_mode_batch_norm_asks_for_eval():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    with pytest.raises(
        FrontendError,
        match=r"from_torch: the module's forward has a buffer mutation of "
        r"1.running_mean because it updates state while running \(training-mode "
        r"batch norm does\)\. Call module.eval\(\) before importing it\.",
    ):
        polyc.from_torch(model, torch.randn(2, 3, 6, 6))


def test_training_mode_dropout_is_random():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    with pytest.raises(
        FrontendError,
        match=r"aten.dropout.default \(node dropout.*\): dropout in training mode is "
        r"random\. Call module.eval\(\) before import\.",
    ):
        polyc.from_torch(model, torch.randn(2, 4))


def test_transposed_three_d_convolution():
    model = nn.ConvTranspose3d(2, 3, 3).eval()
    with pytest.raises(
        FrontendError,
        match=r"aten.convolution.default \(node .*\): a 3-D transposed convolution is "
        r"not supported because polyc lowers 2-D transposed convolutions\. Use "
        r"ConvTranspose2d\.",
    ):
        polyc.from_torch(model, torch.randn(1, 2, 4, 4, 4))


def test_three_d_convolution():
    model = nn.Conv3d(2, 3, 3).eval()
    with pytest.raises(FrontendError, match=r"a 3-D convolution is not supported"):
        polyc.from_torch(model, torch.randn(1, 2, 5, 5, 5))


class Attention(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **self.kw)


def test_attention_dropout():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(FrontendError, match=r"attention dropout \(dropout_p=0.1\)"):
        polyc.from_torch(Attention(dropout_p=0.1), (q, q, q))


def test_grouped_query_attention():
    q, kv = torch.randn(1, 4, 4, 8), torch.randn(1, 2, 4, 8)
    with pytest.raises(FrontendError, match=r"grouped-query attention"):
        polyc.from_torch(Attention(enable_gqa=True), (q, kv, kv))


class MaskInput(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_boolean_mask_that_is_not_a_constant():
    q, mask = torch.randn(1, 2, 4, 8), torch.rand(4, 4) > 0.5
    with pytest.raises(
        FrontendError,
        match=r"a boolean attention mask that is not a constant of the model is not "
        r"supported\. Pass the mask as a float tensor",
    ):
        polyc.from_torch(MaskInput(), (q, q, q, mask))


def test_reflect_padding():
    class Pad(nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1), mode="reflect")

    with pytest.raises(FrontendError, match=r"padding mode 'reflect' is not supported"):
        polyc.from_torch(Pad(), torch.randn(1, 2, 5))


def test_auxiliary_output_used():
    class Indices(nn.Module):
        def forward(self, x):
            y, idx = F.max_pool2d(x, 2, return_indices=True)
            return y + idx.float()

    with pytest.raises(
        FrontendError, match=r"output 1 of max_pool2d.* is not computed by polyc"
    ):
        polyc.from_torch(Indices(), torch.randn(1, 1, 4, 4))


def test_non_tensor_output():
    class Pair(nn.Module):
        def forward(self, x):
            return x * 2, 3

    with pytest.raises(FrontendError, match=r"output 1 is 3, not a tensor"):
        polyc.from_torch(Pair(), torch.randn(2))


def test_not_a_module():
    with pytest.raises(ArgumentError, match=r"module is a function, not a torch.nn"):
        polyc.from_torch(lambda x: x, torch.randn(2))


def test_export_failure_is_a_frontend_error():
    class Opaque(nn.Module):
        def forward(self, x):
            return torch.from_numpy(x.numpy() * 2)

    with pytest.raises(FrontendError, match=r"torch.export could not trace the model"):
        polyc.from_torch(Opaque(), torch.randn(2))


def test_non_integer_nearest_scale():
    class Up(nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=1.5)

    with pytest.raises(
        FrontendError,
        match=r"aten.upsample_nearest2d.vec \(node .*\): nearest upsampling by the "
        r"non-integer scale \[1.5, 1.5\] is not supported",
    ):
        polyc.from_torch(Up(), torch.randn(1, 1, 5, 5))


class IntBitwise(nn.Module):
    def forward(self, i):
        return (i & 3) * 2


def test_bitwise_op_on_integers_is_refused_with_the_alternative():
    with pytest.raises(
        FrontendError,
        match=r"aten.bitwise_and.Scalar \(node bitwise_and at test_errors.py:\d+ "
        r"`return \(i & 3\) \* 2`\): a logical op between a tensor and a Python value "
        r"is not supported",
    ):
        polyc.from_torch(IntBitwise(), torch.randint(0, 8, (2, 3)))


class IntBitwiseTensors(nn.Module):
    def forward(self, i, j):
        return i | j


def test_bitwise_op_between_integer_tensors_is_refused():
    with pytest.raises(
        FrontendError,
        match=r"bitwise ops on int64 tensors are not supported because polyc has bit "
        r"operations only on bool tensors \(where they are logical\)\. Use it on bool "
        r"tensors \(masks\), or on integers outside the model\.",
    ):
        polyc.from_torch(
            IntBitwiseTensors(), (torch.randint(0, 8, (3,)), torch.randint(0, 8, (3,)))
        )


def test_complex_input_is_refused_with_the_dtypes_polyc_has():
    with pytest.raises(
        FrontendError,
        match=r"^from_torch: complex64 is not supported because input arg0 is complex64 "
        r"and polyc computes in float32, float16, bfloat16, float64, int8, int32, int64 "
        r"and bool only\. Cast it to one of those before importing the model\.$",
    ):
        polyc.from_torch(nn.Identity(), torch.randn(2, dtype=torch.complex64))
