"""bench.engine_bound: the roofline suite's recorded cycles against the engine bound
(no simulation), on the committed records."""

from __future__ import annotations

import json

from bench import engine_bound
from bench.common import RESULTS


def _records(layers: set[str]) -> list[dict]:
    data = json.loads((RESULTS / "roofline.json").read_text())
    records = data["records"] if isinstance(data, dict) else data
    return [r for r in records if r["layer"] in layers]


def test_no_recorded_layer_beats_its_engine_bound():
    records = engine_bound.measure(_records({"attn_softmax", "gemm_256"}))
    assert {r["config"] for r in records} == {"tiny", "edge-npu", "datacenter"}
    for r in records:
        assert r["cycles"] >= r["engine_bound_cycles"], (r["layer"], r["config"])
        assert r["engine_ratio"] == r["cycles"] / r["engine_bound_cycles"]
    softmax = [r for r in records if r["layer"] == "attn_softmax"]
    # the MAC array can do none of a softmax: its bound is the vector unit's
    assert all(r["engine_bound"] == "vector+scalar" for r in softmax)
    assert all(r["engine_ratio"] < r["ratio"] / 4 for r in softmax)
    text = engine_bound.table(records)
    assert "edge-npu: geomean cycles / roofline" in text


def test_the_script_exits_0_on_the_committed_records(tmp_path, capsys):
    path = tmp_path / "roofline.json"
    path.write_text(json.dumps(_records({"gemv_4096"})))
    assert engine_bound.main(["--results", str(path)]) == 0
    assert "gemv_4096" in capsys.readouterr().out


def test_a_record_below_its_engine_bound_fails_the_script(tmp_path, capsys):
    (record,) = _records({"gemv_4096"})[:1]
    path = tmp_path / "roofline.json"
    path.write_text(json.dumps([dict(record, cycles=1)]))
    assert engine_bound.main(["--results", str(path)]) == 1
    assert "below its engine bound: gemv_4096" in capsys.readouterr().out
