"""Placed kernels in MLIR: on-chip buffers as memrefs in a memory space (the
level's index: ``1`` for the first SRAM level), copies as ``affine.dma_start`` /
``affine.dma_wait``, and the statements that run inside a buffer's subtree reading
and writing the buffer at the tile's offsets.

A ``@buffer`` mark makes its buffer active for its subtree; ``pc_in_<buf>(prefix)``
sets the tile's origin (the mark's ``lo`` at the prefix) and, when the buffer is
filled, moves the box ``[lo, hi]`` clipped to the array: one ``affine.dma_start``
per row (a loop over the outer dimensions; the row's first element and its length
come from a one-trip loop and an ``affine.min``, which MLIR's affine rules allow),
then one ``affine.dma_wait``. A box that leaves the array (padding) has its buffer
zeroed first. ``pc_out_<buf>`` moves the written box back. The compute under a
``@tensorize`` or ``@vector`` mark carries ``polyc.engine`` on its loop, so the
engine mapping shows too. The text is for MLIR pipelines and verification:
``affine.dma_start`` has no lowering to the LLVM dialect, so placed kernels do not
run through the host lowering (their numbers run in polyc's simulator).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from codegen.mlir import affine_text as at
from codegen.mlir.body import mlir_type
from codegen.mlir.emit import MLIREmitter, memref_type
from polyc.errors import CodegenError
from polyc.ir import loops
from polyc.ir import marks as pm
from polyc.ir.affine import Aff
from polyc.ir.expr import Load
from polyc.ir.kernel import Kernel


def is_placed(kernel: Kernel) -> bool:
    """Whether the schedule carries placement marks (``@buffer``)."""
    return "@buffer" in str(kernel.schedule)


@dataclass
class _Active:
    mark: pm.BufferMark
    lo: list[Aff] | None = None  # the tile's origin, once pc_in has run


class PlacedMLIREmitter(MLIREmitter):
    """Emit a placed kernel with its buffers and DMA."""

    def __init__(self, kernel: Kernel, function: str | None = None, dma: bool = True):
        super().__init__(kernel, function)
        self.use_dma = dma
        self.buffers: dict[str, pm.BufferMark] = {}
        self.active: list[_Active] = []
        self._engine: str | None = None

    def memref(self, array: str) -> str:
        b = self._buffer(array)
        if b is None:
            return super().memref(array)
        return self.buffer_type(b.mark)

    def buffer_type(self, b: pm.BufferMark) -> str:
        dims = "".join(f"{e}x" for e in b.extent)
        t = mlir_type(self.kernel.arrays[b.array].dtype)
        if not self.use_dma:  # the host lowering allocates in address space 0 only
            return f"memref<{dims}{t}>"
        return f"memref<{dims}{t}, {b.level_index}>"

    def _buffer(self, array: str) -> _Active | None:
        for a in reversed(self.active):
            if a.mark.array == array and a.lo is not None:
                return a
        return None

    # marks ----------------------------------------------------------------------
    def mark(self, n: loops.Mark) -> None:
        kind = pm.kind(n.name)
        if kind == "buffer":
            b = pm.BufferMark.parse(n.name)
            self.buffers[b.name] = b
            self.active.append(_Active(b))
            self.body(n.body)
            self.active.pop()
            return
        if kind in ("tensorize", "vector"):
            engine = "mac" if kind == "tensorize" or "unit=mac" in n.name else "vector"
            old, self._engine = self._engine, engine
            self.body(n.body)
            self._engine = old
            return
        super().mark(n)

    def loop_attributes(self) -> list[str]:
        attrs = super().loop_attributes()
        if self._engine:
            attrs.append(f'polyc.engine = "{self._engine}"')
            self._engine = None
        return attrs

    # statements -----------------------------------------------------------------
    def call(self, n: loops.Call) -> None:
        for prefix, fn in ((pm.IN, self.copy_in), (pm.OUT, self.copy_out)):
            if n.stmt.startswith(prefix):
                name = n.stmt[len(prefix) :]
                active = [a for a in self.active if a.mark.name == name]
                if not active:
                    raise CodegenError(
                        f"to_mlir: {n.stmt} runs outside its @buffer mark because "
                        "the schedule was changed after placement. Place again."
                    )
                fn(active[-1], [at.to_aff(a) for a in n.args])
                return
        if n.stmt.startswith(pm.MAC):
            return  # the MAC array's call: its statement's instances follow
        super().call(n)

    def access(self, ld: Load, args: dict[str, Aff]) -> str:
        a = self._buffer(ld.array)
        if a is None:
            return super().access(ld, args)
        index = [
            at.inline(i.substitute(args) - lo, self.params, self.ssa)
            for i, lo in zip(ld.index, a.lo)
        ]
        return f"%{a.mark.name}[{', '.join(index)}]"

    # copies -------------------------------------------------------------------------
    def box(self, text: str, args: list[Aff]) -> list[list[Aff]]:
        """A mark function (isl text over the prefix) at ``args``: per dimension,
        the Affs whose min it is (a clipped box's upper end is a min)."""
        out = []
        for pa in _functions(text):
            n = pa.dim(isl.dim_type.in_)
            if n != len(args):
                raise CodegenError(
                    f"to_mlir: a buffer's box takes {n} values but its copy passes "
                    f"{len(args)} because the schedule changed after placement. "
                    "Place again."
                )
            moved = pa.move_dims(isl.dim_type.param, 0, isl.dim_type.in_, 0, n)
            for i in range(n):
                moved = moved.set_dim_id(isl.dim_type.param, i, isl.Id(f"pc_a{i}"))
            build = isl.AstBuild.from_context(
                isl.Set.universe(moved.get_domain_space())
            )
            e = loops.expr_from_isl(build.expr_from_pw_aff(moved))
            env = {f"pc_a{i}": a for i, a in enumerate(args)}
            out.append([at.to_aff(x).substitute(env) for x in at.split(e, "min")])
        return out

    def copy_in(self, a: _Active, args: list[Aff]) -> None:
        b = a.mark
        origin = self.box(b.lo, args)
        if any(len(d) != 1 for d in origin):
            raise CodegenError(
                f"to_mlir: buffer {b.name}'s origin is not one affine function because "
                "its mark's lo is piecewise. Place again (placement writes one "
                "affine origin per dimension)."
            )
        lo = [d[0] for d in origin]
        outer = self._outer(a)
        a.lo = lo
        if not b.copy_in and not b.clamp:
            return
        hi = self.box(b.hi, args)
        self.emit(f"// {pm.IN}{b.name}: {b.array} -> {b.name}")
        if b.clamp:
            self.zero(b)
        if b.copy_in:
            self.dma(b, outer, lo, hi, inbound=True)

    def copy_out(self, a: _Active, args: list[Aff]) -> None:
        b = a.mark
        if not b.copy_out:
            return
        lo = [d[0] for d in self.box(b.wlo or b.lo, args)]
        hi = self.box(b.whi or b.hi, args)
        self.emit(f"// {pm.OUT}{b.name}: {b.name} -> {b.array}")
        self.dma(b, self._outer(a), lo, hi, inbound=False)

    def _outer(self, a: _Active) -> _Active | None:
        """The enclosing buffer of the same array (the copy's other end), if any."""
        i = self.active.index(a)
        for outer in reversed(self.active[:i]):
            if outer.mark.array == a.mark.array and outer.lo is not None:
                return outer
        return None

    def zero(self, b: pm.BufferMark) -> None:
        """Zero the buffer (its halo outside the array reads as padding)."""
        t = mlir_type(self.kernel.arrays[b.array].dtype)
        ivs = [f"%{b.name}_z{d}" for d in range(len(b.extent))]
        zero = self.fresh()
        value = "0.0" if t.startswith("f") else "0"
        self.emit(f"{zero} = arith.constant {value} : {t}")
        for iv, e in zip(ivs, b.extent):
            self.emit(f"affine.for {iv} = 0 to {e} {{")
            self.depth += 1
        self.emit(
            f"affine.store {zero}, %{b.name}[{', '.join(ivs)}] : {self.buffer_type(b)}"
        )
        for _ in ivs:
            self.depth -= 1
            self.emit("}")

    def dma(self, b, outer: _Active | None, lo, hi, inbound: bool) -> None:
        """One ``affine.dma_start`` per row of the box ``[lo, hi]`` clipped to the
        array, between the array (or the enclosing buffer) and ``b``."""
        arr = self.kernel.arrays[b.array]
        shape = [int(d) for d in arr.concrete_shape({})]
        far = f"%{outer.mark.name}" if outer else f"%{b.array}"
        far_type = self.buffer_type(outer.mark) if outer else memref_type(arr)
        base = outer.lo if outer else [Aff(const=0)] * len(shape)
        nd = len(shape)
        rows = [f"%{b.name}_r{d}" for d in range(nd)]
        clip = [Aff(const=0)] if b.clamp else []
        for d in range(nd):
            first = _distinct([lo[d], *clip])
            ends = _distinct(
                [h + 1 for h in hi[d]] + [Aff(const=shape[d])] * bool(clip)
            )
            step = ""
            if d == nd - 1 and self.use_dma:  # one trip: the row's first element
                step = f" step {b.extent[d]}"
            self.emit(
                f"affine.for {rows[d]} = {at.bound(first, 'max', self.params, self.ssa)}"
                f" to {at.bound(ends, 'min', self.params, self.ssa)}{step} {{"
            )
            self.depth += 1
        last = Aff({rows[-1][1:]: 1}) if nd else Aff(const=0)
        if not self.use_dma:
            self.element_copy(b, far, far_type, rows, lo, base, inbound)
            return
        if nd:
            ends = [h + 1 for h in hi[-1]] + [Aff(const=shape[-1])] * bool(clip)
            lengths = _distinct([e - last for e in ends])
        else:
            lengths = [Aff(const=1)]
        count = self.fresh()
        if len(lengths) == 1 and lengths[0].is_constant:
            self.emit(f"{count} = arith.constant {lengths[0].const} : index")
        else:
            self.emit(
                f"{count} = affine.min {at.affine_map(lengths, self.params, self.ssa)}"
            )
        src, dst, src_t, dst_t = self.ends(b, far, far_type, rows, lo, base, inbound)
        tag = f"%{b.name}_tag"
        self.emit(
            f"affine.dma_start {src}, {dst}, {tag}[0], {count} : "
            f"{src_t}, {dst_t}, memref<1xi32>"
        )
        self.emit(f"affine.dma_wait {tag}[0], {count} : memref<1xi32>")
        for _ in range(nd):
            self.depth -= 1
            self.emit("}")

    def ends(self, b, far, far_type, rows, lo, base, inbound):
        """``(source, destination, their types)`` of one copy at the rows' element:
        the buffer at the offset from the tile's origin, the far end (the array, or
        the enclosing buffer) at the offset from its own origin."""

        def ref(name: str, origin) -> str:
            index = [Aff({r[1:]: 1}) - o for r, o in zip(rows, origin)]
            text = ", ".join(at.inline(x, self.params, self.ssa) for x in index)
            return f"{name}[{text}]"

        near, far_ref = ref(f"%{b.name}", lo), ref(far, base)
        near_t = self.buffer_type(b)
        if inbound:
            return far_ref, near, far_type, near_t
        return near, far_ref, near_t, far_type

    def element_copy(self, b, far, far_type, rows, lo, base, inbound) -> None:
        """The copy as element loads and stores (``dma=False``: the form that runs
        through the host lowering, to check the buffers' offsets)."""
        src, dst, src_t, dst_t = self.ends(b, far, far_type, rows, lo, base, inbound)
        v = self.fresh()
        self.emit(f"{v} = affine.load {src} : {src_t}")
        self.emit(f"affine.store {v}, {dst} : {dst_t}")
        for _ in rows:
            self.depth -= 1
            self.emit("}")

    # the function ----------------------------------------------------------------
    def prologue(self) -> list[str]:
        out = []
        for b in self.buffers.values():
            out.append(
                f'%{b.name} = memref.alloc() {{polyc.level = "{b.level}", '
                f"polyc.slots = {b.slots}}} : {self.buffer_type(b)}"
            )
            out.append(f"%{b.name}_tag = memref.alloc() : memref<1xi32>")
        return out

    def epilogue(self) -> list[str]:
        out = []
        for b in self.buffers.values():
            out.append(f"memref.dealloc %{b.name} : {self.buffer_type(b)}")
            out.append(f"memref.dealloc %{b.name}_tag : memref<1xi32>")
        return out


def _distinct(affs: list[Aff]) -> list[Aff]:
    return list(dict.fromkeys(affs))


def _functions(text: str) -> list[isl.PwAff]:
    mpa = pm.pw_multi_aff(text)
    return [mpa.get_at(d) for d in range(mpa.dim(isl.dim_type.out))]
