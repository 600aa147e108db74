/* The verifier: structural SSA checks plus re-running inference, so a pass
 * that leaves a stale type is caught at the pass that did it. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"

/* The size table: an entry (its interned name) for every symbolic dim of
 * a parameter, each entry used by one, consistent facts. */
static bool verify_syms(const fg_graph *g, fg_diag *d) {
  bool *used = calloc((size_t)(g->nsyms > 0 ? g->nsyms : 1), 1);
  if (!used)
    return false;
  bool ok = true;
  for (int i = 0; ok && i < g->nparams; i++) {
    const fg_value *p = g->params[i];
    for (int k = 0; ok && k < p->type.rank; k++) {
      const char *name = p->type.dims[k].sym;
      if (!name)
        continue;
      const fg_sym *s = fg_graph_sym(g, name);
      if (!s || s->name != name) {
        fg_internal_error(d, p->loc, "size %s of parameter %d is %s the graph's size table", name,
                          i, s ? "not interned in" : "missing from");
        ok = false;
      } else {
        used[s - g->syms] = true;
      }
    }
  }
  for (int i = 0; ok && i < g->nsyms; i++) {
    const fg_sym *s = &g->syms[i];
    const char *why = !s->name                        ? "has no name"
                      : fg_graph_sym(g, s->name) != s ? "is listed twice"
                      : !used[i]                      ? "is used by no parameter"
                      : s->min < 0 || s->min > s->max ? "has an empty or negative range"
                      : s->max > FG_SYM_MAX_BOUND     ? "has a range past 2^62"
                      : s->div < 1                    ? "has a divisor below 1"
                      : !fg_range_has_multiple(s->min, s->max, s->div)
                          ? "has a range that holds no multiple of its divisor"
                          : NULL;
    if (why) {
      fg_internal_error(d, s->loc, "size %s of the graph's size table %s", s->name ? s->name : "?",
                        why);
      ok = false;
    }
  }
  free(used);
  return ok;
}

bool fg_verify_graph(const fg_graph *cg, fg_diag *d) {
  fg_graph *g = (fg_graph *)cg; /* inference rewrites types with equal ones */
  int nv = g->next_value_id;
  bool *defined = calloc((size_t)(nv > 0 ? nv : 1), 1);
  if (!defined)
    return false;
  bool ok = verify_syms(g, d);
  for (int i = 0; ok && i < g->nparams; i++) {
    fg_value *p = g->params[i];
    if (p->param_index != i || p->def) {
      fg_internal_error(d, p->loc, "parameter %d is malformed", i);
      ok = false;
    }
    defined[p->id] = true;
  }
  for (fg_node *n = g->first; n && ok; n = n->next) {
    for (int i = 0; i < n->nin; i++) {
      if (!n->in[i] || n->in[i]->id >= nv || !defined[n->in[i]->id]) {
        fg_internal_error(d, n->loc, "operand %d of '%s' is used before it is defined", i,
                          n->op->name);
        ok = false;
      }
    }
    if (!ok)
      break;
    fg_type saved[16];
    int ns = n->nout < 16 ? n->nout : 16;
    for (int i = 0; i < ns; i++)
      saved[i] = n->out[i]->type;
    if (!fg_infer_node(n, d)) {
      ok = false;
      break;
    }
    for (int i = 0; i < n->nout; i++) {
      fg_value *o = n->out[i];
      if (o->def != n || o->def_index != i || defined[o->id]) {
        fg_internal_error(d, n->loc, "result %d of '%s' is malformed", i, n->op->name);
        ok = false;
      }
      if (i < ns && !fg_type_eq(&saved[i], &o->type)) {
        char a[128], b[128];
        fg_internal_error(d, n->loc, "result %d of '%s' has type %s, inference gives %s", i,
                          n->op->name, fg_type_str(&saved[i], a, sizeof a),
                          fg_type_str(&o->type, b, sizeof b));
        ok = false;
      }
      defined[o->id] = true;
    }
  }
  if (ok && g->nresults == 0) {
    fg_error(d, g->loc, "graph '%s' returns nothing", g->name);
    ok = false;
  }
  for (int i = 0; ok && i < g->nresults; i++)
    if (!g->results[i] || !defined[g->results[i]->id]) {
      fg_internal_error(d, g->result_locs ? g->result_locs[i] : g->loc, "result %d is not defined",
                        i);
      ok = false;
    }
  for (int i = 0; ok && i < g->nresults; i++) {
    int pi = fg_result_into(g, i);
    if (pi >= 0 && (pi >= g->nparams || !fg_value_fits_param(g->results[i], g->params[pi]))) {
      fg_internal_error(d, g->result_locs ? g->result_locs[i] : g->loc,
                        "result %d no longer fits the parameter it is written into", i);
      ok = false;
    }
  }
  free(defined);
  return ok;
}
