/* issue 20: the kernels of an index_add or scatter_add (opt/plan.h), deterministic
 * with no float atomics. Each destination slice of the operand along dim
 * is a bin; the sources are the index's positions k.
 *
 *   COUNT  a thread a source: cnt[bin(k)] += 1 (integer atomics: the
 *          counts do not depend on their order)
 *   SCAN   one CTA: off[b] = cnt[0] + ... + cnt[b-1], off[pad] the total
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
 *          (segment.c scatter_fused)
 *
 * bin(k) is the index at k clamped into [0, slices) (docs/format.md
 * 5.11); for scatter_add (scatter2) each destination element is a bin:
 * the operand's row-major position at k's coordinates in the index with
 * dim's replaced by the clamped index, and SUM is a thread an element.
 * The temps are i32 (segment.c refuses 2^30 bins or sources). */
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

static LLVMValueRef at(fgb_emitter *e, int t, LLVMValueRef i) {
  return fgb_gep_global(e->m, temp(e, t), i32t(e), i);
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

/* The thread's source position, and the guard k < sources. */
static LLVMValueRef source_of(fgb_emitter *e, LLVMBasicBlockRef *merge) {
  const fg_kernel *k = e->k;
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  *merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, gid, fgb_const(e, k->scat_sources), ""));
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
  LLVMValueRef v = fgb_emit_value(e, iv, c);
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

/* COUNT's step for source s of bin b: its bin's count up by one. */
static void count_one(fgb_emitter *e, LLVMValueRef b) {
  fgb_atomic_add_i32_global(e->m, at(e, e->k->scat_cnt, b), LLVMConstInt(i32t(e), 1, 0));
}

static bool emit_count(fgb_emitter *e) {
  LLVMBasicBlockRef merge;
  LLVMValueRef s = source_of(e, &merge);
  LLVMValueRef b = bin_of(e, s);
  if (!b)
    return false;
  count_one(e, b);
  fgb_end_if(e, merge);
  return !e->failed;
}

/* Up to this many bins a thread, the scan's loads are straight-line code,
 * all in flight at once and kept in registers for the second pass. */
enum { SCAN_UNROLL = 64 };

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

/* Zeroes the 4 counts at bin i (embbwd: the fused sort's, read by its
 * scan and needed by no later step, return to zero for the next run). */
static void zero4(fgb_emitter *e, LLVMValueRef i) {
  LLVMValueRef st =
      LLVMBuildStore(e->b, LLVMConstNull(LLVMVectorType(i32t(e), 4)), at(e, e->k->scat_cnt, i));
  LLVMSetAlignment(st, 16);
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
}

static LLVMValueRef sum4(fgb_emitter *e, LLVMValueRef v4) {
  LLVMValueRef s = lane(e, v4, 0);
  for (int j = 1; j < 4; j++)
    s = LLVMBuildAdd(e->b, s, lane(e, v4, j), "");
  return s;
}

/* The exclusive prefix of each thread's total over the CTA (Hillis-Steele
 * in shared memory; integers, so any order gives the same sums). */
static LLVMValueRef block_exclusive_scan(fgb_emitter *e, LLVMValueRef total) {
  int T = e->k->block;
  char name[256];
  snprintf(name, sizeof name, "%s_scan", LLVMGetValueName(e->fn));
  LLVMValueRef sh = fgb_shared_array(e->m, name, 4 * (uint64_t)T);
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef mine = fgb_gep(e->m, sh, i32t(e), tid);
  LLVMBuildStore(e->b, total, mine);
  fgb_barrier(e->m);
  for (int d = 1; d < T; d *= 2) {
    LLVMValueRef dv = LLVMConstInt(i32t(e), (unsigned)d, 0);
    LLVMValueRef has = LLVMBuildICmp(e->b, LLVMIntUGE, tid, dv, "");
    LLVMValueRef from = LLVMBuildSelect(e->b, has, LLVMBuildSub(e->b, tid, dv, ""), tid, "");
    LLVMValueRef x = LLVMBuildLoad2(e->b, i32t(e), fgb_gep(e->m, sh, i32t(e), from), "");
    x = LLVMBuildSelect(e->b, has, x, LLVMConstInt(i32t(e), 0, 0), "");
    fgb_barrier(e->m);
    LLVMValueRef cur = LLVMBuildLoad2(e->b, i32t(e), mine, "");
    LLVMBuildStore(e->b, LLVMBuildAdd(e->b, cur, x, ""), mine);
    fgb_barrier(e->m);
  }
  LLVMValueRef incl = LLVMBuildLoad2(e->b, i32t(e), mine, "");
  return LLVMBuildSub(e->b, incl, total, "");
}

