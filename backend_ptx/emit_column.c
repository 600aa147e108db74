/* The column-reduction kernel: threads own outputs and loop over the
 * reduced extent, split over CTAs whose partials the last to arrive
 * combines (schedule_column). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

/* Values a thread of a column kernel's last CTA has in flight while it
 * combines the partials (one CTA per column tile does all of it: with
 * few in flight this tail was a fifth of the packed dQKV epilogue). */
enum { COL_COMBINE_VALUES = 64 };

/* The column kernel's partials: row (red, s) of `kept` accumulators,
 * packed (acc-sized), rows 8 * kept bytes apart (the temp's size; kept is
 * T x the rest when it keeps the symbolic size), so a thread's V lanes are
 * contiguous and vector-aligned. */
static LLVMValueRef col_partial_ptr(fgb_emitter *e, int64_t kept, LLVMValueRef row,
                                    LLVMValueRef elem, fg_dtype acc) {
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->partial_temp});
  LLVMValueRef byte =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, fgb_extent(e, 8 * kept), ""),
                   LLVMBuildMul(e->b, elem, fgb_const(e, fg_dtype_size(acc)), ""), "");
  return fgb_gep_global(e->m, base, LLVMInt8TypeInContext(e->ctx), byte);
}

/* V lanes of a column partial at ptr: vector accesses of up to 16 bytes.
 * The loads are plain: they follow the fence after the arrival counter
 * (the acquire side of the PTX memory model's fence-fence synchronization
 * with the writers' fence), and volatile loads were issued one at a time. */
static void col_partial_lanes(fgb_emitter *e, LLVMValueRef ptr, fg_dtype acc, int V,
                              LLVMValueRef *vals, bool store) {
  int asz = fg_dtype_size(acc), per = 16 / asz < V ? 16 / asz : V;
  for (int done = 0; done < V; done += per) {
    LLVMValueRef p =
        fgb_gep_global(e->m, ptr, LLVMInt8TypeInContext(e->ctx), fgb_const(e, (int64_t)done * asz));
    if (store)
      fgb_store_vec(e->m, p, acc, per, (unsigned)(per * asz), vals + done);
    else
      fgb_load_vec(e->m, p, acc, per, (unsigned)(per * asz), 0, vals + done);
  }
}

/* ---- column reductions ---- */

/* A variance's mean and squared deviations in one pass (opt/variance.c):
 * reduction i sums x, reduction j sums (x - sum / R)^2. The thread keeps
 * the sum as reduction i alone would (the same bits), and for each of its
 * columns a running (count n, mean, M2) by Welford's update a row, the
 * mean relative to the column's first value K (exact differences where
 * values are close, so the mean keeps the digits of the spread, not of
 * the offset); n is the thread's rows, the same for every column:
 *   d = x - K, delta = d - mean, mean' = mean + delta / n',
 *   M2' = M2 + delta (d - mean').
 * With the graph's mean m = sum / R, reduction j is M2 + n ((K - m) +
 * mean)^2 (exact in real arithmetic for any m). Split slices write their
 * sum, M2 and the offset of their own mean from their sum's mean m_s =
 * sum_s / n_s, dev_s = (K - m_s) + mean; the last CTA adds, slice by slice
 * in order, M2_s + n_s ((m_s - m) + dev_s)^2 (Chan's formula around m). */
typedef struct col_variance {
  int pair[8];  /* pair[i]: the j whose mean i is, -2: j (done with its i), -1: alone */
  int index[8]; /* index[j]: j's row of mean offsets among the partials' extra rows */
  int n;
  LLVMValueRef cntv;
  LLVMValueRef shiftv[8][16], meanv[8][16], m2v[8][16]; /* a j and lane */
} col_variance;

static void find_variances(const fg_kernel *k, col_variance *cv) {
  cv->n = 0;
  for (int i = 0; i < 8; i++)
    cv->pair[i] = cv->index[i] = -1;
  for (int j = 0; j < k->nreds && j < 8; j++) {
    int i = fg_plan_column_variance(k, j);
    if (i >= 0 && cv->pair[i] == -1) {
      cv->pair[i] = j;
      cv->pair[j] = -2;
      cv->index[j] = cv->n++;
    }
  }
}

/* One row's value x of lane l into variance j's (n, K, mean, M2); first:
 * the thread's first row, w: 1 / n' */
static void welford_update(fgb_emitter *e, const col_variance *cv, int j, int l, LLVMValueRef x,
                           LLVMValueRef first, LLVMValueRef w) {
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef shift =
      LLVMBuildSelect(b, first, x, LLVMBuildLoad2(b, f32, cv->shiftv[j][l], ""), "");
  LLVMBuildStore(b, shift, cv->shiftv[j][l]);
  LLVMValueRef d = LLVMBuildFSub(b, x, shift, "");
  LLVMValueRef mean = LLVMBuildLoad2(b, f32, cv->meanv[j][l], "");
  LLVMValueRef delta = LLVMBuildFSub(b, d, mean, "");
  LLVMValueRef mean1 = LLVMBuildFAdd(b, mean, LLVMBuildFMul(b, delta, w, ""), "");
  LLVMBuildStore(b, mean1, cv->meanv[j][l]);
  LLVMValueRef m2 = LLVMBuildLoad2(b, f32, cv->m2v[j][l], "");
  m2 = LLVMBuildFAdd(b, m2, LLVMBuildFMul(b, delta, LLVMBuildFSub(b, d, mean1, ""), ""), "");
  LLVMBuildStore(b, m2, cv->m2v[j][l]);
}

/* What a column kernel's rows share: the thread's kept coordinates and
 * lanes, the reduced dims, the accumulators. */
