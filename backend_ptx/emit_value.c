/* The value recursion of kernel lowering (see emit.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "index.h"
#include "infer.h"
#include "view.h"

void fgb_fail(fgb_emitter *e, const char *fmt, ...) {
  if (e->failed)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err, sizeof e->err, fmt, ap);
  va_end(ap);
  e->failed = true;
}

bool fgb_emitter_init(fgb_emitter *e, fgb_module *m, const fg_plan *p, const fg_kernel *k,
                      bool aligned) {
  memset(e, 0, sizeof *e);
  e->m = m;
  e->b = fgb_builder(m);
  e->ctx = fgb_ctx(m);
  e->p = p;
  e->k = k;
  e->aligned = aligned;
  e->vec = k->vec;
  e->ity = k->idx64 ? LLVMInt64TypeInContext(e->ctx) : LLVMInt32TypeInContext(e->ctx);
  e->nbuckets = 4096;
  e->buckets = malloc((size_t)e->nbuckets * sizeof *e->buckets);
  e->capmemo = 1024;
  e->memo = malloc((size_t)e->capmemo * sizeof *e->memo);
  if (!e->buckets || !e->memo)
    return false;
  for (int i = 0; i < e->nbuckets; i++)
    e->buckets[i] = -1;
  return true;
}

void fgb_emitter_free(fgb_emitter *e) {
  free(e->buckets);
  free(e->memo);
  free(e->args);
  free(e->pipe);
}

/* Whether a load of view s at idx goes through the pipeline: indexed by a
 * coordinate of the rows walked (not a row-invariant weight). */
static bool pipe_eligible(const fgb_emitter *e, const fg_strided *s, const LLVMValueRef *idx) {
  if (e->pipe_mode == FGB_PIPE_OFF || e->reload_zero)
    return false;
  for (int d = 0; d < s->rank; d++) {
    if (s->strides[d] == 0 || s->sizes[d] == 1)
      continue;
    for (int r = 0; r < e->npipe_rows; r++)
      if (idx[d] == e->pipe_rows[r])
        return true;
  }
  return false;
}

/* This thread's slot for piece q of the next pipelined load (created by
 * the first walk); NULL, with the emitter failed, when walks disagree. */
static LLVMValueRef pipe_slot(fgb_emitter *e, int pieces, int q) {
  int i = e->pipe_pos;
  if (q == pieces - 1)
    e->pipe_pos++;
  if (i == e->npipe && e->pipe_mode == FGB_PIPE_ISSUE) {
    if (e->npipe == e->cappipe) {
      int cap = e->cappipe ? 2 * e->cappipe : 32;
      struct fgb_pipe_slot *np = realloc(e->pipe, (size_t)cap * sizeof *np);
      if (!np) {
        fgb_fail(e, "out of memory");
        return NULL;
      }
      e->pipe = np;
      e->cappipe = cap;
    }
    int64_t bytes = 2 * (int64_t)pieces * e->k->block * 16;
    if (!e->pipe_arena || e->pipe_used + bytes > e->k->pipe_bytes) {
      fgb_fail(e, "pipelined loads of kernel %d exceed its %d bytes of shared memory", e->k->id,
               e->k->pipe_bytes);
      return NULL;
    }
    e->pipe[i].off = e->pipe_used;
    e->pipe[i].pieces = pieces;
    e->pipe_used += bytes;
    e->npipe++;
  }
  if (i >= e->npipe || e->pipe[i].pieces != pieces) {
    fgb_fail(e, "pipelined loads of kernel %d differ between walks", e->k->id);
    return NULL;
  }
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  LLVMValueRef slot = LLVMBuildAdd(
      e->b, LLVMBuildMul(e->b, e->pipe_buf, LLVMConstInt(i32, (unsigned)pieces, 0), ""),
      LLVMConstInt(i32, (unsigned)q, 0), "");
  slot =
      LLVMBuildAdd(e->b, LLVMBuildMul(e->b, slot, LLVMConstInt(i32, (unsigned)e->k->block, 0), ""),
                   fgb_tid(e->m, 0), "");
  return fgb_gep(e->m, e->pipe_arena, LLVMInt8TypeInContext(e->ctx),
                 LLVMBuildAdd(e->b, LLVMBuildMul(e->b, slot, LLVMConstInt(i32, 16, 0), ""),
                              LLVMConstInt(i32, (unsigned long long)e->pipe[i].off, 0), ""));
}

/* ---- memo ---- */

static unsigned memo_hash(int id, int n, const LLVMValueRef *idx, int nb) {
  uintptr_t h = (uintptr_t)id * 0x9E3779B97F4A7C15u;
  for (int i = 0; i < n; i++)
    h = (h ^ (uintptr_t)idx[i]) * 0x100000001B3u;
  return (unsigned)((h >> 17) % (unsigned)nb);
}

int fgb_memo_mark(const fgb_emitter *e) { return e->nmemo; }

void fgb_memo_release(fgb_emitter *e, int mark) {
  /* Entries are pushed at chain heads, so removing the newest first restores
   * every chain. */
  while (e->nmemo > mark) {
    fgb_memo_entry *en = &e->memo[--e->nmemo];
    unsigned h = memo_hash(en->value_id, en->n, en->idx, e->nbuckets);
    e->buckets[h] = en->next;
  }
}

void fgb_memo_put(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx, LLVMValueRef val) {
  if (e->nmemo == e->capmemo) {
    int cap = e->capmemo * 2;
    fgb_memo_entry *nm = realloc(e->memo, (size_t)cap * sizeof *nm);
    if (!nm) {
      fgb_fail(e, "out of memory");
      return;
    }
    e->memo = nm;
    e->capmemo = cap;
  }
  fgb_memo_entry *en = &e->memo[e->nmemo];
  en->value_id = v->id;
  en->n = v->type.rank;
  memcpy(en->idx, idx, sizeof(LLVMValueRef) * (size_t)en->n);
  en->val = val;
  unsigned h = memo_hash(en->value_id, en->n, en->idx, e->nbuckets);
  en->next = e->buckets[h];
  e->buckets[h] = e->nmemo++;
}

LLVMValueRef fgb_memo_get(const fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  int n = v->type.rank;
  unsigned h = memo_hash(v->id, n, idx, e->nbuckets);
  for (int i = e->buckets[h]; i >= 0; i = e->memo[i].next) {
    const fgb_memo_entry *en = &e->memo[i];
    if (en->value_id == v->id && en->n == n &&
        memcmp(en->idx, idx, sizeof(LLVMValueRef) * (size_t)n) == 0)
      return en->val;
  }
  return NULL;
}

/* ---- small helpers ---- */

