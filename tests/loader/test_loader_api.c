/* The public API end to end on the fake driver (fake_cuda.c, through
 * FGL_LIBCUDA): load (cold/warm/disabled cache), queries, temps, runs with
 * views and kernel-vec selection, every bad-input case rejected with nothing
 * launched and nothing written, and that fgl_run only launches. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <xxhash.h>

#include "cache.h"
#include "fgload.h"
#include "tl.h"
#include "fake_cuda.h"

#define N 1048576

static long (*fake_count)(const char *);
static int (*fake_launch_at)(int, fake_launch *);
static void (*fake_reset)(void);
static const char *(*fake_last)(void);
static char cache_dir[256];

static char logs[8192];
static void logcb(void *u, fgl_log_level lv, const char *m) {
  (void)u;
  (void)lv;
  size_t n = strlen(logs);
  snprintf(logs + n, sizeof logs - n, "%s\n", m);
}

static fgl_load_options opts(void) {
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.cache_dir = cache_dir;
  o.log = logcb;
  return o;
}

/* Cases that need a fresh process (the driver is loaded once per process). */
static int in_child(const char *env, const char *val, fgl_status want, const char *msg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(env, val, 1);
    fgl_module *m;
    fgl_error e = {0};
    fgl_status st = fgl_module_load_file(FGL_FIXTURES "/add.ptx", NULL, &m, &e);
    if (st != want || !strstr(e.msg, msg)) {
      fprintf(stderr, "child %s=%s: got %s '%s'\n", env, val, fgl_status_name(st), e.msg);
      _exit(1);
    }
    _exit(0);
  }
  int s;
  waitpid(pid, &s, 0);
  return WIFEXITED(s) && WEXITSTATUS(s) == 0;
}

static void test_no_driver(void) {
  CHECK(in_child("FGL_LIBCUDA", "/nonexistent/libcuda.so.1", FGL_ERR_NO_DRIVER,
                 "no CUDA driver: cannot load /nonexistent/libcuda.so.1"));
  CHECK(in_child("FAKE_CUDA_DEVICES", "0", FGL_ERR_NO_DRIVER, "no CUDA device"));
}

static void test_dtypes(void) {
  const char *names[] = {"bool", "i8",  "u8",  "i16",    "i32",    "i64",    "f16",
                         "bf16", "f32", "f64", "f8e4m3", "f8e5m2", "f8e8m0", "f4e2m1"};
  const int sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1, 1, 1};
  CHECK(FGL_DTYPE_COUNT == 14 && FGL_BF16 == 7 && FGL_F8E5M2 == 11 && FGL_F4E2M1 == 13);
  CHECK(fgl_dtype_bytes(FGL_F4E2M1, 6) == 3 && fgl_dtype_bytes(FGL_BF16, 6) == 12);
  for (int i = 0; i < FGL_DTYPE_COUNT; i++) {
    CHECK(!strcmp(fgl_dtype_name((fgl_dtype)i), names[i]));
    CHECK(fgl_dtype_size((fgl_dtype)i) == sizes[i]);
  }
  CHECK(!strcmp(fgl_dtype_name((fgl_dtype)99), "?") && fgl_dtype_size((fgl_dtype)-1) == 0);
  CHECK(!strcmp(fgl_status_name(FGL_ERR_MISMATCH), "FGL_ERR_MISMATCH"));
}

/* add.ptx, the fixture most tests edit (NULL, counted as a failure, when
 * it cannot be read). */
static char *read_add_ptx(void) {
  size_t len = 0;
  char *text = tl_read_file(FGL_FIXTURES "/add.ptx", &len);
  CHECK(text != NULL);
  return text;
}

