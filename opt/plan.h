/* The launch plan of one graph: which values are materialized in which
 * buffers, which kernels compute them and how each kernel is scheduled.
 * Built by segmentation (segment.c) and scheduling (schedule.c) on the
 * optimized graph; lowered by backend_ptx; printed into the artifact. */
#ifndef FG_PLAN_H
#define FG_PLAN_H
#include <stdio.h>

#include "diag.h"
#include "ir.h"
#include "target.h"
#include "op.h"
#include "knobs.h"
#include "view.h"
#include "symbolic.h"

/* FG_BUF_SYM: not a buffer but the value of the graph's symbolic size
 * (symbolic.h), an argument of the kernels over it (`z<J>` in the plan). */
typedef enum fg_buf_kind {
  FG_BUF_NONE,
  FG_BUF_PARAM,
  FG_BUF_RESULT,
  FG_BUF_TEMP,
  FG_BUF_SYM
} fg_buf_kind;

typedef struct fg_buf_ref {
  fg_buf_kind kind;
  int index;
} fg_buf_ref;

/* Where a value lives. Values that are not stored are recomputed inline by
 * every kernel that needs them. */
typedef struct fg_storage {
  bool stored;
  fg_buf_ref buf;
  int kernel; /* the kernel that writes it; -1 for parameters */
  /* zip-store (zip_store.c): stored not in a buffer of its own but inside
   * the buffer of `within` (a cat it is a piece of), at `view` (offset and
   * strides over that buffer's dense storage, sizes the value's); buf is
   * within's. NULL: its own buffer, dense. */
  const fg_value *within;
  const fg_strided *view;
} fg_storage;

/* The most reductions of one domain the code generator lowers in one row
 * or column kernel; segmentation starts another kernel past them. */
#define FG_MAX_ROW_REDUCTIONS 64
#define FG_MAX_COLUMN_REDUCTIONS 8

typedef enum fg_kernel_kind {
  FG_KERNEL_POINTWISE, /* one thread per V consecutive output elements */
  FG_KERNEL_ROW,       /* reductions over trailing dims (inner), persistent normalization */
  FG_KERNEL_COLUMN,    /* reductions over leading/middle dims with a kept inner extent */
  /* issue 19: one `sdpa` node (its o and lse), FlashAttention-2's loop: a
   * CTA owns attn_br query rows of one (batch, head) and loops over key
   * blocks of attn_bc (emit_attention.c) */
  FG_KERNEL_ATTENTION,
  /* issue 20: an index_add (scatter) as five kernels, deterministic with
   * no float atomics (segment.c start_scatter_kernels, emit_scatter.c):
   * COUNT the sources of each destination slice (integer atomics), SCAN
   * the counts into offsets (one CTA), FILL each destination's segment
   * with its source positions (in any order; the counts return to zero),
   * ORDER each segment ascending (a source's rank among its segment), SUM
   * each destination element: the operand's element plus its sources in
   * ascending order, the interpreter's order (docs/format.md 5.11). */
  FG_KERNEL_SCATTER_COUNT,
  FG_KERNEL_SCATTER_SCAN,
  FG_KERNEL_SCATTER_FILL,
  FG_KERNEL_SCATTER_ORDER,
  FG_KERNEL_SCATTER_SUM,
  /* issue 19: one part of an `sdpa_bwd` node (emit_attention_bwd.c):
   * attn_part FG_ATTN_DQ, a CTA owns attn_br query rows of one (batch,
   * head), computes their delta = rowsum(dO o O) into a workspace and loops
   * over key blocks of attn_bc for dq; FG_ATTN_DKDV, a CTA owns attn_br keys
   * of one (batch, key head) and loops over the query heads of its group
   * and their query blocks of attn_bc for dk and dv */
  FG_KERNEL_ATTENTION_BWD,
  /* issue 20 (scatter2): COUNT, SCAN, FILL and ORDER of a scatter in one
   * CTA, a barrier between the steps, when every thread takes few enough
   * sources to issue their loads at once (segment.c
   * start_scatter_kernels): one launch, not four, before the SUM */
  FG_KERNEL_SCATTER_SORT,
  /* issue 20 (scan): one cumsum node, an inclusive prefix sum along its
   * dim (emit_scan.c), with its fused producers and the full-size outputs
   * of its domain. A column scan (inner > 1: the scanned dim is not the
   * innermost): a thread owns `vec` adjacent columns and walks
   * the scanned extent with a running sum; else a row scan: scan_lanes
   * threads a row (a warp or a CTA), shfl.up within warps and shared
   * memory across them, chunk after chunk with a running carry. With
   * scan_chunks > 1 (column scans only) the scanned extent is cut into
   * chunks: SCAN_CHUNKS, launched first, writes each chunk's sums into
   * temp scan_temp; SCAN adds the sums of the chunks before its own. */
  FG_KERNEL_SCAN,
  FG_KERNEL_SCAN_CHUNKS,
} fg_kernel_kind;

