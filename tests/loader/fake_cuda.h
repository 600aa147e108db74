/* What the fake driver (fake_cuda.c) and the tests that read its launch
 * log (fake_cuda_launch) share. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

typedef struct fake_launch {
  char entry[128];
  unsigned grid[3], block[3], smem;
  int nargs;
  unsigned long long args[16];
  int stream; /* the stream's id: 1, 2, ... in creation order, 0 the NULL stream */
  int pdl;    /* launched by cuLaunchKernelEx with programmatic stream serialization */
} fake_launch;

#endif
