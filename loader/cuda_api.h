/* The slice of the CUDA driver API libfgload uses, loaded with dlopen so that
 * nothing links against libcuda and the loader builds without cuda.h. The
 * types and constants below are copied from the driver's ABI. */
#ifndef FGL_CUDA_API_H
#define FGL_CUDA_API_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUjit_option;
typedef int CUjitInputType;

/* One launch attribute: the id, padded to 8 bytes, then a 64-byte union
 * of which fusec sets only programmaticStreamSerializationAllowed (an
 * unsigned int at its start). */
typedef struct CUlaunchAttribute_st {
  int id;
  char pad[4];
  union {
    char pad[64];
    unsigned programmaticStreamSerializationAllowed;
  } value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs; /* a kernel's cluster shape is in its PTX, not here */
  unsigned numAttrs;
} CUlaunchConfig;

#define CUDA_SUCCESS 0
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define CUDA_ERROR_NO_DEVICE 100
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_JIT_INFO_LOG_BUFFER 3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define CU_JIT_OPTIMIZATION_LEVEL 7
#define CU_JIT_INPUT_PTX 1
#define CU_STREAM_NON_BLOCKING 1
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define CU_EVENT_DEFAULT 0
#define CU_EVENT_DISABLE_TIMING 2

typedef struct fgl_cuda_api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice); /* _v2 */
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxPushCurrent)(CUcontext);  /* _v2 */
  CUresult (*cuCtxPopCurrent)(CUcontext *); /* _v2 */
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
  CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction,
                                           const CUlaunchConfig *); /* NULL before CUDA 12 */
  CUresult (*cuLinkCreate)(unsigned, CUjit_option *, void **, CUlinkState *); /* _v2 */
  CUresult (*cuLinkAddData)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                            CUjit_option *, void **); /* _v2 */
  CUresult (*cuLinkComplete)(CUlinkState, void **, size_t *);
  CUresult (*cuLinkDestroy)(CUlinkState);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  /* NULL before CUDA 12: kernels are then launched without attributes */
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);                              /* _v2 */
  CUresult (*cuMemFree)(CUdeviceptr);                                         /* _v2 */
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);                /* _v2 */
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);                      /* _v2 */
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream); /* _v2 */
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);       /* _v2 */
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);  /* _v2 */
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);                 /* _v2 */
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  /* stream-ordered allocation (symbolic temps); NULL before CUDA 11.2 */
  CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream); /* _v2 */
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);             /* _v2 */
  CUresult (*cuStreamBeginCapture)(CUstream, int); /* _v2 */
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
} fgl_cuda_api;

/* Loads libcuda.so.1 (or $FGL_LIBCUDA) once, resolves every entry point and
 * calls cuInit(0). Thread-safe. Returns the table, or NULL with a message in
 * msg (libcuda absent, a symbol missing, cuInit failed). */
const fgl_cuda_api *fgl_cuda(char *msg, size_t msglen);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for r, into buf. */
const char *fgl_cuda_error_text(CUresult r, char *buf, size_t buflen);

#endif
