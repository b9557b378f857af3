/* trmm: B = alpha * A^T * B with A unit lower triangular */
#include "dump.h"

void kernel_trmm(int m, int n, double alpha, double A[m][m], double B[m][n])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      for (k = i + 1; k < m; k++)
        B[i][j] += A[k][i] * B[k][j];
      B[i][j] = alpha * B[i][j];
    }
#pragma endscop
}

void run_trmm(void)
{
  int m = 9, n = 7;
  double alpha = 1.5;
  double A[9][9], B[9][7];
  for (int i = 0; i < m; i++) for (int j = 0; j < m; j++) A[i][j] = val(i, j, 1);
  for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) B[i][j] = val(i, j, 2);
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "alpha", &alpha, 1);
  dump_d("in", "A", &A[0][0], m * m); dump_d("in", "B", &B[0][0], m * n);
  kernel_trmm(m, n, alpha, A, B);
  dump_d("out", "B", &B[0][0], m * n);
}
