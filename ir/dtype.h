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
  FG_DTYPE_COUNT,
  FG_DTYPE_INVALID = -1
} fg_dtype;

typedef enum fg_category { FG_CAT_BOOL, FG_CAT_INT, FG_CAT_FLOAT } fg_category;

const char *fg_dtype_name(fg_dtype t);
/* -1 (FG_DTYPE_INVALID) when the name is not a dtype. */
fg_dtype fg_dtype_from_name(const char *s, int len);
int fg_dtype_size(fg_dtype t);
fg_category fg_dtype_category(fg_dtype t);
static inline bool fg_dtype_is_float(fg_dtype t) { return fg_dtype_category(t) == FG_CAT_FLOAT; }
static inline bool fg_dtype_is_int(fg_dtype t) { return fg_dtype_category(t) == FG_CAT_INT; }
bool fg_dtype_is_f8(fg_dtype t);
/* True for f16, bf16 and the f8 types: computed in f32, rounded at op outputs. */
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
