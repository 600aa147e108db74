#include "dtype.h"

#include <math.h>
#include <string.h>

static const struct {
  const char *name;
  int size;
  fg_category cat;
} dtypes[FG_DTYPE_COUNT] = {
    [FG_BOOL] = {"bool", 1, FG_CAT_BOOL},
    [FG_I8] = {"i8", 1, FG_CAT_INT},
    [FG_U8] = {"u8", 1, FG_CAT_INT},
    [FG_I16] = {"i16", 2, FG_CAT_INT},
    [FG_I32] = {"i32", 4, FG_CAT_INT},
    [FG_I64] = {"i64", 8, FG_CAT_INT},
    [FG_F16] = {"f16", 2, FG_CAT_FLOAT},
    [FG_BF16] = {"bf16", 2, FG_CAT_FLOAT},
    [FG_F32] = {"f32", 4, FG_CAT_FLOAT},
    [FG_F64] = {"f64", 8, FG_CAT_FLOAT},
    [FG_F8E4M3] = {"f8e4m3", 1, FG_CAT_FLOAT},
    [FG_F8E5M2] = {"f8e5m2", 1, FG_CAT_FLOAT},
    /* MX formats */
    [FG_F8E8M0] = {"f8e8m0", 1, FG_CAT_FLOAT},
    [FG_F4E2M1] = {"f4e2m1", 1, FG_CAT_FLOAT},
};

const char *fg_dtype_name(fg_dtype t) {
  return (t >= 0 && t < FG_DTYPE_COUNT) ? dtypes[t].name : "<invalid>";
}

fg_dtype fg_dtype_from_name(const char *s, int len) {
  for (int i = 0; i < FG_DTYPE_COUNT; i++)
    if ((int)strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, s, (size_t)len) == 0)
      return (fg_dtype)i;
  return FG_DTYPE_INVALID;
}

int fg_dtype_size(fg_dtype t) { return dtypes[t].size; }
int fg_dtype_bits(fg_dtype t) { return t == FG_F4E2M1 ? 4 : 8 * dtypes[t].size; }
int64_t fg_dtype_nbytes(fg_dtype t, int64_t n) {
  return t == FG_F4E2M1 ? (n + 1) / 2 : n * dtypes[t].size;
}
fg_category fg_dtype_category(fg_dtype t) { return dtypes[t].cat; }
bool fg_dtype_is_f8(fg_dtype t) { return t == FG_F8E4M3 || t == FG_F8E5M2; }
bool fg_dtype_is_mx(fg_dtype t) { return t == FG_F8E8M0 || t == FG_F4E2M1; }
bool fg_dtype_is_narrow_float(fg_dtype t) {
  return t == FG_F16 || t == FG_BF16 || fg_dtype_is_f8(t) || fg_dtype_is_mx(t);
}

fg_dtype fg_default_dtype(fg_category c) {
  return c == FG_CAT_BOOL ? FG_BOOL : c == FG_CAT_INT ? FG_I64 : FG_F32;
}

/* Rank of the integer types in PyTorch's lattice; u8 with a signed type
 * needs the next wider signed type. */
static int int_bits(fg_dtype t) {
  switch (t) {
  case FG_I8:
  case FG_U8:
    return 8;
  case FG_I16:
    return 16;
  case FG_I32:
    return 32;
  default:
    return 64;
  }
}

fg_dtype fg_promote_types(fg_dtype a, fg_dtype b) {
  if (a == b)
    return a;
  if (fg_dtype_is_f8(a) || fg_dtype_is_f8(b) || fg_dtype_is_mx(a) || fg_dtype_is_mx(b))
    return FG_DTYPE_INVALID;
  if (a == FG_BOOL)
    return b;
  if (b == FG_BOOL)
    return a;
  fg_category ca = fg_dtype_category(a), cb = fg_dtype_category(b);
  if (ca == FG_CAT_FLOAT && cb != FG_CAT_FLOAT)
    return a;
  if (cb == FG_CAT_FLOAT && ca != FG_CAT_FLOAT)
    return b;
  if (ca == FG_CAT_FLOAT) {
    if (a == FG_F64 || b == FG_F64)
      return FG_F64;
    return FG_F32; /* f16+bf16, or either with f32 */
  }
  /* both integers */
  if (a == FG_U8 || b == FG_U8) {
    fg_dtype o = a == FG_U8 ? b : a;
    return o == FG_I8 ? FG_I16 : o;
  }
  return int_bits(a) >= int_bits(b) ? a : b;
}

