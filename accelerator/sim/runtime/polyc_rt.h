/* polyc_rt.h: the runtime of polyc's simulated accelerator.
 *
 * A functional plus timing simulator. Generated code (codegen/accel/direct.py and
 * codegen/accel/placed.py) calls these functions; Python fills a pc_spec from the TOML
 * description, creates a context, binds the kernel's numpy arrays as DRAM buffers,
 * runs the kernel and reads back pc_stats and the trace.
 *
 * Units: time in cycles (int64), sizes in bytes unless a name says elements, views
 * and strides in elements. Buffers are small integers returned by pc_bind/pc_alloc.
 * See docs/accelerator.md for the contract and the timing model.
 *
 * Contract for generated code: scalar statements count their instances locally and
 * hand the counts to pc_scalar ("flush") before every call that issues work or
 * waits (pc_dma, pc_mac, pc_vec_*, pc_vector, pc_wait), so that the scalar core's
 * clock is current when it issues; scalar code touching a buffer that asynchronous
 * work writes must be preceded by pc_wait. Every engine operation checks the bytes
 * it touches; PC_CHECK checks each scalar access unless built with -DPC_NO_CHECKS.
 * A violation records an error; while a kernel runs (armed) it also longjmps out.
 *
 * The part between CDEF BEGIN and CDEF END is also handed to cffi, so it uses only
 * what cffi's parser accepts (plain structs, integer #defines, prototypes). Its
 * integer #defines are the ABI's numbers, written only here: Python parses them
 * from this text (accelerator/sim/abi.py).
 *
 * The runtime's own files include rt_internal.h too (what they share internally).
 */
#ifndef POLYC_RT_H
#define POLYC_RT_H

#include <setjmp.h>
#include <stdint.h>

/* CDEF BEGIN */
#define PC_MAX_LEVELS 8
#define PC_MAX_CHANNELS 32
#define PC_MAX_DIMS 8
#define PC_MAX_ACCESS 16
#define PC_NCLASS 6
#define PC_NMAC 4
#define PC_NAME 32
#define PC_MAX_QUEUE 64
#define PC_MAX_BANKS 32 /* banks of one SRAM level (block-partitioned) */
#define PC_MAX_USE 64   /* banks one operation's bytes may touch */

/* op classes (polyc.expr.ops_count), plus the vector unit's reduction step */
#define PC_ADD 0
#define PC_MUL 1
#define PC_CMP 2
#define PC_DIV 3
#define PC_TRANS 4
#define PC_RED 5

/* MAC array element types (index into pc_spec.mac_rate) */
#define PC_MAC_INT8 0
#define PC_MAC_FLOAT16 1
#define PC_MAC_FLOAT32 2
#define PC_MAC_BFLOAT16 3

/* MAC array dataflows: the operand its PEs hold (pc_spec.dataflow) */
#define PC_DF_WEIGHT_STATIONARY 0
#define PC_DF_OUTPUT_STATIONARY 1
#define PC_DF_INPUT_STATIONARY 2

/* MAC array modes: operand type -> accumulator type */
#define PC_I8_I32 0
#define PC_F16_F16 1
#define PC_F16_F32 2
#define PC_F32_F32 3
#define PC_BF16_F32 4 /* bfloat16 operands (uint16_t: a float's upper half) */

/* element types of vector primitives */
#define PC_F32 0
#define PC_F16 1
#define PC_I32 2
#define PC_I8 3

/* vector primitives: binary, unary, reductions */
#define PC_OP_ADD 0
#define PC_OP_SUB 1
#define PC_OP_MUL 2
#define PC_OP_DIV 3
#define PC_OP_MAX 4
#define PC_OP_MIN 5
#define PC_OP_NEG 10
#define PC_OP_ABS 11
#define PC_OP_EXP 12
#define PC_OP_LOG 13
#define PC_OP_SQRT 14
#define PC_OP_TANH 15
#define PC_OP_SIGMOID 16
#define PC_OP_RELU 17
#define PC_OP_COPY 18
#define PC_OP_RINT 19 /* round half to even (nearbyint): int8 requantization */
#define PC_OP_SUM 20
#define PC_OP_RMAX 21
#define PC_OP_RMIN 22

