/* The interpreter's driver: the value map, tensors, element conversions,
 * and the loop that runs each node in definition order. Every value is
 * materialized as a dense row-major tensor; intermediates are freed after
 * their last use so that large graphs fit in memory. */
#include "interp_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VAL_NONE, VAL_BORROWED, VAL_OWNED };

/* ---- tensors ---- */

bool fg_tensor_alloc(fg_tensor *t, fg_dtype dt, int rank, const int64_t *sizes) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = rank;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (sizes[i] < 0)
      return false;
    t->sizes[i] = sizes[i];
    if (sizes[i] && n > INT64_MAX / 16 / sizes[i])
      return false;
    n *= sizes[i];
  }
  t->nbytes = (size_t)fg_dtype_nbytes(dt, n);
  /* calloc(0) may return NULL; keep a valid pointer for empty tensors. */
  t->data = calloc(t->nbytes ? t->nbytes : 1, 1);
  return t->data != NULL;
}

void fg_tensor_free(fg_tensor *t) {
  if (!t)
    return;
  free(t->data);
  t->data = NULL;
  t->nbytes = 0;
}

int64_t fg_tensor_numel(const fg_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= t->sizes[i];
  return n;
}

double fg_tensor_get_f(const fg_tensor *t, int64_t i) { return fg_ix_load_f(t->data, t->dtype, i); }
int64_t fg_tensor_get_i(const fg_tensor *t, int64_t i) {
  return fg_ix_load_i(t->data, t->dtype, i);
}
void fg_tensor_set_f(fg_tensor *t, int64_t i, double v) { fg_ix_store_f(t->data, t->dtype, i, v); }
void fg_tensor_set_i(fg_tensor *t, int64_t i, int64_t v) { fg_ix_store_i(t->data, t->dtype, i, v); }

/* ---- elements ---- */

void fg_ix_convert(void *dst, fg_dtype ddt, int64_t di, const void *src, fg_dtype sdt, int64_t si) {
  if (fg_dtype_is_float(sdt))
    fg_ix_store_f(dst, ddt, di, fg_ix_load_f(src, sdt, si));
  else
    fg_ix_store_i(dst, ddt, di, fg_ix_load_i(src, sdt, si));
}

void fg_ix_store_attr(void *data, fg_dtype dt, int64_t i, const fg_attr *a) {
  if (a->kind == FG_ATTR_FLOAT)
    fg_ix_store_f(data, dt, i, a->f);
  else
    fg_ix_store_i(data, dt, i, a->i);
}

/* ---- strided copies ---- */

void fg_ix_strides(int rank, const int64_t *sizes, int64_t *strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= sizes[d];
  }
}

/* An odometer over all dims but the last; the innermost dim is a tight loop
 * (memcpy when both sides are contiguous there). */
void fg_ix_copy_strided(void *dst, int64_t doff, const int64_t *dst_strides, const void *src,
                        int64_t soff, const int64_t *src_strides, int rank, const int64_t *sizes,
                        fg_dtype dt) {
  int64_t total = 1;
  for (int d = 0; d < rank; d++)
    total *= sizes[d];
  if (total == 0)
    return;
  bool packed = fg_dtype_is_packed(dt);
  int64_t esize = fg_dtype_size(dt);
  if (rank == 0) {
    if (packed)
      fg_ix_f4_set(dst, doff, fg_ix_f4_get(src, soff));
    else
      memcpy((char *)dst + doff * esize, (const char *)src + soff * esize, (size_t)esize);
    return;
  }
  int64_t inner = sizes[rank - 1], ds = dst_strides[rank - 1], ss = src_strides[rank - 1];
  int64_t idx[FG_MAX_RANK] = {0};
  for (int64_t done = 0; done < total; done += inner) {
    if (packed) {
      for (int64_t j = 0; j < inner; j++)
        fg_ix_f4_set(dst, doff + j * ds, fg_ix_f4_get(src, soff + j * ss));
    } else {
      char *d = (char *)dst + doff * esize;
      const char *s = (const char *)src + soff * esize;
      if (ds == 1 && ss == 1) {
        memcpy(d, s, (size_t)(inner * esize));
      } else {
        for (int64_t j = 0; j < inner; j++)
          memcpy(d + j * ds * esize, s + j * ss * esize, (size_t)esize);
      }
    }
    for (int k = rank - 2; k >= 0; k--) {
      doff += dst_strides[k];
      soff += src_strides[k];
      if (++idx[k] < sizes[k])
        break;
      doff -= dst_strides[k] * sizes[k];
      soff -= src_strides[k] * sizes[k];
      idx[k] = 0;
    }
  }
}

