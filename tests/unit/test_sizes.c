/* The graph's size table (ir.h: fg_sym, fg_graph_sym): what the parser
 * fills it with and in which order, interned names, the facts that clone
 * and specialize carry, the binding checks, the verifier's checks of
 * tables that code built, and the printer's clause for built graphs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "diag.h"
#include "infer.h"
#include "parse.h"
#include "print.h"

static const char *const src = "graph g<T: 8..64 %8, B>(x: f32[B, T, N], y: f32[M, T]) {\n"
                               "  z = add(y, 1.0)\n"
                               "  return x, z\n"
                               "}\n";

static fg_module *parse(void) {
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &d);
  CHECK_MSG(m, "%s", d.buf ? d.buf : "");
  fg_diag_free(&d);
  return m;
}

static bool facts(const fg_sym *s, int64_t min, int64_t max, int64_t div) {
  return s && s->min == min && s->max == max && s->div == div;
}

/* Every symbolic dim of g's parameters and results points to its entry. */
static bool interned(const fg_graph *g) {
  for (int i = 0; i < g->nparams; i++)
    for (int k = 0; k < g->params[i]->type.rank; k++) {
      const char *s = g->params[i]->type.dims[k].sym;
      if (s && (!fg_graph_sym(g, s) || fg_graph_sym(g, s)->name != s))
        return false;
    }
  for (int i = 0; i < g->nresults; i++)
    for (int k = 0; k < g->results[i]->type.rank; k++) {
      const char *s = g->results[i]->type.dims[k].sym;
      if (s && (!fg_graph_sym(g, s) || fg_graph_sym(g, s)->name != s))
        return false;
    }
  return true;
}

static void test_parsed_table(void) {
  fg_module *m = parse();
  if (!m)
    return;
  const fg_graph *g = m->graphs[0];
  /* declared ones in clause order, then the others in order of first use */
  CHECK(g->nsyms == 4);
  const char *order[] = {"T", "B", "N", "M"};
  for (int i = 0; i < 4 && i < g->nsyms; i++)
    CHECK(strcmp(g->syms[i].name, order[i]) == 0);
  const fg_sym *t = fg_graph_sym(g, "T"), *b = fg_graph_sym(g, "B"), *n = fg_graph_sym(g, "N");
  CHECK(facts(t, 8, 64, 8) && t->loc.line == 1 && t->loc.col == 9);
  CHECK(facts(b, 1, 2147483647, 1) && b->loc.line == 1 && b->loc.col == 22);
  CHECK(facts(n, 1, 2147483647, 1) && n->loc.line == 0 && fg_sym_is_default(n));
  CHECK(!fg_sym_is_default(t));
  CHECK(!fg_graph_sym(g, "x") && !fg_graph_sym(g, "Q") && !fg_graph_sym(g, NULL));
  CHECK(interned(g));
  fg_module_free(m);
}

