"""int8 requantization on the accelerator: on the vector unit (the default) and
fused into the MAC array's output path (``[mac_array] requantize = true``),
bit-exact with the numpy reference and PyTorch's quantized conv, with int8 (not
int32) outputs in DRAM.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import accelerator
import polyc
from accelerator.hardware.config import CONFIG_DIR
from codegen.accel import placed
from examples import int8_chain as chain_example
from polyc import compute as pc
from polyc.errors import ArgumentError, ConfigError, SimulationError
from polyc.ops import nn, quant
from schedules.accel.tensorize import map_vector


def _fused(name: str):
    spec = accelerator.load_config(name)
    mac = dataclasses.replace(spec.mac_array, requantize=True)
    return dataclasses.replace(spec, mac_array=mac)


def _marks(compiled) -> list[str]:
    from polyc.ir import tree

    return [m for m in tree.marks(compiled.kernel.schedule) if m.startswith("@vector")]


@pytest.fixture(scope="module")
def chain():
    c = chain_example.make()
    return c, chain_example.kernel(c), chain_example.inputs(c)


def test_the_references_agree(chain):
    c, _, _ = chain
    np.testing.assert_array_equal(
        chain_example.reference(c), chain_example.torch_reference(c)
    )


@pytest.fixture(scope="module")
def runs(chain):
    """The chain compiled and run on edge-npu, vector path and fused path."""
    _, k, data = chain
    out = {}
    for fused in (False, True):
        compiled = polyc.compile(k, config=_fused("edge-npu") if fused else "edge-npu")
        out[fused] = (compiled, *compiled.run(**data))
    return out


@pytest.mark.parametrize("fused", [False, True], ids=["vector", "mac_output"])
def test_int8_conv_requantize_relu_chain_on_edge_npu(chain, runs, fused):
    """The issue's check: three int8 convs with per-channel weight scales, each
    requantized with a fused ReLU, int8 between layers, on edge-npu: int8
    outputs bit-exact with the reference (and so with PyTorch)."""
    c, _, _ = chain
    compiled, out, report = runs[fused]
    assert out["y"].dtype == np.int8
    np.testing.assert_array_equal(out["y"], chain_example.reference(c))
    marks = _marks(compiled)
    requants = [m for m in marks if "S2" in m or "S5" in m or "S8" in m]
    assert len(requants) == 3
    assert all(("unit=mac" in m) == fused for m in requants)
    # the int32 accumulators never reach DRAM: it writes the output once, and the
    # int8 intermediates live on chip (schedules.accel.homes; they were written
    # once each before their 3x3 readers copied from homes)
    int8_written = 16 * 12 * 12 + 16 * 10 * 10 + 8 * 8 * 8
    assert report.levels[0].bytes_written == 8 * 8 * 8
    homed = [a for a in compiled.kernel.arrays.values() if a.home]
    assert sum(a.nbytes() for a in homed if a.dtype.name == "int8") == (
        16 * 12 * 12 + 16 * 10 * 10
    )
    if fused:  # the vector unit only copies the biases in (no multiplies)
        assert report.vector_ops.get("mul", 0) == 0
    else:
        assert report.vector_ops["mul"] == int8_written


def test_fused_path_takes_no_vector_time(runs):
    (_, _, vec), (_, _, mac) = runs[False], runs[True]
    busy = {
        r: {e.name: e.busy for e in rep.engines} for r, rep in (("v", vec), ("m", mac))
    }
    # five ops per element (mul, rint, + zero point, max, min) at one cycle per
    # 16-lane group each on edge-npu, for the 4,416 outputs
    assert busy["v"]["vector"] - busy["m"]["vector"] == 5 * 4416 // 16
    # (the MAC array's busy cycles are not compared: the scheduler tiles the two
    # differently, since the vector path's last epilogue follows the array)
    assert mac.cycles < vec.cycles


def test_output_traffic_drops_4x():
    c = chain_example.make()
    written = {}
    for int32_out in (True, False):
        k = chain_example.kernel(c, 1, int32_out)
        data = chain_example.inputs(c, 1, int32_out)
        _, report = polyc.compile(k, config="edge-npu").run(**data)
        written[int32_out] = report.levels[0].bytes_written
    assert written == {True: 4 * 16 * 12 * 12, False: 16 * 12 * 12}


def test_fused_requantize_after_the_last_k_step_of_a_tiled_reduction():
    """tiny's small scratchpad tiles the 64 input channels: the accumulators are
    revisited over several K steps, and the output path must requantize only the
    final sums (a requantization after any earlier step would be wrong)."""
    rng = np.random.default_rng(11)
    x = pc.placeholder("x", (1, 64, 10, 10), "int8")
    w = pc.placeholder("w", (16, 64, 3, 3), "int8")
    m = pc.placeholder("m", (16,), "float32")
    y = nn.requantize(nn.conv2d(x, w), m, zero_point=-9, name="y")
    k = pc.kernel("ktiled", [y])
    data = {
        "x": rng.integers(-128, 128, (1, 64, 10, 10)).astype(np.int8),
        "w": rng.integers(-128, 128, (16, 64, 3, 3)).astype(np.int8),
        "m": rng.uniform(1e-4, 1e-3, 16).astype(np.float32),
    }
    compiled = polyc.compile(k, config=_fused("tiny"))
    text = str(compiled)
    # K split into steps (4 on tiny's weight-stationary 4x4 array: a fold of rows)
    rc = re.search(r"rc\(S1\)=(\d+)", text)
    assert rc and int(rc.group(1)) < 64 and 64 % int(rc.group(1)) == 0, text
    assert "MAC array output path" in text
    out, _ = compiled.run(**data)
    np.testing.assert_array_equal(out["y"], polyc.interpret(k, data)["y"])


def test_a_fused_module_refuses_a_config_without_the_requantizer():
    x = pc.placeholder("acc_in", (1, 8, 6, 6), "int8")
    w = pc.placeholder("w", (8, 8, 3, 3), "int8")
    y = nn.requantize(nn.conv2d(x, w), 0.01, name="y")
    k = pc.kernel("refuse", [y])
    compiled = polyc.compile(k, config=_fused("edge-npu"))
    module = placed.build(compiled.kernel)
    data = {
        "acc_in": np.ones((1, 8, 6, 6), np.int8),
        "w": np.ones((8, 8, 3, 3), np.int8),
    }
    with pytest.raises(SimulationError, match="has no requantizer in its output pa"):
        module.run(accelerator.load_config("edge-npu"), data)


def test_config_requantize_must_be_a_bool(tmp_path):
    text = (CONFIG_DIR / "tiny.toml").read_text()
    text = text.replace("[mac_array]\n", '[mac_array]\nrequantize = "yes"\n', 1)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"mac_array\.requantize is 'yes' because it"):
        accelerator.load_config(path)
    path.write_text(text.replace('"yes"', "true"))
    assert accelerator.load_config(path).mac_array.requantize is True


def test_map_vector_to_the_mac_output_needs_a_requantization():
    a = pc.placeholder("a", (8, 8), "int32")
    k = pc.kernel("plain", [nn.relu(a, name="r")])
    with pytest.raises(ArgumentError, match="is not an int8 requantization"):
        map_vector(k, "S0", unit="mac")
    with pytest.raises(ArgumentError, match="unit='array' is not an engine"):
        map_vector(k, "S0", unit="array")
    k2 = pc.kernel("rq", [quant.requantize(a, 0.5, name="q")])
    assert "unit=mac" in str(map_vector(k2, "S0", unit="mac").schedule)


@pytest.mark.slow  # the checks above, once more through the example's main
def test_example_runs(capsys):
    assert chain_example.main([]) == 0
    out = capsys.readouterr().out
    assert "PyTorch quantized conv2d_relu (qnnpack): True" in out
    assert "output traffic: 4.00x less" in out


@pytest.mark.parametrize("fused", [False, True], ids=["vector", "mac_output"])
def test_per_tensor_ties_and_saturation_on_the_accelerator(fused):
    """A per-tensor multiplier of 2**-9 with a negative zero point on an int8
    matmul: ties (accumulators = 256 mod 512) round to even, both ends saturate."""
    rng = np.random.default_rng(2)
    a = pc.placeholder("A", (32, 48), "int8")
    b = pc.placeholder("B", (48, 32), "int8")
    y = nn.requantize(nn.matmul(a, b), 2.0**-9, zero_point=-20, name="y")
    k = pc.kernel("pertensor", [y])
    data = {
        "A": rng.integers(-128, 128, (32, 48)).astype(np.int8),
        "B": rng.integers(-128, 128, (48, 32)).astype(np.int8),
    }
    acc = data["A"].astype(np.int32) @ data["B"].astype(np.int32)
    ref = quant.reference(acc, 2.0**-9, -20)
    assert (acc % 512 == 256).any() and ref.min() == -128 and ref.max() == 127
    np.testing.assert_array_equal(polyc.interpret(k, data)["y"], ref)
    compiled = polyc.compile(k, config=_fused("edge-npu") if fused else "edge-npu")
    out, _ = compiled.run(**data)
    np.testing.assert_array_equal(out["y"], ref)
    assert ("unit=mac" in " ".join(_marks(compiled))) == fused


@pytest.mark.parametrize("fused", [False, True], ids=["vector", "mac_output"])
def test_requantize_with_one_sram_per_operand_role(fused):
    """HW-A's memories (inputs, weights, outputs in separate SRAMs; the vector
    unit and the accumulators in the output SRAM): the int8 output of a fused
    requantization is written where the array puts its accumulators."""
    import tomllib

    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    sram = d["memory"][1]
    d["memory"] = d["memory"][:1] + [
        dict(sram, name=n, capacity_bytes=256 * 1024)
        for n in ("inbuf", "wbuf", "outbuf")
    ]
    a = d["mac_array"]
    del a["operand_levels"]
    a.update(
        input_levels=["inbuf"],
        weight_levels=["wbuf"],
        accumulator_levels=["outbuf"],
        requantize=fused,
    )
    d["vector"]["levels"] = ["outbuf"]
    spec = accelerator.from_dict(d)
    rng = np.random.default_rng(4)
    x = pc.placeholder("x", (1, 16, 10, 10), "int8")
    w = pc.placeholder("w", (32, 16, 3, 3), "int8")
    m = pc.placeholder("m", (32,), "float32")
    y = nn.requantize(nn.conv2d(x, w), m, zero_point=-128, relu=True, name="y")
    k = pc.kernel("roles", [y])
    data = {
        "x": rng.integers(-128, 128, (1, 16, 10, 10)).astype(np.int8),
        "w": rng.integers(-128, 128, (32, 16, 3, 3)).astype(np.int8),
        "m": rng.uniform(1e-4, 1e-3, 32).astype(np.float32),
    }
    compiled = polyc.compile(k, config=spec)
    out, report = compiled.run(**data)
    np.testing.assert_array_equal(out["y"], polyc.interpret(k, data)["y"])
    assert ("unit=mac" in " ".join(_marks(compiled))) == fused
    assert report.levels[0].bytes_written == 32 * 8 * 8
