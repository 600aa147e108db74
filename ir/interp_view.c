/* Shape and view ops. The interpreter materializes every value, so each view
 * is a copy: the op is expressed as the input's strides seen from the output
 * dims (and a start offset), then one strided copy. Output shapes come from
 * inference (the result's type); this file only decides where each output
 * element comes from. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "interp_internal.h"

static int norm(int64_t d, int rank) { return (int)(d < 0 ? d + rank : d); }

static const fg_attr *ints(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  return a && a->kind == FG_ATTR_INTS ? a : NULL;
}

/* Fills src strides (per output dim) and a start offset for a view op. */
static bool view_map(fg_interp_ctx *cx, const fg_node *n, const fg_tensor *in, const fg_tensor *out,
                     int64_t *sst, int64_t *start) {
  int64_t ist[FG_MAX_RANK];
  fg_ix_strides(in->rank, in->sizes, ist);
  int R = out->rank;
  *start = 0;
  for (int d = 0; d < R; d++)
    sst[d] = 0;
  switch (n->op->code) {
  case FG_OP_RESHAPE:
  case FG_OP_VIEW:
  case FG_OP_SQUEEZE:
  case FG_OP_UNSQUEEZE:
  case FG_OP_SEGMENT_SET:
    /* Row-major order is unchanged: the output is the input's bytes. */
    fg_ix_strides(R, out->sizes, sst);
    return true;
  case FG_OP_PERMUTE: {
    const fg_attr *p = ints(n, "dims");
    for (int d = 0; d < R; d++)
      sst[d] = ist[norm(p->ints[d], in->rank)];
    return true;
  }
  case FG_OP_TRANSPOSE: {
    int a = norm(fg_attr_int(n, "dim0"), in->rank), b = norm(fg_attr_int(n, "dim1"), in->rank);
    for (int d = 0; d < R; d++)
      sst[d] = ist[d];
    sst[a] = ist[b];
    sst[b] = ist[a];
    return true;
  }
  case FG_OP_BROADCAST_IN_DIM: {
    /* dims[i] is the output dim of input dim i; size 1 stretches. */
    const fg_attr *dm = ints(n, "dims");
    for (int i = 0; i < in->rank; i++) {
      int o = norm(dm->ints[i], R);
      sst[o] = in->sizes[i] == 1 && out->sizes[o] != 1 ? 0 : ist[i];
    }
    return true;
  }
  case FG_OP_EXPAND: {
    int lead = R - in->rank;
    for (int i = 0; i < in->rank; i++)
      sst[lead + i] = in->sizes[i] == 1 && out->sizes[lead + i] != 1 ? 0 : ist[i];
    return true;
  }
  case FG_OP_SLICE: {
    const fg_attr *st = ints(n, "starts"), *en = ints(n, "ends"), *sp = ints(n, "steps");
    for (int d = 0; d < R; d++) {
      int64_t step = sp ? sp->ints[d] : 1, s0, len;
      fg_slice_bounds(in->sizes[d], st->ints[d], en->ints[d], step, &s0, &len);
      if (len != out->sizes[d])
        return fg_ix_fail(cx, n, "slice of dim %d gives %lld elements, its type says %lld", d,
                          (long long)len, (long long)out->sizes[d]);
      *start += s0 * ist[d];
      sst[d] = ist[d] * step;
    }
    return true;
  }
  default:
    return fg_ix_fail(cx, n, "not a view op");
  }
}

bool fg_interp_view(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  if (in->dtype != out->dtype)
    return fg_ix_fail(cx, n, "view changes the dtype");
  int64_t sst[FG_MAX_RANK], dst[FG_MAX_RANK], start;
  if (!view_map(cx, n, in, out, sst, &start))
    return false;
  fg_ix_strides(out->rank, out->sizes, dst);
  int es = fg_dtype_size(in->dtype);
  fg_ix_copy_strided(out->data, dst, (const char *)in->data + start * es, sst, out->rank,
                     out->sizes, es);
  return true;
}

