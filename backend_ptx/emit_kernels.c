/* Kernel skeletons: thread mapping, loops, block and grid reductions. The
 * values themselves come from the recursion in emit_value.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Values a thread of a column kernel's last CTA has in flight while it
 * combines the partials (one CTA per column tile does all of it: with
 * few in flight this tail was a fifth of the packed dQKV epilogue). */
enum { COL_COMBINE_VALUES = 64 };

/* ---- loops and locals ---- */

LLVMValueRef fgk_local_var(fgb_emitter *e, LLVMTypeRef t, LLVMValueRef init) {
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(e->fn);
  LLVMBuilderRef ab = LLVMCreateBuilderInContext(e->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first)
    LLVMPositionBuilderBefore(ab, first);
  else
    LLVMPositionBuilderAtEnd(ab, entry);
  LLVMValueRef a = LLVMBuildAlloca(ab, t, "");
  LLVMDisposeBuilder(ab);
  LLVMBuildStore(e->b, init, a);
  return a;
}

/* for (i = start; i < end; i += step) — returns i inside the body. */
LLVMValueRef fgk_loop_begin(fgb_emitter *e, fgk_loop *l, LLVMValueRef start, LLVMValueRef end,
                            LLVMValueRef step) {
  l->var = fgk_local_var(e, LLVMTypeOf(start), start);
  l->step = step;
  l->end = end;
  l->cond = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "loop");
  l->body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "body");
  l->exit = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "exit");
  LLVMBuildBr(e->b, l->cond);
  LLVMPositionBuilderAtEnd(e->b, l->cond);
  LLVMValueRef i = LLVMBuildLoad2(e->b, LLVMTypeOf(start), l->var, "");
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, i, end, ""), l->body, l->exit);
  LLVMPositionBuilderAtEnd(e->b, l->body);
  return i;
}

void fgk_loop_end(fgb_emitter *e, fgk_loop *l, LLVMValueRef i) {
  LLVMBuildStore(e->b, LLVMBuildAdd(e->b, i, l->step, ""), l->var);
  LLVMBuildBr(e->b, l->cond);
  LLVMPositionBuilderAtEnd(e->b, l->exit);
}

LLVMValueRef fgk_imin(fgb_emitter *e, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

/* ---- block reduction ---- */

static LLVMValueRef smem(fgb_emitter *e) {
  static int counter;
  char name[256];
  LLVMValueRef g;
  snprintf(name, sizeof name, "fg_smem_%s", LLVMGetValueName(e->fn));
  g = LLVMGetNamedGlobal(fgb_llvm_module(e->m), name);
  if (g)
    return g;
  (void)counter;
  /* 8-byte slots: 32 per reduction (one per warp) for every reduction of
   * every row in flight, plus one for the grid-reduction flag. */
  return fgb_shared_array(e->m, name, (uint64_t)8 * 32 * (uint64_t)(fgk_flag_area(e->k) + 1));
}

/* Row + column kernels leave room for the tails' block reduction after
 * deferred rows (emit_rowcol.c). */
int fgk_flag_area(const fg_kernel *k) {
  int n = k->nreds * (k->rows_per_iter > 1 ? k->rows_per_iter : 1);
  return (k->ncols || k->ntails) && n < FGK_MAX_TAILS ? FGK_MAX_TAILS : n;
}

LLVMValueRef fgk_smem_slot(fgb_emitter *e, int slot, LLVMValueRef i32_index) {
  LLVMTypeRef i8 = LLVMInt8TypeInContext(e->ctx);
  LLVMValueRef byte = LLVMBuildAdd(
      e->b, LLVMBuildMul(e->b, i32_index, LLVMConstInt(LLVMInt32TypeInContext(e->ctx), 8, 0), ""),
      LLVMConstInt(LLVMInt32TypeInContext(e->ctx), (unsigned long long)slot * 256, 0), "");
  return fgb_gep(e->m, smem(e), i8, byte);
}

LLVMValueRef fgb_block_reduce(fgb_emitter *e, fg_opcode op, fg_dtype acc, LLVMValueRef v,
                              int slot) {
  for (int off = 16; off >= 1; off /= 2)
    v = fgb_reduce_combine(e->m, op, v, fgb_shfl_bfly(e->m, v, off), acc);
  int nwarps = e->k->block / 32;
  if (nwarps <= 1)
    return v;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid, LLVMConstInt(i32, 31, 0), "");
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, LLVMConstInt(i32, 0, 0), ""));
  LLVMBuildStore(e->b, v, fgk_smem_slot(e, slot, warp));
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  /* Every thread combines the warp totals in warp order: the same bits
   * everywhere, run after run. */
  LLVMValueRef t = fgb_reduce_identity(e->m, op, acc);
  for (int w = 0; w < nwarps; w++) {
    LLVMValueRef x =
        LLVMBuildLoad2(e->b, LLVMTypeOf(v),
                       fgk_smem_slot(e, slot, LLVMConstInt(i32, (unsigned long long)w, 0)), "");
    t = fgb_reduce_combine(e->m, op, t, x, acc);
  }
  return t;
}

