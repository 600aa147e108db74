/* The op table and the scalar semantics of the pointwise ops. */
#include <math.h>
#include <string.h>

#include "infer.h"
#include "interp.h"
#include "op.h"

/* ---- scalar semantics: float (in double, caller rounds) and integer ---- */

/* One line an op: clang-format cannot lay out a run of macro-made functions. */
// clang-format off

#define F1(name, expr) \
  static double name##_f(const double *a, const fg_node *n) { (void)n; double x = a[0]; return (expr); }
#define I1(name, expr) \
  static int64_t name##_i(const int64_t *a, const fg_node *n) { (void)n; int64_t x = a[0]; return (expr); }
#define F2(name, expr) \
  static double name##_f(const double *a, const fg_node *n) { (void)n; double x = a[0], y = a[1]; return (expr); }
#define I2(name, expr) \
  static int64_t name##_i(const int64_t *a, const fg_node *n) { (void)n; int64_t x = a[0], y = a[1]; return (expr); }

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

F1(neg, -x) I1(neg, (int64_t)(0 - (uint64_t)x))
F1(abs, fabs(x)) I1(abs, x < 0 ? (int64_t)(0 - (uint64_t)x) : x)
F1(exp, exp(x)) F1(exp2, exp2(x)) F1(expm1, expm1(x))
F1(log, log(x)) F1(log2, log2(x)) F1(log1p, log1p(x))
F1(sqrt, sqrt(x)) F1(rsqrt, 1.0 / sqrt(x)) F1(reciprocal, 1.0 / x)
F1(sin, sin(x)) F1(cos, cos(x)) F1(tanh, tanh(x))
F1(sigmoid, sigmoid(x))
F1(relu, isnan(x) ? x : x > 0 ? x : 0.0) I1(relu, x > 0 ? x : 0)
F1(silu, x * sigmoid(x))
F1(erf, erf(x))
F1(floor, floor(x)) F1(ceil, ceil(x)) F1(round, nearbyint(x)) F1(trunc, trunc(x))
I1(ident, x)
F1(sign, x > 0 ? 1.0 : x < 0 ? -1.0 : x) I1(sign, x > 0 ? 1 : x < 0 ? -1 : 0)
F1(isnan, isnan(x) ? 1.0 : 0.0) static int64_t never_i(const int64_t *a, const fg_node *n) { (void)a; (void)n; return 0; }
F1(isinf, isinf(x) ? 1.0 : 0.0)
I1(logical_not, !x)

static double gelu_f(const double *a, const fg_node *n) {
  double x = a[0];
  const fg_attr *ap = fg_node_attr(n, "approximate");
  if (ap && strcmp(ap->s, "tanh") == 0) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    /* 0.5 x (1 + tanh u), without 1 + tanh u's cancellation at x < 0 */
    return x / (1.0 + exp(-2.0 * k * (x + 0.044715 * x * x * x)));
  }
  /* 0.5 x (1 + erf(x / sqrt 2)), without 1 + erf's cancellation at x < 0 */
  return 0.5 * x * erfc(-x * 0.7071067811865476);
}

/* Integer arithmetic wraps like the GPU's; the caller narrows to the dtype. */
F2(add, x + y) I2(add, (int64_t)((uint64_t)x + (uint64_t)y))
F2(sub, x - y) I2(sub, (int64_t)((uint64_t)x - (uint64_t)y))
F2(mul, x * y) I2(mul, (int64_t)((uint64_t)x * (uint64_t)y))
/* Integer division truncates toward zero; by zero it gives -1, as the GPU
 * does (unspecified by the spec). */
F2(div, x / y) I2(div, y == 0 ? -1 : (x == INT64_MIN && y == -1) ? x : x / y)
F2(pow, pow(x, y))
static int64_t pow_i(const int64_t *a, const fg_node *n) {
  (void)n;
  int64_t b = a[0], e = a[1];
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int64_t)r;
}
/* maximum/minimum propagate NaN, as torch.maximum does. */
F2(maximum, isnan(x) || isnan(y) ? NAN : x > y ? x : y) I2(maximum, x > y ? x : y)
F2(minimum, isnan(x) || isnan(y) ? NAN : x < y ? x : y) I2(minimum, x < y ? x : y)
F2(fmod, fmod(x, y)) I2(fmod, y == 0 ? 0 : (y == -1 ? 0 : x % y))
F2(eq, x == y) I2(eq, x == y)
F2(ne, x != y) I2(ne, x != y)
F2(lt, x < y) I2(lt, x < y)
F2(le, x <= y) I2(le, x <= y)
F2(gt, x > y) I2(gt, x > y)
F2(ge, x >= y) I2(ge, x >= y)
I2(logical_and, x && y)
I2(logical_or, x || y)

