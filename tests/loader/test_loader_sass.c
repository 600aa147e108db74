/* SASS carried in the artifact (`fusec --cubin`, loader/sass.h) on the fake
 * driver: the section for the device's compute capability is loaded with
 * no JIT and no cache; no section for it, a damaged one, one made from
 * another PTX or one the driver refuses falls back to the PTX JIT, saying
 * why; the JIT and the cache never see the sections. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "fgload.h"
#include "sass.h"
#include "tl.h"

static long (*fake_count)(const char *);
static void (*fake_reset)(void);
static char cache_dir[256];
static char logs[16384];

static void logcb(void *u, fgl_log_level lv, const char *m) {
  (void)u;
  size_t n = strlen(logs);
  snprintf(logs + n, sizeof logs - n, "%s%s\n", lv == FGL_LOG_WARN ? "warn: " : "", m);
}

static fgl_load_options opts(void) {
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.cache_dir = cache_dir;
  o.log = logcb;
  return o;
}

static int count_entries(void) {
  DIR *d = opendir(cache_dir);
  int n = 0;
  if (!d)
    return 0;
  for (struct dirent *e; (e = readdir(d));)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void clear_cache(void) {
  DIR *d = opendir(cache_dir);
  if (!d)
    return;
  char p[600];
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') {
      snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
      unlink(p);
    }
  closedir(d);
}

/* The fake driver's cubin of a PTX: what its JIT makes ("FAKECUBIN\n",
 * the text, its NUL). */
static char *fake_cubin(const char *ptx, size_t *n) {
  size_t l = strlen(ptx);
  char *c = malloc(l + 11);
  memcpy(c, "FAKECUBIN\n", 10);
  memcpy(c + 10, ptx, l + 1);
  *n = l + 11;
  return c;
}

/* ptx followed by one section per arch (cubins[i] of lens[i] bytes) */
static char *with_sections(const char *ptx, int n, const char *const *archs, char *const *cubins,
                           const size_t *lens, size_t *out_len) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fputs(ptx, f);
  for (int i = 0; i < n; i++)
    CHECK(fgl_sass_write(f, archs[i], cubins[i], lens[i], ptx, strlen(ptx)) == 0);
  fclose(f);
  *out_len = len;
  return buf;
}

/* Loads data, returns where the code came from (-1: the load failed). */
static int load_src(const char *data, size_t len, fgl_module **keep) {
  fgl_load_options o = opts();
  fgl_module *m;
  fgl_error e = {0};
  if (fgl_module_load_data(data, len, &o, &m, &e) != FGL_OK) {
    fprintf(stderr, "load failed: %s\n", e.msg);
    return -1;
  }
  fgl_load_source src;
  CHECK(fgl_module_load_source(m, &src, NULL) == FGL_OK);
  if (keep)
    *keep = m;
  else
    fgl_module_free(m, NULL);
  return (int)src;
}

static void test_roundtrip(void) {
  /* every length's padding, through write, scan and decode */
  const char *ptx = "// fusec-plan 2\n.version 7.8\n";
  for (size_t n = 1; n < 300; n += (n < 10 ? 1 : 37)) {
    unsigned char *c = malloc(n);
    for (size_t i = 0; i < n; i++)
      c[i] = (unsigned char)(i * 131 + n);
    char *cc = (char *)c;
    const char *arch = "sm_90a";
    size_t len;
    char *art = with_sections(ptx, 1, &arch, &cc, &n, &len);
    fgl_sass_table t;
    fgl_sass_scan(art, len, &t);
    CHECK_MSG(t.n == 1 && t.ptx_len == strlen(ptx) && t.s[0].sm == 90 &&
                  !strcmp(t.s[0].arch, "sm_90a") && t.s[0].bytes == n,
              "n %zu: %d sections, why '%s'", n, t.n, t.why);
    void *out;
    size_t on;
    char why[200];
    CHECK_MSG(t.n == 1 && fgl_sass_decode(art, &t, &t.s[0], &out, &on, why, sizeof why) == 0 &&
                  on == n && !memcmp(out, c, n),
              "n %zu: %s", n, why);
    if (t.n == 1 && on == n)
      free(out);
    free(art);
    free(c);
  }
  /* no sections: the whole text is PTX; a header on the first line does not count */
  fgl_sass_table t;
  fgl_sass_scan(ptx, strlen(ptx), &t);
  CHECK(t.n == 0 && t.ptx_len == strlen(ptx) && !t.why[0]);
  const char *first = "// fusec-sass sm_90 bytes 1 xxh3 0000000000000000 ptx 0000000000000000\n";
  fgl_sass_scan(first, strlen(first), &t);
  CHECK(t.n == 0 && t.ptx_len == strlen(first));
}