/* engines: scalar core, MAC array, vector unit, then one per DMA channel */
#define PC_ENG_SCALAR 0
#define PC_ENG_MAC 1
#define PC_ENG_VECTOR 2
#define PC_ENG_DMA 3
#define PC_MAX_ENGINES 35

/* trace event kinds */
#define PC_EV_SCALAR 0
#define PC_EV_MAC 1
#define PC_EV_VECTOR 2
#define PC_EV_DMA 3
#define PC_EV_WAIT 4

typedef struct {
  char name[PC_NAME];
  int is_dram;
  int64_t capacity;
  double bytes_per_cycle;
  int64_t latency;
  int64_t alignment;
  double read_pj;  /* per byte */
  double write_pj; /* per byte */
  /* DRAM only: caps on the bytes per cycle of all reads (writes) in flight
   * together; 0 = only bytes_per_cycle caps them */
  double read_bytes_per_cycle;
  double write_bytes_per_cycle;
  /* SRAM: equal banks of capacity / banks bytes, bank i holding bytes
   * [i * capacity / banks, (i + 1) * capacity / banks), each serving
   * bytes_per_cycle / banks (rt_timeline.c); DRAM: not modelled */
  int banks;
} pc_level;

typedef struct {
  double clock_ghz;
  /* MAC array */
  int rows, cols;
  int dataflow;        /* PC_DF_*: the operand the PEs hold */
  int double_buffered; /* the PEs hold a second copy of it: folds overlap */
  double mac_rate[PC_NMAC]; /* MACs per PE per cycle; 0 = unsupported */
  double mac_pj[PC_NMAC];
  unsigned input_levels;  /* bit i: the array may read A (input) from level i */
  unsigned weight_levels; /* bit i: the array may read B (weight) from level i */
  unsigned acc_levels;    /* bit i: level i may hold C (accumulators) */
  int mac_requantize;     /* the output path requantizes (pc_mac_output) */
  /* vector unit */
  int lanes;
  unsigned vector_levels;
  int64_t vec_cycles[PC_NCLASS];
  double vec_pj;
  /* scalar control core */
  int64_t stmt_cycles;
  int64_t issue_cycles;
  int queue_depth; /* commands an engine holds before the scalar core stalls */
  int64_t scalar_cycles[PC_NCLASS];
  double scalar_pj;
  /* memory: level 0 is DRAM */
  int nlevels;
  pc_level level[PC_MAX_LEVELS];
  /* DMA */
  int channels;
  int64_t dma_setup;
  double dma_bytes_per_cycle;
  int dma_dims;
  /* bounded trace: at most this many events are kept (0: no trace) */
  int64_t trace_limit;
  /* timing only: every call is checked, timed and charged (cycles, bytes,
   * energy) as in a functional run, but no data moves and nothing is computed:
   * DMA, gathers, MAC and vector calls skip their copies and arithmetic, pc_alloc
   * its poison, and generated code its statement bodies (PC_DATA). The timing
   * never reads data, so the statistics equal the functional run's; what is not
   * done is what reads values: a gather's index range check. */
  int timing_only;
} pc_spec;

/* a 2-D window of a buffer, in elements: element (r, c) is at off + r*rs + c*cs.
 * A pc_mac operand (A or B, never C) may split its indices in two strides each:
 * span / ps its K index (an im2col read of a convolution's input) and rspan / rps
 * its other one (several output rows of a convolution per call, the input read
 * at its own row pitch while the output is compact). An index i split by
 * (span, pitch) with stride s moves (i / span)*pitch + (i % span)*s. K is A's
 * column and B's row: in A, (r, c) is at off + r*rs + (c / span)*ps +
 * (c % span)*cs with span > 0 and the row part is (r / rspan)*rps +
 * (r % rspan)*rs with rspan > 0; in B the same with rows and columns exchanged
 * (B's span splits its rows, its rspan its columns), so that the transposed view
 * of an A operand is a B operand (the exchanged call: C^T = B^T A^T). */
