"""Where each buffer of a layer lives: an on-chip level that every engine using it
can reach.

A MAC call ``C[m, n] (+)= A[m, k] @ B[k, n]`` reads A (the *input* operand) from
one of the config's ``mac_array.input_levels``, B (the *weight* operand) from one
of its ``weight_levels`` and reads and writes C in one of its
``accumulator_levels``; the vector unit reads and writes its operands in
``vector.levels``. A buffer used by several engines (a convolution's output,
accumulated by the MAC array and read by a bias/ReLU epilogue on the vector unit)
must sit in a level in all of their sets. :func:`assign` picks, per array of a
layer, the innermost level allowed by every use; :func:`needs` lists the uses and
their levels (for the checks of ``place``, ``tensorize`` and the code generator,
and their messages). With one shared scratchpad (the shipped configs) every
array gets that level.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from accelerator.hardware.spec import Spec
from polyc.ir import tree
from polyc.ir.kernel import Statement

#: the MAC array's operand roles, as the config names their levels
ROLES = {"a": "input", "b": "weight", "c": "accumulator"}


@dataclass(frozen=True)
class Use:
    """One engine's use of an array: who (``stmt``), as what (``role``: input,
    weight, accumulator, vector), and the levels that engine reaches it in."""

    stmt: str
    role: str
    levels: tuple[str, ...]

    @property
    def key(self) -> str:
        """The config key that lists the levels of this use."""
        if self.role == "vector":
            return "vector.levels"
        return f"mac_array.{self.role}_levels"

    def describe(self) -> str:
        what = "the vector unit" if self.role == "vector" else "the MAC array"
        role = "" if self.role == "vector" else f" as its {self.role} operand"
        return (
            f"{what} reaches it{role} for {self.stmt} only in {', '.join(self.levels)}"
        )


def mac_uses(stmt: Statement, spec: Spec, ab=None) -> dict[str, list[Use]]:
    """The arrays a tensorized contraction ``stmt`` reads as A and B (the reads at
    positions ``ab``, by default its contraction's) and accumulates into as C,
    each with the levels the MAC array reaches it in."""
    from schedules.accel.tensorize import contraction

    if ab is None:
        con = contraction(stmt)
        ab = con.a, con.b
    out: dict[str, list[Use]] = {}
    loads = {"a": stmt.reads[ab[0]], "b": stmt.reads[ab[1]], "c": stmt.target}
    for key, ld in loads.items():
        levels = spec.mac_array.role_levels(key)
        out.setdefault(ld.array, []).append(Use(stmt.name, ROLES[key], levels))
    return out


def vector_uses(stmt: Statement, spec: Spec) -> dict[str, list[Use]]:
    """The arrays a vector statement touches, each with the vector unit's levels."""
    arrays = dict.fromkeys(ld.array for ld in (stmt.target, *stmt.reads))
    return {a: [Use(stmt.name, "vector", spec.vector.levels)] for a in arrays}


def output_uses(stmt: Statement, spec: Spec) -> dict[str, list[Use]]:
    """The array a requantization in the MAC array's output path writes: where
    the array puts its accumulators (``pc_mac_output`` checks it)."""
    levels = spec.mac_array.accumulator_levels
    return {stmt.target.array: [Use(stmt.name, ROLES["c"], levels)]}


def needs(stmts, engine_of, spec: Spec) -> dict[str, list[Use]]:
    """Per array, the engine uses of the statements ``stmts`` (``engine_of(name)``
    is ``"mac"``, ``"vector"`` or anything else: a folded init or the scalar core,
    which reach every level)."""
    out: dict[str, list[Use]] = {}
    for s in stmts:
        eng = engine_of(s.name)
        if eng == "mac":
            found = mac_uses(s, spec)
        elif eng == "vector":
            found = vector_uses(s, spec)
        elif eng == "mac_out":
            found = output_uses(s, spec)
        else:
            continue
        for array, uses in found.items():
            out.setdefault(array, []).extend(uses)
    return out


def reached(spec: Spec) -> set[str]:
    """The levels some engine reads or writes (the others only stage copies)."""
    a = spec.mac_array
    return {
        *a.input_levels,
        *a.weight_levels,
        *a.accumulator_levels,
        *spec.vector.levels,
    }


def allowed(spec: Spec, uses: list[Use]) -> list[int]:
    """The on-chip levels (indices, outermost first) that every use reaches."""
    return [
        spec.level_index(m.name)
        for m in spec.sram_levels
        if all(m.name in u.levels for u in uses)
    ]


@dataclass(frozen=True)
class Conflict:
    """An array of a layer that no level serves for all its uses."""

    array: str
    uses: tuple[Use, ...]

    def because(self) -> str:
        return "; ".join(u.describe() for u in self.uses)


def assign(layer, st, spec: Spec, default: int) -> dict[str, int] | Conflict:
    """The level of each array of ``layer`` under structure ``st``: the innermost
    one every engine use reaches (``default`` for an array no engine touches), or
    the first :class:`Conflict`."""
    uses = needs(layer.stmts, st.engine_of, spec)
    out = {}
    for array in layer.arrays:
        mine = uses.get(array)
        if not mine:
            out[array] = default
            continue
        ok = allowed(spec, mine)
        if not ok:
            return Conflict(array, tuple(mine))
        out[array] = ok[-1]
    return out


# the check of a placed schedule ------------------------------------------------------


@dataclass(frozen=True)
class Misplaced:
    """A buffer in a level the engine using it cannot reach."""

    buffer: str
    array: str
    level: str
    use: Use

    def message(self, op: str) -> str:
        fix = self.use.levels[0] if len(self.use.levels) == 1 else "one of them"
        return (
            f"{op}: the buffer {self.buffer} of {self.array} is in level {self.level}, "
            f"which its engine cannot reach, because {self.use.describe()} "
            f"({self.use.key}). Place {self.array} for {self.use.stmt} in {fix}."
        )


def misplaced(kernel, spec: Spec, stmts=None) -> list[Misplaced]:
    """The buffers of ``kernel``'s schedule that an engine reads or writes from a
    level the config does not let it reach: per tensorized statement its A, B and
    C buffers at the MAC call, per vector statement the buffers active at its
    tile (an array with no buffer there stays in DRAM and is not checked here).
    With ``stmts`` (names), at least those of these statements: the children of
    the root sequence that run none of them are not walked (a statement's marks,
    buffers and calls are all below the child that runs it)."""
    import islpy as isl

    from polyc.ir import marks as pm

    out: list[Misplaced] = []
    macs: dict[str, tuple[int, int]] = {}
    T = isl.schedule_node_type
    # a buffer in a level every engine reaches is never misplaced: a leaf whose
    # active buffers are all there has nothing to judge (on a config with one
    # shared scratchpad, no leaf has)
    everywhere = reached_by_all(spec)

    def judge(stmt: Statement, uses: dict[str, list[Use]], active: dict) -> None:
        for array, mine in uses.items():
            b = active.get(array)
            if b is None:
                continue
            for u in mine:
                if b.level not in u.levels:
                    out.append(Misplaced(b.name, array, b.level, u))

    outpath: set[str] = set()

    def judged(names, vector) -> set[str]:
        return {
            n
            for n in names
            if n in vector or (n.startswith(pm.MAC) and n[len(pm.MAC) :] in macs)
        }

    def visit(node, active, vector, reach):
        t = node.get_type()
        if t == T.mark:
            name = node.mark_get_id().get_name()
            kind = pm.kind(name)
            if kind == "buffer":
                b = _parsed(pm.BufferMark, name)
                active = {**active, b.array: b}
            elif kind == "tensorize":
                tm = _parsed(pm.TensorizeMark, name)
                macs[tm.stmt] = tm.ports  # exchanged: B in the input port
            elif kind == "vector":
                vm = _parsed(pm.VectorMark, name)
                vector = vector | set(vm.stmts)
                if vm.unit == "mac":
                    outpath.update(vm.stmts)
        elif t in tree.REACH_TYPES:
            reach = tree.Reach(reach, node)
        if t == T.leaf:
            if all(b.level in everywhere for b in active.values()):
                return
            found = reach.names() if reach is not None else None
            if found is None or len(judged(found, vector)) > 1:
                found = _ordered(node.get_universe_domain())  # isl's order, as before
            for n in found:
                if n.startswith(pm.MAC) and n[len(pm.MAC) :] in macs:
                    stmt = kernel.statement(n[len(pm.MAC) :])
                    judge(stmt, mac_uses(stmt, spec, macs[stmt.name]), active)
                elif n in vector:
                    stmt = kernel.statement(n)
                    uses = output_uses if n in outpath else vector_uses
                    judge(stmt, uses(stmt, spec), active)
        for i in range(node.n_children()):
            visit(node.child(i), active, vector, reach)

    root = kernel.schedule.get_root()
    skip = tree.unrelated_children(root, stmts) if stmts is not None else set()
    if skip:
        seq = root.child(0)
        for i in range(seq.n_children()):
            if i not in skip:
                visit(seq.child(i), {}, frozenset(), tree.Reach(None, root))
    else:
        visit(root, {}, frozenset(), None)
    return list(dict.fromkeys(out))


def reached_by_all(spec: Spec) -> frozenset[str]:
    """The levels that every engine use reaches (the MAC array's three operands,
    its output path and the vector unit): a buffer there is never misplaced."""
    a = spec.mac_array
    sets = [a.input_levels, a.weight_levels, a.accumulator_levels, spec.vector.levels]
    return frozenset.intersection(*(frozenset(s) for s in sets))


def _ordered(uset) -> list[str]:
    """The tuple names of the spaces of a union set, in isl's order."""
    names: list[str] = []
    uset.foreach_set(lambda s: names.append(s.get_tuple_name()))
    return names


@functools.lru_cache(maxsize=4096)
def _parsed(cls, name: str):
    """``cls.parse(name)`` for a mark class (one parse per mark text: a schedule
    is checked after each placement, and its marks are the same each time)."""
    return cls.parse(name)


def check(kernel, spec: Spec, op: str) -> None:
    """Refuse a schedule with a buffer in a level its engine cannot reach (the
    simulator would stop at the first such call).

    Raises:
        PlacementError: naming the buffer, its level, the engine's levels and the
            level to place it in instead.
    """
    from polyc.errors import PlacementError

    bad = misplaced(kernel, spec)
    if bad:
        raise PlacementError(bad[0].message(op))
