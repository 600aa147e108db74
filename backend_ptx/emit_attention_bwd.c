/* The attention backward (issue 19): `dq, dk, dv = sdpa_bwd(do, q, k, v,
 * o, lse)` as two kernels without atomics (the split of the Triton
 * fused-attention tutorial and FlashAttention-2's backward; plan.h,
 * schedule_attention_bwd). With P = exp(scale Q K^T - lse) recomputed from
 * the forward's lse (zero where masked), delta = rowsum(dO o O):
 *
 *   dV = P^T dO     dP = dO V^T     dS = P o (dP - delta)
 *   dQ = scale dS K                 dK = scale dS^T Q
 *
 * FG_ATTN_DQ: a CTA owns br query rows of one (batch, query head); each
 * warp 16 of them. It first computes their delta (from the O and dO
 * tiles; a row's sum over the 4 lanes of a quad) and writes it to the
 * workspace, then loops over the key blocks of bc keys the rows see: K, V
 * tiles to shared memory; S = Q K^T and dP = dO V^T (f32 accumulators,
 * 16 x bc a warp), P, dS, and dQ += dS K with dS rounded to the dtype as
 * the A operand straight from the accumulators (as the forward's P).
 *
 * FG_ATTN_DKDV (launched after): a CTA owns br keys of one (batch, key
 * head), each warp 16. For each query head of the key head's group in
 * order, and each query block of bc queries that sees some of its keys:
 * Q, dO tiles, lse (times log2 e) and delta to shared memory; S^T = K Q^T
 * (16 keys x bc queries a warp), P^T, dV += P^T dO, dP^T = V dO^T, dS^T,
 * dK += dS^T Q. dK and dV of a key are summed by one thread in one order:
 * the results are the same bit for bit on every run.
 *
 * Fragments and tile layouts are the forward's (emit_attention.c): tiles
 * row-major [row][d] in dynamic shared memory with a pitch of D + 8
 * elements, rows past a sequence zero-filled. A matrix X stored [n][k]
 * (K in Q K^T) gives B = X^T by ldmatrix (as the forward's K), one stored
 * [k][n] (K in dS K) by ldmatrix .trans (as the forward's V); the A
 * operands of the warp's own rows (Q, dO, K, V tiles) by ldmatrix too
 * (plan: ldmatrix; without, plain shared loads). Operands are read in
 * place through their strides; dq, dk, dv are written dense, or into
 * their pieces of a cat's buffer through strides (opt/zip_store.c). */
#include <math.h>
#include <stdio.h>

#include "emit.h"
#include "emit_skel.h"
#include "fgb_internal.h"
#include "tensor_core.h"

enum { MAX_D = 128, MAX_BC = 128 };
enum { OP_DO, OP_Q, OP_K, OP_V, OP_O, OP_LSE, NOPS };

typedef struct bsrc { /* where an operand is read */
  LLVMValueRef ptr;   /* the global buffer */
  fg_strided s;       /* [B, H, S, D] (lse: [B, H, S]) over it */
  LLVMValueRef base;  /* element offset of the current (batch, head) */
} bsrc;

typedef struct bwd {
  fgb_emitter *e;
  fgb_module *m;
  LLVMBuilderRef b;
  const fg_kernel *k;
  fg_dtype dt;
  bool causal;
  int64_t Hq, Hk, Sq, Sk, D, group;
  int br, bc, pitch;
  bsrc src[NOPS];
  LLVMValueRef delta; /* the workspace, f32 [B, Hq, Sq] */
  LLVMValueRef smem;
  LLVMValueRef tid, warp, lane, g, t, two_t;
  /* per-thread element offsets (row, col) of fragment loads, see lane_bases */
  LLVMValueRef a_row, a_col, nk_row, nk_col, kn_row, kn_col;
  LLVMValueRef scale2; /* scale x log2 e */
  double scale;
  /* wgmma (sm_90a; the plan's attn_wgmma): tiles in the 128-byte swizzle,
   * pitch D; saddr: smem's shared address (i32, 1024-byte aligned) */
  bool wg;
  LLVMValueRef saddr;
  /* bwd_overlap (the plan's attn_overlap): S and dP issued as two wgmma
   * groups, the exponentials computed while dP's runs, dK's, dV's
   * products issued as the values they take are ready; order_slot (dq):
   * the 4 bytes past the stages that order dP's wait (fgb_tc_wg_wait_after) */
  bool overlap;
  LLVMValueRef order_slot;
  int pingpong;          /* wg_pingpong's mode */
  LLVMValueRef lpt_pair; /* work_rank's pair, in sections of the LPT order */
} bwd;

static LLVMValueRef i32c(bwd *w, int64_t v) { return fgb_tc_i32(w->m, v); }
static LLVMValueRef f32c(bwd *w, double v) { return LLVMConstReal(w->m->f32, v); }
static LLVMValueRef to_ity(bwd *w, LLVMValueRef v) {
  return w->e->ity == w->m->i32 ? v : LLVMBuildSExt(w->b, v, w->e->ity, "");
}
static LLVMValueRef add(bwd *w, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildAdd(w->b, x, y, "");
}
static LLVMValueRef mul(bwd *w, LLVMValueRef x, LLVMValueRef y) {
  return LLVMBuildMul(w->b, x, y, "");
}

/* The causal backward's work order (schedule.c, attn_lpt): work_rank
 * gives this CTA's block rank (0 the heaviest; the caller turns it into a
 * query block for dq, a key block for dk, dv), work_pair its (batch, head)
 * pair. Plain: grid [blocks, pairs], each pair's blocks in turn. lpt with
 * no sections: grid [pairs, blocks], every pair's block of one rank at
 * once. lpt in sections of attn_lpt_heads pairs (knob ATTN_BWD_LPT=2; the
 * forward's lpt_order): grid [blocks, pairs], CTA L = x + y blocks in
 * section L / (hs blocks), in it rank r / n of pair r % n (r = L mod hs
 * blocks, n = hs or the last section's pairs): a bijection of [0, blocks
 * pairs). work_pair after work_rank, which leaves the sections' pair in
 * w->lpt_pair (two calls, so that the plain orders' IR keeps the order it
 * had: their PTX is what runs Z3 and before checked). */
static LLVMValueRef work_rank_at(bwd *w, bool fresh) {
  LLVMBuilderRef b = w->b;
  const fg_kernel *k = w->k;
  if (!k->attn_lpt || !k->attn_lpt_heads)
    return fgb_ctaid(w->m, k->attn_lpt ? 1 : 0);
  int64_t nb = k->grid[0], pairs = k->grid[1], hs = k->attn_lpt_heads;
  int64_t nsec = (pairs + hs - 1) / hs, last = pairs - (nsec - 1) * hs;
  LLVMValueRef cx = fgb_ctaid(w->m, 0), cy = fgb_ctaid(w->m, 1);
  if (fresh) /* computed again where used (not CSE'd with the first) */
    cx = fgb_tc_opaque(w->m, cx), cy = fgb_tc_opaque(w->m, cy);
  LLVMValueRef lin = add(w, cx, mul(w, cy, i32c(w, nb)));
  LLVMValueRef sec = LLVMBuildUDiv(b, lin, i32c(w, hs * nb), "");
  LLVMValueRef r = LLVMBuildSub(b, lin, mul(w, sec, i32c(w, hs * nb)), "");
  LLVMValueRef n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, sec, i32c(w, nsec - 1), ""),
                                   i32c(w, last), i32c(w, hs), "");
  w->lpt_pair = add(w, mul(w, sec, i32c(w, hs)), LLVMBuildURem(b, r, n, ""));
  return LLVMBuildUDiv(b, r, n, "");
}

static LLVMValueRef work_rank(bwd *w) { return work_rank_at(w, false); }

static LLVMValueRef work_pair(bwd *w) {
  const fg_kernel *k = w->k;
  if (k->attn_lpt && k->attn_lpt_heads)
    return to_ity(w, w->lpt_pair);
  return to_ity(w, fgb_ctaid(w->m, k->attn_lpt ? 0 : 1));
}

/* The sections' order read again for the stores after the key or query
 * loop (work_rank_at fresh): kept in registers across the loop, the rank
 * and pair spilled the dk, dv kernels up to 140 bytes (ptxas -v, causal
 * Sq < Sk at head dim 128). Is w->k's order in sections. */
static bool work_again(const bwd *w) { return w->k->attn_lpt && w->k->attn_lpt_heads; }

/* ---- operands ---- */

static bool source_init(bwd *w, int op) {
  bsrc *src = &w->src[op];
  src->ptr = fgk_attn_operand(w->e, op, &src->s);
  return src->ptr != NULL;
}

