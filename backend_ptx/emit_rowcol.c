/* The row + column form of a row kernel (plan.h, schedule.c): row
 * reductions and their normalization outputs, plus reductions over the
 * rows (a weight gradient's column sums, a tensor-wide amax), in one pass
 * over the data.
 *
 * Rows come in groups of U (k->rows_per_iter); CTA g of G handles groups
 * g, g+G, ...: the loads of a group's rows are issued together, their
 * block reductions share one barrier, and each row stays in registers as
 * in the persistent row kernel (or, with k->reload, is read again from L1
 * for the outputs instead of keeping its intermediates). Each thread adds
 * its columns of every row to accumulators kept in registers across rows
 * (a thread owns the same columns in every row). Then every CTA writes
 * its partials ([G, R] per column reduction, one value per tail
 * reduction; in clusters, k->cluster > 1, the cluster's CTAs first sum
 * theirs in distributed shared memory and write one row of partials per
 * cluster), fences, and takes a ticket from the arrival counter: after
 * its rows, or with k->early_arrive from inside its last row group, once
 * the column sums are complete. The CTAs with the last `combiners` tickets
 * wait until all G have arrived and combine: combiner 0 the tail
 * reductions (when there are any), the others a column block each (more
 * where there are fewer combiners than blocks), summing the partials of
 * each column in a fixed order (16-byte vectors, thread groups over rows
 * g = q, q+NG, ..., then the groups in order), so results are bitwise
 * reproducible and independent of which CTA combines. Waiting needs all
 * G CTAs resident at once (the schedule sizes G and .minnctapersm for it;
 * the plan's kernel-resident line has the loader refuse a GPU that holds
 * fewer, which would otherwise hang).
 * The arrival counter is 64 bits and only grows (run n's arrivals take it
 * from n * G to (n + 1) * G), so back-to-back runs and CUDA-graph replays
 * need no reset. */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"
#include "rowcol_partials.h"

enum { MAX_ROWS = 4, LOADS_IN_FLIGHT = 32, COMBINE_VECTORS = 4, COMBINE_GROUPS = 32 };

static LLVMValueRef load_volatile(fgb_emitter *e, LLVMTypeRef t, LLVMValueRef ptr) {
  /* other CTAs wrote it: never a stale L1 line */
  LLVMValueRef ld = LLVMBuildLoad2(e->b, t, ptr, "");
  LLVMSetVolatile(ld, 1);
  return ld;
}

static void store_volatile(fgb_emitter *e, LLVMValueRef v, LLVMValueRef ptr) {
  LLVMSetVolatile(LLVMBuildStore(e->b, v, ptr), 1);
}

static LLVMValueRef is_thread0(fgb_emitter *e) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  return LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
}

/* Knob TRACE: thread 0 records %globaltimer at point pt of its CTA's
 * timeline (8 u64 a CTA, after the partials). */
static void trace_point(fgb_emitter *e, int pt) {
  if (e->k->trace_off <= 0)
    return;
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx), i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMBasicBlockRef m = fgb_begin_if(e, is_thread0(e));
  LLVMTypeRef fty = LLVMFunctionType(i64, NULL, 0, 0);
  LLVMValueRef gt = LLVMGetInlineAsm(fty, (char *)"mov.u64 $0, %globaltimer;", 25, (char *)"=l", 2,
                                     1, 0, LLVMInlineAsmDialectATT, 0);
  LLVMValueRef t = LLVMBuildCall2(e->b, fty, gt, NULL, 0, "");
  LLVMValueRef cta = LLVMBuildIntCast2(e->b, fgb_block_index(e, 0), i64, 0, "");
  LLVMValueRef off =
      LLVMBuildAdd(e->b, LLVMConstInt(i64, (unsigned long long)(e->k->trace_off + 8 * pt), 0),
                   LLVMBuildMul(e->b, cta, LLVMConstInt(i64, 64, 0), ""), "");
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->partial_temp});
  store_volatile(e, t, fgb_gep_global(e->m, base, i8, off));
  fgb_end_if(e, m);
}

/* The index of a value shaped like one row (a column reduction's result
 * or a value computed from it) at reduced coordinates rc. */
static void col_index(fgb_emitter *e, const fg_value *o, const LLVMValueRef *redc,
                      LLVMValueRef *idx) {
  int j = 0;
  for (int d = 0, b = 0; d < e->k->rank; d++) {
    if (e->k->mask[d])
      idx[j++] = redc[b++];
    else if (o->type.rank == e->k->rank)
      idx[j++] = fgb_const(e, 0);
  }
}

static void zero_index(fgb_emitter *e, const fg_value *o, LLVMValueRef *idx) {
  for (int d = 0; d < o->type.rank; d++)
    idx[d] = fgb_const(e, 0);
}

/* Output indices for the combine phases: at column coordinates redc, or
 * the single element of a tail result. */
static void col_out_index(fgb_emitter *e, const fg_value *o, const void *redc, LLVMValueRef *idx) {
  col_index(e, o, redc, idx);
}

static void tail_out_index(fgb_emitter *e, const fg_value *o, const void *unused,
                           LLVMValueRef *idx) {
  (void)unused;
  zero_index(e, o, idx);
}

static void row_chunks(fgb_emitter *e, fgk_row_ctx *rc, const LLVMValueRef *r0,
                       const LLVMValueRef *valid, fgk_chunks *ch) {
  ch->n = e->k->chunks;
  for (int c = 0; c < ch->n; c++) {
    fgk_row_chunk(e, rc, r0[c], ch->idx0[c]);
    fgk_chunks_save(e, ch, c, valid[c]);
  }
}

/* Issues every load a row needs, before any row of the group is used. */
static void prefetch_row(fgb_emitter *e, const fgk_chunks *ch) {
  const fg_kernel *k = e->k;
  for (int c = 0; c < ch->n; c++) {
    fgk_chunks_enter(e, ch, c);
    for (int j = 0; j < e->vec; j++) {
      LLVMValueRef idx[FG_MAX_RANK];
      fgk_lane_index(e, ch->idx0[c], j, idx);
      for (int i = 0; i < k->nreds; i++)
        fgb_prefetch_value(e, k->reds[i]->in[0], idx);
      for (int i = 0; i < k->ncols; i++)
        fgb_prefetch_value(e, k->cols[i]->in[0], idx);
      for (int i = 0; i < k->nouts; i++)
        if (fgb_is_full(e, k->outs[i]) && !fgk_is_reduction_result(k->outs[i]))
          fgb_prefetch_value(e, k->outs[i], idx);
    }
  }
}

/* Whether v, as computed in this kernel, uses any of reductions l[0..n). */
static bool uses_walk(fgb_emitter *e, const fg_value *v, fg_node *const *l, int n,
                      unsigned char *seen) {
  if (seen[v->id] || fg_plan_in_memory(e->p, v, e->k->id) || !v->def)
    return false;
  seen[v->id] = 1;
  for (int i = 0; i < n; i++)
    if (v->def == l[i])
      return true;
  for (int i = 0; i < v->def->nin; i++)
    if (uses_walk(e, v->def->in[i], l, n, seen))
      return true;
  return false;
}

static bool uses_any(fgb_emitter *e, const fg_value *v, fg_node *const *l, int n) {
  unsigned char *seen = calloc((size_t)e->p->g->next_value_id, 1);
  if (!seen)
    return true;
  bool r = uses_walk(e, v, l, n, seen);
  free(seen);
  return r;
}

/* Whether reduction n accumulates in bf16 pairs (k->pack_bf16, schedule.c). */
static bool packed(const fgb_emitter *e, const fg_node *n) {
  return e->k->pack_bf16 && e->vec % 2 == 0 && fgb_bf16x2_ok(e->m, fgk_red_op(n)) &&
         n->in[0]->type.dtype == FG_BF16 && fgk_red_acc(n) == FG_F32;
}

