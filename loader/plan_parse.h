/* The launch plan of a fusec artifact (docs/artifact.md): parser and
 * validator, and the evaluator of its formulas. Pure C, no CUDA. */
#ifndef FGL_PLAN_PARSE_H
#define FGL_PLAN_PARSE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "fgload.h"

#define PLAN_VERSION 5 /* the newest version read */
#define PLAN_VERSION_MIN                                                                           \
  2                       /* the oldest: 3 adds in-place results and min/max, 4 kernel-stream,     \
                           * 5 kernel-pdl */
#define PLAN_MAX_SYMS 256 /* syms per graph */
#define PLAN_MAX_DEPTH 32 /* evaluation stack of one formula */
#define PLAN_MAX_TEMP_BYTES (INT64_MAX / 4)
#define PLAN_MAX_OFFSET (INT64_MAX / 16)

typedef struct plan_ref {
  char kind; /* 'p' param, 's' scalar param, 'r' result, 't' temp, 'z' sym */
  int index;
} plan_ref;

/* One instruction of a formula's program (reverse Polish, over int64). */
typedef enum plan_opcode {
  PLAN_OP_CONST, /* push imm */
  PLAN_OP_SYM,   /* push the bound value of sym `sym` */
  PLAN_OP_ADD,
  PLAN_OP_SUB,
  PLAN_OP_MUL,
  PLAN_OP_DIV, /* floor division (both operands are >= 0) */
  PLAN_OP_MOD,
  PLAN_OP_MIN, /* min(a, b), plan version 3 */
  PLAN_OP_MAX, /* max(a, b), plan version 3 */
} plan_opcode;

typedef struct plan_op {
  int32_t code; /* plan_opcode */
  int32_t sym;
  int64_t imm;
} plan_op;

/* A size, stride, offset, byte count or grid extent: a constant (n_ops 0,
 * value), or a program of n_ops instructions at the graph's code[first],
 * written as text[text_off] in the plan. */
typedef struct plan_expr {
  int64_t value;
  int32_t first, n_ops;
  int32_t text_off;
} plan_expr;

static inline bool plan_expr_const(const plan_expr *e) { return e->n_ops == 0; }

typedef struct plan_shape {
  int rank;
  plan_expr sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK];
  bool symbolic; /* some size or stride is not a constant */
} plan_shape;

typedef struct plan_param {
  char *name;
  fgl_dtype dtype;
  int is_scalar;
  plan_shape shape;
  int sym[FGL_MAX_RANK]; /* the sym that is dim d's size, or -1 */
} plan_param;

typedef struct plan_result {
  fgl_dtype dtype;
  plan_shape shape;
  int is_view;
  plan_ref base; /* views: 'p' or 'r' */
  plan_expr offset;
  bool symbolic;     /* the shape or the offset is not constant */
  bool check_at_run; /* what could not be checked at load (a view's extent, written strides) */
  bool inplace;      /* version 3: written into parameter inplace_param's storage */
  int inplace_param;
} plan_result;

typedef struct plan_temp {
  plan_expr bytes;
  int64_t align;
  int zero;
} plan_temp;

typedef struct plan_kernel {
  char *entry;
  plan_expr grid[3];
  unsigned block[3], smem;
  int n_args;
  plan_ref *args;
  char *vec_entry; /* NULL when no kernel-vec line */
  int vec_align;
  int n_vec_ptrs;
  plan_ref *vec_ptrs;
  bool resident;      /* kernel-resident: its CTAs wait for one another */
  int cluster;        /* ... launched in clusters of this many CTAs (1: none) */
  bool grid_symbolic; /* some grid extent is not constant */
  /* kernel-narrow: the variants of entry and vec_entry for sym 0 <= narrow_max */
  char *narrow_entry;     /* NULL when no kernel-narrow line */
  char *narrow_vec_entry; /* NULL when '-' (then vec_entry is NULL too) */
  int64_t narrow_max;
  int narrow_line; /* the kernel-narrow line, for messages */
  int stream;      /* kernel-stream (version 4): 1 on the instance's second stream, else 0 */
  bool pdl;        /* kernel-pdl (version 5): begins with griddepcontrol.wait, so it may be
                    * launched with programmatic stream serialization */
} plan_kernel;

