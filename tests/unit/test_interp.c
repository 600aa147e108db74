/* The reference interpreter against values computed by hand or by an
 * independent formula. Graphs are built with fg_parse from small .fg texts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "parse.h"

#include "check.h"

#define CHECK_NEAR(a, b, tol)                                                                      \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (fabs(a_ - b_) <= (tol))                                                                    \
      npass++;                                                                                     \
    else {                                                                                         \
      nfail++;                                                                                     \
      fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g (tol %g)\n", __FILE__, __LINE__, #a, a_,    \
              b_, (double)(tol));                                                                  \
    }                                                                                              \
  } while (0)

enum { MAXT = 16 };

/* A parsed graph and its outputs. */
typedef struct run {
  fg_module *m;
  fg_tensor out[MAXT];
  int nout;
} run;

static void run_free(run *r) {
  for (int i = 0; i < r->nout; i++)
    fg_tensor_free(&r->out[i]);
  fg_module_free(r->m);
  memset(r, 0, sizeof *r);
}

/* Parses src, runs its first graph on in[] (which it frees). */
static bool run_src(run *r, const char *src, fg_tensor *in, int nin) {
  memset(r, 0, sizeof *r);
  fg_diag d;
  fg_diag_init(&d, "test.fg", src, strlen(src), stderr);
  r->m = fg_parse("test.fg", src, strlen(src), &d);
  fg_diag_free(&d);
  bool ok = false;
  if (r->m && r->m->ngraphs > 0) {
    const fg_graph *g = r->m->graphs[0];
    char err[512];
    if (g->nparams != nin)
      fprintf(stderr, "test: graph has %d params, %d given\n", g->nparams, nin);
    else if (!(ok = fg_interp_run(g, in, r->out, err, sizeof err)))
      fprintf(stderr, "interp: %s\n", err);
    else
      r->nout = g->nresults;
  }
  for (int i = 0; i < nin; i++)
    fg_tensor_free(&in[i]);
  if (!ok)
    nfail++, fprintf(stderr, "test: failed to run:\n%s\n", src);
  return ok;
}

static fg_tensor mk(fg_dtype dt, int rank, const int64_t *sizes, const double *v) {
  fg_tensor t;
  fg_tensor_alloc(&t, dt, rank, sizes);
  int64_t n = fg_tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) {
    if (fg_dtype_is_float(dt))
      fg_tensor_set_f(&t, i, v[i]);
    else
      fg_tensor_set_i(&t, i, (int64_t)v[i]);
  }
  return t;
}

static bool shape_is(const fg_tensor *t, int rank, const int64_t *s) {
  if (t->rank != rank)
    return false;
  for (int i = 0; i < rank; i++)
    if (t->sizes[i] != s[i])
      return false;
  return true;
}

/* Every element of t equals want[] exactly. */
static bool values_are(const fg_tensor *t, const double *want, int64_t n) {
  if (fg_tensor_numel(t) != n)
    return false;
  for (int64_t i = 0; i < n; i++) {
    double v = fg_tensor_get_f(t, i);
    if (!(v == want[i] || (isnan(v) && isnan(want[i])))) {
      fprintf(stderr, "  element %lld: %.9g, expected %.9g\n", (long long)i, v, want[i]);
      return false;
    }
  }
  return true;
}

static uint64_t lcg = 12345;
static double rnd(void) { /* deterministic values in [-2, 2) */
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg >> 11) * 0x1.0p-53 * 4.0 - 2.0;
}

/* ---- numerics ---- */

