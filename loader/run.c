/* fgl_run: binding the syms (bind.c), validation against the plan, views,
 * and the launches. Never synchronizes; allocates nothing but the growth
 * of a symbolic temp (capture-safe once fgl_graph_reserve has run). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Checks a caller tensor against the plan's description. Returns NULL or a
 * short reason; the caller formats the full message. */
static const char *check_tensor(const fgl_tensor *t, fgl_dtype dt, int rank, const int64_t *sizes,
                                const int64_t *strides, int64_t numel) {
  if (t->dtype != dt || t->rank != rank)
    return "mismatch";
  for (int d = 0; d < rank; d++)
    if (t->sizes[d] != sizes[d])
      return "mismatch";
  if (numel > 0) {
    for (int d = 0; d < rank; d++)
      if (sizes[d] != 1 && t->strides[d] != strides[d])
        return "mismatch";
    if (!t->ptr)
      return "null pointer";
    if (t->ptr & (unsigned long long)(fgl_dtype_size(dt) - 1))
      return "misaligned";
  }
  return NULL;
}

static fgl_status mismatch(fgl_error *err, const char *who, const char *why, const fgl_tensor *t,
                           fgl_dtype dt, int rank, const int64_t *sizes, const int64_t *strides) {
  char want[200], got[200];
  fgl_fmt_dims(want, sizeof want, dt, rank, sizes, strides);
  if (!strcmp(why, "null pointer"))
    return fgl_fail(err, FGL_ERR_MISMATCH, "%s: NULL device pointer for %s", who, want);
  if (!strcmp(why, "misaligned"))
    return fgl_fail(err, FGL_ERR_MISMATCH, "%s: pointer 0x%llx is not aligned to %d bytes (%s)",
                    who, t->ptr, fgl_dtype_size(dt), fgl_dtype_name(dt));
  fgl_fmt_dims(got, sizeof got, t->dtype, t->rank, t->sizes, t->strides);
  return fgl_fail(err, FGL_ERR_MISMATCH, "%s: expected %s, got %s", who, want, got);
}

/* The bytes [*lo, *hi) that a tensor's elements occupy (none when it is
 * empty). Sizes and strides are the plan's (non-negative, checked). */
static void span(unsigned long long ptr, fgl_dtype dt, int rank, const int64_t *sizes,
                 const int64_t *strides, int64_t numel, unsigned long long *lo,
                 unsigned long long *hi) {
  unsigned long long last = 0;
  for (int d = 0; d < rank; d++)
    last += (unsigned long long)(sizes[d] - 1) * (unsigned long long)strides[d];
  *lo = ptr;
  *hi = numel == 0 ? ptr : ptr + (unsigned long long)fgl_dtype_bytes(dt, (long long)last + 1);
}

static bool overlap(unsigned long long alo, unsigned long long ahi, unsigned long long blo,
                    unsigned long long bhi) {
  return alo < bhi && blo < ahi;
}

/* A parameter written in place (plan version 3) is read and written by
 * the same kernels, which assume it shares no storage with any other
 * parameter or written output. */
static fgl_status check_inplace_overlap(const fgl_graph *g, const fgl_arg *inputs,
                                        const fgl_tensor *outputs, fgl_error *err) {
  const plan_graph *pg = g->pg;
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (!r->inplace)
      continue;
    int pj = r->inplace_param;
    unsigned long long lo, hi, olo, ohi;
    const fgl_dims *d = &g->pdims[pj];
    span(inputs[pj].tensor.ptr, r->dtype, r->shape.rank, d->sizes, d->strides, d->numel, &lo, &hi);
    if (lo == hi)
      continue;
    for (int i = 0; i < pg->n_params; i++) {
      const plan_param *p = &pg->params[i];
      if (i == pj || p->is_scalar)
        continue;
      const fgl_dims *pd = &g->pdims[i];
      span(inputs[i].tensor.ptr, p->dtype, p->shape.rank, pd->sizes, pd->strides, pd->numel, &olo,
           &ohi);
      if (overlap(lo, hi, olo, ohi))
        return fgl_fail(err, FGL_ERR_MISMATCH,
                        "input %d ('%s') [0x%llx, 0x%llx), which result %d overwrites in place, "
                        "overlaps input %d ('%s') [0x%llx, 0x%llx)",
                        pj, pg->params[pj].name, lo, hi, j, i, p->name, olo, ohi);
    }
    for (int k = 0; k < pg->n_results; k++) {
      const plan_result *q = &pg->results[k];
      if (q->is_view || q->inplace)
        continue;
      const fgl_dims *qd = &g->rdims[k];
      span(outputs[k].ptr, q->dtype, q->shape.rank, qd->sizes, qd->strides, qd->numel, &olo, &ohi);
      if (overlap(lo, hi, olo, ohi))
        return fgl_fail(err, FGL_ERR_MISMATCH,
                        "input %d ('%s') [0x%llx, 0x%llx), which result %d overwrites in place, "
                        "overlaps output %d [0x%llx, 0x%llx)",
                        pj, pg->params[pj].name, lo, hi, j, k, olo, ohi);
    }
  }
  return FGL_OK;
}

