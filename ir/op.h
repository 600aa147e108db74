/* The op table: one row per op drives parsing (name, operands, attributes),
 * verification, shape/dtype inference and the reference interpreter. Adding
 * an op is one row in op_table.c plus its semantics. */
#ifndef FG_OP_H
#define FG_OP_H
#include "ir.h"

typedef enum fg_op_kind {
  FG_KIND_POINTWISE,
  FG_KIND_REDUCTION,
  FG_KIND_VIEW,
  FG_KIND_CREATION,
  FG_KIND_CONTROL,
  FG_KIND_ATTENTION,
  FG_KIND_LITERAL,  /* internal: defines a literal scalar; never written by users */
  FG_KIND_INDEXING, /* gather and scatter by an integer index tensor */
} fg_op_kind;

typedef enum fg_opcode {
  /* unary pointwise */
  FG_OP_NEG,
  FG_OP_ABS,
  FG_OP_EXP,
  FG_OP_EXP2,
  FG_OP_EXPM1,
  FG_OP_LOG,
  FG_OP_LOG2,
  FG_OP_LOG1P,
  FG_OP_SQRT,
  FG_OP_RSQRT,
  FG_OP_RECIPROCAL,
  FG_OP_SIN,
  FG_OP_COS,
  FG_OP_TANH,
  FG_OP_SIGMOID,
  FG_OP_RELU,
  FG_OP_SILU,
  FG_OP_ERF,
  FG_OP_FLOOR,
  FG_OP_CEIL,
  FG_OP_ROUND,
  FG_OP_TRUNC,
  FG_OP_SIGN,
  FG_OP_ISNAN,
  FG_OP_ISINF,
  FG_OP_LOGICAL_NOT,
  FG_OP_GELU,
  /* binary pointwise */
  FG_OP_ADD,
  FG_OP_SUB,
  FG_OP_MUL,
  FG_OP_DIV,
  FG_OP_POW,
  FG_OP_MAXIMUM,
  FG_OP_MINIMUM,
  FG_OP_FMOD,
  FG_OP_EQ,
  FG_OP_NE,
  FG_OP_LT,
  FG_OP_LE,
  FG_OP_GT,
  FG_OP_GE,
  FG_OP_LOGICAL_AND,
  FG_OP_LOGICAL_OR,
  /* other pointwise */
  FG_OP_WHERE,
  FG_OP_CLAMP,
  FG_OP_CAST,
  /* reductions */
  FG_OP_SUM,
  FG_OP_AMAX,
  FG_OP_AMIN,
  FG_OP_MEAN,
  FG_OP_PROD,
  FG_OP_VAR,
  FG_OP_VAR_MEAN,
  /* views and shape ops */
  FG_OP_RESHAPE,
  FG_OP_VIEW,
  FG_OP_PERMUTE,
  FG_OP_TRANSPOSE,
  FG_OP_BROADCAST_IN_DIM,
  FG_OP_EXPAND,
  FG_OP_SQUEEZE,
  FG_OP_UNSQUEEZE,
  FG_OP_SLICE,
  FG_OP_CAT,
  FG_OP_SPLIT,
  FG_OP_PAD,
  /* creation */
  FG_OP_FULL,
  FG_OP_IOTA,
  /* control */
  FG_OP_SEGMENT_SET,
  /* attention */
  FG_OP_SDPA,
  FG_OP_SDPA_BWD,
  /* internal */
  FG_OP_EXTENT,
  FG_OP_LITERAL,
  /* indexing (operands x, index[, src]; dim=) */
  FG_OP_GATHER,
  FG_OP_INDEX_SELECT,
  FG_OP_TAKE_ALONG_DIM,
  FG_OP_SCATTER_ADD,
  FG_OP_INDEX_ADD,
  /* MX formats */
  FG_OP_MX_SCALE,
  /* random numbers (docs/format.md 5.12; ir/random.h): creation ops keyed
   * by seed and offset operands; dropout is a composite the decompose pass
   * rewrites into rand and pointwise ops */
  FG_OP_RAND,
  FG_OP_RANDN,
  FG_OP_DROPOUT,
  /* issue 20, ops: pointwise, then composites that opt/decompose.c
   * rewrites into the ops above before anything else sees them */
  FG_OP_COSH,
  FG_OP_SINH,
  FG_OP_FMA,
  FG_OP_LERP,
  FG_OP_CONTIGUOUS,
  FG_OP_STACK,
  FG_OP_SOFTMAX,
  FG_OP_LOG_SOFTMAX,
  FG_OP_LOGSUMEXP,
  FG_OP_ARGMAX,
  FG_OP_ARGMIN,
  FG_OP_CUMSUM,
  FG_OP_COUNT
} fg_opcode;

