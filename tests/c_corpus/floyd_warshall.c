/* floyd-warshall: all-pairs shortest paths on int data, a ternary minimum */
#include "dump.h"

void kernel_floyd_warshall(int n, int path[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j] : path[i][k] + path[k][j];
#pragma endscop
}

void run_floyd_warshall(void)
{
  int n = 12;
  int path[12][12];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      path[i][j] = i * j % 7 + 1;
      if ((i + j) % 13 == 0 || (i + j) % 7 == 0 || (i + j) % 11 == 0) path[i][j] = 999;
    }
  dump_i("param", "n", &n, 1);
  dump_i("in", "path", &path[0][0], n * n);
  kernel_floyd_warshall(n, path);
  dump_i("out", "path", &path[0][0], n * n);
}