/* Lanes j and j + 1 of bf16 value v in chunk c as a pair: abs and neg
 * of a bf16 value on the pair's bits (one and / xor for two lanes; the
 * loaded pair then packs back into the word it was loaded as), anything
 * else computed a lane at a time and packed. */
static LLVMValueRef packed_value(fgb_emitter *e, const fg_value *v, const fgk_chunks *ch, int c,
                                 int j) {
  const fg_node *d = v->def;
  if (d && !fg_plan_in_memory(e->p, v, e->k->id) && d->nin == 1 &&
      d->in[0]->type.dtype == FG_BF16 && (d->op->code == FG_OP_ABS || d->op->code == FG_OP_NEG)) {
    LLVMValueRef p = packed_value(e, d->in[0], ch, c, j);
    if (!p)
      return NULL;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    LLVMValueRef w = LLVMBuildBitCast(e->b, p, i32, "");
    w = d->op->code == FG_OP_ABS ? LLVMBuildAnd(e->b, w, LLVMConstInt(i32, 0x7fff7fffu, 0), "")
                                 : LLVMBuildXor(e->b, w, LLVMConstInt(i32, 0x80008000u, 0), "");
    return LLVMBuildBitCast(e->b, w, LLVMTypeOf(p), "");
  }
  LLVMValueRef x[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef idx[FG_MAX_RANK];
    fgk_lane_index(e, ch->idx0[c], j + h, idx);
    if (!(x[h] = fgb_emit_value(e, v, idx)))
      return NULL;
  }
  return fgb_bf16x2_pack(e->m, x[0], x[1]);
}

/* Lanes j and j + 1 of n's input in the current chunk, as a bf16 pair
 * (the identity where the chunk is past the row's end). */
static LLVMValueRef packed_input(fgb_emitter *e, const fg_node *n, const fgk_chunks *ch, int c,
                                 int j) {
  LLVMValueRef v = packed_value(e, n->in[0], ch, c, j);
  if (!v)
    return NULL;
  return ch->valid[c]
             ? LLVMBuildSelect(e->b, ch->valid[c], v, fgb_bf16x2_identity(e->m, fgk_red_op(n)), "")
             : v;
}

static LLVMValueRef packed_row(fgb_emitter *e, const fgk_chunks *ch, const fg_node *n) {
  fg_opcode op = fgk_red_op(n);
  LLVMValueRef acc = fgb_bf16x2_identity(e->m, op);
  for (int c = 0; c < ch->n; c++) {
    fgk_chunks_enter(e, ch, c);
    for (int j = 0; j < e->vec; j += 2) {
      LLVMValueRef x = packed_input(e, n, ch, c, j);
      if (!x)
        return NULL;
      acc = fgb_bf16x2_combine(e->m, op, acc, x);
    }
  }
  return fgb_reduce_combine(e->m, op, fgb_bf16x2_unpack(e->m, acc, 0),
                            fgb_bf16x2_unpack(e->m, acc, 1), FG_F32);
}

/* A row's reductions first..end-1, accumulated over its chunks (block-
 * reduced by the caller, all rows of the group together). */
static bool row_reductions(fgb_emitter *e, const fgk_chunks *ch, int first, int end,
                           LLVMValueRef *acc) {
  const fg_kernel *k = e->k;
  for (int i = first; i < end; i++) {
    const fg_node *n = k->reds[i];
    LLVMValueRef a = packed(e, n)
                         ? packed_row(e, ch, n)
                         : fgk_chunks_accumulate(
                               e, ch, n, fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
    if (!a)
      return false;
    acc[i - first] = a;
  }
  return !e->failed;
}

/* A row's share of the column accumulators: those whose input uses a
 * row reduction of the kernel (late), or those that do not (early: added
 * before the block reductions, so that their inputs need not live across
 * the barrier; a thread's rows are still added in row order). */
static bool row_columns(fgb_emitter *e, const fgk_chunks *ch,
                        LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16], bool late) {
  const fg_kernel *k = e->k;
  int V = e->vec;
  for (int i = 0; i < k->ncols; i++) {
    if (uses_any(e, k->cols[i]->in[0], k->reds, k->nreds) != late)
      continue;
    const fg_node *n = k->cols[i];
    fg_dtype ad = fgk_red_acc(n);
    LLVMValueRef id = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
    if (packed(e, n)) {
      /* the pair (j, j + 1) accumulates in cacc[i][c][j] (unpack_columns) */
      for (int c = 0; c < ch->n; c++) {
        fgk_chunks_enter(e, ch, c);
        for (int j = 0; j < V; j += 2) {
          LLVMValueRef x = packed_input(e, n, ch, c, j);
          if (!x)
            return false;
          LLVMValueRef a = LLVMBuildLoad2(e->b, LLVMTypeOf(x), cacc[i][c][j], "");
          LLVMBuildStore(e->b, fgb_bf16x2_combine(e->m, fgk_red_op(n), a, x), cacc[i][c][j]);
        }
      }
      continue;
    }
    for (int c = 0; c < ch->n; c++) {
      fgk_chunks_enter(e, ch, c);
      for (int j = 0; j < V; j++) {
        LLVMValueRef idx[FG_MAX_RANK];
        fgk_lane_index(e, ch->idx0[c], j, idx);
        LLVMValueRef x = fgb_emit_value(e, n->in[0], idx);
        if (!x)
          return false;
        x = fgb_convert(e->m, x, n->in[0]->type.dtype, ad);
        if (ch->valid[c])
          x = LLVMBuildSelect(e->b, ch->valid[c], x, id, "");
        LLVMValueRef a = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), cacc[i][c][j], "");
        LLVMBuildStore(e->b, fgb_reduce_combine(e->m, fgk_red_op(n), a, x, ad), cacc[i][c][j]);
      }
    }
  }
  return !e->failed;
}

/* The row's contributions to the tail accumulators (where `mine` holds,
 * when not NULL). */
static bool tail_contributions(fgb_emitter *e, const fgk_row_ctx *rc, LLVMValueRef mine,
                               LLVMValueRef *tacc) {
  const fg_kernel *k = e->k;
  for (int i = 0; i < k->ntails; i++) {
    const fg_node *n = k->tails[i];
    fg_dtype ad = fgk_red_acc(n);
    LLVMValueRef idx[FG_MAX_RANK];
    fgk_row_index(e, n->in[0], rc->kc, idx);
    LLVMValueRef x = fgb_emit_value(e, n->in[0], idx);
    if (!x)
      return false;
    x = fgb_convert(e->m, x, n->in[0]->type.dtype, ad);
    if (mine)
      x = LLVMBuildSelect(e->b, mine, x, fgb_reduce_identity(e->m, fgk_red_op(n), ad), "");
    LLVMValueRef a = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), tacc[i], "");
    LLVMBuildStore(e->b, fgb_reduce_combine(e->m, fgk_red_op(n), a, x, ad), tacc[i]);
  }
  return !e->failed;
}

/* With its reductions seeded: a row's outputs and its share of the late
 * column accumulators and of the tail accumulators. */
static bool row_outputs(fgb_emitter *e, fgk_row_ctx *rc, const fgk_chunks *ch,
                        LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16], LLVMValueRef *tacc) {
  const fg_kernel *k = e->k;
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
      fgk_chunks_store_full(e, ch, o);
  }
  if (!row_columns(e, ch, cacc, true))
    return false;
  e->nuniform = 0;
  for (int i = 0; i < rc->nkept; i++)
    e->uniform[e->nuniform++] = rc->kc[i];
  if (!tail_contributions(e, rc, NULL, tacc))
    return false;
  return fgk_store_rows(e, rc, NULL);
}

