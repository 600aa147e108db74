/* Segmentation: decide which values are materialized and group them into
 * kernels by iteration domain.
 *
 * Materialized ("stored") values are graph results that are not views,
 * reduction results needed outside their kernel, and operands of
 * segment_set. Everything else is recomputed inline by each kernel that
 * needs it, from parameters and stored values: pointwise and view ops are
 * cheap next to a round trip through memory. Stored values are visited in
 * graph order and join the most recent kernel when their domains agree:
 *   - pointwise kernels: outputs of one shape;
 *   - reductions over the same input shape and reduced dims share a kernel
 *     (several reductions in one pass);
 *   - row (inner) reduction kernels also take full-domain values and
 *     row-shaped values that use their reductions through pointwise and
 *     broadcasting ops only (normalization: the row stays on chip).
 */
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "infer.h"
#include "inplace.h"
#include "passes.h"
#include "plan.h"

bool fg_plan_in_memory(const fg_plan *p, const fg_value *v, int k) {
  if (v->param_index >= 0)
    return true;
  const fg_storage *s = &p->store[v->id];
  return s->stored && s->kernel >= 0 && s->kernel != k;
}

static bool same_shape(const fg_type *t, int rank, const int64_t *dims) {
  if (t->rank != rank)
    return false;
  for (int i = 0; i < rank; i++)
    if (t->dims[i].size != dims[i])
      return false;
  return true;
}

/* A reshape that only inserts or removes size-1 dims keeps every element at
 * the same row coordinates. */
static bool reshape_unit_only(const fg_node *n) {
  const fg_type *a = &n->in[0]->type, *b = &n->out[0]->type;
  int i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i].size == 1)
      i++;
    while (j < b->rank && b->dims[j].size == 1)
      j++;
    if (i == a->rank || j == b->rank)
      return i == a->rank && j == b->rank;
    if (a->dims[i].size != b->dims[j].size)
      return false;
    i++, j++;
  }
}

static bool row_preserving(const fg_node *n) {
  switch (n->op->code) {
  case FG_OP_BROADCAST_IN_DIM:
  case FG_OP_EXPAND:
  case FG_OP_UNSQUEEZE:
  case FG_OP_SQUEEZE:
    return true;
  case FG_OP_RESHAPE:
  case FG_OP_VIEW:
    return reshape_unit_only(n);
  default:
    return n->op->kind == FG_KIND_POINTWISE || n->op->kind == FG_KIND_LITERAL;
  }
}

/* ---- walks over the values a value is computed from, without recursion ----
 * Inside one kernel a chain of pointwise ops is as deep as the graph is
 * long (the kernel's own stored values do not end a walk), so these walks
 * keep their stacks on the heap: recursion overflowed the C stack at a
 * chain of 25,000 ops after a row reduction. */

/* A set of a graph's values, emptied at no cost (a walk starts afresh for
 * every candidate value: clearing must not cost the graph's size): v is
 * in it while mark[v->id] == stamp. */
typedef struct value_set {
  int nvalues;
  unsigned *mark; /* by value id */
  unsigned stamp;
} value_set;

static bool vset_init(value_set *s, const fg_graph *g) {
  *s = (value_set){g->next_value_id + 1, NULL, 1};
  s->mark = calloc((size_t)s->nvalues, sizeof *s->mark);
  return s->mark != NULL;
}

static void vset_clear(value_set *s) {
  if (++s->stamp == 0) { /* wrapped around: clear the marks once */
    memset(s->mark, 0, (size_t)s->nvalues * sizeof *s->mark);
    s->stamp = 1;
  }
}

static bool vset_has(const value_set *s, const fg_value *v) { return s->mark[v->id] == s->stamp; }
static void vset_add(value_set *s, const fg_value *v) { s->mark[v->id] = s->stamp; }
static void vset_remove(value_set *s, const fg_value *v) { s->mark[v->id] = 0; }

/* A depth-first walk visiting each value once, in the order a recursive
 * walk taking the inputs left to right would: the order in which a
 * kernel's arguments are found. */
typedef struct cone_walk {
  value_set seen;
  const fg_value **stack;
  int cap;
} cone_walk;

static bool cone_init(cone_walk *c, const fg_graph *g) {
  *c = (cone_walk){0};
  return vset_init(&c->seen, g);
}

static void cone_free(cone_walk *c) {
  free(c->seen.mark);
  free(c->stack);
}

/* Forgets what was visited: the next walk starts afresh. */
static void cone_restart(cone_walk *c) { vset_clear(&c->seen); }

static bool cone_push(cone_walk *c, int *sp, const fg_value *v) {
  if (*sp == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    const fg_value **s = realloc(c->stack, sizeof *s * (size_t)cap);
    if (!s)
      return false;
    c->stack = s;
    c->cap = cap;
  }
  c->stack[(*sp)++] = v;
  return true;
}

/* What a walk does at each value it reaches first; true: it goes no
 * further (a buffer the kernel loads, or a value already accounted for). */
typedef bool (*cone_stop)(void *ctx, const fg_value *v);

/* Walks from root to the values stop() ends at, skipping the values
 * visited since the last restart. false: out of memory. */
static bool cone_visit(cone_walk *c, const fg_value *root, cone_stop stop, void *ctx) {
  int sp = 0;
  if (!cone_push(c, &sp, root))
    return false;
  while (sp > 0) {
    const fg_value *v = c->stack[--sp];
    if (vset_has(&c->seen, v))
      continue;
    vset_add(&c->seen, v);
    if (stop(ctx, v) || !v->def)
      continue;
    for (int i = v->def->nin - 1; i >= 0; i--) /* the first input on top */
      if (!vset_has(&c->seen, v->def->in[i]) && !cone_push(c, &sp, v->def->in[i]))
        return false;
  }
  return true;
}

/* ---- walking a value's recomputation region relative to kernel k ---- */

typedef struct walk_flags {
  bool reaches_red;     /* uses a row reduction computed by kernel k */
  bool reaches_col;     /* uses a column reduction of a row + column kernel k */
  bool reaches_tail;    /* uses a reduction over every row of kernel k */
  bool bad_path;        /* ... through an op that moves elements across rows */
  bool crosses_segment; /* through a segment_set whose operand kernel k computes */
  bool off_index;       /* ... through an op other than a pointwise one of k's domain's shape */
} walk_flags;

typedef struct walk_frame {
  const fg_value *v;
  int next; /* its next input to walk */
} walk_frame;

/* Kernel k's walk. The flags are kept by value (seen), so a value walked
 * once costs nothing the next time: the walker of a kernel serves every
 * value that asks about it (kernel_memo below). */
typedef struct walker {
  const fg_plan *p;
  int k;
  value_set seen;   /* the values whose flags are known */
  walk_flags *memo; /* by value id */
  walk_frame *stack;
  int cap;
} walker;

static bool walker_init(walker *w, const fg_plan *p, int k) {
  *w = (walker){p, k, {0}, calloc((size_t)p->g->next_value_id + 1, sizeof(walk_flags)), NULL, 0};
  return vset_init(&w->seen, p->g) && w->memo;
}

static void walker_free(walker *w) {
  free(w->seen.mark);
  free(w->memo);
  free(w->stack);
}

/* Kernel k's walk from nothing known. */
static void walker_restart(walker *w, int k) {
  w->k = k;
  vset_clear(&w->seen);
}

static bool in_list(fg_node *const *l, int n, const fg_node *x) {
  for (int i = 0; i < n; i++)
    if (l[i] == x)
      return true;
  return false;
}

/* v's flags where no walk is needed: none for what kernel k loads, else
 * what an earlier walk found. */
static bool walk_known(const walker *w, const fg_value *v, walk_flags *f) {
  if (fg_plan_in_memory(w->p, v, w->k) || !v->def) {
    *f = (walk_flags){0};
    return true;
  }
  if (!vset_has(&w->seen, v))
    return false;
  *f = w->memo[v->id];
  return true;
}

/* A reduction of kernel k ends the walk, in the phase its list gives. */
static bool reduction_of_k(const walker *w, const fg_value *v) {
  return v->def->op->kind == FG_KIND_REDUCTION && w->p->store[v->id].kernel == w->k;
}

static walk_flags reduction_flags(const fg_kernel *k, const fg_node *n) {
  walk_flags f = {0};
  if (in_list(k->cols, k->ncols, n))
    f.reaches_col = true;
  else if (in_list(k->tails, k->ntails, n))
    f.reaches_tail = true;
  else
    f.reaches_red = true;
  return f;
}

/* Whether n reads its input x at the element it computes v at: a scan
 * kernel knows its running sum there only. */
static bool at_own_index(const fg_kernel *k, const fg_node *n, const fg_value *x,
                         const fg_value *v) {
  return n->op->kind == FG_KIND_POINTWISE && same_shape(&x->type, k->rank, k->dims) &&
         same_shape(&v->type, k->rank, k->dims);
}

/* v's flags from its inputs', all known. */
static walk_flags join_inputs(const walker *w, const fg_value *v) {
  const fg_node *n = v->def;
  const fg_kernel *k = &w->p->kernels[w->k];
  walk_flags f = {0};
  for (int i = 0; i < n->nin; i++) {
    walk_flags g = {0};
    walk_known(w, n->in[i], &g);
    if (n->op->code == FG_OP_SEGMENT_SET) {
      const fg_storage *xs = &w->p->store[n->in[i]->id];
      if (xs->stored && xs->kernel == w->k)
        g.crosses_segment = true;
    }
    bool uses = g.reaches_red || g.reaches_col || g.reaches_tail;
    f.reaches_red |= g.reaches_red;
    f.reaches_col |= g.reaches_col;
    f.reaches_tail |= g.reaches_tail;
    f.bad_path |= g.bad_path | (uses && !row_preserving(n));
    f.crosses_segment |= g.crosses_segment;
    f.off_index |= g.off_index | (uses && !at_own_index(k, n, n->in[i], v));
  }
  return f;
}

static bool walk_push(walker *w, int *sp, const fg_value *v) {
  if (*sp == w->cap) {
    int cap = w->cap ? 2 * w->cap : 64;
    walk_frame *s = realloc(w->stack, sizeof *s * (size_t)cap);
    if (!s)
      return false;
    w->stack = s;
    w->cap = cap;
  }
  w->stack[(*sp)++] = (walk_frame){v, 0};
  return true;
}

/* v's flags: its inputs' first, depth first (a value's flags once all its
 * inputs' are known), each value's kept. */
static walk_flags walk(walker *w, const fg_value *v) {
  walk_flags f;
  if (walk_known(w, v, &f))
    return f;
  int sp = 0;
  if (!walk_push(w, &sp, v))
    return (walk_flags){0};
  while (sp > 0) {
    walk_frame *top = &w->stack[sp - 1];
    const fg_value *x = top->v;
    if (reduction_of_k(w, x)) {
      w->memo[x->id] = reduction_flags(&w->p->kernels[w->k], x->def);
    } else if (top->next < x->def->nin) {
      const fg_value *in = x->def->in[top->next++];
      if (!walk_known(w, in, &f) && !walk_push(w, &sp, in))
        return (walk_flags){0};
      continue;
    } else {
      w->memo[x->id] = join_inputs(w, x);
    }
    vset_add(&w->seen, x);
    sp--;
  }
  return w->memo[v->id];
}

/* A reduction's own flags come from its input, not itself. */
static walk_flags walk_value(walker *w, const fg_value *v) {
  if (v->def && v->def->op->kind == FG_KIND_REDUCTION)
    return walk(w, v->def->in[0]);
  return walk(w, v);
}

/* The same with a walker of its own: for questions about a finished plan. */
static walk_flags walk_once(const fg_plan *p, int k, const fg_value *v) {
  walker w;
  walk_flags f = {0};
  if (walker_init(&w, p, k))
    f = walk_value(&w, v);
  walker_free(&w);
  return f;
}

/* ---- the indices a value reads kernel k's reductions at ----
 * A row kernel computes each reduction once a row and looks it up at the
 * row's kept coordinates. A value that uses it must index it there:
 * broadcasting can also map the reduction's dims onto the reduced dims
 * (sub(sum(x, dims=[2,3]) of rank 2, x of rank 4) right-aligns the sum
 * with dims 2 and 3), which the kernel never computed (it exited 3). The
 * index is followed symbolically, each component a domain dim or a
 * constant, through the ops row_preserving allows, as the backend maps it
 * (view ops through view.c's map). Each (value, index) pair to check is a
 * visit; past SYM_BUDGET visits the answer is no. The answer does not
 * depend on the order of the visits, so they are kept on a stack. */