LLVMValueRef fgb_const(fgb_emitter *e, int64_t v) {
  return LLVMConstInt(e->ity, (unsigned long long)v, 1);
}

static LLVMValueRef to_ity(fgb_emitter *e, LLVMValueRef v32) {
  return LLVMTypeOf(v32) == e->ity ? v32 : LLVMBuildZExt(e->b, v32, e->ity, "");
}

LLVMValueRef fgb_thread_index(fgb_emitter *e, int axis) { return to_ity(e, fgb_tid(e->m, axis)); }
LLVMValueRef fgb_block_index(fgb_emitter *e, int axis) { return to_ity(e, fgb_ctaid(e->m, axis)); }

LLVMValueRef fgb_work_block(fgb_emitter *e) {
  LLVMValueRef c = fgb_ctaid(e->m, 0);
  if (e->k->reverse) /* nctaid.x - 1 - ctaid.x: no wrap, ctaid.x < nctaid.x */
    c = LLVMBuildSub(e->b, LLVMBuildSub(e->b, fgb_nctaid(e->m, 0), c, ""),
                     LLVMConstInt(LLVMTypeOf(c), 1, 0), "");
  return to_ity(e, c);
}

void fgb_delinearize(fgb_emitter *e, LLVMValueRef lin, const int64_t *sizes, int n,
                     LLVMValueRef *out) {
  for (int i = n - 1; i >= 0; i--) {
    if (sizes[i] == 1) {
      out[i] = fgb_const(e, 0);
      continue;
    }
    if (i == 0) {
      out[i] = lin;
      break;
    }
    LLVMValueRef s = fgb_const(e, sizes[i]);
    out[i] = LLVMBuildURem(e->b, lin, s, "");
    lin = LLVMBuildUDiv(e->b, lin, s, "");
  }
}

LLVMBasicBlockRef fgb_begin_if(fgb_emitter *e, LLVMValueRef cond) {
  LLVMValueRef fn = fgb_current_fn(e->m);
  LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->ctx, fn, "then");
  LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(e->ctx, fn, "endif");
  LLVMBuildCondBr(e->b, cond, then, merge);
  LLVMPositionBuilderAtEnd(e->b, then);
  return merge;
}

void fgb_end_if(fgb_emitter *e, LLVMBasicBlockRef merge) {
  LLVMBuildBr(e->b, merge);
  LLVMPositionBuilderAtEnd(e->b, merge);
}

bool fgb_is_full(const fgb_emitter *e, const fg_value *v) {
  if (v->type.rank != e->k->rank)
    return false;
  for (int i = 0; i < e->k->rank; i++)
    if (v->type.dims[i].size != e->k->dims[i])
      return false;
  return true;
}

LLVMValueRef fgb_sym_value(fgb_emitter *e) {
  for (int i = 0; i < e->k->nargs; i++)
    if (e->k->args[i].kind == FG_BUF_SYM) {
      LLVMValueRef v = e->args[i];
      return e->ity == LLVMTypeOf(v) ? v : LLVMBuildTrunc(e->b, v, e->ity, "");
    }
  fgb_fail(e, "kernel %d has no argument for the symbolic size", e->k->id);
  return fgb_const(e, 0);
}

LLVMValueRef fgb_extent(fgb_emitter *e, int64_t extent) {
  const fg_sym_lowering *s = &e->p->sym;
  int64_t a, b;
  fg_sym_split(s, extent, &a, &b);
  if (a == 0)
    return fgb_const(e, extent);
  LLVMValueRef v = LLVMBuildMul(e->b, fgb_sym_value(e), fgb_const(e, a), "");
  return b ? LLVMBuildAdd(e->b, v, fgb_const(e, b), "") : v;
}

LLVMValueRef fgb_ceil_div(fgb_emitter *e, LLVMValueRef v, int64_t c) {
  return LLVMBuildUDiv(e->b, LLVMBuildAdd(e->b, v, fgb_const(e, c - 1), ""), fgb_const(e, c), "");
}

LLVMValueRef fgb_buffer_of(fgb_emitter *e, fg_buf_ref b) {
  for (int i = 0; i < e->k->nargs; i++)
    if (e->k->args[i].kind == b.kind && e->k->args[i].index == b.index)
      return e->args[i];
  char s[32];
  fgb_fail(e, "kernel %d has no argument for buffer %s", e->k->id, fg_buf_str(b, s, sizeof s));
  return NULL;
}

static bool is_lane(const fgb_emitter *e, LLVMValueRef v, int *j) {
  for (int i = 0; i < e->vec; i++)
    if (e->lanes[i] == v) {
      *j = i;
      return true;
    }
  return false;
}

/* Lane-independent coordinates: constants and the skeleton's own
 * coordinates of the non-lane dims (fgb_emitter.uniform). Anything else
 * computed from a lane coordinate (a remapped index) forbids vector access. */
static bool is_uniform(const fgb_emitter *e, LLVMValueRef v) {
  if (LLVMIsConstant(v))
    return true;
  for (int i = 0; i < e->nuniform; i++)
    if (e->uniform[i] == v)
      return true;
  return false;
}

/* ---- constants in register form ---- */

static LLVMValueRef const_reg(fgb_emitter *e, fg_dtype dt, const fg_attr *a) {
  double f = a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
  int64_t i = a->kind == FG_ATTR_FLOAT ? fg_float_to_int(a->f, dt) : a->i;
  LLVMTypeRef t = fgb_reg_type(e->m, dt);
  if (dt == FG_BOOL)
    return LLVMConstInt(t, a->kind == FG_ATTR_FLOAT ? (a->f != 0) : (a->i != 0), 0);
  if (fg_dtype_is_float(dt))
    return LLVMConstReal(t, fg_round_to_dtype(f, dt));
  return LLVMConstInt(t, (unsigned long long)fg_wrap_int(i, dt), 1);
}

/* ---- memory ---- */

/* A view's start, offset or bound: with sizes that are expressions of T
 * (fg_sym_lowering.affine) one may involve it (a slice from T-4, a cat
 * after a piece of T rows), computed from the size argument; otherwise a
 * constant, as it always was. */
static LLVMValueRef view_extent(fgb_emitter *e, int64_t x) {
  return e->p->sym.affine ? fgb_extent(e, x) : fgb_const(e, x);
}

static void base_view(const fgb_emitter *e, const fg_value *b, fg_strided *s) {
  fg_type t = b->type;
  if (b->param_index < 0)
    t.has_layout = false;
  (void)e;
  fg_strided_dense(&t, s);
}

static fg_buf_ref buf_of_value(const fgb_emitter *e, const fg_value *v) {
  if (v->param_index >= 0)
    return (fg_buf_ref){FG_BUF_PARAM, v->param_index};
  return e->p->store[v->id].buf;
}

