#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fg_arena_chunk {
  fg_arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

enum { CHUNK_MIN = 64 * 1024 };

void fg_arena_init(fg_arena *a) {
  a->head = NULL;
  a->total = 0;
}

void fg_arena_free(fg_arena *a) {
  fg_arena_chunk *c = a->head;
  while (c) {
    fg_arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  a->head = NULL;
  a->total = 0;
}

void *fg_arena_alloc(fg_arena *a, size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (size == 0)
    size = 16;
  fg_arena_chunk *c = a->head;
  if (!c || c->cap - c->used < size) {
    size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
    c = malloc(sizeof *c + cap);
    if (!c) {
      /* Host OOM is not a user error we can report per graph; stop loudly. */
      fputs("fusec: out of memory\n", stderr);
      exit(3);
    }
    c->used = 0;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += size;
  a->total += size;
  memset(p, 0, size);
  return p;
}

char *fg_arena_strndup(fg_arena *a, const char *s, size_t n) {
  char *p = fg_arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

char *fg_arena_strdup(fg_arena *a, const char *s) { return fg_arena_strndup(a, s, strlen(s)); }

void *fg_arena_memdup(fg_arena *a, const void *p, size_t n) {
  void *q = fg_arena_alloc(a, n);
  if (n)
    memcpy(q, p, n);
  return q;
}

char *fg_arena_printf(fg_arena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = fg_arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
  if (n > 0)
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

void *fg_arena_append(fg_arena *a, void *arr, int *n, const void *item, size_t elem) {
  char *na = fg_arena_alloc(a, ((size_t)*n + 1) * elem);
  if (*n)
    memcpy(na, arr, (size_t)*n * elem);
  memcpy(na + (size_t)*n * elem, item, elem);
  ++*n;
  return na;
}
