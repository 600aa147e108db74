/* Frontend unit tests through fg_parse: every example and test graph parses
 * and prints stably, plus API-level checks of what the parser builds (types,
 * layouts, symbolic dims, weak literals, attributes) and of the printer. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "op.h"
#include "parse.h"
#include "print.h"

static int passed, failed;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) {                                                                                    \
      passed++;                                                                                    \
    } else {                                                                                       \
      failed++;                                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
    }                                                                                              \
  } while (0)

/* Parses text, collecting diagnostics into *diag_out (malloc'd, may be NULL). */
static fg_module *parse_str(const char *src, char **diag_out) {
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &d);
  if (diag_out)
    *diag_out = d.buf ? strdup(d.buf) : NULL;
  fg_diag_free(&d);
  return m;
}

static char *print_str(const fg_module *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fg_print_module(f, m);
  fclose(f);
  return buf;
}

/* parse -> print -> parse -> print gives the same text twice. */
static void check_round_trip(const char *path, const char *src, size_t len) {
  fg_diag d;
  fg_diag_init(&d, path, src, len, NULL);
  fg_module *m = fg_parse(path, src, len, &d);
  if (!m) {
    fprintf(stderr, "%s does not parse:\n%s", path, d.buf ? d.buf : "(no diagnostic)\n");
    failed++;
    fg_diag_free(&d);
    return;
  }
  passed++;
  char *p1 = print_str(m);
  char *e2 = NULL;
  fg_module *m2 = parse_str(p1, &e2);
  if (!m2) {
    fprintf(stderr, "%s: printed text does not parse:\n%s\n%s", path, e2 ? e2 : "", p1);
    failed++;
  } else {
    char *p2 = print_str(m2);
    if (strcmp(p1, p2) != 0) {
      fprintf(stderr, "%s: printing is not stable:\n%s\n---\n%s", path, p1, p2);
      failed++;
    } else {
      passed++;
    }
    CHECK(m2->ngraphs == m->ngraphs);
    free(p2);
    fg_module_free(m2);
  }
  free(e2);
  free(p1);
  fg_module_free(m);
  fg_diag_free(&d);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_dir(const char *rel) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", FG_SOURCE_DIR, rel);
  DIR *dp = opendir(dir);
  if (!dp) {
    fprintf(stderr, "note: %s not found, skipped\n", dir);
    return;
  }
  char *names[1024];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)) && n < 1024) {
    size_t l = strlen(e->d_name);
    if (l > 3 && strcmp(e->d_name + l - 3, ".fg") == 0)
      names[n++] = strdup(e->d_name);
  }
  closedir(dp);
  qsort(names, (size_t)n, sizeof *names, by_name);
  for (int i = 0; i < n; i++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    size_t len;
    char *src = fg_read_file(path, &len);
    CHECK(src != NULL);
    if (src)
      check_round_trip(path, src, len);
    free(src);
    free(names[i]);
  }
}

static const fg_node *nth_node(const fg_graph *g, const char *op, int k) {
  for (const fg_node *n = g->first; n; n = n->next)
    if (strcmp(n->op->name, op) == 0 && k-- == 0)
      return n;
  return NULL;
}

static void test_types(void) {
  fg_module *m =
      parse_str("graph g(x: f32[N,8] layout=[1,0], eps: f32, z: f16[], w: bf16[2,3,4]) {\n"
                "  return x, eps, z, w\n}\n",
                NULL);
  CHECK(m && m->ngraphs == 1);
  if (!m)
    return;
  const fg_graph *g = m->graphs[0];
  CHECK(g->nparams == 4);
  const fg_type *x = &g->params[0]->type;
  CHECK(x->dtype == FG_F32 && x->rank == 2 && !x->scalar);
  CHECK(x->dims[0].sym && strcmp(x->dims[0].sym, "N") == 0 && x->dims[0].size == -1);
  CHECK(!x->dims[1].sym && x->dims[1].size == 8);
  CHECK(x->has_layout && x->layout[0] == 1 && x->layout[1] == 0);
  const fg_value *eps = g->params[1];
  CHECK(eps->type.scalar && eps->type.rank == 0 && eps->weak && eps->param_index == 1);
  const fg_type *z = &g->params[2]->type;
  CHECK(z->dtype == FG_F16 && z->rank == 0 && !z->scalar && !z->has_layout);
  const fg_type *w = &g->params[3]->type;
  CHECK(w->rank == 3 && w->dims[2].size == 4 && !w->has_layout && !g->params[3]->weak);
  CHECK(g->nresults == 4 && g->results[1] == eps);
  CHECK(strcmp(g->params[0]->name, "x") == 0 && g->params[0]->loc.line == 1 &&
        g->params[0]->loc.col == 9);
  fg_module_free(m);
}

