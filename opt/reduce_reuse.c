/* Reduction reuse: among reductions of the same value with the same
 * associative op, one whose dims are a strict subset of another's feeds it:
 * amax(x, [1,2]) becomes amax(amax(x, [1]), [1,2]) on the small result, so x
 * is read once (PyTorch's float8 amax pattern). The largest available
 * partial is used. Only where the result is exactly the same: amax/amin
 * always; sum/prod only when the partial is kept in the accumulation dtype
 * (a partial rounded to bf16 would lose bits). Mixed ops, different inputs,
 * non-subset dims or dtype changes are left alone. */
#include <string.h>

#include "build.h"
#include "passes.h"

static bool reusable_op(fg_opcode c) {
  return c == FG_OP_SUM || c == FG_OP_PROD || c == FG_OP_AMAX || c == FG_OP_AMIN;
}

/* The partial's result must be exact for the combined reduction. */
static bool exact_partial(const fg_node *r) {
  fg_opcode c = r->op->code;
  if (c == FG_OP_AMAX || c == FG_OP_AMIN)
    return r->out[0]->type.dtype == r->in[0]->type.dtype;
  fg_dtype out = r->out[0]->type.dtype;
  return out == fg_reduce_acc_dtype(r->in[0]->type.dtype);
}

static bool subset(const bool *a, const bool *b, int rank) { /* a strictly inside b */
  bool strict = false;
  for (int i = 0; i < rank; i++) {
    if (a[i] && !b[i])
      return false;
    if (b[i] && !a[i])
      strict = true;
  }
  return strict;
}

static int count(const bool *m, int rank) {
  int n = 0;
  for (int i = 0; i < rank; i++)
    n += m[i];
  return n;
}

bool fg_pass_reduce_reuse(fg_graph *g, fg_diag *d) {
  for (fg_node *big = g->first, *next_big; big; big = next_big) {
    next_big = big->next;
    if (!reusable_op(big->op->code) || !fg_type_is_static(&big->in[0]->type))
      continue;
    int rank = big->in[0]->type.rank;
    bool bm[FG_MAX_RANK];
    fg_reduce_mask(big, bm);
    /* the largest partial of the same value and op */
    fg_node *best = NULL;
    int best_n = 0;
    for (fg_node *s = g->first; s != big; s = s->next) { /* defined above big */
      if (s->op->code != big->op->code || s->in[0] != big->in[0])
        continue;
      if (fg_node_attr(s, "dtype") || !exact_partial(s))
        continue;
      bool sm[FG_MAX_RANK];
      fg_reduce_mask(s, sm);
      if (!subset(sm, bm, rank) || count(sm, rank) <= best_n)
        continue;
      best = s;
      best_n = count(sm, rank);
    }
    if (!best)
      continue;
    /* partial with its reduced dims kept as size 1, then the big reduction
     * over all of its dims (the size-1 ones reduce trivially) */
    bool sm[FG_MAX_RANK];
    fg_reduce_mask(best, sm);
    g->insert_point = big;
    fg_value *part = best->out[0];
    if (!fg_attr_bool(best, "keepdim")) {
      int64_t shape[FG_MAX_RANK];
      for (int i = 0; i < rank; i++)
        shape[i] = sm[i] ? 1 : big->in[0]->type.dims[i].size;
      fg_node *r = fgo_node(g, FG_OP_RESHAPE, 1, &part, big->loc);
      fgo_set_ints(g, r, "shape", shape, rank);
      part = fgo_finish(r, d);
    }
    fg_node *n = part ? fgo_node(g, big->op->code, 1, &part, big->loc) : NULL;
    if (n) {
      int64_t dims[FG_MAX_RANK];
      int nd = 0;
      for (int i = 0; i < rank; i++)
        if (bm[i])
          dims[nd++] = i;
      fgo_set_ints(g, n, "dims", dims, nd);
      if (fg_attr_bool(big, "keepdim"))
        fgo_set_bool(n, "keepdim", true);
      const fg_attr *dt = fg_node_attr(big, "dtype");
      if (dt)
        fgo_set_dtype(n, "dtype", dt->dtype);
    }
    g->insert_point = NULL;
    fg_value *v = n ? fgo_finish(n, d) : NULL;
    if (!v)
      return false;
    if (!v->name && big->out[0]->name)
      v->name = big->out[0]->name;
    fg_replace_uses(g, big->out[0], v);
    /* `big` is dead: gone now, so it is no later reduction's partial */
    fg_node_remove(g, big);
  }
  return true;
}
