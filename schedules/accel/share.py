"""Whether and where a layer splits its work between the MAC array and the vector
unit: the cost model's choice.

A contraction with no N iterator (a depthwise convolution: each channel is its own
product, so the MAC array fills one column) runs on the MAC array at a rate
comparable to the vector unit's. The engine bound
(:mod:`accelerator.hardware.bound`) lets the two share it; :func:`plan` tries
that with :func:`schedules.accel.split.split_layer`: the layer's channel iterator
is strip-mined by a period ``T`` and cut at ``T - p`` in each period, so each tile
holds ``T - p`` channels for the vector unit and the next ``p`` for the MAC
array, which then run at once. The share ``p / T`` starts at the engine bound's
(the vector unit's per-instance time over the sum of both engines'), and is set
again from the searched split layer's predicted busy cycles per channel on each
engine (the MAC array's mapping of a depthwise convolution reaches a fraction of
the bound's rate). Of those points and the unsplit layer, the layer with the
fewest predicted cycles is kept; a split must win by :data:`MARGIN`, since the
cost model does not see every stall the split adds (more commands per tile).

A contraction whose rows on an output-stationary array end in a nearly empty
fold (ViT's 17 tokens on 16 rows: two folds per column tile, the second with
one row busy, 17/32 of the peak) is cut at its last full fold instead
(:func:`_odd_rows`): the MAC array runs full folds, the vector unit the odd rows
beside them (a GEMV, which an output-stationary array runs at one row in
``R`` whatever the mapping), when the cost model predicts the layer faster.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

from accelerator.hardware.bound import ENGINES, engine_bound
from accelerator.hardware.spec import Spec
from polyc.errors import PolycError
from polyc.ir.affine import var
from polyc.ir.kernel import Kernel, Role
from schedules import stree
from schedules.accel import cache, space
from schedules.accel.layers import (
    Layer,
    fusion_answers,
    learn,
    own_program,
    schedule_text,
    split,
    top_children,
)
from schedules.accel.split import _program_order, split_checked, split_layer
from schedules.accel.tensorize import contraction

#: a split layer must be predicted this much faster than the unsplit one
MARGIN = 0.05
#: the longest period tried (channels per tile of both engines together)
MAX_PERIOD = 16


@dataclass(frozen=True)
class Plan:
    """What :func:`plan` chose: the kernel, the statements of each split layer
    (both parts), and one line per split saying what against what."""

    kernel: Kernel
    layers: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = ()

    def spans(self, kernel: Kernel) -> tuple[tuple[int, ...], ...]:
        """The top-level positions of each split layer's statements in
        ``kernel``: one fusion group each, which the fusion-group search must
        not cut (as an attention's core, :func:`schedules.accel.layers.split`'s
        ``wide``). Cut between its parts, the vector part's epilogue became a
        layer of its own beside the MAC part (a mobilenet-like model on
        edge-npu: its ReLU, 280 cycles, below its bound of 346)."""
        ranges, _ = self._ranges(kernel)
        return tuple(tuple(range(lo, hi + 1)) for lo, hi in ranges if lo < hi)

    def cuts(self, kernel: Kernel) -> set[int]:
        """The top-level positions of ``kernel`` (the program after later
        rewrites) where a split layer starts and where the next layer does: each
        split layer is a fusion group of its own, fused on the iterators its
        parts share (a group fused wider, on fewer iterators, would tile it on
        those alone)."""
        ranges, n = self._ranges(kernel)
        return {lo for lo, _ in ranges} | {hi + 1 for _, hi in ranges if hi + 1 < n}

    def _ranges(self, kernel: Kernel) -> tuple[list[tuple[int, int]], int]:
        """The first and last top-level positions of each split layer whose
        statements are all in ``kernel``, and the number of positions."""
        where = {}
        children = top_children(kernel)
        for pos, child in enumerate(children):
            for n in stree.statements(child):
                where[n] = pos
        ranges = []
        for names in self.layers:
            pos = [where[n] for n in names if n in where]
            if len(pos) == len(names):
                ranges.append((min(pos), max(pos)))
        return ranges, len(children)


def plan(
    kernel: Kernel, spec: Spec, stage: bool = True, keep: frozenset[str] = frozenset()
) -> Plan:
    """``kernel`` with each layer that the cost model predicts faster split
    across the MAC array and the vector unit (see the module docstring), but
    for the layers that hold a statement of ``keep`` (a depthwise convolution
    that :mod:`schedules.accel.mlp` may fuse with the convolutions around it,
    which it cannot once split)."""
    if not _program_order(kernel):
        return Plan(kernel)
    layers = [
        la for la in _pieces(kernel) if not any(st.name in keep for st in la.stmts)
    ]
    # the choices the workers make, used as they come: the parent applies the
    # splits in order meanwhile, and chooses those of the layers an earlier
    # split cut otherwise beside the workers
    with _chosen_ahead(kernel, layers, spec, stage) as known:
        return _planned(kernel, layers, spec, stage, known, keep)


def _planned(
    kernel: Kernel,
    layers: list[Layer],
    spec: Spec,
    stage: bool,
    known,
    keep: frozenset[str] = frozenset(),
):
    """:func:`plan` of ``kernel`` split into ``layers`` (:func:`_pieces`), the
    choices of :class:`_Ahead` ``known`` taken where they were made."""
    notes: list[str] = []
    groups: list[tuple[str, ...]] = []
    done: set[str] = set()
    while True:
        todo = [
            (layer, found)
            for layer in layers
            if layer.stmts[0].name not in done
            and (found := _candidate(kernel, layer, spec)) is not None
        ]
        if not todo:
            return Plan(kernel, tuple(groups), tuple(notes))
        layer, found = todo[0]
        choose, stmts, iterator, point = found
        done.add(layer.stmts[0].name)
        key = _key(kernel, layer, *found)
        made = _MADE.get((spec, stage, key)) or (known.get(key) if known else None)
        if made is not None:
            (choice,) = made
        else:
            choice = choose(kernel, layer, spec, stage, stmts, iterator, point)
        chosen = _applied(kernel, stmts, iterator, choice)
        if chosen is None:
            continue  # the program is unchanged: so are its pieces
        kernel, note = chosen
        done |= {f"{n}_1" for n in stmts}
        notes.append(note)
        groups.append(_in_order(kernel, stmts))
        # each split layer a piece of its own, as the fusion groups will have
        # it (Plan.cuts): the statements after it start the next piece
        joined = frozenset(n for g in groups for n in g[1:])
        layers = [
            la
            for la in _pieces(kernel, joined, frozenset(g[-1] for g in groups))
            if not any(st.name in keep for st in la.stmts)
        ]


@contextlib.contextmanager
def _chosen_ahead(kernel: Kernel, layers: list[Layer], spec: Spec, stage: bool):
    """The choices of the layers of ``layers`` that :func:`plan` may split,
    made in worker processes (:func:`schedules.accel.cache.workers`) while
    the block runs, where there are several and more than one job: an
    :class:`_Ahead` (empty otherwise). A choice is made on the layer as a
    program of its own (:func:`_local`), so it is a function of what
    :func:`_key` holds: :func:`plan` takes it from there for a layer whose key
    it finds (the same choice as its own), and chooses itself for the others
    (a layer that an earlier split cut otherwise, a worker that failed)."""
    tasks = [
        (la, found)
        for la in layers
        if (found := _candidate(kernel, la, spec))
        and (spec, stage, _key(kernel, la, *found)) not in _MADE
    ]
    if len(tasks) < 2 or cache.jobs() < 2:
        yield _Ahead({}, None)
        return

    def task(n: int):
        layer, (choose, stmts, iterator, point) = tasks[n]
        known = fusion_answers()
        choice = choose(kernel, layer, spec, stage, stmts, iterator, point)
        # the fusion checks of the split layer's parts, which the network
        # split so asks next (layers._can_fuse keeps them by the part's text)
        new = {k: v for k, v in fusion_answers().items() if k not in known}
        return choice, new

    with cache.workers(task, len(tasks)) as running:
        # (computed while the workers start)
        keys = {_key(kernel, la, *found): n for n, (la, found) in enumerate(tasks)}
        ahead = _Ahead(keys, running)
        yield ahead
        ahead.learn_ready()  # the others are layers split otherwise: dropped


class _Ahead:
    """The choices :func:`_chosen_ahead`'s workers make, by :func:`_key`."""

    def __init__(self, keys: dict[tuple, int], running):
        self._keys = keys
        self._running = running
        self._learned: set[int] = set()

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: tuple) -> tuple | None:
        """``(choice,)`` made by a worker for the layer of ``key`` (waiting
        for it), or None when none was (the caller chooses)."""
        n = self._keys.get(key)
        if n is None:
            return None
        got = self._running.get(n)
        # the fusion checks of every choice made so far, as the parent's
        # network split next asks them
        self._learn([n])
        self.learn_ready()
        return None if got is None else (got[0][0],)

    def learn_ready(self) -> None:
        """Keep the fusion checks of every choice made by now."""
        self._learn([m for m in range(len(self._keys)) if self._running.ready(m)])

    def _learn(self, tasks) -> None:
        for n in tasks:
            if n not in self._learned:
                self._learned.add(n)
                got = self._running.get(n)
                if got is not None:
                    learn(got[0][1])


