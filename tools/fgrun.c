/* fgrun: runs one graph, on the CPU reference interpreter (a .fg model) or,
 * through the loader, on the GPU (a compiled .ptx artifact). See
 * docs/tools.md / the tools spec for the contract:
 *
 *   fgrun MODEL.fg  --graph NAME [--inputs a.npy,...] [--out DIR] [--seed N]
 *                   [--dim NAME=VALUE]...
 *   fgrun MODEL.ptx --graph NAME [...] [--check MODEL.fg] [--bench N]
 *                   [--misalign] [--dim NAME=VALUE]...
 *
 * Exit status: 0 ok, 1 an error in the inputs (model, .npy files, shapes),
 * 2 bad usage. Inputs are prepared (read or generated, symbolic dims bound)
 * the same way for both paths so that --check compares like with like. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dirs.h"
#include "fgrun_gpu.h"
#include "compare.h"
#include "diag.h"
#include "infer.h"
#include "exit_status.h"
#include "inputs.h"
#include "interp.h"
#include "npy.h"
#include "parse.h"
#include "summary.h"

enum { MAX_DIMS = 64 };

typedef struct opts {
  const char *model;  /* .fg or .ptx */
  const char *graph;  /* NULL: the only graph of the model */
  const char *inputs; /* comma-separated .npy paths, or NULL */
  const char *out_dir;
  const char *check; /* --check MODEL.fg (artifact path only) */
  uint64_t seed;
  long bench;   /* --bench N (artifact path only); 0: off */
  int misalign; /* --misalign (artifact path only) */
  int ndims;    /* --dim NAME=VALUE bindings */
  const char *dim_names[MAX_DIMS];
  int64_t dim_values[MAX_DIMS];
  bool int_range; /* --int-range LO:HI */
  int64_t int_lo, int_hi;
} opts;

static void usage(FILE *f) {
  fputs("usage: fgrun MODEL.fg --graph NAME [--inputs a.npy,b.npy,...] [--out DIR] [--seed N]\n"
        "             [--dim NAME=VALUE]...\n"
        "       fgrun MODEL.ptx --graph NAME [--inputs ...] [--out DIR] [--seed N]\n"
        "             [--check MODEL.fg] [--bench N] [--misalign] [--dim NAME=VALUE]...\n"
        "  --misalign: place every tensor one element past a 16-byte boundary, so the\n"
        "              kernels for misaligned pointers run (with --check: tests them)\n"
        "  --int-range LO:HI: generated integer inputs uniform over [LO, HI] (default\n"
        "              [-8, 8], u8 [0, 16]), e.g. token ids over a vocabulary: 0:50256\n",
        f);
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("fgrun: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  usage(stderr);
  return FG_EXIT_USAGE;
}

static bool parse_u64(const char *s, uint64_t *out) {
  if (!*s)
    return false;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end || *s == '-')
    return false;
  *out = v;
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (!*s)
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

/* Options may be written `--flag value` or `--flag=value`. */
static int parse_args(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(FG_EXIT_OK);
    }
    if (strcmp(a, "--misalign") == 0) {
      o->misalign = 1;
      continue;
    }
    if (a[0] != '-' || a[1] == 0) {
      if (o->model)
        return usage_error("more than one model given ('%s')", a);
      o->model = a;
      continue;
    }
    static const char *const flags[] = {"--graph", "--inputs", "--out",   "--seed",
                                        "--dim",   "--check",  "--bench", "--int-range"};
    const char *val = NULL;
    int which = -1;
    for (int k = 0; k < (int)(sizeof flags / sizeof flags[0]); k++) {
      size_t fl = strlen(flags[k]);
      if (strncmp(a, flags[k], fl) != 0)
        continue;
      if (a[fl] == '=')
        val = a + fl + 1;
      else if (a[fl] == 0) {
        if (i + 1 >= argc)
          return usage_error("%s needs a value", a);
        val = argv[++i];
      } else
        continue;
      which = k;
      break;
    }
    if (which < 0)
      return usage_error("unknown option '%s'", a);
    switch (which) {
    case 0:
      o->graph = val;
      break;
    case 1: {
      /* every entry names a file: "a,,b", ",a" and "a," are mistakes */
      const char *c = val;
      for (;; c++) {
        const char *e = strchr(c, ',');
        if ((e ? e : c + strlen(c)) == c)
          return usage_error(
              "--inputs '%s' has an empty entry (the files are separated by single commas)", val);
        if (!e)
          break;
        c = e;
      }
      o->inputs = val;
      break;
    }
    case 2:
      o->out_dir = val;
      break;
    case 3:
      if (!parse_u64(val, &o->seed))
        return usage_error("bad --seed '%s'", val);
      break;
    case 4: {
      const char *eq = strchr(val, '=');
      int64_t v;
      if (!eq || eq == val || !parse_i64(eq + 1, &v) || v < 0)
        return usage_error("bad --dim '%s' (expected NAME=VALUE, VALUE >= 0)", val);
      if (o->ndims == MAX_DIMS)
        return usage_error("too many --dim options (at '%s')", val);
      char *name = strndup(val, (size_t)(eq - val));
      if (!name)
        return usage_error("out of memory at '%s'", val);
      o->dim_names[o->ndims] = name;
      o->dim_values[o->ndims++] = v;
      break;
    }
    case 5:
      o->check = val;
      break;
    case 6: {
      uint64_t n;
      if (!parse_u64(val, &n) || n == 0 || n > 1000000)
        return usage_error("bad --bench '%s'", val);
      o->bench = (long)n;
      break;
    }
    case 7: {
      const char *colon = strchr(val, ':');
      char lo[32];
      size_t n = colon ? (size_t)(colon - val) : 0;
      if (!colon || n == 0 || n >= sizeof lo)
        return usage_error("bad --int-range '%s' (expected LO:HI)", val);
      memcpy(lo, val, n);
      lo[n] = 0;
      if (!parse_i64(lo, &o->int_lo) || !parse_i64(colon + 1, &o->int_hi) ||
          o->int_hi < o->int_lo || (o->int_lo < 0 && o->int_hi > INT64_MAX + o->int_lo))
        return usage_error("bad --int-range '%s' (expected LO:HI, LO <= HI)", val);
      o->int_range = true;
      break;
    }
    }
  }
  if (!o->model)
    return usage_error("%s", "no model given");
  return -1; /* continue */
}

