#include "compile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emit.h"
#include "infer.h"
#include "print.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool selected(const fg_graph *g, const char *const *names, int n) {
  if (n == 0) return true;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], g->name) == 0) return true;
  return false;
}

/* PTX identifiers: letters, digits, _ and $; graph names may hold '.'. */
static const char *entry_name(fg_graph *g, int gi, int ki, bool aligned) {
  char *s = fg_arena_printf(&g->arena, "fg%d_%s_k%d%s", gi, g->name, ki, aligned ? "_v" : "");
  for (char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) *c = '_';
  return s;
}

static bool lower_kernel(fgb_module *mod, const fg_plan *p, fg_kernel *k, const char *name, bool aligned,
                         char *err, size_t cap) {
  fgb_param_kind kinds[256];
  if (k->nargs > 256) {
    snprintf(err, cap, "kernel %s has too many arguments", name);
    return false;
  }
  for (int i = 0; i < k->nargs; i++) {
    fg_buf_ref b = k->args[i];
    if (b.kind == FG_BUF_PARAM && p->g->params[b.index]->type.scalar)
      kinds[i] = fg_dtype_is_float(p->g->params[b.index]->type.dtype) ? FGB_PARAM_F64 : FGB_PARAM_I64;
    else
      kinds[i] = FGB_PARAM_PTR_NOALIAS;
  }
  LLVMValueRef fn = fgb_kernel_begin(mod, name, k->nargs, kinds);
  fgb_kernel_set_maxntid(mod, fn, k->block);
  fgb_emitter e;
  if (!fgb_emitter_init(&e, mod, p, k, aligned)) {
    snprintf(err, cap, "out of memory");
    fgb_emitter_free(&e);
    return false;
  }
  e.fn = fn;
  e.args = malloc(sizeof(LLVMValueRef) * (size_t)(k->nargs + 1));
  for (int i = 0; i < k->nargs; i++) e.args[i] = LLVMGetParam(fn, (unsigned)i);
  bool ok;
  switch (k->kind) {
  case FG_KERNEL_POINTWISE: ok = fgb_emit_pointwise_kernel(&e); break;
  case FG_KERNEL_ROW: ok = fgb_emit_row_kernel(&e); break;
  default: ok = fgb_emit_column_kernel(&e); break;
  }
  if (ok) LLVMBuildRetVoid(fgb_builder(mod));
  else snprintf(err, cap, "%s: %s", name, e.err[0] ? e.err : "lowering failed");
  fgb_emitter_free(&e);
  return ok;
}

int fgc_compile(fg_module *m, const char *const *names, int n, fgc_emit emit, const fgc_options *o, fg_diag *d,
                FILE *out) {
  FILE *log = stderr;
  double t0 = now_ms();
  int rc = 0;
  fg_plan **plans = calloc((size_t)m->ngraphs + 1, sizeof *plans);
  const char ***vec_entries = calloc((size_t)m->ngraphs + 1, sizeof *vec_entries);
  fgb_module *mod = NULL;
  char err[1024] = "";
  if (!plans || !vec_entries) { rc = 3; goto done; }
  for (int gi = 0; gi < m->ngraphs; gi++) {
    fg_graph *g = m->graphs[gi];
    if (!selected(g, names, n)) continue;
    if (!fg_run_pipeline(g, &o->passes, d)) { rc = 1; goto done; }
    if (emit == FGC_EMIT_OPT) continue;
    double ts = now_ms();
    plans[gi] = fg_plan_build(g, &o->plan, d);
    if (!plans[gi]) { rc = 1; goto done; }
    if (o->time_passes) fprintf(log, "pass %-16s %-24s %8.3f ms\n", "segment+schedule", g->name, now_ms() - ts);
  }
  if (emit == FGC_EMIT_OPT) {
    bool first = true;
    for (int gi = 0; gi < m->ngraphs; gi++) {
      if (!selected(m->graphs[gi], names, n)) continue;
      if (!first) fputc('\n', out);
      first = false;
      fg_print_graph(out, m->graphs[gi]);
    }
    goto done;
  }
  if (emit == FGC_EMIT_PLAN) {
    for (int gi = 0; gi < m->ngraphs; gi++)
      if (plans[gi]) fg_plan_print(out, plans[gi]);
    goto done;
  }
  double tl = now_ms();
  mod = fgb_module_create("fusec", o->arch ? o->arch : "sm_90", err, sizeof err);
  if (!mod) { fprintf(stderr, "fusec: error: %s\n", err); rc = 3; goto done; }
  for (int gi = 0; gi < m->ngraphs; gi++) {
    fg_plan *p = plans[gi];
    if (!p) continue;
    vec_entries[gi] = fg_arena_alloc(&p->g->arena, sizeof(char *) * (size_t)(p->nkernels + 1));
    for (int ki = 0; ki < p->nkernels; ki++) {
      fg_kernel *k = &p->kernels[ki];
      k->entry = entry_name(p->g, gi, ki, false);
      if (!lower_kernel(mod, p, k, k->entry, false, err, sizeof err)) {
        fprintf(stderr, "fusec: internal error: %s\n", err);
        rc = 3;
        goto done;
      }
      if (k->vec > 1) {
        const char *v = entry_name(p->g, gi, ki, true);
        if (!lower_kernel(mod, p, k, v, true, err, sizeof err)) {
          fprintf(stderr, "fusec: internal error: %s\n", err);
          rc = 3;
          goto done;
        }
        vec_entries[gi][ki] = v;
      }
    }
  }
  if (o->time_passes) fprintf(log, "pass %-16s %-24s %8.3f ms\n", "lower-kernels", "*", now_ms() - tl);
  double tf = now_ms();
  fgb_finish_opts fo = {o->libdevice, o->opt_level, emit == FGC_EMIT_LLVM, o->fast_math};
  char *text = fgb_module_finish(mod, &fo, err, sizeof err);
  if (o->time_passes) fprintf(log, "pass %-16s %-24s %8.3f ms\n", "llvm+ptx", "*", now_ms() - tf);
  if (!text) { fprintf(stderr, "fusec: error: %s\n", err); rc = 3; goto done; }
  if (emit == FGC_EMIT_PTX) {
    fprintf(out, "// fusec-plan 1\n// target %s\n", o->arch ? o->arch : "sm_90");
    for (int gi = 0; gi < m->ngraphs; gi++)
      if (plans[gi]) fg_plan_write_artifact(out, plans[gi], vec_entries[gi]);
    fputc('\n', out); /* the plan is the leading run of // lines */
  }
  fputs(text, out);
  free(text);
  if (o->time_passes) fprintf(log, "pass %-16s %-24s %8.3f ms\n", "total", "*", now_ms() - t0);
done:
  if (mod) fgb_module_free(mod);
  free(plans);
  free(vec_entries);
  return rc;
}
