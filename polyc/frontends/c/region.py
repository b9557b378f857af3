"""Walk one SCoP region of C and build it with :class:`polyc.lang.program.Program`.

Each ``for`` becomes a Program loop whose domain is the exact set of values C's loop
takes (any affine condition, steps, downward loops); each ``if`` a condition (its
``else`` the complement; an ``if`` on data is if-converted); each assignment a statement whose body is typed as C types
it. Names resolve as in C: loop iterators, parameters (integer variables the region
never writes, and integer macros), and data (arrays, and scalars as zero-dimensional
arrays). Anything the polyhedral model cannot hold raises :class:`NotAffine` at the
node, which :mod:`polyc.frontends.c.parse` reports with its file, line and column.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import islpy as isl
from pycparser import c_ast

from polyc.errors import DefinitionError, DTypeError
from polyc.frontends.c.affine import AffineBuilder, NotAffine, to_aff
from polyc.frontends.c.body import BodyBuilder
from polyc.frontends.c.linear import components, polynomial, strides_of
from polyc.frontends.c.types import CType, Var, resolve
from polyc.ir import dtypes
from polyc.ir.affine import var
from polyc.ir.expr import Binary, Const, Index, Load, Select, Unary, cast
from polyc.lang.program import Program

_UNSUPPORTED = {
    c_ast.While: "a while loop",
    c_ast.DoWhile: "a do-while loop",
    c_ast.Break: "a break",
    c_ast.Continue: "a continue",
    c_ast.Goto: "a goto",
    c_ast.Label: "a label",
    c_ast.Return: "a return",
    c_ast.Switch: "a switch",
    c_ast.Case: "a case label",
    c_ast.Default: "a default label",
}


@dataclass
class ArrayInfo:
    """How a kernel array is written in the user's C."""

    name: str  # kernel array name
    var: Var  # the C variable
    scalar: bool  # a C scalar (0-d array)
    inferred: list[int] = field(default_factory=list)  # dims no declaration states
    strides: list[str] = field(default_factory=list)  # linearised: C's row lengths


@dataclass
class Walked:
    program: Program
    params: list[str]
    param_types: dict[str, dtypes.DType]
    known: dict[str, int]
    arrays: dict[str, ArrayInfo]
    stmt_loops: dict[str, tuple[int, ...]]  # statement -> ids of enclosing loops
    hoisted: list[Var]  # variables declared at the region's top level
    iterators: set[str]  # names the region uses as loop iterators


