"""Copies (views, transposes, permutes) inlined into their readers
(schedules/accel/inline.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import polyc
import schedules as S
from codegen.accel.direct import numpy_inputs
from polyc.errors import IllegalTransformError
from polyc.ir.expr import Load
from polyc.ir.kernel import Role
from polyc.oracle.interpreter import interpret
from schedules.accel.inline import inlinable, inline_all


class _Heads(nn.Module):
    """Attention's head split and key transpose: q, k from one linear each, split
    into two heads, k transposed, then q @ k^T per head."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.q, self.k, self.heads = nn.Linear(d, d), nn.Linear(d, d), heads

    def forward(self, x):
        b, n, d = x.shape
        q = self.q(x).view(b, n, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(x).view(b, n, self.heads, d // self.heads).transpose(1, 2)
        return q @ k.transpose(-1, -2)


def _kernel():
    torch.manual_seed(0)
    return polyc.from_torch(_Heads().eval(), (torch.randn(1, 8, 16),))


def test_the_copies_go_and_the_outputs_stay_the_same():
    kernel = _kernel()
    copies = inlinable(kernel)
    assert copies, "the head split and the transposes are copies"
    inlined = inline_all(kernel)
    assert len(inlined.statements) == len(kernel.statements) - len(copies)
    assert not {s.name for s in inlined.statements} & set(copies)
    assert inlinable(inlined) == []
    x = numpy_inputs(kernel, np.random.default_rng(0))
    want, got = interpret(kernel, x), interpret(inlined, x)
    for name, v in want.items():
        np.testing.assert_array_equal(got[name], v)  # copies: bit for bit
    assert [st.name for st in inlined.history] == ["inline_copy"] * len(inlined.history)
    replayed = S.replay(kernel, inlined.history)
    assert [str(s) for s in replayed.statements] == [str(s) for s in inlined.statements]


def _copies_of_temporaries(kernel):
    return [
        s.name
        for s in kernel.statements
        if isinstance(s.body, Load) and kernel.arrays[s.body.array].role == Role.TEMP
    ]


def test_on_the_accelerator_the_copies_cost_no_vector_pass():
    """The scheduler moves the biases into the head split (view = linear + bias,
    no longer a copy) and inlines the transposes: no copy of a temporary is left,
    and the run checks its outputs against the interpreter's."""
    kernel = _kernel()
    assert len(_copies_of_temporaries(kernel)) >= 4
    compiled = polyc.compile(kernel, config="edge-npu", verify=True)
    compiled.run(numpy_inputs(kernel, np.random.default_rng(0)))
    assert _copies_of_temporaries(compiled.kernel) == []


def test_a_reshape_that_merges_dimensions_keeps_its_copy():
    """view(b, n, d) of a (b, n, h, d/h) tensor indexes with a floor division."""

    class Merge(nn.Module):
        def forward(self, x):
            return torch.relu(x.transpose(1, 2).reshape(1, 4, 8))

    torch.manual_seed(0)
    kernel = polyc.from_torch(Merge().eval(), (torch.randn(1, 2, 4, 4),))
    floors = [
        s.name for s in kernel.statements if "//" in str(s) and s.reduction is None
    ]
    assert floors
    assert not set(floors) & set(inlinable(kernel))
    with pytest.raises(
        IllegalTransformError,
        match=r"inline_copy: S\d+ cannot be inlined into its readers because .*floor division",
    ):
        S.inline_copy(kernel, floors[0])


def _widened(src: str):
    """``y = float32(x) * 2`` with the widening its own statement (as the bfloat16
    model's per-op widenings are)."""
    from polyc import compute as pc
    from polyc.ops import nn as ops

    x = pc.placeholder("x", (4, 6), src)
    wide = ops.cast(x, "float32", name="wide")
    return pc.kernel(f"widen_{src}", [ops.mul(wide, 2.0, name="y")], inputs=[x])


def test_a_bfloat16_widening_inlines_into_its_reader_and_others_do_not():
    from polyc.ir import dtypes
    from polyc.ir.expr import Cast

    kernel = _widened("bfloat16")
    assert inlinable(kernel) == [kernel.statements[0].name]
    inlined = inline_all(kernel)
    (stmt,) = inlined.statements
    (read,) = stmt.reads
    assert read.array == "x" and read.dtype == dtypes.bfloat16
    assert any(isinstance(n, Cast) for n in stmt.body.walk())
    x = {"x": (np.arange(24).reshape(4, 6) / 7).astype(dtypes.bfloat16_numpy())}
    np.testing.assert_array_equal(interpret(inlined, x)["y"], interpret(kernel, x)["y"])
    # a float16 widening (or any other conversion) stays a statement of its own
    assert inlinable(_widened("float16")) == []
