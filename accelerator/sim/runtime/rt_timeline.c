/* rt_timeline.c: the engines' timing, deferred and resolved by a small event
 * simulation.
 *
 * Why deferred: DRAM transfers in flight share the DRAM's bandwidth, re-rated
 * whenever one starts or ends, so the end of a transfer moves when a later one
 * starts. The scalar core issues in program order and every operation starts at
 * or after its issue, so nothing issued later can change the timeline before the
 * scalar core's time. An operation is therefore recorded when it is issued (its
 * engine, its duration or its bytes and cap, the unfinished operations it waits
 * for), and the timeline is resolved only as far as the scalar core needs a time:
 * to its own time before each issue, until the oldest queued command starts when a
 * command queue is full, until a buffer's operations end (pc_wait, pc_wait_all),
 * to the end (pc_finish). Everything issued is known then and nothing else can
 * start before the awaited event, so resolving exactly to it is exact. The
 * unfinished operations are few: an engine holds at most queue_depth commands
 * that have not started.
 *
 * An engine runs its commands in issue order; a command starts when the engine is
 * free, it has been issued and the operations it depends on (byte-range hazards,
 * rt_core.c) have their results ready. An engine's results are ready in issue
 * order, so per engine its latest operation stands for all its earlier ones:
 * dependencies, hazards and waits keep one operation id per engine.
 *
 * DRAM: the transfers in their data phase share the DRAM's bytes per cycle
 * max-min fairly (water filling): each gets an equal share, capped by its own
 * rate (its channel's and its SRAM end's bytes per cycle), and what a capped one
 * leaves goes to the others; reads and writes also share read_bytes_per_cycle and
 * write_bytes_per_cycle where the config sets them. Rates change only when a
 * transfer starts or ends its data phase; a transfer's data phase ends at the
 * first whole cycle by which its bytes have moved. Everything at one cycle is
 * processed before the rates are set again, so the order of processing does not
 * matter: the timeline is deterministic, in whole cycles.
 *
 * SRAM banks: a level of B banks is block-partitioned (bank i holds bytes
 * [i * capacity / B, (i + 1) * capacity / B)), each bank serving
 * bytes_per_cycle / B. An operation touches the banks its byte ranges cover
 * (placement is known at issue), its bytes spread over them in proportion to the
 * range's bytes in each (at most PC_MAX_USE banks an operation: both ends of a
 * transfer over every bank of two levels; a vector operation over more is charged
 * for its first ones). The engines come first: a MAC or vector operation, when it
 * starts, takes at each bank the bytes per cycle it needs at full speed (its bytes
 * there / its busy cycles); where the other engine holds part of the bank, it gets
 * what that one leaves until the other frees its engine, then the bank (two
 * engines never take more than the bank's bandwidth together). Where a bank cannot
 * feed it the operation stretches by its tightest bank's ratio (busy, first load
 * and last fold alike), and it holds its average bandwidth until it frees its
 * engine. DMA transfers share what the engines leave:
 * each bank is one more resource of the water filling above (a transfer uses a
 * bank with the share of its bytes there, per byte it moves), so a transfer's rate
 * is limited by its tightest resource; the rates are set again when an engine
 * operation starts holding banks or lets them go. One bank per level (the usual
 * config) makes the level one resource: two transfers into it share its bytes per
 * cycle, and an engine streaming it at its full width leaves a transfer nothing.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "polyc_rt.h"
#include "rt_internal.h"

enum { PC_WAITING, PC_SETUP, PC_FLOW, PC_RUNNING, PC_DONE };
#define PC_NEVER INT64_MAX
#define PC_EPS 1e-9

static pc_op *pc_find(pc_timeline *tl, int64_t id) {
  if (id < 0 || !tl->cap) return NULL;
  pc_op *o = &tl->ops[id & (tl->cap - 1)];
  return o->id == id ? o : NULL;
}

/* bytes per cycle of bank `res` (level * PC_MAX_BANKS + bank) */
static double pc_bank_rate(const pc_ctx *ctx, int res) {
  const pc_level *L = &ctx->spec.level[res / PC_MAX_BANKS];
  return L->bytes_per_cycle / (L->banks > 0 ? L->banks : 1);
}

/* Add to o's bank uses the banks bytes [r->lo, r->hi) of r's buffer cover, each
 * with weight w times its share of the range's bytes. DRAM has no banks. */
