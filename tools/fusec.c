/* fusec: the compiler driver (docs: shared spec tools.md). Reads a .fg file,
 * parses and verifies it, and writes the requested stage to -o. Output goes
 * to a temporary file next to the target and is renamed into place only on
 * success, so a failed run never leaves a partial output file.
 * Exit status (exit_status.h): 0 ok, 1 error in the input, 2 bad usage,
 * 3 internal error (a bug in fusec, whichever stage finds it). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "exit_status.h"
#include "ir.h"
#include "parse.h"
#include "compile.h"
#include "passes.h"
#include "print.h"
#include "out_file.h"
#include "cubin.h"

#ifndef FUSEC_DEFAULT_LIBDEVICE
#define FUSEC_DEFAULT_LIBDEVICE ""
#endif

enum { MAX_LIST = 64 };

typedef enum emit_kind { EMIT_IR, EMIT_OPT, EMIT_PLAN, EMIT_LLVM, EMIT_PTX, EMIT_DOT } emit_kind;
static const char *const emit_names[] = {"ir", "opt", "plan", "llvm", "ptx", "dot"};

typedef struct fusec_opts {
  const char *input, *output;
  const char *arch; /* "sm_90" */
  int sm;           /* 90 */
  bool sm_a;        /* sm_90a: the architecture-specific features (wgmma) */
  int opt_level;    /* 0..2 */
  emit_kind emit;
  const char *graphs[MAX_LIST];
  int ngraphs;
  bool print_after_all;
  const char *print_after[MAX_LIST];
  int nprint_after;
  const char *disabled[MAX_LIST];
  int ndisabled;
  fg_knobs knobs;
  bool time_passes;
  const char *libdevice;
  int jobs;     /* 0: one a CPU */
  int sm_count; /* 0: the target's default */
  /* --cubin: SASS for these architectures appended to the artifact (cubin.h) */
  char cubin[FG_CUBIN_MAX][16];
  int ncubin;
  const char *ptxas; /* --ptxas; NULL: searched for */
  char ptxas_found[4096];
} fusec_opts;

static void usage(FILE *f) {
  fputs("usage: fusec MODEL.fg -o OUT [options]\n"
        "  -o PATH               output file ('-' for stdout)\n"
        "  --arch sm_NN          target architecture: sm_80, sm_86, sm_87, sm_89, sm_90 or\n"
        "                        sm_90a (sm_90 with wgmma; default sm_90)\n"
        "  --sm-count N          SMs of the GPU grids are sized for, 1..1024 (default 132,\n"
        "                        the H100 SXM's)\n"
        "  -O0 | -O1 | -O2       optimization level (default -O2)\n"
        "  --graph NAME          compile only this graph (repeatable)\n"
        "  --emit STAGE          ir | opt | plan | llvm | ptx | dot (default ptx; dot: the\n"
        "                        kernels, stored tensors and views as a Graphviz graph)\n"
        "  --cubin sm_NN,...     also put SASS for these GPUs into the artifact (ptxas from\n"
        "                        the CUDA toolkit); the loader uses it on a GPU of that\n"
        "                        compute capability instead of compiling the PTX\n"
        "  --ptxas PATH          the ptxas for --cubin (default: $CUDA_HOME/bin, PATH,\n"
        "                        /usr/local/cuda/bin)\n"
        "  --print-after-all     print the graph after every pass (stderr)\n"
        "  --print-after=PASS    print the graph after PASS (repeatable)\n"
        "  --disable-pass=PASS   skip PASS (repeatable)\n"
        "  --time-passes         report the time spent in each pass\n"
        "  --knob NAME=VALUE     a schedule experiment (repeatable; not a stable\n"
        "                        interface; listed below)\n"
        "  --libdevice PATH      libdevice.10.bc (default: FUSEC_LIBDEVICE or the build's)\n"
        "  --jobs N              compile threads, 1..64 (default: one a CPU); the output\n"
        "                        is the same for every N\n"
        "  --help                show this message\n",
        f);
  fputs("knobs (--knob NAME=VALUE):\n", f);
  fg_knob_help(f);
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("fusec: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\n(run 'fusec --help' for usage)\n", stderr);
  return FG_EXIT_USAGE;
}

/* An unknown pass name: the error, then the pipeline's passes in order. */
static int unknown_pass(const char *name, const char *option) {
  fprintf(stderr, "fusec: error: unknown pass '%s' in %s\n(passes:", name, option);
  for (const fg_pass *p = fg_pipeline; p->name; p++)
    fprintf(stderr, " %s", p->name);
  fputs(")\n(run 'fusec --help' for usage)\n", stderr);
  return FG_EXIT_USAGE;
}

