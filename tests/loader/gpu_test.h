/* Shared by the GPU tests of libfgload: a failed driver call ends the test
 * with the call, its place and the driver's message. */
#ifndef FGL_GPU_TEST_H
#define FGL_GPU_TEST_H
#include <stdio.h>
#include <stdlib.h>

#include "cuda_api.h"

#define CU(call)                                                                       \
  do {                                                                                 \
    CUresult r_ = (call);                                                              \
    if (r_ != CUDA_SUCCESS) {                                                          \
      char t_[200];                                                                    \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call,                        \
             fgl_cuda_error_text(r_, t_, sizeof t_));                                  \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

#endif
