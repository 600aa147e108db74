#include "passes.h"

#include <string.h>
#include <time.h>

#include "infer.h"
#include "print.h"

const fg_pass fg_pipeline[] = {
    {"decompose",
     "rewrite mean, var, var_mean and the composites (softmax, log_softmax, logsumexp, argmax, "
     "argmin, stack) into reductions, views and pointwise ops, dropout into rand and "
     "pointwise ops",
     fg_pass_decompose, NULL},
    {"canonicalize", "fold constants, drop exact identities, shorten exact cast chains",
     fg_pass_canonicalize, NULL},
    {"onehot",
     "a sum of a one-hot select, sum(where(eq(iota, t), x, 0)), becomes a take_along_dim of t",
     fg_pass_onehot, NULL},
    {"cse", "merge nodes that compute the same values", fg_pass_cse, NULL},
    {"reduce-reuse", "a reduction over a superset of another's dims reuses its result",
     fg_pass_reduce_reuse, NULL},
    {"zip-cat", "a cat of views that tile one tensor becomes a view of it", fg_pass_zip_cat, NULL},
    {"sink-reshape", "a reshape between a reduction's rows and pointwise ops moves below them",
     NULL, fg_pass_sink_reshape},
    {"reduce-reshape",
     "a reduction of a reshape that merges or splits whole groups of dims reduces its input",
     fg_pass_reduce_reshape, NULL},
    {"merge-views", "merge adjacent reshapes and permutes, drop identity views",
     fg_pass_merge_views, NULL},
    {"dce", "remove nodes whose values are never used", fg_pass_dce, NULL},
    {"bookend",
     "view ops at the fusion's edges leave the kernels (results as views, strided loads)",
     fg_pass_bookend, NULL},
    {NULL, NULL, NULL, NULL},
};

bool fg_pass_exists(const char *name) {
  for (const fg_pass *p = fg_pipeline; p->name; p++)
    if (strcmp(p->name, name) == 0)
      return true;
  return false;
}

static bool disabled(const fg_pass_options *o, const char *name) {
  for (int i = 0; o && i < o->ndisabled; i++)
    if (strcmp(o->disabled[i], name) == 0)
      return true;
  return false;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool fg_run_pass(const fg_pass *p, fg_graph *g, const fg_pass_options *o, fg_diag *d) {
  return p->run ? p->run(g, d) : p->run_with(g, o, d);
}

bool fg_run_pipeline(fg_graph *g, const fg_pass_options *o, fg_diag *d) {
  FILE *out = o && o->print_out ? o->print_out : stderr;
  for (const fg_pass *p = fg_pipeline; p->name; p++) {
    if (disabled(o, p->name))
      continue;
    double t0 = now_ms();
    if (!fg_run_pass(p, g, o, d))
      return false;
    /* A pass that leaves the graph inconsistent is a compiler bug; catch it
     * at the pass that did it. */
    if (!fg_verify_graph(g, d)) {
      fg_internal_error(d, g->loc, "graph '%s' fails verification after pass '%s'", g->name,
                        p->name);
      return false;
    }
    if (o && o->time_passes)
      fprintf(out, "pass %-16s %-24s %8.3f ms\n", p->name, g->name, now_ms() - t0);
    if (o && (o->print_after_all || (o->print_after && strcmp(o->print_after, p->name) == 0))) {
      fprintf(out, "# after %s\n", p->name);
      fg_print_graph(out, g);
    }
  }
  return true;
}
