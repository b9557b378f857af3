"""The search of the accelerator scheduler: per layer, the structures worth trying
(engine per statement, MAC dimension groups, tile-loop order, which loops to tile)
and the best tile sizes of each under the cost model (:mod:`schedules.accel.model`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
from dataclasses import dataclass, replace

import islpy as isl
import numpy as np
import sympy as sp

from accelerator.hardware.spec import Spec
from polyc.ir import requant
from polyc.ir.kernel import (
    Kernel,
    Statement,
    array_extent,
    params_head,
)
from polyc.ir.macmap import Refusal
from schedules.accel import levels, models, pipeline
from schedules.accel.evaluate import candidates
from schedules.accel.layers import Layer
from schedules.accel.memplan import ZERO_BYTES
from schedules.accel.model import LayerModel
from schedules.accel.ranking import Ranked, searched
from schedules.accel.split import split_engine, split_groups
from schedules.accel.structure import STREAM_SLOTS, Structure, polyphase
from schedules.accel.tensorize import contraction, may_self_depend
from schedules.accel.tilevars import PrivateTile, SharedTile, TileVar

#: loops up to this many iterations stay whole (filter taps, small batch)
SMALL = 8
#: at most this many tiled loops per layer, and candidate points per structure
MAX_FREE = 4
MAX_POINTS = 30000
#: predictions within this fraction of each other count as a tie, broken by fewer
#: DMA calls (latency-bound small copies are fragile), then more slots
TIE = 0.01
#: engine assignments tried per layer before only the first contraction varies
MAX_ENGINE_COMBOS = 16
#: ranked points of a structure checked for a realisable MAC mapping before the
#: structure is given up
SCAN = 32


@dataclass(frozen=True)
class Candidate:
    """One schedule of a layer: its structure, tile sizes and predicted cost."""

    structure: Structure
    sizes: tuple[tuple[TileVar, int], ...]  # (variable, size)
    cycles: float
    dram_bytes: float
    sram_bytes: float
    engines: tuple[tuple[str, float], ...] = ()  # predicted busy cycles per engine
    transfers: float = 0.0  # DMA calls
    staged: tuple[str, ...] = ()  # operands staged whole in the level above
    # what the next and the previous layer may overlap (terms.Busy.edges): the
    # figures named by EDGES, and (array, time of its first copy) per load
    edges: tuple[float, ...] = ()
    first_loads: tuple[tuple[str, float], ...] = ()

    def size_of(self, var: TileVar) -> int | None:
        return dict(self.sizes).get(var)


#: the figures of :attr:`Candidate.edges`, in order (numbers only: a candidate's
#: strings are names, which :func:`renamed` replaces)
EDGES = ("fill", "fill_bytes", "fill_calls", "tail", "tail_bytes", "tail_calls")


def engine_level(spec: Spec) -> int:
    """The on-chip level the compute engines share (MAC operands, accumulators and
    the vector unit), innermost first."""
    a = spec.mac_array
    common = set(a.operand_levels) & set(a.accumulator_levels) & set(spec.vector.levels)
    for m in reversed(spec.sram_levels):
        if m.name in common:
            return spec.level_index(m.name)
    return spec.level_index(spec.vector.levels[0])


def upper_level(spec: Spec) -> int | None:
    """The SRAM level right above every level an engine reaches (datacenter's
    ``shared``), where operands re-read across tiles are staged; ``None`` when
    there is none (one SRAM level, or one SRAM per operand role)."""
    i = min(spec.level_index(n) for n in levels.reached(spec)) - 1
    return i if i > 0 and spec.memory[i].kind == "sram" else None


def engines(kernel: Kernel, stmt: Statement, spec: Spec) -> list[str]:
    """Engines that can run ``stmt``: the MAC array for a contraction of a dtype it
    takes, the vector unit for element-wise and reduction work, else the scalar
    core. A contraction cut in two by :func:`schedules.accel.split.split_layer`
    runs each part on the engine :func:`schedules.accel.split.split_engine`
    names."""
    out = []
    con = contraction(stmt)
    if con is not None and con.operand in spec.mac_array.dtypes:
        out.append("mac")
    if stmt.reduction is not None or not _self_dependent(kernel, stmt):
        out.append("vector")
    side = split_engine(kernel, stmt.name)
    if side is not None and out == ["mac", "vector"]:
        # a layer split across engines: each part on its engine, running beside
        # each other in each tile
        out = [side]
    return out or ["scalar"]


def level_conflict(kernel: Kernel, layer: Layer, spec: Spec) -> levels.Conflict | None:
    """The buffer of ``layer`` that no level serves when every contraction the MAC
    array takes runs on it (a zero init folded into it) and the rest on the
    vector unit, or ``None``: with one SRAM per operand role, a contraction fused
    with a vector epilogue or a bias init needs a level both engines reach."""
    engine = []
    for s in layer.stmts:
        fold = folds_into(layer, s)
        if fold is not None and "mac" in engines(kernel, fold, spec):
            engine.append((s.name, "fold"))
        else:
            engine.append((s.name, engines(kernel, s, spec)[0]))
    got = levels.assign(layer, _Engines(tuple(engine)), spec, engine_level(spec))
    return got if isinstance(got, levels.Conflict) else None


def folds_into(layer: Layer, stmt: Statement) -> Statement | None:
    """The contraction of the layer whose output ``stmt`` zeroes (``out = 0``), if
    ``stmt`` is such an init: it can be folded into the MAC calls."""
    from polyc.ir.expr import Const

    if not (isinstance(stmt.body, Const) and stmt.body.value == 0):
        return None
    later = layer.stmts[layer.stmts.index(stmt) + 1 :]
    for s in later:
        if s.target.array == stmt.target.array:
            return s if contraction(s) is not None else None
    return None


def requantizes(layer: Layer, stmt: Statement) -> Statement | None:
    """The contraction of the layer whose int32 output ``stmt`` requantizes to int8
    element for element (:func:`polyc.ir.requant.match`, reading the element it
    writes), if any: the MAC array's output path can run it after the last K
    step."""
    rq = requant.match(stmt.body)
    if rq is None or tuple(rq.acc.index) != tuple(stmt.target.index):
        return None
    for s in reversed(layer.stmts[: layer.stmts.index(stmt)]):
        if s.target.array == rq.acc.array:
            return s if contraction(s) is not None else None
    return None


def _self_dependent(kernel: Kernel, stmt: Statement) -> bool:
    def compute(k: Kernel) -> bool:
        if not may_self_depend(k, stmt):
            return False  # decided without the whole program's dependences
        mine = isl.UnionSet.from_set(stmt.domain)
        deps = k.deps.validity.intersect_domain(mine).intersect_range(mine)
        return not deps.is_empty()

    return kernel.analysis(("accel.self_dependent", stmt.name), compute)


def mac_groups(layer: Layer, stmt: Statement, rows: int | None = None):
    """MAC mappings to try: ``((m, n, k), pitched, layouts, phased)``.

    Each dimension is the longest iterator of its role (a convolution's channels,
    not its filter taps). M may also fuse its two innermost iterators (several output rows
    per call), over an output padded to the input's pitch or over a compact output
    whose rows A reads at its own pitch. K may fuse the filter-row tap with
    the channels when the operands sit channels-last in their buffers (``layouts``
    moves the channel dimension innermost), so that one call covers a row of taps,
    and the filter row with both (:func:`_filter_rows`), one call per window,
    when a row of taps covers fewer than ``rows`` (the array's K dimension; any
    when None): only then does the whole window fill more of the array.
    A pitched M over a strided input may store that input in phases (``phased``,
    see :func:`schedules.accel.structure.polyphase`). Whether a mapping is realisable
    depends on the buffers, so it is decided per tile size by the search
    (:func:`_realisable`): a dilated, causal or reversed tap does not fuse with
    the channels, and then K runs over the channels with the taps around the call.
    """
    con = contraction(stmt)

    def longest(role: str) -> tuple[str, ...]:
        members = con.members(role)
        if not members:
            return ()
        return (max(reversed(members), key=lambda it: layer.extent(stmt, it)),)

    m, n, k = longest("m"), longest("n"), longest("k")
    ms = con.members("m")
    # fused M over a padded output (pitched), or over a compact one that A reads
    # at its own row pitch (not pitched: polyc.ir.macmap's M split)
    ms_options = [(m, False)]
    if len(ms) >= 2:
        ms_options += [(ms[-2:], True), (ms[-2:], False)]
    k_options = [(k, ())]
    fused = _channels_last(layer, stmt, con)
    if fused is not None:
        k_options.append(fused)
        window = _filter_rows(stmt, con, fused)
        tap, kc = fused[0]
        short = rows is None or layer.extent(stmt, tap) * layer.extent(stmt, kc) < rows
        if window is not None and short:
            k_options.append(window)
    else:
        window = _taps(layer, stmt, con, rows)
        if window is not None:
            k_options.append((window, ()))
    out = []
    for mm, pitched in ms_options:
        for kk, layouts in k_options:
            out.append(((mm, n, kk), pitched, layouts, False))
            # a strided convolution's input in phases: the fused rows stop
            # skipping the rows of the other parity
            if pitched and polyphase(stmt, (mm, n, kk)) is not None:
                out.append(((mm, n, kk), pitched, layouts, True))
    return out


def _channels_last(layer: Layer, stmt: Statement, con):
    """``((tap, channel), layouts)``: the K group over a filter row and the channels,
    when both operands index the channel alone in one dimension (moved innermost
    in their buffers) and the same tap in the dimension before it."""
    best = None
    for kc in con.members("k"):
        out = []
        for ld in (stmt.reads[con.a], stmt.reads[con.b]):
            dims = [d for d, a in enumerate(ld.index) if a.coefficient(kc)]
            if len(dims) != 1 or len(ld.index) < 2 or ld.index[dims[0]].names() != {kc}:
                break
            order = [d for d in range(len(ld.index)) if d != dims[0]] + [dims[0]]
            prev = ld.index[order[-2]]
            taps = [
                it
                for it in stmt.iterators
                if it != kc and con.roles[it] == "k" and prev.coefficient(it)
            ]
            out.append((ld.array, tuple(order), tuple(taps)))
        if len(out) != 2 or len(out[0][2]) != 1 or out[0][2] != out[1][2]:
            continue
        if best is None or layer.extent(stmt, kc) > layer.extent(stmt, best[0][1]):
            best = ((out[0][2][0], kc), tuple((a, o) for a, o, _ in out))
    return best


def _taps(layer: Layer, stmt: Statement, con, rows: int | None):
    """``(row, tap)``: the filter window as one K group, for a contraction whose
    channels do not fuse with its taps (:func:`_channels_last`: a depthwise
    convolution, whose input channel is its output's, or an input whose
    channels are not the innermost): its two innermost K iterators of more
    than one point, when the longer of them alone leaves rows of the array
    (``rows``; any when None) idle. A reads the window with two strides, the
    input row's pitch and the tap's, B steps the row by the tap's span
    (:func:`polyc.ir.macmap.check` decides per tile)."""
    ks = [it for it in con.members("k") if layer.extent(stmt, it) > 1]
    if len(ks) < 2:
        return None
    longest = max(layer.extent(stmt, it) for it in ks)
    if rows is not None and longest >= rows:
        return None
    return tuple(ks[-2:])


def _filter_rows(stmt: Statement, con, fused):
    """``((row, tap, channel), layouts)``: the channels-last K group ``fused`` with
    the filter row fused outside it, when one K iterator indexes the dimension
    before the tap's in both operands (the input's rows, the weight's filter
    rows). One call then covers the whole filter window: A reads it from the
    input buffer with two strides, the row pitch and the tap's
    (:func:`polyc.ir.macmap.check`), so a layer with few input channels fills
    the array's rows (K = rh x rw x rc, not rw x rc)."""
    (tap, kc), layouts = fused
    order = dict(layouts)
    found = []
    for ld in (stmt.reads[con.a], stmt.reads[con.b]):
        if len(ld.index) < 3:
            return None
        before = ld.index[order[ld.array][-3]]
        rows = [
            it
            for it in stmt.iterators
            if it not in (tap, kc) and con.roles[it] == "k" and before.coefficient(it)
        ]
        found.append(tuple(rows))
    if len(found[0]) != 1 or found[0] != found[1]:
        return None
    return (found[0][0], tap, kc), layouts


