"""Fused MLP: contraction, element-wise epilogue and contraction, tile by tile
along the hidden dimension.

A transformer MLP ``fc2(act(fc1(x)))`` as the frontends write it is a chain of
top-level loop nests::

    S0: h[b, t, j] = 0                          (fc1's init, its bias deferred)
    S1: h[b, t, j] += x[b, t, k] * w1[j, k]     (MAC array)
    S2: a[b, t, j] = gelu(h[b, t, j] + b1[j])   (vector unit)
    S3: out[b, t, j] = b2[j]                    (fc2's init)
    S4: out[b, t, j] += a[b, t, k] * w2[j, k]   (MAC array)

:func:`schedules.accel.layers.split` fuses statements on their leading
iterators, so it makes two layers: ``{S0, S1, S2}`` tiled over the hidden
columns ``j``, then ``{S3, S4}``; the vector unit runs GELU while the MAC array
idles, and the weights of fc2 wait for all of fc1. Its *core* (found by
dataflow, never by names: a contraction whose operand an element-wise chain
computes from the nearest contraction before it) can instead run fused along
the hidden dimension ``h`` (fc1's output columns, the activation's index,
fc2's reduction index)::

    S3: out[b, t, j] = b2[j]                    (moved before the core)
    for b, t, h:                                (the layer's tile loops)
      S0, S1: h[b, t, h] = x[b, t, :] . w1[h, :]       tile h of fc1
      S2:     a[b, t, h] = gelu(h[b, t, h] + b1[h])    its epilogue
      S4:     out[b, t, :] += a[b, t, h] . w2[:, h]    tile h's share of fc2

:func:`rewrite` makes it so: fc2's iterators reordered so that its reduction
index comes right after the ones it shares (:func:`schedules.accel.reindex.
permute_iterators`, checked) and its init moved before the core
(:func:`schedules.fusion.reorder`, checked); then ``split`` fuses the core on
``(b, t, h)``, the output stays on chip across the ``h`` loop and the weight
tiles of w1 and w2 stream together. The layer search then also tries fc1 a
tile ahead (:mod:`schedules.accel.pipeline`): the MAC array runs fc1(h + 1) and
fc2(h) while the vector unit runs the activation of h.

A gated MLP (Llama's ``down(silu(gate(x)) * up(x))``) has two first
contractions; fused, the gate runs a tile ahead and the up projection with the
rest, and their input ``x``, the same box in every hidden tile, is one buffer
above the pipelined loop (:func:`schedules.accel.pipeline.read_apart`), as the
cost model holds it.

A core written on rows flattened to 2-D (GPT-2's ``Conv1D`` is ``addmm`` on
``x.view(-1, d)``, its activation on the 3-D view) reads the activation as
``a[0, t, k]``: the unit batch dimension is skipped when the core is found,
and the element-wise loop nests run it innermost (permuted, checked), so
that they fuse with the contractions on (rows, hidden).

An inverted residual block (MobileNetV2's expansion, ReLU6, depthwise 3x3,
ReLU6 and projection) is a core too: a depthwise convolution computes each
channel from its own channel, so on the way back from the projection it counts
as element-wise (:attr:`Core.depthwise`), and the projection reads its input
at ``h + rh`` with a filter row ``rh`` that is 0 alone (a plain ``h``). Fused
on (batch, hidden channel), each tile of hidden channels runs the expansion
(a tile ahead), the depthwise convolution on the vector unit and its share of
the projection, its rows and columns whole, and the expanded tensors never
leave the chip. Such a depthwise layer can also be split across the MAC array
and the vector unit (:mod:`schedules.accel.share`), which it cannot be once
fused: :func:`depthwise_kept` decides before that split, against the layers
as written less what the split would save.

Whether to fuse is the cost model's choice (:func:`plan`): per core, the
layers covering its loop nests are searched both ways, and the fused form is
kept only when the program's predicted cycles there are lower.
``print(compiled)`` says which and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from accelerator.hardware.spec import Spec
from polyc.errors import PolycError
from polyc.ir.affine import Aff, names_of
from polyc.ir.kernel import Kernel, Statement
from schedules import stree
from schedules.accel import boundary, cache
from schedules.accel.groups import _contraction_starts, _window_starts
from schedules.accel.inline import plain_index
from schedules.accel.layers import lone_statements, own_part, split, top_children
from schedules.accel.reindex import permute_iterators
from schedules.accel.tensorize import contraction, depthwise
from schedules.common import step
from schedules.fusion import _reordered, reorder

#: the fused form must be predicted faster by this fraction to be kept
TIE = 0.01
#: ... and a core through a depthwise convolution by this one: the model does
#: not see every stall its program adds (hf-mobilenetv2 on datacenter, float32:
#: 61,565 cycles with the cores fused at 1%, 60,030 at 5%, 59,541 with none)
DEPTHWISE_MARGIN = 0.05


@dataclass(frozen=True)
class Core:
    """One MLP at the current top-level positions: ``window`` (its loop nests,
    the second contraction's init among them), ``init`` (that init's
    statement, or None), the first contractions (``first``), the second
    (``second``) and its iterators in the fused order (``order``)."""

    window: tuple[int, ...]
    init: str | None
    first: tuple[str, ...]
    second: str
    order: tuple[str, ...]
    # depthwise convolutions between the first contractions and the second,
    # which run channel by channel along the hidden dimension (an inverted
    # residual block: expand, depthwise, project)
    depthwise: tuple[str, ...] = ()

    @property
    def fused(self) -> tuple[int, ...]:
        """The core's positions once rewritten (its init moved before them)."""
        return self.window[1:] if self.init else self.window


