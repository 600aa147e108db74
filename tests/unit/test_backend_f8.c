/* The backend's f8 codecs against the interpreter's (ir/dtype.c), on the
 * CPU, before any GPU is involved:
 *  1. the integer algorithm of backend_ptx/lower_f8.c, written in C here,
 *     against fg_f32_to_f8e4m3 / fg_f32_to_f8e5m2 on a dense sample of f32
 *     bit patterns (every sign/exponent/top-11-mantissa-bit combination with
 *     7 low-bit patterns each, ~7.3M values per format) and all 256 decodes;
 *  2. the LLVM IR that fgb_f8_encode / fgb_f8_decode emit, JIT-compiled for
 *     the host, against the C version on the same sample and on all 256
 *     codes.
 * FGB_F8_EXHAUSTIVE=1 runs both over all 2^32 f32 bit patterns (minutes). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/ExecutionEngine.h>

#include "backend.h"

#include "check.h"
#include "host_jit.h"

/* ---- the algorithm of lower_f8.c in C ---- */

typedef struct {
  int ebits, mbits, bias, ieee_inf;
  uint32_t maxcode;
} f8fmt;
static const f8fmt E4M3 = {4, 3, 7, 0, 0x7e}, E5M2 = {5, 2, 15, 1, 0x7b};

static uint8_t c_encode(uint32_t u, f8fmt f) {
  int emin = 1 - f.bias;
  uint32_t a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  int32_t e = (int32_t)(a >> 23) - 127;
  uint32_t s = (a & 0x7fffffu) | 0x800000u;
  int32_t ex = e > emin ? e : emin;
  uint32_t shift = (uint32_t)(ex - e + 23 - f.mbits);
  if (shift > 25)
    shift = 25;
  uint32_t n = s >> shift, rem = s & ((1u << shift) - 1), half = 1u << (shift - 1);
  n += rem > half || (rem == half && (n & 1));
  int32_t code = ((ex + f.bias - 1) << f.mbits) + (int32_t)n;
  if (code > (int32_t)f.maxcode)
    code = f.ieee_inf ? 0x7c : 0x7f;
  code |= (int32_t)sign;
  if (a > 0x7f800000u)
    code = f.ieee_inf ? 0x7e : (int32_t)(sign | 0x7f);
  return (uint8_t)code;
}

static uint32_t c_decode(uint8_t b, f8fmt f) {
  uint32_t v = b, sign = (v >> 7) << 31;
  uint32_t eall = (1u << f.ebits) - 1, mall = (1u << f.mbits) - 1;
  uint32_t e = (v >> f.mbits) & eall, mm = v & mall;
  uint32_t nb = ((e + 127 - (uint32_t)f.bias) << 23) | (mm << (23 - f.mbits));
  float sub = (float)mm * (float)ldexp(1.0, 1 - f.bias - f.mbits);
  uint32_t sb;
  memcpy(&sb, &sub, 4);
  uint32_t mag = e == 0 ? sb : nb;
  if (f.ieee_inf && e == eall)
    mag = mm == 0 ? 0x7f800000u : 0x7fc00000u;
  if (!f.ieee_inf && e == eall && mm == mall)
    mag = 0x7fc00000u;
  return mag | sign;
}

static uint8_t ref_encode(uint32_t u, fg_dtype dt) {
  float x;
  memcpy(&x, &u, 4);
  return dt == FG_F8E4M3 ? fg_f32_to_f8e4m3(x) : fg_f32_to_f8e5m2(x);
}
static float ref_decode(uint8_t b, fg_dtype dt) {
  return dt == FG_F8E4M3 ? fg_f8e4m3_to_f32(b) : fg_f8e5m2_to_f32(b);
}

static bool same_float(uint32_t a, float b) {
  float fa;
  memcpy(&fa, &a, 4);
  if (isnan(fa) || isnan(b))
    return isnan(fa) && isnan(b);
  uint32_t bb;
  memcpy(&bb, &b, 4);
  return a == bb; /* signed zeros must match too */
}

