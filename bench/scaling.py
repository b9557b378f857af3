"""Sweep throughput: one study in this process, in a local pool, and on Dask.

    python -m bench.scaling [--rounds 3] [--full]

The layers of ``examples/study.py`` (its ``--quick`` sizes unless ``--full``) x
(none, default) x (tiny, edge-npu, datacenter) run once to warm the build cache, then
in interleaved rounds through: ``jobs=1`` (this process), the local pool of 2
processes (started per sweep), and a Dask ``LocalCluster`` of 2 single-thread workers
(started once, outside the timing; its workers stay warm between sweeps). Reported: best wall time per
executor, its ratio to ``jobs=1``, and the CPU seconds the points themselves took
(their ``timing`` fields). Each timed sweep runs in a fresh process (build cache
warm), as ``polyc sweep`` from a shell does; the records are checked identical across
executors first. Writes ``bench/results/scaling[_full].json``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile

from bench.common import table, write_json


def _points(full: bool):
    import polyc
    from examples.study import layers

    return polyc.sweep.grid(
        layers(quick=not full), ["none", "default"], ["tiny", "edge-npu", "datacenter"]
    )


def _strip(records) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timing"} for r in records]


def _same(a, b) -> bool:
    """Equal records but for the host timings."""
    return _strip(a.records) == _strip(b.records)


def _one(spec: str, full: bool) -> float:
    """Wall seconds of one sweep in a fresh process (``spec``: ``jobs=N`` or a
    scheduler address), as a user starting ``polyc sweep`` meets it."""
    code = (
        "import sys, time, polyc\n"
        "from bench.scaling import _points\n"
        "if __name__ == '__main__':\n"
        f"    points = _points({full})\n"
        "    t0 = time.perf_counter()\n"
        f"    r = polyc.sweep(points, progress=False, {spec})\n"
        "    assert not r.failed\n"
        "    print(time.perf_counter() - t0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="the study's full sizes")
    args = parser.parse_args(argv)

    import dask
    from distributed import LocalCluster

    import polyc

    points = _points(args.full)
    reference = polyc.sweep(points, jobs=1, progress=False)  # warms the build cache
    point_s = sum(sum(r["timing"].values()) for r in reference.records)
    # Dask's default scratch space is a fixed directory in the shared temp dir
    scratch = tempfile.TemporaryDirectory(prefix="polyc-dask-")
    private = dask.config.set({"temporary-directory": scratch.name})
    with (
        scratch,
        private,
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
    ):
        address = cluster.scheduler_address
        on_dask = polyc.sweep(points, cluster=cluster, progress=False)
        assert _same(on_dask, reference)
        assert _same(polyc.sweep(points, jobs=2, progress=False), reference)
        runs = {
            "jobs=1 (in the sweeping process)": "jobs=1",
            "local pool, 2 processes": "jobs=2",
            "Dask LocalCluster, 2 workers (already running)": f"cluster={address!r}",
        }
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(args.rounds):
            for name, spec in runs.items():
                best[name] = min(best[name], _one(spec, args.full))
    base = best["jobs=1 (in the sweeping process)"]
    rows = [
        {"executor": name, "wall_s": wall, "speedup_vs_jobs1": base / wall}
        for name, wall in best.items()
    ]
    print(f"{len(points)} points, {point_s:.2f} s of per-point work (jobs=1 run)")
    print(table(rows, ["executor", "wall_s", "speedup_vs_jobs1"]))
    path = write_json(
        "scaling" + ("_full" if args.full else ""),
        {
            "points": len(points),
            "full_sizes": args.full,
            "rounds": args.rounds,
            "per_point_work_s": point_s,
            "load_average": os.getloadavg(),
            "results": rows,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
