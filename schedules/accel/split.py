"""One layer's work split across two engines: an index-set split of its statements.

A depthwise convolution can run on the MAC array (one column busy, its taps on
the rows) and on the vector unit; the engine bound
(:mod:`accelerator.hardware.bound`) lets them share it. :func:`split_layer` cuts
the domain of a run of consecutive statements (the layer's init, contraction and
epilogue) at ``iterator = at`` into two parts with complementary domains, the same
bodies and accesses, and moves the split iterator inside the iterators the
statements share, so that the two parts fuse on those (the layer's tile loops)
and each tile holds work of both::

    for n, o, h, w:                       for n, h, w:
      S0: out[n,o,h,w] = 0                  for o < 24:  S0: out[n,o,h,w] = 0
      for rh, rw:                 ->        for o < 24, rh, rw:  S1: ... (MAC array)
        S1: out[n,o,h,w] += ...             for o >= 24: S0_1: out[n,o,h,w] = 0
                                            for o >= 24, rh, rw: S1_1: ... (vector)

(shown fused, as the scheduler's layer search then fuses them). The parts are
statements of their own, so the accelerator scheduler's search can give each its
engine; ``S0``/``S1`` keep their names for ``iterator < at``, the part from
``at`` on is ``<name>_1``.

**Legality.** The new program runs every instance of the original once (the two
domains partition it) with the same body and accesses; what can change is the
order. Each original statement's instances are mapped to their time in the new
program order (through the part that runs them) and every exact dependence of
the original program (flow, anti, output) must still run forward, the check of
every transformation (:mod:`schedules.legality`). A depthwise convolution's two
parts write disjoint channels and read nothing the other writes, so nothing
crosses; a statement that reads a neighbour along the split iterator written by a
later part is refused with the dependence it would break.
"""

from __future__ import annotations

import dataclasses
import weakref

import islpy as isl

from polyc.errors import ArgumentError, IllegalTransformError
from polyc.ir import tree
from polyc.ir.affine import var
from polyc.ir.expr import Load, substitute_indices
from polyc.ir.kernel import Kernel, Statement, Step
from schedules import legality
from schedules.accel.layers import PART_SHARE, own_program
from schedules.accel.tensorize import contraction


def split_layer(
    kernel: Kernel,
    stmts: tuple[str, ...],
    iterator: str | tuple[str, ...],
    at: int,
    period: int | None = None,
    vector: str = "first",
):
    """``kernel`` with the consecutive statements ``stmts`` each cut at
    ``iterator = at`` (see the module docstring): the parts before ``at`` keep
    the names, in order, then the parts from ``at`` on, named ``<name>_1``; in
    each part ``iterator`` runs inside the iterators all of ``stmts`` share.
    ``iterator`` may name one iterator per statement (a statement from the torch
    frontend names its loops its own way).

    With ``period``, ``iterator`` (from 0) is first strip-mined by ``period``:
    ``iterator = period * <iterator>g + iterator`` with ``0 <= iterator <
    period``, and the cut is at ``iterator = at`` inside each period, so every
    iteration of the new shared iterator ``<iterator>g`` runs both parts on
    neighbouring elements (channels ``[0, at)`` and ``[at, period)`` of each
    group), and a tile of it holds work of both.

    ``vector`` names the part the vector unit runs (the accelerator scheduler's
    search gives the other to the MAC array, :func:`split_engine`): ``"first"``
    (a depthwise layer's channels before the cut in each period) or
    ``"second"`` (a contraction's odd rows past its last full fold of the
    array's rows).

    Raises:
        ArgumentError: ``vector`` is neither ``"first"`` nor ``"second"``, the
            schedule is not the program order (one loop nest per
            statement, as the scheduler has it before its layers), ``stmts`` are
            not consecutive statements, a statement lacks ``iterator``, or a part
            would be empty, or ``period`` does not divide the iterator's range.
        IllegalTransformError: the new order breaks a dependence of the program,
            with a concrete source and sink.
    """
    return _split(kernel, stmts, iterator, at, period, vector, check=True)


def split_checked(
    kernel: Kernel,
    stmts: tuple[str, ...],
    iterator: str | tuple[str, ...],
    at: int,
    period: int | None = None,
    vector: str = "first",
):
    """:func:`split_layer` of a split already checked: ``split_layer(local,
    stmts, iterator, at, period, vector)`` returned a kernel for a program
    ``local`` of exactly the statements ``stmts`` of ``kernel`` (the same
    statements, in their order, as :mod:`schedules.accel.share` searches a
    layer's split on its own). The new order's legality is then known: the
    statements are consecutive loop nests of ``kernel``'s program order, so
    their dependences in ``kernel`` are those of that program, and every
    other runs forward whatever the split does (:func:`_checked_program`).
    The same kernel as :func:`split_layer`'s, without its check (about 35
    ms per depthwise layer of a network; the history records the step, so a
    replay checks it).

    Raises:
        ArgumentError: as :func:`split_layer`.
    """
    return _split(kernel, stmts, iterator, at, period, vector, check=False)