/* The sample: bits 31..12 exhaustively, 7 patterns of bits 11..0. */
static uint32_t sample(uint64_t k) {
  static const uint32_t lo[6] = {0x000, 0x001, 0x7ff, 0x800, 0x801, 0xfff};
  uint32_t hi = (uint32_t)(k / 7), j = (uint32_t)(k % 7);
  uint32_t l = j < 6 ? lo[j] : (hi * 2654435761u) >> 20;
  return hi << 12 | l;
}
#define NSAMPLE ((uint64_t)7 << 20)

/* ---- sm_89+: the hardware conversion and lower_f8.c's fix-ups ----
 * hw_cvt models `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` on one f32: NVIDIA's
 * own host model of it (cuda_fp8.hpp, __nv_cvt_double_to_fp8 with
 * __NV_SATFINITE, written afresh here): round to nearest even, magnitudes
 * past max + ulp/2 (and +-inf) to +-max. Its NaN code is left open: the
 * fix-ups must give dtype.c's code whichever NaN code the hardware gives
 * (e4m3: 0x7f 0xff; e5m2: the six codes with exponent 31, mantissa != 0). */
static double code_value(int c, f8fmt f) {
  uint32_t vb = c_decode((uint8_t)c, f);
  float v;
  memcpy(&v, &vb, 4);
  return v;
}

static uint8_t hw_cvt(uint32_t u, f8fmt f) {
  float xf;
  memcpy(&xf, &u, 4);
  double x = fabs((double)xf);
  uint8_t sign = (uint8_t)((u >> 31) << 7);
  int maxc = (int)f.maxcode;
  if (x >= code_value(maxc, f)) /* satfinite: whatever it rounds to, +-max */
    return sign | (uint8_t)maxc;
  /* the nearest of the two codes around x (binary search over the
   * increasing finite codes: an algorithm independent of c_encode's), a
   * tie to the even code */
  int lo = 0, hi = maxc; /* value(lo) <= x < value(hi) */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (code_value(mid, f) <= x)
      lo = mid;
    else
      hi = mid;
  }
  double dl = x - code_value(lo, f), dh = code_value(hi, f) - x;
  int c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | (uint8_t)c;
}

/* lower_f8.c's hw_encode on one lane, given the hardware's code h;
 * bounded: the lane's value is known to be within the range test's bounds
 * (the test left out). */
static uint8_t hw_fixed(uint32_t u, uint8_t h, f8fmt f, bool bounded) {
  float x;
  memcpy(&x, &u, 4);
  if (f.ebits == 4) {
    if (!bounded && !(fabsf(x) <= 464.0f)) /* fcmp ugt: NaN too */
      h = 0x7f;                            /* NaN in: e4m3's NaN magnitude out */
    return (uint8_t)((h & 0x7f) | ((u >> 24) & 0x80));
  }
  if (!bounded && fabsf(x) >= 61440.0f)
    h = (uint8_t)(h + 1);
  if (isnan(x))
    h = 0x7e;
  return h;
}