enum { FG_ATTN_DQ, FG_ATTN_DKDV };

static inline bool fg_kernel_is_scatter(fg_kernel_kind k) {
  return (k >= FG_KERNEL_SCATTER_COUNT && k <= FG_KERNEL_SCATTER_SUM) ||
         k == FG_KERNEL_SCATTER_SORT;
}

typedef struct fg_kernel {
  int id;
  fg_kernel_kind kind;
  const char *entry;
  /* The iteration domain: for pointwise kernels the reference output shape;
   * for reductions the reduced input's shape with mask[] marking reduced
   * dims. */
  int rank;
  int64_t dims[FG_MAX_RANK];
  bool mask[FG_MAX_RANK];
  int nouts;
  fg_value **outs; /* stored values it writes, in graph order */
  int nreds;
  fg_node **reds; /* reductions it computes, in graph order */
  /* ROW kernels only, "row + column" form: reductions over the kept dims
   * of the same domain (a weight gradient's sum over rows), and reductions
   * of row-shaped values over every row (a tensor amax from row amaxes).
   * Each CTA loops over rows, accumulates them in registers, writes a
   * partial; the last CTAs to arrive combine the partials in a fixed order
   * (schedule.c, emit_rowcol.c). */
  int ncols;
  fg_node **cols;
  int ntails;
  fg_node **tails;
  /* Buffers it reads or writes, in argument order, and scalar params. */
  int nargs;
  fg_buf_ref *args;
  /* ---- schedule ---- */
  int64_t outer, red, inner; /* B, R, I: the domain folded to 3 extents */
  int vec;                   /* elements per vector access (1: scalar) */
  /* issue 17: POINTWISE, a thread's vec lanes are consecutive linear
   * indices of the domain (its outputs dense), not adjacent elements of the
   * last dim, which need not be a multiple of vec (schedule_pointwise,
   * emit_pointwise.c) */
  bool flat;
  int block; /* threads per CTA */
  int64_t grid[3];
  const char *grid_formula; /* grid x as a formula of the symbolic size (plan v2), NULL: static */
  bool grid_runtime;        /* the code reads grid x (%nctaid.x), at most grid[0] (row + column) */
  int split;                /* CTAs cooperating on one row/column tile (>1: grid reduction) */
  int chunks;               /* per-thread vector chunks of a row kept in registers (ROW) */
  bool persistent;          /* ROW: the row stays in registers across phases */
  bool idx64;               /* 64-bit index arithmetic */
  int64_t narrow_max;       /* > 0: 64-bit only for the symbolic size's larger values: entries
                             * with 32-bit indices serve it up to this (kernel-narrow, the plan) */
  const char *narrow_entry, *narrow_vec_entry; /* ... their names (compile.c) */
  int partial_temp;                            /* grid reduction partials (split > 1), else -1 */
  int counter_temp;                            /* arrival counters (split > 1), else -1 */
  int smem;                                    /* dynamic shared memory bytes */
  int combiners;       /* row + column form: CTAs that combine the partials */
  int combine_cols;    /* ... columns each combines at a time (8, 16 or 32) */
  int min_ctas_per_sm; /* > 0: the code must fit this many CTAs per SM (.minnctapersm) */
  int rows_per_iter;   /* row + column form, column kernels: rows whose loads are issued together */
  bool reload;         /* ... outputs re-read the row (L1) instead of keeping it in registers */
  bool pipeline; /* ... the next row group is copied into shared memory while this one is reduced */
  int pipe_bytes; /* ... pipelined: shared memory for the copies (two buffers of a row group) */
  int cluster;    /* ... CTAs per thread-block cluster (sm_90; > 1: a cluster sums its CTAs' column
                   * partials in distributed shared memory and writes one row of them; 1: each CTA
                   * writes its own); either way the last `combiners` CTAs to arrive combine */
  int xchg_bytes; /* ... cluster > 1: shared memory for one CTA's accumulators of a column reduction
                   */
  bool early_arrive; /* ... partials and arrival from inside a CTA's last row group, where the
                        emitter can */
  int defer_groups;  /* ... > 0: nothing in the loop uses a row's totals, so each warp leaves its
                      * share in  shared memory and the CTA sums them every defer_groups groups (no
                      * barrier a group) */
  bool pack_bf16;    /* ... max / min of bf16 values accumulate in bf16 pairs (exact; half the
                        instructions) */
  int64_t trace_off; /* ... > 0: knob TRACE: byte offset in the partials of a per-CTA timeline (8
                        u64) */
  int combine_loads; /* ... > 0: loads a combiner thread sums before its group stage (knob
                        ROWCOL_CVEC; 0: the emitter's rule) */
  int combine_batch; /* column kernels, split > 1: > 0: partials loaded before any is combined
                        (knob COL_COMBINE; 0: by vector width) */
  /* issue 17 (colthr): column kernels with few outputs: > 1: threads a column (a group of vec
   * outputs) in a CTA, each over its own part of the CTA's rows; the CTA combines their totals
   * in shared memory in a fixed order (block / col_threads columns a CTA). 0, 1: one. */
  int col_threads;
  bool inplace; /* writes a parameter's storage (opt/inplace.c): every load of a chunk
                 * before any store, no noalias, no invariant loads */
  /* issue 17: the CTAs take their work in descending order (CTA c does what
   * CTA grid - 1 - c would): the kernel before it read `reverse_why`'s
   * tensor, larger than L2, in ascending order, so its last part, still in
   * L2, is read first (schedule.c choose_l2_order; pointwise and row
   * kernels) */
  bool reverse;
  /* ... the tensor larger than L2 that the kernel before it covered and
   * this one reads in the opposite order (either way round), so that its
   * first part comes from L2; FG_BUF_NONE: none (or knob L2_REVERSE=2) */
  fg_buf_ref l2_reread;
  const char *why; /* one line: why this kind and schedule */
  const char
      *warn; /* the lint's finding (fg_plan_lint): a plan likely slower than eager, or NULL */
  /* ROW kernels, short rows packed (schedule.c pack_rows): > 0, a row takes
   * this many lanes of a warp (a power of two <= 32) and a CTA block /
   * row_lanes rows; 0, a CTA (or split CTAs) a row. */
  int row_lanes;
  /* Column kernels beside a row kernel over the same domain: why the row +
   * column form did not take them (the two-kernel fallback). */
  int not_with; /* that row kernel, or -1 */
  const char *not_with_why;
  /* ATTENTION kernels (issue 19): the sdpa node, query rows a CTA (16 or
   * 32 a warp), keys a block, and the shared memory row pitch in elements */
  const fg_node *attn;
  int attn_br, attn_bc, attn_warps, attn_pitch;
  bool attn_ldmatrix; /* K and V fragments by ldmatrix (.trans for V), not plain shared loads */
  int attn_stages;    /* 2, 3: the next K, V tiles load (cp.async in the aligned variant) while
                       * this block computes; 1: load, then compute */
  bool attn_q_regs;   /* Q's A fragments held in registers, not reloaded from shared memory */
  /* issue 19 (wgmma, sm_90a): the forward by wgmma.mma_async, a warpgroup
   * (4 warps) owning 64 query rows, tiles in shared memory in the 128-byte
   * swizzle (attn_pitch = D: no padding) */
  bool attn_wgmma;
  /* issue 19 (wgmma2): the wgmma loop software-pipelined (knob ATTN_OVERLAP):
   * block j's S = Q K^T and block j - 1's P V issued together, block j's
   * softmax while P V runs (stages >= 3: V of block j - 1 still read).
   * The backward's (ATTENTION_BWD, knob ATTN_BWD_OVERLAP): S and dP as two
   * wgmma groups, P computed while dP runs; dk, dv: dV's product issued
   * before dS is computed */
  bool attn_overlap;
  /* attnpp (issue 19): the overlapped loop's wgmmas ordered between the
   * two warpgroups by named barriers (knob ATTN_PINGPONG: 0 off; 1 S_0,
   * S_1, then P V; 2 S_0 and P_0 V, then group 1's), so one group's
   * softmax runs while the other's products do; attn_lpt (causal): the
   * CTAs' work order over all (batch, head), heaviest query blocks first
   * (ATTENTION_BWD: grid [B*H, blocks], blockIdx.y the block, the
   * heaviest first: dq's last query blocks, dk, dv's first key blocks; with
   * attn_lpt_heads (where the looped tiles exceed the L2, or knob
   * ATTN_BWD_LPT=2), in sections of that many pairs, the grid [blocks,
   * B*H]) */
  int attn_pingpong;
  /* attnws (issue 19): warp specialization (knob ATTN_WS): one producer
   * warp after the consumer warps copies Q and the K, V blocks into a
   * ring of attn_stages stages with full/empty mbarriers, the consumers
   * run the overlapped loop with no CTA barrier; 2: and the two consumer
   * warpgroups' wgmma issues alternate (named barriers, FA3's pingpong) */
  int attn_ws;
  bool attn_lpt;
  int attn_lpt_heads; /* (batch, head) pairs a section of the attn_lpt order */
  /* SCATTER kernels (issue 20): the index_add or scatter_add node; its
   * destination slices (index_add: the operand's extent along dim;
   * scatter_add: the operand's elements, each its own bin) and sources
   * (the index's elements); temps (i32): counts [scat_pad] (zero between runs), offsets
   * [scat_pad + 1], source positions by segment as filled and as ordered
   * [sources]; the scan's elements a thread (a multiple of 4), threads a
   * CTA and CTAs (scat_pad = their product). embscan: with scat_ctas > 1
   * (the SCAN kernel, not SORT) each scan CTA takes a range of
   * scat_threads x scat_seg bins, and the counts temp holds one more count
   * a range after the bins' (at scat_pad + range: COUNT adds to it, FILL
   * takes it back to zero), so that a CTA's first offset is the sum of
   * the ranges' counts before its own */
  const fg_node *scat;
  int64_t scat_bins, scat_sources, scat_pad;
  int scat_cnt, scat_off, scat_fill, scat_order;
  int scat_seg, scat_threads, scat_ctas;
  /* SCATTER_SORT: the sources a thread of its CTA takes (straight-line
   * code, each step's loads in flight at once); 0 for the other kinds */
  int scat_rounds;
  /* SCATTER_SORT (embscan): its counts, offsets and filled positions in
   * shared memory where they fit (the offsets also stored to their temp
   * for the SUM; the counts temp then unused) */
  bool scat_smem;
  /* SCATTER_SUM of an index_add along dim 0 with few static sources
   * (embscan, segment.c scatter_select): the only kernel of the node, no
   * temps; each CTA selects from the whole index, in ascending position,
   * the sources of the slices its elements are in (emit_scatter.c) */
  bool scat_select;
  /* ATTENTION_BWD kernels: FG_ATTN_DQ or FG_ATTN_DKDV, and the f32
   * workspace of delta, [B, Hq, Sq], that the dq kernel writes and the dk,
   * dv kernel (after it) reads */
  int attn_part;
  int attn_delta_temp;
  /* Column kernels keeping the symbolic size, split (schedule.c,
   * col_split_formula): grid y, the split, as a formula of it, chosen at
   * run time (split: its largest value); the code reads it (%nctaid.y).
   * NULL: the split is static. */
  const char *split_formula;
  /* issue 21 (rowpeel): ROW kernels whose row length is not a multiple of
   * vec (GPT-2's vocabulary of 50257): each row is a head of
   * h = -row_start mod vec elements, an aligned body of vector chunks and
   * a tail of fewer than vec; head and tail are loaded (and full-size
   * outputs stored) element-wise by a few threads, the body in vectors
   * where the operand's row starts share the domain's phase (schedule.c
   * peel_vec, emit_row.c). Printed `vec V (peeled)`. */
  bool peeled;
  /* SCAN, SCAN_CHUNKS (issue 20, scan): the cumsum is reds[0]; the
   * domain is its input's shape, mask[] its dim; outer, red, inner: the
   * extents before, along and after it. scan_chunks: the scanned extent's
   * chunks (1: none), scan_temp their sums ([chunks][outer x inner] in the
   * accumulation dtype; -1: none). scan_lanes: row scans, threads a row (32:
   * block / 32 rows a CTA; block: a CTA a row); 0 for column scans.
   * scan_chunk_len: a chunk's extent (the last chunk may be shorter; row
   * scans cut into chunks, issue 17 scanpar: a multiple of the vector). */
  int scan_chunks;
  int64_t scan_chunk_len;
  int scan_temp;
  int scan_lanes;
  /* The stream it runs on (streams.c): 0 the caller's, 1 the second
   * stream the loader forks from it, for groups of kernels independent of
   * the rest. */
  int stream;
  /* Programmatic dependent launch (pdl.c, sm_90): pdl_wait, the kernel
   * begins by waiting for the kernels launched before it on its stream
   * (griddepcontrol.wait), so the loader may launch it while the previous
   * one is still running; pdl_trigger, it lets the next kernel on its
   * stream launch once all its CTAs have started
   * (griddepcontrol.launch_dependents). */
  bool pdl_wait, pdl_trigger;
} fg_kernel;

