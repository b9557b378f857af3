"""The analytical cost model of a tiled, placed layer on one hardware description.

Tile sizes are sympy symbols (``T_i``, ``T_S1_k``); the model builds, per array,
its buffer extents and how often its copy runs, and per statement its MAC-array,
vector or scalar time per tile, as sympy expressions, then evaluates them over a
grid of candidate sizes with numpy (``lambdify``). The timing follows the
simulator's rules (``docs/accelerator.md``):

- a copy of ``b`` bytes keeps a DMA channel busy ``setup x descriptors +
  b / min(channel, SRAM)`` cycles and takes ``b`` of the DRAM bandwidth; its
  data is there ``latency`` cycles later, while the channel issues the next
  copy's requests; copies run on all channels at once, except that with two
  channels or more the stores take the last half and the loads issued while a
  store waits for its compute the first half (the simulator's channel choice:
  :func:`schedules.accel.terms.channel_time`);
- a MAC call ``m x n x k`` costs what its dataflow says
  (:func:`accelerator.hardware.dataflow.mac_timing`: folds of the array, each
  loading, streaming and draining; with double buffering calls pipeline, so each
  costs its steady time and the statement pays the first load and the last tail
  once);
- a vector operation over ``e`` elements costs ``ceil(e/lanes) x`` its ops'
  cycles, plus, for a reduction whose tile has one output, one reduction step
  (its other tiles run the reduction loops outside the output loops, so each lane
  accumulates its own element);
- the scalar core issues every call (``issue_cycles``) and runs unmapped
  statements instance by instance.

With double buffering the engines overlap, so a layer takes the busiest engine's
total (MAC array, vector unit, DMA: the larger of DRAM bytes over its bandwidth and
the busiest channel group's time, scalar core), plus the first tile's loads before
anything can start and the last tile's stores after everything else. DRAM is shared
by the transfers in flight max-min fairly, as the simulator does, so its time is
bytes over bandwidth whatever the issue order (:func:`schedules.accel.terms.overlap`
says what it assumes).

This module builds the expressions (:class:`TileBuffer` per array, the engines'
cycles per statement); :mod:`schedules.accel.estimate` evaluates them over a grid
(:meth:`LayerModel.evaluate`, inherited from its :class:`GridEvaluation`),
composing the numeric terms of :mod:`schedules.accel.terms`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import sympy as sp

from accelerator.hardware.spec import OP_CLASSES, Spec
from polyc.errors import PlacementError
from polyc.ir import macmap
from polyc.ir.expr import ops_count
from polyc.ir.kernel import Kernel, Statement
from schedules.accel import exprs, levels
from schedules.accel.estimate import GridEvaluation
from schedules.accel.evaluate import numeric
from schedules.accel.layers import Layer, density, touches
from schedules.accel.resident import read_later, resident_arrays
from schedules.accel.structure import Polyphase, Structure, polyphase
from schedules.accel.tilevars import TileVar, tile_var


@dataclass(frozen=True)
class TileBuffer:
    """One array's buffer at the engines' level, as expressions of the tile sizes.

    Its copy sits below the innermost tile loop that moves its box, and runs
    ``copies`` times; ``whole`` is the box of the whole layer (what a buffer
    staged above the tile loops holds)."""

    name: str
    extents: tuple[sp.Expr, ...]  # the box of one copy, per dimension
    whole: tuple[int, ...]
    shape: tuple[int, ...]  # the array's
    copies: sp.Expr
    itemsize: int
    written: bool  # by some statement of the layer
    read: bool
    users: tuple[Statement, ...]  # the layer's statements that touch it
    streamed: bool  # copied inside a private loop of its only user
    copy_in: bool  # filled: the layer reads values it does not produce
    copy_out: bool  # stored: an output, or a temporary read after the layer

    @property
    def directions(self) -> int:
        """How many ways the copy runs per tile: in, out, or both."""
        return int(self.copy_in) + int(self.copy_out)

    @property
    def whole_bytes(self) -> float:
        """Bytes a staged operand moves from DRAM: its whole box, clipped to the
        array."""
        return float(
            math.prod(min(e, d) for e, d in zip(self.whole, self.shape)) * self.itemsize
        )


class LayerModel(GridEvaluation):
    """Expressions of one layer and structure (see the module docstring)."""

    def __init__(
        self, kernel: Kernel, layer: Layer, spec: Spec, st: Structure, level: int
    ):
        self.kernel, self.layer, self.spec, self.st = kernel, layer, spec, st
        self.level = spec.memory[level]
        # what the model builds once (expressions, MAC mappings, bank terms):
        # the models of other hardware points that share it (:meth:`on`) share
        # these dicts
        self._built: dict = {}
        self._timings: dict = {}
        self._bank_terms: dict = {}
        placed = levels.assign(layer, st, spec, level)
        if isinstance(placed, levels.Conflict):
            raise PlacementError(
                f"place: {layer.name} has no level for {placed.array} because "
                f"{placed.because()}. Run those statements on other engines."
            )
        #: the level index of each array's buffer (where its engines reach it)
        self.levels: dict[str, int] = placed
        self.vars = list(st.free)
        self.syms = [v.symbol(layer) for v in self.vars]
        self._phases = {}
        for name in st.phased:
            stmt = kernel.statement(name)
            ph = polyphase(stmt, st.groups_of(name))
            if ph is not None:
                self._phases[ph.array] = ph

    def on(self, spec: Spec) -> LayerModel:
        """This model for ``spec``, a description with the same
        :func:`accelerator.hardware.spec.model_view` (other SRAM capacities or
        DRAM bandwidths): the expressions and MAC mappings built so far and later
        are shared, the evaluation reads ``spec``."""
        other = copy.copy(self)  # the memo dicts stay this model's own objects
        other.spec = spec
        other.level = spec.memory[spec.level_index(self.level.name)]
        return other

    @property
    def buffers(self) -> dict[str, TileBuffer]:
        """Each array's buffer (:class:`TileBuffer`), built on first use: the
        search bounds a structure by its engines' work (:meth:`floor`) first."""
        return self._once(
            ("buffers",), lambda: {n: self._buffer(n) for n in self.layer.arrays}
        )

    @property
    def resident(self) -> frozenset[str]:
        """The arrays the layer's engines use at their home (:func:`resident_arrays`)."""
        return self._once(
            ("resident",),
            lambda: resident_arrays(self.kernel, self.layer, self.st, self.levels),
        )

    # tile sizes ----------------------------------------------------------------------
    def size(self, stmt: Statement, it: str, inside: bool = True):
        """The extent of ``it`` in one tile of ``stmt`` (the full range when the loop
        is not tiled or runs below the copy: ``inside=False``)."""
        key = ("size", stmt.name, it, inside)
        memo = self._built
        if key not in memo:  # inline _once: the model asks this ~50,000 times
            var = self._var(stmt, it)
            if var is None or not inside:
                memo[key] = sp.Integer(self.layer.extent(stmt, it))
            else:
                memo[key] = self.syms[self.vars.index(var)]
        return memo[key]

    def _var(self, stmt: Statement, it: str) -> TileVar | None:
        return self._once(("var", stmt.name, it), lambda: self._find_var(stmt, it))

    def _find_var(self, stmt: Statement, it: str) -> TileVar | None:
        v = tile_var(self.layer, stmt, it)
        return v if v in self.vars else None

    def _once(self, key, build):
        """``build()``, built once per model: the model never changes once made
        (search caches it), and sympy takes longer to build its expressions than
        the whole grid takes to evaluate them."""
        memo = self._built
        if key not in memo:
            memo[key] = build()
        return memo[key]

    def chain(self) -> list[Statement]:
        """The vector statements between the layer's QK^T and PV, when it chains
        them through a softmax (:func:`schedules.accel.pipeline.chain`), else
        none; built once (every :meth:`evaluate` asks)."""
        from schedules.accel.pipeline import chain

        return self._once(("chain",), lambda: chain(self.layer, dict(self.st.engine)))

    def serial_chain(self) -> list[Statement]:
        """The vector statements between the layer's first MAC statement and a
        later one that reads their result, softmax or not (each tile's MAC,
        vector and MAC work then run in turn unless issued a tile ahead,
        :func:`schedules.accel.terms._chained`); built once."""
        from schedules.accel.pipeline import chain

        return self._once(
            ("serial_chain",),
            lambda: chain(self.layer, dict(self.st.engine), softmax=False),
        )

    @property
    def _attention(self) -> bool:
        """Whether the layer chains QK^T, a softmax and PV (asked per access)."""
        from schedules.accel.pipeline import _softmax

        return self._once(("attention",), lambda: _softmax(self.chain()))

    @property
    def _lifted(self) -> set[str]:
        from schedules.accel.pipeline import lifted

        return self._once(("lifted",), lambda: lifted(self.layer, self.st))

    def pipelined_trips(self):
        """Tiles of the loop a structure's ``ahead`` statements run a tile early
        along (the innermost shared loop; one when it is not tiled)."""
        first = self.layer.stmts[0]
        it = first.iterators[self.st.order[-1]]
        return self.trips(first, it) if self._var(first, it) else sp.Integer(1)

    def trips(self, stmt: Statement, it: str):
        return exprs.trips(self.layer.extent(stmt, it), self.size(stmt, it))

    def loops(self, stmt: Statement) -> list[str]:
        """Tiled loops of ``stmt``, outermost first (shared in the chosen order)."""
        shared = [stmt.iterators[p] for p in self.st.order]
        private = [it for it in self.layer.private(stmt) if self._var(stmt, it)]
        return [it for it in shared if self._var(stmt, it)] + private

    def tiles(self, stmt: Statement):
        return self._once(("tiles", stmt.name), lambda: self._tiles(stmt))

    def _tiles(self, stmt: Statement):
        out = sp.Integer(1)
        for it in self.loops(stmt):
            out *= self.trips(stmt, it)
        return out

    # arrays ----------------------------------------------------------------------------
    def _buffer(self, name: str) -> TileBuffer:
        """The buffer of array ``name`` (see :class:`TileBuffer`)."""
        arr = self.kernel.arrays[name]
        shape = tuple(arr.concrete_shape({}))
        users = [s for s in self.layer.stmts if name in _arrays_of(s)]
        copies, inside, streamed = self._copy_site(name, users)
        extents = [
            exprs.largest(tuple(per)) if len(per) > 1 else per[0]
            for per in self._box(name, users, inside, shape)
        ]
        # the whole layer's box (a buffer staged above the tile loops)
        outside = {s.name: set() for s in users}
        whole = [
            max(int(e) for e in per) for per in self._box(name, users, outside, shape)
        ]
        written = any(s.target.array == name for s in users)
        read = any(ld.array == name for s in users for ld in s.reads)
        return TileBuffer(
            name,
            tuple(extents),
            tuple(whole),
            shape,
            copies,
            arr.dtype.itemsize,
            written,
            read,
            tuple(users),
            streamed,
            copy_in=read and not self._initialised(name),
            copy_out=written and self._stored(name),
        )

    def _copy_site(self, name: str, users: list[Statement]):
        """Where the copy of ``name`` sits: below the innermost tiled loop that
        moves its box (inside a private loop when its only user streams it
        through one). Returns ``(copies, loops above it per user, streamed)``."""
        touching = {
            s.name: [it for it in self.loops(s) if touches(s, name, it)] for s in users
        }
        copies, inside = sp.Integer(1), {}
        streamed = len(users) == 1 and any(
            it in self.layer.private(users[0]) for it in touching[users[0].name]
        )
        if streamed:
            s = users[0]
            last = touching[s.name][-1]
            above = self.loops(s)[: self.loops(s).index(last) + 1]
            for it in above:
                copies *= self.trips(s, it)
            inside[s.name] = set(above)
            if not self.st.ahead or self._attention:
                return copies, inside, streamed
            # where the private loop runs whole (one trip) it tiles nothing: the
            # placement hoists the copy below the touching loop outside it, so
            # the loops between (an MLP's hidden tiles, which fc1's input
            # does not move with) do not copy it again. Only for a fused MLP
            # so far: elsewhere the other terms were fitted with it charged
            outer = touching[s.name][:-1]
            prev = sp.Integer(1)
            if outer:
                for it in self.loops(s)[: self.loops(s).index(outer[-1]) + 1]:
                    prev *= self.trips(s, it)
            whole = exprs.unevaluated(sp.Min, 1, self.trips(s, last) - 1)
            copies = prev + (copies - prev) * whole
            return copies, inside, streamed
        first = users[0]
        moving = [
            p
            for p in self.st.order
            if any(
                self._var(s, s.iterators[p]) and touches(s, name, s.iterators[p])
                for s in users
            )
        ]
        cut = self.st.order.index(moving[-1]) + 1 if moving else 0
        if self.st.ahead and name in self._lifted:
            # above the pipelined loop: one buffer for all its tiles
            cut = min(cut, len(self.st.order) - 1)
        for p in self.st.order[:cut]:
            if self._var(first, first.iterators[p]):
                copies *= self.trips(first, first.iterators[p])
        for s in users:
            inside[s.name] = {s.iterators[p] for p in self.st.order[:cut]}
        return copies, inside, streamed

    def _box(self, name: str, users, inside: dict, shape) -> list[list[sp.Expr]]:
        """Per dimension of ``name``, the extent of each access to it in a box
        whose loops ``inside[stmt]`` are tiled (the others run whole)."""
        out = []
        for d in range(len(shape)):
            accesses = [
                (s, ld.index[d])
                for s in users
                for ld in (s.target, *s.reads)
                if ld.array == name
            ]
            per = [self._extent(s, a, inside[s.name], shape[d]) for s, a in accesses]
            # accesses a constant apart (q, k and v as slices 0, 1, 2 of one
            # projection's output; the two halves a concatenation writes): the
            # box is their hull, as placement takes it. Only in an attention
            # until the fourteenth session: a tile of a concatenation along its
            # dimension wrote two slabs of the output seven rows apart, whose
            # hull placement loads and stores, and the model saw a quarter of
            # those bytes (fuzz seed 962, case 40: predicted 1,048, ran 7,918)
            # Likewise accesses of one form whose statements run over
            # different ranges (a depthwise convolution split across the
            # engines: channels 0-4 of each 8 on the vector unit, 5-7 on the
            # MAC array): each access starts where its statement's ranges
            # do, and the box is their hull. Until the
            # fifteenth session the box was the larger part's, and such a
            # layer was predicted 39,600 DRAM bytes for the 63,360 it moves
            # (hf-mobilenetv2's stride-2 depthwise convolution of 48 channels
            # on edge-npu: predicted 3,504 cycles, ran 5,080)
            starts = [self._start(s, a, inside[s.name]) for s, a in accesses]
            if len({a.terms for _, a in accesses}) == 1 and len(set(starts)) > 1:
                ends = [b + e for b, e in zip(starts, per)]
                top = sp.Max(*ends) - min(starts)
                per = [sp.Min(top, shape[d])]
            out.append(per)
        return out

    def _start(self, stmt: Statement, aff, inside: set) -> int:
        """The least value of ``aff`` over ``stmt``'s points in a box whose
        loops ``inside`` are tiled, counted from the tiles' origin (which the
        layer's statements share): each loop that runs whole in the box at
        the end of its range that makes its term least."""
        if not aff.is_linear:
            return 0
        out = aff.const
        for it, coef in aff.terms:
            if it in inside and self._var(stmt, it):
                continue  # tiled: from the tile's origin
            lo = self.layer.lo(stmt, it)
            out += coef * (lo if coef > 0 else lo + self.layer.extent(stmt, it) - 1)
        return out

    def _extent(self, stmt: Statement, aff, inside: set, dim: int):
        if not aff.is_linear:
            return sp.Integer(dim)
        coefs = dict(aff.terms)
        terms = []
        for it in stmt.iterators:
            coef = abs(coefs.get(it, 0))
            if coef:
                inner = it in inside or not self._var(stmt, it)
                terms.append((coef, self.size(stmt, it, inner)))
        return exprs.span(tuple(terms))

    # engines ---------------------------------------------------------------------------
    def mac_cycles(self, stmt: Statement):
        """``(cycles per tile, calls per tile)`` of a tensorized statement: its
        calls back to back, each at its steady time (see :meth:`mac_once`)."""
        return self._once(("mac_cycles", stmt.name), lambda: self._mac_cycles(stmt))

    def _mac_cycles(self, stmt: Statement):
        m_g, n_g, k_g = self.st.groups_of(stmt.name)
        calls = sp.Integer(1)
        used = set(m_g + n_g + k_g)
        for it in stmt.iterators:
            if it not in used:
                calls *= self.size(stmt, it)
        return calls * self._mac_timing(stmt).steady, calls

    def mac_once(self, stmt: Statement):
        """What a tensorized statement's MAC calls pay once, not per call: the
        first call's load on an idle array (once per output tile when the array's
        output path requantizes each) and the last one's tail (calls back to
        back pipeline, :func:`accelerator.hardware.dataflow.mac_timing`)."""
        t = self._mac_timing(stmt)
        return sp.sympify(t.first * self.mac_chains() + t.tail)  # 0 undoubled

    def mac_load(self, stmt: Statement):
        """The cycles a tensorized statement's call takes to shift its held
        operand into the array (0 output-stationary, and 0 on an array without a
        second register, whose calls count their loads in their folds): what it
        hides when it waits for its other operands
        (:func:`schedules.accel.work.in_order`)."""
        if not self.spec.mac_array.double_buffered:
            return sp.Integer(0)
        return sp.sympify(self._mac_timing(stmt).load)

    def mac_tail(self, stmt: Statement):
        """The cycles from a tensorized statement's last call freeing the array
        to its results being ready (the array's skew): what a statement on
        another engine that reads them waits beyond the array's busy time."""
        return sp.sympify(self._mac_timing(stmt).tail)

    def shared_tiles(self, stmt: Statement | None = None):
        """The tiles of the layer's shared loops that ``stmt`` runs in (by
        default the first statement's: every statement runs once in each, the
        tiles of the chain :func:`schedules.accel.work.in_order` schedules)."""
        stmt = self.layer.stmts[0] if stmt is None else stmt
        return self._once(("shared tiles", stmt.name), lambda: self._shared(stmt))

    def _shared(self, stmt: Statement):
        private = set(self.layer.private(stmt))
        out = sp.Integer(1)
        for it in self.loops(stmt):
            if it not in private:
                out *= self.trips(stmt, it)
        return out

    def mac_chains(self):
        """The layer's chains of MAC calls back to back: the output path's op after
        each output tile (pc_mac_output) ends one, since the simulator overlaps a
        call's load only with a MAC call before it; else the layer is one chain."""
        outs = [o for o in self.layer.stmts if self.st.engine_of(o.name) == "mac_out"]
        return self.tiles(outs[0]) if outs else sp.Integer(1)

    def _mac_timing(self, stmt: Statement):
        """The dataflow's timing of one MAC call of ``stmt``, over tile symbols
        (built once per statement: every :meth:`evaluate` asks for it)."""
        memo = self._timings
        if stmt.name not in memo:
            memo[stmt.name] = self._timing_of(stmt)
        return memo[stmt.name]

    def _timing_of(self, stmt: Statement):
        from schedules.accel.tensorize import contraction

        a = self.spec.mac_array
        m, n, k = self.call_extents(stmt)
        rate = a.dtypes[contraction(stmt).operand].macs_per_cycle
        rate = sp.Rational(rate).limit_denominator(64)
        return exprs.timing(a, m, n, k, rate)

    def call_extents(self, stmt: Statement):
        """The rows, columns and K of one ``pc_mac`` call of ``stmt``: its M, N,
        K extents, with M and N exchanged when the call exchanges the operands
        (``C^T = B^T A^T``)."""
        m, n, k = self.mac_extents(stmt)
        return (n, m, k) if stmt.name in self.st.exchanged else (m, n, k)

    def mac_extents(self, stmt: Statement):
        """The M, N, K extents of one MAC call of ``stmt``, over tile symbols."""
        ext = {}
        for role, g in zip("mnk", self.st.groups_of(stmt.name)):
            if not g:
                ext[role] = sp.Integer(1)
            elif len(g) == 1:
                ext[role] = self.size(stmt, g[0])
            elif role == "k" or stmt.name not in self.st.pitched:
                # a fused K is whole in every tile (its pitches are exact spans,
                # also when A reads its outer iterator by another pitch); so is
                # the inner iterator of an M fused over a compact output, which
                # A reads at its own pitch (polyc.ir.macmap, the M split)
                ext[role] = sp.Mul(*(self.size(stmt, it) for it in g))
            else:
                pitch = self.pitch(stmt)
                ext[role] = (self.size(stmt, g[0]) - 1) * pitch + self.size(stmt, g[1])
        return ext["m"], ext["n"], ext["k"]

    def pitch(self, stmt: Statement):
        """Row pitch of the A operand's buffer along the inner fused M iterator."""
        return self._once(("pitch", stmt.name), lambda: self._pitch(stmt))

    def _pitch(self, stmt: Statement):
        from schedules.accel.tensorize import contraction

        con = contraction(stmt)
        a = stmt.reads[con.a]
        w = self.st.groups_of(stmt.name)[0][-1]
        buf = self.buffers[a.array]
        ph = self._phases.get(a.array)
        if ph is not None:
            return ph.pitch(self._padded(ph, buf.extents[ph.inner]))
        for d, aff in enumerate(a.index):
            if aff.coefficient(w):
                return buf.extents[d]
        return sp.Integer(1)

    @staticmethod
    def _padded(ph: Polyphase, extent):
        return ph.multiple * exprs.unevaluated(sp.ceiling, extent / ph.multiple)

    # the MAC mapping at one point ------------------------------------------------------
    def mac_mapping(self, stmt: Statement, point: dict):
        """:func:`polyc.ir.macmap.check` of a tensorized statement at one point of the
        grid (``{symbol: tile size}``): its operands through the buffers the
        placement would give them there (box extents, the output row padded to
        A's pitch, A's phases, channels-last layouts), so the search proposes
        only mappings the code generator emits. Returns the dimensions or the
        :class:`polyc.ir.macmap.Refusal`. Memoised per point: structures that
        differ only in slots share this model and check the same points."""
        key = ("mac_mapping", stmt.name, *(point[sym] for sym in self.syms))
        return self._once(key, lambda: self._mac_mapping(stmt, point))

    def _mac_mapping(self, stmt: Statement, point: dict):
        from schedules.accel.tensorize import contraction

        con = contraction(stmt)
        memo: dict = {}

        def num(e) -> int:
            return round(float(numeric(e, point, memo)))

        loads = {"c": stmt.target, "a": stmt.reads[con.a], "b": stmt.reads[con.b]}
        ops = {key: self._operand(stmt, ld.array, ld, num) for key, ld in loads.items()}
        extents, exact = {}, {}
        for it in stmt.iterators:
            full = self.layer.extent(stmt, it)
            extents[it] = min(num(self.size(stmt, it)), full)
            exact[it] = full % extents[it] == 0
        m, n, k = self.st.groups_of(stmt.name)
        return macmap.check(stmt.name, {"m": m, "n": n, "k": k}, ops, extents, exact)

    def _operand(self, stmt: Statement, name: str, ld, num) -> macmap.Operand:
        """``ld`` through the buffer of ``name`` as :func:`schedules.place` lays
        it out (the strides of ``placement._buffer_mark``)."""
        buf = self.buffers[name]
        if name in self.resident:  # at its home: the whole array, row-major
            box = buf.shape
        else:
            box = tuple(num(e) for e in buf.extents)
        padded = list(box)
        factors = [1] * len(padded)
        ph = self._phases.get(name)
        if ph is not None:
            factors[ph.dim] = ph.factor
            padded[ph.inner] = -(-padded[ph.inner] // ph.multiple) * ph.multiple
        if stmt.name in self.st.pitched and name == stmt.target.array:
            w = self.st.groups_of(stmt.name)[0][-1]
            for d, aff in enumerate(stmt.target.index):
                if aff.coefficient(w):
                    padded[d] = max(
                        padded[d], num(self.pitch(stmt)), aff.coefficient(w)
                    )
        order = dict(self.st.layouts).get(name, tuple(range(len(padded))))
        strides = [0] * len(padded)
        step = 1
        for d in reversed(order):
            strides[d] = step
            step *= -(-padded[d] // factors[d])
        phases = tuple(factors) if any(f > 1 for f in factors) else ()
        return macmap.Operand(name, ld.index, tuple(strides), phases, box)

    def vector_cycles(self, stmt: Statement):
        return self._once(("vector", stmt.name), lambda: self._vector_cycles(stmt))

    def _vector_cycles(self, stmt: Statement):
        v = self.spec.vector
        elements = sp.Integer(1)
        for it in stmt.iterators:
            elements *= self.size(stmt, it)
        # the vector unit runs a tile's points, not its box: a padded
        # convolution's taps that fall in the padding are no instances (the
        # MAC array runs the hull instead). On average a tile holds the
        # domain's share of its box
        elements *= density(self.layer, stmt)
        ops = ops_count(stmt.body)
        per = sum(ops.get(k, 0) * v.cycles[k] for k in OP_CLASSES) or 1
        cycles = exprs.unevaluated(sp.ceiling, elements / v.lanes) * per
        if stmt.reduction is not None:
            red = sp.Integer(1)
            target = {n for a in stmt.target.index for n in a.names()}
            for it in stmt.iterators:
                if it not in target:
                    red *= self.size(stmt, it)
            # the scheduler runs the reduction loops outside the output loops
            # (tensorize.vertical_order): lanes accumulate their own elements, and
            # only a tile of one output folds its run across lanes, one step
            outputs = elements / red
            steps = exprs.unevaluated(sp.Max, 0, 2 - outputs) * exprs.unevaluated(
                sp.Min, 1, red - 1
            )
            cycles += steps * v.cycles["reduce"]
        return cycles

    def scalar_cycles(self, stmt: Statement) -> float:
        sc = self.spec.scalar
        ops = ops_count(stmt.body)
        lat = self.level.latency_cycles
        nbytes = sum(ld.dtype.itemsize for ld in (stmt.target, *stmt.reads))
        per = (
            sc.statement_cycles
            + sum(ops.get(k, 0) * sc.cycles[k] for k in OP_CLASSES)
            + lat
            + math.ceil(nbytes / self.level.bytes_per_cycle)
        )
        n = 1
        for it in stmt.iterators:
            n *= self.layer.extent(stmt, it)
        return float(per * n)

    def _initialised(self, name: str) -> bool:
        """The first statement of the layer that touches ``name`` writes it without
        reading it (an init), so reads see the layer's own values."""
        for s in self.layer.stmts:
            if s.target.array == name:
                return not any(ld.array == name for ld in s.reads)
            if any(ld.array == name for ld in s.reads):
                return False
        return False

    def _stored(self, name: str) -> bool:
        """What the layer writes to ``name`` is stored when it is not a temporary
        or the rest of the kernel reads it."""
        arr = self.kernel.arrays[name]
        return arr.role.value != "temp" or read_later(self.kernel, self.layer, name)


def _arrays_of(stmt: Statement) -> set[str]:
    return {ld.array for ld in (stmt.target, *stmt.reads)}