typedef struct col_rows_ctx {
  const LLVMValueRef *kc;
  int nkept;
  bool lane_dim;
  const LLVMValueRef *lanes;
  const int64_t *red_sizes;
  int nred;
  LLVMValueRef (*accv)[16];
  int nreds;
  LLVMValueRef valid;
  col_variance *var;
} col_rows_ctx;

static void col_row_enter(fgb_emitter *e, const col_rows_ctx *cx, const LLVMValueRef *rc) {
  memcpy(e->lanes, cx->lanes, sizeof e->lanes);
  e->nuniform = 0;
  for (int i = 0; i < cx->nkept - (cx->lane_dim ? 1 : 0); i++)
    e->uniform[e->nuniform++] = cx->kc[i];
  for (int i = 0; i < cx->nred; i++)
    e->uniform[e->nuniform++] = rc[i];
}

/* Rows r .. r+U-1 of the thread's columns: with U > 1, every load of
 * every row is issued before the first row is used (more loads in flight:
 * a column kernel has few CTAs), then each row is accumulated and its
 * full-size outputs stored. */
static bool col_rows(fgb_emitter *e, const col_rows_ctx *cx, LLVMValueRef r, int U) {
  const fg_kernel *k = e->k;
  int V = e->vec;
  int mark = fgb_memo_mark(e);
  LLVMValueRef rc[8][FG_MAX_RANK], idx0[8][FG_MAX_RANK];
  for (int u = 0; u < U; u++) {
    LLVMValueRef ru = u ? LLVMBuildAdd(e->b, r, fgb_const(e, u), "") : r;
    fgb_delinearize(e, ru, cx->red_sizes, cx->nred, rc[u]);
    for (int d = 0, a = 0, b = 0; d < k->rank; d++)
      idx0[u][d] = k->mask[d] ? rc[u][b++] : cx->kc[a++];
    if (U == 1)
      continue;
    col_row_enter(e, cx, rc[u]);
    for (int j = 0; j < V; j++) {
      LLVMValueRef idx[FG_MAX_RANK];
      fgk_lane_index(e, idx0[u], j, idx);
      for (int i = 0; i < cx->nreds; i++)
        if (cx->var->pair[i] != -2) /* a variance's squared deviations: its mean's loads */
          fgb_prefetch_value(e, k->reds[i]->in[0], idx);
      for (int i = 0; i < k->nouts; i++)
        if (fgb_is_full(e, k->outs[i]) && !fgk_is_reduction_result(k->outs[i]))
          fgb_prefetch_value(e, k->outs[i], idx);
    }
  }
  const col_variance *cv = cx->var;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  for (int u = 0; u < U; u++) {
    col_row_enter(e, cx, rc[u]);
    LLVMValueRef first = NULL, w = NULL, cnt1 = NULL;
    if (cv->n) { /* the row's count, shared by every column and variance */
      LLVMValueRef cnt = LLVMBuildLoad2(e->b, f32, cv->cntv, "");
      first = LLVMBuildFCmp(e->b, LLVMRealOEQ, cnt, LLVMConstReal(f32, 0.0), "");
      cnt1 = LLVMBuildFAdd(e->b, cnt, LLVMConstReal(f32, 1.0), "");
      /* 1 / n': the fast reciprocal (one MUFU op, as emit_row.c's
       * one-pass variance), not div.rn's long chain */
      w = fgb_call(e->m, "llvm.nvvm.rcp.approx.ftz.f", f32, 1, &cnt1);
    }
    for (int i = 0; i < cx->nreds; i++) {
      const fg_node *n = k->reds[i];
      fg_dtype ad = fgk_red_acc(n);
      if (cv->pair[i] == -2)
        continue; /* with its mean's, below */
      for (int j = 0; j < V; j++) {
        LLVMValueRef idx[FG_MAX_RANK];
        fgk_lane_index(e, idx0[u], j, idx);
        LLVMValueRef x = fgb_emit_value(e, n->in[0], idx);
        if (!x)
          return false;
        x = fgb_convert(e->m, x, n->in[0]->type.dtype, ad);
        LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), cx->accv[i][j], "");
        LLVMBuildStore(e->b, fgb_reduce_combine(e->m, fgk_red_op(n), acc, x, ad), cx->accv[i][j]);
        if (cv->pair[i] >= 0)
          welford_update(e, cv, cv->pair[i], j, x, first, w);
      }
    }
    if (cv->n)
      LLVMBuildStore(e->b, cnt1, cv->cntv);
    for (int i = 0; i < k->nouts; i++) {
      const fg_value *o = k->outs[i];
      if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
        fgk_store_full(e, o, idx0[u], cx->valid);
    }
  }
  fgb_memo_release(e, mark);
  return !e->failed;
}

/* What the steps of a column kernel share: the thread's first output
 * (linear, clamped, valid), its kept coordinates a lane, its slice of the
 * reduced extent and the accumulators (then the totals) a reduction and
 * lane. */
typedef struct col_kernel {
  int nkept, nred, nreds;
  int64_t kept_sizes[FG_MAX_RANK], red_sizes[FG_MAX_RANK], kept;
  bool lane_dim; /* the schedule vectorizes only a kept last dim */
  LLVMValueRef base, basec, valid, s, rstart, rend, Rv, rs;
  LLVMValueRef split; /* split at run time (fg_kernel.split_formula): %nctaid.y, else NULL */
  /* colthr (fg_kernel.col_threads): R threads a column, cols columns a CTA; the thread's group
   * g (0 .. R-1) takes rows [trstart, trend) of the CTA's slice [rstart, rend), q rows a group;
   * valid_col: its column exists (valid, after the groups' combine, also says group 0) */
  int64_t R, cols;
  LLVMValueRef g, q, trstart, trend, valid_col, gsmem;
  LLVMValueRef kc[FG_MAX_RANK], kc_lane[16][FG_MAX_RANK], lanes[16];
  LLVMValueRef accv[8][16], tot[8][16];
  col_variance var;
  LLVMValueRef dev[8][16]; /* split: a variance j's slice mean offset a lane */
} col_kernel;

