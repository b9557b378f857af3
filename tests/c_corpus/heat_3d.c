/* heat-3d: 7-point 3-D stencil, two sweeps per time step */
#include "dump.h"

void kernel_heat_3d(int tsteps, int n, double A[n][n][n], double B[n][n][n])
{
  int t, i, j, k;
#pragma scop
  for (t = 1; t <= tsteps; t++) {
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        for (k = 1; k < n - 1; k++)
          B[i][j][k] = 0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                     + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                     + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1])
                     + A[i][j][k];
    for (i = 1; i < n - 1; i++)
      for (j = 1; j < n - 1; j++)
        for (k = 1; k < n - 1; k++)
          A[i][j][k] = 0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                     + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                     + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1])
                     + B[i][j][k];
  }
#pragma endscop
}

void run_heat_3d(void)
{
  int tsteps = 2, n = 7;
  double A[7][7][7], B[7][7][7];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++) { A[i][j][k] = val(i * n + j, k, 1); B[i][j][k] = A[i][j][k]; }
  dump_i("param", "tsteps", &tsteps, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "A", &A[0][0][0], n * n * n); dump_d("in", "B", &B[0][0][0], n * n * n);
  kernel_heat_3d(tsteps, n, A, B);
  dump_d("out", "A", &A[0][0][0], n * n * n); dump_d("out", "B", &B[0][0][0], n * n * n);
}
