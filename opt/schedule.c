/* Scheduling: thread mapping, vector width, block and grid, grid-reduction
 * split and index width of each kernel, from static shapes and dtypes.
 *
 * Vector width: 16-byte accesses for the widest element type a kernel
 * moves, limited by the innermost extent, which must be a multiple of it
 * (a row kernel's row need not be: its rows are peeled, peel_vec).
 * Only the innermost extent matters: broadcast (stride 0) dims never cost
 * vectorization. Where it does not allow the width, a pointwise kernel may
 * take its lanes over the linear index of its dense outputs (flat,
 * choose_flat).
 * Row kernels give each row to one CTA (short rows: a group of lanes of a
 * warp, several rows a CTA, pack_rows); the row's chunks stay in registers
 * (persistent) when they fit in 8 vector chunks per thread, else phases
 * re-read the row. Few long rows (a full reduction) split each row over
 * several CTAs with a deterministic grid reduction: partials in a temp, and
 * the last CTA to arrive (an atomic counter) combines them in a fixed order.
 * Column kernels give each thread V adjacent outputs and loop over the
 * reduced extent, split the same way when there are too few threads. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "cost.h"
#include "plan.h"

/* Row kernels: 128 threads a row with up to 8 vector chunks each in
 * registers: several independent 16-byte loads in flight per thread and
 * cheap 4-warp reductions; longer rows get more threads (up to 1024), then
 * the multi-pass form. */
enum { MAX_PERSIST_CHUNKS = 8, ROW_THREADS = 128, PW_THREADS = 128, COL_THREADS = 256 };
enum { LSE_THREADS = 256 }; /* a streamed logsumexp row's CTA (stream_lse) */
/* Extents below this take 32-bit index arithmetic: 2^31 less a margin for
 * the indices a CTA forms past an extent before its bounds check. */
#define INDEX32_LIMIT (((int64_t)1 << 31) - ((int64_t)1 << 20))

/* Whether knob id was given (fusec --knob; knobs.h); *v then holds it. */
static bool knob(const fg_plan_options *o, fg_knob id, int64_t *v) {
  return fg_knob_get(&o->knobs, id, v);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A row kernel's per-row vector (rstd) may match the last extent by chance. */
static bool per_row(const fg_kernel *k, const fg_type *t) {
  return k->kind == FG_KERNEL_ROW && fg_plan_row_shaped(k, t);
}

static int max_elem_size(const fg_plan *p, const fg_kernel *k) {
  int m = 1;
  for (int i = 0; i < k->nargs; i++) {
    fg_buf_ref b = k->args[i];
    const fg_value *bv = fg_plan_buf_value(p, b);
    const fg_type *t = bv ? &bv->type : NULL;
    /* Only tensors indexed along the domain's last dim move in vectors; a
     * row kernel's per-row vector (rstd) may match that extent by chance. */
    if (t && !t->scalar && t->rank && k->rank &&
        t->dims[t->rank - 1].size == k->dims[k->rank - 1] && !per_row(k, t) &&
        fg_dtype_size(t->dtype) > m)
      m = fg_dtype_size(t->dtype);
  }
  return m;
}

/* Whether any of k's dims is a symbolic size (its grid a formula of it). */
static bool kernel_symbolic(const fg_plan *p, const fg_kernel *k) {
  for (int i = 0; i < k->rank; i++)
    if (fg_sym_involves(&p->sym, k->dims[i]))
      return true;
  return false;
}

/* The widest element of the tensors of k's full domain size (the ones it
 * streams); max_elem_size where it has none. */
static int full_elem_size(const fg_plan *p, const fg_kernel *k) {
  int64_t numel = 1;
  for (int i = 0; i < k->rank; i++)
    numel *= k->dims[i];
  int m = 0;
  for (int i = 0; i < k->nargs; i++) {
    const fg_value *bv = fg_plan_buf_value(p, k->args[i]);
    if (bv && !bv->type.scalar && fg_type_numel(&bv->type) == numel &&
        fg_dtype_size(bv->type.dtype) > m)
      m = fg_dtype_size(bv->type.dtype);
  }
  return m ? m : max_elem_size(p, k);
}

/* The extents a kernel indexes: elements of its domain and of each buffer,
 * a temp's bytes (the symbolic size at its stand-in). Returns how many. */
static int kernel_extents(const fg_plan *p, const fg_kernel *k, int64_t *out) {
  int n = 0;
  int64_t m = 1;
  for (int i = 0; i < k->rank; i++)
    m *= k->dims[i] > 0 ? k->dims[i] : 1;
  out[n++] = m;
  for (int i = 0; i < k->nargs; i++) {
    fg_buf_ref b = k->args[i];
    const fg_type *t = NULL;
    if (b.kind == FG_BUF_PARAM)
      t = &p->g->params[b.index]->type;
    else if (b.kind == FG_BUF_RESULT)
      t = &p->g->results[b.index]->type;
    else if (b.kind == FG_BUF_TEMP) {
      out[n++] = p->temps[b.index].bytes;
      if (p->temps[b.index].value)
        t = &p->temps[b.index].value->type;
    }
    if (t && !t->scalar)
      out[n++] = fg_type_numel(t);
  }
  return n;
}

/* The largest extent a kernel indexes, with the symbolic size at its
 * largest. */
static int64_t max_extent(const fg_plan *p, const fg_kernel *k) {
  int64_t *x = malloc(sizeof *x * (size_t)(2 * k->nargs + 1)), m = x ? 1 : INT64_MAX;
  int n = x ? kernel_extents(p, k, x) : 0;
  for (int i = 0; i < n; i++)
    if (fg_sym_at_max(&p->sym, x[i]) > m)
      m = fg_sym_at_max(&p->sym, x[i]);
  free(x);
  return m;
}

/* A kernel with 64-bit indices only because of the symbolic size's largest
 * values: the largest T for which every extent stays below INDEX32_LIMIT (a second
 * pair of entries with 32-bit indices serves T up to it: kernel-narrow in
 * the plan), or 0. */
static int64_t narrow_limit(const fg_plan *p, const fg_kernel *k) {
  const fg_sym_lowering *s = &p->sym;
  int64_t *x = malloc(sizeof *x * (size_t)(2 * k->nargs + 1)), lim = s->max;
  int n = x ? kernel_extents(p, k, x) : 0;
  bool any = false; /* (out of memory: none, so no narrow entries) */
  for (int i = 0; i < n; i++) {
    if (!fg_sym_involves(s, x[i])) {
      if (x[i] >= INDEX32_LIMIT)
        lim = 0;
      continue;
    }
    int64_t a, b;
    fg_sym_split(s, x[i], &a, &b);
    int64_t l = (INDEX32_LIMIT - 1 - b) / a;
    if (l < lim)
      lim = l;
    any = true;
  }
  free(x);
  return any && lim >= s->min && lim < s->max ? lim : 0;
}

static int pick_vec(const fg_plan *p, const fg_kernel *k, int64_t inner, const fg_plan_options *o) {
  if (o && o->no_vectorize)
    return 1;
  int v = 16 / max_elem_size(p, k);
  if (p->sym.affine) { /* a*T + b: a multiple of v for every T */
    while (v > 1 && (inner <= 0 || !fg_sym_multiple(&p->sym, inner, v)))
      v /= 2;
    return v;
  }
  if (fg_sym_involves(&p->sym, inner)) /* T's declared divisor stands for it */
    inner = inner / p->sym.placeholder * p->sym.div;
  while (v > 1 && (inner <= 0 || inner % v))
    v /= 2;
  return v;
}

/* Does any reduction or full-domain output of k use a reduction of k? Then
 * phases depend on each other and a row cannot be split across CTAs. */
static bool reaches(const fg_plan *p, const fg_kernel *k, const fg_value *from,
                    const fg_node *target) {
  const fg_value *stack[4096];
  int sp = 0;
  unsigned char *seen = calloc((size_t)p->g->next_value_id, 1);
  if (!seen)
    return true;
  stack[sp++] = from;
  bool hit = false;
  while (sp && !hit) {
    const fg_value *v = stack[--sp];
    if (seen[v->id] || fg_plan_in_memory(p, v, k->id) || !v->def)
      continue;
    seen[v->id] = 1;
    if (v->def == target) {
      hit = true;
      break;
    }
    for (int a = 0; a < v->def->nin && sp < 4096; a++)
      stack[sp++] = v->def->in[a];
  }
  free(seen);
  return hit;
}

static bool uses_reduction(const fg_plan *p, const fg_kernel *k, const fg_value *v) {
  for (int i = 0; i < k->nreds; i++)
    if (reaches(p, k, v, k->reds[i]))
      return true;
  return false;
}

/* Whether t has k's whole domain as its shape. */
static bool full_size(const fg_kernel *k, const fg_type *t) {
  bool full = t->rank == k->rank;
  for (int d = 0; full && d < k->rank; d++)
    full = t->dims[d].size == k->dims[d];
  return full;
}

/* Whether k writes an output of its full domain (not a reduction). */
static bool writes_full(const fg_kernel *k) {
  for (int i = 0; i < k->nouts; i++)
    if (k->outs[i]->def->op->kind != FG_KIND_REDUCTION && full_size(k, &k->outs[i]->type))
      return true;
  return false;
}

static bool dependent_phases(const fg_plan *p, const fg_kernel *k) {
  for (int i = 0; i < k->nreds; i++)
    for (int j = 0; j < i; j++)
      if (fg_plan_column_variance(k, i) != j && reaches(p, k, k->reds[i]->in[0], k->reds[j]))
        return true;
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    if (o->def->op->kind == FG_KIND_REDUCTION)
      continue;
    bool full = full_size(k, &o->type);
    /* Split kernels write the full outputs that do not use their
     * reductions from each slice (a full reduction fused with a large
     * elementwise result ran in one CTA: issue 17); those that do need
     * the totals first. */
    if (full && uses_reduction(p, k, o))
      return true;
  }
  return false;
}

static int add_temp(fg_plan *p, int64_t bytes, bool zero) {
  fg_temp t = {bytes, zero, NULL, NULL};
  p->temps = fg_arena_append(&p->g->arena, p->temps, &p->ntemps, &t, sizeof t);
  return p->ntemps - 1;
}

static void add_workspace_args(fg_plan *p, fg_kernel *k) {
  fg_buf_ref partials = {FG_BUF_TEMP, k->partial_temp}, counter = {FG_BUF_TEMP, k->counter_temp};
  k->args = fg_arena_append(&p->g->arena, k->args, &k->nargs, &partials, sizeof partials);
  k->args = fg_arena_append(&p->g->arena, k->args, &k->nargs, &counter, sizeof counter);
}

/* Block, chunks and grid of a pointwise kernel of vector width k->vec. */
static void size_pointwise(const fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t n = k->outer;
  k->block = PW_THREADS;
  int64_t groups = ceil_div(n, k->vec);
  if (groups < k->block)
    k->block = groups < 32 ? 32 : (int)ceil_div(groups, 32) * 32;
  /* Large tensors: each thread takes several vectors (a CTA's chunks are
   * block-strided, so every chunk is coalesced), for more loads in flight
   * per thread and fewer CTAs. */
  int sm = p->target.sm_count;
  k->chunks = 1;
  /* At most 2 chunks: as fast as 4 at half the code (docs/benchmarks.md, S1). */
  while (k->chunks < 2 && groups >= (int64_t)k->block * k->chunks * 2 * sm * 8)
    k->chunks *= 2;
  int64_t v;
  if (knob(o, FG_KNOB_PW_CHUNKS, &v))
    k->chunks = (int)v;
  if (knob(o, FG_KNOB_PW_BLOCK, &v))
    k->block = (int)v;
  k->grid[0] = groups ? ceil_div(groups, (int64_t)k->block * k->chunks) : 1;
  k->grid[1] = k->grid[2] = 1;
}

/* ---- flat vectors (issue 17) ----
 * The vector width runs along the last extent, which must be a multiple of
 * it: an output f32[1795,1025,36,3] took vec 1 and wrote 795 MB 4 bytes a
 * thread. A pointwise kernel's outputs are dense, though, one contiguous
 * block each. Flat, a thread's vec lanes are consecutive linear indices of
 * the domain: each output is one vector store (aligned variant), and so is
 * each load of a tensor dense in the domain's order; other operands
 * (broadcasts, pads, transposes, slices) are read an element at a time at
 * each lane's coordinates: lane 0's delinearized from the linear index, the
 * next lanes' by adding one with carries (emit_pointwise.c). Lanes past
 * the end of the last chunk go one at a time. */

/* The flat vector width: 16 bytes of the widest element k moves (its
 * outputs, its tensors); 0 where flat lanes do not apply: 4-bit elements,
 * an output not of the domain's shape, a size of T past the leading dim. */
static int flat_vec(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  if ((o && o->no_vectorize) || k->kind != FG_KERNEL_POINTWISE || k->rank < 1 || k->nouts < 1)
    return 0;
  for (int d = 1; d < k->rank; d++)
    if (fg_sym_involves(&p->sym, k->dims[d]))
      return 0;
  int m = 1;
  for (int i = 0; i < k->nouts; i++) {
    const fg_type *t = &k->outs[i]->type;
    if (!full_size(k, t) || fg_dtype_is_packed(t->dtype))
      return 0;
    if (fg_dtype_size(t->dtype) > m)
      m = fg_dtype_size(t->dtype);
  }
  /* (sched17: with PW_FLAT_DENSE, the operands of the domain's size only:
   * a broadcast is read an element a lane; cost.c) */
  bool dense = fg_pointwise_vector_size(p, k, true) > 0;
  for (int i = 0; i < k->nargs; i++) {
    const fg_value *v = fg_plan_buf_value(p, k->args[i]);
    if (!v || v->type.scalar)
      continue;
    if (fg_dtype_is_packed(v->type.dtype))
      return 0;
    if (fg_dtype_size(v->type.dtype) > m &&
        (!dense || fg_type_numel(&v->type) == fg_type_numel(&k->outs[0]->type)))
      m = fg_dtype_size(v->type.dtype);
  }
  return 16 / m;
}

/* Knob PW_FLAT: 0 never, 1 where the cost model (fg_pointwise_us: the
 * memory term or the arithmetic with the lanes' index arithmetic, the
 * longer) puts the flat schedule 2% or more below the one along the last
 * extent (where a thread's loads along it keep too few bytes in flight:
 * narrow inputs), for a wave of CTAs or more (in less, every thread's
 * loads are issued at once either way, and the model's in-flight term,
 * which counts whole CTAs, would only see the block's rounding), 2
 * wherever flat lanes apply and are wider. A flat thread takes 1 or 2 chunks, the cheaper (a
 * quarter of the CTAs may leave a last wave mostly empty). */
static void choose_flat(const fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t mode = 1, v;
  knob(o, FG_KNOB_PW_FLAT, &mode);
  int fv = flat_vec(p, k, o);
  if (mode == 0 || fv <= k->vec)
    return;
  fg_kernel flat = *k;
  double us = -1;
  /* sched17: with PW_FLAT_DENSE, each width from fv down to twice the last
   * dim's: a narrower one where 2% or more cheaper (it may fill its last
   * wave better, or take fewer index operations a lane); fv alone before. */
  bool halves = fg_pointwise_vector_size(p, k, true) > 0;
  for (int w = fv; w > k->vec && (w == fv || halves); w /= 2) {
    fg_kernel f = *k;
    f.vec = w;
    f.flat = true;
    size_pointwise(p, &f, o);
    double fu = fg_pointwise_us(p, &f);
    if (f.chunks > 1 && !knob(o, FG_KNOB_PW_CHUNKS, &v)) {
      fg_kernel one = f;
      one.chunks = 1;
      one.grid[0] = ceil_div(ceil_div(one.outer, w), one.block);
      if (fg_pointwise_us(p, &one) < fu) {
        f = one;
        fu = fg_pointwise_us(p, &one);
      }
    }
    if (us < 0 || fu < 0.98 * us) {
      flat = f;
      us = fu;
    }
  }
  fv = flat.vec;
  if (mode == 1 &&
      (fg_kernel_cost(p, k, p->target.copy_gbs).waves < 1 || !(us < 0.98 * fg_pointwise_us(p, k))))
    return;
  *k = flat;
  k->why = fg_arena_printf(&p->g->arena,
                           "pointwise: one thread per %d consecutive elements of its dense outputs "
                           "(flat: the last extent, %s, is not a multiple of %d)",
                           fv, fg_sym_formula(&p->sym, k->inner, &p->g->arena), fv);
}

static void schedule_pointwise(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t n = 1;
  for (int i = 0; i < k->rank; i++)
    n *= k->dims[i];
  k->outer = n;
  k->red = 1;
  k->inner = k->rank ? k->dims[k->rank - 1] : 1;
  k->vec = pick_vec(p, k, k->inner, o);
  size_pointwise(p, k, o);
  k->split = 1;
  k->why = "pointwise: one thread per vector of adjacent output elements";
  choose_flat(p, k, o);
}

/* ---- short rows, several a CTA ----
 * A row of at most 32 vector chunks (256 bf16 elements, 128 f32) in a CTA
 * of its own leaves most of its threads idle (MXFP8's 32-element blocks:
 * 2 of 32) and the GPU full of one-warp CTAs. Packed, a row takes L lanes
 * of a warp (the power of two that covers its chunks, one chunk a lane, so
 * the row stays in registers), a CTA block / L rows, reduced by shuffles
 * among the row's lanes (xor offsets below L), the last CTA's rows past
 * the end masked. The block: the cheapest by the cost model among 256,
 * 128, 512, 64 and 32 threads (of equals, within 1%, the one whose grid
 * reaches more SMs, then the one with a tenth fewer threads, then the
 * first),
 * and the packed
 * schedule replaces the CTA a row where the cost model predicts it no
 * slower (fg_kernel_cost counts the threads that load). */
