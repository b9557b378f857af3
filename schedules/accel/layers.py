"""Layers: groups of consecutive statements that the accelerator scheduler fuses.

A kernel built with the compute API (or the op library) starts as a sequence of
one band per statement. Consecutive statements whose leading iterators run over the
same ranges form a *layer* when fusing their bands on those iterators is legal
(the exact check of :func:`schedules.fuse` decides): a contraction with its init
and its element-wise epilogue (bias, activation) on the output's dimensions, the
statements of a softmax on its rows. Inside a layer the fused (shared) iterators
are tiled alike; each statement's other iterators are its private loops.

A top-level child that is not a band over one statement (loop chains of a C
program, several statements per band) is an *opaque* layer: it is placed whole
or not at all.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import dataclass
from fractions import Fraction

import islpy as isl

from accelerator.hardware.roofline import count_points
from polyc.errors import PolycError
from polyc.ir import tree
from polyc.ir.kernel import Kernel, Statement, access_map
from schedules import stree
from schedules.apply import apply_schedule
from schedules.fusion import can_fuse


@dataclass(frozen=True)
class Layer:
    """Statements fused on their first ``depth`` iterators (or one opaque child)."""

    index: int
    stmts: tuple[Statement, ...]
    bands: tuple[str, ...]
    depth: int
    opaque: bool = False
    children: tuple[int, ...] = ()  # positions in the root sequence

    def lo(self, stmt: Statement, it: str) -> int:
        return _bounds(stmt)[it][0]

    def extent(self, stmt: Statement, it: str) -> int:
        lo, hi = _bounds(stmt)[it]
        return hi - lo + 1

    def shared(self, stmt: Statement) -> tuple[str, ...]:
        return stmt.iterators[: self.depth]

    def private(self, stmt: Statement) -> tuple[str, ...]:
        return stmt.iterators[self.depth :]

    @property
    def arrays(self) -> list[str]:
        out: list[str] = []
        for s in self.stmts:
            for ld in (s.target, *s.reads):
                if ld.array not in out:
                    out.append(ld.array)
        return out

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.stmts)

    @functools.cached_property
    def canonical_names(self) -> dict[str, str]:
        """Each statement, iterator and array name of the layer -> a canonical one
        (``_S0``, ``_I0``, ``_A0``) in order of first appearance: two layers that
        differ only in names have the same canonical names for the same roles (the
        search breaks ties with them, and its cache keys by them)."""
        names: dict[str, str] = {}
        counts = {"S": 0, "I": 0, "A": 0}

        def add(n: str, kind: str) -> None:
            if n not in names:
                names[n] = f"_{kind}{counts[kind]}"
                counts[kind] += 1

        for s in self.stmts:
            add(s.name, "S")
            for it in s.iterators:
                add(it, "I")
            for ld in (s.target, *s.reads):
                add(ld.array, "A")
        return names


@functools.cache
def touches(stmt: Statement, array: str, it: str) -> bool:
    """Whether some access of ``stmt`` to ``array`` (its target or a read)
    moves with iterator ``it``: the array's box changes along that loop."""
    return any(
        it in a.names()
        for ld in (stmt.target, *stmt.reads)
        if ld.array == array
        for a in ld.index
    )


#: statement -> its iterators' bounds; the search asks tens of thousands of
#: times per model and isl's dim_min_val is a small optimisation each time
_BOUNDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bounds(stmt: Statement) -> dict[str, tuple[int, int]]:
    """Per iterator: the smallest and largest value in the domain (read once
    per statement: a Statement never changes)."""
    out = _BOUNDS.get(stmt)
    if out is None:
        dom = stmt.domain
        out = {}
        for d, it in enumerate(stmt.iterators):
            lo = dom.dim_min_val(d).to_python()
            hi = dom.dim_max_val(d).to_python()
            out[it] = (int(lo), int(hi))
        _BOUNDS[stmt] = out
    return out


def split(
    kernel: Kernel,
    fusion: bool = True,
    cuts: frozenset[int] = frozenset(),
    wide: tuple[tuple[int, ...], ...] = (),
) -> list[Layer]:
    """The kernel's layers, in program order (see the module docstring); a layer
    never spans a position in ``cuts`` (the top-level child there starts a new
    one: the scheduler fuses less where a fused group fits nothing). The
    statements at each tuple of positions in ``wide`` count as one toward
    :data:`MAX_STATEMENTS` (an attention's QK^T, softmax and PV fit in one
    layer)."""
    # the scheduler splits one program the same way many times (each MLP
    # core's ways, each depthwise layer's saving): once per program
    key = ("layers.split", schedule_text(kernel), fusion, frozenset(cuts), tuple(wide))
    return list(kernel.analysis(key, lambda _: _split(kernel, fusion, cuts, wide)))


