/* PTX backend, part 3: value-level lowering of the .fg numerics, computing
 * the same functions as the reference interpreter (ir/interp*.c, the op
 * table's fn_f / fn_i, ir/dtype.c's rounding).
 *
 * Register forms (what every function here takes and returns):
 *   f16 bf16 f32 f8e4m3 f8e5m2  float  (a value exactly representable in the dtype)
 *   f64                         double
 *   i8 u8 i16 i32 i64           i64    (the dtype's value: sign- or, for u8, zero-extended)
 *   bool                        i1
 * Storage forms (memory): bool i8, f16/bf16 i16 bits, f8 i8 bits, ints their
 * width, f32 float, f64 double.
 *
 * Compute dtypes (fg_pw_compute_dtype): FG_F32, FG_F64, FG_I64, FG_BOOL;
 * their register forms are float, double, i64, i1. */
#ifndef FGB_LOWER_VALUE_H
#define FGB_LOWER_VALUE_H
#include "dtype.h"
#include "ir.h"
#include "op.h"
#include "llvm_module.h"

LLVMTypeRef fgb_reg_type(fgb_module *m, fg_dtype dt);
LLVMTypeRef fgb_storage_type(fgb_module *m, fg_dtype dt);

/* ---- memory ---- */

/* FGB_LD_INVARIANT: the memory is not written while the kernel runs (a
 * read-only input): the load gets !invariant.load, which NVPTX turns into
 * ld.global.nc. */
enum { FGB_LD_INVARIANT = 1 };

/* Loads one element of dtype dt from ptr (global or shared) and returns its
 * register form. */
LLVMValueRef fgb_load(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, unsigned flags);
/* Stores v into ptr as dt. v is dt's register form; for float dtypes any
 * float (or double) value is accepted and rounded to nearest even into dt
 * (overflow: f16/bf16/e5m2 -> inf, e4m3 -> NaN); i64 values wrap. */
void fgb_store(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, LLVMValueRef v);
/* n consecutive elements (n * size <= 16 bytes, n a power of two) with one
 * vector access of alignment `align` bytes (ptr must be that aligned, e.g.
 * 8 x bf16 = one 16-byte ld.global.nc.v4.u32). out/vals: n register forms. */
void fgb_load_vec(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, int n, unsigned align,
                  unsigned flags, LLVMValueRef *out);
void fgb_store_vec(fgb_module *m, LLVMValueRef ptr, fg_dtype dt, int n, unsigned align,
                   LLVMValueRef *vals);
/* The conversions behind load and store, for staging through shared memory
 * or shuffles: storage bits <-> register form. */
LLVMValueRef fgb_from_storage(fgb_module *m, LLVMValueRef raw, fg_dtype dt);
LLVMValueRef fgb_to_storage(fgb_module *m, LLVMValueRef v, fg_dtype dt);

/* ---- conversions ---- */

/* Register form of `from` -> register form of `to`, with the interpreter's
 * rules (fg_ix_convert / fg_ix_store_*):
 *   float -> float  round to nearest even (f64 -> f32 first, then the narrow
 *                   type); no-op when every `from` value is a `to` value
 *   float -> int    truncate toward zero, saturate to the *target* dtype's
 *                   range, NaN -> 0 (llvm.fpto[su]i.sat)
 *   int -> int      wrap to the target width (u8 zero-extends)
 *   int -> float    one rounding straight to f32 (f64 for f64), then the
 *                   narrow type, as the interpreter's (double)(float)v
 *   x -> bool       x != 0 (NaN -> true);  bool -> number: 0 / 1
 * `from`/`to` may also be compute dtypes (they are dtypes). */
LLVMValueRef fgb_convert(fgb_module *m, LLVMValueRef v, fg_dtype from, fg_dtype to);

/* f32 -> the nearest value of a narrow float dtype (f16 bf16 f8e4m3 f8e5m2,
 * RNE, the dtype's overflow rule), still as f32. */
