"""The cost model's predicted cycles within 5% of the simulator's on layers where
it used to miss (issue 13), and the arithmetic of the store-window term.

Each case names what the model did not see before (its predicted / simulated
ratio then): the scheduler picks by predicted cycles, so a case also checks that
the pick it now makes is predicted as well as it is simulated.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import polyc
from polyc import ops
from schedules.accel import terms

CASES = {
    # 16 B/cycle DRAM, two channels: while an output tile's store holds one
    # channel, the next tiles' loads queue one after another on the other and
    # fall behind the array (0.92; terms.store_windows)
    "edge-npu gemm 256": (lambda: ops.matmul(256, 256, 256, "float16"), "edge-npu"),
    # DRAM-bound: the last tile computes after all loads and before its stores,
    # and the fill's loads pay their set-up and latency (0.81)
    "datacenter attention P V": (
        lambda: ops.batch_matmul(12, 128, 64, 128, dtype="float16"),
        "datacenter",
    ),
    # a layer norm fused ahead of a linear layer and its GELU: the vector unit
    # runs each tile's GELU before the next tile's layer norm, which the next
    # tile's MAC calls wait for, so nothing overlaps the MAC array (0.67:
    # predicted 11,255, simulated 16,802; work._chain)
    "datacenter layer norm, linear, GELU": (lambda: _norm_linear_gelu(), "datacenter"),
}


def _norm_linear_gelu():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.LayerNorm(32), torch.nn.Linear(32, 128), torch.nn.GELU()
    ).eval()
    return polyc.from_torch(module, (torch.randn(1, 256, 32),))


@pytest.mark.parametrize("name", CASES)
def test_predicted_cycles_are_within_5_percent_of_the_simulated(name, rng):
    make, config = CASES[name]
    kernel = make()
    compiled = polyc.compile(kernel, config=config, checks=False)
    inputs = {
        a.name: (rng.standard_normal(a.concrete_shape({})) * 0.1).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }
    _, report = compiled.run(inputs)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert 0.95 <= ratio <= 1.05, (
        f"{name}: predicted {compiled.choice.predicted_cycles:,.0f}, simulated "
        f"{report.cycles:,}"
    )


def _behind_by_steps(behind, full, won, windows):
    """The recurrence :func:`terms._behind` sums in closed form: the loads start
    ``full`` ahead; each window costs ``behind``, what the lead does not cover is
    waited for, and ``won`` comes back after it (never above ``full``)."""
    lead, total = full, 0.0
    for _ in range(windows):
        wait = max(behind - lead, 0.0)
        total += wait
        lead = min(full, max(lead - behind, 0.0) + won)
    return total


def test_the_store_windows_closed_form_sums_the_lead_recurrence():
    rng = np.random.default_rng(0)
    behind = rng.uniform(0, 2000, 400)
    full = rng.uniform(0, 3000, 400)
    won = rng.uniform(0, 2500, 400)
    windows = rng.integers(0, 40, 400)
    got = terms._behind(behind, full, won, windows.astype(float))
    want = [_behind_by_steps(*args) for args in zip(behind, full, won, windows)]
    assert np.allclose(got, want)
    # one case by hand: a lead of 900 against 1,300 a window, 300 won back after
    # each: 400 waited at the first, 1,000 at each of the next two
    assert terms._behind(1300.0, 900.0, 300.0, 3.0) == pytest.approx(2400.0)


def test_a_convolution_chained_through_vector_work_into_another_is_predicted():
    """A 1x1 convolution whose normalisation, activation and padding feed a
    depthwise one in the same layer: per tile the MAC array, the vector unit
    and the MAC array again run in turn (issued in program order), which the
    model charged only for an attention's softmax; it predicted 0.56 of the
    simulation here and fused the three layers (an EfficientNet block on
    edge-npu: 90,917 predicted, 171,214 simulated)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(16, 64, 1, bias=False),
        nn.BatchNorm2d(64),
        nn.SiLU(),
        nn.ZeroPad2d((0, 1, 0, 1)),
        nn.Conv2d(64, 64, 3, stride=2, groups=64, bias=False),
        nn.BatchNorm2d(64),
        nn.SiLU(),
    ).eval()
    x = torch.randn(1, 16, 32, 32)
    kernel = polyc.from_torch(model, (x,), fold_batch_norm=False)
    compiled = polyc.compile(kernel, config="edge-npu")
    out, report = compiled.run(arg0=x.numpy())
    (got,) = out.values()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert abs(ratio - 1) <= 0.05, ratio