@dataclass(frozen=True)
class Plan:
    """The scheduler's start for a program with MLPs: the program (rewritten
    where fusing won), the fused cores' positions (``wide``: never cut inside)
    and the cuts around them, the searches made on the chosen program
    (``(children, depth)`` -> candidates), and a note per fused or unfused
    core, keyed by its second contraction's statement."""

    kernel: Kernel
    wide: tuple[tuple[int, ...], ...] = ()
    cuts: frozenset[int] = frozenset()
    searched: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    moved: frozenset[int] = frozenset()  # positions that hold other statements

    def keep(self, found: dict) -> dict:
        """The searches of ``found`` (by ``(children, depth)``) still valid on
        the plan's program: none of a layer over a rewritten core's positions."""
        return {k: v for k, v in found.items() if not set(k[0]) & self.moved}

    def annotate(self, lc) -> None:
        """Put on ``lc`` (a ``LayerChoice``) the note of the core whose second
        contraction is its last one with a note (a layer that fuses a core
        also holds the first contraction, the second of the core before)."""
        if lc.candidate is None or lc.note:
            return
        for s in reversed(lc.layer.stmts):
            if s.name in self.notes:
                lc.note = self.notes[s.name]
                return


def plan(
    kernel: Kernel,
    spec: Spec,
    stage: bool,
    cuts: frozenset[int] = frozenset(),
    wide: tuple[tuple[int, ...], ...] = (),
    kept: frozenset[str] = frozenset(),
) -> Plan:
    """Each MLP core of ``kernel`` fused along its hidden dimension where the
    cost model predicts it faster (see the module docstring). ``cuts`` and
    ``wide`` are the fused attentions'; of the cores through a depthwise
    convolution, only those whose depthwise convolutions are in ``kept``
    (:func:`depthwise_kept`) are tried. A core whose rewrite is refused (a
    dependence, a layer that does not fuse) stays as written."""
    memo: dict = {}  # (statement names, depth) -> candidates
    notes: dict = {}
    moved: set[int] = set()
    out_wide, out_cuts = list(wide), set(cuts)
    for core in cores(kernel):
        if not set(core.depthwise) <= kept:
            continue
        weighed = _weigh(kernel, spec, stage, core, cuts, wide, memo)
        if weighed is None:
            continue
        fused, mine, mine_cuts, together, apart = weighed
        what = f"{'+'.join(core.first)}..{core.second}"
        if together < apart * (1 - TIE):
            kernel, out_wide = fused, list(mine)
            moved |= set(core.window)
            out_cuts = set(mine_cuts) | (out_cuts - cuts)
            cuts, wide = frozenset(out_cuts), tuple(out_wide)
            notes[core.second] = (
                f"MLP {what}: fused along the hidden dimension (fc1 a tile "
                f"ahead where that wins), predicted {together:,.0f} cycles "
                f"(against {apart:,.0f} as written)"
            )
        else:
            notes[core.second] = (
                f"MLP {what}: left as written, predicted {apart:,.0f} cycles "
                f"(against {_cycles(together)} fused along the hidden dimension)"
            )
    searched = {}
    for layer in split(kernel, cuts=frozenset(out_cuts), wide=tuple(out_wide)):
        key = (tuple(s.name for s in layer.stmts), layer.depth)
        if key in memo:
            searched[(layer.children, layer.depth)] = memo[key]
    return Plan(
        kernel,
        tuple(out_wide),
        frozenset(out_cuts),
        searched,
        notes,
        frozenset(moved),
    )