def _key(kernel: Kernel, layer: Layer, choose, stmts, iterator, point) -> tuple:
    """What ``choose(kernel, layer, spec, stage, stmts, iterator, point)`` is
    a function of (for one ``spec`` and ``stage``): its arguments, the layer's
    statements (the objects: immutable, shared by the programs that keep
    them) and the program :func:`_local` makes of them (its name, arrays with
    their roles, parameters and context)."""
    local = _local(kernel, layer)
    arrays = tuple(sorted((name, repr(a)) for name, a in local.arrays.items()))
    return (
        choose.__name__,
        stmts,
        iterator,
        point,
        tuple(layer.stmts),
        local.name,
        arrays,
        local.params,
        str(local.context),
    )


def _applied(kernel: Kernel, stmts, iterator, choice):
    """``(kernel, note)`` with ``choice`` (``(cut, how, note)`` of
    :func:`_choose` or :func:`_choose_rows`, or None) applied: the statements
    ``stmts`` split by ``split_layer(kernel, stmts, iterator, *cut, **how)``,
    whose legality the choice's search checked (:func:`split_checked`); None
    for no choice or a split refused."""
    if choice is None:
        return None
    cut, how, note = choice[:3]
    try:
        # checked by _split_best, on _local's program of exactly ``stmts``
        return split_checked(kernel, stmts, iterator, *cut, **dict(how)), note
    except PolycError:
        return None