enum { PACK_MAX_LANES = 32 };

static void pack_rows(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t v, nchunks = ceil_div(k->red, k->vec);
  bool forced = knob(o, FG_KNOB_ROW_PACK, &v);
  if ((forced && v == 0) || k->split != 1 || k->ncols || k->ntails || k->outer < 1 ||
      fg_sym_involves(&p->sym, k->red) || nchunks > PACK_MAX_LANES)
    return;
  int lanes = 1;
  while (lanes < nchunks)
    lanes *= 2;
  fg_kernel packed = *k;
  packed.row_lanes = lanes;
  packed.chunks = 1;
  packed.persistent = true;
  static const int blocks[] = {256, 128, 512, 64, 32};
  double best = -1;
  int64_t best_reach = 0, best_threads = 0, sm = p->target.sm_count;
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
    fg_kernel c = packed;
    c.block = blocks[i];
    if (knob(o, FG_KNOB_ROW_PACK_BLOCK, &v))
      c.block = (int)v;
    if (c.block < lanes)
      continue;
    c.grid[0] = ceil_div(k->outer, c.block / lanes);
    double us = fg_kernel_cost(p, &c, p->target.copy_gbs).us;
    /* costs within 1% are equal (the last wave's rounding alone told 32
     * threads from 256 at 2M rows); of equals, the one that reaches more
     * SMs (the model has no limit per SM: few rows take small CTAs), then
     * the one with a tenth fewer threads (a single row: a CTA its size) */
    int64_t reach = c.grid[0] < sm ? c.grid[0] : sm, threads = c.grid[0] * c.block;
    bool better = best < 0 || us < best * 0.99 ||
                  (us <= best * 1.01 &&
                   (reach > best_reach || (reach == best_reach && threads < best_threads * 0.9)));
    if (better) {
      best = us;
      best_reach = reach;
      best_threads = threads;
      packed = c;
    }
  }
  if (best < 0 || (!forced && best > fg_kernel_cost(p, k, p->target.copy_gbs).us))
    return;
  *k = packed;
  k->why = "row reduction, short rows packed: a row a group of lanes of a warp, several rows a "
           "CTA, reduced by shuffles within the group";
}

/* ---- long rows with full-size outputs, a row a cluster ----
 * A row whose full-size outputs need its totals (normalization) cannot
 * split over CTAs that combine partials through memory: each CTA needs
 * the totals before its outputs. A CTA a row keeps rows of up to 64 KB of
 * inputs in registers well (sink_reshape.c, SINK_MAX_ROW); longer ones
 * took every register of an SM in one CTA of 1024 threads, so that one
 * row's barrier and stores left the SM without loads in flight (group
 * norm's rows of 65536 f32 in one kernel: 0.68x torch.compile, spills;
 * docs/benchmarks.md, run X2). On sm_90 such a row is split over a
 * thread-block cluster of C CTAs (2, 4 or 8, the fewest whose slices take
 * at most 32 KB of inputs each, CLUSTER_SLICE_BYTES): each keeps its
 * slice in registers, and each reduction's CTA totals are summed in rank
 * order from the cluster's shared memory (mapa), the same bits in every
 * CTA, so every CTA writes its slice's outputs from registers. The rows
 * are read once; several CTAs share an SM. Returns C, or 1. */
enum {
  CLUSTER_MIN_ROW_BYTES = 64 * 1024,
  CLUSTER_SLICE_BYTES = 32 * 1024,
  CLUSTER_MAX = 8,
  CLUSTER_BLOCK = 256
};

/* The widest element of the row's reduced values and full-size outputs
 * (its arguments are not known yet). */
static int row_elem_size(const fg_kernel *k) {
  int m = 1;
  for (int i = 0; i < k->nreds; i++)
    if (fg_dtype_size(k->reds[i]->in[0]->type.dtype) > m)
      m = fg_dtype_size(k->reds[i]->in[0]->type.dtype);
  for (int i = 0; i < k->nouts; i++)
    if (full_size(k, &k->outs[i]->type) && fg_dtype_size(k->outs[i]->type.dtype) > m)
      m = fg_dtype_size(k->outs[i]->type.dtype);
  return m;
}

/* sched17 (knob ROW_VEC16): the widest element of k's arguments of its
 * whole domain's size (a row's input and full-size outputs, through a
 * reshape or not), or row_elem_size where none is. pick_vec's width is 16
 * elements where no argument has the domain's last dim: group norm's x
 * [16,512,64,64] over rows of 65536 took vec 16 of f32, 64 bytes a lane,
 * so that each warp's access of 16 bytes a thread touches 32 sectors, half
 * of each. */
static int row_move_size(const fg_plan *p, const fg_kernel *k) {
  int64_t numel = 1;
  int m = 0;
  for (int d = 0; d < k->rank; d++)
    numel *= k->dims[d];
  for (int i = 0; i < k->nargs; i++) {
    const fg_value *bv = fg_plan_buf_value(p, k->args[i]);
    if (bv && !bv->type.scalar && fg_type_numel(&bv->type) == numel &&
        fg_dtype_size(bv->type.dtype) > m)
      m = fg_dtype_size(bv->type.dtype);
  }
  return m ? m : row_elem_size(k);
}

int fg_plan_row_cluster(const fg_plan *p, int64_t row_bytes, bool *fits) {
  int64_t v;
  if (fits)
    *fits = false;
  if ((knob(&p->opts, FG_KNOB_ROW_CLUSTER, &v) && v == 0) || !p->target.clusters ||
      row_bytes <= CLUSTER_MIN_ROW_BYTES)
    return 1;
  int64_t c = 2;
  while (c < CLUSTER_MAX && ceil_div(row_bytes, c) > CLUSTER_SLICE_BYTES)
    c *= 2;
  if (fits)
    *fits = ceil_div(row_bytes, c) <= CLUSTER_SLICE_BYTES;
  return (int)c;
}

static int64_t cluster_split(const fg_plan *p, const fg_kernel *k, int64_t r) {
  int64_t v;
  if (knob(&p->opts, FG_KNOB_ROW_CLUSTER, &v) && v == 0)
    return 1;
  if (!p->target.clusters || k->peeled || k->ncols || k->ntails || k->nreds > 32 ||
      fg_sym_involves(&p->sym, r) || !dependent_phases(p, k) || !writes_full(k))
    return 1;
  int64_t c = fg_plan_row_cluster(p, r * row_elem_size(k), NULL);
  if (c <= 1)
    return 1;
  /* sched17: an experiment, where the slices stay in registers */
  if (knob(&p->opts, FG_KNOB_ROW_CLUSTER_SIZE, &v) &&
      ceil_div(r, v) <= (int64_t)k->vec * 1024 * MAX_PERSIST_CHUNKS)
    c = v;
  /* slices of whole vectors (the last one shorter), none empty */
  int64_t slice = ceil_div(ceil_div(r, c), k->vec) * k->vec;
  return ceil_div(r, slice) == c ? c : 1;
}

/* issue 21 (rowpeel): the vector width a row kernel takes by peeling its
 * rows (fg_kernel.peeled: head, aligned body, tail), or 0. It is the
 * width of 16-byte accesses to the widest element, where the row is the
 * domain's last dim alone, static, not a multiple of that width and at
 * least 4 vectors long; not for the row + column form, nor where a
 * tensor has packed (4-bit) elements. */
static int peel_vec(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  int64_t v;
  if (o->no_vectorize || (knob(o, FG_KNOB_ROW_PEEL, &v) && v == 0) || k->ncols || k->ntails ||
      k->rank < 1 || !k->mask[k->rank - 1])
    return 0;
  for (int d = 0; d < k->rank - 1; d++)
    if (k->mask[d])
      return 0;
  int64_t R = k->dims[k->rank - 1];
  int full = 16 / max_elem_size(p, k);
  if (knob(o, FG_KNOB_ROW_VEC16, &v) && v == 1 && full > 16 / row_move_size(p, k))
    full = 16 / row_move_size(p, k);
  if (fg_sym_involves(&p->sym, R) || full <= k->vec || R % full == 0 || R < 4 * (int64_t)full)
    return 0;
  for (int i = 0; i < k->nargs; i++) {
    const fg_value *bv = fg_plan_buf_value(p, k->args[i]);
    if (bv && fg_dtype_is_packed(bv->type.dtype))
      return 0;
  }
  return full;
}

static void shape_row(fg_plan *p, fg_kernel *k, const fg_plan_options *o);

/* A row kernel: the widest vector that divides the row, then, where it
 * does not pack short rows and peeling allows a wider one, that. */
static void schedule_row(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t b = 1, r = 1;
  for (int i = 0; i < k->rank; i++) {
    if (k->mask[i])
      r *= k->dims[i];
    else
      b *= k->dims[i];
  }
  k->outer = b;
  k->red = r;
  k->inner = 1;
  k->peeled = false;
  k->vec = pick_vec(p, k, k->rank && k->mask[k->rank - 1] ? k->dims[k->rank - 1] : 1, o);
  int64_t v;
  bool vec16_set = knob(o, FG_KNOB_ROW_VEC16, &v);
  if (vec16_set && v == 1 && k->vec > 16 / row_move_size(p, k))
    k->vec = 16 / row_move_size(p, k);
  shape_row(p, k, o);
  /* A row a cluster keeps its slice in registers, so a lane's vector sets
   * the registers a thread holds and the CTAs an SM: 16 bytes a lane
   * rather than 16 elements (group norm's f32 rows of 65536: 151 us at
   * vec 16, 112 us at vec 4 with 256 threads; docs/benchmarks.md, run A5).
   * Rows that do not cluster keep pick_vec's width (mxfp8's 32-element
   * blocks were 2.3x slower at 16 bytes a lane in A5). */
  if (!vec16_set && k->cluster > 1 && k->vec > 16 / row_move_size(p, k)) {
    int old = k->vec;
    k->vec = 16 / row_move_size(p, k);
    shape_row(p, k, o);
    if (k->cluster <= 1) {
      k->vec = old;
      shape_row(p, k, o);
    }
  }
  int peel = k->row_lanes == 0 ? peel_vec(p, k, o) : 0;
  if (k->cluster > 1 && knob(o, FG_KNOB_ROW_CLUSTER_PEEL, &v) && v == 1)
    peel = 0;
  if (peel > 0) {
    k->peeled = true;
    k->vec = peel;
    shape_row(p, k, o);
  }
}

/* A row kept in registers that needs no more than one streamed pass: its
 * reductions fold into one (a logsumexp's max and sum: logsumexp.c) and it
 * writes no full-size output, so streaming reads each element once as the
 * registers do. Where the registers take more than LSE_THREADS threads, the
 * whole row sits in one large CTA whose loads wait for its arithmetic (and
 * the reverse) at every row; streamed, CTAs of LSE_THREADS threads with
 * fg_plan_lse_unroll vectors in flight each share an SM, and one's loads
 * overlap another's exponentials (cross-entropy over 50304 columns: one
 * CTA of 928 threads an SM, 0.74 of copy bandwidth; docs/benchmarks.md,
 * run R2). */
static bool stream_lse(const fg_plan *p, fg_kernel *k) {
  int64_t v;
  if ((knob(&p->opts, FG_KNOB_ROW_LSE, &v) && v == 0) || !k->persistent || k->split > 1 ||
      k->cluster > 1 || k->block <= LSE_THREADS || writes_full(k))
    return false;
  k->persistent = false;
  bool one = fg_plan_lse_pairs(p, k) > 0 && fg_plan_row_passes(p, k) == 1;
  k->persistent = true;
  return one;
}

bool fg_plan_writes_full(const fg_kernel *k) { return writes_full(k); }

/* The bytes of the tensors that computing v over k's domain loads and that
 * are not small beside it (more than an eighth of the domain's elements or
 * LIGHT_MAX_BYTES; a symbolic count: -1), each counted once (seen, shared
 * between calls). The leaves are k's parameters and temps; a reduction of
 * k counts as its total (its own phase reads its input). */
enum { LIGHT_MAX_BYTES = 4 << 20 };

static int64_t large_loads(const fg_plan *p, const fg_kernel *k, const fg_value *from,
                           unsigned char *seen) {
  enum { DEPTH = 4096 };
  const fg_value *stack[DEPTH];
  int sp = 0;
  int64_t domain = k->outer * k->red, bytes = 0;
  stack[sp++] = from;
  while (sp) {
    const fg_value *v = stack[--sp];
    if (seen[v->id])
      continue;
    seen[v->id] = 1;
    if (fg_plan_in_memory(p, v, k->id) || !v->def) {
      int64_t n = v->type.scalar ? 1 : fg_type_numel(&v->type);
      if (n < 0)
        return -1;
      if (n > domain / 8 || n * fg_dtype_size(v->type.dtype) > LIGHT_MAX_BYTES)
        bytes += n * fg_dtype_size(v->type.dtype);
      continue;
    }
    if (v->def->op->kind == FG_KIND_REDUCTION)
      continue;
    for (int a = 0; a < v->def->nin; a++) {
      if (sp == DEPTH)
        return -1; /* too deep to tell */
      stack[sp++] = v->def->in[a];
    }
  }
  return bytes;
}

/* The bytes row kernel k's reductions load of tensors not small beside its
 * domain (large_loads, each tensor once), or -1 where that is not known. */
static int64_t reduction_loads(const fg_plan *p, const fg_kernel *k) {
  if (k->kind != FG_KERNEL_ROW || k->nreds == 0 || k->outer <= 0 || k->red <= 0 ||
      fg_sym_involves(&p->sym, k->outer) || fg_sym_involves(&p->sym, k->red))
    return -1;
  unsigned char *seen = calloc((size_t)p->g->next_value_id, 1);
  if (!seen)
    return -1;
  int64_t bytes = 0;
  for (int i = 0; i < k->nreds && bytes >= 0; i++) {
    int64_t b = large_loads(p, k, k->reds[i]->in[0], seen);
    bytes = b < 0 ? -1 : bytes + b;
  }
  free(seen);
  return bytes;
}

/* Whether no reduction of row kernel k loads a tensor that is not small
 * beside its domain (a bias, the rows' statistics or targets): their
 * phases are arithmetic and cached reads, and streaming k reads each large
 * input once, in the outputs' pass. */
bool fg_plan_light_reductions(const fg_plan *p, const fg_kernel *k) {
  return reduction_loads(p, k) == 0;
}

/* The bytes k's arguments move, each once (the reads and writes of a row
 * kept in registers; cost.c). */
static int64_t args_bytes(const fg_plan *p, const fg_kernel *k) {
  double bytes = 0;
  for (int i = 0; i < k->nargs; i++)
    bytes += fg_plan_arg_bytes(p, k->args[i]);
  return (int64_t)bytes;
}

/* A long row (a cluster's, or of more than CLUSTER_MIN_ROW_BYTES in more
 * than LSE_THREADS threads of a CTA) kept in registers whose full-size
 * outputs need its totals, streamed instead
 * (knob ROW_STREAM): CTAs of LSE_THREADS threads that loop over the row, a
 * pass for the reductions (a logsumexp's or a variance's two in one), then
 * one for all the outputs. Kept in registers, the row's loads wait for the
 * reductions' arithmetic and the cluster's barriers, and they for the
 * loads, in every CTA; streamed, the CTAs are small and overlap, at the
 * cost of reading again what the reductions read. Auto (1): where that is
 * at most a third of what the kernel moves once (REREAD_MAX), none where
 * the reductions read only small tensors. Measured (docs/benchmarks.md,
 * runs V2-V3): the cross-entropy backward over 50304 columns, whose sum
 * reads only the targets, 951 -> 618 us; its forward, bf16 logits read
 * twice beside bf16 and f32 log-probabilities written (a quarter), 1813 ->
 * 1459 us; group norm's f32 rows, read twice beside one f32 output (a
 * half), 112 -> 174 us streamed: kept. 2: streamed wherever it can be. */
enum { REREAD_MAX_DIV = 3 };

/* Whether streaming row kernel k reads again at most a third of what it
 * moves once (nothing, where its reductions are light). */
static bool stream_pays(const fg_plan *p, const fg_kernel *k) {
  int64_t reread = reduction_loads(p, k);
  return reread == 0 || (reread > 0 && reread * REREAD_MAX_DIV <= args_bytes(p, k));
}

static bool stream_row(const fg_plan *p, const fg_kernel *k) {
  int64_t v = 1;
  knob(&p->opts, FG_KNOB_ROW_STREAM, &v);
  if (v == 0 || !k->persistent || k->ncols || k->ntails || k->row_lanes ||
      (k->cluster <= 1 &&
       (k->block <= LSE_THREADS || k->red * row_elem_size(k) <= CLUSTER_MIN_ROW_BYTES)) ||
      !writes_full(k) || !dependent_phases(p, k) || fg_sym_involves(&p->sym, k->red))
    return false;
  return v == 2 || stream_pays(p, k);
}

