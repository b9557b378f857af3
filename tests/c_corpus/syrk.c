/* syrk: C = alpha*A*A^T + beta*C on the lower triangle; fixed-size arrays, macros */
#include "dump.h"
#define N 10
#define M 8

static double A[N][M];
static double C[N][N];

static void kernel_syrk(double alpha, double beta)
{
  int i, j, k;
#pragma scop
  for (i = 0; i < N; i++) {
    for (j = 0; j <= i; j++)
      C[i][j] *= beta;
    for (k = 0; k < M; k++)
      for (j = 0; j <= i; j++)
        C[i][j] += alpha * A[i][k] * A[j][k];
  }
#pragma endscop
}

void run_syrk(void)
{
  double alpha = 1.5, beta = 1.2;
  for (int i = 0; i < N; i++) for (int j = 0; j < M; j++) A[i][j] = val(i, j, 1);
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) C[i][j] = val(i, j, 2);
  dump_d("in", "alpha", &alpha, 1); dump_d("in", "beta", &beta, 1);
  dump_d("in", "A", &A[0][0], N * M); dump_d("in", "C", &C[0][0], N * N);
  kernel_syrk(alpha, beta);
  dump_d("out", "C", &C[0][0], N * N);
}
