/* Module loading (plan, driver, cache, JIT), graph instances, queries and the
 * small device helpers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sass.h"

void fgl_load_options_init(fgl_load_options *o) {
  if (!o)
    return;
  memset(o, 0, sizeof *o);
  o->cache = 1;
  o->jit_opt_level = 4;
}

fgl_status fgl_cuda_fail(fgl_module *m, fgl_error *err, CUresult r, const char *what) {
  (void)m;
  char t[200];
  return fgl_fail(err, FGL_ERR_CUDA, "%s failed: %s", what, fgl_cuda_error_text(r, t, sizeof t));
}

fgl_status fgl_ctx_enter(fgl_module *m, int *pushed, fgl_error *err) {
  CUcontext cur = NULL;
  *pushed = 0;
  m->cu->cuCtxGetCurrent(&cur);
  if (cur == m->ctx)
    return FGL_OK;
  CUresult r = m->cu->cuCtxPushCurrent(m->ctx);
  if (r != CUDA_SUCCESS)
    return fgl_cuda_fail(m, err, r, "cuCtxPushCurrent");
  *pushed = 1;
  return FGL_OK;
}

void fgl_ctx_leave(fgl_module *m, int pushed) {
  if (pushed) {
    CUcontext c;
    m->cu->cuCtxPopCurrent(&c);
  }
}

int fgl_driver_jit(void *ctx, const char *ptx, size_t len, const fgl_jit_opts *opts, void **cubin,
                   size_t *cubin_len, char *err, size_t errlen) {
  const fgl_cuda_api *cu = ctx;
  char elog[8192];
  elog[0] = 0;
  CUjit_option o[3] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *v[3] = {(void *)(uintptr_t)opts->opt_level, elog, (void *)(uintptr_t)sizeof elog};
  CUlinkState ls = NULL;
  char t[200];
  CUresult r = cu->cuLinkCreate(3, o, v, &ls);
  if (r != CUDA_SUCCESS) {
    snprintf(err, errlen, "cuLinkCreate failed: %s", fgl_cuda_error_text(r, t, sizeof t));
    return -1;
  }
  /* ptx[len] is a NUL: the driver wants NUL-terminated PTX */
  r = cu->cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)ptx, len + 1, "fusec-artifact.ptx", 0, NULL,
                        NULL);
  void *img = NULL;
  size_t n = 0;
  if (r == CUDA_SUCCESS)
    r = cu->cuLinkComplete(ls, &img, &n);
  if (r != CUDA_SUCCESS) {
    elog[sizeof elog - 1] = 0;
    snprintf(err, errlen, "PTX JIT failed: %s%s%s", fgl_cuda_error_text(r, t, sizeof t),
             elog[0] ? ": " : "", elog);
    cu->cuLinkDestroy(ls);
    return -1;
  }
  *cubin = malloc(n ? n : 1);
  if (!*cubin) {
    cu->cuLinkDestroy(ls);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  memcpy(*cubin, img, n);
  *cubin_len = n;
  cu->cuLinkDestroy(ls);
  return 0;
}

static void module_destroy(fgl_module *m) {
  if (!m)
    return;
  if (m->mod) {
    int pushed = 0;
    if (fgl_ctx_enter(m, &pushed, NULL) == FGL_OK) {
      m->cu->cuModuleUnload(m->mod);
      fgl_ctx_leave(m, pushed);
    }
  }
  if (m->own_primary)
    m->cu->cuDevicePrimaryCtxRelease(m->device);
  for (int i = 0; i < m->plan.n_graphs; i++) {
    if (m->funcs)
      free(m->funcs[i]);
    if (m->resident_fit)
      free(m->resident_fit[i]);
  }
  free(m->funcs);
  free(m->resident_fit);
  free(m->resolved);
  pthread_mutex_destroy(&m->resolve_lock);
  plan_free(&m->plan);
  free(m);
}

/* A kernel whose CTAs wait for one another (the row + column form's
 * combiners) runs only if all of them are resident at once: otherwise it
 * would hang, so it is refused (an artifact compiled for more SMs than
 * this GPU has). A symbolic grid is checked at each run against the count
 * kept in *fit. */
static fgl_status check_resident(fgl_module *m, const plan_graph *g, int k, const char *name,
                                 CUfunction f, long long *fit_out, fgl_error *err) {
  const fgl_cuda_api *cu = m->cu;
  const plan_kernel *pk = &g->kernels[k];
  int sms = 0, per_sm = 0;
  CUresult r;
  if ((r = cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, m->device)))
    return fgl_cuda_fail(m, err, r, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  int threads = (int)(pk->block[0] * pk->block[1] * pk->block[2]);
  if ((r = cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, threads, pk->smem)))
    return fgl_cuda_fail(m, err, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  long long fit = (long long)per_sm * sms;
  /* a symbolic grid: the shape of one cluster stands for it */
  unsigned grid[3] = {(unsigned)pk->cluster, 1, 1};
  if (!pk->grid_symbolic)
    for (int d = 0; d < 3; d++)
      grid[d] = (unsigned)pk->grid[d].value;
  if (pk->cluster > 1 && cu->cuOccupancyMaxActiveClusters) {
    CUlaunchConfig cfg = {grid[0],      grid[1],  grid[2], pk->block[0], pk->block[1],
                          pk->block[2], pk->smem, NULL,    NULL,         0};
    int clusters = 0;
    if ((r = cu->cuOccupancyMaxActiveClusters(&clusters, f, &cfg)))
      return fgl_cuda_fail(m, err, r, "cuOccupancyMaxActiveClusters");
    if ((long long)clusters * pk->cluster < fit)
      fit = (long long)clusters * pk->cluster;
  }
  if (pk->grid_symbolic) {
    *fit_out = fit > 0 ? fit : -1; /* -1: none fits */
    return FGL_OK;
  }
  if (fit < (long long)grid[0] * grid[1] * grid[2])
    return fgl_fail(err, FGL_ERR_UNSUPPORTED,
                    "graph '%s' kernel %d (%s): its %u CTAs wait for one another, so all must "
                    "be resident at once, but this GPU holds %lld (%d SMs x %d%s); recompile for "
                    "this GPU",
                    g->name, k, name, grid[0] * grid[1] * grid[2], fit, sms, per_sm,
                    pk->cluster > 1 ? ", in clusters" : "");
  return FGL_OK;
}

