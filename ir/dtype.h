/* Element types of the .fg language, their storage and PyTorch's promotion. */
#ifndef FG_DTYPE_H
#define FG_DTYPE_H
#include <stdbool.h>
#include <stdint.h>

typedef enum fg_dtype {
  FG_BOOL,
  FG_I8,
  FG_U8,
  FG_I16,
  FG_I32,
  FG_I64,
  FG_F16,
  FG_BF16,
  FG_F32,
  FG_F64,
  FG_F8E4M3,
  FG_F8E5M2,
  /* MX formats */
  FG_F8E8M0, /* the MX scale: 2^(e-127), no sign, 0xff NaN */
  FG_F4E2M1, /* packed two a byte, element 2k in the low nibble */
  FG_DTYPE_COUNT,
  FG_DTYPE_INVALID = -1
} fg_dtype;

typedef enum fg_category { FG_CAT_BOOL, FG_CAT_INT, FG_CAT_FLOAT } fg_category;

const char *fg_dtype_name(fg_dtype t);
/* -1 (FG_DTYPE_INVALID) when the name is not a dtype. */
fg_dtype fg_dtype_from_name(const char *s, int len);
/* Bytes of one element; f4e2m1: 1, the byte that holds two elements (use
 * fg_dtype_nbytes for a tensor's storage). */
int fg_dtype_size(fg_dtype t);
/* Bits of one element (4 for f4e2m1). */
int fg_dtype_bits(fg_dtype t);
/* Storage bytes of n elements: n * bits / 8 rounded up (f4e2m1 packs two
 * elements a byte, element 2k in the low nibble of byte k). */
int64_t fg_dtype_nbytes(fg_dtype t, int64_t n);
/* True for the packed sub-byte dtypes (f4e2m1). */
static inline bool fg_dtype_is_packed(fg_dtype t) { return t == FG_F4E2M1; }
fg_category fg_dtype_category(fg_dtype t);
static inline bool fg_dtype_is_float(fg_dtype t) { return fg_dtype_category(t) == FG_CAT_FLOAT; }
static inline bool fg_dtype_is_int(fg_dtype t) { return fg_dtype_category(t) == FG_CAT_INT; }
bool fg_dtype_is_f8(fg_dtype t);
/* The MX formats f8e8m0 and f4e2m1: like the f8 types they promote only with
 * themselves. */
bool fg_dtype_is_mx(fg_dtype t);
/* True for f16, bf16, the f8 types and the MX formats: computed in f32,
 * rounded at op outputs. */
bool fg_dtype_is_narrow_float(fg_dtype t);

/* PyTorch's promote_types for two dtypes of any category. Float8 types promote
 * only with themselves; FG_DTYPE_INVALID means "no common type". */
fg_dtype fg_promote_types(fg_dtype a, fg_dtype b);

/* The default dtype of a category (bool, i64, f32), used for weak scalars that
 * outrank every tensor operand. */
fg_dtype fg_default_dtype(fg_category c);

/* Scalar conversions with the spec's rounding (round to nearest even). */
uint16_t fg_f32_to_bf16(float f);
float fg_bf16_to_f32(uint16_t h);
uint16_t fg_f32_to_f16(float f);
float fg_f16_to_f32(uint16_t h);
uint8_t fg_f32_to_f8e4m3(float f); /* "fn": no inf, NaN 0x7f; overflow -> NaN */
float fg_f8e4m3_to_f32(uint8_t b);
uint8_t fg_f32_to_f8e5m2(float f); /* IEEE-like; overflow -> inf */
float fg_f8e5m2_to_f32(uint8_t b);
/* f8e8m0 (OCP MX scale): code e is 2^(e-127), 0xff NaN; no sign, no zero.
 * From f32 as PyTorch's float8_e8m0fnu: the sign is dropped, the f32
 * exponent field kept and rounded up when the significand's dropped bits
 * are past half, or exactly half with the implicit bit set (ties to even,
 * the implicit bit the LSB); inf and NaN give 0xff. */
uint8_t fg_f32_to_f8e8m0(float f);
float fg_f8e8m0_to_f32(uint8_t b);
/* f4e2m1 (OCP FP4, NVFP4/MXFP4 elements): 4-bit code s.ee.m, values
 * +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no inf, no NaN. From f32: round to nearest
 * even, saturating at +-6 (inf too), NaN gives 0x7 (+6) as PTX's
 * cvt.rn.satfinite.e2m1x2.f32 does. */
uint8_t fg_f32_to_f4e2m1(float f);
float fg_f4e2m1_to_f32(uint8_t code);

/* Round a double to the value representable in a float dtype, through f32
 * first for the narrow types (the spec computes them in f32). */
double fg_round_to_dtype(double v, fg_dtype t);
/* Wrap/saturate an integer to an integer dtype's range (two's complement wrap,
 * as C casts on the GPU do). Bool: nonzero -> 1. */
int64_t fg_wrap_int(int64_t v, fg_dtype t);
/* A double as an int64 the way the GPU converts (cvt.rzi.s64.f64):
 * truncated toward zero, saturated at the int64 range, NaN as 0. The one
 * definition for literals and attributes (a plain C cast of inf or NaN is
 * undefined behaviour). */
int64_t fg_f64_to_i64(double v);
/* A double stored into an integer (or bool) dtype, as the cast op and the
 * GPU's cvt do it: truncated toward zero, saturated at the dtype's range,
 * NaN as 0 (bool: v != 0). The one definition for the interpreter's stores
 * and the backend's constants (a pad or full value of -inf in an i32
 * tensor is INT32_MIN, not the low bits of INT64_MIN). */
int64_t fg_float_to_int(double v, fg_dtype dt);

#endif
