"""The compile pipeline behind ``polyc.compile`` and ``Compiled.run``, top to bottom.

=========  ===============================================================  ========
stage      what it does                                                     prints
=========  ===============================================================  ========
frontend   a Kernel from the compute API, a PyTorch model or a C file       Kernel
           (``polyc.compute``, ``polyc.from_torch``, ``polyc.from_c``); it
           runs before ``polyc.compile``, which starts from its Kernel
deps       the exact dependences (:mod:`polyc.ir.deps`), computed once per  deps
           program on first use (by the legality checks of the stages
           below; when printed, here)
schedule   the accelerator scheduler (:mod:`schedules.accel.scheduler`)    Kernel
           chooses loop order, tiling and fusion per layer and applies them
tensorize  ... and maps statements to the MAC array and the vector unit     Kernel
place      ... and places buffers on chip with their DMA copies             Kernel
codegen    C for the simulator (:mod:`codegen.accel`)                       C
build      the C compiled and loaded (cached by content)                    module
run        ``Compiled.run``: the simulation, checked against the            report
           interpreter with ``verify``
=========  ===============================================================  ========

schedule, tensorize and place are one search: a candidate is judged by what it does
once tensorized and placed (a candidate that does not place is replaced by the next
one), so they run together in the schedule stage and are applied in this order
(the chosen kernel's history: loop transformations, then engine marks, then
placements). With ``schedule=`` (a hand schedule) they are the given kernel's
history, and with ``schedule=kernel`` (DRAM-direct) they do nothing.

``POLYC_DEBUG=stage[,stage...]`` prints, to stderr, after each named stage what it
produced, under a header line naming the stage and the kernel: ``all`` names every
stage, ``time`` prints each stage's duration (schedule's includes tensorize, place
and, unless deps is printed, deps). The same durations are kept, printed or
not, in ``Compiled.stage_seconds`` (seconds by stage: ``schedule``, ``codegen``,
``build``, ``deps`` when printed, and ``run`` summed over runs), for a benchmark
to read; the frontend runs before ``polyc.compile`` and is timed by its caller.
The tensorize and place stages show
the chosen kernel's history replayed up to their last step (replaying costs about
as much as applying the choice once, and happens only when they are printed).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from polyc.errors import StageError
from polyc.ir.kernel import Kernel

#: the compile stages, top to bottom
STAGES = (
    "frontend",
    "deps",
    "schedule",
    "tensorize",
    "place",
    "codegen",
    "build",
    "run",
)
#: the words of ``POLYC_DEBUG`` that are not stages
EXTRA = ("all", "time")
#: what ``POLYC_DEBUG=time`` says of a stage an earlier compile did (polyc/reuse.py)
REUSED = "reused: an earlier compile of this program for this config"
#: the environment variable read by :func:`debug_from_env`
ENV = "POLYC_DEBUG"
#: transformations that belong to a later stage than schedule (by step name)
_STEP_STAGE = {"tensorize": "tensorize", "map_vector": "tensorize", "place": "place"}


@dataclass(frozen=True)
class Debug:
    """What ``POLYC_DEBUG`` asks to print: stages to show, and whether to time them."""

    stages: frozenset[str] = field(default_factory=frozenset)
    time: bool = False

    def shows(self, stage: str) -> bool:
        return stage in self.stages

    def emit(self, stage: str, kernel: str, text: Callable[[], str]) -> None:
        """Print ``text()`` under a header when ``stage`` is shown (``text`` is only
        called then: some outputs cost a replay or a dependence analysis)."""
        if stage in self.stages:
            body = text().rstrip("\n")
            sys.stderr.write(f"--- polyc {stage}: {kernel} ---\n{body}\n")
            sys.stderr.flush()

    @contextmanager
    def timed(self, stage: str, kernel: str, into: dict[str, float] | None = None):
        """Time the block, add its seconds to ``into[stage]`` (when given), and
        print its duration when timing is on. The block may set ``note`` in the
        dict it is given (``reused``: printed after it)."""
        start = time.perf_counter()
        info: dict[str, str] = {}
        yield info
        took = time.perf_counter() - start
        if into is not None:
            into[stage] = into.get(stage, 0.0) + took
        if self.time:
            note = f" ({info['note']})" if info.get("note") else ""
            sys.stderr.write(
                f"--- polyc {stage}: {kernel} took {took:.3f} s{note} ---\n"
            )
            sys.stderr.flush()


def parse_debug(text: str | None) -> Debug:
    """The :class:`Debug` of a ``POLYC_DEBUG`` value (``None`` or empty: nothing).

    Raises:
        StageError: for a word that is neither a stage nor ``all`` or ``time``.
    """
    words = [w.strip() for w in (text or "").split(",") if w.strip()]
    for w in words:
        if w not in STAGES and w not in EXTRA:
            raise StageError(
                f"compile: {ENV} names an unknown stage {w!r} because the stages "
                f"are {', '.join(STAGES)}. Set {ENV} to a comma-separated list of "
                f"them, or to {' or '.join(EXTRA)}."
            )
    show = frozenset(STAGES) if "all" in words else frozenset(words) - set(EXTRA)
    return Debug(show, "time" in words)


def debug_from_env() -> Debug:
    """:func:`parse_debug` of ``$POLYC_DEBUG`` (read at each ``polyc.compile``).

    Raises:
        StageError: for a word that is neither a stage nor ``all`` or ``time``.
    """
    return parse_debug(os.environ.get(ENV))


def compile(
    kernel: Kernel,
    config,
    schedule: Kernel | None,
    *,
    checks: bool,
    trace_limit: int | None,
    verify: bool,
    objective: str = "cycles",
):
    """The stages of ``polyc.compile`` up to build (see :func:`polyc.api.compile`
    for the arguments); returns a :class:`polyc.compiled.Compiled` whose ``run``
    is the run stage.

    Raises:
        StageError: for an unknown stage in ``POLYC_DEBUG``.
        ConfigError: for an unknown or malformed config.
        ArgumentError: when ``schedule`` is not a schedule of ``kernel``.
        CodegenError: when the C compiler fails.
    """
    from schedules.accel.cache import frozen_heap

    # the caller's objects (torch and its model) are none of the compile's
    # garbage: its collections leave them alone
    with frozen_heap():
        return _compile(
            kernel,
            config,
            schedule,
            checks=checks,
            trace_limit=trace_limit,
            verify=verify,
            objective=objective,
        )


def _compile(kernel, config, schedule, *, checks, trace_limit, verify, objective):
    from accelerator import load_config
    from accelerator.sim.simulator import DEFAULT_TRACE_LIMIT
    from codegen.accel import placed
    from polyc import reuse
    from polyc.compiled import Compiled

    debug = debug_from_env()
    spec = load_config(config)
    runtime = _Runtime()
    name = kernel.name
    seconds: dict[str, float] = {}
    debug.emit("frontend", name, lambda: str(kernel))
    if debug.shows("deps"):  # else computed on first use, inside schedule
        with debug.timed("deps", name, seconds):
            debug.emit("deps", name, lambda: str(kernel.deps))
    with debug.timed("schedule", name, seconds) as timing:
        reused = (
            reuse.load(kernel, spec, checks, objective) if schedule is None else None
        )
        if reused is not None:  # the scheduled kernel loads when it is asked for
            timing["note"] = REUSED
            chosen, choice, source, mode = reused
        else:  # the runtime library builds once the search's workers are done
            chosen, choice = _schedule(kernel, spec, schedule, objective, runtime.start)
    runtime.start()  # (a reused or given schedule: from here)

    def choice_kernel() -> Kernel:
        return chosen if isinstance(chosen, Kernel) else chosen()

    debug.emit("schedule", name, lambda: str(after(choice_kernel(), "schedule")))
    debug.emit("tensorize", name, lambda: str(after(choice_kernel(), "tensorize")))
    debug.emit("place", name, lambda: str(after(choice_kernel(), "place")))
    with debug.timed("codegen", name, seconds) as timing:
        if reused is None:
            source, mode = placed.generate(chosen)
            if schedule is None:
                reuse.store(
                    kernel, spec, checks, chosen, choice, source, mode, objective
                )
        else:
            timing["note"] = REUSED
    # the module keeps the user's program, reused or not: the scheduler may rewrite
    # it (a bias moved, a copy inlined), and the bounds judge the run against the
    # program as written
    runtime.hurry()  # the build stage waits for it: every core
    module = _build(kernel, source, mode, checks, debug, seconds)
    limit = DEFAULT_TRACE_LIMIT if trace_limit is None else trace_limit
    return Compiled(
        kernel=chosen,
        spec=spec,
        module=module,
        trace_limit=limit,
        choice=choice,
        verify=verify,
        debug=debug,
        stage_seconds=seconds,
    )


class _Runtime:
    """The simulator's runtime library, built (or loaded) in the background while
    the compile goes on, so that the build stage need not wait for its gcc.

    It starts when the schedule stage has searched its layers (:meth:`start`):
    the search's workers take every core, and what follows (the fusion
    decisions, applying the choice, codegen) runs on one, so the library's
    gcc runs on the others
    (``jobs - 1`` compilers at once; ResNet-18's runtime is 1.6 CPU s of gcc,
    about the second core's idle time while the choice is applied and the C
    generated). The build stage lets it run on every core (:meth:`hurry`)
    and waits for it through its own call (a lock per module: the library is
    never compiled twice)."""

    def __init__(self):
        self._started = False
        self._background = None

    def start(self) -> None:
        """Start the build (once; nothing when the library is loaded already)."""
        from codegen import build as cbuild
        from codegen.accel.direct import build_runtime

        if self._started:
            return
        self._started = True
        if build_runtime.cache_info().currsize == 0:
            self._background = cbuild.in_background(
                build_runtime, compilers=cbuild.jobs() - 1
            )

    def hurry(self) -> None:
        """Let the build run on every core (the caller waits for it next)."""
        self.start()
        if self._background is not None:
            self._background.hurry()


def run(compiled, inputs: Mapping[str, object], functional: bool = True):
    """The run stage: simulate ``compiled`` on its config, note the scheduler's
    fallbacks in the report, and check the outputs against the interpreter when
    ``verify`` is on. Returns ``(outputs, report)``; ``functional=False``: a
    timing-only run (the same report, no outputs: ``{}``).

    Raises:
        InputError: for missing, unknown or mis-shaped inputs.
        SimulationError: when the run stops on a violation.
        VerificationError: with ``verify`` on, when an output differs.
        ArgumentError: for a timing-only run of a compile made with ``verify``.
    """
    import dataclasses

    if compiled.verify and not functional:
        from polyc.errors import ArgumentError

        raise ArgumentError(
            f"run: {compiled.name} was compiled with verify=True but "
            "functional=False computes no outputs to check because a timing-only "
            "run moves no data. Run it with functional=True, or compile it "
            "without verify."
        )
    debug = compiled.debug
    name = compiled.name  # a reused compile's scheduled kernel stays unloaded
    with debug.timed("run", name, compiled.stage_seconds):
        outputs, report = compiled.module.run(
            compiled.spec, inputs, compiled.trace_limit, functional
        )
        notes = compiled.fallbacks()
        if notes:
            report = dataclasses.replace(report, fallbacks=tuple(notes))
        compiled.last_report = report
        if compiled.verify:
            from polyc.oracle.verify import check

            check(compiled.kernel, inputs, outputs, run=f"on {compiled.spec.name}")
    debug.emit("run", name, lambda: str(report))
    return outputs, report


def after(chosen: Kernel, stage: str) -> Kernel:
    """``chosen`` as it was after ``stage`` (schedule, tensorize or place): its
    history replayed up to the first step of a later stage (the whole kernel when
    there is none)."""
    from schedules.apply import replay

    limit = STAGES.index(stage)
    steps = chosen.history
    n = 0
    while n < len(steps) and STAGES.index(_stage_of(steps[n].name)) <= limit:
        n += 1
    if n == len(steps):
        return chosen
    return replay(chosen.original, steps[:n])


def _stage_of(step: str) -> str:
    return _STEP_STAGE.get(step, "schedule")


def _schedule(
    kernel: Kernel,
    spec,
    schedule: Kernel | None,
    objective="cycles",
    searched: Callable[[], object] | None = None,
):
    """The kernel to compile and the scheduler's choice (None for a given one);
    ``searched`` is the scheduler's (called once its layers are searched)."""
    if schedule is not None:
        from polyc.compiled import same_program

        same_program(kernel, schedule)
        from schedules.accel.levels import check

        check(schedule, spec, "compile")
        return schedule, None
    from schedules.accel.scheduler import schedule as accel_schedule

    choice = accel_schedule(kernel, spec, objective=objective, searched=searched)
    return choice.kernel, choice


def _build(
    chosen: Kernel,
    source,
    mode: str,
    checks: bool,
    debug: Debug,
    seconds: dict[str, float],
):
    """The build stage: the C (from the codegen stage, or a reused compile's)
    compiled and loaded, its seconds added to ``seconds``."""
    from accelerator.sim import abi
    from codegen.accel import placed

    name = chosen.name
    debug.emit("codegen", name, lambda: _kernel_c(source.text, abi.header()))
    with debug.timed("build", name, seconds):
        module = placed.load(chosen, source, mode, checks=checks)
    debug.emit("build", name, lambda: _built(module))
    return module


def _kernel_c(text: str, header: str) -> str:
    """The generated C without the runtime header it starts with."""
    if text.startswith(header):
        lines = header.count("\n")
        return f"/* polyc_rt.h ({lines} lines) */\n" + text[len(header) :].lstrip("\n")
    return text


def _built(module) -> str:
    b = module.built
    how = "cache hit" if b.cached else "compiled"
    checks = "on" if module.checks else "compiled out"
    return f"{b.path} ({how}); mode {module.mode}; checks {checks}"
