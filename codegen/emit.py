"""Loop nest -> C, through cgen.

:class:`CEmitter` turns a Kernel's loop nest (isl's AST, see :mod:`polyc.ir.loops`) into
one C function. Targets subclass it and override the hooks: how arrays are declared,
how a statement instance is emitted, and what a mark becomes. The host target emits
plain C with OpenMP pragmas; the accelerator target emits calls into the simulator's
runtime from the same hooks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cgen as c

from codegen import accumulate, pack
from codegen.cexpr import (
    BF16,
    GATHER_HOST,
    PRELUDE,
    CExpr,
    c_type,
    gather_index_host,
    uses_bfloat16,
)
from polyc.ir import loops, tree
from polyc.ir.kernel import Array, Kernel, Statement

#: attribute marks the host honours, and the pragma each becomes
PRAGMAS = {
    "@parallel": "omp parallel for",
    "@vectorize": "omp simd",
}


@dataclass(frozen=True)
class CSource:
    """A generated C translation unit and how to call its entry point."""

    text: str
    function: str
    cdef: str
    params: tuple[str, ...]
    arrays: tuple[str, ...]
    uses_openmp: bool


def raw_name(array: str) -> str:
    return f"_pc_{array}"


class CEmitter:
    """Emit a Kernel as a C function; subclass to change statements and marks.

    A kernel that gathers (a data-dependent index, :class:`polyc.ir.expr.Gather`)
    checks each such index: on the host an index out of range is recorded and
    row 0 read instead, and ``int <function>_gather_error(int64_t *out)`` returns
    1 and the value and extent of the first one (``HostModule`` raises)."""

    prelude = PRELUDE
    #: what a file that gathers adds to the prelude (the host's index check)
    gather_prelude = GATHER_HOST

    def __init__(self, kernel: Kernel, function: str | None = None):
        self.kernel = kernel
        self.function = function or f"polyc_{c_ident(kernel.name)}"
        self.stmts = {s.name: s for s in kernel.statements}
        self.uses_openmp = False
        self._accumulators = 0

    # hooks ---------------------------------------------------------------------
    def signature_arrays(self) -> list[Array]:
        """Arrays passed as pointers (all of them on the host)."""
        return list(self.kernel.arrays.values())

    def declare_array(self, a: Array) -> list[c.Generable]:
        """Typed view of a raw ``void *`` argument: ``float (*restrict A)[N]``."""
        t = c_type(a.dtype)
        inner = "".join(f"[{d.to_c()}]" for d in a.shape[1:])
        return [
            c.Line(
                f"{t} (*restrict {a.name}){inner} = ({t} (*){inner}){raw_name(a.name)};"
            )
        ]

    def element(self, array: str, index: list[str]) -> str:
        if not index:
            return f"{array}[0]"
        return array + "".join(f"[{i}]" for i in index)

    def statement(self, stmt: Statement, args: dict[str, str]) -> list[c.Generable]:
        """One statement instance; ``args`` maps iterators to C expressions."""
        r = self.renderer(args)
        return [c.Statement(r.store(stmt.target, r(stmt.body)))]

    def mark(
        self, name: str, body: list[c.Generable], node: loops.Mark
    ) -> list[c.Generable]:
        parsed = tree.parse_band_mark(name)
        if parsed:
            return [c.Comment(f"band {parsed[0]}"), *body]
        pragma = PRAGMAS.get(name)
        if pragma and body and isinstance(body[0], c.For):
            if pragma.startswith("omp"):  # omp simd too: without -fopenmp gcc
                self.uses_openmp = True  # ignores it
            return [c.Pragma(pragma), *body]
        if name.startswith("@unroll") and body and isinstance(body[0], c.For):
            factor = name[len("@unroll") :].strip("()") or "8"
            return [c.Pragma(f"GCC unroll {factor}"), *body]
        return body

    def leading_args(self) -> list[c.Value]:
        """Arguments before the parameters (the simulator passes its context)."""
        return []

    def prologue(self) -> list[c.Generable]:
        return []

    def epilogue(self) -> list[c.Generable]:
        return []

    # machinery -----------------------------------------------------------------
    def gather_index(self, g, by: str, extent: str) -> str:
        """A gather's data-dependent index, checked (see the class docstring)."""
        return gather_index_host(g, by, extent)

    def renderer(self, args: dict[str, str], element=None) -> CExpr:
        """Body expressions with ``args`` for the iterators; ``element(load,
        index)`` renders array elements (default: :meth:`element`)."""
        arrays = self.kernel.arrays
        return CExpr(
            element or (lambda ld, idx: self.element(ld.array, idx)),
            lambda n: args.get(n, n),
            self.gather_index,
            lambda g: f"(int64_t)({arrays[g.array].shape[g.dim].to_c()})",
        )

    @property
    def gathers(self) -> bool:
        """Whether some statement reads through a data-dependent index."""
        return any(s.gathers for s in self.kernel.statements)

    def value_type(self, dtype) -> str:
        """The C type of one element of ``dtype``."""
        return c_type(dtype)

    def nest(self) -> tuple:
        k = self.kernel
        reserved = frozenset(k.arrays) | frozenset(raw_name(a) for a in k.arrays)
        return loops.loop_nest(k.schedule, k.context, reserved)

    def body(self, nodes) -> list[c.Generable]:
        out: list[c.Generable] = []
        for n in nodes:
            if isinstance(n, loops.For):
                inner = c.Block(self.body(n.body))
                if n.degenerate:
                    out.append(
                        c.Block(
                            [
                                c.Line(f"const long {n.var} = {loops.to_c(n.init)};"),
                                *inner.contents,
                            ]
                        )
                    )
                else:
                    out.append(
                        c.For(
                            f"long {n.var} = {loops.to_c(n.init)}",
                            loops.to_c(n.cond),
                            f"{n.var} += {n.step}",
                            inner,
                        )
                    )
            elif isinstance(n, loops.If):
                then = c.Block(self.body(n.then))
                orelse = c.Block(self.body(n.orelse)) if n.orelse else None
                out.append(c.If(loops.to_c(n.cond), then, orelse))
            elif isinstance(n, loops.Mark) and n.name.startswith(pack.MARK):
                self._accumulators += 1
                packed = pack.emit(self, n, self._accumulators)
                out.extend(packed if packed is not None else self.body(n.body))
            elif isinstance(n, loops.Mark) and n.name.startswith(accumulate.MARK):
                self._accumulators += 1
                tiled = accumulate.emit(self, n, self._accumulators)
                out.extend(tiled if tiled is not None else self.body(n.body))
            elif isinstance(n, loops.Mark):
                out.extend(self.mark(n.name, self.body(n.body), n))
            elif isinstance(n, loops.Call):
                out.extend(self.call(n))
        return out

    def call(self, n: loops.Call) -> list[c.Generable]:
        stmt = self.stmts.get(n.stmt)
        if stmt is None:
            raise KeyError(f"codegen: no statement {n.stmt}")
        args = {it: _paren(loops.to_c(a)) for it, a in zip(stmt.iterators, n.args)}
        return self.statement(stmt, args)

    def top(self, nodes) -> list[c.Generable]:
        """The C of the top-level nodes (a target may put work between them)."""
        return self.body(nodes)

    def own_arrays(self) -> list[Array]:
        """Arrays the generated code holds itself (not in the signature)."""
        return []

    def own_storage(self) -> str:
        """The file-scope storage of the arrays of :meth:`own_arrays` (outside
        the function, where every unit of a split kernel links to it)."""
        lines = []
        for a in self.own_arrays():
            size = math.prod(a.concrete_shape({})) * a.dtype.itemsize
            lines.append(
                f"static unsigned char {raw_name(a.name)}[{size}] "
                "__attribute__((aligned(64)));\n"
            )
        return "".join(lines)

    def generate(self) -> CSource:
        k = self.kernel
        arrays = self.signature_arrays()
        params = [c.Value("long", p) for p in k.params]
        ptrs = [c.Value("void *", raw_name(a.name)) for a in arrays]
        decl = c.FunctionDeclaration(
            c.Value("void", self.function), self.leading_args() + params + ptrs
        )
        body: list[c.Generable] = []
        for a in arrays:
            body.extend(self.declare_array(a))
        for a in self.own_arrays():
            body.extend(self.declare_array(a))
        body.extend(self.prologue())
        body.extend(self.top(self.nest()))
        body.extend(self.epilogue())
        fn = c.FunctionBody(decl, c.Block(body))
        header = f"/* generated by polyc from kernel {k.name} */\n"
        prelude = self.prelude + (BF16 if uses_bfloat16(k) else "")
        prelude += self.gather_prelude if self.gathers else ""
        text = header + prelude + "\n" + self.own_storage() + str(fn) + "\n"
        cdef = str(decl) + ";"
        if self.gathers and self.gather_prelude:
            error = f"int {self.function}_gather_error(int64_t *out)"
            text += (
                f"{error} {{\n  for (int i = 0; i < 3; i++) out[i] = "
                "pc_gather_bad[i], pc_gather_bad[i] = 0;\n  return (int)out[0];\n}\n"
            )
            cdef += f"\n{error};"
        return CSource(
            text,
            self.function,
            cdef,
            tuple(k.params),
            tuple(a.name for a in arrays),
            self.uses_openmp,
        )


def _paren(text: str) -> str:
    return text if text.replace("_", "").isalnum() else f"({text})"


def c_ident(name: str) -> str:
    """``name`` as a C identifier (other characters become ``_``; a leading
    digit gets a ``k_`` prefix)."""
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return out if out and not out[0].isdigit() else f"k_{out}"
