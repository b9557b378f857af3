/* gemm: C = alpha*A*B + beta*C, C99 VLA parameters */
#include "dump.h"

void kernel_gemm(int ni, int nj, int nk, double alpha, double beta,
                 double C[ni][nj], double A[ni][nk], double B[nk][nj])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++)
      for (j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
  }
#pragma endscop
}

void run_gemm(void)
{
  int ni = 9, nj = 7, nk = 8;
  double alpha = 1.5, beta = 1.2;
  double C[9][7], A[9][8], B[8][7];
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nj; j++) C[i][j] = val(i, j, 1);
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < nk; j++) A[i][j] = val(i, j, 2);
  for (int i = 0; i < nk; i++)
    for (int j = 0; j < nj; j++) B[i][j] = val(i, j, 3);
  dump_i("param", "ni", &ni, 1); dump_i("param", "nj", &nj, 1); dump_i("param", "nk", &nk, 1);
  dump_d("in", "alpha", &alpha, 1); dump_d("in", "beta", &beta, 1);
  dump_d("in", "C", &C[0][0], ni * nj); dump_d("in", "A", &A[0][0], ni * nk);
  dump_d("in", "B", &B[0][0], nk * nj);
  kernel_gemm(ni, nj, nk, alpha, beta, C, A, B);
  dump_d("out", "C", &C[0][0], ni * nj);
}