/* Flat lanes (emit.h): the lane whose coordinates idx are, where view s
 * is dense in the domain's order (the kernel's outputs' layout) from an
 * offset that is a multiple of the lanes; else -1. */
static int flat_lane(const fgb_emitter *e, const fg_value *v, const fg_strided *s,
                     const LLVMValueRef *idx) {
  const fg_kernel *k = e->k;
  if (e->flat < 2 || !e->aligned || fg_dtype_is_packed(v->type.dtype) || s->rank != k->rank)
    return -1;
  int lane = -1;
  for (int j = 0; j < e->flat && lane < 0; j++)
    if (memcmp(idx, e->flat_idx[j], sizeof(LLVMValueRef) * (size_t)k->rank) == 0)
      lane = j;
  int64_t stride = 1;
  for (int d = k->rank - 1; d >= 0 && lane >= 0; d--) {
    if (k->dims[d] == 1)
      continue;
    if (s->sizes[d] != k->dims[d] || s->strides[d] != stride)
      lane = -1;
    stride *= k->dims[d]; /* (never past the leading dim: a size of T) */
  }
  if (lane >= 0 &&
      (e->p->sym.affine ? !fg_sym_multiple(&e->p->sym, s->offset, e->flat) : s->offset % e->flat))
    lane = -1;
  return lane;
}

/* Flat lanes: every lane of v from buffer ptr through view s, dense in the
 * domain's order, as vector loads (16 bytes at most each) at the chunk's
 * linear index; all memoized, lane `lane` returned. */
static LLVMValueRef load_flat(fgb_emitter *e, const fg_value *v, LLVMValueRef ptr,
                              const fg_strided *s, unsigned flags, int lane) {
  fg_dtype dt = v->type.dtype;
  LLVMValueRef off = LLVMBuildAdd(e->b, view_extent(e, s->offset), e->flat_base, "");
  LLVMValueRef addr = fgb_gep_global(e->m, ptr, fgb_storage_type(e->m, dt), off);
  int per = 16 / fg_dtype_size(dt);
  if (per > e->flat)
    per = e->flat;
  LLVMValueRef vals[16];
  for (int done = 0; done < e->flat; done += per) {
    LLVMValueRef a =
        done ? fgb_gep_global(e->m, addr, fgb_storage_type(e->m, dt), fgb_const(e, done)) : addr;
    fgb_load_vec(e->m, a, dt, per, (unsigned)(per * fg_dtype_size(dt)), flags, vals + done);
  }
  e->nvec_loads++;
  for (int j = 0; j < e->flat; j++)
    fgb_memo_put(e, v, e->flat_idx[j], vals[j]);
  return vals[lane];
}

/* issue 21 (rowpeel): in a peeled row kernel (fgb_emitter.peel_kc), whether
 * an access through view s at idx, lane 0 at its last dim (stride 1), has
 * an element offset congruent modulo vec to the domain's dense linear
 * index of the same element, which the peel makes a multiple of vec for
 * lane 0 of a body chunk: s's offset a multiple of vec, and at every other
 * dim the row's own coordinate, through a stride congruent to the
 * domain's dense stride there (a broadcast or another layout: no). */
static bool peel_aligned(const fgb_emitter *e, const fg_strided *s, const LLVMValueRef *idx) {
  const fg_kernel *k = e->k;
  const fg_sym_lowering *sym = &e->p->sym;
  int64_t V = e->vec, dense = k->dims[k->rank - 1];
  if (s->rank != k->rank || fg_sym_involves(sym, s->offset) || s->offset % V)
    return false;
  for (int d = k->rank - 2; d >= 0; d--) {
    if (k->dims[d] == 1 && s->sizes[d] == 1)
      continue;
    if (s->sizes[d] != k->dims[d] || idx[d] != e->peel_kc[d])
      return false;
    if (s->strides[d] != dense && (fg_sym_involves(sym, s->strides[d]) ||
                                   fg_sym_involves(sym, dense) || (s->strides[d] - dense) % V))
      return false;
    if (d > 0)
      dense *= k->dims[d];
  }
  return true;
}

/* ... and the lane dim of a load there: the last, where idx holds a lane
 * and s's stride is 1; -1 where the load is not one vector. */
static int peel_lane_dim(const fgb_emitter *e, const fg_strided *s, const LLVMValueRef *idx,
                         int *lane) {
  int last = e->k->rank - 1;
  if (s->rank != e->k->rank || !is_lane(e, idx[last], lane) || s->strides[last] != 1 ||
      !peel_aligned(e, s, idx))
    return -1;
  return last;
}

/* Loads value v (whose elements live in buffer `buf` through view s) at
 * idx; lanes of a unit-stride dim become one vector load when aligned. */
