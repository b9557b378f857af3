/* ludcmp: LU then forward and backward substitution; scalar w private to each
   statement group, a downward loop for the back substitution */
#include "dump.h"

void kernel_ludcmp(int n, double A[n][n], double b[n], double x[n], double y[n])
{
  int i, j, k;
  double w;
#pragma scop
  for (i = 0; i < n; i++) {
    for (j = 0; j < i; j++) {
      w = A[i][j];
      for (k = 0; k < j; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w / A[j][j];
    }
    for (j = i; j < n; j++) {
      w = A[i][j];
      for (k = 0; k < i; k++)
        w -= A[i][k] * A[k][j];
      A[i][j] = w;
    }
  }
  for (i = 0; i < n; i++) {
    w = b[i];
    for (j = 0; j < i; j++)
      w -= A[i][j] * y[j];
    y[i] = w;
  }
  for (i = n - 1; i >= 0; i--) {
    w = y[i];
    for (j = i + 1; j < n; j++)
      w -= A[i][j] * x[j];
    x[i] = w / A[i][i];
  }
#pragma endscop
}

void run_ludcmp(void)
{
  int n = 10;
  double A[10][10], b[10], x[10], y[10];
  for (int i = 0; i < n; i++) {
    b[i] = val(i, 0, 1); x[i] = 0; y[i] = 0;
    for (int j = 0; j < n; j++) A[i][j] = (i == j ? n + 1.0 : 0.0) + val(i, j, 2);
  }
  dump_i("param", "n", &n, 1);
  dump_d("in", "A", &A[0][0], n * n); dump_d("in", "b", b, n);
  dump_d("in", "x", x, n); dump_d("in", "y", y, n);
  kernel_ludcmp(n, A, b, x, y);
  dump_d("out", "A", &A[0][0], n * n); dump_d("out", "x", x, n); dump_d("out", "y", y, n);
}
