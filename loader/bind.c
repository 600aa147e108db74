/* Symbolic sizes (plan version 2): binding a graph's syms from the sizes of
 * the tensors passed, and evaluating every formula of its plan for them —
 * shapes, view offsets, temps' byte counts, grids — with the checks that a
 * constant plan gets at load. Used by fgl_run (once per distinct binding:
 * an instance keeps the values of its last evaluation), fgl_graph_reserve
 * and the shape queries. Every failure is FGL_ERR_MISMATCH (the sizes
 * passed do not fit the artifact), but for a resident kernel's grid
 * larger than the GPU holds (FGL_ERR_UNSUPPORTED, as at creation). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define PUT(...)                                                                                   \
  do {                                                                                             \
    if (k < n) {                                                                                   \
      int w_ = snprintf(b + k, n - k, __VA_ARGS__);                                                \
      if (w_ > 0)                                                                                  \
        k += (size_t)w_;                                                                           \
    }                                                                                              \
  } while (0)

void fgl_fmt_dims(char *b, size_t n, fgl_dtype dt, int rank, const int64_t *sizes,
                  const int64_t *strides) {
  if (rank < 0 || rank > FGL_MAX_RANK) {
    snprintf(b, n, "%s with rank %d", fgl_dtype_name(dt), rank);
    return;
  }
  size_t k = 0;
  b[0] = 0;
  PUT("%s[", fgl_dtype_name(dt));
  for (int i = 0; i < rank; i++)
    PUT("%s%lld", i ? "," : "", (long long)sizes[i]);
  PUT("] strides [");
  for (int i = 0; i < rank; i++)
    PUT("%s%lld", i ? "," : "", (long long)strides[i]);
  PUT("]");
}

void fgl_fmt_plan_shape(char *b, size_t n, const plan_graph *pg, fgl_dtype dt,
                        const plan_shape *sh) {
  char t[32];
  size_t k = 0;
  b[0] = 0;
  PUT("%s[", fgl_dtype_name(dt));
  for (int i = 0; i < sh->rank; i++)
    PUT("%s%s", i ? "," : "", plan_expr_text(pg, &sh->sizes[i], t, sizeof t));
  PUT("] strides [");
  for (int i = 0; i < sh->rank; i++)
    PUT("%s%s", i ? "," : "", plan_expr_text(pg, &sh->strides[i], t, sizeof t));
  PUT("]");
}

/* " for B=2, T=128": the bound values, for messages. */
static const char *for_syms(const plan_graph *pg, const int64_t *vals, char *b, size_t n) {
  size_t k = 0;
  b[0] = 0;
  for (int s = 0; vals && s < pg->n_syms; s++)
    PUT("%s%s=%lld", s ? ", " : " for ", pg->syms[s].name, (long long)vals[s]);
  return b;
}
#undef PUT

/* "'T*4096' overflows int64 for T=..." */
static fgl_status eval_fail(fgl_error *err, const plan_graph *pg, const int64_t *vals,
                            const plan_expr *e, plan_eval_status st, const char *what) {
  char t[32], f[400];
  return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s': %s: '%s' %s%s", pg->name, what,
                  plan_expr_text(pg, e, t, sizeof t), plan_eval_status_text(st),
                  for_syms(pg, vals, f, sizeof f));
}