def structures(
    kernel: Kernel, layer: Layer, spec: Spec, private: bool, all_orders: bool = True
):
    """Every structure worth modelling for ``layer`` (with ``all_orders=False``,
    in the natural order of the tile loops only)."""
    per_stmt = []
    for s in layer.stmts:
        opts = []
        into = folds_into(layer, s)
        # a fold needs its contraction on the MAC array (the vector part of a
        # split depthwise layer never is: offered there, the fold was the only
        # option the cap on combinations below kept, and no structure was left)
        if into is not None and "mac" in engines(kernel, into, spec):
            opts.append(("fold", None, False, (), False))
        if spec.mac_array.requantize and requantizes(layer, s) is not None:
            # the only option: it falls back to the vector unit below when its
            # contraction is not on the MAC array (an extra option would make the
            # combinations' cap cut the contraction's own alternatives)
            per_stmt.append([("mac_out", None, False, (), False)])
            continue
        for eng in engines(kernel, s, spec):
            if eng == "mac":
                rows = spec.mac_array.rows
                for groups, pitched, layouts, phased in mac_groups(layer, s, rows):
                    opts.append((eng, groups, pitched, layouts, phased))
            else:
                opts.append((eng, None, False, (), False))
        per_stmt.append(opts)
    if np.prod([len(o) for o in per_stmt]) > MAX_ENGINE_COMBOS:
        # the first contraction keeps its mappings (not an init before it that
        # folds into it or runs on the vector unit)
        varies = [i for i, o in enumerate(per_stmt) if len(o) > 1]
        macs = [i for i in varies if any(c[0] == "mac" for c in per_stmt[i])]
        first = (macs or varies or [0])[0]
        per_stmt = [o if i == first else o[:1] for i, o in enumerate(per_stmt)]
    free = _free(layer, private)
    shared_free = [v.position for v in free if isinstance(v, SharedTile)]
    fixed = [p for p in range(layer.depth) if p not in shared_free]
    # the order of the tile loops matters for what a copy can be hoisted out of:
    # with no private loops every array moves with every loop, so one order does
    orders = [tuple(shared_free)]
    if _has_private(layer) and all_orders:
        orders = list(itertools.permutations(shared_free))
        if len(orders) > 6:
            orders = [tuple(shared_free), tuple(reversed(shared_free))]
    for combo in itertools.product(*per_stmt):
        engine = tuple((s.name, c[0]) for s, c in zip(layer.stmts, combo))
        chosen = dict(engine)
        if any(
            e == "fold" and chosen[folds_into(layer, s).name] != "mac"
            for s, e in zip(layer.stmts, chosen.values())
        ):
            continue
        engine = tuple(
            (n, "vector")
            if e == "mac_out" and chosen[requantizes(layer, s).name] != "mac"
            else (n, e)
            for s, (n, e) in zip(layer.stmts, engine)
        )
        groups = tuple((s.name, c[1]) for s, c in zip(layer.stmts, combo) if c[1])
        pitched = tuple(s.name for s, c in zip(layer.stmts, combo) if c[2])
        layouts = tuple(x for c in combo for x in c[3])
        phased = tuple(s.name for s, c in zip(layer.stmts, combo) if c[4])
        if _conflicts(kernel, layer, engine, spec):
            continue  # some buffer has no level all its engines reach
        streams = (STREAM_SLOTS, 2)
        # an attention's QK^T one tile ahead of its softmax and PV, or not
        early = pipeline.ahead(layer, dict(engine))
        aheads = [(), early] if early else [()]
        for order in orders:
            for slots in streams:
                for ahead in aheads:
                    st = Structure(
                        engine,
                        groups,
                        pitched,
                        tuple(fixed) + order,
                        tuple(free),
                        layouts,
                        slots,
                        phased,
                        ahead,
                    )
                    # an MLP's lifted buffers a contiguous range per tile
                    extra = pipeline.tile_major(layer, st)
                    if extra:
                        st = dataclasses.replace(st, layouts=layouts + extra)
                    yield st


