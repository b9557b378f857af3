"""Weights fetched ahead (schedules/accel/prefetch.py): a later layer's weights
copied into a home on chip while earlier layers compute, in DMA chunks issued
before the layers that leave DRAM idle."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest
import torch
from torch import nn

import polyc
import schedules as S
from accelerator import load_config
from accelerator.sim.simulator import Simulator
from bench import zoo
from codegen.accel import gathercall, names
from codegen.accel.direct import build_runtime, numpy_inputs
from polyc.errors import ArgumentError, CodegenError, ScheduleError
from polyc.ir import deps as deps_module
from polyc.ir import marks as pm
from polyc.ir import prefetches
from polyc.ir.deps import DEPS
from polyc.oracle.interpreter import interpret
from schedules import legality
from schedules.accel import isltree, prefetch
from schedules.accel.scheduler import schedule


class _Head(nn.Module):
    """A convolution, then a linear layer over its flattened output: the linear
    layer's weight is read by one statement."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _kernel():
    torch.manual_seed(0)
    return polyc.from_torch(_Head().eval(), (torch.randn(1, 4, 8, 8),))


def _weight(kernel) -> str:
    """The linear layer's weight: the largest input one statement reads."""
    readers = {}
    for s in kernel.statements:
        for ld in s.reads:
            readers.setdefault(ld.array, set()).add(s.name)
    inputs = [
        a
        for a in kernel.arrays.values()
        if a.role.value == "input" and len(readers.get(a.name, ())) == 1
    ]
    return max(inputs, key=lambda a: a.nbytes()).name


def test_a_weight_fetched_ahead_computes_the_same_and_replays():
    kernel = _kernel()
    w = _weight(kernel)
    got = S.prefetch(kernel, w)
    first = got.statements[0]
    assert first.name == "PF0" and str(first) == f"PF0: {w}_pf[i0, i1] = {w}[i0, i1]"
    assert not any(ld.array == w for s in got.statements[1:] for ld in s.reads)
    assert got.arrays[f"{w}_pf"].role.value == "temp"
    assert prefetches.copies(got) == {"PF0": (w, f"{w}_pf")}
    x = numpy_inputs(kernel, np.random.default_rng(0))
    want, out = interpret(kernel, x), interpret(got, x)
    for name, v in want.items():
        np.testing.assert_array_equal(out[name], v)
    replayed = S.replay(kernel, got.history)
    assert [str(s) for s in replayed.statements] == [str(s) for s in got.statements]


def test_bad_fetches_are_refused_with_the_reason():
    kernel = _kernel()
    w = _weight(kernel)
    temp = next(a.name for a in kernel.arrays.values() if a.role.value == "temp")
    with pytest.raises(ArgumentError, match="only the caller's inputs"):
        S.prefetch(kernel, temp)
    rows = kernel.arrays[w].concrete_shape({})[0]
    first = kernel.statements[0].name
    with pytest.raises(ArgumentError, match=f"adding up to its {rows} rows"):
        S.prefetch_dma(S.prefetch(kernel, w), "PF0", chunks=((first, rows - 1),))
    with pytest.raises(ScheduleError, match="does not run one prefetch copy"):
        S.prefetch_dma(kernel, first)


def test_the_chunks_go_in_the_mark_and_need_a_home_for_codegen():
    kernel = _kernel()
    w = _weight(kernel)
    rows = kernel.arrays[w].concrete_shape({})[0]
    names = [s.name for s in kernel.statements]
    got = S.prefetch(kernel, w)
    marked = S.prefetch_dma(got, "PF0", chunks=((names[0], 4), (names[1], rows - 4)))
    chunks = prefetches.chunks(marked)
    assert [(c.before, c.lo, c.hi) for c in chunks] == [
        (names[0], 0, 4),
        (names[1], 4, rows),
    ]
    # without a home the copy would be a DRAM round trip: codegen refuses it
    with pytest.raises(CodegenError, match="not a chunk of"):
        gathercall.chunks(marked)