static void column_coordinates(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  ck->kept = 1;
  for (int d = 0; d < k->rank; d++) {
    if (k->mask[d])
      ck->red_sizes[ck->nred++] = k->dims[d];
    else {
      ck->kept_sizes[ck->nkept++] = k->dims[d];
      ck->kept *= k->dims[d];
    }
  }
  int64_t V = e->vec, S = k->split, R = k->red;
  ck->lane_dim = V > 1;
  ck->R = k->col_threads > 1 ? k->col_threads : 1;
  ck->cols = k->block / ck->R;
  /* (%tid.x read first: the order of the single-thread form's PTX) */
  LLVMValueRef col = fgb_thread_index(e, 0);
  LLVMValueRef first = LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, ck->cols), "");
  if (ck->R > 1) { /* thread t: column t % cols of group t / cols (a warp's loads adjacent) */
    ck->g = LLVMBuildUDiv(e->b, col, fgb_const(e, ck->cols), "");
    col = LLVMBuildURem(e->b, col, fgb_const(e, ck->cols), "");
  }
  LLVMValueRef gid = LLVMBuildAdd(e->b, first, col, "");
  ck->base = V > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, V), "") : gid;
  /* over the symbolic size (opt/symbolic.h): the kept extent or the
   * reduced one is T x the rest, a run-time value */
  ck->valid = LLVMBuildICmp(e->b, LLVMIntSLT, ck->base, fgb_extent(e, ck->kept), "");
  ck->basec = LLVMBuildSelect(e->b, ck->valid, ck->base, fgb_const(e, 0), "");
  fgb_delinearize(e, ck->basec, ck->kept_sizes, ck->nkept, ck->kc);
  int nk = ck->nkept;
  for (int j = 0; j < V; j++) {
    ck->lanes[j] = !ck->lane_dim ? NULL
                   : j == 0      ? ck->kc[nk - 1]
                                 : LLVMBuildAdd(e->b, ck->kc[nk - 1], fgb_const(e, j), "");
    memcpy(ck->kc_lane[j], ck->kc, sizeof ck->kc);
    if (ck->lane_dim)
      ck->kc_lane[j][nk - 1] = ck->lanes[j];
  }
  /* slices of ceil(R / S) rows; R is T x the rest over the symbolic size */
  LLVMValueRef Rv = fgb_extent(e, R);
  ck->Rv = Rv;
  if (k->split_formula) {
    /* S chosen at run time (the grid's y, at most k->split): a slice may
     * start past R (S near R / 2), and is empty then */
    ck->split = fgb_nctaid(e->m, 1);
    if (LLVMTypeOf(ck->split) != e->ity)
      ck->split = LLVMBuildZExt(e->b, ck->split, e->ity, "");
    LLVMValueRef rs = LLVMBuildUDiv(
        e->b, LLVMBuildAdd(e->b, Rv, LLVMBuildSub(e->b, ck->split, fgb_const(e, 1), ""), ""),
        ck->split, "");
    ck->rs = rs;
    ck->s = fgb_block_index(e, 1);
    ck->rstart = fgk_imin(e, LLVMBuildMul(e->b, ck->s, rs, ""), Rv);
    ck->rend = fgk_imin(e, LLVMBuildAdd(e->b, ck->rstart, rs, ""), Rv);
    ck->trstart = ck->rstart; /* (one thread a column: col_threads) */
    ck->trend = ck->rend;
    ck->valid_col = ck->valid;
    return;
  }
  LLVMValueRef rs = fgb_ceil_div(e, Rv, S);
  ck->rs = rs;
  ck->s = S > 1 ? fgb_block_index(e, 1) : fgb_const(e, 0);
  ck->rstart = LLVMBuildMul(e->b, ck->s, rs, "");
  ck->rend = fgk_imin(e, LLVMBuildAdd(e->b, ck->rstart, rs, ""), Rv);
  ck->trstart = ck->rstart;
  ck->trend = ck->rend;
  ck->valid_col = ck->valid;
  if (ck->R > 1) { /* the group's q = ceil(rs / R) rows of the slice */
    ck->q = fgb_ceil_div(e, rs, ck->R);
    ck->trstart = LLVMBuildAdd(e->b, ck->rstart, LLVMBuildMul(e->b, ck->g, ck->q, ""), "");
    ck->trend = fgk_imin(e, LLVMBuildAdd(e->b, ck->trstart, ck->q, ""), ck->rend);
  }
}

/* Variance j's total from the thread's (n, K, mean, M2) and its mean's
 * sum (reduction i): unsplit, M2 + n ((K - m) + mean)^2 about the graph's
 * mean m = sum / R; split, the slice's M2 and its mean offset dev about
 * m_s = sum / n (nothing from a slice without rows: 0 x an infinite or
 * NaN offset would be NaN). */
static void variance_totals(fgb_emitter *e, col_kernel *ck, int i, int j) {
  const fg_kernel *k = e->k;
  const col_variance *cv = &ck->var;
  bool sliced = k->split > 1 || ck->R > 1; /* a slice's (or a group's) partial totals */
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  LLVMValueRef cnt = LLVMBuildLoad2(b, f32, cv->cntv, "");
  LLVMValueRef some = LLVMBuildFCmp(b, LLVMRealOGT, cnt, zero, "");
  for (int l = 0; l < e->vec; l++) {
    LLVMValueRef m =
        LLVMBuildFDiv(b, ck->tot[i][l], sliced ? cnt : LLVMConstReal(f32, (double)k->red), "");
    LLVMValueRef dm =
        LLVMBuildFAdd(b, LLVMBuildFSub(b, LLVMBuildLoad2(b, f32, cv->shiftv[j][l], ""), m, ""),
                      LLVMBuildLoad2(b, f32, cv->meanv[j][l], ""), "");
    LLVMValueRef m2 = LLVMBuildLoad2(b, f32, cv->m2v[j][l], "");
    if (sliced) {
      ck->dev[j][l] = LLVMBuildSelect(b, some, dm, zero, "");
      ck->tot[j][l] = m2;
      continue;
    }
    LLVMValueRef t =
        LLVMBuildFAdd(b, m2, LLVMBuildFMul(b, cnt, LLVMBuildFMul(b, dm, dm, ""), ""), "");
    ck->tot[j][l] = LLVMBuildSelect(b, some, t, zero, "");
  }
}

