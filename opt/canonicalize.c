/* Canonicalization: local rewrites of pointwise nodes whose results are
 * bitwise the same for every input (inf, -0.0 and NaN included; NaN stays
 * NaN, its payload is not tracked: the GPU's conversions do not keep it
 * either) and whose replacement has the same dtype, shape and weak flag.
 *
 *   folding     a pointwise op of literals and `full`s becomes a literal or a
 *               `full`, its value computed by the reference interpreter on
 *               the op itself (so folding is the interpreter's semantics);
 *               only ops the backend computes bit-equal to the interpreter
 *               (lower_pointwise.c): not exp/log/sin/pow/... in floats, whose
 *               GPU results are libdevice's and differ by ulps
 *   identities  mul(x,1) mul(1,x) div(x,1); float add(x,-0.0) add(-0.0,x)
 *               sub(x,+0.0) (x + +0.0 is not x for x = -0.0); integer and
 *               bool add/sub of 0; logical_and(x,true) logical_or(x,false);
 *               neg(neg x), logical_not(logical_not x); cast to x's dtype;
 *               floor/ceil/round/trunc of integers; maximum(x,x),
 *               minimum(x,x), where(c,x,x), where(true,x,y), where(false,y,x);
 *               abs relu sign floor ceil round trunc of themselves
 *               (idempotent)
 *   cast chains cast(cast(x,A),B): x when B is x's dtype and A holds every
 *               value of it exactly; cast(x,B) when A holds x exactly and
 *               either A is of x's category (the conversion A->B then sees
 *               the same number as x->B would) or B holds x exactly too
 *
 * A literal is never the replacement x: a float literal keeps its full
 * double value (read as f64 by f64 ops) while an op's result is rounded to
 * f32, so "x" and "op(x)" differ there; literal operands are folded instead.
 * Uses are forwarded as nodes are visited, so the pass is linear; replaced
 * nodes stay for dce. */
#include <math.h>
#include <stdlib.h>

#include "build.h"
#include "interp.h"
#include "passes.h"

/* ---- exact representability ---- */

#define B(t) (1u << (t))
#define FLOATS_F16 (B(FG_F16) | B(FG_F32) | B(FG_F64))
/* holds[a]: the dtypes that represent every value of a exactly, so a cast
 * a -> b -> a is the identity. bool is 0/1, held by all; i8/u8 fit f16 and
 * bf16 (integers up to 2048 and 256 are exact), i16 fits f32 (24-bit
 * significand), i32 fits f64; f8 values fit f16 and bf16 (fewer exponent
 * and mantissa bits; e4m3 has no inf). Nothing fits bool; f16 and bf16
 * do not fit each other; no float fits an integer. */
static const unsigned holds[FG_DTYPE_COUNT] = {
    [FG_BOOL] = (1u << FG_DTYPE_COUNT) - 1,
    [FG_I8] = B(FG_I8) | B(FG_I16) | B(FG_I32) | B(FG_I64) | B(FG_BF16) | FLOATS_F16,
    [FG_U8] = B(FG_U8) | B(FG_I16) | B(FG_I32) | B(FG_I64) | B(FG_BF16) | FLOATS_F16,
    [FG_I16] = B(FG_I16) | B(FG_I32) | B(FG_I64) | B(FG_F32) | B(FG_F64),
    [FG_I32] = B(FG_I32) | B(FG_I64) | B(FG_F64),
    [FG_I64] = B(FG_I64),
    [FG_F16] = FLOATS_F16,
    [FG_BF16] = B(FG_BF16) | B(FG_F32) | B(FG_F64),
    [FG_F32] = B(FG_F32) | B(FG_F64),
    [FG_F64] = B(FG_F64),
    [FG_F8E4M3] = B(FG_F8E4M3) | B(FG_BF16) | FLOATS_F16,
    [FG_F8E5M2] = B(FG_F8E5M2) | B(FG_BF16) | FLOATS_F16,
};

static bool exact_in(fg_dtype a, fg_dtype b) { return (holds[a] >> b) & 1u; }

/* ---- helpers ---- */

static bool is_op(const fg_value *v, fg_opcode c) { return v->def && v->def->op->code == c; }
static bool is_literal(const fg_value *v) { return is_op(v, FG_OP_LITERAL); }
static bool is_const(const fg_value *v) { return is_literal(v) || is_op(v, FG_OP_FULL); }

/* x may stand for v: same dtype, shape and promotion tier (a parameter's
 * layout does not matter to its users). */
static bool same_type(const fg_value *x, const fg_value *v) {
  const fg_type *a = &x->type, *b = &v->type;
  if (a->dtype != b->dtype || a->scalar != b->scalar || a->rank != b->rank || x->weak != v->weak)
    return false;
  for (int i = 0; i < a->rank; i++)
    if (!fg_dim_eq(a->dims[i], b->dims[i]))
      return false;
  return true;
}