static void test_load(void) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  fgl_load_stats s;
  /* errors */
  CHECK(fgl_module_load_file("/nonexistent.ptx", &o, &m, &e) == FGL_ERR_IO &&
        strstr(e.msg, "/nonexistent.ptx: cannot open"));
  CHECK(m == NULL);
  /* a plan of version 1 (before symbolic sizes), or any other */
  const char *v1 = "// fusec-plan 1\n// target sm_80\n"
                   "// graph g params 0 results 0 temps 0 kernels 0\n// end\n";
  CHECK(fgl_module_load_data(v1, strlen(v1), &o, &m, &e) == FGL_ERR_PLAN);
  CHECK_MSG(!strcmp(e.msg, "<memory>: line 1: plan version 1, this loader reads versions 2 to 5: "
                           "recompile the model with this fusec"),
            "%s", e.msg);
  const char *bad = "// fusec-plan 7\n";
  CHECK(fgl_module_load_data(bad, strlen(bad), &o, &m, &e) == FGL_ERR_PLAN);
  CHECK_MSG(!strcmp(e.msg, "<memory>: line 1: plan version 7, this loader reads versions 2 to 5: "
                           "recompile the model with this fusec"),
            "%s", e.msg);
  CHECK(fgl_module_load_data(NULL, 0, &o, NULL, &e) == FGL_ERR_INVALID_ARGUMENT);
  size_t len = 0;
  char *text = tl_read_file(FGL_FIXTURES "/add.ptx", &len);
  if (!text) {
    CHECK(0);
    return;
  }
  char *failing = tl_replace(text, "// Hand-written", "// FAKE_JIT_FAIL Hand-written");
  CHECK(fgl_module_load_data(failing, strlen(failing), &o, &m, &e) == FGL_ERR_CUDA);
  CHECK_MSG(strstr(e.msg, "PTX JIT failed: CUDA_ERROR_INVALID_PTX") &&
                strstr(e.msg, "ptxas fatal: fake JIT failure"),
            "%s", e.msg);
  free(failing);
  o.jit_opt_level = 9;
  CHECK(fgl_module_load_data(text, len, &o, &m, &e) == FGL_ERR_INVALID_ARGUMENT);
  o = opts();
  /* cold, then warm */
  fake_reset();
  CHECK(fgl_module_load_data(text, len, &o, &m, &e) == FGL_OK);
  CHECK(fake_count("jit") == 1);
  CHECK(fgl_module_load_stats(m, &s, &e) == FGL_OK && !s.cache_hit);
  fgl_module_free(m, &e);
  CHECK(fgl_module_load_file(FGL_FIXTURES "/add.ptx", &o, &m, &e) == FGL_OK);
  CHECK(fake_count("jit") == 1);
  CHECK(fgl_module_load_stats(m, &s, &e) == FGL_OK && s.cache_hit == 1);
  fgl_device_info di;
  CHECK(fgl_module_device_info(m, &di, &e) == FGL_OK && !strcmp(di.name, "Fake GPU") &&
        di.cc_major == 9 && di.cc_minor == 0 && di.driver_version == 12040);
  fgl_module_free(m, &e);
  /* A well-formed entry (valid checksum, right key) whose cubin the driver
   * refuses: the load JITs again and replaces it (every later load failed
   * before). */
  {
    DIR *d = opendir(cache_dir);
    char entry[600] = "";
    for (struct dirent *de; d && (de = readdir(d));)
      if (strstr(de->d_name, ".cubin") && de->d_name[0] != '.')
        snprintf(entry, sizeof entry, "%s/%s", cache_dir, de->d_name);
    if (d)
      closedir(d);
    size_t elen = 0;
    unsigned char *img = entry[0] ? (unsigned char *)tl_read_file(entry, &elen) : NULL;
    CHECK(img && elen > CACHE_HEADER_SIZE + 10);
    if (img && elen > CACHE_HEADER_SIZE + 10) {
      memcpy(img + CACHE_HEADER_SIZE, "NOTACUBIN\n", 10); /* the fake driver refuses it */
      uint64_t h = XXH3_64bits(img + CACHE_HEADER_SIZE, elen - CACHE_HEADER_SIZE);
      for (int i = 0; i < 8; i++)
        img[40 + i] = (unsigned char)(h >> (8 * i));
      FILE *f = fopen(entry, "wb");
      CHECK(f && fwrite(img, 1, elen, f) == elen);
      if (f)
        fclose(f);
      int jits = (int)fake_count("jit");
      CHECK_MSG(fgl_module_load_data(text, len, &o, &m, &e) == FGL_OK, "%s", e.msg);
      CHECK(fake_count("jit") == jits + 1);
      fgl_module_free(m, &e);
      CHECK(fgl_module_load_data(text, len, &o, &m, &e) == FGL_OK && fake_count("jit") == jits + 1);
      CHECK(fgl_module_load_stats(m, &s, &e) == FGL_OK && s.cache_hit == 1);
      fgl_module_free(m, &e);
    }
    free(img);
  }
  /* cache disabled by option, then by FUSEC_CACHE=0 */
  o.cache = 0;
  CHECK(fgl_module_load_data(text, len, &o, &m, &e) == FGL_OK && fake_count("jit") == 3);
  fgl_module_free(m, &e);
  o.cache = 1;
  setenv("FUSEC_CACHE", "0", 1);
  CHECK(fgl_module_load_data(text, len, &o, &m, &e) == FGL_OK && fake_count("jit") == 4);
  unsetenv("FUSEC_CACHE");
  fgl_module_free(m, &e);
  /* a kernel whose CTAs wait for one another: refused where they cannot
   * all be resident (the fake GPU: 132 SMs, FAKE_CUDA_CTAS_PER_SM each) */
  char *res = tl_replace(text, "// end\n", "// kernel-resident 0 cluster 2\n// end\n");
  fgl_graph *gr = NULL;
  CHECK(fgl_module_load_data(res, strlen(res), &o, &m, &e) == FGL_OK);
  CHECK_MSG(fgl_graph_create(m, "axpy", &gr, &e) == FGL_OK, "%s", e.msg);
  fgl_graph_free(gr, &e);
  fgl_module_free(m, &e);
  setenv("FAKE_CUDA_CTAS_PER_SM", "4", 1);
  CHECK(fgl_module_load_data(res, strlen(res), &o, &m, &e) == FGL_OK);
  CHECK(fgl_graph_create(m, "axpy", &gr, &e) == FGL_ERR_UNSUPPORTED);
  CHECK_MSG(
      strstr(e.msg, "graph 'axpy' kernel 0 (fg_axpy_k0): its 1024 CTAs wait for one another") &&
          strstr(e.msg, "this GPU holds 526 (132 SMs x 4, in clusters)"),
      "%s", e.msg);
  unsetenv("FAKE_CUDA_CTAS_PER_SM");
  fgl_module_free(m, &e);
  free(res);
  /* dynamic shared memory, even under 48 KiB, is allowed for explicitly:
   * the kernel's static shared memory counts against the same limit */
  char *dyn = tl_replace(text, "block 256 1 1 smem 0", "block 256 1 1 smem 40960");
  fake_reset();
  CHECK(fgl_module_load_data(dyn, strlen(dyn), &o, &m, &e) == FGL_OK);
  CHECK_MSG(fgl_graph_create(m, "axpy", &gr, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_count("smem_attr") == 2); /* both variants */
  fgl_graph_free(gr, &e);
  fgl_module_free(m, &e);
  free(dyn);
  /* a newer target than the device */
  char *sm100 = tl_replace(text, "// target sm_80", "// target sm_100");
  CHECK(fgl_module_load_data(sm100, strlen(sm100), &o, &m, &e) == FGL_ERR_UNSUPPORTED &&
        strstr(e.msg, "targets sm_100"));
  free(sm100);
  free(text);
}

typedef struct bufs {
  fgl_devptr x, y, out, raw;
} bufs;

