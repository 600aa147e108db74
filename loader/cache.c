/* The on-disk cubin cache: key, entry format, atomic replacement, faults. */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"

#define CACHE_MAX_ENTRY ((size_t)1 << 30)

static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

void fgl_cache_key_compute(const fgl_cache_cfg *cfg, const char *ptx, size_t len,
                           fgl_cache_key *out) {
  uint8_t head[sizeof CACHE_KEY_FORMAT + 5 * 4 + 8];
  size_t k = 0;
  memcpy(head, CACHE_KEY_FORMAT, sizeof CACHE_KEY_FORMAT); /* with its NUL */
  k += sizeof CACHE_KEY_FORMAT;
  put_le32(head + k, FGL_ABI_VERSION);
  k += 4;
  put_le32(head + k, (uint32_t)cfg->cc_major);
  k += 4;
  put_le32(head + k, (uint32_t)cfg->cc_minor);
  k += 4;
  put_le32(head + k, (uint32_t)cfg->driver_version);
  k += 4;
  put_le32(head + k, (uint32_t)cfg->jit.opt_level);
  k += 4;
  put_le64(head + k, (uint64_t)len);
  k += 8;
  XXH3_state_t *st = XXH3_createState();
  XXH128_hash_t h;
  if (st) {
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, head, k);
    XXH3_128bits_update(st, ptx, len);
    h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
  } else { /* no memory for the state: hash a concatenation-free fallback */
    XXH128_hash_t a = XXH3_128bits(head, k);
    h = XXH3_128bits_withSeed(ptx, len, a.low64 ^ a.high64);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  memcpy(out->bytes, c.digest, 16);
  /* the inputs again, through another hash: an entry must match both */
  out->inputs = XXH3_64bits_withSeed(ptx, len, XXH3_64bits_withSeed(head, k, 0x66676c6f6164ull));
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out->hex[2 * i] = hx[out->bytes[i] >> 4];
    out->hex[2 * i + 1] = hx[out->bytes[i] & 15];
  }
  out->hex[32] = 0;
}

const char *fgl_cache_resolve_dir(const char *override, int enabled, char *buf, size_t buflen,
                                  int *too_long) {
  const char *e = getenv("FUSEC_CACHE");
  *too_long = 0;
  if (!enabled || (e && !strcmp(e, "0")))
    return NULL;
  int n;
  if (override && *override)
    n = snprintf(buf, buflen, "%s", override);
  else if ((e = getenv("FUSEC_CACHE_DIR")) && *e)
    n = snprintf(buf, buflen, "%s", e);
  else if ((e = getenv("XDG_CACHE_HOME")) && *e)
    n = snprintf(buf, buflen, "%s/fusec", e);
  else if ((e = getenv("HOME")) && *e)
    n = snprintf(buf, buflen, "%s/.cache/fusec", e);
  else
    return NULL;
  if (n < 0 || (size_t)n >= buflen) {
    *too_long = 1;
    return NULL;
  }
  return buf;
}

void *fgl_cache_entry_encode(const fgl_cache_key *key, const void *payload, size_t len,
                             size_t *out_len) {
  uint8_t *b = malloc(CACHE_HEADER_SIZE + len);
  if (!b)
    return NULL;
  memcpy(b, CACHE_MAGIC, 8);
  put_le32(b + 8, CACHE_ENTRY_VERSION);
  put_le32(b + 12, CACHE_HEADER_SIZE);
  put_le64(b + 16, (uint64_t)len);
  memcpy(b + 24, key->bytes, 16);
  put_le64(b + 40, XXH3_64bits(payload, len));
  put_le64(b + 48, key->inputs);
  if (len)
    memcpy(b + CACHE_HEADER_SIZE, payload, len);
  *out_len = CACHE_HEADER_SIZE + len;
  return b;
}

