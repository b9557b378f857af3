"""Small reference kernels shared by tests (built with the compute API and Program)."""

from __future__ import annotations

from polyc import compute as pc
from polyc.lang.program import Program
from schedules import examples


def matmul(M=4, N=3, K=5, dtype="float32"):
    A = pc.placeholder("A", (M, K), dtype)
    B = pc.placeholder("B", (K, N), dtype)
    k = pc.reduce_axis(K, "k")
    C = pc.compute("C", (M, N), lambda i, j: pc.sum(A[i, k] * B[k, j], k))
    return pc.kernel("matmul", [C])


def jacobi2d(dtype="float64"):
    """PolyBench jacobi-2d with symbolic ``T`` and ``N``."""
    return examples.jacobi2d(None, None, dtype)


def lu(dtype="float64"):
    """Right-looking LU without pivoting (Pluto's lu.c)."""
    p = Program("lu")
    N = p.param("N")
    A = p.array("A", (N, N), dtype, role="inout")
    with p.loop("k", 0, N) as k:
        with p.loop("j", k + 1, N) as j:
            A[k, j] = A[k, j] / A[k, k]
        with p.loop("i", k + 1, N) as i, p.loop("j", k + 1, N) as j:
            A[i, j] = A[i, j] - A[i, k] * A[k, j]
    return p.kernel()


def seidel2d(dtype="float64"):
    """PolyBench seidel-2d with symbolic ``T`` and ``N``."""
    return examples.seidel2d(None, None, dtype)


def producer_consumer(N=16):
    A = pc.placeholder("A", (N,))
    B = pc.compute("B", (N,), lambda i: A[i] * 2.0)
    C = pc.compute("C", (N - 1,), lambda i: B[i] + B[i + 1])
    return pc.kernel("prodcons", [C])