def _pieces(
    kernel: Kernel,
    joined: frozenset[str] = frozenset(),
    ends: frozenset[str] = frozenset(),
) -> list[Layer]:
    """The layers cut before every contraction, as the fusion groups start
    (:mod:`schedules.accel.groups`): a depthwise convolution with its init and
    epilogue. No cut before the statements ``joined`` (the second part of a
    split layer stays with the first), and one after each of ``ends``."""
    from schedules.accel.groups import _contraction_starts

    names = [s.name for s in kernel.statements]
    starts = {
        p
        for la in split(kernel)
        for p in _contraction_starts(la)[1:]
        if names[p] not in joined
    }
    starts |= {names.index(n) + 1 for n in ends if names.index(n) + 1 < len(names)}
    return split(kernel, cuts=frozenset(starts))


def _splittable(kernel: Kernel, layer: Layer, spec: Spec):
    """``(statements, iterators, extent)`` when ``layer`` holds one contraction
    with no N iterator that both the MAC array and the vector unit run, and a
    batch iterator from 0 (its channel) that every statement of the layer runs
    over and indexes its target by: the contraction's own, the init's and the
    epilogue's iterators at the channel's dimension of the contraction's
    output (each statement's, by its own name)."""
    found = None if layer.opaque else _one_contraction(kernel, layer, spec)
    if found is None:
        return None
    s, con = found
    if con.members("n"):
        return None
    for it in sorted(con.members("batch"), key=lambda i: -layer.extent(s, i)):
        extent = layer.extent(s, it)
        dims = [d for d, a in enumerate(s.target.index) if a.names() == {it}]
        if extent < 2 or layer.lo(s, it) != 0 or len(dims) != 1:
            continue
        its = _along(layer, s, dims[0], extent)
        if its is not None:
            return tuple(t.name for t in layer.stmts[: len(its)]), its, extent
    return None


