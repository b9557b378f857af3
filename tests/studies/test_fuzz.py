"""The whole-pipeline fuzzer: its grammar, builders, shrinker and record, and a
fixed-seed slice of cases that must all come out equal to the interpreter.

The slice is deterministic (the same programs and hardware every run) and small
enough for the suite's budget; the large runs are ``python -m bench.fuzz``.
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from polyc.studies import fuzz
from polyc.studies.fuzz import record as rec
from polyc.studies.fuzz.build import through_compute, through_torch, torch_supports
from polyc.studies.fuzz.grammar import InvalidProgram, Program, cost, shapes
from polyc.studies.fuzz.hardware import random_config, spec_of
from polyc.studies.fuzz.runner import mismatch

#: the slice of the suite: batch 0, split in parts so that workers share it
SLICE_SEED, SLICE_CASES, SLICE_PARTS = 0, 12, 3


@pytest.mark.parametrize("part", range(SLICE_PARTS))
def test_fixed_seed_slice_matches_the_interpreter(part):
    per = SLICE_CASES // SLICE_PARTS
    batch = fuzz.make_cases(per, SLICE_SEED, start=part * per)
    result = fuzz.run(batch, SLICE_SEED, jobs=1, timeout=None)
    assert not result.failures(), result.summary()


def test_generated_programs_are_valid_and_cheap():
    rng = random.Random(5)
    families, ops = set(), set()
    for _ in range(300):
        p = fuzz.generate(rng)
        largest, macs = cost(p)
        assert largest <= 6144 and macs <= 400_000
        assert Program.from_dict(json.loads(json.dumps(p.to_dict()))) == p
        families.add(p.family)
        ops |= {layer["op"] for layer in p.layers}
    assert families == {"cnn", "seq", "mlp"}
    assert {"conv", "conv1d", "linear", "attn", "pool", "add", "cat"} <= ops


def test_both_builders_give_the_shapes_of_the_grammar():
    rng = random.Random(11)
    seen = 0
    while seen < 6:
        p = fuzz.generate(rng)
        if not torch_supports(p):
            continue
        want = shapes(p)[-1]
        k1, _ = through_compute(p, 1)
        k2, _ = through_torch(p, 1)
        for k in (k1, k2):
            (out,) = k.outputs
            assert out.concrete_shape({}) == want, p.text()
        seen += 1


def test_a_layer_that_does_not_fit_is_refused():
    p = Program("cnn", "float32", (1, 3, 4, 4), ({"op": "add", "other": 0},))
    shapes(p)  # an add of the input to itself fits
    bad = Program(
        "cnn",
        "float32",
        (1, 3, 4, 4),
        (
            {
                "op": "conv",
                "out": 4,
                "k": (5, 5),
                "s": (1, 1),
                "d": (1, 1),
                "g": 1,
                "pad": (0, 0, 0, 0),
                "bias": False,
                "rev": False,
            },
        ),
    )
    with pytest.raises(
        InvalidProgram, match=r"layer 0 .* does not fit its input 1x3x4x4"
    ):
        shapes(bad)


def test_random_hardware_is_valid_and_varied():
    rng = random.Random(3)
    sides, levels, channels, split, requantize = set(), set(), set(), set(), set()
    for i in range(2000):  # 200 once missed a level larger than DRAM
        hw = random_config(rng, f"r{i}")
        spec = spec_of(hw)  # raises ConfigError if the generator drew nonsense
        a = spec.mac_array
        sides.add(a.rows)
        levels.add(len(spec.sram_levels))
        channels.add(spec.dma.channels)
        split.add(a.input_levels != a.weight_levels)
        requantize.add(a.requantize)
    assert min(sides) == 2 and max(sides) == 64
    assert {1, 2, 3} <= levels
    assert min(channels) == 1 and max(channels) == 8
    assert split == {True, False}  # one SRAM per operand role, or shared ones
    assert requantize == {True, False}


def test_mismatch_names_the_element_and_both_values():
    ref = {"out": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}
    assert mismatch(ref, {"out": ref["out"] + 1e-6}) is None
    got = ref["out"].copy()
    got[1, 0] = np.nan
    msg = mismatch(ref, {"out": got})
    assert msg.startswith("out[1, 0] = nan on the accelerator and 3 in the interpreter")
    assert "(1 of 4 elements differ, max relative error inf" in msg
    ints = {"y": np.array([1, 2, 3], np.int32)}
    assert mismatch(ints, {"y": np.array([1, 2, 4], np.int32)}).startswith("y[2]")


def test_the_shrinker_keeps_only_what_the_failure_needs():
    """With a stand-in runner that fails whenever a strided conv is present, the
    shrinker must end at one layer: that conv with everything else plain."""
    rng = random.Random(0)
    while True:
        p = fuzz.generate(rng, max_layers=6)
        strided = [
            layer for layer in p.layers if layer["op"] == "conv" and max(layer["s"]) > 1
        ]
        if strided and len(p.layers) >= 4:
            break
    case = fuzz.Case(0, 1, p, "compute", random_config(random.Random(1)))

    def run(c, timeout):
        bad = any(
            layer["op"] == "conv" and max(layer["s"]) > 1 for layer in c.program.layers
        )
        return {"status": "wrong" if bad else "ok", "error_type": "Mismatch"}

    small, r = fuzz.shrink(case, run=run, max_runs=2000)
    assert r["status"] == "wrong"
    (layer,) = small.program.layers
    assert layer["op"] == "conv" and max(layer["s"]) > 1
    assert layer["k"] == (1, 1) and layer["d"] == (1, 1) and layer["g"] == 1
    assert small.hardware == "tiny"


def test_the_record_survives_a_torn_line_and_sums_batches(tmp_path):
    path = tmp_path / "fuzz.jsonl"
    batch = fuzz.make_cases(2, 9, configs=("tiny",))
    records = [
        dict(fuzz.blank(c), status="ok", stage="done", seconds=0.1) for c in batch
    ]
    result = fuzz.Result(9, batch, records, 1.5)
    rec.append(path, rec.batch_line(result))
    with open(path, "a") as f:
        f.write('{"seed": 10, "cases": 5, "la')  # a writer killed mid-line
    rec.append(path, rec.batch_line(dataclasses.replace(result, seed=11)))
    lines = rec.read(path)
    assert [line["seed"] for line in lines] == [9, 11]
    t = rec.totals(lines)
    assert t["cases"] == 4 and t["kinds"] == {"ok": 4} and t["configs"] == {"tiny": 4}
    assert rec.next_seed(lines) == 12


def test_the_record_keeps_how_far_the_cost_model_was_from_the_simulator():
    """Each batch line counts its right cases' predicted over simulated cycles
    (a wrong case, or one without a prediction, is not counted); the totals
    give their geomean over the batches and keep the farthest, with its case."""
    batch = fuzz.make_cases(3, 21, configs=("tiny",))
    records = [
        dict(fuzz.blank(c), status="ok", stage="done", seconds=0.1) for c in batch
    ]
    records[0].update(cycles=1000, predicted=950.0)
    records[1].update(cycles=1000, predicted=2000.0)
    records[2].update(status="wrong", cycles=1000, predicted=100.0)
    line = rec.batch_line(fuzz.Result(21, batch, records, 1.0))
    fid = line["fidelity"]
    assert fid["cases"] == 2 and fid["within_10"] == 1 and fid["within_25"] == 1
    assert fid["farthest"][0]["ratio"] == 2.0
    assert fid["farthest"][0]["case"] == batch[1].index
    older = {k: v for k, v in line.items() if k != "fidelity"}  # an old line
    t = rec.totals([line, older])
    assert t["fidelity"]["cases"] == 2 and t["fidelity"]["seeds"] == [21]
    assert np.isclose(np.exp(t["fidelity"]["log_sum"] / 2), np.sqrt(0.95 * 2.0))
    from bench.fuzz import table

    assert "1.378" in table(t) and "2.00 (seed 21 case" in table(t)


def test_the_case_limit_counts_cpu_time_not_waiting():
    """A case on a loaded machine waits for a core; that is no hang. Seed 3 case 67
    (3 s of CPU) was recorded as a hang after 300 s of wall time on a machine
    loaded twelve deep, while the limit counted wall time."""
    import time

    from polyc.studies.fuzz.runner import CaseTimeout, cpu_limit

    with cpu_limit(0.2):
        time.sleep(0.5)  # no CPU used: the limit must not fire
    with pytest.raises(CaseTimeout), cpu_limit(0.2):
        while True:  # CPU used: it fires, however long the wait for a core
            pass
