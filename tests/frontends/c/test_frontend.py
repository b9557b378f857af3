"""The C frontend's model of a region: parameters, macros, defines and includes,
scalars and their privatisation, array roles, whole functions, and the Program
builder's additions it relies on (downward loops, isl-set conditions)."""

from __future__ import annotations

import islpy as isl
import numpy as np

import polyc
from polyc.frontends.c.parse import parse_c
from polyc.ir.kernel import Role
from polyc.lang.program import Program
from tests.support.paths import CORPUS

SCALED = """#define N 12
#define SCALE 3
void f(double A[N], double B[N]) {
#pragma scop
  for (int i = 0; i < N; i++)
    B[i] = A[i] * SCALE;
#pragma endscop
}
"""


def test_macros_become_parameters_with_known_values():
    (region,) = parse_c(SCALED)
    assert set(region.kernel.params) == {"N", "SCALE"}
    assert region.param_values == {"N": 12, "SCALE": 3}
    a = np.arange(12.0)
    # B[N] is declared with N's value: written only up to N, it stays in/out
    assert region.kernel.arrays["B"].role == Role.INOUT
    inputs = {"A": a, "B": np.zeros(12)}
    out = polyc.interpret(region.kernel, inputs, **region.param_values)
    assert np.array_equal(out["B"], a * 3)


def test_defines_and_include_dirs_act_like_the_compilers(tmp_path):
    (tmp_path / "sizes.h").write_text("#ifndef N\n#define N 4\n#endif\n")
    source = '#include "sizes.h"\n' + SCALED.replace("#define N 12\n", "")
    (region,) = parse_c(source, include_dirs=[str(tmp_path)])
    assert region.param_values["N"] == 4
    (region,) = parse_c(source, include_dirs=[str(tmp_path)], defines={"N": 20})
    assert region.param_values["N"] == 20
    (region,) = parse_c(source, include_dirs=[str(tmp_path)], defines=["N=7"])
    assert region.param_values["N"] == 7


def test_a_product_by_a_macro_takes_its_value():
    source = """#define W 5
void f(int h, double A[h][W * W], double B[h][W]) {
#pragma scop
  for (int i = 0; i < h; i++)
    for (int j = 0; j < W; j++)
      B[i][j] = A[i][j * W];
#pragma endscop
}
"""
    (kernel,) = polyc.from_c(source)
    assert kernel.params == ("h",)  # W is a constant of the region
    a = np.arange(75.0).reshape(3, 25)
    out = polyc.interpret(kernel, {"A": a}, h=3)
    assert np.array_equal(out["B"], a[:, ::5])


def test_linearised_by_a_macro_keeps_the_macro_a_parameter():
    source = """#define W 5
void f(int h, double *A, double B[h][W]) {
#pragma scop
  for (int i = 0; i < h; i++)
    for (int j = 0; j < W; j++)
      B[i][j] = A[i * W + j];
#pragma endscop
}
"""
    (kernel,) = polyc.from_c(source)
    assert set(kernel.params) == {"h", "W"}
    assert [str(d) for d in kernel.arrays["A"].shape] == ["h", "W"]
    a = np.arange(15.0).reshape(3, 5)
    out = polyc.interpret(kernel, {"A": a, "B": np.zeros((3, 5))}, W=5)
    assert np.array_equal(out["B"], a)


def test_private_scalar_is_expanded_along_the_loops_it_does_not_cross():
    (region,) = parse_c(CORPUS / "durbin.c")
    k = region.kernel
    assert region.privatized == {"sum": ("k",)}
    assert k.arrays["sum"].role == Role.TEMP and k.arrays["sum"].ndim == 1
    # alpha and beta carry values from one k to the next: they stay scalars
    assert k.arrays["alpha"].ndim == 0 and k.arrays["beta"].ndim == 0
    assert k.arrays["z"].role == Role.TEMP  # a local array dead after the region


def test_roles_follow_reads_and_writes():
    (kernel,) = polyc.from_c(CORPUS / "2mm.c")
    roles = {a.name: a.role for a in kernel.arrays.values()}
    assert roles["A"] == Role.INPUT and roles["alpha"] == Role.INPUT
    assert roles["D"] == Role.INOUT  # read before written (D *= beta)
    assert roles["tmp"] == Role.OUTPUT  # written everywhere before any read


def test_in_bounds_assumption_becomes_the_context():
    source = """void f(int n, double A[10]) {
#pragma scop
  for (int i = 0; i < n; i++)
    A[i] = 1.0;
#pragma endscop
}
"""
    (kernel,) = polyc.from_c(source)
    assert kernel.context.is_equal(isl.Set("[n] -> { : n <= 10 }"))


def test_whole_function_as_the_region():
    source = """void scale(int n, float x[n], float a) {
  for (int i = 0; i < n; i++)
    x[i] = a * x[i] + (float)i;
  return;
}
"""
    kernel = polyc.from_c(source, function="scale")
    x = np.ones(5, np.float32)
    out = polyc.interpret(kernel, {"x": x, "a": np.float32(2)})
    assert np.array_equal(out["x"], np.array([2, 3, 4, 5, 6], np.float32))


def test_c_typing_is_explicit():
    source = """void f(int n, float A[n], int B[n]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    A[i] = A[i] * 0.1;
    B[i] = B[i] / 2 + (i > 2);
  }
#pragma endscop
}
"""
    (kernel,) = polyc.from_c(source)
    s0, _ = kernel.statements
    assert str(s0.body) == "float32(float64(A[i]) * 0.1)"
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([-5, 5, 7, 9], np.int32)
    out = polyc.interpret(kernel, {"A": a, "B": b})
    assert (
        out["A"].tobytes() == (a.astype(np.float64) * 0.1).astype(np.float32).tobytes()
    )
    assert out["B"].tolist() == [-2, 2, 3, 5]  # C truncates -5 / 2 to -2


def test_program_downward_loop_and_set_conditions():
    p = Program("down")
    n = p.param("n", minimum=None)
    a = p.array("A", (n,), "int32", role="inout")
    with p.loop("i", 1, n, step=-1) as i:
        a[i] = a[i - 1] + a[i]
    where = isl.Set("[n] -> { [j] : 0 <= j < n and j % 3 = 0 }")
    positive = isl.Set("[n] -> { [j] : j > 0 }")
    with p.loop("j", [], [], where=where) as j, p.when(positive):
        a[j] = a[j] * 10
    kernel = p.kernel()
    assert "L0(i_r)" in str(kernel.schedule)
    out = polyc.interpret(kernel, {"A": np.arange(7, dtype=np.int32)})
    # downward: each A[i] adds the old A[i - 1]; then multiples of 3 (not 0) times 10
    assert out["A"].tolist() == [0, 1, 3, 50, 7, 9, 110]


def test_three_dimensional_linearised_array():
    source = """void f(int n, int m, int q, float *T) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int k = 0; k < q; k++)
        T[(i * m + j) * q + k] = T[i * m * q + j * q + k] * 2.0f;
#pragma endscop
}
"""
    (kernel,) = polyc.from_c(source)
    assert [str(d) for d in kernel.arrays["T"].shape] == ["n", "m", "q"]
    t = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert np.array_equal(polyc.interpret(kernel, {"T": t})["T"], t * 2)
