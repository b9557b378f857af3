/* syrk: C = alpha*A*A^T + beta*C (lower triangle), 1000 x 1000 */
#include "harness.h"
#define N 1000
#define M 1000

static double A[N][M], C[N][N];

static NOINLINE void kernel(double alpha, double beta)
{
#pragma scop
  for (int i = 0; i < N; i++) {
    for (int j = 0; j <= i; j++)
      C[i][j] *= beta;
    for (int k = 0; k < M; k++)
      for (int j = 0; j <= i; j++)
        C[i][j] += alpha * A[i][k] * A[j][k];
  }
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < M; j++) A[i][j] = (double)((i * j + 1) % N) / N;
    for (int j = 0; j < N; j++) C[i][j] = (double)((i * j + 2) % M) / M;
  }
}

int main(void)
{
  BENCH(init(), kernel(1.5, 1.2), &C[0][0], (long)N * N);
  return 0;
}
