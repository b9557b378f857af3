/* durbin: Levinson-Durbin recursion; scalars alpha, beta (carried across k) and
   sum (private to each k) */
#include "dump.h"

void kernel_durbin(int n, double r[n], double y[n])
{
  double z[n];
  double alpha, beta, sum;
  int i, k;
#pragma scop
  y[0] = -r[0];
  beta = 1.0;
  alpha = -r[0];
  for (k = 1; k < n; k++) {
    beta = (1 - alpha * alpha) * beta;
    sum = 0.0;
    for (i = 0; i < k; i++)
      sum += r[k - i - 1] * y[i];
    alpha = -(r[k] + sum) / beta;
    for (i = 0; i < k; i++)
      z[i] = y[i] + alpha * y[k - i - 1];
    for (i = 0; i < k; i++)
      y[i] = z[i];
    y[k] = alpha;
  }
#pragma endscop
}

void run_durbin(void)
{
  int n = 12;
  double r[12], y[12];
  for (int i = 0; i < n; i++) { r[i] = 0.1 * val(i, 0, 1) + 0.01 * i; y[i] = 0; }
  dump_i("param", "n", &n, 1);
  dump_d("in", "r", r, n); dump_d("in", "y", y, n);
  kernel_durbin(n, r, y);
  dump_d("out", "y", y, n);
}
