/* correlation: means, standard deviations (sqrt, a ternary guard), normalisation,
   correlation matrix; a local declaration inside the region */
#include <math.h>
#include "dump.h"

void kernel_correlation(int m, int n, double float_n, double eps, double data[n][m],
                        double corr[m][m], double mean[m], double stddev[m])
{

#pragma scop
  for (int j = 0; j < m; j++) {
    mean[j] = 0.0;
    for (int i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
  }
  for (int j = 0; j < m; j++) {
    stddev[j] = 0.0;
    for (int i = 0; i < n; i++)
      stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j]);
    stddev[j] /= float_n;
    stddev[j] = sqrt(stddev[j]);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double centred = data[i][j] - mean[j];
      data[i][j] = centred / (sqrt(float_n) * stddev[j]);
    }
  for (int i = 0; i < m - 1; i++) {
    corr[i][i] = 1.0;
    for (int j = i + 1; j < m; j++) {
      corr[i][j] = 0.0;
      for (int k = 0; k < n; k++)
        corr[i][j] += (data[k][i] * data[k][j]);
      corr[j][i] = corr[i][j];
    }
  }
  corr[m - 1][m - 1] = 1.0;
#pragma endscop
}

void run_correlation(void)
{
  int m = 8, n = 10;
  double float_n = (double)n, eps = 0.1;
  double data[10][8], corr[8][8], mean[8], stddev[8];
  for (int i = 0; i < n; i++) for (int j = 0; j < m; j++) data[i][j] = val(i, j, 1) * (j % 3);
  for (int i = 0; i < m; i++) { mean[i] = 0; stddev[i] = 0; for (int j = 0; j < m; j++) corr[i][j] = 0; }
  dump_i("param", "m", &m, 1); dump_i("param", "n", &n, 1);
  dump_d("in", "float_n", &float_n, 1); dump_d("in", "eps", &eps, 1);
  dump_d("in", "data", &data[0][0], n * m); dump_d("in", "corr", &corr[0][0], m * m);
  dump_d("in", "mean", mean, m); dump_d("in", "stddev", stddev, m);
  kernel_correlation(m, n, float_n, eps, data, corr, mean, stddev);
  dump_d("out", "data", &data[0][0], n * m); dump_d("out", "corr", &corr[0][0], m * m);
  dump_d("out", "mean", mean, m); dump_d("out", "stddev", stddev, m);
}
