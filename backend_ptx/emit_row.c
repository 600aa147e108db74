/* The row-reduction kernel: a CTA (or `split` CTAs, combined by the last
 * to arrive) per row, the row kept in registers across the phases where
 * the schedule says persistent (schedule_row); short rows packed several a
 * CTA, a group of lanes of a warp each (emit_packed_rows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"
#include "llvm_module.h"

/* What the steps of a row kernel share: the row's coordinates, this CTA's
 * slice of it (split > 1), the thread's first lane and each reduction's
 * total over the CTA. */
typedef struct row_kernel {
  fgk_row_ctx rc;
  int64_t split;
  bool cluster; /* the split's CTAs are a thread-block cluster (cluster_sum) */
  LLVMValueRef row, slice, tid, tv;
  LLVMValueRef totals[64];
  /* issue 21, rows peeled (fg_kernel.peeled): the head's length, the end
   * of the aligned body (rc's slices cover [head, body_end)), and this
   * thread's one element of the head or tail (peel_coordinates) */
  LLVMValueRef head, body_end;
  fgk_chunks edge;
} row_kernel;

/* issue 21: a peeled row (fg_kernel.peeled) starts at the domain's dense
 * index row * R; its head is the h = -row * R mod V elements before the
 * first multiple of V, its body the whole vectors after them (up to
 * body_end), its tail the rest. The slices cover the body, shifted by h;
 * thread t of slice 0 takes head element t (t < h) or tail element
 * t - h (fewer than V of each, so one warp's threads), the others
 * element 0, not valid: its edge chunk, of one lane. */
static void peel_coordinates(fgb_emitter *e, row_kernel *rk, LLVMValueRef Rv) {
  LLVMBuilderRef b = e->b;
  fgk_row_ctx *rc = &rk->rc;
  int64_t V = e->vec;
  LLVMValueRef start = LLVMBuildMul(b, rk->row, Rv, "");
  rk->head = LLVMBuildAnd(b, LLVMBuildNeg(b, start, ""), fgb_const(e, V - 1), "");
  LLVMValueRef body = LLVMBuildUDiv(b, LLVMBuildSub(b, Rv, rk->head, ""), fgb_const(e, V), "");
  rk->body_end = LLVMBuildAdd(b, rk->head, LLVMBuildMul(b, body, fgb_const(e, V), ""), "");
  rc->rstart = LLVMBuildAdd(b, rc->rstart, rk->head, "");
  rc->rend = fgk_imin(e, LLVMBuildAdd(b, rc->rend, rk->head, ""), rk->body_end);
  LLVMValueRef t = rk->tid,
               edges = LLVMBuildAdd(b, rk->head, LLVMBuildSub(b, Rv, rk->body_end, ""), "");
  LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntULT, t, edges, "");
  if (rk->split > 1)
    valid = LLVMBuildAnd(b, valid, LLVMBuildICmp(b, LLVMIntEQ, rk->slice, fgb_const(e, 0), ""), "");
  LLVMValueRef tail = LLVMBuildAdd(b, rk->body_end, LLVMBuildSub(b, t, rk->head, ""), "");
  LLVMValueRef pos = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, t, rk->head, ""), t, tail, "");
  pos = LLVMBuildSelect(b, valid, pos, fgb_const(e, 0), "");
  int vec = e->vec;
  e->vec = 1;
  rk->edge.n = 1;
  fgk_row_chunk(e, rc, pos, rk->edge.idx0[0]);
  fgk_chunks_save(e, &rk->edge, 0, valid);
  e->vec = vec;
}

/* Reduction n accumulated over this thread's edge element (a peeled row;
 * acc as it is otherwise): one lane, loaded element-wise. */
static LLVMValueRef edge_accumulate(fgb_emitter *e, row_kernel *rk, const fg_node *n,
                                    LLVMValueRef acc) {
  if (!e->k->peeled || !acc)
    return acc;
  int vec = e->vec;
  e->vec = 1;
  acc = fgk_chunks_accumulate(e, &rk->edge, n, acc);
  e->vec = vec;
  return acc;
}

/* Full-size output o stored at this thread's edge element (a peeled row). */
static void edge_store_full(fgb_emitter *e, row_kernel *rk, const fg_value *o) {
  if (!e->k->peeled)
    return;
  int vec = e->vec;
  e->vec = 1;
  fgk_chunks_store_full(e, &rk->edge, o);
  e->vec = vec;
}

/* CTA cta takes row cta / split, slice cta % split of it (cta counted from
 * the last CTA in descending order, fg_kernel.reverse: the partials keep
 * their slots, and the combine its order). */
