/* The attention kernel (issue 19): `o, lse = sdpa(q, k, v)` forward as
 * FlashAttention-2's loop (Dao, 2023), in fusec's terms (docs/attention.md).
 *
 * A CTA owns br = 16 mt x warps query rows of one (batch, head) (grid x:
 * the query block, the last one first under a causal mask, whose work is
 * largest; grid y: batch x heads). Each warp owns 16 mt of the rows, mt
 * (1 or 2, the plan's br / warps / 16) row tiles of mma.sync m16n8k16, so
 * nothing is exchanged between warps, and each K or V fragment a warp
 * loads from shared memory feeds mt mma:
 *
 *   Q tile -> shared (its A fragments held in registers, or reloaded by
 *   ldmatrix every block: plan q-in-registers)
 *   for each key block of bc keys (under a causal mask, only those some
 *   row of the CTA sees):
 *     K, V tiles -> shared: `stages` of them, the block stages - 1 ahead
 *     copied while this one computes (cp.async in the aligned variant);
 *     one barrier a block
 *     S = Q K^T                  (mma, f32 accumulators: 16 mt x bc a warp)
 *     masked to -inf (keys past the end; causal: key j > query i,
 *     top-left aligned) in the blocks where the warp's rows meet the end
 *     or the diagonal
 *     m_new = max(m, rowmax S c), c = scale log2 e; P = 2^(S c - m_new)
 *     (one FMA and ex2); l = l 2^(m - m_new) + rowsum P
 *     O = O 2^(m - m_new) + P V  (P rounded to the input dtype by packed
 *                                 conversions: the A operand straight
 *                                 from S's registers)
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

#include <llvm-c/DebugInfo.h>

#include "emit.h"
#include "emit_skel.h"
#include "fgb_internal.h"
#include "tensor_core.h"

enum { MAX_D = 256, MAX_BC = 128, MAX_MT = 2 };

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
  LLVMValueRef smem;  /* i8 array in shared memory */
  LLVMValueRef saddr; /* wgmma: smem's shared address (i32, 1024-byte aligned) */
  /* overlap: 4 bytes after the tiles (shared address, i32; wg_wait_softmax) */
  LLVMValueRef order_slot;
  LLVMValueRef tid, warp, g, t, tzero; /* i32; tzero: t == 0 */
  LLVMValueRef q0;                     /* the CTA's first query row (i32) */
  int mt;                              /* m16 row tiles a warp owns: br / (16 warps) */
  /* this thread's rows: in row tile r, the tile's first + g and + 8 */
  LLVMValueRef row[MAX_MT][2];
  /* attnws: the shared addresses (i32) of the ring's first full and empty
   * mbarriers (8 bytes a stage) */
  LLVMValueRef bar_full, bar_empty;
} attn;

static LLVMValueRef i32c(attn *a, int64_t v) {
  return LLVMConstInt(a->m->i32, (unsigned long long)v, 1);
}
static LLVMValueRef f32c(attn *a, double v) { return LLVMConstReal(a->m->f32, v); }

static LLVMValueRef to_ity(attn *a, LLVMValueRef v) {
  return a->e->ity == a->m->i32 ? v : LLVMBuildSExt(a->b, v, a->e->ity, "");
}

static LLVMValueRef opaque(attn *a, LLVMValueRef x) { return fgb_tc_opaque(a->m, x); }
static LLVMValueRef opaque_ptr(attn *a, LLVMValueRef p) {
  LLVMValueRef x = opaque(a, LLVMBuildPtrToInt(a->b, p, a->m->i64, ""));
  return LLVMBuildIntToPtr(a->b, x, LLVMTypeOf(p), "");
}

/* ---- operands ---- */

