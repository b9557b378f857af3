/* gesummv: y = alpha*A*x + beta*B*x with a scalar accumulator tmp per row */
#include "dump.h"

void kernel_gesummv(int n, double alpha, double beta, double A[n][n],
                    double B[n][n], double tmp[n], double x[n], double y[n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++) {
    tmp[i] = 0.0;
    y[i] = 0.0;
    for (j = 0; j < n; j++) {
      tmp[i] = A[i][j] * x[j] + tmp[i];
      y[i] = B[i][j] * x[j] + y[i];
    }
    y[i] = alpha * tmp[i] + beta * y[i];
  }
#pragma endscop
}

void run_gesummv(void)
{
  int n = 10;
  double alpha = 1.5, beta = 1.2;
  double A[10][10], B[10][10], tmp[10], x[10], y[10];
  for (int i = 0; i < n; i++) {
    x[i] = val(i, 0, 1); tmp[i] = 0; y[i] = 0;
    for (int j = 0; j < n; j++) { A[i][j] = val(i, j, 2); B[i][j] = val(i, j, 3); }
  }
  dump_i("param", "n", &n, 1);
  dump_d("in", "alpha", &alpha, 1); dump_d("in", "beta", &beta, 1);
  dump_d("in", "A", &A[0][0], n * n); dump_d("in", "B", &B[0][0], n * n);
  dump_d("in", "tmp", tmp, n); dump_d("in", "x", x, n); dump_d("in", "y", y, n);
  kernel_gesummv(n, alpha, beta, A, B, tmp, x, y);
  dump_d("out", "tmp", tmp, n); dump_d("out", "y", y, n);
}