static void test_sass_used(const char *ptx) {
  size_t cn, len;
  char *cubin = fake_cubin(ptx, &cn);
  const char *archs[] = {"sm_80", "sm_90"};
  char *cubins[] = {cubin, cubin};
  size_t lens[] = {cn, cn};
  char *art = with_sections(ptx, 2, archs, cubins, lens, &len);
  clear_cache();
  fake_reset();
  logs[0] = 0;
  fgl_module *m = NULL;
  CHECK(load_src(art, len, &m) == FGL_LOAD_SASS);
  CHECK_MSG(fake_count("jit") == 0 && fake_count("modload") == 1, "jit %ld modload %ld",
            fake_count("jit"), fake_count("modload"));
  CHECK_MSG(count_entries() == 0, "the SASS path wrote %d cache entries", count_entries());
  CHECK_MSG(strstr(logs, "(the artifact's SASS for sm_90)"), "%s", logs);
  fgl_load_stats st;
  CHECK(fgl_module_load_stats(m, &st, NULL) == FGL_OK && !st.cache_hit && st.jit_ms == 0);
  /* its kernels run */
  if (m) {
    fgl_graph *g;
    fgl_error e = {0};
    CHECK_MSG(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK, "%s", e.msg);
    int64_t n = 1048576, s2[2] = {1024, 1024};
    fgl_devptr x, y, o;
    CHECK(fgl_malloc(m, (size_t)n * 4, &x, NULL) == FGL_OK);
    CHECK(fgl_malloc(m, (size_t)n * 4, &y, NULL) == FGL_OK);
    CHECK(fgl_malloc(m, (size_t)n * 4, &o, NULL) == FGL_OK);
    float *hx = (float *)(uintptr_t)x, *hy = (float *)(uintptr_t)y, *ho = (float *)(uintptr_t)o;
    for (int i = 0; i < n; i++)
      hx[i] = (float)i, hy[i] = 1.0f;
    fgl_tensor tx, ty, out[3];
    fgl_tensor_contiguous(&tx, x, FGL_F32, 1, &n);
    fgl_tensor_contiguous(&ty, y, FGL_F32, 1, &n);
    fgl_tensor_contiguous(&out[0], o, FGL_F32, 1, &n);
    memset(&out[1], 0, sizeof out[1]);
    memset(&out[2], 0, sizeof out[2]);
    (void)s2;
    fgl_arg in[3] = {fgl_arg_tensor(tx), fgl_arg_tensor(ty), fgl_arg_float(FGL_F32, 2.0)};
    CHECK_MSG(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK, "%s", e.msg);
    CHECK(ho[0] == 2.0f && ho[1000] == 1002.0f && fake_count("launch") == 1);
    fgl_graph_free(g, NULL);
    fgl_free(m, x, NULL);
    fgl_free(m, y, NULL);
    fgl_free(m, o, NULL);
    fgl_module_free(m, NULL);
  }
  /* another device: the section for its capability */
  setenv("FAKE_CUDA_CC", "80", 1);
  logs[0] = 0;
  CHECK(load_src(art, len, NULL) == FGL_LOAD_SASS);
  CHECK_MSG(strstr(logs, "SASS for sm_80"), "%s", logs);
  /* none for this one: the JIT, saying why; then the cache as ever */
  setenv("FAKE_CUDA_CC", "89", 1);
  logs[0] = 0;
  fake_reset();
  CHECK(load_src(art, len, NULL) == FGL_LOAD_JIT);
  CHECK_MSG(strstr(logs, "carries SASS for sm_80, sm_90, not for this device (Fake GPU, sm_89): "
                         "JIT from PTX"),
            "%s", logs);
  CHECK(fake_count("jit") == 1 && count_entries() == 1);
  CHECK(load_src(art, len, NULL) == FGL_LOAD_CACHE);
  unsetenv("FAKE_CUDA_CC");
  /* the JIT and the cache saw the PTX without the sections: the plain
   * artifact has the same key (a hit), and the entry holds no section */
  fake_reset();
  setenv("FAKE_CUDA_CC", "89", 1);
  CHECK(load_src(ptx, strlen(ptx), NULL) == FGL_LOAD_CACHE && fake_count("jit") == 0);
  unsetenv("FAKE_CUDA_CC");
  DIR *d = opendir(cache_dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
    size_t el;
    char *entry = tl_read_file(p, &el);
    CHECK(entry && el > CACHE_HEADER_SIZE + strlen(ptx) &&
          !strstr(entry + CACHE_HEADER_SIZE, "fusec-sass"));
    free(entry);
  }
  if (d)
    closedir(d);
  /* the file path too */
  char path[600];
  snprintf(path, sizeof path, "%s/../sass_artifact.ptx", cache_dir);
  FILE *f = fopen(path, "wb");
  fwrite(art, 1, len, f);
  fclose(f);
  fgl_module *fm;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_file(path, &o, &fm, &e) == FGL_OK, "%s", e.msg);
  fgl_load_source src = FGL_LOAD_JIT;
  CHECK(fgl_module_load_source(fm, &src, NULL) == FGL_OK && src == FGL_LOAD_SASS);
  fgl_module_free(fm, NULL);
  unlink(path);
  free(art);
  free(cubin);
}

