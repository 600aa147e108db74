/* .npy reading and writing: round trips of every dtype, numpy-written
 * headers (v1, v2, fortran order), and malformed files (truncated, corrupted,
 * big-endian) that must give an error naming the file, never a crash. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare.h"
#include "diag.h"
#include "parse.h"
#include "npy.h"

#include "check.h"

static char dir[64];

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

static void test_roundtrip(void) {
  for (int dt = 0; dt < FG_DTYPE_COUNT; dt++) {
    fg_tensor t, u;
    int64_t sizes[3] = {2, 3, fg_dtype_is_packed((fg_dtype)dt) ? 6 : 5};
    fg_tensor_alloc(&t, (fg_dtype)dt, 3, sizes);
    for (size_t i = 0; i < t.nbytes; i++)
      ((unsigned char *)t.data)[i] = (unsigned char)(i * 37 + 1);
    if (dt == FG_BOOL)
      for (size_t i = 0; i < t.nbytes; i++)
        ((unsigned char *)t.data)[i] &= 1;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/%s.npy", dir, fg_dtype_name((fg_dtype)dt));
    CHECK(fg_npy_write(path, &t, err, sizeof err));
    CHECK(fg_npy_read(path, (fg_dtype)dt, &u, err, sizeof err));
    CHECK(u.dtype == (fg_dtype)dt && u.rank == 3 && u.sizes[2] == sizes[2]);
    CHECK(u.nbytes == t.nbytes && memcmp(u.data, t.data, t.nbytes) == 0);
    /* data starts at a multiple of 64, as numpy writes it */
    size_t len;
    char *b = slurp(path, &len);
    CHECK(b && (len - t.nbytes) % 64 == 0);
    /* f4e2m1: the packed bytes, the last dim halved (torch.float4_e2m1fn_x2's shape) */
    if (b && fg_dtype_is_packed((fg_dtype)dt)) {
      b[len] = 0; /* slurp leaves a byte for it */
      CHECK(t.nbytes == 18 && len > 10 && strstr(b + 10, "'shape': (2, 3, 3)") != NULL);
    }
    free(b);
    fg_tensor_free(&u);
    fg_tensor_free(&t);
  }
  /* 0-d and 1-d shapes */
  fg_tensor s, r;
  fg_tensor_alloc(&s, FG_F32, 0, NULL);
  fg_tensor_set_f(&s, 0, 2.5);
  char path[128], err[256];
  snprintf(path, sizeof path, "%s/scalar.npy", dir);
  CHECK(fg_npy_write(path, &s, err, sizeof err));
  CHECK(fg_npy_read(path, FG_DTYPE_INVALID, &r, err, sizeof err) && r.rank == 0 &&
        fg_tensor_get_f(&r, 0) == 2.5);
  fg_tensor_free(&r);
  fg_tensor_free(&s);
}

/* An image built the way numpy writes it. */
static size_t build(unsigned char *buf, int major, const char *hdr, const void *data, size_t dlen) {
  size_t hl = strlen(hdr), pre = major == 1 ? 10 : 12;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  if (major == 1) {
    buf[8] = (unsigned char)hl;
    buf[9] = (unsigned char)(hl >> 8);
  } else {
    for (int i = 0; i < 4; i++)
      buf[8 + i] = (unsigned char)(hl >> (8 * i));
  }
  memcpy(buf + pre, hdr, hl);
  memcpy(buf + pre + hl, data, dlen);
  return pre + hl + dlen;
}

static void test_headers(void) {
  unsigned char buf[512];
  char err[256];
  fg_tensor t;
  float f6[6] = {0, 1, 2, 3, 4, 5};
  /* v2.0, odd spacing, fortran order: column-major [2,3] -> C order */
  size_t n =
      build(buf, 2, "{\"descr\":'<f4',  'fortran_order' : True, 'shape': (2,3) }\n", f6, sizeof f6);
  CHECK(fg_npy_parse("f.npy", buf, n, FG_F32, &t, err, sizeof err));
  float want[6] = {0, 2, 4, 1, 3, 5};
  CHECK(t.rank == 2 && memcmp(t.data, want, sizeof want) == 0);
  fg_tensor_free(&t);
  /* bf16 stored as <u2 needs the bf16 hint */
  uint16_t h[2] = {0x3f80, 0xc000};
  n = build(buf, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }\n", h, sizeof h);
  CHECK(fg_npy_parse("b.npy", buf, n, FG_BF16, &t, err, sizeof err) && t.dtype == FG_BF16 &&
        fg_tensor_get_f(&t, 1) == -2.0);
  fg_tensor_free(&t);
  CHECK(!fg_npy_parse("b.npy", buf, n, FG_DTYPE_INVALID, &t, err, sizeof err) &&
        strstr(err, "b.npy:"));
  /* |u1 is u8 unless an f8 dtype is expected */
  uint8_t e[1] = {0x7e};
  n = build(buf, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }\n", e, 1);
  CHECK(fg_npy_parse("e.npy", buf, n, FG_F8E4M3, &t, err, sizeof err) &&
        fg_tensor_get_f(&t, 0) == 448);
  fg_tensor_free(&t);
  CHECK(fg_npy_parse("e.npy", buf, n, FG_DTYPE_INVALID, &t, err, sizeof err) && t.dtype == FG_U8);
  fg_tensor_free(&t);
  /* big-endian is rejected with a clear message */
  n = build(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }\n", f6, sizeof f6);
  CHECK(!fg_npy_parse("be.npy", buf, n, FG_F32, &t, err, sizeof err) && strstr(err, "big-endian"));
  /* wrong data size */
  n = build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }\n", f6, sizeof f6);
  CHECK(!fg_npy_parse("short.npy", buf, n, FG_F32, &t, err, sizeof err) &&
        strstr(err, "short.npy"));
  /* structured dtypes, unknown keys, bad magic */
  n = build(buf, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", f6, 4);
  CHECK(!fg_npy_parse("s.npy", buf, n, FG_F32, &t, err, sizeof err));
  CHECK(!fg_npy_parse("m.npy", "hello world", 11, FG_F32, &t, err, sizeof err) &&
        strstr(err, "magic"));
  CHECK(!fg_npy_read("/nonexistent/x.npy", FG_F32, &t, err, sizeof err) &&
        strstr(err, "/nonexistent/x.npy"));
}