static void free_opts(opts *o) {
  for (int i = 0; i < o->ndims; i++)
    free((char *)o->dim_names[i]);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- the model ---- */

typedef struct model {
  char *src;
  fg_module *m;
  const fg_graph *g; /* in m */
} model;

static void free_model(model *md) {
  fg_module_free(md->m);
  free(md->src);
}

static int load_model(const char *path, const char *graph, model *md) {
  memset(md, 0, sizeof *md);
  size_t len;
  md->src = fg_read_file(path, &len);
  if (!md->src) {
    fprintf(stderr, "fgrun: error: cannot read '%s': %s\n", path, strerror(errno));
    return FG_EXIT_INPUT;
  }
  fg_diag d;
  fg_diag_init(&d, path, md->src, len, stderr);
  md->m = fg_parse(path, md->src, len, &d);
  fg_diag_free(&d);
  if (!md->m)
    return FG_EXIT_INPUT;
  if (graph) {
    md->g = fg_module_find(md->m, graph);
    if (!md->g) {
      fprintf(stderr, "fgrun: error: %s has no graph named '%s'\n", path, graph);
      return FG_EXIT_INPUT;
    }
  } else if (md->m->ngraphs == 1) {
    md->g = md->m->graphs[0];
  } else {
    fprintf(stderr, "fgrun: error: %s has %d graphs; choose one with --graph:", path,
            md->m->ngraphs);
    for (int i = 0; i < md->m->ngraphs; i++)
      fprintf(stderr, " %s", md->m->graphs[i]->name);
    fputc('\n', stderr);
    return FG_EXIT_USAGE;
  }
  return FG_EXIT_OK;
}

/* ---- inputs ---- */

/* Symbolic dim bindings: from --dim, then from input shapes; each is checked
 * against its size's declared facts when it is made. */
typedef struct bindings {
  int n;
  const char *names[MAX_DIMS];
  int64_t values[MAX_DIMS];
} bindings;

static int64_t *find_binding(bindings *b, const char *name) {
  for (int i = 0; i < b->n; i++)
    if (strcmp(b->names[i], name) == 0)
      return &b->values[i];
  return NULL;
}

static const char *param_name(const fg_value *p) { return p->name ? p->name : "?"; }

/* Checks an input tensor against parameter p of g (declared in `model`),
 * binding symbolic dims: a size bound here must satisfy its facts. */
static int check_input(const fg_graph *g, const char *model, const fg_value *p, int idx,
                       const char *path, const fg_tensor *t, bindings *b) {
  char want[256];
  fg_type_str(&p->type, want, sizeof want);
  if (t->dtype != p->type.dtype) {
    fprintf(stderr, "fgrun: error: input %d (%s) for parameter '%s' holds %s, expected %s\n", idx,
            path, param_name(p), fg_dtype_name(t->dtype), want);
    return FG_EXIT_INPUT;
  }
  if (t->rank != p->type.rank) {
    fprintf(stderr, "fgrun: error: input %d (%s) for parameter '%s' has rank %d, expected %s\n",
            idx, path, param_name(p), t->rank, want);
    return FG_EXIT_INPUT;
  }
  for (int d = 0; d < t->rank; d++) {
    fg_dim pd = p->type.dims[d];
    if (!pd.sym) {
      if (pd.size == t->sizes[d])
        continue;
      fprintf(stderr,
              "fgrun: error: input %d (%s) for parameter '%s' has size %" PRId64
              " in dim %d, expected %s\n",
              idx, path, param_name(p), t->sizes[d], d, want);
      return FG_EXIT_INPUT;
    }
    int64_t *bound = find_binding(b, pd.sym);
    if (bound && *bound != t->sizes[d]) {
      fprintf(stderr,
              "fgrun: error: input %d (%s) for parameter '%s' has size %" PRId64
              " in dim %d, but %s is %" PRId64 "\n",
              idx, path, param_name(p), t->sizes[d], d, pd.sym, *bound);
      return FG_EXIT_INPUT;
    }
    const fg_sym *s = fg_graph_sym(g, pd.sym);
    char why[512];
    if (!bound && s && !fg_sym_admits(s, t->sizes[d], model, why, sizeof why)) {
      fprintf(stderr, "fgrun: error: input %d (%s) for parameter '%s', dim %d: %s\n", idx, path,
              param_name(p), d, why);
      return FG_EXIT_INPUT;
    }
    if (!bound) {
      if (b->n == MAX_DIMS) {
        fprintf(stderr, "fgrun: error: too many symbolic dims\n");
        return FG_EXIT_INPUT;
      }
      b->names[b->n] = pd.sym;
      b->values[b->n++] = t->sizes[d];
    }
  }
  return FG_EXIT_OK;
}

static int read_inputs(const opts *o, const fg_graph *g, fg_tensor *in, bindings *b) {
  char *list = strdup(o->inputs);
  if (!list)
    return FG_EXIT_INPUT;
  int count = 0, rc = FG_EXIT_OK;
  char *save = NULL;
  for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save), count++) {
    if (count >= g->nparams)
      continue; /* counted, reported below */
    const fg_value *prm = g->params[count];
    char err[512];
    if (!fg_npy_read(p, prm->type.dtype, &in[count], err, sizeof err)) {
      fprintf(stderr, "fgrun: error: input %d for parameter '%s': %s\n", count, param_name(prm),
              err);
      rc = FG_EXIT_INPUT;
      break;
    }
    rc = check_input(g, o->model, prm, count, p, &in[count], b);
    if (rc)
      break;
  }
  free(list);
  if (rc == FG_EXIT_OK && count != g->nparams) {
    fprintf(stderr, "fgrun: error: graph '%s' has %d parameters but --inputs lists %d files\n",
            g->name, g->nparams, count);
    rc = FG_EXIT_INPUT;
  }
  return rc;
}

