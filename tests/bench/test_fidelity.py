"""The fidelity suite's own parts, without running a peer or touching the network:
HW-A's one description against hw-a.toml, the layers' rooflines, SCALE-Sim's
closed form against its recorded runs, the peers' input writers and the tables
of docs/fidelity.md (``tests/test_results_md.py`` checks that the committed JSON
renders what the doc shows)."""

from __future__ import annotations

import configparser
import json
from pathlib import Path

import pytest

from accelerator import load_config
from bench.peers import env, report, scalesim, stream, zigzag
from bench.peers.hwa import CONFIG, HWA, LAYERS, layer


def test_hw_a_config_says_what_the_description_says():
    spec = load_config(CONFIG)
    a = spec.mac_array
    assert (a.rows, a.cols) == (HWA.rows, HWA.cols)
    assert a.peak_macs_per_cycle("int8") == HWA.macs_per_cycle == 1024
    assert spec.clock_ghz == HWA.clock_ghz
    # one SRAM per operand role: A (input), B (weight), C (partial sums)
    levels = (a.input_levels, a.weight_levels, a.accumulator_levels)
    assert levels == (("sram_in",), ("sram_w",), ("sram_out",))
    assert a.requantize  # int8 outputs, requantized in the array's output path
    dram, *srams = spec.memory
    assert dram.bytes_per_cycle == HWA.dram_bytes_per_cycle
    assert dram.latency_cycles == HWA.latency_cycles
    # three separate on-chip buffers of 256 KiB: inputs, weights, outputs
    assert [m.capacity_bytes for m in srams] == [HWA.sram_bytes] * 3
    assert {m.latency_cycles for m in srams} == {HWA.latency_cycles}
    assert dram.read_pj_per_byte == HWA.dram_pj / HWA.dram_bytes_per_cycle


def test_roofline_of_the_issue_layers():
    """The issue's numbers: max(MACs / 1024, (in + w + out bytes) / 32)."""
    assert layer("gemm_256").roofline() == 16_384
    assert layer("gemm_1024").roofline() == 1_048_576
    conv = layer("conv3x3_56")
    assert conv.roofline() == 112_896
    assert conv.gemm() == (3136, 64, 576)
    assert conv.operand_bytes() == {
        "input": 200_704,
        "weight": 36_864,
        "output": 200_704,
    }
    assert len(LAYERS) >= 6
    # the first layer is output-bound: (37,632 + 864 + 401,408) / 32
    assert layer("conv3x3_c3").roofline() == 13_747


@pytest.mark.parametrize(
    ("dataflow", "m", "n", "k", "cycles"),
    [  # SCALE-Sim 3.0.0 runs on a 32 x 32 array (docs/fidelity.md)
        ("ws", 256, 256, 256, 22_399),
        ("os", 256, 256, 256, 20_351),
        ("is", 256, 256, 256, 22_399),
        ("ws", 3136, 64, 576, 116_279),
        ("ws", 100, 40, 50, 775),
        ("os", 100, 40, 50, 895),
        ("is", 100, 40, 50, 1_071),
        ("ws", 12544, 32, 27, 12_637),
    ],
)
def test_scalesim_closed_form_matches_its_runs(dataflow, m, n, k, cycles):
    assert scalesim.compute_cycles(dataflow, m, n, k, 32, 32) == cycles


def test_scalesim_inputs(tmp_path):
    conv = layer("conv3x3_56")
    job = scalesim.write_inputs(conv, tmp_path, "ws", scalesim.SPLIT)
    cfg = configparser.ConfigParser()
    cfg.read(job["config"])
    arch = cfg["architecture_presets"]
    assert (arch["ArrayHeight"], arch["Dataflow"], arch["Bandwidth"]) == (
        "32",
        "ws",
        "10",
    )
    assert cfg["layout"]["IfmapSRAMBankBandwidth"] == "11"
    assert cfg["run_presets"]["InterfaceBandwidth"] == "USER"
    # no padding field: the padded 58 x 58 input, and the trailing comma
    row = Path(job["topology"]).read_text().splitlines()[1]
    assert row == "conv3x3_56, 58, 58, 3, 3, 64, 64, 1,"
    assert not job["gemm"]
    calc = scalesim.config("os")
    assert "InterfaceBandwidth: CALC" in calc and "Dataflow: os" in calc


