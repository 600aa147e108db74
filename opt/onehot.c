/* One-hot select and sum as a gather (issue 17): the pattern
 *
 *   sum(where(eq(I, T), x, 0), dims=[d])          (keepdim true or false)
 *
 * with I an iota along dim d of the where's shape (iota(V) through views
 * that only add or move size-1 dims: unsqueeze, reshape, broadcast_in_dim,
 * ...), T an integer tensor of size 1 at d (constant along d), the eq's
 * operands in either order, x a float tensor of the where's rank with V
 * elements along d, and the else operand the literal 0, becomes
 *
 *   where(logical_and(ge(T', 0), lt(T', V)), take_along_dim(x, T', dim=d), 0)
 *
 * cast to the sum's dtype and squeezed at d without keepdim, where T' is T
 * with leading size-1 dims up to x's rank. The sum reads and adds V
 * elements a row, the gather one (cross-entropy's target logit written as
 * llm.c writes it becomes the gather of cross_entropy_gather_fwd: the row
 * kernel keeps only the log-sum-exp's reductions).
 *
 * Exact: T is compared in an integer dtype that holds both operands (iota
 * values up to V - 1 fit the iota's dtype, checked), so the where keeps at
 * most one element of each row, x[T] when 0 <= T < V, and the sum of the
 * zeros and that element is the element, converted once to the sum's dtype
 * (the accumulator holds the where's dtype exactly, so that conversion is
 * the cast's). take_along_dim clamps an index outside [0, V) into it
 * (docs/format.md 5.11), and the where makes those rows 0, as the sum of
 * zeros is. The one difference: with the else operand +0.0 and x[T] = -0.0
 * the sum is +0.0 (+0 + -0 = +0) and the gather -0.0; comparisons treat
 * the two as equal, and fgdiff compares this pass's results so
 * (tools/fgdiff.c). So not in canonicalize, whose rewrites are bitwise.
 *
 * Left alone unless every condition is proven: a float or bool T, an iota
 * of a float dtype or along another dim, an else operand other than 0, a
 * reduction over several dims, a where whose values are used elsewhere too
 * (its full-size values are then computed anyway, so the rewrite would
 * save the sum's adds but not the pass over x), symbolic sizes along d. */
#include <stdlib.h>

#include "build.h"
#include "passes.h"

static bool is_op(const fg_value *v, fg_opcode c) { return v->def && v->def->op->code == c; }

/* The one dim of static t whose size is not 1, with that size at least 2
 * in *n; -1 when there is none, several, or a symbolic dim. */
static int single_dim(const fg_type *t, int64_t *n) {
  int e = -1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].sym)
      return -1;
    if (t->dims[i].size == 1)
      continue;
    if (e >= 0)
      return -1;
    e = i;
  }
  if (e >= 0)
    *n = t->dims[e].size;
  return e >= 0 && *n >= 2 ? e : -1;
}

/* The largest value of integer dtype t. */
static int64_t int_max(fg_dtype t) {
  switch (t) {
  case FG_I8:
    return INT8_MAX;
  case FG_U8:
    return UINT8_MAX;
  case FG_I16:
    return INT16_MAX;
  case FG_I32:
    return INT32_MAX;
  default:
    return INT64_MAX;
  }
}

/* Whether v is iota(V) through views that keep its V elements along one
 * dim, all others of size 1 (so element k stays element k): its dim along
 * which they lie, -1 otherwise. */
static int iota_dim(const fg_value *v, int64_t *size) {
  int64_t n;
  int e = single_dim(&v->type, &n);
  if (e < 0)
    return -1;
  for (const fg_value *u = v;;) {
    int64_t m;
    if (single_dim(&u->type, &m) < 0 || m != n || !u->def)
      return -1;
    switch (u->def->op->code) {
    case FG_OP_IOTA:
      if (!fg_dtype_is_int(u->type.dtype) || n - 1 > int_max(u->type.dtype))
        return -1;
      *size = n;
      return e;
    case FG_OP_RESHAPE:
    case FG_OP_VIEW:
    case FG_OP_UNSQUEEZE:
    case FG_OP_SQUEEZE:
    case FG_OP_BROADCAST_IN_DIM:
    case FG_OP_EXPAND:
    case FG_OP_PERMUTE:
    case FG_OP_TRANSPOSE:
      u = u->def->in[0];
      break;
    default:
      return -1;
    }
  }
}

static bool plain_float(fg_dtype t) {
  return t == FG_F16 || t == FG_BF16 || t == FG_F32 || t == FG_F64;
}

/* The pattern's parts, found at a sum node. */
typedef struct onehot {
  fg_value *x, *t, *zero;
  int d;     /* the reduced dim, of the where's shape */
  int64_t v; /* the iota's length */
} onehot;

/* Whether eq operands (i, t) are the iota and the target along dim d of a
 * shape of rank r. */
static bool iota_and_target(const fg_value *i, fg_value *t, int d, int r, onehot *m) {
  int64_t v;
  int e = iota_dim(i, &v);
  if (e < 0 || e + r - i->type.rank != d)
    return false;
  if (!fg_dtype_is_int(t->type.dtype) || t->type.scalar || t->weak || t->type.rank > r)
    return false;
  int td = d - (r - t->type.rank); /* T's dim that lies at d, if any */
  if (td >= 0 && (t->type.dims[td].sym || t->type.dims[td].size != 1))
    return false;
  m->t = t;
  m->v = v;
  return true;
}