class RegionWalker:
    """Builds a Program from the statements of one region."""

    def __init__(
        self,
        name: str,
        items: list,
        outer: dict[str, Var],
        typedefs: dict[str, CType],
        known: dict[str, int],
        origin,
        constants: set[str] = frozenset(),
    ):
        self.name = name
        self.items = items
        self.outer = outer
        self.typedefs = typedefs
        self.known = dict(known)
        self.constants = set(constants)  # macros taken as their value, not parameters
        self.origin = origin  # node -> "file:line:col: text"
        self.body = BodyBuilder(self._resolve, typedefs)
        self.arrays: dict[str, ArrayInfo] = {}
        self._by_var: dict[int, str] = {}
        self.stmt_loops: dict[str, tuple[int, ...]] = {}
        self.hoisted: list[Var] = []
        self._ids = itertools.count()
        self.guard = None  # the condition on data the current statement runs under
        self._guards = 0
        self.pinned: set[str] = set()

    # entry ---------------------------------------------------------------------------
    def run(self) -> Walked:
        self._prepass()
        self.p = Program(self.name)
        for prm in self.params:
            self.p.param(prm, minimum=None)
        self.iters: list[str] = []
        self.iter_types: list[dtypes.DType] = []
        self.loops: list[int] = []
        self.domain = self._universe([])
        self.scopes: list[dict[str, Var]] = [{}]
        self._block(self.items, top=True)
        return Walked(
            self.p,
            self.params,
            self.param_types,
            {k: v for k, v in self.known.items() if k in self.params},
            self.arrays,
            self.stmt_loops,
            self.hoisted,
            self.iterator_names,
        )

    # names ---------------------------------------------------------------------------
    def _prepass(self) -> None:
        """Find iterators, written names and parameters before building anything
        (every isl set of the region must know all parameters)."""
        ids: list[str] = []
        written: set[str] = set()
        iters: set[str] = set()
        local: set[str] = set()
        for node in walk_nodes(self.items):
            if isinstance(node, c_ast.ID):
                ids.append(node.name)
            elif isinstance(node, c_ast.Assignment):
                written.add(_base_name(node.lvalue))
            elif isinstance(node, c_ast.UnaryOp) and node.op in (
                "p++",
                "p--",
                "++",
                "--",
            ):
                written.add(_base_name(node.expr))
            elif isinstance(node, c_ast.Decl):
                local.add(node.name)
                ids.extend(
                    n.name for n in walk_nodes([node.type]) if isinstance(n, c_ast.ID)
                )
            elif isinstance(node, c_ast.For):
                name = _loop_var(node)
                if name:
                    iters.add(name)
        self.iterator_names = iters
        self.written = written - iters
        params: list[str] = []
        types: dict[str, dtypes.DType] = {}
        for name in ids:
            if name in params or name in iters or name in local:
                continue
            v = self.outer.get(name)
            if v is not None and v.ctype.is_integer and not v.ctype.ndim:
                if name not in written:
                    params.append(name)
                    types[name] = v.ctype.dtype or dtypes.int64
            elif v is None and name in self.known and name not in self.constants:
                params.append(name)
                wide = abs(self.known[name]) > 2**31 - 1
                types[name] = dtypes.int64 if wide else dtypes.int32
            elif v is not None and v.is_array:
                for n in walk_nodes([d for d in v.ctype.dims if d is not None]):
                    if isinstance(n, c_ast.ID) and n.name not in params:
                        dv = self.outer.get(n.name)
                        if dv is not None and dv.ctype.is_integer and not dv.ctype.ndim:
                            params.append(n.name)
                            types[n.name] = dv.ctype.dtype or dtypes.int64
        self.params = params
        self.param_types = types
        self.linear = self._linearised(iters)

    def _linearised(self, iters: set[str]) -> dict[str, list[str]]:
        """One-dimensional arrays indexed ``i * n + j``: their strides."""
        subs: dict[str, list] = {}
        for node in walk_nodes(self.items):
            if isinstance(node, c_ast.ArrayRef) and isinstance(node.name, c_ast.ID):
                subs.setdefault(node.name.name, []).append(node.subscript)
        names = iters | set(self.params)
        out: dict[str, list[str]] = {}
        for name, nodes in subs.items():
            v = self.outer.get(name)
            if v is not None and v.ctype.ndim != 1:
                continue
            polys = [polynomial(n, names, self.known) for n in nodes]
            if any(p is None for p in polys):
                continue
            strides = strides_of(polys, self.params)
            if strides:
                out[name] = strides
        return out

    def _lookup(self, name: str) -> Var | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return self.outer.get(name)

    def _array_for(self, v: Var, node) -> str:
        """The kernel array of a C variable (declared on first use)."""
        key = id(v)
        if key in self._by_var:
            return self._by_var[key]
        dt = v.ctype.dtype
        if dt is None:
            raise NotAffine(
                node,
                f"data of type '{' '.join(v.ctype.words)}', which polyc has no dtype for",
            )
        name = v.name
        taken = set(self.arrays) | set(self.params) | self.iterator_names
        k = 1
        while name in taken:
            name, k = f"{v.name}_{k}", k + 1
        shape, inferred = [], []
        dims = list(v.ctype.dims)
        strides = self.linear.get(v.name, []) if len(dims) == 1 else []
        if strides:
            dims = [None]
        ab = AffineBuilder(self.params, [], self.known, self.pinned)
        for d, dim in enumerate(dims):
            if dim is None:
                shape.append(1)
                inferred.append(d)
                continue
            try:
                shape.append(to_aff(ab.expr(dim), ab.universe(), self.params, []))
            except ValueError:
                raise NotAffine(dim, "an array extent that is not affine") from None
        if v.scope == "region":
            role = "temp"  # declared in a block of the region: dead after it
        else:
            role = "inout" if v.name in self.written else "input"
        shape += [var(st) for st in strides]
        self.p.array(name, shape, dt, role=role)
        self.arrays[name] = ArrayInfo(name, v, not dims, inferred, list(strides))
        self._by_var[key] = name
        return name

    def _resolve(self, node):
        """An ID or an array element in a body."""
        if isinstance(node, c_ast.ArrayRef):
            return self._element(node)
        name = node.name
        if name in self.iters:
            dt = self.iter_types[self.iters.index(name)]
            return cast(Index(var(name)), dt)
        if name in self.iterator_names:
            raise NotAffine(node, f"the loop iterator {name} read outside its loop")
        if name in self.params:
            return cast(Index(var(name)), self.param_types[name])
        v = self._lookup(name)
        if v is None and name in self.constants:
            value = self.known[name]
            wide = abs(value) > 2**31 - 1
            return Const(value, dtypes.int64 if wide else dtypes.int32)
        if v is None:
            raise NotAffine(node, f"the name {name}, which is not a variable in scope")
        if v.is_array:
            raise NotAffine(node, f"the array {name} used without subscripts")
        arr = self._array_for(v, node)
        return Load(arr, (), v.ctype.dtype)

    def _element(self, node: c_ast.ArrayRef) -> Load:
        subs = []
        base = node
        while isinstance(base, c_ast.ArrayRef):
            subs.append(base.subscript)
            base = base.name
        subs.reverse()
        if not isinstance(base, c_ast.ID):
            raise NotAffine(node, "an element of a computed address")
        v = self._lookup(base.name)
        if v is None or not v.is_array:
            raise NotAffine(base, f"{base.name}, which is not an array")
        strides = self.linear.get(base.name, []) if v.ctype.ndim == 1 else []
        if strides and len(subs) == 1:
            arr = self._array_for(v, node)
            return Load(arr, self._delinearise(subs[0], strides), v.ctype.dtype)
        if len(subs) != v.ctype.ndim:
            raise NotAffine(
                node,
                f"{len(subs)} subscripts on the {v.ctype.ndim}-d array {base.name} "
                "(a partial subscript is an address)",
            )
        arr = self._array_for(v, node)
        ab = self._builder()
        idx = []
        for s in subs:
            pw = self._affine(ab.expr, s)
            try:
                idx.append(to_aff(pw, self.domain, self.params, self.iters))
            except ValueError:
                raise NotAffine(
                    s,
                    "a subscript with several affine pieces (a ternary, or a "
                    "division of a value that may be negative)",
                ) from None
        return Load(arr, tuple(idx), v.ctype.dtype)

    def _delinearise(self, sub, strides: list[str]) -> tuple:
        names = set(self.iters) | set(self.params)
        poly = polynomial(sub, names, self.known)
        comps = components(poly, strides, self.params) if poly is not None else None
        if comps is None:
            raise NotAffine(
                sub, f"a linearised subscript that does not split by {strides}"
            )
        ab = self._builder()
        for comp, stride in zip(comps[1:], strides):
            inside = ab.universe()
            text = comp.to_isl()
            head = f"[{', '.join(self.params)}] -> " if self.params else ""
            outside = isl.Set(
                f"{head}{{ [{', '.join(self.iters)}] : {text} < 0 or {text} >= {stride} }}"
            )
            if not self.domain.intersect(outside.intersect(inside)).is_empty():
                raise NotAffine(
                    sub,
                    f"a linearised subscript whose part {comp} may leave [0, {stride}) "
                    "(the same element would have two index tuples)",
                )
        return tuple(comps)

    def _affine(self, fn, node):
        """``fn(node)``, with data reads reported as data-dependent."""
        try:
            return fn(node)
        except NotAffine as err:
            if isinstance(err.node, c_ast.ID) and err.node.name in self.written:
                raise NotAffine(
                    err.node,
                    f"the variable {err.node.name}, which the region writes "
                    "(data-dependent)",
                ) from None
            raise

    def _builder(self, extra: list[str] = ()) -> AffineBuilder:
        return AffineBuilder(
            self.params, self.iters + list(extra), self.known, self.pinned
        )

    def _universe(self, iters) -> isl.Set:
        return AffineBuilder(self.params, list(iters), self.known).universe()

    # statements ----------------------------------------------------------------------
    def _block(self, items, top: bool = False) -> None:
        for item in items or ():
            self._stmt(item, top)

    def _stmt(self, node, top: bool = False) -> None:
        if isinstance(node, c_ast.Compound):
            self.scopes.append({})
            self._block(node.block_items)
            self.scopes.pop()
        elif isinstance(node, c_ast.For):
            self._for(node)
        elif isinstance(node, c_ast.If):
            self._if(node)
        elif isinstance(node, c_ast.Assignment):
            self._assignment(node)
        elif isinstance(node, c_ast.UnaryOp) and node.op in ("p++", "p--", "++", "--"):
            one = c_ast.Constant("int", "1", node.coord)
            op = "+=" if "+" in node.op else "-="
            self._assign(node, node.expr, op, one)
        elif isinstance(node, c_ast.ExprList):
            for e in node.exprs:
                self._stmt(e)
        elif isinstance(node, c_ast.Decl):
            self._decl(node, top)
        elif isinstance(node, c_ast.DeclList):
            for d in node.decls:
                self._decl(d, top)
        elif isinstance(node, (c_ast.EmptyStatement, c_ast.Pragma)):
            return
        elif type(node) in _UNSUPPORTED:
            raise NotAffine(
                node,
                _UNSUPPORTED[type(node)]
                + " (control flow leaves the region's affine structure)",
            )
        elif isinstance(node, c_ast.FuncCall):
            raise NotAffine(
                node, "a function call statement, which may have side effects"
            )
        else:
            raise NotAffine(node, f"a {type(node).__name__} statement")

    def _assignment(self, node: c_ast.Assignment) -> None:
        rhs = node.rvalue
        if isinstance(rhs, c_ast.Assignment):  # a = b = c: b = c; a = b
            self._assignment(rhs)
            rhs = rhs.lvalue
        self._assign(node, node.lvalue, node.op, rhs)

    def _assign(self, node, lvalue, op: str, rvalue) -> None:
        target = self._target(lvalue)
        if isinstance(rvalue, _Value):
            value = rvalue.expr
        elif op == "=":
            value = self.body.number(rvalue)
        else:
            value = self.body.number(
                c_ast.BinaryOp(op[:-1], lvalue, rvalue, node.coord)
            )
        value = cast(value, target.dtype)
        if self.guard is not None:  # under a condition on data: keep the old value
            value = Select(self.guard, value, target, target.dtype)
        try:
            with self.p.origin(self.origin(node)):
                stmt = self.p.assign(target, value)
        except (DefinitionError, DTypeError) as err:
            raise NotAffine(node, f"a statement polyc cannot build ({err})") from None
        self.stmt_loops[stmt.name] = tuple(self.loops)

    def _target(self, node) -> Load:
        if isinstance(node, c_ast.ArrayRef):
            return self._element(node)
        if isinstance(node, c_ast.ID):
            if node.name in self.iterator_names:
                raise NotAffine(node, f"an assignment to the loop iterator {node.name}")
            v = self._lookup(node.name)
            if v is None or v.is_array:
                raise NotAffine(
                    node,
                    f"an assignment to {node.name}, which is not a scalar variable",
                )
            return Load(self._array_for(v, node), (), v.ctype.dtype)
        raise NotAffine(node, "an assignment through a pointer or struct")

    def _decl(self, node: c_ast.Decl, top: bool) -> None:
        ctype = resolve(node.type, self.typedefs)
        if ctype is None:
            raise NotAffine(node, "a declaration of a function, struct or union")
        # a declaration at the region's top level stays visible after the region
        v = Var(node.name, ctype, "hoisted" if top else "region", node)
        self.scopes[-1][node.name] = v
        if top:
            self.hoisted.append(v)
        if node.name in self.iterator_names and not ctype.ndim:
            if node.init is not None:
                raise NotAffine(
                    node, f"an initialised declaration of the loop iterator {node.name}"
                )
            return
        if ctype.ndim:
            if node.init is not None:
                raise NotAffine(node.init, "an array initializer list")
            self._array_for(v, node)
        elif node.init is not None:
            self._array_for(v, node)
            self._assign(node, c_ast.ID(node.name, node.coord), "=", node.init)

    def _if(self, node: c_ast.If) -> None:
        ab = self._builder()
        try:
            cond = self._affine(ab.cond, node.cond)
        except NotAffine:
            self._data_if(node)
            return
        outer = self.domain
        with self.p.when(cond):
            self.domain = outer.intersect(cond)
            self._stmt(node.iftrue)
        if node.iffalse is not None:
            other = ab.universe().subtract(cond)
            with self.p.when(other):
                self.domain = outer.intersect(other)
                self._stmt(node.iffalse)
        self.domain = outer

    def _data_if(self, node: c_ast.If) -> None:
        """If-conversion of a condition on data: ``c = cond`` once, then every
        assignment under it becomes ``x = c ? value : x`` (``else``: ``!c``). Raises
        NotAffine when the condition is not a data expression either."""
        value = self.body.truth(node.cond)  # raises for what is not data either
        parent = self.guard
        if parent is not None:  # C evaluates the inner condition only under the outer
            value = Select(parent, value, Const(False, dtypes.bool_), dtypes.bool_)
        name = f"polyc_c{self._guards}"
        self._guards += 1
        v = Var(name, CType(("_Bool",)), "region", node)
        self.scopes[-1][name] = v
        self._array_for(v, node)
        self.guard = None  # the condition itself is computed in every iteration
        self._assign(node, c_ast.ID(name, node.coord), "=", _Value(value))
        c = Load(name, (), dtypes.bool_)
        self.guard = c
        try:
            self._stmt(node.iftrue)
            if node.iffalse is not None:
                other = Unary("not", c, dtypes.bool_)
                if parent is not None:
                    other = Binary("and", parent, other, dtypes.bool_)
                self.guard = other
                self._stmt(node.iffalse)
        finally:
            self.guard = parent

    def _for(self, node: c_ast.For) -> None:
        name, init, ctype = self._loop_init(node)
        step = self._loop_step(node, name)
        _check_not_written(node.stmt, name)
        ab = self._builder([name])
        lb = self._affine(ab.expr, init)
        i = ab.name(name)
        if node.cond is None:
            raise NotAffine(node, "a loop without a condition (it never ends)")
        cond = self._affine(ab.cond, node.cond)
        start = i.ge_set(lb) if step > 0 else i.le_set(lb)
        if abs(step) > 1:
            start = start.intersect(i.sub(lb).mod_val(isl.Val(abs(step))).zero_set())
        outer = self.domain.add_dims(isl.dim_type.set, 1)
        _check_monotone(node, outer.intersect(start), cond, step)
        dom = start.intersect(cond)
        if name in self.iters:
            raise NotAffine(node, f"a loop over {name} inside a loop over {name}")
        if name in self.params:
            raise NotAffine(node, f"a loop over {name}, which is also a parameter")
        with self.p.loop(name, [], [], step=1 if step > 0 else -1, where=dom):
            self.iters.append(name)
            self.iter_types.append(ctype)
            self.loops.append(next(self._ids))
            saved = self.domain
            self.domain = outer.intersect(dom)
            self.scopes.append({})
            try:
                self._stmt(node.stmt)
            finally:
                self.scopes.pop()
                self.domain = saved
                self.iters.pop()
                self.iter_types.pop()
                self.loops.pop()

    def _loop_init(self, node: c_ast.For):
        init = node.init
        if (
            isinstance(init, c_ast.Assignment)
            and init.op == "="
            and isinstance(init.lvalue, c_ast.ID)
        ):
            name = init.lvalue.name
            v = self._lookup(name)
            dt = v.ctype.dtype if v is not None and v.ctype.is_integer else None
            return name, init.rvalue, dt or dtypes.int32
        if (
            isinstance(init, c_ast.DeclList)
            and len(init.decls) == 1
            and init.decls[0].init is not None
        ):
            d = init.decls[0]
            t = resolve(d.type, self.typedefs)
            if t is None or not t.is_integer or t.ndim:
                raise NotAffine(d, "a loop iterator that is not an integer")
            return d.name, d.init, t.dtype or dtypes.int64
        raise NotAffine(
            init if init is not None else node,
            "a loop initialisation other than 'i = expression'",
        )

    def _loop_step(self, node: c_ast.For, name: str) -> int:
        nxt = node.next
        if isinstance(nxt, c_ast.UnaryOp) and _is_id(nxt.expr, name):
            if nxt.op in ("p++", "++"):
                return 1
            if nxt.op in ("p--", "--"):
                return -1
        if isinstance(nxt, c_ast.Assignment) and _is_id(nxt.lvalue, name):
            if nxt.op in ("+=", "-="):
                s = self._constant(nxt.rvalue)
                return s if nxt.op == "+=" else -s
            r = nxt.rvalue
            if nxt.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op in ("+", "-"):
                if _is_id(r.left, name):
                    s = self._constant(r.right)
                    return s if r.op == "+" else -s
                if r.op == "+" and _is_id(r.right, name):
                    return self._constant(r.left)
        raise NotAffine(
            nxt if nxt is not None else node,
            f"a loop increment other than {name}++, {name}--, {name} += c or {name} -= c",
        )

    def _constant(self, node) -> int:
        ab = AffineBuilder(self.params, [], self.known, self.pinned)
        ab._substitute = True
        pw = ab.expr(node)
        if not pw.is_cst() or len(pw.get_pieces()) != 1:
            raise NotAffine(node, "a loop step that is not an integer constant")
        value = int(pw.get_pieces()[0][1].get_constant_val().to_python())
        if value == 0:
            raise NotAffine(node, "a loop step of zero")
        return value


