#include "symtab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void fg_symtab_init(fg_symtab *t) { memset(t, 0, sizeof *t); }

void fg_symtab_free(fg_symtab *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

void fg_symtab_clear(fg_symtab *t) {
  if (t->slots)
    memset(t->slots, 0, t->cap * sizeof *t->slots);
  t->count = 0;
}

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* Linear probing; cap is a power of two and the table is at most half full,
 * so a probe always ends at an empty slot. */
static fg_symtab_slot *find(const fg_symtab *t, const char *key, size_t len) {
  size_t mask = t->cap - 1, i = (size_t)hash(key, len) & mask;
  for (;;) {
    fg_symtab_slot *s = &t->slots[i];
    if (!s->key || (s->len == len && memcmp(s->key, key, len) == 0))
      return s;
    i = (i + 1) & mask;
  }
}

void *fg_symtab_get(const fg_symtab *t, const char *key, size_t len) {
  if (!t->cap)
    return NULL;
  fg_symtab_slot *s = find(t, key, len);
  return s->key ? s->val : NULL;
}

static bool grow(fg_symtab *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  fg_symtab_slot *old = t->slots;
  size_t old_cap = t->cap;
  t->slots = calloc(cap, sizeof *t->slots);
  if (!t->slots) {
    t->slots = old;
    return false;
  }
  t->cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].key)
      *find(t, old[i].key, old[i].len) = old[i];
  free(old);
  return true;
}

bool fg_symtab_put(fg_symtab *t, const char *key, size_t len, void *val) {
  if ((t->count + 1) * 2 > t->cap && !grow(t))
    return false;
  fg_symtab_slot *s = find(t, key, len);
  if (!s->key) {
    s->key = key;
    s->len = len;
    t->count++;
  }
  s->val = val;
  return true;
}
