"""Tile variables: the loops of a layer whose tile size the accelerator search picks.

A layer (:class:`schedules.accel.layers.Layer`) fuses its statements on their
first ``depth`` iterators. A *shared* loop is one of those: every statement of the
layer is tiled alike along it, so it is named by its position. A *private* loop
is a statement's own loop below them (a contraction's reduction), named by the
statement and the iterator. This module is the one place that tells them apart;
the search, the cost model and the scheduler hold :data:`TileVar` values and ask
them where their loop is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy as sp

from polyc.ir.kernel import Statement

if TYPE_CHECKING:
    from schedules.accel.layers import Layer


@dataclass(frozen=True)
class SharedTile:
    """The fused loop at ``position`` of every statement of a layer."""

    position: int

    def loop(self, layer: Layer) -> tuple[Statement, str]:
        """The layer's first statement and its iterator at ``position``."""
        first = layer.stmts[0]
        return first, first.iterators[self.position]

    def symbol(self, layer: Layer) -> sp.Symbol:
        """The tile size as a sympy symbol (``T_i``)."""
        return _symbol(f"T_{self.loop(layer)[1]}")

    def label(self, layer: Layer) -> str:
        """How explanations name it: the iterator (``i``)."""
        return self.loop(layer)[1]


@dataclass(frozen=True)
class PrivateTile:
    """The loop ``iterator`` of statement ``stmt`` below the layer's fused loops."""

    stmt: str
    iterator: str

    def loop(self, layer: Layer) -> tuple[Statement, str]:
        """The statement of the layer called ``stmt`` and ``iterator``."""
        return next(s for s in layer.stmts if s.name == self.stmt), self.iterator

    def symbol(self, layer: Layer) -> sp.Symbol:
        """The tile size as a sympy symbol (``T_S1_k``)."""
        return _symbol(f"T_{self.stmt}_{self.iterator}")

    def label(self, layer: Layer) -> str:
        """How explanations name it: ``k(S1)``."""
        return f"{self.iterator}({self.stmt})"


TileVar = SharedTile | PrivateTile


def tile_var(layer: Layer, stmt: Statement, it: str) -> TileVar:
    """The tile variable of loop ``it`` of ``stmt`` in ``layer`` (whether the
    search tiles it or not)."""
    p = stmt.iterators.index(it)
    return SharedTile(p) if p < layer.depth else PrivateTile(stmt.name, it)


def loop_extent(layer: Layer, var: TileVar) -> int:
    """The number of iterations of ``var``'s loop (its largest tile)."""
    return layer.extent(*var.loop(layer))


def _symbol(name: str) -> sp.Symbol:
    return sp.Symbol(name, positive=True, integer=True)
