"""The cost model's numbers: a layer model's expressions evaluated over a grid of
candidate tile sizes.

:class:`GridEvaluation` is the part of :class:`schedules.accel.model.LayerModel`
that turns its expressions (the buffers' boxes and copies, the engines' cycles per
tile) into numpy arrays over a grid and composes them, with
:mod:`schedules.accel.terms`, into an :class:`Estimate`: each buffer's tile
(:class:`TileBox`), the copies and the engines' work, the footprint per level and
the engines' overlap. ``LayerModel`` inherits it; it reads the model's attributes
(``buffers``, ``syms``, ``spec``, ``st``, ``layer``) and builds nothing symbolic
but what the model's own methods build. The last grids' values are kept here: the
structures that differ only in slots share a model and are evaluated one after
the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from accelerator.hardware.spec import evaluation_view, view_id
from schedules.accel import banks, estimate_cache, terms
from schedules.accel.evaluate import numeric
from schedules.accel.memplan import ZERO_BYTES

if TYPE_CHECKING:
    from schedules.accel.model import TileBuffer


@dataclass
class Estimate:
    """Model outputs over a grid of tile sizes (numpy arrays, one per candidate)."""

    cycles: np.ndarray
    dram_bytes: np.ndarray
    sram_bytes: np.ndarray
    engines: dict = field(default_factory=dict)
    transfers: np.ndarray | None = None  # DMA calls
    staged: dict = field(default_factory=dict)  # array -> staged at each point
    level_bytes: dict = field(default_factory=dict)  # level index -> its bytes
    edges: dict = field(default_factory=dict)  # terms.Busy.edges


@dataclass(frozen=True)
class TileBox:
    """A buffer's tile at every candidate of a grid (numpy arrays)."""

    extents: list[np.ndarray]  # the box, per dimension
    copies: np.ndarray
    moved_bytes: np.ndarray  # bytes of one copy (the box clipped to the array)
    elements: np.ndarray  # the buffer's (an output row padded to the pitch, phases)
    phases: int  # copies per tile: one per phase of a polyphase operand
    phased: int | None = None  # ... the dimension its phases split


#: ``[key, values, model]`` of the last :meth:`LayerModel._values` (the model
#: is held so that its ``id`` in the key stays its own)
_LAST_VALUES: list = [None, None, None]
#: ``(key, moves, model)`` of the last :meth:`LayerModel._moves`, oldest first
#: (the model is held so that its ``id`` in the key stays its own): enough for a
#: structure's slots to find its evaluation, with and without staging, while an
#: attention's structures issued a tile ahead or not take turns
_LAST_MOVES: list = []
#: ``[grid, memo]``: :func:`numeric`'s values of subexpressions over the last
#: grid (its symbols and their values), shared by the models evaluated on it
_GRID_MEMO: list = [None, {}]
_KEEP_MOVES = 8


