#include "compile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

#include "emit.h"
#include "exit_status.h"
#include "diag.h"
#include "infer.h"
#include "print.h"
#include "ptx_merge.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool selected(const fg_graph *g, const char *const *names, int n) {
  if (n == 0)
    return true;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], g->name) == 0)
      return true;
  return false;
}

/* PTX identifiers: letters, digits, _ and $; graph names may hold '.'. */
/* suffix: "" the plain entry, "_v" the aligned one, "_n" and "_nv" their
 * narrow variants (32-bit indices for small symbolic sizes). */
static const char *entry_name(fg_graph *g, int gi, int ki, const char *suffix) {
  char *s = fg_arena_printf(&g->arena, "fg%d_%s_k%d%s", gi, g->name, ki, suffix);
  for (char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_'))
      *c = '_';
  return s;
}

static bool lower_kernel(fgb_module *mod, const fg_plan *p, fg_kernel *k, const char *name,
                         bool aligned, bool narrow, char *err, size_t cap) {
  fgb_param_kind kinds[FGB_MAX_KERNEL_PARAMS];
  if (k->nargs > FGB_MAX_KERNEL_PARAMS) {
    snprintf(err, cap, "kernel %s has %d arguments; at most %d are supported", name, k->nargs,
             FGB_MAX_KERNEL_PARAMS);
    return false;
  }
  for (int i = 0; i < k->nargs; i++) {
    fg_buf_ref b = k->args[i];
    if (b.kind == FG_BUF_PARAM && p->g->params[b.index]->type.scalar)
      kinds[i] =
          fg_dtype_is_float(p->g->params[b.index]->type.dtype) ? FGB_PARAM_F64 : FGB_PARAM_I64;
    else if (b.kind == FG_BUF_SYM)
      kinds[i] = FGB_PARAM_I64;
    else if (k->inplace) /* a result's storage is a parameter's: they alias */
      kinds[i] = aligned ? FGB_PARAM_PTR : FGB_PARAM_PTR_PLAIN;
    else
      kinds[i] = aligned ? FGB_PARAM_PTR_NOALIAS : FGB_PARAM_PTR_NOALIAS_PLAIN;
  }
  LLVMValueRef fn = fgb_kernel_begin(mod, name, k->nargs, kinds);
  if (!fn) {
    snprintf(err, cap, "kernel %s: too many arguments", name);
    return false;
  }
  fgb_kernel_set_maxntid(mod, fn, k->block);
  if (k->min_ctas_per_sm > 0)
    fgb_kernel_set_minctasm(mod, fn, k->min_ctas_per_sm);
  fgb_emitter e;
  if (!fgb_emitter_init(&e, mod, p, k, aligned)) {
    snprintf(err, cap, "out of memory");
    fgb_emitter_free(&e);
    return false;
  }
  e.fn = fn;
  if (narrow) /* the symbolic size at most k->narrow_max: every index fits 32 bits */
    e.ity = LLVMInt32TypeInContext(fgb_ctx(mod));
  e.args = malloc(sizeof(LLVMValueRef) * (size_t)(k->nargs + 1));
  if (!e.args) {
    snprintf(err, cap, "out of memory");
    fgb_emitter_free(&e);
    return false;
  }
  for (int i = 0; i < k->nargs; i++)
    e.args[i] = LLVMGetParam(fn, (unsigned)i);
  /* before anything reads or writes memory (opt/pdl.c) */
  if (k->pdl_wait && k->grid[0] != 0)
    fgb_grid_dep_wait(mod);
  if (k->pdl_trigger && k->grid[0] != 0)
    fgb_grid_dep_launch(mod);
  bool ok;
  if (k->grid[0] == 0)
    ok = true; /* an empty domain: never launched (schedule.c) */
  else
    switch (k->kind) {
    case FG_KERNEL_POINTWISE:
      ok = fgb_emit_pointwise_kernel(&e);
      break;
    case FG_KERNEL_ROW:
      ok = fgb_emit_row_kernel(&e);
      break;
    case FG_KERNEL_ATTENTION:
      ok = fgb_emit_attention_kernel(&e);
      break;
    case FG_KERNEL_SCATTER_COUNT:
    case FG_KERNEL_SCATTER_SCAN:
    case FG_KERNEL_SCATTER_FILL:
    case FG_KERNEL_SCATTER_ORDER:
    case FG_KERNEL_SCATTER_SUM:
    case FG_KERNEL_SCATTER_SORT:
      ok = fgb_emit_scatter_kernel(&e);
      break;
    case FG_KERNEL_ATTENTION_BWD:
      ok = fgb_emit_attention_bwd_kernel(&e);
      break;
    case FG_KERNEL_SCAN:
    case FG_KERNEL_SCAN_CHUNKS:
      ok = fgb_emit_scan_kernel(&e);
      break;
    default:
      ok = fgb_emit_column_kernel(&e);
      break;
    }
  if (ok)
    LLVMBuildRetVoid(fgb_builder(mod));
  else
    snprintf(err, cap, "%s: %s", name, e.err[0] ? e.err : "lowering failed");
  fgb_emitter_free(&e);
  return ok;
}

/* The cluster shape of a kernel entry: LLVM 19 emits no
 * .reqnctapercluster, so it goes in after the entry's .maxntid line.
 * Returns the new text (text is freed), or NULL. */
static char *add_cluster_dims(char *text, const char *entry, int c) {
  /* ".entry NAME(" at the start of a line, whatever the name's length */
  size_t elen = strlen(entry);
  char *at = NULL;
  for (char *p = strstr(text, ".entry "); p; p = strstr(p + 1, ".entry "))
    if (strncmp(p + 7, entry, elen) == 0 && p[7 + elen] == '(') {
      at = p;
      break;
    }
  char *mx = at ? strstr(at, "\n.maxntid") : NULL, *eol = mx ? strchr(mx + 1, '\n') : NULL;
  if (!eol) {
    free(text);
    return NULL;
  }
  char dir[64];
  int dl = snprintf(dir, sizeof dir, ".reqnctapercluster %d, 1, 1\n", c);
  size_t head = (size_t)(eol + 1 - text), len = strlen(text);
  char *out = malloc(len + (size_t)dl + 1);
  if (out) {
    memcpy(out, text, head);
    memcpy(out + head, dir, (size_t)dl);
    memcpy(out + head + dl, text + head, len - head + 1);
  }
  free(text);
  return out;
}

/* One thread's share of the kernels: its own LLVM context and module. */
typedef struct unit {
  const fgc_options *o;
  bool emit_llvm;
  fg_plan **plans;
  int ngraphs;
  const char ***vec_entries;
  const int *owner; /* per kernel (graph-major order): which unit lowers it */
  int index;
  char *text;
  char err[1024];
  int rc;
} unit;

static void *run_unit(void *arg) {
  unit *u = arg;
  fgb_module *mod =
      fgb_module_create("fusec", u->o->arch ? u->o->arch : "sm_90", u->err, sizeof u->err);
  if (!mod) {
    u->rc = FG_EXIT_INTERNAL;
    return NULL;
  }
  int gk = 0;
  for (int gi = 0; gi < u->ngraphs; gi++) {
    fg_plan *p = u->plans[gi];
    if (!p)
      continue;
    for (int ki = 0; ki < p->nkernels; ki++, gk++) {
      if (u->owner[gk] != u->index)
        continue;
      fg_kernel *k = &p->kernels[ki];
      if (!lower_kernel(mod, p, k, k->entry, false, false, u->err, sizeof u->err) ||
          (u->vec_entries[gi][ki] &&
           !lower_kernel(mod, p, k, u->vec_entries[gi][ki], true, false, u->err, sizeof u->err)) ||
          (k->narrow_entry &&
           !lower_kernel(mod, p, k, k->narrow_entry, false, true, u->err, sizeof u->err)) ||
          (k->narrow_vec_entry &&
           !lower_kernel(mod, p, k, k->narrow_vec_entry, true, true, u->err, sizeof u->err))) {
        u->rc = FG_EXIT_INTERNAL;
        fgb_module_free(mod);
        return NULL;
      }
    }
  }
  fgb_finish_opts fo = {u->o->libdevice, u->o->opt_level, u->emit_llvm, u->o->fast_math};
  u->text = fgb_module_finish(mod, &fo, u->err, sizeof u->err);
  if (!u->text)
    u->rc = fgb_module_setup_error(mod) ? FG_EXIT_INPUT : FG_EXIT_INTERNAL;
  for (int gi = 0, gk = 0; gi < u->ngraphs && u->text && !u->emit_llvm; gi++) {
    fg_plan *p = u->plans[gi];
    for (int ki = 0; p && ki < p->nkernels && u->text; ki++, gk++) {
      const fg_kernel *k = &p->kernels[ki];
      if (u->owner[gk] != u->index || k->cluster <= 1)
        continue;
      u->text = add_cluster_dims(u->text, k->entry, k->cluster);
      if (u->text && u->vec_entries[gi][ki])
        u->text = add_cluster_dims(u->text, u->vec_entries[gi][ki], k->cluster);
      if (u->text && k->narrow_entry)
        u->text = add_cluster_dims(u->text, k->narrow_entry, k->cluster);
      if (u->text && k->narrow_vec_entry)
        u->text = add_cluster_dims(u->text, k->narrow_vec_entry, k->cluster);
      if (!u->text) {
        snprintf(u->err, sizeof u->err,
                 "kernel %s: no .maxntid line to add its cluster shape after", k->entry);
        u->rc = FG_EXIT_INTERNAL;
      }
    }
  }
  fgb_module_free(mod);
  return NULL;
}

/* A unit's fixed cost (its own LLVM module, libdevice linked again) pays
 * only for this much kernel weight or more. */
enum { FGC_UNIT_WEIGHT = 48 };

/* The units not yet taken; each thread takes the next until none is left. */
typedef struct worklist {
  pthread_mutex_t lock;
  int next, n;
  unit *units;
} worklist;

static void *run_units(void *arg) {
  worklist *w = arg;
  for (;;) {
    pthread_mutex_lock(&w->lock);
    int i = w->next < w->n ? w->next++ : -1;
    pthread_mutex_unlock(&w->lock);
    if (i < 0)
      return NULL;
    run_unit(&w->units[i]);
  }
}

/* Rough cost of lowering a kernel, to share kernels between the compile
 * threads: the code it unrolls, lanes x chunks x rows in flight (the
 * aligned variant's; the plain one is compact), plus a fixed part (more
 * for the row + column form's combine phase). */
static int64_t kernel_weight(const fg_kernel *k) {
  int64_t rows = k->rows_per_iter > 1 ? k->rows_per_iter : 1;
  int64_t w =
      (int64_t)k->vec * (k->chunks > 0 ? k->chunks : 1) * rows + (k->ncols || k->ntails ? 32 : 8);
  return k->vec > 1 ? w + (int64_t)k->vec * (k->chunks > 0 ? k->chunks : 1) + 8 : w;
}

/* The exit status after a stage reported failure: what d has seen, and a
 * failure that reported nothing is itself a bug. */
static int failed(fg_diag *d) {
  if (d->nerrors == 0)
    fg_internal_error(d, (fg_loc){0}, "a stage failed without saying why");
  return fg_diag_status(d);
}

static int oom(fg_diag *d) {
  fg_error(d, (fg_loc){0}, "out of memory");
  return FG_EXIT_INPUT;
}

int fgc_compile(fg_module *m, const char *const *names, int n, fgc_emit emit, const fgc_options *o,
                fg_diag *d, FILE *out) {
  FILE *log = stderr;
  double t0 = now_ms();
  int rc = 0;
  fg_plan **plans = calloc((size_t)m->ngraphs + 1, sizeof *plans);
  const char ***vec_entries = calloc((size_t)m->ngraphs + 1, sizeof *vec_entries);
  fg_graph **copies = calloc((size_t)m->ngraphs + 1, sizeof *copies); /* fg_sym_lower's */
  int *owner = NULL;
  unit *units = NULL;
  int nunits = 0;
  if (!plans || !vec_entries || !copies) {
    rc = oom(d);
    goto done;
  }
  for (int gi = 0; gi < m->ngraphs; gi++) {
    fg_graph *g = m->graphs[gi];
    if (!selected(g, names, n))
      continue;
    fg_sym_lowering sym = {0};
    /* --emit opt shows the passes on the graph as written, sizes by name */
    fg_graph *lowered = emit == FGC_EMIT_OPT ? g : fg_sym_lower(g, &sym, d);
    if (!lowered) {
      rc = failed(d);
      goto done;
    }
    if (lowered != g) /* freed at the end: the caller's module keeps the graph as written */
      g = copies[gi] = lowered;
    fg_pass_options passes = o->passes;
    passes.cluster_rows = o->plan.target.clusters;
    if (!fg_run_pipeline(g, &passes, d)) {
      rc = failed(d);
      goto done;
    }
    if (emit == FGC_EMIT_OPT)
      continue;
    double ts = now_ms();
    fg_plan_options po = o->plan;
    po.sym = &sym;
    plans[gi] = fg_plan_build(g, &po, d);
    if (!plans[gi]) {
      rc = failed(d);
      goto done;
    }
    if (o->time_passes)
      fprintf(log, "pass %-16s %-24s %8.3f ms\n", "segment+schedule", g->name, now_ms() - ts);
  }
  if (emit == FGC_EMIT_OPT) {
    bool first = true;
    for (int gi = 0; gi < m->ngraphs; gi++) {
      if (!selected(m->graphs[gi], names, n))
        continue;
      if (!first)
        fputc('\n', out);
      first = false;
      fg_print_graph(out, m->graphs[gi]);
    }
    goto done;
  }
  if (emit == FGC_EMIT_DOT) {
    fg_plan_write_dot(out, plans, m->ngraphs);
    goto done;
  }
  if (emit == FGC_EMIT_PLAN) {
    for (int gi = 0; gi < m->ngraphs; gi++)
      if (plans[gi])
        fg_plan_print(out, plans[gi]);
    goto done;
  }
  /* Names first (they live in the graphs' arenas), then the kernels are
   * shared out among threads, each lowering into its own LLVM module. */
  int total = 0;
  for (int gi = 0; gi < m->ngraphs; gi++) {
    fg_plan *p = plans[gi];
    if (!p)
      continue;
    vec_entries[gi] = fg_arena_alloc(&p->g->arena, sizeof(char *) * (size_t)(p->nkernels + 1));
    for (int ki = 0; ki < p->nkernels; ki++) {
      fg_kernel *k = &p->kernels[ki];
      k->entry = entry_name(p->g, gi, ki, "");
      if (k->vec > 1)
        vec_entries[gi][ki] = entry_name(p->g, gi, ki, "_v");
      if (k->narrow_max > 0) {
        k->narrow_entry = entry_name(p->g, gi, ki, "_n");
        if (k->vec > 1)
          k->narrow_vec_entry = entry_name(p->g, gi, ki, "_nv");
      }
      total++;
    }
  }
  /* Units by the kernels alone (compile.h: FGC_UNITS); threads by the
   * machine, each taking the next unit until none is left. */
  int64_t weight = 0;
  for (int gi = 0; gi < m->ngraphs; gi++)
    for (int ki = 0; plans[gi] && ki < plans[gi]->nkernels; ki++)
      weight += kernel_weight(&plans[gi]->kernels[ki]);
  nunits = emit == FGC_EMIT_LLVM ? 1 : (int)(weight / FGC_UNIT_WEIGHT);
  if (nunits > FGC_UNITS)
    nunits = FGC_UNITS;
  if (nunits > total)
    nunits = total;
  if (nunits < 1)
    nunits = 1;
  owner = calloc((size_t)total + 1, sizeof *owner);
  units = calloc((size_t)nunits, sizeof *units);
  int64_t load[FGC_UNITS] = {0};
  if (!owner || !units) {
    rc = oom(d);
    goto done;
  }
  for (int gi = 0, gk = 0; gi < m->ngraphs; gi++) {
    fg_plan *p = plans[gi];
    if (!p)
      continue;
    for (int ki = 0; ki < p->nkernels; ki++, gk++) {
      int best = 0;
      for (int t = 1; t < nunits; t++)
        if (load[t] < load[best])
          best = t;
      owner[gk] = best;
      load[best] += kernel_weight(&p->kernels[ki]);
    }
  }
  double tl = now_ms();
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = o->jobs > 0 ? o->jobs : ncpu < 1 ? 1 : (int)(ncpu < FGC_UNITS ? ncpu : FGC_UNITS);
  if (nthreads > nunits)
    nthreads = nunits;
  worklist wl = {PTHREAD_MUTEX_INITIALIZER, 0, nunits, units};
  for (int t = 0; t < nunits; t++)
    units[t] =
        (unit){o, emit == FGC_EMIT_LLVM, plans, m->ngraphs, vec_entries, owner, t, NULL, "", 0};
  pthread_t th[FGC_UNITS];
  int started = 0;
  for (int t = 1; t < nthreads; t++, started++)
    if (pthread_create(&th[t - 1], NULL, run_units, &wl) != 0)
      break;
  run_units(&wl);
  for (int t = 0; t < started; t++)
    pthread_join(th[t], NULL);
  if (o->time_passes)
    fprintf(log, "pass %-16s %-24s %8.3f ms (%d units, %d threads)\n", "lower+llvm+ptx", "*",
            now_ms() - tl, nunits, started + 1);
  for (int t = 0; t < nunits; t++)
    if (units[t].rc) {
      if (units[t].rc == FG_EXIT_INTERNAL)
        fg_internal_error(d, (fg_loc){0}, "%s", units[t].err);
      else
        fg_error(d, (fg_loc){0}, "%s", units[t].err);
      rc = units[t].rc;
      goto done;
    }
  char *texts[FGC_UNITS];
  for (int t = 0; t < nunits; t++)
    texts[t] = units[t].text;
  char *text = nunits == 1 ? units[0].text : fgb_ptx_merge(texts, nunits);
  if (!text) {
    rc = oom(d);
    goto done;
  }
  if (emit == FGC_EMIT_PTX) {
    int version = 2; /* the newest any graph needs (fg_plan_version) */
    for (int gi = 0; gi < m->ngraphs; gi++)
      if (plans[gi] && fg_plan_version(plans[gi]) > version)
        version = fg_plan_version(plans[gi]);
    fprintf(out, "// fusec-plan %d\n// target %s\n", version, o->arch ? o->arch : "sm_90");
    for (int gi = 0; gi < m->ngraphs; gi++)
      if (plans[gi])
        fg_plan_write_artifact(out, plans[gi], vec_entries[gi]);
    fputc('\n', out); /* the plan is the leading run of // lines */
  }
  fputs(text, out);
  if (nunits > 1)
    free(text);
  if (o->time_passes)
    fprintf(log, "pass %-16s %-24s %8.3f ms\n", "total", "*", now_ms() - t0);
done:
  for (int t = 0; units && t < nunits; t++)
    free(units[t].text);
  free(units);
  free(owner);
  free(plans);
  free(vec_entries);
  for (int gi = 0; copies && gi < m->ngraphs; gi++)
    fg_graph_free(copies[gi]);
  free(copies);
  return rc;
}
