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

#include "fgb_internal.h"
#include "lower_value.h"

typedef struct { int ebits, mbits, bias, ieee_inf; unsigned maxcode; } f8fmt;

static f8fmt fmt_of(fg_dtype dt) {
  if (dt == FG_F8E4M3) return (f8fmt){4, 3, 7, 0, 0x7e};
  return (f8fmt){5, 2, 15, 1, 0x7b};
}

static LLVMValueRef c32(fgb_module *m, long long v) {
  return LLVMConstInt(m->i32, (unsigned long long)v, 1);
}

LLVMValueRef fgb_f8_encode(fgb_module *m, LLVMValueRef x, fg_dtype dt) {
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

LLVMValueRef fgb_f8_decode(fgb_module *m, LLVMValueRef bits, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  f8fmt f = fmt_of(dt);
  LLVMValueRef v = LLVMBuildZExt(b, bits, m->i32, "");
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildLShr(b, v, c32(m, 7), ""), c32(m, 31), "");
  unsigned eall = (1u << f.ebits) - 1, mall = (1u << f.mbits) - 1;
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, v, c32(m, f.mbits), ""), c32(m, eall), "");
  LLVMValueRef mm = LLVMBuildAnd(b, v, c32(m, mall), "");
  /* normal: rebias the exponent, widen the mantissa */
  LLVMValueRef nb = LLVMBuildOr(
      b, LLVMBuildShl(b, LLVMBuildAdd(b, e, c32(m, 127 - f.bias), ""), c32(m, 23), ""),
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
    LLVMValueRef special = LLVMBuildAnd(b, top, LLVMBuildICmp(b, LLVMIntEQ, mm, c32(m, mall), ""), "");
    mag = LLVMBuildSelect(b, special, c32(m, 0x7fc00000), mag, "");
  }
  return LLVMBuildBitCast(b, LLVMBuildOr(b, mag, sign, ""), m->f32, "");
}
