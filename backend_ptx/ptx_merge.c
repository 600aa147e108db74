#include "ptx_merge.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

typedef struct names {
  char **v;
  int n, cap;
} names;

/* Returns false when out of memory. */
static bool add_name(names *ns, const char *s, size_t len) {
  if (len == 0)
    return true;
  for (int i = 0; i < ns->n; i++)
    if (strlen(ns->v[i]) == len && memcmp(ns->v[i], s, len) == 0)
      return true;
  if (ns->n == ns->cap) {
    int cap = ns->cap ? 2 * ns->cap : 16;
    char **v = realloc(ns->v, sizeof(char *) * (size_t)cap);
    if (!v)
      return false;
    ns->v = v;
    ns->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy)
    return false;
  memcpy(copy, s, len);
  copy[len] = 0;
  ns->v[ns->n++] = copy;
  return true;
}

/* Module-scope .func / .global / .const names of one PTX text. Returns
 * false when out of memory. */
static bool collect(const char *t, names *ns) {
  for (const char *line = t; line && *line;
       line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    if (len == 0 || line[0] == '\t' || line[0] == ' ' || line[0] == '/')
      continue;
    char buf[512];
    if (len >= sizeof buf)
      len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = 0;
    if (strstr(buf, ".entry"))
      continue;
    char *f = strstr(buf, ".func");
    if (f) {
      char *p = f + 5;
      while (*p == ' ' || *p == '\t')
        p++;
      if (*p == '(') {
        int depth = 0;
        for (; *p; p++) {
          if (*p == '(')
            depth++;
          if (*p == ')' && --depth == 0) {
            p++;
            break;
          }
        }
      }
      while (*p == ' ' || *p == '\t')
        p++;
      char *s = p;
      while (ident_char(*p))
        p++;
      if (!add_name(ns, s, (size_t)(p - s)))
        return false;
      continue;
    }
    if (strstr(buf, ".global") || strstr(buf, ".const")) {
      char *cut = strpbrk(buf, "[=;");
      if (cut)
        *cut = 0;
      char *e = buf + strlen(buf);
      while (e > buf && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
      char *s = e;
      while (s > buf && ident_char(s[-1]))
        s--;
      if (!add_name(ns, s, (size_t)(e - s)))
        return false;
    }
  }
  return true;
}

/* A growing output text. */
typedef struct text {
  char *s;
  size_t len, cap;
  bool oom;
} text;

static void reserve(text *o, size_t more) {
  if (o->oom || o->len + more + 1 <= o->cap)
    return;
  size_t cap = o->cap;
  while (o->len + more + 1 > cap)
    cap *= 2;
  char *s = realloc(o->s, cap);
  if (!s) {
    o->oom = true;
    return;
  }
  o->s = s;
  o->cap = cap;
}

/* Appends t to out, renaming whole-word occurrences of ns to name_mK. */
static void append_renamed(text *o, const char *t, const names *ns, int k) {
  for (const char *p = t; *p && !o->oom;) {
    if (ident_char(*p) && (p == t || !ident_char(p[-1]))) {
      const char *q = p;
      while (ident_char(*q))
        q++;
      size_t wl = (size_t)(q - p);
      bool hit = false;
      for (int i = 0; i < ns->n && !hit; i++)
        hit = strlen(ns->v[i]) == wl && memcmp(ns->v[i], p, wl) == 0;
      reserve(o, wl + 16);
      if (o->oom)
        break;
      memcpy(o->s + o->len, p, wl);
      o->len += wl;
      if (hit)
        o->len += (size_t)snprintf(o->s + o->len, 16, "_m%d", k);
      p = q;
      continue;
    }
    reserve(o, 1);
    if (o->oom)
      break;
    o->s[o->len++] = *p++;
  }
  if (!o->oom)
    o->s[o->len] = 0;
}

static void free_names(names *ns) {
  for (int i = 0; i < ns->n; i++)
    free(ns->v[i]);
  free(ns->v);
}

char *fgb_ptx_merge(char *const *texts, int n) {
  text o = {malloc(1 << 16), 0, 1 << 16, false};
  if (!o.s)
    return NULL;
  o.s[0] = 0;
  for (int k = 0; k < n && !o.oom; k++) {
    const char *t = texts[k];
    if (k > 0) { /* drop the header up to .address_size */
      const char *a = strstr(t, ".address_size");
      if (a) {
        const char *nl = strchr(a, '\n');
        t = nl ? nl + 1 : a + strlen(a);
      }
    }
    names ns = {0};
    if (k > 0 && !collect(t, &ns))
      o.oom = true;
    else
      append_renamed(&o, t, &ns, k);
    free_names(&ns);
  }
  if (o.oom) {
    free(o.s);
    return NULL;
  }
  return o.s;
}
