/* fgrun's GPU path: runs a compiled artifact through libfgload's public API
 * (fgload.h) only. Called from fgrun.c for MODEL.ptx:
 *
 *   int fgrun_run_artifact(const fgrun_gpu_opts *o);   (exit status)
 *
 * What it does (shared/spec/tools.md): load the artifact; read --inputs
 * (.npy, one per parameter, checked against the plan) or generate them with
 * tools/common's seeded generator from the plan's signature (a graph with
 * symbolic sizes takes its syms' values from --dim NAME=VALUE or from the
 * --inputs' shapes, and the loader gives every parameter's and result's
 * shape for them: fgl_graph_param_shape, fgl_graph_result_shape); upload; fill
 * the written results' storage with 0xFF bytes; run; check every view
 * result's pointer is exactly base + offset * elemsize; download; write
 * --out DIR/J.npy (or print a summary per result); --check MODEL.fg runs the
 * CPU interpreter on the same inputs and compares every result (one line
 * each, exit 1 on a mismatch); --bench N times N runs after warm-up with
 * device events and prints the median microseconds and GB/s (each input
 * read once, each written output written once; views count nothing): runs
 * queued back to back (device time), against a 512 MiB copy timed the same
 * way, then the same two timed each alone on an idle stream.
 * FGRUN_GPU_LOCK=FILE (bench/symbolic_suite.py run --jobs): an exclusive
 * flock on FILE, taken after the artifact is loaded and the inputs made
 * (host work only) and before the first upload, held until exit: several
 * fgrun processes then prepare at once but use the GPU one at a time, so
 * no two time kernels together.
 * Exit status: 0 ok, 1 an error in the inputs or a mismatch, 2 bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"
#include "compare.h"
#include "diag.h"
#include "fgload.h"
#include "infer.h"
#include "exit_status.h"
#include "inputs.h"
#include "interp.h"
#include "npy.h"
#include "parse.h"
#include "summary.h"

#include "fgrun_gpu.h"

static void log_cb(void *user, fgl_log_level lv, const char *msg) {
  (void)user;
  if (lv >= FGL_LOG_WARN)
    fprintf(stderr, "fgrun: warning: %s\n", msg);
}

/* Bytes spanned by a strided tensor (0 when empty). */
static size_t span_bytes(fgl_dtype dt, int rank, const int64_t *sizes, const int64_t *strides) {
  int64_t last = 0;
  for (int d = 0; d < rank; d++) {
    if (sizes[d] == 0)
      return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return (size_t)fgl_dtype_bytes(dt, last + 1);
}

/* Element i of packed f4e2m1 storage: the low nibble of byte i/2 for even i. */
static void nibble_move(unsigned char *dst, int64_t di, const unsigned char *src, int64_t si) {
  unsigned v = (src[si >> 1] >> (si & 1 ? 4 : 0)) & 0xf;
  unsigned char *b = dst + (di >> 1);
  *b = (unsigned char)(di & 1 ? (*b & 0x0f) | (v << 4) : (*b & 0xf0) | v);
}

/* Copies between a logical row-major buffer and a strided one, both ways. */
static void strided_copy(void *strided, void *logical, fgl_dtype dt, int rank, const int64_t *sizes,
                         const int64_t *strides, int to_strided) {
  int es = fgl_dtype_size(dt);
  int64_t numel = 1, idx[FGL_MAX_RANK] = {0};
  for (int d = 0; d < rank; d++)
    numel *= sizes[d];
  for (int64_t k = 0; k < numel; k++) {
    int64_t off = 0;
    for (int d = 0; d < rank; d++)
      off += idx[d] * strides[d];
    char *s = (char *)strided + off * es, *l = (char *)logical + k * es;
    if (dt == FGL_F4E2M1 && to_strided)
      nibble_move(strided, off, logical, k);
    else if (dt == FGL_F4E2M1)
      nibble_move(logical, k, strided, off);
    else if (to_strided)
      memcpy(s, l, (size_t)es);
    else
      memcpy(l, s, (size_t)es);
    for (int d = rank - 1; d >= 0 && ++idx[d] == sizes[d]; d--)
      idx[d] = 0;
  }
}

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef struct state {
  fgl_module *m;
  fgl_graph *g;
  fgl_graph_info gi;
  fgl_param_info *pi;
  fgl_result_info *ri;
  fg_tensor *in, *got, *want;
  fgl_arg *args;
  fgl_tensor *outs;
  fgl_devptr *dev; /* params then results; 0 when none */
  fgl_devptr *raw; /* their allocations (dev minus the --misalign shift) */
  int misalign;
  fgl_devptr trace_temps[16]; /* FG_TRACE_OUT: the temps, ours */
  fg_module *model;
  char *model_src;
  fg_graph *spec;
  int inputs_read; /* s->in holds the --inputs files */
} state;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "fgrun: error: ");                                                             \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    return FG_EXIT_INPUT;                                                                          \
  } while (0)
