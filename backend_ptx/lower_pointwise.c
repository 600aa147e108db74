/* Pointwise ops and reduction combiners in LLVM IR, computing the op
 * table's fn_f / fn_i (ir/op_table.c) in the compute dtype.
 *
 * Accuracy (f32 compute; the interpreter evaluates in double and rounds once):
 *   exact (correctly rounded, bit-equal to the interpreter): neg abs add sub
 *     mul div reciprocal sqrt (sqrt.rn) floor ceil round trunc sign relu
 *     maximum minimum fmod clamp compares where cast
 *   rsqrt = 1 / sqrt(x) with div.rn and sqrt.rn: <= 1 ulp (libdevice's
 *     __nv_rsqrtf is rsqrt.approx, not used)
 *   libdevice (CUDA's documented max ulp errors, f32): exp 2, exp2 2, expm1 1,
 *     log 1, log2 1, log1p 1, sin 2, cos 2, tanh 2, erf 2, pow 4 (CUDA 12
 *     docs: 4 ulp), fmod exact
 *   composites, evaluated in f32: sigmoid = 1/(1+exp(-x)), silu =
 *     x/(1+exp(-x)) (one rounding less than x*sigmoid(x)), gelu =
 *     x*normcdf(x) (libdevice normcdf, 5 ulp), gelu tanh = x/(1+exp(-2u))
 *     (ex2.approx and rcp.approx with a Newton step): a few ulp relative,
 *     in the negative tail too (see gelu()).
 *   issue 20: cosh sinh libdevice (2 ulp); fma one rounding (fma.rn), exact
 *     against the interpreter's fmaf/fma; lerp = fma(w, b-a, a) for |w| <
 *     0.5, else fma(w-1, b-a, b), the same roundings as the interpreter;
 *     contiguous the identity.
 * f64 compute uses the f64 libdevice functions (1-2 ulp), and is exact for
 * the operations listed as exact above. No fast-math flags are set, so mul
 * and add are emitted as mul.rn / add.rn and never contracted into FMAs.
 *
 * Integer ops work in i64 with wrapping, as fn_i: div by 0 -> -1,
 * INT64_MIN / -1 -> INT64_MIN, fmod by 0 or -1 -> 0, pow with a negative
 * exponent -> 1 / -1 / 0. Bool compute (FG_BOOL) runs the integer form on
 * 0/1 and tests the result != 0, as the interpreter does. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fgb_internal.h"
#include "infer.h"
#include "lower_value.h"
#include "tensor_core.h"

/* ---- helpers ---- */

static LLVMValueRef fc(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }
static LLVMValueRef ic(fgb_module *m, int64_t v) {
  return LLVMConstInt(m->i64, (unsigned long long)v, 1);
}

/* libdevice: __nv_<base>f for f32, __nv_<base> for f64 */
static LLVMValueRef nv(fgb_module *m, const char *base, int n, LLVMValueRef *args) {
  LLVMTypeRef t = LLVMTypeOf(args[0]);
  char name[48];
  snprintf(name, sizeof name, "__nv_%s%s", base, t == m->f32 ? "f" : "");
  return fgb_call(m, name, t, n, args);
}
static LLVMValueRef nv1(fgb_module *m, const char *base, LLVMValueRef x) {
  return nv(m, base, 1, &x);
}

/* llvm.<base>.f32 / .f64 */
static LLVMValueRef intr1(fgb_module *m, const char *base, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  char name[48];
  snprintf(name, sizeof name, "llvm.%s.%s", base, t == m->f32 ? "f32" : "f64");
  return fgb_call(m, name, t, 1, &x);
}

static LLVMValueRef sel(fgb_module *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(m->b, c, a, b, "");
}
static LLVMValueRef fcmp(fgb_module *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(m->b, p, a, b, "");
}
static LLVMValueRef icmp(fgb_module *m, LLVMIntPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildICmp(m->b, p, a, b, "");
}

/* The interpreter's NaN-propagating maximum/minimum: NaN if either is NaN,
 * else x > y ? x : y (ties give y). */
