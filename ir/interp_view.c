/* Shape and view ops. The interpreter materializes every value, so each view
 * is a copy: the op's map (view.c, the one definition of what a view op
 * does) is expressed as the operand's strides seen from the result's dims
 * (and a start offset), then one strided copy. Result shapes come from
 * inference (the result's type); cat and pad, which select, are here. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "interp_internal.h"
#include "view.h"

static int norm(int64_t d, int rank) { return (int)(d < 0 ? d + rank : d); }

static const fg_attr *ints(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  return a && a->kind == FG_ATTR_INTS ? a : NULL;
}

/* Copies the elements view node n's result k selects from `in` (dense)
 * into `out` (dense): the map of view.c as strides over in's storage. */
static bool copy_view(fg_interp_ctx *cx, const fg_node *n, int k, const fg_tensor *in,
                      fg_tensor *out) {
  fg_strided s = {.rank = in->rank}, t;
  memcpy(s.sizes, in->sizes, sizeof(int64_t) * (size_t)in->rank);
  fg_ix_strides(in->rank, in->sizes, s.strides);
  fg_view_map m;
  const char *why;
  if (n->op->code == FG_OP_SEGMENT_SET) { /* the identity */
    memset(&m, 0, sizeof m);
    m.reshape = true;
    m.out_rank = out->rank;
  } else if (!fg_view_map_of(n, k, in->sizes, out->sizes, &m, &why)) {
    return fg_ix_fail(cx, n, "%s", why);
  }
  if (!fg_strided_map(&m, &s, out->sizes, &t, &why)) /* a dense operand always maps */
    return fg_ix_fail(cx, n, "%s", why);
  int64_t dst[FG_MAX_RANK];
  fg_ix_strides(out->rank, out->sizes, dst);
  fg_ix_copy_strided(out->data, 0, dst, in->data, t.offset, t.strides, out->rank, out->sizes,
                     in->dtype);
  return true;
}

bool fg_interp_view(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *in = fg_ix_in(cx, n, 0);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  if (in->dtype != out->dtype)
    return fg_ix_fail(cx, n, "view changes the dtype");
  return copy_view(cx, n, 0, in, out);
}

/* Copies `in` into the box of `out` starting at `at` along `dim`, converting
 * elements when the dtypes differ (cat promotes its operands). */
static bool place(fg_interp_ctx *cx, const fg_node *n, fg_tensor *out, const fg_tensor *in, int dim,
                  int64_t at) {
  int64_t ost[FG_MAX_RANK], ist[FG_MAX_RANK];
  fg_ix_strides(out->rank, out->sizes, ost);
  fg_ix_strides(in->rank, in->sizes, ist);
  int64_t doff = at * ost[dim];
  if (in->dtype == out->dtype) {
    fg_ix_copy_strided(out->data, doff, ost, in->data, 0, ist, in->rank, in->sizes, out->dtype);
    return true;
  }
  fg_tensor tmp;
  if (!fg_tensor_alloc(&tmp, out->dtype, in->rank, in->sizes))
    return fg_ix_fail(cx, n, "out of memory");
  int64_t cnt = fg_tensor_numel(in);
  for (int64_t i = 0; i < cnt; i++)
    fg_ix_convert(tmp.data, tmp.dtype, i, in->data, in->dtype, i);
  fg_ix_copy_strided(out->data, doff, ost, tmp.data, 0, ist, in->rank, in->sizes, out->dtype);
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
  for (int i = 0; i < n->nout; i++) {
    fg_tensor *out = fg_ix_out(cx, n, i);
    if (!out || !copy_view(cx, n, i, in, out))
      return false;
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
  int64_t total = fg_tensor_numel(out);
  if (total > 0) {
    fg_ix_store_attr(out->data, out->dtype, 0, v);
    fg_ix_fill_from_first(out->data, out->dtype, total);
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
  fg_ix_copy_strided(out->data, doff, ost, in->data, soff, ist, in->rank, box, out->dtype);
  return true;
}
