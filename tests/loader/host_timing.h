/* Shared by the loader's host-time measurements (gpu_loader_test and
 * host_overhead): a bare cuLaunchKernel against fgl_run of the same
 * kernel, each timed on the host call by call, medians. */
#ifndef FGL_HOST_TIMING_H
#define FGL_HOST_TIMING_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_api.h"
#include "fgload.h"
#include "gpu_test.h"

static inline double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* An artifact's PTX loaded directly, for the bare launches (the fake
 * driver takes "FAKECUBIN\n" + text for a cubin). */
static inline CUmodule load_bare(const fgl_cuda_api *cu, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("FAIL: cannot open %s\n", path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 11);
  memcpy(text, "FAKECUBIN\n", 10);
  if (fread(text + 10, 1, (size_t)n, f) != (size_t)n) {
    printf("FAIL: read %s\n", path);
    exit(1);
  }
  text[n + 10] = 0;
  fclose(f);
  CUmodule m;
  if (cu->cuModuleLoadData(&m, text + 10) != CUDA_SUCCESS)
    CU(cu->cuModuleLoadData(&m, text));
  free(text);
  return m;
}

/* What the timed calls launch: fn with params on `grid` CTAs of 256
 * threads, and graph g on in/out (in_alt/out_alt every other call, other
 * sizes; NULL: never). */
typedef struct timed {
  CUfunction fn;
  void **params;
  unsigned grid;
  fgl_graph *g;
  const fgl_arg *in, *in_alt;
  int n_in, n_out;
  fgl_tensor *out, *out_alt;
} timed;

/* Host time of `calls` bare launches and `calls` fgl_runs, medians: the
 * stream synchronized every 200 calls, both timed twice in turn and the
 * first round discarded (warm-up). */
static inline void time_pair(const fgl_cuda_api *cu, const timed *t, CUstream s, int calls,
                             double *bare_us, double *run_us) {
  double *tb = malloc((size_t)calls * sizeof *tb), *tr = malloc((size_t)calls * sizeof *tr);
  for (int rep = 0; rep < 2; rep++) { /* rep 0 warms up */
    for (int i = 0; i < calls; i++) {
      if (i % 200 == 0)
        CU(cu->cuStreamSynchronize(s));
      double a = now_us();
      CUresult r = cu->cuLaunchKernel(t->fn, t->grid, 1, 1, 256, 1, 1, 0, s, t->params, NULL);
      tb[i] = now_us() - a;
      if (r != CUDA_SUCCESS) {
        printf("FAIL: bare launch %d\n", r);
        exit(1);
      }
    }
    for (int i = 0; i < calls; i++) {
      if (i % 200 == 0)
        CU(cu->cuStreamSynchronize(s));
      int odd = t->in_alt && (i & 1);
      double a = now_us();
      fgl_status r = fgl_run(t->g, odd ? t->in_alt : t->in, t->n_in, odd ? t->out_alt : t->out,
                             t->n_out, s, NULL);
      tr[i] = now_us() - a;
      if (r != FGL_OK) {
        printf("FAIL: fgl_run %d\n", r);
        exit(1);
      }
    }
  }
  CU(cu->cuStreamSynchronize(s));
  *bare_us = median(tb, calls);
  *run_us = median(tr, calls);
  free(tb);
  free(tr);
}

#endif
