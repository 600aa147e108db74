/* Parser and validator of the launch plan (docs/artifact.md). */
#include "plan_parse.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 32
#define MAX_COUNT 65536 /* params/results/temps/kernels per graph */
#define MAX_ARGS 4096   /* kernel arguments */
#define MAX_TEMP_ALIGN (1 << 20)
#define MAX_VEC_ALIGN 4096

typedef struct tok {
  const char *s;
  int n;
} tok;

typedef struct parser {
  const char *text;
  size_t len, pos;
  int line;
  char *err;
  size_t errlen;
  /* PTX entries (names into text) */
  tok *entries;
  int n_entries, cap_entries;
  int version; /* of the file's plan (PLAN_VERSION_MIN..PLAN_VERSION) */
} parser;

static int fail(parser *ps, const char *fmt, ...) {
  if (ps->err && ps->errlen) {
    int k = snprintf(ps->err, ps->errlen, "line %d: ", ps->line);
    if (k < 0)
      k = 0;
    if ((size_t)k < ps->errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ps->err + k, ps->errlen - (size_t)k, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

static bool tok_is(tok t, const char *s) {
  size_t n = strlen(s);
  return (size_t)t.n == n && memcmp(t.s, s, n) == 0;
}

/* A short printable rendering of a token for messages. */
static const char *show(tok t, char *buf, size_t n) {
  size_t k = 0;
  for (int i = 0; i < t.n && k + 4 < n; i++) {
    unsigned char c = (unsigned char)t.s[i];
    buf[k++] = (c >= 32 && c < 127) ? (char)c : '?';
  }
  if (t.n > 0 && k + 4 >= n) {
    buf[k++] = '.';
    buf[k++] = '.';
    buf[k++] = '.';
  }
  buf[k] = 0;
  return buf;
}

static bool is_name(tok t) {
  if (t.n <= 0 || t.n > 255)
    return false;
  char c = t.s[0];
  if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'))
    return false;
  for (int i = 1; i < t.n; i++) {
    c = t.s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.'))
      return false;
  }
  return true;
}

/* -?[0-9]+ into an int64; false on syntax or overflow. */
static bool parse_int_span(const char *s, int n, int64_t *out) {
  int i = 0;
  bool neg = false;
  if (i < n && s[i] == '-') {
    neg = true;
    i++;
  }
  if (i >= n)
    return false;
  uint64_t v = 0;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_C(9223372036854775808) - d) / 10)
      return false;
    v = v * 10 + d;
  }
  if (!neg && v > (uint64_t)INT64_MAX)
    return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

static int want_int(parser *ps, tok t, const char *what, int64_t lo, int64_t hi, int64_t *out) {
  char b[64];
  if (!parse_int_span(t.s, t.n, out))
    return fail(ps, "%s: expected an integer, found '%s'", what, show(t, b, sizeof b));
  if (*out < lo || *out > hi)
    return fail(ps, "%s %lld is out of range [%lld, %lld]", what, (long long)*out, (long long)lo,
                (long long)hi);
  return 0;
}

/* ---- formulas (docs/artifact.md): compiled to reverse Polish programs ---- */

static bool is_name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
static bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '.'; }

