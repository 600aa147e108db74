/* A reduction of a reshape reduces the reshape's input: op(reshape(x, S),
 * dims) becomes reshape(op(x, dims'), out) where the reshape only merges
 * and splits groups of dims (x's dims i0..i1 are S's dims j0..j1, the same
 * elements) and the reduced dims of S are whole groups; dims' are x's dims
 * of those groups. Segmentation puts a reduction in a kernel only over the
 * kernel's own domain, so a bias gradient written over [B*T, C] beside
 * work over [B, T, C] read the gradient again in a kernel of its own:
 * GPT-2's LayerNorm backward took 59 us in three kernels and 39 in one
 * (docs/benchmarks.md, run T1). After the rewrite the sum is a column
 * reduction of the row kernel that computes what it sums.
 *
 * Only where the move joins the graph's other reductions: some other
 * reduction reduces a value of x's shape, and none reduces one of the
 * reshape's (a variance over a reshaped group, group norm's, sums the
 * reshape's values twice; moving the first sum alone split the two into
 * two kernels). Static shapes only, and sum, prod, amax and amin (mean
 * and the variances are sums after decompose); dims of size 1 go with
 * either side. The result is reshaped to the reduction's type, so every
 * user sees what it saw. */
#include "build.h"
#include "passes.h"

/* Whether op's reduction over x (viewed as s through a reshape) can reduce
 * x itself; xmask: x's reduced dims. */
static bool map_mask(const fg_type *x, const fg_type *s, const bool *smask, bool *xmask) {
  int rx = x->rank, rs = s->rank, i = 0, j = 0;
  bool any = false;
  while (i < rx || j < rs) {
    int i0 = i, j0 = j;
    int64_t px = 1, ps = 1;
    /* one group: the fewest dims on each side with equal products, taking
     * from the side with the smaller product (size-1 dims at the end of
     * either side close it) */
    for (;;) {
      bool more_x = i < rx, more_s = j < rs;
      if (px == ps && i > i0 && j > j0)
        break;
      if (px == ps && (!more_x || !more_s) && (i > i0 || j > j0)) {
        while (i < rx && x->dims[i].size == 1)
          i++;
        while (j < rs && s->dims[j].size == 1)
          j++;
        break;
      }
      if (more_x && (px <= ps || !more_s))
        px *= x->dims[i++].size;
      else if (more_s)
        ps *= s->dims[j++].size;
      else
        return false;
      if (px == 0 || ps == 0)
        return false;
    }
    if (px != ps)
      return false;
    /* reduced or kept as a whole: S's dims of size 1 may go either way */
    int red = -1;
    for (int k = j0; k < j; k++)
      if (s->dims[k].size != 1) {
        if (red >= 0 && red != (int)smask[k])
          return false;
        red = smask[k];
      }
    for (int k = i0; k < i; k++) {
      xmask[k] = red == 1 && x->dims[k].size != 1;
      any |= xmask[k];
    }
  }
  return any;
}

static bool is_reduction(const fg_node *n) {
  fg_opcode c = n->op->code;
  return (c == FG_OP_SUM || c == FG_OP_PROD || c == FG_OP_AMAX || c == FG_OP_AMIN) &&
         n->nout == 1 && n->nin == 1;
}

/* Whether another reduction than n reduces a value of x's shape, and none
 * one of s's. */
static bool joins_others(const fg_graph *g, const fg_node *n, const fg_type *x, const fg_type *s) {
  bool joins = false;
  for (const fg_node *m = g->first; m; m = m->next) {
    if (m == n || m->op->kind != FG_KIND_REDUCTION || m->nin < 1)
      continue;
    if (fg_type_same_dims(&m->in[0]->type, s))
      return false;
    joins |= fg_type_same_dims(&m->in[0]->type, x);
  }
  return joins;
}

static bool rewrite(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_value *s = n->in[0];
  const fg_node *r = s->def;
  if (!r || (r->op->code != FG_OP_RESHAPE && r->op->code != FG_OP_VIEW))
    return true;
  fg_value *x = r->in[0];
  fg_value *out = n->out[0];
  if (!fg_type_is_static(&x->type) || !fg_type_is_static(&s->type) ||
      !fg_type_is_static(&out->type) || x->type.rank == 0)
    return true;
  bool smask[FG_MAX_RANK], xmask[FG_MAX_RANK];
  fg_reduce_mask(n, smask);
  if (!map_mask(&x->type, &s->type, smask, xmask) || !joins_others(g, n, &x->type, &s->type))
    return true;
  int64_t dims[FG_MAX_RANK];
  int nd = 0;
  for (int i = 0; i < x->type.rank; i++)
    if (xmask[i])
      dims[nd++] = i;
  g->insert_point = n;
  fg_node *m = fgo_node(g, n->op->code, 1, &x, n->loc);
  fgo_set_ints(g, m, "dims", dims, nd);
  const fg_attr *dt = fg_node_attr(n, "dtype");
  if (dt)
    fgo_set_dtype(m, "dtype", dt->dtype);
  fg_value *v = fgo_finish(m, d);
  fg_value *y = v ? fgo_reshape(g, v, &out->type, n->loc, d) : NULL;
  g->insert_point = NULL;
  if (!y)
    return false;
  if (out->name && !y->name)
    y->name = out->name;
  fg_replace_uses(g, out, y);
  return true;
}

bool fg_pass_reduce_reshape(fg_graph *g, fg_diag *d) {
  for (fg_node *n = g->first; n; n = n->next) {
    if (is_reduction(n) && !rewrite(g, n, d))
      return false;
  }
  return true;
}