static bool source(attn *a, int operand, attn_src *src, LLVMValueRef bi, LLVMValueRef hi) {
  fgb_emitter *e = a->e;
  src->ptr = fgk_attn_operand(e, operand, &src->s);
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

/* One piece of 8 elements from gp (row `valid`, else zeros) to sptr:
 * cp.async (16 bytes, 0 read past the end: zeros), a 16-byte load, or
 * eight 2-byte loads through the head dim's stride. */
static void copy_piece(attn *a, const attn_src *src, LLVMValueRef gbase, int64_t goff,
                       LLVMValueRef valid, LLVMValueRef sbase, int64_t soff, bool async) {
  fgb_emitter *e = a->e;
  LLVMBuilderRef b = a->b;
  fgb_module *m = a->m;
  bool vec = e->aligned && e->vec == 8;
  LLVMTypeRef v4 = LLVMVectorType(m->i32, 4);
  if (vec && async) {
    fgb_tc_cp_async16_at(m, sbase, soff, gbase, goff * 2,
                         valid ? LLVMBuildSelect(b, valid, i32c(a, 16), i32c(a, 0), "") : NULL);
    return;
  }
  LLVMValueRef gp = fgb_gep_global(m, gbase, m->i16, fgb_const(e, goff));
  LLVMValueRef sptr = fgb_tc_smem_at(m, sbase, i32c(a, soff));
  LLVMValueRef vv;
  if (vec) {
    vv = LLVMBuildLoad2(b, v4, gp, "");
    LLVMSetAlignment(vv, 16);
    LLVMSetMetadata(vv, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
  } else {
    LLVMValueRef words[4];
    for (int j = 0; j < 8; j++) {
      LLVMValueRef at = fgb_gep_global(m, gp, m->i16, fgb_const(e, (int64_t)j * src->s.strides[3]));
      LLVMValueRef ld = LLVMBuildLoad2(b, m->i16, at, "");
      LLVMSetAlignment(ld, 2);
      LLVMSetMetadata(ld, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
      LLVMValueRef w = LLVMBuildZExt(b, ld, m->i32, "");
      if (j & 1)
        words[j / 2] = LLVMBuildOr(b, words[j / 2], LLVMBuildShl(b, w, i32c(a, 16), ""), "");
      else
        words[j / 2] = w;
    }
    vv = LLVMGetUndef(v4);
    for (int j = 0; j < 4; j++)
      vv = LLVMBuildInsertElement(b, vv, words[j], i32c(a, j), "");
  }
  if (valid)
    vv = LLVMBuildSelect(b, valid, vv, LLVMConstNull(v4), "");
  LLVMValueRef st = LLVMBuildStore(b, vv, sptr);
  LLVMSetAlignment(st, 16);
}

/* The global address of element (row, col) of src's (batch, head) slice. */
static LLVMValueRef src_at(attn *a, const attn_src *src, LLVMValueRef row, LLVMValueRef col) {
  fgb_emitter *e = a->e;
  LLVMBuilderRef b = a->b;
  LLVMValueRef off = LLVMBuildAdd(
      b, src->base,
      LLVMBuildAdd(b, LLVMBuildMul(b, to_ity(a, row), fgb_const(e, src->s.strides[2]), ""),
                   LLVMBuildMul(b, to_ity(a, col), fgb_const(e, src->s.strides[3]), ""), ""),
      "");
  return fgb_gep_global(a->m, src->ptr, a->m->i16, off);
}

static void copy_rows(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                      LLVMValueRef rr, LLVMValueRef c, int step, int n, LLVMValueRef sp, int srow,
                      bool async);

static void load_tile_sw(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                         LLVMValueRef at, bool async, LLVMValueRef tid, int block);

/* Copies rows [r0, r0 + rows) of a (batch, head) slice into the shared
 * tile at byte `at`, rows at or past `limit` as zeros (a row past the end
 * reads the last row, in bounds, and stores zeros). A thread copies pieces
 * tid, tid + block, ... of 8 elements. Where block is a multiple of a
 * row's D / 8 pieces, a thread's pieces are one column and rows rr, rr +
 * step, ...: where the whole tile is in range (every block but a
 * sequence's last) they are one global and one shared address plus
 * constants, so that the loop holds no address of each piece; the last
 * block's rows are clamped (a branch, taken only when the sequence's
 * length is not a multiple of the tile). */
static void load_tile(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                      LLVMValueRef at, bool async) {
  if (a->k->attn_wgmma) {
    load_tile_sw(a, src, r0, limit, rows, at, async, a->tid, a->k->block);
    return;
  }
  LLVMBuilderRef b = a->b;
  int per_row = (int)(a->D / 8), pieces = rows * per_row, block = a->k->block;
  if (block % per_row) { /* D = 96: each piece's row and column, from a tid made in the
                          * loop (hoisted, they took two registers a piece) */
    LLVMValueRef tid = opaque(a, a->tid);
    for (int u = 0; u < pieces / block; u++) {
      LLVMValueRef piece = LLVMBuildAdd(b, tid, i32c(a, (int64_t)u * block), "");
      LLVMValueRef r = LLVMBuildUDiv(b, piece, i32c(a, per_row), "");
      LLVMValueRef c =
          LLVMBuildMul(b, LLVMBuildURem(b, piece, i32c(a, per_row), ""), i32c(a, 8), "");
      LLVMValueRef row = LLVMBuildAdd(b, r0, r, "");
      LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntSLT, row, i32c(a, limit), "");
      LLVMValueRef safe = LLVMBuildSelect(b, valid, row, i32c(a, limit - 1), "");
      copy_piece(a, src, src_at(a, src, safe, c), 0, valid,
                 fgb_tc_tile_base(a->m, a->smem, at, r, c, a->pitch), 0, async);
    }
    return;
  }
  /* a warp copies 32 consecutive pieces at once (rows of a quarter of the
   * tile, one after the other) where a row's pieces divide 32, so that a
   * thread's pieces of a dense operand are 512 bytes apart and one base
   * register reaches them (cp.async's offset reaches +-2 KiB); else thread
   * tid's pieces are rows tid / per_row + block / per_row u */
  int warps = block / 32, step, n = pieces / block;
  LLVMValueRef rr, c;
  if (32 % per_row == 0 && rows % warps == 0) {
    LLVMValueRef lane = LLVMBuildAnd(b, a->tid, i32c(a, 31), "");
    step = 32 / per_row;
    rr = LLVMBuildAdd(b, LLVMBuildMul(b, a->warp, i32c(a, rows / warps), ""),
                      LLVMBuildUDiv(b, lane, i32c(a, per_row), ""), "");
    c = LLVMBuildMul(b, LLVMBuildURem(b, lane, i32c(a, per_row), ""), i32c(a, 8), "");
  } else {
    step = block / per_row;
    rr = LLVMBuildUDiv(b, a->tid, i32c(a, per_row), "");
    c = LLVMBuildMul(b, LLVMBuildURem(b, a->tid, i32c(a, per_row), ""), i32c(a, 8), "");
  }
  LLVMValueRef sp = fgb_tc_tile_base(a->m, a->smem, at, rr, c, a->pitch);
  copy_rows(a, src, r0, limit, rows, rr, c, step, n, sp, a->pitch * 2, async);
}

/* The pieces of load_tile from the thread's first (row rr, column c),
 * rows rr + step u (u < n) of the tile at shared sp, srow bytes a row:
 * where the tile may pass limit, a branch to clamped copies. */
static void copy_rows(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                      LLVMValueRef rr, LLVMValueRef c, int step, int n, LLVMValueRef sp, int srow,
                      bool async) {
  LLVMBuilderRef b = a->b;
  LLVMValueRef row0 = LLVMBuildAdd(b, r0, rr, "");
  LLVMBasicBlockRef merge = NULL;
  if (limit % rows) { /* a tile may pass the end: clamp its rows */
    LLVMValueRef full =
        LLVMBuildICmp(b, LLVMIntSLE, LLVMBuildAdd(b, r0, i32c(a, rows), ""), i32c(a, limit), "");
    LLVMValueRef fn = fgb_current_fn(a->m);
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(a->m->ctx, fn, "tile");
    LLVMBasicBlockRef edge = LLVMAppendBasicBlockInContext(a->m->ctx, fn, "tile_edge");
    merge = LLVMAppendBasicBlockInContext(a->m->ctx, fn, "tile_done");
    LLVMBuildCondBr(b, full, fast, edge);
    LLVMPositionBuilderAtEnd(b, edge);
    for (int u = 0; u < n; u++) {
      LLVMValueRef row = LLVMBuildAdd(b, row0, i32c(a, (int64_t)u * step), "");
      LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntSLT, row, i32c(a, limit), "");
      LLVMValueRef safe = LLVMBuildSelect(b, valid, row, i32c(a, limit - 1), "");
      copy_piece(a, src, src_at(a, src, safe, c), 0, valid, sp, (int64_t)u * step * srow, async);
    }
    LLVMBuildBr(b, merge);
    LLVMPositionBuilderAtEnd(b, fast);
  }
  /* offsets from the middle piece's address */
  int mid = n / 2;
  LLVMValueRef gp = src_at(a, src, LLVMBuildAdd(b, row0, i32c(a, (int64_t)mid * step), ""), c);
  for (int u = 0; u < n; u++)
    copy_piece(a, src, gp, (int64_t)(u - mid) * step * src->s.strides[2], NULL, sp,
               (int64_t)u * step * srow, async);
  if (merge) {
    LLVMBuildBr(b, merge);
    LLVMPositionBuilderAtEnd(b, merge);
  }
}

/* ---- the kernel ---- */

/* What one key block needs besides the attn state: per row tile r, the
 * running max (log2 units) and this thread's share of the sum of its rows
 * g and g + 8, O's accumulators (D/8 tiles of 16 x 8), all locals; Q's A
 * fragments when the plan keeps them in registers. */
typedef struct attn_state {
  LLVMValueRef m[MAX_MT][2], l[MAX_MT][2], o[MAX_MT][MAX_D / 8][4];
  LLVMValueRef qa[MAX_MT][MAX_D / 16][4];
  LLVMValueRef qbase;        /* this thread's Q fragment base (ldmatrix or plain loads) */
  LLVMValueRef kbase, vbase; /* this thread's fragment bases in the key tiles (stage 0) */
  LLVMValueRef scale2;       /* scale x log2 e */
  /* S is scaled inside the exponent's FMA (scale > 0: the row max of the
   * raw scores, scaled, is the max of the scaled ones), else up front */
  bool fold;
  LLVMValueRef wrow0; /* the warp's first query row */
  LLVMValueRef two_t; /* 2t: this thread's first column in a fragment */
  LLVMValueRef diag0; /* wrow0 + g - 2t (causal masks) */
} attn_state;

/* Q's A fragment of row tile r and key step kk (16 x 16): from registers,
 * or from the Q tile in shared memory (ldmatrix .x4: matrices rows 0-7 /
 * 8-15 x columns 0-7, then columns 8-15, the order of a0..a3). */
static void q_fragment(attn *a, attn_state *st, int r, int kk, bool held, LLVMValueRef *qa) {
  if (held) {
    memcpy(qa, st->qa[r][kk], 4 * sizeof *qa);
    return;
  }
  if (a->k->attn_ldmatrix) {
    fgb_tc_ldmatrix4(a->m, st->qbase, a->pitch, r * 16, kk * 16, false, qa);
    return;
  }
  qa[0] = fgb_tc_lds32(a->m, st->qbase, a->pitch, r * 16, kk * 16);
  qa[1] = fgb_tc_lds32(a->m, st->qbase, a->pitch, r * 16 + 8, kk * 16);
  qa[2] = fgb_tc_lds32(a->m, st->qbase, a->pitch, r * 16, kk * 16 + 8);
  qa[3] = fgb_tc_lds32(a->m, st->qbase, a->pitch, r * 16 + 8, kk * 16 + 8);
}

/* S = Q K^T from the K tile at kbase: per row tile, nn tiles of 16 x 8.
 * Key step kk outermost: its Q fragments (one per row tile) and the K
 * fragments of all the block's keys are loaded once and each K fragment
 * feeds an mma of every row tile. */
static void block_scores(attn *a, attn_state *st, LLVMValueRef kbase,
                         LLVMValueRef s[][MAX_BC / 8][4]) {
  int nkq = (int)(a->D / 16), nn = a->bc / 8;
  LLVMValueRef zero = f32c(a, 0.0);
  for (int r = 0; r < a->mt; r++)
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++)
        s[r][j][i] = zero;
  for (int kk = 0; kk < nkq; kk++) {
    LLVMValueRef qa[MAX_MT][4];
    for (int r = 0; r < a->mt; r++)
      q_fragment(a, st, r, kk, a->k->attn_q_regs, qa[r]);
    for (int j = 0; j < nn; j += 2) {
      LLVMValueRef bw[4]; /* words: (j, b0) (j, b1) (j+1, b0) (j+1, b1) */
      if (a->k->attn_ldmatrix)
        fgb_tc_ldmatrix4(a->m, kbase, a->pitch, j * 8, kk * 16, false, bw);
      else
        for (int i = 0; i < 4; i++)
          bw[i] = fgb_tc_lds32(a->m, kbase, a->pitch, (j + i / 2) * 8, kk * 16 + (i & 1) * 8);
      for (int r = 0; r < a->mt; r++) {
        fgb_tc_mma(a->m, a->dt, qa[r], bw[0], bw[1], s[r][j]);
        fgb_tc_mma(a->m, a->dt, qa[r], bw[2], bw[3], s[r][j + 1]);
      }
    }
  }
}

/* Masks keys past Sk and, causal, keys past the row (to -inf), scaling S
 * to log2 units first where the scale is not folded; only where the
 * warp's rows meet the block's end or the diagonal (a branch around the
 * masks, phis after it). */
static void block_mask(attn *a, attn_state *st, LLVMValueRef k0, LLVMValueRef s[][MAX_BC / 8][4]) {
  LLVMBuilderRef b = a->b;
  int nn = a->bc / 8;
  LLVMValueRef ninf = f32c(a, -INFINITY);
  if (!st->fold)
    for (int r = 0; r < a->mt; r++)
      for (int j = 0; j < nn; j++)
        for (int i = 0; i < 4; i++)
          s[r][j][i] = LLVMBuildFMul(b, s[r][j][i], st->scale2, "");
  if (!a->causal && a->Sk % a->bc == 0)
    return; /* no block passes the end */
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
  /* key k0 + 2t + kc (kc = 8 j + c) is before Sk when kc < Sk - k0 - 2t,
   * and at most row wrow0 + g + rc (rc = 16 r + 8 h) when kc - rc <=
   * wrow0 + g - 2t - k0: one value a block, compared with constants */
  LLVMValueRef left = LLVMBuildSub(b, i32c(a, a->Sk), LLVMBuildAdd(b, k0, st->two_t, ""), "");
  LLVMValueRef diag = LLVMBuildSub(b, st->diag0, k0, "");
  LLVMValueRef masked[MAX_MT][MAX_BC / 8][4];
  for (int j = 0; j < nn; j++)
    for (int c = 0; c < 2; c++) {
      int kc = j * 8 + c;
      LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, i32c(a, kc), left, "");
      for (int r = 0; r < a->mt; r++)
        for (int h = 0; h < 2; h++) {
          LLVMValueRef ok = in;
          if (a->causal)
            ok = LLVMBuildAnd(
                b, ok, LLVMBuildICmp(b, LLVMIntSLE, i32c(a, kc - 16 * r - 8 * h), diag, ""), "");
          masked[r][j][2 * h + c] = LLVMBuildSelect(b, ok, s[r][j][2 * h + c], ninf, "");
        }
    }
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, merge);
  LLVMPositionBuilderAtEnd(b, merge);
  for (int r = 0; r < a->mt; r++)
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++) {
        LLVMValueRef phi = LLVMBuildPhi(b, a->m->f32, "");
        LLVMValueRef vals[2] = {s[r][j][i], masked[r][j][i]};
        LLVMBasicBlockRef blocks[2] = {from, then_end};
        LLVMAddIncoming(phi, vals, blocks, 2);
        s[r][j][i] = phi;
      }
}

static bool wg_pv(attn *a, LLVMValueRef pa[][4], LLVMValueRef vdesc, LLVMValueRef *acc, bool wait);

