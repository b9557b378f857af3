"""polyc.sweep: a small grid through the local pool and through a real Dask
LocalCluster (identical records), failures recorded per point, crashes survived,
errors at the call, results as JSON/CSV/table."""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import types
import zlib

import numpy as np
import pytest

import polyc
from polyc import compute as pc
from polyc.studies.executors import Progress, units
from polyc.studies.sweep.result import SweepResult
from polyc.studies.sweep.spec import format_value, op_spec, parse_op, parse_value
from polyc.studies.sweep.task import make_inputs

OPS = {
    "mm": "matmul:M=8,N=8,K=8",
    "relu": ("relu", {"input": (8, 8)}),
    "bad": "conv2d:input=1x4x6x6,weight=8x3x3x3",  # channel mismatch: ShapeError
}
SCHEDULES = ["none", "default"]
CONFIGS = ["tiny", "edge-npu"]


def _grid():
    return polyc.sweep.grid(OPS, SCHEDULES, CONFIGS)


def _deterministic(records):
    """Records without host timings (the only field that varies between runs)."""
    return [{k: v for k, v in r.items() if k != "timing"} for r in records]


@pytest.fixture(scope="module")
def result():
    """The grid run in this process (cheap; the pool and Dask runs are checked
    against each other in one test so that each runs once)."""
    return polyc.sweep(_grid(), jobs=1, progress=False)


def test_grid_through_pool_and_dask_gives_identical_records(result):
    distributed = pytest.importorskip("distributed")
    dask_config = pytest.importorskip("dask.config")
    stream = io.StringIO()
    pooled = polyc.sweep(_grid(), jobs=2, progress=stream)
    points = _grid()
    assert len(pooled) == len(points) == 12
    for i, (p, r) in enumerate(zip(points, pooled.records)):
        assert r["index"] == i
        assert (r["label"], r["schedule"], r["config"]) == (
            p.label,
            p.schedule,
            p.config,
        )
    assert [r["status"] for r in pooled.records] == ["ok"] * 8 + ["failed"] * 4
    progress = stream.getvalue()
    assert "polyc sweep: 12 points on a local pool of 2 processes" in progress
    assert "point 8 (bad, none, tiny) failed: ShapeError" in progress
    last = progress.rstrip().splitlines()[-1]
    assert re.fullmatch(r"polyc sweep: 12 points in [\d.]+ s: 8 ok, 4 failed", last)
    assert _deterministic(pooled.records) == _deterministic(result.records)

    # Dask's 30 s connect timeout only guards against a hang; a loaded machine
    # (workers starting while other jobs hold both cores) gets more room
    timeouts = {"distributed.comm.timeouts.connect": "300s"}
    with (
        dask_config.set(timeouts),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
    ):
        on_dask = polyc.sweep(_grid(), cluster=cluster, progress=False)
        assert on_dask.meta["executor"] == f"Dask cluster {cluster.scheduler_address}"
    assert _deterministic(on_dask.records) == _deterministic(pooled.records)


def test_numbers_are_those_of_a_direct_run(result):
    record = result.where(label="mm", schedule="none", config="tiny")[0]
    kernel = polyc.ops.matmul(8, 8, 8)
    inputs = make_inputs(kernel, "random", seed=0)
    _, report = polyc.compile(kernel, config="tiny", schedule=kernel).run(inputs)
    assert record["report"]["cycles"] == report.cycles > 0
    assert record["report"]["roofline_cycles"] == report.roofline_cycles
    assert record["report"]["energy"] == report.energy
    assert record["kernel"] == "matmul"
    row = result.rows()[record["index"]]
    assert row["macs"] == 8 * 8 * 8
    assert row["intensity"] == pytest.approx(512 / report.dram_bytes)
    assert row["macs_per_cycle"] == pytest.approx(512 / report.cycles)


def test_points_run_timing_only_and_a_spread_sample_functionally(result):
    ok = result.ok
    assert result.meta["simulated"] == "timing-only"
    # 4 of the 12 points, spread by index: 0, 4 (7.33 -> 7), 11
    sample = {0, 4, 7, 11}
    assert result.meta["functional_sample"] == len(sample)
    for r in result.records:
        if r["status"] != "ok":
            continue
        expected = "timing-only"
        if r["index"] in sample:
            expected = "timing-only, verified functionally"
            assert r["timing"]["functional_s"] > 0
        assert r["simulated"] == expected
    assert len(ok) == 8


def test_a_functional_study_equals_the_timing_only_one(result):
    functional = polyc.sweep(_grid(), jobs=1, progress=False, timing_only=False)
    assert functional.meta["functional_sample"] == 12
    assert all(r["simulated"] == "functional" for r in functional.ok)
    for a, b in zip(result.records, functional.records):
        assert a["report"] == b["report"]
    assert polyc.sweep.spread(12, 4) == {0, 4, 7, 11}
    assert polyc.sweep.spread(3, 4) == {0, 1, 2}
    assert polyc.sweep.spread(12, 1) == {0} and polyc.sweep.spread(12, 0) == set()


