/* The random-number stream of rand, randn and dropout (docs/format.md 5.12):
 * Philox-4x32-10 keyed by the seed, counted by the element's linear index in
 * the logical row-major result and the offset. The reference interpreter uses
 * these functions; the backend emits the same arithmetic
 * (backend_ptx/emit_value.c), and python/fusec/random_ref.py restates them. */
#ifndef FG_RANDOM_H
#define FG_RANDOM_H
#include <stdint.h>

#include "dtype.h"

/* Philox-4x32-10 round constants (Salmon et al., SC'11; Random123). */
enum {
  FG_PHILOX_M0 = 0xD2511F53u,
  FG_PHILOX_M1 = 0xCD9E8D57u,
  FG_PHILOX_W0 = 0x9E3779B9u,
  FG_PHILOX_W1 = 0xBB67AE85u,
};

/* One Philox-4x32-10 block: out = philox(ctr, key). */
void fg_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The block of element index `i`: counter (lo(i/4), hi(i/4), lo(offset),
 * hi(offset)), key (lo(seed), hi(seed)). Element i uses word i % 4 (rand,
 * dropout); randn uses words 2*((i%4)/2) and 2*((i%4)/2)+1. */
void fg_random_block(uint64_t seed, uint64_t offset, uint64_t i, uint32_t out[4]);

/* The bits a uniform of dtype dt keeps from a word: its significand width
 * (24 for f32, 8 for bf16, 11 for f16, 4 for f8e4m3, 3 for f8e5m2), 32 for
 * f64. The uniform is (w >> (32 - bits)) * 2^-bits: exact in dt, in [0, 1). */
int fg_random_uniform_bits(fg_dtype dt);
double fg_random_uniform(uint32_t w, fg_dtype dt);

/* randn's element i of dtype dt (rounded to dt by the caller): Box-Muller on
 * the block's word pair, computed in f32 (f64 for f64; see docs/format.md). */
double fg_random_normal(uint64_t seed, uint64_t offset, uint64_t i, fg_dtype dt);

/* dropout's scale of kept elements, 1/(1-p); 0 for p = 1 (nothing is
 * kept, and the literal stays finite). */
static inline double fg_dropout_scale(double p) { return p >= 1.0 ? 0.0 : 1.0 / (1.0 - p); }

/* dropout's keep decision for element i: rand's f32 uniform >= p_f32. */
int fg_random_keep(uint64_t seed, uint64_t offset, uint64_t i, float p);

#endif
