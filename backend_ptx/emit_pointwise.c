/* The pointwise kernel: a thread per vector of adjacent output elements,
 * chunks of them block-strided (schedule_pointwise). Flat (issue 17,
 * fg_kernel.flat): the vector's lanes are consecutive linear indices of
 * the domain, whatever its last extent; the outputs, dense, take one
 * vector store each, and the last chunk's lanes past the end go one at a
 * time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "emit_skel.h"
#include "infer.h"

/* ---- pointwise ---- */

/* Coordinates, lanes and lane-independent coordinates of one chunk; flat,
 * its linear index and each lane's coordinates. */
typedef struct pw_chunk {
  LLVMValueRef c[FG_MAX_RANK];
  LLVMValueRef lanes[16];
  LLVMValueRef uniform[FG_MAX_RANK];
  int nuniform;
  LLVMValueRef base;
  LLVMValueRef fc[16][FG_MAX_RANK];
} pw_chunk;

/* Flat: lane 0's coordinates from the linear index, each next lane's from
 * the one before by adding one to the last dim and carrying (the leading
 * dim of extent above 1 takes the carry without a compare: a whole chunk
 * ends inside the domain). */
static void flat_chunk_at(fgb_emitter *e, LLVMValueRef base, pw_chunk *ch) {
  const fg_kernel *k = e->k;
  int r = k->rank, first = 0;
  while (first < r - 1 && k->dims[first] == 1)
    first++;
  ch->base = base;
  fgb_delinearize(e, base, k->dims, r, ch->fc[0]);
  for (int j = 1; j < k->vec; j++) {
    LLVMValueRef carry = fgb_const(e, 1);
    for (int d = r - 1; d >= 0; d--) {
      LLVMValueRef prev = ch->fc[j - 1][d];
      if (!carry || k->dims[d] == 1) {
        ch->fc[j][d] = prev;
        continue;
      }
      LLVMValueRef t = LLVMBuildAdd(e->b, prev, carry, "");
      if (d == first) {
        ch->fc[j][d] = t;
        carry = NULL;
        continue;
      }
      LLVMValueRef wrap = LLVMBuildICmp(e->b, LLVMIntEQ, t, fgb_const(e, k->dims[d]), "");
      ch->fc[j][d] = LLVMBuildSelect(e->b, wrap, fgb_const(e, 0), t, "");
      carry = LLVMBuildZExt(e->b, wrap, e->ity, "");
    }
  }
}

static void pw_chunk_at(fgb_emitter *e, LLVMValueRef base, pw_chunk *ch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  if (k->flat) {
    flat_chunk_at(e, base, ch);
    return;
  }
  fgb_delinearize(e, base, k->dims, k->rank, ch->c);
  for (int j = 0; j < e->vec; j++) /* a 0-d domain has no lane dim (and vec 1) */
    ch->lanes[j] = last < 0 ? NULL
                   : j == 0 ? ch->c[last]
                            : LLVMBuildAdd(e->b, ch->c[last], fgb_const(e, j), "");
  ch->nuniform = 0;
  for (int d = 0; d < last; d++)
    ch->uniform[ch->nuniform++] = ch->c[d];
}