static void pc_add_uses(pc_ctx *ctx, pc_op *o, const pc_range *r, double w) {
  const pc_buf *b = &ctx->bufs[r->buf];
  const pc_level *L = &ctx->spec.level[b->level];
  if (L->is_dram || r->hi <= r->lo || w <= 0) return;
  int banks = L->banks > 0 ? L->banks : 1;
  int64_t size = L->capacity / banks, lo = b->offset + r->lo, hi = b->offset + r->hi;
  if (size <= 0) return;
  for (int64_t i = lo / size; i <= (hi - 1) / size && i < banks; i++) {
    int64_t a = PC_MAX(lo, i * size), z = PC_MIN(hi, (i + 1) * size);
    double part = w * (double)(z - a) / (double)(hi - lo);
    int res = b->level * PC_MAX_BANKS + (int)i, k = 0;
    while (k < o->nuse && o->use_res[k] != res) k++;
    if (k == PC_MAX_USE) return; /* beyond the table: not charged (the header) */
    if (k == o->nuse) {
      o->use_res[o->nuse++] = (short)res;
      o->use_a[k] = 0;
    }
    o->use_a[k] += part;
  }
}

static void pc_release_banks(pc_timeline *tl, pc_op *o) {
  int side = o->engine == PC_ENG_MAC ? 0 : 1;
  for (int k = 0; k < o->nuse; k++) {
    double *h = &tl->held[side][o->use_res[k]];
    *h -= o->use_a[k];
    if (*h < 1e-6) *h = 0; /* float sums: a bank nobody holds is exactly free */
  }
  o->holds = 0;
  tl->rerate = 1;
}

/* The last cycle at which an operation of the engine other than `side`'s holds
 * bank `res` (it holds it until it frees its engine). */
static int64_t pc_held_until(pc_timeline *tl, int side, int res) {
  int64_t until = 0;
  for (int i = 0; i < tl->nrun; i++) {
    pc_op *p = pc_find(tl, tl->run[i]);
    if (!p || !p->holds || (p->engine == PC_ENG_MAC ? 0 : 1) == side) continue;
    for (int k = 0; k < p->nuse; k++)
      if (p->use_res[k] == res) until = PC_MAX(until, p->free_at);
  }
  return until;
}

/* An engine operation starting: take its banks' bandwidth (see the header) and
 * return the factor by which its tightest bank stretches it (1: none). The
 * engine's operation before it, still in its last fold (under which this one's
 * first load runs), lets its banks go now: the array streams one fold at a time. */
static double pc_take_banks(pc_ctx *ctx, pc_op *o, int64_t t) {
  pc_timeline *tl = &ctx->tl;
  int side = o->engine == PC_ENG_MAC ? 0 : 1;
  for (int i = 0; i < tl->nrun; i++) {
    pc_op *p = pc_find(tl, tl->run[i]);
    if (p != o && p->holds && p->engine == o->engine) pc_release_banks(tl, p);
  }
  double s = 1, busy = (double)o->busy;
  for (int k = 0; k < o->nuse; k++) {
    int res = o->use_res[k];
    double cap = pc_bank_rate(ctx, res), need = o->use_a[k];
    if (need <= 0) continue;
    double other = tl->held[1 - side][res];
    double full = PC_MIN(need, cap), cycles = need * busy / full;
    if (other > 0) { /* what the other engine leaves until it frees the bank */
      double left = PC_MIN(need, PC_MAX(cap - other, 0.0));
      double window = (double)PC_MAX(pc_held_until(tl, side, res) - t, 0);
      double bytes = need * busy;
      cycles = left * window >= bytes ? bytes / left
                                      : window + (bytes - left * window) / full;
    }
    s = PC_MAX(s, cycles / busy);
  }
  for (int k = 0; k < o->nuse; k++) {
    o->use_a[k] /= s;
    tl->held[side][o->use_res[k]] += o->use_a[k];
  }
  o->holds = o->nuse > 0;
  tl->rerate |= o->holds;
  return s;
}

/* cycles x s in whole cycles (a ratio of bytes that is an integer stays one) */
static int64_t pc_stretch(int64_t cycles, double s) {
  return s > 1 ? (int64_t)ceil((double)cycles * s - 1e-6) : cycles;
}

/* an operation no longer in its slot finished before the slot was reused */
int pc__done(pc_ctx *ctx, int64_t id) {
  pc_op *o = pc_find(&ctx->tl, id);
  return !o || o->state == PC_DONE;
}

int pc__timeline_init(pc_ctx *ctx) {
  pc_timeline *tl = &ctx->tl;
  tl->cap = 256;
  tl->ops = malloc((size_t)tl->cap * sizeof *tl->ops);
  tl->caprun = 64;
  tl->run = malloc((size_t)tl->caprun * sizeof *tl->run);
  if (!tl->ops || !tl->run) {
    tl->cap = 0;
    return pc__fail(ctx, "pc_create: out of host memory for the timeline.");
  }
  for (int64_t i = 0; i < tl->cap; i++) tl->ops[i].id = -1;
  for (int e = 0; e < PC_MAX_ENGINES; e++) tl->fold_at[e] = -(INT64_MAX / 4);
  return 0;
}

