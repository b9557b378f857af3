"""polyc.compile: generated C on the simulator, DRAM-direct, against the interpreter.

DRAM-direct is what ``polyc.compile(kernel, config, schedule=kernel)`` builds (the
kernel as it is, nothing placed); without ``schedule`` the accelerator scheduler
places the kernel (tests/test_placement*.py).

Expected cycle counts are written from the tiny config: a statement instance costs
the scalar core 1 cycle, plus its operations (1 cycle per add/mul), plus one DRAM
latency (20) when it reads, plus its DRAM bytes at 8 B/cycle (rounded up).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import polyc
from codegen.accel.direct import SimEmitter, build
from polyc import compute as pc
from polyc.errors import ArgumentError, ConfigError, SimulationError


def matmul(m, n, k, dtype="float32"):
    A = pc.placeholder("A", (m, k), dtype)
    B = pc.placeholder("B", (k, n), dtype)
    r = pc.reduce_axis(k, "k")
    acc = "int32" if dtype == "int8" else dtype
    C = pc.compute(
        "C", (m, n), lambda i, j: pc.sum(A[i, r].astype(acc) * B[r, j].astype(acc), r)
    )
    return pc.kernel(f"mm_{dtype}", outputs=[C])


@pytest.fixture(scope="module")
def mm():
    return matmul(8, 6, 5)


@pytest.fixture(scope="module")
def mm_compiled(mm):
    return polyc.compile(mm, config="tiny", schedule=mm)


def inputs(kernel, rng):
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape({})
        if a.dtype.is_float:
            out[a.name] = rng.standard_normal(shape).astype(a.dtype.numpy)
        else:
            out[a.name] = rng.integers(-128, 128, size=shape).astype(a.dtype.numpy)
    return out


def test_matmul_equals_interpreter_and_costs_what_the_model_says(mm, mm_compiled, rng):
    x = inputs(mm, rng)
    out, report = mm_compiled.run(**x)
    want = polyc.interpret(mm, x)["C"]
    np.testing.assert_allclose(out["C"], want, rtol=1e-6)
    m, n, k = 8, 6, 5
    init = 1 + math.ceil(4 / 8)  # S0: C[i, j] = 0 writes 4 bytes
    update = 1 + 1 + 1 + 20 + math.ceil(16 / 8)  # S1: 3 reads + 1 write of 4 bytes
    assert [
        (s.name, s.instances, s.cycles_per_instance) for s in report.statements
    ] == [
        ("S0", m * n, init),
        ("S1", m * n * k, update),
    ]
    assert report.cycles == m * n * init + m * n * k * update
    assert report.mode == "DRAM-direct"
    assert report.macs == m * n * k and report.mac_array_macs == 0
    assert report.dram_bytes == m * n * 4 + m * n * k * 16
    assert report.level("dram").bytes_read == m * n * k * 12
    # roofline: MACs over the 4x4 fp32 array, unavoidable bytes A, B in and C out
    min_bytes = (m * k + k * n + m * n) * 4
    assert report.roofline.min_dram_bytes == min_bytes
    assert report.roofline_cycles == math.ceil(max(m * n * k / 16, min_bytes / 8))
    assert report.ratio == report.cycles / report.roofline_cycles
    pj = 2 * m * n * k * 4.6 + report.dram_bytes * 160.0
    assert report.energy_pj == pytest.approx(pj)
    assert report.engine("scalar").busy == report.cycles
    assert report.engine("mac_array").idle == report.cycles


def test_statement_breakdown_adds_up_to_the_totals(mm, mm_compiled, rng):
    """Per statement: cycles, bytes per level and energy, summing to the report's."""
    _, report = mm_compiled.run(**inputs(mm, rng))
    m, n, k = 8, 6, 5
    s0, s1 = report.statements
    assert (s0.bytes_read[0], s0.bytes_written[0]) == (0, m * n * 4)
    assert (s1.bytes_read[0], s1.bytes_written[0]) == (m * n * k * 12, m * n * k * 4)
    assert s1.energy_pj == pytest.approx(2 * m * n * k * 4.6 + m * n * k * 16 * 160.0)
    assert sum(s.cycles for s in report.statements) == report.cycles
    for lv, level in enumerate(report.levels):
        assert sum(s.bytes_read[lv] for s in report.statements) == level.bytes_read
        assert sum(s.bytes_written[lv] for s in report.statements) == (
            level.bytes_written
        )
    assert sum(s.energy_pj for s in report.statements) == pytest.approx(
        report.energy_pj
    )


