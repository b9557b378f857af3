"""Accelerator target for placed kernels: buffers, DMA, MAC-array and vector calls.

:class:`PlacedEmitter` extends the DRAM-direct
:class:`~codegen.accel.direct.SimEmitter` with what the marks of placement and
engine mapping ask for (:mod:`polyc.ir.marks`):

- ``@scope``: ``pc_alloc`` of the layer's buffers at the planner's offsets before
  the subtree, ``pc_free`` after it;
- ``pc_in_<buf>`` / ``pc_out_<buf>`` (copy statements of a ``@buffer``): DMA of
  the tile's box (see :mod:`codegen.accel.copies`);
- ``pc_mac_<stmt>`` under ``@tensorize``: ``pc_mac`` calls over strided views of
  the buffers (see :mod:`codegen.accel.maccall`) instead of the statement's loops;
- ``@vector``: the statements' loops run on the buffers for their values (checked
  accesses, instances not charged to the scalar core), then one ``pc_vector`` per
  statement charges the tile to the vector unit (plus one tree step per run of a
  reduction into one element);
- ``@gather``: ``pc_gather`` calls (an indirect DMA, see
  :mod:`codegen.accel.gathercall`) instead of the statement's loops;
- ``@prefetch``: nothing in place of the copy's loops; its chunks, one
  ``pc_dma`` each of rows of the weight into its home
  (:func:`codegen.accel.gathercall.prefetch`), go before the layers the mark
  names (:meth:`PlacedEmitter.top`);
- every other statement runs on the scalar core, reading its buffers, after a
  ``pc_wait`` on them.

``flush`` (the scalar core's instance counts) precedes every call that issues
work or waits, as the runtime's contract asks.
"""

from __future__ import annotations

import cgen as c

from accelerator.hardware.spec import OP_CLASSES
from codegen.accel import direct, gathercall, maccall, names
from codegen.accel.copies import CopyEmitter
from codegen.accel.direct import SimEmitter, distinct
from codegen.accel.info import collect
from codegen.accel.names import CTX, VMASK
from codegen.cexpr import CExpr, c_type
from codegen.emit import CEmitter, CSource, raw_name
from polyc.errors import CodegenError
from polyc.ir import loops, prefetches, tree
from polyc.ir import marks as pm
from polyc.ir.expr import Load, ops_count
from polyc.ir.kernel import Statement