/* Whether k's CTAs wait for one another, so that all must be resident at
 * once (the row + column form's combiners; `kernel-resident` in the
 * artifact). */
static inline bool fg_kernel_resident(const fg_kernel *k) {
  return k->kind == FG_KERNEL_ROW && (k->ncols || k->ntails);
}

/* Whether k is launched: a grid that is not empty, or one a formula of
 * the symbolic sizes gives (which may be empty at run time). */
static inline bool fg_kernel_launched(const fg_kernel *k) {
  return k->grid[0] != 0 || k->grid_formula;
}

static inline bool fg_kernel_is_scan(fg_kernel_kind k) {
  return k == FG_KERNEL_SCAN || k == FG_KERNEL_SCAN_CHUNKS;
}

typedef struct fg_temp {
  int64_t bytes;
  bool zero;       /* must be zero before the first run (counters) */
  fg_value *value; /* the value it holds, NULL for workspaces */
  /* A workspace sized by a formula of the symbolic size that is not a*T + b
   * (a column kernel's partials, split at run time): the plan's byte count;
   * bytes then holds its largest value over the admitted sizes. */
  const char *bytes_formula;
} fg_temp;

/* In-place results (opt/inplace.c, docs/format.md 6.1). */
typedef enum fg_inplace_mode {
  FG_INPLACE_NONE,      /* not an in-place result */
  FG_INPLACE_UNCHANGED, /* the parameter itself: nothing is written */
  FG_INPLACE_DIRECT,    /* its kernel writes the parameter's storage */
  FG_INPLACE_STAGED,    /* computed into a temp, copied by a later kernel */
} fg_inplace_mode;

