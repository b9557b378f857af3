/* lu: in-place LU decomposition without pivoting; macro size and a global array */
#include "dump.h"
#define N 10

double A[N][N];

void kernel_lu(void)
{
  int i, j, k;
#pragma scop
  for (i = 0; i < N; i++) {
    for (j = 0; j < i; j++) {
      for (k = 0; k < j; k++)
        A[i][j] -= A[i][k] * A[k][j];
      A[i][j] /= A[j][j];
    }
    for (j = i; j < N; j++)
      for (k = 0; k < i; k++)
        A[i][j] -= A[i][k] * A[k][j];
  }
#pragma endscop
}

void run_lu(void)
{
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      A[i][j] = (i == j ? N + 1.0 : 0.0) + val(i, j, 1);
  dump_d("in", "A", &A[0][0], N * N);
  kernel_lu();
  dump_d("out", "A", &A[0][0], N * N);
}