def _split(kernel: Kernel, fusion: bool, cuts, wide) -> list[Layer]:
    children = top_children(kernel)
    # the scheduler splits one kernel several times (fusion groups, their
    # pieces, the final layers): which children are simple is read once
    simple = kernel.analysis(
        ("layers.simple", schedule_text(kernel)),
        lambda _: [_simple(kernel, c) for c in children],
    )
    out: list[Layer] = []
    group: list[tuple] = []  # (statement, band, child position)
    depth = 0
    for pos, (child, item) in enumerate(zip(children, simple)):
        if item is None:
            if group:
                out.append(_layer(len(out), group, depth))
                group = []
            stmts = tuple(_stmts(kernel, child))
            out.append(Layer(len(out), stmts, (), 0, True, (pos,)))
            continue
        item = (*item, pos)
        stmt = item[0]
        if not group:
            group, depth = [item], stmt.depth
            continue
        # a statement of an attention's core joins the core's group: a reshape
        # that feeds PV reads nothing the group writes, but PV reads it
        same_core = any(pos in w and group[-1][2] in w for w in wide)
        related = (
            _related(group, stmt)
            or _init_for(group, stmt, children, simple, child)
            or same_core
        )
        d = 0
        room = _count([g[2] for g in group], wide) < MAX_STATEMENTS or same_core
        if fusion and related and room and pos not in cuts:
            d = _fusable(kernel, group, item, depth)
        if d:
            group.append(item)
            depth = d
        else:
            out.append(_layer(len(out), group, depth))
            group, depth = [item], stmt.depth
    if group:
        out.append(_layer(len(out), group, depth))
    return out


def per_statement(kernel: Kernel) -> tuple[Kernel, dict[str, str]]:
    """The kernel with each top-level loop chain that runs several statements (a C
    loop nest such as ``for i, j: { C[i][j] = 0; for k: C[i][j] += ... }``)
    rewritten as one loop nest per statement in their order, the shape the
    compute API gives, where the exact legality check allows it: the statements
    then form layers like any others. Returns the kernel and, per chain that must
    stay whole, the reason (keyed by its statements, ``"S0+S1"``)."""
    children = list(top_children(kernel))
    reasons: dict[str, str] = {}
    changed = False
    for pos in range(len(children)):
        child = children[pos]
        if isinstance(child, list) or _simple(kernel, child) is not None:
            continue
        stmts = _stmts(kernel, child)
        if any(s.gathers for s in stmts):
            reasons["+".join(s.name for s in stmts)] = (
                "it reads through a data-dependent index"
            )
            continue
        if any(s.depth == 0 for s in stmts) or not stmts:
            reasons["+".join(s.name for s in stmts)] = (
                "it holds a statement outside every loop"
            )
            continue
        parts = [
            stree.from_isl(tree.initial_schedule([(s.name, s.domain, s.iterators)]))
            for s in stmts
        ]
        trial = children[:pos] + [parts] + children[pos + 1 :]
        try:
            apply_schedule(kernel, stree.to_isl(_sequence(trial)))
        except PolycError as err:
            why = str(err).split(" because ", 1)[-1].split(". ", 1)[0]
            reasons["+".join(s.name for s in stmts)] = (
                f"one loop nest per statement would break a dependence ({why})"
            )
            continue
        children, changed = trial, True
    if not changed:
        return kernel, reasons
    return apply_schedule(kernel, stree.to_isl(_sequence(children))), reasons


def _sequence(children) -> stree.Node:
    flat = [n for c in children for n in (c if isinstance(c, list) else [c])]
    return flat[0] if len(flat) == 1 else stree.Sequence_(tuple(flat))


def top_children(kernel: Kernel) -> tuple:
    """The children of the root sequence (or the root alone), as stree nodes
    (read once per kernel: a kernel's schedule never changes, the nodes are
    frozen, and reading a network's tree takes isl and Python about 5 ms,
    which the scheduler asked for hundreds of times per network)."""
    children = _CHILDREN.get(kernel)
    if children is None:
        children = _CHILDREN[kernel] = stree.top_level(kernel.schedule)
    return children


