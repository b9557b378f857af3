"""xDSL operations -> a Kernel, through :class:`polyc.lang.program.Program`.

Each ``affine.for`` is a Program loop (its map's results are the ``max`` lower and
``min`` upper bounds), each ``affine.if`` a condition (its ``else`` the set's
complement), each ``affine.store`` a statement whose body is the expression tree
of the stored value (``affine.load`` becomes a Load, ``arith``/``math`` the ops of
:mod:`polyc.ir.expr`). Index values (loop variables, ``index`` arguments,
``affine.apply``) are Affs, so every access relation is exact. Arrays that only
``memref.alloc`` makes are temporaries; the roles of the arguments come from the
program's dataflow (read only: input; fully written before any read: output;
otherwise in-out), as the C frontend decides them.
"""

from __future__ import annotations

import re
from contextlib import ExitStack

import islpy as isl

from polyc.errors import FrontendError, PolycError
from polyc.frontends.c.affine import isl_aff_to_aff
from polyc.frontends.c.model import _in_bounds, _roles
from polyc.frontends.mlir import ops as mops
from polyc.ir.affine import Aff, var
from polyc.ir.expr import Index, Load, cast
from polyc.ir.kernel import Kernel, Role, access_map
from polyc.lang.program import Program

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_IGNORED = {"affine.yield", "memref.dealloc", "func.return"}


where = mops.where


def refuse(op, filename: str, what: str, fix: str) -> FrontendError:
    return FrontendError(f"{where(op, filename)}: from_mlir: {what}. {fix}")


def hint(value, source: list[str]) -> str | None:
    """The name the source text gives ``value`` (``%i``), read at its location
    (mlir-opt renames every value; its locations point into the original)."""
    loc = getattr(value, "location", None)
    if loc is None and hasattr(value, "op"):
        loc = getattr(value.op, "location", None)
    line = getattr(getattr(loc, "line", None), "data", None)
    if line is None or not 0 < line <= len(source):
        return value.name_hint
    text, col = source[line - 1], loc.column.data - 1
    m = re.match(r"%([A-Za-z_][A-Za-z0-9_]*)", text[col:])
    if m is None:  # an operation's result: the name before "=" on its line
        m = re.search(r"%([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*\d+\s*)?=\s*$", text[:col])
    return m.group(1) if m else None


def lower(module, function: str | None, filename: str, source: str = "") -> Kernel:
    """The Kernel of ``function`` (default: the last ``func.func``) in ``module``."""
    funcs = [op for op in module.walk() if op.name == "func.func"]
    if function is not None:
        funcs = [f for f in funcs if f.sym_name.data == function]
    if not funcs:
        raise FrontendError(
            f"from_mlir: no func.func{f' @{function}' if function else ''} in "
            f"{filename} because the module defines "
            f"{'none' if function is None else 'others'}. Pass a module with the "
            "function to import."
        )
    return _Lower(funcs[-1], filename, source.splitlines()).run()


