/* 2mm: D = alpha*A*B*C + beta*D at 800^2 */
#include "harness.h"
#define N 800

static double A[N][N], B[N][N], C[N][N], D[N][N], tmp[N][N];

static NOINLINE void kernel(double alpha, double beta)
{
#pragma scop
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      tmp[i][j] = 0.0;
      for (int k = 0; k < N; ++k)
        tmp[i][j] += alpha * A[i][k] * B[k][j];
    }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      D[i][j] *= beta;
      for (int k = 0; k < N; ++k)
        D[i][j] += tmp[i][k] * C[k][j];
    }
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * j + 1) % N) / N;
      B[i][j] = (double)(i * (j + 1) % N) / N;
      C[i][j] = (double)((i * (j + 3) + 1) % N) / N;
      D[i][j] = (double)(i * (j + 2) % N) / N;
    }
}

int main(void)
{
  BENCH(init(), kernel(1.5, 1.2), &D[0][0], (long)N * N);
  return 0;
}