static void test_layer_norm(void) {
  enum { R = 4, C = 64 };
  double x[R * C], w[C], b[C];
  for (int i = 0; i < R * C; i++)
    x[i] = (float)rnd();
  for (int i = 0; i < C; i++)
    w[i] = (float)rnd(), b[i] = (float)rnd();
  fg_tensor in[3] = {mk(FG_F32, 2, (int64_t[]){R, C}, x), mk(FG_F32, 1, (int64_t[]){C}, w),
                     mk(FG_F32, 1, (int64_t[]){C}, b)};
  run r;
  if (!run_src(&r,
               "graph ln(x: f32[4,64], w: f32[64], b: f32[64]) {\n"
               "  var, mean = var_mean(x, dims=[1], correction=0, keepdim=true)\n"
               "  y = add(mul(mul(sub(x, mean), rsqrt(add(var, 1e-5))), w), b)\n"
               "  return y, mean\n}\n",
               in, 3))
    return;
  for (int i = 0; i < R; i++) {
    double mu = 0, ss = 0;
    for (int j = 0; j < C; j++)
      mu += x[i * C + j];
    mu /= C;
    for (int j = 0; j < C; j++)
      ss += (x[i * C + j] - mu) * (x[i * C + j] - mu);
    double rstd = 1 / sqrt(ss / C + 1e-5);
    CHECK_NEAR(fg_tensor_get_f(&r.out[1], i), mu, 1e-6);
    for (int j = 0; j < C; j++)
      CHECK_NEAR(fg_tensor_get_f(&r.out[0], i * C + j), (x[i * C + j] - mu) * rstd * w[j] + b[j],
                 2e-5);
  }
  run_free(&r);
}

static void test_softmax(void) {
  enum { R = 3, C = 100 };
  double x[R * C];
  for (int i = 0; i < R * C; i++)
    x[i] = 4 * rnd();
  fg_tensor in[1] = {mk(FG_BF16, 2, (int64_t[]){R, C}, x)};
  run r;
  if (!run_src(&r,
               "graph sm(x: bf16[3,100]) {\n  xf = cast(x, dtype=f32)\n"
               "  e = exp(sub(xf, amax(xf, dims=[-1], keepdim=true)))\n"
               "  return div(e, sum(e, dims=[-1], keepdim=true))\n}\n",
               in, 1))
    return;
  for (int i = 0; i < R; i++) {
    double s = 0;
    for (int j = 0; j < C; j++)
      s += fg_tensor_get_f(&r.out[0], i * C + j);
    CHECK_NEAR(s, 1.0, 1e-5);
  }
  run_free(&r);
}

static void test_var(void) {
  double x[10] = {1, 2, 3, 4, 10, -1, 0.5, 7, 8, 2.25};
  fg_tensor in[1] = {mk(FG_F32, 2, (int64_t[]){2, 5}, x)};
  run r;
  if (!run_src(&r,
               "graph v(x: f32[2,5]) {\n  v1 = var(x, dims=[1])\n  v0 = var(x, dims=[-1], "
               "correction=0)\n"
               "  a, m = var_mean(x, dims=[0, 1], keepdim=true)\n"
               "  one = slice(x, starts=[0,0], ends=[2,1])\n"
               "  return v1, v0, a, m, var(one, dims=[1]), var(one, dims=[1], correction=2)\n}\n",
               in, 1))
    return;
  for (int row = 0; row < 2; row++) {
    double mu = 0, ss = 0;
    for (int j = 0; j < 5; j++)
      mu += x[row * 5 + j] / 5;
    for (int j = 0; j < 5; j++)
      ss += (x[row * 5 + j] - mu) * (x[row * 5 + j] - mu);
    CHECK_NEAR(fg_tensor_get_f(&r.out[0], row), ss / 4, 1e-5);
    CHECK_NEAR(fg_tensor_get_f(&r.out[1], row), ss / 5, 1e-5);
  }
  double mu = 0, ss = 0;
  for (int j = 0; j < 10; j++)
    mu += x[j] / 10;
  for (int j = 0; j < 10; j++)
    ss += (x[j] - mu) * (x[j] - mu);
  CHECK(shape_is(&r.out[2], 2, (int64_t[]){1, 1}));
  CHECK_NEAR(fg_tensor_get_f(&r.out[2], 0), ss / 9, 1e-5);
  CHECK_NEAR(fg_tensor_get_f(&r.out[3], 0), mu, 1e-6);
  /* N - correction = 0: 0/0 = NaN; N - correction < 0 clamps to 0 */
  CHECK(isnan(fg_tensor_get_f(&r.out[4], 0)));
  CHECK(isnan(fg_tensor_get_f(&r.out[5], 1)));
  run_free(&r);
}

