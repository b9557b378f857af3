/* rt_dma.c: DMA of multi-dimensional strided blocks between memory levels.
 *
 * Cost of one transfer: descriptors x setup + data time + latency of the slower
 * level. The data time comes from the DRAM bandwidth calendar when either end is
 * DRAM: channels that run at once share the DRAM's bytes per cycle, first come first
 * served (an earlier-issued transfer keeps the rate it was promised; a later one gets
 * what is left, so completion times never change once computed). A transfer's own
 * rate is capped by the channel's and each SRAM level's bytes per cycle.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "polyc_rt.h"
#include "rt_internal.h"

static void pc_cal_grow(pc_ctx *ctx) {
  if (ctx->ncal + 2 <= ctx->capcal) return;
  int cap = 2 * ctx->capcal;
  pc_seg *c = realloc(ctx->cal, (size_t)cap * sizeof *c);
  if (!c) {
    pc__fail(ctx, "pc_dma: out of host memory for the DRAM calendar.");
    return;
  }
  ctx->cal = c;
  ctx->capcal = cap;
}

/* Split the calendar at time t (a new breakpoint with the same `used`); returns the
 * index of the segment starting at t. */
static int pc_cal_split(pc_ctx *ctx, int64_t t) {
  int i = 0;
  while (i + 1 < ctx->ncal && ctx->cal[i + 1].t <= t) i++;
  if (ctx->cal[i].t == t) return i;
  pc_cal_grow(ctx);
  memmove(&ctx->cal[i + 2], &ctx->cal[i + 1],
          (size_t)(ctx->ncal - i - 1) * sizeof *ctx->cal);
  ctx->cal[i + 1] = (pc_seg){t, ctx->cal[i].used};
  ctx->ncal++;
  return i + 1;
}

/* Forget segments that end before `t`: no transfer can start earlier any more. */
static void pc_cal_prune(pc_ctx *ctx, int64_t t) {
  int k = 0;
  while (k + 1 < ctx->ncal && ctx->cal[k + 1].t <= t) k++;
  if (k) {
    memmove(ctx->cal, &ctx->cal[k], (size_t)(ctx->ncal - k) * sizeof *ctx->cal);
    ctx->ncal -= k;
  }
}

/* Move `bytes` through DRAM from `start` at no more than `cap` bytes per cycle;
 * returns the cycle the last byte has moved. */
static int64_t pc_cal_transfer(pc_ctx *ctx, int64_t start, double bytes, double cap) {
  const double dram = ctx->spec.level[0].bytes_per_cycle, eps = 1e-9;
  if (bytes <= 0) return start;
  int i = pc_cal_split(ctx, start);
  int64_t t = start;
  double left = bytes;
  for (;;) {
    double rate = PC_MIN(cap, dram - ctx->cal[i].used);
    int last = i + 1 == ctx->ncal;
    int64_t seg_end = last ? INT64_MAX : ctx->cal[i + 1].t;
    if (rate > eps) {
      int64_t need = (int64_t)ceil(left / rate - eps);
      if (need < 1) need = 1;
      if (last || t + need <= seg_end) {
        int64_t end = t + need;
        if (!last && end < seg_end) pc_cal_split(ctx, end);
        if (last) {
          pc_cal_grow(ctx);
          ctx->cal[ctx->ncal++] = (pc_seg){end, ctx->cal[i].used};
        }
        ctx->cal[i].used += rate;
        return end;
      }
      left -= rate * (double)(seg_end - t);
      ctx->cal[i].used += rate;
    }
    t = seg_end;
    i++;
  }
}

/* Merge dimensions that are contiguous in both source and destination, and drop
 * dimensions of size one: [4][8] rows of a row-major [4][8] block are one run of 32.
 * Returns the new number of dimensions. */
static int pc_coalesce(int n, int64_t *size, int64_t *ds, int64_t *ss) {
  int k = 0;
  for (int d = 0; d < n; d++) {
    if (size[d] == 1) continue;
    size[k] = size[d];
    ds[k] = ds[d];
    ss[k] = ss[d];
    k++;
  }
  int out = 0;
  for (int d = 0; d < k; d++) {
    if (out && ds[out - 1] == size[d] * ds[d] && ss[out - 1] == size[d] * ss[d]) {
      size[out - 1] *= size[d];
      ds[out - 1] = ds[d];
      ss[out - 1] = ss[d];
    } else {
      size[out] = size[d];
      ds[out] = ds[d];
      ss[out] = ss[d];
      out++;
    }
  }
  return out;
}

void pc__block_range(int n, const int64_t *size, const int64_t *stride, int64_t off,
                     int elem, int64_t *lo, int64_t *hi) {
  int64_t a = off, b = off;
  for (int d = 0; d < n; d++) {
    int64_t span = (size[d] - 1) * stride[d];
    if (span < 0) a += span;
    else b += span;
  }
  *lo = a * elem;
  *hi = (b + 1) * elem;
}

