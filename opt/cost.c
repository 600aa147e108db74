/* The cost model (issue 17): an estimate of each kernel's device time from
 * the bytes it moves, the loads its resident threads keep in flight and the
 * target description, so that schedules can be compared before they run.
 *
 * A kernel moves `bytes` (each buffer argument once; a row kernel that is
 * not kept in registers reads its inputs once a phase). Memory gives its
 * copy bandwidth only with enough bytes in flight (Little's law: bandwidth
 * x latency); a kernel keeps min(its CTAs, what fits) x threads x the
 * bytes each thread has issued before it waits. So
 *
 *   time = launch + bytes / (copy bandwidth x min(1, in flight / (bw x latency)))
 *
 * with the last wave of CTAs counted whole, and less the bytes expected
 * to be read back from L2 (l2_hit_bytes). Today it is printed in
 * `--emit plan` ("cost:") and checked against measured runs
 * (docs/benchmarks.md, "The cost model against run T1"); the scheduler
 * uses it to decide whether and how short rows are packed several a CTA
 * (schedule.c pack_rows). */
#include "cost.h"

#include <math.h>
#include <stdlib.h>

#include "index.h"

/* Bytes of a parameter the graph reads only through gathers (the data
 * operand of index_select, gather, take_along_dim): at most the elements
 * the gathers read, not the whole tensor (llm.c's encoder reads 8192 rows
 * of its 50257-row table: 25 MB, not 154). `whole` where it is used
 * otherwise, or where a size is symbolic. */
static double gathered_bytes(const fg_plan *p, const fg_value *prm, double whole) {
  double got = 0;
  bool any = false;
  for (const fg_node *n = p->g->first; n; n = n->next)
    for (int i = 0; i < n->nin; i++) {
      if (n->in[i] != prm)
        continue;
      if (n->op->kind != FG_KIND_INDEXING || fg_index_scatters(n) || i != 0)
        return whole;
      int64_t m = fg_type_numel(&n->out[0]->type);
      if (m < 0)
        return whole;
      got += (double)m * fg_dtype_size(prm->type.dtype);
      any = true;
    }
  return any && got < whole ? got : whole;
}

/* Bytes a buffer argument moves. */
double fg_plan_arg_bytes(const fg_plan *p, fg_buf_ref b) {
  const fg_type *t = NULL;
  if (b.kind == FG_BUF_PARAM && !p->g->params[b.index]->type.scalar)
    return gathered_bytes(p, p->g->params[b.index],
                          (double)fg_type_numel(&p->g->params[b.index]->type) *
                              fg_dtype_size(p->g->params[b.index]->type.dtype));
  if (b.kind == FG_BUF_PARAM)
    t = &p->g->params[b.index]->type;
  else if (b.kind == FG_BUF_RESULT)
    t = &p->g->results[b.index]->type;
  else if (b.kind == FG_BUF_TEMP)
    return (double)p->temps[b.index].bytes;
  if (!t || t->scalar)
    return 0;
  return (double)fg_type_numel(t) * fg_dtype_size(t->dtype);
}

int fg_kernel_input_size(const fg_plan *p, const fg_kernel *k) {
  int m = 1;
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind == FG_BUF_PARAM && !p->g->params[k->args[i].index]->type.scalar &&
        fg_dtype_size(p->g->params[k->args[i].index]->type.dtype) > m)
      m = fg_dtype_size(p->g->params[k->args[i].index]->type.dtype);
  return m;
}

/* sched17 (issue 17): the widest element a pointwise kernel's lanes load
 * in vectors, or 0 where none does (or knob PW_FLAT_DENSE is 0): along the
 * last dim, its operands indexed by the domain's last extent; flat
 * (schedule.c choose_flat), those of the whole domain's size. Other
 * operands (a row's lse, an i64 target a row) are read an element at a
 * time whatever the width, mostly from L1: they neither bound the flat
 * width nor count in the bytes a lane keeps in flight. A cross-entropy
 * backward over [4096, 50257] bf16 with an i64 target a row took flat width
 * 2 (16 bytes of i64), and the model 8 bytes a lane in flight at vec 1
 * where its loads are 2 (measured 489 us, 0.567 of copy bandwidth;
 * docs/benchmarks.md, run Z7). */