static void test_narrow_rounding(void) {
  double x[8] = {1 + 0x1p-8, 1 + 3 * 0x1p-8, -(1 + 0x1p-8), 1 + 0x1p-8 + 0x1p-20,
                 0x1p-24,    0x1p-25,        3 * 0x1p-25,   65520};
  fg_tensor in[1] = {mk(FG_F32, 1, (int64_t[]){8}, x)};
  run r;
  if (!run_src(&r, "graph n(x: f32[8]) {\n  return cast(x, dtype=bf16), cast(x, dtype=f16)\n}\n",
               in, 1))
    return;
  const uint16_t *bf = r.out[0].data, *h = r.out[1].data;
  CHECK(bf[0] == 0x3f80); /* tie to even: down to 1.0 */
  CHECK(bf[1] == 0x3f82); /* tie to even: up */
  CHECK(bf[2] == 0xbf80);
  CHECK(bf[3] == 0x3f81); /* above the tie: up */
  CHECK(h[4] == 0x0001);  /* smallest f16 subnormal */
  CHECK(h[5] == 0x0000);  /* half of it: tie to even (0) */
  CHECK(h[6] == 0x0002);  /* 1.5 ulps: tie to even (2) */
  CHECK(h[7] == 0x7c00);  /* 65520 rounds past 65504: inf */
  run_free(&r);

  double y[6] = {448, 464, 470, -1000, 57344, 1e6};
  fg_tensor in2[1] = {mk(FG_F32, 1, (int64_t[]){6}, y)};
  if (!run_src(&r,
               "graph f8(x: f32[6]) {\n  return cast(x, dtype=f8e4m3), cast(x, dtype=f8e5m2)\n}\n",
               in2, 1))
    return;
  const uint8_t *e4 = r.out[0].data, *e5 = r.out[1].data;
  CHECK(e4[0] == 0x7e && fg_tensor_get_f(&r.out[0], 0) == 448);
  CHECK(e4[1] == 0x7e); /* tie between 448 and 480: even mantissa (448) */
  CHECK(e4[2] == 0x7f); /* rounds to 480 > max: NaN */
  CHECK(e4[3] == 0xff);
  CHECK(isnan(fg_tensor_get_f(&r.out[0], 2)));
  CHECK(e5[4] == 0x7b && fg_tensor_get_f(&r.out[1], 4) == 57344);
  CHECK(e5[5] == 0x7c && isinf(fg_tensor_get_f(&r.out[1], 5)));
  run_free(&r);
}

/* add(x_bf16, 1e-5) stays bf16, computed in f32 and rounded once. */
static void test_narrow_arith(void) {
  double x[3] = {1.0, 256.0, 3.0};
  fg_tensor in[1] = {mk(FG_BF16, 1, (int64_t[]){3}, x)};
  run r;
  if (!run_src(&r,
               "graph a(x: bf16[3]) {\n  return add(x, 1e-5), mul(x, 1.00390625), add(x, 1), "
               "div(x, 3.0)\n}\n",
               in, 1))
    return;
  CHECK(r.out[0].dtype == FG_BF16 && r.out[2].dtype == FG_BF16);
  CHECK(values_are(&r.out[0], (double[]){1.0, 256.0, 3.0}, 3));
  /* 1 + 2^-8 is a bf16 tie (to 1.0); 257 ties between 256 and 258 (to 256);
   * 3.01171875 is 3 + 0.75 ulp (up to 3.015625) */
  CHECK(values_are(&r.out[1], (double[]){1.0, 256.0, 3.015625}, 3));
  CHECK(values_are(&r.out[2], (double[]){2, 256, 4}, 3));
  CHECK(fg_tensor_get_f(&r.out[3], 0) == fg_round_to_dtype((float)(1.0 / 3.0), FG_BF16));
  run_free(&r);
}

static void test_f64_literal(void) {
  double x[2] = {1.0, 0.2};
  fg_tensor in[1] = {mk(FG_F64, 1, (int64_t[]){2}, x)};
  run r;
  if (!run_src(&r, "graph a(x: f64[2]) {\n  return add(x, 0.1)\n}\n", in, 1))
    return;
  CHECK(r.out[0].dtype == FG_F64);
  CHECK(values_are(&r.out[0], (double[]){1.0 + 0.1, 0.2 + 0.1}, 2));
  run_free(&r);
}