static void test_hw_model(bool exhaustive) {
  const fg_dtype dts[2] = {FG_F8E4M3, FG_F8E5M2};
  for (int d = 0; d < 2; d++) {
    f8fmt f = d ? E5M2 : E4M3;
    static const uint8_t nan4[] = {0x7f, 0xff}, nan5[] = {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff};
    const uint8_t *nans = d ? nan5 : nan4;
    int nnan = d ? 6 : 2;
    uint64_t bad = 0, nbounded = 0, total = exhaustive ? (uint64_t)1 << 32 : NSAMPLE;
    for (uint64_t k = 0; k < total; k++) {
      uint32_t u = exhaustive ? (uint32_t)k : sample(k);
      float x;
      memcpy(&x, &u, 4);
      uint8_t want = ref_encode(u, dts[d]);
      bool nan = isnan(x);
      /* hw_encode leaves the range test out for values within these */
      bool in_bounds = d ? fabsf(x) < 61440.0f : fabsf(x) <= 464.0f;
      nbounded += in_bounds;
      for (int j = 0; j < (nan ? nnan : 1); j++) {
        /* e4m3 puts NaN in for a value past 464: the hardware's NaN code */
        uint8_t h = nan ? nans[j] : hw_cvt(u, f);
        uint8_t got = hw_fixed(u, h, f, false);
        if (!d && !nan && !(fabsf(x) <= 464.0f))
          got = hw_fixed(u, nans[u & 1], f, false);
        if (got != want && bad++ < 5)
          fprintf(stderr, "  hw %s 0x%08x (hw %02x): %02x, dtype.c %02x\n", fg_dtype_name(dts[d]),
                  u, h, got, want);
        if ((in_bounds || nan) && hw_fixed(u, h, f, true) != want && bad++ < 5)
          fprintf(stderr, "  hw %s bounded 0x%08x (hw %02x): %02x, dtype.c %02x\n",
                  fg_dtype_name(dts[d]), u, h, hw_fixed(u, h, f, true), want);
        /* cast(clamp(x, -max, max)): the cvt takes x itself (the
         * instruction saturates as the clamp does), without a range test */
        /* (saturating_clamp_of takes bounds from max up to the rounding
         * boundary: both ends) */
        float bounds[2] = {d ? 57344.0f : 448.0f, d ? nextafterf(61440.0f, 0.0f) : 464.0f};
        for (int k = 0; k < 2; k++) {
          float c = x < -bounds[k] ? -bounds[k] : x;
          c = c > bounds[k] ? bounds[k] : c;
          uint32_t cu;
          memcpy(&cu, &c, 4);
          if (hw_fixed(u, h, f, true) != ref_encode(cu, dts[d]) && bad++ < 5)
            fprintf(stderr, "  hw %s clamp %g 0x%08x (hw %02x): %02x, dtype.c %02x\n",
                    fg_dtype_name(dts[d]), bounds[k], u, h, hw_fixed(u, h, f, true),
                    ref_encode(cu, dts[d]));
        }
      }
    }
    CHECK_MSG(bad == 0, "%s: hardware conversion + fix-ups differ from dtype.c on %llu of %llu",
              fg_dtype_name(dts[d]), (unsigned long long)bad, (unsigned long long)total);
    printf("  %s: hardware model + fix-ups == dtype.c on %llu inputs (%llu within the bounds, "
           "also without the range test; a clamp to +-max left to the instruction), every NaN "
           "code\n",
           fg_dtype_name(dts[d]), (unsigned long long)total, (unsigned long long)nbounded);
  }
}

/* The MX scale's exact reciprocal (fgb_e8m0_recip) and mx_scale's code:
 * 1/s is an f32 for every code, so x * (1/s) == x / s; mx_scale's code is
 * dtype.c's encoding of its value. */
static void test_e8m0_recip(void) {
  uint64_t bad = 0;
  for (int c = 0; c < 255; c++) {
    uint32_t r = c == 254 ? 0x400000u : (uint32_t)(254 - c) << 23;
    float rf, s = fg_f8e8m0_to_f32((uint8_t)c);
    memcpy(&rf, &r, 4);
    if ((double)rf * (double)s != 1.0)
      bad++;
    for (uint64_t k = 0; k < NSAMPLE; k += 97) {
      uint32_t u = sample(k);
      float x, q, p;
      memcpy(&x, &u, 4);
      volatile float vs = s, vr = rf; /* host f32 arithmetic, no contraction */
      q = x / vs;
      p = x * vr;
      if (memcmp(&q, &p, 4) != 0 && !(isnan(q) && isnan(p)))
        bad++;
    }
  }
  CHECK_MSG(bad == 0, "e8m0 reciprocal: %llu mismatches", (unsigned long long)bad);
  const fg_dtype elems[3] = {FG_F8E4M3, FG_F8E5M2, FG_F4E2M1};
  for (int i = 0; i < 3; i++) {
    int emax = fg_mx_elem_emax(elems[i]);
    for (uint32_t e = 0; e < 256; e++) {
      /* lower_pointwise.c mx_scale: value and code from the exponent field */
      int sft = (int)e - emax;
      uint32_t vb = e == 255 ? 0x7fc00000u : sft > 0 ? (uint32_t)sft << 23 : 0x400000u;
      uint8_t code = e == 255 ? 0xff : sft > 0 ? (uint8_t)sft : 0;
      float v;
      memcpy(&v, &vb, 4);
      if (fg_f32_to_f8e8m0(v) != code)
        bad++;
    }
  }
  CHECK_MSG(bad == 0, "mx_scale code: %llu mismatches", (unsigned long long)bad);
  printf("  e8m0: x / s == x * recip(code) for 255 codes on %llu inputs each; mx_scale codes\n",
         (unsigned long long)(NSAMPLE / 97 + 1));
}

