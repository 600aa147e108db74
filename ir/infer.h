/* Shape and dtype inference, driven by the op table, and the verifier. */
#ifndef FG_INFER_H
#define FG_INFER_H
#include "diag.h"
#include "ir.h"
#include "op.h"

/* Checks n's operands and attribute values (dims in range, shapes that
 * match, ...) and sets the types of its results. Attribute *kinds* have been
 * checked by whoever built the node (the parser, against the op's attr specs).
 * Errors are reported at n->loc (or the attribute's own loc). */
bool fg_infer_node(fg_node *n, fg_diag *d);

/* MX formats: what is wrong with a type of a packed dtype (f4e2m1, two
 * elements a byte): it needs at least one dim, a static even innermost dim
 * and no layout, so that every row starts on a byte. NULL when it is fine
 * (or not packed). */
const char *fg_packed_type_problem(const fg_type *t);

/* Whole-graph verifier: SSA (each operand defined before use by a node of the
 * graph or a parameter), arity, required attributes, every result type equal
 * to what inference gives, a non-empty return list. */
bool fg_verify_graph(const fg_graph *g, fg_diag *d);

/* Pointwise ops: the promoted dtype of the operands (PyTorch's three tiers:
 * dimensioned tensors, 0-d tensors, weak scalars), and the dtype in which the
 * op is computed (f32 for f16/bf16/f8, else the type itself; bool/int ops in
 * int64). FG_DTYPE_INVALID when the operands do not promote. */
fg_dtype fg_pw_operand_dtype(const fg_node *n);
fg_dtype fg_pw_compute_dtype(const fg_node *n);

/* Reductions: fills mask[d] for each reduced input dim (negative dims
 * normalized; no dims= means all). Returns the number of reduced dims. */
int fg_reduce_mask(const fg_node *n, bool mask[FG_MAX_RANK]);
/* Reductions' accumulation dtype: f64 for f64 input, i64 for bool/int
 * inputs, else f32. */
fg_dtype fg_reduce_acc_dtype(fg_dtype in);
/* The dtype that holds a partial result of reduction n exactly: its input
 * dtype for amax/amin (a maximum is one of the values), else the
 * accumulation dtype. */
fg_dtype fg_reduce_partial_dtype(const fg_node *n);

/* A copy of g in a new arena with each symbolic dim named in names[] bound to
 * values[], types re-inferred; the size table keeps the facts of the sizes
 * not bound (names g does not have are ignored). NULL with an error in d
 * when a value breaks its size's facts (fg_sym_admits: the range, the
 * divisor; d->path names the declaring file) or a binding contradicts a
 * shape. */
fg_graph *fg_graph_specialize(const fg_graph *g, int n, const char *const *names,
                              const int64_t *values, fg_diag *d);
/* The same for one size bound to a value its facts need not admit: the code
 * generator's stand-in for a symbolic size (opt/symbolic.h), never run. */
fg_graph *fg_graph_bind_stand_in(const fg_graph *g, const char *name, int64_t value, fg_diag *d);
/* Python slicing of one dim: negative bounds count from the end, then both
 * are clamped to [0, size]; the start and the length (0 when empty). */
void fg_slice_bounds(int64_t size, int64_t start, int64_t end, int64_t step, int64_t *out_start,
                     int64_t *out_len);

/* A slice of dim i of node n where the dim is symbolic or a bound is an
 * expression of a size (docs/format.md 3.2.1): the start and the length as
 * expressions, assuming the bounds lie in the dim (fg_check_size_facts
 * proves it from the size's facts). A negative literal counts from the end,
 * an end of 2^62 or more is the end; step 1 only. Reports and returns
 * false otherwise. */
bool fg_slice_dim_sym(const fg_node *n, int i, fg_dim *start, fg_dim *len, fg_diag *d);
/* What the sizes' facts must prove of a graph with expressions of sizes:
 * every dim of every value at least 0 and every slice's bounds inside its
 * dim, for each value the facts admit (an error at the node otherwise). */
bool fg_check_size_facts(const fg_graph *g, fg_diag *d);

/* A copy of g in a new arena (the size table included). */
fg_graph *fg_graph_clone(const fg_graph *g);

#endif
