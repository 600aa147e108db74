/* PTX backend, part 1: the LLVM module that holds one compilation unit's
 * kernels (context, NVPTX target machine, IR builder), kernel creation, and
 * finishing (verify, link libdevice, optimize, emit PTX or LLVM IR text).
 * GPU primitives (thread ids, barriers, shuffles, atomics, shared memory)
 * are in gpu_intrin.h. Nothing here knows the .fg IR. */
#ifndef FGB_LLVM_MODULE_H
#define FGB_LLVM_MODULE_H
#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>

typedef struct fgb_module fgb_module;

/* Creates a module for `arch` ("sm_80", "sm_86", "sm_89", "sm_90",
 * "sm_90a"): triple nvptx64-nvidia-cuda, the NVPTX data layout, a target
 * machine with the smallest PTX ISA version that supports the arch (7.0 for
 * sm_80 ... 7.8 for sm_90). NULL with a message in err on failure. */
fgb_module *fgb_module_create(const char *name, const char *arch, char *err, size_t cap);
void fgb_module_free(fgb_module *m);

/* The module's LLVM objects (owned by the module). The builder is positioned
 * by fgb_kernel_begin; emitters may move it freely. */
LLVMContextRef fgb_ctx(fgb_module *m);
LLVMModuleRef fgb_llvm_module(fgb_module *m);
LLVMBuilderRef fgb_builder(fgb_module *m);

/* Kernel parameters: a global-memory pointer (ptr addrspace(1)), optionally
 * noalias (the caller guarantees no other parameter overlaps it: lets LLVM
 * and ptxas reorder and lets read-only inputs use ld.global.nc), or a
 * by-value f64 / i64 / i32 / f32 scalar. */
typedef enum fgb_param_kind {
  FGB_PARAM_PTR,
  FGB_PARAM_PTR_NOALIAS,
  FGB_PARAM_PTR_NOALIAS_PLAIN, /* noalias, aligned to its elements only */
  FGB_PARAM_PTR_PLAIN,         /* neither: a kernel that writes a parameter in place */
  FGB_PARAM_F64,
  FGB_PARAM_I64,
  FGB_PARAM_I32,
  FGB_PARAM_F32,
} fgb_param_kind;

/* Adds `void name(params...)` with the ptx_kernel calling convention (a PTX
 * `.entry`), creates its entry block and positions the builder at its end.
 * PTR and PTR_NOALIAS parameters are also marked align 16 (the loader runs
 * such a kernel only when every pointer is 16-byte aligned); PLAIN ones
 * are not (a kernel's variant for pointers aligned to their elements only:
 * LLVM must not merge its accesses into wider ones).
 * Parameters: LLVMGetParam(fn, i). */
#define FGB_MAX_KERNEL_PARAMS 256
LLVMValueRef fgb_kernel_begin(fgb_module *m, const char *name, int nparams,
                              const fgb_param_kind *kinds);
/* Launch-bound annotations (nvvm.annotations "maxntidx" / "minctasm"):
 * .maxntid x,1,1 and .minnctapersm n in the PTX. */
void fgb_kernel_set_maxntid(fgb_module *m, LLVMValueRef kernel, int x);
void fgb_kernel_set_minctasm(fgb_module *m, LLVMValueRef kernel, int n);

typedef struct fgb_finish_opts {
  const char *libdevice_path; /* libdevice.10.bc; NULL or "": no libdevice
                                 (an error if the module calls __nv_*) */
  int opt_level;              /* 0..3: "default<Ok>" */
  bool emit_llvm;             /* return the optimized LLVM IR text, not PTX */
  /* Opt-in approximations: the kernels get "unsafe-fp-math"="true", which
   * makes NVPTX use div.approx/div.full, sqrt.approx, rcp.approx and FMA
   * contraction. Subnormals are still kept (no ftz). Default off: every
   * f32 div is div.rn.f32, every sqrt sqrt.rn.f32, and mul/add stay
   * separately rounded (mul.rn/add.rn, which ptxas does not contract). */
  bool fast_math;
} fgb_finish_opts;

/* Verifies the module, links libdevice (its functions internalized, unused
 * ones removed), sets nvvm-reflect-ftz = 0, runs the NVVMReflect pass and
 * the O-level pipeline, and emits PTX (or LLVM IR text with emit_llvm).
 * Returns a malloc'd NUL-terminated string (free()), or NULL with a message
 * in err. The module is consumed: only fgb_module_free may follow. */
char *fgb_module_finish(fgb_module *m, const fgb_finish_opts *o, char *err, size_t cap);

/* After fgb_module_finish returned NULL: true when the cause was the
 * setup (libdevice missing or unreadable: the user can mend it), false when
 * it was a compiler bug (an invalid module, a failing LLVM pass). */
bool fgb_module_setup_error(const fgb_module *m);

/* Helpers for emitters: get-or-declare a function (intrinsic attributes are
 * attached automatically for "llvm.*" names) and call it. */
LLVMValueRef fgb_declare(fgb_module *m, const char *name, LLVMTypeRef ret, int n,
                         LLVMTypeRef *params);
LLVMValueRef fgb_call(fgb_module *m, const char *name, LLVMTypeRef ret, int n, LLVMValueRef *args);
/* The function that holds the builder's current block. */
LLVMValueRef fgb_current_fn(fgb_module *m);

#endif
