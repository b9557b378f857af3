"""Stand-in system headers for parsing C with pycparser.

glibc's headers use compiler extensions pycparser does not parse, so the frontend
preprocesses against these instead (pycparser's documentation advises the same). They
declare the types and constants that numerical kernels use; prototypes are not needed
because the frontend knows the math functions by name. The source-to-source output is
spliced into the user's original file, which keeps its real headers.
"""

from __future__ import annotations

_TYPES = """\
#ifndef POLYC_FAKE_TYPES
#define POLYC_FAKE_TYPES
typedef unsigned long size_t;
typedef long ssize_t;
typedef long ptrdiff_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef long intmax_t;
typedef unsigned long uintmax_t;
typedef int wchar_t;
typedef struct __polyc_FILE FILE;
typedef long time_t;
typedef long clock_t;
typedef struct __polyc_va_list *va_list;
struct timeval { long tv_sec; long tv_usec; };
struct timespec { long tv_sec; long tv_nsec; };
#define NULL ((void *)0)
#endif
"""

_STDINT = """\
#include "_polyc_types.h"
#define INT8_MIN (-128)
#define INT8_MAX 127
#define INT16_MIN (-32768)
#define INT16_MAX 32767
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define INT64_MIN (-9223372036854775807L - 1)
#define INT64_MAX 9223372036854775807L
#define UINT8_MAX 255
#define INT64_C(x) x ## L
#define INT32_C(x) x
"""

_LIMITS = """\
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define CHAR_MIN (-128)
#define CHAR_MAX 127
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define LLONG_MIN (-9223372036854775807L - 1)
#define LLONG_MAX 9223372036854775807L
"""

_FLOAT = """\
#define FLT_MAX 3.40282346638528859811704183484516925e+38F
#define FLT_MIN 1.17549435082228750796873653722224568e-38F
#define FLT_EPSILON 1.19209289550781250000000000000000000e-7F
#define DBL_MAX 1.79769313486231570814527423731704357e+308
#define DBL_MIN 2.22507385850720138309023271733240406e-308
#define DBL_EPSILON 2.22044604925031308084726333618164062e-16
"""

_MATH = """\
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#define INFINITY 1e500f
#define HUGE_VAL 1e500
#define HUGE_VALF 1e500f
#define NAN (0.0f / 0.0f)
"""

_STDIO = """\
#include "_polyc_types.h"
extern FILE *stdin;
extern FILE *stdout;
extern FILE *stderr;
#define EOF (-1)
"""

_STDLIB = """\
#include "_polyc_types.h"
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#define RAND_MAX 2147483647
"""

_STDBOOL = """\
#define bool _Bool
#define true 1
#define false 0
"""

HEADERS = {
    "_polyc_types.h": _TYPES,
    "stddef.h": '#include "_polyc_types.h"\n#define offsetof(t, m) ((size_t)0)\n',
    "stdint.h": _STDINT,
    "inttypes.h": '#include "stdint.h"\n',
    "limits.h": _LIMITS,
    "float.h": _FLOAT,
    "math.h": _MATH,
    "stdio.h": _STDIO,
    "stdlib.h": _STDLIB,
    "string.h": '#include "_polyc_types.h"\n',
    "stdbool.h": _STDBOOL,
    "assert.h": "#define assert(x) ((void)0)\n",
    "time.h": '#include "_polyc_types.h"\n#define CLOCKS_PER_SEC 1000000L\n',
    "sys/time.h": '#include "_polyc_types.h"\n',
    "stdarg.h": '#include "_polyc_types.h"\n',
}