/* The rows of group grp: their coordinates and chunks; then every load
 * they need is issued (several rows, or pipeline mode `mode` with buffer
 * buf: copies started, or the slots read). */
static void group_loads(fgb_emitter *e, const fgk_row_ctx *base, LLVMValueRef grp,
                        const LLVMValueRef *r0, const LLVMValueRef *valid, int mode,
                        LLVMValueRef buf, fgk_row_ctx *rc, fgk_chunks *ch) {
  int U = e->k->rows_per_iter > 1 ? e->k->rows_per_iter : 1;
  e->npipe_rows = 0;
  for (int u = 0; u < U; u++) {
    rc[u] = *base;
    LLVMValueRef row =
        LLVMBuildAdd(e->b, LLVMBuildMul(e->b, grp, fgb_const(e, U), ""), fgb_const(e, u), "");
    fgb_delinearize(e, row, rc[u].kept_sizes, rc[u].nkept, rc[u].kc);
    row_chunks(e, &rc[u], r0, valid, &ch[u]);
    for (int d = 0; d < rc[u].nkept; d++)
      e->pipe_rows[e->npipe_rows++] = rc[u].kc[d];
  }
  if (U == 1 && mode == FGB_PIPE_OFF)
    return;
  e->pipe_mode = mode;
  e->pipe_buf = buf;
  e->pipe_pos = 0;
  for (int u = 0; u < U; u++)
    prefetch_row(e, &ch[u]);
  e->pipe_mode = FGB_PIPE_OFF;
}

/* Pipelining: the copies of group `next`'s rows (when there is one) into
 * buffer buf start now; the memo forgets the walk. */
static void issue_group(fgb_emitter *e, const fgk_row_ctx *base, LLVMValueRef next,
                        LLVMValueRef buf, const LLVMValueRef *r0, const LLVMValueRef *valid) {
  const fg_kernel *k = e->k;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  fgk_row_ctx rc[MAX_ROWS];
  fgk_chunks ch[MAX_ROWS];
  int mark = fgb_memo_mark(e);
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, next, fgb_extent(e, k->outer / U), ""));
  group_loads(e, base, next, r0, valid, FGB_PIPE_ISSUE, buf, rc, ch);
  fgb_cp_async_commit(e->m);
  fgb_memo_release(e, mark);
  fgb_end_if(e, merge);
}

/* The end of a CTA's rows (see the header comment): its partials and
 * arrival. */
typedef struct rowcol_end {
  bool early;     /* partials and arrival from inside the last group (see emit_rows) */
  LLVMValueRef x; /* the cluster's exchange buffer (shared memory), or NULL */
  LLVMValueRef cta;
  const LLVMValueRef *r0, *valid;
  LLVMValueRef goal; /* i64 local: the arrival count that means "all G arrived" */
} rowcol_end;

/* The f32 column accumulators the partials read (out): cacc's, with the
 * packed pairs (cacc[i][c][j], j even) unpacked into new ones. */
static void unpack_columns(fgb_emitter *e, LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16],
                           LLVMValueRef out[FGR_MAX_COLS][FGR_MAX_CHUNKS][16]) {
  const fg_kernel *k = e->k;
  for (int i = 0; i < k->ncols; i++) {
    bool pk = packed(e, k->cols[i]);
    LLVMTypeRef t = pk ? LLVMTypeOf(fgb_bf16x2_identity(e->m, fgk_red_op(k->cols[i]))) : NULL;
    for (int c = 0; c < k->chunks; c++)
      for (int j = 0; j < e->vec; j++) {
        out[i][c][j] = cacc[i][c][j];
        if (!pk || j % 2)
          continue;
        LLVMValueRef v = LLVMBuildLoad2(e->b, t, cacc[i][c][j], "");
        LLVMValueRef lo = fgb_bf16x2_unpack(e->m, v, 0);
        out[i][c][j] = fgk_local_var(e, LLVMTypeOf(lo), lo);
        LLVMBuildStore(e->b, fgb_bf16x2_unpack(e->m, v, 1), cacc[i][c][j + 1]);
      }
  }
}

/* Column partials: the cluster's (summed through distributed shared
 * memory) or this CTA's own. */
static void column_partials(fgb_emitter *e, const rowcol_end *en,
                            LLVMValueRef packs[FGR_MAX_COLS][FGR_MAX_CHUNKS][16]) {
  const fg_kernel *k = e->k;
  LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16];
  unpack_columns(e, packs, cacc);
  if (k->cluster > 1) {
    LLVMValueRef rank = LLVMBuildURem(e->b, en->cta, fgb_const(e, k->cluster), "");
    LLVMValueRef cid = LLVMBuildUDiv(e->b, en->cta, fgb_const(e, k->cluster), "");
    for (int i = 0; i < k->ncols; i++)
      fgr_cluster_slice_sums(e, i, en->x, rank, cid, en->r0, en->valid, cacc);
    return;
  }
  for (int i = 0; i < k->ncols; i++) {
    fg_dtype ad = fgk_red_acc(k->cols[i]), pd = fg_reduce_partial_dtype(k->cols[i]);
    for (int c = 0; c < k->chunks; c++) {
      LLVMBasicBlockRef m = en->valid[c] ? fgb_begin_if(e, en->valid[c]) : NULL;
      for (int j = 0; j < e->vec; j++)
        fgb_store(
            e->m,
            fgr_col_partial(e, i, en->cta, LLVMBuildAdd(e->b, en->r0[c], fgb_const(e, j), "")), pd,
            fgb_convert(e->m, LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), cacc[i][c][j], ""), ad,
                        pd));
      if (m)
        fgb_end_if(e, m);
    }
  }
}

static void tail_partials(fgb_emitter *e, LLVMValueRef cta, LLVMValueRef *tacc) {
  const fg_kernel *k = e->k;
  LLVMBasicBlockRef m = fgb_begin_if(e, is_thread0(e));
  for (int i = 0; i < k->ntails; i++)
    LLVMBuildStore(e->b,
                   LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(k->tails[i])), tacc[i], ""),
                   fgr_tail_partial(e, i, cta));
  fgb_end_if(e, m);
}

/* The arrival counter (64 bits) only grows, so nothing resets it: arrival
 * t of this run is ticket t % G, and the run's last arrival brings it to
 * (t / G + 1) * G, kept in `goal` (a reset by the last combiner cost an
 * atomic round trip at the very end of the kernel). The ticket goes to
 * the flag slot for every thread. */
static LLVMValueRef counter(fgb_emitter *e) {
  return fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->counter_temp});
}

/* The CTAs of this launch (the index type): grid[0], or, where the grid
 * is a formula of the symbolic size (k->grid_runtime), %nctaid.x, at most
 * grid[0], which still lays out the partials. */
static LLVMValueRef ctas(fgb_emitter *e) {
  if (!e->k->grid_runtime)
    return fgb_const(e, e->k->grid[0]);
  LLVMValueRef n = fgb_nctaid(e->m, 0);
  LLVMTypeRef it = LLVMTypeOf(fgb_const(e, 0));
  return LLVMTypeOf(n) == it ? n : LLVMBuildZExt(e->b, n, it, "");
}

/* Rows of column partials this launch: one a CTA, or a cluster. */
static LLVMValueRef partial_rows(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (!k->grid_runtime)
    return fgb_const(e, fgr_partial_rows(k));
  return k->cluster > 1 ? LLVMBuildUDiv(e->b, ctas(e), fgb_const(e, k->cluster), "") : ctas(e);
}

/* With a grid read at run (k->grid_runtime, G <= M = grid[0]), the
 * counter is kept at a multiple of M between launches: tickets are t % M,
 * the goal is t - t % M + G, and the G-th arrival adds M - G, so a launch
 * with another G (another T) finds it at a multiple of M again. */