/* ---- the emitted IR, JIT-compiled for the host ---- */

typedef void (*enc_fn)(const uint32_t *in, uint8_t *out, int64_t n);
typedef void (*dec_fn)(const uint8_t *in, uint32_t *out, int64_t n);

/* void name(in*, out*, i64 n) { for i < n: out[i] = body(in[i]) } with
 * in/out element types tin/tout. */
static void emit_loop(fgb_module *m, const char *name, LLVMTypeRef tin, LLVMTypeRef tout,
                      fg_dtype dt, bool encode) {
  LLVMContextRef c = fgb_ctx(m);
  LLVMBuilderRef b = fgb_builder(m);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0), i64 = LLVMInt64TypeInContext(c);
  LLVMTypeRef params[3] = {ptr, ptr, i64};
  LLVMValueRef fn = LLVMAddFunction(fgb_llvm_module(m), name,
                                    LLVMFunctionType(LLVMVoidTypeInContext(c), params, 3, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, fn, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, fn, "loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c, fn, "done");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, LLVMGetParam(fn, 2), LLVMConstInt(i64, 0, 0), ""),
                  loop, done);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
  LLVMValueRef x =
      LLVMBuildLoad2(b, tin, LLVMBuildGEP2(b, tin, LLVMGetParam(fn, 0), &i, 1, ""), "");
  LLVMValueRef r;
  if (encode) {
    LLVMValueRef f = LLVMBuildBitCast(b, x, LLVMFloatTypeInContext(c), "");
    r = dt == FG_F8E8M0   ? fgb_e8m0_encode(m, f)
        : dt == FG_F4E2M1 ? fgb_f4_encode(m, f)
                          : fgb_f8_encode_int(m, f, dt);
  } else {
    r = LLVMBuildBitCast(b,
                         dt == FG_F8E8M0   ? fgb_e8m0_decode(m, x)
                         : dt == FG_F4E2M1 ? fgb_f4_decode(m, x)
                                           : fgb_f8_decode_int(m, x, dt),
                         tout, "");
  }
  LLVMBuildStore(b, r, LLVMBuildGEP2(b, tout, LLVMGetParam(fn, 1), &i, 1, ""));
  LLVMValueRef i1 = LLVMBuildAdd(b, i, LLVMConstInt(i64, 1, 0), "");
  LLVMBasicBlockRef from[2] = {entry, loop};
  LLVMValueRef vals[2] = {LLVMConstInt(i64, 0, 0), i1};
  LLVMAddIncoming(i, vals, from, 2);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i1, LLVMGetParam(fn, 2), ""), loop, done);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
}

static void test_c_algorithm(bool exhaustive) {
  const fg_dtype dts[2] = {FG_F8E4M3, FG_F8E5M2};
  for (int d = 0; d < 2; d++) {
    f8fmt f = d ? E5M2 : E4M3;
    uint64_t bad = 0, total = exhaustive ? (uint64_t)1 << 32 : NSAMPLE;
    for (uint64_t k = 0; k < total; k++) {
      uint32_t u = exhaustive ? (uint32_t)k : sample(k);
      uint8_t a = c_encode(u, f), r = ref_encode(u, dts[d]);
      if (a != r && bad++ < 5)
        fprintf(stderr, "  %s encode 0x%08x: %02x, dtype.c %02x\n", fg_dtype_name(dts[d]), u, a, r);
    }
    CHECK_MSG(bad == 0, "%s: C encode differs from dtype.c on %llu of %llu inputs",
              fg_dtype_name(dts[d]), (unsigned long long)bad, (unsigned long long)total);
    bad = 0;
    for (int b = 0; b < 256; b++)
      if (!same_float(c_decode((uint8_t)b, f), ref_decode((uint8_t)b, dts[d])))
        bad++;
    CHECK_MSG(bad == 0, "%s: C decode differs from dtype.c on %llu codes", fg_dtype_name(dts[d]),
              (unsigned long long)bad);
    /* round trip: every non-NaN code encodes back to itself */
    bad = 0;
    for (int b = 0; b < 256; b++) {
      uint32_t v = c_decode((uint8_t)b, f);
      if ((v & 0x7fffffffu) > 0x7f800000u)
        continue;
      if (c_encode(v, f) != b)
        bad++;
    }
    CHECK_MSG(bad == 0, "%s: %llu codes do not round-trip", fg_dtype_name(dts[d]),
              (unsigned long long)bad);
  }
}

