/* Private to the backend_ptx sources: the fgb_module structure and cached types. */
#ifndef FGB_INTERNAL_H
#define FGB_INTERNAL_H
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "dtype.h"
#include "llvm_module.h"

struct fgb_module {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMTargetMachineRef tm;
  int sm; /* 80, 86, 89, 90 */
  int nkernels, capkernels;
  LLVMValueRef *kernels;
  unsigned md_invariant; /* kind id of !invariant.load */
  bool setup_error;      /* finish failed on the setup (libdevice), not a bug */
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, v, gptr, sptr;
  /* The f8 code behind each f32 that fgb_round_narrow decoded from one, so
   * that storing that value reuses the code instead of encoding it again (a
   * ring: a value it has forgotten is encoded again, which is exact). */
  struct {
    LLVMValueRef decoded, code;
    fg_dtype dt;
  } f8_codes[64];
  unsigned nf8_codes;
};

#endif
