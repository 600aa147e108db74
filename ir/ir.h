/* The SSA IR: a module holds graphs; a graph holds parameters, a list of
 * nodes in definition order, and its results. Every object of a graph is in
 * the graph's arena. Ops are described by the op table (op.h). */
#ifndef FG_IR_H
#define FG_IR_H
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "dtype.h"

#define FG_MAX_RANK 8
/* The most elements a tensor may have (parameters and every value an op
 * makes): numel, strides and byte offsets stay within int64. */
#define FG_MAX_NUMEL ((int64_t)1 << 62)
/* The longest graph or parameter name: the loader takes names of at most
 * 255 characters, and a kernel's entry is the graph's name with a prefix
 * and a suffix (fg<G>_NAME_k<K>_v). */
#define FG_MAX_NAME 200

typedef struct fg_op fg_op;
typedef struct fg_node fg_node;
typedef struct fg_value fg_value;
typedef struct fg_graph fg_graph;

/* 1-based source position; line 0 means "no position" (built by a pass). */
typedef struct fg_loc {
  int line, col;
} fg_loc;

/* A dimension: a static size, or a symbolic one (sym != NULL, size = -1).
 * Equal names are equal sizes within a graph. A symbolic dim may be an
 * affine expression of its size (issues 18 and 20: `T-1` of a slice,
 * `T+16` of a cat, `2*T` of a reshape): mul*sym + off, where mul 0 reads
 * as 1, so that {-1, name} (and every dim built before expressions) is the
 * bare name. Parameters' dims are bare names; fg_dim_affine builds the
 * others (ir/dimexpr.c). */
typedef struct fg_dim {
  int64_t size;
  const char *sym;
  int64_t mul, off;
} fg_dim;

/* What the graph declares about a symbolic size (docs/format.md §3.2):
 * min..max, a multiple of div. Undeclared sizes: 1..2^31-1, div 1. */
typedef struct fg_sym {
  /* Interned in the graph's arena: the parameters' fg_dim.sym of this size
   * are this very pointer (fg_add_param interns them; the verifier checks
   * it), and so are the dims inference derives from them. Other code may
   * still compare names with strcmp (fg_dim_eq does). */
  const char *name;
  int64_t min, max, div;
  fg_loc loc; /* the declaration; line 0: not declared */
} fg_sym;

/* The facts of a size the graph does not declare, and the largest bound a
 * declaration may write. */
#define FG_SYM_DEFAULT_MIN ((int64_t)1)
#define FG_SYM_DEFAULT_MAX ((int64_t)2147483647)
#define FG_SYM_MAX_BOUND ((int64_t)1 << 62)

typedef struct fg_type {
  fg_dtype dtype;
  bool scalar; /* a by-value scalar parameter or literal (no brackets) */
  int rank;    /* 0 for scalars and 0-d tensors */
  fg_dim dims[FG_MAX_RANK];
  /* Parameters only: dims from outermost to innermost; has_layout false means
   * row-major. Never set on intermediates. */
  bool has_layout;
  int layout[FG_MAX_RANK];
} fg_type;

typedef enum fg_attr_kind {
  FG_ATTR_NONE = 0, /* absent */
  FG_ATTR_INT,
  FG_ATTR_FLOAT,
  FG_ATTR_BOOL,
  FG_ATTR_DTYPE,
  FG_ATTR_STRING,
  FG_ATTR_INTS,
} fg_attr_kind;

typedef struct fg_attr {
  fg_attr_kind kind;
  int64_t i;      /* INT, BOOL (0/1) */
  double f;       /* FLOAT */
  fg_dtype dtype; /* DTYPE */
  const char *s;  /* STRING */
  int n;          /* INTS */
  const int64_t *ints;
  /* INTS in a graph with symbolic sizes: NULL when every entry is an
   * integer, else n entries of which those with sym set are expressions of
   * a size (`ends=[T-1]`, docs/format.md 3.2.1); ints[i] is 0 there. */
  const fg_dim *syms;
  fg_loc loc; /* of the value, for diagnostics */
} fg_attr;

struct fg_value {
  int id;           /* unique within the graph */
  const char *name; /* NULL for unnamed temporaries */
  fg_type type;
  bool weak;       /* literal or scalar parameter: PyTorch's wrapped number tier */
  fg_node *def;    /* NULL for parameters */
  int def_index;   /* result index within def */
  int param_index; /* -1 unless a parameter */
  fg_loc loc;
};

