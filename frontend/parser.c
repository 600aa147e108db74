/* The .fg parser: recursive descent over the lexer's tokens, building IR
 * directly (ir.h) and running shape inference on each node as it is built,
 * so every error points at the token that caused it. The first error stops
 * the parse: the remaining input is not looked at, so no error cascades. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "lexer.h"
#include "op.h"
#include "parse.h"
#include "symtab.h"

/* Nesting limit for calls and attribute lists: deep enough for any real
 * graph, shallow enough that recursion cannot overflow the stack. */
enum { MAX_DEPTH = 256 };
/* fg_add_param copies the parameter array on each call; keep that bounded. */
enum { MAX_PARAMS = 4096 };
enum { QUOTE_MAX = 40 };

typedef struct parser {
  fg_lexer lx;
  fg_token tok;   /* current token */
  fg_token ahead; /* one token of lookahead, valid when has_ahead */
  int has_ahead;
  fg_diag *d;
  int failed;
  fg_module *m;
  fg_graph *g;      /* graph being built */
  fg_symtab names;  /* value names of g */
  fg_symtab sizes;  /* sizes g's size clause declares (size_decl) */
  fg_symtab graphs; /* graph names of the file */
  fg_arena scratch; /* per-graph temporaries (attribute values, name copies) */
  int depth;
} parser;

/* An attribute value as written, before it is checked against the op's
 * attribute spec. */
typedef enum { AV_INT, AV_FLOAT, AV_BOOL, AV_IDENT, AV_STRING, AV_LIST, AV_SIZE } aval_kind;
typedef struct aval {
  aval_kind kind;
  int64_t i;   /* INT; SIZE: the constant part (mul*s + i) */
  int64_t mul; /* SIZE: the coefficient of the size s */
  double f;
  const char *s;
  size_t len;
  int n;
  struct aval *items;
  fg_loc loc;
} aval;

/* The value(s) of an expression: a call gives its node, anything else one
 * value. `fresh_literal` marks a literal written right here (so a statement
 * may name it). */
typedef struct expr {
  fg_node *n;
  fg_value *v;
  fg_loc loc;
  int fresh_literal;
} expr;

/* A growable array of pointers, malloc'd (freed on every path). */
typedef struct vec {
  void **p;
  int n, cap;
} vec;

static int vec_push(parser *ps, vec *v, void *x) {
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 8;
    void **np = realloc(v->p, (size_t)cap * sizeof *np);
    if (!np) {
      fg_error(ps->d, ps->tok.loc, "out of memory");
      ps->failed = 1;
      return 0;
    }
    v->p = np;
    v->cap = cap;
  }
  v->p[v->n++] = x;
  return 1;
}

/* ---- tokens ---- */

static void next(parser *ps) {
  if (ps->has_ahead) {
    ps->tok = ps->ahead;
    ps->has_ahead = 0;
  } else {
    ps->tok = fg_lex(&ps->lx);
  }
  if (ps->tok.kind == FG_TOK_ERROR)
    ps->failed = 1;
}

static const fg_token *peek(parser *ps) {
  if (!ps->has_ahead) {
    ps->ahead = fg_lex(&ps->lx);
    ps->has_ahead = 1;
  }
  return &ps->ahead;
}

static int fail(parser *ps, fg_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parser *ps, fg_loc loc, const char *fmt, ...) {
  if (ps->failed)
    return 0; /* first error wins */
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fg_error(ps->d, loc, "%s", msg);
  ps->failed = 1;
  return 0;
}

/* Fails with "expected WHAT, got TOKEN" at the current token (a lexer error
 * has been reported already). */
static int expected(parser *ps, const char *what) {
  char buf[64];
  if (ps->tok.kind == FG_TOK_ERROR) {
    ps->failed = 1;
    return 0;
  }
  return fail(ps, ps->tok.loc, "expected %s, got %s", what,
              fg_tok_describe(&ps->tok, buf, sizeof buf));
}

static int accept(parser *ps, fg_tok_kind k) {
  if (ps->tok.kind != k)
    return 0;
  next(ps);
  return 1;
}

static int expect(parser *ps, fg_tok_kind k, const char *what) {
  if (accept(ps, k))
    return 1;
  return expected(ps, what);
}

static void skip_newlines(parser *ps) {
  while (ps->tok.kind == FG_TOK_NEWLINE)
    next(ps);
}

static int is_keyword(const fg_token *t) {
  return fg_tok_is(t, "graph") || fg_tok_is(t, "return") || fg_tok_is(t, "true") ||
         fg_tok_is(t, "false");
}

/* A name being defined: an identifier that is not a keyword. */
static int expect_name(parser *ps, const char *what) {
  if (ps->tok.kind == FG_TOK_IDENT && !is_keyword(&ps->tok))
    return 1;
  if (ps->tok.kind == FG_TOK_IDENT)
    return fail(ps, ps->tok.loc, "'%.*s' is a keyword and cannot be used as %s", (int)ps->tok.len,
                ps->tok.text, what);
  char buf[80];
  snprintf(buf, sizeof buf, "%s", what);
  return expected(ps, buf);
}

static char *tok_str(parser *ps, const fg_token *t) {
  return fg_arena_strndup(&ps->scratch, t->text, t->len);
}

/* "'name'" for messages, cut when long. */
#define QNAME(t)                                                                                   \
  ((int)((t)->len > QUOTE_MAX ? QUOTE_MAX : (t)->len)), (t)->text,                                 \
      ((t)->len > QUOTE_MAX ? "..." : "")

/* ---- the size clause: graph g<T: 1..64 %8, B>(...) ---- */

/* A size the clause declares; `used` once a parameter's dim names it. */
typedef struct size_decl {
  fg_token name;
  bool used;
} size_decl;