/* Split, chunks, block and grid of a row kernel at its vector width. */
static void shape_row(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t b = k->outer, r = k->red;
  int sm = p->target.sm_count;
  k->split = 1;
  /* (The row + column form loops over rows: never split.) */
  if (b < sm && !dependent_phases(p, k) && !k->ncols && !k->ntails) {
    int64_t want = ceil_div(4 * (int64_t)sm, b);
    int64_t max_split = ceil_div(r, (int64_t)k->vec * ROW_THREADS * 2);
    k->split = (int)(want < max_split ? want : max_split);
    /* Slices that fit in registers: four loads in flight a thread (a
     * streamed slice has one), and with full-size outputs each element is
     * loaded once for the reductions and the outputs alike, not once a
     * phase; 256 threads of 4 chunks, so that several CTAs share an SM and
     * one's loads overlap another's barrier and stores (1024 threads a
     * CTA, one CTA an SM: 0.44 of copy bandwidth; docs/benchmarks.md, S19). */
    int64_t fit = ceil_div(r, (int64_t)k->vec * 256 * 4);
    if (k->split < fit)
      k->split = (int)(fit < INT32_MAX / 2 ? fit : INT32_MAX / 2);
    if (k->split < 1)
      k->split = 1;
  }
  k->cluster = 1;
  int64_t cs = cluster_split(p, k, r), v;
  if (cs > 1)
    k->split = k->cluster = (int)cs;
  int64_t slice = ceil_div(r, k->split);
  if (k->split > 1) { /* keep slices vector-aligned */
    slice = ceil_div(slice, k->vec) * k->vec;
    k->split = (int)ceil_div(r, slice);
  }
  int64_t nchunks = ceil_div(slice, k->vec);
  int64_t e = ceil_div(nchunks, ROW_THREADS);
  /* Long rows: more threads before more chunks (up to 512 x 4), then up
   * to 1024 x 8 in registers. */
  if (e > 4)
    e = ceil_div(nchunks, 512) > 4 ? ceil_div(nchunks, 1024) : 4;
  k->persistent = e <= MAX_PERSIST_CHUNKS;
  if (!k->persistent)
    e = MAX_PERSIST_CHUNKS;
  int64_t t = ceil_div(nchunks, e);
  t = ceil_div(t, 32) * 32;
  if (t > 1024)
    t = 1024;
  if (t < 32)
    t = 32;
  /* A cluster's CTAs: 256 threads, the chunks a thread following (at most
   * MAX_PERSIST_CHUNKS), so that several CTAs share an SM (group norm: 112
   * us at 256 threads against 134 at 512; run A5); knob ROW_CLUSTER_BLOCK
   * sets another size. */
  if (k->cluster > 1) {
    int64_t want[2] = {CLUSTER_BLOCK, CLUSTER_BLOCK};
    if (knob(o, FG_KNOB_ROW_CLUSTER_BLOCK, &v))
      want[0] = v;
    for (int i = 0; i < 2; i++)
      if (ceil_div(nchunks, want[i]) <= MAX_PERSIST_CHUNKS) {
        t = want[i];
        e = ceil_div(nchunks, want[i]);
        break;
      }
  }
  k->block = (int)t;
  k->chunks = (int)e;
  bool streamed = stream_row(p, k);
  if (streamed)
    k->persistent = false, k->split = k->cluster = 1, k->block = LSE_THREADS;
  if (stream_lse(p, k))
    k->persistent = false, k->block = LSE_THREADS, k->chunks = fg_plan_lse_unroll(p, k);
  if (fg_sym_involves(&p->sym, r)) {
    /* The reduced extent involves the symbolic size (opt/symbolic.h): a
     * slice's length is known only at run time, so the threads loop over it
     * (never kept in registers), in as many slices as fill the GPU. */
    k->persistent = false;
    k->chunks = MAX_PERSIST_CHUNKS;
    k->split =
        dependent_phases(p, k) || k->ncols || k->ntails ? 1 : (int)ceil_div(8 * (int64_t)sm, b);
  }
  /* The vectors a streamed pass loads at a time (emit_row.c): one where the
   * reductions load nothing large (the cross-entropy backward: 618 us at
   * one, 676 at two; run V4), else 16 values (its forward: 1459 us at four
   * vectors, 1483 at one). */
  if (!k->persistent)
    k->chunks = fg_plan_light_reductions(p, k) ? 1 : fg_plan_lse_unroll(p, k);
  k->grid[0] = b * k->split;
  k->grid[1] = k->grid[2] = 1;
  k->smem = 0;
  k->why =
      k->cluster > 1 ? "row reduction, a row a thread-block cluster, its slices in registers, the "
                       "totals summed in distributed shared memory"
      : k->split > 1 ? "row reduction split over CTAs with a deterministic grid reduction"
      : k->persistent
          ? "row reduction, one CTA per row, row kept in registers"
          : "row reduction, one CTA per row, rows too long for registers: phases re-read the row";
  bool light = streamed && fg_plan_light_reductions(p, k);
  if (light)
    k->why = "row reduction, one CTA per row, streamed: the reductions load no row-sized tensor, "
             "so the outputs' pass reads the row once";
  else if (!k->persistent && fg_plan_lse_pairs(p, k) > 0 && fg_plan_row_passes(p, k) == 1)
    k->why = streamed ? "row reduction, one CTA per row, streamed: the max and the sum of "
                        "exponentials about it in one pass (online softmax), the row read again by "
                        "the outputs' pass (at most a third of what the kernel moves)"
                      : "row reduction, one CTA per row, streamed: the max and the sum of "
                        "exponentials about it in one pass (online softmax)";
  else if (streamed)
    k->why = "row reduction, one CTA per row, streamed: the row read again by the outputs' pass "
             "(at most a third of what the kernel moves)";
  else if (!k->persistent && fg_plan_row_passes(p, k) < k->nreds)
    k->why = fg_plan_row_passes(p, k) + writes_full(k) > 1
                 ? "row reduction, one CTA per row, rows too long for registers: a variance's mean "
                   "and squared deviations in one pass (Welford, Chan), other phases re-read the "
                   "row"
                 : "row reduction, one CTA per row, rows too long for registers: a variance's mean "
                   "and squared deviations in one pass (Welford, Chan)";
  if (!k->peeled)
    pack_rows(p, k, o);
}

/* Early arrival: a CTA writes its column partials and takes its ticket
 * from inside its last row group, before that group's row reductions and
 * outputs, so the combiners' wait overlaps that work. Where every column
 * reduction's input is known before the row reductions (weight gradients,
 * amax), there are no tail reductions (they need the rows'), no cluster
 * exchange (its buffer may be the pipeline's, and its latency is what the
 * early arrival hides), and the group's rows are not live in registers
 * across it (one row a group, or pipelined: with four rows in registers
 * the amax kernel spilled; docs/benchmarks.md, S2). */

/* Whether a column reduction's input uses the kernel's row reductions. */
static bool cols_use_rows(const fg_plan *p, const fg_kernel *k) {
  for (int i = 0; i < k->ncols; i++)
    if (fg_plan_uses_rows(p, k, k->cols[i]->out[0]))
      return true;
  return false;
}

static bool early_arrival(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  int64_t v;
  if (knob(o, FG_KNOB_ROWCOL_EARLY, &v) && v == 0)
    return false;
  if (k->ncols == 0 || k->ntails > 0 || k->cluster > 1 || !(k->pipeline || k->rows_per_iter <= 1))
    return false;
  return !cols_use_rows(p, k);
}

/* Deferred row totals: where nothing in the row loop needs a row's
 * reductions (no full-size outputs; column inputs and the other reductions
 * do not use them), each warp leaves its share of a row's
 * reductions in shared memory, and every F groups the CTA sums them (one
 * thread a row, warps in order) and writes the rows' results and tail
 * contributions: one barrier every F groups instead of two a group, so
 * the warps' loads no longer go in lockstep, and one large CTA an SM
 * loses nothing to barriers. */
static bool deferrable(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o,
                       bool full_out) {
  int64_t v;
  if ((knob(o, FG_KNOB_ROWCOL_DEFER, &v) && v == 0) || full_out || k->nreds == 0 || k->block < 64 ||
      cols_use_rows(p, k))
    return false;
  for (int i = 0; i < k->nreds; i++)
    for (int j = 0; j < k->nreds; j++)
      if (i != j && reaches(p, k, k->reds[i]->in[0], k->reds[j]))
        return false;
  return true;
}

/* F: the CTA's groups, within one slot a thread (F * U <= threads) and
 * 16 KiB of shared memory. */
static int defer_groups(const fg_kernel *k, int64_t G) {
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  int64_t F = ceil_div(k->outer / U, G), slots = 16 * 1024 / (8 * k->nreds * U * (k->block / 32));
  if (F > k->block / U)
    F = k->block / U;
  if (F > slots)
    F = slots;
  return F >= 1 ? (int)F : 0;
}

/* Max and min of bf16 values accumulate in bf16 pairs (max.NaN.bf16x2,
 * sm_80+): exact, so the same bits, with half the accumulator registers
 * and a quarter of the instructions of widening each element to f32. */
static bool pack_bf16(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  int64_t v;
  if ((knob(o, FG_KNOB_ROWCOL_PACK, &v) && v == 0) || !p->target.bf16x2_minmax || k->vec % 2)
    return false;
  for (int i = 0; i < k->nreds + k->ncols; i++) {
    const fg_node *n = i < k->nreds ? k->reds[i] : k->cols[i - k->nreds];
    if ((n->op->code == FG_OP_AMAX || n->op->code == FG_OP_AMIN) && n->in[0]->type.dtype == FG_BF16)
      return true;
  }
  return false;
}

/* ---- the row + column form (plan.h) ----
 * ctas CTAs loop over rows r = cta, cta + ctas, ..., each keeping its
 * columns' partial sums in registers, and write them to a [ctas, row]
 * partial buffer; the last `combiners` CTAs to arrive wait for the rest,
 * then each combines a set of column ranges over the partials in a fixed
 * order. ctas: as many as fit on the GPU at once (from a register
 * estimate), so that partials stay few. The steps below decide, in order,
 * the fields of fg_kernel; what one step derives for the next is kept in
 * a rowcol_ctx. */
typedef struct rowcol_ctx {
  const fg_plan *p;
  fg_kernel *k;
  const fg_plan_options *o;
  bool threads_given;  /* knob ROWCOL_THREADS set the block */
  bool full_out;       /* some output has the kernel's full domain */
  int64_t per_thread;  /* a row's elements a thread holds */
  int64_t halves;      /* registers an element of the full-size inputs takes, in halves */
  int64_t row_bytes;   /* bytes of the full-size inputs a row */
  int64_t rows_needed; /* rows in flight an SM */
  int64_t pipe_max;    /* the pipeline's buffers in static shared memory */
  int64_t pipe_dyn;    /* ... in dynamic shared memory (knob ROWCOL_ROWS) */
  bool defer;          /* deferred row totals possible */
  int64_t per_sm;      /* CTAs an SM */
  int64_t groups;      /* row groups */
  int64_t ctas;
  int64_t xchg; /* bytes of one CTA's accumulators of the widest column reduction */
} rowcol_ctx;

/* Registers a thread for `rows` rows in flight: the rows' elements (two f32
 * values each when kept for outputs, else as loaded), the column
 * accumulators (f32) and addressing; within 15% of ptxas on the examples
 * (docs/benchmarks.md, S3). The count is enforced (.minnctapersm), so all
 * the CTAs are resident at once. */
static int64_t rowcol_registers(const rowcol_ctx *c, int64_t rows) {
  const fg_kernel *k = c->k;
  return 32 + c->per_thread * (c->full_out ? 2 : 1) * k->ncols +
         (c->full_out && !k->reload ? c->per_thread * 2 * rows
                                    : c->per_thread * c->halves * rows / 2);
}

/* The block (knob ROWCOL_THREADS), the outputs' size and the full-size
 * inputs' bytes and registers a row. */
static void measure_rows(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int64_t v;
  c->threads_given = knob(c->o, FG_KNOB_ROWCOL_THREADS, &v);
  if (c->threads_given) {
    int64_t nchunks = ceil_div(k->red, k->vec), e = ceil_div(nchunks, v);
    if (e <= MAX_PERSIST_CHUNKS) {
      k->chunks = (int)e;
      k->block = (int)(ceil_div(ceil_div(nchunks, e), 32) * 32);
    }
  }
  c->per_thread = (int64_t)k->chunks * k->vec;
  for (int i = 0; i < k->nouts; i++)
    c->full_out |= full_size(k, &k->outs[i]->type);
  int64_t numel = k->outer * k->red;
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == FG_BUF_PARAM) {
      const fg_type *t = &c->p->g->params[k->args[i].index]->type;
      if (t->scalar || fg_type_numel(t) != numel)
        continue;
      c->halves += fg_dtype_size(t->dtype) >= 4 ? 2 * fg_dtype_size(t->dtype) / 4 : 1;
      c->row_bytes += k->red * fg_dtype_size(t->dtype);
    }
  /* Rows in flight an SM: ~64 KiB of loads, or ~128 KiB where the rows
   * need not be kept for full-size outputs (registers allow it;
   * docs/benchmarks.md, S5). */
  c->rows_needed = c->row_bytes > 0 ? ceil_div((c->full_out ? 64 : 128) * 1024, c->row_bytes) : 1;
}

/* Normalization backward keeps f32 intermediates of the row (xhat, g) for
 * its outputs, or re-reads the row (from L1) after the reductions
 * (reload): reload for short rows with two or more column reductions
 * (docs/benchmarks.md, S4). */
static void choose_reload(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int64_t v;
  k->reload = c->full_out && k->ncols >= 2 && c->per_thread <= 8;
  if (knob(c->o, FG_KNOB_ROWCOL_RELOAD, &v))
    k->reload = v == 1;
}

/* Pipelined: each thread copies its part of the next row group into
 * shared memory (cp.async, two buffers of a group's rows, under the 48 KiB
 * of static shared memory) while this group is reduced, so the loop does
 * not wait a memory latency per group. Only where long rows are kept for
 * full-size outputs (docs/benchmarks.md, S6). Beyond pipe_max the copies
 * take dynamic shared memory (k->smem), for several rows a group (knob
 * ROWCOL_ROWS): a CTA may opt in to 227 KiB on sm_90, 163 KiB on sm_80,
 * 99 KiB on sm_86 and sm_89; no faster than the defaults
 * (docs/benchmarks.md, S7), so they stay. */
static void choose_pipeline(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int64_t v;
  c->pipe_max = 40 * 1024;
  /* the two buffers within what the target's opt-in allows, with room to spare */
  int64_t dyn = c->p->target.dyn_smem_per_block;
  c->pipe_dyn = dyn >= 160 * 1024 ? 128 * 1024 : dyn >= 96 * 1024 ? 96 * 1024 : c->pipe_max;
  k->pipeline = c->full_out && !k->reload && k->ncols >= 1 && c->row_bytes >= 16 * 1024;
  if (knob(c->o, FG_KNOB_ROWCOL_PIPE, &v))
    k->pipeline = v == 1 && c->row_bytes > 0; /* no full-size input: nothing to copy */
  if (2 * c->row_bytes > c->pipe_max)
    k->pipeline = false;
}

/* Pipelined, the row waits in shared memory rather than in flight: twice
 * the threads, half the chunks each (docs/benchmarks.md, S8). Deferred
 * rows: no barrier a group, so the same (and then one CTA an SM, from the
 * register count; docs/benchmarks.md, S9); at most 512 threads and one
 * column reduction: the combiners' scratch (shared) grows with both. */
static void widen_block(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  /* Over the symbolic size, deferred row totals but not the wider block
   * they allow: with both, amax_rowcol_small ran 1.15-1.19x its static
   * compiles, without either 1.00-1.13x (docs/benchmarks.md, runs X4 and
   * Y2); amax_rowcol, whose block is already 512, 1.045-1.097x with them
   * at T >= 2731 and 1.108-1.148x without (run Y2; symsuite of 2026-11-27). CTAs may have no
   * rows at all there (T below the combiners): such a CTA arrives after
   * its (empty) loop instead of from inside its last group (emit_rowcol.c,
   * rowcol_rows). */
  bool sym = fg_sym_involves(&c->p->sym, k->dims[0]);
  c->defer = deferrable(c->p, k, c->o, c->full_out);
  if (((k->pipeline && k->block * 2 <= 1024) ||
       (c->defer && !sym && k->ncols <= 1 && k->block * 2 <= 512)) &&
      !c->threads_given && k->chunks % 2 == 0) {
    k->block *= 2;
    k->chunks /= 2;
    c->per_thread /= 2;
  }
}

/* Shared memory a pipelined row takes: each full-size input's chunks, a
 * thread's 16-byte pieces of each for every thread of the block (what the
 * emitter copies; more than the row's bytes where the row is shorter than
 * the block's loads). */
static int64_t pipe_row_bytes(const rowcol_ctx *c) {
  const fg_kernel *k = c->k;
  int64_t bytes = 0, numel = k->outer * k->red;
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == FG_BUF_PARAM) {
      const fg_type *t = &c->p->g->params[k->args[i].index]->type;
      if (t->scalar || fg_type_numel(t) != numel)
        continue;
      int64_t pieces = ceil_div((int64_t)k->vec * fg_dtype_size(t->dtype), 16);
      int64_t b = (int64_t)k->chunks * pieces * k->block * 16;
      bytes += b > k->red * fg_dtype_size(t->dtype) ? b : k->red * fg_dtype_size(t->dtype);
    }
  return bytes;
}

/* Rows a group (issued together): the most of 4, 2 whose registers fit
 * and that the rows in flight need. */