def _conflicts(kernel: Kernel, layer: Layer, engine, spec: Spec) -> bool:
    """Whether some buffer of ``layer`` has no level all its engines reach under
    ``engine`` (asked per structure, in each pass of :func:`search`)."""
    key = ("accel.conflicts", tuple(s.name for s in layer.stmts), engine, spec)
    return kernel.analysis(
        key,
        lambda _: isinstance(
            levels.assign(layer, _Engines(engine), spec, engine_level(spec)),
            levels.Conflict,
        ),
    )


@dataclass(frozen=True)
class _Engines:
    """The engine part of a structure (what :func:`levels.assign` reads)."""

    engine: tuple[tuple[str, str], ...]

    def engine_of(self, stmt: str) -> str:
        return dict(self.engine)[stmt]


def _has_private(layer: Layer) -> bool:
    return any(layer.private(s) for s in layer.stmts)


def _free(layer: Layer, private: bool) -> list[TileVar]:
    """The loops to tile: shared loops longer than one iteration, the reduction
    loops of contractions (and every private loop when ``private``), largest first
    when there are too many."""
    first = layer.stmts[0]
    out = []
    for p in range(layer.depth):
        if layer.extent(first, first.iterators[p]) > 1:
            out.append((layer.extent(first, first.iterators[p]), SharedTile(p)))
    for s in layer.stmts:
        con = contraction(s)
        for it in layer.private(s):
            ext = layer.extent(s, it)
            if ext <= SMALL:
                continue
            if private or (con is not None and con.roles[it] == "k"):
                out.append((ext, PrivateTile(s.name, it)))
    if len(out) > MAX_FREE:
        out = sorted(out, key=lambda x: -x[0])[:MAX_FREE]
    keep = {v for _, v in out}
    return [
        v for _, v in sorted(out, key=lambda x: _position(layer, x[1])) if v in keep
    ]


