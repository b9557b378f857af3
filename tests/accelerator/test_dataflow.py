"""The MAC array's timing by dataflow, in closed form.

Every case drives ``pc_mac`` through the runtime's bindings on operands already in
SRAM (no DMA), and checks the simulator's MAC cycles against the formula written
out here, which is SCALE-Sim's per-fold compute model without double buffering
(``2R + C + T - 2`` per fold for weight- and input-stationary, ``R + C + T - 2`` for
output-stationary; SCALE-Sim reports one less, the 0-based index of its last
cycle), and against :func:`accelerator.hardware.dataflow.mac_timing`, the cost
model's term, numerically and symbolically.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import sympy as sp

from accelerator.hardware.config import from_dict, load_config
from accelerator.hardware.dataflow import mac_timing
from accelerator.hardware.spec import DATAFLOWS
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc.errors import ConfigError
from tests.accelerator.test_timing import tiny_with

ISSUE = 1  # tiny: the scalar core spends one cycle to issue a command
WS, OS, IS = DATAFLOWS


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


def array_spec(rows, cols, dataflow, double, rate=1.0, dtype="float32"):
    """tiny with a ``rows x cols`` array of ``dataflow`` (and a big enough L1)."""
    return tiny_with(
        mac_array__rows=rows,
        mac_array__cols=cols,
        mac_array__dataflow=dataflow,
        mac_array__double_buffered=double,
        memory__1__capacity_bytes=1 << 20,
        memory__1__bytes_per_cycle=1 << 16,  # no bank limits the array here
        **{f"mac_array__dtypes__{dtype}__macs_per_cycle": rate},
    )


def scalesim(dataflow, R, C, m, n, k, rate=1.0):
    """SCALE-Sim's compute cycles of one GEMM (its ``Total Cycles``, no stalls)."""
    if dataflow == WS:
        return (
            math.ceil(k / R) * math.ceil(n / C) * (2 * R + C + math.ceil(m / rate) - 2)
            - 1
        )
    if dataflow == OS:
        return (
            math.ceil(m / R) * math.ceil(n / C) * (R + C + math.ceil(k / rate) - 2) - 1
        )
    return (
        math.ceil(k / R) * math.ceil(m / C) * (2 * R + C + math.ceil(n / rate) - 2) - 1
    )


