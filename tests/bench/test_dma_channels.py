"""bench.dma_channels: a layer's copies and channel cycles from a trace, offline."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelerator.sim.report import TraceEvent
from bench.dma_channels import layer_dma, summary


def _choice():
    def layer(name, stmts, dma):
        return SimpleNamespace(
            layer=SimpleNamespace(
                name=name, stmts=[SimpleNamespace(name=s) for s in stmts]
            ),
            candidate=SimpleNamespace(cycles=100.0, engines=(("dma", dma),)),
        )

    return SimpleNamespace(layers=[layer("S0", ["S0"], 50.0), layer("S1", ["S1"], 9.0)])


def test_each_layer_gets_its_copies_and_its_busiest_channel():
    """A load goes to the compute it feeds, a store to the compute before it:
    S0's loads on dma0 (30 + 20 cycles) beside its store on dma1 (10), S1's
    load on dma0 (10)."""
    ev = [
        TraceEvent("dma0", "dma", 0, 30, 64, "dram", "l1", "A in"),
        TraceEvent("dma0", "dma", 30, 50, 64, "dram", "l1", "W in"),
        TraceEvent("vector", "vector", 50, 80, 8, "", "", "S0"),
        TraceEvent("dma1", "dma", 80, 90, 64, "l1", "dram", "B out"),
        TraceEvent("dma0", "dma", 80, 90, 64, "dram", "l1", "B in"),
        TraceEvent("vector", "vector", 90, 100, 8, "", "", "S1"),
    ]
    report = SimpleNamespace(events=ev, cycles=100)
    rows = layer_dma(_choice(), report)
    assert [r["channels"] for r in rows] == [{"dma0": 50, "dma1": 10}, {"dma0": 10}]
    assert [(r["loads"], r["stores"], r["busiest"]) for r in rows] == [
        (50, 10, 50),
        (10, 0, 10),
    ]
    # 50 against 50 is close, 9 against 10 is 10% off: both within 15%
    s = summary(rows)
    assert (s["layers"], s["close"]) == (2, 2)
    assert s["mean_error"] == pytest.approx(0.05)