def _weigh(kernel, spec, stage, core: Core, cuts, wide, memo: dict):
    """``(fused, wide, cuts, together, apart)``: ``kernel`` rewritten to fuse
    ``core`` along its hidden dimension, the fused core's positions and cuts
    (with ``wide`` and ``cuts``, the fused attentions'; not the cuts a
    depthwise core is compared with), and the predicted
    cycles of the layers the core spans fused and as written (the better of
    the ways :func:`plan` compares); None where the core is not fused (it meets
    an attention, its rewrite is refused, or its loop nests do not fuse on the
    hidden dimension). The searches go into ``memo``."""
    ways = _ways(kernel, core, cuts, wide)
    if ways is None:
        return None
    # the layers of every way at once (in workers: one set for all)
    cache.search_into(memo, _searched(ways[3]), spec, stage)
    return _judged(spec, memo, ways)


def _ways(kernel, core: Core, cuts, wide):
    """``(fused, wide, cuts, spans)``: :func:`_weigh`'s first three, and the
    ways it compares, each ``(kernel, layers)`` (the layers None where that
    way does not split so), the fused one last; None where :func:`_weigh`
    answers None."""
    if any(set(core.window) & set(w) for w in wide) or set(core.window) & cuts:
        return None
    fused = rewrite(kernel, core)
    if fused is None:
        return None
    mine = (*wide, core.fused)
    mine_cuts = kept_cuts = frozenset(cuts | {core.fused[0], core.fused[-1] + 1})
    if core.depthwise:
        # a convolution's layers as the fusion groups will have them, cut before
        # each contraction, both ways: fused wider, on their batch loop alone,
        # the layers around the core are slower and many times costlier to
        # search (hf-mobilenetv2 compiled in 86 s on datacenter, 24 s before
        # its blocks were cores)
        inside = set(core.fused[1:])
        mine_cuts |= _starts(fused, cuts, mine) - inside
        cuts = frozenset(cuts) | _starts(kernel, cuts, wide)
    layers = split(fused, cuts=mine_cuts, wide=mine)
    if not any(set(core.fused) <= set(layer.children) for layer in layers):
        return None  # the core's loop nests do not fuse on the hidden dimension
    # the positions of every layer either way that holds one of the core's:
    # a layer fused across the core (narrow linear layers on few rows) is
    # compared whole with what replaces it
    written = split(kernel, cuts=frozenset(cuts), wide=wide)
    span = _closure(core.window, written, layers)
    # as written, the fusion-group search (schedules.accel.groups) may yet
    # cut the span's layers before each contraction: the core is compared
    # with the better of the span fused on its leading iterators and cut so
    # (hf-convnext's last MLP, 2 MB of weights: 205,862 cycles predicted
    # fused wide, fc1 and fc2 apart about 145,000; fused along the hidden
    # dimension 203,008)
    # (cut where each layer starts too, or not: the search may merge a
    # piece into the next, which pays in hf-llama's layers on datacenter)
    ways = [
        (kernel, frozenset(cuts) | starts, wide)
        for starts in (set(), *cut_apart(written, span))
    ]
    if core.depthwise:
        ways = ways[:1]  # cut before each contraction already
    ways.append((fused, mine_cuts, mine))
    spans = [(k, _in_span(k, c, w, span)) for k, c, w in ways]
    return fused, mine, kept_cuts, spans