void fgb_warp_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                       LLVMValueRef *v) {
  for (int off = 16; off >= 1; off /= 2)
    for (int i = 0; i < n; i++)
      v[i] = fgb_reduce_combine(e->m, ops[i], v[i], fgb_shfl_bfly(e->m, v[i], off), accs[i]);
}

void fgb_block_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                        LLVMValueRef *v, int first_slot) {
  fgb_warp_reduce_n(e, n, ops, accs, v);
  int nwarps = e->k->block / 32;
  if (nwarps <= 1)
    return;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef tid = fgb_tid(e->m, 0);
  LLVMValueRef warp = LLVMBuildLShr(e->b, tid, LLVMConstInt(i32, 5, 0), "");
  LLVMValueRef lane = LLVMBuildAnd(e->b, tid, LLVMConstInt(i32, 31, 0), "");
  LLVMBasicBlockRef merge =
      fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, LLVMConstInt(i32, 0, 0), ""));
  for (int i = 0; i < n; i++)
    LLVMBuildStore(e->b, v[i], fgk_smem_slot(e, first_slot + i, warp));
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  for (int i = 0; i < n; i++) {
    LLVMValueRef t = fgb_reduce_identity(e->m, ops[i], accs[i]);
    for (int w = 0; w < nwarps; w++) {
      LLVMValueRef x = LLVMBuildLoad2(
          e->b, LLVMTypeOf(v[i]),
          fgk_smem_slot(e, first_slot + i, LLVMConstInt(i32, (unsigned long long)w, 0)), "");
      t = fgb_reduce_combine(e->m, ops[i], t, x, accs[i]);
    }
    v[i] = t;
  }
}

/* The op a reduction node combines with (decomposition leaves only these). */
fg_opcode fgk_red_op(const fg_node *n) {
  return n->op->code == FG_OP_MEAN ? FG_OP_SUM : n->op->code;
}

fg_dtype fgk_red_acc(const fg_node *n) { return fg_reduce_acc_dtype(n->in[0]->type.dtype); }

/* Seeds reduction n's result for the row whose kept coordinates are kc
 * (in kept-dim order). */
void fgk_seed_reduction(fgb_emitter *e, const fg_node *n, const LLVMValueRef *kc,
                        LLVMValueRef total) {
  const fg_value *o = n->out[0];
  LLVMValueRef idx[FG_MAX_RANK];
  int j = 0;
  for (int d = 0, c = 0; d < e->k->rank; d++) {
    if (!e->k->mask[d])
      idx[j++] = kc[c++];
    else if (o->type.rank == e->k->rank)
      idx[j++] = fgb_const(e, 0);
  }
  fgb_memo_put(e, o, idx, fgb_convert(e->m, total, fgk_red_acc(n), o->type.dtype));
}

/* The index of a row-shaped value for the row at kept coordinates kc. */
void fgk_row_index(fgb_emitter *e, const fg_value *o, const LLVMValueRef *kc, LLVMValueRef *idx) {
  int j = 0;
  for (int d = 0, c = 0; d < e->k->rank; d++) {
    if (!e->k->mask[d])
      idx[j++] = kc[c++];
    else if (o->type.rank == e->k->rank)
      idx[j++] = fgb_const(e, 0);
  }
}

bool fgk_is_reduction_result(const fg_value *o) { return o->def->op->kind == FG_KIND_REDUCTION; }

/* ---- pointwise ---- */

/* Coordinates, lanes and lane-independent coordinates of one chunk. */
typedef struct pw_chunk {
  LLVMValueRef c[FG_MAX_RANK];
  LLVMValueRef lanes[16];
  LLVMValueRef uniform[FG_MAX_RANK];
  int nuniform;
} pw_chunk;

static void pw_chunk_at(fgb_emitter *e, LLVMValueRef base, pw_chunk *ch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  fgb_delinearize(e, base, k->dims, k->rank, ch->c);
  for (int j = 0; j < e->vec; j++) /* a 0-d domain has no lane dim (and vec 1) */
    ch->lanes[j] = last < 0 ? NULL
                   : j == 0 ? ch->c[last]
                            : LLVMBuildAdd(e->b, ch->c[last], fgb_const(e, j), "");
  ch->nuniform = 0;
  for (int d = 0; d < last; d++)
    ch->uniform[ch->nuniform++] = ch->c[d];
}

