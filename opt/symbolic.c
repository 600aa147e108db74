/* Symbolic sizes in the code generator: the placeholder and the proof that
 * it never reaches the code (symbolic.h). */
#include "symbolic.h"

#include <stdio.h>
#include <string.h>

#include "index.h"
#include "infer.h"
#include "plan.h"

/* Primes near 10^6: large enough that the scheduler treats T as many rows
 * (one CTA a row, no split), small enough that T times the other dims
 * stays far from int64's limit. */
static const int64_t PLACEHOLDERS[] = {1000003, 1000033, 1000037, 1000039};
/* With expressions of T (fg_sym_lowering.affine): a prime P near 2^e, so
 * that a*P + b is read back exactly for |b| up to P/8 bytes (2^(e-7)
 * elements of 16 bytes at most), and a*P times 16 bytes stays within int64
 * for a up to 2^(58-e) elements: near 2^38 (2^31 and 2^20) unless a row
 * along T is longer, then the largest that fits (affine_placeholder; the
 * packed dQKV epilogue's [T, 2048, 3, 32, 128], 2^24.6 elements a row and
 * no offset: near 2^33). */
static const struct {
  int e;
  int64_t p;
} AFFINE_PLACEHOLDERS[] = {{38, 274877906951}, {37, 137438953481}, {36, 68719476767},
                           {35, 34359738421},  {34, 17179869209},  {33, 8589934609},
                           {32, 4294967311},   {31, 2147483659},   {30, 1073741827}};
#define AFFINE_MAX_OFF(e) ((int64_t)1 << ((e) - 7))  /* |b| and static extents, in elements */
#define AFFINE_MAX_MUL(e) ((int64_t)1 << (58 - (e))) /* a, in elements */

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

/* The smallest placeholder of the plain lowering: a static offset below it
 * is never read as a multiple of it. */
#define PLAIN_MAX_OFF 1000003

/* Whether the view node n, on an input whose leading dim is T, keeps T as
 * it is: a slice from 0 to T along dim 0, a pad of nothing along it, a cat
 * along another dim (RoPE's halves, a head's q/k/v), with a static offset
 * along the other dims below the plain placeholder. Such a view needs no
 * expression of T: its offset and its other sizes are static. */
static bool keeps_leading(const fg_node *n) {
  const fg_type *in = &n->in[0]->type;
  fg_opcode c = n->op->code;
  if (c == FG_OP_CAT) {
    int64_t dim = fg_attr_int(n, "dim");
    return (dim < 0 ? dim + in->rank : dim) != 0;
  }
  if (c == FG_OP_PAD) {
    const fg_attr *p = fg_node_attr(n, "pad");
    return p->n >= 2 && !fg_attr_has_sym(p) && p->ints[0] == 0 && p->ints[1] == 0;
  }
  /* FG_OP_SLICE */
  const fg_attr *st = fg_node_attr(n, "starts");
  const fg_attr *sp = fg_node_attr(n, "steps");
  const fg_type *out = &n->out[0]->type;
  if (st->n != in->rank || (st->syms && st->syms[0].sym) || st->ints[0] != 0 ||
      (sp && sp->kind == FG_ATTR_INTS && sp->n && sp->ints[0] != 1) || !out->rank ||
      !fg_dim_eq(out->dims[0], in->dims[0]))
    return false;
  int64_t strides[FG_MAX_RANK], off = 0;
  fg_type_strides(in, strides);
  for (int k = 1; k < in->rank; k++) {
    int64_t z = in->dims[k].size, b = st->ints[k];
    b = b < 0 ? b + z : b;
    b = b < 0 ? 0 : b > z ? z : b;
    if (strides[k] && b > (PLAIN_MAX_OFF - 1 - off) / strides[k])
      return false;
    off += b * strides[k];
  }
  return true;
}