/* A kernel's entries, indexed by variant: the plain entry, its kernel-vec
 * variant, and their kernel-narrow variants (a variant's index + 1 is its
 * vectorized form). */
typedef enum plan_variant {
  PLAN_ENTRY_PLAIN,
  PLAN_ENTRY_VEC,
  PLAN_ENTRY_NARROW,
  PLAN_ENTRY_NARROW_VEC,
  PLAN_N_ENTRIES,
} plan_variant;

/* Variant v's entry name, or NULL when the plan has none. */
static inline const char *plan_kernel_entry(const plan_kernel *k, int v) {
  switch (v) {
  case PLAN_ENTRY_PLAIN:
    return k->entry;
  case PLAN_ENTRY_VEC:
    return k->vec_entry;
  case PLAN_ENTRY_NARROW:
    return k->narrow_entry;
  case PLAN_ENTRY_NARROW_VEC:
    return k->narrow_vec_entry;
  default:
    return NULL;
  }
}

typedef struct plan_sym {
  char *name;
  int64_t min, max, div;
  int first_param, first_dim; /* the first parameter dim it is the size of */
} plan_sym;

/* A parameter dim whose size is a sym: where fgl_run binds it. */
typedef struct plan_bind {
  int param, dim, sym;
  bool first; /* the sym's first occurrence: it binds; later ones must agree */
} plan_bind;

typedef struct plan_graph {
  char *name;
  int n_params, n_results, n_temps, n_kernels, n_syms;
  plan_param *params;
  plan_result *results;
  plan_temp *temps;
  plan_kernel *kernels;
  plan_sym *syms;
  int n_binds;
  plan_bind *binds; /* in parameter order, then dim order */
  plan_op *code;    /* every formula's program */
  int n_code, cap_code;
  char *text; /* every non-constant formula as written, NUL-separated */
  int n_text, cap_text;
  bool symbolic_temps; /* some temp's byte count is not constant */
  bool streams;        /* some kernel has a kernel-stream line (runs on a second stream) */
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
/* numel and the largest element offset (-1 when empty) of a shape whose
 * sizes and strides are >= 0; false when they pass INT64_MAX / 16. */
bool plan_shape_extent(const int64_t *sizes, const int64_t *strides, int rank, int64_t *numel,
                       int64_t *maxoff);
const plan_graph *plan_find(const plan *p, const char *name);

/* Evaluation of a formula with the bound values of the graph's syms. */
typedef enum plan_eval_status {
  PLAN_EVAL_OK = 0,
  PLAN_EVAL_OVERFLOW, /* beyond int64 */
  PLAN_EVAL_NEGATIVE, /* a subtraction below zero */
  PLAN_EVAL_DIV_ZERO, /* '/' or '%' by zero */
} plan_eval_status;

plan_eval_status plan_eval_ops(const plan_op *ops, int n, const int64_t *syms, int64_t *out);
static inline plan_eval_status plan_eval(const plan_graph *g, const plan_expr *e,
                                         const int64_t *syms, int64_t *out) {
  if (e->n_ops <= 1) { /* a constant, or a bare sym (a constant program is folded) */
    *out = e->n_ops ? syms[g->code[e->first].sym] : e->value;
    return PLAN_EVAL_OK;
  }
  return plan_eval_ops(g->code + e->first, e->n_ops, syms, out);
}
const char *plan_eval_status_text(plan_eval_status s); /* "overflows int64", ... */
/* The sym a formula is exactly (a bare NAME), or -1. */
static inline int plan_expr_sym(const plan_graph *g, const plan_expr *e) {
  return e->n_ops == 1 && g->code[e->first].code == PLAN_OP_SYM ? g->code[e->first].sym : -1;
}
/* The formula as written ("T*4096"), or its value printed into buf. */
const char *plan_expr_text(const plan_graph *g, const plan_expr *e, char *buf, size_t n);

#endif
