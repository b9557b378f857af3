"""Copies folded into their producers (schedules/accel/fold.py): attention's heads
merged back written in place by the MAC calls of ``P @ V``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import polyc
import schedules as S
from codegen.accel.direct import numpy_inputs
from polyc.errors import IllegalTransformError
from polyc.ir.expr import Load
from polyc.ir.kernel import Role
from polyc.oracle.interpreter import interpret
from schedules.accel.fold import fold_all, foldable
from schedules.accel.inline import inline_all


class _Attention(nn.Module):
    """GPT-2's attention: one projection for q, k and v, heads split off, the
    scaled dot-product attention, the heads merged back (``transpose(1, 2)`` then
    ``view``: a floor division in the copy's read), the output projection."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (
            t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v)
        )
        a = F.scaled_dot_product_attention(q, k, v)
        return self.out(a.transpose(1, 2).reshape(b, n, d))


def _kernel():
    torch.manual_seed(0)
    return polyc.from_torch(_Attention().eval(), (torch.randn(1, 8, 16),))


def _merges(kernel):
    """The copies of a temporary whose read index has a floor division."""
    return [
        s.name
        for s in kernel.statements
        if isinstance(s.body, Load)
        and kernel.arrays[s.body.array].role == Role.TEMP
        and any("//" in str(a) for a in s.body.index)
    ]


def test_the_heads_merged_back_are_written_in_place_with_the_same_values():
    kernel = inline_all(_kernel())
    merges = _merges(kernel)
    assert merges, "the view after the transpose merges the heads with a floor division"
    assert set(merges) <= set(foldable(kernel))
    folded = fold_all(kernel)
    assert _merges(folded) == []
    assert len(folded.statements) < len(kernel.statements)
    # P @ V now writes the merged rows: an affine index over the head and column
    pv = [s for s in folded.statements if s.reduction and len(s.target.index) == 3]
    assert any(len(s.target.index[2].names()) == 2 for s in pv), [str(s) for s in pv]
    x = numpy_inputs(kernel, np.random.default_rng(0))
    want, got = interpret(kernel, x), interpret(folded, x)
    for name, v in want.items():
        np.testing.assert_array_equal(got[name], v)  # the same sums, in place
    steps = [st for st in folded.history if st.name == "fold_copy"]
    assert steps
    replayed = S.replay(kernel, steps)
    assert [str(s) for s in replayed.statements] == [str(s) for s in folded.statements]


def test_on_the_accelerator_the_merge_costs_no_copy():
    """The scheduler folds the merge: no copy with a floor division is left in
    the compiled kernel (before, the transpose and the view ran as a layer of
    their own on the vector unit), and the outputs are the interpreter's."""
    kernel = _kernel()
    assert _merges(inline_all(kernel))
    compiled = polyc.compile(kernel, config="datacenter", verify=True)
    compiled.run(numpy_inputs(kernel, np.random.default_rng(0)))
    assert _merges(compiled.kernel) == []
    assert any(st.name == "fold_copy" for st in compiled.kernel.history)


def test_a_source_read_elsewhere_keeps_its_copy():
    """``y`` reads the attention output besides the merge: the producers must
    keep writing it, so the merge cannot fold."""

    class Both(_Attention):
        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            q, k, v = (
                t.view(b, n, self.heads, d // self.heads).transpose(1, 2)
                for t in (q, k, v)
            )
            a = F.scaled_dot_product_attention(q, k, v)
            merged = a.transpose(1, 2).reshape(b, n, d)
            return self.out(merged), torch.relu(a)

    torch.manual_seed(0)
    kernel = inline_all(polyc.from_torch(Both().eval(), (torch.randn(1, 8, 16),)))
    merges = _merges(kernel)
    assert merges
    source = kernel.statement(merges[0]).body.array
    producer_of_source = [s for s in kernel.statements if s.target.array == source]
    assert producer_of_source  # the transpose, read by the merge alone
    blocked = [
        s.name
        for s in kernel.statements
        if isinstance(s.body, Load)
        and s.reduction is None
        and kernel.arrays[s.body.array].role == Role.TEMP
        and any(
            o.name != s.name and any(ld.array == s.body.array for ld in o.reads)
            for o in kernel.statements
        )
    ]
    assert blocked
    with pytest.raises(
        IllegalTransformError,
        match=r"fold_copy: S\d+ cannot be folded into its producers because .*reads",
    ):
        S.fold_copy(kernel, blocked[0])


def test_a_broadcast_is_not_folded():
    """``expand`` puts one element in several places: the copy stays."""

    class Expand(nn.Module):
        def forward(self, x):
            return torch.relu(torch.exp(x).expand(3, 4).contiguous())

    torch.manual_seed(0)
    kernel = polyc.from_torch(Expand().eval(), (torch.randn(1, 4),))
    copies = [s.name for s in kernel.statements if isinstance(s.body, Load)]
    for name in copies:
        assert name not in foldable(kernel)


def test_the_place_of_an_element_is_read_from_isl_as_an_affine_index():
    """The map from the source's elements to the target's, as one expression per
    target dimension; a floor division or a size parameter refuses it (the
    parameter's term would be lost)."""
    import islpy as isl

    from schedules.accel.fold import _affine

    rows = _affine(isl.Map("{ X[a, b] -> T[b, 4a + b] : 0 <= a < 3 and 0 <= b < 4 }"))
    assert [str(a) for a in rows] == ["d1", "4*d0 + d1"]
    split = "{ X[a] -> T[floor(a/2), a - 2*floor(a/2)] : 0 <= a < 8 }"
    assert _affine(isl.Map(split)) is None
    shifted = "[N] -> { X[a, b] -> T[a + N, b] : 0 <= a < N and 0 <= b < 4 }"
    assert _affine(isl.Map(shifted)) is None
