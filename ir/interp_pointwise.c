/* The generic pointwise evaluator: every pointwise op of the table runs
 * through here with its scalar semantics (fn_f / fn_i). Operands are
 * converted to the op's compute dtype (f32 for narrow floats, f64 for f64,
 * int64 for ints and bool), the op is computed in double and rounded to the
 * compute dtype, then converted to the result dtype. Operands broadcast as in
 * PyTorch; literals are read from their attribute at full precision (a f64
 * computation must see 0.1, not its f32 rounding). */
#include <math.h>
#include <string.h>

#include "infer.h"
#include "interp_internal.h"

enum load_mode {
  M_CONST,    /* a literal: value precomputed */
  M_F,        /* exact float value */
  M_F_TO32,   /* value rounded to f32 (f64 or small int operands, f32 compute) */
  M_I64_TO32, /* i64 rounded once to f32 */
  M_I,        /* integer value */
  M_TRUTH,    /* 0/1: the operand != 0 (NaN is true) */
  M_F32,      /* M_F for the two most common dtypes, without the dtype switch */
  M_BF16,
};

typedef struct operand {
  const void *data;
  fg_dtype dt;
  enum load_mode mode;
  bool as_float; /* the domain: double or int64 */
  double cf;     /* M_CONST values */
  int64_t ci;
  int64_t st[FG_MAX_RANK]; /* strides aligned to the output dims, 0 to broadcast */
  int64_t off;
} operand;

static inline double load_f(const operand *o, int64_t i) {
  switch (o->mode) {
  case M_CONST:
    return o->cf;
  case M_F32:
    return ((const float *)o->data)[i];
  case M_BF16: { /* bf16 is the top half of an f32 */
    uint32_t u = (uint32_t)((const uint16_t *)o->data)[i] << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  case M_F:
    return fg_ix_load_f(o->data, o->dt, i);
  case M_F_TO32:
    return (float)fg_ix_load_f(o->data, o->dt, i);
  case M_I64_TO32:
    return (float)fg_ix_load_i(o->data, o->dt, i);
  case M_I:
    return (double)fg_ix_load_i(o->data, o->dt, i);
  case M_TRUTH:
    return fg_dtype_is_float(o->dt) ? fg_ix_load_f(o->data, o->dt, i) != 0
                                    : fg_ix_load_i(o->data, o->dt, i) != 0;
  }
  return 0;
}

static inline int64_t load_i(const operand *o, int64_t i) {
  switch (o->mode) {
  case M_CONST:
    return o->ci;
  case M_TRUTH:
    return fg_dtype_is_float(o->dt) ? fg_ix_load_f(o->data, o->dt, i) != 0
                                    : fg_ix_load_i(o->data, o->dt, i) != 0;
  default:
    return fg_ix_load_i(o->data, o->dt, i);
  }
}

/* The literal's value converted to the compute domain. */
static void literal_value(operand *o, const fg_attr *a, fg_dtype cdt, bool truth) {
  double f = a->kind == FG_ATTR_FLOAT ? a->f : (double)a->i;
  int64_t i = a->kind == FG_ATTR_FLOAT ? fg_f64_to_i64(a->f) : a->i;
  if (truth) {
    o->cf = o->ci = a->kind == FG_ATTR_FLOAT ? (a->f != 0) : (a->i != 0);
    return;
  }
  if (cdt == FG_F32)
    f = a->kind == FG_ATTR_FLOAT ? (double)(float)a->f : (double)(float)a->i;
  o->cf = f;
  o->ci = i;
}

static void setup_operand(operand *o, const fg_value *v, const fg_tensor *t, fg_dtype cdt,
                          bool truth, int out_rank, const int64_t *out_sizes) {
  o->as_float = fg_dtype_is_float(cdt);
  o->off = 0;
  for (int d = 0; d < FG_MAX_RANK; d++)
    o->st[d] = 0;
  double unused;
  if (fg_value_is_literal(v, &unused)) {
    o->mode = M_CONST;
    literal_value(o, &v->def->attrs[0], cdt, truth);
    return;
  }
  o->data = t->data;
  o->dt = t->dtype;
  if (truth)
    o->mode = M_TRUTH;
  else if (!o->as_float)
    o->mode = M_I;
  else if (cdt == FG_F32 && t->dtype == FG_I64)
    o->mode = M_I64_TO32;
  else if (cdt == FG_F32 && (t->dtype == FG_F64 || !fg_dtype_is_float(t->dtype)))
    o->mode = M_F_TO32;
  else if (!fg_dtype_is_float(t->dtype))
    o->mode = M_I;
  else
    o->mode = t->dtype == FG_F32 ? M_F32 : t->dtype == FG_BF16 ? M_BF16 : M_F;
  /* Right-aligned broadcasting: a size-1 (or missing) dim has stride 0. */
  int64_t s = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    int od = out_rank - t->rank + d;
    o->st[od] = (t->sizes[d] == 1 && out_sizes[od] != 1) ? 0 : s;
    s *= t->sizes[d];
  }
}