static void row_coordinates(fgb_emitter *e, row_kernel *rk) {
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  fgk_row_ctx_sizes(k, rc);
  int64_t R = k->red, S = k->split, V = e->vec;
  rk->split = S;
  rk->cluster = S > 1 && k->cluster == S;
  LLVMValueRef cta = fgb_work_block(e);
  rk->row = S > 1 ? LLVMBuildUDiv(e->b, cta, fgb_const(e, S), "") : cta;
  /* a cluster's slices by rank (its CTAs take the same row counted either
   * way: the grid is whole clusters) */
  rk->slice = rk->cluster ? LLVMBuildURem(e->b, fgb_block_index(e, 0), fgb_const(e, S), "")
              : S > 1     ? LLVMBuildURem(e->b, cta, fgb_const(e, S), "")
                          : fgb_const(e, 0);
  fgb_delinearize(e, rk->row, rc->kept_sizes, rc->nkept, rc->kc);
  /* A slice: ceil(ceil(R / S) / V) x V elements; R is T x the rest over
   * the symbolic size (opt/symbolic.h), a run-time value (constants fold). */
  LLVMValueRef Rv = fgb_extent(e, R), slicev = Rv;
  if (S > 1)
    slicev = LLVMBuildMul(e->b, fgb_ceil_div(e, fgb_ceil_div(e, Rv, S), V), fgb_const(e, V), "");
  rc->rstart = LLVMBuildMul(e->b, rk->slice, slicev, "");
  rc->rend = fgk_imin(e, LLVMBuildAdd(e->b, rc->rstart, slicev, ""), Rv);
  rk->tid = fgb_thread_index(e, 0);
  rk->tv = LLVMBuildMul(e->b, rk->tid, fgb_const(e, V), "");
  if (k->peeled)
    peel_coordinates(e, rk, Rv);
}

/* A row a cluster (schedule.c cluster_split): the cluster's total of a
 * reduction from its CTAs' (t, every thread's after the block reduction).
 * Thread 0 puts t in entry i of the flag slot of its shared memory; after
 * a cluster barrier every thread sums the entries of ranks 0..C-1 in
 * order (mapa), so every CTA has the same bits. Each reduction its own
 * entry: none is rewritten, and the barrier at the kernel's end keeps
 * each CTA's shared memory alive until its cluster has read it. */
static LLVMValueRef cluster_sum(fgb_emitter *e, const row_kernel *rk, int i, LLVMValueRef t) {
  const fg_node *n = e->k->reds[i];
  fg_opcode op = fgk_red_op(n);
  fg_dtype acc = fgk_red_acc(n);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef slot = fgk_smem_slot(e, fgk_flag_area(e->k), LLVMConstInt(i32, (unsigned)i, 0));
  LLVMBasicBlockRef merge = fgb_begin_if(
      e, LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), ""));
  LLVMBuildStore(e->b, t, slot);
  fgb_end_if(e, merge);
  fgb_cluster_barrier(e->m);
  LLVMValueRef got[16];
  for (int64_t r = 0; r < rk->split; r++) /* every load issued before any sum */
    got[r] = LLVMBuildLoad2(e->b, LLVMTypeOf(t),
                            fgb_cluster_map(e->m, slot, LLVMConstInt(i32, (unsigned)r, 0)), "");
  LLVMValueRef sum = fgb_reduce_identity(e->m, op, acc);
  for (int64_t r = 0; r < rk->split; r++)
    sum = fgb_reduce_combine(e->m, op, sum, got[r], acc);
  return sum;
}

/* Reduction i's total over the CTA, and over the cluster where a cluster
 * takes the row. */
static LLVMValueRef row_total(fgb_emitter *e, const row_kernel *rk, int i, LLVMValueRef v) {
  const fg_node *n = e->k->reds[i];
  LLVMValueRef t = fgb_block_reduce(e, fgk_red_op(n), fgk_red_acc(n), v, i);
  return rk->cluster ? cluster_sum(e, rk, i, t) : t;
}

/* Reduction i from the thread's value acc: the edge element added, the
 * total over the CTA (and cluster), seeded as the result where the CTA
 * or its cluster owns the whole row (not split). */
static bool finish_reduction(fgb_emitter *e, row_kernel *rk, int i, LLVMValueRef acc) {
  const fg_node *n = e->k->reds[i];
  acc = edge_accumulate(e, rk, n, acc);
  if (!acc)
    return false;
  rk->totals[i] = row_total(e, rk, i, acc);
  if (rk->split == 1 || rk->cluster)
    fgk_seed_reduction(e, n, rk->rc.kc, rk->totals[i]);
  return true;
}

/* The row kept in registers: the thread's chunks are loaded once, every
 * reduction and full-size output reads them. */
