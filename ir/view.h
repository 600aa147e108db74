/* What a view op does: the one definition of each view op's index
 * semantics (as tinygrad's apply_movement_op), used by the interpreter
 * (interp_view.c: a strided copy), segmentation and bookending (strided
 * views of stored values) and the backend (map_view in emit_value.c: index
 * arithmetic). Shape inference (infer.c) computes and checks the result
 * types; everything here starts from those types.
 *
 * A view op is either a reshape (row-major order kept) or a dim map: each
 * operand dim i is indexed by result dim src[i] times step[i] plus start[i],
 * or by the constant start[i] when src[i] < 0 (a size-1 dim squeezed away).
 * Strided views (offset, sizes, strides in elements over some storage)
 * compose with view ops when the result can be expressed with strides
 * (PyTorch's view rules); a reshape across non-mergeable strides cannot. */
#ifndef FG_VIEW_H
#define FG_VIEW_H
#include "ir.h"
#include "op.h"

typedef struct fg_view_map {
  bool reshape; /* reshape/view: the rest is unused */
  int in_rank, out_rank;
  int src[FG_MAX_RANK];      /* per operand dim: the result dim indexing it, or -1 */
  int64_t step[FG_MAX_RANK]; /* per operand dim */
  int64_t start[FG_MAX_RANK];
  /* per operand dim: a size-1 dim the op stretches or drops, whose index is
   * always 0 (the result dim src[i], if any, then has stride 0 unless it
   * has size 1 itself) */
  bool zero[FG_MAX_RANK];
  /* per result dim: a size-1 dim the op inserts (unsqueeze; PyTorch gives
   * it the stride of the dim after it times that dim's size) */
  bool inserted[FG_MAX_RANK];
} fg_view_map;

/* The map of view node n's result k, for an operand of sizes in_sizes
 * (rank n->in[0]'s) and a result of sizes out_sizes (rank n->out[k]'s); the
 * sizes are passed so that the interpreter can map graphs whose types are
 * symbolic. False (with *why) when n is not a view op or the sizes
 * disagree with its attributes. */
bool fg_view_map_of(const fg_node *n, int k, const int64_t *in_sizes, const int64_t *out_sizes,
                    fg_view_map *m, const char **why);

typedef struct fg_strided {
  int rank;
  int64_t offset;
  int64_t sizes[FG_MAX_RANK];
  int64_t strides[FG_MAX_RANK];
} fg_strided;

/* The storage view of a value stored densely with its type's strides
 * (row-major or its layout). */
void fg_strided_dense(const fg_type *t, fg_strided *out);
/* Applies view node n (result index k) to `in`. False when n is not a view
 * op or the result cannot be expressed with strides; *why then says which. */
bool fg_strided_apply(const fg_node *n, int k, const fg_strided *in, fg_strided *out,
                      const char **why);
/* The same for a map and explicit result sizes. */
bool fg_strided_map(const fg_view_map *m, const fg_strided *in, const int64_t *out_sizes,
                    fg_strided *out, const char **why);
/* Whether op only remaps indices (reshape, permute, broadcasts, squeeze,
 * slice, split, ...; not cat or pad, which select). */
bool fg_is_view_op(const fg_op *op);

/* Follows v's defining view ops up to a base value and composes them into
 * one strided view over the base's dense storage (row-major; a parameter's
 * own layout). With stop == NULL the base is v's first ancestor not defined
 * by a view op; otherwise the first for which stop(value, ctx) holds, and
 * reaching a non-view definition first is a failure (*why says why, or is
 * NULL when nothing could have been a view). */
bool fg_strided_chain(const fg_value *v, bool (*stop)(const fg_value *, const void *),
                      const void *ctx, const fg_value **base, fg_strided *out, const char **why);

/* Whether a view is exactly the dense row-major layout of its sizes at
 * offset 0. */
bool fg_strided_is_dense(const fg_strided *s);
/* The largest element offset reached + 1 (0 for empty views). */
int64_t fg_strided_extent(const fg_strided *s);

#endif