static void choose_rows_per_group(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int rows = 1;
  for (int u = 4; u >= 2; u /= 2) {
    if (k->pipeline && 2 * u * c->row_bytes > c->pipe_max)
      continue;
    int64_t r = rowcol_registers(c, u);
    /* Several rows a CTA only in blocks of 8+ warps or when reloading:
     * small blocks do better with more CTAs (docs/benchmarks.md, S18). */
    bool fits = r <= 240 && c->p->target.regs_per_sm / (r * k->block) >= 1 &&
                (k->block >= 256 || k->reload);
    if (u <= c->rows_needed && k->outer % u == 0 && fits) {
      rows = u;
      break;
    }
  }
  /* Few rows: fewer a group, so that every SM gets a CTA. */
  while (rows > 1 && k->outer / rows < 2 * (int64_t)c->p->target.sm_count)
    rows /= 2;
  int64_t v;
  if (knob(c->o, FG_KNOB_ROWCOL_ROWS, &v) && k->outer % v == 0 &&
      !(k->pipeline && 2 * v * c->row_bytes > c->pipe_dyn))
    rows = (int)v;
  k->rows_per_iter = rows;
  k->pipe_bytes = k->pipeline ? (int)(2 * rows * pipe_row_bytes(c)) : 0;
}

/* CTAs an SM: what registers and threads allow, no more than the rows in
 * flight need, but at least 8 warps; then the CTAs, at least two row
 * groups each (partials stay under half an f32 copy of the data). */
static void choose_ctas(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  const fg_target *t = &c->p->target;
  int rows = k->rows_per_iter;
  int64_t per_sm = t->regs_per_sm / (rowcol_registers(c, rows) * k->block);
  if (per_sm > t->threads_per_sm / k->block)
    per_sm = t->threads_per_sm / k->block;
  int64_t need = ceil_div(c->rows_needed, rows), warps = ceil_div(8, k->block / 32);
  if (need < warps)
    need = warps;
  if (per_sm > need)
    per_sm = need;
  if (k->pipeline && per_sm > 200 * 1024 / (2 * rows * c->row_bytes))
    per_sm = 200 * 1024 / (2 * rows * c->row_bytes);
  if (per_sm < 1)
    per_sm = 1;
  int64_t v;
  if (knob(c->o, FG_KNOB_ROWCOL_CTAS, &v) && v <= t->threads_per_sm / k->block)
    per_sm = v;
  k->min_ctas_per_sm = (int)per_sm;
  c->per_sm = per_sm;
  c->ctas = (int64_t)t->sm_count * per_sm;
  c->groups = k->outer / rows;
  if (c->ctas > c->groups / 2)
    c->ctas = c->groups / 2 > 0 ? c->groups / 2 : 1;
}

/* Clusters (sm_90): the CTAs of a cluster first combine their column
 * partials through distributed shared memory, so there are that many
 * times fewer to write and for the combiners to read. The combiners wait
 * for every CTA, so all must be resident at once: clusters of 2 fill a
 * GPC's slots (an even number of SMs) whatever per_sm; larger clusters are
 * slower (docs/benchmarks.md, S10). Larger ones (a knob) only where the
 * size divides 2 * per_sm. */
static void choose_cluster(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int size = 1;
  for (int i = 0; i < k->ncols; i++) {
    int64_t b = k->red * fg_dtype_size(fg_reduce_partial_dtype(k->cols[i]));
    if (b > c->xchg)
      c->xchg = b;
  }
  if (c->p->target.clusters && k->ncols > 0) {
    int64_t v;
    size = knob(c->o, FG_KNOB_CLUSTER, &v) ? (int)v : 0;
    /* The exchange pays only where two column reductions' partials would
     * be written and combined; with one, its latency at the end costs as
     * much as half the partials save (docs/benchmarks.md, S11). */
    if (!size)
      size = k->ncols >= 2 ? 2 : 1;
    while (size > 1 && (2 * c->per_sm % size || c->ctas < 2 * size))
      size /= 2;
    /* All CTAs must be resident, and clusters are placed whole: at 9 CTAs
     * an SM in clusters of 2 the H100 held 1056 of 1188 (run X2,
     * docs/benchmarks.md), so a per_sm above the size becomes a multiple
     * of it (one CTA an SM in clusters of 2 was resident: run X2). */
    if (size > 1 && c->per_sm > size && c->per_sm % size)
      c->per_sm -= c->per_sm % size;
    /* ... and no more an SM than clusters leave resident (at 10 an SM
     * in clusters of 2, 1056 of 1172 CTAs: run T2) */
    if (size > 1 && c->per_sm > c->p->target.cluster_ctas_per_sm)
      c->per_sm = c->p->target.cluster_ctas_per_sm / size * size;
    if (size > 1 && c->per_sm != k->min_ctas_per_sm) {
      k->min_ctas_per_sm = (int)c->per_sm;
      if (c->ctas > c->p->target.sm_count * c->per_sm)
        c->ctas = c->p->target.sm_count * c->per_sm;
    }
    /* The exchange buffer shares the pipeline's shared memory (or has its
     * own), within the 48 KiB of static shared memory. */
    int64_t arena = k->pipeline && k->pipe_bytes > c->xchg ? k->pipe_bytes : c->xchg;
    if (c->xchg > 32 * 1024 || (arena > 40 * 1024 && k->pipe_bytes <= c->pipe_max))
      size = 1;
    c->ctas = c->ctas / size * size;
  }
  k->cluster = size;
  k->xchg_bytes = size > 1 ? (int)ceil_div(c->xchg, 16) * 16 : 0;
  /* The pipeline's buffers (and the exchange, which reuses them) past the
   * static limit: dynamic shared memory, which the loader opts in to. */
  if (k->pipeline && k->pipe_bytes > c->pipe_max)
    k->smem = k->pipe_bytes > k->xchg_bytes ? k->pipe_bytes : k->xchg_bytes;
}

/* The fewest CTAs (in whole clusters) with the same number of groups for
 * the busiest one: no slower, and fewer partials. */
static void size_grid(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int64_t v;
  if (!(knob(c->o, FG_KNOB_ROWCOL_FILL, &v) && v == 1))
    c->ctas = ceil_div(c->groups, ceil_div(c->groups, c->ctas));
  c->ctas = ceil_div(c->ctas, k->cluster) * k->cluster;
  k->grid[0] = c->ctas;
}

/* Combiners: one per column block of combine_cols columns, plus one for
 * the tail reductions, so that none works twice as long as the others (a
 * combiner with two blocks ended the amax kernel 1 us after the rest:
 * docs/benchmarks.md, S12); blocks as narrow as that allows, so each sums
 * few partials per column. They wait for every CTA, so all must be
 * resident at once (the plan says kernel-resident; the loader checks). */
static void choose_combiners(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  int64_t tail = k->ntails ? 1 : 0, v;
  /* Over the symbolic size the grid is max(combiners, min(ctas, (T+1)/2))
   * (symbolic_grid): combiners up to half the CTAs, so that the grid
   * follows T down to that many as a static compile's does (amax_rowcol at
   * T = 384: 257 combiners made 257 CTAs for 384 rows, against the static
   * compile's 192 CTAs of two rows and 129 combiners; 1.17x). */
  int64_t room = fg_sym_involves(&c->p->sym, k->dims[0]) && c->ctas >= 2 ? c->ctas / 2 : c->ctas;
  int cols = 8;
  while (cols < k->block && ceil_div(k->red, cols) + tail > room)
    cols *= 2;
  if (cols > k->block)
    cols = k->block;
  if (knob(c->o, FG_KNOB_ROWCOL_CW, &v) && v <= k->block)
    cols = (int)v;
  int64_t n = ceil_div(k->red, cols) + tail;
  if (n > c->ctas)
    n = c->ctas;
  k->combiners = k->ncols == 0 ? 1 : (int)n;
  k->combine_cols = cols;
  if (knob(c->o, FG_KNOB_ROWCOL_CVEC, &v))
    k->combine_loads = (int)v;
}

/* How the rows' totals and the arrival are ordered: deferred totals,
 * early arrival, bf16 pairs. */
static void choose_row_order(rowcol_ctx *c) {
  fg_kernel *k = c->k;
  k->defer_groups = c->defer ? defer_groups(k, c->ctas) : 0;
  k->early_arrive = !k->defer_groups && early_arrival(c->p, k, c->o);
  k->pack_bf16 = pack_bf16(c->p, k, c->o);
}

/* Partials: each column reduction's [ctas / cluster, R] accumulators (each
 * region 16-byte aligned), then 8 bytes a CTA for each tail reduction,
 * then (knob TRACE) 64 bytes a CTA of timeline; and the arrival counter. */
static void allocate_partials(rowcol_ctx *c, fg_plan *p) {
  fg_kernel *k = c->k;
  int64_t rows = c->ctas / k->cluster, bytes = 0, v;
  for (int i = 0; i < k->ncols; i++)
    bytes += ceil_div(rows * k->red * fg_dtype_size(fg_reduce_partial_dtype(k->cols[i])), 16) * 16;
  bytes += 8 * c->ctas * k->ntails;
  if (knob(c->o, FG_KNOB_TRACE, &v) && v == 1) {
    k->trace_off = ceil_div(bytes, 16) * 16;
    bytes = k->trace_off + 64 * c->ctas;
  }
  k->partial_temp = add_temp(p, bytes, false);
  k->counter_temp = add_temp(p, 8, true); /* a 64-bit arrival counter (emit_rowcol.c) */
  add_workspace_args(p, k);
}

static void schedule_rowcol(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  rowcol_ctx c = {.p = p, .k = k, .o = o};
  measure_rows(&c);
  choose_reload(&c);
  choose_pipeline(&c);
  widen_block(&c);
  choose_rows_per_group(&c);
  choose_ctas(&c);
  choose_cluster(&c);
  size_grid(&c);
  choose_combiners(&c);
  choose_row_order(&c);
  allocate_partials(&c, p);
  k->why = k->cluster > 1
               ? "row reduction with column reductions: CTAs loop over rows, clusters sum their "
                 "partials in shared memory, the last CTAs to arrive combine the clusters' in a "
                 "fixed order"
               : "row reduction with column reductions: CTAs loop over rows, the last to arrive "
                 "combine the partials in a fixed order";
}

/* colthr (issue 17): threads a column of a column kernel. Where the
 * columns (`threads`, one a group of vec outputs) leave a CTA below half of
 * COL_THREADS, each column takes R threads: R = COL_THREADS / threads,
 * each thread at least min_slice rows, the groups' totals in shared memory
 * (8 bytes a reduction, variance offset and lane: at most
 * COL_GROUP_SMEM), and none where a reduction needs another's total
 * (dependent_phases: no partial totals). Perf fuzzing's g249 (sum of i16
 * [2048,128,128] over [0,1]: 32 columns) ran 32 CTAs of 32 threads. Knob
 * COL_THREADS forces R (within the same limits but the rows). */
enum { COL_GROUP_SMEM = 16 * 1024 };
static int col_threads(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o,
                       int64_t threads, int64_t r, int64_t min_slice) {
  int64_t R, v;
  if (dependent_phases(p, k) || threads >= 1024)
    return 1;
  if (knob(o, FG_KNOB_COL_THREADS, &v))
    R = v;
  else {
    if (threads * 2 > COL_THREADS || r < 64)
      return 1;
    R = COL_THREADS / threads;
    if (R > r / min_slice)
      R = r / min_slice;
  }
  if (R * threads > 1024)
    R = 1024 / threads;
  int64_t per = (int64_t)8 * (k->nreds + fg_plan_column_variances(k)) * k->vec * threads;
  if (R * per > COL_GROUP_SMEM)
    R = COL_GROUP_SMEM / per;
  return R > 1 ? (int)R : 1;
}

/* The split's cap, by the partials the last CTA of a tile combines: its
 * tile's outputs x split, vec a thread, so split / R a thread with R
 * threads a column (combine_range, emit_column.c). At most 32 a thread
 * (S13: the tail grows with them; docs/benchmarks.md), and with R > 1 the
 * partials (8 bytes each, written and read once) at most a sixteenth of the
 * bytes the kernel reads (r x the input's element size a column), though
 * never below 32 slices; 64 where 32 would leave SMs idle. */
static int64_t col_split_cap(const fg_plan *p, const fg_kernel *k, int64_t r, int64_t R) {
  int64_t cap = 32 * R;
  /* Where 32 leaves SMs without a CTA (a bias gradient of 768 columns in
   * vectors of two: 2 tiles, 64 CTAs), 64 (docs/benchmarks.md, runs V4,
   * V7). */
  if (R == 1 && k->grid[0] * cap < p->target.sm_count)
    cap = 64;
  if (R > 1) {
    int64_t bytes = r * fg_kernel_input_size(p, k) / (16 * 2 * 8);
    if (bytes < cap)
      cap = bytes > 32 ? bytes : 32;
  }
  return cap;
}

/* The fewest rows a slice of a split column kernel takes (schedule_column). */
static int64_t col_min_slice(const fg_plan *p, const fg_kernel *k) {
  return fg_kernel_compute_heavy(p, k) ? (fg_kernel_input_size(p, k) <= 2 ? 8 : 4) : 32;
}

/* A column kernel's block, grid, threads a column and split for its vector
 * width k->vec (schedule_column). */
static void column_grid(fg_plan *p, fg_kernel *k, const fg_plan_options *o, int64_t kept, int64_t r,
                        int wsz, bool kept_sym) {
  bool heavy = fg_kernel_compute_heavy(p, k);
  int64_t min_slice = col_min_slice(p, k);
  int64_t threads = ceil_div(kept, k->vec);
  k->block = COL_THREADS;
  if (threads < k->block)
    k->block = threads < 32 ? 32 : (int)ceil_div(threads, 32) * 32;
  k->grid[0] = ceil_div(threads, k->block);
  k->col_threads = kept_sym ? 1 : col_threads(p, k, o, threads, r, min_slice);
  if (k->col_threads > 1) { /* one CTA's columns, each R threads */
    k->block = (int)threads * k->col_threads;
    k->grid[0] = 1;
  }
  int64_t R = k->col_threads > 1 ? k->col_threads : 1;
  int sm = p->target.sm_count;
  int64_t v;
  k->split = 1;
  if (kept_sym) {
    /* Keeping the symbolic size T: the tiles (grid x) are a formula of T,
     * and so is the split, the rule below evaluated at each run
     * (symbolic_grid, col_split_formula); here its largest value. Where
     * tiles are few, the static compile narrows a thread's vector to 8
     * bytes (more threads), which a choice made at run time cannot: a wider
     * vector's slices are as much shorter, the same bytes a thread. */
    int64_t ms = k->vec * wsz > 8 ? min_slice * 8 / (k->vec * wsz) : min_slice;
    if (r >= 64 && !dependent_phases(p, k)) {
      int64_t max_split = ceil_div(r, ms > 0 ? ms : 1);
      k->split = (int)(max_split < 32 ? max_split : 32);
      if (knob(o, FG_KNOB_COL_SPLIT, &v) && v <= max_split)
        k->split = (int)v;
    }
  } else if (k->grid[0] < (heavy ? 8 : 2) * sm && r >= 64 && !dependent_phases(p, k)) {
    int64_t want = ceil_div((heavy ? 8 : 4) * (int64_t)sm, k->grid[0]);
    int64_t max_split = ceil_div(r, min_slice * R);
    k->split = (int)(want < max_split ? want : max_split);
    int64_t cap = col_split_cap(p, k, r, R);
    if (k->split > cap)
      k->split = (int)cap;
    if (knob(o, FG_KNOB_COL_SPLIT, &v) && v <= max_split)
      k->split = (int)v;
  }
}