static double where_f(const double *a, const fg_node *n) { (void)n; return a[0] != 0 ? a[1] : a[2]; }
static int64_t where_i(const int64_t *a, const fg_node *n) { (void)n; return a[0] ? a[1] : a[2]; }

/* clamp: NaN stays NaN; a bound that is absent does nothing. */
static double clamp_f(const double *a, const fg_node *n) {
  double x = a[0];
  if (isnan(x)) return x;
  const fg_attr *lo = fg_node_attr(n, "min"), *hi = fg_node_attr(n, "max");
  if (lo) { double l = lo->kind == FG_ATTR_FLOAT ? lo->f : (double)lo->i; if (x < l) x = l; }
  if (hi) { double h = hi->kind == FG_ATTR_FLOAT ? hi->f : (double)hi->i; if (x > h) x = h; }
  return x;
}
static int64_t clamp_i(const int64_t *a, const fg_node *n) {
  int64_t x = a[0];
  const fg_attr *lo = fg_node_attr(n, "min"), *hi = fg_node_attr(n, "max");
  if (lo && x < lo->i) x = lo->i;
  if (hi && x > hi->i) x = hi->i;
  return x;
}
static double cast_f(const double *a, const fg_node *n) { (void)n; return a[0]; }
/* MX formats: the OCP MX v1.0 shared scale of a block whose largest
 * magnitude is a[0] (an f32 value): 2^(floor(log2(amax)) - emax_elem),
 * floor(log2) read off the f32 exponent field (0 for zeros and f32
 * subnormals, i.e. -127), clamped below at 2^-127; inf and NaN give NaN. */
static double mx_scale_f(const double *a, const fg_node *n) {
  double x = fabs(a[0]);
  if (!isfinite(x))
    return NAN;
  int e = 0;
  if (x >= 0x1p-126) {
    frexp(x, &e);
    e += 126; /* the f32 biased exponent field: floor(log2 x) + 127 */
  }
  int s = e - fg_mx_elem_emax(fg_node_attr(n, "elem")->dtype);
  return s <= 0 ? 0x1p-127 : ldexp(1.0, s - 127);
}
static int64_t cast_i(const int64_t *a, const fg_node *n) { (void)n; return a[0]; }

// clang-format on

/* ---- issue 20, ops ---- */

static double cosh_f(const double *a, const fg_node *n) {
  (void)n;
  return cosh(a[0]);
}
static double sinh_f(const double *a, const fg_node *n) {
  (void)n;
  return sinh(a[0]);
}
static double contiguous_f(const double *a, const fg_node *n) {
  (void)n;
  return a[0];
}
static int64_t contiguous_i(const int64_t *a, const fg_node *n) {
  (void)n;
  return a[0];
}

/* Whether n is computed in f32 (f16/bf16/f8/f32 operands): then the fused
 * ops round as the GPU's f32 instructions do, not in double. */
static bool computes_in_f32(const fg_node *n) { return n && fg_pw_compute_dtype(n) == FG_F32; }

/* fma(a, b, c) = a*b + c rounded once in the compute dtype (fmaf in f32,
 * fma in f64); bf16/f16 results are then rounded once more by the caller. */
static double fma_f(const double *a, const fg_node *n) {
  if (computes_in_f32(n))
    return fmaf((float)a[0], (float)a[1], (float)a[2]);
  return fma(a[0], a[1], a[2]);
}
static int64_t fma_i(const int64_t *a, const fg_node *n) {
  (void)n;
  return (int64_t)((uint64_t)a[0] * (uint64_t)a[1] + (uint64_t)a[2]);
}

/* lerp(a, b, w) as PyTorch computes it (ATen's lerp: |w| < 0.5 ? a + w*d :
 * b - d*(1-w), d = b - a, which its CPU kernel and nvcc's contraction both
 * evaluate as fma(w, d, a) and fma(w - 1, d, b)): d and w - 1 rounded, then
 * one fused multiply-add, in the compute dtype. */