/* A resident kernel's CTAs that fit (check_resident's *fit) for the
 * variant just checked, merged into what the other of its pair allows
 * (plain and vec, or their narrow variants): either may be launched, so
 * the fewer count. */
static void merge_fit(long long *acc, long long fit) {
  if (fit == 0)
    return;
  if (*acc == 0 || fit < 0 || (*acc > 0 && fit < *acc))
    *acc = fit;
}

/* Looks up graph gi's kernels (every variant) once; the module's context
 * must be current. */
static fgl_status resolve_graph(fgl_module *m, int gi, fgl_error *err) {
  const fgl_cuda_api *cu = m->cu;
  fgl_status st = FGL_OK;
  pthread_mutex_lock(&m->resolve_lock);
  if (m->resolved[gi])
    goto out;
  const plan_graph *g = &m->plan.graphs[gi];
  int smem_optin = -1;
  for (int k = 0; k < g->n_kernels && st == FGL_OK; k++) {
    const plan_kernel *pk = &g->kernels[k];
    for (int v = 0; v < PLAN_N_ENTRIES; v++) {
      const char *name = plan_kernel_entry(pk, v);
      CUfunction *slot = &m->funcs[gi][k * PLAN_N_ENTRIES + v];
      CUresult r;
      if (!name)
        continue;
      if ((r = cu->cuModuleGetFunction(slot, m->mod, name)) != CUDA_SUCCESS) {
        char t[200];
        st = fgl_fail(err, FGL_ERR_CUDA,
                      "graph '%s' kernel %d: cuModuleGetFunction('%s') failed: %s", g->name, k,
                      name, fgl_cuda_error_text(r, t, sizeof t));
        goto out;
      }
      /* The default limit is 48 KiB of static plus dynamic shared memory:
       * any dynamic amount may need the opt-in beside the kernel's static. */
      if (pk->smem > 0) {
        if (smem_optin < 0 &&
            cu->cuDeviceGetAttribute(
                &smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, m->device))
          smem_optin = 48 * 1024;
        if (pk->smem > (unsigned)smem_optin) {
          st =
              fgl_fail(err, FGL_ERR_UNSUPPORTED,
                       "graph '%s' kernel %d needs %u bytes of shared memory, the device allows %d",
                       g->name, k, pk->smem, smem_optin);
          goto out;
        }
        if ((r = cu->cuFuncSetAttribute(*slot, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        (int)pk->smem))) {
          st = fgl_cuda_fail(m, err, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
          goto out;
        }
      }
      long long fit = 0;
      if (pk->resident && (st = check_resident(m, g, k, name, *slot, &fit, err)) != FGL_OK)
        goto out;
      merge_fit(&m->resident_fit[gi][2 * k + (v >= PLAN_ENTRY_NARROW)], fit);
    }
  }
  m->resolved[gi] = 1;
out:
  pthread_mutex_unlock(&m->resolve_lock);
  return st;
}

/* The artifact's SASS for this device, when it carries some (sass.h):
 * loaded without the JIT or the cache. Returns 1 when m->mod came from it,
 * 0 to JIT the PTX instead (having logged why, where there was SASS). */
static int load_sass(fgl_module *m, const char *text, const fgl_sass_table *t, const char *what) {
  if (t->why[0]) {
    fgl_logf(m->log, m->log_user, FGL_LOG_WARN, "fgload: %s: %s: ignored, JIT from PTX", what,
             t->why);
    return 0;
  }
  if (t->n == 0)
    return 0;
  int cc = m->dev.cc_major * 10 + m->dev.cc_minor;
  const fgl_sass_section *s = NULL;
  char have[FGL_SASS_MAX * 18] = "";
  for (int i = 0; i < t->n && !s; i++) {
    if (t->s[i].sm == cc)
      s = &t->s[i];
    size_t k = strlen(have);
    snprintf(have + k, sizeof have - k, "%s%s", i ? ", " : "", t->s[i].arch);
  }
  if (!s) {
    fgl_logf(m->log, m->log_user, FGL_LOG_INFO,
             "fgload: %s carries SASS for %s, not for this device (%s, sm_%d): JIT from PTX", what,
             have, m->dev.name, cc);
    return 0;
  }
  void *cubin;
  size_t n;
  char why[200];
  if (fgl_sass_decode(text, t, s, &cubin, &n, why, sizeof why) != 0) {
    fgl_logf(m->log, m->log_user, FGL_LOG_WARN,
             "fgload: %s: the SASS for %s is unusable (%s): JIT from PTX", what, s->arch, why);
    return 0;
  }
  CUresult r = m->cu->cuModuleLoadData(&m->mod, cubin);
  free(cubin);
  if (r != CUDA_SUCCESS) {
    char e[200];
    m->mod = NULL;
    fgl_logf(m->log, m->log_user, FGL_LOG_WARN,
             "fgload: %s: the driver refused the SASS for %s (%s): JIT from PTX", what, s->arch,
             fgl_cuda_error_text(r, e, sizeof e));
    return 0;
  }
  snprintf(m->sass_arch, sizeof m->sass_arch, "%s", s->arch);
  return 1;
}

/* text is NUL-terminated at text[len] and the caller's to change; what
 * names it in messages. SASS sections after the PTX (sass.h) are cut off
 * (text[their start] becomes the NUL): the plan, the cache key and the JIT
 * see the PTX as it was before fusec appended them. */
static fgl_status load_common(char *text, size_t len, const char *what,
                              const fgl_load_options *opts_in, fgl_module **out, fgl_error *err) {
  double t0 = fgl_now_ms();
  fgl_load_options opts;
  if (opts_in)
    opts = *opts_in;
  else
    fgl_load_options_init(&opts);
  char msg[512];
  fgl_sass_table sass;
  fgl_sass_scan(text, len, &sass);
  len = sass.ptx_len;
  text[len] = 0;
  plan pl;
  if (plan_parse(text, len, &pl, msg, sizeof msg) != 0)
    return fgl_fail(err, FGL_ERR_PLAN, "%s: %s", what, msg);
  const fgl_cuda_api *cu = fgl_cuda(msg, sizeof msg);
  if (!cu) {
    plan_free(&pl);
    return fgl_fail(err, FGL_ERR_NO_DRIVER, "%s", msg);
  }
  fgl_module *m = calloc(1, sizeof *m);
  if (!m) {
    plan_free(&pl);
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
  }
  m->cu = cu;
  m->plan = pl;
  pthread_mutex_init(&m->resolve_lock, NULL);
  m->log = opts.log;
  m->log_user = opts.log_user;
  fgl_status st = FGL_OK;
  int pushed = 0;
  CUresult r;
  CUcontext cur = NULL;
  cu->cuCtxGetCurrent(&cur);
  if (cur) {
    m->ctx = cur;
  } else {
    int n = 0;
    r = cu->cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n == 0) {
      st = fgl_fail(err, FGL_ERR_NO_DRIVER, "no CUDA device");
      goto fail;
    }
    if ((r = cu->cuDeviceGet(&m->device, 0)) != CUDA_SUCCESS) {
      st = fgl_cuda_fail(m, err, r, "cuDeviceGet");
      goto fail;
    }
    if ((r = cu->cuDevicePrimaryCtxRetain(&m->ctx, m->device)) != CUDA_SUCCESS) {
      st = fgl_cuda_fail(m, err, r, "cuDevicePrimaryCtxRetain");
      goto fail;
    }
    m->own_primary = 1;
  }
  if ((st = fgl_ctx_enter(m, &pushed, err)) != FGL_OK)
    goto fail;
  if (!m->own_primary && (r = cu->cuCtxGetDevice(&m->device)) != CUDA_SUCCESS) {
    st = fgl_cuda_fail(m, err, r, "cuCtxGetDevice");
    goto fail;
  }
  cu->cuDeviceGetName(m->dev.name, (int)sizeof m->dev.name - 1, m->device);
  if ((r = cu->cuDeviceGetAttribute(&m->dev.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                    m->device)) ||
      (r = cu->cuDeviceGetAttribute(&m->dev.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                    m->device)) ||
      (r = cu->cuDriverGetVersion(&m->dev.driver_version))) {
    st = fgl_cuda_fail(m, err, r, "querying the device");
    goto fail;
  }
  int cc = m->dev.cc_major * 10 + m->dev.cc_minor;
  if (pl.sm > cc) {
    st = fgl_fail(err, FGL_ERR_UNSUPPORTED, "%s targets %s but the device (%s) is sm_%d", what,
                  pl.target, m->dev.name, cc);
    goto fail;
  }

  fgl_cache_cfg cfg = {0};
  char dirbuf[4096];
  int too_long = 0;
  cfg.dir = fgl_cache_resolve_dir(opts.cache_dir, opts.cache, dirbuf, sizeof dirbuf, &too_long);
  const char *shared = getenv("FUSEC_CACHE_SHARED");
  cfg.shared = shared && !strcmp(shared, "1");
  cfg.cc_major = m->dev.cc_major;
  cfg.cc_minor = m->dev.cc_minor;
  cfg.driver_version = m->dev.driver_version;
  cfg.jit.opt_level = opts.jit_opt_level;
  cfg.log = opts.log;
  cfg.log_user = opts.log_user;
  if (opts.jit_opt_level < 0 || opts.jit_opt_level > 4) {
    st = fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "jit_opt_level %d is not in 0..4",
                  opts.jit_opt_level);
    goto fail;
  }
  if (too_long)
    fgl_logf(opts.log, opts.log_user, FGL_LOG_WARN,
             "fgload cache: the cache directory's path is longer than %zu bytes: running without a "
             "cache",
             sizeof dirbuf - 1);
  else if (!cfg.dir)
    fgl_logf(opts.log, opts.log_user, FGL_LOG_DEBUG, "fgload cache: disabled");
  if (load_sass(m, text, &sass, what)) {
    m->source = FGL_LOAD_SASS;
    goto loaded;
  }
  /* A well-formed cache entry whose cubin the driver refuses (made by
   * another driver build, say) is JITed again and replaced, so that later
   * loads do not fail too: a second and last try. */
  for (int attempt = 0;; attempt++) {
    void *cubin = NULL;
    size_t cubin_len = 0;
    if (fgl_cache_get(&cfg, text, len, fgl_driver_jit, (void *)cu, &cubin, &cubin_len,
                      &m->stats.cache_hit, &m->stats.jit_ms, msg, sizeof msg) != 0) {
      st = fgl_fail(err, FGL_ERR_CUDA, "%s: %s", what, msg);
      goto fail;
    }
    r = cu->cuModuleLoadData(&m->mod, cubin);
    free(cubin);
    if (r == CUDA_SUCCESS || !m->stats.cache_hit || attempt > 0)
      break;
    char t[200];
    fgl_logf(opts.log, opts.log_user, FGL_LOG_WARN,
             "fgload cache: the driver refused the cached cubin (%s): JIT again",
             fgl_cuda_error_text(r, t, sizeof t));
    cfg.refresh = 1;
  }
  if (r != CUDA_SUCCESS) {
    st = fgl_cuda_fail(m, err, r, "cuModuleLoadData");
    goto fail;
  }
  m->source = m->stats.cache_hit ? FGL_LOAD_CACHE : FGL_LOAD_JIT;