static void pc_copy_block(int n, const int64_t *size, unsigned char *dst,
                          const int64_t *ds, const unsigned char *src,
                          const int64_t *ss, int elem) {
  if (n == 0) {
    memcpy(dst, src, (size_t)elem);
    return;
  }
  if (n == 1) {
    if (ds[0] == 1 && ss[0] == 1) {
      memmove(dst, src, (size_t)(size[0] * elem));
      return;
    }
    for (int64_t i = 0; i < size[0]; i++)
      memcpy(dst + i * ds[0] * elem, src + i * ss[0] * elem, (size_t)elem);
    return;
  }
  for (int64_t i = 0; i < size[0]; i++)
    pc_copy_block(n - 1, size + 1, dst + i * ds[0] * elem, ds + 1,
                  src + i * ss[0] * elem, ss + 1, elem);
}

void pc_dma(pc_ctx *ctx, int channel, int elem, int ndims, const int64_t *sizes,
            int dst, int64_t dst_off, const int64_t *dst_strides, int src,
            int64_t src_off, const int64_t *src_strides, const char *label) {
  if (ctx->failed) return;
  const pc_spec *sp = &ctx->spec;
  if (ndims < 0 || ndims > PC_MAX_DIMS || (elem != 1 && elem != 2 && elem != 4 &&
                                           elem != 8))
    return (void)pc__fail(ctx, "pc_dma %s: a block of %d dimensions of %d-byte "
                              "elements is not supported because the runtime moves "
                              "1, 2, 4 or 8-byte elements in up to %d dimensions. "
                              "Split the transfer.", label ? label : "", ndims,
                         elem, PC_MAX_DIMS);
  if (channel < -1 || channel >= sp->channels)
    return (void)pc__fail(ctx, "pc_dma %s: channel %d does not exist because the "
                              "config has %d DMA channels. Use 0..%d, or -1 for "
                              "the first free one.", label ? label : "", channel,
                         sp->channels, sp->channels - 1);
  int64_t size[PC_MAX_DIMS], ds[PC_MAX_DIMS], ss[PC_MAX_DIMS], count = 1;
  for (int d = 0; d < ndims; d++) {
    if (sizes[d] <= 0) return; /* an empty block moves nothing */
    size[d] = sizes[d];
    ds[d] = dst_strides[d];
    ss[d] = src_strides[d];
    count *= sizes[d];
  }
  pc_range acc[2] = {{src, 0, 0, 0}, {dst, 1, 0, 0}};
  pc__block_range(ndims, size, ss, src_off, elem, &acc[0].lo, &acc[0].hi);
  pc__block_range(ndims, size, ds, dst_off, elem, &acc[1].lo, &acc[1].hi);
  if (pc__check_range(ctx, &acc[0], "pc_dma", label) ||
      pc__check_range(ctx, &acc[1], "pc_dma", label))
    return;
  pc_buf *S = &ctx->bufs[src], *D = &ctx->bufs[dst];
  /* functional copy first: timing never changes values */
  int n = pc_coalesce(ndims, size, ds, ss);
  pc_copy_block(n, size, D->base + dst_off * elem, ds, S->base + src_off * elem,
                ss, elem);

  int64_t descriptors = 1; /* dimensions beyond the descriptor's need more of them */
  for (int d = 0; d + sp->dma_dims < n; d++) descriptors *= size[d];
  if (channel < 0) { /* the channel that frees first; lowest index on a tie */
    channel = 0;
    for (int c = 1; c < sp->channels; c++)
      if (ctx->free_at[PC_ENG_DMA + c] < ctx->free_at[PC_ENG_DMA + channel])
        channel = c;
  }
  int engine = PC_ENG_DMA + channel;
  int64_t start = pc__issue(ctx, engine, acc, 2);
  const pc_level *LS = &sp->level[S->level], *LD = &sp->level[D->level];
  double bytes = (double)(count * elem);
  double cap = sp->dma_bytes_per_cycle;
  if (!LS->is_dram) cap = PC_MIN(cap, LS->bytes_per_cycle);
  if (!LD->is_dram) cap = PC_MIN(cap, LD->bytes_per_cycle);
  int64_t data_start = start + descriptors * sp->dma_setup, data_end;
  pc_cal_prune(ctx, ctx->scalar_time);
  if (LS->is_dram || LD->is_dram)
    data_end = pc_cal_transfer(ctx, data_start, bytes, cap);
  else
    data_end = data_start + (int64_t)ceil(bytes / cap - 1e-9);
  int64_t end = data_end + PC_MAX(LS->latency, LD->latency);
  pc__complete(ctx, engine, start, end, acc, 2);

  pc_stats *st = &ctx->stats;
  st->bytes_read[S->level] += count * elem;
  st->bytes_written[D->level] += count * elem;
  st->energy_level[S->level] += bytes * LS->read_pj;
  st->energy_level[D->level] += bytes * LD->write_pj;
  st->dma_transfers++;
  st->dma_descriptors += descriptors;
  pc__trace(ctx, engine, PC_EV_DMA, start, end, count * elem, S->level, D->level,
           label);
}