@pytest.mark.parametrize("config", ["edge-npu", "datacenter"])
def test_same_module_runs_on_every_config(mm, mm_compiled, rng, config):
    x = inputs(mm, rng)
    compiled = polyc.compile(mm, config=config, schedule=mm)
    assert compiled.module.built.path == mm_compiled.module.built.path  # one module
    out, report = compiled.run(x)
    np.testing.assert_array_equal(out["C"], mm_compiled(x)["C"])
    assert report.config == config
    spec = compiled.spec
    lat = spec.dram.latency_cycles
    update = (
        spec.scalar.statement_cycles
        + spec.scalar.cycles["add"]
        + spec.scalar.cycles["mul"]
        + lat
        + math.ceil(16 / spec.dram.bytes_per_cycle)
    )
    assert report.statements[1].cycles_per_instance == update


def test_int8_matmul_exact(rng):
    kern = matmul(5, 7, 9, "int8")
    x = inputs(kern, rng)
    out, report = polyc.compile(kern, config="edge-npu").run(**x)
    want = x["A"].astype(np.int32) @ x["B"].astype(np.int32)
    assert np.array_equal(out["C"], want)
    assert report.roofline.peak_macs_per_cycle == 256  # int8 on the 16x16 array


def test_elementwise_and_symbolic_sizes(rng):
    N = pc.param("N")
    X = pc.placeholder("X", (N, 4), "float32")
    Y = pc.compute("Y", (N, 4), lambda i, j: pc.exp(pc.maximum(X[i, j], 0.0)) / 2.0)
    kern = pc.kernel("act", outputs=[Y])
    compiled = polyc.compile(kern, config="tiny")
    x = rng.standard_normal((6, 4)).astype(np.float32)
    out, report = compiled.run(X=x)
    np.testing.assert_allclose(
        out["Y"], polyc.interpret(kern, {"X": x})["Y"], rtol=1e-6
    )
    # one compare, one transcendental, one divide per instance
    per = 1 + (1 + 20 + 8) + 20 + 1  # statement, ops (cmp, exp, div), latency, 8 bytes
    assert report.statements[0].cycles_per_instance == per
    assert report.cycles == 24 * per
    assert report.macs == 0
    assert report.roofline.bound == "memory"
    assert report.roofline.min_dram_bytes == 2 * 24 * 4
    out8, _ = compiled.run(X=np.ones((8, 4), np.float32))
    assert out8["Y"].shape == (8, 4)


def test_checks_compiled_out_give_the_same_run(mm, mm_compiled, rng):
    x = inputs(mm, rng)
    fast = polyc.compile(mm, config="tiny", schedule=mm, checks=False)
    assert fast.c_source == mm_compiled.c_source  # only the flags differ
    assert fast.module.built.path != mm_compiled.module.built.path
    out1, r1 = mm_compiled.run(**x)
    out2, r2 = fast.run(**x)
    assert np.array_equal(out1["C"], out2["C"])
    d1, d2 = r1.to_dict(), r2.to_dict()
    assert d1.pop("checks") and not d2.pop("checks")
    assert d1 == d2


def test_report_forms(mm_compiled, mm, rng):
    _, report = mm_compiled.run(**inputs(mm, rng))
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d
    for key in ("cycles", "roofline_cycles", "dram_bytes", "energy_pj", "ratio"):
        assert d[key] == getattr(report, key)
    text = str(report)
    assert f"{report.cycles:,}" in text
    for word in ("roofline", "scalar", "mac_array", "dma1", "dram", "l1", "S1"):
        assert word in text


def test_print_compiled(mm, rng):
    compiled = polyc.compile(mm, config="edge-npu", schedule=mm)
    before = str(compiled)
    assert "mm_float32 for edge-npu: 16x16 MAC array" in before
    assert "DRAM-direct" in before and "not run yet" in before
    _, report = compiled.run(**inputs(mm, rng))
    after = str(compiled)
    assert f"last run: {report.cycles:,} cycles" in after
    assert (
        "S1: C[i, j] = C[i, j] + A[i, k] * B[k, j]   [scalar, 105 cycles x 240]"
        in after
    )
    assert repr(compiled) == "<Compiled mm_float32 for edge-npu (DRAM-direct)>"


