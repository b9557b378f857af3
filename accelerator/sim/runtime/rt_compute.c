/* rt_compute.c: the MAC array and the vector unit.
 *
 * MAC tile m x n x k on an r x c array: timed by its dataflow (pc_mac_time, the
 * formula of accelerator/hardware/dataflow.py). Numerics
 * follow the interpreter: every C element accumulates in k order, fp16 rounds after
 * each multiply and each add, int8 accumulates in int32 (wrapping).
 *
 * Vector op over n elements: ceil(n / lanes) * (sum of cycles of its op classes).
 * A row reduction of rows x cols: rows * (ceil(cols / lanes) * op + reduce).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "polyc_rt.h"
#include "rt_internal.h"

static const char *pc_label(const char *label) { return label ? label : ""; }

/* One index of a view split in two strides (span > 0): n steps become n / span
 * steps of `pitch` and span steps of `stride`, dimensions d and d + 1 of a block. */
static int pc_split_index(pc_ctx *ctx, int64_t n, int64_t span, int64_t pitch,
                          int64_t stride, int64_t *size, int64_t *strides,
                          const char *what, const char *op, const char *label) {
  if (n % span)
    return pc__fail(ctx, "%s %s: the view's %lld %s do not split into whole "
                        "spans because its span is %lld. Pass a multiple of the "
                        "span.",
                   op, pc_label(label), (long long)n, what, (long long)span);
  size[0] = n / span, size[1] = span, strides[0] = pitch, strides[1] = stride;
  return 0;
}

/* The bytes a rows x cols view of esize-byte elements touches, checked. A MAC
 * operand may split its K index (span / ps) and its other one (rspan / rps): K
 * is A's columns and B's rows (k_rows), so B's span splits its rows and its
 * rspan its columns (pc_view in polyc_rt.h). */
static int pc_operand_range(pc_ctx *ctx, pc_view v, int64_t rows, int64_t cols,
                            int k_rows, int esize, int is_write, pc_range *out,
                            const char *op, const char *label) {
  /* dimensions 0-1 the rows (outer, inner), 2-3 the columns */
  int64_t size[4] = {1, rows, cols, 1}, stride[4] = {0, v.rs, v.cs, 0};
  int64_t rsp = k_rows ? v.span : v.rspan, rp = k_rows ? v.ps : v.rps;
  int64_t csp = k_rows ? v.rspan : v.span, cp = k_rows ? v.rps : v.ps;
  if (csp > 0 && pc_split_index(ctx, cols, csp, cp, v.cs, size + 2, stride + 2,
                                "columns", op, label))
    return 1;
  if (rsp > 0 && pc_split_index(ctx, rows, rsp, rp, v.rs, size, stride, "rows", op,
                                label))
    return 1;
  out->buf = v.buf;
  out->is_write = is_write;
  pc__block_range(4, size, stride, v.off, esize, out);
  return pc__check_range(ctx, out, op, label);
}

/* The bytes a plain rows x cols view touches (a vector operand: no spans). */
static int pc_view_range(pc_ctx *ctx, pc_view v, int64_t rows, int64_t cols,
                         int esize, int is_write, pc_range *out, const char *op,
                         const char *label) {
  return pc_operand_range(ctx, v, rows, cols, 0, esize, is_write, out, op, label);
}

static int pc_level_ok(pc_ctx *ctx, int buf, unsigned mask, const char *what,
                       const char *label) {
  int l = ctx->bufs[buf].level;
  if (mask & (1u << l)) return 0;
  return pc__fail(ctx, "pc_mac %s: the %s buffer %s is in level %s because it was "
                      "placed there, but the MAC array cannot read it from that "
                      "level. Place it in one of the config's %s levels.",
                 pc_label(label), what, ctx->bufs[buf].name,
                 ctx->spec.level[l].name, what);
}