/* A constant operand that is exactly 1, +0 or -0. Every dtype holds these,
 * so the op's compute dtype sees the same number; -0.0 stored in an integer
 * or bool dtype is +0. */
typedef enum { C_OTHER, C_ONE, C_PZERO, C_NZERO } small_const;

static small_const small(const fg_value *v) {
  if (!is_const(v))
    return C_OTHER;
  const fg_attr *a = is_literal(v) ? &v->def->attrs[0] : fg_node_attr(v->def, "value");
  double x = a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
  if (x == 1)
    return C_ONE;
  if (x != 0)
    return C_OTHER;
  return signbit(x) && fg_dtype_is_float(v->type.dtype) ? C_NZERO : C_PZERO;
}

/* ---- constant folding ---- */

/* A copy of constant c in graph t: literals as they are, `full`s with every
 * dim 1 (same rank, so the same promotion tier; every element is equal). */
static fg_value *copy_const(fg_graph *t, const fg_value *c) {
  if (is_literal(c)) {
    fg_node *n = fg_node_new(t, c->def->op, 0, NULL, 1, c->def->loc);
    n->attrs[0] = c->def->attrs[0];
    n->out[0]->type = c->type;
    n->out[0]->weak = c->weak;
    return n->out[0];
  }
  int64_t ones[FG_MAX_RANK];
  for (int i = 0; i < c->type.rank; i++)
    ones[i] = 1;
  fg_node *n = fgo_node(t, FG_OP_FULL, 0, NULL, c->def->loc);
  for (int i = 0; i < n->op->nattrs; i++)
    n->attrs[i] = c->def->attrs[i];
  fgo_set_ints(t, n, "shape", ones, c->type.rank); /* typed by the caller's inference */
  return n->out[0];
}

/* Runs a copy of n over operands in of scratch graph t (n's attributes;
 * g's arena outlives t) and gives its first element, as the interpreter
 * computes it. False when the copy does not infer to n's dtype or run. */
static bool run_copy(fg_graph *t, const fg_node *n, int nin, fg_value **in, fg_diag *d,
                     fg_attr *value) {
  fg_node *c = fg_node_new(t, n->op, nin, in, 1, n->loc);
  for (int i = 0; i < n->op->nattrs; i++)
    c->attrs[i] = n->attrs[i];
  if (!fg_infer_node(c, d) || c->out[0]->type.dtype != n->out[0]->type.dtype)
    return false;
  fg_tensor r = {0};
  char err[256];
  fg_set_results(t, 1, &c->out[0], NULL);
  if (!fg_interp_run(t, NULL, &r, err, sizeof err))
    return false;
  *value = (fg_attr){0};
  if (fg_dtype_is_float(r.dtype)) {
    value->kind = FG_ATTR_FLOAT;
    value->f = fg_tensor_get_f(&r, 0);
  } else {
    value->kind = r.dtype == FG_BOOL ? FG_ATTR_BOOL : FG_ATTR_INT;
    value->i = fg_tensor_get_i(&r, 0);
  }
  fg_tensor_free(&r);
  return true;
}

/* The value of n (all operands constant), one element, as the interpreter
 * computes it: n is copied into a scratch graph and run. */
static bool evaluate(const fg_node *n, fg_attr *value) {
  fg_graph *t = fg_graph_new("fold");
  fg_diag d;
  fg_diag_init(&d, NULL, NULL, 0, NULL);
  fg_value *in[3];
  bool ok = n->nin <= 3;
  for (int k = 0; ok && k < n->nin; k++) {
    in[k] = copy_const(t, n->in[k]);
    ok = fg_infer_node(in[k]->def, &d);
  }
  ok = ok && run_copy(t, n, n->nin, in, &d, value);
  fg_diag_free(&d);
  fg_graph_free(t);
  return ok;
}

/* A full of n's result's shape holding value, named as that result. */
static fg_value *full_like(fg_graph *g, fg_node *n, fg_attr value, fg_diag *d) {
  fg_value *out = n->out[0];
  int64_t shape[FG_MAX_RANK];
  for (int i = 0; i < out->type.rank; i++)
    shape[i] = out->type.dims[i].size;
  fg_node *f = fgo_node(g, FG_OP_FULL, 0, NULL, n->loc);
  fgo_set_ints(g, f, "shape", shape, out->type.rank);
  value.loc = n->loc;
  f->attrs[fg_op_attr_index(f->op, "value")] = value;
  fgo_set_dtype(f, "dtype", out->type.dtype);
  fg_value *v = fgo_finish(f, d);
  if (v)
    v->name = out->name;
  return v;
}