#define FGL(call)                                                                                  \
  do {                                                                                             \
    fgl_error e_ = {0};                                                                            \
    if ((call) != FGL_OK)                                                                          \
      FAIL("%s", e_.msg);                                                                          \
  } while (0)

/* The .fg graph for --check, specialized to the plan's concrete shapes. */
static int load_check_model(const fgrun_gpu_opts *o, state *s, const fg_graph **out) {
  size_t len;
  s->model_src = fg_read_file(o->check, &len);
  if (!s->model_src)
    FAIL("cannot read '%s': %s", o->check, strerror(errno));
  fg_diag d;
  fg_diag_init(&d, o->check, s->model_src, len, stderr);
  s->model = fg_parse(o->check, s->model_src, len, &d);
  fg_diag_free(&d);
  if (!s->model)
    return FG_EXIT_INPUT;
  const fg_graph *g = fg_module_find(s->model, s->gi.name);
  if (!g)
    FAIL("%s has no graph named '%s'", o->check, s->gi.name);
  if (g->nparams != s->gi.n_params || g->nresults != s->gi.n_results)
    FAIL("graph '%s' has %d params and %d results in %s but %d and %d in %s", s->gi.name,
         g->nparams, g->nresults, o->check, s->gi.n_params, s->gi.n_results, o->artifact);
  const char *names[64];
  int64_t values[64];
  int nb = 0;
  for (int i = 0; i < g->nparams; i++) {
    const fg_type *t = &g->params[i]->type;
    const fgl_param_info *p = &s->pi[i];
    if ((int)t->dtype != (int)p->dtype || t->rank != p->rank)
      FAIL("parameter %d ('%s'): %s in %s but %s with rank %d in the artifact", i, p->name,
           fg_dtype_name(t->dtype), o->check, fgl_dtype_name(p->dtype), p->rank);
    for (int k = 0; k < t->rank; k++) {
      if (!t->dims[k].sym) {
        if (t->dims[k].size != p->sizes[k])
          FAIL("parameter %d ('%s'): dim %d is %" PRId64 " in %s but %" PRId64 " in the artifact",
               i, p->name, k, t->dims[k].size, o->check, p->sizes[k]);
        continue;
      }
      int seen = 0;
      for (int b = 0; b < nb; b++)
        seen |= !strcmp(names[b], t->dims[k].sym);
      if (!seen && nb < 64) {
        names[nb] = t->dims[k].sym;
        values[nb++] = p->sizes[k];
      }
    }
  }
  if (nb) {
    fg_diag_init(&d, o->check, s->model_src, len, stderr);
    s->spec = fg_graph_specialize(g, nb, names, values, &d);
    fg_diag_free(&d);
    if (!s->spec)
      return FG_EXIT_INPUT;
    g = s->spec;
  }
  *out = g;
  return FG_EXIT_OK;
}

/* Reads --inputs (one .npy per parameter, of its dtype) into s->in. */
static int read_inputs(const fgrun_gpu_opts *o, state *s) {
  int n = s->gi.n_params;
  char *list = strdup(o->inputs), *save = NULL;
  int count = 0, rc = FG_EXIT_OK;
  if (!list)
    FAIL("out of memory");
  for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save), count++) {
    if (count >= n)
      continue;
    const fgl_param_info *pi = &s->pi[count];
    char err[512];
    if (!fg_npy_read(p, (fg_dtype)pi->dtype, &s->in[count], err, sizeof err)) {
      fprintf(stderr, "fgrun: error: input %d for parameter '%s': %s\n", count, pi->name, err);
      rc = FG_EXIT_INPUT;
      break;
    }
  }
  free(list);
  if (rc == FG_EXIT_OK && count != n)
    FAIL("graph '%s' has %d parameters but --inputs lists %d files", s->gi.name, n, count);
  s->inputs_read = rc == FG_EXIT_OK;
  return rc;
}

