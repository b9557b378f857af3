"""Whole compiles, reused: ``polyc.compile`` of a program it compiled before, for the
same hardware, checks and code, skips the schedule and codegen stages.

What a compile produces -- the scheduled kernel (its schedule tree, marks and
history), the scheduler's choice per layer and the generated C -- is a function of
the program (statements, arrays, parameters, the schedule it comes with), the
hardware description, ``checks``, and polyc's own code; not of the weights bound
to it. So a compile is stored under a digest of those, in memory for this process
and on disk under ``$POLYC_CACHE_DIR/compiles`` (default ``~/.cache/polyc``, the
build cache's root), and a second compile of the same model -- in this process or a
later one, with fresh weights or the same -- loads it: the C compiler's own cache
(:mod:`codegen.build`) then finds the module.

isl prints one set in several ways (it simplifies in place), so the key reads each
domain through ``remove_redundancies`` and ``coalesce``: a set printed differently
can only cost a miss, never a wrong hit (equal text is an equal program). Files are
pickles written to a temporary name and renamed (a crash or ``kill -9`` leaves the
old file or none); one that does not load is ignored and rewritten. The cache
directory is trusted like the build cache beside it (that one holds shared objects
the process loads). ``POLYC_COMPILE_CACHE=0`` turns it off; :data:`STATS` counts
what it did in this process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import islpy as isl

from polyc.ir.expr import describe
from polyc.ir.kernel import Kernel

#: bumped when what is stored changes
FORMAT = 3
#: ``memory`` and ``disk`` hits, ``stored`` compiles, ``unreadable`` files
STATS: Counter = Counter()
#: the sources whose code decides what a compile produces (digested into the key)
_SOURCES = ("polyc", "schedules", "codegen", "accelerator")
#: environment variables that change what the scheduler chooses (in the key where
#: set: a compile with ``POLYC_PREFETCH_MARGIN=10`` came from the cache of one
#: without it, its weights fetched ahead all the same)
KNOBS = ("POLYC_PREFETCH_MARGIN",)
_MEMORY: dict[str, bytes] = {}


@dataclass(frozen=True)
class LayerRecord:
    """One layer of the scheduler's choice, by the names of its statements (a
    :class:`schedules.accel.layers.Layer` holds isl objects: it is rebuilt from
    the kernel)."""

    index: int
    stmts: tuple[str, ...]
    bands: tuple[str, ...]
    depth: int
    opaque: bool
    children: tuple[int, ...]
    candidate: object  # schedules.accel.search.Candidate | None
    tried: int
    note: str
    split_from: str
    extra_cycles: float = 0.0  # a gather's indirect DMA (LayerChoice)
    direct_cycles: float = 0.0  # a layer run DRAM-direct (LayerChoice)


def enabled() -> bool:
    return os.environ.get("POLYC_COMPILE_CACHE", "1") not in ("0", "off", "no")


def key(kernel: Kernel, spec, checks: bool, objective: str = "cycles") -> str:
    """The digest a compile of ``kernel`` for ``spec`` is stored under."""
    hardware = replace(spec, description="", source="")
    lines = [
        f"format {FORMAT} code {_code_digest()} checks {bool(checks)}",
        f"spec {hardware!r}",
        kernel.analysis("reuse.program", _program),
        f"bound {sorted(kernel.data)}",  # kernels of one program may bind others
    ]
    if objective != "cycles":  # the scheduler's default keeps its keys
        lines.append(f"objective {objective}")
    lines.extend(f"env {k}={os.environ[k]}" for k in KNOBS if k in os.environ)
    if kernel.history or kernel.schedule is not kernel.program_schedule:
        lines.append(f"schedule {kernel.schedule}")
        lines.extend(f"step {step}" for step in kernel.history)
    else:
        lines.append("schedule program order")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def _program(kernel: Kernel) -> str:
    """The program's text: what every kernel of it shares (computed once)."""
    lines = [f"kernel {kernel.name} params {kernel.params} context {kernel.context}"]
    for a in kernel.arrays.values():
        lines.append(f"array {a}")
    for s in kernel.statements:
        lines.append(f"stmt {s.name}[{', '.join(s.iterators)}]")
        lines.append(f"  domain {_normal(s.domain)}")
        lines.append(f"  {describe(s.target)} = {describe(s.body)}")
    return "\n".join(lines)


