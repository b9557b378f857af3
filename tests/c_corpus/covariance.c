/* covariance: column means, centring, then the symmetric covariance matrix */
#include "dump.h"

void kernel_covariance(int m, int n, double float_n, double data[n][m],
                       double cov[m][m], double mean[m])
{
  int i, j, k;
#pragma scop
  for (j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      data[i][j] -= mean[j];
  for (i = 0; i < m; i++)
    for (j = i; j < m; j++) {
      cov[i][j] = 0.0;
      for (k = 0; k < n; k++)
        cov[i][j] += data[k][i] * data[k][j];
      cov[i][j] /= (float_n - 1.0);
      cov[j][i] = cov[i][j];
    }
#pragma endscop
}

void run_covariance(void)
{
  int m = 8, n = 10;
  double float_n = (double)n;
  double data[10][8], cov[8][8], mean[8];
  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) data[i][j] = val(i, j, 1);
  for (int i = 0; i < m; i++) { mean[i] = 0; for (int j = 0; j < m; j++) cov[i][j] = 0; }
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "float_n", &float_n, 1);
  dump_d("in", "data", &data[0][0], n * m); dump_d("in", "cov", &cov[0][0], m * m);
  dump_d("in", "mean", mean, m);
  kernel_covariance(m, n, float_n, data, cov, mean);
  dump_d("out", "data", &data[0][0], n * m); dump_d("out", "cov", &cov[0][0], m * m);
  dump_d("out", "mean", mean, m);
}
