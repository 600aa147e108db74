/* fgl_run: validation against the plan, views, and the launches. Allocates
 * nothing and never synchronizes (capture-safe). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* "bf16[4096,64] strides [64,1]" */
static void fmt_shape(char *b, size_t n, fgl_dtype dt, int rank, const int64_t *sizes, const int64_t *strides) {
  if (rank < 0 || rank > FGL_MAX_RANK) {
    snprintf(b, n, "%s with rank %d", fgl_dtype_name(dt), rank);
    return;
  }
  size_t k = 0;
#define PUT(...)                                    \
  do {                                              \
    if (k < n) {                                    \
      int w_ = snprintf(b + k, n - k, __VA_ARGS__); \
      if (w_ > 0) k += (size_t)w_;                  \
    }                                               \
  } while (0)
  PUT("%s[", fgl_dtype_name(dt));
  for (int i = 0; i < rank; i++) PUT("%s%lld", i ? "," : "", (long long)sizes[i]);
  PUT("] strides [");
  for (int i = 0; i < rank; i++) PUT("%s%lld", i ? "," : "", (long long)strides[i]);
  PUT("]");
#undef PUT
}

/* Checks a caller tensor against the plan's description. Returns NULL or a
 * short reason; the caller formats the full message. */
static const char *check_tensor(const fgl_tensor *t, fgl_dtype dt, int rank, const int64_t *sizes,
                                const int64_t *strides, int64_t numel) {
  if (t->dtype != dt || t->rank != rank) return "mismatch";
  for (int d = 0; d < rank; d++)
    if (t->sizes[d] != sizes[d]) return "mismatch";
  if (numel > 0) {
    for (int d = 0; d < rank; d++)
      if (sizes[d] != 1 && t->strides[d] != strides[d]) return "mismatch";
    if (!t->ptr) return "null pointer";
    if (t->ptr & (unsigned long long)(fgl_dtype_size(dt) - 1)) return "misaligned";
  }
  return NULL;
}

static fgl_status mismatch(fgl_error *err, const char *who, const char *why, const fgl_tensor *t, fgl_dtype dt,
                           int rank, const int64_t *sizes, const int64_t *strides) {
  char want[200], got[200];
  fmt_shape(want, sizeof want, dt, rank, sizes, strides);
  if (!strcmp(why, "null pointer"))
    return fgl_fail(err, FGL_ERR_MISMATCH, "%s: NULL device pointer for %s", who, want);
  if (!strcmp(why, "misaligned"))
    return fgl_fail(err, FGL_ERR_MISMATCH, "%s: pointer 0x%llx is not aligned to %d bytes (%s)", who, t->ptr,
                    fgl_dtype_size(dt), fgl_dtype_name(dt));
  fmt_shape(got, sizeof got, t->dtype, t->rank, t->sizes, t->strides);
  return fgl_fail(err, FGL_ERR_MISMATCH, "%s: expected %s, got %s", who, want, got);
}