static void arrive(fgb_emitter *e, LLVMValueRef goal) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx), i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef G64 = LLVMConstInt(i64, (unsigned long long)e->k->grid[0], 0);
  fgb_barrier(e->m);
  LLVMBasicBlockRef m = fgb_begin_if(e, is_thread0(e));
  fgb_fence_gpu(e->m); /* release: the CTA's partials, ordered before it by the barrier */
  LLVMValueRef t = LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpAdd, counter(e),
                                      LLVMConstInt(i64, 1, 0), LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef ticket = LLVMBuildURem(e->b, t, G64, "");
  if (e->k->grid_runtime) {
    LLVMValueRef g = LLVMBuildZExt(e->b, fgb_nctaid(e->m, 0), i64, "");
    LLVMBuildStore(e->b, LLVMBuildAdd(e->b, LLVMBuildSub(e->b, t, ticket, ""), g, ""), goal);
    LLVMValueRef pad = LLVMBuildSub(e->b, G64, g, "");
    LLVMValueRef last = LLVMBuildICmp(
        e->b, LLVMIntEQ, LLVMBuildAdd(e->b, ticket, LLVMConstInt(i64, 1, 0), ""), g, "");
    LLVMBasicBlockRef p = fgb_begin_if(
        e, LLVMBuildAnd(e->b, last,
                        LLVMBuildICmp(e->b, LLVMIntNE, pad, LLVMConstInt(i64, 0, 0), ""), ""));
    LLVMBuildAtomicRMW(e->b, LLVMAtomicRMWBinOpAdd, counter(e), pad, LLVMAtomicOrderingMonotonic,
                       0);
    fgb_end_if(e, p);
  } else {
    LLVMBuildStore(e->b,
                   LLVMBuildMul(e->b,
                                LLVMBuildAdd(e->b, LLVMBuildUDiv(e->b, t, G64, ""),
                                             LLVMConstInt(i64, 1, 0), ""),
                                G64, ""),
                   goal);
  }
  LLVMBuildStore(e->b, LLVMBuildTrunc(e->b, ticket, i32, ""),
                 fgk_smem_slot(e, fgk_flag_area(e->k), LLVMConstInt(i32, 0, 0)));
  fgb_end_if(e, m);
  fgb_barrier(e->m);
}

/* Thread 0 waits until the counter reaches goal, then the CTA may read
 * every CTA's partials (acquire, passed on by the barrier). */
static void await(fgb_emitter *e, LLVMValueRef goal) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  LLVMBasicBlockRef m = fgb_begin_if(e, is_thread0(e));
  LLVMBasicBlockRef spin = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "spin");
  LLVMBasicBlockRef nap = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "nap");
  LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "go");
  LLVMValueRef want = LLVMBuildLoad2(e->b, i64, goal, "");
  LLVMValueRef ptr = counter(e);
  LLVMBuildBr(e->b, spin);
  LLVMPositionBuilderAtEnd(e->b, spin);
  LLVMValueRef seen = load_volatile(e, i64, ptr);
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntULT, seen, want, ""), nap, go);
  LLVMPositionBuilderAtEnd(e->b, nap);
  fgb_nanosleep(e->m, 64);
  LLVMBuildBr(e->b, spin);
  LLVMPositionBuilderAtEnd(e->b, go);
  fgb_fence_gpu(e->m);
  fgb_end_if(e, m);
  fgb_barrier(e->m);
}

static LLVMValueRef as_i32(fgb_emitter *e, LLVMValueRef v) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  return LLVMTypeOf(v) == i32 ? v : LLVMBuildTrunc(e->b, v, i32, "");
}

/* Deferred row totals (k->defer_groups = F, schedule.c): the shared array
 * of warp shares, entry [(i * F * U + s) * W + w] for reduction i, row
 * slot s (group iter % F, row u: s = (iter % F) * U + u) and warp w. */
static LLVMValueRef defer_slot(fgb_emitter *e, int i, LLVMValueRef s, LLVMValueRef w) {
  const fg_kernel *k = e->k;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  int64_t D = (int64_t)k->defer_groups * U, W = k->block / 32;
  char name[256];
  snprintf(name, sizeof name, "fg_defer_%s", LLVMGetValueName(e->fn));
  LLVMValueRef arr = LLVMGetNamedGlobal(fgb_llvm_module(e->m), name);
  if (!arr)
    arr = fgb_shared_array(e->m, name, (uint64_t)(8 * k->nreds * D * W));
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef entry = LLVMBuildAdd(
      e->b,
      LLVMBuildMul(e->b,
                   LLVMBuildAdd(e->b, LLVMConstInt(i32, (unsigned long long)(i * D), 0), s, ""),
                   LLVMConstInt(i32, (unsigned long long)W, 0), ""),
      w, "");
  return fgb_gep(e->m, arr, LLVMInt8TypeInContext(e->ctx),
                 LLVMBuildMul(e->b, entry, LLVMConstInt(i32, 8, 0), ""));
}

/* Each warp's share of every reduction of the group's rows: summed
 * across the warp (shuffles), written by lane 0; no barrier. */
static bool defer_shares(fgb_emitter *e, const fgk_chunks *ch, LLVMValueRef iter) {
  const fg_kernel *k = e->k;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef lane0 =
      LLVMBuildICmp(e->b, LLVMIntEQ, LLVMBuildAnd(e->b, tid, LLVMConstInt(i32, 31, 0), ""),
                    LLVMConstInt(i32, 0, 0), "");
  LLVMValueRef s0 =
      LLVMBuildMul(e->b, as_i32(e, LLVMBuildURem(e->b, iter, fgb_const(e, k->defer_groups), "")),
                   LLVMConstInt(i32, (unsigned long long)U, 0), "");
  LLVMValueRef v[MAX_ROWS * 64];
  fg_opcode ops[MAX_ROWS * 64];
  fg_dtype accs[MAX_ROWS * 64];
  for (int u = 0; u < U; u++) {
    if (!row_reductions(e, &ch[u], 0, k->nreds, &v[u * k->nreds]))
      return false;
    for (int i = 0; i < k->nreds; i++) {
      ops[u * k->nreds + i] = fgk_red_op(k->reds[i]);
      accs[u * k->nreds + i] = fgk_red_acc(k->reds[i]);
    }
  }
  fgb_warp_reduce_n(e, U * k->nreds, ops, accs, v);
  LLVMBasicBlockRef m = fgb_begin_if(e, lane0);
  for (int u = 0; u < U; u++)
    for (int i = 0; i < k->nreds; i++)
      LLVMBuildStore(
          e->b, v[u * k->nreds + i],
          defer_slot(e, i, LLVMBuildAdd(e->b, s0, LLVMConstInt(i32, (unsigned long long)u, 0), ""),
                     warp));
  fgb_end_if(e, m);
  return !e->failed;
}

/* The deferred rows since the last flush (after group iter, the last of
 * F or of the CTA's): thread s sums row slot s's warp shares in warp
 * order, writes the row's results and adds its tail contributions to its
 * own accumulators (combined across the CTA after the loop). */
