"""The benchmark kernels as plain C loop nests, written the way a person would
(PolyBench style, program order, sizes as compile-time constants), for the
``gcc -O3`` and ``clang -O3 -polly`` columns of :mod:`bench.sched`.

Each entry: ``(argument array names, C body)``; arrays arrive as ``float *`` and
are viewed as fixed-size multi-dimensional arrays.
"""

from __future__ import annotations

HEADER = "#include <math.h>\n"


def matmul(n: int) -> tuple[list[str], str]:
    return (
        ["A", "B", "C"],
        f"""
#define N {n}
void plain(float *restrict A_, float *restrict B_, float *restrict C_) {{
  float (*A)[N] = (float (*)[N])A_, (*B)[N] = (float (*)[N])B_;
  float (*C)[N] = (float (*)[N])C_;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      C[i][j] = 0.0f;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        C[i][j] += A[i][k] * B[k][j];
}}
""",
    )


def two_mm(n: int) -> tuple[list[str], str]:
    return (
        ["A", "B", "C", "D", "tmp"],
        f"""
#define N {n}
void plain(float *restrict A_, float *restrict B_, float *restrict C_,
           float *restrict D_, float *restrict T_) {{
  float (*A)[N] = (float (*)[N])A_, (*B)[N] = (float (*)[N])B_;
  float (*C)[N] = (float (*)[N])C_, (*D)[N] = (float (*)[N])D_;
  float (*tmp)[N] = (float (*)[N])T_;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {{
      tmp[i][j] = 0.0f;
      for (int k = 0; k < N; k++)
        tmp[i][j] += A[i][k] * B[k][j];
    }}
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        D[i][j] += tmp[i][k] * C[k][j];
}}
""",
    )


def syrk(n: int) -> tuple[list[str], str]:
    return (
        ["A", "C"],
        f"""
#define N {n}
void plain(float *restrict A_, float *restrict C_) {{
  float (*A)[N] = (float (*)[N])A_, (*C)[N] = (float (*)[N])C_;
  for (int i = 0; i < N; i++)
    for (int k = 0; k < N; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += A[i][k] * A[j][k];
}}
""",
    )


def jacobi2d(n: int, steps: int) -> tuple[list[str], str]:
    return (
        ["A", "B"],
        f"""
#define N {n}
#define T {steps}
void plain(float *restrict A_, float *restrict B_) {{
  float (*A)[N] = (float (*)[N])A_, (*B)[N] = (float (*)[N])B_;
  for (int t = 0; t < T; t++) {{
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        B[i][j] = (A[i][j] + A[i][j-1] + A[i][j+1] + A[i+1][j] + A[i-1][j]) * 0.2f;
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i][j] = (B[i][j] + B[i][j-1] + B[i][j+1] + B[i+1][j] + B[i-1][j]) * 0.2f;
  }}
}}
""",
    )


def seidel2d(n: int, steps: int) -> tuple[list[str], str]:
    return (
        ["A"],
        f"""
#define N {n}
#define T {steps}
void plain(float *restrict A_) {{
  float (*A)[N] = (float (*)[N])A_;
  for (int t = 0; t < T; t++)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        A[i][j] = (A[i-1][j-1] + A[i-1][j] + A[i-1][j+1] + A[i][j-1] + A[i][j]
                   + A[i][j+1] + A[i+1][j-1] + A[i+1][j] + A[i+1][j+1]) / 9.0f;
}}
""",
    )


def conv2d(c: int, o: int, hw: int) -> tuple[list[str], str]:
    return (
        ["input", "weight", "out"],
        f"""
#define C {c}
#define O {o}
#define H {hw}
void plain(float *restrict I_, float *restrict W_, float *restrict O_) {{
  float (*in)[H][H] = (float (*)[H][H])I_;
  float (*w)[C][3][3] = (float (*)[C][3][3])W_;
  float (*out)[H][H] = (float (*)[H][H])O_;
  for (int o = 0; o < O; o++)
    for (int h = 0; h < H; h++)
      for (int x = 0; x < H; x++)
        out[o][h][x] = 0.0f;
  for (int o = 0; o < O; o++)
    for (int h = 0; h < H; h++)
      for (int x = 0; x < H; x++)
        for (int c = 0; c < C; c++)
          for (int rh = 0; rh < 3; rh++)
            for (int rw = 0; rw < 3; rw++)
              if (h + rh - 1 >= 0 && h + rh - 1 < H && x + rw - 1 >= 0 && x + rw - 1 < H)
                out[o][h][x] += in[c][h + rh - 1][x + rw - 1] * w[o][c][rh][rw];
}}
""",
    )


def softmax(n: int) -> tuple[list[str], str]:
    return (
        ["input", "out_max", "out_exp", "out_sum", "out"],
        f"""
#define N {n}
void plain(float *restrict I_, float *restrict mx, float *restrict E_,
           float *restrict sum, float *restrict O_) {{
  float (*in)[N] = (float (*)[N])I_, (*e)[N] = (float (*)[N])E_;
  float (*out)[N] = (float (*)[N])O_;
  for (int i = 0; i < N; i++) {{
    mx[i] = -INFINITY;
    for (int j = 0; j < N; j++)
      mx[i] = in[i][j] > mx[i] ? in[i][j] : mx[i];
  }}
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      e[i][j] = expf(in[i][j] - mx[i]);
  for (int i = 0; i < N; i++) {{
    sum[i] = 0.0f;
    for (int j = 0; j < N; j++)
      sum[i] += e[i][j];
  }}
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      out[i][j] = e[i][j] / sum[i];
}}
""",
    )
