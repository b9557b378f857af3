"""One fuzz case through the whole accelerator pipeline, classified.

A :class:`Case` is a program, a frontend (``compute`` or ``torch``) and a hardware
description (a shipped name or a random description). :func:`run_case` builds the
kernel, computes the oracle (the reference interpreter on the untransformed
kernel), compiles it with :func:`polyc.compile` (the accelerator scheduler, the
placed C built with a fast ``-O0``), runs the simulator and compares. It never
raises: the record's ``status`` is one of :data:`KINDS`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass

from polyc.errors import PolycError, SimulationError
from polyc.studies.fuzz.build import through_compute, through_torch, torch_supports
from polyc.studies.fuzz.grammar import Program
from polyc.studies.fuzz.hardware import describe, spec_of

#: what a case can come to; everything but ``ok`` is a finding
KINDS = {
    "ok": "compiled, simulated, and equal to the interpreter",
    "wrong": "the simulated outputs differ from the interpreter's",
    "compile": "polyc.compile raised a polyc error on a valid program",
    "sim": "the simulator refused the generated program (an access check, a wait)",
    "crash": "an exception that is not a polyc error, or the worker process died",
    "frontend": "the frontend refused the program (or torch disagrees with polyc)",
    "oracle": "the reference interpreter failed",
    "hang": "the case ran past its time limit",
    "config": "the random hardware description was refused (a fuzzer bug)",
}

#: the build flags of fuzz cases: -O0 compiles the generated C in about half the
#: time of -O3 (the simulator's runtime library is built once, optimised)
FUZZ_OPT = "-O0"


@dataclass(frozen=True)
class Case:
    """One fuzz case (plain data: it pickles and goes to JSON)."""

    index: int
    seed: int
    program: Program
    frontend: str
    hardware: str | dict

    @property
    def label(self) -> str:
        return f"#{self.index} {self.program.family}/{self.program.dtype}"

    @property
    def config(self) -> str:
        return describe(self.hardware)

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "seed": self.seed,
            "program": self.program.to_dict(),
            "frontend": self.frontend,
            "hardware": self.hardware,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Case:
        return cls(
            d.get("index", 0),
            d["seed"],
            Program.from_dict(d["program"]),
            d["frontend"],
            d["hardware"],
        )


class CaseTimeout(Exception):
    """The case used up its CPU-time limit (raised by :func:`cpu_limit`)."""


def blank(case: Case) -> dict:
    """The record of ``case`` before it ran (status ``crash`` until it finishes)."""
    return {
        "index": case.index,
        "seed": case.seed,
        "label": case.label,
        "config": case.config,
        "frontend": case.frontend,
        "family": case.program.family,
        "dtype": case.program.dtype,
        "layers": len(case.program.layers),
        "ops": [layer["op"] for layer in case.program.layers],
        "status": "crash",
        "stage": "start",
        "error_type": None,
        "error": None,
        "cycles": None,
        "predicted": None,
        "fallbacks": [],
        "prefetched": 0,
        "seconds": None,
        "cpu_seconds": None,
    }


def run_case(case: Case, timeout: float | None = 300.0) -> dict:
    """Run ``case`` (see the module docstring); returns its record."""
    record = blank(case)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        with cpu_limit(timeout), _fast_build(), _ahead_often(case):
            _run(case, record)
    except CaseTimeout:
        record.update(status="hang", error_type="CaseTimeout")
        record["error"] = f"the case used more than its {timeout:g} s of CPU time"
    except Exception as err:  # classified by stage in _run; this is the rest
        record.update(status="crash", error_type=type(err).__name__)
        record["error"] = str(err) or repr(err)
        record["traceback"] = traceback.format_exc(limit=-8)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    record["cpu_seconds"] = round(time.process_time() - c0, 3)
    return record


def _run(case: Case, record: dict) -> None:
    import polyc

    record["stage"] = "frontend"
    try:
        kernel, inputs = _build(case)
    except PolycError as err:
        return _fail(record, "frontend", err)
    record["stage"] = "config"
    try:
        spec = spec_of(case.hardware)
    except PolycError as err:
        return _fail(record, "config", err)
    record["stage"] = "oracle"
    try:
        expected = polyc.interpret(kernel, inputs)
    except PolycError as err:
        return _fail(record, "oracle", err)
    if case.frontend == "torch":
        bad = _torch_disagrees(case, expected)
        if bad:
            record.update(status="frontend", error_type="TorchMismatch", error=bad)
            return
    record["stage"] = "compile"
    try:
        compiled = polyc.compile(kernel, config=spec)
    except PolycError as err:
        return _fail(record, "compile", err)
    choice = compiled.choice
    if choice is not None:
        record["fallbacks"] = [  # a gather's indirect DMA is no fallback
            lc.note
            for lc in choice.layers
            if lc.candidate is None and lc.note and not lc.extra_cycles
        ]
        if choice.note:
            record["fallbacks"].append(choice.note)
        # weights fetched ahead (schedules.accel.prefetch): how often the
        # fuzzer reaches that path
        record["prefetched"] = sum(
            lc.note.startswith("prefetch:") for lc in choice.layers
        )
        # the cost model's cycles, against the simulated ones below
        record["predicted"] = float(choice.predicted_cycles)
    record["stage"] = "run"
    try:
        outputs, report = compiled.run(**inputs)
    except SimulationError as err:
        return _fail(record, "sim", err)
    except PolycError as err:
        return _fail(record, "compile", err)
    record["cycles"] = int(report.cycles)
    record["stage"] = "compare"
    message = mismatch(expected, outputs)
    if message:
        record.update(status="wrong", error_type="Mismatch", error=message)
        return
    record.update(status="ok", stage="done")


def _fail(record: dict, kind: str, err: Exception) -> None:
    record.update(status=kind, error_type=type(err).__name__, error=str(err))


def _build(case: Case):
    if case.frontend == "torch":
        if not torch_supports(case.program):
            raise ValueError(f"the torch frontend does not take {case.program.dtype}")
        return through_torch(case.program, case.seed)
    return through_compute(case.program, case.seed)


def _torch_disagrees(case: Case, expected: dict) -> str | None:
    """The frontend's own check: eager torch against the interpreter."""
    import torch

    from polyc.studies.fuzz.build import torch_module

    module, x = torch_module(case.program, case.seed)
    with torch.no_grad():
        want = module(x).numpy()
    (got,) = expected.values()
    return mismatch({"out": want}, {"out": got}, what="torch eager", other="polyc")


