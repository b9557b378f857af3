"""Classic polyhedral kernels (PolyBench style), for tests, benchmarks and docs.

Each builder returns a Kernel in program order. ``n`` (and ``steps``) are sizes; None
makes them symbolic parameters (``N``, ``T``). ``dtype`` is any polyc dtype; integer
kernels avoid division so that any legal reordering gives bit-identical results.
"""

from __future__ import annotations

from polyc.ir.kernel import Kernel
from polyc.lang import compute as pc
from polyc.lang.program import Program


def _size(p: Program, name: str, value: int | None):
    return p.param(name) if value is None else value


def _scale(dtype: str, value: float, x):
    """``value * x`` on floats; ``x`` on integers (no rounding to worry about)."""
    return x * value if dtype.startswith("float") else x


def matmul(
    n: int | None = 64, dtype: str = "float32", *, m: int | None = None, k=None
) -> Kernel:
    """``C = A @ B`` with the compute API: ``S0: C = 0``, ``S1: C += A * B``; ``C`` is
    ``m x n`` and the reduction ``k`` long (both ``n`` unless given)."""
    N = pc.param("N") if n is None else n
    M = N if m is None else m
    K = N if k is None else k
    A = pc.placeholder("A", (M, K), dtype)
    B = pc.placeholder("B", (K, N), dtype)
    r = pc.reduce_axis(K, "k")
    C = pc.compute("C", (M, N), lambda i, j: pc.sum(A[i, r] * B[r, j], r))
    return pc.kernel("matmul", outputs=[C])


def producer_consumer(n: int | None = 64, dtype: str = "float32") -> Kernel:
    """``B = A + 1`` then ``C = B * 2`` (two element-wise ops to fuse)."""
    N = pc.param("N") if n is None else n
    A = pc.placeholder("A", (N, N), dtype)
    B = pc.compute("B", (N, N), lambda i, j: A[i, j] + 1)
    C = pc.compute("C", (N, N), lambda i, j: B[i, j] * 2)
    return pc.kernel("producer_consumer", outputs=[C])


def two_mm(n: int | None = 64, dtype: str = "float32") -> Kernel:
    """PolyBench 2mm: ``tmp = A @ B``; ``D = D + tmp @ C`` (alpha, beta folded)."""
    p = Program("two_mm")
    N = _size(p, "N", n)
    A = p.array("A", (N, N), dtype)
    B = p.array("B", (N, N), dtype)
    C = p.array("C", (N, N), dtype)
    D = p.array("D", (N, N), dtype, role="inout")
    tmp = p.array("tmp", (N, N), dtype, role="temp")
    with p.loop("i", 0, N) as i, p.loop("j", 0, N) as j:
        tmp[i, j] = _zero(dtype)
        with p.loop("k", 0, N) as k:
            tmp[i, j] = tmp[i, j] + A[i, k] * B[k, j]
    with p.loop("i", 0, N) as i, p.loop("j", 0, N) as j, p.loop("k", 0, N) as k:
        D[i, j] = D[i, j] + tmp[i, k] * C[k, j]
    return p.kernel()


def syrk(n: int | None = 64, dtype: str = "float32") -> Kernel:
    """PolyBench syrk (lower triangle): ``C = C + A @ A.T`` for ``j <= i``."""
    p = Program("syrk")
    N = _size(p, "N", n)
    A = p.array("A", (N, N), dtype)
    C = p.array("C", (N, N), dtype, role="inout")
    with p.loop("i", 0, N) as i, p.loop("k", 0, N) as k, p.loop("j", 0, i + 1) as j:
        C[i, j] = C[i, j] + A[i, k] * A[j, k]
    return p.kernel()


def lu(n: int | None = 32, dtype: str = "float64") -> Kernel:
    """PolyBench lu (in place, no pivoting)."""
    p = Program("lu")
    N = _size(p, "N", n)
    A = p.array("A", (N, N), dtype, role="inout")
    with p.loop("i", 0, N) as i:
        with p.loop("j", 0, i) as j:
            with p.loop("k", 0, j) as k:
                A[i, j] = A[i, j] - A[i, k] * A[k, j]
            A[i, j] = A[i, j] / A[j, j]
        with p.loop("j", i, N) as j, p.loop("k", 0, i) as k:
            A[i, j] = A[i, j] - A[i, k] * A[k, j]
    return p.kernel()


def lu_right_looking(n: int | None = None, dtype: str = "float64") -> Kernel:
    """Right-looking LU without pivoting (Pluto's ``lu.c``): for each ``k`` the row
    is scaled, then the trailing block updated."""
    p = Program("lu")
    N = _size(p, "N", n)
    A = p.array("A", (N, N), dtype, role="inout")
    with p.loop("k", 0, N) as k:
        with p.loop("j", k + 1, N) as j:
            A[k, j] = A[k, j] / A[k, k]
        with p.loop("i", k + 1, N) as i, p.loop("j", k + 1, N) as j:
            A[i, j] = A[i, j] - A[i, k] * A[k, j]
    return p.kernel()


def producer_stencil(n: int = 16, dtype: str = "float32") -> Kernel:
    """``B = A * 2`` then the stencil ``C[i] = B[i] + B[i + 1]`` (a consumer that
    reads its producer one element ahead)."""
    A = pc.placeholder("A", (n,), dtype)
    B = pc.compute("B", (n,), lambda i: A[i] * 2.0)
    C = pc.compute("C", (n - 1,), lambda i: B[i] + B[i + 1])
    return pc.kernel("prodcons", [C])


def jacobi2d(
    n: int | None = 32, steps: int | None = 4, dtype: str = "float32"
) -> Kernel:
    """PolyBench jacobi-2d: two 5-point stencils ping-ponging between A and B."""
    p = Program("jacobi2d")
    N = _size(p, "N", n)
    T = _size(p, "T", steps)
    if n is None:
        p.assume("N >= 3")
    A = p.array("A", (N, N), dtype, role="inout")
    B = p.array("B", (N, N), dtype, role="inout")
    with p.loop("t", 0, T):
        with p.loop("i", 1, N - 1) as i, p.loop("j", 1, N - 1) as j:
            B[i, j] = _scale(dtype, 0.2, _cross(A, i, j))
        with p.loop("i", 1, N - 1) as i, p.loop("j", 1, N - 1) as j:
            A[i, j] = _scale(dtype, 0.2, _cross(B, i, j))
    return p.kernel()


def _cross(X, i, j):
    return X[i, j] + X[i, j - 1] + X[i, j + 1] + X[i + 1, j] + X[i - 1, j]


def seidel2d(
    n: int | None = 32, steps: int | None = 4, dtype: str = "float32"
) -> Kernel:
    """PolyBench seidel-2d: a 9-point Gauss-Seidel sweep in place."""
    p = Program("seidel2d")
    N = _size(p, "N", n)
    T = _size(p, "T", steps)
    if n is None:
        p.assume("N >= 3")
    A = p.array("A", (N, N), dtype, role="inout")
    with p.loop("t", 0, T), p.loop("i", 1, N - 1) as i, p.loop("j", 1, N - 1) as j:
        total = (
            A[i - 1, j - 1]
            + A[i - 1, j]
            + A[i - 1, j + 1]
            + A[i, j - 1]
            + A[i, j]
            + A[i, j + 1]
            + A[i + 1, j - 1]
            + A[i + 1, j]
            + A[i + 1, j + 1]
        )
        A[i, j] = total / 9.0 if dtype.startswith("float") else total
    return p.kernel()


def _zero(dtype: str):
    return 0.0 if dtype.startswith("float") else 0
