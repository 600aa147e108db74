/* GPU primitives: special registers, barriers, shuffles, atomics, shared
 * memory. See gpu_intrin.h. */
#include "gpu_intrin.h"

#include <stdio.h>
#include <string.h>

#include "fgb_internal.h"

static LLVMValueRef sreg(fgb_module *m, const char *what, int axis) {
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", what,
           "xyz"[axis < 0 || axis > 2 ? 0 : axis]);
  return fgb_call(m, name, m->i32, 0, NULL);
}

LLVMValueRef fgb_tid(fgb_module *m, int axis) { return sreg(m, "tid", axis); }
LLVMValueRef fgb_ctaid(fgb_module *m, int axis) { return sreg(m, "ctaid", axis); }
LLVMValueRef fgb_ntid(fgb_module *m, int axis) { return sreg(m, "ntid", axis); }
LLVMValueRef fgb_nctaid(fgb_module *m, int axis) { return sreg(m, "nctaid", axis); }
LLVMValueRef fgb_laneid(fgb_module *m) {
  return fgb_call(m, "llvm.nvvm.read.ptx.sreg.laneid", m->i32, 0, NULL);
}

void fgb_barrier(fgb_module *m) { fgb_call(m, "llvm.nvvm.barrier0", m->v, 0, NULL); }

/* The shuffle modes: the lane read is laneid ^ b (BFLY), laneid - b (UP:
 * clamp 0, so lanes below b read their own) or b (IDX). */
enum { SHFL_BFLY, SHFL_UP, SHFL_IDX };

static LLVMValueRef shfl32(fgb_module *m, LLVMValueRef v, int lane_mask, int mode) {
  bool f = LLVMTypeOf(v) == m->f32;
  LLVMValueRef args[4] = {LLVMConstInt(m->i32, 0xffffffffu, 0), v,
                          LLVMConstInt(m->i32, (unsigned)lane_mask, 0),
                          LLVMConstInt(m->i32, mode == SHFL_UP ? 0 : 0x1f, 0)};
  static const char *const names[3][2] = {
      {"llvm.nvvm.shfl.sync.bfly.i32", "llvm.nvvm.shfl.sync.bfly.f32"},
      {"llvm.nvvm.shfl.sync.up.i32", "llvm.nvvm.shfl.sync.up.f32"},
      {"llvm.nvvm.shfl.sync.idx.i32", "llvm.nvvm.shfl.sync.idx.f32"}};
  return fgb_call(m, names[mode][f], f ? m->f32 : m->i32, 4, args);
}

static LLVMValueRef shfl(fgb_module *m, LLVMValueRef v, int lane_mask, int mode) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t = LLVMTypeOf(v);
  if (t == m->f32 || t == m->i32)
    return shfl32(m, v, lane_mask, mode);
  if (t == m->f64 || t == m->i64) {
    LLVMValueRef i = t == m->f64 ? LLVMBuildBitCast(b, v, m->i64, "") : v;
    LLVMValueRef lo = shfl32(m, LLVMBuildTrunc(b, i, m->i32, ""), lane_mask, mode);
    LLVMValueRef hi = shfl32(
        m, LLVMBuildTrunc(b, LLVMBuildLShr(b, i, LLVMConstInt(m->i64, 32, 0), ""), m->i32, ""),
        lane_mask, mode);
    LLVMValueRef r = LLVMBuildOr(
        b, LLVMBuildZExt(b, lo, m->i64, ""),
        LLVMBuildShl(b, LLVMBuildZExt(b, hi, m->i64, ""), LLVMConstInt(m->i64, 32, 0), ""), "");
    return t == m->f64 ? LLVMBuildBitCast(b, r, m->f64, "") : r;
  }
  /* i1, i8, i16: widen */
  LLVMValueRef r = shfl32(m, LLVMBuildZExt(b, v, m->i32, ""), lane_mask, mode);
  return LLVMBuildTrunc(b, r, t, "");
}

LLVMValueRef fgb_shfl_bfly(fgb_module *m, LLVMValueRef v, int lane_mask) {
  return shfl(m, v, lane_mask, SHFL_BFLY);
}

LLVMValueRef fgb_shfl_up(fgb_module *m, LLVMValueRef v, int delta) {
  return shfl(m, v, delta, SHFL_UP);
}

LLVMValueRef fgb_shfl_idx(fgb_module *m, LLVMValueRef v, int lane) {
  return shfl(m, v, lane, SHFL_IDX);
}