/* -?[0-9]+: written as an integer (v1's form), checked as one. */
static bool is_int_shaped(const char *s, int n) {
  int i = n > 0 && s[0] == '-' ? 1 : 0;
  if (i >= n)
    return false;
  for (; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

typedef struct fparser {
  parser *ps;
  plan_graph *g;
  const char *s, *p, *end;
  int depth, max_depth, nest;
  bool has_sym;
  const char *what;
} fparser;

static int ferr(fparser *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int ferr(fparser *f, const char *fmt, ...) {
  char why[160], b[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  tok t = {f->s, (int)(f->end - f->s)};
  return fail(f->ps, "%s: bad formula '%s': %s", f->what, show(t, b, sizeof b), why);
}

static int femit(fparser *f, plan_opcode code, int sym, int64_t imm) {
  plan_graph *g = f->g;
  if (code != PLAN_OP_CONST && code != PLAN_OP_SYM) {
    /* a binary operator: its operands are the formula's last two values.
     * Constant operands are folded now, so that a constant division by
     * zero, say, is found at load in a formula with syms too. */
    plan_op *a = &g->code[g->n_code - 2], *b = &g->code[g->n_code - 1];
    if ((code == PLAN_OP_DIV || code == PLAN_OP_MOD) && b->code == PLAN_OP_CONST && b->imm == 0)
      return ferr(f, "it %s", plan_eval_status_text(PLAN_EVAL_DIV_ZERO));
    if (a->code == PLAN_OP_CONST && b->code == PLAN_OP_CONST) {
      plan_op prog[3] = {*a, *b, {(int32_t)code, 0, 0}};
      int64_t v;
      plan_eval_status st = plan_eval_ops(prog, 3, NULL, &v);
      if (st != PLAN_EVAL_OK)
        return ferr(f, "it %s", plan_eval_status_text(st));
      g->n_code--;
      a->imm = v;
      f->depth--;
      return 0;
    }
  }
  if (g->n_code == g->cap_code) {
    int cap = g->cap_code ? g->cap_code * 2 : 64;
    plan_op *nc = realloc(g->code, sizeof *nc * (size_t)cap);
    if (!nc)
      return fail(f->ps, "out of memory");
    g->code = nc;
    g->cap_code = cap;
  }
  g->code[g->n_code++] = (plan_op){(int32_t)code, sym, imm};
  f->depth += code == PLAN_OP_CONST || code == PLAN_OP_SYM ? 1 : -1;
  if (f->depth > f->max_depth)
    f->max_depth = f->depth;
  if (f->max_depth > PLAN_MAX_DEPTH)
    return ferr(f, "more than %d values pending at once", PLAN_MAX_DEPTH);
  return 0;
}

static int f_sum(fparser *f);

/* min(a, b) or max(a, b), after the name: the two operands, then the op. */
static int f_minmax(fparser *f, plan_opcode code) {
  const char *name = code == PLAN_OP_MIN ? "min" : "max";
  if (++f->nest > PLAN_MAX_DEPTH)
    return ferr(f, "parentheses nested more than %d deep", PLAN_MAX_DEPTH);
  f->p++; /* '(' */
  if (f_sum(f))
    return -1;
  if (f->p >= f->end || *f->p != ',')
    return ferr(f, "%s takes two operands: missing ','", name);
  f->p++;
  if (f_sum(f))
    return -1;
  if (f->p >= f->end || *f->p != ')')
    return ferr(f, "missing ')' after %s's operands", name);
  f->p++;
  f->nest--;
  return femit(f, code, 0, 0);
}

static int f_factor(fparser *f) {
  if (f->p >= f->end)
    return ferr(f, "expected a number, a sym name or '(' at the end");
  char c = *f->p;
  if (c >= '0' && c <= '9') {
    const char *b = f->p;
    while (f->p < f->end && *f->p >= '0' && *f->p <= '9')
      f->p++;
    int64_t v;
    if (!parse_int_span(b, (int)(f->p - b), &v))
      return ferr(f, "the number '%.*s' is too large", (int)(f->p - b), b);
    return femit(f, PLAN_OP_CONST, 0, v);
  }
  if (is_name_start(c)) {
    const char *b = f->p;
    while (f->p < f->end && is_name_char(*f->p))
      f->p++;
    tok name = {b, (int)(f->p - b)};
    if ((tok_is(name, "min") || tok_is(name, "max")) && f->p < f->end && *f->p == '(') {
      if (f->ps->version < 3)
        return ferr(f, "min and max need plan version 3 (this file says %d)", f->ps->version);
      return f_minmax(f, tok_is(name, "min") ? PLAN_OP_MIN : PLAN_OP_MAX);
    }
    for (int i = 0; i < f->g->n_syms; i++)
      if (tok_is(name, f->g->syms[i].name)) {
        f->has_sym = true;
        return femit(f, PLAN_OP_SYM, i, 0);
      }
    char nb[64], list[160] = "";
    size_t k = 0;
    for (int i = 0; i < f->g->n_syms && k + 2 < sizeof list; i++) {
      int w = snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", f->g->syms[i].name);
      if (w < 0)
        break;
      k += (size_t)w;
    }
    return ferr(f, "unknown name '%s' (%s%s)", show(name, nb, sizeof nb),
                f->g->n_syms ? "the graph's syms: " : "the graph has no syms", list);
  }
  if (c == '(') {
    if (++f->nest > PLAN_MAX_DEPTH)
      return ferr(f, "parentheses nested more than %d deep", PLAN_MAX_DEPTH);
    f->p++;
    if (f_sum(f))
      return -1;
    if (f->p >= f->end || *f->p != ')')
      return ferr(f, "missing ')'");
    f->p++;
    f->nest--;
    return 0;
  }
  return ferr(f, "unexpected '%c'", c);
}

static int f_product(fparser *f) {
  if (f_factor(f))
    return -1;
  while (f->p < f->end && (*f->p == '*' || *f->p == '/' || *f->p == '%')) {
    char op = *f->p++;
    if (f_factor(f))
      return -1;
    if (femit(f, op == '*' ? PLAN_OP_MUL : op == '/' ? PLAN_OP_DIV : PLAN_OP_MOD, 0, 0))
      return -1;
  }
  return 0;
}

static int f_sum(fparser *f) {
  if (f_product(f))
    return -1;
  while (f->p < f->end && (*f->p == '+' || *f->p == '-')) {
    char op = *f->p++;
    if (f_product(f))
      return -1;
    if (femit(f, op == '+' ? PLAN_OP_ADD : PLAN_OP_SUB, 0, 0))
      return -1;
  }
  return 0;
}

/* Appends a formula's text to the graph's pool; its offset, or -1. */
static int keep_text(parser *ps, plan_graph *g, const char *s, int n) {
  if (g->n_text + n + 1 > g->cap_text) {
    int cap = g->cap_text ? g->cap_text : 256;
    while (cap < g->n_text + n + 1)
      cap *= 2;
    char *nt = realloc(g->text, (size_t)cap);
    if (!nt)
      return fail(ps, "out of memory");
    g->text = nt;
    g->cap_text = cap;
  }
  int off = g->n_text;
  memcpy(g->text + off, s, (size_t)n);
  g->text[off + n] = 0;
  g->n_text += n + 1;
  return off;
}

/* Compiles the formula s[0..n) into *e: a constant when it names no sym
 * (evaluated now: a division by zero, a negative value or an overflow is an
 * error here), otherwise a program of g->code. */
static int compile_formula(parser *ps, plan_graph *g, const char *s, int n, const char *what,
                           plan_expr *e) {
  int first = g->n_code;
  fparser f = {.ps = ps, .g = g, .s = s, .p = s, .end = s + n, .what = what};
  memset(e, 0, sizeof *e);
  if (f_sum(&f))
    return -1;
  if (f.p != f.end)
    return ferr(&f, "unexpected '%c'", *f.p);
  if (!f.has_sym) {
    plan_eval_status st = plan_eval_ops(g->code + first, g->n_code - first, NULL, &e->value);
    g->n_code = first; /* a constant keeps no program */
    if (st != PLAN_EVAL_OK)
      return ferr(&f, "it %s", plan_eval_status_text(st));
    return 0;
  }
  int off = keep_text(ps, g, s, n);
  if (off < 0)
    return -1;
  e->first = first;
  e->n_ops = g->n_code - first;
  e->text_off = off;
  return 0;
}

/* One formula token whose constant value must lie in [lo, hi] (v1's
 * integer checks and messages); a formula with syms is checked at run. */
static int want_formula(parser *ps, plan_graph *g, tok t, const char *what, int64_t lo, int64_t hi,
                        plan_expr *e) {
  if (is_int_shaped(t.s, t.n) || t.n == 0) {
    memset(e, 0, sizeof *e);
    return want_int(ps, t, what, lo, hi, &e->value);
  }
  if (compile_formula(ps, g, t.s, t.n, what, e))
    return -1;
  if (plan_expr_const(e) && (e->value < lo || e->value > hi))
    return fail(ps, "%s %lld is out of range [%lld, %lld]", what, (long long)e->value,
                (long long)lo, (long long)hi);
  return 0;
}

/* [f,f,f] into vals; *n gets the count. An element written as an integer
 * may be negative here (the caller's checks name it); others are formulas. */
static int want_list(parser *ps, plan_graph *g, tok t, const char *what, plan_expr *vals, int *n) {
  char b[64], ew[160];
  if (t.n < 2 || t.s[0] != '[' || t.s[t.n - 1] != ']')
    return fail(ps, "%s: expected a bracketed list like [4,T*8], found '%s'", what,
                show(t, b, sizeof b));
  *n = 0;
  const char *s = t.s + 1, *end = t.s + t.n - 1;
  if (s == end)
    return 0;
  for (;;) {
    const char *c = s;
    int depth = 0; /* a comma inside min(a,b) or max(a,b) is not the list's */
    while (c < end && (*c != ',' || depth > 0)) {
      depth += *c == '(' ? 1 : *c == ')' ? -1 : 0;
      c++;
    }
    if (*n >= FGL_MAX_RANK)
      return fail(ps, "%s: more than %d dims", what, FGL_MAX_RANK);
    plan_expr *e = &vals[*n];
    memset(e, 0, sizeof *e);
    if (is_int_shaped(s, (int)(c - s))) {
      if (!parse_int_span(s, (int)(c - s), &e->value))
        return fail(ps, "%s: bad integer list '%s'", what, show(t, b, sizeof b));
    } else {
      snprintf(ew, sizeof ew, "%s dim %d", what, *n);
      if (compile_formula(ps, g, s, (int)(c - s), ew, e))
        return -1;
    }
    (*n)++;
    if (c == end)
      break;
    s = c + 1;
  }
  return 0;
}

static int want_dtype(parser *ps, tok t, fgl_dtype *out) {
  char b[64];
  for (int d = 0; d < FGL_DTYPE_COUNT; d++)
    if (tok_is(t, fgl_dtype_name((fgl_dtype)d))) {
      *out = (fgl_dtype)d;
      return 0;
    }
  return fail(ps, "unknown dtype '%s'", show(t, b, sizeof b));
}

static int want_kw(parser *ps, tok *tk, int nt, int i, const char *kw) {
  char b[64];
  if (i >= nt)
    return fail(ps, "missing '%s'", kw);
  if (!tok_is(tk[i], kw))
    return fail(ps, "expected '%s', found '%s'", kw, show(tk[i], b, sizeof b));
  return 0;
}

static int want_count(parser *ps, tok *tk, int nt, int n) {
  char b[64];
  if (nt > n)
    return fail(ps, "unexpected token '%s' at the end of the line", show(tk[n], b, sizeof b));
  if (nt < n)
    return fail(ps, "line is incomplete (%d tokens, expected %d)", nt, n);
  return 0;
}

static char *dup_tok(tok t) {
  char *s = malloc((size_t)t.n + 1);
  if (s) {
    memcpy(s, t.s, (size_t)t.n);
    s[t.n] = 0;
  }
  return s;
}

/* Reads the next line into toks if it is a plan line ("// ..."); returns the
 * number of tokens, 0 when the next line is not a plan line (or at EOF), -1 on
 * a lexical error. peek: do not consume. */
static int next_line(parser *ps, tok *tk, bool peek) {
  size_t p = ps->pos;
  if (p >= ps->len)
    return 0;
  size_t e = p;
  while (e < ps->len && ps->text[e] != '\n')
    e++;
  size_t le = e;
  if (le > p && ps->text[le - 1] == '\r')
    le--;
  if (le - p < 2 || ps->text[p] != '/' || ps->text[p + 1] != '/')
    return 0;
  if (peek) {
    /* only used to see whether the next line is "// graph ..." */
    const char *s = ps->text + p + 2;
    size_t n = le - p - 2;
    if (n >= 7 && memcmp(s, " graph ", 7) == 0)
      return 1;
    return 0;
  }
  ps->pos = e < ps->len ? e + 1 : e;
  ps->line++;
  if (le - p < 3 || ps->text[p + 2] != ' ')
    return fail(ps, "a plan line must start with '// '");
  int nt = 0;
  size_t i = p + 3;
  while (i < le) {
    char c = ps->text[i];
    if (c == ' ' || c == '\t') {
      i++;
      continue;
    }
    size_t s = i;
    while (i < le && ps->text[i] != ' ' && ps->text[i] != '\t') {
      unsigned char u = (unsigned char)ps->text[i];
      if (u < 32 || u >= 127)
        return fail(ps, "invalid character (byte 0x%02x) in the plan", u);
      i++;
    }
    if (nt == MAX_TOKENS)
      return fail(ps, "too many tokens on one line");
    tk[nt].s = ps->text + s;
    tk[nt].n = (int)(i - s);
    nt++;
  }
  if (nt == 0)
    return fail(ps, "empty plan line");
  return nt;
}

/* "p3" etc. kinds: the allowed ref kinds. */
static int want_ref(parser *ps, const char *s, int n, const char *kinds, plan_ref *out) {
  char b[64];
  tok t = {s, n};
  int64_t v;
  if (n < 2 || !strchr(kinds, s[0]) || !parse_int_span(s + 1, n - 1, &v) || s[1] == '-' ||
      v > 1000000) {
    return fail(ps, "bad reference '%s' (expected one of %s followed by an index)",
                show(t, b, sizeof b), kinds);
  }
  out->kind = s[0];
  out->index = (int)v;
  return 0;
}

/* comma-separated refs */
static int want_refs(parser *ps, tok t, const char *kinds, plan_ref **out, int *n) {
  int cnt = 1;
  for (int i = 0; i < t.n; i++)
    if (t.s[i] == ',')
      cnt++;
  if (cnt > MAX_ARGS)
    return fail(ps, "more than %d arguments", MAX_ARGS);
  *out = calloc((size_t)cnt, sizeof **out);
  if (!*out)
    return fail(ps, "out of memory");
  *n = 0;
  const char *s = t.s, *end = t.s + t.n;
  for (;;) {
    const char *c = s;
    while (c < end && *c != ',')
      c++;
    if (want_ref(ps, s, (int)(c - s), kinds, &(*out)[*n]))
      return -1;
    (*n)++;
    if (c == end)
      break;
    s = c + 1;
  }
  return 0;
}

static bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool plan_shape_extent(const int64_t *sizes, const int64_t *strides, int rank, int64_t *numel,
                       int64_t *maxoff) {
  const int64_t lim = INT64_MAX / 16;
  int64_t n = 1, m = 0, p;
  for (int i = 0; i < rank; i++) {
    if (sizes[i] == 0) {
      n = 0;
      continue;
    }
    if (n > 0 && (__builtin_mul_overflow(n, sizes[i], &n) || n > lim))
      return false;
    if (strides[i] > 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &p) ||
                           __builtin_add_overflow(m, p, &m) || m > lim))
      return false;
  }
  *numel = n;
  *maxoff = n == 0 ? -1 : m;
  return true;
}

/* The constant sizes and strides of a shape (all of them constant). */
static void shape_values(const plan_shape *sh, int64_t *sizes, int64_t *strides) {
  for (int d = 0; d < sh->rank; d++) {
    sizes[d] = sh->sizes[d].value;
    strides[d] = sh->strides[d].value;
  }
}

static int parse_shape(parser *ps, plan_graph *g, tok *tk, int nt, int i, const char *what,
                       plan_shape *sh, int elem) {
  int ns, nst;
  if (i + 2 >= nt)
    return fail(ps, "%s: expected SIZES strides STRIDES", what);
  if (want_list(ps, g, tk[i], what, sh->sizes, &ns))
    return -1;
  if (want_kw(ps, tk, nt, i + 1, "strides"))
    return -1;
  char sw[128];
  snprintf(sw, sizeof sw, "%s strides", what);
  if (want_list(ps, g, tk[i + 2], sw, sh->strides, &nst))
    return -1;
  if (ns != nst)
    return fail(ps, "%s: %d sizes but %d strides", what, ns, nst);
  sh->rank = ns;
  sh->symbolic = false;
  for (int d = 0; d < ns; d++) {
    if (plan_expr_const(&sh->sizes[d]) && sh->sizes[d].value < 0)
      return fail(ps, "%s: negative size %lld in dim %d", what, (long long)sh->sizes[d].value, d);
    if (plan_expr_const(&sh->strides[d]) && sh->strides[d].value < 0)
      return fail(ps, "%s: negative stride %lld in dim %d", what, (long long)sh->strides[d].value,
                  d);
    sh->symbolic |= !plan_expr_const(&sh->sizes[d]) || !plan_expr_const(&sh->strides[d]);
  }
  if (!sh->symbolic) {
    int64_t sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK], numel, maxoff;
    shape_values(sh, sizes, strides);
    if (!plan_shape_extent(sizes, strides, ns, &numel, &maxoff) ||
        (maxoff + 1) > INT64_MAX / 16 / elem)
      return fail(ps, "%s: shape too large", what);
  }
  return 0;
}

static int parse_param(parser *ps, tok *tk, int nt, plan_graph *g, int idx) {
  char b[64], what[96];
  int64_t v;
  plan_param *p = &g->params[idx];
  for (int d = 0; d < FGL_MAX_RANK; d++)
    p->sym[d] = -1;
  if (nt < 4)
    return fail(ps, "param line is incomplete");
  if (want_int(ps, tk[1], "param index", 0, MAX_COUNT, &v))
    return -1;
  if (v != idx)
    return fail(ps, "expected param %d, found param %lld", idx, (long long)v);
  if (!is_name(tk[2]))
    return fail(ps, "bad param name '%s'", show(tk[2], b, sizeof b));
  for (int j = 0; j < idx; j++)
    if (tok_is(tk[2], g->params[j].name))
      return fail(ps, "duplicate param name '%s'", g->params[j].name);
  if (!(p->name = dup_tok(tk[2])))
    return fail(ps, "out of memory");
  if (want_dtype(ps, tk[3], &p->dtype))
    return -1;
  if (nt >= 5 && tok_is(tk[4], "scalar")) {
    p->is_scalar = 1;
    return want_count(ps, tk, nt, 5);
  }
  snprintf(what, sizeof what, "param %d ('%s')", idx, p->name);
  if (parse_shape(ps, g, tk, nt, 4, what, &p->shape, fgl_dtype_size(p->dtype)))
    return -1;
  for (int d = 0; d < p->shape.rank; d++) {
    const plan_expr *e = &p->shape.sizes[d];
    if (plan_expr_const(e))
      continue;
    const plan_op *op = &g->code[e->first];
    if (e->n_ops != 1 || op->code != PLAN_OP_SYM)
      return fail(ps, "%s dim %d: a parameter's size is an integer or a sym name, not '%s'", what,
                  d, g->text + e->text_off);
    p->sym[d] = op->sym;
  }
  return want_count(ps, tk, nt, 7);
}

static int parse_result(parser *ps, tok *tk, int nt, plan_graph *g, int idx) {
  char b[64], what[64];
  int64_t v;
  plan_result *r = &g->results[idx];
  if (nt < 3)
    return fail(ps, "result line is incomplete");
  if (want_int(ps, tk[1], "result index", 0, MAX_COUNT, &v))
    return -1;
  if (v != idx)
    return fail(ps, "expected result %d, found result %lld", idx, (long long)v);
  if (want_dtype(ps, tk[2], &r->dtype))
    return -1;
  snprintf(what, sizeof what, "result %d", idx);
  if (parse_shape(ps, g, tk, nt, 3, what, &r->shape, fgl_dtype_size(r->dtype)))
    return -1;
  r->symbolic = r->shape.symbolic;
  if (nt < 7)
    return fail(ps, "result %d: expected 'written' or 'view'", idx);
  if (tok_is(tk[6], "inplace")) { /* version 3: written into a parameter's storage */
    plan_ref pr;
    if (ps->version < 3)
      return fail(ps, "result %d: 'inplace' needs plan version 3 (this file says %d)", idx,
                  ps->version);
    if (nt < 8)
      return fail(ps, "result %d: 'inplace' without a parameter", idx);
    if (want_ref(ps, tk[7].s, tk[7].n, "p", &pr))
      return -1;
    if (pr.index >= g->n_params)
      return fail(ps, "result %d: inplace p%d does not exist (%d params)", idx, pr.index,
                  g->n_params);
    const plan_param *p = &g->params[pr.index];
    if (p->is_scalar || p->dtype != r->dtype || p->shape.rank != r->shape.rank)
      return fail(ps, "result %d: inplace p%d is not a tensor of the result's dtype and rank", idx,
                  pr.index);
    for (int j = 0; j < idx; j++)
      if (g->results[j].inplace && g->results[j].inplace_param == pr.index)
        return fail(ps, "result %d: p%d is already written in place by result %d", idx, pr.index,
                    j);
    r->inplace = true;
    r->inplace_param = pr.index;
    r->check_at_run = true; /* its shape against the parameter's, once evaluated */
    return want_count(ps, tk, nt, 8);
  }
  if (tok_is(tk[6], "written")) {
    for (int d = 0; d < r->shape.rank; d++) {
      const plan_expr *sz = &r->shape.sizes[d], *st = &r->shape.strides[d];
      if (!plan_expr_const(sz) || !plan_expr_const(st))
        r->check_at_run = true;
      else if (st->value == 0 && sz->value > 1)
        return fail(ps, "result %d: a written result cannot have a zero stride (dim %d)", idx, d);
    }
    return want_count(ps, tk, nt, 7);
  }
  if (!tok_is(tk[6], "view"))
    return fail(ps, "result %d: expected 'written', 'inplace' or 'view', found '%s'", idx,
                show(tk[6], b, sizeof b));
  r->is_view = 1;
  if (nt < 8)
    return fail(ps, "result %d: view without a base", idx);
  if (want_ref(ps, tk[7].s, tk[7].n, "pr", &r->base))
    return -1;
  if (want_kw(ps, tk, nt, 8, "offset"))
    return -1;
  if (nt < 10)
    return fail(ps, "result %d: missing offset value", idx);
  if (want_formula(ps, g, tk[9], "view offset", 0, PLAN_MAX_OFFSET, &r->offset))
    return -1;
  r->symbolic |= !plan_expr_const(&r->offset);
  if (want_count(ps, tk, nt, 10))
    return -1;
  /* The base: params are known now; results are checked at 'end'. */
  if (r->base.kind == 'p') {
    if (r->base.index >= g->n_params)
      return fail(ps, "result %d: view base p%d does not exist (%d params)", idx, r->base.index,
                  g->n_params);
  } else if (r->base.index >= g->n_results) {
    return fail(ps, "result %d: view base r%d does not exist (%d results)", idx, r->base.index,
                g->n_results);
  }
  return 0;
}

static int check_view(parser *ps, plan_graph *g, int idx) {
  plan_result *r = &g->results[idx];
  const plan_shape *bsh;
  fgl_dtype bdt;
  if (r->base.kind == 'p') {
    plan_param *p = &g->params[r->base.index];
    if (p->is_scalar)
      return fail(ps, "result %d: view base p%d is a scalar parameter", idx, r->base.index);
    bsh = &p->shape;
    bdt = p->dtype;
  } else {
    plan_result *b = &g->results[r->base.index];
    if (b->is_view)
      return fail(ps, "result %d: view base r%d is not a written result", idx, r->base.index);
    bsh = &b->shape;
    bdt = b->dtype;
  }
  if (bdt != r->dtype)
    return fail(ps, "result %d: view dtype %s differs from its base's %s", idx,
                fgl_dtype_name(r->dtype), fgl_dtype_name(bdt));
  if (r->symbolic || bsh->symbolic) {
    r->check_at_run = true; /* the extents are known once the syms are bound */
    return 0;
  }
  int64_t bs[FGL_MAX_RANK], bst[FGL_MAX_RANK], vs[FGL_MAX_RANK], vst[FGL_MAX_RANK];
  shape_values(bsh, bs, bst);
  shape_values(&r->shape, vs, vst);
  int64_t bn = 0, bmax = 0, vn = 0, vmax = 0, off = r->offset.value;
  plan_shape_extent(bs, bst, bsh->rank, &bn, &bmax);
  plan_shape_extent(vs, vst, r->shape.rank, &vn, &vmax);
  if (vn > 0 && (bn == 0 || off + vmax > bmax))
    return fail(
        ps,
        "result %d: view (offset %lld, last element %lld) leaves its base %c%d (last element %lld)",
        idx, (long long)off, (long long)(off + vmax), r->base.kind, r->base.index, (long long)bmax);
  return 0;
}

static int parse_temp(parser *ps, tok *tk, int nt, plan_graph *g, int idx) {
  char b[64];
  int64_t v;
  plan_temp *t = &g->temps[idx];
  if (want_count(ps, tk, nt, 7))
    return -1;
  if (want_int(ps, tk[1], "temp index", 0, MAX_COUNT, &v))
    return -1;
  if (v != idx)
    return fail(ps, "expected temp %d, found temp %lld", idx, (long long)v);
  if (want_kw(ps, tk, nt, 2, "bytes"))
    return -1;
  if (want_formula(ps, g, tk[3], "temp bytes", 0, PLAN_MAX_TEMP_BYTES, &t->bytes))
    return -1;
  g->symbolic_temps |= !plan_expr_const(&t->bytes);
  if (want_kw(ps, tk, nt, 4, "align"))
    return -1;
  if (want_int(ps, tk[5], "temp align", 16, MAX_TEMP_ALIGN, &t->align))
    return -1;
  if (!is_pow2(t->align))
    return fail(ps, "temp align %lld is not a power of two", (long long)t->align);
  if (tok_is(tk[6], "zero"))
    t->zero = 1;
  else if (!tok_is(tk[6], "nozero"))
    return fail(ps, "temp %d: expected 'zero' or 'nozero', found '%s'", idx,
                show(tk[6], b, sizeof b));
  return 0;
}

static bool has_entry(parser *ps, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < ps->n_entries; i++)
    if ((size_t)ps->entries[i].n == n && memcmp(ps->entries[i].s, name, n) == 0)
      return true;
  return false;
}