loaded:
  m->funcs = calloc((size_t)pl.n_graphs, sizeof *m->funcs);
  m->resident_fit = calloc((size_t)pl.n_graphs, sizeof *m->resident_fit);
  if (!m->funcs || !m->resident_fit) {
    st = fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
    goto fail;
  }
  m->resolved = calloc((size_t)pl.n_graphs + 1, 1);
  if (!m->resolved) {
    st = fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
    goto fail;
  }
  for (int gi = 0; gi < pl.n_graphs; gi++) {
    const plan_graph *g = &pl.graphs[gi];
    m->funcs[gi] = calloc(((size_t)g->n_kernels + 1) * PLAN_N_ENTRIES, sizeof **m->funcs);
    m->resident_fit[gi] = calloc(((size_t)g->n_kernels + 1) * 2, sizeof **m->resident_fit);
    if (!m->funcs[gi] || !m->resident_fit[gi]) {
      st = fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
      goto fail;
    }
  }
  fgl_ctx_leave(m, pushed);
  m->stats.total_ms = fgl_now_ms() - t0;
  fgl_logf(opts.log, opts.log_user, FGL_LOG_INFO, "fgload: loaded %s (%d graphs) in %.2f ms (%s%s)",
           what, pl.n_graphs, m->stats.total_ms,
           m->source == FGL_LOAD_SASS ? "the artifact's SASS for "
           : m->stats.cache_hit       ? "cache hit"
                                      : "JIT",
           m->source == FGL_LOAD_SASS ? m->sass_arch : "");
  *out = m;
  return FGL_OK;