static void asm_call(fgb_module *m, const char *text, const char *cons, int n, LLVMValueRef *args) {
  LLVMTypeRef ts[4];
  for (int i = 0; i < n; i++)
    ts[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(m->v, ts, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 1,
                                     0, LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(m->b, fty, fn, args, (unsigned)n, "");
}

/* fence.acq_rel.gpu (MEMBAR.ALL.GPU), not membar.gl: membar.gl is
 * fence.sc.gpu (MEMBAR.SC.GPU), stronger than the release / acquire
 * patterns of the grid reductions need, and slower. */
void fgb_fence_gpu(fgb_module *m) { asm_call(m, "fence.acq_rel.gpu;", "~{memory}", 0, NULL); }

void fgb_grid_dep_wait(fgb_module *m) { asm_call(m, "griddepcontrol.wait;", "~{memory}", 0, NULL); }

void fgb_grid_dep_launch(fgb_module *m) {
  asm_call(m, "griddepcontrol.launch_dependents;", "~{memory}", 0, NULL);
}

void fgb_cp_async16(fgb_module *m, LLVMValueRef sptr, LLVMValueRef gptr) {
  LLVMValueRef a[2] = {
      LLVMBuildTrunc(
          m->b,
          LLVMBuildPtrToInt(m->b, sptr, LLVMInt64TypeInContext(LLVMGetModuleContext(m->mod)), ""),
          m->i32, ""),
      LLVMBuildPtrToInt(m->b, gptr, LLVMInt64TypeInContext(LLVMGetModuleContext(m->mod)), "")};
  asm_call(m, "cp.async.cg.shared.global [$0], [$1], 16;", "r,l,~{memory}", 2, a);
}

void fgb_cp_async16_zfill(fgb_module *m, LLVMValueRef sptr, LLVMValueRef gptr,
                          LLVMValueRef src_bytes) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(LLVMGetModuleContext(m->mod));
  LLVMValueRef a[3] = {LLVMBuildTrunc(m->b, LLVMBuildPtrToInt(m->b, sptr, i64, ""), m->i32, ""),
                       LLVMBuildPtrToInt(m->b, gptr, i64, ""), src_bytes};
  asm_call(m, "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", 3, a);
}

void fgb_cp_async_wait(fgb_module *m, int pending) {
  char text[64];
  snprintf(text, sizeof text, "cp.async.wait_group %d;", pending);
  asm_call(m, text, "~{memory}", 0, NULL);
}

void fgb_cp_async_commit(fgb_module *m) {
  asm_call(m, "cp.async.commit_group;", "~{memory}", 0, NULL);
}

void fgb_cp_async_wait_all(fgb_module *m) {
  asm_call(m, "cp.async.wait_group 0;", "~{memory}", 0, NULL);
}

void fgb_cluster_barrier(fgb_module *m) {
  fgb_call(m, "llvm.nvvm.barrier.cluster.arrive", m->v, 0, NULL);
  fgb_call(m, "llvm.nvvm.barrier.cluster.wait", m->v, 0, NULL);
}

LLVMValueRef fgb_cluster_map(fgb_module *m, LLVMValueRef sptr, LLVMValueRef rank) {
  LLVMTypeRef generic = LLVMPointerTypeInContext(LLVMGetModuleContext(m->mod), 0);
  LLVMValueRef a[2] = {LLVMBuildAddrSpaceCast(m->b, sptr, generic, ""), rank};
  return fgb_call(m, "llvm.nvvm.mapa", generic, 2, a);
}

void fgb_nanosleep(fgb_module *m, int ns) {
  LLVMValueRef a = LLVMConstInt(m->i32, (unsigned)ns, 0);
  fgb_call(m, "llvm.nvvm.nanosleep", m->v, 1, &a);
}

LLVMValueRef fgb_atomic_add_i32_global(fgb_module *m, LLVMValueRef ptr, LLVMValueRef val) {
  return LLVMBuildAtomicRMW(m->b, LLVMAtomicRMWBinOpAdd, ptr, val, LLVMAtomicOrderingMonotonic, 0);
}

LLVMValueRef fgb_shared_array(fgb_module *m, const char *name, uint64_t bytes) {
  LLVMTypeRef t = LLVMArrayType2(m->i8, bytes ? bytes : 1);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(m->mod, t, name, 3);
  LLVMSetInitializer(g, LLVMGetUndef(t));
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

LLVMValueRef fgb_dynamic_shared(fgb_module *m, const char *name) {
  LLVMTypeRef t = LLVMArrayType2(m->i8, 0);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(m->mod, t, name, 3);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

LLVMValueRef fgb_gep(fgb_module *m, LLVMValueRef ptr, LLVMTypeRef elem, LLVMValueRef idx) {
  return LLVMBuildInBoundsGEP2(m->b, elem, ptr, &idx, 1, "");
}

LLVMValueRef fgb_gep_global(fgb_module *m, LLVMValueRef ptr, LLVMTypeRef elem, LLVMValueRef idx) {
  return fgb_gep(m, ptr, elem, idx);
}
