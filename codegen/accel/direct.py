"""Accelerator target: a Kernel as C that drives the simulator's runtime.

The generated translation unit is the runtime's header (``polyc_rt.h``: the API and
the inline access check) followed by the kernel function
``void polyc_K(pc_ctx *_pc_ctx, long params..., void *arrays...)`` and an entry
point ``int polyc_K_run(...)`` that arms the
runtime's error exit (a violation longjmps out and the entry point returns -1). It
links against the runtime, built once as its own shared library
(:func:`build_runtime`, cached by content like every module). The C names of the
generated function come from :mod:`codegen.accel.names`.

This emitter runs a kernel "DRAM-direct" (a kernel with no placement marks, or
``polyc.compile(kernel, schedule=kernel)``): every statement instance executes on
the scalar core, reading and writing DRAM, and costs the scalar core
the per-instance cycles the runtime computes from the config (``pc_stmt``). The
generated code only counts instances in a local variable and hands the counts to
the runtime (``pc_scalar``) at the end, so the simulation costs almost nothing per
instance. Every array access is checked (``PC_CHECK``) unless the module is built
with ``checks=False`` (``-DPC_NO_CHECKS``); the C text is the same either way.

The placed emitter (:mod:`codegen.accel.placed`) subclasses :class:`SimEmitter`:
it allocates buffers, emits ``pc_dma``, ``pc_mac``, ``pc_vec_*`` and ``pc_wait``
calls, and must call :meth:`flush` before each asynchronous call so the scalar core's time is current when it issues.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import cgen as c
import numpy as np

from accelerator.hardware.bound import engine_bound
from accelerator.hardware.roofline import macs_per_instance, roofline
from accelerator.hardware.spec import OP_CLASSES, Spec
from accelerator.sim import abi
from accelerator.sim import simulator as runtime
from codegen import build as cbuild
from codegen.accel import names
from codegen.accel.names import CTX, DATA
from codegen.cexpr import PRELUDE, CExpr
from codegen.emit import CEmitter, CSource, raw_name
from polyc.errors import CodegenError, SimulationError
from polyc.ir.expr import Load, ops_count
from polyc.ir.inputs import prepare
from polyc.ir.kernel import Kernel, Statement
from polyc.ir.prefetches import copies

#: flags every kernel module is built with (its own symbols stay internal)
FLAGS = ("-fvisibility=hidden",)
NO_CHECKS = ("-DPC_NO_CHECKS",)
MODE_DRAM_DIRECT = "DRAM-direct"


def binding(a) -> str:
    """The runtime call that binds array ``a``: in DRAM, or at its home on chip
    (an intermediate, :mod:`schedules.accel.homes`, or a weight's copy fetched
    ahead)."""
    size = " * ".join(f"(int64_t)({d.to_c()})" for d in a.shape) or "1"
    label = names.cstr(a.name)
    args = f"{CTX}, {label}, {raw_name(a.name)}, {size} * {a.dtype.itemsize}"
    if a.home:
        return f"pc_bind_at({args}, {a.home}, {a.home_offset})"
    return f"pc_bind({args})"


class SimEmitter(CEmitter):
    """Emit a kernel for the simulator (DRAM-direct: see the module docstring)."""

    prelude = PRELUDE
    gather_prelude = ""  # the runtime checks a gather's indices (pc_gather_index)

    def gather_index(self, g, by: str, extent: str) -> str:
        """A gather's index read on the scalar core, checked by the runtime (an
        index out of range fails the run, with or without ``PC_NO_CHECKS``)."""
        label = names.cstr(str(g))
        return f"pc_gather_index({CTX}, (int64_t)({by}), {extent}, {label})"

    def leading_args(self) -> list[c.Value]:
        return [c.Pointer(c.Value("pc_ctx", CTX))]

    def signature_arrays(self) -> list:
        """The arrays the caller passes: all but the generated code's own."""
        own = {a.name for a in self.own_arrays()}
        return [a for a in self.kernel.arrays.values() if a.name not in own]

    def own_arrays(self) -> list:
        """The copies of weights fetched ahead (:mod:`polyc.ir.prefetches`): the
        user's program has no such array, so the code holds it."""
        return [self.kernel.arrays[copy] for _, copy in copies(self.kernel).values()]

    def declare_array(self, a) -> list[c.Generable]:
        """The typed view of the array, and its binding as a DRAM buffer."""
        dram = names.dram_buffer(a.name)
        return [*super().declare_array(a), c.Line(f"const int {dram} = {binding(a)};")]

    def prologue(self) -> list[c.Generable]:
        out = self.data_flag()
        for s in self.kernel.statements:
            out += self.register(s, {ld.array: 0 for ld in (s.target, *s.reads)})
        return out

    def data_flag(self) -> list[c.Generable]:
        """``pc_data``: whether this run computes values (0 in a timing-only run,
        where :meth:`assign` skips every statement body)."""
        return [c.Line(f"const int {DATA} = PC_DATA({CTX});")]

    def assign(self, stmt: Statement, r: CExpr) -> c.Generable:
        """A statement instance's value, computed unless the run is timing-only
        (its loops still run: they count instances and the bytes they touch)."""
        return c.If(DATA, c.Statement(r.store(stmt.target, r(stmt.body))))

    def register(self, stmt: Statement, levels: Mapping[str, int]):
        """Declare ``stmt`` to the runtime: its ops per instance and, per memory
        level (``levels`` maps each accessed array to one), its bytes read and
        written; plus the local instance counter."""
        ops = ops_count(stmt.body)
        per: dict[tuple[int, bool], int] = {}
        for ld, is_write in [(stmt.target, True)] + [(r, False) for r in stmt.reads]:
            key = (levels[ld.array], is_write)
            per[key] = per.get(key, 0) + ld.dtype.itemsize
        for g in stmt.gathers:  # a gathered element: read where its array lives
            key = (levels.get(g.array, self.kernel.arrays[g.array].home), False)
            per[key] = per.get(key, 0) + g.dtype.itemsize
        keys = sorted(per)
        ops_c = ", ".join(str(ops.get(k, 0)) for k in OP_CLASSES)
        label, iters = names.cstr(stmt.name), names.cstr(",".join(stmt.iterators))
        desc = (
            f"{label}, {iters}, {{{ops_c}, 0}}, "
            f"{macs_per_instance(stmt)}, {len(keys)}, "
            f"{{{', '.join(str(lv) for lv, _ in keys)}}}, "
            f"{{{', '.join(str(per[k]) for k in keys)}}}, "
            f"{{{', '.join(str(int(w)) for _, w in keys)}}}"
        )
        d = names.stmt_desc(stmt.name)
        return [
            c.Line(f"static const pc_stmt_desc {d} = {{{desc}}};"),
            c.Line(f"const int {names.stmt_id(stmt.name)} = pc_stmt({CTX}, &{d});"),
            c.Line(f"int64_t {names.count(stmt.name)} = 0;"),
            c.Line(f"uint64_t {names.mask(stmt.name, False)} = 0;"),
            c.Line(f"uint64_t {names.mask(stmt.name, True)} = 0;"),
        ]

    def statement(self, stmt: Statement, args: dict[str, str]) -> list[c.Generable]:
        r = self.renderer(args)
        iters = [args[i] for i in stmt.iterators]
        accesses = distinct((stmt.target, *stmt.reads))  # the target first: a write
        checks = [
            self.check(stmt, ld, r, iters, i == 0) for i, ld in enumerate(accesses)
        ]
        return [
            *checks,
            self.assign(stmt, r),
            c.Statement(f"{names.count(stmt.name)}++"),
        ]

    def check(
        self, stmt: Statement, ld: Load, r: CExpr, iters: list[str], is_write: bool
    ) -> c.Statement:
        """``PC_CHECK`` of one access: indices against the array's extents."""
        a = self.kernel.arrays[ld.array]
        idx = names.i64_list([r.aff(x) for x in ld.index])
        ext = names.i64_list([d.to_c() for d in a.shape])
        it = names.i64_list(iters)
        mask, dram = names.mask(stmt.name, is_write), names.dram_buffer(a.name)
        return c.Statement(
            f"PC_CHECK({CTX}, {mask}, {dram}, {names.stmt_id(stmt.name)}, "
            f"{len(ld.index)}, {idx}, {ext}, {len(iters)}, {it})"
        )

    def flush(self) -> list[c.Generable]:
        """Hand the instance counts to the runtime (before any asynchronous call)."""
        out: list[c.Generable] = []
        for s in self.kernel.statements:
            n = names.count(s.name)
            r, w = names.mask(s.name, False), names.mask(s.name, True)
            out.append(
                c.Statement(f"pc_scalar({CTX}, {names.stmt_id(s.name)}, {n}, {r}, {w})")
            )
            out.append(c.Statement(f"{n} = 0, {r} = 0, {w} = 0"))
        return out

    def epilogue(self) -> list[c.Generable]:
        return self.flush()

    def mark(self, name: str, body, node) -> list[c.Generable]:
        if name.startswith("@"):  # the simulator runs one instance at a time
            return [c.Comment(f"mark {name}"), *body]
        return super().mark(name, body, node)

    def generate(self) -> CSource:
        src = super().generate()
        k = self.kernel
        params = [f"long {p}" for p in k.params]
        ptrs = [f"void *{raw_name(a)}" for a in src.arrays]
        args = ", ".join([f"pc_ctx *{CTX}", *params, *ptrs])
        call = ", ".join([CTX, *k.params, *(raw_name(a) for a in src.arrays)])
        run = f"{src.function}_run"
        wrapper = (
            f"int {run}({args}) {{\n"
            f"  if (setjmp({CTX}->jmp)) {{ {CTX}->armed = 0; return -1; }}\n"
            f"  {CTX}->armed = 1;\n"
            f"  {src.function}({call});\n"
            f"  {CTX}->armed = 0;\n"
            f"  return {CTX}->failed ? -1 : 0;\n"
            f"}}\n"
        )
        text = abi.header() + "\n" + src.text + "\n" + wrapper
        # only the entry point: the context comes from the runtime module's ffi,
        # and a small cdef keeps the module quick to compile
        cdef = f"int {run}({args.replace('pc_ctx *', 'void *', 1)});"
        return CSource(text, run, cdef, src.params, src.arrays, False)