/* A graph with syms: their values from --dim, else from the --inputs'
 * shapes (a sym's first dim), and every parameter's and result's concrete
 * shape from the loader, into s->pi and s->ri. Nothing for other graphs. */
static int bind_syms(const fgrun_gpu_opts *o, state *s) {
  int nsyms = 0;
  FGL(fgl_graph_num_syms(s->g, &nsyms, &e_));
  if (nsyms == 0)
    return FG_EXIT_OK;
  int64_t *vals = calloc((size_t)nsyms, sizeof *vals);
  char *have = calloc((size_t)nsyms, 1);
  int np = s->gi.n_params, rc = FG_EXIT_OK;
  if (!vals || !have) {
    free(vals);
    free(have);
    FAIL("out of memory");
  }
  for (int y = 0; y < nsyms; y++) {
    fgl_sym_info si;
    FGL(fgl_graph_sym(s->g, y, &si, &e_));
    for (int k = 0; k < o->ndims && !have[y]; k++)
      if (!strcmp(o->dim_names[k], si.name)) {
        vals[y] = o->dim_values[k];
        have[y] = 1;
      }
  }
  for (int i = 0; i < np && s->inputs_read; i++) {
    const fgl_param_info *p = &s->pi[i];
    if (p->is_scalar || s->in[i].rank != p->rank)
      continue; /* reported with the shapes below */
    for (int d = 0; d < p->rank; d++)
      if (p->sym[d] >= 0 && !have[p->sym[d]]) {
        vals[p->sym[d]] = s->in[i].sizes[d];
        have[p->sym[d]] = 1;
      }
  }
  fgl_arg *args = calloc((size_t)np + 1, sizeof *args);
  for (int i = 0; args && i < np && rc == FG_EXIT_OK; i++) {
    const fgl_param_info *p = &s->pi[i];
    fgl_arg *a = &args[i];
    a->is_scalar = p->is_scalar;
    a->scalar_dtype = p->dtype;
    a->tensor.dtype = p->dtype;
    a->tensor.rank = p->rank;
    for (int d = 0; d < p->rank; d++) {
      int y = p->sym[d];
      if (y >= 0 && !have[y]) {
        fgl_sym_info si;
        fgl_graph_sym(s->g, y, &si, NULL);
        fprintf(stderr,
                "fgrun: error: symbolic dim %s of parameter '%s' needs --dim %s=VALUE (or "
                "--inputs)\n",
                si.name, p->name, si.name);
        rc = FG_EXIT_INPUT;
        break;
      }
      a->tensor.sizes[d] = y >= 0 ? vals[y] : p->sizes[d];
    }
  }
  if (!args) {
    fprintf(stderr, "fgrun: error: out of memory\n");
    rc = FG_EXIT_INPUT;
  }
  fgl_error e = {0};
  fgl_status st = FGL_OK;
  for (int i = 0; rc == FG_EXIT_OK && st == FGL_OK && i < np; i++)
    st = fgl_graph_param_shape(s->g, args, np, i, &s->pi[i], &e);
  for (int j = 0; rc == FG_EXIT_OK && st == FGL_OK && j < s->gi.n_results; j++)
    st = fgl_graph_result_shape(s->g, args, np, j, &s->ri[j], &e);
  if (st != FGL_OK) {
    fprintf(stderr, "fgrun: error: %s\n", e.msg);
    rc = FG_EXIT_INPUT;
  }
  free(args);
  free(vals);
  free(have);
  return rc;
}

/* Checks the --inputs against the parameters' (concrete) shapes, or
 * generates the inputs. */
