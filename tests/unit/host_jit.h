/* For the backend's unit tests: an fgb_module's LLVM IR compiled for this
 * host by MCJIT, so emitted code can be run on the CPU against the
 * interpreter (test_backend_f8.c, test_backend_random.c). */
#ifndef FG_TEST_HOST_JIT_H
#define FG_TEST_HOST_JIT_H
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>

#include "backend.h"
#include "check.h"

/* NVPTX intrinsics the emitted integer code uses, replaced by generic IR
 * the host can select: llvm.nvvm.mulhi.ui(a, b) (Philox's mul.hi.u32) by
 * the high word of the zero-extended product. */
static void lower_nvvm_for_host(LLVMModuleRef mod) {
  LLVMValueRef f = LLVMGetNamedFunction(mod, "llvm.nvvm.mulhi.ui");
  if (!f)
    return;
  LLVMContextRef c = LLVMGetModuleContext(mod);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(c), i64 = LLVMInt64TypeInContext(c);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
  for (LLVMUseRef u = LLVMGetFirstUse(f); u; u = LLVMGetFirstUse(f)) {
    LLVMValueRef call = LLVMGetUser(u);
    LLVMPositionBuilderBefore(b, call);
    LLVMValueRef x = LLVMBuildZExt(b, LLVMGetOperand(call, 0), i64, "");
    LLVMValueRef y = LLVMBuildZExt(b, LLVMGetOperand(call, 1), i64, "");
    LLVMValueRef hi = LLVMBuildTrunc(
        b, LLVMBuildLShr(b, LLVMBuildMul(b, x, y, ""), LLVMConstInt(i64, 32, 0), ""), i32, "");
    LLVMReplaceAllUsesWith(call, hi);
    LLVMInstructionEraseFromParent(call);
  }
  LLVMDisposeBuilder(b);
}

/* The engine (host_jit_free ends it and m), or NULL
 * after a failed CHECK. */
static LLVMExecutionEngineRef host_jit(fgb_module *m) {
  LLVMModuleRef mod = fgb_llvm_module(m);
  lower_nvvm_for_host(mod);
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
