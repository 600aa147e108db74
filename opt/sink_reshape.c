/* A reshape between a reduction's rows and the pointwise ops that finish
 * them moves below those ops (issue 17): op(reshape(a), b) becomes
 * reshape(op(a, reshape(b))) when a is computed from a reduction over a's
 * own shape. Segmentation fuses a full-size value into a row kernel only
 * in the kernel's domain shape, so group norm (rows of [N, G, C/G x H x W],
 * the affine weights over [N, C, H, W]) wrote its statistics in one kernel
 * and read the input again in a pointwise kernel for the output
 * (groupnorm_fwd: 0.87x torch.compile, docs/benchmarks.md, run T1); after
 * the rewrite the output is a full-size value of the row kernel, stored
 * through a view of the result. Reshapes of the other operands are views
 * (of parameters) or index arithmetic; the result's reshape is a view.
 *
 * Only pointwise ops (not the random ones, whose values follow their
 * output's shape) whose tensor operands all have the op's static shape,
 * none of them a parameter with a layout of its own, and rows of at most
 * SINK_MAX_ROW elements. */
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "passes.h"

/* Rows (the last dim of the reduced value) of at most this many elements:
 * the row kernel keeps a row for its full-size output, and group norm's
 * rows of 65536 f32 elements in one CTA ran at 0.44 of copy bandwidth,
 * 0.68x torch.compile (docs/benchmarks.md, run X2), so longer rows keep
 * their reshape and a second kernel; where the target splits a long row
 * over a thread-block cluster (schedule.c cluster_split: up to 8 CTAs of
 * a slice in registers each), rows up to 8 times as long. */
enum { SINK_MAX_ROW = 16384, SINK_MAX_CLUSTER_ROW = 8 * SINK_MAX_ROW };

typedef struct sink {
  fg_graph *g;
  int64_t max_row;
  int64_t *dom; /* by value id: the largest input of a reduction it is computed from (elements) */
  int cap;
} sink;

static bool set_dom(sink *s, int id, int64_t n) {
  if (id >= s->cap) {
    int cap = 2 * id + 64;
    int64_t *r = realloc(s->dom, sizeof *r * (size_t)cap);
    if (!r)
      return false;
    memset(r + s->cap, 0, sizeof *r * (size_t)(cap - s->cap));
    s->dom = r;
    s->cap = cap;
  }
  s->dom[id] = n;
  return true;
}

static int64_t dom_of(const sink *s, const fg_value *v) {
  return v->id < s->cap ? s->dom[v->id] : 0;
}

/* Whether v is computed from a reduction over v's own elements: a
 * full-size value of that reduction's kernel. */
static bool is_reduced(const sink *s, const fg_value *v) {
  int64_t n = fg_type_numel(&v->type);
  return n > 1 && dom_of(s, v) == n;
}

static bool same_dims(const fg_type *a, const fg_type *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i].size != b->dims[i].size)
      return false;
  return true;
}

/* The reshape operand whose input is computed from a reduction over its own
 * shape, or NULL when n does not qualify. */
static const fg_value *rows_operand(const sink *s, const fg_node *n) {
  const fg_type *t = &n->out[0]->type;
  if (n->op->kind != FG_KIND_POINTWISE || fg_op_is_random(n->op) || n->nout != 1 || t->scalar ||
      t->rank == 0 || !fg_type_is_static(t))
    return NULL;
  const fg_value *a = NULL;
  for (int i = 0; i < n->nin; i++) {
    const fg_value *x = n->in[i];
    if (x->type.scalar)
      continue;
    if (!same_dims(&x->type, t) || x->type.has_layout)
      return NULL;
    const fg_node *r = x->def;
    if (!a && r && r->op->code == FG_OP_RESHAPE && is_reduced(s, r->in[0]) &&
        !r->in[0]->type.has_layout && fg_type_is_static(&r->in[0]->type) &&
        !same_dims(&r->in[0]->type, t) &&
        r->in[0]->type.dims[r->in[0]->type.rank - 1].size <= s->max_row)
      a = r->in[0];
  }
  return a;
}

static fg_value *reshape_to(fg_graph *g, fg_value *x, const fg_type *t, fg_loc loc, fg_diag *d) {
  if (same_dims(&x->type, t))
    return x;
  /* a reshape of a reshape: of its input, when that has the shape wanted */
  if (x->def && x->def->op->code == FG_OP_RESHAPE && same_dims(&x->def->in[0]->type, t))
    return x->def->in[0];
  return fgo_reshape(g, x, t, loc, d);
}

static bool sink_one(sink *s, fg_node *n, const fg_value *a, fg_diag *d) {
  fg_graph *g = s->g;
  fg_value *in[16];
  if (n->nin > 16)
    return true;
  g->insert_point = n;
  for (int i = 0; i < n->nin; i++) {
    in[i] = n->in[i]->type.scalar ? n->in[i] : reshape_to(g, n->in[i], &a->type, n->loc, d);
    if (!in[i]) {
      g->insert_point = NULL;
      return false;
    }
  }
  fg_node *m = fgo_node(g, n->op->code, n->nin, in, n->loc);
  for (int i = 0; i < n->op->nattrs; i++)
    m->attrs[i] = n->attrs[i];
  fg_value *v = fgo_finish(m, d);
  fg_value *r = v ? reshape_to(g, v, &n->out[0]->type, n->loc, d) : NULL;
  g->insert_point = NULL;
  if (!r || !set_dom(s, v->id, fg_type_numel(&v->type)))
    return false;
  if (!r->name && n->out[0]->name)
    r->name = n->out[0]->name;
  fg_replace_uses(g, n->out[0], r);
  return true;
}

bool fg_pass_sink_reshape(fg_graph *g, const fg_pass_options *o, fg_diag *d) {
  bool reduces = false, reshapes = false; /* nothing to do without both */
  for (const fg_node *n = g->first; n && !(reduces && reshapes); n = n->next) {
    reduces |= n->op->kind == FG_KIND_REDUCTION;
    reshapes |= n->op->code == FG_OP_RESHAPE;
  }
  if (!reduces || !reshapes)
    return true;
  sink s = {g, o && o->cluster_rows ? SINK_MAX_CLUSTER_ROW : SINK_MAX_ROW, NULL, 0};
  bool ok = true;
  for (fg_node *n = g->first; n && ok; n = n->next) {
    /* what it is computed from: through pointwise and view ops */
    int64_t dom = 0;
    fg_op_kind k = n->op->kind;
    if (k == FG_KIND_REDUCTION && n->nin > 0 && fg_type_is_static(&n->in[0]->type))
      dom = fg_type_numel(&n->in[0]->type);
    if (k == FG_KIND_REDUCTION || k == FG_KIND_POINTWISE || k == FG_KIND_VIEW)
      for (int i = 0; i < n->nin; i++)
        if (dom_of(&s, n->in[i]) > dom)
          dom = dom_of(&s, n->in[i]);
    const fg_value *a = k == FG_KIND_POINTWISE ? rows_operand(&s, n) : NULL;
    if (a)
      ok = sink_one(&s, n, a, d);
    else if (dom > 0)
      for (int i = 0; i < n->nout && ok; i++)
        ok = set_dom(&s, n->out[i]->id, dom);
  }
  free(s.dom);
  return ok;
}
