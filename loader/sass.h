/* SASS carried in the artifact (docs/artifact.md, "SASS sections"): the
 * cubins `fusec --cubin sm_NN,...` appends after the PTX, one section an
 * architecture, base64 in `//` comment lines:
 *
 *   // fusec-sass sm_90 bytes N xxh3 H ptx P
 *   // <base64 of the cubin, up to 96 characters a line>
 *   // fusec-sass-end
 *
 * N is the cubin's length, H the XXH3-64 of the cubin and P the XXH3-64
 * of every byte before the first section (plan and PTX), both 16 hex
 * digits: a cubin is used only with the PTX it was assembled from. The
 * sections are comments to anything that reads the file as PTX. */
#ifndef FGL_SASS_H
#define FGL_SASS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#define FGL_SASS_MAX 16
#define FGL_SASS_LINE 96 /* base64 characters a line (fusec writes these) */

typedef struct fgl_sass_section {
  char arch[16];     /* "sm_90", "sm_90a" */
  int sm;            /* 90 */
  size_t data, end;  /* the base64 lines: offsets of the first and one past the last */
  uint64_t bytes;    /* the cubin's length */
  uint64_t hash;     /* XXH3-64 of the cubin */
  uint64_t ptx_hash; /* XXH3-64 of text[0 .. ptx_len) */
} fgl_sass_section;

typedef struct fgl_sass_table {
  size_t ptx_len; /* where the sections start (len when there are none) */
  int n;
  fgl_sass_section s[FGL_SASS_MAX];
  char why[160]; /* n == 0 and this non-empty: sections were there, but malformed */
} fgl_sass_table;

/* Finds and reads the section headers of an artifact (text[0..len)). Never
 * fails: without sections ptx_len is len and n 0; malformed sections leave
 * ptx_len at their start, n 0 and the reason in why. */
void fgl_sass_scan(const char *text, size_t len, fgl_sass_table *t);

/* Decodes section s of text (whose first t->ptx_len bytes are the PTX the
 * table was scanned from) into a malloc'd cubin. Returns 0, or -1 with the
 * reason in why (bad base64, wrong length, checksum, another PTX's). */
int fgl_sass_decode(const char *text, const fgl_sass_table *t, const fgl_sass_section *s,
                    void **cubin, size_t *cubin_len, char *why, size_t whylen);

/* Writes one section for arch ("sm_90") holding cubin[0..n) assembled from
 * ptx[0..ptx_len) (the artifact before its first section). Returns 0, or -1
 * when writing fails (errno set). fusec's --cubin and the tests use it. */
int fgl_sass_write(FILE *f, const char *arch, const void *cubin, size_t n, const char *ptx,
                   size_t ptx_len);

#endif
