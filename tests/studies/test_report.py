"""The inspection page and its parts (polyc.studies.report), without a browser:
what it holds, that it adds up with the run's report, and its command line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import polyc
import schedules
from polyc.cli import main
from polyc.errors import ArgumentError
from polyc.ir.treeview import tree_nodes
from polyc.studies.report import memory, timeline
from polyc.studies.report.diff import diff_schedules, side_by_side
from polyc.studies.report.html import report_html

CONV = "conv2d:input=1x8x16x16,weight=16x8x3x3,padding=1"

MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.relu(self.conv(x)), 1))
"""

KERNELS = """
import polyc

gemm = polyc.ops.matmul(32, 32, 32)
"""


@pytest.fixture(scope="module")
def conv_run():
    kernel = polyc.ops.conv2d((1, 8, 16, 16), (16, 8, 3, 3), padding=1)
    compiled = polyc.compile(kernel, config="tiny")
    rng = np.random.default_rng(0)
    data = {a.name: rng.random(a.concrete_shape({}), np.float32) for a in kernel.inputs}
    _, report = compiled.run(data)
    return compiled, report


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.py"
    path.write_text(MODEL)
    return path


def test_the_page_is_self_contained_and_holds_every_section(conv_run):
    compiled, report = conv_run
    page = report_html(compiled, report)
    for section in ("summary", "tree", "memory", "dma", "timeline", "layers"):
        assert f"<section id='{section}'>" in page
    assert "<section id='roofline'>" in page
    # nothing fetched: the only URL is SVG's namespace
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}, urls
    assert "<link" not in page and " src=" not in page
    # one clickable element per node of the compact view
    assert page.count("class='node ") == len(tree_nodes(compiled.kernel.schedule))
    # every engine has a lane
    assert page.count('<g class="lane"') == len(report.engines)


def test_dma_table_adds_up_to_the_runs_dram_bytes(conv_run):
    compiled, report = conv_run
    rows = {t.array: t for t in memory.dma_table(compiled, report)}
    assert set(rows) == set(compiled.kernel.arrays)
    assert sum(t.dram for t in rows.values()) == report.dram_bytes
    assert sum(t.transfers for t in rows.values()) == sum(
        1 for e in report.events if e.kind == "dma"
    )
    # weights are read once; the input's halos are read again per tile
    assert rows["weight"].reuse == 1.0 and rows["out"].dram_written == 16 * 16 * 16 * 4
    assert rows["input"].reuse > 1.0
    assert rows["input"].minimum == 8 * 16 * 16 * 4


def test_memory_map_peak_is_the_simulators(conv_run):
    compiled, report = conv_run
    (level,) = memory.memory_map(compiled, report)
    assert level.name == "l1" and level.capacity == 16 * 1024
    assert all(b.offset + b.bytes <= level.capacity for b in level.blocks)
    assert {b.array for b in level.blocks} >= {"input", "weight", "bias", "out"}
    # one layer: every block is live the whole run, and the scheduled blocks
    # are what the simulator saw live at its peak
    assert level.peak_bytes == level.simulated_peak == report.level("l1").peak_bytes


def test_timeline_decimation_keeps_every_operation(conv_run):
    _, report = conv_run
    names = [e.label for e in report.events]
    ops = [e for e in report.events if e.kind != "wait"]
    full = timeline.lanes(report, names, max_spans=100_000)
    few = timeline.lanes(report, names, max_spans=8)
    for per in (full, few):
        assert sum(s.count for spans in per.values() for s in spans) == len(ops)
        assert sum(s.busy for spans in per.values() for s in spans) == sum(
            e.end - e.start for e in ops
        )
    for engine, spans in few.items():
        assert len(spans) <= 8 * len({s.name for s in spans}), engine
    assert sum(map(len, few.values())) < sum(map(len, full.values()))


