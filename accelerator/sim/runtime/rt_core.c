/* rt_core.c: context, errors, buffers, hazards, scalar core, trace.
 *
 * Timing model (see docs/accelerator.md): an asynchronous operation is issued by
 * the scalar core at its current time (costing issue_cycles of it), and starts
 * when its engine is free and the byte ranges it reads are written
 * (read-after-write) and the ranges it writes are no longer read or written by
 * earlier operations (write-after-read, -after-write). The hazards here name the
 * operations (ids); rt_timeline.c resolves their times when the scalar core needs
 * one. Everything is integer cycles and deterministic.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "polyc_rt.h"
#include "rt_internal.h"

/* ---- errors ------------------------------------------------------------------ */

int pc__fail(pc_ctx *ctx, const char *fmt, ...) {
  if (!ctx->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    ctx->failed = 1;
  }
  if (ctx->armed) longjmp(ctx->jmp, 1);
  return -1;
}

const char *pc_error(pc_ctx *ctx) { return ctx->failed ? ctx->error : NULL; }

int64_t pc_now(pc_ctx *ctx) { return ctx->scalar_time; }

static void pc_copy_name(char *dst, const char *src, size_t cap) {
  snprintf(dst, cap, "%s", src ? src : "?");
}

/* ---- context ----------------------------------------------------------------- */

