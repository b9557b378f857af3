"""Each supported ATen op on its own, imported with from_torch, against torch eager.

Every case runs through the interpreter alone (one small kernel each); the compiled C
of all cases is checked at once by one module that returns every case's output (one
C build instead of sixty).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from polyc.frontends.torch.lowerings import LOWERINGS
from tests.support.torchcheck import all_of, assert_close, check, eager, run


class Fn(nn.Module):
    """``f(*inputs, *params)`` with the params as the module's weights."""

    def __init__(self, f, *params):
        super().__init__()
        self.f = f
        self.params = nn.ParameterList([nn.Parameter(p) for p in params])

    def forward(self, *xs):
        return self.f(*xs, *self.params)


def _inplace_relu(x):
    y = x * 2
    y.relu_()
    return y.add_(1)


class Decomposed(nn.Module):
    """Ops outside the direct set (addcmul) send the graph through torch's
    decompositions: batch norm and pad then arrive as their core ATen forms."""

    def __init__(self):
        super().__init__()
        self.bn = _bn()

    def forward(self, x):
        y = F.pad(self.bn(x), (1, 1), value=0.25)
        return torch.addcmul(y, y, y, value=0.5)


class MaskedAttention(nn.Module):
    """Attention with a constant boolean mask (a buffer)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.rand(5, 6, generator=g) > 0.3)

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)


def _bn():
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.uniform_(0.5, 1.5)
    return bn


g = torch.Generator().manual_seed(0)


def r(*shape):
    return torch.randn(*shape, generator=g)


def pos(*shape):
    return torch.rand(*shape, generator=g) + 0.5


# name -> (module, inputs); the name says which ATen op (and variant) it exercises
CASES = {
    "conv2d_bias_stride_pad": (
        Fn(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), r(8, 3, 3, 3), r(8)),
        (r(2, 3, 9, 9),),
    ),
    "conv2d_depthwise": (
        Fn(lambda x, w: F.conv2d(x, w, padding=1, groups=4), r(4, 1, 3, 3)),
        (r(1, 4, 8, 8),),
    ),
    "conv2d_dilation": (
        Fn(lambda x, w: F.conv2d(x, w, padding=2, dilation=2), r(4, 2, 3, 3)),
        (r(1, 2, 8, 8),),
    ),
    "conv2d_groups_1x1": (
        Fn(lambda x, w: F.conv2d(x, w, groups=2), r(6, 2, 1, 1)),
        (r(1, 4, 5, 5),),
    ),
    "conv2d_same_rect": (
        Fn(lambda x, w: F.conv2d(x, w, padding="same"), r(4, 2, 3, 5)),
        (r(1, 2, 6, 7),),
    ),
    "conv_transpose2d": (
        Fn(
            lambda x, w, b: F.conv_transpose2d(
                x, w, b, stride=2, padding=1, output_padding=1
            ),
            r(2, 3, 3, 3),
            r(3),
        ),
        (r(1, 2, 5, 4),),
    ),
    "conv_transpose2d_groups_dilation": (
        Fn(lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2), r(4, 1, 2, 2)),
        (r(1, 4, 3, 3),),
    ),
    "conv1d": (
        Fn(lambda x, w, b: F.conv1d(x, w, b, padding=1, stride=2), r(4, 2, 3), r(4)),
        (r(1, 2, 9),),
    ),
    "linear": (Fn(lambda x, w, b: F.linear(x, w, b), r(5, 7), r(5)), (r(3, 7),)),
    "linear_3d_nobias": (Fn(lambda x, w: F.linear(x, w), r(5, 7)), (r(2, 3, 7),)),
    "addmm": (
        Fn(lambda x, w, b: torch.addmm(b, x, w, beta=0.5, alpha=2), r(7, 5), r(5)),
        (r(3, 7),),
    ),
    "mm": (Fn(torch.mm), (r(3, 7), r(7, 4))),
    "bmm": (Fn(torch.bmm), (r(2, 3, 7), r(2, 7, 4))),
    "matmul_broadcast": (Fn(torch.matmul), (r(2, 3, 7), r(7, 4))),
    "relu": (Fn(F.relu), (r(3, 4),)),
    "relu_inplace_add_inplace": (Fn(_inplace_relu), (r(3, 4),)),
    "gelu": (Fn(F.gelu), (r(3, 4),)),
    "gelu_tanh": (Fn(lambda x: F.gelu(x, approximate="tanh")), (r(3, 4),)),
    "silu": (Fn(F.silu), (r(3, 4),)),
    "sigmoid": (Fn(torch.sigmoid), (r(3, 4),)),
    "tanh": (Fn(torch.tanh), (r(3, 4),)),
    "hardtanh_relu6": (Fn(F.relu6), (r(3, 4) * 5,)),
    "hardswish": (Fn(F.hardswish), (r(3, 4) * 4,)),
    "leaky_relu": (Fn(lambda x: F.leaky_relu(x, 0.2)), (r(3, 4),)),
    "clamp": (Fn(lambda x: x.clamp(-0.5, 0.5)), (r(3, 4),)),
    "exp_log_sqrt": (
        Fn(lambda x: torch.exp(x) + torch.log(x) * torch.sqrt(x)),
        (pos(3, 4),),
    ),
    "rsqrt_neg_abs": (Fn(lambda x: -torch.rsqrt(x.abs() + 1)), (r(3, 4),)),
    "erf_sin_cos_reciprocal": (
        Fn(lambda x: torch.erf(x) + torch.sin(x) * torch.cos(x) + torch.reciprocal(x)),
        (pos(3, 4),),
    ),
    "hardsigmoid": (Fn(F.hardsigmoid), (r(3, 4) * 4,)),
    "hardtanh": (Fn(lambda x: F.hardtanh(x, -0.5, 2.0)), (r(3, 4) * 2,)),
    "minimum_amin": (Fn(lambda x, y: torch.minimum(x, y).amin(1)), (r(3, 4), r(3, 4))),
    "clone_detach_dropout_eval": (
        Fn(lambda x: F.dropout(x.clone().detach() * 2, 0.5, training=False)),
        (r(3, 4),),
    ),
    "add_broadcast": (Fn(torch.add), (r(3, 4), r(4))),
    "add_alpha": (Fn(lambda x, y: torch.add(x, y, alpha=0.5)), (r(3, 4), r(3, 1))),
    "sub_broadcast": (Fn(torch.sub), (r(3, 1), r(4))),
    "mul_scalar": (Fn(lambda x: x * 3.0), (r(3, 4),)),
    "mul_param": (Fn(lambda x, w: x * w, r(4, 1, 1)), (r(2, 4, 3, 3),)),
    "div": (Fn(torch.div), (r(3, 4), pos(3, 4))),
    "div_scalar": (Fn(lambda x: x / 7.0), (r(3, 4),)),
    "rsub": (Fn(lambda x: 1 - x), (r(3, 4),)),
    "pow_scalar": (Fn(lambda x: x**2), (r(3, 4),)),
    "maximum": (Fn(torch.maximum), (r(3, 4), r(3, 4))),
    "max_pool2d": (Fn(lambda x: F.max_pool2d(x, 3, 2, 1)), (r(1, 2, 8, 8),)),
    "max_pool2d_ceil": (
        Fn(lambda x: F.max_pool2d(x, 2, ceil_mode=True)),
        (r(1, 2, 7, 7),),
    ),
    "avg_pool2d": (Fn(lambda x: F.avg_pool2d(x, 2)), (r(1, 2, 8, 8),)),
    "avg_pool2d_pad_nocount": (
        Fn(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
        (r(1, 2, 7, 7),),
    ),
    "adaptive_avg_pool2d_global": (
        Fn(lambda x: F.adaptive_avg_pool2d(x, 1)),
        (r(1, 2, 5, 5),),
    ),
    "adaptive_avg_pool2d_uneven": (
        Fn(lambda x: F.adaptive_avg_pool2d(x, (3, 2))),
        (r(1, 2, 7, 5),),
    ),
    "adaptive_max_pool2d": (
        Fn(lambda x: F.adaptive_max_pool2d(x, (2, 3))),
        (r(1, 2, 6, 7),),
    ),
    "upsample_nearest2d": (
        Fn(lambda x: F.interpolate(x, scale_factor=2) + 1),
        (r(1, 2, 3, 4),),
    ),
    "upsample_nearest2d_size": (
        Fn(lambda x: F.interpolate(x, size=(5, 7))),
        (r(1, 2, 4, 4),),
    ),
    "unflatten": (Fn(lambda x: x.unflatten(1, (2, 3)) * 2), (r(2, 6),)),
    "flatten": (Fn(lambda x: x.flatten(1) * 2), (r(2, 3, 4),)),
    "view": (Fn(lambda x: x.view(6, 4) * 2), (r(2, 3, 4),)),
    "reshape_infer": (Fn(lambda x: x.reshape(4, -1)), (r(2, 3, 4),)),
    "permute": (Fn(lambda x: x.permute(2, 0, 1)), (r(2, 3, 4),)),
    "transpose_contiguous": (
        Fn(lambda x: x.transpose(1, 2).contiguous()),
        (r(2, 3, 4),),
    ),
    "t": (Fn(lambda x, w: x @ w.t(), r(5, 4)), (r(3, 4),)),
    "unsqueeze_squeeze": (Fn(lambda x: x.unsqueeze(1).squeeze(1) * 2), (r(2, 3),)),
    "expand": (Fn(lambda x: x.expand(3, 4)), (r(1, 4),)),
    "select": (Fn(lambda x: x[:, 1]), (r(2, 5),)),
    "slice": (Fn(lambda x: x[:, 1:5:2]), (r(2, 6),)),
    "cat": (Fn(lambda x, y: torch.cat([x, y], 1)), (r(2, 3), r(2, 4))),
    "split_with_sizes": (
        Fn(lambda x: tuple(p * (n + 1) for n, p in enumerate(x.split([2, 3, 1], 1)))),
        (r(2, 6, 3),),
    ),
    "split_by_size": (
        Fn(lambda x: tuple(p + n for n, p in enumerate(torch.split(x, 2, -1)))),
        (r(2, 5),),
    ),
    "constant_pad": (Fn(lambda x: F.pad(x, (1, 2), value=0.5)), (r(2, 3),)),
    "softmax": (Fn(lambda x: torch.softmax(x, -1)), (r(3, 5),)),
    "softmax_dim0": (Fn(lambda x: torch.softmax(x, 0)), (r(3, 5),)),
    "log_softmax": (Fn(lambda x: torch.log_softmax(x, 1)), (r(3, 5),)),
    "layer_norm": (
        Fn(lambda x, w, b: F.layer_norm(x, (5,), w, b), r(5), r(5)),
        (r(3, 5),),
    ),
    "layer_norm_2d_noaffine": (Fn(lambda x: F.layer_norm(x, (3, 5))), (r(2, 3, 5),)),
    "batch_norm_alone": (_bn(), (r(2, 3, 4, 4),)),
    "mean_dims": (Fn(lambda x: x.mean((1, 2))), (r(2, 3, 4),)),
    "sum_keepdim": (Fn(lambda x: x.sum(-1, keepdim=True)), (r(2, 3, 4),)),
    "amax": (Fn(lambda x: x.amax(0)), (r(2, 3),)),
    "sdpa": (
        Fn(F.scaled_dot_product_attention),
        (r(1, 2, 5, 4), r(1, 2, 6, 4), r(1, 2, 6, 3)),
    ),
    "sdpa_causal_scale": (
        Fn(
            lambda q, k, v: F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=0.3
            )
        ),
        (r(1, 2, 5, 4), r(1, 2, 5, 4), r(1, 2, 5, 3)),
    ),
    "sdpa_float_mask": (
        Fn(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
        (r(1, 2, 5, 4), r(1, 2, 6, 4), r(1, 2, 6, 3), r(5, 6)),
    ),
    "sdpa_bool_mask_constant": (
        MaskedAttention(),
        (r(1, 2, 5, 4), r(1, 2, 6, 4), r(1, 2, 6, 3)),
    ),
    "embedding_indices_input": (
        Fn(lambda i, w: F.embedding(i, w), r(10, 4)),
        (torch.randint(0, 10, (2, 3), generator=g),),
    ),
    "index_select_dim1": (
        Fn(lambda x, i: torch.index_select(x, 1, i)),
        (r(3, 5, 2), torch.tensor([4, 0, 4, 2])),
    ),
    "gather_dim0": (
        Fn(lambda x, i: torch.gather(x, 0, i)),
        (r(4, 3), torch.randint(0, 4, (5, 3), generator=g)),
    ),
    "index_tensor_negative": (
        Fn(lambda x, i: x[:, i]),
        (r(2, 6, 3), torch.tensor([[-1, 0], [5, -6]])),
    ),
    "to_copy_int_to_float": (
        Fn(lambda i, x: i.float() * x),
        (torch.randint(0, 5, (2, 3), generator=g), r(2, 3)),
    ),
    "constant_arange": (Fn(lambda x: x * torch.arange(4)), (r(3, 4),)),
    "decomposed_bn_pad_addcmul": (Decomposed(), (r(2, 3, 4, 4),)),
    "two_outputs": (Fn(lambda x: (x + 1, x * 2)), (r(3, 4),)),
    "identity_output": (Fn(lambda x: x), (r(3, 4),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_interpreted(case):
    module, inputs = CASES[case]
    check(module, inputs, targets=("interpret",))


def all_cases():
    """One module running every case, and its inputs (one C build for them all)."""
    return all_of(CASES)


def test_every_op_as_compiled_c():
    module, inputs = all_cases()
    kernel = check(module, inputs, targets=("host",))
    assert len(kernel.outputs) == len(eager(module, inputs))


def test_cases_cover_every_lowering():
    """Each registered lowering is exercised by a case (or named below as reached
    only through decomposition or another op)."""
    import polyc
    from polyc.frontends.torch import lower as torch_lower

    seen: set[str] = set()
    original = torch_lower._Lowering._call

    def spy(self, node):
        seen.add(torch_lower.packet(node.target))
        return original(self, node)

    from tests.frontends.torch.test_ops_families import CASES as FAMILIES
    from tests.frontends.torch.test_sort import CASES as SORTS

    torch_lower._Lowering._call = spy
    try:
        for module, inputs in [*CASES.values(), *FAMILIES.values(), *SORTS.values()]:
            polyc.from_torch(module.eval(), inputs)
    finally:
        torch_lower._Lowering._call = original
    indirect = {
        # the core-ATen forms of kept ops: reached when another op in the graph
        # needs torch's decompositions (the Decomposed case shows the path)
        "aten._softmax",
        "aten._log_softmax",
        "aten.native_layer_norm",
        "aten.max_pool2d_with_indices",
        "aten._adaptive_avg_pool2d",
        "aten.convolution",
        "aten._unsafe_view",
        "aten.concat",
        "aten.alias",
        "aten.lift_fresh_copy",
        # runtime checks torch.export may record
        "aten._assert_async",
        "aten._assert_scalar",
        "aten._functional_assert_async",
        "aten.sym_constrain_range",
        "aten.sym_constrain_range_for_size",
    }
    # quantize/dequantize and the folded int8 nodes: test_quant_pt2e.py
    quantized = {p for p in LOWERINGS if p.startswith(("quantized_", "int8_"))}
    missing = set(LOWERINGS) - seen - indirect - quantized
    assert not missing, f"lowerings without a case: {sorted(missing)}"


def test_interpreted_equals_compiled_on_outputs():
    module, inputs = CASES["conv2d_bias_stride_pad"]
    kernel = check(module, inputs, targets=())
    (a,) = run(kernel, inputs, "interpret")
    (b,) = run(kernel, inputs, "host")
    assert_close(a, b, "interpret vs host")