/* The element offset of (batch bi, head hi) of operand op (index type);
 * the coordinates of a size-1 dim are 0 (a broadcast operand). */
static void source_at(bwd *w, int op, LLVMValueRef bi, LLVMValueRef hi) {
  bsrc *src = &w->src[op];
  LLVMValueRef off = fgb_const(w->e, src->s.offset);
  LLVMValueRef c[2] = {bi, hi};
  for (int d = 0; d < 2; d++)
    if (src->s.sizes[d] > 1)
      off = add(w, off, mul(w, c[d], fgb_const(w->e, src->s.strides[d])));
  src->base = off;
}

/* wgmma: the byte offset in a swizzled tile of `rows` rows of the chunk
 * holding element (r, c) (c a multiple of 8): atom c / 64, row r, chunk
 * (c / 8) % 8 ^ r % 8 (tensor_core.h). */
static LLVMValueRef sw_off(bwd *w, int rows, LLVMValueRef r, LLVMValueRef c) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef ch = LLVMBuildLShr(b, c, i32c(w, 3), "");
  LLVMValueRef x =
      LLVMBuildXor(b, LLVMBuildAnd(b, ch, i32c(w, 7), ""), LLVMBuildAnd(b, r, i32c(w, 7), ""), "");
  LLVMValueRef atom = mul(w, LLVMBuildLShr(b, ch, i32c(w, 3), ""), i32c(w, (int64_t)rows * 128));
  return add(w, atom, add(w, mul(w, r, i32c(w, 128)), mul(w, x, i32c(w, 16))));
}

/* Copies rows [r0, r0 + rows) of operand op's current (batch, head) into
 * the shared tile at byte `at` (i32), rows at or past `limit` as zeros. A
 * thread copies pieces tid, tid + block, ... of 8 elements: one 16-byte
 * copy in the aligned variant (async: cp.async, zero fill past the end),
 * else 8 loads through the strides. */
static void load_tile(bwd *w, int op, LLVMValueRef r0, int64_t limit, int rows, LLVMValueRef at,
                      bool async) {
  fgb_emitter *e = w->e;
  LLVMBuilderRef b = w->b;
  fgb_module *m = w->m;
  const bsrc *src = &w->src[op];
  int per_row = (int)(w->D / 8), pieces = rows * per_row, block = w->k->block;
  bool vec = e->aligned && e->vec == 8;
  LLVMTypeRef v4 = LLVMVectorType(m->i32, 4);
  for (int u = 0; u < pieces / block; u++) {
    LLVMValueRef piece = add(w, w->tid, i32c(w, (int64_t)u * block));
    LLVMValueRef r = LLVMBuildUDiv(b, piece, i32c(w, per_row), "");
    LLVMValueRef c = mul(w, LLVMBuildURem(b, piece, i32c(w, per_row), ""), i32c(w, 8));
    LLVMValueRef row = add(w, r0, r);
    LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntSLT, row, i32c(w, limit), "");
    /* rows past the end read the last row (in bounds) and store zeros */
    LLVMValueRef safe = LLVMBuildSelect(b, valid, row, i32c(w, limit - 1), "");
    LLVMValueRef goff = add(w, src->base,
                            add(w, mul(w, to_ity(w, safe), fgb_const(e, src->s.strides[2])),
                                mul(w, to_ity(w, c), fgb_const(e, src->s.strides[3]))));
    LLVMValueRef soff =
        w->wg ? sw_off(w, rows, r, c) : mul(w, add(w, mul(w, r, i32c(w, w->pitch)), c), i32c(w, 2));
    LLVMValueRef sptr = fgb_tc_smem_at(m, w->smem, add(w, soff, at));
    LLVMValueRef vv;
    if (vec && async) { /* 0 bytes read past the end: zeros */
      LLVMValueRef gp = fgb_gep_global(m, src->ptr, m->i16, goff);
      fgb_cp_async16_zfill(m, sptr, gp, LLVMBuildSelect(b, valid, i32c(w, 16), i32c(w, 0), ""));
      continue;
    }
    if (vec) {
      LLVMValueRef ld = LLVMBuildLoad2(b, v4, fgb_gep_global(m, src->ptr, m->i16, goff), "");
      LLVMSetAlignment(ld, 16);
      LLVMSetMetadata(ld, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
      vv = ld;
    } else {
      LLVMValueRef words[4];
      for (int j = 0; j < 8; j++) {
        LLVMValueRef o = add(w, goff, fgb_const(e, (int64_t)j * src->s.strides[3]));
        LLVMValueRef ld = LLVMBuildLoad2(b, m->i16, fgb_gep_global(m, src->ptr, m->i16, o), "");
        LLVMSetAlignment(ld, 2);
        LLVMSetMetadata(ld, m->md_invariant, LLVMMDNodeInContext(m->ctx, NULL, 0));
        LLVMValueRef x = LLVMBuildZExt(b, ld, m->i32, "");
        words[j / 2] =
            j & 1 ? LLVMBuildOr(b, words[j / 2], LLVMBuildShl(b, x, i32c(w, 16), ""), "") : x;
      }
      vv = LLVMGetUndef(v4);
      for (int j = 0; j < 4; j++)
        vv = LLVMBuildInsertElement(b, vv, words[j], i32c(w, j), "");
    }
    LLVMValueRef st = LLVMBuildStore(b, LLVMBuildSelect(b, valid, vv, LLVMConstNull(v4), ""), sptr);
    LLVMSetAlignment(st, 16);
  }
}

/* lse (f32) of query row `row` of the current (batch, head), row < Sq. */
static LLVMValueRef load_lse(bwd *w, LLVMValueRef row) {
  bsrc *src = &w->src[OP_LSE];
  LLVMValueRef off = add(w, src->base, mul(w, to_ity(w, row), fgb_const(w->e, src->s.strides[2])));
  return fgb_load(w->m, fgb_gep_global(w->m, src->ptr, w->m->f32, off), FG_F32, FGB_LD_INVARIANT);
}

/* ---- fragments ---- */

/* Each lane's (row, col) in a tile for the three fragment loads: A of a
 * 16-row block (ldmatrix: lane l addresses row l % 16, column 8 (l / 16),
 * giving a0a1, a2a3, a4a5, a6a7; plain: row g, column 2t); B from a tile
 * [n][k] (as the forward's K); B from a tile [k][n] (as its V). */
static void lane_bases(bwd *w) {
  LLVMBuilderRef b = w->b;
  if (w->k->attn_ldmatrix) {
    LLVMValueRef l8 = LLVMBuildAnd(b, w->lane, i32c(w, 7), "");
    LLVMValueRef mi = LLVMBuildLShr(b, w->lane, i32c(w, 3), "");
    w->a_row = LLVMBuildAnd(b, w->lane, i32c(w, 15), "");
    w->a_col = mul(w, LLVMBuildLShr(b, w->lane, i32c(w, 4), ""), i32c(w, 8));
    w->nk_row = l8;
    w->nk_col = mul(w, mi, i32c(w, 8));
    w->kn_row = add(w, l8, mul(w, LLVMBuildAnd(b, mi, i32c(w, 1), ""), i32c(w, 8)));
    w->kn_col = mul(w, LLVMBuildLShr(b, mi, i32c(w, 1), ""), i32c(w, 8));
  } else {
    w->a_row = w->g;
    w->a_col = w->two_t;
    w->nk_row = w->g;
    w->nk_col = w->two_t;
    w->kn_row = w->two_t;
    w->kn_col = w->g;
  }
}

static LLVMValueRef tile_at(bwd *w, int64_t at, LLVMValueRef row, LLVMValueRef col) {
  return fgb_tc_tile_base(w->m, w->smem, i32c(w, at), row, col, w->pitch);
}

/* A fragments of the 16 rows at `base` (this lane's A base of the block)
 * for the 16 columns kk * 16.. */
static void frag_a(bwd *w, LLVMValueRef base, int kk, LLVMValueRef *out) {
  if (w->k->attn_ldmatrix) {
    fgb_tc_ldmatrix4(w->m, base, w->pitch, 0, kk * 16, false, out);
    return;
  }
  out[0] = fgb_tc_lds32(w->m, base, w->pitch, 0, kk * 16);
  out[1] = fgb_tc_lds32(w->m, base, w->pitch, 8, kk * 16);
  out[2] = fgb_tc_lds32(w->m, base, w->pitch, 0, kk * 16 + 8);
  out[3] = fgb_tc_lds32(w->m, base, w->pitch, 8, kk * 16 + 8);
}

/* B fragments of X^T for X [n][k] at `base` (this lane's nk base): n-tile
 * j (rows j * 8..), k-chunks kk and kk + 1: words (kk, b0) (kk, b1)
 * (kk+1, b0) (kk+1, b1). */
