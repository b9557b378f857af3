"""torch.topk, torch.sort and torch.argsort on small sizes, against torch eager:
values always, indices wherever torch's order is defined (distinct values, or
ties that torch's CPU sort keeps in order), and a valid, stable choice where it
is not (topk's ties)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyc
from polyc.errors import FrontendError
from tests.frontends.torch.test_errors import line_of
from tests.frontends.torch.test_ops import Fn
from tests.support.torchcheck import all_of, check, eager

g = torch.Generator().manual_seed(16)


def r(*shape):
    return torch.randn(*shape, generator=g)


def ties(*shape, high=3):
    """Small integers as floats: many equal values."""
    return torch.randint(0, high, shape, generator=g).float()


def with_nans(x, count=1):
    """``x`` with ``count`` NaNs in each row (at random places)."""
    x = x.clone()
    for row in x.reshape(-1, x.shape[-1]):
        row[torch.randperm(row.numel(), generator=g)[:count]] = float("nan")
    return x


def pair(f):
    return Fn(lambda x: tuple(f(x)))


#: cases whose indices torch defines (distinct values, or its stable small sort)
CASES = {
    "topk_last_dim": (pair(lambda x: torch.topk(x, 3)), (r(4, 10),)),
    "topk_smallest_dim0": (
        pair(lambda x: torch.topk(x, 2, dim=0, largest=False)),
        (r(7, 3, 2),),
    ),
    "topk_vocabulary": (pair(lambda x: x.topk(5, dim=-1)), (r(2, 1000),)),
    "topk_float16": (pair(lambda x: torch.topk(x, 4)), (r(3, 12).half(),)),
    "topk_int32": (
        pair(lambda x: torch.topk(x, 3)),
        (torch.randperm(24, generator=g).reshape(2, 12).int(),),
    ),
    "topk_nan_first": (pair(lambda x: torch.topk(x, 3)), (with_nans(r(3, 9)),)),
    "topk_smallest_nan_last": (
        pair(lambda x: torch.topk(x, 4, largest=False)),
        (with_nans(r(2, 4)),),
    ),
    "topk_k_equals_size": (pair(lambda x: torch.topk(x, 5)), (r(2, 5),)),
    "sort_ties": (pair(lambda x: torch.sort(x)), (ties(3, 16),)),
    "sort_descending_ties_nans": (
        pair(lambda x: torch.sort(x, dim=-1, descending=True)),
        (with_nans(ties(4, 11), 2),),
    ),
    "sort_dim1": (pair(lambda x: x.sort(dim=1)), (r(2, 6, 3),)),
    "argsort_stable_past_16": (
        Fn(lambda x: torch.argsort(x, dim=0, descending=True, stable=True)),
        (ties(40, 2),),
    ),
    "argsort_int64": (
        Fn(lambda x: x.argsort()),
        (torch.randint(-5, 5, (3, 9), generator=g),),
    ),
    "topk_into_softmax": (
        Fn(lambda x: torch.softmax(torch.topk(x, 4).values, -1)),
        (r(2, 30),),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_interpreted(case):
    module, inputs = CASES[case]
    check(module, inputs, targets=("interpret",))


def test_every_case_as_compiled_c():
    module, inputs = all_of(CASES)
    kernel = check(module, inputs, targets=("host",))
    assert len(kernel.outputs) == len(eager(module, inputs))


@pytest.mark.parametrize("case", ["topk_vocabulary", "sort_descending_ties_nans"])
def test_case_on_edge_npu(case):
    module, inputs = CASES[case]
    check(module, inputs, targets=("edge-npu",))


def test_topk_ties_get_torchs_values_and_the_first_indices():
    """torch.topk orders equal values as std::partial_sort leaves them
    (unspecified); polyc takes the smaller index first, a valid answer."""
    x = ties(5, 12)
    module = pair(lambda x: torch.topk(x, 4))
    kernel = polyc.from_torch(module, (x,))
    got = polyc.interpret(kernel, {"arg0": x.numpy()})
    values, indices = got["out0"], got["out1"]
    ref_values, ref_indices = (t.numpy() for t in torch.topk(x, 4))
    np.testing.assert_array_equal(values, ref_values)
    np.testing.assert_array_equal(np.take_along_axis(x.numpy(), indices, -1), values)
    stable = torch.sort(x, descending=True, stable=True).indices[:, :4].numpy()
    np.testing.assert_array_equal(indices, stable)
    assert not np.array_equal(indices, ref_indices)  # torch's own order differs


class BigTopk(torch.nn.Module):
    def forward(self, x):
        return torch.topk(x, 17).values


class BigSort(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x).values


def test_topk_with_a_large_k_is_refused_with_the_fix():
    line = line_of(BigTopk.forward, "topk")
    with pytest.raises(FrontendError) as info:
        polyc.from_torch(BigTopk(), (r(2, 100),))
    assert str(info.value) == (
        "from_torch: aten.topk.default (node topk at "
        f"test_sort.py:{line} `return torch.topk(x, 17).values`): topk with k=17 "
        "is too large because polyc lowers topk as k passes of an argmax over the "
        "100 elements (k at most 16). Take k <= 16, or run the topk in PyTorch on "
        "polyc's output."
    )


def test_sorting_a_long_dim_is_refused_with_the_fix():
    with pytest.raises(
        FrontendError,
        match=r"sort along a dim of 65 elements is too large because polyc sorts "
        r"by ranking every pair of elements \(at most 64\)\. Sort a dim of at most "
        r"64, take the few largest with torch.topk \(k <= 16\)",
    ):
        polyc.from_torch(BigSort(), (r(3, 65),))


def signed_zeros() -> torch.Tensor:
    """Rows of -0.0, 0.0 and a few other values, both zeros several times."""
    z = torch.tensor([0.0, -0.0, 1.5, -0.0, -2.0, 0.0, -0.0, 0.25])
    return torch.stack([z, z.flip(0), -z])


ZEROS = {
    "sort": pair(lambda x: torch.sort(x, stable=True)),
    "sort_descending": pair(lambda x: torch.sort(x, descending=True, stable=True)),
    "topk": pair(lambda x: torch.topk(x, 5)),
    "topk_smallest": pair(lambda x: torch.topk(x, 5, largest=False)),
}


@pytest.mark.parametrize("target", ["interpret", "host"])
def test_signed_zeros_keep_their_sign_and_torchs_order(target):
    """-0.0 and 0.0 are equal to torch: sort keeps them in order (stable), and
    every value is the element at its index, sign included (the sort's fill used
    to add zeros to it and return 0.0)."""
    x = signed_zeros()
    module, inputs = all_of({n: (m, [x]) for n, m in ZEROS.items()})
    kernel = polyc.from_torch(module, tuple(inputs))
    feeds = {f"arg{n}": t.numpy() for n, t in enumerate(inputs)}
    run = polyc.interpret if target == "interpret" else polyc.build(kernel)
    got = run(kernel, feeds) if target == "interpret" else run(feeds)
    outs = [got[a.name] for a in kernel.outputs]
    refs = eager(module, inputs)
    for n, name in enumerate(sorted(ZEROS)):
        values, indices = outs[2 * n], outs[2 * n + 1]
        ref_values, ref_indices = refs[2 * n], refs[2 * n + 1]
        np.testing.assert_array_equal(values, ref_values, err_msg=name)
        at = np.take_along_axis(x.numpy(), indices, -1)
        np.testing.assert_array_equal(np.signbit(values), np.signbit(at), err_msg=name)
        if name.startswith("sort"):  # stable: torch's order, signs included
            np.testing.assert_array_equal(indices, ref_indices, err_msg=name)
            np.testing.assert_array_equal(
                np.signbit(values), np.signbit(ref_values), err_msg=name
            )


def test_topk_unsorted_returns_torchs_set_in_sorted_order():
    """``sorted=False``: torch's order is unspecified; polyc returns the same
    elements (values and indices), best first."""
    x = r(3, 20)
    module = pair(lambda x: torch.topk(x, 6, sorted=False))
    kernel = polyc.from_torch(module, (x,))
    got = polyc.interpret(kernel, {"arg0": x.numpy()})
    values, indices = got["out0"], got["out1"]
    ref_values, ref_indices = (t.numpy() for t in torch.topk(x, 6, sorted=False))
    np.testing.assert_array_equal(np.sort(indices, -1), np.sort(ref_indices, -1))
    np.testing.assert_array_equal(np.sort(values, -1), np.sort(ref_values, -1))
    np.testing.assert_array_equal(values, -np.sort(-values, -1))  # best first