typedef struct fg_result_plan {
  int into;                /* the parameter whose storage it is (`-> p`), or -1 */
  fg_inplace_mode inplace; /* ... and how it is written */
  const char *inplace_why; /* staged: why not direct */
  bool is_view;
  fg_buf_ref base; /* view: p<J> or r<J> */
  fg_strided view; /* view: offset, sizes, strides over base's storage */
  const char *why; /* written: why it could not be a view (NULL if no view was possible at all) */
} fg_result_plan;

typedef struct fg_plan_options {
  fg_target target;           /* the GPU (target.h); arch 0: sm_90 with FG_DEFAULT_SM_COUNT SMs */
  bool no_vectorize;          /* debugging: scalar accesses only */
  fg_knobs knobs;             /* schedule experiments (knobs.h; fusec --knob) */
  const fg_sym_lowering *sym; /* the graph's symbolic size, if it has one (symbolic.h) */
} fg_plan_options;

typedef struct fg_plan {
  fg_graph *g;       /* the optimized graph (owned by the caller) */
  fg_storage *store; /* indexed by value id */
  int nkernels;
  fg_kernel *kernels;
  int ntemps;
  fg_temp *temps;
  fg_result_plan *results;
  fg_sym_lowering sym;  /* its symbolic size (n 0: none) */
  fg_target target;     /* from the options, defaults filled in */
  fg_plan_options opts; /* the options it was built with */
} fg_plan;