class _Lower:
    def __init__(self, func, filename: str, source: list[str]):
        self.func = func
        self.source = source
        self.filename = filename
        self.p = Program(func.sym_name.data)  # the name polyc.to_mlir gave it
        self.env: dict = {}  # SSA value -> ("aff", Aff) | ("expr", Expr) | ("mem", name)
        self.loops: list[str] = []
        self.names: set[str] = set()
        self.seq = 0
        self.load_seq: dict[int, tuple[int, str]] = {}
        self.last_store: dict[str, int] = {}
        self.dynamic: dict[str, list[int]] = {}
        self.temps: set[str] = set()
        self.loops_seen = 0

    def fail(self, op, what: str, fix: str) -> FrontendError:
        return refuse(op, self.filename, what, fix)

    # arguments ------------------------------------------------------------------
    def run(self) -> Kernel:
        func = self.func
        if func.body.blocks == () or not func.body.blocks:
            raise self.fail(func, "the function has no body", "Import a definition.")
        if list(func.function_type.outputs.data):
            raise self.fail(
                func,
                "the function returns values because it works on tensors or returns "
                "memrefs",
                "Bufferize with results as out-parameters: mlir-opt "
                "--one-shot-bufferize=bufferize-function-boundaries "
                "--buffer-results-to-out-params.",
            )
        for i, arg in enumerate(func.body.block.args):
            name = self.fresh_name(hint(arg, self.source), f"arg{i}")
            if mops.is_index(arg.type):
                self.env[arg] = ("aff", self.param(name))
            else:
                self.env[arg] = ("mem", self.array(func, name, arg.type))
        self.block(func.body.block)
        return self.finish()

    def fresh_name(self, hint: str | None, default: str) -> str:
        name = hint if hint and _IDENT.match(hint) else default
        base, n = name, 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name

    def param(self, name: str) -> Aff:
        self.p.param(name)
        return var(name)

    def array(self, op, name: str, mtype) -> str:
        dtype, shape = mops.memref(op, mtype, self.filename)
        dyn = [d for d, n in enumerate(shape) if n < 0]
        if dyn:
            self.dynamic[name] = dyn
        self.p.array(name, [max(n, 1) for n in shape], dtype, role="inout")
        return name

    # the walk -------------------------------------------------------------------
    def block(self, block) -> None:
        for op in block.ops:
            try:
                self.op(op)
            except FrontendError:
                raise
            except PolycError as err:
                raise self.fail(
                    op, str(err).rstrip("."), "Fix this operation"
                ) from None

    def op(self, op) -> None:
        name = op.name
        if name in _IGNORED:
            if name == "func.return" and op.operands:
                raise self.fail(op, "the function returns values", "Return nothing.")
            return
        if name == "affine.for":
            return self.for_(op)
        if name == "affine.parallel":
            return self.parallel(op)
        if name == "affine.if":
            return self.if_(op)
        if name == "affine.load":
            return self.load(op)
        if name == "affine.store":
            return self.store(op)
        if name == "affine.apply":
            (aff,) = self.map(op, op.map.data, op.mapOperands)
            self.env[op.results[0]] = ("aff", aff)
            return
        if name in ("memref.alloc", "memref.alloca"):
            if op.operands:
                raise self.fail(
                    op, "a memref.alloc with dynamic sizes", "Allocate static shapes."
                )
            given = hint(op.results[0], self.source)
            arr = self.array(
                op, self.fresh_name(given, f"t{len(self.temps)}"), op.results[0].type
            )
            self.temps.add(arr)
            self.env[op.results[0]] = ("mem", arr)
            return
        if name == "memref.copy":
            return self.copy(op)
        value = mops.value(op, self.operand, self.filename)
        self.env[op.results[0]] = value

    def operand(self, v):
        item = self.env.get(v)
        if item is None:
            raise FrontendError(
                f"{self.filename}: from_mlir: a value defined outside the subset is "
                "used. Define values with affine, arith and math operations."
            )
        return item

    def aff_of(self, op, v) -> Aff:
        kind, value = self.operand(v)
        if kind != "aff":
            raise self.fail(
                op,
                "an index is computed from data (a loaded or converted value), which "
                "no affine access can hold",
                "Index arrays with loop variables, parameters and constants only",
            )
        return value

    def map(self, op, amap, operands) -> list[Aff]:
        vals = [self.aff_of(op, v) for v in operands]
        dims, syms = vals[: amap.num_dims], vals[amap.num_dims :]
        return [mops.affine(op, e, dims, syms, self.filename) for e in amap.results]

    def loop_name(self, iv, depth: int) -> str:
        hint_ = hint(iv, self.source) if iv is not None else None
        taken = set(self.loops) | set(self.p.params) | set(self.p.arrays)
        name = hint_ if hint_ and _IDENT.match(hint_) and hint_ not in taken else None
        n = depth
        while name is None or name in taken:
            name, n = f"i{n}", n + 1
        return name

    def for_(self, op) -> None:
        if op.inits:
            raise self.fail(
                op,
                "an affine.for with iter_args (a loop-carried value)",
                "Keep the value in a memref (e.g. mlir-opt --affine-scalrep undone)",
            )
        lo = self.map(op, op.lowerBoundMap.data, op.lowerBoundOperands)
        hi = self.map(op, op.upperBoundMap.data, op.upperBoundOperands)
        step = op.step.value.data
        iv = op.body.block.args[0]
        name = self.loop_name(iv, len(self.loops))
        with self.p.loop(name, lo, hi, step, self.band(op)) as i:
            self.env[iv] = ("aff", i.aff)
            self.loops.append(name)
            self.block(op.body.block)
            self.loops.pop()

    def band(self, op) -> str:
        """The loop's band name: ``polyc.band`` (polyc.to_mlir writes it), else
        ``M<n>``. Not the Program's own ``L<n>``: the accelerator scheduler names
        a fused layer ``L<index>``, and a band already called so makes its fusion
        fail (the C frontend's kernels meet that)."""
        given = mops.prop(op, "polyc.band")
        self.loops_seen += 1
        return given.data if given is not None else f"M{self.loops_seen - 1}"

    def parallel(self, op) -> None:
        """``affine.parallel`` as nested loops (the parallelism is the
        scheduler's to find again)."""
        if op.res or list(op.reductions.data):
            raise self.fail(op, "an affine.parallel with reductions", "Use stores.")
        lows = self.map(op, op.lowerBoundsMap.data, op.map_operands)
        highs = self.map(op, op.upperBoundsMap.data, op.map_operands)
        lg = list(op.lowerBoundsGroups.get_values())
        ug = list(op.upperBoundsGroups.get_values())
        steps = [s.value.data for s in op.steps.data]
        with ExitStack() as stack:
            lo_at = hi_at = 0
            for k, iv in enumerate(op.body.block.args):
                name = self.loop_name(iv, len(self.loops))
                lo, hi = lows[lo_at : lo_at + lg[k]], highs[hi_at : hi_at + ug[k]]
                lo_at, hi_at = lo_at + lg[k], hi_at + ug[k]
                band = self.band(op) if k == 0 else None
                i = stack.enter_context(self.p.loop(name, lo, hi, steps[k], band))
                self.env[iv] = ("aff", i.aff)
                self.loops.append(name)
            self.block(op.body.block)
            del self.loops[len(self.loops) - len(op.body.block.args) :]

    def if_(self, op) -> None:
        if op.res:
            raise self.fail(op, "an affine.if that yields values", "Use stores.")
        aset = mops.prop(op, "condition").data
        vals = [self.aff_of(op, v) for v in op.args]
        dims, syms = vals[: aset.num_dims], vals[aset.num_dims :]
        parts = []
        for c in aset.constraints:
            e = mops.affine(op, c.lhs - c.rhs, dims, syms, self.filename)
            rel = {"ge": ">=", "le": "<=", "eq": "="}[c.kind.name]
            parts.append(f"{e.to_isl()} {rel} 0")
        text = " and ".join(parts) or "true"
        with self.p.when(text):
            self.block(op.then_region.block)
        if op.else_region.blocks and any(
            o.name != "affine.yield" for o in op.else_region.block.ops
        ):
            head = f"[{', '.join(self.p.params)}] -> " if self.p.params else ""
            space = f"{head}{{ [{', '.join(self.loops)}] : {text} }}"
            with self.p.when(isl.Set(space).complement()):
                self.block(op.else_region.block)

    def load(self, op) -> None:
        arr = self.mem(op, op.memref)
        idx = self.map(op, op.map.data, op.indices)
        ld = Load(arr, tuple(idx), self.p.arrays[arr].dtype)
        self.seq += 1
        self.load_seq[id(ld)] = (self.seq, arr)
        self.env[op.results[0]] = ("expr", ld)

    def mem(self, op, v) -> str:
        kind, value = self.operand(v)
        if kind != "mem":
            raise self.fail(op, "a memref operand that is not an array", "")
        return value

    def store(self, op) -> None:
        arr = self.mem(op, op.memref)
        idx = self.map(op, op.map.data, op.indices)
        value = mops.data(self.operand(op.value))
        for node in value.walk():
            seen = self.load_seq.get(id(node)) if isinstance(node, Load) else None
            if seen and self.last_store.get(seen[1], 0) > seen[0]:
                raise self.fail(
                    op,
                    f"the stored value reads {seen[1]} as it was before an earlier "
                    f"store to {seen[1]}, which a statement (that reads when it "
                    "runs) cannot express",
                    "Load the value after the store, or keep it in a separate memref",
                )
        target = Load(arr, tuple(idx), self.p.arrays[arr].dtype)
        if isinstance(value, Index) or value.dtype != target.dtype:
            value = cast(value, target.dtype)
        with self.p.origin(f"{where(op, self.filename)}: affine.store to {arr}"):
            self.p.assign(target, value)
        self.seq += 1
        self.last_store[arr] = self.seq

    def copy(self, op) -> None:
        src, dst = self.mem(op, op.source), self.mem(op, op.destination)
        shape = self.p.arrays[dst].shape
        if self.p.arrays[src].shape != shape or src in self.dynamic:
            raise self.fail(op, "a memref.copy between different shapes", "")
        with ExitStack() as stack:
            its = []
            for d, n in enumerate(shape):
                name = self.loop_name(None, len(self.loops) + d)
                its.append(stack.enter_context(self.p.loop(name, 0, n)).aff)
                self.loops.append(name)
            s = self.p.arrays[src]
            with self.p.origin(f"{where(op, self.filename)}: memref.copy"):
                self.p.assign(
                    Load(dst, tuple(its), s.dtype), Load(src, tuple(its), s.dtype)
                )
            del self.loops[len(self.loops) - len(shape) :]
        self.seq += 1
        self.last_store[dst] = self.seq

    # the kernel -----------------------------------------------------------------
    def finish(self) -> Kernel:
        p = self.p
        if not p.statements:
            raise self.fail(self.func, "the function stores nothing", "")
        params = list(p.params)
        for name, dims in self.dynamic.items():
            p.resize(name, self.inferred(name, dims, params))
        try:
            p.assume(_in_bounds(p, params, p.name))
            first = p.kernel()
            arrays = {
                a: (arr if a not in self.temps else _as(arr, Role.TEMP))
                for a, arr in first.arrays.items()
            }
            arrays = _roles(first, arrays, set(), {})
            return Kernel.create(
                first.name,
                arrays,
                first.statements,
                params,
                first.context,
                schedule=first.schedule,
            )
        except FrontendError:
            raise
        except PolycError as err:
            raise self.fail(
                self.func, str(err).rstrip("."), "Fix the function"
            ) from None

    def inferred(self, name: str, dims: list[int], params) -> list[Aff]:
        """Dynamic extents: one past the largest index the program uses."""
        shape = list(self.p.arrays[name].shape)
        elements = None
        for s in self.p.statements:
            for ld in (s.target, *s.reads):
                if ld.array == name:
                    r = access_map(s, ld, params).range()
                    elements = r if elements is None else elements.union(r)
        for d in dims:
            hi = elements.dim_max(d).coalesce() if elements is not None else None
            if hi is not None and params:  # parameters are sizes: at least 1
                positive = " and ".join(f"{q} >= 1" for q in params)
                hi = hi.intersect_params(
                    isl.Set(f"[{', '.join(params)}] -> {{ : {positive} }}")
                )
            whole = _one_piece(hi) if hi is not None else None
            if whole is None:
                raise self.fail(
                    self.func,
                    f"the extent of {name}'s dimension {d} is dynamic and the "
                    f"largest index the program uses is {hi}",
                    "Give the memref a static size there",
                )
            shape[d] = isl_aff_to_aff(whole, params, []) + 1
        return shape


def _one_piece(hi: isl.PwAff) -> isl.Aff | None:
    """The one affine function equal to ``hi`` wherever it is defined (isl splits
    ``max(0, N - 1)`` for ``N >= 1`` in two pieces that agree at ``N = 1``)."""
    for _, aff in hi.get_pieces():
        candidate = isl.PwAff.from_aff(aff).intersect_domain(hi.domain())
        if hi.eq_set(candidate).is_equal(hi.domain()):
            return aff
    return None


def _as(arr, role):
    return type(arr)(arr.name, arr.shape, arr.dtype, role)
