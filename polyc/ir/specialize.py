"""Fix a kernel's size parameters to values: the same program with concrete sizes.

Placement and the accelerator scheduler need concrete sizes; a C file's ``#define
N`` or a compute-API ``pc.param("N")`` makes ``N`` a parameter. :func:`specialize`
(``kernel.specialize(N=64)``) binds such parameters: domains, access indices, array
shapes, bodies and the schedule tree lose them, and the context must admit the
values.
"""

from __future__ import annotations

from collections.abc import Mapping

import islpy as isl

from polyc.errors import ArgumentError
from polyc.ir import affine, tree
from polyc.ir.expr import Load, substitute_indices
from polyc.ir.kernel import Array, Kernel, Statement, Step


def specialize(kernel: Kernel, values: Mapping[str, int]) -> Kernel:
    """``kernel`` with the parameters in ``values`` replaced by those integers.

    Raises:
        ArgumentError: for a name that is not a parameter, a value that is not an
            int, or values the kernel's context excludes.
    """
    op = "specialize"
    for name, v in values.items():
        if name not in kernel.params:
            raise ArgumentError(
                f"{op}: {name!r} is not a parameter of kernel {kernel.name} because "
                f"its parameters are {', '.join(kernel.params) or 'none'}. Pass "
                "values for those."
            )
        if isinstance(v, bool) or not isinstance(v, int):
            raise ArgumentError(
                f"{op}: {name}={v!r} is not an integer because sizes are integers. "
                f"Pass {name}=<int>."
            )
    if not values:
        return kernel
    fixed = _fixed(kernel, values)
    if fixed.intersect(kernel.context).is_empty():
        cond = str(kernel.context).split(":", 1)[-1].rstrip(" }").strip()
        raise ArgumentError(
            f"{op}: {_text(values)} is outside kernel {kernel.name}'s context because "
            f"it requires {cond}. Pass values that satisfy it."
        )
    ids = tree._param_ids(fixed)
    sizes = {n: affine.const(v) for n, v in values.items()}
    arrays = {
        name: Array(
            a.name, tuple(d.substitute(sizes) for d in a.shape), a.dtype, a.role
        )
        for name, a in kernel.arrays.items()
    }
    stmts = [
        Statement(
            s.name,
            s.iterators,
            tree.fix_params(s.domain, fixed, ids),
            Load(
                s.target.array,
                tuple(a.substitute(sizes) for a in s.target.index),
                s.target.dtype,
            ),
            substitute_indices(s.body, sizes),
            s.origin,
        )
        for s in kernel.statements
    ]
    program = tree.specialize_schedule(kernel.original.schedule, fixed)
    if kernel.history:
        schedule = tree.specialize_schedule(kernel.schedule, fixed)
        history = (Step("apply_schedule", (schedule.get_root().to_str(),)),)
    else:
        schedule, history = program, ()
    params = tuple(p for p in kernel.params if p not in values)
    out = kernel.replace(
        arrays=arrays,
        statements=stmts,
        params=params,
        context=tree.fix_params(kernel.context, fixed, ids),
        schedule=schedule,
        history=history,
        program_schedule=program,
        part_of=None,  # with fixed sizes, a part is a program of its own
    )
    out._validate()
    return out


def _fixed(kernel: Kernel, values: Mapping[str, int]) -> isl.Set:
    names = list(values)
    cond = " and ".join(f"{n} = {values[n]}" for n in names)
    return isl.Set(f"[{', '.join(names)}] -> {{ : {cond} }}")


def _text(values: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in values.items())