/* The scans' combining op: add, or (embbwd) max of non-negative values;
 * 0 is the identity of both. */
static LLVMValueRef combine(fgb_emitter *e, bool max, LLVMValueRef a, LLVMValueRef b) {
  if (!max)
    return LLVMBuildAdd(e->b, a, b, "");
  return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, a, b, ""), a, b, "");
}

/* A warp's inclusive prefix of an i32 a lane, by butterflies (integers:
 * any order gives the same result); *total gets the warp's total. */
static LLVMValueRef warp_inclusive_scan(fgb_emitter *e, LLVMValueRef v, LLVMValueRef lane,
                                        LLVMValueRef *total, bool max) {
  LLVMValueRef incl = v, tot = v;
  for (int d = 1; d < 32; d *= 2) {
    LLVMValueRef other = fgb_shfl_bfly(e->m, tot, d);
    LLVMValueRef upper = LLVMBuildICmp(
        e->b, LLVMIntNE, LLVMBuildAnd(e->b, lane, LLVMConstInt(i32t(e), (unsigned)d, 0), ""),
        LLVMConstInt(i32t(e), 0, 0), "");
    incl =
        combine(e, max, incl, LLVMBuildSelect(e->b, upper, other, LLVMConstInt(i32t(e), 0, 0), ""));
    tot = combine(e, max, tot, other);
  }
  *total = tot;
  return incl;
}

/* The scan with coalesced accesses (scatter2): thread t of T takes the 4
 * bins at 4 (q T + t) for each q < S/4, so a warp's 16-byte loads and
 * stores are 512 contiguous bytes; with `zero`, each count is zeroed after
 * its offset is stored. Each q's 4T bins are a tile: the
 * tile's thread totals are scanned within each warp by butterflies, the
 * warps' totals (tile-major, then warp) by warp 0 into shared memory, and
 * a thread's offset is its warp's prefix there plus its lane's. */
static void emit_scan_striped(fgb_emitter *e, bool zero) {
  const fg_kernel *k = e->k;
  int Q = k->scat_seg / 4, T = k->block, NW = T / 32;
  LLVMTypeRef i32 = i32t(e);
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid, LLVMConstInt(i32, 31, 0), "");
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef t = fgb_thread_index(e, 0), tot[SCAN_UNROLL / 4], excl[SCAN_UNROLL / 4];
  for (int q = 0; q < Q; q++) { /* every load in flight, each summed as it comes */
    LLVMValueRef g = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)q * T), t, "");
    tot[q] = sum4(e, load4(e, LLVMBuildMul(e->b, g, fgb_const(e, 4), "")));
  }
  char name[256];
  snprintf(name, sizeof name, "%s_scanw", LLVMGetValueName(e->fn));
  LLVMValueRef sh = fgb_shared_array(e->m, name, 4 * (uint64_t)(Q * NW));
  /* each tile's warp totals stored as soon as scanned, and only the lane's
   * prefix within its warp kept (embbwd: fewer registers across the
   * barriers) */
  LLVMValueRef lane0 = LLVMBuildICmp(e->b, LLVMIntEQ, lane, LLVMConstInt(i32, 0, 0), "");
  for (int q = 0; q < Q; q++) {
    LLVMValueRef wt;
    excl[q] = LLVMBuildSub(e->b, warp_inclusive_scan(e, tot[q], lane, &wt, false), tot[q], "");
    LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMConstInt(i32, (unsigned)(q * NW), 0), warp, "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, lane0);
    LLVMBuildStore(e->b, wt, fgb_gep(e->m, sh, i32, slot));
    fgb_end_if(e, merge);
  }
  fgb_barrier(e->m);
  /* warp 0: the warps' totals, tile by tile, into exclusive prefixes */
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, warp, LLVMConstInt(i32, 0, 0), ""));
  LLVMValueRef has = LLVMBuildICmp(e->b, LLVMIntULT, lane, LLVMConstInt(i32, (unsigned)NW, 0), "");
  LLVMValueRef carry = LLVMConstInt(i32, 0, 0);
  for (int q = 0; q < Q; q++) {
    LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMConstInt(i32, (unsigned)(q * NW), 0), lane, "");
    LLVMValueRef p =
        fgb_gep(e->m, sh, i32, LLVMBuildSelect(e->b, has, slot, LLVMConstInt(i32, 0, 0), ""));
    LLVMValueRef x =
        LLVMBuildSelect(e->b, has, LLVMBuildLoad2(e->b, i32, p, ""), LLVMConstInt(i32, 0, 0), "");
    LLVMValueRef all, in = warp_inclusive_scan(e, x, lane, &all, false);
    LLVMValueRef excl = LLVMBuildAdd(e->b, carry, LLVMBuildSub(e->b, in, x, ""), "");
    LLVMBasicBlockRef m2 = fgb_begin_if(e, has);
    LLVMBuildStore(e->b, excl, p);
    fgb_end_if(e, m2);
    carry = LLVMBuildAdd(e->b, carry, all, "");
  }
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  for (int q = 0; q < Q; q++) {
    LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMConstInt(i32, (unsigned)(q * NW), 0), warp, "");
    LLVMValueRef run = LLVMBuildAdd(
        e->b, LLVMBuildLoad2(e->b, i32, fgb_gep(e->m, sh, i32, slot), ""), excl[q], "");
    /* the counts loaded again (embbwd: keeping the 4 S values across the
     * barriers spilled past S = 32 at 1024 threads), volatile so that they
     * are not taken for the first loads' values */
    LLVMValueRef g = LLVMBuildMul(e->b, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)q * T), t, ""),
                                  fgb_const(e, 4), "");
    LLVMValueRef again = load4(e, g);
    LLVMSetVolatile(again, 1);
    store4(e, g, again, &run);
    if (zero)
      zero4(e, g);
  }
}