/* Whether g needs extents a*T + b (fg_sym_lowering.affine): a size that is
 * an expression of T other than T itself, an attribute that writes one, or
 * a view that moves along T (a slice's start, a pad, a cat along it). An
 * attribute that writes T itself (`shape=[T, 8, 64]`, `ends=[T, 64]`) and
 * a view along the other dims (keeps_leading) need none. */
static bool needs_affine(const fg_graph *g) {
  for (const fg_node *n = g->first; n; n = n->next) {
    for (int i = 0; i < n->op->nattrs; i++)
      if (fg_attr_has_sym(&n->attrs[i]))
        for (int k = 0; k < n->attrs[i].n; k++) {
          fg_dim x = n->attrs[i].syms[k];
          if (x.sym && (fg_dim_mul(x) != 1 || x.off))
            return true;
        }
    for (int o = 0; o < n->nout; o++)
      for (int k = 0; k < n->out[o]->type.rank; k++) {
        fg_dim x = n->out[o]->type.dims[k];
        if (x.sym && (fg_dim_mul(x) != 1 || x.off))
          return true;
      }
    fg_opcode c = n->op->code;
    if ((c == FG_OP_SLICE || c == FG_OP_PAD || c == FG_OP_CAT) && !keeps_leading(n))
      for (int i = 0; i < n->nin; i++)
        if (n->in[i]->type.rank && n->in[i]->type.dims[0].sym)
          return true;
  }
  return false;
}

/* What the stand-in must cover, on one value: T's coefficient times the
 * other dims (*mul), the offset times them and a static extent (*off), in
 * elements, saturating at 2^40. */
#define AFFINE_SAT ((int64_t)1 << 40)
static void affine_needs_value(const fg_value *v, int64_t *mul, int64_t *off) {
  const fg_type *t = &v->type;
  if (t->scalar)
    return;
  int64_t rest = 1, a = 0, b = 1;
  for (int k = 0; k < t->rank; k++) {
    fg_dim x = t->dims[k];
    int64_t z = x.sym ? 1 : x.size > 1 ? x.size : 1;
    if (x.sym && a == 0) {
      a = fg_dim_mul(x);
      b = x.off < 0 ? -x.off : x.off;
    }
    rest = rest > AFFINE_SAT / z ? AFFINE_SAT : rest * z;
  }
  a = a < 0 ? -a : a;
  int64_t m = a && rest > AFFINE_SAT / a ? AFFINE_SAT : a * rest;
  int64_t o = b && rest > AFFINE_SAT / b ? AFFINE_SAT : b * rest;
  if (m > *mul)
    *mul = m;
  if (rest > *off)
    *off = rest;
  if (o > *off)
    *off = o;
}

/* The largest stand-in whose limits the graph keeps (AFFINE_PLACEHOLDERS),
 * or 0 after an error in d at the value that needs the most. */
