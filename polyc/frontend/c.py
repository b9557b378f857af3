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
compound assignments, ternaries, math calls and local declarations. Integer variables
the region does not write and integer macros become isl parameters (macros keep their
value in :attr:`Region.param_values`). Anything else raises ``FrontendError`` with the
file, line and column of the construct.

Assumptions, as in Pluto and PPCG: distinct arrays do not alias, and every access is
in bounds (the parameters' context is restricted to the values for which it is).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl
from pycparser import c_ast, c_generator, c_parser

from polyc.affine import Aff, var
from polyc.errors import FrontendError
from polyc.expr import Load
from polyc.frontend.c_affine import NotAffine, isl_aff_to_aff
from polyc.frontend.c_preprocess import RegionSpan, Source, preprocess
from polyc.frontend.c_region import ArrayInfo, RegionWalker, Walked, _walk
from polyc.frontend.c_types import CType, Var, resolve, typedef_table
from polyc.ir import Array, Kernel, Role, Statement, access_map, array_extent

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
        path_or_source: a path to a C file, or C source text.
        defines: macros as ``{name: value}`` (``None`` for a bare ``-Dname``) or a
            sequence of ``"NAME=VALUE"`` strings, as ``-D`` would give them.
        include_dirs: directories for ``#include "..."``, as ``-I`` would give them.
        function: the name of a function whose whole body is the region; then one
            Kernel is returned instead of a list.

    Raises:
        FrontendError: for a construct the polyhedral model cannot hold (with its
            file, line and column), a parse or preprocessing failure, or a file
            without regions.
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
    return max((n.coord.line for n in _walk([node]) if n.coord), default=0)


# locations and errors -----------------------------------------------------------------


def _loc(src: Source, node) -> str:
    coord = getattr(node, "coord", None)
    if isinstance(node, _Origin) and coord is not None:
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
    if isinstance(node, _Origin):
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
        kernel, privatized = _finish(src, walked, name, outside.names)
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
    region = {id(n) for n in _walk(f.items)}
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


def _finish(src, walked: Walked, name: str, outside: set[str]):
    p = walked.program
    params = list(walked.params)
    for info in walked.arrays.values():
        if info.inferred:
            p.resize(info.name, _inferred_shape(p, info, params))
    p.assume(_in_bounds(p, params, name))
    first = p.kernel()
    dead = {
        a
        for a, info in walked.arrays.items()
        if info.var.scope in ("region", "hoisted", "local", "param")
        and not (info.var.scope == "param" and info.var.ctype.ndim)
        and info.var.name not in outside
    }
    plan = _privatization(first, walked, dead)
    arrays, statements = _rewrite(first, plan)
    arrays = _roles(first, arrays, dead, plan)
    kernel = Kernel.create(
        name, arrays, statements, params, first.context, schedule=first.schedule
    )
    return kernel, {a: tuple(its) for a, (its, _, _) in plan.items()}


def _accesses(p, params) -> list[tuple[Statement, Load, isl.Map]]:
    out = []
    for s in p.statements:
        for ld in (s.target, *s.reads):
            out.append((s, ld, access_map(s, ld, params)))
    return out


def _inferred_shape(p, info: ArrayInfo, params) -> list[Aff]:
    arr = p.arrays[info.name]
    shape = list(arr.shape)
    elements = None
    for _, ld, m in _accesses(p, params):
        if ld.array == info.name:
            r = m.range()
            elements = r if elements is None else elements.union(r)
    for d in info.inferred:
        if elements is None or elements.is_empty():
            shape[d] = Aff(const=1)
            continue
        hi = elements.dim_max(d).coalesce()
        lo = elements.dim_min(d).coalesce()
        pieces = hi.get_pieces()
        if len(pieces) != 1:
            raise NotAffine(
                info.var.node,
                f"an array whose extent in dimension {d} polyc cannot infer (the "
                f"largest index is {hi}); declare the extent, e.g. "
                f"{info.var.name}[n]",
            )
        low = lo.min_val() if lo.is_cst() else None
        shape[d] = isl_aff_to_aff(pieces[0][1], params, []) + 1
        if low is not None and low.is_neg():
            raise NotAffine(
                info.var.node, f"an array indexed below 0 in dimension {d} (at {low})"
            )
    return shape


def _in_bounds(p, params, name) -> isl.Set:
    """Parameter values for which every access is inside its array."""
    head = f"[{', '.join(params)}] -> " if params else ""
    ctx = isl.Set(f"{head}{{ : }}")
    witness = None
    for s, ld, m in _accesses(p, params):
        arr = p.arrays[ld.array]
        outside = m.range().subtract(array_extent(arr, params))
        if not outside.is_empty():
            bad = m.intersect_range(outside).domain().params()
            ctx = ctx.subtract(bad)
            witness = witness or (s, ld, arr)
    if ctx.is_empty():
        s, ld, arr = witness
        raise NotAffine(
            _Origin(s.origin),
            f"an access {ld} outside {arr.name}'s extent "
            f"({', '.join(map(str, arr.shape))}) for every value of the parameters",
        )
    return ctx


class _Origin:
    """A stand-in node for a statement's origin text (``file:line:col: text``)."""

    def __init__(self, origin: str):
        parts = origin.split(":", 3)
        self.coord = None
        if len(parts) >= 3 and parts[1].isdigit():
            self.coord = _Coord(parts[0], int(parts[1]), int(parts[2]))
        self.text = parts[3].strip() if len(parts) == 4 else origin

    def children(self):
        return ()


@dataclass
class _Coord:
    file: str
    line: int
    column: int


def _privatization(kernel: Kernel, walked: Walked, dead: set[str]):
    """Scalars to expand along their enclosing loops: ``{array: (iterators, lows,
    extents)}``. A scalar is privatised over the outer loops that no flow of its
    value crosses, when it is dead after the region and reads no value from before."""
    plan: dict[str, tuple[list[str], list[Aff], list[Aff]]] = {}
    live_in = _live_in(kernel)
    for a, info in walked.arrays.items():
        if not info.scalar or a not in dead:
            continue
        stmts = [
            s
            for s in kernel.statements
            if s.target.array == a or any(ld.array == a for ld in s.reads)
        ]
        if not any(s.target.array == a for s in stmts):
            continue
        if not live_in.intersect(isl.UnionSet(f"{{ {a}[] }}")).is_empty():
            continue
        prefix = _common_prefix([walked.stmt_loops[s.name] for s in stmts])
        k = len(prefix)
        flow = _flow(kernel, a)
        while k > 0 and not _within(flow, k):
            k -= 1
        if k == 0:
            continue
        iters = list(stmts[0].iterators[:k])
        space = None
        for s in stmts:
            d = s.domain.project_out(isl.dim_type.set, k, s.depth - k)
            d = d.reset_tuple_id()
            space = d if space is None else space.union(d)
        space = space.intersect_params(kernel.context).coalesce()
        lows, extents = [], []
        for d in range(k):
            lo, hi = space.dim_min(d).coalesce(), space.dim_max(d).coalesce()
            if len(lo.get_pieces()) != 1 or len(hi.get_pieces()) != 1:
                break
            lo_aff = isl_aff_to_aff(lo.get_pieces()[0][1], kernel.params, [])
            hi_aff = isl_aff_to_aff(hi.get_pieces()[0][1], kernel.params, [])
            lows.append(lo_aff)
            extents.append(hi_aff - lo_aff + 1)
        k = len(lows)
        if k:
            plan[a] = (iters[:k], lows, extents)
    return plan


def _accesses_of(kernel: Kernel, array: str | None = None):
    """Union maps of reads and writes (of ``array`` only, when given)."""
    reads = writes = isl.UnionMap.empty(kernel.context.get_space())
    for s in kernel.statements:
        for ld, is_write in [(s.target, True)] + [(ld, False) for ld in s.reads]:
            if array is not None and ld.array != array:
                continue
            m = isl.UnionMap.from_map(access_map(s, ld, kernel.params))
            if is_write:
                writes = writes.union(m)
            else:
                reads = reads.union(m)
    return reads, writes


def _dataflow(kernel: Kernel, array: str | None = None):
    reads, writes = _accesses_of(kernel, array)
    info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
    return info.set_schedule(kernel.schedule).compute_flow()


def _live_in(kernel: Kernel) -> isl.UnionSet:
    """Elements some statement reads before the region writes them (the kernel's
    program-order dataflow; cheaper than the full dependence analysis)."""
    if "cfront_live_in" not in kernel.__dict__:
        flow = _dataflow(kernel)
        kernel.__dict__["cfront_live_in"] = flow.get_may_no_source().range()
    return kernel.__dict__["cfront_live_in"]


def _flow(kernel: Kernel, array: str) -> isl.UnionMap:
    """Flow dependences through ``array`` (value-based)."""
    return _dataflow(kernel, array).get_may_dependence()


def _common_prefix(seqs) -> tuple:
    out = []
    for items in zip(*seqs):
        if all(x == items[0] for x in items):
            out.append(items[0])
        else:
            break
    return tuple(out)


def _within(flow: isl.UnionMap, k: int) -> bool:
    """Every dependence stays within one iteration of the first ``k`` loops."""
    maps: list[isl.Map] = []
    flow.foreach_map(maps.append)
    for m in maps:
        same = m
        for d in range(k):
            same = same.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
        if not m.is_subset(same):
            return False
    return True


def _rewrite(kernel: Kernel, plan):
    arrays = dict(kernel.arrays)
    for a, (_iters, _lows, extents) in plan.items():
        old = arrays[a]
        arrays[a] = Array(a, tuple(extents), old.dtype, Role.TEMP)
    if not plan:
        return arrays, list(kernel.statements)

    def fix(ld: Load) -> Load:
        if ld.array not in plan:
            return ld
        iters, lows, _ = plan[ld.array]
        return Load(
            ld.array, tuple(var(i) - lo for i, lo in zip(iters, lows)), ld.dtype
        )

    statements = []
    for s in kernel.statements:
        body = s.body.map(lambda n: fix(n) if isinstance(n, Load) else None)
        statements.append(
            Statement(s.name, s.iterators, s.domain, fix(s.target), body, s.origin)
        )
    return arrays, statements


def _roles(kernel: Kernel, arrays: dict[str, Array], dead: set[str], plan):
    written: dict[str, isl.Set] = {}
    for s in kernel.statements:
        r = access_map(s, s.target, kernel.params).range()
        a = s.target.array
        written[a] = written[a].union(r) if a in written else r
    live_in = _live_in(kernel)
    out = []
    for a, arr in arrays.items():
        if a in plan or arr.role == Role.TEMP:
            role = Role.TEMP
        elif a not in written:
            role = Role.INPUT
        elif a in dead:
            role = Role.TEMP if _no_live_in(live_in, a) else Role.INOUT
        else:
            extent = array_extent(arr, kernel.params).intersect_params(kernel.context)
            full = extent.subtract(written[a]).is_empty()
            role = Role.OUTPUT if full and _no_live_in(live_in, a) else Role.INOUT
        out.append(Array(a, arr.shape, arr.dtype, role))
    return out


def _no_live_in(live_in: isl.UnionSet, array: str) -> bool:
    sets: list[isl.Set] = []
    live_in.foreach_set(sets.append)
    return not any(s.get_tuple_name() == array and not s.is_empty() for s in sets)


__all__ = ["Region", "from_c", "parse_c"]

_ = CType  # re-exported for type hints of Region users
