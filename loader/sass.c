/* SASS sections of an artifact: finding, reading and writing them
 * (sass.h; docs/artifact.md). */
#include "sass.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define HEADER "// fusec-sass "
#define END_LINE "// fusec-sass-end"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The line starting at text[i]: its length without the newline (and a
 * trailing \r), and the offset of the next line. */
static size_t line_at(const char *text, size_t len, size_t i, size_t *next) {
  size_t e = i;
  while (e < len && text[e] != '\n')
    e++;
  *next = e < len ? e + 1 : len;
  if (e > i && text[e - 1] == '\r')
    e--;
  return e - i;
}

static int parse_u64(const char *s, size_t n, int base, uint64_t *v) {
  if (n == 0 || n > (base == 16 ? 16u : 19u))
    return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    int d = s[i] >= '0' && s[i] <= '9'                 ? s[i] - '0'
            : base == 16 && s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                                       : -1;
    if (d < 0)
      return -1;
    x = x * (uint64_t)base + (uint64_t)d;
  }
  *v = x;
  return 0;
}

static int tok_is(const char *t, size_t n, const char *w) {
  return n == strlen(w) && memcmp(t, w, n) == 0;
}

/* "// fusec-sass ARCH bytes N xxh3 H ptx P" into s; -1 when malformed. */
static int parse_header(const char *l, size_t n, fgl_sass_section *s) {
  enum { NT = 9 };
  const char *tok[NT];
  size_t tl[NT];
  int nt = 0;
  for (size_t i = 0; i < n;) {
    while (i < n && l[i] == ' ')
      i++;
    if (i == n)
      break;
    if (nt == NT)
      return -1;
    tok[nt] = l + i;
    while (i < n && l[i] != ' ')
      i++;
    tl[nt] = (size_t)(l + i - tok[nt]);
    nt++;
  }
  if (nt != NT || !tok_is(tok[1], tl[1], "fusec-sass") || !tok_is(tok[3], tl[3], "bytes") ||
      !tok_is(tok[5], tl[5], "xxh3") || !tok_is(tok[7], tl[7], "ptx") || tl[6] != 16 || tl[8] != 16)
    return -1;
  /* sm_NN or sm_NNa */
  if (tl[2] < 5 || tl[2] >= sizeof s->arch || memcmp(tok[2], "sm_", 3))
    return -1;
  size_t digits = tl[2] - 3 - (tok[2][tl[2] - 1] == 'a');
  uint64_t sm;
  if (digits < 2 || digits > 3 || parse_u64(tok[2] + 3, digits, 10, &sm))
    return -1;
  memcpy(s->arch, tok[2], tl[2]);
  s->arch[tl[2]] = 0;
  s->sm = (int)sm;
  if (parse_u64(tok[4], tl[4], 10, &s->bytes) || s->bytes == 0 || s->bytes > ((uint64_t)1 << 32) ||
      parse_u64(tok[6], 16, 16, &s->hash) || parse_u64(tok[8], 16, 16, &s->ptx_hash))
    return -1;
  return 0;
}