static bool reduce_persistent(fgb_emitter *e, row_kernel *rk) {
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  int64_t R = k->red, S = rk->split, V = e->vec, T = k->block;
  int E = k->chunks;
  fgk_chunks ch;
  ch.n = E;
  bool exact = (R % (T * V * E)) == 0 && S == 1 && T * V * E == R && !k->peeled;
  for (int c = 0; c < E; c++) {
    LLVMValueRef r0 = LLVMBuildAdd(
        e->b, rc->rstart, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)c * T * V), rk->tv, ""), "");
    LLVMValueRef valid = exact ? NULL : LLVMBuildICmp(e->b, LLVMIntSLT, r0, rc->rend, "");
    /* (a peeled row's slice may start past its body's end: invalid chunks
     * load the body's first vector, inside the row) */
    if (valid)
      r0 = LLVMBuildSelect(e->b, valid, r0, k->peeled ? rk->head : rc->rstart, "");
    fgk_row_chunk(e, rc, r0, ch.idx0[c]);
    fgk_chunks_save(e, &ch, c, valid);
  }
  for (int i = 0; i < k->nreds; i++) {
    const fg_node *n = k->reds[i];
    LLVMValueRef acc =
        fgk_chunks_accumulate(e, &ch, n, fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
    if (!finish_reduction(e, rk, i, acc))
      return false;
  }
  for (int i = 0; i < k->nouts; i++) { /* each slice its own (schedule_row) */
    const fg_value *o = k->outs[i];
    if (fgb_is_full(e, o) && !fgk_is_reduction_result(o)) {
      fgk_chunks_store_full(e, &ch, o);
      edge_store_full(e, rk, o);
    }
  }
  return true;
}

/* A thread's running Welford state (reduce_variance_pair): locals. */
typedef struct welford {
  LLVMValueRef sum, cnt, mean, m2, shift;
} welford;

/* Stores v, or where valid is false (not NULL) keeps what var holds. */
static void store_if(fgb_emitter *e, LLVMValueRef valid, LLVMValueRef v, LLVMValueRef var,
                     LLVMValueRef old) {
  LLVMBuildStore(e->b, valid ? LLVMBuildSelect(e->b, valid, v, old, "") : v, var);
}

/* Merges a chunk of nv values x into w's count, mean and M2 (Chan's
 * update above; where valid is false, not NULL, w is left as it is). */
static void chan_merge(fgb_emitter *e, const welford *w, LLVMValueRef *x, int nv,
                       LLVMValueRef valid) {
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0), vf = LLVMConstReal(f32, (double)nv);
  LLVMValueRef cnt = LLVMBuildLoad2(b, f32, w->cnt, ""), mean = LLVMBuildLoad2(b, f32, w->mean, ""),
               m2 = LLVMBuildLoad2(b, f32, w->m2, "");
  LLVMValueRef first = LLVMBuildFCmp(b, LLVMRealOEQ, cnt, zero, "");
  LLVMValueRef old_shift = LLVMBuildLoad2(b, f32, w->shift, "");
  LLVMValueRef shift = LLVMBuildSelect(b, first, x[0], old_shift, "");
  store_if(e, valid, shift, w->shift, old_shift);
  LLVMValueRef d[16] = {0}, cs = NULL;
  for (int c = 0; c < nv; c++) {
    d[c] = LLVMBuildFSub(b, x[c], shift, "");
    cs = cs ? LLVMBuildFAdd(b, cs, d[c], "") : d[c];
  }
  LLVMValueRef cm = LLVMBuildFMul(b, cs, LLVMConstReal(f32, 1.0 / (double)nv), ""), cm2 = zero;
  for (int c = 0; c < nv; c++) {
    LLVMValueRef dd = LLVMBuildFSub(b, d[c], cm, "");
    cm2 = LLVMBuildFAdd(b, cm2, LLVMBuildFMul(b, dd, dd, ""), "");
  }
  LLVMValueRef cnt1 = LLVMBuildFAdd(b, cnt, vf, "");
  /* V / n': the fast reciprocal (one MUFU op; its ulp of error moves the
   * mean and M2 updates by as little), not div.rn, a long chain in every
   * iteration of a loop that should wait only for its load */
  LLVMValueRef wt =
      LLVMBuildFMul(b, vf, fgb_call(e->m, "llvm.nvvm.rcp.approx.ftz.f", f32, 1, &cnt1), "");
  LLVMValueRef delta = LLVMBuildFSub(b, cm, mean, "");
  store_if(e, valid, LLVMBuildFAdd(b, mean, LLVMBuildFMul(b, delta, wt, ""), ""), w->mean, mean);
  LLVMValueRef corr =
      LLVMBuildFMul(b, LLVMBuildFMul(b, delta, delta, ""), LLVMBuildFMul(b, cnt, wt, ""), "");
  store_if(e, valid, LLVMBuildFAdd(b, LLVMBuildFAdd(b, m2, cm2, ""), corr, ""), w->m2, m2);
  store_if(e, valid, cnt1, w->cnt, cnt);
}

