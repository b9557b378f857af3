/* matmul 1024^3 (C += A*B), the loop order people write first */
#include <stdlib.h>
#include "harness.h"
#define N 1024

static double A[N][N], B[N][N], C[N][N];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      for (int k = 0; k < N; k++)
        C[i][j] += A[i][k] * B[k][j];
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (double)((i * j + 1) % N) / N;
      B[i][j] = (double)((i + 2 * j) % N) / N;
      C[i][j] = 0.0;
    }
}

int main(void)
{
  BENCH(init(), kernel(), &C[0][0], (long)N * N);
  return 0;
}
