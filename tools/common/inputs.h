/* Seeded random inputs for a graph's parameters: the same seed gives the
 * same tensors on every machine (a portable PRNG, no libc rand). Floats are
 * drawn from N(0,1) and rounded to the dtype (f8 too), ints uniformly from
 * [-8, 8] (u8 from [0, 16]), bools 50/50. Scalar parameters are 0-d. */
#ifndef FG_INPUTS_H
#define FG_INPUTS_H
#include <stdint.h>

#include "interp.h"

/* Allocates t with the (static) type and fills it; `index` is the
 * parameter's position, so each parameter gets its own stream. False on a
 * symbolic type or out of memory. */
bool fg_inputs_generate(const fg_type *type, uint64_t seed, int index, fg_tensor *t);
/* The same with integer (not bool) values uniform over [lo, hi] (lo <= hi,
 * hi - lo < 2^63; fgrun --int-range: token ids as a user's are, uniform
 * over a vocabulary, where the default [-8, 8] puts most of them in a few
 * slices once clamped); floats and bools as above. */
bool fg_inputs_generate_ints(const fg_type *type, uint64_t seed, int index, int64_t lo, int64_t hi,
                             fg_tensor *t);

#endif
