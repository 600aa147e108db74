/* The .fg lexer: turns bytes into tokens on demand. It never reads past the
 * buffer's end (the text need not be NUL-terminated), reports every lexical
 * error itself (then returns FG_TOK_ERROR), and suppresses newlines inside
 * ( ), [ ] and < > so that the parser sees a statement end only where one
 * is. */
#ifndef FG_LEXER_H
#define FG_LEXER_H
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "ir.h"

typedef enum fg_tok_kind {
  FG_TOK_EOF,
  FG_TOK_ERROR, /* already reported */
  FG_TOK_NEWLINE,
  FG_TOK_IDENT, /* includes the keywords graph/return/true/false */
  FG_TOK_INT,
  FG_TOK_FLOAT,
  FG_TOK_STRING, /* text/len exclude the quotes */
  FG_TOK_LPAREN,
  FG_TOK_RPAREN,
  FG_TOK_LBRACK,
  FG_TOK_RBRACK,
  FG_TOK_LBRACE,
  FG_TOK_RBRACE,
  FG_TOK_COMMA,
  FG_TOK_COLON,
  FG_TOK_EQUAL,
  FG_TOK_LANGLE, /* '<' and '>': a graph's size clause */
  FG_TOK_RANGLE,
  FG_TOK_DOTDOT,  /* '..' of a size range */
  FG_TOK_PERCENT, /* '%' of a size divisor */
  FG_TOK_ARROW,   /* '->' of a result written into a parameter (in-place results) */
  FG_TOK_PLUS,    /* '+' and '*' of a size expression in an attribute (T+16, 2*T) */
  FG_TOK_STAR,
} fg_tok_kind;

typedef struct fg_token {
  fg_tok_kind kind;
  const char *text; /* points into the source; not NUL-terminated */
  size_t len;
  fg_loc loc;
  int64_t i; /* INT */
  double f;  /* FLOAT */
} fg_token;

typedef struct fg_lexer {
  const char *src, *end, *p;
  int line;
  const char *line_start;
  int nest; /* depth of (, [ and <; newlines inside are not tokens */
  fg_diag *d;
} fg_lexer;

void fg_lexer_init(fg_lexer *lx, const char *src, size_t len, fg_diag *d);
fg_token fg_lex(fg_lexer *lx);
/* True when the token is the identifier `word`. */
int fg_tok_is(const fg_token *t, const char *word);
/* A short, printable rendering of a token for messages ("'foo'", "end of
 * line", ...); long texts are cut. Writes into buf and returns it. */
const char *fg_tok_describe(const fg_token *t, char *buf, size_t cap);

#endif