fgl_status fgl_bind(const plan_graph *pg, const fgl_arg *inputs, int n_inputs, int64_t *vals,
                    fgl_error *err) {
  if (n_inputs != pg->n_params || (n_inputs > 0 && !inputs))
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s' takes %d inputs, got %d%s", pg->name,
                    pg->n_params, n_inputs, n_inputs > 0 && !inputs ? " (inputs is NULL)" : "");
  /* the tensors whose sizes bind must be tensors of the right rank */
  for (int i = 0; i < pg->n_params; i++) {
    const plan_param *p = &pg->params[i];
    const fgl_arg *a = &inputs[i];
    if (p->is_scalar ||
        (!a->is_scalar && a->tensor.dtype == p->dtype && a->tensor.rank == p->shape.rank))
      continue;
    char want[300], got[200];
    fgl_fmt_plan_shape(want, sizeof want, pg, p->dtype, &p->shape);
    if (a->is_scalar)
      snprintf(got, sizeof got, "a scalar %s", fgl_dtype_name(a->scalar_dtype));
    else
      fgl_fmt_dims(got, sizeof got, a->tensor.dtype, a->tensor.rank, a->tensor.sizes,
                   a->tensor.strides);
    return fgl_fail(err, FGL_ERR_MISMATCH, "input %d ('%s'): expected %s, got %s", i, p->name, want,
                    got);
  }
  for (int k = 0; k < pg->n_binds; k++) {
    const plan_bind *b = &pg->binds[k];
    int64_t v = inputs[b->param].tensor.sizes[b->dim];
    if (b->first) {
      vals[b->sym] = v;
    } else if (vals[b->sym] != v) {
      const plan_sym *y = &pg->syms[b->sym];
      return fgl_fail(err, FGL_ERR_MISMATCH,
                      "size %s: parameter '%s' dim %d is %lld, but parameter '%s' dim %d bound %s "
                      "to %lld",
                      y->name, pg->params[b->param].name, b->dim, (long long)v,
                      pg->params[y->first_param].name, y->first_dim, y->name,
                      (long long)vals[b->sym]);
    }
  }
  return FGL_OK;
}

fgl_status fgl_check_facts(const plan_graph *pg, const int64_t *vals, fgl_error *err) {
  for (int s = 0; s < pg->n_syms; s++) {
    const plan_sym *y = &pg->syms[s];
    int64_t v = vals[s];
    if (v >= y->min && v <= y->max && (y->div == 1 || v % y->div == 0))
      continue;
    char where[300];
    snprintf(where, sizeof where, "size %s = %lld (parameter '%s' dim %d)", y->name, (long long)v,
             pg->params[y->first_param].name, y->first_dim);
    if (v < y->min || v > y->max)
      return fgl_fail(err, FGL_ERR_MISMATCH, "%s is outside %lld..%lld", where, (long long)y->min,
                      (long long)y->max);
    return fgl_fail(err, FGL_ERR_MISMATCH, "%s is not a multiple of %lld", where,
                    (long long)y->div);
  }
  return FGL_OK;
}

/* "parameter 1 ('x')", "result 0": what a message names (made only then). */
static const char *who_of(const plan_graph *pg, int param, int result, char *b, size_t n) {
  if (param >= 0)
    snprintf(b, n, "parameter %d ('%s')", param, pg->params[param].name);
  else
    snprintf(b, n, "result %d", result);
  return b;
}

/* Evaluates parameter `param`'s or result `result`'s shape (sizes from
 * `sym` where given) and checks its extent. */
static fgl_status eval_shape(const plan_graph *pg, const int64_t *vals, const plan_shape *sh,
                             const int *sym, fgl_dtype dt, int param, int result, fgl_dims *out,
                             fgl_error *err) {
  char who[300], what[320];
  plan_eval_status st;
  for (int d = 0; d < sh->rank; d++) {
    if (sym && sym[d] >= 0) {
      out->sizes[d] = vals[sym[d]];
    } else if ((st = plan_eval(pg, &sh->sizes[d], vals, &out->sizes[d])) != PLAN_EVAL_OK) {
      snprintf(what, sizeof what, "%s dim %d", who_of(pg, param, result, who, sizeof who), d);
      return eval_fail(err, pg, vals, &sh->sizes[d], st, what);
    }
    if ((st = plan_eval(pg, &sh->strides[d], vals, &out->strides[d])) != PLAN_EVAL_OK) {
      snprintf(what, sizeof what, "%s stride %d", who_of(pg, param, result, who, sizeof who), d);
      return eval_fail(err, pg, vals, &sh->strides[d], st, what);
    }
  }
  int64_t maxoff;
  /* (maxoff + 1) * size stays far inside int64: maxoff <= INT64_MAX / 16 */
  if (!plan_shape_extent(out->sizes, out->strides, sh->rank, &out->numel, &maxoff) ||
      (maxoff + 1) * fgl_dtype_size(dt) > INT64_MAX / 16) {
    char shape[300], f[400];
    fgl_fmt_dims(shape, sizeof shape, dt, sh->rank, out->sizes, out->strides);
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s': %s: %s is too large%s", pg->name,
                    who_of(pg, param, result, who, sizeof who), shape,
                    for_syms(pg, vals, f, sizeof f));
  }
  return FGL_OK;
}