static int prepare_inputs(const fgrun_gpu_opts *o, state *s) {
  int n = s->gi.n_params;
  if (o->inputs) {
    const char *p = o->inputs;
    for (int count = 0; count < n; count++) {
      const char *c = strchr(p, ',');
      int len = c ? (int)(c - p) : (int)strlen(p);
      const fgl_param_info *pi = &s->pi[count];
      const fg_tensor *t = &s->in[count];
      int ok = (int)t->dtype == (int)pi->dtype && t->rank == pi->rank;
      for (int d = 0; ok && d < t->rank; d++)
        ok = t->sizes[d] == pi->sizes[d];
      if (!ok) {
        char want[128];
        fg_type ty = pi->is_scalar ? fg_type_scalar((fg_dtype)pi->dtype)
                                   : fg_type_tensor((fg_dtype)pi->dtype, pi->rank, pi->sizes);
        fg_type_str(&ty, want, sizeof want);
        fprintf(stderr,
                "fgrun: error: input %d (%.*s) for parameter '%s' does not match its type %s\n",
                count, len, p, pi->name, want);
        return FG_EXIT_INPUT;
      }
      p = c ? c + 1 : p + len;
    }
    return FG_EXIT_OK;
  }
  for (int i = 0; i < n; i++) {
    const fgl_param_info *pi = &s->pi[i];
    fg_type ty = pi->is_scalar ? fg_type_scalar((fg_dtype)pi->dtype)
                               : fg_type_tensor((fg_dtype)pi->dtype, pi->rank, pi->sizes);
    if (!(o->int_range ? fg_inputs_generate_ints(&ty, o->seed, i, o->int_lo, o->int_hi, &s->in[i])
                       : fg_inputs_generate(&ty, o->seed, i, &s->in[i])))
      FAIL("cannot generate an input for parameter '%s'", pi->name);
  }
  return FG_EXIT_OK;
}

/* Buffer k of s->dev. With --misalign it starts one element past a 16-byte
 * boundary (elements narrower than 16 bytes), which is what sends the loader
 * to a kernel's plain variant; the allocation itself is kept in s->raw. */
static int dev_alloc(state *s, size_t bytes, int k, int elem, fgl_error *e) {
  int shift = s->misalign && elem < 16 ? elem : 0;
  int rc = fgl_malloc(s->m, bytes + (size_t)shift, &s->raw[k], e);
  s->dev[k] = s->raw[k] + (fgl_devptr)shift;
  return rc;
}

/* FGRUN_GPU_LOCK (above): the lock is released when the process exits. */
static int gpu_lock(void) {
  const char *path = getenv("FGRUN_GPU_LOCK");
  if (!path || !*path)
    return FG_EXIT_OK;
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0)
    FAIL("FGRUN_GPU_LOCK: cannot open '%s': %s", path, strerror(errno));
  while (flock(fd, LOCK_EX) != 0)
    if (errno != EINTR)
      FAIL("FGRUN_GPU_LOCK: cannot lock '%s': %s", path, strerror(errno));
  return FG_EXIT_OK;
}

static int upload(state *s) {
  for (int i = 0; i < s->gi.n_params; i++) {
    const fgl_param_info *p = &s->pi[i];
    const fg_tensor *t = &s->in[i];
    if (p->is_scalar) {
      s->args[i] = fgl_dtype_is_float(p->dtype) ? fgl_arg_float(p->dtype, fg_tensor_get_f(t, 0))
                                                : fgl_arg_int(p->dtype, fg_tensor_get_i(t, 0));
      continue;
    }
    size_t bytes = span_bytes(p->dtype, p->rank, p->sizes, p->strides);
    char *h = calloc(bytes + 1, 1);
    if (!h)
      FAIL("out of memory");
    strided_copy(h, t->data, p->dtype, p->rank, p->sizes, p->strides, 1);
    FGL(dev_alloc(s, bytes, i, fgl_dtype_size(p->dtype), &e_));
    FGL(fgl_memcpy_htod(s->m, s->dev[i], h, bytes, &e_));
    free(h);
    fgl_arg *a = &s->args[i];
    memset(a, 0, sizeof *a);
    a->tensor.ptr = s->dev[i];
    a->tensor.dtype = p->dtype;
    a->tensor.rank = p->rank;
    memcpy(a->tensor.sizes, p->sizes, sizeof p->sizes);
    memcpy(a->tensor.strides, p->strides, sizeof p->strides);
  }
  for (int j = 0; j < s->gi.n_results; j++) {
    const fgl_result_info *r = &s->ri[j];
    if (r->is_view || r->inplace_param >= 0) /* the loader fills it: no storage of its own */
      continue;
    size_t bytes = span_bytes(r->dtype, r->rank, r->sizes, r->strides);
    fgl_devptr *d = &s->dev[s->gi.n_params + j];
    FGL(dev_alloc(s, bytes, s->gi.n_params + j, fgl_dtype_size(r->dtype), &e_));
    FGL(fgl_memset(s->m, *d, 0xFF, bytes, &e_)); /* poison: unwritten elements show */
    fgl_tensor *t = &s->outs[j];
    t->ptr = *d;
    t->dtype = r->dtype;
    t->rank = r->rank;
    memcpy(t->sizes, r->sizes, sizeof r->sizes);
    memcpy(t->strides, r->strides, sizeof r->strides);
  }
  return FG_EXIT_OK;
}

