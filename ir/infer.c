/* Shape and dtype inference for every op kind, from the op table's rows. */
#include "infer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *shape_str(const fg_type *t, char *buf, int cap) {
  int n = snprintf(buf, (size_t)cap, "[");
  for (int i = 0; i < t->rank && n < cap; i++) {
    char db[96];
    n += snprintf(buf + n, (size_t)(cap - n), "%s%s", i ? "," : "",
                  fg_dim_str(t->dims[i], db, sizeof db));
  }
  if (n < cap)
    snprintf(buf + n, (size_t)(cap - n), "]");
  return buf;
}

/* The location of an attribute if the user wrote it, else of the op. */
static fg_loc attr_loc(const fg_node *n, const char *name) {
  int i = fg_op_attr_index(n->op, name);
  if (i >= 0 && n->attrs[i].kind != FG_ATTR_NONE && n->attrs[i].loc.line > 0)
    return n->attrs[i].loc;
  return n->loc;
}

static fg_loc operand_loc(const fg_node *n, int i) {
  (void)i;
  return n->loc;
}

/* Normalizes a possibly negative dim against rank; reports and returns -1
 * when out of range. */
static int norm_dim(const fg_node *n, const char *attr, int64_t d, int rank, fg_diag *diag) {
  int64_t r = d < 0 ? d + rank : d;
  if (r < 0 || r >= rank || rank == 0) {
    fg_error(diag, attr_loc(n, attr),
             "dimension %" PRId64 " is out of range for a tensor of rank %d", d, rank);
    return -1;
  }
  return (int)r;
}

static const fg_attr *ints_attr(const fg_node *n, const char *name) {
  const fg_attr *a = fg_node_attr(n, name);
  return a && a->kind == FG_ATTR_INTS ? a : NULL;
}

/* ---- promotion ---- */

static fg_dtype tier_update(fg_dtype cur, fg_dtype t, bool *ok) {
  if (cur == FG_DTYPE_INVALID)
    return t;
  fg_dtype r = fg_promote_types(cur, t);
  if (r == FG_DTYPE_INVALID)
    *ok = false;
  return r;
}

/* PyTorch's combine_categories(higher, lower). */
static fg_dtype combine(fg_dtype higher, fg_dtype lower, bool *ok) {
  if (higher == FG_DTYPE_INVALID)
    return lower;
  if (lower == FG_DTYPE_INVALID)
    return higher;
  if (fg_dtype_is_float(higher))
    return higher;
  if (higher == FG_BOOL || fg_dtype_is_float(lower))
    return tier_update(higher, lower, ok);
  return higher;
}

/* Promotes values v[0..n) by PyTorch's tiers; extra weak dtypes (clamp
 * bounds) join the weak tier. */
static fg_dtype promote_values(fg_value *const *v, int n, const fg_dtype *extra, int nextra,
                               bool *ok) {
  fg_dtype dim = FG_DTYPE_INVALID, zero = FG_DTYPE_INVALID, weak = FG_DTYPE_INVALID;
  *ok = true;
  for (int i = 0; i < n; i++) {
    const fg_type *t = &v[i]->type;
    if (v[i]->weak)
      weak = tier_update(weak, t->dtype, ok);
    else if (t->rank == 0)
      zero = tier_update(zero, t->dtype, ok);
    else
      dim = tier_update(dim, t->dtype, ok);
  }
  for (int i = 0; i < nextra; i++)
    weak = tier_update(weak, extra[i], ok);
  /* Beside tensors, a weak scalar counts as its category's default dtype
   * (a Python float is f32 there, an int i64). */
  if (weak != FG_DTYPE_INVALID && (dim != FG_DTYPE_INVALID || zero != FG_DTYPE_INVALID))
    weak = fg_default_dtype(fg_dtype_category(weak));
  fg_dtype lower = combine(zero, weak, ok);
  return combine(dim, lower, ok);
}

static int pw_first_value(const fg_node *n) { return n->op->pw == FG_PW_WHERE ? 1 : 0; }

static int clamp_bounds(const fg_node *n, fg_dtype *out) {
  int k = 0;
  const char *names[2] = {"min", "max"};
  for (int i = 0; i < 2; i++) {
    const fg_attr *a = fg_node_attr(n, names[i]);
    if (!a)
      continue;
    out[k++] = a->kind == FG_ATTR_FLOAT ? FG_F32 : a->kind == FG_ATTR_BOOL ? FG_BOOL : FG_I64;
  }
  return k;
}

fg_dtype fg_pw_operand_dtype(const fg_node *n) {
  bool ok;
  fg_dtype extra[2];
  int nextra = n->op->code == FG_OP_CLAMP ? clamp_bounds(n, extra) : 0;
  int first = pw_first_value(n);
  fg_dtype t = promote_values(n->in + first, n->nin - first, extra, nextra, &ok);
  return ok ? t : FG_DTYPE_INVALID;
}

static fg_dtype pw_result_dtype(const fg_node *n, fg_dtype operand) {
  switch (n->op->pw) {
  case FG_PW_PROMOTE:
  case FG_PW_WHERE:
    return operand;
  case FG_PW_FLOAT:
    return fg_dtype_is_float(operand) ? operand : FG_F32;
  case FG_PW_COMPARE:
  case FG_PW_PREDICATE:
  case FG_PW_LOGICAL:
    return FG_BOOL;
  case FG_PW_CAST:
    return fg_node_attr(n, "dtype")->dtype;
  case FG_PW_E8M0:
    return FG_F8E8M0;
  }
  return operand;
}

fg_dtype fg_pw_compute_dtype(const fg_node *n) {
  fg_dtype op = n->op->pw == FG_PW_CAST ? n->in[0]->type.dtype : fg_pw_operand_dtype(n);
  if (op == FG_DTYPE_INVALID)
    return op;
  fg_dtype t;
  switch (n->op->pw) {
  case FG_PW_COMPARE:
  case FG_PW_PREDICATE:
  case FG_PW_CAST:
    t = op;
    break;
  case FG_PW_LOGICAL:
    return FG_BOOL;
  default:
    t = pw_result_dtype(n, op);
  }
  if (fg_dtype_is_float(t))
    return t == FG_F64 ? FG_F64 : FG_F32;
  return t == FG_BOOL ? FG_BOOL : FG_I64;
}

/* ---- broadcasting ---- */

static bool broadcast(const fg_node *n, int first, fg_type *out, fg_diag *d) {
  int rank = 0;
  for (int i = first; i < n->nin; i++)
    if (n->in[i]->type.rank > rank)
      rank = n->in[i]->type.rank;
  out->rank = rank;
  for (int k = 0; k < rank; k++)
    out->dims[k] = (fg_dim){.size = 1};
  for (int i = first; i < n->nin; i++) {
    const fg_type *t = &n->in[i]->type;
    for (int k = 0; k < t->rank; k++) {
      fg_dim *o = &out->dims[rank - t->rank + k];
      fg_dim s = t->dims[k];
      if (fg_dim_eq(*o, s))
        continue;
      if (!o->sym && o->size == 1) {
        *o = s;
        continue;
      }
      if (!s.sym && s.size == 1)
        continue;
      char a[256], b[256];
      fg_type partial = *out;
      fg_error(d, operand_loc(n, i), "cannot broadcast shapes %s and %s in '%s'",
               shape_str(&partial, a, sizeof a), shape_str(t, b, sizeof b), n->op->name);
      return false;
    }
  }
  return true;
}

