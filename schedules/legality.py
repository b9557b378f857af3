"""The one legality check every transformation and every loaded schedule goes through.

A schedule is legal when every dependence of the program still goes forward: for each
flow, anti and output dependence ``src -> sink`` (exact, value-based, computed once on
the program order by :mod:`polyc.ir.deps`), the time of ``src`` is lexicographically
before the time of ``sink`` in the new schedule (``tree.flat_map``). A loop marked
``@parallel`` or ``@vectorize`` must in addition carry no dependence: two dependent
instances that the enclosing loops do not already order must run in the same
iteration of the marked loop. Parameter assumptions in ``kernel.context`` restrict
both checks; nothing else turns them off.

A violation raises :class:`~polyc.errors.IllegalTransformError` that names the
transformation, the dependence kind, the array, one concrete source and sink instance
(the lexicographically smallest, parameters first) and the fix when one is known.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import islpy as isl

from polyc.errors import IllegalTransformError
from polyc.ir import tree
from polyc.ir.deps import DEPS, by_program
from polyc.ir.deps import carried as carried_deps
from polyc.ir.kernel import Kernel, Step, accessed, accesses
from schedules import stree

KINDS = ("flow", "anti", "output")
#: attribute marks whose loop must carry no dependence
CONCURRENT = ("@parallel", "@vectorize")


@dataclass(frozen=True)
class Violation:
    """One dependence a schedule breaks, with a concrete instance pair."""

    kind: str
    array: str
    source: str
    sink: str
    params: str
    same_time: bool = False
    loop: str = ""  # for a concurrent-loop violation: 'the @parallel loop i of "S1"'

    def __str__(self) -> str:
        pair = f"{self.kind} dependence {self.source} -> {self.sink} on {self.array}"
        if self.loop:
            how = f"crosses iterations of {self.loop}"
        elif self.same_time:
            how = "would run both at the same time"
        else:
            how = "would run backwards"
        return f"the {pair} {how}{self.params}"


def dependences(kernel: Kernel) -> list[tuple[str, str, isl.Map]]:
    """``(kind, array, map)`` for every dependence map, flow first (cached)."""

    def compute(k: Kernel):
        if k.part_of is not None:
            return _between(dependences(k.part_of), {s.name for s in k.statements})
        out = []
        for kind in KINDS:
            for array, umap in sorted(k.deps.by_array(kind).items()):
                maps: list[isl.Map] = []
                umap.intersect_params(k.context).foreach_map(maps.append)
                out.extend((kind, array, m) for m in maps if not m.is_empty())
        return out

    return kernel.analysis("schedules.dependences", compute)


def memory_dependences(kernel: Kernel) -> list[tuple[str, str, isl.Map]]:
    """``(kind, array, map)`` for every pair of instances that access the same
    element, at least one of them writing it, the first before the second in
    the program order (cached): the memory-based dependences. They hold every
    exact dependence of :func:`dependences` (which drops the pairs that an
    intervening write kills), so a schedule that runs all of them forward is
    legal; they take no dataflow analysis, only the accesses' compositions. A
    schedule that breaks one of them may still be legal: ask
    :func:`dependences` then.

    A part of a program (``part_of``, :func:`schedules.accel.layers.sub_kernel`)
    whose program's memory-based dependences are known takes those between its
    statements: they hold the part's exact dependences (its program's between
    its statements, :func:`dependences`) just as well, so every legality
    check answers the same (the exact ones name any violation), and the
    scheduler's parts, one per layer, compose no accesses of their own."""

    def compute(k: Kernel):
        whole = k.part_of
        if whole is not None and whole.has_analysis(_MEMORY):
            return _between(memory_dependences(whole), {s.name for s in k.statements})
        return by_program(k, "memory_dependences", _memory)

    # a function of the program's text, as its exact dependences are
    return kernel.analysis(_MEMORY, compute)


