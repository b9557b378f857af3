"""Where sweep points run: in this process, a local process pool, or a Dask cluster.

Each executor returns one record per task, in the order of the tasks, and reports
every finished point to a :class:`Progress`. A task is anything with an ``index``
that pickles; ``run(task) -> dict`` (a module-level function: it travels to the
workers by name) turns it into a record and ``failed(task, error_type, message)``
makes the record of a task whose worker died. Sweeps pass nothing (their points,
:func:`polyc.sweep.task.run_task`); the fuzzer passes its own cases. A point that kills its worker process
(a crash in generated C) is recorded as failed and the sweep goes on: the local pool
notes which point each worker is running, so after a crash only the points that were
in flight are re-run, one at a time, to find the one that crashed.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from polyc.errors import ArgumentError, SweepError
from polyc.studies.sweep.spec import dumps
from polyc.studies.sweep.task import Task, failed_record, run_task

_CTX = "spawn"  # no inherited threads or locks; works the same on every platform


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def blob(task: Task) -> bytes:
    """``task`` serialised for a worker.

    Raises:
        ArgumentError: when something in the point cannot be serialised.
    """
    try:
        return dumps(task)
    except Exception as err:
        raise ArgumentError(
            f"sweep: point {task.index} ({task.label}) cannot be sent to a worker "
            f"because serialising it failed ({type(err).__name__}: {err}). Use "
            "module-level functions and plain values in op specs and schedules."
        ) from err


# in this process --------------------------------------------------------------------


def run_inline(
    tasks: Sequence[Task], progress: Progress, run: Callable = run_task
) -> list[dict]:
    """Run the points one after another in this process (``jobs=1``)."""
    records = []
    for task in tasks:
        record = run(task)
        records.append(record)
        progress.done(record)
    return records


# local process pool -----------------------------------------------------------------


def _op_and_schedule(task: Task) -> tuple[str, str]:
    return (task.op.key, task.schedule.key)


#: the most points of one unit when each point must be reported as it finishes
#: (a study committing to a database): a unit's records come back together
COMMIT_UNIT = 2


def units(
    tasks: Sequence[Task],
    workers: int,
    group: Callable | None = _op_and_schedule,
    most: int | None = None,
) -> list[list[Task]]:
    """Group points that share an op and a schedule (``group(task)``; None: every
    task its own unit), so that one worker builds, schedules and compiles their
    kernel once for all their configs; split the largest groups while there are
    fewer groups than ``workers``, and into pieces of at most ``most`` points
    (a unit's records come back when its last point is done)."""
    groups: dict[object, list[Task]] = {}
    for t in tasks:
        groups.setdefault(t.index if group is None else group(t), []).append(t)
    out = [
        g[i : i + (most or len(g))]
        for g in groups.values()
        for i in range(0, len(g), most or len(g))
    ]
    while len(out) < workers:
        big = max(out, key=len)
        if len(big) < 2:
            break
        out.remove(big)
        half = len(big) // 2
        out += [big[:half], big[half:]]
    return sorted(out, key=lambda u: u[0].index)


def run_pool(
    tasks: Sequence[Task],
    jobs: int,
    progress: Progress,
    run: Callable = run_task,
    failed: Callable = failed_record,
    group: Callable | None = _op_and_schedule,
    most: int | None = None,
) -> list[dict]:
    """Run the points in a pool of ``jobs`` spawned processes (``run``, ``failed``,
    ``group`` and ``most``: see the module docstring and :func:`units`).

    Raises:
        SweepError: when the worker processes cannot start.
    """
    blobs = {t.index: blob(t) for t in tasks}
    records: dict[int, dict] = {}
    pending = list(tasks)
    marks = Path(tempfile.mkdtemp(prefix="polyc-sweep-"))
    try:
        while pending:
            before = len(records)
            in_flight = _pool_round(
                pending, blobs, jobs, records, progress, marks, run, group, most
            )
            if in_flight is None and len(records) == before:
                raise SweepError(
                    "sweep: the local worker processes died before running any "
                    "point because they could not start (a script that calls "
                    "polyc.sweep must do so under if __name__ == '__main__': each "
                    "worker imports it again). Guard the script, or pass jobs=1 to "
                    "run in this process."
                )
            for task in [t for t in pending if t.index in (in_flight or ())]:
                record = _run_alone(task, blobs[task.index], run, failed)
                records[task.index] = record
                progress.done(record)
            pending = [t for t in pending if t.index not in records]
    finally:
        shutil.rmtree(marks, ignore_errors=True)
    return [records[t.index] for t in tasks]


def _pool_round(
    tasks, blobs, jobs, records, progress, marks: Path, run, group, most=None
) -> set[int] | None:
    """Run ``tasks`` until done or until the pool breaks; returns the indices of the
    points that were running when it broke (empty when it did not, None when it
    broke with no point running)."""
    ctx = multiprocessing.get_context(_CTX)
    work = units(tasks, jobs, group, most)
    broken = False
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(work)), mp_context=ctx, initializer=_worker_init
    )
    try:
        futures = [
            pool.submit(_run_unit, [blobs[t.index] for t in unit], str(marks), run)
            for unit in work
        ]
        for fut in as_completed(futures):
            try:
                done = fut.result()
            except BrokenProcessPool:
                broken = True
                break
            for record in done:
                records[record["index"]] = record
                progress.done(record)
    except BaseException:  # Ctrl-C: do not wait for the rest of the sweep
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    if not broken:
        return set()
    # the pool has shut down: every note left is a point a worker did not finish;
    # None when no worker was running a point (the workers themselves failed)
    return _in_flight(marks) or None


