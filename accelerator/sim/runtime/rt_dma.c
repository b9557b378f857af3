/* rt_dma.c: DMA of multi-dimensional strided blocks between memory levels.
 *
 * Cost of one transfer: descriptors x setup + data time + latency of the slower
 * level. A transfer's own rate is capped by the channel's and each SRAM level's
 * bytes per cycle; when either end is DRAM the transfers in their data phase share
 * the DRAM's bytes per cycle (and its read and write caps) max-min fairly, re-rated
 * whenever one starts or ends (rt_timeline.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "polyc_rt.h"
#include "rt_internal.h"

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
                     int elem, pc_range *r) {
  int64_t a = off, b = off, inner = 1;
  int outer = -1, dims = 0, negative = 0;
  for (int d = 0; d < n; d++) {
    int64_t span = (size[d] - 1) * stride[d];
    if (span < 0) a += span;
    else b += span;
    if (size[d] <= 1) continue;
    dims++;
    negative |= stride[d] < 0;
    if (outer < 0 || stride[d] > stride[outer]) outer = d;
  }
  r->lo = a * elem;
  r->hi = (b + 1) * elem;
  r->period = r->arc = r->arc_len = 0;
  if (dims < 2 || negative) return;
  for (int d = 0; d < n; d++)
    if (d != outer && size[d] > 1) inner += (size[d] - 1) * stride[d];
  if (inner >= stride[outer]) return; /* the runs touch: the hull is exact */
  r->period = stride[outer] * elem;
  r->arc = off * elem % r->period;
  r->arc_len = inner * elem;
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
  if (channel < PC_LAST_CHANNEL || channel >= sp->channels)
    return (void)pc__fail(ctx, "pc_dma %s: channel %d does not exist because the "
                              "config has %d DMA channels. Use 0..%d, -1 for "
                              "the first free one or -2 for the last one.",
                         label ? label : "", channel, sp->channels,
                         sp->channels - 1);
  if (channel == PC_LAST_CHANNEL) channel = sp->channels - 1;
  int64_t size[PC_MAX_DIMS], ds[PC_MAX_DIMS], ss[PC_MAX_DIMS], count = 1;
  for (int d = 0; d < ndims; d++) {
    if (sizes[d] <= 0) return; /* an empty block moves nothing */
    size[d] = sizes[d];
    ds[d] = dst_strides[d];
    ss[d] = src_strides[d];
    count *= sizes[d];
  }
  pc_range acc[2] = {{src, 0, 0, 0, 0, 0, 0}, {dst, 1, 0, 0, 0, 0, 0}};
  pc__block_range(ndims, size, ss, src_off, elem, &acc[0]);
  pc__block_range(ndims, size, ds, dst_off, elem, &acc[1]);
  if (pc__check_range(ctx, &acc[0], "pc_dma", label) ||
      pc__check_range(ctx, &acc[1], "pc_dma", label))
    return;
  pc_buf *S = &ctx->bufs[src], *D = &ctx->bufs[dst];
  /* functional copy first: timing never changes values (nor reads them) */
  int n = pc_coalesce(ndims, size, ds, ss);
  if (!sp->timing_only)
    pc_copy_block(n, size, D->base + dst_off * elem, ds, S->base + src_off * elem,
                  ss, elem);

  int64_t descriptors = 1; /* dimensions beyond the descriptor's need more of them */
  for (int d = 0; d + sp->dma_dims < n; d++) descriptors *= size[d];
  const pc_level *LS = &sp->level[S->level], *LD = &sp->level[D->level];
  int dirs = (LS->is_dram ? 1 : 0) | (LD->is_dram ? 2 : 0);
  if (channel < 0) channel = pc__pick_channel(ctx, dirs);
  double bytes = (double)(count * elem);
  double cap = sp->dma_bytes_per_cycle;
  if (!LS->is_dram) cap = PC_MIN(cap, LS->bytes_per_cycle);
  if (!LD->is_dram) cap = PC_MIN(cap, LD->bytes_per_cycle);
  pc__submit_dma(ctx, PC_ENG_DMA + channel, acc, 2, descriptors * sp->dma_setup,
                 bytes, cap, dirs, PC_MAX(LS->latency, LD->latency), S->level,
                 D->level, label);

  pc_stats *st = &ctx->stats;
  st->bytes_read[S->level] += count * elem;
  st->bytes_written[D->level] += count * elem;
  st->energy_level[S->level] += bytes * LS->read_pj;
  st->energy_level[D->level] += bytes * LD->write_pj;
  st->dma_transfers++;
  st->dma_descriptors += descriptors;
}

static int64_t pc_read_index(const unsigned char *p, int bytes) {
  switch (bytes) {
    case 1: return *(const int8_t *)p;
    case 2: return *(const int16_t *)p;
    case 4: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
  }
}