/* Truncations at every length and random corruptions of a valid image:
 * each parse either succeeds or fails with a message; never crashes. */
static void test_fuzz(void) {
  unsigned char buf[512], mut[512];
  float f6[6] = {0, 1, 2, 3, 4, 5};
  size_t n =
      build(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }\n", f6, sizeof f6);
  char err[256];
  fg_tensor t;
  int ok_count = 0, fails = 0;
  for (size_t len = 0; len <= n; len++) {
    if (fg_npy_parse("fz.npy", buf, len, FG_F32, &t, err, sizeof err))
      ok_count++, fg_tensor_free(&t);
    else
      fails += strstr(err, "fz.npy") != NULL;
  }
  CHECK(ok_count == 1 && fails == (int)n);
  uint64_t s = 88172645463325252ull;
  int bad_msgs = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(mut, buf, n);
    int flips = 1 + it % 4;
    for (int k = 0; k < flips; k++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      mut[s % n] = (unsigned char)(s >> 32);
    }
    if (fg_npy_parse("fz.npy", mut, n, FG_F32, &t, err, sizeof err))
      fg_tensor_free(&t);
    else
      bad_msgs += strstr(err, "fz.npy") == NULL;
  }
  CHECK(bad_msgs == 0);
}

/* fgrun --check's comparison (tools/common/compare.c), which shares this
 * test binary with the other tools/common code. */
static void test_compare(void) {
  fg_tensor a, b;
  int64_t n = 100;
  fg_tensor_alloc(&a, FG_F32, 1, &n);
  fg_tensor_alloc(&b, FG_F32, 1, &n);
  for (int i = 0; i < 100; i++)
    fg_tensor_set_f(&a, i, i + 1), fg_tensor_set_f(&b, i, (i + 1) * (1 + 1e-7));
  FILE *f = tmpfile();
  CHECK(fg_compare(f, 0, &a, &b));
  fg_tensor_set_f(&a, 7, 1e3);
  CHECK(!fg_compare(f, 1, &a, &b));
  fg_tensor_set_f(&a, 7, 8), fg_tensor_set_f(&b, 7, 8);
  fg_tensor_set_f(&a, 3, NAN);
  CHECK(!fg_compare(f, 2, &a, &b)); /* NaN where the reference is finite */
  fg_tensor_set_f(&b, 3, NAN);
  CHECK(fg_compare(f, 3, &a, &b)); /* NaN in both: skipped */
  fg_tensor_set_f(&a, 4, INFINITY), fg_tensor_set_f(&b, 4, -INFINITY);
  CHECK(!fg_compare(f, 4, &a, &b)); /* inf signs differ */
  fg_tensor c;
  fg_tensor_alloc(&c, FG_I32, 1, &n);
  CHECK(!fg_compare(f, 5, &c, &b)); /* dtype differs */
  CHECK(fg_compare(f, 6, &c, &c));
  fg_tensor d;
  fg_tensor_alloc(&d, FG_I32, 1, &n);
  fg_tensor_set_i(&d, 99, 1);
  CHECK(!fg_compare(f, 7, &c, &d));
  rewind(f);
  char line[512];
  CHECK(fgets(line, sizeof line, f) && strncmp(line, "result 0 (f32[100]): rel_l2=", 28) == 0 &&
        strstr(line, " ok\n"));
  CHECK(fgets(line, sizeof line, f) && strstr(line, " FAIL\n"));
  fclose(f);
  CHECK(fg_compare_tol(FG_BF16) == 1e-2 && fg_compare_tol(FG_F8E5M2) == 1.2e-1 &&
        fg_compare_tol(FG_I8) == 0);
  /* A result's tolerance is the loosest over what computes it: an f32 sum
   * cast to f64 is as exact as f32 (a difftest graph failed at f64's 1e-9
   * on an H100, 2026-11-26); a parameter passed through stays exact. */
  const char *src = "graph g(x: f32[8], y: f64[8], z: bf16[8]) {\n"
                    "  return cast(sum(x), dtype=f64), y, add(y, cast(z, dtype=f64)), "
                    "cast(sum(x), dtype=i32)\n}\n";
  fg_diag dg;
  fg_diag_init(&dg, "t.fg", src, strlen(src), NULL);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &dg);
  fg_diag_free(&dg);
  CHECK(m && m->ngraphs == 1);
  if (m) {
    CHECK(fg_compare_tol_of(m->graphs[0], 0) == 1e-4);
    CHECK(fg_compare_tol_of(m->graphs[0], 1) == 1e-9);
    CHECK(fg_compare_tol_of(m->graphs[0], 2) == 1e-9); /* z is exact in f64 */
    CHECK(fg_compare_tol_of(m->graphs[0], 3) == 0);
    fg_module_free(m);
  }
  fg_tensor_free(&a);
  fg_tensor_free(&b);
  fg_tensor_free(&c);
  fg_tensor_free(&d);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/test_npy.XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_roundtrip();
  test_headers();
  test_fuzz();
  test_compare();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "warning: could not remove %s\n", dir);
  printf("test_npy: %d passed, %d failed\n", npass, nfail);
  return nfail != 0;
}