static void pw_enter(fgb_emitter *e, const pw_chunk *ch) {
  memcpy(e->lanes, ch->lanes, sizeof ch->lanes);
  memcpy(e->uniform, ch->uniform, sizeof(LLVMValueRef) * (size_t)ch->nuniform);
  e->nuniform = ch->nuniform;
}

/* Emits (or, prefetching, loads for) every output of one chunk. */
static bool pw_outputs(fgb_emitter *e, const pw_chunk *ch, bool prefetch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    LLVMValueRef vals[16], idx[FG_MAX_RANK];
    memcpy(idx, ch->c, sizeof(LLVMValueRef) * (size_t)k->rank);
    for (int j = 0; j < e->vec; j++) {
      if (k->rank)
        idx[last] = ch->lanes[j];
      if (prefetch) {
        fgb_prefetch_value(e, o, idx);
        continue;
      }
      vals[j] = fgb_emit_value(e, o, idx);
      if (!vals[j])
        return false;
    }
    if (prefetch)
      continue;
    if (k->rank)
      idx[last] = ch->lanes[0];
    fgb_emit_store_lanes(e, o, idx, vals);
  }
  return !e->failed;
}

bool fgb_emit_pointwise_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int64_t n = 1;
  for (int i = 0; i < k->rank; i++)
    n *= k->dims[i];
  int U = k->chunks > 0 ? k->chunks : 1;
  if (U > 8)
    U = 8;
  /* Chunk u of CTA b covers vectors (b*U + u)*T + tid: block-strided, so
   * each chunk is one coalesced sweep of the CTA. */
  bool exact = n % ((int64_t)k->block * U * e->vec) == 0;
  LLVMValueRef cta =
      LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, (int64_t)k->block * U), "");
  LLVMValueRef tid = fgb_thread_index(e, 0);
  pw_chunk ch[8];
  LLVMValueRef bases[8];
  for (int u = 0; u < U; u++) {
    LLVMValueRef gid = LLVMBuildAdd(
        e->b, LLVMBuildAdd(e->b, cta, fgb_const(e, (int64_t)u * k->block), ""), tid, "");
    bases[u] = e->vec > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, e->vec), "") : gid;
  }
  if (exact && (e->aligned || e->vec == 1)) {
    /* Every chunk is in range: issue all loads of all chunks first, so a
     * thread has U vector loads in flight before it computes. */
    for (int u = 0; u < U; u++) {
      pw_chunk_at(e, bases[u], &ch[u]);
      pw_enter(e, &ch[u]);
      if (U > 1 && !pw_outputs(e, &ch[u], true))
        return false;
    }
    for (int u = 0; u < U; u++) {
      pw_enter(e, &ch[u]);
      if (!pw_outputs(e, &ch[u], false))
        return false;
    }
    return !e->failed;
  }
  if (!e->aligned && e->vec > 1 && U > 1) {
    /* The fallback variant for misaligned pointers: chunks in a loop, so it
     * costs a quarter of the code (and compile time) of the aligned one. */
    fgk_loop l;
    LLVMValueRef u = fgk_loop_begin(e, &l, fgb_const(e, 0), fgb_const(e, U), fgb_const(e, 1));
    int mark = fgb_memo_mark(e);
    LLVMValueRef gid = LLVMBuildAdd(
        e->b, LLVMBuildAdd(e->b, cta, LLVMBuildMul(e->b, u, fgb_const(e, k->block), ""), ""), tid,
        "");
    LLVMValueRef base = LLVMBuildMul(e->b, gid, fgb_const(e, e->vec), "");
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, base, fgb_const(e, n), ""));
    pw_chunk_at(e, base, &ch[0]);
    pw_enter(e, &ch[0]);
    if (!pw_outputs(e, &ch[0], false))
      return false;
    fgb_memo_release(e, mark);
    fgb_end_if(e, merge);
    fgk_loop_end(e, &l, u);
    return !e->failed;
  }
  for (int u = 0; u < U; u++) {
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, bases[u], fgb_const(e, n), ""));
    int mark = fgb_memo_mark(e);
    pw_chunk_at(e, bases[u], &ch[u]);
    pw_enter(e, &ch[u]);
    if (!pw_outputs(e, &ch[u], false))
      return false;
    /* values of a guarded chunk do not dominate the next chunk */
    fgb_memo_release(e, mark);
    fgb_end_if(e, merge);
  }
  return !e->failed;
}

/* ---- grid reduction: the last CTA to arrive combines the partials ---- */

/* Every thread stores its partials (when `store_ok`), then thread 0 counts
 * the arrival; returns the flag "this CTA is the last of `split`". */
