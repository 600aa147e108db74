/* GPU test of run-to-run reproducibility (ctest label "gpu"; exit 77 =
 * skipped when there is no CUDA driver or GPU).
 * Usage: gpu_repeat_test ARTIFACT GRAPH [RUNS [SIZES]]
 *
 * Random inputs (fixed seed), one reference run, then RUNS more runs on
 * the same inputs, each into outputs poisoned with 0xFF first: every
 * written result must be bitwise identical to the reference. Then one run
 * captured into a CUDA graph and replayed 10 times must match too (the
 * grid reductions' counters must be reset by each run). Exit 0 when all
 * match, 1 otherwise.
 *
 * SIZES (a graph with one sym, e.g. 384,16384,1000): each size's results
 * from a graph instance of its own are the references; then one instance
 * runs RUNS times with the size changing every run, and a capture at the
 * first size is replayed between direct runs at the others. Every result
 * must match its size's reference bitwise: a row + column kernel whose grid
 * follows the size (emit_rowcol.c) keeps its arrival counter right when
 * the grid changes between runs and replays. */
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

enum { MAX_SIZES = 8 };

/* One fgl_run of g captured on stream s into a CUDA graph, instantiated;
 * exits with FAIL when the run is refused under capture. */
static CUgraphExec capture(const fgl_cuda_api *cu, fgl_graph *g, const fgl_graph_info *gi,
                           const fgl_arg *in, fgl_tensor *out, CUstream s, CUgraph *cg) {
  CUgraphExec ge;
  CU(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  fgl_error ce = {0};
  fgl_status cr = fgl_run(g, in, gi->n_params, out, gi->n_results, s, &ce);
  CU(cu->cuStreamEndCapture(s, cg));
  if (cr != FGL_OK) {
    printf("FAIL: fgl_run under capture: %s\n", ce.msg);
    exit(1);
  }
  CU(cu->cuGraphInstantiateWithFlags(&ge, *cg, 0));
  return ge;
}

/* The inputs at size v of the one sym over buffers for the largest. */
static void inputs_at(fgl_graph *g, const fgl_graph_info *gi, fgl_arg *in, int64_t v) {
  for (int i = 0; i < gi->n_params; i++) {
    fgl_param_info pi;
    FG(fgl_graph_param(g, i, &pi, &e_));
    if (pi.is_scalar)
      continue;
    int64_t sz[FGL_MAX_RANK];
    for (int d = 0; d < pi.rank; d++)
      sz[d] = pi.sym[d] >= 0 ? v : pi.sizes[d];
    fgl_tensor_contiguous(&in[i].tensor, in[i].tensor.ptr, pi.dtype, pi.rank, sz);
  }
}

/* out[j] at these inputs' sizes (storage allocated for the largest), its bytes. */
static size_t outputs_at(fgl_graph *g, const fgl_graph_info *gi, const fgl_arg *in,
                         fgl_tensor *out) {
  size_t total = 0;
  for (int j = 0; j < gi->n_results; j++) {
    fgl_result_info ri;
    FG(fgl_graph_result_shape(g, in, gi->n_params, j, &ri, &e_));
    if (ri.is_view)
      continue;
    fgl_tensor_contiguous(&out[j], out[j].ptr, ri.dtype, ri.rank, ri.sizes);
    total += numel(ri.rank, ri.sizes) * (size_t)fgl_dtype_size(ri.dtype);
  }
  return total;
}

static size_t tensor_bytes(const fgl_tensor *t) {
  return numel(t->rank, t->sizes) * (size_t)fgl_dtype_size(t->dtype);
}

/* Runs g at size v into out (poisoned first); compares with want (or
 * fills it when want_fill). Returns the number of results that differ. */
static int run_at(fgl_module *m, fgl_graph *g, const fgl_graph_info *gi, fgl_arg *in,
                  fgl_tensor *out, int64_t v, char **want, int want_fill, fgl_stream s) {
  inputs_at(g, gi, in, v);
  outputs_at(g, gi, in, out);
  for (int j = 0; j < gi->n_results; j++)
    if (out[j].ptr)
      FG(fgl_memset(m, out[j].ptr, 0xFF, tensor_bytes(&out[j]), &e_));
  FG(fgl_run(g, in, gi->n_params, out, gi->n_results, s, &e_));
  FG(fgl_stream_sync(m, s, &e_));
  int bad = 0;
  for (int j = 0; j < gi->n_results; j++) {
    if (!out[j].ptr)
      continue;
    size_t b = tensor_bytes(&out[j]);
    char *h = malloc(b + 1);
    if (!h)
      exit(1);
    FG(fgl_memcpy_dtoh(m, h, out[j].ptr, b, &e_));
    if (want_fill) {
      want[j] = h;
      continue;
    }
    bad += memcmp(h, want[j], b) != 0;
    free(h);
  }
  return bad;
}

static int alternate(const char *artifact, const char *graph, int runs, const char *list) {
  int64_t sizes[MAX_SIZES], vmax = 0;
  int n = 0;
  for (const char *p = list; *p && n < MAX_SIZES; n++) {
    char *end;
    sizes[n] = strtoll(p, &end, 10);
    if (end == p || sizes[n] < 1) {
      fprintf(stderr, "gpu_repeat_test: bad SIZES '%s'\n", list);
      return 2;
    }
    vmax = sizes[n] > vmax ? sizes[n] : vmax;
    p = *end == ',' ? end + 1 : end;
  }
  fgl_module *m;
  fgl_graph *g;
  fgl_graph_info gi;
  FG(fgl_module_load_file(artifact, NULL, &m, &e_));
  FG(fgl_graph_create(m, graph, &g, &e_));
  FG(fgl_graph_get_info(g, &gi, &e_));
  fgl_arg *in = calloc((size_t)gi.n_params + 1, sizeof *in);
  fgl_tensor *out = calloc((size_t)gi.n_results + 1, sizeof *out);
  char **want = calloc((size_t)(gi.n_results + 1) * MAX_SIZES, sizeof *want);
  if (!in || !out || !want)
    return 1;
  for (int i = 0; i < gi.n_params; i++) {
    fgl_param_info pi;
    FG(fgl_graph_param(g, i, &pi, &e_));
    if (pi.is_scalar) {
      in[i] =
          fgl_dtype_is_float(pi.dtype) ? fgl_arg_float(pi.dtype, 0.75) : fgl_arg_int(pi.dtype, 3);
      continue;
    }
    int64_t sz[FGL_MAX_RANK];
    for (int d = 0; d < pi.rank; d++)
      sz[d] = pi.sym[d] >= 0 ? vmax : pi.sizes[d];
    size_t cnt = numel(pi.rank, sz), b = cnt * (size_t)fgl_dtype_size(pi.dtype);
    void *h = malloc(b ? b : 1);
    if (!h)
      return 1;
    fill(h, pi.dtype, cnt);
    fgl_devptr d;
    FG(fgl_malloc(m, b ? b : 1, &d, &e_));
    FG(fgl_memcpy_htod(m, d, h, b, &e_));
    free(h);
    fgl_tensor t;
    fgl_tensor_contiguous(&t, d, pi.dtype, pi.rank, sz);
    in[i] = fgl_arg_tensor(t);
  }
  inputs_at(g, &gi, in, vmax);
  outputs_at(g, &gi, in, out);
  for (int j = 0; j < gi.n_results; j++) {
    fgl_result_info ri;
    FG(fgl_graph_result(g, j, &ri, &e_));
    if (ri.is_view) {
      out[j].ptr = 0;
      continue;
    }
    fgl_devptr d;
    size_t b = tensor_bytes(&out[j]);
    FG(fgl_malloc(m, b ? b : 1, &d, &e_));
    out[j].ptr = d;
  }
  /* references: a fresh instance a size */
  for (int k = 0; k < n; k++) {
    fgl_graph *fresh;
    FG(fgl_graph_create(m, graph, &fresh, &e_));
    run_at(m, fresh, &gi, in, out, sizes[k], want + k * gi.n_results, 1, NULL);
    FG(fgl_graph_free(fresh, &e_));
  }
  int differ = 0, replay_differ = 0;
  for (int r = 0; r < runs; r++) {
    int k = r % n;
    int bad = run_at(m, g, &gi, in, out, sizes[k], want + k * gi.n_results, 0, NULL);
    if (bad && differ < 5)
      printf("FAIL: run %d at size %lld: %d result(s) differ from that size's reference\n", r + 1,
             (long long)sizes[k], bad);
    differ += bad;
  }
  /* a capture at sizes[0], replayed between direct runs at the others */
  const fgl_cuda_api *cu = gpu_test_driver();
  CUstream s;
  CU(cu->cuStreamCreate(&s, 0));
  inputs_at(g, &gi, in, vmax); /* temps at the largest size: none grows under the capture */
  FG(fgl_graph_reserve(g, in, gi.n_params, NULL, &e_));
  inputs_at(g, &gi, in, sizes[0]);
  outputs_at(g, &gi, in, out);
  CUgraph cg;
  CUgraphExec ge = capture(cu, g, &gi, in, out, s, &cg);
  for (int r = 0; r < 2 * n; r++) {
    int k = r % n;
    if (k == 0) {
      for (int j = 0; j < gi.n_results; j++)
        if (out[j].ptr)
          FG(fgl_memset(m, out[j].ptr, 0xFF, tensor_bytes(&out[j]), &e_));
      FG(fgl_stream_sync(m, NULL, &e_));
      CU(cu->cuGraphLaunch(ge, s));
      CU(cu->cuStreamSynchronize(s));
      for (int j = 0; j < gi.n_results; j++) {
        if (!out[j].ptr)
          continue;
        size_t b = tensor_bytes(&out[j]);
        char *h = malloc(b + 1);
        if (!h)
          return 1;
        FG(fgl_memcpy_dtoh(m, h, out[j].ptr, b, &e_));
        replay_differ += memcmp(h, want[j], b) != 0;
        free(h);
      }
    } else {
      replay_differ += run_at(m, g, &gi, in, out, sizes[k], want + k * gi.n_results, 0, s);
      inputs_at(g, &gi, in, sizes[0]); /* the capture's shapes, for the next replay's check */
      outputs_at(g, &gi, in, out);
    }
  }
  printf("repeat %s: %d runs with the size alternating over %s, bitwise identical to each "
         "size's reference: %s; CUDA graph replays between them: %s\n",
         gi.name, runs, list, differ ? "NO" : "yes", replay_differ ? "NO" : "yes");
  CU(cu->cuGraphExecDestroy(ge));
  CU(cu->cuGraphDestroy(cg));
  CU(cu->cuStreamDestroy(s));
  for (int k = 0; k < n * gi.n_results; k++)
    free(want[k]);
  free(want);
  free(in);
  free(out);
  fgl_graph_free(g, NULL);
  fgl_module_free(m, NULL);
  return differ || replay_differ ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gpu_repeat_test ARTIFACT GRAPH [RUNS [SIZES]]\n");
    return 2;
  }
  int runs = argc > 3 ? atoi(argv[3]) : 100;
  if (argc > 4) {
    const fgl_cuda_api *cu = gpu_test_driver();
    CUdevice dev;
    CUcontext ctx;
    CU(cu->cuDeviceGet(&dev, 0));
    CU(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cu->cuCtxSetCurrent(ctx));
    return alternate(argv[1], argv[2], runs, argv[4]);
  }
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
  CUgraphExec ge = capture(cu, g, &gi, in, out, s, &cg);
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