def test_failing_point_is_recorded_not_fatal(result):
    bad = result.where(label="bad")
    assert len(bad) == 4 and len(result.failed) == 4 and len(result.ok) == 8
    for r in bad:
        assert r["status"] == "failed" and r["report"] is None
        assert r["error_type"] == "ShapeError"
        assert "weight weight expects 3" in r["error"]


def test_crashing_point_is_recorded_and_the_rest_run():
    def crash(kernel):
        os.kill(os.getpid(), signal.SIGKILL)

    points = [
        ("matmul:M=4,N=4,K=4", "none", "tiny"),
        ("relu:input=4x4", ("crash", crash), "tiny"),
        ("relu:input=4x4", "none", "tiny"),
    ]
    result = polyc.sweep(points, jobs=2, progress=False)
    assert [r["status"] for r in result] == ["ok", "failed", "ok"]
    dead = result[1]
    assert dead["error_type"] == "WorkerDied" and dead["schedule"] == "crash"
    assert "ended by signal SIGKILL" in dead["error"]


def test_inline_run_with_check_and_schedule_function():
    def returns_nothing(kernel):
        return None

    points = polyc.sweep.grid(
        {"mm": "matmul:M=6,N=5,K=4"},
        {"plain": "none", "broken": returns_nothing},
        ["tiny"],
    )
    result = polyc.sweep(points, jobs=1, progress=False, check=True)
    ok, broken = result.records
    assert ok["status"] == "ok" and ok["max_abs_error"] < 1e-5
    assert "check_s" in ok["timing"]
    assert broken["status"] == "failed" and broken["error_type"] == "ArgumentError"
    assert "schedule function broken returned a NoneType" in broken["error"]
    assert result.meta["executor"] == "this process"


def test_symbolic_kernel_needs_an_inputs_function():
    kernel = polyc.ops.matmul(pc.param("N"), 4, 4)
    [failed] = polyc.sweep([(kernel, "none", "tiny")], jobs=1, progress=False)
    assert failed["error_type"] == "ArgumentError"
    assert "has symbolic sizes (N)" in failed["error"]

    def inputs(k):
        return {"A": np.ones((3, 4), np.float32), "B": np.ones((4, 4), np.float32)}

    [ok] = polyc.sweep([(kernel, "none", "tiny", "sym")], jobs=1, inputs=inputs)
    assert ok["status"] == "ok" and ok["report"]["macs"] == 3 * 4 * 4
    assert ok["label"] == "sym"


def test_auto_schedule_runs_or_says_it_is_missing():
    import schedules

    if hasattr(schedules, "auto"):
        [r] = polyc.sweep([("matmul:M=8,N=8,K=8", "auto", "tiny")], jobs=1)
        assert r["status"] == "ok", r["error"]
        assert r["schedule"] == "auto"
    else:
        with pytest.raises(polyc.ArgumentError, match="schedules package has no auto"):
            polyc.sweep([("matmul:M=8,N=8,K=8", "auto", "tiny")], jobs=1)


# errors at the call -------------------------------------------------------------


@pytest.mark.parametrize(
    ("points", "kwargs", "error", "message"),
    [
        ([], {}, polyc.ArgumentError, "no points to run because the list"),
        (
            [("matmull:M=4", "none", "tiny")],
            {},
            polyc.ArgumentError,
            "unknown op 'matmull'.*Did you mean 'matmul'",
        ),
        (
            [("matmul:M=4,N=4,K=4", "atuo", "tiny")],
            {},
            polyc.ArgumentError,
            "schedule 'atuo' is not known because it is none of none, default, energy, edp, auto",
        ),
        (
            [("matmul:M=4,N=4,K=4", "missing.yaml", "tiny")],
            {},
            polyc.ArgumentError,
            "schedule file 'missing.yaml' cannot be read because it does not exist",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tinyy")],
            {},
            polyc.ConfigError,
            "no hardware description 'tinyy'",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none")],
            {},
            polyc.ArgumentError,
            r"point 0 is .* because it is neither a Point nor a tuple",
        ),
        ([(3.5, "none", "tiny")], {}, polyc.ArgumentError, "op 3.5 is a float"),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"inputs": "ones"},
            polyc.ArgumentError,
            "inputs='ones' is not an input mode",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"jobs": 2, "cluster": "tcp://127.0.0.1:9"},
            polyc.ArgumentError,
            "jobs and cluster were both given",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"jobs": 0},
            polyc.ArgumentError,
            "jobs=0 is not a number of processes",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"cluster": 42},
            polyc.ArgumentError,
            "cluster=42 is not a Dask cluster because it is a int",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"functional_sample": -1},
            polyc.ArgumentError,
            "functional_sample=-1 is not a number of points",
        ),
        (
            [("matmul:M=4,N=4,K=4", "none", "tiny")],
            {"progress": 3},
            polyc.ArgumentError,
            "progress=3 is not a progress option",
        ),
    ],
)
def test_errors_at_the_call(points, kwargs, error, message):
    with pytest.raises(error, match=message):
        polyc.sweep(points, **kwargs)