def _position(layer: Layer, var: TileVar) -> tuple:
    """Shared loops first, by position; then private ones by statement and loop
    position (never by name: see :func:`renamed`)."""
    if isinstance(var, SharedTile):
        return (0, var.position, 0)
    stmt, it = var.loop(layer)
    return (1, layer.stmts.index(stmt), stmt.iterators.index(it))


def may_leave(kernel: Kernel, layer: Layer) -> bool:
    """Whether a tile's box may leave its array (a padded convolution, whose
    domain skips the padding but whose boxes are rectangular hulls), so that a
    copy may be clipped and its level needs a zero block: some access leaves the
    array over the bounding box of its statement's domain."""
    return any(_leaves(kernel, s) for s in layer.stmts)


def _leaves(kernel: Kernel, stmt: Statement) -> bool:
    """Whether an access of ``stmt`` leaves its array over the bounding box of
    the statement's domain (memoised with the statement and its arrays'
    shapes: the planners search the same statements in many programs)."""
    params = kernel.params
    loads = (stmt.target, *stmt.reads)
    key = (tuple(params), tuple((ld.array, kernel.arrays[ld.array]) for ld in loads))
    per = _LEAVES.get(stmt)
    if per is None:
        per = _LEAVES[stmt] = {}
    if key not in per:
        box = _bounding_box(stmt)
        per[key] = False
        for ld in loads:
            inside = array_extent(kernel.arrays[ld.array], params)
            idx = ", ".join(a.to_isl() for a in ld.index)
            text = (
                f"{{ {stmt.name}[{', '.join(stmt.iterators)}] -> {ld.array}[{idx}] }}"
            )
            acc = isl.Map(params_head(params) + text).intersect_domain(box)
            if not acc.range().is_subset(inside):
                per[key] = True
                break
    return per[key]


