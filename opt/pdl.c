/* Programmatic dependent launch (issue 17/20, sm_90): a kernel launched
 * after another on the same stream normally starts when that one has
 * finished and its writes are flushed, and its CTAs are then scheduled
 * onto an empty GPU: a gap at each boundary of a graph of several kernels
 * (1-2 us a boundary at the small shapes, docs/benchmarks.md, run T1). With the launch attribute
 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, the next kernel's
 * CTAs are scheduled as soon as every CTA of the running one has executed
 * griddepcontrol.launch_dependents (or exited), and each waits in
 * griddepcontrol.wait until the kernels before it have completed and their
 * memory is visible. So the launch and the CTAs' start overlap the
 * previous kernel's last wave, and nothing is read or written early.
 *
 * A kernel with a launched kernel before it on its stream gets pdl_wait:
 * its first instruction is griddepcontrol.wait (backend_ptx/compile.c),
 * and the plan's `kernel-pdl` line tells the loader that it may launch it
 * with the attribute (docs/artifact.md). The kernel before it gets
 * pdl_trigger: its first instructions after its own wait let the next one
 * launch. The next kernel's CTAs only start once all of this one's have
 * started, so they never take a slot this kernel's CTAs need, and a kernel
 * whose CTAs wait for one another (the row + column form) has them all
 * resident before anything after it starts. A kernel waits before its
 * first instruction, so which kernels read or write what does not matter:
 * the order of their memory is the order without the attribute.
 *
 * Waiting CTAs hold their slots. In a graph with one stream they only take
 * slots the kernel before them no longer needs. Beside a second stream
 * they take slots the other stream's kernels may need: where stream 1
 * holds one kernel whose CTAs all fit at once (launched first, it takes
 * every slot it will ever need at its start), the caller's stream gets
 * them (the embedding backward's sort chain beside its dwpe column sum,
 * 0.73 waves: 141.2 -> 136.5 us, run T4); where stream 1 has more (a
 * scan's two kernels, the second needing the whole GPU's threads when the
 * first ends), neither stream does: waiting CTAs on either stream made
 * scan_row_g20261179 4.4 us slower (T3, T4). Knob PDL=2: both streams,
 * always.
 *
 * Architectures before sm_90 lack griddepcontrol: no kernel gets either.
 * Knob PDL=0: neither. */
#include "cost.h"
#include "plan.h"

/* Whether the kernels on stream 1 never ask for a slot after their start:
 * one launched kernel, its CTAs all resident at once. */
static bool side_resident_at_start(const fg_plan *p) {
  int n = 0;
  bool fits = true;
  for (int i = 0; i < p->nkernels; i++) {
    const fg_kernel *k = &p->kernels[i];
    if (!k->stream || !fg_kernel_launched(k))
      continue;
    n++;
    fits = fits && !k->grid_formula && fg_kernel_cost(p, k, p->target.copy_gbs).waves <= 1.0;
  }
  return n <= 1 && fits;
}

void fg_plan_assign_pdl(fg_plan *p) {
  for (int i = 0; i < p->nkernels; i++)
    p->kernels[i].pdl_wait = p->kernels[i].pdl_trigger = false;
  int64_t on = 1;
  fg_knob_get(&p->opts.knobs, FG_KNOB_PDL, &on);
  if (!on || p->target.arch < 90)
    return;
  bool main_stream = on == 2 || !fg_plan_has_streams(p) || side_resident_at_start(p);
  int last[2] = {-1, -1}; /* the last launched kernel on stream 0 and 1 */
  for (int i = 0; i < p->nkernels; i++) {
    fg_kernel *k = &p->kernels[i];
    if (!fg_kernel_launched(k))
      continue;
    int s = k->stream ? 1 : 0;
    if ((s == 1 && on < 2) || (s == 0 && !main_stream))
      continue;
    if (last[s] >= 0) {
      k->pdl_wait = true;
      p->kernels[last[s]].pdl_trigger = true;
    }
    last[s] = i;
  }
}

bool fg_plan_has_pdl(const fg_plan *p) {
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].pdl_wait)
      return true;
  return false;
}
