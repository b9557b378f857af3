"""DMA copies of placed buffers: what ``pc_in_<buf>`` and ``pc_out_<buf>`` become.

A copy-in toggles the buffer's slot, sets the tile's origin and, when the buffer is
filled from outside, moves the tile's box in with ``pc_dma`` (from DRAM, or from the
enclosing buffer of the same array); a box that leaves its array is clipped to it
after the slot is zero-filled from the level's zero block. A copy-out moves the
written box back. A large copy is cut along its outermost dimension into
``chunks`` calls over disjoint byte ranges, each taking the first free channel.
"""

from __future__ import annotations

import cgen as c

from codegen.accel import names
from codegen.accel.info import functions, pw_to_c
from codegen.accel.names import CTX, bind_args
from polyc.errors import CodegenError
from polyc.ir import loops
from polyc.ir import marks as pm

#: values a slot's halo record holds per dimension (:meth:`CopyEmitter._zero_halo`)
HALO_FIELDS = 3


def _args(n: loops.Call) -> list[str]:
    return [loops.to_c(a) for a in n.args]


class CopyEmitter:
    """The copy statements of :class:`codegen.accel.placed.PlacedEmitter` (a mixin: it
    uses the emitter's buffers, offsets and ``flush``)."""

    def _copy_in(self, b: pm.BufferMark, n: loops.Call) -> list[c.Generable]:
        args = _args(n)
        lines = bind_args(args)
        lo = [pw_to_c(f, args) for f in functions(b.lo)]
        lines.append(
            c.Statement(
                f"{names.slot(b.name)} = ({names.slot(b.name)} + 1) % {b.slots}"
            )
        )
        for d, e in enumerate(lo):
            lines.append(c.Statement(f"{names.origin(b.name, d)} = {e}"))
        origin = [names.origin(b.name, d) for d in range(len(lo))]
        hi = [pw_to_c(f, args) for f in functions(b.hi)]
        if b.copy_in:
            lines += self._dma(b, origin, hi, True)
        elif b.clamp:
            # nothing flows in, but the box leaves the array: the engines read its
            # halo as the padding's zeros, so the slot's halo is zeroed all the same
            lines += self._bounds(b, origin, hi) + self.flush()
            lines += self._zero_halo(b, origin, hi)
        return [c.Comment(f"{pm.IN}{b.name}"), c.Block(lines)]

    def _copy_out(self, b: pm.BufferMark, n: loops.Call) -> list[c.Generable]:
        if not b.copy_out:
            return []
        args = _args(n)
        lines = bind_args(args)
        lo = [pw_to_c(f, args) for f in functions(b.wlo or b.lo)]
        hi = [pw_to_c(f, args) for f in functions(b.whi or b.hi)]
        lines += self._dma(b, lo, hi, False)
        return [c.Comment(f"{pm.OUT}{b.name}"), c.Block(lines)]

    def _dma(self, b: pm.BufferMark, lo, hi, inbound: bool) -> list[c.Generable]:
        """Move the box [lo, hi] between the buffer and its outer end."""
        shape = self.kernel.arrays[b.array].concrete_shape({})
        nd = len(lo)
        clip = b.clamp and inbound
        lines = (
            self._bounds(b, lo, hi)
            if clip
            else [
                c.Line(f"const long pc_l{d} = {lo[d]}, pc_h{d} = {hi[d]};")
                for d in range(nd)
            ]
        )
        parent = self.info.parent.get(b.name)
        lines += self.flush()
        if clip:
            lines += self._zero_halo(b, lo, hi)
        split = _split_dim(b)
        index = [f"pc_l{d}" for d in range(nd)]
        sizes = [f"pc_h{d} - pc_l{d} + 1" for d in range(nd)]
        if split is None:
            lines.append(self._dma_call(b, parent, shape, index, sizes, inbound))
            return lines
        # several DMA calls along one dimension: each takes the first free channel
        d = split
        index[d], sizes[d] = "pc_c", "pc_e - pc_c + 1"
        lines.append(
            c.Line(f"const long pc_q = (pc_h{d} - pc_l{d} + {b.chunks}) / {b.chunks};")
        )
        body = c.Block(
            [
                c.Line(f"const long pc_e = min(pc_c + pc_q - 1, pc_h{d});"),
                self._dma_call(b, parent, shape, index, sizes, inbound),
            ]
        )
        lines.append(
            c.For(f"long pc_c = pc_l{d}", f"pc_c <= pc_h{d}", "pc_c += pc_q", body)
        )
        return lines

    def _bounds(self, b: pm.BufferMark, lo, hi) -> list[c.Generable]:
        """``pc_l<d>``, ``pc_h<d>``: the box [lo, hi] clipped to the array."""
        shape = self.kernel.arrays[b.array].concrete_shape({})
        return [
            c.Line(
                f"const long pc_l{d} = max({lo[d]}, 0), "
                f"pc_h{d} = min({hi[d]}, {shape[d] - 1});"
            )
            for d in range(len(lo))
        ]

    def _zero_halo(self, b: pm.BufferMark, lo, hi) -> list[c.Generable]:
        """Zero the halo of the box [lo, hi] (the part outside the array, clipped
        to ``pc_l``/``pc_h`` by :meth:`_bounds`) from the level's zero block: per
        dimension, the slabs before and after the part inside the array (corners
        may be zeroed twice), not the whole slot.

        A slot whose last fill had the same halo (the same widths outside the
        array and the same box, per dimension: :func:`halo_key`) still holds
        those zeros, since copies write only the part inside the array and the
        engines write only elements of it: its zeroing is skipped (a depthwise
        convolution over whole images, tiled by channel, zeroes each slot once
        instead of every tile). A polyphase buffer zeroes every time (where its
        phases start depends on the origin)."""
        shape = self.kernel.arrays[b.array].concrete_shape({})
        nd = len(lo)
        lines: list[c.Generable] = []
        for d in range(nd):
            for cond, first, size in (
                (f"pc_l{d} > {lo[d]}", lo[d], f"pc_l{d} - ({lo[d]})"),
                (f"pc_h{d} < {hi[d]}", f"pc_h{d} + 1", f"({hi[d]}) - pc_h{d}"),
            ):
                index = list(lo)
                sizes = [f"({hi[e]}) - ({lo[e]}) + 1" for e in range(nd)]
                index[d], sizes[d] = first, size
                call = self._dma_call(b, None, shape, index, sizes, True, zero=True)
                lines.append(c.If(cond, c.Block([call])))
        if not self.zeroes_once(b):
            return lines
        # per dimension the widths below and above the array and the box's
        # extent less one: HALO_FIELDS values
        values = [
            v
            for d in range(nd)
            for v in (
                f"pc_l{d} - ({lo[d]})",
                f"({hi[d]}) - pc_h{d}",
                f"({hi[d]}) - ({lo[d]})",
            )
        ]
        n = len(values)
        return [
            c.Comment("the slot's halo is zeroed unless its last fill left this one"),
            c.Line(f"const long pc_zv[{n}] = {{{', '.join(values)}}};"),
            c.Line(f"long *pc_zr = {names.halo_key(b.name)}[{names.slot(b.name)}];"),
            c.Line("int pc_zs = 1;"),
            c.For(
                "int pc_q = 0",
                f"pc_q < {n}",
                "pc_q++",
                c.Block(
                    [
                        c.Statement("pc_zs &= pc_zr[pc_q] == pc_zv[pc_q]"),
                        c.Statement("pc_zr[pc_q] = pc_zv[pc_q]"),
                    ]
                ),
            ),
            c.If("!pc_zs", c.Block(lines)),
        ]

    def halo_record(self, b: pm.BufferMark) -> list[c.Generable]:
        """The declaration of the halo each slot of ``b`` holds
        (:meth:`_zero_halo`), for the kernel's prologue; none when ``b``'s
        slots do not keep one."""
        if not self.zeroes_once(b):
            return []
        fields = HALO_FIELDS * len(b.extent)
        return [c.Line(f"long {names.halo_key(b.name)}[{b.slots}][{fields}];")]

    def unknown_halos(self, b: pm.BufferMark) -> list[c.Generable]:
        """Every slot of ``b`` marked as holding no known halo, where ``b`` is
        allocated (before its first copy); nothing when its slots keep none."""
        if not self.zeroes_once(b):
            return []
        n = b.slots * HALO_FIELDS * len(b.extent)
        key = names.halo_key(b.name)
        return [
            c.Line(
                f"for (long pc_q = 0; pc_q < {n}; pc_q++) ((long *){key})[pc_q] = -1;"
            )
        ]

    def zeroes_once(self, b: pm.BufferMark) -> bool:
        """Whether a clamped buffer's slots remember the halo they hold
        (:meth:`_zero_halo`): one that only copies fill (no statement writes
        it, so nothing but a copy's clipped box ever lands in a slot), not
        polyphase."""
        if not b.clamp or any(b.phase(d) > 1 for d in range(len(b.extent))):
            return False
        return not any(
            self.info.active.get(s.name, {}).get(s.target.array) == b.name
            for s in self.kernel.statements
        )

    def _dma_call(
        self, b, parent, shape, index, sizes, inbound, zero=False
    ) -> c.Generable:
        """One DMA of the box at ``index`` of ``sizes`` (one per phase of a
        polyphase buffer); ``zero`` fills it from the level's zero block."""
        phased = [d for d in range(len(index)) if b.phase(d) > 1]
        outer = self.info.buffers[parent] if parent is not None else None
        if outer is not None and (phased or outer.phases):
            raise CodegenError(
                f"codegen: {b.name} nests in {outer.name} but one of them is stored "
                "in phases because the scheduler or a hand placement asked so. "
                "Place polyphase buffers directly from DRAM."
            )
        if not phased:
            return self._dma_one(b, outer, shape, index, sizes, inbound, {}, zero)
        # one DMA per phase: the box rows of one residue, at f times the stride
        index, sizes = list(index), list(sizes)
        heads = []
        for d in phased:
            f, o = b.phase(d), names.origin(b.name, d)
            first, hi = index[d], f"({index[d]}) + ({sizes[d]}) - 1"
            index[d], sizes[d] = f"pc_s{d}", f"pc_n{d}"
            heads.append(
                (
                    d,
                    f,
                    [
                        c.Line(
                            f"const long pc_s{d} = {first} + "
                            f"((({o} + pc_f{d} - ({first})) % {f}) + {f}) % {f};"
                        ),
                        c.Line(f"const long pc_n{d} = ({hi} - pc_s{d}) / {f} + 1;"),
                        c.If(f"pc_s{d} > {hi}", c.Statement("continue")),
                    ],
                )
            )
        scale = {d: f for d, f, _ in heads}
        body: c.Generable = self._dma_one(
            b, None, shape, index, sizes, inbound, scale, zero
        )
        for d, f, head in reversed(heads):
            body = c.For(
                f"long pc_f{d} = 0",
                f"pc_f{d} < {f}",
                f"pc_f{d}++",
                c.Block([*head, body]),
            )
        return body

    def _dma_one(
        self, b, outer, shape, index, sizes, inbound, scale, zero=False
    ) -> c.Statement:
        mine = self._buffer_at(b, index)
        if zero:
            other = (names.buffer(f"{pm.ZERO}{b.level}"), "0", [0] * len(index))
        elif outer is not None:
            other = self._buffer_at(outer, index)
        else:
            strides = _row_major(shape)
            off = " + ".join(f"{s} * {i}" for s, i in zip(strides, index)) or "0"
            strides = [s * scale.get(d, 1) for d, s in enumerate(strides)]
            other = (names.dram_buffer(b.array), off, strides)
        dst, src = (mine, other) if inbound else (other, mine)
        label = f"zero {b.array}" if zero else f"{b.array} {('out', 'in')[inbound]}"
        return c.Statement(
            f"pc_dma({CTX}, -1, {b.elem_bytes}, {max(len(index), 1)}, "
            f"{names.i64_list(sizes or ['1'])}, "
            f"{dst[0]}, {dst[1]}, {names.i64_list([str(s) for s in dst[2]] or ['1'])}, "
            f"{src[0]}, {src[1]}, {names.i64_list([str(s) for s in src[2]] or ['1'])}, "
            f"{names.cstr(label)})"
        )

    def _buffer_at(self, b: pm.BufferMark, index: list[str]):
        """``(buffer id, element offset, strides)`` of element ``index`` of ``b``."""
        return (names.buffer(b.name), self._offset(b, index), b.strides)


def _split_dim(b: pm.BufferMark) -> int | None:
    """The outermost dimension in the buffer's layout of the box longer than one
    element: cutting it gives calls over disjoint byte ranges (so the runtime
    overlaps them; a polyphase dimension is cut before its phases are)."""
    if b.chunks <= 1:
        return None
    dims = [d for d, e in enumerate(b.extent) if e > 1]
    if not dims:
        return None
    return max(
        dims, key=lambda d: (b.pstrides[d] if b.phase(d) > 1 else 0, b.strides[d])
    )


def _row_major(shape) -> list[int]:
    out, acc = [], 1
    for e in reversed(shape):
        out.append(acc)
        acc *= e
    return list(reversed(out))
