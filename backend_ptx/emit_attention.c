/* The attention kernel (issue 19): `o, lse = sdpa(q, k, v)` forward as
 * FlashAttention-2's loop (Dao, 2023), in fusec's terms (docs/attention.md).
 *
 * A CTA owns br = 16 x warps query rows of one (batch, head) (grid x: the
 * query block, the last one first under a causal mask, whose work is
 * largest; grid y: batch x heads). Each warp owns 16 of the rows, one row
 * block of mma.sync m16n8k16, so nothing is exchanged between warps:
 *
 *   Q tile -> shared -> A fragments in registers, once
 *   for each key block of bc keys (under a causal mask, only those some
 *   row of the CTA sees):
 *     K, V tiles -> shared: two stages, the next block's copied while this
 *     one computes (cp.async in the aligned variant; plan: stages)
 *     S = Q K^T                  (mma, f32 accumulators: 16 x bc a warp)
 *     scaled into log2 units (scale x log2 e folded), masked to -inf
 *     (keys past the end; causal: key j > query i, top-left aligned) in
 *     the blocks where the warp's rows meet the end or the diagonal
 *     m_new = max(m, rowmax S); P = 2^(S - m_new); l = l 2^(m - m_new) + rowsum P
 *     O = O 2^(m - m_new) + P V  (P rounded to the input dtype: the A
 *                                 operand straight from S's registers)
 *   o = O / l (rounded to the dtype), lse = m ln 2 + ln l
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .bf16 /
 * .f16): lane = 4 g + t (g groupID, t threadID_in_group). A (16 x 16,
 * row): a0a1 row g cols 2t,2t+1; a2a3 row g+8; a4a5 row g cols 2t+8,+9;
 * a6a7 row g+8 cols 2t+8,+9. B (16 x 8, col): b0b1 rows 2t,2t+1 col g;
 * b2b3 rows 2t+8,+9. C/D (16 x 8): c0c1 row g cols 2t,2t+1; c2c3 row g+8.
 * So S's accumulators of two adjacent 8-key tiles are exactly P's A
 * fragment of 16 keys, and a row's values live in the 4 lanes of a quad
 * (max and sum: two butterfly shuffles). K stored [key][d] is B = K^T
 * column-major: b0b1 is one 32-bit word of a K row, so ldmatrix gives
 * it. V stored [key][d] is B row-major: b0 and b1 are two rows, so
 * ldmatrix .trans gives them (plan: ldmatrix; without, plain 32-bit and
 * paired 16-bit shared loads).
 *
 * Shared memory (dynamic; the plan's smem): Q [br][pitch], then per stage
 * K [bc][pitch] and V [bc][pitch], in elements; pitch = D + 8 so that the
 * 8 rows a fragment load or an ldmatrix phase touches fall in different
 * banks. Rows past the sequence are
 * zero-filled (a zero V row times a zero probability is zero; garbage could
 * be NaN). Tiles are read through each operand's strides (view.h: a
 * parameter, a view of one, or a stored value), so transposed or packed
 * layouts need no copy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "fgb_internal.h"
#include "tensor_core.h"

typedef struct attn_src { /* where q, k or v is read */
  LLVMValueRef ptr;       /* the global buffer */
  fg_strided s;           /* [B, H, S, D] over it */
  LLVMValueRef base;      /* element offset of this CTA's (batch, head) */
} attn_src;

typedef struct attn {
  fgb_emitter *e;
  fgb_module *m;
  LLVMBuilderRef b;
  const fg_kernel *k;
  fg_dtype dt;
  bool causal;
  int64_t Sq, Sk, D;
  int br, bc, pitch;
  attn_src q, k_, v;
  LLVMValueRef smem;                   /* i8 array in shared memory */
  LLVMValueRef tid, warp, g, t, tzero; /* i32; tzero: t == 0 */
  LLVMValueRef q0;                     /* the CTA's first query row (i32) */
  LLVMValueRef row[2];                 /* this thread's rows: warp's first + g, + 8 */
} attn;

