#include "ir.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

fg_module *fg_module_new(const char *path) {
  fg_module *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->path = path;
  return m;
}

void fg_module_free(fg_module *m) {
  if (!m)
    return;
  for (int i = 0; i < m->ngraphs; i++)
    fg_graph_free(m->graphs[i]);
  free(m->graphs);
  free(m);
}

void fg_module_add(fg_module *m, fg_graph *g) {
  if (m->ngraphs == m->cap) {
    int cap = m->cap ? m->cap * 2 : 4;
    fg_graph **ng = realloc(m->graphs, (size_t)cap * sizeof *ng);
    if (!ng) {
      fputs("fusec: out of memory\n", stderr);
      exit(3);
    }
    m->graphs = ng;
    m->cap = cap;
  }
  m->graphs[m->ngraphs++] = g;
}

fg_graph *fg_module_find(const fg_module *m, const char *name) {
  for (int i = 0; i < m->ngraphs; i++)
    if (strcmp(m->graphs[i]->name, name) == 0)
      return m->graphs[i];
  return NULL;
}

fg_graph *fg_graph_new(const char *name) {
  fg_arena a;
  fg_arena_init(&a);
  fg_graph *g = fg_arena_alloc(&a, sizeof *g);
  g->arena = a;
  g->name = fg_arena_strdup(&g->arena, name ? name : "");
  return g;
}

void fg_graph_free(fg_graph *g) {
  if (!g)
    return;
  fg_arena a = g->arena; /* g itself lives in the arena */
  fg_arena_free(&a);
}

fg_value *fg_value_new(fg_graph *g, const char *name, fg_type t) {
  fg_value *v = fg_arena_alloc(&g->arena, sizeof *v);
  v->id = g->next_value_id++;
  v->name = name ? fg_arena_strdup(&g->arena, name) : NULL;
  v->type = t;
  v->param_index = -1;
  return v;
}

/* ---- symbolic sizes ---- */

static size_t hash_name(const char *s) {
  size_t h = 5381;
  while (*s)
    h = h * 33 + (unsigned char)*s++;
  return h;
}

/* The slot of `name` in g's hash index: the one holding it, or the empty
 * one where it would go. The index is at most half full. */
static int *sym_slot(const fg_graph *g, const char *name) {
  size_t mask = (size_t)g->sym_slots_cap - 1;
  for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
    int *slot = &g->sym_slots[i];
    if (*slot == 0 || strcmp(g->syms[*slot - 1].name, name) == 0)
      return slot;
  }
}

const fg_sym *fg_graph_sym(const fg_graph *g, const char *name) {
  if (!g->sym_slots_cap || !name)
    return NULL;
  int k = *sym_slot(g, name);
  return k ? &g->syms[k - 1] : NULL;
}

/* Room for one more entry: the array doubles (at a power of two) and the
 * index is rebuilt at twice the table's capacity, all in the arena. */
static void sym_reserve(fg_graph *g) {
  int n = g->nsyms;
  if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
    int cap = n ? 2 * n : 4;
    fg_sym *arr = fg_arena_alloc(&g->arena, (size_t)cap * sizeof *arr);
    if (n)
      memcpy(arr, g->syms, (size_t)n * sizeof *arr);
    g->syms = arr;
    g->sym_slots_cap = 2 * cap;
    g->sym_slots = fg_arena_alloc(&g->arena, (size_t)g->sym_slots_cap * sizeof *g->sym_slots);
    for (int i = 0; i < n; i++)
      *sym_slot(g, g->syms[i].name) = i + 1;
  }
}

const fg_sym *fg_graph_add_sym(fg_graph *g, const char *name, int64_t min, int64_t max, int64_t div,
                               fg_loc loc) {
  if (fg_graph_sym(g, name))
    return NULL;
  sym_reserve(g);
  fg_sym *s = &g->syms[g->nsyms];
  s->name = fg_arena_strdup(&g->arena, name);
  s->min = min;
  s->max = max;
  s->div = div;
  s->loc = loc;
  *sym_slot(g, s->name) = ++g->nsyms;
  return s;
}

