/* Printing plans: for people (`--emit plan`) and for the loader (the
 * artifact's comment block, docs/artifact.md). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "inplace.h"
#include "plan.h"

static void ints(FILE *f, const int64_t *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%" PRId64, i ? "," : "", v[i]);
  fputc(']', f);
}

/* Extents as the plan writes them: formulas of the symbolic size where they
 * involve it (opt/symbolic.h), integers otherwise. */
static void extents(FILE *f, const fg_plan *p, const int64_t *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s", i ? "," : "", fg_sym_formula(&p->sym, v[i], &p->g->arena));
  fputc(']', f);
}

static void type_sizes(FILE *f, const fg_plan *p, const fg_type *t) {
  int64_t s[FG_MAX_RANK];
  for (int i = 0; i < t->rank; i++)
    s[i] = t->dims[i].size;
  extents(f, p, s, t->rank);
}

static void dense_strides(FILE *f, const fg_plan *p, const fg_type *t, bool use_layout) {
  fg_type c = *t;
  if (!use_layout)
    c.has_layout = false;
  int64_t st[FG_MAX_RANK];
  fg_type_strides(&c, st);
  extents(f, p, st, t->rank);
}

static const char *kind_name(fg_kernel_kind k) {
  switch (k) {
  case FG_KERNEL_POINTWISE:
    return "pointwise";
  case FG_KERNEL_ROW:
    return "row-reduction";
  case FG_KERNEL_COLUMN:
    return "column-reduction";
  case FG_KERNEL_ATTENTION:
    return "attention";
  case FG_KERNEL_ATTENTION_BWD:
    return "attention-bwd";
  case FG_KERNEL_SCATTER_COUNT:
    return "scatter-count";
  case FG_KERNEL_SCATTER_SCAN:
    return "scatter-scan";
  case FG_KERNEL_SCATTER_FILL:
    return "scatter-fill";
  case FG_KERNEL_SCATTER_ORDER:
    return "scatter-order";
  case FG_KERNEL_SCATTER_SUM:
    return "scatter-sum";
  case FG_KERNEL_SCATTER_SORT:
    return "scatter-sort";
  case FG_KERNEL_SCAN:
    return "scan";
  case FG_KERNEL_SCAN_CHUNKS:
    return "scan-chunks";
  }
  return "?";
}

static void arg_str(const fg_plan *p, fg_buf_ref b, char *buf, int cap) {
  if (b.kind == FG_BUF_PARAM && p->g->params[b.index]->type.scalar)
    snprintf(buf, (size_t)cap, "s%d", b.index);
  else
    fg_buf_str(b, buf, cap);
}

static const char *value_name(const fg_value *v, char *buf, int cap) {
  if (v->name)
    return v->name;
  snprintf(buf, (size_t)cap, "%%%d", v->id);
  return buf;
}

/* The kernel that writes each result buffer (the stored value may be an
 * ancestor of the result whose storage holds the same bytes), the first
 * one if several do; -1 none. One pass for all: a graph may have
 * thousands of results. NULL: out of memory. */
static int *result_writers(const fg_plan *p) {
  int *writer = malloc(sizeof *writer * ((size_t)p->g->nresults + 1));
  if (!writer)
    return NULL;
  for (int i = 0; i < p->g->nresults; i++)
    writer[i] = -1;
  for (int k = 0; k < p->nkernels; k++)
    for (int j = 0; j < p->kernels[k].nouts; j++) {
      fg_buf_ref b = p->store[p->kernels[k].outs[j]->id].buf;
      if (b.kind == FG_BUF_RESULT && writer[b.index] < 0)
        writer[b.index] = k;
    }
  return writer;
}

static void print_header(FILE *f, const fg_plan *p) {
  const fg_graph *g = p->g;
  fprintf(f, "graph %s: %d kernel%s, %d temp%s", g->name, p->nkernels, p->nkernels == 1 ? "" : "s",
          p->ntemps, p->ntemps == 1 ? "" : "s");
  for (int i = 0; i < FG_NKNOBS; i++)
    if (p->opts.knobs.set[i]) {
      fputs(" knobs", f);
      fg_knob_print(f, &p->opts.knobs);
      break;
    }
  fputc('\n', f);
  if (p->sym.n)
    fprintf(f,
            "  size %s: %" PRId64 "..%" PRId64 " %%%" PRId64
            ", a kernel argument (compiled with the stand-in %" PRId64 ")\n",
            p->sym.name, p->sym.min, p->sym.max, p->sym.div, p->sym.placeholder);
}