static int check_arg(parser *ps, plan_graph *g, plan_ref a, int kidx) {
  switch (a.kind) {
  case 'p':
  case 's':
    if (a.index >= g->n_params)
      return fail(ps, "kernel %d: argument %c%d: no such parameter (%d params)", kidx, a.kind,
                  a.index, g->n_params);
    if (a.kind == 'p' && g->params[a.index].is_scalar)
      return fail(ps, "kernel %d: argument p%d is a scalar parameter (use s%d)", kidx, a.index,
                  a.index);
    if (a.kind == 's' && !g->params[a.index].is_scalar)
      return fail(ps, "kernel %d: argument s%d is a tensor parameter (use p%d)", kidx, a.index,
                  a.index);
    return 0;
  case 'r':
    if (a.index >= g->n_results)
      return fail(ps, "kernel %d: argument r%d: no such result (%d results)", kidx, a.index,
                  g->n_results);
    if (g->results[a.index].is_view)
      return fail(ps,
                  "kernel %d: argument r%d is a view result (kernels write only written results)",
                  kidx, a.index);
    return 0;
  case 't':
    if (a.index >= g->n_temps)
      return fail(ps, "kernel %d: argument t%d: no such temp (%d temps)", kidx, a.index,
                  g->n_temps);
    return 0;
  case 'z':
    if (a.index >= g->n_syms)
      return fail(ps, "kernel %d: argument z%d: no such sym (%d syms)", kidx, a.index, g->n_syms);
    return 0;
  }
  return fail(ps, "kernel %d: bad argument", kidx);
}

