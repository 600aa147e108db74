#include "view.h"

#include <string.h>

#include "infer.h"

void fg_strided_dense(const fg_type *t, fg_strided *out) {
  memset(out, 0, sizeof *out);
  out->rank = t->rank;
  for (int i = 0; i < t->rank; i++)
    out->sizes[i] = t->dims[i].size;
  fg_type_strides(t, out->strides);
}

bool fg_strided_is_dense(const fg_strided *s) {
  if (s->offset != 0)
    return false;
  int64_t st = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    if (s->sizes[i] != 1 && s->strides[i] != st)
      return false;
    st *= s->sizes[i];
  }
  return true;
}

int64_t fg_strided_extent(const fg_strided *s) {
  int64_t hi = s->offset;
  for (int i = 0; i < s->rank; i++) {
    if (s->sizes[i] == 0)
      return 0;
    hi += (s->sizes[i] - 1) * s->strides[i];
  }
  return hi + 1;
}

/* PyTorch's computeStride: strides for viewing (sizes, strides) as newshape
 * without a copy, or false. */
static bool reshape_strides(const fg_strided *in, const int64_t *shape, int rank, int64_t *out) {
  int64_t numel = 1;
  for (int i = 0; i < in->rank; i++)
    numel *= in->sizes[i];
  if (numel == 0 || in->rank == 0) {
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) {
      out[i] = st;
      st *= shape[i] > 0 ? shape[i] : 1;
    }
    return true;
  }
  int view_d = rank - 1;
  int64_t chunk_base = in->strides[in->rank - 1], tensor_numel = 1, view_numel = 1;
  for (int td = in->rank - 1; td >= 0; td--) {
    tensor_numel *= in->sizes[td];
    if (td == 0 || (in->sizes[td - 1] != 1 && in->strides[td - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel)
        return false;
      if (td > 0) {
        chunk_base = in->strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

static int norm(int64_t d, int rank) { return (int)(d < 0 ? d + rank : d); }

bool fg_view_map_of(const fg_node *n, int k, const int64_t *in_sizes, const int64_t *out_sizes,
                    fg_view_map *m, const char **why) {
  int ir = n->in[0]->type.rank, orank = n->out[k]->type.rank;
  memset(m, 0, sizeof *m);
  m->in_rank = ir;
  m->out_rank = orank;
  *why = NULL;
  for (int i = 0; i < ir; i++) { /* identity; the cases below change it */
    m->src[i] = i;
    m->step[i] = 1;
  }
  switch (n->op->code) {
  case FG_OP_RESHAPE:
  case FG_OP_VIEW:
    m->reshape = true;
    return true;
  case FG_OP_PERMUTE: {
    const fg_attr *p = fg_node_attr(n, "dims");
    for (int i = 0; i < orank; i++)
      m->src[norm(p->ints[i], ir)] = i;
    return true;
  }
  case FG_OP_TRANSPOSE: {
    int a = norm(fg_attr_int(n, "dim0"), ir), b = norm(fg_attr_int(n, "dim1"), ir);
    m->src[a] = b;
    m->src[b] = a;
    return true;
  }
  case FG_OP_BROADCAST_IN_DIM:
  case FG_OP_EXPAND: {
    /* broadcast_in_dim: dims[i] is the result dim of operand dim i; expand:
     * the operand's dims are the trailing ones. A size-1 dim stretches. */
    const fg_attr *dims = n->op->code == FG_OP_EXPAND ? NULL : fg_node_attr(n, "dims");
    for (int i = 0; i < ir; i++) {
      m->src[i] = dims ? norm(dims->ints[i], orank) : orank - ir + i;
      m->zero[i] = in_sizes[i] == 1;
    }
    return true;
  }
  case FG_OP_SQUEEZE: {
    /* The same dims inference drops: listed (or all) size-1 dims. */
    const fg_attr *dims = fg_node_attr(n, "dims");
    bool drop[FG_MAX_RANK] = {0};
    for (int i = 0; i < ir; i++)
      drop[i] = !dims && in_sizes[i] == 1;
    for (int i = 0; dims && i < dims->n; i++) {
      int d = norm(dims->ints[i], ir);
      drop[d] = in_sizes[d] == 1;
    }
    for (int i = 0, j = 0; i < ir; i++) {
      m->src[i] = drop[i] ? -1 : j++;
      m->zero[i] = drop[i];
    }
    return true;
  }
  case FG_OP_UNSQUEEZE: {
    int d = norm(fg_attr_int(n, "dim"), ir + 1);
    for (int i = d; i < ir; i++)
      m->src[i] = i + 1;
    m->inserted[d] = true;
    return true;
  }
  case FG_OP_SLICE: {
    const fg_attr *st = fg_node_attr(n, "starts"), *en = fg_node_attr(n, "ends"),
                  *sp = fg_node_attr(n, "steps");
    for (int i = 0; i < ir; i++) {
      int64_t step = sp ? sp->ints[i] : 1, s0, len;
      fg_slice_bounds(in_sizes[i], st->ints[i], en->ints[i], step, &s0, &len);
      if (len != out_sizes[i]) {
        *why = "a slice's length disagrees with its result's size";
        return false;
      }
      m->start[i] = s0;
      m->step[i] = step;
    }
    return true;
  }
  case FG_OP_SPLIT: {
    const fg_attr *sizes = fg_node_attr(n, "sizes");
    int dim = norm(fg_attr_int(n, "dim"), ir);
    for (int i = 0; i < k; i++)
      m->start[dim] += sizes->ints[i];
    return true;
  }
  default:
    *why = "not a view op";
    return false;
  }
}

bool fg_strided_map(const fg_view_map *m, const fg_strided *in, const int64_t *out_sizes,
                    fg_strided *out, const char **why) {
  fg_strided r;
  memset(&r, 0, sizeof r);
  r.rank = m->out_rank;
  r.offset = in->offset;
  memcpy(r.sizes, out_sizes, sizeof(int64_t) * (size_t)r.rank);
  *why = NULL;
  if (m->reshape) {
    if (!reshape_strides(in, r.sizes, r.rank, r.strides)) {
      *why = "reshape across non-mergeable strides";
      return false;
    }
    *out = r;
    return true;
  }
  for (int i = 0; i < m->in_rank; i++) {
    r.offset += m->start[i] * in->strides[i];
    int o = m->src[i];
    if (o >= 0)
      r.strides[o] = m->zero[i] && r.sizes[o] != 1 ? 0 : in->strides[i] * m->step[i];
  }
  for (int o = 0; o < r.rank; o++)
    if (m->inserted[o])
      r.strides[o] = o + 1 < r.rank ? r.strides[o + 1] * r.sizes[o + 1] : 1;
  *out = r;
  return true;
}

bool fg_strided_apply(const fg_node *n, int k, const fg_strided *in, fg_strided *out,
                      const char **why) {
  const fg_type *ot = &n->out[k]->type;
  *why = NULL;
  if (!fg_type_is_static(ot)) {
    *why = "symbolic shape";
    return false;
  }
  int64_t sizes[FG_MAX_RANK];
  for (int i = 0; i < ot->rank; i++)
    sizes[i] = ot->dims[i].size;
  fg_view_map m;
  return fg_view_map_of(n, k, in->sizes, sizes, &m, why) && fg_strided_map(&m, in, sizes, out, why);
}

bool fg_is_view_op(const fg_op *op) {
  return op->kind == FG_KIND_VIEW && op->code != FG_OP_CAT && op->code != FG_OP_PAD;
}

bool fg_strided_chain(const fg_value *v, bool (*stop)(const fg_value *, const void *),
                      const void *ctx, const fg_value **base, fg_strided *out, const char **why) {
  enum { MAX_CHAIN = 256 };
  const fg_node *chain[MAX_CHAIN];
  const fg_value *outs[MAX_CHAIN]; /* the value each chain node defines */
  int nc = 0;
  const fg_value *b = v;
  *why = NULL;
  while (!(stop && stop(b, ctx))) {
    if (!b->def || !fg_is_view_op(b->def->op) || nc == MAX_CHAIN) {
      if (!stop)
        break; /* the first non-view ancestor is the base */
      if (b->def)
        *why = "computed by an op that is not a view";
      return false;
    }
    outs[nc] = b;
    chain[nc++] = b->def;
    b = b->def->in[0];
  }
  if (!fg_type_is_static(&b->type) || b->type.scalar) {
    *why = "symbolic or scalar base";
    return false;
  }
  fg_strided s;
  fg_type bt = b->type;
  if (b->param_index < 0)
    bt.has_layout = false;
  fg_strided_dense(&bt, &s);
  for (int i = nc - 1; i >= 0; i--) {
    int k = 0;
    while (chain[i]->out[k] != outs[i])
      k++;
    fg_strided t;
    if (!fg_strided_apply(chain[i], k, &s, &t, why))
      return false;
    s = t;
  }
  *base = b;
  *out = s;
  return true;
}