static bool infer_pointwise(fg_node *n, fg_diag *d) {
  fg_type t;
  memset(&t, 0, sizeof t);
  if (n->op->pw == FG_PW_WHERE && n->in[0]->type.dtype != FG_BOOL) {
    fg_error(d, operand_loc(n, 0), "the condition of 'where' must be bool, not %s",
             fg_dtype_name(n->in[0]->type.dtype));
    return false;
  }
  if (!broadcast(n, 0, &t, d))
    return false;
  fg_dtype op = n->op->pw == FG_PW_CAST ? n->in[0]->type.dtype : fg_pw_operand_dtype(n);
  if (op == FG_DTYPE_INVALID) {
    char buf[256];
    int k = 0;
    buf[0] = 0;
    for (int i = pw_first_value(n); i < n->nin && k < 200; i++)
      k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s", k ? ", " : "",
                    fg_dtype_name(n->in[i]->type.dtype));
    fg_error(d, n->loc,
             "'%s' cannot promote operand dtypes (%s): float8 types only combine with themselves; "
             "insert a cast",
             n->op->name, buf);
    return false;
  }
  if (n->op->code == FG_OP_MX_SCALE && fg_mx_elem_emax(fg_node_attr(n, "elem")->dtype) < 0) {
    fg_error(d, n->loc, "'mx_scale' needs elem= f8e4m3, f8e5m2 or f4e2m1, not %s",
             fg_dtype_name(fg_node_attr(n, "elem")->dtype));
    return false;
  }
  if (n->op->code == FG_OP_CLAMP && !fg_node_attr(n, "min") && !fg_node_attr(n, "max")) {
    fg_error(d, n->loc, "'clamp' needs at least one of min= and max=");
    return false;
  }
  if ((n->op->fn_f == NULL && fg_dtype_is_float(fg_pw_compute_dtype(n))) ||
      (n->op->fn_i == NULL && !fg_dtype_is_float(fg_pw_compute_dtype(n)))) {
    fg_error(d, n->loc, "'%s' is not defined for %s operands", n->op->name, fg_dtype_name(op));
    return false;
  }
  t.dtype = pw_result_dtype(n, op);
  bool all_weak = true;
  for (int i = 0; i < n->nin; i++)
    all_weak &= n->in[i]->weak;
  t.scalar = all_weak;
  n->out[0]->type = t;
  n->out[0]->weak = all_weak;
  return true;
}

/* ---- reductions ---- */

int fg_reduce_mask(const fg_node *n, bool mask[FG_MAX_RANK]) {
  int rank = n->in[0]->type.rank, k = 0;
  memset(mask, 0, sizeof(bool) * FG_MAX_RANK);
  const fg_attr *a = ints_attr(n, "dims");
  if (!a) {
    for (int i = 0; i < rank; i++)
      mask[i] = true;
    return rank;
  }
  for (int i = 0; i < a->n; i++) {
    int64_t dd = a->ints[i] < 0 ? a->ints[i] + rank : a->ints[i];
    if (dd >= 0 && dd < rank && !mask[dd]) {
      mask[dd] = true;
      k++;
    }
  }
  return k;
}

fg_dtype fg_reduce_acc_dtype(fg_dtype in) {
  if (in == FG_F64)
    return FG_F64;
  if (fg_dtype_is_float(in))
    return FG_F32;
  return FG_I64;
}

fg_dtype fg_reduce_partial_dtype(const fg_node *n) {
  if (n->op->code == FG_OP_AMAX || n->op->code == FG_OP_AMIN)
    return n->in[0]->type.dtype;
  return fg_reduce_acc_dtype(n->in[0]->type.dtype);
}

/* The type of a reduction of `in` over the dims of mask: those dropped, or
 * kept as 1 with keepdim. */
static fg_type reduced_type(const fg_type *in, const bool *mask, bool keep, fg_dtype dt) {
  fg_type t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < in->rank; i++) {
    if (!mask[i])
      t.dims[t.rank++] = in->dims[i];
    else if (keep)
      t.dims[t.rank++] = (fg_dim){.size = 1};
  }
  t.dtype = dt;
  return t;
}

static bool infer_reduction(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *dims = ints_attr(n, "dims");
  bool seen[FG_MAX_RANK] = {0};
  if (dims) {
    for (int i = 0; i < dims->n; i++) {
      int r = norm_dim(n, "dims", dims->ints[i], in->rank, d);
      if (r < 0)
        return false;
      if (seen[r]) {
        fg_error(d, attr_loc(n, "dims"), "dimension %d appears twice in dims", r);
        return false;
      }
      seen[r] = true;
    }
  }
  bool mask[FG_MAX_RANK];
  fg_reduce_mask(n, mask);
  const fg_attr *dt = fg_node_attr(n, "dtype");
  fg_type t = reduced_type(in, mask, fg_attr_bool(n, "keepdim"), dt ? dt->dtype : in->dtype);
  fg_opcode c = n->op->code;
  bool needs_float = c == FG_OP_MEAN || c == FG_OP_VAR || c == FG_OP_VAR_MEAN;
  if (needs_float && !fg_dtype_is_float(t.dtype)) {
    fg_error(d, n->loc, "'%s' needs a floating-point input (got %s)%s", n->op->name,
             fg_dtype_name(in->dtype), c == FG_OP_MEAN ? "; pass dtype= a float type" : "");
    return false;
  }
  if (dt && fg_dtype_category(dt->dtype) < fg_dtype_category(in->dtype) && c != FG_OP_AMAX &&
      c != FG_OP_AMIN) {
    fg_error(d, attr_loc(n, "dtype"), "'%s' cannot accumulate %s into %s", n->op->name,
             fg_dtype_name(in->dtype), fg_dtype_name(dt->dtype));
    return false;
  }
  for (int i = 0; i < n->nout; i++)
    n->out[i]->type = t;
  return true;
}

/* ---- views ---- */

/* The reshape's shape attribute read: at most one -1 (its index in
 * *infer_at, else -1), the product of the other sizes in *known, and the
 * result type with the sizes as written (-1 where it is). */
static bool reshape_shape(fg_node *n, const fg_attr *s, int64_t *known, int *infer_at, fg_type *t,
                          fg_diag *d) {
  *known = 1;
  *infer_at = -1;
  for (int i = 0; i < s->n; i++) {
    if (s->ints[i] == -1) {
      if (*infer_at >= 0) {
        fg_error(d, attr_loc(n, "shape"), "only one dimension of shape may be -1");
        return false;
      }
      *infer_at = i;
    } else if (s->ints[i] < 0) {
      fg_error(d, attr_loc(n, "shape"), "invalid size %" PRId64 " in shape", s->ints[i]);
      return false;
    } else {
      if (s->ints[i] != 0 && *known > INT64_MAX / s->ints[i]) {
        fg_error(d, attr_loc(n, "shape"), "shape is too large");
        return false;
      }
      *known *= s->ints[i];
    }
  }
  memset(t, 0, sizeof *t);
  t->dtype = n->in[0]->type.dtype;
  t->rank = s->n;
  for (int i = 0; i < s->n; i++)
    t->dims[i].size = s->ints[i];
  return true;
}

/* A reshape where a size is symbolic (one symbol, in one dim of the input
 * and at most one entry of the shape): the input has (a*T+b)*R elements
 * (R the static dims); the shape's static entries S, then either one
 * expression c*T+f with (c*T+f)*S = (a*T+b)*R, or a -1 that stands for
 * (a*T+b)*R/S (an expression when S divides a*R and b*R), or both, the -1
 * standing for k*R/S where a*T+b = k*(c*T+f). [T,4,64] -> [-1,256] is
 * [T,256]; [T,64] -> [2*T,32] and [T,64] -> [-1,32] are [2*T,32]. */
