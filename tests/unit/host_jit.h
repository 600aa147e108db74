/* For the backend's unit tests: an fgb_module's LLVM IR compiled for this
 * host by MCJIT, so emitted code can be run on the CPU against the
 * interpreter (test_backend_f8.c, test_backend_random.c). */
#ifndef FG_TEST_HOST_JIT_H
#define FG_TEST_HOST_JIT_H
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>

#include "backend.h"
#include "check.h"

/* The engine (host_jit_free ends it and m), or NULL
 * after a failed CHECK. */
static LLVMExecutionEngineRef host_jit(fgb_module *m) {
  LLVMModuleRef mod = fgb_llvm_module(m);
  char *triple = LLVMGetDefaultTargetTriple();
  LLVMSetTarget(mod, triple);
  LLVMDisposeMessage(triple);
  LLVMSetDataLayout(mod, "");
  LLVMLinkInMCJIT();
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  struct LLVMMCJITCompilerOptions opts;
  LLVMInitializeMCJITCompilerOptions(&opts, sizeof opts);
  opts.OptLevel = 2;
  LLVMExecutionEngineRef ee;
  char *msg = NULL;
  if (LLVMCreateMCJITCompilerForModule(&ee, mod, &opts, sizeof opts, &msg)) {
    CHECK_MSG(0, "MCJIT: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  return ee;
}

/* The engine gives the LLVM module back to m, which disposes of both. */
static void host_jit_free(LLVMExecutionEngineRef ee, fgb_module *m) {
  LLVMModuleRef outm;
  char *msg = NULL;
  if (!LLVMRemoveModule(ee, fgb_llvm_module(m), &outm, &msg))
    LLVMDisposeExecutionEngine(ee);
  LLVMDisposeMessage(msg);
  fgb_module_free(m);
}

#endif