def test_trace_is_valid_trace_event_json(mm, mm_compiled, rng, tmp_path):
    _, report = mm_compiled.run(**inputs(mm, rng))
    path = report.write_trace(tmp_path / "trace.json")
    data = json.loads(path.read_text())
    check_trace_schema(data)
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in slices] == ["S0", "S1"]
    assert slices[1]["args"]["end_cycle"] == report.cycles
    names = {
        e["args"]["name"] for e in data["traceEvents"] if e["name"] == "thread_name"
    }
    assert names == {"scalar", "mac_array", "vector", "dma0", "dma1"}


def check_trace_schema(data):
    """The Chrome trace-event format, as Perfetto's JSON importer reads it."""
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    assert data.get("displayTimeUnit") in (None, "ms", "ns")
    for e in data["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["ph"] in ("X", "M")
        if e["ph"] == "X":
            assert set(e) <= {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e.get("args", {}), dict)
        else:
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index")
            assert isinstance(e["args"], dict)


def test_trace_is_bounded(mm, rng):
    compiled = polyc.compile(mm, config="tiny", schedule=mm, trace_limit=1)
    _, report = compiled.run(**inputs(mm, rng))
    assert len(report.events) == 1 and report.events_dropped == 1
    assert "1 dropped" in str(report)


# errors ----------------------------------------------------------------------------


class _OffByOne(SimEmitter):
    """A broken emitter (as a buggy placement would be): reads row i + 1 of A."""

    def statement(self, stmt, args):
        if stmt.name == "S1":
            args = {**args, "i": f"({args['i']} + 1)"}
        return super().statement(stmt, args)


def test_out_of_bounds_access_in_generated_code_is_reported(mm, rng):
    module = build(mm, emitter=_OffByOne)
    with pytest.raises(
        SimulationError,
        match=r"mm_float32 on tiny: simulate: access C\[8, 0\] is outside buffer C "
        r"because its shape is \[8, 6\], at statement S1\[i=8, j=0, k=0\]",
    ):
        module.run(polyc.compile(mm, config="tiny").spec, inputs(mm, rng))


class _NoWait(SimEmitter):
    """Starts a DMA into C, then writes C on the scalar core without waiting."""

    wait = False

    def prologue(self):
        import cgen as c

        lines = [
            c.Line(
                "pc_dma(_pc_ctx, 0, 4, 1, (int64_t[]){8}, pc_b_C, 0, (int64_t[]){1}, "
                'pc_b_A, 0, (int64_t[]){1}, "early");'
            )
        ]
        if self.wait:
            lines.append(c.Line("pc_wait(_pc_ctx, pc_b_C);"))
        return lines + super().prologue()


class _Wait(_NoWait):
    wait = True


def test_scalar_access_to_a_busy_buffer_needs_a_wait(mm, rng):
    # the DMA of 8 floats is issued at 0 and ends at 1 + 4 + 32 / 8 + 20 = 29
    spec = polyc.compile(mm, config="tiny").spec
    with pytest.raises(
        SimulationError,
        match=r"statement S0 wrote buffer C on the scalar core from cycle 1 while an "
        r"asynchronous operation uses it until cycle 29, because no pc_wait",
    ):
        build(mm, emitter=_NoWait).run(spec, inputs(mm, rng))
    x = inputs(mm, rng)
    out, report = build(mm, emitter=_Wait).run(spec, x)
    np.testing.assert_allclose(out["C"], polyc.interpret(mm, x)["C"], rtol=1e-6)
    assert [e.kind for e in report.events[:2]] == ["dma", "wait"]
    assert report.events[1].end == 29 and report.events[2].start == 29


def test_compile_errors(mm):
    with pytest.raises(ConfigError, match=r"no hardware description 'gpu'"):
        polyc.compile(mm, config="gpu")
    other = matmul(4, 4, 4)
    with pytest.raises(
        ArgumentError,
        match=r"compile: schedule is kernel 'mm_float32', "
        r"not a schedule of 'mm_float32', because their statements differ",
    ):
        polyc.compile(mm, config="tiny", schedule=other)
    with pytest.raises(ArgumentError, match=r"compile: schedule is a str because"):
        polyc.compile(mm, config="tiny", schedule="S0")


def test_compile_takes_a_schedule_of_the_same_kernel(mm, rng):
    swapped = mm.with_schedule(mm.schedule)  # a (trivially) rescheduled kernel
    compiled = polyc.compile(mm, config="tiny", schedule=swapped)
    assert compiled.kernel is swapped
    x = inputs(mm, rng)
    np.testing.assert_allclose(compiled(x)["C"], polyc.interpret(mm, x)["C"], rtol=1e-6)


def test_missing_input_is_an_input_error(mm_compiled):
    with pytest.raises(polyc.InputError, match=r"missing input\(s\) B"):
        mm_compiled.run(A=np.zeros((8, 5), np.float32))


def _library_cases():
    from polyc import ops
    from polyc.ops import polybench as ex

    return [
        ("conv2d int8 strided padded", ops.conv2d((1, 3, 7, 7), (4, 3, 3, 3), padding=1,
                                                  stride=2, dtype="int8"), {}),
        ("softmax", ops.softmax((3, 10)), {}),
        ("layer_norm", ops.layer_norm((3, 8), (8,)), {}),
        ("jacobi2d (inout, time loop)", ex.jacobi2d(None, None, "float64"), {"T": 3}),
        ("lu (inout, triangular)", ex.lu_right_looking(), {}),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(5))
def test_library_and_program_kernels_equal_the_interpreter(case, rng):
    name, kern, params = _library_cases()[case]
    x = inputs(kern, rng) if not kern.params else _program_inputs(kern, rng)
    want = polyc.interpret(kern, {k: v.copy() for k, v in x.items()}, **params)
    out, report = polyc.compile(kern, config="tiny", schedule=kern).run(**x, **params)
    for k, v in want.items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6, atol=1e-6, err_msg=name)
    assert report.cycles == sum(s.instances * s.cycles_per_instance
                                for s in report.statements)  # fmt: skip
    assert report.roofline.min_dram_bytes > 0