void pc__timeline_free(pc_ctx *ctx) {
  free(ctx->tl.ops);
  free(ctx->tl.run);
}

/* Twice the slots; finished operations are dropped (nothing needs their times:
 * they ended before the resolved time, which no later operation precedes). */
static int pc_grow(pc_ctx *ctx) {
  pc_timeline *tl = &ctx->tl;
  int64_t cap = 2 * tl->cap;
  pc_op *ops = malloc((size_t)cap * sizeof *ops);
  if (!ops) return pc__fail(ctx, "simulate: out of host memory for the timeline.");
  for (int64_t i = 0; i < cap; i++) ops[i].id = -1;
  for (int64_t i = 0; i < tl->cap; i++) {
    pc_op *o = &tl->ops[i];
    if (o->id >= 0 && o->state != PC_DONE) ops[o->id & (cap - 1)] = *o;
  }
  free(tl->ops);
  tl->ops = ops;
  tl->cap = cap;
  return 0;
}

static pc_op *pc_new_op(pc_ctx *ctx) {
  pc_timeline *tl = &ctx->tl;
  int64_t id = tl->next_id;
  for (;;) {
    pc_op *o = &tl->ops[id & (tl->cap - 1)];
    if (o->id < 0 || o->state == PC_DONE) {
      memset(o, 0, sizeof *o);
      o->id = id;
      tl->next_id++;
      return o;
    }
    if (pc_grow(ctx)) return NULL;
  }
}

static int pc_run_add(pc_ctx *ctx, int64_t id) {
  pc_timeline *tl = &ctx->tl;
  if (tl->nrun == tl->caprun) {
    int cap = 2 * tl->caprun;
    int64_t *r = realloc(tl->run, (size_t)cap * sizeof *r);
    if (!r) return pc__fail(ctx, "simulate: out of host memory for the timeline.");
    tl->run = r;
    tl->caprun = cap;
  }
  tl->run[tl->nrun++] = id;
  return 0;
}

/* the oldest command of engine e that has not started, if any */
static pc_op *pc_head(pc_timeline *tl, int e) {
  if (tl->started[e] >= tl->queued[e]) return NULL;
  return pc_find(tl, tl->qid[e][tl->started[e] % PC_MAX_QUEUE]);
}

/* the earliest start of engine e's head command, PC_NEVER while unknown */
static int64_t pc_can_start(pc_ctx *ctx, int e) {
  pc_timeline *tl = &ctx->tl;
  pc_op *h = pc_head(tl, e);
  if (!h || tl->free_at[e] == PC_NEVER) return PC_NEVER;
  int k = 0;
  for (int i = 0; i < h->ndeps; i++) /* forget the dependencies that finished */
    if (!pc__done(ctx, h->deps[i])) h->deps[k++] = h->deps[i];
  h->ndeps = k;
  if (k) return PC_NEVER;
  if (h->read_dep >= 0) { /* the MAC array must be past the call that reads */
    pc_op *r = pc_find(tl, h->read_dep);
    if (r && r->state == PC_WAITING) return PC_NEVER;
    if (r) h->not_before = PC_MAX(h->not_before, r->free_at);
    h->read_dep = -1;
  }
  for (int e = PC_ENG_DMA; e < PC_MAX_ENGINES; e++) {
    if (h->dma_reads[e] < 0) continue;
    pc_op *r = pc_find(tl, h->dma_reads[e]);
    /* a transfer has read its source once its data has moved */
    if (r && r->state != PC_RUNNING && r->state != PC_DONE) return PC_NEVER;
    if (r) h->not_before = PC_MAX(h->not_before, r->free_at);
    h->dma_reads[e] = -1;
  }
  /* a MAC call's first load may begin under the call before's last fold */
  int64_t engine_free = h->head > 0 ? PC_MIN(tl->free_at[e], tl->fold_at[e])
                                    : tl->free_at[e];
  return PC_MAX(PC_MAX(h->issue, engine_free), PC_MAX(tl->now, h->not_before));
}

/* When a MAC call's stationary operand can begin to shift into the array's
 * second register: once the call is issued, the register is free (the call
 * before is on its last fold, as pc_can_start allows) and the operations that
 * wrote the operand are done. Not after the streamed operand: a weight-stationary
 * array loads its weights through their own path (TPU v1's weight FIFO, Jouppi et
 * al., ISCA 2017), so a call whose activations come from the vector unit shifts
 * its weights in while the vector unit computes them. */
