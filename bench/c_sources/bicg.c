/* bicg: s = A^T r and q = A p in one sweep, PolyBench's LARGE size (A is 2100 x
   1900) */
#include "harness.h"
#define M 1900
#define N 2100

static double A[N][M], s[M], q[N], p[M], r[N];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int i = 0; i < M; i++)
    s[i] = 0;
  for (int i = 0; i < N; i++) {
    q[i] = 0.0;
    for (int j = 0; j < M; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < M; i++)
    p[i] = (double)(i % M) / M;
  for (int i = 0; i < N; i++) {
    r[i] = (double)(i % N) / N;
    for (int j = 0; j < M; j++)
      A[i][j] = (double)(i * (j + 1) % N) / N;
  }
}

int main(void)
{
  BENCH(init(), kernel(), s, (long)M);
  return 0;
}
