"""Copies inlined into their readers: views, transposes and permutes cost nothing.

The frontends lower ``view``, ``transpose``, ``permute`` and the like to copy
statements, ``T[i, j, l, m] = X[i, l, j, m]``. On the accelerator each is a vector
pass over the tensor, and often a layer of its own whose input and output go
through DRAM; attention alone has several (the heads split off and merged back, the
keys transposed). The reader can read ``X`` where it read ``T`` instead, with the
index composed (``T[h(x)]`` is ``X[g(f^-1(h(x)))]``): the DMA moves the box it
needs with the strides that come out, and the copy disappears.
:func:`inline_copy` does that for one copy (a replayable transformation);
:func:`inline_all` for every copy :func:`inlinable` finds.

A copy inlines when that is an identity on the outputs, and stays affine:

- its body is a load of another array of the same dtype, or a bfloat16 load widened
  to float32 (exact: the reader widens the element instead, and the bfloat16 model's
  per-op widenings, :mod:`polyc.frontends.torch.bf16`, cost no pass of their own),
  and its target indexes are distinct iterators (each element written once, by a
  function of the element);
- ``T`` is a temporary no other statement writes; the source ``X`` is not written
  after the copy's loop nest, and every reader is in a later loop nest;
- no index involved has a floor division (a reshape that splits or merges
  dimensions keeps its copy: the composed index would not be a box per tile);
- the kernel's schedule is still its program order, one loop nest per statement
  (the form the frontends give), so that dropping the copy leaves a program order.
"""

from __future__ import annotations

import dataclasses

from polyc.errors import IllegalTransformError
from polyc.ir import dtypes, tree
from polyc.ir.affine import Aff
from polyc.ir.expr import Cast, Load, loads
from polyc.ir.kernel import Kernel, Role, Statement, Step


def inlinable(kernel: Kernel) -> list[str]:
    """The copy statements :func:`inline_copy` can remove, in program order."""
    if not _program_order(kernel):
        return []
    stmts, arrays = list(kernel.statements), kernel.arrays
    return [s.name for s in stmts if _why_not(stmts, arrays, s.name) is None]


def inline_all(kernel: Kernel) -> Kernel:
    """``kernel`` with every copy that can inline inlined (a chain of copies
    collapses one by one into the last reader); the program order is rebuilt
    once, at the end."""
    if not _program_order(kernel):
        return kernel
    stmts, arrays, done = list(kernel.statements), dict(kernel.arrays), []
    while True:
        name = next(
            (s.name for s in stmts if _why_not(stmts, arrays, s.name) is None), None
        )
        if name is None:
            break
        stmts, arrays = _without(stmts, arrays, name)
        done.append(name)
    return _rebuilt(kernel, stmts, arrays, done) if done else kernel


def inline_copy(kernel: Kernel, copy: str) -> Kernel:
    """``kernel`` without the copy statement ``copy``: its readers read its source
    (see the module docstring).

    Raises:
        IllegalTransformError: when ``copy`` cannot inline, with the reason.
    """
    stmts = list(kernel.statements)
    why = (
        "the schedule is no longer the program order, one loop nest per statement"
        if not _program_order(kernel)
        else _why_not(stmts, kernel.arrays, copy)
    )
    if why is not None:
        raise IllegalTransformError(
            f"inline_copy: {copy} cannot be inlined into its readers because {why}. "
            "Leave it in place."
        )
    stmts, arrays = _without(stmts, kernel.arrays, copy)
    return _rebuilt(kernel, stmts, arrays, [copy])


def plain_index(index) -> tuple[str, ...] | None:
    """The iterators of an access indexed by distinct iterators, one plain
    iterator per dimension; else None."""
    its = []
    for aff in index:
        if aff.const or len(aff.terms) != 1:
            return None
        ((atom, coeff),) = aff.terms
        if not isinstance(atom, str) or coeff != 1:
            return None
        its.append(atom)
    return tuple(its) if len(set(its)) == len(its) else None


def target_iterators(stmt: Statement) -> list[str] | None:
    """The iterators indexing ``stmt``'s target, one per dimension, when the target
    is indexed by distinct iterators, each once and all of them (each element is
    written once, by a function of the element); else None."""
    its = plain_index(stmt.target.index)
    if its is None or set(its) != set(stmt.iterators):
        return None
    return list(its)