static void test_queries(fgl_module *m) {
  fgl_error e;
  int n;
  fgl_graph_info gi;
  CHECK(fgl_module_num_graphs(m, &n, &e) == FGL_OK && n == 2);
  CHECK(fgl_module_graph_at(m, 1, &gi, &e) == FGL_OK && !strcmp(gi.name, "ident"));
  CHECK(fgl_module_graph_at(m, 2, &gi, &e) == FGL_ERR_INVALID_ARGUMENT);
  CHECK(fgl_module_graph_info(m, "axpy", &gi, &e) == FGL_OK && gi.n_params == 3 &&
        gi.n_results == 3 && gi.n_temps == 1 && gi.n_kernels == 1);
  CHECK(fgl_module_graph_info(m, "nope", &gi, &e) == FGL_ERR_NOT_FOUND);
  CHECK_MSG(!strcmp(e.msg, "no graph 'nope' in the module (it has: axpy, ident)"), "%s", e.msg);
  fgl_temp_info ti;
  CHECK(fgl_module_temp_info(m, "axpy", 0, &ti, &e) == FGL_OK && ti.bytes == 4096 &&
        ti.align == 256 && ti.zero);
  CHECK(fgl_module_temp_info(m, "axpy", 1, &ti, &e) == FGL_ERR_INVALID_ARGUMENT);
  fgl_graph *g;
  CHECK(fgl_graph_create(m, "nope", &g, &e) == FGL_ERR_NOT_FOUND);
  CHECK(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK);
  fgl_param_info pi;
  CHECK(fgl_graph_param(g, 1, &pi, &e) == FGL_OK && !strcmp(pi.name, "y") && pi.dtype == FGL_F32 &&
        pi.rank == 1 && pi.sizes[0] == N && pi.strides[0] == 1 && !pi.is_scalar);
  CHECK(fgl_graph_param(g, 2, &pi, &e) == FGL_OK && pi.is_scalar && pi.rank == 0);
  CHECK(fgl_graph_param(g, 3, &pi, &e) == FGL_ERR_INVALID_ARGUMENT);
  fgl_result_info ri;
  CHECK(fgl_graph_result(g, 0, &ri, &e) == FGL_OK && !ri.is_view && ri.base_index == -1);
  CHECK(fgl_graph_result(g, 1, &ri, &e) == FGL_OK && ri.is_view && ri.base_is_param &&
        ri.base_index == 0 && ri.rank == 2 && ri.sizes[1] == 1024);
  CHECK(fgl_graph_result(g, 2, &ri, &e) == FGL_OK && ri.is_view && !ri.base_is_param &&
        ri.offset == 1024);
  fgl_graph_free(g, &e);
}

static void test_temps(fgl_module *m) {
  fgl_error e;
  fgl_graph *g;
  fgl_devptr t;
  CHECK(fgl_malloc(m, 8192, &t, &e) == FGL_OK);
  CHECK(fgl_memset(m, t, 0xAB, 8192, &e) == FGL_OK);
  fgl_devptr bad = t + 16;
  CHECK(fgl_graph_create_with_temps(m, "axpy", &bad, 1, &g, &e) == FGL_ERR_INVALID_ARGUMENT &&
        strstr(e.msg, "not aligned to 256"));
  CHECK(fgl_graph_create_with_temps(m, "axpy", &t, 0, &g, &e) == FGL_ERR_INVALID_ARGUMENT);
  CHECK(fgl_graph_create_with_temps(m, "axpy", &t, 1, &g, &e) == FGL_OK);
  unsigned char h[8192];
  CHECK(fgl_memcpy_dtoh(m, h, t, sizeof h, &e) == FGL_OK);
  int zeroed = 1;
  for (int i = 0; i < 4096; i++)
    zeroed &= h[i] == 0;
  CHECK(zeroed && h[4096] == 0xAB); /* exactly the temp's bytes */
  fgl_graph_free(g, &e);
  CHECK(fgl_free(m, t, &e) == FGL_OK);
}

static void upload(fgl_module *m, fgl_devptr d, float base, float step) {
  float *h = malloc(N * sizeof *h);
  for (int i = 0; i < N; i++)
    h[i] = base + step * (float)(i % 1000);
  fgl_error e;
  CHECK(fgl_memcpy_htod(m, d, h, N * sizeof *h, &e) == FGL_OK);
  free(h);
}

static int check_out(fgl_module *m, fgl_devptr out, float alpha) {
  float *h = malloc(N * sizeof *h);
  fgl_error e;
  fgl_memcpy_dtoh(m, h, out, N * sizeof *h, &e);
  int ok = 1;
  for (int i = 0; i < N && ok; i++) {
    float x = 1.0f + 0.5f * (float)(i % 1000), y = -2.0f + 0.25f * (float)(i % 1000);
    if (h[i] != x + alpha * y)
      ok = 0;
  }
  free(h);
  return ok;
}

static int all_ff(fgl_module *m, fgl_devptr out) {
  unsigned char *h = malloc(N * 4);
  fgl_error e;
  fgl_memcpy_dtoh(m, h, out, N * 4, &e);
  int ok = 1;
  for (int i = 0; i < N * 4; i++)
    ok &= h[i] == 0xFF;
  free(h);
  return ok;
}

static void set_args(fgl_arg in[3], fgl_tensor out[3], bufs *b, double alpha) {
  int64_t n = N;
  fgl_tensor t;
  fgl_tensor_contiguous(&t, b->x, FGL_F32, 1, &n);
  in[0] = fgl_arg_tensor(t);
  fgl_tensor_contiguous(&t, b->y, FGL_F32, 1, &n);
  in[1] = fgl_arg_tensor(t);
  in[2] = fgl_arg_float(FGL_F32, alpha);
  fgl_tensor_contiguous(&out[0], b->out, FGL_F32, 1, &n);
  memset(&out[1], 0x77, sizeof out[1]);
  memset(&out[2], 0x77, sizeof out[2]);
}

/* x (at the start of a raw buffer with room to misalign it), y and out,
 * with x and y filled. */
static void make_bufs(fgl_module *m, bufs *b) {
  fgl_error e = {0};
  CHECK(fgl_malloc(m, N * 4 + 256, &b->raw, &e) == FGL_OK);
  CHECK(fgl_malloc(m, N * 4, &b->y, &e) == FGL_OK);
  CHECK(fgl_malloc(m, N * 4, &b->out, &e) == FGL_OK);
  b->x = b->raw;
  upload(m, b->x, 1.0f, 0.5f);
  upload(m, b->y, -2.0f, 0.25f);
}