static bool defer_flush(fgb_emitter *e, const fgk_row_ctx *base, LLVMValueRef grp,
                        LLVMValueRef iter, LLVMValueRef *tacc) {
  const fg_kernel *k = e->k;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  int64_t F = k->defer_groups, W = k->block / 32;
  LLVMValueRef G = ctas(e);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef pos = LLVMBuildURem(e->b, iter, fgb_const(e, F), "");
  LLVMValueRef last =
      LLVMBuildOr(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, pos, fgb_const(e, F - 1), ""),
                  LLVMBuildICmp(e->b, LLVMIntSGE, LLVMBuildAdd(e->b, grp, G, ""),
                                fgb_extent(e, k->outer / U), ""),
                  "");
  LLVMBasicBlockRef m = fgb_begin_if(e, last); /* the same for every thread of the CTA */
  fgb_barrier(e->m);
  int mark = fgb_memo_mark(e);
  LLVMValueRef t = fgb_thread_index(e, 0);
  LLVMValueRef mine = LLVMBuildICmp(
      e->b, LLVMIntSLT, t,
      LLVMBuildMul(e->b, LLVMBuildAdd(e->b, pos, fgb_const(e, 1), ""), fgb_const(e, U), ""), "");
  LLVMValueRef s = LLVMBuildSelect(e->b, mine, t, fgb_const(e, 0), "");
  /* slot s: group grp - (pos - s / U) * G, row s % U */
  LLVMValueRef back = LLVMBuildSub(e->b, pos, LLVMBuildUDiv(e->b, s, fgb_const(e, U), ""), "");
  LLVMValueRef g = LLVMBuildSub(e->b, grp, LLVMBuildMul(e->b, back, G, ""), "");
  LLVMValueRef row = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, g, fgb_const(e, U), ""),
                                  LLVMBuildURem(e->b, s, fgb_const(e, U), ""), "");
  fgk_row_ctx rc = *base;
  fgb_delinearize(e, row, rc.kept_sizes, rc.nkept, rc.kc);
  for (int l = 0; l < 16; l++)
    e->lanes[l] = NULL;
  e->nuniform = 0;
  for (int i = 0; i < k->nreds; i++) {
    const fg_node *n = k->reds[i];
    fg_dtype ad = fgk_red_acc(n);
    LLVMValueRef tot = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
    for (int w = 0; w < W; w++)
      tot = fgb_reduce_combine(
          e->m, fgk_red_op(n), tot,
          LLVMBuildLoad2(
              e->b, fgb_reg_type(e->m, ad),
              defer_slot(e, i, as_i32(e, s), LLVMConstInt(i32, (unsigned long long)w, 0)), ""),
          ad);
    fgk_seed_reduction(e, n, rc.kc, tot);
  }
  if (!fgk_store_rows(e, &rc, mine) || !tail_contributions(e, &rc, mine, tacc))
    return false;
  fgb_memo_release(e, mark);
  fgb_barrier(e->m); /* the shares are written again next */
  fgb_end_if(e, m);
  return !e->failed;
}

/* After deferred rows: every thread's tail accumulators, combined across
 * the CTA in a fixed order (thread 0 writes the partial). */
static void defer_tails(fgb_emitter *e, LLVMValueRef *tacc) {
  const fg_kernel *k = e->k;
  fg_opcode ops[FGK_MAX_TAILS];
  fg_dtype accs[FGK_MAX_TAILS];
  LLVMValueRef v[FGK_MAX_TAILS];
  for (int i = 0; i < k->ntails; i++) {
    ops[i] = fgk_red_op(k->tails[i]);
    accs[i] = fgk_red_acc(k->tails[i]);
    v[i] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, accs[i]), tacc[i], "");
  }
  fgb_block_reduce_n(e, k->ntails, ops, accs, v, 0);
  for (int i = 0; i < k->ntails; i++)
    LLVMBuildStore(e->b, v[i], tacc[i]);
}

/* One group of U rows: all their loads first (pipelined: waited for, and
 * the next group's started), then each row's reductions, then (after
 * re-reading the rows, when the schedule says so: fewer registers, more
 * CTAs) each row's outputs and accumulators. */
static bool emit_rows(fgb_emitter *e, const fgk_row_ctx *base, LLVMValueRef grp, LLVMValueRef iter,
                      const LLVMValueRef *r0, const LLVMValueRef *valid,
                      LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16], LLVMValueRef *tacc,
                      const rowcol_end *en) {
  const fg_kernel *k = e->k;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  fgk_row_ctx rc[MAX_ROWS];
  fgk_chunks ch[MAX_ROWS];
  LLVMValueRef totals[MAX_ROWS][64];
  int mark = fgb_memo_mark(e);
  LLVMValueRef buf = NULL;
  if (k->pipeline) {
    /* This group's copies (buffer iter & 1) have landed; the next group's
     * go to the other buffer, whose reads finished last iteration. */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    buf = LLVMBuildAnd(e->b, as_i32(e, iter), LLVMConstInt(i32, 1, 0), "");
    fgb_cp_async_wait_all(e->m);
    issue_group(e, base, LLVMBuildAdd(e->b, grp, ctas(e), ""),
                LLVMBuildXor(e->b, buf, LLVMConstInt(i32, 1, 0), ""), r0, valid);
  }
  group_loads(e, base, grp, r0, valid, k->pipeline ? FGB_PIPE_READ : FGB_PIPE_OFF, buf, rc, ch);
  if (e->failed)
    return false;
  for (int u = 0; u < U; u++)
    if (!row_columns(e, &ch[u], cacc, false))
      return false;
  if (en->early) {
    /* The CTA's last group: its column sums are complete before its row
     * reductions and outputs, so the partials and the arrival go now, and
     * the fence does not wait for this group's output stores; the
     * combiners' wait overlaps the group's remaining work. */
    LLVMBasicBlockRef m =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSGE, LLVMBuildAdd(e->b, grp, ctas(e), ""),
                                      fgb_extent(e, k->outer / U), ""));
    column_partials(e, en, cacc);
    trace_point(e, 2);
    arrive(e, en->goal);
    trace_point(e, 3);
    fgb_end_if(e, m);
  }
  if (k->defer_groups) {
    bool ok = defer_shares(e, ch, iter);
    fgb_memo_release(e, mark);
    return ok;
  }
  /* Reductions in groups that do not use each other (a variance after its
   * mean comes in a later group): each group's rows share one barrier. */
  for (int start = 0, end; start < k->nreds; start = end) {
    for (end = start + 1;
         end < k->nreds && !uses_any(e, k->reds[end]->in[0], k->reds + start, end - start); end++)
      ;
    int n = end - start;
    fg_opcode ops[MAX_ROWS * 64];
    fg_dtype accs[MAX_ROWS * 64];
    LLVMValueRef all[MAX_ROWS * 64];
    for (int u = 0; u < U; u++) {
      if (!row_reductions(e, &ch[u], start, end, &all[u * n]))
        return false;
      for (int i = start; i < end; i++) {
        ops[u * n + i - start] = fgk_red_op(k->reds[i]);
        accs[u * n + i - start] = fgk_red_acc(k->reds[i]);
      }
    }
    fgb_block_reduce_n(e, U * n, ops, accs, all, start * U);
    for (int u = 0; u < U; u++)
      for (int i = start; i < end; i++) {
        totals[u][i] = all[u * n + i - start];
        fgk_seed_reduction(e, k->reds[i], rc[u].kc, totals[u][i]);
      }
  }
  if (k->reload) {
    fgb_memo_release(e, mark);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
    LLVMTypeRef fty = LLVMFunctionType(i64, NULL, 0, 0);
    LLVMValueRef zero = LLVMGetInlineAsm(fty, (char *)"mov.u64 $0, 0;", 14, (char *)"=l", 2, 1, 0,
                                         LLVMInlineAsmDialectATT, 0);
    e->reload_zero = LLVMBuildCall2(e->b, fty, zero, NULL, 0, "");
  }
  for (int u = 0; u < U; u++) {
    if (k->reload)
      for (int i = 0; i < k->nreds; i++)
        fgk_seed_reduction(e, k->reds[i], rc[u].kc, totals[u][i]);
    if (!row_outputs(e, &rc[u], &ch[u], cacc, tacc))
      return false;
  }
  e->reload_zero = NULL;
  fgb_memo_release(e, mark);
  return !e->failed;
}

