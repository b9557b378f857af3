/* 3mm: G = (A*B)*(C*D), three products with two temporaries (E and F) */
#include "dump.h"

void kernel_3mm(int ni, int nj, int nk, int nl, int nm, double E[ni][nj],
                double A[ni][nk], double B[nk][nj], double F[nj][nl],
                double C[nj][nm], double D[nm][nl], double G[ni][nl])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++) {
      E[i][j] = 0.0;
      for (k = 0; k < nk; ++k)
        E[i][j] += A[i][k] * B[k][j];
    }
  for (i = 0; i < nj; i++)
    for (j = 0; j < nl; j++) {
      F[i][j] = 0.0;
      for (k = 0; k < nm; ++k)
        F[i][j] += C[i][k] * D[k][j];
    }
  for (i = 0; i < ni; i++)
    for (j = 0; j < nl; j++) {
      G[i][j] = 0.0;
      for (k = 0; k < nj; ++k)
        G[i][j] += E[i][k] * F[k][j];
    }
#pragma endscop
}

void run_3mm(void)
{
  int ni = 6, nj = 7, nk = 8, nl = 5, nm = 9;
  double E[6][7], A[6][8], B[8][7], F[7][5], C[7][9], D[9][5], G[6][5];
  for (int i = 0; i < ni; i++) for (int j = 0; j < nk; j++) A[i][j] = val(i, j, 1);
  for (int i = 0; i < nk; i++) for (int j = 0; j < nj; j++) B[i][j] = val(i, j, 2);
  for (int i = 0; i < nj; i++) for (int j = 0; j < nm; j++) C[i][j] = val(i, j, 3);
  for (int i = 0; i < nm; i++) for (int j = 0; j < nl; j++) D[i][j] = val(i, j, 4);
  for (int i = 0; i < ni; i++) for (int j = 0; j < nj; j++) E[i][j] = 0;
  for (int i = 0; i < nj; i++) for (int j = 0; j < nl; j++) F[i][j] = 0;
  for (int i = 0; i < ni; i++) for (int j = 0; j < nl; j++) G[i][j] = 0;
  dump_i("param", "ni", &ni, 1); dump_i("param", "nj", &nj, 1);
  dump_i("param", "nk", &nk, 1); dump_i("param", "nl", &nl, 1);
  dump_i("param", "nm", &nm, 1);
  dump_d("in", "A", &A[0][0], ni * nk); dump_d("in", "B", &B[0][0], nk * nj);
  dump_d("in", "C", &C[0][0], nj * nm); dump_d("in", "D", &D[0][0], nm * nl);
  dump_d("in", "E", &E[0][0], ni * nj); dump_d("in", "F", &F[0][0], nj * nl);
  dump_d("in", "G", &G[0][0], ni * nl);
  kernel_3mm(ni, nj, nk, nl, nm, E, A, B, F, C, D, G);
  dump_d("out", "E", &E[0][0], ni * nj); dump_d("out", "F", &F[0][0], nj * nl);
  dump_d("out", "G", &G[0][0], ni * nl);
}