static int download(state *s) {
  for (int j = 0; j < s->gi.n_results; j++) {
    const fgl_result_info *r = &s->ri[j];
    const fgl_tensor *t = &s->outs[j];
    if (r->is_view) {
      fgl_devptr base = r->base_is_param ? s->dev[r->base_index] : s->outs[r->base_index].ptr;
      fgl_devptr want = base + (fgl_devptr)fgl_dtype_bytes(r->dtype, r->offset);
      if (t->ptr != want)
        FAIL("result %d: view pointer 0x%llx, expected %c%d + %" PRId64 " elements = 0x%llx", j,
             t->ptr, r->base_is_param ? 'p' : 'r', r->base_index, r->offset, want);
    }
    if (r->inplace_param >= 0 && t->ptr != s->dev[r->inplace_param])
      FAIL("result %d: written in place, but its pointer 0x%llx is not parameter %d's 0x%llx", j,
           t->ptr, r->inplace_param, s->dev[r->inplace_param]);
    if (!fg_tensor_alloc(&s->got[j], (fg_dtype)t->dtype, t->rank, t->sizes))
      FAIL("out of memory");
    size_t bytes = span_bytes(t->dtype, t->rank, t->sizes, t->strides);
    char *h = malloc(bytes + 1);
    if (!h)
      FAIL("out of memory");
    FGL(fgl_memcpy_dtoh(s->m, h, t->ptr, bytes, &e_));
    strided_copy(h, s->got[j].data, t->dtype, t->rank, t->sizes, t->strides, 0);
    free(h);
  }
  return FG_EXIT_OK;
}

/* Medians of n timings: queued back to back (events around each run, all
 * enqueued before any is read, so the stream never idles and the host's
 * launch time stays outside the events: device time, as triton's
 * do_bench measures), or each run alone on an idle stream (the events
 * then also hold the host's launch of the run: several microseconds). */
typedef struct timing {
  fgl_event **ev; /* 2 * n */
  float *ms;
  long n;
} timing;

static int timing_init(state *s, timing *t, long n) {
  t->n = n;
  t->ev = calloc((size_t)(2 * n), sizeof *t->ev);
  t->ms = malloc((size_t)n * sizeof *t->ms);
  if (!t->ev || !t->ms)
    FAIL("out of memory");
  for (long i = 0; i < 2 * n; i++)
    FGL(fgl_event_create(s->m, &t->ev[i], &e_));
  return FG_EXIT_OK;
}

static void timing_free(timing *t) {
  for (long i = 0; t->ev && i < 2 * t->n; i++)
    fgl_event_destroy(t->ev[i], NULL);
  free(t->ev);
  free(t->ms);
}