typedef struct {
  int buf;
  int64_t off;
  int64_t rs;
  int64_t cs;
  int64_t span;
  int64_t ps;
  int64_t rspan;
  int64_t rps;
} pc_view;

/* a byte range [lo, hi) of a buffer that an operation reads or writes. With
 * period > 0 it touches only the bytes x of [lo, hi) whose (x - arc) mod period
 * is below arc_len: a tile of rows of a channel-major array is a run of bytes in
 * each channel, and its hazards are those runs', not their hull's. */
typedef struct {
  int buf;
  int is_write;
  int64_t lo;
  int64_t hi;
  int64_t period;
  int64_t arc;
  int64_t arc_len;
} pc_range;

/* a statement executed instance by instance on the scalar core */
typedef struct {
  const char *name;
  const char *iterators;       /* "i,j,k": for error messages */
  int64_t ops[PC_NCLASS];      /* operations per instance, by class */
  int64_t macs;                /* multiply-accumulates per instance */
  int naccess;                 /* memory accesses per instance */
  int level[PC_MAX_ACCESS];    /* ... the level each one goes to */
  int64_t bytes[PC_MAX_ACCESS];
  int is_write[PC_MAX_ACCESS];
} pc_stmt_desc;

/* work the vector unit does on `elements` elements, computed by the caller's code */
typedef struct {
  const char *name;
  int64_t elements;
  int64_t ops[PC_NCLASS]; /* per element */
  int naccess;
  pc_range access[PC_MAX_ACCESS];
} pc_vop;

typedef struct {
  int64_t cycles;
  int nengines;
  int64_t busy[PC_MAX_ENGINES];
  int64_t ops[PC_MAX_ENGINES];
  int64_t bytes_read[PC_MAX_LEVELS];
  int64_t bytes_written[PC_MAX_LEVELS];
  int64_t macs;           /* executed multiply-accumulates (scalar + MAC array) */
  int64_t mac_array_macs; /* ... of which on the MAC array, padding included */
  int64_t vector_ops[PC_NCLASS];
  int64_t scalar_ops[PC_NCLASS];
  int64_t scalar_instances;
  int64_t dma_transfers;
  int64_t dma_descriptors;
  double energy_mac;
  double energy_vector;
  double energy_scalar;
  double energy_level[PC_MAX_LEVELS];
  int64_t events;
  int64_t events_dropped;
  int64_t peak_sram[PC_MAX_LEVELS]; /* most bytes of buffers live at once */
} pc_stats;

typedef struct {
  int64_t start;
  int64_t end;
  int engine;
  int kind;
  int src_level;
  int dst_level;
  int64_t amount; /* bytes (DMA), MACs, elements (vector), instances (scalar) */
  char label[PC_NAME];
} pc_event;

/* per statement, after a run: what the scalar core spent on it (bytes and energy
 * are per instance, as charged by pc_scalar) */
typedef struct {
  const char *name;
  int64_t instances;
  int64_t cycles_per_instance;
  int64_t bytes_read[PC_MAX_LEVELS];
  int64_t bytes_written[PC_MAX_LEVELS];
  double energy_pj;
} pc_stmt_stat;

typedef struct pc_ctx pc_ctx;

pc_ctx *pc_create(const pc_spec *spec);
void pc_destroy(pc_ctx *ctx);
const char *pc_error(pc_ctx *ctx);
const pc_stats *pc_finish(pc_ctx *ctx);
const pc_event *pc_events(pc_ctx *ctx, int64_t *count);
int64_t pc_now(pc_ctx *ctx);

/* buffers */
int pc_bind(pc_ctx *ctx, const char *name, void *data, int64_t bytes);
/* an array of the caller held in on-chip `level` at `offset` (its home: the
 * values stay in `data`, the timing is the level's) */