/* ---- rounding ---- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t fg_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if (isnan(f))
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float fg_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* A small IEEE-style binary format: M mantissa bits, exponent bias `bias`,
 * `ieee_inf` says whether the all-ones exponent is inf/NaN (f16, e5m2) or
 * whether only the all-ones pattern is NaN (e4m3fn). Encoding rounds to
 * nearest even with an unbounded exponent first, then checks the range. */
typedef struct {
  int ebits, mbits, bias;
  bool ieee_inf;
} small_fmt;

static const small_fmt F16 = {5, 10, 15, true};
static const small_fmt E4M3 = {4, 3, 7, false};
static const small_fmt E5M2 = {5, 2, 15, true};

static double small_max(small_fmt f) {
  int emax = (1 << f.ebits) - 1 - f.bias - (f.ieee_inf ? 1 : 0);
  /* e4m3fn: the top exponent keeps mantissas 0..110, 111 is NaN */
  double mant = f.ieee_inf ? 2.0 - ldexp(1.0, -f.mbits) : 2.0 - ldexp(1.0, 1 - f.mbits);
  return ldexp(mant, emax);
}

static uint32_t small_encode(float x, small_fmt f) {
  uint32_t sign = (f32_bits(x) >> 31) << (f.ebits + f.mbits);
  uint32_t nan = (1u << (f.ebits + f.mbits)) - 1; /* e4m3fn's only NaN */
  uint32_t exp_all = ((1u << f.ebits) - 1) << f.mbits;
  if (isnan(x))
    return f.ieee_inf ? (exp_all | (1u << (f.mbits - 1))) : (sign | nan);
  double a = fabs((double)x);
  int emin = 1 - f.bias;
  if (isinf(x))
    return f.ieee_inf ? (sign | exp_all) : (sign | nan);
  if (a == 0)
    return sign;
  int e;
  frexp(a, &e);
  int ex = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, ex - f.mbits);
  double r = rint(a / q) * q;
  if (r > small_max(f))
    return f.ieee_inf ? (sign | exp_all) : (sign | nan);
  if (r == 0)
    return sign;
  frexp(r, &e);
  ex = e - 1;
  if (ex < emin) /* subnormal */
    return sign | (uint32_t)(r / ldexp(1.0, emin - f.mbits));
  uint32_t m = (uint32_t)(r / ldexp(1.0, ex - f.mbits)) - (1u << f.mbits);
  return sign | ((uint32_t)(ex + f.bias) << f.mbits) | m;
}

static float small_decode(uint32_t b, small_fmt f) {
  uint32_t sign = (b >> (f.ebits + f.mbits)) & 1;
  uint32_t e = (b >> f.mbits) & ((1u << f.ebits) - 1);
  uint32_t m = b & ((1u << f.mbits) - 1);
  double v;
  if (f.ieee_inf && e == (1u << f.ebits) - 1)
    v = m ? NAN : INFINITY;
  else if (!f.ieee_inf && e == (1u << f.ebits) - 1 && m == (1u << f.mbits) - 1)
    v = NAN;
  else if (e == 0)
    v = ldexp((double)m, 1 - f.bias - f.mbits);
  else
    v = ldexp(1.0 + ldexp((double)m, -f.mbits), (int)e - f.bias);
  return (float)(sign ? -v : v);
}

uint16_t fg_f32_to_f16(float f) { return (uint16_t)small_encode(f, F16); }
float fg_f16_to_f32(uint16_t h) { return small_decode(h, F16); }
uint8_t fg_f32_to_f8e4m3(float f) { return (uint8_t)small_encode(f, E4M3); }
float fg_f8e4m3_to_f32(uint8_t b) { return small_decode(b, E4M3); }
uint8_t fg_f32_to_f8e5m2(float f) { return (uint8_t)small_encode(f, E5M2); }
float fg_f8e5m2_to_f32(uint8_t b) { return small_decode(b, E5M2); }