static LLVMValueRef arrive(fgb_emitter *e, LLVMValueRef counter_ptr, int split) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  fgb_fence_gpu(e->m);
  fgb_barrier(e->m);
  LLVMValueRef flag_slot = fgk_smem_slot(e, fgk_flag_area(e->k), LLVMConstInt(i32, 0, 0));
  LLVMValueRef is_t0 =
      LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, is_t0);
  LLVMValueRef old = fgb_atomic_add_i32_global(e->m, counter_ptr, LLVMConstInt(i32, 1, 0));
  LLVMValueRef last = LLVMBuildICmp(e->b, LLVMIntEQ, old,
                                    LLVMConstInt(i32, (unsigned long long)(split - 1), 0), "");
  LLVMBuildStore(e->b, LLVMBuildZExt(e->b, last, i32, ""), flag_slot);
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  LLVMValueRef f = LLVMBuildLoad2(e->b, i32, flag_slot, "");
  return LLVMBuildICmp(e->b, LLVMIntNE, f, LLVMConstInt(i32, 0, 0), "");
}

static LLVMValueRef partial_ptr(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index) {
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->partial_temp});
  /* 8-byte slots whatever the accumulator type */
  LLVMValueRef byte = LLVMBuildMul(e->b, slot_index, fgb_const(e, 8), "");
  (void)acc;
  return fgb_gep_global(e->m, base, LLVMInt8TypeInContext(e->ctx), byte);
}

void fgk_reset_counter(fgb_emitter *e, LLVMValueRef counter_ptr) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef is_t0 =
      LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, is_t0);
  LLVMValueRef st = LLVMBuildStore(e->b, LLVMConstInt(i32, 0, 0), counter_ptr);
  LLVMSetVolatile(st, 1);
  fgb_end_if(e, merge);
}

/* The column kernel's partials: row (red, s) of `kept` accumulators,
 * packed (acc-sized), rows 8 * kept bytes apart (the temp's size), so a
 * thread's V lanes are contiguous and vector-aligned. */
static LLVMValueRef col_partial_ptr(fgb_emitter *e, int64_t kept, LLVMValueRef row,
                                    LLVMValueRef elem, fg_dtype acc) {
  LLVMValueRef base = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->partial_temp});
  LLVMValueRef byte =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, fgb_const(e, 8 * kept), ""),
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

static LLVMValueRef load_partial(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index) {
  /* volatile: other CTAs wrote it; do not trust a stale L1 line */
  LLVMValueRef ld =
      LLVMBuildLoad2(e->b, fgb_reg_type(e->m, acc), partial_ptr(e, acc, slot_index), "");
  LLVMSetVolatile(ld, 1);
  return ld;
}

/* ---- row reductions ---- */

/* Coordinates of the chunk starting at reduced linear index r0: fills
 * lanes and the domain index for lane 0 (idx). */
void fgk_row_chunk(fgb_emitter *e, const fgk_row_ctx *rc, LLVMValueRef r0, LLVMValueRef *idx) {
  LLVMValueRef red[FG_MAX_RANK];
  fgb_delinearize(e, r0, rc->red_sizes, rc->nred, red);
  int last = rc->nred - 1;
  e->nuniform = 0;
  for (int i = 0; i < rc->nkept; i++)
    e->uniform[e->nuniform++] = rc->kc[i];
  for (int i = 0; i < last; i++)
    e->uniform[e->nuniform++] = red[i];
  for (int j = 0; j < e->vec; j++)
    e->lanes[j] = last < 0 ? NULL
                  : j == 0 ? red[last]
                           : LLVMBuildAdd(e->b, red[last], fgb_const(e, j), "");
  for (int d = 0, a = 0, b = 0; d < e->k->rank; d++)
    idx[d] = e->k->mask[d] ? red[b++] : rc->kc[a++];
}

void fgk_lane_index(fgb_emitter *e, const LLVMValueRef *idx0, int j, LLVMValueRef *idx) {
  memcpy(idx, idx0, sizeof(LLVMValueRef) * (size_t)e->k->rank);
  if (e->k->rank && e->lanes[j])
    idx[e->k->rank - 1] = e->lanes[j];
}

/* Accumulates reduction n over one chunk (all lanes) into acc. */
LLVMValueRef fgk_accumulate(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx0,
                            LLVMValueRef valid, LLVMValueRef acc) {
  fg_dtype ad = fgk_red_acc(n);
  LLVMValueRef id = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
  for (int j = 0; j < e->vec; j++) {
    LLVMValueRef idx[FG_MAX_RANK];
    fgk_lane_index(e, idx0, j, idx);
    LLVMValueRef x = fgb_emit_value(e, n->in[0], idx);
    if (!x)
      return NULL;
    x = fgb_convert(e->m, x, n->in[0]->type.dtype, ad);
    if (valid)
      x = LLVMBuildSelect(e->b, valid, x, id, "");
    acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, x, ad);
  }
  return acc;
}