fail:
  fgl_ctx_leave(m, pushed);
  module_destroy(m);
  return st;
}

fgl_status fgl_module_load_data(const void *data, size_t len, const fgl_load_options *opts,
                                fgl_module **out, fgl_error *err) {
  if (!out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_data: out is NULL");
  *out = NULL;
  if (!data && len)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_data: data is NULL");
  char *buf = malloc(len + 1);
  if (!buf)
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
  if (len)
    memcpy(buf, data, len);
  buf[len] = 0;
  fgl_status st = load_common(buf, len, "<memory>", opts, out, err);
  free(buf);
  return st;
}

fgl_status fgl_module_load_file(const char *path, const fgl_load_options *opts, fgl_module **out,
                                fgl_error *err) {
  if (!out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_file: out is NULL");
  *out = NULL;
  if (!path)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_file: path is NULL");
  FILE *f = fopen(path, "rb");
  if (!f)
    return fgl_fail(err, FGL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (len + 1 < cap)
      break;
    char *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int rerr = ferror(f);
  fclose(f);
  if (!buf)
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "%s: out of memory", path);
  if (rerr) {
    free(buf);
    return fgl_fail(err, FGL_ERR_IO, "%s: read error", path);
  }
  buf[len] = 0;
  fgl_status st = load_common(buf, len, path, opts, out, err);
  free(buf);
  return st;
}

fgl_status fgl_module_free(fgl_module *m, fgl_error *err) {
  (void)err;
  module_destroy(m);
  return FGL_OK;
}

fgl_status fgl_module_load_stats(const fgl_module *m, fgl_load_stats *out, fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_stats: NULL argument");
  *out = m->stats;
  return FGL_OK;
}

fgl_status fgl_module_load_source(const fgl_module *m, fgl_load_source *out, fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_load_source: NULL argument");
  *out = (fgl_load_source)m->source;
  return FGL_OK;
}

fgl_status fgl_module_device_info(const fgl_module *m, fgl_device_info *out, fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_device_info: NULL argument");
  *out = m->dev;
  return FGL_OK;
}

/* ---- graph queries ---- */

static void fill_info(const plan_graph *g, fgl_graph_info *out) {
  out->name = g->name;
  out->n_params = g->n_params;
  out->n_results = g->n_results;
  out->n_temps = g->n_temps;
  out->n_kernels = g->n_kernels;
}

static const plan_graph *find_graph(const fgl_module *m, const char *name, fgl_error *err,
                                    fgl_status *st) {
  if (!m || !name) {
    *st = fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "NULL module or graph name");
    return NULL;
  }
  const plan_graph *g = plan_find(&m->plan, name);
  if (!g) {
    char names[256] = "";
    size_t k = 0;
    for (int i = 0; i < m->plan.n_graphs && k + 2 < sizeof names; i++) {
      int n = snprintf(names + k, sizeof names - k, "%s%s", i ? ", " : "", m->plan.graphs[i].name);
      if (n < 0)
        break;
      k += (size_t)n;
    }
    *st = fgl_fail(err, FGL_ERR_NOT_FOUND, "no graph '%s' in the module (it has: %s)", name, names);
  }
  return g;
}

fgl_status fgl_module_num_graphs(const fgl_module *m, int *out, fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_num_graphs: NULL argument");
  *out = m->plan.n_graphs;
  return FGL_OK;
}

fgl_status fgl_module_graph_at(const fgl_module *m, int index, fgl_graph_info *out,
                               fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_graph_at: NULL argument");
  if (index < 0 || index >= m->plan.n_graphs)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "graph index %d out of range (%d graphs)", index,
                    m->plan.n_graphs);
  fill_info(&m->plan.graphs[index], out);
  return FGL_OK;
}

fgl_status fgl_module_graph_info(const fgl_module *m, const char *name, fgl_graph_info *out,
                                 fgl_error *err) {
  fgl_status st = FGL_OK;
  const plan_graph *g = find_graph(m, name, err, &st);
  if (!g)
    return st;
  if (!out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_module_graph_info: out is NULL");
  fill_info(g, out);
  return FGL_OK;
}

fgl_status fgl_module_temp_info(const fgl_module *m, const char *graph, int index,
                                fgl_temp_info *out, fgl_error *err) {
  fgl_status st = FGL_OK;
  const plan_graph *g = find_graph(m, graph, err, &st);
  if (!g)
    return st;
  if (!out || index < 0 || index >= g->n_temps)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "temp index %d out of range (graph '%s' has %d temps)", index, g->name,
                    g->n_temps);
  const plan_temp *tp = &g->temps[index];
  out->symbolic = !plan_expr_const(&tp->bytes);
  out->bytes = out->symbolic ? 0 : (size_t)tp->bytes.value;
  out->align = (size_t)tp->align;
  out->zero = tp->zero;
  return FGL_OK;
}

