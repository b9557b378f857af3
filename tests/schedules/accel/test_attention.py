"""Fused attention: the cores found by dataflow, the value projection moved out
of the way, the fusion chosen by the cost model, and the score matrix kept on
chip (no DRAM bytes in the run's per-tensor figure) with the interpreter's
results, on tiny and edge-npu."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyc
from polyc import compute as pc
from polyc.ops import nn
from polyc.studies.model_report import model_report
from polyc.studies.tensor_dram import DIRECT, _labels, _short, dram_by_tensor
from schedules import stree
from schedules.accel import attention
from schedules.accel.layers import MAX_STATEMENTS, per_statement, split, top_children


def _mha(width: int = 16, heads: int = 2, tokens: int = 8):
    """``nn.MultiheadAttention`` through ``from_torch``: torch's export puts the
    value's reshapes between the softmax and PV."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(width, heads, batch_first=True).eval()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    x = torch.randn(1, tokens, width)
    return polyc.from_torch(Block().eval(), (x,)), {"arg0": x.numpy()}


def _projected():
    """softmax(q k^T) v with v projected by a matmul the program writes between
    the softmax and PV (as a model's code may)."""
    q = pc.placeholder("q", (8, 4))
    kt = pc.placeholder("kt", (4, 8))
    x = pc.placeholder("x", (8, 4))
    w = pc.placeholder("w", (4, 4))
    s = nn.matmul(q, kt, name="s")
    p = nn.softmax(s, -1, name="p")
    v = nn.matmul(x, w, name="v")
    out = nn.matmul(p, v, name="o")
    return pc.kernel("projected", outputs=[out])


def _order(kernel) -> list[str]:
    return [stree.statements(c)[0] for c in top_children(kernel)]


def test_the_core_is_found_by_dataflow_and_the_value_moves_before_it():
    kernel, _ = per_statement(_projected())
    assert attention.cores(kernel) == []  # v's matmul sits inside the window
    gathered, cores = attention.gather(kernel)
    (core,) = cores
    order = _order(gathered)
    stmts = [order[p] for p in core.positions]
    v = [s.name for s in kernel.statements if s.target.array == "v"]
    assert not set(v) & set(stmts)
    assert order.index(v[-1]) < core.start
    assert core.scores == ("s", "p_max", "p_exp", "p_sum", "p")
    assert core.qk == [s.name for s in kernel.statements if s.target.array == "s"][-1]
    rng = np.random.default_rng(0)
    inputs = {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(np.float32)
        for a in kernel.inputs
    }
    want = polyc.interpret(kernel, inputs)["o"]
    np.testing.assert_allclose(polyc.interpret(gathered, inputs)["o"], want, 1e-6)


def test_gather_moves_are_checked_as_apply_schedule_checks_them():
    import schedules as S
    from polyc import IllegalTransformError

    kernel, _ = per_statement(_projected())
    gathered, _ = attention.gather(kernel)
    # recorded as apply_schedule, whose replay checks the whole tree again
    assert gathered.history[-1].name == "apply_schedule"
    replayed = S.apply_schedule(kernel, gathered.history[-1].args[0])
    assert replayed.schedule.plain_is_equal(gathered.schedule)
    children = list(top_children(kernel))
    assert attention._runs_forward(kernel, children)
    backwards = children[::-1]  # every consumer before its producer
    assert not attention._runs_forward(kernel, backwards)
    with pytest.raises(IllegalTransformError):
        S.apply_schedule(kernel, stree.to_isl(stree.Sequence_(tuple(backwards))))


def test_a_core_counts_as_one_statement_toward_the_layer_cap():
    kernel, _ = per_statement(_mha()[0])
    v = next(x for x in attention.variants(kernel) if x.name == "fused with neighbours")
    (core,) = v.cores
    assert len(core.positions) + 2 > MAX_STATEMENTS  # with the key's reshapes
    layers = split(v.kernel, cuts=v.cuts, wide=v.wide)
    holding = [lay for lay in layers if set(core.positions) & set(lay.children)]
    assert len(holding) == 1 and set(core.positions) <= set(holding[0].children)
    assert len(holding[0].stmts) > MAX_STATEMENTS


