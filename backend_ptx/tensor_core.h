/* Tensor-core building blocks for the attention kernels (issue 19):
 * mma.sync m16n8k16 with f32 accumulators, ldmatrix, loads of fragments
 * from shared-memory tiles, packing two f32 into a 16-bit pair, ex2.
 * Emitted at m's builder; bf16 or f16 operands (the dtype picks the mma).
 *
 * Tiles live in shared memory row-major with rows of `pitch` 16-bit
 * elements; `base` is a shared pointer (addrspace 3) and (row, col) a
 * constant element offset past it, so that a thread's fragment loads take
 * [reg + imm] addresses. cp.async (issue, commit, wait) is in gpu_intrin.h. */
#ifndef FGB_TENSOR_CORE_H
#define FGB_TENSOR_CORE_H
#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"
#include "llvm_module.h"

/* The i32 constant v. */
LLVMValueRef fgb_tc_i32(fgb_module *m, int64_t v);

/* &smem[byte] (i8 elements). */
LLVMValueRef fgb_tc_smem_at(fgb_module *m, LLVMValueRef smem, LLVMValueRef byte);
/* The shared address of element (row, col) (i32 values) of the tile at
 * byte `at` of smem. */
LLVMValueRef fgb_tc_tile_base(fgb_module *m, LLVMValueRef smem, LLVMValueRef at, LLVMValueRef row,
                              LLVMValueRef col, int pitch);

/* x through a volatile mov: a value LLVM cannot hoist out of the loop it
 * is made in, or CSE with an earlier x, so that addresses formed from it
 * (x plus constants) stay there as [reg + imm] operands instead of one
 * register each held across the loop, and a value computed again after a
 * loop is not the one kept in a register across it. i32 or i64. */
LLVMValueRef fgb_tc_opaque(fgb_module *m, LLVMValueRef x);

/* A load of type t (alignment align) at element (row, col) past base. */
LLVMValueRef fgb_tc_lds(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                        LLVMTypeRef t, unsigned align);
/* The 32-bit word (two elements) at (row, col) past base. */
LLVMValueRef fgb_tc_lds32(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col);
/* Elements (row, col) and (row + 1, col) past base as one word, the first
 * in the low half. */
LLVMValueRef fgb_tc_lds16x2(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col);

/* ldmatrix .x4 (.trans): four 8 x 8 matrices of 16-bit elements; lane l
 * gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte
 * aligned; here base + (row, col)) and receives in word i, of matrix i,
 * the elements (row l / 4, columns 2 (l % 4), +1), or with .trans (rows
 * 2 (l % 4), +1, column l / 4): the fragments mma takes (PTX ISA,
 * "Warp-level matrix load instruction: ldmatrix"). */
void fgb_tc_ldmatrix4(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                      bool trans, LLVMValueRef *out);

/* Two f32 values rounded to dt (nearest even) as one word, lo in the low half. */
LLVMValueRef fgb_tc_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi);

/* c = A B + c: one mma.sync m16n8k16 row.col with f32 accumulators, in
 * place; A four words, B two (b0, b1), of dt (bf16 or f16) pairs. */
void fgb_tc_mma(fgb_module *m, fg_dtype dt, LLVMValueRef *A, LLVMValueRef b0, LLVMValueRef b1,
                LLVMValueRef *c);

/* maxnum (f32) and ex2.approx.ftz.f32: subnormal inputs and results
 * flushed to zero. The softmax's exponents are <= 0, and a result below
 * 2^-126 next to a row maximum of 1 changes no f32 sum; without .ftz,
 * ptxas wraps each MUFU.EX2 in a range check and two multiplies (three
 * FP32 instructions an element on the pipe the softmax is bound by). */
LLVMValueRef fgb_tc_fmax(fgb_module *m, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef fgb_tc_ex2(fgb_module *m, LLVMValueRef x);
/* 1 / x (f32) without a call: rcp.approx.ftz.f32 and one Newton step
 * (within an ulp for normal x; 0, +-inf and NaN give what division
 * gives; subnormal x is flushed). rcp.rn.f32 (an fdiv)
 * has a slow-path subroutine, and where the driver's JIT compiles the
 * PTX as relocatable code (cuLink) that call is extern, and ptxas then
 * serializes every wgmma of the kernel (info C7509). */
LLVMValueRef fgb_tc_rcp(fgb_module *m, LLVMValueRef x);

/* An inline-PTX statement `text` with side effects and a memory clobber,
 * its one operand $0 the i32 x (the attention kernels' named barriers, by
 * warpgroup). */
void fgb_tc_asm_i32(fgb_module *m, const char *text, LLVMValueRef x);

/* issue 19 (forward speed): two f32 values rounded to dt (nearest even)
 * as one word, lo in the low half, by one packed conversion
 * (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32: the same bits as fgb_tc_pack2). */
LLVMValueRef fgb_tc_cvt_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi);
/* x y + z in one rounding (fma.rn.f32). */
LLVMValueRef fgb_tc_fma(fgb_module *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z);
/* cp.async.cg 16 bytes from gbase + goff (bytes) to shared sbase + soff,
 * the offsets as immediates of the instruction (no register each);
 * src_bytes (i32, 16 or 0: zeros) or NULL for 16. */