/* The INT token of a size fact: `what` names it in the error. */
static int fact_int(parser *ps, const char *what, fg_token *out) {
  if (ps->tok.kind != FG_TOK_INT)
    return expected(ps, what);
  *out = ps->tok;
  next(ps);
  return 1;
}

/* After ':': [LO '..' HI] ['%' D], at least one of the two. */
static int parse_size_facts(parser *ps, const fg_token *name, int64_t *min, int64_t *max,
                            int64_t *div) {
  if (ps->tok.kind != FG_TOK_INT && ps->tok.kind != FG_TOK_PERCENT)
    return expected(ps, "a range LO..HI or a divisor %D after ':'");
  fg_token lo = {0}, hi = {0}, d = {0};
  if (ps->tok.kind == FG_TOK_INT) {
    if (!fact_int(ps, "an integer", &lo) ||
        !expect(ps, FG_TOK_DOTDOT, "'..' after the range's lower bound") ||
        !fact_int(ps, "an integer upper bound", &hi))
      return 0;
    if (lo.i < 0 || hi.i < 0) {
      const fg_token *neg = lo.i < 0 ? &lo : &hi;
      return fail(ps, neg->loc, "size bound %" PRId64 " is negative", neg->i);
    }
    if (hi.i > FG_SYM_MAX_BOUND)
      return fail(ps, hi.loc, "size bound %" PRId64 " is too large (at most 2^62 = %" PRId64 ")",
                  hi.i, FG_SYM_MAX_BOUND);
    if (lo.i > hi.i)
      return fail(ps, lo.loc, "empty range %" PRId64 "..%" PRId64 " for size '%.*s%s'", lo.i, hi.i,
                  QNAME(name));
    *min = lo.i;
    *max = hi.i;
  }
  if (accept(ps, FG_TOK_PERCENT)) {
    if (!fact_int(ps, "an integer divisor after '%'", &d))
      return 0;
    if (d.i < 1)
      return fail(ps, d.loc, "divisor %" PRId64 " of size '%.*s%s' is not at least 1", d.i,
                  QNAME(name));
    if (!fg_range_has_multiple(*min, *max, d.i))
      return fail(ps, d.loc,
                  "the range %" PRId64 "..%" PRId64
                  " of size '%.*s%s' holds no multiple of %" PRId64,
                  *min, *max, QNAME(name), d.i);
    *div = d.i;
  }
  return 1;
}

/* '<' size (',' size)* '>' with size := NAME [':' facts]. Declares the
 * sizes in g's table, in clause order, before the parameters use them. */
static int parse_sizes(parser *ps) {
  next(ps); /* '<' */
  for (;;) {
    if (!expect_name(ps, "a size name"))
      return 0;
    fg_token name = ps->tok;
    if (fg_symtab_get(&ps->sizes, name.text, name.len))
      return fail(ps, name.loc, "size '%.*s%s' is declared twice", QNAME(&name));
    next(ps);
    int64_t min = FG_SYM_DEFAULT_MIN, max = FG_SYM_DEFAULT_MAX, div = 1;
    if (accept(ps, FG_TOK_COLON) && !parse_size_facts(ps, &name, &min, &max, &div))
      return 0;
    size_decl *sd = fg_arena_alloc(&ps->scratch, sizeof *sd);
    sd->name = name;
    if (!fg_symtab_put(&ps->sizes, name.text, name.len, sd))
      return fail(ps, name.loc, "out of memory");
    fg_graph_add_sym(ps->g, tok_str(ps, &name), min, max, div, name.loc);
    if (accept(ps, FG_TOK_RANGLE))
      return !ps->failed;
    if (!expect(ps, FG_TOK_COMMA, "':', ',' or '>'"))
      return 0;
  }
}

/* Every declared size is used by a parameter. */
static int check_sizes_used(parser *ps) {
  for (int i = 0; i < ps->g->nsyms; i++) {
    const fg_sym *s = &ps->g->syms[i];
    size_decl *sd = fg_symtab_get(&ps->sizes, s->name, strlen(s->name));
    if (sd && !sd->used)
      return fail(ps, sd->name.loc, "size '%.*s%s' is declared but no parameter uses it",
                  QNAME(&sd->name));
  }
  return 1;
}

/* ---- types ---- */

static int parse_dtype(parser *ps, fg_dtype *dt) {
  if (ps->tok.kind != FG_TOK_IDENT)
    return expected(ps, "a dtype");
  *dt = fg_dtype_from_name(ps->tok.text, ps->tok.len > 16 ? 17 : (int)ps->tok.len);
  if (*dt == FG_DTYPE_INVALID)
    return fail(ps, ps->tok.loc, "unknown dtype '%.*s%s'", QNAME(&ps->tok));
  next(ps);
  return 1;
}

static int parse_dims(parser *ps, fg_type *t) {
  /* at '[' */
  next(ps);
  const int64_t limit = FG_MAX_NUMEL;
  int64_t numel = 1;
  if (ps->tok.kind == FG_TOK_RBRACK) {
    next(ps);
    return 1;
  }
  for (;;) {
    if (t->rank == FG_MAX_RANK)
      return fail(ps, ps->tok.loc, "too many dimensions (at most %d)", FG_MAX_RANK);
    fg_dim *dm = &t->dims[t->rank];
    if (ps->tok.kind == FG_TOK_INT) {
      if (ps->tok.i < 0)
        return fail(ps, ps->tok.loc, "dimension size %" PRId64 " is negative", ps->tok.i);
      dm->size = ps->tok.i;
      if (ps->tok.i > 0 && numel > limit / ps->tok.i)
        return fail(ps, ps->tok.loc, "tensor type is too large");
      numel *= ps->tok.i;
    } else if (ps->tok.kind == FG_TOK_IDENT && !is_keyword(&ps->tok)) {
      dm->size = -1;
      dm->sym = fg_arena_strndup(&ps->g->arena, ps->tok.text, ps->tok.len);
      size_decl *sd = fg_symtab_get(&ps->sizes, ps->tok.text, ps->tok.len);
      if (sd)
        sd->used = true;
    } else {
      return expected(ps, "a dimension size or name");
    }
    t->rank++;
    next(ps);
    if (accept(ps, FG_TOK_RBRACK))
      return 1;
    if (!expect(ps, FG_TOK_COMMA, "',' or ']'"))
      return 0;
  }
}

