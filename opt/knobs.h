/* Schedule knobs: the experiments `fusec --knob NAME=VALUE` sets, each
 * declared once (name, range, default, description), as LLVM's cl::opt
 * declarations in LoopUnrollPass.cpp. The table generates fusec's knob
 * list, the range check (a value out of range is a usage error) and the
 * plan's printout (`--emit plan` names the knobs a plan was built with).
 * Knobs are read by the scheduler only; the code generator reads the
 * decisions they lead to from fg_kernel. Not a stable interface:
 * they exist to time schedule variants on the GPU. */
#ifndef FG_KNOBS_H
#define FG_KNOBS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* X(NAME, lowest, highest, form, default, description) */
#define FG_KNOB_LIST(X)                                                                            \
  X(PW_CHUNKS, 1, 8, FG_KNOB_ANY, "auto", "vector chunks a pointwise thread handles")              \
  X(PW_BLOCK, 32, 1024, FG_KNOB_WARPS, "auto", "threads a pointwise CTA")                          \
  X(ROWCOL, 0, 2, FG_KNOB_ANY, "1",                                                                \
    "row + column form: 0 never, 1 where the schedule's rule says, 2 whatever the shape")          \
  X(ROWCOL_THREADS, 32, 1024, FG_KNOB_WARPS, "auto", "threads a row + column CTA")                 \
  X(ROWCOL_RELOAD, 0, 1, FG_KNOB_ANY, "auto",                                                      \
    "1: outputs re-read the row (L1), not keep it in registers")                                   \
  X(ROWCOL_PIPE, 0, 1, FG_KNOB_ANY, "auto",                                                        \
    "1: the next row group is copied to shared memory meanwhile")                                  \
  X(ROWCOL_ROWS, 1, 4, FG_KNOB_POW2, "auto", "rows a row + column group (must divide the rows)")   \
  X(ROWCOL_CTAS, 1, 64, FG_KNOB_ANY, "auto", "row + column CTAs an SM (at most what fits)")        \
  X(ROWCOL_FILL, 0, 1, FG_KNOB_ANY, "0",                                                           \
    "1: a CTA in every slot, rather than the fewest CTAs for the same rows a CTA")                 \
  X(ROWCOL_EARLY, 0, 1, FG_KNOB_ANY, "1", "0: combiners arrive after their rows, not before")      \
  X(ROWCOL_DEFER, 0, 1, FG_KNOB_ANY, "1", "0: sum each group's rows at once (no deferred totals)") \
  X(ROWCOL_PACK, 0, 1, FG_KNOB_ANY, "1", "0: accumulate max/abs in f32, not bf16 pairs")           \
  X(ROWCOL_CVEC, 1, 32, FG_KNOB_ANY, "auto",                                                       \
    "loads a combiner thread sums before its group stage")                                         \
  X(ROWCOL_CW, 8, 1024, FG_KNOB_POW2, "auto",                                                      \
    "columns a combiner block (at most the CTA's threads)")                                        \
  X(CLUSTER, 1, 8, FG_KNOB_POW2, "auto", "CTAs a cluster of the row + column form")                \
  X(COL_SPLIT, 1, 65535, FG_KNOB_ANY, "auto",                                                      \
    "CTAs a column reduction's reduced extent is split over (at most the schedule's limit)")       \
  X(COL_ROWS, 1, 8, FG_KNOB_ANY, "auto", "rows a column-reduction thread loads an iteration")      \
  X(COL_VEC, 1, 16, FG_KNOB_POW2, "auto",                                                          \
    "outputs a column-reduction thread owns (at most 16 bytes of them)")                           \
  X(COL_COMBINE, 1, 16, FG_KNOB_ANY, "auto", "partials a column combiner loads before summing")    \
  X(TRACE, 0, 1, FG_KNOB_ANY, "0", "1: a %globaltimer timeline of every row + column CTA")         \
  X(COST_GBS, 100, 100000, FG_KNOB_ANY, "target's",                                                \
    "copy bandwidth (GB/s) the cost model in --emit plan assumes")                                 \
  X(ATTN_LDMATRIX, 0, 1, FG_KNOB_ANY, "1",                                                         \
    "0: attention reads K, V fragments by plain shared loads")                                     \
  X(ATTN_STAGES, 1, 3, FG_KNOB_ANY, "auto",                                                        \
    "K, V blocks in shared memory (1: attention loads each block, then computes it)")              \
  X(ATTN_BC, 32, 128, FG_KNOB_POW2, "auto", "keys an attention key block (32, 64 or 128)")         \
  X(ATTN_WARP_ROWS, 16, 32, FG_KNOB_POW2, "auto", "query rows an attention warp owns (16 or 32)")  \
  X(L2_REVERSE, 0, 2, FG_KNOB_ANY, "1",                                                            \
    "kernels in descending order: 0 never, 1 re-reads of a tensor past L2, 2 every one that can")  \
  X(ROW_PACK, 0, 1, FG_KNOB_ANY, "auto",                                                           \
    "short rows: 1 several rows a CTA (lanes a row), 0 a CTA a row")                               \
  X(ROW_PACK_BLOCK, 32, 1024, FG_KNOB_WARPS, "auto", "threads a CTA of packed short rows")         \
  /* scatter2 */                                                                                   \
  X(SCATTER_SORT, 0, 1, FG_KNOB_ANY, "auto",                                                       \
    "scatters: 1 count, scan, fill and order in one CTA where 16 sources a thread fit, 0 never")   \
  /* wgmma (issue 19) */                                                                           \
  X(ATTN_WGMMA, 0, 1, FG_KNOB_ANY, "1",                                                            \
    "sm_90a: 0 keeps the attention forward on mma.sync (1: wgmma at head dims 64, 128)")           \
  X(ATTN_WG, 1, 2, FG_KNOB_ANY, "auto", "warpgroups (64 query rows each) a wgmma attention CTA")   \
  /* gnfuse: long rows with full-size outputs, a row a cluster */                                  \
  X(ROW_CLUSTER, 0, 1, FG_KNOB_ANY, "1",                                                           \
    "0: a long row with full-size outputs takes one CTA, not a thread-block cluster")              \
  /* issue 17, flat vectors */                                                                     \
  X(PW_FLAT, 0, 2, FG_KNOB_ANY, "1",                                                               \
    "pointwise lanes over the linear index: 0 never, 1 where the cost model says, 2 wherever "     \
    "valid")                                                                                       \
  /* issue 21 (rowpeel) */                                                                         \
  X(ROW_PEEL, 0, 1, FG_KNOB_ANY, "1",                                                              \
    "rows whose length vec does not divide: 1 head, vector body and tail, 0 a narrower vec")       \
  /* issue 20: scan */                                                                             \
  X(SCAN_CHUNKS, 1, 1024, FG_KNOB_ANY, "auto",                                                     \
    "chunks a scan's scanned extent is cut into (1: one pass, no chunk sums)")                     \
  X(SCAN_ROWS, 1, 32, FG_KNOB_ANY, "auto", "rows a column-scan thread loads ahead")                \
  X(SCAN_VEC, 1, 16, FG_KNOB_POW2, "auto",                                                         \
    "columns a column-scan thread owns (at most the rule's)")                                      \
  /* wgmmabwd: the attention backward by wgmma (issue 19) */                                       \
  X(ATTN_BWD_WGMMA, 0, 1, FG_KNOB_ANY, "1",                                                        \
    "sm_90a: 0 the attention backward by mma.sync instead of wgmma")                               \
  /* wgmma2 (issue 19) */                                                                          \
  X(ATTN_OVERLAP, 0, 1, FG_KNOB_ANY, "auto",                                                       \
    "sm_90a wgmma attention: 1 issues the next block's S = Q K^T and this block's P V before the " \
    "softmax (3 K, V stages or more; auto: at head dim 128)")                                      \
  /* embbwd2: the index_add SUM's chunks (issue 20) */                                             \
  X(SCATTER_CHUNKS, 1, 4, FG_KNOB_ANY, "auto",                                                     \
    "index_add's SUM: result vectors a thread takes (block-strided, all loads first)")             \
  /* sched17 (issue 17): pointwise widths from dense operands, row clusters' occupancy */          \
  X(PW_FLAT_DENSE, 0, 1, FG_KNOB_ANY, "1",                                                         \
    "1: a pointwise kernel's flat width and loads in flight count its full-size operands only, "   \
    "not broadcasts")                                                                              \
  X(ROW_CLUSTER_SIZE, 2, 8, FG_KNOB_POW2, "auto",                                                  \
    "CTAs a cluster of a row a cluster (auto: the fewest with 32 KB slices; ignored where a "      \
    "slice would not stay in registers)")                                                          \
  X(ROW_VEC16, 0, 1, FG_KNOB_ANY, "auto",                                                          \
    "1: a row kernel's (or its peel's) vector is 16 bytes of the row's widest element, not 16 "    \
    "elements where no argument has the domain's last dim (a reshape); 0: never (auto: a row a "   \
    "cluster only)")                                                                               \
  X(ROW_CLUSTER_PEEL, 0, 1, FG_KNOB_ANY, "0",                                                      \
    "1: a row a cluster is kept rather than peeled into one CTA (rows not a multiple of 16 "       \
    "bytes)")                                                                                      \
  X(ROW_CLUSTER_BLOCK, 32, 1024, FG_KNOB_WARPS, "256",                                             \
    "threads a CTA of a row a cluster (ignored where a thread would take more than 8 chunks)")     \
  /* colthr (issue 17): several threads a column of a column reduction */                          \
  X(COL_THREADS, 1, 1024, FG_KNOB_ANY, "auto",                                                     \
    "threads a column of a column reduction (1: one; at most 1024 a CTA and 16 KiB of totals)")    \
  /* attnpp (issue 19) */                                                                          \
  X(ATTN_PINGPONG, 0, 2, FG_KNOB_ANY, "auto",                                                      \
    "sm_90a wgmma attention, 2 warpgroups (turns the overlap on): named barriers order the "       \
    "groups' wgmmas, 1: S of group 0, S of group 1, then P V; 2: group 0's S and P V, then 1's; "  \
    "0: none (auto: 2 where the overlapped loop runs two warpgroups)")                             \
  X(ATTN_LPT, 0, 65535, FG_KNOB_ANY, "0",                                                          \
    "causal attention forward: the heaviest query blocks of all (batch, head) first, in sections " \
    "of pairs, 1: as many as half the L2 holds K, V of, N > 1: N (0: a pair's blocks in turn)")    \
  /* zip-store (issue 19): producers write straight into a cat's slices */                         \
  X(ZIP_STORE, 0, 1, FG_KNOB_ANY, "1",                                                             \
    "0: a cat of attention-backward results is a kernel of its own (1: they write its slices)")    \
  /* embscan: index_add along dim 0 with few sources, one kernel */                                \
  X(SCATTER_SELECT, 0, 1, FG_KNOB_ANY, "auto",                                                     \
    "index_add along dim 0: 1 each SUM CTA selects its slices' sources from the whole index (no "  \
    "sort), 0 never")                                                                              \
  /* attnws (issue 19) */                                                                          \
  X(ATTN_WS, 0, 2, FG_KNOB_ANY, "0",                                                               \
    "sm_90a wgmma attention: 1 a producer warp loads K, V into a 3-stage ring with full/empty "    \
    "mbarriers (no CTA barrier in the loop; turns the overlap on), 2: and pingpong of the groups") \
  /* issue 19: the overlapped wgmma loop's wait for O (emit_attention.c wg_wait_softmax) */        \
  X(ATTN_ORDERED_WAIT, 0, 1, FG_KNOB_ANY, "1",                                                     \
    "sm_90a overlapped attention: 0 waits for P V where ptxas places the wait, 1 after the "       \
    "softmax's row sums (a shared-memory store orders it)")                                        \
  /* issue 19: the wgmma attention backward's products overlapped (emit_attention_bwd.c) */        \
  X(ATTN_BWD_OVERLAP, 0, 2, FG_KNOB_ANY, "auto",                                                   \
    "sm_90a attention backward: 1 issues S and dP as two wgmma groups and computes the "           \
    "exponentials while dP runs (dk, dv: dS while dV += P dO runs); 0 one chain each, waited "     \
    "for; 2 the dq kernel only (auto: 1 but for dk, dv at a looped block of 128)")                 \
  X(ATTN_BWD_LPT, 0, 2, FG_KNOB_ANY, "auto",                                                       \
    "attention backward, causal: 1 launches the blocks heaviest first across every (batch, "       \
    "head) (the blocks the grid's slow dim), 0 each (batch, head)'s blocks in turn; 2 the order "  \
    "of 1 in sections of (batch, head) pairs whose tiles fit half the L2, the grid kept (auto: 1 " \
    "where every head's looped tiles fit the L2, else 2)")                                         \
  X(ATTN_BWD_PINGPONG, 0, 2, FG_KNOB_ANY, "auto",                                                  \
    "sm_90a attention backward with the overlap, 2 warpgroups: group 1 issues its S and dP after " \
    "group 0 has issued its own (1) or its dV too (2; dq: 1); 0 never (auto: dq at bc 128)")       \
  /* issue 20: one-pass logsumexp (opt/logsumexp.c) */                                             \
  X(ROW_LSE, 0, 8, FG_KNOB_ANY, "auto",                                                            \
    "a long row's max and sum of exponentials streamed in one pass: N vectors a thread at a time " \
    "(auto: 16 values), 0: kept in registers in one large CTA")                                    \
  /* issue 17: long rows whose outputs need their totals (schedule.c stream_row) */                \
  X(ROW_STREAM, 0, 2, FG_KNOB_ANY, "1",                                                            \
    "a long row with full-size outputs: 1 streamed where its reductions read no row-sized "        \
    "tensor (kept in registers otherwise), 2 streamed (the row re-read each phase), 0 never")      \
  /* issue 17: late column reductions (opt/segment.c late_nodes) */                                \
  X(LATE_COLUMNS, 0, 1, FG_KNOB_ANY, "1",                                                          \
    "1: column reductions no reduction needs join kernels after the rest, 0: in graph order")      \
  /* issue 17/20: concurrent kernels (opt/streams.c) */                                            \
  X(STREAMS, 0, 1, FG_KNOB_ANY, "1",                                                               \
    "1: groups of kernels independent of the rest run on a second stream, 0: one stream")          \
  /* issue 17/20: programmatic dependent launch (opt/pdl.c) */                                     \
  X(PDL, 0, 2, FG_KNOB_ANY, "1",                                                                   \
    "sm_90: a kernel after another on its stream launches while that one runs and waits for it "   \
    "in the kernel: 1 on one stream or beside a second one that is resident at its start, 2 on "   \
    "every stream, 0 never")

