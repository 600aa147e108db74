/* Reference scaled dot-product attention, forward and backward, computed in
 * double one query row at a time (no S x S buffer) and rounded to the result
 * dtypes at the end: the oracle a flash-attention kernel accumulating in f32
 * is compared against. q,k,v are [B,H,S,D]; causal masks key j > query i
 * (top-left aligned, as PyTorch's is_causal); lse is the natural-log
 * logsumexp of the scaled scores, f32 [B,H,Sq]. k and v may have fewer
 * heads than q (GQA, MQA): query head h reads key head h / (Hq / Hk), and
 * the backward sums a key head's dk, dv over its query heads in order. */
#include <math.h>
#include <stdlib.h>

#include "interp_internal.h"

typedef struct dims4 {
  int64_t B, H, S, D;
} dims4;

static dims4 dims_of(const fg_tensor *t) {
  return (dims4){t->sizes[0], t->sizes[1], t->sizes[2], t->sizes[3]};
}

/* Loads the [S,D] slice (b,h) of t as doubles. */
static void load_bh(const fg_tensor *t, int64_t b, int64_t h, double *dst) {
  dims4 d = dims_of(t);
  int64_t base = ((b * d.H) + h) * d.S * d.D;
  for (int64_t i = 0; i < d.S * d.D; i++)
    dst[i] = fg_ix_load_f(t->data, t->dtype, base + i);
}

static void store_bh(fg_tensor *t, int64_t b, int64_t h, const double *src) {
  dims4 d = dims_of(t);
  int64_t base = ((b * d.H) + h) * d.S * d.D;
  for (int64_t i = 0; i < d.S * d.D; i++)
    fg_ix_store_f(t->data, t->dtype, base + i, src[i]);
}

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* Scaled scores of query row i against every key; returns the number of
 * unmasked keys (the rest of s[] is -inf). */
static int64_t scores(const double *qi, const double *k, int64_t Sk, int64_t D, double scale,
                      bool causal, int64_t i, double *s) {
  int64_t nk = causal && i + 1 < Sk ? i + 1 : Sk;
  for (int64_t j = 0; j < Sk; j++)
    s[j] = j < nk ? scale * dot(qi, k + j * D, D) : -INFINITY;
  return nk;
}

static double scale_of(const fg_node *n, int64_t D) {
  const fg_attr *a = fg_node_attr(n, "scale");
  if (a)
    return a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
  return 1.0 / sqrt((double)D);
}

typedef struct bufs {
  double *q, *k, *v, *o, *do_, *dq, *dk, *dv, *s;
} bufs;

static void free_bufs(bufs *b) {
  free(b->q);
  free(b->k);
  free(b->v);
  free(b->o);
  free(b->do_);
  free(b->dq);
  free(b->dk);
  free(b->dv);
  free(b->s);
}

static double *dalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

static bool sdpa_fwd(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *q = fg_ix_in(cx, n, 0), *k = fg_ix_in(cx, n, 1), *v = fg_ix_in(cx, n, 2);
  fg_tensor *o = fg_ix_out(cx, n, 0), *lse = o ? fg_ix_out(cx, n, 1) : NULL;
  if (!o || !lse)
    return false;
  dims4 dq = dims_of(q), dk = dims_of(k), dv = dims_of(v);
  double scale = scale_of(n, dq.D);
  bool causal = fg_attr_bool(n, "causal");
  bufs B = {.q = dalloc(dq.S * dq.D),
            .k = dalloc(dk.S * dk.D),
            .v = dalloc(dv.S * dv.D),
            .o = dalloc(dq.S * dv.D),
            .s = dalloc(dk.S)};
  if (!B.q || !B.k || !B.v || !B.o || !B.s) {
    free_bufs(&B);
    return fg_ix_fail(cx, n, "out of memory");
  }
  int64_t group = dq.H / dk.H;
  for (int64_t b = 0; b < dq.B; b++)
    for (int64_t h = 0; h < dq.H; h++) {
      load_bh(q, b, h, B.q);
      load_bh(k, b, h / group, B.k);
      load_bh(v, b, h / group, B.v);
      for (int64_t i = 0; i < dq.S; i++) {
        int64_t nk = scores(B.q + i * dq.D, B.k, dk.S, dq.D, scale, causal, i, B.s);
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < nk; j++)
          m = B.s[j] > m ? B.s[j] : m;
        for (int64_t j = 0; j < nk; j++)
          l += exp(B.s[j] - m);
        double *oi = B.o + i * dv.D;
        for (int64_t c = 0; c < dv.D; c++)
          oi[c] = 0;
        for (int64_t j = 0; j < nk; j++) {
          double p = exp(B.s[j] - m) / l;
          for (int64_t c = 0; c < dv.D; c++)
            oi[c] += p * B.v[j * dv.D + c];
        }
        fg_ix_store_f(lse->data, lse->dtype, (b * dq.H + h) * dq.S + i, m + log(l));
      }
      store_bh(o, b, h, B.o);
    }
  free_bufs(&B);
  return true;
}