static int push(const char **list, int *n, const char *s, const char *flag) {
  if (*n == MAX_LIST)
    return usage_error("too many %s options", flag);
  list[(*n)++] = s;
  return 0;
}

/* --cubin LIST: comma-separated sm_NN or sm_NNa, each once. */
static int parse_cubin(fusec_opts *o, const char *list) {
  for (const char *p = list;;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char a[16];
    if (n == 0 || n >= sizeof a)
      return usage_error("bad --cubin list '%s' (sm_NN or sm_NNa, comma-separated: sm_90,sm_80)",
                         list);
    memcpy(a, p, n);
    a[n] = 0;
    if (!fg_cubin_arch(a))
      return usage_error("unknown --cubin architecture '%s' (sm_NN or sm_NNa: sm_90, sm_90a, "
                         "sm_80)",
                         a);
    for (int i = 0; i < o->ncubin; i++)
      if (strcmp(o->cubin[i], a) == 0)
        return usage_error("--cubin names %s twice", a);
    if (o->ncubin == FG_CUBIN_MAX)
      return usage_error("%s", "--cubin names more than 16 architectures");
    memcpy(o->cubin[o->ncubin++], a, n + 1);
    if (!e)
      return 0;
    p = e + 1;
  }
}

/* Returns 0, or the exit status for a usage error (-1 after --help). */
static int parse_args(int argc, char **argv, fusec_opts *o) {
  memset(o, 0, sizeof *o);
  o->arch = "sm_90";
  o->sm = 90;
  o->opt_level = 2;
  o->emit = EMIT_PTX;
  const char *env_ld = getenv("FUSEC_LIBDEVICE");
  o->libdevice = env_ld && *env_ld ? env_ld : FUSEC_DEFAULT_LIBDEVICE;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    /* flags that take a value, as "--flag VALUE" or "--flag=VALUE" */
    const char *val = NULL;
    static const char *const valued[] = {
        "-o",          "--arch",        "--graph",        "--emit",
        "--libdevice", "--print-after", "--disable-pass", "--knob",
        "--jobs",      "--sm-count",    "--cubin",        "--ptxas"};
    const char *flag = NULL;
    for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) {
      size_t l = strlen(valued[k]);
      if (strcmp(a, valued[k]) == 0) {
        if (i + 1 >= argc)
          return usage_error("%s needs a value", a);
        flag = valued[k];
        val = argv[++i];
      } else if (strncmp(a, valued[k], l) == 0 && a[l] == '=' && k > 0) {
        flag = valued[k];
        val = a + l + 1;
      }
      if (flag)
        break;
    }
    int rc = 0;
    if (flag && strcmp(flag, "-o") == 0) {
      o->output = val;
    } else if (flag && strcmp(flag, "--arch") == 0) {
      char *end;
      long sm = strncmp(val, "sm_", 3) == 0 ? strtol(val + 3, &end, 10) : 0;
      fg_target t;
      /* sm_90a: sm_90 with its architecture-specific instructions (wgmma) */
      bool suffix_a = sm == 90 && strcmp(end, "a") == 0;
      if (sm < 80 || sm > 999 || (*end && !suffix_a) || !fg_target_init(&t, (int)sm, 0))
        return usage_error("unsupported --arch '%s' (sm_80, sm_86, sm_87, sm_89, sm_90 or sm_90a)",
                           val);
      o->arch = val;
      o->sm = (int)sm;
      o->sm_a = suffix_a;
    } else if (flag && strcmp(flag, "--graph") == 0) {
      rc = push(o->graphs, &o->ngraphs, val, "--graph");
    } else if (flag && strcmp(flag, "--emit") == 0) {
      int k = -1;
      for (int j = 0; j < (int)(sizeof emit_names / sizeof *emit_names); j++)
        if (strcmp(val, emit_names[j]) == 0)
          k = j;
      if (k < 0)
        return usage_error("unknown --emit stage '%s' (ir, opt, plan, llvm, ptx or dot)", val);
      o->emit = (emit_kind)k;
    } else if (flag && strcmp(flag, "--sm-count") == 0) {
      char *end;
      long n = strtol(val, &end, 10);
      if (n < 1 || n > FG_MAX_SM_COUNT || *end || end == val)
        return usage_error("--sm-count takes a number from 1 to 1024, got '%s'", val);
      o->sm_count = (int)n;
    } else if (flag && strcmp(flag, "--jobs") == 0) {
      char *end;
      long j = strtol(val, &end, 10);
      if (j < 1 || j > 64 || *end || end == val)
        return usage_error("--jobs takes a number from 1 to 64, got '%s'", val);
      o->jobs = (int)j;
    } else if (flag && strcmp(flag, "--cubin") == 0) {
      if ((rc = parse_cubin(o, val)) != 0)
        return rc;
    } else if (flag && strcmp(flag, "--ptxas") == 0) {
      o->ptxas = val;
    } else if (flag && strcmp(flag, "--libdevice") == 0) {
      o->libdevice = val;
    } else if (flag && strcmp(flag, "--print-after") == 0) {
      rc = push(o->print_after, &o->nprint_after, val, "--print-after");
    } else if (flag && strcmp(flag, "--disable-pass") == 0) {
      rc = push(o->disabled, &o->ndisabled, val, "--disable-pass");
    } else if (flag && strcmp(flag, "--knob") == 0) {
      char err[512];
      if (!fg_knob_parse(&o->knobs, val, err, sizeof err))
        return usage_error("%s", err);
    } else if (strcmp(a, "-O0") == 0 || strcmp(a, "-O1") == 0 || strcmp(a, "-O2") == 0) {
      o->opt_level = a[2] - '0';
    } else if (strcmp(a, "--print-after-all") == 0) {
      o->print_after_all = true;
    } else if (strcmp(a, "--time-passes") == 0) {
      o->time_passes = true;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return -1;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option '%s'", a);
    } else if (o->input) {
      return usage_error("more than one input file ('%s')", a);
    } else {
      o->input = a;
    }
    if (rc)
      return rc;
  }
  for (int i = 0; i < o->ndisabled; i++)
    if (!fg_pass_exists(o->disabled[i]))
      return unknown_pass(o->disabled[i], "--disable-pass");
  for (int i = 0; i < o->nprint_after; i++)
    if (!fg_pass_exists(o->print_after[i]))
      return unknown_pass(o->print_after[i], "--print-after");
  for (int i = 0; i < o->ncubin; i++)
    if (o->sm_a && strcmp(o->cubin[i], o->arch) != 0)
      return usage_error("--cubin %s: PTX for an arch-specific target (--arch sm_90a) "
                         "assembles only for that target",
                         o->cubin[i]);
    else if (fg_cubin_arch(o->cubin[i]) < o->sm)
      return usage_error("--cubin %s is older than the PTX's target (--arch): ptxas cannot "
                         "assemble it for that GPU",
                         o->cubin[i]);
  if (o->ncubin && o->emit != EMIT_PTX)
    return usage_error("%s", "--cubin goes with the PTX artifact (--emit ptx)");
  if (!o->input)
    return usage_error("%s", "no input file");
  if (!o->output)
    return usage_error("%s", "no output file (-o PATH, or -o - for stdout)");
  return 0;
}