static LLVMValueRef i32c(attn *a, int64_t v) {
  return LLVMConstInt(a->m->i32, (unsigned long long)v, 1);
}
static LLVMValueRef f32c(attn *a, double v) { return LLVMConstReal(a->m->f32, v); }

static LLVMValueRef to_ity(attn *a, LLVMValueRef v) {
  return a->e->ity == a->m->i32 ? v : LLVMBuildSExt(a->b, v, a->e->ity, "");
}

/* ---- operands ---- */

static bool source(attn *a, int operand, attn_src *src, LLVMValueRef bi, LLVMValueRef hi) {
  fgb_emitter *e = a->e;
  const fg_value *base;
  if (!fg_plan_attn_source(e->p, a->k->attn->in[operand], a->k->id, &base, &src->s)) {
    fgb_fail(e, "operand %d of sdpa is not in memory", operand);
    return false;
  }
  fg_buf_ref buf = base->param_index >= 0 ? (fg_buf_ref){FG_BUF_PARAM, base->param_index}
                                          : e->p->store[base->id].buf;
  src->ptr = fgb_buffer_of(e, buf);
  if (!src->ptr)
    return false;
  /* batch and head coordinates of a size-1 dim are 0 (a broadcast operand) */
  LLVMValueRef off = fgb_const(e, src->s.offset);
  LLVMValueRef c[2] = {bi, hi};
  for (int d = 0; d < 2; d++)
    if (src->s.sizes[d] > 1)
      off = LLVMBuildAdd(a->b, off, LLVMBuildMul(a->b, c[d], fgb_const(e, src->s.strides[d]), ""),
                         "");
  src->base = off;
  return true;
}

/* Copies rows [r0, r0 + rows) of a (batch, head) slice into the shared
 * tile at byte `at`, rows at or past `limit` as zeros. A thread copies
 * pieces tid, tid + block, ... of 8 elements. */