void fgk_chunks_save(fgb_emitter *e, fgk_chunks *ch, int c, LLVMValueRef valid) {
  ch->valid[c] = valid;
  memcpy(ch->lanes[c], e->lanes, sizeof e->lanes);
  memcpy(ch->uni[c], e->uniform, sizeof e->uniform);
  ch->nuni[c] = e->nuniform;
}

void fgk_chunks_enter(fgb_emitter *e, const fgk_chunks *ch, int c) {
  memcpy(e->lanes, ch->lanes[c], sizeof e->lanes);
  memcpy(e->uniform, ch->uni[c], sizeof e->uniform);
  e->nuniform = ch->nuni[c];
}

LLVMValueRef fgk_chunks_accumulate(fgb_emitter *e, const fgk_chunks *ch, const fg_node *n,
                                   LLVMValueRef acc) {
  for (int c = 0; c < ch->n && acc; c++) {
    fgk_chunks_enter(e, ch, c);
    acc = fgk_accumulate(e, n, ch->idx0[c], ch->valid[c], acc);
  }
  return acc;
}

void fgk_chunks_store_full(fgb_emitter *e, const fgk_chunks *ch, const fg_value *o) {
  for (int c = 0; c < ch->n; c++) {
    fgk_chunks_enter(e, ch, c);
    fgk_store_full(e, o, ch->idx0[c], ch->valid[c]);
  }
}

void fgk_store_full(fgb_emitter *e, const fg_value *o, const LLVMValueRef *idx0,
                    LLVMValueRef valid) {
  LLVMValueRef vals[16], idx[FG_MAX_RANK];
  for (int j = 0; j < e->vec; j++) {
    fgk_lane_index(e, idx0, j, idx);
    vals[j] = fgb_emit_value(e, o, idx);
    if (!vals[j])
      return;
  }
  LLVMBasicBlockRef merge = valid ? fgb_begin_if(e, valid) : NULL;
  fgb_emit_store_lanes(e, o, idx0, vals);
  if (merge)
    fgb_end_if(e, merge);
}

bool fgk_store_phase(fgb_emitter *e, fg_phase ph, fgk_out_index index, const void *ctx,
                     LLVMValueRef guard) {
  const fg_kernel *k = e->k;
  /* values first (every thread: they may need block-wide work), then the
   * stores where guard holds; no cap on how many */
  LLVMValueRef *vals = calloc((size_t)k->nouts + 1, sizeof *vals);
  if (!vals) {
    fgb_fail(e, "out of memory");
    return false;
  }
  int n = 0;
  LLVMBasicBlockRef merge = NULL;
  for (int pass = 0; pass < 2 && !e->failed; pass++) {
    if (pass == 1) {
      if (n == 0)
        break;
      merge = fgb_begin_if(e, guard);
    }
    for (int i = 0; i < k->nouts && !e->failed; i++) {
      const fg_value *o = k->outs[i];
      if ((fgb_is_full(e, o) && !fgk_is_reduction_result(o)) || fg_plan_phase(e->p, k, o) != ph)
        continue;
      LLVMValueRef idx[FG_MAX_RANK];
      index(e, o, ctx, idx);
      if (pass == 0)
        vals[i] = fgb_emit_value(e, o, idx), n++;
      else
        fgb_emit_store(e, o, idx, vals[i]);
    }
  }
  if (merge)
    fgb_end_if(e, merge);
  free(vals);
  return !e->failed;
}

static void row_out_index(fgb_emitter *e, const fg_value *o, const void *rc, LLVMValueRef *idx) {
  fgk_row_index(e, o, ((const fgk_row_ctx *)rc)->kc, idx);
}

bool fgk_store_rows(fgb_emitter *e, const fgk_row_ctx *rc, LLVMValueRef guard) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  if (!guard)
    guard = LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
  return fgk_store_phase(e, FG_PHASE_ROWS, row_out_index, rc, guard);
}

