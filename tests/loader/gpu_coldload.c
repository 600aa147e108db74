/* The first load of an artifact in a fresh process, as a deployed service
 * pays it (docs/loader.md, "Cold load: PTX JIT or SASS"): the CUDA context
 * is created first and not counted; then fgl_module_load_file and one
 * instance of every graph (which looks its kernels up: with the driver's
 * lazy loading, when they are really loaded). The driver's JIT cache and
 * libfgload's cubin cache are off, so an artifact without SASS for this
 * GPU is JIT-compiled every time.
 *   gpu_coldload ARTIFACT [LABEL]
 * prints one line:
 *   coldload LABEL source jit|cache|sass total_ms T load_ms L create_ms C graphs N
 * Exit 77 without a GPU (skipped), 1 when the load or an instance fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fgload.h"
#include "gpu_test.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gpu_coldload ARTIFACT [LABEL]\n");
    return 2;
  }
  setenv("CUDA_CACHE_DISABLE", "1", 1); /* before the driver starts */
  const fgl_cuda_api *cu = gpu_test_driver();
  CUdevice dev;
  CUcontext ctx;
  CU(cu->cuDeviceGet(&dev, 0));
  CU(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu->cuCtxSetCurrent(ctx));
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.cache = 0;
  fgl_module *m;
  fgl_error e;
  double t0 = now_ms();
  if (fgl_module_load_file(argv[1], &o, &m, &e) != FGL_OK) {
    printf("FAIL %s: %s\n", argv[1], e.msg);
    return 1;
  }
  double t1 = now_ms();
  int n = 0;
  fgl_module_num_graphs(m, &n, NULL);
  for (int i = 0; i < n; i++) {
    fgl_graph_info gi;
    fgl_graph *g;
    if (fgl_module_graph_at(m, i, &gi, &e) != FGL_OK || fgl_graph_create(m, gi.name, &g, &e)) {
      printf("FAIL %s graph %d: %s\n", argv[1], i, e.msg);
      return 1;
    }
    fgl_graph_free(g, NULL);
  }
  double t2 = now_ms();
  fgl_load_source src = FGL_LOAD_JIT;
  fgl_module_load_source(m, &src, NULL);
  static const char *const names[] = {"jit", "cache", "sass"};
  printf("coldload %s source %s total_ms %.2f load_ms %.2f create_ms %.2f graphs %d\n",
         argc > 2 ? argv[2] : argv[1], names[src], t2 - t0, t1 - t0, t2 - t1, n);
  fgl_module_free(m, NULL);
  cu->cuDevicePrimaryCtxRelease(dev);
  return 0;
}