def mismatch(
    expected: dict, outputs: dict, what="the interpreter", other="the accelerator"
) -> str | None:
    """None when every output agrees within :mod:`polyc.verify`'s tolerance
    (integers exactly, floats relative to the largest reference magnitude, NaN
    and infinities exactly), else the sentence naming the array, the first
    differing element and both values."""
    from polyc.oracle.verify import compare_arrays

    result = compare_arrays("fuzz", expected, outputs)
    if result.ok:
        return None
    text = result.wrong[0].describe(f"on {other}")
    return text.replace("in the interpreter", f"in {what}")


@contextlib.contextmanager
def cpu_limit(seconds: float | None):
    """Raise :class:`CaseTimeout` in this thread once the process has used
    ``seconds`` of CPU time (main thread of a process only; elsewhere, no limit).

    CPU time, not wall time: on a loaded machine (a campaign shares its cores with
    whatever else runs) a case waiting for a core is not hanging. The compiler
    polyc starts is a child process and not counted; its own run is bounded by the
    build.
    """
    usable = seconds and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(signum, frame):
        raise CaseTimeout

    old = signal.signal(signal.SIGPROF, fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


@contextlib.contextmanager
def _ahead_often(case: Case):
    """On every third case, weights fetched ahead wherever they fit
    (:data:`schedules.accel.prefetch.MARGIN_ENV` below zero), whatever they
    are predicted to save: the values must be right either way, and the path
    would otherwise run on few random programs."""
    from schedules.accel.prefetch import MARGIN_ENV

    old = os.environ.get(MARGIN_ENV)
    if case.index % 3 == 0:
        os.environ[MARGIN_ENV] = "-1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(MARGIN_ENV, None)
        else:
            os.environ[MARGIN_ENV] = old


@contextlib.contextmanager
def _fast_build():
    """Build the placed C with :data:`FUZZ_OPT` unless the user chose flags."""
    old = os.environ.get("POLYC_OPT")
    if old is None:
        os.environ["POLYC_OPT"] = FUZZ_OPT
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("POLYC_OPT", None)
