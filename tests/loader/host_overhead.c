/* Host time of fgl_run over a bare cuLaunchKernel of the same kernel, for a
 * graph without syms (add.ptx's axpy) and one with (sym.ptx's axpy_n, with
 * the same N at every call, then two N in turn): the method of
 * gpu_loader_test's section 3 (medians of CALLS calls, the stream
 * synchronized every 200, a first round discarded as warm-up), on any
 * driver. On the fake driver (device "Fake GPU") the calls are made inside
 * a stream capture, where it records launches without running them, so the
 * figures are the loader's own host time on this CPU. The binding's cost is
 * the symbolic graph's overhead minus the constant graph's. Then axpy with
 * a second kernel on a second stream (tl_add_with_stream: plan version 4,
 * kernel-stream), whose fgl_run forks and joins that stream: its overhead
 * over two bare launches, minus axpy's, is the fork and join's host cost
 * (two event records, two stream waits). Last, the same two kernels on one
 * stream, the second with a kernel-pdl line (tl_add_with_pdl: plan version
 * 5), launched by cuLaunchKernelEx with programmatic stream serialization:
 * its overhead over two bare launches, minus axpy's, is what that launch
 * costs over cuLaunchKernel.
 *   host_overhead ADD.ptx SYM.ptx [CALLS]   (default 10000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_api.h"
#include "fgload.h"
#include "gpu_test.h"
#include "host_timing.h"
#include "tl_text.h"

#define N 1048576
static const fgl_cuda_api *cu;
static int calls = 10000;

#define FG(call)                                                                                   \
  do {                                                                                             \
    fgl_error e_ = {0};                                                                            \
    if ((call) != FGL_OK) {                                                                        \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, e_.msg);                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* A kernel of the artifact at path, loaded directly. */