static int64_t affine_placeholder(const fg_graph *g, fg_diag *d) {
  int64_t mul = 0, off = 0;
  for (int i = 0; i < g->nparams; i++)
    affine_needs_value(g->params[i], &mul, &off);
  for (const fg_node *n = g->first; n; n = n->next)
    for (int o = 0; o < n->nout; o++)
      affine_needs_value(n->out[o], &mul, &off);
  for (size_t i = 0; i < sizeof AFFINE_PLACEHOLDERS / sizeof *AFFINE_PLACEHOLDERS; i++) {
    int e = AFFINE_PLACEHOLDERS[i].e;
    if (mul <= AFFINE_MAX_MUL(e) && off <= AFFINE_MAX_OFF(e))
      return AFFINE_PLACEHOLDERS[i].p;
  }
  /* the value with the longest row along T */
  const fg_value *worst = NULL;
  fg_loc loc = g->loc;
  int64_t best = -1;
  for (int i = 0; i < g->nparams; i++) {
    int64_t m = 0, f = 0;
    affine_needs_value(g->params[i], &m, &f);
    if (m > best) {
      best = m;
      worst = g->params[i];
      loc = worst->loc;
    }
  }
  for (const fg_node *n = g->first; n; n = n->next)
    for (int o = 0; o < n->nout; o++) {
      int64_t m = 0, f = 0;
      affine_needs_value(n->out[o], &m, &f);
      if (m > best) {
        best = m;
        worst = n->out[o];
        loc = n->loc;
      }
    }
  char buf[256];
  fg_error(d, loc,
           "%s of type %s is too large for the code generator with sizes that are expressions "
           "of a symbolic size (the elements of a row along it, at most 2^28, times the largest "
           "offset or static tensor, in elements, at most 2^51 together)",
           worst && worst->name ? worst->name : "a value",
           worst ? fg_type_str(&worst->type, buf, sizeof buf) : "?");
  return 0;
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
  if (needs_affine(g)) {
    out->affine = true;
    out->placeholder = affine_placeholder(g, d);
    if (!out->placeholder)
      return NULL;
    return fg_graph_bind_stand_in(g, out->name, out->placeholder, d);
  }
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

void fg_sym_split(const fg_sym_lowering *s, int64_t extent, int64_t *a, int64_t *b) {
  *a = 0;
  *b = extent;
  if (!s || !s->n || extent == 0)
    return;
  int64_t P = s->placeholder;
  if (!s->affine) {
    if (extent % P == 0) {
      *a = extent / P;
      *b = 0;
    }
    return;
  }
  /* the nearest multiple of P: |b| < P/2 (affine_limits) */
  int64_t h = P / 2, q = (extent + h) / P;
  if ((extent + h) % P < 0)
    q--;
  *a = q;
  *b = extent - q * P;
}

bool fg_sym_involves(const fg_sym_lowering *s, int64_t extent) {
  int64_t a, b;
  fg_sym_split(s, extent, &a, &b);
  return a != 0;
}

bool fg_sym_multiple(const fg_sym_lowering *s, int64_t extent, int64_t m) {
  int64_t a, b;
  fg_sym_split(s, extent, &a, &b);
  return m > 0 && (a == 0 || (a * s->div) % m == 0) && b % m == 0;
}

int64_t fg_sym_at_max(const fg_sym_lowering *s, int64_t extent) {
  int64_t a, b, r;
  fg_sym_split(s, extent, &a, &b);
  if (a == 0)
    return extent;
  if (__builtin_mul_overflow(a, s->max, &r) || __builtin_add_overflow(r, b, &r))
    return INT64_MAX;
  return r;
}

const char *fg_sym_formula(const fg_sym_lowering *s, int64_t extent, fg_arena *a) {
  int64_t k, b;
  fg_sym_split(s, extent, &k, &b);
  if (k == 0)
    return fg_arena_printf(a, "%lld", (long long)extent);
  const char *t = k == 1 ? s->name : fg_arena_printf(a, "%s*%lld", s->name, (long long)k);
  if (b == 0)
    return t;
  return fg_arena_printf(a, "%s%s%lld", t, b > 0 ? "+" : "-", (long long)(b > 0 ? b : -b));
}

/* ---- the proof ---- */

/* T may be dim 0 of a value and nothing else (with expressions of T: an
 * expression a*T + b there). */
static bool value_ok(const fg_sym_lowering *s, const fg_value *v, fg_loc loc, fg_diag *d) {
  for (int k = 0; k < v->type.rank; k++) {
    int64_t z = v->type.dims[k].size;
    if (!fg_sym_involves(s, z) || (k == 0 && (z == s->placeholder || s->affine)))
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
  return v->type.rank > 0 && (s->affine ? fg_sym_involves(s, v->type.dims[0].size)
                                        : v->type.dims[0].size == s->placeholder);
}

/* Whether v is only a result that is a view (no node reads it, no kernel
 * writes it) whose offset and strides do not involve T: T may then be any
 * dim of it, since only the plan states its sizes (formulas). The transpose
 * of a [K*T, N] view of the parameter, [N, K*T] (the packed dQKV
 * epilogue's dqkv_t), is such a result. */
static bool view_only_result(const fg_plan *p, const fg_value *v) {
  const fg_sym_lowering *s = &p->sym;
  int results = 0;
  for (int i = 0; i < p->g->nresults; i++) {
    if (p->g->results[i] != v)
      continue;
    const fg_result_plan *r = &p->results[i];
    if (!r->is_view || fg_sym_involves(s, r->view.offset))
      return false;
    for (int k = 0; k < r->view.rank; k++)
      if (fg_sym_involves(s, r->view.strides[k]))
        return false;
    results++;
  }
  return results > 0 && fg_count_uses(p->g, v) == results;
}

static bool nodes_ok(const fg_plan *p, const fg_sym_lowering *s, const fg_graph *g, fg_diag *d) {
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
      if (view_only_result(p, n->out[i]))
        continue;
      if (!value_ok(s, n->out[i], n->loc, d))
        return false;
      /* a reduction over T: its kernel decides (fg_sym_check); a scatter
       * whose sources have T: segment.c's scatter_limits */
      if (!in || carries(s, n->out[i]) || n->op->kind == FG_KIND_REDUCTION || fg_index_scatters(n))
        continue;
      /* a slice of static length along T (the last rows: from T-4 to T):
       * its start is computed from T's argument, which every kernel takes */
      if (s->affine && n->op->code == FG_OP_SLICE)
        continue;
      fg_error(d, n->loc,
               "'%s' along the symbolic size '%s' is not supported by the code generator yet",
               n->op->name, s->name);
      return false;
    }
  }
  return true;
}

