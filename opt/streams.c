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

/* Whether kernels a and b share storage that one of them writes. */
static bool depend(const fg_plan *p, const fg_kernel *a, const fg_kernel *b) {
  for (int i = 0; i < a->nargs; i++) {
    fg_buf_ref s = storage_of(p, a->args[i]);
    if (s.kind == FG_BUF_SYM || s.kind == FG_BUF_NONE)
      continue;
    for (int j = 0; j < b->nargs; j++) {
      fg_buf_ref t = storage_of(p, b->args[j]);
      if (t.kind == s.kind && t.index == s.index && (written(a->args[i]) || written(b->args[j])))
        return true;
    }
  }
  return false;
}

static int find(int *up, int i) {
  while (up[i] != i)
    i = up[i] = up[up[i]];
  return i;
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
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (depend(p, &p->kernels[i], &p->kernels[j]))
        up[find(up, j)] = find(up, i);
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