static void test_clone_and_specialize(void) {
  fg_module *m = parse();
  if (!m)
    return;
  const fg_graph *g = m->graphs[0];
  fg_graph *c = fg_graph_clone(g);
  CHECK(c && c->nsyms == g->nsyms);
  for (int i = 0; c && i < c->nsyms && i < g->nsyms; i++) {
    const fg_sym *a = &g->syms[i], *b = &c->syms[i];
    CHECK(strcmp(a->name, b->name) == 0 && a->name != b->name);
    CHECK(facts(b, a->min, a->max, a->div) && a->loc.line == b->loc.line &&
          a->loc.col == b->loc.col);
  }
  CHECK(c && interned(c));
  fg_graph_free(c);

  /* binding T keeps the facts of the others, in order */
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  const char *names[] = {"T", "Unknown"};
  int64_t values[] = {16, 5};
  fg_graph *s = fg_graph_specialize(g, 2, names, values, &d);
  CHECK(s && s->nsyms == 3 && !fg_graph_sym(s, "T"));
  CHECK(s && strcmp(s->syms[0].name, "B") == 0 && s->syms[0].loc.line == 1);
  CHECK(s && strcmp(s->syms[1].name, "N") == 0 && strcmp(s->syms[2].name, "M") == 0);
  CHECK(s && s->params[1]->type.dims[1].size == 16 && !s->params[1]->type.dims[1].sym);
  CHECK(s && interned(s) && fg_verify_graph(s, &d));
  /* specializing the specialized graph again binds the rest */
  const char *rest[] = {"B", "N", "M"};
  int64_t rvals[] = {2, 3, 4};
  fg_graph *s2 = s ? fg_graph_specialize(s, 3, rest, rvals, &d) : NULL;
  CHECK(s2 && s2->nsyms == 0 && fg_type_is_static(&s2->results[1]->type));
  fg_graph_free(s2);
  fg_graph_free(s);
  CHECK(d.nerrors == 0);
  fg_diag_free(&d);

  /* values that break the facts */
  struct {
    const char *name;
    int64_t value;
    const char *want;
  } bad[] = {
      {"T", 12, "t.fg: error: size T = 12 is not a multiple of 8 (declared at t.fg:1:9)\n"},
      {"T", 72, "t.fg: error: size T = 72 is outside 8..64 (declared at t.fg:1:9)\n"},
      {"T", 0, "t.fg: error: size T = 0 is outside 8..64 (declared at t.fg:1:9)\n"},
      {"B", 0, "t.fg: error: size B = 0 is outside 1..2147483647 (declared at t.fg:1:22)\n"},
      {"N", 2147483648,
       "t.fg: error: size N = 2147483648 is outside 1..2147483647 (the default: the graph "
       "declares nothing about N)\n"},
      {"M", -1,
       "t.fg: error: size M = -1 is outside 1..2147483647 (the default: the graph declares "
       "nothing about M)\n"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
    fg_graph *r = fg_graph_specialize(g, 1, &bad[i].name, &bad[i].value, &d);
    CHECK(!r && d.nerrors == 1 && d.ninternal == 0);
    CHECK_MSG(d.buf && strcmp(d.buf, bad[i].want) == 0, "got %s", d.buf ? d.buf : "nothing");
    fg_graph_free(r);
    fg_diag_free(&d);
  }
  fg_module_free(m);
}

static void test_range_has_multiple(void) {
  const int64_t big = (int64_t)1 << 62;
  CHECK(fg_range_has_multiple(0, 0, 8));
  CHECK(fg_range_has_multiple(8, 8, 8));
  CHECK(!fg_range_has_multiple(1, 7, 8));
  CHECK(fg_range_has_multiple(1, 8, 8));
  CHECK(!fg_range_has_multiple(9, 15, 16));
  CHECK(fg_range_has_multiple(1, big, big));
  CHECK(!fg_range_has_multiple(1, big - 1, big));
  CHECK(!fg_range_has_multiple(5, big, INT64_MAX)); /* no overflow */
  CHECK(fg_range_has_multiple(0, big, INT64_MAX));
}

/* A one-parameter graph x: f32[T] that returns x, with T's entry added by
 * hand first when min >= 0. */
static fg_graph *built(int64_t min, int64_t max, int64_t div, fg_loc loc) {
  fg_graph *g = fg_graph_new("built");
  if (min >= 0) {
    CHECK(fg_graph_add_sym(g, "T", min, max, div, loc) != NULL);
    CHECK(fg_graph_add_sym(g, "T", 1, 2, 1, loc) == NULL); /* there already */
  }
  fg_type t = fg_type_tensor(FG_F32, 1, (int64_t[]){0});
  t.dims[0].size = -1;
  t.dims[0].sym = "T";
  fg_value *x = fg_add_param(g, "x", t, (fg_loc){0, 0});
  fg_set_results(g, 1, &x, NULL);
  return g;
}

static bool verify_internal(fg_graph *g, const char *want) {
  fg_diag d;
  fg_diag_init(&d, "b.fg", NULL, 0, NULL);
  bool ok = fg_verify_graph(g, &d);
  bool found = d.buf && strstr(d.buf, want);
  if (!found)
    fprintf(stderr, "verifier said: %s", d.buf ? d.buf : "nothing\n");
  bool r = !ok && d.ninternal == 1 && found;
  fg_diag_free(&d);
  return r;
}

static void test_verifier(void) {
  fg_graph *g = built(-1, 0, 0, (fg_loc){0, 0}); /* fg_add_param adds T */
  fg_diag d;
  fg_diag_init(&d, "b.fg", NULL, 0, NULL);
  CHECK(g->nsyms == 1 && fg_sym_is_default(&g->syms[0]) && g->syms[0].loc.line == 0);
  CHECK(g->params[0]->type.dims[0].sym == g->syms[0].name);
  CHECK(fg_verify_graph(g, &d) && d.nerrors == 0);
  fg_diag_free(&d);
  /* a dim that does not point to its entry */
  g->params[0]->type.dims[0].sym = "T";
  CHECK(verify_internal(g, "size T of parameter 0 is not interned in the graph's size table"));
  g->params[0]->type.dims[0].sym = "U";
  CHECK(verify_internal(g, "size U of parameter 0 is missing from the graph's size table"));
  fg_graph_free(g);

  g = built(9, 8, 1, (fg_loc){0, 0});
  CHECK(verify_internal(g, "size T of the graph's size table has an empty or negative range"));
  fg_graph_free(g);
  g = built(1, FG_SYM_MAX_BOUND + 1, 1, (fg_loc){0, 0});
  CHECK(verify_internal(g, "has a range past 2^62"));
  fg_graph_free(g);
  g = built(1, 8, 0, (fg_loc){0, 0});
  CHECK(verify_internal(g, "has a divisor below 1"));
  fg_graph_free(g);
  g = built(1, 7, 8, (fg_loc){0, 0});
  CHECK(verify_internal(g, "has a range that holds no multiple of its divisor"));
  fg_graph_free(g);
  g = built(1, 8, 1, (fg_loc){0, 0});
  CHECK(fg_graph_add_sym(g, "Unused", 1, 8, 1, (fg_loc){0, 0}) != NULL);
  CHECK(verify_internal(g, "size Unused of the graph's size table is used by no parameter"));
  fg_graph_free(g);
}

/* Built graphs: undeclared sizes with facts that are not the defaults are
 * printed too, so that print -> parse keeps them. */
static void test_printer(void) {
  fg_graph *g = built(2, 8, 2, (fg_loc){0, 0});
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fg_print_graph(f, g);
  fclose(f);
  const char *want = "graph built<T: 2..8 %2>(x: f32[T]) {\n  return x\n}\n";
  CHECK_MSG(strcmp(buf, want) == 0, "got %s", buf);
  free(buf);
  fg_graph_free(g);
}

/* Many sizes: the table and its index grow; every name is found. */
static void test_many(void) {
  fg_graph *g = fg_graph_new("many");
  enum { N = 3000 };
  char name[32];
  for (int i = 0; i < N; i++) {
    fg_type t = fg_type_tensor(FG_F32, 2, (int64_t[]){0, 0});
    snprintf(name, sizeof name, "S%d", i);
    t.dims[0].size = t.dims[1].size = -1;
    t.dims[0].sym = name;
    t.dims[1].sym = "S0";
    fg_add_param(g, "p", t, (fg_loc){0, 0});
  }
  CHECK(g->nsyms == N);
  int found = 0;
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "S%d", i);
    const fg_sym *s = fg_graph_sym(g, name);
    found += s && s == &g->syms[i] && g->params[i]->type.dims[0].sym == s->name;
  }
  CHECK(found == N);
  fg_graph_free(g);
}

int main(void) {
  test_parsed_table();
  test_clone_and_specialize();
  test_range_has_multiple();
  test_verifier();
  test_printer();
  test_many();
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
