/* gemver: rank-2 update then two matrix-vector products; float data */
#include "dump.h"

void kernel_gemver(int n, float alpha, float beta, float A[n][n],
                   float u1[n], float v1[n], float u2[n], float v2[n],
                   float w[n], float x[n], float y[n], float z[n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x[i] = x[i] + beta * A[j][i] * y[j];
  for (i = 0; i < n; i++)
    x[i] = x[i] + z[i];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      w[i] = w[i] + alpha * A[i][j] * x[j];
#pragma endscop
}

void run_gemver(void)
{
  int n = 11;
  float alpha = 1.5f, beta = 1.25f;
  float A[11][11], u1[11], v1[11], u2[11], v2[11], w[11], x[11], y[11], z[11];
  for (int i = 0; i < n; i++) {
    u1[i] = (float)val(i, 0, 1); u2[i] = (float)val(i, 0, 2);
    v1[i] = (float)val(i, 0, 3); v2[i] = (float)val(i, 0, 4);
    y[i] = (float)val(i, 0, 5); z[i] = (float)val(i, 0, 6);
    x[i] = 0.0f; w[i] = 0.0f;
    for (int j = 0; j < n; j++) A[i][j] = (float)val(i, j, 7);
  }
  dump_i("param", "n", &n, 1);
  dump_f("in", "alpha", &alpha, 1); dump_f("in", "beta", &beta, 1);
  dump_f("in", "A", &A[0][0], n * n);
  dump_f("in", "u1", u1, n); dump_f("in", "v1", v1, n); dump_f("in", "u2", u2, n);
  dump_f("in", "v2", v2, n); dump_f("in", "w", w, n); dump_f("in", "x", x, n);
  dump_f("in", "y", y, n); dump_f("in", "z", z, n);
  kernel_gemver(n, alpha, beta, A, u1, v1, u2, v2, w, x, y, z);
  dump_f("out", "A", &A[0][0], n * n); dump_f("out", "x", x, n); dump_f("out", "w", w, n);
}