static int64_t pc_head_from(pc_ctx *ctx, const pc_op *o, int64_t before) {
  pc_timeline *tl = &ctx->tl;
  int64_t from = PC_MAX(o->issue, PC_MIN(before, tl->fold_at[o->engine]));
  for (int i = 0; i < PC_MAX_ENGINES; i++) {
    const pc_op *w = pc_find(tl, o->stat_deps[i]);
    if (w) from = PC_MAX(from, w->ready);
  }
  return from;
}

static void pc_start(pc_ctx *ctx, pc_op *o, int64_t t) {
  pc_timeline *tl = &ctx->tl;
  int e = o->engine;
  o->start = t;
  tl->qstart[e][tl->started[e] % PC_MAX_QUEUE] = t;
  tl->started[e]++;
  if (o->kind == PC_EV_DMA) {
    o->state = PC_SETUP;
    tl->free_at[e] = PC_NEVER; /* until its data has moved */
  } else {
    o->state = PC_RUNNING;
    if (o->nuse && o->busy > 0) {
      double st = pc_take_banks(ctx, o, t);
      o->busy = pc_stretch(o->busy, st);
      o->head = PC_MIN(pc_stretch(o->head, st), o->busy);
      o->last = PC_MIN(pc_stretch(o->last, st), o->busy);
    }
    int64_t before = tl->free_at[e];
    o->body = PC_MAX(t, before);
    if (o->head > 0 || o->spacing > 0) { /* a MAC call: its first fold streams once
                                          * loaded, the array is free and the
                                          * stationary register has swapped */
      int64_t loaded = PC_MIN(t, pc_head_from(ctx, o, before)) + o->head;
      int64_t s0 = PC_MAX(PC_MAX(loaded, PC_MAX(t, before)), tl->fold_at[e] + o->spacing);
      /* a head loaded while the call waited for its other operands occupies the
       * array from s0 - head (the latest it could have begun) */
      o->body = PC_MAX(PC_MIN(t, s0 - o->head), before);
      o->free_at = s0 + (o->busy - o->head);
      tl->fold_at[e] = o->free_at - o->last;
    } else {
      o->free_at = o->body + o->busy;
    }
    o->ready = PC_MAX(o->free_at + o->tail, tl->ready[e]);
    tl->free_at[e] = o->free_at;
    tl->ready[e] = o->ready;
  }
  pc_run_add(ctx, o->id);
}

/* a transfer's data has moved at t: the channel is free for the next one (it
 * issues its requests while these are in flight), the data is there after the
 * latency */
static void pc_data_done(pc_timeline *tl, pc_op *o, int64_t t) {
  int e = o->engine;
  o->state = PC_RUNNING;
  o->body = o->start;
  o->free_at = t;
  o->ready = PC_MAX(t + o->latency, tl->ready[e]);
  tl->free_at[e] = o->free_at;
  tl->ready[e] = o->ready;
}

static void pc_end_setup(pc_timeline *tl, pc_op *o, int64_t t) {
  if (o->dirs || o->nuse) { /* it shares DRAM and banks from now on */
    o->state = PC_FLOW;
    o->t_rate = t;
    o->rate = 0;
    o->fin = PC_NEVER;
    tl->rerate = 1;
  } else {
    int64_t need = (int64_t)ceil(o->left / o->cap - PC_EPS);
    pc_data_done(tl, o, t + PC_MAX(need, 1));
  }
}

static void pc_retire(pc_ctx *ctx, pc_op *o) {
  pc_timeline *tl = &ctx->tl;
  o->state = PC_DONE;
  tl->last = PC_MAX(tl->last, o->ready);
  if (ctx->quiet) return;
  ctx->stats.busy[o->engine] += o->free_at - o->body;
  ctx->stats.ops[o->engine]++;
  if (o->event >= 0) {
    ctx->events[o->event].start = o->body;
    ctx->events[o->event].end = o->free_at;
  }
}

/* Max-min fair rates of the transfers in their data phase at t (progressive
 * filling): raise all rates together; a transfer stops at its own cap, and every
 * transfer using a resource stops when that resource fills. The resources: DRAM's
 * bytes per cycle (and its read and write caps), used by a transfer with
 * coefficient 1; each SRAM bank, used with the transfer's share of bytes there,
 * its bandwidth less what the engines hold. Repeat with the others. */
