/* Symbolic sizes (plan version 2) through the public API on the fake
 * driver (fake_cuda.c, through FGL_LIBCUDA): binding from the first
 * occurrence, mismatches and the syms' facts (messages checked), formulas
 * evaluated for strides, view offsets, grids and temp bytes, z<J>
 * arguments reaching the launch, run-time refusals (overflow, negative,
 * division by zero, grid limits, zero strides, views leaving their base,
 * resident grids), temps growing stream-ordered and never during a captured
 * run after fgl_graph_reserve, caller-supplied temps, and the shape
 * queries; kernel-narrow (narrow.ptx): the 32-bit index entries launched
 * while sym 0 is at most the line's max, the wide ones above, and the
 * resident kernels' occupancy checked for the pair launched. */
#include <dlfcn.h>
#include <stdint.h>
#include <unistd.h>

#include "cuda_api.h"
#include "fgload.h"
#include "tl.h"
#include "fake_cuda.h"

static long (*fake_count)(const char *);
static void (*fake_reset)(void);
static int (*fake_launch_at)(int, fake_launch *);
static char cache_dir[256];

static fgl_load_options opts(void) {
  fgl_load_options o;
  fgl_load_options_init(&o);
  o.cache_dir = cache_dir;
  return o;
}

static fgl_module *load_text(const char *text) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_data(text, strlen(text), &o, &m, &e) == FGL_OK, "%s", e.msg);
  return m;
}

static fgl_graph *create(fgl_module *m, const char *name) {
  fgl_graph *g = NULL;
  fgl_error e = {0};
  CHECK_MSG(m && fgl_graph_create(m, name, &g, &e) == FGL_OK, "%s", e.msg);
  return g;
}

static fgl_arg tensor(fgl_devptr p, fgl_dtype dt, int rank, const int64_t *sizes) {
  fgl_tensor t;
  fgl_tensor_contiguous(&t, p, dt, rank, sizes);
  return fgl_arg_tensor(t);
}

/* Runs g expecting failure: status st, a message starting with want (or
 * containing it, when anywhere), nothing launched, views not filled. */
static void expect_refused(fgl_graph *g, const fgl_arg *in, int n_in, fgl_tensor *out, int n_out,
                           fgl_status st, const char *want, int anywhere) {
  fgl_error e = {0};
  int view[8] = {0}; /* outputs with no storage: views, which must stay unfilled */
  fake_reset();
  for (int j = 0; j < n_out && j < 8; j++)
    if (out[j].ptr == 0) {
      memset(&out[j], 0x77, sizeof out[j]);
      view[j] = 1;
    }
  fgl_status got = fgl_run(g, in, n_in, out, n_out, NULL, &e);
  CHECK_MSG(got == st && e.status == st, "'%s': status %s", want, fgl_status_name(got));
  const char *at = strstr(e.msg, want);
  CHECK_MSG(anywhere ? at != NULL : at == e.msg, "'%s' not in '%s'", want, e.msg);
  CHECK_MSG(fake_count("launch") == 0 && fake_count("alloc_async") == 0, "'%s': launched", want);
  unsigned char sentinel[sizeof(fgl_tensor)];
  memset(sentinel, 0x77, sizeof sentinel);
  for (int j = 0; j < n_out && j < 8; j++)
    if (view[j])
      CHECK_MSG(!memcmp(&out[j], sentinel, sizeof sentinel), "'%s': view %d filled", want, j);
  if (getenv("FGL_TEST_VERBOSE"))
    printf("refused: %s\n", e.msg);
}

/* ---- sym.ptx: axpy over N elements, N bound from x and y ---- */

typedef struct axpy_bufs {
  fgl_devptr x, y, out;
  int64_t cap;
} axpy_bufs;

static void fill(fgl_module *m, axpy_bufs *b, int64_t n) {
  float *h = malloc((size_t)n * 4 + 4);
  fgl_error e;
  for (int64_t i = 0; i < n; i++)
    h[i] = (float)(i % 977);
  CHECK(fgl_memcpy_htod(m, b->x, h, (size_t)n * 4, &e) == FGL_OK);
  for (int64_t i = 0; i < n; i++)
    h[i] = 0.5f * (float)(i % 31);
  CHECK(fgl_memcpy_htod(m, b->y, h, (size_t)n * 4, &e) == FGL_OK);
  free(h);
}

/* out[i] == x[i] + alpha y[i] for i < n, and out[n] untouched (0xFF). */
static int out_ok(fgl_module *m, const axpy_bufs *b, int64_t n, float alpha) {
  float *h = malloc((size_t)n * 4 + 4);
  fgl_error e;
  fgl_memcpy_dtoh(m, h, b->out, (size_t)n * 4 + 4, &e);
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++)
    ok = h[i] == (float)(i % 977) + alpha * 0.5f * (float)(i % 31);
  uint32_t after;
  memcpy(&after, &h[n], 4);
  free(h);
  return ok && after == 0xFFFFFFFFu;
}

static void axpy_args(const axpy_bufs *b, int64_t nx, int64_t ny, float alpha, fgl_arg in[3],
                      fgl_tensor out[2]) {
  in[0] = tensor(b->x, FGL_F32, 1, &nx);
  in[1] = tensor(b->y, FGL_F32, 1, &ny);
  in[2] = fgl_arg_float(FGL_F32, alpha);
  memset(out, 0, 2 * sizeof *out);
  fgl_tensor_contiguous(&out[0], b->out, FGL_F32, 1, &nx);
}

