/* The optimization pipeline over one graph: named passes run in order; each
 * can be disabled and its output printed (fusec --disable-pass, --print-after,
 * --print-after-all, --time-passes). Passes keep the graph verified. */
#ifndef FG_PASSES_H
#define FG_PASSES_H
#include <stdio.h>

#include "diag.h"
#include "ir.h"
#include "op.h"

typedef struct fg_pass_options {
  const char *const *disabled; /* pass names turned off */
  int ndisabled;
  const char *print_after; /* a pass name, or NULL */
  bool print_after_all;
  bool time_passes;
  FILE *print_out;   /* where --print-after* and --time-passes write (stderr) */
  bool cluster_rows; /* the target splits a long row over a thread-block cluster (sm_90;
                      * schedule.c cluster_split): sink-reshape takes longer rows */
} fg_pass_options;

typedef struct fg_pass {
  const char *name;
  const char *what;                     /* one line for --help */
  bool (*run)(fg_graph *g, fg_diag *d); /* false: an error was reported */
  /* instead of run, for a pass that reads the options */
  bool (*run_with)(fg_graph *g, const fg_pass_options *o, fg_diag *d);
} fg_pass;

/* The pipeline, in order; NULL-terminated by name. */
extern const fg_pass fg_pipeline[];
bool fg_pass_exists(const char *name);
bool fg_run_pipeline(fg_graph *g, const fg_pass_options *o, fg_diag *d);
/* One pass of the pipeline (o may be NULL: the defaults). */
bool fg_run_pass(const fg_pass *p, fg_graph *g, const fg_pass_options *o, fg_diag *d);

/* Individual passes (opt/<name>.c). */
bool fg_pass_decompose(fg_graph *g, fg_diag *d);
/* Whether decompose rewrites op c (so the code generator never sees it). */
bool fg_decompose_rewrites(fg_opcode c);
bool fg_pass_dce(fg_graph *g, fg_diag *d);
bool fg_pass_zip_cat(fg_graph *g, fg_diag *d);
bool fg_pass_reduce_reuse(fg_graph *g, fg_diag *d);
bool fg_pass_cse(fg_graph *g, fg_diag *d);
bool fg_pass_canonicalize(fg_graph *g, fg_diag *d);
bool fg_pass_merge_views(fg_graph *g, fg_diag *d);
bool fg_pass_bookend(fg_graph *g, fg_diag *d);
/* issue 17: reshapes below the pointwise ops that finish a reduction's rows */
bool fg_pass_sink_reshape(fg_graph *g, const fg_pass_options *o, fg_diag *d);
/* issue 17: op(reshape(x)) as reshape(op(x)) for reductions (opt/reduce_reshape.c) */
bool fg_pass_reduce_reshape(fg_graph *g, fg_diag *d);
/* issue 17: sum(where(eq(iota, t), x, 0)) as a take_along_dim (opt/onehot.c) */
bool fg_pass_onehot(fg_graph *g, fg_diag *d);

#endif
