/* softmax over the rows of a 1024 x 1024 matrix (max-subtracted, exp, normalise) */
#include <math.h>
#include "harness.h"
#define N 1024

static double X[N][N], Y[N][N], mx[N], sm[N];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int i = 0; i < N; i++) {
    mx[i] = X[i][0];
    for (int j = 1; j < N; j++)
      mx[i] = X[i][j] > mx[i] ? X[i][j] : mx[i];
  }
  for (int i = 0; i < N; i++) {
    sm[i] = 0.0;
    for (int j = 0; j < N; j++) {
      Y[i][j] = exp(X[i][j] - mx[i]);
      sm[i] += Y[i][j];
    }
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      Y[i][j] = Y[i][j] / sm[i];
#pragma endscop
}

static void init(void)
{
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) X[i][j] = (double)((i * 7 + j * 3) % 101) / 17.0;
}

int main(void)
{
  BENCH(init(), kernel(), &Y[0][0], (long)N * N);
  return 0;
}
