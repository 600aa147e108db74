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
        fgb_prefetch_value(e, k->reds[i]->in[0], idx);
      for (int i = 0; i < k->nouts; i++)
        if (fgb_is_full(e, k->outs[i]) && !fgk_is_reduction_result(k->outs[i]))
          fgb_prefetch_value(e, k->outs[i], idx);
    }
  }
  for (int u = 0; u < U; u++) {
    col_row_enter(e, cx, rc[u]);
    for (int i = 0; i < cx->nreds; i++) {
      const fg_node *n = k->reds[i];
      fg_dtype ad = fgk_red_acc(n);
      for (int j = 0; j < V; j++) {
        LLVMValueRef idx[FG_MAX_RANK];
        fgk_lane_index(e, idx0[u], j, idx);
        LLVMValueRef x = fgb_emit_value(e, n->in[0], idx);
        if (!x)
          return false;
        x = fgb_convert(e->m, x, n->in[0]->type.dtype, ad);
        LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), cx->accv[i][j], "");
        LLVMBuildStore(e->b, fgb_reduce_combine(e->m, fgk_red_op(n), acc, x, ad), cx->accv[i][j]);
      }
    }
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
  LLVMValueRef base, basec, valid, s, rstart, rend;
  LLVMValueRef split; /* split at run time (fg_kernel.split_formula): %nctaid.y, else NULL */
  LLVMValueRef kc[FG_MAX_RANK], kc_lane[16][FG_MAX_RANK], lanes[16];
  LLVMValueRef accv[8][16], tot[8][16];
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
  if (k->split_formula) {
    /* S chosen at run time (the grid's y, at most k->split): a slice may
     * start past R (S near R / 2), and is empty then */
    ck->split = fgb_nctaid(e->m, 1);
    if (LLVMTypeOf(ck->split) != e->ity)
      ck->split = LLVMBuildZExt(e->b, ck->split, e->ity, "");
    LLVMValueRef rs = LLVMBuildUDiv(
        e->b, LLVMBuildAdd(e->b, Rv, LLVMBuildSub(e->b, ck->split, fgb_const(e, 1), ""), ""),
        ck->split, "");
    ck->s = fgb_block_index(e, 1);
    ck->rstart = fgk_imin(e, LLVMBuildMul(e->b, ck->s, rs, ""), Rv);
    ck->rend = fgk_imin(e, LLVMBuildAdd(e->b, ck->rstart, rs, ""), Rv);
    return;
  }
  LLVMValueRef rs = fgb_ceil_div(e, Rv, S);
  ck->s = S > 1 ? fgb_block_index(e, 1) : fgb_const(e, 0);
  ck->rstart = LLVMBuildMul(e->b, ck->s, rs, "");
  ck->rend = fgk_imin(e, LLVMBuildAdd(e->b, ck->rstart, rs, ""), Rv);
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
  col_rows_ctx cx = {ck->kc,   ck->nkept, ck->lane_dim, ck->lanes, ck->red_sizes,
                     ck->nred, ck->accv,  ck->nreds,    ck->valid};
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
    for (int j = 0; j < V; j++)
      ck->tot[i][j] =
          LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])), ck->accv[i][j], "");
  return true;
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