def test_the_last_channel_takes_a_transfer_ahead():
    rt = build_runtime()
    sim = Simulator(rt, load_config("edge-npu"))
    src = sim.alloc("sram", 0, 4096, "w")
    dst = sim.alloc("sram", 4096, 4096, "w_pf")
    sim.array(src, "float32", (1024,))[:] = np.arange(1024)
    sim.dma((dst, 0, [1]), (src, 0, [1]), [1024], 4, channel=-2, label="ahead")
    report = sim.finish()
    (event,) = [e for e in report.events if e.label == "ahead"]
    assert event.engine == "dma1"  # edge-npu's two channels: the last one
    np.testing.assert_array_equal(sim.array(dst, "float32", (1024,)), np.arange(1024))
    with pytest.raises(Exception, match="-2 for the last one"):
        sim.dma((dst, 0, [1]), (src, 0, [1]), [16], 4, channel=-3)


def test_res_blocks_fetch_the_head_weights_under_the_convolutions(monkeypatch):
    """res-blocks in float32 on edge-npu: the head's linear layer streams its
    weights from DRAM (its layer bound by DMA), while the convolutions before it
    leave DRAM idle; fetched ahead in chunks under them, the head reads them in
    place (52,986 -> 48,619 cycles when this was written)."""
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")  # one kernel, compiled twice
    module, inputs = zoo.model("res-blocks").build("float32")
    kernel = polyc.from_torch(module, inputs)
    x = {f"arg{n}": t.numpy() for n, t in enumerate(inputs)}
    ahead = polyc.compile(kernel, config="edge-npu", verify=True)
    _, report = ahead.run(**x)  # verified against the interpreter
    pf = [lc for lc in ahead.choice.layers if lc.note.startswith("prefetch:")]
    assert len(pf) == 1 and "DMA chunks under earlier layers" in pf[0].note
    text = ahead.module.c_source
    assert "PC_LAST_CHANNEL" in text and "fetched ahead" in text
    # the copy's home holds it from its first chunk to its reader alone: the
    # layers before lay their buffers over its bytes (before, the home was the
    # kernel's, above every layer's buffers)
    k = ahead.kernel
    tops = _layer_tops(k.schedule)
    ((copy, (lo, hi)),) = prefetches.spans(
        k, [isltree.statements_of(t) for t in tops]
    ).items()
    home = k.arrays[copy]
    end = home.home_offset + home.nbytes()
    reused = [
        i
        for i, top in enumerate(tops)
        for a in _allocations(top)
        if a.level_index == home.home
        and a.offset < end
        and home.home_offset < a.offset + a.bytes
    ]
    assert reused and all(not lo <= i <= hi for i in reused), (lo, hi, reused)
    assert f"pc_free(_pc_ctx, {names.dram_buffer(copy)})" in text
    monkeypatch.setattr(prefetch, "ahead", lambda *a: None)
    plain = polyc.compile(kernel, config="edge-npu")
    _, before = plain.run(**x)
    assert report.cycles < 0.95 * before.cycles
    # the prediction sees the gain it was chosen for
    assert ahead.choice.predicted_cycles < plain.choice.predicted_cycles


def _layer_tops(schedule):
    """The top node of each layer of a placed schedule (below the marks over
    the whole program)."""
    node = schedule.get_root().child(0)
    while node.get_type() == isl.schedule_node_type.mark:
        node = node.child(0)
    assert node.get_type() == isl.schedule_node_type.sequence
    return [node.child(i).child(0) for i in range(node.n_children())]


def _allocations(top):
    """The memory planner's allocations below ``top`` (its ``@scope`` marks)."""
    found = []

    def visit(n):
        if n.get_type() == isl.schedule_node_type.mark:
            name = n.mark_get_id().get_name()
            if pm.kind(name) == "scope":
                found.extend(pm.ScopeMark.parse(name).allocations)
        return True

    top.foreach_descendant_top_down(visit)
    return found