enum { SYM_ZERO = -1, SYM_OTHER = -2, SYM_BUDGET = 20000 };

typedef struct sym_item {
  const fg_value *v;
  int idx[FG_MAX_RANK];
} sym_item;

typedef struct sym_walk {
  const fg_plan *p;
  const fg_kernel *k;
  walker *flags; /* walk()'s, for kernel k */
  int budget;    /* visits left: past it, the answer is no */
  sym_item *stack;
  int n, cap;
} sym_walk;

static bool sym_same(const fg_kernel *k, int a, int b) {
  bool za = a == SYM_ZERO || (a >= 0 && k->dims[a] == 1);
  bool zb = b == SYM_ZERO || (b >= 0 && k->dims[b] == 1);
  return a == b ? a != SYM_OTHER : za && zb;
}

/* Value v to visit at index idx (of v's rank). */
static bool sym_push(sym_walk *w, const fg_value *v, const int *idx) {
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 64;
    sym_item *s = realloc(w->stack, sizeof *s * (size_t)cap);
    if (!s)
      return false;
    w->stack = s;
    w->cap = cap;
  }
  sym_item *it = &w->stack[w->n++];
  it->v = v;
  memcpy(it->idx, idx, sizeof *idx * (size_t)v->type.rank);
  return true;
}

/* One visit: whether v may be read at idx; the inputs it reads are pushed
 * with the indices it reads them at. */
static bool sym_visit(sym_walk *w, const fg_value *v, const int *idx) {
  if (fg_plan_in_memory(w->p, v, w->k->id) || !v->def || !walk(w->flags, v).reaches_red)
    return true;
  const fg_node *n = v->def;
  const fg_type *t = &v->type;
  int sub[FG_MAX_RANK];
  if (n->op->kind == FG_KIND_REDUCTION && w->p->store[v->id].kernel == w->k->id) {
    /* seeded at the kept coordinates, 0 at kept-size-1 reduced dims */
    int j = 0;
    for (int d = 0; d < w->k->rank; d++)
      if (!w->k->mask[d])
        sub[j++] = d;
      else if (t->rank == w->k->rank)
        sub[j++] = SYM_ZERO;
    if (j != t->rank)
      return false;
    for (int i = 0; i < t->rank; i++)
      if (!sym_same(w->k, idx[i], sub[i]))
        return false;
    return true;
  }
  if (n->op->kind == FG_KIND_POINTWISE) {
    for (int a = 0; a < n->nin; a++) {
      const fg_type *at = &n->in[a]->type;
      for (int i = 0; i < at->rank; i++) {
        int j = t->rank - at->rank + i;
        sub[i] = at->dims[i].size == 1 ? SYM_ZERO : idx[j];
      }
      if (!sym_push(w, n->in[a], sub))
        return false;
    }
    return true;
  }
  if (n->op->kind == FG_KIND_LITERAL)
    return true;
  if (n->op->kind != FG_KIND_VIEW || !fg_type_is_static(t))
    return false;
  const fg_type *it = &n->in[0]->type;
  int64_t in_sizes[FG_MAX_RANK], out_sizes[FG_MAX_RANK];
  for (int i = 0; i < it->rank; i++)
    in_sizes[i] = it->dims[i].size;
  for (int i = 0; i < t->rank; i++)
    out_sizes[i] = t->dims[i].size;
  int k = 0;
  while (k < n->nout && n->out[k] != v)
    k++;
  fg_view_map m;
  const char *why;
  if (!fg_view_map_of(n, k, in_sizes, out_sizes, &m, &why))
    return false;
  if (m.reshape) { /* row_preserving allows unit-only reshapes: the non-unit dims in order */
    int j = 0;
    for (int i = 0; i < it->rank; i++) {
      if (in_sizes[i] == 1) {
        sub[i] = SYM_ZERO;
        continue;
      }
      while (j < t->rank && out_sizes[j] == 1)
        j++;
      sub[i] = j < t->rank ? idx[j++] : SYM_OTHER;
    }
  } else {
    for (int i = 0; i < it->rank; i++)
      sub[i] = m.src[i] < 0 || m.zero[i]           ? SYM_ZERO
               : m.step[i] == 1 && m.start[i] == 0 ? idx[m.src[i]]
                                                   : SYM_OTHER;
  }
  return sym_push(w, n->in[0], sub);
}

static bool sym_ok(sym_walk *w, const fg_value *v, const int *idx) {
  bool ok = sym_push(w, v, idx);
  while (ok && w->n > 0) {
    sym_item it = w->stack[--w->n]; /* a copy: visiting may move the stack */
    ok = --w->budget >= 0 && sym_visit(w, it.v, it.idx);
  }
  return ok;
}

/* Whether v (to join row kernel k, whose walker wk is) reads k's
 * reductions only at the rows' kept coordinates. */
static bool reads_rows_in_place(walker *wk, const fg_kernel *k, const fg_value *v) {
  int idx[FG_MAX_RANK];
  const fg_value *start = v;
  if (v->def && v->def->op->kind == FG_KIND_REDUCTION)
    start = v->def->in[0]; /* a reduction's input: the domain's index */
  const fg_type *t = &start->type;
  if (same_shape(t, k->rank, k->dims)) {
    for (int d = 0; d < k->rank; d++)
      idx[d] = d;
  } else {
    int j = 0; /* row-shaped: as fgk_row_index builds its index */
    for (int d = 0; d < k->rank; d++)
      if (!k->mask[d])
        idx[j++] = d;
      else if (t->rank == k->rank)
        idx[j++] = SYM_ZERO;
    if (j != t->rank)
      return false;
  }
  sym_walk sw = {wk->p, k, wk, SYM_BUDGET, NULL, 0, 0};
  bool ok = sym_ok(&sw, start, idx);
  free(sw.stack);
  return ok;
}

/* ---- issue 20 (scan): cumsum's kernels ---- */

/* A scan kernel takes the stored values of its domain's shape that use its
 * cumsum at their own index (through pointwise ops of the domain's shape:
 * the kernel knows the running sum at the element it is at, and nowhere
 * else) or not at all (a pointwise result beside it, or computed from
 * it); no reductions, no second cumsum. The chunk sums kernel takes
 * nothing else. */
static bool scan_can_join(walker *w, const fg_kernel *k, const fg_value *v) {
  if (k->kind != FG_KERNEL_SCAN || v->def->op->kind == FG_KIND_REDUCTION ||
      !same_shape(&v->type, k->rank, k->dims))
    return false;
  walk_flags f = walk_value(w, v);
  return !f.crosses_segment && !f.off_index;
}

/* ---- kernels ---- */

static fg_kernel *new_kernel(fg_plan *p) {
  fg_kernel nk = {.id = p->nkernels};
  p->kernels = fg_arena_append(&p->g->arena, p->kernels, &p->nkernels, &nk, sizeof nk);
  fg_kernel *k = &p->kernels[nk.id];
  k->partial_temp = k->counter_temp = -1;
  k->not_with = -1;
  k->scan_temp = -1;
  return k;
}

static void push_value(fg_graph *g, fg_value ***arr, int *n, fg_value *v) {
  *arr = fg_arena_append(&g->arena, *arr, n, &v, sizeof v);
}

static void push_node(fg_graph *g, fg_node ***arr, int *n, fg_node *v) {
  *arr = fg_arena_append(&g->arena, *arr, n, &v, sizeof v);
}

static void set_domain(fg_kernel *k, const fg_type *t, const bool *mask) {
  k->rank = t->rank;
  for (int i = 0; i < t->rank; i++) {
    k->dims[i] = t->dims[i].size;
    k->mask[i] = mask ? mask[i] : false;
  }
}

/* Row kernels reduce the last dim (and any others: a "row" is every
 * element of one output, contiguous along the last dim, e.g. a channel of
 * an NCHW tensor for batch-norm statistics over [0,2,3], which as a column
 * kernel ran with vector width 1 on 32 CTAs: issue 17); when the last dim
 * is kept, a column kernel (threads own adjacent output elements). */
static fg_kernel_kind reduction_kind(const fg_kernel *k) {
  bool any = false;
  for (int i = 0; i < k->rank; i++)
    any |= k->mask[i];
  if (!any)
    return FG_KERNEL_ROW; /* reduction over no dims: a copy per row */
  /* Rows of at most 8 elements: a thread an output, not a CTA a row (amin
   * over a last dim of 4 was 1.57M CTAs of 32 threads, slower than eager;
   * perf fuzzing g148, docs/benchmarks.md). */
  int64_t red = 1;
  for (int i = 0; i < k->rank; i++)
    if (k->mask[i])
      red *= k->dims[i];
  if (red <= 8)
    return FG_KERNEL_COLUMN;
  /* (A row kernel whose last dims are kept size-1 dims, vectorized along
   * the last reduced dim, gave wrong results on the GPU: 2026-11-24, graph
   * tiny_rows of tests/graphs/reduction_broadcast.fg; the emitter's lanes
   * assume the domain's last dim. So those stay column kernels.) */
  return k->mask[k->rank - 1] ? FG_KERNEL_ROW : FG_KERNEL_COLUMN;
}

static bool same_mask(const fg_kernel *k, const bool *mask) {
  for (int i = 0; i < k->rank; i++)
    if (k->mask[i] != mask[i])
      return false;
  return true;
}

/* Is t the reduced shape of k's domain, with or without kept size-1 dims? */
bool fg_plan_row_shaped(const fg_kernel *k, const fg_type *t) {
  int j = 0;
  if (t->rank == k->rank) {
    for (int i = 0; i < k->rank; i++)
      if (t->dims[i].size != (k->mask[i] ? 1 : k->dims[i]))
        return false;
    return true;
  }
  for (int i = 0; i < k->rank; i++) {
    if (k->mask[i])
      continue;
    if (j >= t->rank || t->dims[j].size != k->dims[i])
      return false;
    j++;
  }
  return j == t->rank;
}

static bool has_reductions(const fg_kernel *k) { return k->nreds > 0; }

/* A row kernel's rows (*b, the kept dims) and row length (*r, the reduced
 * dims). */
static void row_extents(const fg_kernel *k, int64_t *b, int64_t *r) {
  *b = *r = 1;
  for (int i = 0; i < k->rank; i++)
    *(k->mask[i] ? r : b) *= k->dims[i];
}

/* A row kernel with few long rows (a full reduction) must split its rows
 * over CTAs to fill the GPU, which a phase that needs the finished
 * reduction forbids: such consumers go to a later kernel instead. Short
 * rows stay together: one CTA each is quick. */
static bool few_rows(const fg_plan *p, const fg_kernel *k) {
  if (k->kind != FG_KERNEL_ROW)
    return false;
  int64_t b, r;
  row_extents(k, &b, &r);
  return b < 2 * (int64_t)p->target.sm_count && r > 32768;
}

/* few_rows, unless a cluster takes each row with its slices in registers
 * and the clusters fill the GPU (schedule.c cluster_split): then a
 * full-size consumer stays in the row kernel, which reads the rows once
 * (group norm's 8 x 32 rows of 65536 f32: 104 us in two kernels, 61 in
 * one cluster kernel; docs/benchmarks.md, run B1b). */
static bool few_unclustered_rows(const fg_plan *p, const fg_kernel *k) {
  if (!few_rows(p, k))
    return false;
  int64_t b, r;
  int elem = 1;
  row_extents(k, &b, &r);
  for (int i = 0; i < k->nreds; i++)
    if (fg_dtype_size(k->reds[i]->in[0]->type.dtype) > elem)
      elem = fg_dtype_size(k->reds[i]->in[0]->type.dtype);
  bool fits;
  int64_t c = fg_plan_row_cluster(p, r * elem, &fits);
  /* (rows not a multiple of 16 elements are peeled into one CTA a row) */
  return fg_sym_involves(&p->sym, r) || r % 16 || !fits || b * c < 2 * (int64_t)p->target.sm_count;
}

/* ... except a variance's sum of squared deviations where k has a row for
 * every SM: never split (schedule_row), so the kernel computes it in the
 * mean's pass where rows stream (variance.c), and where they stay in
 * registers from them; the later kernel would read the rows again
 * (batchnorm_stats, two kernels: 0.66x torch.compile, docs/benchmarks.md,
 * run T1). */