bool fg_range_has_multiple(int64_t min, int64_t max, int64_t div) {
  int64_t r = min % div;
  return (r ? div - r : 0) <= max - min; /* the distance to the next multiple */
}

bool fg_sym_is_default(const fg_sym *s) {
  return s->min == FG_SYM_DEFAULT_MIN && s->max == FG_SYM_DEFAULT_MAX && s->div == 1;
}

bool fg_sym_admits(const fg_sym *s, int64_t value, const char *path, char *msg, size_t cap) {
  char where[256];
  if (s->loc.line > 0)
    snprintf(where, sizeof where, "declared at %s:%d:%d", path ? path : "<input>", s->loc.line,
             s->loc.col);
  else
    snprintf(where, sizeof where, "the default: the graph declares nothing about %s", s->name);
  if (value < s->min || value > s->max) {
    snprintf(msg, cap, "size %s = %" PRId64 " is outside %" PRId64 "..%" PRId64 " (%s)", s->name,
             value, s->min, s->max, where);
    return false;
  }
  if (s->div > 1 && value % s->div != 0) {
    snprintf(msg, cap, "size %s = %" PRId64 " is not a multiple of %" PRId64 " (%s)", s->name,
             value, s->div, where);
    return false;
  }
  return true;
}

fg_value *fg_add_param(fg_graph *g, const char *name, fg_type t, fg_loc loc) {
  for (int k = 0; k < t.rank; k++) {
    if (!t.dims[k].sym)
      continue;
    const fg_sym *s = fg_graph_sym(g, t.dims[k].sym);
    if (!s)
      s = fg_graph_add_sym(g, t.dims[k].sym, FG_SYM_DEFAULT_MIN, FG_SYM_DEFAULT_MAX, 1,
                           (fg_loc){0, 0});
    t.dims[k].sym = s->name;
  }
  fg_value *v = fg_value_new(g, name, t);
  v->param_index = g->nparams;
  v->weak = t.scalar;
  v->loc = loc;
  g->params = fg_arena_append(&g->arena, g->params, &g->nparams, &v, sizeof v);
  return v;
}

fg_node *fg_node_new_before(fg_graph *g, fg_node *before, const fg_op *op, int nin,
                            fg_value *const *in, int nout, fg_loc loc) {
  fg_node *n = fg_arena_alloc(&g->arena, sizeof *n);
  n->id = g->next_node_id++;
  n->op = op;
  n->loc = loc;
  n->nin = nin;
  n->in = fg_arena_alloc(&g->arena, (size_t)(nin > 0 ? nin : 1) * sizeof *n->in);
  for (int i = 0; i < nin; i++)
    n->in[i] = in[i];
  n->nout = nout;
  n->out = fg_arena_alloc(&g->arena, (size_t)(nout > 0 ? nout : 1) * sizeof *n->out);
  for (int i = 0; i < nout; i++) {
    fg_type t = {0};
    t.dtype = FG_F32;
    fg_value *v = fg_value_new(g, NULL, t);
    v->def = n;
    v->def_index = i;
    v->loc = loc;
    n->out[i] = v;
  }
  n->attrs =
      fg_arena_alloc(&g->arena, (size_t)(op->nattrs > 0 ? op->nattrs : 1) * sizeof *n->attrs);
  if (before) {
    n->next = before;
    n->prev = before->prev;
    if (before->prev)
      before->prev->next = n;
    else
      g->first = n;
    before->prev = n;
  } else {
    n->prev = g->last;
    if (g->last)
      g->last->next = n;
    else
      g->first = n;
    g->last = n;
  }
  return n;
}

fg_node *fg_node_new(fg_graph *g, const fg_op *op, int nin, fg_value *const *in, int nout,
                     fg_loc loc) {
  return fg_node_new_before(g, g->insert_point, op, nin, in, nout, loc);
}