static int parse_kernel(parser *ps, tok *tk, int nt, plan_graph *g, int idx) {
  char b[64];
  int64_t v;
  plan_kernel *k = &g->kernels[idx];
  if (want_count(ps, tk, nt, 15))
    return -1;
  if (want_int(ps, tk[1], "kernel index", 0, MAX_COUNT, &v))
    return -1;
  if (v != idx)
    return fail(ps, "expected kernel %d, found kernel %lld", idx, (long long)v);
  if (!is_name(tk[2]))
    return fail(ps, "bad kernel entry name '%s'", show(tk[2], b, sizeof b));
  if (!(k->entry = dup_tok(tk[2])))
    return fail(ps, "out of memory");
  if (want_kw(ps, tk, nt, 3, "grid"))
    return -1;
  static const int64_t gmax[3] = {2147483647, 65535, 65535}, bmax[3] = {1024, 1024, 64};
  static const char *gname[3] = {"grid x", "grid y", "grid z"},
                    *bname[3] = {"block x", "block y", "block z"};
  for (int d = 0; d < 3; d++) {
    /* grid x 0: a kernel over an empty domain, never launched */
    if (want_formula(ps, g, tk[4 + d], gname[d], d == 0 ? 0 : 1, gmax[d], &k->grid[d]))
      return -1;
    k->grid_symbolic |= !plan_expr_const(&k->grid[d]);
  }
  if (want_kw(ps, tk, nt, 7, "block"))
    return -1;
  for (int d = 0; d < 3; d++) {
    if (want_int(ps, tk[8 + d], bname[d], 1, bmax[d], &v))
      return -1;
    k->block[d] = (unsigned)v;
  }
  if ((int64_t)k->block[0] * k->block[1] * k->block[2] > 1024)
    return fail(ps, "kernel %d: block %ux%ux%u has more than 1024 threads", idx, k->block[0],
                k->block[1], k->block[2]);
  if (want_kw(ps, tk, nt, 11, "smem"))
    return -1;
  if (want_int(ps, tk[12], "smem", 0, 1 << 24, &v))
    return -1;
  k->smem = (unsigned)v;
  if (want_kw(ps, tk, nt, 13, "args"))
    return -1;
  if (want_refs(ps, tk[14], "psrtz", &k->args, &k->n_args))
    return -1;
  for (int i = 0; i < k->n_args; i++)
    if (check_arg(ps, g, k->args[i], idx))
      return -1;
  if (!has_entry(ps, k->entry))
    return fail(ps, "kernel %d: entry '%s' is not defined in the PTX", idx, k->entry);
  return 0;
}