static int parse_layout(parser *ps, fg_type *t) {
  /* at 'layout' */
  if (t->scalar)
    return fail(ps, ps->tok.loc, "a scalar parameter cannot have a layout");
  next(ps);
  if (!expect(ps, FG_TOK_EQUAL, "'=' after 'layout'"))
    return 0;
  fg_loc open = ps->tok.loc;
  if (!expect(ps, FG_TOK_LBRACK, "'['"))
    return 0;
  int n = 0;
  bool seen[FG_MAX_RANK] = {0};
  while (ps->tok.kind != FG_TOK_RBRACK) {
    if (n > 0 && !expect(ps, FG_TOK_COMMA, "',' or ']'"))
      return 0;
    if (ps->tok.kind != FG_TOK_INT)
      return expected(ps, "an integer");
    int64_t v = ps->tok.i;
    if (n >= t->rank || v < 0 || v >= t->rank || seen[v])
      return fail(ps, ps->tok.loc, "layout must be a permutation of 0..%d", t->rank - 1);
    seen[v] = true;
    t->layout[n++] = (int)v;
    next(ps);
  }
  if (n != t->rank)
    return fail(ps, open, "layout has %d entries but the tensor has rank %d", n, t->rank);
  next(ps);
  t->has_layout = true;
  return 1;
}

static int parse_param(parser *ps) {
  if (!expect_name(ps, "a parameter name"))
    return 0;
  fg_token name = ps->tok;
  if (name.len > FG_MAX_NAME)
    return fail(ps, name.loc, "parameter name of %zu characters; at most %d are supported",
                (size_t)name.len, FG_MAX_NAME);
  if (fg_symtab_get(&ps->names, name.text, name.len))
    return fail(ps, name.loc, "redefinition of '%.*s%s'", QNAME(&name));
  if (ps->g->nparams >= MAX_PARAMS)
    return fail(ps, name.loc, "too many parameters (limit %d)", MAX_PARAMS);
  next(ps);
  if (!expect(ps, FG_TOK_COLON, "':' after the parameter name"))
    return 0;
  fg_type t;
  memset(&t, 0, sizeof t);
  if (!parse_dtype(ps, &t.dtype))
    return 0;
  t.scalar = true;
  if (ps->tok.kind == FG_TOK_LBRACK) {
    t.scalar = false;
    if (!parse_dims(ps, &t))
      return 0;
  }
  if (fg_tok_is(&ps->tok, "layout") && !parse_layout(ps, &t))
    return 0;
  const char *packed = fg_packed_type_problem(&t);
  if (packed)
    return fail(ps, name.loc, "%s", packed);
  fg_value *v = fg_add_param(ps->g, tok_str(ps, &name), t, name.loc);
  if (!fg_symtab_put(&ps->names, name.text, name.len, v))
    return fail(ps, name.loc, "out of memory");
  return 1;
}

/* ---- attribute values ---- */

/* The rest of a size expression (docs/format.md 3.2.1) after its name (at
 * the token after it): `*K`, then `+C` or `-C`. a holds the name and the
 * coefficient written before it (`K*NAME`). */
static int parse_size_tail(parser *ps, aval *a) {
  a->kind = AV_SIZE;
  if (accept(ps, FG_TOK_STAR)) {
    if (ps->tok.kind != FG_TOK_INT || ps->tok.i < 1 || a->mul != 1)
      return expected(ps, "a positive integer after '*' (a size expression is K*T+C)");
    a->mul = ps->tok.i;
    next(ps);
  }
  if (accept(ps, FG_TOK_PLUS)) {
    if (ps->tok.kind != FG_TOK_INT || ps->tok.i < 0)
      return expected(ps, "an integer after '+' (a size expression is K*T+C)");
    a->i = ps->tok.i;
    next(ps);
  } else if (ps->tok.kind == FG_TOK_INT && ps->tok.i < 0) {
    a->i = ps->tok.i;
    next(ps);
  }
  return !ps->failed;
}

