/* Zip-store (issue 19): the backward of a fused QKV projection cats dq, dk
 * and dv, each through a permute and a reshape, into the packed gradient
 * [B, S, 3 H D]. A cat whose pieces are, through such views alone, values
 * computed by attention-backward kernels and used nowhere else needs no
 * kernel of its own: each producer writes its value straight into its
 * piece of the cat's buffer, through the strided view the chain gives
 * (fg_storage.within and .view), and the cat's kernel, a read and a write
 * of the whole gradient, goes. zip_cat.c is the other way round (a cat of
 * slices of one tensor is a view of it); nvFuser issue #1768 and
 * lightning-thunder PR #59 allocate dq, dk and dv as slices of one buffer
 * for the same reason.
 *
 * Proven, not guessed: every view between a piece and its producer's
 * value is a bijection (reshape, view, squeeze, unsqueeze, permute,
 * transpose), so the value's elements are exactly the piece's, and the
 * strides composed back from the piece's place in the cat say where each
 * one goes. A chain strides cannot express, a value used twice or returned
 * itself, a symbolic size, a cat written into a parameter (`-> p`), or a
 * producer of another kind leaves the cat as it was. The attention-backward
 * kernels store through any strides with a contiguous head dim
 * (emit_attention_bwd.c store_rows). */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "view.h"

enum { MAX_PIECES = 16 };

/* Whether view node n is a bijection whose inverse is a reshape (1), a
 * permutation (2), or neither (0). */
static int bijection(const fg_node *n) {
  switch (n->op->code) {
  case FG_OP_RESHAPE:
  case FG_OP_VIEW:
  case FG_OP_SQUEEZE:
  case FG_OP_UNSQUEEZE:
    return 1;
  case FG_OP_PERMUTE:
  case FG_OP_TRANSPOSE:
    return 2;
  default:
    return 0;
  }
}

/* The view of node n's operand given y, the view of its result. */
static bool view_back(const fg_node *n, const fg_strided *y, fg_strided *x) {
  const fg_type *xt = &n->in[0]->type;
  int64_t xs[FG_MAX_RANK];
  for (int i = 0; i < xt->rank; i++)
    xs[i] = xt->dims[i].size;
  const char *why;
  fg_view_map m;
  if (bijection(n) == 1) {
    memset(&m, 0, sizeof m);
    m.reshape = true;
    m.in_rank = y->rank;
    m.out_rank = xt->rank;
    return fg_strided_map(&m, y, xs, x, &why);
  }
  int64_t ys[FG_MAX_RANK];
  for (int i = 0; i < y->rank; i++)
    ys[i] = y->sizes[i];
  if (!fg_view_map_of(n, 0, xs, ys, &m, &why))
    return false;
  x->rank = xt->rank;
  x->offset = y->offset;
  for (int i = 0; i < xt->rank; i++) {
    if (m.src[i] < 0)
      return false;
    x->sizes[i] = y->sizes[m.src[i]];
    x->strides[i] = y->strides[m.src[i]];
  }
  return true;
}

typedef struct zipper {
  fg_plan *p;
  int *uses;      /* by value id: operand uses, results counted */
  bool *returned; /* by value id: a result of the graph */
} zipper;

/* The stored value piece `x` of a cat is a bijective view chain of, with
 * the piece's view `at` over the cat's buffer composed back to it (*view);
 * NULL where there is none that zip-store may write in place. */
static fg_value *producer(const zipper *z, const fg_value *x, fg_strided at, fg_strided *view) {
  const fg_plan *p = z->p;
  while (!p->store[x->id].stored) {
    if (!x->def || !bijection(x->def) || z->uses[x->id] != 1 || z->returned[x->id])
      return NULL;
    fg_strided back;
    if (!view_back(x->def, &at, &back))
      return NULL;
    at = back;
    x = x->def->in[0];
  }
  const fg_storage *s = &p->store[x->id];
  if (z->uses[x->id] != 1 || z->returned[x->id] || x->param_index >= 0 || s->kernel < 0 ||
      s->within || s->buf.kind != FG_BUF_NONE ||
      p->kernels[s->kernel].kind != FG_KERNEL_ATTENTION_BWD || at.strides[at.rank - 1] != 1)
    return NULL;
  *view = at;
  return (fg_value *)x;
}