void fgb_tc_cp_async16_at(fgb_module *m, LLVMValueRef sbase, int64_t soff, LLVMValueRef gbase,
                          int64_t goff, LLVMValueRef src_bytes);

/* issue 19 (wgmma, sm_90a: the forward, emit_attention.c, and the
 * backward, emit_attention_bwd.c). Tiles in the 128-byte swizzle: a tile of
 * R rows x D 16-bit elements is D / 64 atoms of R rows x 128 bytes; chunk
 * c (16 bytes) of row r at chunk c ^ (r % 8) of its row; atoms 1024-byte
 * aligned.
 *
 * The matrix descriptor of the tile at shared address saddr (i32):
 * leading byte offset lbo, stride byte offset 1024, swizzle 128 bytes. */
LLVMValueRef fgb_tc_wg_desc(fgb_module *m, LLVMValueRef saddr, int64_t lbo);
/* desc advanced by `bytes` (i32, a multiple of 16). */
LLVMValueRef fgb_tc_wg_desc_add(fgb_module *m, LLVMValueRef desc, LLVMValueRef bytes);
/* fence.proxy.async.shared::cta: this thread's shared stores visible to
 * wgmma's operand reads (before the barrier that publishes them). */
void fgb_tc_wg_fence_proxy(fgb_module *m);

/* A chain of wgmma as one inline-assembly statement: fence, np products
 * (at most 4) of nk wgmma m64n{n}k16 each (f32 accumulators, dt operands:
 * bf16 or f16), commit, and with `wait` wait_group 0, so that its results
 * are complete when LLVM sees them; without it, the caller waits
 * (fgb_tc_wg_wait). areg and breg name the statement's descriptor
 * registers in the PTX (A's and B's; fgb_tc_wg_rs: breg only). */
typedef struct fgb_tc_wg_chain {
  fg_dtype dt;             /* the operands': bf16 or f16 */
  int n, nk, np;           /* m64n{n}k16, nk k steps a product, np products */
  bool wait;               /* ends with wait_group 0 */
  const char *areg, *breg; /* the descriptor registers' names in the PTX */
} fgb_tc_wg_chain;

/* d[p n/2 .. (p + 1) n/2) = A_p B_p^T (the products' k steps
 * interleaved): A_p the 64 rows at adesc[p] of a K-major tile of a_rows
 * rows, B_p the n rows at bdesc[p] of a K-major tile of b_rows rows (both:
 * the k dim contiguous; descriptors with lbo 16). d[4 j + 2 h + c] of a
 * product is row 16 w + g + 8 h, column 8 j + 2 t + c (w the warp of the
 * warpgroup): the mma.sync C fragment of n-tile j. False where the
 * statement does not fit (a bug). */
bool fgb_tc_wg_ss(fgb_module *m, const fgb_tc_wg_chain *c, const LLVMValueRef *adesc,
                  int64_t a_rows, const LLVMValueRef *bdesc, int64_t b_rows, LLVMValueRef *d);
/* acc[p n/2 .. (p + 1) n/2) += A_p B_p: A_p from registers (a[p nk + j]:
 * the mma.sync A fragment of k step j, warp by warp), B_p the MN-major
 * tile at bdesc[p] (the n dim contiguous, imm-trans-b 1; descriptor lbo:
 * the next 64 columns' atom), k step j 2048 j bytes on. */
bool fgb_tc_wg_rs(fgb_module *m, const fgb_tc_wg_chain *c, LLVMValueRef (*a)[4],
                  const LLVMValueRef *bdesc, LLVMValueRef *acc);
/* wgmma.wait_group `pending`: the n accumulators in v (outputs of chains
 * issued without their wait) come back complete, as the statement's
 * outputs tied to them, so that nothing reads them before the wait (PTX
 * ISA: reading a wgmma's accumulators or A registers before a wait_group
 * covering it is undefined). */
bool fgb_tc_wg_wait(fgb_module *m, int pending, LLVMValueRef *v, int n);
/* The same, ordered after the instructions computing `gate` (f32): the
 * statement first stores gate to `slot` (a 32-bit shared address the
 * caller keeps for it; st.volatile), and ptxas keeps a wgmma.wait_group
 * after the shared-memory stores before it. Left alone, ptxas hoists
 * wait_group 0 of the overlapped attention loop above its softmax, which
 * then overlaps nothing (emit_attention.c, wg_overlap_loop); predicated
 * on gate, the wait makes ptxas serialize every wgmma (info C7514). */
bool fgb_tc_wg_wait_after(fgb_module *m, int pending, LLVMValueRef *v, int n, LLVMValueRef gate,
                          LLVMValueRef slot);

#endif
