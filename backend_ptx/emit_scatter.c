/* issue 20: the kernels of an index_add or scatter_add (opt/plan.h), deterministic
 * with no float atomics. Each destination slice of the operand along dim
 * is a bin; the sources are the index's positions k.
 *
 *   COUNT  a thread a source: cnt[bin(k)] += 1 (integer atomics: the
 *          counts do not depend on their order)
 *   SCAN   off[b] = cnt[0] + ... + cnt[b-1], off[pad] the total; a CTA
 *          a range of bins (embscan), from the ranges' counts before it
 *          (COUNT adds 1 to cnt[pad + range] too, FILL takes it back)
 *   FILL   a thread a source: fill[off[b] + (cnt[b] -= 1)] = k, so each
 *          bin's segment holds its sources in some order; every count is
 *          back to zero for the next run (the temp is zeroed once)
 *   ORDER  a thread a source: its rank r among its segment's sources;
 *          order[off[b] + r] = k, the segment ascending
 *   SUM    the pointwise form over the result: each element is the
 *          operand's element plus the source's elements of its slice's
 *          segment, added in ascending k in the reduction's accumulator
 *          and rounded once: the interpreter's order and rounding
 *          (ir/interp_index.c), so the bits are the interpreter's and the
 *          same on every run.
 *
 *   SORT   (scatter2) COUNT, SCAN, FILL and ORDER by one CTA, a barrier
 *          between the steps, where a thread's sources fit in registers
 *          and one SM's scattered accesses cost less than three launches
 *          (segment.c scatter_fused); its arrays in shared memory where
 *          they fit (embscan)
 *   SELECT (embscan) an index_add along dim 0 with few sources: SUM alone,
 *          each CTA selecting its slices' sources from the whole index
 *          in ascending position (segment.c scatter_select; emit_select)
 *
 * bin(k) is the index at k clamped into [0, slices) (docs/format.md
 * 5.11); for scatter_add (scatter2) each destination element is a bin:
 * the operand's row-major position at k's coordinates in the index with
 * dim's replaced by the clamped index, and SUM is a thread an element.
 * The temps are i32 (segment.c refuses 2^30 bins or sources; with
 * sources a*T + b over the symbolic size T, more than 2^31-1 at T's
 * largest: scatter_limits). Over T (symidx) the kernels take T's count:
 * COUNT, FILL and ORDER have a grid of a*T + b threads, and every kernel
 * bounds the sources by it (sources()). */
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "index.h"
#include "infer.h"

static LLVMTypeRef i32t(fgb_emitter *e) { return LLVMInt32TypeInContext(e->ctx); }

static LLVMValueRef temp(fgb_emitter *e, int t) {
  return fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, t});
}

/* temp t's i32 at i in global memory */
static LLVMValueRef global_at(fgb_emitter *e, int t, LLVMValueRef i) {
  return fgb_gep_global(e->m, temp(e, t), i32t(e), i);
}

/* The fused sort's shared array where its steps' arrays fit (embscan,
 * k->scat_smem): counts [pad], offsets [pad + 1] and filled positions
 * [sources], i32; made at the first use. */
static LLVMValueRef sort_smem(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  char name[256];
  snprintf(name, sizeof name, "%s_sort", LLVMGetValueName(e->fn));
  LLVMValueRef g = LLVMGetNamedGlobal(fgb_llvm_module(e->m), name);
  if (g)
    return g;
  int64_t ints = 2 * k->scat_pad + 1 + fg_sym_at_max(&e->p->sym, k->scat_sources);
  return fgb_shared_array(e->m, name, 4 * (uint64_t)ints);
}

/* temp t's i32 at i: in the fused sort's shared array where it keeps
 * that temp (not the ordered positions, which the SUM reads), else in
 * global memory. */
static LLVMValueRef at(fgb_emitter *e, int t, LLVMValueRef i) {
  const fg_kernel *k = e->k;
  if (!k->scat_smem || t == k->scat_order)
    return global_at(e, t, i);
  int64_t first = t == k->scat_cnt ? 0 : t == k->scat_off ? k->scat_pad : 2 * k->scat_pad + 1;
  return fgb_gep(e->m, sort_smem(e), i32t(e), LLVMBuildAdd(e->b, fgb_const(e, first), i, ""));
}

/* temp t's i32 at i, in the index type */
static LLVMValueRef load_at(fgb_emitter *e, int t, LLVMValueRef i) {
  LLVMValueRef v = LLVMBuildLoad2(e->b, i32t(e), at(e, t, i), "");
  return e->ity == i32t(e) ? v : LLVMBuildSExt(e->b, v, e->ity, "");
}

static void store_at(fgb_emitter *e, int t, LLVMValueRef i, LLVMValueRef v) {
  if (e->ity != i32t(e))
    v = LLVMBuildTrunc(e->b, v, i32t(e), "");
  LLVMBuildStore(e->b, v, at(e, t, i));
}

/* The number of sources: a constant, or (symidx) a*T + b from T's
 * argument where the index has the symbolic size. */
static LLVMValueRef sources(fgb_emitter *e) { return fgb_extent(e, e->k->scat_sources); }

/* Whether the number of sources is only known at run time (symidx). */
static bool sources_at_run(const fgb_emitter *e) {
  return fg_sym_involves(&e->p->sym, e->k->scat_sources);
}

/* The thread's source position, and the guard k < sources. */
static LLVMValueRef source_of(fgb_emitter *e, LLVMBasicBlockRef *merge) {
  const fg_kernel *k = e->k;
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  *merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, gid, sources(e), ""));
  return gid;
}