/* A variance's mean and squared deviations in one pass over the row
 * (opt/variance.c): reduction i sums x, reduction j sums (x - sum / R)^2.
 * Each thread keeps the sum as reduction i alone would (the same bits),
 * and a running (count n, mean, M2) of its elements, the mean relative to
 * its first element K (exact differences where values are close, so the
 * mean keeps the digits of the spread, not of the offset). A chunk's own
 * mean and M2 (its V values, in registers, about K) merge by Chan's update
 *   delta = mean_c - mean, n' = n + V,
 *   mean' = mean + delta V / n', M2' = M2 + M2_c + delta^2 n V / n'.
 * The row's sum gives m = sum / R (the graph's division), and reduction j
 * is the CTA's sum of M2_t + n_t ((K_t - m) + mean_t)^2. Rounding within
 * 1e-7 of the two-pass form on N(0,1) rows, 4e-4 on rows whose spread is
 * 1e-6 of their offset (simulated in f32; docs/benchmarks.md, S21). A
 * peeled row's edge element (issue 21) merges as a chunk of one. */
static bool reduce_variance_pair(fgb_emitter *e, row_kernel *rk, int i, int j) {
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  const fg_node *n = k->reds[i];
  int64_t V = e->vec, T = k->block;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  welford w;
  w.sum = fgk_local_var(e, f32, zero);
  w.cnt = fgk_local_var(e, f32, zero);
  w.mean = fgk_local_var(e, f32, zero);
  w.m2 = fgk_local_var(e, f32, zero);
  w.shift = fgk_local_var(e, f32, zero);
  fgk_loop l;
  LLVMValueRef r0 =
      fgk_loop_begin(e, &l, LLVMBuildAdd(b, rc->rstart, rk->tv, ""), rc->rend, fgb_const(e, T * V));
  int mark = fgb_memo_mark(e);
  LLVMValueRef idx0[FG_MAX_RANK], x[16] = {0};
  fgk_row_chunk(e, rc, r0, idx0);
  LLVMValueRef sum = LLVMBuildLoad2(b, f32, w.sum, "");
  for (int c = 0; c < V; c++) {
    LLVMValueRef idx[FG_MAX_RANK];
    fgk_lane_index(e, idx0, c, idx);
    x[c] = fgb_emit_value(e, n->in[0], idx);
    if (!x[c])
      return false;
    sum = LLVMBuildFAdd(b, sum, x[c], "");
  }
  LLVMBuildStore(b, sum, w.sum);
  chan_merge(e, &w, x, (int)V, NULL);
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, r0);
  if (k->peeled) { /* the edge element: one lane, element-wise */
    fgk_chunks_enter(e, &rk->edge, 0);
    e->vec = 1;
    LLVMValueRef xe = fgb_emit_value(e, n->in[0], rk->edge.idx0[0]), valid = rk->edge.valid[0];
    e->vec = (int)V;
    if (!xe)
      return false;
    sum = LLVMBuildLoad2(b, f32, w.sum, "");
    store_if(e, valid, LLVMBuildFAdd(b, sum, xe, ""), w.sum, sum);
    chan_merge(e, &w, &xe, 1, valid);
  }
  sum = LLVMBuildLoad2(b, f32, w.sum, "");
  rk->totals[i] = row_total(e, rk, i, sum);
  fgk_seed_reduction(e, n, rc->kc, rk->totals[i]);
  /* this thread's M2 about the row's mean m; nothing from a thread
   * without elements (0 x an infinite m would be NaN) */
  LLVMValueRef m = LLVMBuildFDiv(b, rk->totals[i], LLVMConstReal(f32, (double)k->red), "");
  LLVMValueRef cnt = LLVMBuildLoad2(b, f32, w.cnt, "");
  LLVMValueRef dm = LLVMBuildFAdd(b, LLVMBuildFSub(b, LLVMBuildLoad2(b, f32, w.shift, ""), m, ""),
                                  LLVMBuildLoad2(b, f32, w.mean, ""), "");
  LLVMValueRef mine = LLVMBuildFAdd(b, LLVMBuildLoad2(b, f32, w.m2, ""),
                                    LLVMBuildFMul(b, cnt, LLVMBuildFMul(b, dm, dm, ""), ""), "");
  mine = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, cnt, zero, ""), mine, zero, "");
  rk->totals[j] = row_total(e, rk, j, mine);
  fgk_seed_reduction(e, k->reds[j], rc->kc, rk->totals[j]);
  return true;
}

/* The graph's sub and exp of a logsumexp pair (logsumexp.c) on x and m:
 * exp(x - m) in f32, as the graph computes it. */
static LLVMValueRef lse_term(fgb_emitter *e, const fg_node *sum, LLVMValueRef x, LLVMValueRef m) {
  const fg_node *ex = sum->in[0]->def, *sub = ex->in[0]->def;
  LLVMValueRef ops[2] = {x, m};
  LLVMValueRef d = fgb_emit_pointwise(e->m, sub, ops);
  return d ? fgb_emit_pointwise(e->m, ex, &d) : NULL;
}

/* A thread's running max and sum (reduce_lse_pair) merged with n values
 * xs: m' = max(m, xs), s' = s exp(m - m') + sum exp(xs - m'), about 0
 * where m' is -inf (every value so far -inf: each term then exp(-inf) =
 * 0, not exp(-inf - -inf) = NaN). NaN and +inf reach m' and s' as the
 * two-pass form gives them. */