static void print_params(FILE *f, const fg_plan *p) {
  const fg_graph *g = p->g;
  for (int i = 0; i < g->nparams; i++) {
    const fg_value *v = g->params[i];
    fprintf(f, "  param p%d %s %s", i, v->name, fg_dtype_name(v->type.dtype));
    if (v->type.scalar)
      fputs(" scalar", f);
    else {
      type_sizes(f, p, &v->type);
      fputs(" strides ", f);
      dense_strides(f, p, &v->type, true);
    }
    fputc('\n', f);
  }
}

static void print_results(FILE *f, const fg_plan *p) {
  const fg_graph *g = p->g;
  char b1[64], b2[64];
  int *writer = result_writers(p);
  for (int i = 0; i < g->nresults; i++) {
    const fg_value *v = g->results[i];
    const fg_result_plan *r = &p->results[i];
    fprintf(f, "  result r%d %s %s", i, value_name(v, b1, sizeof b1), fg_dtype_name(v->type.dtype));
    type_sizes(f, p, &v->type);
    if (r->is_view) {
      fprintf(f, " view of %s offset %s strides ", fg_buf_str(r->base, b2, sizeof b2),
              p->sym.affine ? fg_sym_formula(&p->sym, r->view.offset, &p->g->arena)
                            : fg_arena_printf(&p->g->arena, "%" PRId64, r->view.offset));
      ints(f, r->view.strides, r->view.rank);
    } else {
      fprintf(f, " written by k%d", writer ? writer[i] : -1);
      if (r->why && r->into < 0)
        fprintf(f, " (not a view: %s)", r->why);
    }
    fputc('\n', f);
    if (r->into >= 0) { /* in-place results (opt/inplace.c) */
      fprintf(f, "  inplace %s <- result %d: %s", g->params[r->into]->name, i,
              fg_inplace_mode_name(r->inplace));
      if (r->inplace == FG_INPLACE_STAGED && r->inplace_why)
        fprintf(f, " (%s)", r->inplace_why);
      fputc('\n', f);
    }
  }
  free(writer);
}

int fg_plan_version(const fg_plan *p) {
  if (fg_plan_has_pdl(p))
    return 5;
  if (fg_plan_has_streams(p))
    return 4;
  for (int i = 0; i < p->g->nresults; i++)
    if (p->results[i].into >= 0 && !p->results[i].is_view)
      return 3;
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].grid_runtime || p->kernels[i].split_formula) /* min and max */
      return 3;
  return 2;
}

static void print_temps(FILE *f, const fg_plan *p) {
  char b1[64];
  for (int i = 0; i < p->ntemps; i++) {
    const fg_temp *t = &p->temps[i];
    fprintf(f, "  temp t%d %s bytes%s", i,
            t->bytes_formula ? t->bytes_formula : fg_sym_formula(&p->sym, t->bytes, &p->g->arena),
            t->zero ? " zeroed" : "");
    if (t->value)
      fprintf(f, " holds %s", value_name(t->value, b1, sizeof b1));
    else
      fputs(" workspace", f);
    fputc('\n', f);
  }
}

/* "order reversed (...)": the CTAs take their work in descending order
 * (issue 17, schedule.c choose_l2_order), and the tensor whose part in L2
 * a kernel reads first: this kernel, or the next one, after it. */
static void print_order(FILE *f, const fg_plan *p, const fg_kernel *k) {
  const fg_kernel *next = NULL;
  for (int i = k->id + 1; i < p->nkernels && !next; i++)
    if (p->kernels[i].grid[0] > 0)
      next = &p->kernels[i];
  bool for_next = k->reverse && k->l2_reread.kind == FG_BUF_NONE && next && !next->reverse &&
                  next->l2_reread.kind != FG_BUF_NONE;
  fg_buf_ref b = for_next ? next->l2_reread : k->l2_reread;
  const fg_value *v = fg_plan_buf_value(p, b);
  char name[64], buf[64];
  if (v && for_next)
    fprintf(f, "    order reversed (%s re-read by k%d: L2; %s)\n", value_name(v, name, sizeof name),
            next->id, fg_buf_str(b, buf, sizeof buf));
  else if (v)
    fprintf(f, "    order %s (%s re-read: L2; %s)\n", k->reverse ? "reversed" : "ascending",
            value_name(v, name, sizeof name), fg_buf_str(b, buf, sizeof buf));
  else if (k->reverse)
    fputs("    order reversed (knob L2_REVERSE=2)\n", f);
}