static void test_queries(fgl_module *m) {
  fgl_graph *g = create(m, "axpy_n");
  if (!g)
    return;
  fgl_error e;
  int n = -1;
  fgl_sym_info si;
  CHECK(fgl_graph_num_syms(g, &n, &e) == FGL_OK && n == 1);
  CHECK(fgl_graph_sym(g, 0, &si, &e) == FGL_OK && !strcmp(si.name, "N") && si.min == 0 &&
        si.max == 1073741824 && si.div == 4);
  CHECK(fgl_graph_sym(g, 1, &si, &e) == FGL_ERR_INVALID_ARGUMENT &&
        strstr(e.msg, "sym index 1 out of range (graph 'axpy_n' has 1 syms)"));
  fgl_param_info pi;
  CHECK(fgl_graph_param(g, 0, &pi, &e) == FGL_OK && pi.rank == 1 && pi.sizes[0] == -1 &&
        pi.sym[0] == 0 && pi.strides[0] == 1 && pi.sym[1] == -1);
  CHECK(fgl_graph_param(g, 2, &pi, &e) == FGL_OK && pi.is_scalar && pi.sym[0] == -1);
  fgl_result_info ri;
  CHECK(fgl_graph_result(g, 0, &ri, &e) == FGL_OK && ri.symbolic && ri.sizes[0] == -1 &&
        ri.sym[0] == 0 && ri.strides[0] == 1 && !ri.is_view);
  CHECK(fgl_graph_result(g, 1, &ri, &e) == FGL_OK && ri.symbolic && ri.is_view &&
        ri.sizes[0] == -1 && ri.sym[0] == -1 && ri.offset == -1 && !ri.base_is_param &&
        ri.base_index == 0);
  fgl_temp_info ti;
  CHECK(fgl_module_temp_info(m, "axpy_n", 0, &ti, &e) == FGL_OK && ti.symbolic && ti.bytes == 0 &&
        ti.align == 256 && ti.zero);
  /* concrete shapes for given inputs */
  axpy_bufs b = {0x1000, 0x100000, 0x200000, 0};
  fgl_arg in[3];
  fgl_tensor out[2];
  axpy_args(&b, 4096, 4096, 1.0f, in, out);
  CHECK_MSG(fgl_graph_result_shape(g, in, 3, 1, &ri, &e) == FGL_OK, "%s", e.msg);
  CHECK(ri.rank == 1 && ri.sizes[0] == 2048 && ri.strides[0] == 1 && ri.offset == 2048 &&
        ri.is_view && ri.symbolic);
  CHECK(fgl_graph_result_shape(g, in, 3, 0, &ri, &e) == FGL_OK && ri.sizes[0] == 4096 &&
        ri.sym[0] == 0);
  CHECK(fgl_graph_param_shape(g, in, 3, 1, &pi, &e) == FGL_OK && pi.sizes[0] == 4096 &&
        pi.strides[0] == 1 && pi.sym[0] == 0);
  /* pointers are not read: 0 is fine for a query */
  in[0].tensor.ptr = in[1].tensor.ptr = 0;
  CHECK(fgl_graph_result_shape(g, in, 3, 1, &ri, &e) == FGL_OK && ri.offset == 2048);
  /* ... but the binding is checked */
  in[1].tensor.sizes[0] = 4100;
  CHECK(fgl_graph_result_shape(g, in, 3, 1, &ri, &e) == FGL_ERR_MISMATCH);
  CHECK_MSG(!strcmp(e.msg, "size N: parameter 'y' dim 0 is 4100, but parameter 'x' dim 0 bound N "
                           "to 4096"),
            "%s", e.msg);
  CHECK(fgl_graph_result_shape(g, in, 2, 1, &ri, &e) == FGL_ERR_MISMATCH &&
        strstr(e.msg, "graph 'axpy_n' takes 3 inputs, got 2"));
  CHECK(fgl_graph_result_shape(g, in, 3, 2, &ri, &e) == FGL_ERR_INVALID_ARGUMENT);
  in[0].tensor.sizes[0] = in[1].tensor.sizes[0] = 6;
  CHECK(fgl_graph_result_shape(g, in, 3, 0, &ri, &e) == FGL_ERR_MISMATCH &&
        !strcmp(e.msg, "size N = 6 (parameter 'x' dim 0) is not a multiple of 4"));
  fgl_graph_free(g, &e);
}

