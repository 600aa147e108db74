/* Minimal test helpers for the loader tests. */
#ifndef FGL_TL_H
#define FGL_TL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tl_failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      tl_failures++;                                                                               \
    }                                                                                              \
  } while (0)
#define CHECK_MSG(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      tl_failures++;                                                                               \
    }                                                                                              \
  } while (0)
#define TL_DONE(name)                                                                              \
  do {                                                                                             \
    if (tl_failures) {                                                                             \
      fprintf(stderr, "%s: %d check(s) failed\n", name, tl_failures);                              \
      return 1;                                                                                    \
    }                                                                                              \
    printf("%s: all checks passed\n", name);                                                       \
    return 0;                                                                                      \
  } while (0)

/* Replace the first occurrence of `find` in s by `repl` (malloc'd). */
static inline char *tl_replace(const char *s, const char *find, const char *repl) {
  const char *p = strstr(s, find);
  if (!p) {
    fprintf(stderr, "tl_replace: '%s' not found\n", find);
    abort();
  }
  size_t a = (size_t)(p - s), fl = strlen(find), rl = strlen(repl), n = strlen(s);
  char *o = malloc(n - fl + rl + 1);
  memcpy(o, s, a);
  memcpy(o + a, repl, rl);
  memcpy(o + a + rl, p + fl, n - a - fl + 1);
  return o;
}

static inline char *tl_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    fclose(f);
    return NULL;
  }
  b[n] = 0;
  fclose(f);
  if (len)
    *len = (size_t)n;
  return b;
}
#endif
