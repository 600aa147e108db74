/* Common-subexpression elimination: two nodes with the same op, the same
 * operands (in either order for commutative ops) and equal attributes
 * compute the same values; the later one's uses move to the earlier one.
 * Every op is pure, so no memory dependence limits this. Literals with the
 * same value merge too. One pass in graph order with a hash table: linear in
 * the graph's size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "infer.h"

/* Float maximum/minimum are not: a tie gives the second operand, so
 * maximum(+0.0, -0.0) is -0.0 and maximum(-0.0, +0.0) is +0.0. */
static bool commutative(const fg_node *n) {
  if (fg_op_has(n->op, FG_PROP_COMMUTATIVE))
    return true;
  return fg_op_has(n->op, FG_PROP_COMMUTATIVE_INT) && !fg_dtype_is_float(fg_pw_compute_dtype(n));
}

static bool attr_eq(const fg_attr *a, const fg_attr *b) {
  if (a->kind != b->kind)
    return false;
  switch (a->kind) {
  case FG_ATTR_NONE:
    return true;
  case FG_ATTR_INT:
  case FG_ATTR_BOOL:
    return a->i == b->i;
  case FG_ATTR_FLOAT:
    return memcmp(&a->f, &b->f, sizeof a->f) == 0; /* bits: -0.0 and NaNs stay apart */
  case FG_ATTR_DTYPE:
    return a->dtype == b->dtype;
  case FG_ATTR_STRING:
    return strcmp(a->s, b->s) == 0;
  case FG_ATTR_INTS:
    if (a->n != b->n)
      return false;
    for (int i = 0; i < a->n; i++) /* entries that are expressions of a size too */
      if (!fg_dim_eq(fg_attr_dim(a, i), fg_attr_dim(b, i)))
        return false;
    return true;
  }
  return false;
}

/* Operand ids in canonical order. */
static int operands(const fg_node *n, int *ids) {
  for (int i = 0; i < n->nin; i++)
    ids[i] = n->in[i]->id;
  if (n->nin == 2 && commutative(n) && ids[0] > ids[1]) {
    int t = ids[0];
    ids[0] = ids[1];
    ids[1] = t;
  }
  return n->nin;
}

static bool same(const fg_node *a, const fg_node *b) {
  if (a->op != b->op || a->nin != b->nin || a->nout != b->nout)
    return false;
  int ia[64], ib[64];
  if (a->nin > 64)
    return false;
  operands(a, ia);
  operands(b, ib);
  if (memcmp(ia, ib, sizeof(int) * (size_t)a->nin) != 0)
    return false;
  for (int i = 0; i < a->op->nattrs; i++)
    if (!attr_eq(&a->attrs[i], &b->attrs[i]))
      return false;
  for (int i = 0; i < a->nout; i++)
    if (!fg_type_eq(&a->out[i]->type, &b->out[i]->type))
      return false;
  return true;
}

static uint64_t hash_node(const fg_node *n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)n->op->code;
  int ids[64];
  int k = n->nin <= 64 ? operands(n, ids) : 0;
  for (int i = 0; i < k; i++)
    h = (h ^ (uint64_t)ids[i]) * 1099511628211ull;
  if (n->op->code == FG_OP_LITERAL) {
    uint64_t bits;
    memcpy(&bits, &n->attrs[0].f, sizeof bits);
    h = (h ^ (n->attrs[0].kind == FG_ATTR_FLOAT ? bits : (uint64_t)n->attrs[0].i)) *
        1099511628211ull;
  }
  return h;
}

bool fg_pass_cse(fg_graph *g, fg_diag *d) {
  (void)d;
  int count = 0;
  for (fg_node *n = g->first; n; n = n->next)
    count++;
  int nb = 1;
  while (nb < 2 * count + 2)
    nb *= 2;
  fg_node **table = calloc((size_t)nb, sizeof *table);
  /* values replaced so far: operands are forwarded as nodes are visited, so
   * the pass stays linear however many duplicates there are */
  fg_value **fwd = calloc((size_t)g->next_value_id + 1, sizeof *fwd);
  if (!table || !fwd) {
    free(table);
    free(fwd);
    return false;
  }
  for (fg_node *n = g->first, *next; n; n = next) {
    next = n->next;
    for (int k = 0; k < n->nin; k++)
      if (fwd[n->in[k]->id])
        n->in[k] = fwd[n->in[k]->id];
    unsigned i = (unsigned)(hash_node(n) & (uint64_t)(nb - 1));
    fg_node *hit = NULL;
    for (; table[i]; i = (i + 1) & (unsigned)(nb - 1))
      if (same(table[i], n)) {
        hit = table[i];
        break;
      }
    if (!hit) {
      table[i] = n;
      continue;
    }
    for (int k = 0; k < n->nout; k++) {
      if (!hit->out[k]->name && n->out[k]->name)
        hit->out[k]->name = n->out[k]->name;
      fwd[n->out[k]->id] = hit->out[k];
    }
    fg_node_remove(g, n);
  }
  for (int i = 0; i < g->nresults; i++)
    if (fwd[g->results[i]->id])
      g->results[i] = fwd[g->results[i]->id];
  free(table);
  free(fwd);
  return true;
}
