/* Timing harness for the C-source benchmarks: best of REPEAT runs of the kernel,
   then a checksum of its outputs (so every build's result can be compared). */
#ifndef POLYC_BENCH_HARNESS_H
#define POLYC_BENCH_HARNESS_H
#include <stdio.h>
#include <time.h>

/* the kernel is compiled on its own, not inlined into the timing loop (clang-19's
   Polly miscompiles the inlined matmul, and every build is then measured alike) */
#define NOINLINE __attribute__((noinline))

#ifndef REPEAT
#define REPEAT 3
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double checksum(const double *p, long n) {
  double s = 0.0;
  for (long i = 0; i < n; i++) s += p[i] * (double)(1 + i % 7);
  return s;
}

#define BENCH(init, call, out, count)                                   \
  do {                                                                  \
    double best = 1e30, sum = 0.0;                                      \
    for (int r = 0; r < REPEAT; r++) {                                  \
      init;                                                             \
      double t0 = now();                                                \
      call;                                                             \
      double t = now() - t0;                                            \
      if (t < best) best = t;                                           \
      sum = checksum(out, count);                                       \
    }                                                                   \
    printf("time %.6f\nchecksum %.17g\n", best, sum);                   \
  } while (0)
#endif
