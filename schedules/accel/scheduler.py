"""The accelerator-aware scheduler: loop order, tiling, fusion, placement, double
buffering and engine mapping for one hardware description.

1. The kernel is split into layers (:mod:`schedules.accel.layers`): statements fused on
   their leading iterators when that is legal (a contraction with its init and
   epilogue, the statements of a softmax row).
2. Per layer, :mod:`schedules.accel.search` enumerates structures (engine per
   statement: MAC array, vector unit or scalar core; MAC dimension groups; the
   order of the tile loops; which loops to tile) and evaluates every candidate tile
   size with the analytical model of :mod:`schedules.accel.model` (sympy
   expressions of DRAM traffic and engine time, evaluated over the grid with
   numpy), keeping the candidates whose buffers fit the engines' memory level.
3. The best candidate is applied with the public transformations — ``tile``,
   ``fuse``, ``permute``, then ``tensorize``/``map_vector`` and ``place`` — so the
   result is an ordinary scheduled Kernel whose history replays. Each array is
   placed below the innermost tile loop that moves its footprint (hoisted out of
   the others: a stationary operand is copied once per tile of the loops it
   depends on), with two slots when its copy runs more than once. With an SRAM
   level above the engines' one (datacenter's ``shared``), an operand the tiles
   re-read from DRAM is staged whole there, above the tile loops, when it fits
   and the model says that is not slower: DRAM is read once and the tiles' copies
   come from that level (multi-level tiling, two levels). If a candidate
   turns out not to fit (alignment, exact footprints), the next one is tried; a
   layer with no candidate stays DRAM-direct (:mod:`schedules.accel.assemble`).

Deterministic: candidates are ranked by predicted cycles, then DRAM bytes, then
buffer bytes, then structure text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from accelerator.hardware.spec import Spec
from polyc.ir.kernel import Kernel
from schedules.accel import (
    attention,
    bias,
    boundary,
    cache,
    fold,
    gather,
    groups,
    homes,
    inline,
    levels,
    mlp,
    pads,
    prefetch,
    search,
    share,
    space,
    terms,
)
from schedules.accel.assemble import LayerFailed, build
from schedules.accel.layers import (
    Layer,
    per_statement,
    split,
)
from schedules.accel.objective import keep as objective_keep
from schedules.accel.objective import rank as objective_rank
from schedules.legality import memory_dependences


@dataclass
class LayerChoice:
    """What the scheduler chose for one layer (for ``print(compiled)``)."""

    layer: Layer
    candidate: search.Candidate | None
    tried: int = 0
    note: str = ""
    # (kernel, spec) to build the traffic formula on demand; the kernel may be
    # a function that loads it (a reused compile, polyc.reuse)
    context: tuple = ()
    split_from: str = ""  # the fused group it was cut from, and why
    extra_cycles: float = 0.0  # predicted work outside the search (a gather DMA)
    # a layer run DRAM-direct on the scalar core: its instances as the runtime
    # charges them (:func:`schedules.accel.terms.direct_cycles`)
    direct_cycles: float = 0.0

    @property
    def formula(self) -> str:
        """DRAM traffic of the chosen candidate as a formula of its tile sizes."""
        if self.candidate is None or not self.context:
            return ""
        kernel, spec = self.context
        if not isinstance(kernel, Kernel):
            kernel = kernel()
        return search.formula(kernel, self.layer, spec, self.candidate)


@dataclass
class Choice:
    """The scheduler's result: the scheduled kernel and an explanation per layer.
    A reused compile (:mod:`polyc.reuse`) passes a function that loads the kernel
    on first use."""

    _kernel: Kernel | Callable[[], Kernel]
    config: str
    layers: list[LayerChoice] = field(default_factory=list)
    note: str = ""
    shared: list[str] = field(default_factory=list)  # layers split across engines

    @property
    def kernel(self) -> Kernel:
        if not isinstance(self._kernel, Kernel):
            self._kernel = self._kernel()
        return self._kernel

    @property
    def predicted_cycles(self) -> float:
        """The layers' predicted cycles, less what consecutive layers overlap
        (:func:`schedules.accel.boundary.program_cycles`)."""
        spec = next((lc.context[1] for lc in self.layers if lc.context), None)
        extra = sum(lc.extra_cycles + lc.direct_cycles for lc in self.layers)
        if spec is None:
            found = sum(lc.candidate.cycles for lc in self.layers if lc.candidate)
            return found + extra
        return extra + boundary.program_cycles(
            spec, [(lc.layer, lc.candidate) for lc in self.layers]
        )


def schedule(
    kernel: Kernel,
    spec: Spec,
    stage: bool = True,
    objective: str = "cycles",
    searched: Callable[[], object] | None = None,
) -> Choice:
    """Schedule ``kernel`` for ``spec`` (see the module docstring). Never raises for
    a valid kernel: a fused group that fits nothing is split into smaller layers;
    what still cannot be placed runs DRAM-direct, and the choice says why.
    ``stage=False`` keeps every layer in the engines' level alone (no operand
    staged in the SRAM level above it). ``objective`` orders each layer's
    candidates (:mod:`schedules.accel.objective`: cycles, energy or edp).
    ``searched`` is called once, when the layers are searched (the fusion
    groups' pieces, or else before the choice is applied): what follows runs
    in this process alone, so the caller's own work may take the other
    cores (the compile starts the runtime library's build there)."""
    if not _concrete(kernel):
        p = kernel.params[0]
        return Choice(
            kernel,
            spec.name,
            note=(
                f"the sizes are symbolic ({', '.join(kernel.params)}), so the whole "
                "kernel runs DRAM-direct: placement needs concrete sizes. Fix them "
                f"with kernel.specialize({p}=...) (polyc compile: --param {p}=VALUE "
                f"or -D {p}=VALUE)"
            ),
        )
    kernel = inline.inline_all(bias.defer_all(kernel, spec))
    folded = fold.fold_all(kernel)
    if folded is not kernel:  # what the folded copies leave may inline now
        kernel = inline.inline_all(folded)
    kernel = pads.inline_pads(kernel)
    kernel = pads.align_pads(kernel)
    if stage:  # intermediates on chip, in the SRAM level above the engines'
        kernel = homes.assign(kernel, spec)
    kernel, whole = per_statement(kernel)
    # gathers: layers of their own, as indirect DMA where they have its form
    kernel, gathered = gather.mark_all(kernel)
    whole.update(gathered)
    # a depthwise layer's channels shared by the vector unit and the MAC array
    # (but for the depthwise layers an MLP core fuses, where that pays more)
    kept = mlp.depthwise_kept(kernel, spec, stage)
    shared = share.plan(kernel, spec, stage, kept)
    kernel = shared.kernel
    found: dict = {}  # (children, depth) -> the layer's candidates
    # attentions first: how to fuse each is a choice among orders and cuts
    fused = attention.plan(kernel, spec, stage)
    kernel, wide, cuts = fused.kernel, fused.wide, set(fused.cuts)
    found.update(fused.searched)
    # then MLPs: fused along the hidden dimension where the model says it pays
    mlps = mlp.plan(kernel, spec, stage, frozenset(cuts), wide, kept)
    kernel, wide, cuts = mlps.kernel, mlps.wide, set(mlps.cuts)
    found = mlps.keep(found)
    found.update(mlps.searched)
    cuts |= shared.cuts(kernel)
    wide = (*wide, *shared.spans(kernel))
    # fusion across contractions where the cost model says it pays
    # the program's dependences (applying the choice needs them) are computed
    # while workers search the pieces
    searched = cache.once(searched)
    cuts |= groups.fusion_cuts(
        kernel,
        spec,
        stage,
        found,
        cuts,
        wide,
        meanwhile=lambda: _deps(kernel),
        then=searched,
    )
    # searched, its first candidates predicted, then built once: with later
    # layers' weights fetched ahead where the layers leave DRAM idle, if that
    # is predicted faster
    pick = first = _place(kernel, spec, stage, found, cuts, wide, whole, objective)
    cycles = _finish(first, spec, fused, mlps, shared).predicted_cycles
    ahead = stage and prefetch.ahead(kernel, spec, first.layers, first.chosen, cycles)
    if ahead:
        k2, marks = ahead
        moved = prefetch.shifted(k2, cuts, wide)
        again = _place(k2, spec, stage, {}, *moved, {**whole, **marks}, objective)
        other = _finish(again, spec, fused, mlps, shared).predicted_cycles
        if other < cycles * (1 - prefetch.margin()):
            pick, found = again, {}
    searched()  # (a layer split again later searches beside it)
    return _finish(
        _built(pick, spec, stage, found, objective), spec, fused, mlps, shared
    )


@dataclass
class _Placed:
    """One placement of the program: its layers, their candidates (the first
    of each, or those placed once ``result`` is built) and choices."""

    kernel: Kernel
    layers: list
    options: list
    choices: list
    chosen: list
    failed_groups: list
    cuts: set
    wide: tuple
    whole: dict
    result: Kernel | None = None


def _place(kernel, spec, stage, found, cuts, wide, whole, objective, failed=()):
    """The layers of ``kernel`` searched, fusing less where a fused group fits
    nothing (``found``: the candidates already searched, by layer; ``failed``:
    the groups already split, with why), each with its first candidate."""
    cuts = set(cuts)
    level = _on_chip(spec)
    failed_groups: list[tuple[frozenset, str]] = list(failed)
    while True:
        layers = split(kernel, cuts=frozenset(cuts), wide=wide)
        options, choices = _search(
            kernel, layers, spec, stage, found, whole, objective_keep(objective)
        )
        options = [
            objective_rank(opts, la, spec, objective)
            for opts, la in zip(options, layers)
        ]
        empty = [
            i for i, opts in enumerate(options) if not opts and _splittable(layers[i])
        ]
        if empty:
            layer = layers[empty[0]]
            why = f"no tiling of its {len(layer.stmts)} fused statements fits {level}"
            cuts.add(_cut(layer))
            failed_groups.append((frozenset(layer.children), f"{layer.name}: {why}"))
            continue
        split_here = _split_for_levels(kernel, layers, options, spec)
        if split_here is not None:
            i, conflict = split_here
            layer = layers[i]
            cuts.add(_conflict_cut(layer, conflict))
            why = (
                f"its buffer of {conflict.array} has no level all its engines reach "
                f"({conflict.because()})"
            )
            failed_groups.append((frozenset(layer.children), f"{layer.name}: {why}"))
            continue
        first = [opts[0] if opts else None for opts in options]
        return _Placed(
            kernel, layers, options, choices, first, failed_groups, cuts, wide, whole
        )


def _built(got: _Placed, spec, stage, found, objective) -> _Placed:
    """``got`` with its choice applied (the first candidates that place); a
    layer whose candidates all fail to place runs DRAM-direct, unless it fuses
    several statements: then it is split and the program searched again."""
    while True:
        result, chosen, failed = _build_first(
            got.kernel, got.layers, got.options, got.choices, spec
        )
        if failed is None:
            return dataclasses.replace(got, result=result, chosen=chosen)
        layer = got.layers[failed.index]
        why = f"no candidate fits once placed ({failed.reason})"
        got = _place(
            got.kernel,
            spec,
            stage,
            found,
            got.cuts | {_cut(layer)},
            got.wide,
            got.whole,
            objective,
            [*got.failed_groups, (frozenset(layer.children), f"{layer.name}: {why}")],
        )


def _finish(got: _Placed, spec, fused, mlps, shared) -> Choice:
    """The choice of a placement, each layer's explanation and prediction set."""
    kernel, layers, choices, result = got.kernel, got.layers, got.choices, got.result
    for i, cand in enumerate(got.chosen):
        choices[i].candidate = cand
        choices[i].tried = len(got.options[i])
        choices[i].context = (kernel, spec)
        mine = set(layers[i].children)
        for group, why in reversed(got.failed_groups):
            if mine < group:
                choices[i].split_from = why
                break
        fused.annotate(choices[i])
        mlps.annotate(choices[i])
    marked = kernel if result is None else result  # predicted before building
    gather.annotate(marked, spec, choices)
    prefetch.annotate(marked, spec, choices)
    for lc in choices:
        if lc.candidate is None and not lc.extra_cycles:  # DRAM-direct
            lc.direct_cycles = terms.direct_cycles(kernel, lc.layer, spec)
    return Choice(result, spec.name, choices, shared=list(shared.notes))


def _search(kernel, layers, spec, stage, found, whole, keep=8):
    """Candidates and an explanation per layer (searched once per layer shape);
    ``keep`` candidates per layer."""
    options: list[list[search.Candidate]] = []
    choices: list[LayerChoice] = []
    new = {}  # the layers not searched yet, at once (in parallel where it pays)
    for layer in layers:
        key = (layer.children, layer.depth)
        if not layer.opaque and key not in found:
            new.setdefault(key, layer)
    got = cache.search_layers(
        kernel,
        list(new.values()),
        spec,
        stage=stage,
        keep=keep,
        meanwhile=lambda: _deps(kernel),
    )
    found.update(zip(new, got))
    for layer in layers:
        if layer.opaque:
            options.append([])
            why = whole.get(layer.name, "it is not a loop nest of its own")
            note = f"its loop nest stays whole because {why}"
            choices.append(LayerChoice(layer, None, note=note))
            continue
        cands = found[(layer.children, layer.depth)]
        options.append(cands)
        level = _on_chip(spec)
        note = "" if cands else f"no tiling of the statement fits {level}"
        choices.append(LayerChoice(layer, None, note=note))
    return options, choices


def _deps(kernel: Kernel) -> None:
    """What applying the choice asks of the program's dependences, computed
    while workers search the layers: the memory-based ones, which its legality
    checks ask first (:func:`schedules.legality.memory_dependences`), and the
    exact flow, live-in and live-out, which placement reads. The exact anti
    and output dependences (isl's costlier analysis) are computed only if a
    check needs them."""
    memory_dependences(kernel)
    deps = kernel.deps
    deps.by_array("flow"), deps.live_in_accesses, deps.live_out_instances


def _build_first(kernel, layers, options, choices, spec):
    """``(kernel, chosen, None)`` for the first candidates that place; a layer whose
    candidates all fail runs DRAM-direct, unless it fuses several statements:
    then ``(None, None, failure)`` (the caller splits it)."""
    picks = [0 if opts else None for opts in options]
    while True:
        chosen = [options[i][p] if p is not None else None for i, p in enumerate(picks)]
        try:
            return build(kernel, layers, chosen, spec), chosen, None
        except LayerFailed as failed:
            i = failed.index
            if picks[i] + 1 < len(options[i]):
                picks[i] += 1
                continue
            if _splittable(layers[i]):
                return None, None, failed
            picks[i] = None
            choices[i].note = f"no candidate fits once placed ({failed.reason})"


def _split_for_levels(kernel, layers, options, spec):
    """``(index, conflict)`` of the first fused layer that keeps its contractions
    off the MAC array only because some buffer has no level both the array and
    the vector unit reach (one SRAM per operand role): split, the contraction
    runs on the array and the buffer goes through DRAM between the two."""
    for i, layer in enumerate(layers):
        if not _splittable(layer) or not options[i]:
            continue
        if any("mac" in dict(c.structure.engine).values() for c in options[i]):
            continue
        conflict = space.level_conflict(kernel, layer, spec)
        if conflict is not None:
            return i, conflict
    return None


def _conflict_cut(layer: Layer, conflict) -> int:
    """Where to split a layer over a level conflict: before the last statement
    that uses the conflicting buffer (the rest is split again if it must)."""
    names = [s.name for s in layer.stmts]
    last = max(names.index(u.stmt) for u in conflict.uses)
    return layer.children[min(max(last, 1), len(layer.children) - 1)]


def _on_chip(spec: Spec) -> str:
    """The levels the engines work in, for explanations (``sram``, or ``inbuf,
    wbuf, outbuf`` with one SRAM per operand role)."""
    reached = levels.reached(spec)
    return ", ".join(m.name for m in spec.sram_levels if m.name in reached)


def _splittable(layer: Layer) -> bool:
    return not layer.opaque and len(layer.children) > 1


def _cut(layer: Layer) -> int:
    """Where to split a fused layer that fits nothing: the middle, but never
    between a contraction and the init just before it."""
    mid = len(layer.stmts) // 2
    before, at = layer.stmts[mid - 1], layer.stmts[mid]
    if at.reduction is not None and before.target.array == at.target.array:
        mid = mid - 1 if mid > 1 else mid + 1
    return layer.children[min(mid, len(layer.children) - 1)]


def _concrete(kernel: Kernel) -> bool:
    """Placement needs concrete sizes: a kernel without parameters."""
    return not kernel.params