bool fgb_emit_row_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  if (k->ncols || k->ntails)
    return fgb_emit_rowcol_kernel(e);
  fgk_row_ctx rc;
  memset(&rc, 0, sizeof rc);
  for (int d = 0; d < k->rank; d++) {
    if (k->mask[d])
      rc.red_sizes[rc.nred++] = k->dims[d];
    else
      rc.kept_sizes[rc.nkept++] = k->dims[d];
  }
  int64_t R = k->red, S = k->split, V = e->vec, T = k->block;
  int64_t slice = S > 1 ? ceil_div(ceil_div(R, S), V) * V : R;
  LLVMValueRef cta = fgb_block_index(e, 0);
  LLVMValueRef row = S > 1 ? LLVMBuildUDiv(e->b, cta, fgb_const(e, S), "") : cta;
  LLVMValueRef s = S > 1 ? LLVMBuildURem(e->b, cta, fgb_const(e, S), "") : fgb_const(e, 0);
  fgb_delinearize(e, row, rc.kept_sizes, rc.nkept, rc.kc);
  rc.rstart = LLVMBuildMul(e->b, s, fgb_const(e, slice), "");
  rc.rend = fgk_imin(e, LLVMBuildAdd(e->b, rc.rstart, fgb_const(e, slice), ""), fgb_const(e, R));
  LLVMValueRef tid = fgb_thread_index(e, 0);
  LLVMValueRef tv = LLVMBuildMul(e->b, tid, fgb_const(e, V), "");
  LLVMValueRef totals[64];
  int nreds = k->nreds;
  if (nreds > 64) {
    fgb_fail(e, "row kernel with %d reductions: the code generator supports at most 64", nreds);
    return false;
  }

  /* The fallback variant for misaligned pointers (vec > 1, not aligned)
   * re-reads the row in each phase instead of unrolling it into registers:
   * far less code, and it runs only when a caller passes odd pointers. */
  if (k->persistent && (e->aligned || e->vec == 1)) {
    int E = k->chunks;
    fgk_chunks ch;
    ch.n = E;
    bool exact = (R % (T * V * E)) == 0 && S == 1 && T * V * E == R;
    for (int c = 0; c < E; c++) {
      LLVMValueRef r0 = LLVMBuildAdd(
          e->b, rc.rstart, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)c * T * V), tv, ""), "");
      LLVMValueRef valid = exact ? NULL : LLVMBuildICmp(e->b, LLVMIntSLT, r0, rc.rend, "");
      if (valid)
        r0 = LLVMBuildSelect(e->b, valid, r0, rc.rstart, "");
      fgk_row_chunk(e, &rc, r0, ch.idx0[c]);
      fgk_chunks_save(e, &ch, c, valid);
    }
    for (int i = 0; i < nreds; i++) {
      const fg_node *n = k->reds[i];
      LLVMValueRef acc = fgk_chunks_accumulate(
          e, &ch, n, fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
      if (!acc)
        return false;
      totals[i] = fgb_block_reduce(e, fgk_red_op(n), fgk_red_acc(n), acc, i);
      if (S == 1)
        fgk_seed_reduction(e, n, rc.kc, totals[i]);
    }
    if (S == 1) {
      for (int i = 0; i < k->nouts; i++) {
        const fg_value *o = k->outs[i];
        if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
          fgk_chunks_store_full(e, &ch, o);
      }
    }
  } else {
    for (int i = 0; i < nreds; i++) {
      const fg_node *n = k->reds[i];
      LLVMValueRef accv = fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(n)),
                                        fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
      fgk_loop l;
      LLVMValueRef r0 = fgk_loop_begin(e, &l, LLVMBuildAdd(e->b, rc.rstart, tv, ""), rc.rend,
                                       fgb_const(e, T * V));
      int mark = fgb_memo_mark(e);
      LLVMValueRef idx0[FG_MAX_RANK];
      fgk_row_chunk(e, &rc, r0, idx0);
      LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
      acc = fgk_accumulate(e, n, idx0, NULL, acc);
      if (!acc)
        return false;
      LLVMBuildStore(e->b, acc, accv);
      fgb_memo_release(e, mark);
      fgk_loop_end(e, &l, r0);
      acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
      totals[i] = fgb_block_reduce(e, fgk_red_op(n), fgk_red_acc(n), acc, i);
      if (S == 1)
        fgk_seed_reduction(e, n, rc.kc, totals[i]);
    }
    if (S == 1) {
      for (int i = 0; i < k->nouts; i++) {
        const fg_value *o = k->outs[i];
        if (!fgb_is_full(e, o) || fgk_is_reduction_result(o))
          continue;
        fgk_loop l;
        LLVMValueRef r0 = fgk_loop_begin(e, &l, LLVMBuildAdd(e->b, rc.rstart, tv, ""), rc.rend,
                                         fgb_const(e, T * V));
        int mark = fgb_memo_mark(e);
        LLVMValueRef idx0[FG_MAX_RANK];
        fgk_row_chunk(e, &rc, r0, idx0);
        fgk_store_full(e, o, idx0, NULL);
        fgb_memo_release(e, mark);
        fgk_loop_end(e, &l, r0);
      }
    }
  }
  if (e->failed)
    return false;
  e->nuniform = 0;
  for (int i = 0; i < rc.nkept; i++)
    e->uniform[e->nuniform++] = rc.kc[i];
  if (S > 1) {
    /* partials[(red * B + row) * S + s] */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    LLVMValueRef is_t0 =
        LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, is_t0);
    for (int i = 0; i < nreds; i++) {
      LLVMValueRef slot = LLVMBuildAdd(
          e->b,
          LLVMBuildMul(e->b, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * k->outer), row, ""),
                       fgb_const(e, S), ""),
          s, "");
      LLVMBuildStore(e->b, totals[i], partial_ptr(e, fgk_red_acc(k->reds[i]), slot));
    }
    fgb_end_if(e, merge);
    LLVMValueRef counters = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->counter_temp});
    LLVMValueRef cptr = fgb_gep_global(e->m, counters, i32, row);
    LLVMValueRef last = arrive(e, cptr, (int)S);
    LLVMBasicBlockRef done = fgb_begin_if(e, last);
    fgb_fence_gpu(e->m);
    /* The last CTA combines the row's S partials cooperatively: thread t
     * takes partials t, t+T, ... in order, then a block reduction; a fixed
     * assignment and a fixed tree, so the same bits every run. */
    for (int i = 0; i < nreds; i++) {
      const fg_node *n = k->reds[i];
      LLVMValueRef accv = fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(n)),
                                        fgb_reduce_identity(e->m, fgk_red_op(n), fgk_red_acc(n)));
      fgk_loop l;
      LLVMValueRef si = fgk_loop_begin(e, &l, tid, fgb_const(e, S), fgb_const(e, T));
      LLVMValueRef slot = LLVMBuildAdd(
          e->b,
          LLVMBuildMul(e->b, LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * k->outer), row, ""),
                       fgb_const(e, S), ""),
          si, "");
      LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
      acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, load_partial(e, fgk_red_acc(n), slot),
                               fgk_red_acc(n));
      LLVMBuildStore(e->b, acc, accv);
      fgk_loop_end(e, &l, si);
      LLVMValueRef mine = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(n)), accv, "");
      fgk_seed_reduction(e, n, rc.kc, fgb_block_reduce(e, fgk_red_op(n), fgk_red_acc(n), mine, i));
    }
    fgk_reset_counter(e, cptr);
    fgk_store_rows(e, &rc, NULL);
    fgb_end_if(e, done);
  } else {
    fgk_store_rows(e, &rc, NULL);
  }
  return !e->failed;
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