/* The bin of source s (a position in the index, row-major): for
 * index_add the index there clamped into [0, slices); for scatter_add the
 * operand's element (row-major) at s's coordinates with dim's replaced by
 * the index there, clamped into [0, size) (ir/index.h). */
static LLVMValueRef bin_of(fgb_emitter *e, LLVMValueRef s) {
  const fg_node *n = e->k->scat;
  const fg_value *iv = n->in[1];
  const fg_type *it = &iv->type, *xt = &n->in[0]->type;
  fg_index_map m;
  fg_index_map_of(n, &m);
  LLVMValueRef c[FG_MAX_RANK];
  if (n->op->code == FG_OP_SCATTER_ADD) {
    int64_t sizes[FG_MAX_RANK];
    for (int d = 0; d < it->rank; d++)
      sizes[d] = it->dims[d].size;
    fgb_delinearize(e, s, sizes, it->rank, c);
  } else {
    c[0] = s;
  }
  e->lanes[0] = s;
  e->nuniform = 0;
  /* one lane: the select's SUM has wider vectors, but a source's index
   * is one element (not the first of a vector at s) */
  int vec = e->vec;
  e->vec = 1;
  LLVMValueRef v = fgb_emit_value(e, iv, c);
  e->vec = vec;
  if (!v)
    return NULL;
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  v = fgb_convert(e->m, v, iv->type.dtype, FG_I64);
  LLVMValueRef lo = LLVMConstInt(i64, 0, 0),
               hi = LLVMConstInt(i64, (unsigned long long)(m.size - 1), 0);
  v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v, lo, ""), lo, v, "");
  v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, v, hi, ""), hi, v, "");
  v = e->ity == i64 ? v : LLVMBuildTrunc(e->b, v, e->ity, "");
  if (n->op->code != FG_OP_SCATTER_ADD)
    return v;
  LLVMValueRef lin = fgb_const(e, 0);
  for (int d = 0; d < xt->rank; d++) {
    LLVMValueRef x = d == m.dim ? v : m.x_src[d] == FG_INDEX_ZERO ? fgb_const(e, 0) : c[d];
    lin = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, lin, fgb_const(e, xt->dims[d].size), ""), x, "");
  }
  return lin;
}

/* The count of bin b's scan range (a SCAN of several CTAs), after the
 * bins' counts: COUNT adds to it and FILL takes it back to zero. */
static LLVMValueRef range_count_at(fgb_emitter *e, LLVMValueRef b) {
  const fg_kernel *k = e->k;
  LLVMValueRef r = LLVMBuildUDiv(e->b, b, fgb_const(e, (int64_t)k->scat_threads * k->scat_seg), "");
  return at(e, k->scat_cnt, LLVMBuildAdd(e->b, fgb_const(e, k->scat_pad), r, ""));
}

/* COUNT's step for source s of bin b: its bin's count up by one, and its
 * scan range's where the scan has several CTAs. */
static void count_one(fgb_emitter *e, LLVMValueRef b) {
  LLVMValueRef one = LLVMConstInt(i32t(e), 1, 0);
  fgb_atomic_add_i32_global(e->m, at(e, e->k->scat_cnt, b), one);
  if (e->k->scat_ctas > 1)
    fgb_atomic_add_i32_global(e->m, range_count_at(e, b), one);
}

/* FILL's: the count down by one gives s a slot in its bin's segment. */
static void fill_one(fgb_emitter *e, LLVMValueRef s, LLVMValueRef b) {
  const fg_kernel *k = e->k;
  LLVMValueRef down = LLVMConstInt(i32t(e), -1ull, 1);
  LLVMValueRef old = fgb_atomic_add_i32_global(e->m, at(e, k->scat_cnt, b), down);
  if (k->scat_ctas > 1) /* the range's count back to zero too */
    fgb_atomic_add_i32_global(e->m, range_count_at(e, b), down);
  if (e->ity != i32t(e))
    old = LLVMBuildSExt(e->b, old, e->ity, "");
  LLVMValueRef slot = LLVMBuildAdd(e->b, load_at(e, k->scat_off, b),
                                   LLVMBuildSub(e->b, old, fgb_const(e, 1), ""), "");
  store_at(e, k->scat_fill, slot, s);
}

/* ORDER's: s's rank among its segment's sources is its position in the
 * ascending segment. */
static void order_one(fgb_emitter *e, LLVMValueRef s, LLVMValueRef b) {
  const fg_kernel *k = e->k;
  LLVMValueRef lo = load_at(e, k->scat_off, b),
               hi = load_at(e, k->scat_off, LLVMBuildAdd(e->b, b, fgb_const(e, 1), ""));
  LLVMValueRef rank = fgk_local_var(e, e->ity, fgb_const(e, 0));
  fgk_loop l;
  LLVMValueRef j = fgk_loop_begin(e, &l, lo, hi, fgb_const(e, 1));
  LLVMValueRef before = LLVMBuildICmp(e->b, LLVMIntSLT, load_at(e, k->scat_fill, j), s, "");
  LLVMValueRef r = LLVMBuildLoad2(e->b, e->ity, rank, "");
  LLVMBuildStore(e->b, LLVMBuildAdd(e->b, r, LLVMBuildZExt(e->b, before, e->ity, ""), ""), rank);
  fgk_loop_end(e, &l, j);
  store_at(e, k->scat_order, LLVMBuildAdd(e->b, lo, LLVMBuildLoad2(e->b, e->ity, rank, ""), ""), s);
}