def _program_inputs(kern, rng):
    n = 6
    return {
        a.name: (rng.random((n, n)) + n * np.eye(n)).astype(a.dtype.numpy)
        for a in kern.free_inputs
    }


def test_a_simulator_kernel_compiles_at_the_simulator_kernel_flags(monkeypatch, rng):
    """Without ``$POLYC_OPT`` a kernel for the simulator compiles at
    ``SIM_SCALAR_KERNEL_OPT`` when it runs statements on the scalar core (this
    one, unscheduled, runs them all there), else ``SIM_KERNEL_OPT`` (its hot
    work is in the runtime library, which keeps the default -O3); host kernels
    keep the default."""
    from accelerator.hardware.config import load_config
    from codegen import build as cbuild
    from codegen.accel import direct

    rt = direct.build_runtime()  # the suite's runtime, before POLYC_OPT goes
    monkeypatch.delenv("POLYC_OPT", raising=False)
    assert cbuild.opt_flags() == tuple(cbuild.DEFAULT_OPT.split())
    k = polyc.ops.kernels.matmul(4, 4, 4, dtype="int8")
    module = build(k)
    flags = ("-O1", *cbuild.BASE_FLAGS, *direct.FLAGS)
    name = cbuild.module_name(
        k.name, module.source.text, module.source.cdef, flags, (str(rt.path),), {}
    )
    assert cbuild.SIM_SCALAR_KERNEL_OPT == "-O1"
    assert module.built.path.name.startswith(name + ".")
    x = {
        a.name: rng.integers(-4, 4, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in k.free_inputs
    }
    out, _ = module.run(load_config("tiny"), x)
    assert np.array_equal(out["out"], polyc.interpret(k, x)["out"])


def test_a_kernel_without_scalar_statements_compiles_at_the_kernel_flags():
    """A placed kernel whose statements all run on the MAC array or the vector
    unit compiles at ``SIM_KERNEL_OPT``; one with statements on the scalar core
    (symbolic sizes: the whole kernel runs DRAM-direct) keeps
    ``SIM_SCALAR_KERNEL_OPT``: its loops are the simulation's own work."""
    from accelerator.hardware.config import load_config
    from codegen import build as cbuild
    from codegen.accel import direct, placed
    from polyc.ops import polybench
    from schedules.accel.scheduler import schedule

    k = polyc.ops.kernels.matmul(4, 4, 4, dtype="int8")
    source, mode = placed.generate(schedule(k, load_config("tiny")).kernel)
    assert mode == "placed"
    assert direct.kernel_opt(source.text) == cbuild.SIM_KERNEL_OPT == "-Og"
    source, mode = placed.generate(polybench.matmul(None))
    assert mode == "DRAM-direct"
    assert direct.kernel_opt(source.text) == cbuild.SIM_SCALAR_KERNEL_OPT