static void test_integers(void) {
  double a[6] = {-7, 7, -7, 7, 127, 100000};
  double b[6] = {2, 2, -2, -2, 1, 100000};
  fg_tensor in[2] = {mk(FG_I32, 1, (int64_t[]){6}, a), mk(FG_I32, 1, (int64_t[]){6}, b)};
  run r;
  if (!run_src(
          &r,
          "graph i(a: i32[6], b: i32[6]) {\n"
          "  return div(a, b), mul(a, b), add(cast(a, dtype=i8), cast(b, dtype=i8)), fmod(a, b),"
          " cast(a, dtype=u8), gt(a, b), add(a, 0.5)\n}\n",
          in, 2))
    return;
  CHECK(values_are(&r.out[0], (double[]){-3, 3, 3, -3, 127, 1}, 6));
  CHECK(values_are(&r.out[1], (double[]){-14, 14, 14, -14, 127, 1410065408},
                   6)); /* 1e10 wraps in i32 */
  /* 127 + 1 wraps to -128 in i8; 100000 as i8 is -96, doubled -192 wraps to 64 */
  CHECK(values_are(&r.out[2], (double[]){-5, 9, -9, 5, -128, 64}, 6));
  CHECK(values_are(&r.out[3], (double[]){-1, 1, -1, 1, 0, 0}, 6));
  CHECK(values_are(&r.out[4], (double[]){249, 7, 249, 7, 127, 160}, 6)); /* int->int wraps */
  CHECK(r.out[5].dtype == FG_BOOL && values_are(&r.out[5], (double[]){0, 1, 0, 1, 1, 0}, 6));
  CHECK(r.out[6].dtype == FG_F32 &&
        values_are(&r.out[6], (double[]){-6.5, 7.5, -6.5, 7.5, 127.5, 100000.5}, 6));
  run_free(&r);
}

static void test_conversions(void) {
  double x[6] = {NAN, 1e10, -2.7, -1.0, 300.5, 0.0};
  fg_tensor in[1] = {mk(FG_F32, 1, (int64_t[]){6}, x)};
  run r;
  if (!run_src(&r,
               "graph c(x: f32[6]) {\n  return cast(x, dtype=i32), cast(x, dtype=u8), cast(x, "
               "dtype=bool),"
               " cast(cast(x, dtype=bool), dtype=f32), cast(x, dtype=i64)\n}\n",
               in, 1))
    return;
  CHECK(values_are(&r.out[0], (double[]){0, 2147483647, -2, -1, 300, 0}, 6));
  CHECK(values_are(&r.out[1], (double[]){0, 255, 0, 0, 255, 0}, 6)); /* saturates */
  CHECK(values_are(&r.out[2], (double[]){1, 1, 1, 1, 1, 0}, 6));     /* NaN is true */
  CHECK(values_are(&r.out[3], (double[]){1, 1, 1, 1, 1, 0}, 6));
  CHECK(values_are(&r.out[4], (double[]){0, 1e10, -2, -1, 300, 0}, 6));
  run_free(&r);
}

static void test_pointwise_misc(void) {
  double x[4] = {-1.5, 0.0, NAN, 2.0}, c[4] = {1, 0, 1, 0};
  fg_tensor in[2] = {mk(FG_F32, 1, (int64_t[]){4}, x), mk(FG_BOOL, 1, (int64_t[]){4}, c)};
  run r;
  if (!run_src(&r,
               "graph p(x: f32[4], c: bool[4]) {\n"
               "  return where(c, x, 10.0), clamp(x, min=-1.0, max=1.5), maximum(x, 0.0),"
               " logical_and(x, c), isnan(x), relu(x), round(mul(x, 1.0))\n}\n",
               in, 2))
    return;
  CHECK(values_are(&r.out[0], (double[]){-1.5, 10, NAN, 10}, 4));
  CHECK(values_are(&r.out[1], (double[]){-1, 0, NAN, 1.5}, 4));
  CHECK(values_are(&r.out[2], (double[]){0, 0, NAN, 2}, 4));
  CHECK(values_are(&r.out[3], (double[]){1, 0, 1, 0}, 4));
  CHECK(values_are(&r.out[4], (double[]){0, 0, 1, 0}, 4));
  CHECK(values_are(&r.out[5], (double[]){0, 0, NAN, 2}, 4));
  CHECK(values_are(&r.out[6], (double[]){-2, 0, NAN, 2}, 4));
  run_free(&r);
}

