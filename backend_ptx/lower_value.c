/* Register/storage forms, loads, stores and dtype conversions. See
 * lower_value.h for the forms and the rules (those of ir/interp.c's
 * fg_ix_load_* / fg_ix_store_* and ir/dtype.c). */
#include "lower_value.h"

#include <stdio.h>

#include "fgb_internal.h"
#include "gpu_intrin.h"

LLVMTypeRef fgb_reg_type(fgb_module *m, fg_dtype dt) {
  switch (dt) {
  case FG_BOOL:
    return m->i1;
  case FG_F64:
    return m->f64;
  case FG_F16:
  case FG_BF16:
  case FG_F32:
  case FG_F8E4M3:
  case FG_F8E5M2:
  case FG_F8E8M0:
  case FG_F4E2M1:
    return m->f32;
  default:
    return m->i64;
  }
}

LLVMTypeRef fgb_storage_type(fgb_module *m, fg_dtype dt) {
  switch (dt) {
  case FG_BOOL:
  case FG_I8:
  case FG_U8:
  case FG_F8E4M3:
  case FG_F8E5M2:
  case FG_F8E8M0:
  case FG_F4E2M1: /* one code in the low 4 bits; packed by the accesses */
    return m->i8;
  case FG_I16:
  case FG_F16:
  case FG_BF16:
    return m->i16;
  case FG_I32:
    return m->i32;
  case FG_F32:
    return m->f32;
  case FG_F64:
    return m->f64;
  default:
    return m->i64;
  }
}

static int int_width(fg_dtype dt) {
  switch (dt) {
  case FG_I8:
  case FG_U8:
    return 8;
  case FG_I16:
    return 16;
  case FG_I32:
    return 32;
  default:
    return 64;
  }
}

/* ---- storage <-> register ---- */

LLVMValueRef fgb_from_storage(fgb_module *m, LLVMValueRef raw, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  switch (dt) {
  case FG_BOOL:
    return LLVMBuildICmp(b, LLVMIntNE, raw, LLVMConstInt(m->i8, 0, 0), "");
  case FG_U8:
    return LLVMBuildZExt(b, raw, m->i64, "");
  case FG_I8:
  case FG_I16:
  case FG_I32:
    return LLVMBuildSExt(b, raw, m->i64, "");
  case FG_BF16: /* exact: the bits are the top half of the f32 */
    return LLVMBuildBitCast(
        b, LLVMBuildShl(b, LLVMBuildZExt(b, raw, m->i32, ""), LLVMConstInt(m->i32, 16, 0), ""),
        m->f32, "");
  case FG_F16:
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, raw, m->f16, ""), m->f32, "");
  case FG_F8E4M3:
  case FG_F8E5M2:
    return fgb_f8_decode(m, raw, dt);
  case FG_F8E8M0:
    return fgb_e8m0_decode(m, raw);
  case FG_F4E2M1:
    return fgb_f4_decode(m, raw);
  default:
    return raw; /* i64 f32 f64 */
  }
}

LLVMValueRef fgb_to_storage(fgb_module *m, LLVMValueRef v, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef t = LLVMTypeOf(v);
  if (fg_dtype_is_float(dt) && dt != FG_F64 && t == m->f64)
    v = LLVMBuildFPTrunc(b, v, m->f32, "");
  switch (dt) {
  case FG_BOOL:
    if (t == m->i1)
      return LLVMBuildZExt(b, v, m->i8, "");
    return LLVMBuildZExt(b,
                         fgb_convert(m, v,
                                     t == m->f32   ? FG_F32
                                     : t == m->f64 ? FG_F64
                                                   : FG_I64,
                                     FG_BOOL),
                         m->i8, "");
  case FG_I8:
  case FG_U8:
  case FG_I16:
  case FG_I32:
    return LLVMBuildTrunc(b, v, fgb_storage_type(m, dt), "");
  case FG_BF16:
    return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, v, m->bf16, ""), m->i16, "");
  case FG_F16:
    return LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, v, m->f16, ""), m->i16, "");
  case FG_F8E4M3:
  case FG_F8E5M2:
    for (unsigned i = 0; i < 64 && i < m->nf8_codes; i++)
      if (m->f8_codes[i].decoded == v && m->f8_codes[i].dt == dt)
        return m->f8_codes[i].code;
    return fgb_f8_encode(m, v, dt);
  case FG_F8E8M0: {
    LLVMValueRef code = fgb_e8m0_code_of(m, v);
    return code ? code : fgb_e8m0_encode(m, v);
  }
  case FG_F4E2M1:
    for (unsigned i = 0; i < 64 && i < m->nf8_codes; i++)
      if (m->f8_codes[i].decoded == v && m->f8_codes[i].dt == dt)
        return m->f8_codes[i].code;
    return fgb_f4_encode(m, v);
  case FG_F64:
    return t == m->f32 ? LLVMBuildFPExt(b, v, m->f64, "") : v;
  default:
    return v; /* i64 f32 */
  }
}