static bool emit_count(fgb_emitter *e, bool fill) {
  LLVMBasicBlockRef merge;
  LLVMValueRef s = source_of(e, &merge);
  LLVMValueRef b = bin_of(e, s);
  if (!b)
    return false;
  if (fill)
    fill_one(e, s, b);
  else
    count_one(e, b);
  fgb_end_if(e, merge);
  return !e->failed;
}

static bool emit_order(fgb_emitter *e) {
  LLVMBasicBlockRef merge;
  LLVMValueRef s = source_of(e, &merge);
  LLVMValueRef b = bin_of(e, s);
  if (!b)
    return false;
  order_one(e, s, b);
  fgb_end_if(e, merge);
  return !e->failed;
}

/* Thread t's 4 counts at bin i (16 bytes: the temps are 256-aligned and i
 * a multiple of 4). */
static LLVMValueRef load4(fgb_emitter *e, LLVMValueRef i) {
  LLVMTypeRef v4 = LLVMVectorType(i32t(e), 4);
  LLVMValueRef ld = LLVMBuildLoad2(e->b, v4, at(e, e->k->scat_cnt, i), "");
  LLVMSetAlignment(ld, 16);
  return ld;
}

static LLVMValueRef lane(fgb_emitter *e, LLVMValueRef v4, int j) {
  return LLVMBuildExtractElement(e->b, v4, LLVMConstInt(i32t(e), (unsigned)j, 0), "");
}

/* Stores the running offsets of 4 bins from *run (i32) on. */
static void store4(fgb_emitter *e, LLVMValueRef i, LLVMValueRef v4, LLVMValueRef *run) {
  LLVMTypeRef v4t = LLVMVectorType(i32t(e), 4);
  LLVMValueRef out = LLVMGetUndef(v4t);
  for (int j = 0; j < 4; j++) {
    out = LLVMBuildInsertElement(e->b, out, *run, LLVMConstInt(i32t(e), (unsigned)j, 0), "");
    *run = LLVMBuildAdd(e->b, *run, lane(e, v4, j), "");
  }
  LLVMValueRef st = LLVMBuildStore(e->b, out, at(e, e->k->scat_off, i));
  LLVMSetAlignment(st, 16);
  if (e->k->scat_smem) { /* the SUM reads them from the temp */
    st = LLVMBuildStore(e->b, out, global_at(e, e->k->scat_off, i));
    LLVMSetAlignment(st, 16);
  }
}

static LLVMValueRef sum4(fgb_emitter *e, LLVMValueRef v4) {
  LLVMValueRef s = lane(e, v4, 0);
  for (int j = 1; j < 4; j++)
    s = LLVMBuildAdd(e->b, s, lane(e, v4, j), "");
  return s;
}

/* A warp's inclusive prefix of an i32 a lane, by butterflies (integers:
 * any order gives the same sums); *total gets the warp's total. */
static LLVMValueRef warp_inclusive_scan(fgb_emitter *e, LLVMValueRef v, LLVMValueRef lane,
                                        LLVMValueRef *total) {
  LLVMValueRef incl = v, tot = v;
  for (int d = 1; d < 32; d *= 2) {
    LLVMValueRef other = fgb_shfl_bfly(e->m, tot, d);
    LLVMValueRef upper = LLVMBuildICmp(
        e->b, LLVMIntNE, LLVMBuildAnd(e->b, lane, LLVMConstInt(i32t(e), (unsigned)d, 0), ""),
        LLVMConstInt(i32t(e), 0, 0), "");
    incl = LLVMBuildAdd(e->b, incl,
                        LLVMBuildSelect(e->b, upper, other, LLVMConstInt(i32t(e), 0, 0), ""), "");
    tot = LLVMBuildAdd(e->b, tot, other, "");
  }
  *total = tot;
  return incl;
}

/* The sum of an i32 over a warp's lanes, in every lane (butterflies). */
static LLVMValueRef warp_sum(fgb_emitter *e, LLVMValueRef v) {
  for (int d = 1; d < 32; d *= 2)
    v = LLVMBuildAdd(e->b, v, fgb_shfl_bfly(e->m, v, d), "");
  return v;
}

/* embscan: the scan's shared array, two buffers of a total a warp. */
enum { SCAN_MAX_WARPS = 32 };

/* Thread t's exclusive prefix of x over its CTA (in thread order), and
 * the CTA's total in *all: each warp's lanes scanned by butterflies, the
 * warps' totals passed through buffer buf (0 or 1) of the shared array
 * sh, one barrier; a warp's lanes then hold the warps' totals and sum
 * those before their own. Successive calls alternate the buffers, so that
 * no store waits on the reads of the call before. */