int fgl_cache_entry_decode(const fgl_cache_key *key, const void *data, size_t len,
                           const void **payload, size_t *payload_len, char *why, size_t whylen) {
  const uint8_t *b = data;
  if (len == 0) {
    snprintf(why, whylen, "empty file");
    return -1;
  }
  if (len < CACHE_HEADER_SIZE) {
    snprintf(why, whylen, "truncated header (%zu bytes)", len);
    return -1;
  }
  if (memcmp(b, CACHE_MAGIC, 8) != 0) {
    snprintf(why, whylen, "bad magic (not a fgload cache entry)");
    return -1;
  }
  uint32_t ver = get_le32(b + 8), hs = get_le32(b + 12);
  if (ver != CACHE_ENTRY_VERSION || hs != CACHE_HEADER_SIZE) {
    snprintf(why, whylen, "entry format version %u (header %u bytes), expected version %d", ver, hs,
             CACHE_ENTRY_VERSION);
    return -1;
  }
  uint64_t pl = get_le64(b + 16);
  if (pl != len - CACHE_HEADER_SIZE) {
    snprintf(why, whylen, "length mismatch: header says %llu payload bytes, file holds %zu%s",
             (unsigned long long)pl, len - CACHE_HEADER_SIZE,
             pl > len - CACHE_HEADER_SIZE ? " (truncated)" : "");
    return -1;
  }
  if (memcmp(b + 24, key->bytes, 16) != 0) {
    snprintf(why, whylen, "the entry belongs to another key");
    return -1;
  }
  if (get_le64(b + 48) != key->inputs) {
    snprintf(why, whylen, "the entry was made from other inputs than its key's");
    return -1;
  }
  if (pl == 0) {
    snprintf(why, whylen, "zero-length payload");
    return -1;
  }
  if (XXH3_64bits(b + CACHE_HEADER_SIZE, (size_t)pl) != get_le64(b + 40)) {
    snprintf(why, whylen, "payload checksum mismatch (corrupt)");
    return -1;
  }
  *payload = b + CACHE_HEADER_SIZE;
  *payload_len = (size_t)pl;
  return 0;
}

/* mkdir -p; 0 when path is (now) a directory. */
static int make_dirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == 0) {
      char c = buf[i];
      buf[i] = 0;
      if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(path, &st) != 0)
    return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

typedef enum { READ_OK, READ_MISSING, READ_BAD } read_result;

/* Reads and checks the entry at path. READ_BAD means a present entry that
 * must be replaced (*is_dir when it is a directory). */
static read_result read_entry(const fgl_cache_cfg *cfg, const char *path, const fgl_cache_key *key,
                              void **cubin, size_t *cubin_len, int *is_dir) {
  *is_dir = 0;
  /* O_NONBLOCK: a FIFO in the entry's place must not block the open;
   * O_NOFOLLOW: a link is not an entry (it is replaced, not followed) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT)
      return READ_MISSING;
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: entry %s is unreadable (%s): rebuilding", path, strerror(errno));
    return READ_BAD;
  }
  struct stat st;
  int fst = fstat(fd, &st);
  if (fst != 0 || !S_ISREG(st.st_mode)) {
    *is_dir = fst == 0 && S_ISDIR(st.st_mode);
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: entry %s is not a regular file%s: rebuilding", path,
             *is_dir ? " (a directory)" : "");
    close(fd);
    return READ_BAD;
  }
  if ((size_t)st.st_size > CACHE_MAX_ENTRY) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: entry %s is implausibly large: rebuilding", path);
    close(fd);
    return READ_BAD;
  }
  size_t len = (size_t)st.st_size, got = 0;
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    close(fd);
    return READ_MISSING;
  }
  while (got < len) {
    ssize_t r = read(fd, buf + got, len - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  int rerr = errno;
  close(fd);
  if (got < len) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: reading entry %s failed (%s): rebuilding", path,
             got < len && rerr ? strerror(rerr) : "short read");
    free(buf);
    return READ_BAD;
  }
  const void *pl;
  size_t pll;
  char why[256];
  if (fgl_cache_entry_decode(key, buf, len, &pl, &pll, why, sizeof why) != 0) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: entry %s is invalid (%s): rebuilding", path, why);
    free(buf);
    return READ_BAD;
  }
  memmove(buf, pl, pll); /* the payload becomes the cubin buffer */
  *cubin = buf;
  *cubin_len = pll;
  return READ_OK;
}

/* Removes the temp files (".KEY.tmp.PID.XXXXXX") of writers that died
 * before renaming them: their process no longer exists, or they are a day
 * old (a writer on another machine sharing the directory). */
static void remove_stale_temps(const fgl_cache_cfg *cfg, const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  time_t now = time(NULL);
  for (struct dirent *de; (de = readdir(d));) {
    const char *t = de->d_name[0] == '.' ? strstr(de->d_name, ".tmp.") : NULL;
    if (!t)
      continue;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path)
      continue;
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    bool dead = pid > 0 && *end == '.' && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    if (dead || now - st.st_mtime > 24 * 3600) {
      if (unlink(path) == 0)
        fgl_logf(cfg->log, cfg->log_user, FGL_LOG_DEBUG,
                 "fgload cache: removed %s, left by a writer that died", path);
    }
  }
  closedir(d);
}

/* Whether dir may hold the cache: the user's own, and writable by nobody
 * else (whoever can write it can substitute the GPU code), unless the user
 * said it is shared on purpose. */
