"""Small kernels that the dependence and fusion tests share."""

from __future__ import annotations

from polyc import compute as pc


def overwritten(n: int = 0, name: str = "overwritten"):
    """S0 writes T, S1 overwrites it (killing S0's values), S2 reads it, then
    ``n`` element-wise loop nests (with 12, a part of the first three is a
    quarter of the program)."""
    X, Y = pc.placeholder("X", (8,)), pc.placeholder("Y", (8,))
    (i,) = pc.indices("i")
    T = pc.tensor("T", (8,))
    T[i] = X[i]
    T[i] = Y[i]
    Z = pc.compute("Z", (8,), lambda i: T[i] + 1.0)
    for k in range(n):
        Z = pc.compute(f"Z{k}", (8,), lambda i, Z=Z: Z[i] * 2.0)
    return pc.kernel(name, outputs=[Z])


def window(later: bool):
    """Y = X + 1, then Z[i] sums a window of 3 of Y: from Y[i] on (``later``:
    elements written at larger i) or up to Y[i]."""
    X = pc.placeholder("X", (16,))
    Y = pc.compute("Y", (16,), lambda i: X[i] + 1.0)
    r = pc.reduce_axis(3, "r")
    if later:
        Z = pc.compute("Z", (14,), lambda i: pc.sum(Y[i + r], r))
    else:
        Z = pc.compute("Z", (16,), lambda i: pc.sum(Y[i - r], r, where=i - r >= 0))
    return pc.kernel("window", outputs=[Z])