static bool one_pass_variance_ok(const fg_plan *p, const fg_kernel *k, const fg_node *n) {
  int64_t b, r;
  row_extents(k, &b, &r);
  return b >= p->target.sm_count && fg_plan_variance_pair(k, n) >= 0;
}

/* A variance's sum of squared deviations joins the column kernel of its
 * mean: one pass over the columns (variance.c), where two kernels read
 * the input twice (issue 17, perf fuzzing g92: 0.81x torch.compile). One
 * for each mean: a second would be its own pass. */
static bool column_variance_ok(const fg_kernel *k, const fg_node *n) {
  return fg_plan_variance_first(k, n, k->nreds) >= 0;
}

/* Is t the shape of one row of k's domain (the reduced dims), with or
 * without the kept dims as size-1 dims? */
static bool col_shaped(const fg_kernel *k, const fg_type *t) {
  int j = 0;
  if (t->rank == k->rank) {
    for (int i = 0; i < k->rank; i++)
      if (t->dims[i].size != (k->mask[i] ? k->dims[i] : 1))
        return false;
    return true;
  }
  for (int i = 0; i < k->rank; i++) {
    if (!k->mask[i])
      continue;
    if (j >= t->rank || t->dims[j].size != k->dims[i])
      return false;
    j++;
  }
  return j == t->rank;
}

/* The row + column form (plan.h) or two kernels (the row kernel, then a
 * column kernel reading the data again; docs/benchmarks.md, S15): at
 * least 64 rows (fewer: no faster), and rows of at most
 * 16384 elements with one column reduction (S15), 8192 with more
 * (their accumulators take the registers a longer row would need); few
 * column reductions (their accumulators live in registers beside the
 * row). */
enum {
  ROWCOL_MIN_ROWS = 64,
  ROWCOL_MAX_ROW = 16384,
  ROWCOL_MAX_ROW_MANY = 8192,
  ROWCOL_MAX_LATE = 4
};

/* For k's next column or tail reduction. */
static int64_t rowcol_max_row(const fg_kernel *k) {
  return k->ncols + k->ntails == 0 ? ROWCOL_MAX_ROW : ROWCOL_MAX_ROW_MANY;
}

static bool rowcol_ok(const fg_plan *p, const fg_kernel *k) {
  if (k->kind != FG_KERNEL_ROW || k->nreds == 0 || k->ncols + k->ntails >= ROWCOL_MAX_LATE)
    return false;
  int64_t b, r;
  row_extents(k, &b, &r);
  /* Experiment knob, not a user interface: 0 never, 2 regardless of the
   * shape (to measure the crossover against the two-kernel path). */
  int64_t v;
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_ROWCOL, &v) && v == 0)
    return false;
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_ROWCOL, &v) && v == 2)
    return b >= 2;
  return b >= ROWCOL_MIN_ROWS && r <= rowcol_max_row(k);
}

/* A reduction of kernel k's domain over exactly the kept dims. */
static bool is_column_of(const fg_kernel *k, const fg_node *n) {
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  if (!same_shape(&n->in[0]->type, k->rank, k->dims))
    return false;
  for (int i = 0; i < k->rank; i++)
    if (mask[i] == k->mask[i])
      return false;
  return true;
}

/* A reduction of a row-shaped value over all of it. */
static bool is_tail_of(const fg_kernel *k, const fg_node *n) {
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  const fg_type *t = &n->in[0]->type;
  if (!fg_plan_row_shaped(k, t))
    return false;
  for (int i = 0; i < t->rank; i++)
    if (!mask[i] && t->dims[i].size != 1)
      return false;
  return true;
}

/* A column kernel beside a row kernel over the same domain: say why the
 * row + column form did not take its reductions (the plan prints it). */
static void explain_fallbacks(fg_plan *p) {
  for (int c = 0; c < p->nkernels; c++) {
    fg_kernel *kc = &p->kernels[c];
    if (kc->kind != FG_KERNEL_COLUMN)
      continue;
    for (int r = 0; r < p->nkernels; r++) {
      const fg_kernel *kr = &p->kernels[r];
      if (kr->kind != FG_KERNEL_ROW || kr->rank != kc->rank)
        continue;
      bool match = true;
      for (int d = 0; d < kr->rank && match; d++)
        match = kr->dims[d] == kc->dims[d] && kr->mask[d] != kc->mask[d];
      if (!match)
        continue;
      int64_t b = 1, len = 1;
      for (int d = 0; d < kr->rank; d++) {
        if (kr->mask[d])
          len *= kr->dims[d];
        else
          b *= kr->dims[d];
      }
      kc->not_with = r;
      if (b < ROWCOL_MIN_ROWS)
        kc->not_with_why = "fewer than 64 rows: the row + column form is no faster (measured)";
      else if (len > rowcol_max_row(kr))
        kc->not_with_why = kr->ncols + kr->ntails == 0
                               ? "rows longer than 16384 elements do not stay in registers beside "
                                 "column accumulators"
                               : "rows longer than 8192 elements do not stay in registers beside "
                                 "several column reductions";
      else if (kr->ncols + kr->ntails >= ROWCOL_MAX_LATE)
        kc->not_with_why =
            "the row kernel already has the most column reductions it keeps in registers";
      else
        kc->not_with_why = "its reductions use values the row kernel cannot give while rows stream";
      break;
    }
  }
}

/* Whether k holds the most reductions of its domain the code generator
 * lowers in one kernel (schedule.c's within_limits): another one starts a
 * new kernel (the backward of a stack of layers sums many bias gradients
 * over the same columns). */
static bool reductions_full(const fg_kernel *k) {
  return (k->kind == FG_KERNEL_COLUMN && k->nreds >= FG_MAX_COLUMN_REDUCTIONS) ||
         (k->kind == FG_KERNEL_ROW && k->nreds >= FG_MAX_ROW_REDUCTIONS);
}

/* ---- what grouping keeps between values ----
 * Stored values join kernels one by one in graph order, and each asks
 * about the kernels it might join: its walk flags, the buffers the kernel
 * would load. Answered afresh each time, with arrays the size of the
 * graph cleared for every question, a chain of 400,000 pointwise ops
 * (kernels of some 60,000 ops, a value stored every 257) walked its whole
 * kernel again for every stored value: 30 s of segmentation, O(n^2) in
 * the clearing. The answers are kept, for the last GROUP_MEMOS kernels
 * asked about, and stay true: the plan only changes where the value being
 * placed is (its kernel, its kernel's lists), and the walks see only that
 * value and the values before it, whose kernels are final. So once a
 * value is placed its own flags are dropped (group_placed), and a kernel
 * whose kind or domain changes (its first reduction, a scan taking it
 * over) is walked afresh. */
enum { GROUP_MEMOS = 4 };

typedef struct kernel_memo {
  int k;               /* -1: unused */
  int last_use;        /* the least recently used one is replaced */
  fg_kernel_kind kind; /* kernel k as the answers saw it */
  int rank;
  int64_t dims[FG_MAX_RANK];
  bool mask[FG_MAX_RANK];
  walker walk;     /* its walk flags */
  cone_walk loads; /* marks the values k's outputs are computed from */
  int nloads;      /* the buffers among them k loads; -1 not counted yet */
} kernel_memo;

typedef struct grouper {
  fg_plan *p;
  int nstored; /* stored values (fixed while grouping) */
  int clock;
  kernel_memo memo[GROUP_MEMOS];
  cone_walk scratch; /* for walks that keep nothing */
} grouper;

/* m knows nothing, and is the first one to reuse. */
static void memo_drop(kernel_memo *m) {
  m->k = -1;
  m->last_use = 0;
}

static bool grouper_init(grouper *gr, fg_plan *p) {
  *gr = (grouper){.p = p};
  for (int i = 0; i < p->g->next_value_id; i++)
    gr->nstored += p->store[i].stored;
  for (int i = 0; i < GROUP_MEMOS; i++)
    memo_drop(&gr->memo[i]);
  return cone_init(&gr->scratch, p->g);
}

static void grouper_free(grouper *gr) {
  for (int i = 0; i < GROUP_MEMOS; i++) {
    walker_free(&gr->memo[i].walk);
    cone_free(&gr->memo[i].loads);
  }
  cone_free(&gr->scratch);
}

static bool memo_current(const kernel_memo *m, const fg_kernel *k) {
  if (m->k != k->id || m->kind != k->kind || m->rank != k->rank)
    return false;
  for (int d = 0; d < k->rank; d++)
    if (m->dims[d] != k->dims[d] || m->mask[d] != k->mask[d])
      return false;
  return true;
}

/* m starts over for kernel k: nothing known. */
static void memo_take(kernel_memo *m, const fg_kernel *k) {
  m->k = k->id;
  m->kind = k->kind;
  m->rank = k->rank;
  for (int d = 0; d < k->rank; d++) {
    m->dims[d] = k->dims[d];
    m->mask[d] = k->mask[d];
  }
  walker_restart(&m->walk, k->id);
  cone_restart(&m->loads);
  m->nloads = -1;
}

/* What grouping knows of kernel k, if anything (NULL: nothing, or k has
 * changed since). */
static kernel_memo *memo_find(grouper *gr, const fg_kernel *k) {
  for (int i = 0; i < GROUP_MEMOS; i++) {
    kernel_memo *m = &gr->memo[i];
    if (m->k != k->id)
      continue;
    if (!memo_current(m, k)) {
      memo_drop(m);
      return NULL;
    }
    m->last_use = ++gr->clock;
    return m;
  }
  return NULL;
}

/* m's arrays, allocated at its first use. */
static bool memo_alloc(kernel_memo *m, const fg_plan *p) {
  if (m->walk.seen.mark && m->walk.memo && m->loads.seen.mark)
    return true;
  walker_free(&m->walk);
  cone_free(&m->loads);
  bool ok = walker_init(&m->walk, p, -1);
  return cone_init(&m->loads, p->g) && ok;
}

/* Kernel k's memo, started in the least recently used one if need be.
 * NULL: out of memory. */
static kernel_memo *memo_of(grouper *gr, const fg_kernel *k) {
  kernel_memo *m = memo_find(gr, k);
  if (m)
    return m;
  m = &gr->memo[0];
  for (int i = 1; i < GROUP_MEMOS; i++)
    if (gr->memo[i].last_use < m->last_use)
      m = &gr->memo[i];
  if (!memo_alloc(m, gr->p))
    return NULL;
  memo_take(m, k);
  m->last_use = ++gr->clock;
  return m;
}

/* v's flags relative to kernel k (none when out of memory). */
static walk_flags flags_of(grouper *gr, const fg_kernel *k, const fg_value *v) {
  kernel_memo *m = memo_of(gr, k);
  return m ? walk_value(&m->walk, v) : (walk_flags){0};
}

/* May stored value v (not yet in a kernel) join kernel k? */
static bool can_join(grouper *gr, const fg_kernel *k, const fg_value *v) {
  const fg_plan *p = gr->p;
  const fg_node *n = v->def;
  if (k->kind == FG_KERNEL_ATTENTION || k->kind == FG_KERNEL_ATTENTION_BWD ||
      fg_kernel_is_scatter(k->kind))
    return false; /* its own sdpa's, sdpa_bwd's or index_add's results only (group_into_kernels) */
  kernel_memo *memo = memo_of(gr, k);
  if (!memo)
    return false;
  walker *w = &memo->walk;
  if (fg_kernel_is_scan(k->kind))
    return scan_can_join(w, k, v);
  walk_flags f = walk_value(w, v);
  if (f.crosses_segment)
    return false;
  bool is_red = n->op->kind == FG_KIND_REDUCTION;
  if (!has_reductions(k)) {
    if (is_red)
      return same_shape(&n->in[0]->type, k->rank, k->dims);
    return same_shape(&v->type, k->rank, k->dims);
  }
  bool late = f.reaches_col || f.reaches_tail;
  if (is_red) {
    bool mask[FG_MAX_RANK];
    fg_reduce_mask(n, mask);
    if (same_shape(&n->in[0]->type, k->rank, k->dims) && same_mask(k, mask)) {
      if (late || reductions_full(k))
        return false;
      if (!f.reaches_red)
        return true;
      if (k->kind == FG_KERNEL_COLUMN)
        return !f.bad_path && column_variance_ok(k, n) && reads_rows_in_place(w, k, v);
      return k->kind == FG_KERNEL_ROW && !f.bad_path &&
             (!few_rows(p, k) || one_pass_variance_ok(p, k, n)) && reads_rows_in_place(w, k, v);
    }
    /* The row + column form: a weight gradient beside the row work, or a
     * tensor-wide result from the rows' results. */
    return rowcol_ok(p, k) && !late && !f.bad_path && (is_column_of(k, n) || is_tail_of(k, n));
  }
  if (late) {
    /* Written by the combining CTAs: values of the late reductions only. */
    if (f.reaches_red || f.bad_path || (f.reaches_col && f.reaches_tail))
      return false;
    return f.reaches_col ? col_shaped(k, &v->type) : fg_type_numel(&v->type) == 1;
  }
  if (same_shape(&v->type, k->rank, k->dims)) {
    if (!f.reaches_red)
      return true;
    return k->kind == FG_KERNEL_ROW && !f.bad_path && !few_unclustered_rows(p, k) &&
           reads_rows_in_place(w, k, v);
  }
  if (fg_plan_row_shaped(k, &v->type))
    return !f.bad_path && (!f.reaches_red || reads_rows_in_place(w, k, v));
  return false;
}

