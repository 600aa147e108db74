/* Minimal test helpers for the loader tests. */
#ifndef FGL_TL_H
#define FGL_TL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tl_text.h"

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

#endif