int64_t pc_gather_index(pc_ctx *ctx, int64_t v, int64_t n, const char *label) {
  if (v >= 0 && v < n) return v;
  pc__fail(ctx, "simulate: gather %s reads index %lld, outside 0..%lld, because the "
                "index data holds it. Pass indices in 0..%lld (PyTorch raises on "
                "them too).", label ? label : "", (long long)v, (long long)(n - 1),
           (long long)(n - 1));
  return 0;
}

void pc_gather(pc_ctx *ctx, int channel, int elem, int64_t rows, int64_t row_elems,
               int dst, int64_t dst_off, int64_t dst_stride, int src,
               int64_t src_off, int64_t src_stride, int64_t src_rows, int idx,
               int64_t idx_off, int64_t idx_stride, int idx_elem,
               const char *label) {
  if (ctx->failed || rows <= 0 || row_elems <= 0) return;
  const pc_spec *sp = &ctx->spec;
  if (channel < -1 || channel >= sp->channels)
    return (void)pc__fail(ctx, "pc_gather %s: channel %d does not exist because the "
                              "config has %d DMA channels. Use 0..%d, or -1 for "
                              "the first free one.", label ? label : "", channel,
                         sp->channels, sp->channels - 1);
  /* the index block, the table's rows and the destination rows, checked */
  int64_t one = 1, isz = rows, istr = idx_stride;
  pc_range acc[3] = {
      {idx, 0, 0, 0, 0, 0, 0}, {src, 0, 0, 0, 0, 0, 0}, {dst, 1, 0, 0, 0, 0, 0}};
  pc__block_range(1, &isz, &istr, idx_off, idx_elem, &acc[0]);
  int64_t whole[2] = {src_rows, row_elems}, sstr[2] = {src_stride, one};
  pc__block_range(2, whole, sstr, src_off, elem, &acc[1]);
  int64_t block[2] = {rows, row_elems}, dstr[2] = {dst_stride, one};
  pc__block_range(2, block, dstr, dst_off, elem, &acc[2]);
  for (int i = 0; i < 3; i++)
    if (pc__check_range(ctx, &acc[i], "pc_gather", label)) return;
  pc_buf *I = &ctx->bufs[idx], *S = &ctx->bufs[src], *D = &ctx->bufs[dst];
  /* functional: every index checked before any row moves. Timing only: the
   * indices are not read (the cost below depends on the row count, never on
   * which rows), so an index out of range is not found */
  for (int64_t r = 0; r < rows && !sp->timing_only; r++) {
    int64_t v = pc_read_index(I->base + (idx_off + r * idx_stride) * idx_elem,
                              idx_elem);
    if (v < 0 || v >= src_rows) {
      pc__fail(ctx, "simulate: gather %s reads index %lld (at position %lld of the index block), outside "
                    "0..%lld, because the index data holds it. Pass indices in "
                    "0..%lld (PyTorch raises on them too).", label ? label : "",
               (long long)v, (long long)r, (long long)(src_rows - 1),
               (long long)(src_rows - 1));
      return;
    }
  }
  size_t row_bytes = (size_t)(row_elems * elem);
  for (int64_t r = 0; r < rows && !sp->timing_only; r++) {
    int64_t v = pc_read_index(I->base + (idx_off + r * idx_stride) * idx_elem,
                              idx_elem);
    memmove(D->base + (dst_off + r * dst_stride) * elem,
            S->base + (src_off + v * src_stride) * elem, row_bytes);
  }

  const pc_level *LI = &sp->level[I->level], *LS = &sp->level[S->level],
                 *LD = &sp->level[D->level];
  int dirs = (LS->is_dram || LI->is_dram ? 1 : 0) | (LD->is_dram ? 2 : 0);
  if (channel < 0) channel = pc__pick_channel(ctx, dirs);
  double index_bytes = (double)(rows * idx_elem);
  double data = (double)rows * (double)row_bytes;
  double cap = sp->dma_bytes_per_cycle;
  if (!LS->is_dram) cap = PC_MIN(cap, LS->bytes_per_cycle);
  if (!LD->is_dram) cap = PC_MIN(cap, LD->bytes_per_cycle);
  int64_t latency = PC_MAX(LI->latency, PC_MAX(LS->latency, LD->latency));
  pc__submit_dma(ctx, PC_ENG_DMA + channel, acc, 3, (1 + rows) * sp->dma_setup,
                 index_bytes + data, cap, dirs, 2 * latency, S->level, D->level,
                 label);

  pc_stats *st = &ctx->stats;
  st->bytes_read[I->level] += rows * idx_elem;
  st->bytes_read[S->level] += (int64_t)data;
  st->bytes_written[D->level] += (int64_t)data;
  st->energy_level[I->level] += index_bytes * LI->read_pj;
  st->energy_level[S->level] += data * LS->read_pj;
  st->energy_level[D->level] += data * LD->write_pj;
  st->dma_transfers++;
  st->dma_descriptors += 1 + rows;
}
