"""Fusion groups chosen with the cost model.

:func:`schedules.accel.layers.split` fuses consecutive statements whenever that is
legal, so a chain of contractions (a convolution into the next, a linear layer into
the next) can become one layer: its intermediates stay on chip, but the layer's
tiles must suit every statement at once, and a group of a convolution and a
depthwise convolution ran 2x slower fused than apart. Whether to fuse across a
contraction is therefore a choice, made here: the kernel is cut before every
contraction (its init) into pieces, and the pieces are merged back left to right,
within the groups :func:`split` fuses, while the cost model predicts the merged
layer faster than the layer so far and the piece apart (each layer searched as the
scheduler searches it, so the searches are shared with it and the search cache).
The result is the positions where a layer must start (the scheduler's ``cuts``):
the groups' own starts and every start of a piece that was not merged.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from accelerator.hardware.spec import Spec
from polyc.ir.kernel import Kernel
from schedules.accel import boundary, cache
from schedules.accel.layers import MAX_STATEMENTS, Layer, _count, _fusable, split


def fusion_cuts(
    kernel: Kernel,
    spec: Spec,
    stage: bool,
    found: dict,
    cuts: set[int] = frozenset(),
    wide: tuple[tuple[int, ...], ...] = (),
    meanwhile: Callable[[], object] | None = None,
    then: Callable[[], object] | None = None,
) -> set[int]:
    """Top-level positions at which a layer starts so that contractions fuse only
    where the cost model says it pays (see the module docstring). ``found`` holds
    the searches by ``(children, depth)``, the scheduler's own; ``cuts`` and
    ``wide`` are the fused attentions' (:mod:`schedules.accel.attention`): an
    attention's core is never cut. ``meanwhile`` is called while workers search
    the pieces (:func:`schedules.accel.cache.search_layers`), ``then`` once
    they have (the decisions run in this process alone)."""
    layers = split(kernel, cuts=frozenset(cuts), wide=wide)
    fused = [layer for layer in layers if not layer.opaque]
    inside = {p for w in wide for p in w}
    starts = {
        p
        for layer in fused
        for p in sorted({*_contraction_starts(layer), *_window_starts(layer)})[1:]
        if p not in inside
    }
    if not starts:
        return set()
    # the fused layers' own starts stay: pieces and merges never cross them
    edges = {layer.children[0] for layer in layers}
    pieces = split(kernel, cuts=frozenset(starts | edges), wide=wide)
    owner = {c: i for i, layer in enumerate(fused) for c in layer.children}
    # every piece is searched alone below, and so is each piece merged with the
    # one before it (what the loop below asks while no merge is taken, as in a
    # ResNet, where none pays): at once, in parallel where it pays
    pairs = [
        _merged(kernel, a, b, fused, owner, wide)
        for a, b in itertools.pairwise(pieces)
        if not a.opaque and not b.opaque
    ]
    new = {}
    for p in [*pieces, *pairs]:
        if p is not None and not p.opaque and (p.children, p.depth) not in found:
            new.setdefault((p.children, p.depth), p)
    searched = cache.search_layers(
        kernel, list(new.values()), spec, stage=stage, meanwhile=meanwhile
    )
    found.update(zip(new, searched))
    if then is not None:
        then()
    cuts = set(edges)
    before = cur = cost = None  # ``before``: the layer that ends where cur starts
    for piece in pieces:
        if piece.opaque:
            before = cur = None
            continue
        alone = _best(kernel, piece, spec, stage, found)
        # apart, the piece's first loads may run under cur's last tile
        apart = alone - _overlap(kernel, cur, piece, spec, stage, found)
        merged = _merged(kernel, cur, piece, fused, owner, wide)
        if merged is not None:
            together = _best(kernel, merged, spec, stage, found)
            # either way the first loads may run under the last tile of the
            # layer before: cur's, or the merged layer's, which may have more
            # to load (an out-projection's weights behind the copies of the
            # heads it reads: merged, they load under the attention's last
            # tile)
            ahead = _overlap(kernel, before, cur, spec, stage, found)
            sooner = _overlap(kernel, before, merged, spec, stage, found)
            if together - sooner < cost - ahead + apart:
                cur, cost = merged, together
                continue
        cuts.add(piece.children[0])
        before, cur, cost = cur, piece, alone
    return cuts


def _merged(kernel, cur, piece, fused, owner, wide) -> Layer | None:
    """``cur`` and the piece after it as one layer, when they lie in one fused
    group and the layer stays within :data:`MAX_STATEMENTS`; else None. Its
    depth is the one :func:`split` gives the statements from ``cur``'s first
    (the fused group's own depth is that of all its statements: a max pool
    later in the group keeps the group's rows whole, not a convolution's
    before it)."""
    same = (
        cur is not None
        and owner.get(piece.children[0]) == owner.get(cur.children[-1])
        and _count([*cur.children, *piece.children], wide) <= MAX_STATEMENTS
    )
    if not same:
        return None
    group = list(zip(cur.stmts, cur.bands, cur.children))
    depth = cur.depth
    for item in zip(piece.stmts, piece.bands, piece.children):
        depth = _fusable(kernel, group, item, depth)
        if not depth:
            return None
        group.append(item)
    return Layer(
        cur.index,
        cur.stmts + piece.stmts,
        cur.bands + piece.bands,
        depth,
        False,
        cur.children + piece.children,
    )


def _overlap(kernel, cur, piece, spec, stage, found) -> float:
    """Predicted cycles ``piece``'s best candidate overlaps with ``cur``'s when
    it starts a layer after it (:func:`schedules.accel.boundary.credit`)."""
    if cur is None:
        return 0.0
    _best(kernel, cur, spec, stage, found)
    a, b = found[(cur.children, cur.depth)], found[(piece.children, piece.depth)]
    if not a or not b:
        return 0.0
    return boundary.credit(spec, a[0], boundary.written(cur), b[0])


def _contraction_starts(layer: Layer) -> list[int]:
    """The top-level position where each contraction of ``layer`` begins: its
    init's (the statement before it that writes its target reading nothing), else
    its own."""
    from schedules.accel.tensorize import contraction

    return [
        _start(layer, i)
        for i, stmt in enumerate(layer.stmts)
        if contraction(stmt) is not None
    ]


def _window_starts(layer: Layer) -> list[int]:
    """The top-level position where each statement of ``layer`` that reads a
    window of an array the layer wrote before it begins (a max pool after a
    convolution: ``relu[n, c, 2*l + rh - 1, 2*m + rw - 1]``), as
    :func:`_contraction_starts` places it. A window is a read index that is not
    one iterator at stride 1 in some dimension: the statement cannot fuse on
    that dimension, so the layer keeps it whole, and with it the whole output of
    what comes before (a 7x7/2 stem's 256 KiB accumulator, which held
    datacenter's 64-column array to 16 columns per tile). Apart, the statements
    before it tile their own rows."""
    out = []
    written: set[str] = set()
    for i, stmt in enumerate(layer.stmts):
        reads = [ld for ld in stmt.reads if ld.array in written - {stmt.target.array}]
        if any(_windowed(ld) for ld in reads):
            out.append(_start(layer, i))
        written.add(stmt.target.array)
    return out


def _windowed(ld) -> bool:
    return any(
        len(a.names()) != 1 or a.coefficient(next(iter(a.names()))) != 1
        for a in ld.index
    )


def _start(layer: Layer, i: int) -> int:
    """The top-level position where statement ``i`` of ``layer`` begins: its
    init's (the statement before it that writes its target reading nothing),
    else its own."""
    prev = layer.stmts[i - 1] if i else None
    init = (
        prev is not None
        and prev.target.array == layer.stmts[i].target.array
        and not prev.reads
    )
    return layer.children[i - 1 if init else i]


def _best(kernel: Kernel, layer: Layer, spec: Spec, stage: bool, found: dict) -> float:
    """The predicted cycles of the layer's best candidate (inf when none fits)."""
    key = (layer.children, layer.depth)
    if key not in found:
        found[key] = cache.search(kernel, layer, spec, stage=stage)
    cands = found[key]
    return cands[0].cycles if cands else math.inf