/* dv = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dO * O)); dq = scale dS K;
 * dk = scale dS^T Q; with P recomputed from the saved lse. */
static bool sdpa_bwd(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *tdo = fg_ix_in(cx, n, 0), *q = fg_ix_in(cx, n, 1), *k = fg_ix_in(cx, n, 2),
                  *v = fg_ix_in(cx, n, 3), *o = fg_ix_in(cx, n, 4), *lse = fg_ix_in(cx, n, 5);
  fg_tensor *gq = fg_ix_out(cx, n, 0), *gk = gq ? fg_ix_out(cx, n, 1) : NULL,
            *gv = gk ? fg_ix_out(cx, n, 2) : NULL;
  if (!gv)
    return false;
  dims4 dq = dims_of(q), dk = dims_of(k), dv = dims_of(v);
  double scale = scale_of(n, dq.D);
  bool causal = fg_attr_bool(n, "causal");
  bufs B = {.q = dalloc(dq.S * dq.D),
            .k = dalloc(dk.S * dk.D),
            .v = dalloc(dv.S * dv.D),
            .o = dalloc(dq.S * dv.D),
            .do_ = dalloc(dq.S * dv.D),
            .dq = dalloc(dq.S * dq.D),
            .dk = dalloc(dk.S * dk.D),
            .dv = dalloc(dv.S * dv.D),
            .s = dalloc(dk.S)};
  if (!B.q || !B.k || !B.v || !B.o || !B.do_ || !B.dq || !B.dk || !B.dv || !B.s) {
    free_bufs(&B);
    return fg_ix_fail(cx, n, "out of memory");
  }
  int64_t group = dq.H / dk.H;
  for (int64_t b = 0; b < dq.B; b++)
    for (int64_t h = 0; h < dq.H; h++) {
      load_bh(q, b, h, B.q);
      load_bh(k, b, h / group, B.k);
      load_bh(v, b, h / group, B.v);
      load_bh(o, b, h, B.o);
      load_bh(tdo, b, h, B.do_);
      for (int64_t i = 0; i < dq.S * dq.D; i++)
        B.dq[i] = 0;
      if (h % group == 0) { /* the first query head of the key head's group */
        for (int64_t i = 0; i < dk.S * dk.D; i++)
          B.dk[i] = 0;
        for (int64_t i = 0; i < dv.S * dv.D; i++)
          B.dv[i] = 0;
      }
      for (int64_t i = 0; i < dq.S; i++) {
        const double *qi = B.q + i * dq.D, *doi = B.do_ + i * dv.D;
        int64_t nk = scores(qi, B.k, dk.S, dq.D, scale, causal, i, B.s);
        double L = fg_ix_load_f(lse->data, lse->dtype, (b * dq.H + h) * dq.S + i);
        double Di = dot(doi, B.o + i * dv.D, dv.D);
        for (int64_t j = 0; j < nk; j++) {
          double p = exp(B.s[j] - L);
          double ds = p * (dot(doi, B.v + j * dv.D, dv.D) - Di);
          for (int64_t c = 0; c < dv.D; c++)
            B.dv[j * dv.D + c] += p * doi[c];
          for (int64_t c = 0; c < dq.D; c++) {
            B.dq[i * dq.D + c] += scale * ds * B.k[j * dk.D + c];
            B.dk[j * dk.D + c] += scale * ds * qi[c];
          }
        }
      }
      store_bh(gq, b, h, B.dq);
      if (h % group == group - 1) {
        store_bh(gk, b, h / group, B.dk);
        store_bh(gv, b, h / group, B.dv);
      }
    }
  free_bufs(&B);
  return true;
}

bool fg_interp_sdpa(fg_interp_ctx *cx, const fg_node *n) {
  return n->op->code == FG_OP_SDPA ? sdpa_fwd(cx, n) : sdpa_bwd(cx, n);
}
