/* Shared by the GPU tests of libfgload: a failed driver call ends the test
 * with the call, its place and the driver's message. */
#ifndef FGL_GPU_TEST_H
#define FGL_GPU_TEST_H
#include <stdio.h>
#include <stdlib.h>

#include "cuda_api.h"

#define CU(call)                                                                                   \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      char t_[200];                                                                                \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                                    \
             fgl_cuda_error_text(r_, t_, sizeof t_));                                              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* The driver API, or exit 77 (ctest's "skipped") when there is no driver
 * or no GPU, saying so. */
static inline const fgl_cuda_api *gpu_test_driver(void) {
  char msg[512];
  const fgl_cuda_api *cu = fgl_cuda(msg, sizeof msg);
  int ndev = 0;
  if (!cu || cu->cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev == 0) {
    printf("skipped: no CUDA driver/GPU (%s)\n", cu ? "no device" : msg);
    exit(77);
  }
  return cu;
}

#endif
