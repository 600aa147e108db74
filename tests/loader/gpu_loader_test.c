/* GPU test of libfgload (ctest label "gpu"; exit 77 = skipped when there is
 * no CUDA driver or GPU). Usage: gpu_loader_test [ARTIFACT [SYM_ARTIFACT]]
 * (default: the add.ptx fixture, graph "axpy"; SYM_ARTIFACT: the sym.ptx
 * fixture, graph "axpy_n" over N symbolic elements).
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
 *     100 times gives bit-identical results to a direct run;
 *  6. with SYM_ARTIFACT: results of the symbolic graph at two sizes, the
 *     host time of its fgl_run against a bare launch of its kernel, as in 3,
 *     with the same sizes at every call (the evaluated formulas reused) and
 *     with two sizes in turn (evaluated at every call): the binding's cost is
 *     its overhead minus 3's; and a captured run after fgl_graph_reserve.
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
#include "host_timing.h"
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

static const fgl_cuda_api *cu;
static fgl_module *mod;
static char artifact[1024];

enum { CALLS = 10000 };

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

static char sym_artifact[1024];

typedef struct sym_result {
  double bare_us, run_us, run_alt_us;
  int ok, graph_same;
} sym_result;

/* Checks out[i] == x[i] + alpha y[i] for i < n, and the elements after
 * untouched (0xFF), in a buffer of N floats. */
static int axpy_ok(CUdeviceptr o, const float *hx, const float *hy, float alpha, long n,
                   float *ho) {
  FG(fgl_memcpy_dtoh(mod, ho, o, (size_t)N * 4, &e_));
  for (long i = 0; i < n; i++)
    if (fabsf(ho[i] - (hx[i] + alpha * hy[i])) > 1e-6f)
      return 0;
  for (long i = n; i < N; i++) {
    uint32_t b;
    memcpy(&b, &ho[i], 4);
    if (b != 0xFFFFFFFFu)
      return 0;
  }
  return 1;
}

/* 6. The symbolic graph axpy_n of SYM_ARTIFACT (N from the tensors). */
static void sym_section(const char *path, CUstream s, CUdeviceptr x, CUdeviceptr y, CUdeviceptr o,
                        CUdeviceptr o2, const float *hx, const float *hy, sym_result *res) {
  fgl_load_options lo;
  fgl_load_options_init(&lo);
  char dir[64];
  fresh_cache_dir(dir, sizeof dir);
  lo.cache_dir = dir;
  fgl_module *m;
  fgl_error e = {0};
  if (fgl_module_load_file(path, &lo, &m, &e) != FGL_OK) {
    printf("FAIL: loading %s: %s\n", path, e.msg);
    failures++;
    return;
  }
  fgl_graph *g;
  if (fgl_graph_create(m, "axpy_n", &g, &e) != FGL_OK) {
    printf("FAIL: %s\n", e.msg);
    failures++;
    return;
  }
  float *ho = malloc((N + 1) * 4);
  int64_t big = N, alt = N - 4, half = N / 2;
  FG(fgl_memcpy_htod(mod, x, hx, N * 4, &e_)); /* x as the host has it (2. shifted it) */
  FG(fgl_memcpy_htod(mod, y, hy, N * 4, &e_));
  fgl_arg in[3], in_alt[3], in_half[3];
  fgl_tensor out[2];
  fgl_tensor t;
  fgl_tensor_contiguous(&t, x, FGL_F32, 1, &big);
  in[0] = fgl_arg_tensor(t);
  fgl_tensor_contiguous(&t, y, FGL_F32, 1, &big);
  in[1] = fgl_arg_tensor(t);
  in[2] = fgl_arg_float(FGL_F32, 0.75);
  memcpy(in_alt, in, sizeof in);
  in_alt[0].tensor.sizes[0] = in_alt[1].tensor.sizes[0] = alt;
  memcpy(in_half, in, sizeof in);
  in_half[0].tensor.sizes[0] = in_half[1].tensor.sizes[0] = half;
  /* results at three sizes (the temp grows at the first run) */
  res->ok = 1;
  const fgl_arg *ins[3] = {in, in_alt, in_half};
  const long ns[3] = {N, N - 4, N / 2};
  for (int k = 0; k < 3; k++) {
    FG(fgl_memset(mod, o, 0xFF, N * 4, &e_));
    memset(out, 0, sizeof out);
    int64_t n = ns[k];
    fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &n);
    FG(fgl_run(g, ins[k], 3, out, 2, s, &e_));
    CU(cu->cuStreamSynchronize(s));
    int ok = axpy_ok(o, hx, hy, 0.75f, ns[k], ho) && out[1].ptr == o + (CUdeviceptr)(n / 2) * 4 &&
             out[1].sizes[0] == n / 2;
    EXPECT(ok, "symbolic graph, N=%ld: wrong results", ns[k]);
    res->ok &= ok;
  }
  /* host time: the same sizes at every call, then two sizes in turn */
  CUmodule bm = load_bare(cu, path);
  CUfunction fn;
  CU(cu->cuModuleGetFunction(&fn, bm, "fg_axpy_n_v4"));
  CUdeviceptr tmp;
  FG(fgl_malloc(mod, 4096, &tmp, &e_));
  FG(fgl_memset(mod, tmp, 0, 4096, &e_));
  double alpha = 0.75;
  long long nn = N;
  void *params[6] = {&x, &y, &alpha, &o, &tmp, &nn};
  memset(out, 0, sizeof out);
  fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &big);
  timed tc = {fn, params, 1024, g, in, NULL, 3, 2, out, NULL};
  time_pair(cu, &tc, s, CALLS, &res->bare_us, &res->run_us);
  /* every other call N - 4 (inputs and output alike): the formulas are
   * evaluated again at every call */
  fgl_tensor out_alt[2];
  memset(out_alt, 0, sizeof out_alt);
  fgl_tensor_contiguous(&out_alt[0], o, FGL_F32, 1, &alt);
  timed ta = {fn, params, 1024, g, in, in_alt, 3, 2, out, out_alt};
  double bare2;
  time_pair(cu, &ta, s, CALLS, &bare2, &res->run_alt_us);
  /* capture: reserve the largest size, then a captured run at N/2 */
  FG(fgl_graph_reserve(g, in, 3, s, &e_));
  CU(cu->cuStreamSynchronize(s));
  FG(fgl_memset(mod, o, 0xFF, N * 4, &e_));
  FG(fgl_memset(mod, o2, 0xFF, N * 4, &e_));
  fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &half);
  FG(fgl_run(g, in_half, 3, out, 2, s, &e_));
  CU(cu->cuStreamSynchronize(s));
  float *direct = malloc((N + 1) * 4), *replay = malloc((N + 1) * 4);
  FG(fgl_memcpy_dtoh(mod, direct, o, N * 4, &e_));
  fgl_tensor_contiguous(&out[0], o2, FGL_F32, 1, &half);
  CUgraph cg;
  CUgraphExec ge;
  CU(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  fgl_error ce = {0};
  fgl_status cr = fgl_run(g, in_half, 3, out, 2, s, &ce);
  CU(cu->cuStreamEndCapture(s, &cg));
  EXPECT(cr == FGL_OK, "symbolic fgl_run under capture: %s", ce.msg);
  CU(cu->cuGraphInstantiateWithFlags(&ge, cg, 0));
  for (int i = 0; i < 100; i++)
    CU(cu->cuGraphLaunch(ge, s));
  CU(cu->cuStreamSynchronize(s));
  FG(fgl_memcpy_dtoh(mod, replay, o2, N * 4, &e_));
  res->graph_same = cr == FGL_OK && !memcmp(direct, replay, N * 4);
  EXPECT(res->graph_same, "symbolic graph: replays differ from the direct run");
  CU(cu->cuGraphExecDestroy(ge));
  CU(cu->cuGraphDestroy(cg));
  CU(cu->cuModuleUnload(bm));
  fgl_free(mod, tmp, NULL);
  free(direct);
  free(replay);
  free(ho);
  fgl_graph_free(g, NULL);
  fgl_module_free(m, NULL);
}

