/* f8e4m3 (fn) and f8e5m2 codecs in integer arithmetic: bit-exact with
 * ir/dtype.c's small_encode / small_decode for every f32 input (the unit
 * test test_backend_f8.c proves the algorithm, written in C, against
 * dtype.c over all 2^32 f32 patterns and all 256 codes).
 *
 * encode(x), x an f32 with bits u, M mantissa bits, bias B, emin = 1 - B:
 *   a = u & 0x7fffffff; sign = (u >> 24) & 0x80
 *   NaN:  e4m3 sign|0x7f, e5m2 0x7e (dtype.c drops the sign)
 *   e = (a >> 23) - 127, s = (a & 0x7fffff) | 0x800000
 *   ex = max(e, emin); shift = min(23 - M + (ex - e), 25)
 *   n = round_half_even(s / 2^shift)     (f32 subnormals and zeros give 0)
 *   code = ((ex + B - 1) << M) + n        (a carry into the next binade and
 *                                          the subnormal/normal boundary
 *                                          fall out of the addition)
 *   code > max code (e4m3 0x7e = 448, e5m2 0x7b = 57344): e4m3 -> sign|0x7f
 *   (NaN), e5m2 -> sign|0x7c (inf); infinities take the same path.
 * decode(b): the usual fields; e == 0 scales the mantissa by 2^(emin - M). */
#include <math.h>
#include <string.h>

#include "fgb_internal.h"
#include "lower_value.h"

typedef struct {
  int ebits, mbits, bias, ieee_inf;
  unsigned maxcode;
} f8fmt;

static f8fmt fmt_of(fg_dtype dt) {
  if (dt == FG_F8E4M3)
    return (f8fmt){4, 3, 7, 0, 0x7e};
  return (f8fmt){5, 2, 15, 1, 0x7b};
}

static LLVMValueRef c32(fgb_module *m, long long v) {
  return LLVMConstInt(m->i32, (unsigned long long)v, 1);
}

LLVMValueRef fgb_f8_encode_int(fgb_module *m, LLVMValueRef x, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  f8fmt f = fmt_of(dt);
  int emin = 1 - f.bias;
  LLVMValueRef u = LLVMBuildBitCast(b, x, m->i32, "");
  LLVMValueRef a = LLVMBuildAnd(b, u, c32(m, 0x7fffffff), "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(m, 24), ""), c32(m, 0x80), "");
  LLVMValueRef e = LLVMBuildSub(b, LLVMBuildLShr(b, a, c32(m, 23), ""), c32(m, 127), "");
  LLVMValueRef s = LLVMBuildOr(b, LLVMBuildAnd(b, a, c32(m, 0x7fffff), ""), c32(m, 0x800000), "");
  LLVMValueRef args[2] = {e, c32(m, emin)};
  LLVMValueRef ex = fgb_call(m, "llvm.smax.i32", m->i32, 2, args);
  LLVMValueRef shift = LLVMBuildAdd(b, LLVMBuildSub(b, ex, e, ""), c32(m, 23 - f.mbits), "");
  LLVMValueRef a2[2] = {shift, c32(m, 25)};
  shift = fgb_call(m, "llvm.umin.i32", m->i32, 2, a2);
  LLVMValueRef n = LLVMBuildLShr(b, s, shift, "");
  LLVMValueRef one = c32(m, 1);
  LLVMValueRef mask = LLVMBuildSub(b, LLVMBuildShl(b, one, shift, ""), one, "");
  LLVMValueRef rem = LLVMBuildAnd(b, s, mask, "");
  LLVMValueRef half = LLVMBuildShl(b, one, LLVMBuildSub(b, shift, one, ""), "");
  LLVMValueRef gt = LLVMBuildICmp(b, LLVMIntUGT, rem, half, "");
  LLVMValueRef tie = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, rem, half, ""),
                                  LLVMBuildTrunc(b, n, m->i1, ""), "");
  LLVMValueRef up = LLVMBuildZExt(b, LLVMBuildOr(b, gt, tie, ""), m->i32, "");
  n = LLVMBuildAdd(b, n, up, "");
  LLVMValueRef code = LLVMBuildAdd(
      b, LLVMBuildShl(b, LLVMBuildAdd(b, ex, c32(m, f.bias - 1), ""), c32(m, f.mbits), ""), n, "");
  LLVMValueRef over = LLVMBuildICmp(b, LLVMIntSGT, code, c32(m, f.maxcode), "");
  LLVMValueRef ovf = c32(m, f.ieee_inf ? 0x7c : 0x7f);
  code = LLVMBuildOr(b, LLVMBuildSelect(b, over, ovf, code, ""), sign, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, a, c32(m, 0x7f800000), "");
  LLVMValueRef nan = f.ieee_inf ? c32(m, 0x7e) : LLVMBuildOr(b, sign, c32(m, 0x7f), "");
  code = LLVMBuildSelect(b, isnan, nan, code, "");
  return LLVMBuildTrunc(b, code, m->i8, "");
}