/* Segments and schedules g. NULL after reporting an error (symbolic shapes,
 * attention ops, returning a scalar). Everything lives in g's arena. */
fg_plan *fg_plan_build(fg_graph *g, const fg_plan_options *o, fg_diag *d);
/* Scheduling of an already segmented plan (schedule.c). */
bool fg_plan_schedule(fg_plan *p, const fg_plan_options *o, fg_diag *d);

/* The stored value whose storage a buffer is. */
const char *fg_buf_str(fg_buf_ref b, char *buf, int cap);
/* `fusec --emit plan`: human-readable kernels, buffers and aliases. */
void fg_plan_print(FILE *f, const fg_plan *p);
/* `fusec --emit dot`: plans[0..n) (NULL entries skipped) as one Graphviz
 * digraph, a cluster a graph and a cluster a kernel (plan_dot.c). */
void fg_plan_write_dot(FILE *f, fg_plan *const *plans, int n);
/* The artifact's plan comment block for this graph (docs/artifact.md). The
 * kernel entries must already have their names. vec_entries[k] non-NULL
 * means kernel k has an aligned variant with that entry name, requiring
 * vec_align bytes on the pointers in vec_ptrs. */
void fg_plan_write_artifact(FILE *f, const fg_plan *p, const char *const *vec_entries);
/* The artifact version the plan needs: 5 with a kernel that waits for its
 * predecessor in the kernel (`kernel-pdl`), 4 with kernels on a second stream
 * (`kernel-stream`), 3 with a result written into a parameter (`inplace
 * p<J>`) or a grid with min/max (docs/artifact.md), else 2. */
