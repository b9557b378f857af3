"""One sweep point as a worker runs it: build, schedule, compile, simulate, record.

:func:`run_task` never raises for a bad point: whatever goes wrong is recorded in the
point's record (``status`` ``"failed"`` with the error's type and message, or
``"wrong"`` when ``check`` found outputs that differ from the interpreter, compared by
:mod:`polyc.verify`), so one bad point never stops a sweep. Records are plain JSON-able
dicts.

Points that share an op (and a schedule) reuse the kernel (and the scheduled kernel)
within a worker process. isl is not thread-safe, so a process runs one point at a
time even when an executor gives it several threads.
"""

from __future__ import annotations

import threading
import time
import traceback
import zlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from polyc.errors import ArgumentError, PolycError, SimulationError
from polyc.studies.sweep.spec import OpSpec, ScheduleChoice

#: input modes besides a function ``kernel -> {name: array}``
INPUT_MODES = ("random", "zeros")

_LOCK = threading.Lock()
_CACHE: OrderedDict[tuple, object] = OrderedDict()
_CACHE_SIZE = 32


@dataclass(frozen=True)
class Task:
    """A resolved point: what to build, how to schedule it, the hardware (a Spec, so
    config files need not exist where the point runs)."""

    index: int
    label: str
    op: OpSpec
    schedule: ScheduleChoice
    spec: object
    inputs: object = "random"
    check: bool = False
    #: how the point is simulated: ``"functional"``, ``"timing"`` (timing-only,
    #: :meth:`polyc.compiled.Compiled.run`'s ``functional=False``) or ``"both"``
    #: (timing-only, then functionally: the two reports must be equal)
    run: str = "functional"

    def describe(self) -> dict:
        return {
            "index": self.index,
            "label": self.label,
            "op": self.op.text,
            "schedule": self.schedule.label,
            "config": self.spec.name,
        }


def failed_record(task: Task, error_type: str, message: str) -> dict:
    """The record of a point that could not run at all (e.g. its worker died)."""
    record = _blank(task)
    record.update(error_type=error_type, error=message)
    return record


def run_task(task: Task) -> dict:
    """Run one point and return its record (never raises for a bad point)."""
    record = _blank(task)
    try:
        with _LOCK:
            _run(task, record)
    except PolycError as err:
        record.update(status="failed", error_type=type(err).__name__, error=str(err))
    except Exception as err:  # a bug in polyc or in a user's function: keep going
        record.update(
            status="failed",
            error_type=type(err).__name__,
            error=str(err) or repr(err),
            traceback=traceback.format_exc(limit=-6),
        )
    return record


def _blank(task: Task) -> dict:
    return {
        **task.describe(),
        "status": "failed",
        "kernel": None,
        "error_type": None,
        "error": None,
        "traceback": None,
        "dram_bytes_per_cycle": task.spec.dram.bytes_per_cycle,
        "report": None,
        "compiled": None,
        "simulated": None,
        "max_abs_error": None,
        "cost": None,
        "timing": {},
    }