static CUfunction bare_function(const char *path, const char *entry, CUmodule *mod) {
  *mod = load_bare(cu, path);
  CUfunction fn;
  CU(cu->cuModuleGetFunction(&fn, *mod, entry));
  return fn;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ADD.ptx SYM.ptx [CALLS]\n", argv[0]);
    return 2;
  }
  if (argc > 3)
    calls = atoi(argv[3]);
  if (calls < 2) {
    fprintf(stderr, "CALLS must be at least 2\n");
    return 2;
  }
  cu = gpu_test_driver();
  CUdevice dev;
  CUcontext ctx;
  CU(cu->cuDeviceGet(&dev, 0));
  CU(cu->cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cu->cuCtxSetCurrent(ctx));
  fgl_module *ma, *ms;
  FG(fgl_module_load_file(argv[1], NULL, &ma, &e_));
  FG(fgl_module_load_file(argv[2], NULL, &ms, &e_));
  fgl_device_info di;
  FG(fgl_module_device_info(ma, &di, &e_));
  int fake = !strcmp(di.name, "Fake GPU");
  fgl_graph *ga, *gs, *g2;
  FG(fgl_graph_create(ma, "axpy", &ga, &e_));
  FG(fgl_graph_create(ms, "axpy_n", &gs, &e_));
  char *add = tl_read_file(argv[1], NULL);
  if (!add) {
    printf("FAIL: cannot read %s\n", argv[1]);
    return 1;
  }
  char *two = tl_add_with_stream(add);
  fgl_module *m2;
  FG(fgl_module_load_data(two, strlen(two), NULL, &m2, &e_));
  FG(fgl_graph_create(m2, "axpy", &g2, &e_));
  char *pdl = tl_add_with_pdl(add);
  fgl_module *mp;
  fgl_graph *gp;
  FG(fgl_module_load_data(pdl, strlen(pdl), NULL, &mp, &e_));
  FG(fgl_graph_create(mp, "axpy", &gp, &e_));
  CUdeviceptr x, y, o, o2, tmp;
  FG(fgl_malloc(ma, N * 4, &x, &e_));
  FG(fgl_malloc(ma, N * 4, &y, &e_));
  FG(fgl_malloc(ma, N * 4, &o, &e_));
  FG(fgl_malloc(ma, N * 4, &o2, &e_));
  FG(fgl_malloc(ma, 4096, &tmp, &e_));
  FG(fgl_memset(ma, x, 0, N * 4, &e_));
  FG(fgl_memset(ma, y, 0, N * 4, &e_));
  FG(fgl_memset(ma, tmp, 0, 4096, &e_));
  int64_t big = N, alt = N - 4;
  fgl_tensor t;
  fgl_arg in[3], in_alt[3];
  fgl_tensor_contiguous(&t, x, FGL_F32, 1, &big);
  in[0] = fgl_arg_tensor(t);
  fgl_tensor_contiguous(&t, y, FGL_F32, 1, &big);
  in[1] = fgl_arg_tensor(t);
  in[2] = fgl_arg_float(FGL_F32, 0.75);
  memcpy(in_alt, in, sizeof in);
  in_alt[0].tensor.sizes[0] = in_alt[1].tensor.sizes[0] = alt;
  fgl_tensor out[4], out_alt[3];
  memset(out, 0, sizeof out);
  memset(out_alt, 0, sizeof out_alt);
  fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &big);
  fgl_tensor_contiguous(&out[3], o2, FGL_F32, 1, &big);
  fgl_tensor_contiguous(&out_alt[0], o, FGL_F32, 1, &alt);
  FG(fgl_graph_reserve(gs, in, 3, NULL, &e_));

  CUstream s;
  CU(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (fake)
    CU(cu->cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUmodule bma, bms;
  CUfunction fa = bare_function(argv[1], "fg_axpy_k0_v4", &bma),
             fs = bare_function(argv[2], "fg_axpy_n_v4", &bms);
  double alpha = 0.75;
  long long n = N;
  void *pa[5] = {&x, &y, &alpha, &o, &tmp}, *ps[6] = {&x, &y, &alpha, &o, &tmp, &n};
  timed ta = {fa, pa, 1024, ga, in, NULL, 3, 3, out, NULL};
  timed ts = {fs, ps, 1024, gs, in, NULL, 3, 2, out, NULL};
  timed tt = {fs, ps, 1024, gs, in, in_alt, 3, 2, out, out_alt};
  timed t2 = {fa, pa, 1024, g2, in, NULL, 3, 4, out, NULL};
  timed tp = {fa, pa, 1024, gp, in, NULL, 3, 4, out, NULL};
  double a_bare, a_run, s_bare, s_run, t_bare, t_run, d_bare, d_run, p_bare, p_run;
  time_pair(cu, &ta, s, calls, &a_bare, &a_run);
  time_pair(cu, &ts, s, calls, &s_bare, &s_run);
  time_pair(cu, &tt, s, calls, &t_bare, &t_run);
  time_pair(cu, &t2, s, calls, &d_bare, &d_run);
  time_pair(cu, &tp, s, calls, &p_bare, &p_run);
  if (fake) {
    CUgraph cg;
    CU(cu->cuStreamEndCapture(s, &cg));
    CU(cu->cuGraphDestroy(cg));
  }
  printf("host time per call on %s (median of %d, after a warm-up round)%s\n", di.name, calls,
         fake ? ", launches recorded by the fake driver, not run" : "");
  printf("| graph                                | bare launch | fgl_run  | overhead |\n");
  printf("|--------------------------------------|-------------|----------|----------|\n");
  printf("| axpy, no syms                        | %8.3f us | %6.3f us | %6.3f us |\n", a_bare,
         a_run, a_run - a_bare);
  printf("| axpy_n, syms: same N each call       | %8.3f us | %6.3f us | %6.3f us |\n", s_bare,
         s_run, s_run - s_bare);
  printf("| axpy_n, syms: N alternating          | %8.3f us | %6.3f us | %6.3f us |\n", t_bare,
         t_run, t_run - t_bare);
  printf("| axpy + a kernel on a second stream   | %8.3f us | %6.3f us | %6.3f us |\n", 2 * d_bare,
         d_run, d_run - 2 * d_bare);
  printf("| axpy + a programmatic launch after it| %8.3f us | %6.3f us | %6.3f us |\n", 2 * p_bare,
         p_run, p_run - 2 * p_bare);
  printf("binding cost (overhead minus axpy's): same N %.3f us, N alternating %.3f us (target "
         "<= 0.3 us)\n",
         (s_run - s_bare) - (a_run - a_bare), (t_run - t_bare) - (a_run - a_bare));
  printf("second stream's fork and join (overhead over two bare launches minus axpy's): %.3f us\n",
         (d_run - 2 * d_bare) - (a_run - a_bare));
  printf("programmatic launch (overhead over two bare launches minus axpy's): %.3f us\n",
         (p_run - 2 * p_bare) - (a_run - a_bare));
  CU(cu->cuModuleUnload(bma));
  CU(cu->cuModuleUnload(bms));
  CU(cu->cuStreamDestroy(s));
  fgl_free(ma, x, NULL);
  fgl_free(ma, y, NULL);
  fgl_free(ma, o, NULL);
  fgl_free(ma, o2, NULL);
  fgl_free(ma, tmp, NULL);
  fgl_graph_free(ga, NULL);
  fgl_graph_free(gs, NULL);
  fgl_graph_free(g2, NULL);
  fgl_module_free(m2, NULL);
  fgl_graph_free(gp, NULL);
  fgl_module_free(mp, NULL);
  free(pdl);
  free(two);
  free(add);
  fgl_module_free(ma, NULL);
  fgl_module_free(ms, NULL);
  return 0;
}