static void test_run(fgl_module *m) {
  fgl_error e = {0};
  fgl_graph *g;
  CHECK(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK);
  bufs b;
  make_bufs(m, &b);
  fgl_arg in[3];
  fgl_tensor out[3];
  set_args(in, out, &b, 2.0);
  fake_reset();
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK);
  CHECK(fake_count("launch") == 1 && !strcmp(fake_last(), "fg_axpy_k0_v4"));
  /* a run launches and nothing else */
  CHECK(fake_count("alloc") == 0 && fake_count("free") == 0 && fake_count("sync") == 0 &&
        fake_count("memset") == 0 && fake_count("htod") == 0 && fake_count("dtoh") == 0);
  CHECK(check_out(m, b.out, 2.0f));
  /* views: pointer, sizes, strides */
  CHECK(out[1].ptr == b.x && out[1].dtype == FGL_F32 && out[1].rank == 2 &&
        out[1].sizes[0] == 1024 && out[1].strides[0] == 1024 && out[1].strides[1] == 1);
  CHECK(out[2].ptr == b.out + 1024 * 4 && out[2].rank == 1 && out[2].sizes[0] == 1024);
  /* 4-byte aligned but not 16: the plain kernel */
  fgl_devptr x4 = b.raw + 4;
  upload(m, x4, 1.0f, 0.5f);
  in[0].tensor.ptr = x4;
  fake_reset();
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK && !strcmp(fake_last(), "fg_axpy_k0"));
  CHECK(check_out(m, b.out, 2.0f) && out[1].ptr == x4);
  /* integer alpha through the f64 slot: alpha = -1 */
  in[2] = fgl_arg_float(FGL_F32, -1.0);
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK && check_out(m, b.out, -1.0f));
  in[0].tensor.ptr = b.x;
  upload(m, b.x, 1.0f, 0.5f);

  /* bad inputs: rejected, nothing launched, output untouched, views not filled */
  fgl_memset(m, b.out, 0xFF, N * 4, &e);
  fgl_arg in2[3];
  fgl_tensor out2[3];
  int nc = 0;
  const char *want[] = {
      "graph 'axpy' takes 3 inputs, got 2",
      "graph 'axpy' has 3 results, got 2 outputs",
      "input 1 ('y'): expected f32[1048576] strides [1], got bf16[1048576] strides [1]",
      "input 0 ('x'): expected f32[1048576] strides [1], got f32[1048575] strides [1]",
      "input 0 ('x'): expected f32[1048576] strides [1], got f32[1048576] strides [2]",
      "input 0 ('x'): expected f32[1048576] strides [1], got f32[1024,1024] strides [1024,1]",
      "input 1 ('y'): NULL device pointer for f32[1048576] strides [1]",
      "input 0 ('x'): pointer 0x",
      "input 2 ('alpha'): expected a scalar f32, got a scalar f64",
      "input 2 ('alpha'): expected a scalar f32, got f32[1048576] strides [1]",
      "input 0 ('x'): expected f32[1048576] strides [1], got a scalar f32",
      "output 0: expected f32[1048576] strides [1], got f32[1048576] strides [-1]",
      "output 0: NULL device pointer",
      "input 0 ('x'): expected f32[1048576] strides [1], got f32 with rank 9",
  };
  for (int c = 0; c < (int)(sizeof want / sizeof want[0]); c++) {
    set_args(in2, out2, &b, 2.0);
    int n_in = 3, n_out = 3;
    switch (c) {
    case 0:
      n_in = 2;
      break;
    case 1:
      n_out = 2;
      break;
    case 2:
      in2[1].tensor.dtype = FGL_BF16;
      break;
    case 3:
      in2[0].tensor.sizes[0] = N - 1;
      break;
    case 4:
      in2[0].tensor.strides[0] = 2;
      break;
    case 5: {
      int64_t s[2] = {1024, 1024};
      fgl_tensor_contiguous(&in2[0].tensor, b.x, FGL_F32, 2, s);
    } break;
    case 6:
      in2[1].tensor.ptr = 0;
      break;
    case 7:
      in2[0].tensor.ptr = b.x + 2;
      break;
    case 8:
      in2[2].scalar_dtype = FGL_F64;
      break;
    case 9:
      in2[2] = in2[1];
      break;
    case 10:
      in2[0] = fgl_arg_float(FGL_F32, 1.0);
      break;
    case 11:
      out2[0].strides[0] = -1;
      break;
    case 12:
      out2[0].ptr = 0;
      break;
    case 13:
      in2[0].tensor.rank = 9;
      break;
    }
    fake_reset();
    fgl_error e2 = {0};
    fgl_status st = fgl_run(g, in2, n_in, out2, n_out, NULL, &e2);
    CHECK_MSG(st == FGL_ERR_MISMATCH && e2.status == FGL_ERR_MISMATCH, "case %d: status %s", c,
              fgl_status_name(st));
    CHECK_MSG(strstr(e2.msg, want[c]) == e2.msg, "case %d: '%s' does not start with '%s'", c,
              e2.msg, want[c]);
    CHECK_MSG(fake_count("launch") == 0, "case %d launched", c);
    unsigned char sentinel[sizeof out2[1]];
    memset(sentinel, 0x77, sizeof sentinel);
    CHECK_MSG(!memcmp(&out2[1], sentinel, sizeof sentinel), "case %d: view filled", c);
    if (getenv("FGL_TEST_VERBOSE"))
      printf("rejected: %s\n", e2.msg);
    nc++;
  }
  CHECK(all_ff(m, b.out));
  printf("%d bad runs rejected with nothing launched\n", nc);
  /* a size-1 dim's stride is not checked; an empty tensor may be NULL: ident graph */
  fgl_graph *gi;
  CHECK(fgl_graph_create(m, "ident", &gi, &e) == FGL_OK);
  fgl_arg ia;
  int64_t s48[2] = {4, 8};
  fgl_tensor_contiguous(&ia.tensor, b.y, FGL_F32, 2, s48);
  ia.is_scalar = 0;
  fgl_tensor io;
  fake_reset();
  CHECK(fgl_run(gi, &ia, 1, &io, 1, NULL, &e) == FGL_OK && fake_count("launch") == 0 &&
        fake_count("push") == 0);
  CHECK(io.ptr == b.y && io.rank == 2 && io.sizes[0] == 8 && io.strides[0] == 1 &&
        io.strides[1] == 8);
  fgl_graph_free(gi, &e);
  fgl_graph_free(g, &e);
  fgl_free(m, b.raw, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
}