static void pc_share(pc_ctx *ctx, int64_t t) {
  pc_timeline *tl = &ctx->tl;
  const pc_level *D = &ctx->spec.level[0];
  pc_op *f[PC_MAX_ENGINES];
  int n = 0;
  for (int i = 0; i < tl->nrun; i++) {
    pc_op *o = pc_find(tl, tl->run[i]);
    if (o->state == PC_FLOW && n < PC_MAX_ENGINES) f[n++] = o;
  }
  enum { NRES = 3 + PC_MAX_LEVELS * PC_MAX_BANKS }; /* DRAM's three, the banks */
  double cap[NRES], used[NRES], weight[NRES], share[NRES];
  short map[PC_MAX_LEVELS * PC_MAX_BANKS], slot[PC_MAX_ENGINES][PC_MAX_USE];
  memset(map, -1, sizeof map);
  cap[0] = D->bytes_per_cycle;
  cap[1] = D->read_bytes_per_cycle > 0 ? D->read_bytes_per_cycle : INFINITY;
  cap[2] = D->write_bytes_per_cycle > 0 ? D->write_bytes_per_cycle : INFINITY;
  int nres = 3;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < f[i]->nuse; k++) {
      int r = f[i]->use_res[k];
      if (map[r] < 0) {
        map[r] = (short)nres;
        cap[nres++] = PC_MAX(0.0, pc_bank_rate(ctx, r) - tl->held[0][r] -
                                      tl->held[1][r]);
      }
      slot[i][k] = map[r];
    }
  for (int k = 0; k < nres; k++) used[k] = 0;
  int fixed[PC_MAX_ENGINES] = {0}, left = n;
  while (left > 0) {
    for (int k = 0; k < nres; k++) weight[k] = 0;
    for (int i = 0; i < n; i++) {
      if (fixed[i]) continue;
      int d = f[i]->dirs;
      weight[0] += d ? 1 : 0;
      weight[1] += d & 1;
      weight[2] += (d >> 1) & 1;
      for (int k = 0; k < f[i]->nuse; k++) weight[slot[i][k]] += f[i]->use_a[k];
    }
    double level = INFINITY;
    for (int k = 0; k < nres; k++) {
      share[k] = weight[k] > 0 ? PC_MAX(0.0, (cap[k] - used[k]) / weight[k])
                               : INFINITY;
      level = PC_MIN(level, share[k]);
    }
    for (int i = 0; i < n; i++)
      if (!fixed[i]) level = PC_MIN(level, f[i]->cap);
    for (int i = 0; i < n; i++) {
      if (fixed[i]) continue;
      int d = f[i]->dirs, full = (d && share[0] <= level + PC_EPS) ||
                                 ((d & 1) && share[1] <= level + PC_EPS) ||
                                 ((d & 2) && share[2] <= level + PC_EPS);
      for (int k = 0; k < f[i]->nuse && !full; k++)
        full = f[i]->use_a[k] > 0 && share[slot[i][k]] <= level + PC_EPS;
      if (!full && f[i]->cap > level + PC_EPS) continue;
      double rate = PC_MIN(level, f[i]->cap);
      f[i]->rate = rate;
      fixed[i] = 1;
      left--;
      if (d) used[0] += rate;
      if (d & 1) used[1] += rate;
      if (d & 2) used[2] += rate;
      for (int k = 0; k < f[i]->nuse; k++) used[slot[i][k]] += f[i]->use_a[k] * rate;
    }
  }
  for (int i = 0; i < n; i++) {
    pc_op *o = f[i];
    if (o->rate <= PC_EPS) {
      o->fin = PC_NEVER;
      continue;
    }
    int64_t need = (int64_t)ceil(o->left / o->rate - PC_EPS);
    o->fin = t + PC_MAX(need, 1);
  }
}

/* the time of the next event, PC_NEVER when nothing is left to happen */
static int64_t pc_next(pc_ctx *ctx) {
  pc_timeline *tl = &ctx->tl;
  int64_t t = PC_NEVER;
  for (int i = 0; i < tl->nrun; i++) {
    pc_op *o = pc_find(tl, tl->run[i]);
    int64_t at = o->state == PC_SETUP ? o->start + o->setup
                 : o->state == PC_FLOW ? o->fin
                 : o->holds            ? o->free_at
                                       : o->ready;
    t = PC_MIN(t, at);
  }
  for (int e = 1; e < ctx->stats.nengines; e++) t = PC_MIN(t, pc_can_start(ctx, e));
  return t;
}

