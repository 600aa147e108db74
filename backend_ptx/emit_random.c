/* rand and randn in kernels (docs/format.md 5.12, ir/random.h): each
 * element computes its Philox-4x32-10 block from its linear index in the
 * value's logical row-major shape, so the bits do not depend on the
 * kernel's schedule, vector width or grid. Lanes whose indices share a
 * block compute the same arithmetic, which LLVM merges where it can prove
 * it (lanes of a vector along a dim whose stride is a multiple of 4). */
#include "emit.h"
#include "random.h"

static LLVMValueRef u32c(fgb_module *m, uint32_t c) {
  return LLVMConstInt(LLVMInt32TypeInContext(fgb_ctx(m)), c, false);
}

/* A seed or offset operand as an i64 (signed dtypes sign-extend). */
static LLVMValueRef stream_word(fgb_emitter *e, const fg_value *s) {
  LLVMValueRef zero[1] = {fgb_const(e, 0)};
  LLVMValueRef r = fgb_emit_value(e, s, zero); /* rank 0 or 1 (one element) */
  if (!r)
    return NULL;
  return fgb_convert(e->m, r, s->type.dtype, FG_I64);
}

static void split64(fgb_module *m, LLVMValueRef v, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMBuilderRef b = fgb_builder(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(fgb_ctx(m));
  *lo = LLVMBuildTrunc(b, v, i32, "");
  *hi = LLVMBuildTrunc(b, LLVMBuildLShr(b, v, LLVMConstInt(LLVMTypeOf(v), 32, 0), ""), i32, "");
}

/* The 64-bit product of two 32-bit words, as its halves: mul.lo.u32 and
 * the mulhi intrinsic (mul.hi.u32), so that the words stay 32-bit. Written
 * as an i64 product of zero-extended words, LLVM folds the round's xors
 * and truncations into i64 operations, and the next round's product is
 * no longer of zero-extended words: NVPTX then selects 64-bit multiplies
 * (mul.lo.s64) and 64-bit xors and shifts, about twice the instructions. */
static void mulhilo(fgb_module *m, uint32_t k, LLVMValueRef c, LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMBuilderRef b = fgb_builder(m);
  LLVMValueRef a[2] = {c, u32c(m, k)};
  *lo = LLVMBuildMul(b, c, a[1], "");
  *hi = fgb_call(m, "llvm.nvvm.mulhi.ui", LLVMInt32TypeInContext(fgb_ctx(m)), 2, a);
}

/* Philox-4x32-10 (ir/random.c's fg_philox4x32_10). */
static void philox(fgb_module *m, LLVMValueRef c[4], LLVMValueRef k0, LLVMValueRef k1) {
  LLVMBuilderRef b = fgb_builder(m);
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 = LLVMBuildAdd(b, k0, u32c(m, FG_PHILOX_W0), "");
      k1 = LLVMBuildAdd(b, k1, u32c(m, FG_PHILOX_W1), "");
    }
    LLVMValueRef lo0, hi0, lo1, hi1;
    mulhilo(m, FG_PHILOX_M0, c[0], &lo0, &hi0);
    mulhilo(m, FG_PHILOX_M1, c[2], &lo1, &hi1);
    LLVMValueRef n0 = LLVMBuildXor(b, LLVMBuildXor(b, hi1, c[1], ""), k0, "");
    LLVMValueRef n2 = LLVMBuildXor(b, LLVMBuildXor(b, hi0, c[3], ""), k1, "");
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
  }
}

/* The value's linear index at idx, as an i64 (strides never involve the
 * leading dim, so a symbolic leading size does not enter). */
static LLVMValueRef linear_index(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  fg_type t = v->type;
  t.has_layout = false;
  int64_t st[FG_MAX_RANK];
  fg_type_strides(&t, st);
  LLVMValueRef lin = fgb_const(e, 0);
  for (int d = 0; d < t.rank; d++) {
    if (!t.dims[d].sym && t.dims[d].size == 1)
      continue;
    LLVMValueRef x = st[d] == 1 ? idx[d] : LLVMBuildMul(e->b, idx[d], fgb_const(e, st[d]), "");
    lin = LLVMBuildAdd(e->b, lin, x, "");
  }
  LLVMTypeRef i64 = LLVMInt64TypeInContext(e->ctx);
  return LLVMTypeOf(lin) == i64 ? lin : LLVMBuildZExt(e->b, lin, i64, "");
}

static LLVMValueRef pick(fgb_module *m, LLVMValueRef j, LLVMValueRef *w, int n) {
  LLVMBuilderRef b = fgb_builder(m);
  LLVMValueRef r = w[n - 1];
  for (int i = n - 2; i >= 0; i--) {
    LLVMValueRef is = LLVMBuildICmp(b, LLVMIntEQ, j, LLVMConstInt(LLVMTypeOf(j), i, 0), "");
    r = LLVMBuildSelect(b, is, w[i], r, "");
  }
  return r;
}