static void test_axpy_runs(fgl_module *m) {
  fgl_graph *g = create(m, "axpy_n");
  if (!g)
    return;
  fgl_error e = {0};
  axpy_bufs b;
  const int64_t cap = 1 << 16;
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.x, &e) == FGL_OK);
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.y, &e) == FGL_OK);
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.out, &e) == FGL_OK);
  fill(m, &b, cap);
  fgl_arg in[3];
  fgl_tensor out[2];
  /* N = 4096: bound from x (the first occurrence), checked against y; the
   * temp ((N+1023)/1024*4 = 16 bytes) is allocated on the run's stream and
   * zeroed there; nothing synchronizes */
  static const struct {
    int64_t n;
    long alloc, free_, memset_;
  } steps[] = {
      {4096, 1, 0, 1}, /* first: the temp is made */
      {4096, 0, 0, 0}, /* same sizes: nothing */
      {8192, 1, 1, 1}, /* larger: the temp grows (old one freed stream-ordered) */
      {2048, 0, 0, 0}, /* smaller: fits */
      {8188, 0, 0, 0}, /* 32 bytes still */
      {8196, 1, 1, 1}, /* 36 bytes */
  };
  for (int s = 0; s < (int)(sizeof steps / sizeof steps[0]); s++) {
    int64_t n = steps[s].n;
    float alpha = 0.25f * (float)(s + 1);
    fgl_memset(m, b.out, 0xFF, cap * 4 + 64, &e);
    axpy_args(&b, n, n, alpha, in, out);
    fake_reset();
    CHECK_MSG(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK, "N=%lld: %s", (long long)n, e.msg);
    CHECK_MSG(fake_count("alloc_async") == steps[s].alloc &&
                  fake_count("free_async") == steps[s].free_ &&
                  fake_count("memset_async") == steps[s].memset_,
              "N=%lld: alloc_async %ld free_async %ld memset_async %ld", (long long)n,
              fake_count("alloc_async"), fake_count("free_async"), fake_count("memset_async"));
    CHECK(fake_count("sync") == 0 && fake_count("alloc") == 0 && fake_count("memset") == 0 &&
          fake_count("launch") == 1);
    fake_launch l;
    CHECK(fake_launch_at(0, &l) == 1);
    CHECK_MSG(!strcmp(l.entry, "fg_axpy_n_v4") && l.grid[0] == (unsigned)((n + 1023) / 1024) &&
                  l.grid[1] == 1 && l.grid[2] == 1 && l.block[0] == 256 && l.nargs == 6,
              "N=%lld: %s grid %u", (long long)n, l.entry, l.grid[0]);
    CHECK_MSG(l.args[5] == (unsigned long long)n, "z0 = %llu, N = %lld", l.args[5], (long long)n);
    CHECK(l.args[0] == b.x && l.args[1] == b.y && l.args[3] == b.out && l.args[4] != 0);
    CHECK_MSG(out_ok(m, &b, n, alpha), "N=%lld: wrong output", (long long)n);
    /* the view: the second half of out */
    CHECK(out[1].ptr == b.out + (unsigned long long)(n / 2) * 4 && out[1].rank == 1 &&
          out[1].sizes[0] == n / 2 && out[1].strides[0] == 1 && out[1].dtype == FGL_F32);
  }
  /* misaligned x: the plain kernel, same binding */
  int64_t n = 1024;
  axpy_args(&b, n, n, 1.0f, in, out);
  in[0].tensor.ptr = b.x + 4;
  fake_reset();
  CHECK(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK);
  fake_launch l;
  CHECK(fake_launch_at(0, &l) == 1 && !strcmp(l.entry, "fg_axpy_n") && l.args[5] == 1024);
  /* N = 0: empty tensors (NULL allowed), grid x 0: nothing launched */
  int64_t zero = 0;
  in[0] = tensor(0, FGL_F32, 1, &zero);
  in[1] = tensor(0, FGL_F32, 1, &zero);
  fgl_tensor_contiguous(&out[0], 0, FGL_F32, 1, &zero);
  fake_reset();
  CHECK_MSG(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_count("launch") == 0 && fake_count("alloc_async") == 0 && out[1].sizes[0] == 0);

  /* refusals: nothing launched, no view filled */
  axpy_args(&b, 4096, 2048, 1.0f, in, out);
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "size N: parameter 'y' dim 0 is 2048, but parameter 'x' dim 0 bound N to 4096", 0);
  axpy_args(&b, 4098, 4098, 1.0f, in, out);
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "size N = 4098 (parameter 'x' dim 0) is not a multiple of 4", 0);
  axpy_args(&b, INT64_C(1) << 31, INT64_C(1) << 31, 1.0f, in, out);
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "size N = 2147483648 (parameter 'x' dim 0) is outside 0..1073741824", 0);
  axpy_args(&b, -4, -4, 1.0f, in, out);
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "size N = -4 (parameter 'x' dim 0) is outside 0..1073741824", 0);
  /* the output is checked against the evaluated shape */
  axpy_args(&b, 4096, 4096, 1.0f, in, out);
  out[0].sizes[0] = 4092;
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "output 0: expected f32[4096] strides [1], got f32[4092] strides [1]", 0);
  /* the wrong rank is named with the plan's formulas */
  axpy_args(&b, 4096, 4096, 1.0f, in, out);
  int64_t s2[2] = {64, 64};
  in[1] = tensor(b.y, FGL_F32, 2, s2);
  expect_refused(g, in, 3, out, 2, FGL_ERR_MISMATCH,
                 "input 1 ('y'): expected f32[N] strides [1], got f32[64,64] strides [64,1]", 0);
  /* a failed growth (the pool is out of memory): refused, nothing launched;
   * the next run grows */
  axpy_args(&b, cap, cap, 1.0f, in, out);
  setenv("FAKE_CUDA_ASYNC_FAIL", "1", 1);
  expect_refused(g, in, 3, out, 2, FGL_ERR_CUDA,
                 "graph 'axpy_n': allocating temp 0 (256 bytes) failed", 0);
  unsetenv("FAKE_CUDA_ASYNC_FAIL");
  fake_reset();
  fgl_memset(m, b.out, 0xFF, cap * 4 + 64, &e);
  axpy_args(&b, cap, cap, 2.0f, in, out);
  CHECK_MSG(fgl_run(g, in, 3, out, 2, NULL, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_count("alloc_async") == 1 && fake_count("launch") == 1 && out_ok(m, &b, cap, 2.0f));

  /* fgl_graph_reserve, then a captured run allocates nothing */
  fgl_graph *g2 = create(m, "axpy_n");
  fgl_stream st = (fgl_stream)0x5; /* the fake driver ignores streams */
  axpy_args(&b, cap, cap, 1.0f, in, out);
  fake_reset();
  CHECK_MSG(fgl_graph_reserve(g2, in, 3, st, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_count("alloc_async") == 1 && fake_count("memset_async") == 1 &&
        fake_count("launch") == 0 && fake_count("sync") == 0);
  CHECK(fgl_graph_reserve(g2, in, 3, st, &e) == FGL_OK && fake_count("alloc_async") == 1);
  axpy_args(&b, 4096, 4100, 1.0f, in, out);
  CHECK(fgl_graph_reserve(g2, in, 3, st, &e) == FGL_ERR_MISMATCH &&
        strstr(e.msg, "size N: parameter 'y'"));
  void *h = dlopen(getenv("FGL_LIBCUDA"), RTLD_NOW);
  /* the fake's own signatures (a call through another type is undefined) */
  CUresult (*begin)(CUstream, int) =
      h ? (CUresult(*)(CUstream, int))dlsym(h, "cuStreamBeginCapture_v2") : NULL;
  CUresult (*end)(CUstream, CUgraph *) =
      h ? (CUresult(*)(CUstream, CUgraph *))dlsym(h, "cuStreamEndCapture") : NULL;
  CUresult (*gfree)(CUgraph) = h ? (CUresult(*)(CUgraph))dlsym(h, "cuGraphDestroy") : NULL;
  CHECK(begin && end && gfree);
  if (begin && end && gfree) {
    fake_reset();
    CUgraph cg = NULL;
    begin((CUstream)st, 0);
    for (int64_t nn = 4096; nn <= cap; nn *= 4) {
      axpy_args(&b, nn, nn, 1.0f, in, out);
      CHECK_MSG(fgl_run(g2, in, 3, out, 2, st, &e) == FGL_OK, "%s", e.msg);
    }
    end((CUstream)st, &cg);
    gfree(cg);
    CHECK(fake_count("captured") == 3 && fake_count("alloc_async") == 0 &&
          fake_count("free_async") == 0 && fake_count("memset_async") == 0);
  }
  if (h)
    dlclose(h);
  fgl_graph_free(g2, &e);
  fgl_graph_free(g, &e);
  fgl_free(m, b.x, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
}

static void test_views_only(fgl_module *m) {
  fgl_graph *g = create(m, "tview");
  if (!g)
    return;
  fgl_error e = {0};
  int64_t xs[2] = {3, 8}, ys[1] = {8};
  fgl_arg in[2] = {tensor(0x10000, FGL_F32, 2, xs), tensor(0x20000, FGL_F32, 1, ys)};
  fgl_tensor out[2];
  fake_reset();
  CHECK_MSG(fgl_run(g, in, 2, out, 2, NULL, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_count("launch") == 0 && fake_count("push") == 0);
  CHECK(out[0].ptr == 0x10000 && out[0].rank == 2 && out[0].sizes[0] == 8 && out[0].sizes[1] == 3 &&
        out[0].strides[0] == 1 && out[0].strides[1] == 8);
  CHECK(out[1].ptr == 0x20004 && out[1].sizes[0] == 7 && out[1].strides[0] == 1);
  /* another binding; then the first again (re-evaluated, not stale) */
  int64_t xs2[2] = {5, 2}, ys2[1] = {2};
  fgl_arg in2[2] = {tensor(0x10000, FGL_F32, 2, xs2), tensor(0x20000, FGL_F32, 1, ys2)};
  CHECK(fgl_run(g, in2, 2, out, 2, NULL, &e) == FGL_OK && out[0].sizes[0] == 2 &&
        out[0].sizes[1] == 5 && out[0].strides[1] == 2 && out[1].sizes[0] == 1);
  CHECK(fgl_run(g, in, 2, out, 2, NULL, &e) == FGL_OK && out[0].sizes[1] == 3 &&
        out[0].strides[1] == 8 && out[1].sizes[0] == 7);
  /* the x's stride is T: checked against the bound value */
  memset(out, 0, sizeof out);
  in[0].tensor.strides[0] = 9;
  expect_refused(g, in, 2, out, 2, FGL_ERR_MISMATCH,
                 "input 0 ('x'): expected f32[3,8] strides [8,1], got f32[3,8] strides [9,1]", 0);
  in[0].tensor.strides[0] = 8;
  ys[0] = 6;
  in[1] = tensor(0x20000, FGL_F32, 1, ys);
  expect_refused(g, in, 2, out, 2, FGL_ERR_MISMATCH,
                 "size T: parameter 'y' dim 0 is 6, but parameter 'x' dim 1 bound T to 8", 0);
  int64_t odd[2] = {3, 7}, odd1[1] = {7};
  fgl_arg in3[2] = {tensor(0x10000, FGL_F32, 2, odd), tensor(0x20000, FGL_F32, 1, odd1)};
  expect_refused(g, in3, 2, out, 2, FGL_ERR_MISMATCH,
                 "size T = 7 (parameter 'x' dim 1) is not a multiple of 2", 0);
  odd[0] = 0;
  odd[1] = odd1[0] = 8;
  fgl_arg in4[2] = {tensor(0x10000, FGL_F32, 2, odd), tensor(0x20000, FGL_F32, 1, odd1)};
  expect_refused(g, in4, 2, out, 2, FGL_ERR_MISMATCH,
                 "size B = 0 (parameter 'x' dim 0) is outside 1..64", 0);
  fgl_graph_free(g, &e);
}

/* ---- hand-written plans: formulas everywhere ---- */

#define PTX2                                                                                       \
  ".version 7.8\n.target sm_90\n.address_size 64\n"                                                \
  ".visible .entry ka(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u64 "    \
  "e, .param .u64 f)\n{\n\tret;\n}\n"                                                              \
  ".visible .entry kb(.param .u64 a, .param .u64 b)\n{\n\tret;\n}\n"

static const char *FORMULAS =
    "// fusec-plan 2\n"
    "// target sm_90\n"
    "// graph f params 3 results 3 temps 2 kernels 2 syms 2\n"
    "// sym 0 B min 1 max 64 div 1\n"
    "// sym 1 T min 0 max 4194304 div 2\n"
    "// param 0 x bf16 [B,T,64] strides [T*64,64,1]\n"
    "// param 1 n i32 scalar\n"
    "// param 2 m f32 [T,B] strides [1,T]\n"
    "// result 0 bf16 [B,T,64] strides [T*64,64,1] written\n"
    "// result 1 bf16 [T,64] strides [64,1] view p0 offset (B-1)*T*64\n"
    "// result 2 f32 [B*T/2] strides [2] view p2 offset 1\n"
    "// temp 0 bytes B*T*4 align 16 zero\n"
    "// temp 1 bytes 1000 align 16 nozero\n"
    "// kernel 0 ka grid (T+127)/128 B 1 block 128 1 1 smem 0 args p0,r0,t0,z1,z0,s1\n"
    "// kernel 1 kb grid B*T%3+1 1 1 block 32 1 1 smem 0 args z0,t1\n"
    "// end\n" PTX2;

static void test_formulas(void) {
  fgl_module *m = load_text(FORMULAS);
  fgl_graph *g = m ? create(m, "f") : NULL;
  if (!g) {
    fgl_module_free(m, NULL);
    return;
  }
  fgl_error e = {0};
  const int64_t B = 3, T = 256;
  int64_t xs[3] = {B, T, 64}, ms[2] = {T, B};
  fgl_devptr base = 0x100000, mbase = 0x800000, obase = 0x1000000;
  fgl_arg in[3];
  in[0] = tensor(base, FGL_BF16, 3, xs);
  in[1] = fgl_arg_int(FGL_I32, 77);
  fgl_tensor mt = {mbase, FGL_F32, 2, {T, B}, {1, T}};
  in[2] = fgl_arg_tensor(mt);
  (void)ms;
  fgl_tensor out[3];
  memset(out, 0, sizeof out);
  fgl_tensor_contiguous(&out[0], obase, FGL_BF16, 3, xs);
  fake_reset();
  CHECK_MSG(fgl_run(g, in, 3, out, 3, (fgl_stream)0x9, &e) == FGL_OK, "%s", e.msg);
  /* views from evaluated offsets and shapes */
  CHECK(out[1].ptr == base + (unsigned long long)((B - 1) * T * 64) * 2 && out[1].sizes[0] == T &&
        out[1].sizes[1] == 64 && out[1].strides[0] == 64);
  CHECK(out[2].ptr == mbase + 4 && out[2].sizes[0] == B * T / 2 && out[2].strides[0] == 2);
  /* both kernels, with evaluated grids and the syms as arguments */
  fake_launch l0, l1;
  CHECK(fake_launch_at(0, &l0) == 2 && fake_launch_at(1, &l1) == 2);
  CHECK(!strcmp(l0.entry, "ka") && l0.grid[0] == (T + 127) / 128 && l0.grid[1] == B &&
        l0.grid[2] == 1 && l0.nargs == 6);
  CHECK(l0.args[0] == base && l0.args[1] == obase && l0.args[2] != 0 && l0.args[3] == T &&
        l0.args[4] == B && l0.args[5] == 77);
  CHECK(!strcmp(l1.entry, "kb") && l1.grid[0] == B * T % 3 + 1 && l1.nargs == 2 &&
        l1.args[0] == B && l1.args[1] != 0);
  /* temp 0: B*T*4 bytes, allocated by the run and zeroed there */
  CHECK(fake_count("alloc_async") == 1 && fake_count("memset_async") == 1);
  unsigned char probe[3 * 256 * 4];
  memset(probe, 1, sizeof probe);
  CHECK(fgl_memcpy_dtoh(m, probe, l0.args[2], sizeof probe, &e) == FGL_OK);
  int zero = 1;
  for (size_t i = 0; i < sizeof probe; i++)
    zero &= probe[i] == 0;
  CHECK(zero);
  /* the shape queries agree */
  fgl_result_info ri;
  CHECK(fgl_graph_result_shape(g, in, 3, 1, &ri, &e) == FGL_OK && ri.offset == (B - 1) * T * 64 &&
        ri.sizes[0] == T && ri.sym[0] == 1);
  fgl_param_info pi;
  CHECK(fgl_graph_param_shape(g, in, 3, 0, &pi, &e) == FGL_OK && pi.strides[0] == T * 64 &&
        pi.sizes[0] == B && pi.sizes[1] == T && pi.sym[0] == 0 && pi.sym[1] == 1);
  CHECK(fgl_graph_param(g, 0, &pi, &e) == FGL_OK && pi.strides[0] == -1 && pi.strides[1] == 64);
  /* T = 0: the first kernel has an empty grid (x 0, not launched), the
   * second still runs */
  int64_t xz[3] = {B, 0, 64};
  in[0] = tensor(base, FGL_BF16, 3, xz);
  fgl_tensor mz = {mbase, FGL_F32, 2, {0, B}, {1, 0}};
  in[2] = fgl_arg_tensor(mz);
  fgl_tensor_contiguous(&out[0], obase, FGL_BF16, 3, xz);
  fake_reset();
  CHECK_MSG(fgl_run(g, in, 3, out, 3, NULL, &e) == FGL_OK, "%s", e.msg);
  CHECK(fake_launch_at(0, &l0) == 1 && !strcmp(l0.entry, "kb") && l0.grid[0] == 1);
  fgl_graph_free(g, &e);
  fgl_module_free(m, &e);
}

/* Plans whose formulas fail at run for some bindings. */
static void test_run_refusals(void) {
  static const struct {
    const char *plan_lines; /* between the sym line and 'end' */
    int64_t t;              /* the size of x */
    fgl_status st;
    const char *msg;
  } cases[] = {
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T] strides [T*T*T] written\n", 1 << 22,
       FGL_ERR_MISMATCH, "graph 'r': result 0 stride 0: 'T*T*T' overflows int64 for T=4194304"},
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T-16] strides [1] written\n", 8,
       FGL_ERR_MISMATCH, "graph 'r': result 0 dim 0: 'T-16' goes below zero for T=8"},
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T/(T-T)] strides [1] written\n", 8,
       FGL_ERR_MISMATCH, "graph 'r': result 0 dim 0: 'T/(T-T)' divides by zero for T=8"},
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T] strides [T-T] written\n", 8,
       FGL_ERR_MISMATCH,
       "graph 'r': result 0: a written result cannot have a zero stride (dim 0, of size 8 for "
       "T=8)"},
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T] strides [1] view p0 offset T/2\n", 8,
       FGL_ERR_MISMATCH,
       "graph 'r': result 0: view (offset 4, last element 11) leaves its base p0 (last element 7) "
       "for T=8"},
      {"// param 0 x u8 [T] strides [1]\n// result 0 u8 [T] strides [T*T] written\n", 1 << 22,
       FGL_ERR_MISMATCH,
       "graph 'r': result 0: u8[4194304] strides [17592186044416] is too large for "
       "T=4194304"},
      {"// param 0 x u8 [T] strides [1]\n// temp 0 bytes T*T*T*4 align 16 zero\n"
       "// kernel 0 kb grid 1 1 1 block 32 1 1 smem 0 args z0,t0\n",
       1 << 20, FGL_ERR_MISMATCH,
       "graph 'r': temp 0: 4611686018427387904 bytes is too large for T=1048576"},
      {"// param 0 x u8 [T] strides [1]\n// kernel 0 kb grid 1 T 1 block 32 1 1 smem 0 args "
       "z0,z0\n",
       70000, FGL_ERR_MISMATCH,
       "graph 'r': kernel 0 (kb): grid y 70000 is out of range [1, 65535] for T=70000"},
      {"// param 0 x u8 [T] strides [1]\n// kernel 0 kb grid T 1 1 block 32 1 1 smem 0 args "
       "z0,z0\n",
       INT64_C(1) << 32, FGL_ERR_MISMATCH,
       "graph 'r': kernel 0 (kb): grid x 4294967296 is out of range [0, 2147483647] for "
       "T=4294967296"},
      {"// param 0 x u8 [T] strides [1]\n// kernel 0 kb grid T 1 1 block 32 1 1 smem 0 args z0,z0\n"
       "// kernel-resident 0 cluster 2\n",
       3, FGL_ERR_MISMATCH,
       "graph 'r': kernel 0 (kb): grid 3x1x1 is not made of clusters of 2 for T=3"},
      /* the fake GPU holds 16 CTAs x 132 SMs, in clusters of 2: 2110 */
      {"// param 0 x u8 [T] strides [1]\n// kernel 0 kb grid T 1 1 block 32 1 1 smem 0 args z0,z0\n"
       "// kernel-resident 0 cluster 2\n",
       2112, FGL_ERR_UNSUPPORTED,
       "graph 'r': kernel 0 (kb): its 2112 CTAs wait for one another, so all must be resident at "
       "once, but this GPU holds 2110 for T=2112"},
  };
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
    const char *body = cases[c].plan_lines;
    int nr = strstr(body, "// result") ? 1 : 0, nt = strstr(body, "// temp") ? 1 : 0,
        nk = strstr(body, "// kernel 0") ? 1 : 0;
    char text[2048];
    snprintf(text, sizeof text,
             "// fusec-plan 2\n// target sm_90\n// graph r params 1 results %d temps %d kernels %d "
             "syms 1\n// sym 0 T min 0 max 4611686018427387904 div 1\n%s// end\n" PTX2,
             nr, nt, nk, body);
    fgl_module *m = load_text(text);
    fgl_graph *g = m ? create(m, "r") : NULL;
    if (g) {
      int64_t t = cases[c].t;
      fgl_arg in = tensor(0x1000, FGL_U8, 1, &t);
      fgl_tensor out[1];
      memset(out, 0, sizeof out);
      if (!strstr(body, " view "))
        fgl_tensor_contiguous(&out[0], 0x10000000, FGL_U8, 1, &t);
      expect_refused(g, &in, 1, out, nr, cases[c].st, cases[c].msg, 0);
      /* a binding that fits works afterwards (nothing stale) */
      if (c == 1 || c == 7 || c == 10) {
        int64_t ok = c == 1 ? 32 : 2;
        fgl_arg in2 = tensor(0x1000, FGL_U8, 1, &ok);
        fgl_tensor_contiguous(&out[0], 0x10000000, FGL_U8, 1, &ok);
        if (c == 1)
          out[0].sizes[0] = 16;
        fgl_error e = {0};
        fake_reset();
        CHECK_MSG(fgl_run(g, &in2, 1, out, nr, NULL, &e) == FGL_OK, "case %d: %s", c, e.msg);
        CHECK(fake_count("launch") == nk);
      }
    }
    fgl_graph_free(g, NULL);
    fgl_module_free(m, NULL);
  }
}

