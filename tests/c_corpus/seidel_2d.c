/* seidel-2d: in-place 9-point Gauss-Seidel sweeps */
#include "dump.h"
#define N 10

static double A[N][N];

static void kernel_seidel_2d(int tsteps)
{
  int t, i, j;
#pragma scop
  for (t = 0; t <= tsteps - 1; t++)
    for (i = 1; i <= N - 2; i++)
      for (j = 1; j <= N - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                   + A[i][j - 1] + A[i][j] + A[i][j + 1]
                   + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
#pragma endscop
}

void run_seidel_2d(void)
{
  int tsteps = 3;
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) A[i][j] = val(i, j, 1);
  dump_i("param", "tsteps", &tsteps, 1);
  dump_d("in", "A", &A[0][0], N * N);
  kernel_seidel_2d(tsteps);
  dump_d("out", "A", &A[0][0], N * N);
}
