"""A statement's iterators in another order: a reduction loop moved outward.

The accelerator scheduler fuses statements on their *leading* iterators
(:mod:`schedules.accel.layers`). A transformer MLP's second contraction
reduces over the hidden dimension that the first one writes and the
element-wise op between them maps, but as the frontends write it that
dimension is its innermost iterator::

    S4: out[b, t, j] += gelu[b, t, k] * w2[j, k]     iterators (b, t, j, k)

:func:`permute_iterators` rewrites the statement with its iterators in a new
order, here ``(b, t, k, j)``: the same instances, body and accesses, its loop
nest now running ``k`` outside ``j``, so that it fuses with the producers of
``gelu`` along ``k`` (:mod:`schedules.accel.mlp`)::

    for b, t, j:                              for b, t, k:
      for k:                          ->        for j:
        out[b,t,j] += gelu[b,t,k] * w2[j,k]       out[b,t,j] += gelu[b,t,k] * w2[j,k]

Each output element still sums its terms in the order of ``k``, so the numbers
are the same, bit for bit. The rewrite is checked like every transformation:
each instance of the original statement is timed by its place in the new
loop nest and every exact dependence of the program must still run forward.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from polyc.errors import ArgumentError, IllegalTransformError
from polyc.ir import tree
from polyc.ir.kernel import Kernel, Step
from schedules import legality, stree
from schedules.accel.layers import _simple, own_part, top_children


def permute_iterators(kernel: Kernel, stmt: str, order) -> Kernel:
    """``kernel`` with statement ``stmt``'s iterators in ``order`` (a permutation
    of them), its top-level loop nest rebuilt in that order (see the module
    docstring).

    Raises:
        ArgumentError: ``stmt`` is no statement of the kernel, ``order`` is not a
            permutation of its iterators, or its loop nest is not a top-level
            band of its own over its iterators in order (the form the frontends
            give, before other transformations).
        IllegalTransformError: the new loop order breaks a dependence of the
            program, with a concrete source and sink.
    """
    op = "permute_iterators"
    order = tuple(order)
    names = [s.name for s in kernel.statements]
    if stmt not in names:
        raise ArgumentError(
            f"{op}: {stmt} is not a statement of {kernel.name} because its "
            f"statements are {', '.join(names)}. Name one of them."
        )
    s = kernel.statement(stmt)
    if sorted(order) != sorted(s.iterators) or len(set(order)) != len(order):
        raise ArgumentError(
            f"{op}: {', '.join(order)} is not an order of {stmt}'s iterators because "
            f"they are {', '.join(s.iterators)}. Name each of them once."
        )
    children = list(top_children(kernel))
    alone = [_simple(kernel, c) for c in children]
    pos = next(
        (p for p, a in enumerate(alone) if a is not None and a[0].name == stmt), None
    )
    if pos is None:
        raise ArgumentError(
            f"{op}: {stmt} is not alone in a top-level loop nest over its iterators "
            "because the schedule was transformed around it. Permute its iterators "
            "before other transformations."
        )
    if order == s.iterators:
        return kernel
    new = dataclasses.replace(
        s, iterators=order, domain=s.domain.apply(_renaming(kernel, s.name, s, order))
    )
    children[pos] = stree.from_isl(
        tree.initial_schedule([(stmt, new.domain, new.iterators)])
    )
    root = children[0] if len(children) == 1 else stree.Sequence_(tuple(children))
    schedule = stree.to_isl(stree.name_bands(root))
    _check(op, kernel, s, order, schedule, pos)
    statements = tuple(new if x.name == stmt else x for x in kernel.statements)
    return kernel.replace(
        statements=statements,
        schedule=schedule,
        program_schedule=None,
        history=kernel.history + (Step(op, (stmt, order)),),
    )


def _renaming(kernel: Kernel, name: str, s, order) -> isl.Map:
    """``name[iterators] -> name[order]``: one instance, its iterators reordered."""
    head = f"[{', '.join(kernel.params)}] -> " if kernel.params else ""
    src = [f"{i}_" for i in s.iterators]
    cons = " and ".join(f"{i}_ = {i}" for i in s.iterators)
    return isl.Map(
        f"{head}{{ {name}[{', '.join(src)}] -> {name}[{', '.join(order)}] : {cons} }}"
    )


def _check(op: str, kernel: Kernel, s, order, schedule, pos: int) -> None:
    """Every dependence of ``kernel`` that involves ``s`` runs forward in
    ``schedule``, each original instance of ``s`` timed by its renamed one.

    In a program that runs in its program order, a dependence between ``s``
    and another statement runs forward whatever ``s``'s loop order (its loop
    nest, the top-level child at ``pos``, keeps its place in the sequence):
    only ``s``'s own dependences are asked, computed on its loop nest alone
    (:func:`schedules.accel.layers.own_part`), not on the whole network."""
    times = legality.statement_times(schedule)
    times = dict(times)
    renamed = _renaming(kernel, s.name, s, order).apply_range(times[s.name])
    times[s.name] = renamed.intersect_domain(s.domain)
    own = own_part(kernel, (pos,))
    for kind, array, dep in legality.dependences(own or kernel):
        src = dep.get_tuple_name(isl.dim_type.in_)
        dst = dep.get_tuple_name(isl.dim_type.out)
        if s.name not in (src, dst):
            continue
        bad = dep.subtract(times[src].lex_lt_map(times[dst]))
        if not bad.is_empty():
            v = legality._violation(kernel, kind, array, bad, times)
            raise IllegalTransformError(
                f"{op}: {s.name} cannot run its iterators in the order "
                f"{', '.join(order)} because {v}. Keep the loops that carry it "
                "outermost."
            )


__all__ = ["permute_iterators"]
