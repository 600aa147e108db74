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
 * `cvt.rn.satfinite.e4m3x2.f32 d, a, b` converts two f32 values at once
 * (b to the low byte of d, a to the high byte), rounding to nearest even
 * like small_encode, but it saturates: a finite value past the largest
 * finite code, and +-inf, become +-max (0x7e / 0x7b with the sign), and a
 * NaN becomes some NaN code, where the interpreter (as PyTorch) gives
 * e4m3 sign|0x7f and e5m2 sign|0x7c (inf) past the rounding boundary
 * (e4m3 |x| > 464; e5m2 |x| >= 61440, the tie that rounds up to 2^16) and
 * NaN codes e4m3 sign|0x7f, e5m2 0x7e (sign dropped). The fix-ups, so that
 * every f32 gives small_encode's code (tests/unit/test_backend_f8.c checks
 * them on a model of the instruction over every f32 pattern):
 *   e4m3: an x past 464 goes in as NaN (its code: 0x7f, e4m3's only NaN
 *         magnitude), and every code takes its sign bit from x;
 *   e5m2: a code whose x is at least 61440 gets 1 added (0x7b -> 0x7c),
 *         and a NaN's byte becomes 0x7e.
 * The range test is left out where the value is known to be inside it
 * (f32_bounds), and a clamp to +-448 (+-57344) before the cast, the usual
 * fp8 recipe, is left to the instruction's saturation
 * (saturating_clamp_of), so that a pair of clamped lanes costs the cvt, a
 * prmt and an and/or. */

static LLVMValueRef asm_call(fgb_module *m, LLVMTypeRef ret, LLVMTypeRef *args, unsigned n,
                             const char *text, const char *cons, LLVMValueRef *vals) {
  LLVMTypeRef fty = LLVMFunctionType(ret, args, n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 0,
                                     0, LLVMInlineAsmDialectATT, 0);
  LLVMValueRef call = LLVMBuildCall2(m->b, fty, fn, vals, n, "");
  /* a pure function of its operands: dead when unused (a cast whose value
   * only the paired store takes), merged with its twin */
  static const char *attrs[] = {"nounwind", "willreturn", "memory"};
  for (int i = 0; i < 3; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(attrs[i], strlen(attrs[i]));
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateEnumAttribute(m->ctx, kind, 0)); /* memory(none) */
  }
  return call;
}

/* Bounds [lo, hi] of the values other than NaN that f32 value v can take,
 * read off the IR that computes it: constants, selects (a clamp is
 * `x < K ? K : x` and `x > K ? K : x`, fmaxmin's compare-and-select the
 * same with the arms swapped), fabs; anything else is unbounded. */
static void f32_bounds(LLVMValueRef v, int depth, double *lo, double *hi) {
  *lo = -INFINITY, *hi = INFINITY;
  if (depth > 8)
    return;
  if (LLVMIsAConstantFP(v)) {
    LLVMBool loses;
    double c = LLVMConstRealGetDouble(v, &loses);
    if (isnan(c)) /* no value but NaN: the empty range */
      *lo = INFINITY, *hi = -INFINITY;
    else
      *lo = *hi = c;
    return;
  }
  if (LLVMIsACallInst(v)) {
    LLVMValueRef callee = LLVMGetCalledValue(v);
    size_t len;
    const char *name = callee && LLVMIsAFunction(callee) ? LLVMGetValueName2(callee, &len) : "";
    if (strcmp(name, "llvm.fabs.f32") == 0) {
      double a, b;
      f32_bounds(LLVMGetOperand(v, 0), depth + 1, &a, &b);
      if (a > b) { /* empty */
        *lo = a, *hi = b;
        return;
      }
      *lo = a > 0 ? a : b < 0 ? -b : 0;
      *hi = fmax(fabs(a), fabs(b));
    }
    return;
  }
  if (!LLVMIsASelectInst(v))
    return;
  LLVMValueRef c = LLVMGetOperand(v, 0), t = LLVMGetOperand(v, 1), f = LLVMGetOperand(v, 2);
  double tl, th, fl, fh;
  f32_bounds(t, depth + 1, &tl, &th);
  f32_bounds(f, depth + 1, &fl, &fh);
  *lo = fmin(tl, fl), *hi = fmax(th, fh); /* either arm */
  if (!LLVMIsAFCmpInst(c))
    return;
  LLVMRealPredicate p = LLVMGetFCmpPredicate(c);
  bool less = p == LLVMRealOLT || p == LLVMRealOLE || p == LLVMRealULT || p == LLVMRealULE;
  bool greater = p == LLVMRealOGT || p == LLVMRealOGE || p == LLVMRealUGT || p == LLVMRealUGE;
  LLVMValueRef x = LLVMGetOperand(c, 0), k = LLVMGetOperand(c, 1);
  if (!LLVMIsAConstantFP(k) || !(less || greater))
    return;
  /* the value that is not x is K; the compare of a non-NaN x decides */
  double xl, xh, kv = tl; /* t or f is k, a constant: its bound is its value */
  bool max;               /* the select is max(x, K) (else min(x, K)) on non-NaN x */
  if (f == x && t == k) { /* x < K ? K : x */
    max = less;
  } else if (t == x && f == k) { /* x < K ? x : K */
    max = greater, kv = fl;
  } else {
    return;
  }
  f32_bounds(x, depth + 1, &xl, &xh);
  if (xl > xh) { /* x is NaN: the select gives NaN or K */
    *lo = *hi = kv;
    return;
  }
  *lo = max ? fmax(xl, kv) : fmin(xl, kv);
  *hi = max ? fmax(xh, kv) : fmin(xh, kv);
}