/* The thread's rows: in groups of rows_per_iter (all their loads issued
 * first), then the rest one at a time; the plain variant (misaligned
 * pointers) stays compact: one row. Leaves the totals in ck->tot. */
static bool accumulate_rows(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  for (int i = 0; i < ck->nreds; i++)
    for (int j = 0; j < V; j++)
      ck->accv[i][j] =
          fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])),
                        fgb_reduce_identity(e->m, fgk_red_op(k->reds[i]), fgk_red_acc(k->reds[i])));
  col_variance *cv = &ck->var;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  if (cv->n) {
    cv->cntv = fgk_local_var(e, f32, zero);
    for (int j = 0; j < ck->nreds; j++)
      for (int l = 0; cv->pair[j] == -2 && l < V; l++) {
        cv->shiftv[j][l] = fgk_local_var(e, f32, zero);
        cv->meanv[j][l] = fgk_local_var(e, f32, zero);
        cv->m2v[j][l] = fgk_local_var(e, f32, zero);
      }
  }
  col_rows_ctx cx = {ck->kc,   ck->nkept, ck->lane_dim, ck->lanes, ck->red_sizes,
                     ck->nred, ck->accv,  ck->nreds,    ck->valid, cv};
  int U = k->rows_per_iter > 1 && e->aligned ? k->rows_per_iter : 1;
  LLVMValueRef rmain = ck->trstart;
  if (U > 1) {
    LLVMValueRef cnt = LLVMBuildSub(e->b, ck->trend, ck->trstart, "");
    rmain = LLVMBuildSub(e->b, ck->trend, LLVMBuildSRem(e->b, cnt, fgb_const(e, U), ""), "");
    fgk_loop l;
    LLVMValueRef r = fgk_loop_begin(e, &l, ck->trstart, rmain, fgb_const(e, U));
    if (!col_rows(e, &cx, r, U))
      return false;
    fgk_loop_end(e, &l, r);
  }
  fgk_loop l;
  LLVMValueRef r = fgk_loop_begin(e, &l, rmain, ck->trend, fgb_const(e, 1));
  if (!col_rows(e, &cx, r, 1))
    return false;
  fgk_loop_end(e, &l, r);
  if (e->failed)
    return false;
  for (int i = 0; i < ck->nreds; i++)
    for (int j = 0; j < V && cv->pair[i] != -2; j++)
      ck->tot[i][j] =
          LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])), ck->accv[i][j], "");
  for (int i = 0; i < ck->nreds; i++)
    if (cv->pair[i] >= 0)
      variance_totals(e, ck, i, cv->pair[i]);
  return true;
}

/* The partials' combine loop, shared by every combine of slices (the
 * static split, the split read at run time, a variance's Chan terms):
 * slices lo .. hi - 1 in order, B at a time (every load of a batch issued
 * before any is combined: in-order issue would otherwise wait a memory
 * latency a partial), then the rest one at a time. load(q, s) loads slice
 * s into batch position q; fold(step) combines positions 0 .. step - 1 in
 * order. full = col_slices_full(lo, hi, B); a pass whose constant bounds
 * are empty is left out. */
typedef struct col_slices {
  void (*load)(fgb_emitter *e, void *ctx, int q, LLVMValueRef s);
  void (*fold)(fgb_emitter *e, void *ctx, int step);
  void *ctx;
} col_slices;

static bool is_const(LLVMValueRef v, int64_t *c) {
  if (!LLVMIsAConstantInt(v))
    return false;
  *c = LLVMConstIntGetSExtValue(v);
  return true;
}

/* lo + (hi - lo) / B * B: the end of the batches */
static LLVMValueRef col_slices_full(fgb_emitter *e, LLVMValueRef lo, LLVMValueRef hi, int64_t B) {
  int64_t c;
  bool from0 = is_const(lo, &c) && c == 0;
  LLVMValueRef n = from0 ? hi : LLVMBuildSub(e->b, hi, lo, "");
  LLVMValueRef f =
      LLVMBuildMul(e->b, LLVMBuildUDiv(e->b, n, fgb_const(e, B), ""), fgb_const(e, B), "");
  return from0 ? f : LLVMBuildAdd(e->b, lo, f, "");
}

static void col_slices_run(fgb_emitter *e, const col_slices *cs, LLVMValueRef lo, LLVMValueRef full,
                           LLVMValueRef hi, int64_t B) {
  for (int pass = 0; pass < 2; pass++) {
    int64_t step = pass ? 1 : B, a, z;
    LLVMValueRef from = pass ? full : lo, to = pass ? hi : full;
    if ((pass && B == 1) || (is_const(from, &a) && is_const(to, &z) && a >= z))
      continue; /* (B = 1: full is hi) */
    fgk_loop sl;
    LLVMValueRef si = fgk_loop_begin(e, &sl, from, to, fgb_const(e, step));
    for (int q = 0; q < step; q++)
      cs->load(e, cs->ctx, q, q ? LLVMBuildAdd(e->b, si, fgb_const(e, q), "") : si);
    cs->fold(e, cs->ctx, (int)step);
    fgk_loop_end(e, &sl, si);
  }
}

