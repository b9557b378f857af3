"""Memory-hierarchy placement: on-chip buffers for tiles, and the DMA copies that fill
and drain them.

``place(kernel, band, arrays, level, config=...)`` gives each array an on-chip
buffer in ``level`` at a position of a band (after its first ``depth`` members):
the buffer holds the rectangular hull of one tile's footprint
(:mod:`schedules.accel.footprint`), every access of the array below that position goes to
it, and copy statements are inserted around the subtree, PPCG-style, as an
extension node::

    @buffer A_l1_0: A[32x8] in l1, 2 slots, copy in
    extension { [i_t, j_t, k_t] -> pc_in_A_l1_0[i_t, j_t, k_t] }
      sequence
        filter pc_in_A_l1_0     <- DMA DRAM -> l1 of the tile's box
        filter S1               <- the band's statements (unchanged)

A copy-in is made only when a value flows into the tile from outside it (or is
live-in), a copy-out only when a value written in the tile flows out of it or is
live-out, both from the exact dataflow; so an intermediate produced and consumed in
one tile never touches DRAM. When the written elements are not exactly their box,
the box is copied in first so that writing it back changes nothing else. With two
slots the buffer alternates between tiles, and the runtime overlaps the copy of
tile t+1 with the compute of tile t. Placements nest: an inner copy reads the
buffer of an outer placement of the same array (multi-level tiling). The memory
planner (:mod:`schedules.accel.memplan`) then gives every buffer of the layer an offset;
a placement that does not fit raises ``PlacementError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import islpy as isl
import numpy as np

from accelerator import CONFIGS, load_config
from accelerator.hardware.spec import Spec
from polyc.errors import ArgumentError, PlacementError, ScheduleError
from polyc.ir import marks as pm
from polyc.ir import tree
from polyc.ir.kernel import Kernel
from schedules.accel import footprint as F
from schedules.accel import isltree, memplan
from schedules.common import step


@dataclass(frozen=True)
class Plan:
    """What placing one array at one point means (before any tree is edited)."""

    array: str
    box: F.Box
    write_box: F.Box | None
    copy_in: bool
    copy_out: bool
    clamp: bool
    runs: int  # how many tiles (copy-ins) there are


def place(
    kernel: Kernel,
    band: str,
    arrays: str | Sequence[str],
    level: str,
    *,
    config,
    depth: int | None = None,
    slots: int | None = None,
    pad: Mapping[str, Mapping[int, int]] | None = None,
    layout: Mapping[str, Sequence[int]] | None = None,
    phase: Mapping[str, Mapping[int, int]] | None = None,
    plan: bool | str = True,
) -> Kernel:
    """Give ``arrays`` on-chip buffers in ``level`` for each tile of band ``band``.

    The position is after the band's first ``depth`` members (default: all of them,
    i.e. one buffer per iteration of the whole band). ::

        place(k, "S1_t", ["A", "B"], "l1", config="tiny")

        for i_t, j_t, k_t:                 for i_t, j_t, k_t:
          for i, j, k:               ->      dma A[32*i_t.., 8*k_t..] -> A_l1_0
            C[i,j] += A[i,k] * B[k,j]        dma B[..] -> B_l1_1
                                             for i, j, k:
                                               C[i,j] += A_l1_0[..] * B_l1_1[..]

    Args:
        kernel: the kernel (placement comes after the loop transformations).
        band: the band's name.
        arrays: one array name or several.
        level: an on-chip memory level of the config (``l1``, ``sram``, ``local``).
        config: the hardware description (name, path or ``Spec``).
        depth: members of the band above the position (0 = above the band).
        slots: buffers per array (2 = double buffering; default 2 when the copy
            runs for more than one tile, else 1).
        pad: per array, dimensions whose buffer rows are padded to a larger
            extent ``{array: {dim: extent}}`` (the buffer is row-major over the box
            otherwise); a padded output row can take the pitch of an input row so
            that a MAC call runs over several rows at once.
        layout: per array, the order of its dimensions in the buffer, outermost
            first (default: the array's order): ``{"input": (0, 2, 3, 1)}`` keeps
            an NCHW tile channels-last on chip, so that a MAC call runs over a
            filter row and all channels at once. The copies transpose.
        phase: per array, dimensions stored polyphase ``{array: {dim: factor}}``:
            the box rows of one residue modulo ``factor`` sit together (one DMA
            per phase gathers them), so a convolution of stride 2 reads each
            phase with stride 1 and a MAC call fuses output rows over the
            halved pitch. A layout change only: the copies stay the same.
        plan: run the memory planner over every buffer of the kernel now (the
            default); several placements in a row may plan only at the last one.
            ``"check"``: only check that the buffers fit, raising what planning
            would raise (:func:`schedules.accel.memplan.check`), and leave the
            offsets to a later placement that plans (the accelerator scheduler
            plans once, at its last placement). The history records it as
            planning: a replay plans at each step, and ends with the same kernel
            when the last placement plans.

    Raises:
        ScheduleError: unknown band, or a depth past the band's members.
        ArgumentError: unknown array or level, DRAM as the level, bad slots,
            padding or plan, or an array no statement below the position
            accesses.
        PlacementError: when the level cannot hold the layer's buffers (level,
            capacity, buffers and sizes), when an engine already mapped onto an
            array (``tensorize``, ``map_vector``) cannot reach the level (the
            config's ``mac_array.input_levels``, ``weight_levels``,
            ``accumulator_levels``, ``vector.levels``), or sizes are symbolic.
    """
    op = "place"
    if isinstance(plan, str) and plan != "check":
        raise ArgumentError(
            f"{op}: plan={plan!r} is not supported because plan is True, False or "
            '"check". Pass one of those.'
        )
    spec = config if isinstance(config, Spec) else load_config(config)
    names = [arrays] if isinstance(arrays, str) else list(arrays)
    level_index = _level(spec, level, op)
    pad = {a: dict(v) for a, v in (pad or {}).items()}
    layout = {a: tuple(v) for a, v in (layout or {}).items()}
    phase = {a: dict(v) for a, v in (phase or {}).items()}
    schedule = kernel.schedule
    mark = tree.find_band_mark(schedule, band, op)
    node, prefix = _position(kernel, mark, band, depth, op)
    plans = [_plan(kernel, prefix, name, node, op) for name in names]
    taken = _buffer_names(schedule)
    marks = []
    for one in plans:
        n = sum(1 for t in taken if t.startswith(f"{one.array}_{level}_"))
        buf_name = f"{one.array}_{level}_{n}"
        taken.add(buf_name)
        count = slots if slots is not None else (2 if one.runs > 1 else 1)
        if count not in (1, 2, 3, 4):
            raise ArgumentError(
                f"{op}: slots={count!r} is not supported because a buffer has 1 to "
                "4 slots. Pass 1 (single buffer) or 2 (double buffering)."
            )
        mark = _buffer_mark(
            kernel, spec, one, buf_name, level_index, count, pad, layout, op, phase
        )
        # the copies come from the buffer above, else the array's home
        outer = _enclosing_level(node, one.array) or kernel.arrays[one.array].home
        marks.append(replace(mark, chunks=chunks(spec, outer, level_index, mark)))
    below = isltree.statements_of(node)
    node = _graft(node, marks, prefix)
    schedule = node.get_schedule()
    _reachable(kernel, schedule, spec, marks, op, below)
    if plan == "check":
        memplan.check(spec, schedule, kernel=kernel)
    elif plan:
        schedule = memplan.replan(spec, schedule, kernel=kernel)
    _NAMES[id(schedule)] = (schedule, frozenset(taken))
    while len(_NAMES) > 8:
        del _NAMES[next(iter(_NAMES))]
    new = kernel.with_schedule(
        schedule,
        step(
            op,
            band,
            tuple(names) if len(names) > 1 else names[0],
            level,
            config=spec.name if spec.name in CONFIGS else spec.source,
            depth=depth,
            slots=slots,
            pad=pad or None,
            layout=layout or None,
            phase=phase or None,
            plan=None if plan else False,
        ),
    )
    return new


#: the buffer names of the schedules placement made last, by ``id`` (with the
#: schedule, which is never edited in place): the next placement starts from
#: one of them, and need not read every mark of a network's tree again
_NAMES: dict[int, tuple[isl.Schedule, frozenset[str]]] = {}


def _buffer_names(schedule: isl.Schedule) -> set[str]:
    """The names of the buffers of ``schedule``."""
    known = _NAMES.get(id(schedule))
    if known is not None and known[0] is schedule:
        return set(known[1])
    return set(memplan.buffer_names(schedule))


def _reachable(
    kernel: Kernel,
    schedule: isl.Schedule,
    spec: Spec,
    marks: list,
    op: str,
    below: set[str],
) -> None:
    """Refuse a new buffer (``marks``, now in ``schedule``) in a level that an
    engine already mapped onto it (a ``tensorize`` or ``map_vector`` before
    ``place``) cannot reach. A level no engine reaches (datacenter's ``shared``)
    is a staging level: an inner placement in an engine's level follows, so that
    case, and ``place`` before ``tensorize``, are checked when the schedule is
    compiled. ``below``: the statements below the new marks; only the children
    of the root sequence that run them are walked (the new buffers are active
    nowhere else)."""
    from schedules.accel.levels import misplaced, reached, reached_by_all

    engines = reached(spec)
    if all(m.level in reached_by_all(spec) or m.level not in engines for m in marks):
        return  # no engine refuses these levels: the walk below would find nothing
    new = {m.name for m in marks}
    bad = [
        m
        for m in misplaced(kernel.with_schedule(schedule), spec, below)
        if m.buffer in new and m.level in engines
    ]
    if bad:
        raise PlacementError(bad[0].message(op))


def _level(spec: Spec, level: str, op: str) -> int:
    names = [m.name for m in spec.memory]
    if level not in names:
        raise ArgumentError(
            f"{op}: {spec.name} has no memory level {level!r} because its levels are "
            f"{', '.join(names)}. Use one of its on-chip levels "
            f"({', '.join(m.name for m in spec.sram_levels)})."
        )
    index = names.index(level)
    if index == 0:
        raise ArgumentError(
            f"{op}: {level!r} is DRAM because it is the config's first level, where "
            "the arrays already live. Place buffers in an on-chip level "
            f"({', '.join(m.name for m in spec.sram_levels)})."
        )
    return index


def box_extent(kernel: Kernel, band: str, array: str, depth: int | None = None):
    """The buffer box ``place(kernel, band, array, ..., depth=depth)`` would give
    ``array`` (its extent per dimension), to choose padding before placing."""
    mark = tree.find_band_mark(kernel.schedule, band, "place")
    node, prefix = _position(kernel, mark, band, depth, "place")
    return _plan(kernel, prefix, array, node, "place").box.extent


def _position(kernel, mark, band, depth, op):
    """The node the copies wrap, and the prefix map of that position."""
    band_node = tree.band_below(mark)
    n = band_node.band_n_member()
    depth = n if depth is None else depth
    inner = _split_part(band_node, band)
    if depth > n and inner is not None:  # an earlier placement split the band
        return _position(kernel, inner, band, depth - n, op)
    if not 0 <= depth <= n:
        raise ScheduleError(
            f"{op}: depth {depth} is outside band {band!r} because it has {n} "
            f"members. Pass a depth from 0 to {n}."
        )
    if depth == 0:
        node = _engine_wrapper(mark)
    elif depth == n:
        node = band_node.child(0)
    else:
        members = _members(mark)
        inner = band_node.band_split(depth).child(0)
        text = f"{band}_{members[depth]}({', '.join(members[depth:])})"
        node = inner.insert_mark(isl.Id(text))
    node = isltree.body_of(node)
    return node, F.prefix_map(kernel, node)


def _engine_wrapper(mark):
    """What placing at depth 0 of a band wraps: the band's name mark, or, for a
    band tensorized whole, the ``@tensorize`` mark above it (tensorize leaves
    ``@tensorize -> extension -> sequence -> filter -> name mark``). Buffers
    inserted below that mark put marks between it and its MAC call, which codegen
    reads as a call with nothing to run."""
    node = mark
    T = isl.schedule_node_type
    for kind in (T.filter, T.sequence, T.extension, T.mark):
        if not node.has_parent() or node.parent().get_type() != kind:
            return mark
        node = node.parent()
    name = tree.mark_name(node)
    return node if pm.kind(name) == "tensorize" else mark


def _split_part(band_node, band: str):
    """The name mark of the inner part of ``band`` when a placement split it."""
    node = isltree.body_of(band_node.child(0))
    name = tree.mark_name(node)
    parsed = tree.parse_band_mark(name) if name else None
    if parsed and parsed[0].startswith(f"{band}_") and parsed[1]:
        first = parsed[1][0]
        if parsed[0] == f"{band}_{first}":
            return node
    return None


def _members(mark) -> tuple[str, ...]:
    return tree.parse_band_mark(tree.mark_name(mark))[1]


def _plan(kernel: Kernel, prefix: isl.UnionMap, array: str, node, op: str) -> Plan:
    if array not in kernel.arrays:
        raise ArgumentError(
            f"{op}: there is no array {array!r} because the kernel's arrays are "
            f"{', '.join(kernel.arrays)}. Name one of those."
        )
    hulls = tensorized_hulls(kernel, node, prefix)
    fp = F.footprint(kernel, prefix, array, "all", hulls)
    if fp is None:
        raise ArgumentError(
            f"{op}: no statement below the position accesses {array} because the "
            f"statements there are {', '.join(F.statements_below(prefix))}. Place an "
            "array they use."
        )
    box = F.box_of(fp, op)
    wfp = F.footprint(kernel, prefix, array, "write", hulls)
    wbox = F.box_of(wfp, op) if wfp is not None else None
    need_in, need_out = _flows(kernel, prefix, array)
    if need_out and wbox is not None and not wbox.exact:
        need_in = True  # write back the box: its unwritten part must be current
    shape = kernel.arrays[array].concrete_shape({})
    domain = prefix.range()
    tiles = domain if isinstance(domain, isl.Set) else _one_set(domain)
    clamp = not F.inside_extents(box, tiles, shape)
    runs = tiles.count_val().to_python() if tiles.dim(isl.dim_type.set) else 1
    return Plan(array, box, wbox if need_out else None, need_in, need_out, clamp, runs)


def _one_set(uset: isl.UnionSet) -> isl.Set:
    sets: list[isl.Set] = []
    uset.foreach_set(sets.append)
    out = sets[0]
    for s in sets[1:]:
        out = out.union(s)
    return out


def _flows(kernel: Kernel, prefix: isl.UnionMap, array: str) -> tuple[bool, bool]:
    """``(copy in, copy out)``: a value flows into a tile from outside it (or is
    live-in); a value written in a tile flows out of it (or is live-out)."""
    deps = kernel.deps
    below = prefix.domain()
    need_in = need_out = False
    flow = kernel.analysis("placement.flow", lambda k: k.deps.by_array("flow")).get(
        array
    )
    if flow is not None:
        # a flow crosses the tile boundary when one end is outside the position,
        # or both are below it in different tiles: decided on the tiles' prefix
        # values rather than on the pairs of instances that share a tile
        into, out_of = flow.intersect_range(below), flow.intersect_domain(below)
        inside = out_of.intersect_range(below)
        tiles = inside.apply_domain(prefix).apply_range(prefix)
        crossing = not tiles.is_subset(tiles.domain().identity())
        need_in = crossing or not into.subtract_domain(below).is_empty()
        need_out = crossing or not out_of.subtract_range(below).is_empty()
    live_in = deps.live_in_accesses
    if not need_in and not live_in.is_empty():
        readers = _readers_of(live_in, array)
        need_in = not readers.intersect(below).is_empty()
    if not need_out:
        writers = F.accesses(kernel, array, "write").domain()
        last = deps.live_out_instances.intersect(writers)
        need_out = not last.intersect(below).is_empty()
    return need_in, need_out


def _readers_of(live_in: isl.UnionMap, array: str) -> isl.UnionSet:
    maps: list[isl.Map] = []
    live_in.foreach_map(maps.append)
    out = None
    for m in maps:
        if m.get_tuple_name(isl.dim_type.out) != array:
            continue
        inst = isl.UnionSet.from_set(m.domain().unwrap().domain())
        out = inst if out is None else out.union(inst)
    return out if out is not None else isl.UnionSet.empty(live_in.get_space().params())


def tensorized_hulls(
    kernel: Kernel, node: isl.ScheduleNode, prefix: isl.UnionMap
) -> dict[str, isl.Map]:
    """For each tensorized statement below ``node``: the instances the MAC array
    runs per tile of this position (the rectangular hull of each of its tiles)."""
    out: dict[str, isl.Map] = {}
    n = _prefix_width(prefix)
    for sub in tree.walk(node):
        name = tree.mark_name(sub)
        if not name or pm.kind(name) != "tensorize":
            continue
        t = pm.TensorizeMark.parse(name)
        hull = kernel.analysis(
            ("placement.hull", name), lambda k, t=t: _mark_hull(k, t)
        )
        extra = hull.dim(isl.dim_type.in_) - n
        out[t.stmt] = hull.project_out(isl.dim_type.in_, n, extra) if extra else hull
    return out


def _mark_hull(kernel: Kernel, t: pm.TensorizeMark) -> isl.Map:
    """The hull of a ``@tensorize`` mark's tiles (the same for every placement
    below it: memoised by the mark's text with the program)."""
    lo, hi = pm.pw_multi_aff(t.lo), pm.pw_multi_aff(t.hi)
    return _hull(lo, hi, kernel.statement(t.stmt))


def _hull(lo: isl.PwMultiAff, hi: isl.PwMultiAff, stmt) -> isl.Map:
    n = lo.dim(isl.dim_type.out)
    box = F.Box(
        stmt.name,
        tuple(lo.get_at(d) for d in range(n)),
        tuple(hi.get_at(d) for d in range(n)),
        (),
        False,
    )
    domain = lo.domain()
    space = isl.Space.map_from_domain_and_range(
        domain.get_space(), stmt.domain.get_space()
    )
    like = isl.Map.universe(space)
    return F.box_map(box, like).intersect_domain(domain)


def _prefix_width(prefix: isl.UnionMap) -> int:
    maps: list[isl.Map] = []
    prefix.foreach_map(maps.append)
    return maps[0].dim(isl.dim_type.out) if maps else 0


def _buffer_mark(
    kernel, spec, plan, name, level_index, slots, pad, layout, op, phase=None
):
    array = kernel.arrays[plan.array]
    extent = plan.box.extent
    padded = list(extent)
    for d, size in pad.get(plan.array, {}).items():
        if not (isinstance(d, int) and 0 <= d < len(extent)) or not (
            isinstance(size, int) and size >= extent[d]
        ):
            raise ArgumentError(
                f"{op}: padding {pad[plan.array]} of {plan.array} is not valid because "
                f"its buffer box is {extent} and a padded dimension must exist and "
                "be at least as long as the box. Pad a dimension to a larger extent."
            )
        padded[d] = size
    order = layout.get(plan.array, tuple(range(len(extent))))
    if sorted(order) != list(range(len(extent))):
        raise ArgumentError(
            f"{op}: layout {order} of {plan.array} is not valid because it must list "
            f"each of its {len(extent)} dimensions once, outermost first. Pass a "
            "permutation such as (0, 2, 3, 1)."
        )
    factors = _phases(plan.array, (phase or {}).get(plan.array, {}), extent, op)
    halves = [-(-e // f) for e, f in zip(padded, factors)]
    inner = row_major([halves[d] for d in order])
    st = [0] * len(extent)
    for pos, d in enumerate(order):
        st[d] = inner[pos]
    st = tuple(st)
    total = math.prod(halves)
    pst = [0] * len(extent)
    for d in reversed(range(len(extent))):
        if factors[d] > 1:
            pst[d] = total
            total *= factors[d]
    span = 1 + sum((e - 1) * s for e, s in zip(extent, st)) if extent else 1
    if any(f > 1 for f in factors):  # every phase whole: MAC rows run over padding
        span = total
    align = spec.memory[level_index].alignment_bytes
    isz = array.dtype.itemsize
    slot = memplan.round_up(span * isz, align) // isz
    wlo = whi = ""
    if plan.write_box is not None:
        wlo, whi = str(plan.write_box.multi("lo")), str(plan.write_box.multi("hi"))
    return pm.BufferMark(
        name=name,
        array=plan.array,
        level=spec.memory[level_index].name,
        level_index=level_index,
        elem_bytes=isz,
        slots=slots,
        extent=extent,
        strides=st,
        slot=slot,
        copy_in=plan.copy_in,
        copy_out=plan.copy_out,
        clamp=plan.clamp,
        lo=str(plan.box.multi("lo")),
        hi=str(plan.box.multi("hi")),
        wlo=wlo,
        whi=whi,
        phases=tuple(factors) if any(f > 1 for f in factors) else (),
        pstrides=tuple(pst) if any(f > 1 for f in factors) else (),
    )


def _phases(array: str, want: dict, extent, op: str) -> list[int]:
    """Polyphase factor per dimension of ``array``'s buffer (1: stored plainly)."""
    factors = [1] * len(extent)
    for d, f in want.items():
        if not (isinstance(d, int) and 0 <= d < len(extent)) or not (
            isinstance(f, int) and f >= 1
        ):
            raise ArgumentError(
                f"{op}: phase {want} of {array} is not valid because its buffer box "
                f"is {extent} and a polyphase dimension must exist with an integer "
                "factor of at least 1. Pass {dim: 2} for the rows of a stride-2 "
                "convolution."
            )
        factors[d] = f
    return factors


#: the least a call of a cut copy moves. Without it a fused attention on
#: datacenter (tests/schedules/accel/test_attention_pipeline.py) had its 8 KiB
#: operand tiles cut into three calls, and the search took another tiling,
#: predicted at 2,161 cycles, that ran 4,070: the model misses something there
#: (the scalar core waits on a full queue between tiles); open
MIN_CALL_BYTES = 4096


def _calls_to_reach(calls: int, want: float, rate: float) -> int:
    """How many calls of ``rate`` bytes per cycle reach ``want``, at most
    ``calls``; rates below a byte per cycle allowed (a slow bank)."""
    return int(min(calls, max(1, math.ceil(want / rate - 1e-9))))


def worth_cutting(nbytes, calls, rate, want, setup):
    """Whether a copy of ``nbytes`` is cut into ``calls`` DMA calls on as many
    channels: when the time the copy saves running alone (``nbytes / rate``
    on one channel, ``nbytes / min(calls * rate, want)`` on ``calls``) pays for
    the channel time of the calls added (``(calls - 1) * setup``) and each
    call moves :data:`MIN_CALL_BYTES` at least. Works on numbers and on numpy
    arrays (the cost model's candidates)."""
    saved = nbytes / rate - nbytes / np.minimum(calls * rate, want)
    return (saved >= (calls - 1) * setup) & (nbytes >= calls * MIN_CALL_BYTES)


def free_rates(spec: Spec, a, b) -> tuple[float, float]:
    """A copy between memory levels ``a`` and ``b``, the banks aside: a
    channel's bytes per cycle (at most the SRAM ends') and the bandwidth the
    copy wants (the slower end's)."""
    rate = min(
        [spec.dma.bytes_per_cycle]
        + [m.bytes_per_cycle for m in (a, b) if m.kind == "sram"]
    )
    return rate, min(m.bytes_per_cycle for m in (a, b))


def copy_rates(spec: Spec, a, b) -> tuple[float, float, int]:
    """A copy between memory levels ``a`` and ``b``: a channel's bytes per
    cycle (at most the SRAM ends'), the bandwidth the copy wants (the slower
    end's) and the calls that reach it, at most the channels. An SRAM end of
    several banks gives at most one bank's bandwidth (the banks are
    block-partitioned, docs/accelerator.md: a buffer smaller than a bank sits
    in one, datacenter's staged operands and homes in its 64 B/cycle
    ``shared`` banks)."""
    rate, want = free_rates(spec, a, b)
    n = min(spec.dma.channels, max(1, -(-int(want) // int(rate))))
    banked = [
        m.bytes_per_cycle / m.banks for m in (a, b) if m.kind == "sram" and m.banks > 1
    ]
    bank = min(banked, default=float("inf"))
    if bank < want:
        rate, want = min(rate, bank), bank
        n = _calls_to_reach(n, want, rate)
    return rate, want, n


def chunks(spec: Spec, outer: int, inner: int, mark: pm.BufferMark) -> int:
    """DMA calls per copy: enough channels to reach the slower end's bandwidth
    (DRAM's 151.7 B/cycle needs three 64 B/cycle channels), when that pays
    for their set-up (:func:`worth_cutting`; :func:`copy_rates`)."""
    rate, want, n = copy_rates(spec, spec.memory[outer], spec.memory[inner])
    box = mark.elem_bytes
    for e in mark.extent:
        box *= e
    if n > 1 and not worth_cutting(box, n, rate, want, spec.dma.setup_cycles):
        return 1
    return n


def _enclosing_level(node: isl.ScheduleNode, array: str) -> int:
    """The level of the innermost buffer of ``array`` above ``node`` (0: DRAM)."""
    while node.has_parent():
        node = node.parent()
        name = tree.mark_name(node)
        if name and pm.kind(name) == "buffer":
            b = pm.BufferMark.parse(name)
            if b.array == array:
                return b.level_index
    return 0


def row_major(extent: Sequence[int]) -> tuple[int, ...]:
    out = []
    acc = 1
    for e in reversed(extent):
        out.append(acc)
        acc *= e
    return tuple(reversed(out))


def _graft(node, marks, prefix):
    """Insert the copy statements around ``node`` and the ``@buffer`` marks."""
    tiles = prefix.range()
    tiles = tiles if isinstance(tiles, isl.Set) else _one_set(tiles)
    for mark in marks:
        valid = pm.pw_multi_aff(mark.lo).domain().intersect(tiles)
        before = _extension(valid, pm.IN + mark.name)
        node = node.graft_before(before)
        after = _extension(valid, pm.OUT + mark.name)
        node = node.graft_after(after)
    ext = node
    while ext.get_type() != isl.schedule_node_type.extension:
        ext = ext.parent()
    for mark in marks:
        ext = ext.insert_mark(isl.Id(mark.text()))
    return ext


def _extension(tiles: isl.Set, stmt: str) -> isl.ScheduleNode:
    """An extension node ``{ [p] -> stmt[p] : p in tiles }``."""
    ident = isl.Map.identity(isl.Space.map_from_set(tiles.get_space()))
    ext = ident.intersect_domain(tiles).set_tuple_name(isl.dim_type.out, stmt)
    return isl.ScheduleNode.from_extension(isl.UnionMap.from_map(ext))