LLVMValueRef fgb_round_narrow(fgb_module *m, LLVMValueRef f32v, fg_dtype dt);

/* f8 codecs in integer arithmetic, exactly ir/dtype.c's small_encode /
 * small_decode (f32 -> i8 bits, i8 bits -> f32). dt is FG_F8E4M3 or FG_F8E5M2. */
LLVMValueRef fgb_f8_encode(fgb_module *m, LLVMValueRef f32v, fg_dtype dt);
LLVMValueRef fgb_f8_decode(fgb_module *m, LLVMValueRef bits, fg_dtype dt);
/* The codes of two lanes (register form, as fgb_to_storage takes them) as
 * an i16, lo's in the low byte: one hardware conversion for both where the
 * target has it (fg_target.f8_cvt), a cast's f32 source converted rather
 * than its rounded value (issue 17). */
LLVMValueRef fgb_f8_encode2(fgb_module *m, LLVMValueRef lo, LLVMValueRef hi, fg_dtype dt);
bool fgb_has_f8_cvt(const fgb_module *m); /* the target has the paired conversion */
/* The integer forms behind them (every arch; the only forms before sm_89,
 * where fgb_f8_* use the hardware conversions with the same results). */
LLVMValueRef fgb_f8_encode_int(fgb_module *m, LLVMValueRef f32v, fg_dtype dt);
LLVMValueRef fgb_f8_decode_int(fgb_module *m, LLVMValueRef bits, fg_dtype dt);
/* MX formats, exactly ir/dtype.c's codecs: f8e8m0 (f32 -> i8 code, i8 code
 * -> f32) and f4e2m1 (f32 -> i8 holding the 4-bit code, its low 4 bits ->
 * f32). */
LLVMValueRef fgb_e8m0_encode(fgb_module *m, LLVMValueRef f32v);
LLVMValueRef fgb_e8m0_decode(fgb_module *m, LLVMValueRef bits);
/* issue 17: values known to be f8e8m0 values. fgb_e8m0_note records that
 * f32 `value` is the value of i8 `code` (fgb_e8m0_decode notes its results,
 * mx_scale its own); fgb_e8m0_code_of gives a noted value's code (NULL
 * for another value); fgb_e8m0_recip the exact f32 reciprocal of a code's
 * value (a division by a scale is a multiplication). */
void fgb_e8m0_note(fgb_module *m, LLVMValueRef value, LLVMValueRef code);
LLVMValueRef fgb_e8m0_code_of(fgb_module *m, LLVMValueRef value);
LLVMValueRef fgb_e8m0_recip(fgb_module *m, LLVMValueRef code);
LLVMValueRef fgb_f4_encode(fgb_module *m, LLVMValueRef f32v);
LLVMValueRef fgb_f4_decode(fgb_module *m, LLVMValueRef bits);

/* MX formats: packed f4e2m1 storage (element i in byte i/2, the low nibble
 * for even i). off is an element offset from ptr. A load gives the f32
 * value; a lone element's store is two atomics on its aligned 32-bit word
 * (and out its nibble, or in the code), safe beside threads storing the
 * other nibble; n (even) lanes from an offset that is a multiple of n store
 * n / 2 whole bytes (one vector store when aligned). */
LLVMValueRef fgb_load_packed(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, unsigned flags);
void fgb_store_nibble(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, LLVMValueRef val);
void fgb_store_packed_pairs(fgb_module *m, LLVMValueRef ptr, LLVMValueRef off, int n, bool aligned,
                            LLVMValueRef *vals);

/* ---- pointwise ops ---- */

/* The dtype operand k of pointwise node n must be converted to before
 * fgb_emit_pointwise: FG_BOOL for truth operands (logical ops, where's
 * condition), else the compute dtype. */
