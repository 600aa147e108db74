/* The on-disk cubin cache (docs/loader.md, "Cubin cache").
 *
 * Key: XXH3-128 over (key-format tag, loader ABI version, compute capability,
 * driver version, JIT options, PTX length, PTX bytes). Entry file
 * <dir>/<32 hex digits of the key>.cubin:
 *
 *   offset  size  field
 *   0       8     magic "FGLCUBIN"
 *   8       4     entry format version (CACHE_ENTRY_VERSION), little-endian
 *   12      4     header size (CACHE_HEADER_SIZE), little-endian
 *   16      8     payload length in bytes, little-endian
 *   24      16    the key (XXH3-128, high 64 bits then low 64 bits, big-endian)
 *   40      8     XXH3-64 of the payload, little-endian
 *   48      8     XXH3-64 (seeded) of the key's inputs, little-endian: binds
 *                 the entry to what its key hashes, not only to the key
 *   56      ...   payload (the cubin)
 *
 * The JIT is a function pointer so tests can stand in for the driver. */
#ifndef FGL_CACHE_H
#define FGL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fgload.h"

#define CACHE_MAGIC "FGLCUBIN"
#define CACHE_ENTRY_VERSION 2
#define CACHE_HEADER_SIZE 56
#define CACHE_KEY_FORMAT "fgload-cubin-key-v1"

typedef struct fgl_jit_opts {
  int opt_level;
} fgl_jit_opts;

/* Compiles PTX (len bytes, NUL-terminated at ptx[len]) to a cubin allocated
 * with malloc. Returns 0, or -1 with a message in err. */
typedef int (*fgl_jit_fn)(void *ctx, const char *ptx, size_t len, const fgl_jit_opts *opts,
                          void **cubin, size_t *cubin_len, char *err, size_t errlen);

typedef struct fgl_cache_cfg {
  const char *dir;        /* resolved directory; NULL: no cache */
  int shared;             /* accept a directory others may write (FUSEC_CACHE_SHARED=1) */
  int refresh;            /* ignore an existing entry: JIT again and replace it */
  int cc_major, cc_minor; /* the device */
  int driver_version;
  fgl_jit_opts jit;
  fgl_log_fn log;
  void *log_user;
} fgl_cache_cfg;

typedef struct fgl_cache_key {
  uint8_t bytes[16];
  uint64_t inputs; /* a second, independent hash of the same inputs */
  char hex[33];
} fgl_cache_key;

void fgl_cache_key_compute(const fgl_cache_cfg *cfg, const char *ptx, size_t len,
                           fgl_cache_key *out);

/* The directory to use: override, else $FUSEC_CACHE_DIR, else
 * $XDG_CACHE_HOME/fusec, else $HOME/.cache/fusec. NULL (no cache) when
 * enabled is 0, FUSEC_CACHE=0, or no HOME, and when the path does not fit
 * buf (*too_long set: the caller says so). Does not create it. */
const char *fgl_cache_resolve_dir(const char *override, int enabled, char *buf, size_t buflen,
                                  int *too_long);

/* Serializes an entry (header + payload) into a malloc'd buffer. */
void *fgl_cache_entry_encode(const fgl_cache_key *key, const void *payload, size_t len,
                             size_t *out_len);
/* Checks an entry image against key; returns 0 and the payload span, or -1
 * with the reason in why ("truncated", "bad magic", ...). */
int fgl_cache_entry_decode(const fgl_cache_key *key, const void *data, size_t len,
                           const void **payload, size_t *payload_len, char *why, size_t whylen);

/* Returns the cubin for ptx: from the cache when a valid entry exists, else
 * from jit (and then stored). Cache faults are logged and never fail the call;
 * only a JIT failure does (-1, message in err). *hit tells which happened.
 * The directory is created 0700; one that is not the user's own, or that
 * others may write, is not used (a warning) unless cfg->shared: whoever can
 * write it can substitute the GPU code. Temp files of writers that died
 * are removed when an entry is written. */
int fgl_cache_get(const fgl_cache_cfg *cfg, const char *ptx, size_t len, fgl_jit_fn jit,
                  void *jit_ctx, void **cubin, size_t *cubin_len, int *hit, double *jit_ms,
                  char *err, size_t errlen);

#endif