static void test_broadcast(void) {
  double a[6] = {0, 1, 2, 10, 11, 12}, b[4] = {100, 200, 300, 400};
  fg_tensor in[3] = {mk(FG_F32, 3, (int64_t[]){2, 1, 3}, a), mk(FG_F32, 2, (int64_t[]){4, 1}, b),
                     mk(FG_F32, 0, NULL, (double[]){0.5})};
  run r;
  if (!run_src(&r,
               "graph b(a: f32[2,1,3], b: f32[4,1], s: f32[]) {\n  return add(add(a, b), s)\n}\n",
               in, 3))
    return;
  CHECK(shape_is(&r.out[0], 3, (int64_t[]){2, 4, 3}));
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 3; k++)
        CHECK(fg_tensor_get_f(&r.out[0], (i * 4 + j) * 3 + k) == a[i * 3 + k] + b[j] + 0.5);
  run_free(&r);
}

/* ---- reductions ---- */

static void test_reductions(void) {
  double x[12];
  for (int i = 0; i < 12; i++)
    x[i] = i;
  x[5] = -3;
  fg_tensor in[2] = {mk(FG_F32, 3, (int64_t[]){2, 3, 2}, x),
                     mk(FG_F32, 1, (int64_t[]){3}, (double[]){1, NAN, 2})};
  run r;
  if (!run_src(
          &r,
          "graph r(x: f32[2,3,2], y: f32[3]) {\n"
          "  return sum(x, dims=[-1]), amax(x, dims=[0, 2], keepdim=true), amin(x), mean(x, "
          "dims=[1]),"
          " prod(x, dims=[0]), amax(y), amin(y, dims=[0]), sum(cast(x, dtype=i32), dims=[1, 2]),"
          " sum(x, dims=[1], keepdim=true)\n}\n",
          in, 2))
    return;
  /* x = [[[0,1],[2,3],[4,-3]], [[6,7],[8,9],[10,11]]] */
  CHECK(shape_is(&r.out[0], 2, (int64_t[]){2, 3}));
  CHECK(values_are(&r.out[0], (double[]){1, 5, 1, 13, 17, 21}, 6));
  CHECK(shape_is(&r.out[1], 3, (int64_t[]){1, 3, 1}));
  CHECK(values_are(&r.out[1], (double[]){7, 9, 11}, 3));
  CHECK(r.out[2].rank == 0 && values_are(&r.out[2], (double[]){-3}, 1));
  CHECK(values_are(&r.out[3], (double[]){2, (float)(1.0 / 3), 8, 9}, 4));
  CHECK(values_are(&r.out[4], (double[]){0, 7, 16, 27, 40, -33}, 6));
  CHECK(isnan(fg_tensor_get_f(&r.out[5], 0))); /* NaN propagates */
  CHECK(isnan(fg_tensor_get_f(&r.out[6], 0)));
  CHECK(r.out[7].dtype == FG_I32 && values_are(&r.out[7], (double[]){7, 51}, 2));
  CHECK(shape_is(&r.out[8], 3, (int64_t[]){2, 1, 2}));
  CHECK(values_are(&r.out[8], (double[]){6, 1, 24, 27}, 4));
  run_free(&r);
}

/* Sequential f32 summation of 2^24 + 84 ones stalls at 2^24; pairwise
 * summation is exact. */
