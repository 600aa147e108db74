/* The PTX backend's infrastructure, for the kernel emitters (one include).
 *
 *   llvm_module.h  fgb_module: create(name, "sm_80".."sm_90a") -> kernels
 *                  (fgb_kernel_begin with PTR / PTR_NOALIAS / F64 / I64 /
 *                  I32 / F32 params, set_maxntid / set_minctasm) -> finish
 *                  (verify, link libdevice, internalize, nvvm-reflect-ftz=0,
 *                  default<O0..3>, PTX or LLVM IR text) -> free.
 *                  Accurate by default (div.rn, sqrt.rn, no FMA contraction,
 *                  no ftz); fgb_finish_opts.fast_math opts into approximations.
 *   gpu_intrin.h   %tid/%ctaid/%ntid/%nctaid/%laneid, bar.sync, fence.acq_rel.gpu,
 *                  shfl.sync.bfly (i1..i64, f32, f64), atom.global.add.u32,
 *                  static shared arrays, GEPs.
 *   lower_value.h  the .fg numerics: register/storage forms, load/store
 *                  (scalar and 16-byte vectors, ld.global.nc for invariant
 *                  inputs), fgb_convert (the interpreter's conversion rules,
 *                  f8 in exact integer arithmetic), fgb_emit_pointwise for
 *                  every pointwise op, reduction identities and combiners.
 *
 * A typical pointwise element:
 *     for each operand k of node n:
 *       v = fgb_pw_literal(m, n, k);
 *       if (!v) v = fgb_convert(m, fgb_load(m, p_k, dt_k, FGB_LD_INVARIANT),
 *                               dt_k, fgb_pw_operand_target(n, k));
 *     r = fgb_emit_pointwise(m, n, ops);
 *     r = fgb_convert(m, r, fgb_pw_result_form(n), n->out[0]->type.dtype);
 *     fgb_store(m, p_out, n->out[0]->type.dtype, r);
 * Inside a fused kernel, an intermediate is kept in the register form of its
 * dtype (fgb_convert to the node's output dtype performs the per-op
 * rounding of narrow floats that the spec requires).
 *
 * Ownership: every LLVM object belongs to the fgb_module; fgb_module_free
 * disposes all of them (also after a failed finish). Not thread-safe per
 * module; separate modules may be used from separate threads only after
 * one fgb_module_create has returned (target initialization). */
#ifndef FGB_BACKEND_H
#define FGB_BACKEND_H
#include "gpu_intrin.h"
#include "llvm_module.h"
#include "lower_value.h"
#endif