static int parse_aval(parser *ps, aval *a) {
  memset(a, 0, sizeof *a);
  a->loc = ps->tok.loc;
  const fg_token *t = &ps->tok;
  switch (t->kind) {
  case FG_TOK_INT:
    a->kind = AV_INT;
    a->i = t->i;
    if (peek(ps)->kind == FG_TOK_STAR) { /* K*T */
      a->mul = t->i;
      next(ps);
      next(ps);
      if (a->mul < 1 || ps->tok.kind != FG_TOK_IDENT || is_keyword(&ps->tok))
        return expected(ps, "a size name after 'K*' (a size expression is K*T+C, K >= 1)");
      a->s = ps->tok.text;
      a->len = ps->tok.len;
      a->i = 0;
      next(ps);
      return parse_size_tail(ps, a);
    }
    break;
  case FG_TOK_FLOAT:
    a->kind = AV_FLOAT;
    a->f = t->f;
    break;
  case FG_TOK_STRING:
    a->kind = AV_STRING;
    a->s = t->text;
    a->len = t->len;
    break;
  case FG_TOK_IDENT:
    if (fg_tok_is(t, "true") || fg_tok_is(t, "false")) {
      a->kind = AV_BOOL;
      a->i = fg_tok_is(t, "true");
    } else {
      a->kind = AV_IDENT;
      a->s = t->text;
      a->len = t->len;
      fg_tok_kind k = peek(ps)->kind;
      if (k == FG_TOK_STAR || k == FG_TOK_PLUS || (k == FG_TOK_INT && peek(ps)->i < 0)) {
        a->mul = 1; /* T*K, T+C, T-C */
        next(ps);
        return parse_size_tail(ps, a);
      }
    }
    break;
  case FG_TOK_LBRACK: {
    if (++ps->depth > MAX_DEPTH)
      return fail(ps, t->loc, "list nested too deeply (limit %d)", MAX_DEPTH);
    next(ps);
    a->kind = AV_LIST;
    int cap = 0;
    while (ps->tok.kind != FG_TOK_RBRACK) {
      if (a->n > 0 && !expect(ps, FG_TOK_COMMA, "',' or ']'"))
        return 0;
      if (a->n == cap) {
        /* grows in the scratch arena; amortised linear */
        int ncap = cap ? cap * 2 : 8;
        aval *ni = fg_arena_alloc(&ps->scratch, (size_t)ncap * sizeof *ni);
        if (a->n)
          memcpy(ni, a->items, (size_t)a->n * sizeof *ni);
        a->items = ni;
        cap = ncap;
      }
      if (!parse_aval(ps, &a->items[a->n]))
        return 0;
      a->n++;
    }
    ps->depth--;
    break;
  }
  default:
    return expected(ps, "an attribute value");
  }
  next(ps);
  return !ps->failed;
}

static const char *attr_type_desc(fg_attr_type t) {
  switch (t) {
  case FG_AT_INT:
    return "an integer";
  case FG_AT_FLOAT:
    return "a number";
  case FG_AT_BOOL:
    return "true or false";
  case FG_AT_DTYPE:
    return "a dtype";
  case FG_AT_STRING:
    return "a string";
  case FG_AT_INTS:
    return "a list of integers";
  case FG_AT_SCALAR:
    return "a number or boolean";
  }
  return "?";
}

/* A NUL-terminated copy of a name in the scratch arena. */
static const char *tok_name(parser *ps, const char *s, size_t len) {
  return fg_arena_strndup(&ps->scratch, s, len);
}

/* The attributes that may hold expressions of a size (docs/format.md
 * 3.2.1): bounds and shapes, never dims or steps. */
static bool takes_size_exprs(const fg_op *op, const fg_attr_spec *sp) {
  static const struct {
    const char *op, *attr;
  } ok[] = {
      {"slice", "starts"}, {"slice", "ends"},   {"pad", "pad"},    {"reshape", "shape"},
      {"view", "shape"},   {"expand", "shape"}, {"full", "shape"}, {"broadcast_in_dim", "shape"},
      {"iota", "length"}};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
    if (strcmp(op->name, ok[i].op) == 0 && strcmp(sp->name, ok[i].attr) == 0)
      return true;
  return false;
}

/* Whether a size expression (or a bare name) in an integer list names a
 * size of the graph, in an attribute that takes one; reports otherwise. */
static int size_expr_ok(parser *ps, const fg_op *op, const fg_attr_spec *sp, const aval *it) {
  int q = (int)(it->len > QUOTE_MAX ? QUOTE_MAX : it->len);
  const char *more = it->len > QUOTE_MAX ? "..." : "";
  if (!takes_size_exprs(op, sp))
    return fail(ps, it->loc,
                "attribute '%s' of '%s' expects a list of integers: %s'%.*s%s' is not one "
                "(sizes may be written only in the bounds of 'slice' and 'pad' and in the shapes "
                "of 'reshape', 'expand', 'broadcast_in_dim' and 'full')",
                sp->name, op->name, it->kind == AV_SIZE ? "an expression of " : "", q, it->s, more);
  if (!fg_graph_sym(ps->g, tok_name(ps, it->s, it->len)))
    return fail(ps, it->loc,
                "'%.*s%s' in attribute '%s' of '%s' is not a symbolic size of graph '%s' (an "
                "attribute may name only the sizes of the parameters' dims)",
                q, it->s, more, sp->name, op->name, ps->g->name);
  return 1;
}