/* Binds symbolic dims and gives the static graph to run (*spec is owned by
 * the caller when it differs from g). */
static int specialize(const fg_graph *g, const char *path, bindings *b, fg_graph **spec) {
  *spec = NULL;
  bool symbolic = false;
  for (int i = 0; i < g->nparams; i++) {
    const fg_type *t = &g->params[i]->type;
    for (int d = 0; d < t->rank; d++) {
      if (!t->dims[d].sym)
        continue;
      symbolic = true;
      if (!find_binding(b, t->dims[d].sym)) {
        fprintf(
            stderr,
            "fgrun: error: symbolic dim %s of parameter '%s' needs --dim %s=VALUE (or --inputs)\n",
            t->dims[d].sym, param_name(g->params[i]), t->dims[d].sym);
        return FG_EXIT_INPUT;
      }
    }
  }
  if (!symbolic)
    return FG_EXIT_OK;
  fg_diag d;
  fg_diag_init(&d, path, NULL, 0, stderr);
  *spec = fg_graph_specialize(g, b->n, b->names, b->values, &d);
  fg_diag_free(&d);
  return *spec ? FG_EXIT_OK : FG_EXIT_INPUT;
}

/* Reads (--inputs) or generates (--seed) one tensor per parameter of g and
 * returns the graph specialized to their shapes. Shared by both paths. */
