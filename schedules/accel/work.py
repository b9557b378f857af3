"""The compute engines' work in the accelerator cost model, at every candidate of a
grid at once (:mod:`schedules.accel.terms` composes it with the copies'):

- :func:`engines`: the MAC array's (calls back to back, plus the first load and
  the last tail once), the vector unit's and the scalar core's busy cycles, and
  the calls the scalar core issues;
- :func:`_chain`: the vector work a tile's MAC calls wait for (a prologue) or
  leave behind (an epilogue), and what the array waits for when a layer has
  both;
- :func:`_between`: the vector work between two MAC statements of a chain (an
  attention's softmax between QK^T and PV);
- :func:`in_order`: the span of the layer's statements on in-order engines with
  their dependences (MAC and vector work in turn where one waits for the other,
  each hand-off from the array after its skew).

Every value is a numpy array over the candidates (or a number that broadcasts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from schedules.accel import banks, pipeline
from schedules.accel.split import split_engine, split_side

if TYPE_CHECKING:
    from schedules.accel.model import LayerModel


@dataclass(frozen=True)
class Work:
    """The compute engines' busy cycles, and the engine calls the scalar core
    issues."""

    mac: np.ndarray
    vector: np.ndarray
    scalar: np.ndarray  # statements the scalar core runs itself
    calls: np.ndarray
    lead: np.ndarray | float = np.inf  # MAC time the next tiles' loads can run under
    # ... of which the MAC statements pay once per chain of calls back to back
    # (the last tile pays one: its first load and its last tail)
    once: np.ndarray | float = 0.0
    # one tile's vector work that must precede the MAC calls of its tile (an
    # init the calls accumulate onto) and follow them (an epilogue reading their
    # result): the first tile's and the last tile's are not overlapped
    pro: np.ndarray | float = 0.0
    epi: np.ndarray | float = 0.0
    # one tile's vector work between two MAC statements of a chain (an
    # attention's softmax between QK^T and PV), the tiles it runs, and whether
    # the first MAC statement is issued a tile ahead (schedules.accel.pipeline)
    mid: np.ndarray | float = 0.0
    mid_tiles: np.ndarray | float = 0.0
    ahead: np.ndarray | float = 1.0  # tiles of the pipelined loop (1: none)
    # whether the scalar core stalls on a full MAC queue while the chain's
    # later calls (PV) wait for the vector work, before it issues the next
    # tile's loads
    stalls: np.ndarray | bool = False
    # one tile's wait of the vector unit for its next commands, with the chain's
    # first MAC statement a tile ahead: the scalar core issues them after the
    # later statement's calls of the tile, which wait for this tile's vector
    # work, and it stalls on the full MAC queue until all but queue_depth of
    # them have run (an inverted residual block fused along its hidden
    # channels: 16 projection calls of 128 cycles a tile left the vector unit
    # idle 1,024 cycles a tile)
    mid_wait: np.ndarray | float = 0.0
    # vector time the next tiles' loads can run under in a layer with MAC work:
    # issued after a tile's vector operations, they wait for all but the last
    # queue_depth of them (inf when a tile issues no more than that)
    vector_lead: np.ndarray | float = np.inf
    # vector work the MAC array waits for in a layer with both a prologue and
    # an epilogue (:func:`_chain`): every tile's prologue, and the epilogue of
    # the tile before each (the vector unit runs them in issue order)
    exposed: np.ndarray | float = 0.0
    # the layer's statements on in-order engines with their dependences, MAC
    # and vector work in turn where one waits for the other (:func:`in_order`;
    # zero where it does not apply)
    chain: np.ndarray | float = 0.0
    # the first call's shift of its held operand into the array, which runs
    # under the first tile's prologue (:func:`_chain`)
    hidden: np.ndarray | float = 0.0
    # the DRAM time the layer's DMA loses while MAC calls hold the banks it
    # moves through (:func:`schedules.accel.banks.left`): their busy cycles
    # times the share of DRAM's rate the banks they leave cannot take
    blocked: np.ndarray | float = 0.0


def engines(model: LayerModel, ev, n: int) -> Work:
    """Each statement's tiles on its engine: MAC calls (and their issue), vector
    operations (one issue, two for a reduction), or scalar instances."""
    mac, vec, scalar, calls = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    lead, once, blocked = np.zeros(n), np.zeros(n), np.zeros(n)
    rate = min(model.spec.dma.bytes_per_cycle, model.spec.dram.bytes_per_cycle)
    vec_issues, vec_time = np.zeros(n), np.zeros(n)  # per tile of the layer
    odd = any(
        split_side(model.kernel, s.name) == 1
        and split_engine(model.kernel, s.name) == "vector"
        for s in model.layer.stmts
    )
    layer_tiles = np.ones(n)
    depth = model.spec.scalar.queue_depth
    # each chain of calls back to back pays its first load (LayerModel.mac_once)
    chains = model.mac_chains()
    chains = float(chains) if chains.is_Number else np.maximum(ev(chains), 1)
    # (statement, engine, busy cycles over the layer, load, tail, held): see
    # in_order
    steps = []
    for s in model.layer.stmts:
        eng = model.st.engine_of(s.name)
        tiles = ev(model.tiles(s))
        if eng == "mac":
            cyc, per_tile = model.mac_cycles(s)
            stretch = banks.mac_stretch(model, s, ev)
            cyc, per_tile = ev(cyc) * stretch, ev(per_tile)
            spare = banks.left(model, s, ev, stretch)
            blocked += tiles * cyc * np.clip(1 - spare / rate, 0.0, 1.0)
            first = ev(model.mac_once(s))
            tail = ev(model.mac_tail(s))
            load = (first - tail) / chains
            held = (held_operand(model, s), _value(model.mac_load(s), ev))
            steps.append((s, eng, tiles * cyc + first - tail - load, load, tail, held))
            mac += tiles * cyc + first
            once += first / chains
            calls += tiles * per_tile
            # the scalar core issues the next tile's loads after this tile's
            # calls, at most queue_depth calls ahead of the array: with more
            # calls per tile, the loads overlap only the last queue_depth ones.
            # In a layer whose odd rows run on the vector unit (its loads a tile
            # ahead, measured: 17 x 256 x 64 on edge-npu ran 9,732 cycles with
            # 32 calls per tile, 6,726 with 8) a private K loop's calls count
            # per tile of the layer; elsewhere per call, as before: counting
            # them per tile there too chose worse tilings (transformer-block,
            # edge-npu, 67,341 -> 69,275 cycles), where loads run further
            # ahead than one tile, which this term does not model
            per_outer = per_tile
            if odd:
                outer = np.maximum(ev(model.shared_tiles(s)), 1)
                per_outer = tiles * per_tile / outer
            short = per_outer > depth
            lead += np.where(
                short, tiles * cyc * depth / np.maximum(per_outer, 1), np.inf
            )
        elif eng == "vector":
            cyc, issues = ev(model.vector_cycles(s)), (2 if s.reduction else 1)
            steps.append((s, eng, tiles * cyc, 0.0, 0.0, None))
            vec += tiles * cyc
            calls += tiles * issues
            outer = np.maximum(ev(model.shared_tiles(s)), 1)
            vec_issues += tiles * issues / outer
            vec_time += tiles * cyc / outer
            layer_tiles = np.maximum(layer_tiles, outer)
        elif eng == "mac_out":  # the MAC array's output path: no cycles, one issue
            steps.append((s, eng, 0.0, 0.0, 0.0, None))
            calls += tiles
        elif eng == "scalar":
            steps.append((s, eng, model.scalar_cycles(s), 0.0, 0.0, None))
            scalar += model.scalar_cycles(s)
        else:  # folded into its MAC statement's calls: no work of its own
            steps.append((s, eng, 0.0, 0.0, 0.0, None))
    stmts = model.layer.stmts
    macs = sum(model.st.engine_of(s.name) == "mac" for s in stmts)
    has_mac = macs > 0
    # the scalar core issues a tile's vector operations after its MAC calls and
    # the next tile's loads after both, at most queue_depth operations ahead of
    # the vector unit: with more per tile, the loads overlap only the last ones
    vector_lead = np.where(
        vec_issues > depth,
        layer_tiles * depth * vec_time / np.maximum(vec_issues, 1),
        np.inf,
    )
    pro, epi, exposed, runs, hidden = (
        _chain(model, ev) if has_mac else (0.0, 0.0, 0.0, 1.0, 0.0)
    )
    if model.st.ahead:
        # the prologue and calls a tile ahead of the epilogue along the
        # innermost tiled loop: only where each run of it starts and ends do
        # the two engines take turns (one tile's prologue and epilogue); a
        # loop of one trip pipelines nothing
        trips = np.maximum(ev(model.pipelined_trips()), 1)
        exposed = np.where(trips > 1, runs / trips * (pro + epi), exposed)
    mid, mid_tiles, mid_calls, mid_mac = _between(model, ev)
    mid_wait = np.where(
        mid_calls > depth,
        mid_mac * (mid_calls - depth) / np.maximum(mid_calls, 1),
        0.0,
    )
    chain = 0.0
    split = any(split_side(model.kernel, s.name) is not None for s in stmts)
    # one MAC statement whose vector work is element-wise (a convolution's
    # activation) overlaps it across tiles as _chain's prologue and epilogue
    # terms charge; charged as an in-order chain too, a 1x1 convolution with
    # its ReLU6 (hf-mobilenetv2's first expansion on edge-npu, float16) chose
    # tiles predicted 9,700 that ran 14,660 cycles
    reduces = any(model.st.engine_of(s.name) == "vector" and s.reduction for s in stmts)
    if has_mac and vec.any() and not split and (macs > 1 or reduces):
        tiles = np.maximum(ev(model.shared_tiles()), 1)
        chain = in_order(steps, tiles, n)
        if model.st.ahead:
            # an attention's QK^T issued a tile ahead along the innermost
            # shared loop (where it has more than one trip), from the start at
            # each of its runs. Elsewhere (an MLP's fc1 a tile ahead) the
            # terms of terms.overlap stand: their tiles' loads, which this
            # does not see, delay the chain (transformer-block's MLP on
            # datacenter: 4 hidden tiles chained in 3,320 cycles ran 4,209,
            # 8 tiles chained in 3,824 ran 4,023, and the chain chose 4)
            trips = np.maximum(ev(model.pipelined_trips()), 1)
            if model._attention:
                ahead = len(model.st.ahead)
                order = pipeline.issue_positions(model.layer, model.st)
                runs = tiles / trips
                pipelined = runs * in_order(steps, trips, n, ahead, order)
            else:
                pipelined = 0.0
            chain = np.where(trips > 1, pipelined, chain)
    return Work(
        mac,
        vec,
        scalar,
        calls,
        lead if has_mac else np.inf,
        once,
        pro,
        epi,
        mid,
        mid_tiles,
        ev(model.pipelined_trips()) if model.st.ahead else 1.0,
        mid_calls >= depth,
        mid_wait,
        vector_lead if has_mac else np.inf,
        exposed,
        chain,
        hidden,
        blocked,
    )


def _chain(model: LayerModel, ev):
    """One tile's vector cycles before its MAC calls (statements writing what the
    calls accumulate onto or read, and what those read) and after them (statements reading what the
    calls wrote, and what those wrote in turn), in the layer's order; the
    vector cycles of the whole layer that the MAC array waits for when there
    are both; the tiles the prologue runs; and the cycles of the first call's
    shift of its held operand that run under the prologue (all of it, up to
    the prologue's length, unless the prologue writes that operand: the
    runtime's ``pc_head_from``).

    The vector unit runs its operations in issue order, and the scalar core
    issues a tile's prologue, MAC calls and epilogue before the next tile's: the
    epilogue of tile ``t`` waits for its calls, the prologue of ``t + 1`` for that
    epilogue, and the calls of ``t + 1`` for that prologue. So every prologue, and
    the last epilogue before each, is exposed beside the MAC time (a layer norm
    fused ahead of an MLP's first linear and its GELU: hf-convnext's on
    datacenter ran 21,017 cycles, predicted 11,307, its MAC and vector work
    8,382 and 10,744 cycles)."""
    stmts = model.layer.stmts
    kind = [model.st.engine_of(s.name) for s in stmts]
    macs = [i for i, e in enumerate(kind) if e == "mac"]
    # a split layer's parts write disjoint elements of one array: the other
    # part's statements neither feed the calls nor wait for them (with the MAC
    # part first, the vector part's channels counted as an epilogue: a 3x3
    # depthwise layer of 112x112 on datacenter, 103,420 cycles simulated, was
    # predicted 112,855, one tile's vector work late)
    sides = {split_side(model.kernel, stmts[i].name) for i in macs}
    kind = [
        "other"
        if (side := split_side(model.kernel, s.name)) is not None and side not in sides
        else e
        for s, e in zip(stmts, kind)
    ]
    before = set()
    for i in macs:
        s = stmts[i]
        before |= {s.target.array, *(ld.array for ld in s.reads)}
    pro, epi = 0.0, 0.0
    pro_all, epi_all, pro_tiles, epi_tiles = 0.0, 0.0, 1.0, 1.0
    written = set()  # by the prologue
    # the prologue: what the calls read or accumulate onto, and what that
    # reads in turn (a layer norm's mean and variance before its output)
    for i in reversed(range(macs[0])):
        if kind[i] == "vector" and stmts[i].target.array in before:
            cyc, tiles = ev(model.vector_cycles(stmts[i])), ev(model.tiles(stmts[i]))
            pro = pro + cyc
            pro_all = pro_all + tiles * cyc
            pro_tiles = np.maximum(pro_tiles, tiles)
            before |= {ld.array for ld in stmts[i].reads}
            written.add(stmts[i].target.array)
    hidden = 0.0
    if held_operand(model, stmts[macs[0]]) not in written:
        hidden = np.minimum(pro, _value(model.mac_load(stmts[macs[0]]), ev))
    after = {stmts[i].target.array for i in macs}
    for i in range(macs[-1] + 1, len(stmts)):
        s = stmts[i]
        if not any(ld.array in after for ld in s.reads):
            continue
        if kind[i] == "mac_out":
            # the array's output path (HW-A's requantization) hands the vector
            # work after it the calls' results at no time of its own: what reads
            # its int8 output waits for the calls all the same (a residual add
            # after a requantized convolution, one tile: 1,442 vector cycles
            # after 1,568 on the array, the layer predicted 2,301, run in 3,548)
            after.add(s.target.array)
        elif kind[i] == "vector":
            cyc, tiles = ev(model.vector_cycles(s)), ev(model.tiles(s))
            epi = epi + cyc
            epi_all = epi_all + tiles * cyc
            epi_tiles = np.maximum(epi_tiles, tiles)
            after.add(s.target.array)
    both = np.logical_and(np.asarray(pro_all) > 0, np.asarray(epi_all) > 0)
    # the parts of a split layer write one array but run apart (the vector
    # unit's channels beside the MAC array's): neither waits for the other
    if any(split_side(model.kernel, s.name) is not None for s in stmts):
        both = False
    behind = epi_all * np.minimum(pro_tiles, epi_tiles) / np.maximum(epi_tiles, 1)
    exposed = np.where(both, pro_all + behind, 0.0)
    return pro, epi, exposed, pro_tiles, hidden


def _between(model: LayerModel, ev):
    """One tile's vector cycles between the layer's first MAC statement and a
    later one that reads their result (an attention's softmax between QK^T and
    PV: :func:`schedules.accel.pipeline.chain`), the tiles they run, and the
    later statement's MAC calls and MAC cycles per such tile; zeros when the
    layer has no such chain."""
    engine = dict(model.st.engine)
    stmts = model.serial_chain()
    if not stmts:
        return 0.0, 0.0, 0.0, 0.0
    per_tile = sum(ev(model.vector_cycles(s)) for s in stmts)
    tiles = np.max([ev(model.tiles(s)) for s in stmts], axis=0)
    after = model.layer.stmts.index(stmts[-1])
    pv = next(s for s in model.layer.stmts[after:] if engine[s.name] == "mac")
    cyc, per = model.mac_cycles(pv)
    pv_tiles = ev(model.tiles(pv))
    calls = pv_tiles * ev(per)
    busy = pv_tiles * ev(cyc)
    each = np.maximum(tiles, 1)
    return per_tile, tiles, calls / each, busy / each


#: the engines :func:`in_order` schedules (``mac_out``: the MAC array's
#: output path, no time of its own)
ENGINES = ("mac", "vector", "scalar", "mac_out")


def in_order(steps, tiles, n: int, ahead: int = 0, order=None):
    """The span of a layer's statements over ``tiles`` tiles of its shared
    loops, each engine running its work in issue order and a statement
    starting only when the statements of its tile that it depends on (it reads
    what they write, writes what they write or read) are done: a one-tile
    attention's key projection, reshape, QK^T, softmax and PV run one after the
    other, not beside each other as the busiest engine's time assumes
    (hf-vit's on edge-npu, float16: 4,160 cycles simulated, predicted 2,454 by
    that).

    ``steps``: per statement in the layer's order ``(statement, engine, busy
    cycles over the layer, load, tail, held)``. A MAC statement that starts on
    an idle array pays ``load`` (its first call's cycles beyond its folds' steady
    time; a call back to back shifts its stationary operand in under the one
    before); its results are ready ``tail`` cycles (the array's skew) after it
    frees the array. ``held``: ``(array, cycles)``, the operand the array holds
    and the cycles it takes to shift in (:func:`held_operand`; None off the
    array). That operand shifts in while the statement waits for its other
    operands, from when the array is idle and the statements of the tile that
    write it are done (the runtime's ``pc_head_from``: an MLP's fc2 weights load
    while the vector unit computes its activation), so the statement streams at
    the later of its operands and that load's end. Issue order:
    per tile the statements in ``order`` (positions in ``steps``; the layer's
    order by default), the first ``ahead`` of them for the next tile
    (:mod:`schedules.accel.pipeline`: issued once for the first tile before
    the others). Three tiles are scheduled, and the span of ``k`` tiles is
    when the last statement of the first ``k`` is done; the tiles after the
    third add what the third did (the period of in-order engines settles
    after a tile or two)."""
    order = list(range(len(steps))) if order is None else order
    first = [(i, 0) for i in range(ahead)]
    issued = first + [(i, t + 1 if i < ahead else t) for t in range(3) for i in order]
    free: dict[str, np.ndarray] = {}  # engine -> when it is free
    ready: dict[tuple[int, int], np.ndarray] = {}  # (step, tile) -> its results
    done = [np.zeros(n) for _ in range(3)]  # per tile, its last statement's end
    deps = [_depends(steps, i) for i in range(len(steps))]
    for i, t in issued:
        _, eng, busy, load, tail, held = steps[i]
        if t > 2 or eng not in ENGINES:
            continue
        after = np.zeros(n)
        for j in deps[i]:
            if (j, t) in ready:
                after = np.maximum(after, ready[j, t])
        if eng == "mac_out":  # the array's output path, as its results leave
            ready[i, t] = after
            continue
        idle = free.get(eng)
        start = after if idle is None else np.maximum(idle, after)
        end = start + busy / tiles
        if eng == "mac":
            # a call on an idle array loads its held operand before it streams,
            # from when that operand is written and the array is idle
            array, shift = held if held else (None, 0.0)
            written = np.zeros(n) if idle is None else idle
            for j in deps[i]:
                if (j, t) in ready and steps[j][0].target.array == array:
                    written = np.maximum(written, ready[j, t])
            streams = np.maximum(after, written + shift)
            waited = streams + busy / tiles + load - shift
            end = waited if idle is None else np.where(after > idle, waited, end)
        free[eng] = end
        ready[i, t] = end + tail
        done[t] = np.maximum(done[t], ready[i, t])
    one = done[0]
    two = np.maximum(one, done[1])
    three = np.maximum(two, done[2])
    more = three + (tiles - 3) * np.maximum(three - two, 0)
    return np.where(tiles <= 1, one, np.where(tiles <= 2, two, more))


def _value(e, ev):
    """``e`` over the grid (``ev``), or the number it is (``ev`` takes only
    expressions of the tile sizes)."""
    return float(e) if e.is_Number else ev(e)


def held_operand(model: LayerModel, stmt) -> str | None:
    """The array of ``stmt``'s operand that the MAC array holds (the weights of a
    weight-stationary array, B, unless the call exchanges its operands; A on an
    input-stationary one), or None on an output-stationary one."""
    from schedules.accel.tensorize import contraction

    dataflow = model.spec.mac_array.dataflow
    if dataflow == "output_stationary":
        return None
    con = contraction(stmt)
    a_held = (dataflow == "input_stationary") != (stmt.name in model.st.exchanged)
    return stmt.reads[con.a if a_held else con.b].array


def _depends(steps, i: int) -> list[int]:
    """The positions of the statements of ``steps`` that step ``i``'s statement
    depends on within a tile: it reads what they write, or writes what they
    write or read."""
    s = steps[i][0]
    reads = {ld.array for ld in s.reads}
    out = []
    for j, (w, *_rest) in enumerate(steps):
        if j == i:
            continue
        if w.target.array in reads | {s.target.array} or any(
            ld.array == s.target.array for ld in w.reads
        ):
            out.append(j)
    return out