def run_calls(rt, spec, calls, dtype="float32", same_c=False):
    """Issue MAC calls ``(m, n, k)`` back to back on operands in L1; returns the
    report. Each call has its own A, B and C (or all accumulate into one C)."""
    sim = Simulator(rt, spec)
    es = np.dtype(dtype).itemsize
    off = 0

    def buf(nbytes, name):
        nonlocal off
        b = sim.alloc("l1", off, nbytes, name)
        off += -(-nbytes // 64) * 64
        return b

    shared = None
    for i, (m, n, k) in enumerate(calls):
        a = buf(m * k * es, f"a{i}")
        b = buf(k * n * es, f"b{i}")
        if same_c and shared is None:
            shared = buf(m * n * 4, "c")
        c = shared if same_c else buf(m * n * 4, f"c{i}")
        sim.mac(
            m,
            n,
            k,
            (a, 0, k, 1),
            (b, 0, n, 1),
            (c, 0, n, 1),
            dtype=dtype,
            accumulate=same_c and i > 0,
        )
    return sim.finish()


SHAPES = [
    (4, 4, 4),  # one fold on 4x4
    (16, 4, 4),  # one fold, long stream for ws
    (10, 6, 7),  # partial folds on every dataflow
    (9, 16, 12),  # multi-fold
    (3, 2, 1),  # everything smaller than the array
]


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_one_call_without_double_buffering_is_scalesim_plus_one(rt, dataflow, m, n, k):
    spec = array_spec(4, 4, dataflow, False)
    report = run_calls(rt, spec, [(m, n, k)])
    mac = report.engine("mac_array").busy
    assert mac == scalesim(dataflow, 4, 4, m, n, k) + 1
    assert report.cycles == ISSUE + mac
    t = mac_timing(spec.mac_array, m, n, k, 1.0)
    assert (t.steady, t.first, t.tail) == (mac, 0, 0)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_non_square_array_and_the_gemm_of_the_peers(rt, dataflow):
    """GEMM 100 x 40 x 50 on 32 x 32: SCALE-Sim 3.0.0 ran it to ws 775, os 895,
    is 1,071 cycles (/work notes of the fidelity study); a 8 x 4 array exercises
    R != C."""
    assert (
        scalesim(dataflow, 32, 32, 100, 40, 50)
        == {WS: 775, OS: 895, IS: 1071}[dataflow]
    )
    for rows, cols in ((32, 32), (8, 4)):
        spec = array_spec(rows, cols, dataflow, False)
        report = run_calls(rt, spec, [(100, 40, 50)])
        expect = scalesim(dataflow, rows, cols, 100, 40, 50) + 1
        assert report.engine("mac_array").busy == expect


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_one_call_double_buffered(rt, dataflow, m, n, k):
    """Folds start every max(stream, R) cycles; the results come skew cycles after
    the array frees."""
    R = C = 4
    spec = array_spec(R, C, dataflow, True)
    report = run_calls(rt, spec, [(m, n, k)])
    folds, stream = {
        WS: (math.ceil(k / R) * math.ceil(n / C), m),
        OS: (math.ceil(m / R) * math.ceil(n / C), k),
        IS: (math.ceil(k / R) * math.ceil(m / C), n),
    }[dataflow]
    load = 0 if dataflow == OS else R
    busy = load + (folds - 1) * max(stream, R) + stream
    assert report.engine("mac_array").busy == busy
    assert report.cycles == ISSUE + busy + (R + C - 2)
    if folds == 1:  # one fold: double buffering changes nothing
        assert busy + R + C - 2 == scalesim(dataflow, R, C, m, n, k) + 1
    t = mac_timing(spec.mac_array, m, n, k, 1.0)
    assert (t.steady + t.first, t.tail) == (busy, R + C - 2)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("same_c", [False, True])
def test_consecutive_calls(rt, dataflow, double, same_c):
    """Six calls back to back (independent, or accumulating into one C): without
    double buffering each pays its whole time; with it, the array is busy
    folds x max(stream, R) per call after the first one's load, and only the last
    call's skew shows."""
    R = C = 4
    m, n, k = 6, 8, 8
    spec = array_spec(R, C, dataflow, double)
    report = run_calls(rt, spec, [(m, n, k)] * 6, same_c=same_c)
    t = mac_timing(spec.mac_array, m, n, k, 1.0)
    assert report.engine("mac_array").busy == 6 * t.steady + t.first
    assert report.cycles == ISSUE + 6 * t.steady + t.first + t.tail
    if not double:
        assert t.steady == scalesim(dataflow, R, C, m, n, k) + 1
    else:
        folds = {WS: 4, OS: 4, IS: 4}[dataflow]
        stream = {WS: m, OS: k, IS: n}[dataflow]
        assert t.steady == folds * max(stream, R)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("double", [False, True])
def test_fp32_at_a_quarter_rate_stretches_the_stream(rt, dataflow, double):
    R = C = 4
    m, n, k = 9, 6, 7
    spec = array_spec(R, C, dataflow, double, rate=0.25)
    report = run_calls(rt, spec, [(m, n, k)])
    stream = {WS: m, OS: k, IS: n}[dataflow] * 4
    if not double:
        assert (
            report.engine("mac_array").busy
            == scalesim(dataflow, R, C, m, n, k, rate=0.25) + 1
        )
    t = mac_timing(spec.mac_array, m, n, k, sp.Rational(1, 4))
    assert t.stream == stream
    assert report.engine("mac_array").busy == t.steady + t.first
    assert report.cycles == ISSUE + t.alone


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_partial_fold_costs_a_whole_fold(rt, dataflow):
    """A reduction of 1 on a 4-row array takes as long as one of 4."""
    spec = array_spec(4, 4, dataflow, False)
    short = run_calls(rt, spec, [(4, 4, 1)]).engine("mac_array").busy
    full = run_calls(rt, spec, [(4, 4, 4)]).engine("mac_array").busy
    if dataflow == OS:  # os streams k: a short K is a short stream, not a fold
        assert full - short == 3
    else:
        assert short == full


def test_symbolic_term_equals_the_numeric_one():
    """The cost model evaluates the same function over tile symbols."""
    m, n, k = sp.symbols("m n k", positive=True, integer=True)
    for dataflow in DATAFLOWS:
        for double in (False, True):
            a = dataclasses.replace(
                load_config("edge-npu").mac_array,
                dataflow=dataflow,
                double_buffered=double,
            )
            sym = mac_timing(a, m, n, k, sp.Rational(1, 2), sp.ceiling, sp.Max)
            for point in [(1, 1, 1), (33, 7, 16), (16, 40, 100)]:
                num = mac_timing(a, *point, 0.5)
                env = dict(zip((m, n, k), point))
                for f in ("steady", "first", "tail"):
                    assert sp.sympify(getattr(sym, f)).subs(env) == getattr(num, f)


def test_dataflow_is_checked_and_defaults_to_weight_stationary():
    data = _tiny_dict()
    del data["mac_array"]["dataflow"], data["mac_array"]["double_buffered"]
    a = from_dict(data).mac_array
    assert (a.dataflow, a.double_buffered) == (WS, True)
    data["mac_array"]["dataflow"] = "row_stationary"
    msg = "key mac_array.dataflow is 'row_stationary' because it must be one of"
    with pytest.raises(ConfigError, match=re.escape(msg)):
        from_dict(data)
    data = _tiny_dict()
    data["mac_array"]["double_buffered"] = 1
    with pytest.raises(ConfigError, match="double_buffered is 1 because it must be"):
        from_dict(data)


def test_fill_drain_cycles_is_refused_with_the_reason():
    data = _tiny_dict()
    data["mac_array"]["fill_drain_cycles"] = 8
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "key mac_array.fill_drain_cycles is no longer read because the array's "
            "fill, skew and drain follow from rows, cols and mac_array.dataflow"
        ),
    ):
        from_dict(data)


def test_every_shipped_config_states_its_dataflow():
    """A default is for dict-built test configs; a shipped one says what it models
    (with a source comment on the line)."""
    from accelerator.hardware.config import CONFIG_DIR, CONFIGS

    for name in CONFIGS:
        text = (CONFIG_DIR / f"{name}.toml").read_text()
        for key in ("dataflow", "double_buffered"):
            line = next(
                (ln for ln in text.splitlines() if ln.startswith(f"{key} =")), None
            )
            assert line is not None, (name, key)
            assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, line


def _tiny_dict():
    import tomllib

    from accelerator.hardware.config import CONFIG_DIR

    with open(CONFIG_DIR / "tiny.toml", "rb") as f:
        return tomllib.load(f)
