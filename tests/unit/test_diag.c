/* Diagnostics: input errors and compiler bugs kept apart. fg_error counts an
 * input error (exit 1); fg_internal_error a bug (exit 3, "internal error"),
 * whichever stage finds it: here the verifier (which the pass pipeline runs
 * after every pass) on a graph a pass left inconsistent. */
#include <string.h>

#include "check.h"
#include "diag.h"
#include "exit_status.h"
#include "parse.h"
#include "infer.h"

static fg_module *parse(const char *src, fg_diag *d) {
  fg_diag_init(d, "t.fg", src, strlen(src), NULL);
  return fg_parse("t.fg", src, strlen(src), d);
}

int main(void) {
  const char *src = "graph g(x: f32[4]) {\n  return neg(x)\n}\n";
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  CHECK(fg_diag_status(&d) == FG_EXIT_OK);
  fg_error(&d, (fg_loc){2, 10}, "bad %s", "input");
  CHECK(fg_diag_status(&d) == FG_EXIT_INPUT);
  CHECK(d.buf && strstr(d.buf, "t.fg:2:10: error: bad input\n  return neg(x)\n         ^\n"));
  fg_internal_error(&d, (fg_loc){2, 10}, "broken %d", 7);
  CHECK(fg_diag_status(&d) == FG_EXIT_INTERNAL);
  CHECK(d.buf && strstr(d.buf, "t.fg:2:10: internal error: broken 7\n"));
  CHECK(d.nerrors == 2 && d.ninternal == 1);
  fg_diag_free(&d);

  /* A graph whose result type disagrees with inference: the verifier calls
   * it a bug in fusec (status 3), not an error in the user's graph. */
  fg_module *m = parse(src, &d);
  CHECK(m && m->ngraphs == 1 && d.nerrors == 0);
  if (m) {
    fg_graph *g = m->graphs[0];
    fg_value *r = g->results[0];
    CHECK(r->def != NULL);
    r->type.dtype = FG_F64; /* what a buggy pass might do */
    CHECK(!fg_verify_graph(g, &d));
    CHECK(fg_diag_status(&d) == FG_EXIT_INTERNAL);
    CHECK_MSG(d.buf && strstr(d.buf, "internal error: result 0 of 'neg' has type"), "%s",
              d.buf ? d.buf : "");
    fg_diag_free(&d);
    fg_module_free(m);
  }
  printf("%d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
