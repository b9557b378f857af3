/* 2mm: D = alpha*A*B*C + beta*D, with the temporary product in tmp */
#include "dump.h"

void kernel_2mm(int ni, int nj, int nk, int nl, double alpha, double beta,
                double tmp[ni][nj], double A[ni][nk], double B[nk][nj],
                double C[nj][nl], double D[ni][nl])
{
#pragma scop
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) {
      tmp[i][j] = 0.0;
      for (int k = 0; k < nk; ++k)
        tmp[i][j] += alpha * A[i][k] * B[k][j];
    }
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nl; j++) {
      D[i][j] *= beta;
      for (int k = 0; k < nj; ++k)
        D[i][j] += tmp[i][k] * C[k][j];
    }
#pragma endscop
}

void run_2mm(void)
{
  int ni = 6, nj = 7, nk = 8, nl = 5;
  double alpha = 1.5, beta = 1.2;
  double tmp[6][7], A[6][8], B[8][7], C[7][5], D[6][5];
  for (int i = 0; i < ni; i++) for (int j = 0; j < nk; j++) A[i][j] = val(i, j, 1);
  for (int i = 0; i < nk; i++) for (int j = 0; j < nj; j++) B[i][j] = val(i, j, 2);
  for (int i = 0; i < nj; i++) for (int j = 0; j < nl; j++) C[i][j] = val(i, j, 3);
  for (int i = 0; i < ni; i++) for (int j = 0; j < nl; j++) D[i][j] = val(i, j, 4);
  for (int i = 0; i < ni; i++) for (int j = 0; j < nj; j++) tmp[i][j] = 0;
  dump_i("param", "ni", &ni, 1); dump_i("param", "nj", &nj, 1);
  dump_i("param", "nk", &nk, 1); dump_i("param", "nl", &nl, 1);
  dump_d("in", "alpha", &alpha, 1); dump_d("in", "beta", &beta, 1);
  dump_d("in", "A", &A[0][0], ni * nk); dump_d("in", "B", &B[0][0], nk * nj);
  dump_d("in", "C", &C[0][0], nj * nl); dump_d("in", "D", &D[0][0], ni * nl);
  dump_d("in", "tmp", &tmp[0][0], ni * nj);
  kernel_2mm(ni, nj, nk, nl, alpha, beta, tmp, A, B, C, D);
  dump_d("out", "tmp", &tmp[0][0], ni * nj);
  dump_d("out", "D", &D[0][0], ni * nl);
}