bool fg_plan_uses_rows(const fg_plan *p, const fg_kernel *k, const fg_value *v) {
  return walk_once(p, k->id, v).reaches_red;
}

fg_phase fg_plan_phase(const fg_plan *p, const fg_kernel *k, const fg_value *v) {
  if (!k->ncols && !k->ntails)
    return FG_PHASE_ROWS;
  if (v->def && in_list(k->cols, k->ncols, v->def))
    return FG_PHASE_COLUMNS;
  if (v->def && in_list(k->tails, k->ntails, v->def))
    return FG_PHASE_TAIL;
  walk_flags f = walk_once(p, k->id, v);
  return f.reaches_col ? FG_PHASE_COLUMNS : f.reaches_tail ? FG_PHASE_TAIL : FG_PHASE_ROWS;
}

/* earliest_kernel's walk: the newest kernel among the stored values. */
typedef struct newest_kernel {
  const fg_plan *p;
  int k;
} newest_kernel;

static bool newest_stop(void *ctx, const fg_value *v) {
  newest_kernel *c = ctx;
  if (v->param_index >= 0)
    return true;
  const fg_storage *s = &c->p->store[v->id];
  if (!s->stored || s->kernel < 0)
    return false;
  if (s->kernel > c->k)
    c->k = s->kernel;
  return true;
}

/* The newest kernel that every value of vals[0..n) loads from memory is
 * ready for (-1: any); false: out of memory. */
static bool earliest_kernel(grouper *gr, fg_value *const *vals, int n, int *k) {
  newest_kernel c = {gr->p, -1};
  cone_restart(&gr->scratch);
  for (int i = 0; i < n; i++)
    if (!cone_visit(&gr->scratch, vals[i], newest_stop, &c))
      return false;
  *k = c.k;
  return true;
}

/* The buffers a kernel may take: one kernel parameter each, within the
 * backend's limit (FGB_MAX_KERNEL_PARAMS, 256) less a margin for the
 * scheduler's workspace arguments (partials, counters). A kernel that
 * would take more is split: v starts a new one (a foreach-style update of
 * a hundred tensors became one kernel of 301 arguments: internal error). */
enum { MAX_KERNEL_BUFFERS = 256 - 8 };

/* The walk counting the buffers kernel k loads: each once, not past those
 * already counted (known: k's outputs' walk, or NULL). */
typedef struct load_count {
  const fg_plan *p;
  int k;
  const value_set *known;
  int n;
} load_count;

static bool count_load(void *ctx, const fg_value *v) {
  load_count *c = ctx;
  if (c->known && vset_has(c->known, v))
    return true;
  if (!fg_plan_in_memory(c->p, v, c->k))
    return false;
  c->n++;
  return true;
}

/* Adds the buffers output v of m's kernel loads to m's count. false: out
 * of memory (m is then dropped). */
static bool add_loads(const fg_plan *p, kernel_memo *m, const fg_value *v) {
  load_count c = {p, m->k, NULL, 0};
  if (!cone_visit(&m->loads, v, count_load, &c)) {
    memo_drop(m);
    return false;
  }
  m->nloads += c.n;
  return true;
}

/* The buffers kernel k's outputs load: counted once, then kept up to date
 * as values join k (group_placed). */
static bool loads_counted(const fg_plan *p, kernel_memo *m, const fg_kernel *k) {
  if (m->nloads >= 0)
    return true;
  m->nloads = 0;
  for (int i = 0; i < k->nouts; i++)
    if (!add_loads(p, m, k->outs[i]))
      return false;
  return true;
}

/* Whether k still takes at most MAX_KERNEL_BUFFERS buffers with v added. */
static bool args_fit(grouper *gr, const fg_kernel *k, const fg_value *v) {
  if (k->nouts + 1 > MAX_KERNEL_BUFFERS)
    return false;
  /* cheap bound first: every parameter and every stored value */
  if (k->nouts + 1 + gr->p->g->nparams + gr->nstored <= MAX_KERNEL_BUFFERS)
    return true;
  kernel_memo *m = memo_of(gr, k);
  if (!m || !loads_counted(gr->p, m, k))
    return false;
  /* v's new buffers: a walk of its own, ending where k's outputs' went */
  load_count c = {gr->p, k->id, &m->loads.seen, 0};
  cone_restart(&gr->scratch);
  if (!cone_visit(&gr->scratch, v, count_load, &c))
    return false;
  return k->nouts + 1 + m->nloads + c.n <= MAX_KERNEL_BUFFERS;
}

/* v has its kernel. Its own flags, walked while it was a candidate, are
 * forgotten (see "what grouping keeps between values"), and its kernel's
 * count of loaded buffers takes in v's. */
static void group_placed(grouper *gr, const fg_value *v) {
  for (int i = 0; i < GROUP_MEMOS; i++)
    if (gr->memo[i].k >= 0)
      vset_remove(&gr->memo[i].walk.seen, v);
  int k = gr->p->store[v->id].kernel;
  kernel_memo *m = k >= 0 ? memo_find(gr, &gr->p->kernels[k]) : NULL;
  if (m && m->nloads >= 0)
    add_loads(gr->p, m, v);
}

/* Which kernel v joins: among the kernels that come after every stored
 * value v needs (those may also be computed by the kernel itself), prefer
 * one whose reductions v uses (normalization), else the newest that fits. */
static fg_kernel *pick_kernel(grouper *gr, const fg_value *v) {
  fg_plan *p = gr->p;
  int lo;
  if (!earliest_kernel(gr, v->def->in, v->def->nin, &lo))
    return NULL;
  fg_kernel *fallback = NULL;
  for (int ki = p->nkernels - 1; ki >= 0 && ki >= lo; ki--) {
    fg_kernel *k = &p->kernels[ki];
    /* Kernels after ki that v needs force ki = lo at least; a dependency
     * on kernel j > ki rules ki out (checked by lo). */
    if (!can_join(gr, k, v) || !args_fit(gr, k, v))
      continue;
    if (has_reductions(k)) {
      walk_flags f = flags_of(gr, k, v);
      if (f.reaches_red || f.reaches_col || f.reaches_tail)
        return k;
    }
    if (!fallback)
      fallback = k;
  }
  return fallback;
}

static void add_to_kernel(fg_plan *p, fg_kernel *k, fg_value *v) {
  fg_node *n = v->def;
  p->store[v->id].kernel = k->id;
  if (n->op->kind == FG_KIND_REDUCTION) {
    bool mask[FG_MAX_RANK];
    fg_reduce_mask(n, mask);
    if (!has_reductions(k)) {
      set_domain(k, &n->in[0]->type, mask);
      k->kind = reduction_kind(k);
    }
    /* as can_join decided: the kernel's own reductions have its domain and
     * mask; a reduction over all of a row result is a tail even when that
     * result has the domain's shape (a keepdim row sum over a size-1 dim) */
    if (is_column_of(k, n))
      push_node(p->g, &k->cols, &k->ncols, n);
    else if (same_shape(&n->in[0]->type, k->rank, k->dims) && same_mask(k, mask))
      push_node(p->g, &k->reds, &k->nreds, n);
    else
      push_node(p->g, &k->tails, &k->ntails, n);
  }
  push_value(p->g, &k->outs, &k->nouts, v);
}

static void start_kernel(fg_plan *p, fg_value *v) {
  fg_kernel *k = new_kernel(p);
  k->kind = FG_KERNEL_POINTWISE;
  set_domain(k, &v->type, NULL);
  add_to_kernel(p, k, v);
}

/* ---- results: views of parameters or of other results ---- */

static void start_attention_kernel(fg_plan *p, fg_node *n) {
  fg_kernel *k = new_kernel(p);
  k->kind = FG_KERNEL_ATTENTION;
  k->attn = n;
  set_domain(k, &n->out[0]->type, NULL);
  add_to_kernel(p, k, n->out[0]);
}

/* issue 20: an index_add or scatter_add node as its five kernels
 * (plan.h), sharing its four i32 temps. Each destination slice (each
 * element, for scatter_add) is a bin; the scan's CTA takes scat_seg
 * consecutive bins a thread (16-byte loads), so the counts and offsets are
 * padded to scat_threads x scat_seg bins (zero counts). */
static int scatter_temp(fg_plan *p, int64_t elems, bool zero) {
  fg_temp t = {4 * (elems > 0 ? elems : 1), zero, NULL, NULL};
  /* symidx: sources a*T + b (symbolic.h), one more slot than their count,
   * so that the temp is never empty (SUM loads a segment's first source
   * from a clamped slot before it knows the segment is not empty): bytes
   * the stand-in's 4 (a*T + b), what the scheduler reads (the kernel's
   * extents at T's largest), and the plan's formula 4 (a*T + b) + 4 */
  if (fg_sym_involves(&p->sym, elems)) {
    fg_arena *a = &p->g->arena;
    t.bytes = 4 * elems;
    t.bytes_formula = p->sym.affine
                          ? fg_sym_formula(&p->sym, 4 * elems + 4, a)
                          : fg_arena_printf(a, "%s+4", fg_sym_formula(&p->sym, 4 * elems, a));
  }
  p->temps = fg_arena_append(&p->g->arena, p->temps, &p->ntemps, &t, sizeof t);
  return p->ntemps - 1;
}

enum { SCAN_MAX_THREADS = 1024 };

/* scatter2: the sources a thread of the fused sort's CTA may take, its
 * bins held in registers and each step's accesses issued at once; and the
 * scattered (uncoalesced) 4-byte accesses its steps make a source: the
 * count's atomic, the fill's atomic and store, the order's segment bounds
 * and store. */
enum { SORT_MAX_ROUNDS = 16, SORT_SCATTERED = 5 };
/* embscan: the fused sort keeps its counts, offsets and filled positions
 * (i32) in shared memory where they take at most this many bytes (static
 * shared memory stops at 48 KB; the scan's own array is 256 bytes) */
enum { SORT_SMEM_BYTES = 40 * 1024 };

static int64_t scatter_bins(const fg_node *n) {
  if (n->op->code == FG_OP_INDEX_ADD) {
    fg_index_map m;
    fg_index_map_of(n, &m);
    return m.size;
  }
  int64_t e = 1;
  for (int d = 0; d < n->in[0]->type.rank; d++)
    e *= n->in[0]->type.dims[d].size;
  return e;
}

static int64_t scatter_sources(const fg_node *n) {
  int64_t e = 1;
  for (int d = 0; d < n->in[1]->type.rank; d++)
    e *= n->in[1]->type.dims[d].size;
  return e;
}

/* Whether the count, scan, fill and order steps run as one CTA (SORT):
 * one SM then makes every scattered access, about one a clock, which must
 * take less time than the three launches it saves (opt/target.h); the
 * knob SCATTER_SORT overrides the rule (the scheduler's knobs, read here
 * because the choice decides the kernels). */
static bool scatter_fused(const fg_plan *p, int64_t sources, int64_t threads) {
  int64_t v;
  if (!sources) /* an empty domain is not launched: the scan kernel writes the offsets */
    return false;
  /* symidx: sources a*T + b, fused only where T's declared range proves
   * the CTA takes them all (at T's largest) and never none (at its
   * smallest: the sort's CTA is launched, its grid static) */
  if (fg_sym_involves(&p->sym, sources)) {
    int64_t a, b;
    fg_sym_split(&p->sym, sources, &a, &b);
    if (a * p->sym.min + b <= 0)
      return false;
    sources = fg_sym_at_max(&p->sym, sources);
  }
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_SCATTER_SORT, &v))
    return v && sources <= threads * SORT_MAX_ROUNDS;
  double us = (double)sources * SORT_SCATTERED / (p->target.clock_ghz * 1e3);
  return sources <= threads * SORT_MAX_ROUNDS && us <= 3 * p->target.launch_us;
}