int pc_bind_at(pc_ctx *ctx, const char *name, void *data, int64_t bytes, int level,
               int64_t offset);
/* pc_alloc fills a new buffer with PC_POISON bytes (NaN for floats, -1 for
 * integers): a read of bytes nothing wrote since the allocation gives a value the
 * oracle cannot miss, never the stale data of an earlier buffer over the same
 * bytes (or zeros that happen to be right). */
#define PC_POISON 0xFF
int pc_alloc(pc_ctx *ctx, int level, int64_t offset, int64_t bytes,
             const char *name);
/* functional only: set a buffer to zero (a level's zero block, set once when the
 * kernel starts; not timed: it is a few bytes) */
void pc_zero_fill(pc_ctx *ctx, int buf);
void pc_free(pc_ctx *ctx, int buf);
void *pc_ptr(pc_ctx *ctx, int buf);
int64_t pc_ready(pc_ctx *ctx, int buf);

/* engines */
/* a DMA's channel: 0..channels-1, PC_ANY_CHANNEL (the first free one, stores
 * to DRAM on the last half of the channels), or PC_LAST_CHANNEL (the last one:
 * a transfer ahead of its reader, kept off the channels the loads pick first) */
#define PC_ANY_CHANNEL -1
#define PC_LAST_CHANNEL -2
void pc_dma(pc_ctx *ctx, int channel, int elem_bytes, int ndims,
            const int64_t *sizes, int dst, int64_t dst_off,
            const int64_t *dst_strides, int src, int64_t src_off,
            const int64_t *src_strides, const char *label);
/* indirect (gather) DMA: the channel reads `rows` indices (`idx_elem`-byte
 * signed integers, `idx_stride` elements apart from element `idx_off` of buffer
 * `idx`), then for each index v copies the row of `row_elems` contiguous
 * `elem`-byte elements at element src_off + v * src_stride of `src` to element
 * dst_off + r * dst_stride of `dst`. An index outside [0, src_rows) fails the
 * run naming it (no row is read for it). Timed as one transfer of 1 + rows
 * descriptors (the index block, then one per row), the index bytes plus the rows'
 * bytes, and two latencies of the slower level (the rows' addresses come back
 * with the indices). */
void pc_gather(pc_ctx *ctx, int channel, int elem, int64_t rows, int64_t row_elems,
               int dst, int64_t dst_off, int64_t dst_stride, int src,
               int64_t src_off, int64_t src_stride, int64_t src_rows, int idx,
               int64_t idx_off, int64_t idx_stride, int idx_elem,
               const char *label);
/* a gather's index read on the scalar core (DRAM-direct): v when 0 <= v < n,
 * else the run fails naming it (checked with or without PC_NO_CHECKS) */
int64_t pc_gather_index(pc_ctx *ctx, int64_t v, int64_t n, const char *label);
void pc_mac(pc_ctx *ctx, int mode, int64_t m, int64_t n, int64_t k,
            int accumulate, pc_view a, pc_view b, pc_view c, const char *label);
void pc_mac_output(pc_ctx *ctx, const pc_vop *op);
void pc_vec_binary(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                   pc_view out, pc_view a, pc_view b, const char *label);
void pc_vec_unary(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                  pc_view out, pc_view a, const char *label);
void pc_vec_reduce(pc_ctx *ctx, int op, int dtype, int64_t rows, int64_t cols,
                   int accumulate, pc_view out, pc_view a, const char *label);
void pc_vector(pc_ctx *ctx, const pc_vop *op);

/* scalar core */
int pc_stmt(pc_ctx *ctx, const pc_stmt_desc *desc);
void pc_scalar(pc_ctx *ctx, int stmt, int64_t instances, uint64_t reads,
               uint64_t writes);
void pc_wait(pc_ctx *ctx, int buf);
void pc_wait_all(pc_ctx *ctx);
int pc_stmt_stats(pc_ctx *ctx, int stmt, pc_stmt_stat *out);

