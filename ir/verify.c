/* The verifier: structural SSA checks plus re-running inference, so a pass
 * that leaves a stale type is caught at the pass that did it. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"

bool fg_verify_graph(const fg_graph *cg, fg_diag *d) {
  fg_graph *g = (fg_graph *)cg; /* inference rewrites types with equal ones */
  int nv = g->next_value_id;
  bool *defined = calloc((size_t)(nv > 0 ? nv : 1), 1);
  if (!defined)
    return false;
  bool ok = true;
  for (int i = 0; i < g->nparams; i++) {
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
  free(defined);
  return ok;
}