static bool lse_merge(fgb_emitter *e, const fg_node *sum, LLVMValueRef mv, LLVMValueRef sv,
                      LLVMValueRef *xs, int n) {
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef m = LLVMBuildLoad2(b, f32, mv, ""), s = LLVMBuildLoad2(b, f32, sv, "");
  LLVMValueRef mx = m;
  for (int c = 0; c < n; c++)
    mx = fgb_reduce_combine(e->m, FG_OP_AMAX, mx, xs[c], FG_F32);
  LLVMValueRef ninf = LLVMBuildFCmp(b, LLVMRealOEQ, mx, LLVMConstReal(f32, -INFINITY), "");
  LLVMValueRef ms = LLVMBuildSelect(b, ninf, LLVMConstReal(f32, 0.0), mx, "");
  LLVMValueRef scale = lse_term(e, sum, m, ms);
  if (!scale)
    return false;
  s = LLVMBuildFMul(b, s, scale, "");
  for (int c = 0; c < n; c++) {
    LLVMValueRef t = lse_term(e, sum, xs[c], ms);
    if (!t)
      return false;
    s = LLVMBuildFAdd(b, s, t, "");
  }
  LLVMBuildStore(b, mx, mv);
  LLVMBuildStore(b, s, sv);
  return true;
}

/* A logsumexp's max (reduction i, amax(x)) and sum of exponentials
 * (reduction j, sum(exp(x - m))) in one pass over the row
 * (opt/logsumexp.c): each thread merges fg_plan_lse_unroll vectors at a
 * time into a running (m_t, s_t) (lse_merge; vectors past the row's end
 * read the first and count as -inf); the CTA's max M is reduction i, and
 * reduction j is the CTA's sum of s_t exp(m_t - M) (a thread without
 * elements: 0 exp(-inf - M) = 0). A peeled row's edge element merges as a
 * vector of one. */
static bool reduce_lse_pair(fgb_emitter *e, row_kernel *rk, int i, int j) {
  LLVMValueRef ride[64] = {NULL}; /* the riders' accumulators (fg_plan_lse_rides) */
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  const fg_node *sum = k->reds[j];
  const fg_value *x = k->reds[i]->in[0];
  int64_t V = e->vec, T = k->block;
  int U = fg_plan_lse_unroll(e->p, k);
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef ninf = LLVMConstReal(f32, -INFINITY);
  LLVMValueRef mv = fgk_local_var(e, f32, ninf), sv = fgk_local_var(e, f32, LLVMConstReal(f32, 0));
  for (int r = 0; r < k->nreds; r++)
    if (fg_plan_lse_rides(e->p, k, r) == i)
      ride[r] =
          fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(k->reds[r])),
                        fgb_reduce_identity(e->m, fgk_red_op(k->reds[r]), fgk_red_acc(k->reds[r])));
  fgk_loop l;
  LLVMValueRef r0 = fgk_loop_begin(e, &l, LLVMBuildAdd(b, rc->rstart, rk->tv, ""), rc->rend,
                                   fgb_const(e, T * V * U));
  int mark = fgb_memo_mark(e);
  LLVMValueRef xs[8 * 16];
  for (int u = 0; u < U; u++) {
    LLVMValueRef ru = LLVMBuildAdd(b, r0, fgb_const(e, (int64_t)u * T * V), ""), valid = NULL;
    if (u > 0) {
      valid = LLVMBuildICmp(b, LLVMIntSLT, ru, rc->rend, "");
      ru = LLVMBuildSelect(b, valid, ru, r0, "");
    }
    LLVMValueRef idx0[FG_MAX_RANK];
    fgk_row_chunk(e, rc, ru, idx0);
    for (int c = 0; c < V; c++) {
      LLVMValueRef idx[FG_MAX_RANK];
      fgk_lane_index(e, idx0, c, idx);
      LLVMValueRef v = fgb_emit_value(e, x, idx);
      if (!v)
        return false;
      xs[u * V + c] = valid ? LLVMBuildSelect(b, valid, v, ninf, "") : v;
    }
    for (int r = 0; r < k->nreds; r++) {
      if (!ride[r])
        continue;
      LLVMTypeRef t = fgb_reg_type(e->m, fgk_red_acc(k->reds[r]));
      LLVMValueRef acc =
          fgk_accumulate(e, k->reds[r], idx0, valid, LLVMBuildLoad2(b, t, ride[r], ""));
      if (!acc)
        return false;
      LLVMBuildStore(b, acc, ride[r]);
    }
  }
  if (!lse_merge(e, sum, mv, sv, xs, (int)(U * V)))
    return false;
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, r0);
  if (k->peeled) {
    fgk_chunks_enter(e, &rk->edge, 0);
    e->vec = 1;
    LLVMValueRef xe = fgb_emit_value(e, x, rk->edge.idx0[0]);
    e->vec = (int)V;
    if (!xe)
      return false;
    xe = LLVMBuildSelect(b, rk->edge.valid[0], xe, ninf, "");
    if (!lse_merge(e, sum, mv, sv, &xe, 1))
      return false;
  }
  LLVMValueRef m = LLVMBuildLoad2(b, f32, mv, ""), s = LLVMBuildLoad2(b, f32, sv, "");
  rk->totals[i] = row_total(e, rk, i, m);
  fgk_seed_reduction(e, k->reds[i], rc->kc, rk->totals[i]);
  LLVMValueRef scale = lse_term(e, sum, m, rk->totals[i]);
  if (!scale)
    return false;
  rk->totals[j] = row_total(e, rk, j, LLVMBuildFMul(b, s, scale, ""));
  fgk_seed_reduction(e, sum, rc->kc, rk->totals[j]);
  for (int r = 0; r < k->nreds; r++)
    if (ride[r] &&
        !finish_reduction(
            e, rk, r, LLVMBuildLoad2(b, fgb_reg_type(e->m, fgk_red_acc(k->reds[r])), ride[r], "")))
      return false;
  return true;
}

