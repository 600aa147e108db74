/* issue 20 (scan): cumsum's kernels (plan.h FG_KERNEL_SCAN,
 * FG_KERNEL_SCAN_CHUNKS; scheduled by schedule.c schedule_scan).
 *
 * Each element's term is the cumsum's input, computed inline at its index
 * (the fused producers), converted as the interpreter adds it: to the
 * result's dtype, then to the accumulator's (f32, f64; integers straight to
 * i64, wrapping). The running sum at an element is seeded into the memo at
 * that element's index, so the kernel's full-size outputs that use it
 * (segment.c scan_can_join: only there) and the cumsum itself are computed
 * and stored there, as a row kernel's normalization uses its totals.
 *
 * Column scans (inner > 1): a thread owns vec adjacent columns of the kept
 * extent and walks the scanned extent (its chunk) with one running sum a
 * column, rows_per_iter rows' loads issued before the first is added. With
 * chunks, SCAN_CHUNKS writes each chunk's column sums into the temp, and
 * SCAN starts each column of chunk s from the sums of chunks 0..s-1, added
 * in order.
 *
 * Row scans (inner == 1): scan_lanes threads a row (a warp, or the CTA)
 * walk it in chunks of their vectors: each thread's vec elements in order,
 * then an inclusive scan of the thread totals by shfl.up in each warp, the
 * warps' totals through shared memory (each thread adds those of the warps
 * before its own, in order), and a carry from chunk to chunk.
 *
 * No atomics and a fixed order of every add: the same bits on every run.
 * The sums associate differently from the interpreter's left-to-right
 * running sum (exact for integers; within the GPU check's tolerance for
 * floats). */
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

typedef struct scan_ctx {
  const fg_node *n;
  fg_dtype in, out, acc;
  LLVMTypeRef acc_ty;
} scan_ctx;

static LLVMValueRef acc_zero(const scan_ctx *s) {
  return s->acc == FG_I64 ? LLVMConstInt(s->acc_ty, 0, 0) : LLVMConstReal(s->acc_ty, 0.0);
}

/* The term of the element at idx, as the interpreter adds it. */
static LLVMValueRef scan_term(fgb_emitter *e, const scan_ctx *s, const LLVMValueRef *idx) {
  LLVMValueRef x = fgb_emit_value(e, s->n->in[0], idx);
  if (!x)
    return NULL;
  if (s->acc == FG_I64)
    return fgb_convert(e->m, x, s->in, FG_I64);
  return fgb_convert(e->m, fgb_convert(e->m, x, s->in, s->out), s->out, s->acc);
}

static LLVMValueRef scan_add(fgb_emitter *e, const scan_ctx *s, LLVMValueRef a, LLVMValueRef b) {
  return fgb_reduce_combine(e->m, FG_OP_SUM, a, b, s->acc);
}

/* The running sum `sum` is the cumsum's value at idx; then the kernel's
 * full-size outputs are stored at the chunk whose lane 0 is at idx0. */
static void seed(fgb_emitter *e, const scan_ctx *s, const LLVMValueRef *idx, LLVMValueRef sum) {
  fgb_memo_put(e, s->n->out[0], idx, fgb_convert(e->m, sum, s->acc, s->out));
}

static void store_outputs(fgb_emitter *e, const LLVMValueRef *idx0, LLVMValueRef valid) {
  for (int i = 0; i < e->k->nouts && !e->failed; i++)
    if (fgb_is_full(e, e->k->outs[i]))
      fgk_store_full(e, e->k->outs[i], idx0, valid);
}

/* The domain index of kept coordinates kc (kept-dim order) and scanned
 * coordinate r. */
static void domain_index(const fgb_emitter *e, const LLVMValueRef *kc, LLVMValueRef r,
                         LLVMValueRef *idx) {
  const fg_kernel *k = e->k;
  for (int d = 0, a = 0; d < k->rank; d++)
    idx[d] = k->mask[d] ? (k->dims[d] == 1 ? LLVMConstInt(e->ity, 0, 0) : r) : kc[a++];
}

/* ---- column scans ---- */

typedef struct col_scan {
  int nkept;
  int64_t kept_sizes[FG_MAX_RANK], kept;
  LLVMValueRef base, basec, valid, chunk, rstart, rend;
  LLVMValueRef kc[FG_MAX_RANK], lanes[16];
  LLVMValueRef acc[16]; /* a running sum a lane (locals) */
} col_scan;