/* "schedule: ..." and the lines after it: why, warnings. */
static void print_schedule(FILE *f, const fg_plan *p, const fg_kernel *k) {
  /* flat: the lanes run over the linear index (issue 17, schedule.c choose_flat) */
  fprintf(f, "\n    schedule: vec %d%s", k->vec,
          k->flat     ? " (flat)"
          : k->peeled ? " (peeled)"
                      : ""); /* peeled: issue 21, rows as head, body, tail */
  if (k->split_formula)
    fprintf(f, " block %d grid [%s,%s,%" PRId64 "]", k->block, k->grid_formula, k->split_formula,
            k->grid[2]);
  else if (k->grid_formula)
    fprintf(f, " block %d grid [%s,%" PRId64 ",%" PRId64 "]", k->block, k->grid_formula, k->grid[1],
            k->grid[2]);
  else
    fprintf(f, " block %d grid [%" PRId64 ",%" PRId64 ",%" PRId64 "]", k->block, k->grid[0],
            k->grid[1], k->grid[2]);
  if (k->kind == FG_KERNEL_ROW)
    fprintf(f, " chunks %d%s", k->chunks,
            k->persistent ? " persistent"
            : fg_plan_lse_pairs(p, k) && fg_plan_row_passes(p, k) + fg_plan_writes_full(k) <= 1
                ? " one-pass"
                : " multi-pass");
  if (k->kind == FG_KERNEL_ROW && k->row_lanes > 0)
    fprintf(f, " lanes/row %d rows/cta %d", k->row_lanes, k->block / k->row_lanes);
  else if ((k->kind == FG_KERNEL_POINTWISE || k->kind == FG_KERNEL_SCATTER_SUM) && k->chunks > 1)
    fprintf(f, " chunks %d", k->chunks);
  if (k->split > 1)
    fprintf(f, k->split_formula ? " split at most %d" : " split %d", k->split);
  if (k->kind == FG_KERNEL_ROW && !k->ncols && !k->ntails && k->cluster > 1)
    fprintf(f, " cluster %d", k->cluster);
  if (k->kind == FG_KERNEL_ATTENTION)
    fprintf(f, " br %d bc %d warps %d pitch %d stages %d%s%s%s%s%s smem %d min-ctas-per-sm %d",
            k->attn_br, k->attn_bc, k->attn_warps, k->attn_pitch, k->attn_stages,
            k->attn_wgmma ? " wgmma" : "", k->attn_overlap ? " overlap" : "",
            k->attn_ldmatrix ? " ldmatrix" : "", k->attn_q_regs ? " q-in-registers" : "",
            fg_attr_bool(k->attn, "causal") ? " causal" : "", k->smem, k->min_ctas_per_sm);
  if (k->kind == FG_KERNEL_ATTENTION && k->attn_pingpong) /* attnpp */
    fprintf(f, " pingpong %d", k->attn_pingpong);
  if (k->kind == FG_KERNEL_ATTENTION && k->attn_ws) /* attnws */
    fprintf(f, " ws %d", k->attn_ws);
  if (k->kind == FG_KERNEL_ATTENTION && k->attn_lpt)
    fprintf(f, " lpt %d", k->attn_lpt_heads);
  if (k->kind == FG_KERNEL_ATTENTION_BWD)
    fprintf(f, " part %s br %d bc %d warps %d pitch %d stages %d%s%s%s%s smem %d delta t%d",
            k->attn_part == FG_ATTN_DQ ? "dq" : "dkdv", k->attn_br, k->attn_bc, k->attn_warps,
            k->attn_pitch, k->attn_stages, k->attn_wgmma ? " wgmma" : "",
            k->attn_overlap ? " overlap" : "", k->attn_ldmatrix ? " ldmatrix" : "",
            fg_attr_bool(k->attn, "causal") ? " causal" : "", k->smem, k->attn_delta_temp);
  /* the backward's LPT order, and its sections' pairs where it has them */
  if (k->kind == FG_KERNEL_ATTENTION_BWD && k->attn_lpt)
    fprintf(f, k->attn_lpt_heads ? " lpt %d" : " lpt", k->attn_lpt_heads);
  if (k->kind == FG_KERNEL_ATTENTION_BWD && k->attn_pingpong)
    fprintf(f, " pingpong %d", k->attn_pingpong);
  if (k->kind == FG_KERNEL_COLUMN && k->rows_per_iter > 1)
    fprintf(f, " rows %d", k->rows_per_iter);
  if (k->kind == FG_KERNEL_COLUMN && k->combine_batch)
    fprintf(f, " combine-batch %d", k->combine_batch);
  if (k->kind == FG_KERNEL_COLUMN && k->col_threads > 1) /* colthr: threads a column */
    fprintf(f, " threads/col %d", k->col_threads);
  if (k->ncols || k->ntails) {
    fprintf(f, " rows %d%s%s min-ctas-per-sm %d", k->rows_per_iter, k->reload ? " reload" : "",
            k->pipeline ? " pipelined" : "", k->min_ctas_per_sm);
    if (k->cluster > 1)
      fprintf(f, " cluster %d", k->cluster);
    if (k->defer_groups)
      fprintf(f, " deferred-rows %d", k->defer_groups);
    if (k->pack_bf16)
      fputs(" bf16x2", f);
    fprintf(f, " combiners %d x %d columns%s", k->combiners, k->combine_cols,
            k->early_arrive ? " early-arrival" : "");
    if (k->combine_loads)
      fprintf(f, " combiner-loads %d", k->combine_loads);
  }
  if (fg_kernel_is_scatter(k->kind) && k->scat_select)
    fprintf(f, " slices %" PRId64 " sources %s select", k->scat_bins,
            fg_sym_formula(&p->sym, k->scat_sources, &p->g->arena));
  else if (fg_kernel_is_scatter(k->kind))
    fprintf(f, " slices %" PRId64 " sources %s scan %d x %d", k->scat_bins,
            fg_sym_formula(&p->sym, k->scat_sources, &p->g->arena), k->scat_threads, k->scat_seg);
  if (fg_kernel_is_scatter(k->kind) && k->scat_ctas > 1)
    fprintf(f, " ctas %d", k->scat_ctas);
  if (k->kind == FG_KERNEL_SCATTER_SORT)
    fprintf(f, " rounds %d%s", k->scat_rounds, k->scat_smem ? " in-smem" : "");
  if (fg_kernel_is_scan(k->kind) && k->scan_lanes)
    fprintf(f, " lanes/row %d rows/cta %d", k->scan_lanes, k->block / k->scan_lanes);
  else if (fg_kernel_is_scan(k->kind))
    fprintf(f, " rows %d", k->rows_per_iter);
  if (fg_kernel_is_scan(k->kind) && k->scan_chunks > 1)
    fprintf(f, " chunks %d of %" PRId64 " sums t%d", k->scan_chunks, k->scan_chunk_len,
            k->scan_temp);
  fprintf(f, " index %s", k->idx64 ? "i64" : "i32");
  if (k->narrow_max > 0)
    fprintf(f, " (i32 for %s <= %" PRId64 ")", p->sym.name, k->narrow_max);
  fprintf(f, "\n    why: %s\n", k->why);
  if (k->not_with >= 0)
    fprintf(f, "    not in k%d (row + column form): %s\n", k->not_with, k->not_with_why);
  if (k->warn)
    fprintf(f, "    warning: %s (likely slower than eager PyTorch)\n", k->warn);
  print_order(f, p, k);
}