#: :func:`_leaves` by statement, then (parameters, its arrays)
_LEAVES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bounding_box(stmt: Statement) -> isl.Set:
    """The smallest box holding ``stmt``'s domain (its iterators' ranges)."""
    dom = stmt.domain
    box = isl.Set.universe(dom.get_space())
    for i in range(dom.dim(isl.dim_type.set)):
        lo = dom.dim_min(i).min_val().to_python()
        hi = dom.dim_max(i).max_val().to_python()
        box = box.lower_bound_val(isl.dim_type.set, i, isl.Val(lo))
        box = box.upper_bound_val(isl.dim_type.set, i, isl.Val(hi))
    return box


def search(
    kernel: Kernel, layer: Layer, spec: Spec, keep: int = 8, stage: bool = True
) -> list[Candidate]:
    """The ``keep`` best candidates that fit, best first (deterministic). With
    ``stage`` (and an SRAM level above the engines'), operands re-read from DRAM
    across tiles may be staged whole in that level (see :func:`_best`)."""
    level = engine_level(spec)
    upper = upper_level(spec) if stage else None
    capacity = capacities(kernel, layer, spec)
    found: list[Candidate] = []

    def ranked(st: Structure) -> Ranked:
        return _ranked(kernel, layer, spec, st, level, capacity, upper)

    def floor(st: Structure) -> float:
        model = layer_model(kernel, layer, spec, st, level)
        # its points and MAC cycles are the model's (the slots change neither):
        # once per model, whichever hardware point shares it
        return model._once(
            ("mac_floor",),
            lambda: model.mac_floor(_points(kernel, layer, st, model)[1]),
        )

    def checked(sts: list[Structure], known: list[Candidate], tops: bool):
        return searched(sts, keep, known, floor, ranked, _chosen, TIE, tops)

    for private in (False, True):
        found = checked(list(structures(kernel, layer, spec, private, False)), [], True)
        if not found:
            continue
        # the two best structures again, in every order of their tile loops
        tops: list[Structure] = []
        for c in sorted(found, key=lambda c: c.cycles):
            key = replace(c.structure, order=())
            if key not in tops:
                tops.append(key)
            if len(tops) == 2:
                break
        seen = {c.structure for c in found}
        more = [
            st
            for st in structures(kernel, layer, spec, private, all_orders=True)
            if replace(st, order=()) in tops and st not in seen
        ]
        found.extend(checked(more, found, False))
        break
    best = min((c.cycles for c in found), default=1.0)
    # the last tie-break, once per structure (candidates share their structure)
    text = {id(st): st for st in (c.structure for c in found)}
    text = {i: repr(renamed(st, layer.canonical_names)) for i, st in text.items()}
    found.sort(
        key=lambda c: (
            round(c.cycles / (TIE * best)),
            c.transfers,
            -c.structure.stream_slots,
            c.dram_bytes,
            c.sram_bytes,
            text[id(c.structure)],
        )
    )
    return found[:keep]