fgl_status fgl_run(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_tensor *outputs, int n_outputs,
                   fgl_stream stream, fgl_error *err) {
  if (!g) return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_run: graph is NULL");
  const plan_graph *pg = g->pg;
  if (n_inputs != pg->n_params || (n_inputs > 0 && !inputs))
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s' takes %d inputs, got %d%s", pg->name, pg->n_params, n_inputs,
                    n_inputs > 0 && !inputs ? " (inputs is NULL)" : "");
  if (n_outputs != pg->n_results || (n_outputs > 0 && !outputs))
    return fgl_fail(err, FGL_ERR_MISMATCH, "graph '%s' has %d results, got %d outputs%s", pg->name, pg->n_results,
                    n_outputs, n_outputs > 0 && !outputs ? " (outputs is NULL)" : "");
  char who[160];
  for (int i = 0; i < pg->n_params; i++) {
    const plan_param *p = &pg->params[i];
    const fgl_arg *a = &inputs[i];
    if (p->is_scalar) {
      if (!a->is_scalar || a->scalar_dtype != p->dtype) {
        char got[200];
        if (a->is_scalar) snprintf(got, sizeof got, "a scalar %s", fgl_dtype_name(a->scalar_dtype));
        else fmt_shape(got, sizeof got, a->tensor.dtype, a->tensor.rank, a->tensor.sizes, a->tensor.strides);
        return fgl_fail(err, FGL_ERR_MISMATCH, "input %d ('%s'): expected a scalar %s, got %s", i, p->name,
                        fgl_dtype_name(p->dtype), got);
      }
      if (fgl_dtype_is_float(p->dtype)) memcpy(&g->slot_p[i], &a->f, 8);
      else memcpy(&g->slot_p[i], &a->i, 8);
      continue;
    }
    const char *why = a->is_scalar ? "scalar" : check_tensor(&a->tensor, p->dtype, p->rank, p->sizes, p->strides, p->numel);
    if (why) {
      snprintf(who, sizeof who, "input %d ('%s')", i, p->name);
      if (a->is_scalar) {
        char want[200];
        fmt_shape(want, sizeof want, p->dtype, p->rank, p->sizes, p->strides);
        return fgl_fail(err, FGL_ERR_MISMATCH, "%s: expected %s, got a scalar %s", who, want, fgl_dtype_name(a->scalar_dtype));
      }
      return mismatch(err, who, why, &a->tensor, p->dtype, p->rank, p->sizes, p->strides);
    }
    g->slot_p[i] = a->tensor.ptr;
  }
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (r->is_view) continue;
    const char *why = check_tensor(&outputs[j], r->dtype, r->rank, r->sizes, r->strides, r->numel);
    if (why) {
      snprintf(who, sizeof who, "output %d", j);
      return mismatch(err, who, why, &outputs[j], r->dtype, r->rank, r->sizes, r->strides);
    }
    g->slot_r[j] = outputs[j].ptr;
  }
  /* Everything checked: fill the views, then launch. */
  for (int j = 0; j < pg->n_results; j++) {
    const plan_result *r = &pg->results[j];
    if (!r->is_view) continue;
    unsigned long long base = r->base.kind == 'p' ? g->slot_p[r->base.index] : g->slot_r[r->base.index];
    fgl_tensor *o = &outputs[j];
    o->ptr = base + (unsigned long long)r->offset * (unsigned long long)fgl_dtype_size(r->dtype);
    o->dtype = r->dtype;
    o->rank = r->rank;
    memcpy(o->sizes, r->sizes, sizeof o->sizes);
    memcpy(o->strides, r->strides, sizeof o->strides);
  }
  if (pg->n_kernels == 0) return FGL_OK;
  fgl_module *m = g->m;
  const fgl_cuda_api *cu = m->cu;
  int pushed = 0;
  fgl_status st = fgl_ctx_enter(m, &pushed, err);
  if (st != FGL_OK) return st;
  for (int k = 0; k < pg->n_kernels; k++) {
    const fgl_launch *l = &g->launches[k];
    if (l->grid[0] == 0) continue; /* an empty domain: nothing to compute */
    CUfunction fn = l->fn;
    if (l->vec_fn) {
      unsigned long long mask = l->vec_align - 1, bad = 0;
      for (int v = 0; v < l->n_vec_ptrs; v++) bad |= *l->vec_ptrs[v] & mask;
      if (!bad) fn = l->vec_fn;
    }
    CUresult r = cu->cuLaunchKernel(fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                                    l->smem, (CUstream)stream, l->params, NULL);
    if (r != CUDA_SUCCESS) {
      fgl_ctx_leave(m, pushed);
      char t[200];
      return fgl_fail(err, FGL_ERR_CUDA, "graph '%s' kernel %d (%s): cuLaunchKernel failed: %s", pg->name, k,
                      fn == l->vec_fn ? pg->kernels[k].vec_entry : pg->kernels[k].entry,
                      fgl_cuda_error_text(r, t, sizeof t));
    }
  }
  fgl_ctx_leave(m, pushed);
  return FGL_OK;
}

void fgl_tensor_contiguous(fgl_tensor *t, fgl_devptr ptr, fgl_dtype dtype, int rank, const int64_t *sizes) {
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
