/* `fusec --emit dot`: the plans as one Graphviz graph (docs/architecture.md,
 * "Looking at the plan"). Each graph is a cluster; in it each kernel is a
 * cluster of the ops it computes (an op recomputed by two kernels is drawn
 * in both), parameters and results are nodes outside the kernels, a tensor
 * that goes through memory (a parameter read, a stored temp or result) is
 * a bold edge labelled with its buffer and bytes, edges within a kernel
 * are thin, and views (view ops, view results) are dashed. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* s as a dot string's contents: quotes and backslashes escaped, newlines
 * as nl ("\\n" centered, "\\l" left-justified), long lines wrapped at
 * spaces after about `wrap` characters (0: never). */
static void esc(FILE *f, const char *s, const char *nl, int wrap) {
  int col = 0;
  for (; *s; s++) {
    if (*s == '\n' || (wrap && col >= wrap && *s == ' ')) {
      fputs(nl, f);
      col = 0;
      continue;
    }
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    fputc(*s, f);
    col++;
  }
}

static const char *kind_name(fg_kernel_kind k) {
  return k == FG_KERNEL_POINTWISE     ? "pointwise"
         : k == FG_KERNEL_ROW         ? "row-reduction"
         : k == FG_KERNEL_COLUMN      ? "column-reduction"
         : k == FG_KERNEL_SCAN        ? "scan"
         : k == FG_KERNEL_SCAN_CHUNKS ? "scan-chunks"
                                      : "attention";
}

/* "f32[T,4096]": sizes as the plan writes them, formulas of the symbolic
 * size where they involve it (opt/symbolic.h) */
static void type_str(FILE *f, const fg_plan *p, const fg_type *t) {
  fputs(fg_dtype_name(t->dtype), f);
  if (t->scalar)
    return;
  fputc('[', f);
  for (int i = 0; i < t->rank; i++)
    fprintf(f, "%s%s", i ? "," : "",
            t->dims[i].sym ? t->dims[i].sym
                           : fg_sym_formula(&p->sym, t->dims[i].size, &p->g->arena));
  fputc(']', f);
}

/* A tensor's bytes in memory: "16 KiB", "1.5 MiB", or a formula of the
 * symbolic size ("T*8192 B") for a compiled graph over one. */
