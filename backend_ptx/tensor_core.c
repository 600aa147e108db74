/* Tensor-core building blocks for the attention kernels (tensor_core.h). */
#include "tensor_core.h"

#include "fgb_internal.h"
#include "gpu_intrin.h"
#include "lower_value.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

LLVMValueRef fgb_tc_i32(fgb_module *m, int64_t v) {
  return LLVMConstInt(m->i32, (unsigned long long)v, 1);
}

LLVMValueRef fgb_tc_opaque(fgb_module *m, LLVMValueRef x) {
  LLVMTypeRef t = LLVMTypeOf(x);
  bool wide = t == m->i64;
  LLVMTypeRef fty = LLVMFunctionType(t, &t, 1, 0);
  const char *text = wide ? "mov.b64 $0, $1;" : "mov.b32 $0, $1;", *cons = wide ? "=l,l" : "=r,r";
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 1,
                                     0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(m->b, fty, fn, &x, 1, "");
}

LLVMValueRef fgb_tc_smem_at(fgb_module *m, LLVMValueRef smem, LLVMValueRef byte) {
  return fgb_gep(m, smem, m->i8, byte);
}

LLVMValueRef fgb_tc_tile_base(fgb_module *m, LLVMValueRef smem, LLVMValueRef at, LLVMValueRef row,
                              LLVMValueRef col, int pitch) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef el = LLVMBuildAdd(b, LLVMBuildMul(b, row, fgb_tc_i32(m, pitch), ""), col, "");
  return fgb_tc_smem_at(m, smem,
                        LLVMBuildAdd(b, LLVMBuildMul(b, el, fgb_tc_i32(m, 2), ""), at, ""));
}

LLVMValueRef fgb_tc_lds(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                        LLVMTypeRef t, unsigned align) {
  LLVMValueRef p = fgb_gep(m, base, m->i8, fgb_tc_i32(m, (row * pitch + col) * 2));
  LLVMValueRef ld = LLVMBuildLoad2(m->b, t, p, "");
  LLVMSetAlignment(ld, align);
  return ld;
}

LLVMValueRef fgb_tc_lds32(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col) {
  return fgb_tc_lds(m, base, pitch, row, col, m->i32, 4);
}

LLVMValueRef fgb_tc_lds16x2(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef lo = LLVMBuildZExt(b, fgb_tc_lds(m, base, pitch, row, col, m->i16, 2), m->i32, "");
  LLVMValueRef hi =
      LLVMBuildZExt(b, fgb_tc_lds(m, base, pitch, row + 1, col, m->i16, 2), m->i32, "");
  return LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, fgb_tc_i32(m, 16), ""), "");
}

void fgb_tc_ldmatrix4(fgb_module *m, LLVMValueRef base, int pitch, int64_t row, int64_t col,
                      bool trans, LLVMValueRef *out) {
  LLVMValueRef p = fgb_gep(m, base, m->i8, fgb_tc_i32(m, (row * pitch + col) * 2));
  LLVMTypeRef i4[4] = {m->i32, m->i32, m->i32, m->i32};
  LLVMValueRef r = fgb_call(m,
                            trans ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3"
                                  : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3",
                            LLVMStructTypeInContext(m->ctx, i4, 4, 0), 1, &p);
  for (int i = 0; i < 4; i++)
    out[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
}

LLVMValueRef fgb_tc_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef l = LLVMBuildZExt(b, fgb_to_storage(m, lo, dt), m->i32, "");
  LLVMValueRef h = LLVMBuildZExt(b, fgb_to_storage(m, hi, dt), m->i32, "");
  return LLVMBuildOr(b, l, LLVMBuildShl(b, h, fgb_tc_i32(m, 16), ""), "");
}

