/* How the driver's JIT compiles one PTX file, three ways: cuLink as
 * libfgload does (relocatable, `ptxas -c`), cuLink with
 * CU_JIT_POSITION_INDEPENDENT_CODE = 0, and cuModuleLoadDataEx on the PTX.
 * For each way: the compile's wall time, then each kernel's registers and
 * local memory (cuFuncGetAttribute) and the info log's lines that say
 * "serialized" or "Used". A GPU-machine probe (docs/loader.md, "Cubin
 * cache"); build: cc -O2 -o jit_modes tests/gpu/jit_modes.c -ldl
 *   jit_modes FILE.ptx...                                                  */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../loader/tl_text.h"

typedef int CUresult;
typedef void *H;
#define LOGN (1 << 20)

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(H *, int);
static CUresult (*cuCtxSetCurrent)(H);
static CUresult (*cuLinkCreate)(unsigned, int *, void **, H *);
static CUresult (*cuLinkAddData)(H, int, void *, size_t, const char *, unsigned, int *, void **);
static CUresult (*cuLinkComplete)(H, void **, size_t *);
static CUresult (*cuLinkDestroy)(H);
static CUresult (*cuModuleLoadData)(H *, const void *);
static CUresult (*cuModuleLoadDataEx)(H *, const void *, unsigned, int *, void **);
static CUresult (*cuModuleUnload)(H);
static CUresult (*cuModuleGetFunction)(H *, H, const char *);
static CUresult (*cuFuncGetAttribute)(int *, int, H);

enum { INFO_LOG = 3, INFO_LOG_SIZE = 4, ERR_LOG = 5, ERR_LOG_SIZE = 6, LOG_VERBOSE = 12, PIC = 30 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void report(const char *way, double secs, H mod, const char *ptx, const char *log) {
  printf("  %-22s %8.1f ms\n", way, secs * 1e3);
  for (const char *p = ptx; (p = strstr(p, ".entry ")); p += 7) {
    char name[256];
    if (sscanf(p + 7, "%255[A-Za-z0-9_$]", name) != 1)
      continue;
    H f;
    int regs = -1, local = -1;
    if (cuModuleGetFunction(&f, mod, name) == 0) {
      cuFuncGetAttribute(&regs, 4, f);
      cuFuncGetAttribute(&local, 3, f);
    }
    printf("    %-40s regs %3d local %d\n", name, regs, local);
  }
  for (const char *l = log; *l;) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) : strlen(l);
    if (memmem(l, n, "erializ", 7))
      printf("    log: %.*s\n", (int)n, l);
    l += n + (e != NULL);
  }
}

int main(int argc, char **argv) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "jit_modes: no libcuda.so.1\n");
    return 2;
  }
#define L(f, s) *(void **)&f = dlsym(lib, s)
  L(cuInit, "cuInit");
  L(cuDeviceGet, "cuDeviceGet");
  L(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  L(cuCtxSetCurrent, "cuCtxSetCurrent");
  L(cuLinkCreate, "cuLinkCreate_v2");
  L(cuLinkAddData, "cuLinkAddData_v2");
  L(cuLinkComplete, "cuLinkComplete");
  L(cuLinkDestroy, "cuLinkDestroy");
  L(cuModuleLoadData, "cuModuleLoadData");
  L(cuModuleLoadDataEx, "cuModuleLoadDataEx");
  L(cuModuleUnload, "cuModuleUnload");
  L(cuModuleGetFunction, "cuModuleGetFunction");
  L(cuFuncGetAttribute, "cuFuncGetAttribute");
  int dev;
  H ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
      cuCtxSetCurrent(ctx)) {
    fprintf(stderr, "jit_modes: no CUDA context\n");
    return 2;
  }
  static char info[LOGN], elog[LOGN];
  for (int a = 1; a < argc; a++) {
    char *ptx = tl_read_file(argv[a], NULL);
    if (!ptx) {
      fprintf(stderr, "jit_modes: cannot read %s\n", argv[a]);
      return 2;
    }
    printf("%s\n", argv[a]);
    for (int way = 0; way < 3; way++) {
      info[0] = elog[0] = 0;
      int o[6] = {INFO_LOG, INFO_LOG_SIZE, ERR_LOG, ERR_LOG_SIZE, LOG_VERBOSE, PIC};
      void *v[6] = {info, (void *)(size_t)LOGN, elog, (void *)(size_t)LOGN, (void *)1, (void *)0};
      H mod = NULL;
      double t0 = now();
      CUresult r;
      if (way < 2) {
        H ls;
        r = cuLinkCreate(way == 0 ? 5 : 6, o, v, &ls);
        void *img = NULL;
        size_t n = 0;
        if (!r)
          r = cuLinkAddData(ls, 1, ptx, strlen(ptx) + 1, "x.ptx", 0, NULL, NULL);
        if (!r)
          r = cuLinkComplete(ls, &img, &n);
        if (!r)
          r = cuModuleLoadData(&mod, img);
        cuLinkDestroy(ls);
      } else {
        r = cuModuleLoadDataEx(&mod, ptx, 5, o, v);
      }
      double t = now() - t0;
      const char *way_name[3] = {"cuLink (libfgload)", "cuLink PIC=0", "cuModuleLoadDataEx"};
      if (r) {
        printf("  %-22s failed %d: %.400s\n", way_name[way], r, elog);
        continue;
      }
      report(way_name[way], t, mod, ptx, info);
      cuModuleUnload(mod);
    }
    free(ptx);
  }
  return 0;
}
