/* gramschmidt: QR by modified Gram-Schmidt; scalar nrm, sqrt */
#include <math.h>
#include "dump.h"

void kernel_gramschmidt(int m, int n, double A[m][n], double R[n][n], double Q[m][n])
{
  double nrm;
#pragma scop
  for (int k = 0; k < n; k++) {
    nrm = 0.0;
    for (int i = 0; i < m; i++)
      nrm += A[i][k] * A[i][k];
    R[k][k] = sqrt(nrm);
    for (int i = 0; i < m; i++)
      Q[i][k] = A[i][k] / R[k][k];
    for (int j = k + 1; j < n; j++) {
      R[k][j] = 0.0;
      for (int i = 0; i < m; i++)
        R[k][j] += Q[i][k] * A[i][j];
      for (int i = 0; i < m; i++)
        A[i][j] = A[i][j] - Q[i][k] * R[k][j];
    }
  }
#pragma endscop
}

void run_gramschmidt(void)
{
  int m = 10, n = 8;
  double A[10][8], R[8][8], Q[10][8];
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) { A[i][j] = val(i, j, 1) + (i == j); Q[i][j] = 0; }
  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) R[i][j] = 0;
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "A", &A[0][0], m * n); dump_d("in", "R", &R[0][0], n * n);
  dump_d("in", "Q", &Q[0][0], m * n);
  kernel_gramschmidt(m, n, A, R, Q);
  dump_d("out", "A", &A[0][0], m * n); dump_d("out", "R", &R[0][0], n * n);
  dump_d("out", "Q", &Q[0][0], m * n);
}
