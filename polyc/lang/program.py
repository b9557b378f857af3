"""An imperative builder for affine programs with shared loops.

The compute API gives each definition its own loop nest. Some programs need loops
that enclose several statements (a time loop around a stencil and its copy-back) or
in-place updates (LU, Seidel). The builder writes them as they read in C::

    p = Program("jacobi1d")
    T, N = p.param("T"), p.param("N")
    A = p.array("A", (N,), "float32", role="inout")
    B = p.array("B", (N,), "float32", role="temp")
    with p.loop("t", 0, T):
        with p.loop("i", 1, N - 1) as i:
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
        with p.loop("i", 1, N - 1) as i:
            A[i] = B[i]
    kernel = p.kernel()

The program-order schedule follows the nesting: each perfectly nested chain of loops
is one band, named after its outermost loop (``name=``, else ``L0``, ``L1``, ...), and
statements and loops at one level form a sequence. The C frontend builds through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import islpy as isl

from polyc.errors import ArgumentError, DefinitionError, DTypeError
from polyc.ir import dtypes, tree
from polyc.ir.affine import Aff, var
from polyc.ir.expr import Expr, Index, Load, cast, lift
from polyc.ir.kernel import Array, Kernel, Role, Statement, params_head
from polyc.lang.lower import affine_condition
from polyc.lang.surface import affine_index


@dataclass
class _Loop:
    var: str
    name: str | None
    constraints: list[str]
    children: list = field(default_factory=list)
    sets: list[isl.Set] = field(default_factory=list)
    sign: int = 1  # -1: the loop runs downward (its band member is -var)


@dataclass
class _Stmt:
    stmt: Statement


class ProgramArray:
    """An array of a :class:`Program`; index it to read, assign to write."""

    def __init__(self, program: Program, array: Array):
        self._program = program
        self.array = array

    @property
    def name(self) -> str:
        return self.array.name

    @property
    def dtype(self):
        return self.array.dtype

    def __getitem__(self, idx) -> Load:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if idx == ((),) or (len(idx) == 1 and idx[0] is Ellipsis):
            idx = ()
        if len(idx) != self.array.ndim:
            raise DefinitionError(
                f"{self.name}[...]: {len(idx)} indices for a {self.array.ndim}-d array. "
                "Index every dimension."
            )
        return Load(
            self.name, tuple(affine_index(self.name, x) for x in idx), self.dtype
        )

    def __setitem__(self, idx, value) -> None:
        self._program.assign(self[idx], value)


class Program:
    """Builds a Kernel statement by statement, inside loops and conditions."""

    def __init__(self, name: str):
        self.name = name
        self._params: list[str] = []
        self._context: list[str] = []
        self._context_sets: list[isl.Set] = []
        self._arrays: dict[str, Array] = {}
        self._root = _Loop("", None, [])
        self._stack: list[_Loop] = [self._root]
        self._conds: list[str | isl.Set] = []
        self._loop_counter = 0
        self._stmts: list[Statement] = []
        self._origin: str = ""

    # declarations -------------------------------------------------------------
    def param(self, name: str, minimum: int | None = 1) -> Index:
        """A symbolic size; ``minimum`` adds ``name >= minimum`` to the context."""
        if name not in self._params:
            self._params.append(name)
            if minimum is not None:
                self._context.append(f"{name} >= {minimum}")
        return Index(var(name))

    def assume(self, constraint: str | isl.Set) -> None:
        """Add a parameter assumption in isl syntax, e.g. ``"N % 4 = 0"``, or as an
        ``isl.Set`` over the parameters."""
        if isinstance(constraint, isl.Set):
            self._context_sets.append(constraint)
        else:
            self._context.append(constraint)

    def array(self, name: str, shape: Sequence, dtype="float32", role="input"):
        if name in self._arrays:
            raise DefinitionError(f"program: array {name!r} declared twice.")
        shape_affs = tuple(_aff(d) for d in shape)
        arr = Array(name, shape_affs, dtypes.as_dtype(dtype), Role(role))
        self._arrays[name] = arr
        return ProgramArray(self, arr)

    def resize(self, name: str, shape: Sequence) -> None:
        """Set the shape of a declared array before :meth:`kernel` (the C frontend
        infers extents that no declaration states, e.g. of pointer parameters)."""
        arr = self._arrays.get(name)
        if arr is None:
            raise DefinitionError(f"program: unknown array {name!r}.")
        self._arrays[name] = Array(
            name, tuple(_aff(d) for d in shape), arr.dtype, arr.role
        )

    @property
    def statements(self) -> tuple[Statement, ...]:
        """The statements assigned so far, in program order."""
        return tuple(self._stmts)

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self._params)

    @property
    def arrays(self) -> dict[str, Array]:
        return dict(self._arrays)

    # structure ----------------------------------------------------------------
    @contextmanager
    def loop(
        self,
        name: str,
        lo,
        hi,
        step: int = 1,
        band: str | None = None,
        *,
        where: isl.Set | None = None,
    ):
        """``for name in [max(lo), min(hi)) step step``; ``lo``/``hi`` may be lists
        (their max/min, an empty list leaves that side to ``where``). Yields the index
        variable.

        A negative ``step`` runs the loop downward, from ``min(hi) - 1`` (a single
        upper bound anchors the stride) to ``max(lo)``, as C's ``for (i = hi - 1;
        i >= lo; i -= s)``. ``where`` adds constraints as an ``isl.Set`` whose
        dimensions are the enclosing loop variables and then ``name`` (piecewise
        bounds such as C's truncating division, built by the C frontend).
        """
        if step == 0:
            raise ArgumentError(f"loop {name}: step 0 never advances. Use step 1.")
        if any(lp.var == name for lp in self._stack[1:]):
            raise DefinitionError(
                f"loop {name}: an enclosing loop already uses {name!r}. Rename one."
            )
        los = [_aff(x) for x in (lo if isinstance(lo, (list, tuple)) else [lo])]
        his = [_aff(x) for x in (hi if isinstance(hi, (list, tuple)) else [hi])]
        cons = [f"{name} >= {a.to_isl()}" for a in los]
        cons += [f"{name} < {a.to_isl()}" for a in his]
        if abs(step) > 1:
            anchors = los if step > 0 else [a - 1 for a in his]
            if len(anchors) != 1:
                side = "lower" if step > 0 else "upper"
                raise ArgumentError(
                    f"loop {name}: a step needs a single {side} bound because the "
                    f"stride starts there, but {len(anchors)} were given. Pass one "
                    "bound, or the stride as a `where` set."
                )
            sign = "-" if step > 0 else "+"
            cons.append(f"({name} {sign} ({anchors[0].to_isl()})) mod {abs(step)} = 0")
        node = _Loop(name, band, cons, sign=1 if step > 0 else -1)
        if where is not None:
            node.sets.append(where)
        self._stack[-1].children.append(node)
        self._stack.append(node)
        try:
            yield Index(var(name))
        finally:
            self._stack.pop()

    @contextmanager
    def when(self, condition):
        """Statements inside run only where the affine ``condition`` holds (an isl
        constraint string, a comparison of index expressions, or an ``isl.Set`` whose
        dimensions are the enclosing loop variables)."""
        if isinstance(condition, (str, isl.Set)):
            text = condition
        else:
            text = _cond_text(condition)
        self._conds.append(text)
        try:
            yield
        finally:
            self._conds.pop()

    @contextmanager
    def origin(self, text: str):
        """Attach a source location to the statements made inside."""
        old, self._origin = self._origin, text
        try:
            yield
        finally:
            self._origin = old

    def assign(self, target: Load, value) -> Statement:
        """``target = value`` at the current position."""
        arr = self._arrays.get(target.array)
        if arr is None:
            raise DefinitionError(f"program: unknown array {target.array!r}.")
        rhs = lift(value, target)
        if isinstance(rhs, Index):
            rhs = cast(rhs, arr.dtype)
        if rhs.dtype != arr.dtype:
            raise DTypeError(
                f"{target} = ...: the value is {rhs.dtype} but {arr.name} is "
                f"{arr.dtype}. Cast it with .astype('{arr.dtype}')."
            )
        name = f"S{len(self._stmts)}"
        iters = [lp.var for lp in self._stack[1:]]
        cons = [c for lp in self._stack[1:] for c in lp.constraints]
        cons += [c for c in self._conds if isinstance(c, str)]
        body = f"{name}[{', '.join(iters)}]" + (
            f" : {' and '.join(cons)}" if cons else ""
        )
        try:
            dom = isl.Set(f"{params_head(self._params)}{{ {body} }}")
        except isl.Error as err:
            raise DefinitionError(
                f"{name}: its domain {body} is not a valid affine set ({err}). Use "
                "affine bounds and conditions."
            ) from None
        sets = [c for lp in self._stack[1:] for c in lp.sets]
        sets += [c for c in self._conds if isinstance(c, isl.Set)]
        for cond in sets:
            dom = dom.intersect(_extend(cond, dom))
        if sets:
            dom = dom.coalesce()
        stmt = Statement(name, tuple(iters), dom, target, rhs, self._origin)
        self._stmts.append(stmt)
        self._stack[-1].children.append(_Stmt(stmt))
        return stmt

    # result --------------------------------------------------------------------
    def kernel(self) -> Kernel:
        """The Kernel, with the program-order schedule of the loop structure."""
        if not self._stmts:
            raise DefinitionError(f"program {self.name}: no statements.")
        ctx = " and ".join(self._context) or None
        if self._context_sets:
            ctx = _context_set(self._params, ctx)
            for extra in self._context_sets:
                ctx = ctx.intersect(extra.align_params(ctx.get_space()))
        schedule = self._schedule()
        return Kernel.create(
            self.name,
            self._arrays.values(),
            self._stmts,
            self._params,
            ctx,
            schedule=schedule,
        )

    def _schedule(self) -> isl.Schedule:
        domain = _union([s.domain for s in self._stmts])
        schedule = isl.Schedule.from_domain(domain)
        node = schedule.get_root().child(0)
        node = self._insert(node, self._root.children, depth_iters=[])
        return node.get_schedule()

    def _insert(self, node: isl.ScheduleNode, children: list, depth_iters: list[str]):
        """Insert the subtree for ``children`` at ``node`` (a leaf); return the node
        at the same position after insertion."""
        if len(children) > 1:
            filters = isl.UnionSetList.alloc(node.get_ctx(), len(children))
            for c in children:
                filters = filters.add(_union(_domains(c)))
            node = node.insert_sequence(filters)
            for pos, c in enumerate(children):
                node = node.child(pos).child(0)
                node = self._insert_one(node, c, depth_iters)
                node = node.parent().parent()
            return node
        if children:
            return self._insert_one(node, children[0], depth_iters)
        return node

    def _insert_one(self, node, child, depth_iters: list[str]):
        if isinstance(child, _Stmt):
            return node
        chain = [child]
        while len(chain[-1].children) == 1 and isinstance(chain[-1].children[0], _Loop):
            chain.append(chain[-1].children[0])
        stmts = _domains(child)
        n_outer = len(depth_iters)
        mupa = None
        for k, lp in enumerate(chain):
            member = _member(stmts, n_outer + k, lp.sign)
            mupa = member if mupa is None else mupa.flat_range_product(member)
        node = node.insert_partial_schedule(mupa)
        name = chain[0].name or f"L{self._loop_counter}"
        self._loop_counter += 1
        # a downward loop's member is -var: name it apart so code does not read as var
        members = [lp.var if lp.sign > 0 else f"{lp.var}_r" for lp in chain]
        node = node.insert_mark(isl.Id(tree.band_mark(name, members)))
        band = node.child(0)
        inner = self._insert(
            band.child(0), chain[-1].children, depth_iters + [lp.var for lp in chain]
        )
        return inner.parent().parent()


def _domains(child) -> list[isl.Set]:
    if isinstance(child, _Stmt):
        return [child.stmt.domain]
    out: list[isl.Set] = []
    for c in child.children:
        out.extend(_domains(c))
    return out


def _union(sets: list[isl.Set]) -> isl.UnionSet:
    out = isl.UnionSet.from_set(sets[0])
    for s in sets[1:]:
        out = out.union(isl.UnionSet.from_set(s))
    return out


def _member(domains: list[isl.Set], dim: int, sign: int = 1) -> isl.MultiUnionPwAff:
    """``{ S[..] -> [x_dim] }`` (``-x_dim`` for a downward loop) for every statement
    domain (one band member)."""
    upma = None
    for d in domains:
        space = d.get_space()
        ma = isl.MultiAff.identity(space.map_from_set())
        aff = ma.get_at(dim) if hasattr(ma, "get_at") else ma.get_aff(dim)
        if sign < 0:
            aff = aff.neg()
        pma = isl.PwMultiAff.from_multi_aff(
            isl.MultiAff.from_aff(aff)
        ).intersect_domain(d)
        piece = isl.UnionPwMultiAff.from_pw_multi_aff(pma)
        upma = piece if upma is None else upma.union_add(piece)
    return isl.MultiUnionPwAff.from_union_pw_multi_aff(upma)


def _extend(cond: isl.Set, dom: isl.Set) -> isl.Set:
    """``cond`` (over a prefix of the enclosing loop variables) in ``dom``'s space."""
    n = cond.dim(isl.dim_type.set)
    total = dom.dim(isl.dim_type.set)
    if n > total:
        raise DefinitionError(
            f"condition {cond} has {n} dimensions but only {total} loops enclose the "
            "statement. Build it over the enclosing loop variables."
        )
    cond = cond.add_dims(isl.dim_type.set, total - n)
    cond = cond.set_tuple_name(dom.get_tuple_name())
    for d in range(total):
        cond = cond.set_dim_name(
            isl.dim_type.set, d, dom.get_dim_name(isl.dim_type.set, d)
        )
    return cond.align_params(dom.get_space())


def _context_set(params: list[str], text: str | None) -> isl.Set:
    from polyc.ir.kernel import context_set

    return context_set(params, text)


def _aff(x) -> Aff:
    if isinstance(x, Index):
        return x.aff
    if isinstance(x, Expr):
        return affine_index("bound", x)
    return Aff.lift(x)


def _cond_text(e) -> str:
    return affine_condition(lift(e))
