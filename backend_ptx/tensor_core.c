/* Tensor-core building blocks for the attention kernels (tensor_core.h). */
#include "tensor_core.h"

#include "fgb_internal.h"
#include "gpu_intrin.h"
#include "lower_value.h"

#include <stdio.h>
#include <string.h>

LLVMValueRef fgb_tc_i32(fgb_module *m, int64_t v) {
  return LLVMConstInt(m->i32, (unsigned long long)v, 1);
}

LLVMValueRef fgb_tc_smem_at(fgb_module *m, LLVMValueRef smem, LLVMValueRef byte) {
  return fgb_gep(m, smem, m->i8, byte);
}

LLVMValueRef fgb_tc_tile_base(fgb_module *m, LLVMValueRef smem, LLVMValueRef at, LLVMValueRef row,
                              LLVMValueRef col, int pitch) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef el = LLVMBuildAdd(b, LLVMBuildMul(b, row, fgb_tc_i32(m, pitch), ""), col, "");
  return fgb_tc_smem_at(m, smem,
                        LLVMBuildAdd(b, LLVMBuildMul(b, el, fgb_tc_i32(m, 2), ""), at, ""));
}

LLVMValueRef fgb_tc_lds(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                        LLVMTypeRef t, unsigned align) {
  LLVMValueRef p = fgb_gep(m, base, m->i8, fgb_tc_i32(m, (row * pitch + col) * 2));
  LLVMValueRef ld = LLVMBuildLoad2(m->b, t, p, "");
  LLVMSetAlignment(ld, align);
  return ld;
}

LLVMValueRef fgb_tc_lds32(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col) {
  return fgb_tc_lds(m, base, pitch, row, col, m->i32, 4);
}

LLVMValueRef fgb_tc_lds16x2(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef lo = LLVMBuildZExt(b, fgb_tc_lds(m, base, pitch, row, col, m->i16, 2), m->i32, "");
  LLVMValueRef hi =
      LLVMBuildZExt(b, fgb_tc_lds(m, base, pitch, row + 1, col, m->i16, 2), m->i32, "");
  return LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, fgb_tc_i32(m, 16), ""), "");
}

void fgb_tc_ldmatrix4(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                      bool trans, LLVMValueRef *out) {
  LLVMValueRef p = fgb_gep(m, base, m->i8, fgb_tc_i32(m, (row * pitch + col) * 2));
  LLVMTypeRef i4[4] = {m->i32, m->i32, m->i32, m->i32};
  LLVMValueRef r = fgb_call(m,
                            trans ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3"
                                  : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3",
                            LLVMStructTypeInContext(m->ctx, i4, 4, 0), 1, &p);
  for (int i = 0; i < 4; i++)
    out[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
}

LLVMValueRef fgb_tc_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef l = LLVMBuildZExt(b, fgb_to_storage(m, lo, dt), m->i32, "");
  LLVMValueRef h = LLVMBuildZExt(b, fgb_to_storage(m, hi, dt), m->i32, "");
  return LLVMBuildOr(b, l, LLVMBuildShl(b, h, fgb_tc_i32(m, 16), ""), "");
}

void fgb_tc_mma(fgb_module *m, fg_dtype dt, LLVMValueRef *A, LLVMValueRef b0, LLVMValueRef b1,
                LLVMValueRef *c) {
  bool bf = dt == FG_BF16;
  LLVMTypeRef h2 = LLVMVectorType(m->f16, 2);
  LLVMValueRef args[10];
  for (int i = 0; i < 4; i++)
    args[i] = bf ? A[i] : LLVMBuildBitCast(m->b, A[i], h2, "");
  args[4] = bf ? b0 : LLVMBuildBitCast(m->b, b0, h2, "");
  args[5] = bf ? b1 : LLVMBuildBitCast(m->b, b1, h2, "");
  for (int i = 0; i < 4; i++)
    args[6 + i] = c[i];
  LLVMTypeRef f4[4] = {m->f32, m->f32, m->f32, m->f32};
  LLVMTypeRef ret = LLVMStructTypeInContext(m->ctx, f4, 4, 0);
  LLVMValueRef r = fgb_call(
      m, bf ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", ret,
      10, args);
  for (int i = 0; i < 4; i++)
    c[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
}

LLVMValueRef fgb_tc_fmax(fgb_module *m, LLVMValueRef x, LLVMValueRef y) {
  LLVMValueRef args[2] = {x, y};
  return fgb_call(m, "llvm.maxnum.f32", m->f32, 2, args);
}

LLVMValueRef fgb_tc_ex2(fgb_module *m, LLVMValueRef x) {
  return fgb_call(m, "llvm.nvvm.ex2.approx.f", m->f32, 1, &x);
}

/* issue 19 (forward speed): one cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32 for
 * the pair (its first operand is the high half), not two conversions and
 * a shift and an or. */
LLVMValueRef fgb_tc_cvt_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi) {
  bool bf = dt == FG_BF16;
  LLVMTypeRef t = LLVMVectorType(bf ? m->bf16 : m->f16, 2);
  LLVMValueRef args[2] = {hi, lo};
  LLVMValueRef r = fgb_call(m, bf ? "llvm.nvvm.ff2bf16x2.rn" : "llvm.nvvm.ff2f16x2.rn", t, 2, args);
  return LLVMBuildBitCast(m->b, r, m->i32, "");
}

LLVMValueRef fgb_tc_fma(fgb_module *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMValueRef args[3] = {x, y, z};
  return fgb_call(m, "llvm.fma.f32", m->f32, 3, args);
}

void fgb_tc_cp_async16_at(fgb_module *m, LLVMValueRef sbase, int64_t soff, LLVMValueRef gbase,
                          int64_t goff, LLVMValueRef src_bytes) {
  char text[128];
  snprintf(text, sizeof text, "cp.async.cg.shared.global [$0+%lld], [$1+%lld], 16%s;",
           (long long)soff, (long long)goff, src_bytes ? ", $2" : "");
  LLVMValueRef args[3] = {
      LLVMBuildTrunc(m->b, LLVMBuildPtrToInt(m->b, sbase, m->i64, ""), m->i32, ""),
      LLVMBuildPtrToInt(m->b, gbase, m->i64, ""), src_bytes};
  int n = src_bytes ? 3 : 2;
  LLVMTypeRef ts[3];
  for (int i = 0; i < n; i++)
    ts[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(m->v, ts, (unsigned)n, 0);
  const char *cons = src_bytes ? "r,l,r,~{memory}" : "r,l,~{memory}";
  LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), (char *)cons, strlen(cons), 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(m->b, fty, fn, args, (unsigned)n, "");
}