/* embscan: the SCAN kernel's CTAs (threads, 4 bins a thread, and ranges of
 * chunks of 4 x threads bins, at most SCAN_MAX_CTAS ranges), so that each
 * CTA's loads are one coalesced pass and the bins' scan is spread over SMs */
enum { SCAN_CTA_THREADS = 256, SCAN_MAX_CTAS = 1024 };

/* The scan's shape: threads a CTA, bins a thread (a multiple of 4) and
 * CTAs. The fused sort's is one CTA of its own threads; the SCAN
 * kernel's, CTAs of at most SCAN_CTA_THREADS threads, each a range of
 * consecutive bins, as many chunks of 4 x threads bins as keep the CTAs
 * at most SCAN_MAX_CTAS. */
static void scatter_scan_shape(int64_t bins, int64_t sort_threads, int64_t *threads, int64_t *seg,
                               int64_t *ctas) {
  if (sort_threads) {
    *threads = sort_threads;
    *seg = ((bins + sort_threads - 1) / sort_threads + 3) / 4 * 4;
    *ctas = 1;
    return;
  }
  int64_t t = (bins + 3) / 4;
  t = t < 32 ? 32 : t > SCAN_CTA_THREADS ? SCAN_CTA_THREADS : (t + 31) / 32 * 32;
  int64_t chunks = (bins + 4 * t - 1) / (4 * t);
  int64_t per = (chunks + SCAN_MAX_CTAS - 1) / SCAN_MAX_CTAS;
  *threads = t;
  *seg = 4 * per;
  *ctas = (chunks + per - 1) / per;
}

/* embscan: an index_add's SUM alone, each CTA selecting its slices'
 * sources from the whole index (a block-wide compaction in ascending
 * position, SELECT_ROUND sources a round), where the index is along dim 0
 * (a CTA's elements are then a run of slices), its sources static and at
 * most SELECT_MAX_SOURCES (a CTA's shared list), and the index elements
 * all CTAs read together at most SELECT_MAX_LOADS (about the SUM's CTAs,
 * its result's elements / SELECT_CTA_ELEMS, times the sources): there it
 * costs less than the sort's kernel before the SUM. The knob
 * SCATTER_SELECT overrides the last rule. */
enum {
  SELECT_MAX_SOURCES = 2048,
  SELECT_MAX_LOADS = 1 << 22,
  SELECT_CTA_ELEMS = 1024,
};

static bool scatter_select(const fg_plan *p, const fg_node *n, int64_t sources) {
  if (n->op->code != FG_OP_INDEX_ADD || fg_sym_involves(&p->sym, sources) || sources <= 0 ||
      sources > SELECT_MAX_SOURCES)
    return false;
  fg_index_map m;
  fg_index_map_of(n, &m);
  if (m.dim != 0)
    return false;
  int64_t v;
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_SCATTER_SELECT, &v))
    return v;
  int64_t elems = 1;
  for (int d = 0; d < n->out[0]->type.rank; d++)
    elems *= n->out[0]->type.dims[d].size;
  int64_t ctas = (elems + SELECT_CTA_ELEMS - 1) / SELECT_CTA_ELEMS;
  return ctas * sources <= SELECT_MAX_LOADS;
}

static void start_scatter_kernels(fg_plan *p, fg_node *n) {
  int64_t bins = scatter_bins(n), sources = scatter_sources(n);
  if (scatter_select(p, n, sources)) {
    fg_kernel *k = new_kernel(p);
    k->kind = FG_KERNEL_SCATTER_SUM;
    k->scat = n;
    k->scat_bins = bins;
    k->scat_sources = sources;
    k->scat_cnt = k->scat_off = k->scat_fill = k->scat_order = -1;
    k->scat_select = true;
    set_domain(k, &n->out[0]->type, NULL);
    add_to_kernel(p, k, n->out[0]);
    return;
  }
  int64_t threads = (bins + 3) / 4;
  threads = threads < 32                 ? 32
            : threads > SCAN_MAX_THREADS ? SCAN_MAX_THREADS
                                         : (threads + 31) / 32 * 32;
  /* the fused sort's CTA: at least the threads its sources need */
  int64_t want = (fg_sym_at_max(&p->sym, sources) + SORT_MAX_ROUNDS - 1) / SORT_MAX_ROUNDS;
  want = want > SCAN_MAX_THREADS ? SCAN_MAX_THREADS : (want + 31) / 32 * 32;
  bool fused = scatter_fused(p, sources, threads > want ? threads : want);
  if (fused && want > threads)
    threads = want;
  int64_t seg, ctas;
  scatter_scan_shape(bins, fused ? threads : 0, &threads, &seg, &ctas);
  int64_t pad = ctas * threads * seg;
  /* the ranges' counts after the bins' (SCAN kernels of several CTAs) */
  int cnt = scatter_temp(p, pad + (ctas > 1 ? ctas : 0), true);
  int off = scatter_temp(p, pad + 1, false);
  int fill = scatter_temp(p, sources, false), order = scatter_temp(p, sources, false);
  fg_type one = {.dtype = FG_I32, .rank = 1};
  for (fg_kernel_kind kind = FG_KERNEL_SCATTER_COUNT; kind <= FG_KERNEL_SCATTER_SUM; kind++) {
    if (fused && kind != FG_KERNEL_SCATTER_COUNT && kind != FG_KERNEL_SCATTER_SUM)
      continue;
    fg_kernel *k = new_kernel(p);
    k->kind = fused && kind == FG_KERNEL_SCATTER_COUNT ? FG_KERNEL_SCATTER_SORT : kind;
    k->scat = n;
    k->scat_bins = bins;
    k->scat_sources = sources;
    k->scat_pad = pad;
    k->scat_cnt = cnt;
    k->scat_off = off;
    k->scat_fill = fill;
    k->scat_order = order;
    k->scat_seg = (int)seg;
    k->scat_threads = (int)threads;
    k->scat_ctas = (int)ctas;
    if (k->kind == FG_KERNEL_SCATTER_SORT) {
      k->scat_rounds = (int)((fg_sym_at_max(&p->sym, sources) + threads - 1) / threads);
      k->scat_smem = 4 * (2 * pad + 1 + fg_sym_at_max(&p->sym, sources)) <= SORT_SMEM_BYTES;
    }
    one.dims[0].size = kind == FG_KERNEL_SCATTER_SCAN ? pad : sources;
    set_domain(k, kind == FG_KERNEL_SCATTER_SUM ? &n->out[0]->type : &one, NULL);
    if (kind == FG_KERNEL_SCATTER_SUM)
      add_to_kernel(p, k, n->out[0]);
  }
}

/* A column scan's chunks. Its threads (columns / vec, vec as schedule.c
 * schedule_scan picks it: 2 columns a thread) keep about
 * FG_SCAN_THREAD_BYTES each in flight. Where they are at least a 24th of
 * the GPU's thread slots, one pass. Fewer (few columns), the scanned
 * extent is cut into chunks until all chunks' threads make an eighth of
 * the slots, of at least SCAN_MIN_CHUNK rows, at most SCAN_MAX_CHUNKS of
 * them: the chunk sums kernel then reads the input once more, but every
 * chunk is walked at once. Fit to run U1's grid of vectors and chunks over
 * eight shapes (one pass the fastest from 16384 threads up, chunks from
 * 8192 down; the 24th lies between) and checked on seven others in U2
 * (within 10% of the grid's best on each; docs/benchmarks.md, twelfth
 * session). The knob SCAN_CHUNKS overrides the rule (read here because the
 * choice decides the kernels, as SCATTER_SORT's). Never over a symbolic
 * size: one pass, bounded at run time. */
enum { SCAN_MIN_CHUNK = 64, SCAN_MAX_CHUNKS = 64 };

static int scan_chunks(const fg_plan *p, const fg_node *n, int64_t columns, int64_t len,
                       int64_t last) {
  int64_t v;
  if (p->sym.n)
    return 1; /* the chunk sums are laid out by static extents */
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_SCAN_CHUNKS, &v))
    return (int)(v < len ? v : len > 0 ? len : 1);
  if (columns <= 0)
    return 1;
  int wsz = fg_dtype_size(n->in[0]->type.dtype), osz = fg_dtype_size(n->out[0]->type.dtype);
  if (osz > wsz)
    wsz = osz;
  int vec = 16 / wsz; /* the scheduler's: 16 bytes along the last dim, then narrowed */
  while (vec > 1 && last % vec)
    vec /= 2;
  vec = fg_plan_scan_vec(p, vec);
  int64_t slots = (int64_t)p->target.sm_count * p->target.threads_per_sm;
  int64_t threads = (columns + vec - 1) / vec;
  if (threads >= slots / 24)
    return 1;
  int64_t want = (slots / 8 + threads - 1) / threads;
  if (want > len / SCAN_MIN_CHUNK)
    want = len / SCAN_MIN_CHUNK;
  if (want > SCAN_MAX_CHUNKS)
    want = SCAN_MAX_CHUNKS;
  return want > 1 ? (int)want : 1;
}

/* issue 17 (scanpar): a row scan whose rows, a CTA of SCAN_ROW_BLOCK
 * threads each, fill fewer than the CTAs the GPU holds at once (perf
 * fuzzing g20261179: one row of 6291456 f16, one CTA, 1587 us against
 * eager's 1085) is cut into chunks of a multiple of SCAN_ROW_QUANTUM
 * elements, as many as make up the difference and at most
 * SCAN_ROW_BLOCK (the scan kernel sums the chunk sums before its own a
 * thread each, in a fixed tree: the same bits on every run), none shorter
 * than 2 quanta. Static sizes only (the chunk sums' temp and the grid
 * would be formulas of T: not done; the plan says so). *len_out: the
 * chunk's length. */
enum { SCAN_ROW_BLOCK = 1024, SCAN_ROW_QUANTUM = 8192 };

static int scan_row_chunks(const fg_plan *p, int64_t rows, int64_t len, int64_t *len_out) {
  int64_t v, resident = (int64_t)p->target.sm_count * (p->target.threads_per_sm / SCAN_ROW_BLOCK);
  *len_out = len;
  if (p->sym.n || rows <= 0 || len < 2 * SCAN_ROW_QUANTUM)
    return 1;
  int64_t want = (resident + rows - 1) / rows, most = len / (2 * SCAN_ROW_QUANTUM);
  if (fg_knob_get(&p->opts.knobs, FG_KNOB_SCAN_CHUNKS, &v))
    want = v, most = (len + SCAN_ROW_QUANTUM - 1) / SCAN_ROW_QUANTUM;
  if (want > most)
    want = most;
  if (want > SCAN_ROW_BLOCK)
    want = SCAN_ROW_BLOCK;
  if (want <= 1)
    return 1;
  int64_t q = ((len + want - 1) / want + SCAN_ROW_QUANTUM - 1) / SCAN_ROW_QUANTUM;
  *len_out = q * SCAN_ROW_QUANTUM;
  return (int)((len + *len_out - 1) / *len_out);
}

/* A pointwise kernel over cumsum n's domain that may become its scan
 * kernel, or its chunk sums kernel where the scanned extent is cut into
 * chunks: the newest one after every kernel n's input needs. Its outputs are then
 * written from the scan's walk, and n's input, which it may have stored
 * (g34 of the perf fuzzing: v1 = sinh(p1) a result, v4 = cumsum(v1)), is
 * computed inline instead of read back. */
static fg_kernel *scan_host(grouper *gr, const fg_node *n) {
  fg_plan *p = gr->p;
  int lo;
  if (!earliest_kernel(gr, n->in, 1, &lo))
    return NULL;
  const fg_type *t = &n->in[0]->type;
  for (int ki = p->nkernels - 1; ki >= 0 && ki >= lo; ki--) {
    fg_kernel *k = &p->kernels[ki];
    if (k->kind == FG_KERNEL_POINTWISE && same_shape(t, k->rank, k->dims) &&
        args_fit(gr, k, n->out[0]))
      return k;
  }
  return NULL;
}

/* cumsum n as its scan kernel (plan.h), after its chunk sums kernel when
 * the scanned extent is cut into chunks; the domain is n's input's shape
 * with its dim marked. */