#: :func:`top_children` by kernel
_CHILDREN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def lone_statements(kernel: Kernel) -> list[Statement | None]:
    """Per top-level child, its statement when it runs exactly one (else None)."""
    out: list[Statement | None] = []
    for child in top_children(kernel):
        names = stree.statements(child)
        out.append(kernel.statement(names[0]) if len(names) == 1 else None)
    return out


def own_program(kernel: Kernel, stmts, name: str, arrays=None) -> Kernel:
    """``stmts`` (statements of ``kernel``, in order) as a program of their own
    named ``name``, in program order (one loop nest each), with none of
    ``kernel``'s history, data or enclosing program; ``arrays`` replaces its
    arrays when given. Its dependences are computed for it alone."""
    stmts = tuple(stmts)
    return kernel.replace(
        name=name,
        arrays=kernel.arrays if arrays is None else arrays,
        statements=stmts,
        schedule=tree.initial_schedule(
            [(s.name, s.domain, s.iterators) for s in stmts]
        ),
        program_schedule=None,
        history=(),
        data={},
        part_of=None,
    )


def sub_kernel(kernel: Kernel, positions) -> Kernel:
    """The statements of some top-level children as a kernel of their own, with
    their part of the schedule: transformations of one layer are checked against
    its own dependences (the layers keep their order, so the dependences between
    them hold whatever a layer does inside)."""
    positions = tuple(positions)

    def build(k: Kernel) -> Kernel:
        children = top_children(k)
        parts = [children[p] for p in positions]
        node = parts[0] if len(parts) == 1 else stree.Sequence_(tuple(parts))
        names = {n for part in parts for n in stree.statements(part)}
        stmts = [s for s in k.statements if s.name in names]
        # the statements come from a validated kernel: no need to validate again;
        # the part's dependences are the program's between its statements (exact:
        # computed once on the whole program, with its kills), see part_of
        return k.replace(
            name=f"{k.name}_part",
            statements=stmts,
            schedule=stree.to_isl(node),
            program_schedule=None,
            history=(),
            data={},
            part_of=k,
        )

    # memoised with the program (and its dependences) and the schedule whose
    # children the positions count: the search and the build of a layer ask for
    # the same part
    key = ("layers.sub_kernel", schedule_text(kernel), positions)
    return kernel.analysis(key, lambda _: build(kernel))


def own_part(kernel: Kernel, positions) -> Kernel | None:
    """The top-level children at ``positions`` (consecutive) as a program of
    their own, when their statements are those of consecutive children of the
    program order (the top-level children in it, whatever the schedule does
    inside them or did to the children elsewhere) and they hold at most a
    :data:`PART_SHARE`-th of its statements; else None (ask the program). Its
    schedule is theirs, its program order those children of the program's.

    Every instance that runs between two of theirs in the program order is
    then theirs, so the part's dependences are the program's between its
    statements, kills included, and they are computed on those statements
    alone: a check of a rewrite inside the part (a loop order, the order of
    its children) asks them, not the whole network's dataflow (hf-convnext's
    MLP planner asked the network's three times, 2.2 CPU s, once an earlier
    core's children were reordered)."""
    positions = tuple(positions)
    if positions != tuple(range(positions[0], positions[0] + len(positions))):
        return None
    part = sub_kernel(kernel, positions)
    if PART_SHARE * len(part.statements) > len(kernel.statements):
        return None
    if kernel.schedule.plain_is_equal(kernel.program_schedule):
        return part.replace(part_of=None)
    order = _in_program_order(kernel, {s.name for s in part.statements})
    if order is None:
        return None
    return part.replace(part_of=None, program_schedule=stree.to_isl(order))


def _in_program_order(kernel: Kernel, names: set[str]) -> stree.Node | None:
    """The consecutive top-level children of ``kernel``'s program order that run
    exactly the statements ``names``, as one node; None when there are none."""

    nodes = kernel.analysis(
        "layers.program_children", lambda k: stree.top_level(k.program_schedule)
    )
    at = [
        c
        for c, node in enumerate(nodes)
        if not names.isdisjoint(stree.statements(node))
    ]
    if not at or at != list(range(at[0], at[-1] + 1)):
        return None
    got = [nodes[c] for c in at]
    if {n for node in got for n in stree.statements(node)} != names:
        return None
    return got[0] if len(got) == 1 else stree.Sequence_(tuple(got))


