"""C for one region, regenerated from its (possibly transformed) schedule.

:class:`SourceEmitter` is a :class:`codegen.emit.CEmitter` whose statements address the
user's own variables: arrays by their names and subscripts, scalars by name, and only
C's own types in casts (no ``<stdint.h>`` needed), so the block it writes compiles in
place of the region with the user's compiler and flags. Helper macros (``floord``,
``min``, ``max``) are defined around the block with ``push_macro``/``pop_macro`` so
that the user's own macros of those names survive.
"""

from __future__ import annotations

import islpy as isl

from codegen.cexpr import CExpr, literal
from codegen.emit import CEmitter
from polyc.ir import dtypes, loops, tree
from polyc.ir.dtypes import DType
from polyc.ir.expr import Binary, Cast, Const
from polyc.ir.kernel import Kernel, Role

#: C's own names for polyc's dtypes (int64 is ``long long``: 64 bits on every ABI)
C_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "_Float16",
    "int8": "signed char",
    "int16": "short",
    "int32": "int",
    "int64": "long long",
    "uint8": "unsigned char",
    "bool": "_Bool",
}

_HELPERS = {
    "floord": "#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))",
    "min": "#define min(x, y) ((x) < (y) ? (x) : (y))",
    "max": "#define max(x, y) ((x) > (y) ? (x) : (y))",
}


class _SourceExpr(CExpr):
    """Body expressions with C's type names and library calls only."""

    def __call__(self, e):
        dt = e.dtype
        if isinstance(e, Const) and not dt.is_float and dt != dtypes.bool_:
            v = int(e.value)
            text = f"{v}LL" if dt == dtypes.int64 else str(v)
            return text if v >= 0 else f"({text})"
        if isinstance(e, Cast):
            inner = self(e.x)
            if dt == dtypes.bool_:
                return f"(({inner}) != 0)"
            return f"(({C_NAMES[dt.name]})({inner}))"
        if isinstance(e, Const):
            return literal(e.value, dt)
        return super().__call__(e)

    def _narrow(self, text: str, dt: DType) -> str:
        if dt.itemsize < 4 and dt != dtypes.bool_:
            return f"(({C_NAMES[dt.name]})({text}))"
        return text

    def _binary(self, e: Binary) -> str:
        if e.op in ("min", "max"):
            a, b = self(e.a), self(e.b)
            if e.dtype.is_float:
                f = "f" if e.dtype == dtypes.float32 else ""
                return f"f{e.op}{f}({a}, {b})"
            return f"{e.op}({a}, {b})"
        if e.op == "floordiv" and not e.dtype.is_float:
            return self._narrow(f"floord({self(e.a)}, {self(e.b)})", e.dtype)
        return super()._binary(e)


class SourceEmitter(CEmitter):
    """Emit a region's kernel as a C block over the user's variables.

    ``names`` maps kernel arrays to the C names to use; ``contracted`` lists the
    privatised scalars that may stay scalars under this schedule; ``taken`` are the
    names visible at the region (no generated loop may shadow them).
    """

    def __init__(
        self,
        kernel: Kernel,
        names: dict[str, str],
        scalars: set[str],
        contracted: set[str],
        taken: set[str],
        linear: dict[str, list[str]] | None = None,
    ):
        super().__init__(kernel)
        self.names = names
        self.linear = linear or {}
        self.scalars = scalars | contracted
        self.taken = set(taken)

    def element(self, array: str, index: list[str]) -> str:
        name = self.names.get(array, array)
        if array in self.scalars:
            return name
        strides = self.linear.get(array)
        if strides:  # the user's one-dimensional array: its linear address
            flat = f"({index[0]})"
            for stride, idx in zip(strides, index[1:]):
                flat = f"({flat} * {stride} + ({idx}))"
            return f"{name}[{flat}]"
        return name + "".join(f"[{i}]" for i in index)

    def renderer(self, args: dict[str, str], element=None) -> CExpr:
        return _SourceExpr(
            element or (lambda ld, idx: self.element(ld.array, idx)),
            lambda n: args.get(n, n),
        )

    def value_type(self, dtype: DType) -> str:
        return C_NAMES[dtype.name]

    def nest(self) -> tuple:
        k = self.kernel
        reserved = frozenset(self.taken) | frozenset(self.names.values())
        nest = loops.loop_nest(k.schedule, k.context, reserved)
        return _avoid(nest, set(reserved), {})

    def mark(self, name, body, node):
        parsed = tree.parse_band_mark(name)
        if parsed:
            return body
        return super().mark(name, body, node)

    def block(self) -> list[str]:
        """The lines of the loop nest (no enclosing braces)."""
        lines: list[str] = []
        for node in self.body(self.nest()):
            lines.extend(str(node).splitlines())
        return lines