static void start_scan_kernels(grouper *gr, fg_node *n) {
  fg_plan *p = gr->p;
  const fg_type *t = &n->in[0]->type;
  int dim = (int)fg_attr_int(n, "dim");
  if (dim < 0)
    dim += t->rank;
  bool mask[FG_MAX_RANK] = {false};
  mask[dim] = true;
  int64_t outer = 1, inner = 1, len = t->dims[dim].size;
  for (int d = 0; d < t->rank; d++)
    if (d < dim)
      outer *= t->dims[d].size;
    else if (d > dim)
      inner *= t->dims[d].size;
  int64_t clen = len;
  int chunks = inner > 1 ? scan_chunks(p, n, outer * inner, len, t->dims[t->rank - 1].size)
                         : scan_row_chunks(p, outer, len, &clen);
  if (inner > 1)
    clen = (len + chunks - 1) / chunks;
  int temp = -1;
  if (chunks > 1) {
    int64_t bytes =
        chunks * outer * inner * fg_dtype_size(fg_reduce_acc_dtype(n->out[0]->type.dtype));
    fg_temp tt = {bytes > 0 ? bytes : 1, false, NULL, NULL};
    p->temps = fg_arena_append(&p->g->arena, p->temps, &p->ntemps, &tt, sizeof tt);
    temp = p->ntemps - 1;
  }
  /* the host becomes the scan kernel, or with chunks the chunk sums
   * kernel (its outputs do not use the cumsum: they were there before it;
   * issue 17 scanpar, g20261200: one pass less over the input) */
  fg_kernel *host = scan_host(gr, n);
  for (int pass = chunks > 1 ? 0 : 1; pass < 2; pass++) {
    fg_kernel *k = host && pass == (chunks > 1 ? 0 : 1) ? host : new_kernel(p);
    k->kind = pass ? FG_KERNEL_SCAN : FG_KERNEL_SCAN_CHUNKS;
    set_domain(k, t, mask);
    k->outer = outer;
    k->red = len;
    k->inner = inner;
    k->scan_chunks = chunks;
    k->scan_chunk_len = chunks > 1 ? clen : len;
    k->scan_temp = temp;
    push_node(p->g, &k->reds, &k->nreds, n);
    if (pass) {
      p->store[n->out[0]->id].kernel = k->id;
      push_value(p->g, &k->outs, &k->nouts, n->out[0]);
    }
  }
}

/* The values a kernel computes from: its outputs (a reduction's input),
 * or for the scatter kernels the operands each reads (the index; the
 * operand and the source, and a select's index), at most nouts + 3. */
static int kernel_roots(const fg_kernel *k, const fg_value **roots) {
  if (k->kind == FG_KERNEL_SCAN_CHUNKS) { /* and a host's outputs (start_scan_kernels) */
    roots[0] = k->reds[0]->in[0];
    for (int i = 0; i < k->nouts; i++)
      roots[1 + i] = k->outs[i];
    return 1 + k->nouts;
  }
  if (fg_kernel_is_scatter(k->kind)) {
    if (k->kind == FG_KERNEL_SCATTER_SCAN)
      return 0;
    if (k->kind != FG_KERNEL_SCATTER_SUM) {
      roots[0] = k->scat->in[1];
      return 1;
    }
    roots[0] = k->scat->in[0];
    roots[1] = k->scat->in[2];
    roots[2] = k->scat->in[1]; /* the select reads the index too */
    return k->scat_select ? 3 : 2;
  }
  for (int i = 0; i < k->nouts; i++) {
    const fg_node *n = k->outs[i]->def;
    roots[i] = n->op->kind == FG_KIND_REDUCTION ? n->in[0] : k->outs[i];
  }
  return k->nouts;
}

/* issue 19: a part of sdpa_bwd n (plan.h), starting with result v (dq for
 * the dq kernel, dk for the dk, dv kernel, which dv joins). */
static void start_attention_bwd_kernel(fg_plan *p, fg_node *n, int part, fg_value *v) {
  fg_kernel *k = new_kernel(p);
  k->kind = FG_KERNEL_ATTENTION_BWD;
  k->attn = n;
  k->attn_part = part;
  k->attn_delta_temp = -1;
  set_domain(k, &v->type, NULL);
  add_to_kernel(p, k, v);
}

static bool is_base(const fg_value *v, const void *ctx) { return ((const bool *)ctx)[v->id]; }

/* The highest ancestor c of v through view ops whose dense storage holds
 * exactly v's bytes in v's row-major order (a reshape in all but name):
 * storing c in v's result buffer writes v, and lets c's kernel write it at
 * c's own shape (a materialized cat beside its reduction, say). */
static const fg_value *dense_ancestor(const fg_value *v) {
  const fg_value *best = v;
  const fg_node *chain[64];
  const fg_value *vals[64];
  int nc = 0;
  const fg_value *a = v;
  while (a->def && fg_is_view_op(a->def->op) && a->def->nout == 1 && nc < 64) {
    vals[nc] = a;
    chain[nc++] = a->def;
    a = a->def->in[0];
    if (a->param_index >= 0 || !fg_type_is_static(&a->type))
      break;
    if (fg_type_numel(&a->type) != fg_type_numel(&v->type))
      continue;
    fg_strided s;
    fg_type at = a->type;
    at.has_layout = false;
    fg_strided_dense(&at, &s);
    bool ok = true;
    for (int i = nc - 1; i >= 0 && ok; i--) {
      fg_strided t;
      const char *why;
      ok = fg_strided_apply(chain[i], 0, &s, &t, &why);
      s = t;
      (void)vals;
    }
    if (ok && fg_strided_is_dense(&s))
      best = a;
  }
  return best;
}

/* MX formats: a view of f4e2m1 storage must start on a byte and keep rows
 * of whole bytes (a pointer cannot address a nibble); else the result is
 * copied. NULL when the view is fine. */
static const char *packed_view_problem(const fg_strided *s, fg_dtype dt) {
  if (!fg_dtype_is_packed(dt))
    return NULL;
  bool ok = s->offset % 2 == 0 && s->rank > 0 && s->strides[s->rank - 1] == 1 &&
            s->sizes[s->rank - 1] % 2 == 0;
  for (int d = 0; ok && d + 1 < s->rank; d++)
    ok = s->strides[d] % 2 == 0 || s->sizes[d] == 1;
  return ok ? NULL : "an f4e2m1 view that does not start on a byte or keep whole bytes";
}

static bool plan_results(fg_plan *p, fg_diag *d) {
  fg_graph *g = p->g;
  bool *base_ok = calloc((size_t)g->next_value_id, 1);
  int *written_as = malloc((size_t)g->next_value_id * sizeof *written_as);
  if (!base_ok || !written_as) {
    free(base_ok);
    free(written_as);
    return false;
  }
  for (int i = 0; i < g->next_value_id; i++)
    written_as[i] = -1;
  for (int i = 0; i < g->nparams; i++)
    base_ok[g->params[i]->id] = !g->params[i]->type.scalar;
  p->results = fg_arena_alloc(&g->arena, (size_t)g->nresults * sizeof *p->results);
  /* Results in definition order, so a base result is decided before its views. */
  int *order = malloc((size_t)g->nresults * sizeof *order);
  int *pos = calloc((size_t)g->next_value_id, sizeof *pos);
  if (!order || !pos) {
    free(base_ok);
    free(written_as);
    free(order);
    free(pos);
    return false;
  }
  int at = 1;
  for (int i = 0; i < g->nparams; i++)
    pos[g->params[i]->id] = at++;
  for (fg_node *n = g->first; n; n = n->next)
    for (int i = 0; i < n->nout; i++)
      pos[n->out[i]->id] = at++;
  for (int i = 0; i < g->nresults; i++)
    order[i] = i;
  for (int i = 1; i < g->nresults; i++)
    for (int j = i; j > 0 && pos[g->results[order[j]]->id] < pos[g->results[order[j - 1]]->id];
         j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  bool ok = true;
  for (int oi = 0; oi < g->nresults && ok; oi++) {
    int i = order[oi];
    fg_value *v = g->results[i];
    fg_result_plan *r = &p->results[i];
    r->into = fg_result_into(g, i);
    if (v->type.scalar) {
      fg_error(d, g->result_locs[i], "result %d is a scalar; graphs return tensors", i);
      ok = false;
      break;
    }
    /* an in-place result is written into its parameter (opt/inplace.c
     * gave it a value of its own), unless it is that parameter */
    int into = fg_result_into(g, i);
    bool own = into >= 0 && v != g->params[into];
    if (!own && written_as[v->id] >= 0) { /* returned twice: the second is a view */
      r->is_view = true;
      r->base = (fg_buf_ref){FG_BUF_RESULT, written_as[v->id]};
      fg_type t = v->type;
      fg_strided_dense(&t, &r->view);
      continue;
    }
    const fg_value *base;
    fg_strided s;
    const char *why = NULL;
    if (!g->bookend && v->param_index < 0) {
      /* a parameter returned as it is involves no view op: still aliased */
      why = "bookending disabled (--disable-pass=bookend)";
    } else if (!own && fg_strided_chain(v, is_base, base_ok, &base, &s, &why) &&
               !(why = packed_view_problem(&s, v->type.dtype))) {
      r->is_view = true;
      r->base = base->param_index >= 0 ? (fg_buf_ref){FG_BUF_PARAM, base->param_index}
                                       : (fg_buf_ref){FG_BUF_RESULT, written_as[base->id]};
      r->view = s;
      continue;
    }
    r->why = why;
    const fg_value *c = g->bookend && !own ? dense_ancestor(v) : v;
    if (base_ok[c->id])
      c = v;
    written_as[v->id] = i;
    base_ok[v->id] = true;
    written_as[c->id] = i;
    base_ok[c->id] = true;
    p->store[c->id] = (fg_storage){true, {FG_BUF_RESULT, i}, -1, NULL, NULL};
  }
  free(base_ok);
  free(written_as);
  free(order);
  free(pos);
  return ok;
}

/* ---- kernel arguments ---- */

typedef struct argset {
  fg_plan *p;
  fg_kernel *k;
  fg_buf_ref *loads; /* collect_loads: the buffers found, in order */
  int nloads;
} argset;

static void add_arg(fg_plan *p, fg_kernel *k, fg_buf_ref b) {
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == b.kind && k->args[i].index == b.index)
      return;
  k->args = fg_arena_append(&p->g->arena, k->args, &k->nargs, &b, sizeof b);
}

/* The scatter kernels' temps, after the buffers they read and write. */
static void add_scatter_args(fg_plan *p, fg_kernel *k) {
  if (k->scat_select) /* no temps */
    return;
  int t[4] = {k->scat_cnt, k->scat_off, k->scat_fill, k->scat_order};
  for (int i = 0; i < 4; i++)
    add_arg(p, k, (fg_buf_ref){FG_BUF_TEMP, t[i]});
}

/* A walk (cone_visit) collecting the parameters a kernel reads, and
 * marking reductions of other kernels it needs as stored. */
static bool collect(void *ctx, const fg_value *v) {
  argset *a = ctx;
  fg_plan *p = a->p;
  if (v->param_index >= 0) {
    add_arg(p, a->k, (fg_buf_ref){FG_BUF_PARAM, v->param_index});
    return true;
  }
  fg_storage *s = &p->store[v->id];
  if (s->kernel >= 0 && s->kernel != a->k->id) {
    s->stored = true; /* needed here, so it must reach memory */
    return true;      /* buffers are known after temps are assigned */
  }
  return false;
}

/* A walk collecting the buffers other than parameters a kernel loads. */
static bool collect_loads(void *ctx, const fg_value *v) {
  argset *a = ctx;
  if (!fg_plan_in_memory(a->p, v, a->k->id))
    return false;
  if (v->param_index < 0)
    a->loads[a->nloads++] = a->p->store[v->id].buf;
  return true;
}

/* Inline expressions stay shallow. The lowering recurses once per op on
 * the path from a kernel's output back to its loads (emit_value.c, some
 * kilobytes of stack a level, and LLVM's own passes recurse on long
 * dependence chains too), so a value more than MAX_INLINE_DEPTH ops above
 * the stored values and parameters is stored itself: a chain of 10,000
 * pointwise ops becomes kernels of at most that depth, each reading the
 * last one's value. Real graphs stay far below it. */
enum { MAX_INLINE_DEPTH = 256 };

