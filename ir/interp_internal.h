/* Shared by the interpreter's files (interp*.c) only: the evaluation
 * context, element access with the spec's conversion rules, and a strided
 * copy. Not part of the public API (interp.h). */
#ifndef FG_INTERP_INTERNAL_H
#define FG_INTERP_INTERNAL_H
#include <limits.h>
#include <math.h>

#include "interp.h"

struct fg_interp_ctx {
  const fg_graph *g;
  fg_tensor *vals;      /* by value id */
  unsigned char *state; /* by value id: VAL_NONE / VAL_BORROWED / VAL_OWNED */
  char *err;
  size_t errcap;
};

/* The tensor of operand i of n (already computed: nodes run in order). */
const fg_tensor *fg_ix_in(fg_interp_ctx *cx, const fg_node *n, int i);
/* Allocates result i of n with the shape and dtype of its (static) type.
 * NULL after recording an error (out of memory). */
fg_tensor *fg_ix_out(fg_interp_ctx *cx, const fg_node *n, int i);
/* Records "graph:line:col: op: message" and returns false. */
bool fg_ix_fail(fg_interp_ctx *cx, const fg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Element access, inline because it is the inner loop of every op.
 * Loads give element i of a buffer of dtype dt: its exact value as a double
 * (ints above 2^53 round) or as an int64 (floats truncate toward zero,
 * saturating; NaN gives 0). Stores apply the spec's conversions: to floats
 * round to nearest even (narrow types through f32); floats to ints truncate
 * toward zero and saturate (NaN -> 0); ints to ints wrap; anything to bool is
 * != 0 (NaN -> true). */
/* f4e2m1 storage: element i in byte i/2, the low nibble for even i. */
static inline uint8_t fg_ix_f4_get(const void *p, int64_t i) {
  uint8_t b = ((const uint8_t *)p)[i >> 1];
  return (uint8_t)(i & 1 ? b >> 4 : b & 0xf);
}
static inline void fg_ix_f4_set(void *p, int64_t i, uint8_t code) {
  uint8_t *b = (uint8_t *)p + (i >> 1);
  *b = (uint8_t)(i & 1 ? (*b & 0x0f) | (code << 4) : (*b & 0xf0) | (code & 0xf));
}

static inline double fg_ix_load_f(const void *p, fg_dtype dt, int64_t i) {
  switch (dt) {
  case FG_BOOL:
    return ((const uint8_t *)p)[i] != 0;
  case FG_I8:
    return ((const int8_t *)p)[i];
  case FG_U8:
    return ((const uint8_t *)p)[i];
  case FG_I16:
    return ((const int16_t *)p)[i];
  case FG_I32:
    return ((const int32_t *)p)[i];
  case FG_I64:
    return (double)((const int64_t *)p)[i];
  case FG_F16:
    return fg_f16_to_f32(((const uint16_t *)p)[i]);
  case FG_BF16:
    return fg_bf16_to_f32(((const uint16_t *)p)[i]);
  case FG_F32:
    return ((const float *)p)[i];
  case FG_F64:
    return ((const double *)p)[i];
  case FG_F8E4M3:
    return fg_f8e4m3_to_f32(((const uint8_t *)p)[i]);
  case FG_F8E5M2:
    return fg_f8e5m2_to_f32(((const uint8_t *)p)[i]);
  case FG_F8E8M0:
    return fg_f8e8m0_to_f32(((const uint8_t *)p)[i]);
  case FG_F4E2M1:
    return fg_f4e2m1_to_f32(fg_ix_f4_get(p, i));
  default:
    return 0;
  }
}

static inline int64_t fg_ix_load_i(const void *p, fg_dtype dt, int64_t i) {
  switch (dt) {
  case FG_BOOL:
    return ((const uint8_t *)p)[i] != 0;
  case FG_I8:
    return ((const int8_t *)p)[i];
  case FG_U8:
    return ((const uint8_t *)p)[i];
  case FG_I16:
    return ((const int16_t *)p)[i];
  case FG_I32:
    return ((const int32_t *)p)[i];
  case FG_I64:
    return ((const int64_t *)p)[i];
  default:
    return fg_float_to_int(fg_ix_load_f(p, dt, i), FG_I64);
  }
}

static inline void fg_ix_store_i(void *p, fg_dtype dt, int64_t i, int64_t v);
static inline void fg_ix_store_f(void *p, fg_dtype dt, int64_t i, double v) {
  switch (dt) {
  case FG_F16:
    ((uint16_t *)p)[i] = fg_f32_to_f16((float)v);
    return;
  case FG_BF16:
    ((uint16_t *)p)[i] = fg_f32_to_bf16((float)v);
    return;
  case FG_F32:
    ((float *)p)[i] = (float)v;
    return;
  case FG_F64:
    ((double *)p)[i] = v;
    return;
  case FG_F8E4M3:
    ((uint8_t *)p)[i] = fg_f32_to_f8e4m3((float)v);
    return;
  case FG_F8E5M2:
    ((uint8_t *)p)[i] = fg_f32_to_f8e5m2((float)v);
    return;
  case FG_F8E8M0:
    ((uint8_t *)p)[i] = fg_f32_to_f8e8m0((float)v);
    return;
  case FG_F4E2M1:
    fg_ix_f4_set(p, i, fg_f32_to_f4e2m1((float)v));
    return;
  case FG_BOOL:
    ((uint8_t *)p)[i] = v != 0;
    return; /* NaN != 0: true */
  default:
    fg_ix_store_i(p, dt, i, fg_float_to_int(v, dt));
    return;
  }
}

static inline void fg_ix_store_i(void *p, fg_dtype dt, int64_t i, int64_t v) {
  switch (dt) {
  case FG_BOOL:
    ((uint8_t *)p)[i] = v != 0;
    return;
  case FG_I8:
    ((int8_t *)p)[i] = (int8_t)fg_wrap_int(v, dt);
    return;
  case FG_U8:
    ((uint8_t *)p)[i] = (uint8_t)fg_wrap_int(v, dt);
    return;
  case FG_I16:
    ((int16_t *)p)[i] = (int16_t)fg_wrap_int(v, dt);
    return;
  case FG_I32:
    ((int32_t *)p)[i] = (int32_t)fg_wrap_int(v, dt);
    return;
  case FG_I64:
    ((int64_t *)p)[i] = v;
    return;
  case FG_F64:
    ((double *)p)[i] = (double)v;
    return;
  /* Round the integer once, straight to f32 (not via double), as a GPU's
   * int-to-float conversion does; the narrow types then round from f32. */
  default:
    fg_ix_store_f(p, dt, i, (double)(float)v);
    return;
  }
}

/* Converts element si of src (dtype sdt) into element di of dst (dtype ddt). */
void fg_ix_convert(void *dst, fg_dtype ddt, int64_t di, const void *src, fg_dtype sdt, int64_t si);
/* Converts a scalar attribute (int, float or bool literal) into one element. */
void fg_ix_store_attr(void *data, fg_dtype dt, int64_t i, const fg_attr *a);

/* Row-major strides, in elements. */
void fg_ix_strides(int rank, const int64_t *sizes, int64_t *strides);
/* Copies the box `sizes` (rank dims) of dtype-dt elements from src, starting
 * at element soff, with src_strides to dst from element doff with
 * dst_strides (offsets and strides in elements, src strides may be 0 for
 * broadcasting; packed dtypes are copied a nibble at a time). */
void fg_ix_copy_strided(void *dst, int64_t doff, const int64_t *dst_strides, const void *src,
                        int64_t soff, const int64_t *src_strides, int rank, const int64_t *sizes,
                        fg_dtype dt);
/* Fills elements 1..n-1 of p with a copy of element 0. */
void fg_ix_fill_from_first(void *p, fg_dtype dt, int64_t n);

#endif