def renamed(obj, names: dict[str, str], _memo: dict | None = None):
    """``obj`` (a :class:`Candidate`, a tuple of them or any part of one) with
    every string in ``names`` replaced: statement, array and iterator names
    (engine words are not names). The search is invariant under renaming -- it
    orders by position, and breaks its last ties by the structure under the
    layer's canonical names -- so a layer that differs from another only in
    names gets the other's candidates, renamed (what :mod:`schedules.accel.cache`
    relies on). Parts that several candidates share (their structure) are
    renamed once per call."""
    if isinstance(obj, str):
        return names.get(obj, obj)
    if _memo is None:
        _memo = {}
    if isinstance(obj, tuple):
        return tuple(renamed(x, names, _memo) for x in obj)
    fields = _FIELDS.get(type(obj))
    if fields is None:
        if not dataclasses.is_dataclass(obj):
            return obj
        fields = _FIELDS[type(obj)] = tuple(f.name for f in dataclasses.fields(obj))
    done = _memo.get(id(obj))
    if done is None:
        # the class itself, as dataclasses.replace would call it (no field is
        # init=False); the object is kept so that its id stays its own
        new = type(obj)(**{f: renamed(getattr(obj, f), names, _memo) for f in fields})
        done = _memo[id(obj)] = (obj, new)
    return done[1]


#: the field names of each dataclass :func:`renamed` has met (it runs per candidate)
_FIELDS: dict[type, tuple[str, ...]] = {}


def capacities(kernel: Kernel, layer: Layer, spec: Spec) -> dict[int, int]:
    """The bytes the layer's buffers may take in each on-chip level: all of it,
    less room for a zero block when a tile's box may leave its array (a halo),
    and below the intermediates' homes (as the memory planner plans)."""
    from schedules.accel.memplan import below_homes

    halo = may_leave(kernel, layer)
    out = {}
    for m in below_homes(spec, kernel).sram_levels:
        room = m.capacity_bytes
        if halo:
            room -= 2 * max(ZERO_BYTES, m.alignment_bytes)
        out[spec.level_index(m.name)] = room
    return out


