/* doitgen: A[r][q][:] = A[r][q][:] * C4 through a one-row temporary, PolyBench's
   LARGE size (150 x 140 x 160) */
#include "harness.h"
#define NR 150
#define NQ 140
#define NP 160

static double A[NR][NQ][NP], C4[NP][NP], sum[NP];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int r = 0; r < NR; r++)
    for (int q = 0; q < NQ; q++) {
      for (int p = 0; p < NP; p++) {
        sum[p] = 0.0;
        for (int s = 0; s < NP; s++)
          sum[p] += A[r][q][s] * C4[s][p];
      }
      for (int p = 0; p < NP; p++)
        A[r][q][p] = sum[p];
    }
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < NR; i++)
    for (int j = 0; j < NQ; j++)
      for (int k = 0; k < NP; k++)
        A[i][j][k] = (double)((i * j + k) % NP) / NP;
  for (int i = 0; i < NP; i++)
    for (int j = 0; j < NP; j++)
      C4[i][j] = (double)(i * j % NP) / NP;
}

int main(void)
{
  BENCH(init(), kernel(), &A[0][0][0], (long)NR * NQ * NP);
  return 0;
}