void fg_ix_fill_from_first(void *p, fg_dtype dt, int64_t n) {
  if (fg_dtype_is_packed(dt)) {
    for (int64_t i = 1; i < n; i++)
      fg_ix_f4_set(p, i, fg_ix_f4_get(p, 0));
    return;
  }
  int es = fg_dtype_size(dt);
  for (int64_t i = 1; i < n; i++)
    memcpy((char *)p + i * es, p, (size_t)es);
}

/* ---- context ---- */

bool fg_ix_fail(fg_interp_ctx *cx, const fg_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cx->err && cx->errcap) {
    if (n && n->loc.line > 0)
      snprintf(cx->err, cx->errcap, "%s:%d:%d: %s: %s", cx->g->name, n->loc.line, n->loc.col,
               n->op->name, msg);
    else if (n)
      snprintf(cx->err, cx->errcap, "%s: %s: %s", cx->g->name, n->op->name, msg);
    else
      snprintf(cx->err, cx->errcap, "%s: %s", cx->g->name, msg);
  }
  return false;
}

const fg_tensor *fg_ix_in(fg_interp_ctx *cx, const fg_node *n, int i) {
  return &cx->vals[n->in[i]->id];
}

fg_tensor *fg_ix_out(fg_interp_ctx *cx, const fg_node *n, int i) {
  const fg_value *v = n->out[i];
  if (!fg_type_is_static(&v->type)) {
    fg_ix_fail(cx, n, "result has symbolic dims (specialize the graph first)");
    return NULL;
  }
  int64_t sizes[FG_MAX_RANK];
  for (int d = 0; d < v->type.rank; d++)
    sizes[d] = v->type.dims[d].size;
  fg_tensor *t = &cx->vals[v->id];
  if (!fg_tensor_alloc(t, v->type.dtype, v->type.rank, sizes)) {
    fg_tensor_free(t);
    fg_ix_fail(cx, n, "out of memory allocating a %s tensor", fg_dtype_name(v->type.dtype));
    return NULL;
  }
  cx->state[v->id] = VAL_OWNED;
  return t;
}

bool fg_interp_pointwise(fg_interp_ctx *cx, const fg_node *n); /* interp_pointwise.c */

static bool check_input(fg_interp_ctx *cx, const fg_value *p, const fg_tensor *t) {
  char want[256];
  fg_type_str(&p->type, want, sizeof want);
  const char *name = p->name ? p->name : "?";
  if (!fg_type_is_static(&p->type))
    return fg_ix_fail(cx, NULL, "parameter '%s' has symbolic type %s (specialize the graph first)",
                      name, want);
  bool ok = t->dtype == p->type.dtype && t->rank == p->type.rank && t->data != NULL;
  for (int d = 0; ok && d < t->rank; d++)
    ok = t->sizes[d] == p->type.dims[d].size;
  if (ok)
    ok = t->nbytes >= (size_t)fg_dtype_nbytes(t->dtype, fg_tensor_numel(t));
  if (!ok)
    return fg_ix_fail(cx, NULL, "input for parameter '%s' does not match its type %s", name, want);
  return true;
}

static bool copy_tensor(fg_tensor *dst, const fg_tensor *src) {
  if (!fg_tensor_alloc(dst, src->dtype, src->rank, src->sizes))
    return false;
  memcpy(dst->data, src->data, dst->nbytes);
  return true;
}

