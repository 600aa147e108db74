/* The random-number stream (random.h, docs/format.md 5.10). */
#include "random.h"

#include <math.h>

static uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void fg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += FG_PHILOX_W0;
      k1 += FG_PHILOX_W1;
    }
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(FG_PHILOX_M0, c0, &hi0);
    uint32_t lo1 = mulhilo(FG_PHILOX_M1, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

void fg_random_block(uint64_t seed, uint64_t offset, uint64_t i, uint32_t out[4]) {
  uint64_t b = i >> 2;
  const uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), (uint32_t)offset,
                           (uint32_t)(offset >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  fg_philox4x32_10(ctr, key, out);
}

int fg_random_uniform_bits(fg_dtype dt) {
  switch (dt) {
  case FG_F64:
    return 32;
  case FG_F16:
    return 11;
  case FG_BF16:
    return 8;
  case FG_F8E4M3:
    return 4;
  case FG_F8E5M2:
    return 3;
  default:
    return 24;
  }
}

double fg_random_uniform(uint32_t w, fg_dtype dt) {
  int bits = fg_random_uniform_bits(dt);
  return ldexp((double)(w >> (32 - bits)), -bits);
}

double fg_random_normal(uint64_t seed, uint64_t offset, uint64_t i, fg_dtype dt) {
  uint32_t w[4];
  fg_random_block(seed, offset, i, w);
  int p = (int)(i & 3) >> 1;
  uint32_t a = w[2 * p], b = w[2 * p + 1];
  bool sine = (i & 1) != 0;
  if (dt == FG_F64) {
    double u1 = ldexp((double)a + 1.0, -32), u2 = ldexp((double)b, -32);
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    return r * (sine ? sin(t) : cos(t));
  }
  /* f32 steps as the GPU takes them: each op rounded to f32, the
   * transcendentals correctly rounded here (the GPU's libdevice is within
   * 2 ulp of them). */
  float u1 = ldexpf((float)((a >> 8) + 1u), -24), u2 = ldexpf((float)(b >> 8), -24);
  float lg = (float)log((double)u1);
  float r = sqrtf(-2.0f * lg);
  float t = 6.28318548f * u2; /* 2*pi rounded to f32 */
  float s = (float)(sine ? sin((double)t) : cos((double)t));
  return (double)(r * s);
}

int fg_random_keep(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  uint32_t w[4];
  fg_random_block(seed, offset, i, w);
  return (float)fg_random_uniform(w[i & 3], FG_F32) >= p;
}
