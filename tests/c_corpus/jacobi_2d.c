/* jacobi-2d: 5-point stencil in float, time loop around two sweeps */
#include "dump.h"

void kernel_jacobi_2d(int tsteps, int n, float A[n][n], float B[n][n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i][j] = 0.2f * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = 0.2f * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j]);
  }
#pragma endscop
}

void run_jacobi_2d(void)
{
  int tsteps = 3, n = 12;
  float A[12][12], B[12][12];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) { A[i][j] = (float)val(i, j, 1); B[i][j] = (float)val(i, j, 2); }
  dump_i("param", "tsteps", &tsteps, 1); dump_i("param", "n", &n, 1);
  dump_f("in", "A", &A[0][0], n * n); dump_f("in", "B", &B[0][0], n * n);
  kernel_jacobi_2d(tsteps, n, A, B);
  dump_f("out", "A", &A[0][0], n * n); dump_f("out", "B", &B[0][0], n * n);
}