static void test_literals_and_attrs(void) {
  fg_module *m = parse_str("graph g(x: bf16[4,8]) {\n"
                           "  a = add(x, 1e-5)\n"
                           "  b = mul(a, -3)\n"
                           "  c = 2.0\n"
                           "  y = x\n"
                           "  v, mu = var_mean(y, dims=[1], correction=0, keepdim=true)\n"
                           "  p, q = split(x, sizes=[3, 5], dim=1)\n"
                           "  k = clamp(x, min=0, max=1.5)\n"
                           "  return a, b, c, v, mu, p, q, k, where(true, x, c)\n}\n",
                           NULL);
  CHECK(m != NULL);
  if (!m)
    return;
  const fg_graph *g = m->graphs[0];
  const fg_node *add = nth_node(g, "add", 0);
  double lit = 0;
  CHECK(add && fg_value_is_literal(add->in[1], &lit) && lit == 1e-5);
  CHECK(add && add->in[1]->weak && add->in[1]->type.scalar && add->in[1]->type.dtype == FG_F32);
  CHECK(add && add->out[0]->type.dtype == FG_BF16); /* weak literal does not widen */
  CHECK(add && add->loc.line == 2 && add->loc.col == 7);
  const fg_node *mul = nth_node(g, "mul", 0);
  CHECK(mul && mul->in[1]->type.dtype == FG_I64 && mul->in[1]->def->attrs[0].kind == FG_ATTR_INT &&
        mul->in[1]->def->attrs[0].i == -3);
  CHECK(g->results[2]->name && strcmp(g->results[2]->name, "c") == 0 &&
        fg_value_is_literal(g->results[2], &lit) && lit == 2.0);
  const fg_node *vm = nth_node(g, "var_mean", 0);
  CHECK(vm && vm->nout == 2 && vm->in[0] == g->params[0]); /* y is an alias of x */
  CHECK(vm && strcmp(vm->out[0]->name, "v") == 0 && strcmp(vm->out[1]->name, "mu") == 0);
  const fg_attr *corr = vm ? fg_node_attr(vm, "correction") : NULL;
  CHECK(corr && corr->kind == FG_ATTR_FLOAT && corr->f == 0.0 && corr->loc.line == 6);
  CHECK(vm && fg_attr_bool(vm, "keepdim") && vm->out[1]->type.rank == 2 &&
        vm->out[1]->type.dims[1].size == 1);
  const fg_node *sp = nth_node(g, "split", 0);
  CHECK(sp && sp->nout == 2 && sp->out[1]->type.dims[1].size == 5);
  const fg_node *cl = nth_node(g, "clamp", 0);
  CHECK(cl && fg_node_attr(cl, "min")->kind == FG_ATTR_INT &&
        fg_node_attr(cl, "max")->kind == FG_ATTR_FLOAT);
  const fg_node *wh = nth_node(g, "where", 0);
  CHECK(wh && wh->in[0]->type.dtype == FG_BOOL && wh->in[2] == g->results[2]);
  CHECK(g->nresults == 9);
  fg_module_free(m);
}

