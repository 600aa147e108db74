/* Internal definitions shared by the loader's files (not installed). */
#ifndef FGL_INTERNAL_H
#define FGL_INTERNAL_H

#include <pthread.h>

#include "cache.h"
#include "cuda_api.h"
#include "fgload.h"
#include "plan_parse.h"

/* Fills err (when not NULL) and returns status. */
fgl_status fgl_fail(fgl_error *err, fgl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Formats a log message and hands it to log (when not NULL). */
void fgl_logf(fgl_log_fn log, void *user, fgl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
double fgl_now_ms(void);

struct fgl_module {
  const fgl_cuda_api *cu;
  CUcontext ctx;
  int own_primary; /* retained the primary context of `device` */
  CUdevice device;
  CUmodule mod;
  plan plan;
  /* [graph][kernel * PLAN_N_ENTRIES + variant (plan_variant)]: NULL where
   * the plan has no such entry */
  CUfunction **funcs;
  /* Kernels are looked up when the first instance of their graph is made:
   * with the driver's lazy loading that is when a kernel is really loaded,
   * so loading a many-graph artifact costs only what is used. */
  unsigned char *resolved; /* [graph] */
  /* [graph][kernel * 2 + narrow]: resident kernels with a symbolic grid,
   * the CTAs that fit on the GPU at once (-1: none; 0: not such a kernel),
   * of the fewer of the plain and vec entries (narrow 0) or of their
   * kernel-narrow variants (narrow 1); checked at each run */
  long long **resident_fit;
  pthread_mutex_t resolve_lock;
  fgl_device_info dev;
  fgl_load_stats stats;
  int source;         /* fgl_load_source: where the cubin came from */
  char sass_arch[16]; /* source FGL_LOAD_SASS: the section's architecture */
  fgl_log_fn log;
  void *log_user;
};

typedef struct fgl_launch {
  CUfunction fn[PLAN_N_ENTRIES];    /* by plan_variant; NULL where the plan has none */
  int64_t narrow_max;               /* fn[PLAN_ENTRY_NARROW*] when sym 0 <= this */
  unsigned grid[3], block[3], smem; /* grid: evaluated for the bound syms */
  unsigned vec_align;
  int n_vec_ptrs;
  const unsigned long long **vec_ptrs; /* slots to check for alignment */
  void **params;                       /* kernel parameter pointers into slots */
  int stream;                          /* 1: on the instance's second stream */
  bool pdl; /* waits for its predecessor in the kernel (kernel-pdl): launched with
             * programmatic stream serialization after another kernel of the run */
} fgl_launch;

/* A tensor's shape with every formula evaluated. */
typedef struct fgl_dims {
  int64_t sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK];
  int64_t numel;
} fgl_dims;

struct fgl_graph {
  fgl_module *m;
  const plan_graph *pg;
  int gi;                                       /* the graph's index in the module's plan */
  unsigned long long *slot_p, *slot_r, *slot_t; /* values: params, written results, temps */
  int64_t *slot_z;                              /* the bound value of each sym (z<J> args) */
  CUdeviceptr *temp_alloc;   /* owned allocations (0 when caller-supplied or not yet made) */
  unsigned char *temp_async; /* temp_alloc[i] came from cuMemAllocAsync */
  unsigned char *temp_mine;  /* the loader owns temp i's storage (allocates, grows, frees) */
  int64_t *temp_cap;         /* bytes usable at slot_t[i] */
  int64_t *temp_need;        /* bytes the bound sizes need */
  /* Every formula evaluated for the bound syms (at creation when there are
   * none); `bound` holds the sym values they were evaluated for. */
  fgl_dims *pdims, *rdims;
  int64_t *roffset;
  int64_t *bound;
  bool bound_valid;
  fgl_launch *launches;
  void **param_ptrs; /* storage of every launch's params array */
  const unsigned long long **vec_ptr_store;
  /* Kernels on a second stream (plan version 4, kernel-stream): the
   * stream, and the events that fork it from the caller's stream at the
   * start of a run and join it back at the end (NULL without). */
  CUstream side;
  CUevent fork, join;
};

struct fgl_event {
  fgl_module *m;
  CUevent ev;
};

/* Makes m's context current on this thread if it is not; *pushed tells
 * whether fgl_ctx_leave must pop it. */
fgl_status fgl_ctx_enter(fgl_module *m, int *pushed, fgl_error *err);
void fgl_ctx_leave(fgl_module *m, int pushed);
fgl_status fgl_cuda_fail(fgl_module *m, fgl_error *err, CUresult r, const char *what);

/* ---- binding and evaluation (bind.c) ---- */

/* "bf16[4096,64] strides [64,1]" */
void fgl_fmt_dims(char *b, size_t n, fgl_dtype dt, int rank, const int64_t *sizes,
                  const int64_t *strides);
/* The same for the plan's description: formulas as written ("f32[T,64] strides [64,1]"). */
void fgl_fmt_plan_shape(char *b, size_t n, const plan_graph *pg, fgl_dtype dt,
                        const plan_shape *sh);
/* Checks the input count and each tensor input's kind, dtype and rank,
 * then binds the syms from their sizes into vals and checks the syms'
 * facts. FGL_ERR_MISMATCH with fgl_run's message otherwise. */
fgl_status fgl_bind(const plan_graph *pg, const fgl_arg *inputs, int n_inputs, int64_t *vals,
                    fgl_error *err);
/* Each bound value against its sym's facts (min..max, a multiple of div). */
fgl_status fgl_check_facts(const plan_graph *pg, const int64_t *vals, fgl_error *err);
/* Parameter i's, result j's (with its view's extent checked against the
 * base's dims), temp t's bytes and kernel k's grid for the bound vals. */
fgl_status fgl_eval_param(const plan_graph *pg, const int64_t *vals, int i, fgl_dims *out,
                          fgl_error *err);
fgl_status fgl_eval_result(const plan_graph *pg, const int64_t *vals, int j, fgl_dims *out,
                           int64_t *offset, fgl_error *err);
fgl_status fgl_check_view(const plan_graph *pg, const int64_t *vals, int j, const fgl_dims *view,
                          int64_t offset, const fgl_dims *base, fgl_error *err);
fgl_status fgl_eval_temp(const plan_graph *pg, const int64_t *vals, int t, int64_t *bytes,
                         fgl_error *err);
/* fit: the module's resident_fit pair of kernel k. */
fgl_status fgl_eval_grid(const plan_graph *pg, const int64_t *vals, int k, const long long *fit,
                         unsigned grid[3], fgl_error *err);
/* Evaluates every formula of g's graph for g->slot_z into g's arrays
 * (params, results, temps' needs, grids), or does nothing when those are
 * the values of the last evaluation. */
fgl_status fgl_graph_evaluate(fgl_graph *g, fgl_error *err);
/* Whether a symbolic temp needs more than it holds: *grow when the loader
 * owns it, FGL_ERR_MISMATCH when the caller supplied it. */
fgl_status fgl_check_temps(const fgl_graph *g, bool *grow, fgl_error *err);
/* Grows the loader's symbolic temps that need more than they hold,
 * stream-ordered on stream (the module's context is current). */
fgl_status fgl_grow_temps(fgl_graph *g, CUstream stream, fgl_error *err);

/* The driver JIT (cuLink*) with the fgl_jit_fn signature; ctx is the api. */
int fgl_driver_jit(void *ctx, const char *ptx, size_t len, const fgl_jit_opts *opts, void **cubin,
                   size_t *cubin_len, char *err, size_t errlen);

#endif
