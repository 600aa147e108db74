/* The row + column form's partials (emit_rowcol.c): where each column
 * and tail reduction's partials live in the kernel's partial temp, and how
 * a thread-block cluster sums its CTAs' column partials in distributed
 * shared memory before writing them (k->cluster > 1, sm_90). */
#ifndef FG_ROWCOL_PARTIALS_H
#define FG_ROWCOL_PARTIALS_H
#include "emit.h"

enum { FGR_MAX_COLS = 4, FGR_MAX_CHUNKS = 8 };

/* Partials per 16-byte vector: of the widest partial dtype. */
int fgr_vector_lanes(const fg_kernel *k);
/* Rows of column partials: one per CTA, or one per cluster. */
int64_t fgr_partial_rows(const fg_kernel *k);
/* &partial of column reduction i for partial row g at column col. */
LLVMValueRef fgr_col_partial(fgb_emitter *e, int i, LLVMValueRef g, LLVMValueRef col);
/* &partial of tail reduction i for CTA g. */
LLVMValueRef fgr_tail_partial(fgb_emitter *e, int i, LLVMValueRef g);
/* This CTA's accumulators cacc of column reduction i (its chunks start at
 * columns r0[c], valid[c]) into shared buffer x (k->xchg_bytes), then its slice (rank) of
 * the cluster's sums into partial row cid; cluster barriers around. */
void fgr_cluster_slice_sums(fgb_emitter *e, int i, LLVMValueRef x, LLVMValueRef rank,
                            LLVMValueRef cid, const LLVMValueRef *r0, const LLVMValueRef *valid,
                            LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16]);

#endif
