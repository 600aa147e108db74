/* Adjacent view ops merge: reshape of a reshape is one reshape, permute of a
 * permute (or transpose) one permute, and views that change nothing
 * disappear. Shorter chains print better and compose the same strides. */
#include <string.h>

#include "build.h"
#include "passes.h"

static bool is_permute(const fg_node *n) {
  return n->op->code == FG_OP_PERMUTE || n->op->code == FG_OP_TRANSPOSE;
}

/* The permutation of a permute or transpose node (out dim i = in dim p[i]). */
static void perm_of(const fg_node *n, int64_t *p) {
  int r = n->out[0]->type.rank;
  if (n->op->code == FG_OP_PERMUTE) {
    const fg_attr *a = fg_node_attr(n, "dims");
    for (int i = 0; i < r; i++)
      p[i] = a->ints[i] < 0 ? a->ints[i] + r : a->ints[i];
    return;
  }
  for (int i = 0; i < r; i++)
    p[i] = i;
  int64_t a = fg_attr_int(n, "dim0"), b = fg_attr_int(n, "dim1");
  if (a < 0)
    a += r;
  if (b < 0)
    b += r;
  p[a] = b;
  p[b] = a;
}

static void replace(fg_graph *g, fg_node *n, fg_value *v) {
  if (!v)
    return;
  if (!v->name && n->out[0]->name && v->param_index < 0)
    v->name = n->out[0]->name;
  fg_replace_uses(g, n->out[0], v);
}

bool fg_pass_merge_views(fg_graph *g, fg_diag *d) {
  for (fg_node *n = g->first; n; n = n->next) {
    fg_opcode c = n->op->code;
    if (n->nin == 0)
      continue;
    fg_value *x = n->in[0];
    const fg_node *p = x->def;
    if (c == FG_OP_RESHAPE || c == FG_OP_VIEW) {
      if (fg_type_same_dims(&x->type, &n->out[0]->type) && !x->type.has_layout) {
        replace(g, n, x);
        continue;
      }
      const fg_type *t = &n->out[0]->type;
      /* a symbolic shape has no literal sizes for the merged reshape: the
       * chain stays (checked before the node is made: an unfinished node
       * left in the graph fails the verifier) */
      if (p && (p->op->code == FG_OP_RESHAPE || p->op->code == FG_OP_VIEW) &&
          fg_type_is_static(t)) {
        g->insert_point = n;
        fg_node *m = fgo_node(g, FG_OP_RESHAPE, 1, &p->in[0], n->loc);
        int64_t shape[FG_MAX_RANK];
        for (int i = 0; i < t->rank; i++)
          shape[i] = t->dims[i].size;
        fgo_set_ints(g, m, "shape", shape, t->rank);
        g->insert_point = NULL;
        replace(g, n, fgo_finish(m, d));
      }
    } else if (is_permute(n)) {
      int r = n->out[0]->type.rank;
      int64_t q[FG_MAX_RANK];
      perm_of(n, q);
      bool ident = true;
      for (int i = 0; i < r; i++)
        ident &= q[i] == i;
      if (ident) {
        replace(g, n, x);
        continue;
      }
      if (p && is_permute(p)) {
        int64_t pp[FG_MAX_RANK], comp[FG_MAX_RANK];
        perm_of(p, pp);
        bool cid = true;
        for (int i = 0; i < r; i++) {
          comp[i] = pp[q[i]];
          cid &= comp[i] == i;
        }
        if (cid) {
          replace(g, n, p->in[0]);
          continue;
        }
        g->insert_point = n;
        fg_value *src = p->in[0];
        fg_node *m = fgo_node(g, FG_OP_PERMUTE, 1, &src, n->loc);
        fgo_set_ints(g, m, "dims", comp, r);
        g->insert_point = NULL;
        replace(g, n, fgo_finish(m, d));
      }
    }
  }
  return true;
}