static void print_reductions(FILE *f, const char *what, fg_node *const *l, int n) {
  char b1[64];
  if (!n)
    return;
  fprintf(f, "\n    %s", what);
  for (int j = 0; j < n; j++)
    fprintf(f, " %s(%s)", l[j]->op->name, value_name(l[j]->out[0], b1, sizeof b1));
}

/* "cost: ..." (cost.c), at the symbolic size's stand-in when there is one */
static void print_cost(FILE *f, const fg_plan *p, const fg_kernel *k) {
  int64_t gbs = p->target.copy_gbs;
  if (p->opts.knobs.set[FG_KNOB_COST_GBS])
    gbs = p->opts.knobs.val[FG_KNOB_COST_GBS];
  if (k->grid[0] == 0 || (p->sym.n && fg_sym_involves(&p->sym, k->rank ? k->dims[0] : 0)))
    return; /* never launched; or sizes that are the stand-in's: no figure to show */
  fg_cost c = fg_kernel_cost(p, k, (double)gbs);
  fprintf(f, "    cost: %.1f us at %" PRId64 " GB/s (%.1f MB", c.us, gbs, c.bytes / 1e6);
  if (c.l2_bytes > 0)
    fprintf(f, ", %.1f MB of it from L2", c.l2_bytes / 1e6);
  fprintf(f, ", %.0f KB in flight, %.2f waves)\n", c.in_flight / 1024, c.waves);
  /* issue 17: the arithmetic term, where it decides the schedule */
  if (fg_kernel_compute_heavy(p, k))
    fprintf(f, "    compute: %.1f us (%.0f instructions an element): arithmetic-heavy\n",
            fg_kernel_compute_us(p, k), fg_kernel_ops_per_element(p, k));
}