/* art with the first occurrence of find replaced, loaded: JIT, and the
 * log says want. */
static void expect_fallback(const char *art, const char *find, const char *repl, const char *want) {
  char *bad = tl_replace(art, find, repl);
  clear_cache();
  logs[0] = 0;
  fake_reset();
  CHECK_MSG(load_src(bad, strlen(bad), NULL) == FGL_LOAD_JIT, "%s -> %s", find, repl);
  CHECK_MSG(strstr(logs, want) && strstr(logs, "JIT from PTX"), "%s -> %s: want '%s' in:\n%s", find,
            repl, want, logs);
  CHECK(fake_count("jit") == 1);
  free(bad);
}

static void test_fallbacks(const char *ptx) {
  size_t cn, len;
  char *cubin = fake_cubin(ptx, &cn);
  const char *arch = "sm_90";
  char *art = with_sections(ptx, 1, &arch, &cubin, &cn, &len);
  const char *data = strstr(art, "// fusec-sass ");
  data = strchr(data, '\n') + 1; /* the first base64 line */
  char line[8] = {0}, repl[8] = {0};
  memcpy(line, data, 7); /* "// RkFL" */
  memcpy(repl, line, 7);
  repl[3] = '*';
  expect_fallback(art, line, repl, "the SASS for sm_90 is unusable (bad base64");
  repl[3] = line[3] == 'A' ? 'B' : 'A'; /* still base64: the checksum */
  expect_fallback(art, line, repl, "unusable (checksum mismatch (corrupt))");
  char hdr[64];
  snprintf(hdr, sizeof hdr, "bytes %zu ", cn);
  expect_fallback(art, hdr, "bytes 7 ",
                  "unusable (it holds more than the 7 bytes its header says)");
  char hdr2[64];
  snprintf(hdr2, sizeof hdr2, "bytes %zu ", cn + 5);
  expect_fallback(art, hdr, hdr2, "header says");
  /* the PTX changed after fusec assembled it: the SASS is stale */
  expect_fallback(art, ".address_size 64", ".address_size 64 ", "assembled from another PTX");
  expect_fallback(art, "fusec-sass sm_90 bytes", "fusec-sass sm_9x bytes",
                  "malformed SASS section header");
  expect_fallback(art, "// fusec-sass-end", "// fusec-sass-nd", "has no '// fusec-sass-end' line");
  expect_fallback(art, "// fusec-sass-end", "//fusec-sass-end", "a line that is not '// <base64>'");
  free(art);

  /* well formed, but the driver refuses it (not the fake driver's cubin) */
  char junk[] = "not a cubin for this driver";
  char *jp = junk;
  size_t jn = sizeof junk;
  art = with_sections(ptx, 1, &arch, &jp, &jn, &len);
  clear_cache();
  logs[0] = 0;
  fake_reset();
  CHECK(load_src(art, len, NULL) == FGL_LOAD_JIT);
  CHECK_MSG(strstr(logs, "the driver refused the SASS for sm_90 (") && strstr(logs, "JIT from PTX"),
            "%s", logs);
  CHECK(fake_count("modload") == 2 && fake_count("jit") == 1);
  free(art);

  /* a plan error still names its line: the plan ends before the sections */
  char *badplan = tl_replace(ptx, "// temp 0 bytes 4096", "// temp 0 bytes x4096");
  art = with_sections(badplan, 1, &arch, &cubin, &cn, &len);
  fgl_load_options o = opts();
  fgl_module *m;
  fgl_error e = {0};
  CHECK(fgl_module_load_data(art, len, &o, &m, &e) == FGL_ERR_PLAN);
  CHECK_MSG(strstr(e.msg, "line 10"), "%s", e.msg);
  free(art);
  free(badplan);
  free(cubin);
  fgl_load_source src;
  CHECK(fgl_module_load_source(NULL, &src, &e) == FGL_ERR_INVALID_ARGUMENT);
}

int main(void) {
  void *h = dlopen(getenv("FGL_LIBCUDA"), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "set FGL_LIBCUDA to the fake driver\n");
    return 1;
  }
  fake_count = (long (*)(const char *))dlsym(h, "fake_cuda_count");
  fake_reset = (void (*)(void))dlsym(h, "fake_cuda_reset");
  const char *base = getenv("FUSEC_CACHE_DIR");
  snprintf(cache_dir, sizeof cache_dir, "%s/sass", base ? base : "/tmp/fgl-test-sass");
  mkdir(base ? base : "/tmp/fgl-test-sass", 0700);
  mkdir(cache_dir, 0700);
  char *ptx = tl_read_file(FGL_FIXTURES "/add.ptx", NULL);
  test_roundtrip();
  test_sass_used(ptx);
  test_fallbacks(ptx);
  free(ptx);
  TL_DONE("test_loader_sass");
}