fgl_status fgl_graph_get_info(const fgl_graph *g, fgl_graph_info *out, fgl_error *err) {
  if (!g || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_get_info: NULL argument");
  fill_info(g->pg, out);
  return FGL_OK;
}

/* What the plan says of a shape: constants, -1 where a formula has syms. */
static void plan_dims(const plan_shape *sh, int64_t *sizes, int64_t *strides) {
  for (int d = 0; d < sh->rank; d++) {
    sizes[d] = plan_expr_const(&sh->sizes[d]) ? sh->sizes[d].value : -1;
    strides[d] = plan_expr_const(&sh->strides[d]) ? sh->strides[d].value : -1;
  }
}

static void fill_param(const plan_graph *pg, int index, fgl_param_info *out) {
  const plan_param *p = &pg->params[index];
  memset(out, 0, sizeof *out);
  out->name = p->name;
  out->dtype = p->dtype;
  out->is_scalar = p->is_scalar;
  out->rank = p->shape.rank;
  plan_dims(&p->shape, out->sizes, out->strides);
  for (int d = 0; d < FGL_MAX_RANK; d++)
    out->sym[d] = d < p->shape.rank ? p->sym[d] : -1;
}

static void fill_result(const plan_graph *pg, int index, fgl_result_info *out) {
  const plan_result *r = &pg->results[index];
  memset(out, 0, sizeof *out);
  out->dtype = r->dtype;
  out->rank = r->shape.rank;
  plan_dims(&r->shape, out->sizes, out->strides);
  out->is_view = r->is_view;
  out->base_is_param = r->is_view && r->base.kind == 'p';
  out->base_index = r->is_view ? r->base.index : -1;
  out->offset = !r->is_view ? 0 : plan_expr_const(&r->offset) ? r->offset.value : -1;
  for (int d = 0; d < FGL_MAX_RANK; d++)
    out->sym[d] = d < r->shape.rank ? plan_expr_sym(pg, &r->shape.sizes[d]) : -1;
  out->symbolic = r->symbolic;
  out->inplace_param = r->inplace ? r->inplace_param : -1;
}

fgl_status fgl_graph_param(const fgl_graph *g, int index, fgl_param_info *out, fgl_error *err) {
  if (!g || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_param: NULL argument");
  if (index < 0 || index >= g->pg->n_params)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "param index %d out of range (graph '%s' has %d params)", index, g->pg->name,
                    g->pg->n_params);
  fill_param(g->pg, index, out);
  return FGL_OK;
}

fgl_status fgl_graph_result(const fgl_graph *g, int index, fgl_result_info *out, fgl_error *err) {
  if (!g || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_result: NULL argument");
  if (index < 0 || index >= g->pg->n_results)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "result index %d out of range (graph '%s' has %d results)", index, g->pg->name,
                    g->pg->n_results);
  fill_result(g->pg, index, out);
  return FGL_OK;
}

fgl_status fgl_graph_num_syms(const fgl_graph *g, int *out, fgl_error *err) {
  if (!g || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_num_syms: NULL argument");
  *out = g->pg->n_syms;
  return FGL_OK;
}

fgl_status fgl_graph_sym(const fgl_graph *g, int index, fgl_sym_info *out, fgl_error *err) {
  if (!g || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_sym: NULL argument");
  if (index < 0 || index >= g->pg->n_syms)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "sym index %d out of range (graph '%s' has %d syms)", index, g->pg->name,
                    g->pg->n_syms);
  const plan_sym *y = &g->pg->syms[index];
  out->name = y->name;
  out->min = y->min;
  out->max = y->max;
  out->div = y->div;
  return FGL_OK;
}

/* The syms bound from inputs (with their facts checked) into vals. */
static fgl_status bind_for_query(const plan_graph *pg, const fgl_arg *inputs, int n_inputs,
                                 int64_t *vals, fgl_error *err) {
  fgl_status st = fgl_bind(pg, inputs, n_inputs, vals, err);
  if (st != FGL_OK)
    return st;
  return fgl_check_facts(pg, vals, err);
}

fgl_status fgl_graph_param_shape(const fgl_graph *g, const fgl_arg *inputs, int n_inputs,
                                 int param_index, fgl_param_info *out, fgl_error *err) {
  fgl_status st = fgl_graph_param(g, param_index, out, err);
  if (st != FGL_OK)
    return st;
  int64_t vals[PLAN_MAX_SYMS + 1];
  fgl_dims d;
  if ((st = bind_for_query(g->pg, inputs, n_inputs, vals, err)) != FGL_OK ||
      (st = fgl_eval_param(g->pg, vals, param_index, &d, err)) != FGL_OK)
    return st;
  memcpy(out->sizes, d.sizes, sizeof out->sizes);
  memcpy(out->strides, d.strides, sizeof out->strides);
  return FGL_OK;
}

fgl_status fgl_graph_result_shape(const fgl_graph *g, const fgl_arg *inputs, int n_inputs,
                                  int result_index, fgl_result_info *out, fgl_error *err) {
  fgl_status st = fgl_graph_result(g, result_index, out, err);
  if (st != FGL_OK)
    return st;
  const plan_graph *pg = g->pg;
  int64_t vals[PLAN_MAX_SYMS + 1], off, boff;
  fgl_dims d, b;
  if ((st = bind_for_query(pg, inputs, n_inputs, vals, err)) != FGL_OK ||
      (st = fgl_eval_result(pg, vals, result_index, &d, &off, err)) != FGL_OK)
    return st;
  const plan_result *r = &pg->results[result_index];
  if (r->is_view && r->check_at_run) {
    st = r->base.kind == 'p' ? fgl_eval_param(pg, vals, r->base.index, &b, err)
                             : fgl_eval_result(pg, vals, r->base.index, &b, &boff, err);
    if (st != FGL_OK || (st = fgl_check_view(pg, vals, result_index, &d, off, &b, err)) != FGL_OK)
      return st;
  }
  memcpy(out->sizes, d.sizes, sizeof out->sizes);
  memcpy(out->strides, d.strides, sizeof out->strides);
  out->offset = off;
  return FGL_OK;
}

/* ---- graph instances ---- */

static void graph_destroy(fgl_graph *g) {
  if (!g)
    return;
  if (g->temp_alloc || g->side || g->fork || g->join) {
    int pushed = 0;
    if (fgl_ctx_enter(g->m, &pushed, NULL) == FGL_OK) {
      /* cuMemFree also frees what cuMemAllocAsync gave (the caller has
       * synchronized the instance's streams, as before any free) */
      for (int i = 0; g->temp_alloc && i < g->pg->n_temps; i++)
        if (g->temp_alloc[i])
          g->m->cu->cuMemFree(g->temp_alloc[i]);
      if (g->side)
        g->m->cu->cuStreamDestroy(g->side);
      if (g->fork)
        g->m->cu->cuEventDestroy(g->fork);
      if (g->join)
        g->m->cu->cuEventDestroy(g->join);
      fgl_ctx_leave(g->m, pushed);
    }
  }
  free(g->temp_alloc);
  free(g->temp_async);
  free(g->temp_mine);
  free(g->temp_cap);
  free(g->temp_need);
  free(g->slot_p);
  free(g->slot_r);
  free(g->slot_t);
  free(g->slot_z);
  free(g->pdims);
  free(g->rdims);
  free(g->roffset);
  free(g->bound);
  free(g->launches);
  free(g->param_ptrs);
  free(g->vec_ptr_store);
  free(g);
}

static void *slot_of(fgl_graph *g, plan_ref a) {
  switch (a.kind) {
  case 'p':
  case 's':
    return &g->slot_p[a.index];
  case 'r':
    return &g->slot_r[a.index];
  case 'z':
    return &g->slot_z[a.index];
  default:
    return &g->slot_t[a.index];
  }
}

/* The caller's temps (supplied), checked: constant temps at least their
 * plan size (bytes[i] when given), symbolic ones 0 (the loader's) or with
 * their capacity in bytes[i]. */
static fgl_status check_supplied(const plan_graph *pg, const char *name, const fgl_devptr *temps,
                                 const size_t *bytes, int n_temps, fgl_error *err) {
  if (n_temps != pg->n_temps || (n_temps > 0 && !temps))
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "graph '%s' needs %d temps, got %d", name,
                    pg->n_temps, n_temps);
  for (int i = 0; i < n_temps; i++) {
    const plan_temp *tp = &pg->temps[i];
    if (!plan_expr_const(&tp->bytes)) {
      if (temps[i] && !bytes)
        return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                        "temp %d of graph '%s': its size depends on the graph's syms: pass 0 (the "
                        "loader allocates it) or give its capacity with "
                        "fgl_graph_create_with_temp_sizes",
                        i, name);
      if (!temps[i] && bytes && bytes[i])
        return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                        "temp %d of graph '%s': NULL pointer for %zu bytes", i, name, bytes[i]);
    } else {
      if (tp->bytes.value > 0 && !temps[i])
        return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "temp %d of graph '%s': NULL pointer", i,
                        name);
      if (bytes && bytes[i] < (size_t)tp->bytes.value)
        return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                        "temp %d of graph '%s': %zu bytes supplied, it needs %lld", i, name,
                        bytes[i], (long long)tp->bytes.value);
    }
    if (temps[i] % (unsigned long long)tp->align)
      return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                      "temp %d of graph '%s': pointer 0x%llx is not aligned to %lld bytes", i, name,
                      temps[i], (long long)tp->align);
  }
  return FGL_OK;
}

