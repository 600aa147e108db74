/* The canonical .fg printer. Every node that is not an unnamed literal
 * becomes its own statement; values without a usable name get fresh names
 * (t0, t1, ...) that collide with nothing in the graph; unnamed literals are
 * written inline at their uses; the size clause lists what the graph
 * declares about its symbolic sizes. The output parses back to the same graph
 * and prints to the same bytes. */
#include "print.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

void fg_format_float(char *buf, int cap, double v) {
  char tmp[64];
  if (isnan(v)) {
    snprintf(buf, (size_t)cap, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, (size_t)cap, "%s", v > 0 ? "inf" : "-inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v)
      break;
  }
  /* "1e-05" -> "1e-5", "1e+20" -> "1e20": same value, shorter, still a float */
  char *e = strchr(tmp, 'e');
  if (e) {
    char *q = e + 1, *w = e + 1;
    if (*q == '+')
      q++;
    else if (*q == '-')
      *w++ = *q++;
    while (*q == '0' && q[1])
      q++;
    memmove(w, q, strlen(q) + 1);
  } else if (!strchr(tmp, '.')) {
    strcat(tmp, ".0"); /* "2" would lex as an integer */
  }
  snprintf(buf, (size_t)cap, "%s", tmp);
}

/* ---- value names ---- */

typedef struct namer {
  const char **name; /* by value id; NULL: unnamed literal, printed inline */
  char **owned;      /* fresh names to free */
  int nowned;
  const char **taken; /* open-addressing set of every name in use */
  size_t cap;
  int counter;
} namer;

static size_t hash_str(const char *s) {
  size_t h = 5381;
  while (*s)
    h = h * 33 + (unsigned char)*s++;
  return h;
}

static int taken_has(const namer *nm, const char *s) {
  for (size_t i = hash_str(s) & (nm->cap - 1);; i = (i + 1) & (nm->cap - 1)) {
    if (!nm->taken[i])
      return 0;
    if (strcmp(nm->taken[i], s) == 0)
      return 1;
  }
}

static void taken_add(namer *nm, const char *s) {
  size_t i = hash_str(s) & (nm->cap - 1);
  while (nm->taken[i]) {
    if (strcmp(nm->taken[i], s) == 0)
      return;
    i = (i + 1) & (nm->cap - 1);
  }
  nm->taken[i] = s;
}

/* A name the parser would read back as this value's name. */
static int is_plain_name(const char *s) {
  if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '_' || *p == '.'))
      return 0;
  static const char *const reserved[] = {"graph", "return", "true", "false", "inf", "nan"};
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
    if (strcmp(s, reserved[i]) == 0)
      return 0;
  return 1;
}

static const char *fresh(namer *nm) {
  char buf[32];
  do
    snprintf(buf, sizeof buf, "t%d", nm->counter++);
  while (taken_has(nm, buf));
  char *s = strdup(buf);
  if (!s)
    abort();
  nm->owned[nm->nowned++] = s;
  taken_add(nm, s);
  return s;
}

static int is_literal_node(const fg_node *n) { return n->op->code == FG_OP_LITERAL; }

static void assign(namer *nm, char *defined, int nv, const fg_value *v, int literal) {
  const char *s = v->name;
  int ok = is_plain_name(s);
  if (ok) {
    size_t i = hash_str(s) & (nm->cap - 1);
    while (strcmp(nm->taken[i], s) != 0)
      i = (i + 1) & (nm->cap - 1);
    if (defined[i])
      ok = 0;
    else
      defined[i] = 1;
  }
  if (v->id < 0 || v->id >= nv)
    return;
  if (ok)
    nm->name[v->id] = s;
  else if (!literal)
    nm->name[v->id] = fresh(nm);
}

/* Names every value: its own name when usable and not already printed,
 * else a fresh one. Unnamed literals keep NULL. */
