/* The cubin cache: key, entry format, and every fault case through the JIT
 * seam (no driver needed): truncated, flipped byte, empty, wrong magic, wrong
 * version, foreign key, a directory where the file should be, unreadable
 * entry, missing/read-only directory, 8 processes racing on one entry. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache.h"
#include "tl.h"

static char logbuf[16384];
static void logcb(void *u, fgl_log_level lv, const char *msg) {
  (void)u;
  if (lv < FGL_LOG_WARN)
    return;
  size_t n = strlen(logbuf);
  snprintf(logbuf + n, sizeof logbuf - n, "%s\n", msg);
}

static int jit_calls;
static size_t jit_payload = 64;
/* Stand-in for the driver JIT: a deterministic "cubin" derived from the PTX. */
static int fake_jit(void *ctx, const char *ptx, size_t len, const fgl_jit_opts *o, void **cubin,
                    size_t *n, char *err, size_t errlen) {
  (void)ctx;
  (void)o;
  jit_calls++;
  if (strstr(ptx, "FAIL")) {
    snprintf(err, errlen, "fake jit: FAIL");
    return -1;
  }
  unsigned char *b = malloc(jit_payload);
  uint64_t h = XXH3_64bits(ptx, len);
  for (size_t i = 0; i < jit_payload; i++)
    b[i] = (unsigned char)(h >> (8 * (i % 8))) ^ (unsigned char)i;
  if (jit_payload >= 6)
    memcpy(b, "CUBIN:", 6);
  *cubin = b;
  *n = jit_payload;
  return 0;
}

static int expected_cubin(const char *ptx, const void *cubin, size_t n) {
  void *want;
  size_t wn;
  char err[64];
  int saved = jit_calls;
  fake_jit(NULL, ptx, strlen(ptx), NULL, &want, &wn, err, sizeof err);
  jit_calls = saved;
  int ok = wn == n && memcmp(want, cubin, n) == 0;
  free(want);
  return ok;
}

static fgl_cache_cfg cfg_for(const char *dir) {
  fgl_cache_cfg c = {0};
  c.dir = dir;
  c.cc_major = 9;
  c.cc_minor = 0;
  c.driver_version = 12040;
  c.jit.opt_level = 4;
  c.log = logcb;
  return c;
}

static const char *PTX = "// fusec-plan 2\n.version 7.8\n.target sm_90\n";

/* One cache_get; returns hit (0/1) or -1 on failure; checks the cubin. */
static int get(const fgl_cache_cfg *c) {
  void *cubin = NULL;
  size_t n = 0;
  int hit = -1;
  char err[256];
  if (fgl_cache_get(c, PTX, strlen(PTX), fake_jit, NULL, &cubin, &n, &hit, NULL, err, sizeof err) !=
      0)
    return -1;
  CHECK_MSG(expected_cubin(PTX, cubin, n), "wrong cubin returned");
  free(cubin);
  return hit;
}

static void entry_path(const fgl_cache_cfg *c, char *buf, size_t n) {
  fgl_cache_key k;
  fgl_cache_key_compute(c, PTX, strlen(PTX), &k);
  snprintf(buf, n, "%s/%s.cubin", c->dir, k.hex);
}

static int entry_valid(const fgl_cache_cfg *c) {
  char path[512];
  entry_path(c, path, sizeof path);
  size_t len;
  char *b = tl_read_file(path, &len);
  if (!b)
    return 0;
  fgl_cache_key k;
  fgl_cache_key_compute(c, PTX, strlen(PTX), &k);
  const void *pl;
  size_t pn;
  char why[128];
  int ok = fgl_cache_entry_decode(&k, b, len, &pl, &pn, why, sizeof why) == 0 &&
           expected_cubin(PTX, pl, pn);
  free(b);
  return ok;
}

static char root[256];
static int case_no;
static void fresh_dir(char *out, size_t n) {
  snprintf(out, n, "%s/c%d", root, case_no++);
  mkdir(out, 0755);
}

static void rm_rf(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0)
    fprintf(stderr, "rm -rf %s failed\n", path);
}

