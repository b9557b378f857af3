"""Co-design studies: hardware grids from the command line and Python, area and
power per point."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import polyc
from polyc.cli import main
from polyc.errors import ArgumentError, StoreError
from polyc.studies.sweep.result import SweepResult

MM = "matmul:M=8,N=8,K=8"


def test_bad_grid_on_the_command_line_exits_2_before_running(capsys):
    code = main(
        [
            "sweep",
            "--ops",
            MM,
            "--configs",
            "tiny:mac_array.rows=4,8;dma.channels=2,64",
            "--jobs",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(
        "polyc: vary: tiny grid point 1 (rows=4,channels=64) is not a valid "
        "hardware description: key dma.channels is 64 because it must be a "
        "positive integer of at most 32."
    )
    assert "Traceback" not in captured.err
    assert "polyc sweep:" not in captured.err  # no point ran
    assert main(["sweep", "--ops", MM, "--configs", "tiny:dma.chanels=1"]) == 2
    assert "key dma.chanels is unknown" in capsys.readouterr().err


def test_grid_sweep_records_area_power_and_edp():
    points = polyc.sweep.grid(
        {"mm": MM},
        ["default"],
        ["tiny:mac_array.rows=2,4;mac_array.cols=rows"],
        where="area_mm2<=10",
    )
    assert [p.config.name for p in points] == ["tiny[rows=2]", "tiny[rows=4]"]
    result = polyc.sweep(points, jobs=1, progress=False)
    rows = result.rows()
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        assert row["latency_s"] == pytest.approx(row["cycles"] * 1e-9)
        assert row["energy_j"] == pytest.approx(
            row["energy_pj"] * 1e-12 + row["leakage_energy_j"]
        )
        assert row["edp_js"] == pytest.approx(row["energy_j"] * row["latency_s"])
        assert row["power_w"] == pytest.approx(row["energy_j"] / row["latency_s"])
    # a quarter of the PEs: less area, and more cycles on the smaller array
    assert rows[0]["area_mm2"] < rows[1]["area_mm2"]
    assert rows[0]["cycles"] > rows[1]["cycles"]


# results in SQLite ---------------------------------------------------------------

STUDY_SCRIPT = """
import os, sys, time
from pathlib import Path
import polyc
from polyc.studies.sweep.task import make_inputs

BLOCK = os.environ.get("BLOCK_AT")
calls = 0


def inputs(kernel):
    global calls
    calls += 1
    if BLOCK and calls == int(BLOCK):
        # the point in flight when the test kills this process: it never ends
        Path(os.environ["BLOCKED"]).write_text("")
        while True:
            time.sleep(0.05)
    return make_inputs(kernel, "random", seed=0)


if __name__ == "__main__":
    points = polyc.sweep.grid(
        {"mm": "matmul:M=8,N=8,K=8"}, ["default"], ["tiny:dma.channels=1..6"]
    )
    polyc.sweep(points, jobs=1, inputs=inputs, progress=False, db=sys.argv[1],
                study=sys.argv[2])