static LLVMValueRef fmaxmin(fgb_module *m, LLVMValueRef x, LLVMValueRef y, bool is_max) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef r = sel(m, fcmp(m, is_max ? LLVMRealOGT : LLVMRealOLT, x, y), x, y);
  return sel(m, fcmp(m, LLVMRealUNO, x, y), fc(t, NAN), r);
}

static int arity(fg_opcode op) { return fg_op_get(op)->max_in; }

static double attr_num(const fg_attr *a) { return a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i; }

/* ---- float ops ---- */

/* gelu without the cancellation of 1 + erf(x / sqrt 2) (or 1 + tanh u)
 * at negative x, where erf is near -1: in f32 that sum loses every bit of
 * erf's error relative to the result (1e-4 relative at x = -3.5, all of it
 * past -5.5; difftest g200143). Exact: x normcdf(x) (libdevice's normcdf,
 * erfc inside: relative accuracy in the tail; PyTorch's CUDA kernel takes
 * the same form). tanh: 0.5 x (1 + tanh u) = x / (1 + exp(-2 u)). */
static LLVMValueRef gelu(fgb_module *m, const fg_node *n, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  bool f32 = t == m->f32;
  const fg_attr *ap = n ? fg_node_attr(n, "approximate") : NULL;
  if (ap && ap->s && strcmp(ap->s, "tanh") == 0) {
    double k = 0.7978845608028654, c = 0.044715;
    LLVMValueRef cube = LLVMBuildFMul(
        b, LLVMBuildFMul(b, LLVMBuildFMul(b, fc(t, f32 ? (float)c : c), x, ""), x, ""), x, "");
    LLVMValueRef u = LLVMBuildFMul(b, fc(t, f32 ? (float)k : k), LLVMBuildFAdd(b, x, cube, ""), "");
    if (!f32) {
      LLVMValueRef e = nv1(m, "exp", LLVMBuildFMul(b, fc(t, -2.0), u, ""));
      return LLVMBuildFDiv(b, x, LLVMBuildFAdd(b, fc(t, 1.0), e, ""), "");
    }
    /* f32: exp(-2u) as ex2.approx.ftz (2 ulp; a result below 2^-126 next
     * to the 1 it is added to changes nothing) and the reciprocal as
     * rcp.approx plus a Newton step (1 ulp). bias_gelu [16384,4096] bf16
     * (runs W4, W5, docs/benchmarks.md): 96.3 us with 1 + tanhf, 105.5
     * with libdevice's expf and div.rn, 92.8 with these */
    LLVMValueRef e =
        fgb_tc_ex2(m, LLVMBuildFMul(b, fc(t, (float)(-2.0 * 1.4426950408889634)), u, ""));
    return LLVMBuildFMul(b, x, fgb_tc_rcp(m, LLVMBuildFAdd(b, fc(t, 1.0), e, "")), "");
  }
  return LLVMBuildFMul(b, x, nv1(m, "normcdf", x), "");
}

static LLVMValueRef clamp_f(fgb_module *m, const fg_node *n, LLVMValueRef x) {
  /* Bounds rounded to the compute type: for f32 this gives the same result
   * as the interpreter's double comparisons (x < l  <=>  x < RN(l) or x ==
   * RN(l), and the result is then RN(l) == x). NaN fails both tests. */
  LLVMTypeRef t = LLVMTypeOf(x);
  bool f32 = t == m->f32;
  const fg_attr *lo = n ? fg_node_attr(n, "min") : NULL, *hi = n ? fg_node_attr(n, "max") : NULL;
  if (lo && lo->kind != FG_ATTR_NONE) {
    double l = attr_num(lo);
    LLVMValueRef L = fc(t, f32 ? (double)(float)l : l);
    x = sel(m, fcmp(m, LLVMRealOLT, x, L), L, x);
  }
  if (hi && hi->kind != FG_ATTR_NONE) {
    double h = attr_num(hi);
    LLVMValueRef H = fc(t, f32 ? (double)(float)h : h);
    x = sel(m, fcmp(m, LLVMRealOGT, x, H), H, x);
  }
  return x;
}

