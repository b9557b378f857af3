"""The C SCoP frontend: ``polyc.from_c``.

A region between ``#pragma scop`` and ``#pragma endscop`` (or the body of a named
function) becomes a :class:`polyc.Kernel`::

    kernels = polyc.from_c("gemm.c", defines={"N": 64})
    out = polyc.interpret(kernels[0], {"A": A, "B": B, "C": C}, N=64)

The source is preprocessed like a compiler would (``gcc -E`` with the given defines and
include directories), then parsed with pycparser. Inside a region: ``for`` loops with
affine bounds (``min``/``max``, ``floord``/``ceild``-style divisions, any comparison,
steps, downward loops), ``if``/``else`` on affine conditions, multi-dimensional
accesses with affine subscripts (fixed-size arrays, C99 VLA parameters, pointers whose
extent is inferred), scalars (zero-dimensional arrays, privatised where legal),
compound assignments, ternaries, math calls and local declarations; linearised
indexing (``A[i * n + j]``) is modelled as ``A[i][j]`` and an ``if`` on data is
if-converted through a private flag. Integer variables
the region does not write and integer macros become isl parameters (macros keep their
value in :attr:`Region.param_values`). Anything else raises ``FrontendError`` with the
file, line and column of the construct.

Assumptions, as in Pluto and PPCG: distinct arrays do not alias, and every access is
in bounds (the parameters' context is restricted to the values for which it is).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast, c_generator, c_parser

from polyc.errors import FrontendError
from polyc.frontends.c.affine import NotAffine
from polyc.frontends.c.model import Origin, finish
from polyc.frontends.c.preprocess import RegionSpan, Source, preprocess
from polyc.frontends.c.region import ArrayInfo, RegionWalker, walk_nodes
from polyc.frontends.c.types import CType, Var, resolve, typedef_table
from polyc.ir.kernel import Kernel

_FIX = (
    "Write the region with for loops, ifs and assignments whose bounds, conditions "
    "and subscripts are affine in the loop iterators and parameters, or move the "
    "construct out of the '#pragma scop' region (polyc leaves that region as it is)"
)


@dataclass
class Region:
    """One SCoP of a C file: its kernel and how it maps back to the source."""

    kernel: Kernel
    function: str
    filename: str
    span: RegionSpan | None  # the pragma lines; None for a whole function body
    param_values: dict[str, int]  # parameters whose value is known (macros)
    arrays: dict[str, ArrayInfo]
    hoisted: list[Var]
    privatized: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: iterators declared outside the region and read after it: name -> line
    iterators_read_after: dict[str, int] = field(default_factory=dict)
    body: tuple[int, int] | None = None  # function mode: lines of the body braces
    visible: set[str] = field(default_factory=set)  # names in scope at the region
    iterators: set[str] = field(default_factory=set)  # the region's loop iterators

    @property
    def outer_iterators(self) -> set[str]:
        """Iterators declared outside the region (the generated code shadows them)."""
        return {
            n
            for n in self.iterators
            if n in self.visible and not any(v.name == n for v in self.hoisted)
        }


def from_c(
    path_or_source,
    *,
    defines=None,
    include_dirs=(),
    function: str | None = None,
):
    """Kernels of a C file: one per ``#pragma scop`` region, in source order.

    Args:
        path_or_source: a path to a C file, or C source text. A string is a
            path when it names an existing file, or when it is one line without
            ``;`` or ``{`` that ends in ``.c``/``.h`` or contains a path separator.
        defines: macros as ``{name: value}`` (``None`` for a bare ``-Dname``) or a
            sequence of ``"NAME=VALUE"`` strings, as ``-D`` would give them.
        include_dirs: directories for ``#include "..."``, as ``-I`` would give them.
        function: the name of a function whose whole body is the region; then one
            Kernel is returned instead of a list.

    Raises:
        FrontendError: for a construct the polyhedral model cannot hold (with its
            file, line and column), a parse or preprocessing failure, a file
            without regions, or a path that does not exist or cannot be read.
    """
    regions = parse_c(
        path_or_source, defines=defines, include_dirs=include_dirs, function=function
    )
    if function is not None:
        return regions[0].kernel
    return [r.kernel for r in regions]


def parse_c(
    path_or_source, *, defines=None, include_dirs=(), function=None
) -> list[Region]:
    """Like :func:`from_c`, with what the source-to-source mode needs per region."""
    src = preprocess(path_or_source, defines, include_dirs)
    return regions_of(src, function=function)


def regions_of(src: Source, *, function=None, collect: bool = False) -> list:
    """The regions of a preprocessed source; with ``collect``, a region that cannot
    be modelled is returned as its FrontendError instead of raising."""
    unit = _parse(src)
    typedefs = typedef_table(unit)
    globals_ = _globals(unit, typedefs)
    found = _find_regions(src, unit, globals_, typedefs, function)
    if not found and not collect:
        where = f"function {function!r}" if function else "#pragma scop regions"
        raise FrontendError(
            f"{src.filename}: from_c: found no {where} because the source has none. "
            "Mark the loop nest with '#pragma scop' and '#pragma endscop', or name "
            "its function with function=."
        )
    per_function: dict[str, int] = {}
    for f in found:
        per_function[f.func] = per_function.get(f.func, 0) + 1
    out: list[Region] = []
    seen: dict[str, int] = {}
    for f in found:
        seen[f.func] = seen.get(f.func, 0) + 1
        name = f.func if per_function[f.func] == 1 else f"{f.func}_{seen[f.func]}"
        try:
            out.append(_build(src, f, name, typedefs))
        except FrontendError as err:
            if not collect:
                raise
            out.append(err)
    return out


# parsing ------------------------------------------------------------------------------


def _parse(src: Source) -> c_ast.FileAST:
    parser = c_parser.CParser()
    try:
        return parser.parse(src.output, src.filename)
    except c_parser.ParseError as err:
        text = str(err)
        loc, _, what = text.partition(": ")
        if loc == src.filename:  # no coordinate: take the token where it stopped
            loc = _stop_coord(parser) or loc
        parts = loc.rsplit(":", 2)
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            line, col = int(parts[1]), int(parts[2])
            loc = f"{parts[0]}:{line}:{src.column(line, col)}"
        raise FrontendError(
            f"{loc}: from_c: the C source does not parse because pycparser says "
            f"'{what}'. Fix the syntax, or pass the defines the code needs "
            "(compiler extensions other than __attribute__ are not supported)."
        ) from None


def _stop_coord(parser) -> str | None:
    try:
        coord = parser._tok_coord(parser._peek())
        return f"{coord.file}:{coord.line}:{coord.column}"
    except Exception:  # pycparser internals differ between versions
        return None


def _globals(unit: c_ast.FileAST, typedefs) -> dict[str, Var]:
    out: dict[str, Var] = {}
    for ext in unit.ext:
        if isinstance(ext, c_ast.Decl) and ext.name:
            t = resolve(ext.type, typedefs)
            if t is not None:
                out[ext.name] = Var(ext.name, t, "global", ext)
    return out


@dataclass
class _Found:
    func: str
    funcdef: c_ast.FuncDef
    items: list
    scope: dict[str, Var]
    span: RegionSpan | None
    body: tuple[int, int] | None = None


def _find_regions(src, unit, globals_, typedefs, function) -> list[_Found]:
    out: list[_Found] = []
    spans = {r.begin: r for r in src.regions}
    for ext in unit.ext:
        if not isinstance(ext, c_ast.FuncDef):
            continue
        name = ext.decl.name
        scope = dict(globals_)
        params = ext.decl.type.args.params if ext.decl.type.args else []
        for prm in params:
            if isinstance(prm, c_ast.Decl) and prm.name:
                t = resolve(prm.type, typedefs)
                if t is not None:
                    scope[prm.name] = Var(prm.name, t, "param", prm)
        if function is not None:
            if name == function:
                body = ext.body
                items = [i for i in body.block_items or () if not _is_return(i)]
                last = _last_line(body)
                out.append(
                    _Found(name, ext, items, scope, None, (body.coord.line, last))
                )
            continue
        _scan_block(ext.body.block_items or [], scope, typedefs, ext, spans, src, out)
    return out


def _scan_block(items, scope, typedefs, funcdef, spans, src, out) -> None:
    scope = dict(scope)
    k = 0
    while k < len(items):
        it = items[k]
        if isinstance(it, c_ast.Pragma) and _pragma(it) == "scop":
            end = next(
                (
                    m
                    for m in range(k + 1, len(items))
                    if isinstance(items[m], c_ast.Pragma)
                    and _pragma(items[m]) == "endscop"
                ),
                None,
            )
            if end is None:
                raise FrontendError(
                    f"{_loc(src, it)}: from_c: the region opened here has no "
                    "'#pragma endscop' in the same block because a region must be a "
                    "sequence of statements of one block. Put both pragmas in the "
                    "same block."
                )
            span = spans.get(it.coord.line)
            if span is None or it.coord.file != src.filename:
                raise FrontendError(
                    f"{_loc(src, it)}: from_c: a '#pragma scop' comes from another "
                    "file or a macro because its line is not in the main file. Put "
                    "the pragmas in the file itself."
                )
            name = funcdef.decl.name
            out.append(_Found(name, funcdef, items[k + 1 : end], dict(scope), span))
            k = end + 1
            continue
        if isinstance(it, c_ast.Decl) and it.name:
            t = resolve(it.type, typedefs)
            if t is not None:
                scope[it.name] = Var(it.name, t, "local", it)
        for child in _child_blocks(it, scope, typedefs):
            _scan_block(*child, typedefs, funcdef, spans, src, out)
        k += 1


def _child_blocks(node, scope, typedefs):
    """``(items, scope)`` of the blocks directly under a statement."""
    if isinstance(node, c_ast.Compound):
        yield node.block_items or [], scope
        return
    inner = dict(scope)
    if isinstance(node, c_ast.For) and isinstance(node.init, c_ast.DeclList):
        for d in node.init.decls:
            t = resolve(d.type, typedefs)
            if t is not None:
                inner[d.name] = Var(d.name, t, "local", d)
    for attr in ("stmt", "iftrue", "iffalse"):
        child = getattr(node, attr, None)
        if isinstance(child, c_ast.Compound):
            yield child.block_items or [], inner
        elif child is not None:
            yield [child], inner


def _pragma(node: c_ast.Pragma) -> str:
    return (node.string or "").strip()


def _is_return(node) -> bool:
    return isinstance(node, c_ast.Return) and node.expr is None


def _last_line(node) -> int:
    return max((n.coord.line for n in walk_nodes([node]) if n.coord), default=0)


# locations and errors -----------------------------------------------------------------


def _loc(src: Source, node) -> str:
    coord = getattr(node, "coord", None)
    if isinstance(node, Origin) and coord is not None:
        return f"{coord.file}:{coord.line}:{coord.column}"
    if coord is None:
        return src.filename
    col = coord.column or 1
    if isinstance(node, c_ast.Pragma):
        col = 1
    elif coord.file == src.filename:
        col = src.column(coord.line, col)
    return f"{coord.file}:{coord.line}:{col}"


def _text(node) -> str:
    if isinstance(node, Origin):
        return node.text
    try:
        text = c_generator.CGenerator().visit(node)
    except Exception:  # pragma: no cover - a node the generator cannot print
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 70 else text[:67] + "..."


def _error(src: Source, err: NotAffine, region: str) -> FrontendError:
    return FrontendError(
        f"{_loc(src, err.node)}: from_c: cannot model '{_text(err.node)}' in the SCoP "
        f"of {region} because it is {err.why}. {_FIX}."
    )


# building ----------------------------------------------------------------------------


def _build(src: Source, f: _Found, name: str, typedefs) -> Region:
    known = src.macro_values.get(f.span.begin, {}) if f.span else {}

    def origin(node) -> str:
        line = node.coord.line if node.coord else 0
        text = src.lines[line - 1].strip() if 0 < line <= len(src.lines) else ""
        return f"{_loc(src, node)}: {text}"

    walker = RegionWalker(name, f.items, f.scope, typedefs, known, origin)
    try:
        walked = walker.run()
        if walker.pinned:
            # a product or division by a macro needs its value: the macro is then a
            # constant of the region rather than a parameter
            walker = RegionWalker(
                name, f.items, f.scope, typedefs, known, origin, walker.pinned
            )
            walked = walker.run()
        if not walked.program.statements:
            raise NotAffine(
                f.funcdef if f.span is None else f.items[0] if f.items else f.funcdef,
                "a region without assignments",
            )
        outside = _outside_names(f)
        kernel, privatized = finish(walked, name, outside.names)
    except NotAffine as err:
        raise _error(src, err, name) from None
    return Region(
        kernel,
        f.func,
        src.filename,
        f.span,
        dict(walked.known),
        walked.arrays,
        walked.hoisted,
        privatized,
        {
            n: ln
            for n, ln in outside.iterators.items()
            if n in walked.iterators and n in f.scope and f.span and ln > f.span.end
        },
        f.body,
        set(f.scope) | (src.macro_names.get(f.span.begin, set()) if f.span else set()),
        set(walked.iterators),
    )


@dataclass
class _Outside:
    names: set[str]  # names referenced in the function outside the region
    iterators: dict[str, int]  # names read outside any loop that sets them


def _outside_names(f: _Found) -> _Outside:
    region = {id(n) for n in walk_nodes(f.items)}
    names: set[str] = set()
    reads: dict[str, int] = {}

    def visit(node, bound: frozenset[str]) -> None:
        if id(node) in region:
            return
        if isinstance(node, c_ast.ID):
            names.add(node.name)
            if node.name not in bound and node.coord:
                reads.setdefault(node.name, node.coord.line)
        if isinstance(node, c_ast.For):
            init = node.init
            b = bound
            if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
                b = bound | {init.lvalue.name}
            for attr in ("cond", "next", "stmt"):
                child = getattr(node, attr)
                if child is not None:
                    visit(child, b)
            if isinstance(init, c_ast.Assignment):
                visit(init.rvalue, bound)
            return
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
            visit(node.rvalue, bound)
            names.add(node.lvalue.name)
            return
        for _, child in node.children():
            visit(child, bound)

    if f.funcdef.body is not None:
        visit(f.funcdef.body, frozenset())
    return _Outside(names, reads)


__all__ = ["Region", "from_c", "parse_c"]

_ = CType  # re-exported for type hints of Region users