/* Temps supplied by the caller: a symbolic one needs its capacity, and a
 * run needing more than it holds is refused. */
static void test_supplied_temps(void) {
  const char *text = "// fusec-plan 2\n// target sm_90\n"
                     "// graph s params 1 results 0 temps 2 kernels 1 syms 1\n"
                     "// sym 0 T min 0 max 65536 div 1\n"
                     "// param 0 x u8 [T] strides [1]\n"
                     "// temp 0 bytes 64 align 16 zero\n"
                     "// temp 1 bytes T*8 align 256 zero\n"
                     "// kernel 0 kb grid 1 1 1 block 32 1 1 smem 0 args t0,t1\n"
                     "// end\n" PTX2;
  fgl_module *m = load_text(text);
  if (!m)
    return;
  fgl_error e = {0};
  fgl_graph *g = NULL;
  fgl_devptr buf;
  CHECK(fgl_malloc(m, 4096, &buf, &e) == FGL_OK);
  fgl_memset(m, buf, 0xAB, 4096, &e);
  fgl_devptr temps[2] = {buf, buf + 256};
  CHECK(fgl_graph_create_with_temps(m, "s", temps, 2, &g, &e) == FGL_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(e.msg, "temp 1 of graph 's': its size depends on the graph's syms: pass 0"),
            "%s", e.msg);
  /* 0: the loader owns it */
  temps[1] = 0;
  CHECK(fgl_graph_create_with_temps(m, "s", temps, 2, &g, &e) == FGL_OK);
  int64_t t = 100;
  fgl_arg in = tensor(0x1000, FGL_U8, 1, &t);
  fake_reset();
  CHECK(fgl_run(g, &in, 1, NULL, 0, NULL, &e) == FGL_OK && fake_count("alloc_async") == 1);
  fake_launch l;
  CHECK(fake_launch_at(0, &l) == 1 && l.args[0] == buf && l.args[1] != 0 && l.args[1] % 256 == 0);
  fgl_graph_free(g, &e);
  /* with capacities: 800 bytes at buf + 256 */
  fgl_memset(m, buf, 0xAB, 4096, &e);
  size_t bytes[2] = {64, 800};
  temps[1] = buf + 256;
  size_t small[2] = {32, 800};
  CHECK(fgl_graph_create_with_temp_sizes(m, "s", temps, small, 2, &g, &e) ==
            FGL_ERR_INVALID_ARGUMENT &&
        strstr(e.msg, "temp 0 of graph 's': 32 bytes supplied, it needs 64"));
  CHECK_MSG(fgl_graph_create_with_temp_sizes(m, "s", temps, bytes, 2, &g, &e) == FGL_OK, "%s",
            e.msg);
  unsigned char h[4096];
  fgl_memcpy_dtoh(m, h, buf, sizeof h, &e);
  int ok = 1;
  for (int i = 0; i < 4096; i++)
    ok &= h[i] == ((i < 64 || (i >= 256 && i < 256 + 800)) ? 0 : 0xAB);
  CHECK_MSG(ok, "zeroed: temp 0's 64 bytes and temp 1's 800 supplied");
  fake_reset();
  CHECK(fgl_run(g, &in, 1, NULL, 0, NULL, &e) == FGL_OK && fake_count("alloc_async") == 0);
  CHECK(fake_launch_at(0, &l) == 1 && l.args[1] == buf + 256);
  t = 101; /* 808 bytes */
  in = tensor(0x1000, FGL_U8, 1, &t);
  expect_refused(g, &in, 1, NULL, 0, FGL_ERR_MISMATCH,
                 "graph 's': temp 1 needs 808 bytes for T=101, but the storage the caller "
                 "supplied holds 800",
                 0);
  CHECK(fgl_graph_reserve(g, &in, 1, NULL, &e) == FGL_ERR_MISMATCH && strstr(e.msg, "needs 808"));
  fgl_graph_free(g, &e);
  fgl_free(m, buf, &e);
  fgl_module_free(m, &e);
}