def test_trace_and_timeline_are_named_by_model_layer(model_file, tmp_path):
    from polyc.studies.model_report import model_report
    from polyc.studies.report.targets import load_target

    kernel = load_target(f"{model_file}:Net", ["1x3x8x8"])
    compiled = polyc.compile(kernel, config="edge-npu", trace_limit=1 << 16)
    x = np.random.default_rng(0).random((1, 3, 8, 8), np.float32)
    _, report = compiled.run({kernel.free_inputs[0].name: x})
    rows = {c.name for c in model_report(compiled, report).layers}
    names = timeline.event_names(compiled, report)
    assert set(names) <= rows and len(set(names)) > 1, (set(names), rows)
    assert any("conv" in n for n in names) and any("fc" in n for n in names)
    data = json.loads(compiled.write_trace(tmp_path / "t.json").read_text())
    ops = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in ops} == set(names)
    # the statement (or copy) each event came from is kept as an argument
    labels = {e["args"]["label"] for e in ops}
    assert labels == {e.label for e in report.events}
    png = timeline.save_timeline(compiled, report, tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = timeline.save_timeline(compiled, report, tmp_path / "t.svg").read_text()
    assert "<svg" in svg and "conv" in svg
    page = report_html(compiled, report)
    assert "layer-table" in page and "conv" in page
    with pytest.raises(ArgumentError, match=r"Name the file \.png or \.svg"):
        timeline.save_timeline(compiled, report, tmp_path / "t.pdf")


def test_a_page_needs_a_run():
    compiled = polyc.compile(polyc.ops.relu((4, 4)), config="tiny")
    with pytest.raises(ArgumentError, match=r"compiled\.run\(\) was not called"):
        compiled.report_html()
    with pytest.raises(ArgumentError, match=r"compiled\.run\(\) was not called"):
        compiled.write_trace("t.json")


def test_report_command_writes_page_image_and_trace(tmp_path, capsys):
    out, png, trace = tmp_path / "c.html", tmp_path / "c.png", tmp_path / "c.json"
    argv = ["report", CONV, "--config", "tiny", "-o", str(out)]
    assert main([*argv, "--timeline", str(png), "--trace", str(trace)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {out}" in said and f"wrote {png}" in said
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert png.is_file() and json.loads(trace.read_text())["traceEvents"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-o", "/no/such/dir/x.html"], "the directory /no/such/dir does not exist"),
        (["-o", "{tmp}/x.html", "--timeline", "{tmp}/t.pdf"], "Name the file .png"),
    ],
)
def test_report_command_refuses_bad_outputs(tmp_path, capsys, extra, message):
    extra = [e.format(tmp=tmp_path) for e in extra]
    assert main(["report", "relu:input=4x4", "--config", "tiny", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_targets_from_files(tmp_path, model_file, capsys):
    kernels = tmp_path / "kernels.py"
    kernels.write_text(KERNELS)
    out = tmp_path / "k.html"
    assert main(["report", str(kernels), "--config", "tiny", "-o", str(out)]) == 0
    assert "matmul" in out.read_text()
    assert main(["explain", f"{kernels}:gemm", "--config", "tiny", "--no-run"]) == 0
    assert "tensorize S1" in capsys.readouterr().out
    # a model: its class and the shapes of its inputs
    argv = ["explain", f"{model_file}:Net", "--config", "edge-npu", "--no-run"]
    assert main([*argv, "--input-shape", "1x3x8x8"]) == 0
    assert "domain " in capsys.readouterr().out
    for bad, message in [
        ([f"{model_file}:Net"], "Pass --input-shape 1x3x64x64"),
        ([f"{model_file}:Net", "--input-shape", "1xAx8"], "is not a shape"),
        ([f"{model_file}:Nett"], "defines no 'Nett' because it has only Net"),
        ([str(tmp_path / "none.py")], "does not exist"),
        ([str(model_file)], "does not name one Kernel because it defines none"),
    ]:
        assert main(["explain", *bad, "--config", "tiny", "--no-run"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_exported_program_target(tmp_path, capsys):
    import torch

    from polyc.studies.report.targets import load_target

    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).eval()
    ep = torch.export.export(model, (torch.randn(2, 16),))
    path = tmp_path / "mlp.pt2"
    torch.export.save(ep, str(path))
    kernel = load_target(str(path))
    assert kernel.name == "mlp" and kernel.free_inputs[0].concrete_shape({}) == (2, 16)
    (tmp_path / "bad.pt2").write_text("not a program")
    assert main(["explain", str(tmp_path / "bad.pt2"), "--no-run"]) == 2
    assert "is not an exported program" in capsys.readouterr().err


def test_diff_marks_what_changed():
    d = diff_schedules("matmul:M=32,N=32,K=32", "none", "default", config="tiny")
    figures = {name: (a, b, differs) for name, a, b, differs in d.figures()}
    assert figures["simulated cycles"][0] == d.left.report.cycles
    assert figures["simulated cycles"][2] and figures["DRAM bytes"][2]
    assert figures["predicted cycles"][0] is None
    text = d.text()
    assert "none (left) vs default (right)" in text
    assert re.search(r"^\* simulated cycles +[\d,]+ +[\d,]+ +[\d.]+x$", text, re.M)
    tree = text.split("== schedule tree ==\n", 1)[1].split("\n\n", 1)[0]
    first = tree.splitlines()[0]  # the same domain: unmarked
    assert first.split("   ")[0].strip() == first.split("   ")[-1].strip()
    assert " > " in tree and "tensorize S1" in tree
    same = diff_schedules("matmul:M=32,N=32,K=32", "none", "none", config="tiny")
    assert not any(differs for *_, differs in same.figures())
    assert all(" | " not in line for line in same.text().splitlines()[10:])


def test_side_by_side_markers():
    rows = side_by_side(["a", "b", "c"], ["a", "B", "c", "d"], width=4)
    assert rows == ["a      a", "b    | B", "c      c", "     > d"]


def test_diff_command_with_schedule_files(tmp_path, capsys):
    k = polyc.ops.matmul(32, 32, 32)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(schedules.to_yaml(k))
    b.write_text(schedules.to_yaml(schedules.tile(k, "S1", [8, 8, 8])))
    argv = ["diff", str(a), str(b), "--kernel", "matmul:M=32,N=32,K=32"]
    assert main([*argv, "--config", "tiny"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"S1: band S1\(i, j, k\) +\| .*band S1_t", text), text
    assert main([*argv[:2], str(tmp_path / "c.yaml"), *argv[3:]]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
