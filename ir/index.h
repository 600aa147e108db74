/* What an indexing op does: the one definition of the coordinate maps of
 * gather, take_along_dim, index_select, scatter_add and index_add, used by
 * the interpreter (interp_index.c) and the backend (emit_value.c). Shape
 * inference (infer.c) checks the types; everything here starts from them.
 *
 * Every op walks a domain: the result for the gathers, the index tensor for
 * scatter_add and the source for index_add. At a domain coordinate c the
 * index operand is read at idx_src (each entry a domain dim, or
 * FG_INDEX_ZERO), and the data tensor (the gathers' operand, the scatters'
 * result) is addressed at x_src, where entry `dim` is FG_INDEX_VALUE: the
 * index value read there, clamped into [0, size). So an index is never read
 * outside the tensor it indexes; PyTorch raises an error instead. */
#ifndef FG_INDEX_H
#define FG_INDEX_H
#include "ir.h"
#include "op.h"

enum { FG_INDEX_ZERO = -1, FG_INDEX_VALUE = -2 };

typedef struct fg_index_map {
  int dim;                  /* the indexed dim of the data tensor */
  int domain_rank;          /* rank of the walked domain */
  int idx_rank, x_rank;     /* ranks of the index operand and of the data tensor */
  int idx_src[FG_MAX_RANK]; /* per index dim: a domain dim or FG_INDEX_ZERO */
  int x_src[FG_MAX_RANK];   /* per data dim: a domain dim, FG_INDEX_ZERO or FG_INDEX_VALUE */
  int64_t size;             /* the data tensor's extent along dim (the clamp bound) */
} fg_index_map;

/* The map of indexing node n (of static or symbolic types; `size` is 0
 * when the indexed dim is symbolic). */
void fg_index_map_of(const fg_node *n, fg_index_map *m);
/* The domain an indexing node walks: its result (the gathers), its index
 * (scatter_add) or its source (index_add). */
const fg_type *fg_index_domain(const fg_node *n);
/* Whether n scatters (its result is the data tensor plus contributions). */
static inline bool fg_index_scatters(const fg_node *n) {
  return n->op->code == FG_OP_SCATTER_ADD || n->op->code == FG_OP_INDEX_ADD;
}
/* An index value clamped into [0, size): the defined out-of-range behaviour. */
static inline int64_t fg_index_clamp(int64_t v, int64_t size) {
  return v < 0 ? 0 : v >= size ? size - 1 : v;
}

#endif
