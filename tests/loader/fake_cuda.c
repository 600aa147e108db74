/* A stand-in for libcuda.so.1 for the CPU tests (loaded through
 * FGL_LIBCUDA). Device memory is host memory, the "JIT" wraps the PTX text,
 * and the entries of add.ptx (fg_axpy_k0, fg_axpy_k0_v4), sym.ptx
 * (fg_axpy_n, fg_axpy_n_v4) and narrow.ptx (those two and their 32-bit
 * index variants fg_axpy_n_i32, fg_axpy_n_v4_i32, which check that n fits
 * in an int32) run on the host, so the whole public API can be
 * tested without a GPU. It counts every call so tests can assert what
 * fgl_run does (launches only; no allocation, copy or synchronization), and
 * logs each launch (entry, grid, block, the 8-byte argument values: as many
 * as the entry declares .params in the PTX). FAKE_CUDA_DEVICES=0 simulates
 * a machine without a GPU; PTX containing FAKE_JIT_FAIL fails to JIT;
 * FAKE_CUDA_CC=NN sets the compute capability (default 90). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loader's own declarations of the driver's types, so that every
 * function here has exactly the type the loader calls it through (clang's
 * -fsanitize=function checks it). */
#include "cuda_api.h"
#include "fake_cuda.h"

struct CUstream_st {
  char unused;
};
/* The streams cuStreamCreate made, their ids 1, 2, ... in creation order
 * (tests also pass made-up handles: those are -1, the NULL stream 0). */
static CUstream made_streams[64];
static int n_streams;
static int stream_id(CUstream s) {
  for (int i = 0; s && i < n_streams; i++)
    if (made_streams[i] == s)
      return i + 1;
  return s ? -1 : 0;
}
struct CUevent_st {
  double t;
};
struct CUgraph_st {
  char unused;
};
struct CUgraphExec_st {
  char unused;
};

#define EXPORT __attribute__((visibility("default")))

enum {
  C_ALLOC,
  C_FREE,
  C_HTOD,
  C_DTOH,
  C_MEMSET,
  C_SYNC,
  C_LAUNCH,
  C_JIT,
  C_MODLOAD,
  C_PUSH,
  C_CAPTURED,
  C_SMEM_ATTR,
  C_ALLOC_ASYNC,
  C_FREE_ASYNC,
  C_MEMSET_ASYNC,
  C_EVENT_RECORD,
  C_WAIT_EVENT,
  C_N
};
static const char *const cnames[C_N] = {
    "alloc",       "free",       "htod",         "dtoh",         "memset",    "sync",
    "launch",      "jit",        "modload",      "push",         "captured",  "smem_attr",
    "alloc_async", "free_async", "memset_async", "event_record", "wait_event"};
static long counters[C_N];
static char last_entry[128];
static int capturing;

/* The launch log (fake_cuda_launch), since the last reset. */
static fake_launch launch_log[64];
static int n_launch_log;

EXPORT long fake_cuda_count(const char *name) {
  for (int i = 0; i < C_N; i++)
    if (!strcmp(cnames[i], name))
      return counters[i];
  return -1;
}
EXPORT void fake_cuda_reset(void) {
  memset(counters, 0, sizeof counters);
  last_entry[0] = 0;
  n_launch_log = 0;
}
/* The number of launches logged since the reset; *out gets launch i. */
EXPORT int fake_cuda_launch(int i, fake_launch *out) {
  if (out && i >= 0 && i < n_launch_log)
    *out = launch_log[i];
  return n_launch_log;
}
EXPORT const char *fake_cuda_last_entry(void) { return last_entry; }

struct CUctx_st {
  int dummy;
};
static struct CUctx_st primary;
static __thread struct CUctx_st *stack[16];
static __thread int depth;

struct CUmod_st {
  char *text;
};
struct CUfunc_st {
  char name[128];
  int nparams; /* the .params its PTX declares */
};
struct CUlinkState_st {
  char *img;
  size_t len;
  char *elog;
  unsigned elog_size;
};

EXPORT CUresult cuInit(unsigned f) {
  (void)f;
  return 0;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return 0;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
  const char *e = getenv("FAKE_CUDA_DEVICES");
  *n = e ? atoi(e) : 1;
  return 0;
}
EXPORT CUresult cuDeviceGet(int *d, int o) {
  *d = o;
  return 0;
}
/* FAKE_CUDA_CC=NN: the compute capability (default 90: an H100's 9.0). */
EXPORT CUresult cuDeviceGetAttribute(int *v, int a, int d) {
  (void)d;
  const char *cc = getenv("FAKE_CUDA_CC");
  int ccv = cc ? atoi(cc) : 90;
  *v = a == 75 ? ccv / 10 : a == 76 ? ccv % 10 : a == 97 ? 232448 : a == 16 ? 132 : 0;
  return 0;
}
/* FAKE_CUDA_CTAS_PER_SM: what the occupancy calls report (default 16);
 * FAKE_CUDA_CTAS_PER_SM_ENTRY=NAME:N: N for entry NAME only. */
