/* cholesky: in place, lower triangle; sqrt in the body */
#include <math.h>
#include "dump.h"

void kernel_cholesky(int n, double A[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++) {
      for (int k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[j][k];
      A[i][j] /= A[j][j];
    }
    for (int k = 0; k < i; k++)
      A[i][i] -= A[i][k] * A[i][k];
    A[i][i] = sqrt(A[i][i]);
  }
#pragma endscop
}

void run_cholesky(void)
{
  int n = 10;
  double A[10][10];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = (i == j ? n + 2.0 : 0.0) + 0.5 * (val(i, j, 1) + val(j, i, 1));
  dump_i("param", "n", &n, 1);
  dump_d("in", "A", &A[0][0], n * n);
  kernel_cholesky(n, A);
  dump_d("out", "A", &A[0][0], n * n);
}