/* The kernels read their inputs while they write their outputs and assume
 * the two never share storage (the plan's view results are the loader's,
 * and are not checked): a written output that overlaps an input or another
 * written output is refused. */
static fgl_status check_no_overlap(const fgl_graph *g, const fgl_arg *inputs,
                                   const fgl_tensor *outputs, fgl_error *err) {
  const plan_graph *pg = g->pg;
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (r->is_view || r->inplace)
      continue;
    unsigned long long lo, hi, olo, ohi;
    const fgl_dims *rd = &g->rdims[j];
    span(outputs[j].ptr, r->dtype, r->shape.rank, rd->sizes, rd->strides, rd->numel, &lo, &hi);
    if (lo == hi)
      continue;
    for (int i = 0; i < pg->n_params; i++) {
      const plan_param *p = &pg->params[i];
      if (p->is_scalar)
        continue;
      const fgl_dims *pd = &g->pdims[i];
      span(inputs[i].tensor.ptr, p->dtype, p->shape.rank, pd->sizes, pd->strides, pd->numel, &olo,
           &ohi);
      if (overlap(lo, hi, olo, ohi))
        return fgl_fail(err, FGL_ERR_MISMATCH,
                        "output %d [0x%llx, 0x%llx) overlaps input %d ('%s') [0x%llx, 0x%llx): the "
                        "kernels assume "
                        "written outputs share no storage with inputs",
                        j, lo, hi, i, p->name, olo, ohi);
    }
    for (int k = 0; k < j; k++) {
      const plan_result *q = &pg->results[k];
      if (q->is_view || q->inplace)
        continue;
      const fgl_dims *qd = &g->rdims[k];
      span(outputs[k].ptr, q->dtype, q->shape.rank, qd->sizes, qd->strides, qd->numel, &olo, &ohi);
      if (overlap(lo, hi, olo, ohi))
        return fgl_fail(err, FGL_ERR_MISMATCH,
                        "output %d [0x%llx, 0x%llx) overlaps output %d [0x%llx, 0x%llx)", j, lo, hi,
                        k, olo, ohi);
    }
  }
  return check_inplace_overlap(g, inputs, outputs, err);
}

/* A scalar argument's 8 bytes as the kernel takes them: f64 for float
 * dtypes, i64 for the others, whichever field the caller filled. */
static fgl_status scalar_slot(const fgl_arg *a, const plan_param *p, int i,
                              unsigned long long *slot, fgl_error *err) {
  bool want_float = fgl_dtype_is_float(p->dtype);
  double f = a->f;
  int64_t v = a->i;
  if (a->value_kind == FGL_VALUE_INT && want_float)
    f = (double)a->i;
  if (a->value_kind == FGL_VALUE_FLOAT && !want_float) {
    double r = a->f; /* NaN fails every comparison */
    bool whole =
        r >= -9223372036854775808.0 && r < 9223372036854775808.0 && (double)(int64_t)r == r;
    if (!whole)
      return fgl_fail(err, FGL_ERR_MISMATCH,
                      "input %d ('%s'): the float value %g is not a whole number, for a %s "
                      "parameter (use fgl_arg_int)",
                      i, p->name, a->f, fgl_dtype_name(p->dtype));
    v = (int64_t)a->f;
  }
  if (a->value_kind != FGL_VALUE_BY_DTYPE && a->value_kind != FGL_VALUE_FLOAT &&
      a->value_kind != FGL_VALUE_INT)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "input %d ('%s'): value_kind %d is not an fgl_value_kind", i, p->name,
                    (int)a->value_kind);
  if (want_float)
    memcpy(slot, &f, 8);
  else
    memcpy(slot, &v, 8);
  return FGL_OK;
}

/* Launches kernel k of g's plan on stream s: the narrow pair (32-bit
 * indices) while sym 0 is small enough, and of a pair the vectorized entry
 * when its pointers are aligned (the plan has a narrow vec entry exactly
 * when it has a vec entry). A kernel over an empty domain is skipped.
 * *busy tells whether this run has launched a kernel on s before: then a
 * kernel-pdl kernel, which waits for it in the kernel, is launched with
 * programmatic stream serialization, so that its CTAs may start while that
 * one still runs (docs/artifact.md). */