/* P (s: one row tile's f32 values) packed into A fragments of 16 keys */
static void block_pack(attn *a, LLVMValueRef s[][4], LLVMValueRef pa[][4]) {
  fgb_module *m = a->m;
  for (int j = 0; j < a->bc / 16; j++) {
    pa[j][0] = fgb_tc_cvt_pack2(m, a->dt, s[2 * j][0], s[2 * j][1]);
    pa[j][1] = fgb_tc_cvt_pack2(m, a->dt, s[2 * j][2], s[2 * j][3]);
    pa[j][2] = fgb_tc_cvt_pack2(m, a->dt, s[2 * j + 1][0], s[2 * j + 1][1]);
    pa[j][3] = fgb_tc_cvt_pack2(m, a->dt, s[2 * j + 1][2], s[2 * j + 1][3]);
  }
}

/* The online softmax of one block: the rows' new maxima and sums (st's m
 * and l), the factors alpha = 2^(m_old - m_new) O is to be scaled by, and
 * P = 2^(S scale2 - m), in s and, unless pa is NULL, as A fragments of 16
 * keys (pa). Row maxima: two butterfly shuffles a row a block; row sums
 * stay per thread until the end; P in one FMA and ex2. */
static void block_softmax(attn *a, attn_state *st, LLVMValueRef s[][MAX_BC / 8][4],
                          LLVMValueRef alpha[][2], LLVMValueRef pa[][MAX_BC / 16][4]) {
  LLVMBuilderRef b = a->b;
  fgb_module *m = a->m;
  int nn = a->bc / 8;
  LLVMValueRef ninf = f32c(a, -INFINITY), zero = f32c(a, 0.0);
  LLVMValueRef nmuse[MAX_MT][2];
  for (int r = 0; r < a->mt; r++)
    for (int h = 0; h < 2; h++) {     /* a row's values are in the 4 lanes of a quad */
      LLVMValueRef v[2 * MAX_BC / 8]; /* the row's values here, by a tree of max */
      int nv = 0;
      for (int j = 0; j < nn; j++)
        for (int c = 0; c < 2; c++)
          v[nv++] = s[r][j][2 * h + c];
      while (nv > 1) {
        int half = 0;
        for (int i = 0; i + 1 < nv; i += 2)
          v[half++] = fgb_tc_fmax(m, v[i], v[i + 1]);
        if (nv & 1)
          v[half++] = v[nv - 1];
        nv = half;
      }
      LLVMValueRef mx = v[0];
      mx = fgb_tc_fmax(m, mx, fgb_shfl_bfly(m, mx, 1));
      mx = fgb_tc_fmax(m, mx, fgb_shfl_bfly(m, mx, 2));
      if (st->fold)
        mx = LLVMBuildFMul(b, mx, st->scale2, "");
      LLVMValueRef mold = LLVMBuildLoad2(b, m->f32, st->m[r][h], "");
      LLVMValueRef mnew = fgb_tc_fmax(m, mold, mx);
      LLVMBuildStore(b, mnew, st->m[r][h]);
      /* a row that has seen no key yet keeps m = -inf: subtract 0 instead */
      LLVMValueRef muse =
          LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, mnew, ninf, ""), zero, mnew, "");
      alpha[r][h] = fgb_tc_ex2(m, LLVMBuildFSub(b, mold, muse, ""));
      nmuse[r][h] = LLVMBuildFNeg(b, muse, "");
    }
  /* P = 2^(S - m), its row sums, and P as A fragments of 16 keys */
  for (int r = 0; r < a->mt; r++) {
    /* row sums: two chains a row (its even and odd columns), added at the end */
    LLVMValueRef rs[4] = {NULL, NULL, NULL, NULL};
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++) {
        LLVMValueRef x = s[r][j][i], nm = nmuse[r][i / 2];
        x = st->fold ? fgb_tc_fma(m, x, st->scale2, nm) : LLVMBuildFAdd(b, x, nm, "");
        s[r][j][i] = fgb_tc_ex2(m, x);
        rs[i] = rs[i] ? LLVMBuildFAdd(b, rs[i], s[r][j][i], "") : s[r][j][i];
      }
    for (int h = 0; h < 2; h++) {
      LLVMValueRef l = LLVMBuildLoad2(b, m->f32, st->l[r][h], "");
      LLVMValueRef sum = LLVMBuildFAdd(b, rs[2 * h], rs[2 * h + 1], "");
      LLVMBuildStore(b, fgb_tc_fma(m, l, alpha[r][h], sum), st->l[r][h]);
    }
    if (pa)
      block_pack(a, s[r], pa[r]);
  }
}

/* The online softmax of one block (block_softmax) and O = O alpha + P V
 * from the V tile at vbase. */
static void block_update(attn *a, attn_state *st, LLVMValueRef vbase,
                         LLVMValueRef s[][MAX_BC / 8][4]) {
  LLVMBuilderRef b = a->b;
  fgb_module *m = a->m;
  int nn = a->bc / 8, nd = (int)(a->D / 8);
  LLVMValueRef alpha[MAX_MT][2], pa[MAX_MT][MAX_BC / 16][4];
  block_softmax(a, st, s, alpha, pa);
  if (a->k->attn_wgmma) { /* O alpha, then one chain of wgmma (vbase: V's descriptor) */
    LLVMValueRef acc[MAX_D / 2];
    for (int d = 0; d < nd; d++)
      for (int i = 0; i < 4; i++)
        acc[4 * d + i] =
            LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[0][d][i], ""), alpha[0][i / 2], "");
    if (!wg_pv(a, pa[0], vbase, acc, true))
      return;
    for (int d = 0; d < nd; d++)
      for (int i = 0; i < 4; i++)
        LLVMBuildStore(b, acc[4 * d + i], st->o[0][d][i]);
    return;
  }
  /* O = O alpha + P V, two 8-column tiles of O at a time; each V fragment
   * feeds an mma of every row tile */
  for (int d = 0; d < nd; d += 2) {
    LLVMValueRef acc[MAX_MT][2][4];
    for (int r = 0; r < a->mt; r++)
      for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++)
          acc[r][h][i] = LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[r][d + h][i], ""),
                                       alpha[r][i / 2], "");
    for (int j = 0; j < nn / 2; j++) {
      LLVMValueRef bw[4];
      if (a->k->attn_ldmatrix) /* words: (d, b0) (d, b1) (d+1, b0) (d+1, b1) */
        fgb_tc_ldmatrix4(m, vbase, a->pitch, j * 16, d * 8, true, bw);
      else
        for (int i = 0; i < 4; i++)
          bw[i] = fgb_tc_lds16x2(m, vbase, a->pitch, j * 16 + (i & 1) * 8, (d + i / 2) * 8);
      for (int r = 0; r < a->mt; r++) {
        fgb_tc_mma(m, a->dt, pa[r][j], bw[0], bw[1], acc[r][0]);
        fgb_tc_mma(m, a->dt, pa[r][j], bw[2], bw[3], acc[r][1]);
      }
    }
    for (int r = 0; r < a->mt; r++)
      for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++)
          LLVMBuildStore(b, acc[r][h][i], st->o[r][d + h][i]);
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
  for (int r = 0; r < a->mt; r++)
    for (int h = 0; h < 2; h++) {
      LLVMValueRef l = LLVMBuildLoad2(b, m->f32, st->l[r][h], "");
      l = LLVMBuildFAdd(b, l, fgb_shfl_bfly(m, l, 1), "");
      l = LLVMBuildFAdd(b, l, fgb_shfl_bfly(m, l, 2), "");
      LLVMValueRef inv = fgb_tc_rcp(m, l); /* no call: see fgb_tc_rcp */
      LLVMBasicBlockRef merge =
          fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, a->row[r][h], i32c(a, a->Sq), ""));
      LLVMValueRef grow = LLVMBuildAdd(b, slice, to_ity(a, a->row[r][h]), "");
      LLVMValueRef obase = LLVMBuildMul(b, grow, fgb_const(e, a->D), "");
      for (int d = 0; d < nd; d++) {
        LLVMValueRef col = to_ity(a, LLVMBuildAdd(b, two_t, i32c(a, d * 8), ""));
        LLVMValueRef x0 =
            LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[r][d][2 * h], ""), inv, "");
        LLVMValueRef x1 =
            LLVMBuildFMul(b, LLVMBuildLoad2(b, m->f32, st->o[r][d][2 * h + 1], ""), inv, "");
        LLVMValueRef at = fgb_gep_global(m, optr, m->i16, LLVMBuildAdd(b, obase, col, ""));
        if (e->aligned) { /* o is dense and its pointer 16-byte aligned: one word */
          LLVMValueRef sw = LLVMBuildStore(b, fgb_tc_cvt_pack2(m, a->dt, x0, x1), at);
          LLVMSetAlignment(sw, 4);
        } else {
          fgb_store(m, at, a->dt, x0);
          fgb_store(m, fgb_gep_global(m, at, m->i16, fgb_const(e, 1)), a->dt, x1);
        }
      }
      LLVMBasicBlockRef merge2 = fgb_begin_if(e, a->tzero);
      LLVMValueRef mv = LLVMBuildLoad2(b, m->f32, st->m[r][h], "");
      LLVMValueRef lnl = fgb_call(m, "__nv_logf", m->f32, 1, &l);
      LLVMValueRef lse =
          LLVMBuildFAdd(b, LLVMBuildFMul(b, mv, f32c(a, 0.6931471805599453), ""), lnl, "");
      fgb_store(m, fgb_gep_global(m, lptr, m->f32, grow), FG_F32, lse);
      fgb_end_if(e, merge2);
      fgb_end_if(e, merge);
    }
  return true;
}

/* Key block kb's K and V tiles into stage `stage` (an i32 byte offset). */
static void load_kv(attn *a, LLVMValueRef kb, LLVMValueRef stage, int64_t k_at, int64_t v_at,
                    bool async) {
  LLVMBuilderRef b = a->b;
  LLVMValueRef k0 = LLVMBuildMul(b, kb, i32c(a, a->bc), "");
  load_tile(a, &a->k_, k0, a->Sk, a->bc, LLVMBuildAdd(b, stage, i32c(a, k_at), ""), async);
  load_tile(a, &a->v, k0, a->Sk, a->bc, LLVMBuildAdd(b, stage, i32c(a, v_at), ""), async);
}