static void frag_b_nk(bwd *w, LLVMValueRef base, int j, int kk, LLVMValueRef *out) {
  if (w->k->attn_ldmatrix) {
    fgb_tc_ldmatrix4(w->m, base, w->pitch, j * 8, kk * 16, false, out);
    return;
  }
  for (int i = 0; i < 4; i++)
    out[i] = fgb_tc_lds32(w->m, base, w->pitch, j * 8, kk * 16 + i * 8);
}

/* B fragments of X [k][n] at `base` (this lane's kn base): k-chunk j (rows
 * j * 16..), n-tiles d and d + 1: words (d, b0) (d, b1) (d+1, b0) (d+1, b1). */
static void frag_b_kn(bwd *w, LLVMValueRef base, int j, int d, LLVMValueRef *out) {
  if (w->k->attn_ldmatrix) {
    fgb_tc_ldmatrix4(w->m, base, w->pitch, j * 16, d * 8, true, out);
    return;
  }
  for (int i = 0; i < 4; i++)
    out[i] = fgb_tc_lds16x2(w->m, base, w->pitch, j * 16 + (i & 1) * 8, (d + i / 2) * 8);
}

/* wgmma: acc[p] = A_p B_p^T for np products in one chain, adesc[p] the
 * descriptor of the warpgroup's rows of a [br] tile, bdesc[p] of a [bc]
 * one (both K-major). Without `wait` the chain is left in flight as one
 * wgmma group: its results may be read only after wg_wait (bwd_overlap). */
static void wg_abt(bwd *w, int np, LLVMValueRef *adesc, LLVMValueRef *bdesc, int nn,
                   LLVMValueRef (**acc)[4], bool wait) {
  LLVMValueRef d[2 * MAX_BC / 2];
  fgb_tc_wg_chain c = {.dt = w->dt,
                       .n = nn * 8,
                       .nk = (int)(w->D / 16),
                       .np = np,
                       .wait = wait,
                       .areg = "ad",
                       .breg = "bd"};
  if (!fgb_tc_wg_ss(w->m, &c, adesc, w->br, bdesc, w->bc, d)) {
    fgb_fail(w->e, "attention backward kernel %d: wgmma statement too long", w->k->id);
    return;
  }
  for (int p = 0; p < np; p++)
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++)
        acc[p][j][i] = d[p * nn * 4 + 4 * j + i];
}

/* wgmma: acc[p] (locals, D / 8 tiles of 16 x 8) += pa[p] B_p for np
 * products in one chain, pa[p] nn / 2 A blocks, bdesc[p] the MN-major
 * descriptor of a [bc] tile. Without `wait` the chain is left in flight
 * and its np D / 2 results go to out[] (for wg_wait, then wg_store_acc),
 * the locals untouched. */
static void wg_acc(bwd *w, int np, LLVMValueRef (**pa)[4], int nn, LLVMValueRef *bdesc,
                   LLVMValueRef (**acc)[4], bool wait, LLVMValueRef *out) {
  LLVMBuilderRef b = w->b;
  int nd = (int)(w->D / 8), nk = nn / 2;
  LLVMValueRef c[2 * MAX_D / 2], a[2 * MAX_BC / 16][4];
  for (int p = 0; p < np; p++) {
    for (int d = 0; d < nd; d++)
      for (int i = 0; i < 4; i++)
        c[p * nd * 4 + 4 * d + i] = LLVMBuildLoad2(b, w->m->f32, acc[p][d][i], "");
    for (int j = 0; j < nk; j++)
      for (int i = 0; i < 4; i++)
        a[p * nk + j][i] = pa[p][j][i];
  }
  fgb_tc_wg_chain ch = {
      .dt = w->dt, .n = (int)w->D, .nk = nk, .np = np, .wait = wait, .breg = "bd"};
  if (!fgb_tc_wg_rs(w->m, &ch, a, bdesc, c)) {
    fgb_fail(w->e, "attention backward kernel %d: wgmma statement too long", w->k->id);
    return;
  }
  if (!wait) {
    for (int i = 0; i < np * nd * 4; i++)
      out[i] = c[i];
    return;
  }
  for (int p = 0; p < np; p++)
    for (int d = 0; d < nd; d++)
      for (int i = 0; i < 4; i++)
        LLVMBuildStore(b, c[p * nd * 4 + 4 * d + i], acc[p][d][i]);
}

/* bwd_overlap: wgmma.wait_group `pending` for the n values at v (outputs
 * of chains in flight; complete after it). */
static void wg_wait(bwd *w, int pending, LLVMValueRef *v, int n) {
  if (!fgb_tc_wg_wait(w->m, pending, v, n))
    fgb_fail(w->e, "attention backward kernel %d: wgmma statement too long", w->k->id);
}

/* The same, for the nn 8-column tiles x[j][4] of an S-like result; with
 * a gate, after the instructions computing it: left alone, ptxas hoists
 * the wait above the work it is meant to overlap (fgb_tc_wg_wait_after;
 * slot: the order slot). */
static void wg_wait_tiles(bwd *w, int pending, LLVMValueRef x[][4], int nn, LLVMValueRef gate,
                          LLVMValueRef slot) {
  LLVMValueRef v[MAX_BC / 2];
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      v[4 * j + i] = x[j][i];
  if (gate ? !fgb_tc_wg_wait_after(w->m, pending, v, 4 * nn, gate, slot)
           : !fgb_tc_wg_wait(w->m, pending, v, 4 * nn))
    fgb_fail(w->e, "attention backward kernel %d: wgmma statement too long", w->k->id);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      x[j][i] = v[4 * j + i];
}

/* bwd pingpong (the plan's attn_pingpong, two warpgroups): named barrier 1
 * orders the groups' products an iteration: group 1 issues its S and dP
 * (point PP_BEFORE_S: it waits) once group 0 has issued its own (mode 1,
 * PP_AFTER_S) or its dV too (mode 2, dk and dv only, PP_AFTER_DV: group 0
 * arrives), so that one group's elementwise work runs while the other's
 * products do. */
enum { PP_BEFORE_S, PP_AFTER_S, PP_AFTER_DV };

static void wg_pingpong(bwd *w, int point) {
  int mode = w->pingpong;
  bool arrive = (mode == 1 && point == PP_AFTER_S) || (mode == 2 && point == PP_AFTER_DV);
  if (!mode || (point != PP_BEFORE_S && !arrive))
    return;
  bool before = point == PP_BEFORE_S;
  const char *text = before ? "{\n.reg .pred p;\nsetp.ne.u32 p, $0, 0;\n@p bar.sync 1, 256;\n}"
                            : "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 0;\n@p bar.arrive 1, 256;\n}";
  fgb_tc_asm_i32(w->m, text, LLVMBuildLShr(w->b, w->warp, i32c(w, 2), ""));
}

/* S = A_0 B_0^T and dP = A_1 B_1^T (ad, bd: descriptors as wg_abt's) into
 * s, dp: one chain, waited for; overlap: two wgmma groups (the pingpong
 * around their issue), S waited for and dP left in flight (the caller's
 * wg_wait_tiles). */
static void wg_scores(bwd *w, LLVMValueRef *ad, LLVMValueRef *bd, int nn, LLVMValueRef s[][4],
                      LLVMValueRef dp[][4]) {
  if (!w->overlap) {
    LLVMValueRef(*out[2])[4] = {s, dp};
    wg_abt(w, 2, ad, bd, nn, out, true);
    return;
  }
  LLVMValueRef(*out_s)[4] = s, (*out_dp)[4] = dp;
  wg_pingpong(w, PP_BEFORE_S);
  wg_abt(w, 1, &ad[0], &bd[0], nn, &out_s, false);
  wg_abt(w, 1, &ad[1], &bd[1], nn, &out_dp, false);
  wg_pingpong(w, PP_AFTER_S);
  wg_wait_tiles(w, 1, s, nn, NULL, NULL);
}

/* Stores the D / 2 values at v (a wg_acc left in flight, waited for)
 * into the locals acc. */
static void wg_store_acc(bwd *w, const LLVMValueRef *v, LLVMValueRef acc[][4]) {
  for (int d = 0; d < w->D / 8; d++)
    for (int i = 0; i < 4; i++)
      LLVMBuildStore(w->b, v[4 * d + i], acc[d][i]);
}

/* acc[0..nn) = A B^T for A the warp's 16 rows of the tile at a_at and B
 * the tile at b_at ([n][k], n-tiles 0..nn), over the head dim. */