void fg_node_remove(fg_graph *g, fg_node *n) {
  if (n->prev)
    n->prev->next = n->next;
  else
    g->first = n->next;
  if (n->next)
    n->next->prev = n->prev;
  else
    g->last = n->prev;
  n->prev = n->next = NULL;
}

static fg_value *literal(fg_graph *g, fg_attr a, fg_dtype dt, fg_loc loc) {
  fg_node *n = fg_node_new(g, fg_op_get(FG_OP_LITERAL), 0, NULL, 1, loc);
  a.loc = loc;
  n->attrs[0] = a;
  fg_value *v = n->out[0];
  v->type = fg_type_scalar(dt);
  v->weak = true;
  return v;
}

fg_value *fg_literal_float(fg_graph *g, double x, fg_loc loc) {
  fg_attr a = {.kind = FG_ATTR_FLOAT, .f = x};
  return literal(g, a, FG_F32, loc);
}

fg_value *fg_literal_int(fg_graph *g, int64_t x, fg_loc loc) {
  fg_attr a = {.kind = FG_ATTR_INT, .i = x};
  return literal(g, a, FG_I64, loc);
}

fg_value *fg_literal_bool(fg_graph *g, bool x, fg_loc loc) {
  fg_attr a = {.kind = FG_ATTR_BOOL, .i = x};
  return literal(g, a, FG_BOOL, loc);
}

bool fg_value_is_literal(const fg_value *v, double *out) {
  if (!v->def || v->def->op->code != FG_OP_LITERAL)
    return false;
  const fg_attr *a = &v->def->attrs[0];
  if (out)
    *out = a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
  return true;
}

void fg_set_results(fg_graph *g, int n, fg_value *const *vals, const fg_loc *locs) {
  g->nresults = n;
  g->results = fg_arena_alloc(&g->arena, (size_t)(n > 0 ? n : 1) * sizeof *g->results);
  g->result_locs = fg_arena_alloc(&g->arena, (size_t)(n > 0 ? n : 1) * sizeof *g->result_locs);
  for (int i = 0; i < n; i++) {
    g->results[i] = vals[i];
    g->result_locs[i] = locs ? locs[i] : vals[i]->loc;
  }
  g->result_into = NULL;
  g->result_into_locs = NULL;
}

void fg_set_result_into(fg_graph *g, int i, int param, fg_loc loc) {
  if (!g->result_into) {
    int n = g->nresults > 0 ? g->nresults : 1;
    g->result_into = fg_arena_alloc(&g->arena, (size_t)n * sizeof *g->result_into);
    g->result_into_locs = fg_arena_alloc(&g->arena, (size_t)n * sizeof *g->result_into_locs);
    for (int k = 0; k < n; k++)
      g->result_into[k] = -1;
  }
  g->result_into[i] = param;
  g->result_into_locs[i] = loc;
}

int fg_result_into(const fg_graph *g, int i) { return g->result_into ? g->result_into[i] : -1; }

bool fg_value_fits_param(const fg_value *v, const fg_value *p) {
  bool same = !v->type.scalar && !p->type.scalar && v->type.dtype == p->type.dtype &&
              v->type.rank == p->type.rank;
  for (int d = 0; same && d < v->type.rank; d++)
    same = fg_dim_eq(v->type.dims[d], p->type.dims[d]);
  return same;
}

void fg_replace_uses(fg_graph *g, fg_value *from, fg_value *to) {
  for (fg_node *n = g->first; n; n = n->next)
    for (int i = 0; i < n->nin; i++)
      if (n->in[i] == from)
        n->in[i] = to;
  for (int i = 0; i < g->nresults; i++)
    if (g->results[i] == from)
      g->results[i] = to;
}

