/* Strided views: (offset, sizes, strides) in elements over some storage.
 * View ops applied to a strided view give another strided view when they
 * can be expressed with strides (PyTorch's view rules); a reshape across
 * non-mergeable strides cannot. */
#ifndef FG_STRIDED_H
#define FG_STRIDED_H
#include "ir.h"
#include "op.h"

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