static LLVMValueRef load_view(fgb_emitter *e, const fg_value *v, fg_buf_ref buf,
                              const fg_strided *s, const LLVMValueRef *idx) {
  LLVMValueRef ptr = fgb_buffer_of(e, buf);
  if (!ptr)
    return NULL;
  if (e->reload_zero && buf.kind == FG_BUF_PARAM)
    ptr = fgb_gep_global(e->m, ptr, LLVMInt8TypeInContext(e->ctx), e->reload_zero);
  fg_dtype dt = v->type.dtype;
  /* a kernel that writes a parameter in place may not call its loads invariant */
  unsigned flags =
      buf.kind == FG_BUF_PARAM && !e->reload_zero && !e->k->inplace ? FGB_LD_INVARIANT : 0;
  int flat = flat_lane(e, v, s, idx);
  if (flat >= 0)
    return load_flat(e, v, ptr, s, flags, flat);
  int lane_dim = -1, lane = 0;
  bool vec_ok = e->aligned && e->vec > 1 && !fg_dtype_is_packed(dt);
  if (vec_ok && e->peel_kc) { /* issue 21: rows peeled (fgb_emitter.peel_kc) */
    lane_dim = peel_lane_dim(e, s, idx, &lane);
    vec_ok = lane_dim >= 0;
  }
  for (int d = 0; d < s->rank && vec_ok && !e->peel_kc; d++) {
    int j;
    if (is_lane(e, idx[d], &j)) {
      if (lane_dim >= 0 || s->strides[d] != 1)
        vec_ok = false;
      lane_dim = d;
      lane = j;
    } else if (!is_uniform(e, idx[d]) || s->strides[d] % e->vec) {
      if (s->sizes[d] != 1)
        vec_ok = false;
    }
  }
  if (vec_ok && !e->peel_kc &&
      (lane_dim < 0 ||
       (e->p->sym.affine ? !fg_sym_multiple(&e->p->sym, s->offset, e->vec) : s->offset % e->vec)))
    vec_ok = false;
  LLVMValueRef lidx[FG_MAX_RANK];
  memcpy(lidx, idx, sizeof(LLVMValueRef) * (size_t)s->rank);
  if (vec_ok)
    lidx[lane_dim] = e->lanes[0];
  LLVMValueRef off = view_extent(e, s->offset); /* a view's start along T: T*64-64 */
  for (int d = 0; d < s->rank; d++) {
    if (s->strides[d] == 0 || s->sizes[d] == 1)
      continue;
    LLVMValueRef t =
        s->strides[d] == 1 ? lidx[d] : LLVMBuildMul(e->b, lidx[d], fgb_const(e, s->strides[d]), "");
    off = LLVMBuildAdd(e->b, off, t, "");
  }
  if (fg_dtype_is_packed(dt))
    return fgb_load_packed(e->m, ptr, off, flags);
  LLVMValueRef addr = fgb_gep_global(e->m, ptr, fgb_storage_type(e->m, dt), off);
  if (!vec_ok)
    return fgb_load(e->m, addr, dt, flags);
  LLVMValueRef vals[16];
  unsigned align = (unsigned)(e->vec * fg_dtype_size(dt));
  if (align > 16)
    align = 16;
  int done = 0;
  /* Wider than 16 bytes (f64 lanes): several vector accesses. */
  int per = 16 / fg_dtype_size(dt);
  if (per > e->vec)
    per = e->vec;
  bool piped = per * fg_dtype_size(dt) == 16 && pipe_eligible(e, s, idx);
  int pieces = e->vec / per;
  for (int q = 0; done < e->vec; q++) {
    LLVMValueRef a =
        done ? fgb_gep_global(e->m, addr, fgb_storage_type(e->m, dt), fgb_const(e, done)) : addr;
    if (piped) {
      LLVMValueRef sp = pipe_slot(e, pieces, q);
      if (!sp)
        return NULL;
      if (e->pipe_mode == FGB_PIPE_ISSUE)
        fgb_cp_async16(e->m, sp, a);
      else
        fgb_load_vec(e->m, sp, dt, per, 16, 0, vals + done);
    } else {
      fgb_load_vec(e->m, a, dt, per, align, flags, vals + done);
    }
    done += per;
  }
  /* An issuing walk only starts copies: its values are never used. */
  if (piped && e->pipe_mode == FGB_PIPE_ISSUE)
    for (int j = 0; j < e->vec; j++)
      vals[j] = LLVMGetUndef(fgb_reg_type(e->m, dt));
  e->nvec_loads++;
  for (int j = 0; j < e->vec; j++) {
    lidx[lane_dim] = e->lanes[j];
    fgb_memo_put(e, v, lidx, vals[j]);
  }
  return vals[lane];
}

/* A chain of view ops from a value in memory to v, composed into one
 * strided view; false when v is not such a chain or it does not compose. */
typedef struct mem_ctx {
  const fg_plan *p;
  int k;
} mem_ctx;
static bool in_memory_stop(const fg_value *v, const void *ctx) {
  const mem_ctx *c = ctx;
  return fg_plan_in_memory(c->p, v, c->k);
}
static bool view_from_memory(fgb_emitter *e, const fg_value *v, const fg_value **base,
                             fg_strided *out) {
  mem_ctx c = {e->p, e->k->id};
  const char *why;
  if (!e->p->g->bookend)
    return false; /* views are index arithmetic (opt/bookend.c) */
  return fg_strided_chain(v, in_memory_stop, &c, base, out, &why);
}

/* ---- index remapping through view ops (output index -> operand index) ---- */

static void map_reshape(fgb_emitter *e, const fg_type *in, const fg_type *out,
                        const LLVMValueRef *idx, LLVMValueRef *res) {
  int i = 0, j = 0;
  while (i < in->rank || j < out->rank) {
    /* size-1 dims on either side carry no coordinate */
    if (i < in->rank && in->dims[i].size == 1) {
      res[i++] = fgb_const(e, 0);
      continue;
    }
    if (j < out->rank && out->dims[j].size == 1) {
      j++;
      continue;
    }
    if (i >= in->rank || j >= out->rank)
      break;
    int i0 = i, j0 = j;
    int64_t pi = in->dims[i++].size, pj = out->dims[j++].size;
    while (pi != pj) {
      if (pi < pj)
        pi *= in->dims[i++].size;
      else
        pj *= out->dims[j++].size;
    }
    /* absorb trailing size-1 dims into neither group */
    if (i - i0 == 1 && j - j0 == 1) {
      res[i0] = idx[j0];
      continue;
    }
    LLVMValueRef lin = fgb_const(e, 0);
    for (int q = j0; q < j; q++) {
      lin = LLVMBuildMul(e->b, lin, fgb_const(e, out->dims[q].size), "");
      lin = LLVMBuildAdd(e->b, lin, idx[q], "");
    }
    int64_t sizes[FG_MAX_RANK];
    for (int q = i0; q < i; q++)
      sizes[q - i0] = in->dims[q].size;
    fgb_delinearize(e, lin, sizes, i - i0, res + i0);
  }
  while (i < in->rank)
    res[i++] = fgb_const(e, 0);
}

static void map_view(fgb_emitter *e, const fg_node *n, int k, const LLVMValueRef *idx,
                     LLVMValueRef *res) {
  const fg_type *in = &n->in[0]->type, *out = &n->out[k]->type;
  int64_t in_sizes[FG_MAX_RANK], out_sizes[FG_MAX_RANK];
  for (int i = 0; i < in->rank; i++)
    in_sizes[i] = in->dims[i].size;
  for (int i = 0; i < out->rank; i++)
    out_sizes[i] = out->dims[i].size;
  fg_view_map m;
  const char *why;
  if (!fg_view_map_of(n, k, in_sizes, out_sizes, &m, &why)) {
    fgb_fail(e, "'%s': %s", n->op->name, why);
    return;
  }
  if (m.reshape) {
    map_reshape(e, in, out, idx, res);
    return;
  }
  for (int i = 0; i < in->rank; i++) {
    if (m.src[i] < 0 || m.zero[i]) {
      res[i] = m.zero[i] ? fgb_const(e, 0) : view_extent(e, m.start[i]);
      continue;
    }
    LLVMValueRef v = idx[m.src[i]];
    if (m.step[i] != 1)
      v = LLVMBuildMul(e->b, v, fgb_const(e, m.step[i]), "");
    if (m.start[i] != 0) /* a start along T: T-4 */
      v = LLVMBuildAdd(e->b, v, view_extent(e, m.start[i]), "");
    res[i] = v;
  }
}

/* ---- ops ---- */