static void test_pairwise_sum(void) {
  run r;
  if (!run_src(&r,
               "graph s() {\n  return sum(full(shape=[16777300], value=1.0)), "
               "mean(full(shape=[16777300], value=0.1))\n}\n",
               NULL, 0))
    return;
  CHECK(fg_tensor_get_f(&r.out[0], 0) == 16777300.0);
  CHECK_NEAR(fg_tensor_get_f(&r.out[1], 0), 0.1, 1e-7);
  run_free(&r);
}

/* ---- views on iota ---- */

static void test_views(void) {
  run r;
  if (!run_src(&r,
               "graph v() {\n  x = reshape(iota(24), shape=[2,3,4])\n"
               "  return permute(x, dims=[2,0,1]), transpose(x, dim0=0, dim1=-1),"
               " slice(x, starts=[0,-2,1], ends=[2,100,4], steps=[1,1,2]),"
               " broadcast_in_dim(iota(3), shape=[2,3], dims=[1]), expand(reshape(iota(2), "
               "shape=[2,1]), shape=[3,-1,2]),"
               " squeeze(reshape(iota(3), shape=[1,3,1])), unsqueeze(iota(3), dim=-1),"
               " cat(iota(2), iota(3), dim=0), reshape(x, shape=[-1,6])\n}\n",
               NULL, 0))
    return;
  /* x[i][j][k] = 12i + 4j + k */
  CHECK(shape_is(&r.out[0], 3, (int64_t[]){4, 2, 3}));
  double p[24];
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++)
        p[(k * 2 + i) * 3 + j] = 12 * i + 4 * j + k;
  CHECK(values_are(&r.out[0], p, 24));
  CHECK(shape_is(&r.out[1], 3, (int64_t[]){4, 3, 2}));
  double t[24];
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 2; i++)
        t[(k * 3 + j) * 2 + i] = 12 * i + 4 * j + k;
  CHECK(values_are(&r.out[1], t, 24));
  CHECK(shape_is(&r.out[2], 3, (int64_t[]){2, 2, 2}));
  CHECK(values_are(&r.out[2], (double[]){5, 7, 9, 11, 17, 19, 21, 23}, 8));
  CHECK(values_are(&r.out[3], (double[]){0, 1, 2, 0, 1, 2}, 6));
  CHECK(shape_is(&r.out[4], 3, (int64_t[]){3, 2, 2}));
  CHECK(values_are(&r.out[4], (double[]){0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}, 12));
  CHECK(shape_is(&r.out[5], 1, (int64_t[]){3}));
  CHECK(shape_is(&r.out[6], 2, (int64_t[]){3, 1}));
  CHECK(values_are(&r.out[7], (double[]){0, 1, 0, 1, 2}, 5));
  CHECK(shape_is(&r.out[8], 2, (int64_t[]){4, 6}));
  CHECK(r.out[0].dtype == FG_I64);
  run_free(&r);
}

static void test_split_cat_pad(void) {
  run r;
  if (!run_src(&r,
               "graph v() {\n  x = reshape(iota(12), shape=[3,4])\n"
               "  a, b = split(x, sizes=[1,3], dim=-1)\n"
               "  return a, b, cat(b, a, dim=1), pad(x, pad=[1,0,-1,2], value=-1), pad(x, "
               "pad=[-1,-1,0,0])\n}\n",
               NULL, 0))
    return;
  CHECK(values_are(&r.out[0], (double[]){0, 4, 8}, 3));
  CHECK(values_are(&r.out[1], (double[]){1, 2, 3, 5, 6, 7, 9, 10, 11}, 9));
  CHECK(values_are(&r.out[2], (double[]){1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8}, 12));
  /* rows: one new row on top; cols: drop the first, add two at the end */
  CHECK(shape_is(&r.out[3], 2, (int64_t[]){4, 5}));
  CHECK(values_are(
      &r.out[3],
      (double[]){-1, -1, -1, -1, -1, 1, 2, 3, -1, -1, 5, 6, 7, -1, -1, 9, 10, 11, -1, -1}, 20));
  CHECK(shape_is(&r.out[4], 2, (int64_t[]){1, 4}));
  CHECK(values_are(&r.out[4], (double[]){4, 5, 6, 7}, 4));
  run_free(&r);
}