static void gemm_abt(bwd *w, LLVMValueRef abase, LLVMValueRef bbase, int nn,
                     LLVMValueRef acc[][4]) {
  int nkq = (int)(w->D / 16);
  if (w->wg) { /* abase, bbase: descriptors (wg_abt) */
    wg_abt(w, 1, &abase, &bbase, nn, &acc, true);
    return;
  }
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      acc[j][i] = f32c(w, 0.0);
  for (int kk = 0; kk < nkq; kk += 2) {
    LLVMValueRef a0[4], a1[4];
    frag_a(w, abase, kk, a0);
    frag_a(w, abase, kk + 1, a1);
    for (int j = 0; j < nn; j++) {
      LLVMValueRef bw[4];
      frag_b_nk(w, bbase, j, kk, bw);
      fgb_tc_mma(w->m, w->dt, a0, bw[0], bw[1], acc[j]);
      fgb_tc_mma(w->m, w->dt, a1, bw[2], bw[3], acc[j]);
    }
  }
}

/* x's accumulators of nn 8-column tiles as A fragments of nn / 2 16-column
 * blocks (rounded to the dtype). */
static void pack_a(bwd *w, LLVMValueRef x[][4], int nn, LLVMValueRef pa[][4]) {
  for (int j = 0; j < nn / 2; j++) {
    pa[j][0] = fgb_tc_pack2(w->m, w->dt, x[2 * j][0], x[2 * j][1]);
    pa[j][1] = fgb_tc_pack2(w->m, w->dt, x[2 * j][2], x[2 * j][3]);
    pa[j][2] = fgb_tc_pack2(w->m, w->dt, x[2 * j + 1][0], x[2 * j + 1][1]);
    pa[j][3] = fgb_tc_pack2(w->m, w->dt, x[2 * j + 1][2], x[2 * j + 1][3]);
  }
}

/* acc (locals, D / 8 tiles of 16 x 8) += pa B for pa nn / 2 A blocks and B
 * the tile ([k][n]) at bbase. */
static void gemm_acc(bwd *w, LLVMValueRef pa[][4], int nn, LLVMValueRef bbase,
                     LLVMValueRef acc[][4]) {
  LLVMBuilderRef b = w->b;
  int nd = (int)(w->D / 8);
  if (w->wg) { /* bbase: a descriptor (wg_acc) */
    wg_acc(w, 1, &pa, nn, &bbase, &acc, true, NULL);
    return;
  }
  for (int d = 0; d < nd; d += 2) {
    LLVMValueRef c[2][4];
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 4; i++)
        c[h][i] = LLVMBuildLoad2(b, w->m->f32, acc[d + h][i], "");
    for (int j = 0; j < nn / 2; j++) {
      LLVMValueRef bw[4];
      frag_b_kn(w, bbase, j, d, bw);
      fgb_tc_mma(w->m, w->dt, pa[j], bw[0], bw[1], c[0]);
      fgb_tc_mma(w->m, w->dt, pa[j], bw[2], bw[3], c[1]);
    }
    for (int h = 0; h < 2; h++)
      for (int i = 0; i < 4; i++)
        LLVMBuildStore(b, c[h][i], acc[d + h][i]);
  }
}

/* s[j][i] = -inf where ok(row, col) fails, only when `need` (a branch
 * around the masks, phis after it). rows[2]: this thread's rows g, g + 8
 * of s; cols: the block's first column (col of s[j][i]: c0 + 8 j + 2 t +
 * (i & 1)). dkdv: rows are keys and columns queries, else the reverse. */
static void mask_block(bwd *w, LLVMValueRef need, LLVMValueRef *rows, LLVMValueRef c0, int nn,
                       bool dkdv, LLVMValueRef s[][4]) {
  LLVMBuilderRef b = w->b;
  fgb_module *m = w->m;
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
  LLVMValueRef fn = fgb_current_fn(m);
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(m->ctx, fn, "mask");
  LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(m->ctx, fn, "masked");
  LLVMBuildCondBr(b, need, then, merge);
  LLVMPositionBuilderAtEnd(b, then);
  LLVMValueRef masked[MAX_BC / 8][4];
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      LLVMValueRef col = add(w, c0, add(w, w->two_t, i32c(w, j * 8 + (i & 1))));
      LLVMValueRef row = rows[i / 2];
      LLVMValueRef query = dkdv ? col : row, key = dkdv ? row : col;
      LLVMValueRef ok =
          LLVMBuildICmp(b, LLVMIntSLT, dkdv ? query : key, i32c(w, dkdv ? w->Sq : w->Sk), "");
      if (w->causal)
        ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLE, key, query, ""), "");
      masked[j][i] = LLVMBuildSelect(b, ok, s[j][i], f32c(w, -INFINITY), "");
    }
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, merge);
  LLVMPositionBuilderAtEnd(b, merge);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      LLVMValueRef phi = LLVMBuildPhi(b, m->f32, "");
      LLVMValueRef vals[2] = {s[j][i], masked[j][i]};
      LLVMBasicBlockRef blocks[2] = {from, then_end};
      LLVMAddIncoming(phi, vals, blocks, 2);
      s[j][i] = phi;
    }
}

/* Stores acc (D / 8 tiles of 16 x 8, times `scale`) as rows row[0],
 * row[1] (rows < limit) of (batch bi, head hi) of the [B, H, S, D] result
 * `out`: dense in its own buffer, whose (bi, hi) starts at row `slice`,
 * or through the strided view zip-store gave it in a cat's buffer (its D
 * contiguous). Column pairs go as one 4-byte word in the aligned variant
 * where every pair starts at an even element. */
static bool store_rows(bwd *w, const fg_value *out, LLVMValueRef slice, LLVMValueRef bi,
                       LLVMValueRef hi, LLVMValueRef *row, int64_t limit, LLVMValueRef acc[][4],
                       LLVMValueRef scale) {
  fgb_emitter *e = w->e;
  fgb_module *m = w->m;
  LLVMBuilderRef b = w->b;
  const fg_storage *st = &e->p->store[out->id];
  LLVMValueRef optr = fgb_buffer_of(e, st->buf);
  if (!optr)
    return false;
  const fg_strided *s = st->view;
  bool pairs = e->aligned;
  LLVMValueRef vbase = NULL;
  if (s) {
    for (int d = 0; d < 3; d++)
      pairs = pairs && (s->sizes[d] == 1 || s->strides[d] % 2 == 0);
    pairs = pairs && s->offset % 2 == 0;
    vbase = fgb_const(e, s->offset);
    if (s->sizes[0] > 1)
      vbase = add(w, vbase, mul(w, bi, fgb_const(e, s->strides[0])));
    if (s->sizes[1] > 1)
      vbase = add(w, vbase, mul(w, hi, fgb_const(e, s->strides[1])));
  }
  int nd = (int)(w->D / 8);
  for (int r = 0; r < 2; r++) {
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, row[r], i32c(w, limit), ""));
    LLVMValueRef obase = s ? add(w, vbase, mul(w, to_ity(w, row[r]), fgb_const(e, s->strides[2])))
                           : mul(w, add(w, slice, to_ity(w, row[r])), fgb_const(e, w->D));
    for (int d = 0; d < nd; d++) {
      LLVMValueRef col = to_ity(w, add(w, w->two_t, i32c(w, d * 8)));
      LLVMValueRef x0 = LLVMBuildLoad2(b, m->f32, acc[d][2 * r], "");
      LLVMValueRef x1 = LLVMBuildLoad2(b, m->f32, acc[d][2 * r + 1], "");
      if (scale) {
        x0 = LLVMBuildFMul(b, x0, scale, "");
        x1 = LLVMBuildFMul(b, x1, scale, "");
      }
      LLVMValueRef at = fgb_gep_global(m, optr, m->i16, add(w, obase, col));
      if (pairs) { /* 16-byte aligned buffer, even offsets: one word */
        LLVMValueRef sw = LLVMBuildStore(b, fgb_tc_pack2(m, w->dt, x0, x1), at);
        LLVMSetAlignment(sw, 4);
      } else {
        fgb_store(m, at, w->dt, x0);
        fgb_store(m, fgb_gep_global(m, at, m->i16, fgb_const(e, 1)), w->dt, x1);
      }
    }
    fgb_end_if(e, merge);
  }
  return true;
}

static void zero_locals(bwd *w, LLVMValueRef acc[][4]) {
  for (int j = 0; j < w->D / 8; j++)
    for (int i = 0; i < 4; i++)
      acc[j][i] = fgk_local_var(w->e, w->m->f32, f32c(w, 0.0));
}