def test_a_split_kernel_links_the_copies_storage(monkeypatch, tmp_path):
    """A kernel large enough to compile as several units keeps the copies'
    storage at file scope, which every unit links to: inside the function it
    went into the units' frame, the split build failed and the kernel was built
    again as one unit (hf-mobilenetv2: 1.4 s for every compile after the first)."""
    from codegen import build as cbuild
    from codegen.accel import direct, units

    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))  # nothing built before
    monkeypatch.setattr(units, "MIN_LINES", 0)  # split whatever its size
    monkeypatch.setattr(cbuild, "jobs", lambda: 2)
    calls = []
    real = cbuild.build

    def counted(*args, **kwargs):
        calls.append((kwargs.get("name"), kwargs.get("split") is not None))
        return real(*args, **kwargs)

    monkeypatch.setattr(direct.cbuild, "build", counted)
    module, inputs = zoo.model("res-blocks").build("float32")
    compiled = polyc.compile(polyc.from_torch(module, inputs), config="edge-npu")
    text = compiled.module.c_source
    storage = text.index("static unsigned char _pc_")
    assert storage < text.index("void polyc_")  # at file scope
    kernel_builds = [split for name, split in calls if name != "runtime"]
    assert kernel_builds == [True]  # built split, once


def _analysed(kernel):
    """``kernel`` with the analyses the scheduler makes before it fetches
    ahead, and the anti and output dependences too."""
    legality.memory_dependences(kernel)
    d = kernel.deps
    d.by_array("flow"), d.live_in_accesses, d.live_out_instances, d.anti
    return kernel


def _same_dependences(carried, fresh):
    """The carried analyses of a program equal isl's own on it: every
    relation, the memory-based ones in the same order."""
    a, b = legality.memory_dependences(carried), legality.memory_dependences(fresh)
    assert [(k, arr) for k, arr, _ in a] == [(k, arr) for k, arr, _ in b]
    assert all(x[2].is_equal(y[2]) for x, y in zip(a, b))
    c, d = carried.deps, fresh.deps
    for name in ("flow_tagged", "anti_tagged", "output_tagged", "live_in_accesses"):
        assert getattr(c, name).is_equal(getattr(d, name)), name
    assert c.live_out_instances.is_equal(d.live_out_instances)
    assert c.live_out.is_equal(d.live_out)
    for kind in ("flow", "anti", "output"):
        got, want = c.by_array(kind), d.by_array(kind)
        assert sorted(got) == sorted(want)
        assert all(got[a].is_equal(want[a]) for a in want)
    ex, ey = legality.dependences(carried), legality.dependences(fresh)
    assert [(k, arr) for k, arr, _ in ex] == [(k, arr) for k, arr, _ in ey]


def test_the_rewritten_programs_dependences_are_carried_as_isl_computes_them(
    monkeypatch,
):
    """The scheduler's rewritten program (res-blocks in float32 on edge-npu,
    every weight that fits fetched) takes the dependences of the program it
    was made from (``legality.carry``): its copies and their readers change the
    accesses to the weights alone. They equal isl's analysis of the rewritten
    program made anew, and no dataflow analysis of the whole rewritten
    program runs (before, it ran again: 2.3 CPU s of hf-mobilenetv2's)."""
    monkeypatch.setenv("POLYC_SHARED_ANALYSES", "0")  # each program its own
    monkeypatch.setenv(prefetch.MARGIN_ENV, "-1")  # every weight that fits
    module, inputs = zoo.model("res-blocks").build("float32")
    kernel = polyc.from_torch(module, inputs)
    made, real, flows = [], prefetch.ahead, []

    def ahead(program, *args):
        got = real(_analysed(program), *args)
        made.append((program, got[0]))
        return got

    real_flow = deps_module.Deps._compute_flow

    def counted(self, info, what):
        flows.append((len(self._kernel.statements), self._arrays, what))
        return real_flow(self, info, what)

    monkeypatch.setattr(prefetch, "ahead", ahead)
    monkeypatch.setattr(deps_module.Deps, "_compute_flow", counted)
    schedule(kernel, load_config("edge-npu"))
    (program, rewritten) = made[0]
    copies = prefetches.copies(rewritten)
    assert len(copies) >= 2
    n = len(rewritten.statements)
    assert n == len(program.statements) + len(copies)
    assert not [f for f in flows if f[0] == n and f[1] is None]  # the whole: never
    fresh = rewritten.replace()  # the same program, no analyses
    assert not fresh.has_analysis(DEPS)
    _same_dependences(rewritten, fresh)


