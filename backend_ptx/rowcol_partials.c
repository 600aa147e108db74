/* The row + column form's partials; see rowcol_partials.h. */
#include "rowcol_partials.h"

#include "emit_skel.h"
#include "infer.h"

static LLVMValueRef partial_base(fgb_emitter *e) {
  return fgb_buffer_of(e, (fg_buf_ref){FG_BUF_TEMP, e->k->partial_temp});
}

/* Rows of column partials: one per CTA, or one per cluster. */
int64_t fgr_partial_rows(const fg_kernel *k) {
  return k->cluster > 1 ? k->grid[0] / k->cluster : k->grid[0];
}

/* Column partials are stored in fg_reduce_partial_dtype (amax of bf16:
 * bf16, exactly), which halves their traffic against f32; each column
 * reduction's [partial_rows, R] region starts 16-byte aligned. */
static int64_t col_region(const fg_kernel *k, int i) {
  int64_t off = 0;
  for (int q = 0; q < i; q++)
    off +=
        (fgr_partial_rows(k) * k->red * fg_dtype_size(fg_reduce_partial_dtype(k->cols[q])) + 15) /
        16 * 16;
  return off;
}

/* &partial of column reduction i for partial row g (CTA or cluster) at column col. */
LLVMValueRef fgr_col_partial(fgb_emitter *e, int i, LLVMValueRef g, LLVMValueRef col) {
  const fg_kernel *k = e->k;
  int sz = fg_dtype_size(fg_reduce_partial_dtype(k->cols[i]));
  LLVMValueRef el = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, g, fgb_const(e, k->red), ""), col, "");
  LLVMValueRef byte = LLVMBuildAdd(e->b, fgb_const(e, col_region(k, i)),
                                   LLVMBuildMul(e->b, el, fgb_const(e, sz), ""), "");
  return fgb_gep_global(e->m, partial_base(e), LLVMInt8TypeInContext(e->ctx), byte);
}

/* &partial of tail reduction i for CTA g (8-byte slots). */
LLVMValueRef fgr_tail_partial(fgb_emitter *e, int i, LLVMValueRef g) {
  const fg_kernel *k = e->k;
  LLVMValueRef el = LLVMBuildAdd(e->b, fgb_const(e, (int64_t)i * k->grid[0]), g, "");
  LLVMValueRef byte = LLVMBuildAdd(e->b, fgb_const(e, col_region(k, k->ncols)),
                                   LLVMBuildMul(e->b, el, fgb_const(e, 8), ""), "");
  return fgb_gep_global(e->m, partial_base(e), LLVMInt8TypeInContext(e->ctx), byte);
}

/* ---- clusters (k->cluster = C > 1, sm_90) ----
 * After its rows, each CTA puts its column accumulators in its shared
 * memory (the exchange buffer, one column reduction at a time), and CTA r
 * of the cluster sums columns slice r over the C CTAs (distributed shared
 * memory, in rank order) into its cluster's row of partials: C times
 * fewer partials to write and for the combiners to read. Vectors of W
 * lanes (16 bytes of the widest partial) where the slices allow. */

enum { SLICE_ROUNDS = 8 };

int fgr_vector_lanes(const fg_kernel *k) {
  int psz = 1;
  for (int i = 0; i < k->ncols; i++) {
    int z = fg_dtype_size(fg_reduce_partial_dtype(k->cols[i]));
    if (z > psz)
      psz = z;
  }
  return 16 / psz;
}

static int cluster_lanes(const fg_kernel *k) {
  int w = fgr_vector_lanes(k);
  return w > 1 && k->red % ((int64_t)k->cluster * w) == 0 ? w : 1;
}

/* Columns per slice: a multiple of the lanes. */
static int64_t cluster_slice(const fg_kernel *k) {
  int64_t W = cluster_lanes(k), C = k->cluster;
  return ((k->red + C - 1) / C + W - 1) / W * W;
}

static LLVMValueRef smem_at(fgb_emitter *e, LLVMValueRef base, LLVMValueRef byte) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  if (LLVMTypeOf(byte) != i32)
    byte = LLVMBuildTrunc(e->b, byte, i32, "");
  return fgb_gep(e->m, base, LLVMInt8TypeInContext(e->ctx), byte);
}

/* This CTA's accumulators of column reduction i into x, then its slice of
 * the cluster's sums into partial row cid. */