/* The slices a thread of the last CTA combines: all S of them, or with R
 * threads a column (colthr) its group's ceil(S / R), whose folds the
 * groups then combine in order (group_fold). */
static void combine_range(fgb_emitter *e, const col_kernel *ck, LLVMValueRef *lo,
                          LLVMValueRef *hi) {
  int64_t S = e->k->split;
  if (ck->R <= 1) {
    *lo = fgb_const(e, 0);
    *hi = fgb_const(e, S);
    return;
  }
  int64_t qs = (S + ck->R - 1) / ck->R;
  *lo = fgk_imin(e, LLVMBuildMul(e->b, ck->g, fgb_const(e, qs), ""), fgb_const(e, S));
  *hi = fgk_imin(e, LLVMBuildAdd(e->b, *lo, fgb_const(e, qs), ""), fgb_const(e, S));
}

/* ---- several threads a column (colthr; fg_kernel.col_threads) ----
 * Shared memory of 8-byte slots: row `row` (a reduction, then a
 * variance's mean offsets), group g, the CTA's column, lane l. */
static LLVMValueRef group_slot(fgb_emitter *e, col_kernel *ck, int row, LLVMValueRef g, int l) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  if (!ck->gsmem) {
    char name[256];
    snprintf(name, sizeof name, "fg_colthr_%s", LLVMGetValueName(e->fn));
    int rows = k->nreds + ck->var.n;
    ck->gsmem = fgb_shared_array(e->m, name, (uint64_t)8 * rows * k->block * V);
  }
  LLVMValueRef c = LLVMBuildURem(e->b, fgb_thread_index(e, 0), fgb_const(e, ck->cols), "");
  LLVMValueRef at = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)row * ck->R), g, "");
  at = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, at, fgb_const(e, ck->cols), ""), c, "");
  at = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, at, fgb_const(e, V), ""), fgb_const(e, l), "");
  return fgb_gep(e->m, ck->gsmem, LLVMInt64TypeInContext(e->ctx), at);
}

static void group_store(fgb_emitter *e, col_kernel *ck, int row, const LLVMValueRef *vals) {
  for (int l = 0; l < e->vec; l++)
    LLVMBuildStore(e->b, vals[l], group_slot(e, ck, row, ck->g, l));
}

static LLVMValueRef group_load(fgb_emitter *e, col_kernel *ck, int row, LLVMValueRef g, int l,
                               fg_dtype ad) {
  return LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), group_slot(e, ck, row, g, l), "");
}

/* Every thread of a column gets op over its R groups' vals, in group order
 * (row `row` of the shared memory; the barrier makes them visible). */
static void group_fold(fgb_emitter *e, col_kernel *ck, int row, fg_opcode op, fg_dtype ad,
                       const LLVMValueRef *vals, LLVMValueRef *out) {
  int64_t V = e->vec;
  group_store(e, ck, row, vals);
  fgb_barrier(e->m);
  LLVMValueRef acc[16];
  for (int l = 0; l < V; l++)
    acc[l] = fgk_local_var(e, fgb_reg_type(e->m, ad), fgb_reduce_identity(e->m, op, ad));
  fgk_loop gl;
  LLVMValueRef g = fgk_loop_begin(e, &gl, fgb_const(e, 0), fgb_const(e, ck->R), fgb_const(e, 1));
  for (int l = 0; l < V; l++) {
    LLVMValueRef a = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), acc[l], "");
    LLVMBuildStore(e->b, fgb_reduce_combine(e->m, op, a, group_load(e, ck, row, g, l, ad), ad),
                   acc[l]);
  }
  fgk_loop_end(e, &gl, g);
  for (int l = 0; l < V; l++)
    out[l] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), acc[l], "");
}

/* The groups' totals combined (after accumulate_rows), the same in every
 * thread of a column: each reduction's in group order; a variance j (its
 * mean's sum i) by Chan's formula over the groups, each group's M2_g, sum_g
 * over its n_g rows and mean offset dev_g (variance_totals, sliced):
 * unsplit, about the graph's mean m, M2 = sum_g M2_g + n_g ((m_g - m) +
 * dev_g)^2, m_g = sum_g / n_g (as combine_variance over slices); split,
 * the slice's own (M2, dev) about its m_c = sum / n: with A = sum_g n_g
 * ((m_g - m_c) + dev_g), dev = A / n and M2 = (the sum about m_c) - n
 * dev^2. Afterwards only group 0 writes (ck->valid). */