/* The scan; with `zero` (the fused sort) each count is zeroed once read. */
static bool emit_scan(fgb_emitter *e, bool zero) {
  const fg_kernel *k = e->k;
  int S = k->scat_seg;
  if (S <= SCAN_UNROLL) {
    emit_scan_striped(e, zero);
  } else { /* a thread S consecutive bins, in a loop */
    LLVMValueRef first = LLVMBuildMul(e->b, fgb_thread_index(e, 0), fgb_const(e, S), "");
    LLVMValueRef zero = LLVMConstInt(i32t(e), 0, 0);
    LLVMValueRef acc = fgk_local_var(e, i32t(e), zero);
    LLVMValueRef end = LLVMBuildAdd(e->b, first, fgb_const(e, S), "");
    fgk_loop l;
    LLVMValueRef i = fgk_loop_begin(e, &l, first, end, fgb_const(e, 4));
    LLVMValueRef a = LLVMBuildLoad2(e->b, i32t(e), acc, "");
    LLVMBuildStore(e->b, LLVMBuildAdd(e->b, a, sum4(e, load4(e, i)), ""), acc);
    fgk_loop_end(e, &l, i);
    LLVMValueRef total = LLVMBuildLoad2(e->b, i32t(e), acc, "");
    LLVMBuildStore(e->b, block_exclusive_scan(e, total), acc);
    i = fgk_loop_begin(e, &l, first, end, fgb_const(e, 4));
    LLVMValueRef run = LLVMBuildLoad2(e->b, i32t(e), acc, "");
    store4(e, i, load4(e, i), &run);
    if (zero)
      zero4(e, i);
    LLVMBuildStore(e->b, run, acc);
    fgk_loop_end(e, &l, i);
  }
  /* off[pad]: the total, after the last thread's bins */
  LLVMBasicBlockRef merge = fgb_begin_if(
      e, LLVMBuildICmp(e->b, LLVMIntEQ, fgb_thread_index(e, 0), fgb_const(e, k->block - 1), ""));
  store_at(e, k->scat_off, fgb_const(e, k->scat_pad), fgb_const(e, k->scat_sources));
  fgb_end_if(e, merge);
  return !e->failed;
}

/* embbwd: the stable radix sort of a CTA's chunk of sources by bin, in
 * linear time (no comparison of a source with its segment's others).
 * Dynamic shared memory (segment.c radix_smem), C = T x R positions, each
 * array with a word of padding every 32 (padded below):
 *   key[C]      each chunk position's bin (-1, every digit 15, past the
 *               sources: they sort last)
 *   perm[C]     the positions in sorted order, after each pass
 *   dcnt[16 T]  digit-major: thread t's count of digit d at d T + t, then
 *               the exclusive prefix of that order (C <= 16 T: RANK
 *               reuses it for its segment bases)
 * and a static array of 33 i32 for the CTA scans. */
typedef struct {
  LLVMValueRef key, perm, dcnt, sh;
} radix_mem;

static LLVMValueRef c32(fgb_emitter *e, int64_t v) {
  return LLVMConstInt(i32t(e), (unsigned long long)v, 1);
}

static LLVMValueRef sh_ld(fgb_emitter *e, LLVMValueRef base, LLVMValueRef i) {
  return LLVMBuildLoad2(e->b, i32t(e), fgb_gep(e->m, base, i32t(e), i), "");
}