/* Lanes a combiner thread sums side by side: a 16-byte vector of the
 * widest partial dtype, where every row of partials and every block is
 * whole vectors (else 1). */
static int combine_lanes(const fg_kernel *k) {
  int w = fgr_vector_lanes(k);
  return w > 1 && k->red % w == 0 && k->combine_cols % w == 0 ? w : 1;
}

/* The combiners' thread groups (see combine_block): the fewest (a power
 * of two) that leave a thread at most COMBINE_VECTORS loads; threads
 * t < TPR * NG load, and the scratch holds that many sums a lane. */
static int64_t combine_groups(const fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int64_t TPR = k->combine_cols / combine_lanes(k), G = fgr_partial_rows(k), NG = 1;
  int64_t V = k->ncols > 1 ? 2 * COMBINE_VECTORS
                           : COMBINE_VECTORS; /* a thread loads V vectors a column reduction */
  if (k->combine_loads > 0)
    V = k->combine_loads;
  while (NG < k->block / TPR && NG < COMBINE_GROUPS && (G + NG - 1) / NG > V)
    NG *= 2;
  return NG;
}

static int64_t combine_threads(const fgb_emitter *e) {
  return combine_groups(e) * (e->k->combine_cols / combine_lanes(e->k));
}

/* Bytes a scratch slot: the widest column accumulator (4 for f32). */
static int scratch_stride(const fg_kernel *k) {
  int b = 4;
  for (int i = 0; i < k->ncols; i++)
    if (fg_dtype_size(fgk_red_acc(k->cols[i])) > b)
      b = fg_dtype_size(fgk_red_acc(k->cols[i]));
  return b;
}

static LLVMValueRef scratch_slot(fgb_emitter *e, LLVMValueRef scratch, LLVMValueRef slot) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  return fgb_gep(e->m, scratch, LLVMInt8TypeInContext(e->ctx),
                 LLVMBuildMul(e->b, LLVMBuildTrunc(e->b, slot, i32, ""),
                              LLVMConstInt(i32, (unsigned)scratch_stride(e->k), 0), ""));
}

/* Combiner: column block blk of CW columns. Thread t < TPR * NG sums W
 * columns side by side (one vector load a partial row: W =
 * combine_lanes), columns (t % TPR) * W + 0..W-1 of the block (TPR = CW /
 * W), over partial rows g = q, q + NG, ... with q = t / TPR (the vectors
 * issued before any is combined); the NG group sums meet in shared memory
 * and thread c < CW adds column c's in group order. NG: the fewest groups
 * (a power of two) that leave a thread at most COMBINE_VECTORS loads, but
 * at most COMBINE_GROUPS, so that neither stage is long: with every thread
 * loading (NG = T / TPR) the second stage took 256 dependent shared loads
 * (amax; docs/benchmarks.md, S16). With two column reductions a
 * thread's loads are twice as many, so it keeps 8 a reduction. */
static bool combine_block(fgb_emitter *e, fgk_row_ctx *rc, LLVMValueRef blk, LLVMValueRef scratch) {
  const fg_kernel *k = e->k;
  int W = combine_lanes(k);
  int64_t CW = k->combine_cols, TPR = CW / W, G = fgr_partial_rows(k), R = k->red;
  LLVMValueRef Gv = partial_rows(e); /* G, or fewer this launch (k->grid_runtime) */
  int64_t NG = combine_groups(e), NT = combine_threads(e);
  LLVMValueRef tid = fgb_thread_index(e, 0);
  LLVMValueRef tr = LLVMBuildURem(e->b, tid, fgb_const(e, TPR), "");
  LLVMValueRef gq = LLVMBuildUDiv(e->b, tid, fgb_const(e, TPR), "");
  LLVMValueRef col = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, blk, fgb_const(e, CW), ""),
                                  LLVMBuildMul(e->b, tr, fgb_const(e, W), ""), "");
  LLVMValueRef cvalid = LLVMBuildICmp(e->b, LLVMIntSLT, col, fgb_const(e, R), "");
  LLVMValueRef colc = LLVMBuildSelect(e->b, cvalid, col, fgb_const(e, 0), "");
  int per = LOADS_IN_FLIGHT * 2 / W > 0 ? LOADS_IN_FLIGHT * 2 / W
                                        : 1; /* vectors in flight: 64 registers' worth */
  if (per > LOADS_IN_FLIGHT)
    per = LOADS_IN_FLIGHT;
  /* Threads past the NG groups have no rows (their sums stay the identity). */
  LLVMValueRef gstart =
      LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, gq, fgb_const(e, NG), ""), gq, Gv, "");
  for (int i = 0; i < k->ncols; i++) {
    const fg_node *n = k->cols[i];
    fg_dtype ad = fgk_red_acc(n), pd = fg_reduce_partial_dtype(n);
    LLVMTypeRef rt = fgb_reg_type(e->m, ad);
    LLVMValueRef id = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
    LLVMValueRef accv[16];
    for (int w = 0; w < W; w++)
      accv[w] = fgk_local_var(e, rt, id);
    int lif = (int)((G + NG - 1) / NG < per ? (G + NG - 1) / NG : per);
    fgk_loop l;
    LLVMValueRef g0 = fgk_loop_begin(e, &l, gstart, Gv, fgb_const(e, NG * lif));
    LLVMValueRef got[LOADS_IN_FLIGHT][16], in[LOADS_IN_FLIGHT];
    for (int q = 0; q < lif; q++) {
      LLVMValueRef g = LLVMBuildAdd(e->b, g0, fgb_const(e, q * NG), "");
      in[q] = LLVMBuildICmp(e->b, LLVMIntSLT, g, Gv, "");
      g = LLVMBuildSelect(e->b, in[q], g, fgb_const(e, 0), "");
      /* Plain loads: the acquire fence after the wait invalidated L1. */
      fgb_load_vec(e->m, fgr_col_partial(e, i, g, colc), pd, W, (unsigned)(W * fg_dtype_size(pd)),
                   0, got[q]);
    }
    for (int w = 0; w < W; w++) {
      LLVMValueRef acc = LLVMBuildLoad2(e->b, rt, accv[w], "");
      for (int q = 0; q < lif; q++)
        acc = fgb_reduce_combine(
            e->m, fgk_red_op(n), acc,
            LLVMBuildSelect(e->b, in[q], fgb_convert(e->m, got[q][w], pd, ad), id, ""), ad);
      LLVMBuildStore(e->b, acc, accv[w]);
    }
    fgk_loop_end(e, &l, g0);
    LLVMBasicBlockRef m =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, tid, fgb_const(e, NT), ""));
    for (int w = 0; w < W; w++)
      LLVMBuildStore(
          e->b, LLVMBuildLoad2(e->b, rt, accv[w], ""),
          scratch_slot(e, scratch,
                       LLVMBuildAdd(e->b, fgb_const(e, ((int64_t)i * W + w) * NT), tid, "")));
    fgb_end_if(e, m);
  }
  fgb_barrier(e->m);
  LLVMBasicBlockRef first =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, tid, fgb_const(e, CW), ""));
  int mark = fgb_memo_mark(e);
  LLVMValueRef w = LLVMBuildURem(e->b, tid, fgb_const(e, W), ""),
               ftr = LLVMBuildUDiv(e->b, tid, fgb_const(e, W), "");
  LLVMValueRef fcol = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, blk, fgb_const(e, CW), ""), tid, "");
  LLVMValueRef fvalid = LLVMBuildICmp(e->b, LLVMIntSLT, fcol, fgb_const(e, R), "");
  fcol = LLVMBuildSelect(e->b, fvalid, fcol, fgb_const(e, 0), "");
  LLVMValueRef redc[FG_MAX_RANK];
  fgb_delinearize(e, fcol, rc->red_sizes, rc->nred, redc);
  for (int i = 0; i < k->ncols; i++) {
    const fg_node *n = k->cols[i];
    fg_dtype ad = fgk_red_acc(n);
    LLVMTypeRef rt = fgb_reg_type(e->m, ad);
    LLVMValueRef acc = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
    LLVMValueRef base =
        LLVMBuildAdd(e->b,
                     LLVMBuildMul(e->b, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * W), w, ""),
                                  fgb_const(e, NT), ""),
                     ftr, "");
    for (int q = 0; q < NG; q++) {
      LLVMValueRef slot = LLVMBuildAdd(e->b, base, fgb_const(e, q * TPR), "");
      acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc,
                               LLVMBuildLoad2(e->b, rt, scratch_slot(e, scratch, slot), ""), ad);
    }
    LLVMValueRef idx[FG_MAX_RANK];
    col_index(e, n->out[0], redc, idx);
    acc = fgk_empty_reduction(e, n, acc, ad);
    fgb_memo_put(e, n->out[0], idx, fgb_convert(e->m, acc, ad, n->out[0]->type.dtype));
  }
  if (!fgk_store_phase(e, FG_PHASE_COLUMNS, col_out_index, redc, fvalid))
    return false;
  fgb_memo_release(e, mark);
  fgb_end_if(e, first);
  fgb_barrier(e->m); /* the scratch is reused by the next block */
  return !e->failed;
}

