/* rt_internal.h: what the runtime's translation units share and nothing else sees.
 *
 * The runtime is four ordinary C files (rt_core.c: context, buffers, hazards,
 * scalar core, trace; rt_timeline.c: the deferred timing of the engines; rt_dma.c:
 * DMA; rt_compute.c: MAC array and vector unit), each compiled on its own and
 * linked into one shared library. The functions
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

/* Per-engine operation ids (hazards, waits) start as "none". */
static inline void pc__no_ops(int64_t *ids) {
  for (int e = 0; e < PC_MAX_ENGINES; e++) ids[e] = -1;
}

/* rt_core.c ------------------------------------------------------------------- */

/* Record the first error; leave the running kernel when armed. Returns -1. */
PC_INTERNAL int pc__fail(pc_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append one event to the bounded trace (counted as dropped beyond its limit);
 * returns its index, -1 when dropped. */
PC_INTERNAL int64_t pc__trace(pc_ctx *ctx, int engine, int kind, int64_t start,
                           int64_t end, int64_t amount, int src, int dst,
                           const char *label);

/* The timing of a MAC-array operation (rt_compute.c): `busy` cycles on the array
 * from its start on an idle array, of which the first `head` (the first fold's
 * load) may overlap the op before once that op's last fold began streaming; its
 * first fold starts >= `spacing` after that last fold; its own last fold streams
 * `last` cycles; its results are ready `tail` after it frees the array. The
 * ranges from index `pipelined` on (the accumulators) need no wait for earlier
 * operations of the array itself: its pipeline keeps them in order. */
typedef struct {
  int64_t busy, head, tail, spacing, last;
  int pipelined;
  /* bytes the array moves at each range of the call (its banks' demand over
   * `busy`, rt_timeline.c); NULL: none */
  const double *bytes;
} pc_mac_timing;

/* Issue a MAC-array operation timed by `t` (see pc_mac_timing). */
PC_INTERNAL void pc__submit_mac(pc_ctx *ctx, const pc_range *acc, int nacc,
                                const pc_mac_timing *t, int64_t amount,
                                const char *label);

/* Issue an operation of fixed duration on `engine` touching `acc`: the engine is
 * busy `busy` cycles from its start, its results are ready `tail` cycles after
 * that (and never before those of the engine's earlier operations). Its timing is
 * resolved later; the trace event (`kind`, `amount`, `label`) and the engine's
 * busy time are written then. `bytes[i]` (or NULL) are the bytes it moves at range
 * i: its SRAM banks' demand, which may stretch it (rt_timeline.c). */
PC_INTERNAL void pc__submit(pc_ctx *ctx, int engine, const pc_range *acc, int nacc,
                            int64_t busy, int64_t tail, int kind, int64_t amount,
                            const double *bytes, const char *label);

/* Issue a DMA transfer on channel engine `engine`: `setup` cycles, then `bytes`
 * at no more than `cap` bytes per cycle (sharing DRAM's bandwidth with the other
 * transfers in flight when `dirs` says it reads (bit 0) or writes (bit 1) DRAM),
 * then `latency`. */
PC_INTERNAL void pc__submit_dma(pc_ctx *ctx, int engine, const pc_range *acc,
                                int nacc, int64_t setup, double bytes, double cap,
                                int dirs, int64_t latency, int src, int dst,
                                const char *label);

/* The DMA channel for a transfer that names none (`dirs`: bit 0 it reads DRAM,
 * bit 1 it writes DRAM): among the channels open to its direction, the one
 * estimated to free first when the scalar core issues, lowest index on a tie
 * (rt_timeline.c). */
PC_INTERNAL int pc__pick_channel(pc_ctx *ctx, int dirs);

/* Whether operation `id` has finished (its results are ready by now). */
PC_INTERNAL int pc__done(pc_ctx *ctx, int64_t id);

/* Resolve the timeline up to the scalar core's time (nothing issued later can
 * change it). */
PC_INTERNAL void pc__advance(pc_ctx *ctx);

/* Resolve until the operations `ids` (one per engine, -1: none) have finished;
 * returns the latest of their ends that lies beyond the resolved time before. */
PC_INTERNAL int64_t pc__wait_ops(pc_ctx *ctx, const int64_t *ids);

/* The end of the operations `ids` as the operations issued so far determine it,
 * leaving the timeline as it was (a later transfer may still move it). */
PC_INTERNAL int64_t pc__forecast(pc_ctx *ctx, const int64_t *ids);

/* Resolve everything issued; returns the end of the last operation. */
PC_INTERNAL int64_t pc__drain(pc_ctx *ctx);

/* Set up and release the timeline of a context. */
PC_INTERNAL int pc__timeline_init(pc_ctx *ctx);
PC_INTERNAL void pc__timeline_free(pc_ctx *ctx);

/* The operations (per engine, the latest; -1: none) that still use bytes of
 * range `r` of buffer `b` (its arcs where periodic): its writers, and its
 * readers too when `all`. */
PC_INTERNAL void pc__users(pc_ctx *ctx, const pc_buf *b, const pc_range *r, int all,
                           int64_t *ids);

/* The operations (per engine, the latest; -1: none) that still read bytes of
 * range `r` of buffer `b`. */
PC_INTERNAL void pc__readers(pc_ctx *ctx, const pc_buf *b, const pc_range *r,
                             int64_t *ids);

/* Remember that operation `id` on `engine` touches the ranges `acc` (for the
 * hazards of later operations). */
PC_INTERNAL void pc__record(pc_ctx *ctx, const pc_range *acc, int nacc, int64_t id,
                            int engine);

/* pc__complete for an engine that frees `tail` cycles before its results are
 * ready: the first `nfront` ranges of `acc` (the operands it has read) retire at
 * `end`, the others (what it writes) at `end + tail`, and so does the run. */
PC_INTERNAL void pc__complete_tail(pc_ctx *ctx, int engine, int64_t start,
                                   int64_t end, int64_t tail, const pc_range *acc,
                                   int nacc, int nfront);

/* When the ranges `acc` may be used (their hazards alone: no engine, no issue). */
PC_INTERNAL int64_t pc__ready(pc_ctx *ctx, const pc_range *acc, int nacc);

/* The bytes range `r` touches: its hull's, or where periodic those of its arcs. */
PC_INTERNAL int64_t pc__range_bytes(const pc_range *r);

/* A range inside its (live) buffer, else an error naming the buffer, range and op;
 * returns 0 or -1. */
PC_INTERNAL int pc__check_range(pc_ctx *ctx, const pc_range *r, const char *op,
                                const char *label);

/* rt_dma.c -------------------------------------------------------------------- */

/* The bytes an n-D strided block of `elem`-byte elements touches, into `r`'s
 * lo, hi and arcs: periodic along its outermost dimension where the rest of the
 * block fits in one of its strides (a tile of rows of every channel). */
PC_INTERNAL void pc__block_range(int n, const int64_t *size, const int64_t *stride,
                                 int64_t off, int elem, pc_range *r);

#endif /* POLYC_RT_INTERNAL_H */