def _one_contraction(kernel: Kernel, layer: Layer, spec: Spec):
    """``(statement, contraction)`` of the layer's one contraction when both
    the MAC array and the vector unit can run it, else None."""
    cons = [s for s in layer.stmts if contraction(s) is not None]
    if len(cons) != 1:
        return None
    s = cons[0]
    if space.engines(kernel, s, spec) != ["mac", "vector"]:
        return None
    return s, contraction(s)


def _along(
    layer: Layer, s, dim: int, extent: int, prefix: bool = True
) -> tuple[str, ...] | None:
    """Each statement's iterator at dimension ``dim`` of the contraction
    ``s``'s output (:func:`_channel`), when every statement of the layer runs
    over it from 0 for ``extent`` points and indexes its target by it; else
    None. With ``prefix``, the statements from the layer's first through ``s``
    and the epilogue after it that do so, up to the first that does not (a
    layer norm over the channels after a depthwise convolution's epilogue:
    the split layer is then cut from the rest, which :func:`_choose` costs as
    a layer of its own)."""
    its: list[str] = []
    for t in layer.stmts:
        i = _channel(t, s.target.array, dim)
        if (
            i is None
            or layer.lo(t, i) != 0
            or layer.extent(t, i) != extent
            or not any(a.coefficient(i) for a in t.target.index)
        ):
            break
        its.append(i)
    n = len(its)
    if n == len(layer.stmts) or (prefix and n > layer.stmts.index(s)):
        return tuple(its)
    return None


def _candidate(kernel: Kernel, layer: Layer, spec: Spec):
    """``(choose, statements, iterators, point)`` for a layer to try splitting:
    its channels shared (:func:`_splittable`, ``point`` the extent) or its odd
    rows apart (:func:`_odd_rows`, ``point`` the cut), with the function that
    chooses; None for a layer of neither kind."""
    found = _splittable(kernel, layer, spec)
    if found is not None:
        return (_choose, *found)
    found = _odd_rows(kernel, layer, spec)
    if found is not None:
        return (_choose_rows, *found)
    return None


def _odd_rows(kernel: Kernel, layer: Layer, spec: Spec):
    """``(statements, iterators, at)`` when ``layer`` holds one
    contraction whose rows on an output-stationary MAC array (its one M
    iterator of more than one point, from 0) end in a fold that few rows fill:
    ``extent = q * R + r`` with ``0 < r <= R / 4``, so the last fold of each
    column tile runs ``r`` of its ``R`` rows. The cut is at ``at = q * R``: the
    part from ``at`` on (the odd rows) is a statement of its own, which the
    vector unit runs beside the MAC array's full folds. Every statement of the
    layer must run over the iterator and index its target by it, as for
    :func:`_splittable` (a layer with a layer norm after its epilogue is not
    cut: cutting the contraction away from it loses the fusion with it and
    the layers after, which cost hf-vit more than the split won)."""
    if layer.opaque or spec.mac_array.dataflow != "output_stationary":
        return None
    found = _one_contraction(kernel, layer, spec)
    if found is None:
        return None
    s, con = found
    rows = spec.mac_array.rows
    wide = [i for i in con.members("m") if layer.extent(s, i) > 1]
    if len(wide) != 1 or con.members("batch"):
        return None
    it = wide[0]
    extent = layer.extent(s, it)
    odd = extent % rows
    if extent < rows or not 0 < odd <= rows // 4 or layer.lo(s, it) != 0:
        return None
    dims = [d for d, a in enumerate(s.target.index) if a.names() == {it}]
    if len(dims) != 1:
        return None
    its = _along(layer, s, dims[0], extent, prefix=False)
    if its is None:
        return None
    return tuple(t.name for t in layer.stmts), its, extent - odd