/* Combiner 0 also finishes the tail reductions: a block reduction over the
 * G per-CTA partials. */
static bool combine_tails(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  LLVMValueRef tid = fgb_thread_index(e, 0);
  int mark = fgb_memo_mark(e);
  for (int i = 0; i < k->ntails; i++) {
    const fg_node *n = k->tails[i];
    fg_dtype ad = fgk_red_acc(n);
    LLVMTypeRef rt = fgb_reg_type(e->m, ad);
    LLVMValueRef accv = fgk_local_var(e, rt, fgb_reduce_identity(e->m, fgk_red_op(n), ad));
    fgk_loop l;
    LLVMValueRef g = fgk_loop_begin(e, &l, tid, ctas(e), fgb_const(e, k->block));
    LLVMValueRef acc = LLVMBuildLoad2(e->b, rt, accv, "");
    acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc,
                             load_volatile(e, rt, fgr_tail_partial(e, i, g)), ad);
    LLVMBuildStore(e->b, acc, accv);
    fgk_loop_end(e, &l, g);
    if (i)
      fgb_barrier(e->m); /* the previous block reduction's slots are read */
    LLVMValueRef tot =
        fgb_block_reduce(e, fgk_red_op(n), ad, LLVMBuildLoad2(e->b, rt, accv, ""), 0);
    LLVMValueRef idx[FG_MAX_RANK];
    zero_index(e, n->out[0], idx);
    tot = fgk_empty_reduction(e, n, tot, ad);
    fgb_memo_put(e, n->out[0], idx, fgb_convert(e->m, tot, ad, n->out[0]->type.dtype));
  }
  if (!fgk_store_phase(e, FG_PHASE_TAIL, tail_out_index, NULL, is_thread0(e)))
    return false;
  fgb_memo_release(e, mark);
  return !e->failed;
}

/* The kernel's shared arrays are static, so at most 48 KiB together (a
 * knob's thread count can ask for more: the combiners' scratch grows with
 * it); more would only fail when the loader JIT-compiles the PTX. */
static bool static_smem_fits(fgb_emitter *e) {
  static const char *const prefix[] = {"fg_smem_", "fg_combine_", "fg_defer_", "fg_arena_"};
  uint64_t total = 0;
  for (int i = 0; i < 4; i++) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix[i], LLVMGetValueName(e->fn));
    LLVMValueRef g = LLVMGetNamedGlobal(fgb_llvm_module(e->m), name);
    if (g)
      total += LLVMGetArrayLength2(LLVMGlobalGetValueType(g));
  }
  int limit = e->p->target.static_smem_per_block;
  if (total > (uint64_t)limit)
    fgb_fail(e,
             "row + column kernel %d needs %llu bytes of static shared memory, more than the %d a "
             "kernel can have "
             "(fewer threads a CTA: --knob ROWCOL_THREADS)",
             e->k->id, (unsigned long long)total, limit);
  return !e->failed;
}

/* What the steps of a row + column kernel share. */
typedef struct rowcol_kernel {
  fgk_row_ctx rc;
  LLVMValueRef cta;
  LLVMValueRef r0[FGR_MAX_CHUNKS], valid[FGR_MAX_CHUNKS]; /* a thread's chunks' columns */
  LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16];    /* column accumulators */
  LLVMValueRef tacc[FGK_MAX_TAILS];                       /* tail accumulators */
  LLVMValueRef xchg; /* the shared arena (pipeline copies, cluster exchange), or NULL */
  int64_t arena;     /* its bytes */
  rowcol_end en;
} rowcol_kernel;

/* The limits, the row coordinates and a thread's chunks, which sit at the
 * same columns in every row. */
static bool rowcol_coordinates(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  int E = k->chunks, V = e->vec;
  int64_t R = k->red, T = k->block, G = k->grid[0], K = k->combiners;
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  if (k->ncols > FGR_MAX_COLS || k->ntails > FGK_MAX_TAILS || E > FGR_MAX_CHUNKS || k->split != 1 ||
      G < 1 || K < 1 || K > G || U > MAX_ROWS || k->outer % U || k->nreds > 64) {
    fgb_fail(e, "row + column kernel %d out of its limits", k->id);
    return false;
  }
  fgk_row_ctx *rc = &rk->rc;
  fgk_row_ctx_sizes(k, rc);
  rc->rstart = fgb_const(e, 0);
  rc->rend = fgb_const(e, R);
  rk->cta = fgb_block_index(e, 0);
  LLVMValueRef tv = LLVMBuildMul(e->b, fgb_thread_index(e, 0), fgb_const(e, V), "");
  bool exact = T * V * E == R;
  for (int c = 0; c < E; c++) {
    rk->r0[c] = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)c * T * V), tv, "");
    rk->valid[c] = exact ? NULL : LLVMBuildICmp(e->b, LLVMIntSLT, rk->r0[c], fgb_const(e, R), "");
    if (rk->valid[c])
      rk->r0[c] = LLVMBuildSelect(e->b, rk->valid[c], rk->r0[c], fgb_const(e, 0), "");
  }
  return true;
}

/* The column accumulators (bf16 pairs where packed) and the tails'. */
static void rowcol_accumulators(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  for (int i = 0; i < k->ncols; i++) {
    fg_dtype ad = fgk_red_acc(k->cols[i]);
    bool pk = packed(e, k->cols[i]);
    LLVMValueRef id2 = pk ? fgb_bf16x2_identity(e->m, fgk_red_op(k->cols[i])) : NULL;
    for (int c = 0; c < k->chunks; c++)
      for (int j = 0; j < e->vec; j++)
        rk->cacc[i][c][j] =
            pk && j % 2 == 0 ? fgk_local_var(e, LLVMTypeOf(id2), id2)
                             : fgk_local_var(e, fgb_reg_type(e->m, ad),
                                             fgb_reduce_identity(e->m, fgk_red_op(k->cols[i]), ad));
  }
  for (int i = 0; i < k->ntails; i++) {
    fg_dtype ad = fgk_red_acc(k->tails[i]);
    rk->tacc[i] = fgk_local_var(e, fgb_reg_type(e->m, ad),
                                fgb_reduce_identity(e->m, fgk_red_op(k->tails[i]), ad));
  }
}

/* Shared memory for the pipeline's copies and, after the rows, the
 * cluster's exchange of column accumulators: one array. */
