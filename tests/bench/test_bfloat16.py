"""bench.bfloat16: float16 and bfloat16 side by side (no model runs here: the
table from a payload, and the zoo's bfloat16 build)."""

from __future__ import annotations

from bench import bfloat16, zoo
from tests.bench.test_int8 import _run


def test_the_table_puts_float16_beside_bfloat16():
    payload = {
        "runs": [
            _run("hf-bert", "float16", "edge-npu", 200),
            _run(
                "hf-bert",
                "bfloat16",
                "edge-npu",
                300,
                eager_ulps=1.0,
                eager_differ=1200,
            ),
            _run("hf-llama", "float16", "edge-npu", 100),
            {**_run("hf-llama", "bfloat16", "edge-npu", 0), "status": "error"},
        ]
    }
    lines = bfloat16.table(payload).splitlines()
    assert lines[0].startswith("| model | config | cycles float16 / bfloat16 |")
    assert lines[2] == (
        "| hf-bert | edge-npu | 200 / 300 | 0.67x | 1.50 / 1.50 | 1,000 / 1,000 "
        "| 50% / 50% | 2.0 / 2.0 | 1.0, 1,200 |"
    )
    assert lines[3].startswith("| hf-llama | edge-npu | 100 / - | - |")


def test_the_zoo_builds_a_model_in_bfloat16():
    import torch

    module, inputs = zoo.model("mlp").build("bfloat16")
    assert {p.dtype for p in module.parameters()} == {torch.bfloat16}
    assert all(x.dtype == torch.bfloat16 for x in inputs if x.is_floating_point())