/* (w >> (32 - bits)) * 2^-bits in f32 or f64: exact in dt. `plus` adds 1
 * before scaling (randn's u1, in (0, 1]). */
static LLVMValueRef uniform(fgb_module *m, LLVMValueRef w, int bits, bool f64, bool plus) {
  LLVMBuilderRef b = fgb_builder(m);
  LLVMContextRef ctx = fgb_ctx(m);
  LLVMTypeRef ft = f64 ? LLVMDoubleTypeInContext(ctx) : LLVMFloatTypeInContext(ctx);
  LLVMValueRef x = bits == 32 ? w : LLVMBuildLShr(b, w, u32c(m, (uint32_t)(32 - bits)), "");
  if (plus) {
    LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
    x = LLVMBuildAdd(b, LLVMBuildZExt(b, x, i64, ""), LLVMConstInt(i64, 1, 0), "");
  }
  LLVMValueRef f = LLVMBuildUIToFP(b, x, ft, "");
  return LLVMBuildFMul(b, f, LLVMConstReal(ft, 1.0 / (double)(1ull << bits)), "");
}

LLVMValueRef fgb_random_element(fgb_module *m, fg_opcode op, fg_dtype dt, LLVMValueRef seed,
                                LLVMValueRef offset, LLVMValueRef lin) {
  LLVMBuilderRef b = fgb_builder(m);
  LLVMContextRef ctx = fgb_ctx(m);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
  LLVMValueRef blk = LLVMBuildLShr(b, lin, LLVMConstInt(i64, 2, 0), "");
  LLVMValueRef j = LLVMBuildAnd(b, lin, LLVMConstInt(i64, 3, 0), "");
  LLVMValueRef c[4], k0, k1;
  split64(m, blk, &c[0], &c[1]);
  split64(m, offset, &c[2], &c[3]);
  split64(m, seed, &k0, &k1);
  philox(m, c, k0, k1);
  bool f64 = dt == FG_F64;
  fg_dtype cdt = f64 ? FG_F64 : FG_F32;
  if (op == FG_OP_RAND)
    return fgb_convert(m, uniform(m, pick(m, j, c, 4), fg_random_uniform_bits(dt), f64, false), cdt,
                       dt);
  /* randn: Box-Muller on the words (2p, 2p+1), p = j / 2; cos for even j,
   * sin for odd j. */
  LLVMValueRef p = LLVMBuildLShr(b, j, LLVMConstInt(i64, 1, 0), "");
  LLVMValueRef wa[2] = {c[0], c[2]}, wb[2] = {c[1], c[3]};
  int bits = f64 ? 32 : 24;
  LLVMValueRef u1 = uniform(m, pick(m, p, wa, 2), bits, f64, true);
  LLVMValueRef u2 = uniform(m, pick(m, p, wb, 2), bits, f64, false);
  LLVMTypeRef ft = LLVMTypeOf(u1);
  LLVMValueRef lg = fgb_emit_op(m, FG_OP_LOG, cdt, NULL, &u1);
  LLVMValueRef m2 = LLVMBuildFMul(b, lg, LLVMConstReal(ft, -2.0), "");
  LLVMValueRef r = fgb_emit_op(m, FG_OP_SQRT, cdt, NULL, &m2);
  /* 2*pi rounded to the compute dtype, as ir/random.c takes it */
  LLVMValueRef t =
      LLVMBuildFMul(b, u2, LLVMConstReal(ft, f64 ? 6.283185307179586 : (double)6.28318548f), "");
  LLVMValueRef cs = fgb_emit_op(m, FG_OP_COS, cdt, NULL, &t);
  LLVMValueRef sn = fgb_emit_op(m, FG_OP_SIN, cdt, NULL, &t);
  LLVMValueRef odd = LLVMBuildTrunc(b, j, LLVMInt1TypeInContext(ctx), "");
  LLVMValueRef z = LLVMBuildFMul(b, r, LLVMBuildSelect(b, odd, sn, cs, ""), "");
  return fgb_convert(m, z, cdt, dt);
}

LLVMValueRef fgb_emit_random(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx) {
  const fg_node *n = v->def;
  LLVMValueRef seed = stream_word(e, n->in[0]), offset = stream_word(e, n->in[1]);
  if (!seed || !offset)
    return NULL;
  return fgb_random_element(e->m, n->op->code, v->type.dtype, seed, offset,
                            linear_index(e, v, idx));
}
