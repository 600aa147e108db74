/* The PTX backend's value lowering, end to end to PTX: for every pointwise
 * op over a matrix of dtypes, every cast pair, literals, mixed dtypes,
 * vector accesses, reductions and the GPU primitives, a tiny kernel
 * out[i] = op(in0[i], ...) (load -> convert -> op -> convert -> store) is
 * finished with libdevice into PTX, checked for forbidden instructions
 * (approximate div/sqrt/rcp in exact ops, .ftz, unresolved externs,
 * __nvvm_reflect) and assembled by ptxas (skipped when absent). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "infer.h"
#include "parse.h"

#include "check.h"

#ifndef FGB_PTXAS
#define FGB_PTXAS ""
#endif
#ifndef FGB_LIBDEVICE
#define FGB_LIBDEVICE ""
#endif

static const char *usable(const char *p) {
  return p && *p && !strstr(p, "NOTFOUND") && access(p, R_OK) == 0 ? p : NULL;
}
static const char *ptxas_path(void) {
  const char *p = usable(getenv("PTXAS"));
  if (!p)
    p = usable(FGB_PTXAS);
  if (!p)
    p = usable("/usr/local/cuda/bin/ptxas");
  return p;
}
static const char *libdevice_path(void) {
  const char *p = usable(getenv("FUSEC_LIBDEVICE"));
  if (!p)
    p = usable(FGB_LIBDEVICE);
  if (!p)
    p = usable("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc");
  return p;
}

/* ---- building kernels from .fg snippets ---- */

static fg_module *parse_quiet(const char *src) {
  fg_diag d;
  fg_diag_init(&d, "t.fg", src, strlen(src), NULL);
  fg_module *m = fg_parse("t.fg", src, strlen(src), &d);
  fg_diag_free(&d);
  return m;
}

static const fg_node *the_pointwise(const fg_graph *g) {
  for (const fg_node *n = g->first; n; n = n->next)
    if (n->op->kind == FG_KIND_POINTWISE)
      return n;
  return NULL;
}

/* Kernel k(out, params..., n): element i (vec per thread) of out = n(params). */
static bool emit_node_kernel(fgb_module *m, const fg_graph *g, const char *name, int vec) {
  const fg_node *n = the_pointwise(g);
  if (!n)
    return false;
  fgb_param_kind kinds[8];
  int np = g->nparams;
  kinds[0] = FGB_PARAM_PTR_NOALIAS;
  for (int i = 0; i < np; i++)
    kinds[1 + i] = FGB_PARAM_PTR_NOALIAS;
  kinds[1 + np] = FGB_PARAM_I64;
  LLVMValueRef fn = fgb_kernel_begin(m, name, np + 2, kinds);
  LLVMBuilderRef b = fgb_builder(m);
  LLVMContextRef c = fgb_ctx(m);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
  LLVMValueRef gid =
      LLVMBuildAdd(b, LLVMBuildMul(b, fgb_ctaid(m, 0), fgb_ntid(m, 0), ""), fgb_tid(m, 0), "");
  LLVMValueRef i =
      LLVMBuildMul(b, LLVMBuildZExt(b, gid, i64, ""), LLVMConstInt(i64, (unsigned)vec, 0), "");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(c, fn, "body");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c, fn, "done");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, LLVMGetParam(fn, (unsigned)np + 1), ""), body,
                  done);
  LLVMPositionBuilderAtEnd(b, body);
  LLVMValueRef res[16];
  LLVMValueRef ops[16][3];
  for (int k = 0; k < n->nin; k++) {
    fg_dtype want = fgb_pw_operand_target(n, k);
    LLVMValueRef lit = fgb_pw_literal(m, n, k);
    if (lit) {
      for (int j = 0; j < vec; j++)
        ops[j][k] = lit;
      continue;
    }
    const fg_value *v = n->in[k];
    fg_dtype dt = v->type.dtype;
    LLVMValueRef p = fgb_gep_global(m, LLVMGetParam(fn, (unsigned)v->param_index + 1),
                                    fgb_storage_type(m, dt), i);
    LLVMValueRef vals[16];
    fgb_load_vec(m, p, dt, vec, (unsigned)(vec * fg_dtype_size(dt)), FGB_LD_INVARIANT, vals);
    for (int j = 0; j < vec; j++)
      ops[j][k] = fgb_convert(m, vals[j], dt, want);
  }
  fg_dtype odt = n->out[0]->type.dtype;
  for (int j = 0; j < vec; j++) {
    LLVMValueRef r = fgb_emit_pointwise(m, n, ops[j]);
    if (!r)
      return false;
    res[j] = fgb_convert(m, r, fgb_pw_result_form(n), odt);
  }
  LLVMValueRef op = fgb_gep_global(m, LLVMGetParam(fn, 0), fgb_storage_type(m, odt), i);
  fgb_store_vec(m, op, odt, vec, (unsigned)(vec * fg_dtype_size(odt)), res);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  return true;
}