static void combine_groups(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  const col_variance *cv = &ck->var;
  LLVMBuilderRef b = e->b;
  for (int i = 0; i < ck->nreds; i++)
    if (cv->pair[i] != -2)
      group_fold(e, ck, i, fgk_red_op(k->reds[i]), fgk_red_acc(k->reds[i]), ck->tot[i], ck->tot[i]);
  if (cv->n) {
    for (int j = 0; j < ck->nreds; j++) {
      if (cv->pair[j] != -2)
        continue;
      group_store(e, ck, j, ck->tot[j]);
      group_store(e, ck, ck->nreds + cv->index[j], ck->dev[j]);
    }
    fgb_barrier(e->m);
  }
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  LLVMValueRef len = LLVMBuildSub(b, ck->rend, ck->rstart, "");
  len = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, len, fgb_const(e, 0), ""), len,
                        fgb_const(e, 0), "");
  LLVMValueRef cnt = LLVMBuildSIToFP(b, len, f32, "");
  for (int i = 0; i < ck->nreds; i++) {
    int j = cv->pair[i];
    if (j < 0)
      continue;
    LLVMValueRef m[16], accm[16], acca[16];
    for (int l = 0; l < V; l++) {
      m[l] = LLVMBuildFDiv(b, ck->tot[i][l],
                           k->split > 1 ? cnt : LLVMConstReal(f32, (double)k->red), "");
      accm[l] = fgk_local_var(e, f32, zero);
      acca[l] = fgk_local_var(e, f32, zero);
    }
    fgk_loop gl;
    LLVMValueRef g = fgk_loop_begin(e, &gl, fgb_const(e, 0), fgb_const(e, ck->R), fgb_const(e, 1));
    /* n_g = clamp(rend - (rstart + g q), 0, q) */
    LLVMValueRef left = LLVMBuildSub(
        b, ck->rend, LLVMBuildAdd(b, ck->rstart, LLVMBuildMul(b, g, ck->q, ""), ""), "");
    LLVMValueRef ng = fgk_imin(e, left, ck->q);
    ng = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ng, fgb_const(e, 0), ""), ng,
                         fgb_const(e, 0), "");
    LLVMValueRef n = LLVMBuildSIToFP(b, ng, f32, "");
    LLVMValueRef some = LLVMBuildFCmp(b, LLVMRealOGT, n, zero, "");
    for (int l = 0; l < V; l++) {
      LLVMValueRef sum = group_load(e, ck, i, g, l, FG_F32);
      LLVMValueRef m2 = group_load(e, ck, j, g, l, FG_F32);
      LLVMValueRef dev = group_load(e, ck, ck->nreds + cv->index[j], g, l, FG_F32);
      LLVMValueRef t =
          LLVMBuildFAdd(b, LLVMBuildFSub(b, LLVMBuildFDiv(b, sum, n, ""), m[l], ""), dev, "");
      LLVMValueRef nt = LLVMBuildFMul(b, n, t, "");
      LLVMValueRef term = LLVMBuildFAdd(b, m2, LLVMBuildFMul(b, nt, t, ""), "");
      LLVMValueRef am = LLVMBuildLoad2(b, f32, accm[l], ""),
                   aa = LLVMBuildLoad2(b, f32, acca[l], "");
      LLVMBuildStore(b, LLVMBuildFAdd(b, am, LLVMBuildSelect(b, some, term, zero, ""), ""),
                     accm[l]);
      LLVMBuildStore(b, LLVMBuildFAdd(b, aa, LLVMBuildSelect(b, some, nt, zero, ""), ""), acca[l]);
    }
    fgk_loop_end(e, &gl, g);
    LLVMValueRef somec = LLVMBuildFCmp(b, LLVMRealOGT, cnt, zero, "");
    for (int l = 0; l < V; l++) {
      LLVMValueRef am = LLVMBuildLoad2(b, f32, accm[l], "");
      if (k->split <= 1) {
        ck->tot[j][l] = am;
        continue;
      }
      LLVMValueRef dev = LLVMBuildFDiv(b, LLVMBuildLoad2(b, f32, acca[l], ""), cnt, "");
      LLVMValueRef m2 =
          LLVMBuildFSub(b, am, LLVMBuildFMul(b, cnt, LLVMBuildFMul(b, dev, dev, ""), ""), "");
      ck->tot[j][l] = LLVMBuildSelect(b, somec, m2, zero, "");
      ck->dev[j][l] = LLVMBuildSelect(b, somec, dev, zero, "");
    }
  }
  LLVMValueRef g0 = LLVMBuildICmp(b, LLVMIntEQ, ck->g, fgb_const(e, 0), "");
  ck->valid = LLVMBuildAnd(b, ck->valid_col, g0, "");
}

/* A reduction's partials: slice s's V lanes, then folded in order. */
typedef struct red_slices {
  col_kernel *ck;
  int i;
  fg_dtype ad;
  fg_opcode op;
  LLVMValueRef first; /* the reduction's first row of partials */
  LLVMValueRef got[16][16];
} red_slices;

static void red_slices_load(fgb_emitter *e, void *ctx, int q, LLVMValueRef sq) {
  red_slices *c = ctx;
  LLVMValueRef lv[16];
  LLVMValueRef row = LLVMBuildAdd(e->b, c->first, sq, "");
  col_partial_lanes(e, col_partial_ptr(e, c->ck->kept, row, c->ck->basec, c->ad), c->ad, e->vec, lv,
                    false);
  for (int j = 0; j < e->vec; j++)
    c->got[j][q] = lv[j];
}

static void red_slices_fold(fgb_emitter *e, void *ctx, int step) {
  red_slices *c = ctx;
  for (int j = 0; j < e->vec; j++) {
    LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, c->ad), c->ck->accv[c->i][j], "");
    for (int q = 0; q < step; q++)
      acc = fgb_reduce_combine(e->m, c->op, acc, c->got[j][q], c->ad);
    LLVMBuildStore(e->b, acc, c->ck->accv[c->i][j]);
  }
}

/* A variance's partials: slice s's sum, M2 and mean offset and its count. */
typedef struct var_slices {
  col_kernel *ck;
  int i, j;
  LLVMValueRef m[16];
  LLVMValueRef sum[16][16], m2[16][16], dev[16][16], cnt[16];
} var_slices;

static void var_slices_load(fgb_emitter *e, void *ctx, int q, LLVMValueRef sq) {
  var_slices *c = ctx;
  col_kernel *ck = c->ck;
  LLVMBuilderRef b = e->b;
  int64_t S = e->k->split, V = e->vec;
  LLVMValueRef lv[16];
  int rows[3] = {c->i, c->j, ck->nreds + ck->var.index[c->j]};
  LLVMValueRef(*dst[3])[16] = {c->sum, c->m2, c->dev};
  for (int r = 0; r < 3; r++) {
    LLVMValueRef row = LLVMBuildAdd(b, fgb_const(e, (int64_t)rows[r] * S), sq, "");
    col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->basec, FG_F32), FG_F32, (int)V, lv,
                      false);
    for (int l = 0; l < V; l++)
      dst[r][l][q] = lv[l];
  }
  /* n_s = clamp(R - s rs, 0, rs) */
  LLVMValueRef left = LLVMBuildSub(b, ck->Rv, LLVMBuildMul(b, sq, ck->rs, ""), "");
  LLVMValueRef ns = fgk_imin(e, left, ck->rs);
  ns = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ns, fgb_const(e, 0), ""), ns,
                       fgb_const(e, 0), "");
  c->cnt[q] = LLVMBuildSIToFP(b, ns, LLVMFloatTypeInContext(e->ctx), "");
}