/* ---- loads and stores ---- */

static void mark_invariant(fgb_module *m, LLVMValueRef ld, unsigned flags) {
  if (flags & FGB_LD_INVARIANT)
    LLVMSetMetadata(ld, m->md_invariant,
                    LLVMMetadataAsValue(m->ctx, LLVMMDNodeInContext2(m->ctx, NULL, 0)));
}

LLVMValueRef fgb_load(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, unsigned flags) {
  LLVMTypeRef st = fgb_storage_type(m, dt);
  LLVMValueRef ld = LLVMBuildLoad2(m->b, st, ptr, "");
  LLVMSetAlignment(ld, (unsigned)fg_dtype_size(dt));
  mark_invariant(m, ld, flags);
  return fgb_from_storage(m, ld, dt);
}

void fgb_store(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, LLVMValueRef v) {
  LLVMValueRef st = LLVMBuildStore(m->b, fgb_to_storage(m, v, dt), ptr);
  LLVMSetAlignment(st, (unsigned)fg_dtype_size(dt));
}

void fgb_load_vec(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, int n, unsigned align,
                  unsigned flags, LLVMValueRef *out) {
  if (n <= 1) {
    out[0] = fgb_load(m, ptr, dt, flags);
    return;
  }
  LLVMTypeRef vt = LLVMVectorType(fgb_storage_type(m, dt), (unsigned)n);
  LLVMValueRef ld = LLVMBuildLoad2(m->b, vt, ptr, "");
  LLVMSetAlignment(ld, align);
  mark_invariant(m, ld, flags);
  for (int i = 0; i < n; i++)
    out[i] = fgb_from_storage(
        m, LLVMBuildExtractElement(m->b, ld, LLVMConstInt(m->i32, (unsigned)i, 0), ""), dt);
}

