/* Creation ops and literals. Values are converted to the result dtype by the
 * spec's rules (a float value into an int dtype truncates, into a narrow
 * float rounds to nearest even). */
#include <string.h>

#include "interp_internal.h"

/* A literal as a 0-d tensor of its type. Pointwise ops read literals from
 * the attribute instead (full precision); this tensor serves the others. */
bool fg_interp_literal(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  fg_ix_store_attr(out->data, out->dtype, 0, &n->attrs[0]);
  return true;
}

bool fg_interp_full(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int64_t total = fg_tensor_numel(out);
  if (total == 0)
    return true;
  fg_ix_store_attr(out->data, out->dtype, 0, fg_node_attr(n, "value"));
  fg_ix_fill_from_first(out->data, out->dtype, total);
  return true;
}

bool fg_interp_iota(fg_interp_ctx *cx, const fg_node *n) {
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int64_t total = fg_tensor_numel(out);
  for (int64_t i = 0; i < total; i++)
    fg_ix_store_i(out->data, out->dtype, i, i);
  return true;
}