int fg_plan_version(const fg_plan *p);

/* ---- zip-store (zip_store.c) ---- */
/* Where a cat's pieces are, through reshapes and permutes alone, results
 * of attention-backward kernels used nowhere else, those kernels write
 * them into the cat's buffer and the cat's own kernel goes (knob
 * ZIP_STORE). Run after grouping, before temps are assigned. */
void fg_plan_zip_stores(fg_plan *p);
/* After temps are assigned: each zipped value's buffer is its cat's. */
void fg_plan_zip_buffers(fg_plan *p);

/* ---- concurrent kernels (streams.c) ---- */
/* Puts groups of kernels independent of the rest on stream 1 (knob
 * STREAMS); run after the L2 order is chosen. */
void fg_plan_assign_streams(fg_plan *p);
/* Sets each kernel's pdl_wait and pdl_trigger (pdl.c; knob PDL); run after
 * the streams are assigned. */
void fg_plan_assign_pdl(fg_plan *p);
bool fg_plan_has_streams(const fg_plan *p);
/* Whether a kernel of p waits for its predecessor in the kernel (pdl.c). */
bool fg_plan_has_pdl(const fg_plan *p);

/* ---- helpers shared by segmentation, scheduling and lowering ---- */
/* When a row + column kernel computes a value it writes: with the rows
 * (FG_PHASE_ROWS), or once the partials are combined, at column
 * coordinates (FG_PHASE_COLUMNS) or once (FG_PHASE_TAIL). */
typedef enum fg_phase { FG_PHASE_ROWS, FG_PHASE_COLUMNS, FG_PHASE_TAIL } fg_phase;
fg_phase fg_plan_phase(const fg_plan *p, const fg_kernel *k, const fg_value *v);
/* The tensor a buffer holds: a parameter, a result or a stored temp's
 * value (NULL for a workspace without one, or FG_BUF_NONE). */
static inline const fg_value *fg_plan_buf_value(const fg_plan *p, fg_buf_ref b) {
  return b.kind == FG_BUF_PARAM    ? p->g->params[b.index]
         : b.kind == FG_BUF_RESULT ? p->g->results[b.index]
         : b.kind == FG_BUF_TEMP   ? p->temps[b.index].value
                                   : NULL;
}

/* Whether k computes v from one of its row reductions (for a reduction
 * node's result: whether its input is). */
bool fg_plan_uses_rows(const fg_plan *p, const fg_kernel *k, const fg_value *v);

/* Whether v is available in memory for kernel k (a parameter, or stored by
 * another kernel). Values in memory end the recomputation region. */
bool fg_plan_in_memory(const fg_plan *p, const fg_value *v, int k);
/* issue 19: where an attention kernel reads operand v (q, k or v of its
 * sdpa): the value in memory it is a strided view of and that view. False
 * when there is none (segmentation stores such operands). */
bool fg_plan_attn_source(const fg_plan *p, const fg_value *v, int k, const fg_value **base,
                         fg_strided *s);