/* Checks a written value against the attribute's spec and converts it. */
static int convert_attr(parser *ps, const fg_op *op, const fg_attr_spec *sp, const aval *a,
                        fg_attr *out) {
  memset(out, 0, sizeof *out);
  out->loc = a->loc;
  if (a->kind == AV_IDENT && sp->type != FG_AT_DTYPE &&
      fg_dtype_from_name(a->s, a->len > 16 ? 17 : (int)a->len) == FG_DTYPE_INVALID)
    return fail(ps, a->loc, "expected an attribute value, got '%.*s%s'",
                (int)(a->len > QUOTE_MAX ? QUOTE_MAX : a->len), a->s,
                a->len > QUOTE_MAX ? "..." : "");
  int ok = 0;
  switch (sp->type) {
  case FG_AT_INT:
    if ((ok = a->kind == AV_INT)) {
      out->kind = FG_ATTR_INT;
      out->i = a->i;
    }
    break;
  case FG_AT_FLOAT:
    if (a->kind == AV_INT) {
      ok = 1;
      out->kind = FG_ATTR_FLOAT;
      out->f = (double)a->i;
    }
    if (a->kind == AV_FLOAT) {
      ok = 1;
      out->kind = FG_ATTR_FLOAT;
      out->f = a->f;
    }
    break;
  case FG_AT_BOOL:
    if ((ok = a->kind == AV_BOOL)) {
      out->kind = FG_ATTR_BOOL;
      out->i = a->i;
    }
    break;
  case FG_AT_SCALAR:
    if (a->kind == AV_INT) {
      ok = 1;
      out->kind = FG_ATTR_INT;
      out->i = a->i;
    }
    if (a->kind == AV_FLOAT) {
      ok = 1;
      out->kind = FG_ATTR_FLOAT;
      out->f = a->f;
    }
    if (a->kind == AV_BOOL) {
      ok = 1;
      out->kind = FG_ATTR_BOOL;
      out->i = a->i;
    }
    break;
  case FG_AT_DTYPE:
    if (a->kind == AV_IDENT) {
      out->dtype = fg_dtype_from_name(a->s, a->len > 16 ? 17 : (int)a->len);
      if (out->dtype == FG_DTYPE_INVALID)
        return fail(ps, a->loc, "unknown dtype '%.*s%s'",
                    (int)(a->len > QUOTE_MAX ? QUOTE_MAX : a->len), a->s,
                    a->len > QUOTE_MAX ? "..." : "");
      ok = 1;
      out->kind = FG_ATTR_DTYPE;
    }
    break;
  case FG_AT_STRING:
    if (a->kind == AV_STRING) {
      if (sp->choices) {
        int found = 0;
        char allowed[256] = "";
        for (const char *const *c = sp->choices; *c; c++) {
          if (strlen(*c) == a->len && memcmp(*c, a->s, a->len) == 0)
            found = 1;
          size_t l = strlen(allowed);
          snprintf(allowed + l, sizeof allowed - l, "%s\"%s\"", l ? ", " : "", *c);
        }
        if (!found)
          return fail(ps, a->loc,
                      "invalid value \"%.*s%s\" for attribute '%s' of '%s' (expected one of %s)",
                      (int)(a->len > QUOTE_MAX ? QUOTE_MAX : a->len), a->s,
                      a->len > QUOTE_MAX ? "..." : "", sp->name, op->name, allowed);
      }
      ok = 1;
      out->kind = FG_ATTR_STRING;
      out->s = fg_arena_strndup(&ps->g->arena, a->s, a->len);
    }
    break;
  case FG_AT_INTS:
    if (a->kind == AV_LIST) {
      fg_dim *syms = NULL;
      for (int i = 0; i < a->n; i++) {
        const aval *it = &a->items[i];
        if (it->kind == AV_IDENT || it->kind == AV_SIZE) {
          if (!size_expr_ok(ps, op, sp, it))
            return 0;
          if (!syms)
            syms = fg_arena_alloc(&ps->g->arena, (size_t)a->n * sizeof *syms);
          const fg_sym *e = fg_graph_sym(ps->g, tok_name(ps, it->s, it->len));
          syms[i] = fg_dim_affine(e->name, it->kind == AV_IDENT ? 1 : it->mul,
                                  it->kind == AV_IDENT ? 0 : it->i);
          continue;
        }
        if (it->kind != AV_INT)
          return fail(ps, it->loc, "attribute '%s' of '%s' expects a list of integers", sp->name,
                      op->name);
      }
      int64_t *v = fg_arena_alloc(&ps->g->arena, (size_t)(a->n ? a->n : 1) * sizeof *v);
      for (int i = 0; i < a->n; i++) {
        v[i] = a->items[i].kind == AV_INT ? a->items[i].i : 0;
        if (syms && a->items[i].kind == AV_INT)
          syms[i] = (fg_dim){.size = v[i]};
      }
      ok = 1;
      out->kind = FG_ATTR_INTS;
      out->n = a->n;
      out->ints = v;
      out->syms = syms;
    }
    break;
  }
  if (!ok)
    return fail(ps, a->loc, "attribute '%s' of '%s' expects %s", sp->name, op->name,
                attr_type_desc(sp->type));
  return 1;
}

/* ---- expressions ---- */

static int parse_expr(parser *ps, expr *e);

/* Marks a name on the left of the statement being parsed: it is taken, but
 * not yet defined for the expression on the right. */
static char pending;

static fg_value *lookup(parser *ps, const fg_token *t) {
  void *v = fg_symtab_get(&ps->names, t->text, t->len);
  return v == &pending ? NULL : v;
}

/* An operand: an expression with exactly one value. */
static int parse_operand(parser *ps, fg_value **out) {
  expr e;
  if (!parse_expr(ps, &e))
    return 0;
  if (e.n && e.n->nout != 1)
    return fail(ps, e.loc, "'%s' returns %d values; bind them to names before using one",
                e.n->op->name, e.n->nout);
  *out = e.v;
  return 1;
}

static int parse_attr(parser *ps, const fg_op *op, fg_attr *attrs) {
  fg_token name = ps->tok;
  int idx = -1;
  for (int i = 0; i < op->nattrs; i++)
    if (strlen(op->attrs[i].name) == name.len &&
        memcmp(op->attrs[i].name, name.text, name.len) == 0)
      idx = i;
  if (idx < 0) {
    if (op->nattrs == 0)
      return fail(ps, name.loc, "'%s' takes no attributes", op->name);
    char valid[256] = "";
    for (int i = 0; i < op->nattrs; i++) {
      size_t l = strlen(valid);
      snprintf(valid + l, sizeof valid - l, "%s%s", i ? ", " : "", op->attrs[i].name);
    }
    return fail(ps, name.loc, "unknown attribute '%.*s%s' for '%s' (valid: %s)", QNAME(&name),
                op->name, valid);
  }
  if (attrs[idx].kind != FG_ATTR_NONE)
    return fail(ps, name.loc, "duplicate attribute '%s'", op->attrs[idx].name);
  next(ps); /* name */
  next(ps); /* '=' */
  aval a;
  if (!parse_aval(ps, &a))
    return 0;
  return convert_attr(ps, op, &op->attrs[idx], &a, &attrs[idx]);
}

/* Whether the operand at the current token is a size expression (`T`,
 * `T-1`, `2*T+1`: iota's length, docs/format.md 3.2.1): a size of the graph
 * (sizes are a namespace of their own; a value of that name could not be
 * iota's length anyway), or K*NAME. */