static void test_cat_promotes(void) {
  double a[2] = {1.5, 2.5};
  fg_tensor in[1] = {mk(FG_F32, 1, (int64_t[]){2}, a)};
  run r;
  if (!run_src(&r, "graph c(a: f32[2]) {\n  return cat(a, iota(2, dtype=i32), dim=0)\n}\n", in, 1))
    return;
  CHECK(r.out[0].dtype == FG_F32 && values_are(&r.out[0], (double[]){1.5, 2.5, 0, 1}, 4));
  run_free(&r);
}

static void test_results_alias(void) {
  double a[2] = {1, 2};
  fg_tensor in[1] = {mk(FG_F32, 1, (int64_t[]){2}, a)};
  run r;
  if (!run_src(&r, "graph c(a: f32[2]) {\n  b = neg(a)\n  return a, b, b, segment_set(b)\n}\n", in,
               1))
    return;
  CHECK(values_are(&r.out[0], (double[]){1, 2}, 2));
  CHECK(values_are(&r.out[1], (double[]){-1, -2}, 2));
  CHECK(values_are(&r.out[2], (double[]){-1, -2}, 2) && r.out[2].data != r.out[1].data);
  CHECK(values_are(&r.out[3], (double[]){-1, -2}, 2));
  run_free(&r);
}

/* ---- attention ---- */

/* sdpa_bwd against finite differences of L = sum(o * g) through sdpa, in f64. */
static void test_sdpa(void) {
  enum { S = 3, D = 2, N = S * D };
  double q[N], k[N], v[N], g[N];
  for (int i = 0; i < N; i++)
    q[i] = rnd(), k[i] = rnd(), v[i] = rnd(), g[i] = rnd();
  const char *fwd = "graph f(q: f64[1,1,3,2], k: f64[1,1,3,2], v: f64[1,1,3,2]) {\n"
                    "  o, lse = sdpa(q, k, v, causal=true)\n  return o, lse\n}\n";
  int64_t sh[4] = {1, 1, S, D};
  run r;
  fg_tensor in[3] = {mk(FG_F64, 4, sh, q), mk(FG_F64, 4, sh, k), mk(FG_F64, 4, sh, v)};
  if (!run_src(&r, fwd, in, 3))
    return;
  /* row 0 attends only to key 0: o = v[0], lse = q0.k0 / sqrt(2) */
  CHECK_NEAR(fg_tensor_get_f(&r.out[0], 0), v[0], 1e-12);
  CHECK_NEAR(fg_tensor_get_f(&r.out[1], 0), (q[0] * k[0] + q[1] * k[1]) / sqrt(2.0), 1e-6);
  double o[N], lse[S];
  for (int i = 0; i < N; i++)
    o[i] = fg_tensor_get_f(&r.out[0], i);
  for (int i = 0; i < S; i++)
    lse[i] = fg_tensor_get_f(&r.out[1], i);
  run_free(&r);
  fg_tensor bin[6] = {mk(FG_F64, 4, sh, g), mk(FG_F64, 4, sh, q), mk(FG_F64, 4, sh, k),
                      mk(FG_F64, 4, sh, v), mk(FG_F64, 4, sh, o), mk(FG_F32, 3, sh, lse)};
  if (!run_src(&r,
               "graph b(g: f64[1,1,3,2], q: f64[1,1,3,2], k: f64[1,1,3,2], v: f64[1,1,3,2], o: "
               "f64[1,1,3,2],"
               " lse: f32[1,1,3]) {\n  dq, dk, dv = sdpa_bwd(g, q, k, v, o, lse, causal=true)\n  "
               "return dq, dk, dv\n}\n",
               bin, 6))
    return;
  double *ins[3] = {q, k, v};
  for (int which = 0; which < 3; which++)
    for (int e = 0; e < N; e++) {
      double L[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        double save = ins[which][e];
        ins[which][e] += sgn ? 1e-6 : -1e-6;
        fg_tensor fin[3] = {mk(FG_F64, 4, sh, q), mk(FG_F64, 4, sh, k), mk(FG_F64, 4, sh, v)};
        ins[which][e] = save;
        run f;
        if (!run_src(&f, fwd, fin, 3))
          return;
        L[sgn] = 0;
        for (int i = 0; i < N; i++)
          L[sgn] += fg_tensor_get_f(&f.out[0], i) * g[i];
        run_free(&f);
      }
      /* lse is stored in f32, so the backward's P carries ~1e-7 relative error */
      CHECK_NEAR(fg_tensor_get_f(&r.out[which], e), (L[1] - L[0]) / 2e-6, 1e-5);
    }
  run_free(&r);
}