/* pow(x, c) for a literal exponent c as PyTorch's pow kernel does it,
 * instead of libdevice's pow (hundreds of instructions a call, which made a
 * norm written with pow run at 0.44 of copy bandwidth: issue 17): 0 -> 1,
 * 1 -> x, 2 -> x*x (exact), 3 and 4 -> multiplies, -1 -> 1/x (exact), -2
 * -> 1/(x*x), 0.5 -> sqrt, -0.5 -> 1/sqrt. The square roots keep pow's
 * special cases: pow(-0, 0.5) = +0, pow(-inf, 0.5) = +inf (sqrt gives -0
 * and NaN), and so for -0.5. NULL for other exponents. */
static LLVMValueRef pow_by_literal(fgb_module *m, LLVMValueRef x, LLVMValueRef y) {
  if (!y || !LLVMIsAConstantFP(y))
    return NULL;
  LLVMBool loses;
  double c = LLVMConstRealGetDouble(y, &loses);
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef one = fc(t, 1.0);
  if (c == 0)
    return one;
  if (c == 1)
    return x;
  if (c == 2 || c == -2 || c == 3 || c == 4) {
    LLVMValueRef sq = LLVMBuildFMul(b, x, x, "");
    if (c == 3)
      return LLVMBuildFMul(b, sq, x, "");
    if (c == 4)
      return LLVMBuildFMul(b, sq, sq, "");
    return c == 2 ? sq : LLVMBuildFDiv(b, one, sq, "");
  }
  if (c == -1)
    return LLVMBuildFDiv(b, one, x, "");
  if (c == 0.5 || c == -0.5) {
    LLVMValueRef r = LLVMBuildFAdd(b, intr1(m, "sqrt", x), fc(t, 0.0), ""); /* -0 -> +0 */
    r = sel(m, fcmp(m, LLVMRealOEQ, x, fc(t, -INFINITY)), fc(t, INFINITY), r);
    return c > 0 ? r : LLVMBuildFDiv(b, one, r, "");
  }
  return NULL;
}

/* mx_scale in f32 (op_table.c's mx_scale_f): the biased scale exponent is
 * |x|'s f32 exponent field minus emax_elem, at least 0 (2^-127, the f32
 * subnormal 0x00400000); a non-finite x gives NaN. That exponent is the
 * result's f8e8m0 code (noted: the cast to f8e8m0 is then no work, and a
 * division by the scale a multiplication). */
static LLVMValueRef mx_scale(fgb_module *m, const fg_node *n, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  if (LLVMTypeOf(x) != m->f32)
    x = LLVMBuildFPTrunc(b, x, m->f32, "");
  LLVMValueRef u = LLVMBuildBitCast(b, x, m->i32, "");
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, u, LLVMConstInt(m->i32, 23, 0), ""),
                                LLVMConstInt(m->i32, 0xff, 0), "");
  int emax = fg_mx_elem_emax(fg_node_attr(n, "elem")->dtype);
  LLVMValueRef s = LLVMBuildSub(b, e, LLVMConstInt(m->i32, (unsigned)emax, 0), "");
  LLVMValueRef pos = LLVMBuildICmp(b, LLVMIntSGT, s, LLVMConstInt(m->i32, 0, 0), "");
  LLVMValueRef r = LLVMBuildSelect(b, pos, LLVMBuildShl(b, s, LLVMConstInt(m->i32, 23, 0), ""),
                                   LLVMConstInt(m->i32, 0x400000, 0), "");
  LLVMValueRef special = LLVMBuildICmp(b, LLVMIntEQ, e, LLVMConstInt(m->i32, 0xff, 0), "");
  r = LLVMBuildSelect(b, special, LLVMConstInt(m->i32, 0x7fc00000, 0), r, "");
  LLVMValueRef code = LLVMBuildSelect(b, pos, s, LLVMConstInt(m->i32, 0, 0), "");
  code = LLVMBuildSelect(b, special, LLVMConstInt(m->i32, 0xff, 0), code, "");
  r = LLVMBuildBitCast(b, r, m->f32, "");
  fgb_e8m0_note(m, r, LLVMBuildTrunc(b, code, m->i8, ""));
  return r;
}

/* llvm.fma: one rounding (fma.rn.f32 / .f64) */
static LLVMValueRef fma3(fgb_module *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef a[3] = {x, y, z};
  return fgb_call(m, t == m->f32 ? "llvm.fma.f32" : "llvm.fma.f64", t, 3, a);
}