/* A line about kernel tk[1] (`what I ...`, nt tokens in all) that must
 * follow the kernel's own line: that kernel, or NULL after failing. */
static plan_kernel *kernel_of_line(parser *ps, tok *tk, int nt, int count, const char *what,
                                   plan_graph *g, int n_seen) {
  char label[48];
  int64_t v;
  snprintf(label, sizeof label, "%s index", what);
  if (want_count(ps, tk, nt, count) || want_int(ps, tk[1], label, 0, MAX_COUNT, &v))
    return NULL;
  if (v >= n_seen) {
    fail(ps, "%s %lld does not follow its kernel line", what, (long long)v);
    return NULL;
  }
  return &g->kernels[v];
}

static int parse_kernel_vec(parser *ps, tok *tk, int nt, plan_graph *g, int n_seen) {
  char b[64];
  int64_t v;
  plan_kernel *k = kernel_of_line(ps, tk, nt, 7, "kernel-vec", g, n_seen);
  if (!k)
    return -1;
  if (k->vec_entry)
    return fail(ps, "kernel %d has two kernel-vec lines", (int)(k - g->kernels));
  if (!is_name(tk[2]))
    return fail(ps, "bad kernel-vec entry name '%s'", show(tk[2], b, sizeof b));
  if (!(k->vec_entry = dup_tok(tk[2])))
    return fail(ps, "out of memory");
  if (want_kw(ps, tk, nt, 3, "align"))
    return -1;
  if (want_int(ps, tk[4], "kernel-vec align", 1, MAX_VEC_ALIGN, &v))
    return -1;
  if (!is_pow2(v))
    return fail(ps, "kernel-vec align %lld is not a power of two", (long long)v);
  k->vec_align = (int)v;
  if (want_kw(ps, tk, nt, 5, "ptrs"))
    return -1;
  if (want_refs(ps, tk[6], "prt", &k->vec_ptrs, &k->n_vec_ptrs))
    return -1;
  int kidx = (int)(k - g->kernels);
  for (int i = 0; i < k->n_vec_ptrs; i++) {
    plan_ref a = k->vec_ptrs[i];
    bool found = false;
    for (int j = 0; j < k->n_args; j++)
      if (k->args[j].kind == a.kind && k->args[j].index == a.index)
        found = true;
    if (!found)
      return fail(ps, "kernel-vec %d: pointer %c%d is not an argument of kernel %d", kidx, a.kind,
                  a.index, kidx);
  }
  if (!has_entry(ps, k->vec_entry))
    return fail(ps, "kernel-vec %d: entry '%s' is not defined in the PTX", kidx, k->vec_entry);
  return 0;
}

/* kernel-narrow I ENTRY VEC_ENTRY max M: whether VEC_ENTRY ('-' or a name)
 * matches the kernel's kernel-vec line is checked at 'end' (check_narrow),
 * as that line may come later. */
static int parse_kernel_narrow(parser *ps, tok *tk, int nt, plan_graph *g, int n_seen) {
  char b[64];
  plan_kernel *k = kernel_of_line(ps, tk, nt, 6, "kernel-narrow", g, n_seen);
  if (!k)
    return -1;
  int kidx = (int)(k - g->kernels);
  if (g->n_syms == 0)
    return fail(ps,
                "kernel-narrow %d: graph '%s' has no syms (the narrow entries are chosen by the "
                "value of sym 0)",
                kidx, g->name);
  if (k->narrow_entry)
    return fail(ps, "kernel %d has two kernel-narrow lines", kidx);
  if (!is_name(tk[2]))
    return fail(ps, "bad kernel-narrow entry name '%s'", show(tk[2], b, sizeof b));
  bool dash = tok_is(tk[3], "-");
  if (!dash && !is_name(tk[3]))
    return fail(ps, "bad kernel-narrow vec entry name '%s' (a name, or '-' for none)",
                show(tk[3], b, sizeof b));
  if (!(k->narrow_entry = dup_tok(tk[2])) || (!dash && !(k->narrow_vec_entry = dup_tok(tk[3]))))
    return fail(ps, "out of memory");
  if (want_kw(ps, tk, nt, 4, "max") ||
      want_int(ps, tk[5], "kernel-narrow max", 0, INT64_C(1) << 62, &k->narrow_max))
    return -1;
  if (!has_entry(ps, k->narrow_entry))
    return fail(ps, "kernel-narrow %d: entry '%s' is not defined in the PTX", kidx,
                k->narrow_entry);
  if (k->narrow_vec_entry && !has_entry(ps, k->narrow_vec_entry))
    return fail(ps, "kernel-narrow %d: vec entry '%s' is not defined in the PTX", kidx,
                k->narrow_vec_entry);
  k->narrow_line = ps->line;
  return 0;
}