static bool rowcol_arena(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  rk->arena = k->pipeline && k->pipe_bytes > k->xchg_bytes ? k->pipe_bytes : k->xchg_bytes;
  if (!rk->arena)
    return true;
  char name[256];
  snprintf(name, sizeof name, "fg_arena_%s", LLVMGetValueName(e->fn));
  rk->xchg = k->smem > 0 ? fgb_dynamic_shared(e->m, name)
                         : fgb_shared_array(e->m, name, (uint64_t)rk->arena);
  if (k->smem > 0 && k->smem < rk->arena) {
    fgb_fail(e, "row + column kernel %d has %d bytes of dynamic shared memory, needs %lld", k->id,
             k->smem, (long long)rk->arena);
    return false;
  }
  if (k->pipeline)
    e->pipe_arena = rk->xchg;
  return true;
}

/* How the CTA arrives. Early arrival is the schedule's choice
 * (early_arrival in schedule.c), which needs the column sums complete
 * before the row reductions, no tails and no cluster exchange. */
static bool rowcol_arrival(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  rk->en = (rowcol_end){.x = rk->xchg,
                        .cta = rk->cta,
                        .r0 = rk->r0,
                        .valid = rk->valid,
                        .goal = fgk_local_var(e, LLVMInt64TypeInContext(e->ctx),
                                              LLVMConstInt(LLVMInt64TypeInContext(e->ctx), 0, 0))};
  rk->en.early = k->early_arrive;
  bool cols_late = false;
  for (int i = 0; i < k->ncols; i++)
    cols_late |= uses_any(e, k->cols[i]->in[0], k->reds, k->nreds);
  if (rk->en.early && (cols_late || k->ntails || k->cluster > 1)) {
    fgb_fail(e, "early arrival in row + column kernel %d, which cannot arrive early", k->id);
    return false;
  }
  return true;
}

/* The loop over row groups g = cta, cta + ctas, ... (the first group's
 * copies issued before it, where pipelined). The next group's block
 * reductions reuse the shared slots this group's are still read from;
 * deferred rows, the shares a flush reads (its own barriers). */
static bool rowcol_rows(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  int U = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  LLVMValueRef G = ctas(e);
  trace_point(e, 0);
  if (k->pipeline) /* the first group's copies, into buffer 0 */
    issue_group(e, &rk->rc, rk->cta, LLVMConstInt(i32, 0, 0), rk->r0, rk->valid);
  fgk_loop rows;
  LLVMValueRef grp = fgk_loop_begin(e, &rows, rk->cta, fgb_extent(e, k->outer / U), G);
  LLVMValueRef iter = LLVMBuildUDiv(e->b, LLVMBuildSub(e->b, grp, rk->cta, ""), G, "");
  if (!emit_rows(e, &rk->rc, grp, iter, rk->r0, rk->valid, rk->cacc, rk->tacc, &rk->en))
    return false;
  if (k->defer_groups) {
    if (!defer_flush(e, &rk->rc, grp, iter, rk->tacc))
      return false;
  } else {
    fgb_barrier(e->m);
  }
  fgk_loop_end(e, &rows, grp);
  trace_point(e, 1);
  if (k->defer_groups && k->ntails)
    defer_tails(e, rk->tacc);
  /* Otherwise partials (the cluster's, or this CTA's), then the arrival
   * ticket, after the rows. */
  if (rk->en.early && k->grid_runtime) {
    /* A CTA with no row group (T below the grid's floor, the combiners)
     * never reached the arrival inside its last group. */
    LLVMBasicBlockRef m =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSGE, rk->cta, fgb_extent(e, k->outer / U), ""));
    column_partials(e, &rk->en, rk->cacc);
    arrive(e, rk->en.goal);
    fgb_end_if(e, m);
  }
  if (!rk->en.early) {
    column_partials(e, &rk->en, rk->cacc);
    if (k->ntails)
      tail_partials(e, rk->cta, rk->tacc);
    trace_point(e, 2);
    arrive(e, rk->en.goal);
    trace_point(e, 3);
  }
  return true;
}

/* The last `combiners` CTAs to arrive (their ticket says which) wait for
 * every CTA, then combine the column blocks (combiner 0 takes the tails;
 * with a combiner to spare, no block). */
static bool rowcol_combine(fgb_emitter *e, rowcol_kernel *rk) {
  const fg_kernel *k = e->k;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  int64_t R = k->red, K = k->combiners;
  LLVMValueRef ticket =
      LLVMBuildLoad2(e->b, i32, fgk_smem_slot(e, fgk_flag_area(k), LLVMConstInt(i32, 0, 0)), "");
  trace_point(e, 4);
  LLVMValueRef first_combiner =
      k->grid_runtime
          ? LLVMBuildSub(e->b, fgb_nctaid(e->m, 0), LLVMConstInt(i32, (unsigned long long)K, 0), "")
          : LLVMConstInt(i32, (unsigned long long)(k->grid[0] - K), 0);
  LLVMBasicBlockRef done =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntUGE, ticket, first_combiner, ""));
  LLVMValueRef j = LLVMBuildSub(e->b, ticket, first_combiner, "");
  if (LLVMTypeOf(fgb_const(e, 0)) != i32)
    j = LLVMBuildZExt(e->b, j, LLVMTypeOf(fgb_const(e, 0)), "");
  await(e, rk->en.goal);
  trace_point(e, 5);
  if (k->ncols) {
    char name[256];
    snprintf(name, sizeof name, "fg_combine_%s", LLVMGetValueName(e->fn));
    /* The combiners' scratch: the arena where it is large enough (the
     * pipeline and the cluster exchange are over: the exchange's last
     * cluster barrier waits for the partner's reads). */
    uint64_t sbytes = (uint64_t)scratch_stride(k) * (uint64_t)combine_threads(e) *
                      (uint64_t)k->ncols * (uint64_t)combine_lanes(k);
    LLVMValueRef scratch =
        rk->xchg && (uint64_t)rk->arena >= sbytes ? rk->xchg : fgb_shared_array(e->m, name, sbytes);
    int64_t nblocks = (R + k->combine_cols - 1) / k->combine_cols;
    int64_t skip = k->ntails && K > nblocks ? 1 : 0;
    fgk_loop bl;
    LLVMValueRef b0 =
        LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, j, fgb_const(e, skip), ""),
                        fgb_const(e, nblocks), LLVMBuildSub(e->b, j, fgb_const(e, skip), ""), "");
    LLVMValueRef blk = fgk_loop_begin(e, &bl, b0, fgb_const(e, nblocks), fgb_const(e, K - skip));
    for (int l = 0; l < 16; l++)
      e->lanes[l] = NULL;
    e->nuniform = 0;
    if (!combine_block(e, &rk->rc, blk, scratch))
      return false;
    fgk_loop_end(e, &bl, blk);
  }
  if (k->ntails) {
    for (int l = 0; l < 16; l++)
      e->lanes[l] = NULL;
    e->nuniform = 0;
    LLVMBasicBlockRef t = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, j, fgb_const(e, 0), ""));
    if (!combine_tails(e))
      return false;
    fgb_end_if(e, t);
  }
  trace_point(e, 6);
  trace_point(e, 7);
  fgb_end_if(e, done);
  return true;
}

/* The row + column form (plan.h) as its steps. */
bool fgb_emit_rowcol_kernel(fgb_emitter *e) {
  rowcol_kernel rk;
  memset(&rk, 0, sizeof rk);
  if (!rowcol_coordinates(e, &rk))
    return false;
  rowcol_accumulators(e, &rk);
  if (!rowcol_arena(e, &rk) || !rowcol_arrival(e, &rk) || !rowcol_rows(e, &rk) ||
      !rowcol_combine(e, &rk))
    return false;
  return static_smem_fits(e);
}
