"""bench.int8: float16 and int8 side by side (no model runs here: the table from
a payload, the config variants, the models built in int8)."""

from __future__ import annotations

import pytest

from bench import int8, zoo


def _run(model, dtype, config, cycles, **more):
    row = {
        "model": model,
        "dtype": dtype,
        "config": config,
        "status": "ok",
        "cycles": cycles,
        "engine_ratio": 1.5,
        "dram_bytes": 1000,
        "mac_utilization": 0.5,
        "energy_pj": 2e6,
    }
    return {**row, **more}


def test_the_table_puts_float16_beside_int8():
    payload = {
        "runs": [
            _run("res-blocks", "float16", "edge-npu", 300),
            _run("res-blocks", "int8", "edge-npu", 200, int8_steps=1.0000024),
            _run("linear-stack", "float16", "edge-npu", 100),
            {**_run("linear-stack", "int8", "edge-npu", 0), "status": "error"},
        ]
    }
    lines = int8.table(payload).splitlines()
    assert lines[2] == (
        "| res-blocks | edge-npu | 300 / 200 | 1.50x | 1.50 / 1.50 | 1,000 / 1,000 "
        "| 50% / 50% | 2.0 / 2.0 | 1 |"
    )
    assert lines[3].startswith("| linear-stack | edge-npu | 100 / - | - |")


def test_a_config_variant_requantizes_in_the_mac_array():
    assert int8.spec("edge-npu+requantize").mac_array.requantize
    assert not int8.spec("edge-npu").mac_array.requantize
    with pytest.raises(ValueError, match="unknown config variant 'fast'"):
        int8.spec("edge-npu+fast")


def test_only_the_quantizable_models_are_built_in_int8():
    assert int8.int8_models() == ["linear-stack", "res-blocks"]
    with pytest.raises(ValueError, match="mlp is not built in 'int8'"):
        zoo.model("mlp").build("int8")
