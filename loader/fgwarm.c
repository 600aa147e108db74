/* fgwarm: fills the cubin cache at install time, so that a deployed
 * service's first load of an artifact skips the PTX JIT (docs/loader.md,
 * "Warming the cache"). For each artifact: load it as the service would
 * (device 0, or the current CUDA_VISIBLE_DEVICES's first), which compiles
 * the PTX for this GPU and stores the cubin, then load it again to check
 * that the cache now serves it.
 *   fgwarm [--cache-dir DIR] [--opt-level N] ARTIFACT...
 * Exit status 0 when every artifact is served by the cache (or carries SASS
 * for this GPU: nothing to cache), 1 when one fails to load or the cache
 * did not keep it, 2 on bad usage. Links only libfgload. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fgload.h"

static void log_cb(void *user, fgl_log_level level, const char *msg) {
  (void)user;
  if (level == FGL_LOG_WARN)
    fprintf(stderr, "fgwarm: %s\n", msg);
}

static int usage(FILE *f, int rc) {
  fputs("usage: fgwarm [--cache-dir DIR] [--opt-level N] ARTIFACT...\n"
        "  Compiles each fusec artifact for this machine's GPU (device 0) and stores the\n"
        "  cubin in the cache libfgload reads (--cache-dir, else $FUSEC_CACHE_DIR,\n"
        "  $XDG_CACHE_HOME/fusec, ~/.cache/fusec), so that the first load of a deployed\n"
        "  service is a cache hit. Run it as the user the service runs as, with the\n"
        "  same cache settings (the opt level must match the service's jit_opt_level;\n"
        "  default 4).\n",
        f);
  return rc;
}

static int warm(const char *path, const fgl_load_options *o) {
  fgl_module *m;
  fgl_error e;
  if (fgl_module_load_file(path, o, &m, &e) != FGL_OK) {
    fprintf(stderr, "fgwarm: %s: %s\n", path, e.msg);
    return 1;
  }
  fgl_load_source src = FGL_LOAD_JIT;
  fgl_load_stats st;
  fgl_device_info di;
  fgl_module_load_source(m, &src, NULL);
  fgl_module_load_stats(m, &st, NULL);
  fgl_module_device_info(m, &di, NULL);
  fgl_module_free(m, NULL);
  if (src == FGL_LOAD_SASS) {
    printf("fgwarm: %s: carries SASS for this GPU (%s, sm_%d%d): nothing to cache\n", path, di.name,
           di.cc_major, di.cc_minor);
    return 0;
  }
  if (src == FGL_LOAD_CACHE) {
    printf("fgwarm: %s: already in the cache (%.1f ms)\n", path, st.total_ms);
    return 0;
  }
  /* compiled: the next load must be a hit */
  fgl_load_source again = FGL_LOAD_JIT;
  if (fgl_module_load_file(path, o, &m, &e) != FGL_OK) {
    fprintf(stderr, "fgwarm: %s: %s\n", path, e.msg);
    return 1;
  }
  fgl_module_load_source(m, &again, NULL);
  fgl_module_free(m, NULL);
  if (again != FGL_LOAD_CACHE) {
    fprintf(stderr,
            "fgwarm: %s: compiled (%.0f ms), but the cache did not keep it (FUSEC_CACHE=0, or the "
            "warnings above)\n",
            path, st.jit_ms);
    return 1;
  }
  printf("fgwarm: %s: compiled for %s (sm_%d%d) in %.0f ms and cached\n", path, di.name,
         di.cc_major, di.cc_minor, st.jit_ms);
  return 0;
}

int main(int argc, char **argv) {
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.log = log_cb;
  int first = 0, rc = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h"))
      return usage(stdout, 0);
    if (!strcmp(a, "--cache-dir") || !strcmp(a, "--opt-level")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "fgwarm: error: %s needs a value\n", a);
        return usage(stderr, 2);
      }
      const char *v = argv[++i];
      if (a[2] == 'c') {
        o.cache_dir = v;
        continue;
      }
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || end == v || n < 0 || n > 4) {
        fprintf(stderr, "fgwarm: error: --opt-level takes 0..4, got '%s'\n", v);
        return 2;
      }
      o.jit_opt_level = (int)n;
      continue;
    }
    if (a[0] == '-' && a[1]) {
      fprintf(stderr, "fgwarm: error: unknown option '%s'\n", a);
      return usage(stderr, 2);
    }
    if (!first)
      first = i;
  }
  if (!first) {
    fputs("fgwarm: error: no artifact\n", stderr);
    return usage(stderr, 2);
  }
  for (int i = first; i < argc; i++) {
    if (!strcmp(argv[i], "--cache-dir") || !strcmp(argv[i], "--opt-level")) {
      i++;
      continue;
    }
    if (warm(argv[i], &o))
      rc = 1;
  }
  return rc;
}