static double median_ms(float *ms, long n) {
  qsort(ms, (size_t)n, sizeof *ms, cmp_f);
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

/* One timed piece of work: the graph, or the reference copy. */
typedef struct work {
  state *s;
  fgl_devptr src, dst;
  size_t copy_bytes; /* > 0: the copy */
} work;

static int do_work(const work *w) {
  state *s = w->s;
  if (w->copy_bytes)
    FGL(fgl_memcpy_dtod_async(s->m, w->dst, w->src, w->copy_bytes, NULL, &e_));
  else
    FGL(fgl_run(s->g, s->args, s->gi.n_params, s->outs, s->gi.n_results, NULL, &e_));
  return FG_EXIT_OK;
}

/* Median ms of t->n timed runs of w after `warm` untimed ones. */
static int time_work(const work *w, timing *t, long warm, bool queued, double *med) {
  int rc;
  for (long i = 0; i < warm; i++)
    if ((rc = do_work(w)) != FG_EXIT_OK)
      return rc;
  for (long i = 0; i < t->n; i++) {
    FGL(fgl_event_record(t->ev[2 * i], NULL, &e_));
    if ((rc = do_work(w)) != FG_EXIT_OK)
      return rc;
    FGL(fgl_event_record(t->ev[2 * i + 1], NULL, &e_));
    if (!queued)
      FGL(fgl_event_elapsed_ms(t->ev[2 * i], t->ev[2 * i + 1], &t->ms[i], &e_));
  }
  if (queued)
    for (long i = 0; i < t->n; i++)
      FGL(fgl_event_elapsed_ms(t->ev[2 * i], t->ev[2 * i + 1], &t->ms[i], &e_));
  *med = median_ms(t->ms, t->n);
  return FG_EXIT_OK;
}

static int bench(const fgrun_gpu_opts *o, state *s) {
  double bytes = 0;
  for (int i = 0; i < s->gi.n_params; i++)
    if (!s->pi[i].is_scalar)
      bytes += (double)fgl_dtype_bytes(s->pi[i].dtype, fg_tensor_numel(&s->in[i]));
  for (int j = 0; j < s->gi.n_results; j++)
    if (!s->ri[j].is_view)
      bytes += (double)fgl_dtype_bytes(s->ri[j].dtype, fg_tensor_numel(&s->got[j]));
  long warm = o->bench < 10 ? o->bench : 10;
  /* The reference: a device-to-device copy in the same run, counting bytes
   * read plus written, large enough to stream from DRAM (not L2). */
  const size_t cb = (size_t)512 << 20;
  work graph = {s, 0, 0, 0}, copy = {s, 0, 0, cb};
  FGL(fgl_malloc(s->m, cb, &copy.src, &e_));
  FGL(fgl_malloc(s->m, cb, &copy.dst, &e_));
  FGL(fgl_memset(s->m, copy.src, 0x3c, cb, &e_));
  timing t = {0}, c = {0};
  int rc = timing_init(s, &t, o->bench);
  if (rc == FG_EXIT_OK)
    rc = timing_init(s, &c, 20);
  double med[2] = {0, 0}, cmed[2] = {0, 0};
  for (int q = 0; q < 2 && rc == FG_EXIT_OK; q++) { /* q = 0: queued, 1: idle stream */
    rc = time_work(&graph, &t, warm, q == 0, &med[q]);
    if (rc == FG_EXIT_OK)
      rc = time_work(&copy, &c, 3, q == 0, &cmed[q]);
  }
  if (rc == FG_EXIT_OK) {
    double gbs = med[0] > 0 ? bytes / (med[0] * 1e-3) / 1e9 : 0.0,
           cgbs = 2.0 * (double)cb / (cmed[0] * 1e-3) / 1e9;
    double gbs1 = med[1] > 0 ? bytes / (med[1] * 1e-3) / 1e9 : 0.0,
           cgbs1 = 2.0 * (double)cb / (cmed[1] * 1e-3) / 1e9;
    printf("bench %s: %ld runs, median %.2f us, %.1f GB/s\n", s->gi.name, o->bench, med[0] * 1e3,
           gbs);
    printf("bench %s: copy bandwidth %.1f GB/s (device-to-device copy of 512 MiB, read+write); "
           "fraction %.3f\n",
           s->gi.name, cgbs, cgbs > 0 ? gbs / cgbs : 0.0);
    printf("bench %s: each run alone on an idle stream (the host's launch inside the events): "
           "median %.2f us, "
           "copy %.1f GB/s, idle-stream fraction %.3f\n",
           s->gi.name, med[1] * 1e3, cgbs1, cgbs1 > 0 ? gbs1 / cgbs1 : 0.0);
  }
  fgl_free(s->m, copy.src, NULL);
  fgl_free(s->m, copy.dst, NULL);
  timing_free(&t);
  timing_free(&c);
  return rc;
}

static int run(const fgrun_gpu_opts *o, state *s) {
  fgl_load_options lo;
  fgl_load_options_init(&lo);
  lo.log = log_cb;
  FGL(fgl_module_load_file(o->artifact, &lo, &s->m, &e_));
  if (o->bench) {
    fgl_load_stats ls;
    if (fgl_module_load_stats(s->m, &ls, NULL) == FGL_OK)
      printf("load %s: %.3f ms (%s, JIT %.3f ms)\n", o->artifact, ls.total_ms,
             ls.cache_hit ? "cubin cache hit" : "cache miss", ls.jit_ms);
  }
  if (o->graph) {
    FGL(fgl_module_graph_info(s->m, o->graph, &s->gi, &e_));
  } else {
    int n = 0;
    FGL(fgl_module_num_graphs(s->m, &n, &e_));
    if (n != 1) {
      fprintf(stderr, "fgrun: error: %s has %d graphs; choose one with --graph:", o->artifact, n);
      for (int i = 0; i < n; i++) {
        fgl_graph_info gi;
        if (fgl_module_graph_at(s->m, i, &gi, NULL) == FGL_OK)
          fprintf(stderr, " %s", gi.name);
      }
      fputc('\n', stderr);
      return FG_EXIT_USAGE;
    }
    FGL(fgl_module_graph_at(s->m, 0, &s->gi, &e_));
  }
  /* FG_TRACE_OUT=FILE (profiling, with fusec --knob TRACE=1): the temps
   * are ours, and temp 0 (the timeline after the partials) is written to
   * FILE after the benchmark. */
  const char *trace_out = getenv("FG_TRACE_OUT");
  size_t trace_bytes = 0;
  if (trace_out && (s->gi.n_temps < 1 || s->gi.n_temps > 16))
    FAIL("FG_TRACE_OUT: graph '%s' has %d temps (1 to 16 expected: compile it with --knob TRACE=1)",
         s->gi.name, s->gi.n_temps);
  if (trace_out) {
    for (int t = 0; t < s->gi.n_temps; t++) {
      fgl_temp_info ti;
      FGL(fgl_module_temp_info(s->m, s->gi.name, t, &ti, &e_));
      if (ti.symbolic && !t)
        FAIL("FG_TRACE_OUT: graph '%s' has a temp 0 whose size depends on its syms", s->gi.name);
      FGL(fgl_malloc(s->m, ti.bytes, &s->trace_temps[t], &e_));
      if (!t)
        trace_bytes = ti.bytes;
    }
    FGL(fgl_graph_create_with_temps(s->m, s->gi.name, s->trace_temps, s->gi.n_temps, &s->g, &e_));
  } else {
    FGL(fgl_graph_create(s->m, s->gi.name, &s->g, &e_));
  }
  int np = s->gi.n_params, nr = s->gi.n_results;
  s->pi = calloc((size_t)np + 1, sizeof *s->pi);
  s->ri = calloc((size_t)nr + 1, sizeof *s->ri);
  s->in = calloc((size_t)np + 1, sizeof *s->in);
  s->got = calloc((size_t)nr + 1, sizeof *s->got);
  s->want = calloc((size_t)nr + 1, sizeof *s->want);
  s->args = calloc((size_t)np + 1, sizeof *s->args);
  s->outs = calloc((size_t)nr + 1, sizeof *s->outs);
  s->dev = calloc((size_t)(np + nr) + 1, sizeof *s->dev);
  s->raw = calloc((size_t)(np + nr) + 1, sizeof *s->raw);
  if (!s->pi || !s->ri || !s->in || !s->got || !s->want || !s->args || !s->outs || !s->dev ||
      !s->raw)
    FAIL("out of memory");
  s->misalign = o->misalign;
  for (int i = 0; i < np; i++)
    FGL(fgl_graph_param(s->g, i, &s->pi[i], &e_));
  for (int j = 0; j < nr; j++)
    FGL(fgl_graph_result(s->g, j, &s->ri[j], &e_));
  const fg_graph *ref = NULL;
  int rc;
  if (o->inputs && (rc = read_inputs(o, s)) != FG_EXIT_OK)
    return rc;
  if ((rc = bind_syms(o, s)) != FG_EXIT_OK)
    return rc;
  if (o->check && (rc = load_check_model(o, s, &ref)) != FG_EXIT_OK)
    return rc;
  if ((rc = prepare_inputs(o, s)) != FG_EXIT_OK)
    return rc;
  if ((rc = gpu_lock()) != FG_EXIT_OK || (rc = upload(s)) != FG_EXIT_OK)
    return rc;
  FGL(fgl_run(s->g, s->args, np, s->outs, nr, NULL, &e_));
  FGL(fgl_stream_sync(s->m, NULL, &e_));
  if ((rc = download(s)) != FG_EXIT_OK)
    return rc;

  rc = FG_EXIT_OK;
  if (ref) {
    char err[1024];
    if (!fg_interp_run(ref, s->in, s->want, err, sizeof err))
      FAIL("%s", err);
    for (int j = 0; j < nr; j++)
      if (!fg_compare_tol_at(stdout, j, &s->got[j], &s->want[j], fg_compare_tol_of(ref, j)))
        rc = FG_EXIT_INPUT;
  }
  if (o->out_dir) {
    if (!fg_make_dirs(o->out_dir))
      FAIL("cannot create directory '%s': %s", o->out_dir, strerror(errno));
    for (int j = 0; j < nr; j++) {
      char path[4096], err[512];
      snprintf(path, sizeof path, "%s/%d.npy", o->out_dir, j);
      if (!fg_npy_write(path, &s->got[j], err, sizeof err))
        FAIL("%s", err);
    }
  } else if (!ref) {
    for (int j = 0; j < nr; j++)
      fg_print_summary(stdout, j, &s->got[j]);
  }
  if (o->bench) {
    int brc = bench(o, s);
    if (brc != FG_EXIT_OK)
      return brc;
  }
  if (trace_out) {
    FGL(fgl_run(s->g, s->args, np, s->outs, nr, NULL, &e_));
    FGL(fgl_stream_sync(s->m, NULL, &e_));
    char *h = malloc(trace_bytes);
    if (!h)
      FAIL("out of memory");
    fgl_error ce = {0};
    fgl_status st = fgl_memcpy_dtoh(s->m, h, s->trace_temps[0], trace_bytes, &ce);
    FILE *f = st == FGL_OK ? fopen(trace_out, "wb") : NULL;
    bool ok = f && fwrite(h, 1, trace_bytes, f) == trace_bytes;
    if (f && fclose(f) != 0)
      ok = false;
    free(h);
    if (st != FGL_OK)
      FAIL("%s", ce.msg);
    if (!ok)
      FAIL("cannot write %s: %s", trace_out, strerror(errno));
  }
  return rc;
}

int fgrun_run_artifact(const fgrun_gpu_opts *o) {
  state s;
  memset(&s, 0, sizeof s);
  int rc = run(o, &s);
  int np = s.gi.n_params, nr = s.gi.n_results;
  if (s.raw)
    for (int i = 0; i < np + nr; i++)
      fgl_free(s.m, s.raw[i], NULL);
  for (int i = 0; s.in && i < np; i++)
    fg_tensor_free(&s.in[i]);
  for (int j = 0; j < nr; j++) {
    if (s.got)
      fg_tensor_free(&s.got[j]);
    if (s.want)
      fg_tensor_free(&s.want[j]);
  }
  free(s.pi);
  free(s.ri);
  free(s.in);
  free(s.got);
  free(s.want);
  free(s.args);
  free(s.outs);
  free(s.dev);
  free(s.raw);
  fgl_graph_free(s.g, NULL);
  for (int t = 0; t < 16; t++)
    if (s.trace_temps[t])
      fgl_free(s.m, s.trace_temps[t], NULL);
  fgl_module_free(s.m, NULL);
  fg_graph_free(s.spec);
  if (s.model)
    fg_module_free(s.model);
  free(s.model_src);
  return rc;
}