int fg_pointwise_vector_size(const fg_plan *p, const fg_kernel *k, bool flat) {
  int64_t on = 1;
  fg_knob_get(&p->opts.knobs, FG_KNOB_PW_FLAT_DENSE, &on);
  if (!on || k->kind != FG_KERNEL_POINTWISE || k->rank < 1)
    return 0;
  int64_t numel = 1;
  for (int d = 0; d < k->rank; d++)
    numel *= k->dims[d];
  int m = 0;
  for (int i = 0; i < k->nargs; i++) {
    const fg_value *v = fg_plan_buf_value(p, k->args[i]);
    if (!v || v->type.scalar || v->type.rank < 1)
      continue;
    bool vector = flat ? fg_type_numel(&v->type) == numel
                       : v->type.dims[v->type.rank - 1].size == k->dims[k->rank - 1];
    if (vector && fg_dtype_size(v->type.dtype) > m)
      m = fg_dtype_size(v->type.dtype);
  }
  return m;
}

/* Loads a thread issues before it uses the first: its chunks (pointwise,
 * rows kept in registers), a streamed row's vectors (a logsumexp's pass,
 * the outputs' pass), the rows it loads together (column kernels) or the
 * chunks of the rows of a group (the row + column form: a LayerNorm
 * backward's 4 rows a group, GPT-2's [8192, 768] f32, was estimated at
 * 93.7 us counting one row and ran in 39.1, docs/benchmarks.md, run T1). */
static int loads_in_flight(const fg_plan *p, const fg_kernel *k) {
  if (k->kind == FG_KERNEL_COLUMN || (fg_kernel_is_scan(k->kind) && !k->scan_lanes))
    return k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  if (k->kind == FG_KERNEL_ROW && k->persistent && (k->ncols || k->ntails))
    return (k->chunks > 1 ? k->chunks : 1) * (k->rows_per_iter > 1 ? k->rows_per_iter : 1);
  if (k->kind == FG_KERNEL_ROW && !k->persistent) /* emit_row.c: the streamed passes */
    return fg_plan_lse_pairs(p, k) || fg_plan_light_reductions(p, k) ? k->chunks : 1;
  return k->chunks > 1 ? k->chunks : 1;
}

/* issue 17: a kernel in descending order reads first the last part of the
 * tensor that the kernel before it touched, from L2 (schedule.c
 * choose_l2_order; or in ascending order the first part, after a kernel in
 * descending order). Of the last L2's worth of bytes that kernel moved, the
 * tensor's share; of L2, the part still holding them when the kernel
 * starts: L2_KEPT, measured (docs/benchmarks.md, run Z2: L2_REVERSE=0
 * against 1 saved fp8_scaled_cast 4.3 us and groupnorm_fwd 3.2 us, 12.8
 * and 9.5 MB at copy bandwidth, where 0.75 of L2 predicted 37.5 MB). */
#define L2_KEPT 0.2

static double l2_hit_bytes(const fg_plan *p, const fg_kernel *k) {
  if (k->l2_reread.kind == FG_BUF_NONE)
    return 0;
  const fg_kernel *before = NULL;
  for (int i = k->id - 1; i >= 0 && !before; i--)
    if (p->kernels[i].grid[0] > 0)
      before = &p->kernels[i];
  if (!before)
    return 0;
  double moved = 0, tensor = fg_plan_arg_bytes(p, k->l2_reread);
  for (int i = 0; i < before->nargs; i++)
    moved += fg_plan_arg_bytes(p, before->args[i]);
  double hit = moved > 0 ? L2_KEPT * (double)p->target.l2_bytes * tensor / moved : 0;
  return hit < tensor ? hit : tensor;
}

/* Threads that load, of `resident` CTAs: a row kernel's threads past its
 * row's chunks have nothing to load (a short row in a CTA of its own: 2
 * of 32), and packed short rows leave idle the lanes of a row past its
 * chunks and the groups past the last row. */
static double busy_threads(const fg_kernel *k, double resident) {
  if (k->kind != FG_KERNEL_ROW || k->ncols || k->ntails || k->red <= 0 || k->vec <= 0)
    return resident * k->block;
  int64_t split = k->split > 1 ? k->split : 1, chunks = k->chunks > 1 ? k->chunks : 1;
  int64_t slice = (k->red + split - 1) / split, nchunks = (slice + k->vec - 1) / k->vec;
  if (k->row_lanes > 0) {
    double rows = resident * (k->block / k->row_lanes);
    if (rows > (double)k->outer)
      rows = (double)k->outer;
    return rows * (double)(nchunks < k->row_lanes ? nchunks : k->row_lanes);
  }
  int64_t busy = k->persistent ? (nchunks + chunks - 1) / chunks : nchunks;
  return resident * (double)(busy < k->block ? busy : k->block);
}