static void namer_init(namer *nm, const fg_graph *g) {
  int nv = g->next_value_id > 0 ? g->next_value_id : 1, total = g->nparams;
  for (const fg_node *n = g->first; n; n = n->next)
    total += n->nout;
  nm->cap = 64;
  while (nm->cap < (size_t)total * 4 + 64)
    nm->cap *= 2;
  nm->taken = calloc(nm->cap, sizeof *nm->taken);
  nm->name = calloc((size_t)nv, sizeof *nm->name);
  nm->owned = calloc((size_t)total + 1, sizeof *nm->owned);
  nm->nowned = 0;
  nm->counter = 0;
  if (!nm->taken || !nm->name || !nm->owned)
    abort();
  for (int i = 0; i < g->nparams; i++)
    if (is_plain_name(g->params[i]->name))
      taken_add(nm, g->params[i]->name);
  for (const fg_node *n = g->first; n; n = n->next)
    for (int i = 0; i < n->nout; i++)
      if (is_plain_name(n->out[i]->name))
        taken_add(nm, n->out[i]->name);
  /* second pass: hand out names in definition order; the first definition
   * of a duplicated name keeps it */
  char *defined = calloc(nm->cap, 1);
  if (!defined)
    abort();
  for (int i = 0; i < g->nparams; i++)
    assign(nm, defined, nv, g->params[i], 0);
  for (const fg_node *n = g->first; n; n = n->next)
    for (int j = 0; j < n->nout; j++)
      assign(nm, defined, nv, n->out[j], is_literal_node(n));
  free(defined);
}

static void namer_free(namer *nm) {
  for (int i = 0; i < nm->nowned; i++)
    free(nm->owned[i]);
  free(nm->owned);
  free(nm->taken);
  free(nm->name);
}

/* ---- printing ---- */

static void print_literal_attr(FILE *f, const fg_attr *a) {
  char buf[64];
  switch (a->kind) {
  case FG_ATTR_INT:
    fprintf(f, "%" PRId64, a->i);
    break;
  case FG_ATTR_FLOAT:
    fg_format_float(buf, sizeof buf, a->f);
    fputs(buf, f);
    break;
  case FG_ATTR_BOOL:
    fputs(a->i ? "true" : "false", f);
    break;
  case FG_ATTR_DTYPE:
    fputs(fg_dtype_name(a->dtype), f);
    break;
  case FG_ATTR_STRING:
    fprintf(f, "\"%s\"", a->s ? a->s : "");
    break;
  case FG_ATTR_INTS:
    fputc('[', f);
    for (int i = 0; i < a->n; i++) {
      char db[96];
      fprintf(f, "%s%s", i ? ", " : "", fg_dim_str(fg_attr_dim(a, i), db, sizeof db));
    }
    fputc(']', f);
    break;
  case FG_ATTR_NONE:
    break;
  }
}

static void print_use(FILE *f, const namer *nm, const fg_value *v) {
  const char *s = v->id >= 0 ? nm->name[v->id] : NULL;
  if (s)
    fputs(s, f);
  else if (v->def && is_literal_node(v->def))
    print_literal_attr(f, &v->def->attrs[0]);
  else
    fputs("<undefined>", f); /* a broken graph; the verifier says why */
}

static void print_type(FILE *f, const fg_type *t) {
  fputs(fg_dtype_name(t->dtype), f);
  if (t->scalar)
    return;
  fputc('[', f);
  for (int i = 0; i < t->rank; i++) {
    if (i)
      fputc(',', f);
    if (t->dims[i].sym)
      fputs(t->dims[i].sym, f);
    else
      fprintf(f, "%" PRId64, t->dims[i].size);
  }
  fputc(']', f);
  if (t->has_layout) {
    fputs(" layout=[", f);
    for (int i = 0; i < t->rank; i++)
      fprintf(f, "%s%d", i ? "," : "", t->layout[i]);
    fputc(']', f);
  }
}