/* The element (row, col) past base in f32. */
static LLVMValueRef lds_elem(bwd *w, LLVMValueRef base, int64_t row, int64_t col) {
  LLVMValueRef p = fgb_gep(w->m, base, w->m->i8, i32c(w, (row * w->pitch + col) * 2));
  return fgb_load(w->m, p, w->dt, 0);
}

/* wgmma: element (rt, 8 d + 2 t + c) of the swizzled tile of `rows`
 * rows at byte `at` in f32, for rt % 8 = g (this lane's rows). */
static LLVMValueRef lds_sw(bwd *w, int64_t at, int rows, LLVMValueRef rt, int d, int c) {
  LLVMBuilderRef b = w->b;
  LLVMValueRef x = LLVMBuildXor(b, w->g, i32c(w, d % 8), "");
  LLVMValueRef off = add(w, add(w, mul(w, rt, i32c(w, 128)), mul(w, x, i32c(w, 16))),
                         mul(w, add(w, w->two_t, i32c(w, c)), i32c(w, 2)));
  off = add(w, off, i32c(w, at + (int64_t)(d / 8) * rows * 128));
  return fgb_load(w->m, fgb_tc_smem_at(w->m, w->smem, off), w->dt, 0);
}

/* wgmma: the descriptor of the tile at byte `at` from row `row` (i32, a
 * multiple of 8; NULL: 0); lbo 16 for a K-major operand, the tile's rows
 * x 128 for an MN-major one (the next 64 columns' atom). */
static LLVMValueRef tile_desc(bwd *w, int64_t at, LLVMValueRef row, int64_t lbo) {
  LLVMValueRef off = i32c(w, at);
  if (row)
    off = add(w, off, mul(w, row, i32c(w, 128)));
  return fgb_tc_wg_desc(w->m, add(w, w->saddr, off), lbo);
}

/* A fragment base (mma.sync: a shared pointer; wgmma: a descriptor)
 * moved to the stage at byte offset cur. */
static LLVMValueRef at_stage(bwd *w, LLVMValueRef base, LLVMValueRef cur) {
  return w->wg ? fgb_tc_wg_desc_add(w->m, base, cur) : fgb_gep(w->m, base, w->m->i8, cur);
}

/* wgmma: shared stores of this thread visible to wgmma (before a barrier
 * that publishes tiles) */
static void fence_tiles(bwd *w) {
  if (w->wg)
    fgb_tc_wg_fence_proxy(w->m);
}

/* ---- dq (and delta) ---- */

static bool emit_dq(bwd *w) {
  fgb_emitter *e = w->e;
  fgb_module *m = w->m;
  LLVMBuilderRef b = w->b;
  const fg_kernel *k = w->k;
  int br = w->br, bc = w->bc, nn = bc / 8, nd = (int)(w->D / 8);
  int64_t tile = (int64_t)w->pitch * 2; /* bytes a tile row */
  int64_t q_at = 0, do_at = br * tile, k_at = 2 * br * tile, v_at = k_at + bc * tile;
  int64_t o_at = k_at; /* O, for delta, before the key loop (2 bc >= br rows) */

  /* causal: the longest rows first (work_rank) */
  LLVMValueRef qb = work_rank(w);
  if (w->causal)
    qb = LLVMBuildSub(b, i32c(w, (w->Sq + br - 1) / br - 1), qb, "");
  LLVMValueRef q0 = mul(w, qb, i32c(w, br));
  LLVMValueRef bh = work_pair(w);
  LLVMValueRef bi = LLVMBuildUDiv(b, bh, fgb_const(e, w->Hq), "");
  LLVMValueRef hi = LLVMBuildURem(b, bh, fgb_const(e, w->Hq), "");
  LLVMValueRef hk = w->group > 1 ? LLVMBuildUDiv(b, hi, fgb_const(e, w->group), "") : hi;
  source_at(w, OP_Q, bi, hi);
  source_at(w, OP_DO, bi, hi);
  source_at(w, OP_O, bi, hi);
  source_at(w, OP_LSE, bi, hi);
  source_at(w, OP_K, bi, hk);
  source_at(w, OP_V, bi, hk);
  LLVMValueRef wrow = mul(w, w->warp, i32c(w, 16)); /* in the tile */
  LLVMValueRef wrow0 = add(w, q0, wrow);
  LLVMValueRef row[2];
  row[0] = add(w, wrow0, w->g);
  row[1] = add(w, row[0], i32c(w, 8));

  load_tile(w, OP_Q, q0, w->Sq, br, i32c(w, q_at), false);
  load_tile(w, OP_DO, q0, w->Sq, br, i32c(w, do_at), false);
  load_tile(w, OP_O, q0, w->Sq, br, i32c(w, o_at), false);
  fence_tiles(w);
  fgb_barrier(m);

  /* delta of rows g, g + 8: this lane's columns 8 d + 2 t, +1, then the
   * quad's sum (a fixed order), written by lane t = 0; lse in log2 units
   * (rows past Sq: 0, never stored) */
  LLVMValueRef delta[2], lse2[2];
  LLVMValueRef slice = mul(w, bh, fgb_const(e, w->Sq)); /* (b, h)'s first row */
  LLVMValueRef tzero = LLVMBuildICmp(b, LLVMIntEQ, w->t, i32c(w, 0), "");
  for (int r = 0; r < 2; r++) {
    LLVMValueRef rt = add(w, add(w, wrow, w->g), i32c(w, 8 * r));
    LLVMValueRef dob = tile_at(w, do_at, rt, w->two_t), ob = tile_at(w, o_at, rt, w->two_t);
    LLVMValueRef sum = f32c(w, 0.0);
    for (int d = 0; d < nd; d++)
      for (int c = 0; c < 2; c++) {
        /* O's element loaded first: the mma.sync kernel's PTX as before */
        LLVMValueRef y = w->wg ? lds_sw(w, o_at, br, rt, d, c) : lds_elem(w, ob, 0, d * 8 + c);
        LLVMValueRef x = w->wg ? lds_sw(w, do_at, br, rt, d, c) : lds_elem(w, dob, 0, d * 8 + c);
        sum = LLVMBuildFAdd(b, sum, LLVMBuildFMul(b, x, y, ""), "");
      }
    sum = LLVMBuildFAdd(b, sum, fgb_shfl_bfly(m, sum, 1), "");
    sum = LLVMBuildFAdd(b, sum, fgb_shfl_bfly(m, sum, 2), "");
    delta[r] = sum;
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, row[r], i32c(w, w->Sq), "");
    LLVMValueRef safe = LLVMBuildSelect(b, in, row[r], i32c(w, 0), "");
    LLVMValueRef l = load_lse(w, safe);
    lse2[r] = LLVMBuildSelect(b, in, LLVMBuildFMul(b, l, f32c(w, 1.4426950408889634), ""),
                              f32c(w, 0.0), "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildAnd(b, in, tzero, ""));
    LLVMValueRef at = fgb_gep_global(m, w->delta, m->f32, add(w, slice, to_ity(w, row[r])));
    fgb_store(m, at, FG_F32, sum);
    fgb_end_if(e, merge);
  }

  LLVMValueRef acc[MAX_D / 8][4];
  zero_locals(w, acc);
  LLVMValueRef qbase, dobase, kbase_nk, vbase_nk, kbase_kn;
  if (w->wg) { /* the warpgroup's Q and dO rows, K and V K-major, K MN-major */
    LLVMValueRef wgrow = mul(w, LLVMBuildAnd(b, w->warp, i32c(w, ~3), ""), i32c(w, 16));
    qbase = tile_desc(w, q_at, wgrow, 16);
    dobase = tile_desc(w, do_at, wgrow, 16);
    kbase_nk = tile_desc(w, k_at, NULL, 16);
    vbase_nk = tile_desc(w, v_at, NULL, 16);
    kbase_kn = tile_desc(w, k_at, NULL, (int64_t)bc * 128);
  } else {
    qbase = tile_at(w, q_at, add(w, wrow, w->a_row), w->a_col);
    dobase = tile_at(w, do_at, add(w, wrow, w->a_row), w->a_col);
    kbase_nk = tile_at(w, k_at, w->nk_row, w->nk_col);
    vbase_nk = tile_at(w, v_at, w->nk_row, w->nk_col);
    kbase_kn = tile_at(w, k_at, w->kn_row, w->kn_col);
  }

  /* key blocks: all, or under the causal mask those up to the CTA's last row */
  LLVMValueRef kend = i32c(w, w->Sk);
  if (w->causal)
    kend = fgk_imin(e, add(w, q0, i32c(w, br)), kend);
  LLVMValueRef nkb = LLVMBuildUDiv(b, add(w, kend, i32c(w, bc - 1)), i32c(w, bc), "");
  int stages = k->attn_stages;
  bool async = e->aligned && e->vec == 8 && stages == 2;
  int64_t stage_bytes = 2 * bc * tile; /* K and V */
  if (w->overlap)                      /* past the stages (schedule_attention_bwd's 16 bytes) */
    w->order_slot = add(w, w->saddr, i32c(w, k_at + stages * stage_bytes));
  if (stages == 2) { /* the first block, once every warp is done with O */
    fgb_barrier(m);
    load_tile(w, OP_K, i32c(w, 0), w->Sk, bc, i32c(w, k_at), async);
    load_tile(w, OP_V, i32c(w, 0), w->Sk, bc, i32c(w, v_at), async);
    if (async)
      fgb_cp_async_commit(m);
  }
  fgk_loop loop;
  LLVMValueRef kb = fgk_loop_begin(e, &loop, i32c(w, 0), nkb, i32c(w, 1));
  LLVMValueRef k0 = mul(w, kb, i32c(w, bc));
  LLVMValueRef cur = i32c(w, 0); /* this block's stage offset */
  if (stages == 1) {
    fgb_barrier(m); /* every warp is done with the previous tiles (and O) */
    load_tile(w, OP_K, k0, w->Sk, bc, i32c(w, k_at), false);
    load_tile(w, OP_V, k0, w->Sk, bc, i32c(w, v_at), false);
    fence_tiles(w);
    fgb_barrier(m);
  } else {
    /* the next block into the other stage (freed by the barrier that ended
     * the previous iteration), then wait for this one's */
    LLVMValueRef par = LLVMBuildAnd(b, kb, i32c(w, 1), "");
    cur = mul(w, par, i32c(w, stage_bytes));
    LLVMValueRef nxt = mul(w, LLVMBuildXor(b, par, i32c(w, 1), ""), i32c(w, stage_bytes));
    LLVMBasicBlockRef merge =
        fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, add(w, kb, i32c(w, 1)), nkb, ""));
    LLVMValueRef k1 = add(w, k0, i32c(w, bc));
    load_tile(w, OP_K, k1, w->Sk, bc, add(w, nxt, i32c(w, k_at)), async);
    load_tile(w, OP_V, k1, w->Sk, bc, add(w, nxt, i32c(w, v_at)), async);
    fgb_end_if(e, merge);
    if (async) {
      fgb_cp_async_commit(m); /* empty after the last block: still one group */
      fgb_cp_async_wait(m, 1);
    }
    fence_tiles(w);
    fgb_barrier(m);
  }
  kbase_nk = at_stage(w, kbase_nk, cur);
  vbase_nk = at_stage(w, vbase_nk, cur);
  kbase_kn = at_stage(w, kbase_kn, cur);
  LLVMValueRef s[MAX_BC / 8][4], dp[MAX_BC / 8][4];
  if (w->wg) { /* S and dP (overlap: dP left in flight) */
    LLVMValueRef ad[2] = {qbase, dobase}, bd[2] = {kbase_nk, vbase_nk};
    wg_scores(w, ad, bd, nn, s, dp);
  } else
    gemm_abt(w, qbase, kbase_nk, nn, s);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = LLVMBuildFMul(b, s[j][i], w->scale2, "");
  LLVMValueRef kend_b = add(w, k0, i32c(w, bc));
  LLVMValueRef need = LLVMBuildICmp(b, LLVMIntSGT, kend_b, i32c(w, w->Sk), "");
  if (w->causal) /* the block's last key past the warp's first row */
    need = LLVMBuildOr(
        b, need, LLVMBuildICmp(b, LLVMIntSGT, LLVMBuildSub(b, kend_b, i32c(w, 1), ""), wrow0, ""),
        "");
  mask_block(w, need, row, k0, nn, false, s);
  if (!w->wg)
    gemm_abt(w, dobase, vbase_nk, nn, dp);
  /* P = 2^(S - lse), dS = P (dP - delta); overlap: every P first, then
   * the wait for dP, which ran beside them */
  LLVMValueRef p[MAX_BC / 8][4] = {{NULL}};
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++) {
      p[j][i] = fgb_tc_ex2(m, LLVMBuildFSub(b, s[j][i], lse2[i / 2], ""));
      if (!w->overlap)
        s[j][i] = LLVMBuildFMul(b, p[j][i], LLVMBuildFSub(b, dp[j][i], delta[i / 2], ""), "");
    }
  if (w->overlap) {
    wg_wait_tiles(w, 0, dp, nn, p[nn - 1][3], w->order_slot);
    for (int j = 0; j < nn; j++)
      for (int i = 0; i < 4; i++)
        s[j][i] = LLVMBuildFMul(b, p[j][i], LLVMBuildFSub(b, dp[j][i], delta[i / 2], ""), "");
  }
  LLVMValueRef pa[MAX_BC / 16][4];
  pack_a(w, s, nn, pa);
  gemm_acc(w, pa, nn, kbase_kn, acc);
  if (stages == 2)
    fgb_barrier(m); /* every warp is done with this stage before it is refilled */
  fgk_loop_end(e, &loop, kb);
  return store_rows(w, e->k->outs[0], slice, bi, hi, row, w->Sq, acc, f32c(w, (float)w->scale));
}