def helpers_used(lines: list[str]) -> list[str]:
    """The helper macros that ``lines`` call."""
    text = "\n".join(lines)
    return [h for h in ("floord", "min", "max") if f"{h}(" in text]


def helper_open(used: list[str]) -> list[str]:
    out: list[str] = []
    for h in used:
        out += [f'#pragma push_macro("{h}")', f"#undef {h}", _HELPERS[h]]
    return out


def helper_close(used: list[str]) -> list[str]:
    out: list[str] = []
    for h in used:
        out += [f"#undef {h}", f'#pragma pop_macro("{h}")']
    return out


def declaration(kernel: Kernel, array: str, name: str, heap: bool) -> list[str]:
    """C declaration of a temporary array (``heap``: malloc'd, freed by
    :func:`release`)."""
    a = kernel.arrays[array]
    t = C_NAMES[a.dtype.name]
    dims = [f"[{d.to_c()}]" for d in a.shape]
    if not dims:
        return [f"{t} {name};"]
    if heap and len(dims) == 1:
        return [f"{t} *{name} = ({t} *)malloc(sizeof({t}{dims[0]}));"]
    if heap:
        inner = "".join(dims[1:])
        return [
            f"{t} (*{name}){inner} = ({t} (*){inner})malloc(sizeof({t}{''.join(dims)}));"
        ]
    return [f"{t} {name}{''.join(dims)};"]


def contractible(kernel: Kernel, array: str) -> bool:
    """Whether a privatised scalar's values never overlap under the schedule: no
    access to another element falls between a write and a read of its value."""
    flow = kernel.deps.by_array("flow").get(array)
    if flow is None or flow.is_empty():
        return True
    acc = None
    for s in kernel.statements:
        for ld in (s.target, *s.reads):
            if ld.array == array:
                from polyc.ir.kernel import access_map

                m = isl.UnionMap.from_map(access_map(s, ld, kernel.params))
                acc = m if acc is None else acc.union(m)
    time = tree.flat_map(kernel.schedule)
    before = time.lex_lt_union_map(time)  # x -> y: x runs before y
    n = kernel.arrays[array].ndim
    xs = ", ".join(f"x{d}" for d in range(n))
    ys = ", ".join(f"y{d}" for d in range(n))
    differ = " or ".join(f"x{d} != y{d}" for d in range(n))
    other = isl.UnionMap(f"{{ {array}[{xs}] -> {array}[{ys}] : {differ} }}")
    other_elem = acc.apply_range(other).apply_range(acc.reverse())
    between = before.intersect(other_elem).apply_range(before)
    bad = flow.intersect(between).intersect_params(kernel.context)
    return bad.is_empty()


def _avoid(nodes, taken: set[str], names: dict[str, str]) -> tuple:
    """Rename loops whose iterator would shadow a name the region's code uses."""
    out = []
    for n in nodes:
        if isinstance(n, loops.For):
            inner = dict(names)
            new = n.var
            if n.var in taken and not _member_name(n.var):
                k = 0
                while f"{n.var}_{k}" in taken:
                    k += 1
                new = f"{n.var}_{k}"
                inner[n.var] = new
            out.append(
                loops.For(
                    new,
                    _subst(n.init, names),
                    _subst(n.cond, inner),
                    n.step,
                    _avoid(n.body, taken, inner),
                    n.degenerate,
                )
            )
        elif isinstance(n, loops.If):
            out.append(
                loops.If(
                    _subst(n.cond, names),
                    _avoid(n.then, taken, names),
                    _avoid(n.orelse, taken, names),
                )
            )
        elif isinstance(n, loops.Mark):
            out.append(loops.Mark(n.name, _avoid(n.body, taken, names)))
        elif isinstance(n, loops.Call):
            out.append(loops.Call(n.stmt, tuple(_subst(a, names) for a in n.args)))
        else:
            out.append(n)
    return tuple(out)


def _member_name(name: str) -> bool:
    return False


def _subst(e: loops.LExpr, names: dict[str, str]) -> loops.LExpr:
    if not names or e.op == "int":
        return e
    if e.op == "id":
        return loops.LExpr("id", (names.get(e.args[0], e.args[0]),))
    return loops.LExpr(e.op, tuple(_subst(a, names) for a in e.args))


__all__ = ["C_NAMES", "SourceEmitter", "contractible", "declaration", "Role"]