def _loads_beside_stores(channels: int):
    """A fused 1x1 expand + depthwise conv's traffic on edge-npu (DRAM and
    channels 16 B/cycle, set-up 16), with ``channels`` DMA channels: 132 load
    calls (2,112 cycles of set-up, 57,600 bytes) and 12 stores of 1,024 bytes,
    one every four tiles, five loads and one store per tile."""
    from accelerator.hardware.config import load_config

    spec = load_config("edge-npu")
    spec = replace(spec, dma=replace(spec.dma, channels=channels))
    t = terms.Traffic.zeros(1)
    t.load_setup = np.array([132 * 16.0])
    t.load_cycles = t.load_setup + 57_600 / 16
    t.setup = t.load_setup + 12 * 16
    t.channel_cycles = t.load_cycles + 12 * 16 + 12_288 / 16
    t.load_calls = np.array([132.0])
    t.transfers = np.array([144.0])
    t.streams = np.array([6.0])
    t.load_streams = np.array([5.0])
    t.stored = [np.array([12.0])]
    return spec, t


def test_loads_beside_waiting_stores_take_the_first_half_of_the_channels():
    """The simulator puts a store to DRAM on the last half of the channels and
    a load on a channel of it only when no store waits in its queue; with a
    store every four tiles one always waits (11 load calls per store, under the
    16 the scalar core issues ahead on edge-npu), so all the loads run on
    channel 0 (hf-mobilenetv2's fused expand + depthwise layer: model 4,196
    DMA cycles when they spread over both channels, simulated 6,222 on channel
    0). Between fill and drain, 50,000 bytes loaded and 11,264 stored: the
    loads' channel pays their set-up and moves its bytes sharing DRAM with the
    stores (each half while both move), 2,112 + (50,000 + 11,264) / 16."""
    spec, t = _loads_beside_stores(2)
    got = terms.channel_time(spec, t, 50_000.0, 11_264.0)
    assert got == pytest.approx(2112 + 61_264 / 16)
    # the stores' channel: 12 set-ups, its bytes and as many of the loads'
    stores = 12 * 16 + 2 * 11_264 / 16
    assert got > stores
    # one channel: everything in order on it
    spec1, t1 = _loads_beside_stores(1)
    assert terms.channel_time(spec1, t1, 50_000.0, 11_264.0) == pytest.approx(
        t1.channel_cycles
    )


def test_loads_spread_over_the_channels_where_stores_are_rare():
    """With a store only every 66 load calls (two stores in the layer), most
    loads are issued while no store waits: 16 of each store period's 66 calls
    are held to channel 0, and the rest spread with the stores over both."""
    spec, t = _loads_beside_stores(2)
    t.stored = [np.array([2.0])]
    got = terms.channel_time(spec, t, 50_000.0, 11_264.0)
    confined = 16 / 66 * (2112 + 61_264 / 16)
    spread = t.channel_cycles / 2
    assert got == pytest.approx(max(confined, spread, 12 * 16 + 2 * 11_264 / 16))


