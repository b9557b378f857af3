/* A hand-tiled matrix product written the way Pluto prints it: floord/ceild/min/max
   macros in the bounds (integer floord, floating ceild), tile loops with steps */
#include <math.h>
#include "dump.h"
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define ceild(n, d) ceil(((double)(n)) / ((double)(d)))
#define max(x, y) ((x) > (y) ? (x) : (y))
#define min(x, y) ((x) < (y) ? (x) : (y))
#define T 4

void kernel_tiled_mm(int n, int m, double C[n][m], double A[n][n], double B[n][m])
{
  int t1, t2, t3, i, j, k;
#pragma scop
  for (t1 = 0; t1 <= floord(n - 1, T); t1++)
    for (t2 = max(0, ceild(-T + 1, T)); t2 < ceild(m, T); t2++)
      for (t3 = 0; t3 * T < n; t3++)
        for (i = T * t1; i <= min(n - 1, T * t1 + T - 1); i++)
          for (k = T * t3; k < min(n, T * (t3 + 1)); k += 1)
            for (j = T * t2; j <= min(m - 1, T * t2 + (T - 1)); j = j + 1)
              C[i][j] += A[i][k] * B[k][j];
  for (i = n - 1; i >= 0; i -= 2)
    C[i][0] = -C[i][0];
#pragma endscop
}

void run_tiled_mm(void)
{
  int n = 10, m = 7;
  double C[10][7], A[10][10], B[10][7];
  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) C[i][j] = val(i, j, 1);
  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) A[i][j] = val(i, j, 2);
  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) B[i][j] = val(i, j, 3);
  dump_i("param", "n", &n, 1); dump_i("param", "m", &m, 1);
  dump_d("in", "C", &C[0][0], n * m); dump_d("in", "A", &A[0][0], n * n);
  dump_d("in", "B", &B[0][0], n * m);
  kernel_tiled_mm(n, m, C, A, B);
  dump_d("out", "C", &C[0][0], n * m);
}