/* At 'end': a narrow vec entry exactly where there is a kernel-vec line
 * (the message names the kernel-narrow line). */
static int check_narrow(parser *ps, const plan_graph *g) {
  for (int i = 0; i < g->n_kernels; i++) {
    const plan_kernel *k = &g->kernels[i];
    if (!k->narrow_entry || (k->narrow_vec_entry != NULL) == (k->vec_entry != NULL))
      continue;
    ps->line = k->narrow_line;
    if (k->narrow_vec_entry)
      return fail(ps,
                  "kernel-narrow %d: vec entry '%s', but kernel %d has no kernel-vec line (write "
                  "'-')",
                  i, k->narrow_vec_entry, i);
    return fail(ps,
                "kernel-narrow %d: vec entry '-', but kernel %d has a kernel-vec line ('%s'): "
                "name its narrow variant",
                i, i, k->vec_entry);
  }
  return 0;
}

static int parse_kernel_resident(parser *ps, tok *tk, int nt, plan_graph *g, int n_seen) {
  plan_kernel *k = kernel_of_line(ps, tk, nt, 4, "kernel-resident", g, n_seen);
  if (!k)
    return -1;
  long long v = (long long)(k - g->kernels);
  if (k->resident)
    return fail(ps, "kernel %lld has two kernel-resident lines", v);
  if (k->stream)
    return fail(ps, "kernel-resident %lld: a kernel-stream kernel cannot wait for all its CTAs", v);
  if (want_kw(ps, tk, nt, 2, "cluster"))
    return -1;
  int64_t c;
  if (want_int(ps, tk[3], "kernel-resident cluster", 1, 16, &c))
    return -1;
  /* a symbolic grid is checked at run (and its CTAs counted there) */
  if (!k->grid_symbolic && (k->grid[0].value % c || k->grid[1].value != 1 || k->grid[2].value != 1))
    return fail(ps, "kernel-resident %lld: grid %lldx%lldx%lld is not made of clusters of %lld", v,
                (long long)k->grid[0].value, (long long)k->grid[1].value,
                (long long)k->grid[2].value, (long long)c);
  k->resident = true;
  k->cluster = (int)c;
  return 0;
}

/* kernel-stream I S (version 4): kernel I runs on stream S, 1 being the
 * instance's second stream (docs/artifact.md). */
static int parse_kernel_stream(parser *ps, tok *tk, int nt, plan_graph *g, int n_seen) {
  if (ps->version < 4)
    return fail(ps, "'kernel-stream' needs plan version 4 (this file says %d)", ps->version);
  plan_kernel *k = kernel_of_line(ps, tk, nt, 3, "kernel-stream", g, n_seen);
  if (!k)
    return -1;
  long long v = (long long)(k - g->kernels);
  if (k->stream)
    return fail(ps, "kernel %lld has two kernel-stream lines", v);
  int64_t s;
  if (want_int(ps, tk[2], "kernel-stream stream", 1, 1, &s))
    return -1;
  if (k->resident)
    return fail(ps, "kernel-stream %lld: a kernel-resident kernel runs on the caller's stream", v);
  k->stream = (int)s;
  g->streams = true;
  return 0;
}

/* kernel-pdl I (version 5): kernel I waits for the kernels before it on
 * its stream in the kernel, so it may be launched before they finish
 * (docs/artifact.md). */
static int parse_kernel_pdl(parser *ps, tok *tk, int nt, plan_graph *g, int n_seen) {
  if (ps->version < 5)
    return fail(ps, "'kernel-pdl' needs plan version 5 (this file says %d)", ps->version);
  plan_kernel *k = kernel_of_line(ps, tk, nt, 2, "kernel-pdl", g, n_seen);
  if (!k)
    return -1;
  if (k->pdl)
    return fail(ps, "kernel %lld has two kernel-pdl lines", (long long)(k - g->kernels));
  k->pdl = true;
  return 0;
}

static int count_arg(parser *ps, tok *tk, int nt, int i, const char *kw, int *out) {
  int64_t v;
  if (want_kw(ps, tk, nt, i, kw))
    return -1;
  if (i + 1 >= nt)
    return fail(ps, "missing the %s count", kw);
  char what[32];
  snprintf(what, sizeof what, "%s count", kw);
  if (want_int(ps, tk[i + 1], what, 0, MAX_COUNT, &v))
    return -1;
  *out = (int)v;
  return 0;
}

static int parse_sym(parser *ps, tok *tk, int nt, plan_graph *g, int idx, int *lines) {
  char b[64];
  int64_t v;
  plan_sym *y = &g->syms[idx];
  if (want_count(ps, tk, nt, 9))
    return -1;
  if (want_int(ps, tk[1], "sym index", 0, PLAN_MAX_SYMS, &v))
    return -1;
  if (v != idx)
    return fail(ps, "expected sym %d, found sym %lld", idx, (long long)v);
  if (!is_name(tk[2]))
    return fail(ps, "bad sym name '%s'", show(tk[2], b, sizeof b));
  for (int j = 0; j < idx; j++)
    if (tok_is(tk[2], g->syms[j].name))
      return fail(ps, "duplicate sym name '%s'", g->syms[j].name);
  if (!(y->name = dup_tok(tk[2])))
    return fail(ps, "out of memory");
  const int64_t top = INT64_C(1) << 62;
  if (want_kw(ps, tk, nt, 3, "min") || want_int(ps, tk[4], "sym min", 0, top, &y->min) ||
      want_kw(ps, tk, nt, 5, "max") || want_int(ps, tk[6], "sym max", 0, top, &y->max) ||
      want_kw(ps, tk, nt, 7, "div") || want_int(ps, tk[8], "sym div", 1, top, &y->div))
    return -1;
  if (y->max < y->min)
    return fail(ps, "sym %s: max %lld is below min %lld", y->name, (long long)y->max,
                (long long)y->min);
  y->first_param = y->first_dim = -1;
  lines[idx] = ps->line;
  return 0;
}

/* After the params: where each sym is bound, and that every sym is (the
 * message names the sym's own line). */
static int bind_syms(parser *ps, plan_graph *g, const int *lines) {
  int n = 0;
  for (int i = 0; i < g->n_params; i++)
    for (int d = 0; d < g->params[i].shape.rank; d++)
      n += g->params[i].sym[d] >= 0;
  g->binds = calloc((size_t)n + 1, sizeof *g->binds);
  if (!g->binds)
    return fail(ps, "out of memory");
  for (int i = 0; i < g->n_params; i++)
    for (int d = 0; d < g->params[i].shape.rank; d++) {
      int s = g->params[i].sym[d];
      if (s < 0)
        continue;
      plan_sym *y = &g->syms[s];
      bool first = y->first_param < 0;
      if (first) {
        y->first_param = i;
        y->first_dim = d;
      }
      g->binds[g->n_binds++] = (plan_bind){i, d, s, first};
    }
  for (int s = 0; s < g->n_syms; s++)
    if (g->syms[s].first_param < 0) {
      int line = ps->line;
      ps->line = lines[s];
      fail(ps,
           "sym %d '%s' is the size of no parameter's dim (a sym is bound from the sizes of "
           "the tensors passed)",
           s, g->syms[s].name);
      ps->line = line;
      return -1;
    }
  return 0;
}