def test_a_staged_operands_first_tiles_leave_the_staging_level_after_its_copy():
    """A staged operand's first tile copies wait for its staging copy, then the
    first tile's and the ``ahead`` tiles' copies start together and share one
    bank of the staging level. On datacenter (8 channels, DRAM 151.7 B/cycle,
    set-up and latency 182), transformer-block's 8 KiB input: its copy shares
    DRAM with the other transfers of the fill, each moving as many bytes while
    it moves on the five channels its three queued tile copies leave, and lands
    at 182 + 5 x 8,192 / 151.7; three 4 KiB tiles from a 64 B/cycle bank then
    take 52 + 3 x 64 (the simulator: the copy's data in at 344, its latency
    150, the three tiles 494 to 718, the first MAC call at 738). The model had
    charged the two copies alone (in linear-stack's first layer, a 16 KiB
    input: 671 for a first MAC call at 1,168)."""
    t = terms.Traffic.zeros(1)
    t.first_fixed = np.array([182.0])
    t.hops = [(np.array([52.0 + 64.0]), np.array([8.0]), np.array([64.0]), 8192.0)]
    got = terms.staged_fill(t, 8, 2, np.array([84_651.0]), 151.7)
    assert got == pytest.approx([182.0 + 5 * 8192 / 151.7 + 52.0 + 3 * 64.0])
    assert 0.9 < got[0] / 738 < 1.0
    # a 16 KiB input lands with the whole fill's bytes (74,624), no sooner
    t.hops = [(np.array([52.0 + 64.0]), np.array([8.0]), np.array([64.0]), 16384.0)]
    got = terms.staged_fill(t, 8, 2, np.array([74_624.0]), 151.7)
    assert got == pytest.approx([182.0 + 74_624 / 151.7 + 52.0 + 3 * 64.0])
    # one tile copy: nothing beside it; no staged operand: no wait
    t.hops = [(np.array([116.0]), np.array([1.0]), np.array([64.0]), 8192.0)]
    got = terms.staged_fill(t, 8, 2, np.array([84_651.0]), 151.7)
    assert got == pytest.approx([182.0 + 7 * 8192 / 151.7 + 116.0])
    assert terms.staged_fill(terms.Traffic.zeros(1), 8, 2, 1e5, 151.7) == 0.0


def test_a_re_read_activation_is_staged_only_where_its_fill_pays(rng):
    """16 rows of 256 against a 256 x 256 weight on datacenter, float32: the
    activation is re-read per column tile, so staging it in ``shared`` saves
    DRAM bytes, but its first tiles then wait for the whole staging copy and a
    hop through one bank. The model missed that wait and staged it (predicted
    2,663 cycles, simulated 3,310: 0.80); with the wait counted it loads the
    activation directly, 3,045 simulated cycles, predicted within 10%."""
    kernel = ops.matmul(16, 256, 256, "float32")
    compiled = polyc.compile(kernel, config="datacenter", checks=False)
    inputs = {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }
    out, report = compiled.run(inputs)
    np.testing.assert_allclose(
        out["out"], inputs["A"] @ inputs["B"], rtol=1e-4, atol=1e-4
    )
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert 0.9 <= ratio <= 1.1, ratio


