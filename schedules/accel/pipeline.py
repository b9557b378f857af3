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
from schedules.accel.layers import Layer, touches
from schedules.accel.structure import Structure
from schedules.accel.tensorize import contraction, depthwise


def ahead(layer: Layer, engine: dict[str, str]) -> tuple[str, ...]:
    """The statements to issue one tile ahead in ``layer`` under ``engine``
    (statement -> engine): those up to the first MAC statement, when a later MAC
    statement reads, through vector statements, what it wrote (an attention's
    QK^T, softmax and PV: :func:`chain`), or when the layer's one MAC statement
    has a vector prologue and a vector epilogue (:func:`prologue`); else none."""
    if not chain(layer, engine) and not prologue(layer, engine):
        return ()
    end = next(i for i, s in enumerate(layer.stmts) if engine[s.name] == "mac")
    # with the requantization in the MAC array's output path that follows it
    while end + 1 < len(layer.stmts) and engine[layer.stmts[end + 1].name] == "mac_out":
        end += 1
    return tuple(s.name for s in layer.stmts[: end + 1])


def prologue(layer: Layer, engine: dict[str, str]) -> bool:
    """Whether the layer's one MAC statement reads what vector statements before
    it wrote (a layer norm before a linear layer) and vector statements after it
    read what it wrote (a GELU), with nothing else on the MAC array. Issued in
    program order, tile t + 1's prologue queues behind tile t's epilogue, which
    waits for tile t's calls, and the array idles through both
    (:func:`schedules.accel.work._chain`); with the prologue and the calls a
    tile ahead, the vector unit runs tile t + 1's prologue and then tile t's
    epilogue while the array computes tile t + 1::

        for t in -1..T-1:
          LN(t + 1); MAC(t + 1)     # if t + 1 < T
          GELU(t)                   # if t >= 0
    """
    stmts = layer.stmts
    macs = [i for i, s in enumerate(stmts) if engine.get(s.name) == "mac"]
    if len(macs) != 1:
        return False
    m = stmts[macs[0]]
    operands = {ld.array for ld in m.reads} - {m.target.array}
    before = any(
        engine.get(s.name) == "vector" and s.target.array in operands
        for s in stmts[: macs[0]]
    )
    after = any(
        engine.get(s.name) == "vector"
        and any(ld.array == m.target.array for ld in s.reads)
        for s in stmts[macs[0] + 1 :]
    )
    return before and after


def chain(layer: Layer, engine: dict[str, str], softmax: bool = True) -> list:
    """The vector statements between the layer's first MAC statement and a later
    MAC statement that reads, through them, what the first wrote, when they
    hold a softmax (an attention's QK^T, softmax and PV) or are element-wise
    and the later statement reduces along the layer's tile loops (an MLP fused
    along its hidden dimension, :mod:`schedules.accel.mlp`), in order; else
    none. With ``softmax=False`` any such statements (a convolution's
    normalisation and activation before the next convolution: what the cost
    model charges as a chain, though only those above are issued a tile
    ahead)."""
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
                ok = not softmax or _softmax(between) or _epilogue(layer, between, s)
                return between if ok else []
            continue
        if engine.get(s.name) == "mac_out":  # no cycles: the array's output path
            made.add(s.target.array)
            continue
        if engine.get(s.name) != "vector":
            return []
        between.append(s)
        made.add(s.target.array)
    return []


def _moves(layer: Layer, st: Structure, array: str) -> bool:
    """Whether some read of ``array`` in ``layer`` moves with the pipelined
    loop (the innermost tiled loop the layer shares, ``st.order[-1]``): a
    gated MLP's input ``x``, read by the gate (ahead) and the up projection,
    is the same box in every tile of the hidden dimension."""
    if not st.order:
        return True
    p = st.order[-1]
    return any(
        p >= len(s.iterators) or touches(s, array, s.iterators[p]) for s in layer.stmts
    )


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