static void print_kernel(FILE *f, const fg_plan *p, int i) {
  const fg_kernel *k = &p->kernels[i];
  char b1[64], b2[64];
  fprintf(f, "  kernel k%d %s domain ", i, kind_name(k->kind));
  extents(f, p, k->dims, k->rank);
  if (k->kind == FG_KERNEL_ROW || k->kind == FG_KERNEL_COLUMN || fg_kernel_is_scan(k->kind)) {
    fputs(fg_kernel_is_scan(k->kind) ? " scan" : " reduce", f);
    int64_t md[FG_MAX_RANK];
    int nm = 0;
    for (int d = 0; d < k->rank; d++)
      if (k->mask[d])
        md[nm++] = d;
    ints(f, md, nm);
  }
  print_schedule(f, p, k);
  if (k->stream)
    fprintf(f,
            "    stream %d: launched first, beside the caller's stream (independent of its "
            "kernels)\n",
            k->stream);
  if (k->pdl_wait || k->pdl_trigger)
    fprintf(f, "    programmatic launch:%s%s\n",
            k->pdl_wait ? " starts while the previous kernel on its stream runs, waits for it" : "",
            k->pdl_trigger
                ? (k->pdl_wait ? "; lets the next one start" : " lets the next one start")
                : "");
  fputs("    writes", f);
  for (int j = 0; j < k->nouts; j++) {
    const fg_storage *s = &p->store[k->outs[j]->id];
    fprintf(f, " %s->%s", value_name(k->outs[j], b1, sizeof b1), fg_buf_str(s->buf, b2, sizeof b2));
    if (s->view) { /* zip-store: a piece of a cat's buffer */
      fprintf(f, "[offset %lld strides ", (long long)s->view->offset);
      ints(f, s->view->strides, s->view->rank);
      fputc(']', f);
    }
  }
  if (k->kind == FG_KERNEL_SCATTER_SORT)
    fprintf(f, " offsets->t%d ordered->t%d", k->scat_off, k->scat_order);
  else if (fg_kernel_is_scatter(k->kind) && k->kind != FG_KERNEL_SCATTER_SUM) {
    static const char *const what[] = {"counts", "offsets", "filled", "ordered"};
    int i = k->kind - FG_KERNEL_SCATTER_COUNT;
    int t[] = {k->scat_cnt, k->scat_off, k->scat_fill, k->scat_order};
    fprintf(f, " %s->t%d", what[i], t[i]);
  }
  if (k->kind == FG_KERNEL_SCAN_CHUNKS)
    fprintf(f, " chunk-sums->t%d", k->scan_temp);
  print_reductions(f, fg_kernel_is_scan(k->kind) ? "scans" : "reductions", k->reds, k->nreds);
  print_reductions(f, "column reductions", k->cols, k->ncols);
  print_reductions(f, "reductions over all rows", k->tails, k->ntails);
  fputs("\n    args", f);
  for (int j = 0; j < k->nargs; j++) {
    arg_str(p, k->args[j], b1, sizeof b1);
    fprintf(f, " %s", b1);
  }
  fputc('\n', f);
  print_cost(f, p, k);
}

void fg_plan_print(FILE *f, const fg_plan *p) {
  print_header(f, p);
  print_params(f, p);
  print_results(f, p);
  print_temps(f, p);
  for (int i = 0; i < p->nkernels; i++)
    print_kernel(f, p, i);
}

