"""A layer's chosen candidate applied to the kernel, and the layers assembled:
step 3 of the accelerator scheduler (:mod:`schedules.accel.scheduler`).

The best candidate of each layer is applied with the public transformations --
``tile``, ``fuse``, ``permute``, then ``tensorize``/``map_vector`` and ``place``
-- on the layer's own part of the program (:func:`schedules.accel.layers.sub_kernel`),
so the result is an ordinary scheduled Kernel whose history replays. Each array
is placed below the innermost tile loop that moves its footprint (hoisted out of
the others: a stationary operand is copied once per tile of the loops it depends
on), with two slots when its copy runs more than once. A candidate that turns
out not to fit (alignment, exact footprints) raises :class:`LayerFailed`, and the
scheduler tries the next one.
"""

from __future__ import annotations

from accelerator.hardware.spec import Spec
from polyc.errors import PolycError
from polyc.ir import macmap
from polyc.ir.kernel import Kernel
from schedules import stree
from schedules.accel import levels, pipeline, search, space
from schedules.accel.layers import Layer, sub_kernel, top_children, touches
from schedules.accel.placement import box_extent, place
from schedules.accel.resident import resident_arrays
from schedules.accel.structure import polyphase
from schedules.accel.tensorize import map_vector, tensorize, vertical_order
from schedules.accel.tilevars import SharedTile, loop_extent, tile_var
from schedules.apply import to_yaml
from schedules.bands import permute, shift
from schedules.common import step
from schedules.fusion import fuse, reorder
from schedules.tiling import tile


class LayerFailed(Exception):
    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason


def build(kernel: Kernel, layers: list[Layer], chosen, spec: Spec) -> Kernel:
    """Apply the chosen candidates: loop transformations of every layer first, then
    engine marks, then placements (they add extension nodes).

    Raises:
        LayerFailed: naming the layer whose candidate could not be applied.
    """
    bands = {}
    parts = {}
    for layer, cand in zip(layers, chosen):
        if cand is None:
            continue
        try:
            part = sub_kernel(kernel, layer.children)
            part, bands[layer.index] = _loops(part, layer, cand)
        except PolycError as err:
            raise LayerFailed(layer.index, str(err)) from None
        parts[layer.index] = part
    k = _assemble(kernel, layers, parts)
    for layer, cand in zip(layers, chosen):
        if cand is None:
            continue
        try:
            k = _engines(k, layer, cand)
        except PolycError as err:
            raise LayerFailed(layer.index, str(err)) from None
    # buffers are planned once, at the last layer's last placement: the others
    # only check that their layer fits (a replay of the history plans at each).
    # A layer whose arrays all live at their homes places nothing, so the last
    # layer that places a buffer plans (a whole-tensor argmax's last reductions
    # left every buffer unallocated)
    placing = {}
    for layer, cand in zip(layers, chosen):
        if cand is None:
            continue
        try:
            placing[layer.index] = _to_place(k, layer, cand, spec)
        except PolycError as err:
            raise LayerFailed(layer.index, str(err)) from None
    last = max((i for i, (_, order) in placing.items() if order), default=None)
    for layer, cand in zip(layers, chosen):
        if cand is None:
            continue
        plan = True if layer.index == last else "check"
        at, order = placing[layer.index]
        try:
            k = _placements(k, layer, cand, bands[layer.index], spec, at, order, plan)
        except PolycError as err:
            raise LayerFailed(layer.index, str(err)) from None
        _check_macs(k, layer)
        # the layers placed before were checked, and their subtrees are as they
        # were: only this layer's statements can be misplaced
        bad = levels.misplaced(k, spec, {s.name for s in layer.stmts})
        if bad:
            raise LayerFailed(layer.index, bad[0].message("place"))
    return k


def _check_macs(k: Kernel, layer: Layer) -> None:
    """The layer's MAC mappings as placed pass the predicate the code generator
    applies (:func:`polyc.ir.macmap.from_marks`), so codegen never refuses what the
    scheduler hands it: a refused candidate is replaced by the next one."""
    refused = macmap.refusals(k, {s.name for s in layer.stmts})
    if refused:
        _, why = refused[0]
        raise LayerFailed(layer.index, why.message("tensorize"))