pc_ctx *pc_create(const pc_spec *spec) {
  pc_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->spec = *spec;
  int nl = spec->nlevels;
  if (nl < 2 || nl > PC_MAX_LEVELS || spec->channels < 1 ||
      spec->channels > PC_MAX_CHANNELS || spec->queue_depth < 1 ||
      spec->queue_depth > PC_MAX_QUEUE) {
    pc__fail(ctx, "pc_create: the spec has %d levels and %d DMA channels because "
                 "it was not filled from a validated config. Use "
                 "accelerator.load_config.", nl, spec->channels);
    return ctx;
  }
  for (int l = 1; l < nl; l++) {
    /* anonymous pages: zero and only backed once touched, whatever the size */
    void *m = mmap(NULL, (size_t)spec->level[l].capacity, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ctx->mem[l] = m == MAP_FAILED ? NULL : m;
    if (!ctx->mem[l]) {
      pc__fail(ctx, "pc_create: could not allocate %lld bytes for level %s because "
                   "the host is out of memory. Use a smaller config.",
              (long long)spec->level[l].capacity, spec->level[l].name);
      return ctx;
    }
  }
  ctx->stats.nengines = PC_ENG_DMA + spec->channels;
  for (int l = 0; l < PC_MAX_LEVELS; l++)
    for (int e = 0; e < PC_MAX_ENGINES; e++) ctx->freed_floor[l][e] = -1;
  pc__timeline_init(ctx);
  return ctx; /* the trace grows on demand, up to trace_limit events */
}

void pc_destroy(pc_ctx *ctx) {
  if (!ctx) return;
  for (int l = 1; l < ctx->spec.nlevels && l < PC_MAX_LEVELS; l++)
    if (ctx->mem[l]) munmap(ctx->mem[l], (size_t)ctx->spec.level[l].capacity);
  free(ctx->bufs);
  free(ctx->stmts);
  pc__timeline_free(ctx);
  free(ctx->events);
  free(ctx);
}

/* ---- trace ------------------------------------------------------------------- */

int64_t pc__trace(pc_ctx *ctx, int engine, int kind, int64_t start, int64_t end,
                  int64_t amount, int src, int dst, const char *label) {
  int64_t n = ctx->stats.events;
  if (n == ctx->capevents && n < ctx->spec.trace_limit) {
    int64_t cap = n ? 2 * n : 256;
    if (cap > ctx->spec.trace_limit) cap = ctx->spec.trace_limit;
    pc_event *ev = realloc(ctx->events, (size_t)cap * sizeof *ev);
    if (ev) {
      ctx->events = ev;
      ctx->capevents = cap;
    }
  }
  if (n < ctx->capevents) {
    pc_event *e = &ctx->events[ctx->stats.events++];
    e->start = start;
    e->end = end;
    e->engine = engine;
    e->kind = kind;
    e->amount = amount;
    e->src_level = src;
    e->dst_level = dst;
    pc_copy_name(e->label, label, sizeof e->label);
    return n;
  }
  ctx->stats.events_dropped++;
  return -1;
}

const pc_event *pc_events(pc_ctx *ctx, int64_t *count) {
  *count = ctx->stats.events;
  return ctx->events;
}

/* ---- buffers ----------------------------------------------------------------- */

static int pc_new_buf(pc_ctx *ctx) {
  for (int i = 0; i < ctx->nbufs; i++)
    if (!ctx->bufs[i].live) return i;
  if (ctx->nbufs == ctx->capbufs) {
    int cap = ctx->capbufs ? 2 * ctx->capbufs : 16;
    pc_buf *b = realloc(ctx->bufs, (size_t)cap * sizeof *b);
    if (!b) return pc__fail(ctx, "pc_alloc: out of host memory for buffers because "
                                "%d are live. Free buffers you no longer use.",
                           ctx->nbufs);
    ctx->bufs = b;
    ctx->capbufs = cap;
  }
  return ctx->nbufs++;
}

/* the whole of buffer `b`, as a range */
static pc_range pc_whole(const pc_ctx *ctx, int buf) {
  return (pc_range){buf, 0, 0, ctx->bufs[buf].bytes, 0, 0, 0};
}

static int pc_valid_buf(pc_ctx *ctx, int buf, const char *op) {
  if (buf < 0 || buf >= ctx->nbufs || !ctx->bufs[buf].live)
    return pc__fail(ctx, "%s: buffer %d is not live because it was never allocated "
                        "or was freed. Allocate it with pc_alloc/pc_bind first.",
                   op, buf);
  return 0;
}

/* a new live buffer `name` of `bytes` at `offset` in `level`, its bytes at
 * `base`, no operation on its space yet (-1: out of buffer slots) */
static int pc_add_buf(pc_ctx *ctx, const char *name, int level, int64_t offset,
                      int64_t bytes, void *base) {
  int id = pc_new_buf(ctx);
  if (id < 0) return -1;
  pc_buf *b = &ctx->bufs[id];
  memset(b, 0, sizeof *b);
  pc_copy_name(b->name, name, sizeof b->name);
  b->level = level;
  b->live = 1;
  b->offset = offset;
  b->bytes = bytes;
  b->base = base;
  for (int e = 0; e < PC_MAX_ENGINES; e++) b->floor_w[e] = b->floor_r[e] = -1;
  return id;
}

/* the live buffer of `level` that shares a byte with [offset, offset + bytes),
 * or -1 */
static int pc_overlapping(pc_ctx *ctx, int level, int64_t offset, int64_t bytes) {
  for (int i = 0; i < ctx->nbufs; i++) {
    pc_buf *o = &ctx->bufs[i];
    if (o->live && o->level == level && o->offset < offset + bytes &&
        offset < o->offset + o->bytes)
      return i;
  }
  return -1;
}

int pc_bind(pc_ctx *ctx, const char *name, void *data, int64_t bytes) {
  if (ctx->failed) return -1;
  pc_level *dram = &ctx->spec.level[0];
  if (ctx->dram_bound + bytes > dram->capacity)
    return pc__fail(ctx, "pc_bind: array %s (%lld bytes) does not fit in DRAM "
                        "because %lld of its %lld bytes are already bound. Use a "
                        "config with more DRAM or smaller arrays.",
                   name, (long long)bytes, (long long)ctx->dram_bound,
                   (long long)dram->capacity);
  int id = pc_add_buf(ctx, name, 0, ctx->dram_bound, bytes, data);
  if (id >= 0) ctx->dram_bound += bytes;
  return id;
}

static void pc_take(pc_ctx *ctx, int id);

/* An array bound at its home on chip: an intermediate for the whole run, or a
 * weight fetched ahead, bound before its first chunk and freed after its last
 * reader (its bytes may have held buffers released before: it waits for their
 * users, as pc_alloc's buffers do). */
int pc_bind_at(pc_ctx *ctx, const char *name, void *data, int64_t bytes, int level,
               int64_t offset) {
  if (level == 0) return pc_bind(ctx, name, data, bytes);
  if (ctx->failed) return -1;
  if (level < 0 || level >= ctx->spec.nlevels)
    return pc__fail(ctx, "pc_bind_at: array %s asks for level %d because of a bad "
                        "level index; levels are 0..%d. Pass one of them.",
                   name, level, ctx->spec.nlevels - 1);
  pc_level *L = &ctx->spec.level[level];
  if (offset < 0 || offset + bytes > L->capacity || offset % L->alignment)
    return pc__fail(ctx, "pc_bind_at: array %s [%lld, %lld) does not fit in %s "
                        "because the level holds %lld bytes at alignment %lld. "
                        "Plan its home inside the level.",
                   name, (long long)offset, (long long)(offset + bytes), L->name,
                   (long long)L->capacity, (long long)L->alignment);
  int o = pc_overlapping(ctx, level, offset, bytes);
  if (o >= 0)
    return pc__fail(ctx, "pc_bind_at: array %s [%lld, %lld) overlaps live "
                        "buffer %s in %s because both are there at once. Plan "
                        "the homes apart.",
                   name, (long long)offset, (long long)(offset + bytes),
                   ctx->bufs[o].name, L->name);
  int id = pc_add_buf(ctx, name, level, offset, bytes, data);
  if (id >= 0) pc_take(ctx, id);
  return id;
}

/* per engine, the latest operation still using released space in [lo, hi) */
static void pc_freed_users(pc_ctx *ctx, int level, int64_t lo, int64_t hi,
                           int64_t *ids) {
  for (int e = 0; e < PC_MAX_ENGINES; e++) ids[e] = ctx->freed_floor[level][e];
  for (int i = 0; i < ctx->nfreed[level]; i++) {
    pc_span *s = &ctx->freed[level][i];
    if (s->lo < hi && lo < s->hi) ids[s->engine] = PC_MAX(ids[s->engine], s->op);
  }
}

int pc_alloc(pc_ctx *ctx, int level, int64_t offset, int64_t bytes,
             const char *name) {
  if (ctx->failed) return -1;
  if (level <= 0 || level >= ctx->spec.nlevels)
    return pc__fail(ctx, "pc_alloc: buffer %s asks for level %d because of a bad "
                        "level index; on-chip levels are 1..%d. Allocate in SRAM.",
                   name, level, ctx->spec.nlevels - 1);
  pc_level *L = &ctx->spec.level[level];
  if (bytes <= 0 || offset < 0 || offset + bytes > L->capacity)
    return pc__fail(ctx, "pc_alloc: buffer %s [%lld, %lld) does not fit in %s because "
                        "the level holds %lld bytes. Plan it inside the level.",
                   name, (long long)offset, (long long)(offset + bytes), L->name,
                   (long long)L->capacity);
  if (offset % L->alignment)
    return pc__fail(ctx, "pc_alloc: buffer %s at offset %lld in %s is misaligned "
                        "because the level's alignment is %lld bytes. Round the "
                        "offset up to a multiple of %lld.",
                   name, (long long)offset, L->name, (long long)L->alignment,
                   (long long)L->alignment);
  int i = pc_overlapping(ctx, level, offset, bytes);
  if (i >= 0) {
    pc_buf *o = &ctx->bufs[i];
    return pc__fail(ctx, "pc_alloc: buffer %s [%lld, %lld) overlaps live buffer "
                        "%s [%lld, %lld) in %s because both are allocated at "
                        "once. Free %s first or move one of them.",
                   name, (long long)offset, (long long)(offset + bytes), o->name,
                   (long long)o->offset, (long long)(o->offset + o->bytes),
                   L->name, o->name);
  }
  int id = pc_add_buf(ctx, name, level, offset, bytes, ctx->mem[level] + offset);
  if (id < 0) return -1;
  pc_buf *b = &ctx->bufs[id];
  if (!ctx->spec.timing_only) memset(b->base, PC_POISON, (size_t)bytes);
  pc_take(ctx, id);
  return id;
}

/* A new on-chip buffer takes its bytes: space released by earlier buffers may
 * still be read or written, so it waits for their users; and it counts in the
 * level's live bytes (the peak is what is live at once, not the highest
 * address: the planner puts a small zero block at the top of a level). */
static void pc_take(pc_ctx *ctx, int id) {
  pc_buf *b = &ctx->bufs[id];
  int level = b->level;
  pc_freed_users(ctx, level, b->offset, b->offset + b->bytes, b->floor_w);
  memcpy(b->floor_r, b->floor_w, sizeof b->floor_r);
  ctx->live_sram[level] += b->bytes;
  ctx->stats.peak_sram[level] =
      PC_MAX(ctx->stats.peak_sram[level], ctx->live_sram[level]);
}

void pc_zero_fill(pc_ctx *ctx, int buf) {
  if (ctx->failed || pc_valid_buf(ctx, buf, "pc_zero_fill")) return;
  pc_buf *b = &ctx->bufs[buf];
  if (b->level == 0) {
    pc__fail(ctx, "pc_zero_fill: buffer %s is a DRAM array because it was bound "
                 "with pc_bind. Fill only buffers made by pc_alloc.", b->name);
    return;
  }
  if (!ctx->spec.timing_only) memset(b->base, 0, (size_t)b->bytes);
}

void pc_free(pc_ctx *ctx, int buf) {
  if (ctx->failed || pc_valid_buf(ctx, buf, "pc_free")) return;
  pc_buf *b = &ctx->bufs[buf];
  if (b->level == 0) {
    pc__fail(ctx, "pc_free: buffer %s is a DRAM array because it was bound with "
                 "pc_bind. Free only buffers made by pc_alloc.", b->name);
    return;
  }
  int l = b->level;
  int64_t ids[PC_MAX_ENGINES];
  pc__no_ops(ids);
  pc_range all = pc_whole(ctx, buf);
  pc__users(ctx, b, &all, 1, ids);
  for (int e = 0; e < ctx->stats.nengines; e++) {
    if (pc__done(ctx, ids[e])) continue;
    pc_span *f = ctx->freed[l];
    int n = 0;
    for (int i = 0; i < ctx->nfreed[l]; i++) /* space of finished users is free */
      if (!pc__done(ctx, f[i].op)) f[n++] = f[i];
    if (n == PC_FREED) { /* forget the oldest into the level floor */
      int old = 0;
      for (int i = 1; i < n; i++)
        if (f[i].op < f[old].op) old = i;
      int64_t *fl = &ctx->freed_floor[l][f[old].engine];
      *fl = PC_MAX(*fl, f[old].op);
      f[old] = f[--n];
    }
    f[n++] = (pc_span){b->offset, b->offset + b->bytes, ids[e], e, 0, 0, 0};
    ctx->nfreed[l] = n;
  }
  ctx->live_sram[l] -= b->bytes;
  b->live = 0;
}

/* pc_ptr and pc_ready keep working after an error, to inspect the state */
void *pc_ptr(pc_ctx *ctx, int buf) {
  if (pc_valid_buf(ctx, buf, "pc_ptr")) return NULL;
  return ctx->bufs[buf].base;
}

/* a forecast: a transfer issued later may still move it */
int64_t pc_ready(pc_ctx *ctx, int buf) {
  if (pc_valid_buf(ctx, buf, "pc_ready")) return 0;
  int64_t ids[PC_MAX_ENGINES];
  pc__no_ops(ids);
  pc_range all = pc_whole(ctx, buf);
  pc__users(ctx, &ctx->bufs[buf], &all, 1, ids);
  return pc__forecast(ctx, ids);
}

/* ---- hazards ----------------------------------------------------------------- */

/* The bytes an access or a remembered span touches: [lo, hi), and with period
 * > 0 only those x with (x - arc) mod period < len (pc_range). */
typedef struct {
  int64_t lo, hi, period, arc, len;
} pc_set;

static pc_set pc_of_span(const pc_span *s) {
  return (pc_set){s->lo, s->hi, s->period, s->arc, s->arc_len};
}

static pc_set pc_of_range(const pc_range *r) {
  return (pc_set){r->lo, r->hi, r->period, r->arc, r->arc_len};
}

static int64_t pc_mod(int64_t x, int64_t m) {
  int64_t r = x % m;
  return r < 0 ? r + m : r;
}

/* the bytes of periodic `r`'s arcs below byte t, counted from an arc far
 * enough below: (t - arc) // period arcs whole, and the part of the one t is in */
static int64_t pc_arc_bytes_below(const pc_range *r, int64_t t) {
  int64_t m = pc_mod(t - r->arc, r->period);
  return (t - r->arc - m) / r->period * r->arc_len + PC_MIN(m, r->arc_len);
}

int64_t pc__range_bytes(const pc_range *r) {
  if (r->hi <= r->lo) return 0;
  if (r->period <= 0) return r->hi - r->lo;
  return pc_arc_bytes_below(r, r->hi) - pc_arc_bytes_below(r, r->lo);
}

/* whether periodic `a` touches a byte of the window [lo, hi) (lo < hi) */
static int pc_arc_meets(const pc_set *a, int64_t lo, int64_t hi) {
  if (a->period <= 0 || hi - lo >= a->period) return 1;
  int64_t d = pc_mod(lo - a->arc, a->period);
  return d < a->len || d + (hi - lo) > a->period;
}

/* whether two sets share a byte: exact for one periodic set against a range,
 * else never false where they do */
static int pc_meets(const pc_set *a, const pc_set *b) {
  int64_t lo = PC_MAX(a->lo, b->lo), hi = PC_MIN(a->hi, b->hi);
  if (lo >= hi) return 0;
  if (!pc_arc_meets(a, lo, hi) || !pc_arc_meets(b, lo, hi)) return 0;
  if (a->period > 0 && a->period == b->period) /* the arcs, on one circle */
    return pc_mod(b->arc - a->arc, a->period) < a->len ||
           pc_mod(a->arc - b->arc, a->period) < b->len;
  return 1;
}

/* whether `a` holds every byte of `b` (never true where it does not) */
static int pc_holds(const pc_set *a, const pc_set *b) {
  if (!(a->lo <= b->lo && b->hi <= a->hi)) return 0;
  if (a->period <= 0) return 1;
  return a->period == b->period &&
         pc_mod(b->arc - a->arc, a->period) + b->len <= a->len;
}

/* the smallest set holding both: one arc of the same period where the two
 * arcs' union is less than a period, else their hull */
static pc_set pc_union(const pc_set *a, const pc_set *b) {
  pc_set u = {PC_MIN(a->lo, b->lo), PC_MAX(a->hi, b->hi), 0, 0, 0};
  if (a->period > 0 && a->period == b->period) {
    int64_t p = a->period;
    int64_t ab = pc_mod(b->arc - a->arc, p) + b->len; /* from a's arc, b's end */
    int64_t ba = pc_mod(a->arc - b->arc, p) + a->len;
    int64_t la = PC_MAX(a->len, ab), lb = PC_MAX(b->len, ba);
    if (PC_MIN(la, lb) < p) {
      u.period = p;
      u.arc = la <= lb ? a->arc : b->arc;
      u.len = PC_MIN(la, lb);
    }
  }
  return u;
}

static void pc_span_users(const pc_span *s, int n, const pc_set *r, int64_t *ids) {
  for (int i = 0; i < n; i++) {
    pc_set x = pc_of_span(&s[i]);
    if (pc_meets(&x, r)) ids[s[i].engine] = PC_MAX(ids[s[i].engine], s[i].op);
  }
}

void pc__readers(pc_ctx *ctx, const pc_buf *b, const pc_range *r, int64_t *ids) {
  pc_set x = pc_of_range(r);
  for (int e = 0; e < ctx->stats.nengines; e++) ids[e] = PC_MAX(ids[e], b->floor_r[e]);
  pc_span_users(b->r, b->nr, &x, ids);
}

void pc__users(pc_ctx *ctx, const pc_buf *b, const pc_range *r, int all,
               int64_t *ids) {
  pc_set x = pc_of_range(r);
  for (int e = 0; e < ctx->stats.nengines; e++) ids[e] = PC_MAX(ids[e], b->floor_w[e]);
  pc_span_users(b->w, b->nw, &x, ids);
  if (all) pc__readers(ctx, b, r, ids);
}

/* Drop the ranges whose operations finished (no later operation can start before
 * their end) and those `nw` covers and outlasts: any when `any` (a write waits for
 * every earlier user of its bytes), else those of its own engine (results are
 * ready in issue order). */
static void pc_prune(pc_ctx *ctx, pc_span *s, int *n, pc_span nw, int any) {
  int k = 0;
  pc_set w = pc_of_span(&nw);
  for (int i = 0; i < *n; i++) {
    pc_set x = pc_of_span(&s[i]);
    int covered = pc_holds(&w, &x);
    if (pc__done(ctx, s[i].op) || (covered && (any || s[i].engine == nw.engine)))
      continue;
    s[k++] = s[i];
  }
  *n = k;
}

static void pc_merge(pc_span *into, const pc_span *s) {
  pc_set a = pc_of_span(into), b = pc_of_span(s), u = pc_union(&a, &b);
  into->lo = u.lo, into->hi = u.hi;
  into->period = u.period, into->arc = u.arc, into->arc_len = u.len;
  into->op = PC_MAX(into->op, s->op);
}

/* Remember `nw`. Ranges of one engine that share bytes with it merge into it
 * (exact: the same bytes wait for the engine's latest op, as its results are
 * ready in issue order), so many MAC calls reading parts of one slot of a
 * multi-slot buffer keep one range for the slot. When the table is full the
 * oldest range goes into the whole-buffer floor. (Merging `nw` into a range
 * it shares no byte with instead would make that range's bytes wait for the
 * latest op: a staged int8 GEMM on datacenter ran 151,815 -> 191,009 cycles,
 * its MAC calls waiting for stores of slots they do not write.) */
static void pc_remember(pc_ctx *ctx, pc_span *s, int *n, int64_t *floor, pc_span nw,
                        int any) {
  pc_prune(ctx, s, n, nw, any);
  for (int i = 0; i < *n;) {
    pc_set a = pc_of_span(&s[i]), b = pc_of_span(&nw);
    if (s[i].engine == nw.engine && pc_meets(&a, &b)) {
      pc_merge(&nw, &s[i]);
      s[i] = s[--*n];
      i = 0;
      continue;
    }
    i++;
  }
  if (*n == PC_HAZ) {
    int old = 0; /* forget the oldest into the whole-buffer floor */
    for (int i = 1; i < *n; i++)
      if (s[i].op < s[old].op) old = i;
    floor[s[old].engine] = PC_MAX(floor[s[old].engine], s[old].op);
    s[old] = s[--*n];
  }
  s[(*n)++] = nw;
}

void pc__record(pc_ctx *ctx, const pc_range *acc, int nacc, int64_t id,
                int engine) {
  for (int i = 0; i < nacc; i++) {
    pc_buf *b = &ctx->bufs[acc[i].buf];
    pc_span nw = {acc[i].lo,     acc[i].hi,  id,          engine,
                  acc[i].period, acc[i].arc, acc[i].arc_len};
    if (acc[i].is_write) {
      pc_remember(ctx, b->w, &b->nw, b->floor_w, nw, 1);
      pc_prune(ctx, b->r, &b->nr, nw, 1); /* the write waits for those reads */
    } else {
      pc_remember(ctx, b->r, &b->nr, b->floor_r, nw, 0);
    }
  }
}

int pc__check_range(pc_ctx *ctx, const pc_range *r, const char *op,
                    const char *label) {
  if (pc_valid_buf(ctx, r->buf, op)) return -1;
  pc_buf *b = &ctx->bufs[r->buf];
  if (r->lo < 0 || r->hi > b->bytes || r->lo > r->hi)
    return pc__fail(ctx, "%s %s: %s bytes [%lld, %lld) of buffer %s are outside it "
                        "because %s holds %lld bytes. Fix the offsets or the "
                        "strides of this operation.",
                   op, label ? label : "", r->is_write ? "writing" : "reading",
                   (long long)r->lo, (long long)r->hi, b->name, b->name,
                   (long long)b->bytes);
  return 0;
}

/* ---- scalar core ------------------------------------------------------------- */

int pc_stmt(pc_ctx *ctx, const pc_stmt_desc *d) {
  if (ctx->failed) return -1;
  if (d->naccess < 0 || d->naccess > PC_MAX_ACCESS)
    return pc__fail(ctx, "pc_stmt: statement %s has %d accesses because of a bad "
                        "descriptor; at most %d are supported. Split the statement.",
                   d->name, d->naccess, PC_MAX_ACCESS);
  if (ctx->nstmts == ctx->capstmts) {
    int cap = ctx->capstmts ? 2 * ctx->capstmts : 8;
    pc_stmt_info *s = realloc(ctx->stmts, (size_t)cap * sizeof *s);
    if (!s) return pc__fail(ctx, "pc_stmt: out of host memory.");
    ctx->stmts = s;
    ctx->capstmts = cap;
  }
  pc_stmt_info *s = &ctx->stmts[ctx->nstmts];
  memset(s, 0, sizeof *s);
  s->d = *d;
  pc_copy_name(s->name, d->name, sizeof s->name);
  pc_copy_name(s->iterators, d->iterators, sizeof s->iterators);
  s->d.name = s->d.iterators = NULL; /* the copies above are the names */
  const pc_spec *sp = &ctx->spec;
  int64_t cycles = sp->stmt_cycles, latency = 0;
  double ops = 0;
  for (int c = 0; c < PC_NCLASS; c++) {
    cycles += d->ops[c] * sp->scalar_cycles[c];
    ops += (double)d->ops[c];
  }
  for (int i = 0; i < d->naccess; i++) {
    int l = d->level[i];
    if (l < 0 || l >= sp->nlevels)
      return pc__fail(ctx, "pc_stmt: statement %s accesses level %d because of a bad "
                          "descriptor; levels are 0..%d.", d->name, l,
                     sp->nlevels - 1);
    const pc_level *L = &sp->level[l];
    if (d->is_write[i]) {
      s->bytes_written[l] += d->bytes[i];
      s->energy_level[l] += (double)d->bytes[i] * L->write_pj;
    } else {
      s->bytes_read[l] += d->bytes[i];
      s->energy_level[l] += (double)d->bytes[i] * L->read_pj;
      latency = PC_MAX(latency, L->latency); /* the reads are issued together */
    }
  }
  cycles += latency;
  for (int l = 0; l < sp->nlevels; l++) { /* data transfer at each level's rate */
    int64_t bytes = s->bytes_read[l] + s->bytes_written[l];
    if (bytes) cycles += (int64_t)ceil((double)bytes / sp->level[l].bytes_per_cycle);
  }
  s->cycles = cycles;
  s->energy_ops = ops * sp->scalar_pj;
  return ctx->nstmts++;
}

/* Scalar code read (write) the buffers in `reads` (`writes`) since the scalar core
 * was at `t`: none may still be written (read or written) by an asynchronous
 * operation then. */
static int pc_check_touched(pc_ctx *ctx, pc_stmt_info *s, uint64_t reads,
                            uint64_t writes) {
  for (int b = 0; b < ctx->nbufs; b++) {
    pc_buf *B = &ctx->bufs[b];
    uint64_t bit = pc_bit(b);
    if (!B->live || !((reads | writes) & bit)) continue;
    int64_t ids[PC_MAX_ENGINES], busy = 0;
    pc__no_ops(ids);
    pc_range all = pc_whole(ctx, b);
    pc__users(ctx, B, &all, (writes & bit) != 0, ids);
    for (int e = 0; e < ctx->stats.nengines; e++) busy |= !pc__done(ctx, ids[e]);
    if (!busy) continue;
    int64_t until = pc__forecast(ctx, ids);
    if (until > ctx->scalar_time)
      return pc__fail(ctx, "simulate: statement %s %s buffer %s on the scalar core "
                          "from cycle %lld while an asynchronous operation uses it "
                          "until cycle %lld, because no pc_wait preceded the scalar "
                          "code. Emit pc_wait(ctx, %s) before it.",
                     s->name, (writes & bit) ? "wrote" : "read", B->name,
                     (long long)ctx->scalar_time, (long long)until, B->name);
  }
  return 0;
}

void pc_scalar(pc_ctx *ctx, int stmt, int64_t n, uint64_t reads, uint64_t writes) {
  if (ctx->failed || n <= 0) return;
  if (stmt < 0 || stmt >= ctx->nstmts) {
    pc__fail(ctx, "pc_scalar: statement %d is not registered because pc_stmt was "
                 "not called for it. Register statements in the prologue.", stmt);
    return;
  }
  pc_stmt_info *s = &ctx->stmts[stmt];
  if (reads | writes) {
    pc__advance(ctx); /* what has finished by now */
    if (pc_check_touched(ctx, s, reads, writes)) return;
  }
  pc_stats *st = &ctx->stats;
  int64_t start = ctx->scalar_time, dt = n * s->cycles;
  ctx->scalar_time += dt;
  st->busy[PC_ENG_SCALAR] += dt;
  st->ops[PC_ENG_SCALAR] += n;
  st->scalar_instances += n;
  s->instances += n;
  st->macs += n * s->d.macs;
  for (int c = 0; c < PC_NCLASS; c++) st->scalar_ops[c] += n * s->d.ops[c];
  st->energy_scalar += (double)n * s->energy_ops;
  for (int l = 0; l < ctx->spec.nlevels; l++) {
    st->bytes_read[l] += n * s->bytes_read[l];
    st->bytes_written[l] += n * s->bytes_written[l];
    st->energy_level[l] += (double)n * s->energy_level[l];
  }
  pc__trace(ctx, PC_ENG_SCALAR, PC_EV_SCALAR, start, ctx->scalar_time, n, -1, -1,
           s->name);
}

void pc_wait(pc_ctx *ctx, int buf) {
  if (ctx->failed || pc_valid_buf(ctx, buf, "pc_wait")) return;
  int64_t ids[PC_MAX_ENGINES];
  pc__no_ops(ids);
  pc_range all = pc_whole(ctx, buf);
  pc__users(ctx, &ctx->bufs[buf], &all, 1, ids);
  int64_t t = pc__wait_ops(ctx, ids);
  if (t > ctx->scalar_time) {
    pc__trace(ctx, PC_ENG_SCALAR, PC_EV_WAIT, ctx->scalar_time, t, 0, -1, -1,
             ctx->bufs[buf].name);
    ctx->scalar_time = t;
  }
}

int pc_stmt_stats(pc_ctx *ctx, int stmt, pc_stmt_stat *out) {
  if (stmt >= 0 && stmt < ctx->nstmts) {
    const pc_stmt_info *s = &ctx->stmts[stmt];
    out->name = s->name;
    out->instances = s->instances;
    out->cycles_per_instance = s->cycles;
    out->energy_pj = s->energy_ops;
    for (int l = 0; l < PC_MAX_LEVELS; l++) {
      int in = l < ctx->spec.nlevels;
      out->bytes_read[l] = in ? s->bytes_read[l] : 0;
      out->bytes_written[l] = in ? s->bytes_written[l] : 0;
      if (in) out->energy_pj += s->energy_level[l];
    }
  }
  return ctx->nstmts;
}

static int64_t pc_engines_done(pc_ctx *ctx) {
  return PC_MAX(ctx->scalar_time, pc__drain(ctx));
}

void pc_wait_all(pc_ctx *ctx) {
  if (ctx->failed) return;
  int64_t t = pc_engines_done(ctx);
  if (t > ctx->scalar_time)
    pc__trace(ctx, PC_ENG_SCALAR, PC_EV_WAIT, ctx->scalar_time, t, 0, -1, -1, "all");
  ctx->scalar_time = t;
}

const pc_stats *pc_finish(pc_ctx *ctx) {
  ctx->stats.cycles = pc_engines_done(ctx);
  return &ctx->stats;
}

static void pc_fmt_list(char *out, size_t cap, int n, const int64_t *v) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? ", " : "", (long long)v[i]);
}

