"""The area and power model: each component's area as the arithmetic of the config's
[area] coefficients, leakage per area, power and EDP of a run."""

from __future__ import annotations

import pytest

import accelerator
from accelerator.hardware.config import CONFIG_DIR, from_dict, load_config
from accelerator.hardware.grid import to_dict
from polyc.errors import ConfigError


def test_tiny_area_is_the_arithmetic_of_its_coefficients():
    a = accelerator.area(load_config("tiny"))
    # 4x4 PEs, each 7.5 x (int8 419 + fp16 3,000 + fp32 11,884 um2), all at 1 MAC/cycle
    pe = 7.5 * (419 + 3000 + 11884)
    expected = {
        "mac_array": 16 * pe,
        "vector": 4 * 11884 * 7.5,  # 4 lanes
        "scalar": 100_000,
        "sram.l1": 16 * 10090 + 4 * 10_000,  # 16 KiB, 4 banks, one port
        "dma": 2 * 50_000,  # 2 channels
        "dram_phy": 8 * 1.0 * 292_000,  # 8 B/cycle at 1 GHz = 8 GB/s
    }
    assert a.components == pytest.approx({k: v / 1e6 for k, v in expected.items()})
    assert a.total_mm2 == pytest.approx(sum(expected.values()) / 1e6)
    assert a.total_mm2 == pytest.approx(4.93032)
    assert a.leakage_w == pytest.approx(4.93032 * 0.085)  # 85 mW per mm2


def test_rates_ports_and_banks_change_area():
    edge = load_config("edge-npu")
    a = accelerator.area(edge).components
    # int8 and fp16 at full rate, fp32 at a quarter: a quarter of an fp32 unit a PE
    # (bf16 runs on the fp16 units: no area of its own)
    assert a["mac_array"] == pytest.approx(256 * 7.5 * (419 + 3000 + 11884 / 4) / 1e6)
    doc = to_dict(edge)
    doc["area"]["sram_ports"] = {"sram": 2}
    two = accelerator.area(from_dict(doc)).components["sram.sram"]
    cells = 1024 * 10090 / 1e6
    assert two == pytest.approx(cells * 1.6 + 4 * 0.01)
    assert a["sram.sram"] == pytest.approx(cells + 4 * 0.01)


def test_cost_of_a_run():
    spec = load_config("tiny")
    c = accelerator.cost(spec, cycles=1000, dynamic_pj=1e6)  # 1 us, 1 uJ
    leak = 4.93032 * 0.085 * 1e-6
    assert c["latency_s"] == pytest.approx(1e-6)
    assert c["dynamic_energy_j"] == pytest.approx(1e-6)
    assert c["leakage_energy_j"] == pytest.approx(leak)
    assert c["energy_j"] == pytest.approx(1e-6 + leak)
    assert c["power_w"] == pytest.approx((1e-6 + leak) / 1e-6)
    assert c["edp_js"] == pytest.approx((1e-6 + leak) * 1e-6)
    assert c["area_mm2"] == pytest.approx(4.93032)


def test_area_errors():
    doc = to_dict(load_config("tiny"))
    del doc["area"]
    with pytest.raises(ConfigError, match=r"area: tiny has no area model because"):
        accelerator.area(from_dict(doc))
    doc = to_dict(load_config("tiny"))
    del doc["area"]["mac_um2"]["float16"]
    with pytest.raises(ConfigError, match=r"key area.mac_um2.float16 is missing"):
        from_dict(doc)
    doc = to_dict(load_config("tiny"))
    doc["area"]["sram_ports"] = {"l2": 2}
    with pytest.raises(ConfigError, match=r"key area.sram_ports.l2 names no SRAM"):
        from_dict(doc)


def test_every_shipped_config_has_an_area_model():
    for name in accelerator.CONFIGS:
        assert accelerator.area(load_config(name)).total_mm2 > 0
        assert "[area]" in (CONFIG_DIR / f"{name}.toml").read_text()