def test_a_concatenation_s_slabs_are_one_box_in_the_model_as_in_placement():
    """A tile of ``cat([silu(y), y], dim=1)`` along the concatenated dimension
    writes two slabs seven rows apart of the output. Placement takes their hull
    as the buffer and, as the hull is not all written, loads it before writing
    and stores it after; the model took each access's own extent (the hull only
    in an attention) and saw a quarter of those bytes and no load. Fuzz seed
    962, case 40 (random hardware: a 6 KiB one-bank local memory, one 4 B/cycle
    DMA channel): the search took that tiling, predicted 1,048 cycles, and it
    ran 7,918, the output loaded and stored 2 KiB a tile; with the hull in the
    model it takes whole slabs (no load of the output) and runs 2,314."""
    from polyc.studies import fuzz
    from polyc.studies.fuzz.build import through_compute
    from polyc.studies.fuzz.hardware import spec_of

    program = fuzz.Program(
        "seq",
        "float32",
        (2, 7, 16),
        ({"op": "affine"}, {"op": "act", "fn": "silu"}, {"op": "cat", "other": 1}),
    )
    table = {"add": 1, "mul": 2, "compare": 1, "divide": 4}
    hardware = {
        "name": "fuzz-962-40",
        "description": "fuzz seed 962, case 40",
        "clock_ghz": 1.0,
        "mac_array": {
            "rows": 16,
            "cols": 16,
            "dataflow": "output_stationary",
            "double_buffered": False,
            "operand_levels": ["local"],
            "accumulator_levels": ["local"],
            "dtypes": {
                "int8": {"macs_per_cycle": 0.25, "pj_per_mac": 1.0},
                "float16": {"macs_per_cycle": 0.5, "pj_per_mac": 1.0},
            },
        },
        "vector": {
            "lanes": 4,
            "levels": ["local"],
            "pj_per_op": 0.5,
            "cycles": {**table, "transcendental": 8, "reduce": 6},
        },
        "scalar": {
            "statement_cycles": 2,
            "issue_cycles": 2,
            "queue_depth": 4,
            "pj_per_op": 4.0,
            "cycles": {**table, "transcendental": 20},
        },
        "memory": [
            {
                "name": "dram",
                "kind": "dram",
                "capacity_bytes": 1 << 30,
                "bytes_per_cycle": 8.0,
                "latency_cycles": 20,
                "banks": 1,
                "alignment_bytes": 1,
                "read_pj_per_byte": 100.0,
                "write_pj_per_byte": 100.0,
                "read_bytes_per_cycle": 2.0,
                "write_bytes_per_cycle": 2.0,
            },
            {
                "name": "local",
                "kind": "sram",
                "capacity_bytes": 6144,
                "bytes_per_cycle": 16.0,
                "latency_cycles": 2,
                "banks": 1,
                "alignment_bytes": 1,
                "read_pj_per_byte": 2.0,
                "write_pj_per_byte": 2.0,
            },
        ],
        "dma": {
            "channels": 1,
            "setup_cycles": 0,
            "bytes_per_cycle": 4.0,
            "max_dims": 3,
        },
    }
    kernel, inputs = through_compute(program, 962)
    compiled = polyc.compile(kernel, config=spec_of(hardware))
    out, report = compiled.run(**inputs)
    for name, want in polyc.interpret(kernel, inputs).items():
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-5)
    (output,) = out
    loads = [e for e in report.events if e.label == f"{output} in"]
    assert not loads, f"{len(loads)} loads of the output {output}"
    assert compiled.choice.predicted_cycles / report.cycles > 0.5


def test_a_polyphase_copy_counts_a_descriptor_per_row_it_steps_over():
    """A stride-2 convolution's input stored in phases: each phase's copy reads
    every other row of the source, so no row merges with the next into one
    DMA descriptor. With one-dimensional descriptors (``max_dims = 1``) the
    copy of 12 channels x 2 rows of a phase is 24 descriptors, and the model
    counted one (it merged the rows as if they were adjacent): predicted 623
    cycles for 910 simulated (fuzz seed 965 case 383: 0.45). Counted as the
    runtime does, the search takes other tiles: predicted 673, ran 615."""
    import tomllib

    from accelerator.hardware.config import CONFIG_DIR, from_dict
    from polyc.studies import fuzz
    from polyc.studies.fuzz.build import through_compute

    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = "edge-npu-1d-dma"
    d["dma"].update(max_dims=1, channels=4, bytes_per_cycle=8.0)
    d["mac_array"].update(rows=8, cols=8, dataflow="weight_stationary")
    d["memory"][1].update(capacity_bytes=49152)
    conv = {"op": "conv", "out": 16, "k": (1, 3), "s": (2, 1), "d": (1, 3), "g": 1}
    conv.update(pad=(0, 0, 6, 0), bias=False, rev=False)
    program = fuzz.Program("cnn", "float32", (2, 12, 3, 3), (conv,))
    kernel, inputs = through_compute(program, 965)
    compiled = polyc.compile(kernel, config=from_dict(d))
    out, report = compiled.run(**inputs)
    for name, want in polyc.interpret(kernel, inputs).items():
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-5)
    predicted = compiled.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= 0.15, (predicted, report.cycles)
