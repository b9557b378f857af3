/* bicg: s = A^T r and q = A p in one nest */
#include "dump.h"

void kernel_bicg(int m, int n, double A[n][m], double s[m], double q[n],
                 double p[m], double r[n])
{
  int i, j;
#pragma scop
  for (i = 0; i < m; i++)
    s[i] = 0;
  for (i = 0; i < n; i++) {
    q[i] = 0.0;
    for (j = 0; j < m; j++) {
      s[j] = s[j] + r[i] * A[i][j];
      q[i] = q[i] + A[i][j] * p[j];
    }
  }
#pragma endscop
}

void run_bicg(void)
{
  int m = 9, n = 11;
  double A[11][9], s[9], q[11], p[9], r[11];
  for (int i = 0; i < n; i++) { r[i] = val(i, 0, 1); q[i] = 0; for (int j = 0; j < m; j++) A[i][j] = val(i, j, 2); }
  for (int j = 0; j < m; j++) { p[j] = val(j, 0, 3); s[j] = 0; }
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "A", &A[0][0], n * m); dump_d("in", "s", s, m); dump_d("in", "q", q, n);
  dump_d("in", "p", p, m); dump_d("in", "r", r, n);
  kernel_bicg(m, n, A, s, q, p, r);
  dump_d("out", "s", s, m); dump_d("out", "q", q, n);
}