/* The full-size outputs of a streamed row (each slice its own,
 * schedule_row): one loop over the row for all of them, k->chunks chunks a
 * thread an iteration (schedule.c: 16 values), every chunk's loads issued
 * before the first is stored; a chunk past the row's end loads the first
 * one again and stores nothing. */
static bool stream_outputs(fgb_emitter *e, row_kernel *rk) {
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  int64_t V = e->vec, T = k->block;
  enum { MAX_U = 16 };
  /* (a row kept in registers streams only in its variant for misaligned
   * pointers: one chunk at a time, the least code) */
  int U = k->persistent || k->chunks < 1 ? 1 : k->chunks > MAX_U ? MAX_U : k->chunks;
  const fg_value **outs = calloc((size_t)k->nouts + 1, sizeof *outs);
  if (!outs) {
    fgb_fail(e, "out of memory");
    return false;
  }
  int n = 0;
  for (int i = 0; i < k->nouts; i++)
    if (fgb_is_full(e, k->outs[i]) && !fgk_is_reduction_result(k->outs[i]))
      outs[n++] = k->outs[i];
  if (n == 0) {
    free(outs);
    return true;
  }
  fgk_loop l;
  LLVMValueRef r0 = fgk_loop_begin(e, &l, LLVMBuildAdd(e->b, rc->rstart, rk->tv, ""), rc->rend,
                                   fgb_const(e, T * V * U));
  int mark = fgb_memo_mark(e);
  /* each chunk's coordinates and lanes, kept so that its stores find its
   * loads in the memo */
  LLVMValueRef idx0[MAX_U][FG_MAX_RANK], valid[MAX_U], lanes[MAX_U][16], uni[MAX_U][64];
  int nuni[MAX_U];
  for (int u = 0; u < U; u++) {
    LLVMValueRef ru = LLVMBuildAdd(e->b, r0, fgb_const(e, (int64_t)u * T * V), "");
    valid[u] = u ? LLVMBuildICmp(e->b, LLVMIntSLT, ru, rc->rend, "") : NULL;
    if (valid[u])
      ru = LLVMBuildSelect(e->b, valid[u], ru, r0, "");
    fgk_row_chunk(e, rc, ru, idx0[u]);
    memcpy(lanes[u], e->lanes, sizeof lanes[u]);
    memcpy(uni[u], e->uniform, sizeof uni[u]);
    nuni[u] = e->nuniform;
    for (int i = 0; i < n && U > 1; i++)
      for (int j = 0; j < V; j++) {
        LLVMValueRef idx[FG_MAX_RANK];
        fgk_lane_index(e, idx0[u], j, idx);
        fgb_prefetch_value(e, outs[i], idx);
      }
  }
  for (int u = 0; u < U && !e->failed; u++) {
    memcpy(e->lanes, lanes[u], sizeof lanes[u]);
    memcpy(e->uniform, uni[u], sizeof uni[u]);
    e->nuniform = nuni[u];
    for (int i = 0; i < n; i++)
      fgk_store_full(e, outs[i], idx0[u], valid[u]);
  }
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, r0);
  for (int i = 0; i < n; i++)
    edge_store_full(e, rk, outs[i]);
  free(outs);
  return !e->failed;
}

/* The row streamed: a loop over the row for each reduction (a variance's
 * two in one: reduce_variance_pair), then one for all the full-size
 * outputs (stream_outputs). */