static bool is_size_operand(parser *ps) {
  const fg_token *t = &ps->tok;
  if (t->kind == FG_TOK_INT)
    return peek(ps)->kind == FG_TOK_STAR;
  return t->kind == FG_TOK_IDENT && !is_keyword(t) && peek(ps)->kind != FG_TOK_LPAREN &&
         fg_graph_sym(ps->g, tok_name(ps, t->text, t->len)) != NULL;
}

/* iota(T): the size expression as the one entry of attribute `length`. */
static int parse_iota_length(parser *ps, const fg_op *op, fg_attr *attrs) {
  int idx = fg_op_attr_index(op, "length");
  aval a, list;
  if (idx < 0 || !parse_aval(ps, &a))
    return 0;
  memset(&list, 0, sizeof list);
  list.kind = AV_LIST;
  list.loc = a.loc;
  list.n = 1;
  list.items = &a;
  return convert_attr(ps, op, &op->attrs[idx], &list, &attrs[idx]);
}

/* NAME '(' args ')' with the current token at NAME. */
static int parse_call(parser *ps, expr *e) {
  fg_token name = ps->tok;
  const fg_op *op = fg_op_lookup(name.text, name.len > 64 ? 65 : (int)name.len);
  if (!op)
    return fail(ps, name.loc, "unknown op '%.*s%s'", QNAME(&name));
  if (++ps->depth > MAX_DEPTH)
    return fail(ps, name.loc, "expression nested too deeply (limit %d)", MAX_DEPTH);
  next(ps); /* name */
  next(ps); /* '(' */
  fg_attr *attrs =
      fg_arena_alloc(&ps->scratch, (size_t)(op->nattrs ? op->nattrs : 1) * sizeof *attrs);
  vec in = {0};
  int seen_attr = 0, ok = 1;
  while (ok && ps->tok.kind != FG_TOK_RPAREN) {
    if ((in.n > 0 || seen_attr) && !expect(ps, FG_TOK_COMMA, "',' or ')'")) {
      ok = 0;
      break;
    }
    if (ps->tok.kind == FG_TOK_IDENT && peek(ps)->kind == FG_TOK_EQUAL) {
      seen_attr = 1;
      ok = parse_attr(ps, op, attrs);
    } else if (op->code == FG_OP_IOTA && in.n == 0 && !seen_attr && is_size_operand(ps)) {
      ok = parse_iota_length(ps, op, attrs);
      seen_attr = 1;
    } else {
      if (seen_attr) {
        ok = fail(ps, ps->tok.loc, "positional operand after an attribute");
        break;
      }
      fg_value *v = NULL;
      ok = parse_operand(ps, &v) && vec_push(ps, &in, v);
    }
  }
  if (ok)
    next(ps); /* ')' */
  ok = ok && !ps->failed;
  if (ok) {
    int nout = op->nout;
    if (nout < 0) { /* split: one result per size */
      int si = fg_op_attr_index(op, "sizes");
      nout = si >= 0 && attrs[si].kind == FG_ATTR_INTS ? attrs[si].n : 1;
    }
    fg_node *n = fg_node_new(ps->g, op, in.n, (fg_value *const *)in.p, nout, name.loc);
    memcpy(n->attrs, attrs, (size_t)op->nattrs * sizeof *attrs);
    if (!fg_infer_node(n, ps->d))
      ok = 0, ps->failed = 1;
    e->n = n;
    e->v = n->out[0];
    e->loc = name.loc;
  }
  free(in.p);
  ps->depth--;
  return ok;
}

static int parse_expr(parser *ps, expr *e) {
  memset(e, 0, sizeof *e);
  fg_token t = ps->tok;
  e->loc = t.loc;
  switch (t.kind) {
  case FG_TOK_INT:
    e->v = fg_literal_int(ps->g, t.i, t.loc);
    e->fresh_literal = 1;
    next(ps);
    return !ps->failed;
  case FG_TOK_FLOAT:
    e->v = fg_literal_float(ps->g, t.f, t.loc);
    e->fresh_literal = 1;
    next(ps);
    return !ps->failed;
  case FG_TOK_IDENT:
    if (fg_tok_is(&t, "true") || fg_tok_is(&t, "false")) {
      e->v = fg_literal_bool(ps->g, fg_tok_is(&t, "true"), t.loc);
      e->fresh_literal = 1;
      next(ps);
      return !ps->failed;
    }
    if (is_keyword(&t))
      return expected(ps, "an expression");
    if (peek(ps)->kind == FG_TOK_LPAREN)
      return parse_call(ps, e);
    if (!(e->v = lookup(ps, &t)))
      return fail(ps, t.loc, "use of undefined name '%.*s%s'", QNAME(&t));
    next(ps);
    return !ps->failed;
  default:
    return expected(ps, "an expression");
  }
}

/* ---- statements ---- */

static int bind(parser *ps, const fg_token *name, fg_value *v) {
  if (!fg_symtab_put(&ps->names, name->text, name->len, v))
    return fail(ps, name->loc, "out of memory");
  return 1;
}