/* ---- dk and dv ---- */

/* Shared memory of the dk, dv kernel: K, V [br], then per stage Q, dO
 * [bc] and the block's lse (log2 units) and delta [bc] (f32). */
static int64_t dkdv_q_at(const bwd *w) { return 2 * (int64_t)w->br * w->pitch * 2; }

/* Loads pair `it` (query head hk group + it / nqe, query block qb0 + it %
 * nqe) into the stage at byte offset `stage`: Q and dO tiles (async:
 * cp.async, committed by the caller), and by threads 0..bc-1 the block's
 * lse x log2 e and delta (0 past Sq) with plain loads and stores. */
static void dkdv_issue(bwd *w, LLVMValueRef bi, LLVMValueRef hk, LLVMValueRef it, LLVMValueRef qb0,
                       LLVMValueRef nqe, LLVMValueRef stage, bool async) {
  fgb_emitter *e = w->e;
  fgb_module *m = w->m;
  LLVMBuilderRef b = w->b;
  int bc = w->bc;
  int64_t tile = (int64_t)w->pitch * 2, q_at = dkdv_q_at(w), do_at = q_at + bc * tile;
  int64_t lse_at = do_at + bc * tile, delta_at = lse_at + bc * 4;
  LLVMValueRef gi = LLVMBuildUDiv(b, it, nqe, "");
  LLVMValueRef q0 = mul(w, add(w, qb0, LLVMBuildURem(b, it, nqe, "")), i32c(w, bc));
  LLVMValueRef hq = add(w, mul(w, hk, fgb_const(e, w->group)), to_ity(w, gi));
  source_at(w, OP_Q, bi, hq);
  source_at(w, OP_DO, bi, hq);
  source_at(w, OP_LSE, bi, hq);
  load_tile(w, OP_Q, q0, w->Sq, bc, add(w, stage, i32c(w, q_at)), async);
  load_tile(w, OP_DO, q0, w->Sq, bc, add(w, stage, i32c(w, do_at)), async);
  LLVMValueRef slice = mul(w, add(w, mul(w, bi, fgb_const(e, w->Hq)), hq), fgb_const(e, w->Sq));
  LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntULT, w->tid, i32c(w, bc), ""));
  LLVMValueRef q = add(w, q0, w->tid);
  LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, q, i32c(w, w->Sq), "");
  LLVMValueRef safe = LLVMBuildSelect(b, in, q, i32c(w, 0), "");
  LLVMValueRef l = LLVMBuildFMul(b, load_lse(w, safe), f32c(w, 1.4426950408889634), "");
  LLVMValueRef dl =
      fgb_load(m, fgb_gep_global(m, w->delta, m->f32, add(w, slice, to_ity(w, safe))), FG_F32, 0);
  LLVMValueRef sl = add(w, stage, mul(w, w->tid, i32c(w, 4)));
  fgb_store(m, fgb_tc_smem_at(m, w->smem, add(w, i32c(w, lse_at), sl)), FG_F32,
            LLVMBuildSelect(b, in, l, f32c(w, 0.0), ""));
  fgb_store(m, fgb_tc_smem_at(m, w->smem, add(w, i32c(w, delta_at), sl)), FG_F32,
            LLVMBuildSelect(b, in, dl, f32c(w, 0.0), ""));
  fgb_end_if(e, merge);
}

/* The dk, dv CTA's key block k0, (batch, key head) pair bh = (bi, hk),
 * its rows' keys and, where qb0 is given, the query blocks it sees (qb0
 * the first, nqe of them a head) read again (work_again): at the top of
 * every iteration of the query loop and for the stores after it. */