/* Events and stream sync through the public helpers. */
static void test_events(fgl_module *m) {
  fgl_error e;
  fgl_event *a = NULL, *z = NULL;
  float ms = -1;
  CHECK(fgl_event_create(m, &a, &e) == FGL_OK && fgl_event_create(m, &z, &e) == FGL_OK);
  CHECK(fgl_event_record(a, NULL, &e) == FGL_OK && fgl_event_record(z, NULL, &e) == FGL_OK);
  CHECK(fgl_event_elapsed_ms(a, z, &ms, &e) == FGL_OK && ms >= 0);
  CHECK(fgl_stream_sync(m, NULL, &e) == FGL_OK);
  CHECK(fgl_event_destroy(a, &e) == FGL_OK && fgl_event_destroy(z, &e) == FGL_OK);
}

/* Concurrent loads, and concurrent runs on distinct instances. */
static void *thread_main(void *arg) {
  (void)arg;
  fgl_load_options o = opts();
  o.log = NULL;
  fgl_module *m;
  fgl_error e;
  if (fgl_module_load_file(FGL_FIXTURES "/add.ptx", &o, &m, &e) != FGL_OK)
    return (void *)1;
  fgl_graph *g;
  long bad = 0;
  if (fgl_graph_create(m, "axpy", &g, &e) != FGL_OK)
    return (void *)1;
  bufs b;
  fgl_malloc(m, N * 4, &b.x, &e);
  fgl_malloc(m, N * 4, &b.y, &e);
  fgl_malloc(m, N * 4, &b.out, &e);
  upload(m, b.x, 1.0f, 0.5f);
  upload(m, b.y, -2.0f, 0.25f);
  for (int i = 0; i < 3; i++) {
    fgl_arg in[3];
    fgl_tensor out[3];
    set_args(in, out, &b, (double)i);
    if (fgl_run(g, in, 3, out, 3, NULL, &e) != FGL_OK || !check_out(m, b.out, (float)i))
      bad++;
  }
  fgl_free(m, b.x, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
  fgl_graph_free(g, &e);
  fgl_module_free(m, &e);
  return (void *)bad;
}

static void test_threads(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, thread_main, NULL);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    CHECK(r == NULL);
  }
}

/* Scalars given with the other kind of value, and outputs that overlap
 * the inputs or each other. */
static void test_args_and_overlap(fgl_module *m) {
  fgl_error e = {0};
  fgl_graph *g;
  CHECK(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK);
  bufs b;
  make_bufs(m, &b);
  fgl_arg in[3];
  fgl_tensor out[3];
  /* an integer for the float parameter alpha: converted (it reached the
   * kernel as 0.0 before) */
  set_args(in, out, &b, 0.0);
  in[2] = fgl_arg_int(FGL_F32, 3);
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK && check_out(m, b.out, 3.0f));
  /* a hand-filled argument (value_kind 0) still reads the field its dtype names */
  set_args(in, out, &b, 0.0);
  in[2].f = 2.0;
  in[2].value_kind = FGL_VALUE_BY_DTYPE;
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK && check_out(m, b.out, 2.0f));
  /* outputs overlapping inputs or each other: refused, nothing launched */
  set_args(in, out, &b, 2.0);
  out[0].ptr = b.x;
  fake_reset();
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_ERR_MISMATCH && strstr(e.msg, "output 0") &&
        strstr(e.msg, "overlaps input 0 ('x')"));
  CHECK(fake_count("launch") == 0);
  fgl_devptr big; /* y and out inside one allocation, so that only they can meet */
  CHECK(fgl_malloc(m, 3 * N * 4, &big, &e) == FGL_OK);
  in[1].tensor.ptr = big;
  out[0].ptr = big + 4 * (N - 1); /* one element in common */
  CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_ERR_MISMATCH &&
        strstr(e.msg, "overlaps input 1 ('y')"));
  out[0].ptr = big + 4 * N; /* adjacent: no element in common */
  CHECK_MSG(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK, "%s", e.msg);
  fgl_free(m, big, &e);
  fgl_free(m, b.raw, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
  fgl_graph_free(g, &e);
  /* a float for an integer parameter: a whole number is converted, any
   * other is refused (it reached the kernel as 0 before) */
  char *text = read_add_ptx();
  char *isc =
      text ? tl_replace(text, "param 2 alpha f32 scalar", "param 2 alpha i64 scalar") : NULL;
  fgl_module *mi = NULL;
  fgl_load_options o = opts();
  CHECK(isc && fgl_module_load_data(isc, strlen(isc), &o, &mi, &e) == FGL_OK);
  if (mi && fgl_graph_create(mi, "axpy", &g, &e) == FGL_OK) {
    CHECK(fgl_malloc(mi, N * 4, &b.x, &e) == FGL_OK && fgl_malloc(mi, N * 4, &b.y, &e) == FGL_OK &&
          fgl_malloc(mi, N * 4, &b.out, &e) == FGL_OK);
    set_args(in, out, &b, 0.0);
    in[2] = fgl_arg_float(FGL_I64, 2.5);
    CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_ERR_MISMATCH &&
          strstr(e.msg, "not a whole number"));
    in[2] = fgl_arg_float(FGL_I64, NAN);
    CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_ERR_MISMATCH);
    in[2] = fgl_arg_float(FGL_I64, 1e300);
    CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_ERR_MISMATCH);
    in[2] = fgl_arg_float(FGL_I64, -7.0);
    CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK);
    fgl_free(mi, b.x, &e);
    fgl_free(mi, b.y, &e);
    fgl_free(mi, b.out, &e);
    fgl_graph_free(g, &e);
  }
  if (mi)
    fgl_module_free(mi, &e);
  free(isc);
  free(text);
}

/* x's values after `steps` in-place updates x += alpha * y from make_bufs's
 * x and y (the same float operations as the fake driver's kernel). */