static void load_tile(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                      LLVMValueRef at, bool async) {
  fgb_emitter *e = a->e;
  LLVMBuilderRef b = a->b;
  fgb_module *m = a->m;
  int per_row = (int)(a->D / 8), pieces = rows * per_row, block = a->k->block;
  bool vec = e->aligned && e->vec == 8;
  LLVMTypeRef v4 = LLVMVectorType(m->i32, 4);
  for (int u = 0; u < pieces / block; u++) {
    LLVMValueRef piece = LLVMBuildAdd(b, a->tid, i32c(a, (int64_t)u * block), "");
    LLVMValueRef r = LLVMBuildUDiv(b, piece, i32c(a, per_row), "");
    LLVMValueRef c = LLVMBuildMul(b, LLVMBuildURem(b, piece, i32c(a, per_row), ""), i32c(a, 8), "");
    LLVMValueRef row = LLVMBuildAdd(b, r0, r, "");
    LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntSLT, row, i32c(a, limit), "");
    /* rows past the end read the last row (in bounds) and store zeros */
    LLVMValueRef safe = LLVMBuildSelect(b, valid, row, i32c(a, limit - 1), "");
    LLVMValueRef goff = LLVMBuildAdd(
        b, src->base,
        LLVMBuildAdd(b, LLVMBuildMul(b, to_ity(a, safe), fgb_const(e, src->s.strides[2]), ""),
                     LLVMBuildMul(b, to_ity(a, c), fgb_const(e, src->s.strides[3]), ""), ""),
        "");
    LLVMValueRef soff = LLVMBuildMul(
        b, LLVMBuildAdd(b, LLVMBuildMul(b, r, i32c(a, a->pitch), ""), c, ""), i32c(a, 2), "");
    LLVMValueRef sptr = fgb_tc_smem_at(a->m, a->smem, LLVMBuildAdd(b, soff, at, ""));
    if (vec && async) { /* cp.async, 0 bytes read past the end: zeros */
      LLVMValueRef gp = fgb_gep_global(m, src->ptr, m->i16, goff);
      fgb_cp_async16_zfill(m, sptr, gp, LLVMBuildSelect(b, valid, i32c(a, 16), i32c(a, 0), ""));
      continue;
    }
    if (vec) {
      LLVMValueRef gp = fgb_gep_global(m, src->ptr, m->i16, goff);
      LLVMValueRef ld = LLVMBuildLoad2(b, v4, gp, "");
      LLVMSetAlignment(ld, 16);
      LLVMSetMetadata(ld, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
      LLVMValueRef st =
          LLVMBuildStore(b, LLVMBuildSelect(b, valid, ld, LLVMConstNull(v4), ""), sptr);
      LLVMSetAlignment(st, 16);
      continue;
    }
    LLVMValueRef words[4];
    for (int j = 0; j < 8; j++) {
      LLVMValueRef o = LLVMBuildAdd(b, goff, fgb_const(e, (int64_t)j * src->s.strides[3]), "");
      LLVMValueRef ld = LLVMBuildLoad2(b, m->i16, fgb_gep_global(m, src->ptr, m->i16, o), "");
      LLVMSetAlignment(ld, 2);
      LLVMSetMetadata(ld, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
      LLVMValueRef w = LLVMBuildZExt(b, ld, m->i32, "");
      if (j & 1)
        words[j / 2] = LLVMBuildOr(b, words[j / 2], LLVMBuildShl(b, w, i32c(a, 16), ""), "");
      else
        words[j / 2] = w;
    }
    LLVMValueRef vv = LLVMGetUndef(v4);
    for (int j = 0; j < 4; j++)
      vv = LLVMBuildInsertElement(b, vv, words[j], i32c(a, j), "");
    LLVMValueRef st = LLVMBuildStore(b, LLVMBuildSelect(b, valid, vv, LLVMConstNull(v4), ""), sptr);
    LLVMSetAlignment(st, 16);
  }
}

/* ---- the kernel ---- */

enum { MAX_D = 128, MAX_BC = 64 };

/* What one key block needs besides the attn state: the running max (log2
 * units) and this thread's share of the sum of its rows g and g + 8, O's
 * accumulators (D/8 tiles of 16 x 8), all locals; Q's A fragments. */
typedef struct attn_state {
  LLVMValueRef m[2], l[2], o[MAX_D / 8][4];
  LLVMValueRef qa[MAX_D / 16][4];
  LLVMValueRef kbase, vbase; /* this thread's fragment bases in the key tiles (buffer 0) */
  LLVMValueRef scale2;       /* scale x log2 e */
  LLVMValueRef wrow0;        /* the warp's first query row */
} attn_state;

/* S = Q K^T for key block k0 from the K tile at kbase: nn tiles of 16 x 8. */
static void block_scores(attn *a, attn_state *st, LLVMValueRef kbase, LLVMValueRef s[][4]) {
  int nkq = (int)(a->D / 16), nn = a->bc / 8;
  LLVMValueRef zero = f32c(a, 0.0);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = zero;
  for (int j = 0; j < nn; j++)
    for (int kk = 0; kk < nkq; kk += 2) {
      LLVMValueRef bw[4];
      if (a->k->attn_ldmatrix) /* words: (kk, b0) (kk, b1) (kk+1, b0) (kk+1, b1) */
        fgb_tc_ldmatrix4(a->m, kbase, a->pitch, j * 8, kk * 16, false, bw);
      else
        for (int i = 0; i < 4; i++)
          bw[i] = fgb_tc_lds32(a->m, kbase, a->pitch, j * 8, kk * 16 + i * 8);
      fgb_tc_mma(a->m, a->dt, st->qa[kk], bw[0], bw[1], s[j]);
      fgb_tc_mma(a->m, a->dt, st->qa[kk + 1], bw[2], bw[3], s[j]);
    }
}

/* Scales S to log2 units and masks keys past Sk and, causal, keys past the
 * row; only where the warp's rows meet the block's end or the diagonal (a
 * branch around the masks, phis after it). */
static void block_mask(attn *a, attn_state *st, LLVMValueRef k0, LLVMValueRef s[][4]) {
  LLVMBuilderRef b = a->b;
  int nn = a->bc / 8;
  LLVMValueRef ninf = f32c(a, -INFINITY);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = LLVMBuildFMul(b, s[j][i], st->scale2, "");
  LLVMValueRef kend = LLVMBuildAdd(b, k0, i32c(a, a->bc), "");
  LLVMValueRef need = LLVMBuildICmp(b, LLVMIntSGT, kend, i32c(a, a->Sk), "");
  if (a->causal) /* the block's last key past the warp's first row */
    need = LLVMBuildOr(
        b, need, LLVMBuildICmp(b, LLVMIntSGT, LLVMBuildSub(b, kend, i32c(a, 1), ""), st->wrow0, ""),
        "");
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
  LLVMValueRef fn = fgb_current_fn(a->m);
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(a->m->ctx, fn, "mask");
  LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(a->m->ctx, fn, "masked");
  LLVMBuildCondBr(b, need, then, merge);
  LLVMPositionBuilderAtEnd(b, then);
  LLVMValueRef two_t = LLVMBuildMul(b, a->t, i32c(a, 2), "");
  LLVMValueRef masked[MAX_BC / 8][4];
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      LLVMValueRef key =
          LLVMBuildAdd(b, k0, LLVMBuildAdd(b, two_t, i32c(a, j * 8 + (i & 1)), ""), "");
      LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntSLT, key, i32c(a, a->Sk), "");
      if (a->causal)
        ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLE, key, a->row[i / 2], ""), "");
      masked[j][i] = LLVMBuildSelect(b, ok, s[j][i], ninf, "");
    }
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, merge);
  LLVMPositionBuilderAtEnd(b, merge);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      LLVMValueRef phi = LLVMBuildPhi(b, a->m->f32, "");
      LLVMValueRef vals[2] = {s[j][i], masked[j][i]};
      LLVMBasicBlockRef blocks[2] = {from, then_end};
      LLVMAddIncoming(phi, vals, blocks, 2);
      s[j][i] = phi;
    }
}

