/* Bump allocator: every object of a graph lives in its graph's arena and is
 * freed with it, so passes never track ownership. */
#ifndef FG_ARENA_H
#define FG_ARENA_H
#include <stddef.h>

typedef struct fg_arena_chunk fg_arena_chunk;
typedef struct fg_arena {
  fg_arena_chunk *head;
  size_t total; /* bytes handed out, for statistics */
} fg_arena;

void fg_arena_init(fg_arena *a);
void fg_arena_free(fg_arena *a);
/* Zeroed, 16-byte aligned memory; aborts only on host out-of-memory. */
void *fg_arena_alloc(fg_arena *a, size_t size);
char *fg_arena_strdup(fg_arena *a, const char *s);
char *fg_arena_strndup(fg_arena *a, const char *s, size_t n);
void *fg_arena_memdup(fg_arena *a, const void *p, size_t n);
/* The growable array of the compiler (QBE's vgrow): appends the elem-byte
 * *item to the *n-element array arr (from this arena, or NULL when *n is
 * 0), increments *n and returns the array to use from now on (the old one
 * stays allocated: an arena frees nothing). Each append copies the array:
 * for the short lists of a graph and a plan. */
void *fg_arena_append(fg_arena *a, void *arr, int *n, const void *item, size_t elem);
char *fg_arena_printf(fg_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