static int check_inplace(fgl_module *m, fgl_devptr x, int64_t n, float alpha, int steps) {
  float *h = malloc((size_t)n * sizeof *h);
  fgl_error e;
  fgl_memcpy_dtoh(m, h, x, (size_t)n * sizeof *h, &e);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) {
    float v = 1.0f + 0.5f * (float)(i % 1000), y = -2.0f + 0.25f * (float)(i % 1000);
    for (int s = 0; s < steps; s++)
      v = v + alpha * y;
    ok = h[i] == v;
  }
  free(h);
  return ok;
}

/* In-place results (plan version 3, tests/loader/inplace.ptx): the output
 * entry gets the parameter's pointer, sizes and strides; the kernels get
 * it as their r<I> argument; the caller's entry for it is not read. An
 * in-place parameter sharing storage with another parameter or with an
 * output is refused with FGL_ERR_MISMATCH naming both, nothing launched,
 * nothing written. */
static void test_inplace(void) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_file(FGL_FIXTURES "/inplace.ptx", &o, &m, &e) == FGL_OK, "%s", e.msg);
  if (!m)
    return;
  fgl_graph *g = NULL;
  CHECK(fgl_graph_create(m, "axpy_ip", &g, &e) == FGL_OK);
  if (!g) {
    fgl_module_free(m, &e);
    return;
  }
  fgl_result_info ri;
  CHECK(fgl_graph_result(g, 0, &ri, &e) == FGL_OK && ri.inplace_param == -1 && !ri.is_view);
  CHECK(fgl_graph_result(g, 1, &ri, &e) == FGL_OK && ri.inplace_param == 0 && !ri.is_view &&
        ri.rank == 1 && ri.sizes[0] == N && ri.strides[0] == 1);
  bufs b;
  make_bufs(m, &b);
  fgl_arg in[3];
  fgl_tensor out[3];
  set_args(in, out, &b, 2.0); /* out[1]: garbage, which the loader must not read */
  fake_reset();
  CHECK_MSG(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK, "%s", e.msg);
  CHECK(out[1].ptr == b.x && out[1].dtype == FGL_F32 && out[1].rank == 1 && out[1].sizes[0] == N &&
        out[1].strides[0] == 1);
  CHECK(fake_count("launch") == 2 && fake_count("alloc") == 0 && fake_count("sync") == 0 &&
        fake_count("memset") == 0);
  fake_launch l0, l1;
  CHECK(fake_launch_at(0, &l0) == 2 && fake_launch_at(1, &l1) == 2);
  CHECK(!strcmp(l0.entry, "fg_axpy_k0") && l0.args[0] == b.x && l0.args[3] == b.out);
  CHECK(!strcmp(l1.entry, "fg_axpy_k0") && l1.args[0] == b.x && l1.args[1] == b.y &&
        l1.args[3] == b.x);                 /* r1 is x's storage */
  CHECK(check_out(m, b.out, 2.0f));         /* kernel 0 read x before kernel 1 wrote it */
  CHECK(check_inplace(m, b.x, N, 2.0f, 1)); /* x updated in place */
  /* again: the update accumulates, out reads the updated x */
  memset(&out[1], 0x77, sizeof out[1]);
  CHECK(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK && out[1].ptr == b.x);
  CHECK(check_inplace(m, b.x, N, 2.0f, 2));
  upload(m, b.x, 1.0f, 0.5f);

  /* overlaps: x (written in place) with y, with output 0; refused naming
   * both, nothing launched, x and the output untouched */
  fgl_devptr big; /* room for two overlapping placements */
  CHECK(fgl_malloc(m, 3 * N * 4, &big, &e) == FGL_OK);
  upload(m, big, -2.0f, 0.25f); /* y's values, for the run that passes */
  upload(m, big + 4 * N, 1.0f, 0.5f);
  for (int c = 0; c < 4; c++) {
    set_args(in, out, &b, 2.0);
    in[0].tensor.ptr = big + 4 * N; /* x in the middle third */
    const char *want1 = "input 0 ('x') [0x", *want2;
    fgl_status st_want = FGL_ERR_MISMATCH;
    switch (c) {
    case 0: /* y ends one element into x */
      in[1].tensor.ptr = big + 4;
      want2 = "which result 1 overwrites in place, overlaps input 1 ('y') [0x";
      break;
    case 1: /* y is x */
      in[1].tensor.ptr = big + 4 * N;
      want2 = "which result 1 overwrites in place, overlaps input 1 ('y') [0x";
      break;
    case 2: /* output 0 starts at x's last element: the outputs' own check */
      out[0].ptr = big + 8 * N - 4;
      want1 = "output 0 [0x";
      want2 = "overlaps input 0 ('x') [0x";
      break;
    default: /* adjacent on both sides: no element in common, runs */
      in[1].tensor.ptr = big;
      out[0].ptr = big + 8 * N;
      want1 = want2 = "";
      st_want = FGL_OK;
      break;
    }
    fake_reset();
    e.msg[0] = 0;
    fgl_status st = fgl_run(g, in, 3, out, 2, NULL, &e);
    CHECK_MSG(st == st_want && strstr(e.msg, want1) && strstr(e.msg, want2), "case %d: %s '%s'", c,
              fgl_status_name(st), e.msg);
    if (st_want == FGL_OK) {
      CHECK(fake_count("launch") == 2 && check_inplace(m, big + 4 * N, N, 2.0f, 1));
      continue;
    }
    CHECK_MSG(fake_count("launch") == 0, "case %d", c);
    CHECK(check_inplace(m, big + 4 * N, N, 2.0f, 0)); /* x as it was */
  }
  fgl_free(m, big, &e);
  fgl_graph_free(g, &e);

  /* symbolic sizes: the in-place result follows N, its only result */
  CHECK(fgl_graph_create(m, "axpy_ip_n", &g, &e) == FGL_OK);
  if (g) {
    CHECK(fgl_graph_result(g, 0, &ri, &e) == FGL_OK && ri.inplace_param == 0 && ri.symbolic);
    const int64_t sizes[] = {4096, 4, 0, 1024};
    for (int k = 0; k < 4; k++) {
      int64_t n = sizes[k];
      upload(m, b.x, 1.0f, 0.5f);
      fgl_tensor t;
      fgl_tensor_contiguous(&t, b.x, FGL_F32, 1, &n);
      in[0] = fgl_arg_tensor(t);
      fgl_tensor_contiguous(&t, b.y, FGL_F32, 1, &n);
      in[1] = fgl_arg_tensor(t);
      in[2] = fgl_arg_float(FGL_F32, -1.0);
      memset(&out[0], 0x77, sizeof out[0]);
      fake_reset();
      CHECK_MSG(fgl_run(g, in, 3, out, 1, NULL, &e) == FGL_OK, "%s", e.msg);
      CHECK(fake_count("launch") == (n > 0) && out[0].ptr == b.x && out[0].rank == 1 &&
            out[0].sizes[0] == n && out[0].strides[0] == 1);
      CHECK(check_inplace(m, b.x, n, -1.0f, 1));
    }
    /* y overlapping x: refused under syms as well */
    int64_t n = 64;
    fgl_tensor t;
    fgl_tensor_contiguous(&t, b.x, FGL_F32, 1, &n);
    in[0] = fgl_arg_tensor(t);
    fgl_tensor_contiguous(&t, b.x + 4 * 63, FGL_F32, 1, &n);
    in[1] = fgl_arg_tensor(t);
    fake_reset();
    CHECK(fgl_run(g, in, 3, out, 1, NULL, &e) == FGL_ERR_MISMATCH &&
          strstr(e.msg, "input 0 ('x')") && strstr(e.msg, "overlaps input 1 ('y')"));
    CHECK(fake_count("launch") == 0);
    fgl_graph_free(g, &e);
  }
  fgl_free(m, b.raw, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
  fgl_module_free(m, &e);
}