void fgb_store_vec(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, int n, unsigned align,
                   LLVMValueRef *vals) {
  if (n <= 1) {
    fgb_store(m, ptr, dt, vals[0]);
    return;
  }
  /* Bytes (f8, bool, i8) as 32-bit words: NVPTX splits an 8- or 16-byte
   * vector of i8 into one st.u32 a word, but stores a vector of words as
   * one st.v2 / st.v4 (issue 17: the f8 cast's stores, half or a quarter of
   * the instructions). Each word a bitcast of 4 bytes (bfi), through an
   * inline-asm move that instcombine cannot see through (it folds a
   * bitcast word back into the vector of bytes). */
  /* f8 on a target with the paired conversion: the codes two lanes at a
   * time (fgb_f8_encode2), an i16 each */
  LLVMValueRef pairs[32];
  bool paired = m->f8_cvt && (dt == FG_F8E4M3 || dt == FG_F8E5M2) && n % 2 == 0 && n <= 64;
  for (int j = 0; paired && j < n / 2; j++)
    pairs[j] = fgb_f8_encode2(m, vals[2 * j], vals[2 * j + 1], dt);
  if (fg_dtype_size(dt) == 1 && n >= 8 && n % 4 == 0 && align >= 4) {
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(m->i32, (unsigned)n / 4));
    LLVMTypeRef word_fn = LLVMFunctionType(m->i32, &m->i32, 1, 0);
    for (int w = 0; w < n / 4; w++) {
      LLVMValueRef word = LLVMGetUndef(LLVMVectorType(m->i8, 4));
      if (paired) {
        word = LLVMGetUndef(LLVMVectorType(m->i16, 2));
        for (int j = 0; j < 2; j++)
          word = LLVMBuildInsertElement(m->b, word, pairs[2 * w + j],
                                        LLVMConstInt(m->i32, (unsigned)j, 0), "");
      }
      for (int j = 0; !paired && j < 4; j++)
        word = LLVMBuildInsertElement(m->b, word, fgb_to_storage(m, vals[4 * w + j], dt),
                                      LLVMConstInt(m->i32, (unsigned)j, 0), "");
      LLVMValueRef asm_mov = LLVMGetInlineAsm(word_fn, (char *)"mov.b32 $0, $1;", 15,
                                              (char *)"=r,r", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
      LLVMValueRef arg = LLVMBuildBitCast(m->b, word, m->i32, "");
      v = LLVMBuildInsertElement(m->b, v, LLVMBuildCall2(m->b, word_fn, asm_mov, &arg, 1, ""),
                                 LLVMConstInt(m->i32, (unsigned)w, 0), "");
    }
    LLVMSetAlignment(LLVMBuildStore(m->b, v, ptr), align);
    return;
  }
  LLVMTypeRef vt = LLVMVectorType(fgb_storage_type(m, dt), (unsigned)n);
  LLVMValueRef v = LLVMGetUndef(vt);
  for (int i = 0; i < n; i++) {
    LLVMValueRef code = paired
                            ? LLVMBuildTrunc(m->b,
                                             i % 2 ? LLVMBuildLShr(m->b, pairs[i / 2],
                                                                   LLVMConstInt(m->i16, 8, 0), "")
                                                   : pairs[i / 2],
                                             m->i8, "")
                            : fgb_to_storage(m, vals[i], dt);
    v = LLVMBuildInsertElement(m->b, v, code, LLVMConstInt(m->i32, (unsigned)i, 0), "");
  }
  LLVMValueRef st = LLVMBuildStore(m->b, v, ptr);
  LLVMSetAlignment(st, align);
}

/* ---- MX formats: packed f4e2m1 storage ----
 * Element i is the low nibble of byte i/2 for even i, the high nibble for
 * odd i. A load reads its byte and shifts. A store of a whole byte (two
 * neighbouring lanes of one thread) is a plain store; a lone nibble is two
 * atomics on the aligned 32-bit word that holds it (and with the other bits,
 * or in the code), so threads writing the two nibbles of a byte, in any
 * order, leave both: every store touches only its own bits. */

LLVMValueRef fgb_load_packed(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, unsigned flags) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef it = LLVMTypeOf(off);
  LLVMValueRef byte =
      fgb_gep_global(m, ptr, m->i8, LLVMBuildAShr(b, off, LLVMConstInt(it, 1, 0), ""));
  LLVMValueRef ld = LLVMBuildLoad2(b, m->i8, byte, "");
  LLVMSetAlignment(ld, 1);
  if (flags & FGB_LD_INVARIANT)
    LLVMSetMetadata(ld, m->md_invariant,
                    LLVMMetadataAsValue(m->ctx, LLVMMDNodeInContext2(m->ctx, NULL, 0)));
  LLVMValueRef odd = LLVMBuildTrunc(b, LLVMBuildAnd(b, off, LLVMConstInt(it, 1, 0), ""), m->i8, "");
  LLVMValueRef code = LLVMBuildLShr(b, ld, LLVMBuildShl(b, odd, LLVMConstInt(m->i8, 2, 0), ""), "");
  return fgb_from_storage(m, LLVMBuildAnd(b, code, LLVMConstInt(m->i8, 0xf, 0), ""), FG_F4E2M1);
}