static void schedule_column(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t kept = 1, r = 1, inner = 1;
  int last_red = -1;
  for (int i = 0; i < k->rank; i++)
    if (k->mask[i])
      last_red = i;
  for (int i = 0; i < k->rank; i++) {
    if (k->mask[i])
      r *= k->dims[i];
    else
      kept *= k->dims[i];
    if (i > last_red)
      inner *= k->dims[i];
  }
  k->outer = kept / (inner ? inner : 1);
  k->red = r;
  k->inner = inner;
  k->vec = pick_vec(p, k, k->rank && !k->mask[k->rank - 1] ? k->dims[k->rank - 1] : 1, o);
  /* A thread owns vec adjacent outputs: where that leaves too few threads
   * (with the reduced extent split as far as below) for a quarter of the
   * GPU's thread slots, narrower vectors, down to 8 bytes a load (bias-GELU
   * backward's column kernel: docs/benchmarks.md, S20). */
  int widest = k->vec;
  int64_t slots = (int64_t)p->target.sm_count * p->target.threads_per_sm;
  /* Arithmetic-heavy kernels (cost.c: the instructions take at least half
   * the bytes' time; GELU backward's tanh) want more CTAs than the bytes
   * in flight need: a warp's next loads wait behind its own arithmetic, so
   * more warps keep both the lanes and the memory busy. Their reduced
   * extent splits into slices down to one group of rows a thread, for 8
   * CTAs an SM, not 4 (bias_gelu_bwd_small at vec 4: 32 CTAs, 15.2 us, at
   * vec 2: 64, 12.5 us, S20; to be measured with 128:
   * bench/run.sh --only bias_gelu_bwd_small). The vector width keeps S20's
   * rule: 4-byte vectors were slower for bias_gelu_bwd itself (S20). */
  int64_t split_est = ceil_div(r, 32) < 32 ? ceil_div(r, 32) : 32;
  int wsz = max_elem_size(p, k), full = full_elem_size(p, k);
  bool kept_sym = k->rank && !k->mask[0] && fg_sym_involves(&p->sym, k->dims[0]);
  /* Not below 8-byte loads of the full-size tensors where the CTAs (with
   * the split) already cover the SMs: a bias gradient of bf16 [8192,
   * 3072] took 24.5 us in vectors of 2 and 19.1 in vectors of 4 (the same
   * 192 CTAs); of [8192, 768] in vectors of 4, 64 CTAs, 11.3 us against
   * 9.6 in vectors of 2 (docs/benchmarks.md, run T1). */
  while (k->vec * wsz > 8 && ceil_div(kept, k->vec) * split_est < slots / 4 && r >= 64) {
    if (!kernel_symbolic(p, k) && k->vec * full <= 8 && k->vec * wsz <= 16) {
      column_grid(p, k, o, kept, r, wsz, kept_sym);
      if (k->grid[0] * k->split >= p->target.sm_count)
        break;
    }
    k->vec /= 2;
  }
  int64_t cv;
  if (knob(o, FG_KNOB_COL_VEC, &cv))
    k->vec = cv < widest ? (int)cv : widest;
  column_grid(p, k, o, kept, r, wsz, kept_sym);
  int64_t v;
  /* Rows whose loads are issued together: a column kernel has few CTAs
   * (one thread per V outputs), so each thread needs several loads in
   * flight: 8 rows for 2-byte inputs, 4 for wider ones (the same 16 bytes
   * a row, but twice the registers once widened to f32 for bf16;
   * docs/benchmarks.md, S14). */
  k->rows_per_iter = fg_kernel_input_size(p, k) <= 2 ? 8 : 4;
  if (knob(o, FG_KNOB_COL_ROWS, &v))
    k->rows_per_iter = (int)v;
  if (knob(o, FG_KNOB_COL_COMBINE, &v))
    k->combine_batch = (int)v;
  k->grid[1] = k->split;
  k->grid[2] = 1;
  k->why = k->split > 1 ? "column reduction: threads own outputs, reduced extent split over CTAs "
                          "(deterministic grid reduction)"
                        : "column reduction: threads own outputs and loop over the reduced extent";
  if (fg_plan_column_variances(k))
    k->why = k->split > 1
                 ? "column reduction: threads own outputs, reduced extent split over CTAs "
                   "(deterministic grid reduction); a variance's mean and squared deviations in "
                   "one pass (Welford a thread, Chan over the slices in order)"
                 : "column reduction: threads own outputs and loop over the reduced extent; a "
                   "variance's mean and squared deviations in one pass (Welford)";
}

/* issue 19: the attention kernel (FlashAttention-2's forward). Each warp
 * owns rows_per_warp query rows (two m16n8k16 row blocks where the
 * registers allow, so that every K and V fragment a warp loads from shared
 * memory feeds two mma), 4 warps a CTA; its S = Q K^T tile (rows x Bc) and
 * O tile (rows x D) stay in registers. The tiles come from a register
 * estimate a thread's f32 accumulators give (O: rows D / 32, S: rows Bc /
 * 32, Q's fragments if kept: rows D / 64) plus ATTN_REG_BASE for the
 * rest (addresses, fragments in flight, m and l), against the 255 a
 * thread may have at two CTAs an SM:
 *   rows a warp: 32 if O and the smallest S fit, else 16 (D = 256);
 *   Bc: the largest of 128, 64, 32 whose S fits and whose 2-stage tiles
 *   fit the shared memory a CTA may have;
 *   Q's fragments in registers if they fit too, else reloaded from shared
 *   memory (ldmatrix) every block, as FlashAttention-2 does;
 *   stages of K, V tiles: the most (3, 2, 1) that keep as many CTAs an SM
 *   as the registers allow.
 * At D = 64 this gives Br 128 x Bc 128, at D = 128 Br 128 x Bc 64
 * (FlashAttention-2's tiles for the H100), at D = 96 Bc 64 with 3 stages,
 * at D = 256 Br 64 x Bc 64. Tiles live in dynamic shared memory, rows
 * padded by 8 elements (16 bytes) so that the 8 rows an ldmatrix phase
 * touches fall in different banks. Vector width 8 (16-byte copies of the
 * tiles) where every operand's head dim is contiguous and its other
 * strides and offset are multiples of 8. */
enum { ATTN_WARPS = 4, ATTN_PAD = 8, ATTN_REGS = 255, ATTN_REG_BASE = 80 };

/* The estimate of a thread's registers (see above). */
static int attn_regs(int rows_per_warp, int64_t D, int bc, bool q_regs) {
  return (int)(rows_per_warp * D / 32 + rows_per_warp * bc / 32 +
               (q_regs ? rows_per_warp * D / 64 : 0)) +
         ATTN_REG_BASE;
}

static int attn_smem(int br, int bc, int stages, int pitch) {
  return (br + stages * 2 * bc) * pitch * 2;
}

/* CTAs an SM the registers allow (ptxas holds the code to them:
 * .minnctapersm); registers are given a warp 256 at a time. */
static int attn_ctas(const fg_target *t, int block, int regs) {
  int n = t->regs_per_sm / (block * ((regs + 7) / 8 * 8));
  return n < 1 ? 1 : n;
}

/* The most stages of K, V tiles (3, 2, 1) that keep ctas CTAs an SM (an
 * SM has a CTA's limit plus 1 KiB, and each CTA reserves 1 KiB); 0 when
 * not even one fits a CTA. */
static int attn_stages(const fg_target *t, int br, int bc, int pitch, int ctas) {
  for (int s = 3; s >= 1; s--) {
    int need = attn_smem(br, bc, s, pitch);
    if (need <= t->dyn_smem_per_block &&
        (s == 1 || (int64_t)ctas * (need + 1024) <= t->dyn_smem_per_block + 1024))
      return s;
  }
  return 0;
}

/* Whether operands first..first + n - 1 of k's node allow 16-byte tile
 * copies: head dim contiguous, other strides and offset multiples of 8. */
static bool attn_vec_ok(const fg_plan *p, const fg_kernel *k, int first, int n) {
  for (int i = first; i < first + n; i++) {
    const fg_value *base;
    fg_strided s;
    if (!fg_plan_attn_source(p, k->attn->in[i], k->id, &base, &s) || s.rank != 4 ||
        s.strides[3] != 1 || s.offset % 8)
      return false;
    for (int d = 0; d < 3; d++)
      if (s.strides[d] % 8)
        return false;
  }
  return true;
}

/* issue 19 (wgmma): the forward by wgmma.mma_async where the target is
 * sm_90a (knob ATTN_WGMMA=0: never), the head dim 64 or 128 and the dtype
 * 16-bit (emit_attention.c, "wgmma"; FlashAttention-3's consumer loop
 * without its producer warp and TMA). A warpgroup owns 64 query rows
 * (m64), two a CTA at D = 128 and one at D = 64 (knob ATTN_WG): br 128
 * or 64. Registers a thread: S (bc / 2 f32), O (D / 2), P (bc / 4 pairs)
 * and about 80 for the rest; bc 128 keeps that within 255 at both head
 * dims (240 at D = 128, 208 at D = 64), so bc = 128 (knob ATTN_BC: 64 or
 * 128). Two stages of K, V tiles (knob ATTN_STAGES 1-3 where they fit);
 * tiles unpadded in the 128-byte swizzle, 1 KiB more to align them to
 * 1024 bytes: (br + 2 stages bc) D 2 + 1024 bytes, 164864 at D = 128
 * (one CTA an SM), 74752 at D = 64 (three). */
enum { ATTN_WG_ROWS = 64 };

static bool attn_wgmma_ok(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  const fg_type *q = &k->attn->in[0]->type;
  int64_t v, D = q->dims[3].size;
  if (!p->target.arch_specific || p->target.arch != 90 || (D != 64 && D != 128) ||
      (q->dtype != FG_BF16 && q->dtype != FG_F16))
    return false;
  return !(o && knob(o, FG_KNOB_ATTN_WGMMA, &v) && v == 0);
}

static int attn_wgmma_smem(int br, int bc, int stages, int64_t D) {
  return (int)((br + stages * 2 * bc) * D * 2) + 1024;
}

static void schedule_attention_wgmma(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t v, D = k->attn->in[0]->type.dims[3].size;
  /* One warpgroup a CTA at head dim 64: its tiles fit three CTAs an SM,
   * which pass no barrier together, so one's softmax runs under another's
   * wgmmas; two warpgroups of one CTA meet at its barrier every key block
   * and do their softmax at the same time, the tensor cores idle. Run C5
   * (docs/benchmarks.md): [8,16,2048,64] 300.8 us against 399.5 with two
   * (which ran 298 only while ptxas serialized every wgmma). At 128 one
   * warpgroup's stages leave room for one CTA: two. */
  /* (attnpp, attnws: two, which their knobs need, where ATTN_PINGPONG or
   * ATTN_WS is given without ATTN_WG) */
  bool two =
      o && ((knob(o, FG_KNOB_ATTN_PINGPONG, &v) && v) || (knob(o, FG_KNOB_ATTN_WS, &v) && v));
  int wg = o && knob(o, FG_KNOB_ATTN_WG, &v) ? (int)v : D == 64 && !two ? 1 : 2;
  k->attn_wgmma = true;
  k->attn_warps = 4 * wg;
  k->block = 32 * k->attn_warps;
  k->attn_br = ATTN_WG_ROWS * wg;
  k->attn_pitch = (int)D;
  k->attn_bc = o && knob(o, FG_KNOB_ATTN_BC, &v) ? (int)v : 128;
  /* The overlapped loop at head dim 128 only: at 128 it was 1-4% faster,
   * at 64 20% slower (docs/benchmarks.md, run Z9b). */
  k->attn_overlap = o && knob(o, FG_KNOB_ATTN_OVERLAP, &v) ? v == 1 : D == 128;
  k->attn_stages = o && knob(o, FG_KNOB_ATTN_STAGES, &v) ? (int)v : k->attn_overlap ? 3 : 2;
  /* attnpp: pingpong between the two warpgroups, inside the overlapped
   * loop (turned on by it unless ATTN_OVERLAP=0 is given) */
  bool pp_set = o && knob(o, FG_KNOB_ATTN_PINGPONG, &v);
  k->attn_pingpong = pp_set && wg == 2 ? (int)v : 0;
  if (k->attn_pingpong && !(o && knob(o, FG_KNOB_ATTN_OVERLAP, &v))) {
    k->attn_overlap = true;
    if (!(o && knob(o, FG_KNOB_ATTN_STAGES, &v)))
      k->attn_stages = 3;
  }
  if (k->attn_stages < 3) /* the overlap keeps block j - 1's V while block j + 1 loads */
    k->attn_overlap = false;
  /* By default FlashAttention-3's order (mode 2: one group's S and P V,
   * then the other's) wherever the overlapped loop runs two warpgroups:
   * their softmaxes no longer start together. [4,32,4096,128] 2146.75 us
   * against 2325.52 / 2309.12, causal 1102.24 against 1263.25 / 1262.67
   * (run R3, docs/benchmarks.md; mode 1: 2201.65, 1238.10). */
  if (!pp_set && k->attn_overlap && wg == 2)
    k->attn_pingpong = 2;
  if (!k->attn_overlap)
    k->attn_pingpong = 0;
  k->attn_ldmatrix = false;
  k->attn_q_regs = false;
  k->min_ctas_per_sm = 1;
  /* the overlapped loop's 16 bytes after the stages: the slot that orders
   * its wait after the softmax (backend_ptx/emit_attention.c,
   * wg_wait_softmax) */
  k->smem = attn_wgmma_smem(k->attn_br, k->attn_bc, k->attn_stages, D) + (k->attn_overlap ? 16 : 0);
  /* attnws: a producer warpgroup after the consumers' (block + 128: 384
   * threads; setmaxnreg moves registers to the consumers), the overlapped
   * loop over a ring of 3 stages (unless ATTN_STAGES says 3 too), 2
   * mbarriers a stage after the order slot (64 bytes); ATTN_PINGPONG is
   * replaced by its own (ATTN_WS=2). Two consumer warpgroups only, and
   * off where ATTN_OVERLAP=0 or ATTN_STAGES < 3 is given. */
  k->attn_ws = o && knob(o, FG_KNOB_ATTN_WS, &v) ? (int)v : 0;
  if (wg != 2 || (o && knob(o, FG_KNOB_ATTN_OVERLAP, &v) && v == 0) ||
      (o && knob(o, FG_KNOB_ATTN_STAGES, &v) && v < 3))
    k->attn_ws = 0;
  if (k->attn_ws) {
    k->attn_overlap = true;
    k->attn_stages = 3;
    k->attn_pingpong = 0;
    k->block += 128;
    k->smem = attn_wgmma_smem(k->attn_br, k->attn_bc, k->attn_stages, D) + 16 + 64;
  }
  (void)p;
}

static bool schedule_attention(fg_plan *p, fg_kernel *k, const fg_plan_options *o, fg_diag *d) {
  const fg_node *n = k->attn;
  const fg_type *q = &n->in[0]->type, *kt = &n->in[1]->type;
  for (int i = 0; i < 4; i++)
    if (fg_sym_involves(&p->sym, q->dims[i].size) || fg_sym_involves(&p->sym, kt->dims[i].size)) {
      fg_error(d, n->loc, "'sdpa' over the symbolic size %s is not supported by the code generator",
               p->sym.name);
      return false;
    }
  for (int i = 0; i < 3; i++) {
    const fg_value *base;
    fg_strided s;
    if (!fg_plan_attn_source(p, n->in[i], k->id, &base, &s)) {
      fg_internal_error(d, n->loc, "operand %d of 'sdpa' is not in memory for kernel %d", i, k->id);
      return false;
    }
  }
  int64_t B = q->dims[0].size, H = q->dims[1].size, Sq = q->dims[2].size, D = q->dims[3].size;
  const fg_target *t = &p->target;
  int64_t v;
  if (attn_wgmma_ok(p, k, o)) {
    schedule_attention_wgmma(p, k, o);
    goto tiles_done;
  }
  k->attn_warps = ATTN_WARPS;
  k->block = 32 * k->attn_warps;
  k->attn_pitch = (int)D + ATTN_PAD;
  int rows = attn_regs(32, D, 32, false) <= ATTN_REGS ? 32 : 16;
  if (o && knob(o, FG_KNOB_ATTN_WARP_ROWS, &v))
    rows = (int)v;
  k->attn_br = rows * k->attn_warps;
  /* the largest Bc whose registers fit and whose tiles take two stages or
   * more at the CTAs an SM those registers allow; else the largest that
   * fits with one */
  int bc = 0, stages = 0, ctas = 1;
  for (int c = 128; c >= 32 && stages < 2; c /= 2) {
    int regs = attn_regs(rows, D, c, false);
    if (regs > ATTN_REGS)
      continue;
    int n = attn_ctas(t, k->block, regs), s = attn_stages(t, k->attn_br, c, k->attn_pitch, n);
    if (s > stages)
      bc = c, stages = s, ctas = n;
  }
  if (!bc)
    bc = 32;
  if (o && knob(o, FG_KNOB_ATTN_BC, &v))
    bc = (int)v;
  k->attn_bc = bc;
  k->attn_q_regs = attn_regs(rows, D, bc, true) <= ATTN_REGS;
  /* Q's fragments held only where that keeps the CTAs an SM and stages */
  if (k->attn_q_regs) {
    int n = attn_ctas(t, k->block, attn_regs(rows, D, bc, true));
    k->attn_q_regs = n >= ctas && attn_stages(t, k->attn_br, bc, k->attn_pitch, n) >= stages;
  }
  ctas = attn_ctas(t, k->block, attn_regs(rows, D, bc, k->attn_q_regs));
  k->attn_stages = attn_stages(t, k->attn_br, bc, k->attn_pitch, ctas);
  if (!k->attn_stages)
    k->attn_stages = 1;
  if (o && knob(o, FG_KNOB_ATTN_STAGES, &v))
    k->attn_stages = (int)v;
  k->min_ctas_per_sm = ctas;
  k->attn_ldmatrix = !(o && knob(o, FG_KNOB_ATTN_LDMATRIX, &v) && v == 0);
  k->smem = attn_smem(k->attn_br, bc, k->attn_stages, k->attn_pitch);
tiles_done:
  k->grid[0] = ceil_div(Sq, k->attn_br);
  k->grid[1] = B * H;
  k->grid[2] = 1;
  /* attnpp (knob ATTN_LPT, causal): the CTAs' work order over all (batch,
   * head) pairs, the heaviest query blocks first (longest processing time
   * first, as FlashAttention-3's LPT scheduler), the pairs in sections
   * whose K and V fit half the L2 (GQA: a key head serves group query
   * heads; knob value N > 1: N pairs), so that a section's CTAs re-read
   * K and V from L2 */
  if (fg_attr_bool(n, "causal") && o && knob(o, FG_KNOB_ATTN_LPT, &v) && v >= 1 &&
      k->grid[0] * k->grid[1] <= INT32_MAX) {
    int64_t group = H / kt->dims[1].size;
    int64_t kv = 2 * kt->dims[2].size * D * fg_dtype_size(q->dtype);
    int64_t heads = v > 1 ? v : t->l2_bytes / 2 / kv * group; /* knob N > 1: N pairs */
    k->attn_lpt = true;
    k->attn_lpt_heads = (int)(heads < 1 ? 1 : heads > B * H ? B * H : heads);
  }
  k->vec = !(o && o->no_vectorize) && attn_vec_ok(p, k, 0, 3) ? 8 : 1;
  k->outer = B * H * Sq;
  k->red = kt->dims[2].size;
  k->inner = D;
  k->chunks = 1;
  k->split = 1;
  k->persistent = true;
  k->why = k->attn_wgmma
               ? "attention: a CTA owns br query rows of one (batch, head), 64 a warpgroup, and "
                 "loops over key blocks of bc (wgmma.mma_async m64: S = Q K^T from shared "
                 "memory, O += P V with P from registers; online softmax in f32)"
               : "attention: a CTA owns br query rows of one (batch, head) and loops over key "
                 "blocks of bc (FlashAttention-2's forward: mma.sync m16n8k16, online softmax in "
                 "f32)";
  if (k->smem > p->target.dyn_smem_per_block) {
    fg_error(d, n->loc, "'sdpa' needs %d bytes of shared memory a CTA; the target allows %d",
             k->smem, p->target.dyn_smem_per_block);
    return false;
  }
  return true;
}