int main(int argc, char **argv) {
  /* --load-only ARTIFACT: only the cold/warm load times of any artifact
   * (e.g. every example compiled together). */
  bool load_only = argc > 2 && strcmp(argv[1], "--load-only") == 0;
  if (load_only)
    argv++, argc--;
  snprintf(artifact, sizeof artifact, "%s", argc > 1 ? argv[1] : "add.ptx");
  snprintf(sym_artifact, sizeof sym_artifact, "%s", argc > 2 ? argv[2] : "");
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
  CUmodule bare_mod = load_bare(cu, artifact);
  CUfunction bare_fn;
  CU(cu->cuModuleGetFunction(&bare_fn, bare_mod, "fg_axpy_k0_v4"));
  CUdeviceptr tmp = 0;
  double alpha = 0.75;
  void *params[5] = {&xr, &y, &alpha, &o, &tmp};
  fgl_arg in[3];
  fgl_tensor out[3];
  set_args(in, out, xr, y, o, 0.75);
  timed tc = {bare_fn, params, 1024, g, in, NULL, 3, 3, out, NULL};
  double bare_us, run_us;
  time_pair(cu, &tc, s, CALLS, &bare_us, &run_us);
  EXPECT(run_us - bare_us <= 5.0, "fgl_run costs %.2f us more than cuLaunchKernel (target <= 5)",
         run_us - bare_us);

  sym_result sr = {0};
  if (sym_artifact[0])
    sym_section(sym_artifact, s, xr, y, o, o2, hx, hy, &sr);

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
  if (sym_artifact[0]) {
    printf("| symbolic graph: bare cuLaunchKernel       | %9.2f us |\n", sr.bare_us);
    printf("| symbolic graph: fgl_run, same N each call | %9.2f us |\n", sr.run_us);
    printf("| symbolic graph: fgl_run, N alternating    | %9.2f us |\n", sr.run_alt_us);
    printf("| binding cost, same N (overhead - above's) | %9.2f us |\n",
           (sr.run_us - sr.bare_us) - (run_us - bare_us));
    printf("| binding cost, N alternating               | %9.2f us |\n",
           (sr.run_alt_us - sr.bare_us) - (run_us - bare_us));
    printf("| symbolic results N=2^20, 2^20-4, 2^19     | %s          |\n", sr.ok ? "ok " : "BAD");
    printf("| symbolic: reserve, capture x100 == direct | %s          |\n",
           sr.graph_same ? "yes" : "NO ");
  }
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
  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