/* lerp as the op table's lerp_f: d = b - a; |w| < 0.5 ? fma(w, d, a) :
 * fma(w - 1, d, b). */
static LLVMValueRef lerp(fgb_module *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef w) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t = LLVMTypeOf(x);
  LLVMValueRef dlt = LLVMBuildFSub(b, y, x, "");
  LLVMValueRef small = fcmp(m, LLVMRealOLT, intr1(m, "fabs", w), fc(t, 0.5));
  return sel(m, small, fma3(m, w, dlt, x), fma3(m, LLVMBuildFSub(b, w, fc(t, 1.0), ""), dlt, y));
}

static LLVMValueRef float_op(fgb_module *m, fg_opcode op, const fg_node *n, LLVMValueRef *a) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef x = a[0], y = arity(op) >= 2 ? a[1] : NULL;
  LLVMTypeRef t = LLVMTypeOf(op == FG_OP_WHERE ? a[1] : x); /* where's a[0] is the i1 condition */
  LLVMValueRef one = fc(t, 1.0), zero = fc(t, 0.0);
  /* ORDER OP: a case for every pointwise op with a float form (fn_f in the
   * op table); tests/unit/test_backend_ops.c lowers each one. */
  switch (op) {
  case FG_OP_NEG:
    return LLVMBuildFNeg(b, x, "");
  case FG_OP_ABS:
    return intr1(m, "fabs", x);
  case FG_OP_EXP:
    return nv1(m, "exp", x);
  case FG_OP_EXP2:
    return nv1(m, "exp2", x);
  case FG_OP_EXPM1:
    return nv1(m, "expm1", x);
  case FG_OP_LOG:
    return nv1(m, "log", x);
  case FG_OP_LOG2:
    return nv1(m, "log2", x);
  case FG_OP_LOG1P:
    return nv1(m, "log1p", x);
  case FG_OP_SQRT:
    return intr1(m, "sqrt", x);
  case FG_OP_RSQRT:
    return LLVMBuildFDiv(b, one, intr1(m, "sqrt", x), "");
  case FG_OP_RECIPROCAL:
    return LLVMBuildFDiv(b, one, x, "");
  case FG_OP_SIN:
    return nv1(m, "sin", x);
  case FG_OP_COS:
    return nv1(m, "cos", x);
  case FG_OP_TANH:
    return nv1(m, "tanh", x);
  case FG_OP_ERF:
    return nv1(m, "erf", x);
  case FG_OP_SIGMOID:
    return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, nv1(m, "exp", LLVMBuildFNeg(b, x, "")), ""),
                         "");
  case FG_OP_SILU:
    return LLVMBuildFDiv(b, x, LLVMBuildFAdd(b, one, nv1(m, "exp", LLVMBuildFNeg(b, x, "")), ""),
                         "");
  case FG_OP_GELU:
    return gelu(m, n, x);
  case FG_OP_RELU:
    return sel(m, fcmp(m, LLVMRealUGT, x, zero), x, zero); /* NaN stays */
  case FG_OP_FLOOR:
    return intr1(m, "floor", x);
  case FG_OP_CEIL:
    return intr1(m, "ceil", x);
  case FG_OP_ROUND:
    return intr1(m, "roundeven", x); /* nearbyint: half to even */
  case FG_OP_TRUNC:
    return intr1(m, "trunc", x);
  case FG_OP_SIGN:
    return sel(m, fcmp(m, LLVMRealOGT, x, zero), one,
               sel(m, fcmp(m, LLVMRealOLT, x, zero), fc(t, -1.0), x));
  case FG_OP_ISNAN:
    return fcmp(m, LLVMRealUNO, x, x);
  case FG_OP_ISINF:
    return fcmp(m, LLVMRealOEQ, intr1(m, "fabs", x), fc(t, INFINITY));
  case FG_OP_ADD:
    return LLVMBuildFAdd(b, x, y, "");
  case FG_OP_SUB:
    return LLVMBuildFSub(b, x, y, "");
  case FG_OP_MUL:
    return LLVMBuildFMul(b, x, y, "");
  case FG_OP_DIV: {
    /* by an f8e8m0 value (an MX scale): times its exact reciprocal */
    LLVMValueRef code = t == m->f32 ? fgb_e8m0_code_of(m, y) : NULL;
    if (code)
      return LLVMBuildFMul(b, x, fgb_e8m0_recip(m, code), "");
    return LLVMBuildFDiv(b, x, y, "");
  }
  case FG_OP_POW: {
    LLVMValueRef r = pow_by_literal(m, x, y);
    return r ? r : nv(m, "pow", 2, a);
  }
  case FG_OP_FMOD:
    return nv(m, "fmod", 2, a);
  case FG_OP_MAXIMUM:
    return fmaxmin(m, x, y, true);
  case FG_OP_MINIMUM:
    return fmaxmin(m, x, y, false);
  case FG_OP_EQ:
    return fcmp(m, LLVMRealOEQ, x, y);
  case FG_OP_NE:
    return fcmp(m, LLVMRealUNE, x, y);
  case FG_OP_LT:
    return fcmp(m, LLVMRealOLT, x, y);
  case FG_OP_LE:
    return fcmp(m, LLVMRealOLE, x, y);
  case FG_OP_GT:
    return fcmp(m, LLVMRealOGT, x, y);
  case FG_OP_GE:
    return fcmp(m, LLVMRealOGE, x, y);
  case FG_OP_WHERE:
    return sel(m, a[0], a[1], a[2]);
  case FG_OP_CLAMP:
    return clamp_f(m, n, x);
  case FG_OP_CAST:
    return x;
  /* MX formats */
  case FG_OP_MX_SCALE:
    return mx_scale(m, n, x);
  /* issue 20, ops */
  case FG_OP_COSH:
    return nv1(m, "cosh", x);
  case FG_OP_SINH:
    return nv1(m, "sinh", x);
  case FG_OP_FMA:
    return fma3(m, x, y, a[2]);
  case FG_OP_LERP:
    return lerp(m, x, y, a[2]);
  case FG_OP_CONTIGUOUS:
    return x;
  default:
    return NULL;
  }
}