/* Key block kb + ahead's tiles into its stage (of `stages`, stage_bytes
 * apart) where that block exists (< nkb), as one cp.async group (empty
 * past the end). */
static void load_kv_ahead(attn *a, LLVMValueRef kb, int ahead, LLVMValueRef nkb,
                          int64_t stage_bytes, int64_t k_at, int64_t v_at, bool async) {
  LLVMBuilderRef b = a->b;
  int stages = a->k->attn_stages;
  LLVMValueRef kn = LLVMBuildAdd(b, kb, i32c(a, ahead), "");
  LLVMValueRef nxt =
      LLVMBuildMul(b, LLVMBuildURem(b, kn, i32c(a, stages), ""), i32c(a, stage_bytes), "");
  LLVMBasicBlockRef merge = fgb_begin_if(a->e, LLVMBuildICmp(b, LLVMIntSLT, kn, nkb, ""));
  load_kv(a, kn, nxt, k_at, v_at, async);
  fgb_end_if(a->e, merge);
  if (async)
    fgb_cp_async_commit(a->m);
}

/* ---- wgmma (sm_90a; the plan's attn_wgmma) ----
 *
 * The same loop with the products on Hopper's warpgroup MMA (PTX ISA,
 * "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): a warpgroup
 * (4 warps, 128 threads) owns 64 query rows, warp w of it rows 16 w to 16 w
 * + 15 (mt = 1), so that S's and O's accumulators are the mma.sync
 * fragments above row tile by row tile:
 *
 *   S = Q K^T   wgmma m64n{bc}k16, D/16 of them: A = the warpgroup's 64 Q
 *               rows and B = the K tile, both from shared memory by matrix
 *               descriptors (both K-major: the head dim contiguous)
 *   O += P V    wgmma m64n{D}k16, bc/16 of them: A = P from registers (the
 *               packed S fragments, as for mma.sync: the register A layout
 *               of m64nNk16 is m16n8k16's warp by warp), B = the V tile by
 *               descriptor, MN-major (D contiguous: imm-trans-b 1)
 *
 * D fragment of m64nNk16 .f32 (thread l of warp w, g = l / 4, t = l % 4):
 * d[4 j + 2 h + c] = (row 16 w + g + 8 h, column 8 j + 2 t + c), the mma.sync
 * C fragment of 8-column tile j; so s[0][j][i] = d[4 j + i].
 *
 * Tiles in the 128-byte swizzle, unpadded: a tile of R rows x D is D / 64
 * atoms of R rows x 128 bytes (columns 64 a .. 64 a + 63), one after the
 * other; the 16-byte chunk c of row r sits at chunk c ^ (r % 8) of its
 * 128-byte row: the pattern the hardware applies to address bits 4-6 with
 * bits 7-9, so every atom starts at a multiple of 1024 bytes (the dynamic
 * shared memory is rounded up to one at run time: the plan's smem has 1
 * KiB for it). Descriptors: K-major (Q, K): rows 128 bytes apart, groups of
 * 8 rows 1024 apart (stride byte offset), the leading byte offset unused
 * (1); key step kk starts at atom kk / 4, byte 32 (kk % 4) of the row (the
 * swizzle applies to the address the hardware forms, as CUTLASS's
 * descriptor iterator advances). MN-major (V): 64 columns of D a 128-byte
 * row, a key a row, groups of 8 keys 1024 bytes apart (stride byte
 * offset), the next 64 columns the next atom, bc 128 bytes on (leading
 * byte offset); key step j starts 2048 j bytes on.
 *
 * Each product is one inline-assembly statement (LLVM 19 has no wgmma
 * intrinsics; tensor_core.h's fgb_tc_wg_*, shared with the backward):
 * wgmma.fence, the chain of wgmma.mma_async, commit_group, wait_group 0,
 * so that its results are complete when LLVM sees them (the overlapped
 * loop, plan overlap, issues chains without the wait and waits in a
 * statement of its own: wg_wait, wg_overlap_loop).
 * Shared memory written by cp.async or st.shared (the generic proxy) is
 * made visible to wgmma (the async proxy) by fence.proxy.async before the
 * barrier that publishes it. */

/* load_tile in the swizzle: thread tid's pieces are chunk tid % (D / 8)
 * of rows tid / (D / 8) + step u, step = block / (D / 8) a multiple of 8,
 * so that a piece's swizzled chunk is the thread's for every u: one shared
 * base and constant offsets (128 step u bytes). */
static void load_tile_sw(attn *a, const attn_src *src, LLVMValueRef r0, int64_t limit, int rows,
                         LLVMValueRef at, bool async, LLVMValueRef tid, int block) {
  LLVMBuilderRef b = a->b;
  int per_row = (int)(a->D / 8);
  int step = block / per_row, n = rows * per_row / block;
  LLVMValueRef rr = LLVMBuildUDiv(b, tid, i32c(a, per_row), "");
  LLVMValueRef cc = LLVMBuildURem(b, tid, i32c(a, per_row), "");
  LLVMValueRef sw =
      LLVMBuildXor(b, LLVMBuildAnd(b, cc, i32c(a, 7), ""), LLVMBuildAnd(b, rr, i32c(a, 7), ""), "");
  LLVMValueRef off = LLVMBuildAdd(
      b, LLVMBuildMul(b, LLVMBuildLShr(b, cc, i32c(a, 3), ""), i32c(a, (int64_t)rows * 128), ""),
      LLVMBuildAdd(b, LLVMBuildMul(b, rr, i32c(a, 128), ""), LLVMBuildMul(b, sw, i32c(a, 16), ""),
                   ""),
      "");
  LLVMValueRef sp = fgb_tc_smem_at(a->m, a->smem, LLVMBuildAdd(b, off, at, ""));
  copy_rows(a, src, r0, limit, rows, rr, LLVMBuildMul(b, cc, i32c(a, 8), ""), step, n, sp, 128,
            async);
}

/* ---- attnws: the producer warp and the mbarrier ring (plan: ws) ----
 *
 * FlashAttention-3's warp specialization without TMA (the loader has no
 * tensor maps): the CTA's last warpgroup (warps attn_warps.., 128
 * threads), the producer, copies Q and key block j's K and V tiles into
 * stage j % stages by cp.async (plain loads and st.shared in the variant
 * for misaligned operands; load_tile_sw with the producer's thread index),
 * after waiting on the stage's empty mbarrier for block j - stages to be
 * released; each thread's `cp.async.mbarrier.arrive.noinc` arrives on the
 * stage's full mbarrier (128 arrivals) when its copies have landed.
 * Registers: a CTA of 384 threads is held to 168 a thread (3 warps a
 * sub-partition's 16384), so the producer gives them back and the
 * consumers take them (`setmaxnreg`: 40 and 232, 40 + 2 x 232 <= 512). The
 * consumer warpgroups wait on full (parity (j / stages) & 1), run
 * fence.proxy.async (the copies, generic proxy, are read by wgmma, the
 * async proxy), and once block j's P V is complete lane 0 of every
 * consumer warp arrives on its empty mbarrier (attn_warps arrivals). No
 * CTA barrier is run inside the loop, so a warpgroup may run ahead of the
 * other by up to a block and a half (the ring's third stage): the
 * pingpong (ATTN_WS=2, wg_pingpong) can hold them half a block apart. */