static bool infer_reshape_symbolic(fg_node *n, const fg_attr *s, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  fg_dim sym = {0};
  int64_t fixed = 1;
  char db[96], eb[96];
  for (int i = 0; i < in->rank; i++) {
    if (!in->dims[i].sym) {
      fixed *= in->dims[i].size;
      continue;
    }
    if (sym.sym) {
      fg_error(d, n->loc, "'reshape' of a tensor with two symbolic dims is not supported");
      return false;
    }
    sym = in->dims[i];
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = in->dtype;
  t.rank = s->n;
  int64_t known = 1;
  int infer_at = -1, expr_at = -1;
  for (int i = 0; i < s->n; i++) {
    fg_dim e = fg_attr_dim(s, i);
    if (e.sym) {
      if (expr_at >= 0 || (sym.sym && strcmp(e.sym, sym.sym) != 0)) {
        fg_error(d, attr_loc(n, "shape"),
                 "a reshape may write one size expression, of the symbolic size of its input%s%s",
                 sym.sym ? " " : "", sym.sym ? sym.sym : " (the input is static)");
        return false;
      }
      expr_at = i;
      t.dims[i] = e;
    } else if (e.size == -1) {
      if (infer_at >= 0) {
        fg_error(d, attr_loc(n, "shape"), "only one dimension of shape may be -1");
        return false;
      }
      infer_at = i;
    } else if (e.size < 0) {
      fg_error(d, attr_loc(n, "shape"), "invalid size %" PRId64 " in shape", e.size);
      return false;
    } else {
      if (e.size != 0 && known > INT64_MAX / e.size) {
        fg_error(d, attr_loc(n, "shape"), "shape is too large");
        return false;
      }
      known *= e.size;
      t.dims[i] = e;
    }
  }
  if (!sym.sym) {
    fg_error(d, attr_loc(n, "shape"),
             "cannot reshape a static tensor into a shape that is an expression of a size");
    return false;
  }
  /* the input's elements, a*T+b times R, as one expression */
  fg_dim total, want;
  bool ok = fg_dim_scale(sym, fixed, &total);
  if (ok && expr_at >= 0 && infer_at < 0) {
    ok = fg_dim_scale(t.dims[expr_at], known, &want) && fg_dim_eq(want, total);
  } else if (ok && infer_at >= 0) {
    fg_dim per = expr_at >= 0 ? t.dims[expr_at] : fg_dim_affine(NULL, 0, 1);
    int64_t m = fg_dim_mul(per), k;
    /* total = q * per * known, q an integer: per's expression divides total's */
    if (expr_at >= 0) {
      k = fg_dim_mul(total) / m;
      ok = fg_dim_mul(total) % m == 0 && fg_dim_scale(per, k, &want) && fg_dim_eq(want, total);
      total = fg_dim_affine(NULL, 0, k);
    }
    ok = ok && known != 0 && fg_dim_mul(total) % known == 0 && fg_dim_off(total) % known == 0;
    if (ok)
      t.dims[infer_at] =
          fg_dim_affine(total.sym, fg_dim_mul(total) / known, fg_dim_off(total) / known);
  } else {
    ok = false;
  }
  if (!ok) {
    fg_error(d, attr_loc(n, "shape"),
             "cannot reshape %s into this shape: with the symbolic size %s its elements are %s "
             "times %" PRId64 ", which the shape does not hold for every %s (write a -1 or an "
             "expression of %s for the dim that holds it)",
             shape_str(in, eb, sizeof eb), sym.sym, fg_dim_str(sym, db, sizeof db), fixed, sym.sym,
             sym.sym);
    return false;
  }
  n->out[0]->type = t;
  return true;
}

static bool infer_reshape(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *s = ints_attr(n, "shape");
  if (s->n > FG_MAX_RANK) {
    fg_error(d, attr_loc(n, "shape"), "shape has %d dims; at most %d are supported", s->n,
             FG_MAX_RANK);
    return false;
  }
  if (!fg_type_is_static(in) || fg_attr_has_sym(s))
    return infer_reshape_symbolic(n, s, d);
  int64_t numel = fg_type_numel(in), known;
  int infer_at;
  fg_type t;
  if (!reshape_shape(n, s, &known, &infer_at, &t, d))
    return false;
  if (infer_at >= 0) {
    if (known == 0 || numel % known) {
      fg_error(d, attr_loc(n, "shape"), "cannot reshape %" PRId64 " elements into a shape with -1",
               numel);
      return false;
    }
    t.dims[infer_at].size = numel / known;
  } else if (known != numel) {
    char a[256];
    fg_error(d, attr_loc(n, "shape"),
             "cannot reshape %s (%" PRId64 " elements) into %" PRId64 " elements",
             shape_str(in, a, sizeof a), numel, known);
    return false;
  }
  n->out[0]->type = t;
  return true;
}

static bool check_perm(const fg_node *n, const char *attr, const int64_t *p, int np, int rank,
                       int *out, fg_diag *d) {
  if (np != rank) {
    fg_error(d, attr_loc(n, attr), "%s has %d entries but the tensor has rank %d", attr, np, rank);
    return false;
  }
  bool seen[FG_MAX_RANK] = {0};
  for (int i = 0; i < np; i++) {
    int r = norm_dim(n, attr, p[i], rank, d);
    if (r < 0)
      return false;
    if (seen[r]) {
      fg_error(d, attr_loc(n, attr), "%s is not a permutation: dimension %d appears twice", attr,
               r);
      return false;
    }
    seen[r] = true;
    out[i] = r;
  }
  return true;
}

static bool infer_permute(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  int perm[FG_MAX_RANK];
  if (n->op->code == FG_OP_TRANSPOSE) {
    int a = norm_dim(n, "dim0", fg_attr_int(n, "dim0"), in->rank, d);
    if (a < 0)
      return false;
    int b = norm_dim(n, "dim1", fg_attr_int(n, "dim1"), in->rank, d);
    if (b < 0)
      return false;
    for (int i = 0; i < in->rank; i++)
      perm[i] = i;
    perm[a] = b;
    perm[b] = a;
  } else {
    const fg_attr *p = ints_attr(n, "dims");
    if (!check_perm(n, "dims", p->ints, p->n, in->rank, perm, d))
      return false;
  }
  fg_type t = *in;
  t.has_layout = false;
  for (int i = 0; i < in->rank; i++)
    t.dims[i] = in->dims[perm[i]];
  n->out[0]->type = t;
  return true;
}

static bool infer_broadcast_in_dim(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *s = ints_attr(n, "shape"), *dims = ints_attr(n, "dims");
  if (s->n > FG_MAX_RANK) {
    fg_error(d, attr_loc(n, "shape"), "shape has %d dims; at most %d are supported", s->n,
             FG_MAX_RANK);
    return false;
  }
  if (dims->n != in->rank) {
    fg_error(d, attr_loc(n, "dims"), "dims has %d entries but the operand has rank %d", dims->n,
             in->rank);
    return false;
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = in->dtype;
  t.rank = s->n;
  for (int i = 0; i < s->n; i++) {
    t.dims[i] = fg_attr_dim(s, i); /* a size, or an expression of one */
    if (!t.dims[i].sym && s->ints[i] < 0) {
      fg_error(d, attr_loc(n, "shape"), "invalid size %" PRId64 " in shape", s->ints[i]);
      return false;
    }
  }
  bool used[FG_MAX_RANK] = {0};
  int prev = -1;
  for (int i = 0; i < dims->n; i++) {
    int o = norm_dim(n, "dims", dims->ints[i], s->n, d);
    if (o < 0)
      return false;
    if (used[o] || o <= prev) {
      fg_error(d, attr_loc(n, "dims"), "dims must be strictly increasing output dimensions");
      return false;
    }
    used[o] = true;
    prev = o;
    fg_dim id = in->dims[i];
    if (id.sym || (t.dims[o].sym && id.size != 1)) {
      char a[96], b[96];
      if (t.dims[o].sym && !fg_dim_eq(id, t.dims[o])) {
        fg_error(d, attr_loc(n, "dims"), "operand dim %d has size %s but output dim %d has size %s",
                 i, fg_dim_str(id, a, sizeof a), o, fg_dim_str(t.dims[o], b, sizeof b));
        return false;
      }
      t.dims[o] = id; /* a symbolic dim maps onto its output dim as is */
      continue;
    }
    if (id.size != 1 && id.size != t.dims[o].size) {
      fg_error(d, attr_loc(n, "dims"),
               "operand dim %d has size %" PRId64 " but output dim %d has size %" PRId64, i,
               id.size, o, t.dims[o].size);
      return false;
    }
  }
  n->out[0]->type = t;
  return true;
}

static bool infer_expand(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *s = ints_attr(n, "shape");
  if (s->n < in->rank || s->n > FG_MAX_RANK) {
    fg_error(d, attr_loc(n, "shape"), "expand to %d dims from a tensor of rank %d", s->n, in->rank);
    return false;
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = in->dtype;
  t.rank = s->n;
  int lead = s->n - in->rank;
  for (int i = 0; i < s->n; i++) {
    fg_dim wd = fg_attr_dim(s, i); /* a size, or an expression of one */
    int64_t want = wd.sym ? 0 : wd.size;
    if (i < lead) {
      if (want < 0) {
        fg_error(d, attr_loc(n, "shape"), "a new leading dimension cannot be %" PRId64, want);
        return false;
      }
      t.dims[i] = wd;
      continue;
    }
    fg_dim id = in->dims[i - lead];
    if ((!wd.sym && want == -1) || fg_dim_eq(id, wd)) {
      t.dims[i] = id;
    } else if (!id.sym && id.size == 1 && want >= 0) {
      t.dims[i] = wd;
    } else if (wd.sym || id.sym) {
      char a[96], b[96];
      fg_error(d, attr_loc(n, "shape"), "cannot expand dimension %d of size %s to %s", i - lead,
               fg_dim_str(id, a, sizeof a), fg_dim_str(wd, b, sizeof b));
      return false;
    } else {
      fg_error(d, attr_loc(n, "shape"),
               "cannot expand dimension %d of size %" PRId64 " to %" PRId64, i - lead, id.size,
               want);
      return false;
    }
  }
  n->out[0]->type = t;
  return true;
}

static bool infer_squeeze(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *dims = ints_attr(n, "dims");
  bool drop[FG_MAX_RANK] = {0};
  if (dims) {
    for (int i = 0; i < dims->n; i++) {
      int r = norm_dim(n, "dims", dims->ints[i], in->rank, d);
      if (r < 0)
        return false;
      if (in->dims[r].sym) {
        fg_error(d, attr_loc(n, "dims"), "cannot squeeze symbolic dimension %d (%s)", r,
                 in->dims[r].sym);
        return false;
      }
      drop[r] = in->dims[r].size == 1; /* as PyTorch: a dim that is not 1 stays */
    }
  } else {
    for (int i = 0; i < in->rank; i++)
      drop[i] = !in->dims[i].sym && in->dims[i].size == 1;
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = in->dtype;
  for (int i = 0; i < in->rank; i++)
    if (!drop[i])
      t.dims[t.rank++] = in->dims[i];
  n->out[0]->type = t;
  return true;
}

static bool infer_unsqueeze(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  if (in->rank >= FG_MAX_RANK) {
    fg_error(d, n->loc, "unsqueeze would exceed rank %d", FG_MAX_RANK);
    return false;
  }
  int r = norm_dim(n, "dim", fg_attr_int(n, "dim"), in->rank + 1, d);
  if (r < 0)
    return false;
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = in->dtype;
  t.rank = in->rank + 1;
  for (int i = 0, k = 0; i < t.rank; i++)
    t.dims[i] = i == r ? (fg_dim){.size = 1} : in->dims[k++];
  n->out[0]->type = t;
  return true;
}

void fg_slice_bounds(int64_t size, int64_t start, int64_t end, int64_t step, int64_t *out_start,
                     int64_t *out_len) {
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  if (start < 0)
    start = 0;
  if (start > size)
    start = size;
  if (end < 0)
    end = 0;
  if (end > size)
    end = size;
  *out_start = start;
  *out_len = end > start ? (end - start + step - 1) / step : 0;
}

bool fg_slice_dim_sym(const fg_node *n, int i, fg_dim *start, fg_dim *len, fg_diag *d) {
  fg_dim D = n->in[0]->type.dims[i], e[2];
  const fg_attr *sp = ints_attr(n, "steps");
  const char *names[2] = {"starts", "ends"};
  char a[96], b[96];
  if (!D.sym) {
    fg_error(d, n->loc,
             "slice of static dimension %d (%" PRId64 ") with a bound that is an expression of a "
             "size is not supported (its length would be a minimum)",
             i, D.size);
    return false;
  }
  if (sp && sp->ints[i] != 1) {
    fg_error(d, attr_loc(n, "steps"),
             "slice of symbolic dimension %d (%s) with step %" PRId64 " is not supported (only "
             "step 1)",
             i, fg_dim_str(D, a, sizeof a), sp->ints[i]);
    return false;
  }
  for (int k = 0; k < 2; k++) {
    fg_dim w = fg_attr_dim(ints_attr(n, names[k]), i);
    if (w.sym) { /* an expression: itself (the size facts check that it is in range) */
      e[k] = w;
    } else if (w.size < 0) { /* from the end, as Python */
      if (!fg_dim_add(D, w, &e[k]))
        goto overflow;
    } else if (k == 1 && w.size >= FG_SYM_MAX_BOUND) { /* to the end: x[1:] */
      e[k] = D;
    } else {
      e[k] = w;
    }
  }
  fg_dim neg;
  if (!fg_dim_scale(e[0], -1, &neg) || !fg_dim_add(e[1], neg, len)) {
    fg_error(d, n->loc, "slice bounds %s and %s of dimension %d are expressions of two sizes",
             fg_dim_str(e[0], a, sizeof a), fg_dim_str(e[1], b, sizeof b), i);
    return false;
  }
  if (fg_dim_mul(*len) < 0 || (!len->sym && len->size < 0)) {
    fg_error(d, n->loc,
             "slice of dimension %d from %s to %s: the end is below the start for large sizes "
             "(an empty slice is not supported where the size is symbolic)",
             i, fg_dim_str(e[0], a, sizeof a), fg_dim_str(e[1], b, sizeof b));
    return false;
  }
  *start = e[0];
  return true;
overflow:
  fg_error(d, n->loc, "slice bound of dimension %d overflows", i);
  return false;
}

static bool infer_slice(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *st = ints_attr(n, "starts"), *en = ints_attr(n, "ends"),
                *sp = ints_attr(n, "steps");
  if (st->n != in->rank || en->n != in->rank || (sp && sp->n != in->rank)) {
    fg_error(d, n->loc,
             "slice needs starts, ends (and steps) with one entry per dimension (rank %d)",
             in->rank);
    return false;
  }
  fg_type t = *in;
  t.has_layout = false;
  for (int i = 0; i < in->rank; i++) {
    int64_t step = sp ? sp->ints[i] : 1;
    if (step <= 0) {
      fg_error(d, attr_loc(n, "steps"), "slice steps must be positive (got %" PRId64 ")", step);
      return false;
    }
    if (in->dims[i].sym || fg_attr_dim(st, i).sym || fg_attr_dim(en, i).sym) {
      fg_dim s0, len;
      if (!fg_slice_dim_sym(n, i, &s0, &len, d))
        return false;
      t.dims[i] = len;
      continue;
    }
    int64_t s0, len;
    fg_slice_bounds(in->dims[i].size, st->ints[i], en->ints[i], step, &s0, &len);
    t.dims[i].size = len;
  }
  n->out[0]->type = t;
  return true;
}

static bool infer_cat(fg_node *n, fg_diag *d) {
  const fg_type *a = &n->in[0]->type;
  int dim = norm_dim(n, "dim", fg_attr_int(n, "dim"), a->rank, d);
  if (dim < 0)
    return false;
  fg_type t = *a;
  t.has_layout = false;
  fg_dtype dt = a->dtype;
  for (int i = 1; i < n->nin; i++) {
    const fg_type *b = &n->in[i]->type;
    char x[256], y[256];
    if (b->rank != a->rank) {
      fg_error(d, operand_loc(n, i), "cat operand %d has rank %d, operand 0 has rank %d", i,
               b->rank, a->rank);
      return false;
    }
    for (int k = 0; k < a->rank; k++) {
      if (k == dim)
        continue;
      if (!fg_dim_eq(a->dims[k], b->dims[k])) {
        fg_error(d, operand_loc(n, i),
                 "cat operand %d has shape %s, incompatible with %s outside dim %d", i,
                 shape_str(b, y, sizeof y), shape_str(a, x, sizeof x), dim);
        return false;
      }
    }
    if (t.dims[dim].sym || b->dims[dim].sym) { /* the sum of the sizes: T+16, 2*T */
      if (!fg_dim_add(t.dims[dim], b->dims[dim], &t.dims[dim])) {
        fg_error(d, n->loc, "cat along dimension %d of sizes %s and %s is not supported%s", dim,
                 shape_str(a, x, sizeof x), shape_str(b, y, sizeof y),
                 t.dims[dim].sym && b->dims[dim].sym ? " (two symbolic sizes)" : " (too large)");
        return false;
      }
    } else if (__builtin_add_overflow(t.dims[dim].size, b->dims[dim].size, &t.dims[dim].size)) {
      fg_error(d, n->loc, "cat makes dimension %d too large", dim);
      return false;
    }
    dt = fg_promote_types(dt, b->dtype);
    if (dt == FG_DTYPE_INVALID) {
      fg_error(d, operand_loc(n, i),
               "cat operands have dtypes that do not promote (float8 needs a cast)");
      return false;
    }
  }
  t.dtype = dt;
  n->out[0]->type = t;
  return true;
}

static bool infer_split(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *s = ints_attr(n, "sizes");
  int dim = norm_dim(n, "dim", fg_attr_int(n, "dim"), in->rank, d);
  if (dim < 0)
    return false;
  if (s->n != n->nout) {
    fg_error(d, n->loc, "split into %d sizes binds %d results", s->n, n->nout);
    return false;
  }
  if (in->dims[dim].sym) {
    fg_error(d, n->loc, "cannot split symbolic dimension %d (%s)", dim, in->dims[dim].sym);
    return false;
  }
  int64_t total = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->ints[i] < 0) {
      fg_error(d, attr_loc(n, "sizes"), "split size %" PRId64 " is negative", s->ints[i]);
      return false;
    }
    total += s->ints[i];
  }
  if (total != in->dims[dim].size) {
    fg_error(d, attr_loc(n, "sizes"),
             "split sizes add up to %" PRId64 " but dimension %d has size %" PRId64, total, dim,
             in->dims[dim].size);
    return false;
  }
  for (int i = 0; i < s->n; i++) {
    fg_type t = *in;
    t.has_layout = false;
    t.dims[dim].size = s->ints[i];
    n->out[i]->type = t;
  }
  return true;
}

static bool infer_pad(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *p = ints_attr(n, "pad");
  if (p->n != 2 * in->rank) {
    fg_error(d, attr_loc(n, "pad"), "pad needs 2 entries per dimension (%d), got %d", 2 * in->rank,
             p->n);
    return false;
  }
  fg_type t = *in;
  t.has_layout = false;
  for (int i = 0; i < in->rank; i++) {
    fg_dim lo = fg_attr_dim(p, 2 * i), hi = fg_attr_dim(p, 2 * i + 1);
    if (in->dims[i].sym || lo.sym || hi.sym) { /* T+lo+hi (the size facts check it is >= 0) */
      if (!fg_dim_add(in->dims[i], lo, &t.dims[i]) || !fg_dim_add(t.dims[i], hi, &t.dims[i])) {
        fg_error(d, attr_loc(n, "pad"),
                 "padding of dimension %d is not supported (two symbolic sizes, or too large)", i);
        return false;
      }
      if (!t.dims[i].sym && t.dims[i].size < 0) {
        fg_error(d, attr_loc(n, "pad"), "padding makes dimension %d negative (%" PRId64 ")", i,
                 t.dims[i].size);
        return false;
      }
      if (fg_dim_mul(t.dims[i]) < 0) {
        fg_error(d, attr_loc(n, "pad"), "padding makes dimension %d shrink as its size grows", i);
        return false;
      }
      continue;
    }
    int64_t s;
    if (__builtin_add_overflow(in->dims[i].size, p->ints[2 * i], &s) ||
        __builtin_add_overflow(s, p->ints[2 * i + 1], &s)) {
      fg_error(d, attr_loc(n, "pad"), "padding makes dimension %d too large", i);
      return false;
    }
    if (s < 0) {
      fg_error(d, attr_loc(n, "pad"), "padding makes dimension %d negative (%" PRId64 ")", i, s);
      return false;
    }
    t.dims[i].size = s;
  }
  n->out[0]->type = t;
  return true;
}

/* ---- indexing ---- */

/* Whether index extent a fits under data extent b (equal names when symbolic). */
static bool dim_within(fg_dim a, fg_dim b) {
  if (a.sym || b.sym)
    return fg_dim_eq(a, b);
  return a.size <= b.size;
}

static bool check_rank(const fg_node *n, const char *what, const fg_type *t, int rank, fg_diag *d) {
  if (t->rank == rank)
    return true;
  fg_error(d, n->loc, "'%s': %s has rank %d, expected %d", n->op->name, what, t->rank, rank);
  return false;
}

/* gather, take_along_dim: index of x's rank; take_along_dim broadcasts
 * the two outside dim, gather needs index extents within x's. */
static bool infer_gather(fg_node *n, int dim, fg_type *t, fg_diag *d) {
  const fg_type *x = &n->in[0]->type, *idx = &n->in[1]->type;
  char a[256], b[256];
  if (!check_rank(n, "the index", idx, x->rank, d))
    return false;
  *t = *idx;
  for (int i = 0; i < x->rank; i++) {
    if (i == dim)
      continue;
    fg_dim xd = x->dims[i], id = idx->dims[i];
    if (n->op->code == FG_OP_GATHER) {
      if (dim_within(id, xd))
        continue;
    } else if (fg_dim_eq(xd, id) || (!id.sym && id.size == 1)) {
      t->dims[i] = xd;
      continue;
    } else if (!xd.sym && xd.size == 1) {
      continue;
    }
    fg_error(d, n->loc,
             n->op->code == FG_OP_GATHER
                 ? "'gather': index shape %s exceeds the operand's shape %s at dim %d"
                 : "'take_along_dim': index shape %s does not broadcast with %s at dim %d",
             shape_str(idx, a, sizeof a), shape_str(x, b, sizeof b), i);
    return false;
  }
  return true;
}

/* scatter_add: index, src and x of one rank, the index within src and,
 * outside dim, within x. index_add: a 1-D index; src is x with dim's
 * extent the index's. */
static bool infer_scatter(fg_node *n, int dim, fg_diag *d) {
  const fg_type *x = &n->in[0]->type, *idx = &n->in[1]->type, *src = &n->in[2]->type;
  char a[256], b[256];
  if (src->dtype != x->dtype) {
    fg_error(d, n->loc, "'%s': the source is %s, the operand %s (they must agree; insert a cast)",
             n->op->name, fg_dtype_name(src->dtype), fg_dtype_name(x->dtype));
    return false;
  }
  if (!check_rank(n, "the source", src, x->rank, d))
    return false;
  if (n->op->code == FG_OP_SCATTER_ADD) {
    if (!check_rank(n, "the index", idx, x->rank, d))
      return false;
    for (int i = 0; i < x->rank; i++)
      if (!dim_within(idx->dims[i], src->dims[i]) ||
          (i != dim && !dim_within(idx->dims[i], x->dims[i]))) {
        fg_error(d, n->loc,
                 "'scatter_add': index shape %s exceeds the source's or the operand's at dim %d "
                 "(source %s)",
                 shape_str(idx, a, sizeof a), i, shape_str(src, b, sizeof b));
        return false;
      }
    return true;
  }
  if (!check_rank(n, "the index", idx, 1, d))
    return false;
  for (int i = 0; i < x->rank; i++) {
    fg_dim want = i == dim ? idx->dims[0] : x->dims[i];
    if (!fg_dim_eq(src->dims[i], want)) {
      fg_error(d, n->loc,
               "'index_add': source shape %s should be the operand's %s with dim %d the index's "
               "length",
               shape_str(src, a, sizeof a), shape_str(x, b, sizeof b), dim);
      return false;
    }
  }
  return true;
}

static bool infer_indexing(fg_node *n, fg_diag *d) {
  const fg_type *x = &n->in[0]->type, *idx = &n->in[1]->type;
  int dim = norm_dim(n, "dim", fg_attr_int(n, "dim"), x->rank, d);
  if (dim < 0)
    return false;
  if (!fg_dtype_is_int(idx->dtype)) {
    fg_error(d, n->loc, "'%s' needs an integer index (i8, u8, i16, i32 or i64), not %s",
             n->op->name, fg_dtype_name(idx->dtype));
    return false;
  }
  if (x->dims[dim].sym) {
    fg_error(d, attr_loc(n, "dim"), "'%s' along symbolic dimension %d (%s) is not supported",
             n->op->name, dim, x->dims[dim].sym);
    return false;
  }
  if (x->dims[dim].size == 0 && fg_type_numel(idx) != 0) {
    fg_error(d, n->loc, "'%s' indexes dimension %d of size 0", n->op->name, dim);
    return false;
  }
  fg_type t = *x;
  switch (n->op->code) {
  case FG_OP_GATHER:
  case FG_OP_TAKE_ALONG_DIM:
    if (!infer_gather(n, dim, &t, d))
      return false;
    break;
  case FG_OP_INDEX_SELECT:
    if (!check_rank(n, "the index", idx, 1, d))
      return false;
    t.dims[dim] = idx->dims[0];
    break;
  default:
    if (!infer_scatter(n, dim, d))
      return false;
    break;
  }
  t.dtype = x->dtype;
  t.has_layout = false;
  t.scalar = false;
  n->out[0]->type = t;
  return true;
}

/* ---- creation, control, attention ---- */

static bool infer_full(fg_node *n, fg_diag *d) {
  const fg_attr *s = ints_attr(n, "shape"), *v = fg_node_attr(n, "value"),
                *dt = fg_node_attr(n, "dtype");
  if (s->n > FG_MAX_RANK) {
    fg_error(d, attr_loc(n, "shape"), "shape has %d dims; at most %d are supported", s->n,
             FG_MAX_RANK);
    return false;
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.rank = s->n;
  for (int i = 0; i < s->n; i++) {
    fg_dim w = fg_attr_dim(s, i);
    if (!w.sym && w.size < 0) {
      fg_error(d, attr_loc(n, "shape"), "invalid size %" PRId64 " in shape", s->ints[i]);
      return false;
    }
    t.dims[i] = w;
  }
  t.dtype = dt                         ? dt->dtype
            : v->kind == FG_ATTR_FLOAT ? FG_F32
            : v->kind == FG_ATTR_BOOL  ? FG_BOOL
                                       : FG_I64;
  n->out[0]->type = t;
  return true;
}

/* iota(n), n an integer literal operand, or iota(T) (no operand, the
 * length in attribute `length`: an expression of a symbolic size, or its
 * value once the size is bound; docs/format.md 3.2.1). */
static bool infer_iota(fg_node *n, fg_diag *d) {
  const fg_attr *la = fg_node_attr(n, "length");
  bool has_len = la && la->kind == FG_ATTR_INTS;
  fg_dim len = {0};
  if (n->nin == 1 && has_len) {
    fg_error(d, attr_loc(n, "length"),
             "'iota' takes its length once: an operand or attribute 'length', not both");
    return false;
  }
  if (n->nin == 0 && !has_len) {
    fg_error(d, n->loc,
             "'iota' needs a length: iota(n), n an integer literal or a size "
             "expression such as T");
    return false;
  }
  if (has_len) {
    if (la->n != 1) {
      fg_error(d, attr_loc(n, "length"), "attribute 'length' of 'iota' has one entry, got %d",
               la->n);
      return false;
    }
    len = fg_attr_dim(la, 0);
  } else {
    double lit;
    const fg_value *v = n->in[0];
    if (!fg_value_is_literal(v, &lit) || v->def->attrs[0].kind != FG_ATTR_INT) {
      fg_error(d, n->loc,
               "the length of 'iota' must be an integer literal or a size expression such as T");
      return false;
    }
    len = fg_dim_affine(NULL, 0, v->def->attrs[0].i);
  }
  if (!len.sym && len.size < 0) {
    fg_error(d, n->loc, "the length of 'iota' must not be negative (got %" PRId64 ")", len.size);
    return false;
  }
  fg_dtype dt = fg_node_attr(n, "dtype")->dtype;
  if (dt == FG_BOOL) {
    fg_error(d, attr_loc(n, "dtype"), "'iota' needs a numeric dtype");
    return false;
  }
  int64_t one = 1;
  n->out[0]->type = fg_type_tensor(dt, 1, &one);
  n->out[0]->type.dims[0] = len;
  return true;
}

/* ---- random numbers ---- */

/* The seed and offset operands (the last two): an integer literal, scalar
 * parameter, or 0-d or one-element tensor, so that a caller can keep them
 * in device memory and advance them between replays. */
static bool random_stream_operands(fg_node *n, fg_diag *d) {
  static const char *const what[2] = {"seed", "offset"};
  for (int k = 0; k < 2; k++) {
    int i = n->nin - 2 + k;
    const fg_type *t = &n->in[i]->type;
    if (!fg_dtype_is_int(t->dtype)) {
      fg_error(d, operand_loc(n, i), "the %s of '%s' must be an integer, not %s", what[k],
               n->op->name, fg_dtype_name(t->dtype));
      return false;
    }
    bool one = t->rank == 0 || (t->rank == 1 && !t->dims[0].sym && t->dims[0].size == 1);
    if (!one) {
      fg_error(d, operand_loc(n, i),
               "the %s of '%s' must be a scalar or a 0-d or one-element tensor", what[k],
               n->op->name);
      return false;
    }
  }
  return true;
}

static bool infer_random(fg_node *n, fg_diag *d) {
  if (!random_stream_operands(n, d))
    return false;
  fg_dtype dt = fg_node_attr(n, "dtype")->dtype;
  if (!fg_dtype_is_float(dt)) {
    fg_error(d, attr_loc(n, "dtype"), "'%s' needs a float dtype, not %s", n->op->name,
             fg_dtype_name(dt));
    return false;
  }
  const fg_attr *s = ints_attr(n, "shape");
  if (s->n > FG_MAX_RANK) {
    fg_error(d, attr_loc(n, "shape"), "shape has %d dims; at most %d are supported", s->n,
             FG_MAX_RANK);
    return false;
  }
  for (int i = 0; i < s->n; i++)
    if (s->ints[i] < 0) {
      fg_error(d, attr_loc(n, "shape"), "invalid size %" PRId64 " in shape", s->ints[i]);
      return false;
    }
  n->out[0]->type = fg_type_tensor(dt, s->n, s->ints);
  return true;
}

static bool infer_dropout(fg_node *n, fg_diag *d) {
  if (!random_stream_operands(n, d))
    return false;
  fg_type t = n->in[0]->type;
  if (!fg_dtype_is_float(t.dtype)) {
    fg_error(d, operand_loc(n, 0), "'dropout' needs a float tensor, not %s",
             fg_dtype_name(t.dtype));
    return false;
  }
  double p = fg_node_attr(n, "p")->f;
  if (!(p >= 0.0 && p <= 1.0)) {
    fg_error(d, attr_loc(n, "p"), "the probability p of 'dropout' must be in [0, 1], not %g", p);
    return false;
  }
  t.has_layout = false;
  n->out[0]->type = t;
  return true;
}

/* A dim as a message names it: its size or its symbol. */
static const char *dim_str(fg_dim x, char *b, size_t cap) {
  if (x.sym)
    snprintf(b, cap, "%s", x.sym);
  else
    snprintf(b, cap, "%lld", (long long)x.size);
  return b;
}

static bool infer_sdpa(fg_node *n, fg_diag *d) {
  char b0[64], b1[64], b2[64];
  for (int i = 0; i < n->nin; i++) {
    int want = (n->op->code == FG_OP_SDPA_BWD && i == 5) ? 3 : 4;
    if (n->in[i]->type.rank != want) {
      fg_error(d, operand_loc(n, i), "'%s' operand %d must have rank %d", n->op->name, i, want);
      return false;
    }
  }
  if (n->op->code == FG_OP_SDPA) {
    const fg_type *q = &n->in[0]->type, *k = &n->in[1]->type, *v = &n->in[2]->type;
    if (!fg_dim_eq(q->dims[0], k->dims[0]) || !fg_dim_eq(q->dims[3], k->dims[3]) ||
        !fg_dim_eq(k->dims[2], v->dims[2]) || !fg_dim_eq(k->dims[0], v->dims[0]) ||
        !fg_dim_eq(k->dims[1], v->dims[1])) {
      fg_error(d, n->loc, "'sdpa' operands have incompatible shapes");
      return false;
    }
    /* GQA / MQA: k and v may have fewer heads, a divisor of q's */
    if (!fg_dim_eq(q->dims[1], k->dims[1]) &&
        (q->dims[1].sym || k->dims[1].sym || k->dims[1].size < 1 ||
         q->dims[1].size % k->dims[1].size)) {
      fg_error(d, n->loc,
               "'sdpa' needs q's head count to be a multiple of k's and v's (grouped-query "
               "attention): q has %s heads, k and v %s",
               dim_str(q->dims[1], b0, sizeof b0), dim_str(k->dims[1], b1, sizeof b1));
      return false;
    }
    fg_type o = *q;
    o.has_layout = false;
    o.dims[3] = v->dims[3];
    fg_type lse;
    memset(&lse, 0, sizeof lse);
    lse.dtype = FG_F32;
    lse.rank = 3;
    for (int i = 0; i < 3; i++)
      lse.dims[i] = q->dims[i];
    n->out[0]->type = o;
    n->out[1]->type = lse;
  } else {
    const fg_type *q = &n->in[1]->type, *k = &n->in[2]->type, *v = &n->in[3]->type;
    if (!fg_dim_eq(k->dims[1], v->dims[1]) ||
        (!fg_dim_eq(q->dims[1], k->dims[1]) &&
         (q->dims[1].sym || k->dims[1].sym || k->dims[1].size < 1 ||
          q->dims[1].size % k->dims[1].size))) {
      fg_error(d, n->loc,
               "'sdpa_bwd' needs q's head count to be a multiple of k's and v's (grouped-query "
               "attention): q has %s heads, k %s, v %s",
               dim_str(q->dims[1], b0, sizeof b0), dim_str(k->dims[1], b1, sizeof b1),
               dim_str(v->dims[1], b2, sizeof b2));
      return false;
    }
    for (int i = 0; i < 3; i++) {
      fg_type t = n->in[1 + i]->type;
      t.has_layout = false;
      n->out[i]->type = t;
    }
  }
  return true;
}

/* Every value an op makes is limited as parameters are (FG_MAX_NUMEL
 * elements, no negative size), whatever the op: full, expand, cat, iota,
 * pad, reshape... */
static bool shapes_in_limits(fg_node *n, fg_diag *d) {
  for (int r = 0; r < n->nout; r++) {
    const fg_type *t = &n->out[r]->type;
    int64_t numel = 1;
    bool empty = false;
    for (int i = 0; i < t->rank; i++) {
      int64_t s = t->dims[i].sym ? 1 : t->dims[i].size;
      if (s < 0) {
        fg_internal_error(d, n->loc, "'%s' made dimension %d negative (%" PRId64 ")", n->op->name,
                          i, s);
        return false;
      }
      empty |= s == 0;
      if (s > 0 && numel > FG_MAX_NUMEL / s)
        numel = FG_MAX_NUMEL + 1;
      else
        numel *= s;
    }
    if (!empty && numel > FG_MAX_NUMEL) {
      fg_error(d, n->loc,
               "'%s' makes a tensor of more than 2^62 elements (the limit for every tensor)",
               n->op->name);
      return false;
    }
  }
  return true;
}

const char *fg_packed_type_problem(const fg_type *t) {
  if (!fg_dtype_is_packed(t->dtype))
    return NULL;
  if (t->rank == 0)
    return "an f4e2m1 tensor needs at least one dimension (two elements share a byte)";
  const fg_dim *in = &t->dims[t->rank - 1];
  if (in->sym || in->size % 2)
    return "the innermost dimension of an f4e2m1 tensor must be a static even size (two "
           "elements share a byte)";
  if (t->has_layout)
    return "an f4e2m1 parameter cannot have a layout (its storage is packed row-major)";
  return NULL;
}

static bool packed_results_ok(fg_node *n, fg_diag *d) {
  for (int r = 0; r < n->nout; r++) {
    const char *why = fg_packed_type_problem(&n->out[r]->type);
    if (why) {
      fg_error(d, n->loc, "'%s': %s", n->op->name, why);
      return false;
    }
  }
  return true;
}

/* ---- issue 20, ops: the composites (opt/decompose.c rewrites them) ---- */

/* stack(a, b, ..., dim=): operands of one shape, a new dim of their count
 * at `dim` (0..rank), dtypes promoted as cat's. */
static bool infer_stack(fg_node *n, fg_diag *d) {
  const fg_type *a = &n->in[0]->type;
  if (a->rank + 1 > FG_MAX_RANK) {
    fg_error(d, n->loc, "stack makes a tensor of rank %d (at most %d)", a->rank + 1, FG_MAX_RANK);
    return false;
  }
  int dim = norm_dim(n, "dim", fg_attr_int(n, "dim"), a->rank + 1, d);
  if (dim < 0)
    return false;
  fg_dtype dt = a->dtype;
  for (int i = 1; i < n->nin; i++) {
    const fg_type *b = &n->in[i]->type;
    bool same = b->rank == a->rank;
    for (int k = 0; same && k < a->rank; k++)
      same = fg_dim_eq(a->dims[k], b->dims[k]);
    if (!same) {
      char x[256], y[256];
      fg_error(d, operand_loc(n, i), "stack operand %d has shape %s, operand 0 has shape %s", i,
               shape_str(b, y, sizeof y), shape_str(a, x, sizeof x));
      return false;
    }
    dt = fg_promote_types(dt, b->dtype);
    if (dt == FG_DTYPE_INVALID) {
      fg_error(d, operand_loc(n, i),
               "stack operands have dtypes that do not promote (float8 needs a cast)");
      return false;
    }
  }
  fg_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  for (int k = 0; k < a->rank + 1; k++)
    t.dims[t.rank++] = k == dim ? (fg_dim){.size = n->nin} : a->dims[k < dim ? k : k - 1];
  n->out[0]->type = t;
  return true;
}

/* softmax / log_softmax(x, dim=, dtype=): x's shape; the dtype= (a float),
 * else x's, which must be a float (as torch.softmax). */
static bool infer_softmax(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  if (norm_dim(n, "dim", fg_attr_int(n, "dim"), in->rank, d) < 0)
    return false;
  const fg_attr *dt = fg_node_attr(n, "dtype");
  fg_dtype t = dt ? dt->dtype : in->dtype;
  if (!fg_dtype_is_float(t)) {
    if (dt)
      fg_error(d, attr_loc(n, "dtype"), "'%s' needs dtype= a floating-point type, not %s",
               n->op->name, fg_dtype_name(t));
    else
      fg_error(d, n->loc, "'%s' needs a floating-point input (got %s); pass dtype= a float type",
               n->op->name, fg_dtype_name(t));
    return false;
  }
  if (t == FG_F8E4M3 || t == FG_F8E5M2 ||
      (!dt && (in->dtype == FG_F8E4M3 || in->dtype == FG_F8E5M2))) {
    fg_error(d, n->loc, "'%s' of float8 values: cast to a wider float first", n->op->name);
    return false;
  }
  fg_type r = *in;
  r.has_layout = false;
  r.dtype = t;
  n->out[0]->type = r;
  return true;
}

/* logsumexp(x, dims=, keepdim=): a reduction's shape; float inputs keep
 * their dtype, integers and bool give f32 (as torch.logsumexp). */
static bool infer_logsumexp(fg_node *n, fg_diag *d) {
  if (!infer_reduction(n, d))
    return false;
  fg_dtype in = n->in[0]->type.dtype;
  if (in == FG_F8E4M3 || in == FG_F8E5M2) {
    fg_error(d, n->loc, "'logsumexp' of float8 values: cast to a wider float first");
    return false;
  }
  n->out[0]->type.dtype = fg_dtype_is_float(in) ? in : FG_F32;
  return true;
}

/* argmax / argmin(x, dim=, keepdim=): i64 indices along `dim`; without
 * dim=, of the flattened tensor (a 0-d result, or all dims 1 with
 * keepdim=true). The reduced extent must be static and nonempty (PyTorch
 * raises on an empty one; fusec has no run-time errors). */
static bool infer_argminmax(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  const fg_attr *da = fg_node_attr(n, "dim");
  bool keep = fg_attr_bool(n, "keepdim");
  int dim = -1;
  if (da) {
    dim = norm_dim(n, "dim", da->i, in->rank, d);
    if (dim < 0)
      return false;
  }
  int64_t count = 1;
  for (int k = 0; k < in->rank; k++) {
    if (dim >= 0 && k != dim)
      continue;
    if (in->dims[k].sym) {
      fg_error(d, da ? attr_loc(n, "dim") : n->loc,
               "'%s' along symbolic dimension %d (%s) is not supported: its extent must be static",
               n->op->name, k, in->dims[k].sym);
      return false;
    }
    count *= in->dims[k].size;
  }
  if (count == 0) {
    fg_error(d, n->loc, "'%s' over an empty extent has no index to return", n->op->name);
    return false;
  }
  if (count > INT32_MAX) {
    fg_error(d, n->loc, "'%s' over %" PRId64 " elements: at most 2^31-1 are supported", n->op->name,
             count);
    return false;
  }
  if (in->dtype == FG_BOOL) {
    fg_error(d, n->loc, "'%s' of a bool tensor: cast it to an integer type first", n->op->name);
    return false;
  }
  bool mask[FG_MAX_RANK];
  for (int k = 0; k < in->rank; k++)
    mask[k] = dim < 0 || k == dim;
  n->out[0]->type = reduced_type(in, mask, keep, FG_I64);
  return true;
}

/* cumsum(x, dim=, dtype=): x's shape; dtype= or x's dtype, i64 for
 * integers and bool (as torch.cumsum). Any extent along dim: the code
 * generator's scan kernels (opt/segment.c start_scan_kernels) take it. */
static bool infer_cumsum(fg_node *n, fg_diag *d) {
  const fg_type *in = &n->in[0]->type;
  int dim = norm_dim(n, "dim", fg_attr_int(n, "dim"), in->rank, d);
  if (dim < 0)
    return false;
  const fg_attr *dt = fg_node_attr(n, "dtype");
  fg_dtype t = dt ? dt->dtype : fg_dtype_is_float(in->dtype) ? in->dtype : FG_I64;
  if (dt && fg_dtype_category(t) < fg_dtype_category(in->dtype)) {
    fg_error(d, attr_loc(n, "dtype"), "'cumsum' cannot accumulate %s into %s",
             fg_dtype_name(in->dtype), fg_dtype_name(t));
    return false;
  }
  if (t == FG_BOOL || t == FG_F8E4M3 || t == FG_F8E5M2) {
    fg_error(d, dt ? attr_loc(n, "dtype") : n->loc, "'cumsum' into %s is not supported%s",
             fg_dtype_name(t), t == FG_BOOL ? "" : ": cast to a wider float first");
    return false;
  }
  fg_type r = *in;
  r.has_layout = false;
  r.dtype = t;
  n->out[0]->type = r;
  return true;
}

static bool infer_node(fg_node *n, fg_diag *d);

bool fg_infer_node(fg_node *n, fg_diag *d) {
  return infer_node(n, d) && shapes_in_limits(n, d) && packed_results_ok(n, d);
}

static bool infer_node(fg_node *n, fg_diag *d) {
  const fg_op *op = n->op;
  if (n->nin < op->min_in || (op->max_in >= 0 && n->nin > op->max_in)) {
    if (op->min_in == op->max_in)
      fg_error(d, n->loc, "'%s' takes %d operand%s, got %d", op->name, op->min_in,
               op->min_in == 1 ? "" : "s", n->nin);
    else
      fg_error(d, n->loc, "'%s' takes at least %d operand%s, got %d", op->name, op->min_in,
               op->min_in == 1 ? "" : "s", n->nin);
    return false;
  }
  for (int i = 0; i < op->nattrs; i++)
    if (op->attrs[i].required && n->attrs[i].kind == FG_ATTR_NONE) {
      fg_error(d, n->loc, "'%s' needs the attribute %s=", op->name, op->attrs[i].name);
      return false;
    }
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]->type.scalar && op->kind != FG_KIND_POINTWISE && op->code != FG_OP_IOTA &&
        !(fg_op_is_random(op) && i >= n->nin - 2)) {
      fg_error(d, operand_loc(n, i), "'%s' needs tensor operands; operand %d is a scalar", op->name,
               i);
      return false;
    }
  switch (op->code) { /* issue 20, ops: composites of kinds they share */
  case FG_OP_STACK:
    return infer_stack(n, d);
  case FG_OP_SOFTMAX:
  case FG_OP_LOG_SOFTMAX:
    return infer_softmax(n, d);
  case FG_OP_LOGSUMEXP:
    return infer_logsumexp(n, d);
  case FG_OP_ARGMAX:
  case FG_OP_ARGMIN:
    return infer_argminmax(n, d);
  case FG_OP_CUMSUM:
    return infer_cumsum(n, d);
  default:
    break;
  }
  switch (op->kind) {
  case FG_KIND_POINTWISE:
    return infer_pointwise(n, d);
  case FG_KIND_REDUCTION:
    return infer_reduction(n, d);
  case FG_KIND_CREATION:
    switch (op->code) {
    case FG_OP_EXTENT:
      memset(&n->out[0]->type, 0, sizeof n->out[0]->type);
      n->out[0]->type.dtype = fg_node_attr(n, "dtype")->dtype;
      return true;
    case FG_OP_FULL:
      return infer_full(n, d);
    case FG_OP_IOTA:
      return infer_iota(n, d);
    case FG_OP_DROPOUT:
      return infer_dropout(n, d);
    case FG_OP_RAND:
    case FG_OP_RANDN:
      return infer_random(n, d);
    default:
      break;
    }
    break;
  case FG_KIND_CONTROL:
    n->out[0]->type = n->in[0]->type;
    n->out[0]->type.has_layout = false;
    return true;
  case FG_KIND_ATTENTION:
    return infer_sdpa(n, d);
  case FG_KIND_LITERAL:
    return true;
  case FG_KIND_INDEXING:
    return infer_indexing(n, d);
  case FG_KIND_VIEW:
    break;
  }
  switch (op->code) {
  case FG_OP_RESHAPE:
  case FG_OP_VIEW:
    return infer_reshape(n, d);
  case FG_OP_PERMUTE:
  case FG_OP_TRANSPOSE:
    return infer_permute(n, d);
  case FG_OP_BROADCAST_IN_DIM:
    return infer_broadcast_in_dim(n, d);
  case FG_OP_EXPAND:
    return infer_expand(n, d);
  case FG_OP_SQUEEZE:
    return infer_squeeze(n, d);
  case FG_OP_UNSQUEEZE:
    return infer_unsqueeze(n, d);
  case FG_OP_SLICE:
    return infer_slice(n, d);
  case FG_OP_CAT:
    return infer_cat(n, d);
  case FG_OP_SPLIT:
    return infer_split(n, d);
  case FG_OP_PAD:
    return infer_pad(n, d);
  default:
    break;
  }
  fg_internal_error(d, n->loc, "no shape inference for '%s'", op->name);
  return false;
}

/* ---- sizes that are expressions of a size: what the facts prove ---- */

/* x at v, exactly (mul*v + off never overflows 128 bits). */
static __int128 at(fg_dim x, int64_t v) { return (__int128)fg_dim_mul(x) * v + fg_dim_off(x); }

/* The first value of x's size (of min, max: an affine expression is
 * smallest at one of them) at which lo <= x fails; false when none. */
static bool below(const fg_graph *g, fg_dim lo, fg_dim x, int64_t *where) {
  const char *name = x.sym ? x.sym : lo.sym;
  if (!name)
    return at(x, 0) < at(lo, 0) && (*where = 0, true);
  const fg_sym *s = fg_graph_sym(g, name);
  int64_t ends[2] = {s ? s->min : FG_SYM_DEFAULT_MIN, s ? s->max : FG_SYM_DEFAULT_MAX};
  for (int k = 0; k < 2; k++)
    if (at(x, ends[k]) < at(lo, ends[k])) {
      *where = ends[k];
      return true;
    }
  return false;
}

static const char *facts_str(const fg_graph *g, const char *name, char *buf, int cap) {
  const fg_sym *s = fg_graph_sym(g, name);
  snprintf(buf, (size_t)cap, "%s: %" PRId64 "..%" PRId64 "%s", name,
           s ? s->min : FG_SYM_DEFAULT_MIN, s ? s->max : FG_SYM_DEFAULT_MAX,
           s && s->loc.line > 0 ? "" : ", the default");
  return buf;
}

bool fg_check_size_facts(const fg_graph *g, fg_diag *d) {
  char a[96], b[96], c[96], f[160];
  int64_t v;
  const fg_dim zero = fg_dim_affine(NULL, 0, 0);
  for (const fg_node *n = g->first; n; n = n->next) {
    if (n->op->code == FG_OP_SLICE)
      for (int i = 0; i < n->in[0]->type.rank; i++) {
        const fg_attr *st = ints_attr(n, "starts"), *en = ints_attr(n, "ends");
        fg_dim D = n->in[0]->type.dims[i], s0, len, end;
        if (!D.sym && !fg_attr_dim(st, i).sym && !fg_attr_dim(en, i).sym)
          continue;
        if (!fg_slice_dim_sym(n, i, &s0, &len, d) || !fg_dim_add(s0, len, &end))
          return false;
        if (below(g, zero, s0, &v) || below(g, end, D, &v)) {
          fg_error(d, n->loc,
                   "slice of dimension %d (%s) from %s to %s: the bounds leave the dim where %s "
                   "= %" PRId64 " (%s); declare a range that keeps them inside, or write the "
                   "bound as an expression of %s",
                   i, fg_dim_str(D, a, sizeof a), fg_dim_str(s0, b, sizeof b),
                   fg_dim_str(end, c, sizeof c), D.sym, v, facts_str(g, D.sym, f, sizeof f), D.sym);
          return false;
        }
      }
    for (int r = 0; r < n->nout; r++) {
      const fg_type *t = &n->out[r]->type;
      for (int i = 0; i < t->rank; i++)
        if (t->dims[i].sym && below(g, zero, t->dims[i], &v)) {
          fg_error(d, n->loc,
                   "'%s' makes dimension %d of size %s, negative where %s = %" PRId64
                   " (%s); declare a range for %s that keeps it at least 0",
                   n->op->name, i, fg_dim_str(t->dims[i], a, sizeof a), t->dims[i].sym, v,
                   facts_str(g, t->dims[i].sym, f, sizeof f), t->dims[i].sym);
          return false;
        }
    }
  }
  return true;
}