static bool dir_trusted(const fgl_cache_cfg *cfg, const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return false;
  if (cfg->shared)
    return true;
  if (st.st_uid != geteuid() || (st.st_mode & 022)) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: directory %s is %s (mode %03o): not used, since whoever can write it "
             "can substitute "
             "GPU code (FUSEC_CACHE_SHARED=1 uses it anyway): running without a cache",
             dir, st.st_uid != geteuid() ? "owned by another user" : "writable by others",
             (unsigned)(st.st_mode & 0777));
    return false;
  }
  return true;
}

/* Writes the entry through a temporary file, fsync and rename. Logs and gives
 * up on any failure (the caller runs on with its in-memory cubin). */
static void write_entry(const fgl_cache_cfg *cfg, const char *dir, const char *path,
                        const fgl_cache_key *key, const void *cubin, size_t len, int replace_dir) {
  size_t elen;
  uint8_t *img = fgl_cache_entry_encode(key, cubin, len, &elen);
  if (!img)
    return;
  remove_stale_temps(cfg, dir);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%ld.XXXXXX", dir, key->hex, (long)getpid());
  int fd = mkstemp(tmp);
  if (fd < 0) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: cannot write in %s (%s): running without caching this module", dir,
             strerror(errno));
    free(img);
    return;
  }
  (void)fchmod(fd, 0644);
  size_t put = 0;
  int ok = 1;
  while (put < elen) {
    ssize_t w = write(fd, img + put, elen - put);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      ok = 0;
      break;
    }
    put += (size_t)w;
  }
  if (ok && fsync(fd) != 0)
    ok = 0;
  int werr = errno;
  if (close(fd) != 0)
    ok = 0;
  free(img);
  if (!ok) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: writing %s failed (%s): not cached", tmp, strerror(werr));
    unlink(tmp);
    return;
  }
  if (replace_dir && rmdir(path) != 0 && errno != ENOENT) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: cannot remove the directory at %s (%s): not cached", path,
             strerror(errno));
    unlink(tmp);
    return;
  }
  if (rename(tmp, path) != 0) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
             "fgload cache: cannot rename into %s (%s): not cached", path, strerror(errno));
    unlink(tmp);
    return;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  fgl_logf(cfg->log, cfg->log_user, FGL_LOG_DEBUG, "fgload cache: stored %s (%zu bytes)", path,
           len);
}

int fgl_cache_get(const fgl_cache_cfg *cfg, const char *ptx, size_t len, fgl_jit_fn jit,
                  void *jit_ctx, void **cubin, size_t *cubin_len, int *hit, double *jit_ms,
                  char *err, size_t errlen) {
  fgl_cache_key key;
  char path[4096];
  const char *dir = cfg->dir;
  int is_dir = 0;
  *hit = 0;
  if (jit_ms)
    *jit_ms = 0;
  if (dir) {
    if (make_dirs(dir) != 0) {
      fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
               "fgload cache: directory %s is unusable (%s): running without a cache", dir,
               strerror(errno));
      dir = NULL;
    } else if (!dir_trusted(cfg, dir)) {
      dir = NULL;
    } else {
      fgl_cache_key_compute(cfg, ptx, len, &key);
      int n = snprintf(path, sizeof path, "%s/%s.cubin", dir, key.hex);
      if (n < 0 || (size_t)n >= sizeof path) {
        fgl_logf(cfg->log, cfg->log_user, FGL_LOG_WARN,
                 "fgload cache: path too long: running without a cache");
        dir = NULL;
      }
    }
  }
  if (dir && cfg->refresh) {
    fgl_logf(cfg->log, cfg->log_user, FGL_LOG_DEBUG, "fgload cache: replacing %s", path);
  } else if (dir) {
    read_result r = read_entry(cfg, path, &key, cubin, cubin_len, &is_dir);
    if (r == READ_OK) {
      *hit = 1;
      fgl_logf(cfg->log, cfg->log_user, FGL_LOG_DEBUG, "fgload cache: hit %s", path);
      return 0;
    }
    if (r == READ_MISSING)
      fgl_logf(cfg->log, cfg->log_user, FGL_LOG_DEBUG, "fgload cache: miss %s", path);
  }
  double t0 = fgl_now_ms();
  if (jit(jit_ctx, ptx, len, &cfg->jit, cubin, cubin_len, err, errlen) != 0)
    return -1;
  if (jit_ms)
    *jit_ms = fgl_now_ms() - t0;
  if (dir)
    write_entry(cfg, dir, path, &key, *cubin, *cubin_len, is_dir);
  return 0;
}
