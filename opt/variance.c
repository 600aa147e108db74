/* One-pass variance (issue 17): a row kernel whose rows do not stay in
 * registers read each row once a phase, and a variance's two passes (the
 * mean, then the sum of squared deviations from it, as decompose.c writes
 * var and var_mean) read it twice. Where the second reduction is that sum
 * of squares, the kernel computes both in one pass: each thread keeps a
 * running (count, mean, M2) of its elements, merging each vector chunk's
 * own (V, mean, M2) by Welford's update for groups (Chan et al.), and the
 * CTA combines the threads' by Chan's formula around the row's mean:
 *
 *   sum over the row of (x - m)^2 = sum over threads t of
 *                                   M2_t + n_t (mean_t - m)^2
 *
 * exact in real arithmetic for any m, and with m the graph's own mean it
 * is the quantity the graph asks for; no cancellation, as in the two-pass
 * form (the emitter: emit_row.c, reduce_streaming). */
#include "plan.h"

/* A reshape of a row-shaped value to another row shape (size-1 dims
 * added or removed: the rows keep their order), peeled. */
static const fg_value *peel_row_reshapes(const fg_kernel *k, const fg_value *v) {
  while (v->def && v->def->op->code == FG_OP_RESHAPE && fg_plan_row_shaped(k, &v->type) &&
         fg_plan_row_shaped(k, &v->def->in[0]->type))
    v = v->def->in[0];
  return v;
}

int fg_plan_variance_pair(const fg_kernel *k, const fg_node *n) {
  if ((k->kind != FG_KERNEL_ROW && k->kind != FG_KERNEL_COLUMN) || n->op->code != FG_OP_SUM ||
      n->in[0]->type.dtype != FG_F32)
    return -1;
  int64_t count = 1;
  for (int d = 0; d < k->rank; d++)
    if (k->mask[d])
      count *= k->dims[d];
  /* the per-thread counts are exact in f32 */
  if (count <= 0 || count >= ((int64_t)1 << 24))
    return -1;
  const fg_value *sq = n->in[0];
  if (!sq->def || sq->def->op->code != FG_OP_MUL || sq->def->in[0] != sq->def->in[1])
    return -1;
  const fg_value *dev = sq->def->in[0];
  if (!dev->def || dev->def->op->code != FG_OP_SUB)
    return -1;
  const fg_value *x = dev->def->in[0], *m = dev->def->in[1];
  /* m: one value per row, broadcast over the row by the sub itself (the
   * reduced dims kept as size-1 dims) */
  if (m->type.rank != k->rank || !fg_plan_row_shaped(k, &m->type) || x->type.rank != k->rank)
    return -1;
  for (int d = 0; d < k->rank; d++)
    if (x->type.dims[d].size != k->dims[d])
      return -1;
  m = peel_row_reshapes(k, m);
  double c;
  if (!m->def || m->def->op->code != FG_OP_DIV || !fg_value_is_literal(m->def->in[1], &c) ||
      c != (double)count)
    return -1;
  const fg_value *s = peel_row_reshapes(k, m->def->in[0]);
  if (!s->def || s->def->op->code != FG_OP_SUM || s->def->in[0] != x || x->type.dtype != FG_F32 ||
      s->def->out[0]->type.dtype != FG_F32)
    return -1;
  for (int i = 0; i < k->nreds; i++)
    if (k->reds[i] == s->def && k->reds[i] != n)
      return i;
  return -1;
}

/* One sum of squares a mean: the mean's index i where n pairs with it
 * (fg_plan_variance_pair) and no reduction of k->reds (i, end) does too
 * (a second would be its own pass); -1 otherwise. */
int fg_plan_variance_first(const fg_kernel *k, const fg_node *n, int end) {
  int i = fg_plan_variance_pair(k, n);
  if (i < 0 || i >= end)
    return -1;
  for (int l = i + 1; l < end; l++)
    if (fg_plan_variance_pair(k, k->reds[l]) == i)
      return -1;
  return i;
}

/* Which kernels compute a variance in one pass, kind by kind:
 *
 * - row kernels whose rows stream (not persistent, not split, no column
 *   reductions, no tails): Welford's update a thread, Chan's formula over
 *   the CTA (emit_row.c);
 * - column kernels (issue 17: var over a non-last dim read its input
 *   twice, a kernel for the mean and one for the squared deviations):
 *   each thread keeps (count, mean, M2) of each output column it owns by
 *   Welford's update a row, split slices add their own by Chan's formula
 *   around the graph's mean (emit_column.c). Split or not: the slices'
 *   partials carry what the combine needs.
 *
 * Reduction j of k, a kernel of that kind, in the pass of reduction i
 * (returned; -1: no). */
static int variance_in_pass(const fg_kernel *k, fg_kernel_kind kind, int j) {
  if (k->kind != kind || j < 0 || j >= k->nreds)
    return -1;
  if (kind == FG_KERNEL_ROW && (k->persistent || k->split != 1 || k->ncols || k->ntails))
    return -1;
  return fg_plan_variance_first(k, k->reds[j], j);
}

/* How many of k's reductions variance_in_pass folds into another's pass. */
static int variances_in_pass(const fg_kernel *k, fg_kernel_kind kind) {
  int n = 0;
  for (int j = 0; j < k->nreds; j++)
    n += variance_in_pass(k, kind, j) >= 0;
  return n;
}

int fg_plan_one_pass_variance(const fg_kernel *k, int j) {
  return variance_in_pass(k, FG_KERNEL_ROW, j);
}

int fg_plan_row_passes(const fg_plan *p, const fg_kernel *k) {
  return k->nreds - variances_in_pass(k, FG_KERNEL_ROW) - fg_plan_lse_pairs(p, k) -
         fg_plan_lse_riders(p, k);
}

int fg_plan_column_variance(const fg_kernel *k, int j) {
  return variance_in_pass(k, FG_KERNEL_COLUMN, j);
}

int fg_plan_column_variances(const fg_kernel *k) { return variances_in_pass(k, FG_KERNEL_COLUMN); }
