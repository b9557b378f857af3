"""Performance studies: run a grid of operators x schedules x hardware configs.

``polyc.sweep(points, ...)`` compiles and simulates every point and returns a
:class:`~polyc.sweep.result.SweepResult` (a table, JSON, CSV and plots)::

    import polyc

    points = polyc.sweep.grid(
        ops={"gemm": "matmul:M=256,N=256,K=256",
             "conv": ("conv2d", {"input": (1, 64, 28, 28), "weight": (64, 64, 3, 3),
                                 "padding": 1})},
        schedules=["none", "default"],
        configs=["edge-npu", "datacenter"],
    )
    result = polyc.sweep(points)                                # local process pool
    result = polyc.sweep(points, cluster="tcp://scheduler:8786")   # Dask distributed
    print(result.table())
    result.to_csv("study.csv")
    result.plot("plots/")     # roofline, cycles, utilization, energy (PNG and SVG)

Points are simulated timing-only by default (``Compiled.run(..., functional=False)``:
the same cycles, bytes and energy, no data moved or computed); ``functional_sample``
of them (4 by default, spread over the study) also run functionally, and a point
whose two reports differ fails. ``timing_only=False`` or ``check=True`` runs every
point functionally.

Op specs and schedule choices are described in :mod:`polyc.sweep.spec`. ``polyc.sweep``
is this module, and calling it calls :func:`sweep`.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import polyc
from polyc.errors import ArgumentError
from polyc.studies.sweep.result import SweepResult
from polyc.studies.sweep.spec import SCHEDULES, OpSpec, op_spec, schedule_choice
from polyc.studies.sweep.task import INPUT_MODES, Task

#: points of a timing-only study that also run functionally (their reports must
#: equal), spread over the study
FUNCTIONAL_SAMPLE = 4

__all__ = ["SCHEDULES", "Point", "SweepResult", "grid", "sweep"]


@dataclass(frozen=True)
class Point:
    """One point of a study: an op spec, a schedule choice, a config, and an
    optional layer label (used in tables and plots instead of the op text)."""

    op: object
    schedule: object = "default"
    config: object = "edge-npu"
    label: str | None = None


def grid(
    ops: Iterable | Mapping,
    schedules: Iterable | Mapping = ("default",),
    configs: Iterable = ("edge-npu",),
    where=None,
) -> list[Point]:
    """Every combination of ``ops`` x ``schedules`` x ``configs``, op-major.

    ``ops`` and ``schedules`` may be mappings ``{label: value}`` to name layers and
    schedules. Values are checked when the points are swept. A config may be a
    hardware grid text, ``"edge-npu:mac_array.rows=16,32;mac_array.cols=rows"``
    (see :func:`accelerator.vary`), which stands for its points; ``where`` (a
    function of a Spec, or text such as ``"area_mm2<=30"``) keeps only the grid
    points it accepts.

    Raises:
        GridError: for a malformed grid or a grid point that is not a valid
            description (before anything runs).
    """
    configs = expand_configs(configs, where)
    op_items = (
        list(ops.items()) if isinstance(ops, Mapping) else [(None, o) for o in ops]
    )
    sched_items = (
        [(label, (label, s)) for label, s in schedules.items()]
        if isinstance(schedules, Mapping)
        else [(None, s) for s in schedules]
    )
    configs = list(configs)
    return [
        Point(op, choice, config, label)
        for label, op in op_items
        for _, choice in sched_items
        for config in configs
    ]


def expand_configs(configs: Iterable, where=None) -> list:
    """``configs`` with each grid text replaced by its points (see :func:`grid`).

    Raises:
        GridError: as :func:`grid`.
    """
    from accelerator.hardware.area import MEASURES
    from accelerator.hardware.grid import is_grid, parse_grid, parse_where, vary

    if isinstance(where, str):
        where = parse_where(where, MEASURES)
    out: list = []
    for config in configs:
        if isinstance(config, str) and is_grid(config):
            base, axes = parse_grid(config)
            out += vary(base, axes, where=where)
        else:
            out.append(config)
    return out


def sweep(
    points: Iterable,
    *,
    inputs="random",
    jobs: int | None = None,
    cluster=None,
    progress=True,
    check: bool = False,
    db=None,
    study: str = "sweep",
    timing_only: bool = True,
    functional_sample: int = FUNCTIONAL_SAMPLE,
) -> SweepResult:
    """Compile and simulate every point; one record per point, in the points' order.

    Args:
        points: :class:`Point` objects (see :func:`grid`) or tuples
            ``(op, schedule, config[, label])``.
        inputs: ``"random"`` (seeded per op, so every executor gives the same
            numbers), ``"zeros"``, or a function ``kernel -> {name: array}``.
        jobs: local worker processes (default: the cores this process may use);
            ``jobs=1`` runs the points in this process, one after another.
        cluster: run on Dask distributed instead: a scheduler address
            (``"tcp://host:8786"``), a ``distributed.Client`` or a cluster object.
            Workers need polyc installed; run them with one thread each (isl is
            not thread-safe, so a worker process runs one point at a time).
        progress: True (a bar on a terminal, a line every 10 s otherwise, on
            stderr), False, or a stream to write to.
        check: also compare each point's outputs with ``polyc.interpret`` on the
            untransformed kernel; a difference makes the point ``"wrong"``.
        db: an SQLite results file (:mod:`polyc.sweep.store`): each finished
            point is committed to it as it lands, and the points of ``study``
            it already holds are not run again (a killed study resumes).
        study: the study's name in ``db`` (several studies may share a file).
        timing_only: simulate the points timing-only (``Compiled.run``'s
            ``functional=False``: the same cycles, bytes and energy at a fraction
            of the cost); False runs every point functionally.
        functional_sample: with ``timing_only``, how many points (spread evenly
            over the study, by index) also run functionally: their report must
            equal the timing-only one, else the point fails. ``check`` runs every
            point functionally.

    A point that fails (a ``PolycError`` from building, scheduling, compiling or
    running it, or a crashed worker) is recorded with its error and the sweep goes
    on.

    Raises:
        ArgumentError: for a malformed point (unknown op or schedule word, a
            schedule file that does not exist) or bad options.
        ConfigError: for an unknown or malformed config.
        SweepError: when the cluster cannot be reached or local workers cannot
            start.
        StoreError: when ``db`` is not a results database, or its ``study``
            holds other points.
    """
    from polyc.studies import executors as sweep_exec

    all_tasks = resolve(
        points,
        inputs=inputs,
        check=check,
        timing_only=timing_only,
        functional_sample=functional_sample,
    )
    store, done = _open_store(db, study, all_tasks)
    tasks = [t for t in all_tasks if t.index not in done]
    if cluster is not None and jobs is not None:
        raise ArgumentError(
            "sweep: jobs and cluster were both given because jobs only sizes the "
            "local pool. Drop jobs: the cluster's workers decide the parallelism."
        )
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ArgumentError(
            f"sweep: jobs={jobs!r} is not a number of processes because it is not a "
            "positive int. Pass jobs=1 or more, or leave it out to use every core."
        )
    shown = sweep_exec.progress_for(progress, len(tasks), "")
    if done:
        shown.resumed = len(done)
    if store is not None:
        shown = _Committing(shown, store, {t.index: t for t in tasks})
    client = owned = None
    if cluster is not None:
        client, owned = sweep_exec.connect(cluster)
        where = f"Dask cluster {client.scheduler.address}"
    else:
        jobs = max(1, min(jobs or sweep_exec.default_jobs(), len(tasks)))
        where = "this process" if jobs == 1 else f"a local pool of {jobs} processes"
    shown.where = where
    t0 = time.perf_counter()
    try:
        shown.start()
        # committed point by point: a unit's records come back together
        most = sweep_exec.COMMIT_UNIT if store is not None else None
        if not tasks:
            records = []
        elif client is not None:
            records = sweep_exec.run_dask(tasks, client, shown, most=most)
        elif jobs == 1:
            records = sweep_exec.run_inline(tasks, shown)
        else:
            records = sweep_exec.run_pool(tasks, jobs, shown, most=most)
    finally:
        if owned:
            client.close()
    shown.finish()
    meta = {
        "polyc_version": polyc.__version__,
        "executor": where,
        "points": len(all_tasks),
        "wall_s": time.perf_counter() - t0,
        "inputs": inputs if isinstance(inputs, str) else "function",
        "check": check,
        "simulated": "timing-only" if timing_only else "functional",
        "functional_sample": sum(t.run != "timing" for t in all_tasks),
    }
    if done:
        meta["resumed"] = len(done)
    if store is not None:
        # each run of the study (the first, and every resumption) in turn
        before = store.meta()
        runs = before.get("runs") or []
        if not runs and "wall_s" in before:  # written before runs were kept
            runs = [
                {k: before.get(k) for k in ("executor", "wall_s")}
                | {"ran": before.get("points")}
            ]
        runs.append({k: meta[k] for k in ("executor", "wall_s")} | {"ran": len(tasks)})
        meta.update(db=str(store.path), study=study, runs=runs)
        store.set_meta(meta)
        store.close()
    return SweepResult([*done.values(), *records], meta)


def _open_store(db, study: str, tasks: list[Task]):
    """``(store, done)``: the study in ``db`` and the records it already holds."""
    if db is None:
        return None, {}
    from polyc.studies.sweep.store import Store

    store = Store(db, study)
    try:
        return store, store.resume(tasks)
    except BaseException:
        store.close()
        raise


class _Committing:
    """A progress display that first commits each finished point to the store."""

    def __init__(self, shown, store, tasks: dict[int, Task]):
        self._shown = shown
        self._store = store
        self._tasks = tasks

    def done(self, record: dict) -> None:
        self._store.add(self._tasks[record["index"]], record)
        self._shown.done(record)

    def __getattr__(self, name):
        return getattr(self._shown, name)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._shown, name, value)


def resolve(
    points: Iterable,
    *,
    inputs="random",
    check: bool = False,
    timing_only: bool = False,
    functional_sample: int = FUNCTIONAL_SAMPLE,
) -> list[Task]:
    """The points as :class:`~polyc.sweep.task.Task` objects, checked.

    Raises:
        ArgumentError, ConfigError: as :func:`sweep`.
    """
    from accelerator import load_config

    if (
        not isinstance(functional_sample, int)
        or isinstance(functional_sample, bool)
        or functional_sample < 0
    ):
        raise ArgumentError(
            f"sweep: functional_sample={functional_sample!r} is not a number of "
            "points because it is not an int >= 0. Pass 0 to verify no point "
            "functionally, or more."
        )

    if not callable(inputs) and inputs not in INPUT_MODES:
        raise ArgumentError(
            f"sweep: inputs={inputs!r} is not an input mode because it is none of "
            f"{', '.join(INPUT_MODES)}. Pass one of those or a function kernel -> "
            "{name: array}."
        )
    points = list(points)
    if not points:
        raise ArgumentError(
            "sweep: no points to run because the list of points is empty. Build "
            "them with polyc.sweep.grid(ops, schedules, configs)."
        )
    ops: dict[int, tuple[str | None, OpSpec]] = {}
    choices: dict[int, object] = {}
    specs: dict[object, object] = {}
    tasks = []
    for index, raw in enumerate(points):
        point = _point(raw, index)
        if id(point.op) not in ops:
            ops[id(point.op)] = op_spec(point.op)
        text_label, spec = ops[id(point.op)]
        if id(point.schedule) not in choices:
            choices[id(point.schedule)] = schedule_choice(point.schedule)
        key = point.config if isinstance(point.config, str) else id(point.config)
        if key not in specs:
            specs[key] = load_config(point.config)
        tasks.append(
            Task(
                index=index,
                label=point.label or text_label or spec.text,
                op=spec,
                schedule=choices[id(point.schedule)],
                spec=specs[key],
                inputs=inputs,
                check=check,
            )
        )
    if timing_only:
        sample = spread(len(tasks), functional_sample)
        tasks = [
            dataclasses.replace(t, run="both" if t.index in sample else "timing")
            for t in tasks
        ]
    return tasks


def spread(n: int, k: int) -> set[int]:
    """``k`` indices of ``range(n)`` spread evenly, the first and the last
    included (all of them when ``k >= n``)."""
    if k >= n:
        return set(range(n))
    if k <= 1:
        return set(range(k))
    return {round(i * (n - 1) / (k - 1)) for i in range(k)}


def _point(raw: object, index: int) -> Point:
    if isinstance(raw, Point):
        return raw
    if isinstance(raw, Sequence) and not isinstance(raw, str) and 3 <= len(raw) <= 4:
        return Point(*raw)
    raise ArgumentError(
        f"sweep: point {index} is {raw!r} because it is neither a Point nor a tuple "
        "(op, schedule, config[, label]). Build points with polyc.sweep.grid(ops, "
        "schedules, configs)."
    )


class _CallableModule(types.ModuleType):
    """Importing ``polyc.sweep`` binds this module as the attribute ``sweep`` of
    ``polyc``, over any function of that name; so the module itself is callable and
    ``polyc.sweep(points)`` means :func:`sweep` whichever import came first."""

    def __call__(self, *args, **kwargs) -> SweepResult:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
