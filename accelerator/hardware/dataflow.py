"""The MAC array's timing, derived from its dataflow: one formula for the simulator
(``accelerator/sim/runtime/rt_compute.c``, ``pc_mac``) and the cost model
(``schedules.accel.model``), numeric or symbolic.

One MAC call computes ``C[m, n] (+)= A[m, k] @ B[k, n]`` on an ``R x C`` systolic
array. The dataflow names the operand the PEs hold (roles are positional: A is the
input, B the weight, C the accumulator/output):

================== ===================== ====================== ===============
dataflow           held in the PEs       folds                  streamed per fold
================== ===================== ====================== ===============
weight_stationary  B: k on rows, n cols  ceil(k/R) ceil(n/C)    the m rows of A
output_stationary  C: m on rows, n cols  ceil(m/R) ceil(n/C)    the k terms
input_stationary   A: k on rows, m cols  ceil(k/R) ceil(m/C)    the n columns of B
================== ===================== ====================== ===============

A fold that covers less than the array (a K or N tile smaller than the dimension
it maps to) costs a whole fold: the idle PEs still sit in the pipeline. Per fold:

- ``load``: the stationary operand shifts in, one row per cycle: ``R`` cycles for
  weight- and input-stationary, none for output-stationary (its accumulators start
  at zero);
- ``stream``: ``ceil(T / rate)`` cycles for the ``T`` streamed rows, where
  ``rate`` is the dtype's MACs per PE per cycle (``rate < 1`` stretches it);
- ``skew``: ``R + C - 2`` cycles for the last operand to cross the array and the
  last result to leave it (for output-stationary, the drain of the outputs, which
  overlaps the skew).

Without double buffering (``double_buffered = false``) folds and calls run one
after another: a call takes ``folds x (load + stream + skew)`` cycles, which is
SCALE-Sim's compute model (``scalesim/compute/systolic_compute_{ws,os,is}.py``:
``2R + C + T - 2`` per fold for ws/is, ``R + C + T - 2`` for os) plus one, because
SCALE-Sim reports the index of the last cycle (``Total Cycles`` is the 0-based cycle
of the last output write), where polyc counts cycles.

With a double-buffered stationary register (TPU v1 keeps a second tile of weights
"to hide the 256 cycles it takes to shift a tile in", Jouppi et al., ISCA 2017) the
next fold's stationary operand loads, or the last fold's outputs drain, while the
current fold streams, so folds follow each other every ``max(stream, R)`` cycles;
the next call's first fold overlaps this call's last one the same way, and its
inputs enter while this call's results drain. The array is then busy
``load + (folds - 1) x max(stream, R) + stream`` cycles for a call that starts on an
idle array, ``folds x max(stream, R)`` for one that follows another back to back,
and its results are ready ``skew`` cycles after it frees the array (the tail).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from accelerator.hardware.spec import MacArray


@dataclass(frozen=True)
class MacTiming:
    """The timing of one MAC call (numbers, or sympy expressions of tile sizes).

    A call that follows another back to back keeps the array busy ``steady``
    cycles; one that starts on an idle array ``steady + first``; its results are
    ready ``tail`` cycles after it frees the array."""

    folds: object  # array folds over the call's dimensions
    load: object  # cycles to shift the stationary operand in, per fold
    stream: object  # cycles the streamed operand flows in, per fold
    skew: object  # cycles from the last input entering to the last result out
    steady: object
    first: object
    tail: object

    @property
    def alone(self):
        """Cycles from a call's start on an idle array to its results."""
        return self.steady + self.first + self.tail


def mac_timing(
    array: MacArray,
    m,
    n,
    k,
    rate,
    ceil: Callable = math.ceil,
    maximum: Callable = max,
) -> MacTiming:
    """The timing of a MAC call ``m x n x k`` at ``rate`` MACs per PE per cycle on
    ``array`` (see the module docstring). ``ceil`` and ``maximum`` are
    ``math.ceil`` and ``max`` for numbers, ``sympy.ceiling`` and ``sympy.Max`` for
    tile-size symbols (then ``rate`` is a ``sympy.Rational``)."""
    rows, cols = array.rows, array.cols
    if array.dataflow == "weight_stationary":
        folds, streamed, load = ceil(k / rows) * ceil(n / cols), m, rows
    elif array.dataflow == "output_stationary":
        folds, streamed, load = ceil(m / rows) * ceil(n / cols), k, 0
    else:  # input_stationary
        folds, streamed, load = ceil(k / rows) * ceil(m / cols), n, rows
    stream = ceil(streamed / rate)
    skew = rows + cols - 2
    if not array.double_buffered:
        return MacTiming(
            folds, load, stream, skew, folds * (load + stream + skew), 0, 0
        )
    interval = maximum(stream, rows)
    return MacTiming(
        folds, load, stream, skew, folds * interval, load + stream - interval, skew
    )


def mac_bytes(
    array: MacArray, m, n, k, esz: int, asz: int, ceil: Callable = math.ceil
) -> tuple:
    """The SRAM bytes one MAC call ``m x n x k`` moves per operand, from the
    dataflow (the runtime's ``pc_mac_bytes`` in ``rt_compute.c``, for its bank
    model): ``(a, b, c, accumulators)``. The stationary operand is read once; the
    streamed and the third once per fold of the dimension they do not span; ``c``
    counts partial sums written once per K fold and read back before every K fold
    but the first (output-stationary keeps them in the PEs and writes ``m x n``
    once); ``accumulators`` is ``m x n`` read in when the call adds to what earlier
    calls left. ``esz`` is the operands' element size, ``asz`` the accumulators'."""
    rows, cols = array.rows, array.cols
    mn = m * n * asz
    if array.dataflow == "output_stationary":
        a, b, c = ceil(n / cols) * m * k * esz, ceil(m / rows) * k * n * esz, mn
    elif array.dataflow == "input_stationary":
        a, b = m * k * esz, ceil(m / cols) * k * n * esz
        c = (2 * ceil(k / rows) - 1) * mn
    else:
        a, b = ceil(n / cols) * m * k * esz, k * n * esz
        c = (2 * ceil(k / rows) - 1) * mn
    return a, b, c, mn