def _searched(spans) -> list:
    """The ``(kernel, layers)`` of ``spans`` (:func:`_ways`) to search."""
    return [(k, ls) for k, ls in spans if ls is not None]


def _judged(spec, memo: dict, ways) -> tuple:
    """:func:`_weigh`'s answer from ``ways`` (:func:`_ways`), its layers
    searched into ``memo``."""
    fused, mine, kept_cuts, spans = ways
    apart = min(_predicted(spec, memo, layers) for _, layers in spans[:-1])
    together = _predicted(spec, memo, spans[-1][1])
    return fused, mine, kept_cuts, together, apart


def _starts(kernel: Kernel, cuts, wide) -> frozenset[int]:
    """The top-level positions where a layer of ``kernel`` starts when the
    fusion groups cut before each contraction and windowed read
    (:func:`schedules.accel.groups.fusion_cuts`' pieces)."""
    layers = split(kernel, cuts=frozenset(cuts), wide=wide)
    return frozenset(
        p
        for layer in layers
        for p in {
            layer.children[0],
            *_contraction_starts(layer),
            *_window_starts(layer),
        }
    )


def cut_apart(written, span: set[int]) -> tuple[set[int], set[int]]:
    """Two sets of top-level positions at which the fusion-group search may cut
    the layers ``written`` that hold a position of ``span``: before each
    contraction and each windowed read but a layer's first
    (:func:`schedules.accel.groups.fusion_cuts`), and those and where each
    layer starts, which that search keeps. With the first alone, a layer cut before its second
    contraction merged into the next one (hf-convnext's fc2 with the next
    block's depthwise convolution and layer norm, 120,202 cycles predicted: the
    MLP fused along its hidden dimension, at 82,868 where fc1 and fc2 apart ran
    53,000, won against it; hf-convnext on edge-npu 538,842 -> 559,291
    cycles)."""
    mine = [layer for layer in written if set(layer.children) & span]
    starts = {
        p
        for layer in mine
        for p in sorted({*_contraction_starts(layer), *_window_starts(layer)})[1:]
    }
    return starts, starts | {layer.children[0] for layer in mine}


def _closure(window, *splits) -> set[int]:
    """The top-level positions of the layers (of any of ``splits``) that hold a
    position of ``window``, and so on until no layer adds one."""
    out = set(window)
    while True:
        more = {
            p
            for layers in splits
            for layer in layers
            if set(layer.children) & out
            for p in layer.children
        }
        if more <= out:
            return out
        out |= more


def _cycles(c: float) -> str:
    return "does not fit" if c == float("inf") else f"{c:,.0f}"


def _in_span(kernel, cuts, wide, window) -> list | None:
    """The layers of ``kernel`` that hold a loop nest of ``window``, in order;
    None when one of them is opaque (it fits no search)."""
    layers = [
        layer
        for layer in split(kernel, cuts=frozenset(cuts), wide=wide)
        if set(layer.children) & set(window)
    ]
    return None if any(layer.opaque for layer in layers) else layers


