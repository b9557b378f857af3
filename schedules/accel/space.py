"""The search space of a layer: the structures worth trying (the engine of each
statement, the MAC dimension groups, the tile loops and their order), and the
questions about the layer that decide them (which engines can run a statement,
which init folds into the MAC calls, whether a tile's box may leave its array).
:mod:`schedules.accel.search` models each structure and keeps the best tile sizes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
from dataclasses import dataclass

import islpy as isl
import numpy as np

from accelerator.hardware import dataflow
from accelerator.hardware.spec import Spec
from polyc.ir import requant
from polyc.ir.kernel import (
    Kernel,
    Statement,
    array_extent,
    params_head,
)
from schedules.accel import levels, pipeline
from schedules.accel.layers import Layer
from schedules.accel.split import split_engine
from schedules.accel.structure import STREAM_SLOTS, Structure, polyphase
from schedules.accel.tensorize import contraction, depthwise, may_self_depend
from schedules.accel.tilevars import PrivateTile, SharedTile, TileVar

#: loops up to this many iterations stay whole (filter taps, small batch)
SMALL = 8
#: at most this many tiled loops per layer
MAX_FREE = 4
#: engine assignments tried per layer before only the first contraction varies
MAX_ENGINE_COMBOS = 16


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
    (:func:`schedules.accel.search._realisable`): a dilated, causal or reversed tap does not fuse with
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


def exchange_pays(layer: Layer, stmt: Statement, spec: Spec, groups) -> bool:
    """Whether to offer ``stmt``'s MAC calls with the operands exchanged
    (``C^T = B^T A^T``, :func:`schedules.accel.tensorize.tensorize`): when the
    array reads its input and weight ports from the same levels (the placement,
    which puts A where the input port reads and B where the weight port reads,
    then holds for the exchanged call too: HW-A's separate input and weight
    SRAMs never exchange) and a call over the layer's whole M, N, K
    (``groups``) takes fewer steady cycles exchanged, by the dataflow's formula
    (:func:`accelerator.hardware.dataflow.mac_timing`). A weight-stationary
    array holds B, so a convolution with fewer output channels than it has
    columns leaves most of them idle while it streams every pixel: exchanged,
    it holds the pixels and streams the few channels. The search then models
    both calls at each tile size and keeps the faster."""
    a = spec.mac_array
    if set(a.input_levels) != set(a.weight_levels):
        return False
    m, n, k = (math.prod(layer.extent(stmt, it) for it in g) for g in groups)
    rate = a.dtypes[contraction(stmt).operand].macs_per_cycle
    swapped = dataflow.mac_timing(a, n, m, k, rate).steady
    return swapped < dataflow.mac_timing(a, m, n, k, rate).steady


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
            opts.append(("fold", None, False, (), False, False))
        if spec.mac_array.requantize and requantizes(layer, s) is not None:
            # the only option: it falls back to the vector unit below when its
            # contraction is not on the MAC array (an extra option would make the
            # combinations' cap cut the contraction's own alternatives)
            per_stmt.append([("mac_out", None, False, (), False, False)])
            continue
        for eng in engines(kernel, s, spec):
            if eng == "mac":
                rows = spec.mac_array.rows
                for groups, pitched, layouts, phased in mac_groups(layer, s, rows):
                    opts.append((eng, groups, pitched, layouts, phased, False))
                    if exchange_pays(layer, s, spec, groups):
                        opts.append((eng, groups, pitched, layouts, phased, True))
            else:
                opts.append((eng, None, False, (), False, False))
        per_stmt.append(opts)
    # statement -> its init, when the init folds into it only on the MAC array
    paired: dict[int, int] = {}
    if np.prod([len(o) for o in per_stmt]) > MAX_ENGINE_COMBOS:
        per_stmt, paired = _capped(layer, per_stmt)
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
        # under the cap, an init folds into its contraction's MAC calls
        if any(
            engine[c][1] == "mac" and engine[i][1] != "fold" for c, i in paired.items()
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
        exchanged = tuple(s.name for s, c in zip(layer.stmts, combo) if c[5])
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
                        exchanged,
                    )
                    # an MLP's lifted buffers a contiguous range per tile
                    extra = pipeline.tile_major(layer, st)
                    if extra:
                        st = dataclasses.replace(st, layouts=layouts + extra)
                    yield st


def _conflicts(kernel: Kernel, layer: Layer, engine, spec: Spec) -> bool:
    """Whether some buffer of ``layer`` has no level all its engines reach under
    ``engine`` (asked per structure, in each pass of :func:`schedules.accel.search.search`)."""
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


def _capped(layer: Layer, per_stmt: list) -> tuple[list, dict[int, int]]:
    """``per_stmt`` under the cap on engine combinations: the first contraction
    keeps its mappings and the other statements their first option. A later
    contraction that reduces along the layer's tile loops (fused along an
    MLP's hidden dimension) also keeps its first mapping with M over two
    iterators, and a depthwise contraction before it (no N iterator: the vector
    unit runs it at a rate near the array's) its vector engine. (Offered to
    every contraction, the extra mappings let the fusion groups fuse ResNet's
    last stage into one layer, predicted 1.6% faster, which ran 17% slower and
    moved the plan of the layers before it: hf-resnet on edge-npu, float16,
    207,772 -> 307,805 cycles.) An init
    that folds into one of those contractions keeps its other engine for when
    the contraction is off the MAC array (with the fold alone, such a
    contraction had no structure on the vector unit: a depthwise convolution
    fused with the convolutions around it ran on the array, 196,694 cycles
    of MAC calls against 63,072 on the vector unit). Returns the options and
    the pairs ``{contraction: its init}`` (by position)."""
    varies = [i for i, o in enumerate(per_stmt) if len(o) > 1]
    macs = [i for i in varies if any(c[0] == "mac" for c in per_stmt[i])]
    first = (macs or varies or [0])[0]
    out = [o[:1] for o in per_stmt]
    out[first] = per_stmt[first]
    keep = {first}
    # the contractions that reduce along the layer's tile loops (an MLP's
    # second, fused along its hidden dimension: schedules.accel.mlp) keep
    # their M over two iterators too (a 1x1 convolution's pixels: one call
    # a tile, not one per row, whose queue held up the scalar core's next
    # commands), and a depthwise one before them its vector engine
    shares = [
        i
        for i in macs
        if i != first and pipeline.reduces_along_tiles(layer, layer.stmts[i])
    ]
    for i in shares:
        wide = [c for c in per_stmt[i] if c[1] and len(c[1][0]) > 1 and not c[2]]
        out[i] = [per_stmt[i][0], *wide[:1]]
    for i in macs if shares else ():
        if i < shares[-1] and depthwise(layer.stmts[i]):
            out[i] = [*out[i], *(c for c in per_stmt[i] if c[0] == "vector")]
            keep.add(i)
    paired = {}
    for i, s in enumerate(layer.stmts):
        into = folds_into(layer, s)
        if into is not None:
            c = layer.stmts.index(into)
            if c in keep:
                out[i], paired[c] = per_stmt[i], i
    return out, paired


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
    position (never by name: see :func:`schedules.accel.search.renamed`)."""
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