static void sh_st(fgb_emitter *e, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) {
  LLVMBuildStore(e->b, v, fgb_gep(e->m, base, i32t(e), i));
}

/* The radix arrays' element i at i + i/32: a word of padding every 32, so
 * that a warp's strided accesses (thread t's items at tR + r, its 16 digit
 * counts at 16t + d) fall in distinct banks (segment.c radix_smem). */
static LLVMValueRef padded(fgb_emitter *e, LLVMValueRef i) {
  return LLVMBuildAdd(e->b, i, LLVMBuildLShr(e->b, i, c32(e, 5), ""), "");
}

static LLVMValueRef rx_ld(fgb_emitter *e, LLVMValueRef base, LLVMValueRef i) {
  return sh_ld(e, base, padded(e, i));
}

static void rx_st(fgb_emitter *e, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v) {
  sh_st(e, base, padded(e, i), v);
}

static LLVMValueRef as32(fgb_emitter *e, LLVMValueRef v) {
  return LLVMTypeOf(v) == i32t(e) ? v : LLVMBuildTrunc(e->b, v, i32t(e), "");
}

static LLVMValueRef as_ity(fgb_emitter *e, LLVMValueRef v) {
  return e->ity == i32t(e) ? v : LLVMBuildSExt(e->b, v, e->ity, "");
}

static radix_mem radix_mem_of(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  char name[256];
  int64_t C = (int64_t)k->block * k->scat_rounds, Cp = C + C / 32;
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  snprintf(name, sizeof name, "%s_radix", LLVMGetValueName(e->fn));
  LLVMValueRef base = fgb_dynamic_shared(e->m, name);
  radix_mem r = {base, fgb_gep(e->m, base, i8, c32(e, 4 * Cp)),
                 fgb_gep(e->m, base, i8, c32(e, 8 * Cp)), NULL};
  snprintf(name, sizeof name, "%s_cta", LLVMGetValueName(e->fn));
  r.sh = fgb_shared_array(e->m, name, 4 * 33);
  return r;
}

/* The inclusive prefix (add, or max of non-negative values) of one i32 a
 * thread over the CTA in thread order: each warp's by butterflies, the
 * warps' totals scanned by warp 0 in sh. Every thread calls it; barriers
 * inside, the last after sh is read. */
static LLVMValueRef cta_inclusive_scan(fgb_emitter *e, LLVMValueRef v, LLVMValueRef sh, bool max) {
  int NW = e->k->block / 32;
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid, c32(e, 31), "");
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, c32(e, 5), "");
  LLVMValueRef wt, incl = warp_inclusive_scan(e, v, lane, &wt, max);
  LLVMBasicBlockRef m = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, c32(e, 0), ""));
  sh_st(e, sh, warp, wt);
  fgb_end_if(e, m);
  fgb_barrier(e->m);
  m = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, warp, c32(e, 0), ""));
  LLVMValueRef has = LLVMBuildICmp(e->b, LLVMIntULT, lane, c32(e, NW), "");
  LLVMValueRef x = sh_ld(e, sh, LLVMBuildSelect(e->b, has, lane, c32(e, 0), ""));
  x = LLVMBuildSelect(e->b, has, x, c32(e, 0), "");
  LLVMValueRef all, in = warp_inclusive_scan(e, x, lane, &all, max);
  LLVMBasicBlockRef m2 = fgb_begin_if(e, has);
  sh_st(e, sh, lane, in); /* the warps' inclusive prefixes */
  fgb_end_if(e, m2);
  fgb_end_if(e, m);
  fgb_barrier(e->m);
  LLVMValueRef first = LLVMBuildICmp(e->b, LLVMIntEQ, warp, c32(e, 0), "");
  LLVMValueRef before = sh_ld(
      e, sh, LLVMBuildSelect(e->b, first, c32(e, 0), LLVMBuildSub(e->b, warp, c32(e, 1), ""), ""));
  before = LLVMBuildSelect(e->b, first, c32(e, 0), before, "");
  fgb_barrier(e->m);
  return combine(e, max, before, incl);
}

enum { RADIX_DIGITS = 16, RADIX_MAX_ROUNDS = 16 };

