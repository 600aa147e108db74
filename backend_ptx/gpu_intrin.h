/* PTX backend, part 2: GPU primitives emitted at the builder's position.
 * All indices are i32; pointers are opaque (ptr addrspace(1) for global,
 * addrspace(3) for shared). */
#ifndef FGB_GPU_INTRIN_H
#define FGB_GPU_INTRIN_H
#include <stdint.h>

#include "llvm_module.h"

/* %tid.{x,y,z}, %ctaid, %ntid, %nctaid (axis 0..2), as i32. */
LLVMValueRef fgb_tid(fgb_module *m, int axis);
LLVMValueRef fgb_ctaid(fgb_module *m, int axis);
LLVMValueRef fgb_ntid(fgb_module *m, int axis);
LLVMValueRef fgb_nctaid(fgb_module *m, int axis);
/* %laneid (i32). */
LLVMValueRef fgb_laneid(fgb_module *m);

/* bar.sync 0 (__syncthreads). */
void fgb_barrier(fgb_module *m);
/* fence.acq_rel.gpu (__threadfence as a release / acquire fence; LLVM
 * 19's NVPTX cannot select `fence syncscope(...)`, so inline asm). */
void fgb_fence_gpu(fgb_module *m);

/* Programmatic dependent launch (sm_90, opt/pdl.c): griddepcontrol.wait
 * returns once the kernels launched before this one on its stream have
 * completed and their memory is visible; griddepcontrol.launch_dependents
 * lets the next kernel on the stream start once every CTA of this one has
 * issued it (or exited). */
void fgb_grid_dep_wait(fgb_module *m);
void fgb_grid_dep_launch(fgb_module *m);

/* shfl.sync.bfly over the full warp (mask 0xffffffff, clamp 0x1f):
 * v of type i1, i8..i32, f32 (one shuffle) or i64, f64 (two 32-bit
 * shuffles). Returns the value of lane (laneid ^ lane_mask). */
LLVMValueRef fgb_shfl_bfly(fgb_module *m, LLVMValueRef v, int lane_mask);
/* shfl.sync.up over the full warp, the same types: the value of lane
 * laneid - delta, or v itself in lanes below delta. */
LLVMValueRef fgb_shfl_up(fgb_module *m, LLVMValueRef v, int delta);
/* shfl.sync.idx over the full warp, the same types: lane `lane`'s value. */
LLVMValueRef fgb_shfl_idx(fgb_module *m, LLVMValueRef v, int lane);

/* nanosleep.u32 ns (sm_70+), to back off in a spin loop. */
void fgb_nanosleep(fgb_module *m, int ns);
/* Asynchronous copies global -> shared (sm_80+): 16 bytes from gptr (a
 * global pointer) to sptr (a shared pointer), L2 only; the copies issued
 * so far form a group at commit; wait_all waits for every group of this
 * thread, whose copies are then visible to it. */
void fgb_cp_async16(fgb_module *m, LLVMValueRef sptr, LLVMValueRef gptr);
void fgb_cp_async_commit(fgb_module *m);
/* The same copy reading only src_bytes (i32: 0 or 16) of gptr and filling
 * the rest of the 16 bytes with zeros (a row past a tensor's end). */
void fgb_cp_async16_zfill(fgb_module *m, LLVMValueRef sptr, LLVMValueRef gptr,
                          LLVMValueRef src_bytes);
/* cp.async.wait_group pending: this thread's groups but the last
 * `pending` are done. */
void fgb_cp_async_wait(fgb_module *m, int pending);
void fgb_cp_async_wait_all(fgb_module *m);

/* Thread-block clusters (sm_90). barrier.cluster.arrive (release) then
 * .wait (acquire): every thread of every CTA of the cluster. */
void fgb_cluster_barrier(fgb_module *m);
/* The generic address of shared variable sptr (addrspace 3) in the CTA
 * of rank `rank` (i32) of this cluster (mapa): plain loads and stores
 * through it reach that CTA's shared memory. */
LLVMValueRef fgb_cluster_map(fgb_module *m, LLVMValueRef sptr, LLVMValueRef rank);

/* atomicrmw add (monotonic: atom.global.add.u32, GPU scope) on an i32 in
 * global memory; returns the old value. */
LLVMValueRef fgb_atomic_add_i32_global(fgb_module *m, LLVMValueRef ptr, LLVMValueRef val);

/* A static shared-memory array of `bytes` bytes, 16-byte aligned
 * (an internal addrspace(3) global named `name`). Returns its address
 * (ptr addrspace(3)). */
LLVMValueRef fgb_shared_array(fgb_module *m, const char *name, uint64_t bytes);
/* The kernel's dynamic shared memory (extern, sized at launch: the plan's
 * smem), as an i8 array. */
LLVMValueRef fgb_dynamic_shared(fgb_module *m, const char *name);

/* &ptr[idx] for elements of type elem (any address space; idx any int
 * type, sign-extended). fgb_gep_global is the same for global pointers. */
LLVMValueRef fgb_gep(fgb_module *m, LLVMValueRef ptr, LLVMTypeRef elem, LLVMValueRef idx);
LLVMValueRef fgb_gep_global(fgb_module *m, LLVMValueRef ptr, LLVMTypeRef elem, LLVMValueRef idx);

#endif