fgl_status fgl_eval_param(const plan_graph *pg, const int64_t *vals, int i, fgl_dims *out,
                          fgl_error *err) {
  const plan_param *p = &pg->params[i];
  if (p->is_scalar) {
    memset(out, 0, sizeof *out);
    out->numel = 1;
    return FGL_OK;
  }
  return eval_shape(pg, vals, &p->shape, p->sym, p->dtype, i, -1, out, err);
}

fgl_status fgl_eval_result(const plan_graph *pg, const int64_t *vals, int j, fgl_dims *out,
                           int64_t *offset, fgl_error *err) {
  const plan_result *r = &pg->results[j];
  char who[32], f[400];
  fgl_status st = eval_shape(pg, vals, &r->shape, NULL, r->dtype, -1, j, out, err);
  if (st != FGL_OK)
    return st;
  *offset = 0;
  if (r->is_view) {
    plan_eval_status es = plan_eval(pg, &r->offset, vals, offset);
    if (es != PLAN_EVAL_OK) {
      snprintf(who, sizeof who, "result %d offset", j);
      return eval_fail(err, pg, vals, &r->offset, es, who);
    }
    if (*offset > PLAN_MAX_OFFSET)
      return fgl_fail(err, FGL_ERR_MISMATCH,
                      "graph '%s': result %d: view offset %lld is too large%s", pg->name, j,
                      (long long)*offset, for_syms(pg, vals, f, sizeof f));
  } else if (r->check_at_run && out->numel > 0) { /* an empty result writes nothing */
    for (int d = 0; d < r->shape.rank; d++)
      if (out->strides[d] == 0 && out->sizes[d] > 1)
        return fgl_fail(err, FGL_ERR_MISMATCH,
                        "graph '%s': result %d: a written result cannot have a zero stride (dim "
                        "%d, of size %lld%s)",
                        pg->name, j, d, (long long)out->sizes[d], for_syms(pg, vals, f, sizeof f));
  }
  return FGL_OK;
}

fgl_status fgl_check_view(const plan_graph *pg, const int64_t *vals, int j, const fgl_dims *view,
                          int64_t offset, const fgl_dims *base, fgl_error *err) {
  const plan_result *r = &pg->results[j];
  int brank = r->base.kind == 'p' ? pg->params[r->base.index].shape.rank
                                  : pg->results[r->base.index].shape.rank;
  int64_t bn, bmax, vn, vmax;
  plan_shape_extent(base->sizes, base->strides, brank, &bn, &bmax);
  plan_shape_extent(view->sizes, view->strides, r->shape.rank, &vn, &vmax);
  if (vn > 0 && (bn == 0 || offset + vmax > bmax)) {
    char f[400];
    return fgl_fail(err, FGL_ERR_MISMATCH,
                    "graph '%s': result %d: view (offset %lld, last element %lld) leaves its base "
                    "%c%d (last element %lld)%s",
                    pg->name, j, (long long)offset, (long long)(offset + vmax), r->base.kind,
                    r->base.index, (long long)bmax, for_syms(pg, vals, f, sizeof f));
  }
  return FGL_OK;
}

fgl_status fgl_eval_temp(const plan_graph *pg, const int64_t *vals, int t, int64_t *bytes,
                         fgl_error *err) {
  const plan_temp *tp = &pg->temps[t];
  char who[32], f[400];
  plan_eval_status st = plan_eval(pg, &tp->bytes, vals, bytes);
  if (st != PLAN_EVAL_OK) {
    snprintf(who, sizeof who, "temp %d bytes", t);
    return eval_fail(err, pg, vals, &tp->bytes, st, who);
  }
  if (*bytes > PLAN_MAX_TEMP_BYTES)
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s': temp %d: %lld bytes is too large%s",
                    pg->name, t, (long long)*bytes, for_syms(pg, vals, f, sizeof f));
  return FGL_OK;
}