def copied(body) -> Load | None:
    """The load a copy's body copies: the body itself, or the bfloat16 load a
    float32 cast widens (exactly); None for any other body."""
    if isinstance(body, Load):
        return body
    if (
        isinstance(body, Cast)
        and isinstance(body.x, Load)
        and (body.x.dtype, body.dtype) == (dtypes.bfloat16, dtypes.float32)
    ):
        return body.x
    return None


def source_reader(copy: Statement):
    """A rewrite of expression nodes for :meth:`Expr.map`: a load of ``copy``'s
    target becomes the load of its source that the copy made (its index
    composed, widened where the copy widened it), every other node stays."""
    target, source = copy.target, copied(copy.body)
    position = {it: d for d, it in enumerate(target_iterators(copy))}

    def read_source(node):
        if isinstance(node, Load) and node.array == target.array:
            mapping = {it: node.index[d] for it, d in position.items()}
            index = tuple(a.substitute(mapping) for a in source.index)
            read = Load(source.array, index, source.dtype)
            return read if read.dtype == target.dtype else Cast(read, target.dtype)
        return None

    return read_source


def _without(stmts: list[Statement], arrays, copy: str):
    """The statements and arrays with the copy ``copy`` gone, its readers reading
    its source."""
    stmt = next(s for s in stmts if s.name == copy)
    target = stmt.target
    read_source = source_reader(stmt)

    kept = [
        dataclasses.replace(s, body=s.body.map(read_source))
        for s in stmts
        if s.name != copy
    ]
    return kept, {n: a for n, a in arrays.items() if n != target.array}


def _rebuilt(kernel: Kernel, stmts, arrays, copies: list[str]) -> Kernel:
    """``kernel`` with ``stmts`` and ``arrays`` in program order, one history step
    per inlined copy."""
    return rebuilt(
        kernel, stmts, arrays, tuple(Step("inline_copy", (c,)) for c in copies)
    )


def rebuilt(kernel: Kernel, stmts, arrays, steps: tuple[Step, ...]) -> Kernel:
    """``kernel`` with ``stmts`` and ``arrays``, its schedule the program order
    (one band per statement), ``steps`` added to its history."""
    schedule = tree.initial_schedule([(s.name, s.domain, s.iterators) for s in stmts])
    return kernel.replace(
        arrays=arrays,
        statements=tuple(stmts),
        schedule=schedule,
        program_schedule=None,
        history=kernel.history + steps,
    )


def _program_order(kernel: Kernel) -> bool:
    """Whether the schedule is the initial one (one band per statement, in order)."""
    initial = tree.initial_schedule(
        [(s.name, s.domain, s.iterators) for s in kernel.statements]
    )
    return str(kernel.schedule) == str(initial)


def _plain(aff: Aff) -> bool:
    return all(isinstance(atom, str) for atom, _ in aff.terms)


def _why_not(stmts: list[Statement], arrays, copy: str) -> str | None:
    """Why ``copy`` cannot inline from the program ``stmts`` (in program order)
    over ``arrays``, or None when it can."""
    names = [s.name for s in stmts]
    if copy not in names:
        return f"the kernel has no statement {copy}"
    at = names.index(copy)
    stmt = stmts[at]
    target, body = stmt.target, copied(stmt.body)
    t = target.array
    if stmt.reduction or body is None or body.array == t:
        return f"{copy} is not a copy of another array"
    if stmt.body.dtype != target.dtype:
        return f"{copy} converts {body.array} to another dtype"
    if arrays[t].role != Role.TEMP:
        return f"{t} is an {arrays[t].role} of the kernel"
    if target_iterators(stmt) is None:
        return f"{copy} does not index {t} by its iterators, each once"
    if not all(_plain(a) for a in body.index):
        return f"{copy} reads {body.array} with a floor division"
    for pos, s in enumerate(stmts):
        if pos == at:
            continue
        if s.target.array == t:
            return f"{s.name} also writes {t}"
        if s.target.array == body.array and pos > at:
            return f"{s.name} writes {body.array} after the copy"
        if any(g.array == t for g in s.gathers):
            return f"{s.name} gathers from {t} (its rows are data)"
        reads = [ld for ld in loads(s.body) if ld.array == t]
        if reads and pos < at:
            return f"{s.name} reads {t} before the copy"
        if any(not _plain(a) for ld in reads for a in ld.index):
            return f"{s.name} reads {t} with a floor division"
    return None


__all__ = [
    "copied",
    "inline_all",
    "inline_copy",
    "inlinable",
    "plain_index",
    "rebuilt",
    "source_reader",
    "target_iterators",
]