def _split(kernel, stmts, iterator, at, period, vector, check: bool):
    """:func:`split_layer`, its legality checked when ``check``."""
    op = "split_layer"
    stmts = tuple(stmts)
    if vector not in ("first", "second"):
        raise ArgumentError(
            f"{op}: vector={vector!r} names no part because a split has two. "
            'Pass vector="first" or vector="second".'
        )
    names = [s.name for s in kernel.statements]
    if not _program_order(kernel):
        raise ArgumentError(
            f"{op}: the schedule of {kernel.name} is not its program order because it "
            "was transformed. Split the layer before other transformations."
        )
    missing = [n for n in stmts if n not in names]
    if missing or not stmts:
        raise ArgumentError(
            f"{op}: {', '.join(missing) or '(no statement)'} is not a statement of "
            f"{kernel.name}. Name statements among {', '.join(names)}."
        )
    first = names.index(stmts[0])
    if tuple(names[first : first + len(stmts)]) != stmts:
        raise ArgumentError(
            f"{op}: {', '.join(stmts)} are not consecutive statements because the "
            f"program runs {', '.join(names)}. Split a run of consecutive statements."
        )
    group = [kernel.statement(n) for n in stmts]
    its = (iterator,) * len(stmts) if isinstance(iterator, str) else tuple(iterator)
    if len(its) != len(stmts):
        raise ArgumentError(
            f"{op}: {len(its)} iterators for {len(stmts)} statements because "
            f"{', '.join(its)} were given for {', '.join(stmts)}. Give one iterator, "
            "or one per statement."
        )
    cuts = {n: _Cut(it, at, period) for n, it in zip(stmts, its)}
    order = _order(op, group, cuts)
    lower, upper = [], []
    for s in group:
        lo, up = _parts(op, kernel, s, cuts[s.name], order[s.name])
        lower.append(lo)
        upper.append(up)
    taken = set(names)
    for p in upper:
        if p.name in taken:
            raise ArgumentError(
                f"{op}: cannot name the second part of {p.name[:-2]} {p.name} because "
                "the kernel has a statement of that name. Rename it first."
            )
    parts = _interleaved(lower, upper, vector)
    statements = (
        kernel.statements[:first] + parts + kernel.statements[first + len(stmts) :]
    )
    schedule = tree.initial_schedule(
        [(s.name, s.domain, s.iterators) for s in statements]
    )
    program = _checked_program(kernel, group) if check else None
    if program is kernel:
        _check(op, kernel, group, cuts, order, schedule, kernel.statements)
    elif program is not None:  # the group's own parts in their order: the times
        times = tree.initial_schedule([(s.name, s.domain, s.iterators) for s in parts])
        _check(op, program, group, cuts, order, times, group)
    args = (stmts, iterator, at) + ((period,) if period else ())
    kwargs = (("vector", vector),) if vector != "first" else ()
    out = kernel.replace(
        statements=statements,
        schedule=schedule,
        program_schedule=None,
        history=kernel.history + (Step(op, args, kwargs),),
    )
    _ORDERED[out] = True  # its schedule is its statements' initial one
    return out


def _interleaved(lower, upper, vector: str) -> tuple[Statement, ...]:
    """The parts in program order: the MAC array's part up to its last
    contraction, the vector unit's part, then the rest of the MAC array's (its
    epilogue, which the vector unit runs once the array's results are ready).
    So in each tile the vector unit works on its own part while the array runs,
    instead of queueing behind the array's epilogue (the vector unit runs its
    commands in order: the epilogue first waited for the array, then the next
    tile's vector part for the epilogue; a mobilenet's depthwise layer, split,
    took 10,523 cycles against the 5,956 the cost model predicted with both
    engines busy at once)."""
    mac, vec = (upper, lower) if vector == "first" else (lower, upper)
    last = max((n for n, s in enumerate(mac) if contraction(s)), default=-1)
    return (*mac[: last + 1], *vec, *mac[last + 1 :])


@dataclasses.dataclass(frozen=True)
class _Cut:
    iterator: str
    at: int
    period: int | None

    @property
    def group(self) -> str:
        return f"{self.iterator}g"

    def new(self) -> tuple[str, ...]:
        """The iterators that replace ``iterator`` in the parts."""
        return (self.group, self.iterator) if self.period else (self.iterator,)


