/* conv2d 3x3, 64 -> 64 channels, 56 x 56 output (valid convolution on 58 x 58) */
#include "harness.h"
#define CI 64
#define CO 64
#define H 56
#define W 56

static float in[CI][H + 2][W + 2], wt[CO][CI][3][3], out[CO][H][W];
static double out_d[CO * H * W];

static NOINLINE void kernel(void)
{
#pragma scop
  for (int o = 0; o < CO; o++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        out[o][y][x] = 0.0f;
        for (int c = 0; c < CI; c++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
              out[o][y][x] += in[c][y + ky][x + kx] * wt[o][c][ky][kx];
      }
#pragma endscop
}

static void init(void)
{
  for (int c = 0; c < CI; c++)
    for (int y = 0; y < H + 2; y++)
      for (int x = 0; x < W + 2; x++) in[c][y][x] = (float)((c + 3 * y + 7 * x) % 13) / 13.0f;
  for (int o = 0; o < CO; o++)
    for (int c = 0; c < CI; c++)
      for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) wt[o][c][ky][kx] = (float)((o + c + ky * 3 + kx) % 5) / 5.0f - 0.4f;
}

static double *widen(void)
{
  long n = 0;
  for (int o = 0; o < CO; o++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) out_d[n++] = out[o][y][x];
  return out_d;
}

int main(void)
{
  BENCH(init(), kernel(), widen(), (long)CO * H * W);
  return 0;
}
