"""A contraction's bias init moved into its epilogue.

The frontends write a layer with a bias the way PyTorch defines it::

    S0: C[n, o, h, w] = bias[o]                      (vector unit)
    S1: C[n, o, h, w] += x[...] * w[...]            (MAC array)
    S2: out[...] = relu(C[...])                     (vector unit)

On the accelerator the init is a vector pass over every output tile before its
MAC calls. The vector unit runs its operations in issue order, so the init of
tile ``t + 1`` waits behind the epilogue of tile ``t``, and the MAC calls of tile
``t + 1`` wait for that init: the array idles through every epilogue, and the
layer takes the sum of the engines' times rather than the largest. Real NPUs add
the bias in the output stage instead (Ethos-U's OFM scaling, the TPU's
activation pipeline). :func:`defer_bias` does that in the program::

    S0: C[n, o, h, w] = 0                           (folded into the MAC calls)
    S1: C[n, o, h, w] += x[...] * w[...]
    S2: out[...] = relu(C[...] + bias[o])

The zero init folds into the first MAC call of each tile (no engine runs it), and
the epilogue does one more add per element it reads, on the vector unit beside the
next tile's MAC calls.

It is the same function: ``bias + sum`` becomes ``sum + bias`` (exact for integers;
for floats a reordering of one addition, like the MAC array's own order of its
sums). :func:`deferrable` finds where the rewrite is an identity on the outputs:

- the init writes each element of ``C`` once, with a load of the bias (an array
  no statement writes) at an index of its iterators, and its target indexes are
  distinct iterators (so the bias of an element is a function of the element);
- the contraction accumulates into exactly the elements the init wrote;
- ``C`` is a temporary, and one statement besides the two reads it, in a later
  top-level loop nest than both (so it reads every element complete), and
  nothing else reads or writes it;
- where the config's MAC array requantizes in its output stage
  (``[mac_array] requantize``, HW-A), that reader is not an int8 requantization of
  ``C``: the output stage takes that form as it is (:mod:`polyc.ir.requant`), so
  the bias stays an init there. Elsewhere the requantization is vector work like
  any epilogue, and the bias moves into it (exact: int32 additions wrap, so their
  order does not change the sum). Left an init on edge-npu, it made every int8
  convolution of res-blocks run its MAC calls and its requantization in turn:
  each tile's init waited behind the tile before's requantization;
- for a config (``spec``), its MAC array takes the contraction's operand dtype:
  elsewhere the contraction runs on the vector unit, the zero init folds into no
  MAC call and costs the pass the bias init did, and the epilogue's add comes on
  top (HW-A, whose array takes int8 only: the float transformer block ran 528,422
  cycles with the bias moved, 373,175 without).
"""

from __future__ import annotations

import dataclasses

from accelerator.hardware.spec import Spec
from polyc.errors import IllegalTransformError
from polyc.ir import requant
from polyc.ir.expr import Binary, Const, Load, loads
from polyc.ir.kernel import Kernel, Role, Statement, Step, access_map
from schedules import stree
from schedules.accel.inline import target_iterators


def deferrable(kernel: Kernel, spec: Spec | None = None) -> list[str]:
    """The bias inits of ``kernel`` that :func:`defer_bias` can move (statement
    names, in program order); with ``spec``, only those whose contraction the
    config's MAC array takes (see the module docstring)."""
    out = []
    for s in kernel.statements:
        found = _plan(kernel, s.name)[0]
        if found is None:
            continue
        if spec is not None and not _on_the_array(found[3], spec):
            continue
        # the output stage's form, where an output stage takes it (with no
        # config, as where one might)
        output_stage = spec is None or spec.mac_array.requantize
        if output_stage and requant.match(found[2].body) is not None:
            continue
        out.append(s.name)
    return out


def defer_all(kernel: Kernel, spec: Spec | None = None) -> Kernel:
    """``kernel`` with every bias init that can move moved (the accelerator
    scheduler's first step, for the config ``spec``)."""
    for init in deferrable(kernel, spec):
        kernel = defer_bias(kernel, init)
    return kernel