static LLVMValueRef clampi(fgb_emitter *e, LLVMValueRef v, int64_t lo, int64_t hi) {
  /* hi may involve T (a cat or pad along it: size - 1) */
  LLVMValueRef l = fgb_const(e, lo), h = view_extent(e, hi);
  v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v, l, ""), l, v, "");
  return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, v, h, ""), h, v, "");
}

/* abs, neg, maximum and minimum of bf16 (f16) values give a bf16 (f16)
 * value or NaN: their f32 result needs no rounding back to the narrow
 * type. Rounding anyway cost a cvt.rn.bf16.f32 an element (LLVM cannot
 * see that the f32 came from a bf16), a conversion-unit op that slowed
 * the amax loop. */
static bool exact_in_dtype(const fg_node *n) {
  fg_dtype t = n->out[0]->type.dtype;
  if (t != FG_BF16 && t != FG_F16)
    return false;
  if (!fg_op_has(n->op, FG_PROP_EXACT_NARROW))
    return false;
  double lit;
  for (int i = 0; i < n->nin; i++) /* a literal operand is not rounded to t */
    if (n->in[i]->type.dtype != t || fgb_pw_operand_target(n, i) != FG_F32 ||
        fg_value_is_literal(n->in[i], &lit))
      return false;
  return fg_pw_compute_dtype(n) == FG_F32;
}

static LLVMValueRef emit_pointwise_node(fgb_emitter *e, const fg_node *n, int k,
                                        const LLVMValueRef *idx) {
  (void)k;
  const fg_type *ot = &n->out[0]->type;
  LLVMValueRef ops[4];
  for (int i = 0; i < n->nin; i++) {
    LLVMValueRef lit = fgb_pw_literal(e->m, n, i);
    if (lit) {
      ops[i] = lit;
      continue;
    }
    const fg_value *a = n->in[i];
    LLVMValueRef aidx[FG_MAX_RANK];
    int off = ot->rank - a->type.rank;
    for (int d = 0; d < a->type.rank; d++)
      aidx[d] = a->type.dims[d].size == 1 ? fgb_const(e, 0) : idx[off + d];
    LLVMValueRef v = fgb_emit_value(e, a, aidx);
    if (!v)
      return NULL;
    ops[i] = fgb_convert(e->m, v, a->type.dtype, fgb_pw_operand_target(n, i));
  }
  LLVMValueRef r = fgb_emit_pointwise(e->m, n, ops);
  if (!r) {
    fgb_fail(e, "no lowering for '%s'", n->op->name);
    return NULL;
  }
  fg_dtype from = LLVMTypeOf(r) == LLVMInt1TypeInContext(e->ctx) ? FG_BOOL : fg_pw_compute_dtype(n);
  if (exact_in_dtype(n))
    return r;
  return fgb_convert(e->m, r, from, ot->dtype);
}

/* Backstop: schedule.c reports a cat of more than 64 non-empty pieces at
 * its node; the lowering's tables hold 64. */
static bool cat_within_limit(fgb_emitter *e, const fg_node *n, int64_t dim) {
  int pieces = 0;
  for (int i = 0; i < n->nin; i++)
    pieces += n->in[i]->type.dims[dim].size > 0;
  if (pieces > 64)
    fgb_fail(e, "cat of %d non-empty pieces (at most 64)", pieces);
  return pieces <= 64;
}

/* A cat along the lane dim whose piece boundaries are multiples of the
 * vector width: every lane of a chunk falls in the same piece, so one branch
 * per chunk picks the piece, whose lanes are computed (with vector loads)
 * inside it; phis join the lanes. No piece is read where it is not used. */
static LLVMValueRef emit_cat_lanes(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx,
                                   int dim, int lane) {
  const fg_type *ot = &n->out[0]->type;
  LLVMValueRef base = e->lanes[0];
  LLVMValueRef saved[16];
  memcpy(saved, e->lanes, sizeof saved);
  LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "cat.end");
  LLVMValueRef vals[64][16];
  LLVMBasicBlockRef ends[64];
  int nv = 0;
  int64_t off = 0;
  int last = -1;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]->type.dims[dim].size > 0)
      last = i;
  if (!cat_within_limit(e, n, dim))
    return NULL;
  for (int i = 0; i < n->nin && nv < 64; i++) {
    const fg_value *a = n->in[i];
    int64_t sz = a->type.dims[dim].size;
    if (sz == 0)
      continue;
    LLVMBasicBlockRef blk = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "cat.piece");
    LLVMBasicBlockRef next = NULL;
    if (i != last) {
      next = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "cat.next");
      LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, base, view_extent(e, off + sz), ""),
                      blk, next);
    } else {
      LLVMBuildBr(e->b, blk);
    }
    LLVMPositionBuilderAtEnd(e->b, blk);
    int mark = fgb_memo_mark(e);
    LLVMValueRef lbase = off ? LLVMBuildSub(e->b, base, view_extent(e, off), "") : base;
    for (int l = 0; l < e->vec; l++)
      e->lanes[l] = l == 0 ? lbase : LLVMBuildAdd(e->b, lbase, fgb_const(e, l), "");
    for (int l = 0; l < e->vec; l++) {
      LLVMValueRef aidx[FG_MAX_RANK];
      memcpy(aidx, idx, sizeof(LLVMValueRef) * (size_t)ot->rank);
      aidx[dim] = e->lanes[l];
      LLVMValueRef v = fgb_emit_value(e, a, aidx);
      if (!v)
        return NULL;
      vals[nv][l] = fgb_convert(e->m, v, a->type.dtype, ot->dtype);
    }
    fgb_memo_release(e, mark);
    memcpy(e->lanes, saved, sizeof saved);
    ends[nv++] = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, merge);
    if (next)
      LLVMPositionBuilderAtEnd(e->b, next);
    off += sz;
  }
  LLVMPositionBuilderAtEnd(e->b, merge);
  LLVMValueRef res = NULL;
  for (int l = 0; l < e->vec; l++) {
    LLVMValueRef phi = LLVMBuildPhi(e->b, fgb_reg_type(e->m, ot->dtype), "");
    LLVMValueRef in[64];
    for (int i = 0; i < nv; i++)
      in[i] = vals[i][l];
    LLVMAddIncoming(phi, in, ends, (unsigned)nv);
    LLVMValueRef lidx[FG_MAX_RANK];
    memcpy(lidx, idx, sizeof(LLVMValueRef) * (size_t)ot->rank);
    lidx[dim] = e->lanes[l];
    fgb_memo_put(e, n->out[0], lidx, phi);
    if (l == lane)
      res = phi;
  }
  return res;
}