def _assemble(kernel: Kernel, layers: list[Layer], parts: dict) -> Kernel:
    """The kernel under its layers' new subtrees (each transformed and checked on
    its own statements)."""
    if not parts:
        return kernel
    children = list(top_children(kernel))
    for layer in layers:
        if layer.index not in parts:
            continue
        node = stree.from_isl(parts[layer.index].schedule)
        children[layer.children[0]] = node
        for pos in layer.children[1:]:
            children[pos] = None
    kept = [c for c in children if c is not None]
    root = kept[0] if len(kept) == 1 else stree.Sequence_(tuple(kept))
    # each layer's subtree was checked on its own statements and the layers keep
    # their order, so the whole tree is legal: recorded as apply_schedule records
    # it (a replay of the history checks it again), without checking it twice
    new = stree.to_isl(stree.name_bands(root))
    return kernel.with_schedule(new, step("apply_schedule", to_yaml(new)))


def _loops(k: Kernel, layer: Layer, cand: search.Candidate):
    """Tile every statement of the layer, fuse the tile bands, order the loops.
    Returns the kernel and where each loop went: ``{(stmt, it): (band, pos)}``."""
    st = cand.structure
    if len(layer.stmts) == 1 and not any(
        size < loop_extent(layer, var) for var, size in cand.sizes
    ):
        # one tile: the statement's own band, copies above it
        return _vertical(k, layer, cand, {}), {}
    tile_bands = []
    for s, band in zip(layer.stmts, layer.bands):
        sizes = {}
        for it in s.iterators:
            var = tile_var(layer, s, it)
            size = cand.size_of(var)
            if isinstance(var, SharedTile):
                sizes[it] = size if size is not None else layer.extent(s, it)
            elif size is not None:
                sizes[it] = size
        k = tile(k, band, sizes)
        tile_bands.append((s, f"{band}_t", [it for it in s.iterators if it in sizes]))
    fused = tile_bands[0][1]
    if len(layer.stmts) > 1:
        fused = f"L{layer.index}"
        k = fuse(k, [b for _, b, _ in tile_bands], depth=layer.depth, name=fused)
    private = {
        s.name: n
        for s, _, tiled in tile_bands
        if len(layer.stmts) > 1
        and (n := sum(s.iterators.index(i) >= layer.depth for i in tiled))
    }
    k = _vertical(k, layer, cand, private)
    first = layer.stmts[0]
    members = [f"{first.iterators[p]}_t" for p in range(layer.depth)]
    ordered = [members[p] for p in st.order]
    if ordered != members:
        k = permute(k, fused, ordered)
    at = _ahead_member(layer, cand)
    if at is not None:
        for name in st.ahead:
            k = shift(k, fused, {ordered[at]: -1}, statement=name)
        k = reorder(k, pipeline.issue_order(layer, st))
    where = {}
    for s, band, tiled in tile_bands:
        for pos, p in enumerate(st.order):
            where[(s.name, s.iterators[p])] = (fused, pos)
        private = [it for it in tiled if s.iterators.index(it) >= layer.depth]
        own = band if len(layer.stmts) > 1 else fused
        offset = 0 if len(layer.stmts) > 1 else layer.depth
        for pos, it in enumerate(private):
            where[(s.name, it)] = (own, offset + pos)
    return k, where


def _ahead_member(layer: Layer, cand: search.Candidate) -> int | None:
    """The position in the fused band of the loop along which the structure's
    ``ahead`` statements run one tile early (the innermost shared loop), or
    None (nothing ahead, or that loop is not tiled: the cost model then charges
    the tiles in series)."""
    st = cand.structure
    if not st.ahead or len(layer.stmts) < 2:
        return None
    first = layer.stmts[0]
    inner = len(st.order) - 1
    return (
        inner if _tiles(layer, cand, first, first.iterators[st.order[inner]]) else None
    )


def _vertical(k: Kernel, layer: Layer, cand: search.Candidate, private) -> Kernel:
    """Run each vector reduction's reduction loops outside its output loops in its
    point band (:func:`schedules.accel.tensorize.vertical_order`, what the cost
    model assumes); ``private`` maps a statement of a fused layer to the number
    of its private tile loops, which lead that band and keep their positions
    (the placement reads them)."""
    for s, band in zip(layer.stmts, layer.bands):
        if cand.structure.engine_of(s.name) != "vector":
            continue
        order = vertical_order(k, band, private.get(s.name, 0))
        if order is not None:
            k = permute(k, band, order)
    return k


