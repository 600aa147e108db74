/* The indexing ops: gather, take_along_dim, index_select (a copy through
 * the map of index.h), scatter_add and index_add (contributions summed
 * into a copy of the operand). An index outside [0, size) is clamped into
 * it, as the backend does (docs/format.md 5.11). */
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "interp_internal.h"

/* The element offsets of the index operand and of the data tensor (with
 * the index value at dim, clamped) at domain coordinate c. */
static void locate(const fg_index_map *m, const int64_t *c, const fg_tensor *idx,
                   const int64_t *ist, const int64_t *xst, int64_t *io, int64_t *xo) {
  int64_t o = 0;
  for (int i = 0; i < m->idx_rank; i++)
    if (m->idx_src[i] >= 0)
      o += c[m->idx_src[i]] * ist[i];
  *io = o;
  int64_t v = fg_index_clamp(fg_ix_load_i(idx->data, idx->dtype, o), m->size);
  o = 0;
  for (int i = 0; i < m->x_rank; i++)
    o += (m->x_src[i] == FG_INDEX_VALUE ? v : m->x_src[i] >= 0 ? c[m->x_src[i]] : 0) * xst[i];
  *xo = o;
}

/* Steps row-major coordinate c over sizes; false after the last. */
static bool next_coord(int64_t *c, const int64_t *sizes, int rank) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++c[d] < sizes[d])
      return true;
    c[d] = 0;
  }
  return false;
}

bool fg_interp_gather(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *x = fg_ix_in(cx, n, 0), *idx = fg_ix_in(cx, n, 1);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  fg_index_map m;
  fg_index_map_of(n, &m);
  int64_t ist[FG_MAX_RANK], xst[FG_MAX_RANK], c[FG_MAX_RANK] = {0};
  fg_ix_strides(idx->rank, idx->sizes, ist);
  fg_ix_strides(x->rank, x->sizes, xst);
  int es = fg_dtype_size(out->dtype);
  int64_t total = fg_tensor_numel(out);
  for (int64_t i = 0; i < total; i++, next_coord(c, out->sizes, out->rank)) {
    int64_t io, xo;
    locate(&m, c, idx, ist, xst, &io, &xo);
    memcpy((char *)out->data + i * es, (const char *)x->data + xo * es, (size_t)es);
  }
  return true;
}

/* Each element of the result is the operand's element plus the source
 * elements scattered to it, added in the order of the domain (row-major)
 * in the accumulation dtype of a reduction (f32 for floats up to 32 bits,
 * f64 for f64, i64 for integers and bool: 4.3), rounded to the dtype once
 * at the end. So the sum does not depend on how a GPU would schedule it. */
bool fg_interp_scatter_add(fg_interp_ctx *cx, const fg_node *n) {
  const fg_tensor *x = fg_ix_in(cx, n, 0), *idx = fg_ix_in(cx, n, 1), *src = fg_ix_in(cx, n, 2);
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  fg_index_map m;
  fg_index_map_of(n, &m);
  fg_dtype dt = out->dtype;
  bool is_float = fg_dtype_is_float(dt), in_f32 = is_float && dt != FG_F64;
  int64_t total = fg_tensor_numel(out);
  double *af = is_float ? malloc((size_t)(total ? total : 1) * sizeof *af) : NULL;
  int64_t *ai = is_float ? NULL : malloc((size_t)(total ? total : 1) * sizeof *ai);
  if (!af && !ai)
    return fg_ix_fail(cx, n, "out of memory");
  for (int64_t i = 0; i < total; i++) {
    if (af)
      af[i] = fg_ix_load_f(x->data, dt, i);
    else
      ai[i] = fg_ix_load_i(x->data, dt, i);
  }
  const fg_type *dom = fg_index_domain(n);
  int64_t dsz[FG_MAX_RANK], ist[FG_MAX_RANK], xst[FG_MAX_RANK], sst[FG_MAX_RANK];
  int64_t c[FG_MAX_RANK] = {0}, count = 1;
  for (int d = 0; d < dom->rank; d++)
    count *= dsz[d] = dom->dims[d].size;
  fg_ix_strides(idx->rank, idx->sizes, ist);
  fg_ix_strides(x->rank, x->sizes, xst);
  fg_ix_strides(src->rank, src->sizes, sst);
  for (int64_t i = 0; i < count; i++, next_coord(c, dsz, dom->rank)) {
    int64_t io, xo, so = 0;
    locate(&m, c, idx, ist, xst, &io, &xo);
    for (int d = 0; d < src->rank; d++) /* the domain's coordinate in src (its own or a prefix) */
      so += c[d] * sst[d];
    if (af) {
      double s = af[xo] + fg_ix_load_f(src->data, dt, so);
      af[xo] = in_f32 ? (double)(float)s : s;
    } else {
      ai[xo] = (int64_t)((uint64_t)ai[xo] + (uint64_t)fg_ix_load_i(src->data, dt, so));
    }
  }
  for (int64_t i = 0; i < total; i++) {
    if (af)
      fg_ix_store_f(out->data, dt, i, af[i]);
    else
      fg_ix_store_i(out->data, dt, i, ai[i]);
  }
  free(af);
  free(ai);
  return true;
}