/* ---- MX formats ---- */

uint8_t fg_f32_to_f8e8m0(float f) {
  uint32_t u = f32_bits(f);
  uint32_t e = (u >> 23) & 0xff;
  if (e == 0xff)
    return 0xff; /* inf, NaN */
  uint32_t m = u & 0x7fffff;
  bool guard = m & 0x400000, rest = m & 0x3fffff, lsb = e > 0;
  if (guard && (rest || lsb))
    e++; /* 0xfe rounds up to 0xff, NaN: 2^128 is past the range */
  return (uint8_t)e;
}

float fg_f8e8m0_to_f32(uint8_t b) {
  if (b == 0xff)
    return NAN;
  if (b == 0)
    return bits_f32(0x00400000u); /* 2^-127, an f32 subnormal */
  return bits_f32((uint32_t)b << 23);
}

/* e2m1 magnitudes by code 0..7; the boundaries between neighbours are the
 * midpoints 0.25 0.75 1.25 1.75 2.5 3.5 5, a tie going to the even code. */
static const float e2m1_values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

uint8_t fg_f32_to_f4e2m1(float f) {
  if (isnan(f))
    return 0x7;
  uint8_t sign = signbit(f) ? 0x8 : 0;
  float a = fabsf(f);
  uint8_t c = 0;
  while (c < 7) {
    float mid = (e2m1_values[c] + e2m1_values[c + 1]) / 2;
    if (a < mid || (a == mid && (c & 1) == 0))
      break;
    c++;
  }
  return sign | c;
}

float fg_f4e2m1_to_f32(uint8_t code) {
  float v = e2m1_values[code & 7];
  return code & 8 ? -v : v;
}

double fg_round_to_dtype(double v, fg_dtype t) {
  float f = (float)v;
  switch (t) {
  case FG_F64:
    return v;
  case FG_F32:
    return f;
  case FG_BF16:
    return fg_bf16_to_f32(fg_f32_to_bf16(f));
  case FG_F16:
    return fg_f16_to_f32(fg_f32_to_f16(f));
  case FG_F8E4M3:
    return fg_f8e4m3_to_f32(fg_f32_to_f8e4m3(f));
  case FG_F8E5M2:
    return fg_f8e5m2_to_f32(fg_f32_to_f8e5m2(f));
  case FG_F8E8M0:
    return fg_f8e8m0_to_f32(fg_f32_to_f8e8m0(f));
  case FG_F4E2M1:
    return fg_f4e2m1_to_f32(fg_f32_to_f4e2m1(f));
  default:
    return v;
  }
}

int64_t fg_wrap_int(int64_t v, fg_dtype t) {
  switch (t) {
  case FG_BOOL:
    return v != 0;
  case FG_I8:
    return (int8_t)(uint8_t)(uint64_t)v;
  case FG_U8:
    return (uint8_t)(uint64_t)v;
  case FG_I16:
    return (int16_t)(uint16_t)(uint64_t)v;
  case FG_I32:
    return (int32_t)(uint32_t)(uint64_t)v;
  default:
    return v;
  }
}

int64_t fg_f64_to_i64(double v) {
  if (isnan(v))
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

int64_t fg_float_to_int(double v, fg_dtype dt) {
  if (isnan(v))
    return 0;
  if (dt == FG_BOOL)
    return v != 0;
  v = trunc(v);
  int64_t lo, hi;
  switch (dt) {
  case FG_I8:
    lo = INT8_MIN;
    hi = INT8_MAX;
    break;
  case FG_U8:
    lo = 0;
    hi = UINT8_MAX;
    break;
  case FG_I16:
    lo = INT16_MIN;
    hi = INT16_MAX;
    break;
  case FG_I32:
    lo = INT32_MIN;
    hi = INT32_MAX;
    break;
  default:
    return fg_f64_to_i64(v); /* 2^63 is exact as a double, so i64 saturates right */
  }
  if (v <= (double)lo)
    return lo;
  if (v >= (double)hi)
    return hi;
  return (int64_t)v;
}