static LLVMValueRef block_exclusive(fgb_emitter *e, LLVMValueRef sh, LLVMValueRef buf,
                                    LLVMValueRef x, LLVMValueRef *all) {
  LLVMTypeRef i32 = i32t(e);
  int NW = e->k->block / 32;
  LLVMValueRef tid = fgb_tid(e->m, 0), zero = LLVMConstInt(i32, 0, 0);
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid, LLVMConstInt(i32, 31, 0), "");
  LLVMValueRef wsum, incl = warp_inclusive_scan(e, x, lane, &wsum);
  LLVMValueRef excl = LLVMBuildSub(e->b, incl, x, "");
  if (NW == 1) {
    *all = wsum;
    return excl;
  }
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef first = LLVMBuildMul(e->b, buf, LLVMConstInt(i32, SCAN_MAX_WARPS, 0), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, zero, ""));
  LLVMBuildStore(e->b, wsum, fgb_gep(e->m, sh, i32, LLVMBuildAdd(e->b, first, warp, "")));
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  /* lane l: warp l's total */
  LLVMValueRef has = LLVMBuildICmp(e->b, LLVMIntULT, lane, LLVMConstInt(i32, (unsigned)NW, 0), "");
  LLVMValueRef slot = LLVMBuildAdd(e->b, first, LLVMBuildSelect(e->b, has, lane, zero, ""), "");
  LLVMValueRef w = LLVMBuildLoad2(e->b, i32, fgb_gep(e->m, sh, i32, slot), "");
  w = LLVMBuildSelect(e->b, has, w, zero, "");
  LLVMValueRef below = LLVMBuildICmp(e->b, LLVMIntULT, lane, warp, "");
  LLVMValueRef before = warp_sum(e, LLVMBuildSelect(e->b, below, w, zero, ""));
  *all = warp_sum(e, w);
  return LLVMBuildAdd(e->b, before, excl, "");
}

static LLVMValueRef to_i32(fgb_emitter *e, LLVMValueRef v) {
  return LLVMTypeOf(v) == i32t(e) ? v : LLVMBuildTrunc(e->b, v, i32t(e), "");
}

/* The first offset of scan CTA j's range: the sum of the ranges' counts
 * before it, a thread every block-th of them, summed over the CTA. */
static LLVMValueRef range_base(fgb_emitter *e, LLVMValueRef sh, LLVMValueRef j) {
  const fg_kernel *k = e->k;
  LLVMTypeRef i32 = i32t(e);
  LLVMValueRef acc = fgk_local_var(e, i32, LLVMConstInt(i32, 0, 0));
  fgk_loop l;
  LLVMValueRef i = fgk_loop_begin(e, &l, fgb_thread_index(e, 0), j, fgb_const(e, k->block));
  LLVMValueRef r = LLVMBuildAdd(e->b, fgb_const(e, k->scat_pad), i, "");
  LLVMValueRef c = LLVMBuildLoad2(e->b, i32, at(e, k->scat_cnt, r), "");
  LLVMBuildStore(e->b, LLVMBuildAdd(e->b, LLVMBuildLoad2(e->b, i32, acc, ""), c, ""), acc);
  fgk_loop_end(e, &l, i);
  LLVMValueRef all;
  block_exclusive(e, sh, LLVMConstInt(i32, 1, 0), LLVMBuildLoad2(e->b, i32, acc, ""), &all);
  return all;
}

/* The scan (embscan): CTA j of scat_ctas takes the range of T x S bins
 * from j T S (the fused sort: one CTA, all of them), a chunk of 4T bins
 * at a time, thread t the 4 at 4t in it (16-byte loads: a warp's 512
 * contiguous bytes). A chunk's offsets are the running carry (from the
 * ranges' counts before j) plus each thread's exclusive prefix over the
 * CTA (block_exclusive); the next chunk's counts are loaded before the
 * chunk's barrier. The last thread of the last CTA writes the total as
 * off[pad]. */
static bool emit_scan(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int T = k->block, C = k->scat_seg / 4;
  LLVMTypeRef i32 = i32t(e), v4 = LLVMVectorType(i32, 4);
  char name[256];
  snprintf(name, sizeof name, "%s_scan", LLVMGetValueName(e->fn));
  LLVMValueRef sh = fgb_shared_array(e->m, name, 4 * 2 * SCAN_MAX_WARPS);
  bool ranges = k->scat_ctas > 1;
  LLVMValueRef j = ranges ? fgb_block_index(e, 0) : fgb_const(e, 0);
  LLVMValueRef t = fgb_thread_index(e, 0);
  LLVMValueRef first =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, j, fgb_const(e, (int64_t)T * k->scat_seg), ""),
                   LLVMBuildMul(e->b, t, fgb_const(e, 4), ""), "");
  LLVMValueRef next = fgk_local_var(e, v4, load4(e, first));
  LLVMValueRef carry =
      fgk_local_var(e, i32, ranges ? range_base(e, sh, j) : LLVMConstInt(i32, 0, 0));
  fgk_loop l;
  LLVMValueRef c = fgk_loop_begin(e, &l, fgb_const(e, 0), fgb_const(e, C), fgb_const(e, 1));
  LLVMValueRef v = LLVMBuildLoad2(e->b, v4, next, "");
  if (C > 1) {
    LLVMValueRef c1 = fgk_imin(e, LLVMBuildAdd(e->b, c, fgb_const(e, 1), ""), fgb_const(e, C - 1));
    LLVMValueRef i1 =
        LLVMBuildAdd(e->b, first, LLVMBuildMul(e->b, c1, fgb_const(e, 4 * T), ""), "");
    LLVMBuildStore(e->b, load4(e, i1), next);
  }
  LLVMValueRef buf = LLVMBuildAnd(e->b, to_i32(e, c), LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef all, ex = block_exclusive(e, sh, buf, sum4(e, v), &all);
  LLVMValueRef cy = LLVMBuildLoad2(e->b, i32, carry, "");
  LLVMValueRef run = LLVMBuildAdd(e->b, cy, ex, "");
  store4(e, LLVMBuildAdd(e->b, first, LLVMBuildMul(e->b, c, fgb_const(e, 4 * T), ""), ""), v, &run);
  LLVMBuildStore(e->b, LLVMBuildAdd(e->b, cy, all, ""), carry);
  fgk_loop_end(e, &l, c);
  /* off[pad]: the total, after the last thread's bins */
  LLVMValueRef last = LLVMBuildICmp(e->b, LLVMIntEQ, t, fgb_const(e, T - 1), "");
  if (ranges)
    last = LLVMBuildAnd(e->b, last,
                        LLVMBuildICmp(e->b, LLVMIntEQ, j, fgb_const(e, k->scat_ctas - 1), ""), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, last);
  store_at(e, k->scat_off, fgb_const(e, k->scat_pad), sources(e));
  if (k->scat_smem)
    LLVMBuildStore(e->b, to_i32(e, sources(e)),
                   global_at(e, k->scat_off, fgb_const(e, k->scat_pad)));
  fgb_end_if(e, merge);
  return !e->failed;
}