def _predicted(spec, memo, layers) -> float:
    """Predicted cycles of ``layers`` (:func:`_in_span`'s, searched into
    ``memo``), in order, less what consecutive ones overlap at the previous
    one's tail (:func:`schedules.accel.boundary.program_cycles`, as the
    fusion search compares pieces); infinite when there are none to search
    (an opaque one) or one of them fits nothing.

    Not the windows of the layers issued at once: they favour the variant with
    a small layer before the fused core, while what the layers as written
    overlap on other engines has no credit at all (hf-llama's up projection
    under the gate projection's SiLU, about 330 cycles a boundary on
    datacenter in float32): with them, hf-llama's MLPs were fused, predicted
    4% faster, and ran 16% slower (18,714 -> 21,666 cycles); the fused core's
    own prediction is 25% short there."""
    if layers is None:
        return float("inf")
    chosen = []
    for layer in layers:
        found = memo[cache.memo_key(layer)]
        if not found:
            return float("inf")
        chosen.append((layer, found[0]))
    return boundary.program_cycles(spec, chosen, windows=False)


def rewrite(kernel: Kernel, core: Core) -> Kernel | None:
    """``kernel`` with ``core`` made ready to fuse along its hidden dimension:
    its second contraction's iterators in the fused order and its init moved
    before the core's first loop nest (each step checked against the exact
    dependences and recorded); None when a step is refused."""
    try:
        k = permute_iterators(kernel, core.second, core.order)
        rank = len(kernel.statement(core.first[0]).target.index)
        for p in core.window:
            s = kernel.statement(_name(kernel, p))
            if s.name == core.init or contraction(s) is not None:
                continue
            if len(s.iterators) > rank:  # a view added unit dimensions
                unit = _unit(s)
                order = (*(i for i in s.iterators if i not in unit), *unit)
                k = permute_iterators(k, s.name, order)
        if core.init is not None:
            names = [_name(k, p) for p in core.window]
            at = names.index(core.init)
            k = _reorder(k, [core.init, *names[:at], *names[at + 1 :]], core.window)
    except PolycError:
        return None
    return k


def _reorder(kernel: Kernel, order: list[str], window: tuple[int, ...]) -> Kernel:
    """``reorder(kernel, order)`` of the children at ``window``, checked on
    their own dependences when they are a part of a program in its program
    order (:func:`schedules.accel.layers.own_part`): they take each other's
    places, so a dependence with one end outside keeps its order, and the
    part's dependences are the program's between them. The same check, the
    dataflow of a few loop nests instead of the network's.

    Raises:
        PolycError: as :func:`schedules.fusion.reorder` does.
    """
    part = own_part(kernel, window)
    if part is None:
        return reorder(kernel, order)
    reorder(part, order)  # raises when the new order breaks a dependence
    new, _ = _reordered(kernel, order, "reorder")
    return kernel.with_schedule(stree.to_isl(new), step("reorder", tuple(order)))


def _unit(s: Statement) -> tuple[str, ...]:
    """The iterators of ``s`` that take one value."""
    out = []
    dom = s.domain
    for d, it in enumerate(s.iterators):
        line = dom.project_out(isl.dim_type.set, d + 1, len(s.iterators) - d - 1)
        line = line.project_out(isl.dim_type.set, 0, d)
        if line.is_singleton():
            out.append(it)
    return tuple(out)


def _name(kernel: Kernel, pos: int) -> str:
    return stree.statements(top_children(kernel)[pos])[0]


