/* GPU test of run-to-run reproducibility (ctest label "gpu"; exit 77 =
 * skipped when there is no CUDA driver or GPU).
 * Usage: gpu_repeat_test ARTIFACT GRAPH [RUNS]
 *
 * Random inputs (fixed seed), one reference run, then RUNS more runs on
 * the same inputs, each into outputs poisoned with 0xFF first: every
 * written result must be bitwise identical to the reference. Then one run
 * captured into a CUDA graph and replayed 10 times must match too (the
 * grid reductions' counters must be reset by each run). Exit 0 when all
 * match, 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"
#include "gpu_test.h"
#include "fgload.h"

#define FG(call)                                                                                   \
  do {                                                                                             \
    fgl_error e_ = {0};                                                                            \
    if ((call) != FGL_OK) {                                                                        \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, e_.msg);                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* xorshift64*, in [0.5, 1.5): positive, like rstd */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return 0.5 + (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static uint16_t to_half_bits(float f, int bf16) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (bf16)
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
  /* f16 for values in [0.5, 1.5): exponent 14 or 15, no subnormals */
  int e = (int)((u >> 23) & 0xFF) - 127 + 15;
  return (uint16_t)((e << 10) | ((u >> 13) & 0x3FF));
}

static void fill(void *h, fgl_dtype dt, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double v = uniform();
    switch (dt) {
    case FGL_F32:
      ((float *)h)[i] = (float)v;
      break;
    case FGL_F64:
      ((double *)h)[i] = v;
      break;
    case FGL_BF16:
      ((uint16_t *)h)[i] = to_half_bits((float)v, 1);
      break;
    case FGL_F16:
      ((uint16_t *)h)[i] = to_half_bits((float)v, 0);
      break;
    default:
      memset((char *)h + i * (size_t)fgl_dtype_size(dt), (int)(v * 4), (size_t)fgl_dtype_size(dt));
      break;
    }
  }
}

