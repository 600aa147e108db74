/* One-pass logsumexp (issue 20, cross-entropy): a row's max m = amax(x)
 * and its sum of exponentials sum(exp(x - m)), as a log-softmax, a
 * cross-entropy or a logsumexp writes them, are two dependent reductions:
 * kept in registers, the row's whole length lives in one CTA (a row of
 * 50304: 928 threads, one CTA an SM, its loads never overlapping its
 * arithmetic); streamed, the second would read the row again. Where
 * nothing else needs the row (no full-size output), the kernel computes
 * both in one streamed pass (online softmax, Milakov and Gimelshein
 * 2018): each thread keeps a running max m_t and the sum s_t of exp(x -
 * m_t), rescaled by exp(m_old - m_new) when its max grows; the CTA's max
 * M is the amax (the same bits: max is exact in any order) and the sum is
 * the CTA's sum of s_t exp(m_t - M), the graph's quantity up to the
 * rounding of the extra exponential (emit_row.c, reduce_lse_pair). The
 * kernel's other reductions whose inputs need no row total (a
 * cross-entropy's one-hot target logit) ride in the same pass. */
#include "plan.h"

/* A reshape of a row-shaped value to another row shape, peeled. */
static const fg_value *peel_row_reshapes(const fg_kernel *k, const fg_value *v) {
  while (v->def && v->def->op->code == FG_OP_RESHAPE && fg_plan_row_shaped(k, &v->type) &&
         fg_plan_row_shaped(k, &v->def->in[0]->type))
    v = v->def->in[0];
  return v;
}

static bool is_f32(const fg_value *v) { return v->type.dtype == FG_F32; }

int fg_plan_lse_pair(const fg_kernel *k, const fg_node *n) {
  if (k->kind != FG_KERNEL_ROW || n->op->code != FG_OP_SUM || !is_f32(n->in[0]) ||
      !is_f32(n->out[0]))
    return -1;
  const fg_value *ex = n->in[0];
  if (!ex->def || ex->def->op->code != FG_OP_EXP || !is_f32(ex->def->in[0]))
    return -1;
  const fg_value *d = ex->def->in[0];
  if (!d->def || d->def->op->code != FG_OP_SUB)
    return -1;
  const fg_value *x = d->def->in[0], *m = d->def->in[1];
  if (!is_f32(x) || !is_f32(m) || x->type.rank != k->rank || m->type.rank != k->rank ||
      !fg_plan_row_shaped(k, &m->type))
    return -1;
  for (int dd = 0; dd < k->rank; dd++)
    if (x->type.dims[dd].size != k->dims[dd])
      return -1;
  m = peel_row_reshapes(k, m);
  if (!m->def || m->def->op->code != FG_OP_AMAX || m->def->in[0] != x || !is_f32(m))
    return -1;
  for (int i = 0; i < k->nreds; i++)
    if (k->reds[i] == m->def)
      return i;
  return -1;
}

int fg_plan_lse_first(const fg_kernel *k, int j) {
  if (j < 0 || j >= k->nreds)
    return -1;
  int i = fg_plan_lse_pair(k, k->reds[j]);
  if (i < 0)
    return -1;
  for (int l = 0; l < j; l++)
    if (fg_plan_lse_pair(k, k->reds[l]) == i)
      return -1;
  return i;
}

int fg_plan_one_pass_lse(const fg_plan *p, const fg_kernel *k, int j) {
  if (k->kind != FG_KERNEL_ROW || k->persistent || k->split > 1 || k->ncols || k->ntails ||
      fg_sym_involves(&p->sym, k->red))
    return -1;
  return fg_plan_lse_first(k, j);
}

int fg_plan_lse_pairs(const fg_plan *p, const fg_kernel *k) {
  int n = 0;
  for (int j = 0; j < k->nreds; j++)
    n += fg_plan_one_pass_lse(p, k, j) >= 0;
  return n;
}

/* Whether reduction j of k is half of a one-pass pair, a variance's or a
 * logsumexp's. */
static bool paired(const fg_plan *p, const fg_kernel *k, int j) {
  if (fg_plan_one_pass_lse(p, k, j) >= 0 || fg_plan_one_pass_variance(k, j) >= 0)
    return true;
  for (int l = 0; l < k->nreds; l++)
    if (fg_plan_one_pass_lse(p, k, l) == j || fg_plan_one_pass_variance(k, l) == j)
      return true;
  return false;
}

int fg_plan_lse_rides(const fg_plan *p, const fg_kernel *k, int j) {
  if (j < 0 || j >= k->nreds || paired(p, k, j) || fg_plan_uses_rows(p, k, k->reds[j]->in[0]))
    return -1;
  for (int l = 0; l < k->nreds; l++) {
    int i = fg_plan_one_pass_lse(p, k, l);
    if (i >= 0)
      return i;
  }
  return -1;
}

int fg_plan_lse_riders(const fg_plan *p, const fg_kernel *k) {
  int n = 0;
  for (int j = 0; j < k->nreds; j++)
    n += fg_plan_lse_rides(p, k, j) >= 0;
  return n;
}

int fg_plan_lse_unroll(const fg_plan *p, const fg_kernel *k) {
  int64_t n;
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_ROW_LSE, &n) && n > 0)
    return (int)n;
  /* 16 values a thread: 56 registers at 8 a vector of bf16, four CTAs of
   * 256 an SM; 32 took 88, two CTAs (ptxas 13.0, sm_90a) */
  int v = k->vec > 0 ? k->vec : 1, u = 16 / v;
  return u < 1 ? 1 : u;
}
