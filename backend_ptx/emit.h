/* Kernel lowering, internal to backend_ptx: the emitter state shared by the
 * value recursion (emit_value.c) and the kernel skeletons (emit_pointwise.c,
 * emit_row.c, emit_column.c).
 *
 * Every value a kernel needs is computed by recursion at an index (one LLVM
 * integer per dim of the value): parameters and values stored by other
 * kernels are loaded through their strides; view ops remap the index (or,
 * when a chain of views from memory composes into a strided view, load
 * directly through it); pointwise ops broadcast it; reductions of the kernel
 * itself are looked up (the skeleton seeds them once computed). A memo keyed
 * by (value, index values) makes each value at each index computed once, so
 * a row kept in registers is simply the memo of the row's elements.
 *
 * Lanes: a thread handles `vec` adjacent elements along the domain's last
 * dim; lane j's coordinate there is the LLVM value lanes[j] (lanes[0] is a
 * multiple of vec). A load whose index uses lanes[j] at a dim of stride 1,
 * with every other stride and the offset multiples of vec, is one vector
 * load for all lanes in the aligned variant. */
#ifndef FGB_EMIT_H
#define FGB_EMIT_H
#include "gpu_intrin.h"
#include "llvm_module.h"
#include "lower_value.h"
#include "plan.h"

typedef struct fgb_memo_entry {
  int value_id;
  int n;
  LLVMValueRef idx[FG_MAX_RANK];
  LLVMValueRef val;
  int next; /* chain in the bucket */
} fgb_memo_entry;

typedef struct fgb_emitter {
  fgb_module *m;
  LLVMBuilderRef b;
  LLVMContextRef ctx;
  const fg_plan *p;
  const fg_kernel *k;
  LLVMValueRef fn;
  LLVMValueRef *args; /* kernel parameters, as in k->args */
  LLVMTypeRef ity;    /* index type: i32 or i64 */
  bool aligned;       /* the aligned variant: vector accesses allowed */
  int vec;
  LLVMValueRef lanes[16];   /* lane coordinates along the domain's last dim */
  LLVMValueRef uniform[64]; /* lane-independent coordinates (set by skeletons) */
  int nuniform;
  int nvec_loads; /* vector loads emitted (for the plan's kernel-vec) */
  /* Flat lanes (issue 17, fg_kernel.flat; emit_pointwise.c): > 1, a
   * thread's lanes are `flat` consecutive linear indices of the domain from
   * flat_base (a multiple of flat), lane j at coordinates flat_idx[j]. A
   * load of a tensor dense in the domain's order at a lane's coordinates is
   * one vector load for all lanes (aligned variant); vec is 1 meanwhile, so
   * nothing vectorizes along the last dim. */
  int flat;
  LLVMValueRef flat_base;
  LLVMValueRef (*flat_idx)[FG_MAX_RANK];
  /* memo: open hashing with LIFO removal for loop scopes */
  fgb_memo_entry *memo;
  int nmemo, capmemo;
  int *buckets;
  int nbuckets;
  char err[512];
  bool failed;
  /* Prefetch mode: fgb_emit_value only issues the loads a value needs (and
   * their index arithmetic), memoized, so that the loads of every chunk of a
   * thread can be issued before the first one is used. */
  bool prefetch;
  /* Non-NULL: parameters are read again (the row + column form's reload):
   * loads without !invariant.load, through base + reload_zero, an opaque
   * zero (inline asm), so LLVM cannot merge them with the first reads. */
  LLVMValueRef reload_zero;
  /* Software pipelining of a loop's row loads through shared memory (the
   * row + column form): in FGB_PIPE_ISSUE, each 16-byte vector load indexed
   * by one of pipe_rows[] (the coordinates of the rows walked) becomes an
   * asynchronous copy into this thread's slot of buffer pipe_buf; in
   * FGB_PIPE_READ the same walk reads the slots back. Both walks must meet
   * the same loads in the same order: the same code at the same memo
   * state. Slots: one region of the shared array pipe_arena (the first
   * k->pipe_bytes of it) per load, [2 buffers][pieces][threads], at byte
   * `off`. */
  int pipe_mode;
  LLVMValueRef pipe_rows[64];
  int npipe_rows;
  LLVMValueRef pipe_buf;
  LLVMValueRef pipe_arena;
  int64_t pipe_used;
  struct fgb_pipe_slot {
    int64_t off;
    int pieces;
  } *pipe;
  int npipe, cappipe, pipe_pos;
  /* issue 21 (rowpeel): non-NULL in a peeled row kernel (fg_kernel.peeled):
   * the row's kept coordinates (one a dim before the last, the reduced
   * one). lanes[0] is then not a multiple of vec but the position where
   * the domain's dense linear index is: a load or store is one vector
   * only where its operand's element offset agrees with that index modulo
   * vec (peel_aligned in emit_value.c). */
  const LLVMValueRef *peel_kc;
} fgb_emitter;

enum { FGB_PIPE_OFF, FGB_PIPE_ISSUE, FGB_PIPE_READ };

bool fgb_emitter_init(fgb_emitter *e, fgb_module *m, const fg_plan *p, const fg_kernel *k,
                      bool aligned);