static int parse_graph(parser *ps, tok *tk, int nt, plan *p) {
  char b[64];
  if (want_count(ps, tk, nt, 12))
    return -1;
  if (!is_name(tk[1]))
    return fail(ps, "bad graph name '%s'", show(tk[1], b, sizeof b));
  for (int i = 0; i < p->n_graphs; i++)
    if (tok_is(tk[1], p->graphs[i].name))
      return fail(ps, "duplicate graph name '%s'", p->graphs[i].name);
  plan_graph *ng = realloc(p->graphs, sizeof *ng * (size_t)(p->n_graphs + 1));
  if (!ng)
    return fail(ps, "out of memory");
  p->graphs = ng;
  plan_graph *g = &p->graphs[p->n_graphs++];
  memset(g, 0, sizeof *g);
  if (!(g->name = dup_tok(tk[1])))
    return fail(ps, "out of memory");
  int np, nr, ntm, nk, ns;
  if (count_arg(ps, tk, nt, 2, "params", &np) || count_arg(ps, tk, nt, 4, "results", &nr) ||
      count_arg(ps, tk, nt, 6, "temps", &ntm) || count_arg(ps, tk, nt, 8, "kernels", &nk) ||
      count_arg(ps, tk, nt, 10, "syms", &ns))
    return -1;
  if (ns > PLAN_MAX_SYMS)
    return fail(ps, "syms count %d is out of range [0, %d]", ns, PLAN_MAX_SYMS);
  g->params = calloc((size_t)np + 1, sizeof *g->params);
  g->results = calloc((size_t)nr + 1, sizeof *g->results);
  g->temps = calloc((size_t)ntm + 1, sizeof *g->temps);
  g->kernels = calloc((size_t)nk + 1, sizeof *g->kernels);
  g->syms = calloc((size_t)ns + 1, sizeof *g->syms);
  if (!g->params || !g->results || !g->temps || !g->kernels || !g->syms)
    return fail(ps, "out of memory");
  g->n_params = np;
  g->n_results = nr;
  g->n_temps = ntm;
  g->n_kernels = nk;
  g->n_syms = ns;
  int graph_line = ps->line;
  int sym_lines[PLAN_MAX_SYMS + 1];

  int is = 0, ip = 0, ir = 0, it = 0, ik = 0;
  bool bound = false;
  tok t2[MAX_TOKENS];
  for (;;) {
    int n = next_line(ps, t2, false);
    if (n < 0)
      return -1;
    if (n == 0) {
      ps->line++;
      return fail(ps, "the plan ends inside graph '%s' (opened at line %d) without 'end'", g->name,
                  graph_line);
    }
    if (!bound && is == ns && ip == np) {
      if (bind_syms(ps, g, sym_lines))
        return -1;
      bound = true;
    }
    tok kw = t2[0];
    /* what comes next, in order */
    const char *expect = is < ns    ? "sym"
                         : ip < np  ? "param"
                         : ir < nr  ? "result"
                         : it < ntm ? "temp"
                         : ik < nk  ? "kernel"
                                    : "end";
    if (tok_is(kw, "kernel-vec") && is == ns && ip == np && ir == nr && it == ntm) {
      if (parse_kernel_vec(ps, t2, n, g, ik))
        return -1;
      continue;
    }
    if (tok_is(kw, "kernel-resident") && is == ns && ip == np && ir == nr && it == ntm) {
      if (parse_kernel_resident(ps, t2, n, g, ik))
        return -1;
      continue;
    }
    if (tok_is(kw, "kernel-stream") && is == ns && ip == np && ir == nr && it == ntm) {
      if (parse_kernel_stream(ps, t2, n, g, ik))
        return -1;
      continue;
    }
    if (tok_is(kw, "kernel-pdl") && is == ns && ip == np && ir == nr && it == ntm) {
      if (parse_kernel_pdl(ps, t2, n, g, ik))
        return -1;
      continue;
    }
    if (tok_is(kw, "kernel-narrow") && is == ns && ip == np && ir == nr && it == ntm) {
      if (parse_kernel_narrow(ps, t2, n, g, ik))
        return -1;
      continue;
    }
    if (!tok_is(kw, expect)) {
      static const char *known[] = {
          "fusec-plan",    "target",        "graph",      "sym",        "param",
          "result",        "temp",          "kernel",     "kernel-vec", "kernel-resident",
          "kernel-narrow", "kernel-stream", "kernel-pdl", "end"};
      bool is_known = false;
      for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        is_known |= tok_is(kw, known[i]);
      if (!is_known)
        return fail(ps, "unknown plan line '%s'", show(kw, b, sizeof b));
      if (!strcmp(expect, "end"))
        return fail(ps,
                    "expected 'end' of graph '%s' (it declares %d params, %d results, %d temps, %d "
                    "kernels, %d syms), found '%s'",
                    g->name, np, nr, ntm, nk, ns, show(kw, b, sizeof b));
      return fail(ps,
                  "expected '%s' line (graph '%s' declares params %d results %d temps %d kernels "
                  "%d syms %d), found '%s'",
                  expect, g->name, np, nr, ntm, nk, ns, show(kw, b, sizeof b));
    }
    if (!strcmp(expect, "sym")) {
      if (parse_sym(ps, t2, n, g, is++, sym_lines))
        return -1;
    } else if (!strcmp(expect, "param")) {
      if (parse_param(ps, t2, n, g, ip++))
        return -1;
    } else if (!strcmp(expect, "result")) {
      if (parse_result(ps, t2, n, g, ir++))
        return -1;
      if (ir == nr) /* all results known: check the views now, with this line number */
        for (int i = 0; i < nr; i++)
          if (g->results[i].is_view && check_view(ps, g, i))
            return -1;
    } else if (!strcmp(expect, "temp")) {
      if (parse_temp(ps, t2, n, g, it++))
        return -1;
    } else if (!strcmp(expect, "kernel")) {
      if (parse_kernel(ps, t2, n, g, ik++))
        return -1;
    } else {
      if (want_count(ps, t2, n, 1) || check_narrow(ps, g))
        return -1;
      return 0;
    }
  }
}

