/* The CPU reference interpreter: the oracle for every GPU test. Simple and
 * obviously right rather than fast. Tensors are dense row-major host buffers
 * holding elements of their dtype (bf16/f16 as raw 16-bit patterns, f8 as raw
 * bytes, bool as one byte 0/1). Layouts of parameters do not matter here: the
 * interpreter sees logical tensors. Graphs must have static shapes
 * (fg_graph_specialize binds symbolic dims first). */
#ifndef FG_INTERP_H
#define FG_INTERP_H
#include <stddef.h>

#include "ir.h"
#include "op.h"

typedef struct fg_tensor {
  fg_dtype dtype;
  int rank;
  int64_t sizes[FG_MAX_RANK];
  void *data; /* malloc'd when owned */
  size_t nbytes;
} fg_tensor;

/* Allocates a zeroed tensor; false on out-of-memory. */
bool fg_tensor_alloc(fg_tensor *t, fg_dtype dt, int rank, const int64_t *sizes);
void fg_tensor_free(fg_tensor *t);
int64_t fg_tensor_numel(const fg_tensor *t);
/* Element access through double / int64 (for tests and tools). */
double fg_tensor_get_f(const fg_tensor *t, int64_t i);
int64_t fg_tensor_get_i(const fg_tensor *t, int64_t i);
void fg_tensor_set_f(fg_tensor *t, int64_t i, double v);  /* rounds to dtype */
void fg_tensor_set_i(fg_tensor *t, int64_t i, int64_t v); /* wraps to dtype */

/* Runs graph g on inputs (one per parameter, matching its dtype and shape;
 * scalar parameters are rank-0 tensors) and fills outputs[0..nresults-1]
 * with newly allocated tensors the caller frees. Returns false with a
 * message in err on failure (unsupported op, out of memory, bad input). */
bool fg_interp_run(const fg_graph *g, const fg_tensor *inputs, fg_tensor *outputs, char *err,
                   size_t errcap);

/* Per-op evaluators referenced by the op table (interp_*.c). */
bool fg_interp_literal(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_reduce(fg_interp_ctx *cx, const fg_node *n); /* sum amax amin mean prod */
bool fg_interp_var(fg_interp_ctx *cx, const fg_node *n);    /* var, var_mean */
bool fg_interp_view(fg_interp_ctx *cx, const fg_node *n);   /* reshape view permute transpose
                                                               broadcast_in_dim expand squeeze
                                                               unsqueeze slice segment_set */
bool fg_interp_cat(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_split(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_pad(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_full(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_iota(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_sdpa(fg_interp_ctx *cx, const fg_node *n);   /* may report "not supported" */
bool fg_interp_gather(fg_interp_ctx *cx, const fg_node *n); /* gather take_along_dim index_select */
bool fg_interp_scatter_add(fg_interp_ctx *cx, const fg_node *n); /* scatter_add index_add */
bool fg_interp_random(fg_interp_ctx *cx, const fg_node *n);      /* rand, randn */
bool fg_interp_dropout(fg_interp_ctx *cx, const fg_node *n);
/* issue 20, ops (interp_ops20.c) */
bool fg_interp_stack(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_softmax(fg_interp_ctx *cx, const fg_node *n); /* softmax, log_softmax */
bool fg_interp_logsumexp(fg_interp_ctx *cx, const fg_node *n);
bool fg_interp_argminmax(fg_interp_ctx *cx, const fg_node *n); /* argmax, argmin */
bool fg_interp_cumsum(fg_interp_ctx *cx, const fg_node *n);

#endif
