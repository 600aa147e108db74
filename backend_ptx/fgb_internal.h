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
  int sm;      /* 80, 86, 89, 90 */
  bool f8_cvt; /* the target's hardware f8 conversions (fg_target.f8_cvt) */
  int nkernels, capkernels;
  LLVMValueRef *kernels;
  unsigned md_invariant; /* kind id of !invariant.load */
  bool setup_error;      /* finish failed on the setup (libdevice), not a bug */
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, f64, v, gptr, sptr;
  /* The f8 or f4e2m1 code behind each f32 that fgb_round_narrow decoded from one, so
   * that storing that value reuses the code instead of encoding it again (a
   * ring: a value it has forgotten is encoded again, which is exact), and
   * the f32 it rounded (src), which a store of two lanes converts as a pair
   * (fgb_f8_encode2). */
  struct {
    LLVMValueRef decoded, code, src;
    fg_dtype dt;
  } f8_codes[64];
  unsigned nf8_codes;
  /* issue 17: f32 values known to be f8e8m0 values (mx_scale's results,
   * decoded codes) with their codes (i8), a ring as f8_codes: a store takes
   * the code, a division by one multiplies by its exact reciprocal. */
  struct {
    LLVMValueRef value, code;
  } e8m0[16];
  unsigned ne8m0;
};

#endif
