/* Reductions: sum amax amin mean prod, var and var_mean. For each output
 * element the reduced elements are gathered into a buffer in the
 * accumulation dtype (f32 for floats up to 32 bits, f64 for f64, i64 for
 * ints and bool), then reduced. Sums use pairwise (tree) summation: still
 * rounding to f32 at every add as a GPU does, but with an error that grows
 * like log N instead of N, so the reference stays close to the exact sum for
 * the large rows a GPU reduces in a tree anyway. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "interp_internal.h"

/* Pairwise sums in f32 and f64; blocks of 8 are summed in order. */
#define PAIRWISE(NAME, T)                                                                          \
  static T NAME(const T *x, int64_t n) {                                                           \
    if (n <= 8) {                                                                                  \
      if (n == 0)                                                                                  \
        return 0;                                                                                  \
      T s = x[0];                                                                                  \
      for (int64_t i = 1; i < n; i++)                                                              \
        s += x[i];                                                                                 \
      return s;                                                                                    \
    }                                                                                              \
    int64_t h = n / 2;                                                                             \
    return NAME(x, h) + NAME(x + h, n - h);                                                        \
  }
PAIRWISE(sum_f32, float)
PAIRWISE(sum_f64, double)

/* The iteration layout of one reduction: kept dims (output order) and
 * reduced dims, each with the input's strides. */
typedef struct layout {
  int nk, nr;
  int64_t ksz[FG_MAX_RANK], kst[FG_MAX_RANK];
  int64_t rsz[FG_MAX_RANK], rst[FG_MAX_RANK];
  int64_t M, N; /* output elements, reduced elements per output */
} layout;

static void make_layout(const fg_node *n, const fg_tensor *in, layout *L) {
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  int64_t st[FG_MAX_RANK];
  fg_ix_strides(in->rank, in->sizes, st);
  memset(L, 0, sizeof *L);
  L->M = L->N = 1;
  for (int d = 0; d < in->rank; d++) {
    if (mask[d]) {
      L->rsz[L->nr] = in->sizes[d];
      L->rst[L->nr++] = st[d];
      L->N *= in->sizes[d];
    } else {
      L->ksz[L->nk] = in->sizes[d];
      L->kst[L->nk++] = st[d];
      L->M *= in->sizes[d];
    }
  }
}

/* Offsets (in elements) of the N reduced elements relative to the base of
 * an output element, computed once and reused for every output element. */
static int64_t *reduced_offsets(const layout *L) {
  int64_t *off = malloc((size_t)(L->N ? L->N : 1) * sizeof *off);
  if (!off)
    return NULL;
  int64_t idx[FG_MAX_RANK] = {0}, o = 0;
  for (int64_t j = 0; j < L->N; j++) {
    off[j] = o;
    for (int d = L->nr - 1; d >= 0; d--) {
      o += L->rst[d];
      if (++idx[d] < L->rsz[d])
        break;
      o -= L->rst[d] * L->rsz[d];
      idx[d] = 0;
    }
  }
  return off;
}

/* Advances the kept-dims odometer; returns the new base offset. */
static int64_t next_base(const layout *L, int64_t *idx, int64_t base) {
  for (int d = L->nk - 1; d >= 0; d--) {
    base += L->kst[d];
    if (++idx[d] < L->ksz[d])
      return base;
    base -= L->kst[d] * L->ksz[d];
    idx[d] = 0;
  }
  return base;
}

/* True when the reduced elements are one contiguous run from the base (the
 * reduced dims are the innermost ones): then no offset table is needed. */
static bool contiguous_run(const layout *L) {
  int64_t s = 1;
  for (int d = L->nr - 1; d >= 0; d--) {
    if (L->rsz[d] != 1 && L->rst[d] != s)
      return false;
    s *= L->rsz[d];
  }
  return true;
}

typedef struct reducer {
  fg_opcode code;
  fg_dtype acc; /* F32, F64 or I64 */
  const fg_tensor *in;
  layout L;
  int64_t *off; /* NULL when contiguous */
  float *bf;    /* gather buffers, N elements */
  double *bd;
  int64_t *bi;
} reducer;

