/* Symbolic sizes in the code generator: the placeholder and the proof that
 * it never reaches the code (symbolic.h). */
#include "symbolic.h"

#include <stdio.h>
#include <string.h>

#include "infer.h"
#include "plan.h"

/* Primes near 10^6: large enough that the scheduler treats T as many rows
 * (one CTA a row, no split), small enough that T times the other dims
 * stays far from int64's limit. */
static const int64_t PLACEHOLDERS[] = {1000003, 1000033, 1000037, 1000039};

/* Whether a static dim of g (a parameter's or a value's) reaches q: a
 * product of static dims can be a multiple of the prime q only then. */
static bool collides(const fg_graph *g, int64_t q) {
  for (int i = 0; i < g->nparams; i++)
    for (int d = 0; d < g->params[i]->type.rank; d++)
      if (!g->params[i]->type.dims[d].sym && g->params[i]->type.dims[d].size >= q)
        return true;
  for (const fg_node *n = g->first; n; n = n->next)
    for (int o = 0; o < n->nout; o++)
      for (int d = 0; d < n->out[o]->type.rank; d++)
        if (!n->out[o]->type.dims[d].sym && n->out[o]->type.dims[d].size >= q)
          return true;
  return false;
}

fg_graph *fg_sym_lower(fg_graph *g, fg_sym_lowering *out, fg_diag *d) {
  memset(out, 0, sizeof *out);
  const fg_value *first = NULL;
  for (int i = 0; i < g->nparams; i++) {
    const fg_value *p = g->params[i];
    for (int k = 0; k < p->type.rank; k++) {
      const char *s = p->type.dims[k].sym;
      if (!s)
        continue;
      if (k != 0) {
        fg_error(d, p->loc,
                 "parameter '%s': the code generator takes a symbolic size only as the leading "
                 "dim (here '%s' is dim %d; write it first, or bind it with a literal)",
                 p->name, s, k);
        return NULL;
      }
      if (first && strcmp(s, out->name) != 0) {
        fg_error(d, p->loc,
                 "parameter '%s': the code generator takes one symbolic size a graph ('%s' of "
                 "parameter '%s' and '%s' here; fold them into one leading dim)",
                 p->name, out->name, first->name, s);
        return NULL;
      }
      if (!first) {
        first = p;
        out->name = s;
      }
    }
  }
  if (!first)
    return g;
  out->n = 1;
  const fg_sym *f = fg_graph_sym(g, out->name);
  out->min = f ? f->min : FG_SYM_DEFAULT_MIN;
  out->max = f ? f->max : FG_SYM_DEFAULT_MAX;
  out->div = f ? f->div : 1;
  for (size_t i = 0; i < sizeof PLACEHOLDERS / sizeof *PLACEHOLDERS; i++)
    if (!collides(g, PLACEHOLDERS[i])) {
      out->placeholder = PLACEHOLDERS[i];
      break;
    }
  if (!out->placeholder) {
    fg_error(d, first->loc,
             "a static dim of graph '%s' is too large to compile it with symbolic size '%s'",
             g->name, out->name);
    return NULL;
  }
  return fg_graph_bind_stand_in(g, out->name, out->placeholder, d);
}

bool fg_sym_involves(const fg_sym_lowering *s, int64_t extent) {
  return s && s->n && extent != 0 && extent % s->placeholder == 0;
}

int64_t fg_sym_at_max(const fg_sym_lowering *s, int64_t extent) {
  if (!fg_sym_involves(s, extent))
    return extent;
  int64_t q = extent / s->placeholder;
  return q > INT64_MAX / s->max ? INT64_MAX : q * s->max;
}

const char *fg_sym_formula(const fg_sym_lowering *s, int64_t extent, fg_arena *a) {
  if (!fg_sym_involves(s, extent))
    return fg_arena_printf(a, "%lld", (long long)extent);
  if (extent == s->placeholder)
    return s->name;
  return fg_arena_printf(a, "%s*%lld", s->name, (long long)(extent / s->placeholder));
}