static void pc_account_bytes(pc_ctx *ctx, const pc_range *r, int64_t bytes) {
  int l = ctx->bufs[r->buf].level;
  const pc_level *L = &ctx->spec.level[l];
  if (r->is_write) {
    ctx->stats.bytes_written[l] += bytes;
    ctx->stats.energy_level[l] += (double)bytes * L->write_pj;
  } else {
    ctx->stats.bytes_read[l] += bytes;
    ctx->stats.energy_level[l] += (double)bytes * L->read_pj;
  }
}

#define PC_AT(T, base, v, r, c) (((T *)(base))[(v).off + (r) * (v).rs + (c) * (v).cs])

/* A's element (r, c), its row split in two strides when a.rspan > 0 and its
 * column when a.span > 0 */
static inline int64_t pc_a_at(pc_view a, int64_t r, int64_t c) {
  int64_t row = a.rspan <= 0 ? r * a.rs : (r / a.rspan) * a.rps + (r % a.rspan) * a.rs;
  if (a.span <= 0) return a.off + row + c * a.cs;
  return a.off + row + (c / a.span) * a.ps + (c % a.span) * a.cs;
}

/* B's element (r, c): its rows are K, so its span splits them and its rspan its
 * columns (the exchanged call's im2col operand); B transposed is an A-form view */
static inline int64_t pc_b_at(pc_view b, int64_t r, int64_t c) {
  if (b.span <= 0 && b.rspan <= 0) return b.off + r * b.rs + c * b.cs;
  pc_view t = b;
  t.rs = b.cs, t.cs = b.rs;
  return pc_a_at(t, c, r);
}

/* One output row accumulates in row[] (as TR: int32 for int32, float for fp16 and
 * fp32, which hold those values exactly; for fp16 the conversions are then single
 * F16C instructions, not library calls through double). */
#define PC_MAC_LOOP(TA, TC, TR, STEP)                                         \
  for (int64_t i = 0; i < m; i++) {                                           \
    TR *rt = (TR *)row;                                                       \
    for (int64_t j = 0; j < n; j++)                                           \
      rt[j] = accumulate ? (TR)PC_AT(TC, C, c, i, j) : (TR)0;                 \
    for (int64_t kk = 0; kk < k; kk++) {                                      \
      TA av = ((const TA *)A)[pc_a_at(a, i, kk)];                             \
      for (int64_t j = 0; j < n; j++) {                                       \
        TA bv = ((const TA *)B)[pc_b_at(b, kk, j)];                           \
        TC acc = (TC)rt[j];                                                   \
        STEP;                                                                 \
        rt[j] = (TR)acc;                                                      \
      }                                                                       \
    }                                                                         \
    for (int64_t j = 0; j < n; j++) PC_AT(TC, C, c, i, j) = (TC)rt[j];       \
  }

/* a bfloat16 element (the upper 16 bits of a float) as its float, exactly */
static inline float pc_mac_bf16(uint16_t b) {
  union { uint32_t u; float f; } v = {(uint32_t)b << 16};
  return v.f;
}

static void pc_mac_compute(int mode, int64_t m, int64_t n, int64_t k,
                           int accumulate, const unsigned char *A, pc_view a,
                           const unsigned char *B, pc_view b, unsigned char *C,
                           pc_view c, double *row) {
  switch (mode) {
    case PC_I8_I32:
      PC_MAC_LOOP(int8_t, int32_t, int32_t,
                  acc = (int32_t)((uint32_t)acc + (uint32_t)((int32_t)av * bv)))
      break;
    case PC_F16_F16:
      PC_MAC_LOOP(_Float16, _Float16, float,
                  acc = (_Float16)((float)acc + (float)(_Float16)((float)av *
                                                                   (float)bv)))
      break;
    case PC_F16_F32:
      PC_MAC_LOOP(_Float16, float, float, acc = acc + (float)av * (float)bv)
      break;
    case PC_BF16_F32: /* products exact in float, summed in float */
      PC_MAC_LOOP(uint16_t, float, float, acc = acc + pc_mac_bf16(av) * pc_mac_bf16(bv))
      break;
    default:
      PC_MAC_LOOP(float, float, float, acc = acc + av * bv)
      break;
  }
}