"""


def _points_table(db, study):
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT idx, key, status, label, op, schedule, config, record FROM points "
        "WHERE study = ? ORDER BY idx",
        (study,),
    ).fetchall()
    con.close()
    out = []
    for *head, record in rows:
        record = json.loads(record)
        record.pop("timing")
        out.append((*head, record))
    return out


def _count(db, study) -> int:
    import sqlite3

    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
    try:
        (n,) = con.execute(
            "SELECT COUNT(*) FROM points WHERE study = ?", (study,)
        ).fetchone()
    except sqlite3.OperationalError:  # the tables are not made yet
        n = 0
    con.close()
    return n


def test_study_killed_with_sigkill_resumes_to_the_same_database(tmp_path):
    """Two studies write one database at once from two processes; one is killed
    with SIGKILL while its 4th point runs (3 committed), is read while it runs,
    then resumed: it runs only the 3 missing points and its rows equal those of
    the uninterrupted study."""
    script = tmp_path / "study.py"
    script.write_text(STUDY_SCRIPT)
    db = tmp_path / "study.db"
    blocked = tmp_path / "blocked"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    full = subprocess.Popen([sys.executable, str(script), str(db), "full"], env=env)
    killed = subprocess.Popen(
        [sys.executable, str(script), str(db), "killed"],
        env={**env, "BLOCK_AT": "4", "BLOCKED": str(blocked)},
    )
    try:
        # wait (no deadline: an event, not a clock) for the 4th point to start
        while not blocked.exists():
            assert killed.poll() is None, "the study ended before its 4th point"
            time.sleep(0.05)
        # read while both write: the three finished points are there already
        assert _count(db, "killed") == 3
        killed.send_signal(signal.SIGKILL)
        assert killed.wait() == -signal.SIGKILL
        assert full.wait() == 0
    finally:
        for proc in (full, killed):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert _count(db, "killed") == 3
    # resumed in this process: the three held points are not run again
    stream = io.StringIO()
    points = polyc.sweep.grid({"mm": MM}, ["default"], ["tiny:dma.channels=1..6"])
    from polyc.studies.sweep.task import make_inputs

    result = polyc.sweep(
        points,
        jobs=1,
        inputs=lambda k: make_inputs(k, "random", seed=0),
        progress=stream,
        db=db,
        study="killed",
    )
    assert "6 points on this process" not in stream.getvalue()
    assert "3 points on this process (3 done before" in stream.getvalue()
    assert result.meta["resumed"] == 3 and len(result) == 6
    assert [r["index"] for r in result.records] == list(range(6))
    resumed, uninterrupted = _points_table(db, "killed"), _points_table(db, "full")
    assert len(resumed) == 6  # no duplicates, nothing lost but the point in flight
    assert resumed == uninterrupted
    # the database re-plots: both studies load, by name
    timing = ("kernel_s", "schedule_s", "compile_s", "run_s")
    loaded = [
        [{k: v for k, v in r.items() if k not in timing} for r in result.rows()]
        for result in (
            SweepResult.from_db(db, "full"),
            SweepResult.from_db(db, "killed"),
        )
    ]
    assert loaded[0] == loaded[1] and len(loaded[0]) == 6


def test_store_refuses_other_points_under_one_study_name(tmp_path):
    db = tmp_path / "s.db"
    polyc.sweep([(MM, "none", "tiny")], jobs=1, progress=False, db=db)
    with pytest.raises(StoreError, match=r"study 'sweep' in .* holds another point"):
        polyc.sweep([(MM, "none", "edge-npu")], jobs=1, progress=False, db=db)
    polyc.sweep([(MM, "none", "edge-npu")], jobs=1, progress=False, db=db, study="b")
    with pytest.raises(StoreError, match=r"holds 2 studies \(sweep, b\)"):
        SweepResult.from_db(db)
    assert SweepResult.from_db(db, "b")[0]["config"] == "edge-npu"
    (tmp_path / "x.db").write_text("not sqlite")
    with pytest.raises(StoreError, match="is not an SQLite file"):
        polyc.sweep(
            [(MM, "none", "tiny")], jobs=1, progress=False, db=tmp_path / "x.db"
        )
    with pytest.raises(StoreError, match="has no study 'c'"):
        SweepResult.from_db(db, "c")


def test_cli_writes_the_database_and_replots_from_it(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sweep", "--ops", MM, "--configs", "tiny:dma.channels=1,2", "--jobs", "1"]
    assert main([*argv, "--schedule", "none", "--out", str(out), "--no-progress"]) == 0
    first = capsys.readouterr().out
    assert (out / "study.db").exists() and (out / "sweep.json").exists()
    # the same command again runs nothing: both points are in the database
    assert main([*argv, "--schedule", "none", "--out", str(out)]) == 0
    assert "2 done before, from the database" in capsys.readouterr().err
    replot = tmp_path / "replot"
    code = main(["sweep", "--from", str(out / "study.db"), "--out", str(replot)])
    assert code == 0
    again = capsys.readouterr().out
    # the same table; the header's wall time is the database's last run's (the
    # resumption that ran nothing), not the first one's
    assert again.splitlines()[1:4] == first.splitlines()[1:4]
    rows = SweepResult.from_json(replot / "sweep.json").rows()
    assert [r["config"] for r in rows] == ["tiny[channels=1]", "tiny[channels=2]"]


# Pareto fronts --------------------------------------------------------------------


def _p(config, latency, energy, area):
    return {
        "config": config,
        "latency_s": latency,
        "energy_j": energy,
        "area_mm2": area,
        "edp_js": None if latency is None else latency * energy,
    }


def test_front_keeps_exactly_the_points_nothing_dominates():
    from polyc.studies.sweep import pareto

    pts = [
        _p("a", 1, 4, 9),  # fastest
        _p("b", 2, 2, 9),  # on the front: less energy than a
        _p("c", 2, 3, 9),  # dominated by b (same latency and area, more energy)
        _p("d", 4, 1, 1),  # smallest and most frugal
        _p("e", 4, 1, 2),  # dominated by d
        _p("f", 1, 4, 9),  # ties with a: neither dominates the other
    ]
    assert [p["config"] for p in pareto.front(pts)] == ["a", "f", "b", "d"]
    picks = pareto.chosen(pts)
    assert picks["min latency_s"]["config"] == "a"
    assert picks["min energy_j"]["config"] == "d"
    assert picks["min area_mm2"]["config"] == "d"
    # EDP 4 for a, b and f: the tie goes to the lower latency, then the name
    assert picks["min edp_js"]["config"] == "a"
    table = pareto.table(pts)
    assert table.splitlines()[0] == (
        "Pareto front of (latency, energy, area), workload: 4 of 6 points"
    )
    assert table.splitlines()[-1].split() == [
        "d",
        "4000",
        "1000",
        "1",
        "0",
        "4e+06",
        "energy,area",
    ]


def test_workload_sums_models_and_drops_configs_where_one_failed():
    from polyc.studies.sweep import pareto

    rows = [
        {**_p("x", 1, 2, 5), "label": "m1", "status": "ok"},
        {**_p("x", 3, 4, 5), "label": "m2", "status": "ok"},
        {**_p("y", 1, 1, 6), "label": "m1", "status": "ok"},
        {**_p("y", None, None, 6), "label": "m2", "status": "failed"},
    ]
    (w,) = pareto.workload(rows)
    assert (w["config"], w["latency_s"], w["energy_j"], w["area_mm2"]) == ("x", 4, 6, 5)
    assert w["edp_js"] == 24 and w["label"] == "m1+m2"


def test_grid_study_plots_and_tabulates_its_front(tmp_path):
    points = polyc.sweep.grid(
        {"mm": "matmul:M=16,N=16,K=16", "relu": "relu:input=16x16"},
        ["default"],
        [
            "tiny:mac_array.rows=2,4;mac_array.cols=rows;memory.l1.capacity_bytes=8192,16384"
        ],
    )
    result = polyc.sweep(points, jobs=1, progress=False)
    assert len(result.pareto_points()) == 4  # one per config, both models summed
    best = result.pareto()
    assert best and all(p["models"] == 2 for p in best)
    # the front is what no point dominates, checked against every point
    from polyc.studies.sweep.pareto import dominates

    others = result.pareto_points()
    assert all(not dominates(q, p) for p in best for q in others)
    assert "Pareto front of (latency, energy, area), workload" in result.pareto_table()
    assert "Pareto front of (latency, energy, area), mm: " in result.pareto_table("mm")
    written = result.plot(tmp_path, formats=("png", "svg"))
    assert tmp_path / "pareto.png" in written
    assert (tmp_path / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "pareto.svg").read_text()
    assert "on the 3-D front" in svg
    # the chosen points lettered, the letters' configs spelled out below
    assert re.search(r"A: latency", svg)
    assert re.search(r"A: tiny\[rows=\d,capacity_bytes=\d+\]", svg)


# objectives -----------------------------------------------------------------------


def test_objective_energy_steers_the_scheduler_to_less_energy():
    """On a 32x32 edge-npu without leakage, the fastest schedule of a 256^3 matmul
    moves 1 MiB from DRAM; objective="energy" picks one 9% slower that moves
    768 KiB and spends 13% less energy (simulated), and EDP falls too."""
    import accelerator
    from polyc.studies.sweep.task import make_inputs

    (spec,) = accelerator.vary(
        "edge-npu",
        {
            "mac_array.rows": [32],
            "mac_array.cols": "rows",
            "area.leakage_mw_per_mm2": [0],
        },
    )
    k = polyc.ops.matmul(256, 256, 256)
    inputs = make_inputs(k, "random", seed=0)
    runs = {}
    for objective in ("cycles", "energy", "edp"):
        _, report = polyc.compile(k, config=spec, objective=objective).run(inputs)
        runs[objective] = report
    fast, frugal = runs["cycles"], runs["energy"]
    assert frugal.energy_pj < fast.energy_pj
    assert frugal.dram_bytes < fast.dram_bytes
    assert frugal.cycles >= fast.cycles
    edp = {o: r.energy_pj * r.cycles for o, r in runs.items()}
    assert edp["edp"] <= edp["cycles"]


def test_objective_errors_and_sweep_words():
    with pytest.raises(ArgumentError, match=r"compile: objective='power' is not an"):
        polyc.compile(polyc.ops.matmul(8, 8, 8), config="tiny", objective="power")
    result = polyc.sweep(
        [(MM, "edp", "tiny"), (MM, "energy", "tiny")], jobs=1, progress=False
    )
    assert [r["status"] for r in result] == ["ok", "ok"]
    assert [r["schedule"] for r in result] == ["edp", "energy"]


# Dask: a real scheduler and worker processes on loopback -------------------------


def test_grid_study_on_a_dask_scheduler_and_workers_started_on_loopback(tmp_path):
    """``dask scheduler`` and ``dask worker`` (2 worker processes, one thread
    each) started as programs on 127.0.0.1; a hardware-grid study run there,
    committed to SQLite, gives the records of the same study run in this process."""
    distributed = pytest.importorskip("distributed")
    dask_config = pytest.importorskip("dask.config")
    file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    common = ["--no-dashboard", "--host", "127.0.0.1"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0"]
            + [*common, "--scheduler-file", str(file)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        while not file.exists():  # an event, not a deadline
            assert procs[0].poll() is None, "the scheduler did not start"
            time.sleep(0.05)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker"]
                + ["--scheduler-file", str(file), "--nthreads", "1", "--nworkers", "2"]
                + common,
                env=env,
                stderr=subprocess.DEVNULL,
            )
        )
        points = polyc.sweep.grid(
            {"mm": MM, "relu": "relu:input=8x8"},
            ["default"],
            ["tiny:mac_array.rows=2,4;mac_array.cols=rows"],
        )
        with (
            dask_config.set({"distributed.comm.timeouts.connect": "300s"}),
            distributed.Client(scheduler_file=str(file), set_as_default=False) as c,
        ):
            c.wait_for_workers(2)
            pids = set(c.run(os.getpid).values())
            assert len(pids) == 2 and os.getpid() not in pids
            assert c.scheduler.address.startswith("tcp://127.0.0.1:")
            db = tmp_path / "dask.db"
            on_dask = polyc.sweep(points, cluster=c, progress=False, db=db)
        here = polyc.sweep(points, jobs=1, progress=False)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert on_dask.meta["executor"].startswith("Dask cluster tcp://127.0.0.1:")

    def same(records):
        return [{k: v for k, v in r.items() if k != "timing"} for r in records]

    assert [r["status"] for r in here] == ["ok"] * 4
    assert same(on_dask.records) == same(here.records)
    assert same(SweepResult.from_db(db).records) == same(here.records)


def test_a_study_with_a_database_sends_workers_small_units(monkeypatch, tmp_path):
    """Regression: a unit's records come back when its last point is done, and the
    pool grouped every config of an op into one unit, so a 64-point study of one
    model committed nothing until its worker had run all 64."""
    from polyc.studies import executors

    tasks = polyc.sweep.resolve(
        polyc.sweep.grid({"mm": MM}, ["none"], ["tiny:dma.channels=1..5"])
    )
    assert [len(u) for u in executors.units(tasks, 2)] == [2, 3]
    small = executors.units(tasks, 2, most=executors.COMMIT_UNIT)
    assert [[t.index for t in u] for u in small] == [[0, 1], [2, 3], [4]]
    seen = {}

    def spy(tasks, jobs, progress, **kwargs):
        seen.update(kwargs)
        return executors.run_inline(tasks, progress)

    monkeypatch.setattr(executors, "run_pool", spy)
    points = polyc.sweep.grid({"mm": MM}, ["none"], ["tiny:dma.channels=1,2"])
    polyc.sweep(points, jobs=2, progress=False, db=tmp_path / "s.db")
    assert seen == {"most": executors.COMMIT_UNIT}


def test_example_codesign_study_runs_quick(tmp_path, capsys):
    import importlib.util

    from tests.support.paths import ROOT

    path = ROOT / "examples" / "codesign.py"
    spec = importlib.util.spec_from_file_location("codesign_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    assert example.main(["--quick", "--out", str(tmp_path), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "Pareto front of (latency, energy, area), workload: " in out
    assert "Pareto front of (latency, energy, area), gemm: " in out
    for name in ("study.db", "sweep.json", "sweep.csv", "pareto.png", "pareto.svg"):
        assert (tmp_path / name).exists(), name
    again = SweepResult.from_db(tmp_path / "study.db")
    assert len(again) == 4 and again.meta["study"] == "codesign-quick"
    assert {r["schedule"] for r in again} == {"edp"}


FACTORY_SCRIPT = """
import sys
import polyc