class PlacedEmitter(CopyEmitter, SimEmitter):
    """Emit a placed, engine-mapped kernel for the simulator."""

    def __init__(self, kernel, function=None, info=None):
        super().__init__(kernel, function)
        # ``info``: :func:`collect` of ``kernel``, when the caller has it
        self.info = collect(kernel) if info is None else info
        self._vector: set[str] = set()
        # the statements of the @vector marks open around the walk, innermost last
        self._tiles: list[tuple[str, ...]] = []
        self._covered: set[str] = set()
        self._stmt: Statement | None = None
        self._ahead: list = []  # chunks fetched ahead, not yet emitted (top)
        # the copies of weights fetched in chunks: bound at their home for the
        # layers from their first chunk to their last reader (_interleaved)
        self._lazy = {ch.copy for ch in prefetches.chunks(kernel)}

    # declarations ---------------------------------------------------------------
    def prologue(self) -> list[c.Generable]:
        out = self.data_flag()
        for s in self.kernel.statements:
            active = self.info.active.get(s.name, {})
            levels = {
                ld.array: self.info.buffers[active[ld.array]].level_index
                if ld.array in active
                else 0
                for ld in (s.target, *s.reads)
            }
            out += self.register(s, levels)
        for b in self.info.buffers.values():
            t = c_type(self.kernel.arrays[b.array].dtype)
            if b.name in self.info.homes:  # the array itself, bound at its home
                bid, raw = names.dram_buffer(b.array), raw_name(b.array)
                if b.array in self._lazy:  # bound with its first chunk
                    out.append(c.Line(f"int {names.buffer(b.name)} = -1;"))
                else:
                    out.append(c.Line(f"const int {names.buffer(b.name)} = {bid};"))
                out.append(c.Line(f"{t} *{names.pointer(b.name)} = ({t} *){raw};"))
                out.append(c.Line(f"const long {names.slot(b.name)} = 0;"))
                for d in range(len(b.extent)):
                    out.append(c.Line(f"const long {names.origin(b.name, d)} = 0;"))
                continue
            out.append(c.Line(f"int {names.buffer(b.name)} = -1;"))
            out.append(c.Line(f"{t} *{names.pointer(b.name)} = 0;"))
            out.append(c.Line(f"long {names.slot(b.name)} = -1;"))
            for d in range(len(b.extent)):
                out.append(c.Line(f"long {names.origin(b.name, d)} = 0;"))
            out += self.halo_record(b)  # reset where the buffer is allocated
        for scope in self.info.scopes:
            for a in scope.allocations:
                if a.name not in self.info.buffers:
                    out.append(c.Line(f"int {names.buffer(a.name)} = -1;"))
        for s in sorted(self.info.folded.values()):
            out.append(c.Line(f"int {names.fresh(s)} = 0;"))
        vec = [s for s, e in self.info.engine.items() if e == "vector"]
        for s in sorted(vec):
            out.append(
                c.Line(
                    f"int64_t {names.vector_count(s)} = 0, {names.vector_runs(s)} = 0, "
                    f"{names.vector_last(s)} = -1, {names.vector_lone(s)} = 0;"
                )
            )
            for k in range(len(self._vector_arrays(self.stmts[s]))):
                out.append(c.Line(f"int64_t {self._span_reset(s, k)};"))
        if vec:
            out.append(c.Line(f"uint64_t {VMASK} = 0;"))
            out.append(c.Statement(f"(void){VMASK}"))
        return out

    def declare_array(self, a) -> list[c.Generable]:
        """As the DRAM-direct emitter's, but a weight's copy fetched in chunks
        is bound where its span begins (:meth:`_interleaved`)."""
        if a.name not in self._lazy:
            return super().declare_array(a)
        dram = names.dram_buffer(a.name)
        return [*CEmitter.declare_array(self, a), c.Line(f"int {dram} = -1;")]

    def flush(self) -> list[c.Generable]:
        """Hand the scalar statements' counts to the runtime (the others never
        count: their work is charged by their engine's calls)."""
        out: list[c.Generable] = []
        for s in self.kernel.statements:
            if self.info.engine.get(s.name) != "scalar":
                continue
            n = names.count(s.name)
            r, w = names.mask(s.name, False), names.mask(s.name, True)
            out.append(
                c.Statement(f"pc_scalar({CTX}, {names.stmt_id(s.name)}, {n}, {r}, {w})")
            )
            out.append(c.Statement(f"{n} = 0, {r} = 0, {w} = 0"))
        return out

    # tree walking ---------------------------------------------------------------
    def body(self, nodes) -> list[c.Generable]:
        if self._ahead and len(nodes) > 1:
            return self._interleaved(nodes)
        out: list[c.Generable] = []
        for n in nodes:
            if not isinstance(n, loops.Mark):
                out.extend(super().body([n]))
                continue
            kind = pm.kind(n.name)
            if kind == "scope":
                out.extend(self._scope(n))
            elif kind == "buffer":
                out.append(c.Comment(pm.summary(n.name)))
                out.extend(self.body(n.body))
            elif kind == "vector" and all(
                s in self.info.folded for s in loops.calls_below(n.body)
            ):
                out.extend(self._fresh(loops.calls_below(n.body)))
            elif kind == "vector":
                out.extend(self._vector_tile(n))
            elif kind == "gather":  # the DMA moves the rows: no loops below
                for stmt in sorted(loops.calls_below(n.body)):
                    out.extend(self.flush() + gathercall.emit(self.kernel, stmt))
            elif kind == "prefetch":  # its chunks go before later layers (top)
                out.append(c.Comment(pm.summary(n.name)))
            elif kind == "tensorize":
                out.append(c.Comment(pm.summary(n.name)))
                calls = [x for x in n.body if isinstance(x, loops.Call)]
                if not calls:  # its MAC calls would silently not run
                    raise CodegenError(
                        f"codegen: {pm.summary(n.name)} has no MAC call directly "
                        "below it because something was inserted between the mark "
                        "and its call. Place buffers above the @tensorize mark "
                        "(schedules.place at the band around it)."
                    )
                for x in calls:
                    out.extend(self.call(x))
            elif tree.parse_band_mark(n.name):
                out.extend(self._scalar_band(n))
            else:
                out.extend(self.mark(n.name, self.body(n.body), n))
        return out

    def top(self, nodes) -> list[c.Generable]:
        """The program, each layer after the chunks of the weights fetched ahead
        that the scheduler put before it (``@prefetch``: a chunk goes before
        the layer that runs its statement, every chunk left before a reader of
        the weight's copy). The layers are the nodes of the first sequence
        below the marks around the whole program (a level's zero block)."""
        self._ahead = gathercall.chunks(self.kernel)
        return self.body(nodes)

    def _interleaved(self, nodes) -> list[c.Generable]:
        """``nodes`` (the layers), each after its chunks fetched ahead. A copy's
        home is bound before the first layer of its span and freed after the
        last (:func:`polyc.ir.prefetches.spans`: the memory planner gives the
        layers outside it those bytes)."""
        pending, self._ahead = self._ahead, []
        readers = {s.name: {ld.array for ld in s.reads} for s in self.kernel.statements}
        layers = [set(loops.calls_below([n])) for n in nodes]
        spans = prefetches.spans(self.kernel, layers)
        out: list[c.Generable] = []
        for i, n in enumerate(nodes):
            stmts = layers[i]
            reads = set().union(*(readers.get(s, set()) for s in stmts))
            due = [ch for ch in pending if ch.before in stmts or ch.copy in reads]
            bind = sorted(a for a, (lo, _) in spans.items() if lo == i)
            if due or bind:
                out.extend(self.flush())
            out.extend(self._bind(a) for a in bind)
            for ch in due:
                out.extend(gathercall.prefetch(self.kernel, ch))
            pending = [ch for ch in pending if ch not in due]
            out.extend(self.body([n]))
            free = sorted(a for a, (_, hi) in spans.items() if hi == i)
            if free:
                out.extend(self.flush())
            for a in free:
                dram = names.dram_buffer(a)
                out.append(c.Statement(f"pc_free({CTX}, {dram})"))
        return out

    def _bind(self, array: str) -> c.Generable:
        """Bind the copy ``array`` at its home (and its buffer's name with it)."""
        dram = names.dram_buffer(array)
        text = f"{dram} = {direct.binding(self.kernel.arrays[array])}"
        for b in self.info.buffers.values():
            if b.array == array and b.name in self.info.homes:
                text += f", {names.buffer(b.name)} = {dram}"
        return c.Statement(text)

    def _scope(self, n) -> list[c.Generable]:
        scope = pm.ScopeMark.parse(n.name)
        pre: list[c.Generable] = [c.Comment(pm.summary(n.name))]
        for a in scope.allocations:
            bid = names.buffer(a.name)
            pre.append(
                c.Statement(
                    f"{bid} = pc_alloc({CTX}, {a.level_index}, {a.offset}, "
                    f"{a.bytes}, {names.cstr(a.name)})"
                )
            )
            if a.name.startswith(pm.ZERO):
                pre.append(c.Statement(f"pc_zero_fill({CTX}, {bid})"))
            b = self.info.buffers.get(a.name)
            if b is not None:
                t = c_type(self.kernel.arrays[b.array].dtype)
                ptr = names.pointer(a.name)
                pre.append(c.Statement(f"{ptr} = ({t} *)pc_ptr({CTX}, {bid})"))
                pre.append(c.Statement(f"{names.slot(a.name)} = -1"))
                pre += self.unknown_halos(b)
        post = self.flush()
        post += [
            c.Statement(f"pc_free({CTX}, {names.buffer(a.name)})")
            for a in scope.allocations
        ]
        return pre + self.body(n.body) + post

    def _scalar_band(self, n) -> list[c.Generable]:
        """A band of scalar statements: wait once for the buffers they touch."""
        stmts = loops.calls_below(n.body)
        if stmts and all(s in self.info.folded for s in stmts):
            return self._fresh(stmts)
        scalar = {
            s
            for s in stmts
            if self.info.engine.get(s) == "scalar" and s not in self._covered
        }
        if not scalar or _has_engine_marks(n.body) or not self.info.any:
            return self.mark(n.name, self.body(n.body), n)
        waits = self._waits(scalar)
        saved = self._covered
        self._covered = saved | scalar
        inner = self.body(n.body)
        self._covered = saved
        return (self.flush() if waits else []) + waits + self.mark(n.name, inner, n)

    def _fresh(self, stmts) -> list[c.Generable]:
        """A zero init folded into MAC calls: the next calls overwrite instead."""
        out: list[c.Generable] = [c.Comment(f"{', '.join(sorted(stmts))}: folded")]
        for s in sorted(stmts):
            out.append(c.Statement(f"{names.fresh(self.info.folded[s])} = 1"))
        return out

    def _waits(self, stmts) -> list[c.Generable]:
        bufs: list[str] = []
        for s in sorted(stmts):
            stmt = self.stmts[s]
            active = self.info.active.get(s, {})
            for ld in (stmt.target, *stmt.reads):
                v = (
                    names.buffer(active[ld.array])
                    if ld.array in active
                    else names.dram_buffer(ld.array)
                )
                if v not in bufs:
                    bufs.append(v)
        return [c.Statement(f"pc_wait({CTX}, {v})") for v in bufs]

    # statements -----------------------------------------------------------------
    def call(self, n: loops.Call) -> list[c.Generable]:
        name = n.stmt
        if name.startswith(pm.IN):
            return self._copy_in(self.info.buffers[name[len(pm.IN) :]], n)
        if name.startswith(pm.OUT):
            # a buffer placed inside a @vector mark (a layer of one tile): the
            # vector work it stores is issued first, else the copy would read
            # the buffer before the vector unit writes it in the simulated time
            pre = self._charge_open() if self._tiles else []
            return pre + self._copy_out(self.info.buffers[name[len(pm.OUT) :]], n)
        if name.startswith(pm.MAC):
            stmt = self.stmts[name[len(pm.MAC) :]]
            tm = self.info.tensorize[stmt.name]
            active = self.info.active.get(name, {})
            return maccall.emit(self, stmt, tm, active, _args(n))
        return super().call(n)

    def statement(self, stmt: Statement, args: dict[str, str]) -> list[c.Generable]:
        self._stmt = stmt
        if stmt.name in self.info.folded:
            return self._fresh({stmt.name})
        if stmt.name in self._vector:
            return self._vector_statement(stmt, args)
        out: list[c.Generable] = []
        if (
            self.info.any
            and stmt.name not in self._covered
            and self.info.engine.get(stmt.name) == "scalar"
        ):
            out += self.flush() + self._waits({stmt.name})
        if self.info.engine.get(stmt.name) == "mac":
            raise CodegenError(
                f"codegen: {stmt.name} is tensorized but its loops were reached "
                "because the @tensorize mark lost its pc_mac statement. Tensorize "
                "again."
            )
        return out + super().statement(stmt, args)

    def element(self, array: str, index: list[str]) -> str:
        buf = self._buffer_of(array)
        if buf is None:
            return super().element(array, index)
        return f"{names.pointer(buf.name)}[{self._offset(buf, index)}]"

    def _buffer_of(self, array: str) -> pm.BufferMark | None:
        if self._stmt is None:
            return None
        name = self.info.active.get(self._stmt.name, {}).get(array)
        return self.info.buffers[name] if name else None

    def _offset(self, buf: pm.BufferMark, index: list[str]) -> str:
        terms = [f"{names.slot(buf.name)} * {buf.slot}"]
        for d, (idx, st) in enumerate(zip(index, buf.strides)):
            r = f"(({idx}) - {names.origin(buf.name, d)})"
            f = buf.phase(d)
            if f > 1:  # polyphase: r >= 0 inside the box, so C's / and % floor
                terms.append(f"{buf.pstrides[d]} * ({r} % {f}) + {st} * ({r} / {f})")
            else:
                terms.append(f"{st} * {r}")
        return " + ".join(terms)

    def check(self, stmt, ld: Load, r: CExpr, iters, is_write):
        buf = self._buffer_of(ld.array)
        mask = VMASK if stmt.name in self._vector else names.mask(stmt.name, is_write)
        if buf is None:
            if stmt.name in self._vector:
                raise CodegenError(
                    f"codegen: {stmt.name} runs on the vector unit but reads "
                    f"{ld.array} from DRAM because {ld.array} has no buffer at its "
                    "position. Place every array of a vector-mapped statement."
                )
            return super().check(stmt, ld, r, iters, is_write)
        idx = names.i64_list(
            [
                f"({r.aff(x)}) - {names.origin(buf.name, d)}"
                for d, x in enumerate(ld.index)
            ]
        )
        ext = names.i64_list([str(e) for e in buf.extent])
        bid, sid = names.buffer(buf.name), names.stmt_id(stmt.name)
        its = names.i64_list(list(iters))
        return c.Statement(
            f"PC_CHECK({CTX}, {mask}, {bid}, {sid}, "
            f"{len(ld.index)}, {idx}, {ext}, {len(iters)}, {its})"
        )

    # vector unit -----------------------------------------------------------------
    def _vector_tile(self, n) -> list[c.Generable]:
        vm = pm.VectorMark.parse(n.name)
        saved = self._vector
        self._vector = saved | set(vm.stmts)
        self._tiles.append(tuple(vm.stmts))
        inner = self.body(n.body)
        self._vector = saved
        post = self._charge_open()
        self._tiles.pop()
        return [c.Comment(pm.summary(n.name)), *inner, *post]

    def _charge_open(self) -> list[c.Generable]:
        """Issue the vector work counted so far by the innermost open @vector
        mark's statements (each ``pc_vector`` skips itself when nothing is
        counted since the last)."""
        out = self.flush()
        for s in self._tiles[-1]:
            out.extend(self._charge_vector(self.stmts[s]))
        return out

    def _vector_statement(self, stmt: Statement, args) -> list[c.Generable]:
        r = self.renderer(args)
        iters = [args[i] for i in stmt.iterators]
        accesses = distinct((stmt.target, *stmt.reads))
        out = [self.check(stmt, ld, r, iters, i == 0) for i, ld in enumerate(accesses)]
        out.append(self.assign(stmt, r))
        out.append(c.Statement(f"{names.vector_count(stmt.name)}++"))
        # the bytes the operation touches: the hull of its elements in each buffer
        # (not the whole slot: the MAC array may work on the rest of it meanwhile)
        arrays = self._vector_arrays(stmt)
        for ld in accesses:
            buf = self._buffer_of(ld.array)
            if buf is None:
                continue
            where = self._offset(buf, [r.aff(x) for x in ld.index])
            k = arrays.index(ld.array)
            lo, hi = names.vector_span(stmt.name, k)
            out.append(c.Statement(f"if (({where}) < {lo}) {lo} = {where}"))
            out.append(c.Statement(f"if (({where}) > {hi}) {hi} = {where}"))
            p = period(buf)
            if p:  # and the runs it touches of each period (see period)
                alo, ahi = names.vector_arc(stmt.name, k)
                m = f"pc_m_{k}"
                out.append(
                    c.Block(
                        [
                            c.Line(f"int64_t {m} = ({where}) % {p};"),
                            c.Statement(f"if ({m} < {alo}) {alo} = {m}"),
                            c.Statement(f"if ({m} > {ahi}) {ahi} = {m}"),
                        ]
                    )
                )
        if stmt.reduction is not None:
            buf = self._buffer_of(stmt.target.array)
            idx = [r.aff(x) for x in stmt.target.index]
            where = self._offset(buf, idx) if buf else "0"
            # a lone contribution is a lane's element-wise accumulate (its add is
            # in the body's ops); a run of two or more into one element is folded
            # across lanes, one reduction step
            last, lone = names.vector_last(stmt.name), names.vector_lone(stmt.name)
            out.append(
                c.If(
                    f"({where}) != {last}",
                    c.Block(
                        [
                            c.Statement(f"{last} = {where}"),
                            c.Statement(f"{lone} = 1"),
                        ]
                    ),
                    c.If(
                        lone,
                        c.Block(
                            [
                                c.Statement(f"{names.vector_runs(stmt.name)}++"),
                                c.Statement(f"{lone} = 0"),
                            ]
                        ),
                    ),
                )
            )
        return out

    def _charge_vector(self, stmt: Statement) -> list[c.Generable]:
        ops = ops_count(stmt.body)
        counts = ", ".join(str(ops.get(k, 0)) for k in OP_CLASSES) + ", 0"
        ranges = []
        for k, array in enumerate(self._vector_arrays(stmt)):
            b = self._vector_buffer(stmt.name, k)
            lo, hi = names.vector_span(stmt.name, k)
            w = int(array == stmt.target.array)
            e, p = b.elem_bytes, period(b)
            arcs = ""
            if p:
                alo, ahi = names.vector_arc(stmt.name, k)
                arcs = f", {p * e}, {alo} * {e}, ({ahi} - {alo} + 1) * {e}"
            ranges.append(
                f"{{{names.buffer(b.name)}, {w}, {lo} * {e}, ({hi} + 1) * {e}{arcs}}}"
            )
        s = stmt.name
        # a requantization fused into the MAC array's output path is charged there
        call = "pc_mac_output" if s in self.info.mac_output else "pc_vector"
        n, runs, last = (
            names.vector_count(s),
            names.vector_runs(s),
            names.vector_last(s),
        )
        out = [
            c.Block(
                [
                    c.Line(
                        f"pc_vop pc_op = {{{names.cstr(s)}, {n}, {{{counts}}}, "
                        f"{len(ranges)}, {{{', '.join(ranges)}}}}};"
                    ),
                    c.Statement(f"if ({n} > 0) {call}({CTX}, &pc_op)"),
                ]
            )
        ]
        if stmt.reduction is not None:
            out.append(
                c.Block(
                    [
                        c.Line(
                            f"pc_vop pc_red = {{{names.cstr(s + ' reduce')}, {runs} * "
                            f"{CTX}->spec.lanes, {{0, 0, 0, 0, 0, 1}}, "
                            f"{len(ranges)}, {{{', '.join(ranges)}}}}};"
                        ),
                        c.Statement(f"if ({runs} > 0) pc_vector({CTX}, &pc_red)"),
                    ]
                )
            )
        lone = names.vector_lone(s)
        out.append(c.Statement(f"{n} = 0, {runs} = 0, {last} = -1, {lone} = 0"))
        for k in range(len(ranges)):
            out.append(c.Statement(self._span_reset(s, k)))
        return out

    def _vector_buffer(self, stmt: str, k: int):
        """The buffer of a vector statement's ``k``-th array (its target first)."""
        array = self._vector_arrays(self.stmts[stmt])[k]
        return self.info.buffers[self.info.active.get(stmt, {})[array]]

    def _span_reset(self, stmt: str, k: int) -> str:
        """The bytes a vector statement's ``k``-th array touches, set to none:
        their hull and, where its buffer has a :func:`period`, their arcs."""
        lo, hi = names.vector_span(stmt, k)
        out = f"{lo} = INT64_MAX, {hi} = -1"
        if period(self._vector_buffer(stmt, k)):
            alo, ahi = names.vector_arc(stmt, k)
            out += f", {alo} = INT64_MAX, {ahi} = -1"
        return out

    @staticmethod
    def _vector_arrays(stmt: Statement) -> list[str]:
        """The arrays a vector statement touches, its target first (one byte
        range each in its ``pc_vector``)."""
        out: list[str] = []
        for ld in (stmt.target, *stmt.reads):
            if ld.array not in out:
                out.append(ld.array)
        return out