def _engines(k: Kernel, layer: Layer, cand: search.Candidate) -> Kernel:
    st = cand.structure
    folded = {
        space.folds_into(layer, s).name: s.name
        for s in layer.stmts
        if st.engine_of(s.name) == "fold"
    }
    for s, band in zip(layer.stmts, layer.bands):
        eng = st.engine_of(s.name)
        if eng == "mac":
            m, n, kk = st.groups_of(s.name)
            k = tensorize(
                k,
                band,
                m=m,
                n=n,
                k=kk,
                init=folded.get(s.name),
                exchange=s.name in st.exchanged,
            )
        elif eng == "vector":
            k = map_vector(k, band)
        elif eng == "mac_out":
            k = map_vector(k, band, unit="mac")
    return k


def _placements(
    k: Kernel, layer: Layer, cand: search.Candidate, where, spec, at, order, plan
) -> Kernel:
    """Place the buffers of ``order`` (:func:`_to_place`: ``at`` is the level
    each array is reached in); the last placement plans (or checks, with
    ``plan="check"``: see :func:`schedules.accel.placement.place`)."""
    st = cand.structure
    early = _ahead_member(layer, cand)
    above = pipeline.lifted(layer, st) if early is not None else set()
    apart = pipeline.read_apart(layer, st) if early is not None else {}
    for array in order:
        users = [s for s in layer.stmts if array in _arrays(s)]
        band, depth = _position(layer, cand, where, users, array)
        slots = _slots(layer, cand, where, users, array)
        if array in above:  # one buffer for every tile of the pipelined loop
            band, depth, slots = _outermost(layer, where), early, None
        if array in apart:
            # read a tile apart by the statements ahead and by the others:
            # a buffer each, above its statement's own loops
            level = spec.memory[at[array]].name
            for name in apart[array]:
                band, depth = _above_private(layer, where, name)
                last = array == order[-1] and name == apart[array][-1]
                k = place(
                    k,
                    band,
                    array,
                    level,
                    config=spec,
                    depth=depth,
                    slots=st.stream_slots,
                    plan=plan if last else False,
                )
            continue
        if array in cand.staged:  # whole, once, above the tile loops
            upper = spec.memory[space.upper_level(spec)].name
            top = _outermost(layer, where)
            k = place(k, top, array, upper, config=spec, depth=0, slots=1, plan=False)
        pad = _pitch(k, st, array)
        layout = {a: o for a, o in st.layouts if a == array} or None
        phase = None
        ph = _polyphase(k, st, array)
        if ph is not None:
            pad, phase = _phase_pad(k, array, ph, band, depth)
        k = place(
            k,
            band,
            array,
            spec.memory[at[array]].name,
            config=spec,
            depth=depth,
            pad=pad,
            layout=layout,
            phase=phase,
            slots=slots,
            plan=plan if array == order[-1] else False,  # the layer's all in
        )
    return k


def _to_place(k: Kernel, layer: Layer, cand: search.Candidate, spec):
    """The level each array of the layer is reached in, and the arrays that get
    a buffer, in placement order: an intermediate at its home in the engines'
    level needs none."""
    at = levels.assign(layer, cand.structure, spec, space.engine_level(spec))
    home = resident_arrays(k, layer, cand.structure, at)
    return at, [a for a in _place_order(layer) if a not in home]


def _above_private(layer: Layer, where, name: str) -> tuple[str, int]:
    """The position just inside the shared tile loops, above the private ones,
    of statement ``name``: its band, and the depth of its first private tile
    loop (0 of its point band when none is tiled)."""
    stmt = next(s for s in layer.stmts if s.name == name)
    private = [where[(name, it)] for it in layer.private(stmt) if (name, it) in where]
    if private:
        return min(private, key=lambda bp: bp[1])
    return layer.bands[layer.stmts.index(stmt)], 0


def _arrays(stmt) -> set[str]:
    return {ld.array for ld in (stmt.target, *stmt.reads)}


def _place_order(layer: Layer) -> list[str]:
    """Operands before outputs, so that a pitched output can read its input's
    buffer pitch."""
    outputs = {s.target.array for s in layer.stmts}
    arrays = layer.arrays
    return [a for a in arrays if a not in outputs] + [a for a in arrays if a in outputs]