/* SORT: COUNT, SCAN, FILL and ORDER by one CTA, a barrier after each
 * (the block's global writes are then visible to all its threads). Thread
 * t takes sources t, t + T, ... (scat_rounds of them, straight-line): their
 * bins are computed once, every index load in flight at once, and kept in
 * registers for the three steps. The counts return to zero as in FILL.
 * With k->scat_smem (embscan) the counts, offsets and filled positions
 * are in shared memory (the counts zeroed first; the offsets also stored
 * to their temp), so that only the index loads and the offsets' and
 * ordered positions' stores go to global memory. */
enum { SORT_MAX_ROUNDS = 16 };

/* The fused sort's shared counts set to zero (shared memory starts
 * undefined): thread t the 4 at 4t of each chunk of 4T, then a barrier. */
static void zero_smem_counts(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int T = k->block;
  LLVMTypeRef v4 = LLVMVectorType(i32t(e), 4);
  LLVMValueRef first = LLVMBuildMul(e->b, fgb_thread_index(e, 0), fgb_const(e, 4), "");
  fgk_loop l;
  LLVMValueRef i = fgk_loop_begin(e, &l, first, fgb_const(e, k->scat_pad), fgb_const(e, 4 * T));
  LLVMValueRef st = LLVMBuildStore(e->b, LLVMConstNull(v4), at(e, k->scat_cnt, i));
  LLVMSetAlignment(st, 16);
  fgk_loop_end(e, &l, i);
  fgb_barrier(e->m);
}

static bool emit_sort(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int R = k->scat_rounds;
  if (R > SORT_MAX_ROUNDS) {
    fgb_fail(e, "scatter sort kernel %d takes %d sources a thread (at most %d)", k->id, R,
             SORT_MAX_ROUNDS);
    return false;
  }
  LLVMValueRef tid = fgb_thread_index(e, 0), s[SORT_MAX_ROUNDS], b[SORT_MAX_ROUNDS],
               ok[SORT_MAX_ROUNDS];
  /* (symidx: T's range proves at least one source, segment.c scatter_fused) */
  LLVMValueRef n = sources(e), last = LLVMBuildSub(e->b, n, fgb_const(e, 1), "");
  for (int r = 0; r < R; r++) {
    s[r] = LLVMBuildAdd(e->b, tid, fgb_const(e, (int64_t)r * k->block), "");
    ok[r] = LLVMBuildICmp(e->b, LLVMIntSLT, s[r], n, "");
    /* past the end: the last source's bin, computed and not used */
    b[r] = bin_of(e, LLVMBuildSelect(e->b, ok[r], s[r], last, ""));
    if (!b[r])
      return false;
  }
  if (k->scat_smem)
    zero_smem_counts(e);
  for (int step = 0; step < 3; step++) {
    if (step == 1 && !emit_scan(e))
      return false;
    for (int r = 0; r < R && step != 1; r++) {
      LLVMBasicBlockRef merge = fgb_begin_if(e, ok[r]);
      if (step == 0)
        count_one(e, b[r]);
      else
        fill_one(e, s[r], b[r]);
      fgb_end_if(e, merge);
    }
    fgb_barrier(e->m);
  }
  for (int r = 0; r < R; r++) {
    LLVMBasicBlockRef merge = fgb_begin_if(e, ok[r]);
    order_one(e, s[r], b[r]);
    fgb_end_if(e, merge);
  }
  return !e->failed;
}

/* The accumulator's add: f32 / f64 for floats, i64 (wrapping) for the
 * integers and bool (the interpreter's). */
static LLVMValueRef acc_add(fgb_emitter *e, fg_dtype acc, LLVMValueRef a, LLVMValueRef b) {
  return fg_dtype_is_float(acc) ? LLVMBuildFAdd(e->b, a, b, "") : LLVMBuildAdd(e->b, a, b, "");
}

/* SUM of a scatter_add: a thread an element (each its own bin, the
 * result's row-major position), its sources' positions in the index
 * delinearized into the source's coordinates (the index's are a prefix of
 * the source's, docs/format.md 5.11). */
