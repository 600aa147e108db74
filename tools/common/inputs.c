/* xoshiro256** seeded through splitmix64, and Box-Muller for normals. Only
 * integer arithmetic decides the bits; the normal transform uses log, sqrt
 * and cos, whose last-ulp differences between libms disappear when the value
 * is rounded to f32 or narrower (f64 inputs may differ in the last bit). */
#include "inputs.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

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

/* Float inputs: normals by Box-Muller, both values of a pair used, in a
 * fixed order. The uniforms are drawn in order (cheap), and the transform
 * and the rounding to the dtype (log, sqrt, cos, sin: nearly all of the
 * time; 20 s for an attention benchmark's 200M elements on one thread)
 * run on up to GEN_THREADS threads, a chunk at a time, each thread whole
 * pairs (so also whole bytes of packed 4-bit dtypes): the values do not
 * depend on the threads. Element 2p of a chunk is pair p's cosine, 2p + 1
 * its sine; an odd last element leaves its sine unused. (The values are
 * those of the one-thread generator before, which drew a pair's two
 * uniforms, returned the cosine and kept the sine for the next element.) */
enum { GEN_CHUNK = 1 << 21, GEN_THREADS = 16, GEN_MIN_PARALLEL = 1 << 16 };

typedef struct gen_part {
  fg_tensor *t;
  const double *u; /* the chunk's uniforms, two a pair */
  int64_t base;    /* the chunk's first element */
  int64_t lo, hi;  /* this part's elements of the chunk, lo even */
} gen_part;

static void *transform(void *arg) {
  const gen_part *g = arg;
  for (int64_t e = g->lo; e < g->hi; e += 2) {
    double rad = sqrt(-2.0 * log(g->u[e])), th = 6.283185307179586 * g->u[e + 1];
    fg_tensor_set_f(g->t, g->base + e, rad * cos(th));
    if (e + 1 < g->hi)
      fg_tensor_set_f(g->t, g->base + e + 1, rad * sin(th));
  }
  return NULL;
}

static bool generate_normals(fg_tensor *t, rng *r, int64_t n) {
  int64_t cap = n < GEN_CHUNK ? (n + 1) / 2 * 2 : GEN_CHUNK;
  double *u = malloc((size_t)cap * sizeof *u);
  if (!u)
    return false;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = cpus < 1 ? 1 : cpus > GEN_THREADS ? GEN_THREADS : (int)cpus;
  for (int64_t base = 0; base < n; base += GEN_CHUNK) {
    int64_t m = n - base < GEN_CHUNK ? n - base : GEN_CHUNK, pairs = (m + 1) / 2;
    for (int64_t i = 0; i < 2 * pairs; i++)
      u[i] = uniform(r);
    int parts = m < GEN_MIN_PARALLEL ? 1 : nt;
    gen_part part[GEN_THREADS];
    pthread_t tid[GEN_THREADS];
    bool started[GEN_THREADS] = {false};
    for (int k = 0; k < parts; k++) {
      int64_t lo = pairs * k / parts * 2, hi = pairs * (k + 1) / parts * 2;
      part[k] = (gen_part){t, u, base, lo, hi < m ? hi : m};
      /* part 0 here, the others on threads (inline where one fails to start) */
      if (k > 0)
        started[k] = pthread_create(&tid[k], NULL, transform, &part[k]) == 0;
    }
    transform(&part[0]);
    for (int k = 1; k < parts; k++) {
      if (started[k])
        pthread_join(tid[k], NULL);
      else
        transform(&part[k]);
    }
  }
  free(u);
  return true;
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
  rng rs, *r = &rs;
  seed_rng(r, seed, index);
  int64_t n = fg_tensor_numel(t);
  fg_dtype dt = type->dtype;
  if (fg_dtype_is_float(dt)) {
    if (n == 0 || generate_normals(t, r, n))
      return true;
    fg_tensor_free(t);
    return false;
  }
  for (int64_t i = 0; i < n; i++) {
    if (dt == FG_BOOL)
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