/* ---- narrow.ptx: kernel-narrow, the 32-bit index variants ---- */

static fgl_module *load_narrow(void) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_file(FGL_FIXTURES "/narrow.ptx", &o, &m, &e) == FGL_OK, "%s", e.msg);
  return m;
}

/* Runs g and checks the entries launched, in order (NULL-terminated). */
static void expect_launches(fgl_graph *g, const fgl_arg *in, int n_in, fgl_tensor *out, int n_out,
                            const char *const *want, const char *what) {
  fgl_error e = {0};
  fake_reset();
  CHECK_MSG(fgl_run(g, in, n_in, out, n_out, NULL, &e) == FGL_OK, "%s: %s", what, e.msg);
  int n = 0;
  while (want[n])
    n++;
  fake_launch l;
  CHECK_MSG(fake_launch_at(0, NULL) == n, "%s: %d launches, expected %d", what,
            fake_launch_at(0, NULL), n);
  for (int i = 0; i < n && i < fake_launch_at(0, NULL); i++) {
    fake_launch_at(i, &l);
    CHECK_MSG(!strcmp(l.entry, want[i]), "%s: launch %d is %s, expected %s", what, i, l.entry,
              want[i]);
  }
}

static void test_narrow_axpy(fgl_module *m) {
  fgl_graph *g = create(m, "axpy_n");
  if (!g)
    return;
  fgl_error e = {0};
  axpy_bufs b;
  const int64_t cap = 1 << 15;
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.x, &e) == FGL_OK);
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.y, &e) == FGL_OK);
  CHECK(fgl_malloc(m, cap * 4 + 64, &b.out, &e) == FGL_OK);
  fgl_arg in[3];
  fgl_tensor out[2];
  /* max 8192: N <= 8192 launches the narrow pair, N > 8192 the wide one;
   * of a pair the vec entry with aligned pointers, else the plain one;
   * the same instance switches back and forth (the evaluation of the last
   * binding is reused, the choice is made at each run) */
  static const struct {
    int64_t n;
    int misalign;
    const char *entry;
  } steps[] = {
      {4096, 0, "fg_axpy_n_v4_i32"},
      {8192, 0, "fg_axpy_n_v4_i32"},
      {8196, 0, "fg_axpy_n_v4"},
      {8196, 0, "fg_axpy_n_v4"},
      {0, 0, NULL},
      {4, 0, "fg_axpy_n_v4_i32"},
      {cap, 0, "fg_axpy_n_v4"},
      {1024, 1, "fg_axpy_n_i32"},
      {8192, 1, "fg_axpy_n_i32"},
      {8196, 1, "fg_axpy_n"},
      {4096, 0, "fg_axpy_n_v4_i32"},
  };
  for (int s = 0; s < (int)(sizeof steps / sizeof steps[0]); s++) {
    int64_t n = steps[s].n;
    float alpha = 0.5f * (float)(s + 1);
    fgl_memset(m, b.out, 0xFF, cap * 4 + 64, &e);
    axpy_args(&b, n, n, alpha, in, out);
    fill(m, &b, cap);
    if (steps[s].misalign) { /* y moved up 4 bytes */
      in[1].tensor.ptr = b.y + 4;
      fgl_memcpy_dtod_async(m, b.y + 4, b.y, (size_t)n * 4, NULL, &e);
    }
    const char *want[2] = {steps[s].entry, NULL};
    char what[64];
    snprintf(what, sizeof what, "N=%lld%s", (long long)n, steps[s].misalign ? " (misaligned)" : "");
    expect_launches(g, in, 3, out, 2, want, what);
    fake_launch l;
    if (n > 0 && fake_launch_at(0, &l) == 1) {
      CHECK_MSG(l.grid[0] == (unsigned)((n + 1023) / 1024) && l.block[0] == 256 && l.nargs == 6 &&
                    l.args[5] == (unsigned long long)n && l.args[3] == b.out,
                "%s: grid %u args[5] %llu", what, l.grid[0], l.args[5]);
      CHECK_MSG(out_ok(m, &b, n, alpha), "%s: wrong output", what);
    }
  }
  fgl_graph_free(g, &e);
  fgl_free(m, b.x, &e);
  fgl_free(m, b.y, &e);
  fgl_free(m, b.out, &e);
}