class GridEvaluation:
    """The numeric half of :class:`schedules.accel.model.LayerModel` (see the
    module docstring)."""

    def stageable(self, upper) -> tuple[str, ...]:
        """Operands that may be staged whole in the SRAM level ``upper`` (a
        :class:`MemoryLevel` above the engines' one, or ``None``): read and not
        written by the layer, stored plainly (no phases, no layout change), taken
        in the layer's order while their aligned boxes fit (less a zero block)."""
        if upper is None:
            return ()
        align = upper.alignment_bytes
        room = upper.capacity_bytes - 2 * max(ZERO_BYTES, align)
        relaid = {a for a, _ in self.st.layouts} | set(self._phases)
        out = []
        for name, buf in self.buffers.items():
            if buf.written or not buf.copy_in or name in relaid:
                continue
            nbytes = math.prod(buf.whole) * buf.itemsize
            need = -(-nbytes // align) * align
            if need <= room:
                out.append(name)
                room -= need
        return tuple(out)

    def evaluate(
        self,
        grid: dict[sp.Symbol, np.ndarray],
        staged=(),
        upper=None,
        stream_slots: int | None = None,
    ) -> Estimate:
        """The model at every candidate of ``grid`` (arrays of equal length).

        ``staged`` operands (of :meth:`stageable`) whose copy runs more than
        once are copied whole from DRAM into the SRAM level ``upper`` once,
        above the tile loops, and each tile's copy then comes from there (the
        upper level's latency and bandwidth). Operands streamed through a
        reduction take ``stream_slots`` slots (by default the structure's)."""
        if stream_slots is None:
            stream_slots = self.st.stream_slots
        args = [np.asarray(grid[s], dtype=float) for s in self.syms]
        n = len(args[0]) if args else 1
        # a function of the hardware but for its SRAM capacities (which decide
        # what fits, later): the points of a study that differ only in those
        # share it, as they share this model (schedules.accel.models), while
        # the estimates kept stay within their budget (schedules.accel.estimate_cache)
        view = view_id(self.spec, evaluation_view)
        key = ("estimate", view, n, estimate_cache.grid_digest(args))
        key += (tuple(staged), upper, stream_slots)
        return estimate_cache.kept(
            self._built,
            key,
            view,
            lambda: self._evaluate(args, n, staged, upper, stream_slots),
        )

    def _evaluate(self, args, n: int, staged, upper, stream_slots: int) -> Estimate:
        moves = self._moves(args, n, tuple(staged), upper)
        sram = np.zeros(n)
        per_level: dict[int, np.ndarray] = {}
        for name, buf in self.buffers.items():
            if name in self.resident:  # at its home: no buffer
                continue
            index = self.levels[name]
            level = self.spec.memory[index]
            box = moves.boxes[name]
            fp = terms.footprint(buf, box, stream_slots, level.alignment_bytes)
            sram += fp
            per_level[index] = per_level.get(index, 0) + fp
        traffic = moves.traffic
        busy = terms.overlap(self.spec, traffic, moves.work, max(stream_slots - 1, 1))
        return Estimate(
            busy.cycles,
            traffic.dram_bytes,
            sram,
            busy.engines,
            traffic.transfers,
            dict(moves.staged),
            per_level,
            busy.edges,
        )

    def _moves(self, args, n: int, staged: tuple, upper) -> terms.Moves:
        """The part of :meth:`evaluate` that the slots do not change: the
        buffers' tiles, their copies and the engines' work over the grid
        ``args``. The last few are kept (:data:`_LAST_MOVES`): the structures
        that differ only in slots share this model and come soon after one
        another (only the footprints and the overlap then remain)."""
        key = (id(self), n, tuple(a.tobytes() for a in args), staged, upper)
        for i, (k, moves, _) in enumerate(_LAST_MOVES):
            if k == key:
                _LAST_MOVES.append(_LAST_MOVES.pop(i))
                return moves
        ev = self._values(args, n).__getitem__
        moves = terms.moves(self, ev, n, staged, upper)
        _LAST_MOVES.append((key, moves, self))
        del _LAST_MOVES[:-_KEEP_MOVES]
        return moves

    def tile_box(self, buf: TileBuffer, ev, n: int) -> TileBox:
        """``buf``'s tile at the ``n`` candidates (``ev`` maps an expression to its
        values there): an output row padded to A's pitch, a polyphase operand's
        rows and pitch rounded up to whole phases."""
        ext = [ev(e) for e in buf.extents]
        elems, moved = np.ones(n), np.ones(n)
        for e, dim in zip(ext, buf.shape):
            elems *= e
            moved *= np.minimum(e, dim)
        if buf.name in self._pitched_outputs():
            elems = self._pitched_elements(buf.name, ext, ev)
        ph = self._phases.get(buf.name)
        phases, phased = 1, None
        if ph is not None:
            phases, phased = ph.factor, ph.dim
            inner = ph.multiple * np.ceil(ext[ph.inner] / ph.multiple)
            rows = ph.factor * np.ceil(ext[ph.dim] / ph.factor)
            elems = elems / (ext[ph.inner] * ext[ph.dim]) * inner * rows
        moved = moved * buf.itemsize
        return TileBox(ext, ev(buf.copies), moved, elems, phases, phased)

    def _expressions(self) -> list[sp.Expr]:
        """Every expression :meth:`evaluate` needs, to lambdify them at once."""
        return self._once("expressions", self._all_expressions)

    def _all_expressions(self) -> list[sp.Expr]:
        out: list[sp.Expr] = []
        for buf in self.buffers.values():
            out.extend(buf.extents)
            out.append(buf.copies)
        for s in self.layer.stmts:
            out.append(self.tiles(s))
            eng = self.st.engine_of(s.name)
            if eng == "mac":
                out.extend(self.mac_cycles(s))
                out.append(self.mac_once(s))
                out.append(self.mac_tail(s))
                out.extend(banks.expressions(self, s))
            elif eng == "vector":
                out.append(self.vector_cycles(s))
        for s in self.st.pitched:
            out.append(self.pitch(self.kernel.statement(s)))
        if self.st.ahead:
            out.append(self.pipelined_trips())
        out.append(self.shared_tiles())
        return out

    def _values(self, args, n: int) -> dict:
        """Every expression's values over the grid ``args`` (copies: callers may
        change them). The last evaluation's are kept (:data:`_LAST_VALUES`): the
        structures that differ only in slots share this model, come one after
        the other and evaluate it over the same grid."""
        key = (id(self), n, tuple(a.tobytes() for a in args))
        if _LAST_VALUES[0] != key:  # one grid's values at a time, whatever model
            _LAST_VALUES[:] = [None, self._compute_values(args, n), self]
            _LAST_VALUES[0] = key
        return {e: v.copy() for e, v in _LAST_VALUES[1].items()}

    def _memo(self, args, n: int) -> dict:
        """:func:`numeric`'s values of subexpressions over the grid ``args``,
        whatever model asks: the structures of a layer evaluate many of the same
        (never changed: their users copy them)."""
        grid = (n, tuple(self.syms), tuple(a.tobytes() for a in args))
        if _GRID_MEMO[0] != grid:
            _GRID_MEMO[:] = [grid, {}]
        return _GRID_MEMO[1]

    def floor(self, grid: dict[sp.Symbol, np.ndarray]) -> float:
        """A lower bound of :meth:`evaluate`'s cycles over ``grid``: at each
        point, the larger of the MAC array's and the vector unit's busy time,
        fewest over the grid. The MAC statements' calls back to back at their
        steady time (the banks' stretch and the first loads only add to the
        MAC array's time), and the vector statements' operations, summed as
        :func:`schedules.accel.work.engines` sums them (the same values): a
        layer takes at least its busiest engine's time (:func:`terms.overlap`:
        the fill, the drain and the stalls only add to it); zero without MAC
        or vector statements."""
        args = [np.asarray(grid[s], dtype=float) for s in self.syms]
        n = len(args[0]) if args else 1
        env = dict(zip(self.syms, args))
        memo = self._memo(args, n)
        total, vec = np.zeros(n), np.zeros(n)
        for s in self.layer.stmts:
            engine = self.st.engine_of(s.name)
            if engine == "mac":
                cycles = numeric(self.mac_cycles(s)[0], env, memo)
                total = total + numeric(self.tiles(s), env, memo) * cycles
            elif engine == "vector":
                tiles = _values_of(self.tiles(s), env, memo, n)
                vec += tiles * _values_of(self.vector_cycles(s), env, memo, n)
        return float(np.maximum(total, vec).min())

    def _compute_values(self, args, n: int) -> dict:
        env = dict(zip(self.syms, args))
        memo = self._memo(args, n)
        out = {}
        for e in self._once("distinct", lambda: dict.fromkeys(self._expressions())):
            out[e] = _values_of(e, env, memo, n).copy()
        return out

    def _pitched_outputs(self) -> set[str]:
        return {self.kernel.statement(s).target.array for s in self.st.pitched}

    def _pitched_elements(self, name: str, ext, ev):
        stmt = next(
            self.kernel.statement(s)
            for s in self.st.pitched
            if self.kernel.statement(s).target.array == name
        )
        w = self.st.groups_of(stmt.name)[0][-1]
        pitch = ev(self.pitch(stmt))
        out = np.ones_like(pitch)
        for d, aff in enumerate(stmt.target.index):
            out *= pitch if aff.coefficient(w) else ext[d]
        return out


def _values_of(e: sp.Expr, env: dict, memo: dict, n: int) -> np.ndarray:
    """``e`` at the ``n`` points of ``env``, as :meth:`GridEvaluation._values`
    gives it to :func:`schedules.accel.work.engines`."""
    return np.broadcast_to(np.asarray(numeric(e, env, memo), dtype=float), (n,))