static size_t numel(int rank, const int64_t *sizes) {
  size_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= (size_t)sizes[i];
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gpu_repeat_test ARTIFACT GRAPH [RUNS]\n");
    return 2;
  }
  int runs = argc > 3 ? atoi(argv[3]) : 100;
  const fgl_cuda_api *cu = gpu_test_driver();
  CUdevice dev;
  CUcontext ctx;
  CU(cu->cuDeviceGet(&dev, 0));
  CU(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu->cuCtxSetCurrent(ctx));
  fgl_module *m;
  fgl_graph *g;
  fgl_graph_info gi;
  FG(fgl_module_load_file(argv[1], NULL, &m, &e_));
  FG(fgl_graph_create(m, argv[2], &g, &e_));
  FG(fgl_graph_get_info(g, &gi, &e_));
  fgl_arg *in = calloc((size_t)gi.n_params + 1, sizeof *in);
  fgl_tensor *out = calloc((size_t)gi.n_results + 1, sizeof *out);
  void **ref = calloc((size_t)gi.n_results + 1, sizeof *ref);
  size_t *bytes = calloc((size_t)gi.n_results + 1, sizeof *bytes);
  if (!in || !out || !ref || !bytes)
    return 1;
  for (int i = 0; i < gi.n_params; i++) {
    fgl_param_info pi;
    FG(fgl_graph_param(g, i, &pi, &e_));
    if (pi.is_scalar) {
      in[i] =
          fgl_dtype_is_float(pi.dtype) ? fgl_arg_float(pi.dtype, 0.75) : fgl_arg_int(pi.dtype, 3);
      continue;
    }
    size_t n = numel(pi.rank, pi.sizes), b = n * (size_t)fgl_dtype_size(pi.dtype);
    void *h = malloc(b ? b : 1);
    if (!h)
      return 1;
    fill(h, pi.dtype, n);
    fgl_devptr d;
    FG(fgl_malloc(m, b ? b : 1, &d, &e_));
    FG(fgl_memcpy_htod(m, d, h, b, &e_));
    free(h);
    fgl_tensor t;
    fgl_tensor_contiguous(&t, d, pi.dtype, pi.rank, pi.sizes);
    in[i] = fgl_arg_tensor(t);
  }
  for (int j = 0; j < gi.n_results; j++) {
    fgl_result_info ri;
    FG(fgl_graph_result(g, j, &ri, &e_));
    if (ri.is_view)
      continue;
    bytes[j] = numel(ri.rank, ri.sizes) * (size_t)fgl_dtype_size(ri.dtype);
    fgl_devptr d;
    FG(fgl_malloc(m, bytes[j] ? bytes[j] : 1, &d, &e_));
    fgl_tensor_contiguous(&out[j], d, ri.dtype, ri.rank, ri.sizes);
    ref[j] = malloc(bytes[j] + 1);
    if (!ref[j])
      return 1;
  }
  FG(fgl_run(g, in, gi.n_params, out, gi.n_results, NULL, &e_));
  FG(fgl_stream_sync(m, NULL, &e_));
  for (int j = 0; j < gi.n_results; j++)
    if (ref[j])
      FG(fgl_memcpy_dtoh(m, ref[j], out[j].ptr, bytes[j], &e_));

  size_t maxb = 1;
  for (int j = 0; j < gi.n_results; j++)
    if (bytes[j] > maxb)
      maxb = bytes[j];
  char *h = malloc(maxb);
  if (!h)
    return 1;
  int differ = 0;
  for (int r = 0; r < runs; r++) {
    for (int j = 0; j < gi.n_results; j++)
      if (ref[j])
        FG(fgl_memset(m, out[j].ptr, 0xFF, bytes[j], &e_));
    FG(fgl_run(g, in, gi.n_params, out, gi.n_results, NULL, &e_));
    FG(fgl_stream_sync(m, NULL, &e_));
    for (int j = 0; j < gi.n_results; j++) {
      if (!ref[j])
        continue;
      FG(fgl_memcpy_dtoh(m, h, out[j].ptr, bytes[j], &e_));
      if (memcmp(h, ref[j], bytes[j]) != 0) {
        if (differ < 5)
          printf("FAIL: run %d, result %d differs from the first run\n", r + 1, j);
        differ++;
      }
    }
  }

  CUstream s;
  CU(cu->cuStreamCreate(&s, 0));
  for (int j = 0; j < gi.n_results; j++)
    if (ref[j])
      FG(fgl_memset(m, out[j].ptr, 0xFF, bytes[j], &e_));
  FG(fgl_stream_sync(m, NULL, &e_));
  CUgraph cg;
  CUgraphExec ge;
  CU(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  fgl_error ce = {0};
  fgl_status cr = fgl_run(g, in, gi.n_params, out, gi.n_results, s, &ce);
  CU(cu->cuStreamEndCapture(s, &cg));
  if (cr != FGL_OK) {
    printf("FAIL: fgl_run under capture: %s\n", ce.msg);
    return 1;
  }
  CU(cu->cuGraphInstantiateWithFlags(&ge, cg, 0));
  for (int i = 0; i < 10; i++)
    CU(cu->cuGraphLaunch(ge, s));
  CU(cu->cuStreamSynchronize(s));
  int graph_differ = 0;
  for (int j = 0; j < gi.n_results; j++) {
    if (!ref[j])
      continue;
    FG(fgl_memcpy_dtoh(m, h, out[j].ptr, bytes[j], &e_));
    if (memcmp(h, ref[j], bytes[j]) != 0)
      graph_differ++;
  }
  printf("repeat %s: %d runs bitwise identical to the first: %s; CUDA graph x10: %s\n", gi.name,
         runs, differ ? "NO" : "yes", graph_differ ? "NO" : "yes");
  CU(cu->cuGraphExecDestroy(ge));
  CU(cu->cuGraphDestroy(cg));
  CU(cu->cuStreamDestroy(s));
  for (int i = 0; i < gi.n_params; i++)
    if (!in[i].is_scalar)
      fgl_free(m, in[i].tensor.ptr, NULL);
  for (int j = 0; j < gi.n_results; j++) {
    if (ref[j])
      fgl_free(m, out[j].ptr, NULL);
    free(ref[j]);
  }
  free(h);
  free(in);
  free(out);
  free(ref);
  free(bytes);
  fgl_graph_free(g, NULL);
  fgl_module_free(m, NULL);
  return differ || graph_differ ? 1 : 0;
}