typedef enum {
#define FG_KNOB_ENUM(name, lo, hi, form, dflt, help) FG_KNOB_##name,
  FG_KNOB_LIST(FG_KNOB_ENUM)
#undef FG_KNOB_ENUM
      FG_NKNOBS
} fg_knob;

typedef enum {
  FG_KNOB_ANY,   /* any value in the range */
  FG_KNOB_WARPS, /* a multiple of 32 */
  FG_KNOB_POW2,  /* a power of two */
} fg_knob_form;

typedef struct fg_knob_def {
  const char *name;
  int64_t lo, hi;
  fg_knob_form form;
  const char *dflt; /* "auto": the schedule chooses */
  const char *help;
} fg_knob_def;

extern const fg_knob_def fg_knob_defs[FG_NKNOBS];

/* The knobs a compilation was given: set[i] says whether knob i was. */
typedef struct fg_knobs {
  bool set[FG_NKNOBS];
  int64_t val[FG_NKNOBS];
} fg_knobs;

/* Parses "NAME=VALUE" into *ks. False with a message in err (cap bytes)
 * for an unknown name, a malformed value or one out of the knob's range. */
bool fg_knob_parse(fg_knobs *ks, const char *text, char *err, size_t cap);
/* Whether knob id was given; *v then holds its value. */
bool fg_knob_get(const fg_knobs *ks, fg_knob id, int64_t *v);
/* The table as help text, one knob a line. */
void fg_knob_help(FILE *f);
/* " NAME=VALUE" for every knob given (nothing when none). */
void fg_knob_print(FILE *f, const fg_knobs *ks);

#endif