static void ws_asm(attn *a, const char *text, const char *cons, LLVMValueRef *args, int n) {
  LLVMTypeRef ts[4];
  for (int i = 0; i < n; i++)
    ts[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(a->m->v, ts, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 1,
                                     0, LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(a->b, fty, fn, args, (unsigned)n, "");
}

/* the mbarrier of stage `stage` (i32) of the ring at bar (8 bytes each) */
static LLVMValueRef ws_bar(attn *a, LLVMValueRef bar, LLVMValueRef stage) {
  return LLVMBuildAdd(a->b, bar, LLVMBuildMul(a->b, stage, i32c(a, 8), ""), "");
}

/* waits until the phase of parity `parity` (i32 0 or 1) of the mbarrier
 * at shared address bar has completed */
static void ws_wait(attn *a, LLVMValueRef bar, LLVMValueRef parity) {
  LLVMValueRef args[2] = {bar, parity};
  ws_asm(a,
         "{\n.reg .pred p;\nWS_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
         "@!p bra WS_WAIT;\n}",
         "r,r,~{memory}", args, 2);
}

enum { WS_LOADERS = 128, WS_PRODUCER_REGS = 40, WS_CONSUMER_REGS = 232 };

/* The producer warpgroup: Q with block 0, then every key block of the CTA into
 * the ring (above); it ends with its copies complete. */
static void ws_producer(attn *a, LLVMValueRef nkb, int64_t stage_bytes, int64_t q_at, int64_t k_at,
                        int64_t v_at, bool async) {
  fgb_emitter *e = a->e;
  LLVMBuilderRef b = a->b;
  int stages = a->k->attn_stages;
  LLVMValueRef ptid = LLVMBuildSub(b, a->tid, i32c(a, 32 * a->k->attn_warps), "");
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.dec.sync.aligned.u32 %d;", WS_PRODUCER_REGS);
  ws_asm(a, text, "~{memory}", NULL, 0);
  load_tile_sw(a, &a->q, a->q0, a->Sq, a->br, i32c(a, q_at), async, ptid, WS_LOADERS);
  fgk_loop loop;
  LLVMValueRef kb = fgk_loop_begin(e, &loop, i32c(a, 0), nkb, i32c(a, 1));
  LLVMValueRef st = LLVMBuildURem(b, kb, i32c(a, stages), "");
  LLVMValueRef round = LLVMBuildUDiv(b, kb, i32c(a, stages), "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntUGE, kb, i32c(a, stages), ""));
  /* block kb - stages released: the empty barrier's phase round - 1 */
  ws_wait(a, ws_bar(a, a->bar_empty, st),
          LLVMBuildAnd(b, LLVMBuildAdd(b, round, i32c(a, 1), ""), i32c(a, 1), ""));
  fgb_end_if(e, merge);
  LLVMValueRef at = LLVMBuildMul(b, st, i32c(a, stage_bytes), "");
  LLVMValueRef k0 = LLVMBuildMul(b, kb, i32c(a, a->bc), "");
  load_tile_sw(a, &a->k_, k0, a->Sk, a->bc, LLVMBuildAdd(b, at, i32c(a, k_at), ""), async, ptid,
               WS_LOADERS);
  load_tile_sw(a, &a->v, k0, a->Sk, a->bc, LLVMBuildAdd(b, at, i32c(a, v_at), ""), async, ptid,
               WS_LOADERS);
  LLVMValueRef full = ws_bar(a, a->bar_full, st);
  if (async)
    ws_asm(a, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r,~{memory}", &full, 1);
  else
    ws_asm(a, "fence.proxy.async.shared::cta;\nmbarrier.arrive.shared::cta.b64 _, [$0];",
           "r,~{memory}", &full, 1);
  fgk_loop_end(e, &loop, kb);
  if (async)
    fgb_cp_async_wait_all(a->m);
}

/* A consumer warp is done with key block kb's stage (its P V complete):
 * lane 0 arrives on the stage's empty barrier. */
static void ws_release(attn *a, LLVMValueRef kb) {
  LLVMValueRef args[2] = {
      ws_bar(a, a->bar_empty, LLVMBuildURem(a->b, kb, i32c(a, a->k->attn_stages), "")),
      LLVMBuildAnd(a->b, a->tid, i32c(a, 31), "")};
  ws_asm(a,
         "{\n.reg .pred p;\nsetp.eq.u32 p, $1, 0;\nfence.proxy.async.shared::cta;\n"
         "@p mbarrier.arrive.shared::cta.b64 _, [$0];\n}",
         "r,r,~{memory}", args, 2);
}

/* The matrix descriptor (PTX ISA, "Matrix Descriptor Format";
 * fgb_tc_wg_desc) of the tile at byte `at` (i32) of the aligned shared
 * memory. */
static LLVMValueRef wg_desc(attn *a, LLVMValueRef at, int lbo) {
  return fgb_tc_wg_desc(a->m, LLVMBuildAdd(a->b, a->saddr, at, ""), lbo);
}

/* false, having said that a wgmma statement did not fit (a bug) */
static bool wg_too_long(attn *a) {
  fgb_fail(a->e, "attention kernel %d: wgmma statement too long", a->k->id);
  return false;
}

/* S = Q K^T of the warpgroup's rows: qdesc the Q tile's descriptor at the
 * warpgroup's first row, kdesc the K tile's. */
static bool wg_scores(attn *a, LLVMValueRef qdesc, LLVMValueRef kdesc,
                      LLVMValueRef s[][MAX_BC / 8][4], bool wait) {
  fgb_tc_wg_chain c = {.dt = a->dt,
                       .n = a->bc,
                       .nk = (int)(a->D / 16),
                       .np = 1,
                       .wait = wait,
                       .areg = "qd",
                       .breg = "kd"};
  LLVMValueRef d[MAX_BC / 2];
  if (!fgb_tc_wg_ss(a->m, &c, &qdesc, a->br, &kdesc, a->bc, d))
    return wg_too_long(a);
  for (int j = 0; j < a->bc / 8; j++)
    for (int i = 0; i < 4; i++)
      s[0][j][i] = d[4 * j + i];
  return true;
}

/* acc (D / 2 f32, O's fragments) += P V: pa the P A fragments of the
 * block's bc / 16 key steps, vdesc the V tile's descriptor. */
static bool wg_pv(attn *a, LLVMValueRef pa[][4], LLVMValueRef vdesc, LLVMValueRef *acc, bool wait) {
  fgb_tc_wg_chain c = {
      .dt = a->dt, .n = (int)a->D, .nk = a->bc / 16, .np = 1, .wait = wait, .breg = "vd"};
  return fgb_tc_wg_rs(a->m, &c, pa, &vdesc, acc) || wg_too_long(a);
}

/* The n accumulators in v complete (fgb_tc_wg_wait): `pending` chains
 * may stay in flight. */
static bool wg_wait(attn *a, int pending, LLVMValueRef *v, int n) {
  return fgb_tc_wg_wait(a->m, pending, v, n) || wg_too_long(a);
}

/* wait_group 0 for O (n accumulators in acc) after the softmax of the
 * block: ordered after the row sums it computed last (their sum stored to
 * the order slot, fgb_tc_wg_wait_after), so that the softmax runs while
 * the tensor cores do P V. A plain wait there, ptxas placed right after
 * the rows' maxima (SASS of run A1's attn_fwd: WARPGROUP.DEPBAR.LE gsb0,
 * 0x0 before the first MUFU.EX2), and the exponentials waited for P V. */
static bool wg_wait_softmax(attn *a, attn_state *st, LLVMValueRef *acc, int n) {
  LLVMBuilderRef b = a->b;
  int64_t v;
  if (fg_knob_get(&a->e->p->opts.knobs, FG_KNOB_ATTN_ORDERED_WAIT, &v) && v == 0)
    return wg_wait(a, 0, acc, n);
  LLVMValueRef gate = LLVMBuildFAdd(b, LLVMBuildLoad2(b, a->m->f32, st->l[0][0], ""),
                                    LLVMBuildLoad2(b, a->m->f32, st->l[0][1], ""), "");
  return fgb_tc_wg_wait_after(a->m, 0, acc, n, gate, a->order_slot) || wg_too_long(a);
}

/* The top of key block kb in the overlapped loop: wait for its tiles
 * (cp.async groups: one a block, `ahead` blocks ahead), make them visible
 * to wgmma and publish them (the barrier also says every warp is done with
 * block kb - 2, whose stage takes block kb + ahead = kb + stages - 2); the
 * byte offset of kb's stage. */
static LLVMValueRef wg_block_top(attn *a, LLVMValueRef kb, LLVMValueRef nkb, int64_t stage_bytes,
                                 int64_t k_at, int64_t v_at, bool async) {
  LLVMBuilderRef b = a->b;
  int stages = a->k->attn_stages, ahead = stages - 2;
  if (a->k->attn_ws) { /* attnws: the block's full barrier, phase kb / stages */
    LLVMValueRef st = LLVMBuildURem(b, kb, i32c(a, stages), "");
    ws_wait(a, ws_bar(a, a->bar_full, st),
            LLVMBuildAnd(b, LLVMBuildUDiv(b, kb, i32c(a, stages), ""), i32c(a, 1), ""));
    fgb_tc_wg_fence_proxy(a->m);
    return LLVMBuildMul(b, st, i32c(a, stage_bytes), "");
  }
  if (async)
    fgb_cp_async_wait(a->m, ahead - 1);
  fgb_tc_wg_fence_proxy(a->m);
  fgb_barrier(a->m);
  load_kv_ahead(a, kb, ahead, nkb, stage_bytes, k_at, v_at, async);
  return LLVMBuildMul(b, LLVMBuildURem(b, kb, i32c(a, stages), ""), i32c(a, stage_bytes), "");
}

/* Marks the loop whose back edge is br llvm.loop.unroll.disable: LLVM
 * keeps it rolled and the PTX says .pragma "nounroll" at its header, so
 * that ptxas does not unroll it either (unrolled, the overlapped loop's
 * in-flight registers of two iterations spill at head dim 128). */
static void no_unroll(attn *a, LLVMValueRef br) {
  LLVMContextRef ctx = a->m->ctx;
  const char *key = "llvm.loop.unroll.disable";
  LLVMMetadataRef flag = LLVMMDStringInContext2(ctx, key, strlen(key));
  LLVMMetadataRef flagnode = LLVMMDNodeInContext2(ctx, &flag, 1);
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(ctx, NULL, 0);
  LLVMMetadataRef ops[2] = {tmp, flagnode};
  LLVMMetadataRef id = LLVMMDNodeInContext2(ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, id); /* the loop id refers to itself */
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ctx, "llvm.loop", 9), LLVMMetadataAsValue(ctx, id));
}

/* O's accumulators (this thread's D / 2) from st, times alpha (avar: its
 * rows g and g + 8), here: alpha through opaque(), or LLVM would hoist
 * the products out of the place they overlap S's wgmmas in (GVN: the
 * loop's and the epilogue's are the same) */
static void wg_rescale_o(attn *a, attn_state *st, LLVMValueRef avar[2], LLVMValueRef *acc) {
  LLVMBuilderRef b = a->b;
  LLVMValueRef alpha[2];
  for (int h = 0; h < 2; h++) {
    LLVMValueRef x = LLVMBuildBitCast(b, LLVMBuildLoad2(b, a->m->f32, avar[h], ""), a->m->i32, "");
    alpha[h] = LLVMBuildBitCast(b, opaque(a, x), a->m->f32, "");
  }
  for (int d = 0; d < a->D / 8; d++)
    for (int i = 0; i < 4; i++)
      acc[4 * d + i] =
          LLVMBuildFMul(b, LLVMBuildLoad2(b, a->m->f32, st->o[0][d][i], ""), alpha[i / 2], "");
}

static void wg_store_o(attn *a, attn_state *st, LLVMValueRef *acc) {
  for (int d = 0; d < a->D / 8; d++)
    for (int i = 0; i < 4; i++)
      LLVMBuildStore(a->b, acc[4 * d + i], st->o[0][d][i]);
}

/* attnpp: pingpong between the CTA's two warpgroups (plan: pingpong;
 * FlashAttention-3's inter-warpgroup overlap). Named barriers (0 is the
 * CTA's) order the wgmma issues of an overlapped iteration, so that the
 * tensor cores run one group's products while the other's softmax runs,
 * rather than both softmaxes at once on the same units:
 *
 *   1: S_j of group 0, S_j of group 1, group 0's P V (group 0 arrives at
 *      barrier 1 after issuing S, group 1 waits there before its S;
 *      group 1 arrives at 2 after its S, group 0 waits there before P V)
 *   2: group 0's S_j and P V, then group 1's (barrier 1: group 0 arrives
 *      after its P V, group 1 waits before its S)
 *
 * bar.sync id, 256 of one group's 128 threads completes with bar.arrive
 * id, 256 of the other's. Each barrier is used once an iteration by each
 * group, and the CTA barrier at the top of the next iteration comes after
 * both uses, so no group arrives twice at a barrier before the other
 * waited there (which would complete it wrongly); both groups run every
 * iteration (wg_overlap_loop runs causal blocks a group's rows precede,
 * masked). Each point is one inline-assembly statement with the group
 * index as a predicate (warp-uniform), a no-op without pingpong. */
enum { PP_BEFORE_S, PP_AFTER_S, PP_BEFORE_PV, PP_AFTER_PV, PP_WS_INIT, PP_WS_LAST };

/* attnws (ATTN_WS=2): FlashAttention-3's pingpong without a CTA barrier.
 * Group g waits at named barrier 1 + g before issuing a round's wgmmas
 * (block 0's S; S_j and P_{j-1} V_{j-1}; the last P V) and arrives at the
 * other's, 2 - g, after issuing them; group 1 arrives at 1 once first
 * (group 0 goes first) and not after its last round, so each barrier sees
 * as many arrivals as waits: R rounds a group, group 0 waits R times at 1
 * (1 + R - 1 arrivals of group 1), group 1 R times at 2 (R of group 0). */
static void ws_pingpong(attn *a, int point) {
  LLVMBuilderRef b = a->b;
  LLVMValueRef group = LLVMBuildLShr(b, a->warp, i32c(a, 2), "");
  if (point == PP_BEFORE_S) {
    LLVMValueRef id = LLVMBuildAdd(b, group, i32c(a, 1), "");
    ws_asm(a, "bar.sync $0, 256;", "r,~{memory}", &id, 1);
  } else if (point == PP_AFTER_PV) {
    LLVMValueRef id = LLVMBuildSub(b, i32c(a, 2), group, "");
    ws_asm(a, "bar.arrive $0, 256;", "r,~{memory}", &id, 1);
  } else if (point == PP_WS_INIT)
    ws_asm(a, "{\n.reg .pred p;\nsetp.ne.u32 p, $0, 0;\n@p bar.arrive 1, 256;\n}", "r,~{memory}",
           &group, 1);
  else if (point == PP_WS_LAST)
    ws_asm(a, "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 0;\n@p bar.arrive 2, 256;\n}", "r,~{memory}",
           &group, 1);
}

static void wg_pingpong(attn *a, int point) {
  int mode = a->k->attn_pingpong;
  const char *text = NULL;
  if (a->k->attn_ws == 2) {
    ws_pingpong(a, point);
    return;
  }
  if (mode == 1 && point == PP_BEFORE_S)
    text = "{\n.reg .pred p;\nsetp.ne.u32 p, $0, 0;\n@p bar.sync 1, 256;\n}";
  else if (mode == 1 && point == PP_AFTER_S)
    text = "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 0;\n@p bar.arrive 1, 256;\n"
           "@!p bar.arrive 2, 256;\n}";
  else if (mode == 1 && point == PP_BEFORE_PV)
    text = "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 0;\n@p bar.sync 2, 256;\n}";
  else if (mode == 2 && point == PP_BEFORE_S)
    text = "{\n.reg .pred p;\nsetp.ne.u32 p, $0, 0;\n@p bar.sync 1, 256;\n}";
  else if (mode == 2 && point == PP_AFTER_PV)
    text = "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 0;\n@p bar.arrive 1, 256;\n}";
  if (!text)
    return;
  fgb_tc_asm_i32(a->m, text, LLVMBuildLShr(a->b, a->warp, i32c(a, 2), ""));
}

/* The wgmma loop software-pipelined (plan: overlap; FlashAttention-3's
 * intra-warpgroup overlap, its Algorithm 2): block 0's S and softmax
 * first, then for each key block j >= 1
 *
 *   issue S = Q K_j^T; O *= alpha_{j-1} (while S runs);
 *   issue O += P_{j-1} V_{j-1}   (two wgmma groups in flight)
 *   wait_group 1: S complete; mask, softmax of block j -> alpha_j, P_j in
 *   f32 (the tensor cores run P_{j-1} V_{j-1} meanwhile)
 *   wait_group 0 (ordered after the softmax: wg_wait_softmax): O
 *   complete; P_j packed (after the wait, as
 *   FlashAttention-3 does: ptxas may give P_j the registers of P_{j-1},
 *   and serializes every wgmma of the kernel where an instruction writes
 *   a register an unfinished wgmma reads)
 *
 * and O = O alpha_last + P_last V_last after the loop. P_{j-1} (packed
 * pairs) and alpha_{j-1} are locals from one iteration to the next
 * (alpha_j applies to everything up to block j - 1; block 0's multiplies
 * O = 0).
 * Block j - 1's V is still read in iteration j, so a stage is reloaded
 * two blocks after its own (wg_block_top): stages >= 3. A warpgroup
 * whose rows all precede a causal block runs it anyway (only where bc <
 * br: its scores masked, P = 0), the groups of the chain being the same
 * in every warp. */
static void wg_overlap_loop(attn *a, attn_state *st, LLVMValueRef nkb, LLVMValueRef qdesc,
                            LLVMValueRef kdesc0, LLVMValueRef vdesc0, int64_t stage_bytes,
                            int64_t k_at, int64_t v_at, bool async) {
  fgb_emitter *e = a->e;
  fgb_module *m = a->m;
  LLVMBuilderRef b = a->b;
  int nk = a->bc / 16, nn = a->bc / 8, nd = (int)(a->D / 8), stages = a->k->attn_stages;
  LLVMValueRef s[MAX_MT][MAX_BC / 8][4], alpha[MAX_MT][2], pa[MAX_MT][MAX_BC / 16][4];
  LLVMValueRef acc[MAX_D / 2];
  LLVMValueRef pvar[MAX_BC / 16][4]; /* P of the previous block */
  /* block 0: S, its softmax (O is 0: no rescale) */
  LLVMValueRef cur = wg_block_top(a, i32c(a, 0), nkb, stage_bytes, k_at, v_at, async);
  bool wsp = a->k->attn_ws == 2; /* attnws: block 0's S is a pingpong round */
  LLVMValueRef sv[MAX_BC / 2];
  if (wsp) {
    wg_pingpong(a, PP_WS_INIT);
    wg_pingpong(a, PP_BEFORE_S);
  }
  if (!wg_scores(a, qdesc, fgb_tc_wg_desc_add(a->m, kdesc0, cur), s, !wsp))
    return;
  if (wsp) {
    wg_pingpong(a, PP_AFTER_PV);
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++)
        sv[4 * j + i] = s[0][j][i];
    if (!wg_wait(a, 0, sv, 4 * nn))
      return;
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++)
        s[0][j][i] = sv[4 * j + i];
  }
  block_mask(a, st, i32c(a, 0), s);
  block_softmax(a, st, s, alpha, pa);
  for (int j = 0; j < nk; j++)
    for (int i = 0; i < 4; i++)
      pvar[j][i] = fgk_local_var(e, m->i32, pa[0][j][i]);
  LLVMValueRef avar[2]; /* alpha of the previous block */
  for (int h = 0; h < 2; h++)
    avar[h] = fgk_local_var(e, m->f32, alpha[0][h]);

  /* the bound through opaque(): a loop of one iteration would be straight
   * code that ptxas schedules into spills at head dim 128 (no_unroll) */
  fgk_loop loop;
  LLVMValueRef kb = fgk_loop_begin(e, &loop, i32c(a, 1), opaque(a, nkb), i32c(a, 1));
  LLVMValueRef k0 = LLVMBuildMul(b, kb, i32c(a, a->bc), "");
  cur = wg_block_top(a, kb, nkb, stage_bytes, k_at, v_at, async);
  LLVMValueRef prev =
      LLVMBuildMul(b, LLVMBuildURem(b, LLVMBuildSub(b, kb, i32c(a, 1), ""), i32c(a, stages), ""),
                   i32c(a, stage_bytes), "");
  wg_pingpong(a, PP_BEFORE_S);
  if (!wg_scores(a, qdesc, fgb_tc_wg_desc_add(a->m, kdesc0, cur), s, false))
    return;
  wg_pingpong(a, PP_AFTER_S);
  for (int j = 0; j < nk; j++)
    for (int i = 0; i < 4; i++)
      pa[0][j][i] = LLVMBuildLoad2(b, m->i32, pvar[j][i], "");
  wg_rescale_o(a, st, avar, acc);
  wg_pingpong(a, PP_BEFORE_PV);
  if (!wg_pv(a, pa[0], fgb_tc_wg_desc_add(a->m, vdesc0, prev), acc, false))
    return;
  wg_pingpong(a, PP_AFTER_PV);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      sv[4 * j + i] = s[0][j][i];
  if (!wg_wait(a, 1, sv, 4 * nn))
    return;
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[0][j][i] = sv[4 * j + i];
  block_mask(a, st, k0, s);
  block_softmax(a, st, s, alpha, NULL);
  if (!wg_wait_softmax(a, st, acc, 4 * nd))
    return;
  if (a->k->attn_ws) /* attnws: block kb - 1's stage is free */
    ws_release(a, LLVMBuildSub(b, kb, i32c(a, 1), ""));
  wg_store_o(a, st, acc);
  block_pack(a, s[0], pa[0]);
  for (int j = 0; j < nk; j++)
    for (int i = 0; i < 4; i++)
      LLVMBuildStore(b, pa[0][j][i], pvar[j][i]);
  for (int h = 0; h < 2; h++)
    LLVMBuildStore(b, alpha[0][h], avar[h]);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  fgk_loop_end(e, &loop, kb);
  no_unroll(a, LLVMGetBasicBlockTerminator(latch));

  /* the last block's P V (its stage is not reloaded) */
  LLVMValueRef last =
      LLVMBuildMul(b, LLVMBuildURem(b, LLVMBuildSub(b, nkb, i32c(a, 1), ""), i32c(a, stages), ""),
                   i32c(a, stage_bytes), "");
  for (int j = 0; j < nk; j++)
    for (int i = 0; i < 4; i++)
      pa[0][j][i] = LLVMBuildLoad2(b, m->i32, pvar[j][i], "");
  wg_rescale_o(a, st, avar, acc);
  if (wsp)
    wg_pingpong(a, PP_BEFORE_S);
  if (!wg_pv(a, pa[0], fgb_tc_wg_desc_add(a->m, vdesc0, last), acc, !wsp))
    return;
  if (wsp) {
    wg_pingpong(a, PP_WS_LAST);
    if (!wg_wait(a, 0, acc, 4 * nd))
      return;
  }
  wg_store_o(a, st, acc);
}