static bool emit_sum_elements(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  const fg_node *n = k->scat;
  const fg_value *x = n->in[0], *src = n->in[2], *out = n->out[0];
  const fg_type *it = &n->in[1]->type;
  fg_dtype dt = out->type.dtype, acc = fg_reduce_acc_dtype(dt);
  int rank = k->rank;
  int64_t total = 1, isz[FG_MAX_RANK];
  for (int d = 0; d < rank; d++)
    total *= k->dims[d];
  for (int d = 0; d < it->rank; d++)
    isz[d] = it->dims[d].size;
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, gid, fgb_const(e, total), ""));
  LLVMValueRef c[FG_MAX_RANK], sc[FG_MAX_RANK];
  fgb_delinearize(e, gid, k->dims, rank, c);
  e->lanes[0] = c[rank - 1];
  e->nuniform = 0;
  LLVMTypeRef at_ty = fgb_reg_type(e->m, acc);
  LLVMValueRef v = fgb_emit_value(e, x, c);
  if (!v)
    return false;
  LLVMValueRef accv = fgk_local_var(e, at_ty, fgb_convert(e->m, v, x->type.dtype, acc));
  LLVMValueRef lo = load_at(e, k->scat_off, gid),
               hi = load_at(e, k->scat_off, LLVMBuildAdd(e->b, gid, fgb_const(e, 1), ""));
  fgk_loop l;
  LLVMValueRef jj = fgk_loop_begin(e, &l, lo, hi, fgb_const(e, 1));
  int mark = fgb_memo_mark(e);
  fgb_delinearize(e, load_at(e, k->scat_order, jj), isz, it->rank, sc);
  e->lanes[0] = sc[rank - 1];
  v = fgb_emit_value(e, src, sc);
  if (!v)
    return false;
  LLVMValueRef a = LLVMBuildLoad2(e->b, at_ty, accv, "");
  LLVMBuildStore(e->b, acc_add(e, acc, a, fgb_convert(e->m, v, src->type.dtype, acc)), accv);
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, jj);
  e->lanes[0] = c[rank - 1];
  LLVMValueRef val = fgb_convert(e->m, LLVMBuildLoad2(e->b, at_ty, accv, ""), acc, dt);
  fgb_emit_store_lanes(e, out, c, &val);
  fgb_end_if(e, merge);
  return !e->failed;
}

/* One source's elements at s added into the accumulators of a vector at
 * coordinates c (index_add's SUM). */
static bool add_source(fgb_emitter *e, const fg_index_map *m, const LLVMValueRef *c,
                       const LLVMValueRef *lanes, LLVMValueRef s, LLVMValueRef *accs) {
  const fg_kernel *k = e->k;
  const fg_value *src = k->scat->in[2];
  fg_dtype acc = fg_reduce_acc_dtype(k->scat->out[0]->type.dtype);
  int rank = k->rank, last = rank - 1, V = e->vec;
  LLVMTypeRef at_ty = fgb_reg_type(e->m, acc);
  LLVMValueRef idx[FG_MAX_RANK];
  int mark = fgb_memo_mark(e);
  int nuni = e->nuniform;
  if (m->dim != last)
    e->uniform[e->nuniform++] = s;
  memcpy(idx, c, sizeof(LLVMValueRef) * (size_t)rank);
  idx[m->dim] = s;
  for (int j = 0; j < V; j++) {
    if (m->dim != last)
      idx[last] = lanes[j];
    LLVMValueRef v = fgb_emit_value(e, src, idx);
    if (!v)
      return false;
    LLVMValueRef a = LLVMBuildLoad2(e->b, at_ty, accs[j], "");
    LLVMBuildStore(e->b, acc_add(e, acc, a, fgb_convert(e->m, v, src->type.dtype, acc)), accs[j]);
  }
  e->nuniform = nuni;
  fgb_memo_release(e, mark);
  return true;
}

/* A vector of index_add's SUM: its coordinates, lanes, accumulators (the
 * operand's elements), its slice's segment [lo, hi) and that segment's
 * first source (loaded ahead, at the segment's start clamped into the
 * order array; used only where the segment is not empty). */
typedef struct {
  LLVMValueRef c[FG_MAX_RANK], lanes[16], accs[16];
  LLVMValueRef lo, hi, first, ok;
} sum_vec;

/* Makes q the vector the emitter's value reads index: its lanes along the
 * last dim and its other coordinates uniform. */
static void sum_vec_bind(fgb_emitter *e, const sum_vec *q, int V, int last) {
  memcpy(e->lanes, q->lanes, sizeof(LLVMValueRef) * (size_t)V);
  e->nuniform = 0;
  for (int d = 0; d < last; d++)
    e->uniform[e->nuniform++] = q->c[d];
}

/* The sources after a segment's first, one at a time in ascending order.
 * (Four at a time in straight-line code, embscan, made embedding_bwd's sum
 * kernel 109 -> 135 us on the H100: docs/benchmarks.md, run B2.) */
static bool add_rest(fgb_emitter *e, const fg_index_map *m, sum_vec *q) {
  const fg_kernel *k = e->k;
  fgk_loop l;
  LLVMValueRef jj =
      fgk_loop_begin(e, &l, LLVMBuildAdd(e->b, q->lo, fgb_const(e, 1), ""), q->hi, fgb_const(e, 1));
  if (!add_source(e, m, q->c, q->lanes, load_at(e, k->scat_order, jj), q->accs))
    return false;
  fgk_loop_end(e, &l, jj);
  return true;
}

/* Vector q of index_add's SUM at thread index gid: its coordinates (the
 * last vector's where gid's is past the end: q->ok false, loads valid, not
 * stored), its lanes, and its accumulators holding the operand's elements. */