def gemm():
    return polyc.ops.matmul(8, 8, 8)


def points():
    return polyc.sweep.grid({"g": gemm}, ["none"], ["tiny:dma.channels=1,2"])


if __name__ == "__main__":
    polyc.sweep(points(), jobs=1, progress=False, db=sys.argv[1])
"""


def test_a_study_of_model_factories_resumes_when_its_script_is_imported(tmp_path):
    """Regression: a point's key digested the factory's pickle, which differs
    between the script run as __main__ and the same file imported (as
    bench/codesign.py imports examples/codesign.py), so the resumption was
    refused as 'another point'."""
    import importlib.util

    script = tmp_path / "factories.py"
    script.write_text(FACTORY_SCRIPT)
    db = tmp_path / "f.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, str(script), str(db)], env=env, check=True)
    spec = importlib.util.spec_from_file_location("factories", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stream = io.StringIO()
    result = polyc.sweep(module.points(), jobs=1, progress=stream, db=db)
    assert "0 points on this process (2 done before" in stream.getvalue()
    assert [r["status"] for r in result] == ["ok", "ok"]


def test_example_study_runs_config_by_config_shape_by_shape_and_a_limit_keeps_whole_configs():
    import importlib.util

    from tests.support.paths import ROOT

    path = ROOT / "examples" / "codesign.py"
    spec = importlib.util.spec_from_file_location("codesign_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    points = polyc.sweep.grid(example.models(False), ["edp"], [example.GRID])
    assert len(points) == 448  # 224 configs, both models
    ordered = example.config_major(points)
    assert sorted(map(id, ordered)) == sorted(map(id, points))
    pairs = [ordered[i : i + 2] for i in range(0, len(ordered), 2)]
    assert all(
        [p.label for p in pair] == ["resnet18", "encoder"]
        and pair[0].config is pair[1].config
        for pair in pairs
    )
    # shuffled, the same every time
    assert example.config_major(points) == ordered
    # the configs of one array shape and dataflow one after the other (a
    # worker's layer models serve its next points), each group whole: 7 SRAM
    # sizes x 4 DRAM bandwidths, both models
    shapes = [(p.config.mac_array.rows, p.config.mac_array.dataflow) for p in ordered]
    runs = [shapes[0]] + [b for a, b in itertools.pairwise(shapes) if a != b]
    assert len(runs) == len(set(runs)) == 8
    first = ordered[:56]
    assert len(set(shapes[:56])) == 1
    assert len({p.config.name for p in first}) == 28
    assert {p.config.mac_array.rows for p in ordered} == {8, 16, 32, 64}
