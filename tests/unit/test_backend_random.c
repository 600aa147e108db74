/* rand's emitted LLVM IR (backend_ptx/emit_random.c: fgb_random_element),
 * JIT-compiled for the host, against the interpreter's stream (ir/random.c)
 * bitwise: f32, f64 and the f8 dtypes, seeds and offsets at the edges of their words,
 * element indices across the 2^32 boundary of the block counter. What the
 * GPU runs is this IR through NVPTX; tests/graphs/random.fg checks it there.
 * randn calls libdevice, which the host cannot run: it is compared on the
 * GPU (to the float tolerance). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/ExecutionEngine.h>

#include "backend.h"
#include "random.h"

#include "check.h"
#include "host_jit.h"

typedef void (*rand_fn)(int64_t seed, int64_t offset, int64_t base, int64_t n, void *out);

/* The module targets sm_80, whose f8 conversions are integer IR (sm_89+
 * use cvt instructions through inline PTX, which the host cannot run; the
 * uniforms are exact in the dtype, so the conversion is exact either way).
 * bf16 and f16 convert through inline PTX on every target: their uniforms
 * are the f32 path with another width, as the f8 ones are. */
static const fg_dtype dts[] = {FG_F32, FG_F64, FG_F8E4M3, FG_F8E5M2};
enum { NDT = sizeof dts / sizeof dts[0] };

/* void rand_D(seed, offset, base, n, out*) { for i < n: out[i] =
 * widen(rand element base + i) } with out f32 (f64 for f64). */
static void emit_loop(fgb_module *m, const char *name, fg_dtype dt) {
  LLVMContextRef c = fgb_ctx(m);
  LLVMBuilderRef b = fgb_builder(m);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0), i64 = LLVMInt64TypeInContext(c);
  LLVMTypeRef params[5] = {i64, i64, i64, i64, ptr};
  LLVMValueRef fn = LLVMAddFunction(fgb_llvm_module(m), name,
                                    LLVMFunctionType(LLVMVoidTypeInContext(c), params, 5, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, fn, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, fn, "loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c, fn, "done");
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSGT, LLVMGetParam(fn, 3), LLVMConstInt(i64, 0, 0), ""),
                  loop, done);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
  LLVMValueRef lin = LLVMBuildAdd(b, LLVMGetParam(fn, 2), i, "");
  LLVMValueRef v =
      fgb_random_element(m, FG_OP_RAND, dt, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), lin);
  fg_dtype wide = dt == FG_F64 ? FG_F64 : FG_F32;
  LLVMValueRef w = fgb_convert(m, v, dt, wide);
  LLVMTypeRef wt = LLVMTypeOf(w);
  LLVMBuildStore(b, w, LLVMBuildGEP2(b, wt, LLVMGetParam(fn, 4), &i, 1, ""));
  LLVMValueRef i1 = LLVMBuildAdd(b, i, LLVMConstInt(i64, 1, 0), "");
  LLVMBasicBlockRef from[2] = {entry, loop};
  LLVMValueRef vals[2] = {LLVMConstInt(i64, 0, 0), i1};
  LLVMAddIncoming(i, vals, from, 2);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i1, LLVMGetParam(fn, 3), ""), loop, done);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
}

static void test_jit(void) {
  char err[512];
  fgb_module *m = fgb_module_create("randjit", "sm_80", err, sizeof err);
  CHECK_MSG(m != NULL, "%s", err);
  if (!m)
    return;
  char names[NDT][32];
  for (int d = 0; d < NDT; d++) {
    snprintf(names[d], sizeof names[d], "rand_%s", fg_dtype_name(dts[d]));
    emit_loop(m, names[d], dts[d]);
  }
  LLVMExecutionEngineRef ee = host_jit(m);
  if (!ee) {
    fgb_module_free(m);
    return;
  }
  static const uint64_t seeds[] = {0, 1, 0xffffffffffffffffull, 0x8000000000000000ull,
                                   0x0123456789abcdefull};
  static const uint64_t offsets[] = {0, 0xffffffffull, 0x100000000ull, 0xfedcba9876543210ull};
  static const uint64_t bases[] = {0, 0xfffffff0ull * 4, (1ull << 40) + 1, (1ull << 62) - 500};
  enum { N = 1000 };
  double *out = malloc(N * sizeof *out);
  for (int d = 0; d < NDT && out; d++) {
    rand_fn f = (rand_fn)(uintptr_t)LLVMGetFunctionAddress(ee, names[d]);
    CHECK_MSG(f != NULL, "JIT symbol %s missing", names[d]);
    if (!f)
      continue;
    long bad = 0, total = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
      for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
        for (size_t k = 0; k < sizeof bases / sizeof bases[0]; k++) {
          f((int64_t)seeds[s], (int64_t)offsets[o], (int64_t)bases[k], N, out);
          for (int i = 0; i < N; i++) {
            uint64_t lin = bases[k] + (uint64_t)i;
            uint32_t w[4];
            fg_random_block(seeds[s], offsets[o], lin, w);
            double want = fg_random_uniform(w[lin & 3], dts[d]);
            double got = dts[d] == FG_F64 ? out[i] : (double)((float *)out)[i];
            total++;
            if (got != want && bad++ < 5)
              fprintf(stderr, "  %s seed %llx offset %llx index %llu: %.17g, want %.17g\n",
                      names[d], (unsigned long long)seeds[s], (unsigned long long)offsets[o],
                      (unsigned long long)lin, got, want);
          }
        }
    CHECK_MSG(bad == 0, "%s: emitted IR differs on %ld of %ld elements", names[d], bad, total);
    printf("  %s: emitted IR == ir/random.c on %ld elements\n", names[d], total);
  }
  free(out);
  host_jit_free(ee, m);
}

int main(void) {
  test_jit();
  printf("test_backend_random: %d passed, %d failed\n", npass, nfail);
  return nfail ? 1 : 0;
}