def _memory(k: Kernel, arrays: frozenset[str] | None = None):
    """:func:`memory_dependences` of program ``k`` (through ``arrays`` alone
    when given), computed."""
    children = stree.top_level(k.program_schedule)
    child = {n: c for c, node in enumerate(children) for n in stree.statements(node)}
    before: dict[tuple[str, str], isl.Map | None] = {}
    times: dict[str, isl.Map] = {}
    stmts = [s for s in k.statements if arrays is None or _touches(s, arrays)]

    def order(s: str, t: str) -> isl.Map | bool:
        """``s[x] -> t[y]`` with ``s[x]`` first; True: every pair (an
        earlier child of the root sequence), False: none."""
        if child[s] != child[t]:
            return child[s] < child[t]
        if not times:  # the statements' times, once two share a child
            schedule = k.program_schedule
            if arrays is not None:  # theirs alone: the same order between them
                domain = isl.UnionSet.empty(k.context.get_space())
                for st in stmts:
                    domain = domain.union(isl.UnionSet.from_set(st.domain))
                schedule = schedule.intersect_domain(domain)
            times.update(statement_times(schedule))
        if (s, t) not in before:
            before[s, t] = times[s].lex_lt_map(times[t])
        return before[s, t]

    # a gather's read covers its whole gathered dimension (over-approximated)
    every = [
        (s.name, a, w, m)
        for s in stmts
        for a, w, m in accesses(k, s)
        if arrays is None or a in arrays
    ]
    # only accesses to one array pair up: each access meets those of its
    # array, in the program's order (the pairs and their order as when
    # every access met every other: a network's 200 statements' 600
    # accesses met 360,000 times)
    same: dict[str, list] = {}
    for acc in every:
        same.setdefault(acc[1], []).append(acc)
    out = []
    for s, array, write, m in every:
        for t, _, write2, m2 in same[array]:
            if not (write or write2):
                continue
            first = order(s, t)
            if first is False:
                continue
            kind = "output" if write and write2 else "flow" if write else "anti"
            pairs = m.apply_range(m2.reverse()).intersect_params(k.context)
            if first is not True:
                pairs = pairs.intersect(first)
            if not pairs.is_empty():
                out.append((kind, array, pairs))
    return out


def _touches(stmt, arrays: frozenset[str]) -> bool:
    """Whether ``stmt`` accesses one of ``arrays``."""
    return not arrays.isdisjoint(a for a, _, _ in accessed(stmt))


def carry(before: Kernel, after: Kernel, arrays: Collection[str]) -> Kernel:
    """``after`` given the dependences ``before`` has computed, exact
    (:func:`polyc.ir.deps.carried`) and memory-based, where ``after`` is
    ``before``'s program with its accesses to ``arrays`` changed alone (see
    :func:`polyc.ir.deps.carried`; the other statements in the same order in
    the statement list too). The memory-based ones through ``arrays`` are
    computed on ``after``'s accesses to them; they go first when their sources
    run before every other's (statements added first, as the scheduler's
    weights fetched ahead are), else all are computed anew, when asked. The
    same relations, in the same order, as ``after``'s own analyses."""
    arrays = frozenset(arrays)
    if before.has_analysis(DEPS):
        after.analysis(DEPS, lambda k: carried_deps(before.deps, k, arrays))
    if before.has_analysis(_MEMORY) and not after.has_analysis(_MEMORY):
        kept = [d for d in memory_dependences(before) if d[1] not in arrays]
        new = _memory(after, arrays)
        at = {s.name: n for n, s in enumerate(after.statements)}

        def source(d) -> int:
            return at[d[2].get_tuple_name(isl.dim_type.in_)]

        if not new or not kept or max(map(source, new)) < min(map(source, kept)):
            after.analysis(_MEMORY, lambda k: new + kept)
    return after


_MEMORY = "schedules.memory_dependences"


def _between(deps, names: set[str]) -> list[tuple[str, str, isl.Map]]:
    """The dependences whose source and sink are both among ``names``."""
    return [
        d
        for d in deps
        if d[2].get_tuple_name(isl.dim_type.in_) in names
        and d[2].get_tuple_name(isl.dim_type.out) in names
    ]


def statement_times(schedule: isl.Schedule | isl.UnionMap) -> dict[str, isl.Map]:
    """``{statement: S[x] -> [time]}`` from the flat schedule."""
    out: dict[str, isl.Map] = {}
    tree.flat_map(schedule).foreach_map(
        lambda m: out.__setitem__(m.get_tuple_name(isl.dim_type.in_), m)
    )
    return out