/* issue 19 (wgmma backward): the dq and the dk, dv kernels by
 * wgmma.mma_async where the forward would take it (sm_90a, head dim 64 or
 * 128, bf16 or f16) unless knob ATTN_BWD_WGMMA=0 (checked on the GPU and
 * 1.1-1.55x faster than mma.sync: docs/benchmarks.md, run Z9). A warpgroup owns 64 of
 * the accumulating rows (dq: queries; dk, dv: keys), one a CTA (ATTN_BWD_WG;
 * knob ATTN_WG=2: two, br 128, 8 warps), warp w rows 16 w.. as the mma.sync kernels,
 * whose masks and fragment layouts it shares. bc, the looped block, 64:
 * registers a thread at D = 128 are dK and dV (64 f32 each), S^T and dP^T
 * (32 each) and P^T's packed pairs (16), within 255 at one CTA of 256
 * threads an SM. Two stages (knob ATTN_STAGES 1, 2); tiles unpadded in the
 * 128-byte swizzle (pitch D). */
static bool attn_bwd_wgmma_ok(const fg_plan *p, const fg_kernel *k, const fg_plan_options *o) {
  const fg_type *q = &k->attn->in[1]->type;
  int64_t v, D = q->dims[3].size;
  if (!p->target.arch_specific || p->target.arch != 90 || (D != 64 && D != 128) ||
      (q->dtype != FG_BF16 && q->dtype != FG_F16))
    return false;
  return !(o && knob(o, FG_KNOB_ATTN_BWD_WGMMA, &v) && v == 0);
}

/* The wgmma backward's estimate of a thread's registers with looped
 * blocks of bc (a warpgroup's 64 rows over its 128 threads): the f32
 * accumulators (dq: dQ, D / 2; dk, dv: D), S and dP (bc), their packed
 * A operands (dq: dS, bc / 4; dk, dv: P and dS, bc / 2). Against ptxas
 * (run X1, docs/benchmarks.md): dq 112 -> 122 and 144 -> 205 registers at
 * bc 64, 224 -> 230 at D 128, bc 128; dk, dv 160 -> 186 (D 64, bc 64), 256
 * -> 253 (D 64, bc 128), 320 -> 255 and 1.4 KB spilled (D 128, bc 128). */
static int attn_bwd_regs(bool dq, int64_t D, int bc, bool grouped) {
  /* grouped (dk, dv of GQA/MQA): the loop over the group's query heads
   * holds a few more (tests/graphs wbwd_mqa: 4 bytes spilled at D 64, bc
   * 128 without this term) */
  return (int)(dq ? D / 2 : D) + bc + (dq ? bc / 4 : bc / 2) + (grouped && !dq ? 4 : 0);
}

/* Keys (dq) or queries (dk, dv) a looped block: 128 where the kernel
 * holds one CTA an SM at 64 anyway (its registers) and 128 fits a
 * thread's registers, else 64. Run X1 (H100): dq at D 128 3574 -> 3452
 * us, dk, dv at D 64 1054 -> 946 us; dq at D 64 (two CTAs an SM at 64)
 * 505 -> 625 us and dk, dv at D 128 (spilled) 5029 -> 7618 us at 128. */
static int attn_bwd_bc(const fg_target *t, bool dq, int64_t D, bool grouped, int block) {
  bool one_cta = attn_ctas(t, block, attn_bwd_regs(dq, D, 64, grouped)) < 2;
  return one_cta && attn_bwd_regs(dq, D, 128, grouped) <= ATTN_REGS + 1 ? 128 : 64;
}

/* Warpgroups a CTA of the wgmma backward: one (br 64), twice the CTAs of
 * two, each on its own (no CTA barrier across 8 warps, a causal grid's
 * tail finer), two an SM where one of 256 threads fit. Except dq where
 * two warpgroups take a looped block of 128 with the pingpong (D 128, run
 * X3's rule) and their grid fills the SMs at least once. Runs Y3-Y6
 * (docs/benchmarks.md), one process each, against two warpgroups for
 * both kernels (the rule before): 1.29x at GPT-2's [8,12,1024,64] causal,
 * 1.12x not causal, 1.08x at [8,16,2048,64], 1.19x at [8,16,1024,128]
 * causal, 1.39-1.49x at the suite's [1,8,512,D]; at D 128 one warpgroup
 * for dq too was 0.99x at [1,32,16384,128] causal and dq's two (Y6)
 * 1.03x there, 1.01-1.06x at [4,32,4096,128], 1.07-1.09x at GQA 32/8
 * causal (Y6 against Y5's figures: another process), but 0.84x at
 * [1,8,512,128] (32 CTAs of dq), hence the grid's condition. */
enum { ATTN_BWD_WG = 1 };

static void schedule_attention_bwd_wgmma(const fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t v, D = k->attn->in[1]->type.dims[3].size;
  bool grouped = k->attn->in[1]->type.dims[1].size != k->attn->in[2]->type.dims[1].size;
  const fg_type *q = &k->attn->in[1]->type;
  int64_t dq_ctas2 =
      ceil_div(q->dims[2].size, 2 * ATTN_WG_ROWS) * q->dims[0].size * q->dims[1].size;
  bool dq128 = k->attn_part == FG_ATTN_DQ &&
               attn_bwd_bc(&p->target, true, D, grouped, 256) == 128 &&
               dq_ctas2 >= p->target.sm_count;
  int wg = o && knob(o, FG_KNOB_ATTN_WG, &v) ? (int)v : dq128 ? 2 : ATTN_BWD_WG;
  k->attn_wgmma = true;
  k->attn_warps = 4 * wg;
  k->attn_br = ATTN_WG_ROWS * wg;
  k->attn_bc =
      o && knob(o, FG_KNOB_ATTN_BC, &v) && v >= 64
          ? (int)v
          : attn_bwd_bc(&p->target, k->attn_part == FG_ATTN_DQ, D, grouped, 32 * k->attn_warps);
  k->attn_pitch = (int)D;
  k->attn_ldmatrix = false;
  k->attn_stages = o && knob(o, FG_KNOB_ATTN_STAGES, &v) && v < 2 ? 1 : 2;
  /* run X1: 1.6-4% faster at D 128, the same at D 64; not for dk, dv at
   * bc 128, where ptxas spills 56 bytes with it (253 registers without) */
  bool dkdv128 = k->attn_part == FG_ATTN_DKDV && k->attn_bc == 128;
  k->attn_overlap = o && knob(o, FG_KNOB_ATTN_BWD_OVERLAP, &v)
                        ? v == 1 || (v == 2 && k->attn_part == FG_ATTN_DQ)
                        : !dkdv128;
  /* the pingpong: run X3, dq at bc 128 (one CTA an SM: its two warpgroups
   * alone on the SM) 8-14% faster; dq at bc 64 (two CTAs an SM) 5% and dk,
   * dv after dV (mode 2) 2-6% slower */
  int pp = k->attn_part == FG_ATTN_DQ && k->attn_bc == 128 ? 1 : 0;
  if (o && knob(o, FG_KNOB_ATTN_BWD_PINGPONG, &v))
    pp = k->attn_part == FG_ATTN_DQ && v == 2 ? 1 : (int)v;
  k->attn_pingpong = k->attn_overlap && wg == 2 ? pp : 0;
}

/* issue 19: the two kernels of sdpa_bwd (emit_attention_bwd.c; the split
 * of the Triton fused-attention tutorial and FlashAttention-2's backward,
 * without atomics). Each warp owns 16 rows of the CTA's block (one
 * m16n8k16 row block): query rows for dq, key rows for dk and dv, so that
 * its accumulators (dq: 16 x D; dk and dv: two of 16 x D) stay in
 * registers; 4 warps, 64 rows a CTA. The looped block (keys for dq,
 * queries for dk, dv) is 64 at D = 64 and 32 at D = 128, where dk and dv
 * alone hold 128 registers a thread. Every tile lives in shared memory,
 * rows padded by 8 elements: dq's Q, dO (its O once, for delta) and K, V
 * of the key block; dk, dv's K, V and Q, dO of the query block with its
 * lse and delta; two stages of the looped tiles, the next block's copied
 * (cp.async in the aligned variant) while this one computes (knob
 * ATTN_STAGES=1: one). The dq kernel runs first and writes delta = rowsum(dO o O)
 * (f32, [B, Hq, Sq]) into a workspace that the dk, dv kernel reads. */
static bool schedule_attention_bwd(fg_plan *p, fg_kernel *k, const fg_plan_options *o, fg_diag *d) {
  const fg_node *n = k->attn;
  const fg_type *q = &n->in[1]->type, *kt = &n->in[2]->type;
  for (int i = 0; i < 4; i++)
    if (fg_sym_involves(&p->sym, q->dims[i].size) || fg_sym_involves(&p->sym, kt->dims[i].size)) {
      fg_error(d, n->loc,
               "'sdpa_bwd' over the symbolic size %s is not supported by the code generator",
               p->sym.name);
      return false;
    }
  for (int i = 0; i < n->nin; i++) {
    const fg_value *base;
    fg_strided s;
    if (!fg_plan_attn_source(p, n->in[i], k->id, &base, &s)) {
      fg_internal_error(d, n->loc, "operand %d of 'sdpa_bwd' is not in memory for kernel %d", i,
                        k->id);
      return false;
    }
  }
  int64_t B = q->dims[0].size, Hq = q->dims[1].size, Sq = q->dims[2].size, D = q->dims[3].size;
  int64_t Hk = kt->dims[1].size, Sk = kt->dims[2].size;
  bool dq = k->attn_part == FG_ATTN_DQ;
  int64_t v;
  if (attn_bwd_wgmma_ok(p, k, o)) {
    schedule_attention_bwd_wgmma(p, k, o);
  } else {
    k->attn_warps = ATTN_WARPS;
    k->attn_br = 16 * k->attn_warps;
    k->attn_bc = D > 64 ? 32 : 64; /* the dk, dv accumulators hold 128 registers at D 128 */
    k->attn_pitch = (int)D + ATTN_PAD;
    k->attn_ldmatrix = !(o && knob(o, FG_KNOB_ATTN_LDMATRIX, &v) && v == 0);
    k->attn_stages = o && knob(o, FG_KNOB_ATTN_STAGES, &v) ? (int)v : 2;
  }
  k->block = 32 * k->attn_warps;
  k->grid[0] = ceil_div(dq ? Sq : Sk, k->attn_br);
  k->grid[1] = B * (dq ? Hq : Hk);
  k->grid[2] = 1;
  /* Causal, a block's work grows with its query index (dq) or falls with
   * its key index (dk, dv). Launched heaviest first across every (batch,
   * head), the blocks the grid's slow dim, the light ones fill the last
   * wave (the longest-processing-time order); but the CTAs running at once
   * then read every head's looped tiles (dq: K, V of every key head; dk,
   * dv: Q, dO of every query head), so only where those fit the L2 (1).
   * Otherwise the same order in sections of (batch, head) pairs whose
   * looped tiles fit half the L2 (2), the grid kept. Run Z3
   * (docs/benchmarks.md), 1 against each pair's blocks in turn (0): 1.09x
   * at GPT-2's [8,12,1024,64] (25 MB), 1.34x at Llama's GQA 12/4 (dk, dv:
   * 512 CTAs that each loop over three query heads), 1.03x at
   * [1,8,512,128] (2 MB); 0.91x at [4,32,4096,128] (268 MB), 0.99x at
   * [1,32,16384,128]. Run W1, 2 against 0 there: 1.02-1.03x at
   * [1,32,16384,128], 0.99-1.00x at [4,32,4096,128], 1.00-1.03x at GQA
   * 32/8 (dq 67 MB, dk, dv 268 MB); 2 against 1 where 1 applies: 0.83x
   * and 0.74x at GPT-2's and Llama's shapes. */
  int64_t looped = 2 * B * (dq ? Hk * Sk : Hq * Sq) * D * fg_dtype_size(q->dtype);
  bool causal = fg_attr_bool(k->attn, "causal");
  /* 0 the pairs in turn, 1 the whole grid heaviest first, 2 in sections */
  int64_t lpt = causal ? (looped <= p->target.l2_bytes ? 1 : 2) : 0;
  if (o && knob(o, FG_KNOB_ATTN_BWD_LPT, &v))
    lpt = causal ? v : 0;
  if (lpt == 2 && k->grid[0] * k->grid[1] > INT32_MAX) /* the CTA's linear index */
    lpt = 1;
  if (lpt == 1 && k->grid[0] > 65535) /* gridDim.y's limit */
    lpt = 0;
  k->attn_lpt = lpt > 0;
  if (lpt == 2) {
    int64_t pairs = k->grid[1], tiles = 2 * (dq ? Sk : Sq) * D * fg_dtype_size(q->dtype);
    /* dq: a key head's K, V serve its group's query pairs; dk, dv: a key
     * pair reads its group's Q, dO */
    int64_t hs = dq ? p->target.l2_bytes / 2 / tiles * (Hq / Hk)
                    : p->target.l2_bytes / 2 / (tiles * (Hq / Hk));
    k->attn_lpt_heads = (int)(hs < 1 ? 1 : hs > pairs ? pairs : hs);
  } else if (lpt == 1) {
    int64_t blocks = k->grid[0];
    k->grid[0] = k->grid[1];
    k->grid[1] = blocks;
  }
  /* dq: Q, dO [br], then per stage K, V [bc] (O [br] in the first stage's
   * place before the key loop: 2 bc >= br); dk, dv: K, V [br], then per
   * stage Q, dO [bc] and lse, delta [bc] (f32; wgmma: in 1 KiB, so that
   * every tile stays 1024-byte aligned, and 1 KiB more to align them) */
  int tiles = k->attn_bc * k->attn_pitch * 2;
  if (k->attn_wgmma) /* overlap: and 16 bytes for dq's order slot */
    k->smem = 2 * k->attn_br * k->attn_pitch * 2 + k->attn_stages * (2 * tiles + (dq ? 0 : 1024)) +
              1024 + (k->attn_overlap ? 16 : 0);
  else
    k->smem = 2 * k->attn_br * k->attn_pitch * 2 +
              k->attn_stages * (2 * tiles + (dq ? 0 : 2 * k->attn_bc * 4));
  k->vec = !(o && o->no_vectorize) && attn_vec_ok(p, k, 0, 5) ? 8 : 1;
  k->outer = B * Hq * Sq;
  k->red = Sk;
  k->inner = D;
  /* .minnctapersm 2 (no register cap at 128 threads): without a
   * directive ptxas held some variants to 168 registers and spilled 12
   * bytes; with it, 128-250 registers and no spills (docs/attention.md) */
  k->min_ctas_per_sm = k->attn_wgmma ? 1 : 2;
  k->chunks = 1;
  k->split = 1;
  k->persistent = true;
  if (k->attn_wgmma)
    k->why = dq ? "attention backward, dq: a CTA owns br query rows of one (batch, head), 64 a "
                  "warpgroup, writes their delta = rowsum(dO o O) and loops over key blocks of bc "
                  "(wgmma.mma_async m64: S = Q K^T, dP = dO V^T from shared memory, dQ += dS K "
                  "with dS from registers)"
                : "attention backward, dk and dv: a CTA owns br keys of one (batch, key head), 64 "
                  "a warpgroup, and loops over its group's query heads and their query blocks of "
                  "bc (wgmma.mma_async m64: S^T = K Q^T, dP^T = V dO^T from shared memory, dV += "
                  "P^T dO, dK += dS^T Q with P^T, dS^T from registers; no atomics)";
  else
    k->why = dq ? "attention backward, dq: a CTA owns br query rows of one (batch, head), writes "
                  "their delta = rowsum(dO o O) and loops over key blocks of bc (mma.sync m16n8k16)"
                : "attention backward, dk and dv: a CTA owns br keys of one (batch, key head) and "
                  "loops over its group's query heads and their query blocks of bc (mma.sync "
                  "m16n8k16; no atomics)";
  if (dq) {
    k->attn_delta_temp = add_temp(p, 4 * B * Hq * Sq, false);
  } else {
    for (int i = 0; i < k->id; i++)
      if (p->kernels[i].kind == FG_KERNEL_ATTENTION_BWD && p->kernels[i].attn == n)
        k->attn_delta_temp = p->kernels[i].attn_delta_temp;
    if (k->attn_delta_temp < 0) {
      fg_internal_error(d, n->loc, "no dq kernel before the dk, dv kernel %d of 'sdpa_bwd'", k->id);
      return false;
    }
  }
  fg_buf_ref delta = {FG_BUF_TEMP, k->attn_delta_temp};
  k->args = fg_arena_append(&p->g->arena, k->args, &k->nargs, &delta, sizeof delta);
  if (k->smem > p->target.dyn_smem_per_block) {
    fg_error(d, n->loc, "'sdpa_bwd' needs %d bytes of shared memory a CTA; the target allows %d",
             k->smem, p->target.dyn_smem_per_block);
    return false;
  }
  return true;
}