/* ---- integer ops (i64) ---- */

/* pow_i: square and multiply over the exponent's bits (a loop, at most 63
 * trips); negative exponents give 1 (base 1), +-1 (base -1), else 0. */
static LLVMValueRef ipow(fgb_module *m, LLVMValueRef base, LLVMValueRef e) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef fn = fgb_current_fn(m);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(m->ctx, fn, "ipow.head");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(m->ctx, fn, "ipow.body");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(m->ctx, fn, "ipow.done");
  LLVMValueRef neg = icmp(m, LLVMIntSLT, e, ic(m, 0));
  LLVMValueRef e0 = sel(m, neg, ic(m, 0), e);
  LLVMBuildBr(b, head);
  LLVMPositionBuilderAtEnd(b, head);
  LLVMValueRef r = LLVMBuildPhi(b, m->i64, "r"), x = LLVMBuildPhi(b, m->i64, "x"),
               ee = LLVMBuildPhi(b, m->i64, "e");
  LLVMBuildCondBr(b, icmp(m, LLVMIntNE, ee, ic(m, 0)), body, done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef bit = LLVMBuildTrunc(b, ee, m->i1, "");
  LLVMValueRef r2 = sel(m, bit, LLVMBuildMul(b, r, x, ""), r);
  LLVMValueRef x2 = LLVMBuildMul(b, x, x, "");
  LLVMValueRef e2 = LLVMBuildLShr(b, ee, ic(m, 1), "");
  LLVMBuildBr(b, head);
  LLVMValueRef rin[2] = {ic(m, 1), r2}, xin[2] = {base, x2}, ein[2] = {e0, e2};
  LLVMBasicBlockRef from[2] = {pre, body};
  LLVMAddIncoming(r, rin, from, 2);
  LLVMAddIncoming(x, xin, from, 2);
  LLVMAddIncoming(ee, ein, from, 2);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef odd = LLVMBuildTrunc(b, e, m->i1, "");
  LLVMValueRef negr =
      sel(m, icmp(m, LLVMIntEQ, base, ic(m, 1)), ic(m, 1),
          sel(m, icmp(m, LLVMIntEQ, base, ic(m, -1)), sel(m, odd, ic(m, -1), ic(m, 1)), ic(m, 0)));
  return sel(m, neg, negr, r);
}

