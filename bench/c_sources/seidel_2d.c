/* seidel-2d: 20 in-place 9-point sweeps on 1000 x 1000 */
#include "harness.h"
#define T 20
#define N 1000

static double A[N][N];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int t = 0; t <= T - 1; t++)
    for (int i = 1; i <= N - 2; i++)
      for (int j = 1; j <= N - 2; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                   + A[i][j - 1] + A[i][j] + A[i][j + 1]
                   + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0;
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) A[i][j] = ((double)i * (j + 2) + 2) / N;
}

int main(void)
{
  BENCH(init(), kernel(), &A[0][0], (long)N * N);
  return 0;
}
