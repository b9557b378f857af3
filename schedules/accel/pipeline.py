"""Software pipelining of a layer's tile loop: a producer one tile ahead.

Every engine runs its commands in issue order and the scalar core issues them in
program order. In a fused attention, per tile of queries, QK^T runs on the MAC
array, the softmax on the vector unit, PV on the MAC array again: the next
tile's QK^T is issued after this tile's PV, so it queues behind PV on the array,
PV waits for the softmax, and the two engines take turns. Shifting the
statements up to the first contraction (QK^T and its init) one iteration
earlier along the innermost tiled loop shared by the layer (a
:func:`schedules.bands.shift` of the fused band, checked against the exact
dependences and recorded) issues tile t + 1's QK^T before tile t's PV::

    for t in 0..T-1:                 for t in -1..T-1:
      QK(t)                            QK(t + 1)      # if t + 1 < T
      softmax(t)            ->         softmax(t)     # if t >= 0
      PV(t)                            PV(t)          # if t >= 0

so the array computes QK(t + 1) while the vector unit runs softmax(t). What the
shifted statements write and the others read (the scores) is placed above the
pipelined loop (:func:`lifted`): tile t + 1's scores then sit beside tile t's in
one buffer and no value crosses an iteration through DRAM.
"""

from __future__ import annotations

from polyc.ir.expr import Unary
from polyc.ir.kernel import Statement
from schedules.accel.layers import Layer
from schedules.accel.structure import Structure


def ahead(layer: Layer, engine: dict[str, str]) -> tuple[str, ...]:
    """The statements to issue one tile ahead in ``layer`` under ``engine``
    (statement -> engine): those up to the first MAC statement, when a later MAC
    statement reads, through vector statements, what it wrote (an attention's
    QK^T, softmax and PV: :func:`chain`); else none."""
    if not chain(layer, engine):
        return ()
    end = next(i for i, s in enumerate(layer.stmts) if engine[s.name] == "mac")
    # with the requantization in the MAC array's output path that follows it
    while end + 1 < len(layer.stmts) and engine[layer.stmts[end + 1].name] == "mac_out":
        end += 1
    return tuple(s.name for s in layer.stmts[: end + 1])


def chain(layer: Layer, engine: dict[str, str], softmax: bool = True) -> list:
    """The vector statements between the layer's first MAC statement and a later
    MAC statement that reads, through them, what the first wrote, when they
    hold a softmax (an attention's QK^T, softmax and PV), in order; else none.
    With ``softmax=False`` any such statements (a convolution's normalisation
    and activation before the next convolution: what the cost model charges as
    a chain, though only an attention's is issued a tile ahead)."""
    stmts = layer.stmts
    macs = [i for i, s in enumerate(stmts) if engine.get(s.name) == "mac"]
    if len(macs) < 2:
        return []
    made = {stmts[macs[0]].target.array}
    between = []
    for s in stmts[macs[0] + 1 :]:
        if not any(ld.array in made for ld in s.reads):
            continue
        if engine.get(s.name) == "mac":
            if between:
                return between if not softmax or _softmax(between) else []
            continue
        if engine.get(s.name) == "mac_out":  # no cycles: the array's output path
            made.add(s.target.array)
            continue
        if engine.get(s.name) != "vector":
            return []
        between.append(s)
        made.add(s.target.array)
    return []


def _shared(layer: Layer, st: Structure) -> set[str]:
    """The arrays both the statements ahead and the others touch."""
    early = set(st.ahead)

    def touched(stmts):
        return {ld.array for s in stmts for ld in (s.target, *s.reads)}

    return touched(s for s in layer.stmts if s.name in early) & touched(
        s for s in layer.stmts if s.name not in early
    )


def lifted(layer: Layer, st: Structure) -> set[str]:
    """The arrays the statements issued ahead write and the others touch (the
    scores): placed above the pipelined loop, one buffer for all its tiles.
    Per tile, the box would be the hull of two tiles (tile t + 1 for the
    statements ahead, tile t for the others) and the scores would cross an
    iteration through DRAM."""
    written = {s.target.array for s in layer.stmts}
    apart = read_apart(layer, st)
    return {a for a in _shared(layer, st) if a in written or a not in apart}


def read_apart(layer: Layer, st: Structure) -> dict[str, list[str]]:
    """The arrays the layer only reads, both ahead and not (the query, key and
    value as slices of one projection's output), each with its readers when
    one statement ahead and one other read it: each reader gets a buffer of
    its own above its own loops (one box per tile, not the hull of two)."""
    written = {s.target.array for s in layer.stmts}
    early = set(st.ahead)
    out = {}
    for a in sorted(_shared(layer, st) - written):
        users = [s.name for s in layer.stmts if a in {ld.array for ld in s.reads}]
        if (
            sum(u in early for u in users) == 1
            and sum(u not in early for u in users) == 1
        ):
            out[a] = users
    return out


def issue_order(layer: Layer, st: Structure) -> list[str]:
    """The layer's point bands in the order to issue them once the ``ahead``
    statements are shifted: the vector work of tile t (up to the next MAC
    statement or its folded init) before the statements ahead (tile t + 1's
    QK^T), so that the scalar core issues the softmax before it can stall on a
    full MAC queue, and the vector unit runs it as soon as the array is done
    with tile t's QK^T."""
    n = len(st.ahead)
    engine = dict(st.engine)
    rest = list(range(n, len(layer.stmts)))
    cut = next(
        (i for i in rest if engine[layer.stmts[i].name] in ("mac", "fold")),
        len(layer.stmts),
    )
    order = [*range(n, cut), *range(n), *range(cut, len(layer.stmts))]
    return [layer.bands[i] for i in order]


def _softmax(stmts: list[Statement]) -> bool:
    """Whether ``stmts`` hold a softmax: a max reduction, an ``exp`` and a sum
    reduction (a max reduction alone is also a max pooling, which a CNN feeds
    to its next convolution). :mod:`schedules.accel.attention` finds its cores
    by the same test."""
    return (
        any(s.reduction == "max" for s in stmts)
        and any(s.reduction == "add" for s in stmts)
        and any(
            isinstance(n, Unary) and n.op == "exp" for s in stmts for n in s.body.walk()
        )
    )
