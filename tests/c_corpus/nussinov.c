/* nussinov: RNA folding by dynamic programming; downward outer loop, affine ifs,
   max and match written as macros over data, char input */
#include "dump.h"
#define match(b1, b2) (((b1) + (b2)) == 3 ? 1 : 0)
#define max_score(s1, s2) ((s1 >= s2) ? s1 : s2)

void kernel_nussinov(int n, char seq[n], int table[n][n])
{
  int i, j, k;
#pragma scop
  for (i = n - 1; i >= 0; i--) {
    for (j = i + 1; j < n; j++) {
      if (j - 1 >= 0)
        table[i][j] = max_score(table[i][j], table[i][j - 1]);
      if (i + 1 < n)
        table[i][j] = max_score(table[i][j], table[i + 1][j]);
      if (j - 1 >= 0 && i + 1 < n) {
        if (i < j - 1)
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]));
        else
          table[i][j] = max_score(table[i][j], table[i + 1][j - 1]);
      }
      for (k = i + 1; k < j; k++)
        table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j]);
    }
  }
#pragma endscop
}

void run_nussinov(void)
{
  int n = 14;
  char seq[14];
  int table[14][14];
  for (int i = 0; i < n; i++) {
    seq[i] = (char)((i * 7 + 1) % 4);
    for (int j = 0; j < n; j++) table[i][j] = 0;
  }
  dump_i("param", "n", &n, 1);
  dump_c("in", "seq", seq, n); dump_i("in", "table", &table[0][0], n * n);
  kernel_nussinov(n, seq, table);
  dump_i("out", "table", &table[0][0], n * n);
}