def _position(layer: Layer, cand, where, users, array) -> tuple[str, int]:
    """Below the innermost loop that tiles and moves the array's footprint (private
    loops only when one statement uses the array); above the layer when none."""
    best = None
    for s in users:
        for it in s.iterators:
            if (s.name, it) not in where or not _tiles(layer, cand, s, it):
                continue
            if not touches(s, array, it):
                continue
            private = s.iterators.index(it) >= layer.depth
            if private and len(users) > 1:
                continue
            band, pos = where[(s.name, it)]
            key = (private, pos)
            if best is None or key > best[0]:
                best = (key, band, pos + 1)
    if best is None:
        first = layer.stmts[0]
        if (first.name, first.iterators[0]) not in where:
            return layer.bands[0], 0
        return where[(first.name, first.iterators[0])][0], 0
    return best[1], best[2]


def _outermost(layer: Layer, where) -> str:
    """The band of the layer's outermost tile loop."""
    first = layer.stmts[0]
    return where.get((first.name, first.iterators[0]), (layer.bands[0], 0))[0]


def _tiles(layer: Layer, cand, s, it) -> bool:
    size = cand.size_of(tile_var(layer, s, it))
    return size is not None and size < layer.extent(s, it)


def _pitch(k: Kernel, st, array: str) -> dict | None:
    """A pitched output's padding: its dimension of the inner fused M iterator
    takes the input buffer's pitch, the stride of the outer fused M iterator in
    the input buffer over the inner one's (the input row's extent, or half the
    padded row for a stride-2 input stored in phases)."""
    from schedules.accel.memplan import buffers
    from schedules.accel.tensorize import contraction

    for name in st.pitched:
        s = k.statement(name)
        if s.target.array != array:
            continue
        a_ld = s.reads[contraction(s).a]
        h, w = st.groups_of(name)[0][-2:]
        a_buf = [b for b in buffers(k.schedule) if b.array == a_ld.array][-1]
        d_a = next(d for d, aff in enumerate(a_ld.index) if aff.coefficient(w))
        d_c = next(d for d, aff in enumerate(s.target.index) if aff.coefficient(w))
        pitch = a_buf.extent[d_a]
        outer, inner = _stride(a_buf, a_ld, h), _stride(a_buf, a_ld, w)
        if a_buf.phases and inner and outer % inner == 0:
            pitch = outer // inner
        return {array: {d_c: max(pitch, s.target.index[d_c].coefficient(w))}}
    return None


def _stride(buf, ld, it: str) -> int:
    """Element stride of ``it`` through ``ld`` in ``buf`` (phase-aware)."""
    return sum(
        st * (a.coefficient(it) // buf.phase(d))
        for d, (st, a) in enumerate(zip(buf.strides, ld.index))
    )


def _polyphase(k: Kernel, st, array: str):
    for name in st.phased:
        ph = polyphase(k.statement(name), st.groups_of(name))
        if ph is not None and ph.array == array:
            return ph
    return None


def _phase_pad(k: Kernel, array: str, ph, band: str, depth: int):
    """Padding and phases of a polyphase operand: its inner M dimension padded
    to a multiple of the inner iterator's step (a phase row is a whole pitch)."""
    e = box_extent(k, band, array, depth)[ph.inner]
    padded = -(-e // ph.multiple) * ph.multiple
    pad = {array: {ph.inner: padded}} if padded != e else None
    return pad, {array: {ph.dim: ph.factor}}


def _slots(layer, cand, where, users, array) -> int | None:
    """The structure's slots (three: the next two tiles load while one is in use,
    so the loads need not wait for the output's copy-out to leave DRAM
    bandwidth) for an operand copied per tile, either streamed through the
    reduction loops of one statement or read only by the layer; else the default
    (two for an output written per tile, one for a copy that runs once)."""
    band, depth = _position(layer, cand, where, users, array)
    if depth and array not in {s.target.array for s in layer.stmts}:
        return cand.structure.stream_slots
    if depth == 0 or len(users) != 1:
        return None
    s = users[0]
    private = [
        it
        for it in layer.private(s)
        if (s.name, it) in where and where[(s.name, it)][0] == band
    ]
    return cand.structure.stream_slots if private else None