static LLVMValueRef int_op(fgb_module *m, fg_opcode op, const fg_node *n, LLVMValueRef *a) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef x = a[0], y = arity(op) >= 2 ? a[1] : NULL, zero = ic(m, 0);
  /* ORDER OP: a case for every pointwise op with an integer form (fn_i in
   * the op table); tests/unit/test_backend_ops.c lowers each one. */
  switch (op) {
  case FG_OP_NEG:
    return LLVMBuildSub(b, zero, x, "");
  case FG_OP_ABS:
    return sel(m, icmp(m, LLVMIntSLT, x, zero), LLVMBuildSub(b, zero, x, ""), x);
  case FG_OP_RELU:
    return sel(m, icmp(m, LLVMIntSGT, x, zero), x, zero);
  case FG_OP_FLOOR:
  case FG_OP_CEIL:
  case FG_OP_ROUND:
  case FG_OP_TRUNC:
  case FG_OP_CAST:
    return x;
  case FG_OP_SIGN:
    return LLVMBuildSub(b, LLVMBuildZExt(b, icmp(m, LLVMIntSGT, x, zero), m->i64, ""),
                        LLVMBuildZExt(b, icmp(m, LLVMIntSLT, x, zero), m->i64, ""), "");
  case FG_OP_ISNAN:
  case FG_OP_ISINF:
    return LLVMConstInt(m->i1, 0, 0);
  case FG_OP_ADD:
    return LLVMBuildAdd(b, x, y, "");
  case FG_OP_SUB:
    return LLVMBuildSub(b, x, y, "");
  case FG_OP_MUL:
    return LLVMBuildMul(b, x, y, "");
  case FG_OP_DIV: {
    /* y == 0 -> -1; INT64_MIN / -1 -> INT64_MIN (divide by 1 instead) */
    LLVMValueRef y0 = icmp(m, LLVMIntEQ, y, zero);
    LLVMValueRef ovf = LLVMBuildAnd(b, icmp(m, LLVMIntEQ, x, ic(m, INT64_MIN)),
                                    icmp(m, LLVMIntEQ, y, ic(m, -1)), "");
    LLVMValueRef ys = sel(m, LLVMBuildOr(b, y0, ovf, ""), ic(m, 1), y);
    return sel(m, y0, ic(m, -1), LLVMBuildSDiv(b, x, ys, ""));
  }
  case FG_OP_FMOD: {
    /* y == 0 or y == -1 -> 0, which x % 1 gives */
    LLVMValueRef bad =
        LLVMBuildOr(b, icmp(m, LLVMIntEQ, y, zero), icmp(m, LLVMIntEQ, y, ic(m, -1)), "");
    return LLVMBuildSRem(b, x, sel(m, bad, ic(m, 1), y), "");
  }
  case FG_OP_POW:
    return ipow(m, x, y);
  case FG_OP_MAXIMUM:
    return sel(m, icmp(m, LLVMIntSGT, x, y), x, y);
  case FG_OP_MINIMUM:
    return sel(m, icmp(m, LLVMIntSLT, x, y), x, y);
  case FG_OP_EQ:
    return icmp(m, LLVMIntEQ, x, y);
  case FG_OP_NE:
    return icmp(m, LLVMIntNE, x, y);
  case FG_OP_LT:
    return icmp(m, LLVMIntSLT, x, y);
  case FG_OP_LE:
    return icmp(m, LLVMIntSLE, x, y);
  case FG_OP_GT:
    return icmp(m, LLVMIntSGT, x, y);
  case FG_OP_GE:
    return icmp(m, LLVMIntSGE, x, y);
  case FG_OP_WHERE:
    return sel(m, a[0], a[1], a[2]);
  case FG_OP_CLAMP: {
    const fg_attr *lo = n ? fg_node_attr(n, "min") : NULL, *hi = n ? fg_node_attr(n, "max") : NULL;
    if (lo && lo->kind != FG_ATTR_NONE)
      x = sel(m, icmp(m, LLVMIntSLT, x, ic(m, lo->i)), ic(m, lo->i), x);
    if (hi && hi->kind != FG_ATTR_NONE)
      x = sel(m, icmp(m, LLVMIntSGT, x, ic(m, hi->i)), ic(m, hi->i), x);
    return x;
  }
  /* issue 20, ops */
  case FG_OP_FMA:
    return LLVMBuildAdd(b, LLVMBuildMul(b, x, y, ""), a[2], "");
  case FG_OP_CONTIGUOUS:
    return x;
  default:
    return NULL;
  }
}