def load(kernel: Kernel, spec, checks: bool, objective: str = "cycles"):
    """``(chosen, choice, source, mode)`` of an earlier compile, or ``None``.
    ``chosen`` is a function that loads the scheduled kernel (isl parses a large
    schedule tree slowly; a compile that is only run never needs it)."""
    if not enabled():
        return None
    digest = key(kernel, spec, checks, objective)
    blob = _MEMORY.get(digest)
    where = "memory"
    if blob is None:
        where = "disk"
        try:
            blob = (root() / f"{digest}.pickle").read_bytes()
        except OSError:
            return None
    try:
        fmt, packed, program, layers, config, note, shared, source, mode = pickle.loads(
            blob
        )
        if fmt != FORMAT:
            return None
        data = dict(kernel.data)

        @functools.cache
        def chosen() -> Kernel:
            return pickle.loads(packed).replace(data=data)

        statement, searched = kernel.statement, kernel
        if program is not None:  # the program the scheduler searched (see store)
            named = {s.name: s for s in pickle.loads(program[0])}
            statement = named.__getitem__
            # loaded when a traffic formula is asked (isl parses it slowly)
            searched = functools.cache(lambda: pickle.loads(program[1]))
        choice = _choice(
            statement, searched, spec, chosen, layers, config, note, shared
        )
    except Exception:  # a stale or torn file may fail in any way: a miss
        STATS["unreadable"] += 1
        return None
    _MEMORY[digest] = blob
    STATS[where] += 1
    return chosen, choice, source, mode


def store(
    kernel: Kernel,
    spec,
    checks: bool,
    chosen,
    choice,
    source,
    mode,
    objective: str = "cycles",
) -> None:
    """Keep what a compile produced (the weights stay out: they are the caller's)."""
    if not enabled():
        return
    digest = key(kernel, spec, checks, objective)
    layers = None if choice is None else [_record(lc) for lc in choice.layers]
    config = None if choice is None else choice.config
    note = None if choice is None else choice.note
    shared = None if choice is None else list(choice.shared)
    packed = pickle.dumps(chosen.replace(data={}))
    # the layers' statements are the program's, unless the scheduler split a
    # layer across engines (schedules.accel.share): then the program it
    # searched (its statements, and the history that names the split parts)
    # is kept, to rebuild the layers and their traffic formulas from
    program = None
    names = {s.name for s in kernel.statements}
    searched = None
    if choice is not None:
        searched = next((lc.context[0] for lc in choice.layers if lc.context), None)
    if searched is not None and any(n not in names for r in layers for n in r.stmts):
        program = (
            pickle.dumps(searched.statements),
            pickle.dumps(searched.replace(data={})),
        )
    blob = (FORMAT, packed, program, layers, config, note, shared, source, mode)
    blob = pickle.dumps(blob)
    _MEMORY[digest] = blob
    folder = root()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{digest}.", dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, folder / f"{digest}.pickle")
        STATS["stored"] += 1
    except OSError:
        pass  # a read-only or full cache only costs a compile next time


def root() -> Path:
    """Where compiles live: ``$POLYC_CACHE_DIR/compiles``."""
    from schedules.accel import cache

    return cache.root("compiles")


def _record(lc) -> LayerRecord:
    layer = lc.layer
    return LayerRecord(
        layer.index,
        tuple(s.name for s in layer.stmts),
        layer.bands,
        layer.depth,
        layer.opaque,
        layer.children,
        lc.candidate,
        lc.tried,
        lc.note,
        lc.split_from,
        lc.extra_cycles,
        lc.direct_cycles,
    )


def _choice(statement, searched, spec, chosen, layers, config, note, shared):
    """The scheduler's :class:`~schedules.accel.scheduler.Choice`, rebuilt around
    the statements ``statement`` names (the program's, or those of the one the
    scheduler searched when it split a layer); ``searched``: the program for
    the traffic formulas, or a function that loads it; ``None`` for a hand
    schedule."""
    if layers is None:
        return None
    from schedules.accel.layers import Layer
    from schedules.accel.scheduler import Choice, LayerChoice

    out = []
    for r in layers:
        # the scheduler's statements are the program's (it regroups loop chains
        # into one nest per statement, never changes one) but for the parts of
        # a layer split across engines
        stmts = tuple(statement(n) for n in r.stmts)
        layer = Layer(r.index, stmts, r.bands, r.depth, r.opaque, r.children)
        context = (searched, spec) if r.candidate is not None else ()
        lc = LayerChoice(layer, r.candidate, r.tried, r.note, context, r.split_from)
        lc.extra_cycles = r.extra_cycles
        lc.direct_cycles = r.direct_cycles
        out.append(lc)
    return Choice(chosen, config, out, note, shared)


def _normal(s: isl.Set) -> str:
    """A set's text through isl's simplifications (see the module docstring)."""
    return str(isl.Set(str(s)).remove_redundancies().coalesce())


def _code_digest() -> str:
    """A digest of polyc's sources (every .py, the runtime's C, the configs)."""
    from schedules.accel import cache

    return cache.source_digest(_SOURCES, (".py", ".c", ".h", ".toml"))
