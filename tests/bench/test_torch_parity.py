"""bench.torch_parity: the kernel comparison it rests on, and its table (the
models themselves run in tests/integrations/test_torch_compile_parity.py)."""

from __future__ import annotations

import torch
from torch import nn

import polyc
from bench import torch_parity


def _kernel(seed: int, act=nn.ReLU):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 3), act()).eval()
    return polyc.from_torch(model, (torch.randn(2, 4),))


def test_same_kernel_up_to_names_and_each_kind_of_difference():
    a = _kernel(0)
    assert torch_parity.kernel_difference(a, _kernel(0)) is None
    assert "hold different data" in torch_parity.kernel_difference(a, _kernel(1))
    assert "arrays against" in torch_parity.kernel_difference(
        a, _kernel(0, act=nn.Identity)
    )
    other_body = torch_parity.kernel_difference(a, _kernel(0, act=nn.Tanh))
    assert other_body.startswith("line ") and "tanh" in other_body


def test_the_table_names_a_difference():
    def row(model, same, cycles):
        return {
            "model": model,
            "dtype": "float32",
            "statements": 3,
            "from_torch": {"cycles": 100},
            "torch_compile": {"cycles": cycles},
            "same_kernel": same,
            "difference": "" if same else "3 arrays against 4",
            "same_cycles": cycles == 100,
            "graphs": ["compiled"],
        }

    text = torch_parity.table(
        {"config": "tiny", "rows": [row("a", True, 100), row("b", False, 120)]}
    )
    assert "| a | float32 | 3 | 100 | 100 | yes | yes | compiled |" in text
    assert (
        "| b | float32 | 3 | 100 | 120 | no: 3 arrays against 4 | no | compiled |"
        in text
    )
    assert "1 of 2 runs (2 models): the same kernel and the same cycles, whole " in text