static void col_enter(fgb_emitter *e, const col_scan *c, LLVMValueRef r) {
  memcpy(e->lanes, c->lanes, sizeof e->lanes);
  e->nuniform = 0;
  for (int i = 0; i < c->nkept - (e->vec > 1 ? 1 : 0); i++)
    e->uniform[e->nuniform++] = c->kc[i];
  e->uniform[e->nuniform++] = r;
}

/* Rows r .. r+U-1 of the thread's columns: every load of every row issued
 * first (U > 1), then each row added to the running sums in order, its
 * sums seeded and its outputs stored (SCAN). */
static bool col_rows(fgb_emitter *e, const scan_ctx *s, col_scan *c, LLVMValueRef r, int U) {
  const fg_kernel *k = e->k;
  int V = e->vec, mark = fgb_memo_mark(e);
  bool scan = k->kind == FG_KERNEL_SCAN;
  LLVMValueRef ru[32], idx0[32][FG_MAX_RANK], idx[FG_MAX_RANK];
  for (int u = 0; u < U; u++) {
    ru[u] = u ? LLVMBuildAdd(e->b, r, fgb_const(e, u), "") : r;
    domain_index(e, c->kc, ru[u], idx0[u]);
    if (U == 1)
      continue;
    col_enter(e, c, ru[u]);
    for (int j = 0; j < V; j++) {
      fgk_lane_index(e, idx0[u], j, idx);
      fgb_prefetch_value(e, s->n->in[0], idx);
      for (int i = 0; i < k->nouts; i++)
        if (fgb_is_full(e, k->outs[i]) && k->outs[i] != s->n->out[0])
          fgb_prefetch_value(e, k->outs[i], idx);
    }
  }
  for (int u = 0; u < U && !e->failed; u++) {
    col_enter(e, c, ru[u]);
    for (int j = 0; j < V; j++) {
      fgk_lane_index(e, idx0[u], j, idx);
      LLVMValueRef x = scan_term(e, s, idx);
      if (!x)
        return false;
      LLVMValueRef sum = scan_add(e, s, LLVMBuildLoad2(e->b, s->acc_ty, c->acc[j], ""), x);
      LLVMBuildStore(e->b, sum, c->acc[j]);
      if (scan)
        seed(e, s, idx, sum);
    }
    store_outputs(e, idx0[u], c->valid); /* SCAN_CHUNKS: a host's (none use the sums) */
  }
  fgb_memo_release(e, mark);
  return !e->failed;
}

/* Lane j's slot of chunk `chunk` in the chunk sums: [chunk][kept]. */
static LLVMValueRef chunk_sum_ptr(fgb_emitter *e, const scan_ctx *s, const col_scan *c,
                                  LLVMValueRef chunk, int j) {
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->scan_temp});
  LLVMValueRef elem = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, chunk, fgb_const(e, c->kept), ""),
                                   LLVMBuildAdd(e->b, c->basec, fgb_const(e, j), ""), "");
  return fgb_gep_global(e->m, base, s->acc_ty, elem);
}

/* SCAN after SCAN_CHUNKS: each running sum starts from the sums of the
 * chunks before this one, added in chunk order; all chunks' sums are
 * loaded (8 chunks at a time, every load in flight), those at or past this
 * chunk count as 0 (x + 0 is x). */
enum { CARRY_BATCH = 8 };

static void col_carry(fgb_emitter *e, const scan_ctx *s, col_scan *c) {
  int C = e->k->scan_chunks;
  for (int c0 = 0; c0 < C - 1; c0 += CARRY_BATCH) {
    int n = C - 1 - c0 < CARRY_BATCH ? C - 1 - c0 : CARRY_BATCH;
    LLVMValueRef got[CARRY_BATCH][16];
    for (int q = 0; q < n; q++)
      for (int j = 0; j < e->vec; j++)
        got[q][j] =
            LLVMBuildLoad2(e->b, s->acc_ty, chunk_sum_ptr(e, s, c, fgb_const(e, c0 + q), j), "");
    for (int j = 0; j < e->vec; j++) {
      LLVMValueRef a = LLVMBuildLoad2(e->b, s->acc_ty, c->acc[j], "");
      for (int q = 0; q < n; q++) {
        LLVMValueRef before = LLVMBuildICmp(e->b, LLVMIntSLT, fgb_const(e, c0 + q), c->chunk, "");
        a = scan_add(e, s, a, LLVMBuildSelect(e->b, before, got[q][j], acc_zero(s), ""));
      }
      LLVMBuildStore(e->b, a, c->acc[j]);
    }
  }
}