struct fg_node {
  int id;
  const fg_op *op;
  int nin, nout;
  fg_value **in;
  fg_value **out;
  fg_attr *attrs; /* op->nattrs entries, in the op table's order */
  fg_loc loc;     /* the op name's position */
  fg_node *prev, *next;
};

struct fg_graph {
  fg_arena arena;
  const char *name;
  fg_loc loc;
  int nparams;
  fg_value **params;
  int nresults;
  fg_value **results;
  fg_loc *result_locs;
  /* In-place results (`return v -> p`, docs/format.md 6.1): result i is
   * written into the storage of parameter result_into[i], or -1. NULL when
   * no result is (fg_set_results resets it); set by fg_set_result_into. */
  int *result_into;
  fg_loc *result_into_locs; /* ... the parameter name after '->' */
  fg_node *first, *last;
  fg_node *insert_point; /* fg_node_new inserts before this node (NULL: append) */
  int next_value_id, next_node_id;
  /* Set by the bookend pass (opt/bookend.c): view ops at the fusion's
   * edges leave the kernels. */
  bool bookend;
  /* Every symbolic size that occurs in the parameters' dims, declared or
   * not: first the declared ones in the order of the graph's size clause
   * (`graph g<T: 1..64>(...)`), then the undeclared ones in the order of
   * their first occurrence in the parameters. Filled by fg_graph_add_sym
   * (declarations) and fg_add_param (every symbolic dim); the array moves
   * when it grows. */
  int nsyms;
  fg_sym *syms;
  int sym_slots_cap; /* private: fg_graph_sym's hash index (index + 1, 0 empty) */
  int *sym_slots;
  /* Set by fg_graph_bind_stand_in: the number that stands for the symbolic
   * size in this copy (opt/symbolic.h), so that decompose can tell a count
   * that holds it (0: none). */
  int64_t stand_in;
};

typedef struct fg_module {
  const char *path; /* for diagnostics */
  int ngraphs, cap;
  fg_graph **graphs;
} fg_module;

/* ---- construction ---- */
fg_module *fg_module_new(const char *path);
void fg_module_free(fg_module *m);
fg_graph *fg_graph_new(const char *name);
void fg_graph_free(fg_graph *g);
void fg_module_add(fg_module *m, fg_graph *g);
fg_graph *fg_module_find(const fg_module *m, const char *name);

fg_value *fg_value_new(fg_graph *g, const char *name, fg_type t);
/* A parameter. Each symbolic dim of t is interned in g's size table (an
 * entry with the default facts is added for a name not there yet), so the
 * parameter's fg_dim.sym point to the table's names. */
fg_value *fg_add_param(fg_graph *g, const char *name, fg_type t, fg_loc loc);

/* ---- symbolic sizes ---- */
/* g's entry for the size `name`; NULL when the graph has no such size. */
const fg_sym *fg_graph_sym(const fg_graph *g, const char *name);
/* Adds the size `name` to g's table with these facts (loc: the declaration,
 * line 0 when not declared) and returns the entry (valid until the next
 * addition); NULL when g has that name already. Facts are not checked
 * here: the parser checks declarations, the verifier the table. */
const fg_sym *fg_graph_add_sym(fg_graph *g, const char *name, int64_t min, int64_t max, int64_t div,
                               fg_loc loc);
/* Whether min..max (0 <= min <= max) holds a multiple of div (>= 1). */
bool fg_range_has_multiple(int64_t min, int64_t max, int64_t div);
/* True when the facts are the defaults (FG_SYM_DEFAULT_MIN..MAX, div 1). */
bool fg_sym_is_default(const fg_sym *s);
/* Whether `value` satisfies s's facts. When not, writes the reason into
 * msg, e.g. "size T = 100 is not a multiple of 8 (declared at
 * model.fg:3:14)" (path: the file that declares it). */
bool fg_sym_admits(const fg_sym *s, int64_t value, const char *path, char *msg, size_t cap);
/* A node with its operands and unset results (nout values created, typed by
 * inference later). Attributes start absent. Inserted before g->insert_point
 * (appended when that is NULL), as literals are too. */