void fgb_tc_mma(fgb_module *m, fg_dtype dt, LLVMValueRef *A, LLVMValueRef b0, LLVMValueRef b1,
                LLVMValueRef *c) {
  bool bf = dt == FG_BF16;
  LLVMTypeRef h2 = LLVMVectorType(m->f16, 2);
  LLVMValueRef args[10];
  for (int i = 0; i < 4; i++)
    args[i] = bf ? A[i] : LLVMBuildBitCast(m->b, A[i], h2, "");
  args[4] = bf ? b0 : LLVMBuildBitCast(m->b, b0, h2, "");
  args[5] = bf ? b1 : LLVMBuildBitCast(m->b, b1, h2, "");
  for (int i = 0; i < 4; i++)
    args[6 + i] = c[i];
  LLVMTypeRef f4[4] = {m->f32, m->f32, m->f32, m->f32};
  LLVMTypeRef ret = LLVMStructTypeInContext(m->ctx, f4, 4, 0);
  LLVMValueRef r = fgb_call(
      m, bf ? "llvm.nvvm.mma.m16n8k16.row.col.bf16" : "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", ret,
      10, args);
  for (int i = 0; i < 4; i++)
    c[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
}

LLVMValueRef fgb_tc_fmax(fgb_module *m, LLVMValueRef x, LLVMValueRef y) {
  LLVMValueRef args[2] = {x, y};
  return fgb_call(m, "llvm.maxnum.f32", m->f32, 2, args);
}

LLVMValueRef fgb_tc_rcp(fgb_module *m, LLVMValueRef x) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef r0 = fgb_call(m, "llvm.nvvm.rcp.approx.ftz.f", m->f32, 1, &x);
  LLVMValueRef one = LLVMConstReal(m->f32, 1.0);
  LLVMValueRef e = fgb_tc_fma(m, LLVMBuildFNeg(b, x, ""), r0, one); /* 1 - x r0 */
  LLVMValueRef r1 = fgb_tc_fma(m, r0, e, r0);
  /* x = 0, +-inf or NaN: r0 is the answer, and the step made NaN of it */
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, e, e, ""), r0, r1, "");
}

LLVMValueRef fgb_tc_ex2(fgb_module *m, LLVMValueRef x) {
  return fgb_call(m, "llvm.nvvm.ex2.approx.ftz.f", m->f32, 1, &x);
}

/* issue 19 (forward speed): one cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32 for
 * the pair (its first operand is the high half), not two conversions and
 * a shift and an or. */
LLVMValueRef fgb_tc_cvt_pack2(fgb_module *m, fg_dtype dt, LLVMValueRef lo, LLVMValueRef hi) {
  bool bf = dt == FG_BF16;
  LLVMTypeRef t = LLVMVectorType(bf ? m->bf16 : m->f16, 2);
  LLVMValueRef args[2] = {hi, lo};
  LLVMValueRef r = fgb_call(m, bf ? "llvm.nvvm.ff2bf16x2.rn" : "llvm.nvvm.ff2f16x2.rn", t, 2, args);
  return LLVMBuildBitCast(m->b, r, m->i32, "");
}

LLVMValueRef fgb_tc_fma(fgb_module *m, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
  LLVMValueRef args[3] = {x, y, z};
  return fgb_call(m, "llvm.fma.f32", m->f32, 3, args);
}

void fgb_tc_cp_async16_at(fgb_module *m, LLVMValueRef sbase, int64_t soff, LLVMValueRef gbase,
                          int64_t goff, LLVMValueRef src_bytes) {
  char text[128];
  snprintf(text, sizeof text, "cp.async.cg.shared.global [$0+%lld], [$1+%lld], 16%s;",
           (long long)soff, (long long)goff, src_bytes ? ", $2" : "");
  LLVMValueRef args[3] = {
      LLVMBuildTrunc(m->b, LLVMBuildPtrToInt(m->b, sbase, m->i64, ""), m->i32, ""),
      LLVMBuildPtrToInt(m->b, gbase, m->i64, ""), src_bytes};
  int n = src_bytes ? 3 : 2;
  LLVMTypeRef ts[3];
  for (int i = 0; i < n; i++)
    ts[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(m->v, ts, (unsigned)n, 0);
  const char *cons = src_bytes ? "r,l,r,~{memory}" : "r,l,~{memory}";
  LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), (char *)cons, strlen(cons), 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(m->b, fty, fn, args, (unsigned)n, "");
}

/* ---- issue 19 (wgmma): descriptors and chains (tensor_core.h) ---- */

LLVMValueRef fgb_tc_wg_desc(fgb_module *m, LLVMValueRef saddr, int64_t lbo) {
  LLVMBuilderRef b = m->b;
  /* start address >> 4 (bits 0-13), lbo >> 4 (16-29), stride byte offset
   * >> 4 (32-45: 1024), base offset 0, swizzle mode 1 (62-63: 128 bytes) */
  LLVMValueRef lo =
      LLVMBuildAnd(b, LLVMBuildLShr(b, saddr, fgb_tc_i32(m, 4), ""), fgb_tc_i32(m, 0x3FFF), "");
  lo = LLVMBuildOr(b, lo, fgb_tc_i32(m, (lbo >> 4) << 16), "");
  unsigned long long hi = (1024 >> 4) | (1ull << 30);
  return LLVMBuildOr(b, LLVMBuildZExt(b, lo, m->i64, ""), LLVMConstInt(m->i64, hi << 32, 0), "");
}

