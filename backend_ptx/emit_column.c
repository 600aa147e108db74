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
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
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
    return;
  }
  LLVMValueRef rs = fgb_ceil_div(e, Rv, S);
  ck->rs = rs;
  ck->s = S > 1 ? fgb_block_index(e, 1) : fgb_const(e, 0);
  ck->rstart = LLVMBuildMul(e->b, ck->s, rs, "");
  ck->rend = fgk_imin(e, LLVMBuildAdd(e->b, ck->rstart, rs, ""), Rv);
}

/* Variance j's total from the thread's (n, K, mean, M2) and its mean's
 * sum (reduction i): unsplit, M2 + n ((K - m) + mean)^2 about the graph's
 * mean m = sum / R; split, the slice's M2 and its mean offset dev about
 * m_s = sum / n (nothing from a slice without rows: 0 x an infinite or
 * NaN offset would be NaN). */
static void variance_totals(fgb_emitter *e, col_kernel *ck, int i, int j) {
  const fg_kernel *k = e->k;
  const col_variance *cv = &ck->var;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0);
  LLVMValueRef cnt = LLVMBuildLoad2(b, f32, cv->cntv, "");
  LLVMValueRef some = LLVMBuildFCmp(b, LLVMRealOGT, cnt, zero, "");
  for (int l = 0; l < e->vec; l++) {
    LLVMValueRef m = LLVMBuildFDiv(b, ck->tot[i][l],
                                   k->split > 1 ? cnt : LLVMConstReal(f32, (double)k->red), "");
    LLVMValueRef dm =
        LLVMBuildFAdd(b, LLVMBuildFSub(b, LLVMBuildLoad2(b, f32, cv->shiftv[j][l], ""), m, ""),
                      LLVMBuildLoad2(b, f32, cv->meanv[j][l], ""), "");
    LLVMValueRef m2 = LLVMBuildLoad2(b, f32, cv->m2v[j][l], "");
    if (k->split > 1) {
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
  LLVMValueRef rmain = ck->rstart;
  if (U > 1) {
    LLVMValueRef cnt = LLVMBuildSub(e->b, ck->rend, ck->rstart, "");
    rmain = LLVMBuildSub(e->b, ck->rend, LLVMBuildSRem(e->b, cnt, fgb_const(e, U), ""), "");
    fgk_loop l;
    LLVMValueRef r = fgk_loop_begin(e, &l, ck->rstart, rmain, fgb_const(e, U));
    if (!col_rows(e, &cx, r, U))
      return false;
    fgk_loop_end(e, &l, r);
  }
  fgk_loop l;
  LLVMValueRef r = fgk_loop_begin(e, &l, rmain, ck->rend, fgb_const(e, 1));
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

/* Variance j's total over the slices (the last CTA; its mean's total
 * already in ck->tot): for each slice s in order, M2_s + n_s ((m_s - m) +
 * dev_s)^2 with m_s = sum_s / n_s (the bits the slice computed) and m =
 * sum / R, the graph's mean; B slices' partials loaded before any is
 * used. */
static void combine_variance(fgb_emitter *e, col_kernel *ck, int j, int64_t B) {
  const fg_kernel *k = e->k;
  int64_t V = e->vec, S = k->split;
  int i = 0;
  while (ck->var.pair[i] != j)
    i++;
  LLVMBuilderRef b = e->b;
  LLVMTypeRef f32 = LLVMFloatTypeInContext(e->ctx);
  LLVMValueRef zero = LLVMConstReal(f32, 0.0), m[16];
  for (int l = 0; l < V; l++) {
    m[l] = LLVMBuildFDiv(b, ck->tot[i][l], LLVMConstReal(f32, (double)k->red), "");
    LLVMBuildStore(b, zero, ck->accv[j][l]);
  }
  if (B > 16)
    B = 16;
  int64_t full = S / B * B;
  for (int pass = 0; pass < 2; pass++) {
    int64_t lo = pass ? full : 0, hi = pass ? S : full, step = pass ? 1 : B;
    if (lo >= hi)
      continue;
    fgk_loop sl;
    LLVMValueRef si =
        fgk_loop_begin(e, &sl, fgb_const(e, lo), fgb_const(e, hi), fgb_const(e, step));
    LLVMValueRef sum[16][16], m2[16][16], dev[16][16], cnt[16], lv[16];
    for (int q = 0; q < step; q++) {
      LLVMValueRef sq = q ? LLVMBuildAdd(b, si, fgb_const(e, q), "") : si;
      int rows[3] = {i, j, ck->nreds + ck->var.index[j]};
      LLVMValueRef(*dst[3])[16] = {sum, m2, dev};
      for (int r = 0; r < 3; r++) {
        LLVMValueRef row = LLVMBuildAdd(b, fgb_const(e, (int64_t)rows[r] * S), sq, "");
        col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->basec, FG_F32), FG_F32, (int)V,
                          lv, false);
        for (int l = 0; l < V; l++)
          dst[r][l][q] = lv[l];
      }
      /* n_s = clamp(R - s rs, 0, rs) */
      LLVMValueRef left = LLVMBuildSub(b, ck->Rv, LLVMBuildMul(b, sq, ck->rs, ""), "");
      LLVMValueRef ns = fgk_imin(e, left, ck->rs);
      ns = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ns, fgb_const(e, 0), ""), ns,
                           fgb_const(e, 0), "");
      cnt[q] = LLVMBuildSIToFP(b, ns, f32, "");
    }
    for (int l = 0; l < V; l++) {
      LLVMValueRef acc = LLVMBuildLoad2(b, f32, ck->accv[j][l], "");
      for (int q = 0; q < step; q++) {
        LLVMValueRef ms = LLVMBuildFDiv(b, sum[l][q], cnt[q], "");
        LLVMValueRef t = LLVMBuildFAdd(b, LLVMBuildFSub(b, ms, m[l], ""), dev[l][q], "");
        LLVMValueRef term = LLVMBuildFAdd(
            b, m2[l][q], LLVMBuildFMul(b, cnt[q], LLVMBuildFMul(b, t, t, ""), ""), "");
        LLVMValueRef some = LLVMBuildFCmp(b, LLVMRealOGT, cnt[q], zero, "");
        acc = LLVMBuildFAdd(b, acc, LLVMBuildSelect(b, some, term, zero, ""), "");
      }
      LLVMBuildStore(b, acc, ck->accv[j][l]);
    }
    fgk_loop_end(e, &sl, si);
  }
  for (int l = 0; l < V; l++)
    ck->tot[j][l] = LLVMBuildLoad2(b, f32, ck->accv[j][l], "");
}