static double lerp_f(const double *a, const fg_node *n) {
  double x = a[0], y = a[1], w = a[2];
  if (computes_in_f32(n)) {
    float d = (float)y - (float)x, wf = (float)w;
    return fabsf(wf) < 0.5f ? fmaf(wf, d, (float)x) : fmaf(wf - 1.0f, d, (float)y);
  }
  double d = y - x;
  return fabs(w) < 0.5 ? fma(w, d, x) : fma(w - 1.0, d, y);
}

/* ---- attribute specs ---- */

#define NOATTRS 0, NULL
#define ATTRS(...)                                                                                 \
  (sizeof((const fg_attr_spec[]){__VA_ARGS__}) / sizeof(fg_attr_spec)), (const fg_attr_spec[]) {   \
    __VA_ARGS__                                                                                    \
  }

static const char *const gelu_choices[] = {"none", "tanh", NULL};

#define A_REQ(nm, ty) {.name = nm, .type = ty, .required = true}
#define A_OPT(nm, ty) {.name = nm, .type = ty}
#define A_BOOL(nm, v)                                                                              \
  {                                                                                                \
    .name = nm, .type = FG_AT_BOOL, .def = {.kind = FG_ATTR_BOOL, .i = v }                         \
  }
#define A_INT(nm, v)                                                                               \
  {                                                                                                \
    .name = nm, .type = FG_AT_INT, .def = {.kind = FG_ATTR_INT, .i = v }                           \
  }

#define RED_ATTRS                                                                                  \
  ATTRS(A_OPT("dims", FG_AT_INTS), A_BOOL("keepdim", 0), A_OPT("dtype", FG_AT_DTYPE))
#define VAR_ATTRS                                                                                  \
  ATTRS(A_OPT("dims", FG_AT_INTS),                                                                 \
        {.name = "correction", .type = FG_AT_FLOAT, .def = {.kind = FG_ATTR_FLOAT, .f = 1.0}},     \
        A_BOOL("keepdim", 0))
#define RAND_ATTRS                                                                                 \
  ATTRS(A_REQ("shape", FG_AT_INTS),                                                                \
        {.name = "dtype", .type = FG_AT_DTYPE, .def = {.kind = FG_ATTR_DTYPE, .dtype = FG_F32}})
#define ATTN_ATTRS ATTRS(A_BOOL("causal", 0), A_OPT("scale", FG_AT_FLOAT))

/* ---- the table ---- */

#define UN(code, nm, rule, f, i, props)                                                            \
  [code] = {code, nm, FG_KIND_POINTWISE, 1, 1, 1, 0, NULL, rule, f, i, NULL, props}
#define BIN(code, nm, rule, f, i, props)                                                           \
  [code] = {code, nm, FG_KIND_POINTWISE, 2, 2, 1, 0, NULL, rule, f, i, NULL, props}
#define OTHER(code, nm, kind, mn, mx, nout, attrs, fn)                                             \
  [code] = {code, nm, kind, mn, mx, nout, attrs, FG_PW_PROMOTE, NULL, NULL, fn, 0}
/* short names for the props column */
#define COMM FG_PROP_COMMUTATIVE
#define COMM_INT FG_PROP_COMMUTATIVE_INT
#define EXACT FG_PROP_EXACT
#define IDEMP FG_PROP_IDEMPOTENT
#define INVOL FG_PROP_INVOLUTION
#define INT_ID FG_PROP_INT_IDENTITY
#define NARROW FG_PROP_EXACT_NARROW
#define LIBDEV FG_PROP_LIBDEVICE