bool fg_sym_check_values(const fg_plan *p, fg_diag *d) {
  return !p->sym.n || nodes_ok(p, &p->sym, p->g, d);
}

bool fg_sym_check(const fg_plan *p, fg_diag *d) {
  const fg_sym_lowering *s = &p->sym;
  if (!s->n)
    return true;
  for (int i = 0; i < p->nkernels; i++) {
    const fg_kernel *k = &p->kernels[i];
    /* symidx: the scatter kernels over the sources (a*T + b of them) take
     * T's count (emit_scatter.c) */
    if (k->rank == 0 || !fg_sym_involves(s, k->dims[0]) || fg_kernel_is_scatter(k->kind))
      continue;
    /* With expressions of T (a*T + b): pointwise kernels, row kernels with
     * a CTA a row, and column kernels that reduce over T (a static grid,
     * each slice bounded at run time by fgb_extent's a*T + b) */
    if (s->affine && k->kind != FG_KERNEL_POINTWISE &&
        (k->kind != FG_KERNEL_ROW || k->ncols || k->ntails || k->split != 1 || k->mask[0]) &&
        (k->kind != FG_KERNEL_COLUMN || !k->mask[0])) {
      const fg_node *n = k->nreds ? k->reds[0] : NULL;
      fg_error(d, n ? n->loc : p->g->loc,
               "graph '%s', kernel k%d over the symbolic size '%s': with sizes that are "
               "expressions of it, the code generator takes pointwise kernels, row kernels "
               "(a CTA a row) and column kernels reducing over it only",
               p->g->name, k->id, s->name);
      return false;
    }
    /* What the emitters take with T an argument: column kernels loop over
     * T (reduced: each slice bounded at run time) or own its outputs (kept:
     * a run-time bound; split, the split and the partials' layout are
     * formulas of T, schedule.c's col_split_formula); row kernels take a
     * row a CTA; row + column kernels loop over T's rows, a CTA with none
     * arriving after its loop (emit_rowcol.c); row kernels that reduce over
     * T take slices of a run-time length, and a cluster a row (schedule.c
     * cluster_split), T x rows x C CTAs
     * (schedule_row, emit_row.c's row_coordinates; GPU-checked with
     * tests/graphs/symbolic_rows.fg). */
    const char *what = NULL;
    if (k->kind == FG_KERNEL_COLUMN && !k->mask[0] && k->split != 1 && !k->split_formula)
      what = "a column reduction split over CTAs";
    else if (k->kind == FG_KERNEL_ROW && k->split != 1 && k->cluster != k->split && !k->mask[0])
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