def schedule_text(kernel: Kernel) -> str:
    """The text of ``kernel``'s schedule tree, printed once per kernel: the
    memoised analyses of a part key by it, and isl takes longer to print a
    network's tree (about 5 ms for 190 loop nests) than they take to look up."""
    text = _TEXTS.get(kernel)
    if text is None:
        text = _TEXTS[kernel] = kernel.schedule.get_root().to_str()
    return text


#: :func:`schedule_text` by kernel (a kernel's schedule never changes)
_TEXTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: statements fused into one layer at most
MAX_STATEMENTS = 12


def _count(positions: list[int], wide: tuple[tuple[int, ...], ...]) -> int:
    """Statements toward the cap: those of one ``wide`` tuple count once."""
    inside = [next((i for i, w in enumerate(wide) if p in w), None) for p in positions]
    return sum(i is None for i in inside) + len({i for i in inside if i is not None})


def _related(group, stmt: Statement) -> bool:
    """``stmt`` reads or writes an array that the group writes (a consumer, or a
    reduction into the group's output)."""
    written = {g[0].target.array for g in group}
    return any(ld.array in written for ld in (stmt.target, *stmt.reads))


def _init_for(group, stmt: Statement, children, simple, child) -> bool:
    """``stmt`` initialises an array (it reads none) that the next statement reads
    together with an array of the group (the sum of a softmax)."""
    if stmt.reads:
        return False
    pos = list(children).index(child)
    if pos + 1 >= len(children) or simple[pos + 1] is None:
        return False
    nxt = simple[pos + 1][0]
    reads = {ld.array for ld in nxt.reads}
    return stmt.target.array in reads and _related(group, nxt)


def _layer(index, group, depth) -> Layer:
    if len(group) == 1:
        depth = group[0][0].depth
    return Layer(
        index,
        tuple(g[0] for g in group),
        tuple(g[1] for g in group),
        depth,
        False,
        tuple(g[2] for g in group),
    )


def _stmts(kernel: Kernel, node) -> list[Statement]:
    return [kernel.statement(n) for n in stree.statements(node)]


def _simple(kernel: Kernel, node) -> tuple[Statement, str] | None:
    """``(statement, band)`` when ``node`` is a named band running one statement
    with its iterators as members, in order."""
    nb = stree.named_at(node)
    if nb is None or nb.attrs:
        return None
    names = stree.statements(node)
    if len(names) != 1 or not isinstance(nb.band.child, stree.Leaf):
        return None
    stmt = kernel.statement(names[0])
    if nb.members != stmt.iterators or stmt.depth == 0:
        return None
    if stmt.gathers:  # which rows it reads is data: no footprint to tile
        return None
    # a function of the statement and the band's schedule, whose text is cheaper
    # than isl's check: a program split again after a rewrite asks of the
    # children it left alone
    key = (stmt, str(nb.band.schedule))
    plain = _kept(_IDENTITY, key, lambda: _identity(stmt, nb.band.schedule))
    return (stmt, nb.name) if plain else None


def _identity(stmt: Statement, schedule: isl.MultiUnionPwAff) -> bool:
    """Whether ``schedule`` maps each instance of ``stmt`` to its iterators."""
    ident = isl.UnionMap.from_multi_union_pw_aff(schedule)
    want = isl.Map.identity(isl.Space.map_from_set(stmt.domain.get_space()))
    got = isl.Map.from_union_map(ident).reset_tuple_id(isl.dim_type.out)
    return got.is_subset(want.reset_tuple_id(isl.dim_type.out))


#: :func:`_identity` by the statement (an object, compared by identity) and the
#: text of the band's schedule
_IDENTITY: dict[tuple, bool] = {}


def _aligned(group, stmt: Statement, d: int) -> bool:
    """Every access that ``stmt`` and the group make to an array they share indexes
    its first ``d`` dimensions by the first ``d`` iterators: then every dependence
    between them joins instances with the same shared iterators, which fusion at
    depth ``d`` keeps in order (the group runs first in each shared iteration). A
    fast path for the common case; otherwise ``fuse`` decides."""
    from polyc.ir.affine import var

    mine = {ld.array for ld in (stmt.target, *stmt.reads)}
    for s in [g[0] for g in group] + [stmt]:
        for ld in (s.target, *s.reads):
            if ld.array not in mine or not any(
                ld.array in {x.array for x in (g[0].target, *g[0].reads)} for g in group
            ):
                continue
            if len(ld.index) < d or s.depth < d:
                return False
            if any(ld.index[p] != var(s.iterators[p]) for p in range(d)):
                return False
    return True