static bool store_deep_values(fg_plan *p) {
  fg_graph *g = p->g;
  int *depth = calloc((size_t)g->next_value_id + 1, sizeof *depth);
  if (!depth)
    return false;
  for (fg_node *n = g->first; n; n = n->next) {
    int d = 0;
    for (int i = 0; i < n->nin; i++) {
      const fg_value *x = n->in[i];
      if (!p->store[x->id].stored && x->def && depth[x->id] > d)
        d = depth[x->id];
    }
    d++;
    for (int i = 0; i < n->nout; i++) {
      fg_storage *s = &p->store[n->out[i]->id];
      if (d > MAX_INLINE_DEPTH && !s->stored && n->op->kind != FG_KIND_LITERAL)
        s->stored = true;
      depth[n->out[i]->id] = s->stored ? 0 : d;
    }
  }
  free(depth);
  return true;
}

/* issue 19: what the attention kernel (emit_attention.c) takes: q, k, v
 * of one dtype, bf16 or f16, head dim 64, 96, 128 or 256 for q, k and v, at least
 * one key. */
static bool attention_supported(const fg_node *n, fg_diag *d) {
  const fg_type *q = &n->in[0]->type, *k = &n->in[1]->type, *v = &n->in[2]->type;
  fg_dtype dt = q->dtype;
  if ((dt != FG_BF16 && dt != FG_F16) || k->dtype != dt || v->dtype != dt) {
    fg_error(d, n->loc,
             "'sdpa' in the code generator needs q, k and v all bf16 or all f16 (they are %s, %s, "
             "%s)",
             fg_dtype_name(dt), fg_dtype_name(k->dtype), fg_dtype_name(v->dtype));
    return false;
  }
  int64_t hd = q->dims[3].size;
  if ((hd != 64 && hd != 96 && hd != 128 && hd != 256) || v->dims[3].size != hd) {
    fg_error(d, n->loc,
             "'sdpa' in the code generator supports head dims 64, 96, 128 and 256 (q's is %lld, "
             "v's %lld)",
             (long long)hd, (long long)v->dims[3].size);
    return false;
  }
  if (k->dims[2].size < 1) {
    fg_error(d, n->loc, "'sdpa' with no keys (k has sequence length 0)");
    return false;
  }
  return true;
}

/* issue 19: what the backward kernels (emit_attention_bwd.c) take: do, q,
 * k, v and o of one dtype, bf16 or f16, head dim 64 or 128, lse f32, at
 * least one key. */
static bool attention_bwd_supported(const fg_node *n, fg_diag *d) {
  fg_dtype dt = n->in[1]->type.dtype;
  bool same = dt == FG_BF16 || dt == FG_F16;
  for (int i = 0; i < 5; i++)
    same = same && n->in[i]->type.dtype == dt;
  if (!same) {
    fg_error(d, n->loc,
             "'sdpa_bwd' in the code generator needs do, q, k, v and o all bf16 or all f16 (they "
             "are %s, %s, %s, %s, %s)",
             fg_dtype_name(n->in[0]->type.dtype), fg_dtype_name(n->in[1]->type.dtype),
             fg_dtype_name(n->in[2]->type.dtype), fg_dtype_name(n->in[3]->type.dtype),
             fg_dtype_name(n->in[4]->type.dtype));
    return false;
  }
  if (n->in[5]->type.dtype != FG_F32) {
    fg_error(d, n->loc, "'sdpa_bwd' in the code generator needs lse in f32 (it is %s)",
             fg_dtype_name(n->in[5]->type.dtype));
    return false;
  }
  int64_t hd = n->in[1]->type.dims[3].size, vd = n->in[3]->type.dims[3].size;
  if ((hd != 64 && hd != 128) || vd != hd) {
    fg_error(d, n->loc,
             "'sdpa_bwd' in the code generator supports head dims 64 and 128 (q's is %lld, v's "
             "%lld)",
             (long long)hd, (long long)vd);
    return false;
  }
  if (n->in[2]->type.dims[2].size < 1) {
    fg_error(d, n->loc, "'sdpa_bwd' with no keys (k has sequence length 0)");
    return false;
  }
  return true;
}

/* What the code generator cannot take: symbolic shapes, mean/var, dropout
 * and the other composites left for a disabled decompose, the scatters
 * past their temps' range. */
/* issue 20: the scatters' kernels keep destination slices (scatter_add:
 * elements) and source positions in i32 temps. */
static bool scatter_supported(const fg_node *n, fg_diag *d) {
  int64_t bins = scatter_bins(n), sources = scatter_sources(n);
  if (bins >= ((int64_t)1 << 30) || sources >= ((int64_t)1 << 30)) {
    fg_error(d, n->loc,
             "'%s' with %lld sources into %lld %s: the code generator supports fewer than 2^30 "
             "of each",
             n->op->name, (long long)sources, (long long)bins,
             n->op->code == FG_OP_INDEX_ADD ? "slices" : "elements");
    return false;
  }
  return true;
}

/* symidx: with a symbolic size T, the sources (the index's elements) may
 * be a*T + b, and the kernels take T's count at run time (temps and grids
 * formulas of it); the bins (index_add: the operand's slices; scatter_add:
 * its elements) size the scan's CTA and must be static, so the operand
 * (and the result) must not have T. Counts, offsets and source positions
 * are i32 temps, which hold every count up to 2^31-1 sources: at most
 * that at T's largest (its declared range; the default's 2^31-1 with an
 * index of T). */
static bool scatter_limits(const fg_plan *p, fg_diag *d) {
  const fg_sym_lowering *s = &p->sym;
  for (const fg_node *n = p->g->first; n; n = n->next) {
    if (!fg_index_scatters(n))
      continue;
    if (!s->n) {
      if (!scatter_supported(n, d))
        return false;
      continue;
    }
    const fg_type *x = &n->in[0]->type;
    for (int i = 0; i < x->rank; i++)
      if (fg_sym_involves(s, x->dims[i].size)) {
        fg_error(d, n->loc,
                 "'%s' into an operand whose dim %d has the symbolic size '%s' is not supported "
                 "by the code generator yet: it takes a static operand (destination); the "
                 "sources (the index) may have '%s'",
                 n->op->name, i, s->name, s->name);
        return false;
      }
    int64_t sources = scatter_sources(n);
    if (!fg_sym_involves(s, sources)) {
      if (!scatter_supported(n, d))
        return false;
      continue;
    }
    int64_t most = fg_sym_at_max(s, sources), bins = scatter_bins(n);
    if (most > INT32_MAX || bins >= ((int64_t)1 << 30)) {
      fg_error(d, n->loc,
               "'%s' with %s sources into %lld %s: the code generator supports at most 2^31-1 "
               "sources (fewer than 2^30 %s), and %s's declared range allows %lld sources "
               "(declare a smaller range, %s: 1..N)",
               n->op->name, fg_sym_formula(s, sources, &p->g->arena), (long long)bins,
               n->op->code == FG_OP_INDEX_ADD ? "slices" : "elements",
               n->op->code == FG_OP_INDEX_ADD ? "slices" : "elements", s->name, (long long)most,
               s->name);
      return false;
    }
  }
  return true;
}

static bool check_supported(const fg_graph *g, fg_diag *d) {
  for (int i = 0; i < g->nparams; i++)
    if (!fg_type_is_static(&g->params[i]->type)) {
      fg_error(d, g->params[i]->loc,
               "parameter '%s' has symbolic dims; the code generator needs static shapes",
               g->params[i]->name);
      return false;
    }
  for (fg_node *n = g->first; n; n = n->next) {
    fg_opcode c = n->op->code;
    if (fg_decompose_rewrites(c)) {
      fg_error(d, n->loc, "'%s' needs the 'decompose' pass, which is disabled", n->op->name);
      return false;
    }
    if (n->op->code == FG_OP_SDPA_BWD && !attention_bwd_supported(n, d))
      return false;
    if (n->op->code == FG_OP_SDPA && !attention_supported(n, d))
      return false;
  }
  return true;
}

static fg_plan *new_plan(fg_graph *g, const fg_plan_options *o) {
  fg_plan *p = fg_arena_alloc(&g->arena, sizeof *p);
  p->g = g;
  if (o && o->target.arch)
    p->target = o->target;
  else
    fg_target_init(&p->target, 90, 0);
  if (o)
    p->opts = *o;
  if (o && o->sym)
    p->sym = *o->sym;
  p->opts.sym = &p->sym;
  p->store = fg_arena_alloc(&g->arena, (size_t)(g->next_value_id + 1) * sizeof *p->store);
  for (int i = 0; i < g->next_value_id; i++)
    p->store[i].kernel = -1;
  for (int i = 0; i < g->nparams; i++)
    p->store[g->params[i]->id] = (fg_storage){true, {FG_BUF_PARAM, i}, -1, NULL, NULL};
  return p;
}

typedef struct mem_ctx {
  const fg_plan *p;
  int k;
} mem_ctx;
static bool in_memory_stop(const fg_value *v, const void *ctx) {
  const mem_ctx *c = ctx;
  return fg_plan_in_memory(c->p, v, c->k);
}

bool fg_plan_attn_source(const fg_plan *p, const fg_value *v, int k, const fg_value **base,
                         fg_strided *s) {
  if (fg_plan_in_memory(p, v, k)) {
    fg_type t = v->type;
    if (v->param_index < 0)
      t.has_layout = false; /* stored values are row-major */
    fg_strided_dense(&t, s);
    *base = v;
    return true;
  }
  const char *why;
  mem_ctx c = {p, k};
  return p->g->bookend && fg_strided_chain(v, in_memory_stop, &c, base, s, &why);
}

/* An operand of sdpa is read in place through strides: a parameter, or a
 * chain of view ops from one (a transposed [B,S,H,D] layout, the slices of
 * a packed QKV) or from a computed value, which is stored; anything else
 * (no view chain, views that strides cannot express) is stored itself. */
static void store_attn_operand(fg_plan *p, const fg_value *x) {
  const fg_value *base;
  fg_strided s;
  const char *why;
  if (x->param_index >= 0)
    return;
  if (p->g->bookend && fg_strided_chain(x, NULL, NULL, &base, &s, &why) && !base->type.scalar &&
      (base->param_index >= 0 || (base->def && base->def->op->kind != FG_KIND_LITERAL))) {
    if (base->param_index < 0)
      p->store[base->id].stored = true;
    return;
  }
  p->store[x->id].stored = true;
}

/* Reductions and segment_set operands are stored until proven local; so
 * are both results of sdpa and the values its operands are views of. */
static void mark_stored(fg_plan *p) {
  for (fg_node *n = p->g->first; n; n = n->next) {
    if (n->op->code == FG_OP_SDPA || n->op->code == FG_OP_SDPA_BWD) {
      for (int i = 0; i < n->nout; i++)
        p->store[n->out[i]->id].stored = true;
      for (int i = 0; i < n->nin; i++)
        store_attn_operand(p, n->in[i]);
    }
    if (n->op->kind == FG_KIND_REDUCTION || fg_index_scatters(n))
      for (int i = 0; i < n->nout; i++)
        p->store[n->out[i]->id].stored = true;
    if (n->op->code == FG_OP_SEGMENT_SET && n->in[0]->param_index < 0 && n->in[0]->def &&
        n->in[0]->def->op->kind != FG_KIND_LITERAL)
      p->store[n->in[0]->id].stored = true;
  }
}

/* Stored value v, result i of n, into a kernel. */
static void place(grouper *gr, fg_node *n, int i) {
  fg_plan *p = gr->p;
  fg_value *v = n->out[i];
  if (n->op->code == FG_OP_SDPA_BWD) { /* dq's kernel, then dk's, which dv joins */
    if (i < 2)
      start_attention_bwd_kernel(p, n, i == 0 ? FG_ATTN_DQ : FG_ATTN_DKDV, v);
    else
      add_to_kernel(p, &p->kernels[p->store[n->out[1]->id].kernel], v);
    return;
  }
  if (n->op->code == FG_OP_SDPA) { /* o starts its kernel, lse joins it */
    if (i == 0)
      start_attention_kernel(p, n);
    else
      add_to_kernel(p, &p->kernels[p->store[n->out[0]->id].kernel], v);
    return;
  }
  if (fg_index_scatters(n)) {
    start_scatter_kernels(p, n);
    return;
  }
  if (n->op->code == FG_OP_CUMSUM) {
    start_scan_kernels(gr, n);
    return;
  }
  fg_kernel *k = pick_kernel(gr, v);
  if (k)
    add_to_kernel(p, k, v);
  else
    start_kernel(p, v);
}

static bool reduces_last_dim(const fg_node *n) {
  if (n->op->kind != FG_KIND_REDUCTION || n->nin != 1 || n->in[0]->type.rank == 0)
    return false;
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  return mask[n->in[0]->type.rank - 1];
}