static bool reduce_streaming(fgb_emitter *e, row_kernel *rk) {
  const fg_kernel *k = e->k;
  fgk_row_ctx *rc = &rk->rc;
  int64_t V = e->vec, T = k->block;
  int pair[64]; /* pair[i]: the j whose pass i's is, -2: j (done with its i), -1: alone */
  for (int i = 0; i < k->nreds; i++)
    pair[i] = -1;
  bool lse[64] = {false}; /* lse[i]: pair[i] is a logsumexp's sum (logsumexp.c) */
  for (int j = 0; j < k->nreds; j++) {
    int i = V <= 16 ? fg_plan_one_pass_variance(k, j) : -1;
    bool l = false;
    if (i < 0 && V <= 16) {
      i = fg_plan_one_pass_lse(e->p, k, j);
      l = true;
    }
    if (i >= 0 && pair[i] == -1 && pair[j] == -1) {
      pair[i] = j;
      pair[j] = -2;
      lse[i] = l;
    }
  }
  for (int i = 0; i < k->nreds; i++) {
    const fg_node *n = k->reds[i];
    if (pair[i] == -2 || fg_plan_lse_rides(e->p, k, i) >= 0)
      continue;
    if (pair[i] >= 0) {
      if (!(lse[i] ? reduce_lse_pair(e, rk, i, pair[i]) : reduce_variance_pair(e, rk, i, pair[i])))
        return false;
      continue;
    }
    LLVMValueRef accv = fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(n)),
                                      fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
    fgk_loop l;
    LLVMValueRef r0 = fgk_loop_begin(e, &l, LLVMBuildAdd(e->b, rc->rstart, rk->tv, ""), rc->rend,
                                     fgb_const(e, T * V));
    int mark = fgb_memo_mark(e);
    LLVMValueRef idx0[FG_MAX_RANK];
    fgk_row_chunk(e, rc, r0, idx0);
    LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
    acc = fgk_accumulate(e, n, idx0, NULL, acc);
    if (!acc)
      return false;
    LLVMBuildStore(e->b, acc, accv);
    fgb_memo_release(e, mark);
    fgk_loop_end(e, &l, r0);
    acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
    if (!finish_reduction(e, rk, i, acc))
      return false;
  }
  return stream_outputs(e, rk);
}

/* partials[(red * B + row) * S + s] */
static LLVMValueRef partial_slot(fgb_emitter *e, const row_kernel *rk, int i, LLVMValueRef s) {
  LLVMValueRef r = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * e->k->outer), rk->row, "");
  return LLVMBuildAdd(e->b, LLVMBuildMul(e->b, r, fgb_const(e, rk->split), ""), s, "");
}

/* split > 1: each CTA writes its totals as partials; the last of the row's
 * CTAs to arrive combines them cooperatively (thread t takes partials t,
 * t + T, ... in order, then a block reduction: a fixed assignment and a
 * fixed tree, so the same bits every run) and stores the row's results. */
static void combine_split(fgb_emitter *e, row_kernel *rk) {
  const fg_kernel *k = e->k;
  int64_t S = rk->split, T = k->block;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef is_t0 =
      LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, is_t0);
  for (int i = 0; i < k->nreds; i++)
    LLVMBuildStore(e->b, rk->totals[i],
                   fgk_partial_ptr(e, fgk_red_acc(k->reds[i]), partial_slot(e, rk, i, rk->slice)));
  fgb_end_if(e, merge);
  LLVMValueRef counters = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->counter_temp});
  LLVMValueRef cptr = fgb_gep_global(e->m, counters, i32, rk->row);
  LLVMValueRef last = fgk_arrive(e, cptr, (int)S);
  LLVMBasicBlockRef done = fgb_begin_if(e, last);
  fgb_fence_gpu(e->m);
  for (int i = 0; i < k->nreds; i++) {
    const fg_node *n = k->reds[i];
    LLVMValueRef accv = fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(n)),
                                      fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
    fgk_loop l;
    LLVMValueRef si = fgk_loop_begin(e, &l, rk->tid, fgb_const(e, S), fgb_const(e, T));
    LLVMValueRef slot = partial_slot(e, rk, i, si);
    LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
    acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, fgk_load_partial(e, fgk_red_acc(n), slot),
                             fgk_red_acc(n));
    LLVMBuildStore(e->b, acc, accv);
    fgk_loop_end(e, &l, si);
    LLVMValueRef mine = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
    fgk_seed_reduction(e, n, rk->rc.kc,
                       fgb_block_reduce(e, fgk_red_op(n), fgk_red_acc(n), mine, i));
  }
  fgk_reset_counter(e, cptr);
  fgk_store_rows(e, &rk->rc, NULL);
  fgb_end_if(e, done);
}

/* Short rows packed (schedule.c pack_rows): thread t of CTA c takes row
 * c * (block / L) + t / L and lane t % L of it, whose one chunk starts at
 * element lane * V (lanes past the row load its first chunk and add the
 * identity). Each reduction is summed by shuffles within the row's L lanes
 * (every lane gets the total, so later reductions and full-size outputs
 * use it at once); full-size outputs are stored by every lane, row-shaped
 * results by lane 0. Rows past the end (the last CTA) compute row B - 1
 * and store nothing, so every lane of a warp takes part in its shuffles. */
