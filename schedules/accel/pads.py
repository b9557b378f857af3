"""Zero padding read by a contraction: the padded tensor goes, the contraction skips
the taps that read its zeros.

``F.pad`` (and a model's "same" padding before a convolution, as in EfficientNet's
and MobileNetV2's ``transformers`` stems) lowers to two statements over a new
tensor: a copy where the index is inside the source and a zero fill around it::

    pad[i] = X[i - b]   for i in the copy's box
    pad[i] = 0          elsewhere
    C[...] += pad[f(x)] * W[...]

A tap that reads a zero adds ``0 * w`` to its sum, which changes nothing, so the
contraction can read ``X[f(x) - b]`` on the instances whose ``f(x)`` the copy
wrote and skip the others: the form a convolution's own ``padding=`` takes
(``nn.Conv2d(..., padding=1)``, whose domain skips the taps outside the input).
On the accelerator that matters beyond the copy: the padded tensor is larger
than the convolution's output rows, so the copy fused with the convolution kept
the layer from tiling its rows (the layer ran its loads, its MAC calls and its
epilogue one after another), and as a layer of its own it went through DRAM.

:func:`inline_zero_pad` removes one pair (a replayable transformation);
:func:`inline_pads` every pair :func:`zero_pads` finds. A pair inlines when:

- the fill writes ``0`` and the copy loads another array of the same dtype, each
  indexing the padded tensor by its iterators, each once; their regions are
  disjoint and no other statement writes the tensor, a temporary;
- the source is not written after the copy;
- every reader comes after both and is a contraction (``C += A * B``) whose
  ``A`` or ``B`` is its one read of the padded tensor, every element of which the
  pair writes;
- no index involved has a floor division, and the schedule is the program order.

The sums then differ from the padded ones only by adding zeros: exact (integer
accumulators) and equal in value on floats (``acc + 0 * w == acc`` for a finite
weight; a ``NaN`` or infinite weight tap on the padding no longer poisons the
sum, as with a convolution's own padding).

A padding that stays (an int8 activation's is its zero point, ``-128`` after a
ReLU, whose taps add ``-128 * w``) keeps its copy, which the frontends write over
the padded tensor's index, ``pad[i] = X[i - b]``. Fused with the requantization
that writes ``X``, that copy reads each tile's elements ``b`` rows later than they
are written, so the layer kept its rows whole and ran its MAC calls and its
requantization one after the other. :func:`align_pads` runs each such copy over
its source's index instead, ``pad[i + b] = X[i]``
(:func:`schedules.accel.reindex.translate_iterators`: the same instances, checked):
then it fuses element for element, and the layer tiles its rows (res-blocks in
int8 on edge-npu: 28,814 -> 26,951 cycles, its first convolution 4,468 -> 2,714
predicted).
"""

from __future__ import annotations

import dataclasses
import itertools

import islpy as isl

from polyc.errors import IllegalTransformError
from polyc.ir.expr import Const, Load, loads
from polyc.ir.kernel import Kernel, Role, Statement, Step, access_map
from schedules.accel.inline import (
    _plain,
    _program_order,
    rebuilt,
    source_reader,
    target_iterators,
)
from schedules.accel.reindex import translate_iterators
from schedules.accel.tensorize import contraction


def zero_pads(kernel: Kernel) -> list[tuple[str, str]]:
    """The ``(copy, fill)`` pairs :func:`inline_zero_pad` can remove, in program
    order."""
    if not _program_order(kernel):
        return []
    stmts = list(kernel.statements)
    return [
        pair
        for pair in _pairs(stmts)
        if _why_not(stmts, kernel.arrays, kernel.params, *pair) is None
    ]