def test_the_variant_with_the_fewest_predicted_cycles_is_chosen():
    kernel, _ = per_statement(_mha()[0])
    options = attention.variants(kernel)
    assert [v.name for v in options] == [
        "fused",
        "fused with neighbours",
        "fused with the value",
        "as written",
    ]
    # the last two keep the program's order; the value's statements join the core
    assert options[2].kernel is options[3].kernel
    assert len(options[2].cores[0].positions) > len(options[1].cores[0].positions)
    cost = {
        "fused": 120.0,
        "fused with neighbours": 100.0,
        "fused with the value": 110.0,
        "as written": 150.0,
    }
    pick, note = attention.choose(options, lambda v: cost[v.name])
    assert pick.name == "fused with neighbours"
    assert "predicted 100 cycles" in note and "as written 150" in note
    # within the tie the earlier variant (the cores alone, per query tile) wins
    cost["fused"] = 100.5
    assert attention.choose(options, lambda v: cost[v.name])[0].name == "fused"
    # fusing predicted slower: the program stays as written, and says why
    cost["as written"] = 50.0
    pick, note = attention.choose(options, lambda v: cost[v.name])
    assert pick.name == "as written" and "predicted slower" in note


@pytest.mark.parametrize("config", ["tiny", "edge-npu"])
def test_the_score_matrix_moves_no_dram_bytes(config):
    kernel, inputs = _mha()
    compiled = polyc.compile(kernel, config=config)
    got, report = compiled.run(**inputs)
    want = polyc.interpret(kernel, inputs)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-5)
    td = dram_by_tensor(compiled, report)
    assert td.complete
    assert set(td.scores) >= {
        "scaled_dot_product_attention_scores",
        "scaled_dot_product_attention_probs",
    }
    assert td.score_bytes == 0
    assert all(td.bytes[a] == 0 for a in td.scores)
    assert sum(td.bytes.values()) == report.dram_bytes  # every byte has a tensor
    assert td.bytes["arg0"] > 0
    text = str(compiled)
    assert "attention S" in text and "the score matrix on chip" in text
    shown = str(model_report(compiled, report))
    assert "attention score matrices: 0 DRAM bytes" in shown


def test_a_program_without_attention_has_no_variants():
    a = pc.placeholder("a", (8, 8))
    b = pc.placeholder("b", (8, 8))
    c = nn.softmax(nn.matmul(a, b, name="c"), -1, name="d")
    kernel, _ = per_statement(pc.kernel("no_pv", outputs=[c]))
    assert attention.variants(kernel) == []
    assert attention.score_arrays(kernel) == []


def test_cut_labels_go_to_the_array_that_has_such_a_copy():
    long = "scaled_dot_product_attention_"
    names = [f"{long}scores", f"{long}scaled", "x"]
    labels = _labels(names, {"in": {f"{long}scaled"}, "out": set()})
    # both labels are cut to the same 31 characters; only one array is copied in
    cut = f"{long}scores in"[:31]
    assert cut == f"{long}scaled in"[:31]
    assert labels[cut] == f"{long}scaled"
    assert labels["x in"] == "x"
    both = _labels(names, {"in": set(), "out": set()})
    assert both[cut] == f"{long}scores|{long}scaled"
    assert _short(both[cut]) == f"{long}sc* (2 arrays)"
    assert DIRECT.startswith("(")


def test_an_attention_whose_score_rows_do_not_fit_says_why_it_falls_back():
    # 2 queries over 2,048 keys: one query's scores, exp and probabilities
    # alone take 24 KiB of tiny's 16 KiB
    q = pc.placeholder("q", (2, 4))
    kt = pc.placeholder("kt", (4, 2048))
    v = pc.placeholder("v", (2048, 4))
    o = nn.matmul(nn.softmax(nn.matmul(q, kt, name="s"), -1, name="p"), v, name="o")
    compiled = polyc.compile(pc.kernel("long", outputs=[o]), config="tiny")
    falls = [n for n in compiled.fallbacks() if "attention" in n]
    assert len(falls) == 1
    assert "no variant's layers fit on chip" in falls[0]
    assert "no online softmax yet" in falls[0]


def test_a_max_pooling_between_two_convolutions_is_not_an_attention():
    """conv -> relu -> max pool -> conv: a contraction fed through a max reduction
    by another contraction, as attention's PV is by QK^T. ResNet's stem was taken
    for an attention core (its conv, relu and pooling reported as "attention
    score matrices" in the model suite); a softmax also needs its exp and sum."""
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 8, 3, padding=1),
    ).eval()
    torch.manual_seed(0)
    kernel, _ = per_statement(polyc.from_torch(module, (torch.randn(1, 3, 8, 8),)))
    assert attention.cores(kernel, whole=True) == []
    assert attention.variants(kernel) == []