def _choose_rows(kernel, layer, spec, stage, stmts, iterator, at):
    """``(cut, how, note)`` (:func:`_applied`) cutting ``layer`` at ``iterator
    = at`` (its odd rows apart, see :func:`_odd_rows`), or None when the
    unsplit layer is predicted as fast (within :data:`MARGIN`). Searched on the
    layer as a program of its own, as :func:`_choose` does."""
    got = _unsplit(kernel, layer, spec, stage)
    if got is None or not dict(got[1].engines).get("mac"):
        return None
    local, unsplit = got[0], got[1].cycles
    found = _split_best(local, spec, stage, stmts, iterator, at, vector="second")
    if found is None:
        return None
    cycles = found.cycles
    if cycles > unsplit * (1 - MARGIN):
        return None
    note = (
        f"{'+'.join(stmts)} split across the MAC array and the vector unit: rows "
        f"below {at} of {iterator[0]} on the MAC array, the rest on the vector "
        f"unit, predicted {cycles:,.0f} cycles against {unsplit:,.0f} on one "
        "engine"
    )
    return (at,), (("vector", "second"),), note


def _channel(t, array: str, dim: int) -> str | None:
    """The iterator by which ``t`` indexes dimension ``dim`` of ``array`` (as its
    target or in its reads), when it is one iterator alone."""
    for ld in (t.target, *t.reads):
        if ld.array == array:
            names = ld.index[dim].names()
            if len(names) == 1 and ld.index[dim] == var(next(iter(names))):
                return next(iter(names))
            return None
    return None


def _choose(kernel, layer, spec, stage, stmts, iterator, extent):
    """``(cut, how, note)`` (:func:`_applied`) of the best split of ``layer``,
    or None when the unsplit layer is predicted as fast (within
    :data:`MARGIN`). The points are searched on the layer as a program of its
    own (:func:`_local`), whose dependences are quick to compute; the chosen
    split is then applied to ``kernel`` (:func:`plan`)."""
    got = _unsplit_costs(kernel, layer, spec, stage, stmts)
    if got is None:
        return None
    local, unsplit, rest, t_mac, t_vec, _, probed = got
    if not probed:
        return None
    periods = [t for t in range(2, MAX_PERIOD + 1) if extent % t == 0]
    if not periods:
        return None
    tried: dict[tuple[int, int], tuple] = {}
    share = t_vec / (t_mac + t_vec)
    for _ in range(2):
        point = _nearest(periods, share)
        if point in tried:
            break
        tried[point] = _try(local, spec, stage, stmts, iterator, extent, point)
        got = tried[point]
        if got is None or got[1] is None:
            break
        per_mac, per_vec = got[1]
        share = per_vec / (per_mac + per_vec)
    best = min(
        ((c[0] + rest, point) for point, c in tried.items() if c is not None),
        default=None,
    )
    if best is None or best[0] > unsplit * (1 - MARGIN):
        return None
    cycles, (period, p) = best
    after = ""
    if rest:
        after = f" (with the {len(layer.stmts) - len(stmts)} statements after it "
        after += f"a layer of their own: {rest:,.0f})"
    note = (
        f"{'+'.join(stmts)} split across the vector unit and the MAC array: "
        f"{period - p} and {p} of every {period} along {iterator[0]}, predicted "
        f"{cycles:,.0f} cycles{after} against {unsplit:,.0f} on one engine"
    )
    return (period - p, period), (), note, unsplit - cycles


