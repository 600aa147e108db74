/* Diagnostics in clang's form: "file:line:col: error: message", then the
 * source line and a caret under the column. Compiler bugs go through
 * fg_internal_error ("file:line:col: internal error: message"). Errors are counted; they are
 * written to `out` (stderr by default) or collected into a buffer. */
#ifndef FG_DIAG_H
#define FG_DIAG_H
#include <stdio.h>

#include "ir.h"

typedef struct fg_diag {
  const char *path; /* file name shown in messages */
  const char *src;  /* whole source text, for the caret line; may be NULL */
  size_t src_len;
  FILE *out; /* NULL: collect into buf */
  char *buf; /* malloc'd collected text (when out is NULL) */
  size_t buf_len, buf_cap;
  int nerrors;
  int ninternal;  /* of which internal errors (compiler bugs) */
  int max_errors; /* stop recording after this many (0: 20) */
} fg_diag;

void fg_diag_init(fg_diag *d, const char *path, const char *src, size_t len, FILE *out);
void fg_diag_free(fg_diag *d);
void fg_error(fg_diag *d, fg_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A compiler bug found at loc: reported as "internal error" (whichever
 * stage finds it), counted in nerrors and ninternal; the tools exit 3. */
void fg_internal_error(fg_diag *d, fg_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The exit status for what d has seen: 3 after an internal error, else 1
 * after an error, else 0. */
int fg_diag_status(const fg_diag *d);
void fg_note(fg_diag *d, fg_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
