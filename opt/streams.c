/* Concurrent kernels (issue 17/20): a graph whose kernels fall into
 * independent groups runs one group on the caller's stream and the others
 * on a second stream, so that a chain of small kernels that leaves most
 * SMs idle (a chunked scan's two kernels, an index_add's count, scan,
 * fill and order: 32 to 50 CTAs each) runs beside kernels that need the
 * memory system (row reductions, the embedding backward's dwpe column
 * sum; docs/benchmarks.md, runs S1 and S4). The loader forks the second stream from
 * the caller's at the start of a run and joins it at the end
 * (docs/loader.md, "Streams"), so a run still completes on the caller's
 * stream as one unit, and a CUDA graph captured from it has the two
 * branches.
 *
 * Two kernels depend on each other when one writes storage the other
 * reads or writes: a result (an in-place result is its parameter's
 * storage), or a temp (every temp counts as written by each kernel that
 * takes it). Parameters are read-only otherwise, and the loader refuses
 * written outputs that overlap inputs, so two kernels that share only
 * parameters may run in either order or at once. The groups are the
 * connected components of that relation; the costliest group (cost.c)
 * stays on the caller's stream, with every group that holds a kernel
 * whose order was chosen for the L2 contents the kernel launched before it
 * leaves (choose_l2_order in schedule.c), which assumes one sequence; the
 * others go to stream 1, launched first. A graph with a kernel whose CTAs
 * wait for one another (the row + column form, sized to fill the GPU)
 * keeps one stream: a kernel beside it would hold slots its waiting CTAs
 * need. Knob STREAMS=0: every kernel on the caller's stream. */
#include <stdlib.h>

#include "cost.h"
#include "plan.h"

/* The storage buffer b is: an in-place result is its parameter's. */
static fg_buf_ref storage_of(const fg_plan *p, fg_buf_ref b) {
  if (b.kind == FG_BUF_RESULT && p->results[b.index].into >= 0 && !p->results[b.index].is_view)
    return (fg_buf_ref){FG_BUF_PARAM, p->results[b.index].into};
  return b;
}

/* Whether argument b is storage a kernel may write: a result (an in-place
 * one is its parameter's storage) or a temp. */
static bool written(fg_buf_ref b) { return b.kind == FG_BUF_RESULT || b.kind == FG_BUF_TEMP; }

/* ---- which kernels share storage that one of them writes ----
 * Comparing every two kernels' arguments was O(kernels^2 x arguments^2):
 * seconds for a graph of 20,000 results (80 kernels of 248 arguments).
 * Each buffer lists the kernels that take it instead. */

/* A kernel taking a buffer (once, whichever arguments it takes it as). */
typedef struct use {
  int kernel;
  bool writes;
} use;

/* By buffer b (buffer_key): its uses in kernel order, uses[start[b] ..
 * start[b] + n[b]); writers[b]: how many of them write it. */
typedef struct buffer_uses {
  int nbufs;
  int *start, *n, *writers;
  use *uses;
} buffer_uses;

/* A number for the storage argument b is (parameters, then results,
 * then temps), -1 for what is not storage (a symbolic size). */
static int buffer_key(const fg_plan *p, fg_buf_ref b) {
  fg_buf_ref s = storage_of(p, b);
  int first = s.kind == FG_BUF_PARAM    ? 0
              : s.kind == FG_BUF_RESULT ? p->g->nparams
              : s.kind == FG_BUF_TEMP   ? p->g->nparams + p->g->nresults
                                        : -1;
  int count = s.kind == FG_BUF_PARAM    ? p->g->nparams
              : s.kind == FG_BUF_RESULT ? p->g->nresults
                                        : p->ntemps;
  return first >= 0 && s.index >= 0 && s.index < count ? first + s.index : -1;
}

static void uses_free(buffer_uses *u) {
  free(u->start);
  free(u->n);
  free(u->writers);
  free(u->uses);
}

/* Every buffer's uses. false: out of memory. */
static bool uses_build(const fg_plan *p, buffer_uses *u) {
  int nargs = 0;
  for (int k = 0; k < p->nkernels; k++)
    nargs += p->kernels[k].nargs;
  u->nbufs = p->g->nparams + p->g->nresults + p->ntemps;
  u->start = calloc((size_t)u->nbufs + 1, sizeof *u->start);
  u->n = calloc((size_t)u->nbufs + 1, sizeof *u->n);
  u->writers = calloc((size_t)u->nbufs + 1, sizeof *u->writers);
  u->uses = malloc(sizeof *u->uses * ((size_t)nargs + 1));
  if (!u->start || !u->n || !u->writers || !u->uses)
    return false;
  for (int k = 0; k < p->nkernels; k++) /* room for every argument */
    for (int i = 0; i < p->kernels[k].nargs; i++) {
      int b = buffer_key(p, p->kernels[k].args[i]);
      if (b >= 0)
        u->start[b + 1]++;
    }
  for (int b = 0; b < u->nbufs; b++)
    u->start[b + 1] += u->start[b];
  for (int k = 0; k < p->nkernels; k++)
    for (int i = 0; i < p->kernels[k].nargs; i++) {
      fg_buf_ref a = p->kernels[k].args[i];
      int b = buffer_key(p, a);
      if (b < 0)
        continue;
      use *last = u->n[b] ? &u->uses[u->start[b] + u->n[b] - 1] : NULL;
      if (!last || last->kernel != k) {
        last = &u->uses[u->start[b] + u->n[b]++];
        *last = (use){k, false};
      }
      last->writes = last->writes || written(a);
    }
  for (int b = 0; b < u->nbufs; b++)
    for (int i = 0; i < u->n[b]; i++)
      u->writers[b] += u->uses[u->start[b] + i].writes;
  return true;
}