/* split > 1: each CTA writes its totals as partials; the last of the
 * tile's CTAs to arrive combines them in order (partials s..s+B-1 loaded
 * before any is combined: in-order issue would otherwise wait a memory
 * latency a partial; B * V values in flight, as vector loads). Returns the
 * block the caller closes after the stores (the last CTA's branch). */
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
    for (int j = 0; j < V; j++)
      LLVMBuildStore(e->b, fgb_reduce_identity(e->m, fgk_red_op(n), ad), ck->accv[i][j]);
    int64_t B = (e->aligned ? COL_COMBINE_VALUES : 8) / V;
    if (B > 16)
      B = 16;
    if (B < 1)
      B = 1;
    if (k->combine_batch > 0)
      B = k->combine_batch;
    if (ck->var.pair[i] == -2) {
      combine_variance(e, ck, i, k->combine_batch > 0 || B < 3 ? B : B / 3);
      continue;
    }
    int64_t full = S / B * B;
    for (int pass = 0; pass < 2; pass++) {
      int64_t lo = pass ? full : 0, hi = pass ? S : full, step = pass ? 1 : B;
      if (lo >= hi)
        continue;
      fgk_loop sl;
      LLVMValueRef si =
          fgk_loop_begin(e, &sl, fgb_const(e, lo), fgb_const(e, hi), fgb_const(e, step));
      LLVMValueRef got[16][16], lv[16];
      for (int q = 0; q < step; q++) {
        LLVMValueRef sq = q ? LLVMBuildAdd(e->b, si, fgb_const(e, q), "") : si;
        LLVMValueRef row = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * S), sq, "");
        col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->basec, ad), ad, (int)V, lv,
                          false);
        for (int j = 0; j < V; j++)
          got[j][q] = lv[j];
      }
      for (int j = 0; j < V; j++) {
        LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), ck->accv[i][j], "");
        for (int q = 0; q < step; q++)
          acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, got[j][q], ad);
        LLVMBuildStore(e->b, acc, ck->accv[i][j]);
      }
      fgk_loop_end(e, &sl, si);
    }
    for (int j = 0; j < V; j++)
      ck->tot[i][j] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), ck->accv[i][j], "");
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
    for (int j = 0; j < V; j++)
      LLVMBuildStore(e->b, fgb_reduce_identity(e->m, fgk_red_op(n), ad), ck->accv[i][j]);
    int64_t B = (e->aligned ? COL_COMBINE_VALUES : 8) / V;
    if (B > 16)
      B = 16;
    if (B < 1)
      B = 1;
    if (k->combine_batch > 0)
      B = k->combine_batch;
    LLVMValueRef full =
        LLVMBuildMul(e->b, LLVMBuildUDiv(e->b, S, fgb_const(e, B), ""), fgb_const(e, B), "");
    LLVMValueRef first = LLVMBuildMul(e->b, fgb_const(e, i), S, "");
    for (int pass = 0; pass < 2; pass++) {
      int64_t step = pass ? 1 : B;
      if (pass && B == 1) /* (full is S) */
        continue;
      fgk_loop sl;
      LLVMValueRef si = fgk_loop_begin(e, &sl, pass ? full : fgb_const(e, 0), pass ? S : full,
                                       fgb_const(e, step));
      LLVMValueRef got[16][16], lv[16];
      for (int q = 0; q < step; q++) {
        LLVMValueRef sq = q ? LLVMBuildAdd(e->b, si, fgb_const(e, q), "") : si;
        LLVMValueRef row = LLVMBuildAdd(e->b, first, sq, "");
        col_partial_lanes(e, col_partial_ptr(e, ck->kept, row, ck->basec, ad), ad, (int)V, lv,
                          false);
        for (int j = 0; j < V; j++)
          got[j][q] = lv[j];
      }
      for (int j = 0; j < V; j++) {
        LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), ck->accv[i][j], "");
        for (int q = 0; q < step; q++)
          acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, got[j][q], ad);
        LLVMBuildStore(e->b, acc, ck->accv[i][j]);
      }
      fgk_loop_end(e, &sl, si);
    }
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
  LLVMBasicBlockRef done = k->split_formula ? combine_partials_runtime(e, &ck)
                           : k->split > 1   ? combine_partials(e, &ck)
                                            : NULL;
  if (!store_results(e, &ck))
    return false;
  if (done)
    fgb_end_if(e, done);
  return !e->failed;
}