fgl_status fgl_eval_grid(const plan_graph *pg, const int64_t *vals, int k, const long long *fit2,
                         unsigned grid[3], fgl_error *err) {
  const plan_kernel *pk = &pg->kernels[k];
  static const char axis[3] = {'x', 'y', 'z'};
  int64_t v[3];
  char who[300], f[400];
  for (int d = 0; d < 3; d++) {
    plan_eval_status st = plan_eval(pg, &pk->grid[d], vals, &v[d]);
    if (st != PLAN_EVAL_OK) {
      snprintf(who, sizeof who, "kernel %d (%s) grid %c", k, pk->entry, axis[d]);
      return eval_fail(err, pg, vals, &pk->grid[d], st, who);
    }
  }
  /* grid x 0: an empty domain, not launched (y and z may then be 0 too) */
  for (int d = 0; d < 3; d++) {
    int64_t lo = d == 0 || v[0] == 0 ? 0 : 1, hi = d == 0 ? 2147483647 : 65535;
    if (v[d] < lo || v[d] > hi)
      return fgl_fail(err, FGL_ERR_MISMATCH,
                      "graph '%s': kernel %d (%s): grid %c %lld is out of range [%lld, %lld]%s",
                      pg->name, k, pk->entry, axis[d], (long long)v[d], (long long)lo,
                      (long long)hi, for_syms(pg, vals, f, sizeof f));
  }
  if (pk->resident && v[0] > 0) {
    /* the entries fgl_run launches for these syms: the narrow ones while
     * sym 0 is at most the kernel-narrow line's max */
    bool narrow = pk->narrow_entry && vals[0] <= pk->narrow_max;
    long long fit = fit2[narrow];
    if (v[0] % pk->cluster || v[1] != 1 || v[2] != 1)
      return fgl_fail(err, FGL_ERR_MISMATCH,
                      "graph '%s': kernel %d (%s): grid %lldx%lldx%lld is not made of clusters of "
                      "%d%s",
                      pg->name, k, pk->entry, (long long)v[0], (long long)v[1], (long long)v[2],
                      pk->cluster, for_syms(pg, vals, f, sizeof f));
    if (fit != 0 && v[0] > (fit < 0 ? 0 : fit))
      return fgl_fail(err, FGL_ERR_UNSUPPORTED,
                      "graph '%s': kernel %d (%s): its %lld CTAs wait for one another, so all must "
                      "be resident at once, but this GPU holds %lld%s",
                      pg->name, k, narrow ? pk->narrow_entry : pk->entry, (long long)v[0],
                      fit < 0 ? 0 : fit, for_syms(pg, vals, f, sizeof f));
  }
  for (int d = 0; d < 3; d++)
    grid[d] = (unsigned)v[d];
  return FGL_OK;
}

fgl_status fgl_graph_evaluate(fgl_graph *g, fgl_error *err) {
  const plan_graph *pg = g->pg;
  const int64_t *vals = g->slot_z;
  size_t nb = (size_t)pg->n_syms * sizeof *vals;
  if (g->bound_valid && !memcmp(vals, g->bound, nb))
    return FGL_OK;
  g->bound_valid = false; /* until every array below holds these values */
  fgl_status st = fgl_check_facts(pg, vals, err);
  for (int i = 0; st == FGL_OK && i < pg->n_params; i++)
    if (!pg->params[i].is_scalar && pg->params[i].shape.symbolic)
      st = fgl_eval_param(pg, vals, i, &g->pdims[i], err);
  for (int j = 0; st == FGL_OK && j < pg->n_results; j++)
    if (pg->results[j].symbolic)
      st = fgl_eval_result(pg, vals, j, &g->rdims[j], &g->roffset[j], err);
  for (int j = 0; st == FGL_OK && j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (r->is_view && r->check_at_run)
      st = fgl_check_view(pg, vals, j, &g->rdims[j], g->roffset[j],
                          r->base.kind == 'p' ? &g->pdims[r->base.index] : &g->rdims[r->base.index],
                          err);
  }
  for (int t = 0; st == FGL_OK && t < pg->n_temps; t++)
    if (!plan_expr_const(&pg->temps[t].bytes))
      st = fgl_eval_temp(pg, vals, t, &g->temp_need[t], err);
  for (int k = 0; st == FGL_OK && k < pg->n_kernels; k++)
    if (pg->kernels[k].grid_symbolic)
      st = fgl_eval_grid(pg, vals, k, &g->m->resident_fit[g->gi][2 * k], g->launches[k].grid, err);
  if (st != FGL_OK)
    return st;
  memcpy(g->bound, vals, nb);
  g->bound_valid = true;
  return FGL_OK;
}

