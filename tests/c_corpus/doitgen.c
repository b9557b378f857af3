/* doitgen: multiresolution analysis kernel, a contraction over the last dimension of
   A with a copy back through a one-row temporary (sum) */
#include "dump.h"

void kernel_doitgen(int nr, int nq, int np, double A[nr][nq][np], double C4[np][np],
                    double sum[np])
{
  int r, q, p, s;
#pragma scop
  for (r = 0; r < nr; r++)
    for (q = 0; q < nq; q++) {
      for (p = 0; p < np; p++) {
        sum[p] = 0.0;
        for (s = 0; s < np; s++)
          sum[p] += A[r][q][s] * C4[s][p];
      }
      for (p = 0; p < np; p++)
        A[r][q][p] = sum[p];
    }
#pragma endscop
}

void run_doitgen(void)
{
  int nr = 5, nq = 4, np = 6;
  double A[5][4][6], C4[6][6], sum[6];
  for (int i = 0; i < nr; i++)
    for (int j = 0; j < nq; j++)
      for (int k = 0; k < np; k++) A[i][j][k] = val(i * nq + j, k, 1);
  for (int i = 0; i < np; i++) { sum[i] = 0; for (int j = 0; j < np; j++) C4[i][j] = val(i, j, 2); }
  dump_i("param", "nr", &nr, 1); dump_i("param", "nq", &nq, 1);
  dump_i("param", "np", &np, 1);
  dump_d("in", "A", &A[0][0][0], nr * nq * np); dump_d("in", "C4", &C4[0][0], np * np);
  dump_d("in", "sum", sum, np);
  kernel_doitgen(nr, nq, np, A, C4, sum);
  dump_d("out", "A", &A[0][0][0], nr * nq * np); dump_d("out", "sum", sum, np);
}
