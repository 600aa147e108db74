/* mean, var and var_mean become sums and pointwise ops in the accumulation
 * dtype, so kernels only know sum/prod/amax/amin. The variance is two-pass
 * (mean first, then the sum of squared deviations), as the reference
 * interpreter computes it: accurate where sum-of-squares would cancel.
 * dropout becomes rand and pointwise ops (docs/format.md 5.11), so it fuses
 * wherever they do. */
/* Issue 20's composites (stack, softmax, log_softmax, logsumexp, argmax,
 * argmin) become the ops a user would write for them by hand, at the end
 * of this file; cumsum stays, for the scan kernels (opt/segment.c). */
#include <math.h>
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
 * an `extent` the code generator reads as T x the rest at run time, plus a
 * literal where the reduced extent is an expression of T (T - 1 rows of a
 * slice, T + 3 of a pad): the count is q P + r with P the stand-in, and
 * since static extents stay far below P (opt/symbolic.c), q and r are q T's
 * coefficient and the constant. */
static fg_value *count_value(fg_graph *g, double count, fg_dtype acc, fg_loc loc, fg_diag *d) {
  int64_t c = (int64_t)count, P = g->stand_in;
  int64_t q = P ? (c + P / 2) / P : 0;
  if (!P || c == 0 || q == 0)
    return fg_literal_float(g, count, loc);
  int64_t r = c - q * P;
  fg_node *e = fgo_node(g, FG_OP_EXTENT, 0, NULL, loc);
  fgo_set_int(e, "value", q * P);
  fgo_set_dtype(e, "dtype", acc);
  fg_value *t = fgo_finish(e, d);
  if (!t || r == 0)
    return t;
  return fgo_binary(g, FG_OP_ADD, t, fg_literal_float(g, (double)r, loc), loc, d);
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
      if (!keep && m)
        mm = fgo_reshape(g, m, &n->out[1]->type, n->loc, d);
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

/* ---- issue 20, ops: the composites, written as PyTorch's decompositions
 * (torch/_decomp/decompositions.py), in the accumulation dtype like mean;
 * the scheduler sees what a user writing them out by hand would write, so
 * it fuses them the same way (tests/golden/opt/ops_issue20.fg). */

static fg_value *reduce_of(fg_graph *g, fg_opcode op, fg_value *x, const int64_t *dims, int ndims,
                           bool keepdim, fg_loc loc, fg_diag *d) {
  if (!x)
    return NULL;
  fg_node *n = fgo_node(g, op, 1, &x, loc);
  if (dims)
    fgo_set_ints(g, n, "dims", dims, ndims);
  if (keepdim)
    fgo_set_bool(n, "keepdim", true);
  return fgo_finish(n, d);
}

/* stack(a, b, ..., dim=d) = cat(unsqueeze(a, d), unsqueeze(b, d), ..., dim=d) */
static fg_value *stack_of(fg_graph *g, fg_node *n, fg_diag *d) {
  int64_t dim = fg_attr_int(n, "dim");
  if (dim < 0)
    dim += n->in[0]->type.rank + 1;
  fg_value **parts = fg_arena_alloc(&g->arena, (size_t)n->nin * sizeof *parts);
  for (int i = 0; i < n->nin; i++) {
    fg_node *u = fgo_node(g, FG_OP_UNSQUEEZE, 1, &n->in[i], n->loc);
    fgo_set_int(u, "dim", dim);
    if (!(parts[i] = fgo_finish(u, d)))
      return NULL;
  }
  fg_node *c = fgo_node(g, FG_OP_CAT, n->nin, parts, n->loc);
  fgo_set_int(c, "dim", dim);
  return fgo_finish(c, d);
}

/* softmax: e / sum(e) with e = exp(x - amax(x)); log_softmax: (x - amax(x))
 * - log(sum(e)). x is first cast to dtype= when given. */
static fg_value *softmax_of(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_dtype out = n->out[0]->type.dtype;
  fg_loc loc = n->loc;
  int64_t dim = fg_attr_int(n, "dim");
  fg_value *x = fgo_cast(g, fgo_cast(g, n->in[0], out, loc, d), fg_reduce_acc_dtype(out), loc, d);
  fg_value *m = reduce_of(g, FG_OP_AMAX, x, &dim, 1, true, loc, d);
  fg_value *z = fgo_binary(g, FG_OP_SUB, x, m, loc, d);
  fg_value *e = fgo_unary(g, FG_OP_EXP, z, loc, d);
  fg_value *s = reduce_of(g, FG_OP_SUM, e, &dim, 1, true, loc, d);
  fg_value *y = n->op->code == FG_OP_SOFTMAX
                    ? fgo_binary(g, FG_OP_DIV, e, s, loc, d)
                    : fgo_binary(g, FG_OP_SUB, z, fgo_unary(g, FG_OP_LOG, s, loc, d), loc, d);
  return y ? fgo_cast(g, y, out, loc, d) : NULL;
}

/* torch.logsumexp: m = amax(x) with |m| = inf replaced by 0 (so a row of
 * -inf gives log(0) + 0 = -inf, not NaN), log(sum(exp(x - m))) + m. Here
 * every m that is not finite becomes 0: a NaN m (a row holding NaN) still
 * gives NaN through exp(NaN) in the sum, and an empty extent, whose amax
 * is NaN in the interpreter (-inf in a kernel), gives log(0) = -inf as
 * PyTorch does, also where the extent is a symbolic size that is 0. */
static fg_value *logsumexp_of(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_dtype out = n->out[0]->type.dtype;
  fg_loc loc = n->loc;
  const fg_attr *da = fg_node_attr(n, "dims");
  const int64_t *dims = da ? da->ints : NULL;
  int nd = da ? da->n : 0;
  bool keep = fg_attr_bool(n, "keepdim");
  fg_value *x = fgo_cast(g, n->in[0], fg_reduce_acc_dtype(out), loc, d);
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  fg_value *m = reduce_of(g, FG_OP_AMAX, x, dims, nd, true, loc, d);
  fg_value *finite = fgo_binary(g, FG_OP_LT, fgo_unary(g, FG_OP_ABS, m, loc, d),
                                fg_literal_float(g, INFINITY, loc), loc, d);
  fg_value *mm = NULL;
  if (finite) {
    fg_value *w[3] = {finite, m, fg_literal_float(g, 0.0, loc)};
    mm = fgo_finish(fgo_node(g, FG_OP_WHERE, 3, w, loc), d);
  }
  fg_value *s = reduce_of(g, FG_OP_SUM,
                          fgo_unary(g, FG_OP_EXP, fgo_binary(g, FG_OP_SUB, x, mm, loc, d), loc, d),
                          dims, nd, keep, loc, d);
  fg_value *mk = mm;
  if (!keep && mm) { /* the reduced dims, of size 1 in mm, dropped */
    int64_t red[FG_MAX_RANK];
    int nred = 0;
    for (int i = 0; i < x->type.rank; i++)
      if (mask[i])
        red[nred++] = i;
    fg_node *sq = fgo_node(g, FG_OP_SQUEEZE, 1, &mm, loc);
    fgo_set_ints(g, sq, "dims", red, nred);
    mk = fgo_finish(sq, d);
  }
  fg_value *y = fgo_binary(g, FG_OP_ADD, fgo_unary(g, FG_OP_LOG, s, loc, d), mk, loc, d);
  return y ? fgo_cast(g, y, out, loc, d) : NULL;
}

/* argmax(x, dim=k) = amin(where(eq(x, m) | isnan(x), i, N), dims=[k]) with
 * m = amax(x, dims=[k], keepdim=true) and i the index along k (an i32 iota
 * shaped to broadcast): the first index of the maximum, or of the first NaN
 * (amax propagates NaN, so then eq is false everywhere); argmin with amin
 * and amax swapped. Without dim=, of x reshaped to one dim. */
static fg_value *argminmax_of(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_loc loc = n->loc;
  fg_value *x = n->in[0];
  const fg_attr *da = fg_node_attr(n, "dim");
  bool keep = fg_attr_bool(n, "keepdim");
  int64_t dim = 0;
  if (da) {
    dim = da->i < 0 ? da->i + x->type.rank : da->i;
  } else {
    fg_type flat = {.rank = 1};
    flat.dims[0].size = fg_type_numel(&x->type);
    x = fgo_reshape(g, x, &flat, loc, d);
  }
  if (!x)
    return NULL;
  int64_t count = x->type.dims[dim].size;
  bool is_max = n->op->code == FG_OP_ARGMAX;
  fg_value *m = reduce_of(g, is_max ? FG_OP_AMAX : FG_OP_AMIN, x, &dim, 1, true, loc, d);
  fg_value *hit = fgo_binary(g, FG_OP_EQ, x, m, loc, d);
  if (fg_dtype_is_float(x->type.dtype))
    hit = fgo_binary(g, FG_OP_LOGICAL_OR, hit, fgo_unary(g, FG_OP_ISNAN, x, loc, d), loc, d);
  fg_value *len = fg_literal_int(g, count, loc);
  fg_node *io = fgo_node(g, FG_OP_IOTA, 1, &len, loc);
  fgo_set_dtype(io, "dtype", FG_I32);
  fg_type col = {.rank = (int)(x->type.rank - dim)};
  for (int i = 0; i < col.rank; i++)
    col.dims[i].size = i == 0 ? count : 1;
  fg_value *idx = fgo_reshape(g, fgo_finish(io, d), &col, loc, d);
  fg_value *r = NULL;
  if (hit && idx) {
    fg_value *w[3] = {hit, idx, fg_literal_int(g, count, loc)};
    r = reduce_of(g, FG_OP_AMIN, fgo_finish(fgo_node(g, FG_OP_WHERE, 3, w, loc), d), &dim, 1,
                  keep && da, loc, d);
  }
  r = fgo_cast(g, r, FG_I64, loc, d);
  if (r && !da)
    r = fgo_reshape(g, r, &n->out[0]->type, loc, d);
  return r;
}

/* Symbolic dims are fine: inference keeps the extents these read as
 * literals (argmax's) static, and the rest is shape-generic. */
static bool decompose_ops20(fg_graph *g, fg_node *n, fg_diag *d) {
  g->insert_point = n;
  fg_value *r = NULL;
  switch (n->op->code) {
  case FG_OP_STACK:
    r = stack_of(g, n, d);
    break;
  case FG_OP_SOFTMAX:
  case FG_OP_LOG_SOFTMAX:
    r = softmax_of(g, n, d);
    break;
  case FG_OP_LOGSUMEXP:
    r = logsumexp_of(g, n, d);
    break;
  default:
    r = argminmax_of(g, n, d);
    break;
  }
  g->insert_point = NULL;
  if (!r)
    return false;
  if (!r->name && n->out[0]->name)
    r->name = n->out[0]->name;
  fg_replace_uses(g, n->out[0], r);
  fg_node_remove(g, n);
  return true;
}

static bool is_ops20_composite(fg_opcode c) {
  return c == FG_OP_STACK || c == FG_OP_SOFTMAX || c == FG_OP_LOG_SOFTMAX || c == FG_OP_LOGSUMEXP ||
         c == FG_OP_ARGMAX || c == FG_OP_ARGMIN;
}

bool fg_decompose_rewrites(fg_opcode c) {
  return c == FG_OP_MEAN || c == FG_OP_VAR || c == FG_OP_VAR_MEAN || c == FG_OP_DROPOUT ||
         is_ops20_composite(c);
}

bool fg_pass_decompose(fg_graph *g, fg_diag *d) {
  for (fg_node *n = g->first, *next; n; n = next) {
    next = n->next;
    fg_opcode c = n->op->code;
    if ((c == FG_OP_MEAN || c == FG_OP_VAR || c == FG_OP_VAR_MEAN) && !decompose(g, n, d))
      return false;
    if (c == FG_OP_DROPOUT && !decompose_dropout(g, n, d))
      return false;
    if (is_ops20_composite(c) && !decompose_ops20(g, n, d))
      return false;
  }
  return true;
}