def _program_order(kernel: Kernel) -> bool:
    """Whether ``kernel``'s schedule is its program order (one loop nest per
    statement, in their order). Known without printing anything for a kernel
    :func:`split_layer` made (:data:`_ORDERED`): a network split layer by layer
    printed its whole schedule tree, and built and printed the initial one, at
    each split (:mod:`schedules.accel.share`)."""
    if kernel in _ORDERED:
        return True
    initial = tree.initial_schedule(
        [(s.name, s.domain, s.iterators) for s in kernel.statements]
    )
    if str(kernel.schedule) == str(initial):
        return True
    # the same order under other band names (a program built loop by loop)
    return tree.flat_map(kernel.schedule).is_equal(tree.flat_map(initial))


#: the kernels :func:`split_layer` made: their schedule is their program order
_ORDERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _order(op, group: list[Statement], cuts) -> dict[str, tuple[str, ...]]:
    """Each statement's iterators with its cut iterator (its group iterator and
    itself, with a period) moved just after the leading iterators that index the
    targets, as many as every statement of ``group`` has (their future tile
    loops)."""
    for s in group:
        cut = cuts[s.name]
        if cut.iterator not in s.iterators:
            raise ArgumentError(
                f"{op}: {s.name} has no iterator {cut.iterator} because its iterators "
                f"are {', '.join(s.iterators)}. Split along an iterator of every "
                "statement."
            )
        if cut.period and cut.group in s.iterators:
            raise ArgumentError(
                f"{op}: cannot name the group iterator of {s.name} {cut.group} "
                "because it has an iterator of that name. Rename it first."
            )

    def leading(s: Statement) -> int:
        n = 0
        while n < s.depth and any(
            a.coefficient(s.iterators[n]) for a in s.target.index
        ):
            n += 1
        return n

    shared = min(leading(s) for s in group)
    out = {}
    for s in group:
        cut = cuts[s.name]
        its = [i for i in s.iterators if i != cut.iterator]
        keep = shared - 1 if cut.iterator in s.iterators[:shared] else shared
        out[s.name] = (*its[:keep], *cut.new(), *its[keep:])
    return out


def _parts(op, kernel: Kernel, s: Statement, cut: _Cut, order):
    """The two parts of ``s``: ``iterator < at`` and ``iterator >= at`` (within
    each period, with one)."""
    iterator, at = cut.iterator, cut.at
    target, body = s.target, s.body
    if cut.period:
        lo, hi = _range(s, iterator)
        if lo != 0 or (hi + 1) % cut.period:
            raise ArgumentError(
                f"{op}: {iterator} of {s.name} cannot be strip-mined by {cut.period} "
                f"because it runs from {lo} to {hi}. Pick a period that divides "
                f"{hi + 1 - lo}, over an iterator from 0."
            )
        whole = {iterator: var(cut.group) * cut.period + var(iterator)}
        target = Load(
            target.array,
            tuple(a.substitute(whole) for a in target.index),
            target.dtype,
        )
        body = substitute_indices(body, whole)
    out = []
    for name, cond in ((s.name, f"{iterator} < {at}"), (f"{s.name}_1", None)):
        cond = cond or f"{iterator} >= {at}"
        dom = _permuted(kernel, s, order, name, cut).intersect(
            isl.Set(f"{_head(kernel)}{{ {name}[{', '.join(order)}] : {cond} }}")
        )
        if dom.intersect_params(kernel.context).is_empty():
            raise ArgumentError(
                f"{op}: the part of {s.name} where {cond} is empty because "
                f"{iterator} does not reach across {at}. Split inside its range."
            )
        out.append(
            dataclasses.replace(
                s, name=name, iterators=order, domain=dom, target=target, body=body
            )
        )
    return out


def _range(s: Statement, iterator: str) -> tuple[int, int]:
    d = s.iterators.index(iterator)
    box = s.domain.project_out(isl.dim_type.param, 0, s.domain.dim(isl.dim_type.param))
    lo = box.dim_min_val(d).to_python()
    hi = box.dim_max_val(d).to_python()
    return int(lo), int(hi)


def _head(kernel: Kernel) -> str:
    return f"[{', '.join(kernel.params)}] -> " if kernel.params else ""


def _renaming(kernel: Kernel, s: Statement, order, name: str, cut: _Cut) -> isl.Map:
    """``s[its] -> name[order]``: the instance of the part (iterators reordered,
    the cut iterator strip-mined with a period)."""
    src = [f"{i}_" for i in s.iterators]
    cons = [f"{i}_ = {i}" for i in s.iterators if i != cut.iterator]
    it = cut.iterator
    if cut.period:
        cons.append(f"{it}_ = {cut.period} * {cut.group} + {it}")
        cons.append(f"0 <= {it} < {cut.period}")
    else:
        cons.append(f"{it}_ = {it}")
    return isl.Map(
        f"{_head(kernel)}{{ {s.name}[{', '.join(src)}] -> "
        f"{name}[{', '.join(order)}] : {' and '.join(cons)} }}"
    )


