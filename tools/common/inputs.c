/* xoshiro256** seeded through splitmix64, and Box-Muller for normals. Only
 * integer arithmetic decides the bits; the normal transform uses log, sqrt
 * and cos, whose last-ulp differences between libms disappear when the value
 * is rounded to f32 or narrower (f64 inputs may differ in the last bit). */
#include "inputs.h"

#include <math.h>

typedef struct rng {
  uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next(rng *r) {
  uint64_t *s = r->s;
  uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return res;
}

static void seed_rng(rng *r, uint64_t seed, int index) {
  uint64_t x = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(index + 1));
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&x);
}

/* Uniform in (0, 1]: never 0, so log() is finite. */
static double uniform(rng *r) { return ((double)(next(r) >> 11) + 1.0) * 0x1.0p-53; }

/* Box-Muller; both values of a pair are used, in a fixed order. */
typedef struct normals {
  rng r;
  bool have;
  double next;
} normals;

static double normal(normals *g) {
  if (g->have) {
    g->have = false;
    return g->next;
  }
  double u1 = uniform(&g->r), u2 = uniform(&g->r);
  double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
  g->next = rad * sin(th);
  g->have = true;
  return rad * cos(th);
}

/* range: NULL for the defaults, else the integers' [lo, hi] (embscan) */
static bool generate(const fg_type *type, uint64_t seed, int index, const int64_t *range,
                     fg_tensor *t) {
  if (!fg_type_is_static(type))
    return false;
  int64_t sizes[FG_MAX_RANK];
  for (int d = 0; d < type->rank; d++)
    sizes[d] = type->dims[d].size;
  if (!fg_tensor_alloc(t, type->dtype, type->rank, sizes))
    return false;
  normals g = {0};
  seed_rng(&g.r, seed, index);
  rng *r = &g.r;
  int64_t n = fg_tensor_numel(t);
  fg_dtype dt = type->dtype;
  for (int64_t i = 0; i < n; i++) {
    if (fg_dtype_is_float(dt))
      fg_tensor_set_f(t, i, normal(&g));
    else if (dt == FG_BOOL)
      fg_tensor_set_i(t, i, (int64_t)(next(r) >> 63));
    else if (range)
      fg_tensor_set_i(t, i, range[0] + (int64_t)(next(r) % ((uint64_t)(range[1] - range[0]) + 1)));
    else if (dt == FG_U8)
      fg_tensor_set_i(t, i, (int64_t)(next(r) % 17));
    else
      fg_tensor_set_i(t, i, (int64_t)(next(r) % 17) - 8);
  }
  return true;
}

bool fg_inputs_generate(const fg_type *type, uint64_t seed, int index, fg_tensor *t) {
  return generate(type, seed, index, NULL, t);
}

bool fg_inputs_generate_ints(const fg_type *type, uint64_t seed, int index, int64_t lo, int64_t hi,
                             fg_tensor *t) {
  int64_t range[2] = {lo, hi};
  return generate(type, seed, index, range, t);
}