/* y where v is clamp(y, L, H) (lower_pointwise.c clamp_f: `y < L ? L : y`,
 * then `. > H ? H : .`) with H from the largest finite value (e4m3 448,
 * e5m2 57344) up to the rounding boundary (464, 61440 excluded) and L the
 * same negated: the hardware's saturation is that clamp (a y past H gives
 * max, as H does; NaN passes both), so the cvt takes y and the clamp's
 * compares and selects go (the usual fp8 recipe, clamp(v, min=-448.0,
 * max=448.0) before the cast). v otherwise. */
static LLVMValueRef saturating_clamp_of(LLVMValueRef v, fg_dtype dt) {
  double maxv = dt == FG_F8E4M3 ? 448.0 : 57344.0, edge = dt == FG_F8E4M3 ? 464.0 : 61440.0;
  LLVMValueRef y = v;
  for (int side = 0; side < 2; side++) { /* the upper select, then the lower */
    if (!LLVMIsASelectInst(y))
      return v;
    LLVMValueRef c = LLVMGetOperand(y, 0), k = LLVMGetOperand(y, 1), x = LLVMGetOperand(y, 2);
    if (!LLVMIsAFCmpInst(c) || !LLVMIsAConstantFP(k) || LLVMGetOperand(c, 0) != x ||
        LLVMGetOperand(c, 1) != k ||
        LLVMGetFCmpPredicate(c) != (side == 0 ? LLVMRealOGT : LLVMRealOLT))
      return v;
    LLVMBool loses;
    double kv = LLVMConstRealGetDouble(k, &loses) * (side == 0 ? 1 : -1);
    if (!(kv >= maxv && (dt == FG_F8E4M3 ? kv <= edge : kv < edge)))
      return v;
    y = x;
  }
  return y;
}

/* The sources of n (1 or 2) f32 values: the f32 that fgb_round_narrow
 * rounded to a value, that value itself otherwise (encoding a decoded code
 * gives the code back). */
static LLVMValueRef f8_source(fgb_module *m, LLVMValueRef v, fg_dtype dt) {
  for (unsigned i = 0; i < 64 && i < m->nf8_codes; i++)
    if (m->f8_codes[i].decoded == v && m->f8_codes[i].dt == dt)
      return m->f8_codes[i].src;
  return v;
}

