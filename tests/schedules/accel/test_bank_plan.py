"""The memory planner's bank-aware layout, and what it buys in the simulator."""

from __future__ import annotations

import numpy as np
import pytest
import tomllib

import polyc
from accelerator.hardware.config import CONFIG_DIR, from_dict, load_config
from codegen.accel.direct import numpy_inputs
from polyc import ops
from schedules.accel import memplan
from schedules.accel.memplan import Request, plan


def _tiny(banks: int, bytes_per_cycle: float):
    """tiny with its 16 KiB L1 in ``banks`` banks."""
    with open(CONFIG_DIR / "tiny.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = f"tiny-{banks}-banks"
    d["memory"][1].update(banks=banks, bytes_per_cycle=bytes_per_cycle)
    return from_dict(d)


def test_a_double_buffer_sits_across_a_bank_boundary():
    """Two 1 KiB slots on two 8 KiB banks: slot 0 ends where bank 1 begins, so the
    DMA filling one slot and the engine reading the other use different banks.
    First fit puts both in bank 0."""
    spec = _tiny(2, 16.0)
    req = [Request("a", "a", 1, 2, 1024, 0, 0)]
    assert plan(spec, req)["a"].offset == 8192 - 1024
    assert plan(spec, req, bank_aware=False)["a"].offset == 0


def test_operands_live_together_go_to_banks_of_their_own():
    """Three one-slot buffers on tiny's four 4 KiB banks: each takes the lowest
    offset of a bank nobody uses (first fit packs them into bank 0)."""
    spec = load_config("tiny")
    reqs = [Request(n, n, 1, 1, 512, 0, 0) for n in "abc"]
    got = {n: a.offset for n, a in plan(spec, reqs).items()}
    assert sorted(got.values()) == [0, 4096, 8192]
    first = {n: a.offset for n, a in plan(spec, reqs, bank_aware=False).items()}
    assert sorted(first.values()) == [0, 512, 1024]


def _both_plans(kernel, spec):
    """Cycles of the scheduler's choice with its bank-aware plan and with the same
    schedule planned by first fit, and whether the outputs agree."""
    compiled = polyc.compile(kernel, config=spec)
    x = numpy_inputs(kernel, np.random.default_rng(0))
    out, aware = compiled.run(x)
    k = compiled.choice.kernel
    first_fit = k.with_schedule(memplan.replan(spec, k.schedule, bank_aware=False))
    out2, plain = polyc.compile(kernel, config=spec, schedule=first_fit).run(x)
    for name, v in out.items():
        np.testing.assert_array_equal(out2[name], v)
    return aware, plain


@pytest.mark.parametrize(
    "dtype", ["float32", pytest.param("int8", marks=pytest.mark.slow)]
)
def test_the_bank_aware_plan_runs_fewer_cycles_on_banked_sram(dtype):
    """A 64^3 GEMM on tiny with four 16 B/cycle banks. First fit packs the output,
    A and B buffers (eight slots) into the first banks, so the DMA filling a slot
    shares a bank with the MAC array reading the slot beside it, and the array's
    operands share banks too; the bank-aware plan spreads the slots over the four
    banks. The array's call then streams at its dataflow rate more often and the
    loads beside it get more of their bank."""
    aware, plain = _both_plans(ops.matmul(64, 64, 64, dtype=dtype), _tiny(4, 64.0))
    assert aware.cycles < 0.9 * plain.cycles
    assert aware.engine("mac_array").busy < plain.engine("mac_array").busy


def test_with_one_bank_both_plans_are_the_same():
    """One bank leaves the planner nothing to choose: the same cycles."""
    aware, plain = _both_plans(ops.matmul(64, 64, 64), _tiny(1, 16.0))
    assert aware.cycles == plain.cycles


def test_a_buffer_the_dma_fills_keeps_off_the_bank_of_an_accumulator():
    """edge-npu's four 256 KiB banks, a linear layer's buffers (weights 3 x 16 KiB,
    accumulator and output 32 KiB each, bias 2 KiB, input 3 x 512 B): every bank
    holds a buffer before the input's turn. The input went beside the accumulator
    (one slot against the weights' three), where the MAC array's accumulator
    traffic takes the whole bank and the input's loads waited through every call:
    a 128 -> 512 linear + GELU ran 50,338 cycles. It now goes beside a buffer the
    DMA fills."""
    spec = load_config("edge-npu")
    reqs = [
        Request("w", "w", 1, 3, 16384, 0, 0),
        Request("acc", "acc", 1, 1, 32768, 0, 0, produced=True),
        Request("out", "out", 1, 1, 32768, 0, 0, produced=True),
        Request("bias", "bias", 1, 1, 2048, 0, 0),
        Request("x", "x", 1, 3, 512, 0, 0),
    ]
    got = plan(spec, reqs)
    bank = spec.memory[1].capacity_bytes // spec.memory[1].banks
    hot = {got["acc"].offset // bank, got["out"].offset // bank}
    assert got["x"].offset // bank not in hot
    assert (got["x"].offset + got["x"].bytes - 1) // bank not in hot


def test_the_buffers_of_one_mac_call_take_banks_apart():
    """Six buffers live on tiny's four banks, so two banks hold two each: the
    weights (copied in, two slots) went to the accumulator's bank, where the
    array reads and writes most; as partners of one MAC call, the accumulator,
    the input and the weights take three banks, and the others share. (BERT's
    first attention layer on edge-npu had its query projection's input and
    accumulator in one bank: MAC calls of 320 cycles against 256 predicted, the
    layer 29,074 cycles against 21,124; now 19,234.)"""
    spec = load_config("tiny")
    call = {"acc", "a", "w"}

    def reqs(partners: bool):
        def p(n):
            return frozenset(call - {n}) if partners else frozenset()

        return [
            Request("acc", "acc", 1, 1, 2048, 0, 0, produced=True, partners=p("acc")),
            Request("a", "a", 1, 1, 2048, 0, 0, produced=True, partners=p("a")),
            Request("w", "w", 1, 2, 1024, 0, 0, partners=p("w")),
            *(
                Request(n, n, 1, 1, 2048, 0, 0, produced=True)
                for n in ("n1", "n2", "n3")
            ),
        ]

    bank = spec.memory[1].capacity_bytes // spec.memory[1].banks
    alone = {n: a.offset // bank for n, a in plan(spec, reqs(False)).items()}
    assert len({alone[n] for n in call}) < 3  # the rule without partners
    got = {n: a.offset // bank for n, a in plan(spec, reqs(True)).items()}
    assert len({got[n] for n in call}) == 3


def test_a_placed_mac_call_plans_its_buffers_as_partners():
    """replan reads each @tensorize mark's statement and its innermost enclosing
    buffers: a linear layer's input, weights and output are partners."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(16, 64)
    kernel = polyc.from_torch(torch.nn.Linear(64, 64, bias=False).eval(), (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    scheduled = compiled.choice.kernel
    partners, homes = memplan._partners(scheduled.schedule, scheduled)
    assert not any(homes.values())  # nothing of it lives on chip for the kernel
    arrays = {b.name: b.array for b in memplan.buffers(scheduled.schedule)}
    groups = [{arrays[n], *(arrays[p] for p in ps)} for n, ps in partners.items()]
    assert groups and all(g == {"arg0", "p_weight", "out"} for g in groups), groups


def test_a_buffer_keeps_off_the_banks_of_its_calls_home():
    """A MAC call's accumulator with a home (on chip for the whole kernel, at
    the top of the level, above the planned bytes) takes its bank as a
    partner buffer would: the call's other operands keep off it."""
    spec = load_config("tiny")
    alone = [Request("a", "a", 1, 1, 512, 0, 0)]
    assert plan(spec, alone)["a"].offset == 0
    housed = [Request("a", "a", 1, 1, 512, 0, 0, partner_banks=frozenset({0}))]
    assert plan(spec, housed)["a"].offset // spec.memory[1].bank_size != 0


def test_a_fused_int8_mlp_runs_its_calls_off_the_bank_of_its_accumulator():
    """linear-stack in int8 on edge-npu: the second linear layer of the fused
    MLP adds into its accumulator's home (16 x 256 int32 at the top of the
    SRAM, bank 3). The planner put the call's input tile in bank 3 too: 80
    bytes a cycle against the bank's 64, each call 640 cycles where the model
    (each operand in a bank of its own) predicts 512, the layer's MAC array
    busy 9,216 cycles against 8,252. The home's bank is a partner's now."""
    from bench import zoo

    module, inputs = zoo.model("linear-stack").build("int8")
    compiled = polyc.compile(polyc.from_torch(module, inputs), config="edge-npu")
    _, report = compiled.run({f"arg{n}": x.numpy() for n, x in enumerate(inputs)})
    fused = next(lc for lc in compiled.choice.layers if len(lc.layer.stmts) == 4)
    names = {s.name for s in fused.layer.stmts}
    mac = [
        e.end - e.start
        for e in report.events
        if e.engine == "mac_array" and e.label.split("(")[0] in names
    ]
    predicted = dict(fused.candidate.engines)["mac"]
    assert len(mac) == 72 and sum(mac) <= predicted


def test_a_layer_planned_below_a_home_is_searched_with_the_banks_it_gets():
    """The memory planner gives a layer the whole banks below the homes (and
    below a weight fetched ahead whose span covers it), and a part of one more
    where a quarter of it or more is free: the search's banks'
    bound sees as many (``search.banked``), its cache key says so, and with
    one bank for a MAC call's three operands the best candidate is slower than
    with a bank each (hf-convnext float16 on edge-npu: a 512 KiB weight fetched
    ahead left its span's layers bank 0 alone, their calls 96 cycles where
    the model said 64)."""
    from dataclasses import replace

    from schedules.accel import cache, search
    from schedules.accel.layers import split

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)
    ).eval()
    kernel = polyc.from_torch(model, (torch.randn(16, 64),))
    spec = load_config("edge-npu")
    sram = spec.level_index("sram")
    bank = spec.memory[sram].bank_size
    temp = next(a for a in kernel.arrays.values() if a.role.name == "TEMP")
    housed = kernel.replace(
        arrays={
            **kernel.arrays,
            temp.name: replace(temp, home=sram, home_offset=bank + 4096),
        }
    )
    layer = next(la for la in split(kernel) if not la.opaque)
    assert search.banked(kernel, layer, spec) is spec
    room = search.banked(housed, layer, spec).memory[sram]
    assert room.usable_banks == 1 and room.banks == spec.memory[sram].banks
    assert not room.usable_part  # 4 KiB of a bank holds no slot the DMA fills
    assert "banks [(0, False), (1, False)" in cache.signature(housed, layer, spec).text
    # half a bank beside a whole one: the DMA's slots may sit there
    half = kernel.replace(
        arrays={
            **kernel.arrays,
            temp.name: replace(temp, home=sram, home_offset=bank + bank // 2),
        }
    )
    room = search.banked(half, layer, spec).memory[sram]
    assert room.usable_banks == 1 and room.usable_part
    alone = search.search(housed, layer, spec)[0]
    spread = search.search(kernel, layer, spec)[0]
    assert alone.cycles > spread.cycles  # 2,134 against 2,006 when written


def test_the_model_stops_the_dma_while_mac_calls_fill_its_one_bank():
    """On edge-npu with its scratchpad as one 64 B/cycle bank, a float16 MLP's
    calls stream both operands at the bank's whole width, and the runtime gives
    the DMA what the engines leave: nothing, while they run. The cost model
    charges the DMA's DRAM time again for the calls' busy cycles
    (``banks.left``); it gave DRAM's rate throughout and predicted 22,499 for
    34,356 simulated cycles (the chosen tiling also ran slower)."""
    from dataclasses import replace

    torch = pytest.importorskip("torch")
    spec = load_config("edge-npu")
    sram = spec.level_index("sram")
    memory = list(spec.memory)
    memory[sram] = replace(memory[sram], banks=1, bytes_per_cycle=64.0)
    spec = replace(spec, name="edge-npu-one-bank", memory=tuple(memory))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)
    ).eval()
    model = model.half()
    x = torch.randn(16, 256).half()
    compiled = polyc.compile(polyc.from_torch(model, (x,)), config=spec)
    out, report = compiled.run(arg0=x.numpy())
    got = next(iter(out.values())).astype(np.float32)
    want = model(x).detach().float().numpy()
    np.testing.assert_allclose(got, want, atol=0.02, rtol=0.02)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert 0.9 < ratio < 1.1, (compiled.choice.predicted_cycles, report.cycles)


