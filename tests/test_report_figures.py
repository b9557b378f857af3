"""The report's figures hold: useful MACs, utilisation at most 1, no run or row
below its roofline bound, rows that add up to the total, SRAM peak as live bytes.

Each figure is checked on real compiled runs (a padded conv, a depthwise conv, a
small MobileNet-style model through ``model_report``) and in every form a user
reads it: ``print(report)``, ``report.to_dict()``, ``polyc explain``, a sweep's
records and rows, and the per-layer report.
"""

from __future__ import annotations

import re

import pytest

import polyc
from accelerator import load_config
from accelerator.runtime import Simulator
from codegen.sim import build_runtime
from polyc import placemarks as pm
from polyc.inspection import explain
from polyc.sweep_spec import op_spec
from polyc.sweep_task import make_inputs
from schedules import isltree

CONV = "conv2d:input=1x8x12x12,weight=16x8x3x3,padding=1"
DEPTHWISE = "conv2d:input=1x16x10x10,weight=16x1x3x3,padding=1,groups=16"


def taps(size: int, kernel: int = 3, pad: int = 1) -> int:
    """Sum over the output positions of one dimension (stride 1) of the kernel
    taps that land inside the input: the real multiplies, padding excluded."""
    return sum(sum(0 <= o + r - pad < size for r in range(kernel)) for o in range(size))


def run_op(text: str, config: str = "edge-npu"):
    _, spec = op_spec(text)
    kernel = spec.build()
    compiled = polyc.compile(kernel, config=config)
    _, report = compiled.run(make_inputs(kernel, "random", seed=0))
    return compiled, report


def live_maximum(compiled, level: int) -> tuple[int, int]:
    """``(most bytes live at once, bytes of every buffer)`` in ``level``, from the
    compiled schedule's ``@scope`` marks: a scope's buffers live while its subtree
    runs, so what is live at once is a scope and the scopes above it."""
    scopes = []
    for path, node in isltree.walk(compiled.kernel.schedule):
        name = isltree.mark_name(node)
        if name and pm.kind(name) == "scope":
            mark = pm.ScopeMark.parse(name)
            size = sum(a.bytes for a in mark.allocations if a.level_index == level)
            scopes.append((path, size))
    assert scopes, "the run allocated no on-chip buffer"
    live = max(
        sum(size for above, size in scopes if path[: len(above)] == above)
        for path, _ in scopes
    )
    return live, sum(size for _, size in scopes)


def assert_figures_hold(report) -> None:
    """The invariants of one run's report (and of its dict form)."""
    rf = report.roofline
    assert report.cycles >= rf.cycles, "the run beats its own roofline"
    assert report.macs == rf.macs
    assert report.mac_array_macs >= report.macs - report.scalar_instances
    assert report.mac_utilization == pytest.approx(rf.compute_cycles / report.cycles)
    assert 0.0 < report.mac_utilization <= 1.0
    data = report.to_dict()
    assert data["macs"] == report.macs
    assert data["mac_array_macs"] == report.mac_array_macs
    assert data["mac_utilization"] == report.mac_utilization
    for m in report.levels:
        assert data["levels"][m.name]["peak_bytes"] == m.peak_bytes


@pytest.fixture(scope="module")
def conv_run():
    return run_op(CONV)


def test_padded_conv_counts_useful_macs_and_live_bytes(conv_run):
    compiled, report = conv_run
    assert report.mode == "placed"
    real = 16 * 8 * taps(12) ** 2  # 147,968: each output, its taps inside the input
    assert report.macs == real
    # the MAC array runs the rectangular hull of the taps: the multiplies by the
    # zero padding are executed (and cost energy), but are not useful work
    assert report.mac_array_macs >= 16 * 8 * 12 * 12 * 9 > real
    assert_figures_hold(report)
    sram = compiled.spec.level_index("sram")
    live, every = live_maximum(compiled, sram)
    peak = report.level("sram").peak_bytes
    # not the zero block's address at the top of the level (1 MiB on edge-npu)
    assert peak == live <= every < compiled.spec.memory[sram].capacity_bytes


def test_the_same_figures_in_every_form(conv_run):
    _, report = conv_run
    text = str(report)
    assert re.search(
        rf"MACs +{report.macs:,} +useful, {report.mac_utilization:.1%} of peak; "
        rf"the MAC array executed {report.mac_array_macs:,} \(padding included\)",
        text,
    ), text
    peak = report.level("sram").peak_bytes
    assert re.search(rf"\n  sram +[\d,]+ +[\d,]+ +{peak:,}\n", text), text
    assert "peak live B" in text
    # polyc explain runs the same op with the same inputs: the same report
    shown = explain(CONV, "edge-npu")
    assert text.split("\n", 1)[1] in shown
    # a sweep stores report.to_dict() per point and derives its rows from it
    result = polyc.sweep([(CONV, "default", "edge-npu")], jobs=1, progress=False)
    (record,) = result.records
    assert record["status"] == "ok", record["error"]
    rep = record["report"]
    assert rep["macs"] == report.macs
    assert rep["mac_array_macs"] == report.mac_array_macs
    assert rep["mac_utilization"] == pytest.approx(report.mac_utilization)
    assert rep["levels"]["sram"]["peak_bytes"] == peak
    (row,) = result.rows()
    assert row["macs"] == report.macs
    assert row["mac_utilization"] == pytest.approx(report.mac_utilization)
    assert row["mac_utilization"] <= 1.0
    assert row["macs_per_cycle"] <= row["peak_macs_per_cycle"]


def test_depthwise_conv_counts_useful_macs_and_live_bytes():
    compiled, report = run_op(DEPTHWISE)
    assert report.macs == 16 * taps(10) ** 2
    assert_figures_hold(report)
    live, _ = live_maximum(compiled, compiled.spec.level_index("sram"))
    assert report.level("sram").peak_bytes == live


def test_dram_direct_macs_are_the_statement_instances():
    _, spec = op_spec(CONV)
    kernel = spec.build()
    compiled = polyc.compile(kernel, config="edge-npu", schedule=kernel)
    _, report = compiled.run(make_inputs(kernel, "random", seed=0))
    assert report.mode == "DRAM-direct" and report.mac_array_macs == 0
    assert_figures_hold(report)
    assert report.level("sram").peak_bytes == 0


def test_sram_peak_is_the_most_bytes_live_at_once():
    spec = load_config("tiny")
    sim = Simulator(build_runtime(), spec)
    top = spec.memory[1].capacity_bytes - 16
    a = sim.alloc("l1", 0, 256, "a")
    sim.alloc("l1", top, 16, "zero")  # a small block at the top of the level
    sim.free(a)
    sim.alloc("l1", 0, 128, "b")
    c = sim.alloc("l1", 256, 512, "c")
    sim.free(c)
    report = sim.finish()
    assert report.level("l1").peak_bytes == 16 + 128 + 512