/* Records every ".entry NAME" of the PTX, skipping // and block comments. */
static int scan_entries(parser *ps) {
  const char *s = ps->text;
  size_t n = ps->len, i = 0;
  while (i < n) {
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n')
        i++;
      continue;
    }
    if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/'))
        i++;
      i += 2;
      continue;
    }
    if (s[i] == '.' && i + 6 < n && memcmp(s + i, ".entry", 6) == 0 &&
        (s[i + 6] == ' ' || s[i + 6] == '\t' || s[i + 6] == '\n' || s[i + 6] == '\r') &&
        (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t' || s[i - 1] == '\n')) {
      i += 6;
      while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
      size_t b = i;
      while (i < n && (s[i] == '_' || s[i] == '$' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
                       (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
        i++;
      if (i > b) {
        if (ps->n_entries == ps->cap_entries) {
          int cap = ps->cap_entries ? ps->cap_entries * 2 : 16;
          tok *ne = realloc(ps->entries, sizeof *ne * (size_t)cap);
          if (!ne)
            return -1;
          ps->entries = ne;
          ps->cap_entries = cap;
        }
        ps->entries[ps->n_entries].s = s + b;
        ps->entries[ps->n_entries].n = (int)(i - b);
        ps->n_entries++;
      }
      continue;
    }
    i++;
  }
  return 0;
}

int plan_parse(const char *text, size_t len, plan *out, char *err, size_t errlen) {
  parser ps = {.text = text, .len = len, .err = err, .errlen = errlen};
  plan p;
  memset(&p, 0, sizeof p);
  memset(out, 0, sizeof *out);
  tok tk[MAX_TOKENS];
  char b[64];
  int rc = -1;
  int64_t v;
  if (!text) {
    ps.line = 1;
    fail(&ps, "no artifact data");
    goto done;
  }
  if (scan_entries(&ps)) {
    ps.line = 1;
    fail(&ps, "out of memory");
    goto done;
  }

  int nt = next_line(&ps, tk, false);
  if (nt <= 0 || !tok_is(tk[0], "fusec-plan")) {
    ps.line = 1;
    if (nt >= 0)
      fail(&ps, "not a fusec artifact: the file must start with '// fusec-plan %d'", PLAN_VERSION);
    goto done;
  }
  if (nt < 2 || !parse_int_span(tk[1].s, tk[1].n, &v)) {
    fail(&ps, "expected '// fusec-plan %d'", PLAN_VERSION);
    goto done;
  }
  if (v < PLAN_VERSION_MIN || v > PLAN_VERSION) {
    fail(&ps,
         "plan version %lld, this loader reads versions %d to %d: recompile the model with this "
         "fusec",
         (long long)v, PLAN_VERSION_MIN, PLAN_VERSION);
    goto done;
  }
  ps.version = (int)v;
  if (want_count(&ps, tk, nt, 2))
    goto done;

  nt = next_line(&ps, tk, false);
  if (nt < 0)
    goto done;
  if (nt == 0) {
    ps.line++;
    fail(&ps, "expected '// target sm_NN'");
    goto done;
  }
  if (want_kw(&ps, tk, nt, 0, "target") || want_count(&ps, tk, nt, 2))
    goto done;
  {
    tok t = tk[1];
    int64_t sm = 0;
    int nd = t.n - 3;
    if (nd > 0 && t.s[t.n - 1] == 'a')
      nd--; /* sm_90a */
    if (t.n < 5 || t.n >= (int)sizeof p.target || memcmp(t.s, "sm_", 3) != 0 || nd < 2 ||
        !parse_int_span(t.s + 3, nd, &sm) || t.s[3] == '-' || sm < 10 || sm > 1000) {
      fail(&ps, "bad target '%s' (expected sm_NN, e.g. sm_90)", show(t, b, sizeof b));
      goto done;
    }
    memcpy(p.target, t.s, (size_t)t.n);
    p.target[t.n] = 0;
    p.sm = (int)sm;
  }

  for (;;) {
    nt = next_line(&ps, tk, false);
    if (nt < 0)
      goto done;
    if (nt == 0) {
      ps.line++;
      fail(&ps, "the plan has no graph (expected '// graph NAME ...')");
      goto done;
    }
    if (!tok_is(tk[0], "graph")) {
      fail(&ps, "expected '// graph ...', found '%s'", show(tk[0], b, sizeof b));
      goto done;
    }
    if (parse_graph(&ps, tk, nt, &p))
      goto done;
    /* The plan ends after an 'end' not followed by another '// graph' line;
     * what follows is PTX (which may start with its own comments). */
    if (!next_line(&ps, tk, true))
      break;
  }
  rc = 0;
  *out = p;
done:
  free(ps.entries);
  if (rc)
    plan_free(&p);
  return rc;
}

void plan_free(plan *p) {
  if (!p)
    return;
  for (int i = 0; i < p->n_graphs; i++) {
    plan_graph *g = &p->graphs[i];
    free(g->name);
    for (int j = 0; g->params && j < g->n_params; j++)
      free(g->params[j].name);
    for (int j = 0; g->kernels && j < g->n_kernels; j++) {
      free(g->kernels[j].entry);
      free(g->kernels[j].args);
      free(g->kernels[j].vec_entry);
      free(g->kernels[j].vec_ptrs);
      free(g->kernels[j].narrow_entry);
      free(g->kernels[j].narrow_vec_entry);
    }
    for (int j = 0; g->syms && j < g->n_syms; j++)
      free(g->syms[j].name);
    free(g->params);
    free(g->results);
    free(g->temps);
    free(g->kernels);
    free(g->syms);
    free(g->binds);
    free(g->code);
    free(g->text);
  }
  free(p->graphs);
  memset(p, 0, sizeof *p);
}

const plan_graph *plan_find(const plan *p, const char *name) {
  for (int i = 0; i < p->n_graphs; i++)
    if (!strcmp(p->graphs[i].name, name))
      return &p->graphs[i];
  return NULL;
}

/* ---- evaluation ---- */

plan_eval_status plan_eval_ops(const plan_op *ops, int n, const int64_t *syms, int64_t *out) {
  int64_t st[PLAN_MAX_DEPTH + 1];
  int sp = 0;
  for (int i = 0; i < n; i++) {
    const plan_op *o = &ops[i];
    int64_t a, b, r;
    /* not reached: the parser checks each program's depth (the checks here
     * are for the compiler, which cannot prove it) */
    if (sp < 0 || sp > PLAN_MAX_DEPTH)
      return PLAN_EVAL_OVERFLOW;
    switch ((plan_opcode)o->code) {
    case PLAN_OP_CONST:
      st[sp++] = o->imm;
      continue;
    case PLAN_OP_SYM:
      st[sp++] = syms[o->sym];
      continue;
    default:
      break;
    }
    if (sp < 2)
      return PLAN_EVAL_OVERFLOW; /* not reached, as above */
    b = st[sp - 1];
    a = st[sp - 2];
    sp--;
    switch ((plan_opcode)o->code) {
    case PLAN_OP_ADD:
      if (__builtin_add_overflow(a, b, &r))
        return PLAN_EVAL_OVERFLOW;
      break;
    case PLAN_OP_SUB:
      r = a - b; /* both >= 0: no overflow */
      if (r < 0)
        return PLAN_EVAL_NEGATIVE;
      break;
    case PLAN_OP_MUL:
      if (__builtin_mul_overflow(a, b, &r))
        return PLAN_EVAL_OVERFLOW;
      break;
    case PLAN_OP_DIV:
      if (b == 0)
        return PLAN_EVAL_DIV_ZERO;
      r = a / b; /* non-negative operands: truncation is floor */
      break;
    case PLAN_OP_MOD:
      if (b == 0)
        return PLAN_EVAL_DIV_ZERO;
      r = a % b;
      break;
    case PLAN_OP_MIN:
      r = a < b ? a : b;
      break;
    case PLAN_OP_MAX:
      r = a > b ? a : b;
      break;
    default:
      return PLAN_EVAL_OVERFLOW; /* not reached: the parser emits no other code */
    }
    st[sp - 1] = r;
  }
  if (sp < 1)
    return PLAN_EVAL_OVERFLOW; /* not reached, as above */
  *out = st[0];
  return PLAN_EVAL_OK;
}

const char *plan_eval_status_text(plan_eval_status s) {
  switch (s) {
  case PLAN_EVAL_OK:
    return "is fine";
  case PLAN_EVAL_OVERFLOW:
    return "overflows int64";
  case PLAN_EVAL_NEGATIVE:
    return "goes below zero";
  case PLAN_EVAL_DIV_ZERO:
    return "divides by zero";
  }
  return "fails";
}

const char *plan_expr_text(const plan_graph *g, const plan_expr *e, char *buf, size_t n) {
  if (!plan_expr_const(e))
    return g->text + e->text_off;
  snprintf(buf, n, "%lld", (long long)e->value);
  return buf;
}