static void test_key(void) {
  fgl_cache_cfg c = cfg_for("/x");
  fgl_cache_key k0, k;
  fgl_cache_key_compute(&c, PTX, strlen(PTX), &k0);
  CHECK(strlen(k0.hex) == 32 && strspn(k0.hex, "0123456789abcdef") == 32);
  fgl_cache_key_compute(&c, PTX, strlen(PTX), &k);
  CHECK(!memcmp(k.bytes, k0.bytes, 16));
  /* Golden value: the key format is part of the cache's contract (docs/loader.md); it
   * changes with FGL_ABI_VERSION (3 since plan version 2's symbolic sizes). */
  CHECK_MSG(!strcmp(k0.hex, "f2e9b283f7e8ae59cb9c9d5313962ef2") || getenv("FGL_PRINT_KEY"),
            "key %s", k0.hex);
  if (getenv("FGL_PRINT_KEY"))
    printf("key %s\n", k0.hex);
  /* every component changes the key */
  fgl_cache_cfg v;
  v = c;
  v.cc_major = 8;
  fgl_cache_key_compute(&v, PTX, strlen(PTX), &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  v = c;
  v.cc_minor = 9;
  fgl_cache_key_compute(&v, PTX, strlen(PTX), &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  v = c;
  v.driver_version = 12050;
  fgl_cache_key_compute(&v, PTX, strlen(PTX), &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  v = c;
  v.jit.opt_level = 3;
  fgl_cache_key_compute(&v, PTX, strlen(PTX), &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  fgl_cache_key_compute(&c, PTX, strlen(PTX) - 1, &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  char *p2 = strdup(PTX);
  p2[5] ^= 1;
  fgl_cache_key_compute(&c, p2, strlen(p2), &k);
  CHECK(memcmp(k.bytes, k0.bytes, 16));
  free(p2);
  /* the directory does not enter the key */
  v = c;
  v.dir = "/y";
  fgl_cache_key_compute(&v, PTX, strlen(PTX), &k);
  CHECK(!memcmp(k.bytes, k0.bytes, 16));
}

static void test_resolve(void) {
  char buf[512];
  int tl = 0;
  unsetenv("FUSEC_CACHE");
  setenv("FUSEC_CACHE_DIR", "/a/b", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  CHECK(!strcmp(fgl_cache_resolve_dir("/over", 1, buf, sizeof buf, &tl), "/over"));
  CHECK(!strcmp(fgl_cache_resolve_dir(NULL, 1, buf, sizeof buf, &tl), "/a/b"));
  unsetenv("FUSEC_CACHE_DIR");
  CHECK(!strcmp(fgl_cache_resolve_dir(NULL, 1, buf, sizeof buf, &tl), "/xdg/fusec"));
  unsetenv("XDG_CACHE_HOME");
  CHECK(!strcmp(fgl_cache_resolve_dir(NULL, 1, buf, sizeof buf, &tl), "/home/u/.cache/fusec"));
  unsetenv("HOME");
  CHECK(fgl_cache_resolve_dir(NULL, 1, buf, sizeof buf, &tl) == NULL);
  CHECK(fgl_cache_resolve_dir("/over", 0, buf, sizeof buf, &tl) == NULL);
  setenv("FUSEC_CACHE", "0", 1);
  CHECK(fgl_cache_resolve_dir("/over", 1, buf, sizeof buf, &tl) == NULL);
  unsetenv("FUSEC_CACHE");
  /* a path that does not fit: NULL, and the caller is told why */
  char longdir[700];
  memset(longdir, 'a', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = 0;
  CHECK(fgl_cache_resolve_dir(longdir, 1, buf, sizeof buf, &tl) == NULL && tl == 1);
  CHECK(fgl_cache_resolve_dir("/over", 1, buf, sizeof buf, &tl) != NULL && tl == 0);
}

static void test_format(void) {
  fgl_cache_key k;
  fgl_cache_cfg c = cfg_for("/x");
  fgl_cache_key_compute(&c, PTX, strlen(PTX), &k);
  const char payload[] = "0123456789abcdef";
  size_t n;
  unsigned char *e = fgl_cache_entry_encode(&k, payload, 16, &n);
  CHECK(n == CACHE_HEADER_SIZE + 16);
  CHECK(!memcmp(e, "FGLCUBIN", 8));
  CHECK(e[8] == CACHE_ENTRY_VERSION && e[9] == 0 && e[10] == 0 && e[11] == 0);
  CHECK(e[12] == CACHE_HEADER_SIZE && e[13] == 0);
  CHECK(e[16] == 16 && e[17] == 0 && e[23] == 0);
  CHECK(!memcmp(e + 24, k.bytes, 16));
  uint64_t h = XXH3_64bits(payload, 16), got = 0;
  for (int i = 0; i < 8; i++)
    got |= (uint64_t)e[40 + i] << (8 * i);
  CHECK(got == h);
  uint64_t in = 0;
  for (int i = 0; i < 8; i++)
    in |= (uint64_t)e[48 + i] << (8 * i);
  CHECK(in == k.inputs);
  CHECK(!memcmp(e + 56, payload, 16));
  const void *pl;
  size_t pn;
  char why[256];
  CHECK(fgl_cache_entry_decode(&k, e, n, &pl, &pn, why, sizeof why) == 0 && pn == 16 &&
        !memcmp(pl, payload, 16));
  struct {
    const char *name;
    size_t len;
    int off;
    unsigned char x;
    const char *why;
  } bad[] = {
      {"empty", 0, -1, 0, "empty file"},
      {"short header", 20, -1, 0, "truncated header"},
      {"truncated payload", CACHE_HEADER_SIZE + 8, -1, 0, "(truncated)"},
      {"magic", 0, 0, 'X', "bad magic"},
      {"version", 0, 8, 0x10, "entry format version"},
      {"header size", 0, 12, 1, "entry format version"},
      {"length", 0, 16, 1, "length mismatch"},
      {"key", 0, 30, 1, "another key"},
      {"checksum", 0, 44, 1, "checksum mismatch"},
      {"inputs", 0, 50, 1, "other inputs"},
      {"payload", 0, 58, 0x80, "checksum mismatch"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    unsigned char *c2 = malloc(n + 8);
    memcpy(c2, e, n);
    size_t len = bad[i].len ? bad[i].len : (bad[i].off < 0 ? 0 : n);
    if (bad[i].off >= 0)
      c2[bad[i].off] ^= bad[i].x;
    why[0] = 0;
    CHECK_MSG(fgl_cache_entry_decode(&k, c2, len, &pl, &pn, why, sizeof why) == -1, "%s accepted",
              bad[i].name);
    CHECK_MSG(strstr(why, bad[i].why), "%s: '%s'", bad[i].name, why);
    free(c2);
  }
  /* extra bytes after the payload */
  unsigned char *c3 = malloc(n + 1);
  memcpy(c3, e, n);
  c3[n] = 0;
  CHECK(fgl_cache_entry_decode(&k, c3, n + 1, &pl, &pn, why, sizeof why) == -1 &&
        strstr(why, "length mismatch"));
  free(c3);
  /* zero-length payload */
  size_t zn;
  unsigned char *z = fgl_cache_entry_encode(&k, "", 0, &zn);
  CHECK(fgl_cache_entry_decode(&k, z, zn, &pl, &pn, why, sizeof why) == -1 &&
        strstr(why, "zero-length"));
  free(z);
  free(e);
}

typedef void (*fault_fn)(const char *path);
static void f_truncate(const char *p) { CHECK(truncate(p, CACHE_HEADER_SIZE + 10) == 0); }
static void f_truncate_header(const char *p) { CHECK(truncate(p, 7) == 0); }
static void f_empty(const char *p) { CHECK(truncate(p, 0) == 0); }
static void patch(const char *p, long off, unsigned char x) {
  int fd = open(p, O_RDWR);
  unsigned char c;
  CHECK(pread(fd, &c, 1, off) == 1);
  c ^= x;
  CHECK(pwrite(fd, &c, 1, off) == 1);
  close(fd);
}
static void f_flip_payload(const char *p) { patch(p, CACHE_HEADER_SIZE + 3, 0x01); }
static void f_flip_last(const char *p) {
  struct stat st;
  stat(p, &st);
  patch(p, (long)st.st_size - 1, 0x80);
}
static void f_magic(const char *p) { patch(p, 0, 'F' ^ 'X'); }
static void f_version(const char *p) { patch(p, 8, 0x03); }
static void f_foreign(const char *p) {
  FILE *f = fopen(p, "wb");
  fputs("\177ELF this is not a cache entry at all, but it is long enough to hold a header", f);
  fclose(f);
}
static void f_other_key(const char *p) { patch(p, 24, 0xff); }
static void f_dir(const char *p) { CHECK(unlink(p) == 0 && mkdir(p, 0755) == 0); }
/* a FIFO in the entry's place (a plain open would block forever) */
static void f_fifo(const char *p) { CHECK(unlink(p) == 0 && mkfifo(p, 0644) == 0); }
/* a link in the entry's place: not followed */
static void f_link(const char *p) {
  char target[600];
  snprintf(target, sizeof target, "%s.target", p);
  CHECK(rename(p, target) == 0 && symlink(target, p) == 0);
}
/* the same key, with a valid checksum, but made from other inputs */
static void f_other_inputs(const char *p) { patch(p, 48, 0x5a); }

static void test_faults(void) {
  struct {
    const char *name;
    fault_fn fn;
    const char *log;
  } faults[] = {
      {"truncated payload", f_truncate, "truncated"},
      {"truncated header", f_truncate_header, "truncated header"},
      {"zero length", f_empty, "empty file"},
      {"flipped payload byte", f_flip_payload, "checksum mismatch"},
      {"flipped last byte", f_flip_last, "checksum mismatch"},
      {"wrong magic", f_magic, "bad magic"},
      {"wrong version", f_version, "entry format version"},
      {"foreign file", f_foreign, "bad magic"},
      {"entry of another key", f_other_key, "another key"},
      {"directory in place of the file", f_dir, "not a regular file (a directory)"},
      {"FIFO in place of the file", f_fifo, "not a regular file"},
      {"link in place of the file", f_link, "unreadable"},
      {"entry made from other inputs", f_other_inputs, "other inputs"},
  };
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    char dir[300], path[512];
    fresh_dir(dir, sizeof dir);
    fgl_cache_cfg c = cfg_for(dir);
    entry_path(&c, path, sizeof path);
    jit_calls = 0;
    logbuf[0] = 0;
    CHECK_MSG(get(&c) == 0 && jit_calls == 1, "%s: first get", faults[i].name);
    CHECK_MSG(get(&c) == 1 && jit_calls == 1, "%s: second get is not a hit", faults[i].name);
    CHECK(entry_valid(&c));
    faults[i].fn(path);
    CHECK_MSG(get(&c) == 0 && jit_calls == 2, "%s: fault not detected", faults[i].name);
    CHECK_MSG(strstr(logbuf, faults[i].log) && strstr(logbuf, "rebuilding"), "%s: log was '%s'",
              faults[i].name, logbuf);
    CHECK_MSG(entry_valid(&c), "%s: entry not replaced", faults[i].name);
    CHECK_MSG(get(&c) == 1 && jit_calls == 2, "%s: not a hit after the rebuild", faults[i].name);
    rm_rf(dir);
  }
  /* a non-empty directory in place of the file: cannot be replaced; runs on */
  {
    char dir[300], path[512], sub[600];
    fresh_dir(dir, sizeof dir);
    fgl_cache_cfg c = cfg_for(dir);
    entry_path(&c, path, sizeof path);
    mkdir(path, 0755);
    snprintf(sub, sizeof sub, "%s/x", path);
    mkdir(sub, 0755);
    jit_calls = 0;
    logbuf[0] = 0;
    CHECK(get(&c) == 0 && get(&c) == 0 && jit_calls == 2);
    CHECK_MSG(strstr(logbuf, "cannot remove the directory"), "log '%s'", logbuf);
    rm_rf(dir);
  }
  /* JIT failure is the only failure */
  {
    char dir[300], err[256] = "";
    fresh_dir(dir, sizeof dir);
    fgl_cache_cfg c = cfg_for(dir);
    void *cubin;
    size_t n;
    int hit;
    const char *bad = "FAIL";
    CHECK(fgl_cache_get(&c, bad, 4, fake_jit, NULL, &cubin, &n, &hit, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "fake jit: FAIL") != NULL);
    rm_rf(dir);
  }
}

/* A cache directory that cannot be created or written: no cache, no failure. */
static void test_unusable_dirs(void) {
  char file[300], dir[600];
  snprintf(file, sizeof file, "%s/regular-file", root);
  FILE *f = fopen(file, "w");
  fputs("x", f);
  fclose(f);
  snprintf(dir, sizeof dir, "%s/sub/cache", file); /* mkdir fails: ENOTDIR */
  fgl_cache_cfg c = cfg_for(dir);
  jit_calls = 0;
  logbuf[0] = 0;
  CHECK(get(&c) == 0 && get(&c) == 0 && jit_calls == 2);
  CHECK_MSG(strstr(logbuf, "is unusable") && strstr(logbuf, "running without a cache"), "log '%s'",
            logbuf);
  /* an existing directory in which no file can be created, even by root */
  c = cfg_for("/proc");
  jit_calls = 0;
  logbuf[0] = 0;
  CHECK(get(&c) == 0 && jit_calls == 1);
  CHECK_MSG(strstr(logbuf, "cannot write in /proc"), "log '%s'", logbuf);
  /* no directory at all (disabled) */
  c = cfg_for(NULL);
  jit_calls = 0;
  CHECK(get(&c) == 0 && jit_calls == 1);
}

/* The directory's owner and mode: created 0700; one others may write, or
 * another user's, is not used unless shared is set. */
static void test_trust(void) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/new/cache", root);
  fgl_cache_cfg c = cfg_for(dir);
  jit_calls = 0;
  CHECK(get(&c) == 0 && get(&c) == 1 && jit_calls == 1);
  struct stat st;
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  char open_dir[300];
  fresh_dir(open_dir, sizeof open_dir);
  chmod(open_dir, 0777);
  c = cfg_for(open_dir);
  jit_calls = 0;
  logbuf[0] = 0;
  CHECK(get(&c) == 0 && get(&c) == 0 && jit_calls == 2);
  CHECK_MSG(strstr(logbuf, "writable by others (mode 777)") &&
                strstr(logbuf, "running without a cache"),
            "log '%s'", logbuf);
  c.shared = 1;
  jit_calls = 0;
  CHECK(get(&c) == 0 && get(&c) == 1 && jit_calls == 1);
  if (geteuid() == 0) {
    char other[300];
    fresh_dir(other, sizeof other);
    CHECK(chown(other, 65534, 65534) == 0);
    c = cfg_for(other);
    logbuf[0] = 0;
    jit_calls = 0;
    CHECK(get(&c) == 0 && get(&c) == 0 && jit_calls == 2);
    CHECK_MSG(strstr(logbuf, "owned by another user"), "log '%s'", logbuf);
  }
}

/* Temp files of writers that died are removed when an entry is written;
 * a live writer's stays. refresh replaces a valid entry. */
static void test_stale_temps_and_refresh(void) {
  char dir[300], dead[600], live[600], old[600];
  fresh_dir(dir, sizeof dir);
  chmod(dir, 0700);
  fflush(NULL);
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  waitpid(child, NULL, 0); /* a pid no longer alive */
  snprintf(dead, sizeof dead, "%s/.0123.tmp.%ld.AAAAAA", dir, (long)child);
  snprintf(live, sizeof live, "%s/.0123.tmp.%ld.BBBBBB", dir, (long)getpid());
  snprintf(old, sizeof old, "%s/.0123.tmp.%ld.CCCCCC", dir, (long)getpid());
  FILE *f;
  if ((f = fopen(dead, "w")))
    fclose(f);
  if ((f = fopen(live, "w")))
    fclose(f);
  if ((f = fopen(old, "w")))
    fclose(f);
  struct timespec ts[2] = {{time(NULL) - 3 * 86400, 0}, {time(NULL) - 3 * 86400, 0}};
  CHECK(utimensat(AT_FDCWD, old, ts, 0) == 0);
  fgl_cache_cfg c = cfg_for(dir);
  jit_calls = 0;
  CHECK(get(&c) == 0 && jit_calls == 1); /* a miss writes an entry */
  CHECK(access(dead, F_OK) != 0);
  CHECK(access(old, F_OK) != 0);
  CHECK(access(live, F_OK) == 0);
  c.refresh = 1;
  CHECK(get(&c) == 0 && jit_calls == 2 && entry_valid(&c));
  c.refresh = 0;
  CHECK(get(&c) == 1 && jit_calls == 2);
}

/* Read-only directory and unreadable entry, for real: as root the test drops
 * to an unprivileged uid in a child (chmod does not stop root). */
static void test_permissions(void) {
  int as_root = geteuid() == 0;
  char ro[300], rw[300];
  fresh_dir(ro, sizeof ro);
  fresh_dir(rw, sizeof rw);
  /* pre-fill an entry in rw, then make it unreadable; rw itself stays
   * writable by the test user so the entry can be replaced */
  fgl_cache_cfg c = cfg_for(rw);
  CHECK(get(&c) == 0);
  char path[512];
  entry_path(&c, path, sizeof path);
  chmod(path, 0);
  chmod(ro, 0555);
  if (as_root) {
    CHECK(chown(rw, 65534, 65534) == 0);
    CHECK(chown(ro, 65534, 65534) == 0); /* its own, so that it is trusted, but read-only */
    chmod(root, 0755);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (as_root && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(77);
    int fails = 0;
    fgl_cache_cfg r = cfg_for(ro);
    jit_calls = 0;
    logbuf[0] = 0;
    if (get(&r) != 0 || get(&r) != 0 || jit_calls != 2)
      fails++;
    if (!strstr(logbuf, "cannot write in")) {
      fprintf(stderr, "read-only dir: log '%s'\n", logbuf);
      fails++;
    }
    fgl_cache_cfg w = cfg_for(rw);
    jit_calls = 0;
    logbuf[0] = 0;
    if (get(&w) != 0 || jit_calls != 1)
      fails++;
    if (!strstr(logbuf, "unreadable (Permission denied)")) {
      fprintf(stderr, "unreadable: log '%s'\n", logbuf);
      fails++;
    }
    if (get(&w) != 1 || jit_calls != 1) {
      fprintf(stderr, "unreadable entry not replaced\n");
      fails++;
    }
    _exit(fails + tl_failures ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
    printf("permissions: skipped (cannot drop privileges)\n");
  else
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "permission child failed (status %d)",
              status);
  chmod(ro, 0755);
  rm_rf(ro);
  rm_rf(rw);
}

/* 8 processes hammer one entry: reading, unlinking, rebuilding. No reader
 * may ever see a torn or wrong entry. */
static void test_race(void) {
  char dir[300];
  fresh_dir(dir, sizeof dir);
  int under_vg = getenv("FGL_TEST_UNDER_VALGRIND") != NULL;
  int iters = under_vg ? 15 : 150;
  size_t saved_payload = jit_payload;
  jit_payload = 1 << 20; /* 1 MiB: a torn write would show */
  int go[2];
  CHECK(pipe(go) == 0);
  pid_t kids[8];
  fflush(NULL);
  for (int i = 0; i < 8; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      close(go[1]);
      char b;
      if (read(go[0], &b, 1) < 0)
        _exit(3); /* wait for the start (EOF) */
      fgl_cache_cfg c = cfg_for(dir);
      c.log = NULL;
      char path[512];
      entry_path(&c, path, sizeof path);
      srand((unsigned)getpid());
      int hits = 0;
      tl_failures = 0;
      for (int k = 0; k < iters; k++) {
        int h = get(&c);
        if (h < 0)
          _exit(2);
        hits += h;
        if (rand() % 4 == 0)
          unlink(path);
      }
      _exit(tl_failures ? 1 : hits > 0 ? 0 : 4);
    }
  }
  close(go[0]);
  close(go[1]); /* all children start now */
  int bad = 0;
  for (int i = 0; i < 8; i++) {
    int st;
    waitpid(kids[i], &st, 0);
    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 4)) {
      fprintf(stderr, "race child %d: status %d\n", i, st);
      bad++;
    }
  }
  CHECK(bad == 0);
  /* no temporary files left behind; the entry (if present) is valid */
  DIR *d = opendir(dir);
  struct dirent *de;
  int leftovers = 0;
  while (d && (de = readdir(d)))
    if (strstr(de->d_name, ".tmp."))
      leftovers++;
  if (d)
    closedir(d);
  CHECK_MSG(leftovers == 0, "%d temporary files left", leftovers);
  fgl_cache_cfg c = cfg_for(dir);
  char path[512];
  entry_path(&c, path, sizeof path);
  if (access(path, F_OK) == 0)
    CHECK(entry_valid(&c));
  printf("race: 8 processes x %d gets, all consistent\n", iters);
  jit_payload = saved_payload;
  rm_rf(dir);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/fgl-cache-test-%d", (int)getpid());
  mkdir(root, 0755);
  test_key();
  test_resolve();
  test_format();
  test_faults();
  test_unusable_dirs();
  test_trust();
  test_stale_temps_and_refresh();
  test_permissions();
  test_race();
  rm_rf(root);
  TL_DONE("test_loader_cache");
}