LLVMValueRef fgb_f8_decode_int(fgb_module *m, LLVMValueRef bits, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  f8fmt f = fmt_of(dt);
  LLVMValueRef v = LLVMBuildZExt(b, bits, m->i32, "");
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildLShr(b, v, c32(m, 7), ""), c32(m, 31), "");
  unsigned eall = (1u << f.ebits) - 1, mall = (1u << f.mbits) - 1;
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, v, c32(m, f.mbits), ""), c32(m, eall), "");
  LLVMValueRef mm = LLVMBuildAnd(b, v, c32(m, mall), "");
  /* normal: rebias the exponent, widen the mantissa */
  LLVMValueRef nb =
      LLVMBuildOr(b, LLVMBuildShl(b, LLVMBuildAdd(b, e, c32(m, 127 - f.bias), ""), c32(m, 23), ""),
                  LLVMBuildShl(b, mm, c32(m, 23 - f.mbits), ""), "");
  /* subnormal: mm * 2^(emin - M), exact in f32 */
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, mm, m->f32, ""),
                                   LLVMConstReal(m->f32, ldexp(1.0, 1 - f.bias - f.mbits)), "");
  LLVMValueRef mag = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, c32(m, 0), ""),
                                     LLVMBuildBitCast(b, sub, m->i32, ""), nb, "");
  LLVMValueRef top = LLVMBuildICmp(b, LLVMIntEQ, e, c32(m, eall), "");
  if (f.ieee_inf) {
    /* inf 0x7f800000, NaN 0x7fc00000 */
    LLVMValueRef inf_or_nan = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, mm, c32(m, 0), ""),
                                              c32(m, 0x7f800000), c32(m, 0x7fc00000), "");
    mag = LLVMBuildSelect(b, top, inf_or_nan, mag, "");
  } else {
    LLVMValueRef special =
        LLVMBuildAnd(b, top, LLVMBuildICmp(b, LLVMIntEQ, mm, c32(m, mall), ""), "");
    mag = LLVMBuildSelect(b, special, c32(m, 0x7fc00000), mag, "");
  }
  return LLVMBuildBitCast(b, LLVMBuildOr(b, mag, sign, ""), m->f32, "");
}

/* ---- sm_89+: the hardware conversions (PTX cvt ... e4m3x2 / e5m2x2) ----
 * cvt.rn.satfinite rounds to nearest even like small_encode but saturates
 * out-of-range values to the largest finite code, where the interpreter (as
 * PyTorch) gives NaN for e4m3 and inf for e5m2: a select restores that for
 * |x| past the rounding boundary (e4m3: > 464; e5m2: >= 61440, the tie that
 * rounds up to 2^16), and NaN inputs get dtype.c's NaN codes. Decoding to
 * f16 is exact for both formats. */

static LLVMValueRef asm_call(fgb_module *m, LLVMTypeRef ret, LLVMTypeRef arg, const char *text,
                             const char *cons, LLVMValueRef v) {
  LLVMTypeRef fty = LLVMFunctionType(ret, &arg, 1, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 0,
                                     0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(m->b, fty, fn, &v, 1, "");
}

LLVMValueRef fgb_f8_encode(fgb_module *m, LLVMValueRef x, fg_dtype dt) {
  if (m->sm < 89)
    return fgb_f8_encode_int(m, x, dt);
  LLVMBuilderRef b = m->b;
  bool e4 = dt == FG_F8E4M3;
  const char *text =
      e4 ? "{ .reg .b16 t; cvt.rn.satfinite.e4m3x2.f32 t, $1, $1; cvt.u32.u16 $0, t; }"
         : "{ .reg .b16 t; cvt.rn.satfinite.e5m2x2.f32 t, $1, $1; cvt.u32.u16 $0, t; }";
  LLVMValueRef code =
      LLVMBuildAnd(b, asm_call(m, m->i32, m->f32, text, "=r,f", x), c32(m, 0xff), "");
  LLVMValueRef u = LLVMBuildBitCast(b, x, m->i32, "");
  LLVMValueRef a = LLVMBuildAnd(b, u, c32(m, 0x7fffffff), "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(m, 24), ""), c32(m, 0x80), "");
  /* 464 = 0x43e80000, 61440 = 0x47700000 */
  LLVMValueRef over = e4 ? LLVMBuildICmp(b, LLVMIntUGT, a, c32(m, 0x43e80000), "")
                         : LLVMBuildICmp(b, LLVMIntUGE, a, c32(m, 0x47700000), "");
  code = LLVMBuildSelect(b, over, LLVMBuildOr(b, sign, c32(m, e4 ? 0x7f : 0x7c), ""), code, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, a, c32(m, 0x7f800000), "");
  LLVMValueRef nan = e4 ? LLVMBuildOr(b, sign, c32(m, 0x7f), "") : c32(m, 0x7e);
  code = LLVMBuildSelect(b, isnan, nan, code, "");
  return LLVMBuildTrunc(b, code, m->i8, "");
}

LLVMValueRef fgb_f8_decode(fgb_module *m, LLVMValueRef bits, fg_dtype dt) {
  if (m->sm < 89)
    return fgb_f8_decode_int(m, bits, dt);
  const char *text = dt == FG_F8E4M3 ? "{ .reg .b32 h; .reg .b16 lo, hi; cvt.rn.f16x2.e4m3x2 h, "
                                       "$1; mov.b32 {lo, hi}, h; cvt.f32.f16 $0, lo; }"
                                     : "{ .reg .b32 h; .reg .b16 lo, hi; cvt.rn.f16x2.e5m2x2 h, "
                                       "$1; mov.b32 {lo, hi}, h; cvt.f32.f16 $0, lo; }";
  LLVMValueRef w = LLVMBuildZExt(m->b, bits, m->i16, "");
  return asm_call(m, m->f32, m->i16, text, "=f,h", w);
}

/* ---- MX formats: f8e8m0 and f4e2m1, in integer arithmetic ----
 * Bit-exact with ir/dtype.c's fg_f32_to_f8e8m0 / fg_f32_to_f4e2m1 and
 * their decoders (tests/unit/test_backend_f8.c runs these over every f32
 * pattern class and every code). An f4e2m1 code lives in the low 4 bits of
 * an i8; packing two a byte is the loads' and stores' business. */

LLVMValueRef fgb_e8m0_encode(fgb_module *m, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef u = LLVMBuildBitCast(b, x, m->i32, "");
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(m, 23), ""), c32(m, 0xff), "");
  LLVMValueRef guard =
      LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, u, c32(m, 0x400000), ""), c32(m, 0), "");
  LLVMValueRef rest =
      LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, u, c32(m, 0x3fffff), ""), c32(m, 0), "");
  LLVMValueRef lsb = LLVMBuildICmp(b, LLVMIntNE, e, c32(m, 0), "");
  LLVMValueRef up = LLVMBuildAnd(b, guard, LLVMBuildOr(b, rest, lsb, ""), "");
  LLVMValueRef code = LLVMBuildAdd(b, e, LLVMBuildZExt(b, up, m->i32, ""), "");
  LLVMValueRef special = LLVMBuildICmp(b, LLVMIntEQ, e, c32(m, 0xff), "");
  code = LLVMBuildSelect(b, special, c32(m, 0xff), code, "");
  return LLVMBuildTrunc(b, code, m->i8, "");
}