def _on_the_array(contraction_stmt: Statement, spec: Spec) -> bool:
    """Whether ``spec``'s MAC array takes the operands of the contraction."""
    from schedules.accel.tensorize import contraction

    con = contraction(contraction_stmt)
    return con is not None and con.operand in spec.mac_array.dtypes


def defer_bias(kernel: Kernel, init: str) -> Kernel:
    """``kernel`` with the bias init ``init`` replaced by a zero init and the bias
    added where the contraction's result is read (see the module docstring).

    Raises:
        IllegalTransformError: when ``init`` is not a bias init that can move, with
            the reason.
    """
    plan, why = _plan(kernel, init)
    if plan is None:
        raise IllegalTransformError(
            f"defer_bias: {init} cannot move into its epilogue because {why}. "
            "Leave it in place."
        )
    s0, bias, reader, _ = plan
    target = s0.target
    zero = Const(0, target.dtype)
    # the bias index as a function of the element: the init's iterator at
    # target position d is the element's index d
    by_iterator = {it: d for d, it in enumerate(target_iterators(s0))}

    def add_bias(node):
        if isinstance(node, Load) and node.array == target.array:
            mapping = {it: node.index[d] for it, d in by_iterator.items()}
            index = tuple(a.substitute(mapping) for a in bias.index)
            return Binary("add", node, Load(bias.array, index, bias.dtype), node.dtype)
        return None

    statements = []
    for s in kernel.statements:
        if s.name == s0.name:
            s = dataclasses.replace(s, body=zero)
        elif s.name == reader.name:
            s = dataclasses.replace(s, body=s.body.map(add_bias))
        statements.append(s)
    history = kernel.history + (Step("defer_bias", (init,)),)
    return kernel.replace(statements=tuple(statements), history=history)


def _plan(kernel: Kernel, init: str):
    """``((init, bias load, reader, contraction), "")`` when ``init`` can move,
    else ``(None, why)``."""
    from schedules.accel.layers import top_children
    from schedules.accel.tensorize import contraction

    names = [s.name for s in kernel.statements]
    if init not in names:
        return None, f"the kernel has no statement {init}"
    s0 = kernel.statement(init)
    c = s0.target.array
    body = s0.body
    if not isinstance(body, Load) or body.array == c or body.dtype != s0.target.dtype:
        return None, f"{init} does not set {c} to a load of another array"
    if kernel.arrays[c].role != Role.TEMP:
        return None, f"{c} is an {kernel.arrays[c].role} of the kernel"
    if target_iterators(s0) is None:
        return None, f"{init} does not index {c} by its iterators, each once"
    bias = body
    if any(s.target.array == bias.array for s in kernel.statements):
        return None, f"a statement writes {bias.array}"
    users = [
        s
        for s in kernel.statements
        if s is not s0
        and (s.target.array == c or any(ld.array == c for ld in loads(s.body)))
    ]
    if any(g.array == c for s in kernel.statements for g in s.gathers):
        return None, f"a statement gathers from {c}"
    acc = [s for s in users if s.target.array == c]
    readers = [s for s in users if s.target.array != c]
    if len(acc) != 1 or contraction(acc[0]) is None:
        return None, f"{c} is not the target of one contraction after {init}"
    s1 = acc[0]
    if len(readers) != 1:
        return None, f"{len(readers)} statements read {c} (one may)"
    reader = readers[0]
    if reader.reduction:
        return None, f"{reader.name} reduces over {c} (the add would not fold)"
    if not _written(kernel, s0).is_equal(_written(kernel, s1)):
        return None, f"{s1.name} does not accumulate into exactly what {init} sets"
    where = {}
    for pos, child in enumerate(top_children(kernel)):
        for n in stree.statements(child):
            where[n] = pos
    if not (where[s0.name] <= where[s1.name] < where[reader.name]):
        return None, f"{reader.name} is not in a loop nest after {s1.name}'s"
    return (s0, bias, reader, s1), ""


def _written(kernel: Kernel, stmt: Statement):
    """The elements ``stmt`` writes, as an isl set."""
    return access_map(stmt, stmt.target, kernel.params).range()


__all__ = ["defer_all", "defer_bias", "deferrable"]
