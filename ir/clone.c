/* Copying a graph into a fresh arena, optionally binding symbolic dims. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"

/* A dim's name in the copy: the copy's interned name (the table entry's). */
static const char *copy_sym(fg_graph *g, const char *s) {
  if (!s)
    return NULL;
  const fg_sym *e = fg_graph_sym(g, s);
  return e ? e->name : fg_arena_strdup(&g->arena, s);
}

/* An attribute in the copy. Entries of an integer list that are
 * expressions of a bound size become their values (false when one
 * overflows: the node's inference then has no value to check). */
static bool copy_attr(fg_graph *g, fg_attr *a, int nb, const char *const *names,
                      const int64_t *values) {
  if (a->kind == FG_ATTR_STRING && a->s)
    a->s = fg_arena_strdup(&g->arena, a->s);
  if (a->kind != FG_ATTR_INTS || !a->n)
    return true;
  int64_t *ints = fg_arena_memdup(&g->arena, a->ints, (size_t)a->n * sizeof *a->ints);
  fg_dim *syms = NULL;
  bool left = false, ok = true;
  if (a->syms) {
    syms = fg_arena_memdup(&g->arena, a->syms, (size_t)a->n * sizeof *a->syms);
    for (int i = 0; i < a->n; i++) {
      if (!syms[i].sym)
        continue;
      int b = 0;
      while (b < nb && strcmp(syms[i].sym, names[b]) != 0)
        b++;
      if (b == nb) {
        syms[i].sym = copy_sym(g, syms[i].sym);
        left = true;
      } else {
        ok &= fg_dim_eval(syms[i], values[b], &ints[i]);
        syms[i] = (fg_dim){.size = ints[i]};
      }
    }
  }
  a->ints = ints;
  a->syms = left ? syms : NULL;
  return ok;
}

static bool is_bound(const char *name, int nb, const char *const *names) {
  for (int b = 0; b < nb; b++)
    if (strcmp(name, names[b]) == 0)
      return true;
  return false;
}

static fg_graph *copy(const fg_graph *src, int nb, const char *const *names, const int64_t *values,
                      fg_diag *d) {
  fg_graph *g = fg_graph_new(src->name);
  g->loc = src->loc;
  fg_value **map = calloc((size_t)(src->next_value_id > 0 ? src->next_value_id : 1), sizeof *map);
  if (!map) {
    fg_graph_free(g);
    return NULL;
  }
  bool ok = true;
  /* the size table first (its order kept): the facts of every size that
   * is not bound here; fg_add_param interns the parameters' dims in it */
  for (int i = 0; i < src->nsyms; i++) {
    const fg_sym *s = &src->syms[i];
    if (!is_bound(s->name, nb, names))
      fg_graph_add_sym(g, s->name, s->min, s->max, s->div, s->loc);
  }
  for (int i = 0; i < src->nparams; i++) {
    const fg_value *p = src->params[i];
    fg_type t = p->type;
    for (int k = 0; k < t.rank; k++) {
      if (!t.dims[k].sym)
        continue;
      for (int b = 0; b < nb; b++)
        if (t.dims[k].sym && strcmp(t.dims[k].sym, names[b]) == 0) {
          t.dims[k].sym = NULL;
          t.dims[k].size = values[b];
        }
    }
    fg_value *np = fg_add_param(g, p->name, t, p->loc);
    np->weak = p->weak;
    map[p->id] = np;
  }
  for (const fg_node *n = src->first; n && ok; n = n->next) {
    fg_value *in[64], **inp = n->nin <= 64 ? in : malloc((size_t)n->nin * sizeof *inp);
    if (!inp) {
      ok = false;
      break;
    }
    for (int i = 0; i < n->nin; i++)
      inp[i] = map[n->in[i]->id];
    fg_node *m = fg_node_new(g, n->op, n->nin, inp, n->nout, n->loc);
    if (inp != in)
      free(inp);
    for (int i = 0; i < n->op->nattrs; i++) {
      m->attrs[i] = n->attrs[i];
      if (!copy_attr(g, &m->attrs[i], nb, names, values)) {
        fg_error(d, m->attrs[i].loc, "the size expression of attribute '%s' of '%s' overflows",
                 n->op->attrs[i].name, n->op->name);
        ok = false;
      }
    }
    for (int i = 0; i < n->nout; i++) {
      m->out[i]->name = n->out[i]->name ? fg_arena_strdup(&g->arena, n->out[i]->name) : NULL;
      m->out[i]->loc = n->out[i]->loc;
      m->out[i]->weak = n->out[i]->weak;
      m->out[i]->type = n->out[i]->type;
      for (int k = 0; k < m->out[i]->type.rank; k++)
        m->out[i]->type.dims[k].sym = copy_sym(g, m->out[i]->type.dims[k].sym);
      map[n->out[i]->id] = m->out[i];
    }
    if (ok && (nb > 0 || d))
      ok = fg_infer_node(m, d);
  }
  if (ok) {
    fg_value **res = malloc((size_t)(src->nresults > 0 ? src->nresults : 1) * sizeof *res);
    if (!res)
      ok = false;
    for (int i = 0; ok && i < src->nresults; i++)
      res[i] = map[src->results[i]->id];
    if (ok) {
      fg_set_results(g, src->nresults, res, src->result_locs);
      for (int i = 0; i < src->nresults; i++)
        if (fg_result_into(src, i) >= 0)
          fg_set_result_into(g, i, src->result_into[i], src->result_into_locs[i]);
    }
    free(res);
  }
  free(map);
  if (!ok) {
    fg_graph_free(g);
    return NULL;
  }
  return g;
}

fg_graph *fg_graph_clone(const fg_graph *g) { return copy(g, 0, NULL, NULL, NULL); }

fg_graph *fg_graph_specialize(const fg_graph *g, int n, const char *const *names,
                              const int64_t *values, fg_diag *d) {
  for (int i = 0; i < n; i++) {
    const fg_sym *s = fg_graph_sym(g, names[i]);
    char msg[512];
    if (s && !fg_sym_admits(s, values[i], d->path, msg, sizeof msg)) {
      fg_error(d, (fg_loc){0, 0}, "%s", msg);
      return NULL;
    }
    if (values[i] < 0) {
      fg_error(d, g->loc, "symbolic dimension %s bound to negative size", names[i]);
      return NULL;
    }
  }
  return copy(g, n, names, values, d);
}

fg_graph *fg_graph_bind_stand_in(const fg_graph *g, const char *name, int64_t value, fg_diag *d) {
  const char *names[1] = {name};
  int64_t values[1] = {value};
  fg_graph *c = copy(g, 1, names, values, d);
  if (c)
    c->stand_in = value;
  return c;
}