/* Writes the requested stage of the selected graphs to out. Returns an exit
 * status; diagnostics go to d. */
static int emit_stage(const fusec_opts *o, fg_graph **graphs, int n, FILE *out, fg_diag *d) {
  if (o->emit == EMIT_IR) {
    for (int i = 0; i < n; i++) {
      if (i)
        fputc('\n', out);
      fg_print_graph(out, graphs[i]);
    }
    return 0;
  }
  static const fgc_emit stage[] = {FGC_EMIT_OPT,  FGC_EMIT_OPT, FGC_EMIT_PLAN,
                                   FGC_EMIT_LLVM, FGC_EMIT_PTX, FGC_EMIT_DOT};
  fgc_options co;
  memset(&co, 0, sizeof co);
  co.arch = o->arch;
  co.opt_level = o->opt_level == 2 ? 3 : o->opt_level; /* -O2 is LLVM's default<O3> */
  co.libdevice = o->libdevice;
  co.jobs = o->jobs;
  fg_target_init(&co.plan.target, o->sm, o->sm_count); /* the arch was checked with the arguments */
  co.plan.target.arch_specific = o->sm_a;
  co.plan.knobs = o->knobs;
  co.passes.disabled = o->disabled;
  co.passes.ndisabled = o->ndisabled;
  co.passes.print_after = o->nprint_after ? o->print_after[0] : NULL;
  co.passes.print_after_all = o->print_after_all;
  co.passes.time_passes = o->time_passes;
  co.time_passes = o->time_passes;
  /* One module holding the selected graphs: the artifact is one PTX file. */
  fg_module sub = {o->input, n, n, graphs};
  if (!o->ncubin)
    return fgc_compile(&sub, NULL, 0, stage[o->emit], &co, d, out);
  /* --cubin: the artifact in memory, written, then its SASS after it */
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  if (!mem) {
    fprintf(stderr, "fusec: error: out of memory\n");
    return FG_EXIT_INPUT;
  }
  int rc = fgc_compile(&sub, NULL, 0, stage[o->emit], &co, d, mem);
  if (fclose(mem) != 0 && rc == 0) {
    fprintf(stderr, "fusec: error: out of memory\n");
    rc = FG_EXIT_INPUT;
  }
  if (rc == 0 && fwrite(buf, 1, len, out) != len)
    rc = FG_EXIT_INPUT; /* the caller reports the failed write */
  if (rc == 0) {
    const char *archs[FG_CUBIN_MAX];
    for (int i = 0; i < o->ncubin; i++)
      archs[i] = o->cubin[i];
    rc = fg_cubin_append(out, o->ptxas_found, buf, len, archs, o->ncubin);
  }
  free(buf);
  return rc;
}

