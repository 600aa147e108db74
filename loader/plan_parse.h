/* The launch plan of a fusec artifact (docs/artifact.md): parser and
 * validator. Pure C, no CUDA. */
#ifndef FGL_PLAN_PARSE_H
#define FGL_PLAN_PARSE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "fgload.h"

#define PLAN_VERSION 1

typedef struct plan_ref {
  char kind; /* 'p' param, 's' scalar param, 'r' result, 't' temp */
  int index;
} plan_ref;

typedef struct plan_param {
  char *name;
  fgl_dtype dtype;
  int is_scalar;
  int rank;
  int64_t sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK];
  int64_t numel;
} plan_param;

typedef struct plan_result {
  fgl_dtype dtype;
  int rank;
  int64_t sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK];
  int64_t numel;
  int is_view;
  plan_ref base; /* views: 'p' or 'r' */
  int64_t offset;
} plan_result;

typedef struct plan_temp {
  int64_t bytes, align;
  int zero;
} plan_temp;

typedef struct plan_kernel {
  char *entry;
  unsigned grid[3], block[3], smem;
  int n_args;
  plan_ref *args;
  char *vec_entry; /* NULL when no kernel-vec line */
  int vec_align;
  int n_vec_ptrs;
  plan_ref *vec_ptrs;
  bool resident; /* kernel-resident: its CTAs wait for one another */
  int cluster;   /* ... launched in clusters of this many CTAs (1: none) */
} plan_kernel;

typedef struct plan_graph {
  char *name;
  int n_params, n_results, n_temps, n_kernels;
  plan_param *params;
  plan_result *results;
  plan_temp *temps;
  plan_kernel *kernels;
} plan_graph;

typedef struct plan {
  char target[32]; /* "sm_90" */
  int sm;          /* 90 */
  int n_graphs;
  plan_graph *graphs;
} plan;

/* Parses and validates the plan at the start of text (len bytes, need not be
 * NUL-terminated), including that the PTX after it defines every entry.
 * Returns 0, or -1 with "line N: ..." in err. On failure *out is left empty. */
int plan_parse(const char *text, size_t len, plan *out, char *err, size_t errlen);
void plan_free(plan *p);
const plan_graph *plan_find(const plan *p, const char *name);

#endif