/* Parses src and adds its kernel; false (not an error) when src does not
 * type-check (an op not defined for the dtype). */
static bool add_kernel(fgb_module *m, const char *src, const char *name, int vec) {
  fg_module *fm = parse_quiet(src);
  if (!fm)
    return false;
  bool ok = emit_node_kernel(m, fm->graphs[0], name, vec);
  CHECK_MSG(ok, "%s: no kernel emitted", name);
  fg_module_free(fm);
  return ok;
}

/* ---- PTX checks ---- */

static int count(const char *s, const char *pat) {
  int k = 0;
  for (const char *p = s; (p = strstr(p, pat)); p++)
    k++;
  return k;
}

/* The text of entry `name` up to its closing brace. */
static char *entry_text(const char *ptx, const char *name) {
  char key[256];
  snprintf(key, sizeof key, ".entry %s(", name);
  const char *s = strstr(ptx, key);
  if (!s)
    return NULL;
  const char *e = strstr(s, "\n}\n");
  size_t len = e ? (size_t)(e - s) : strlen(s);
  char *r = malloc(len + 1);
  memcpy(r, s, len);
  r[len] = 0;
  return r;
}

static bool uses_libdevice(fg_opcode op, fg_dtype cdt) {
  return (cdt == FG_F32 || cdt == FG_F64) && fg_op_has(fg_op_get(op), FG_PROP_LIBDEVICE);
}

static void check_module_ptx(const char *what, const char *ptx, bool fast) {
  CHECK_MSG(!strstr(ptx, "__nvvm_reflect"), "%s: __nvvm_reflect left in the PTX", what);
  CHECK_MSG(!strstr(ptx, ".extern"), "%s: unresolved external in the PTX", what);
  /* No flush-to-zero, except libdevice's own ex2.approx.ftz / rcp.approx.ftz
   * on range-reduced arguments or as Newton seeds, and the div.approx.ftz
   * of __nv_coshf / __nv_sinhf (0.125 / 2^k e^r: below 2^-126 only where
   * the result has overflowed), used whatever __CUDA_FTZ says, by design;
   * any other .ftz means __nvvm_reflect("__CUDA_FTZ") was 1. */
  for (const char *p = ptx; (p = strstr(p, ".ftz")); p++) {
    const char *l = p;
    while (l > ptx && l[-1] != '\n')
      l--;
    while (*l == ' ' || *l == '\t')
      l++;
    bool ok = strncmp(l, "ex2.approx.ftz.f32", 18) == 0 ||
              strncmp(l, "rcp.approx.ftz.f", 16) == 0 || strncmp(l, "div.approx.ftz.f32", 18) == 0;
    CHECK_MSG(ok, "%s: flush-to-zero instruction: %.40s", what, l);
    if (!ok)
      break;
  }
  /* (libdevice's exact fmodf uses div.approx for a quotient estimate, so
   * div.approx is checked per kernel, in the kernels without libdevice.) */
  if (!fast) {
    CHECK_MSG(!strstr(ptx, "div.full"), "%s: approximate division", what);
    CHECK_MSG(!strstr(ptx, "sqrt.approx"), "%s: approximate sqrt", what);
  }
}