def inline_pads(kernel: Kernel) -> Kernel:
    """``kernel`` with every zero padding that a contraction reads inlined into
    it (see the module docstring); the program order is rebuilt once."""
    if not _program_order(kernel):
        return kernel
    stmts, arrays, done = list(kernel.statements), dict(kernel.arrays), []
    while True:
        pair = next(
            (
                p
                for p in _pairs(stmts)
                if _why_not(stmts, arrays, kernel.params, *p) is None
            ),
            None,
        )
        if pair is None:
            break
        stmts, arrays = _without(stmts, arrays, kernel.params, *pair)
        done.append(pair)
    return _rebuilt(kernel, stmts, arrays, done) if done else kernel


def align_pads(kernel: Kernel) -> Kernel:
    """``kernel`` with each padding's copy that reads its source shifted run over
    the source's index (see the module docstring); unchanged where the schedule
    is no longer the program order."""
    if not _program_order(kernel):
        return kernel
    for copy, offsets in _shifted_copies(kernel):
        kernel = translate_iterators(kernel, copy, offsets)
    return kernel


def _shifted_copies(kernel: Kernel) -> list[tuple[str, dict[str, int]]]:
    """``(copy, offsets)`` per padding (a copy and a constant fill of one
    temporary) whose copy indexes the padded tensor by its iterators and reads
    another array at each of them plus a constant, not all zero."""
    out = []
    for copy, _ in _pairs(list(kernel.statements), _constant):
        c = kernel.statement(copy)
        src = c.body
        its = target_iterators(c)
        if (
            _not_a_copy(c, kernel.arrays) is not None
            or its is None
            or len(src.index) != len(its)
        ):
            continue
        offsets = {}
        for it, a in zip(its, src.index):
            if a.names() != {it} or a.coefficient(it) != 1:
                break
            offsets[it] = a.const
        else:
            if any(offsets.values()):
                out.append((copy, offsets))
    return out


def inline_zero_pad(kernel: Kernel, copy: str, fill: str) -> Kernel:
    """``kernel`` without the padding written by ``copy`` and ``fill``: its readers
    read the copy's source and skip the taps on the zeros::

        pad[i] = X[i - b]  (inside)       ->
        pad[i] = 0         (outside)
        C += pad[f(x)] * W                   C += X[f(x) - b] * W   (f(x) inside)

    Raises:
        IllegalTransformError: when the pair cannot inline, with the reason.
    """
    stmts = list(kernel.statements)
    why = (
        "the schedule is no longer the program order, one loop nest per statement"
        if not _program_order(kernel)
        else _why_not(stmts, kernel.arrays, kernel.params, copy, fill)
    )
    if why is not None:
        raise IllegalTransformError(
            f"inline_zero_pad: {copy} and {fill} cannot be inlined into their "
            f"readers because {why}. Leave the padding in place."
        )
    stmts, arrays = _without(stmts, kernel.arrays, kernel.params, copy, fill)
    return _rebuilt(kernel, stmts, arrays, [(copy, fill)])


def _pairs(stmts: list[Statement], fills=None):
    """``(copy, fill)`` candidates: a load and a zero (``fills``: another test of
    the fill) into one array, in either order, the two writers of their array
    next to each other."""
    fills = fills or _zero
    for a, b in itertools.pairwise(stmts):
        if a.target.array != b.target.array:
            continue
        for copy, fill in ((a, b), (b, a)):
            if isinstance(copy.body, Load) and fills(fill):
                yield copy.name, fill.name


def _zero(stmt: Statement) -> bool:
    return _constant(stmt) and stmt.body.value == 0


def _constant(stmt: Statement) -> bool:
    return isinstance(stmt.body, Const) and stmt.reduction is None