/* everything that happens at cycle t */
static void pc_process(pc_ctx *ctx, int64_t t) {
  pc_timeline *tl = &ctx->tl;
  tl->now = t;
  for (int i = 0; i < tl->nrun; i++) {
    pc_op *o = pc_find(tl, tl->run[i]);
    if (o->state != PC_FLOW) continue;
    o->left -= o->rate * (double)(t - o->t_rate);
    o->t_rate = t;
  }
  int changed;
  do {
    changed = 0;
    for (int i = 0; i < tl->nrun;) {
      pc_op *o = pc_find(tl, tl->run[i]);
      if (o->state == PC_SETUP && o->start + o->setup <= t) {
        pc_end_setup(tl, o, t);
        changed = 1;
      }
      if (o->state == PC_FLOW && o->fin <= t) {
        o->left = 0;
        pc_data_done(tl, o, t);
        tl->rerate = changed = 1;
      }
      if (o->state == PC_RUNNING && o->holds && o->free_at <= t) {
        pc_release_banks(tl, o);
        changed = 1;
      }
      if (o->state == PC_RUNNING && o->ready <= t) {
        pc_retire(ctx, o);
        tl->run[i] = tl->run[--tl->nrun];
        changed = 1;
        continue;
      }
      i++;
    }
    for (int e = 1; e < ctx->stats.nengines; e++)
      if (pc_can_start(ctx, e) <= t) {
        pc_start(ctx, pc_head(tl, e), t);
        changed = 1;
      }
  } while (changed);
  if (tl->rerate) {
    pc_share(ctx, t);
    tl->rerate = 0;
  }
}

static void pc_run_to(pc_ctx *ctx, int64_t until) {
  for (;;) {
    int64_t t = pc_next(ctx);
    if (t > until) break;
    pc_process(ctx, t);
  }
  if (ctx->tl.now < until) ctx->tl.now = until;
}

void pc__advance(pc_ctx *ctx) { pc_run_to(ctx, ctx->scalar_time); }

int64_t pc__wait_ops(pc_ctx *ctx, const int64_t *ids) {
  int ne = ctx->stats.nengines;
  for (;;) {
    int busy = 0;
    for (int e = 0; e < ne; e++) busy |= !pc__done(ctx, ids[e]);
    if (!busy) break;
    int64_t t = pc_next(ctx);
    if (t == PC_NEVER) break; /* cannot happen: every operation can finish */
    pc_process(ctx, t);
  }
  int64_t end = 0;
  for (int e = 0; e < ne; e++) {
    pc_op *o = pc_find(&ctx->tl, ids[e]);
    if (o) end = PC_MAX(end, o->ready);
  }
  return end;
}

int64_t pc__forecast(pc_ctx *ctx, const int64_t *ids) {
  pc_timeline saved = ctx->tl;
  pc_op *ops = malloc((size_t)saved.cap * sizeof *ops);
  int64_t *run = malloc((size_t)saved.caprun * sizeof *run);
  if (!ops || !run) {
    free(ops);
    free(run);
    return -1;
  }
  memcpy(ops, saved.ops, (size_t)saved.cap * sizeof *ops);
  memcpy(run, saved.run, (size_t)saved.caprun * sizeof *run);
  ctx->tl.ops = ops;
  ctx->tl.run = run;
  ctx->quiet = 1;
  int64_t end = pc__wait_ops(ctx, ids);
  ctx->quiet = 0;
  free(ctx->tl.ops);
  free(ctx->tl.run);
  ctx->tl = saved;
  return end;
}

int64_t pc__drain(pc_ctx *ctx) {
  for (;;) {
    int64_t t = pc_next(ctx);
    if (t == PC_NEVER) break;
    pc_process(ctx, t);
  }
  return ctx->tl.last;
}

/* Whether channel c's queue holds a store to DRAM that has not started (it
 * waits at the queue's head for the compute that writes its data). */
static int pc_store_waits(pc_timeline *tl, int c) {
  int e = PC_ENG_DMA + c;
  for (int64_t k = tl->started[e]; k < tl->queued[e]; k++) {
    pc_op *o = pc_find(tl, tl->qid[e][k % PC_MAX_QUEUE]);
    if (o && (o->dirs & 2) && o->state == PC_WAITING) return 1;
  }
  return 0;
}

/* The channel that frees first were every operation to run alone (DRAM not
 * shared): a choice made at issue, when the shared timeline is not known yet.
 * With two channels or more, the stores to DRAM (`dirs` bit 1) take the last
 * half of them, and every other transfer any channel with no store waiting in
 * its queue (the first half at least): a store waits at its channel's head for
 * the compute that writes its data, and a load queued behind it would too. */