static int64_t pc_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A MAC call m x n x k on the array, timed by the dataflow (the formula of
 * accelerator/hardware/dataflow.py, docs/accelerator.md): folds of the array over
 * the call, each loading the stationary operand (R cycles; none for
 * output-stationary), streaming the other (ceil(T / rate)) and draining through
 * the skew (R + C - 2). Without double buffering folds and calls run one after
 * another (SCALE-Sim's model). With it a fold's stationary operand loads while
 * the fold before streams, so folds start every max(stream, R) cycles; the first
 * fold's load (the head) may overlap the previous call's last fold, and the
 * results are ready `skew` cycles after the array frees (the tail). */
/* The bytes the array moves at each operand of a call (A, B, C written, C read
 * before the call's first fold), from its dataflow: the stationary operand is read
 * once; the streamed and the third operand once per fold of the dimension they do
 * not span; partial sums that leave the array between K folds (weight and input
 * stationary) are written once per K fold and read back before every K fold but
 * the first. Output-stationary keeps them in the PEs: C is written once. The cost
 * model's twin: accelerator/hardware/dataflow.py, mac_bytes. */
static void pc_mac_bytes(const pc_spec *sp, int64_t m, int64_t n, int64_t k, int esz,
                         int asz, double *bytes) {
  int64_t R = sp->rows, C = sp->cols, mn = m * n * asz;
  switch (sp->dataflow) {
    case PC_DF_OUTPUT_STATIONARY:
      bytes[0] = (double)(pc_cdiv(n, C) * m * k * esz);
      bytes[1] = (double)(pc_cdiv(m, R) * k * n * esz);
      bytes[2] = (double)mn;
      break;
    case PC_DF_INPUT_STATIONARY:
      bytes[0] = (double)(m * k * esz);
      bytes[1] = (double)(pc_cdiv(m, C) * k * n * esz);
      bytes[2] = (double)((2 * pc_cdiv(k, R) - 1) * mn);
      break;
    default: /* weight stationary */
      bytes[0] = (double)(pc_cdiv(n, C) * m * k * esz);
      bytes[1] = (double)(k * n * esz);
      bytes[2] = (double)((2 * pc_cdiv(k, R) - 1) * mn);
      break;
  }
  bytes[3] = (double)mn; /* the accumulators read in, when the call accumulates */
}

/* The bytes and energy of a MAC call at each operand's level: what the array
 * moves (pc_mac_bytes, the figures its timing charges the banks), not the
 * operands' footprints. The streamed operand is read once per fold of the
 * dimension it does not span, and the partial sums that leave the array between
 * K folds are written once per K fold and read back before every K fold but the
 * first: a call over 64 columns on a 16-column array reads its input four
 * times, as ZigZag and Timeloop count an operand's reads per iteration of the
 * loops above the level that holds it. The accumulators a call adds to are read
 * once more. */
static void pc_mac_account(pc_ctx *ctx, const pc_range *acc, const double *bytes,
                           int64_t mn, int accumulate) {
  /* bytes[2] is (2 K folds - 1) x mn: written once per K fold, read back before
   * all but the first (mn once for output-stationary) */
  int64_t written = ((int64_t)bytes[2] + mn) / 2;
  pc_account_bytes(ctx, &acc[0], (int64_t)bytes[0]);
  pc_account_bytes(ctx, &acc[1], (int64_t)bytes[1]);
  pc_account_bytes(ctx, &acc[2], written);
  if ((int64_t)bytes[2] > written) {
    pc_range back = acc[2];
    back.is_write = 0;
    pc_account_bytes(ctx, &back, (int64_t)bytes[2] - written);
  }
  if (accumulate) pc_account_bytes(ctx, &acc[3], (int64_t)bytes[3]);
}

static void pc_mac_submit(pc_ctx *ctx, int64_t m, int64_t n, int64_t k, double rate,
                          const pc_range *acc, int nacc, int64_t macs,
                          double *bytes, const char *label) {
  const pc_spec *sp = &ctx->spec;
  int64_t R = sp->rows, C = sp->cols, folds, streamed, load = R;
  switch (sp->dataflow) {
    case PC_DF_OUTPUT_STATIONARY:
      folds = pc_cdiv(m, R) * pc_cdiv(n, C), streamed = k, load = 0;
      break;
    case PC_DF_INPUT_STATIONARY:
      folds = pc_cdiv(k, R) * pc_cdiv(m, C), streamed = n;
      break;
    default: /* weight stationary */
      folds = pc_cdiv(k, R) * pc_cdiv(n, C), streamed = m;
      break;
  }
  int64_t stream = (int64_t)ceil((double)streamed / rate - 1e-9);
  int64_t skew = R + C - 2;
  pc_mac_timing t = {.pipelined = 2, .bytes = bytes}; /* C (acc[2..]) pipelined */
  if (!sp->double_buffered) {
    t.busy = folds * (load + stream + skew);
  } else {
    t.head = load;
    t.busy = load + (folds - 1) * PC_MAX(stream, R) + stream;
    t.tail = skew;
    t.spacing = R;
    t.last = stream;
  }
  pc__submit_mac(ctx, acc, nacc, &t, macs, label);
}

void pc_mac(pc_ctx *ctx, int mode, int64_t m, int64_t n, int64_t k,
            int accumulate, pc_view a, pc_view b, pc_view c, const char *label) {
  if (ctx->failed) return;
  static const int in_type[] = {PC_MAC_INT8, PC_MAC_FLOAT16, PC_MAC_FLOAT16,
                                PC_MAC_FLOAT32, PC_MAC_BFLOAT16};
  static const int in_size[] = {1, 2, 2, 4, 2}, acc_size[] = {4, 2, 4, 4, 4};
  static const char *names[] = {"int8", "float16", "float32", "bfloat16"};
  const pc_spec *sp = &ctx->spec;
  if (mode < 0 || mode > PC_BF16_F32)
    return (void)pc__fail(ctx, "pc_mac %s: mode %d is unknown because MAC modes are "
                              "0..4 (PC_I8_I32 .. PC_BF16_F32).", pc_label(label),
                         mode);
  double rate = sp->mac_rate[in_type[mode]];
  if (rate <= 0)
    return (void)pc__fail(ctx, "pc_mac %s: the MAC array does not support %s because "
                              "the config lists no rate for it. Run this tile on "
                              "the vector unit or use a config that supports it.",
                         pc_label(label), names[in_type[mode]]);
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (c.span > 0 || c.rspan > 0)
    return (void)pc__fail(ctx, "pc_mac %s: the C view splits its rows or columns "
                              "because its span is set. Split only A's and B's "
                              "indices.",
                         pc_label(label));
  pc_range acc[4];
  if (pc_operand_range(ctx, a, m, k, 0, in_size[mode], 0, &acc[0], "pc_mac", label) ||
      pc_operand_range(ctx, b, k, n, 1, in_size[mode], 0, &acc[1], "pc_mac", label) ||
      pc_view_range(ctx, c, m, n, acc_size[mode], 1, &acc[2], "pc_mac", label) ||
      pc_level_ok(ctx, a.buf, sp->input_levels, "input", label) ||
      pc_level_ok(ctx, b.buf, sp->weight_levels, "weight", label) ||
      pc_level_ok(ctx, c.buf, sp->acc_levels, "accumulator", label))
    return;
  int nacc = 3;
  if (accumulate) {
    acc[3] = acc[2];
    acc[3].is_write = 0;
    nacc = 4;
  }
  if (!sp->timing_only) {
    double *row = malloc((size_t)n * sizeof *row);
    if (!row) return (void)pc__fail(ctx, "pc_mac: out of host memory.");
    pc_mac_compute(mode, m, n, k, accumulate, ctx->bufs[a.buf].base, a,
                   ctx->bufs[b.buf].base, b, ctx->bufs[c.buf].base, c, row);
    free(row);
  }

  int64_t macs = m * n * k;
  double bytes[4]; /* what the array moves: its timing and its energy alike */
  pc_mac_bytes(sp, m, n, k, in_size[mode], acc_size[mode], bytes);
  pc_mac_submit(ctx, m, n, k, rate, acc, nacc, macs, bytes, label);

  pc_stats *st = &ctx->stats;
  st->macs += macs;
  st->mac_array_macs += macs;
  st->energy_mac += (double)macs * sp->mac_pj[in_type[mode]];
  pc_mac_account(ctx, acc, bytes, m * n * acc_size[mode], accumulate);
}

/* The MAC array's output path (config [mac_array] requantize): the int8
 * requantization of a tile's accumulators as they leave the array after the last
 * K step, computed by the caller's code like a pc_vector body. One requantizer
 * per column takes one accumulator per cycle, the rate at which the array emits
 * them, so it adds no cycles beyond the drain already in the call's tail: the
 * operation takes 0 cycles on the MAC array's timeline (it only orders the int8
 * writes after the accumulation, and the reads of the accumulators before the
 * next tile's MAC calls overwrite them). Bytes: only the int8 writes (the
 * accumulators are read inside the array); energy: the vector unit's per-op
 * figure for each element's operations. */
void pc_mac_output(pc_ctx *ctx, const pc_vop *op) {
  if (ctx->failed) return;
  if (!ctx->spec.mac_requantize)
    return (void)pc__fail(ctx, "pc_mac_output %s: the MAC array has no requantizer "
                              "in its output path because the config does not set "
                              "[mac_array] requantize = true. Compile for this "
                              "config (the epilogue then runs on the vector unit).",
                         pc_label(op->name));
  if (op->naccess < 0 || op->naccess > PC_MAX_ACCESS)
    return (void)pc__fail(ctx, "pc_mac_output %s: %d accesses because of a bad "
                              "descriptor; at most %d are supported.",
                         pc_label(op->name), op->naccess, PC_MAX_ACCESS);
  for (int i = 0; i < op->naccess; i++) {
    if (pc__check_range(ctx, &op->access[i], "pc_mac_output", op->name) ||
        (op->access[i].is_write &&
         pc_level_ok(ctx, op->access[i].buf, ctx->spec.acc_levels, "accumulator",
                     op->name)))
      return;
  }
  /* in the array's pipeline, behind the calls whose accumulators it reads */
  pc_mac_timing t = {.pipelined = 0};
  pc__submit_mac(ctx, op->access, op->naccess, &t, 0, op->name);
  double total = 0;
  for (int c = 0; c < PC_NCLASS; c++) total += (double)(op->ops[c] * op->elements);
  ctx->stats.energy_mac += total * ctx->spec.vec_pj;
  for (int i = 0; i < op->naccess; i++)
    if (op->access[i].is_write)
      pc_account_bytes(ctx, &op->access[i], pc__range_bytes(&op->access[i]));
}

/* ---- vector unit ------------------------------------------------------------- */

static int pc_vector_levels(pc_ctx *ctx, const pc_range *acc, int n,
                            const char *label) {
  for (int i = 0; i < n; i++) {
    int l = ctx->bufs[acc[i].buf].level;
    if (!(ctx->spec.vector_levels & (1u << l)))
      return pc__fail(ctx, "vector op %s: buffer %s is in level %s because it was "
                          "placed there, but the vector unit cannot access that "
                          "level. Place it in one of the config's vector levels.",
                     pc_label(label), ctx->bufs[acc[i].buf].name,
                     ctx->spec.level[l].name);
  }
  return 0;
}

/* Time and account `elements` x ops of vector work touching `acc`; `banked`: its
 * `bytes` are what it moves (the typed primitives), so they load its SRAM banks.
 * A pc_vector body's ranges are its hazards, not its traffic (a reduction step
 * names the whole row it folds): it holds no bank. */
static void pc_vector_time(pc_ctx *ctx, const char *label, int64_t groups,
                           int64_t cycles_per_group, int64_t elements,
                           const int64_t *ops, const pc_range *acc, int nacc,
                           const int64_t *bytes, int banked) {
  const pc_spec *sp = &ctx->spec;
  double moved[PC_MAX_ACCESS];
  for (int i = 0; i < nacc && i < PC_MAX_ACCESS; i++) moved[i] = (double)bytes[i];
  pc__submit(ctx, PC_ENG_VECTOR, acc, nacc, groups * cycles_per_group, 0,
             PC_EV_VECTOR, elements, banked ? moved : NULL, label);
  double total = 0;
  for (int c = 0; c < PC_NCLASS; c++) {
    ctx->stats.vector_ops[c] += ops[c];
    total += (double)ops[c];
  }
  ctx->stats.energy_vector += total * sp->vec_pj;
  for (int i = 0; i < nacc; i++) pc_account_bytes(ctx, &acc[i], bytes[i]);
}

void pc_vector(pc_ctx *ctx, const pc_vop *op) {
  if (ctx->failed) return;
  if (op->naccess < 0 || op->naccess > PC_MAX_ACCESS)
    return (void)pc__fail(ctx, "pc_vector %s: %d accesses because of a bad "
                              "descriptor; at most %d are supported.",
                         pc_label(op->name), op->naccess, PC_MAX_ACCESS);
  int64_t bytes[PC_MAX_ACCESS], per = 0, ops[PC_NCLASS];
  for (int i = 0; i < op->naccess; i++) {
    if (pc__check_range(ctx, &op->access[i], "pc_vector", op->name)) return;
    bytes[i] = pc__range_bytes(&op->access[i]);
  }
  if (pc_vector_levels(ctx, op->access, op->naccess, op->name)) return;
  for (int c = 0; c < PC_NCLASS; c++) {
    per += op->ops[c] * ctx->spec.vec_cycles[c];
    ops[c] = op->ops[c] * op->elements;
  }
  int64_t lanes = ctx->spec.lanes;
  pc_vector_time(ctx, op->name, (op->elements + lanes - 1) / lanes,
                 per > 0 ? per : 1, op->elements, ops, op->access, op->naccess,
                 bytes, 0);
}

static const int pc_esize[] = {4, 2, 4, 1};

static int pc_op_class(int op) {
  switch (op) {
    case PC_OP_ADD: case PC_OP_SUB: case PC_OP_NEG: case PC_OP_ABS:
    case PC_OP_SUM: case PC_OP_COPY: case PC_OP_RINT:
      return PC_ADD;
    case PC_OP_MUL:
      return PC_MUL;
    case PC_OP_MAX: case PC_OP_MIN: case PC_OP_RELU: case PC_OP_RMAX:
    case PC_OP_RMIN:
      return PC_CMP;
    case PC_OP_DIV:
      return PC_DIV;
    default:
      return PC_TRANS;
  }
}

/* one element in float (f32, f16) or int64 (i32, i8); narrowed by the caller */
static double pc_fop(int op, double x, double y) {
  switch (op) {
    case PC_OP_ADD: case PC_OP_SUM: return (float)x + (float)y;
    case PC_OP_SUB: return (float)x - (float)y;
    case PC_OP_MUL: return (float)x * (float)y;
    case PC_OP_DIV: return (float)x / (float)y;
    /* NaN propagates, as the interpreter's (numpy's) and torch's max/min */
    case PC_OP_MAX: case PC_OP_RMAX: return (x > y || x != x) ? x : y;
    case PC_OP_MIN: case PC_OP_RMIN: return (x < y || x != x) ? x : y;
    case PC_OP_NEG: return -x;
    case PC_OP_ABS: return fabsf((float)x);
    case PC_OP_EXP: return expf((float)x);
    case PC_OP_LOG: return logf((float)x);
    case PC_OP_SQRT: return sqrtf((float)x);
    case PC_OP_TANH: return tanhf((float)x);
    case PC_OP_SIGMOID: return 1.0f / (1.0f + expf(-(float)x));
    case PC_OP_RELU: return (x > 0 || x != x) ? x : 0.0;
    case PC_OP_RINT: return nearbyintf((float)x);
    default: return x; /* COPY */
  }
}

static int64_t pc_iop(int op, int64_t x, int64_t y) {
  switch (op) {
    case PC_OP_ADD: case PC_OP_SUM: return x + y;
    case PC_OP_SUB: return x - y;
    case PC_OP_MUL: return x * y;
    case PC_OP_DIV: return y ? x / y : 0;
    case PC_OP_MAX: case PC_OP_RMAX: return x > y ? x : y;
    case PC_OP_MIN: case PC_OP_RMIN: return x < y ? x : y;
    case PC_OP_NEG: return -x;
    case PC_OP_ABS: return x < 0 ? -x : x;
    case PC_OP_RELU: return x > 0 ? x : 0;
    default: return x;
  }
}

static double pc_load(int dt, const unsigned char *base, int64_t i) {
  switch (dt) {
    case PC_F32: return ((const float *)base)[i];
    case PC_F16: return (double)((const _Float16 *)base)[i];
    case PC_I32: return ((const int32_t *)base)[i];
    default: return ((const int8_t *)base)[i];
  }
}

static void pc_store(int dt, unsigned char *base, int64_t i, double v) {
  switch (dt) {
    case PC_F32: ((float *)base)[i] = (float)v; break;
    case PC_F16: ((_Float16 *)base)[i] = (_Float16)(float)v; break;
    case PC_I32: ((int32_t *)base)[i] = (int32_t)(uint32_t)(int64_t)v; break;
    default: ((int8_t *)base)[i] = (int8_t)(uint8_t)(int64_t)v; break;
  }
}

static double pc_apply(int dt, int op, double x, double y) {
  if (dt == PC_F32) return pc_fop(op, x, y);
  if (dt == PC_F16) return (double)(_Float16)(float)pc_fop(op, x, y);
  int64_t r = pc_iop(op, (int64_t)x, (int64_t)y);
  return dt == PC_I32 ? (double)(int32_t)(uint32_t)r : (double)(int8_t)(uint8_t)r;
}

static int pc_vec_args(pc_ctx *ctx, int op, int dtype, int lo, int hi,
                       const char *label) {
  if (dtype < PC_F32 || dtype > PC_I8)
    return pc__fail(ctx, "vector op %s: dtype %d is unknown because vector dtypes "
                        "are 0..3 (PC_F32, PC_F16, PC_I32, PC_I8).", pc_label(label),
                   dtype);
  if (op < lo || op > hi || ((dtype == PC_I32 || dtype == PC_I8) &&
                             op >= PC_OP_EXP && op <= PC_OP_SIGMOID))
    return pc__fail(ctx, "vector op %s: op %d is not valid here because it is not "
                        "one of this primitive's ops for this dtype.",
                   pc_label(label), op);
  return 0;
}

void pc_vec_binary(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                   pc_view out, pc_view a, pc_view b, const char *label) {
  if (ctx->failed || pc_vec_args(ctx, op, dtype, PC_OP_ADD, PC_OP_MIN, label)) return;
  if (rows <= 0 || cols <= 0) return;
  int es = pc_esize[dtype];
  pc_range acc[3];
  if (pc_view_range(ctx, a, rows, cols, es, 0, &acc[0], "pc_vec_binary", label) ||
      pc_view_range(ctx, b, rows, cols, es, 0, &acc[1], "pc_vec_binary", label) ||
      pc_view_range(ctx, out, rows, cols, es, 1, &acc[2], "pc_vec_binary", label) ||
      pc_vector_levels(ctx, acc, 3, label))
    return;
  unsigned char *A = ctx->bufs[a.buf].base, *B = ctx->bufs[b.buf].base,
                *O = ctx->bufs[out.buf].base;
  for (int64_t r = 0; r < rows && !ctx->spec.timing_only; r++)
    for (int64_t c = 0; c < cols; c++) {
      double x = pc_load(dtype, A, a.off + r * a.rs + c * a.cs);
      double y = pc_load(dtype, B, b.off + r * b.rs + c * b.cs);
      pc_store(dtype, O, out.off + r * out.rs + c * out.cs, pc_apply(dtype, op, x, y));
    }
  int64_t n = rows * cols, ops[PC_NCLASS] = {0}, bytes[3] = {n * es, n * es, n * es};
  int cls = pc_op_class(op);
  ops[cls] = n;
  int64_t lanes = ctx->spec.lanes;
  pc_vector_time(ctx, label, (n + lanes - 1) / lanes, ctx->spec.vec_cycles[cls], n,
                 ops, acc, 3, bytes, 1);
}

void pc_vec_unary(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                  pc_view out, pc_view a, const char *label) {
  if (ctx->failed || pc_vec_args(ctx, op, dtype, PC_OP_NEG, PC_OP_RINT, label)) return;
  if (rows <= 0 || cols <= 0) return;
  int es = pc_esize[dtype];
  pc_range acc[2];
  if (pc_view_range(ctx, a, rows, cols, es, 0, &acc[0], "pc_vec_unary", label) ||
      pc_view_range(ctx, out, rows, cols, es, 1, &acc[1], "pc_vec_unary", label) ||
      pc_vector_levels(ctx, acc, 2, label))
    return;
  unsigned char *A = ctx->bufs[a.buf].base, *O = ctx->bufs[out.buf].base;
  for (int64_t r = 0; r < rows && !ctx->spec.timing_only; r++)
    for (int64_t c = 0; c < cols; c++) {
      double x = pc_load(dtype, A, a.off + r * a.rs + c * a.cs);
      pc_store(dtype, O, out.off + r * out.rs + c * out.cs, pc_apply(dtype, op, x, 0));
    }
  int64_t n = rows * cols, ops[PC_NCLASS] = {0}, bytes[2] = {n * es, n * es};
  int cls = pc_op_class(op);
  ops[cls] = n;
  int64_t lanes = ctx->spec.lanes;
  pc_vector_time(ctx, label, (n + lanes - 1) / lanes, ctx->spec.vec_cycles[cls], n,
                 ops, acc, 2, bytes, 1);
}

void pc_vec_reduce(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                   int accumulate, pc_view out, pc_view a, const char *label) {
  if (ctx->failed || pc_vec_args(ctx, op, dtype, PC_OP_SUM, PC_OP_RMIN, label)) return;
  if (rows <= 0 || cols <= 0) return;
  int es = pc_esize[dtype];
  pc_range acc[3];
  if (pc_view_range(ctx, a, rows, cols, es, 0, &acc[0], "pc_vec_reduce", label) ||
      pc_view_range(ctx, out, rows, 1, es, 1, &acc[1], "pc_vec_reduce", label) ||
      pc_vector_levels(ctx, acc, 2, label))
    return;
  int nacc = 2;
  if (accumulate) {
    acc[2] = acc[1];
    acc[2].is_write = 0;
    nacc = 3;
  }
  unsigned char *A = ctx->bufs[a.buf].base, *O = ctx->bufs[out.buf].base;
  for (int64_t r = 0; r < rows && !ctx->spec.timing_only; r++) { /* in order: equals a sequential loop */
    int64_t o = out.off + r * out.rs;
    double v = accumulate ? pc_load(dtype, O, o)
                          : pc_load(dtype, A, a.off + r * a.rs);
    for (int64_t c = accumulate ? 0 : 1; c < cols; c++)
      v = pc_apply(dtype, op, v, pc_load(dtype, A, a.off + r * a.rs + c * a.cs));
    pc_store(dtype, O, o, v);
  }
  int64_t n = rows * cols, ops[PC_NCLASS] = {0};
  int64_t bytes[3] = {n * es, rows * es, rows * es};
  int cls = pc_op_class(op);
  ops[cls] = n;
  ops[PC_RED] = rows;
  int64_t lanes = ctx->spec.lanes;
  int64_t per_row = ((cols + lanes - 1) / lanes) * ctx->spec.vec_cycles[cls] +
                    ctx->spec.vec_cycles[PC_RED];
  pc_vector_time(ctx, label, rows, per_row, n, ops, acc, nacc, bytes, 1);
}