/* the failure path of PC_CHECK (exposed for tests) */
void pc_fail_access(pc_ctx *ctx, int buf, int stmt, int n, const int64_t *index,
                    const int64_t *extent, int niter, const int64_t *iters);
/* CDEF END */

/* ---- internal: the context, and what generated C uses inline ---------------- */

#define PC_HAZ 16 /* remembered ranges per buffer and direction */

/* a byte range [lo, hi) touched by operation `op` (an id) on `engine`; with
 * period > 0 only its bytes of pc_range's arcs */
typedef struct {
  int64_t lo, hi, op;
  int engine;
  int64_t period, arc, arc_len;
} pc_span;

typedef struct {
  char name[PC_NAME];
  int level;
  int live;
  int64_t offset; /* in the level (SRAM) */
  int64_t bytes;
  unsigned char *base;
  int nw, nr;
  pc_span w[PC_HAZ], r[PC_HAZ];
  /* per engine, the latest operation of forgotten ranges (whole buffer), or -1 */
  int64_t floor_w[PC_MAX_ENGINES], floor_r[PC_MAX_ENGINES];
} pc_buf;

typedef struct {
  pc_stmt_desc d;
  char name[PC_NAME];
  char iterators[96];
  int64_t cycles; /* per instance */
  int64_t instances;
  int64_t bytes_read[PC_MAX_LEVELS], bytes_written[PC_MAX_LEVELS];
  double energy_level[PC_MAX_LEVELS];
  double energy_ops;
} pc_stmt_info;

/* An asynchronous operation from its issue until its results are ready (see
 * rt_timeline.c). Ids grow in issue order; a record lives in slot id % cap. */
typedef struct {
  int64_t id; /* -1: a free slot */
  int engine, state, kind;
  int dirs;                       /* DMA: bit 0 reads DRAM, bit 1 writes it */
  int ndeps;                      /* unfinished operations it waits for */
  int64_t issue, start, free_at, ready, fin;
  int64_t busy, tail;             /* fixed duration, then results after tail */
  int64_t head;    /* MAC: the first fold's load, which may overlap the op before */
  int64_t spacing; /* MAC: its first fold starts >= this after the last one before */
  int64_t last;    /* MAC: cycles of its last fold's stream (ends at free_at) */
  int64_t body;    /* when it began to occupy its engine: its start, or the end
                      of the op before when its head was hidden under that op */
  int64_t setup, latency, t_rate; /* DMA phases; when `left` was last updated */
  double left, cap, rate;         /* DMA data still to move, its own cap, its rate */
  int64_t amount;
  int64_t est_start, est_ready; /* as if it ran alone (for the channel choice) */
  int64_t event; /* its trace event (written at issue, timed when it ends), or -1 */
  int64_t deps[PC_MAX_ENGINES];
  int64_t read_dep;   /* a MAC call that reads what it overwrites: it may start
                         once the array is past that call (its inputs are in),
                         before that call's results are out; -1: none */
  int64_t dma_reads[PC_MAX_ENGINES]; /* likewise per DMA channel, the transfer
                         that reads what it overwrites: it may start once that
                         transfer's data has moved, before its latency; -1: none */
  int64_t not_before; /* ... the cycle that call frees the array */
  int64_t stat_deps[PC_MAX_ENGINES]; /* MAC: per engine, the latest op writing
                         its stationary operand (its head loads once that is ready) */
  /* the SRAM banks it touches (level * PC_MAX_BANKS + bank) and, per bank, its
   * bytes per cycle there: for a DMA per byte per cycle of its rate; for an
   * engine operation at its full speed, then (held) what it holds once started */
  int nuse;
  int holds; /* an engine operation holding its banks' bandwidth until free_at */
  short use_res[PC_MAX_USE];
  double use_a[PC_MAX_USE];
} pc_op;

/* the deferred timeline: operations issued but not yet finished, and each
 * engine's queue (the event simulation's state; copied whole for a forecast) */