static void test_narrow_rows(fgl_module *m) {
  fgl_graph *g = create(m, "rows");
  if (!g)
    return;
  /* sym 0 (T) decides, whatever sym 1 (B) is; kernel 0 has a narrow entry
   * and no kernel-vec ('-'), kernel 1 no narrow entry */
  static const struct {
    int64_t b, t;
    const char *k0;
  } steps[] = {
      {3, 4096, "fg_rows_i32"}, {3, 4097, "fg_rows"},    {65536, 16, "fg_rows_i32"},
      {1, 1, "fg_rows_i32"},    {2, 1048576, "fg_rows"}, {3, 4096, "fg_rows_i32"},
  };
  for (int s = 0; s < (int)(sizeof steps / sizeof steps[0]); s++) {
    int64_t xs[2] = {steps[s].b, steps[s].t};
    fgl_arg in = tensor(0x100000, FGL_F32, 2, xs);
    fgl_tensor out;
    fgl_tensor_contiguous(&out, 0x100000000ull, FGL_F32, 2, xs);
    const char *want[3] = {steps[s].k0, "fg_cols", NULL};
    char what[64];
    snprintf(what, sizeof what, "B=%lld T=%lld", (long long)xs[0], (long long)xs[1]);
    expect_launches(g, &in, 1, &out, 1, want, what);
    fake_launch l;
    CHECK(fake_launch_at(0, &l) == 2 && l.grid[0] == (unsigned)xs[0] && l.nargs == 4 &&
          l.args[2] == (unsigned long long)xs[1] && l.args[3] == (unsigned long long)xs[0]);
  }
  fgl_graph_free(g, NULL);
}

