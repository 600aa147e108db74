/* Dtype helpers: rounding of known bit patterns (ties to even, subnormals,
 * overflow), integer wrapping and PyTorch's promotion table. */
#include <math.h>
#include <stdio.h>

#include "dtype.h"

#include "check.h"

static void test_bf16(void) {
  CHECK(fg_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(fg_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);     /* tie: to even (down) */
  CHECK(fg_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82); /* tie: to even (up) */
  CHECK(fg_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  CHECK(fg_f32_to_bf16(-2.0f) == 0xc000);
  CHECK(fg_f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(fg_f32_to_bf16(3.4028235e38f) == 0x7f80); /* FLT_MAX rounds past bf16's max */
  CHECK(isnan(fg_bf16_to_f32(fg_f32_to_bf16(NAN))));
  CHECK(fg_bf16_to_f32(0x3f81) == 1.0f + 0x1p-7f);
  CHECK(fg_round_to_dtype(1.0 + 0x1p-8, FG_BF16) == 1.0);
}

static void test_f16(void) {
  CHECK(fg_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(fg_f32_to_f16(65519.0f) == 0x7bff); /* below the tie with 65536 */
  CHECK(fg_f32_to_f16(65520.0f) == 0x7c00); /* the tie rounds to even: inf */
  CHECK(fg_f32_to_f16(0x1p-14f) == 0x0400); /* smallest normal */
  CHECK(fg_f32_to_f16(0x1p-24f) == 0x0001); /* smallest subnormal */
  CHECK(fg_f32_to_f16(0x1p-25f) == 0x0000); /* tie with 0: even */
  CHECK(fg_f32_to_f16(3 * 0x1p-25f) == 0x0002);
  CHECK(fg_f32_to_f16(-0.0f) == 0x8000);
  CHECK(fg_f16_to_f32(0x0001) == 0x1p-24f);
  CHECK(fg_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
  CHECK(isinf(fg_f16_to_f32(0xfc00)) && fg_f16_to_f32(0xfc00) < 0);
  CHECK(isnan(fg_f16_to_f32(0x7e00)));
  CHECK(fg_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00); /* tie: even */
}

static void test_f8(void) {
  CHECK(fg_f32_to_f8e4m3(448.0f) == 0x7e);
  CHECK(fg_f8e4m3_to_f32(0x7e) == 448.0f);
  CHECK(fg_f32_to_f8e4m3(464.0f) == 0x7e); /* tie between 448 and 480: even */
  CHECK(fg_f32_to_f8e4m3(480.0f) == 0x7f); /* overflow: NaN (no inf in e4m3fn) */
  CHECK(fg_f32_to_f8e4m3(INFINITY) == 0x7f);
  CHECK(fg_f32_to_f8e4m3(-1e9f) == 0xff);
  CHECK(isnan(fg_f8e4m3_to_f32(0x7f)));
  CHECK(fg_f32_to_f8e4m3(0x1p-9f) == 0x01);  /* smallest subnormal */
  CHECK(fg_f32_to_f8e4m3(0x1p-10f) == 0x00); /* tie with 0: even */
  CHECK(fg_f8e4m3_to_f32(0x08) == 0x1p-6f);  /* smallest normal */
  CHECK(fg_f32_to_f8e4m3(1.0625f) == 0x38);  /* 1 + 2^-4: tie, to 1.0 */
  CHECK(fg_f32_to_f8e5m2(57344.0f) == 0x7b);
  CHECK(fg_f32_to_f8e5m2(61440.0f) == 0x7c); /* tie with 65536: even is inf */
  CHECK(fg_f32_to_f8e5m2(1e6f) == 0x7c);
  CHECK(isinf(fg_f8e5m2_to_f32(0x7c)));
  CHECK(fg_f32_to_f8e5m2(0x1p-16f) == 0x01);
  CHECK(fg_round_to_dtype(500.0, FG_F8E4M3) != fg_round_to_dtype(500.0, FG_F8E4M3)); /* NaN */
}

static void test_ints_and_promotion(void) {
  CHECK(fg_wrap_int(300, FG_I8) == 44);
  CHECK(fg_wrap_int(255, FG_I8) == -1);
  CHECK(fg_wrap_int(-1, FG_U8) == 255);
  CHECK(fg_wrap_int(1 << 16, FG_I16) == 0);
  CHECK(fg_wrap_int(5, FG_BOOL) == 1);
  CHECK(fg_wrap_int(INT64_C(0x100000001), FG_I32) == 1);
  CHECK(fg_promote_types(FG_BF16, FG_F16) == FG_F32);
  CHECK(fg_promote_types(FG_U8, FG_I8) == FG_I16);
  CHECK(fg_promote_types(FG_BOOL, FG_I32) == FG_I32);
  CHECK(fg_promote_types(FG_I64, FG_F16) == FG_F16);
  CHECK(fg_promote_types(FG_F8E4M3, FG_F32) == FG_DTYPE_INVALID);
  CHECK(fg_promote_types(FG_F8E4M3, FG_F8E4M3) == FG_F8E4M3);
  CHECK(fg_round_to_dtype(0.1, FG_F32) == (double)0.1f);
  CHECK(fg_round_to_dtype(0.1, FG_F64) == 0.1);
}

int main(void) {
  test_bf16();
  test_f16();
  test_f8();
  test_ints_and_promotion();
  printf("test_dtype: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
