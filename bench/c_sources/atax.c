/* atax: y = A^T (A x), PolyBench's LARGE size (A is 1900 x 2100) */
#include "harness.h"
#define M 1900
#define N 2100

static double A[M][N], x[N], y[N], tmp[M];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int i = 0; i < N; i++)
    y[i] = 0;
  for (int i = 0; i < M; i++) {
    tmp[i] = 0.0;
    for (int j = 0; j < N; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (int j = 0; j < N; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++)
    x[i] = 1 + i / (double)N;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++)
      A[i][j] = (double)((i + j) % N) / (5 * M);
}

int main(void)
{
  BENCH(init(), kernel(), y, (long)N);
  return 0;
}