/* Sorts the chunk's C positions by key, stably: LSD, scat_passes passes
 * of 4 bits. Thread t holds the positions perm[tR .. tR+R) (blocked, so
 * thread then item is the current order) and counts their digits in its
 * column of dcnt, each position's running count its rank among the
 * thread's equal digits; the CTA scans dcnt digit-major (thread t the 16
 * entries at 16t), and each position moves to its digit's and thread's
 * prefix plus its running count: a digit's positions in thread, then item
 * order, so every pass is stable and so the sort (the keys' bins, then
 * their position). Integer counts, so the result is the same every run.
 * The caller has stored the keys and passed a barrier; perm is sorted
 * after the final barrier. */
static void radix_sort(fgb_emitter *e, const radix_mem *rm) {
  const fg_kernel *k = e->k;
  int T = k->block, R = k->scat_rounds;
  LLVMValueRef t = fgb_tid(e->m, 0);
  LLVMValueRef tR = LLVMBuildMul(e->b, t, c32(e, R), "");
  /* a position, and its digit count's slot (< 16 T <= 2^14) with its
   * running count (< 16) above bit 16: few registers at 1024 threads */
  LLVMValueRef pos[RADIX_MAX_ROUNDS], sl[RADIX_MAX_ROUNDS];
  for (int p = 0; p < k->scat_passes; p++) {
    for (int d = 0; d < RADIX_DIGITS; d++)
      rx_st(e, rm->dcnt, LLVMBuildAdd(e->b, c32(e, (int64_t)d * T), t, ""), c32(e, 0));
    fgb_barrier(e->m);
    for (int r = 0; r < R; r++) {
      LLVMValueRef j = LLVMBuildAdd(e->b, tR, c32(e, r), "");
      pos[r] = p == 0 ? j : rx_ld(e, rm->perm, j);
      LLVMValueRef dig = LLVMBuildAnd(
          e->b, LLVMBuildLShr(e->b, rx_ld(e, rm->key, pos[r]), c32(e, 4 * p), ""), c32(e, 15), "");
      LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, dig, c32(e, T), ""), t, "");
      LLVMValueRef loc = rx_ld(e, rm->dcnt, slot);
      rx_st(e, rm->dcnt, slot, LLVMBuildAdd(e->b, loc, c32(e, 1), ""));
      sl[r] = LLVMBuildOr(e->b, slot, LLVMBuildShl(e->b, loc, c32(e, 16), ""), "");
    }
    fgb_barrier(e->m);
    LLVMValueRef first = LLVMBuildMul(e->b, t, c32(e, RADIX_DIGITS), "");
    LLVMValueRef sum = c32(e, 0);
    for (int i = 0; i < RADIX_DIGITS; i++)
      sum =
          LLVMBuildAdd(e->b, sum, rx_ld(e, rm->dcnt, LLVMBuildAdd(e->b, first, c32(e, i), "")), "");
    LLVMValueRef run = LLVMBuildSub(e->b, cta_inclusive_scan(e, sum, rm->sh, false), sum, "");
    for (int i = 0; i < RADIX_DIGITS; i++) { /* the counts read again: no barrier wrote them */
      LLVMValueRef at_i = LLVMBuildAdd(e->b, first, c32(e, i), "");
      LLVMValueRef c = rx_ld(e, rm->dcnt, at_i);
      rx_st(e, rm->dcnt, at_i, run);
      run = LLVMBuildAdd(e->b, run, c, "");
    }
    fgb_barrier(e->m);
    for (int r = 0; r < R; r++) {
      LLVMValueRef slot = LLVMBuildAnd(e->b, sl[r], c32(e, 0xffff), "");
      LLVMValueRef loc = LLVMBuildLShr(e->b, sl[r], c32(e, 16), "");
      rx_st(e, rm->perm, LLVMBuildAdd(e->b, rx_ld(e, rm->dcnt, slot), loc, ""), pos[r]);
    }
    fgb_barrier(e->m);
  }
}

/* The keys of a chunk of n sources from `first` on: position l = t + rT
 * (coalesced index loads, all in flight) holds bin(first + l), or -1 past
 * n; COUNT's atomics too where `count` (the fused sort). */
static bool store_keys(fgb_emitter *e, const radix_mem *rm, LLVMValueRef first, LLVMValueRef n,
                       bool count) {
  const fg_kernel *k = e->k;
  LLVMValueRef t = fgb_tid(e->m, 0);
  LLVMValueRef last = fgb_const(e, k->scat_sources - 1);
  for (int r = 0; r < k->scat_rounds; r++) {
    LLVMValueRef l = LLVMBuildAdd(e->b, t, c32(e, (int64_t)r * k->block), "");
    LLVMValueRef ok = LLVMBuildICmp(e->b, LLVMIntSLT, l, n, "");
    LLVMValueRef s = as_ity(e, LLVMBuildAdd(e->b, first, l, ""));
    /* past the end: the last source's bin, computed and not used */
    LLVMValueRef b = bin_of(e, LLVMBuildSelect(e->b, ok, s, last, ""));
    if (!b)
      return false;
    rx_st(e, rm->key, l, LLVMBuildSelect(e->b, ok, as32(e, b), c32(e, -1), ""));
    if (count) {
      LLVMBasicBlockRef m = fgb_begin_if(e, ok);
      count_one(e, b);
      fgb_end_if(e, m);
    }
  }
  fgb_barrier(e->m);
  return !e->failed;
}