static void test_errors(void) {
  char *e = NULL;
  fg_module *m = parse_str("graph g(x: f32[4]) {\n  return add(x, q)\n}\n", &e);
  CHECK(m == NULL && e && strstr(e, "t.fg:2:17: error: use of undefined name 'q'\n"));
  CHECK(e && strstr(e, "\n  return add(x, q)\n                ^\n"));
  free(e);
  /* one error only, even when more follow */
  m = parse_str("graph g(x: f33[4], y: f34[4]) {\n  return x\n}\n", &e);
  CHECK(m == NULL && e && strstr(e, "f33") && !strstr(e, "f34'"));
  free(e);
  /* binary input with NULs, no NUL terminator needed */
  const char bin[] = {'g', 'r', 0, (char)0xff, '(', '[', '\n'};
  fg_diag d;
  fg_diag_init(&d, "b.fg", bin, sizeof bin, NULL);
  CHECK(fg_parse("b.fg", bin, sizeof bin, &d) == NULL && d.nerrors == 1);
  fg_diag_free(&d);
  /* empty input: an error at 1:1 (an artifact needs a graph) */
  m = parse_str("# nothing\n\n", &e);
  CHECK(m == NULL && e && strstr(e, "t.fg:1:1: error: no graph in the file"));
  free(e);
  /* names longer than FG_MAX_NAME: the loader would refuse the artifact */
  char src[600];
  snprintf(src, sizeof src, "graph %0*d(x: f32[4]) {\n  return x\n}\n", FG_MAX_NAME + 1, 0);
  src[6] = 'g';
  m = parse_str(src, &e);
  CHECK(m == NULL && e &&
        strstr(e, "t.fg:1:7: error: graph name of 201 characters; at most 200 are supported"));
  free(e);
  snprintf(src, sizeof src, "graph g(x%0*d: f32[4]) {\n  return x\n}\n", FG_MAX_NAME, 0);
  m = parse_str(src, &e);
  CHECK(m == NULL && e && strstr(e, "t.fg:1:9: error: parameter name of 201 characters"));
  free(e);
  snprintf(src, sizeof src, "graph %0*d(x: f32[4]) {\n  return x\n}\n", FG_MAX_NAME, 0);
  src[6] = 'g';
  m = parse_str(src, &e);
  CHECK(m && m->ngraphs == 1);
  fg_module_free(m);
  free(e);
}

static void test_format_float(void) {
  static const struct {
    double v;
    const char *s;
  } cases[] = {
      {0.1, "0.1"},
      {1e-5, "1e-5"},
      {2.0, "2.0"},
      {-0.0, "-0.0"},
      {1e300, "1e300"},
      {-2.5, "-2.5"},
      {123456789.125, "123456789.125"},
      {1e16, "1e16"},
      {0.0, "0.0"},
  };
  char buf[64];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    fg_format_float(buf, sizeof buf, cases[i].v);
    if (strcmp(buf, cases[i].s) != 0)
      fprintf(stderr, "fg_format_float(%.17g) = %s, want %s\n", cases[i].v, buf, cases[i].s);
    CHECK(strcmp(buf, cases[i].s) == 0);
  }
  fg_format_float(buf, sizeof buf, INFINITY);
  CHECK(strcmp(buf, "inf") == 0);
  fg_format_float(buf, sizeof buf, -INFINITY);
  CHECK(strcmp(buf, "-inf") == 0);
  fg_format_float(buf, sizeof buf, NAN);
  CHECK(strcmp(buf, "nan") == 0);
  /* shortest round trip */
  double hard[] = {1.0 / 3, 5e-324, 1.7976931348623157e308, 0.30000000000000004, 3.14159f};
  for (size_t i = 0; i < sizeof hard / sizeof *hard; i++) {
    fg_format_float(buf, sizeof buf, hard[i]);
    CHECK(strtod(buf, NULL) == hard[i] && strpbrk(buf, ".e"));
  }
}

/* A graph built through the API (as a pass would): unnamed values get
 * fresh names that avoid the graph's own names. */
static void test_printer_fresh_names(void) {
  fg_graph *g = fg_graph_new("built");
  int64_t sz[1] = {4};
  fg_value *x = fg_add_param(g, "t0", fg_type_tensor(FG_F32, 1, sz), (fg_loc){0, 0});
  fg_node *n1 = fg_node_new(g, fg_op_get(FG_OP_NEG), 1, &x, 1, (fg_loc){0, 0});
  n1->out[0]->type = x->type;
  fg_value *one = fg_literal_float(g, 1.0, (fg_loc){0, 0});
  fg_value *ops[2] = {n1->out[0], one};
  fg_node *n2 = fg_node_new(g, fg_op_get(FG_OP_ADD), 2, ops, 1, (fg_loc){0, 0});
  n2->out[0]->type = x->type;
  n2->out[0]->name = "t2";
  fg_set_results(g, 1, &n2->out[0], NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fg_print_graph(f, g);
  fclose(f);
  const char *want =
      "graph built(t0: f32[4]) {\n  t1 = neg(t0)\n  t2 = add(t1, 1.0)\n  return t2\n}\n";
  if (strcmp(buf, want) != 0)
    fprintf(stderr, "got:\n%s", buf);
  CHECK(strcmp(buf, want) == 0);
  free(buf);
  fg_graph_free(g);
}

int main(void) {
  check_dir("examples");
  check_dir("tests/graphs");
  check_dir("tests/golden/frontend");
  test_types();
  test_literals_and_attrs();
  test_errors();
  test_format_float();
  test_printer_fresh_names();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