def test_a_copy_over_many_banks_moves_at_the_banks_it_covers():
    """A local memory of 32 banks of 64 bytes at 4 B/cycle in all (an eighth of a
    byte per cycle a bank), one DMA channel: a tile of 480 bytes covers seven
    and a half banks, and the simulator moves it at their rate, 528 cycles
    with the set-up. The model took one bank's (a buffer within a bank, as on
    datacenter's 4 MiB banks) and charged 3,856: a strided convolution and a
    pooling predicted 67,443 cycles that ran 10,832 (fuzz seed 964, case 321,
    6.7x on its random hardware). The DMA's busy cycles are now the
    simulator's. On its one channel each tile's store holds up the next
    tile's loads, so the tiles run one after the other; the model charged
    those loads and stores twice (as exposed at each boundary and as the
    loads pacing the tiles), and a weight loaded every other tile at every
    boundary: 15,304 cycles predicted after the banks' fix, 12,422 now."""
    from polyc.studies import fuzz
    from polyc.studies.fuzz.build import through_compute

    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = "edge-npu-slow-banks"
    d["memory"][1].update(capacity_bytes=2048, banks=32, bytes_per_cycle=4.0)
    d["dma"].update(channels=1, bytes_per_cycle=8.0)
    spec = from_dict(d)
    conv = {"op": "conv", "out": 6, "k": (3, 3), "s": (3, 2), "d": (3, 2), "g": 6}
    conv.update(pad=(0, 0, 0, 0), bias=False, rev=False)
    pool = {"op": "pool", "kind": "avg", "k": 3, "s": 1, "p": 0}
    program = fuzz.Program("cnn", "float16", (2, 6, 16, 16), (conv, pool))
    kernel, inputs = through_compute(program, 964)
    compiled = polyc.compile(kernel, config=spec)
    _, report = compiled.run(**inputs)
    moved = sum(e.end - e.start for e in report.events if e.engine.startswith("dma"))
    busy = sum(dict(lc.candidate.engines)["dma"] for lc in compiled.choice.layers)
    assert busy == moved
    predicted = compiled.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= 0.2, (predicted, report.cycles)