/* How a pointwise op's result dtype follows from its promoted operand dtype. */
typedef enum fg_pw_rule {
  FG_PW_PROMOTE,   /* the promoted dtype (integers stay integers) */
  FG_PW_FLOAT,     /* promoted, but bool/int operands give f32 */
  FG_PW_COMPARE,   /* computed in the promoted dtype, result bool */
  FG_PW_PREDICATE, /* isnan/isinf: result bool */
  FG_PW_LOGICAL,   /* operands as truth values, result bool */
  FG_PW_WHERE,     /* operand 0 bool, operands 1..2 promoted */
  FG_PW_CAST,      /* dtype= attribute */
  /* MX formats */
  FG_PW_E8M0, /* result f8e8m0 (mx_scale) */
} fg_pw_rule;

typedef enum fg_attr_type {
  FG_AT_INT,
  FG_AT_FLOAT, /* an integer literal is accepted and converted */
  FG_AT_BOOL,
  FG_AT_DTYPE,
  FG_AT_STRING,
  FG_AT_INTS,
  FG_AT_SCALAR, /* int, float or bool literal, kept as written */
} fg_attr_type;

typedef struct fg_attr_spec {
  const char *name;
  fg_attr_type type;
  bool required;
  fg_attr def;                /* default when absent; kind NONE: stays absent */
  const char *const *choices; /* STRING: NULL-terminated allowed values */
} fg_attr_spec;

typedef struct fg_interp_ctx fg_interp_ctx;
/* Evaluates one non-pointwise node (interp.h). */
typedef bool (*fg_interp_fn)(fg_interp_ctx *cx, const fg_node *n);

struct fg_op {
  fg_opcode code;
  const char *name;
  fg_op_kind kind;
  int min_in, max_in; /* max_in -1: variadic */
  int nout;           /* -1: given by attributes (split) */
  int nattrs;
  const fg_attr_spec *attrs;
  /* pointwise only */
  fg_pw_rule pw;
  /* Float semantics, computed in double on values already in the compute
   * dtype; the caller rounds. NULL: the op has no float form. */
  double (*fn_f)(const double *a, const fg_node *n);
  /* Integer/bool semantics in int64; the caller wraps. NULL: none. */
  int64_t (*fn_i)(const int64_t *a, const fg_node *n);
  /* non-pointwise: evaluator */
  fg_interp_fn interp;
  /* FG_PROP_* flags: what passes and the backend ask of an op live here,
   * not in switches of their own (a forgotten case there defaulted to
   * false and silently lost an optimization). */
  unsigned props;
};

enum {
  FG_PROP_COMMUTATIVE = 1u << 0,     /* f(a, b) == f(b, a) bitwise, every dtype (cse) */
  FG_PROP_COMMUTATIVE_INT = 1u << 1, /* the same for integer operands only: a float maximum of +0
                                        and -0 gives the second operand */
  FG_PROP_EXACT = 1u << 2,           /* correctly rounded in every float dtype, so folding it by the
                                        interpreter's semantics is exact (canonicalize) */
  FG_PROP_IDEMPOTENT = 1u << 3,      /* f(f(x)) == f(x) (canonicalize) */
  FG_PROP_INVOLUTION = 1u << 4,      /* f(f(x)) == x (canonicalize) */
  FG_PROP_INT_IDENTITY = 1u << 5,    /* f(x) == x for integer x: the roundings (canonicalize) */
  FG_PROP_EXACT_NARROW = 1u << 6, /* exact in bf16/f16: no rounding back after the f32 computation
                                     (backend: the bf16 amax loop) */
  FG_PROP_LIBDEVICE = 1u << 7,    /* lowered through libdevice in f32/f64 (tests) */
};

static inline bool fg_op_has(const fg_op *op, unsigned prop) { return (op->props & prop) != 0; }
/* Whether a pointwise op's result is bool: from its promotion rule. */
static inline bool fg_op_returns_bool(const fg_op *op) {
  return op->kind == FG_KIND_POINTWISE &&
         (op->pw == FG_PW_COMPARE || op->pw == FG_PW_PREDICATE || op->pw == FG_PW_LOGICAL);
}

/* rand, randn, dropout: their last two operands are the seed and offset. */
static inline bool fg_op_is_random(const fg_op *op) {
  return op->code == FG_OP_RAND || op->code == FG_OP_RANDN || op->code == FG_OP_DROPOUT;
}

extern const fg_op fg_ops[FG_OP_COUNT];
const fg_op *fg_op_lookup(const char *name, int len); /* NULL: unknown; never LITERAL */
static inline const fg_op *fg_op_get(fg_opcode c) { return &fg_ops[c]; }
int fg_op_attr_index(const fg_op *op, const char *name); /* -1: none */
/* MX formats: emax of an MX element dtype (the exponent of its largest
 * power of two: f8e4m3 8, f8e5m2 15, f4e2m1 2); -1 for other dtypes. */
int fg_mx_elem_emax(fg_dtype elem);

#endif