/* ---- the proof ---- */

/* T may be dim 0 of a value and nothing else. */
static bool value_ok(const fg_sym_lowering *s, const fg_value *v, fg_loc loc, fg_diag *d) {
  for (int k = 0; k < v->type.rank; k++) {
    int64_t z = v->type.dims[k].size;
    if (!fg_sym_involves(s, z) || (k == 0 && z == s->placeholder))
      continue;
    fg_error(d, loc,
             "the code generator needs the symbolic size '%s' as the leading dim of every value "
             "that has it; here it becomes dim %d%s",
             s->name, k, z == s->placeholder ? "" : " of a product (a reshape that merges it)");
    return false;
  }
  return true;
}

static bool carries(const fg_sym_lowering *s, const fg_value *v) {
  return v->type.rank > 0 && v->type.dims[0].size == s->placeholder;
}

static bool nodes_ok(const fg_sym_lowering *s, const fg_graph *g, fg_diag *d) {
  for (int i = 0; i < g->nparams; i++) {
    const fg_value *v = g->params[i];
    if (!value_ok(s, v, v->loc, d))
      return false;
    int64_t st[FG_MAX_RANK];
    fg_type_strides(&v->type, st);
    for (int k = 0; k < v->type.rank; k++)
      if (fg_sym_involves(s, st[k])) {
        fg_error(d, v->loc,
                 "parameter '%s': a layout whose strides involve the symbolic size '%s' is not "
                 "supported by the code generator yet",
                 v->name, s->name);
        return false;
      }
  }
  for (const fg_node *n = g->first; n; n = n->next) {
    bool in = false;
    for (int i = 0; i < n->nin; i++)
      in |= carries(s, n->in[i]);
    for (int i = 0; i < n->nout; i++) {
      if (!value_ok(s, n->out[i], n->loc, d))
        return false;
      /* a reduction over T: its kernel decides (fg_sym_check) */
      if (!in || carries(s, n->out[i]) || n->op->kind == FG_KIND_REDUCTION)
        continue;
      fg_error(d, n->loc,
               "'%s' along the symbolic size '%s' is not supported by the code generator yet",
               n->op->name, s->name);
      return false;
    }
  }
  return true;
}

bool fg_sym_check(const fg_plan *p, fg_diag *d) {
  const fg_sym_lowering *s = &p->sym;
  if (!s->n)
    return true;
  if (!nodes_ok(s, p->g, d))
    return false;
  for (int i = 0; i < p->nkernels; i++) {
    const fg_kernel *k = &p->kernels[i];
    if (k->rank == 0 || k->dims[0] != s->placeholder)
      continue;
    /* What the emitters take with T an argument: column kernels loop over
     * T (reduced: each slice bounded at run time) or own its outputs (kept:
     * a run-time bound, and no partials, which are laid out by the kept
     * extent); row kernels take a row a CTA; row + column kernels loop over
     * T's rows and every CTA arrives after its loop, rows or none; row
     * kernels that reduce over T take slices of a run-time length
     * (schedule_row, emit_row.c's row_coordinates; GPU-checked with
     * tests/graphs/symbolic_rows.fg). */
    const char *what = NULL;
    if (k->kind == FG_KERNEL_COLUMN && !k->mask[0] && k->split != 1)
      what = "a column reduction split over CTAs";
    else if (k->kind == FG_KERNEL_ROW && (k->ncols || k->ntails) &&
             (k->early_arrive || k->defer_groups))
      what = "a row + column kernel whose CTAs arrive from inside their last rows";
    else if (k->kind == FG_KERNEL_ROW && k->split != 1 && !k->mask[0])
      what = "a row kernel whose CTAs share rows";
    if (what) {
      const fg_node *n = k->nreds ? k->reds[0] : NULL;
      fg_error(d, n ? n->loc : p->g->loc,
               "graph '%s', kernel k%d over the symbolic size '%s': %s is not supported by the "
               "code generator yet",
               p->g->name, k->id, s->name, what);
      return false;
    }
  }
  return true;
}