fg_node *fg_node_new(fg_graph *g, const fg_op *op, int nin, fg_value *const *in, int nout,
                     fg_loc loc);
/* Same, but inserted before `before` (NULL: append). */
fg_node *fg_node_new_before(fg_graph *g, fg_node *before, const fg_op *op, int nin,
                            fg_value *const *in, int nout, fg_loc loc);
void fg_node_remove(fg_graph *g, fg_node *n);
/* A literal: a weak 0-d scalar value defined by a `literal` node. */
fg_value *fg_literal_float(fg_graph *g, double v, fg_loc loc);
fg_value *fg_literal_int(fg_graph *g, int64_t v, fg_loc loc);
fg_value *fg_literal_bool(fg_graph *g, bool v, fg_loc loc);
void fg_set_results(fg_graph *g, int n, fg_value *const *vals, const fg_loc *locs);
/* Marks result i as written into parameter `param`'s storage (loc: the
 * parameter's name after '->'); -1 unmarks it. */
void fg_set_result_into(fg_graph *g, int i, int param, fg_loc loc);
/* The parameter result i is written into, or -1. */
int fg_result_into(const fg_graph *g, int i);
/* Whether v can be written into parameter p: a tensor of p's dtype and
 * shape (symbolic dims by name). */
bool fg_value_fits_param(const fg_value *v, const fg_value *p);
/* Replace every use of `from` (operands and results) by `to`. */
void fg_replace_uses(fg_graph *g, fg_value *from, fg_value *to);
int fg_count_uses(const fg_graph *g, const fg_value *v);

/* ---- attribute access (by name; the op table gives the order) ---- */
const fg_attr *fg_node_attr(const fg_node *n, const char *name);
int64_t fg_attr_int(const fg_node *n, const char *name); /* default applied */
double fg_attr_float(const fg_node *n, const char *name);
bool fg_attr_bool(const fg_node *n, const char *name);

/* ---- types ---- */
fg_type fg_type_scalar(fg_dtype dt);
fg_type fg_type_tensor(fg_dtype dt, int rank, const int64_t *sizes);
bool fg_type_is_static(const fg_type *t);
int64_t fg_type_numel(const fg_type *t); /* -1 when symbolic */
bool fg_dim_eq(fg_dim a, fg_dim b);

/* ---- sizes that are expressions of a symbol (ir/dimexpr.c) ---- */
/* mul*sym + off normalized: a static dim when mul is 0 or sym NULL. */
fg_dim fg_dim_affine(const char *sym, int64_t mul, int64_t off);
/* A dim's coefficient of its symbol (1 for a bare name, 0 when static) and
 * its constant part (the size when static). */
int64_t fg_dim_mul(fg_dim d);
int64_t fg_dim_off(fg_dim d);
/* a + b and k*a when the result is affine in one symbol and fits int64
 * (false otherwise: two different symbols, an overflow). */
bool fg_dim_add(fg_dim a, fg_dim b, fg_dim *out);
bool fg_dim_scale(fg_dim a, int64_t k, fg_dim *out);
/* The value of d with its symbol bound to v (d->size when static); false on
 * overflow. */
bool fg_dim_eval(fg_dim d, int64_t v, int64_t *out);
/* Writes d as the language does: "64", "T", "T-1", "2*T+16". Returns buf. */
char *fg_dim_str(fg_dim d, char *buf, int cap);
/* The entry i of an INTS attribute as a dim (static: ints[i]). */
fg_dim fg_attr_dim(const fg_attr *a, int i);
/* Whether an INTS attribute has an entry that is an expression of a size. */
bool fg_attr_has_sym(const fg_attr *a);
bool fg_type_eq(const fg_type *a, const fg_type *b);        /* dtype, rank, dims, layout */
bool fg_type_same_dims(const fg_type *a, const fg_type *b); /* rank and dims (fg_dim_eq) */
/* Row-major strides (or the layout's) in elements; static types only. */
void fg_type_strides(const fg_type *t, int64_t *strides);
/* Writes e.g. "bf16[16,128,N]" or "f32"; returns buf. */
char *fg_type_str(const fg_type *t, char *buf, int cap);

/* True when `v` is a literal, setting its value (double for all kinds). */
bool fg_value_is_literal(const fg_value *v, double *out);

#endif