/* Codes of x[0] (low byte) and x[n - 1] (high byte) as an i16, n 1 or 2. */
static LLVMValueRef hw_encode(fgb_module *m, LLVMValueRef *x, int n, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  bool e4 = dt == FG_F8E4M3;
  LLVMValueRef in[2], u[2];
  bool bounded[2];
  LLVMValueRef xs[2];
  for (int i = 0; i < n; i++) {
    double lo, hi;
    xs[i] = saturating_clamp_of(x[i], dt);
    bool sat = xs[i] != x[i];
    f32_bounds(xs[i], 0, &lo, &hi);
    bounded[i] = sat || (e4 ? lo >= -464.0 && hi <= 464.0 : lo > -61440.0 && hi < 61440.0);
  }
  x = xs;
  for (int i = 0; i < n; i++) {
    in[i] = x[i];
    u[i] = LLVMBuildBitCast(b, x[i], m->i32, "");
    if (e4 && !bounded[i]) {
      LLVMValueRef past =
          LLVMBuildFCmp(b, LLVMRealUGT, fgb_call(m, "llvm.fabs.f32", m->f32, 1, &x[i]),
                        LLVMConstReal(m->f32, 464.0), "");
      in[i] = LLVMBuildSelect(b, past, LLVMConstReal(m->f32, NAN), x[i], "");
    }
  }
  LLVMTypeRef args[2] = {m->f32, m->f32};
  LLVMValueRef ops[2] = {in[n - 1], in[0]};
  LLVMValueRef h = asm_call(m, m->i16, args, 2,
                            e4 ? "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;"
                               : "cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;",
                            "=h,f,f", ops);
  if (e4) {
    /* the sign bytes of the two f32 (byte 3 of each) side by side */
    LLVMValueRef sel[3] = {u[0], u[n - 1], LLVMConstInt(m->i32, 0x73, 0)};
    LLVMValueRef signs =
        LLVMBuildTrunc(b, fgb_call(m, "llvm.nvvm.prmt", m->i32, 3, sel), m->i16, "");
    return LLVMBuildOr(b, LLVMBuildAnd(b, h, LLVMConstInt(m->i16, 0x7f7f, 0), ""),
                       LLVMBuildAnd(b, signs, LLVMConstInt(m->i16, 0x8080, 0), ""), "");
  }
  for (int i = 0; i < n; i++) {
    unsigned sh = 8u * (unsigned)i;
    if (!bounded[i]) {
      LLVMValueRef past =
          LLVMBuildFCmp(b, LLVMRealOGE, fgb_call(m, "llvm.fabs.f32", m->f32, 1, &x[i]),
                        LLVMConstReal(m->f32, 61440.0), "");
      h = LLVMBuildAdd(
          b, h,
          LLVMBuildShl(b, LLVMBuildZExt(b, past, m->i16, ""), LLVMConstInt(m->i16, sh, 0), ""), "");
    }
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x[i], x[i], "");
    LLVMValueRef fixed =
        LLVMBuildOr(b, LLVMBuildAnd(b, h, LLVMConstInt(m->i16, ~(0xffu << sh) & 0xffffu, 0), ""),
                    LLVMConstInt(m->i16, 0x7eu << sh, 0), "");
    h = LLVMBuildSelect(b, nan, fixed, h, "");
  }
  return h;
}

LLVMValueRef fgb_f8_encode(fgb_module *m, LLVMValueRef x, fg_dtype dt) {
  if (!m->f8_cvt)
    return fgb_f8_encode_int(m, x, dt);
  return LLVMBuildTrunc(m->b, hw_encode(m, &x, 1, dt), m->i8, "");
}

bool fgb_has_f8_cvt(const fgb_module *m) { return m->f8_cvt; }

LLVMValueRef fgb_f8_encode2(fgb_module *m, LLVMValueRef lo, LLVMValueRef hi, fg_dtype dt) {
  LLVMValueRef x[2] = {f8_source(m, lo, dt), f8_source(m, hi, dt)};
  if (m->f8_cvt)
    return hw_encode(m, x, 2, dt);
  LLVMBuilderRef b = m->b;
  LLVMValueRef l = LLVMBuildZExt(b, fgb_to_storage(m, lo, dt), m->i16, "");
  LLVMValueRef h = LLVMBuildZExt(b, fgb_to_storage(m, hi, dt), m->i16, "");
  return LLVMBuildOr(b, l, LLVMBuildShl(b, h, LLVMConstInt(m->i16, 8, 0), ""), "");
}