void fgb_store_nibble(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, LLVMValueRef val) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef it = LLVMTypeOf(off);
  LLVMValueRef code = LLVMBuildZExt(b, fgb_to_storage(m, val, FG_F4E2M1), m->i32, "");
  LLVMValueRef byte =
      fgb_gep_global(m, ptr, m->i8, LLVMBuildAShr(b, off, LLVMConstInt(it, 1, 0), ""));
  LLVMTypeRef pt = LLVMTypeOf(byte);
  LLVMValueRef addr = LLVMBuildPtrToInt(b, byte, m->i64, "");
  LLVMValueRef word =
      LLVMBuildIntToPtr(b, LLVMBuildAnd(b, addr, LLVMConstInt(m->i64, ~3ull, 0), ""), pt, "");
  LLVMValueRef sh = LLVMBuildAdd(
      b,
      LLVMBuildShl(
          b, LLVMBuildTrunc(b, LLVMBuildAnd(b, addr, LLVMConstInt(m->i64, 3, 0), ""), m->i32, ""),
          LLVMConstInt(m->i32, 3, 0), ""),
      LLVMBuildShl(b,
                   LLVMBuildTrunc(b, LLVMBuildAnd(b, off, LLVMConstInt(it, 1, 0), ""), m->i32, ""),
                   LLVMConstInt(m->i32, 2, 0), ""),
      "");
  LLVMValueRef keep = LLVMBuildNot(b, LLVMBuildShl(b, LLVMConstInt(m->i32, 0xf, 0), sh, ""), "");
  LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpAnd, word, keep, LLVMAtomicOrderingMonotonic, 0);
  LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpOr, word, LLVMBuildShl(b, code, sh, ""),
                     LLVMAtomicOrderingMonotonic, 0);
}

/* Stores n (even) lanes from element offset off (a multiple of n): n / 2
 * bytes, one vector store when aligned. */
void fgb_store_packed_pairs(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, int n, bool aligned,
                            LLVMValueRef *vals) {
  LLVMBuilderRef b = m->b;
  LLVMTypeRef it = LLVMTypeOf(off);
  LLVMValueRef base =
      fgb_gep_global(m, ptr, m->i8, LLVMBuildAShr(b, off, LLVMConstInt(it, 1, 0), ""));
  LLVMValueRef bytes[8];
  for (int j = 0; j < n / 2; j++) {
    LLVMValueRef lo = fgb_to_storage(m, vals[2 * j], FG_F4E2M1);
    LLVMValueRef hi = fgb_to_storage(m, vals[2 * j + 1], FG_F4E2M1);
    bytes[j] = LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, LLVMConstInt(m->i8, 4, 0), ""), "");
  }
  if (aligned && n / 2 > 1 && n / 2 <= 8) {
    LLVMTypeRef vt = LLVMVectorType(m->i8, (unsigned)(n / 2));
    LLVMValueRef v = LLVMGetUndef(vt);
    for (int j = 0; j < n / 2; j++)
      v = LLVMBuildInsertElement(b, v, bytes[j], LLVMConstInt(m->i32, (unsigned)j, 0), "");
    LLVMSetAlignment(LLVMBuildStore(b, v, base), (unsigned)(n / 2));
    return;
  }
  for (int j = 0; j < n / 2; j++) {
    LLVMValueRef a = j ? fgb_gep_global(m, base, m->i8, LLVMConstInt(it, (unsigned)j, 0)) : base;
    LLVMSetAlignment(LLVMBuildStore(b, bytes[j], a), 1);
  }
}

/* ---- conversions ---- */

LLVMValueRef fgb_round_narrow(fgb_module *m, LLVMValueRef v, fg_dtype dt) {
  LLVMBuilderRef b = m->b;
  switch (dt) {
  case FG_BF16:
    return LLVMBuildFPExt(b, LLVMBuildFPTrunc(b, v, m->bf16, ""), m->f32, "");
  case FG_F16:
    return LLVMBuildFPExt(b, LLVMBuildFPTrunc(b, v, m->f16, ""), m->f32, "");
  case FG_F8E4M3:
  case FG_F8E5M2:
  case FG_F4E2M1: {
    LLVMValueRef code = dt == FG_F4E2M1 ? fgb_f4_encode(m, v) : fgb_f8_encode(m, v, dt);
    LLVMValueRef r = dt == FG_F4E2M1 ? fgb_f4_decode(m, code) : fgb_f8_decode(m, code, dt);
    unsigned i = m->nf8_codes++ % 64;
    m->f8_codes[i].decoded = r;
    m->f8_codes[i].code = code;
    m->f8_codes[i].src = v;
    m->f8_codes[i].dt = dt;
    return r;
  }
  case FG_F8E8M0: /* a noted value is one already */
    return fgb_e8m0_code_of(m, v) ? v : fgb_e8m0_decode(m, fgb_e8m0_encode(m, v));
  default:
    return v;
  }
}

