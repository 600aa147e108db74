/* In-place results (`return v -> p`, docs/format.md 6.1): a result whose
 * storage is a parameter's buffer. Segmentation plans such a result as a
 * written result (r<I> in the kernels' arguments; the artifact says the
 * loader passes parameter J's address for it, docs/artifact.md); this file
 * decides how it is written and proves that the write races with no read:
 *
 *   unchanged  the result is the parameter itself: nothing is written;
 *   direct     the kernel W that computes the result writes it: W is a
 *              pointwise kernel over the parameter's shape, every read of
 *              the parameter in W is at the element being written (only
 *              pointwise ops of that shape between the load and the
 *              output: the same thread loads element e before it stores
 *              e, as emit_pointwise emits every load before any store of
 *              such a kernel), and no kernel after W reads the parameter;
 *   staged     otherwise: the result is computed into a temp
 *              (segment_set) and a copy (contiguous) writes it, placed last
 *              in the graph so that its kernel comes after the readers;
 *              the same proof must then hold for the copy's kernel.
 *
 * When neither proof holds, or another result is a view of the parameter
 * (it would see the update), it is a compile error, never a race. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "inplace.h"

const char *fg_inplace_mode_name(fg_inplace_mode m) {
  return m == FG_INPLACE_UNCHANGED ? "unchanged"
         : m == FG_INPLACE_DIRECT  ? "direct"
         : m == FG_INPLACE_STAGED  ? "staged"
                                   : "none";
}

static bool same_dims(const fg_type *t, int rank, const int64_t *dims) {
  if (t->scalar || t->rank != rank)
    return false;
  for (int d = 0; d < rank; d++)
    if (t->dims[d].size != dims[d])
      return false;
  return true;
}

static bool same_shape(const fg_type *a, const fg_type *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (!fg_dim_eq(a->dims[d], b->dims[d]))
      return false;
  return true;
}

/* Whether some other result shares v or is v's base: then v needs a
 * writer of its own (a copy). */
static bool shared_result(const fg_graph *g, int i) {
  for (int k = 0; k < g->nresults; k++)
    if (k != i && g->results[k] == g->results[i])
      return true;
  return false;
}

/* Whether v is a parameter or only view ops of parameters (a result
 * segmentation would return as a view rather than write). */
static bool view_of_params(const fg_value *v) {
  while (v->def && v->def->op->kind == FG_KIND_VIEW && v->def->nin >= 1)
    v = v->def->in[0];
  return v->param_index >= 0;
}

bool fg_inplace_prepare(fg_graph *g, const char *const *staged, fg_diag *d) {
  if (!g->result_into)
    return true;
  fg_node *save = g->insert_point;
  g->insert_point = NULL; /* append: the copies come after everything */
  bool ok = true;
  for (int i = 0; i < g->nresults && ok; i++) {
    int pi = fg_result_into(g, i);
    fg_value *v = g->results[i];
    if (pi < 0 || v == g->params[pi])
      continue;
    fg_loc loc = g->result_into_locs[i];
    bool stage = staged && staged[i];
    if (!stage && !shared_result(g, i) && !view_of_params(v))
      continue;
    if (stage && !(v->param_index >= 0 || (v->def && v->def->op->kind == FG_KIND_LITERAL)))
      v = fgo_unary(g, FG_OP_SEGMENT_SET, v, loc, d);
    if (v)
      v = fgo_unary(g, FG_OP_CONTIGUOUS, v, loc, d);
    if (!v) {
      ok = false;
      break;
    }
    g->results[i] = v;
  }
  g->insert_point = save;
  return ok;
}

/* ---- the proof ---- */

typedef struct walk {
  const fg_plan *p;
  const fg_kernel *k;
  int param;
  unsigned char *seen; /* bit 1: visited exact, bit 2: visited not exact */
  const char *why;
} walk;

/* Whether kernel k reads parameter `param` only at the element it is
 * computing, from value v (computed at the kernel's index when exact). */
static bool reads_same_index(walk *w, const fg_value *v, bool exact) {
  unsigned char bit = exact ? 1 : 2;
  if (w->seen[v->id] & bit)
    return true;
  w->seen[v->id] |= bit;
  if (v->param_index >= 0) {
    if (v->param_index == w->param && !exact) {
      w->why = "the kernel that computes it reads the parameter at other elements";
      return false;
    }
    return true;
  }
  if (fg_plan_in_memory(w->p, v, w->k->id))
    return true; /* another kernel's stored value: not this parameter */
  const fg_node *n = v->def;
  bool pointwise = n->op->kind == FG_KIND_POINTWISE || n->op->code == FG_OP_CONTIGUOUS ||
                   n->op->code == FG_OP_SEGMENT_SET;
  for (int i = 0; i < n->nin; i++) {
    const fg_value *u = n->in[i];
    bool e = exact && pointwise && (u->type.scalar || same_shape(&u->type, &v->type));
    if (!reads_same_index(w, u, e))
      return false;
  }
  return true;
}