static fgl_status launch(fgl_graph *g, int k, CUstream s, bool *busy, fgl_error *err) {
  const fgl_launch *l = &g->launches[k];
  if (l->grid[0] == 0)
    return FGL_OK;
  int v = l->fn[PLAN_ENTRY_NARROW] && g->slot_z[0] <= l->narrow_max ? PLAN_ENTRY_NARROW
                                                                    : PLAN_ENTRY_PLAIN;
  if (l->fn[PLAN_ENTRY_VEC]) {
    unsigned long long mask = l->vec_align - 1, bad = 0;
    for (int p = 0; p < l->n_vec_ptrs; p++)
      bad |= *l->vec_ptrs[p] & mask;
    if (!bad)
      v++;
  }
  const fgl_cuda_api *cu = g->m->cu;
  CUresult r;
  bool pdl = l->pdl && *busy && cu->cuLaunchKernelEx;
  if (pdl) {
    CUlaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c = {l->grid[0],  l->grid[1], l->grid[2], l->block[0], l->block[1],
                        l->block[2], l->smem,    s,          &a,          1};
    r = cu->cuLaunchKernelEx(&c, l->fn[v], l->params, NULL);
  } else
    r = cu->cuLaunchKernel(l->fn[v], l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                           l->block[2], l->smem, s, l->params, NULL);
  *busy = true;
  if (r == CUDA_SUCCESS)
    return FGL_OK;
  char t[200];
  return fgl_fail(err, FGL_ERR_CUDA, "graph '%s' kernel %d (%s): %s failed: %s", g->pg->name, k,
                  plan_kernel_entry(&g->pg->kernels[k], v),
                  pdl ? "cuLaunchKernelEx (programmatic launch)" : "cuLaunchKernel",
                  fgl_cuda_error_text(r, t, sizeof t));
}

