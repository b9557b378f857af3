"""Kernel -> affine-dialect MLIR text (``polyc.to_mlir``).

The loop nest is the one the C emitter walks (isl's AST of the kernel's schedule,
:func:`codegen.emit.CEmitter.nest`): every ``for`` becomes an ``affine.for`` whose
bounds are maps (isl's ``max``/``min`` become the map's results, ``floord`` a
``floordiv``), a ``@parallel`` loop an ``affine.parallel``, a guard an ``affine.if``
(a disjunction becomes an ``else`` chain), a loop isl made degenerate an
``affine.apply``, and a statement instance its body in ``arith``/``math`` ending in
an ``affine.store``. Arrays are memref arguments (a symbolic extent is ``?``),
parameters ``index`` arguments before them.

A placed kernel's copies are ``affine.dma_start``/``affine.dma_wait`` between the
array and an on-chip buffer (:mod:`codegen.mlir.placed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.emit import CEmitter, c_ident
from codegen.mlir import affine_text as at
from codegen.mlir.body import Body, mlir_type
from polyc.errors import CodegenError
from polyc.ir import loops, tree
from polyc.ir.affine import Aff
from polyc.ir.expr import Load
from polyc.ir.kernel import Array, Kernel, Statement


@dataclass(frozen=True)
class MLIRSource:
    """A generated MLIR module and how to call its function."""

    text: str
    function: str
    params: tuple[str, ...]
    arrays: tuple[str, ...]
    #: the ``func.func`` alone (several go into one module to build at once)
    func: str = ""


def memref_type(a: Array, space: int | None = None) -> str:
    dims = "".join(f"{d.const if d.is_constant else '?'}x" for d in a.shape)
    mem = f", {space}" if space else ""
    return f"memref<{dims}{mlir_type(a.dtype)}{mem}>"


class MLIREmitter:
    """Emit a Kernel as one ``func.func`` in the affine dialect."""

    def __init__(self, kernel: Kernel, function: str | None = None):
        self.kernel = kernel
        self.function = function or c_ident(kernel.name)
        self.stmts = {s.name: s for s in kernel.statements}
        self.params = frozenset(kernel.params)
        self.lines: list[str] = []
        self.depth = 1
        self._band: str | None = None  # the band name the next loop carries
        self._count = 0

    # helpers -------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def fresh(self) -> str:
        self._count += 1
        return f"%{self._count - 1}"

    @staticmethod
    def ssa(name: str) -> str:
        return f"%{name}"

    def memref(self, array: str) -> str:
        return memref_type(self.kernel.arrays[array])

    # the walk ------------------------------------------------------------------
    def body(self, nodes) -> None:
        for n in nodes:
            if isinstance(n, loops.For):
                self.loop(n, parallel=False)
            elif isinstance(n, loops.If):
                self.guard(at.constraints(n.cond), n.then, n.orelse)
            elif isinstance(n, loops.Mark):
                self.mark(n)
            elif isinstance(n, loops.Call):
                self.call(n)

    def mark(self, n: loops.Mark) -> None:
        first = n.body[0] if n.body else None
        if (
            n.name == "@parallel"
            and isinstance(first, loops.For)
            and not first.degenerate
        ):
            self.loop(first, parallel=True)
            self.body(n.body[1:])
            return
        parsed = tree.parse_band_mark(n.name)
        if parsed and first is not None and isinstance(first, loops.For):
            self._band = parsed[0]
        self.body(n.body)

    def loop(self, n: loops.For, parallel: bool) -> None:
        lows = [at.to_aff(e) for e in at.split(n.init, "max")]
        if n.degenerate:
            op = "affine.max" if len(lows) > 1 else "affine.apply"
            self.emit(f"%{n.var} = {op} {at.affine_map(lows, self.params, self.ssa)}")
            self.body(n.body)
            return
        highs = self.upper(n)
        band, self._band = self._band, None
        attrs = ([f'polyc.band = "{band}"'] if band else []) + self.loop_attributes()
        if parallel:
            lo = ", ".join(at.inline(a, self.params, self.ssa) for a in lows)
            hi = ", ".join(at.inline(a, self.params, self.ssa) for a in highs)
            lo = f"max({lo})" if len(lows) > 1 else lo
            hi = f"min({hi})" if len(highs) > 1 else hi
            step = f" step ({n.step})" if n.step != 1 else ""
            self.emit(f"affine.parallel (%{n.var}) = ({lo}) to ({hi}){step} {{")
        else:
            lo = at.bound(lows, "max", self.params, self.ssa)
            hi = at.bound(highs, "min", self.params, self.ssa)
            step = f" step {n.step}" if n.step != 1 else ""
            self.emit(f"affine.for %{n.var} = {lo} to {hi}{step} {{")
        self.depth += 1
        self.body(n.body)
        self.depth -= 1
        # the schedule's band name, kept for polyc.from_mlir (mlir-opt keeps it)
        self.emit(f"}} {{{', '.join(attrs)}}}" if attrs else "}")

    def loop_attributes(self) -> list[str]:
        """Attributes of the loop being opened besides its band name."""
        return []

    def upper(self, n: loops.For) -> list[Aff]:
        """The exclusive upper bounds of a loop (isl's condition ``var <= b``, ``var
        < b`` or a conjunction of them)."""
        out: list[Aff] = []
        conds = at.split(n.cond, "and")
        for c in conds:
            if c.op not in ("le", "lt") or c.args[0] != loops.LExpr("id", (n.var,)):
                raise CodegenError(
                    f"to_mlir: the loop {n.var}'s condition {loops.to_c(n.cond)} is not "
                    "an upper bound on the loop variable. Report this schedule: isl's "
                    "loop conditions are expected to bound the loop variable."
                )
            extra = 1 if c.op == "le" else 0
            out += [at.to_aff(b) + extra for b in at.split(c.args[1], "min")]
        return out

    def guard(self, disjuncts, then, orelse) -> None:
        """``if (c1 or c2 ...) then else orelse`` as a chain of ``affine.if``."""
        if disjuncts is None:
            raise CodegenError(
                "to_mlir: a guard of the loop nest is not an affine condition. Give "
                "the kernel affine domains."
            )
        first, rest = disjuncts[0], disjuncts[1:]
        self.emit(f"affine.if {at.integer_set(first, self.params, self.ssa)} {{")
        self.depth += 1
        self.body(then)
        self.depth -= 1
        if rest or orelse:
            self.emit("} else {")
            self.depth += 1
            if rest:
                self.guard(rest, then, orelse)
            else:
                self.body(orelse)
            self.depth -= 1
        self.emit("}")

    def call(self, n: loops.Call) -> None:
        stmt = self.stmts.get(n.stmt)
        if stmt is None:
            raise CodegenError(
                f"to_mlir: the schedule runs {n.stmt}, which is no statement of "
                f"{self.kernel.name}. Export a kernel whose schedule names its own "
                "statements."
            )
        args = {it: at.to_aff(a) for it, a in zip(stmt.iterators, n.args)}
        self.statement(stmt, args)

    def statement(self, stmt: Statement, args: dict[str, Aff]) -> None:
        lines: list[str] = []
        body = Body(
            lines,
            self.fresh,
            lambda ld: self.load(lines, ld, args),
            lambda aff: self.apply(lines, aff.substitute(args)),
        )
        value = body(stmt.body)
        for line in lines:
            self.emit(line)
        self.emit(
            f"affine.store {value}, {self.access(stmt.target, args)} : "
            f"{self.memref(stmt.target.array)}"
        )

    def access(self, ld: Load, args: dict[str, Aff]) -> str:
        index = [at.inline(i.substitute(args), self.params, self.ssa) for i in ld.index]
        return f"%{ld.array}[{', '.join(index)}]"

    def load(self, lines: list[str], ld: Load, args: dict[str, Aff]) -> str:
        v = self.fresh()
        lines.append(
            f"{v} = affine.load {self.access(ld, args)} : {self.memref(ld.array)}"
        )
        return v

    def apply(self, lines: list[str], aff: Aff) -> str:
        v = self.fresh()
        lines.append(
            f"{v} = affine.apply {at.affine_map([aff], self.params, self.ssa)}"
        )
        return v

    # the function ----------------------------------------------------------------
    def prologue(self) -> list[str]:
        """Operations before the loop nest (placed kernels allocate buffers)."""
        return []

    def epilogue(self) -> list[str]:
        return []

    def signature_arrays(self) -> list[Array]:
        return list(self.kernel.arrays.values())

    def generate(self) -> MLIRSource:
        k = self.kernel
        arrays = self.signature_arrays()
        args = [f"%{p}: index" for p in k.params]
        args += [f"%{a.name}: {memref_type(a)}" for a in arrays]
        self.depth = 2
        self.body(CEmitter.nest(self))  # the C emitter's loop nest, names reserved
        self.lines = (
            ["    " + line for line in self.prologue()]
            + self.lines
            + ["    " + line for line in self.epilogue()]
        )
        func = [
            f"  func.func @{self.function}({', '.join(args)}) "
            "attributes {llvm.emit_c_interface} {",
            *self.lines,
            "    return",
            "  }",
        ]
        head = f"// generated by polyc from kernel {k.name}\nmodule {{\n"
        func_text = "\n".join(func) + "\n"
        return MLIRSource(
            head + func_text + "}\n",
            self.function,
            tuple(k.params),
            tuple(a.name for a in arrays),
            func_text,
        )