static void gather(reducer *r, int64_t base) {
  const void *p = r->in->data;
  fg_dtype dt = r->in->dtype;
  int64_t N = r->L.N;
  for (int64_t j = 0; j < N; j++) {
    int64_t i = base + (r->off ? r->off[j] : j);
    if (r->acc == FG_F32)
      r->bf[j] = (float)fg_ix_load_f(p, dt, i);
    else if (r->acc == FG_F64)
      r->bd[j] = fg_ix_load_f(p, dt, i);
    else
      r->bi[j] = fg_ix_load_i(p, dt, i);
  }
}

static bool reducer_init(fg_interp_ctx *cx, const fg_node *n, reducer *r) {
  memset(r, 0, sizeof *r);
  r->code = n->op->code;
  r->in = fg_ix_in(cx, n, 0);
  /* mean, var and var_mean accumulate as their result dtype does (an
   * integer input, allowed with dtype= a float type, is converted to it),
   * as opt/decompose.c computes them; sum, prod, amax and amin as their
   * input's (docs/format.md). */
  fg_opcode c = n->op->code;
  bool by_result = c == FG_OP_MEAN || c == FG_OP_VAR || c == FG_OP_VAR_MEAN;
  r->acc = fg_reduce_acc_dtype(by_result ? n->out[0]->type.dtype : r->in->dtype);
  make_layout(n, r->in, &r->L);
  size_t cnt = (size_t)(r->L.N ? r->L.N : 1);
  bool ok = true;
  if (!contiguous_run(&r->L))
    ok = (r->off = reduced_offsets(&r->L)) != NULL;
  if (ok && r->acc == FG_F32)
    ok = (r->bf = malloc(cnt * sizeof *r->bf)) != NULL;
  if (ok && r->acc == FG_F64)
    ok = (r->bd = malloc(cnt * sizeof *r->bd)) != NULL;
  if (ok && r->acc == FG_I64)
    ok = (r->bi = malloc(cnt * sizeof *r->bi)) != NULL;
  if (!ok)
    return fg_ix_fail(cx, n, "out of memory");
  return true;
}

static void reducer_free(reducer *r) {
  free(r->off);
  free(r->bf);
  free(r->bd);
  free(r->bi);
}

/* amax/amin propagate NaN (torch.amax does). */
static double minmax_f(const reducer *r, bool is_max) {
  int64_t N = r->L.N;
  if (N == 0)
    return NAN;
  double m = r->acc == FG_F32 ? r->bf[0] : r->bd[0];
  for (int64_t j = 0; j < N; j++) {
    double x = r->acc == FG_F32 ? r->bf[j] : r->bd[j];
    if (isnan(x))
      return x;
    if (is_max ? x > m : x < m)
      m = x;
  }
  return m;
}

static double reduce_float(const reducer *r) {
  int64_t N = r->L.N;
  bool f32 = r->acc == FG_F32;
  switch (r->code) {
  case FG_OP_SUM:
    return f32 ? sum_f32(r->bf, N) : sum_f64(r->bd, N);
  case FG_OP_MEAN:
    /* 0/0 for an empty reduction gives NaN, as PyTorch */
    return f32 ? (double)(float)((double)sum_f32(r->bf, N) / (double)N)
               : sum_f64(r->bd, N) / (double)N;
  case FG_OP_AMAX:
    return minmax_f(r, true);
  case FG_OP_AMIN:
    return minmax_f(r, false);
  case FG_OP_PROD: {
    if (f32) {
      float p = 1;
      for (int64_t j = 0; j < N; j++)
        p *= r->bf[j];
      return p;
    }
    double p = 1;
    for (int64_t j = 0; j < N; j++)
      p *= r->bd[j];
    return p;
  }
  default:
    return NAN;
  }
}