void fgb_emitter_free(fgb_emitter *e);
void fgb_fail(fgb_emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Memo scopes: values memoized after fgb_memo_mark() are forgotten by
 * fgb_memo_release(mark) (loop bodies). */
int fgb_memo_mark(const fgb_emitter *e);
void fgb_memo_release(fgb_emitter *e, int mark);
void fgb_memo_put(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx, LLVMValueRef val);
LLVMValueRef fgb_memo_get(const fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx);

/* v's register form at idx (v->type.rank entries). */
LLVMValueRef fgb_emit_value(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx);
/* rand / randn value v at idx (emit_random.c). */
LLVMValueRef fgb_emit_random(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx);
/* Issues the loads v needs at idx (prefetch mode, see above). */
void fgb_prefetch_value(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx);
/* Stores v's register form `val` at idx into v's buffer (dense). */
void fgb_emit_store(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx, LLVMValueRef val);
/* Stores vals[0..vec) for lanes 0..vec-1 at idx (whose last entry is
 * lanes[0]): one vector store in the aligned variant. */
void fgb_emit_store_lanes(fgb_emitter *e, const fg_value *v, const LLVMValueRef *idx,
                          LLVMValueRef *vals);

/* Helpers for skeletons. */
LLVMValueRef fgb_const(fgb_emitter *e, int64_t v);       /* in the index type */
LLVMValueRef fgb_thread_index(fgb_emitter *e, int axis); /* tid, in the index type */
LLVMValueRef fgb_block_index(fgb_emitter *e, int axis);  /* ctaid, in the index type */
/* The CTA whose share of the work this CTA does (grid x): ctaid.x, or for
 * a kernel in descending order (fg_kernel.reverse) nctaid.x - 1 - ctaid.x */
LLVMValueRef fgb_work_block(fgb_emitter *e);
/* Splits a linear index over sizes[0..n) (row-major) into coordinates. */
void fgb_delinearize(fgb_emitter *e, LLVMValueRef lin, const int64_t *sizes, int n,
                     LLVMValueRef *out);
/* if (cond) { the caller emits } — returns the merge block to continue at
 * after fgb_end_if. */
LLVMBasicBlockRef fgb_begin_if(fgb_emitter *e, LLVMValueRef cond);
void fgb_end_if(fgb_emitter *e, LLVMBasicBlockRef merge);
/* Whether a value's shape is the kernel's full domain. */
bool fgb_is_full(const fgb_emitter *e, const fg_value *v);
/* The value of the graph's symbolic size (opt/symbolic.h) in the index
 * type: the kernel's `z0` argument. */
LLVMValueRef fgb_sym_value(fgb_emitter *e);
/* An extent of the domain as a value: a constant, or the symbolic size
 * times the rest when it involves it. */
LLVMValueRef fgb_extent(fgb_emitter *e, int64_t extent);
/* ceil(v / c) for a non-negative index value (a constant stays one). */
LLVMValueRef fgb_ceil_div(fgb_emitter *e, LLVMValueRef v, int64_t c);
/* The buffer argument that holds stored value or parameter v. */
LLVMValueRef fgb_buffer_of(fgb_emitter *e, fg_buf_ref b);

/* Deterministic block-wide reduction of one accumulator per thread; every
 * thread gets the total. slot: a distinct shared-memory slot per call. */
LLVMValueRef fgb_block_reduce(fgb_emitter *e, fg_opcode op, fg_dtype acc, LLVMValueRef v, int slot);
/* Each warp's total of n accumulators (shuffles, fixed order; every lane
 * gets it); no barrier. */
void fgb_warp_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                       LLVMValueRef *v);
/* The total of each group of `lanes` lanes (a power of two <= 32: xor
 * shuffles with offsets below it, so lanes never mix groups; fixed order;
 * every lane of the group gets it); no barrier. */
void fgb_group_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                        LLVMValueRef *v, int lanes);
/* The same for n accumulators at once (slots first_slot..+n-1), with one
 * barrier; v[i] receives total i. */
void fgb_block_reduce_n(fgb_emitter *e, int n, const fg_opcode *ops, const fg_dtype *accs,
                        LLVMValueRef *v, int first_slot);

/* Kernel skeletons, one file each (emit_pointwise.c, emit_row.c,
 * emit_column.c; the row + column form in emit_rowcol.c): emit the kernel
 * body after parameters are set up. */
bool fgb_emit_pointwise_kernel(fgb_emitter *e);
bool fgb_emit_row_kernel(fgb_emitter *e);
bool fgb_emit_column_kernel(fgb_emitter *e);
/* issue 19: the sdpa forward (emit_attention.c) */
bool fgb_emit_attention_kernel(fgb_emitter *e);
/* issue 20: the index_add kernels, deterministic (emit_scatter.c) */
bool fgb_emit_scatter_kernel(fgb_emitter *e);
/* issue 19: the sdpa_bwd kernels, dq (with delta) or dk, dv (emit_attention_bwd.c) */
bool fgb_emit_attention_bwd_kernel(fgb_emitter *e);
/* issue 20 (scan): cumsum's column and row scans and chunk sums (emit_scan.c) */
bool fgb_emit_scan_kernel(fgb_emitter *e);

#endif