/* What the code generator cannot lower, as an error at the node that
 * exceeds it (exit 1, like any other input it cannot compile). */
/* issue 20: the scatter kernels (plan.h). COUNT, FILL and ORDER take a
 * thread a source; SCAN is scat_ctas CTAs (embscan: a range of bins
 * each), scat_seg bins a thread; SORT is one CTA, as many bins a thread, and
 * SORT (scat_rounds sources a thread); SUM is the
 * pointwise form over the result, a thread a vector of adjacent elements
 * along the last dim (lanes share their destination slice unless dim is
 * the last), each looping over its slice's sources. */
enum { SCATTER_THREADS = 256 };

/* embscan: a select's vectors load the operand and the source and store
 * the result, never the index (an argument whose last extent may match the
 * result's by chance, as pick_vec would count it) */
static int select_vec(const fg_kernel *k, int64_t inner, const fg_plan_options *o) {
  if (o && o->no_vectorize)
    return 1;
  const fg_node *n = k->scat;
  int w = fg_dtype_size(n->out[0]->type.dtype);
  for (int i = 0; i < 3; i += 2)
    if (fg_dtype_size(n->in[i]->type.dtype) > w)
      w = fg_dtype_size(n->in[i]->type.dtype);
  int v = 16 / w;
  while (v > 1 && (inner <= 0 || inner % v))
    v /= 2;
  return v;
}

static void schedule_scatter(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t n = 1;
  for (int i = 0; i < k->rank; i++)
    n *= k->dims[i];
  k->outer = n;
  k->red = k->inner = 1;
  k->vec = 1;
  k->chunks = 1;
  k->split = 1;
  k->block = SCATTER_THREADS;
  k->grid[1] = k->grid[2] = 1;
  switch (k->kind) {
  case FG_KERNEL_SCATTER_SCAN:
    k->block = k->scat_threads;
    k->grid[0] = k->scat_ctas;
    k->why = k->scat_ctas > 1
                 ? "scatter: exclusive scan of the counts into segment offsets (a CTA a "
                   "range of bins, after the ranges' counts before it)"
                 : "scatter: exclusive scan of the counts into segment offsets (one CTA)";
    return;
  case FG_KERNEL_SCATTER_SORT:
    k->block = k->scat_threads;
    k->grid[0] = 1;
    k->why = "scatter: count, scan, fill and order in one CTA (its scattered accesses take less "
             "than the three launches they save)";
    return;
  case FG_KERNEL_SCATTER_COUNT:
    k->why = "scatter: sources of each destination slice counted (integer atomics)";
    break;
  case FG_KERNEL_SCATTER_FILL:
    k->why = "scatter: source positions placed in their slice's segment (any order)";
    break;
  case FG_KERNEL_SCATTER_ORDER:
    k->why = "scatter: each segment ordered ascending (a source's rank among its segment)";
    break;
  default: {
    int dim = (int)fg_attr_int(k->scat, "dim");
    if (dim < 0)
      dim += k->rank;
    k->inner = k->dims[k->rank - 1];
    /* scatter_add: each element its own bin, so lanes do not share one */
    bool lanes = k->scat->op->code == FG_OP_INDEX_ADD && dim != k->rank - 1;
    k->vec = k->scat_select ? select_vec(k, lanes ? k->inner : 1, o)
                            : pick_vec(p, k, lanes ? k->inner : 1, o);
    k->why = k->scat_select
                 ? "scatter: each element its operand's plus its sources in ascending "
                   "order, each CTA selecting its slices' sources from the whole index"
                 : "scatter: each element its operand's plus its sources in ascending order";
    break;
  }
  }
  int64_t groups = ceil_div(n, k->vec);
  if (groups < k->block)
    k->block = groups < 32 ? 32 : (int)ceil_div(groups, 32) * 32;
  /* embbwd2: index_add's SUM takes 2 block-strided vectors a thread where
   * the result is large, as the pointwise kernels do (size_pointwise): its
   * operand's loads, segment bounds and first sources all in flight before
   * any segment is walked, so a slice's sources wait on fewer latencies */
  int64_t v;
  /* embscan: a select's CTA takes one run of elements (chunks 1) */
  if (k->kind == FG_KERNEL_SCATTER_SUM && k->scat->op->code == FG_OP_INDEX_ADD && !k->scat_select) {
    if (knob(o, FG_KNOB_SCATTER_CHUNKS, &v))
      k->chunks = (int)v;
    else if (groups >= (int64_t)k->block * 2 * p->target.sm_count * 8)
      k->chunks = 2;
  }
  k->grid[0] = ceil_div(groups, (int64_t)k->block * k->chunks);
  /* symidx: COUNT, FILL and ORDER over a*T + b sources, a thread a source
   * (the kernel bounds them by T's count, emit_scatter.c source_of) */
  if (k->kind != FG_KERNEL_SCATTER_SUM && fg_sym_involves(&p->sym, n))
    k->grid_formula =
        fg_arena_printf(&p->g->arena, "(%s+%d)/%d", fg_sym_formula(&p->sym, n, &p->g->arena),
                        k->block - 1, k->block);
}

/* issue 20 (scan): cumsum's kernels (plan.h). A column scan: a thread
 * owns vec adjacent columns of the kept extent and walks the scanned
 * extent (its chunk, with scan_chunks > 1) with a running sum, its loads
 * FG_SCAN_THREAD_BYTES ahead (rows_per_iter rows of vec elements issued
 * before the first is used): the vector narrows to 2 columns whatever the
 * dtype, since a thread keeps those bytes in flight whatever its width,
 * so narrower vectors put more of them in flight (run U1,
 * docs/benchmarks.md: vec 2 within 3% of the fastest at seven of eight
 * shapes, vec 1 slower than vec 2 at those seven). A row scan: a warp a
 * row where a row is at most SCAN_WARP_CHUNKS chunks of 32 vectors
 * (SCAN_THREADS / 32 rows a CTA), else a CTA of up to 1024 threads a row;
 * both walk the row in chunks of their threads' vectors. */
enum { SCAN_THREADS = 256, SCAN_WARP_CHUNKS = 8 };

int fg_plan_scan_vec(const fg_plan *p, int vec) {
  int64_t want = 2;
  fg_knob_get(&p->opts.knobs, FG_KNOB_SCAN_VEC, &want);
  while (vec > want)
    vec /= 2;
  return vec;
}

static void schedule_scan(fg_plan *p, fg_kernel *k, const fg_plan_options *o) {
  int64_t v, cols = k->outer * k->inner;
  int wsz = max_elem_size(p, k);
  k->split = 1;
  k->chunks = 1;
  k->grid[2] = 1;
  if (k->inner > 1) {
    k->vec = fg_plan_scan_vec(p, pick_vec(p, k, k->dims[k->rank - 1], o));
    int rows = FG_SCAN_THREAD_BYTES / (k->vec * wsz);
    k->rows_per_iter = rows < 2 ? 2 : rows > 32 ? 32 : rows;
    if (knob(o, FG_KNOB_SCAN_ROWS, &v))
      k->rows_per_iter = (int)v;
    int64_t threads = ceil_div(cols, k->vec);
    /* smaller CTAs where that reaches more SMs (g34: 128 CTAs of 128,
     * not 64 of 256) */
    k->block = SCAN_THREADS;
    while (k->block > 64 && ceil_div(threads, k->block) * k->scan_chunks < p->target.sm_count)
      k->block /= 2;
    if (threads < k->block)
      k->block = threads < 32 ? 32 : (int)ceil_div(threads, 32) * 32;
    k->grid[0] = ceil_div(threads, k->block);
    k->grid[1] = k->scan_chunks;
    k->why = k->kind == FG_KERNEL_SCAN_CHUNKS
                 ? "scan chunk sums: a thread sums vec columns over one chunk of the scanned extent"
             : k->scan_chunks > 1
                 ? "column scan: a thread walks vec columns over one chunk of the scanned "
                   "extent, from the sums of the chunks before it"
                 : "column scan: a thread walks vec columns over the scanned extent with a "
                   "running sum";
    return;
  }
  k->vec = k->mask[k->rank - 1] ? pick_vec(p, k, k->red, o) : 1;
  int64_t threads = ceil_div(k->red, k->vec);
  if (threads <= 32 * SCAN_WARP_CHUNKS) {
    k->scan_lanes = 32;
    k->block = SCAN_THREADS;
    k->grid[0] = ceil_div(k->outer, SCAN_THREADS / 32);
    k->why = "row scan: a warp a row, shfl.up within it, chunks with a running carry";
  } else {
    k->block = threads >= 1024 ? 1024 : (int)ceil_div(threads, 32) * 32;
    k->scan_lanes = k->block;
    k->grid[0] = k->outer;
    k->why = "row scan: a CTA a row, shfl.up within warps and shared memory across them, chunks "
             "with a running carry";
    if (k->scan_chunks > 1)
      k->why = k->kind == FG_KERNEL_SCAN_CHUNKS
                   ? "row scan chunk sums: too few rows to fill the GPU a CTA a row, so each row "
                     "is cut into fixed chunks, a CTA a chunk, each writing its chunk's sum"
                   : "row scan split: a CTA a chunk of a row, from the sum of the chunk sums "
                     "before it (one a thread, summed in a fixed tree), then as a CTA a row";
    else if (p->sym.n && k->outer < p->target.sm_count)
      k->why = "row scan: a CTA a row, shfl.up within warps and shared memory across them, chunks "
               "with a running carry (not cut into chunks over CTAs: a symbolic size)";
  }
  k->grid[1] = k->scan_lanes == k->block && k->scan_chunks > 1 ? k->scan_chunks : 1;
}

static bool within_limits(const fg_kernel *k, fg_diag *d) {
  if (k->kind == FG_KERNEL_ROW && k->nreds > FG_MAX_ROW_REDUCTIONS) {
    fg_error(
        d, k->reds[FG_MAX_ROW_REDUCTIONS]->loc,
        "%d reductions over the same rows in one kernel: the code generator supports at most 64 "
        "(a segment_set between them splits the kernel)",
        k->nreds);
    return false;
  }
  if (k->kind == FG_KERNEL_COLUMN && k->nreds > FG_MAX_COLUMN_REDUCTIONS) {
    fg_error(
        d, k->reds[FG_MAX_COLUMN_REDUCTIONS]->loc,
        "%d reductions over the same columns in one kernel: the code generator supports at most 8 "
        "(a segment_set between them splits the kernel)",
        k->nreds);
    return false;
  }
  return true;
}

/* A column kernel keeping the symbolic size, split (schedule_column): the
 * CTAs a tile of outputs wants, C = 4 (8 compute-heavy) a SM, over its
 * tiles G (grid x, a formula of T). */
static int64_t col_split_ctas(const fg_plan *p, const fg_kernel *k) {
  return (fg_kernel_compute_heavy(p, k) ? 8 : 4) * (int64_t)p->target.sm_count;
}

/* ... its split as a formula of T: schedule_column's static rule at each
 * run, ceil(C / G) slices of the reduced extent at most k->split of them,
 * where G is below 2 a SM (below 8 compute-heavy: there, ceil(C / G) >= 2
 * exactly when it is; with C = 4 a SM, ceil(C / G) >= 3 exactly when G <
 * 2 a SM), else 1. The kernel reads it (%nctaid.y, emit_column.c). */
static void col_split_formula(fg_plan *p, fg_kernel *k) {
  fg_arena *a = &p->g->arena;
  int64_t C = col_split_ctas(p, k);
  const char *s = fg_arena_printf(a, "%lld/max(1,%s)+1", (long long)(C - 1), k->grid_formula);
  k->split_formula = fg_kernel_compute_heavy(p, k)
                         ? fg_arena_printf(a, "min(%d,%s)", k->split, s)
                         : fg_arena_printf(a, "max(1,min(%d,%s)*min(1,(%s)/3))", k->split, s, s);
}

/* A kernel over the symbolic size T (symbolic.h) takes T as an argument
 * (`z0`: the bounds). Where its grid depends on T, the grid is a formula
 * of T, which the loader evaluates and checks at each run: pointwise,
 * ceil(ceil(T x rest / vec) / (block x chunks)) CTAs (schedule_pointwise);
 * column kernels keeping T, ceil(ceil(T x kept / vec) / block)
 * (schedule_column); row kernels, a CTA a row; the row + column form,
 * half a CTA a row group within its bounds (the kernel reads its grid). The
 * others' grids are static: column kernels reducing T, rows reduced over T
 * (a fixed number of slices). */
static void symbolic_grid(fg_plan *p, fg_kernel *k) {
  const fg_sym_lowering *s = &p->sym;
  fg_arena *a = &p->g->arena;
  int64_t rest = 1, kept = 1; /* the dims after T: all of them, the kept ones */
  for (int i = 1; i < k->rank; i++) {
    rest *= k->dims[i] > 0 ? k->dims[i] : 1;
    kept *= k->mask[i] ? 1 : k->dims[i];
  }
  bool pw = k->kind == FG_KERNEL_POINTWISE;
  int64_t n = pw ? rest : kept, per = pw ? (int64_t)k->block * k->chunks : k->block;
  if (s->affine && pw) {
    /* (a*T + b) x n elements, ceil of a vector, then of a CTA's span */
    int64_t all = k->dims[0] * n; /* a*P + b: no division of it is a*T/v + b/v */
    const char *lanes = k->vec == 1 ? fg_sym_formula(s, all, a)
                                    : fg_arena_printf(a, "(%s+%d)/%d", fg_sym_formula(s, all, a),
                                                      k->vec - 1, k->vec);
    k->grid_formula =
        fg_arena_printf(a, "(%s+%lld)/%lld", lanes, (long long)(per - 1), (long long)per);
  } else if (k->kind == FG_KERNEL_ROW && k->row_lanes > 0 && !k->mask[0]) {
    /* packed short rows: block / lanes rows a CTA */
    const char *rows = s->affine ? fg_sym_formula(s, k->dims[0] * kept, a)
                                 : fg_sym_formula(s, s->placeholder * kept, a);
    int rpc = k->block / k->row_lanes;
    k->grid_formula = rpc == 1 ? rows : fg_arena_printf(a, "(%s+%d)/%d", rows, rpc - 1, rpc);
  } else if (fg_kernel_is_scan(k->kind) && k->scan_lanes > 0 && !k->mask[0]) {
    /* row scans: block / lanes rows a CTA, T x the kept rest rows */
    const char *rows = fg_sym_formula(s, s->placeholder * kept, a);
    int rpc = k->block / k->scan_lanes;
    k->grid_formula = rpc == 1 ? rows : fg_arena_printf(a, "(%s+%d)/%d", rows, rpc - 1, rpc);
  } else if (s->affine && k->kind == FG_KERNEL_ROW && !k->ncols && !k->ntails && !k->mask[0])
    k->grid_formula = fg_sym_formula(s, k->dims[0] * kept * k->split, a);
  else if (pw || ((k->kind == FG_KERNEL_COLUMN || fg_kernel_is_scan(k->kind)) && !k->mask[0])) {
    /* ceil(T x n / vec): T x (n / vec) when whole */
    const char *lanes = n % k->vec == 0 ? fg_sym_formula(s, s->placeholder * (n / k->vec), a)
                                        : fg_arena_printf(a, "(%s*%lld+%d)/%d", s->name,
                                                          (long long)n, k->vec - 1, k->vec);
    k->grid_formula =
        fg_arena_printf(a, "(%s+%lld)/%lld", lanes, (long long)(per - 1), (long long)per);
    if (!pw && k->split > 1)
      col_split_formula(p, k);
  } else if (k->kind == FG_KERNEL_COLUMN && k->split > 1 && k->col_threads <= 1 &&
             !fg_plan_column_variances(k) && fg_sym_involves(s, k->red)) {
    /* symsplit (issue 18): a column kernel reducing T, split over CTAs:
     * schedule_column's static rule at each run, min(S, ceil(R / m))
     * slices of the reduced extent R (a formula of T) of at least m rows
     * each, none below 64 rows, S the split at the stand-in (its largest).
     * With S fixed, sum_cols at T = 384 took 32 slices of 12 rows, 1.50x
     * its static compile's 12 slices of 32 (symsuite of 2026-11-27).
     * The kernel reads it (%nctaid.y, emit_column.c); the partials keep
     * the largest split's layout. */
    const char *R = fg_sym_formula(s, k->red, a);
    int64_t m = col_min_slice(p, k);
    k->grid_formula = fg_arena_printf(a, "%lld", (long long)k->grid[0]);
    k->split_formula = fg_arena_printf(a, "max(1,min(%d,(%s+%lld)/%lld)*min(1,(%s)/64))", k->split,
                                       R, (long long)(m - 1), (long long)m, R);
  } else if (k->kind == FG_KERNEL_ROW && !fg_kernel_resident(k) && !k->mask[0]) {
    /* a CTA a row, or a cluster a row (cluster_split) */
    k->grid_formula = fg_sym_formula(s, s->placeholder * kept * k->split, a);
  } else if (fg_kernel_resident(k)) {
    /* The row + column form: half a CTA a row group, as schedule_rowcol
     * sizes a static grid (choose_ctas: at least two groups a CTA), between
     * the combiners and the resident CTAs scheduled for the stand-in (the
     * kernel reads its grid, emit_rowcol.c), in whole clusters. With the
     * grid fixed at the resident CTAs, T = 384 rows ran 1.5-2.3x slower
     * than its static compile (docs/benchmarks.md, run X1). */
    int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1, c = k->cluster > 1 ? k->cluster : 1;
    const char *groups = fg_sym_formula(s, k->outer / U, a);
    const char *g = fg_arena_printf(a, "max(%d,min(%lld,(%s+1)/2))", k->combiners,
                                    (long long)k->grid[0], groups);
    k->grid_formula = c > 1 ? fg_arena_printf(a, "(%s+%d)/%d*%d", g, c - 1, c, c) : g;
    k->grid_runtime = true;
  }
  fg_buf_ref z = {FG_BUF_SYM, 0};
  k->args = fg_arena_append(a, k->args, &k->nargs, &z, sizeof z);
}

