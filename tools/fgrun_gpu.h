/* fgrun's GPU path (fgrun_gpu.c): runs a compiled artifact through
 * libfgload's public API only. */
#ifndef FGRUN_GPU_H
#define FGRUN_GPU_H
#include <stdbool.h>
#include <stdint.h>

typedef struct fgrun_gpu_opts {
  const char *artifact; /* MODEL.ptx */
  const char *graph;    /* NULL: the artifact's only graph */
  const char *inputs;   /* comma-separated .npy paths, or NULL (generate) */
  const char *out_dir;  /* NULL: print summaries */
  const char *check;    /* MODEL.fg, or NULL */
  uint64_t seed;
  long bench;   /* 0: off */
  int misalign; /* tensors one element past a 16-byte boundary */
  int ndims;    /* --dim NAME=VALUE: values of the artifact's syms */
  const char *const *dim_names;
  const int64_t *dim_values;
  bool int_range; /* --int-range LO:HI: integer inputs uniform over it */
  int64_t int_lo, int_hi;
} fgrun_gpu_opts;

/* Returns fgrun's exit status: 0 ok, 1 input error or mismatch, 2 usage. */
int fgrun_run_artifact(const fgrun_gpu_opts *o);

#endif
