/* The random-number stream (ir/random.c): Philox-4x32-10 against the
 * known-answer vectors of Random123's kat_vectors, the counter layout, the
 * uniforms' range and exactness in each dtype, and randn's pairing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "random.h"

#include "check.h"

static void test_philox_kat(void) {
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
    uint32_t out[4];
    fg_philox4x32_10(kat[t].ctr, kat[t].key, out);
    CHECK_MSG(memcmp(out, kat[t].out, sizeof out) == 0, "vector %zu: %08x %08x %08x %08x", t,
              out[0], out[1], out[2], out[3]);
  }
}

/* Element i's block: counter (lo(i/4), hi(i/4), lo(offset), hi(offset)),
 * key (lo(seed), hi(seed)). */
static void test_layout(void) {
  uint64_t seed = 0x0123456789abcdefull, off = 0xfedcba9876543210ull, i = (5ull << 32 | 7) * 4 + 3;
  uint32_t a[4], b[4];
  fg_random_block(seed, off, i, a);
  const uint32_t ctr[4] = {7, 5, 0x76543210, 0xfedcba98}, key[2] = {0x89abcdef, 0x01234567};
  fg_philox4x32_10(ctr, key, b);
  CHECK(memcmp(a, b, sizeof a) == 0);
  fg_random_block(seed, off, i - 3, b); /* the same block for i/4 equal */
  CHECK(memcmp(a, b, sizeof a) == 0);
  fg_random_block(seed, off + 1, i, b); /* the offset moves the stream */
  CHECK(memcmp(a, b, sizeof a) != 0);
}

static void test_uniform(void) {
  static const fg_dtype dts[] = {FG_F32, FG_F64, FG_BF16, FG_F16, FG_F8E4M3, FG_F8E5M2};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    fg_dtype dt = dts[k];
    double hi = fg_random_uniform(0xffffffffu, dt);
    CHECK(fg_random_uniform(0, dt) == 0.0);
    CHECK_MSG(hi < 1.0 && fg_round_to_dtype(hi, dt) == hi, "%s: %.17g", fg_dtype_name(dt), hi);
    CHECK(1.0 - hi == ldexp(1.0, -fg_random_uniform_bits(dt))); /* the step is 2^-bits */
  }
  CHECK(fg_random_uniform(0x80000000u, FG_F32) == 0.5);
  CHECK(fg_random_uniform(0x000000ffu, FG_F32) == 0.0); /* the low 8 bits are dropped */
  CHECK(fg_random_uniform(0x00000100u, FG_F32) == 0x1p-24);
  CHECK(fg_random_uniform(1, FG_F64) == 0x1p-32);
}

/* randn: elements 2p and 2p+1 of a block are the cos and sin of one pair,
 * so their squares add up to -2 ln u1; the values look normal. */
static void test_normal(void) {
  double s = 0, s2 = 0;
  int n = 40000, bad = 0;
  for (int i = 0; i < n; i++) {
    double z = fg_random_normal(42, 3, (uint64_t)i, FG_F32);
    bad += !(z == (double)(float)z && isfinite(z));
    s += z;
    s2 += z * z;
  }
  CHECK(bad == 0);
  double mean = s / n, var = s2 / n - mean * mean;
  CHECK_MSG(fabs(mean) < 0.03 && fabs(var - 1.0) < 0.05, "mean %g var %g", mean, var);
  uint32_t w[4];
  fg_random_block(42, 3, 4, w);
  double u1 = ldexp((double)((w[2] >> 8) + 1), -24);
  double a = fg_random_normal(42, 3, 6, FG_F32), b = fg_random_normal(42, 3, 7, FG_F32);
  CHECK_MSG(fabs(a * a + b * b + 2 * log(u1)) < 1e-5 * (1 - 2 * log(u1)), "%g %g %g", a, b, u1);
}

static void test_keep(void) {
  int kept = 0, n = 100000;
  for (int i = 0; i < n; i++)
    kept += fg_random_keep(7, 0, (uint64_t)i, 0.25f);
  CHECK_MSG(kept > 74000 && kept < 76000, "%d kept", kept);
  CHECK(fg_random_keep(7, 0, 0, 0.0f) == 1);
  CHECK(fg_random_keep(7, 0, 0, 1.0f) == 0);
  CHECK(fg_dropout_scale(1.0) == 0.0 && fg_dropout_scale(0.5) == 2.0);
}

int main(void) {
  test_philox_kat();
  test_layout();
  test_uniform();
  test_normal();
  test_keep();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