static void dkdv_again(bwd *w, LLVMValueRef *k0, LLVMValueRef *bh, LLVMValueRef *bi,
                       LLVMValueRef *hk, LLVMValueRef *key, LLVMValueRef *qb0, LLVMValueRef *nqe) {
  LLVMBuilderRef b = w->b;
  *k0 = mul(w, work_rank_at(w, true), i32c(w, w->br));
  *bh = work_pair(w);
  *bi = LLVMBuildUDiv(b, *bh, fgb_const(w->e, w->Hk), "");
  *hk = LLVMBuildURem(b, *bh, fgb_const(w->e, w->Hk), "");
  key[0] = add(w, add(w, *k0, mul(w, w->warp, i32c(w, 16))), w->g);
  key[1] = add(w, key[0], i32c(w, 8));
  if (!qb0)
    return;
  int64_t nqb = (w->Sq + w->bc - 1) / w->bc;
  *qb0 = w->causal ? LLVMBuildUDiv(b, *k0, i32c(w, w->bc), "") : i32c(w, 0);
  LLVMValueRef n = LLVMBuildSub(b, i32c(w, nqb), *qb0, "");
  *nqe = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, n, i32c(w, 0), ""), n, i32c(w, 0), "");
}

static bool emit_dkdv(bwd *w) {
  fgb_emitter *e = w->e;
  fgb_module *m = w->m;
  LLVMBuilderRef b = w->b;
  const fg_kernel *k = w->k;
  int br = w->br, bc = w->bc, nn = bc / 8;
  int64_t tile = (int64_t)w->pitch * 2;
  int64_t k_at = 0, v_at = br * tile, q_at = dkdv_q_at(w), do_at = q_at + bc * tile;
  int64_t lse_at = do_at + bc * tile, delta_at = lse_at + bc * 4;

  /* causal: the first key blocks (the most query blocks) first (work_rank) */
  LLVMValueRef k0 = mul(w, work_rank(w), i32c(w, br));
  LLVMValueRef bh = work_pair(w); /* (batch, key head) */
  LLVMValueRef bi = LLVMBuildUDiv(b, bh, fgb_const(e, w->Hk), "");
  LLVMValueRef hk = LLVMBuildURem(b, bh, fgb_const(e, w->Hk), "");
  source_at(w, OP_K, bi, hk);
  source_at(w, OP_V, bi, hk);
  LLVMValueRef wrow = mul(w, w->warp, i32c(w, 16));
  LLVMValueRef wkey0 = add(w, k0, wrow);
  LLVMValueRef key[2];
  key[0] = add(w, wkey0, w->g);
  key[1] = add(w, key[0], i32c(w, 8));
  load_tile(w, OP_K, k0, w->Sk, br, i32c(w, k_at), false);
  load_tile(w, OP_V, k0, w->Sk, br, i32c(w, v_at), false);

  LLVMValueRef dk[MAX_D / 8][4], dv[MAX_D / 8][4];
  zero_locals(w, dk);
  zero_locals(w, dv);
  LLVMValueRef kbase, vbase, qbase_nk, qbase_kn, dobase_nk, dobase_kn;
  if (w->wg) { /* the warpgroup's K and V rows; Q and dO K-major and MN-major */
    LLVMValueRef wgrow = mul(w, LLVMBuildAnd(b, w->warp, i32c(w, ~3), ""), i32c(w, 16));
    kbase = tile_desc(w, k_at, wgrow, 16);
    vbase = tile_desc(w, v_at, wgrow, 16);
    qbase_nk = tile_desc(w, q_at, NULL, 16);
    qbase_kn = tile_desc(w, q_at, NULL, (int64_t)bc * 128);
    dobase_nk = tile_desc(w, do_at, NULL, 16);
    dobase_kn = tile_desc(w, do_at, NULL, (int64_t)bc * 128);
  } else {
    kbase = tile_at(w, k_at, add(w, wrow, w->a_row), w->a_col);
    vbase = tile_at(w, v_at, add(w, wrow, w->a_row), w->a_col);
    qbase_nk = tile_at(w, q_at, w->nk_row, w->nk_col);
    qbase_kn = tile_at(w, q_at, w->kn_row, w->kn_col);
    dobase_nk = tile_at(w, do_at, w->nk_row, w->nk_col);
    dobase_kn = tile_at(w, do_at, w->kn_row, w->kn_col);
  }
  /* this lane's lse and delta pairs: columns 2 t, 2 t + 1 of each n-tile */
  LLVMValueRef lse_lane =
      fgb_tc_smem_at(m, w->smem, add(w, i32c(w, lse_at), mul(w, w->two_t, i32c(w, 4))));
  LLVMValueRef delta_lane =
      fgb_tc_smem_at(m, w->smem, add(w, i32c(w, delta_at), mul(w, w->two_t, i32c(w, 4))));
  LLVMTypeRef v2 = LLVMVectorType(m->f32, 2);

  /* The (query head, query block) pairs, flattened: for each head of the
   * group in order, the query blocks that see some key of the CTA (causal:
   * from the one holding query k0); nqe of them a head, it = 0..group nqe. */
  int64_t nqb = (w->Sq + bc - 1) / bc;
  LLVMValueRef qb0 = w->causal ? LLVMBuildUDiv(b, k0, i32c(w, bc), "") : i32c(w, 0);
  LLVMValueRef nqe = LLVMBuildSub(b, i32c(w, nqb), qb0, "");
  nqe = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, nqe, i32c(w, 0), ""), nqe, i32c(w, 0), "");
  LLVMValueRef total = mul(w, nqe, i32c(w, w->group));
  int stages = k->attn_stages;
  bool async = e->aligned && e->vec == 8 && stages == 2;
  /* Q, dO, lse, delta (wgmma: lse and delta in 1 KiB, tiles 1024-byte aligned) */
  int64_t stage_bytes = 2 * bc * tile + (w->wg ? 1024 : 8 * bc);
  if (stages == 2) { /* the first pair */
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSGT, total, i32c(w, 0), ""));
    dkdv_issue(w, bi, hk, i32c(w, 0), qb0, nqe, i32c(w, 0), async);
    fgb_end_if(e, merge);
    if (async)
      fgb_cp_async_commit(m);
  }
  fgk_loop loop;
  LLVMValueRef it = fgk_loop_begin(e, &loop, i32c(w, 0), total, i32c(w, 1));
  if (work_again(w)) {
    dkdv_again(w, &k0, &bh, &bi, &hk, key, &qb0, &nqe);
    wkey0 = add(w, k0, wrow);
  }
  LLVMValueRef q0 = mul(w, add(w, qb0, LLVMBuildURem(b, it, nqe, "")), i32c(w, bc));
  LLVMValueRef cur = i32c(w, 0); /* this pair's stage offset */
  if (stages == 1) {
    fgb_barrier(m); /* every warp is done with the previous block's tiles */
    dkdv_issue(w, bi, hk, it, qb0, nqe, cur, false);
    fence_tiles(w);
    fgb_barrier(m);
  } else {
    /* the next pair into the other stage (freed by the barrier that ended
     * the previous iteration), then wait for this one's */
    LLVMValueRef par = LLVMBuildAnd(b, it, i32c(w, 1), "");
    cur = mul(w, par, i32c(w, stage_bytes));
    LLVMValueRef nxt = mul(w, LLVMBuildXor(b, par, i32c(w, 1), ""), i32c(w, stage_bytes));
    LLVMValueRef it1 = add(w, it, i32c(w, 1));
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(b, LLVMIntSLT, it1, total, ""));
    dkdv_issue(w, bi, hk, it1, qb0, nqe, nxt, async);
    fgb_end_if(e, merge);
    if (async) {
      fgb_cp_async_commit(m); /* empty after the last pair: still one group */
      fgb_cp_async_wait(m, 1);
    }
    fence_tiles(w);
    fgb_barrier(m);
  }
  LLVMValueRef qb_nk = at_stage(w, qbase_nk, cur), qb_kn = at_stage(w, qbase_kn, cur);
  LLVMValueRef dob_nk = at_stage(w, dobase_nk, cur);
  LLVMValueRef dob_kn = at_stage(w, dobase_kn, cur);
  LLVMValueRef lse_cur = fgb_gep(m, lse_lane, m->i8, cur);
  LLVMValueRef delta_cur = fgb_gep(m, delta_lane, m->i8, cur);
  /* S^T = K Q^T, masked: queries past Sq; causal, key > query */
  LLVMValueRef s[MAX_BC / 8][4], dp[MAX_BC / 8][4];
  if (w->wg) { /* S^T and dP^T (overlap: dP^T left in flight) */
    LLVMValueRef ad[2] = {kbase, vbase}, bd[2] = {qb_nk, dob_nk};
    wg_scores(w, ad, bd, nn, s, dp);
  } else
    gemm_abt(w, kbase, qb_nk, nn, s);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = LLVMBuildFMul(b, s[j][i], w->scale2, "");
  LLVMValueRef need = LLVMBuildICmp(b, LLVMIntSGT, add(w, q0, i32c(w, bc)), i32c(w, w->Sq), "");
  if (w->causal) /* the warp's last key past the block's first query */
    need =
        LLVMBuildOr(b, need, LLVMBuildICmp(b, LLVMIntSGT, add(w, wkey0, i32c(w, 15)), q0, ""), "");
  mask_block(w, need, key, q0, nn, true, s);
  LLVMValueRef lse[MAX_BC / 8][2], dl[MAX_BC / 8][2];
  for (int j = 0; j < nn; j++) {
    LLVMValueRef p = fgb_gep(m, lse_cur, m->i8, i32c(w, j * 8 * 4));
    LLVMValueRef x = LLVMBuildLoad2(b, v2, p, "");
    LLVMSetAlignment(x, 8);
    LLVMValueRef pd = fgb_gep(m, delta_cur, m->i8, i32c(w, j * 8 * 4));
    LLVMValueRef y = LLVMBuildLoad2(b, v2, pd, "");
    LLVMSetAlignment(y, 8);
    for (int c = 0; c < 2; c++) {
      lse[j][c] = LLVMBuildExtractElement(b, x, i32c(w, c), "");
      dl[j][c] = LLVMBuildExtractElement(b, y, i32c(w, c), "");
    }
  }
  /* P^T = 2^(S^T - lse); dV += P^T dO */
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = fgb_tc_ex2(m, LLVMBuildFSub(b, s[j][i], lse[j][i & 1], ""));
  LLVMValueRef pa[MAX_BC / 16][4];
  pack_a(w, s, nn, pa);
  LLVMValueRef dvk[2 * MAX_D / 2]; /* bwd_overlap: dV's, then dK's results in flight */
  if (w->overlap) {                /* dV's chain in flight while dS^T is computed */
    LLVMValueRef(*a)[4] = pa, (*acc)[4] = dv;
    wg_acc(w, 1, &a, nn, &dob_kn, &acc, false, dvk);
    wg_pingpong(w, PP_AFTER_DV);
    wg_wait_tiles(w, 1, dp, nn, NULL, NULL);
  }
  if (!w->wg)
    gemm_acc(w, pa, nn, dob_kn, dv);
  /* dP^T = V dO^T; dS^T = P^T (dP^T - delta); dK += dS^T Q */
  if (!w->wg)
    gemm_abt(w, vbase, dob_nk, nn, dp);
  for (int j = 0; j < nn; j++)
    for (int i = 0; i < 4; i++)
      s[j][i] = LLVMBuildFMul(b, s[j][i], LLVMBuildFSub(b, dp[j][i], dl[j][i & 1], ""), "");
  if (w->overlap) { /* dK's chain, then both waited for */
    LLVMValueRef pb[MAX_BC / 16][4];
    pack_a(w, s, nn, pb);
    LLVMValueRef(*a)[4] = pb, (*acc)[4] = dk;
    int nv = (int)(w->D / 2);
    wg_acc(w, 1, &a, nn, &qb_kn, &acc, false, dvk + nv);
    wg_wait(w, 0, dvk, 2 * nv);
    wg_store_acc(w, dvk, dv);
    wg_store_acc(w, dvk + nv, dk);
  } else if (w->wg) { /* dV += P^T dO and dK += dS^T Q in one chain */
    LLVMValueRef pb[MAX_BC / 16][4];
    pack_a(w, s, nn, pb);
    LLVMValueRef(*a[2])[4] = {pa, pb}, (*acc[2])[4] = {dv, dk}, bd[2] = {dob_kn, qb_kn};
    wg_acc(w, 2, a, nn, bd, acc, true, NULL);
  } else {
    pack_a(w, s, nn, pa);
    gemm_acc(w, pa, nn, qb_kn, dk);
  }
  if (stages == 2)
    fgb_barrier(m); /* every warp is done with this stage before it is refilled */
  fgk_loop_end(e, &loop, it);

  if (work_again(w))
    dkdv_again(w, &k0, &bh, &bi, &hk, key, NULL, NULL);
  LLVMValueRef kslice = mul(w, bh, fgb_const(e, w->Sk));
  const fg_node *n = k->attn;
  return store_rows(w, n->out[1], kslice, bi, hk, key, w->Sk, dk, f32c(w, (float)w->scale)) &&
         store_rows(w, n->out[2], kslice, bi, hk, key, w->Sk, dv, NULL);
}

