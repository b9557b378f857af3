"""The model suite through its entry point (``python -m bench.models``) on its
smallest model and the tiny config, a model that fails on the way, and the
tables it renders. The committed ``models.json`` against docs/results.md is
checked by ``tests/test_results_md.py``."""

from __future__ import annotations

import json

import pytest

from bench import models, zoo

SECONDS = {"frontend", "schedule", "codegen", "build", "run"}


def _i0(torch, _):
    class SpecialI0(torch.nn.Module):
        def forward(self, x):
            return torch.special.i0(x * 2)

    return SpecialI0(), (torch.randn(4, 3),)


def test_the_smallest_model_runs_end_to_end_and_a_failure_is_recorded(
    tmp_path, monkeypatch, capsys
):
    broken = zoo.Model("i0", "mlp", "polyc", _i0)
    monkeypatch.setattr(zoo, "MODELS", (*zoo.MODELS, broken))
    out = tmp_path / "models.json"
    argv = ["--models", "i0,mlp", "--configs", "tiny", "--dtypes", "float32"]
    assert models.main([*argv, "--out", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["models"] == ["i0", "mlp"]
    failed, ok = payload["runs"]
    # the unsupported op is named, and the suite went on to the next model
    assert failed["status"] == "error" and failed["stage"] == "frontend"
    assert "aten.i0.default is not supported" in failed["error"]
    assert ok["status"] == "ok" and ok["mode"] == "placed"
    assert set(ok["seconds"]) == SECONDS
    assert ok["compile_s"] == pytest.approx(
        sum(ok["seconds"][k] for k in ("frontend", "schedule", "codegen", "build"))
    )
    # the cost model's prediction beside the simulated cycles, and in the summary
    assert ok["predicted"] > 0
    assert ok["predicted_ratio"] == pytest.approx(ok["predicted"] / ok["cycles"])
    assert f"{ok['predicted_ratio']:.2f} (mlp) |" in models.summary(payload)
    # the run is at or above both of its bounds, and its layers add up to it
    assert ok["cycles"] >= ok["roofline"] > 0
    assert ok["dram_bytes"] >= ok["min_dram_bytes"] > 0
    assert {"mac_array", "vector"} <= set(ok["engines"])
    layers = ok["layers"]
    # fc1 with its ReLU; fc2, its GELU and fc3 fused along fc2's output columns
    # (an MLP core, schedules/accel/mlp.py), fc3's init moved before them
    assert [lay["name"] for lay in layers] == ["fc1 + relu", "fc2 + gelu + fc3"]
    assert sum(lay["cycles"] for lay in layers) == ok["cycles"]
    assert sum(lay["dram_bytes"] for lay in layers) == ok["dram_bytes"]
    for lay in layers:
        assert lay["cycles"] >= lay["roofline"] > 0
        assert lay["dram_bytes"] >= lay["min_dram_bytes"] > 0
        assert 0 < lay["engines"]["mac_array"] <= 1
    # the tables show both rows: the failure with its reason
    shown = capsys.readouterr().out
    assert "| i0 | float32 | tiny | frontend failed: FrontendError: " in shown
    assert "| mlp | float32 | tiny | " in shown
    assert "| tiny | float32 | 1 of 2 | " in models.summary(payload)


def test_an_unknown_model_is_named_with_the_ones_there_are(capsys):
    assert models.main(["--models", "resnet9000", "--out", "/dev/null"]) == 2
    out = capsys.readouterr().out
    assert "no model 'resnet9000'; the suite has mlp, inverted-residual, " in out


def test_quick_is_a_subset_of_the_suite():
    quick = [m.name for m in zoo.MODELS if m.quick]
    assert quick and len(quick) < len(zoo.MODELS)
    assert len(set(zoo.names())) == len(zoo.MODELS)


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_every_model_of_the_suite_imports(name):
    """Each model goes through the frontend in float32 and float16 (the
    ``transformers`` ones need the ``bench`` extra)."""
    import polyc

    m = zoo.model(name)
    if m.source == "transformers":
        pytest.importorskip("transformers")
    for dtype in ("float32", "float16"):
        module, inputs = m.build(dtype)
        kernel = polyc.from_torch(module, inputs)
        assert kernel.statements


def _run(model: str, dtype: str, config: str, cycles: int) -> dict:
    return {"model": model, "dtype": dtype, "config": config, "cycles": cycles}


def test_a_suite_run_in_parts_is_one_json():
    before = {
        "models": ["mlp", "hf-bert"],
        "configs": ["edge-npu"],
        "dtypes": ["float32"],
        "runs": [
            _run("mlp", "float32", "edge-npu", 1),
            _run("hf-bert", "float32", "edge-npu", 2),
        ],
    }
    part = {
        "models": ["mlp"],
        "configs": ["edge-npu", "tiny"],
        "dtypes": ["float32"],
        "runs": [
            _run("mlp", "float32", "edge-npu", 3),
            _run("mlp", "float32", "tiny", 4),
        ],
    }
    both = models.merged(before, part)
    assert both["models"] == ["mlp", "hf-bert"]
    assert both["configs"] == ["edge-npu", "tiny"]
    assert [r["cycles"] for r in both["runs"]] == [2, 3, 4]
    assert models.merged(None, part) is part