static bool column_scan(fgb_emitter *e, const scan_ctx *s) {
  const fg_kernel *k = e->k;
  int V = e->vec;
  col_scan c;
  memset(&c, 0, sizeof c);
  c.kept = 1;
  for (int d = 0; d < k->rank; d++)
    if (!k->mask[d]) {
      c.kept_sizes[c.nkept++] = k->dims[d];
      c.kept *= k->dims[d];
    }
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  c.base = V > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, V), "") : gid;
  /* over the symbolic size (opt/symbolic.h) the kept extent or the
   * scanned one may be T x the rest, a run-time value */
  c.valid = LLVMBuildICmp(e->b, LLVMIntSLT, c.base, fgb_extent(e, c.kept), "");
  c.basec = LLVMBuildSelect(e->b, c.valid, c.base, fgb_const(e, 0), "");
  fgb_delinearize(e, c.basec, c.kept_sizes, c.nkept, c.kc);
  for (int j = 0; j < V; j++)
    c.lanes[j] = V == 1   ? NULL
                 : j == 0 ? c.kc[c.nkept - 1]
                          : LLVMBuildAdd(e->b, c.kc[c.nkept - 1], fgb_const(e, j), "");
  int64_t C = k->scan_chunks > 1 ? k->scan_chunks : 1, rs = (k->red + C - 1) / C;
  c.chunk = C > 1 ? fgb_block_index(e, 1) : fgb_const(e, 0);
  c.rstart = C > 1 ? LLVMBuildMul(e->b, c.chunk, fgb_const(e, rs), "") : fgb_const(e, 0);
  c.rend =
      C > 1 ? fgk_imin(e, LLVMBuildAdd(e->b, c.rstart, fgb_const(e, rs), ""), fgb_const(e, k->red))
            : fgb_extent(e, k->red);
  for (int j = 0; j < V; j++)
    c.acc[j] = fgk_local_var(e, s->acc_ty, acc_zero(s));
  if (k->kind == FG_KERNEL_SCAN && C > 1)
    col_carry(e, s, &c);
  /* rows in groups of U (the plain variant, for misaligned pointers, one
   * at a time), then the rest */
  int U = k->rows_per_iter > 1 && e->aligned ? k->rows_per_iter : 1;
  LLVMValueRef rmain = c.rstart;
  if (U > 1) {
    LLVMValueRef cnt = LLVMBuildSub(e->b, c.rend, c.rstart, "");
    rmain = LLVMBuildSub(e->b, c.rend, LLVMBuildSRem(e->b, cnt, fgb_const(e, U), ""), "");
    fgk_loop l;
    LLVMValueRef r = fgk_loop_begin(e, &l, c.rstart, rmain, fgb_const(e, U));
    if (!col_rows(e, s, &c, r, U))
      return false;
    fgk_loop_end(e, &l, r);
  }
  fgk_loop l;
  LLVMValueRef r = fgk_loop_begin(e, &l, rmain, c.rend, fgb_const(e, 1));
  if (!col_rows(e, s, &c, r, 1))
    return false;
  fgk_loop_end(e, &l, r);
  if (k->kind == FG_KERNEL_SCAN_CHUNKS) {
    LLVMBasicBlockRef merge = fgb_begin_if(e, c.valid);
    for (int j = 0; j < V; j++)
      LLVMBuildStore(e->b, LLVMBuildLoad2(e->b, s->acc_ty, c.acc[j], ""),
                     chunk_sum_ptr(e, s, &c, c.chunk, j));
    fgb_end_if(e, merge);
  }
  return !e->failed;
}

/* ---- row scans ---- */

/* The inclusive scan of v over the warp's lanes (lane: %laneid), by
 * shfl.up: after the step of offset o, each lane holds the sum of the 2o
 * lanes up to it. */
static LLVMValueRef warp_scan(fgb_emitter *e, const scan_ctx *s, LLVMValueRef v,
                              LLVMValueRef lane) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  for (int off = 1; off < 32; off *= 2) {
    LLVMValueRef y = fgb_shfl_up(e->m, v, off);
    LLVMValueRef has =
        LLVMBuildICmp(e->b, LLVMIntUGE, lane, LLVMConstInt(i32, (unsigned)off, 0), "");
    v = LLVMBuildSelect(e->b, has, scan_add(e, s, y, v), v, "");
  }
  return v;
}