/* zip-store: a kernel writing values into their pieces of a cat's buffer
 * moves those pieces, not the buffer. */
static double zipped_bytes(const fg_plan *p, const fg_kernel *k, fg_buf_ref b, double whole) {
  double got = 0;
  bool any = false;
  for (int j = 0; j < k->nouts; j++) {
    const fg_storage *s = &p->store[k->outs[j]->id];
    if (s->view && s->buf.kind == b.kind && s->buf.index == b.index) {
      got += (double)fg_type_numel(&k->outs[j]->type) * fg_dtype_size(k->outs[j]->type.dtype);
      any = true;
    }
  }
  return any ? got : whole;
}

fg_cost fg_kernel_cost(const fg_plan *p, const fg_kernel *k, double copy_gbs) {
  const fg_target *t = &p->target;
  fg_cost c = {0};
  double bytes = 0;
  for (int i = 0; i < k->nargs; i++) {
    double b = zipped_bytes(p, k, k->args[i], fg_plan_arg_bytes(p, k->args[i]));
    /* a row kernel not kept in registers reads its inputs once a phase
     * (a variance's two reductions: one pass, variance.c; a logsumexp's
     * too, logsumexp.c), the full-size outputs' phase included; once where
     * its reductions load none of them (fg_plan_light_reductions) */
    if (k->args[i].kind == FG_BUF_PARAM && k->kind == FG_KERNEL_ROW && !k->persistent &&
        !fg_plan_light_reductions(p, k))
      b *= fg_plan_row_passes(p, k) + (fg_plan_lse_pairs(p, k) ? fg_plan_writes_full(k) : 1);
    bytes += b;
  }
  c.bytes = bytes;
  c.l2_bytes = l2_hit_bytes(p, k);
  bytes -= c.l2_bytes;
  int64_t grid = k->grid[0] * k->grid[1] * k->grid[2];
  int per_sm = k->block > 0 ? t->threads_per_sm / k->block : 1;
  if (k->smem > 0 && t->dyn_smem_per_block > 0 && t->dyn_smem_per_block / k->smem < per_sm)
    per_sm = t->dyn_smem_per_block / k->smem;
  if (per_sm > 32)
    per_sm = 32;
  if (per_sm < 1)
    per_sm = 1;
  double slots = (double)per_sm * t->sm_count;
  c.waves = grid > 0 ? (double)grid / slots : 0;
  double resident = grid < slots ? (double)grid : slots;
  int lane = fg_pointwise_vector_size(p, k, k->flat);
  if (lane == 0 || fg_kernel_input_size(p, k) < lane)
    lane = fg_kernel_input_size(p, k);
  c.in_flight = busy_threads(k, resident) * (double)k->vec * lane * loads_in_flight(p, k);
  double bw = copy_gbs * 1e3; /* bytes a microsecond */
  double needed = bw * t->mem_latency_ns * 1e-3;
  double eff = c.in_flight >= needed ? 1.0 : c.in_flight / needed;
  double mem = eff > 0 ? bytes / (bw * eff) : 0;
  /* the last wave counts whole */
  if (c.waves > 1)
    mem *= ceil(c.waves) / c.waves;
  c.us = (grid > 0 ? t->launch_us : 0) + mem;
  return c;
}

/* ---- the arithmetic term (issue 17) ---- */

static double op_weight(const fg_node *n) {
  /* rand: a Philox-4x32-10 block (10 rounds of two 32 x 32 -> 64-bit
   * multiplies, at half the f32 rate, two 3-way xors and the key's adds:
   * about 60) shared by 4 elements, and the uniform (shift, convert, scale,
   * and dropout's compare); randn adds Box-Muller's log, sqrt, sin, cos */
  if (n->op->code == FG_OP_RAND)
    return 20;
  if (n->op->code == FG_OP_RANDN)
    return 20 + 3 * 16 + 4;
  if (n->op->kind != FG_KIND_POINTWISE)
    return 0;
  if (fg_op_has(n->op, FG_PROP_LIBDEVICE))
    return 16;
  switch (n->op->code) {
  case FG_OP_DIV:
  case FG_OP_SQRT:
  case FG_OP_RSQRT:
  case FG_OP_RECIPROCAL:
    return 4;
  default:
    return 1;
  }
}