LLVMValueRef fgb_tc_wg_desc_add(fgb_module *m, LLVMValueRef desc, LLVMValueRef bytes) {
  LLVMValueRef x = LLVMBuildLShr(m->b, bytes, fgb_tc_i32(m, 4), "");
  return LLVMBuildAdd(m->b, desc, LLVMBuildZExt(m->b, x, m->i64, ""), "");
}

enum { WG_TEXT = 32768, WG_MAXARGS = 512, WG_MAXPROD = 4 };

static LLVMValueRef wg_asm(fgb_module *m, LLVMTypeRef ret, LLVMValueRef *args, int nargs,
                           const char *text, const char *cons) {
  LLVMTypeRef tys[WG_MAXARGS];
  for (int i = 0; i < nargs; i++)
    tys[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(ret, tys, (unsigned)nargs, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 1,
                                     0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(m->b, fty, fn, args, (unsigned)nargs, "");
}

void fgb_tc_wg_fence_proxy(fgb_module *m) {
  wg_asm(m, m->v, NULL, 0, "fence.proxy.async.shared::cta;", "~{memory}");
}

/* appends to buf (WG_TEXT bytes, *len used) printf-style; *len past the
 * end says it did not fit */
static void wg_put(char *buf, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wg_put(char *buf, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, *len < WG_TEXT ? WG_TEXT - *len : 0, fmt, ap);
  va_end(ap);
  if (n > 0)
    *len += (size_t)n;
}

static void wg_regs(char *buf, size_t *len, int first, int n) {
  wg_put(buf, len, "{");
  for (int i = 0; i < n; i++)
    wg_put(buf, len, "%s$%d", i ? ", " : "", first + i);
  wg_put(buf, len, "}");
}

static LLVMTypeRef wg_f32s(fgb_module *m, int n) {
  LLVMTypeRef fl[WG_MAXARGS];
  for (int i = 0; i < n; i++)
    fl[i] = m->f32;
  return LLVMStructTypeInContext(m->ctx, fl, (unsigned)n, 0);
}

/* "wgmma.commit_group", then with c->wait "wait_group 0", and the end of
 * the statement */
static void wg_end(char *buf, size_t *len, const fgb_tc_wg_chain *c) {
  wg_put(buf, len, "wgmma.commit_group.sync.aligned;\n%s}",
         c->wait ? "wgmma.wait_group.sync.aligned 0;\n" : "");
}

bool fgb_tc_wg_ss(fgb_module *m, const fgb_tc_wg_chain *c, const LLVMValueRef *adesc,
                  int64_t a_rows, const LLVMValueRef *bdesc, int64_t b_rows, LLVMValueRef *d) {
  const char *ty = c->dt == FG_BF16 ? "bf16" : "f16", *ar = c->areg, *br = c->breg;
  int np = c->np, nd = c->n / 2, nout = np * nd;
  char text[WG_TEXT], cons[WG_TEXT];
  size_t len = 0, cl = 0;
  if (nout + 2 * np > WG_MAXARGS)
    return false;
  wg_put(text, &len, "{\n.reg .b64 %s, %s;\nwgmma.fence.sync.aligned;\n", ar, br);
  for (int kk = 0; kk < c->nk; kk++) { /* k step kk: atom kk / 4, byte 32 (kk % 4) of the row */
    int64_t aoff = (int64_t)(kk / 4) * a_rows * 128 + (kk % 4) * 32;
    int64_t boff = (int64_t)(kk / 4) * b_rows * 128 + (kk % 4) * 32;
    for (int p = 0; p < np; p++) {
      wg_put(text, &len, "add.s64 %s, $%d, %lld;\nadd.s64 %s, $%d, %lld;\n", ar, nout + 2 * p,
             (long long)(aoff >> 4), br, nout + 2 * p + 1, (long long)(boff >> 4));
      wg_put(text, &len, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s ", c->n, ty, ty);
      wg_regs(text, &len, p * nd, nd);
      wg_put(text, &len, ", %s, %s, %d, 1, 1, 0, 0;\n", ar, br, kk ? 1 : 0);
    }
  }
  wg_end(text, &len, c);
  for (int i = 0; i < nout; i++)
    wg_put(cons, &cl, "=f,");
  for (int p = 0; p < np; p++)
    wg_put(cons, &cl, "l,l,");
  wg_put(cons, &cl, "~{memory}");
  if (len >= WG_TEXT || cl >= WG_TEXT)
    return false;
  LLVMValueRef args[2 * WG_MAXPROD];
  for (int p = 0; p < np; p++) {
    args[2 * p] = adesc[p];
    args[2 * p + 1] = bdesc[p];
  }
  LLVMValueRef r = wg_asm(m, wg_f32s(m, nout), args, 2 * np, text, cons);
  for (int i = 0; i < nout; i++)
    d[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
  return true;
}

bool fgb_tc_wg_rs(fgb_module *m, const fgb_tc_wg_chain *c, LLVMValueRef (*a)[4],
                  const LLVMValueRef *bdesc, LLVMValueRef *acc) {
  const char *ty = c->dt == FG_BF16 ? "bf16" : "f16", *br = c->breg;
  int np = c->np, nk = c->nk, nd = c->n / 2, nout = np * nd, nargs = nout + 4 * nk * np + np;
  char text[WG_TEXT], cons[WG_TEXT];
  size_t len = 0, cl = 0;
  if (nout + nargs > WG_MAXARGS)
    return false;
  wg_put(text, &len, "{\n.reg .b64 %s;\nwgmma.fence.sync.aligned;\n", br);
  for (int j = 0; j < nk; j++)
    for (int p = 0; p < np; p++) {
      wg_put(text, &len, "add.s64 %s, $%d, %d;\n", br, 2 * nout + 4 * nk * np + p, j * 2048 >> 4);
      wg_put(text, &len, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s ", c->n, ty, ty);
      wg_regs(text, &len, p * nd, nd);
      wg_put(text, &len, ", ");
      wg_regs(text, &len, 2 * nout + 4 * (p * nk + j), 4);
      wg_put(text, &len, ", %s, 1, 1, 1, 1;\n", br);
    }
  wg_end(text, &len, c);
  for (int i = 0; i < nout; i++)
    wg_put(cons, &cl, "=f,");
  for (int i = 0; i < nout; i++)
    wg_put(cons, &cl, "%d,", i);
  for (int i = 0; i < 4 * nk * np; i++)
    wg_put(cons, &cl, "r,");
  for (int p = 0; p < np; p++)
    wg_put(cons, &cl, "l,");
  wg_put(cons, &cl, "~{memory}");
  if (len >= WG_TEXT || cl >= WG_TEXT)
    return false;
  LLVMValueRef args[WG_MAXARGS];
  for (int i = 0; i < nout; i++)
    args[i] = acc[i];
  for (int i = 0; i < np * nk; i++)
    for (int e = 0; e < 4; e++)
      args[nout + 4 * i + e] = a[i][e];
  for (int p = 0; p < np; p++)
    args[nout + 4 * nk * np + p] = bdesc[p];
  LLVMValueRef r = wg_asm(m, wg_f32s(m, nout), args, nargs, text, cons);
  for (int i = 0; i < nout; i++)
    acc[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
  return true;
}

static bool wg_wait(fgb_module *m, int pending, LLVMValueRef *v, int n, LLVMValueRef gate,
                    LLVMValueRef slot) {
  char text[160], cons[WG_TEXT];
  size_t cl = 0;
  int extra = gate ? 2 : 0;
  if (n + extra > WG_MAXARGS)
    return false;
  if (gate)
    snprintf(text, sizeof text,
             "st.volatile.shared.f32 [$%d], $%d;\nwgmma.wait_group.sync.aligned %d;", 2 * n + 1,
             2 * n, pending);
  else
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", pending);
  for (int i = 0; i < n; i++)
    wg_put(cons, &cl, "=f,");
  for (int i = 0; i < n; i++)
    wg_put(cons, &cl, "%d,", i);
  if (gate)
    wg_put(cons, &cl, "f,r,");
  wg_put(cons, &cl, "~{memory}");
  if (cl >= WG_TEXT)
    return false;
  LLVMValueRef args[WG_MAXARGS];
  for (int i = 0; i < n; i++)
    args[i] = v[i];
  if (gate) {
    args[n] = gate;
    args[n + 1] = slot;
  }
  LLVMValueRef r = wg_asm(m, wg_f32s(m, n), args, n + extra, text, cons);
  for (int i = 0; i < n; i++)
    v[i] = LLVMBuildExtractValue(m->b, r, (unsigned)i, "");
  return true;
}

bool fgb_tc_wg_wait(fgb_module *m, int pending, LLVMValueRef *v, int n) {
  return wg_wait(m, pending, v, n, NULL, NULL);
}

bool fgb_tc_wg_wait_after(fgb_module *m, int pending, LLVMValueRef *v, int n, LLVMValueRef gate,
                          LLVMValueRef slot) {
  return wg_wait(m, pending, v, n, gate, slot);
}

void fgb_tc_asm_i32(fgb_module *m, const char *text, LLVMValueRef x) {
  LLVMTypeRef i32 = LLVMTypeOf(x);
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(m->ctx), &i32, 1, 0);
  const char *cons = "r,~{memory}";
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 1,
                                     0, LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(m->b, fty, fn, &x, 1, "");
}