/* Zips cat c, output of kernel k, if it can: true when it did. */
static bool zip_cat(const zipper *z, const fg_kernel *k, const fg_value *c) {
  fg_plan *p = z->p;
  const fg_node *n = c->def;
  if (!n || n->op->code != FG_OP_CAT || n->nin > MAX_PIECES || !fg_type_is_static(&c->type))
    return false;
  /* an in-place result (`-> p`): the producers would write p's storage
   * while reading their operands, which inplace.c proves nothing about */
  fg_buf_ref cb = p->store[c->id].buf;
  if (cb.kind == FG_BUF_RESULT && p->results[cb.index].into >= 0)
    return false;
  fg_type t = c->type;
  t.has_layout = false; /* stored values are row-major */
  fg_strided dense;
  fg_strided_dense(&t, &dense);
  int d = (int)fg_attr_int(n, "dim");
  if (d < 0)
    d += t.rank;
  fg_value *v[MAX_PIECES];
  fg_strided view[MAX_PIECES];
  int64_t at = 0;
  for (int i = 0; i < n->nin; i++) {
    fg_strided piece = dense;
    piece.sizes[d] = n->in[i]->type.dims[d].size;
    piece.offset = at * dense.strides[d];
    at += piece.sizes[d];
    if (!(v[i] = producer(z, n->in[i], piece, &view[i])))
      return false;
    for (int j = 0; j < i; j++)
      if (v[j] == v[i])
        return false;
  }
  int last = -1;
  for (int i = 0; i < n->nin; i++)
    if (p->store[v[i]->id].kernel > last)
      last = p->store[v[i]->id].kernel;
  if (last >= k->id) /* the producers run first (they do: the cat's kernel starts after them) */
    return false;
  for (int i = 0; i < n->nin; i++) {
    fg_storage *s = &p->store[v[i]->id];
    fg_strided *sv = fg_arena_alloc(&p->g->arena, sizeof *sv);
    *sv = view[i];
    s->within = c;
    s->view = sv;
  }
  p->store[c->id].kernel = last;
  return true;
}

/* Removes kernel ki (which writes nothing any more): the later kernels and
 * the values they write move down one. */
static void remove_kernel(fg_plan *p, int ki) {
  memmove(&p->kernels[ki], &p->kernels[ki + 1],
          sizeof *p->kernels * (size_t)(p->nkernels - ki - 1));
  p->nkernels--;
  for (int k = ki; k < p->nkernels; k++)
    p->kernels[k].id = k;
  for (int i = 0; i < p->g->next_value_id; i++)
    if (p->store[i].kernel > ki)
      p->store[i].kernel--;
}

/* Zips the cats kernel k writes; true when k then writes nothing (a
 * pointwise kernel that only joined the pieces). A kernel that also reads
 * the cat (a bias gradient's column sum) keeps its work and loads the cat
 * from memory, as it would the pieces. */
static bool zip_kernel(const zipper *z, fg_kernel *k) {
  if (k->kind != FG_KERNEL_POINTWISE && k->kind != FG_KERNEL_ROW && k->kind != FG_KERNEL_COLUMN)
    return false;
  int m = 0;
  for (int j = 0; j < k->nouts; j++)
    if (!zip_cat(z, k, k->outs[j]))
      k->outs[m++] = k->outs[j];
  k->nouts = m;
  return m == 0 && !k->nreds && !k->ncols && !k->ntails;
}

void fg_plan_zip_stores(fg_plan *p) {
  int64_t on;
  if ((fg_knob_get(&p->opts.knobs, FG_KNOB_ZIP_STORE, &on) && !on) || p->sym.n)
    return;
  bool any = false;
  for (int k = 0; k < p->nkernels && !any; k++)
    any = p->kernels[k].kind == FG_KERNEL_ATTENTION_BWD;
  if (!any)
    return;
  fg_graph *g = p->g;
  zipper z = {p, calloc((size_t)g->next_value_id + 1, sizeof *z.uses),
              calloc((size_t)g->next_value_id + 1, sizeof *z.returned)};
  if (z.uses && z.returned) {
    for (fg_node *n = g->first; n; n = n->next)
      for (int i = 0; i < n->nin; i++)
        z.uses[n->in[i]->id]++;
    for (int i = 0; i < g->nresults; i++) {
      z.uses[g->results[i]->id]++;
      z.returned[g->results[i]->id] = true;
    }
    for (int k = p->nkernels - 1; k >= 0; k--)
      if (zip_kernel(&z, &p->kernels[k]))
        remove_kernel(p, k);
  }
  free(z.uses);
  free(z.returned);
}

void fg_plan_zip_buffers(fg_plan *p) {
  for (int i = 0; i < p->g->next_value_id; i++)
    if (p->store[i].within)
      p->store[i].buf = p->store[p->store[i].within->id].buf;
}
