"""Fused attention: QK^T, softmax and PV as one layer, the score matrix on chip.

An attention as the op library and the torch frontend write it is a chain of
top-level loop nests: ``scores = Q K^T`` (a contraction with its zero init), the
element-wise scaling and mask, the softmax (a max and a sum reduction per row,
``exp`` and the division) and ``out = P V`` (a contraction reading the softmax's
output). Its *core* is that chain, found by dataflow (never by names): from a
contraction whose operand a max reduction's row feeds, back to the nearest
contraction (QK^T), with what lies between them on the way and the inits of
what that writes. Loop nests the program runs in between that the core does
not need there (the value's projection and reshapes, which torch's export
places after the softmax) move before it (:func:`gather`, one exact legality
check for all moves), so the core's statements are consecutive and
:func:`schedules.accel.layers.split` makes them one layer (a core counts as
one statement toward its cap): the score, exp and probability tiles live in
on-chip buffers and never go to DRAM. Two slots alone do not overlap one
tile's softmax with the next tile's QK^T (every engine runs its commands in
issue order): the search also tries the layer software pipelined
(:mod:`schedules.accel.pipeline`).

Whether and how to fuse is the cost model's choice (:func:`choose` over
:func:`variants`): the scheduler predicts the whole program's cycles with each
core alone in a layer fused on (batch, head, query) so that the queries can be
tiled, with each core fused with the reshapes that feed it (per head), with
each core's layer taking every loop nest between its statements (the value's
projection), and with the program as written, and keeps the fastest (a layer of a core that
fits nothing counts as infinitely slow). ``print(compiled)`` says which and
why; what leaves a score matrix to DRAM is listed under its fallbacks. Not
built yet: the online softmax (running max and sum over blocks of keys) for
score rows that do not fit the engines' level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import islpy as isl

from accelerator.hardware.spec import Spec
from polyc.ir.kernel import Kernel, Statement
from schedules import stree
from schedules.accel import cache
from schedules.accel.layers import lone_statements, split, top_children
from schedules.accel.pipeline import _softmax
from schedules.accel.tensorize import contraction
from schedules.apply import to_yaml
from schedules.common import step
from schedules.legality import dependences

#: predictions within this fraction of the best count as a tie, broken by the
#: order of :func:`variants` (the core alone first: it tiles the queries)
TIE = 0.01


@dataclass(frozen=True)
class Core:
    """One attention's statements: top-level positions (after :func:`gather`),
    its QK^T and PV contractions, and the arrays that hold its score matrix
    (the scores, their scaled and masked forms, the exp and the probabilities)."""

    positions: tuple[int, ...]
    qk: str
    pv: str
    scores: tuple[str, ...]

    @property
    def start(self) -> int:
        return self.positions[0]

    @property
    def end(self) -> int:
        return self.positions[-1]


@dataclass(frozen=True)
class Variant:
    """One way to schedule a program's attentions: the program (its loop nests
    reordered or not), its cores, and the layer cuts around them."""

    name: str
    kernel: Kernel
    cores: tuple[Core, ...]
    cuts: frozenset[int]

    @property
    def wide(self) -> tuple[tuple[int, ...], ...]:
        """Each core's positions (one statement toward a layer's cap)."""
        return tuple(c.positions for c in self.cores)


#: what each variant does, for ``print(compiled)``
DESCRIBE = {
    "fused": (
        "QK^T, softmax and PV fused per tile of queries, the score matrix on chip"
    ),
    "fused with neighbours": (
        "QK^T, softmax and PV fused with the reshapes that feed them, the score "
        "matrix on chip"
    ),
    "fused with the value": (
        "QK^T, softmax and PV fused with the value's projection and reshapes "
        "the program runs between them, the score matrix on chip"
    ),
    "as written": (
        "the loop nests stay in program order (the softmax's output may go "
        "through DRAM to PV) because fusing is predicted slower"
    ),
}


@dataclass(frozen=True)
class Plan:
    """The scheduler's start for a program with attentions: the program (its
    loop nests reordered when a fused variant won), the cores' positions and
    the layer cuts around them, the candidates already searched per layer
    (``(children, depth)``, as the scheduler keys them), and the note for
    ``print(compiled)`` with the QK^T statements it goes with."""

    kernel: Kernel
    wide: tuple[tuple[int, ...], ...] = ()
    cuts: frozenset[int] = frozenset()
    searched: dict = field(default_factory=dict)
    qk: frozenset[str] = frozenset()
    note: str = ""
    fallback: bool = False

    def annotate(self, lc) -> None:
        """Put the note on ``lc`` (a ``LayerChoice``) when it holds a QK^T: under
        its fallbacks when a score matrix is left to DRAM."""
        if not self.note or lc.candidate is None:
            return
        if not {s.name for s in lc.layer.stmts} & self.qk:
            return
        if self.fallback:
            lc.split_from = self.note + (f"; {lc.split_from}" if lc.split_from else "")
        elif not lc.note:
            lc.note = self.note


def plan(kernel: Kernel, spec: Spec, stage: bool = True) -> Plan:
    """The variant of :func:`variants` with the fewest predicted cycles over the
    whole program (each layer's best candidate under the cost model, searched
    once per statements and depth across the variants; a layer of a core's
    statements that fits nothing counts as infinitely slow, any other is alike
    in every variant). A program without attention is returned as it is."""
    options = variants(kernel)
    if not options:
        return Plan(kernel)
    first = options[0]
    mine = {
        n
        for c in first.cores
        for p in c.positions
        for n in stree.statements(top_children(first.kernel)[p])
    }
    memo: dict = {}  # (statements, depth) -> candidates
    splits = {v.name: split(v.kernel, cuts=v.cuts, wide=v.wide) for v in options}
    # every variant's layers at once (in workers: one set for all of them)
    cache.search_into(memo, [(v.kernel, splits[v.name]) for v in options], spec, stage)

    def searched(v: Variant):
        layers = splits[v.name]
        return [(la, None if la.opaque else memo[cache.memo_key(la)]) for la in layers]

    def predicted(v: Variant) -> float:
        total = 0.0
        for layer, cands in searched(v):
            if cands:
                total += cands[0].cycles
            elif cands is not None and {s.name for s in layer.stmts} & mine:
                total = float("inf")
        return total

    pick, note = choose(options, predicted)
    found = {
        (layer.children, layer.depth): cands
        for layer, cands in searched(pick)
        if cands is not None
    }
    return Plan(
        pick.kernel,
        pick.wide,
        pick.cuts,
        found,
        frozenset(c.qk for c in first.cores),
        note,
        is_fallback(pick, note),
    )


def variants(kernel: Kernel) -> list[Variant]:
    """The variants the scheduler predicts (none when ``kernel`` has no
    attention core): the cores alone, one layer each, tiled per query (the
    loop nests between a core's statements moved before it); the cores fused
    with the reshapes that feed them (those stay just before PV, the rest
    moves); the cores fused with every loop nest between their statements,
    in program order (when there are some: the value's projection); and the
    program as written."""
    alone, cores_a = gather(kernel, feeders=False)
    if not cores_a:
        return []
    cuts = frozenset(p for c in cores_a for p in (c.start, c.end + 1))
    out = [Variant("fused", alone, tuple(cores_a), cuts)]
    near, cores_b = gather(kernel, feeders=True)
    if cores_b:
        out.append(Variant("fused with neighbours", near, tuple(cores_b), frozenset()))
    whole = cores(kernel, whole=True)
    if whole and whole != cores(kernel):
        out.append(Variant("fused with the value", kernel, tuple(whole), frozenset()))
    out.append(Variant("as written", kernel, (), frozenset()))
    return out


def choose(
    options: list[Variant], evaluate: Callable[[Variant], float]
) -> tuple[Variant, str]:
    """The variant with the fewest predicted cycles (``evaluate``; within
    :data:`TIE` of the best, the earlier one) and the note that says so (see
    :func:`is_fallback`)."""
    tried = [(v, evaluate(v)) for v in options]
    best = min(c for _, c in tried)
    pick = next(v for v, c in tried if c <= best * (1 + TIE))
    first = options[0].cores
    span = ", ".join(f"{c.qk}..{c.pv}" for c in first)
    mine = dict((v.name, c) for v, c in tried)[pick.name]
    if mine == float("inf"):
        return pick, (
            f"attention {span}: no variant's layers fit on chip (the score rows "
            "of one query tile do not fit, and there is no online softmax yet "
            "that would stream them in blocks of keys), so its statements are "
            "split into smaller layers and the scores go through DRAM"
        )
    others = ", ".join(f"{v.name} {_cycles(c)}" for v, c in tried if v is not pick)
    note = (
        f"attention {span}: {DESCRIBE[pick.name]}, predicted {_cycles(mine)} "
        f"cycles for the program (against {others})"
    )
    return pick, note


def is_fallback(pick: Variant, note: str) -> bool:
    """Whether the choice leaves a score matrix to DRAM (nothing fits, or fusing
    is predicted slower): ``print(compiled)`` lists it under fallbacks."""
    return pick.name == "as written" or "no variant" in note


def _cycles(c: float) -> str:
    return "does not fit" if c == float("inf") else f"{c:,.0f}"


def cores(kernel: Kernel, whole: bool = False) -> list[Core]:
    """The attention cores of ``kernel`` whose statements are consecutive top-level
    loop nests but for the reshapes that feed them (see the module docstring),
    in program order; with ``whole``, every core with all the loop nests
    between its statements (the value's projection too)."""
    items = _items(kernel)
    out = []
    for c in range(len(items)):
        found = _found(items, c)
        if found is not None and (whole or set(found.gap) <= set(found.feeders)):
            lo = min(found.members)
            out.append(Core(tuple(range(lo, c + 1)), found.qk, found.pv, found.scores))
    return out


def gather(kernel: Kernel, feeders: bool = False) -> tuple[Kernel, list[Core]]:
    """The kernel with every attention core's statements made consecutive: the
    loop nests between them that the core does not feed (with ``feeders``, none
    of whose results the core reads) move, in their order, before the core's
    first one and before the loop nests just before it that feed it (the key's
    transpose, which may then fuse with the core), as far as their own
    producers allow. The moves are checked at once by the exact legality
    check; when it refuses, none is made (the cores are then not fused).
    Returns the kernel and its cores."""
    items = _items(kernel)
    children = list(top_children(kernel))
    moved = False
    for c in range(len(items)):
        found = _found(items, c)
        if found is None:
            continue
        gap = [p for p in found.gap if not (feeders and p in found.feeders)]
        if not gap:
            continue
        lo = _before(items, min(found.members), c, gap)
        order = list(range(len(items)))
        inside = [p for p in order[lo : c + 1] if p not in gap]
        order[lo : c + 1] = gap + inside
        items = [items[p] for p in order]
        children = [children[p] for p in order]
        moved = True
    if not moved:
        return kernel, cores(kernel)
    # one check for every move; a refused one leaves the cores unfused
    if _runs_forward(kernel, children):
        root = children[0] if len(children) == 1 else stree.Sequence_(tuple(children))
        new = stree.to_isl(stree.name_bands(root))
        kernel = kernel.with_schedule(new, step("apply_schedule", to_yaml(new)))
    return kernel, cores(kernel)


def _runs_forward(kernel: Kernel, children) -> bool:
    """Whether the program's top-level loop nests, each unchanged, in the order
    of ``children`` keep every dependence forward: exactly when no dependence
    runs from a loop nest to one now before it (two instances of one loop nest
    keep their order, and the sequence runs a loop nest's instances all before
    the next one's). The check apply_schedule would make on the whole tree,
    decided per pair of statements; recorded as apply_schedule records it, so
    a replay of the history checks it again."""
    where = {n: i for i, c in enumerate(children) for n in stree.statements(c)}
    for _, _, m in dependences(kernel):
        src = where[m.get_tuple_name(isl.dim_type.in_)]
        if src > where[m.get_tuple_name(isl.dim_type.out)]:
            return False
    return True


def _before(items, lo: int, end: int, gap: list[int]) -> int:
    """Where the gap goes: before ``lo`` (the core's window, up to ``end``) and
    the run of loop nests right before it whose results the core reads, but
    after every producer of what the gap reads."""
    needed: set[str] = set()
    for p in range(lo, end + 1):
        if p not in gap:
            needed |= {ld.array for ld in items[p].reads}
    reads = {ld.array for p in gap for ld in items[p].reads}
    # an opaque loop nest (None) may write anything: the gap stays after it
    floor = 1 + max(
        (p for p in range(lo) if items[p] is None or items[p].target.array in reads),
        default=-1,
    )
    while lo > floor and items[lo - 1] is not None:
        if items[lo - 1].target.array not in needed:
            break
        lo -= 1
        needed |= {ld.array for ld in items[lo].reads}
    return lo


def score_arrays(kernel: Kernel) -> list[str]:
    """The arrays holding attention score matrices in ``kernel``, scheduled or not
    (its statements in program order): what the report's per-tensor DRAM figure
    checks."""
    items = list(kernel.statements)
    out: list[str] = []
    for c in range(len(items)):
        found = _found(items, c)
        if found is not None:
            out += [a for a in found.scores if a not in out]
    return out


# the dataflow --------------------------------------------------------------------


def _items(kernel: Kernel) -> list[Statement | None]:
    """Per top-level child, its statement when it runs exactly one (else None)."""
    return lone_statements(kernel)


@dataclass(frozen=True)
class _Found:
    """An attention's statements at the current positions: ``members`` (QK^T with
    its init, what lies between it and PV on the way, PV with its init), ``gap``
    (the other loop nests between the first member and PV) and ``feeders`` (the
    gap's loop nests other than contractions and inits whose result a member
    reads: the value's reshapes)."""

    members: tuple[int, ...]
    gap: tuple[int, ...]
    feeders: tuple[int, ...]
    qk: str
    pv: str
    scores: tuple[str, ...]


def _found(items, c: int) -> _Found | None:
    """The attention whose PV contraction is at position ``c``, or None."""
    pv = items[c]
    if pv is None or contraction(pv) is None:
        return None
    con = contraction(pv)
    for operand in (con.a, con.b):
        if operand is None:
            continue
        found = _back(items, c, pv.reads[operand].array)
        if found is not None:
            return found
    return None


def _back(items, c: int, array: str):
    """The core whose PV (at ``c``) reads ``array``: back from it through the
    writers of what it reads to the nearest contraction (QK^T), the statements
    both downstream of QK^T and upstream of PV, with the inits of what they
    write; a core only when one of them is a max reduction (a softmax)."""
    upstream: set[int] = set()
    reached: list[int] = []
    todo, seen = [array], set()
    while todo:
        a = todo.pop()
        if a in seen:
            continue
        seen.add(a)
        for p in range(c):
            s = items[p]
            if not _writes(s, a):
                continue
            upstream.add(p)
            if contraction(s) is not None:
                reached.append(p)
                continue  # QK^T's own operands are not the core's
            todo += [ld.array for ld in s.reads if ld.array != a]
    if not reached:
        return None
    qk = max(reached)
    downstream, written = set(), {items[qk].target.array}
    for p in range(qk + 1, c):
        s = items[p]
        if (
            s is not None
            and s.target.array != items[qk].target.array
            and any(ld.array in written for ld in s.reads)
        ):
            downstream.add(p)
            written.add(s.target.array)
    middle = downstream & upstream
    arrays = {items[qk].target.array} | {items[p].target.array for p in middle}
    pv = items[c]
    qk_out = items[qk].target.array
    lo = min(p for p in range(qk + 1) if _writes(items[p], qk_out))
    arrays |= {pv.target.array}
    members = {c} | {
        p
        for p in range(lo, c)
        if items[p] is not None and items[p].target.array in arrays
    }
    if not _softmax([items[p] for p in middle]):
        return None
    window = range(min(members), c + 1)
    if any(items[p] is None for p in window):
        return None
    gap = tuple(p for p in window if p not in members)
    made = {items[p].target.array for p in members}
    for p in gap:
        if any(ld.array in made for ld in (items[p].target, *items[p].reads)):
            return None  # the gap reads what the core writes: it cannot move
    reads = {ld.array for p in members for ld in items[p].reads}
    feeders = tuple(
        p
        for p in gap
        if items[p].target.array in reads
        and items[p].reads
        and contraction(items[p]) is None
    )
    made_in_order = dict.fromkeys(items[p].target.array for p in sorted(members))
    scores = tuple(a for a in made_in_order if a != pv.target.array)
    return _Found(tuple(sorted(members)), gap, feeders, items[qk].name, pv.name, scores)


def _writes(stmt: Statement | None, array: str) -> bool:
    return stmt is not None and stmt.target.array == array
