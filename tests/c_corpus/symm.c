/* symm: C = alpha*A*B + beta*C with A symmetric (lower triangle stored); a scalar
   temporary declared inside the region */
#include "dump.h"

void kernel_symm(int m, int n, double alpha, double beta,
                 double C[m][n], double A[m][m], double B[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double temp2 = 0;
      for (int k = 0; k < i; k++) {
        C[k][j] += alpha * B[i][j] * A[i][k];
        temp2 += B[k][j] * A[i][k];
      }
      C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2;
    }
#pragma endscop
}

void run_symm(void)
{
  int m = 8, n = 9;
  double alpha = 1.5, beta = 1.2;
  double C[8][9], A[8][8], B[8][9];
  for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) C[i][j] = val(i, j, 1);
  for (int i = 0; i < m; i++) for (int j = 0; j < m; j++) A[i][j] = val(i, j, 2);
  for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) B[i][j] = val(i, j, 3);
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "alpha", &alpha, 1); dump_d("in", "beta", &beta, 1);
  dump_d("in", "C", &C[0][0], m * n); dump_d("in", "A", &A[0][0], m * m);
  dump_d("in", "B", &B[0][0], m * n);
  kernel_symm(m, n, alpha, beta, C, A, B);
  dump_d("out", "C", &C[0][0], m * n);
}
