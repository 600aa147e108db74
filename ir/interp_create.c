/* Creation ops and literals. Values are converted to the result dtype by the
 * spec's rules (a float value into an int dtype truncates, into a narrow
 * float rounds to nearest even). */
#include <string.h>

#include "interp_internal.h"
#include "random.h"

/* A literal as a 0-d tensor of its type. Pointwise ops read literals from
 * the attribute instead (full precision); this tensor serves the others. */
bool fg_interp_literal(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  fg_ix_store_attr(out->data, out->dtype, 0, &n->attrs[0]);
  return true;
}

bool fg_interp_full(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int64_t total = fg_tensor_numel(out);
  if (total == 0)
    return true;
  fg_ix_store_attr(out->data, out->dtype, 0, fg_node_attr(n, "value"));
  fg_ix_fill_from_first(out->data, out->dtype, total);
  return true;
}

bool fg_interp_iota(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int64_t total = fg_tensor_numel(out);
  for (int64_t i = 0; i < total; i++)
    fg_ix_store_i(out->data, out->dtype, i, i);
  return true;
}

/* ---- random numbers (random.h) ---- */

/* A seed or offset operand (integer scalar, 0-d or one-element tensor) as
 * the 64-bit word of the stream: signed dtypes sign-extend. */
static uint64_t stream_word(fg_interp_ctx *cx, const fg_node *n, int k) {
  const fg_tensor *t = fg_ix_in(cx, n, k);
  return (uint64_t)fg_ix_load_i(t->data, t->dtype, 0);
}

bool fg_interp_random(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  uint64_t seed = stream_word(cx, n, 0), offset = stream_word(cx, n, 1);
  int64_t total = fg_tensor_numel(out);
  for (int64_t i = 0; i < total; i++) {
    double v;
    if (n->op->code == FG_OP_RANDN) {
      v = fg_random_normal(seed, offset, (uint64_t)i, out->dtype);
    } else {
      uint32_t w[4];
      fg_random_block(seed, offset, (uint64_t)i, w);
      v = fg_random_uniform(w[i & 3], out->dtype);
    }
    fg_ix_store_f(out->data, out->dtype, i, v);
  }
  return true;
}

/* where(rand(f32) >= p, x * scale, 0), scale = 1/(1-p) in x's compute
 * dtype (f32, or f64 for f64), as the decompose pass writes it. */
bool fg_interp_dropout(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  const fg_tensor *x = fg_ix_in(cx, n, 0);
  uint64_t seed = stream_word(cx, n, 1), offset = stream_word(cx, n, 2);
  double p = fg_node_attr(n, "p")->f;
  double scale = fg_dropout_scale(p);
  float pf = (float)p;
  if (x->dtype != FG_F64)
    scale = (double)(float)scale;
  int64_t total = fg_tensor_numel(out);
  for (int64_t i = 0; i < total; i++) {
    double v = 0.0;
    if (fg_random_keep(seed, offset, (uint64_t)i, pf)) {
      v = fg_ix_load_f(x->data, x->dtype, i) * scale;
      if (x->dtype != FG_F64)
        v = (double)(float)v;
    }
    fg_ix_store_f(out->data, out->dtype, i, v);
  }
  return true;
}