/* SORT: COUNT, SCAN and the ranks by one CTA of every source (one chunk):
 * the keys and counts, a barrier (the CTA's atomics then visible to it),
 * the scan (the counts back to zero as read), the radix sort; the sorted
 * position j of each source is its place in the order, since its
 * segment's offset is the count of smaller bins, all in this chunk. */
static bool emit_sort(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->scat_rounds > RADIX_MAX_ROUNDS) {
    fgb_fail(e, "scatter sort kernel %d takes %d sources a thread (at most %d)", k->id,
             k->scat_rounds, RADIX_MAX_ROUNDS);
    return false;
  }
  radix_mem rm = radix_mem_of(e);
  if (!store_keys(e, &rm, c32(e, 0), c32(e, k->scat_sources), true))
    return false;
  if (!emit_scan(e, true))
    return false;
  radix_sort(e, &rm);
  LLVMValueRef t = fgb_tid(e->m, 0);
  for (int r = 0; r < k->scat_rounds; r++) {
    LLVMValueRef j = LLVMBuildAdd(e->b, t, c32(e, (int64_t)r * k->block), "");
    LLVMBasicBlockRef m =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, j, c32(e, k->scat_sources), ""));
    store_at(e, k->scat_order, j, as_ity(e, rx_ld(e, rm.perm, j)));
    fgb_end_if(e, m);
  }
  return !e->failed;
}

/* RANK: a CTA a chunk of C sources, taken in ticket order (chain[0]: the
 * CTAs that started before it hold the earlier chunks, so its wait below
 * always ends). The chunk radix-sorted, each sorted position j's group
 * (its bin's positions in the chunk) starts at g0, the inclusive max over
 * j' <= j of the group heads' positions. In the chunk's turn (chain[1]),
 * each head reads its bin's count, still holding the sources of this
 * chunk and later ones: the bin's earlier sources are the count of the
 * segment (off[b+1] - off[b]) less it, so the group's sources go to
 * off[b+1] - count + (j - g0), ascending. Every source then takes one off
 * its count (the counts are zero after the last chunk, for the next run),
 * and the turn passes on; the last chunk resets the ticket and turn. */
