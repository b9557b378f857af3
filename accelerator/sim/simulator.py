"""A Python handle on one context of the C runtime: the simulator's driver.

The runtime (``accelerator/sim/runtime/*.c``, API in ``polyc_rt.h``) is built once as
a shared library (``codegen.accel.direct.build_runtime``) that every generated
kernel links against; the numbers of its interface come from :mod:`.abi`.
:class:`Simulator` wraps one context of that library: it fills the ``pc_spec``
struct from a :class:`Spec`, turns a runtime error into
:class:`~polyc.errors.SimulationError`, and reads back the statistics and the trace
as a :class:`~accelerator.sim.report.Report` (:mod:`.readout`).

The hardware numbers are passed at run time, never compiled in: one compiled module
runs on every config, and the build cache key stays honest.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from accelerator.hardware.spec import MAC_DTYPES, Spec
from accelerator.sim.abi import (
    CLASS_INDEX,
    DATAFLOWS,
    MAC_MODES,
    MAC_TYPES,
    NAME_BYTES,
    VEC_DTYPES,
    VEC_OPS,
)
from accelerator.sim.readout import collect
from polyc.errors import SimulationError

DEFAULT_TRACE_LIMIT = 65536


def fill_spec(
    ffi, spec: Spec, trace_limit: int = DEFAULT_TRACE_LIMIT, functional: bool = True
):
    """A ``pc_spec *`` filled from ``spec`` (kept alive by the returned cdata);
    ``functional=False``: a timing-only context (``pc_spec.timing_only``)."""
    s = ffi.new("pc_spec *")
    s.clock_ghz = spec.clock_ghz
    a = spec.mac_array
    s.rows, s.cols = a.rows, a.cols
    s.dataflow = DATAFLOWS[a.dataflow]
    s.double_buffered = a.double_buffered
    for name in MAC_DTYPES:
        i = MAC_TYPES[name]
        d = a.dtypes.get(name)
        s.mac_rate[i] = d.macs_per_cycle if d else 0.0
        s.mac_pj[i] = d.pj_per_mac if d else 0.0
    s.input_levels = _mask(spec, a.input_levels)
    s.weight_levels = _mask(spec, a.weight_levels)
    s.acc_levels = _mask(spec, a.accumulator_levels)
    s.mac_requantize = int(a.requantize)
    v = spec.vector
    s.lanes = v.lanes
    s.vector_levels = _mask(spec, v.levels)
    s.vec_pj = v.pj_per_op
    for c, i in CLASS_INDEX.items():
        s.vec_cycles[i] = v.cycles[c]
        s.scalar_cycles[i] = spec.scalar.cycles.get(c, 0)
    s.stmt_cycles = spec.scalar.statement_cycles
    s.issue_cycles = spec.scalar.issue_cycles
    s.queue_depth = spec.scalar.queue_depth
    s.scalar_pj = spec.scalar.pj_per_op
    s.nlevels = len(spec.memory)
    for i, m in enumerate(spec.memory):
        L = s.level[i]
        L.name = m.name.encode()[: NAME_BYTES - 1]
        L.is_dram = m.kind == "dram"
        L.capacity = m.capacity_bytes
        L.bytes_per_cycle = m.bytes_per_cycle
        L.latency = m.latency_cycles
        L.alignment = m.alignment_bytes
        L.read_pj = m.read_pj_per_byte
        L.write_pj = m.write_pj_per_byte
        L.read_bytes_per_cycle = m.read_bytes_per_cycle or 0.0
        L.write_bytes_per_cycle = m.write_bytes_per_cycle or 0.0
        L.banks = m.banks if m.kind == "sram" else 1
    s.channels = spec.dma.channels
    s.dma_setup = spec.dma.setup_cycles
    s.dma_bytes_per_cycle = spec.dma.bytes_per_cycle
    s.dma_dims = spec.dma.max_dims
    s.trace_limit = trace_limit
    s.timing_only = int(not functional)
    return s


def _mask(spec: Spec, names: Sequence[str]) -> int:
    return sum(1 << spec.level_index(n) for n in names)


class Simulator:
    """One simulator context over a built module's runtime (``ffi``, ``lib``).

    The methods mirror the C API (see docs/accelerator.md) with Python
    arguments: views are ``(buffer, offset, row_stride, col_stride)`` in elements;
    levels are names or indices. Any runtime error raises ``SimulationError``.
    With ``functional=False`` the context is timing-only: every call is timed and
    charged as in a functional one, but no data moves and nothing is computed
    (see ``pc_spec.timing_only`` in ``polyc_rt.h``).
    """

    def __init__(
        self,
        built,
        spec: Spec,
        trace_limit: int = DEFAULT_TRACE_LIMIT,
        functional: bool = True,
    ):
        self.ffi, self.lib, self.spec = built.ffi, built.lib, spec
        self.functional = bool(functional)
        self._spec_c = fill_spec(self.ffi, spec, trace_limit, functional)
        self.ctx = self.ffi.gc(self.lib.pc_create(self._spec_c), self.lib.pc_destroy)
        self._keep: list = []  # numpy arrays bound as DRAM must outlive the context
        self.check()

    # errors ------------------------------------------------------------------------
    def error(self) -> str | None:
        msg = self.lib.pc_error(self.ctx)
        return None if msg == self.ffi.NULL else self.ffi.string(msg).decode()

    def check(self) -> None:
        """Raise SimulationError if the runtime stopped on a violation."""
        msg = self.error()
        if msg is not None:
            raise SimulationError(msg)

    # buffers -----------------------------------------------------------------------
    def bind(self, name: str, array: np.ndarray) -> int:
        """Bind a C-contiguous numpy array as a DRAM buffer; returns its id."""
        if not array.flags.c_contiguous:
            raise ValueError("bind: the array must be C-contiguous")
        self._keep.append(array)
        ptr = self.ffi.from_buffer("void *", array)
        buf = self.lib.pc_bind(self.ctx, name.encode(), ptr, array.nbytes)
        self.check()
        return buf

    def bind_at(
        self, name: str, array: np.ndarray, level: str | int, offset: int
    ) -> int:
        """Bind a C-contiguous numpy array held in on-chip ``level`` at
        ``offset`` (an intermediate's home: its values stay in ``array``, its
        copies take the level's timing); returns its id."""
        if not array.flags.c_contiguous:
            raise ValueError("bind_at: the array must be C-contiguous")
        self._keep.append(array)
        ptr = self.ffi.from_buffer("void *", array)
        buf = self.lib.pc_bind_at(
            self.ctx, name.encode(), ptr, array.nbytes, self.level(level), offset
        )
        self.check()
        return buf

    def level(self, level: str | int) -> int:
        return level if isinstance(level, int) else self.spec.level_index(level)

    def alloc(self, level: str | int, offset: int, nbytes: int, name: str) -> int:
        buf = self.lib.pc_alloc(
            self.ctx, self.level(level), offset, nbytes, name.encode()
        )
        self.check()
        return buf

    def free(self, buf: int) -> None:
        self.lib.pc_free(self.ctx, buf)
        self.check()

    def zero_fill(self, buf: int) -> None:
        """Set an SRAM buffer to zero (functional only, as a level's zero block)."""
        self.lib.pc_zero_fill(self.ctx, buf)
        self.check()

    def array(self, buf: int, dtype, shape: Sequence[int]) -> np.ndarray:
        """A numpy view of a buffer's memory (to fill or read SRAM in tests)."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        ptr = self.lib.pc_ptr(self.ctx, buf)
        if ptr == self.ffi.NULL:
            self.check()
        return np.frombuffer(self.ffi.buffer(ptr, n), dtype=dt).reshape(shape)

    def ready(self, buf: int) -> int:
        """The cycle the last asynchronous operation on ``buf`` ends."""
        return int(self.lib.pc_ready(self.ctx, buf))

    # engines -----------------------------------------------------------------------
    def dma(
        self,
        dst: tuple[int, int, Sequence[int]],
        src: tuple[int, int, Sequence[int]],
        sizes: Sequence[int],
        elem_bytes: int,
        channel: int = -1,
        label: str = "",
    ) -> None:
        """Copy a block of ``sizes`` elements: ``dst``/``src`` are
        ``(buffer, offset, strides)`` in elements."""
        n = len(sizes)
        i64 = "int64_t[]"
        self.lib.pc_dma(
            self.ctx,
            channel,
            elem_bytes,
            n,
            self.ffi.new(i64, list(sizes) or [0]),
            dst[0],
            dst[1],
            self.ffi.new(i64, list(dst[2]) or [0]),
            src[0],
            src[1],
            self.ffi.new(i64, list(src[2]) or [0]),
            label.encode(),
        )
        self.check()

    def _view(self, v: Sequence[int]):
        return self.ffi.new("pc_view *", list(v))[0]

    def mac(
        self,
        m: int,
        n: int,
        k: int,
        a,
        b,
        c,
        dtype: str = "float32",
        acc_dtype: str | None = None,
        accumulate: bool = False,
        label: str = "",
    ) -> None:
        """``C[m, n] (+)= A[m, k] @ B[k, n]`` on the MAC array."""
        acc = acc_dtype or ("int32" if dtype == "int8" else dtype)
        mode = MAC_MODES[(dtype, acc)]
        self.lib.pc_mac(
            self.ctx,
            mode,
            m,
            n,
            k,
            int(accumulate),
            self._view(a),
            self._view(b),
            self._view(c),
            label.encode(),
        )
        self.check()

    def vec_binary(self, op, dtype, rows, cols, out, a, b, label="") -> None:
        self.lib.pc_vec_binary(
            self.ctx,
            VEC_OPS[op],
            VEC_DTYPES[dtype],
            rows,
            cols,
            self._view(out),
            self._view(a),
            self._view(b),
            label.encode(),
        )
        self.check()

    def vec_unary(self, op, dtype, rows, cols, out, a, label="") -> None:
        self.lib.pc_vec_unary(
            self.ctx,
            VEC_OPS[op],
            VEC_DTYPES[dtype],
            rows,
            cols,
            self._view(out),
            self._view(a),
            label.encode(),
        )
        self.check()

    def vec_reduce(self, op, dtype, rows, cols, out, a, accumulate=False, label=""):
        self.lib.pc_vec_reduce(
            self.ctx,
            VEC_OPS[op],
            VEC_DTYPES[dtype],
            rows,
            cols,
            int(accumulate),
            self._view(out),
            self._view(a),
            label.encode(),
        )
        self.check()

    def vector(self, elements: int, ops: dict[str, int], access, label="") -> None:
        """Time vector work computed elsewhere: ``ops`` per element by class,
        ``access`` a list of ``(buffer, is_write, lo, hi)`` byte ranges, or
        ``(buffer, is_write, lo, hi, period, arc, arc_len)``: only the bytes of
        ``[lo, hi)`` whose offset less ``arc`` modulo ``period`` is below
        ``arc_len`` (the runs a tile of rows touches in each channel)."""
        op = self.ffi.new("pc_vop *")
        name = self.ffi.new("char[]", label.encode())
        op.name = name
        op.elements = elements
        for c, v in ops.items():
            op.ops[CLASS_INDEX[c]] = v
        op.naccess = len(access)
        for i, (buf, is_write, lo, hi, *arcs) in enumerate(access):
            op.access[i] = (buf, int(is_write), lo, hi, *(arcs or (0, 0, 0)))
        self.lib.pc_vector(self.ctx, op)
        self.check()

    # scalar core -------------------------------------------------------------------
    def stmt(
        self,
        name: str,
        ops: dict[str, int] | None = None,
        access: Sequence[tuple[str | int, int, bool]] = (),
        macs: int = 0,
        iterators: Sequence[str] = (),
    ) -> int:
        """Register a scalar statement: ``access`` lists ``(level, bytes, is_write)``
        per instance. Returns its id for :meth:`scalar`."""
        d = self.ffi.new("pc_stmt_desc *")
        keep = [self.ffi.new("char[]", name.encode())]
        keep.append(self.ffi.new("char[]", ",".join(iterators).encode()))
        d.name, d.iterators = keep
        for c, v in (ops or {}).items():
            d.ops[CLASS_INDEX[c]] = v
        d.macs = macs
        d.naccess = len(access)
        for i, (level, nbytes, is_write) in enumerate(access):
            d.level[i] = self.level(level)
            d.bytes[i] = nbytes
            d.is_write[i] = int(is_write)
        sid = self.lib.pc_stmt(self.ctx, d)
        self.check()
        return sid

    def scalar(self, stmt: int, instances: int) -> None:
        self.lib.pc_scalar(self.ctx, stmt, instances, 0, 0)
        self.check()

    def wait(self, buf: int) -> None:
        self.lib.pc_wait(self.ctx, buf)
        self.check()

    def wait_all(self) -> None:
        self.lib.pc_wait_all(self.ctx)
        self.check()

    @property
    def now(self) -> int:
        """The scalar core's current cycle (where the next command is issued)."""
        return int(self.lib.pc_now(self.ctx))

    # results -----------------------------------------------------------------------
    def finish(
        self,
        kernel: str = "",
        roofline=None,
        mode: str = "",
        checks=True,
        engine_bound=None,
    ):
        """Wait for every engine and return the :class:`Report` of this context
        (``roofline`` and ``engine_bound``: the kernel's two lower bounds)."""
        stats = self.lib.pc_finish(self.ctx)
        return collect(
            self,
            stats,
            kernel=kernel,
            roofline=roofline,
            mode=mode,
            checks=checks,
            engine_bound=engine_bound,
        )