static int by_value(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The kernels after kernel i that share storage with it that one of the
 * two writes, ascending, into after[]; their number. seen[] and pos[]
 * carry over from kernel i - 1 (kernels are taken in order). */
static int later_dependents(const fg_plan *p, const buffer_uses *u, int i, int *pos, int *seen,
                            int *after) {
  const fg_kernel *k = &p->kernels[i];
  int n = 0;
  for (int a = 0; a < k->nargs; a++) {
    int b = buffer_key(p, k->args[a]);
    if (b < 0)
      continue;
    const use *list = &u->uses[u->start[b]];
    while (list[pos[b]].kernel < i) /* kernel i's own use, at last */
      pos[b]++;
    bool writes = list[pos[b]].writes;
    if (!writes && u->writers[b] == 0)
      continue;
    for (int j = pos[b] + 1; j < u->n[b]; j++)
      if ((writes || list[j].writes) && seen[list[j].kernel] != i + 1) {
        seen[list[j].kernel] = i + 1;
        after[n++] = list[j].kernel;
      }
  }
  qsort(after, (size_t)n, sizeof *after, by_value);
  return n;
}

static int find(int *up, int i) {
  while (up[i] != i)
    i = up[i] = up[up[i]];
  return i;
}

/* Joins the kernels that depend on each other into groups (union-find
 * over up[]), pair by pair in the order of a loop over every pair i < j:
 * the groups' representatives, which break ties between groups of equal
 * cost, stay the ones that loop gave. false: out of memory. */
static bool join_dependents(const fg_plan *p, int *up) {
  int n = p->nkernels;
  buffer_uses u = {0};
  int *pos = calloc((size_t)p->g->nparams + p->g->nresults + p->ntemps + 1, sizeof *pos);
  int *seen = calloc((size_t)n, sizeof *seen);
  int *after = malloc(sizeof *after * (size_t)n);
  bool ok = pos && seen && after && uses_build(p, &u);
  for (int i = 0; ok && i < n; i++) {
    int m = later_dependents(p, &u, i, pos, seen, after);
    for (int j = 0; j < m; j++)
      up[find(up, after[j])] = find(up, i);
  }
  uses_free(&u);
  free(pos);
  free(seen);
  free(after);
  return ok;
}

void fg_plan_assign_streams(fg_plan *p) {
  int n = p->nkernels;
  for (int i = 0; i < n; i++)
    p->kernels[i].stream = 0;
  int64_t on = 1;
  fg_knob_get(&p->opts.knobs, FG_KNOB_STREAMS, &on);
  if (!on || n < 2)
    return;
  for (int i = 0; i < n; i++)
    if (fg_kernel_resident(&p->kernels[i]))
      return;
  int *up = fg_arena_alloc(&p->g->arena, sizeof *up * (size_t)n);
  double *cost = fg_arena_alloc(&p->g->arena, sizeof *cost * (size_t)n);
  bool *pinned = fg_arena_alloc(&p->g->arena, sizeof *pinned * (size_t)n);
  if (!up || !cost || !pinned)
    return; /* out of memory: one stream is always correct */
  for (int i = 0; i < n; i++) {
    up[i] = i;
    cost[i] = 0;
    pinned[i] = false;
  }
  if (!join_dependents(p, up))
    return;
  int keep = -1;
  for (int i = 0; i < n; i++) {
    const fg_kernel *k = &p->kernels[i];
    if (!fg_kernel_launched(k))
      continue;
    int r = find(up, i);
    cost[r] += fg_kernel_cost(p, k, p->target.copy_gbs).us + 1e-9;
    pinned[r] = pinned[r] || k->reverse || k->l2_reread.kind != FG_BUF_NONE;
  }
  int roots = 0;
  for (int i = 0; i < n; i++)
    if (find(up, i) == i && cost[i] > 0) {
      roots++;
      if (keep < 0 || cost[i] > cost[keep])
        keep = i;
    }
  if (roots < 2)
    return;
  for (int i = 0; i < n; i++) {
    int r = find(up, i);
    p->kernels[i].stream = r != keep && !pinned[r] && fg_kernel_launched(&p->kernels[i]);
  }
}

bool fg_plan_has_streams(const fg_plan *p) {
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].stream)
      return true;
  return false;
}