static bool emit_rank(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int T = k->block, R = k->scat_rounds;
  if (R > RADIX_MAX_ROUNDS) {
    fgb_fail(e, "scatter rank kernel %d takes %d sources a thread (at most %d)", k->id, R,
             RADIX_MAX_ROUNDS);
    return false;
  }
  int64_t C = (int64_t)T * R, chunks = (k->scat_sources + C - 1) / C;
  radix_mem rm = radix_mem_of(e);
  LLVMValueRef t = fgb_tid(e->m, 0);
  LLVMValueRef is0 = LLVMBuildICmp(e->b, LLVMIntEQ, t, c32(e, 0), "");
  LLVMValueRef ticket = at(e, k->scat_chain, fgb_const(e, 0)),
               turn = at(e, k->scat_chain, fgb_const(e, 1));
  LLVMBasicBlockRef m = fgb_begin_if(e, is0);
  sh_st(e, rm.sh, c32(e, 32), fgb_atomic_add_i32_global(e->m, ticket, c32(e, 1)));
  fgb_end_if(e, m);
  fgb_barrier(e->m);
  LLVMValueRef c = sh_ld(e, rm.sh, c32(e, 32));
  LLVMValueRef first = LLVMBuildMul(e->b, c, c32(e, C), "");
  LLVMValueRef n = fgk_imin(e, c32(e, C), LLVMBuildSub(e->b, c32(e, k->scat_sources), first, ""));
  if (!store_keys(e, &rm, first, n, false))
    return false;
  radix_sort(e, &rm);
  /* thread t's sorted positions tR + r: heads, group starts (the bins and
   * sources are read again from shared memory where needed, which nothing
   * writes after the sort: few registers at 1024 threads) */
  LLVMValueRef tR = LLVMBuildMul(e->b, t, c32(e, R), "");
  LLVMValueRef g0[RADIX_MAX_ROUNDS], head[RADIX_MAX_ROUNDS];
  LLVMValueRef run = c32(e, 0);
  for (int r = 0; r < R; r++) {
    LLVMValueRef j = LLVMBuildAdd(e->b, tR, c32(e, r), "");
    LLVMValueRef ok = LLVMBuildICmp(e->b, LLVMIntSLT, j, n, "");
    LLVMValueRef at0 = LLVMBuildICmp(e->b, LLVMIntEQ, j, c32(e, 0), "");
    LLVMValueRef prev =
        LLVMBuildSelect(e->b, at0, c32(e, 0), LLVMBuildSub(e->b, j, c32(e, 1), ""), "");
    prev = rx_ld(e, rm.key, rx_ld(e, rm.perm, prev));
    LLVMValueRef bin = rx_ld(e, rm.key, rx_ld(e, rm.perm, j));
    head[r] = LLVMBuildAnd(
        e->b, ok, LLVMBuildOr(e->b, at0, LLVMBuildICmp(e->b, LLVMIntNE, prev, bin, ""), ""), "");
    run = combine(e, true, run, LLVMBuildSelect(e->b, head[r], j, c32(e, 0), ""));
    g0[r] = run;
  }
  /* the heads before thread t's: the inclusive max of the thread before */
  LLVMValueRef incl = cta_inclusive_scan(e, run, rm.sh, true);
  rx_st(e, rm.dcnt, t, incl);
  fgb_barrier(e->m);
  LLVMValueRef before = rx_ld(
      e, rm.dcnt, LLVMBuildSelect(e->b, is0, c32(e, 0), LLVMBuildSub(e->b, t, c32(e, 1), ""), ""));
  before = LLVMBuildSelect(e->b, is0, c32(e, 0), before, "");
  fgb_barrier(e->m);
  /* the chunk's turn: thread 0 waits for it (acquire), the barrier passes it on */
  m = fgb_begin_if(e, is0);
  LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "spin");
  LLVMBasicBlockRef nap = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "nap");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "go");
  LLVMBuildBr(e->b, spin);
  LLVMPositionBuilderAtEnd(e->b, spin);
  LLVMValueRef seen = fgb_atomic_add_i32_global(e->m, turn, c32(e, 0));
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntNE, seen, c, ""), nap, go);
  LLVMPositionBuilderAtEnd(e->b, nap);
  fgb_nanosleep(e->m, 64);
  LLVMBuildBr(e->b, spin);
  LLVMPositionBuilderAtEnd(e->b, go);
  fgb_fence_gpu(e->m);
  fgb_end_if(e, m);
  fgb_barrier(e->m);
  /* each head: its group's base (dcnt at the head's position) */
  for (int r = 0; r < R; r++) {
    LLVMBasicBlockRef mh = fgb_begin_if(e, head[r]);
    LLVMValueRef j = LLVMBuildAdd(e->b, tR, c32(e, r), "");
    LLVMValueRef b = rx_ld(e, rm.key, rx_ld(e, rm.perm, j));
    LLVMValueRef left = fgb_atomic_add_i32_global(e->m, at(e, k->scat_cnt, b), c32(e, 0));
    LLVMValueRef end = as32(e, load_at(e, k->scat_off, LLVMBuildAdd(e->b, b, c32(e, 1), "")));
    rx_st(e, rm.dcnt, j, LLVMBuildSub(e->b, LLVMBuildSub(e->b, end, left, ""), j, ""));
    fgb_end_if(e, mh);
  }
  fgb_barrier(e->m);
  for (int r = 0; r < R; r++) {
    LLVMValueRef j = LLVMBuildAdd(e->b, tR, c32(e, r), "");
    LLVMBasicBlockRef mo = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, j, n, ""));
    LLVMValueRef src = rx_ld(e, rm.perm, j);
    fgb_atomic_add_i32_global(e->m, at(e, k->scat_cnt, rx_ld(e, rm.key, src)), c32(e, -1));
    LLVMValueRef g = combine(e, true, g0[r], before);
    LLVMValueRef pos = LLVMBuildAdd(e->b, rx_ld(e, rm.dcnt, g), j, "");
    store_at(e, k->scat_order, pos, as_ity(e, LLVMBuildAdd(e->b, first, src, "")));
    fgb_end_if(e, mo);
  }
  /* the chunk's atomics done before its turn passes on (release) */
  fgb_fence_gpu(e->m);
  fgb_barrier(e->m);
  m = fgb_begin_if(e, is0);
  LLVMValueRef lastc = LLVMBuildICmp(e->b, LLVMIntEQ, c, c32(e, chunks - 1), "");
  LLVMBasicBlockRef ml = fgb_begin_if(e, lastc);
  LLVMSetVolatile(LLVMBuildStore(e->b, c32(e, 0), ticket), 1);
  fgb_end_if(e, ml);
  LLVMValueRef next =
      LLVMBuildSelect(e->b, lastc, c32(e, 0), LLVMBuildAdd(e->b, c, c32(e, 1), ""), "");
  LLVMValueRef st = LLVMBuildStore(e->b, next, turn);
  LLVMSetVolatile(st, 1);
  fgb_end_if(e, m);
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