/* Whether one of the types doms[0..n) has t's dims. */
static bool has_dims(const fg_type *const *doms, int n, const fg_type *t) {
  for (int r = 0; r < n; r++)
    if (fg_type_same_dims(doms[r], t))
      return true;
  return false;
}

/* The nodes placed last (late[node id]): the column reductions that no
 * reduction needs (a weight gradient's sum, which only results read), over
 * the domain of some row reduction of the graph, and everything computed
 * from them. A graph may sum a gradient over its columns before the row
 * reductions that need the same gradient (GPT-2's LayerNorm backward as
 * AOTAutograd writes it); placed last, the sum finds the row kernel and
 * joins it as a column reduction, where in graph order it started a column
 * kernel of its own that read the gradient again (59 us against 39 for the
 * region, docs/benchmarks.md, run T1). Knob LATE_COLUMNS=0: graph order. */
static bool *late_nodes(const fg_plan *p) {
  const fg_graph *g = p->g;
  bool *late = calloc((size_t)g->next_node_id + 1, sizeof *late);
  bool *feeds = calloc((size_t)g->next_value_id + 1, sizeof *feeds); /* a reduction needs it */
  /* the distinct domains of the row reductions (few: one a layer shape) */
  const fg_type **doms = calloc((size_t)g->next_node_id + 1, sizeof *doms);
  int64_t on = 1;
  int ndoms = 0;
  if (!late || !feeds || !doms) {
    free(late);
    free(feeds);
    free(doms);
    return NULL;
  }
  fg_knob_get(&p->opts.knobs, FG_KNOB_LATE_COLUMNS, &on);
  for (const fg_node *n = g->first; n && on; n = n->next)
    if (reduces_last_dim(n) && !has_dims(doms, ndoms, &n->in[0]->type))
      doms[ndoms++] = &n->in[0]->type;
  for (fg_node *n = g->last; n; n = n->prev) {
    bool f = n->op->kind == FG_KIND_REDUCTION;
    for (int i = 0; i < n->nout; i++)
      f |= feeds[n->out[i]->id];
    for (int i = 0; i < n->nin; i++)
      feeds[n->in[i]->id] |= f;
  }
  for (fg_node *n = g->first; n; n = n->next) {
    bool f = false;
    for (int i = 0; i < n->nout; i++)
      f |= feeds[n->out[i]->id];
    if (n->op->kind == FG_KIND_REDUCTION && n->nin == 1 && n->in[0]->type.rank > 0 && !f)
      late[n->id] = !reduces_last_dim(n) && has_dims(doms, ndoms, &n->in[0]->type);
    for (int i = 0; i < n->nin && !late[n->id]; i++)
      late[n->id] = n->in[i]->def && late[n->in[i]->def->id];
  }
  free(feeds);
  free(doms);
  return late;
}

/* Stored values join kernels, in graph order but the late nodes' last.
 * false: out of memory. */
static bool group_into_kernels(fg_plan *p) {
  grouper gr;
  bool *late = late_nodes(p);
  bool ok = grouper_init(&gr, p) && late;
  for (int pass = 0; pass < 2; pass++)
    for (fg_node *n = p->g->first; ok && n; n = n->next)
      if (late[n->id] == (pass == 1))
        for (int i = 0; i < n->nout; i++)
          if (p->store[n->out[i]->id].stored) {
            place(&gr, n, i);
            group_placed(&gr, n->out[i]);
          }
  grouper_free(&gr);
  free(late);
  return ok;
}

/* Reductions are materialized only where another kernel reads them or they
 * are results: each kernel's reads mark the reductions it needs stored. */
static bool mark_read_reductions(fg_plan *p) {
  fg_graph *g = p->g;
  for (fg_node *n = g->first; n; n = n->next)
    if (n->op->kind == FG_KIND_REDUCTION)
      for (int i = 0; i < n->nout; i++)
        if (p->store[n->out[i]->id].buf.kind != FG_BUF_RESULT)
          p->store[n->out[i]->id].stored = false;
  cone_walk c;
  bool ok = cone_init(&c, g);
  for (int ki = 0; ok && ki < p->nkernels; ki++) {
    argset a = {p, &p->kernels[ki], NULL, 0};
    const fg_value **roots = malloc(sizeof *roots * (size_t)(a.k->nouts + 3));
    ok = roots != NULL;
    int nr = ok ? kernel_roots(a.k, roots) : 0;
    cone_restart(&c);
    for (int i = 0; ok && i < nr; i++)
      ok = cone_visit(&c, roots[i], collect, &a);
    free(roots);
  }
  cone_free(&c);
  return ok;
}

/* Kernel outputs: reductions that stay local leave the out list. */
static void drop_local_outputs(fg_plan *p) {
  for (int ki = 0; ki < p->nkernels; ki++) {
    fg_kernel *k = &p->kernels[ki];
    int m = 0;
    for (int i = 0; i < k->nouts; i++)
      if (p->store[k->outs[i]->id].stored)
        k->outs[m++] = k->outs[i];
    k->nouts = m;
  }
}

/* Temps for stored values that are not results. */
static void add_temps(fg_plan *p) {
  for (fg_node *n = p->g->first; n; n = n->next)
    for (int i = 0; i < n->nout; i++) {
      fg_value *v = n->out[i];
      fg_storage *s = &p->store[v->id];
      if (!s->stored || s->buf.kind != FG_BUF_NONE || s->within)
        continue;
      int64_t bytes = fg_type_numel(&v->type) * fg_dtype_size(v->type.dtype);
      fg_temp t = {bytes > 0 ? bytes : 1, false, v, NULL};
      s->buf = (fg_buf_ref){FG_BUF_TEMP, p->ntemps};
      p->temps = fg_arena_append(&p->g->arena, p->temps, &p->ntemps, &t, sizeof t);
    }
}

/* Each kernel's arguments: parameters in index order, then the other
 * buffers it loads in discovery order, then the buffers it writes. */
static bool order_kernel_arguments(fg_plan *p, fg_kernel *k, cone_walk *c, fg_buf_ref *loads) {
  argset a = {p, k, loads, 0};
  const fg_value **roots = malloc(sizeof *roots * (size_t)(k->nouts + 3));
  if (!roots)
    return false;
  int nr = kernel_roots(k, roots);
  bool ok = true;
  cone_restart(c);
  for (int i = 0; i < nr; i++)
    ok = ok && cone_visit(c, roots[i], collect_loads, &a);
  free(roots);
  for (int i = 0; i < k->nreds; i++)
    ok = ok && cone_visit(c, k->reds[i]->in[0], collect_loads, &a);
  for (int i = 0; i < k->ncols; i++)
    ok = ok && cone_visit(c, k->cols[i]->in[0], collect_loads, &a);
  for (int i = 0; i < k->ntails; i++)
    ok = ok && cone_visit(c, k->tails[i]->in[0], collect_loads, &a);
  if (!ok)
    return false;
  fg_buf_ref *params = k->args; /* what collect() found */
  int nparams = k->nargs;
  k->args = NULL;
  k->nargs = 0;
  for (int pi = 0; pi < p->g->nparams; pi++)
    for (int j = 0; j < nparams; j++)
      if (params[j].index == pi)
        add_arg(p, k, params[j]);
  for (int i = 0; i < a.nloads; i++)
    add_arg(p, k, loads[i]);
  for (int i = 0; i < k->nouts; i++)
    add_arg(p, k, p->store[k->outs[i]->id].buf);
  if (fg_kernel_is_scatter(k->kind))
    add_scatter_args(p, k);
  if (fg_kernel_is_scan(k->kind) && k->scan_temp >= 0)
    add_arg(p, k, (fg_buf_ref){FG_BUF_TEMP, k->scan_temp});
  return true;
}

static bool order_arguments(fg_plan *p) {
  cone_walk c;
  fg_buf_ref *loads = malloc((size_t)(p->g->next_value_id + 1) * sizeof *loads);
  bool ok = cone_init(&c, p->g) && loads;
  for (int ki = 0; ok && ki < p->nkernels; ki++)
    ok = order_kernel_arguments(p, &p->kernels[ki], &c, loads);
  cone_free(&c);
  free(loads);
  return ok;
}

static bool out_of_memory(const fg_graph *g, fg_diag *d) {
  fg_error(d, (fg_loc){0, 0}, "out of memory planning graph '%s'", g->name);
  return false;
}

/* Every written result has a writer: a result left unwritten would be
 * returned as garbage, so it is a compiler bug to report, not to ship.
 * (One pass over the kernels' outputs: a graph may have thousands of
 * results.) */
static bool check_results_written(const fg_plan *p, fg_diag *d) {
  const fg_graph *g = p->g;
  bool *written = calloc((size_t)g->nresults + 1, sizeof *written);
  if (!written)
    return out_of_memory(g, d);
  for (int ki = 0; ki < p->nkernels; ki++)
    for (int j = 0; j < p->kernels[ki].nouts; j++) {
      fg_buf_ref b = p->store[p->kernels[ki].outs[j]->id].buf;
      if (b.kind == FG_BUF_RESULT)
        written[b.index] = true;
    }
  int missing = 0;
  while (missing < g->nresults && (p->results[missing].is_view || written[missing]))
    missing++;
  free(written);
  if (missing == g->nresults)
    return true;
  fg_internal_error(d, g->result_locs[missing], "no kernel writes result %d of graph '%s'", missing,
                    g->name);
  return false;
}

/* The plan as a list of named steps (as QBE's main.c): each one line. */
static fg_plan *build_once(fg_graph *g, const fg_plan_options *o, fg_diag *d) {
  if (!check_supported(g, d))
    return NULL;
  fg_plan *p = new_plan(g, o);
  if (!scatter_limits(p, d) || !plan_results(p, d))
    return NULL;
  mark_stored(p);
  if (!store_deep_values(p))
    return out_of_memory(g, d), NULL;
  if (!group_into_kernels(p) || !mark_read_reductions(p))
    return out_of_memory(g, d), NULL;
  drop_local_outputs(p);
  fg_plan_zip_stores(p);
  add_temps(p);
  fg_plan_zip_buffers(p);
  if (!order_arguments(p))
    return out_of_memory(g, d), NULL;
  explain_fallbacks(p);
  if (!check_results_written(p, d) || !fg_sym_check_values(p, d) || !fg_plan_schedule(p, o, d) ||
      !fg_sym_check(p, d))
    return NULL;
  return p;
}

/* With in-place results (opt/inplace.c): a first plan writes each one
 * from the kernel that computes it; those it cannot prove safe are staged
 * through a temp and the graph is planned again. */
fg_plan *fg_plan_build(fg_graph *g, const fg_plan_options *o, fg_diag *d) {
  if (!g->result_into)
    return build_once(g, o, d);
  const char **staged = calloc((size_t)g->nresults + 1, sizeof *staged);
  if (!staged)
    return out_of_memory(g, d), NULL;
  fg_plan *p = NULL;
  if (fg_inplace_prepare(g, NULL, d) && (p = build_once(g, o, d)) &&
      !fg_inplace_decide(p, staged, false, d)) {
    p = NULL;
    bool any = false;
    for (int i = 0; i < g->nresults; i++)
      any = any || staged[i] != NULL;
    if (any && fg_inplace_prepare(g, staged, d) && (p = build_once(g, o, d)) &&
        !fg_inplace_decide(p, staged, true, d))
      p = NULL;
  }
  free((void *)staged);
  if (!p)
    return NULL;
  for (int k = 0; k < p->nkernels; k++)
    for (int j = 0; j < p->kernels[k].nouts; j++) {
      fg_buf_ref b = p->store[p->kernels[k].outs[j]->id].buf;
      fg_inplace_mode m = b.kind == FG_BUF_RESULT ? p->results[b.index].inplace : FG_INPLACE_NONE;
      if (m == FG_INPLACE_DIRECT || m == FG_INPLACE_STAGED)
        p->kernels[k].inplace = true;
    }
  return p;
}

const char *fg_buf_str(fg_buf_ref b, char *buf, int cap) {
  const char *pre = b.kind == FG_BUF_PARAM    ? "p"
                    : b.kind == FG_BUF_RESULT ? "r"
                    : b.kind == FG_BUF_TEMP   ? "t"
                    : b.kind == FG_BUF_SYM    ? "z"
                                              : "?";
  snprintf(buf, (size_t)cap, "%s%d", pre, b.index);
  return buf;
}