def _unsplit_costs(kernel, layer, spec, stage, stmts):
    """``(local, unsplit, rest, t_mac, t_vec, least, probed)`` for
    :func:`_choose`: the layer as a program of its own with ``stmts`` first,
    its predicted cycles unsplit, those of the statements after ``stmts`` (0
    when there are none), the contraction's cycles per instance on the MAC
    array and on the vector unit (the engine bound's), the fewest cycles any
    split may take (the engine bound of ``stmts`` with the rest after it), and
    whether a split is worth searching. It is not where at best it would run
    the vector unit's work at both engines' rates (the bound's: the MAC
    array's real mapping of the layer is slower) and the DMA as it is, and
    still not win :data:`MARGIN` (a layer the MAC array runs is always
    searched). None where the layer fits nothing or an engine cannot run it."""
    rest = 0.0  # the predicted cycles of the layer's statements after ``stmts``
    if len(stmts) < len(layer.stmts):
        whole = _local(kernel, layer)
        unsplit = _cost(whole, spec, stage)
        got = _apart(whole, stmts, spec, stage) if unsplit is not None else None
        if got is None:
            return None
        local, base, rest = got
    else:
        got = _unsplit(kernel, layer, spec, stage)
        if got is None:
            return None
        local, base = got
        unsplit = base.cycles
    con = next(s for s in layer.stmts if contraction(s) is not None)
    bound = engine_bound(local, spec, {})
    work = {w.stmt: w for w in bound.work}.get(con.name)
    if work is None:
        return None
    t_mac = work.cycles[ENGINES.index("mac_array")]
    t_vec = work.cycles[ENGINES.index("vector")]
    if t_mac is None or t_vec is None:
        return None
    busy = dict(base.engines)
    probed = True
    if not busy.get("mac"):
        ideal = busy.get("vector", 0.0) * t_mac / (t_mac + t_vec)
        probed = max(ideal, busy.get("dma", 0.0)) + rest < unsplit * (1 - MARGIN)
    return local, unsplit, rest, t_mac, t_vec, bound.cycles + rest, probed


#: (spec, stage, :func:`_key`) -> ``(choice,)``: the choices :func:`saving` made,
#: which :func:`plan` then takes for the same layer of the same program
_MADE: dict = {}


def saving(kernel: Kernel, stmt: str, spec: Spec, stage: bool = True) -> float:
    """The predicted cycles :func:`plan` would save by splitting the layer of
    statement ``stmt`` (a depthwise convolution with its init and epilogue,
    cut as the fusion groups start) across the two engines: 0 where it would
    not split it."""
    got = _channels_split(kernel, stmt, spec)
    if got is None:
        return 0.0
    layer, found = got
    choice = _choose(kernel, layer, spec, stage, *found[1:])
    if len(_MADE) > 4096:
        _MADE.clear()
    _MADE[(spec, stage, _key(kernel, layer, *found))] = (choice,)
    return 0.0 if choice is None else choice[3]


def saving_bound(kernel: Kernel, stmt: str, spec: Spec, stage: bool = True) -> float:
    """At least :func:`saving` ``(kernel, stmt, spec, stage)``, without
    searching a split: the layer's predicted cycles unsplit less the fewest
    any split may take (:func:`_unsplit_costs`), 0 where :func:`_choose` would
    not search a split."""
    got = _channels_split(kernel, stmt, spec)
    if got is None:
        return 0.0
    layer, found = got
    costs = _unsplit_costs(kernel, layer, spec, stage, found[1])
    if costs is None or not costs[6]:
        return 0.0
    return max(0.0, costs[1] - costs[5])


def _channels_split(kernel: Kernel, stmt: str, spec: Spec):
    """``(layer, candidate)`` (:func:`_candidate`) of the layer of statement
    ``stmt`` where its channels may be shared by the engines, else None."""
    if not _program_order(kernel):
        return None
    # (asked once per depthwise layer of one program: its pieces split once)
    pieces = kernel.analysis(
        ("share.pieces", schedule_text(kernel)), lambda _: _pieces(kernel)
    )
    for layer in pieces:
        if any(s.name == stmt for s in layer.stmts):
            found = _candidate(kernel, layer, spec)
            if found is None or found[0] is not _choose:
                return None
            return layer, found
    return None


def _apart(local: Kernel, stmts, spec: Spec, stage: bool):
    """``(prefix, best, rest)`` for a layer (``local``, a program of its own)
    whose statements ``stmts`` come first and the rest after: ``stmts`` as a
    program of their own and their best candidate unsplit, and the predicted
    cycles of the rest as a layer of its own; None when either fits nothing."""
    first, *others = _pieces(local, ends=frozenset({stmts[-1]}))
    if [s.name for s in first.stmts] != list(stmts):
        return None
    got = _unsplit(local, first, spec, stage)
    if got is None:
        return None
    rest = 0.0
    for piece in others:
        cycles = _cost(_local(local, piece), spec, stage)
        if cycles is None:
            return None
        rest += cycles
    return (*got, rest)