static void pw_enter(fgb_emitter *e, pw_chunk *ch) {
  if (e->k->flat) {
    e->flat_base = ch->base;
    e->flat_idx = ch->fc;
    return;
  }
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

/* Flat: stores n values of output o from linear index base (its dense
 * offset): 16-byte vector stores in the aligned variant. */
static void flat_store(fgb_emitter *e, const fg_value *o, LLVMValueRef base, LLVMValueRef *vals,
                       int n) {
  LLVMValueRef ptr = fgb_buffer_of(e, e->p->store[o->id].buf);
  if (!ptr)
    return;
  fg_dtype dt = o->type.dtype;
  LLVMTypeRef st = fgb_storage_type(e->m, dt);
  LLVMValueRef addr = fgb_gep_global(e->m, ptr, st, base);
  int per = e->aligned ? 16 / fg_dtype_size(dt) : 1;
  if (per > n)
    per = n;
  for (int done = 0; done < n; done += per) {
    LLVMValueRef a = done ? fgb_gep_global(e->m, addr, st, fgb_const(e, done)) : addr;
    fgb_store_vec(e->m, a, dt, per, (unsigned)(per * fg_dtype_size(dt)), vals + done);
  }
}

/* Flat: every output of one chunk at each lane's coordinates, all before
 * any store (so a kernel writing a parameter in place loads first), the
 * value recursion at vec 1 (emit.h). */
static bool flat_outputs(fgb_emitter *e, const pw_chunk *ch, bool prefetch) {
  const fg_kernel *k = e->k;
  LLVMValueRef *vals = malloc(sizeof *vals * 16 * (size_t)k->nouts);
  if (!vals)
    return false;
  bool ok = true;
  e->vec = 1;
  for (int i = 0; i < k->nouts && ok; i++)
    for (int j = 0; j < k->vec && ok; j++) {
      if (prefetch)
        fgb_prefetch_value(e, k->outs[i], ch->fc[j]);
      else
        ok = (vals[16 * i + j] = fgb_emit_value(e, k->outs[i], ch->fc[j])) != NULL;
    }
  e->vec = k->vec;
  for (int i = 0; i < k->nouts && ok && !prefetch; i++)
    flat_store(e, k->outs[i], ch->base, &vals[16 * i], k->vec);
  free(vals);
  return ok && !e->failed;
}

/* Flat: the linear indices from base to nv (fewer than a vector: the last
 * chunk), one at a time. */
static bool flat_tail(fgb_emitter *e, LLVMValueRef base, LLVMValueRef nv) {
  const fg_kernel *k = e->k;
  LLVMValueRef *vals = malloc(sizeof *vals * (size_t)k->nouts);
  if (!vals)
    return false;
  fgk_loop l;
  LLVMValueRef i = fgk_loop_begin(e, &l, base, nv, fgb_const(e, 1));
  int mark = fgb_memo_mark(e), flat = e->flat;
  e->flat = 0;
  e->vec = 1;
  LLVMValueRef c[FG_MAX_RANK];
  fgb_delinearize(e, i, k->dims, k->rank, c);
  bool ok = true;
  for (int o = 0; o < k->nouts && ok; o++)
    ok = (vals[o] = fgb_emit_value(e, k->outs[o], c)) != NULL;
  for (int o = 0; o < k->nouts && ok; o++)
    flat_store(e, k->outs[o], i, &vals[o], 1);
  e->flat = flat;
  e->vec = k->vec;
  fgb_memo_release(e, mark);
  fgk_loop_end(e, &l, i);
  free(vals);
  return ok && !e->failed;
}

/* Emits (or, prefetching, loads for) every output of one chunk. */
static bool pw_outputs(fgb_emitter *e, const pw_chunk *ch, bool prefetch) {
  const fg_kernel *k = e->k;
  int last = k->rank - 1;
  if (k->flat)
    return flat_outputs(e, ch, prefetch);
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

/* One chunk that starts in range. `tail`: flat lanes may run past nv (the
 * domain is not a whole number of vectors), so a chunk is whole or the
 * last, whose lanes go one at a time. */
static bool pw_chunk_in(fgb_emitter *e, LLVMValueRef base, pw_chunk *ch, LLVMValueRef nv,
                        bool tail) {
  if (!tail) {
    pw_chunk_at(e, base, ch);
    pw_enter(e, ch);
    return pw_outputs(e, ch, false);
  }
  LLVMValueRef whole =
      LLVMBuildICmp(e->b, LLVMIntSLE, LLVMBuildAdd(e->b, base, fgb_const(e, e->vec), ""), nv, "");
  LLVMBasicBlockRef merge = fgb_begin_if(e, whole);
  int mark = fgb_memo_mark(e);
  pw_chunk_at(e, base, ch);
  pw_enter(e, ch);
  if (!pw_outputs(e, ch, false))
    return false;
  fgb_memo_release(e, mark);
  fgb_end_if(e, merge);
  merge = fgb_begin_if(e, LLVMBuildNot(e->b, whole, ""));
  if (!flat_tail(e, base, nv))
    return false;
  fgb_end_if(e, merge);
  return !e->failed;
}

/* Each chunk under its own bound check. */
static bool pw_guarded(fgb_emitter *e, const LLVMValueRef *bases, int U, pw_chunk *ch,
                       LLVMValueRef nv, bool tail) {
  for (int u = 0; u < U; u++) {
    LLVMBasicBlockRef merge = fgb_begin_if(e, LLVMBuildICmp(e->b, LLVMIntSLT, bases[u], nv, ""));
    int mark = fgb_memo_mark(e);
    if (!pw_chunk_in(e, bases[u], &ch[u], nv, tail))
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
  /* flat lanes: whether the domain may end inside a vector */
  bool tail =
      k->flat && !(sym->affine               ? fg_sym_multiple(sym, n, e->vec)
                   : fg_sym_involves(sym, n) ? (n / sym->placeholder * sym->div) % e->vec == 0
                                             : n % e->vec == 0);
  if (k->flat)
    e->flat = e->vec;
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
    if (!pw_guarded(e, bases, U, ch, nv, tail))
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
    if (!pw_chunk_in(e, base, &ch[0], nv, tail))
      return false;
    fgb_memo_release(e, mark);
    fgb_end_if(e, merge);
    fgk_loop_end(e, &l, u);
    return !e->failed;
  }
  return pw_guarded(e, bases, U, ch, nv, tail);
}