/* The online softmax of one block and O = O alpha + P V from the V tile at vbase. */
static void block_update(attn *a, attn_state *st, LLVMValueRef vbase, LLVMValueRef s[][4]) {
  LLVMBuilderRef b = a->b;
  fgb_module *m = a->m;
  int nn = a->bc / 8, nd = (int)(a->D / 8);
  LLVMValueRef ninf = f32c(a, -INFINITY), zero = f32c(a, 0.0);
  LLVMValueRef mx[2] = {ninf, ninf};
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      mx[i / 2] = fgb_tc_fmax(a->m, mx[i / 2], s[j][i]);
  LLVMValueRef muse[2], alpha[2];
  for (int r = 0; r < 2; r++) { /* a row's values are in the 4 lanes of a quad */
    mx[r] = fgb_tc_fmax(a->m, mx[r], fgb_shfl_bfly(m, mx[r], 1));
    mx[r] = fgb_tc_fmax(a->m, mx[r], fgb_shfl_bfly(m, mx[r], 2));
    LLVMValueRef mold = LLVMBuildLoad2(b, m->f32, st->m[r], "");
    LLVMValueRef mnew = fgb_tc_fmax(a->m, mold, mx[r]);
    LLVMBuildStore(b, mnew, st->m[r]);
    /* a row that has seen no key yet keeps m = -inf: subtract 0 instead */
    muse[r] = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, mnew, ninf, ""), zero, mnew, "");
    alpha[r] = fgb_tc_ex2(a->m, LLVMBuildFSub(b, mold, muse[r], ""));
  }
  /* P = 2^(S - m), its row sums, and P as A fragments of 16 keys */
  LLVMValueRef rs[2] = {zero, zero};
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      s[j][i] = fgb_tc_ex2(a->m, LLVMBuildFSub(b, s[j][i], muse[i / 2], ""));
      rs[i / 2] = LLVMBuildFAdd(b, rs[i / 2], s[j][i], "");
    }
  for (int r = 0; r < 2; r++) {
    LLVMValueRef l = LLVMBuildLoad2(b, m->f32, st->l[r], "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, l, alpha[r], ""), rs[r], ""), st->l[r]);
  }
  LLVMValueRef pa[MAX_BC / 16][4];
  for (int j = 0; j < nn / 2; j++) {
    pa[j][0] = fgb_tc_pack2(a->m, a->dt, s[2 * j][0], s[2 * j][1]);
    pa[j][1] = fgb_tc_pack2(a->m, a->dt, s[2 * j][2], s[2 * j][3]);
    pa[j][2] = fgb_tc_pack2(a->m, a->dt, s[2 * j + 1][0], s[2 * j + 1][1]);
    pa[j][3] = fgb_tc_pack2(a->m, a->dt, s[2 * j + 1][2], s[2 * j + 1][3]);
  }
  /* O = O alpha + P V, two 8-column tiles of O at a time */
  for (int d = 0; d < nd; d += 2) {
    LLVMValueRef acc[2][4];
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 4; i++)
        acc[h][i] =
            LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[d + h][i], ""), alpha[i / 2], "");
    for (int j = 0; j < nn / 2; j++) {
      LLVMValueRef bw[4];
      if (a->k->attn_ldmatrix) /* words: (d, b0) (d, b1) (d+1, b0) (d+1, b1) */
        fgb_tc_ldmatrix4(a->m, vbase, a->pitch, j * 16, d * 8, true, bw);
      else
        for (int i = 0; i < 4; i++)
          bw[i] = fgb_tc_lds16x2(a->m, vbase, a->pitch, j * 16 + (i & 1) * 8, (d + i / 2) * 8);
      fgb_tc_mma(a->m, a->dt, pa[j], bw[0], bw[1], acc[0]);
      fgb_tc_mma(a->m, a->dt, pa[j], bw[2], bw[3], acc[1]);
    }
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 4; i++)
        LLVMBuildStore(b, acc[h][i], st->o[d + h][i]);
  }
}