/* Runs emit_stage into a temp file beside o->output that is renamed into
 * place on success (out_file.h), or straight to stdout for "-o -". */
static int write_output(const fusec_opts *o, fg_graph **graphs, int n, fg_diag *d) {
  struct stat st;
  if (strcmp(o->output, "-") == 0) {
    int rc = emit_stage(o, graphs, n, stdout, d);
    if (fflush(stdout) != 0 && rc == 0) {
      fprintf(stderr, "fusec: error: cannot write to stdout: %s\n", strerror(errno));
      rc = FG_EXIT_INPUT;
    }
    return rc;
  }
  /* Not a regular file (/dev/null, a FIFO): renaming over it would replace
   * the device, so write in place. */
  if (stat(o->output, &st) == 0 && !S_ISREG(st.st_mode)) {
    FILE *f = fopen(o->output, "w");
    if (!f) {
      fprintf(stderr, "fusec: error: cannot write '%s': %s\n", o->output, strerror(errno));
      return FG_EXIT_INPUT;
    }
    int rc = emit_stage(o, graphs, n, f, d);
    if (fclose(f) != 0 && rc == 0) {
      fprintf(stderr, "fusec: error: cannot write '%s': %s\n", o->output, strerror(errno));
      rc = FG_EXIT_INPUT;
    }
    return rc;
  }
  fg_out_file of;
  if (!fg_out_open(&of, o->output)) {
    fprintf(stderr, "fusec: error: cannot create a file beside '%s': %s\n", o->output,
            strerror(errno));
    return FG_EXIT_INPUT;
  }
  int rc = emit_stage(o, graphs, n, of.f, d);
  if (!fg_out_close(&of, rc == 0) && rc == 0) {
    fprintf(stderr, "fusec: error: cannot write '%s': %s\n", o->output, strerror(errno));
    rc = FG_EXIT_INPUT;
  }
  return rc;
}

int main(int argc, char **argv) {
  fusec_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc)
    return rc < 0 ? 0 : rc;

  /* --cubin: ptxas is found before anything is compiled */
  if (o.ncubin && !fg_cubin_find_ptxas(o.ptxas, o.ptxas_found, sizeof o.ptxas_found))
    return FG_EXIT_INPUT;
  size_t len = 0;
  char *src = fg_read_file(o.input, &len);
  if (!src) {
    fprintf(stderr, "fusec: error: cannot read '%s': %s\n", o.input, strerror(errno));
    return FG_EXIT_INPUT;
  }
  fg_diag d;
  fg_diag_init(&d, o.input, src, len, stderr);
  fg_module *m = fg_parse(o.input, src, len, &d);
  if (!m) {
    rc = d.ninternal ? FG_EXIT_INTERNAL : FG_EXIT_INPUT;
    fg_diag_free(&d);
    free(src);
    return rc;
  }

  /* --graph selects (in command-line order); without it, every graph. */
  int n = o.ngraphs ? o.ngraphs : m->ngraphs;
  fg_graph **sel = calloc((size_t)(n > 0 ? n : 1), sizeof *sel);
  if (!sel)
    abort();
  for (int i = 0; i < n; i++) {
    sel[i] = o.ngraphs ? fg_module_find(m, o.graphs[i]) : m->graphs[i];
    if (!sel[i]) {
      rc = usage_error("no graph named '%s' in the input", o.graphs[i]);
      break;
    }
  }
  if (rc == 0)
    rc = write_output(&o, sel, n, &d);

  free(sel);
  fg_module_free(m);
  fg_diag_free(&d);
  free(src);
  return rc;
}