/* Resident kernels: the narrow entries' occupancy is asked too. The fake
 * GPU holds 16 CTAs x 132 SMs = 2112, or 4 x 132 = 528 for the entry named
 * by FAKE_CUDA_CTAS_PER_SM_ENTRY. */
static void test_narrow_resident(void) {
  /* a constant grid of 1024 CTAs: refused at creation when either pair's
   * entry cannot hold it */
  static const struct {
    const char *limit, *msg;
  } cons[] = {
      {NULL, NULL},
      {"fg_res_i32:4",
       "graph 'res' kernel 0 (fg_res_i32): its 1024 CTAs wait for one another, so all must be "
       "resident at once, but this GPU holds 528 (132 SMs x 4)"},
      {"fg_res:4", "graph 'res' kernel 0 (fg_res): its 1024 CTAs wait for one another"},
  };
  for (int c = 0; c < (int)(sizeof cons / sizeof cons[0]); c++) {
    if (cons[c].limit)
      setenv("FAKE_CUDA_CTAS_PER_SM_ENTRY", cons[c].limit, 1);
    fgl_module *m = load_narrow();
    fgl_graph *g = NULL;
    fgl_error e = {0};
    fgl_status st = m ? fgl_graph_create(m, "res", &g, &e) : FGL_ERR_PLAN;
    if (!cons[c].msg) {
      CHECK_MSG(st == FGL_OK, "%s", e.msg);
    } else {
      CHECK_MSG(st == FGL_ERR_UNSUPPORTED && strstr(e.msg, cons[c].msg) == e.msg, "%s", e.msg);
    }
    unsetenv("FAKE_CUDA_CTAS_PER_SM_ENTRY");
    fgl_graph_free(g, NULL);
    fgl_module_free(m, NULL);
  }
  /* a symbolic grid of T CTAs (max 65536): checked at each run against
   * what the pair launched for this T holds */
  static const struct {
    const char *limit;
    int64_t t;
    const char *entry, *msg; /* msg NULL: launched */
  } sym[] = {
      {NULL, 2000, "fg_res_i32", NULL},
      {"fg_res_i32:4", 500, "fg_res_i32", NULL},
      {"fg_res_i32:4", 600, NULL,
       "graph 'ress': kernel 0 (fg_res_i32): its 600 CTAs wait for one another, so all must be "
       "resident at once, but this GPU holds 528 for T=600"},
      {"fg_res:4", 2000, "fg_res_i32", NULL},
      {"fg_res:4", 65537, NULL,
       "graph 'ress': kernel 0 (fg_res): its 65537 CTAs wait for one another, so all must be "
       "resident at once, but this GPU holds 528 for T=65537"},
  };
  for (int c = 0; c < (int)(sizeof sym / sizeof sym[0]); c++) {
    if (sym[c].limit)
      setenv("FAKE_CUDA_CTAS_PER_SM_ENTRY", sym[c].limit, 1);
    fgl_module *m = load_narrow();
    fgl_graph *g = m ? create(m, "ress") : NULL;
    unsetenv("FAKE_CUDA_CTAS_PER_SM_ENTRY");
    if (g) {
      int64_t t = sym[c].t;
      fgl_arg in = tensor(0x100000, FGL_F32, 1, &t);
      if (sym[c].msg) {
        expect_refused(g, &in, 1, NULL, 0, FGL_ERR_UNSUPPORTED, sym[c].msg, 0);
      } else {
        const char *want[2] = {sym[c].entry, NULL};
        expect_launches(g, &in, 1, NULL, 0, want, sym[c].limit ? sym[c].limit : "default");
      }
    }
    fgl_graph_free(g, NULL);
    fgl_module_free(m, NULL);
  }
}