/* o = O / l and lse = m ln 2 + ln l, for rows before Sq. */
static bool store_results(attn *a, attn_state *st, LLVMValueRef bh) {
  fgb_emitter *e = a->e;
  fgb_module *m = a->m;
  LLVMBuilderRef b = a->b;
  const fg_node *n = a->k->attn;
  LLVMValueRef optr = fgb_buffer_of(e, e->p->store[n->out[0]->id].buf);
  LLVMValueRef lptr = fgb_buffer_of(e, e->p->store[n->out[1]->id].buf);
  if (!optr || !lptr)
    return false;
  int nd = (int)(a->D / 8);
  LLVMValueRef two_t = LLVMBuildMul(b, a->t, i32c(a, 2), "");
  LLVMValueRef slice = LLVMBuildMul(b, bh, fgb_const(e, a->Sq), ""); /* (b, h)'s first row */
  for (int r = 0; r < 2; r++) {
    LLVMValueRef l = LLVMBuildLoad2(b, m->f32, st->l[r], "");
    l = LLVMBuildFAdd(b, l, fgb_shfl_bfly(m, l, 1), "");
    l = LLVMBuildFAdd(b, l, fgb_shfl_bfly(m, l, 2), "");
    LLVMValueRef inv = LLVMBuildFDiv(b, f32c(a, 1.0), l, "");
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, a->row[r], i32c(a, a->Sq), ""));
    LLVMValueRef grow = LLVMBuildAdd(b, slice, to_ity(a, a->row[r]), "");
    LLVMValueRef obase = LLVMBuildMul(b, grow, fgb_const(e, a->D), "");
    for (int d = 0; d < nd; d++) {
      LLVMValueRef col = to_ity(a, LLVMBuildAdd(b, two_t, i32c(a, d * 8), ""));
      LLVMValueRef x0 = LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[d][2 * r], ""), inv, "");
      LLVMValueRef x1 =
          LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[d][2 * r + 1], ""), inv, "");
      LLVMValueRef at = fgb_gep_global(m, optr, m->i16, LLVMBuildAdd(b, obase, col, ""));
      if (e->aligned) { /* o is dense and its pointer 16-byte aligned: one word */
        LLVMValueRef sw = LLVMBuildStore(b, fgb_tc_pack2(a->m, a->dt, x0, x1), at);
        LLVMSetAlignment(sw, 4);
      } else {
        fgb_store(m, at, a->dt, x0);
        fgb_store(m, fgb_gep_global(m, at, m->i16, fgb_const(e, 1)), a->dt, x1);
      }
    }
    LLVMBasicBlockRef merge2 = fgb_begin_if(e, a->tzero);
    LLVMValueRef mv = LLVMBuildLoad2(b, m->f32, st->m[r], "");
    LLVMValueRef lnl = fgb_call(m, "__nv_logf", m->f32, 1, &l);
    LLVMValueRef lse =
        LLVMBuildFAdd(b, LLVMBuildFMul(b, mv, f32c(a, 0.6931471805599453), ""), lnl, "");
    fgb_store(m, fgb_gep_global(m, lptr, m->f32, grow), FG_F32, lse);
    fgb_end_if(e, merge2);
    fgb_end_if(e, merge);
  }
  return true;
}

