/* The reference semantics of issue 20's composite ops: stack, softmax,
 * log_softmax, logsumexp, argmax and argmin. opt/decompose.c rewrites each
 * into simpler ops before the compiler sees it; these evaluators are
 * written directly from PyTorch's definitions instead, so that the GPU
 * check compares the decomposition against an independent reference.
 *
 * Floats are computed in the accumulation dtype (f32, or f64 for f64), each
 * step rounded as the GPU rounds it: the maximum is exact, exp/log are
 * evaluated in double and rounded once, the sum is pairwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "interp_internal.h"

static int norm(int64_t d, int rank) { return (int)(d < 0 ? d + rank : d); }

/* Rounds v to dtype dt (through a one-element buffer: the spec's store). */
static double as_dtype(double v, fg_dtype dt) {
  uint64_t buf = 0;
  fg_ix_store_f(&buf, dt, 0, v);
  return fg_ix_load_f(&buf, dt, 0);
}

/* ---- the reduced extents of one output element ---- */

/* Row-major iteration over the outputs (kept dims) and, for each, the
 * offsets of its N reduced elements (dims with mask[d]). */
typedef struct lanes {
  int64_t M, N;
  int nk;
  int64_t ksz[FG_MAX_RANK], kst[FG_MAX_RANK];
  int64_t *off; /* N offsets from an output's base */
} lanes;

static bool lanes_init(lanes *L, const fg_tensor *in, const bool *mask) {
  int64_t st[FG_MAX_RANK], rsz[FG_MAX_RANK], rst[FG_MAX_RANK];
  int nr = 0;
  fg_ix_strides(in->rank, in->sizes, st);
  memset(L, 0, sizeof *L);
  L->M = L->N = 1;
  for (int d = 0; d < in->rank; d++) {
    if (mask[d]) {
      rsz[nr] = in->sizes[d];
      rst[nr++] = st[d];
      L->N *= in->sizes[d];
    } else {
      L->ksz[L->nk] = in->sizes[d];
      L->kst[L->nk++] = st[d];
      L->M *= in->sizes[d];
    }
  }
  L->off = malloc((size_t)(L->N ? L->N : 1) * sizeof *L->off);
  if (!L->off)
    return false;
  int64_t idx[FG_MAX_RANK] = {0}, o = 0;
  for (int64_t j = 0; j < L->N; j++) {
    L->off[j] = o;
    for (int d = nr - 1; d >= 0; d--) {
      o += rst[d];
      if (++idx[d] < rsz[d])
        break;
      o -= rst[d] * rsz[d];
      idx[d] = 0;
    }
  }
  return true;
}

/* The base offset of output element m (row-major over the kept dims). */
static int64_t lanes_base(const lanes *L, int64_t m) {
  int64_t base = 0;
  for (int d = L->nk - 1; d >= 0; d--) {
    base += (m % L->ksz[d]) * L->kst[d];
    m /= L->ksz[d];
  }
  return base;
}

static double rnd(double v, bool f32) { return f32 ? (double)(float)v : v; }

/* Pairwise sum, rounding at every add in the accumulation dtype. */
static double pairwise(const double *x, int64_t n, bool f32) {
  if (n <= 8) {
    double s = n ? x[0] : 0;
    for (int64_t i = 1; i < n; i++)
      s = rnd(s + x[i], f32);
    return s;
  }
  int64_t h = n / 2;
  return rnd(pairwise(x, h, f32) + pairwise(x + h, n - h, f32), f32);
}

/* NaN-propagating maximum of n values (-inf when empty). */
static double max_of(const double *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    if (isnan(x[j]))
      return x[j];
    if (x[j] > m)
      m = x[j];
  }
  return m;
}

/* ---- stack ---- */

bool fg_interp_stack(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int dim = norm(fg_attr_int(n, "dim"), out->rank);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < out->rank; d++)
    if (d < dim)
      outer *= out->sizes[d];
    else if (d > dim)
      inner *= out->sizes[d];
  int64_t count = n->nin;
  for (int i = 0; i < n->nin; i++) {
    const fg_tensor *in = fg_ix_in(cx, n, i);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < inner; j++)
        fg_ix_convert(out->data, out->dtype, (o * count + i) * inner + j, in->data, in->dtype,
                      o * inner + j);
  }
  return true;
}

/* ---- softmax, log_softmax, logsumexp ---- */

/* The shared loop: for each output element, the reduced values (converted
 * to `pre` first when it is set, then to the accumulation dtype) in v. */
typedef struct rows {
  lanes L;
  double *v;
  bool f32;
} rows;

static bool rows_init(fg_interp_ctx *cx, const fg_node *n, rows *r, const bool *mask,
                      fg_dtype acc_of) {
  r->f32 = fg_reduce_acc_dtype(acc_of) == FG_F32;
  r->v = NULL;
  if (!lanes_init(&r->L, fg_ix_in(cx, n, 0), mask) ||
      !(r->v = malloc((size_t)(r->L.N ? r->L.N : 1) * sizeof *r->v))) {
    free(r->L.off);
    return fg_ix_fail(cx, n, "out of memory");
  }
  return true;
}

static void rows_free(rows *r) {
  free(r->L.off);
  free(r->v);
}

static void rows_load(rows *r, const fg_tensor *in, int64_t base, fg_dtype pre) {
  for (int64_t j = 0; j < r->L.N; j++) {
    double x = fg_ix_load_f(in->data, in->dtype, base + r->L.off[j]);
    if (pre != FG_DTYPE_INVALID && pre != in->dtype)
      x = as_dtype(x, pre);
    r->v[j] = rnd(x, r->f32);
  }
}

