/* The pieces the kernel skeletons share (emit_skel.h): loops and locals,
 * block reductions, the grid reduction's arrival and partials, and the
 * rows of the row kernels (chunks, stores by phase), which the row +
 * column form (emit_rowcol.c) uses too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

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
  fgb_block_reduce_n(e, 1, &op, &acc, &v, slot);
  return v;
}

void fgb_warp_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                       LLVMValueRef *v) {
  for (int off = 16; off >= 1; off /= 2)
    for (int i = 0; i < n; i++)
      v[i] = fgb_reduce_combine(e->m, ops[i], v[i], fgb_shfl_bfly(e->m, v[i], off), accs[i]);
}

void fgb_group_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                        LLVMValueRef *v, int lanes) {
  for (int off = lanes / 2; off >= 1; off /= 2)
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

void fgk_row_ctx_sizes(const fg_kernel *k, fgk_row_ctx *rc) {
  for (int d = 0; d < k->rank; d++) {
    if (k->mask[d])
      rc->red_sizes[rc->nred++] = k->dims[d];
    else
      rc->kept_sizes[rc->nkept++] = k->dims[d];
  }
}

/* The op a reduction node combines with (decomposition leaves only these). */
fg_opcode fgk_red_op(const fg_node *n) {
  return n->op->code == FG_OP_MEAN ? FG_OP_SUM : n->op->code;
}

fg_dtype fgk_red_acc(const fg_node *n) { return fg_reduce_acc_dtype(n->in[0]->type.dtype); }

/* Seeds reduction n's result for the row whose kept coordinates are kc
 * (in kept-dim order). */
/* amax/amin of floats over an extent that is empty at run time (a
 * symbolic size of 0): NaN, as docs/format.md states and the interpreter
 * gives, not the combining identity (±inf) that the loops leave; static
 * empty extents are folded into `full` before code generation. */
LLVMValueRef fgk_empty_reduction(fgb_emitter *e, const fg_node *n, LLVMValueRef total,
                                 fg_dtype acc) {
  fg_opcode op = fgk_red_op(n);
  if ((op != FG_OP_AMAX && op != FG_OP_AMIN) || !fg_dtype_is_float(acc))
    return total;
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  const fg_type *t = &n->in[0]->type;
  LLVMValueRef empty = NULL;
  for (int d = 0; d < t->rank; d++) {
    if (!mask[d] || !fg_sym_involves(&e->p->sym, t->dims[d].size))
      continue;
    LLVMValueRef z =
        LLVMBuildICmp(e->b, LLVMIntEQ, fgb_extent(e, t->dims[d].size), fgb_const(e, 0), "");
    empty = empty ? LLVMBuildOr(e->b, empty, z, "") : z;
  }
  if (!empty)
    return total;
  return LLVMBuildSelect(e->b, empty, LLVMConstReal(LLVMTypeOf(total), NAN), total, "");
}

void fgk_seed_reduction(fgb_emitter *e, const fg_node *n, const LLVMValueRef *kc,
                        LLVMValueRef total) {
  total = fgk_empty_reduction(e, n, total, fgk_red_acc(n));
  const fg_value *o = n->out[0];
  LLVMValueRef idx[FG_MAX_RANK];
  fgk_row_index(e, o, kc, idx);
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

/* ---- grid reduction: the last CTA to arrive combines the partials ---- */

/* Every thread stores its partials (when `store_ok`), then thread 0 counts
 * the arrival; returns the flag "this CTA is the last of `split`". */
LLVMValueRef fgk_arrive(fgb_emitter *e, LLVMValueRef counter_ptr, int split) {
  return fgk_arrive_n(
      e, counter_ptr,
      LLVMConstInt(LLVMInt32TypeInContext(e->ctx), (unsigned long long)(split - 1), 0));
}

LLVMValueRef fgk_arrive_n(fgb_emitter *e, LLVMValueRef counter_ptr, LLVMValueRef split_less_1) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  fgb_fence_gpu(e->m);
  fgb_barrier(e->m);
  LLVMValueRef flag_slot = fgk_smem_slot(e, fgk_flag_area(e->k), LLVMConstInt(i32, 0, 0));
  LLVMValueRef is_t0 =
      LLVMBuildICmp(e->b, LLVMIntEQ, fgb_tid(e->m, 0), LLVMConstInt(i32, 0, 0), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, is_t0);
  LLVMValueRef old = fgb_atomic_add_i32_global(e->m, counter_ptr, LLVMConstInt(i32, 1, 0));
  LLVMValueRef last = LLVMBuildICmp(e->b, LLVMIntEQ, old, split_less_1, "");
  LLVMBuildStore(e->b, LLVMBuildZExt(e->b, last, i32, ""), flag_slot);
  fgb_end_if(e, merge);
  fgb_barrier(e->m);
  LLVMValueRef f = LLVMBuildLoad2(e->b, i32, flag_slot, "");
  return LLVMBuildICmp(e->b, LLVMIntNE, f, LLVMConstInt(i32, 0, 0), "");
}

LLVMValueRef fgk_partial_ptr(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index) {
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

LLVMValueRef fgk_load_partial(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index) {
  /* volatile: other CTAs wrote it; do not trust a stale L1 line */
  LLVMValueRef ld =
      LLVMBuildLoad2(e->b, fgb_reg_type(e->m, acc), fgk_partial_ptr(e, acc, slot_index), "");
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

LLVMValueRef fgk_attn_operand(fgb_emitter *e, int operand, fg_strided *s) {
  const fg_value *base;
  if (!fg_plan_attn_source(e->p, e->k->attn->in[operand], e->k->id, &base, s)) {
    fgb_fail(e, "operand %d of %s is not in memory", operand, e->k->attn->op->name);
    return NULL;
  }
  fg_buf_ref buf = base->param_index >= 0 ? (fg_buf_ref){FG_BUF_PARAM, base->param_index}
                                          : e->p->store[base->id].buf;
  return fgb_buffer_of(e, buf);
}