def period(buf: pm.BufferMark) -> int:
    """The elements between the runs a box of ``buf`` touches: the stride of its
    outermost dimension of more than one element, where it has two such or
    more (a tile of rows of a channel-major array is one run per channel, and
    the runtime's hazards are those runs', not their hull's); 0 otherwise, or
    where a dimension is polyphase."""
    if any(buf.phase(d) > 1 for d in range(len(buf.extent))):
        return 0
    wide = [st for st, n in zip(buf.strides, buf.extent) if n > 1]
    return max(wide) if len(wide) >= 2 else 0


def _args(n: loops.Call) -> list[str]:
    return [loops.to_c(a) for a in n.args]


def _has_engine_marks(nodes) -> bool:
    for n in nodes:
        if isinstance(n, loops.Mark):
            if pm.kind(n.name) is not None:
                return True
            if _has_engine_marks(n.body):
                return True
        elif isinstance(n, loops.For):
            if _has_engine_marks(n.body):
                return True
        elif isinstance(n, loops.If) and (
            _has_engine_marks(n.then) or _has_engine_marks(n.orelse)
        ):
            return True
    return False


MODE_PLACED = "placed"


def build(kernel, *, checks: bool = True):
    """Build ``kernel`` for the simulator: with :class:`PlacedEmitter` when its
    schedule carries placement or engine marks, DRAM-direct otherwise.

    Raises:
        CodegenError: when compilation fails or a mark is inconsistent.
    """
    source, mode = generate(kernel)
    return load(kernel, source, mode, checks=checks)


def generate(kernel) -> tuple[CSource, str]:
    """The C of ``kernel`` for the simulator and its mode: placed (with
    :class:`PlacedEmitter`) when its schedule carries placement or engine marks,
    else DRAM-direct.

    Raises:
        CodegenError: when a mark is inconsistent.
    """
    info = collect(kernel)  # walks the whole tree: once
    if not info.any:
        return direct.SimEmitter(kernel).generate(), direct.MODE_DRAM_DIRECT
    return PlacedEmitter(kernel, info=info).generate(), MODE_PLACED


def load(kernel, source: CSource, mode: str, *, checks: bool = True):
    """Compile ``source`` (from :func:`generate`; cached by content) and load it.

    Raises:
        CodegenError: when compilation fails.
    """
    module = direct.load(kernel, source, checks=checks)
    module.mode = mode
    return module