/* NAME (',' NAME)* '=' expr NEWLINE */
static int parse_stmt(parser *ps) {
  fg_token *names = NULL;
  int n = 0, cap = 0, ok = 0;
  for (;;) {
    if (!expect_name(ps, "a name"))
      goto out;
    void *prev = fg_symtab_get(&ps->names, ps->tok.text, ps->tok.len);
    if (prev == &pending) {
      fail(ps, ps->tok.loc, "'%.*s%s' is bound twice in one statement", QNAME(&ps->tok));
      goto out;
    }
    if (prev) {
      fail(ps, ps->tok.loc, "redefinition of '%.*s%s'", QNAME(&ps->tok));
      goto out;
    }
    /* reserved until the statement binds it (hash lookup: a statement with
     * 100,000 names stays linear) */
    if (!fg_symtab_put(&ps->names, ps->tok.text, ps->tok.len, &pending)) {
      fail(ps, ps->tok.loc, "out of memory");
      goto out;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      fg_token *nn = realloc(names, (size_t)cap * sizeof *nn);
      if (!nn) {
        fail(ps, ps->tok.loc, "out of memory");
        goto out;
      }
      names = nn;
    }
    names[n++] = ps->tok;
    next(ps);
    if (ps->tok.kind == FG_TOK_EQUAL)
      break;
    if (!expect(ps, FG_TOK_COMMA, n == 1 ? "'=' or ','" : "',' or '='"))
      goto out;
  }
  next(ps); /* '=' */
  expr e;
  if (!parse_expr(ps, &e))
    goto out;
  if (e.n) {
    if (e.n->nout != n) {
      fail(ps, e.loc, "'%s' returns %d value%s but %d name%s bound", e.n->op->name, e.n->nout,
           e.n->nout == 1 ? "" : "s", n, n == 1 ? " is" : "s are");
      goto out;
    }
    for (int i = 0; i < n; i++) {
      e.n->out[i]->name = fg_arena_strndup(&ps->g->arena, names[i].text, names[i].len);
      if (!bind(ps, &names[i], e.n->out[i]))
        goto out;
    }
  } else {
    if (n != 1) {
      fail(ps, e.loc, "one value cannot be bound to %d names", n);
      goto out;
    }
    /* `c = 2.0` names the literal; `y = x` makes y another name for x. */
    if (e.fresh_literal)
      e.v->name = fg_arena_strndup(&ps->g->arena, names[0].text, names[0].len);
    if (!bind(ps, &names[0], e.v))
      goto out;
  }
  if (ps->tok.kind != FG_TOK_NEWLINE && ps->tok.kind != FG_TOK_RBRACE) {
    expected(ps, "end of line");
    goto out;
  }
  ok = 1;
out:
  free(names);
  return ok;
}

/* An in-place result (docs/format.md 6.1): `v -> NAME` writes result
 * `res` into parameter NAME's storage. Checks what can be checked here;
 * whether the kernels can do it safely is the planner's (opt/inplace.c). */
typedef struct into_decl {
  int result;
  fg_token name;
} into_decl;

static int check_into(parser *ps, const into_decl *in, const fg_value *v, const int *taken) {
  fg_graph *g = ps->g;
  const fg_token *t = &in->name;
  int pi = -1;
  for (int i = 0; i < g->nparams && pi < 0; i++)
    if (strlen(g->params[i]->name) == t->len && !memcmp(g->params[i]->name, t->text, t->len))
      pi = i;
  if (pi < 0) {
    if (lookup(ps, t))
      return fail(ps, t->loc,
                  "'%.*s%s' is not a parameter: '->' names the parameter a result "
                  "is written into",
                  QNAME(t));
    return fail(ps, t->loc, "unknown parameter '%.*s%s'", QNAME(t));
  }
  const fg_type *pt = &g->params[pi]->type;
  char a[128], b[128];
  if (pt->scalar)
    return fail(ps, t->loc, "cannot write a result into scalar parameter '%s' (passed by value)",
                g->params[pi]->name);
  if (taken[pi] >= 0)
    return fail(ps, t->loc, "parameter '%s' is already written by result %d", g->params[pi]->name,
                taken[pi]);
  if (!fg_value_fits_param(v, g->params[pi]))
    return fail(ps, t->loc, "result %d is %s but parameter '%s' is %s", in->result,
                fg_type_str(&v->type, a, sizeof a), g->params[pi]->name,
                fg_type_str(pt, b, sizeof b));
  if (pt->has_layout) {
    bool rowmajor = true;
    for (int d = 0; d < pt->rank; d++)
      rowmajor = rowmajor && pt->layout[d] == d;
    if (!rowmajor)
      return fail(ps, t->loc,
                  "cannot write a result into parameter '%s': it has a layout "
                  "(in-place results need row-major storage)",
                  g->params[pi]->name);
  }
  if (pt->dtype == FG_F4E2M1)
    return fail(ps, t->loc,
                "cannot write a result into parameter '%s': in-place results of "
                "packed f4e2m1 storage are not supported",
                g->params[pi]->name);
  fg_set_result_into(g, in->result, pi, t->loc);
  return 1;
}

/* 'return' result (',' result)* ; result := expr ['->' NAME]; a
 * multi-result call returns all its values. */