/* True when every value of float dtype `from` is a value of float dtype `to`. */
static bool float_subset(fg_dtype from, fg_dtype to) {
  if (from == to || to == FG_F64)
    return true;
  if (to == FG_F32)
    return from != FG_F64;
  if (to == FG_F16 || to == FG_BF16)
    return fg_dtype_is_f8(from) || from == FG_F4E2M1 || (to == FG_BF16 && from == FG_F8E8M0);
  return false;
}

static LLVMValueRef float_to_int(fgb_module *m, LLVMValueRef v, fg_dtype to) {
  LLVMBuilderRef b = m->b;
  bool is64 = LLVMTypeOf(v) == m->f64;
  int w = int_width(to);
  LLVMTypeRef it = LLVMIntTypeInContext(m->ctx, (unsigned)w);
  char name[48];
  snprintf(name, sizeof name, "llvm.fpto%ci.sat.i%d.%s", to == FG_U8 ? 'u' : 's', w,
           is64 ? "f64" : "f32");
  LLVMValueRef r = fgb_call(m, name, it, 1, &v);
  if (w == 64)
    return r;
  return to == FG_U8 ? LLVMBuildZExt(b, r, m->i64, "") : LLVMBuildSExt(b, r, m->i64, "");
}

LLVMValueRef fgb_convert(fgb_module *m, LLVMValueRef v, fg_dtype from, fg_dtype to) {
  LLVMBuilderRef b = m->b;
  if (from == to)
    return v;
  fg_category cf = fg_dtype_category(from), ct = fg_dtype_category(to);
  if (cf == FG_CAT_BOOL) {
    if (ct == FG_CAT_INT)
      return LLVMBuildZExt(b, v, m->i64, "");
    return LLVMBuildUIToFP(b, v, fgb_reg_type(m, to), "");
  }
  if (ct == FG_CAT_BOOL) {
    if (cf == FG_CAT_INT)
      return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstInt(m->i64, 0, 0), "");
    return LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstReal(LLVMTypeOf(v), 0.0), "");
  }
  if (cf == FG_CAT_FLOAT && ct == FG_CAT_FLOAT) {
    if (float_subset(from, to))
      return to == FG_F64 && from != FG_F64 ? LLVMBuildFPExt(b, v, m->f64, "") : v;
    if (from == FG_F64)
      v = LLVMBuildFPTrunc(b, v, m->f32, "");
    return fgb_round_narrow(m, v, to);
  }
  if (cf == FG_CAT_FLOAT)
    return float_to_int(m, v, to);
  if (ct == FG_CAT_INT) {
    /* int -> int: wrap, unless every `from` value fits */
    bool fits =
        to == FG_I64 || (to != FG_U8 && from != FG_I64 &&
                         (from == FG_U8 ? int_width(to) > 8 : int_width(from) <= int_width(to)));
    if (fits)
      return v;
    LLVMValueRef t =
        LLVMBuildTrunc(b, v, LLVMIntTypeInContext(m->ctx, (unsigned)int_width(to)), "");
    return to == FG_U8 ? LLVMBuildZExt(b, t, m->i64, "") : LLVMBuildSExt(b, t, m->i64, "");
  }
  /* int -> float: one rounding to f32 (f64), then the narrow type. Values of
   * the narrow int dtypes convert through i32 (exact, cheaper cvt). */
  if (from != FG_I64)
    v = LLVMBuildTrunc(b, v, m->i32, "");
  if (to == FG_F64)
    return LLVMBuildSIToFP(b, v, m->f64, "");
  LLVMValueRef f = LLVMBuildSIToFP(b, v, m->f32, "");
  return fgb_round_narrow(m, f, to);
}