def tile_major(layer: Layer, st: Structure) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Buffer layouts for an MLP's lifted arrays (:func:`lifted`, when the chain
    is an element-wise epilogue, not a softmax): the dimension that the
    pipelined loop moves goes outermost, so that each of its tiles is one
    contiguous range of the buffer. The hazards of an engine operation are the
    bytes from the lowest to the highest it touches: with the hidden
    dimension innermost, tile t + 1 of fc1's output would overlap the range
    of tile t's activation in every row, and the array would wait for the
    vector unit each tile."""
    engine = dict(st.engine)
    if not st.ahead or _softmax(chain(layer, engine)):
        return ()
    p = st.order[-1]
    out = []
    for a in sorted(lifted(layer, st)):
        writer = next((s for s in layer.stmts if s.target.array == a), None)
        if writer is None or p >= writer.depth:
            continue
        it = writer.iterators[p]
        dims = [d for d, aff in enumerate(writer.target.index) if aff.coefficient(it)]
        if len(dims) != 1 or dims[0] == 0:
            continue
        d = dims[0]
        n = len(writer.target.index)
        out.append((a, (d, *(x for x in range(n) if x != d))))
    return tuple(out)


def read_apart(layer: Layer, st: Structure) -> dict[str, list[str]]:
    """The arrays the layer only reads, both ahead and not (the query, key and
    value as slices of one projection's output), each with its readers when
    one statement ahead and one other read it: each reader gets a buffer of
    its own above its own loops (one box per tile, not the hull of two). An
    array whose box is the same in every tile of the pipelined loop is not
    read apart: :func:`lifted` places it once above that loop."""
    written = {s.target.array for s in layer.stmts}
    early = set(st.ahead)
    out = {}
    for a in sorted(_shared(layer, st) - written):
        users = [s.name for s in layer.stmts if a in {ld.array for ld in s.reads}]
        if not _moves(layer, st, a):
            continue  # one box for every tile: placed above the loop (lifted)
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
    return [layer.bands[i] for i in issue_positions(layer, st)]


def issue_positions(layer: Layer, st: Structure) -> list[int]:
    """:func:`issue_order` as positions in ``layer.stmts`` (what the cost
    model's :func:`schedules.accel.work.in_order` schedules)."""
    n = len(st.ahead)
    engine = dict(st.engine)
    if prologue(layer, engine):  # tile t + 1's prologue and calls, then t's epilogue
        return list(range(len(layer.stmts)))
    rest = list(range(n, len(layer.stmts)))
    cut = next(
        (i for i in rest if engine[layer.stmts[i].name] in ("mac", "fold")),
        len(layer.stmts),
    )
    return [*range(n, cut), *range(n), *range(cut, len(layer.stmts))]


def _epilogue(layer: Layer, stmts: list[Statement], later: Statement) -> bool:
    """Whether ``stmts`` are element-wise (no reduction but a depthwise
    convolution's) and ``later``, a
    contraction, reduces along one of the layer's shared iterators: its tiles
    then each take a share of the sum, and the statements before it can run a
    tile ahead (a CNN's convolution, activation and next convolution fused on
    their pixels reduce along private loops only, and keep their order)."""
    # a depthwise convolution, channel by channel, keeps the tiles of a channel
    # loop apart as an element-wise op does (an inverted residual block fused
    # along its hidden channels: expand, depthwise, project)
    if any(s.reduction is not None and not depthwise(s) for s in stmts):
        return False
    return reduces_along_tiles(layer, later)


def reduces_along_tiles(layer: Layer, stmt: Statement) -> bool:
    """Whether ``stmt`` is a contraction that reduces along one of the layer's
    shared iterators (its tiles each take a share of the sum: an MLP's second
    contraction fused along its hidden dimension)."""
    con = contraction(stmt)
    return con is not None and any(
        con.roles.get(it) == "k" for it in layer.shared(stmt)
    )


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