static int parse_return(parser *ps) {
  next(ps);                                /* 'return' */
  vec vals = {0}, locs = {0}, intos = {0}; /* locs: the expressions' positions, boxed */
  int *taken = NULL;
  int ok = 0;
  for (;;) {
    expr e;
    if (!parse_expr(ps, &e))
      goto out;
    int k = e.n ? e.n->nout : 1;
    for (int i = 0; i < k; i++) {
      fg_loc *l = fg_arena_alloc(&ps->scratch, sizeof *l);
      *l = e.loc;
      if (!vec_push(ps, &vals, e.n ? e.n->out[i] : e.v) || !vec_push(ps, &locs, l))
        goto out;
    }
    if (ps->tok.kind == FG_TOK_ARROW) {
      fg_loc arrow = ps->tok.loc;
      next(ps);
      if (k != 1) {
        fail(ps, arrow, "a call with %d results cannot be written into one parameter", k);
        goto out;
      }
      if (!expect_name(ps, "a parameter name after '->'"))
        goto out;
      into_decl *in = fg_arena_alloc(&ps->scratch, sizeof *in);
      in->result = vals.n - 1;
      in->name = ps->tok;
      next(ps);
      if (!vec_push(ps, &intos, in))
        goto out;
    }
    if (!accept(ps, FG_TOK_COMMA))
      break;
  }
  if (ps->failed)
    goto out;
  fg_loc *l = fg_arena_alloc(&ps->scratch, (size_t)(vals.n ? vals.n : 1) * sizeof *l);
  for (int i = 0; i < vals.n; i++)
    l[i] = *(fg_loc *)locs.p[i];
  fg_set_results(ps->g, vals.n, (fg_value *const *)vals.p, l);
  if (intos.n) {
    taken = malloc((size_t)ps->g->nparams * sizeof *taken + 1);
    if (!taken) {
      fail(ps, ps->tok.loc, "out of memory");
      goto out;
    }
    for (int i = 0; i < ps->g->nparams; i++)
      taken[i] = -1;
    for (int i = 0; i < intos.n; i++) {
      const into_decl *in = intos.p[i];
      if (!check_into(ps, in, ps->g->results[in->result], taken))
        goto out;
      taken[fg_result_into(ps->g, in->result)] = in->result;
    }
  }
  ok = 1;
out:
  free(vals.p);
  free(locs.p);
  free(intos.p);
  free(taken);
  return ok;
}

/* ---- graphs ---- */

static int parse_body(parser *ps) {
  skip_newlines(ps); /* allow the '{' on its own line */
  if (!expect(ps, FG_TOK_LBRACE, "'{'"))
    return 0;
  for (;;) {
    skip_newlines(ps);
    if (ps->failed)
      return 0;
    if (ps->tok.kind == FG_TOK_RBRACE)
      return fail(ps, ps->tok.loc, "graph '%s' has no 'return'", ps->g->name);
    if (fg_tok_is(&ps->tok, "return"))
      break;
    if (ps->tok.kind == FG_TOK_EOF)
      return expected(ps, "'}'");
    if (!parse_stmt(ps))
      return 0;
  }
  if (!parse_return(ps))
    return 0;
  if (ps->tok.kind != FG_TOK_NEWLINE && ps->tok.kind != FG_TOK_RBRACE)
    return expected(ps, "end of line");
  skip_newlines(ps);
  if (ps->tok.kind == FG_TOK_IDENT && !fg_tok_is(&ps->tok, "graph"))
    return fail(ps, ps->tok.loc, "statement after 'return'");
  return expect(ps, FG_TOK_RBRACE, "'}'");
}

static int parse_graph(parser *ps) {
  next(ps); /* 'graph' */
  if (!expect_name(ps, "a graph name"))
    return 0;
  fg_token name = ps->tok;
  if (name.len > FG_MAX_NAME)
    return fail(ps, name.loc, "graph name of %zu characters; at most %d are supported",
                (size_t)name.len, FG_MAX_NAME);
  if (fg_symtab_get(&ps->graphs, name.text, name.len))
    return fail(ps, name.loc, "redefinition of graph '%.*s%s'", QNAME(&name));
  ps->g = fg_graph_new(tok_str(ps, &name));
  ps->g->loc = name.loc;
  fg_symtab_clear(&ps->names);
  fg_symtab_clear(&ps->sizes);
  next(ps);
  if (ps->tok.kind == FG_TOK_LANGLE && !parse_sizes(ps))
    return 0;
  if (!expect(ps, FG_TOK_LPAREN, "'('"))
    return 0;
  while (ps->tok.kind != FG_TOK_RPAREN) {
    if (ps->g->nparams > 0 && !expect(ps, FG_TOK_COMMA, "',' or ')'"))
      return 0;
    if (!parse_param(ps))
      return 0;
  }
  next(ps);
  if (!check_sizes_used(ps))
    return 0;
  if (!parse_body(ps))
    return 0;
  if (!fg_check_size_facts(ps->g, ps->d)) {
    ps->failed = 1;
    return 0;
  }
  if (!fg_verify_graph(ps->g, ps->d))
    return 0;
  fg_module_add(ps->m, ps->g);
  if (!fg_symtab_put(&ps->graphs, name.text, name.len, ps->g)) {
    ps->g = NULL;
    return fail(ps, name.loc, "out of memory");
  }
  ps->g = NULL;
  return 1;
}

fg_module *fg_parse(const char *path, const char *src, size_t len, fg_diag *d) {
  parser ps;
  memset(&ps, 0, sizeof ps);
  ps.d = d;
  fg_lexer_init(&ps.lx, src, len, d);
  fg_symtab_init(&ps.names);
  fg_symtab_init(&ps.sizes);
  fg_symtab_init(&ps.graphs);
  fg_arena_init(&ps.scratch);
  ps.m = fg_module_new(path);
  int nerr = d->nerrors;
  next(&ps);
  while (!ps.failed) {
    skip_newlines(&ps);
    if (ps.failed || ps.tok.kind == FG_TOK_EOF)
      break;
    if (!fg_tok_is(&ps.tok, "graph")) {
      expected(&ps, "'graph'");
      break;
    }
    if (!parse_graph(&ps))
      break;
    /* temporaries of a finished graph are dead */
    fg_arena_free(&ps.scratch);
    fg_arena_init(&ps.scratch);
  }
  if (!ps.failed && ps.m->ngraphs == 0)
    fail(&ps, (fg_loc){1, 1}, "no graph in the file");
  /* Inference or the verifier may have reported without us noticing. */
  if (d->nerrors > nerr)
    ps.failed = 1;
  if (ps.g)
    fg_graph_free(ps.g);
  fg_symtab_free(&ps.names);
  fg_symtab_free(&ps.sizes);
  fg_symtab_free(&ps.graphs);
  fg_arena_free(&ps.scratch);
  if (ps.failed) {
    fg_module_free(ps.m);
    return NULL;
  }
  return ps.m;
}