LLVMValueRef fgb_emit_op(fgb_module *m, fg_opcode op, fg_dtype cdt, const fg_node *n,
                         LLVMValueRef *ops) {
  LLVMBuilderRef b = m->b;
  switch (op) {
  case FG_OP_LOGICAL_NOT:
    return LLVMBuildNot(b, ops[0], "");
  case FG_OP_LOGICAL_AND:
    return LLVMBuildAnd(b, ops[0], ops[1], "");
  case FG_OP_LOGICAL_OR:
    return LLVMBuildOr(b, ops[0], ops[1], "");
  default:
    break;
  }
  if (cdt == FG_F32 || cdt == FG_F64)
    return float_op(m, op, n, ops);
  if (cdt == FG_I64)
    return int_op(m, op, n, ops);
  if (cdt != FG_BOOL)
    return NULL;
  if (op == FG_OP_WHERE)
    return sel(m, ops[0], ops[1], ops[2]);
  /* bool compute: the integer form on 0/1, then != 0 */
  LLVMValueRef w[3] = {NULL, NULL, NULL};
  for (int k = 0; k < arity(op) && k < 3; k++)
    w[k] = LLVMBuildZExt(b, ops[k], m->i64, "");
  LLVMValueRef r = int_op(m, op, n, w);
  if (!r || fg_op_returns_bool(fg_op_get(op)))
    return r;
  return icmp(m, LLVMIntNE, r, ic(m, 0));
}

fg_dtype fgb_pw_operand_target(const fg_node *n, int k) {
  if (n->op->pw == FG_PW_LOGICAL || (n->op->pw == FG_PW_WHERE && k == 0))
    return FG_BOOL;
  return fg_pw_compute_dtype(n);
}

LLVMValueRef fgb_pw_literal(fgb_module *m, const fg_node *n, int k) {
  double unused;
  const fg_value *v = n->in[k];
  if (!fg_value_is_literal(v, &unused))
    return NULL;
  const fg_attr *a = &v->def->attrs[0];
  bool isf = a->kind == FG_ATTR_FLOAT;
  switch (fgb_pw_operand_target(n, k)) {
  case FG_BOOL:
    return LLVMConstInt(m->i1, isf ? a->f != 0 : a->i != 0, 0);
  case FG_F32:
    return fc(m->f32, isf ? (double)(float)a->f : (double)(float)a->i);
  case FG_F64:
    return fc(m->f64, isf ? a->f : (double)a->i);
  default: {
    return ic(m, isf ? fg_f64_to_i64(a->f) : a->i);
  }
  }
}

fg_dtype fgb_pw_result_form(const fg_node *n) {
  return fg_op_returns_bool(n->op) ? FG_BOOL : fg_pw_compute_dtype(n);
}

LLVMValueRef fgb_emit_pointwise(fgb_module *m, const fg_node *n, LLVMValueRef *ops) {
  if (n->op->kind != FG_KIND_POINTWISE)
    return NULL;
  return fgb_emit_op(m, n->op->code, fg_pw_compute_dtype(n), n, ops);
}

/* ---- reductions ---- */

LLVMValueRef fgb_reduce_identity(fgb_module *m, fg_opcode op, fg_dtype acc) {
  bool fl = acc == FG_F32 || acc == FG_F64;
  LLVMTypeRef t = fgb_reg_type(m, acc);
  switch (op) {
  case FG_OP_SUM:
  case FG_OP_MEAN:
    return fl ? fc(t, -0.0) : ic(m, 0);
  case FG_OP_PROD:
    return fl ? fc(t, 1.0) : ic(m, 1);
  case FG_OP_AMAX:
    return fl ? fc(t, -INFINITY) : ic(m, INT64_MIN);
  case FG_OP_AMIN:
    return fl ? fc(t, INFINITY) : ic(m, INT64_MAX);
  default:
    return NULL;
  }
}

