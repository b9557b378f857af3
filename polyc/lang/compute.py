"""The compute API: tensors, index variables, reductions and element definitions.

A tensor-expression language in the spirit of Halide and TVM's ``te``::

    from polyc import compute as pc

    M, N, K = 64, 48, 32
    A = pc.placeholder("A", (M, K), "float32")
    B = pc.placeholder("B", (K, N), "float32")
    k = pc.reduce_axis(K, "k")
    C = pc.compute("C", (M, N), lambda i, j: pc.sum(A[i, k] * B[k, j], k))
    kernel = pc.kernel("matmul", outputs=[C])

Definitions can also be written as assignments, which allows several definitions of
one tensor (updates) and multi-statement kernels with intermediate tensors::

    i, j = pc.indices("i j")
    C = pc.tensor("C", (M, N), "float32")
    C[i, j] = 0.0
    C[i, j] += A[i, k] * B[k, j]

Sizes may be symbolic: ``N = pc.param("N")`` is an isl parameter.

This module is the API's one public face (``polyc.compute``). The objects the user
writes live in :mod:`polyc.lang.surface`; :func:`kernel`, which lowers the
definitions into isl domains, accesses and a Kernel, in :mod:`polyc.lang.lower`.
"""

from __future__ import annotations

# a re-export module: every name below is part of the API (pc.<name>)
from polyc.ir.expr import Expr, Index, Select, select
from polyc.lang.lower import kernel
from polyc.lang.surface import (
    IndexVar,
    Reduce,
    Tensor,
    TensorLoad,
    abs,
    compute,
    const,
    erf,
    exp,
    index,
    indices,
    log,
    max,
    maximum,
    min,
    minimum,
    param,
    placeholder,
    prod,
    reduce_axis,
    rsqrt,
    sigmoid,
    sqrt,
    sum,
    tanh,
    tensor,
)

__all__ = [
    "IndexVar",
    "Reduce",
    "Tensor",
    "compute",
    "indices",
    "kernel",
    "max",
    "maximum",
    "min",
    "minimum",
    "param",
    "placeholder",
    "prod",
    "reduce_axis",
    "select",
    "sum",
    "tensor",
]
