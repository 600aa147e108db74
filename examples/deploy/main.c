/* A complete deployment program against the installed libfgload:
 *   deploy ARTIFACT.ptx [GRAPH [NAME=VALUE]...]
 * Loads the artifact, creates a graph instance, fills every tensor input with
 * seeded random values, runs the graph once on the default stream and prints
 * a summary of every result. A graph with symbolic sizes takes each sym's
 * value from NAME=VALUE (default: the smallest value its facts allow, at
 * least 1), and the loader gives every shape for them
 * (fgl_graph_param_shape, fgl_graph_result_shape). Build: see Makefile
 * (pkg-config fgload). */
#include <fgload.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_cb(void *user, fgl_log_level level, const char *msg) {
  (void)user;
  if (level >= FGL_LOG_INFO)
    fprintf(stderr, "[fgload] %s\n", msg);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static uint16_t f32_to_half_bits(float f, int bf16) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (bf16)
    return (uint16_t)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xFF, m = x & 0x7FFFFF;
  if (e < 113)
    return (uint16_t)sign; /* tiny -> signed zero (inputs are in [-1,1)) */
  return (uint16_t)(sign | ((e - 112) << 10) | ((m + 0x1000) >> 13));
}
static float half_bits_to_f32(uint16_t h, int bf16) {
  uint32_t x;
  if (bf16)
    x = (uint32_t)h << 16;
  else {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    x = e == 0    ? sign
        : e == 31 ? sign | 0x7F800000 | (m << 13)
                  : sign | ((e + 112) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* One random element of dtype t into p. */
static void random_elem(fgl_dtype t, unsigned char *p) {
  double v = uniform();
  switch (t) {
  case FGL_BOOL:
    p[0] = v > 0;
    break;
  case FGL_I8:
  case FGL_U8:
    p[0] = (unsigned char)(int)(v * 100);
    break;
  case FGL_I16: {
    int16_t x = (int16_t)(v * 1000);
    memcpy(p, &x, 2);
  } break;
  case FGL_I32: {
    int32_t x = (int32_t)(v * 1000);
    memcpy(p, &x, 4);
  } break;
  case FGL_I64: {
    int64_t x = (int64_t)(v * 1000);
    memcpy(p, &x, 8);
  } break;
  case FGL_F16:
  case FGL_BF16: {
    uint16_t h = f32_to_half_bits((float)v, t == FGL_BF16);
    memcpy(p, &h, 2);
  } break;
  case FGL_F32: {
    float x = (float)v;
    memcpy(p, &x, 4);
  } break;
  case FGL_F64:
    memcpy(p, &v, 8);
    break;
  default:
    p[0] = (unsigned char)(0x30 + (int)(v * 8));
    break; /* f8: small normal values */
  }
}
static double elem_value(fgl_dtype t, const unsigned char *p) {
  switch (t) {
  case FGL_BOOL:
  case FGL_U8:
    return p[0];
  case FGL_I8:
    return (int8_t)p[0];
  case FGL_I16: {
    int16_t x;
    memcpy(&x, p, 2);
    return x;
  }
  case FGL_I32: {
    int32_t x;
    memcpy(&x, p, 4);
    return x;
  }
  case FGL_I64: {
    int64_t x;
    memcpy(&x, p, 8);
    return (double)x;
  }
  case FGL_F16:
  case FGL_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return half_bits_to_f32(h, t == FGL_BF16);
  }
  case FGL_F32: {
    float x;
    memcpy(&x, p, 4);
    return x;
  }
  case FGL_F64: {
    double x;
    memcpy(&x, p, 8);
    return x;
  }
  default:
    return p[0]; /* f8: raw bits */
  }
}

/* Bytes spanned by a strided tensor (0 when empty). */
static size_t span_bytes(fgl_dtype t, int rank, const int64_t *sizes, const int64_t *strides) {
  int64_t last = 0;
  for (int d = 0; d < rank; d++) {
    if (sizes[d] == 0)
      return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return (size_t)(last + 1) * (size_t)fgl_dtype_size(t);
}

#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((call) != FGL_OK) {                                                                        \
      fprintf(stderr, "deploy: %s: %s\n", fgl_status_name(err.status), err.msg);                   \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ARTIFACT.ptx [GRAPH [NAME=VALUE]...]\n", argv[0]);
    return 2;
  }
  fgl_error err = {0};
  fgl_load_options opts;
  fgl_load_options_init(&opts);
  opts.log = log_cb;
  fgl_module *m;
  TRY(fgl_module_load_file(argv[1], &opts, &m, &err));
  fgl_device_info dev;
  fgl_load_stats ls;
  fgl_load_source src;
  TRY(fgl_module_device_info(m, &dev, &err));
  TRY(fgl_module_load_stats(m, &ls, &err));
  TRY(fgl_module_load_source(m, &src, &err));
  static const char *const how[] = {"PTX JIT", "cubin cache", "the artifact's SASS"};
  printf("device: %s (sm_%d%d), load %.2f ms (%s)\n", dev.name, dev.cc_major, dev.cc_minor,
         ls.total_ms, how[src]);

  fgl_graph_info gi;
  if (argc > 2)
    TRY(fgl_module_graph_info(m, argv[2], &gi, &err));
  else
    TRY(fgl_module_graph_at(m, 0, &gi, &err));
  fgl_graph *g;
  TRY(fgl_graph_create(m, gi.name, &g, &err));
  printf("graph %s: %d params, %d results, %d kernels\n", gi.name, gi.n_params, gi.n_results,
         gi.n_kernels);

  fgl_arg *in = calloc((size_t)gi.n_params + 1, sizeof *in);
  fgl_tensor *out = calloc((size_t)gi.n_results + 1, sizeof *out);
  fgl_devptr *owned = calloc((size_t)(gi.n_params + gi.n_results) + 1, sizeof *owned);
  int n_owned = 0;
  /* The syms' values (NAME=VALUE after the graph's name), then the
   * inputs' sizes from them: the binding fgl_run will make. */
  int n_syms = 0;
  TRY(fgl_graph_num_syms(g, &n_syms, &err));
  int64_t *sym_val = calloc((size_t)n_syms + 1, sizeof *sym_val);
  for (int s = 0; s < n_syms; s++) {
    fgl_sym_info si;
    TRY(fgl_graph_sym(g, s, &si, &err));
    int64_t v = si.min > 0 ? si.min : 1;
    v = (v + si.div - 1) / si.div * si.div;
    for (int a = 3; a < argc; a++) {
      size_t n = strlen(si.name);
      if (!strncmp(argv[a], si.name, n) && argv[a][n] == '=')
        v = strtoll(argv[a] + n + 1, NULL, 10);
    }
    sym_val[s] = v;
    printf("sym %s = %lld\n", si.name, (long long)v);
  }
  for (int i = 0; i < gi.n_params; i++) {
    fgl_param_info p;
    TRY(fgl_graph_param(g, i, &p, &err));
    in[i].is_scalar = p.is_scalar;
    in[i].tensor.dtype = p.dtype;
    in[i].tensor.rank = p.rank;
    for (int d = 0; d < p.rank; d++)
      in[i].tensor.sizes[d] = p.sym[d] >= 0 ? sym_val[p.sym[d]] : p.sizes[d];
  }
  free(sym_val);
  for (int i = 0; i < gi.n_params; i++) {
    fgl_param_info p;
    TRY(fgl_graph_param_shape(g, in, gi.n_params, i, &p, &err));
    if (p.is_scalar) {
      in[i] = fgl_dtype_is_float(p.dtype) ? fgl_arg_float(p.dtype, 0.5) : fgl_arg_int(p.dtype, 1);
      continue;
    }
    size_t bytes = span_bytes(p.dtype, p.rank, p.sizes, p.strides);
    unsigned char *h = malloc(bytes + 1);
    int es = fgl_dtype_size(p.dtype);
    for (size_t k = 0; k < bytes / (size_t)es; k++)
      random_elem(p.dtype, h + k * (size_t)es);
    fgl_devptr d = 0;
    TRY(fgl_malloc(m, bytes, &d, &err));
    TRY(fgl_memcpy_htod(m, d, h, bytes, &err));
    free(h);
    owned[n_owned++] = d;
    in[i].tensor.ptr = d;
    in[i].tensor.dtype = p.dtype;
    in[i].tensor.rank = p.rank;
    memcpy(in[i].tensor.sizes, p.sizes, sizeof p.sizes);
    memcpy(in[i].tensor.strides, p.strides, sizeof p.strides);
  }
  for (int j = 0; j < gi.n_results; j++) {
    fgl_result_info r;
    TRY(fgl_graph_result_shape(g, in, gi.n_params, j, &r, &err));
    if (r.is_view)
      continue; /* the loader fills it */
    size_t bytes = span_bytes(r.dtype, r.rank, r.sizes, r.strides);
    fgl_devptr d = 0;
    TRY(fgl_malloc(m, bytes, &d, &err));
    owned[n_owned++] = d;
    out[j].ptr = d;
    out[j].dtype = r.dtype;
    out[j].rank = r.rank;
    memcpy(out[j].sizes, r.sizes, sizeof r.sizes);
    memcpy(out[j].strides, r.strides, sizeof r.strides);
  }
  TRY(fgl_run(g, in, gi.n_params, out, gi.n_results, NULL, &err));
  TRY(fgl_stream_sync(m, NULL, &err));

  for (int j = 0; j < gi.n_results; j++) {
    fgl_result_info r;
    TRY(fgl_graph_result_shape(g, in, gi.n_params, j, &r, &err));
    const fgl_tensor *t = &out[j];
    size_t bytes = span_bytes(t->dtype, t->rank, t->sizes, t->strides);
    unsigned char *h = malloc(bytes + 1);
    TRY(fgl_memcpy_dtoh(m, h, t->ptr, bytes, &err));
    /* walk the logical elements through the strides */
    int64_t idx[FGL_MAX_RANK] = {0}, numel = 1;
    for (int d = 0; d < t->rank; d++)
      numel *= t->sizes[d];
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (int64_t k = 0; k < numel; k++) {
      int64_t off = 0;
      for (int d = 0; d < t->rank; d++)
        off += idx[d] * t->strides[d];
      double v = elem_value(t->dtype, h + off * fgl_dtype_size(t->dtype));
      sum += v;
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      for (int d = t->rank - 1; d >= 0 && ++idx[d] == t->sizes[d]; d--)
        idx[d] = 0;
    }
    printf("result %d: %s[", j, fgl_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++)
      printf("%s%lld", d ? "," : "", (long long)t->sizes[d]);
    printf("] %s", r.is_view ? "view" : "written");
    if (r.is_view)
      printf(" of %c%d+%lld", r.base_is_param ? 'p' : 'r', r.base_index, (long long)r.offset);
    printf("  sum=%.6g min=%.6g max=%.6g\n", sum, mn, mx);
    free(h);
  }
  for (int i = 0; i < n_owned; i++)
    fgl_free(m, owned[i], NULL);
  free(in);
  free(out);
  free(owned);
  fgl_graph_free(g, NULL);
  fgl_module_free(m, NULL);
  return 0;
}
