/* The compiler driver below the frontend: optimize each graph, plan it,
 * lower every kernel into one LLVM module and write the requested stage
 * (docs/artifact.md for the PTX artifact). */
#ifndef FGC_COMPILE_H
#define FGC_COMPILE_H
#include <stdio.h>

#include "diag.h"
#include "ir.h"
#include "passes.h"
#include "plan.h"

typedef enum fgc_emit {
  FGC_EMIT_OPT,
  FGC_EMIT_PLAN,
  FGC_EMIT_LLVM,
  FGC_EMIT_PTX,
  FGC_EMIT_DOT /* the plans as one Graphviz graph (opt/plan_dot.c) */
} fgc_emit;

typedef struct fgc_options {
  const char *arch;      /* "sm_90" by default */
  int opt_level;         /* LLVM pipeline level, 0..3 (fusec -O0..-O2 maps 0..2; default 3) */
  const char *libdevice; /* path to libdevice.10.bc */
  bool fast_math;        /* opt-in approximate math (docs/artifact.md) */
  fg_pass_options passes;
  fg_plan_options plan;
  bool time_passes;
  /* Threads that lower the units (0: as many as the machine has CPUs, at
   * most FGC_UNITS). The output does not depend on it. */
  int jobs;
} fgc_options;

/* The kernels are shared out among at most this many LLVM modules (units),
 * by their estimated cost (one unit per FGC_UNIT_WEIGHT of it, compile.c)
 * and never by the build machine's CPU count, so
 * the same input and flags give the same PTX bytes on any machine. */
enum { FGC_UNITS = 4 };

/* Compiles graphs (names[0..n), or every graph when n == 0) of m and writes
 * the stage to out. Returns an exit status (exit_status.h): 0 on success,
 * FG_EXIT_INPUT after an error reported to d, FG_EXIT_INTERNAL after a
 * compiler bug (reported to d as an internal error). The module's graphs
 * are optimized in place. */
int fgc_compile(fg_module *m, const char *const *names, int n, fgc_emit emit, const fgc_options *o,
                fg_diag *d, FILE *out);

#endif