int pc__pick_channel(pc_ctx *ctx, int dirs) {
  pc_timeline *tl = &ctx->tl;
  const int64_t *f = &tl->est_free[PC_ENG_DMA];
  int n = ctx->spec.channels, half = n - n / 2, best = -1;
  for (int c = 0; c < n; c++) {
    int ok = n < 2                ? 1
             : (dirs & 2)         ? c >= half
             : c < half           ? 1
                                  : !pc_store_waits(tl, c);
    if (ok && (best < 0 || f[c] < f[best])) best = c;
  }
  return best;
}

/* the estimate behind pc__pick_channel: start after the engine and the
 * dependencies as estimated, then `busy` cycles, results `tail` later */
static void pc_estimate(pc_ctx *ctx, pc_op *o, int64_t busy, int64_t tail) {
  pc_timeline *tl = &ctx->tl;
  int e = o->engine;
  o->est_start = PC_MAX(o->est_start, tl->est_free[e]);
  tl->est_free[e] = o->est_start + busy;
  o->est_ready = tl->est_free[e] + tail;
}

/* When the engine's command queue is full the scalar core waits until the oldest
 * queued command starts; it spends issue_cycles, then the operation waits for its
 * engine and for the unfinished operations whose bytes it touches. */
static pc_op *pc_begin(pc_ctx *ctx, int engine, const pc_range *acc, int nacc,
                       int pipelined) {
  pc_timeline *tl = &ctx->tl;
  int64_t q = ctx->spec.queue_depth, k = tl->queued[engine];
  if (k >= q) {
    int64_t idx = k - q;
    while (tl->started[engine] <= idx) {
      int64_t t = pc_next(ctx);
      if (t == PC_NEVER) break;
      pc_process(ctx, t);
    }
    int64_t t = tl->qstart[engine][idx % PC_MAX_QUEUE];
    if (t > ctx->scalar_time) {
      pc__trace(ctx, PC_ENG_SCALAR, PC_EV_WAIT, ctx->scalar_time, t, 0, -1, -1,
                "queue full");
      ctx->scalar_time = t;
    }
  }
  int64_t issue = ctx->spec.issue_cycles;
  ctx->scalar_time += issue;
  ctx->stats.busy[PC_ENG_SCALAR] += issue;
  pc__advance(ctx); /* keeps the unfinished operations few */
  pc_op *o = pc_new_op(ctx);
  if (!o) return NULL;
  o->engine = engine;
  o->issue = ctx->scalar_time;
  o->state = PC_WAITING;
  /* per engine, the latest unfinished op it waits for; `own`: those of the
   * pipelined ranges, where the engine's own earlier ops are ahead in its pipe */
  int64_t ids[PC_MAX_ENGINES], own[PC_MAX_ENGINES], reads[PC_MAX_ENGINES];
  int64_t dma_reads[PC_MAX_ENGINES];
  pc__no_ops(dma_reads);
  pc__no_ops(ids);
  pc__no_ops(own);
  /* a write waits for earlier writes' results, but for the MAC array's reads only
   * until the array is past them: it reads its operands as they stream in, before
   * its results leave (the other engines' reads end with their results) */
  int64_t mac_reads = -1;
  for (int i = 0; i < nacc; i++) {
    const pc_buf *b = &ctx->bufs[acc[i].buf];
    if (i >= pipelined) {
      pc__users(ctx, b, &acc[i], acc[i].is_write, own);
      continue;
    }
    pc__users(ctx, b, &acc[i], 0, ids);
    if (!acc[i].is_write) continue;
    pc__no_ops(reads);
    pc__readers(ctx, b, &acc[i], reads);
    mac_reads = PC_MAX(mac_reads, reads[PC_ENG_MAC]);
    reads[PC_ENG_MAC] = -1;
    for (int e = PC_ENG_DMA; e < PC_MAX_ENGINES; e++) { /* see pc_can_start */
      dma_reads[e] = PC_MAX(dma_reads[e], reads[e]);
      reads[e] = -1;
    }
    for (int e = 0; e < PC_MAX_ENGINES; e++) ids[e] = PC_MAX(ids[e], reads[e]);
  }
  for (int e = 0; e < PC_MAX_ENGINES; e++)
    if (e != engine) ids[e] = PC_MAX(ids[e], own[e]);
  pc__no_ops(o->stat_deps); /* see pc_head_from: who wrote what the PEs hold */
  if (engine == PC_ENG_MAC && nacc >= 2) {
    int held = ctx->spec.dataflow == PC_DF_INPUT_STATIONARY ? 0 : 1;
    pc__users(ctx, &ctx->bufs[acc[held].buf], &acc[held], 0, o->stat_deps);
  }
  o->est_start = o->issue;
  o->read_dep = -1;
  if (mac_reads > ids[PC_ENG_MAC] && !pc__done(ctx, mac_reads)) {
    o->read_dep = mac_reads; /* else the MAC's results are awaited anyway */
    o->est_start = PC_MAX(o->est_start, pc_find(tl, mac_reads)->est_ready);
  }
  for (int e = 0; e < ctx->stats.nengines; e++)
    if (!pc__done(ctx, ids[e])) {
      o->deps[o->ndeps++] = ids[e];
      o->est_start = PC_MAX(o->est_start, pc_find(tl, ids[e])->est_ready);
    }
  pc__no_ops(o->dma_reads);
  for (int e = PC_ENG_DMA; e < PC_MAX_ENGINES; e++) {
    if (dma_reads[e] <= ids[e] || pc__done(ctx, dma_reads[e]))
      continue; /* none, or its results are awaited anyway */
    o->dma_reads[e] = dma_reads[e];
    o->est_start = PC_MAX(o->est_start, pc_find(tl, dma_reads[e])->est_ready);
  }
  pc__record(ctx, acc, nacc, o->id, engine);
  tl->qid[engine][k % PC_MAX_QUEUE] = o->id;
  tl->queued[engine]++;
  return o;
}

