/* atax: y = A^T (A x); pointer parameters whose extents polyc infers */
#include "dump.h"
#define NX 9
#define NY 11

void kernel_atax(double (*A)[NY], double *x, double *y, double *tmp)
{
  int i, j;
#pragma scop
  for (i = 0; i < NY; i++)
    y[i] = 0;
  for (i = 0; i < NX; i++) {
    tmp[i] = 0.0;
    for (j = 0; j < NY; j++)
      tmp[i] = tmp[i] + A[i][j] * x[j];
    for (j = 0; j < NY; j++)
      y[j] = y[j] + A[i][j] * tmp[i];
  }
#pragma endscop
}

void run_atax(void)
{
  double A[NX][NY], x[NY], y[NY], tmp[NX];
  for (int i = 0; i < NX; i++) { tmp[i] = 0; for (int j = 0; j < NY; j++) A[i][j] = val(i, j, 1); }
  for (int j = 0; j < NY; j++) { x[j] = val(j, 0, 2); y[j] = 0; }
  dump_d("in", "A", &A[0][0], NX * NY); dump_d("in", "x", x, NY);
  dump_d("in", "y", y, NY); dump_d("in", "tmp", tmp, NX);
  kernel_atax(A, x, y, tmp);
  dump_d("out", "y", y, NY); dump_d("out", "tmp", tmp, NX);
}