/* n's result as a literal (weak results) or a `full` of its shape; NULL
 * when n does not fold. New nodes go before n. */
static fg_value *fold(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_value *out = n->out[0];
  for (int k = 0; k < n->nin; k++)
    if (!is_const(n->in[k]))
      return NULL;
  fg_dtype cdt = fg_pw_compute_dtype(n), dt = out->type.dtype;
  if (fg_dtype_is_float(cdt) && !fg_op_has(n->op, FG_PROP_EXACT))
    return NULL;
  /* A literal's dtype is f32, i64 or bool (as the parser reads it back). */
  if (out->weak && dt != FG_F32 && dt != FG_I64 && dt != FG_BOOL)
    return NULL;
  if (!out->weak && !fg_type_is_static(&out->type))
    return NULL;
  fg_attr value;
  if (!evaluate(n, &value))
    return NULL;
  g->insert_point = n;
  fg_value *v = NULL;
  if (out->weak) {
    v = value.kind == FG_ATTR_FLOAT ? fg_literal_float(g, value.f, n->loc)
        : value.kind == FG_ATTR_INT ? fg_literal_int(g, value.i, n->loc)
                                    : fg_literal_bool(g, value.i != 0, n->loc);
  } else {
    v = full_like(g, n, value, d);
  }
  g->insert_point = NULL;
  if (v && !same_type(v, out)) { /* not expected: the interpreter ran n itself */
    fg_node_remove(g, v->def);
    v = NULL;
  }
  return v;
}

/* A reduction over an empty extent reads nothing: its result is a full of
 * the value the interpreter gives for an empty input (sum 0, prod 1,
 * amax/amin NaN: docs/format.md), found by running the reduction on an
 * empty `full` in a scratch graph. So no kernel ever reduces over zero
 * elements. */
static fg_value *fold_empty_reduction(fg_graph *g, fg_node *n, fg_diag *d) {
  const fg_value *x = n->in[0], *out = n->out[0];
  if (n->op->kind != FG_KIND_REDUCTION || n->nout != 1 || n->nin != 1 ||
      fg_type_numel(&x->type) != 0 || !fg_type_is_static(&out->type) ||
      fg_type_numel(&out->type) == 0)
    return NULL;
  fg_graph *t = fg_graph_new("empty");
  fg_diag sd;
  fg_diag_init(&sd, NULL, NULL, 0, NULL);
  int64_t shape[FG_MAX_RANK];
  for (int i = 0; i < x->type.rank; i++)
    shape[i] = x->type.dims[i].size;
  fg_node *e = fgo_node(t, FG_OP_FULL, 0, NULL, n->loc);
  fgo_set_ints(t, e, "shape", shape, x->type.rank);
  fg_dtype xd = x->type.dtype;
  fg_attr zero = {.kind = fg_dtype_is_float(xd) ? FG_ATTR_FLOAT
                          : xd == FG_BOOL       ? FG_ATTR_BOOL
                                                : FG_ATTR_INT};
  e->attrs[fg_op_attr_index(e->op, "value")] = zero;
  fgo_set_dtype(e, "dtype", xd);
  fg_value *ev = fgo_finish(e, &sd);
  fg_attr value;
  bool ok = ev && run_copy(t, n, 1, &ev, &sd, &value);
  fg_diag_free(&sd);
  fg_graph_free(t);
  if (!ok)
    return NULL;
  g->insert_point = n;
  fg_value *v = full_like(g, n, value, d);
  g->insert_point = NULL;
  if (v && !same_type(v, out)) {
    fg_node_remove(g, v->def);
    v = NULL;
  }
  return v;
}

/* A reduction of one element per result (a 0-d operand, dims=[], or only
 * size-1 dims reduced) is that element converted to the result dtype: the
 * accumulator holds the operand's dtype exactly, so converting through it
 * rounds once, as a direct cast does; -0.0 and NaN pass unchanged (the
 * interpreter starts a sum with its first element). Then a reshape drops
 * the reduced dims. So no kernel has an empty reduced extent (a 0-d
 * reduction took the row + column form and failed in the backend). */
static fg_value *fold_unit_reduction(fg_graph *g, fg_node *n, fg_diag *d) {
  fg_value *x = n->in[0];
  const fg_value *out = n->out[0];
  fg_opcode c = n->op->code;
  if ((c != FG_OP_SUM && c != FG_OP_AMAX && c != FG_OP_AMIN && c != FG_OP_PROD &&
       c != FG_OP_MEAN) ||
      n->nout != 1 || !fg_type_is_static(&x->type) || !fg_type_is_static(&out->type) ||
      fg_type_numel(&x->type) != fg_type_numel(&out->type) || fg_type_numel(&x->type) == 0)
    return NULL;
  g->insert_point = n;
  fg_value *v = fgo_cast(g, x, out->type.dtype, n->loc, d);
  if (v && v->type.rank != out->type.rank)
    v = fgo_reshape(g, v, &out->type, n->loc, d);
  g->insert_point = NULL;
  if (v && (!same_type(v, out) || v->weak != out->weak))
    return NULL; /* not expected; the unused nodes go with dce */
  return v;
}

