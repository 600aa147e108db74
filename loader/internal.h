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
  CUfunction **funcs;     /* [graph][kernel] */
  CUfunction **vec_funcs; /* [graph][kernel], NULL when no kernel-vec */
  /* Kernels are looked up when the first instance of their graph is made:
   * with the driver's lazy loading that is when a kernel is really loaded,
   * so loading a many-graph artifact costs only what is used. */
  unsigned char *resolved; /* [graph] */
  pthread_mutex_t resolve_lock;
  fgl_device_info dev;
  fgl_load_stats stats;
  fgl_log_fn log;
  void *log_user;
};

typedef struct fgl_launch {
  CUfunction fn, vec_fn;
  unsigned grid[3], block[3], smem;
  unsigned vec_align;
  int n_vec_ptrs;
  const unsigned long long **vec_ptrs; /* slots to check for alignment */
  void **params;                       /* kernel parameter pointers into slots */
} fgl_launch;

struct fgl_graph {
  fgl_module *m;
  const plan_graph *pg;
  unsigned long long *slot_p, *slot_r, *slot_t; /* values: params, written results, temps */
  CUdeviceptr *temp_alloc;                      /* owned allocations (0 when caller-supplied) */
  fgl_launch *launches;
  void **param_ptrs; /* storage of every launch's params array */
  const unsigned long long **vec_ptr_store;
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

/* The driver JIT (cuLink*) with the fgl_jit_fn signature; ctx is the api. */
int fgl_driver_jit(void *ctx, const char *ptx, size_t len, const fgl_jit_opts *opts, void **cubin,
                   size_t *cubin_len, char *err, size_t errlen);

#endif