/* MX formats: the emitted f8e8m0 / f4e2m1 codecs against dtype.c directly,
 * on the sample (or every f32) and on every code (256 e8m0, 16 e2m1). */
static void test_jit_mx(LLVMExecutionEngineRef ee, bool exhaustive, uint32_t *in, uint8_t *out,
                        int64_t chunk) {
  const char *enc_names[2] = {"enc_e8m0", "enc_e2m1"}, *dec_names[2] = {"dec_e8m0", "dec_e2m1"};
  const fg_dtype dts[2] = {FG_F8E8M0, FG_F4E2M1};
  for (int d = 0; d < 2; d++) {
    enc_fn enc = (enc_fn)(uintptr_t)LLVMGetFunctionAddress(ee, enc_names[d]);
    dec_fn dec = (dec_fn)(uintptr_t)LLVMGetFunctionAddress(ee, dec_names[d]);
    CHECK_MSG(enc && dec, "JIT symbols missing");
    if (!enc || !dec)
      continue;
    uint64_t total = exhaustive ? (uint64_t)1 << 32 : NSAMPLE, bad = 0;
    for (uint64_t k0 = 0; k0 < total; k0 += (uint64_t)chunk) {
      int64_t n = (int64_t)(total - k0 < (uint64_t)chunk ? total - k0 : (uint64_t)chunk);
      for (int64_t j = 0; j < n; j++)
        in[j] = exhaustive ? (uint32_t)(k0 + (uint64_t)j) : sample(k0 + (uint64_t)j);
      enc(in, out, n);
      for (int64_t j = 0; j < n; j++) {
        float x;
        memcpy(&x, &in[j], 4);
        uint8_t want = d ? fg_f32_to_f4e2m1(x) : fg_f32_to_f8e8m0(x);
        if (out[j] != want && bad++ < 5)
          fprintf(stderr, "  IR %s 0x%08x: %02x, dtype.c %02x\n", enc_names[d], in[j], out[j],
                  want);
      }
    }
    CHECK_MSG(bad == 0, "%s: emitted IR differs from dtype.c on %llu of %llu inputs", enc_names[d],
              (unsigned long long)bad, (unsigned long long)total);
    int ncodes = d ? 16 : 256;
    uint8_t codes[256];
    uint32_t dv[256];
    for (int b = 0; b < ncodes; b++)
      codes[b] = (uint8_t)b;
    dec(codes, dv, ncodes);
    bad = 0;
    for (int b = 0; b < ncodes; b++) {
      float want = d ? fg_f4e2m1_to_f32((uint8_t)b) : fg_f8e8m0_to_f32((uint8_t)b);
      if (!same_float(dv[b], want))
        bad++;
    }
    CHECK_MSG(bad == 0, "%s: emitted IR decode differs from dtype.c on %llu codes", dec_names[d],
              (unsigned long long)bad);
    printf("  %s/%s: emitted IR == dtype.c on %llu inputs and all %d codes (%s)\n", enc_names[d],
           dec_names[d], (unsigned long long)total, ncodes, fg_dtype_name(dts[d]));
  }
}

