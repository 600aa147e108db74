/* Bookending (nvFuser's MarkAliasesPrepare): view ops between the
 * parameters and the first computation, and between the last computation
 * and the results, leave the kernels.
 *
 * With this pass (the default), segmentation returns every result that is
 * a chain of views of a parameter or of another result as a strided view
 * (no kernel, no copy), lets a kernel write a value into the buffer of a
 * result that is a dense view of it (a cat beside its reduction), and the
 * backend loads every chain of views from memory through one composed
 * strided access. Vectorization is decided afterwards on the innermost
 * extent of the kernel's domain, whatever the views' expanded (stride 0)
 * dims: bookending an expanded weight never costs vector width
 * (tests/golden/opt/bookend_vec.fg).
 *
 * Without it (--disable-pass=bookend), kernels apply view ops as index
 * arithmetic and every result is written by a kernel: the reference point
 * for measuring what bookending buys. The pass rewrites nothing: it marks
 * the graph, and segmentation and lowering honour the mark. */
#include "passes.h"

bool fg_pass_bookend(fg_graph *g, fg_diag *d) {
  (void)d;
  g->bookend = true;
  return true;
}