static bool sum_vec_init(fgb_emitter *e, sum_vec *q, LLVMValueRef gid, int64_t total) {
  const fg_kernel *k = e->k;
  const fg_value *x = k->scat->in[0];
  fg_dtype acc = fg_reduce_acc_dtype(k->scat->out[0]->type.dtype);
  int rank = k->rank, last = rank - 1, V = e->vec;
  LLVMTypeRef at_ty = fgb_reg_type(e->m, acc);
  LLVMValueRef base = V > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, V), "") : gid;
  q->ok = LLVMBuildICmp(e->b, LLVMIntSLT, base, fgb_const(e, total), "");
  base = fgk_imin(e, base, fgb_const(e, total - V));
  fgb_delinearize(e, base, k->dims, rank, q->c);
  for (int j = 0; j < V; j++)
    q->lanes[j] = j == 0 ? q->c[last] : LLVMBuildAdd(e->b, q->c[last], fgb_const(e, j), "");
  sum_vec_bind(e, q, V, last);
  int mark = fgb_memo_mark(e);
  LLVMValueRef idx[FG_MAX_RANK];
  memcpy(idx, q->c, sizeof(LLVMValueRef) * (size_t)rank);
  for (int j = 0; j < V; j++) {
    idx[last] = q->lanes[j];
    LLVMValueRef v = fgb_emit_value(e, x, idx);
    if (!v)
      return false;
    q->accs[j] = fgk_local_var(e, at_ty, fgb_convert(e->m, v, x->type.dtype, acc));
  }
  fgb_memo_release(e, mark);
  return true;
}

/* Vector q's sums, rounded to the result's dtype and stored where q->ok. */
static void sum_vec_store(fgb_emitter *e, sum_vec *q) {
  const fg_value *out = e->k->scat->out[0];
  fg_dtype dt = out->type.dtype, acc = fg_reduce_acc_dtype(dt);
  LLVMTypeRef at_ty = fgb_reg_type(e->m, acc);
  sum_vec_bind(e, q, e->vec, e->k->rank - 1);
  LLVMBasicBlockRef merge = fgb_begin_if(e, q->ok);
  LLVMValueRef vals[16];
  for (int j = 0; j < e->vec; j++)
    vals[j] = fgb_convert(e->m, LLVMBuildLoad2(e->b, at_ty, q->accs[j], ""), acc, dt);
  fgb_emit_store_lanes(e, out, q->c, vals);
  fgb_end_if(e, merge);
}

/* SUM of a select (embscan, k->scat_select; index_add along dim 0, q the
 * thread's one vector): the CTA's elements lie in the slices [r0, r1].
 * In rounds of T sources, each thread takes one and computes its slice
 * (bin_of); those in [r0, r1] are appended to a shared list (positions,
 * then slices) at the CTA's count plus their rank among the round's
 * (block_exclusive of the flags), so the list is in ascending position.
 * After a barrier each thread walks the list and adds the sources of its
 * own slice, in that order: the interpreter's. */
static bool emit_select(fgb_emitter *e, sum_vec *q, int64_t total) {
  const fg_kernel *k = e->k;
  fg_index_map m;
  fg_index_map_of(k->scat, &m);
  int T = k->block, V = e->vec;
  int64_t S = k->scat_sources, inner = total / k->dims[0];
  LLVMTypeRef i32 = i32t(e);
  char name[256];
  snprintf(name, sizeof name, "%s_scan", LLVMGetValueName(e->fn));
  LLVMValueRef sh = fgb_shared_array(e->m, name, 4 * 2 * SCAN_MAX_WARPS);
  snprintf(name, sizeof name, "%s_list", LLVMGetValueName(e->fn));
  LLVMValueRef list = fgb_shared_array(e->m, name, 8 * (uint64_t)S);
  LLVMValueRef first = LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, (int64_t)T * V), "");
  LLVMValueRef end =
      fgk_imin(e, LLVMBuildAdd(e->b, first, fgb_const(e, (int64_t)T * V), ""), fgb_const(e, total));
  LLVMValueRef r0 = LLVMBuildSDiv(e->b, first, fgb_const(e, inner), "");
  LLVMValueRef r1 =
      LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, end, fgb_const(e, 1), ""), fgb_const(e, inner), "");
  LLVMValueRef count = fgk_local_var(e, i32, LLVMConstInt(i32, 0, 0));
  fgk_loop l;
  LLVMValueRef r =
      fgk_loop_begin(e, &l, fgb_const(e, 0), fgb_const(e, (S + T - 1) / T), fgb_const(e, 1));
  int mark = fgb_memo_mark(e);
  LLVMValueRef s =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, r, fgb_const(e, T), ""), fgb_thread_index(e, 0), "");
  LLVMValueRef b = bin_of(e, fgk_imin(e, s, fgb_const(e, S - 1)));
  if (!b)
    return false;
  LLVMValueRef in = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, s, fgb_const(e, S), ""),
                                 LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSGE, b, r0, ""),
                                              LLVMBuildICmp(e->b, LLVMIntSLE, b, r1, ""), ""),
                                 "");
  LLVMValueRef buf = LLVMBuildAnd(e->b, to_i32(e, r), LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef all, ex = block_exclusive(e, sh, buf, LLVMBuildZExt(e->b, in, i32, ""), &all);
  LLVMValueRef c0 = LLVMBuildLoad2(e->b, i32, count, "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, in);
  LLVMValueRef slot = LLVMBuildAdd(e->b, c0, ex, "");
  LLVMBuildStore(e->b, to_i32(e, s), fgb_gep(e->m, list, i32, slot));
  LLVMBuildStore(
      e->b, to_i32(e, b),
      fgb_gep(e->m, list, i32, LLVMBuildAdd(e->b, slot, LLVMConstInt(i32, (unsigned)S, 0), "")));
  fgb_end_if(e, merge);
  LLVMBuildStore(e->b, LLVMBuildAdd(e->b, c0, all, ""), count);
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, r);
  fgb_barrier(e->m);
  sum_vec_bind(e, q, V, k->rank - 1);
  LLVMValueRef n = LLVMBuildLoad2(e->b, i32, count, "");
  LLVMValueRef j = fgk_loop_begin(e, &l, LLVMConstInt(i32, 0, 0), n, LLVMConstInt(i32, 1, 0));
  LLVMValueRef sj = LLVMBuildLoad2(e->b, i32, fgb_gep(e->m, list, i32, j), "");
  LLVMValueRef bj = LLVMBuildLoad2(
      e->b, i32,
      fgb_gep(e->m, list, i32, LLVMBuildAdd(e->b, j, LLVMConstInt(i32, (unsigned)S, 0), "")), "");
  if (e->ity != i32) {
    sj = LLVMBuildSExt(e->b, sj, e->ity, "");
    bj = LLVMBuildSExt(e->b, bj, e->ity, "");
  }
  merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, bj, q->c[0], ""));
  if (!add_source(e, &m, q->c, q->lanes, sj, q->accs))
    return false;
  fgb_end_if(e, merge);
  fgk_loop_end(e, &l, j);
  return true;
}