static bool match(const fg_node *sum, const int *uses, onehot *m) {
  if (sum->op->code != FG_OP_SUM || sum->nin != 1 || !is_op(sum->in[0], FG_OP_WHERE))
    return false;
  fg_value *w = sum->in[0];
  const fg_node *wn = w->def;
  int r = w->type.rank;
  bool mask[FG_MAX_RANK];
  if (r < 1 || uses[w->id] != 1 || fg_reduce_mask(sum, mask) != 1)
    return false;
  m->d = 0;
  while (!mask[m->d])
    m->d++;
  /* where(eq(...), x, 0): x float of the where's dtype and rank */
  fg_value *c = wn->in[0], *x = wn->in[1], *z = wn->in[2];
  double zv;
  if (!is_op(c, FG_OP_EQ) || !fg_value_is_literal(z, &zv) || zv != 0)
    return false;
  if (!plain_float(x->type.dtype) || x->type.dtype != w->type.dtype || x->weak ||
      x->type.rank != r || !plain_float(sum->out[0]->type.dtype))
    return false;
  if (!iota_and_target(c->def->in[0], c->def->in[1], m->d, r, m) &&
      !iota_and_target(c->def->in[1], c->def->in[0], m->d, r, m))
    return false;
  const fg_dim xd = x->type.dims[m->d];
  if (xd.sym || xd.size != m->v)
    return false;
  m->x = x;
  m->zero = z;
  return true;
}

/* The gather form of the sum n, built before n; NULL (nothing reported)
 * when a node does not infer or the result's type is not the sum's. */
static fg_value *rewrite(fg_graph *g, fg_node *n, const onehot *m, fg_diag *d) {
  fg_loc loc = n->loc;
  fg_value *out = n->out[0];
  fg_dtype td = m->t->type.dtype;
  int r = m->x->type.rank;
  fg_value *t = m->t;
  while (t && t->type.rank < r) {
    fg_node *u = fgo_node(g, FG_OP_UNSQUEEZE, 1, &t, loc);
    fgo_set_int(u, "dim", 0);
    t = fgo_finish(u, d);
  }
  if (!t)
    return NULL;
  fg_value *in[2] = {m->x, t};
  fg_node *tk = fgo_node(g, FG_OP_TAKE_ALONG_DIM, 2, in, loc);
  fgo_set_int(tk, "dim", m->d);
  fg_value *v = fgo_finish(tk, d);
  /* 0 <= T needs no test for an unsigned T, T < V none where the dtype
   * holds nothing as large (V itself would not convert exactly) */
  fg_value *ok = NULL;
  if (td != FG_U8)
    ok = fgo_binary(g, FG_OP_GE, t, fg_literal_int(g, 0, loc), loc, d);
  if (int_max(td) >= m->v) {
    fg_value *lt = fgo_binary(g, FG_OP_LT, t, fg_literal_int(g, m->v, loc), loc, d);
    ok = ok ? fgo_binary(g, FG_OP_LOGICAL_AND, ok, lt, loc, d) : lt;
  }
  if (v && ok) {
    fg_value *w[3] = {ok, v, m->zero};
    v = fgo_finish(fgo_node(g, FG_OP_WHERE, 3, w, loc), d);
  }
  v = fgo_cast(g, v, out->type.dtype, loc, d);
  if (v && !fg_attr_bool(n, "keepdim")) {
    int64_t dim = m->d;
    fg_node *s = fgo_node(g, FG_OP_SQUEEZE, 1, &v, loc);
    fgo_set_ints(g, s, "dims", &dim, 1);
    v = fgo_finish(s, d);
  }
  if (!v || v->weak != out->weak || !fg_type_eq(&v->type, &out->type))
    return NULL;
  return v;
}

bool fg_pass_onehot(fg_graph *g, fg_diag *d) {
  (void)d; /* a rewrite that does not infer is dropped, not reported */
  int nv = g->next_value_id;
  /* uses by live nodes only (canonicalize leaves replaced nodes for dce) */
  bool *live = calloc((size_t)nv + 1, sizeof *live);
  int *uses = calloc((size_t)nv + 1, sizeof *uses);
  if (!live || !uses) {
    free(live);
    free(uses);
    return false;
  }
  for (int i = 0; i < g->nresults; i++) {
    live[g->results[i]->id] = true;
    uses[g->results[i]->id]++;
  }
  for (fg_node *n = g->last; n; n = n->prev) {
    bool used = false;
    for (int i = 0; i < n->nout; i++)
      used |= live[n->out[i]->id];
    for (int i = 0; used && i < n->nin; i++) {
      live[n->in[i]->id] = true;
      uses[n->in[i]->id]++;
    }
  }
  /* inference errors of a tentative rewrite go to a scratch sink */
  fg_diag sd;
  fg_diag_init(&sd, NULL, NULL, 0, NULL);
  for (fg_node *n = g->first; n; n = n->next) {
    onehot m;
    if (n->nout != 1 || n->out[0]->id >= nv || !live[n->out[0]->id] || !match(n, uses, &m))
      continue;
    fg_node *before = n->prev;
    g->insert_point = n;
    fg_value *v = rewrite(g, n, &m, &sd);
    g->insert_point = NULL;
    if (!v) { /* not expected: remove what was built */
      for (fg_node *k = before ? before->next : g->first, *next; k != n; k = next) {
        next = k->next;
        fg_node_remove(g, k);
      }
      continue;
    }
    if (!v->name)
      v->name = n->out[0]->name;
    fg_replace_uses(g, n->out[0], v);
  }
  fg_diag_free(&sd);
  free(live);
  free(uses);
  return true;
}