static LLVMValueRef emit_cat(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx) {
  const fg_type *ot = &n->out[0]->type;
  int64_t dim = fg_attr_int(n, "dim");
  if (dim < 0)
    dim += ot->rank;
  int lane;
  if (e->vec > 1 && !e->prefetch && !e->peel_kc && is_lane(e, idx[dim], &lane)) {
    bool aligned = n->nin <= 64;
    for (int i = 0; i < n->nin; i++)
      aligned &= e->p->sym.affine
                     ? fg_sym_multiple(&e->p->sym, n->in[i]->type.dims[dim].size, e->vec)
                     : n->in[i]->type.dims[dim].size % e->vec == 0;
    if (aligned)
      return emit_cat_lanes(e, n, idx, (int)dim, lane);
  }
  LLVMValueRef res = NULL;
  int64_t off = 0;
  LLVMValueRef vals[64], bounds[64];
  int nv = 0;
  if (!cat_within_limit(e, n, dim))
    return NULL;
  for (int i = 0; i < n->nin && nv < 64; i++) {
    const fg_value *a = n->in[i];
    int64_t sz = a->type.dims[dim].size;
    if (sz == 0)
      continue;
    LLVMValueRef aidx[FG_MAX_RANK];
    memcpy(aidx, idx, sizeof(LLVMValueRef) * (size_t)ot->rank);
    if (off) /* sizes and offsets along T are run-time values (fgb_extent) */
      aidx[dim] = LLVMBuildSub(e->b, idx[dim], view_extent(e, off), "");
    aidx[dim] = clampi(e, aidx[dim], 0, sz - 1);
    LLVMValueRef v = fgb_emit_value(e, a, aidx);
    if (!v)
      return NULL;
    vals[nv] = fgb_convert(e->m, v, a->type.dtype, ot->dtype);
    off += sz;
    bounds[nv++] = view_extent(e, off);
  }
  if (nv == 0)
    return LLVMGetUndef(fgb_reg_type(e->m, ot->dtype));
  res = vals[nv - 1];
  for (int i = nv - 2; i >= 0; i--)
    res = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, idx[dim], bounds[i], ""), vals[i],
                          res, "");
  return res;
}

static LLVMValueRef emit_pad(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx) {
  const fg_type *in = &n->in[0]->type, *ot = &n->out[0]->type;
  const fg_attr *pad = fg_node_attr(n, "pad");
  LLVMValueRef padv = const_reg(e, ot->dtype, fg_node_attr(n, "value"));
  if (fg_type_numel(in) == 0)
    return padv;
  LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0);
  LLVMValueRef aidx[FG_MAX_RANK];
  for (int d = 0; d < in->rank; d++) {
    int64_t lo = pad->ints[2 * d], sz = in->dims[d].size;
    LLVMValueRef s = lo ? LLVMBuildSub(e->b, idx[d], view_extent(e, lo), "") : idx[d];
    if (lo > 0 || pad->ints[2 * d + 1] > 0) {
      LLVMValueRef ok = LLVMBuildICmp(e->b, LLVMIntULT, s, view_extent(e, sz), "");
      valid = LLVMBuildAnd(e->b, valid, ok, "");
      s = clampi(e, s, 0, sz - 1);
    }
    aidx[d] = s;
  }
  LLVMValueRef v = fgb_emit_value(e, n->in[0], aidx);
  if (!v)
    return NULL;
  return LLVMBuildSelect(e->b, valid, v, padv, "");
}

/* gather, take_along_dim, index_select (index.h): the index operand at
 * its coordinates, clamped into [0, size) in 64 bits (an out-of-range
 * index never reads outside the operand), then the operand there. An
 * index read at lane-independent coordinates (index_select of an
 * embedding row, the lanes along the row) is itself lane-independent, so
 * the operand's row keeps its vector loads. */
static LLVMValueRef emit_gather(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx) {
  if (fg_index_scatters(n)) {
    fgb_fail(e, "'%s' is not supported by the code generator", n->op->name);
    return NULL;
  }
  fg_index_map m;
  fg_index_map_of(n, &m);
  const fg_value *iv = n->in[1];
  LLVMValueRef iidx[FG_MAX_RANK], xidx[FG_MAX_RANK];
  bool uniform = true;
  for (int i = 0; i < m.idx_rank; i++) {
    iidx[i] = m.idx_src[i] >= 0 ? idx[m.idx_src[i]] : fgb_const(e, 0);
    uniform &= is_uniform(e, iidx[i]);
  }
  LLVMValueRef v = fgb_emit_value(e, iv, iidx);
  if (!v)
    return NULL;
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  v = fgb_convert(e->m, v, iv->type.dtype, FG_I64);
  LLVMValueRef lo = LLVMConstInt(i64, 0, 0),
               hi = LLVMConstInt(i64, (unsigned long long)(m.size - 1), 0);
  v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v, lo, ""), lo, v, "");
  v = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, v, hi, ""), hi, v, "");
  if (e->ity != i64)
    v = LLVMBuildTrunc(e->b, v, e->ity, "");
  for (int i = 0; i < m.x_rank; i++)
    xidx[i] = m.x_src[i] == FG_INDEX_VALUE ? v
              : m.x_src[i] >= 0            ? idx[m.x_src[i]]
                                           : fgb_const(e, 0);
  int nuni = e->nuniform;
  if (uniform && e->nuniform < 64)
    e->uniform[e->nuniform++] = v;
  LLVMValueRef r = fgb_emit_value(e, n->in[0], xidx);
  e->nuniform = nuni;
  return r;
}

/* A reshape whose last dim carries the lanes, where the input's last dim
 * is a whole number of vectors too: the V lanes (an aligned run of the
 * linear index) land in one input row, at consecutive positions. So the
 * input is emitted with lanes of its own along its last dim and its other
 * coordinates uniform, which keeps its loads vectorized (the separate
 * dQKV epilogue reads q, k and v through [B,H,S,D] -> [B,S,H*D]: eight
 * scalar loads a thread per row before). False when that does not apply;
 * else *r is v at idx (NULL in prefetch mode, or on failure). */