double fg_kernel_ops_per_element(const fg_plan *p, const fg_kernel *k) {
  if (k->kind == FG_KERNEL_ATTENTION)
    return 0;
  int cap = 256, sp = 0;
  const fg_value **stack = malloc(sizeof *stack * (size_t)cap);
  unsigned char *seen = calloc((size_t)p->g->next_value_id, 1);
  double ops = 0;
  int64_t numel = 1;
  for (int i = 0; i < k->rank; i++)
    numel *= k->dims[i];
  if (!stack || !seen) {
    free(stack);
    free(seen);
    return 0;
  }
  for (int i = 0; i < k->nouts + k->nreds + k->ncols + k->ntails; i++) {
    const fg_value *v = i < k->nouts              ? k->outs[i]
                        : i < k->nouts + k->nreds ? k->reds[i - k->nouts]->in[0]
                        : i < k->nouts + k->nreds + k->ncols
                            ? k->cols[i - k->nouts - k->nreds]->in[0]
                            : k->tails[i - k->nouts - k->nreds - k->ncols]->in[0];
    while (v) {
      if (!seen[v->id]) {
        seen[v->id] = 1;
        if (v->def && !fg_plan_in_memory(p, v, k->id)) {
          /* per element: ops over the whole domain (not a row's or the
           * tensor's values, computed once a row or once) */
          if (fg_type_numel(&v->type) == numel)
            ops += op_weight(v->def);
          for (int j = 0; j < v->def->nin; j++) {
            if (sp == cap) {
              const fg_value **s = realloc(stack, sizeof *s * (size_t)(cap *= 2));
              if (!s)
                break;
              stack = s;
            }
            if (sp < cap)
              stack[sp++] = v->def->in[j];
          }
        }
      }
      v = sp ? stack[--sp] : NULL;
    }
  }
  free(stack);
  free(seen);
  return ops;
}

double fg_kernel_compute_us(const fg_plan *p, const fg_kernel *k) {
  const fg_target *t = &p->target;
  double numel = 1;
  for (int i = 0; i < k->rank; i++)
    numel *= (double)k->dims[i];
  double lanes_per_us = (double)t->sm_count * t->alu_lanes_per_sm * t->clock_ghz * 1e3;
  return lanes_per_us > 0 ? numel * fg_kernel_ops_per_element(p, k) / lanes_per_us : 0;
}

bool fg_kernel_compute_heavy(const fg_plan *p, const fg_kernel *k) {
  double bytes = 0; /* (not the workspaces scheduling adds: the same answer before and after) */
  for (int i = 0; i < k->nargs; i++)
    if (k->args[i].kind != FG_BUF_TEMP || p->temps[k->args[i].index].value)
      bytes += fg_plan_arg_bytes(p, k->args[i]);
  double mem_us = bytes / ((double)p->target.copy_gbs * 1e3);
  return mem_us > 0 && fg_kernel_compute_us(p, k) >= 0.5 * mem_us;
}

/* ---- flat vectors (issue 17) ----
 * A chunk's lane 0 delinearizes its linear index: a division and a
 * remainder by a constant (multiply-high, shift, multiply, subtract: 4) for
 * each dim past the first of extent above 1. Along the last extent, the
 * other lanes share its coordinates; flat (schedule.c choose_flat), each
 * next lane adds one with a carry: an add, a compare and a select a dim. */
double fg_pointwise_index_ops(const fg_kernel *k) {
  int dims = 0;
  for (int d = 0; d < k->rank; d++)
    dims += k->dims[d] != 1;
  int vec = k->vec > 0 ? k->vec : 1;
  double chunk = 4.0 * (dims > 1 ? dims - 1 : 0);
  double lanes = k->flat ? 3.0 * dims * (vec - 1) : 0;
  return (chunk + lanes) / vec;
}

double fg_pointwise_us(const fg_plan *p, const fg_kernel *k) {
  const fg_target *t = &p->target;
  fg_cost c = fg_kernel_cost(p, k, (double)t->copy_gbs);
  double launch = k->grid[0] > 0 ? t->launch_us : 0, mem = c.us - launch;
  double numel = 1;
  for (int i = 0; i < k->rank; i++)
    numel *= (double)k->dims[i];
  double lanes_per_us = (double)t->sm_count * t->alu_lanes_per_sm * t->clock_ghz * 1e3;
  double ops = fg_kernel_ops_per_element(p, k) + fg_pointwise_index_ops(k);
  double compute = lanes_per_us > 0 ? numel * ops / lanes_per_us : 0;
  return launch + (mem > compute ? mem : compute);
}
