/* Text helpers of the loader's tests (tl.h includes them; host_overhead
 * uses them without tl.h's check counter): reading a file, replacing a
 * string, and add.ptx's variants. */
#ifndef FGL_TL_TEXT_H
#define FGL_TL_TEXT_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* add.ptx's text (add) with a second kernel on stream 1 (plan version 4,
 * kernel-stream): the same entry writing a fourth result, r3, from temp
 * t1 (malloc'd). */
static inline char *tl_add_with_stream(const char *add) {
  char *a = tl_replace(add, "// fusec-plan 2", "// fusec-plan 4");
  char *b = tl_replace(a, "results 3 temps 1 kernels 1", "results 4 temps 2 kernels 2");
  char *c = tl_replace(b, "// temp 0 bytes 4096 align 256 zero\n",
                       "// result 3 f32 [1048576] strides [1] written\n"
                       "// temp 0 bytes 4096 align 256 zero\n"
                       "// temp 1 bytes 4096 align 256 zero\n");
  char *d = tl_replace(c, "ptrs p0,p1,r0\n",
                       "ptrs p0,p1,r0\n"
                       "// kernel 1 fg_axpy_k0 grid 1024 1 1 block 256 1 1 smem 0 args "
                       "p0,p1,s2,r3,t1\n"
                       "// kernel-stream 1 1\n");
  free(a);
  free(b);
  free(c);
  return d;
}
/* add.ptx's axpy with a second kernel on the caller's stream that waits
 * for the first in the kernel (plan version 5, kernel-pdl): the first
 * kernel writes result 0, the second result 3 (the caller frees it). */
static inline char *tl_add_with_pdl(const char *add) {
  char *st = tl_add_with_stream(add);
  char *v5 = tl_replace(st, "// fusec-plan 4", "// fusec-plan 5");
  char *d = tl_replace(v5, "// kernel-stream 1 1\n", "// kernel-pdl 0\n// kernel-pdl 1\n");
  free(st);
  free(v5);
  return d;
}
#endif