/* Integer sums and products wrap in int64, as the GPU's 64-bit accumulator. */
static int64_t reduce_int(const reducer *r) {
  int64_t N = r->L.N;
  const int64_t *b = r->bi;
  uint64_t acc;
  switch (r->code) {
  case FG_OP_SUM:
    acc = 0;
    for (int64_t j = 0; j < N; j++)
      acc += (uint64_t)b[j];
    return (int64_t)acc;
  case FG_OP_PROD:
    acc = 1;
    for (int64_t j = 0; j < N; j++)
      acc *= (uint64_t)b[j];
    return (int64_t)acc;
  case FG_OP_AMAX:
  case FG_OP_AMIN: {
    int64_t m = N ? b[0] : 0;
    for (int64_t j = 1; j < N; j++)
      if (r->code == FG_OP_AMAX ? b[j] > m : b[j] < m)
        m = b[j];
    return m;
  }
  default:
    return 0;
  }
}

bool fg_interp_reduce(fg_interp_ctx *cx, const fg_node *n) {
  reducer r;
  if (!reducer_init(cx, n, &r))
    return false;
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out) {
    reducer_free(&r);
    return false;
  }
  int64_t idx[FG_MAX_RANK] = {0}, base = 0;
  for (int64_t m = 0; m < r.L.M; m++) {
    gather(&r, base);
    if (r.acc == FG_I64) {
      fg_ix_store_i(out->data, out->dtype, m, reduce_int(&r));
    } else {
      fg_ix_store_f(out->data, out->dtype, m, reduce_float(&r));
    }
    base = next_base(&r.L, idx, base);
  }
  reducer_free(&r);
  return true;
}

/* Two passes in the accumulation dtype: the mean, then the sum of squared
 * deviations, divided by max(0, N - correction) (0 divides to inf or NaN, as
 * PyTorch). Each arithmetic step rounds to the accumulator. */
static void var_mean_f32(float *b, int64_t N, double corr, double *var, double *mean) {
  float mu = (float)((double)sum_f32(b, N) / (double)N);
  for (int64_t j = 0; j < N; j++) {
    float dv = b[j] - mu;
    b[j] = dv * dv;
  }
  double denom = (double)N - corr;
  if (denom < 0)
    denom = 0;
  *var = (float)((double)sum_f32(b, N) / (double)(float)denom);
  *mean = mu;
}

static void var_mean_f64(double *b, int64_t N, double corr, double *var, double *mean) {
  double mu = sum_f64(b, N) / (double)N;
  for (int64_t j = 0; j < N; j++) {
    double dv = b[j] - mu;
    b[j] = dv * dv;
  }
  double denom = (double)N - corr;
  if (denom < 0)
    denom = 0;
  *var = sum_f64(b, N) / denom;
  *mean = mu;
}

bool fg_interp_var(fg_interp_ctx *cx, const fg_node *n) {
  reducer r;
  if (!reducer_init(cx, n, &r))
    return false;
  if (r.acc == FG_I64) {
    reducer_free(&r);
    return fg_ix_fail(cx, n, "needs a floating-point input");
  }
  fg_tensor *vout = fg_ix_out(cx, n, 0);
  fg_tensor *mout = vout && n->nout > 1 ? fg_ix_out(cx, n, 1) : NULL;
  if (!vout || (n->nout > 1 && !mout)) {
    reducer_free(&r);
    return false;
  }
  double corr = fg_attr_float(n, "correction");
  int64_t idx[FG_MAX_RANK] = {0}, base = 0;
  for (int64_t m = 0; m < r.L.M; m++) {
    gather(&r, base);
    double var, mean;
    if (r.acc == FG_F32)
      var_mean_f32(r.bf, r.L.N, corr, &var, &mean);
    else
      var_mean_f64(r.bd, r.L.N, corr, &var, &mean);
    fg_ix_store_f(vout->data, vout->dtype, m, var);
    if (mout)
      fg_ix_store_f(mout->data, mout->dtype, m, mean);
    base = next_base(&r.L, idx, base);
  }
  reducer_free(&r);
  return true;
}