static bool emit_packed_rows(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  fgk_row_ctx rc;
  memset(&rc, 0, sizeof rc);
  fgk_row_ctx_sizes(k, &rc);
  int64_t L = k->row_lanes, V = e->vec, R = k->red, rows = k->block / L;
  int shift = 0;
  while (((int64_t)1 << shift) < L)
    shift++;
  LLVMBuilderRef b = e->b;
  LLVMValueRef tid = fgb_thread_index(e, 0);
  LLVMValueRef lane = L == 1 ? fgb_const(e, 0) : LLVMBuildAnd(b, tid, fgb_const(e, L - 1), "");
  LLVMValueRef group = shift ? LLVMBuildLShr(b, tid, fgb_const(e, shift), "") : tid;
  LLVMValueRef row =
      LLVMBuildAdd(b, LLVMBuildMul(b, fgb_block_index(e, 0), fgb_const(e, rows), ""), group, "");
  LLVMValueRef in_rows = NULL;
  if (fg_sym_involves(&e->p->sym, k->outer) || k->outer % rows) {
    LLVMValueRef B = fgb_extent(e, k->outer);
    in_rows = LLVMBuildICmp(b, LLVMIntULT, row, B, "");
    row = LLVMBuildSelect(b, in_rows, row, LLVMBuildSub(b, B, fgb_const(e, 1), ""), "");
  }
  fgb_delinearize(e, row, rc.kept_sizes, rc.nkept, rc.kc);
  rc.rstart = fgb_const(e, 0);
  rc.rend = fgb_extent(e, R);
  fgk_chunks ch;
  ch.n = 1;
  LLVMValueRef r0 = LLVMBuildMul(b, lane, fgb_const(e, V), "");
  LLVMValueRef valid = L * V == R ? NULL : LLVMBuildICmp(b, LLVMIntSLT, r0, rc.rend, "");
  if (valid)
    r0 = LLVMBuildSelect(b, valid, r0, rc.rstart, "");
  fgk_row_chunk(e, &rc, r0, ch.idx0[0]);
  fgk_chunks_save(e, &ch, 0, valid);
  for (int i = 0; i < k->nreds; i++) {
    const fg_node *n = k->reds[i];
    fg_opcode op = fgk_red_op(n);
    fg_dtype acc_t = fgk_red_acc(n);
    LLVMValueRef acc = fgk_chunks_accumulate(e, &ch, n, fgb_reduce_identity(e->m, op, acc_t));
    if (!acc)
      return false;
    fgb_group_reduce_n(e, 1, &op, &acc_t, &acc, (int)L);
    fgk_seed_reduction(e, n, rc.kc, acc);
  }
  if (in_rows)
    ch.valid[0] = valid ? LLVMBuildAnd(b, valid, in_rows, "") : in_rows;
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
      fgk_chunks_store_full(e, &ch, o);
  }
  if (e->failed)
    return false;
  e->nuniform = 0;
  for (int i = 0; i < rc.nkept; i++)
    e->uniform[e->nuniform++] = rc.kc[i];
  LLVMValueRef guard = LLVMBuildICmp(b, LLVMIntEQ, lane, fgb_const(e, 0), "");
  if (in_rows)
    guard = LLVMBuildAnd(b, guard, in_rows, "");
  return fgk_store_rows(e, &rc, guard);
}

/* A CTA (or `split` CTAs) a row: coordinates, the reductions (the row in
 * registers, or streamed), then the row-shaped results. */
bool fgb_emit_row_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->ncols || k->ntails)
    return fgb_emit_rowcol_kernel(e);
  if (k->nreds > 64) {
    fgb_fail(e, "row kernel with %d reductions: the code generator supports at most 64", k->nreds);
    return false;
  }
  if (k->row_lanes > 0)
    return emit_packed_rows(e) && !e->failed;
  row_kernel rk;
  memset(&rk, 0, sizeof rk);
  row_coordinates(e, &rk);
  if (k->peeled)
    e->peel_kc = rk.rc.kc;
  /* The fallback variant for misaligned pointers (vec > 1, not aligned)
   * re-reads the row in each phase instead of unrolling it into registers:
   * far less code, and it runs only when a caller passes odd pointers. */
  bool ok = k->persistent && (e->aligned || e->vec == 1) ? reduce_persistent(e, &rk)
                                                         : reduce_streaming(e, &rk);
  if (!ok || e->failed)
    return false;
  e->nuniform = 0;
  for (int i = 0; i < rk.rc.nkept; i++)
    e->uniform[e->nuniform++] = rk.rc.kc[i];
  if (rk.cluster) { /* the row's results from rank 0, then the barrier cluster_sum needs */
    LLVMValueRef first = LLVMBuildAnd(
        e->b, LLVMBuildICmp(e->b, LLVMIntEQ, fgb_thread_index(e, 0), fgb_const(e, 0), ""),
        LLVMBuildICmp(e->b, LLVMIntEQ, rk.slice, fgb_const(e, 0), ""), "");
    fgk_store_rows(e, &rk.rc, first);
    fgb_cluster_barrier(e->m);
  } else if (rk.split > 1)
    combine_split(e, &rk);
  else
    fgk_store_rows(e, &rk.rc, NULL);
  return !e->failed;
}