static bool emit_reshape_lanes(fgb_emitter *e, const fg_node *n, const fg_value *v,
                               const LLVMValueRef *idx, LLVMValueRef *r) {
  const fg_type *in = &n->in[0]->type, *out = &v->type;
  int lane, V = e->vec;
  if (V <= 1 || e->peel_kc || (n->op->code != FG_OP_RESHAPE && n->op->code != FG_OP_VIEW) ||
      in->rank < 1 || out->rank < 1 || !is_lane(e, idx[out->rank - 1], &lane) ||
      in->dims[in->rank - 1].size % V || out->dims[out->rank - 1].size % V ||
      e->nuniform + in->rank > 64)
    return false;
  LLVMValueRef oidx[FG_MAX_RANK], res0[FG_MAX_RANK], saved[16], nl[16];
  memcpy(oidx, idx, sizeof(LLVMValueRef) * (size_t)out->rank);
  oidx[out->rank - 1] = e->lanes[0];
  map_reshape(e, in, out, oidx, res0);
  /* The last dim maps to the input's last dim as it is (size-1 dims added
   * or removed, or leading dims merged or split: llm.c's encoder reshapes
   * its gathered [B*T,C] rows to [B,T,C]): the lanes keep their own values,
   * so values the kernel computed at them (its reductions) are found
   * again, and the input's other coordinates, functions of the output's
   * other coordinates alone, are computed once for all lanes: where those
   * are lane-independent, so are they (the gathered rows keep their vector
   * loads, their index computed once, not once a lane). */
  bool same_last = res0[in->rank - 1] == oidx[out->rank - 1];
  for (int d = 0; d < out->rank - 1 && same_last; d++)
    if (!is_uniform(e, idx[d]))
      return false;
  int last = in->rank - 1, nuni = e->nuniform;
  memcpy(saved, e->lanes, sizeof saved);
  for (int j = 0; j < V; j++)
    nl[j] = same_last ? e->lanes[j]
            : j       ? LLVMBuildAdd(e->b, res0[last], fgb_const(e, j), "")
                      : res0[last];
  memcpy(e->lanes, nl, sizeof(LLVMValueRef) * (size_t)V);
  for (int d = 0; d < last; d++)
    e->uniform[e->nuniform++] = res0[d];
  LLVMValueRef vals[16];
  for (int j = 0; j < V && !e->failed; j++) {
    res0[last] = nl[j];
    vals[j] = fgb_emit_value(e, n->in[0], res0);
  }
  memcpy(e->lanes, saved, sizeof saved);
  e->nuniform = nuni;
  *r = NULL;
  if (e->failed || e->prefetch)
    return true;
  for (int j = 0; j < V; j++) {
    oidx[out->rank - 1] = e->lanes[j];
    if (j != lane)
      fgb_memo_put(e, v, oidx, vals[j]);
  }
  *r = vals[lane];
  return true;
}

void fgb_prefetch_value(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  e->prefetch = true;
  fgb_emit_value(e, v, idx);
  e->prefetch = false;
}

/* Prefetch: walk through pointwise and view ops to the loads; everything
 * else is computed later. */
static LLVMValueRef prefetch_node(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  const fg_node *n = v->def;
  if (n->op->kind == FG_KIND_POINTWISE) {
    const fg_type *ot = &n->out[0]->type;
    for (int i = 0; i < n->nin; i++) {
      const fg_value *a = n->in[i];
      if (a->def && a->def->op->kind == FG_KIND_LITERAL)
        continue;
      LLVMValueRef aidx[FG_MAX_RANK];
      int off = ot->rank - a->type.rank;
      for (int d = 0; d < a->type.rank; d++)
        aidx[d] = a->type.dims[d].size == 1 ? fgb_const(e, 0) : idx[off + d];
      fgb_emit_value(e, a, aidx);
    }
  } else if (n->op->kind == FG_KIND_CONTROL) {
    fgb_emit_value(e, n->in[0], idx);
  }
  return NULL;
}

LLVMValueRef fgb_emit_value(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  if (e->failed)
    return NULL;
  LLVMValueRef hit = fgb_memo_get(e, v, idx);
  if (hit)
    return hit;
  if (e->prefetch && v->def && !fg_plan_in_memory(e->p, v, e->k->id) &&
      (v->def->op->kind == FG_KIND_POINTWISE || v->def->op->kind == FG_KIND_CONTROL))
    return prefetch_node(e, v, idx);
  if (e->prefetch && v->def && !fg_plan_in_memory(e->p, v, e->k->id) &&
      v->def->op->kind == FG_KIND_INDEXING && !fg_index_scatters(v->def)) {
    /* a gather's load waits for its index's: both issued with the other
     * chunks' loads, not after the chunk before has stored (an embedding
     * lookup's rows); the value is memoized for the computing pass */
    e->prefetch = false;
    fgb_emit_value(e, v, idx);
    e->prefetch = true;
    return NULL;
  }
  if (e->prefetch && v->def && !fg_plan_in_memory(e->p, v, e->k->id) &&
      !(v->def->op->kind == FG_KIND_VIEW && v->def->op->code != FG_OP_CAT &&
        v->def->op->code != FG_OP_PAD))
    return NULL;
  LLVMValueRef r = NULL;
  const fg_node *n = v->def;
  if (v->param_index >= 0 && v->type.scalar) {
    LLVMValueRef a = fgb_buffer_of(e, (fg_buf_ref){FG_BUF_PARAM, v->param_index});
    if (!a)
      return NULL;
    r = fgb_convert(e->m, a, fg_dtype_is_float(v->type.dtype) ? FG_F64 : FG_I64, v->type.dtype);
  } else if (fg_plan_in_memory(e->p, v, e->k->id)) {
    fg_strided s;
    base_view(e, v, &s);
    r = load_view(e, v, buf_of_value(e, v), &s, idx);
  } else if (!n) {
    fgb_fail(e, "value %d has no definition", v->id);
  } else {
    const fg_value *base;
    fg_strided s;
    switch (n->op->kind) {
    case FG_KIND_LITERAL:
      r = const_reg(e, v->type.dtype, &n->attrs[0]);
      break;
    case FG_KIND_POINTWISE:
      r = emit_pointwise_node(e, n, v->def_index, idx);
      break;
    case FG_KIND_CONTROL:
      r = fgb_emit_value(e, n->in[0], idx);
      break;
    case FG_KIND_CREATION:
      if (n->op->code == FG_OP_FULL) {
        r = const_reg(e, v->type.dtype, fg_node_attr(n, "value"));
      } else if (n->op->code == FG_OP_EXTENT) {
        /* T x the rest: the count of a mean or var over T */
        LLVMTypeRef i64t = LLVMInt64TypeInContext(e->ctx);
        LLVMValueRef c = fgb_extent(e, fg_node_attr(n, "value")->i);
        if (LLVMTypeOf(c) != i64t)
          c = LLVMBuildZExt(e->b, c, i64t, "");
        r = fgb_convert(e->m, c, FG_I64, v->type.dtype);
      } else if (n->op->code == FG_OP_RAND || n->op->code == FG_OP_RANDN) {
        r = fgb_emit_random(e, v, idx);
      } else if (n->op->code == FG_OP_DROPOUT) {
        fgb_fail(e, "'dropout' reached the code generator (the decompose pass rewrites it)");
      } else {
        LLVMValueRef i64 = LLVMBuildSExt(e->b, idx[0], LLVMInt64TypeInContext(e->ctx), "");
        if (LLVMTypeOf(idx[0]) == LLVMInt64TypeInContext(e->ctx))
          i64 = idx[0];
        r = fgb_convert(e->m, i64, FG_I64, v->type.dtype);
      }
      break;
    case FG_KIND_VIEW:
      if (n->op->code == FG_OP_CAT) {
        r = emit_cat(e, n, idx);
        break;
      }
      if (n->op->code == FG_OP_PAD) {
        r = emit_pad(e, n, idx);
        break;
      }
      if (view_from_memory(e, v, &base, &s)) {
        r = load_view(e, v, buf_of_value(e, base), &s, idx);
      } else if (!emit_reshape_lanes(e, n, v, idx, &r)) {
        LLVMValueRef in_idx[FG_MAX_RANK];
        map_view(e, n, v->def_index, idx, in_idx);
        r = fgb_emit_value(e, n->in[0], in_idx);
      }
      break;
    case FG_KIND_REDUCTION:
      fgb_fail(e, "reduction '%s' used at an index its kernel did not compute", n->op->name);
      break;
    case FG_KIND_ATTENTION:
      fgb_fail(e, "'%s' is not supported by the code generator", n->op->name);
      break;
    case FG_KIND_INDEXING:
      r = emit_gather(e, n, idx);
      break;
    }
  }
  if (r && !e->failed)
    fgb_memo_put(e, v, idx, r);
  return e->failed ? NULL : r;
}