#: :func:`_aligned`'s answers by the statements (objects, compared by
#: identity) and the depth: a function of their accesses alone, which a
#: network split again after each depthwise split asked again about every
#: pair it left alone (5,035 times in hf-mobilenetv2 float16)
_ALIGNED: dict[tuple, bool] = {}


def _fusable(kernel: Kernel, group, item, depth: int) -> int:
    """The largest depth at which ``item`` fuses with the group (0: it does not)."""
    stmt = item[0]
    first = group[0][0]
    d = min(depth, stmt.depth)

    def aligned() -> bool:
        return _aligned(group, stmt, d)

    while d > 0:
        same = all(
            _bounds(first)[first.iterators[p]] == _bounds(stmt)[stmt.iterators[p]]
            for p in range(d)
        )
        if same and _kept(_ALIGNED, (*(g[0] for g in group), stmt, d), aligned):
            return d
        if same and _one_point(kernel, group, stmt, d):
            return d
        if same and _can_fuse(kernel, group, item, d):
            return d
        d -= 1
    return 0


def _one_point(kernel: Kernel, group, stmt: Statement, d: int) -> bool:
    """Whether the first ``d`` iterators of every statement of the group and of
    ``stmt`` each run over one point, the same for all of them (the batch of
    one image or one sequence, ``n = 0``): fused at depth ``d``, their bands run one
    iteration, inside which the children keep their order, so every instance
    runs in the order it ran before, and the kernel's schedule is legal. The
    answer of :func:`_can_fuse` (which :func:`fusion.can_fuse` reaches through
    the program's dependences) without isl: a network split again after each
    depthwise split asked it of each split layer with the layer before it, a
    new part every time (31 checks of about 50 ms in hf-mobilenetv2 float16;
    hf-llama's splits: 196 -> 74 calls of :func:`_can_fuse`, 1 CPU s less).
    The children are plain bands (:func:`_simple`: no attribute mark, so no
    loop marked concurrent; the fused band's name is none of theirs)."""
    if kernel.params:
        return False
    stmts = [g[0] for g in group] + [stmt]
    point = [_bounds(stmts[0])[it] for it in stmts[0].iterators[:d]]
    if any(lo != hi for lo, hi in point):
        return False
    return all([_bounds(s)[it] for it in s.iterators[:d]] == point for s in stmts)


def _can_fuse(kernel: Kernel, group, item, d: int) -> bool:
    """Whether the group's bands and ``item``'s fuse at depth ``d``, checked on
    their sub-kernel; memoised with the program, since the scheduler splits the
    same kernel several times (fusion groups, attentions, the final layers).

    The positions are consecutive children of the root sequence, so every
    instance that runs between two of theirs is theirs: the dependences of the
    part as a program of its own are the whole program's between its
    statements, kills included. In a large program they are computed so (a few
    statements), and the answer is kept by the part's text (:data:`_FUSES`): a
    program the scheduler rewrites (a layer split across engines) asks again
    about parts it left as they were, and the whole program's dependences are
    not needed before the search. A part of a small program (a layer on its
    own) uses the program's, computed once for all its parts; when that
    program runs in its program order, the answer is kept by the part's text
    too (the same answer, by the argument above): a depthwise layer's split
    is searched as a program of its own (:mod:`schedules.accel.share`), and
    the network split so asks the same of its parts next."""
    positions = (*(g[2] for g in group), item[2])
    bands = [g[1] for g in group] + [item[1]]

    def compute(_: Kernel) -> bool:
        if _runs_backwards(kernel, [g[0] for g in group], item[0], d):
            return False
        # a part of a large program: its answer is its text's, kept by what
        # that text is a function of (each child runs one statement)
        large = PART_SHARE * len(positions) <= len(kernel.statements)
        alike = _alike(kernel, positions, bands, d) if large else None
        if alike is not None and alike in _across():
            return _across()[alike]
        part = sub_kernel(kernel, positions)
        small = PART_SHARE * len(part.statements) > len(kernel.statements)
        if small and not kernel.schedule.plain_is_equal(kernel.program_schedule):
            return _fuses(part, bands, d)
        text = _text(part)
        key = (text, tuple(bands), d)
        if key not in _FUSES:
            if small:  # the program's dependences, computed once for its parts
                checked = part
            else:  # one part is asked at several depths: its dependences once
                checked = _OWN.get(text)
                if checked is None:
                    checked = _OWN[text] = part.replace(part_of=None)
            _keep(key, _fuses(checked, bands, d))
        if alike is not None:
            _across()[alike] = _FUSES[key]
        return _FUSES[key]

    key = ("layers.can_fuse", schedule_text(kernel), positions, d)
    return kernel.analysis(key, compute)