static int prepare_inputs(const opts *o, const model *md, fg_tensor **inputs, fg_graph **spec) {
  const fg_graph *g = md->g;
  *spec = NULL;
  *inputs = calloc((size_t)(g->nparams > 0 ? g->nparams : 1), sizeof **inputs);
  if (!*inputs)
    return FG_EXIT_INPUT;
  bindings b = {0};
  for (int i = 0; i < o->ndims; i++) {
    const fg_sym *s = fg_graph_sym(g, o->dim_names[i]);
    char why[512];
    if (s && !fg_sym_admits(s, o->dim_values[i], o->model, why, sizeof why)) {
      fprintf(stderr, "fgrun: error: %s\n", why);
      return FG_EXIT_INPUT;
    }
    b.names[b.n] = o->dim_names[i];
    b.values[b.n++] = o->dim_values[i];
  }
  int rc = o->inputs ? read_inputs(o, g, *inputs, &b) : FG_EXIT_OK;
  if (rc == FG_EXIT_OK)
    rc = specialize(g, o->model, &b, spec);
  if (rc == FG_EXIT_OK && !o->inputs) {
    const fg_graph *sg = *spec ? *spec : g;
    for (int i = 0; i < sg->nparams; i++)
      if (!(o->int_range ? fg_inputs_generate_ints(&sg->params[i]->type, o->seed, i, o->int_lo,
                                                   o->int_hi, &(*inputs)[i])
                         : fg_inputs_generate(&sg->params[i]->type, o->seed, i, &(*inputs)[i]))) {
        fprintf(stderr,
                "fgrun: error: cannot generate an input for parameter '%s' (out of memory?)\n",
                param_name(sg->params[i]));
        rc = FG_EXIT_INPUT;
        break;
      }
  }
  return rc;
}

static void free_tensors(fg_tensor *t, int n) {
  if (!t)
    return;
  for (int i = 0; i < n; i++)
    fg_tensor_free(&t[i]);
  free(t);
}

/* ---- results ---- */

static int emit_results(const opts *o, const fg_tensor *res, int n) {
  if (!o->out_dir) {
    for (int i = 0; i < n; i++)
      fg_print_summary(stdout, i, &res[i]);
    return FG_EXIT_OK;
  }
  if (!fg_make_dirs(o->out_dir)) {
    fprintf(stderr, "fgrun: error: cannot create directory '%s': %s\n", o->out_dir,
            strerror(errno));
    return FG_EXIT_INPUT;
  }
  for (int i = 0; i < n; i++) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%d.npy", o->out_dir, i);
    if (!fg_npy_write(path, &res[i], err, sizeof err)) {
      fprintf(stderr, "fgrun: error: %s\n", err);
      return FG_EXIT_INPUT;
    }
  }
  return FG_EXIT_OK;
}

/* ---- the CPU reference path ---- */

/* Runs g on inputs with the interpreter; outputs has g->nresults slots. */
static int run_reference(const fg_graph *g, const fg_tensor *inputs, fg_tensor *outputs) {
  char err[1024];
  if (!fg_interp_run(g, inputs, outputs, err, sizeof err)) {
    fprintf(stderr, "fgrun: error: %s\n", err);
    return FG_EXIT_INPUT;
  }
  return FG_EXIT_OK;
}

static int run_interp(const opts *o) {
  if (o->check || o->bench || o->misalign)
    return usage_error("%s applies to compiled artifacts (.ptx), not to a .fg model",
                       o->check   ? "--check"
                       : o->bench ? "--bench"
                                  : "--misalign");
  model md;
  int rc = load_model(o->model, o->graph, &md);
  fg_tensor *inputs = NULL, *outputs = NULL;
  fg_graph *spec = NULL;
  int nparams = md.g ? md.g->nparams : 0, nres = 0;
  if (rc == FG_EXIT_OK)
    rc = prepare_inputs(o, &md, &inputs, &spec);
  if (rc == FG_EXIT_OK) {
    const fg_graph *g = spec ? spec : md.g;
    nres = g->nresults;
    outputs = calloc((size_t)(nres > 0 ? nres : 1), sizeof *outputs);
    rc = outputs ? run_reference(g, inputs, outputs) : FG_EXIT_INPUT;
    if (rc == FG_EXIT_OK)
      rc = emit_results(o, outputs, nres);
  }
  free_tensors(outputs, nres);
  free_tensors(inputs, nparams);
  fg_graph_free(spec);
  free_model(&md);
  return rc;
}

/* ---- the GPU path (compiled artifacts through loader/fgload.h) ---- */

static int run_artifact(const opts *o) {
  fgrun_gpu_opts g = {o->model,      o->graph,     o->inputs,   o->out_dir, o->check,
                      o->seed,       o->bench,     o->misalign, o->ndims,   o->dim_names,
                      o->dim_values, o->int_range, o->int_lo,   o->int_hi};
  return fgrun_run_artifact(&g);
}

int main(int argc, char **argv) {
  opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc < 0)
    rc = ends_with(o.model, ".ptx") ? run_artifact(&o) : run_interp(&o);
  free_opts(&o);
  return rc;
}
