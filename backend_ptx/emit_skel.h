/* Pieces shared by the kernel skeletons (emit_skel.c; used by
 * emit_pointwise.c, emit_row.c, emit_column.c, emit_rowcol.c): loops,
 * locals, reductions' accumulators, the grid reduction's arrival and
 * partials, and the row coordinates. */
#ifndef FGB_EMIT_SKEL_H
#define FGB_EMIT_SKEL_H
#include "emit.h"

/* A local variable (an alloca in the entry block, so it becomes a
 * register), initialized here. */
LLVMValueRef fgk_local_var(fgb_emitter *e, LLVMTypeRef t, LLVMValueRef init);

typedef struct fgk_loop {
  LLVMValueRef var, step, end;
  LLVMBasicBlockRef cond, body, exit;
} fgk_loop;
/* for (i = start; i < end; i += step): returns i inside the body. */
LLVMValueRef fgk_loop_begin(fgb_emitter *e, fgk_loop *l, LLVMValueRef start, LLVMValueRef end,
                            LLVMValueRef step);
void fgk_loop_end(fgb_emitter *e, fgk_loop *l, LLVMValueRef i);
LLVMValueRef fgk_imin(fgb_emitter *e, LLVMValueRef a, LLVMValueRef b);

/* 8-byte slot `i32_index` of shared-memory area `slot` (256 bytes each:
 * one per reduction of each row in flight, then the grid reduction's flag
 * at area fgk_flag_area). */
enum { FGK_MAX_TAILS = 4 }; /* tail reductions a row + column kernel can have */
int fgk_flag_area(const fg_kernel *k);
LLVMValueRef fgk_smem_slot(fgb_emitter *e, int slot, LLVMValueRef i32_index);
/* Thread 0 zeroes a grid-reduction counter (volatile). */
void fgk_reset_counter(fgb_emitter *e, LLVMValueRef counter_ptr);
/* Every thread stores its partials, then thread 0 counts the arrival;
 * returns the flag "this CTA is the last of `split`". */
LLVMValueRef fgk_arrive(fgb_emitter *e, LLVMValueRef counter_ptr, int split);
/* ... of a split known at run time: split_less_1, an i32, is the split less 1 */
LLVMValueRef fgk_arrive_n(fgb_emitter *e, LLVMValueRef counter_ptr, LLVMValueRef split_less_1);
/* 8-byte slot slot_index of the kernel's partials temp, and a volatile load
 * of it (other CTAs wrote it). */
LLVMValueRef fgk_partial_ptr(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index);
LLVMValueRef fgk_load_partial(fgb_emitter *e, fg_dtype acc, LLVMValueRef slot_index);

fg_opcode fgk_red_op(const fg_node *n); /* the combining op */
fg_dtype fgk_red_acc(const fg_node *n); /* the accumulator type */
bool fgk_is_reduction_result(const fg_value *o);
/* Seeds reduction n's result for the row at kept coordinates kc. */
/* amax/amin over an extent that is empty at run time: NaN (docs/format.md). */
LLVMValueRef fgk_empty_reduction(fgb_emitter *e, const fg_node *n, LLVMValueRef total,
                                 fg_dtype acc);
void fgk_seed_reduction(fgb_emitter *e, const fg_node *n, const LLVMValueRef *kc,
                        LLVMValueRef total);
/* The index of row-shaped value o for the row at kept coordinates kc. */
void fgk_row_index(fgb_emitter *e, const fg_value *o, const LLVMValueRef *kc, LLVMValueRef *idx);

typedef struct fgk_row_ctx {
  int nkept, nred;
  int64_t kept_sizes[FG_MAX_RANK], red_sizes[FG_MAX_RANK];
  LLVMValueRef kc[FG_MAX_RANK];
  LLVMValueRef rstart, rend;
} fgk_row_ctx;
/* The kept and reduced sizes of k's domain, in dim order, into a zeroed rc. */
void fgk_row_ctx_sizes(const fg_kernel *k, fgk_row_ctx *rc);
/* Sets lanes and uniform coordinates for the chunk at reduced linear index
 * r0 and fills the domain index of its lane 0. */
void fgk_row_chunk(fgb_emitter *e, const fgk_row_ctx *rc, LLVMValueRef r0, LLVMValueRef *idx);
void fgk_lane_index(fgb_emitter *e, const LLVMValueRef *idx0, int j, LLVMValueRef *idx);
/* Accumulates reduction n over one chunk (all lanes; identity where !valid). */
LLVMValueRef fgk_accumulate(fgb_emitter *e, const fg_node *n, const LLVMValueRef *idx0,
                            LLVMValueRef valid, LLVMValueRef acc);
/* A thread's chunks of one row (the persistent row kernels): the domain
 * index of lane 0, validity, and the lanes and uniform coordinates that
 * fgk_chunks_enter restores before a chunk's values are emitted. */
typedef struct fgk_chunks {
  int n;
  LLVMValueRef idx0[8][FG_MAX_RANK], valid[8];
  LLVMValueRef lanes[8][16], uni[8][64];
  int nuni[8];
} fgk_chunks;
/* Records chunk c after fgk_row_chunk filled idx0[c] (valid may be NULL). */
void fgk_chunks_save(fgb_emitter *e, fgk_chunks *ch, int c, LLVMValueRef valid);
void fgk_chunks_enter(fgb_emitter *e, const fgk_chunks *ch, int c);
/* Reduction n accumulated over every chunk, from acc; NULL on failure. */
LLVMValueRef fgk_chunks_accumulate(fgb_emitter *e, const fgk_chunks *ch, const fg_node *n,
                                   LLVMValueRef acc);
/* Full-domain output o stored for every chunk. */
void fgk_chunks_store_full(fgb_emitter *e, const fgk_chunks *ch, const fg_value *o);
/* Stores full-domain output o for one chunk (when valid). */
void fgk_store_full(fgb_emitter *e, const fg_value *o, const LLVMValueRef *idx0,
                    LLVMValueRef valid);
/* Stores the row-shaped outputs (and reduction results) of the row where
 * guard holds (NULL: thread 0). */
bool fgk_store_rows(fgb_emitter *e, const fgk_row_ctx *rc, LLVMValueRef guard);
/* The outputs of phase ph that are not full-domain rows: each computed by
 * every thread at the index index(e, o, ctx, idx) gives (values may need
 * block-wide work), then stored where guard holds. */
typedef void (*fgk_out_index)(fgb_emitter *e, const fg_value *o, const void *ctx,
                              LLVMValueRef *idx);
bool fgk_store_phase(fgb_emitter *e, fg_phase ph, fgk_out_index index, const void *ctx,
                     LLVMValueRef guard);

/* The storage of operand `operand` of the kernel's attention node (sdpa or
 * sdpa_bwd), read in place through *s (fg_plan_attn_source); NULL, with e
 * failed, where it is not in memory. */
LLVMValueRef fgk_attn_operand(fgb_emitter *e, int operand, fg_strided *s);

/* The row + column form of a row kernel (plan.h). */
bool fgb_emit_rowcol_kernel(fgb_emitter *e);

#endif