fgl_status fgl_run(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_tensor *outputs,
                   int n_outputs, fgl_stream stream, fgl_error *err) {
  if (!g)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_run: graph is NULL");
  const plan_graph *pg = g->pg;
  if (n_inputs != pg->n_params || (n_inputs > 0 && !inputs))
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s' takes %d inputs, got %d%s", pg->name,
                    pg->n_params, n_inputs, n_inputs > 0 && !inputs ? " (inputs is NULL)" : "");
  if (n_outputs != pg->n_results || (n_outputs > 0 && !outputs))
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s' has %d results, got %d outputs%s", pg->name,
                    pg->n_results, n_outputs,
                    n_outputs > 0 && !outputs ? " (outputs is NULL)" : "");
  fgl_status st;
  /* Symbolic sizes: bind the syms, then evaluate the plan's formulas for
   * them (skipped when they are the last run's values). */
  if (pg->n_syms > 0 && ((st = fgl_bind(pg, inputs, n_inputs, g->slot_z, err)) != FGL_OK ||
                         (st = fgl_graph_evaluate(g, err)) != FGL_OK))
    return st;
  char who[160];
  for (int i = 0; i < pg->n_params; i++) {
    const plan_param *p = &pg->params[i];
    const fgl_arg *a = &inputs[i];
    if (p->is_scalar) {
      if (!a->is_scalar || a->scalar_dtype != p->dtype) {
        char got[200];
        if (a->is_scalar)
          snprintf(got, sizeof got, "a scalar %s", fgl_dtype_name(a->scalar_dtype));
        else
          fgl_fmt_dims(got, sizeof got, a->tensor.dtype, a->tensor.rank, a->tensor.sizes,
                       a->tensor.strides);
        return fgl_fail(err, FGL_ERR_MISMATCH, "input %d ('%s'): expected a scalar %s, got %s", i,
                        p->name, fgl_dtype_name(p->dtype), got);
      }
      st = scalar_slot(a, p, i, &g->slot_p[i], err);
      if (st != FGL_OK)
        return st;
      continue;
    }
    const fgl_dims *pd = &g->pdims[i];
    const char *why = a->is_scalar ? "scalar"
                                   : check_tensor(&a->tensor, p->dtype, p->shape.rank, pd->sizes,
                                                  pd->strides, pd->numel);
    if (why) {
      snprintf(who, sizeof who, "input %d ('%s')", i, p->name);
      if (a->is_scalar) {
        char want[200];
        fgl_fmt_dims(want, sizeof want, p->dtype, p->shape.rank, pd->sizes, pd->strides);
        return fgl_fail(err, FGL_ERR_MISMATCH, "%s: expected %s, got a scalar %s", who, want,
                        fgl_dtype_name(a->scalar_dtype));
      }
      return mismatch(err, who, why, &a->tensor, p->dtype, p->shape.rank, pd->sizes, pd->strides);
    }
    g->slot_p[i] = a->tensor.ptr;
  }
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (r->is_view)
      continue;
    const fgl_dims *rd = &g->rdims[j];
    if (r->inplace) { /* the caller passes the parameter only */
      const fgl_dims *pd = &g->pdims[r->inplace_param];
      for (int d = 0; d < r->shape.rank; d++)
        if (rd->sizes[d] != pd->sizes[d] || (rd->strides[d] != pd->strides[d] && rd->sizes[d] > 1))
          return fgl_fail(err, FGL_ERR_MISMATCH,
                          "graph '%s': result %d, written in place, does not have the shape and "
                          "strides of parameter %d ('%s')",
                          pg->name, j, r->inplace_param, pg->params[r->inplace_param].name);
      g->slot_r[j] = g->slot_p[r->inplace_param];
      continue;
    }
    const char *why =
        check_tensor(&outputs[j], r->dtype, r->shape.rank, rd->sizes, rd->strides, rd->numel);
    if (why) {
      snprintf(who, sizeof who, "output %d", j);
      return mismatch(err, who, why, &outputs[j], r->dtype, r->shape.rank, rd->sizes, rd->strides);
    }
    g->slot_r[j] = outputs[j].ptr;
  }
  if ((st = check_no_overlap(g, inputs, outputs, err)) != FGL_OK)
    return st;
  bool grow = false;
  if (pg->symbolic_temps && (st = fgl_check_temps(g, &grow, err)) != FGL_OK)
    return st;
  /* Everything checked: grow the temps that need it (before anything is
   * filled, so a failed allocation leaves the outputs as they were), fill
   * the views, then launch. */
  fgl_module *m = g->m;
  const fgl_cuda_api *cu = m->cu;
  int pushed = 0;
  if (pg->n_kernels > 0) {
    if ((st = fgl_ctx_enter(m, &pushed, err)) != FGL_OK)
      return st;
    if (grow && (st = fgl_grow_temps(g, (CUstream)stream, err)) != FGL_OK) {
      fgl_ctx_leave(m, pushed);
      return st;
    }
  }
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (!r->is_view && !r->inplace)
      continue;
    const fgl_dims *rd = &g->rdims[j];
    unsigned long long base = r->inplace            ? g->slot_p[r->inplace_param]
                              : r->base.kind == 'p' ? g->slot_p[r->base.index]
                                                    : g->slot_r[r->base.index];
    fgl_tensor *o = &outputs[j];
    o->ptr = base + (unsigned long long)fgl_dtype_bytes(r->dtype, g->roffset[j]);
    o->dtype = r->dtype;
    o->rank = r->shape.rank;
    memcpy(o->sizes, rd->sizes, sizeof o->sizes);
    memcpy(o->strides, rd->strides, sizeof o->strides);
  }
  if (pg->n_kernels == 0)
    return FGL_OK;
  st = FGL_OK;
  bool busy[2] = {false, false}; /* a kernel of this run launched on the stream */
  if (!g->side) {
    for (int k = 0; k < pg->n_kernels; k++)
      if ((st = launch(g, k, (CUstream)stream, &busy[0], err)) != FGL_OK)
        break;
    fgl_ctx_leave(m, pushed);
    return st;
  }
  /* Kernels on the second stream (kernel-stream): it waits for the
   * caller's stream up to here, takes its kernels first, in plan order,
   * then the caller's stream takes the rest and waits for it at the end,
   * so that the run completes on the caller's stream (and a capture of it
   * has both branches). The join is recorded even after a failed launch:
   * a capture must not be left forked. */
  CUresult r = cu->cuEventRecord(g->fork, (CUstream)stream);
  if (r == CUDA_SUCCESS)
    r = cu->cuStreamWaitEvent(g->side, g->fork, 0);
  if (r != CUDA_SUCCESS) {
    fgl_ctx_leave(m, pushed);
    return fgl_cuda_fail(m, err, r, "forking the graph's second stream");
  }
  for (int pass = 1; pass >= 0 && st == FGL_OK; pass--)
    for (int k = 0; k < pg->n_kernels && st == FGL_OK; k++)
      if (g->launches[k].stream == pass)
        st = launch(g, k, pass ? g->side : (CUstream)stream, &busy[pass], err);
  r = cu->cuEventRecord(g->join, g->side);
  if (r == CUDA_SUCCESS)
    r = cu->cuStreamWaitEvent((CUstream)stream, g->join, 0);
  if (r != CUDA_SUCCESS && st == FGL_OK)
    st = fgl_cuda_fail(m, err, r, "joining the graph's second stream");
  fgl_ctx_leave(m, pushed);
  return st;
}

void fgl_tensor_contiguous(fgl_tensor *t, fgl_devptr ptr, fgl_dtype dtype, int rank,
                           const int64_t *sizes) {
  memset(t, 0, sizeof *t);
  t->ptr = ptr;
  t->dtype = dtype;
  t->rank = rank;
  int64_t s = 1;
  for (int d = rank - 1; d >= 0 && d < FGL_MAX_RANK; d--) {
    t->sizes[d] = sizes[d];
    t->strides[d] = s;
    s *= sizes[d] > 0 ? sizes[d] : 1;
  }
}
