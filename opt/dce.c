/* Dead-code elimination: nodes none of whose results reach a graph result. */
#include <stdlib.h>

#include "passes.h"

bool fg_pass_dce(fg_graph *g, fg_diag *d) {
  (void)d;
  bool *live = calloc((size_t)g->next_value_id + 1, 1);
  if (!live)
    return false;
  for (int i = 0; i < g->nresults; i++)
    live[g->results[i]->id] = true;
  /* Walk backwards: a node is live if any of its results is. */
  for (fg_node *n = g->last, *prev; n; n = prev) {
    prev = n->prev;
    bool used = false;
    for (int i = 0; i < n->nout; i++)
      used |= live[n->out[i]->id];
    if (!used) {
      fg_node_remove(g, n);
      continue;
    }
    for (int i = 0; i < n->nin; i++)
      live[n->in[i]->id] = true;
  }
  free(live);
  return true;
}
