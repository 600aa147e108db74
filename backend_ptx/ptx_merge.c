#include "ptx_merge.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

typedef struct names {
  char **v;
  int n, cap;
} names;

static void add_name(names *ns, const char *s, size_t len) {
  if (len == 0) return;
  for (int i = 0; i < ns->n; i++)
    if (strlen(ns->v[i]) == len && memcmp(ns->v[i], s, len) == 0) return;
  if (ns->n == ns->cap) {
    ns->cap = ns->cap ? 2 * ns->cap : 16;
    ns->v = realloc(ns->v, sizeof(char *) * (size_t)ns->cap);
  }
  ns->v[ns->n] = malloc(len + 1);
  memcpy(ns->v[ns->n], s, len);
  ns->v[ns->n++][len] = 0;
}

/* Module-scope .func / .global / .const names of one PTX text. */
static void collect(const char *t, names *ns) {
  for (const char *line = t; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    if (len == 0 || line[0] == '\t' || line[0] == ' ' || line[0] == '/') continue;
    char buf[512];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    if (strstr(buf, ".entry")) continue;
    char *f = strstr(buf, ".func");
    if (f) {
      char *p = f + 5;
      while (*p == ' ' || *p == '\t') p++;
      if (*p == '(') {
        int depth = 0;
        for (; *p; p++) {
          if (*p == '(') depth++;
          if (*p == ')' && --depth == 0) { p++; break; }
        }
      }
      while (*p == ' ' || *p == '\t') p++;
      char *s = p;
      while (ident_char(*p)) p++;
      add_name(ns, s, (size_t)(p - s));
      continue;
    }
    if (strstr(buf, ".global") || strstr(buf, ".const")) {
      char *cut = strpbrk(buf, "[=;");
      if (cut) *cut = 0;
      char *e = buf + strlen(buf);
      while (e > buf && (e[-1] == ' ' || e[-1] == '\t')) e--;
      char *s = e;
      while (s > buf && ident_char(s[-1])) s--;
      add_name(ns, s, (size_t)(e - s));
    }
  }
}

/* Appends t to out, renaming whole-word occurrences of ns to name_sK. */
static void append_renamed(char **out, size_t *len, size_t *cap, const char *t, const names *ns, int k) {
  for (const char *p = t; *p;) {
    if (ident_char(*p) && (p == t || !ident_char(p[-1]))) {
      const char *q = p;
      while (ident_char(*q)) q++;
      size_t wl = (size_t)(q - p);
      bool hit = false;
      for (int i = 0; i < ns->n && !hit; i++) hit = strlen(ns->v[i]) == wl && memcmp(ns->v[i], p, wl) == 0;
      size_t need = wl + 16;
      if (*len + need + 1 > *cap) {
        while (*len + need + 1 > *cap) *cap *= 2;
        *out = realloc(*out, *cap);
      }
      memcpy(*out + *len, p, wl);
      *len += wl;
      if (hit) *len += (size_t)snprintf(*out + *len, 16, "_m%d", k);
      p = q;
      continue;
    }
    if (*len + 2 > *cap) {
      *cap *= 2;
      *out = realloc(*out, *cap);
    }
    (*out)[(*len)++] = *p++;
  }
  (*out)[*len] = 0;
}

char *fgb_ptx_merge(char *const *texts, int n) {
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  out[0] = 0;
  for (int k = 0; k < n; k++) {
    const char *t = texts[k];
    if (k > 0) { /* drop the header up to .address_size */
      const char *a = strstr(t, ".address_size");
      if (a) {
        const char *nl = strchr(a, '\n');
        t = nl ? nl + 1 : a + strlen(a);
      }
    }
    names ns = {0};
    if (k > 0) collect(t, &ns);
    append_renamed(&out, &len, &cap, t, &ns, k);
    for (int i = 0; i < ns.n; i++) free(ns.v[i]);
    free(ns.v);
  }
  return out;
}