static int writer_of(const fg_plan *p, int result) {
  for (int k = 0; k < p->nkernels; k++)
    for (int j = 0; j < p->kernels[k].nouts; j++) {
      fg_buf_ref b = p->store[p->kernels[k].outs[j]->id].buf;
      if (b.kind == FG_BUF_RESULT && b.index == result)
        return k;
    }
  return -1;
}

static bool uses_param(const fg_kernel *k, int param) {
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == FG_BUF_PARAM && k->args[i].index == param)
      return true;
  return false;
}

/* Whether result i can be written directly by its kernel; else *why says
 * what stands in the way. */
static bool direct_ok(const fg_plan *p, int i, const char **why) {
  const fg_graph *g = p->g;
  int pi = g->result_into[i];
  int wk = writer_of(p, i);
  if (wk < 0) {
    *why = "no kernel writes it";
    return false;
  }
  const fg_kernel *k = &p->kernels[wk];
  const fg_value *pv = g->params[pi];
  if (k->kind != FG_KERNEL_POINTWISE) {
    *why = "it is computed by a reduction kernel";
    return false;
  }
  int64_t dims[FG_MAX_RANK];
  for (int d = 0; d < pv->type.rank; d++)
    dims[d] = pv->type.dims[d].size;
  if (!same_dims(&g->results[i]->type, k->rank, k->dims) || k->rank != pv->type.rank ||
      (k->rank && memcmp(k->dims, dims, sizeof(int64_t) * (size_t)k->rank))) {
    *why = "its kernel's domain is not the parameter's shape";
    return false;
  }
  walk w = {p, k, pi, calloc((size_t)g->next_value_id + 1, 1), NULL};
  if (!w.seen) {
    *why = "out of memory";
    return false;
  }
  bool ok = true;
  for (int o = 0; o < k->nouts && ok; o++)
    ok = reads_same_index(&w, k->outs[o], same_dims(&k->outs[o]->type, k->rank, k->dims));
  free(w.seen);
  if (!ok) {
    *why = w.why;
    return false;
  }
  for (int later = wk + 1; later < p->nkernels; later++)
    if (uses_param(&p->kernels[later], pi)) {
      enum { WHY_CAP = 96 };
      char *b = fg_arena_alloc(&p->g->arena, WHY_CAP);
      snprintf(b, WHY_CAP, "kernel k%d reads the parameter after k%d writes it", later, wk);
      *why = b;
      return false;
    }
  return true;
}

bool fg_inplace_decide(fg_plan *p, const char **staged, bool final, fg_diag *d) {
  fg_graph *g = p->g;
  bool all = true;
  for (int i = 0; i < g->nresults; i++) {
    fg_result_plan *r = &p->results[i];
    int pi = fg_result_into(g, i);
    r->into = pi;
    if (pi < 0)
      continue;
    /* a view of the parameter would see the update */
    for (int k = 0; k < g->nresults; k++)
      if (k != i && p->results[k].is_view && p->results[k].base.kind == FG_BUF_PARAM &&
          p->results[k].base.index == pi) {
        fg_error(d, g->result_locs[k],
                 "result %d is a view of parameter '%s', which result %d overwrites in place; "
                 "return a copy (contiguous) instead",
                 k, g->params[pi]->name, i);
        return false;
      }
    if (r->is_view) {
      if (r->base.kind == FG_BUF_PARAM && r->base.index == pi && r->view.offset == 0) {
        r->inplace = FG_INPLACE_UNCHANGED;
        continue;
      }
      fg_internal_error(d, g->result_locs[i], "in-place result %d was planned as a view", i);
      return false;
    }
    const char *why = NULL;
    if (direct_ok(p, i, &why)) {
      r->inplace = staged && staged[i] ? FG_INPLACE_STAGED : FG_INPLACE_DIRECT;
      r->inplace_why = staged ? staged[i] : NULL;
      continue;
    }
    if (final || (staged && staged[i])) {
      fg_error(d, g->result_into_locs[i],
               "cannot write result %d into parameter '%s' without a race: %s, even when it is "
               "staged through a temp",
               i, g->params[pi]->name, why);
      return false;
    }
    staged[i] = why;
    all = false;
  }
  return all;
}
