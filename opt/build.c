#include "build.h"

#include <string.h>

fg_node *fgo_node(fg_graph *g, fg_opcode op, int nin, fg_value *const *in, fg_loc loc) {
  const fg_op *o = fg_op_get(op);
  return fg_node_new(g, o, nin, in, o->nout < 0 ? 1 : o->nout, loc);
}

static fg_attr *slot(fg_node *n, const char *attr) {
  int i = fg_op_attr_index(n->op, attr);
  return i < 0 ? NULL : &n->attrs[i];
}

void fgo_set_ints(fg_graph *g, fg_node *n, const char *attr, const int64_t *v, int count) {
  fg_attr *a = slot(n, attr);
  if (!a)
    return;
  a->kind = FG_ATTR_INTS;
  a->n = count;
  a->ints = fg_arena_memdup(&g->arena, v, (size_t)count * sizeof *v);
}

void fgo_set_int(fg_node *n, const char *attr, int64_t v) {
  fg_attr *a = slot(n, attr);
  if (a) {
    a->kind = FG_ATTR_INT;
    a->i = v;
  }
}

void fgo_set_bool(fg_node *n, const char *attr, bool v) {
  fg_attr *a = slot(n, attr);
  if (a) {
    a->kind = FG_ATTR_BOOL;
    a->i = v;
  }
}

void fgo_set_dtype(fg_node *n, const char *attr, fg_dtype t) {
  fg_attr *a = slot(n, attr);
  if (a) {
    a->kind = FG_ATTR_DTYPE;
    a->dtype = t;
  }
}

fg_value *fgo_finish(fg_node *n, fg_diag *d) { return fg_infer_node(n, d) ? n->out[0] : NULL; }

fg_value *fgo_unary(fg_graph *g, fg_opcode op, fg_value *a, fg_loc loc, fg_diag *d) {
  return a ? fgo_finish(fgo_node(g, op, 1, &a, loc), d) : NULL;
}

fg_value *fgo_binary(fg_graph *g, fg_opcode op, fg_value *a, fg_value *b, fg_loc loc, fg_diag *d) {
  if (!a || !b)
    return NULL;
  fg_value *in[2] = {a, b};
  return fgo_finish(fgo_node(g, op, 2, in, loc), d);
}

fg_value *fgo_cast(fg_graph *g, fg_value *a, fg_dtype t, fg_loc loc, fg_diag *d) {
  if (!a || a->type.dtype == t)
    return a;
  fg_node *n = fgo_node(g, FG_OP_CAST, 1, &a, loc);
  fgo_set_dtype(n, "dtype", t);
  return fgo_finish(n, d);
}

fg_value *fgo_reshape(fg_graph *g, fg_value *a, const fg_type *t, fg_loc loc, fg_diag *d) {
  if (!a)
    return NULL;
  int64_t shape[FG_MAX_RANK];
  for (int i = 0; i < t->rank; i++)
    shape[i] = t->dims[i].size;
  fg_node *r = fgo_node(g, FG_OP_RESHAPE, 1, &a, loc);
  fgo_set_ints(g, r, "shape", shape, t->rank);
  return fgo_finish(r, d);
}