/* Chunk `chunk`'s sum of row `row` in the chunk sums: [chunk][rows]. */
static LLVMValueRef row_sum_ptr(fgb_emitter *e, const scan_ctx *s, LLVMValueRef chunk,
                                LLVMValueRef row) {
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->scan_temp});
  LLVMValueRef elem =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, chunk, fgb_const(e, e->k->outer), ""), row, "");
  return fgb_gep_global(e->m, base, s->acc_ty, elem);
}

static bool row_scan(fgb_emitter *e, const scan_ctx *s) {
  const fg_kernel *k = e->k;
  int V = e->vec, G = k->scan_lanes, W = G / 32;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  int64_t N = k->red, kept_sizes[FG_MAX_RANK];
  int nkept = 0;
  for (int d = 0; d < k->rank; d++)
    if (!k->mask[d])
      kept_sizes[nkept++] = k->dims[d];
  LLVMValueRef tid32 = fgb_tid(e->m, 0);
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid32, LLVMConstInt(i32, 31, 0), "");
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid32, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef tid = fgb_thread_index(e, 0);
  LLVMValueRef t = LLVMBuildURem(e->b, tid, fgb_const(e, G), ""); /* thread in the row */
  LLVMValueRef row =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block / G), ""),
                   LLVMBuildUDiv(e->b, tid, fgb_const(e, G), ""), "");
  LLVMValueRef rvalid = LLVMBuildICmp(e->b, LLVMIntSLT, row, fgb_extent(e, k->outer), "");
  LLVMValueRef rowc = LLVMBuildSelect(e->b, rvalid, row, fgb_const(e, 0), "");
  LLVMValueRef kc[FG_MAX_RANK];
  fgb_delinearize(e, rowc, kept_sizes, nkept, kc);
  /* lanes along the scanned dim where it is the last and vectorized */
  bool lane_dim = k->mask[k->rank - 1] && V > 1;
  bool scan = k->kind == FG_KERNEL_SCAN, split = k->scan_chunks > 1;
  LLVMValueRef carry = fgk_local_var(e, s->acc_ty, acc_zero(s));
  LLVMValueRef Nv = fgb_extent(e, N); /* T x the rest over the symbolic size */
  /* cut into chunks (issue 17, scanpar; G is the CTA): CTA (row, chunk)
   * walks [chunk x L, min((chunk + 1) x L, N)) */
  LLVMValueRef chunk = split ? fgb_block_index(e, 1) : NULL, rstart = fgb_const(e, 0), rend = Nv;
  if (split) {
    rstart = LLVMBuildMul(e->b, chunk, fgb_const(e, k->scan_chunk_len), "");
    rend = fgk_imin(e, LLVMBuildAdd(e->b, rstart, fgb_const(e, k->scan_chunk_len), ""), Nv);
  }
  if (split && scan) {
    /* the carry: thread q < chunk takes chunk q's sum, the CTA sums them
     * in a fixed tree (scan_chunks <= G, segment.c scan_row_chunks) */
    LLVMValueRef q = t, has = LLVMBuildICmp(e->b, LLVMIntULT, q, chunk, "");
    LLVMValueRef qc = LLVMBuildSelect(e->b, has, q, fgb_const(e, 0), "");
    LLVMValueRef x = LLVMBuildLoad2(e->b, s->acc_ty, row_sum_ptr(e, s, qc, rowc), "");
    x = LLVMBuildSelect(e->b, has, x, acc_zero(s), "");
    LLVMBuildStore(e->b, fgb_block_reduce(e, FG_OP_SUM, s->acc, x, 1), carry);
  }
  fgk_loop l;
  LLVMValueRef c0 = fgk_loop_begin(e, &l, rstart, rend, fgb_const(e, G * V));
  int mark = fgb_memo_mark(e);
  LLVMValueRef n0 = LLVMBuildAdd(e->b, c0, LLVMBuildMul(e->b, t, fgb_const(e, V), ""), "");
  LLVMValueRef nvalid = LLVMBuildICmp(e->b, LLVMIntSLT, n0, rend, "");
  /* N is a multiple of V (schedule.c): the last whole vector */
  LLVMValueRef n0c =
      LLVMBuildSelect(e->b, nvalid, n0, LLVMBuildSub(e->b, Nv, fgb_const(e, V), ""), "");
  LLVMValueRef idx0[FG_MAX_RANK], idx[FG_MAX_RANK];
  domain_index(e, kc, n0c, idx0);
  e->nuniform = 0;
  for (int i = 0; i < nkept; i++)
    e->uniform[e->nuniform++] = kc[i];
  for (int j = 0; j < 16; j++)
    e->lanes[j] = !lane_dim || j >= V ? NULL
                  : j == 0            ? n0c
                                      : LLVMBuildAdd(e->b, n0c, fgb_const(e, j), "");
  /* the thread's elements in order, then its total scanned over the warp */
  LLVMValueRef pre[16], run = NULL;
  for (int j = 0; j < V; j++) {
    fgk_lane_index(e, idx0, j, idx);
    LLVMValueRef x = scan_term(e, s, idx);
    if (!x)
      return false;
    x = LLVMBuildSelect(e->b, nvalid, x, acc_zero(s), "");
    run = pre[j] = run ? scan_add(e, s, run, x) : x;
  }
  LLVMValueRef incl = warp_scan(e, s, run, lane);
  LLVMValueRef excl =
      LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, lane, LLVMConstInt(i32, 0, 0), ""),
                      acc_zero(s), fgb_shfl_up(e->m, incl, 1), "");
  LLVMValueRef total = W > 1 ? NULL : fgb_shfl_idx(e->m, incl, 31), before = NULL;
  if (W > 1) {
    /* the warps' totals through shared memory: each thread adds those of
     * the warps before its own, and all of them for the carry, in order */
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, LLVMConstInt(i32, 31, 0), ""));
    LLVMBuildStore(e->b, incl, fgk_smem_slot(e, 0, warp));
    fgb_end_if(e, merge);
    fgb_barrier(e->m);
    total = acc_zero(s);
    before = acc_zero(s);
    for (int w = 0; w < W; w++) {
      LLVMValueRef y = LLVMBuildLoad2(e->b, s->acc_ty,
                                      fgk_smem_slot(e, 0, LLVMConstInt(i32, (unsigned)w, 0)), "");
      total = scan_add(e, s, total, y);
      LLVMValueRef lt =
          LLVMBuildICmp(e->b, LLVMIntULT, LLVMConstInt(i32, (unsigned)w, 0), warp, "");
      before = LLVMBuildSelect(e->b, lt, scan_add(e, s, before, y), before, "");
    }
  }
  LLVMValueRef cv = LLVMBuildLoad2(e->b, s->acc_ty, carry, "");
  LLVMValueRef head = before ? scan_add(e, s, before, excl) : excl;
  for (int j = 0; j < V && scan; j++) {
    fgk_lane_index(e, idx0, j, idx);
    seed(e, s, idx, scan_add(e, s, cv, scan_add(e, s, head, pre[j])));
  }
  store_outputs(e, idx0, LLVMBuildAnd(e->b, rvalid, nvalid, ""));
  LLVMBuildStore(e->b, scan_add(e, s, cv, total), carry);
  if (W > 1)
    fgb_barrier(e->m); /* the totals are read before the next chunk writes them */
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, c0);
  if (!scan) {
    /* SCAN_CHUNKS: the chunk's sum (the same in every thread), by thread 0 */
    LLVMBasicBlockRef merge = fgb_begin_if(
        e, LLVMBuildAnd(e->b, rvalid, LLVMBuildICmp(e->b, LLVMIntEQ, t, fgb_const(e, 0), ""), ""));
    LLVMBuildStore(e->b, LLVMBuildLoad2(e->b, s->acc_ty, carry, ""),
                   row_sum_ptr(e, s, chunk, rowc));
    fgb_end_if(e, merge);
  }
  return !e->failed;
}

bool fgb_emit_scan_kernel(fgb_emitter *e) {
  const fg_node *n = e->k->reds[0];
  scan_ctx s = {n, n->in[0]->type.dtype, n->out[0]->type.dtype,
                fg_reduce_acc_dtype(n->out[0]->type.dtype), NULL};
  s.acc_ty = fgb_reg_type(e->m, s.acc);
  if (e->k->scan_lanes)
    return row_scan(e, &s);
  return column_scan(e, &s);
}