class _Value:
    """An already translated right-hand side."""

    def __init__(self, expr):
        self.expr = expr


def _check_monotone(node, start: isl.Set, cond: isl.Set, step: int) -> None:
    """C stops a loop at the first value that fails its condition; the domain
    ``start and cond`` is that only if no earlier value fails. Refuse otherwise."""
    n = start.dim(isl.dim_type.set)
    dom = start.intersect(cond)
    fails = start.subtract(cond)
    if fails.is_empty() or dom.is_empty():
        return
    # pairs (x, y) with x in dom, y failing, y before x in the loop's direction
    space = isl.Space.create_from_names(
        start.get_ctx(),
        in_=[f"a{k}" for k in range(n)],
        out=[f"b{k}" for k in range(n)],
        params=[
            start.get_dim_name(isl.dim_type.param, k)
            for k in range(start.dim(isl.dim_type.param))
        ],
    )
    order = isl.Map.universe(space)
    for k in range(n - 1):
        order = order.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    if step > 0:
        order = order.order_gt(isl.dim_type.in_, n - 1, isl.dim_type.out, n - 1)
    else:
        order = order.order_lt(isl.dim_type.in_, n - 1, isl.dim_type.out, n - 1)
    bad = order.intersect_domain(dom).intersect_range(fails)
    if not bad.is_empty():
        raise NotAffine(
            node.cond,
            "a loop condition that holds again after it first fails (C would stop "
            "the loop earlier than the set of values where it holds)",
        )


def _check_not_written(stmt, name: str) -> None:
    for n in walk_nodes([stmt]):
        target = None
        if isinstance(n, c_ast.Assignment):
            target = n.lvalue
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("p++", "p--", "++", "--"):
            target = n.expr
        if target is not None and _is_id(target, name):
            raise NotAffine(
                n, f"an assignment to the loop iterator {name} inside its loop"
            )


def _is_id(node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def _loop_var(node: c_ast.For) -> str | None:
    init = node.init
    if isinstance(init, c_ast.Assignment) and isinstance(init.lvalue, c_ast.ID):
        return init.lvalue.name
    if isinstance(init, c_ast.DeclList) and init.decls:
        return init.decls[0].name
    return None


def _base_name(node) -> str | None:
    while isinstance(node, c_ast.ArrayRef):
        node = node.name
    return node.name if isinstance(node, c_ast.ID) else None


def walk_nodes(nodes):
    """Every pycparser node under ``nodes`` (pre-order)."""
    stack = list(reversed([n for n in nodes if n is not None]))
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed([c for _, c in n.children()]))