fgl_status fgl_check_temps(const fgl_graph *g, bool *grow, fgl_error *err) {
  const plan_graph *pg = g->pg;
  *grow = false;
  for (int t = 0; t < pg->n_temps; t++) {
    if (g->temp_need[t] <= g->temp_cap[t])
      continue;
    if (g->temp_mine[t]) {
      *grow = true;
      continue;
    }
    char f[400];
    return fgl_fail(err, FGL_ERR_MISMATCH,
                    "graph '%s': temp %d needs %lld bytes%s, but the storage the caller supplied "
                    "holds %lld",
                    pg->name, t, (long long)g->temp_need[t], for_syms(pg, g->slot_z, f, sizeof f),
                    (long long)g->temp_cap[t]);
  }
  return FGL_OK;
}

fgl_status fgl_grow_temps(fgl_graph *g, CUstream stream, fgl_error *err) {
  const plan_graph *pg = g->pg;
  const fgl_cuda_api *cu = g->m->cu;
  char t2[200];
  for (int t = 0; t < pg->n_temps; t++) {
    int64_t need = g->temp_need[t];
    if (need <= g->temp_cap[t] || !g->temp_mine[t])
      continue;
    if (!cu->cuMemAllocAsync || !cu->cuMemFreeAsync)
      return fgl_fail(err, FGL_ERR_UNSUPPORTED,
                      "graph '%s': temp %d's size depends on the graph's syms, and this CUDA "
                      "driver has no stream-ordered allocator (cuMemAllocAsync, CUDA 11.2)",
                      pg->name, t);
    CUresult r;
    if (g->temp_alloc[t]) {
      r = g->temp_async[t] ? cu->cuMemFreeAsync(g->temp_alloc[t], stream)
                           : cu->cuMemFree(g->temp_alloc[t]);
      if (r != CUDA_SUCCESS)
        return fgl_fail(err, FGL_ERR_CUDA, "graph '%s': freeing temp %d (to grow it) failed: %s",
                        pg->name, t, fgl_cuda_error_text(r, t2, sizeof t2));
    }
    g->temp_alloc[t] = 0;
    g->slot_t[t] = 0;
    g->temp_cap[t] = 0;
    unsigned long long a = (unsigned long long)pg->temps[t].align;
    CUdeviceptr p = 0;
    if ((r = cu->cuMemAllocAsync(&p, (size_t)need + (size_t)a, stream)) != CUDA_SUCCESS)
      return fgl_fail(err, FGL_ERR_CUDA, "graph '%s': allocating temp %d (%lld bytes) failed: %s",
                      pg->name, t, (long long)need, fgl_cuda_error_text(r, t2, sizeof t2));
    g->temp_alloc[t] = p;
    g->temp_async[t] = 1;
    g->slot_t[t] = (p + a - 1) & ~(a - 1);
    if (pg->temps[t].zero &&
        (r = cu->cuMemsetD8Async(g->slot_t[t], 0, (size_t)need, stream)) != CUDA_SUCCESS)
      return fgl_fail(err, FGL_ERR_CUDA, "graph '%s': zeroing temp %d failed: %s", pg->name, t,
                      fgl_cuda_error_text(r, t2, sizeof t2));
    g->temp_cap[t] = need;
  }
  return FGL_OK;
}