def fits(est, capacity: dict[int, int]) -> np.ndarray:
    """Per point, whether every level holds what the layer puts in it."""
    ok = np.ones(len(est.sram_bytes), dtype=bool)
    for level, used in est.level_bytes.items():
        ok &= used <= capacity[level]
    return ok


def _best(
    kernel, layer, spec, st: Structure, level, capacity, keep, upper=None
) -> list[Candidate]:
    """The ``keep`` best tile sizes of ``st`` (:func:`_ranked`, then
    :func:`_chosen`)."""
    return _chosen(_ranked(kernel, layer, spec, st, level, capacity, upper), keep)


def _ranked(kernel, layer, spec, st: Structure, level, capacity, upper) -> Ranked:
    """The points of ``st`` that fit, best first. With an ``upper`` level, each point
    is also modelled with its re-read operands staged there (those that fit,
    copied once from DRAM above the tile loops) and staged where that is not
    slower than the single-level placement (within the tie margin)."""
    model = layer_model(kernel, layer, spec, st, level)
    mesh, grid = _points(kernel, layer, st, model)
    slots = st.stream_slots
    est = model.evaluate(grid, stream_slots=slots)
    top = spec.memory[upper] if upper is not None else None
    staged = model.stageable(top)
    if staged:
        est = _staged(est, model.evaluate(grid, staged, top, stream_slots=slots))
    ok = np.flatnonzero(fits(est, capacity))
    if ok.size == 0:
        return Ranked(st, model, mesh, est, ok, math.inf)
    near = np.round(est.cycles[ok] / (TIE * est.cycles[ok].min()))
    order = ok[
        np.lexsort((est.sram_bytes[ok], est.dram_bytes[ok], est.transfers[ok], near))
    ]
    return Ranked(st, model, mesh, est, order, float(est.cycles[ok].min()))


def _points(kernel, layer, st: Structure, model: LayerModel):
    """``(mesh, grid)``: the tile sizes ``st`` tries, one row per point (its free
    variables' values, the last fastest), and per symbol its column."""
    values = []
    exact = {
        (name, it) for name, g in st.groups for it in g[2][1:]
    }  # a fused K's inner iterators are tiled only by divisors (no partial tiles)
    folded = {
        folds_into(layer, kernel.statement(name)).name
        for name, eng in st.engine
        if eng == "fold"
    }
    groups = split_groups(kernel)
    # a layer split across engines tiles only its group loop (spatial loops whole)
    split = any(it in groups for s in layer.stmts for it in s.iterators)
    for var in st.free:
        stmt, it = var.loop(layer)
        ext = layer.extent(stmt, it)
        vals = candidates(ext)
        if (
            isinstance(var, PrivateTile)
            and stmt.name in folded
            and _writes_along(stmt, it)
        ):
            # a folded init overwrites with the first call of each output tile
            # after it: the contraction may not tile its output on its own
            # (schedules.accel.tensorize refuses it)
            vals = [ext]
        if (stmt.name, it) in exact:
            vals = [v for v in vals if ext % v == 0]
        if isinstance(var, SharedTile) and it in groups:
            # one group of a layer split across engines per tile: several would
            # interleave the two engines' elements in its buffers
            vals = [1]
        elif isinstance(var, SharedTile) and split:
            vals = [ext]
        values.append(vals)
    cap = 11
    while values and np.prod([len(v) for v in values]) > MAX_POINTS and cap > 3:
        cap -= 1
        values = [v[-cap:] for v in values]
    if values:
        # every combination, the last variable fastest (itertools.product's order)
        axes = np.meshgrid(*(np.asarray(v, dtype=float) for v in values), indexing="ij")
        mesh = np.stack(axes, axis=-1).reshape(-1, len(values))
        grid = {sym: mesh[:, i] for i, sym in enumerate(model.syms)}
    else:
        mesh = np.zeros((1, 0))
        grid = {}
    return mesh, grid