static void bytes_str(FILE *f, const fg_plan *p, const fg_value *v) {
  int64_t n = fg_dtype_size(v->type.dtype);
  for (int i = 0; i < v->type.rank; i++) {
    int64_t d = v->type.dims[i].size;
    if (d < 0) { /* a size by name: only in graphs the plan did not lower */
      fputs("? B", f);
      return;
    }
    n = n && d > INT64_MAX / n ? INT64_MAX : n * d;
  }
  if (p->sym.n && fg_sym_involves(&p->sym, n)) {
    fprintf(f, "%s B", fg_sym_formula(&p->sym, n, &p->g->arena));
    return;
  }
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = (double)n;
  int u = 0;
  while (x >= 1024 && u < 4)
    x /= 1024, u++;
  if (u == 0)
    fprintf(f, "%" PRId64 " B", n);
  else
    fprintf(f, x < 10 && x != (int64_t)x ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

static const char *value_name(const fg_value *v, char *buf, int cap) {
  if (v->name)
    return v->name;
  snprintf(buf, (size_t)cap, "%%%d", v->id);
  return buf;
}

typedef struct dot {
  FILE *f;
  const fg_plan *p;
  int gi;
  unsigned char *in_kernel; /* [node id]: drawn in the kernel being walked */
} dot;

static bool is_view(const fg_node *n) { return n->op->kind == FG_KIND_VIEW; }

/* Literal scalars are left out: an edge from each would crowd the kernels. */
static bool drawn(const fg_node *n) { return n->op->kind != FG_KIND_LITERAL; }

/* The node of v's definition as drawn in kernel k. */
static void node_id(const dot *d, int k, const fg_node *n) {
  fprintf(d->f, "g%d_k%d_n%d", d->gi, k, n->id);
}

/* The ops kernel k computes: from what it writes and reduces, through
 * operands, up to what is in memory for it. */
static void mark(dot *d, int k, const fg_node *n) {
  if (!n || d->in_kernel[n->id])
    return;
  d->in_kernel[n->id] = 1;
  for (int i = 0; i < n->nin; i++)
    if (!fg_plan_in_memory(d->p, n->in[i], k))
      mark(d, k, n->in[i]->def);
}

/* An edge into kernel k's node n from operand v: a parameter's or stored
 * tensor's (bold, labelled with its buffer and bytes) or one computed in k. */
static void operand_edge(const dot *d, int k, const fg_node *n, const fg_value *v) {
  const fg_plan *p = d->p;
  FILE *f = d->f;
  char b[64];
  fputs("    ", f);
  if (v->param_index >= 0) {
    fprintf(f, "g%d_p%d -> ", d->gi, v->param_index);
    node_id(d, k, n);
    if (v->type.scalar) {
      fputs(" [style=dotted label=\"scalar\"]\n", f);
      return;
    }
    fprintf(f, " [penwidth=2 label=\"p%d ", v->param_index);
  } else if (fg_plan_in_memory(p, v, k)) {
    node_id(d, p->store[v->id].kernel, v->def);
    fputs(" -> ", f);
    node_id(d, k, n);
    fprintf(f, " [penwidth=2 label=\"%s ", fg_buf_str(p->store[v->id].buf, b, sizeof b));
  } else {
    node_id(d, k, v->def);
    fputs(" -> ", f);
    node_id(d, k, n);
    fputs(is_view(v->def) ? " [style=dashed]\n" : "\n", f);
    return;
  }
  bytes_str(f, p, v);
  fputs("\"]\n", f);
}

static void write_kernel(dot *d, int k) {
  const fg_plan *p = d->p;
  const fg_kernel *kn = &p->kernels[k];
  FILE *f = d->f;
  memset(d->in_kernel, 0, (size_t)p->g->next_node_id + 1);
  for (int j = 0; j < kn->nouts; j++)
    mark(d, k, kn->outs[j]->def);
  for (int j = 0; j < kn->nreds; j++)
    mark(d, k, kn->reds[j]);
  for (int j = 0; j < kn->ncols; j++)
    mark(d, k, kn->cols[j]);
  for (int j = 0; j < kn->ntails; j++)
    mark(d, k, kn->tails[j]);
  fprintf(f, "  subgraph cluster_g%d_k%d {\n    label=\"k%d %s [", d->gi, k, k,
          kind_name(kn->kind));
  for (int i = 0; i < kn->rank; i++)
    fprintf(f, "%s%s%s", i ? "," : "", fg_sym_formula(&p->sym, kn->dims[i], &p->g->arena),
            kn->mask[i] && kn->kind != FG_KERNEL_POINTWISE ? "*" : "");
  fprintf(f, "]\\lgrid %s", kn->grid_formula ? kn->grid_formula : "");
  if (!kn->grid_formula)
    fprintf(f, "%" PRId64, kn->grid[0]);
  fprintf(f, "x%" PRId64 "x%" PRId64 " block %d vec %d", kn->grid[1], kn->grid[2], kn->block,
          kn->vec);
  if (kn->flat)
    fputs(" flat", f); /* lanes over the linear index (schedule.c choose_flat) */
  if (kn->peeled)      /* issue 21: head, vector body, tail */
    fputs(" (peeled)", f);
  if (kn->split > 1)
    fprintf(f, " split %d", kn->split);
  if (kn->reverse)
    fputs(" reversed", f); /* CTAs in descending order (schedule.c choose_l2_order) */
  if (kn->stream)          /* on the second stream, beside the others (streams.c) */
    fprintf(f, "\\lstream %d (beside the caller's stream)", kn->stream);
  if (kn->pdl_wait) /* launched while the kernel before it runs (pdl.c) */
    fputs("\\lprogrammatic launch: waits for the previous kernel in the kernel", f);
  fputs("\\lwhy: ", f);
  esc(f, kn->why ? kn->why : "", "\\l", 72);
  if (kn->not_with >= 0) {
    fprintf(f, "\\lnot in k%d: ", kn->not_with);
    esc(f, kn->not_with_why ? kn->not_with_why : "", "\\l", 72);
  }
  if (kn->warn) {
    fputs("\\lwarning: ", f);
    esc(f, kn->warn, "\\l", 72);
  }
  fputs("\\l\"\n    labeljust=l style=\"rounded,filled\" fillcolor=\"#eef3fb\" color=\"#7d97c4\"\n",
        f);
  char b[64];
  for (const fg_node *n = p->g->first; n; n = n->next) {
    if (!d->in_kernel[n->id] || !drawn(n))
      continue;
    fputs("    ", f);
    node_id(d, k, n);
    fprintf(f, " [label=\"%s", n->op->name);
    for (int o = 0; o < n->nout; o++) {
      fprintf(f, "\\n%s ", value_name(n->out[o], b, sizeof b));
      type_str(f, p, &n->out[o]->type);
    }
    fputs("\"", f);
    if (is_view(n))
      fputs(" style=\"dashed,filled\" fillcolor=white", f);
    else if (n->op->kind == FG_KIND_REDUCTION)
      fputs(" style=filled fillcolor=\"#fde9c8\"", f);
    else
      fputs(" style=filled fillcolor=white", f);
    fputs("]\n", f);
  }
  fputs("  }\n", f);
  for (const fg_node *n = p->g->first; n; n = n->next)
    if (d->in_kernel[n->id] && drawn(n))
      for (int i = 0; i < n->nin; i++)
        if (!n->in[i]->def || drawn(n->in[i]->def))
          operand_edge(d, k, n, n->in[i]);
}

/* The kernel that writes result buffer i and the stored value it writes. */
static int writer_of_result(const fg_plan *p, int i, const fg_value **v) {
  for (int k = 0; k < p->nkernels; k++)
    for (int j = 0; j < p->kernels[k].nouts; j++) {
      fg_buf_ref b = p->store[p->kernels[k].outs[j]->id].buf;
      if (b.kind == FG_BUF_RESULT && b.index == i) {
        *v = p->kernels[k].outs[j];
        return k;
      }
    }
  return -1;
}

static void write_graph(dot *d) {
  const fg_plan *p = d->p;
  const fg_graph *g = p->g;
  FILE *f = d->f;
  char b[64];
  fprintf(f, " subgraph cluster_g%d {\n  label=\"graph %s: %d kernel%s, %d temp%s", d->gi, g->name,
          p->nkernels, p->nkernels == 1 ? "" : "s", p->ntemps, p->ntemps == 1 ? "" : "s");
  if (p->sym.n)
    fprintf(f, ", size %s %" PRId64 "..%" PRId64, p->sym.name, p->sym.min, p->sym.max);
  fputs("\"\n  labeljust=l fontsize=14 style=rounded color=\"#999999\"\n", f);
  for (int i = 0; i < g->nparams; i++) {
    const fg_value *v = g->params[i];
    fprintf(f, "  g%d_p%d [shape=ellipse style=filled fillcolor=\"#dff0d8\" label=\"p%d %s\\n",
            d->gi, i, i, v->name);
    type_str(f, p, &v->type);
    fputs("\"]\n", f);
  }
  for (int i = 0; i < g->nresults; i++) {
    const fg_value *v = g->results[i];
    fprintf(f,
            "  g%d_r%d [shape=box style=\"rounded,filled\" fillcolor=\"#f2dede\" label=\"r%d %s\\n",
            d->gi, i, i, value_name(v, b, sizeof b));
    type_str(f, p, &v->type);
    fputs(p->results[i].is_view ? "\\n(view)\"]\n" : "\"]\n", f);
  }
  for (int k = 0; k < p->nkernels; k++)
    write_kernel(d, k);
  for (int i = 0; i < g->nresults; i++) {
    const fg_result_plan *r = &p->results[i];
    if (r->is_view) {
      fprintf(f, "  g%d_%s -> g%d_r%d [style=dashed label=\"view offset %" PRId64 "\"]\n", d->gi,
              fg_buf_str(r->base, b, sizeof b), d->gi, i, r->view.offset);
      continue;
    }
    const fg_value *v = NULL;
    int k = writer_of_result(p, i, &v);
    if (k < 0 || !v->def)
      continue;
    fputs("  ", f);
    node_id(d, k, v->def);
    fprintf(f, " -> g%d_r%d [penwidth=2 label=\"r%d ", d->gi, i, i);
    bytes_str(f, p, g->results[i]);
    fputs("\"]\n", f);
  }
  fputs(" }\n", f);
}

void fg_plan_write_dot(FILE *f, fg_plan *const *plans, int n) {
  fputs("digraph fusec {\n rankdir=TB newrank=true fontname=\"Helvetica\" fontsize=11\n"
        " node [shape=box fontname=\"Helvetica\" fontsize=10]\n"
        " edge [fontname=\"Helvetica\" fontsize=9]\n",
        f);
  for (int gi = 0; gi < n; gi++) {
    if (!plans[gi])
      continue;
    dot d = {f, plans[gi], gi, calloc((size_t)plans[gi]->g->next_node_id + 1, 1)};
    if (!d.in_kernel)
      abort();
    write_graph(&d);
    free(d.in_kernel);
  }
  fputs("}\n", f);
}