void fgr_cluster_slice_sums(fgb_emitter *e, int i, LLVMValueRef x, LLVMValueRef rank,
                            LLVMValueRef cid, const LLVMValueRef *r0, const LLVMValueRef *valid,
                            LLVMValueRef cacc[FGR_MAX_COLS][FGR_MAX_CHUNKS][16]) {
  const fg_kernel *k = e->k;
  const fg_node *n = k->cols[i];
  fg_dtype ad = fgk_red_acc(n), pd = fg_reduce_partial_dtype(n);
  int psz = fg_dtype_size(pd), V = e->vec, W = cluster_lanes(k);
  int per = 16 / psz < V ? 16 / psz : V;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx);
  for (int c = 0; c < k->chunks; c++) {
    LLVMBasicBlockRef m = valid[c] ? fgb_begin_if(e, valid[c]) : NULL;
    LLVMValueRef vals[16];
    for (int j = 0; j < V; j++)
      vals[j] = fgb_convert(e->m, LLVMBuildLoad2(e->b, fgb_reg_type(e->m, ad), cacc[i][c][j], ""),
                            ad, pd);
    for (int j = 0; j < V; j += per) {
      LLVMValueRef byte =
          LLVMBuildMul(e->b, LLVMBuildAdd(e->b, r0[c], fgb_const(e, j), ""), fgb_const(e, psz), "");
      fgb_store_vec(e->m, smem_at(e, x, byte), pd, per, (unsigned)(per * psz), vals + j);
    }
    if (m)
      fgb_end_if(e, m);
  }
  fgb_cluster_barrier(e->m);
  int64_t S = cluster_slice(k), C = k->cluster, T = k->block;
  /* Every round's distributed loads are issued before any is summed: the
   * last CTA to finish waits one remote latency here, not one a round
   * (docs/benchmarks.md, S17). */
  int64_t rounds = (S / W + T - 1) / T, batch = rounds < SLICE_ROUNDS ? rounds : SLICE_ROUNDS;
  LLVMValueRef id = fgb_reduce_identity(e->m, fgk_red_op(n), ad);
  fgk_loop l;
  LLVMValueRef v0 =
      fgk_loop_begin(e, &l, fgb_thread_index(e, 0), fgb_const(e, S / W), fgb_const(e, T * batch));
  LLVMValueRef col[SLICE_ROUNDS], ok[SLICE_ROUNDS], got[SLICE_ROUNDS][8][16];
  for (int r = 0; r < batch; r++) {
    LLVMValueRef v = LLVMBuildAdd(e->b, v0, fgb_const(e, r * T), "");
    col[r] = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, rank, fgb_const(e, S), ""),
                          LLVMBuildMul(e->b, v, fgb_const(e, W), ""), "");
    ok[r] = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v, fgb_const(e, S / W), ""),
                         LLVMBuildICmp(e->b, LLVMIntSLT, col[r], fgb_const(e, k->red), ""), "");
    LLVMValueRef colc = LLVMBuildSelect(e->b, ok[r], col[r], fgb_const(e, 0), "");
    for (int q = 0; q < C; q++) {
      LLVMValueRef p =
          fgb_cluster_map(e->m, smem_at(e, x, LLVMBuildMul(e->b, colc, fgb_const(e, psz), "")),
                          LLVMConstInt(i32, (unsigned long long)q, 0));
      fgb_load_vec(e->m, p, pd, W, (unsigned)(W * psz), 0, got[r][q]);
    }
  }
  for (int r = 0; r < batch; r++) {
    LLVMValueRef acc[16];
    for (int j = 0; j < W; j++) {
      acc[j] = id;
      for (int q = 0; q < C; q++)
        acc[j] = fgb_reduce_combine(e->m, fgk_red_op(n), acc[j],
                                    fgb_convert(e->m, got[r][q][j], pd, ad), ad);
      acc[j] = fgb_convert(e->m, acc[j], ad, pd);
    }
    LLVMBasicBlockRef m = fgb_begin_if(e, ok[r]);
    fgb_store_vec(e->m, fgr_col_partial(e, i, cid, col[r]), pd, W, (unsigned)(W * psz), acc);
    fgb_end_if(e, m);
  }
  fgk_loop_end(e, &l, v0);
  fgb_cluster_barrier(e->m); /* x is rewritten next, or read by no one */
}