/* an engine operation's full-speed bytes per cycle at its banks: `bytes[i]` of
 * range i over its `busy` cycles */
static void pc_engine_uses(pc_ctx *ctx, pc_op *o, const pc_range *acc, int nacc,
                           const double *bytes, int64_t busy) {
  if (!bytes || busy <= 0) return;
  for (int i = 0; i < nacc; i++)
    pc_add_uses(ctx, o, &acc[i], bytes[i] / (double)busy);
}

void pc__submit(pc_ctx *ctx, int engine, const pc_range *acc, int nacc,
                int64_t busy, int64_t tail, int kind, int64_t amount,
                const double *bytes, const char *label) {
  pc_op *o = pc_begin(ctx, engine, acc, nacc, nacc);
  if (!o) return;
  pc_engine_uses(ctx, o, acc, nacc, bytes, busy);
  o->busy = busy;
  o->tail = tail;
  pc_estimate(ctx, o, busy, tail);
  o->kind = kind;
  o->amount = amount;
  o->event = pc__trace(ctx, engine, kind, 0, 0, amount, -1, -1, label);
}

void pc__submit_mac(pc_ctx *ctx, const pc_range *acc, int nacc,
                    const pc_mac_timing *t, int64_t amount, const char *label) {
  pc_op *o = pc_begin(ctx, PC_ENG_MAC, acc, nacc, t->pipelined);
  if (!o) return;
  pc_engine_uses(ctx, o, acc, nacc, t->bytes, t->busy);
  o->busy = t->busy;
  o->head = t->head;
  o->tail = t->tail;
  o->spacing = t->spacing;
  o->last = t->last;
  pc_estimate(ctx, o, t->busy, t->tail);
  o->kind = PC_EV_MAC;
  o->amount = amount;
  o->event = pc__trace(ctx, PC_ENG_MAC, PC_EV_MAC, 0, 0, amount, -1, -1, label);
}

void pc__submit_dma(pc_ctx *ctx, int engine, const pc_range *acc, int nacc,
                    int64_t setup, double bytes, double cap, int dirs,
                    int64_t latency, int src, int dst, const char *label) {
  pc_op *o = pc_begin(ctx, engine, acc, nacc, nacc);
  if (!o) return;
  o->kind = PC_EV_DMA;
  for (int i = 0; i < nacc; i++) pc_add_uses(ctx, o, &acc[i], 1.0);
  o->setup = setup;
  o->left = bytes;
  o->cap = cap;
  o->dirs = dirs;
  o->latency = latency;
  const pc_level *D = &ctx->spec.level[0];
  double alone = dirs ? PC_MIN(cap, D->bytes_per_cycle) : cap;
  /* alone, a load (store) is also capped by DRAM's read (write) split */
  if ((dirs & 1) && D->read_bytes_per_cycle > 0)
    alone = PC_MIN(alone, D->read_bytes_per_cycle);
  if ((dirs & 2) && D->write_bytes_per_cycle > 0)
    alone = PC_MIN(alone, D->write_bytes_per_cycle);
  pc_estimate(ctx, o, setup + (int64_t)ceil(bytes / alone - PC_EPS), latency);
  o->amount = (int64_t)bytes;
  o->event = pc__trace(ctx, engine, PC_EV_DMA, 0, 0, o->amount, src, dst, label);
}
