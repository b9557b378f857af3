"""Plots of a sweep (PNG and SVG written and well-formed), ``polyc sweep`` end to end
in a subprocess and in-process, and ``polyc explain``."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import islpy as isl
import pytest

import polyc
from polyc.cli import main
from polyc.studies.sweep.result import SweepResult

PNG = b"\x89PNG\r\n\x1a\n"
PLOTS = ("roofline", "cycles", "utilization", "energy")


def _check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 5_000, path


def _svg_text(path) -> str:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", path
    return "".join(root.itertext())


@pytest.fixture(scope="module")
def small():
    points = polyc.sweep.grid(
        {"mm": "matmul:M=8,N=8,K=8", "relu": "relu:input=8x8"},
        ["none"],
        ["tiny", "edge-npu"],
    )
    return polyc.sweep(points, jobs=1, progress=False)


def test_plots_are_written_in_both_formats(small, tmp_path):
    paths = small.plot(tmp_path)
    # two configs with an area model: the Pareto plot of (latency, energy, area) too
    assert small.has_front()
    assert sorted(p.name for p in paths) == sorted(
        f"{name}.{fmt}" for name in (*PLOTS, "pareto") for fmt in ("png", "svg")
    )
    for name in PLOTS:
        _check_png(tmp_path / f"{name}.png")
    roof = _svg_text(tmp_path / "roofline.svg")
    assert "tiny roof: 16 MACs/cycle, 8 B/cycle" in roof
    assert "(2 points without MACs not shown)" in roof  # relu has no MACs
    cycles = _svg_text(tmp_path / "cycles.svg")
    assert "roofline bound" in cycles and "edge-npu" in cycles
    assert "engine bound" in cycles
    energy = _svg_text(tmp_path / "energy.svg")
    assert "mm [none] on tiny" in energy and "dram" in energy
    # written SVGs carry no date: the same sweep gives the same file
    again = small.plot_cycles(tmp_path / "again.svg")
    assert again.read_text() == (tmp_path / "cycles.svg").read_text()


def test_plots_of_a_sweep_with_nothing_to_show(tmp_path):
    result = SweepResult(
        [
            {
                "index": 0,
                "label": "x",
                "op": "x",
                "schedule": "none",
                "config": "tiny",
                "status": "failed",
                "error_type": "ShapeError",
                "error": "bad",
            }
        ]
    )
    for name in PLOTS:
        path = getattr(result, f"plot_{name}")(tmp_path / f"{name}.svg")
        assert "no points with" in _svg_text(path)


def test_plot_format_errors(small, tmp_path):
    with pytest.raises(polyc.ArgumentError, match="suffix names no supported format"):
        small.plot_cycles(tmp_path / "cycles.pdf")
    with pytest.raises(polyc.ArgumentError, match="format 'jpg' is not supported"):
        small.plot(tmp_path, formats=["jpg"])


def test_sweep_command_end_to_end(tmp_path):
    out = tmp_path / "study"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "polyc.cli",
            "sweep",
            "--ops",
            "mm=matmul:M=8,N=8,K=8",
            "relu:input=8x8",
            "--configs",
            "tiny",
            "edge-npu",
            "--schedule",
            "none",
            "--jobs",
            "2",
            "--formats",
            "png",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("polyc sweep: 4 points, 4 ok")
    assert "polyc sweep: 4 points on a local pool of 2 processes" in proc.stderr
    records = json.loads((out / "sweep.json").read_text())["records"]
    assert [(r["label"], r["config"]) for r in records] == [
        ("mm", "tiny"),
        ("mm", "edge-npu"),
        ("relu:input=8x8", "tiny"),
        ("relu:input=8x8", "edge-npu"),
    ]
    assert (out / "sweep.csv").read_text().count("\n") == 5
    for name in PLOTS:
        _check_png(out / f"{name}.png")
    assert not (out / "roofline.svg").exists()

    # the saved sweep tabulates and plots again without running
    replot = tmp_path / "replot"
    argv = ["sweep", "--from", str(out / "sweep.json"), "--out", str(replot)]
    assert main([*argv, "--formats", "svg"]) == 0
    assert _svg_text(replot / "roofline.svg")
    assert json.loads((replot / "sweep.json").read_text())["records"] == records


def test_sweep_command_exit_codes(capsys):
    argv = ["sweep", "--configs", "tiny", "--schedule", "none", "--jobs", "1"]
    code = main(
        [*argv, "--no-progress", "--ops", "bad=conv2d:input=1x4x6x6,weight=8x3x3x3"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "#0 bad / none / tiny: ShapeError" in out
    assert main([*argv, "--ops", "matmull:M=2"]) == 2
    assert "polyc: op spec: unknown op 'matmull'" in capsys.readouterr().err
    assert main(["sweep"]) == 2
    assert "give --ops (or --from a sweep.json)" in capsys.readouterr().err


def test_explain_shows_kernel_tree_dependences_and_report(tmp_path, capsys):
    trace = tmp_path / "mm.json"
    op = "matmul:M=8,N=8,K=8"
    argv = ["explain", op, "--config", "tiny", "--schedule", "none", "--relations"]
    assert main([*argv, "--trace", str(trace)]) == 0
    text = capsys.readouterr().out
    heads = [
        "== kernel ==",
        "== schedule tree (isl YAML) ==",
        "== dependences ==",
        "== compiled ==",
        "== report ==",
        "trace: wrote",
    ]
    where = [text.index(h) for h in heads]
    assert where == sorted(where)
    assert text.startswith(f"polyc explain: {op} on tiny, schedule none")
    assert "S1 -> S1  distance (0, 0, 1) over (i, j, k)" in text
    assert "live-in: A, B" in text
    # the YAML section is isl's own form: it reads back as the kernel's schedule
    yaml = text[where[1] : where[2]].split("\n", 1)[1].strip()
    kernel = polyc.ops.matmul(8, 8, 8)
    back = isl.Schedule.read_from_str(kernel.schedule.get_ctx(), yaml)
    assert back.get_map().is_equal(kernel.schedule.get_map())
    # the report's engines and the trace agree
    data = json.loads(trace.read_text())
    threads = {
        e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"
    }
    assert {"scalar", "mac_array", "vector"} <= threads
    assert f"{data['otherData']['cycles']:,}" in text[where[4] :]


def test_explain_without_run_and_with_relations(capsys):
    argv = ["explain", "relu:input=4x4", "--config", "tiny", "--no-run"]
    assert main([*argv, "--relations"]) == 0
    text = capsys.readouterr().out
    assert "== report ==" not in text and "== compiled ==" in text
    assert "none: every statement instance is independent" in text
    assert "dependences of relu:" in text
    assert main(["explain", "relu:input=4x4", "--config", "tinyy"]) == 2
    assert (
        "polyc: load_config: no hardware description 'tinyy'" in capsys.readouterr().err
    )


def test_example_study_runs(tmp_path, capsys):
    from examples.study import main as study

    argv = ["--quick", "--jobs", "1", "--configs", "tiny", "--schedules", "none"]
    assert study([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "polyc sweep: 7 points, 7 ok" in out
    assert f"wrote {tmp_path}/sweep.json, sweep.csv and 8 plots" in out
    _check_png(tmp_path / "roofline.png")