/* A kernel over an empty domain (grid x 0 in the plan): loads, and a run
 * launches nothing. */
static void test_empty_grid(void) {
  char *text = read_add_ptx();
  if (!text)
    return;
  char *empty = tl_replace(text, "fg_axpy_k0 grid 1024 1 1", "fg_axpy_k0 grid 0 1 1");
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_data(empty, strlen(empty), &o, &m, &e) == FGL_OK, "%s", e.msg);
  fgl_graph *g = NULL;
  if (m)
    CHECK(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK);
  if (g) {
    bufs b;
    CHECK(fgl_malloc(m, N * 4 + 256, &b.raw, &e) == FGL_OK);
    CHECK(fgl_malloc(m, N * 4, &b.y, &e) == FGL_OK);
    CHECK(fgl_malloc(m, N * 4, &b.out, &e) == FGL_OK);
    b.x = b.raw;
    fgl_arg in[3];
    fgl_tensor out[3];
    set_args(in, out, &b, 2.0);
    fake_reset();
    CHECK(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK);
    CHECK(fake_count("launch") == 0);
    fgl_free(m, b.raw, &e);
    fgl_free(m, b.y, &e);
    fgl_free(m, b.out, &e);
    fgl_graph_free(g, &e);
  }
  /* grid y and z stay at least 1 */
  char *bad = tl_replace(text, "fg_axpy_k0 grid 1024 1 1", "fg_axpy_k0 grid 4 0 1");
  fgl_module *m2 = NULL;
  CHECK(fgl_module_load_data(bad, strlen(bad), &o, &m2, &e) == FGL_ERR_PLAN &&
        strstr(e.msg, "grid y"));
  if (m)
    fgl_module_free(m, &e);
  free(bad);
  free(empty);
  free(text);
}

/* One launch of a two-kernel axpy (tl_text.h): the result it writes (0 or
 * 3), whether on a stream other than the caller's (NULL) one, whether by
 * programmatic launch. */
typedef struct want_launch {
  int result, side, pdl;
} want_launch;

/* Loads text, a two-kernel axpy, runs it twice, and checks each run's two
 * launches against want (in launch order), the event records the run
 * makes (forks and joins) and both results. With fail non-NULL each run
 * must instead fail with FGL_ERR_CUDA and a message holding fail. */
static void run_axpy2(const char *text, const want_launch want[2], int events, const char *fail) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_data(text, strlen(text), &o, &m, &e) == FGL_OK, "%s", e.msg);
  fgl_graph *g = NULL;
  if (m)
    CHECK_MSG(fgl_graph_create(m, "axpy", &g, &e) == FGL_OK, "%s", e.msg);
  if (g) {
    bufs b;
    make_bufs(m, &b);
    fgl_devptr out3 = 0;
    CHECK(fgl_malloc(m, N * 4, &out3, &e) == FGL_OK);
    fgl_arg in[3];
    fgl_tensor out[4];
    set_args(in, out, &b, 2.0);
    int64_t n = N;
    fgl_tensor_contiguous(&out[3], out3, FGL_F32, 1, &n);
    for (int run = 0; run < 2; run++) {
      fake_reset();
      if (fail) {
        CHECK_MSG(fgl_run(g, in, 3, out, 4, NULL, &e) == FGL_ERR_CUDA && strstr(e.msg, fail), "%s",
                  e.msg);
        continue;
      }
      CHECK_MSG(fgl_run(g, in, 3, out, 4, NULL, &e) == FGL_OK, "%s", e.msg);
      for (int i = 0; i < 2; i++) {
        fake_launch l;
        CHECK(fake_launch_at(i, &l) == 2);
        CHECK_MSG(l.args[3] == (want[i].result ? out3 : b.out) && (l.stream != 0) == want[i].side &&
                      l.pdl == want[i].pdl,
                  "launch %d: result %s, stream %d, pdl %d", i, l.args[3] == out3 ? "3" : "0",
                  l.stream, l.pdl);
      }
      CHECK(fake_count("event_record") == events && fake_count("wait_event") == events &&
            fake_count("alloc") == 0 && fake_count("sync") == 0);
    }
    if (!fail)
      CHECK(check_out(m, b.out, 2.0f) && check_out(m, out3, 2.0f));
    fgl_free(m, out3, &e);
    fgl_free(m, b.raw, &e);
    fgl_free(m, b.y, &e);
    fgl_free(m, b.out, &e);
    fgl_graph_free(g, &e);
  }
  if (m)
    fgl_module_free(m, &e);
}