fg_dtype fgb_pw_operand_target(const fg_node *n, int k);
/* When operand k of n is a literal: its value in the form above (as the
 * interpreter reads literals: f32 compute rounds the literal once to f32,
 * f64 keeps it exact). NULL when operand k is not a literal. */
LLVMValueRef fgb_pw_literal(fgb_module *m, const fg_node *n, int k);

/* The dtype whose register form fgb_emit_pointwise returns for n: FG_BOOL
 * for compare / isnan / isinf / logical ops, else the compute dtype. */
fg_dtype fgb_pw_result_form(const fg_node *n);

/* Emits pointwise node n on ops[0..n->nin-1] (each already in
 * fgb_pw_operand_target(n, k)'s register form). Returns the result in the
 * compute dtype's register form, or an i1 for compare / isnan / isinf /
 * logical ops; the caller converts it to n->out[0]'s dtype (fgb_convert from
 * fgb_pw_result_form(n)). May add
 * basic blocks (integer pow loops); the builder is left at the end of the
 * block where the result is available. NULL for an op without a pointwise
 * form. Float transcendentals call libdevice (__nv_*f for f32, __nv_* for
 * f64); see lower_pointwise.c for the accuracy of each. */
LLVMValueRef fgb_emit_pointwise(fgb_module *m, const fg_node *n, LLVMValueRef *ops);
/* The same for an opcode and compute dtype, for emitters that synthesize
 * ops (n may be NULL for ops without attributes: not clamp / gelu). */
LLVMValueRef fgb_emit_op(fgb_module *m, fg_opcode op, fg_dtype cdt, const fg_node *n,
                         LLVMValueRef *ops);

/* Element `lin` (i64) of rand or randn (op) of dtype dt for the i64 seed
 * and offset words, in dt's register form: ir/random.h's stream
 * (backend_ptx/emit_random.c). */
LLVMValueRef fgb_random_element(fgb_module *m, fg_opcode op, fg_dtype dt, LLVMValueRef seed,
                                LLVMValueRef offset, LLVMValueRef lin);

/* ---- reductions ---- */

/* Identity and combine of sum / mean (add), prod (mul), amax / amin (the
 * interpreter's NaN-propagating max/min: a NaN anywhere gives NaN; on ties
 * the accumulator is kept) in the accumulation dtype acc
 * (fg_reduce_acc_dtype: FG_F32, FG_F64 or FG_I64). Float sum identity is
 * -0.0 (so a sum of one -0.0 stays -0.0); amax/amin identities are -inf/+inf
 * and INT64_MIN/INT64_MAX (an empty reduction gives those, where the
 * interpreter gives NaN / 0). Integer sums and products wrap. */
LLVMValueRef fgb_reduce_identity(fgb_module *m, fg_opcode op, fg_dtype acc);
LLVMValueRef fgb_reduce_combine(fgb_module *m, fg_opcode op, LLVMValueRef acc, LLVMValueRef x,
                                fg_dtype acc_dt);
/* Max and min of bf16 pairs (<2 x bfloat>: max.NaN.bf16x2, sm_80+), exact
 * and NaN-propagating like the f32 form, at half the instructions: for
 * reductions of bf16 values (an f32 register holds a bf16-typed value
 * exactly). fgb_bf16x2_ok: whether op on this target has it; pack: two
 * such f32 values into a pair (lane 0 the low half); unpack: lane h as
 * f32; identity: op's identity in both lanes. */
bool fgb_bf16x2_ok(fgb_module *m, fg_opcode op);
LLVMValueRef fgb_bf16x2_combine(fgb_module *m, fg_opcode op, LLVMValueRef acc, LLVMValueRef x);
LLVMValueRef fgb_bf16x2_pack(fgb_module *m, LLVMValueRef x0, LLVMValueRef x1);
LLVMValueRef fgb_bf16x2_unpack(fgb_module *m, LLVMValueRef v, int h);
LLVMValueRef fgb_bf16x2_identity(fgb_module *m, fg_opcode op);

#endif
