/* jacobi-1d: time-stepped 3-point stencil, ping-pong between A and B */
#include "dump.h"
#define TSTEPS 4
#define N 20

void kernel_jacobi_1d(double A[N], double B[N])
{
  int t, i;
#pragma scop
  for (t = 0; t < TSTEPS; t++) {
    for (i = 1; i < N - 1; i++)
      B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
    for (i = 1; i < N - 1; i++)
      A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1]);
  }
#pragma endscop
}

void run_jacobi_1d(void)
{
  double A[N], B[N];
  for (int i = 0; i < N; i++) { A[i] = val(i, 0, 1); B[i] = val(i, 0, 2); }
  dump_d("in", "A", A, N); dump_d("in", "B", B, N);
  kernel_jacobi_1d(A, B);
  dump_d("out", "A", A, N); dump_d("out", "B", B, N);
}