def depthwise_kept(kernel: Kernel, spec: Spec, stage: bool) -> frozenset[str]:
    """The depthwise convolutions of ``kernel`` to keep whole for :func:`plan`
    to fuse: those of each core that runs one along its hidden dimension (an
    inverted residual block, :attr:`Core.depthwise`) where the fused core is
    predicted faster than the layers as written, less what
    :func:`schedules.accel.share.plan` would save by splitting the depthwise
    layers across the two engines (which it can only do apart). Decided before
    that split, which leaves these whole."""
    from schedules.accel import share

    keep: set[str] = set()
    memo: dict = {}
    weighed = []
    for core in cores(kernel):
        con = contraction(kernel.statement(core.second))
        if not core.depthwise or con.operand not in spec.mac_array.dtypes:
            continue  # (without the MAC array every statement is the vector unit's)
        ways = _ways(kernel, core, frozenset(), ())
        if ways is not None:
            weighed.append((core, ways))
    # every core's layers in one set of workers (one set a core left a worker
    # idle at the end of each: hf-mobilenetv2 has 17 blocks), while this
    # process bounds what splitting each depthwise layer would save (the
    # layer searched unsplit, no split searched)
    bound: dict[str, float] = {}

    def bounds() -> None:
        for d in (d for core, _ in weighed for d in core.depthwise):
            bound[d] = share.saving_bound(kernel, d, spec, stage)

    programs = [p for _, ways in weighed for p in _searched(ways[3])]
    cache.search_into(memo, programs, spec, stage, meanwhile=bounds)
    for core, ways in weighed:
        together, apart = _judged(spec, memo, ways)[3:]
        if together >= apart * (1 - DEPTHWISE_MARGIN):
            continue  # slower fused, however much a split saves
        most = sum(bound[d] for d in core.depthwise)
        if together >= (apart - most) * (1 - DEPTHWISE_MARGIN):
            # the splits are searched only where they may decide (they took
            # 7.6 of hf-mobilenetv2's 17 s of scheduling on edge-npu when
            # each was)
            cut = sum(share.saving(kernel, d, spec, stage) for d in core.depthwise)
            if together >= (apart - cut) * (1 - DEPTHWISE_MARGIN):
                continue
        keep |= set(core.depthwise)
    return frozenset(keep)


def cores(kernel: Kernel) -> list[Core]:
    """The MLP cores of ``kernel``, in program order (see the module docstring):
    a contraction (the second) whose operand an element-wise chain of loop
    nests computes from the contractions before it (the first), every loop nest
    between the first one's init and the second one in the chain, the second
    reducing over the dimensions of that operand."""
    items = lone_statements(kernel)
    out = []
    for c, s in enumerate(items):
        found = _found(items, c) if s is not None else None
        if found is not None:
            out.append(found)
    return out


def _found(items, c: int) -> Core | None:
    """The MLP whose second contraction is at position ``c``, or None."""
    second = items[c]
    con = contraction(second)
    if con is None:
        return None
    for operand in (con.a, con.b):
        ld = second.reads[operand]
        lead = _plain(_without(ld.index, _zero(second)))
        if lead is None or not any(con.roles[it] == "k" for it in lead):
            continue
        through: list[int] = []
        members = _chain(items, c, ld.array, through)
        if members is None:
            continue
        if not through and _plain(ld.index) is None:
            # a 1x1 convolution's chain with no depthwise one in it (a
            # projection, a residual add and the next expansion): weighed as a
            # core, its layers fused on the batch alone cost a search each
            # (hf-mobilenetv2 on datacenter: 188 searches, 102 without) and
            # none was fused
            continue
        init = _init(items, c, second)
        lo = min(members if init is None else members | {init})
        window = tuple(range(lo, c + 1))
        if any(p not in members and p not in (init, c) for p in window):
            continue
        order = (*lead, *(it for it in second.iterators if it not in lead))
        first = tuple(
            items[p].name
            for p in sorted(members)
            if contraction(items[p]) is not None and p not in through
        )
        init_name = items[init].name if init is not None else None
        depthwise = tuple(items[p].name for p in sorted(through))
        return Core(window, init_name, first, second.name, order, depthwise)
    return None


def _plain(index) -> tuple[str, ...] | None:
    """The iterators of an access indexed by distinct iterators, one per
    dimension, each plain; else None."""
    # a unit dimension read at 0 (a view that drops the batch) is skipped
    return plain_index([a for a in index if a.terms or a.const])