bool fg_interp_pointwise(fg_interp_ctx *cx, const fg_node *n) {
  const fg_op *op = n->op;
  fg_dtype cdt = fg_pw_compute_dtype(n);
  if (cdt == FG_DTYPE_INVALID)
    return fg_ix_fail(cx, n, "operand dtypes do not promote");
  bool fdom = fg_dtype_is_float(cdt);
  if ((fdom && !op->fn_f) || (!fdom && !op->fn_i))
    return fg_ix_fail(cx, n, "no %s semantics for compute dtype %s", fdom ? "float" : "integer",
                      fg_dtype_name(cdt));
  fg_tensor *out = fg_ix_out(cx, n, 0);
  if (!out)
    return false;
  int rank = out->rank;
  const int64_t *sizes = out->sizes;
  enum { MAXIN = 3 };
  if (n->nin > MAXIN)
    return fg_ix_fail(cx, n, "too many operands");
  operand ops[MAXIN];
  bool truth_all = op->pw == FG_PW_LOGICAL;
  for (int k = 0; k < n->nin; k++) {
    /* where's condition is a truth value whatever the compute domain */
    bool truth = truth_all || (op->pw == FG_PW_WHERE && k == 0);
    setup_operand(&ops[k], n->in[k], fg_ix_in(cx, n, k), cdt, truth, rank, sizes);
  }
  int64_t total = fg_tensor_numel(out);
  if (total == 0)
    return true;
  int64_t inner = rank ? sizes[rank - 1] : 1;
  int64_t sin[MAXIN];
  for (int k = 0; k < n->nin; k++)
    sin[k] = rank ? ops[k].st[rank - 1] : 0;
  int64_t idx[FG_MAX_RANK] = {0};
  fg_dtype odt = out->dtype;
  void *od = out->data;
  bool r32 = cdt == FG_F32;
  int nin = n->nin;
  for (int64_t base = 0; base < total; base += inner) {
    if (fdom) {
      double a[MAXIN];
      for (int64_t j = 0; j < inner; j++) {
        for (int k = 0; k < nin; k++)
          a[k] = load_f(&ops[k], ops[k].off + j * sin[k]);
        double r = op->fn_f(a, n);
        if (odt == FG_F32)
          ((float *)od)[base + j] = (float)r;
        else
          fg_ix_store_f(od, odt, base + j, r32 ? (double)(float)r : r);
      }
    } else {
      int64_t a[MAXIN];
      for (int64_t j = 0; j < inner; j++) {
        for (int k = 0; k < nin; k++)
          a[k] = load_i(&ops[k], ops[k].off + j * sin[k]);
        fg_ix_store_i(od, odt, base + j, op->fn_i(a, n));
      }
    }
    for (int d = rank - 2; d >= 0; d--) {
      for (int k = 0; k < nin; k++)
        ops[k].off += ops[k].st[d];
      if (++idx[d] < sizes[d])
        break;
      for (int k = 0; k < nin; k++)
        ops[k].off -= ops[k].st[d] * sizes[d];
      idx[d] = 0;
    }
  }
  return true;
}
