/* libFuzzer harness for the frontend: any bytes must parse or fail with a
 * diagnostic, without crashing, leaking or hanging. Parsed modules are also
 * printed and re-parsed, which must succeed and print the same text (the
 * printer's round-trip promise). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "parse.h"
#include "print.h"

/* Prints m into a malloc'd buffer. */
static char *print_to_string(const fg_module *m, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f)
    abort();
  fg_print_module(f, m);
  fclose(f);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fg_diag d;
  fg_diag_init(&d, "fuzz.fg", (const char *)data, size, NULL); /* collect, don't print */
  fg_module *m = fg_parse("fuzz.fg", (const char *)data, size, &d);
  if (m) {
    size_t n1, n2;
    char *t1 = print_to_string(m, &n1);
    fg_diag d2;
    fg_diag_init(&d2, "printed.fg", t1, n1, NULL);
    fg_module *m2 = fg_parse("printed.fg", t1, n1, &d2);
    if (!m2) {
      fprintf(stderr, "printed module does not parse:\n%s\n---\n%s", t1, d2.buf ? d2.buf : "");
      abort();
    }
    char *t2 = print_to_string(m2, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0) {
      fprintf(stderr, "print is not stable:\n%s\n---\n%s", t1, t2);
      abort();
    }
    free(t2);
    fg_module_free(m2);
    fg_diag_free(&d2);
    free(t1);
    fg_module_free(m);
  } else if (d.nerrors == 0) {
    fprintf(stderr, "fg_parse failed without a diagnostic\n");
    abort();
  }
  fg_diag_free(&d);
  return 0;
}