def _without(index, zero: tuple[str, ...]):
    """``index`` with the iterators ``zero`` (each of them 0) dropped from the
    sums they are in: a 1x1 convolution reads its input at ``h + rh`` with a
    filter row ``rh`` that runs over 0 alone, which is a plain ``h``."""
    if not zero:
        return index
    out = []
    for a in index:
        if len(a.terms) > 1:
            a = Aff({t: c for t, c in a.terms if t not in zero}, a.const)
        out.append(a)
    return out


def _zero(s: Statement) -> tuple[str, ...]:
    """The iterators of ``s`` that take the value 0 alone."""
    dom = s.domain
    out = []
    for it in _unit(s):
        at0 = dom.fix_val(isl.dim_type.set, s.iterators.index(it), 0)
        if at0.is_equal(dom):
            out.append(it)
    return tuple(out)


def _writers(items, end: int, array: str) -> list[int]:
    return [
        p for p in range(end) if items[p] is not None and items[p].target.array == array
    ]


def _chain(items, c: int, array: str, through: list[int]) -> set[int] | None:
    """The positions of the element-wise loop nests that compute ``array`` (read
    by the second contraction at ``c``) from contractions, with those
    contractions and their inits; None unless there is at least one
    element-wise statement and one contraction, or two (a gated MLP). What
    other statements write counts as an input of the core. A depthwise
    convolution on the way counts as element-wise (its position is added to
    ``through``)."""
    members: set[int] = set()
    todo, seen, elementwise, firsts = [array], set(), 0, 0
    while todo:
        a = todo.pop()
        if a in seen:
            continue
        seen.add(a)
        writers = _writers(items, c, a)
        if not writers:
            continue  # an input of the core (x, a weight, a bias)
        last = items[writers[-1]]
        source = _depthwise_input(last)
        if source is not None and a != array:
            # channel by channel, as an element-wise op: its taps stay whole
            init = [p for p in writers[:-1] if not _reads(items[p], a)]
            if len(writers) > 2 or len(init) != len(writers) - 1:
                return None
            members |= set(writers)
            elementwise += 1
            through.append(writers[-1])
            todo.append(source)
            continue
        if contraction(last) is not None:
            if a == array:
                return None  # the second contraction reads a product directly
            init = [p for p in writers[:-1] if not _reads(items[p], a)]
            if len(writers) > 2 or len(init) != len(writers) - 1:
                return None
            members |= set(writers)
            firsts += 1
            continue
        if len(writers) != 1 or last.reduction is not None or _reads(last, a):
            continue  # not element-wise: an input of the core
        members.add(writers[0])
        elementwise += 1
        todo += [ld.array for ld in last.reads]
    # one first contraction, or two: a gated MLP (Llama's
    # ``down(act(gate(x)) * up(x))``)
    if not elementwise or firsts not in (1, 2):
        return None
    return members


def _depthwise_input(stmt: Statement) -> str | None:
    """The array a depthwise convolution ``stmt`` convolves (each output
    channel reads its own input channel: no N iterator, the channel a batch
    iterator of both), or None."""
    if not depthwise(stmt):
        return None
    con = contraction(stmt)
    if not con.members("batch"):
        return None
    weights = [
        ld.array
        for ld in (stmt.reads[con.a], stmt.reads[con.b])
        if not any(con.roles[it] == "m" for it in names_of(ld.index))
    ]
    inputs = [
        ld.array
        for ld in (stmt.reads[con.a], stmt.reads[con.b])
        if ld.array not in weights
    ]
    return inputs[0] if len(inputs) == 1 else None


def _reads(stmt: Statement, array: str) -> bool:
    return any(ld.array == array for ld in stmt.reads)


def _init(items, c: int, second: Statement) -> int | None:
    """The position of the second contraction's init: the last loop nest
    before it that writes its target without reading it."""
    target = second.target.array
    for p in range(c - 1, -1, -1):
        s = items[p]
        if s is None or s.target.array != target:
            continue
        if any(ld.array == target for ld in s.reads):
            return None
        return p
    return None