void fg_plan_write_artifact(FILE *f, const fg_plan *p, const char *const *vec_entries) {
  const fg_graph *g = p->g;
  char b[64];
  fprintf(f, "// graph %s params %d results %d temps %d kernels %d syms %d\n", g->name, g->nparams,
          g->nresults, p->ntemps, p->nkernels, p->sym.n);
  if (p->sym.n)
    fprintf(f, "// sym 0 %s min %" PRId64 " max %" PRId64 " div %" PRId64 "\n", p->sym.name,
            p->sym.min, p->sym.max, p->sym.div);
  for (int i = 0; i < g->nparams; i++) {
    const fg_value *v = g->params[i];
    fprintf(f, "// param %d %s %s", i, v->name, fg_dtype_name(v->type.dtype));
    if (v->type.scalar)
      fputs(" scalar", f);
    else {
      fputc(' ', f);
      type_sizes(f, p, &v->type);
      fputs(" strides ", f);
      dense_strides(f, p, &v->type, true);
    }
    fputc('\n', f);
  }
  for (int i = 0; i < g->nresults; i++) {
    const fg_value *v = g->results[i];
    const fg_result_plan *r = &p->results[i];
    fprintf(f, "// result %d %s ", i, fg_dtype_name(v->type.dtype));
    type_sizes(f, p, &v->type);
    fputs(" strides ", f);
    if (r->is_view) {
      ints(f, r->view.strides, r->view.rank);
      fprintf(f, " view %s offset %s\n", fg_buf_str(r->base, b, sizeof b),
              p->sym.affine ? fg_sym_formula(&p->sym, r->view.offset, &p->g->arena)
                            : fg_arena_printf(&p->g->arena, "%" PRId64, r->view.offset));
    } else {
      dense_strides(f, p, &v->type, false);
      if (r->into >= 0) /* plan version 3: written into parameter J's storage */
        fprintf(f, " inplace p%d\n", r->into);
      else
        fputs(" written\n", f);
    }
  }
  for (int i = 0; i < p->ntemps; i++) {
    int64_t bytes = p->temps[i].bytes;
    fprintf(f, "// temp %d bytes %s align 256 %s\n", i,
            p->temps[i].bytes_formula
                ? p->temps[i].bytes_formula
                : fg_sym_formula(&p->sym, bytes > 0 ? bytes : 1, &p->g->arena),
            p->temps[i].zero ? "zero" : "nozero");
  }
  for (int i = 0; i < p->nkernels; i++) {
    const fg_kernel *k = &p->kernels[i];
    if (k->split_formula)
      fprintf(f, "// kernel %d %s grid %s %s %" PRId64 " block %d 1 1 smem %d args ", i, k->entry,
              k->grid_formula, k->split_formula, k->grid[2], k->block, k->smem);
    else if (k->grid_formula)
      fprintf(f, "// kernel %d %s grid %s %" PRId64 " %" PRId64 " block %d 1 1 smem %d args ", i,
              k->entry, k->grid_formula, k->grid[1], k->grid[2], k->block, k->smem);
    else
      fprintf(f,
              "// kernel %d %s grid %" PRId64 " %" PRId64 " %" PRId64 " block %d 1 1 smem %d args ",
              i, k->entry, k->grid[0], k->grid[1], k->grid[2], k->block, k->smem);
    for (int j = 0; j < k->nargs; j++) {
      arg_str(p, k->args[j], b, sizeof b);
      fprintf(f, "%s%s", j ? "," : "", b);
    }
    fputc('\n', f);
    if (vec_entries && vec_entries[i]) {
      /* The aligned variant assumes 16-byte alignment of every pointer. */
      fprintf(f, "// kernel-vec %d %s align 16 ptrs ", i, vec_entries[i]);
      int n = 0;
      for (int j = 0; j < k->nargs; j++) {
        if ((k->args[j].kind == FG_BUF_PARAM && g->params[k->args[j].index]->type.scalar) ||
            k->args[j].kind == FG_BUF_SYM)
          continue;
        arg_str(p, k->args[j], b, sizeof b);
        fprintf(f, "%s%s", n++ ? "," : "", b);
      }
      fputc('\n', f);
    }
    if (k->narrow_entry)
      fprintf(f, "// kernel-narrow %d %s %s max %" PRId64 "\n", i, k->narrow_entry,
              k->narrow_vec_entry ? k->narrow_vec_entry : "-", k->narrow_max);
    /* The row + column form's combiners wait for every CTA. */
    if (fg_kernel_resident(k))
      fprintf(f, "// kernel-resident %d cluster %d\n", i, k->cluster > 1 ? k->cluster : 1);
    if (k->stream)
      fprintf(f, "// kernel-stream %d %d\n", i, k->stream);
    if (k->pdl_wait)
      fprintf(f, "// kernel-pdl %d\n", i);
  }
  fputs("// end\n", f);
}