LLVMValueRef fgb_reduce_combine(fgb_module *m, fg_opcode op, LLVMValueRef acc, LLVMValueRef x,
                                fg_dtype acc_dt) {
  LLVMBuilderRef b = m->b;
  bool fl = acc_dt == FG_F32 || acc_dt == FG_F64;
  switch (op) {
  case FG_OP_SUM:
  case FG_OP_MEAN:
    return fl ? LLVMBuildFAdd(b, acc, x, "") : LLVMBuildAdd(b, acc, x, "");
  case FG_OP_PROD:
    return fl ? LLVMBuildFMul(b, acc, x, "") : LLVMBuildMul(b, acc, x, "");
  case FG_OP_AMAX:
  case FG_OP_AMIN: {
    bool mx = op == FG_OP_AMAX;
    if (!fl)
      return sel(m, icmp(m, mx ? LLVMIntSGT : LLVMIntSLT, x, acc), x, acc);
    /* sm_80+: max.NaN.f32 / min.NaN.f32, one instruction with the same
     * NaN propagation (amax of a row is issue-bound otherwise). */
    if (m->sm >= 80 && LLVMTypeOf(acc) == m->f32) {
      LLVMValueRef a[2] = {acc, x};
      return fgb_call(m, mx ? "llvm.maximum.f32" : "llvm.minimum.f32", m->f32, 2, a);
    }
    LLVMValueRef r = sel(m, fcmp(m, mx ? LLVMRealOGT : LLVMRealOLT, x, acc), x, acc);
    return sel(m, fcmp(m, LLVMRealUNO, acc, x), fc(LLVMTypeOf(acc), NAN), r);
  }
  default:
    return NULL;
  }
}

/* ---- bf16 pairs for max / min reductions (lower_value.h) ---- */

static LLVMTypeRef bf16x2(fgb_module *m) { return LLVMVectorType(m->bf16, 2); }

bool fgb_bf16x2_ok(fgb_module *m, fg_opcode op) {
  return m->sm >= 80 && (op == FG_OP_AMAX || op == FG_OP_AMIN);
}

LLVMValueRef fgb_bf16x2_combine(fgb_module *m, fg_opcode op, LLVMValueRef acc, LLVMValueRef x) {
  LLVMValueRef a[2] = {acc, x};
  return fgb_call(m, op == FG_OP_AMAX ? "llvm.maximum.v2bf16" : "llvm.minimum.v2bf16", bf16x2(m), 2,
                  a);
}

/* The bf16 bits of an exactly representable f32 are its upper half. */
LLVMValueRef fgb_bf16x2_pack(fgb_module *m, LLVMValueRef x0, LLVMValueRef x1) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef lo =
      LLVMBuildLShr(b, LLVMBuildBitCast(b, x0, m->i32, ""), LLVMConstInt(m->i32, 16, 0), "");
  LLVMValueRef hi = LLVMBuildAnd(b, LLVMBuildBitCast(b, x1, m->i32, ""),
                                 LLVMConstInt(m->i32, 0xffff0000u, 0), "");
  return LLVMBuildBitCast(b, LLVMBuildOr(b, lo, hi, ""), bf16x2(m), "");
}

LLVMValueRef fgb_bf16x2_unpack(fgb_module *m, LLVMValueRef v, int h) {
  LLVMValueRef x =
      LLVMBuildExtractElement(m->b, v, LLVMConstInt(m->i32, (unsigned long long)h, 0), "");
  return LLVMBuildFPExt(m->b, x, m->f32, "");
}

LLVMValueRef fgb_bf16x2_identity(fgb_module *m, fg_opcode op) {
  LLVMValueRef x = LLVMConstReal(m->bf16, op == FG_OP_AMAX ? -INFINITY : INFINITY);
  LLVMValueRef v[2] = {x, x};
  return LLVMConstVector(v, 2);
}