def _run(task: Task, record: dict) -> None:
    import polyc

    timing = record["timing"]
    cpu0 = _cpu()
    t0 = time.perf_counter()
    kernel = _cached(("op", task.op.key), task.op.build)
    record["kernel"] = kernel.name
    t1 = time.perf_counter()
    scheduled = _cached(
        ("schedule", task.op.key, task.schedule.key),
        lambda: task.schedule.apply(kernel),
    )
    t2 = time.perf_counter()
    compiled = polyc.compile(
        kernel,
        config=task.spec,
        schedule=scheduled,
        objective=getattr(task.schedule, "objective", "cycles"),
    )
    t3 = time.perf_counter()
    functional = task.run != "timing" or task.check
    seed = zlib.crc32(task.op.text.encode())
    inputs = None
    if task.run != "functional":
        # the cost does not depend on the inputs' values: zeros, unless the
        # inputs give the sizes (parameters) or come from the user's function
        if kernel.params or callable(task.inputs):
            inputs = make_inputs(kernel, task.inputs, seed=seed)
        _, report = compiled.run(inputs or {}, functional=False)
    t4 = time.perf_counter()
    if functional:
        if inputs is None:
            inputs = make_inputs(kernel, task.inputs, seed=seed)
        outputs, full = compiled.run(inputs)
        if task.run != "functional" and full.to_dict() != report.to_dict():
            raise SimulationError(
                f"sweep: point {task.index} ({task.label} on {task.spec.name}) "
                "costs differently timing-only than functionally because "
                f"{_first_difference(report.to_dict(), full.to_dict())}. Report "
                "it as a bug; run the study with timing_only=False meanwhile."
            )
        report = full
    t5 = time.perf_counter()
    timing.update(
        kernel_s=t1 - t0,
        schedule_s=t2 - t1,
        compile_s=t3 - t2,
        run_s=t4 - t3 if task.run != "functional" else t5 - t4,
    )
    if task.run != "functional" and functional:  # both runs: the second's time
        timing["functional_s"] = t5 - t4
    # CPU seconds, which a loaded machine stretches less than wall time: this
    # process's and its children's (the C compiler), one point at a time
    cpu1 = _cpu()
    timing.update(cpu_s=cpu1[0] - cpu0[0], child_cpu_s=cpu1[1] - cpu0[1])
    # compile_s by stage (a reused compile has no schedule or codegen work)
    for stage in ("schedule", "codegen", "build"):
        timing[f"compile_{stage}_s"] = compiled.stage_seconds.get(stage, 0.0)
    record.update(
        status="ok",
        report=report.to_dict(),
        compiled=str(compiled),
        simulated=_simulated(task.run, functional),
    )
    if task.spec.area is not None:
        from accelerator.hardware.area import cost

        record["cost"] = cost(task.spec, report.cycles, report.energy_pj)
    if task.check:
        from polyc.oracle.verify import compare

        result = compare(kernel, inputs, outputs)
        timing["check_s"] = time.perf_counter() - t4
        record["max_abs_error"] = result.max_abs_error
        if not result.ok:
            record.update(
                status="wrong",
                error_type="VerificationError",
                error=result.message("sweep", run=f"on {task.spec.name}"),
            )


def _cpu() -> tuple[float, float]:
    """CPU seconds so far: this process's, and its finished children's."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _simulated(run: str, functional: bool) -> str:
    """A record's ``simulated``: how its report was obtained."""
    if run == "functional":
        return "functional"
    return "timing-only, verified functionally" if functional else "timing-only"


def _first_difference(a: dict, b: dict, path: str = "report") -> str:
    """Where two reports' dicts first differ: ``report.<key> is x timing-only
    but y functionally``."""
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            if x != y:
                return _first_difference(x, y, f"{path}.{key}")
        elif x != y:
            return f"{path}.{key} is {x!r} timing-only but {y!r} functionally"
    return "the reports differ"


def _cached(key: tuple, make):
    """Per-process LRU of built and scheduled kernels, by content key."""
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = make()
    _CACHE[key] = value
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def make_inputs(kernel, mode: object, seed: int) -> dict[str, np.ndarray]:
    """Inputs for every free input of ``kernel``.

    ``"random"``: seeded by ``seed``, floats uniform in [0.5, 1.5) and integers in
    [1, 8), positive and non-zero so that every op (log, sqrt, division) is defined
    (the cost of a run does not depend on the values); ``"zeros"``; or a function
    ``kernel -> {name: array}``.

    Raises:
        ArgumentError: for an unknown mode, or symbolic sizes with a built-in mode.
    """
    if callable(mode):
        return dict(mode(kernel))
    if mode not in INPUT_MODES:
        raise ArgumentError(
            f"sweep: inputs={mode!r} is not an input mode because it is none of "
            f"{', '.join(INPUT_MODES)}. Pass one of those or a function kernel -> "
            "{name: array}."
        )
    if kernel.params:
        raise ArgumentError(
            f"sweep: kernel {kernel.name} has symbolic sizes "
            f"({', '.join(kernel.params)}) because it was built with parameters, so "
            f"{mode} inputs have no shape. Build it with concrete sizes or pass "
            "inputs= a function kernel -> {name: array}."
        )
    rng = np.random.default_rng(seed)
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape({})
        dtype = a.dtype.numpy
        if mode == "zeros":
            out[a.name] = np.zeros(shape, dtype)
        elif a.dtype.is_float:
            out[a.name] = rng.uniform(0.5, 1.5, shape).astype(dtype)
        elif a.dtype.name == "bool":
            out[a.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            out[a.name] = rng.integers(1, 8, shape).astype(dtype)
    return out