/* Copies `in` into the box of `out` starting at `at` along `dim`, converting
 * elements when the dtypes differ (cat promotes its operands). */
static bool place(fg_interp_ctx *cx, const fg_node *n, fg_tensor *out, const fg_tensor *in, int dim,
                  int64_t at) {
  int64_t ost[FG_MAX_RANK], ist[FG_MAX_RANK];
  fg_ix_strides(out->rank, out->sizes, ost);
  fg_ix_strides(in->rank, in->sizes, ist);
  int es = fg_dtype_size(out->dtype);
  char *dst = (char *)out->data + at * ost[dim] * es;
  if (in->dtype == out->dtype) {
    fg_ix_copy_strided(dst, ost, in->data, ist, in->rank, in->sizes, es);
    return true;
  }
  fg_tensor tmp;
  if (!fg_tensor_alloc(&tmp, out->dtype, in->rank, in->sizes))
    return fg_ix_fail(cx, n, "out of memory");
  int64_t cnt = fg_tensor_numel(in);
  for (int64_t i = 0; i < cnt; i++)
    fg_ix_convert(tmp.data, tmp.dtype, i, in->data, in->dtype, i);
  fg_ix_copy_strided(dst, ost, tmp.data, ist, in->rank, in->sizes, es);
  fg_tensor_free(&tmp);
  return true;
}

bool fg_interp_cat(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int dim = norm(fg_attr_int(n, "dim"), out->rank);
  int64_t at = 0;
  for (int i = 0; i < n->nin; i++) {
    const fg_tensor *in = fg_ix_in(cx, n, i);
    if (!place(cx, n, out, in, dim, at))
      return false;
    at += in->sizes[dim];
  }
  return true;
}

bool fg_interp_split(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  int dim = norm(fg_attr_int(n, "dim"), in->rank);
  int64_t ist[FG_MAX_RANK], ost[FG_MAX_RANK];
  fg_ix_strides(in->rank, in->sizes, ist);
  int es = fg_dtype_size(in->dtype);
  int64_t at = 0;
  for (int i = 0; i < n->nout; i++) {
    fg_tensor *out = fg_ix_out(cx, n, i);
    if (!out)
      return false;
    fg_ix_strides(out->rank, out->sizes, ost);
    fg_ix_copy_strided(out->data, ost, (const char *)in->data + at * ist[dim] * es, ist, out->rank,
                       out->sizes, es);
    at += out->sizes[dim];
  }
  return true;
}

/* pad=[lo0, hi0, lo1, hi1, ...] in dim order; a negative pad crops. The
 * output is filled with the value, then the overlapping box is copied. */
bool fg_interp_pad(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  const fg_attr *p = ints(n, "pad"), *v = fg_node_attr(n, "value");
  int es = fg_dtype_size(out->dtype);
  int64_t total = fg_tensor_numel(out);
  if (total > 0) {
    fg_ix_store_attr(out->data, out->dtype, 0, v);
    for (int64_t i = 1; i < total; i++)
      memcpy((char *)out->data + i * es, out->data, (size_t)es);
  }
  int64_t ist[FG_MAX_RANK], ost[FG_MAX_RANK], box[FG_MAX_RANK];
  fg_ix_strides(in->rank, in->sizes, ist);
  fg_ix_strides(out->rank, out->sizes, ost);
  int64_t soff = 0, doff = 0;
  for (int d = 0; d < in->rank; d++) {
    int64_t lo = p->ints[2 * d];
    int64_t s0 = lo < 0 ? -lo : 0, d0 = lo > 0 ? lo : 0;
    int64_t cnt = in->sizes[d] - s0;
    if (out->sizes[d] - d0 < cnt)
      cnt = out->sizes[d] - d0;
    if (cnt <= 0)
      return true; /* nothing of the input survives */
    box[d] = cnt;
    soff += s0 * ist[d];
    doff += d0 * ost[d];
  }
  fg_ix_copy_strided((char *)out->data + doff * es, ost, (const char *)in->data + soff * es, ist,
                     in->rank, box, es);
  return true;
}