/* attnpp (plan: lpt H; knob ATTN_LPT, causal): the CTA's query block and
 * (batch, head) pair (i32) from its linear index L = ctaid.x + nq ctaid.y
 * (nq query blocks, the launch order), so that the CTAs launched first
 * are the heaviest query blocks of every pair, section by section of H
 * pairs: section L / (H nq), in it query block nq - 1 - r / n and pair
 * r % n (r = L mod H nq, n = H or the last section's pairs). Every (query
 * block, pair) is one CTA's: the map is a bijection of [0, nq BH).
 * fresh: from the CTA index read again, for the stores after the loop
 * (kept in a register across it, the pair spilled the plain variant at
 * head dim 128, causal: 255 registers without the order). */
static LLVMValueRef lpt_order(attn *a, LLVMValueRef *bh, bool fresh) {
  LLVMBuilderRef b = a->b;
  int64_t nq = a->k->grid[0], pairs = a->k->grid[1], hs = a->k->attn_lpt_heads;
  int64_t nsec = (pairs + hs - 1) / hs, last = pairs - (nsec - 1) * hs;
  LLVMValueRef cx = fgb_ctaid(a->m, 0), cy = fgb_ctaid(a->m, 1);
  if (fresh) /* computed again where used (not CSE'd with the first) */
    cx = opaque(a, cx), cy = opaque(a, cy);
  LLVMValueRef lin = LLVMBuildAdd(b, cx, LLVMBuildMul(b, cy, i32c(a, nq), ""), "");
  LLVMValueRef sec = LLVMBuildUDiv(b, lin, i32c(a, hs * nq), "");
  LLVMValueRef r = LLVMBuildSub(b, lin, LLVMBuildMul(b, sec, i32c(a, hs * nq), ""), "");
  LLVMValueRef n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, sec, i32c(a, nsec - 1), ""),
                                   i32c(a, last), i32c(a, hs), "");
  *bh = LLVMBuildAdd(b, LLVMBuildMul(b, sec, i32c(a, hs), ""), LLVMBuildURem(b, r, n, ""), "");
  return LLVMBuildSub(b, i32c(a, nq - 1), LLVMBuildUDiv(b, r, n, ""), "");
}