static int fake_per_sm(const char *entry) {
  const char *o = getenv("FAKE_CUDA_CTAS_PER_SM_ENTRY"), *c = o ? strrchr(o, ':') : NULL;
  if (c && entry && strlen(entry) == (size_t)(c - o) && !strncmp(o, entry, (size_t)(c - o)))
    return atoi(c + 1);
  const char *e = getenv("FAKE_CUDA_CTAS_PER_SM");
  return e ? atoi(e) : 16;
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, struct CUfunc_st *f, int block,
                                                            size_t smem) {
  (void)block;
  (void)smem;
  *n = fake_per_sm(f ? f->name : NULL);
  return 0;
}
/* Clusters of 2: one pair fewer than the SMs would hold (as when a GPC's
 * slots do not divide evenly), so that the cluster limit is the one that
 * binds. */
EXPORT CUresult cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *cfg) {
  (void)cfg;
  *n = fake_per_sm(f ? f->name : NULL) * 132 / 2 - 1;
  return 0;
}
EXPORT CUresult cuDeviceGetName(char *n, int len, int d) {
  (void)d;
  snprintf(n, (size_t)len, "Fake GPU");
  return 0;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **c, int d) {
  (void)d;
  *c = &primary;
  return 0;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int d) {
  (void)d;
  return 0;
}
EXPORT CUresult cuCtxGetCurrent(struct CUctx_st **c) {
  *c = depth ? stack[depth - 1] : NULL;
  return 0;
}
EXPORT CUresult cuCtxSetCurrent(struct CUctx_st *c) {
  if (depth)
    stack[depth - 1] = c;
  else if (c)
    stack[depth++] = c;
  return 0;
}
EXPORT CUresult cuCtxPushCurrent_v2(struct CUctx_st *c) {
  if (depth == 16)
    return 1;
  counters[C_PUSH]++;
  stack[depth++] = c;
  return 0;
}
EXPORT CUresult cuCtxPopCurrent_v2(struct CUctx_st **c) {
  if (!depth)
    return 201;
  *c = stack[--depth];
  return 0;
}
EXPORT CUresult cuCtxGetDevice(int *d) {
  *d = 0;
  return 0;
}

static CUresult load(struct CUmod_st **m, const void *img) {
  counters[C_MODLOAD]++;
  if (strncmp(img, "FAKECUBIN\n", 10))
    return 200; /* CUDA_ERROR_INVALID_IMAGE */
  *m = calloc(1, sizeof **m);
  (*m)->text = strdup((const char *)img + 10);
  return 0;
}
EXPORT CUresult cuModuleLoadData(struct CUmod_st **m, const void *img) { return load(m, img); }
EXPORT CUresult cuModuleLoadDataEx(struct CUmod_st **m, const void *img, unsigned n,
                                   CUjit_option *o, void **v) {
  (void)n;
  (void)o;
  (void)v;
  return load(m, img);
}
EXPORT CUresult cuModuleUnload(struct CUmod_st *m) {
  free(m->text);
  free(m);
  return 0;
}
/* Function handles live in a small per-process table. */
static struct CUfunc_st funcs[256];
static int n_funcs;
EXPORT CUresult cuModuleGetFunction(struct CUfunc_st **f, struct CUmod_st *m, const char *name) {
  char pat[160];
  snprintf(pat, sizeof pat, ".entry %s(", name);
  if (!strstr(m->text, pat))
    return 500; /* CUDA_ERROR_NOT_FOUND */
  for (int i = 0; i < n_funcs; i++)
    if (!strcmp(funcs[i].name, name)) {
      *f = &funcs[i];
      return 0;
    }
  if (n_funcs == 256)
    return 2;
  snprintf(funcs[n_funcs].name, sizeof funcs[n_funcs].name, "%s", name);
  const char *s = strstr(m->text, pat) + strlen(pat), *e = strchr(s, ')');
  int np = 0;
  for (const char *q = s; e && (q = strstr(q, ".param")) && q < e; q += 6)
    np++;
  funcs[n_funcs].nparams = np;
  *f = &funcs[n_funcs++];
  return 0;
}
EXPORT CUresult cuFuncSetAttribute(struct CUfunc_st *f, int a, int v) {
  (void)f;
  (void)v;
  if (a == 8)
    counters[C_SMEM_ATTR]++; /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
  return 0;
}

