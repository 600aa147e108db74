#include "lexer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest piece of a token quoted in a message: a megabyte-long name must
 * not become a megabyte-long message. */
enum { QUOTE_MAX = 40 };

void fg_lexer_init(fg_lexer *lx, const char *src, size_t len, fg_diag *d) {
  memset(lx, 0, sizeof *lx);
  lx->src = lx->p = lx->line_start = src;
  lx->end = src + len;
  lx->line = 1;
  lx->d = d;
}

static fg_loc loc_at(const fg_lexer *lx, const char *p) {
  size_t col = (size_t)(p - lx->line_start) + 1;
  fg_loc l = {lx->line, col > 0x7fffffff ? 0x7fffffff : (int)col};
  return l;
}

static int is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_ident_char(int c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid; rejects
 * overlong forms, surrogates and code points past U+10FFFF. */
static int utf8_len(const unsigned char *p, const unsigned char *end, unsigned *cp) {
  unsigned c = p[0];
  int n;
  unsigned min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    *cp = c & 0x1f;
    min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    *cp = c & 0x0f;
    min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    *cp = c & 0x07;
    min = 0x10000;
  } else
    return 0;
  if (end - p < n)
    return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    *cp = (*cp << 6) | (p[i] & 0x3f);
  }
  if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
    return 0;
  return n;
}

static fg_token make(fg_lexer *lx, fg_tok_kind k, const char *start, const char *stop) {
  fg_token t;
  memset(&t, 0, sizeof t);
  t.kind = k;
  t.text = start;
  t.len = (size_t)(stop - start);
  t.loc = loc_at(lx, start);
  lx->p = stop;
  return t;
}

static fg_token error_tok(fg_lexer *lx, const char *at) {
  fg_token t;
  memset(&t, 0, sizeof t);
  t.kind = FG_TOK_ERROR;
  t.text = at;
  t.loc = loc_at(lx, at);
  lx->p = lx->end; /* nothing more is lexed after an error */
  return t;
}

/* Reports the byte at p as an invalid character, naming it usefully. */
static fg_token bad_char(fg_lexer *lx, const char *p) {
  unsigned char c = (unsigned char)*p;
  unsigned cp;
  fg_loc l = loc_at(lx, p);
  if (c == 0)
    fg_error(lx->d, l, "NUL byte in input");
  else if (c >= 0x80 && utf8_len((const unsigned char *)p, (const unsigned char *)lx->end, &cp))
    fg_error(lx->d, l, "invalid character U+%04X", cp);
  else if (c >= 0x80)
    fg_error(lx->d, l, "invalid UTF-8 byte 0x%02X", c);
  else if (c < 0x20 || c == 0x7f)
    fg_error(lx->d, l, "invalid character 0x%02X", c);
  else
    fg_error(lx->d, l, "invalid character '%c'", c);
  return error_tok(lx, p);
}

/* '#' to end of line. Comments may hold any bytes (even invalid UTF-8)
 * except NUL, which no text file has. */
static const char *skip_comment(fg_lexer *lx, const char *p) {
  while (p < lx->end && *p != '\n') {
    if (*p == 0)
      return p;
    p++;
  }
  return p;
}

/* Number: -?[0-9]+ ( '.' [0-9]* )? ( [eE] [+-]? [0-9]+ )?  A number running
 * straight into letters ("12abc", "1e") is one bad token, not two. Digits
 * followed by ".." are an integer (the range "1..8"), not the float "1.". */