static bool run_node(fg_interp_ctx *cx, const fg_node *n) {
  if (n->op->kind == FG_KIND_POINTWISE)
    return fg_interp_pointwise(cx, n);
  if (!n->op->interp)
    return fg_ix_fail(cx, n, "not supported by the reference interpreter");
  return n->op->interp(cx, n);
}

bool fg_interp_run(const fg_graph *g, const fg_tensor *inputs, fg_tensor *outputs, char *err,
                   size_t errcap) {
  fg_interp_ctx cx = {.g = g, .err = err, .errcap = errcap};
  if (err && errcap)
    err[0] = 0;
  for (int i = 0; i < g->nresults; i++)
    outputs[i] = (fg_tensor){0};
  int nv = g->next_value_id;
  cx.vals = calloc((size_t)nv + 1, sizeof *cx.vals);
  cx.state = calloc((size_t)nv + 1, 1);
  int *last = malloc(((size_t)nv + 1) * sizeof *last);
  int *moved = malloc(((size_t)nv + 1) * sizeof *moved);
  bool ok = cx.vals && cx.state && last && moved;
  if (!ok)
    fg_ix_fail(&cx, NULL, "out of memory");

  /* Last use of each value, by node index; results live to the end. */
  if (ok) {
    for (int i = 0; i <= nv; i++)
      last[i] = -1, moved[i] = -1;
    int idx = 0;
    for (const fg_node *n = g->first; n; n = n->next, idx++)
      for (int i = 0; i < n->nin; i++)
        last[n->in[i]->id] = idx;
    for (int i = 0; i < g->nresults; i++)
      last[g->results[i]->id] = INT_MAX;
  }
  for (int i = 0; ok && i < g->nparams; i++) {
    const fg_value *p = g->params[i];
    ok = check_input(&cx, p, &inputs[i]);
    if (ok) {
      cx.vals[p->id] = inputs[i];
      cx.state[p->id] = VAL_BORROWED;
    }
  }
  int idx = 0;
  for (const fg_node *n = g->first; ok && n; n = n->next, idx++) {
    ok = run_node(&cx, n);
    if (!ok)
      break;
    for (int i = 0; i < n->nin; i++) {
      int id = n->in[i]->id;
      if (last[id] == idx && cx.state[id] == VAL_OWNED) {
        fg_tensor_free(&cx.vals[id]);
        cx.state[id] = VAL_NONE;
      }
    }
    for (int i = 0; i < n->nout; i++) {
      int id = n->out[i]->id;
      if (last[id] < 0 && cx.state[id] == VAL_OWNED) {
        fg_tensor_free(&cx.vals[id]);
        cx.state[id] = VAL_NONE;
      }
    }
  }
  /* Hand results over: an owned tensor moves (once); parameters and repeated
   * results are copied, so the caller owns every output separately. */
  for (int i = 0; ok && i < g->nresults; i++) {
    int id = g->results[i]->id;
    if (cx.state[id] == VAL_OWNED && moved[id] < 0) {
      outputs[i] = cx.vals[id];
      moved[id] = i;
      cx.state[id] = VAL_NONE; /* the output owns it now */
    } else {
      const fg_tensor *src = moved[id] >= 0 ? &outputs[moved[id]] : &cx.vals[id];
      if (!src->data) {
        ok = fg_ix_fail(&cx, NULL, "result %d was never computed", i);
      } else if (!copy_tensor(&outputs[i], src)) {
        ok = fg_ix_fail(&cx, NULL, "out of memory copying result %d", i);
      }
    }
  }
  if (!ok)
    for (int i = 0; i < g->nresults; i++)
      fg_tensor_free(&outputs[i]);
  for (int id = 0; cx.vals && cx.state && id <= nv; id++)
    if (cx.state[id] == VAL_OWNED)
      fg_tensor_free(&cx.vals[id]);
  free(cx.vals);
  free(cx.state);
  free(last);
  free(moved);
  return ok;
}