/* ---- identities and cast chains ---- */

/* The value n's result equals, or NULL. */
static fg_value *identity(const fg_node *n) {
  fg_opcode c = n->op->code;
  fg_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  bool fdom = fg_dtype_is_float(fg_pw_compute_dtype(n));
  small_const sa = small(a), sb = b ? small(b) : C_OTHER;
  bool za = sa == C_PZERO || sa == C_NZERO, zb = sb == C_PZERO || sb == C_NZERO;
  /* what the op table says of the op */
  if (!fdom && fg_op_has(n->op, FG_PROP_INT_IDENTITY))
    return a;
  if (fg_op_has(n->op, FG_PROP_IDEMPOTENT) && is_op(a, c))
    return a;
  if (fg_op_has(n->op, FG_PROP_INVOLUTION) && is_op(a, c))
    return a->def->in[0];
  /* neutral elements and other identities, op by op */
  switch (c) {
  case FG_OP_MUL:
    return sb == C_ONE ? a : sa == C_ONE ? b : NULL;
  case FG_OP_DIV:
    return sb == C_ONE ? a : NULL;
  case FG_OP_LOGICAL_AND:
    return sb == C_ONE ? a : sa == C_ONE ? b : NULL;
  case FG_OP_LOGICAL_OR:
    return zb ? a : za ? b : NULL;
  case FG_OP_ADD:
    if (fdom)
      return sb == C_NZERO ? a : sa == C_NZERO ? b : NULL;
    return zb ? a : za ? b : NULL;
  case FG_OP_SUB:
    return (fdom ? sb == C_PZERO : zb) ? a : NULL;
  case FG_OP_CAST:
    return a; /* same_type() keeps only casts to a's own dtype */
  case FG_OP_MAXIMUM:
  case FG_OP_MINIMUM:
    return a == b ? a : NULL;
  case FG_OP_WHERE:
    if (n->in[1] == n->in[2])
      return n->in[1];
    return sa == C_ONE ? n->in[1] : za ? n->in[2] : NULL;
  default:
    return NULL;
  }
}

/* cast(cast(x, A), B): points n at x when the result is the same; for B ==
 * x's dtype, identity() then drops cast(x, B). A cast has its operand's
 * shape and tier, so n's type does not change. */
static void shorten_cast_chain(fg_node *n) {
  fg_value *m = n->in[0];
  if (n->op->code != FG_OP_CAST || !is_op(m, FG_OP_CAST) || is_literal(m->def->in[0]))
    return;
  fg_value *x = m->def->in[0];
  fg_dtype s = x->type.dtype, a = m->type.dtype, b = n->out[0]->type.dtype;
  if (!exact_in(s, a))
    return;
  if (fg_dtype_category(s) != fg_dtype_category(a) && !exact_in(s, b))
    return;
  n->in[0] = x;
}

bool fg_pass_canonicalize(fg_graph *g, fg_diag *d) {
  int nv = g->next_value_id; /* values made here are never replaced */
  fg_value **fwd = calloc((size_t)nv + 1, sizeof *fwd);
  if (!fwd)
    return false;
  for (fg_node *n = g->first; n; n = n->next) {
    for (int k = 0; k < n->nin; k++)
      if (n->in[k]->id < nv && fwd[n->in[k]->id])
        n->in[k] = fwd[n->in[k]->id];
    if (n->op->kind == FG_KIND_REDUCTION) {
      fg_value *x = n->out[0]->id < nv ? fold_empty_reduction(g, n, d) : NULL;
      if (!x && n->out[0]->id < nv)
        x = fold_unit_reduction(g, n, d);
      if (x)
        fwd[n->out[0]->id] = x;
      continue;
    }
    if (n->op->kind != FG_KIND_POINTWISE)
      continue;
    shorten_cast_chain(n);
    fg_value *out = n->out[0], *x = fold(g, n, d);
    if (!x) {
      x = identity(n);
      if (x && (is_literal(x) || !same_type(x, out)))
        x = NULL;
    }
    if (!x || out->id >= nv)
      continue;
    if (!x->name && out->name && !is_literal(x))
      x->name = out->name;
    fwd[out->id] = x;
  }
  for (int i = 0; i < g->nresults; i++)
    if (g->results[i]->id < nv && fwd[g->results[i]->id])
      g->results[i] = fwd[g->results[i]->id];
  free(fwd);
  return true;
}