static bool emit_sum(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->scat->op->code == FG_OP_SCATTER_ADD)
    return emit_sum_elements(e);
  const fg_node *n = k->scat;
  const fg_value *x = n->in[0], *src = n->in[2], *out = n->out[0];
  fg_dtype dt = out->type.dtype, acc = fg_reduce_acc_dtype(dt);
  int rank = k->rank, last = rank - 1, V = e->vec;
  fg_index_map m;
  fg_index_map_of(n, &m);
  int64_t total = 1;
  for (int d = 0; d < rank; d++)
    total *= k->dims[d];
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  LLVMValueRef base = V > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, V), "") : gid;
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, base, fgb_const(e, total), ""));
  LLVMValueRef c[FG_MAX_RANK], idx[FG_MAX_RANK];
  fgb_delinearize(e, base, k->dims, rank, c);
  for (int j = 0; j < V; j++)
    e->lanes[j] = j == 0 ? c[last] : LLVMBuildAdd(e->b, c[last], fgb_const(e, j), "");
  e->nuniform = 0;
  for (int d = 0; d < last; d++)
    e->uniform[e->nuniform++] = c[d];
  LLVMTypeRef at_ty = fgb_reg_type(e->m, acc);
  LLVMValueRef accs[16];
  memcpy(idx, c, sizeof(LLVMValueRef) * (size_t)rank);
  for (int j = 0; j < V; j++) {
    idx[last] = e->lanes[j];
    LLVMValueRef v = fgb_emit_value(e, x, idx);
    if (!v)
      return false;
    accs[j] = fgk_local_var(e, at_ty, fgb_convert(e->m, v, x->type.dtype, acc));
  }
  LLVMValueRef slice = c[m.dim];
  LLVMValueRef lo = load_at(e, k->scat_off, slice),
               hi = load_at(e, k->scat_off, LLVMBuildAdd(e->b, slice, fgb_const(e, 1), ""));
  fgk_loop l;
  LLVMValueRef jj = fgk_loop_begin(e, &l, lo, hi, fgb_const(e, 1));
  int mark = fgb_memo_mark(e);
  LLVMValueRef s = load_at(e, k->scat_order, jj);
  int nuni = e->nuniform;
  if (m.dim != last)
    e->uniform[e->nuniform++] = s;
  memcpy(idx, c, sizeof(LLVMValueRef) * (size_t)rank);
  idx[m.dim] = s;
  for (int j = 0; j < V; j++) {
    if (m.dim != last)
      idx[last] = e->lanes[j];
    LLVMValueRef v = fgb_emit_value(e, src, idx);
    if (!v)
      return false;
    LLVMValueRef a = LLVMBuildLoad2(e->b, at_ty, accs[j], "");
    LLVMBuildStore(e->b, acc_add(e, acc, a, fgb_convert(e->m, v, src->type.dtype, acc)), accs[j]);
  }
  e->nuniform = nuni;
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, jj);
  LLVMValueRef vals[16];
  for (int j = 0; j < V; j++)
    vals[j] = fgb_convert(e->m, LLVMBuildLoad2(e->b, at_ty, accs[j], ""), acc, dt);
  memcpy(idx, c, sizeof(LLVMValueRef) * (size_t)rank);
  fgb_emit_store_lanes(e, out, idx, vals);
  fgb_end_if(e, merge);
  return !e->failed;
}

bool fgb_emit_scatter_kernel(fgb_emitter *e) {
  switch (e->k->kind) {
  case FG_KERNEL_SCATTER_COUNT:
    return emit_count(e);
  case FG_KERNEL_SCATTER_SCAN:
    return emit_scan(e, false);
  case FG_KERNEL_SCATTER_RANK:
    return emit_rank(e);
  case FG_KERNEL_SCATTER_SUM:
    return emit_sum(e);
  case FG_KERNEL_SCATTER_SORT:
    return emit_sort(e);
  default:
    fgb_fail(e, "kernel %d is not a scatter kernel", e->k->id);
    return false;
  }
}
