/* The .fg frontend: text to verified SSA IR. */
#ifndef FG_PARSE_H
#define FG_PARSE_H
#include <stddef.h>

#include "diag.h"
#include "ir.h"

/* Parses and verifies every graph in src[0..len). On any error returns NULL
 * after reporting "path:line:col: error: ..." with the source line and a
 * caret to d. Never crashes, whatever the bytes (NUL, binary, deep nesting,
 * huge names). */
fg_module *fg_parse(const char *path, const char *src, size_t len, fg_diag *d);

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL on error
 * (with errno set). */
char *fg_read_file(const char *path, size_t *len);

#endif
