/* rt_internal.h: what the runtime's translation units share and nothing else sees.
 *
 * The runtime is three ordinary C files (rt_core.c: context, buffers, hazards,
 * engines, scalar core, trace; rt_dma.c: DMA; rt_compute.c: MAC array and vector
 * unit), each compiled on its own and linked into one shared library. The functions
 * below are defined in one file and called from another; their `pc__` prefix marks
 * them internal, and hidden visibility keeps them out of the library's exports, so
 * generated kernels and Python see only the API of polyc_rt.h.
 */
#ifndef POLYC_RT_INTERNAL_H
#define POLYC_RT_INTERNAL_H

#include "polyc_rt.h"

#define PC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define PC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PC_INTERNAL __attribute__((visibility("hidden")))

/* the engine table holds the scalar core, the MAC array, the vector unit, then one
 * engine per DMA channel */
_Static_assert(PC_MAX_ENGINES == PC_ENG_DMA + PC_MAX_CHANNELS,
               "PC_MAX_ENGINES must cover every DMA channel");

/* rt_core.c ------------------------------------------------------------------- */

/* Record the first error; leave the running kernel when armed. Returns -1. */
PC_INTERNAL int pc__fail(pc_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append one event to the bounded trace (counted as dropped beyond its limit). */
PC_INTERNAL void pc__trace(pc_ctx *ctx, int engine, int kind, int64_t start,
                           int64_t end, int64_t amount, int src, int dst,
                           const char *label);

/* Issue an asynchronous operation on `engine` touching `acc`; returns its start. */
PC_INTERNAL int64_t pc__issue(pc_ctx *ctx, int engine, const pc_range *acc,
                              int nacc);

/* Retire an operation issued by pc__issue: the engine is busy until `end`, and the
 * ranges it touched are remembered for later hazards. */
PC_INTERNAL void pc__complete(pc_ctx *ctx, int engine, int64_t start, int64_t end,
                              const pc_range *acc, int nacc);

/* A range inside its (live) buffer, else an error naming the buffer, range and op;
 * returns 0 or -1. */
PC_INTERNAL int pc__check_range(pc_ctx *ctx, const pc_range *r, const char *op,
                                const char *label);

/* rt_dma.c -------------------------------------------------------------------- */

/* The byte range [lo, hi) an n-D strided block of `elem`-byte elements touches. */
PC_INTERNAL void pc__block_range(int n, const int64_t *size, const int64_t *stride,
                                 int64_t off, int elem, int64_t *lo, int64_t *hi);

#endif /* POLYC_RT_INTERNAL_H */
