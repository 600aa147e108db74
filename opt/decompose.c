/* mean, var and var_mean become sums and pointwise ops in the accumulation
 * dtype, so kernels only know sum/prod/amax/amin. The variance is two-pass
 * (mean first, then the sum of squared deviations), as the reference
 * interpreter computes it: accurate where sum-of-squares would cancel.
 * dropout becomes rand and pointwise ops (docs/format.md 5.11), so it fuses
 * wherever they do. */
#include <string.h>

#include "build.h"
#include "passes.h"
#include "random.h"

static fg_value *reduce_sum(fg_graph *g, fg_value *x, const fg_node *like, bool keepdim,
                            fg_diag *d) {
  fg_node *n = fgo_node(g, FG_OP_SUM, 1, &x, like->loc);
  const fg_attr *dims = fg_node_attr(like, "dims");
  if (dims)
    fgo_set_ints(g, n, "dims", dims->ints, dims->n);
  if (keepdim)
    fgo_set_bool(n, "keepdim", true);
  return fgo_finish(n, d);
}

/* The count as a scalar of dtype acc: a literal, or over the symbolic size
 * (a multiple of the stand-in) an `extent` the code generator reads as T x
 * the rest at run time. */
static fg_value *count_value(fg_graph *g, double count, fg_dtype acc, fg_loc loc, fg_diag *d) {
  int64_t c = (int64_t)count;
  if (!g->stand_in || c == 0 || c % g->stand_in != 0)
    return fg_literal_float(g, count, loc);
  fg_node *e = fgo_node(g, FG_OP_EXTENT, 0, NULL, loc);
  fgo_set_int(e, "value", c);
  fgo_set_dtype(e, "dtype", acc);
  return fgo_finish(e, d);
}

static bool decompose(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_value *x = n->in[0];
  if (!fg_type_is_static(&x->type))
    return true; /* left for a later compiler */
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  int64_t count = 1;
  for (int i = 0; i < x->type.rank; i++)
    if (mask[i])
      count *= x->type.dims[i].size;
  fg_dtype out = n->out[0]->type.dtype;
  fg_dtype acc = fg_reduce_acc_dtype(out);
  bool keep = fg_attr_bool(n, "keepdim");
  g->insert_point = n;
  fg_value *xa = fgo_cast(g, x, acc, n->loc, d);
  fg_value *cnt = count_value(g, (double)count, acc, n->loc, d);
  if (!xa || !cnt) {
    g->insert_point = NULL;
    return false;
  }
  fg_value *res[2] = {NULL, NULL};
  if (n->op->code == FG_OP_MEAN) {
    fg_value *s = reduce_sum(g, xa, n, keep, d);
    res[0] = fgo_cast(g, fgo_binary(g, FG_OP_DIV, s, cnt, n->loc, d), out, n->loc, d);
  } else {
    /* PyTorch's denominator: max(0, count - correction) */
    double corr = fg_attr_float(n, "correction");
    fg_value *denom;
    if (fg_value_is_literal(cnt, NULL))
      denom = fg_literal_float(g, (double)count - corr < 0 ? 0 : (double)count - corr, n->loc);
    else
      denom =
          fgo_binary(g, FG_OP_MAXIMUM,
                     fgo_binary(g, FG_OP_SUB, cnt, fg_literal_float(g, corr, n->loc), n->loc, d),
                     fg_literal_float(g, 0, n->loc), n->loc, d);
    fg_value *s = reduce_sum(g, xa, n, true, d);
    fg_value *m = fgo_binary(g, FG_OP_DIV, s, cnt, n->loc, d);
    fg_value *dev = fgo_binary(g, FG_OP_SUB, xa, m, n->loc, d);
    fg_value *sq = fgo_binary(g, FG_OP_MUL, dev, dev, n->loc, d);
    fg_value *ss = reduce_sum(g, sq, n, keep, d);
    res[0] = fgo_cast(g, fgo_binary(g, FG_OP_DIV, ss, denom, n->loc, d), out, n->loc, d);
    if (n->op->code == FG_OP_VAR_MEAN) {
      fg_value *mm = m;
      if (!keep && m) {
        int64_t shape[FG_MAX_RANK];
        const fg_type *t = &n->out[1]->type;
        for (int i = 0; i < t->rank; i++)
          shape[i] = t->dims[i].size;
        fg_node *r = fgo_node(g, FG_OP_RESHAPE, 1, &m, n->loc);
        fgo_set_ints(g, r, "shape", shape, t->rank);
        mm = fgo_finish(r, d);
      }
      res[1] = fgo_cast(g, mm, out, n->loc, d);
    }
  }
  g->insert_point = NULL;
  for (int i = 0; i < n->nout; i++) {
    if (!res[i])
      return false;
    /* Keep the user's names on the values that replace theirs. */
    if (!res[i]->name && n->out[i]->name)
      res[i]->name = n->out[i]->name;
    fg_replace_uses(g, n->out[i], res[i]);
  }
  fg_node_remove(g, n);
  return true;
}

/* dropout(x, seed, offset, p=P) = where(ge(rand(seed, offset, shape=x's,
 * dtype=f32), P), mul(x, 1/(1-P)), 0.0): the interpreter's
 * fg_interp_dropout, op for op (the literals round to x's compute dtype as
 * it rounds them). */
static bool decompose_dropout(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_value *x = n->in[0];
  if (!fg_type_is_static(&x->type))
    return true; /* left for a later compiler */
  double p = fg_attr_float(n, "p");
  int64_t shape[FG_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++)
    shape[i] = x->type.dims[i].size;
  g->insert_point = n;
  fg_value *stream[2] = {n->in[1], n->in[2]};
  fg_node *r = fgo_node(g, FG_OP_RAND, 2, stream, n->loc);
  fgo_set_ints(g, r, "shape", shape, x->type.rank);
  fgo_set_dtype(r, "dtype", FG_F32);
  fg_value *u = fgo_finish(r, d);
  fg_value *keep = u ? fgo_binary(g, FG_OP_GE, u, fg_literal_float(g, p, n->loc), n->loc, d) : NULL;
  fg_value *scaled =
      fgo_binary(g, FG_OP_MUL, x, fg_literal_float(g, fg_dropout_scale(p), n->loc), n->loc, d);
  fg_value *res = NULL;
  if (keep && scaled) {
    fg_value *in[3] = {keep, scaled, fg_literal_float(g, 0.0, n->loc)};
    res = fgo_finish(fgo_node(g, FG_OP_WHERE, 3, in, n->loc), d);
  }
  g->insert_point = NULL;
  if (!res)
    return false;
  if (!res->name && n->out[0]->name)
    res->name = n->out[0]->name;
  fg_replace_uses(g, n->out[0], res);
  fg_node_remove(g, n);
  return true;
}

bool fg_pass_decompose(fg_graph *g, fg_diag *d) {
  for (fg_node *n = g->first, *next; n; n = next) {
    next = n->next;
    fg_opcode c = n->op->code;
    if ((c == FG_OP_MEAN || c == FG_OP_VAR || c == FG_OP_VAR_MEAN) && !decompose(g, n, d))
      return false;
    if (c == FG_OP_DROPOUT && !decompose_dropout(g, n, d))
      return false;
  }
  return true;
}