def first_violation(
    kernel: Kernel,
    schedule: isl.Schedule | None = None,
    *,
    root: stree.Node | None = None,
    path: stree.Path = (),
    deps: list[tuple[str, str, isl.Map]] | None = None,
) -> Violation | None:
    """The first dependence (flow, then anti, then output) that the schedule does not
    run forward, or None when it is legal. ``deps`` are the dependences asked
    (default: the program's exact ones, :func:`dependences`).

    With ``root`` and ``path``, only the subtree at ``path`` of the tree ``root`` is
    checked: a transformation that rewrites one subtree of a legal schedule can only
    break dependences between two instances of that subtree that the enclosing bands
    do not already order (any other pair is ordered by an ancestor, which it leaves
    alone). ``schedule`` (default: the kernel's) is used when ``root`` is None.
    """
    if root is None:
        root = stree.from_isl(schedule if schedule is not None else kernel.schedule)
        path = ()
    sub = stree.at(root, path)
    dom = stree.domain(sub)
    inside = set(stree.statements(sub))
    prefix = _per_statement(stree.bands_above(root, path))
    times = statement_times(stree.to_isl(sub))
    for kind, array, m in dependences(kernel) if deps is None else deps:
        src = m.get_tuple_name(isl.dim_type.in_)
        dst = m.get_tuple_name(isl.dim_type.out)
        if src not in inside or dst not in inside:
            continue
        if path:
            m = m.intersect_domain(_set_of(dom, src)).intersect_range(_set_of(dom, dst))
        if prefix:
            m = m.intersect(prefix[src].apply_range(prefix[dst].reverse()))
        if m.is_empty() or _forward(m, times[src], times[dst]):
            continue
        bad = m.subtract(times[src].lex_lt_map(times[dst]))
        if not bad.is_empty():
            return _violation(kernel, kind, array, bad, times)
    return None


def _forward(dep: isl.Map, t_src: isl.Map, t_dst: isl.Map) -> bool:
    """Whether every pair of ``dep`` runs forward: the time differences are all
    lexicographically positive (cheaper than comparing instance by instance)."""
    deltas = dep.apply_domain(t_src).apply_range(t_dst).deltas()
    return deltas.is_subset(_lex_positive(deltas.get_space()))


def _lex_positive(space: isl.Space) -> isl.Set:
    key = str(space)
    if key not in _LEX_POSITIVE:
        n = space.dim(isl.dim_type.set)
        out = isl.Set.empty(space)
        for d in range(n):
            piece = isl.Set.universe(space)
            for e in range(d):
                piece = piece.fix_val(isl.dim_type.set, e, 0)
            out = out.union(piece.lower_bound_val(isl.dim_type.set, d, 1))
        _LEX_POSITIVE[key] = out
    return _LEX_POSITIVE[key]


_LEX_POSITIVE: dict[str, isl.Set] = {}


def carried(
    kernel: Kernel, root: stree.Node, path: stree.Path, label: str
) -> Violation | None:
    """The first dependence carried by the outer loop of the band at ``path``.

    ``label`` describes the loop in the message (``the @parallel loop i of "S1"``).
    """
    band = stree.at(root, path)
    assert isinstance(band, stree.Band)
    dom = stree.domain(band)
    outer = stree.bands_above(root, path)
    prefix = _per_statement(outer)
    with_member = _per_statement(outer, band.schedule.get_at(0))
    for kind, array, m in dependences(kernel):
        src = m.get_tuple_name(isl.dim_type.in_)
        dst = m.get_tuple_name(isl.dim_type.out)
        if src not in with_member or dst not in with_member:
            continue
        m = m.intersect_domain(_set_of(dom, src)).intersect_range(_set_of(dom, dst))
        if m.is_empty():
            continue
        if prefix:
            m = m.intersect(prefix[src].apply_range(prefix[dst].reverse()))
        same = with_member[src].apply_range(with_member[dst].reverse())
        bad = m.subtract(same)
        if not bad.is_empty():
            v = _violation(kernel, kind, array, bad, None)
            return Violation(v.kind, v.array, v.source, v.sink, v.params, loop=label)
    return None


def _per_statement(
    bands: list[stree.Band], extra: isl.UnionPwAff | None = None
) -> dict[str, isl.Map]:
    mupas = [b.schedule for b in bands]
    if extra is not None:
        mupas.append(isl.MultiUnionPwAff.from_union_pw_aff(extra))
    return stree.per_statement(mupas)


def _set_of(dom: isl.UnionSet, name: str) -> isl.Set:
    sets: list[isl.Set] = []
    dom.foreach_set(sets.append)
    for s in sets:
        if s.get_tuple_name() == name:
            return s
    raise KeyError(name)  # pragma: no cover - callers filter by statement


def _violation(kernel, kind, array, bad: isl.Map, times) -> Violation:
    src_name = bad.get_tuple_name(isl.dim_type.in_)
    dst_name = bad.get_tuple_name(isl.dim_type.out)
    n_src = bad.dim(isl.dim_type.in_)
    n_par = bad.dim(isl.dim_type.param)
    flat = bad.wrap().flatten()
    flat = flat.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n_par)
    best = flat.lexmin()
    point = (best if not best.is_empty() else flat).sample_point()
    vals = [
        int(point.get_coordinate_val(isl.dim_type.set, d).to_python())
        for d in range(flat.dim(isl.dim_type.set))
    ]
    pvals, src_vals, dst_vals = (
        vals[:n_par],
        vals[n_par : n_par + n_src],
        vals[n_par + n_src :],
    )
    source = kernel.statement(src_name).instance(src_vals)
    sink = kernel.statement(dst_name).instance(dst_vals)
    names = [bad.get_dim_name(isl.dim_type.param, d) for d in range(n_par)]
    params = ""
    if names:
        params = " (with " + ", ".join(f"{n}={v}" for n, v in zip(names, pvals)) + ")"
    same = False
    if times is not None:
        same = _time_at(times[src_name], src_vals, pvals) == _time_at(
            times[dst_name], dst_vals, pvals
        )
    return Violation(kind, array, source, sink, params, same)


