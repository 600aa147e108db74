/* The pointwise kernel: a thread per vector of adjacent output elements,
 * chunks of them block-strided (schedule_pointwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

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

/* A kernel that writes a parameter in place (opt/inplace.c) computes every
 * output of a chunk before it stores any: every load of the chunk's
 * elements comes before the stores that overwrite them. */
static bool pw_outputs_inplace(fgb_emitter *e, const pw_chunk *ch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  LLVMValueRef *vals = malloc(sizeof *vals * 16 * (size_t)(k->nouts > 0 ? k->nouts : 1));
  if (!vals)
    return false;
  LLVMValueRef idx[FG_MAX_RANK];
  bool ok = true;
  for (int i = 0; i < k->nouts && ok; i++) {
    memcpy(idx, ch->c, sizeof(LLVMValueRef) * (size_t)k->rank);
    for (int j = 0; j < e->vec && ok; j++) {
      if (k->rank)
        idx[last] = ch->lanes[j];
      ok = (vals[16 * i + j] = fgb_emit_value(e, k->outs[i], idx)) != NULL;
    }
  }
  for (int i = 0; i < k->nouts && ok; i++) {
    memcpy(idx, ch->c, sizeof(LLVMValueRef) * (size_t)k->rank);
    if (k->rank)
      idx[last] = ch->lanes[0];
    fgb_emit_store_lanes(e, k->outs[i], idx, &vals[16 * i]);
  }
  free(vals);
  return ok && !e->failed;
}

/* Emits (or, prefetching, loads for) every output of one chunk. */
static bool pw_outputs(fgb_emitter *e, const pw_chunk *ch, bool prefetch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  if (k->inplace && !prefetch)
    return pw_outputs_inplace(e, ch);
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

/* Every chunk in range: all loads of all chunks first, so a thread has U
 * vector loads in flight before it computes. */
static bool pw_unguarded(fgb_emitter *e, const LLVMValueRef *bases, int U, pw_chunk *ch) {
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

/* Each chunk under its own bound check. */
static bool pw_guarded(fgb_emitter *e, const LLVMValueRef *bases, int U, pw_chunk *ch,
                       LLVMValueRef nv) {
  for (int u = 0; u < U; u++) {
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, bases[u], nv, ""));
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

bool fgb_emit_pointwise_kernel(fgb_emitter *e) {
  const fg_kernel *k = e->k;
  int64_t n = 1;
  for (int i = 0; i < k->rank; i++)
    n *= k->dims[i];
  int U = k->chunks > 0 ? k->chunks : 1;
  if (U > 8)
    U = 8;
  /* Chunk u of CTA b covers vectors (b*U + u)*T + tid: block-strided, so
   * each chunk is one coalesced sweep of the CTA. In descending order
   * (k->reverse) b counts from the last CTA, whose chunks hold the tail. */
  /* Over the symbolic size, n = T x rest with T a multiple of its divisor:
   * every chunk is in range when div x rest is a multiple of a CTA's span. */
  const fg_sym_lowering *sym = &e->p->sym;
  int64_t span = (int64_t)k->block * U * e->vec;
  bool exact = sym->affine               ? fg_sym_multiple(sym, n, span)
               : fg_sym_involves(sym, n) ? (n / sym->placeholder * sym->div) % span == 0
                                         : n % span == 0;
  LLVMValueRef nv = fgb_extent(e, n); /* the bound: T x the rest over a symbolic size */
  LLVMValueRef cta = LLVMBuildMul(e->b, fgb_work_block(e), fgb_const(e, (int64_t)k->block * U), "");
  LLVMValueRef tid = fgb_thread_index(e, 0);
  pw_chunk ch[8];
  LLVMValueRef bases[8];
  for (int u = 0; u < U; u++) {
    LLVMValueRef gid = LLVMBuildAdd(
        e->b, LLVMBuildAdd(e->b, cta, fgb_const(e, (int64_t)u * k->block), ""), tid, "");
    bases[u] = e->vec > 1 ? LLVMBuildMul(e->b, gid, fgb_const(e, e->vec), "") : gid;
  }
  if (exact && (e->aligned || e->vec == 1))
    return pw_unguarded(e, bases, U, ch);
  if (U > 1 && (e->aligned || e->vec == 1)) {
    /* Not every CTA is whole, but all except the last are: those take the
     * unguarded form (its loads all in flight), the last the guarded one
     * below (a symbolic size without a divisor: docs/benchmarks.md, runs
     * W1 and W2, bias-GELU). */
    LLVMValueRef end =
        LLVMBuildMul(e->b, LLVMBuildAdd(e->b, cta, fgb_const(e, (int64_t)k->block * U), ""),
                     fgb_const(e, e->vec), "");
    LLVMValueRef whole = LLVMBuildICmp(e->b, LLVMIntSLE, end, nv, "");
    LLVMBasicBlockRef merge = fgb_begin_if(e, whole);
    int mark = fgb_memo_mark(e);
    if (!pw_unguarded(e, bases, U, ch))
      return false;
    fgb_memo_release(e, mark);
    fgb_end_if(e, merge);
    merge = fgb_begin_if(e, LLVMBuildNot(e->b, whole, ""));
    if (!pw_guarded(e, bases, U, ch, nv))
      return false;
    fgb_end_if(e, merge);
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
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, base, nv, ""));
    pw_chunk_at(e, base, &ch[0]);
    pw_enter(e, &ch[0]);
    if (!pw_outputs(e, &ch[0], false))
      return false;
    fgb_memo_release(e, mark);
    fgb_end_if(e, merge);
    fgk_loop_end(e, &l, u);
    return !e->failed;
  }
  return pw_guarded(e, bases, U, ch, nv);
}