LLVMValueRef fgb_f8_decode(fgb_module *m, LLVMValueRef bits, fg_dtype dt) {
  if (!m->f8_cvt)
    return fgb_f8_decode_int(m, bits, dt);
  const char *text = dt == FG_F8E4M3 ? "{ .reg .b32 h; .reg .b16 lo, hi; cvt.rn.f16x2.e4m3x2 h, "
                                       "$1; mov.b32 {lo, hi}, h; cvt.f32.f16 $0, lo; }"
                                     : "{ .reg .b32 h; .reg .b16 lo, hi; cvt.rn.f16x2.e5m2x2 h, "
                                       "$1; mov.b32 {lo, hi}, h; cvt.f32.f16 $0, lo; }";
  LLVMValueRef w = LLVMBuildZExt(m->b, bits, m->i16, "");
  return asm_call(m, m->f32, &m->i16, 1, text, "=f,h", &w);
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
  r = LLVMBuildBitCast(b, r, m->f32, "");
  fgb_e8m0_note(m, r, bits);
  return r;
}

void fgb_e8m0_note(fgb_module *m, LLVMValueRef value, LLVMValueRef code) {
  unsigned i = m->ne8m0++ % 16;
  m->e8m0[i].value = value;
  m->e8m0[i].code = code;
}

LLVMValueRef fgb_e8m0_code_of(fgb_module *m, LLVMValueRef value) {
  for (unsigned i = 0; i < 16 && i < m->ne8m0; i++)
    if (m->e8m0[i].value == value)
      return m->e8m0[i].code;
  return NULL;
}

/* 1 / 2^(c - 127) = 2^(127 - c): the exponent field 254 - c, for c = 254
 * the subnormal 2^-127 (0x00400000); NaN for c = 255. Every one is an f32,
 * so x * (1 / s) rounds the same real number as x / s. */
LLVMValueRef fgb_e8m0_recip(fgb_module *m, LLVMValueRef code) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef c = LLVMBuildZExt(b, code, m->i32, "");
  LLVMValueRef r = LLVMBuildShl(b, LLVMBuildSub(b, c32(m, 254), c, ""), c32(m, 23), "");
  r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, c, c32(m, 254), ""), c32(m, 0x400000), r, "");
  r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, c, c32(m, 255), ""), c32(m, 0x7fc00000), r,
                      "");
  return LLVMBuildBitCast(b, r, m->f32, "");
}

/* |x| clamped to 6, the largest magnitude (NaN is code 7, selected last).
 * Below 1 the codes 0, 1, 2 step by 0.5: adding 2^22, whose ulp is 0.5,
 * leaves 2|x| rounded to even in the sum's low bits. From 1 up a code is
 * an exponent and one mantissa bit: the f32 bits rounded to even at bit 22
 * and shifted down, less 1.0's (254), plus 1.0's code (2). About half the
 * instructions of counting the seven rounding boundaries, which made the
 * NVFP4 quantization compute-bound (run U1, docs/benchmarks.md). */
LLVMValueRef fgb_f4_encode(fgb_module *m, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef a = fgb_call(m, "llvm.fabs.f32", m->f32, 1, &x);
  LLVMValueRef mm[2] = {a, LLVMConstReal(m->f32, 6.0)};
  a = fgb_call(m, "llvm.minnum.f32", m->f32, 2, mm);
  LLVMValueRef low =
      LLVMBuildBitCast(b, LLVMBuildFAdd(b, a, LLVMConstReal(m->f32, 4194304.0), ""), m->i32, "");
  low = LLVMBuildSub(b, low, c32(m, 0x4A800000), "");
  LLVMValueRef v = LLVMBuildBitCast(b, a, m->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, v, c32(m, 22), ""), c32(m, 1), "");
  LLVMValueRef high = LLVMBuildAdd(b, v, LLVMBuildAdd(b, lsb, c32(m, 0x1FFFFF), ""), "");
  high = LLVMBuildSub(b, LLVMBuildLShr(b, high, c32(m, 22), ""), c32(m, 252), "");
  LLVMValueRef below1 = LLVMBuildFCmp(b, LLVMRealOLT, a, LLVMConstReal(m->f32, 1.0), "");
  LLVMValueRef code = LLVMBuildSelect(b, below1, low, high, "");
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
