/* trisolv: forward substitution L x = b; pointer arguments */
#include "dump.h"

void kernel_trisolv(int n, double (*L)[12], double *x, const double *b)
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++) {
    x[i] = b[i];
    for (j = 0; j < i; j++)
      x[i] -= L[i][j] * x[j];
    x[i] = x[i] / L[i][i];
  }
#pragma endscop
}

void run_trisolv(void)
{
  int n = 12;
  double L[12][12], x[12], b[12];
  for (int i = 0; i < n; i++) {
    x[i] = 0; b[i] = val(i, 0, 1);
    for (int j = 0; j < n; j++) L[i][j] = (i == j ? 2.0 : 0.0) + val(i, j, 2);
  }
  dump_i("param", "n", &n, 1);
  dump_d("in", "L", &L[0][0], n * n); dump_d("in", "x", x, n); dump_d("in", "b", b, n);
  kernel_trisolv(n, L, x, b);
  dump_d("out", "x", x, n);
}