static int ptxas_run(const char *ptx, const char *arch, const char *what) {
  const char *pa = ptxas_path();
  if (!pa)
    return -1;
  char path[] = "/tmp/fgb_test_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  FILE *f = fdopen(fd, "w");
  fputs(ptx, f);
  fclose(f);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null", pa, arch, path);
  int rc = system(cmd);
  if (rc != 0) {
    char keep[300];
    snprintf(keep, sizeof keep, "/tmp/fgb_failed_%s.ptx", what);
    rename(path, keep);
    fprintf(stderr, "ptxas failed on %s (kept as %s)\n", what, keep);
  } else {
    unlink(path);
  }
  return rc;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Finishes m to PTX, checks it, assembles it. Returns the PTX (caller frees). */
static char *finish(fgb_module *m, const char *what, const char *arch, bool fast) {
  char err[1024];
  fgb_finish_opts o = {.libdevice_path = libdevice_path(), .opt_level = 3, .fast_math = fast};
  double t0 = now();
  char *ptx = fgb_module_finish(m, &o, err, sizeof err);
  double t1 = now();
  CHECK_MSG(ptx != NULL, "%s: finish failed: %s", what, err);
  if (!ptx)
    return NULL;
  check_module_ptx(what, ptx, fast);
  int rc = ptxas_run(ptx, arch, what);
  if (rc >= 0)
    CHECK_MSG(rc == 0, "%s: ptxas -arch=%s failed", what, arch);
  printf("  %-16s %3d entries, PTX %7zu bytes, finish %.0f ms%s\n", what, count(ptx, ".entry "),
         strlen(ptx), 1e3 * (t1 - t0), rc < 0 ? " (ptxas skipped)" : ", ptxas ok");
  return ptx;
}

/* ---- the matrix ---- */

static const fg_dtype all_dtypes[] = {FG_BOOL, FG_I8,   FG_U8,  FG_I16, FG_I32,    FG_I64,
                                      FG_F16,  FG_BF16, FG_F32, FG_F64, FG_F8E4M3, FG_F8E5M2};
#define NDT (int)(sizeof all_dtypes / sizeof all_dtypes[0])

static void op_src(char *buf, size_t cap, const fg_op *op, const char *dt, const char *variant) {
  const char *nm = op->name;
  if (op->code == FG_OP_WHERE)
    snprintf(buf, cap,
             "graph g(c: bool[64], a: %s[64], b: %s[64]) {\n r = where(c, a, b)\n return r\n}\n",
             dt, dt);
  else if (op->code == FG_OP_CLAMP)
    snprintf(buf, cap, "graph g(a: %s[64]) {\n r = clamp(a, min=-1, max=2)\n return r\n}\n", dt);
  else if (op->code == FG_OP_GELU)
    snprintf(buf, cap, "graph g(a: %s[64]) {\n r = gelu(a, approximate=\"%s\")\n return r\n}\n", dt,
             variant);
  else if (op->min_in == 1)
    snprintf(buf, cap, "graph g(a: %s[64]) {\n r = %s(a)\n return r\n}\n", dt, nm);
  else if (op->min_in == 3) /* fma, lerp */
    snprintf(buf, cap,
             "graph g(a: %s[64], b: %s[64], c: %s[64]) {\n r = %s(a, b, c)\n return r\n}\n", dt, dt,
             dt, nm);
  else
    snprintf(buf, cap, "graph g(a: %s[64], b: %s[64]) {\n r = %s(a, b)\n return r\n}\n", dt, dt,
             nm);
}

static void test_ops_for_dtype(fg_dtype dt, int *nemitted, int *nskipped) {
  char err[512], src[512], name[128];
  const char *dn = fg_dtype_name(dt);
  fgb_module *m = fgb_module_create(dn, "sm_90", err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  int nk = 0;
  char(*names)[128] = calloc(FG_OP_COUNT * 2, sizeof *names);
  fg_opcode *codes = calloc(FG_OP_COUNT * 2, sizeof *codes);
  for (int o = 0; o < FG_OP_COUNT; o++) {
    const fg_op *op = fg_op_get((fg_opcode)o);
    if (op->kind != FG_KIND_POINTWISE || op->code == FG_OP_CAST)
      continue;
    for (int v = 0; v < (op->code == FG_OP_GELU ? 2 : 1); v++) {
      const char *variant = v ? "tanh" : "none";
      op_src(src, sizeof src, op, dn, variant);
      snprintf(name, sizeof name, "k_%s%s_%s", op->name,
               op->code == FG_OP_GELU ? (v ? "_tanh" : "_none") : "", dn);
      if (add_kernel(m, src, name, 1)) {
        snprintf(names[nk], sizeof names[nk], "%s", name);
        codes[nk++] = op->code;
        (*nemitted)++;
      } else {
        (*nskipped)++;
      }
    }
  }
  char what[64];
  snprintf(what, sizeof what, "ops %s", dn);
  char *ptx = finish(m, what, "sm_90", false);
  fgb_module_free(m);
  if (ptx) {
    /* exact ops: no approximate instruction at all in their kernel */
    fg_dtype cdt = fg_dtype_is_float(dt) ? (dt == FG_F64 ? FG_F64 : FG_F32) : FG_I64;
    for (int k = 0; k < nk; k++) {
      char *t = entry_text(ptx, names[k]);
      CHECK_MSG(t != NULL, "%s missing from the PTX", names[k]);
      if (!t)
        continue;
      if (!uses_libdevice(codes[k], cdt) && fg_dtype_is_float(dt))
        CHECK_MSG(!strstr(t, ".approx"), "%s: approximate instruction in an exact op", names[k]);
      if (codes[k] == FG_OP_DIV && fg_dtype_is_float(dt))
        CHECK_MSG(strstr(t, dt == FG_F64 ? "div.rn.f64" : "div.rn.f32"), "%s: no div.rn", names[k]);
      if ((codes[k] == FG_OP_SQRT || codes[k] == FG_OP_RSQRT) && fg_dtype_is_float(dt))
        CHECK_MSG(strstr(t, dt == FG_F64 ? "sqrt.rn.f64" : "sqrt.rn.f32"), "%s: no sqrt.rn",
                  names[k]);
      if (codes[k] == FG_OP_ADD)
        CHECK_MSG(strstr(t, "ld.global.nc"), "%s: input loads are not ld.global.nc", names[k]);
      free(t);
    }
  }
  free(ptx);
  free(names);
  free(codes);
}

static void test_casts(void) {
  char err[512], src[256], name[64];
  fgb_module *m = fgb_module_create("casts", "sm_90", err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  int nk = 0;
  for (int a = 0; a < NDT; a++)
    for (int b = 0; b < NDT; b++) {
      const char *fa = fg_dtype_name(all_dtypes[a]), *fb = fg_dtype_name(all_dtypes[b]);
      snprintf(src, sizeof src, "graph g(a: %s[64]) {\n r = cast(a, dtype=%s)\n return r\n}\n", fa,
               fb);
      snprintf(name, sizeof name, "k_cast_%s_%s", fa, fb);
      bool ok = add_kernel(m, src, name, 1);
      CHECK_MSG(ok, "cast %s -> %s did not build", fa, fb);
      nk += ok;
    }
  CHECK_MSG(nk == NDT * NDT, "%d casts", nk);
  char *ptx = finish(m, "casts", "sm_90", false);
  if (ptx) {
    /* sm_90: f8 encodes use the hardware cvt, whose saturation is undone
     * for out-of-range inputs (464 = 0x43e80000, 61440 = 0x47700000) */
    CHECK_MSG(strstr(ptx, "cvt.rn.satfinite.e4m3x2.f32") &&
                  strstr(ptx, "cvt.rn.satfinite.e5m2x2.f32"),
              "sm_90 f8 encodes do not use the hardware cvt");
    CHECK_MSG(strstr(ptx, "1139277824") || strstr(ptx, "0f43E80000") || strstr(ptx, "0x43e80000") ||
                  strstr(ptx, "1139277823"),
              "no e4m3 overflow fix-up threshold in the PTX");
    CHECK_MSG(!strstr(ptx, ".approx"), "approximate instruction in a conversion");
  }
  free(ptx);
  fgb_module_free(m);
}

/* Literals, mixed dtypes, vector accesses; and the same on sm_80. */
static void test_misc(const char *arch) {
  static const struct {
    const char *src;
    int vec;
  } cases[] = {
      {"graph g(a: bf16[64]) {\n r = add(a, 1e-5)\n return r\n}\n", 8},
      {"graph g(a: f16[64], b: f16[64]) {\n r = mul(a, b)\n return r\n}\n", 8},
      {"graph g(a: f32[64], b: f32[64]) {\n r = div(a, b)\n return r\n}\n", 4},
      {"graph g(a: f8e4m3[64]) {\n r = mul(a, 2)\n return r\n}\n", 16},
      {"graph g(a: bool[64], b: bool[64]) {\n r = logical_and(a, b)\n return r\n}\n", 16},
      {"graph g(a: f64[64]) {\n r = exp(a)\n return r\n}\n", 2},
      {"graph g(a: bf16[64], b: f32[64]) {\n r = add(a, b)\n return r\n}\n", 1},
      {"graph g(a: i32[64], b: f64[64]) {\n r = sub(a, b)\n return r\n}\n", 1},
      {"graph g(a: u8[64], b: i8[64]) {\n r = mul(a, b)\n return r\n}\n", 1},
      {"graph g(a: i64[64], b: f16[64]) {\n r = lt(a, b)\n return r\n}\n", 1},
      {"graph g(c: bool[64], a: bf16[64]) {\n r = where(c, a, 0.5)\n return r\n}\n", 1},
      {"graph g(a: i32[64]) {\n r = pow(a, 3)\n return r\n}\n", 1},
      {"graph g(a: f32[64], b: bf16[64]) {\n r = logical_or(a, b)\n return r\n}\n", 1},
      {"graph g(a: i16[64]) {\n r = exp(a)\n return r\n}\n", 1},
  };
  char err[512], name[64];
  fgb_module *m = fgb_module_create("misc", arch, err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "k_misc_%d", i);
    bool ok = add_kernel(m, cases[i].src, name, cases[i].vec);
    CHECK_MSG(ok, "misc case %d did not build", i);
  }
  char what[32];
  snprintf(what, sizeof what, "misc %s", arch);
  char *ptx = finish(m, what, arch, false);
  if (ptx) {
    char *t = entry_text(ptx, "k_misc_0"); /* 8 x bf16 in one 16-byte access */
    CHECK_MSG(t && strstr(t, "ld.global.nc.v4"), "bf16 x8 load is not one ld.global.nc.v4");
    CHECK_MSG(t && strstr(t, "st.global.v4"), "bf16 x8 store is not one st.global.v4");
    free(t);
    t = entry_text(ptx, "k_misc_3"); /* 16 x f8 */
    CHECK_MSG(t && strstr(t, "ld.global.nc.v4"), "f8 x16 load is not one ld.global.nc.v4");
    free(t);
  }
  free(ptx);
  fgb_module_free(m);
}

/* Reductions (identity, thread-local combine, warp butterfly) and the GPU
 * primitives: shuffles of every width, barrier, fence, atomics, shared
 * memory, maxntid. */
static void test_reduce_and_intrinsics(void) {
  char err[512];
  fgb_module *m = fgb_module_create("red", "sm_90", err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  LLVMBuilderRef b = fgb_builder(m);
  LLVMContextRef c = fgb_ctx(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(c), i64 = LLVMInt64TypeInContext(c);
  static const fg_opcode rops[] = {FG_OP_SUM, FG_OP_MEAN, FG_OP_PROD, FG_OP_AMAX, FG_OP_AMIN};
  static const fg_dtype ins[] = {FG_BF16, FG_F32, FG_F64, FG_I32, FG_BOOL, FG_F8E5M2};
  for (int r = 0; r < 5; r++)
    for (int d = 0; d < 6; d++) {
      fg_dtype in = ins[d], acc = fg_reduce_acc_dtype(in);
      char name[64];
      snprintf(name, sizeof name, "k_red_%s_%s", fg_op_get(rops[r])->name, fg_dtype_name(in));
      fgb_param_kind k[2] = {FGB_PARAM_PTR_NOALIAS, FGB_PARAM_PTR_NOALIAS};
      LLVMValueRef fn = fgb_kernel_begin(m, name, 2, k);
      fgb_kernel_set_maxntid(m, fn, 256);
      LLVMValueRef tid = LLVMBuildZExt(b, fgb_tid(m, 0), i64, "");
      LLVMValueRef a = fgb_reduce_identity(m, rops[r], acc);
      for (int j = 0; j < 4; j++) {
        LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildMul(b, tid, LLVMConstInt(i64, 4, 0), ""),
                                        LLVMConstInt(i64, (unsigned)j, 0), "");
        LLVMValueRef x =
            fgb_load(m, fgb_gep_global(m, LLVMGetParam(fn, 1), fgb_storage_type(m, in), idx), in,
                     FGB_LD_INVARIANT);
        a = fgb_reduce_combine(m, rops[r], a, fgb_convert(m, x, in, acc), acc);
      }
      for (int lm = 16; lm >= 1; lm /= 2)
        a = fgb_reduce_combine(m, rops[r], a, fgb_shfl_bfly(m, a, lm), acc);
      fg_dtype out = fg_dtype_is_float(in) ? in : FG_I64;
      fgb_store(m, fgb_gep_global(m, LLVMGetParam(fn, 0), fgb_storage_type(m, out), tid), out,
                fgb_convert(m, a, acc, out));
      LLVMBuildRetVoid(b);
    }
  /* primitives */
  fgb_param_kind k[3] = {FGB_PARAM_PTR, FGB_PARAM_PTR_NOALIAS, FGB_PARAM_I32};
  LLVMValueRef fn = fgb_kernel_begin(m, "k_prims", 3, k);
  fgb_kernel_set_maxntid(m, fn, 128);
  fgb_kernel_set_minctasm(m, fn, 2);
  LLVMValueRef smem = fgb_shared_array(m, "smem", 1024);
  LLVMValueRef tid = fgb_tid(m, 0);
  LLVMValueRef lane = fgb_laneid(m);
  LLVMValueRef v64 = LLVMBuildZExt(b, tid, i64, "");
  LLVMValueRef f = LLVMBuildSIToFP(b, tid, LLVMFloatTypeInContext(c), "");
  LLVMValueRef d = LLVMBuildSIToFP(b, tid, LLVMDoubleTypeInContext(c), "");
  LLVMValueRef bit = LLVMBuildICmp(b, LLVMIntEQ, lane, LLVMConstInt(i32, 3, 0), "");
  LLVMValueRef s = LLVMBuildAdd(b, fgb_shfl_bfly(m, tid, 1),
                                LLVMBuildTrunc(b, fgb_shfl_bfly(m, v64, 2), i32, ""), "");
  s = LLVMBuildAdd(b, s, LLVMBuildFPToSI(b, fgb_shfl_bfly(m, f, 4), i32, ""), "");
  s = LLVMBuildAdd(b, s, LLVMBuildFPToSI(b, fgb_shfl_bfly(m, d, 8), i32, ""), "");
  s = LLVMBuildAdd(b, s, LLVMBuildZExt(b, fgb_shfl_bfly(m, bit, 16), i32, ""), "");
  LLVMBuildStore(b, s, fgb_gep(m, smem, i32, tid));
  fgb_barrier(m);
  LLVMValueRef t2 = LLVMBuildXor(b, tid, LLVMConstInt(i32, 1, 0), "");
  LLVMValueRef l = LLVMBuildLoad2(b, i32, fgb_gep(m, smem, i32, t2), "");
  l = LLVMBuildAdd(
      b, l,
      LLVMBuildAdd(b, fgb_ctaid(m, 0), LLVMBuildAdd(b, fgb_nctaid(m, 0), fgb_ntid(m, 1), ""), ""),
      "");
  fgb_fence_gpu(m);
  LLVMValueRef old = fgb_atomic_add_i32_global(m, LLVMGetParam(fn, 0), l);
  LLVMBuildStore(b, old,
                 fgb_gep_global(m, LLVMGetParam(fn, 0), i32,
                                LLVMBuildAdd(b, tid, LLVMConstInt(i32, 1, 0), "")));
  LLVMBuildRetVoid(b);
  char *ptx = finish(m, "reduce+prims", "sm_90", false);
  if (ptx) {
    CHECK_MSG(strstr(ptx, ".maxntid 256, 1, 1") || strstr(ptx, ".maxntid 256,"), "no .maxntid");
    CHECK_MSG(strstr(ptx, ".minnctapersm 2"), "no .minnctapersm");
    CHECK_MSG(strstr(ptx, "shfl.sync.bfly.b32"), "no shfl.sync.bfly");
    CHECK_MSG(strstr(ptx, "bar.sync") || strstr(ptx, "barrier.sync"), "no barrier");
    CHECK_MSG(strstr(ptx, "fence.acq_rel.gpu"), "no device fence");
    CHECK_MSG(strstr(ptx, "atom.global.add.u32"), "no atom.global.add.u32");
    CHECK_MSG(strstr(ptx, ".shared .align 16 .b8"), "no 16-byte aligned shared array");
  }
  free(ptx);
  fgb_module_free(m);
}

/* fast_math: approximations allowed; emit_llvm returns IR text. */
static void test_modes(void) {
  char err[512];
  const char *src = "graph g(a: f32[64], b: f32[64]) {\n r = div(a, b)\n return r\n}\n";
  const char *src2 = "graph g(a: f32[64]) {\n r = rsqrt(a)\n return r\n}\n";
  fgb_module *m = fgb_module_create("fast", "sm_90", err, sizeof err);
  add_kernel(m, src, "k_div", 1);
  add_kernel(m, src2, "k_rsqrt", 1);
  char *ptx = finish(m, "fast-math", "sm_90", true);
  CHECK_MSG(ptx &&
                (strstr(ptx, "div.approx") || strstr(ptx, "div.full") || strstr(ptx, "rcp.approx")),
            "fast_math did not approximate the division");
  free(ptx);
  fgb_module_free(m);
  m = fgb_module_create("ir", "sm_90", err, sizeof err);
  add_kernel(m, src, "k_div", 1);
  fgb_finish_opts o = {.libdevice_path = libdevice_path(), .opt_level = 2, .emit_llvm = true};
  char *ir = fgb_module_finish(m, &o, err, sizeof err);
  CHECK_MSG(ir && strstr(ir, "define ptx_kernel void @k_div") && strstr(ir, "fdiv float"),
            "LLVM IR output: %s", ir ? "unexpected text" : err);
  free(ir);
  fgb_module_free(m);
  /* O0 still resolves libdevice and its reflect calls */
  m = fgb_module_create("o0", "sm_90", err, sizeof err);
  add_kernel(m, "graph g(a: f32[64]) {\n r = tanh(a)\n return r\n}\n", "k_tanh", 1);
  fgb_finish_opts o0 = {.libdevice_path = libdevice_path(), .opt_level = 0};
  char *p0 = fgb_module_finish(m, &o0, err, sizeof err);
  CHECK_MSG(p0 != NULL, "O0: %s", err);
  if (p0) {
    check_module_ptx("O0", p0, false);
    int rc = ptxas_run(p0, "sm_90", "O0");
    if (rc >= 0)
      CHECK_MSG(rc == 0, "O0: ptxas failed");
  }
  free(p0);
  fgb_module_free(m);
  /* errors */
  CHECK_MSG(fgb_module_create("x", "sm_70", err, sizeof err) == NULL && strstr(err, "sm_70"),
            "bad arch accepted");
  m = fgb_module_create("nolib", "sm_90", err, sizeof err);
  add_kernel(m, src2, "k_ok", 1);
  add_kernel(m, "graph g(a: f32[64]) {\n r = exp(a)\n return r\n}\n", "k_exp", 1);
  fgb_finish_opts none = {.opt_level = 1};
  char *p = fgb_module_finish(m, &none, err, sizeof err);
  CHECK_MSG(p == NULL && strstr(err, "libdevice"), "missing libdevice not reported");
  free(p);
  fgb_module_free(m);
}

int main(void) {
  if (!libdevice_path()) {
    printf("test_backend_ops: SKIP (libdevice.10.bc not found; set FUSEC_LIBDEVICE)\n");
    return 0;
  }
  if (!ptxas_path())
    printf("test_backend_ops: ptxas not found (set PTXAS): PTX is checked but not assembled\n");
  int nemitted = 0, nskipped = 0;
  for (int d = 0; d < NDT; d++)
    test_ops_for_dtype(all_dtypes[d], &nemitted, &nskipped);
  printf("  op x dtype kernels: %d built, %d combinations rejected by type inference\n", nemitted,
         nskipped);
  test_casts();
  test_misc("sm_90");
  test_misc("sm_80");
  test_reduce_and_intrinsics();
  test_modes();
  printf("test_backend_ops: %d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
