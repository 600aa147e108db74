#include "diag.h"

#include "exit_status.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void fg_diag_init(fg_diag *d, const char *path, const char *src, size_t len, FILE *out) {
  memset(d, 0, sizeof *d);
  d->path = path ? path : "<input>";
  d->src = src;
  d->src_len = len;
  d->out = out;
}

void fg_diag_free(fg_diag *d) {
  free(d->buf);
  d->buf = NULL;
  d->buf_len = d->buf_cap = 0;
}

static void emit(fg_diag *d, const char *s, size_t n) {
  if (d->out) {
    fwrite(s, 1, n, d->out);
    return;
  }
  if (d->buf_len + n + 1 > d->buf_cap) {
    size_t cap = d->buf_cap ? d->buf_cap : 256;
    while (cap < d->buf_len + n + 1)
      cap *= 2;
    char *nb = realloc(d->buf, cap);
    if (!nb)
      return;
    d->buf = nb;
    d->buf_cap = cap;
  }
  memcpy(d->buf + d->buf_len, s, n);
  d->buf_len += n;
  d->buf[d->buf_len] = 0;
}

static void emitf(fg_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emitf(fg_diag *d, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  emit(d, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The source line, with at most WINDOW bytes shown around the column so a
 * megabyte-long line stays readable; unprintable bytes become '?'. */
enum { WINDOW = 160 };

static void show_line(fg_diag *d, fg_loc loc) {
  if (!d->src || loc.line <= 0)
    return;
  const char *p = d->src, *end = d->src + d->src_len;
  for (int l = 1; l < loc.line && p < end; p++)
    if (*p == '\n')
      l++;
  const char *eol = p;
  while (eol < end && *eol != '\n')
    eol++;
  size_t len = (size_t)(eol - p);
  size_t col = loc.col > 0 ? (size_t)loc.col - 1 : 0;
  if (col > len)
    col = len;
  size_t start = 0;
  if (len > WINDOW && col > WINDOW / 2)
    start = col - WINDOW / 2;
  size_t stop = start + WINDOW < len ? start + WINDOW : len;
  char line[WINDOW + 8], caret[WINDOW + 8];
  size_t n = 0, c = 0;
  if (start > 0) {
    memcpy(line, "...", 3);
    memcpy(caret, "   ", 3);
    n = c = 3;
  }
  for (size_t i = start; i < stop; i++) {
    unsigned char ch = (unsigned char)p[i];
    line[n++] = ch == '\t' ? '\t' : (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    if (i < col)
      caret[c++] = ch == '\t' ? '\t' : ' ';
  }
  if (stop < len) {
    memcpy(line + n, "...", 3);
    n += 3;
  }
  line[n] = 0;
  caret[c++] = '^';
  caret[c] = 0;
  emitf(d, "%s\n%s\n", line, caret);
}

static void report(fg_diag *d, const char *kind, fg_loc loc, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (loc.line > 0)
    emitf(d, "%s:%d:%d: %s: %s\n", d->path, loc.line, loc.col, kind, msg);
  else
    emitf(d, "%s: %s: %s\n", d->path, kind, msg);
  show_line(d, loc);
}

/* Counts an error (internal: a compiler bug) and reports it while under
 * the limit. */
static void count_and_report(fg_diag *d, bool internal, fg_loc loc, const char *fmt, va_list ap) {
  int max = d->max_errors ? d->max_errors : 20;
  d->nerrors++;
  d->ninternal += internal;
  if (d->nerrors <= max)
    report(d, internal ? "internal error" : "error", loc, fmt, ap);
}

void fg_error(fg_diag *d, fg_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  count_and_report(d, false, loc, fmt, ap);
  va_end(ap);
}

void fg_internal_error(fg_diag *d, fg_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  count_and_report(d, true, loc, fmt, ap);
  va_end(ap);
}

int fg_diag_status(const fg_diag *d) {
  return d->ninternal ? FG_EXIT_INTERNAL : d->nerrors ? FG_EXIT_INPUT : FG_EXIT_OK;
}

void fg_note(fg_diag *d, fg_loc loc, const char *fmt, ...) {
  int max = d->max_errors ? d->max_errors : 20;
  if (d->nerrors > max)
    return;
  va_list ap;
  va_start(ap, fmt);
  report(d, "note", loc, fmt, ap);
  va_end(ap);
}
