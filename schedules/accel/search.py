"""The search of the accelerator scheduler: per layer, the structures worth trying
(:mod:`schedules.accel.space`: engine per statement, MAC dimension groups,
tile-loop order, which loops to tile) and the best tile sizes of each under the
cost model (:mod:`schedules.accel.model`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np
import sympy as sp

from accelerator.hardware.spec import Spec
from polyc.ir.kernel import (
    Kernel,
    Statement,
)
from polyc.ir.macmap import Refusal
from schedules.accel import models
from schedules.accel.evaluate import candidates
from schedules.accel.layers import Layer
from schedules.accel.memplan import ZERO_BYTES
from schedules.accel.model import LayerModel
from schedules.accel.ranking import Ranked, searched
from schedules.accel.space import (
    engine_level,
    engines,
    folds_into,
    may_leave,
    structures,
    upper_level,
)
from schedules.accel.split import split_groups
from schedules.accel.structure import STREAM_SLOTS, Structure
from schedules.accel.tilevars import PrivateTile, SharedTile, TileVar

#: at most this many candidate points per structure
MAX_POINTS = 30000
#: predictions within this fraction of each other count as a tie, broken by fewer
#: DMA calls (latency-bound small copies are fragile), then more slots
TIE = 0.01
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
EDGES = (
    "fill",
    "fill_bytes",
    "fill_calls",
    "tail",
    "tail_bytes",
    "tail_calls",
    "issues",
)


def edge_figures(cand: Candidate | None) -> dict[str, float] | None:
    """A candidate's :attr:`Candidate.edges` by their :data:`EDGES` names;
    None for no candidate or one without them (an older search cache's)."""
    if cand is None or len(cand.edges) != len(EDGES):
        return None
    return dict(zip(EDGES, cand.edges))


def search(
    kernel: Kernel, layer: Layer, spec: Spec, keep: int = 8, stage: bool = True
) -> list[Candidate]:
    """The ``keep`` best candidates that fit, best first (deterministic). With
    ``stage`` (and an SRAM level above the engines'), operands re-read from DRAM
    across tiles may be staged whole in that level (see :func:`_best`)."""
    spec = banked(kernel, layer, spec)
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
            ("floor",),
            lambda: model.floor(_points(kernel, layer, st, model)[1]),
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
    and below the intermediates' homes (as the memory planner plans). A layer
    that reads a weight fetched ahead plans below the homes of the weights
    fetched ahead live in it (its own and those whose span covers it); the
    other layers of such a span plan as before, the fetch's room having been
    chosen above their buffers (:func:`schedules.accel.prefetch.ahead`)."""
    from schedules.accel.memplan import below_homes

    halo = may_leave(kernel, layer)
    top = _ahead_ceiling(kernel, layer)
    out = {}
    for m in below_homes(spec, kernel, ahead=False).sram_levels:
        level = spec.level_index(m.name)
        room = min(m.capacity_bytes, top.get(level, m.capacity_bytes))
        if halo:
            room -= 2 * max(ZERO_BYTES, m.alignment_bytes)
        out[level] = room
    return out


def banked(kernel: Kernel, layer: Layer, spec: Spec) -> Spec:
    """``spec`` with each banked SRAM level's ``usable_banks`` set where the
    memory planner gives the layer fewer whole banks than the level has
    (:func:`schedules.accel.memplan.replan`: below the homes that live for
    the whole kernel, and below the home of a weight fetched in chunks whose
    span covers the layer), at least one. The banks' bound
    (:mod:`schedules.accel.banks`) shares those among a MAC call's operands:
    in hf-convnext float16 on edge-npu the next stage's 512 KiB weight, fetched
    ahead, left the layers of its span bank 0 alone, and a fused MLP's first
    linear layer there ran its calls at 96 cycles where the model, its three
    operands in three banks, said 64. ``spec`` itself where nothing is cut."""
    from schedules.accel.layers import schedule_text

    key = ("search.banked", schedule_text(kernel), layer.children, spec)
    return kernel.analysis(key, lambda k: _banked(k, layer, spec))


def _banked(kernel: Kernel, layer: Layer, spec: Spec) -> Spec:
    from schedules.accel.layers import schedule_text
    from schedules.accel.memplan import below_live_homes

    # the memory planner's ends, per level and per top-level position (once
    # per program: every layer of it asks)
    cut, ceiling = kernel.analysis(
        ("search.live_homes", schedule_text(kernel), spec),
        lambda k: below_live_homes(spec, k.schedule, k),
    )
    memory = list(spec.memory)
    for index, m in enumerate(spec.memory):
        if m.kind != "sram" or m.banks <= 1:
            continue
        ends = [ceiling[(index, p)] for p in layer.children if (index, p) in ceiling]
        end = min([cut.memory[index].capacity_bytes, *ends])
        room = max(1, end // m.bank_size)
        if room < m.banks:
            # a part of a bank counts for the DMA where a slot fits in it:
            # hf-mobilenetv2's layers below its weights fetched ahead have
            # half a bank beside a whole one (not hf-convnext's 768 bytes)
            part = end > room * m.bank_size + m.bank_size // 4
            memory[index] = replace(m, usable_banks=room, usable_part=part)
    if memory == list(spec.memory):
        return spec
    return replace(spec, memory=tuple(memory))


def _ahead_ceiling(kernel: Kernel, layer: Layer) -> dict[int, int]:
    """Per level, the lowest home of a weight fetched ahead that is live in
    ``layer`` when the layer reads one (else nothing)."""
    from polyc.ir import prefetches

    reads = {ld.array for s in layer.stmts for ld in s.reads}
    if not reads & {c for _, c in prefetches.copies(kernel).values()}:
        return {}
    from schedules import stree
    from schedules.accel.layers import top_children

    tops = [set(stree.statements(n)) for n in top_children(kernel)]
    out: dict[int, int] = {}
    for (level, i), offset in prefetches.ceilings(kernel, tops).items():
        if i in layer.children:
            out[level] = min(out.get(level, offset), offset)
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
    variables' values, the last fastest), and per symbol its column; read-only,
    built once per model (the structures that share it differ in their slots
    alone, which change no point; its floor asks first, its ranking next)."""
    return model._once(("points",), lambda: _grid(kernel, layer, st, model))


def _grid(kernel, layer, st: Structure, model: LayerModel):
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
        axes = np.meshgrid(
            *(np.asarray(v, dtype=float) for v in values), indexing="ij", copy=False
        )
        mesh = np.stack(axes, axis=-1).reshape(-1, len(values))
        mesh.flags.writeable = False  # shared by the model's structures
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
