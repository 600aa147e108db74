/* GPU test of libfgload (ctest label "gpu"; exit 77 = skipped when there is
 * no CUDA driver or GPU). Usage: gpu_loader_test [ARTIFACT]  (default: the
 * add.ptx fixture next to this file, graph "axpy").
 *
 * Measures and checks:
 *  1. cold load (JIT; CUDA_CACHE_DISABLE=1 and an empty FUSEC_CACHE_DIR) vs
 *     warm load (cubin cache hit);
 *  2. results of a run against the host (vectorized and plain kernel);
 *  3. host time of fgl_run vs a bare cuLaunchKernel of the same kernel
 *     (median of 10000 calls each; target: <= 5 us above);
 *  4. bad inputs (dtype, shape, stride, NULL, misaligned) rejected with
 *     nothing launched: the poisoned output stays 0xFF;
 *  5. a run captured into a CUDA graph (global capture mode) and replayed
 *     100 times gives bit-identical results to a direct run.
 * Prints a table; exit 0 when everything passes, 1 otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"
#include "gpu_test.h"
#include "fgload.h"

#define N 1048576
static int failures;
#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)
#define FG(call)                                                                                   \
  do {                                                                                             \
    fgl_error e_ = {0};                                                                            \
    fgl_status s_ = (call);                                                                        \
    (void)e_;                                                                                      \
    if (s_ != FGL_OK) {                                                                            \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, fgl_status_name(s_));              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const fgl_cuda_api *cu;
static fgl_module *mod;
static char artifact[1024];

static void fresh_cache_dir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/fgl-gpu-test-XXXXXX");
  if (!mkdtemp(buf)) {
    perror("mkdtemp");
    exit(1);
  }
}

static fgl_module *load(const char *cache_dir, fgl_load_stats *st) {
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.cache_dir = cache_dir;
  fgl_module *m;
  fgl_error e = {0};
  if (fgl_module_load_file(artifact, &o, &m, &e) != FGL_OK) {
    printf("FAIL: loading %s: %s\n", artifact, e.msg);
    exit(1);
  }
  fgl_module_load_stats(m, st, &e);
  return m;
}

static void set_args(fgl_arg in[3], fgl_tensor out[3], CUdeviceptr x, CUdeviceptr y, CUdeviceptr o,
                     double alpha) {
  int64_t n = N;
  fgl_tensor t;
  fgl_tensor_contiguous(&t, x, FGL_F32, 1, &n);
  in[0] = fgl_arg_tensor(t);
  fgl_tensor_contiguous(&t, y, FGL_F32, 1, &n);
  in[1] = fgl_arg_tensor(t);
  in[2] = fgl_arg_float(FGL_F32, alpha);
  memset(out, 0, 3 * sizeof *out);
  fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &n);
}

int main(int argc, char **argv) {
  /* --load-only ARTIFACT: only the cold/warm load times of any artifact
   * (e.g. every example compiled together). */
  bool load_only = argc > 2 && strcmp(argv[1], "--load-only") == 0;
  if (load_only)
    argv++, argc--;
  snprintf(artifact, sizeof artifact, "%s", argc > 1 ? argv[1] : "add.ptx");
  setenv("CUDA_CACHE_DISABLE", "1", 1); /* before the driver starts: no driver-side JIT cache */
  cu = gpu_test_driver();
  /* Create the context up front so loads measure the loader, not context creation. */
  CUdevice dev;
  CUcontext ctx;
  double t0 = now_us();
  CU(cu->cuDeviceGet(&dev, 0));
  CU(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu->cuCtxSetCurrent(ctx));
  double ctx_ms = (now_us() - t0) / 1e3;

  /* 1. cold vs warm load */
  double cold[3], warm[20], jit[3];
  char dir[64];
  for (int i = 0; i < 3; i++) {
    fresh_cache_dir(dir, sizeof dir);
    fgl_load_stats st;
    fgl_module *m = load(dir, &st);
    EXPECT(!st.cache_hit, "cold load %d hit the cache", i);
    cold[i] = st.total_ms;
    jit[i] = st.jit_ms;
    fgl_module_free(m, NULL);
  }
  for (int i = 0; i < 20; i++) {
    fgl_load_stats st;
    fgl_module *m = load(dir, &st); /* the last cold load filled dir */
    EXPECT(st.cache_hit, "warm load %d missed the cache", i);
    warm[i] = st.total_ms;
    fgl_module_free(m, NULL);
  }
  fgl_load_stats st;
  mod = load(dir, &st);
  fgl_device_info di;
  fgl_module_device_info(mod, &di, NULL);
  double cold_ms = median(cold, 3), jit_ms = median(jit, 3), warm_ms = median(warm, 20);
  if (load_only) {
    printf("artifact %s on %s (driver %d), context creation %.1f ms (once, not counted)\n",
           artifact, di.name, di.driver_version, ctx_ms);
    printf("cold load (median of 3): %.2f ms, of which JIT %.2f ms\n", cold_ms, jit_ms);
    printf("warm load, cubin cache hit (median of 20): %.3f ms (target <= 2 ms: %s)\n", warm_ms,
           warm_ms <= 2.0 ? "met" : "MISSED");
    fgl_module_free(mod, NULL);
    return warm_ms <= 2.0 ? 0 : 1;
  }

  /* 2. correctness of a run */
  fgl_graph *g;
  fgl_error e = {0};
  if (fgl_graph_create(mod, "axpy", &g, &e) != FGL_OK) {
    printf("FAIL: %s\n", e.msg);
    return 1;
  }
  CUdeviceptr xr, y, o, o2;
  FG(fgl_malloc(mod, N * 4 + 256, &xr, &e_));
  FG(fgl_malloc(mod, N * 4, &y, &e_));
  FG(fgl_malloc(mod, N * 4, &o, &e_));
  FG(fgl_malloc(mod, N * 4, &o2, &e_));
  float *hx = malloc(N * 4), *hy = malloc(N * 4), *ho = malloc(N * 4), *ho2 = malloc(N * 4);
  srand(1);
  for (int i = 0; i < N; i++) {
    hx[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    hy[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
  }
  int ok_vec = 1, ok_plain = 1;
  for (int variant = 0; variant < 2; variant++) {
    CUdeviceptr x = xr + (variant ? 4 : 0); /* +4: not 16-byte aligned -> plain kernel */
    FG(fgl_memcpy_htod(mod, x, hx, N * 4, &e_));
    FG(fgl_memcpy_htod(mod, y, hy, N * 4, &e_));
    FG(fgl_memset(mod, o, 0xFF, N * 4, &e_));
    fgl_arg in[3];
    fgl_tensor out[3];
    set_args(in, out, x, y, o, 0.75);
    FG(fgl_run(g, in, 3, out, 3, NULL, &e_));
    FG(fgl_stream_sync(mod, NULL, &e_));
    FG(fgl_memcpy_dtoh(mod, ho, o, N * 4, &e_));
    int ok = 1;
    for (int i = 0; i < N; i++)
      if (fabsf(ho[i] - (hx[i] + 0.75f * hy[i])) > 1e-6f) {
        ok = 0;
        break;
      }
    EXPECT(ok, "%s kernel: wrong results", variant ? "plain" : "vectorized");
    EXPECT(out[1].ptr == x && out[2].ptr == o + 1024 * 4, "view pointers");
    if (variant)
      ok_plain = ok;
    else
      ok_vec = ok;
  }

  /* 3. host time: fgl_run vs bare cuLaunchKernel */
  CUstream s;
  CU(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUmodule bare_mod;
  {
    FILE *f = fopen(artifact, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
      printf("FAIL: read\n");
      return 1;
    }
    text[n] = 0;
    fclose(f);
    CU(cu->cuModuleLoadData(&bare_mod, text));
    free(text);
  }
  CUfunction bare_fn;
  CU(cu->cuModuleGetFunction(&bare_fn, bare_mod, "fg_axpy_k0_v4"));
  enum { CALLS = 10000, BATCH = 200 };
  double *tb = malloc(CALLS * sizeof *tb), *tr = malloc(CALLS * sizeof *tr);
  CUdeviceptr tmp = 0;
  double alpha = 0.75;
  void *params[5] = {&xr, &y, &alpha, &o, &tmp};
  fgl_arg in[3];
  fgl_tensor out[3];
  set_args(in, out, xr, y, o, 0.75);
  for (int rep = 0; rep < 2; rep++) { /* rep 0 warms up */
    for (int i = 0; i < CALLS; i++) {
      if (i % BATCH == 0)
        CU(cu->cuStreamSynchronize(s));
      double a = now_us();
      CUresult r = cu->cuLaunchKernel(bare_fn, 1024, 1, 1, 256, 1, 1, 0, s, params, NULL);
      tb[i] = now_us() - a;
      if (r != CUDA_SUCCESS) {
        printf("FAIL: bare launch %d\n", r);
        return 1;
      }
    }
    for (int i = 0; i < CALLS; i++) {
      if (i % BATCH == 0)
        CU(cu->cuStreamSynchronize(s));
      double a = now_us();
      fgl_status r = fgl_run(g, in, 3, out, 3, s, NULL);
      tr[i] = now_us() - a;
      if (r != FGL_OK) {
        printf("FAIL: fgl_run\n");
        return 1;
      }
    }
  }
  CU(cu->cuStreamSynchronize(s));
  double bare_us = median(tb, CALLS), run_us = median(tr, CALLS);
  EXPECT(run_us - bare_us <= 5.0, "fgl_run costs %.2f us more than cuLaunchKernel (target <= 5)",
         run_us - bare_us);

  /* 4. bad inputs rejected, nothing launched */
  const char *bad_names[] = {"wrong dtype",  "wrong shape",        "wrong stride",
                             "NULL pointer", "misaligned pointer", "wrong count"};
  int n_bad = 6, bad_ok = 0;
  FG(fgl_memset(mod, o2, 0xFF, N * 4, &e_));
  for (int c = 0; c < n_bad; c++) {
    set_args(in, out, xr, y, o2, 0.75);
    int nin = 3;
    switch (c) {
    case 0:
      in[1].tensor.dtype = FGL_F16;
      break;
    case 1:
      in[0].tensor.sizes[0] = N / 2;
      break;
    case 2:
      in[1].tensor.strides[0] = 2;
      break;
    case 3:
      in[0].tensor.ptr = 0;
      break;
    case 4:
      out[0].ptr = o2 + 1;
      break;
    case 5:
      nin = 2;
      break;
    }
    fgl_error be = {0};
    fgl_status r = fgl_run(g, in, nin, out, 3, s, &be);
    EXPECT(r == FGL_ERR_MISMATCH, "%s: accepted", bad_names[c]);
    if (r == FGL_ERR_MISMATCH) {
      bad_ok++;
      printf("  rejected (%s): %s\n", bad_names[c], be.msg);
    }
  }
  CU(cu->cuStreamSynchronize(s));
  FG(fgl_memcpy_dtoh(mod, ho2, o2, N * 4, &e_));
  int untouched = 1;
  for (int i = 0; i < N; i++) {
    uint32_t b;
    memcpy(&b, &ho2[i], 4);
    if (b != 0xFFFFFFFFu) {
      untouched = 0;
      break;
    }
  }
  EXPECT(untouched, "an output was written by a rejected run");

  /* 5. CUDA-graph capture, replayed 100 times */
  set_args(in, out, xr, y, o, 0.75);
  FG(fgl_run(g, in, 3, out, 3, s, &e_)); /* direct run -> o */
  CU(cu->cuStreamSynchronize(s));
  FG(fgl_memcpy_dtoh(mod, ho, o, N * 4, &e_));
  FG(fgl_memset(mod, o2, 0xFF, N * 4, &e_));
  set_args(in, out, xr, y, o2, 0.75);
  CUgraph cg;
  CUgraphExec ge;
  CU(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  fgl_error ce = {0};
  fgl_status cr = fgl_run(g, in, 3, out, 3, s, &ce);
  CU(cu->cuStreamEndCapture(s, &cg));
  EXPECT(cr == FGL_OK, "fgl_run under capture: %s", ce.msg);
  CU(cu->cuGraphInstantiateWithFlags(&ge, cg, 0));
  for (int i = 0; i < 100; i++)
    CU(cu->cuGraphLaunch(ge, s));
  CU(cu->cuStreamSynchronize(s));
  FG(fgl_memcpy_dtoh(mod, ho2, o2, N * 4, &e_));
  int same = memcmp(ho, ho2, N * 4) == 0;
  EXPECT(same, "graph replays differ from the direct run");
  CU(cu->cuGraphExecDestroy(ge));
  CU(cu->cuGraphDestroy(cg));

  printf("\nlibfgload GPU test: %s on %s (sm_%d%d, driver %d)\n", artifact, di.name, di.cc_major,
         di.cc_minor, di.driver_version);
  printf("| measurement                               | value        |\n");
  printf("|-------------------------------------------|--------------|\n");
  printf("| context creation (not part of a load)     | %9.2f ms |\n", ctx_ms);
  printf("| cold load, JIT (median of 3)              | %9.2f ms |\n", cold_ms);
  printf("|   of which PTX JIT                        | %9.2f ms |\n", jit_ms);
  printf("| warm load, cache hit (median of 20)       | %9.3f ms |\n", warm_ms);
  printf("| bare cuLaunchKernel host time (median)    | %9.2f us |\n", bare_us);
  printf("| fgl_run host time, 1 kernel (median)      | %9.2f us |\n", run_us);
  printf("| fgl_run overhead over cuLaunchKernel      | %9.2f us |\n", run_us - bare_us);
  printf("| results vectorized / plain kernel         | %s / %s  |\n", ok_vec ? "ok  " : "FAIL",
         ok_plain ? "ok  " : "FAIL");
  printf("| bad inputs rejected, output untouched     | %d/%d, %s     |\n", bad_ok, n_bad,
         untouched ? "yes" : "NO ");
  printf("| CUDA graph x100 == direct run             | %s          |\n", same ? "yes" : "NO ");
  printf("targets: warm load <= 2 ms: %s; fgl_run overhead <= 5 us: %s\n",
         warm_ms <= 2.0 ? "met" : "MISSED", run_us - bare_us <= 5.0 ? "met" : "MISSED");
  EXPECT(warm_ms <= 2.0, "warm load %.3f ms > 2 ms", warm_ms);

  CU(cu->cuModuleUnload(bare_mod));
  CU(cu->cuStreamDestroy(s));
  fgl_free(mod, xr, NULL);
  fgl_free(mod, y, NULL);
  fgl_free(mod, o, NULL);
  fgl_free(mod, o2, NULL);
  fgl_graph_free(g, NULL);
  fgl_module_free(mod, NULL);
  free(hx);
  free(hy);
  free(ho);
  free(ho2);
  free(tb);
  free(tr);
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