const fg_op fg_ops[FG_OP_COUNT] = {
    UN(FG_OP_NEG, "neg", FG_PW_PROMOTE, neg_f, neg_i, EXACT | INVOL | NARROW),
    UN(FG_OP_ABS, "abs", FG_PW_PROMOTE, abs_f, abs_i, EXACT | IDEMP | NARROW),
    UN(FG_OP_EXP, "exp", FG_PW_FLOAT, exp_f, NULL, LIBDEV),
    UN(FG_OP_EXP2, "exp2", FG_PW_FLOAT, exp2_f, NULL, LIBDEV),
    UN(FG_OP_EXPM1, "expm1", FG_PW_FLOAT, expm1_f, NULL, LIBDEV),
    UN(FG_OP_LOG, "log", FG_PW_FLOAT, log_f, NULL, LIBDEV),
    UN(FG_OP_LOG2, "log2", FG_PW_FLOAT, log2_f, NULL, LIBDEV),
    UN(FG_OP_LOG1P, "log1p", FG_PW_FLOAT, log1p_f, NULL, LIBDEV),
    UN(FG_OP_SQRT, "sqrt", FG_PW_FLOAT, sqrt_f, NULL, EXACT),
    UN(FG_OP_RSQRT, "rsqrt", FG_PW_FLOAT, rsqrt_f, NULL, 0),
    UN(FG_OP_RECIPROCAL, "reciprocal", FG_PW_FLOAT, reciprocal_f, NULL, EXACT),
    UN(FG_OP_SIN, "sin", FG_PW_FLOAT, sin_f, NULL, LIBDEV),
    UN(FG_OP_COS, "cos", FG_PW_FLOAT, cos_f, NULL, LIBDEV),
    UN(FG_OP_TANH, "tanh", FG_PW_FLOAT, tanh_f, NULL, LIBDEV),
    UN(FG_OP_SIGMOID, "sigmoid", FG_PW_FLOAT, sigmoid_f, NULL, LIBDEV),
    UN(FG_OP_RELU, "relu", FG_PW_PROMOTE, relu_f, relu_i, EXACT | IDEMP),
    UN(FG_OP_SILU, "silu", FG_PW_FLOAT, silu_f, NULL, LIBDEV),
    UN(FG_OP_ERF, "erf", FG_PW_FLOAT, erf_f, NULL, LIBDEV),
    UN(FG_OP_FLOOR, "floor", FG_PW_PROMOTE, floor_f, ident_i, EXACT | IDEMP | INT_ID),
    UN(FG_OP_CEIL, "ceil", FG_PW_PROMOTE, ceil_f, ident_i, EXACT | IDEMP | INT_ID),
    UN(FG_OP_ROUND, "round", FG_PW_PROMOTE, round_f, ident_i, EXACT | IDEMP | INT_ID),
    UN(FG_OP_TRUNC, "trunc", FG_PW_PROMOTE, trunc_f, ident_i, EXACT | IDEMP | INT_ID),
    UN(FG_OP_SIGN, "sign", FG_PW_PROMOTE, sign_f, sign_i, EXACT | IDEMP),
    UN(FG_OP_ISNAN, "isnan", FG_PW_PREDICATE, isnan_f, never_i, EXACT),
    UN(FG_OP_ISINF, "isinf", FG_PW_PREDICATE, isinf_f, never_i, EXACT),
    UN(FG_OP_LOGICAL_NOT, "logical_not", FG_PW_LOGICAL, NULL, logical_not_i, INVOL),
    [FG_OP_GELU] = {FG_OP_GELU, "gelu", FG_KIND_POINTWISE, 1, 1, 1,
                    ATTRS({.name = "approximate",
                           .type = FG_AT_STRING,
                           .choices = gelu_choices,
                           .def = {.kind = FG_ATTR_STRING, .s = "none"}}),
                    FG_PW_FLOAT, gelu_f, NULL, NULL, LIBDEV},

    BIN(FG_OP_ADD, "add", FG_PW_PROMOTE, add_f, add_i, EXACT | COMM),
    BIN(FG_OP_SUB, "sub", FG_PW_PROMOTE, sub_f, sub_i, EXACT),
    BIN(FG_OP_MUL, "mul", FG_PW_PROMOTE, mul_f, mul_i, EXACT | COMM),
    BIN(FG_OP_DIV, "div", FG_PW_PROMOTE, div_f, div_i, EXACT),
    BIN(FG_OP_POW, "pow", FG_PW_PROMOTE, pow_f, pow_i, LIBDEV),
    BIN(FG_OP_MAXIMUM, "maximum", FG_PW_PROMOTE, maximum_f, maximum_i, EXACT | COMM_INT | NARROW),
    BIN(FG_OP_MINIMUM, "minimum", FG_PW_PROMOTE, minimum_f, minimum_i, EXACT | COMM_INT | NARROW),
    BIN(FG_OP_FMOD, "fmod", FG_PW_PROMOTE, fmod_f, fmod_i, EXACT | LIBDEV),
    BIN(FG_OP_EQ, "eq", FG_PW_COMPARE, eq_f, eq_i, EXACT | COMM),
    BIN(FG_OP_NE, "ne", FG_PW_COMPARE, ne_f, ne_i, EXACT | COMM),
    BIN(FG_OP_LT, "lt", FG_PW_COMPARE, lt_f, lt_i, EXACT),
    BIN(FG_OP_LE, "le", FG_PW_COMPARE, le_f, le_i, EXACT),
    BIN(FG_OP_GT, "gt", FG_PW_COMPARE, gt_f, gt_i, EXACT),
    BIN(FG_OP_GE, "ge", FG_PW_COMPARE, ge_f, ge_i, EXACT),
    BIN(FG_OP_LOGICAL_AND, "logical_and", FG_PW_LOGICAL, NULL, logical_and_i, COMM),
    BIN(FG_OP_LOGICAL_OR, "logical_or", FG_PW_LOGICAL, NULL, logical_or_i, COMM),

    [FG_OP_WHERE] = {FG_OP_WHERE, "where", FG_KIND_POINTWISE, 3, 3, 1, 0, NULL, FG_PW_WHERE,
                     where_f, where_i, NULL, EXACT},
    [FG_OP_CLAMP] = {FG_OP_CLAMP, "clamp", FG_KIND_POINTWISE, 1, 1, 1,
                     ATTRS(A_OPT("min", FG_AT_SCALAR), A_OPT("max", FG_AT_SCALAR)), FG_PW_PROMOTE,
                     clamp_f, clamp_i, NULL, EXACT},
    [FG_OP_CAST] = {FG_OP_CAST, "cast", FG_KIND_POINTWISE, 1, 1, 1,
                    ATTRS(A_REQ("dtype", FG_AT_DTYPE)), FG_PW_CAST, cast_f, cast_i, NULL, EXACT},

    OTHER(FG_OP_SUM, "sum", FG_KIND_REDUCTION, 1, 1, 1, RED_ATTRS, fg_interp_reduce),
    OTHER(FG_OP_AMAX, "amax", FG_KIND_REDUCTION, 1, 1, 1, RED_ATTRS, fg_interp_reduce),
    OTHER(FG_OP_AMIN, "amin", FG_KIND_REDUCTION, 1, 1, 1, RED_ATTRS, fg_interp_reduce),
    OTHER(FG_OP_MEAN, "mean", FG_KIND_REDUCTION, 1, 1, 1, RED_ATTRS, fg_interp_reduce),
    OTHER(FG_OP_PROD, "prod", FG_KIND_REDUCTION, 1, 1, 1, RED_ATTRS, fg_interp_reduce),
    OTHER(FG_OP_VAR, "var", FG_KIND_REDUCTION, 1, 1, 1, VAR_ATTRS, fg_interp_var),
    OTHER(FG_OP_VAR_MEAN, "var_mean", FG_KIND_REDUCTION, 1, 1, 2, VAR_ATTRS, fg_interp_var),

    OTHER(FG_OP_RESHAPE, "reshape", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_REQ("shape", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_VIEW, "view", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_REQ("shape", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_PERMUTE, "permute", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_REQ("dims", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_TRANSPOSE, "transpose", FG_KIND_VIEW, 1, 1, 1,
          ATTRS(A_REQ("dim0", FG_AT_INT), A_REQ("dim1", FG_AT_INT)), fg_interp_view),
    OTHER(FG_OP_BROADCAST_IN_DIM, "broadcast_in_dim", FG_KIND_VIEW, 1, 1, 1,
          ATTRS(A_REQ("shape", FG_AT_INTS), A_REQ("dims", FG_AT_INTS)), fg_interp_view),
    OTHER(FG_OP_EXPAND, "expand", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_REQ("shape", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_SQUEEZE, "squeeze", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_OPT("dims", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_UNSQUEEZE, "unsqueeze", FG_KIND_VIEW, 1, 1, 1, ATTRS(A_REQ("dim", FG_AT_INT)),
          fg_interp_view),
    OTHER(FG_OP_SLICE, "slice", FG_KIND_VIEW, 1, 1, 1,
          ATTRS(A_REQ("starts", FG_AT_INTS), A_REQ("ends", FG_AT_INTS), A_OPT("steps", FG_AT_INTS)),
          fg_interp_view),
    OTHER(FG_OP_CAT, "cat", FG_KIND_VIEW, 1, -1, 1, ATTRS(A_INT("dim", 0)), fg_interp_cat),
    OTHER(FG_OP_SPLIT, "split", FG_KIND_VIEW, 1, 1, -1,
          ATTRS(A_REQ("sizes", FG_AT_INTS), A_INT("dim", 0)), fg_interp_split),
    OTHER(FG_OP_PAD, "pad", FG_KIND_VIEW, 1, 1, 1,
          ATTRS(A_REQ("pad", FG_AT_INTS),
                {.name = "value", .type = FG_AT_SCALAR, .def = {.kind = FG_ATTR_INT, .i = 0}}),
          fg_interp_pad),

    OTHER(FG_OP_FULL, "full", FG_KIND_CREATION, 0, 0, 1,
          ATTRS(A_REQ("shape", FG_AT_INTS), A_REQ("value", FG_AT_SCALAR),
                A_OPT("dtype", FG_AT_DTYPE)),
          fg_interp_full),
    /* iota(n) with n an integer literal operand, or iota(T) with a length
     * that is an expression of a symbolic size: no operand, the expression
     * in `length` (one entry; docs/format.md 3.2.1) */
    OTHER(
        FG_OP_IOTA, "iota", FG_KIND_CREATION, 0, 1, 1,
        ATTRS(
            {.name = "dtype", .type = FG_AT_DTYPE, .def = {.kind = FG_ATTR_DTYPE, .dtype = FG_I64}},
            A_OPT("length", FG_AT_INTS)),
        fg_interp_iota),

    OTHER(FG_OP_SEGMENT_SET, "segment_set", FG_KIND_CONTROL, 1, 1, 1, NOATTRS, fg_interp_view),

    OTHER(FG_OP_SDPA, "sdpa", FG_KIND_ATTENTION, 3, 3, 2, ATTN_ATTRS, fg_interp_sdpa),
    OTHER(FG_OP_SDPA_BWD, "sdpa_bwd", FG_KIND_ATTENTION, 6, 6, 3, ATTN_ATTRS, fg_interp_sdpa),

    /* The element count `value` of extents that hold the symbolic size, as
     * a scalar of `dtype`: decompose writes it for mean and var over T
     * (opt/symbolic.h), and the code generator reads it as the run-time
     * count. Not in the language: a user's number is a literal. */
    OTHER(FG_OP_EXTENT, "extent", FG_KIND_CREATION, 0, 0, 1,
          ATTRS(A_REQ("value", FG_AT_SCALAR), A_REQ("dtype", FG_AT_DTYPE)), fg_interp_full),

    OTHER(FG_OP_LITERAL, "literal", FG_KIND_LITERAL, 0, 0, 1, ATTRS(A_REQ("value", FG_AT_SCALAR)),
          fg_interp_literal),

    /* indexing: an index outside [0, size) is clamped into it (docs/format.md 5.11) */
    OTHER(FG_OP_GATHER, "gather", FG_KIND_INDEXING, 2, 2, 1, ATTRS(A_REQ("dim", FG_AT_INT)),
          fg_interp_gather),
    OTHER(FG_OP_INDEX_SELECT, "index_select", FG_KIND_INDEXING, 2, 2, 1,
          ATTRS(A_REQ("dim", FG_AT_INT)), fg_interp_gather),
    OTHER(FG_OP_TAKE_ALONG_DIM, "take_along_dim", FG_KIND_INDEXING, 2, 2, 1,
          ATTRS(A_REQ("dim", FG_AT_INT)), fg_interp_gather),
    OTHER(FG_OP_SCATTER_ADD, "scatter_add", FG_KIND_INDEXING, 3, 3, 1,
          ATTRS(A_REQ("dim", FG_AT_INT)), fg_interp_scatter_add),
    OTHER(FG_OP_INDEX_ADD, "index_add", FG_KIND_INDEXING, 3, 3, 1, ATTRS(A_REQ("dim", FG_AT_INT)),
          fg_interp_scatter_add),
    /* MX formats */
    [FG_OP_MX_SCALE] = {FG_OP_MX_SCALE, "mx_scale", FG_KIND_POINTWISE, 1, 1, 1,
                        ATTRS({.name = "elem",
                               .type = FG_AT_DTYPE,
                               .def = {.kind = FG_ATTR_DTYPE, .dtype = FG_F8E4M3}}),
                        FG_PW_E8M0, mx_scale_f, NULL, NULL, EXACT},

    /* random numbers */
    OTHER(FG_OP_RAND, "rand", FG_KIND_CREATION, 2, 2, 1, RAND_ATTRS, fg_interp_random),
    OTHER(FG_OP_RANDN, "randn", FG_KIND_CREATION, 2, 2, 1, RAND_ATTRS, fg_interp_random),
    OTHER(FG_OP_DROPOUT, "dropout", FG_KIND_CREATION, 3, 3, 1, ATTRS(A_REQ("p", FG_AT_FLOAT)),
          fg_interp_dropout),

    /* issue 20, ops */
    UN(FG_OP_COSH, "cosh", FG_PW_FLOAT, cosh_f, NULL, LIBDEV),
    UN(FG_OP_SINH, "sinh", FG_PW_FLOAT, sinh_f, NULL, LIBDEV),
    [FG_OP_FMA] = {FG_OP_FMA, "fma", FG_KIND_POINTWISE, 3, 3, 1, 0, NULL, FG_PW_PROMOTE, fma_f,
                   fma_i, NULL, 0},
    [FG_OP_LERP] = {FG_OP_LERP, "lerp", FG_KIND_POINTWISE, 3, 3, 1, 0, NULL, FG_PW_FLOAT, lerp_f,
                    NULL, NULL, 0},
    /* not INT_ID: canonicalize would drop it on integers, and the copy is
     * the point */
    UN(FG_OP_CONTIGUOUS, "contiguous", FG_PW_PROMOTE, contiguous_f, contiguous_i,
       EXACT | IDEMP | NARROW),
    OTHER(FG_OP_STACK, "stack", FG_KIND_VIEW, 1, -1, 1, ATTRS(A_INT("dim", 0)), fg_interp_stack),
    OTHER(FG_OP_SOFTMAX, "softmax", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_REQ("dim", FG_AT_INT), A_OPT("dtype", FG_AT_DTYPE)), fg_interp_softmax),
    OTHER(FG_OP_LOG_SOFTMAX, "log_softmax", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_REQ("dim", FG_AT_INT), A_OPT("dtype", FG_AT_DTYPE)), fg_interp_softmax),
    OTHER(FG_OP_LOGSUMEXP, "logsumexp", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_OPT("dims", FG_AT_INTS), A_BOOL("keepdim", 0)), fg_interp_logsumexp),
    OTHER(FG_OP_ARGMAX, "argmax", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_OPT("dim", FG_AT_INT), A_BOOL("keepdim", 0)), fg_interp_argminmax),
    OTHER(FG_OP_ARGMIN, "argmin", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_OPT("dim", FG_AT_INT), A_BOOL("keepdim", 0)), fg_interp_argminmax),
    OTHER(FG_OP_CUMSUM, "cumsum", FG_KIND_REDUCTION, 1, 1, 1,
          ATTRS(A_REQ("dim", FG_AT_INT), A_OPT("dtype", FG_AT_DTYPE)), fg_interp_cumsum),
};

int fg_mx_elem_emax(fg_dtype elem) {
  switch (elem) {
  case FG_F8E4M3:
    return 8;
  case FG_F8E5M2:
    return 15;
  case FG_F4E2M1:
    return 2;
  default:
    return -1;
  }
}

const fg_op *fg_op_lookup(const char *name, int len) {
  for (int i = 0; i < FG_OP_COUNT; i++) {
    if (i == FG_OP_LITERAL || i == FG_OP_EXTENT)
      continue;
    if ((int)strlen(fg_ops[i].name) == len && memcmp(fg_ops[i].name, name, (size_t)len) == 0)
      return &fg_ops[i];
  }
  return NULL;
}

int fg_op_attr_index(const fg_op *op, const char *name) {
  for (int i = 0; i < op->nattrs; i++)
    if (strcmp(op->attrs[i].name, name) == 0)
      return i;
  return -1;
}