def test_unreachable_cluster_is_a_sweep_error():
    dask = pytest.importorskip("dask")
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "0.5s"}),
        pytest.raises(polyc.SweepError, match="cannot reach the Dask scheduler at"),
    ):
        polyc.sweep([("relu:input=4x4", "none", "tiny")], cluster="tcp://127.0.0.1:9")


# op specs -------------------------------------------------------------------------


def test_op_text_round_trips():
    label, name, args, kwargs = parse_op(
        "c1=conv2d:input=1x3x8x8,weight=4x3x3x3,bias=false,stride=(2, 2),dtype=int8"
    )
    assert (label, name, args) == ("c1", "conv2d", ())
    assert kwargs == {
        "input": (1, 3, 8, 8),
        "weight": (4, 3, 3, 3),
        "bias": False,
        "stride": (2, 2),
        "dtype": "int8",
    }
    _, spec = op_spec(("conv2d", kwargs))
    assert spec.text == (
        "conv2d:input=1x3x8x8,weight=4x3x3x3,bias=false,stride=2x2,dtype=int8"
    )
    assert op_spec(spec.text)[1] == spec
    assert parse_op("matmul:16,8,4")[2] == (16, 8, 4)
    for value in [(5,), 1.5, None, True, "float16", (1, (2, 3))]:
        assert parse_value(format_value(value)) == value
    assert op_spec(("matmul", (2, 3, 4)))[1].build().arrays["A"].shape[0].const == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("matmul:M=4,8", "positional argument '8' after a keyword argument"),
        (":M=4", "has no op name because it does not start with an identifier"),
    ],
)
def test_op_text_errors(text, message):
    with pytest.raises(polyc.ArgumentError, match=message):
        op_spec(text)


# results --------------------------------------------------------------------------


def test_json_round_trip_and_csv(result, tmp_path):
    again = SweepResult.from_json(result.to_json(tmp_path / "s.json"))
    assert again.records == json.loads(json.dumps(result.records))
    assert again.meta["points"] == 12
    with result.to_csv(tmp_path / "s.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    assert rows[0]["op"] == "matmul:M=8,N=8,K=8"
    assert int(rows[0]["cycles"]) == result[0]["report"]["cycles"]
    assert float(rows[0]["energy.dram"]) == result[0]["report"]["energy"]["dram"]
    assert rows[8]["status"] == "failed" and rows[8]["cycles"] == ""
    assert rows[8]["error_type"] == "ShapeError"


def test_table_lists_points_failures_and_summary(result):
    text = result.table()
    lines = text.splitlines()
    assert lines[0].startswith("polyc sweep: 12 points, 8 ok, 4 failed")
    header = lines[1].split()
    assert header[:4] == ["#", "layer", "schedule", "config"]
    first = lines[2].split()
    assert first[:4] == ["0", "mm", "none", "tiny"]
    assert first[4] == f"{result[0]['report']['cycles']:,}"
    assert "not ok:" in text and "#8 bad / none / tiny: ShapeError" in text
    same = result.where(schedule="none", config="tiny", status="ok")
    # the engine bound's ratio first (the headline), then the roofline's
    for key, what in (("engine_ratio", "engine bound"), ("ratio", "roofline")):
        at = text.index(f"cycles / {what}, geometric mean")
        summary = text[at:].splitlines()
        assert summary[1].split() == ["schedule", "tiny", "edge-npu"]
        ratios = [r["report"][key] for r in same]
        want = float(np.exp(np.mean(np.log(ratios))))
        assert summary[2].split()[1] == f"{want:,.2f}x"
    assert text.index("cycles / engine bound") < text.index("cycles / roofline")
    assert repr(result) == "<SweepResult 12 points: 8 ok, 4 failed>"


def test_units_group_shared_kernels_and_split_for_workers():
    tasks = polyc.sweep.resolve(polyc.sweep.grid(OPS, SCHEDULES, CONFIGS))
    grouped = units(tasks, workers=2)
    assert [[t.index for t in u] for u in grouped] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
        [8, 9],
        [10, 11],
    ]
    one = [t for t in tasks if t.op.text.startswith("matmul") and t.index < 2]
    assert [[t.index for t in u] for u in units(one, workers=4)] == [[0], [1]]