static fg_token lex_number(fg_lexer *lx, const char *start) {
  const char *p = start, *e = lx->end;
  if (*p == '-')
    p++;
  while (p < e && is_digit(*p))
    p++;
  int is_float = 0;
  int range = p + 1 < e && p[0] == '.' && p[1] == '.';
  if (p < e && *p == '.' && !range) {
    is_float = 1;
    p++;
    while (p < e && is_digit(*p))
      p++;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    const char *q = p + 1;
    if (q < e && (*q == '+' || *q == '-'))
      q++;
    if (q < e && is_digit(*q)) {
      while (q < e && is_digit(*q))
        q++;
      p = q;
      is_float = 1;
    }
  }
  if (p < e && is_ident_char(*p) && !range) {
    const char *q = p;
    while (q < e && is_ident_char(*q))
      q++;
    int n = (int)(q - start);
    fg_error(lx->d, loc_at(lx, start), "invalid number '%.*s%s'", n > QUOTE_MAX ? QUOTE_MAX : n,
             start, n > QUOTE_MAX ? "..." : "");
    return error_tok(lx, start);
  }
  fg_token t = make(lx, is_float ? FG_TOK_FLOAT : FG_TOK_INT, start, p);
  int n = (int)(p - start);
  if (!is_float) {
    /* Accumulate as a negative number so INT64_MIN fits. */
    const char *q = start;
    int neg = *q == '-';
    if (neg)
      q++;
    int64_t v = 0;
    for (; q < p; q++) {
      int dgt = *q - '0';
      if (v < (INT64_MIN + dgt) / 10) {
        fg_error(lx->d, t.loc, "integer literal '%.*s%s' is out of range",
                 n > QUOTE_MAX ? QUOTE_MAX : n, start, n > QUOTE_MAX ? "..." : "");
        return error_tok(lx, start);
      }
      v = v * 10 - dgt;
    }
    if (!neg && v == INT64_MIN) {
      fg_error(lx->d, t.loc, "integer literal '%.*s' is out of range", n, start);
      return error_tok(lx, start);
    }
    t.i = neg ? v : -v;
    return t;
  }
  char *buf = malloc((size_t)n + 1);
  if (!buf) {
    fg_error(lx->d, t.loc, "out of memory");
    return error_tok(lx, start);
  }
  memcpy(buf, start, (size_t)n);
  buf[n] = 0;
  errno = 0;
  t.f = strtod(buf, NULL);
  free(buf);
  if (isinf(t.f)) {
    fg_error(lx->d, t.loc, "float literal '%.*s%s' is out of range", n > QUOTE_MAX ? QUOTE_MAX : n,
             start, n > QUOTE_MAX ? "..." : "");
    return error_tok(lx, start);
  }
  return t;
}

/* "..." on one line; no escapes (the language needs none). */
static fg_token lex_string(fg_lexer *lx, const char *start) {
  const char *p = start + 1;
  while (p < lx->end && *p != '"') {
    unsigned char c = (unsigned char)*p;
    unsigned cp;
    if (c == '\n')
      break;
    if (c == 0 || c == 0x7f || (c < 0x20 && c != '\t'))
      return bad_char(lx, p);
    int n = utf8_len((const unsigned char *)p, (const unsigned char *)lx->end, &cp);
    if (!n)
      return bad_char(lx, p);
    p += n;
  }
  if (p >= lx->end || *p != '"') {
    fg_error(lx->d, loc_at(lx, start), "unterminated string");
    return error_tok(lx, start);
  }
  fg_token t = make(lx, FG_TOK_STRING, start, p + 1);
  t.text = start + 1;
  t.len = (size_t)(p - start - 1);
  return t;
}

static int word_eq(const char *p, size_t n, const char *w) {
  return strlen(w) == n && memcmp(p, w, n) == 0;
}

