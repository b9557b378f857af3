/* Test harness helpers for the C corpus: deterministic data and exact dumps.
 * Every value is printed in C99 hex-float form, so comparisons are bit for bit. */
#ifndef CORPUS_DUMP_H
#define CORPUS_DUMP_H
#include <stdio.h>

static void dump_d(const char *tag, const char *name, const double *p, long n) {
  printf("%s %s d %ld", tag, name, n);
  for (long i = 0; i < n; i++) printf(" %a", p[i]);
  printf("\n");
}

static void dump_f(const char *tag, const char *name, const float *p, long n) {
  printf("%s %s f %ld", tag, name, n);
  for (long i = 0; i < n; i++) printf(" %a", (double)p[i]);
  printf("\n");
}

static void dump_i(const char *tag, const char *name, const int *p, long n) {
  printf("%s %s i %ld", tag, name, n);
  for (long i = 0; i < n; i++) printf(" %d", p[i]);
  printf("\n");
}

static void dump_c(const char *tag, const char *name, const char *p, long n) {
  printf("%s %s c %ld", tag, name, n);
  for (long i = 0; i < n; i++) printf(" %d", (int)p[i]);
  printf("\n");
}

/* a value in [0, 1) that depends on (i, j, salt) only */
static double val(long i, long j, long salt) {
  return (double)((i * 37 + j * 11 + salt * 7 + 3) % 97) / 97.0;
}
#endif