/* Plan lines refused at load, each with (part of) its message. */
static void refuse_all(const char *const (*bad)[2], int n) {
  fgl_load_options o = opts();
  fgl_error e = {0};
  for (int i = 0; i < n; i++) {
    fgl_module *mb = NULL;
    e.msg[0] = 0;
    CHECK_MSG(fgl_module_load_data(bad[i][0], strlen(bad[i][0]), &o, &mb, &e) == FGL_ERR_PLAN &&
                  strstr(e.msg, bad[i][1]),
              "case %d: %s", i, e.msg);
    if (mb)
      fgl_module_free(mb, &e);
  }
}

/* kernel-stream (version 4): add.ptx's axpy with a second kernel on
 * stream 1. The loader forks the second stream from the caller's,
 * launches stream 1's kernel first, and joins it back; both results are
 * computed. The line's misuse is refused. */
static void test_streams(void) {
  char *text = read_add_ptx();
  if (!text)
    return;
  char *d = tl_add_with_stream(text);
  /* stream 1's kernel first, on the created stream; then kernel 0 on the
   * caller's (NULL) stream */
  run_axpy2(d, (want_launch[2]){{3, 1, 0}, {0, 0, 0}}, 2, NULL);
  /* a version 3 file, a stream out of range, a resident kernel */
  char *v3 = tl_replace(d, "// fusec-plan 4", "// fusec-plan 3");
  char *s2 = tl_replace(d, "// kernel-stream 1 1", "// kernel-stream 1 2");
  char *res =
      tl_replace(d, "// kernel-stream 1 1", "// kernel-resident 1 cluster 1\n// kernel-stream 1 1");
  const char *const bad[][2] = {{v3, "'kernel-stream' needs plan version 4 (this file says 3)"},
                                {s2, "kernel-stream stream 2 is out of range [1, 1]"},
                                {res, "a kernel-resident kernel runs on the caller's stream"}};
  refuse_all(bad, 3);
  free(res);
  free(s2);
  free(v3);
  free(d);
  free(text);
}

/* kernel-pdl (version 5): a kernel that waits for its predecessor in the
 * kernel is launched with programmatic stream serialization when a kernel
 * of the same run went before it on its stream, and plainly otherwise. */
static void test_pdl(void) {
  char *text = read_add_ptx();
  if (!text)
    return;
  char *st = tl_add_with_stream(text);
  char *v5 = tl_replace(st, "// fusec-plan 4", "// fusec-plan 5");
  /* both kernels on the caller's stream, both marked: kernel 0 first
   * there, plain; kernel 1 after it */
  char *one = tl_add_with_pdl(text);
  run_axpy2(one, (want_launch[2]){{0, 0, 0}, {3, 0, 1}}, 0, NULL);
  /* a driver refusing the launch: the error names the call and the kernel */
  setenv("FAKE_CUDA_PDL_FAIL", "1", 1);
  run_axpy2(one, NULL, 0, "kernel 1 (fg_axpy_k0): cuLaunchKernelEx (programmatic launch) failed");
  unsetenv("FAKE_CUDA_PDL_FAIL");
  /* kernel 1 on the second stream: first there, so plain, as kernel 0 */
  char *two = tl_replace(v5, "// kernel-stream 1 1\n", "// kernel-stream 1 1\n// kernel-pdl 1\n");
  run_axpy2(two, (want_launch[2]){{3, 1, 0}, {0, 0, 0}}, 2, NULL);
  /* a version 4 file, two lines for one kernel, a line before its kernel,
   * an extra token */
  char *v4 = tl_replace(one, "// fusec-plan 5", "// fusec-plan 4");
  char *twice = tl_replace(one, "// kernel-pdl 1\n", "// kernel-pdl 1\n// kernel-pdl 1\n");
  char *early = tl_replace(v5, "ptrs p0,p1,r0\n", "ptrs p0,p1,r0\n// kernel-pdl 1\n");
  char *extra = tl_replace(one, "// kernel-pdl 1\n", "// kernel-pdl 1 x\n");
  const char *const bad[][2] = {{v4, "'kernel-pdl' needs plan version 5 (this file says 4)"},
                                {twice, "kernel 1 has two kernel-pdl lines"},
                                {early, "kernel-pdl 1 does not follow its kernel line"},
                                {extra, "unexpected token 'x' at the end of the line"}};
  refuse_all(bad, 4);
  free(extra);
  free(early);
  free(twice);
  free(v4);
  free(two);
  free(one);
  free(v5);
  free(st);
  free(text);
}

int main(void) {
  const char *lib = getenv("FGL_LIBCUDA");
  if (!lib) {
    fprintf(stderr, "FGL_LIBCUDA must name the fake driver (ctest sets it)\n");
    return 1;
  }
  snprintf(cache_dir, sizeof cache_dir, "/tmp/fgl-api-test-%d", (int)getpid());
  test_no_driver();
  test_dtypes();
  void *h = dlopen(lib, RTLD_NOW);
  CHECK(h != NULL);
  if (!h)
    return 1;
  fake_count = (long (*)(const char *))dlsym(h, "fake_cuda_count");
  fake_reset = (void (*)(void))dlsym(h, "fake_cuda_reset");
  fake_last = (const char *(*)(void))dlsym(h, "fake_cuda_last_entry");
  fake_launch_at = (int (*)(int, fake_launch *))dlsym(h, "fake_cuda_launch");
  test_load();
  fgl_module *m;
  fgl_error e;
  fgl_load_options o = opts();
  CHECK(fgl_module_load_file(FGL_FIXTURES "/add.ptx", &o, &m, &e) == FGL_OK);
  test_queries(m);
  test_temps(m);
  test_run(m);
  test_events(m);
  test_args_and_overlap(m);
  fgl_module_free(m, &e);
  test_threads();
  test_empty_grid();
  test_inplace();
  test_streams();
  test_pdl();
  dlclose(h);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd) != 0)
    CHECK(0);
  TL_DONE("test_loader_api");
}