/* bh for the stores: with the LPT order, computed again (lpt_order) */
static LLVMValueRef lpt_bh_again(attn *a, LLVMValueRef bh, LLVMValueRef lpt_bh) {
  if (!lpt_bh)
    return bh;
  LLVMValueRef again;
  lpt_order(a, &again, true);
  return to_ity(a, again);
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
  a->mt = k->attn_warps > 0 ? a->br / (16 * k->attn_warps) : 0;
  int stages = k->attn_stages;
  bool ws = k->attn_ws; /* attnws: the last warp copies, the others compute */
  int loaders = ws ? WS_LOADERS : k->block;
  if (a->D > MAX_D || a->D % 16 || (a->D / 8) % 2 || a->bc > MAX_BC || a->bc % 16 || a->mt < 1 ||
      a->mt > MAX_MT || a->br != 16 * a->mt * k->attn_warps || (a->br * a->D / 8) % loaders ||
      (a->bc * a->D / 8) % loaders || a->pitch % 8 || stages < 1 || stages > 3 ||
      (ws && (k->block != 32 * k->attn_warps + WS_LOADERS || !k->attn_wgmma || !k->attn_overlap ||
              stages < 3))) {
    fgb_fail(e, "attention kernel %d: unsupported tiles (D %lld, br %d, bc %d, block %d)", k->id,
             (long long)a->D, a->br, a->bc, k->block);
    return false;
  }
  bool wg = k->attn_wgmma;
  if (wg && ((a->D != 64 && a->D != 128) || a->mt != 1 || k->attn_warps % 4 ||
             (!ws && (k->block % (a->D / 8) || (k->block / (a->D / 8)) % 8)) || a->pitch != a->D ||
             (a->dt != FG_BF16 && a->dt != FG_F16))) {
    fgb_fail(e, "attention kernel %d: unsupported wgmma tiles (D %lld, br %d, bc %d, block %d)",
             k->id, (long long)a->D, a->br, a->bc, k->block);
    return false;
  }
  const fg_attr *sa = fg_node_attr(n, "scale");
  double scale =
      sa ? (sa->kind == FG_ATTR_FLOAT ? sa->f : (double)sa->i) : 1.0 / sqrt((double)a->D);
  attn_state st;
  float scale2 = (float)(scale * 1.4426950408889634);
  st.scale2 = f32c(a, (double)scale2);
  st.fold = scale2 > 0;

  /* shared memory: Q, then per stage K and V */
  char name[256];
  snprintf(name, sizeof name, "fg_attn_%s", LLVMGetValueName(e->fn));
  a->smem = fgb_dynamic_shared(m, name);
  if (wg) { /* the tiles from the first multiple of 1024 bytes (the swizzle's atoms) */
    LLVMValueRef addr = LLVMBuildTrunc(b, LLVMBuildPtrToInt(b, a->smem, m->i64, ""), m->i32, "");
    LLVMValueRef pad = LLVMBuildAnd(b, LLVMBuildNeg(b, addr, ""), i32c(a, 1023), "");
    a->smem = fgb_tc_smem_at(m, a->smem, pad);
    a->saddr = LLVMBuildAdd(b, addr, pad, "");
  }
  int64_t kv_bytes = (int64_t)a->bc * a->pitch * 2;
  int64_t q_at = 0, k_at = (int64_t)a->br * a->pitch * 2, v_at = k_at + kv_bytes;
  int64_t stage_bytes = 2 * kv_bytes;
  bool async = e->aligned && e->vec == 8 && stages >= 2;
  if (wg) /* the plan's 16 bytes after the stages (schedule_attention_wgmma) */
    a->order_slot = LLVMBuildAdd(b, a->saddr, i32c(a, k_at + stages * stage_bytes), "");

  a->tid = fgb_tid(m, 0);
  a->warp = LLVMBuildLShr(b, a->tid, i32c(a, 5), "");
  LLVMValueRef lane = LLVMBuildAnd(b, a->tid, i32c(a, 31), "");
  a->g = LLVMBuildLShr(b, lane, i32c(a, 2), "");
  a->t = LLVMBuildAnd(b, lane, i32c(a, 3), "");
  a->tzero = LLVMBuildICmp(b, LLVMIntEQ, a->t, i32c(a, 0), "");
  LLVMValueRef qb = fgb_ctaid(m, 0), lpt_bh = NULL;
  /* attnpp: the heaviest query blocks of every (batch, head) first; the
   * vectorized variant only (the plain one, at 255 registers at head dim
   * 128, spilled with it; its order is the default's) */
  if (k->attn_lpt && e->aligned && e->vec == 8)
    qb = lpt_order(a, &lpt_bh, false);
  else if (a->causal) /* the longest rows first */
    qb = LLVMBuildSub(b, i32c(a, k->grid[0] - 1), qb, "");
  a->q0 = LLVMBuildMul(b, qb, i32c(a, a->br), "");
  LLVMValueRef bh = to_ity(a, lpt_bh ? lpt_bh : fgb_ctaid(m, 1));
  LLVMValueRef bi = LLVMBuildUDiv(b, bh, fgb_const(e, H), "");
  LLVMValueRef hi = LLVMBuildURem(b, bh, fgb_const(e, H), "");
  /* GQA: query head h reads key and value head h / (Hq / Hk) */
  int64_t group = H / n->in[1]->type.dims[1].size;
  LLVMValueRef hk = group > 1 ? LLVMBuildUDiv(b, hi, fgb_const(e, group), "") : hi;
  if (!source(a, 0, &a->q, bi, hi) || !source(a, 1, &a->k_, bi, hk) || !source(a, 2, &a->v, bi, hk))
    return false;
  LLVMValueRef wrow = LLVMBuildMul(b, a->warp, i32c(a, 16 * a->mt), ""); /* in the tile */
  st.wrow0 = LLVMBuildAdd(b, a->q0, wrow, "");
  for (int r = 0; r < a->mt; r++) {
    a->row[r][0] = LLVMBuildAdd(b, st.wrow0, LLVMBuildAdd(b, a->g, i32c(a, 16 * r), ""), "");
    a->row[r][1] = LLVMBuildAdd(b, a->row[r][0], i32c(a, 8), "");
  }

  /* key blocks: all, or under the causal mask those up to the CTA's last row */
  LLVMValueRef kend = i32c(a, a->Sk);
  if (a->causal)
    kend = fgk_imin(e, LLVMBuildAdd(b, a->q0, i32c(a, a->br), ""), kend);
  LLVMValueRef nkb =
      LLVMBuildUDiv(b, LLVMBuildAdd(b, kend, i32c(a, a->bc - 1), ""), i32c(a, a->bc), "");

  /* Q into shared memory with the first stages - 1 key blocks (one
   * cp.async group each; block 0 exists: every CTA sees key 0) */
  /* the overlap in the cp.async variant only: the plain copies' loaded
   * pieces on top of its in-flight registers spill at head dim 128 (the
   * plain variant, for misaligned operands, keeps the loop below) */
  bool overlap = wg && k->attn_overlap && (async || ws);
  if (k->attn_pingpong && (!wg || !k->attn_overlap || k->attn_warps != 8)) {
    fgb_fail(e, "attention kernel %d: pingpong needs the overlapped loop and 2 warpgroups", k->id);
    return false;
  }
  if (overlap && stages < 3) {
    fgb_fail(e, "attention kernel %d: the wgmma overlap needs 3 stages or more", k->id);
    return false;
  }
  int ahead = overlap ? stages - 2 : stages - 1; /* key blocks loading while one computes */
  if (ws) { /* attnws: thread 0 sets the ring's barriers up; then the producer warp copies
             * (and leaves) while the consumers run the overlapped loop */
    int64_t bars = k_at + stages * stage_bytes + 16; /* after the order slot */
    a->bar_full = LLVMBuildAdd(b, a->saddr, i32c(a, bars), "");
    a->bar_empty = LLVMBuildAdd(b, a->saddr, i32c(a, bars + 8 * stages), "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntEQ, a->tid, i32c(a, 0), ""));
    for (int sg = 0; sg < stages; sg++) {
      LLVMValueRef args[2] = {ws_bar(a, a->bar_full, i32c(a, sg)),
                              ws_bar(a, a->bar_empty, i32c(a, sg))};
      char text[160];
      snprintf(text, sizeof text,
               "mbarrier.init.shared::cta.b64 [$0], %d;\nmbarrier.init.shared::cta.b64 [$1], %d;",
               WS_LOADERS, k->attn_warps);
      ws_asm(a, text, "r,r,~{memory}", args, 2);
    }
    fgb_end_if(e, merge);
    fgb_barrier(m);
    LLVMValueRef fn = fgb_current_fn(m);
    LLVMBasicBlockRef prod = LLVMAppendBasicBlockInContext(m->ctx, fn, "producer");
    LLVMBasicBlockRef cons = LLVMAppendBasicBlockInContext(m->ctx, fn, "consumer");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntUGE, a->warp, i32c(a, k->attn_warps), ""), prod,
                    cons);
    LLVMPositionBuilderAtEnd(b, prod);
    ws_producer(a, nkb, stage_bytes, q_at, k_at, v_at, async);
    LLVMBuildRetVoid(b);
    LLVMPositionBuilderAtEnd(b, cons);
    char text[64];
    snprintf(text, sizeof text, "setmaxnreg.inc.sync.aligned.u32 %d;", WS_CONSUMER_REGS);
    ws_asm(a, text, "~{memory}", NULL, 0);
  } else
    load_tile(a, &a->q, a->q0, a->Sq, a->br, i32c(a, q_at), async);
  for (int sg = 0; sg < (ws ? 0 : ahead); sg++) {
    LLVMBasicBlockRef merge =
        sg ? fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, i32c(a, sg), nkb, "")) : NULL;
    load_kv(a, i32c(a, sg), i32c(a, sg * stage_bytes), k_at, v_at, async);
    if (merge)
      fgb_end_if(e, merge);
    if (async)
      fgb_cp_async_commit(m);
  }
  LLVMValueRef l8 = LLVMBuildAnd(b, lane, i32c(a, 7), "");
  LLVMValueRef mi = LLVMBuildLShr(b, lane, i32c(a, 3), "");
  LLVMValueRef two_t = LLVMBuildMul(b, a->t, i32c(a, 2), "");
  st.two_t = two_t;
  st.diag0 = LLVMBuildSub(b, LLVMBuildAdd(b, st.wrow0, a->g, ""), two_t, "");
  /* ldmatrix: lane l addresses row l % 8 of matrix l / 8. Q's (A) and
   * V's (B, .trans) matrices alternate row blocks of 8 and step column
   * blocks every two; K's (B) alternate column blocks of 8 and step row
   * (key) blocks every two. Plain loads: this thread's fragments, Q and K
   * at (row g, column 2t), V at (row 2t, column g). */
  LLVMValueRef lo8 = LLVMBuildMul(b, LLVMBuildAnd(b, mi, i32c(a, 1), ""), i32c(a, 8), "");
  LLVMValueRef hi8 = LLVMBuildMul(b, LLVMBuildLShr(b, mi, i32c(a, 1), ""), i32c(a, 8), "");
  LLVMValueRef alt_row = LLVMBuildAdd(b, l8, lo8, ""), step_row = LLVMBuildAdd(b, l8, hi8, "");
  bool ldm = k->attn_ldmatrix;
  st.qbase =
      fgb_tc_tile_base(m, a->smem, i32c(a, q_at), LLVMBuildAdd(b, wrow, ldm ? alt_row : a->g, ""),
                       ldm ? hi8 : two_t, a->pitch);
  st.kbase = fgb_tc_tile_base(m, a->smem, i32c(a, k_at), ldm ? step_row : a->g, ldm ? lo8 : two_t,
                              a->pitch);
  st.vbase = fgb_tc_tile_base(m, a->smem, i32c(a, v_at), ldm ? alt_row : two_t, ldm ? hi8 : a->g,
                              a->pitch);
  int nkq = (int)(a->D / 16), nd = (int)(a->D / 8);
  /* wgmma: the descriptors of the warpgroup's Q rows and of stage 0's K
   * and V tiles (K-major: leading byte offset unused, 16; V MN-major: the
   * next 64 columns bc rows on) */
  LLVMValueRef qdesc = NULL, kdesc0 = NULL, vdesc0 = NULL, wgrow0 = NULL;
  if (wg) {
    LLVMValueRef wfirst = LLVMBuildAnd(b, a->warp, i32c(a, ~3), ""); /* the warpgroup's warp 0 */
    wgrow0 = LLVMBuildAdd(b, a->q0, LLVMBuildMul(b, wfirst, i32c(a, 16), ""), "");
    qdesc = wg_desc(
        a, LLVMBuildAdd(b, i32c(a, q_at), LLVMBuildMul(b, wfirst, i32c(a, 16 * 128), ""), ""), 16);
    kdesc0 = wg_desc(a, i32c(a, k_at), 16);
    vdesc0 = wg_desc(a, i32c(a, v_at), a->bc * 128);
  }
  if (k->attn_q_regs) { /* Q's fragments once: wait for the Q tile (group 0) */
    if (async)
      fgb_cp_async_wait(m, stages - 2);
    fgb_barrier(m);
    LLVMValueRef qa[MAX_MT][MAX_D / 16][4];
    for (int r = 0; r < a->mt; r++)
      for (int kk = 0; kk < nkq; kk++)
        q_fragment(a, &st, r, kk, false, qa[r][kk]);
    memcpy(st.qa, qa, sizeof qa);
  }
  LLVMValueRef ninf = f32c(a, -INFINITY), zero = f32c(a, 0.0);
  for (int r = 0; r < a->mt; r++) {
    for (int h = 0; h < 2; h++) {
      st.m[r][h] = fgk_local_var(e, m->f32, ninf);
      st.l[r][h] = fgk_local_var(e, m->f32, zero);
    }
    for (int j = 0; j < nd; j++)
      for (int i = 0; i < 4; i++)
        st.o[r][j][i] = fgk_local_var(e, m->f32, zero);
  }

  if (overlap) {
    wg_overlap_loop(a, &st, nkb, qdesc, kdesc0, vdesc0, stage_bytes, k_at, v_at, async);
    return !e->failed && store_results(a, &st, lpt_bh_again(a, bh, lpt_bh)) && !e->failed;
  }
  fgk_loop loop;
  LLVMValueRef kb = fgk_loop_begin(e, &loop, i32c(a, 0), nkb, i32c(a, 1));
  LLVMValueRef k0 = LLVMBuildMul(b, kb, i32c(a, a->bc), "");
  LLVMValueRef cur = i32c(a, 0); /* this block's stage offset */
  if (stages == 1) {
    fgb_barrier(m); /* every warp is done with the previous block's tiles */
    load_kv(a, kb, cur, k_at, v_at, false);
    if (wg)
      fgb_tc_wg_fence_proxy(a->m);
    fgb_barrier(m);
  } else {
    /* wait for this block's tiles; the barrier also says every warp is
     * done with the previous block, whose stage then takes block kb +
     * stages - 1 (one cp.async group an iteration, empty past the end) */
    if (async)
      fgb_cp_async_wait(m, stages - 2);
    if (wg)
      fgb_tc_wg_fence_proxy(a->m);
    fgb_barrier(m);
    cur = LLVMBuildMul(b, LLVMBuildURem(b, kb, i32c(a, stages), ""), i32c(a, stage_bytes), "");
    load_kv_ahead(a, kb, stages - 1, nkb, stage_bytes, k_at, v_at, async);
  }
  if (!k->attn_q_regs && !wg)
    st.qbase = opaque_ptr(a, st.qbase);
  LLVMValueRef kbase =
      wg ? fgb_tc_wg_desc_add(a->m, kdesc0, cur) : fgb_gep(m, st.kbase, m->i8, cur);
  LLVMValueRef vbase =
      wg ? fgb_tc_wg_desc_add(a->m, vdesc0, cur) : fgb_gep(m, st.vbase, m->i8, cur);
  LLVMValueRef s[MAX_MT][MAX_BC / 8][4];
  /* causal: a warp whose rows all precede the block's first key skips it
   * (its m, l and O stay as they are; warp-uniform); wgmma: a warpgroup
   * (its 4 warps run each wgmma together; a warp of it whose rows precede
   * the block masks all its scores, and P = 0 adds nothing) */
  LLVMBasicBlockRef seen = NULL;
  if (a->causal)
    seen =
        fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLE, k0,
                                      wg ? LLVMBuildAdd(b, wgrow0, i32c(a, 63), "")
                                         : LLVMBuildAdd(b, st.wrow0, i32c(a, 16 * a->mt - 1), ""),
                                      ""));
  if (wg) {
    if (!wg_scores(a, qdesc, kbase, s, true))
      return false;
  } else
    block_scores(a, &st, kbase, s);
  block_mask(a, &st, k0, s);
  block_update(a, &st, vbase, s);
  if (seen)
    fgb_end_if(e, seen);
  fgk_loop_end(e, &loop, kb);
  if (!store_results(a, &st, lpt_bh_again(a, bh, lpt_bh)))
    return false;
  return !e->failed;
}
