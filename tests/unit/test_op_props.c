/* The op table's properties (FG_PROP_*, ir/op.h) hold for the op's own
 * semantics: every op is walked, each flag checked for the arity it needs
 * and, on many values (signed zeros, infinities, NaN, large integers),
 * against the row's fn_f / fn_i. A flag set wrongly would let cse or
 * canonicalize change results; these checks catch it. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "op.h"

static const double fvals[] = {0.0,  -0.0,  1.0,     -1.0,     0.5,       -2.5,
                               3.75, 1e300, -1e-300, INFINITY, -INFINITY, NAN};
static const int64_t ivals[] = {0, 1, -1, 2, -7, 127, INT64_MAX, INT64_MIN, 1 << 20};
enum { NF = sizeof fvals / sizeof *fvals, NI = sizeof ivals / sizeof *ivals };

static bool same_f(double a, double b) {
  return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

int main(void) {
  int flagged = 0;
  for (int c = 0; c < FG_OP_COUNT; c++) {
    const fg_op *op = fg_op_get((fg_opcode)c);
    CHECK_MSG(op->code == (fg_opcode)c && op->name,
              "row %d of the op table is missing or out of order", c);
    if (!op->props)
      continue;
    flagged++;
    bool unary = op->min_in == 1 && op->max_in == 1, binary = op->min_in == 2 && op->max_in == 2;
    CHECK_MSG(op->kind == FG_KIND_POINTWISE, "%s: properties on an op that is not pointwise",
              op->name);
    if (fg_op_has(op, FG_PROP_COMMUTATIVE | FG_PROP_COMMUTATIVE_INT))
      CHECK_MSG(binary, "%s: commutative but not binary", op->name);
    if (fg_op_has(op, FG_PROP_IDEMPOTENT | FG_PROP_INVOLUTION | FG_PROP_INT_IDENTITY))
      CHECK_MSG(unary, "%s: idempotent/involution/int identity but not unary", op->name);
    if (fg_op_has(op, FG_PROP_EXACT_NARROW))
      CHECK_MSG(fg_op_has(op, FG_PROP_EXACT), "%s: exact narrow, not exact", op->name);
    if (fg_op_has(op, FG_PROP_LIBDEVICE))
      CHECK_MSG(op->fn_f != NULL, "%s: libdevice without a float form", op->name);
    /* the laws, on the row's semantics */
    for (int i = 0; i < NF; i++)
      for (int j = 0; j < NF; j++) {
        double a[2] = {fvals[i], fvals[j]}, b[2] = {fvals[j], fvals[i]};
        if (op->fn_f && fg_op_has(op, FG_PROP_COMMUTATIVE))
          CHECK_MSG(same_f(op->fn_f(a, NULL), op->fn_f(b, NULL)), "%s(%g, %g) is not commutative",
                    op->name, a[0], a[1]);
      }
    for (int i = 0; i < NI; i++)
      for (int j = 0; j < NI; j++) {
        int64_t a[2] = {ivals[i], ivals[j]}, b[2] = {ivals[j], ivals[i]};
        if (op->fn_i && fg_op_has(op, FG_PROP_COMMUTATIVE | FG_PROP_COMMUTATIVE_INT))
          CHECK_MSG(op->fn_i(a, NULL) == op->fn_i(b, NULL), "%s is not commutative on integers",
                    op->name);
      }
    bool laws1 =
        unary && fg_op_has(op, FG_PROP_IDEMPOTENT | FG_PROP_INVOLUTION | FG_PROP_INT_IDENTITY);
    for (int i = 0; i < NF && laws1 && op->fn_f; i++) {
      double x[1] = {fvals[i]}, y[1] = {op->fn_f(x, NULL)}, z = op->fn_f(y, NULL);
      if (fg_op_has(op, FG_PROP_IDEMPOTENT))
        CHECK_MSG(same_f(z, y[0]), "%s(%s(%g)) != %s(%g)", op->name, op->name, x[0], op->name,
                  x[0]);
      if (fg_op_has(op, FG_PROP_INVOLUTION))
        CHECK_MSG(same_f(z, x[0]), "%s(%s(%g)) != %g", op->name, op->name, x[0], x[0]);
    }
    for (int i = 0; i < NI && laws1 && op->fn_i; i++) {
      int64_t x[1] = {ivals[i]}, y[1] = {op->fn_i(x, NULL)}, z = op->fn_i(y, NULL);
      if (fg_op_has(op, FG_PROP_IDEMPOTENT))
        CHECK_MSG(z == y[0], "%s is not idempotent on %lld", op->name, (long long)x[0]);
      if (fg_op_has(op, FG_PROP_INVOLUTION) &&
          op->code != FG_OP_LOGICAL_NOT) /* not(not(x)) is x's truth value */
        CHECK_MSG(z == x[0], "%s is no involution on %lld", op->name, (long long)x[0]);
      if (fg_op_has(op, FG_PROP_INT_IDENTITY))
        CHECK_MSG(y[0] == x[0], "%s is not the identity on %lld", op->name, (long long)x[0]);
    }
  }
  CHECK_MSG(flagged >= 30, "only %d ops carry properties", flagged);
  /* bool results come from the promotion rule */
  CHECK(fg_op_returns_bool(fg_op_get(FG_OP_LT)) && fg_op_returns_bool(fg_op_get(FG_OP_ISNAN)) &&
        fg_op_returns_bool(fg_op_get(FG_OP_LOGICAL_NOT)) &&
        !fg_op_returns_bool(fg_op_get(FG_OP_ADD)) && !fg_op_returns_bool(fg_op_get(FG_OP_SUM)));
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