static void var_slices_fold(fgb_emitter *e, void *ctx, int step) {
  var_slices *c = ctx;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  for (int l = 0; l < e->vec; l++) {
    LLVMValueRef acc = LLVMBuildLoad2(b, f32, c->ck->accv[c->j][l], "");
    for (int q = 0; q < step; q++) {
      LLVMValueRef ms = LLVMBuildFDiv(b, c->sum[l][q], c->cnt[q], "");
      LLVMValueRef t = LLVMBuildFAdd(b, LLVMBuildFSub(b, ms, c->m[l], ""), c->dev[l][q], "");
      LLVMValueRef term = LLVMBuildFAdd(
          b, c->m2[l][q], LLVMBuildFMul(b, c->cnt[q], LLVMBuildFMul(b, t, t, ""), ""), "");
      LLVMValueRef some = LLVMBuildFCmp(b, LLVMRealOGT, c->cnt[q], zero, "");
      acc = LLVMBuildFAdd(b, acc, LLVMBuildSelect(b, some, term, zero, ""), "");
    }
    LLVMBuildStore(b, acc, c->ck->accv[c->j][l]);
  }
}

/* Variance j's total over the slices (the last CTA; its mean's total
 * already in ck->tot): for each slice s in order, M2_s + n_s ((m_s - m) +
 * dev_s)^2 with m_s = sum_s / n_s (the bits the slice computed) and m =
 * sum / R, the graph's mean; B slices' partials loaded before any is
 * used; with R threads a column, each group's slices, then the groups'
 * sums in order. */
static void combine_variance(fgb_emitter *e, col_kernel *ck, int j, int64_t B) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  var_slices c = {.ck = ck, .j = j};
  while (ck->var.pair[c.i] != j)
    c.i++;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  for (int l = 0; l < V; l++) {
    c.m[l] = LLVMBuildFDiv(b, ck->tot[c.i][l], LLVMConstReal(f32, (double)k->red), "");
    LLVMBuildStore(b, zero, ck->accv[j][l]);
  }
  if (B > 16)
    B = 16;
  LLVMValueRef lo, hi;
  combine_range(e, ck, &lo, &hi);
  col_slices cs = {var_slices_load, var_slices_fold, &c};
  col_slices_run(e, &cs, lo, col_slices_full(e, lo, hi, B), hi, B);
  for (int l = 0; l < V; l++)
    ck->tot[j][l] = LLVMBuildLoad2(b, f32, ck->accv[j][l], "");
  if (ck->R > 1)
    group_fold(e, ck, j, fgk_red_op(k->reds[j]), FG_F32, ck->tot[j], ck->tot[j]);
}

/* Partials a thread of the last CTA loads before it combines any: B * V
 * values in flight, as vector loads (knob COL_COMBINE: k->combine_batch). */
static int64_t combine_batch(const fgb_emitter *e) {
  int64_t B = (e->aligned ? COL_COMBINE_VALUES : 8) / e->vec;
  if (B > 16)
    B = 16;
  if (B < 1)
    B = 1;
  if (e->k->combine_batch > 0)
    B = e->k->combine_batch;
  return B;
}

/* Sets reduction i's accumulators (V lanes) to its identity: the fold of
 * the partials starts from there. */
static void acc_reset(fgb_emitter *e, col_kernel *ck, int i) {
  const fg_node *n = e->k->reds[i];
  for (int j = 0; j < e->vec; j++)
    LLVMBuildStore(e->b, fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)), ck->accv[i][j]);
}

/* split > 1: each CTA writes its totals as partials; the last of the
 * tile's CTAs to arrive combines them in order (col_slices_run). Returns
 * the block the caller closes after the stores (the last CTA's branch). */
static LLVMBasicBlockRef combine_partials(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec, S = k->split;
  LLVMBasicBlockRef merge = fgb_begin_if(e, ck->valid);
  for (int i = 0; i < ck->nreds; i++) {
    LLVMValueRef row = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * S), ck->s, "");
    col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->base, fgk_red_acc(k->reds[i])),
                      fgk_red_acc(k->reds[i]), (int)V, ck->tot[i], true);
    if (ck->var.index[i] < 0)
      continue;
    row = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)(ck->nreds + ck->var.index[i]) * S), ck->s, "");
    col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->base, FG_F32), FG_F32, (int)V,
                      ck->dev[i], true);
  }
  fgb_end_if(e, merge);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef counters = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->counter_temp});
  LLVMValueRef cptr = fgb_gep_global(e->m, counters, i32, fgb_block_index(e, 0));
  LLVMValueRef last = fgk_arrive(e, cptr, (int)S);
  LLVMBasicBlockRef done = fgb_begin_if(e, last);
  fgb_fence_gpu(e->m);
  for (int i = 0; i < ck->nreds; i++) {
    const fg_node *n = k->reds[i];
    fg_dtype ad = fgk_red_acc(n);
    acc_reset(e, ck, i);
    int64_t B = combine_batch(e);
    if (ck->var.pair[i] == -2) {
      combine_variance(e, ck, i, k->combine_batch > 0 || B < 3 ? B : B / 3);
      continue;
    }
    LLVMValueRef lo, hi;
    combine_range(e, ck, &lo, &hi);
    red_slices c = {ck, i, ad, fgk_red_op(n), fgb_const(e, (int64_t)i * S), {{0}}};
    col_slices cs = {red_slices_load, red_slices_fold, &c};
    col_slices_run(e, &cs, lo, col_slices_full(e, lo, hi, B), hi, B);
    for (int j = 0; j < V; j++)
      ck->tot[i][j] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), ck->accv[i][j], "");
    if (ck->R > 1)
      group_fold(e, ck, i, fgk_red_op(n), ad, ck->tot[i], ck->tot[i]);
  }
  fgk_reset_counter(e, cptr);
  return done;
}

