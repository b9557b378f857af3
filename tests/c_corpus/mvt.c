/* mvt: x1 += A y1 and x2 += A^T y2 */
#include "dump.h"

void kernel_mvt(int n, double x1[n], double x2[n], double y_1[n], double y_2[n],
                double A[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x1[i] = x1[i] + A[i][j] * y_1[j];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      x2[i] = x2[i] + A[j][i] * y_2[j];
#pragma endscop
}

void run_mvt(void)
{
  int n = 12;
  double x1[12], x2[12], y_1[12], y_2[12], A[12][12];
  for (int i = 0; i < n; i++) {
    x1[i] = val(i, 0, 1); x2[i] = val(i, 0, 2); y_1[i] = val(i, 0, 3); y_2[i] = val(i, 0, 4);
    for (int j = 0; j < n; j++) A[i][j] = val(i, j, 5);
  }
  dump_i("param", "n", &n, 1);
  dump_d("in", "x1", x1, n); dump_d("in", "x2", x2, n); dump_d("in", "y_1", y_1, n);
  dump_d("in", "y_2", y_2, n); dump_d("in", "A", &A[0][0], n * n);
  kernel_mvt(n, x1, x2, y_1, y_2, A);
  dump_d("out", "x1", x1, n); dump_d("out", "x2", x2, n);
}