EXPORT CUresult cuLinkCreate_v2(unsigned n, CUjit_option *o, void **v, struct CUlinkState_st **s) {
  *s = calloc(1, sizeof **s);
  for (unsigned i = 0; i < n; i++) {
    if (o[i] == 5)
      (*s)->elog = v[i];
    if (o[i] == 6)
      (*s)->elog_size = (unsigned)(uintptr_t)v[i];
  }
  return 0;
}
EXPORT CUresult cuLinkAddData_v2(struct CUlinkState_st *s, int type, void *data, size_t size,
                                 const char *name, unsigned n, int *o, void **v) {
  (void)name;
  (void)n;
  (void)o;
  (void)v;
  if (type != 1 || size == 0 || ((char *)data)[size - 1] != 0)
    return 1; /* PTX must be NUL-terminated */
  if (strstr(data, "FAKE_JIT_FAIL")) {
    if (s->elog)
      snprintf(s->elog, s->elog_size, "ptxas fatal: fake JIT failure");
    return 218; /* CUDA_ERROR_INVALID_PTX */
  }
  s->img = malloc(size + 10);
  memcpy(s->img, "FAKECUBIN\n", 10);
  memcpy(s->img + 10, data, size);
  s->len = size + 10;
  return 0;
}
EXPORT CUresult cuLinkComplete(struct CUlinkState_st *s, void **img, size_t *len) {
  counters[C_JIT]++;
  *img = s->img;
  *len = s->len;
  return 0;
}
EXPORT CUresult cuLinkDestroy(struct CUlinkState_st *s) {
  free(s->img);
  free(s);
  return 0;
}

static void axpy(void **params, int vec) {
  float *x = (float *)(uintptr_t)*(CUdeviceptr *)params[0];
  float *y = (float *)(uintptr_t)*(CUdeviceptr *)params[1];
  double alpha = *(double *)params[2];
  float *out = (float *)(uintptr_t)*(CUdeviceptr *)params[3];
  if (vec && (((uintptr_t)x | (uintptr_t)y | (uintptr_t)out) & 15))
    abort(); /* would fault on a GPU */
  for (int i = 0; i < 1048576; i++)
    out[i] = x[i] + (float)alpha * y[i];
}

/* sym.ptx: out[i] = x[i] + alpha * y[i] for i < n (its last argument);
 * the temp (one float per 1024 elements) must be zero, as the loader
 * promises for a temp marked zero. */
static void axpy_n(void **params, int vec, int narrow) {
  float *x = (float *)(uintptr_t)*(CUdeviceptr *)params[0];
  float *y = (float *)(uintptr_t)*(CUdeviceptr *)params[1];
  double alpha = *(double *)params[2];
  float *out = (float *)(uintptr_t)*(CUdeviceptr *)params[3];
  const unsigned char *tmp = (const unsigned char *)(uintptr_t)*(CUdeviceptr *)params[4];
  int64_t n = *(int64_t *)params[5];
  if (vec && (((uintptr_t)x | (uintptr_t)y | (uintptr_t)out) & 15))
    abort(); /* would fault on a GPU */
  if (n > 0 && !tmp)
    abort();
  if (narrow && n > INT32_MAX)
    abort(); /* 32-bit indices would wrap */
  for (int64_t i = 0; i < (n + 1023) / 1024 * 4; i++)
    if (tmp[i])
      abort(); /* a temp marked zero that is not */
  for (int64_t i = 0; i < n; i++)
    out[i] = x[i] + (float)alpha * y[i];
}

static CUresult launch(struct CUfunc_st *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, CUstream stream, void **params,
                       int pdl) {
  counters[capturing ? C_CAPTURED : C_LAUNCH]++;
  snprintf(last_entry, sizeof last_entry, "%s", f->name);
  if (n_launch_log < 64) {
    fake_launch *l = &launch_log[n_launch_log++];
    snprintf(l->entry, sizeof l->entry, "%s", f->name);
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    memcpy(l->grid, g, sizeof g);
    memcpy(l->block, b, sizeof b);
    l->smem = smem;
    l->stream = stream_id(stream);
    l->pdl = pdl;
    l->nargs = f->nparams < 16 ? f->nparams : 16;
    for (int i = 0; i < l->nargs; i++)
      memcpy(&l->args[i], params[i], 8);
  }
  if (capturing)
    return 0;
  if (!strcmp(f->name, "fg_axpy_k0"))
    axpy(params, 0);
  else if (!strcmp(f->name, "fg_axpy_k0_v4"))
    axpy(params, 1);
  else if (!strcmp(f->name, "fg_axpy_n"))
    axpy_n(params, 0, 0);
  else if (!strcmp(f->name, "fg_axpy_n_v4"))
    axpy_n(params, 1, 0);
  else if (!strcmp(f->name, "fg_axpy_n_i32"))
    axpy_n(params, 0, 1);
  else if (!strcmp(f->name, "fg_axpy_n_v4_i32"))
    axpy_n(params, 1, 1);
  return 0;
}