def _chosen(r: Ranked, keep: int) -> list[Candidate]:
    """The first ``keep`` ranked points of ``r`` whose MAC mappings are realisable,
    as candidates."""
    if r.order.size == 0:
        return []
    st, mesh, est = r.structure, r.mesh, r.est
    out = []
    for i in _realisable(r.model, st, mesh, r.order, keep):
        sizes = tuple((v, int(mesh[i, j])) for j, v in enumerate(st.free))
        out.append(
            Candidate(
                st,
                sizes,
                float(est.cycles[i]),
                float(est.dram_bytes[i]),
                float(est.sram_bytes[i]),
                tuple((e, float(v[i])) for e, v in est.engines.items()),
                float(est.transfers[i]),
                tuple(a for a, use in est.staged.items() if use[i]),
                tuple(float(est.edges[e][i]) for e in EDGES if est.edges),
                tuple(
                    (e[3:], float(v[i]))
                    for e, v in est.edges.items()
                    if e.startswith("in:")
                ),
            )
        )
    return out


def _writes_along(stmt: Statement, it: str) -> bool:
    return any(a.coefficient(it) for a in stmt.target.index)


def _realisable(model: LayerModel, st: Structure, mesh, order, keep: int):
    """The first ``keep`` points of ``order`` whose MAC mappings are realisable
    (:func:`polyc.ir.macmap.check` on the buffers the placement would give them):
    the search proposes only what the code generator emits. A structure whose
    best ``SCAN`` points are all refused is given up (its mapping does not
    depend on the tile sizes: taps that cannot fuse with the channels)."""
    macs = [model.kernel.statement(name) for name, eng in st.engine if eng == "mac"]
    if not macs:
        return order[:keep]
    out = []
    for n, i in enumerate(order[: SCAN + keep]):
        if len(out) == keep or (n == SCAN and not out):
            break
        point = {sym: float(mesh[i, j]) for j, sym in enumerate(model.syms)}
        if not any(isinstance(model.mac_mapping(s, point), Refusal) for s in macs):
            out.append(i)
    return out


def _staged(one, two):
    """Per point, the staged estimate ``two`` where it is within the tie margin of
    the single-level ``one`` (it moves fewer DRAM bytes), else ``one``."""
    some = np.zeros(len(one.cycles), dtype=bool)
    for u in two.staged.values():
        some |= u
    use = some & (two.cycles <= one.cycles * (1 + TIE))

    def pick(a, b):
        return np.where(use, b, a)

    return replace(
        one,
        cycles=pick(one.cycles, two.cycles),
        dram_bytes=pick(one.dram_bytes, two.dram_bytes),
        sram_bytes=one.sram_bytes,
        level_bytes=one.level_bytes,
        engines={e: pick(v, two.engines[e]) for e, v in one.engines.items()},
        transfers=pick(one.transfers, two.transfers),
        staged={a: u & use for a, u in two.staged.items()},
        edges={e: pick(v, two.edges[e]) for e, v in one.edges.items()},
    )


def layer_model(kernel, layer, spec, st: Structure, level) -> LayerModel:
    """The layer's model for ``st`` up to its slots: structures that differ in
    slots only share one model (slots enter the numeric evaluation alone, as
    :meth:`LayerModel.evaluate`'s ``stream_slots``). The cached model is never
    changed: it holds the structure with the default slots."""
    shape = replace(st, stream_slots=STREAM_SLOTS)
    key = ("accel.model", layer.index, layer.name, spec, shape)
    return kernel.analysis(
        key, lambda k: models.layer_model(k, layer, spec, shape, level, engines)
    )


def formula(kernel: Kernel, layer: Layer, spec: Spec, cand: Candidate) -> str:
    """The DRAM traffic of a candidate as a formula of its tile sizes."""
    model = LayerModel(kernel, layer, spec, cand.structure, engine_level(spec))
    expr = _traffic_formula(model, cand.staged)
    names = ", ".join(f"{v.symbol(layer)}={n}" for v, n in cand.sizes)
    return f"DRAM bytes = {expr}" + (f" at {names}" if names else "")


def _traffic_formula(model: LayerModel, staged=()) -> sp.Expr:
    """DRAM bytes of the layer as a formula of the tile sizes (for explanations;
    a ``staged`` operand moves its whole box once)."""
    total = sp.Integer(0)
    for name, buf in model.buffers.items():
        if name in staged:
            total += sp.Integer(int(buf.whole_bytes))
            continue
        moved = sp.Integer(1)
        for e, dim in zip(buf.extents, buf.shape):
            moved *= sp.Min(e, dim)
        total += buf.directions * buf.copies * moved * buf.itemsize
    return total