def _keep(key: tuple, answer: bool) -> None:
    """``answer`` kept in :data:`_FUSES` under ``key`` (the memos emptied
    when full)."""
    if len(_FUSES) >= _MAX_FUSES:
        _FUSES.clear()
        _OWN.clear()
        _across().clear()
    _FUSES[key] = answer


def _alike(kernel: Kernel, positions, bands, d: int) -> tuple | None:
    """What the text of :func:`sub_kernel`'s part at ``positions`` is a
    function of, without building it, for :func:`_can_fuse`'s answers across
    programs (:func:`_across`): the statements it takes (the objects, in the
    program's order), each child's name mark, band schedule, flags and leaf
    domain (all :func:`stree.to_isl` reads of a child that is a name mark
    over a band over a leaf), the bands, the depth and the context. None when
    a child has another form. A network split again after each depthwise
    split (:mod:`schedules.accel.share`) asks again about the parts it left:
    their answers were kept by the part's text, which cost building the part
    and printing its tree (about 1.3 ms per check, 1,162 checks in
    hf-mobilenetv2 float16)."""
    keys = _child_keys(kernel)
    parts = []
    for p in positions:
        if keys[p] is None:
            keys[p] = _child_key(top_children(kernel)[p])
        if keys[p] is False:
            return None
        parts.append(keys[p])
    names = {k[0] for k in parts}
    stmts = tuple(s for s in kernel.statements if s.name in names)
    return stmts, tuple(parts), tuple(bands), d, str(kernel.context)


def _child_keys(kernel: Kernel) -> list:
    """Per top-level child of ``kernel``, its :func:`_child_key` once asked
    (None before)."""
    keys = _KEYS.get(kernel)
    if keys is None:
        keys = _KEYS[kernel] = [None] * len(top_children(kernel))
    return keys


def _child_key(child) -> tuple | bool:
    """``(statement name, mark, band schedule, permutable, coincident, leaf
    domain)`` of a child that is a name mark over a band over a leaf (their
    texts), else False."""
    if not isinstance(child, stree.Mark) or not isinstance(child.child, stree.Band):
        return False
    band = child.child
    if not isinstance(band.child, stree.Leaf):
        return False
    names = stree.statements(child)
    if len(names) != 1:
        return False
    leaf = str(band.child.domain)
    return (
        names[0],
        child.name,
        str(band.schedule),
        band.permutable,
        band.coincident,
        leaf,
    )


def _across() -> dict:
    """:func:`_can_fuse`'s answers on large programs by :func:`_alike`: the
    answers of :data:`_FUSES` (a function of the part's text, which is one of
    its key), emptied with it (a test's new :data:`_FUSES` starts it anew)."""
    if _ACROSS[0] is not _FUSES:
        _ACROSS[:] = [_FUSES, {}]
    return _ACROSS[1]


#: :func:`_child_keys` by kernel
_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: the :data:`_FUSES` that :func:`_across`'s answers come from, and them
_ACROSS: list = [None, {}]


def fusion_answers() -> dict[tuple, bool]:
    """The fusion checks answered so far, by the part's text, the bands and the
    depth (a copy of :data:`_FUSES`): a worker process hands back the ones it
    added (:func:`learn`)."""
    return dict(_FUSES)


def learn(answers: dict[tuple, bool]) -> None:
    """Keep ``answers`` (:func:`fusion_answers`' form, from a worker process)
    as if checked here: the parent then never checks those parts again."""
    for key, answer in answers.items():
        if key not in _FUSES:
            _keep(key, answer)


