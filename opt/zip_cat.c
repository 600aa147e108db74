/* Zipping: a cat whose pieces are views of one tensor that tile it along the
 * cat dim, in order and through the same strides, is itself a view of that
 * tensor; the cat (and the copy it costs) disappears.
 *
 * Each piece is composed into a strided view of the common base (offset,
 * sizes, strides over the base's dense storage). The cat is a view when all
 * pieces share every stride and piece i+1 starts where piece i ends along
 * the cat dim. The replacement is a reshape of the base (or a reshape then
 * a permute), kept only when its own strided view is exactly the zipped one,
 * so the rewrite is proven, not guessed: out-of-order or overlapping slices,
 * a cat along another dim or mismatched view chains are left alone. */
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "passes.h"
#include "plan.h"
#include "view.h"

/* Composes v's chain of view ops down to its first non-view ancestor. */
static bool view_of(const fg_value *v, const fg_value **base, fg_strided *out) {
  const char *why;
  return fg_strided_chain(v, NULL, NULL, base, out, &why);
}

/* Same view: equal sizes, equal offsets, equal strides where size > 1. */
static bool same_view(const fg_strided *a, const fg_strided *b) {
  if (a->rank != b->rank || a->offset != b->offset)
    return false;
  for (int i = 0; i < a->rank; i++) {
    if (a->sizes[i] != b->sizes[i])
      return false;
    if (a->sizes[i] > 1 && a->strides[i] != b->strides[i])
      return false;
  }
  return true;
}

/* The zipped view of cat node n, or false. */
static bool zipped_view(const fg_node *n, const fg_value **base, fg_strided *z) {
  int d = (int)fg_attr_int(n, "dim");
  int rank = n->out[0]->type.rank;
  if (d < 0)
    d += rank;
  fg_strided s[64] = {{0}};
  if (n->nin > 64)
    return false;
  for (int i = 0; i < n->nin; i++) {
    const fg_value *b;
    if (!view_of(n->in[i], &b, &s[i]))
      return false;
    if (i == 0)
      *base = b;
    else if (b != *base)
      return false;
  }
  if (n->in[0]->type.dtype != n->out[0]->type.dtype)
    return false;
  /* the stride along the cat dim: from a piece of size > 1, else from the
   * step between the first two pieces */
  int64_t sd = 0;
  bool have = false;
  for (int i = 0; i < n->nin && !have; i++)
    if (s[i].sizes[d] > 1) {
      sd = s[i].strides[d];
      have = true;
    }
  if (!have && n->nin > 1 && s[0].sizes[d] == 1) {
    sd = s[1].offset - s[0].offset;
    have = true;
  }
  if (!have)
    sd = 1;
  int64_t at = s[0].offset, total = 0;
  for (int i = 0; i < n->nin; i++) {
    if (n->in[i]->type.dims[d].size != s[i].sizes[d])
      return false;
    if (s[i].offset != at)
      return false;
    if (s[i].sizes[d] > 1 && s[i].strides[d] != sd)
      return false;
    for (int k = 0; k < rank; k++)
      if (k != d && s[i].sizes[k] > 1 && s[i].strides[k] != s[0].strides[k])
        return false;
    at += s[i].sizes[d] * sd;
    total += s[i].sizes[d];
  }
  *z = s[0];
  z->sizes[d] = total;
  z->strides[d] = sd;
  return true;
}

/* Builds reshape(base) [then permute] before `before` whose view is z; NULL
 * when no such chain exists. */
static fg_value *rebuild(fg_graph *g, fg_node *before, const fg_value *base, const fg_strided *z,
                         fg_diag *d) {
  /* dims in order of decreasing stride (stable; size-1 dims keep place) */
  int perm[FG_MAX_RANK], r = z->rank;
  for (int i = 0; i < r; i++)
    perm[i] = i;
  for (int i = 1; i < r; i++)
    for (int j = i; j > 0; j--) {
      int a = perm[j - 1], b = perm[j];
      if (z->sizes[a] > 1 && z->sizes[b] > 1 && z->strides[a] < z->strides[b]) {
        perm[j - 1] = b;
        perm[j] = a;
      } else {
        break;
      }
    }
  bool identity = true;
  for (int i = 0; i < r; i++)
    identity &= perm[i] == i;
  int64_t shape[FG_MAX_RANK], numel = 1;
  for (int i = 0; i < r; i++) {
    shape[i] = z->sizes[perm[i]];
    numel *= shape[i];
  }
  /* A zipped view of part of the base would need a slice too; not done. */
  if (numel != fg_type_numel(&base->type))
    return NULL;
  fg_diag quiet; /* the trial graph's errors are not the user's */
  fg_diag_init(&quiet, "zip", NULL, 0, NULL);
  /* check before building: compose the candidate on the base's view */
  fg_graph *tmpg = fg_graph_new("zip");
  fg_type bt = base->type;
  fg_value *tb = fg_add_param(tmpg, "b", bt, (fg_loc){0, 0});
  fg_node *rn = fgo_node(tmpg, FG_OP_RESHAPE, 1, &tb, (fg_loc){0, 0});
  fgo_set_ints(tmpg, rn, "shape", shape, r);
  bool ok = fgo_finish(rn, &quiet) != NULL;
  fg_strided s = {0};
  const char *why;
  fg_type bt2 = bt;
  if (base->param_index < 0)
    bt2.has_layout = false;
  fg_strided_dense(&bt2, &s);
  fg_strided t = {0};
  ok = ok && fg_strided_apply(rn, 0, &s, &t, &why);
  int64_t inv[FG_MAX_RANK];
  for (int i = 0; i < r; i++)
    inv[perm[i]] = i;
  if (ok && !identity) {
    fg_value *rv = rn->out[0];
    fg_node *pn = fgo_node(tmpg, FG_OP_PERMUTE, 1, &rv, (fg_loc){0, 0});
    fgo_set_ints(tmpg, pn, "dims", inv, r);
    fg_strided t2 = t;
    ok = fgo_finish(pn, &quiet) != NULL && fg_strided_apply(pn, 0, &t, &t2, &why);
    t = t2;
  }
  ok = ok && same_view(&t, z);
  fg_graph_free(tmpg);
  fg_diag_free(&quiet);
  if (!ok)
    return NULL;
  g->insert_point = before;
  fg_value *bv = (fg_value *)base;
  fg_node *n1 = fgo_node(g, FG_OP_RESHAPE, 1, &bv, before->loc);
  fgo_set_ints(g, n1, "shape", shape, r);
  fg_value *v = fgo_finish(n1, d);
  if (v && !identity) {
    fg_node *n2 = fgo_node(g, FG_OP_PERMUTE, 1, &v, before->loc);
    fgo_set_ints(g, n2, "dims", inv, r);
    v = fgo_finish(n2, d);
  }
  g->insert_point = NULL;
  return v;
}

bool fg_pass_zip_cat(fg_graph *g, fg_diag *d) {
  for (fg_node *n = g->first; n; n = n->next) {
    if (n->op->code != FG_OP_CAT)
      continue;
    const fg_value *base;
    fg_strided z;
    if (!zipped_view(n, &base, &z))
      continue;
    fg_value *v = rebuild(g, n, base, &z, d);
    if (!v)
      continue;
    if (!v->name && n->out[0]->name)
      v->name = n->out[0]->name;
    fg_replace_uses(g, n->out[0], v);
  }
  return true;
}