def test_progress_bar_on_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    # a stopped clock: the elapsed time printed is exactly 0.0 s, however long a
    # loaded machine takes between start() and finish()
    monkeypatch.setattr(
        "polyc.studies.executors.time", types.SimpleNamespace(monotonic=lambda: 1000.0)
    )

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    shown = Progress(2, "here", out)
    shown.start()
    shown.done({"status": "ok"})
    shown.finish()
    text = out.getvalue()
    assert "polyc sweep: 2 points on here" in text
    assert "\r[####################....................] 1/2" in text
    assert text.endswith("polyc sweep: 1 point in 0.0 s: 1 ok\n")


def test_import_polyc_loads_no_dask_or_matplotlib():
    code = (
        "import sys, polyc; s = polyc.sweep; import polyc.studies.sweep; "
        "assert callable(polyc.sweep) and polyc.sweep.grid; "
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('dask', 'distributed', 'matplotlib')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


_BLOCKED = """
import os, signal, sys, time
import polyc

def block(kernel):
    open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
    time.sleep(600)

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    points = [("relu:input=4x4", ("block", block), "tiny")] * 2
    polyc.sweep(points, jobs=2)
"""


def test_interrupted_sweep_stops_its_workers(tmp_path):
    script = tmp_path / "blocked.py"
    script.write_text(_BLOCKED)
    notes = tmp_path / "running"
    notes.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(notes)], stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(600):  # both workers are inside a point that never ends
            if len(list(notes.iterdir())) == 2 or proc.poll() is not None:
                break
            time.sleep(0.1)
        workers = [int(p.name) for p in notes.iterdir()]
        assert len(workers) == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert "KeyboardInterrupt" in err
    alive = [pid for pid in workers if _alive(pid)]
    for pid in alive:  # clean up before failing
        os.kill(pid, signal.SIGKILL)
    assert not alive, "workers still ran after the sweep was interrupted"


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs after a grace period of 60 s (a worker that was
    not stopped sleeps for 600 s; a loaded machine may take seconds to end one).
    A zombie (ended, not yet reaped by whoever inherited it) does not run."""
    for _ in range(600):
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    return False
        except ProcessLookupError:
            return False
        except OSError:  # no /proc: os.kill alone decides
            pass
        time.sleep(0.1)
    return True


def test_yaml_file_kernel_and_function_schedules(tmp_path):
    import schedules as S

    kernel = polyc.ops.matmul(8, 8, 8)
    tiled = S.tile(kernel, "S1", {"i": 4, "j": 4, "k": 4})
    path = tmp_path / "tiled4.yaml"
    path.write_text(S.to_yaml(tiled))
    choices = [
        "none",
        str(path),
        tiled,
        ("tile4", lambda k: S.tile(k, "S1", {"i": 4, "j": 4, "k": 4})),
    ]
    points = [(kernel, choice, "tiny") for choice in choices]
    result = polyc.sweep(points, jobs=1, progress=False, check=True)
    plain, *scheduled = result.records
    assert [r["schedule"] for r in scheduled] == ["tiled4", "tile", "tile4"]
    assert [r["status"] for r in result] == ["ok"] * 4
    inputs = make_inputs(kernel, "random", seed=zlib.crc32(b"matmul"))
    compiled = polyc.compile(kernel, config="tiny", schedule=tiled)
    _, report = compiled.run(inputs)
    # each choice compiled the tiled kernel (same C), not the plain one
    assert {r["compiled"] for r in scheduled} == {str(compiled)}
    assert plain["compiled"] != str(compiled)
    assert {r["report"]["cycles"] for r in scheduled} == {report.cycles}


def test_a_results_database_locked_while_another_process_makes_it_is_opened(
    tmp_path, monkeypatch
):
    """Two studies started together on a new database: the one that switches
    it to WAL while the other makes it can get "database is locked" at once,
    without SQLite's busy handler waiting (a CI run's killed-study test failed
    so: "cannot open the results database ... 'database is locked'"). The
    opening is tried again; another error still says what and why at once."""
    import sqlite3

    from polyc.errors import StoreError
    from polyc.studies.sweep import store

    real = sqlite3.connect
    failures = {"left": 2}

    class Racing:
        def __init__(self, con):
            self.con = con

        def execute(self, sql, *args):
            if "journal_mode" in sql and failures["left"]:
                failures["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.con.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.con, name)

    monkeypatch.setattr(store.sqlite3, "connect", lambda *a, **k: Racing(real(*a, **k)))
    with store.Store(tmp_path / "study.db", "s") as st:
        assert st.resume([]) == {}
    assert failures["left"] == 0

    def broken(*a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store.sqlite3, "connect", broken)
    with pytest.raises(StoreError, match="disk I/O error"):
        store.Store(tmp_path / "other.db", "s")