def test_dependences_carried_through_more_arrays_are_computed_in_order():
    """Carried through an intermediate too, the memory-based dependences
    through it come first when the statements that write it run before every
    other's (``conv2d``, the first layer's): carried. When they do not
    (``flatten``, written later) they are computed anew. The exact ones are
    carried either way, and all equal isl's."""
    kernel = _analysed(_kernel())
    w = _weight(kernel)
    for temp, in_order in (("conv2d", True), ("flatten", False)):
        rewritten = S.prefetch(kernel, w)
        legality.carry(kernel, rewritten, {w, f"{w}_pf", temp})
        assert rewritten.has_analysis(DEPS)
        assert rewritten.has_analysis(legality._MEMORY) == in_order
        _same_dependences(rewritten, rewritten.replace())


class _Cand:
    """The figures of a chosen candidate that the choice of weights reads."""

    def __init__(self, cycles: float, **engines: float):
        self.cycles, self.engines, self.sram_bytes = cycles, tuple(engines.items()), 0


def test_a_weight_is_fetched_when_the_idle_time_covers_half_of_it():
    """The linear layer is bound by its weight's DMA; the convolution before it
    leaves idle DMA time for 60% of the weight's transfer (its cycles less twice
    its DMA time): the weight is fetched, the rest of it issued before the
    linear layer. With 30% it is not. Before :data:`prefetch.COVER`, a weight
    was fetched only when the idle time covered all of it."""
    from schedules.accel.layers import per_statement, split

    spec = load_config("edge-npu")
    kernel, _ = per_statement(_kernel())
    layers = split(kernel)
    assert len(layers) == 2
    w = _weight(kernel)
    t = spec.dma.setup_cycles + kernel.arrays[w].nbytes() / prefetch.load_rate(spec)
    reader = _Cand(t + 100, dma=t + 100, mac=200.0)
    for share, fetched in ((0.6, True), (0.3, False)):
        conv = _Cand(1000 + share * t, dma=500.0, mac=1000 + share * t)
        picked, saving = prefetch._pick(kernel, spec, layers, [conv, reader], 1 << 20)
        assert bool(picked) == fetched, (share, picked)
        if fetched:
            ((weight, chunks, _offset),) = picked
            assert weight == w and saving > 0
            first = layers[0].stmts[0].name
            # the idle part, then the rest, both before the only layer before it
            assert {c[0] for c in chunks} == {first}
            assert sum(c[1] for c in chunks) == prefetches.rows(kernel.arrays[w])


def test_a_weight_fetched_into_a_slow_bank_is_charged_that_bank_s_rate(monkeypatch):
    """edge-npu with its SRAM as 32 banks of 32 KiB at 4 B/cycle in all (an
    eighth of a byte per cycle a bank), every weight fetched ahead (the
    fuzzer's margin below zero): the 300-byte input fetched into a home
    within one bank took 2,401 cycles, and the first layer waits for it. The
    model charged a chunk DRAM's and the channel's rate (151 cycles): the
    program was predicted 553 cycles for 7,927 simulated (fuzz seed 964 case
    285, 0.12 on its random hardware). A chunk now moves at most at the rate
    of the home's banks it covers."""
    import tomllib

    from accelerator.hardware.config import CONFIG_DIR, from_dict
    from polyc.studies import fuzz
    from polyc.studies.fuzz.build import through_compute

    monkeypatch.setenv(prefetch.MARGIN_ENV, "-1")
    with open(CONFIG_DIR / "edge-npu.toml", "rb") as f:
        d = tomllib.load(f)
    d["name"] = "edge-npu-slow-banks"
    d["memory"][1].update(banks=32, bytes_per_cycle=4.0)
    spec = from_dict(d)
    layers = (
        {"op": "act", "fn": "leaky"},
        {"op": "head", "out": 2, "bias": True},
        {"op": "ln"},
        {"op": "cat", "other": 2},
        {"op": "reshape", "f": 2},
    )
    program = fuzz.Program("cnn", "float32", (1, 3, 5, 5), layers)
    kernel, inputs = through_compute(program, 964)
    compiled = polyc.compile(kernel, config=spec)
    out, report = compiled.run(**inputs)
    for name, want in interpret(kernel, inputs).items():
        np.testing.assert_allclose(out[name], want, rtol=1e-5, atol=1e-5)
    notes = [lc.note for lc in compiled.choice.layers if lc.note.startswith("prefetch")]
    assert any(n.startswith("prefetch: x (300 bytes)") for n in notes), notes
    predicted = compiled.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= 0.1, (predicted, report.cycles)