def test_zigzag_inputs(tmp_path):
    job = zigzag.write_inputs(layer("conv3x3_c3"), tmp_path)
    (work,) = json.loads(Path(job["workload"]).read_text())
    assert work["loop_sizes"] == [1, 32, 3, 112, 112, 3, 3]
    assert work["pr_loop_sizes"] == [114, 114] and work["padding"] == [[1, 1], [1, 1]]
    assert work["operand_precision"] == {"W": 8, "I": 8, "O": 32, "O_final": 8}
    (mapping,) = json.loads(Path(job["mapping"]).read_text())
    # 3 channels x 3 x 3 taps on the 32 rows, as SCALE-Sim's im2col
    assert mapping["spatial_mapping"] == {
        "D1": ["C, 3", "FY, 3", "FX, 3"],
        "D2": ["K, 32"],
    }
    acc = json.loads(Path(job["accelerator"]).read_text())
    (port,) = acc["memories"]["dram"]["ports"]
    assert port["type"] == "read_write" and port["bandwidth_max"] == 256
    assert acc["memories"]["sram_W"]["size"] == 8 * 256 * 1024
    gemm = zigzag.mapping(layer("gemm_decode"))[0]["spatial_mapping"]
    assert gemm == {"D1": ["C, 32"], "D2": ["K, 32"]}


def test_stream_inputs(tmp_path):
    job = stream.write_inputs(layer("gemm_256"), tmp_path)
    text = Path(job["accelerator"]).read_text()
    assert "0: " in text and '"0"' not in text  # core ids as YAML ints
    assert '"type": "bus"' in text and '"bandwidth": 256' in text
    core = json.loads((tmp_path / "cores" / "hw_a_core.yaml").read_text())
    assert core["type"] == "zigzag.compute" and "dram" not in core["memories"]
    assert job["shape"]["m"] == 256


def test_peer_pins_and_missing_python():
    assert env.STREAM.python >= (3, 12)  # stream-dse 2.x
    assert "stream-dse==2.1.1" in env.STREAM.pins  # never the 0.0.8 of Python 3.11
    assert "numpy==2.3.5" in env.SCALESIM.pins
    assert all("==" in p for peer in env.PEERS.values() for p in peer.pins)
    with pytest.raises(env.PeerError, match=r"no Python >= 9\.99 because"):
        env.find_python((9, 99))


def _data(polyc: int, zz: int) -> dict:
    lay = layer("gemm_256")
    return {
        "layers": [{"name": lay.name, "what": lay.what, "roofline": lay.roofline()}],
        "results": {
            "polyc": {
                lay.name: {"cycles": polyc, "predicted_cycles": polyc, "wall_s": 20.0}
            },
            "zigzag": {lay.name: {"cycles": zz, "wall_s": 4.0, "process_s": 9.0}},
            "scalesim": {lay.name: {"compute_cycles": 22_399, "source": "formula"}},
        },
    }


def test_table_marks_differences_above_ten_percent():
    close = report.render_table(_data(20_000, 21_000))
    assert "21,000 (+5.0%) |" in close and "†" not in close
    far = report.render_table(_data(20_000, 23_000))
    assert "23,000 (+15.0%) †" in far
    assert "22,399 (formula)" in far  # SCALE-Sim compute only, not an estimate
    ((name, peer, d),) = report.differences(_data(20_000, 23_000))
    assert (name, peer, d) == ("gemm_256", "zigzag", pytest.approx(0.15))
    assert "| gemm_256 | 20.0 | 4.0 (9.0) | - | formula |" in report.render_runtime(
        _data(20_000, 23_000)
    )
