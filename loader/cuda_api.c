/* dlopen of libcuda.so.1 and the driver entry-point table. */
#include "cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fgl_cuda_api g_api;
static const fgl_cuda_api *g_ok;
static char g_msg[512];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load_once(void) {
  const char *lib = getenv("FGL_LIBCUDA");
  if (!lib || !*lib)
    lib = "libcuda.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(g_msg, sizeof g_msg, "no CUDA driver: cannot load %s (%s)", lib, e ? e : "?");
    return;
  }
  struct {
    const char *name;
    void **slot;
  } syms[] = {
#define S(field, sym) {sym, (void **)&g_api.field}
      S(cuInit, "cuInit"),
      S(cuDriverGetVersion, "cuDriverGetVersion"),
      S(cuDeviceGetCount, "cuDeviceGetCount"),
      S(cuDeviceGet, "cuDeviceGet"),
      S(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
      S(cuDeviceGetName, "cuDeviceGetName"),
      S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
      S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
      S(cuCtxGetCurrent, "cuCtxGetCurrent"),
      S(cuCtxSetCurrent, "cuCtxSetCurrent"),
      S(cuCtxPushCurrent, "cuCtxPushCurrent_v2"),
      S(cuCtxPopCurrent, "cuCtxPopCurrent_v2"),
      S(cuCtxGetDevice, "cuCtxGetDevice"),
      S(cuModuleLoadData, "cuModuleLoadData"),
      S(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
      S(cuModuleUnload, "cuModuleUnload"),
      S(cuModuleGetFunction, "cuModuleGetFunction"),
      S(cuFuncSetAttribute, "cuFuncSetAttribute"),
      S(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
      S(cuLinkCreate, "cuLinkCreate_v2"),
      S(cuLinkAddData, "cuLinkAddData_v2"),
      S(cuLinkComplete, "cuLinkComplete"),
      S(cuLinkDestroy, "cuLinkDestroy"),
      S(cuLaunchKernel, "cuLaunchKernel"),
      S(cuMemAlloc, "cuMemAlloc_v2"),
      S(cuMemFree, "cuMemFree_v2"),
      S(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
      S(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
      S(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
      S(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
      S(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
      S(cuMemsetD8, "cuMemsetD8_v2"),
      S(cuMemsetD8Async, "cuMemsetD8Async"),
      S(cuStreamCreate, "cuStreamCreate"),
      S(cuStreamDestroy, "cuStreamDestroy_v2"),
      S(cuStreamSynchronize, "cuStreamSynchronize"),
      S(cuStreamWaitEvent, "cuStreamWaitEvent"),
      S(cuEventCreate, "cuEventCreate"),
      S(cuEventRecord, "cuEventRecord"),
      S(cuEventSynchronize, "cuEventSynchronize"),
      S(cuEventElapsedTime, "cuEventElapsedTime"),
      S(cuEventDestroy, "cuEventDestroy_v2"),
      S(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
      S(cuStreamEndCapture, "cuStreamEndCapture"),
      S(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
      S(cuGraphLaunch, "cuGraphLaunch"),
      S(cuGraphExecDestroy, "cuGraphExecDestroy"),
      S(cuGraphDestroy, "cuGraphDestroy"),
      S(cuGetErrorName, "cuGetErrorName"),
      S(cuGetErrorString, "cuGetErrorString"),
#undef S
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *p = dlsym(h, syms[i].name);
    if (!p) {
      snprintf(g_msg, sizeof g_msg, "CUDA driver %s lacks %s (driver too old?)", lib, syms[i].name);
      dlclose(h);
      return;
    }
    *syms[i].slot = p;
  }
  /* optional: drivers before CUDA 12 have no clusters */
  *(void **)&g_api.cuOccupancyMaxActiveClusters = dlsym(h, "cuOccupancyMaxActiveClusters");
  /* optional: drivers before CUDA 12 have no cuLaunchKernelEx (and no
   * programmatic launch) */
  *(void **)&g_api.cuLaunchKernelEx = dlsym(h, "cuLaunchKernelEx");
  /* optional: drivers before CUDA 11.2 have no stream-ordered allocator */
  *(void **)&g_api.cuMemAllocAsync = dlsym(h, "cuMemAllocAsync");
  *(void **)&g_api.cuMemFreeAsync = dlsym(h, "cuMemFreeAsync");
  CUresult r = g_api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    char t[160];
    snprintf(g_msg, sizeof g_msg, "cuInit failed: %s%s", fgl_cuda_error_text(r, t, sizeof t),
             r == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : "");
    return; /* keep the library loaded: the table stays valid for error names */
  }
  g_ok = &g_api;
}

const fgl_cuda_api *fgl_cuda(char *msg, size_t msglen) {
  pthread_once(&g_once, load_once);
  if (!g_ok && msg && msglen)
    snprintf(msg, msglen, "%s", g_msg);
  return g_ok;
}

const char *fgl_cuda_error_text(CUresult r, char *buf, size_t buflen) {
  const char *name = NULL, *str = NULL;
  if (g_api.cuGetErrorName)
    g_api.cuGetErrorName(r, &name);
  if (g_api.cuGetErrorString)
    g_api.cuGetErrorString(r, &str);
  if (name && str)
    snprintf(buf, buflen, "%s (%s)", name, str);
  else
    snprintf(buf, buflen, "CUresult %d", r);
  return buf;
}