/* combine_partials with the split S read at run time (%nctaid.y): with S
 * = 1 (many tiles) a CTA keeps its totals and writes no partials, else as
 * combine_partials, the loops bounded by S. */
static LLVMBasicBlockRef combine_partials_runtime(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  LLVMTypeRef i1 = LLVMInt1TypeInContext(e->ctx), i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef S = ck->split;
  LLVMValueRef multi = LLVMBuildICmp(e->b, LLVMIntUGT, S, fgb_const(e, 1), "");
  LLVMValueRef last_var = fgk_local_var(e, i1, LLVMConstInt(i1, 1, 0));
  LLVMValueRef counters = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->counter_temp});
  LLVMValueRef cptr = fgb_gep_global(e->m, counters, i32, fgb_block_index(e, 0));
  /* (multi is the same for every thread of the CTA: the arrival's
   * barriers are reached by all or none) */
  LLVMBasicBlockRef mb = fgb_begin_if(e, multi);
  LLVMBasicBlockRef merge = fgb_begin_if(e, ck->valid);
  for (int i = 0; i < ck->nreds; i++) {
    LLVMValueRef row = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_const(e, i), S, ""), ck->s, "");
    col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->base, fgk_red_acc(k->reds[i])),
                      fgk_red_acc(k->reds[i]), (int)V, ck->tot[i], true);
  }
  fgb_end_if(e, merge);
  LLVMValueRef s32 = LLVMBuildTrunc(e->b, S, i32, "");
  LLVMBuildStore(e->b, fgk_arrive_n(e, cptr, LLVMBuildSub(e->b, s32, LLVMConstInt(i32, 1, 0), "")),
                 last_var);
  fgb_end_if(e, mb);
  LLVMBasicBlockRef done = fgb_begin_if(e, LLVMBuildLoad2(e->b, i1, last_var, ""));
  mb = fgb_begin_if(e, multi);
  fgb_fence_gpu(e->m);
  for (int i = 0; i < ck->nreds; i++) {
    const fg_node *n = k->reds[i];
    fg_dtype ad = fgk_red_acc(n);
    acc_reset(e, ck, i);
    int64_t B = combine_batch(e);
    LLVMValueRef lo = fgb_const(e, 0), full = col_slices_full(e, lo, S, B);
    red_slices c = {ck, i, ad, fgk_red_op(n), LLVMBuildMul(e->b, fgb_const(e, i), S, ""), {{0}}};
    col_slices cs = {red_slices_load, red_slices_fold, &c};
    col_slices_run(e, &cs, lo, full, S, B);
  }
  fgk_reset_counter(e, cptr);
  fgb_end_if(e, mb);
  for (int i = 0; i < ck->nreds; i++)
    for (int j = 0; j < V; j++)
      ck->tot[i][j] =
          LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])), ck->accv[i][j], "");
  return done;
}

/* The totals seed the reductions; the row-shaped outputs, one a lane. */
static bool store_results(fgb_emitter *e, col_kernel *ck) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec;
  for (int i = 0; i < ck->nreds; i++)
    for (int j = 0; j < V; j++)
      fgk_seed_reduction(e, k->reds[i], ck->kc_lane[j], ck->tot[i][j]);
  e->nuniform = 0;
  for (int i = 0; i < ck->nkept - (ck->lane_dim ? 1 : 0); i++)
    e->uniform[e->nuniform++] = ck->kc[i];
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
      continue;
    LLVMValueRef vals[16], idx[FG_MAX_RANK];
    for (int j = 0; j < V; j++) {
      fgk_row_index(e, o, ck->kc_lane[j], idx);
      vals[j] = fgb_emit_value(e, o, idx);
      if (!vals[j])
        return false;
    }
    LLVMBasicBlockRef merge = fgb_begin_if(e, ck->valid);
    fgk_row_index(e, o, ck->kc_lane[0], idx);
    if (o->type.rank > 0 && ck->lane_dim)
      fgb_emit_store_lanes(e, o, idx, vals);
    else
      fgb_emit_store(e, o, idx, vals[0]);
    fgb_end_if(e, merge);
  }
  return true;
}

/* Threads own V adjacent outputs and loop over the reduced extent (split
 * over CTAs whose partials the last to arrive combines). */
bool fgb_emit_column_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->nreds > 8) {
    fgb_fail(e, "column kernel with more than 8 reductions");
    return false;
  }
  col_kernel ck;
  memset(&ck, 0, sizeof ck);
  ck.nreds = k->nreds;
  find_variances(k, &ck.var);
  column_coordinates(e, &ck);
  if (!accumulate_rows(e, &ck))
    return false;
  if (ck.R > 1 && k->split_formula) {
    fgb_fail(e, "internal: several threads a column with a split chosen at run time");
    return false;
  }
  if (ck.R > 1)
    combine_groups(e, &ck);
  LLVMBasicBlockRef done = k->split_formula ? combine_partials_runtime(e, &ck)
                           : k->split > 1   ? combine_partials(e, &ck)
                                            : NULL;
  if (!store_results(e, &ck))
    return false;
  if (done)
    fgb_end_if(e, done);
  return !e->failed;
}
