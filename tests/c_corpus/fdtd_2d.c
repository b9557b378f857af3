/* fdtd-2d: electric and magnetic fields updated in turn; float, boundary row from
   a 1-D source array indexed by the time step */
#include "dump.h"
#define TMAX 3
#define NX 9
#define NY 8

void kernel_fdtd_2d(float ex[NX][NY], float ey[NX][NY], float hz[NX][NY],
                    float fict[TMAX])
{
  int t, i, j;
#pragma scop
  for (t = 0; t < TMAX; t++) {
    for (j = 0; j < NY; j++)
      ey[0][j] = fict[t];
    for (i = 1; i < NX; i++)
      for (j = 0; j < NY; j++)
        ey[i][j] = ey[i][j] - 0.5f * (hz[i][j] - hz[i - 1][j]);
    for (i = 0; i < NX; i++)
      for (j = 1; j < NY; j++)
        ex[i][j] = ex[i][j] - 0.5f * (hz[i][j] - hz[i][j - 1]);
    for (i = 0; i < NX - 1; i++)
      for (j = 0; j < NY - 1; j++)
        hz[i][j] = hz[i][j] - 0.7f * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j]);
  }
#pragma endscop
}

void run_fdtd_2d(void)
{
  float ex[NX][NY], ey[NX][NY], hz[NX][NY], fict[TMAX];
  for (int t = 0; t < TMAX; t++) fict[t] = (float)t;
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++) {
      ex[i][j] = (float)val(i, j, 1); ey[i][j] = (float)val(i, j, 2); hz[i][j] = (float)val(i, j, 3);
    }
  dump_f("in", "ex", &ex[0][0], NX * NY); dump_f("in", "ey", &ey[0][0], NX * NY);
  dump_f("in", "hz", &hz[0][0], NX * NY); dump_f("in", "fict", fict, TMAX);
  kernel_fdtd_2d(ex, ey, hz, fict);
  dump_f("out", "ex", &ex[0][0], NX * NY); dump_f("out", "ey", &ey[0][0], NX * NY);
  dump_f("out", "hz", &hz[0][0], NX * NY);
}