/* Every constant formula evaluated once, for the instance's lifetime. */
static fgl_status eval_constants(fgl_graph *g, fgl_error *err) {
  const plan_graph *pg = g->pg;
  fgl_status st = FGL_OK;
  for (int i = 0; st == FGL_OK && i < pg->n_params; i++)
    if (!pg->params[i].shape.symbolic)
      st = fgl_eval_param(pg, NULL, i, &g->pdims[i], err);
  for (int j = 0; st == FGL_OK && j < pg->n_results; j++)
    if (!pg->results[j].symbolic)
      st = fgl_eval_result(pg, NULL, j, &g->rdims[j], &g->roffset[j], err);
  for (int t = 0; t < pg->n_temps; t++)
    g->temp_need[t] = plan_expr_const(&pg->temps[t].bytes) ? pg->temps[t].bytes.value : 0;
  for (int k = 0; k < pg->n_kernels; k++)
    for (int d = 0; d < 3; d++)
      g->launches[k].grid[d] =
          pg->kernels[k].grid_symbolic ? 0 : (unsigned)pg->kernels[k].grid[d].value;
  return st;
}

static fgl_status create(fgl_module *m, const char *name, const fgl_devptr *temps,
                         const size_t *bytes, int n_temps, int supplied, fgl_graph **out,
                         fgl_error *err) {
  if (!out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_create: out is NULL");
  *out = NULL;
  fgl_status st = FGL_OK;
  const plan_graph *pg = find_graph(m, name, err, &st);
  if (!pg)
    return st;
  int gi = (int)(pg - m->plan.graphs);
  if (supplied && (st = check_supplied(pg, name, temps, bytes, n_temps, err)) != FGL_OK)
    return st;
  fgl_graph *g = calloc(1, sizeof *g);
  if (!g)
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
  g->m = m;
  g->pg = pg;
  g->gi = gi;
  int total_args = 0, total_vec = 0;
  for (int k = 0; k < pg->n_kernels; k++) {
    total_args += pg->kernels[k].n_args;
    total_vec += pg->kernels[k].n_vec_ptrs;
  }
  size_t np = (size_t)pg->n_params + 1, nr = (size_t)pg->n_results + 1,
         nt = (size_t)pg->n_temps + 1, ns = (size_t)pg->n_syms + 1;
  g->slot_p = calloc(np, sizeof *g->slot_p);
  g->slot_r = calloc(nr, sizeof *g->slot_r);
  g->slot_t = calloc(nt, sizeof *g->slot_t);
  g->slot_z = calloc(ns, sizeof *g->slot_z);
  g->temp_alloc = calloc(nt, sizeof *g->temp_alloc);
  g->temp_async = calloc(nt, sizeof *g->temp_async);
  g->temp_mine = calloc(nt, sizeof *g->temp_mine);
  g->temp_cap = calloc(nt, sizeof *g->temp_cap);
  g->temp_need = calloc(nt, sizeof *g->temp_need);
  g->pdims = calloc(np, sizeof *g->pdims);
  g->rdims = calloc(nr, sizeof *g->rdims);
  g->roffset = calloc(nr, sizeof *g->roffset);
  g->bound = calloc(ns, sizeof *g->bound);
  g->launches = calloc((size_t)pg->n_kernels + 1, sizeof *g->launches);
  g->param_ptrs = calloc((size_t)total_args + 1, sizeof *g->param_ptrs);
  g->vec_ptr_store = calloc((size_t)total_vec + 1, sizeof *g->vec_ptr_store);
  if (!g->slot_p || !g->slot_r || !g->slot_t || !g->slot_z || !g->temp_alloc || !g->temp_async ||
      !g->temp_mine || !g->temp_cap || !g->temp_need || !g->pdims || !g->rdims || !g->roffset ||
      !g->bound || !g->launches || !g->param_ptrs || !g->vec_ptr_store) {
    graph_destroy(g);
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
  }
  int pushed0 = 0;
  if ((st = fgl_ctx_enter(m, &pushed0, err)) != FGL_OK) {
    graph_destroy(g);
    return st;
  }
  st = resolve_graph(m, gi, err);
  fgl_ctx_leave(m, pushed0);
  if (st != FGL_OK) {
    graph_destroy(g);
    return st;
  }
  int ai = 0, vi = 0;
  for (int k = 0; k < pg->n_kernels; k++) {
    const plan_kernel *pk = &pg->kernels[k];
    fgl_launch *l = &g->launches[k];
    memcpy(l->fn, &m->funcs[gi][k * PLAN_N_ENTRIES], sizeof l->fn);
    l->narrow_max = pk->narrow_max;
    memcpy(l->block, pk->block, sizeof l->block);
    l->smem = pk->smem;
    l->stream = pk->stream;
    l->pdl = pk->pdl;
    l->vec_align = (unsigned)pk->vec_align;
    l->params = &g->param_ptrs[ai];
    for (int a = 0; a < pk->n_args; a++)
      g->param_ptrs[ai++] = slot_of(g, pk->args[a]);
    l->vec_ptrs = &g->vec_ptr_store[vi];
    l->n_vec_ptrs = pk->n_vec_ptrs;
    for (int a = 0; a < pk->n_vec_ptrs; a++)
      g->vec_ptr_store[vi++] = slot_of(g, pk->vec_ptrs[a]);
  }
  if ((st = eval_constants(g, err)) != FGL_OK) {
    graph_destroy(g);
    return st;
  }
  int pushed = 0;
  if ((st = fgl_ctx_enter(m, &pushed, err)) != FGL_OK) {
    graph_destroy(g);
    return st;
  }
  for (int i = 0; i < pg->n_temps; i++) {
    const plan_temp *t = &pg->temps[i];
    bool symbolic = !plan_expr_const(&t->bytes);
    int64_t zero_bytes = 0;
    CUresult r;
    if (supplied && (!symbolic || temps[i])) {
      g->slot_t[i] = temps[i];
      g->temp_cap[i] = bytes ? (int64_t)bytes[i] : t->bytes.value;
      zero_bytes = symbolic ? g->temp_cap[i] : t->bytes.value;
    } else if (symbolic) {
      g->temp_mine[i] = 1; /* allocated by the first run or reserve that needs it */
    } else {
      g->temp_mine[i] = 1;
      g->temp_cap[i] = t->bytes.value;
      zero_bytes = t->bytes.value;
      if (t->bytes.value > 0) {
        size_t extra = t->align > 256 ? (size_t)t->align : 0;
        if ((r = m->cu->cuMemAlloc(&g->temp_alloc[i], (size_t)t->bytes.value + extra)) !=
            CUDA_SUCCESS) {
          g->temp_alloc[i] = 0;
          char t2[200];
          st = fgl_fail(err, FGL_ERR_CUDA, "graph '%s': allocating temp %d (%lld bytes) failed: %s",
                        name, i, (long long)t->bytes.value, fgl_cuda_error_text(r, t2, sizeof t2));
          break;
        }
        unsigned long long a = (unsigned long long)t->align;
        g->slot_t[i] = (g->temp_alloc[i] + a - 1) & ~(a - 1);
      }
    }
    if (t->zero && zero_bytes > 0 &&
        (r = m->cu->cuMemsetD8(g->slot_t[i], 0, (size_t)zero_bytes)) != CUDA_SUCCESS) {
      st = fgl_cuda_fail(m, err, r, "zeroing a temp (cuMemsetD8)");
      break;
    }
  }
  if (st == FGL_OK && pg->streams) {
    /* the second stream: non-blocking, so that it never waits on the
     * legacy default stream's other work; events without timing */
    CUresult r = m->cu->cuStreamCreate(&g->side, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
      r = m->cu->cuEventCreate(&g->fork, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS)
      r = m->cu->cuEventCreate(&g->join, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
      st = fgl_cuda_fail(m, err, r, "creating the graph's second stream and its events");
  }
  fgl_ctx_leave(m, pushed);
  if (st != FGL_OK) {
    graph_destroy(g);
    return st;
  }
  *out = g;
  return FGL_OK;
}

fgl_status fgl_graph_create(fgl_module *m, const char *name, fgl_graph **out, fgl_error *err) {
  return create(m, name, NULL, NULL, 0, 0, out, err);
}

fgl_status fgl_graph_create_with_temps(fgl_module *m, const char *name, const fgl_devptr *temps,
                                       int n_temps, fgl_graph **out, fgl_error *err) {
  return create(m, name, temps, NULL, n_temps, 1, out, err);
}

fgl_status fgl_graph_create_with_temp_sizes(fgl_module *m, const char *name,
                                            const fgl_devptr *temps, const size_t *bytes,
                                            int n_temps, fgl_graph **out, fgl_error *err) {
  if (!bytes && n_temps > 0)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT,
                    "fgl_graph_create_with_temp_sizes: bytes is NULL");
  return create(m, name, temps, bytes, n_temps, 1, out, err);
}

fgl_status fgl_graph_reserve(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_stream stream,
                             fgl_error *err) {
  if (!g)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_graph_reserve: graph is NULL");
  fgl_status st = fgl_bind(g->pg, inputs, n_inputs, g->slot_z, err);
  if (st == FGL_OK && g->pg->n_syms > 0)
    st = fgl_graph_evaluate(g, err);
  bool grow = false;
  if (st == FGL_OK)
    st = fgl_check_temps(g, &grow, err);
  if (st != FGL_OK || !grow)
    return st;
  int pushed = 0;
  if ((st = fgl_ctx_enter(g->m, &pushed, err)) != FGL_OK)
    return st;
  st = fgl_grow_temps(g, (CUstream)stream, err);
  fgl_ctx_leave(g->m, pushed);
  return st;
}

fgl_status fgl_graph_free(fgl_graph *g, fgl_error *err) {
  (void)err;
  graph_destroy(g);
  return FGL_OK;
}

/* ---- device helpers ---- */

#define WITH_CTX(m, what, call)                                                                    \
  do {                                                                                             \
    if (!(m))                                                                                      \
      return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "%s: module is NULL", what);                  \
    int pushed_ = 0;                                                                               \
    fgl_status st_ = fgl_ctx_enter((m), &pushed_, err);                                            \
    if (st_ != FGL_OK)                                                                             \
      return st_;                                                                                  \
    CUresult r_ = (call);                                                                          \
    fgl_ctx_leave((m), pushed_);                                                                   \
    if (r_ != CUDA_SUCCESS)                                                                        \
      return fgl_cuda_fail((m), err, r_, what);                                                    \
    return FGL_OK;                                                                                 \
  } while (0)

fgl_status fgl_malloc(fgl_module *m, size_t bytes, fgl_devptr *out, fgl_error *err) {
  if (!out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_malloc: out is NULL");
  *out = 0;
  if (bytes == 0)
    return FGL_OK;
  WITH_CTX(m, "cuMemAlloc", m->cu->cuMemAlloc(out, bytes));
}
fgl_status fgl_free(fgl_module *m, fgl_devptr p, fgl_error *err) {
  if (!p)
    return FGL_OK;
  WITH_CTX(m, "cuMemFree", m->cu->cuMemFree(p));
}
fgl_status fgl_memcpy_htod(fgl_module *m, fgl_devptr dst, const void *src, size_t bytes,
                           fgl_error *err) {
  if (!bytes)
    return FGL_OK;
  WITH_CTX(m, "cuMemcpyHtoD", m->cu->cuMemcpyHtoD(dst, src, bytes));
}
fgl_status fgl_memcpy_dtoh(fgl_module *m, void *dst, fgl_devptr src, size_t bytes, fgl_error *err) {
  if (!bytes)
    return FGL_OK;
  WITH_CTX(m, "cuMemcpyDtoH", m->cu->cuMemcpyDtoH(dst, src, bytes));
}
fgl_status fgl_memcpy_dtod_async(fgl_module *m, fgl_devptr dst, fgl_devptr src, size_t bytes,
                                 fgl_stream stream, fgl_error *err) {
  if (!bytes)
    return FGL_OK;
  WITH_CTX(m, "cuMemcpyDtoDAsync", m->cu->cuMemcpyDtoDAsync(dst, src, bytes, (CUstream)stream));
}
fgl_status fgl_memset(fgl_module *m, fgl_devptr dst, unsigned char value, size_t bytes,
                      fgl_error *err) {
  if (!bytes)
    return FGL_OK;
  WITH_CTX(m, "cuMemsetD8", m->cu->cuMemsetD8(dst, value, bytes));
}
fgl_status fgl_stream_sync(fgl_module *m, fgl_stream stream, fgl_error *err) {
  WITH_CTX(m, "cuStreamSynchronize", m->cu->cuStreamSynchronize((CUstream)stream));
}

fgl_status fgl_event_create(fgl_module *m, fgl_event **out, fgl_error *err) {
  if (!m || !out)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_event_create: NULL argument");
  *out = NULL;
  fgl_event *e = calloc(1, sizeof *e);
  if (!e)
    return fgl_fail(err, FGL_ERR_NO_MEMORY, "out of memory");
  e->m = m;
  int pushed = 0;
  fgl_status st = fgl_ctx_enter(m, &pushed, err);
  if (st != FGL_OK) {
    free(e);
    return st;
  }
  CUresult r = m->cu->cuEventCreate(&e->ev, CU_EVENT_DEFAULT);
  fgl_ctx_leave(m, pushed);
  if (r != CUDA_SUCCESS) {
    free(e);
    return fgl_cuda_fail(m, err, r, "cuEventCreate");
  }
  *out = e;
  return FGL_OK;
}
fgl_status fgl_event_record(fgl_event *e, fgl_stream stream, fgl_error *err) {
  if (!e)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_event_record: event is NULL");
  WITH_CTX(e->m, "cuEventRecord", e->m->cu->cuEventRecord(e->ev, (CUstream)stream));
}
fgl_status fgl_event_elapsed_ms(fgl_event *start, fgl_event *end, float *ms, fgl_error *err) {
  if (!start || !end || !ms)
    return fgl_fail(err, FGL_ERR_INVALID_ARGUMENT, "fgl_event_elapsed_ms: NULL argument");
  CUresult r = end->m->cu->cuEventSynchronize(end->ev);
  if (r != CUDA_SUCCESS)
    return fgl_cuda_fail(end->m, err, r, "cuEventSynchronize");
  r = end->m->cu->cuEventElapsedTime(ms, start->ev, end->ev);
  if (r != CUDA_SUCCESS)
    return fgl_cuda_fail(end->m, err, r, "cuEventElapsedTime");
  return FGL_OK;
}
fgl_status fgl_event_destroy(fgl_event *e, fgl_error *err) {
  if (!e)
    return FGL_OK;
  CUresult r = e->m->cu->cuEventDestroy(e->ev);
  free(e);
  if (r != CUDA_SUCCESS)
    return fgl_fail(err, FGL_ERR_CUDA, "cuEventDestroy failed (%d)", r);
  return FGL_OK;
}