/* A graph without syms: the v1 behaviour, and the new queries say so. */
static void test_constant_graph(void) {
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK(fgl_module_load_file(FGL_FIXTURES "/add.ptx", &o, &m, &e) == FGL_OK);
  fgl_graph *g = m ? create(m, "axpy") : NULL;
  if (g) {
    int n = -1;
    CHECK(fgl_graph_num_syms(g, &n, &e) == FGL_OK && n == 0);
    fgl_param_info pi;
    CHECK(fgl_graph_param(g, 0, &pi, &e) == FGL_OK && pi.sym[0] == -1 && pi.sizes[0] == 1048576);
    fgl_result_info ri;
    CHECK(fgl_graph_result(g, 2, &ri, &e) == FGL_OK && !ri.symbolic && ri.offset == 1024 &&
          ri.sym[0] == -1);
    int64_t nn = 1048576;
    fgl_arg in[3] = {tensor(0x1000, FGL_F32, 1, &nn), tensor(0x10000000, FGL_F32, 1, &nn),
                     fgl_arg_float(FGL_F32, 1.0)};
    CHECK(fgl_graph_result_shape(g, in, 3, 2, &ri, &e) == FGL_OK && ri.offset == 1024 &&
          ri.sizes[0] == 1024);
    fake_reset();
    CHECK(fgl_graph_reserve(g, in, 3, NULL, &e) == FGL_OK && fake_count("alloc_async") == 0 &&
          fake_count("alloc") == 0);
    fgl_temp_info ti;
    CHECK(fgl_module_temp_info(m, "axpy", 0, &ti, &e) == FGL_OK && !ti.symbolic &&
          ti.bytes == 4096);
  }
  fgl_graph_free(g, &e);
  fgl_module_free(m, &e);
}

int main(void) {
  const char *lib = getenv("FGL_LIBCUDA");
  if (!lib) {
    fprintf(stderr, "FGL_LIBCUDA must name the fake driver (ctest sets it)\n");
    return 1;
  }
  snprintf(cache_dir, sizeof cache_dir, "/tmp/fgl-sym-test-%d", (int)getpid());
  void *h = dlopen(lib, RTLD_NOW);
  CHECK(h != NULL);
  if (!h)
    return 1;
  fake_count = (long (*)(const char *))dlsym(h, "fake_cuda_count");
  fake_reset = (void (*)(void))dlsym(h, "fake_cuda_reset");
  fake_launch_at = (int (*)(int, fake_launch *))dlsym(h, "fake_cuda_launch");
  CHECK(fake_count && fake_reset && fake_launch_at);
  fgl_module *m = NULL;
  fgl_error e = {0};
  fgl_load_options o = opts();
  CHECK_MSG(fgl_module_load_file(FGL_FIXTURES "/sym.ptx", &o, &m, &e) == FGL_OK, "%s", e.msg);
  if (m) {
    test_queries(m);
    test_axpy_runs(m);
    test_views_only(m);
    fgl_module_free(m, &e);
  }
  m = load_narrow();
  if (m) {
    test_narrow_axpy(m);
    test_narrow_rows(m);
    fgl_module_free(m, &e);
  }
  test_narrow_resident();
  test_formulas();
  test_run_refusals();
  test_supplied_temps();
  test_constant_graph();
  dlclose(h);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd) != 0)
    CHECK(0);
  TL_DONE("test_loader_sym");
}