void fgl_sass_scan(const char *text, size_t len, fgl_sass_table *t) {
  memset(t, 0, sizeof *t);
  t->ptx_len = len;
  /* the first line (not the file's first) that starts with the header */
  size_t start = len;
  for (size_t i = 0; i < len;) {
    if (i > 0 && len - i >= sizeof HEADER - 1 && memcmp(text + i, HEADER, sizeof HEADER - 1) == 0) {
      start = i;
      break;
    }
    const char *p = memchr(text + i, '\n', len - i);
    if (!p)
      break;
    i = (size_t)(p - text) + 1;
  }
  if (start == len)
    return;
  t->ptx_len = start;
  size_t i = start, next;
  while (i < len) {
    size_t n = line_at(text, len, i, &next);
    if (n == 0) { /* blank lines between and after sections */
      i = next;
      continue;
    }
    if (t->n == FGL_SASS_MAX) {
      snprintf(t->why, sizeof t->why, "more than %d SASS sections", FGL_SASS_MAX);
      t->n = 0;
      return;
    }
    fgl_sass_section *s = &t->s[t->n];
    if (parse_header(text + i, n, s) != 0) {
      snprintf(t->why, sizeof t->why, "malformed SASS section header '%.60s'", text + i);
      t->n = 0;
      return;
    }
    s->data = next;
    i = next;
    for (;;) {
      if (i >= len) {
        snprintf(t->why, sizeof t->why, "SASS section %s has no '%s' line", s->arch, END_LINE);
        t->n = 0;
        return;
      }
      n = line_at(text, len, i, &next);
      if (n == sizeof END_LINE - 1 && memcmp(text + i, END_LINE, n) == 0)
        break;
      if (n < 3 || memcmp(text + i, "// ", 3)) {
        snprintf(t->why, sizeof t->why, "SASS section %s: a line that is not '// <base64>'",
                 s->arch);
        t->n = 0;
        return;
      }
      i = next;
    }
    s->end = i;
    t->n++;
    i = next;
  }
}

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int fgl_sass_decode(const char *text, const fgl_sass_table *t, const fgl_sass_section *s,
                    void **cubin, size_t *cubin_len, char *why, size_t whylen) {
  *cubin = NULL;
  *cubin_len = 0;
  if (XXH3_64bits(text, t->ptx_len) != s->ptx_hash) {
    snprintf(why, whylen, "it was assembled from another PTX than this artifact's");
    return -1;
  }
  unsigned char *out = malloc((size_t)s->bytes + 3);
  if (!out) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  size_t n = 0, next;
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  for (size_t i = s->data; i < s->end; i = next) {
    size_t ll = line_at(text, s->end, i, &next);
    for (size_t j = 3; j < ll; j++) { /* after "// " */
      unsigned char c = (unsigned char)text[i + j];
      if (c == '=') {
        pad++;
        continue;
      }
      int v = b64_value(c);
      if (v < 0 || pad) {
        snprintf(why, whylen, "bad base64 at byte %zu of the file", i + j);
        free(out);
        return -1;
      }
      acc = acc << 6 | (uint32_t)v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        if (n == s->bytes) {
          snprintf(why, whylen, "it holds more than the %" PRIu64 " bytes its header says",
                   s->bytes);
          free(out);
          return -1;
        }
        out[n++] = (unsigned char)(acc >> bits);
      }
    }
  }
  if (n != s->bytes || pad > 2) {
    snprintf(why, whylen, "it holds %zu bytes, its header says %" PRIu64, n, s->bytes);
    free(out);
    return -1;
  }
  if (XXH3_64bits(out, n) != s->hash) {
    snprintf(why, whylen, "checksum mismatch (corrupt)");
    free(out);
    return -1;
  }
  *cubin = out;
  *cubin_len = n;
  return 0;
}

int fgl_sass_write(FILE *f, const char *arch, const void *cubin, size_t n, const char *ptx,
                   size_t ptx_len) {
  const unsigned char *p = cubin;
  fprintf(f, "%s%s bytes %zu xxh3 %016" PRIx64 " ptx %016" PRIx64 "\n", HEADER, arch, n,
          (uint64_t)XXH3_64bits(cubin, n), (uint64_t)XXH3_64bits(ptx, ptx_len));
  char line[FGL_SASS_LINE + 1];
  size_t k = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    line[k++] = b64[v >> 18 & 63];
    line[k++] = b64[v >> 12 & 63];
    line[k++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
    line[k++] = i + 2 < n ? b64[v & 63] : '=';
    if (k == FGL_SASS_LINE || i + 3 >= n) {
      line[k] = 0;
      fprintf(f, "// %s\n", line);
      k = 0;
    }
  }
  fprintf(f, "%s\n", END_LINE);
  return ferror(f) ? -1 : 0;
}