void pc_fail_access(pc_ctx *ctx, int buf, int stmt, int n, const int64_t *index,
                    const int64_t *extent, int niter, const int64_t *iters) {
  char idx[160], ext[160], inst[256];
  const char *bname = (buf >= 0 && buf < ctx->nbufs) ? ctx->bufs[buf].name : "?";
  pc_fmt_list(idx, sizeof idx, n, index);
  pc_fmt_list(ext, sizeof ext, n, extent);
  inst[0] = 0;
  const char *sname = "?";
  if (stmt >= 0 && stmt < ctx->nstmts) { /* S0[i=1, j=2] */
    pc_stmt_info *s = &ctx->stmts[stmt];
    sname = s->name;
    size_t k = 0;
    const char *p = s->iterators;
    for (int i = 0; i < niter && k < sizeof inst; i++) {
      const char *q = strchr(p, ',');
      int len = q ? (int)(q - p) : (int)strlen(p);
      k += (size_t)snprintf(inst + k, sizeof inst - k, "%s%.*s=%lld", i ? ", " : "",
                            len, p, (long long)iters[i]);
      p = q ? q + 1 : p + len;
    }
  }
  pc__fail(ctx, "simulate: access %s[%s] is outside buffer %s because its shape is "
               "[%s], at statement %s[%s]. The schedule or placement that made this "
               "access is wrong; check the buffer's footprint.",
          bname, idx, bname, ext, sname, inst);
}