bool fgb_emit_attention_bwd_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  const fg_node *n = k->attn;
  bwd W = {.e = e, .m = e->m, .b = e->b, .k = k};
  bwd *w = &W;
  fgb_module *m = e->m;
  LLVMBuilderRef b = e->b;
  const fg_type *qt = &n->in[OP_Q]->type, *kt = &n->in[OP_K]->type;
  w->dt = qt->dtype;
  w->causal = fg_attr_bool(n, "causal");
  w->Hq = qt->dims[1].size;
  w->Sq = qt->dims[2].size;
  w->D = qt->dims[3].size;
  w->Hk = kt->dims[1].size;
  w->Sk = kt->dims[2].size;
  w->group = w->Hq / w->Hk;
  w->br = k->attn_br;
  w->bc = k->attn_bc;
  w->pitch = k->attn_pitch;
  if (w->D > MAX_D || w->D % 32 || w->bc > MAX_BC || w->bc % 16 || w->br != 16 * k->attn_warps ||
      (w->br * w->D / 8) % k->block || (w->bc * w->D / 8) % k->block || w->pitch % 8 ||
      w->bc > k->block || (k->attn_part == FG_ATTN_DQ && 2 * w->bc < w->br)) {
    fgb_fail(e, "attention backward kernel %d: unsupported tiles (D %lld, br %d, bc %d, block %d)",
             k->id, (long long)w->D, w->br, w->bc, k->block);
    return false;
  }
  w->wg = k->attn_wgmma;
  w->overlap = w->wg && k->attn_overlap;
  w->pingpong = w->overlap && k->attn_warps == 8 ? k->attn_pingpong : 0;
  if (w->wg && ((w->D != 64 && w->D != 128) || k->attn_warps % 4 || w->pitch != w->D ||
                (w->dt != FG_BF16 && w->dt != FG_F16))) {
    fgb_fail(e, "attention backward kernel %d: unsupported wgmma tiles (D %lld, br %d, bc %d)",
             k->id, (long long)w->D, w->br, w->bc);
    return false;
  }
  const fg_attr *sa = fg_node_attr(n, "scale");
  double scale =
      sa ? (sa->kind == FG_ATTR_FLOAT ? sa->f : (double)sa->i) : 1.0 / sqrt((double)w->D);
  w->scale = scale;
  w->scale2 = f32c(w, (double)(float)(scale * 1.4426950408889634));
  for (int i = 0; i < NOPS; i++)
    if (!source_init(w, i))
      return false;
  w->delta = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, k->attn_delta_temp});
  if (!w->delta)
    return false;
  char name[256];
  snprintf(name, sizeof name, "fg_attn_bwd_%s", LLVMGetValueName(e->fn));
  w->smem = fgb_dynamic_shared(m, name);
  if (w->wg) { /* the tiles from the first multiple of 1024 bytes (the swizzle's atoms) */
    LLVMValueRef addr = LLVMBuildTrunc(b, LLVMBuildPtrToInt(b, w->smem, m->i64, ""), m->i32, "");
    LLVMValueRef pad = LLVMBuildAnd(b, LLVMBuildNeg(b, addr, ""), i32c(w, 1023), "");
    w->smem = fgb_tc_smem_at(m, w->smem, pad);
    w->saddr = add(w, addr, pad);
  }
  w->tid = fgb_tid(m, 0);
  w->warp = LLVMBuildLShr(b, w->tid, i32c(w, 5), "");
  w->lane = LLVMBuildAnd(b, w->tid, i32c(w, 31), "");
  w->g = LLVMBuildLShr(b, w->lane, i32c(w, 2), "");
  w->t = LLVMBuildAnd(b, w->lane, i32c(w, 3), "");
  w->two_t = mul(w, w->t, i32c(w, 2));
  lane_bases(w);
  bool ok = k->attn_part == FG_ATTN_DQ ? emit_dq(w) : emit_dkdv(w);
  return ok && !e->failed;
}