/* SUM of an index_add: each thread k->chunks vectors of V adjacent elements
 * along the last dim, block-strided (embbwd2): every vector's operand
 * loads, segment bounds and first source are issued before any segment
 * is walked; then each vector adds its slice's sources in ascending
 * order (the first one, then the rest of the segment) and is stored. A
 * vector past the end takes the last vector's place (its loads valid)
 * and is not stored. A select (embscan) takes its sources from the index
 * instead (emit_select). */
static bool emit_sum(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->scat->op->code == FG_OP_SCATTER_ADD)
    return emit_sum_elements(e);
  const fg_node *n = k->scat;
  int rank = k->rank, last = rank - 1, V = e->vec, U = k->chunks > 1 ? k->chunks : 1;
  fg_index_map m;
  fg_index_map_of(n, &m);
  int64_t total = 1;
  for (int d = 0; d < rank; d++)
    total *= k->dims[d];
  if (!total) /* an empty result: nothing to launch */
    return true;
  if (U > 4 || total % V || (k->scat_select && U != 1)) {
    fgb_fail(e, "scatter sum kernel %d: %d chunks of %d lanes over %lld elements", k->id, U, V,
             (long long)total);
    return false;
  }
  LLVMValueRef gid0 = LLVMBuildAdd(
      e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, (int64_t)k->block * U), ""),
      fgb_thread_index(e, 0), "");
  sum_vec sv[4];
  for (int u = 0; u < U; u++) {
    sum_vec *q = &sv[u];
    LLVMValueRef gid = LLVMBuildAdd(e->b, gid0, fgb_const(e, (int64_t)u * k->block), "");
    if (!sum_vec_init(e, q, gid, total))
      return false;
    if (k->scat_select)
      continue;
    LLVMValueRef slice = q->c[m.dim];
    q->lo = load_at(e, k->scat_off, slice);
    q->hi = load_at(e, k->scat_off, LLVMBuildAdd(e->b, slice, fgb_const(e, 1), ""));
    q->first = NULL;
    if (sources_at_run(e)) {
      /* symidx: the segment's start clamped into [0, sources - 1], slot 0
       * where there are none (the temp holds one more slot) */
      LLVMValueRef j = fgk_imin(e, q->lo, LLVMBuildSub(e->b, sources(e), fgb_const(e, 1), ""));
      LLVMValueRef neg = LLVMBuildICmp(e->b, LLVMIntSLT, j, fgb_const(e, 0), "");
      q->first = load_at(e, k->scat_order, LLVMBuildSelect(e->b, neg, fgb_const(e, 0), j, ""));
    } else if (k->scat_sources > 0)
      q->first = load_at(e, k->scat_order, fgk_imin(e, q->lo, fgb_const(e, k->scat_sources - 1)));
  }
  if (k->scat_select) {
    if (!emit_select(e, &sv[0], total))
      return false;
    sum_vec_store(e, &sv[0]);
    return !e->failed;
  }
  for (int u = 0; u < U; u++) {
    sum_vec *q = &sv[u];
    sum_vec_bind(e, q, V, last);
    if (!q->first)
      continue;
    LLVMBasicBlockRef some = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, q->lo, q->hi, ""));
    if (!add_source(e, &m, q->c, q->lanes, q->first, q->accs))
      return false;
    if (!add_rest(e, &m, q))
      return false;
    fgb_end_if(e, some);
  }
  for (int u = 0; u < U; u++)
    sum_vec_store(e, &sv[u]);
  return !e->failed;
}

bool fgb_emit_scatter_kernel(fgb_emitter *e) {
  switch (e->k->kind) {
  case FG_KERNEL_SCATTER_COUNT:
    return emit_count(e, false);
  case FG_KERNEL_SCATTER_SCAN:
    return emit_scan(e);
  case FG_KERNEL_SCATTER_FILL:
    return emit_count(e, true);
  case FG_KERNEL_SCATTER_ORDER:
    return emit_order(e);
  case FG_KERNEL_SCATTER_SUM:
    return emit_sum(e);
  case FG_KERNEL_SCATTER_SORT:
    return emit_sort(e);
  default:
    fgb_fail(e, "kernel %d is not a scatter kernel", e->k->id);
    return false;
  }
}