fg_token fg_lex(fg_lexer *lx) {
  const char *p = lx->p, *e = lx->end;
  for (;;) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
      p++;
    if (p < e && *p == '#') {
      p = skip_comment(lx, p);
      if (p < e && *p == 0)
        return bad_char(lx, p);
    }
    if (p >= e) {
      fg_token t = make(lx, FG_TOK_EOF, e, e);
      return t;
    }
    if (*p != '\n')
      break;
    const char *nl = p++;
    /* The newline's column is on the line it ends. */
    fg_loc nl_loc = loc_at(lx, nl);
    lx->line++;
    lx->line_start = p;
    if (lx->nest == 0) {
      fg_token t;
      memset(&t, 0, sizeof t);
      t.kind = FG_TOK_NEWLINE;
      t.text = nl;
      t.len = 1;
      t.loc = nl_loc;
      lx->p = p;
      return t;
    }
  }
  const char *s = p;
  char c = *p;
  if (is_ident_start((unsigned char)c)) {
    while (p < e && is_ident_char((unsigned char)*p))
      p++;
    fg_token t = make(lx, FG_TOK_IDENT, s, p);
    if (word_eq(s, t.len, "inf") || word_eq(s, t.len, "nan")) {
      t.kind = FG_TOK_FLOAT;
      t.f = s[0] == 'i' ? INFINITY : NAN;
    }
    return t;
  }
  if (is_digit((unsigned char)c))
    return lex_number(lx, s);
  if (c == '-') {
    if (p + 1 < e && is_digit((unsigned char)p[1]))
      return lex_number(lx, s);
    if (p + 1 < e && p[1] == '>')
      return make(lx, FG_TOK_ARROW, s, s + 2);
    if (e - p >= 4 && memcmp(p + 1, "inf", 3) == 0 &&
        (e - p == 4 || !is_ident_char((unsigned char)p[4]))) {
      fg_token t = make(lx, FG_TOK_FLOAT, s, p + 4);
      t.f = -INFINITY;
      return t;
    }
    fg_error(lx->d, loc_at(lx, s), "'-' must be followed by a number");
    return error_tok(lx, s);
  }
  if (c == '"')
    return lex_string(lx, s);
  fg_tok_kind k;
  switch (c) {
  case '(':
    k = FG_TOK_LPAREN;
    lx->nest++;
    break;
  case '[':
    k = FG_TOK_LBRACK;
    lx->nest++;
    break;
  case ')':
    k = FG_TOK_RPAREN;
    if (lx->nest > 0)
      lx->nest--;
    break;
  case ']':
    k = FG_TOK_RBRACK;
    if (lx->nest > 0)
      lx->nest--;
    break;
  case '<':
    k = FG_TOK_LANGLE;
    lx->nest++;
    break;
  case '>':
    k = FG_TOK_RANGLE;
    if (lx->nest > 0)
      lx->nest--;
    break;
  case '%':
    k = FG_TOK_PERCENT;
    break;
  case '+':
    k = FG_TOK_PLUS;
    break;
  case '*':
    k = FG_TOK_STAR;
    break;
  case '.':
    if (p + 1 < e && p[1] == '.')
      return make(lx, FG_TOK_DOTDOT, s, s + 2);
    return bad_char(lx, s);
  case '{':
    k = FG_TOK_LBRACE;
    break;
  case '}':
    k = FG_TOK_RBRACE;
    break;
  case ',':
    k = FG_TOK_COMMA;
    break;
  case ':':
    k = FG_TOK_COLON;
    break;
  case '=':
    k = FG_TOK_EQUAL;
    break;
  default:
    return bad_char(lx, s);
  }
  return make(lx, k, s, s + 1);
}

int fg_tok_is(const fg_token *t, const char *word) {
  return t->kind == FG_TOK_IDENT && word_eq(t->text, t->len, word);
}

const char *fg_tok_describe(const fg_token *t, char *buf, size_t cap) {
  switch (t->kind) {
  case FG_TOK_EOF:
    snprintf(buf, cap, "end of file");
    break;
  case FG_TOK_ERROR:
    snprintf(buf, cap, "invalid input");
    break;
  case FG_TOK_NEWLINE:
    snprintf(buf, cap, "end of line");
    break;
  case FG_TOK_STRING:
    snprintf(buf, cap, "a string");
    break;
  default: {
    int n = (int)t->len;
    snprintf(buf, cap, "'%.*s%s'", n > QUOTE_MAX ? QUOTE_MAX : n, t->text,
             n > QUOTE_MAX ? "..." : "");
  }
  }
  return buf;
}
