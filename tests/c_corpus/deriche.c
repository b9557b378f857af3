/* deriche: edge detection filter, as PolyBench writes it (with DATA_TYPE double: in
   float the recursive sweeps amplify numpy's and libm's last-ulp differences in expf
   past the float tolerance): coefficients computed in the region (exp, pow,
   chained assignments), then causal and anti-causal recursive sweeps along rows and
   columns carried by scalars (47 statements) */
#include <math.h>
#include "dump.h"

void kernel_deriche(int w, int h, double alpha, double imgIn[w][h], double imgOut[w][h],
                    double y1[w][h], double y2[w][h])
{
  int i, j;
  double xm1, tm1, ym1, ym2;
  double xp1, xp2;
  double tp1, tp2;
  double yp1, yp2;
  double k;
  double a1, a2, a3, a4, a5, a6, a7, a8;
  double b1, b2, c1, c2;
#pragma scop
  k = (1.0 - exp(-alpha)) * (1.0 - exp(-alpha))
      / (1.0 + 2.0 * alpha * exp(-alpha) - exp(2.0 * alpha));
  a1 = a5 = k;
  a2 = a6 = k * exp(-alpha) * (alpha - 1.0);
  a3 = a7 = k * exp(-alpha) * (alpha + 1.0);
  a4 = a8 = -k * exp(-2.0 * alpha);
  b1 = pow(2.0, -alpha);
  b2 = -exp(-2.0 * alpha);
  c1 = c2 = 1;

  for (i = 0; i < w; i++) {
    ym1 = 0.0;
    ym2 = 0.0;
    xm1 = 0.0;
    for (j = 0; j < h; j++) {
      y1[i][j] = a1 * imgIn[i][j] + a2 * xm1 + b1 * ym1 + b2 * ym2;
      xm1 = imgIn[i][j];
      ym2 = ym1;
      ym1 = y1[i][j];
    }
  }

  for (i = 0; i < w; i++) {
    yp1 = 0.0;
    yp2 = 0.0;
    xp1 = 0.0;
    xp2 = 0.0;
    for (j = h - 1; j >= 0; j--) {
      y2[i][j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2;
      xp2 = xp1;
      xp1 = imgIn[i][j];
      yp2 = yp1;
      yp1 = y2[i][j];
    }
  }

  for (i = 0; i < w; i++)
    for (j = 0; j < h; j++) {
      imgOut[i][j] = c1 * (y1[i][j] + y2[i][j]);
    }

  for (j = 0; j < h; j++) {
    tm1 = 0.0;
    ym1 = 0.0;
    ym2 = 0.0;
    for (i = 0; i < w; i++) {
      y1[i][j] = a5 * imgOut[i][j] + a6 * tm1 + b1 * ym1 + b2 * ym2;
      tm1 = imgOut[i][j];
      ym2 = ym1;
      ym1 = y1[i][j];
    }
  }

  for (j = 0; j < h; j++) {
    tp1 = 0.0;
    tp2 = 0.0;
    yp1 = 0.0;
    yp2 = 0.0;
    for (i = w - 1; i >= 0; i--) {
      y2[i][j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2;
      tp2 = tp1;
      tp1 = imgOut[i][j];
      yp2 = yp1;
      yp1 = y2[i][j];
    }
  }

  for (i = 0; i < w; i++)
    for (j = 0; j < h; j++)
      imgOut[i][j] = c2 * (y1[i][j] + y2[i][j]);
#pragma endscop
}

void run_deriche(void)
{
  int w = 9, h = 7;
  double alpha = 0.25;
  double imgIn[9][7], imgOut[9][7], y1[9][7], y2[9][7];
  for (int i = 0; i < w; i++)
    for (int j = 0; j < h; j++) {
      imgIn[i][j] = val(i, j, 1);
      imgOut[i][j] = 0; y1[i][j] = 0; y2[i][j] = 0;
    }
  dump_i("param", "w", &w, 1); dump_i("param", "h", &h, 1);
  dump_d("in", "alpha", &alpha, 1);
  dump_d("in", "imgIn", &imgIn[0][0], w * h); dump_d("in", "imgOut", &imgOut[0][0], w * h);
  dump_d("in", "y1", &y1[0][0], w * h); dump_d("in", "y2", &y2[0][0], w * h);
  kernel_deriche(w, h, alpha, imgIn, imgOut, y1, y2);
  dump_d("out", "imgOut", &imgOut[0][0], w * h);
  dump_d("out", "y1", &y1[0][0], w * h); dump_d("out", "y2", &y2[0][0], w * h);
}