EXPORT CUresult cuLaunchKernel(struct CUfunc_st *f, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz, unsigned smem,
                               CUstream stream, void **params, void **extra) {
  (void)extra;
  return launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, 0);
}

/* Only the attribute fusec sets is known; any other is refused as the
 * driver refuses an invalid one. FAKE_CUDA_PDL_FAIL=1 refuses that one
 * too. */
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, struct CUfunc_st *f, void **params,
                                 void **extra) {
  (void)extra;
  int pdl = 0;
  for (unsigned i = 0; i < c->numAttrs; i++) {
    if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      return 1; /* CUDA_ERROR_INVALID_VALUE */
    pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  const char *e = getenv("FAKE_CUDA_PDL_FAIL"); /* a driver refusing the attribute */
  if (pdl && e && *e == '1')
    return 1; /* CUDA_ERROR_INVALID_VALUE */
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                c->sharedMemBytes, c->hStream, params, pdl);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  counters[C_ALLOC]++;
  void *m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m)
    return 2;
  memset(m, 0xAB, n); /* garbage, so missing zeroing shows */
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  counters[C_FREE]++;
  free((void *)(uintptr_t)p);
  return 0;
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) {
  counters[C_HTOD]++;
  memcpy((void *)(uintptr_t)d, s, n);
  return 0;
}
EXPORT CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
  counters[C_DTOH]++;
  memcpy(d, (void *)(uintptr_t)s, n);
  return 0;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) {
  (void)st;
  return cuMemcpyHtoD_v2(d, s, n);
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  (void)st;
  memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
  return 0;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) {
  (void)st;
  return cuMemcpyDtoH_v2(d, s, n);
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  counters[C_MEMSET]++;
  memset((void *)(uintptr_t)d, v, n);
  return 0;
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream st) {
  (void)st;
  counters[C_MEMSET_ASYNC]++;
  memset((void *)(uintptr_t)d, v, n);
  return 0;
}
/* Stream-ordered allocation: FAKE_CUDA_ASYNC_FAIL=1 makes it fail. */
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream st) {
  (void)st;
  const char *e = getenv("FAKE_CUDA_ASYNC_FAIL");
  if (e && !strcmp(e, "1"))
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  counters[C_ALLOC_ASYNC]++;
  void *m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m)
    return 2;
  memset(m, 0xAB, n);
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream st) {
  (void)st;
  counters[C_FREE_ASYNC]++;
  free((void *)(uintptr_t)p);
  return 0;
}
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned f) {
  (void)f;
  *s = calloc(1, sizeof **s);
  if (!*s)
    return 2;
  if (n_streams < 64)
    made_streams[n_streams++] = *s;
  return 0;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  for (int i = 0; i < n_streams; i++)
    if (made_streams[i] == s)
      made_streams[i] = NULL;
  free(s);
  return 0;
}
EXPORT CUresult cuStreamSynchronize(CUstream s) {
  (void)s;
  counters[C_SYNC]++;
  return 0;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned f) {
  (void)f;
  *e = calloc(1, sizeof **e);
  return 0;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  (void)s;
  counters[C_EVENT_RECORD]++;
  e->t = (double)counters[C_LAUNCH];
  return 0;
}
/* Streams run in order on the host: a wait has nothing to wait for. */
EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) {
  (void)s;
  (void)e;
  (void)f;
  counters[C_WAIT_EVENT]++;
  return 0;
}
EXPORT CUresult cuEventSynchronize(CUevent e) {
  (void)e;
  counters[C_SYNC]++;
  return 0;
}
EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  *ms = (float)(b->t - a->t) * 0.001f;
  return 0;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  free(e);
  return 0;
}
EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  (void)s;
  (void)mode;
  capturing = 1;
  return 0;
}
EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  (void)s;
  capturing = 0;
  *g = calloc(1, sizeof **g);
  return 0;
}
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f) {
  (void)g;
  (void)f;
  *e = calloc(1, sizeof **e);
  return 0;
}
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  (void)e;
  (void)s;
  return 0;
}
EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
  free(e);
  return 0;
}
EXPORT CUresult cuGraphDestroy(CUgraph g) {
  free(g);
  return 0;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == 0     ? "CUDA_SUCCESS"
       : r == 200 ? "CUDA_ERROR_INVALID_IMAGE"
       : r == 218 ? "CUDA_ERROR_INVALID_PTX"
       : r == 500 ? "CUDA_ERROR_NOT_FOUND"
                  : "CUDA_ERROR_UNKNOWN";
  return 0;
}
EXPORT CUresult cuGetErrorString(CUresult r, const char **s) {
  (void)r;
  *s = "fake driver error";
  return 0;
}