typedef struct {
  int64_t now;     /* everything before it is final */
  int64_t next_id; /* of the next operation issued */
  int64_t last;    /* the latest end of a finished operation */
  pc_op *ops;      /* slots, a power of two */
  int64_t cap;
  int64_t *run; /* ids of the started, unfinished operations */
  int nrun, caprun;
  int rerate; /* a DRAM transfer started or ended: share the bandwidth anew */
  int64_t free_at[PC_MAX_ENGINES]; /* the engine's next start; INT64_MAX: unknown */
  int64_t ready[PC_MAX_ENGINES];   /* the latest result of its started ops */
  int64_t fold_at[PC_MAX_ENGINES]; /* MAC: its latest fold's start (the stationary
                                      register is free to load from then) */
  int64_t est_free[PC_MAX_ENGINES]; /* when it would be free if each op ran alone */
  int64_t queued[PC_MAX_ENGINES];  /* commands issued so far */
  int64_t started[PC_MAX_ENGINES]; /* ... of which started */
  int64_t qid[PC_MAX_ENGINES][PC_MAX_QUEUE];    /* their ids (ring) */
  int64_t qstart[PC_MAX_ENGINES][PC_MAX_QUEUE]; /* their start times (ring) */
  /* bytes per cycle of each bank held by the running MAC (0) and vector (1)
   * operations */
  double held[2][PC_MAX_LEVELS * PC_MAX_BANKS];
} pc_timeline;

#define PC_FREED 16

struct pc_ctx {
  pc_spec spec;
  pc_stats stats;
  int64_t scalar_time;
  pc_timeline tl;
  int quiet; /* a forecast runs: write no trace and no stats */
  unsigned char *mem[PC_MAX_LEVELS];
  int64_t dram_bound;
  pc_buf *bufs;
  int nbufs, capbufs;
  pc_stmt_info *stmts;
  int nstmts, capstmts;
  pc_span freed[PC_MAX_LEVELS][PC_FREED]; /* released space still in use */
  int nfreed[PC_MAX_LEVELS];
  int64_t freed_floor[PC_MAX_LEVELS][PC_MAX_ENGINES];
  int64_t live_sram[PC_MAX_LEVELS]; /* bytes of the live buffers per level */
  pc_event *events;
  int64_t capevents;
  int failed;
  int armed;
  jmp_buf jmp;
  char error[1024];
};

#define PC_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Whether generated code computes its statements' values (0 in a timing-only
 * run: it still walks its loops, counting instances and the bytes they touch). */
#define PC_DATA(ctx) (!(ctx)->spec.timing_only)

/* The bit of a buffer in the masks of buffers a statement read and wrote since the
 * last pc_scalar (ids from 63 on share the last bit and are checked together). */
static inline uint64_t pc_bit(int buf) {
  return (uint64_t)1 << (buf < 63 ? buf : 63);
}

/* Element access check: every index inside its extent; the buffer is recorded in
 * `mask` so that pc_scalar can check it was not in use by an asynchronous
 * operation (a missing pc_wait). Compiled out with -DPC_NO_CHECKS. `idx`, `ext`
 * and `it` are compound literals of int64_t. */
#ifdef PC_NO_CHECKS
#define PC_CHECK(ctx, mask, buf, stmt, n, idx, ext, ni, it) ((void)0)
#else
#define PC_CHECK(ctx, mask, buf, stmt, n, idx, ext, ni, it) \
  ((mask) |= pc_bit(buf), pc_check((ctx), (buf), (stmt), (n), (idx), (ext), (ni), (it)))
static inline void pc_check(pc_ctx *ctx, int buf, int stmt, int n,
                            const int64_t *idx, const int64_t *ext, int ni,
                            const int64_t *it) {
  int bad = 0;
  for (int d = 0; d < n; d++) bad |= (uint64_t)idx[d] >= (uint64_t)ext[d];
  if (PC_UNLIKELY(bad)) pc_fail_access(ctx, buf, stmt, n, idx, ext, ni, it);
}
#endif

#endif /* POLYC_RT_H */