bool fgb_emit_attention_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  const fg_node *n = k->attn;
  attn A = {.e = e, .m = e->m, .b = e->b, .k = k};
  attn *a = &A;
  fgb_module *m = e->m;
  LLVMBuilderRef b = e->b;
  const fg_type *qt = &n->in[0]->type;
  a->dt = qt->dtype;
  a->causal = fg_attr_bool(n, "causal");
  int64_t H = qt->dims[1].size;
  a->Sq = qt->dims[2].size;
  a->Sk = n->in[1]->type.dims[2].size;
  a->D = qt->dims[3].size;
  a->br = k->attn_br;
  a->bc = k->attn_bc;
  a->pitch = k->attn_pitch;
  int stages = k->attn_stages;
  if (a->D > MAX_D || a->D % 32 || a->bc > MAX_BC || a->bc % 16 || a->br != 16 * k->attn_warps ||
      (a->br * a->D / 8) % k->block || (a->bc * a->D / 8) % k->block || a->pitch % 8 ||
      stages < 1 || stages > 2) {
    fgb_fail(e, "attention kernel %d: unsupported tiles (D %lld, br %d, bc %d, block %d)", k->id,
             (long long)a->D, a->br, a->bc, k->block);
    return false;
  }
  const fg_attr *sa = fg_node_attr(n, "scale");
  double scale =
      sa ? (sa->kind == FG_ATTR_FLOAT ? sa->f : (double)sa->i) : 1.0 / sqrt((double)a->D);
  attn_state st;
  st.scale2 = f32c(a, (double)(float)(scale * 1.4426950408889634));

  /* shared memory: Q, then per stage K and V */
  char name[256];
  snprintf(name, sizeof name, "fg_attn_%s", LLVMGetValueName(e->fn));
  a->smem = fgb_dynamic_shared(m, name);
  int64_t kv_bytes = (int64_t)a->bc * a->pitch * 2;
  int64_t q_at = 0, k_at = (int64_t)a->br * a->pitch * 2, v_at = k_at + kv_bytes;
  int64_t stage_bytes = 2 * kv_bytes;
  bool async = e->aligned && e->vec == 8 && stages == 2;

  a->tid = fgb_tid(m, 0);
  a->warp = LLVMBuildLShr(b, a->tid, i32c(a, 5), "");
  LLVMValueRef lane = LLVMBuildAnd(b, a->tid, i32c(a, 31), "");
  a->g = LLVMBuildLShr(b, lane, i32c(a, 2), "");
  a->t = LLVMBuildAnd(b, lane, i32c(a, 3), "");
  a->tzero = LLVMBuildICmp(b, LLVMIntEQ, a->t, i32c(a, 0), "");
  LLVMValueRef qb = fgb_ctaid(m, 0);
  if (a->causal) /* the longest rows first */
    qb = LLVMBuildSub(b, i32c(a, k->grid[0] - 1), qb, "");
  a->q0 = LLVMBuildMul(b, qb, i32c(a, a->br), "");
  LLVMValueRef bh = to_ity(a, fgb_ctaid(m, 1));
  LLVMValueRef bi = LLVMBuildUDiv(b, bh, fgb_const(e, H), "");
  LLVMValueRef hi = LLVMBuildURem(b, bh, fgb_const(e, H), "");
  /* GQA: query head h reads key and value head h / (Hq / Hk) */
  int64_t group = H / n->in[1]->type.dims[1].size;
  LLVMValueRef hk = group > 1 ? LLVMBuildUDiv(b, hi, fgb_const(e, group), "") : hi;
  if (!source(a, 0, &a->q, bi, hi) || !source(a, 1, &a->k_, bi, hk) || !source(a, 2, &a->v, bi, hk))
    return false;
  LLVMValueRef wrow = LLVMBuildMul(b, a->warp, i32c(a, 16), ""); /* in the tile */
  LLVMValueRef r0 = LLVMBuildAdd(b, wrow, a->g, "");
  st.wrow0 = LLVMBuildAdd(b, a->q0, wrow, "");
  a->row[0] = LLVMBuildAdd(b, a->q0, r0, "");
  a->row[1] = LLVMBuildAdd(b, a->row[0], i32c(a, 8), "");

  /* key blocks: all, or under the causal mask those up to the CTA's last row */
  LLVMValueRef kend = i32c(a, a->Sk);
  if (a->causal)
    kend = fgk_imin(e, LLVMBuildAdd(b, a->q0, i32c(a, a->br), ""), kend);
  LLVMValueRef nkb =
      LLVMBuildUDiv(b, LLVMBuildAdd(b, kend, i32c(a, a->bc - 1), ""), i32c(a, a->bc), "");

  /* Q into shared memory (with the first key block, two stages) and this
   * warp's A fragments into registers */
  load_tile(a, &a->q, a->q0, a->Sq, a->br, i32c(a, q_at), false);
  if (stages == 2) {
    load_tile(a, &a->k_, i32c(a, 0), a->Sk, a->bc, i32c(a, k_at), async);
    load_tile(a, &a->v, i32c(a, 0), a->Sk, a->bc, i32c(a, v_at), async);
    if (async)
      fgb_cp_async_commit(m);
  }
  fgb_barrier(m);
  int nkq = (int)(a->D / 16);
  LLVMValueRef two_t = LLVMBuildMul(b, a->t, i32c(a, 2), "");
  LLVMValueRef qbase = fgb_tc_tile_base(a->m, a->smem, i32c(a, q_at), r0, two_t, a->pitch);
  for (int kk = 0; kk < nkq; kk++) {
    st.qa[kk][0] = fgb_tc_lds32(a->m, qbase, a->pitch, 0, kk * 16);
    st.qa[kk][1] = fgb_tc_lds32(a->m, qbase, a->pitch, 8, kk * 16);
    st.qa[kk][2] = fgb_tc_lds32(a->m, qbase, a->pitch, 0, kk * 16 + 8);
    st.qa[kk][3] = fgb_tc_lds32(a->m, qbase, a->pitch, 8, kk * 16 + 8);
  }
  if (k->attn_ldmatrix) {
    /* lane l addresses row l % 8 of matrix l / 8: K's matrices are column
     * blocks of 8 (row-major in keys); V's alternate row blocks of 8 and
     * step column blocks every two */
    LLVMValueRef l8 = LLVMBuildAnd(b, lane, i32c(a, 7), "");
    LLVMValueRef mi = LLVMBuildLShr(b, lane, i32c(a, 3), "");
    st.kbase = fgb_tc_tile_base(a->m, a->smem, i32c(a, k_at), l8,
                                LLVMBuildMul(b, mi, i32c(a, 8), ""), a->pitch);
    LLVMValueRef vrow = LLVMBuildAdd(
        b, l8, LLVMBuildMul(b, LLVMBuildAnd(b, mi, i32c(a, 1), ""), i32c(a, 8), ""), "");
    LLVMValueRef vcol = LLVMBuildMul(b, LLVMBuildLShr(b, mi, i32c(a, 1), ""), i32c(a, 8), "");
    st.vbase = fgb_tc_tile_base(a->m, a->smem, i32c(a, v_at), vrow, vcol, a->pitch);
  } else {
    /* this thread's fragments: K at (row g, column 2t), V at (row 2t, column g) */
    st.kbase = fgb_tc_tile_base(a->m, a->smem, i32c(a, k_at), a->g, two_t, a->pitch);
    st.vbase = fgb_tc_tile_base(a->m, a->smem, i32c(a, v_at), two_t, a->g, a->pitch);
  }
  LLVMValueRef ninf = f32c(a, -INFINITY), zero = f32c(a, 0.0);
  int nd = (int)(a->D / 8);
  for (int r = 0; r < 2; r++) {
    st.m[r] = fgk_local_var(e, m->f32, ninf);
    st.l[r] = fgk_local_var(e, m->f32, zero);
  }
  for (int j = 0; j < nd; j++)
    for (int i = 0; i < 4; i++)
      st.o[j][i] = fgk_local_var(e, m->f32, zero);

  fgk_loop loop;
  LLVMValueRef kb = fgk_loop_begin(e, &loop, i32c(a, 0), nkb, i32c(a, 1));
  LLVMValueRef k0 = LLVMBuildMul(b, kb, i32c(a, a->bc), "");
  LLVMValueRef cur = i32c(a, 0); /* this block's stage offset */
  if (stages == 1) {
    fgb_barrier(m); /* every warp is done with the previous block's tiles */
    load_tile(a, &a->k_, k0, a->Sk, a->bc, i32c(a, k_at), false);
    load_tile(a, &a->v, k0, a->Sk, a->bc, i32c(a, v_at), false);
    fgb_barrier(m);
  } else {
    /* the next block into the other stage (freed by the barrier that ended
     * the previous iteration), then wait for this one's */
    LLVMValueRef par = LLVMBuildAnd(b, kb, i32c(a, 1), "");
    cur = LLVMBuildMul(b, par, i32c(a, stage_bytes), "");
    LLVMValueRef nxt =
        LLVMBuildMul(b, LLVMBuildXor(b, par, i32c(a, 1), ""), i32c(a, stage_bytes), "");
    LLVMValueRef kb1 = LLVMBuildAdd(b, kb, i32c(a, 1), "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, kb1, nkb, ""));
    LLVMValueRef k1 = LLVMBuildAdd(b, k0, i32c(a, a->bc), "");
    load_tile(a, &a->k_, k1, a->Sk, a->bc, LLVMBuildAdd(b, nxt, i32c(a, k_at), ""), async);
    load_tile(a, &a->v, k1, a->Sk, a->bc, LLVMBuildAdd(b, nxt, i32c(a, v_at), ""), async);
    fgb_end_if(e, merge);
    if (async) {
      fgb_cp_async_commit(m); /* empty after the last block: still one group */
      fgb_cp_async_wait(m, 1);
    }
    fgb_barrier(m);
  }
  LLVMValueRef kbase = fgb_gep(m, st.kbase, m->i8, cur);
  LLVMValueRef vbase = fgb_gep(m, st.vbase, m->i8, cur);
  LLVMValueRef s[MAX_BC / 8][4];
  block_scores(a, &st, kbase, s);
  block_mask(a, &st, k0, s);
  block_update(a, &st, vbase, s);
  if (stages == 2)
    fgb_barrier(m); /* every warp is done with this stage before it is refilled */
  fgk_loop_end(e, &loop, kb);
  if (!store_results(a, &st, bh))
    return false;
  return !e->failed;
}