/* GQA: 4 query heads over 2 key heads equal attention with k and v
 * repeated per query head (the backward's dk, dv summed over the group). */
static void test_sdpa_gqa(void) {
  enum { NQ = 4 * 3 * 2, NK = 2 * 5 * 2 };
  double q[NQ], g[NQ], k[NK], v[NK];
  for (int i = 0; i < NQ; i++)
    q[i] = rnd(), g[i] = rnd();
  for (int i = 0; i < NK; i++)
    k[i] = rnd(), v[i] = rnd();
  int64_t sq[4] = {1, 4, 3, 2}, sk[4] = {1, 2, 5, 2};
  fg_tensor in[4] = {mk(FG_F64, 4, sq, g), mk(FG_F64, 4, sq, q), mk(FG_F64, 4, sk, k),
                     mk(FG_F64, 4, sk, v)};
  run r;
  if (!run_src(&r,
               "graph g(g: f64[1,4,3,2], q: f64[1,4,3,2], k: f64[1,2,5,2], v: f64[1,2,5,2]) {\n"
               "  o, lse = sdpa(q, k, v, causal=true)\n"
               "  dq, dk, dv = sdpa_bwd(g, q, k, v, o, lse, causal=true)\n"
               "  ke = reshape(expand(unsqueeze(k, dim=2), shape=[1,2,2,5,2]), shape=[1,4,5,2])\n"
               "  ve = reshape(expand(unsqueeze(v, dim=2), shape=[1,2,2,5,2]), shape=[1,4,5,2])\n"
               "  oe, lsee = sdpa(q, ke, ve, causal=true)\n"
               "  dqe, dke, dve = sdpa_bwd(g, q, ke, ve, oe, lsee, causal=true)\n"
               "  dks = sum(reshape(dke, shape=[1,2,2,5,2]), dims=[2])\n"
               "  dvs = sum(reshape(dve, shape=[1,2,2,5,2]), dims=[2])\n"
               "  return o, oe, dq, dqe, dk, dks, dv, dvs\n}\n",
               in, 4))
    return;
  for (int pair = 0; pair < 4; pair++) {
    const fg_tensor *a = &r.out[2 * pair], *b = &r.out[2 * pair + 1];
    int64_t n = fg_tensor_numel(a);
    CHECK(n == fg_tensor_numel(b));
    for (int64_t i = 0; i < n; i++)
      CHECK_NEAR(fg_tensor_get_f(a, i), fg_tensor_get_f(b, i), 1e-12);
  }
  run_free(&r);
}

static void test_errors(void) {
  /* a mismatched input is rejected with a message naming the parameter */
  const char *src = "graph e(x: f32[2]) {\n  return neg(x)\n}\n";
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), stderr);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &d);
  fg_diag_free(&d);
  if (!m) {
    nfail++;
    return;
  }
  fg_tensor in = mk(FG_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3}), out[1];
  char err[256];
  CHECK(!fg_interp_run(m->graphs[0], &in, out, err, sizeof err));
  CHECK(strstr(err, "'x'") != NULL);
  fg_tensor_free(&in);
  fg_module_free(m);
}

int main(void) {
  test_layer_norm();
  test_softmax();
  test_var();
  test_narrow_rounding();
  test_narrow_arith();
  test_f64_literal();
  test_integers();
  test_conversions();
  test_pointwise_misc();
  test_broadcast();
  test_reductions();
  test_pairwise_sum();
  test_views();
  test_split_cat_pad();
  test_cat_promotes();
  test_results_alias();
  test_sdpa();
  test_sdpa_gqa();
  test_errors();
  printf("test_interp: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