def _time_at(m: isl.Map, values: list[int], params: list[int]):
    for d, v in enumerate(values):
        m = m.fix_val(isl.dim_type.in_, d, v)
    for d, v in enumerate(params):
        m = m.fix_val(isl.dim_type.param, d, v)
    rng = m.range()
    if rng.is_empty():
        return None
    pt = rng.sample_point()
    return tuple(
        int(pt.get_coordinate_val(isl.dim_type.set, d).to_python())
        for d in range(rng.dim(isl.dim_type.set))
    )


def concurrent_violation(
    kernel: Kernel, root: stree.Node, path: stree.Path = ()
) -> Violation | None:
    """The first dependence carried by a loop marked ``@parallel``/``@vectorize`` in
    the subtree at ``path`` (marks outside it do not depend on it)."""
    for sub, node in stree.walk(stree.at(root, path), path):
        if not (isinstance(node, stree.Mark) and node.name in CONCURRENT):
            continue
        inner, band_path = node.child, sub + (0,)
        while isinstance(inner, stree.Mark):
            inner, band_path = inner.child, band_path + (0,)
        if not isinstance(inner, stree.Band):
            continue
        label = f"the {node.name} loop {_owner(root, sub)}"
        v = carried(kernel, root, band_path, label)
        if v is not None:
            return v
    return None


def _owner(root: stree.Node, attr_path: stree.Path) -> str:
    """``i of band "S1"`` for the attribute mark at ``attr_path``."""
    for k in range(len(attr_path) - 1, -1, -1):
        nb = stree.named_at(stree.at(root, attr_path[:k]))
        if nb is not None:
            return f'{nb.members[0]} of band "{nb.name}"'
    return "(unnamed band)"


Fix = str | Callable[[Violation], str]


def check(
    kernel: Kernel,
    root: stree.Node,
    path: stree.Path,
    op: str,
    what: str,
    fix: Fix,
) -> None:
    """Raise when the tree ``root``, rewritten at ``path`` from a legal schedule,
    breaks a dependence (``path=()`` checks the whole tree).

    Raises:
        IllegalTransformError: ``<op>: <what> because <violation>. <fix>``.
    """
    v = _first_violation(kernel, root, path) or concurrent_violation(kernel, root, path)
    if v is None:
        return
    hint = fix(v) if callable(fix) else fix
    raise IllegalTransformError(f"{op}: {what} because {v}. {hint}")


def is_legal(kernel: Kernel, root: stree.Node, path: stree.Path = ()) -> bool:
    """Whether the tree ``root`` (rewritten at ``path``) is legal (no message)."""
    return (
        _first_violation(kernel, root, path) is None
        and concurrent_violation(kernel, root, path) is None
    )


def _first_violation(
    kernel: Kernel, root: stree.Node, path: stree.Path
) -> Violation | None:
    """:func:`first_violation` of the exact dependences, asking the
    memory-based ones first when the kernel's sizes are concrete
    (:func:`memory_dependences`: they hold the exact ones, so a tree that runs
    them all forward is legal, and the program's anti and output dataflow
    analysis, the costlier half of isl's work on a network, is not needed;
    when they refuse, the exact ones decide and name the violation). The same
    answer either way. Parametric kernels ask the exact ones alone: their
    accesses' compositions can be what isl finds hard, and the dataflow
    analysis keeps them within its operation budget."""
    if not kernel.params:
        memory = memory_dependences(kernel)
        if first_violation(kernel, root=root, path=path, deps=memory) is None:
            return None
    return first_violation(kernel, root=root, path=path)


def finish(
    kernel: Kernel,
    root: stree.Node,
    path: stree.Path,
    step: Step,
    what: str,
    fix: Fix,
) -> Kernel:
    """The kernel under the tree ``root`` (the kernel's tree rewritten at ``path``),
    recorded as ``step``, after the check."""
    check(kernel, root, path, step.name, what, fix)
    return kernel.with_schedule(stree.to_isl(root), step)