int fg_count_uses(const fg_graph *g, const fg_value *v) {
  int c = 0;
  for (fg_node *n = g->first; n; n = n->next)
    for (int i = 0; i < n->nin; i++)
      c += n->in[i] == v;
  for (int i = 0; i < g->nresults; i++)
    c += g->results[i] == v;
  return c;
}

/* ---- attributes ---- */

const fg_attr *fg_node_attr(const fg_node *n, const char *name) {
  int i = fg_op_attr_index(n->op, name);
  if (i < 0)
    return NULL;
  if (n->attrs[i].kind != FG_ATTR_NONE)
    return &n->attrs[i];
  const fg_attr *d = &n->op->attrs[i].def;
  return d->kind != FG_ATTR_NONE ? d : NULL;
}

int64_t fg_attr_int(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  if (!a)
    return 0;
  return a->kind == FG_ATTR_FLOAT ? fg_f64_to_i64(a->f) : a->i;
}

double fg_attr_float(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  if (!a)
    return 0;
  return a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
}

bool fg_attr_bool(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  return a && a->i != 0;
}

/* ---- types ---- */

fg_type fg_type_scalar(fg_dtype dt) {
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.scalar = true;
  return t;
}

fg_type fg_type_tensor(fg_dtype dt, int rank, const int64_t *sizes) {
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int i = 0; i < rank; i++)
    t.dims[i].size = sizes[i];
  return t;
}

bool fg_type_is_static(const fg_type *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i].sym)
      return false;
  return true;
}

int64_t fg_type_numel(const fg_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (t->dims[i].sym)
      return -1;
    n *= t->dims[i].size;
  }
  return n;
}

bool fg_dim_eq(fg_dim a, fg_dim b) {
  if (a.sym || b.sym)
    return a.sym && b.sym && strcmp(a.sym, b.sym) == 0 && fg_dim_mul(a) == fg_dim_mul(b) &&
           a.off == b.off;
  return a.size == b.size;
}

bool fg_type_same_dims(const fg_type *a, const fg_type *b) {
  if (a->rank != b->rank)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (!fg_dim_eq(a->dims[i], b->dims[i]))
      return false;
  return true;
}

bool fg_type_eq(const fg_type *a, const fg_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->scalar != b->scalar)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (!fg_dim_eq(a->dims[i], b->dims[i]))
      return false;
  if (a->has_layout != b->has_layout)
    return false;
  if (a->has_layout)
    for (int i = 0; i < a->rank; i++)
      if (a->layout[i] != b->layout[i])
        return false;
  return true;
}

void fg_type_strides(const fg_type *t, int64_t *strides) {
  /* Size-0 dims count as 1, as PyTorch's contiguous strides: no stride is
   * ever 0 for a dense tensor. */
  int64_t s = 1;
  for (int k = t->rank - 1; k >= 0; k--) {
    int d = t->has_layout ? t->layout[k] : k;
    strides[d] = s;
    s *= t->dims[d].size > 1 ? t->dims[d].size : 1;
  }
}

char *fg_type_str(const fg_type *t, char *buf, int cap) {
  int n = snprintf(buf, (size_t)cap, "%s", fg_dtype_name(t->dtype));
  if (t->scalar)
    return buf;
  n += snprintf(buf + n, n < cap ? (size_t)(cap - n) : 0, "[");
  for (int i = 0; i < t->rank && n < cap; i++) {
    char db[96];
    n += snprintf(buf + n, (size_t)(cap - n), "%s%s", i ? "," : "",
                  fg_dim_str(t->dims[i], db, sizeof db));
  }
  if (n < cap)
    n += snprintf(buf + n, (size_t)(cap - n), "]");
  if (t->has_layout && n < cap) {
    n += snprintf(buf + n, (size_t)(cap - n), " layout=[");
    for (int i = 0; i < t->rank && n < cap; i++)
      n += snprintf(buf + n, (size_t)(cap - n), "%s%d", i ? "," : "", t->layout[i]);
    if (n < cap)
      snprintf(buf + n, (size_t)(cap - n), "]");
  }
  return buf;
}