/* Whether t is one value per row of k's domain (the kept dims, with or
 * without the reduced dims as size-1 dims). */
bool fg_plan_row_shaped(const fg_kernel *k, const fg_type *t);

/* ---- one-pass variance (issue 17; variance.c) ---- */
/* Whether reduction n, over k's rows (row or column kernel k), is the
 * sum of squared deviations sum((x - sum(x) / R)^2) (f32, R the row's
 * length) of the values a reduction of k sums: that reduction's index in
 * k->reds, or -1. */
int fg_plan_variance_pair(const fg_kernel *k, const fg_node *n);
/* That index i, where no reduction of k->reds (i, end) pairs with it too
 * (one sum of squares a mean), or -1. */
int fg_plan_variance_first(const fg_kernel *k, const fg_node *n, int end);
/* Whether scheduled kernel k computes reduction j in the same pass as
 * reduction i (returned; -1: no), by Welford's and Chan's updates: rows
 * streamed (not kept in registers), not split, no column reductions. */
int fg_plan_one_pass_variance(const fg_kernel *k, int j);
/* The passes a streamed row kernel's reductions make over each row (a
 * variance's two and a logsumexp's two in one each). */
int fg_plan_row_passes(const fg_plan *p, const fg_kernel *k);

/* ---- one-pass logsumexp (issue 20; logsumexp.c) ---- */
/* Whether reduction n of row kernel k is sum(exp(x - m)) (f32) with m
 * the result of a reduction amax(x) of k (broadcast over the row): that
 * reduction's index in k->reds, or -1. */
int fg_plan_lse_pair(const fg_kernel *k, const fg_node *n);
/* That index, where no reduction of k->reds [0, j) pairs with it too. */
int fg_plan_lse_first(const fg_kernel *k, int j);
/* Whether scheduled kernel k computes reduction j in the pass of
 * reduction i (returned; -1: no), by the online-softmax update: rows
 * streamed, not split, no column reductions, a static row length. */
int fg_plan_one_pass_lse(const fg_plan *p, const fg_kernel *k, int j);
/* How many of k's reductions fg_plan_one_pass_lse folds into another's. */
int fg_plan_lse_pairs(const fg_plan *p, const fg_kernel *k);
/* Whether reduction j of k, in no one-pass pair and its input needing no
 * row total of k, is accumulated in the pass of k's first one-pass
 * logsumexp: that pair's max's index, or -1. */
int fg_plan_lse_rides(const fg_plan *p, const fg_kernel *k, int j);
/* How many of k's reductions ride so. */
int fg_plan_lse_riders(const fg_plan *p, const fg_kernel *k);
/* The vectors a thread of a streamed logsumexp pass loads at a time
 * (k->chunks; knob ROW_LSE). */
int fg_plan_lse_unroll(const fg_plan *p, const fg_kernel *k);
/* Whether k writes an output of its full domain (not a reduction). */
bool fg_plan_writes_full(const fg_kernel *k);
bool fg_plan_light_reductions(const fg_plan *p, const fg_kernel *k);

/* The CTAs of the cluster a row of row_bytes takes where its kernel has a
 * phase that needs the row's reductions (schedule.c cluster_split), or 1
 * where rows do not cluster on the target; *fits (if given): each CTA's
 * slice stays in registers. */
int fg_plan_row_cluster(const fg_plan *p, int64_t row_bytes, bool *fits);

/* A column scan's thread keeps about FG_SCAN_THREAD_BYTES of its rows in
 * flight (schedule.c schedule_scan; segment.c sizes the chunks by it). */
enum { FG_SCAN_THREAD_BYTES = 128 };

/* A column scan's vector: vec (the widest the accesses allow) narrowed to
 * 2 columns a thread, or to the knob SCAN_VEC (schedule.c, and segment.c's
 * prediction of it when it chooses the chunks). */
int fg_plan_scan_vec(const fg_plan *p, int vec);
/* Whether column kernel k computes reduction j in the same pass as
 * reduction i (returned; -1: no): Welford's update a thread, Chan's
 * formula over split slices (emit_column.c). */
int fg_plan_column_variance(const fg_kernel *k, int j);
/* How many of column kernel k's reductions are so computed (each takes
 * one more row of partials when split: the slice's mean offset). */
int fg_plan_column_variances(const fg_kernel *k);

#endif