static void print_node(FILE *f, const namer *nm, const fg_node *n) {
  fputs("  ", f);
  for (int i = 0; i < n->nout; i++) {
    if (i)
      fputs(", ", f);
    fputs(nm->name[n->out[i]->id], f);
  }
  fputs(" = ", f);
  if (is_literal_node(n)) {
    print_literal_attr(f, &n->attrs[0]);
    fputc('\n', f);
    return;
  }
  fprintf(f, "%s(", n->op->name);
  int first = 1;
  for (int i = 0; i < n->nin; i++, first = 0) {
    if (!first)
      fputs(", ", f);
    print_use(f, nm, n->in[i]);
  }
  /* iota(T): its length (attribute `length`, one entry) as the operand */
  int len_at = n->op->code == FG_OP_IOTA && !n->nin ? fg_op_attr_index(n->op, "length") : -1;
  if (len_at >= 0 && n->attrs[len_at].kind == FG_ATTR_INTS && n->attrs[len_at].n == 1) {
    char db[96];
    fputs(fg_dim_str(fg_attr_dim(&n->attrs[len_at], 0), db, sizeof db), f);
    first = 0;
  } else {
    len_at = -1;
  }
  for (int i = 0; i < n->op->nattrs; i++) {
    if (n->attrs[i].kind == FG_ATTR_NONE || i == len_at)
      continue;
    fprintf(f, "%s%s=", first ? "" : ", ", n->op->attrs[i].name);
    print_literal_attr(f, &n->attrs[i]);
    first = 0;
  }
  fputs(")\n", f);
}

/* The size clause: every size that was declared or whose facts are not
 * the defaults, in table order, each with its facts that are not the
 * defaults ("T", "T: 1..64", "T: %8", "T: 1..64 %8"); nothing when there
 * is no such size. */
static void print_sizes(FILE *f, const fg_graph *g) {
  int n = 0;
  for (int i = 0; i < g->nsyms; i++) {
    const fg_sym *s = &g->syms[i];
    if (s->loc.line <= 0 && fg_sym_is_default(s))
      continue;
    fprintf(f, "%s%s", n++ ? ", " : "<", s->name);
    bool range = s->min != FG_SYM_DEFAULT_MIN || s->max != FG_SYM_DEFAULT_MAX;
    if (range || s->div != 1)
      fputs(":", f);
    if (range)
      fprintf(f, " %" PRId64 "..%" PRId64, s->min, s->max);
    if (s->div != 1)
      fprintf(f, " %%%" PRId64, s->div);
  }
  if (n)
    fputc('>', f);
}

void fg_print_graph(FILE *f, const fg_graph *g) {
  namer nm;
  namer_init(&nm, g);
  fprintf(f, "graph %s", g->name);
  print_sizes(f, g);
  fputc('(', f);
  for (int i = 0; i < g->nparams; i++) {
    fprintf(f, "%s%s: ", i ? ", " : "", nm.name[g->params[i]->id]);
    print_type(f, &g->params[i]->type);
  }
  fputs(") {\n", f);
  for (const fg_node *n = g->first; n; n = n->next) {
    /* unnamed literals are printed at their uses */
    if (is_literal_node(n) && !nm.name[n->out[0]->id])
      continue;
    print_node(f, &nm, n);
  }
  fputs("  return", f);
  for (int i = 0; i < g->nresults; i++) {
    fputs(i ? ", " : " ", f);
    print_use(f, &nm, g->results[i]);
    if (fg_result_into(g, i) >= 0)
      fprintf(f, " -> %s", nm.name[g->params[g->result_into[i]]->id]);
  }
  fputs("\n}\n", f);
  namer_free(&nm);
}

void fg_print_module(FILE *f, const fg_module *m) {
  for (int i = 0; i < m->ngraphs; i++) {
    if (i)
      fputc('\n', f);
    fg_print_graph(f, m->graphs[i]);
  }
}