def _cost(local: Kernel, spec: Spec, stage: bool) -> float | None:
    """The predicted cycles of a program of its own (:func:`_local`): its
    pieces' best candidates one after the other; None when one fits nothing."""
    total = 0.0
    for piece in _pieces(local):
        found = cache.search(local, piece, spec, stage)
        if not found:
            return None
        total += found[0].cycles
    return total


def _unsplit(kernel: Kernel, layer: Layer, spec: Spec, stage: bool):
    """``(local, best)``: ``layer`` as a program of its own (:func:`_local`) and
    its best candidate unsplit, or None when none fits or its DMA already takes
    the time a split would have to win (moving compute to the other engine
    leaves the layer's DMA as it is)."""
    local = _local(kernel, layer)
    (piece,) = _pieces(local)
    base = cache.search(local, piece, spec, stage)
    if not base:
        return None
    if dict(base[0].engines).get("dma", 0.0) >= base[0].cycles * (1 - MARGIN):
        return None
    return local, base[0]


def _split_best(kernel: Kernel, spec: Spec, stage: bool, stmts, iterator, *cut, **how):
    """The best candidate of ``stmts`` split by ``split_layer(kernel, stmts,
    iterator, *cut, **how)``, searched as the layer of both parts; None when
    the split is refused, the parts do not form one layer, or it fits
    nothing."""
    try:
        k = split_layer(kernel, stmts, iterator, *cut, **how)
    except PolycError:
        return None
    names = _in_order(k, stmts)
    pieces = _pieces(k, frozenset(names[1:]))
    layer = next(
        (la for la in pieces if {s.name for s in la.stmts} == set(names)), None
    )
    found = cache.search(k, layer, spec, stage) if layer is not None else None
    return found[0] if found else None


def _in_order(kernel: Kernel, stmts) -> tuple[str, ...]:
    """The parts of the split statements ``stmts`` in ``kernel``'s program
    order (:func:`schedules.accel.split.split_layer` interleaves them)."""
    names = set(stmts) | {f"{n}_1" for n in stmts}
    return tuple(s.name for s in kernel.statements if s.name in names)


def _local(kernel: Kernel, layer: Layer) -> Kernel:
    """``layer``'s statements as a program of their own: an array the layer
    writes that the kernel returns or another statement uses is an output,
    one it only reads an input, so the copies are those of the layer in
    ``kernel``."""
    names = {s.name for s in layer.stmts}
    stmts = [s for s in kernel.statements if s.name in names]
    written = {s.target.array for s in stmts}
    elsewhere = {
        ld.array
        for s in kernel.statements
        if s.name not in names
        for ld in (s.target, *s.reads)
    }
    arrays = {}
    for s in stmts:
        for ld in (s.target, *s.reads):
            arr = kernel.arrays[ld.array]
            if ld.array not in written:
                role = Role.INPUT
            elif arr.role != Role.TEMP or ld.array in elsewhere:
                role = Role.OUTPUT
            else:
                role = Role.TEMP
            arrays[ld.array] = dataclasses.replace(arr, role=role)
    return own_program(kernel, stmts, f"{kernel.name}_{stmts[0].name}", arrays)


def _nearest(periods: list[int], share: float) -> tuple[int, int]:
    """``(T, p)`` with ``p / T`` nearest ``share`` (the shortest period on a tie)."""
    points = [(t, p) for t in periods for p in range(1, t)]
    return min(points, key=lambda tp: (abs(tp[1] / tp[0] - share), tp[0]))


def _try(kernel, spec, stage, stmts, iterator, extent, point):
    """``(predicted cycles, (MAC, vector) cycles per element)`` of the split
    layer at ``point``, or None when it cannot split or fits nothing."""
    period, p = point
    best = _split_best(kernel, spec, stage, stmts, iterator, period - p, period)
    if best is None:
        return None
    busy = dict(best.engines)
    rates = None
    if busy.get("mac") and busy.get("vector"):
        rates = (
            busy["mac"] / (extent * p / period),
            busy["vector"] / (extent * (period - p) / period),
        )
    return best.cycles, rates


__all__ = ["MARGIN", "Plan", "plan"]