def _fuses(part: Kernel, bands: list[str], d: int) -> bool:
    try:
        return can_fuse(part, bands, depth=d)
    except PolycError:
        return False


#: a part of at most this share of its program's statements is checked on its
#: own dependences
PART_SHARE = 4
#: :func:`_can_fuse`'s answers by the part's text (its schedule with the
#: domains, its accesses and context), the bands and the depth: what the
#: answer is a function of
_FUSES: dict[tuple, bool] = {}
#: the parts :data:`_FUSES` asked about, as programs of their own (with their
#: dependences), by their text
_OWN: dict[tuple, Kernel] = {}
_MAX_FUSES = 4096


def _text(part: Kernel) -> tuple:
    accesses = tuple(
        (s.name, ld.array, tuple(map(str, ld.index)))
        for s in part.statements
        for ld in (s.target, *s.reads)
    )
    return part.schedule.get_root().to_str(), accesses, str(part.context)


def _runs_backwards(kernel: Kernel, group, stmt: Statement, d: int) -> bool:
    """Whether fusing ``stmt`` with the group at depth ``d`` provably reverses a
    flow dependence, decided on the accesses alone: ``stmt`` reads an array it
    does not write, some element of which the group last writes at a larger
    value of the first ``d`` iterators (a convolution reading a neighbour row or
    another channel of its input). The group and ``stmt`` are consecutive loop
    nests, so the last write of an element before ``stmt`` reads it is the
    lexicographically last instance of the last statement of the group that
    writes it: each such pair is a dependence of the program. Fused, the bands
    run the first ``d`` iterators of each statement together, so that pair
    would run backwards, and :func:`can_fuse` refuses it too. False means "not
    decided here", not "legal". A function of the statements (immutable:
    the programs a rewrite makes keep those it leaves alone) and ``d``, kept
    by them (:data:`_BACKWARDS`): a network split again after each rewrite
    asks again about the pairs it left alone."""
    if kernel.params:
        return False
    return _kept(_BACKWARDS, (*group, stmt, d), lambda: _backwards(group, stmt, d))


def _kept(table: dict, key, compute) -> bool:
    """``compute()`` kept in ``table`` under ``key`` (the table emptied when it
    holds :data:`_MAX_FUSES` answers)."""
    if key not in table:
        if len(table) >= _MAX_FUSES:
            table.clear()
        table[key] = compute()
    return table[key]


#: :func:`_runs_backwards`' answers by the statements (objects, compared by
#: identity) and the depth
_BACKWARDS: dict[tuple, bool] = {}


def _backwards(group, stmt: Statement, d: int) -> bool:
    for ld in stmt.reads:
        if ld.array == stmt.target.array:
            continue
        last = next((s for s in reversed(group) if s.target.array == ld.array), None)
        if last is None:
            continue
        # element -> the last instance of `last` that writes it
        written = access_map(last, last.target, ()).reverse().lexmax()
        # stmt[y] -> last[x] where stmt[y] reads that write's value
        pairs = access_map(stmt, ld, ()).apply_range(written)
        pairs = pairs.apply_domain(_prefix(stmt, d)).apply_range(_prefix(last, d))
        # backwards: the write's prefix comes after the read's
        later = isl.Map.lex_lt(isl.Space.set_alloc(pairs.get_ctx(), 0, d))
        if not pairs.intersect(later).is_empty():
            return True
    return False


def _prefix(stmt: Statement, d: int) -> isl.Map:
    """``{ S[i0, ..., in] -> [i0, ..., i(d-1)] }``."""
    its = ", ".join(stmt.iterators)
    head = ", ".join(stmt.iterators[:d])
    return isl.Map(f"{{ {stmt.name}[{its}] -> [{head}] }}")


def density(layer: Layer, stmt: Statement):
    """The share of ``stmt``'s bounding box its domain holds (1 for a box; a
    7x7 depthwise convolution with padding 3 on a 4x4 image: 256 of its 784
    taps per channel), memoised on the statement. A vector-only layer of
    ConvNeXt's on edge-npu ran 4,967 cycles where its box predicted 15,191."""
    memo = stmt.__dict__
    if "_density" not in memo:
        box = math.prod(layer.extent(stmt, it) for it in stmt.iterators)
        points = count_points(stmt.domain)
        memo["_density"] = Fraction(points, box) if box and points < box else 1
    return memo["_density"]