def _why_not(stmts, arrays, params, copy: str, fill: str) -> str | None:
    """Why the pair cannot inline from the program ``stmts``, or None."""
    names = [s.name for s in stmts]
    if copy not in names or fill not in names:
        return f"the kernel has no statements {copy} and {fill}"
    c, z = stmts[names.index(copy)], stmts[names.index(fill)]
    t, body = c.target.array, c.body
    if z.target.array != t or not _zero(z):
        return f"{fill} does not write zeros into {t}"
    why = _not_a_copy(c, arrays)
    if why is not None:
        return why
    if target_iterators(c) is None or target_iterators(z) is None:
        return f"{copy} or {fill} does not index {t} by its iterators, each once"
    if not all(_plain(a) for a in body.index):
        return f"{copy} reads {body.array} with a floor division"
    inside = _written(c, params)
    if not inside.intersect(_written(z, params)).is_empty():
        return f"{copy} and {fill} write some element of {t} both"
    written = inside.union(_written(z, params))
    last = max(names.index(copy), names.index(fill))
    for pos, s in enumerate(stmts):
        if s.name in (copy, fill):
            continue
        if s.target.array == t:
            return f"{s.name} also writes {t}"
        if s.target.array == body.array and pos > names.index(copy):
            return f"{s.name} writes {body.array} after the copy"
        if any(g.array == t for g in s.gathers):
            return f"{s.name} gathers from {t} (its rows are data)"
        reads = [ld for ld in loads(s.body) if ld.array == t]
        if not reads:
            continue
        if pos < last:
            return f"{s.name} reads {t} before the padding is written"
        why = _reader(s, t, params, written, inside)
        if why is not None:
            return why
    return None


def _not_a_copy(c: Statement, arrays) -> str | None:
    """Why ``c`` is not a padding's copy (a load of another array, of its
    dtype, into a temporary), or None."""
    t, body = c.target.array, c.body
    if c.reduction or not isinstance(body, Load) or body.array == t:
        return f"{c.name} is not a copy of another array"
    if body.dtype != c.target.dtype:
        return f"{c.name} converts {body.array} to another dtype"
    if arrays[t].role != Role.TEMP:
        return f"{t} is an {arrays[t].role} of the kernel"
    return None


def _reader(s: Statement, t: str, params, written, inside) -> str | None:
    """Why the reader ``s`` of the padded ``t`` cannot skip its zeros, or None."""
    con = contraction(s)
    if con is None:
        return f"{s.name} reads {t} and is not a contraction"
    mine = [ld for ld in s.reads if ld.array == t]
    factors = {s.reads[con.a].array, s.reads[con.b].array}
    if len(mine) != 1 or t not in factors or len(loads(s.body)) != 3:
        return f"{s.name} reads {t} other than as one factor of its products"
    if any(not _plain(a) for a in mine[0].index):
        return f"{s.name} reads {t} with a floor division"
    acc = access_map(s, mine[0], params)
    if not acc.range().is_subset(written):
        return f"{s.name} reads elements of {t} the padding does not write"
    if acc.intersect_range(inside).is_empty():
        # the statement would lose every instance (a kernel of no work)
        return f"{s.name} reads only the zeros of {t}"
    return None


def _written(stmt: Statement, params) -> isl.Set:
    return access_map(stmt, stmt.target, params).range()


def _without(stmts, arrays, params, copy: str, fill: str):
    """The statements and arrays with the pair gone, its readers reading the
    copy's source on the instances that read inside the copy's region."""
    c = next(s for s in stmts if s.name == copy)
    target = c.target
    inside = _written(c, params)
    read_source = source_reader(c)

    kept = []
    for s in stmts:
        if s.name in (copy, fill):
            continue
        reads = [ld for ld in s.reads if ld.array == target.array]
        if reads:
            acc = access_map(s, reads[0], params).intersect_range(inside)
            domain = acc.domain().coalesce()
            s = dataclasses.replace(s, domain=domain, body=s.body.map(read_source))
        kept.append(s)
    return kept, {n: a for n, a in arrays.items() if n != target.array}


def _rebuilt(kernel: Kernel, stmts, arrays, pairs) -> Kernel:
    """``kernel`` with ``stmts`` and ``arrays`` in program order, one history step
    per inlined pair."""
    steps = tuple(Step("inline_zero_pad", pair) for pair in pairs)
    return rebuilt(kernel, stmts, arrays, steps)


__all__ = ["align_pads", "inline_pads", "inline_zero_pad", "zero_pads"]
