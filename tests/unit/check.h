/* The unit tests' assertions: count passes and failures, print file:line
 * and the failed expression (and a message for CHECK_MSG); each test's main
 * prints "N passed, N failed" from npass/nfail and exits non-zero on any
 * failure. */
#ifndef FG_TEST_CHECK_H
#define FG_TEST_CHECK_H
#include <stdio.h>

static int npass, nfail;

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (c)                                                                                         \
      npass++;                                                                                     \
    else {                                                                                         \
      nfail++;                                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                        \
    }                                                                                              \
  } while (0)

#define CHECK_MSG(c, ...)                                                                          \
  do {                                                                                             \
    if (c)                                                                                         \
      npass++;                                                                                     \
    else {                                                                                         \
      nfail++;                                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c);                        \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    }                                                                                              \
  } while (0)

#endif