bool fgb_emit_column_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int nkept = 0, nred = 0;
  int64_t kept_sizes[FG_MAX_RANK], red_sizes[FG_MAX_RANK], kept = 1, R = k->red;
  for (int d = 0; d < k->rank; d++) {
    if (k->mask[d])
      red_sizes[nred++] = k->dims[d];
    else {
      kept_sizes[nkept++] = k->dims[d];
      kept *= k->dims[d];
    }
  }
  int64_t V = e->vec, S = k->split;
  bool lane_dim = V > 1; /* the schedule vectorizes only a kept last dim */
  LLVMValueRef gid =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, fgb_block_index(e, 0), fgb_const(e, k->block), ""),
                   fgb_thread_index(e, 0), "");
  LLVMValueRef base = V > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, V), "") : gid;
  LLVMValueRef valid = LLVMBuildICmp(e->b, LLVMIntSLT, base, fgb_const(e, kept), "");
  LLVMValueRef basec = LLVMBuildSelect(e->b, valid, base, fgb_const(e, 0), "");
  LLVMValueRef kc[FG_MAX_RANK];
  fgb_delinearize(e, basec, kept_sizes, nkept, kc);
  LLVMValueRef kc_lane[16][FG_MAX_RANK];
  LLVMValueRef lanes[16];
  for (int j = 0; j < V; j++) {
    lanes[j] = !lane_dim ? NULL
               : j == 0  ? kc[nkept - 1]
                         : LLVMBuildAdd(e->b, kc[nkept - 1], fgb_const(e, j), "");
    memcpy(kc_lane[j], kc, sizeof kc);
    if (lane_dim)
      kc_lane[j][nkept - 1] = lanes[j];
  }
  int64_t rs = ceil_div(R, S);
  LLVMValueRef s = S > 1 ? fgb_block_index(e, 1) : fgb_const(e, 0);
  LLVMValueRef rstart = LLVMBuildMul(e->b, s, fgb_const(e, rs), "");
  LLVMValueRef rend =
      fgk_imin(e, LLVMBuildAdd(e->b, rstart, fgb_const(e, rs), ""), fgb_const(e, R));
  int nreds = k->nreds < 8 ? k->nreds : 8;
  if (k->nreds > 8) {
    fgb_fail(e, "column kernel with more than 8 reductions");
    return false;
  }
  LLVMValueRef accv[8][16];
  for (int i = 0; i < nreds; i++)
    for (int j = 0; j < V; j++)
      accv[i][j] =
          fgk_local_var(e, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])),
                        fgb_reduce_identity(e->m, fgk_red_op(k->reds[i]), fgk_red_acc(k->reds[i])));
  col_rows_ctx cx = {kc, nkept, lane_dim, lanes, red_sizes, nred, accv, nreds, valid};
  /* Rows in groups of U (all their loads issued first), then the rest one
   * at a time. */
  /* The plain variant (misaligned pointers) stays compact: one row. */
  int U = k->rows_per_iter > 1 && e->aligned ? k->rows_per_iter : 1;
  LLVMValueRef rmain = rstart;
  if (U > 1) {
    LLVMValueRef cnt = LLVMBuildSub(e->b, rend, rstart, "");
    rmain = LLVMBuildSub(e->b, rend, LLVMBuildSRem(e->b, cnt, fgb_const(e, U), ""), "");
    fgk_loop l;
    LLVMValueRef r = fgk_loop_begin(e, &l, rstart, rmain, fgb_const(e, U));
    if (!col_rows(e, &cx, r, U))
      return false;
    fgk_loop_end(e, &l, r);
  }
  fgk_loop l;
  LLVMValueRef r = fgk_loop_begin(e, &l, rmain, rend, fgb_const(e, 1));
  if (!col_rows(e, &cx, r, 1))
    return false;
  fgk_loop_end(e, &l, r);
  if (e->failed)
    return false;
  LLVMValueRef tot[8][16];
  for (int i = 0; i < nreds; i++)
    for (int j = 0; j < V; j++)
      tot[i][j] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, fgk_red_acc(k->reds[i])), accv[i][j], "");
  LLVMBasicBlockRef done = NULL;
  if (S > 1) {
    LLVMBasicBlockRef merge = fgb_begin_if(e, valid);
    for (int i = 0; i < nreds; i++) {
      LLVMValueRef row = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * S), s, "");
      col_partial_lanes(e, col_partial_ptr(e, kept, row, base, fgk_red_acc(k->reds[i])),
                        fgk_red_acc(k->reds[i]), (int)V, tot[i], true);
    }
    fgb_end_if(e, merge);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
    LLVMValueRef counters = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->counter_temp});
    LLVMValueRef cptr = fgb_gep_global(e->m, counters, i32, fgb_block_index(e, 0));
    LLVMValueRef last = arrive(e, cptr, (int)S);
    done = fgb_begin_if(e, last);
    fgb_fence_gpu(e->m);
    for (int i = 0; i < nreds; i++) {
      const fg_node *n = k->reds[i];
      fg_dtype ad = fgk_red_acc(n);
      for (int j = 0; j < V; j++)
        LLVMBuildStore(e->b, fgb_reduce_identity(e->m, fgk_red_op(n), ad), accv[i][j]);
      /* Partials s..s+B-1 are loaded before any is combined (in-order issue
       * would otherwise wait a memory latency per partial), then combined
       * in order s, s+1, ...: B * V values in flight, as vector loads. */
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
          col_partial_lanes(e, col_partial_ptr(e, kept, row, basec, ad), ad, (int)V, lv, false);
          for (int j = 0; j < V; j++)
            got[j][q] = lv[j];
        }
        for (int j = 0; j < V; j++) {
          LLVMValueRef acc = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), accv[i][j], "");
          for (int q = 0; q < step; q++)
            acc = fgb_reduce_combine(e->m, fgk_red_op(n), acc, got[j][q], ad);
          LLVMBuildStore(e->b, acc, accv[i][j]);
        }
        fgk_loop_end(e, &sl, si);
      }
      for (int j = 0; j < V; j++)
        tot[i][j] = LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), accv[i][j], "");
    }
    fgk_reset_counter(e, cptr);
  }
  for (int i = 0; i < nreds; i++)
    for (int j = 0; j < V; j++)
      fgk_seed_reduction(e, k->reds[i], kc_lane[j], tot[i][j]);
  /* Row-shaped outputs, one per lane. */
  e->nuniform = 0;
  for (int i = 0; i < nkept - (lane_dim ? 1 : 0); i++)
    e->uniform[e->nuniform++] = kc[i];
  for (int i = 0; i < k->nouts; i++) {
    const fg_value *o = k->outs[i];
    if (fgb_is_full(e, o) && !fgk_is_reduction_result(o))
      continue;
    LLVMValueRef vals[16], idx[FG_MAX_RANK];
    for (int j = 0; j < V; j++) {
      fgk_row_index(e, o, kc_lane[j], idx);
      vals[j] = fgb_emit_value(e, o, idx);
      if (!vals[j])
        return false;
    }
    LLVMBasicBlockRef merge = fgb_begin_if(e, valid);
    fgk_row_index(e, o, kc_lane[0], idx);
    if (o->type.rank > 0 && lane_dim)
      fgb_emit_store_lanes(e, o, idx, vals);
    else
      fgb_emit_store(e, o, idx, vals[0]);
    fgb_end_if(e, merge);
  }
  if (done)
    fgb_end_if(e, done);
  return !e->failed;
}