static void test_jit(bool exhaustive) {
  char err[512];
  fgb_module *m = fgb_module_create("f8jit", "sm_90", err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  LLVMContextRef c = fgb_ctx(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(c), i8 = LLVMInt8TypeInContext(c);
  emit_loop(m, "enc_e4m3", i32, i8, FG_F8E4M3, true);
  emit_loop(m, "enc_e5m2", i32, i8, FG_F8E5M2, true);
  emit_loop(m, "dec_e4m3", i8, i32, FG_F8E4M3, false);
  emit_loop(m, "dec_e5m2", i8, i32, FG_F8E5M2, false);
  emit_loop(m, "enc_e8m0", i32, i8, FG_F8E8M0, true);
  emit_loop(m, "enc_e2m1", i32, i8, FG_F4E2M1, true);
  emit_loop(m, "dec_e8m0", i8, i32, FG_F8E8M0, false);
  emit_loop(m, "dec_e2m1", i8, i32, FG_F4E2M1, false);
  LLVMExecutionEngineRef ee = host_jit(m);
  if (!ee) {
    fgb_module_free(m);
    return;
  }
  const char *enc_names[2] = {"enc_e4m3", "enc_e5m2"}, *dec_names[2] = {"dec_e4m3", "dec_e5m2"};
  enum { CHUNK = 1 << 22 };
  uint32_t *in = malloc(CHUNK * sizeof *in);
  uint8_t *out = malloc(CHUNK);
  for (int d = 0; d < 2; d++) {
    f8fmt f = d ? E5M2 : E4M3;
    enc_fn enc = (enc_fn)(uintptr_t)LLVMGetFunctionAddress(ee, enc_names[d]);
    dec_fn dec = (dec_fn)(uintptr_t)LLVMGetFunctionAddress(ee, dec_names[d]);
    CHECK_MSG(enc && dec, "JIT symbols missing");
    if (!enc || !dec)
      continue;
    uint64_t total = exhaustive ? (uint64_t)1 << 32 : NSAMPLE, bad = 0;
    for (uint64_t k0 = 0; k0 < total; k0 += CHUNK) {
      int64_t n = (int64_t)(total - k0 < CHUNK ? total - k0 : CHUNK);
      for (int64_t j = 0; j < n; j++)
        in[j] = exhaustive ? (uint32_t)(k0 + (uint64_t)j) : sample(k0 + (uint64_t)j);
      enc(in, out, n);
      for (int64_t j = 0; j < n; j++)
        if (out[j] != c_encode(in[j], f) && bad++ < 5)
          fprintf(stderr, "  IR %s encode 0x%08x: %02x, expected %02x\n", enc_names[d], in[j],
                  out[j], c_encode(in[j], f));
    }
    CHECK_MSG(bad == 0, "%s: emitted IR differs on %llu of %llu inputs", enc_names[d],
              (unsigned long long)bad, (unsigned long long)total);
    uint8_t codes[256];
    uint32_t dv[256];
    for (int b = 0; b < 256; b++)
      codes[b] = (uint8_t)b;
    dec(codes, dv, 256);
    bad = 0;
    for (int b = 0; b < 256; b++)
      if (!same_float(dv[b], ref_decode((uint8_t)b, d ? FG_F8E5M2 : FG_F8E4M3)))
        bad++;
    CHECK_MSG(bad == 0, "%s: emitted IR decode differs from dtype.c on %llu codes", dec_names[d],
              (unsigned long long)bad);
    printf("  %s/%s: emitted IR == algorithm on %llu inputs, decode == dtype.c on 256 codes\n",
           enc_names[d], dec_names[d], (unsigned long long)total);
  }
  test_jit_mx(ee, exhaustive, in, out, CHUNK);
  free(in);
  free(out);
  host_jit_free(ee, m);
}

int main(void) {
  const char *ex = getenv("FGB_F8_EXHAUSTIVE");
  bool exhaustive = ex && *ex && *ex != '0';
  test_c_algorithm(exhaustive);
  test_hw_model(exhaustive);
  test_e8m0_recip();
  test_jit(exhaustive);
  printf("test_backend_f8%s: %d passed, %d failed\n", exhaustive ? " (exhaustive)" : "", npass,
         nfail);
  return nfail ? 1 : 0;
}