def distinct(loads) -> list[Load]:
    """The accesses of ``loads`` with duplicates (same array and index) dropped."""
    out: list[Load] = []
    for ld in loads:
        if not any(ld.array == o.array and ld.index == o.index for o in out):
            out.append(ld)
    return out


# building and running ----------------------------------------------------------------


#: the runtime module's main translation unit
_RUNTIME = f'#include "{abi.HEADER}"\n'


@functools.cache
def build_runtime() -> cbuild.Built:
    """The runtime as a cffi module: kernels link against its shared library, and
    Python can drive it directly (tests, hand-written schedules). Each of the
    runtime's C files is a translation unit of its own (:func:`abi.files`)."""
    return cbuild.build(_RUNTIME, abi.cdef(), name="runtime", files=abi.files())


def runtime_location() -> Path:
    """Where :func:`build_runtime` finds or puts the runtime's shared library,
    without building it: a kernel compiles while the runtime builds, and links
    against it once it is there."""
    if build_runtime.cache_info().currsize:
        return build_runtime().path
    return cbuild.location(_RUNTIME, abi.cdef(), name="runtime", files=abi.files())


class _RuntimeElsewhere(Exception):
    """The runtime was built elsewhere than the kernel was about to link it
    from (a build started under another cache directory)."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path


def _runtime_at(path: Path) -> None:
    """The runtime built (or waited for, when it builds in the background), at
    ``path``; raises :class:`_RuntimeElsewhere` when it is elsewhere."""
    built = build_runtime().path
    if built != path:
        raise _RuntimeElsewhere(built)


def prebuild() -> cbuild.Built:
    """Build the runtime into :func:`codegen.build.installed_dir` (``polyc
    prebuild``, which ``make`` runs at installation), where every later process
    finds it: a first compile from an empty cache then pays for its kernel's C
    only. Built with the flags a compile uses (``$POLYC_OPT`` or the default);
    a runtime whose sources or flags changed since is built into the cache as
    before."""
    shelf = cbuild.installed_dir()
    old = os.environ.get("POLYC_CACHE_DIR")
    os.environ["POLYC_CACHE_DIR"] = str(shelf)
    try:
        build_runtime.cache_clear()
        return build_runtime()
    finally:
        build_runtime.cache_clear()
        if old is None:
            os.environ.pop("POLYC_CACHE_DIR", None)
        else:
            os.environ["POLYC_CACHE_DIR"] = old


@dataclass
class SimModule:
    """A kernel compiled for the simulator; run it on any config with :meth:`run`."""

    kernel: Kernel
    source: CSource
    built: cbuild.Built
    checks: bool
    mode: str = MODE_DRAM_DIRECT

    @property
    def c_source(self) -> str:
        return self.source.text

    def run(
        self,
        spec: Spec,
        inputs: Mapping[str, object],
        trace_limit: int = runtime.DEFAULT_TRACE_LIMIT,
        functional: bool = True,
    ):
        """Simulate on ``spec``; returns ``(outputs, report)``.

        ``functional=False``: a timing-only run (the same program, calls and
        timing, no data moved or computed: the report's cycles, bytes and energy
        are the functional run's) that returns no outputs (``{}``); missing
        inputs are taken as zeros (their values cannot change the cost).

        Raises:
            InputError: for missing or mis-shaped inputs.
            SimulationError: when the run stops on a violation (an access outside
                its buffer, a buffer that does not fit, ...).
        """
        if not functional:
            inputs = {**_zeros(self.kernel, inputs), **inputs}
        arrays, params = prepare(self.kernel, inputs)
        sim = runtime.Simulator(build_runtime(), spec, trace_limit, functional)
        ffi = self.built.ffi
        args = [int(params[p]) for p in self.source.params]
        args += [ffi.from_buffer("void *", arrays[a]) for a in self.source.arrays]
        fn = getattr(self.built.lib, self.source.function)
        rc = fn(sim.ctx, *args)
        if rc != 0:
            raise SimulationError(
                f"{self.kernel.name} on {spec.name}: {sim.error() or 'stopped'}"
            )
        report = sim.finish(
            kernel=self.kernel.name,
            roofline=roofline(self.kernel, spec, params),
            engine_bound=engine_bound(self.kernel, spec, params),
            mode=self.mode,
            checks=self.checks,
        )
        if not functional:
            return {}, report
        outputs = {a.name: arrays[a.name] for a in self.kernel.outputs}
        return outputs, report


def _zeros(kernel: Kernel, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Zeros for the free inputs of ``kernel`` missing from ``inputs`` (a
    timing-only run; with symbolic sizes the caller passes them all)."""
    missing = [a for a in kernel.free_inputs if a.name not in inputs]
    if not missing or kernel.params:
        return {}
    return {a.name: np.zeros(a.concrete_shape({}), a.dtype.numpy) for a in missing}


def build(kernel: Kernel, *, checks: bool = True, emitter=SimEmitter) -> SimModule:
    """Generate, compile (cached) and load ``kernel`` for the simulator.

    Raises:
        CodegenError: when compilation fails.
    """
    return load(kernel, emitter(kernel).generate(), checks=checks)


def load(kernel: Kernel, source: CSource, *, checks: bool = True) -> SimModule:
    """Compile ``source`` (generated for ``kernel``; cached by content) and load it.

    Raises:
        CodegenError: when compilation fails.
    """
    from codegen.accel import units

    flags = FLAGS + (() if checks else NO_CHECKS)
    # the kernel's units compile while the runtime builds (in the background,
    # polyc/stages.py), the link waits for it
    rt = runtime_location()
    # a large kernel as several units, compiled at once (the same statements);
    # split only when it compiles, so that a cached module is found without it
    jobs = cbuild.jobs()
    function = source.function.removesuffix("_run")
    split = None
    if units.worth_splitting(source.text, jobs):
        split = (
            f"units {units.VERSION} parts {jobs}",
            lambda text: units.split(text, function, jobs),
        )

    opt = cbuild.opt_flags(kernel_opt(source.text))

    def compiled(split, rt):
        return cbuild.build(
            source.text,
            source.cdef,
            name=kernel.name,
            flags=flags,
            link_flags=(str(rt),),
            opt=opt,
            split=split,
            requires=lambda: _runtime_at(rt),
        )

    def linked(rt):
        try:
            return compiled(split, rt)
        except CodegenError:
            if split is None:
                raise
            return compiled(None, rt)  # the one-unit C, whose error is the user's

    try:
        built = linked(rt)
    except _RuntimeElsewhere as moved:  # a build this process started before
        built = linked(moved.path)
    return SimModule(kernel, source, built, checks)


def kernel_opt(text: str) -> str:
    """The optimisation flags (before ``$POLYC_OPT``) of a simulator kernel of
    C ``text``: :data:`codegen.build.SIM_SCALAR_KERNEL_OPT` when it runs
    statements on the scalar core (their loops are the simulation's own work),
    else :data:`codegen.build.SIM_KERNEL_OPT`."""
    if f"pc_scalar({CTX}," in text:
        return cbuild.SIM_SCALAR_KERNEL_OPT
    return cbuild.SIM_KERNEL_OPT


def numpy_inputs(kernel: Kernel, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random inputs for ``kernel`` with concrete shapes (benchmarks and demos)."""
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape({})
        dt = a.dtype.numpy
        if a.dtype.is_float:
            out[a.name] = rng.standard_normal(shape).astype(dt)
        else:
            out[a.name] = rng.integers(-8, 8, size=shape).astype(dt)
    return out