LLVMValueRef fgb_e8m0_decode(fgb_module *m, LLVMValueRef bits) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef v = LLVMBuildZExt(b, bits, m->i32, "");
  LLVMValueRef r = LLVMBuildShl(b, v, c32(m, 23), "");
  r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, v, c32(m, 0), ""), c32(m, 0x400000), r, "");
  r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, v, c32(m, 0xff), ""), c32(m, 0x7fc00000), r,
                      "");
  return LLVMBuildBitCast(b, r, m->f32, "");
}

/* The code of |x| is the number of rounding boundaries it passes: a tie
 * (the midpoint of two neighbours) passes when the upper code is even. */
LLVMValueRef fgb_f4_encode(fgb_module *m, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  static const struct {
    float mid;
    bool tie_up;
  } bounds[7] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 0}, {1.75f, 1}, {2.5f, 0}, {3.5f, 1}, {5.0f, 0}};
  LLVMValueRef a = fgb_call(m, "llvm.fabs.f32", m->f32, 1, &x);
  LLVMValueRef code = c32(m, 0);
  for (int i = 0; i < 7; i++) {
    LLVMValueRef past = LLVMBuildFCmp(b, bounds[i].tie_up ? LLVMRealOGE : LLVMRealOGT, a,
                                      LLVMConstReal(m->f32, bounds[i].mid), "");
    code = LLVMBuildAdd(b, code, LLVMBuildZExt(b, past, m->i32, ""), "");
  }
  LLVMValueRef u = LLVMBuildBitCast(b, x, m->i32, "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, c32(m, 28), ""), c32(m, 0x8), "");
  code = LLVMBuildOr(b, code, sign, "");
  LLVMValueRef isnan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  code = LLVMBuildSelect(b, isnan, c32(m, 0x7), code, "");
  return LLVMBuildTrunc(b, code, m->i8, "");
}

/* Twice the magnitudes {0 1 2 3 4 6 8 12}, a nibble each, indexed by code. */
LLVMValueRef fgb_f4_decode(fgb_module *m, LLVMValueRef bits) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef v = LLVMBuildZExt(b, bits, m->i32, "");
  LLVMValueRef sh = LLVMBuildShl(b, LLVMBuildAnd(b, v, c32(m, 7), ""), c32(m, 2), "");
  LLVMValueRef twice =
      LLVMBuildAnd(b, LLVMBuildLShr(b, c32(m, (long long)0xC8643210u), sh, ""), c32(m, 0xf), "");
  LLVMValueRef mag =
      LLVMBuildFMul(b, LLVMBuildUIToFP(b, twice, m->f32, ""), LLVMConstReal(m->f32, 0.5), "");
  LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, v, c32(m, 8), ""), c32(m, 0), "");
  return LLVMBuildSelect(b, neg, LLVMBuildFNeg(b, mag, ""), mag, "");
}