def _worker_init() -> None:
    """Ctrl-C reaches every process of the terminal's group: workers leave it to the
    sweeping process, which stops them. On Linux a worker also ends with the
    sweeping process if that one is killed outright. The points already use every
    core: a worker's own compiles run their searches and gcc in turn."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.setdefault("POLYC_JOBS", "1")
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now (an interrupted sweep
    should not wait for the points in flight)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    # before 3.14 there is no public way; shutdown() forgets the processes
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        proc.terminate()


def _run_unit(
    data: list[bytes], marks: str | None = None, run: Callable = run_task
) -> list[dict]:
    """Run a unit of points; with ``marks``, keep a note of the point running."""
    note = Path(marks) / str(os.getpid()) if marks else None
    out = []
    for item in data:
        task = pickle.loads(item)
        if note is not None:
            note.write_text(str(task.index))
        out.append(run(task))
    if note is not None:
        note.unlink()
    return out


def _in_flight(marks: Path) -> set[int]:
    out = set()
    for note in marks.iterdir():
        out.add(int(note.read_text()))
        note.unlink()
    return out


def _alone(data: bytes, conn, run: Callable = run_task) -> None:
    _worker_init()
    conn.send(run(pickle.loads(data)))
    conn.close()


def _run_alone(
    task: Task, data: bytes, run: Callable = run_task, failed: Callable = failed_record
) -> dict:
    """Run one point in its own process; a crash becomes a failed record."""
    ctx = multiprocessing.get_context(_CTX)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_alone, args=(data, send, run), daemon=True)
    proc.start()
    send.close()
    try:
        record = receive.recv()
    except EOFError:
        record = None
    except BaseException:  # Ctrl-C
        proc.terminate()
        raise
    proc.join()
    if record is not None:
        return record
    code = proc.exitcode
    how = (
        f"signal {signal.Signals(-code).name}"
        if code is not None and code < 0
        else f"exit code {code}"
    )
    return failed(
        task,
        "WorkerDied",
        f"sweep: the worker process died running this point because it was ended "
        f"by {how} (a crash in the generated C or the simulator). Run the point "
        "alone with jobs=1 under a debugger to see where.",
    )


# Dask distributed -------------------------------------------------------------------


def connect(cluster):
    """``(client, owned)``: a ``distributed.Client`` for ``cluster`` (an address, a
    Client, or a cluster object such as ``LocalCluster``), and whether the caller
    must close it. The connect timeout is Dask's
    (``distributed.comm.timeouts.connect``).

    Raises:
        ArgumentError: when ``cluster`` is none of those.
        SweepError: when the scheduler cannot be reached.
    """
    if not isinstance(cluster, str) and not any(
        hasattr(cluster, a) for a in ("scheduler_address", "scheduler_info")
    ):
        raise ArgumentError(
            f"sweep: cluster={cluster!r} is not a Dask cluster because it is a "
            f"{type(cluster).__name__}. Pass a scheduler address "
            "('tcp://host:8786'), a distributed.Client or a cluster object."
        )
    from distributed import Client

    if isinstance(cluster, Client):
        return cluster, False
    try:
        return Client(cluster, set_as_default=False), True
    except (OSError, TimeoutError) as err:
        raise SweepError(
            f"sweep: cannot reach the Dask scheduler at {_name(cluster)} because "
            f"{type(err).__name__}: {err}. Start it ('dask scheduler', then "
            "'dask worker ADDRESS --nthreads 1') or check the address."
        ) from err


def _name(cluster) -> str:
    return cluster if isinstance(cluster, str) else str(cluster.scheduler_address)


def run_dask(
    tasks: Sequence[Task],
    client,
    progress: Progress,
    run: Callable = run_task,
    failed: Callable = failed_record,
    group: Callable | None = _op_and_schedule,
    most: int | None = None,
) -> list[dict]:
    """Run the points on the Dask cluster of ``client`` (see :func:`connect`)."""
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    token = uuid.uuid4().hex[:8]
    work = units(tasks, workers, group, most)
    futures = [
        client.submit(
            _run_unit,
            [blob(t) for t in unit],
            None,
            run,
            key=f"polyc-{progress.name}-{token}-{unit[0].index}",
            pure=False,
        )
        for unit in work
    ]
    by_key = {f.key: unit for f, unit in zip(futures, work)}
    try:
        return _collect(tasks, futures, by_key, client, progress, failed)
    except BaseException:  # Ctrl-C: take the rest of the sweep off the cluster
        client.cancel(futures)
        raise


def _collect(tasks, futures, by_key, client, progress, failed) -> list[dict]:
    from distributed import as_completed as dask_completed

    records: dict[int, dict] = {}
    for fut in dask_completed(futures, loop=client.loop):
        try:
            done = fut.result()
        except Exception as err:
            done = [
                failed(
                    task,
                    type(err).__name__,
                    f"sweep: the Dask cluster could not run this point because "
                    f"{type(err).__name__}: {err}. Check that every worker has "
                    "polyc installed (the same version as here) and stays up.",
                )
                for task in by_key[fut.key]
            ]
        for record in done:
            records[record["index"]] = record
            progress.done(record)
        fut.release()
    return [records[t.index] for t in tasks]


# progress ---------------------------------------------------------------------------


class Progress:
    """A progress display: a bar redrawn in place on a terminal, a line every
    ``interval`` seconds otherwise; failures are printed as they happen."""

    def __init__(
        self,
        total: int,
        where: str,
        stream=None,
        interval: float = 10.0,
        name: str = "sweep",
        failure: Callable[[dict], str] | None = None,
    ):
        self.name = name
        self.failure = failure or _point_failure
        self.total = total
        self.where = where
        self.stream = stream
        self.interval = interval
        self.count = 0
        self.failed = 0
        #: points a results database already held (not run again)
        self.resumed = 0
        self.t0 = time.monotonic()
        self.last = self.t0
        self.tty = bool(stream is not None and getattr(stream, "isatty", bool)())

    def _write(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(text)
            self.stream.flush()

    def start(self) -> None:
        self.t0 = self.last = time.monotonic()
        again = f" ({self.resumed} done before, from the database)" * bool(self.resumed)
        self._write(
            f"polyc {self.name}: {_points(self.total)} on {self.where}{again}\n"
        )
        if self.tty:
            self._write(self._bar())

    def done(self, record: dict) -> None:
        self.count += 1
        if record["status"] != "ok":
            self.failed += 1
            self._clear()
            self._write(f"polyc {self.name}: {self.failure(record)}\n")
        now = time.monotonic()
        if self.tty:
            self._write("\r" + self._bar())
        elif now - self.last >= self.interval and self.count < self.total:
            self.last = now
            self._write(self._line() + "\n")

    def finish(self) -> None:
        self._clear()
        elapsed = time.monotonic() - self.t0
        ok = self.count - self.failed
        self._write(
            f"polyc {self.name}: {_points(self.count)} in {elapsed:.1f} s: {ok} ok"
            + (f", {self.failed} failed" if self.failed else "")
            + "\n"
        )

    def _clear(self) -> None:
        if self.tty:
            self._write("\r\033[K")

    def _eta(self) -> str:
        elapsed = time.monotonic() - self.t0
        if not self.count:
            return f"{elapsed:.0f} s elapsed"
        left = elapsed / self.count * (self.total - self.count)
        rate = self.count / elapsed * 60 if elapsed > 0 else 0.0
        return f"{rate:.1f}/min, {elapsed:.0f} s elapsed, ~{left:.0f} s left"

    def _line(self) -> str:
        pct = 100 * self.count // max(self.total, 1)
        fails = f", {self.failed} failed" if self.failed else ""
        return (
            f"polyc {self.name}: {self.count}/{self.total} points ({pct}%){fails}, "
            f"{self._eta()}"
        )

    def _bar(self) -> str:
        width = shutil.get_terminal_size((80, 20)).columns
        fails = f" {self.failed} failed" if self.failed else ""
        tail = f" {self.count}/{self.total}{fails}  {self._eta()}"
        slots = max(10, min(40, width - len(tail) - 3))
        full = slots * self.count // max(self.total, 1)
        return f"[{'#' * full}{'.' * (slots - full)}]{tail}"[: width - 1]


def _point_failure(record: dict) -> str:
    return (
        f"point {record['index']} ({record['label']}, {record['schedule']}, "
        f"{record['config']}) {record['status']}: {record['error_type']}: "
        f"{record['error']}"
    )


def _points(n: int) -> str:
    return f"{n} point" if n == 1 else f"{n} points"


def progress_for(option, total: int, where: str) -> Progress:
    """A Progress for the ``progress=`` option: True (stderr), False, or a stream."""
    if option is True:
        stream = sys.stderr
    elif option is False or option is None:
        stream = None
    elif hasattr(option, "write"):
        stream = option
    else:
        raise ArgumentError(
            f"sweep: progress={option!r} is not a progress option because it is a "
            f"{type(option).__name__}. Pass True, False or a writable stream."
        )
    return Progress(total, where, stream)