/* softmax: exp(x - max) / sum; log_softmax: (x - max) - log(sum), as
 * PyTorch computes them (a row with NaN or with max = +-inf gives NaN). */
bool fg_interp_softmax(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  bool mask[FG_MAX_RANK] = {0};
  mask[norm(fg_attr_int(n, "dim"), in->rank)] = true;
  rows r;
  if (!rows_init(cx, n, &r, mask, out->dtype))
    return false;
  bool is_log = n->op->code == FG_OP_LOG_SOFTMAX, f32 = r.f32;
  for (int64_t m = 0; m < r.L.M; m++) {
    int64_t base = lanes_base(&r.L, m);
    rows_load(&r, in, base, out->dtype);
    double mx = max_of(r.v, r.L.N);
    double *e = malloc((size_t)(r.L.N ? r.L.N : 1) * sizeof *e);
    if (!e) {
      rows_free(&r);
      return fg_ix_fail(cx, n, "out of memory");
    }
    for (int64_t j = 0; j < r.L.N; j++)
      e[j] = rnd(exp(rnd(r.v[j] - mx, f32)), f32);
    double s = pairwise(e, r.L.N, f32);
    double ls = rnd(log(s), f32);
    for (int64_t j = 0; j < r.L.N; j++) {
      double y = is_log ? rnd(rnd(r.v[j] - mx, f32) - ls, f32) : rnd(e[j] / s, f32);
      fg_ix_store_f(out->data, out->dtype, base + r.L.off[j], y);
    }
    free(e);
  }
  rows_free(&r);
  return true;
}

/* torch.logsumexp: m = max (NaN-propagating), m' = 0 where |m| = inf,
 * log(sum(exp(x - m'))) + m'. A row of -inf gives -inf, not NaN. */
bool fg_interp_logsumexp(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  rows r;
  if (!rows_init(cx, n, &r, mask, out->dtype))
    return false;
  bool f32 = r.f32;
  for (int64_t m = 0; m < r.L.M; m++) {
    rows_load(&r, in, lanes_base(&r.L, m), FG_DTYPE_INVALID);
    double mx = max_of(r.v, r.L.N);
    if (isinf(mx))
      mx = 0;
    for (int64_t j = 0; j < r.L.N; j++)
      r.v[j] = rnd(exp(rnd(r.v[j] - mx, f32)), f32);
    double s = pairwise(r.v, r.L.N, f32);
    fg_ix_store_f(out->data, out->dtype, m, rnd(rnd(log(s), f32) + mx, f32));
  }
  rows_free(&r);
  return true;
}

/* ---- cumsum ---- */

/* A running sum along dim in the accumulation dtype of the result (f32,
 * f64, or i64 for integers, wrapping), rounded at every add, in order. */
bool fg_interp_cumsum(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  bool mask[FG_MAX_RANK] = {0};
  mask[norm(fg_attr_int(n, "dim"), in->rank)] = true;
  lanes L;
  if (!lanes_init(&L, in, mask))
    return fg_ix_fail(cx, n, "out of memory");
  fg_dtype acc = fg_reduce_acc_dtype(out->dtype);
  bool f32 = acc == FG_F32;
  for (int64_t m = 0; m < L.M; m++) {
    int64_t base = lanes_base(&L, m);
    double s = 0;
    uint64_t si = 0;
    for (int64_t j = 0; j < L.N; j++) {
      int64_t i = base + L.off[j];
      if (acc == FG_I64) {
        si += (uint64_t)fg_ix_load_i(in->data, in->dtype, i);
        fg_ix_store_i(out->data, out->dtype, i, (int64_t)si);
      } else {
        s = rnd(s + as_dtype(fg_ix_load_f(in->data, in->dtype, i), out->dtype), f32);
        fg_ix_store_f(out->data, out->dtype, i, s);
      }
    }
  }
  free(L.off);
  return true;
}

/* ---- argmax, argmin ---- */

/* The index of the first maximum (minimum) along dim, or of the flattened
 * tensor without dim=; a NaN counts as larger (smaller) than everything,
 * so the first NaN's index wins, as in PyTorch. Integers compare as
 * int64, floats as their exact values. */
bool fg_interp_argminmax(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  bool mask[FG_MAX_RANK];
  const fg_attr *da = fg_node_attr(n, "dim");
  for (int d = 0; d < in->rank; d++)
    mask[d] = !da || d == norm(da->i, in->rank);
  lanes L;
  if (!lanes_init(&L, in, mask))
    return fg_ix_fail(cx, n, "out of memory");
  bool is_max = n->op->code == FG_OP_ARGMAX, fl = fg_dtype_is_float(in->dtype);
  for (int64_t m = 0; m < L.M; m++) {
    int64_t base = lanes_base(&L, m), best = 0;
    if (fl) {
      double bv = fg_ix_load_f(in->data, in->dtype, base + L.off[0]);
      for (int64_t j = 0; j < L.N && !isnan(bv); j++) {
        double x = fg_ix_load_f(in->data, in->dtype, base + L.off[j]);
        if (isnan(x) || (is_max ? x > bv : x < bv)) {
          bv = x;
          best = j;
        }
      }
    } else {
      int64_t bv = fg_ix_load_i(in->data, in->dtype, base + L.off[0]);
      for (int64_t j = 1; j < L.N; j++) {
        int64_t x = fg_ix_load_i(in->data, in->dtype, base + L.off[j]);
        if (is_max ? x > bv : x < bv) {
          bv = x;
          best = j;
        }
      }
    }
    fg_ix_store_i(out->data, out->dtype, m, best);
  }
  free(L.off);
  return true;
}
