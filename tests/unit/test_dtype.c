/* Dtype helpers: rounding of known bit patterns (ties to even, subnormals,
 * overflow), integer wrapping and PyTorch's promotion table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* MX formats. f8e8m0 from f32: PyTorch's float8_e8m0fnu conversion; the
 * table is torch 2.15's x.to(torch.float8_e8m0fnu) for these f32 bit
 * patterns (ties on the guard bit, f32 subnormals, the top binade, signs,
 * inf/NaN and random patterns). */
static void test_e8m0(void) {
  static const struct {
    uint32_t f32;
    uint8_t code;
  } torch_ref[] = {
      {0x00000000u, 0x00}, {0x80000000u, 0x00}, {0x3f800000u, 0x7f}, {0x3fc00000u, 0x80},
      {0x3fbfffffu, 0x7f}, {0x3fc00001u, 0x80}, {0x00400000u, 0x00}, {0x00400001u, 0x01},
      {0x00600000u, 0x01}, {0x00200000u, 0x00}, {0x007fffffu, 0x01}, {0x00800000u, 0x01},
      {0x7f000000u, 0xfe}, {0x7f400000u, 0xff}, {0x7f3fffffu, 0xfe}, {0x7f7fffffu, 0xff},
      {0x7f800000u, 0xff}, {0xff800000u, 0xff}, {0x7fc00000u, 0xff}, {0xbfc00000u, 0x80},
      {0x40400000u, 0x81}, {0x3f400000u, 0x7f}, {0x3f3fffffu, 0x7e}, {0x00000001u, 0x00},
      {0x2265b1f5u, 0x45}, {0x91b7584au, 0x23}, {0xd8f16adfu, 0xb2}, {0xcd613e30u, 0x9b},
      {0xc386bbc4u, 0x87}, {0x1027c4d1u, 0x20}, {0x414c343cu, 0x83}, {0x1e2feb89u, 0x3c},
  };
  for (size_t i = 0; i < sizeof torch_ref / sizeof torch_ref[0]; i++) {
    float f;
    memcpy(&f, &torch_ref[i].f32, 4);
    CHECK_MSG(fg_f32_to_f8e8m0(f) == torch_ref[i].code, "e8m0 of 0x%08x: 0x%02x, torch 0x%02x",
              torch_ref[i].f32, fg_f32_to_f8e8m0(f), torch_ref[i].code);
  }
  /* all 256 codes: 2^(e-127), 0xff NaN; each power of two encodes back to its code */
  int bad = 0;
  for (int c = 0; c < 256; c++) {
    float v = fg_f8e8m0_to_f32((uint8_t)c);
    if (c == 255)
      bad += !isnan(v);
    else
      bad += v != ldexpf(1.0f, c - 127) || fg_f32_to_f8e8m0(v) != c ||
             fg_round_to_dtype(v, FG_F8E8M0) != v;
  }
  CHECK_MSG(bad == 0, "%d e8m0 codes decode or round-trip wrong", bad);
  CHECK(fg_f8e8m0_to_f32(0) == 0x1p-127f && fg_f8e8m0_to_f32(127) == 1.0f);
  CHECK(fg_dtype_size(FG_F8E8M0) == 1 && fg_dtype_bits(FG_F8E8M0) == 8);
}

/* f4e2m1: the OCP MX spec's FP4 table (5.3.3: E2M1, bias 1, max normal 6,
 * min normal 1, the one subnormal 0.5), all 16 codes, round to nearest even
 * at every midpoint, saturation and the packed storage size. */
static void test_e2m1(void) {
  static const float spec[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; c++) {
    float v = fg_f4e2m1_to_f32((uint8_t)c), want = c & 8 ? -spec[c & 7] : spec[c & 7];
    CHECK_MSG(v == want && (signbit(v) != 0) == ((c & 8) != 0), "e2m1 code %d: %g", c, v);
    CHECK_MSG(fg_f32_to_f4e2m1(v) == c, "e2m1 code %d does not round-trip", c);
  }
  /* midpoints: ties to the even code (0, 1.0, 2.0, 4.0 are even codes) */
  CHECK(fg_f32_to_f4e2m1(0.25f) == 0x0 && fg_f32_to_f4e2m1(0.2500001f) == 0x1);
  CHECK(fg_f32_to_f4e2m1(0.75f) == 0x2 && fg_f32_to_f4e2m1(0.7499999f) == 0x1);
  CHECK(fg_f32_to_f4e2m1(1.25f) == 0x2 && fg_f32_to_f4e2m1(1.75f) == 0x4);
  CHECK(fg_f32_to_f4e2m1(2.5f) == 0x4 && fg_f32_to_f4e2m1(3.5f) == 0x6);
  CHECK(fg_f32_to_f4e2m1(5.0f) == 0x6 && fg_f32_to_f4e2m1(5.0000005f) == 0x7);
  /* saturation (no inf in FP4), NaN to +6, signed zero */
  CHECK(fg_f32_to_f4e2m1(7.0f) == 0x7 && fg_f32_to_f4e2m1(1e30f) == 0x7);
  CHECK(fg_f32_to_f4e2m1(-INFINITY) == 0xf && fg_f32_to_f4e2m1(NAN) == 0x7);
  CHECK(fg_f32_to_f4e2m1(-0.0f) == 0x8 && fg_f32_to_f4e2m1(-0.1f) == 0x8);
  CHECK(fg_round_to_dtype(2.6, FG_F4E2M1) == 3.0 && fg_round_to_dtype(-100, FG_F4E2M1) == -6.0);
  /* every bf16 input: the nearest e2m1 value, ties to the even code */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float x = fg_bf16_to_f32((uint16_t)h);
    uint8_t c = fg_f32_to_f4e2m1(x);
    if (isnan(x)) {
      bad += c != 0x7;
      continue;
    }
    double a = fabs((double)x), best = 0; /* distances in double: exact */
    int bc = a >= 6 ? 7 : 0;              /* saturating: past 6 is 6 */
    for (int k = 0; k < 8 && a < 6; k++) {
      double d = fabs(a - spec[k]), db = fabs(a - best);
      if (d < db || (d == db && (k & 1) == 0 && (bc & 1))) {
        best = spec[k];
        bc = k;
      }
    }
    if (c != ((signbit(x) ? 8 : 0) | bc) && bad++ < 3)
      fprintf(stderr, "  bf16 0x%04x (%g): code %d, nearest %d\n", h, x, c, bc);
  }
  CHECK_MSG(bad == 0, "%d bf16 inputs round to the wrong e2m1 code", bad);
  CHECK(fg_dtype_bits(FG_F4E2M1) == 4 && fg_dtype_nbytes(FG_F4E2M1, 10) == 5 &&
        fg_dtype_nbytes(FG_BF16, 10) == 20);
  CHECK(fg_promote_types(FG_F4E2M1, FG_F32) == FG_DTYPE_INVALID);
  CHECK(fg_promote_types(FG_F8E8M0, FG_F8E4M3) == FG_DTYPE_INVALID);
  CHECK(fg_promote_types(FG_F4E2M1, FG_F4E2M1) == FG_F4E2M1);
  CHECK(fg_dtype_from_name("f4e2m1", 6) == FG_F4E2M1 &&
        fg_dtype_from_name("f8e8m0", 6) == FG_F8E8M0);
}

int main(void) {
  test_e8m0();
  test_e2m1();
  test_bf16();
  test_f16();
  test_f8();
  test_ints_and_promotion();
  printf("test_dtype: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
