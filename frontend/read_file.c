/* fg_read_file (parse.h): the whole file in memory, for the lexer and for
 * the caret lines of diagnostics. Works on pipes too (no size from stat). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

char *fg_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    errno = ENOMEM;
    return NULL;
  }
  for (;;) {
    if (cap - n < 2) {
      char *nb = cap > ((size_t)-1) / 2 ? NULL : realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0)
      break;
  }
  if (ferror(f)) { /* e.g. EISDIR for a directory; errno is fread's */
    int e = errno ? errno : EIO;
    free(buf);
    fclose(f);
    errno = e;
    return NULL;
  }
  fclose(f);
  buf[n] = 0;
  *len = n;
  return buf;
}