/* Whether a node of g computes with T's run-time count (`extent`, which
 * decompose writes for mean and var over T): every kernel then takes T. */
static bool counts_symbolic(const fg_graph *g) {
  for (const fg_node *n = g->first; n; n = n->next)
    if (n->op->code == FG_OP_EXTENT)
      return true;
  return false;
}

/* The launch must be one the GPU (and so the loader) accepts: grid x at
 * most 2^31-1, y and z at most 65535. A larger one is the input's limit. */
static bool grid_in_limits(const fg_plan *p, const fg_kernel *k, fg_diag *d) {
  static const int64_t max[3] = {2147483647, 65535, 65535};
  for (int i = 0; i < 3; i++)
    if (k->grid[i] > max[i]) {
      fg_error(d, k->nouts ? k->outs[0]->loc : p->g->loc,
               "kernel %d of graph '%s' needs %lld CTAs in grid %c, more than the GPU allows "
               "(%lld): the tensor "
               "is too large for one kernel",
               k->id, p->g->name, (long long)k->grid[i], "xyz"[i], (long long)max[i]);
      return false;
    }
  return true;
}

/* A kernel over an empty domain (a zero-size dim) computes nothing:
 * canonicalize folded reductions over empty extents, so its outputs are
 * empty too. Grid 0, which the loader does not launch; the backend emits
 * an empty body. */
static bool schedule_empty(fg_kernel *k) {
  int64_t n = 1;
  for (int i = 0; i < k->rank; i++)
    n *= k->dims[i];
  if (n != 0 || k->ncols || k->ntails)
    return false;
  k->outer = k->red = k->inner = 0;
  k->vec = 1;
  k->block = 32;
  k->chunks = 1;
  k->split = 1;
  k->persistent = true;
  k->grid[0] = 0;
  k->grid[1] = k->grid[2] = 1;
  k->smem = 0;
  k->why = "empty domain: nothing to compute, not launched";
  return true;
}

/* The plan's own check of what makes a kernel slower than eager PyTorch
 * (issue 17): one CTA for a large tensor, vector width 1 over a long
 * contiguous extent, a row re-read in each phase, a parameter read by
 * several kernels. Findings go to k->warn, printed by --emit plan; the
 * artifact is still written. Large: 1 MiB and more. */
static void lint_kernel(fg_plan *p, fg_kernel *k) {
  enum { LARGE = 1 << 20 };
  int64_t numel = 1;
  for (int d = 0; d < k->rank; d++)
    numel *= k->dims[d];
  int64_t ctas = k->grid[0] * k->grid[1] * k->grid[2];
  int64_t bytes = 0; /* the full-size parameters it reads */
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == FG_BUF_PARAM) {
      const fg_type *t = &p->g->params[k->args[i].index]->type;
      if (!t->scalar && fg_type_numel(t) == numel)
        bytes += numel * fg_dtype_size(t->dtype);
    }
  int64_t last = k->rank ? k->dims[k->rank - 1] : 1;
  if (fg_kernel_is_scatter(k->kind)) { /* symidx: a scatter's sources at T's largest */
    bytes = fg_sym_at_max(&p->sym, bytes);
    last = fg_sym_at_max(&p->sym, last);
  }
  if (ctas == 1 && bytes >= LARGE)
    k->warn = fg_arena_printf(&p->g->arena, "one CTA for %" PRId64 " bytes", bytes);
  else if (k->vec == 1 && fg_sym_involves(&p->sym, last) && !fg_kernel_is_scatter(k->kind))
    k->warn = fg_arena_printf(&p->g->arena,
                              "vector width 1 over the symbolic extent %s (its declared divisor is "
                              "%" PRId64 ")",
                              p->sym.name, p->sym.div);
  else if (k->vec == 1 && bytes >= LARGE && last >= 64)
    k->warn = fg_arena_printf(
        &p->g->arena, "vector width 1 over a contiguous extent of %" PRId64 " elements", last);
  else if (k->kind == FG_KERNEL_ROW && !k->persistent &&
           fg_plan_row_passes(p, k) + writes_full(k) > 1 && bytes >= LARGE && !stream_pays(p, k))
    k->warn = "rows too long for registers: each phase reads the row again";
}

/* ---- the order of a kernel's work: reading back from L2 (issue 17) ----
 * A kernel that reads a tensor the kernel launched just before it also
 * read (or wrote) in full, in ascending order, finds that tensor's last
 * part still in L2 (the last L2's worth of what the earlier kernel
 * touched). Where the tensor is larger than L2, ascending order would
 * evict that part before reaching it; descending order reads it first.
 * Pointwise and row kernels take their work in descending order cheaply
 * (CTA c does CTA grid - 1 - c's chunks or slices, emit_pointwise.c and
 * emit_row.c); the row + column form and column kernels do not, so where
 * such a kernel re-reads the tensor, the kernel before it is reversed
 * instead, and leaves the tensor's first part in L2. The order of CTAs changes nothing in the
 * results: no kernel relies on it (a split row's partials are combined in slot order, whichever CTA
 * arrives last). Tensors sized by the symbolic size are not considered: their size is known only at
 * run time. */

/* More than one wave of CTAs: the CTAs launched last take the last part
 * of the domain. In one wave, every CTA reads its share at once. */
static bool several_waves(const fg_plan *p, const fg_kernel *k) {
  return fg_kernel_cost(p, k, p->target.copy_gbs).waves > 1;
}

/* A row kernel's rows are contiguous: its reduced dims are the trailing
 * ones (not a batch norm's [N, C, H, W] reduced over N, H, W). */
static bool rows_contiguous(const fg_kernel *k) {
  bool reduced = false;
  for (int d = 0; d < k->rank; d++) {
    if (reduced && !k->mask[d])
      return false;
    reduced = reduced || k->mask[d];
  }
  return true;
}

/* Whether k's CTAs can take their work in descending order, and whether
 * that orders its reads: several waves of pointwise chunks or of
 * contiguous rows (or row slices). */
static bool reversible(const fg_plan *p, const fg_kernel *k) {
  return k->grid[0] > 1 && !k->grid_runtime &&
         (k->kind == FG_KERNEL_POINTWISE ||
          (k->kind == FG_KERNEL_ROW && !k->ncols && !k->ntails && rows_contiguous(k))) &&
         several_waves(p, k);
}

/* Whether k goes through its domain in ascending order: the above in the
 * order the GPU launches CTAs; the row + column form (its CTAs loop over
 * the rows together); a column kernel in one wave, not split (its CTAs
 * walk down the rows together; split, its slices of rows are read at
 * once). */
static bool ascending(const fg_plan *p, const fg_kernel *k) {
  if (k->reverse)
    return false;
  if (fg_kernel_resident(k))
    return true;
  if (k->kind == FG_KERNEL_COLUMN)
    return k->split == 1 && !several_waves(p, k);
  return reversible(p, k);
}

/* The tensor a buffer holds (NULL: a workspace or a scalar). */
static const fg_value *buf_value(const fg_plan *p, fg_buf_ref b) {
  const fg_value *v = fg_plan_buf_value(p, b);
  return v && !v->type.scalar ? v : NULL;
}

/* Whether buffer b holds a static tensor of k's domain's size, larger than
 * L2: k reads or writes it in full, in its order. */
static bool covers_past_l2(const fg_plan *p, const fg_kernel *k, fg_buf_ref b) {
  const fg_value *v = buf_value(p, b);
  if (!v || fg_dtype_is_packed(v->type.dtype))
    return false;
  int64_t numel = 1, domain = 1;
  for (int d = 0; d < v->type.rank; d++) {
    if (fg_sym_involves(&p->sym, v->type.dims[d].size))
      return false;
    numel *= v->type.dims[d].size;
  }
  for (int d = 0; d < k->rank; d++)
    domain *= k->dims[d];
  return numel == domain && numel * fg_dtype_size(v->type.dtype) > p->target.l2_bytes;
}

/* A buffer past L2 that both kernels cover, or FG_BUF_NONE. */
static fg_buf_ref shared_past_l2(const fg_plan *p, const fg_kernel *before, const fg_kernel *k) {
  for (int i = 0; i < k->nargs; i++) {
    fg_buf_ref b = k->args[i];
    if (!covers_past_l2(p, k, b) || !covers_past_l2(p, before, b))
      continue;
    for (int j = 0; j < before->nargs; j++)
      if (before->args[j].kind == b.kind && before->args[j].index == b.index)
        return b;
  }
  return (fg_buf_ref){FG_BUF_NONE, 0};
}

/* Knob L2_REVERSE: 0 never, 1 by the rule above (after a descending
 * kernel, the next re-reader stays ascending, and finds L2 holds the
 * tensor's first part), 2 every kernel that can (the same results, bit
 * for bit: the GPU check's comparison). */
static void choose_l2_order(fg_plan *p, const fg_plan_options *o) {
  int64_t mode = 1;
  knob(o, FG_KNOB_L2_REVERSE, &mode);
  fg_kernel *before = NULL; /* the kernel launched last */
  for (int i = 0; i < p->nkernels; i++) {
    fg_kernel *k = &p->kernels[i];
    if (k->grid[0] == 0)
      continue; /* not launched */
    k->l2_reread = (fg_buf_ref){FG_BUF_NONE, 0};
    if (mode == 2)
      k->reverse = reversible(p, k);
    else if (mode == 1 && before && reversible(p, k) && ascending(p, before)) {
      k->l2_reread = shared_past_l2(p, before, k);
      k->reverse = k->l2_reread.kind != FG_BUF_NONE;
    } else if (mode == 1 && before && before->reverse && ascending(p, k))
      k->l2_reread = shared_past_l2(p, before, k); /* descending, then ascending */
    else if (mode == 1 && before && !before->reverse && before->l2_reread.kind == FG_BUF_NONE &&
             reversible(p, before) && ascending(p, k)) {
      /* k cannot take its work in descending order (a column kernel, the
       * row + column form): the kernel before it can, and leaves the
       * tensor's first part in L2 */
      k->l2_reread = shared_past_l2(p, before, k);
      before->reverse = k->l2_reread.kind != FG_BUF_NONE;
    }
    before = k;
  }
}

/* A parameter of 1 MiB or more read by several kernels. A scan's chunk
 * sums kernel does not count: its pass is the price of walking the chunks
 * at once, which one pass could not (issue 17, scanpar). */
static void lint_reads(fg_plan *p) {
  for (int pi = 0; pi < p->g->nparams; pi++) {
    const fg_type *t = &p->g->params[pi]->type;
    if (t->scalar || fg_type_numel(t) * fg_dtype_size(t->dtype) < (1 << 20))
      continue;
    int readers = 0, last = -1;
    for (int i = 0; i < p->nkernels; i++)
      for (int j = 0; j < p->kernels[i].nargs; j++) {
        fg_buf_ref b = p->kernels[i].args[j];
        if (b.kind == FG_BUF_PARAM && b.index == pi && last != i &&
            p->kernels[i].kind != FG_KERNEL_SCAN_CHUNKS) {
          readers++;
          last = i;
        }
      }
    if (readers > 1 && !p->kernels[last].warn)
      p->kernels[last].warn = fg_arena_printf(&p->g->arena, "parameter %s read by %d kernels",
                                              p->g->params[pi]->name, readers);
  }
}

bool fg_plan_schedule(fg_plan *p, const fg_plan_options *o, fg_diag *d) {
  for (const fg_node *n = p->g->first; n; n = n->next) {
    if (n->op->code != FG_OP_CAT)
      continue;
    int64_t dim = fg_attr_int(n, "dim"), pieces = 0;
    if (dim < 0)
      dim += n->out[0]->type.rank;
    for (int j = 0; j < n->nin; j++)
      pieces += n->in[j]->type.dims[dim].size > 0;
    if (pieces > 64) {
      fg_error(d, n->loc, "cat of %lld non-empty pieces: the code generator supports at most 64",
               (long long)pieces);
      return false;
    }
  }
  for (int i = 0; i < p->nkernels; i++) {
    fg_kernel *k = &p->kernels[i];
    if (!within_limits(k, d))
      return false;
    if (schedule_empty(k))
      continue;
    switch (k->kind) {
    case FG_KERNEL_POINTWISE:
      schedule_pointwise(p, k, o);
      break;
    case FG_KERNEL_ROW:
      schedule_row(p, k, o);
      if (k->ncols || k->ntails) {
        if (k->split != 1 || !k->persistent) {
          fg_internal_error(d, p->g->loc, "row + column kernel %d of graph '%s' is not persistent",
                            k->id, p->g->name);
          return false;
        }
        schedule_rowcol(p, k, o);
      }
      break;
    case FG_KERNEL_COLUMN:
      schedule_column(p, k, o);
      break;
    case FG_KERNEL_ATTENTION:
      if (!schedule_attention(p, k, o, d))
        return false;
      break;
    case FG_KERNEL_ATTENTION_BWD:
      if (!schedule_attention_bwd(p, k, o, d))
        return false;
      break;
    case FG_KERNEL_SCAN:
    case FG_KERNEL_SCAN_CHUNKS:
      schedule_scan(p, k, o);
      break;
    default:
      schedule_scatter(p, k, o);
      break;
    }
    if (fg_sym_involves(&p->sym, k->rank ? k->dims[0] : 0))
      symbolic_grid(p, k);
    else if (p->sym.n &&
             (counts_symbolic(p->g) || p->sym.affine ||
              (fg_kernel_is_scatter(k->kind) && fg_sym_involves(&p->sym, k->scat_sources)))) {
      /* T's count in a kernel over static extents (a mean over T, after
       * the column kernel that summed it); with expressions of T, a view
       * such a kernel reads may start along T (the last rows: T-4) */
      fg_buf_ref z = {FG_BUF_SYM, 0};
      k->args = fg_arena_append(&p->g->arena, k->args, &k->nargs, &z, sizeof z);
    }
    if (!k->grid_formula && !grid_in_limits(p, k, d))
      return false;
    if (k->split_formula && !k->mask[0]) {
      /* Split at run time (col_split_formula): nreds rows of split x kept
       * 8-byte partials, none where the split is 1; split x kept is at most
       * block x vec x G x ceil(C / G) <= block x vec x (C + G - 1), G < C
       * (the size `bytes` states), and there are G < C counters. */
      fg_arena *a = &p->g->arena;
      int64_t C = col_split_ctas(p, k), per = k->outer * k->inner;
      int64_t most = (int64_t)k->block * k->vec * 2 * C, at_max = fg_sym_at_max(&p->sym, per);
      if (at_max < most / k->split)
        most = at_max * k->split;
      k->partial_temp = add_temp(p, 8 * (int64_t)k->nreds * most, false);
      p->temps[k->partial_temp].bytes_formula =
          fg_arena_printf(a, "max(1,%lld*(%s)*%s*min(1,%s-1))", 8 * (long long)k->nreds,
                          fg_sym_formula(&p->sym, per, a), k->split_formula, k->split_formula);
      k->counter_temp = add_temp(p, 4 * C, true);
      add_workspace_args(p, k);
    } else if (k->split > 1 && k->cluster <= 1) {
      /* Partials: one 8-byte accumulator per reduction, per output element
       * (column) or row (row), per split slice. */
      int64_t per = k->kind == FG_KERNEL_ROW ? k->outer : k->outer * k->inner;
      int64_t rows = k->nreds + fg_plan_column_variances(k); /* a variance's mean offsets */
      k->partial_temp = add_temp(p, 8 * rows * per * k->split, false);
      int64_t counters = k->kind == FG_KERNEL_ROW ? k->outer : k->grid[0];
      k->counter_temp = add_temp(p, 4 * counters, true);
      add_workspace_args(p, k);
    }
    bool wide_partials = k->split_formula
                             ? p->temps[k->partial_temp].bytes >= ((int64_t)1 << 31)
                             : k->split > 1 && k->cluster <= 1 &&
                                   8 * (int64_t)(k->nreds + fg_plan_column_variances(k)) *
                                           k->outer * k->inner * k->split >=
                                       ((int64_t)1 << 31);
    /* 64-bit indices when an extent reaches INDEX32_LIMIT or a workspace
     * offset 2^31 */
    k->idx64 = max_extent(p, k) >= INDEX32_LIMIT || wide_partials;
    k->narrow_max = k->idx64 && !wide_partials ? narrow_limit(p, k) : 0;
    lint_kernel(p, k);
  }
  choose_l2_order(p, o);
  fg_plan_assign_streams(p);
  fg_plan_assign_pdl(p);
  lint_reads(p);
  return true;
}