def _permuted(kernel: Kernel, s: Statement, order, name: str, cut: _Cut) -> isl.Set:
    return s.domain.apply(_renaming(kernel, s, order, name, cut))


def _check(op, program: Kernel, group, cuts, order, schedule, timed) -> None:
    """Every dependence of ``program`` (:func:`_checked_program`) with an end
    in ``group`` runs forward in ``schedule`` (the new program order of the
    statements ``timed``, the new parts in place of the group's), each
    original instance timed by the part that runs it. The memory-based
    dependences are asked first (they hold the exact ones: when they all run
    forward, so do those, and the anti and output dataflow analysis is not
    needed); when one does not, the exact ones decide and name the
    violation. Parametric programs ask the exact ones alone, as
    :mod:`schedules.legality` does."""
    parts = legality.statement_times(schedule)
    times: dict[str, isl.Map] = {}
    split = {s.name: s for s in group}
    for s in timed:
        if s.name not in split:
            times[s.name] = parts[s.name]
            continue
        t = None
        for name in (s.name, f"{s.name}_1"):
            m = _renaming(program, s, order[s.name], name, cuts[s.name])
            m = m.apply_range(parts[name])
            m = m.intersect_domain(s.domain)
            t = m if t is None else t.union(m)
        times[s.name] = t.coalesce()
    if not program.params:
        memory = legality.memory_dependences(program)
        if _backwards(memory, split, times) is None:
            return
    found = _backwards(legality.dependences(program), split, times)
    if found is not None:
        kind, array, bad = found
        v = legality._violation(program, kind, array, bad, times)
        cut = cuts[group[0].name]
        raise IllegalTransformError(
            f"{op}: {', '.join(split)} cannot be cut at {cut.iterator} = "
            f"{cut.at} because {v}. Split along an iterator the dependences do "
            "not cross."
        )


def _backwards(deps, split, times) -> tuple[str, str, isl.Map] | None:
    """``(kind, array, pairs)`` of the first of ``deps`` with an end among
    the ``split`` statements whose pairs do not all run forward in ``times``."""
    for kind, array, dep in deps:
        src = dep.get_tuple_name(isl.dim_type.in_)
        dst = dep.get_tuple_name(isl.dim_type.out)
        if src not in split and dst not in split:
            continue
        if legality._forward(dep, times[src], times[dst]):
            continue  # every time difference lexicographically positive
        bad = dep.subtract(times[src].lex_lt_map(times[dst]))
        if not bad.is_empty():
            return kind, array, bad
    return None


def _checked_program(kernel: Kernel, group) -> Kernel:
    """The program whose dependences :func:`_check` asks about: ``kernel``,
    or for a small group of a large program (a depthwise layer of a whole
    network) the group as a program of its own. The program runs in its
    program order, so a dependence between a statement of the group and one
    outside runs forward whatever the group's order inside (the new program
    keeps the statements before the group before it, those after after it),
    and the group's statements are consecutive loop nests: every instance
    between two of theirs is theirs, so their own dependences are the
    program's between them, kills included, and the order of their parts
    among themselves is what decides (their times in the whole new program
    add only the same offset). A network split layer by layer thus never
    asks for its whole dataflow analysis, which costs as much as the layer's
    times the program's length, nor times its whole new program."""
    if PART_SHARE * len(group) > len(kernel.statements):
        return kernel
    return own_program(kernel, group, f"{kernel.name}_part")


def split_side(kernel: Kernel, stmt: str) -> int | None:
    """0 or 1 when ``stmt`` is the first or the second part of a statement that
    :func:`split_layer` cut (read from the kernel's history), else None."""
    for st in kernel.history:
        if st.name == "split_layer":
            for name in st.args[0]:
                if stmt == name:
                    return 0
                if stmt == f"{name}_1":
                    return 1
    return None


def split_engine(kernel: Kernel, stmt: str) -> str | None:
    """``"vector"`` or ``"mac"``: the engine that runs ``stmt`` when it is a
    part of a statement that :func:`split_layer` cut (the vector unit the part
    its ``vector`` argument names, the MAC array the other), else None."""
    for st in kernel.history:
        if st.name != "split_layer":
            continue
        for name in st.args[0]:
            if stmt in (name, f"{name}_1"):
                first = dict(st.kwargs).get("vector", "first") == "first"
                return "vector" if (stmt == name) == first else "mac"
    return None


def split_groups(kernel: Kernel) -> frozenset[str]:
    """The group iterators that :func:`split_layer` introduced with a period."""
    out: set[str] = set()
    for st in kernel.history:
        if st.name == "split_layer" and len(st.args) > 3 and st.args[3]:
            its = st.args[1]
            out |= {f"{it}g" for it in ((its,) if isinstance(its, str) else its)}
    return frozenset(out)


__all__ = [
    "split_checked",
    "split_engine",
    "split_groups",
    "split_layer",
    "split_side",
]