/* ---- stores ---- */

static LLVMValueRef dense_offset(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  fg_type t = v->type;
  t.has_layout = false;
  int64_t st[FG_MAX_RANK];
  fg_type_strides(&t, st);
  LLVMValueRef off = fgb_const(e, 0);
  for (int d = 0; d < t.rank; d++) {
    if (t.dims[d].size == 1)
      continue;
    LLVMValueRef x = st[d] == 1 ? idx[d] : LLVMBuildMul(e->b, idx[d], fgb_const(e, st[d]), "");
    off = LLVMBuildAdd(e->b, off, x, "");
  }
  return off;
}

void fgb_emit_store(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx, LLVMValueRef val) {
  LLVMValueRef ptr = fgb_buffer_of(e, e->p->store[v->id].buf);
  if (!ptr || !val)
    return;
  if (fg_dtype_is_packed(v->type.dtype)) {
    fgb_store_nibble(e->m, ptr, dense_offset(e, v, idx), val);
    return;
  }
  LLVMValueRef addr =
      fgb_gep_global(e->m, ptr, fgb_storage_type(e->m, v->type.dtype), dense_offset(e, v, idx));
  fgb_store(e->m, addr, v->type.dtype, val);
}

/* issue 21: a store of v's lanes at idx (lane 0 last) in a peeled row
 * kernel is one vector where v's dense layout puts it at the domain's
 * dense index modulo vec (peel_aligned): v full-size, at the row's own
 * coordinates. */
static bool peel_store_aligned(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  fg_type t = v->type;
  t.has_layout = false;
  fg_strided s;
  fg_strided_dense(&t, &s);
  int lane;
  return peel_lane_dim(e, &s, idx, &lane) >= 0 && lane == 0;
}

void fgb_emit_store_lanes(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx,
                          LLVMValueRef *vals) {
  int r = v->type.rank;
  fg_dtype dt = v->type.dtype;
  /* lanes at a multiple of vec: the last dim a whole number of vectors,
   * or (issue 21, rows peeled) the dense offset that of the domain */
  bool whole = r > 0 && (e->peel_kc ? peel_store_aligned(e, v, idx)
                                    : v->type.dims[r - 1].size % e->vec == 0);
  if (fg_dtype_is_packed(dt) && e->vec % 2 == 0 && e->vec <= 16 && whole && !e->peel_kc &&
      e->lanes[0]) {
    /* lanes[0] is a multiple of vec: whole bytes */
    LLVMValueRef ptr = fgb_buffer_of(e, e->p->store[v->id].buf);
    if (!ptr)
      return;
    fgb_store_packed_pairs(e->m, ptr, dense_offset(e, v, idx), e->vec, e->aligned, vals);
    return;
  }
  if (e->aligned && e->vec > 1 && whole && !fg_dtype_is_packed(dt)) {
    LLVMValueRef ptr = fgb_buffer_of(e, e->p->store[v->id].buf);
    if (!ptr)
      return;
    LLVMValueRef addr =
        fgb_gep_global(e->m, ptr, fgb_storage_type(e->m, dt), dense_offset(e, v, idx));
    int per = 16 / fg_dtype_size(dt);
    if (per > e->vec)
      per = e->vec;
    unsigned align = (unsigned)(per * fg_dtype_size(dt));
    for (int done = 0; done < e->vec; done += per) {
      LLVMValueRef a =
          done ? fgb_gep_global(e->m, addr, fgb_storage_type(e->m, dt), fgb_const(e, done)) : addr;
      fgb_store_vec(e->m, a, dt, per, align, vals + done);
    }
    return;
  }
  LLVMValueRef lidx[FG_MAX_RANK];
  memcpy(lidx, idx, sizeof(LLVMValueRef) * (size_t)r);
  /* f8 lanes stored one by one still convert two at a time */
  bool paired = (dt == FG_F8E4M3 || dt == FG_F8E5M2) && e->vec % 2 == 0 && e->vec <= 16 &&
                fgb_has_f8_cvt(e->m);
  LLVMValueRef pairs[8];
  for (int j = 0; paired && j < e->vec / 2; j++)
    pairs[j] = fgb_f8_encode2(e->m, vals[2 * j], vals[2 * j + 1], dt);
  for (int j = 0; j < e->vec; j++) {
    if (r > 0 && e->lanes[j])
      lidx[r - 1] = e->lanes[j]; /* no lanes: the index as it is (fgk_lane_index) */
    if (!paired) {
      fgb_emit_store(e, v, lidx, vals[j]);
      continue;
    }
    LLVMValueRef ptr = fgb_buffer_of(e, e->p->store[v->id].buf);
    if (!ptr)
      return;
    LLVMValueRef p16 = j % 2 ? LLVMBuildLShr(e->b, pairs[j / 2],
                                             LLVMConstInt(LLVMInt16TypeInContext(e->ctx), 8, 0), "")
                             : pairs[j / 2];
    LLVMValueRef code = LLVMBuildTrunc(e->b, p16, LLVMInt8TypeInContext(e->ctx), "");
    LLVMValueRef addr =
        fgb_gep_global(e->m, ptr, LLVMInt8TypeInContext(e->ctx), dense_offset(e, v, lidx));
    LLVMSetAlignment(LLVMBuildStore(e->b, code, addr), 1);
  }
}
