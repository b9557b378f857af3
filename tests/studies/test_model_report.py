"""Imported models on the simulated accelerator: numerics and the per-layer report."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import polyc
from polyc.errors import ArgumentError
from polyc.frontends.torch.models import (
    MLP,
    InvertedResidual,
    ResNet18,
    TransformerBlock,
    randomize_batch_norms,
)
from polyc.studies.model_report import OTHER, model_report
from tests.support.paths import EXAMPLES
from tests.support.torchcheck import assert_close, eager


def simulate(model, inputs, config="edge-npu", placed=False, **options):
    """Import, compile for ``config``, run; compare with eager; return the report.

    DRAM-direct (``schedule=kernel``) unless ``placed``: the per-layer report then
    adds up per-statement costs, one row per model layer."""
    model = model.eval()
    kernel = polyc.from_torch(model, tuple(inputs))
    schedule = None if placed else kernel
    compiled = polyc.compile(kernel, config=config, schedule=schedule, **options)
    arrays = {f"arg{n}": t.numpy() for n, t in enumerate(inputs)}
    outputs, report = compiled.run(arrays)
    for a, ref in zip(kernel.outputs, eager(model, inputs)):
        assert_close(outputs[a.name], ref, f"{kernel.name}.{a.name} on {config}")
    return compiled, report


@pytest.fixture(scope="module")
def mlp_run():
    torch.manual_seed(0)
    return simulate(MLP(64, 128, 10), [torch.randn(8, 64)])


def test_mlp_per_layer_report_adds_up(mlp_run):
    compiled, report = mlp_run
    mr = model_report(compiled, report)
    assert [c.name for c in mr.layers] == ["fc1", "relu", "fc2", "gelu", "fc3"]
    assert sum(c.cycles for c in mr.layers) == report.cycles
    assert sum(c.dram_bytes for c in mr.layers) == report.dram_bytes
    assert sum(c.energy_pj for c in mr.layers) == pytest.approx(report.energy_pj)
    fc2 = mr.layer("fc2")
    assert fc2.macs == 8 * 128 * 128
    # the layer alone: fc1's output and fc2's weights and bias in, its output out
    in_bytes = (8 * 128 + 128 * 128 + 128) * 4
    out_bytes = 8 * 128 * 4
    spec = compiled.spec
    bound = max(
        fc2.macs / spec.mac_array.peak_macs_per_cycle("float32"),
        (in_bytes + out_bytes) / spec.dram.bytes_per_cycle,
    )
    assert fc2.roofline_cycles == max(1, math.ceil(bound))
    assert fc2.utilization == pytest.approx(
        fc2.macs / (fc2.cycles * fc2.peak_macs_per_cycle)
    )


def test_report_text_and_data(mlp_run):
    compiled, report = mlp_run
    mr = model_report(compiled)
    text = str(mr)
    assert text.splitlines()[0] == (
        "polyc model report: MLP on edge-npu, DRAM-direct, 5 layers"
    )
    assert "  fc2 " in text and "  total " in text
    assert mr.summary() in text
    assert (
        f"= {report.cycles / mr.engine_bound_sum:,.2f}x the sum of the 5 layers'"
        in (mr.summary())
    )
    assert f"{report.cycles / mr.roofline_sum:,.2f}x the sum of their roofline" in (
        mr.summary()
    )
    data = mr.to_dict()
    assert data["cycles"] == report.cycles
    assert [d["name"] for d in data["layers"]] == ["fc1", "relu", "fc2", "gelu", "fc3"]
    assert OTHER not in text


@pytest.fixture(scope="module")
def mlp_placed():
    torch.manual_seed(0)
    return simulate(MLP(64, 128, 10), [torch.randn(8, 64)], placed=True)


def test_placed_mlp_report_divides_the_engine_work_among_the_layers(mlp_placed):
    compiled, report = mlp_placed
    mr = model_report(compiled, report)
    assert report.events_dropped == 0 and OTHER not in [c.name for c in mr.layers]
    # every engine operation belongs to a row; the rows add up to the run
    assert sum(c.cycles for c in mr.layers) == report.cycles
    assert sum(c.dram_bytes for c in mr.layers) == report.dram_bytes
    assert sum(c.energy_pj for c in mr.layers) == pytest.approx(report.energy_pj)
    # layers the scheduler fused into one unit are one row, in program order
    rows = [name for c in mr.layers for name in c.name.split(" + ")]
    assert rows == ["fc1", "relu", "fc2", "gelu", "fc3"]
    units = [{s.name for s in lc.layer.stmts} for lc in compiled.choice.layers]
    for c in mr.layers:
        touched = [u for u in units if u & set(c.statements)]
        assert all(u <= set(c.statements) for u in touched), c.name
    for c in mr.layers:
        assert c.cycles > 0 and 0.0 <= c.utilization <= 1.0, c.name
    fc2 = next(c for c in mr.layers if "fc2" in c.name.split(" + "))
    assert fc2.macs >= 8 * 128 * 128 and fc2.dram_bytes >= 128 * 128 * 4
    assert "placed" in str(mr).splitlines()[0] and "note:" not in str(mr)


def test_placed_report_past_the_trace_limit_shows_the_rest_apart():
    torch.manual_seed(0)
    compiled, report = simulate(
        MLP(64, 128, 10), [torch.randn(8, 64)], placed=True, trace_limit=8
    )
    mr = model_report(compiled, report)
    assert report.events_dropped > 0 and mr.layers[-1].name == OTHER
    assert sum(c.cycles for c in mr.layers) == report.cycles
    assert sum(c.dram_bytes for c in mr.layers) == report.dram_bytes
    assert f"dropped {report.events_dropped:,}" in str(mr)


def test_report_needs_a_run():
    kernel = polyc.from_torch(nn.Linear(4, 2).eval(), torch.randn(1, 4))
    compiled = polyc.compile(kernel, config="tiny")
    with pytest.raises(
        ArgumentError, match=r"model_report: there is no run to report on"
    ):
        model_report(compiled)


def test_mobilenetv2_block_on_the_accelerator():
    torch.manual_seed(3)
    model = randomize_batch_norms(InvertedResidual(8, 8))
    compiled, report = simulate(model, [torch.randn(1, 8, 8, 8)], config="tiny")
    names = [c.name for c in model_report(compiled, report).layers]
    assert names == ["block.0", "block.2", "block.3", "block.5", "block.6", "add"]


@pytest.mark.slow
def test_transformer_block_on_the_accelerator():
    torch.manual_seed(5)
    compiled, report = simulate(
        TransformerBlock(256, 8, 1024), [torch.randn(1, 64, 256)]
    )
    layers = {c.name for c in model_report(compiled, report).layers}
    assert {"attn", "norm1", "fc1", "fc2", "norm2"} <= layers


@pytest.mark.slow
def test_resnet18_on_the_accelerator():
    torch.manual_seed(1)
    model = randomize_batch_norms(ResNet18(num_classes=10))
    compiled, report = simulate(model, [torch.randn(1, 3, 64, 64)])
    mr = model_report(compiled, report)
    # 2x2 outputs of a padded 3x3 convolution: each sees the 4 real input pixels
    assert mr.layer("layer4.1.conv2").macs == 512 * 512 * (2 * 2) * 4


@pytest.mark.slow
def test_every_op_on_the_accelerator():
    from tests.frontends.torch.test_ops import all_cases

    module, inputs = all_cases()
    simulate(module, inputs, config="tiny")


def test_examples_run_and_print_the_report(capsys, monkeypatch):

    monkeypatch.syspath_prepend(str(EXAMPLES))
    import resnet18
    import transformer_block

    small = ["--tokens", "8", "--width", "32", "--heads", "2", "--config", "tiny"]
    assert transformer_block.main(small) == 0
    assert resnet18.main(["--size", "16", "--width", "4", "--config", "tiny"]) == 0
    out = capsys.readouterr().out
    assert out.count("polyc model report:") == 2
    assert "within rtol 1e-4, atol 1e-5" in out
    assert "layer4.0.{downsample.0, forward, relu" in out and "summary:" in out


def _tagger(tokens: int):
    """An embedding of 64 rows of 16 and a linear head, on ``tokens`` indices,
    compiled for edge-npu and run: ``(compiled, report)``."""
    torch = pytest.importorskip("torch")

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(64, 16)
            self.head = torch.nn.Linear(16, 8)

        def forward(self, ids):
            return self.head(self.embed(ids))

    torch.manual_seed(0)
    ids = torch.randint(0, 64, (1, tokens))
    kernel = polyc.from_torch(Tagger().eval(), (ids,))
    compiled = polyc.compile(kernel, config="edge-npu")
    _, report = compiled.run(arg0=ids.numpy())
    return compiled, report


def test_a_model_that_gathers_has_a_report():
    """An embedding is a gather: its table is no read of the statement (the
    index array is), so each layer's kernel lacked the table and the report of
    every embedding model (hf-bert, hf-gpt2, hf-llama in bench.models) failed
    with a DefinitionError."""
    compiled, report = _tagger(12)
    rep = model_report(compiled, report)
    assert rep.cycles == report.cycles
    assert any("embed" in row.name for row in rep.layers), [r.name for r in rep.layers]


def test_the_gather_layer_is_charged_its_indirect_dma():
    """The indirect DMA of an embedding is the layer's whole work; the report
    charged it to no layer (its label is its statement's, ``S0: W rows by idx``,
    not a copy's), so the embedding row read 0 cycles and 0 DRAM bytes and the
    next layer got its time (hf-bert on edge-npu: 0 -> 734 cycles and 9,344
    bytes for model.embeddings.word_embeddings)."""
    tokens = 12
    compiled, report = _tagger(tokens)
    (embed,) = [
        row for row in model_report(compiled, report).layers if row.name == "embed"
    ]
    gathered = tokens * 16 * 4 + tokens * 8  # the rows and the int64 indices
    assert embed.dram_bytes >= gathered
    assert embed.cycles > 0
