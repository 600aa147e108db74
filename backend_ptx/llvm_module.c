/* Module lifecycle: create (target machine), kernels, finish (libdevice,
 * passes, PTX). See llvm_module.h. */
#include <pthread.h>
#include "llvm_module.h"
#include "target.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "fgb_internal.h"

#define TRIPLE "nvptx64-nvidia-cuda"

static void set_err(char *err, size_t cap, const char *fmt, ...) {
  if (!err || !cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

static void init_once(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

/* Modules may be created on several threads at once (fusec compiles
 * kernels in parallel). */
static void init_nvptx(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_once);
}

/* The smallest PTX ISA version each supported arch needs. */
static const struct {
  const char *arch;
  int sm;
  const char *feat;
} arches[] = {
    {"sm_80", 80, "+ptx70"}, {"sm_86", 86, "+ptx71"}, {"sm_87", 87, "+ptx74"},
    {"sm_89", 89, "+ptx78"}, {"sm_90", 90, "+ptx78"}, {"sm_90a", 90, "+ptx80"},
};

fgb_module *fgb_module_create(const char *name, const char *arch, char *err, size_t cap) {
  int ai = -1;
  for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
    if (arch && strcmp(arch, arches[i].arch) == 0)
      ai = (int)i;
  if (ai < 0) {
    set_err(err, cap,
            "unsupported GPU architecture '%s' (sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)",
            arch ? arch : "(null)");
    return NULL;
  }
  init_nvptx();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(TRIPLE, &target, &msg)) {
    set_err(err, cap, "NVPTX target unavailable: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  fgb_module *m = calloc(1, sizeof *m);
  if (!m) {
    set_err(err, cap, "out of memory");
    return NULL;
  }
  m->sm = arches[ai].sm;
  fg_target t;
  fg_target_init(&t, m->sm, 0);
  m->f8_cvt = t.f8_cvt;
  /* Default, not Aggressive: ptxas optimizes the PTX again; Aggressive cost
   * ~10% of fusec's time on the examples for 4 lines of PTX in 21,000. */
  m->tm = LLVMCreateTargetMachine(target, TRIPLE, arch, arches[ai].feat, LLVMCodeGenLevelDefault,
                                  LLVMRelocDefault, LLVMCodeModelDefault);
  m->ctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(name ? name : "fusec", m->ctx);
  m->b = LLVMCreateBuilderInContext(m->ctx);
  LLVMSetTarget(m->mod, TRIPLE);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(m->tm);
  char *dl = LLVMCopyStringRepOfTargetData(td);
  LLVMSetDataLayout(m->mod, dl);
  LLVMDisposeMessage(dl);
  LLVMDisposeTargetData(td);
  LLVMContextRef c = m->ctx;
  m->i1 = LLVMInt1TypeInContext(c);
  m->i8 = LLVMInt8TypeInContext(c);
  m->i16 = LLVMInt16TypeInContext(c);
  m->i32 = LLVMInt32TypeInContext(c);
  m->i64 = LLVMInt64TypeInContext(c);
  m->f16 = LLVMHalfTypeInContext(c);
  m->bf16 = LLVMBFloatTypeInContext(c);
  m->f32 = LLVMFloatTypeInContext(c);
  m->f64 = LLVMDoubleTypeInContext(c);
  m->v = LLVMVoidTypeInContext(c);
  m->gptr = LLVMPointerTypeInContext(c, 1);
  m->sptr = LLVMPointerTypeInContext(c, 3);
  m->md_invariant = LLVMGetMDKindIDInContext(c, "invariant.load", 14);
  return m;
}

void fgb_module_free(fgb_module *m) {
  if (!m)
    return;
  LLVMDisposeBuilder(m->b);
  if (m->mod)
    LLVMDisposeModule(m->mod);
  LLVMContextDispose(m->ctx);
  LLVMDisposeTargetMachine(m->tm);
  free(m->kernels);
  free(m);
}

LLVMContextRef fgb_ctx(fgb_module *m) { return m->ctx; }
LLVMModuleRef fgb_llvm_module(fgb_module *m) { return m->mod; }
LLVMBuilderRef fgb_builder(fgb_module *m) { return m->b; }

LLVMValueRef fgb_current_fn(fgb_module *m) {
  return LLVMGetBasicBlockParent(LLVMGetInsertBlock(m->b));
}

LLVMValueRef fgb_declare(fgb_module *m, const char *name, LLVMTypeRef ret, int n,
                         LLVMTypeRef *params) {
  LLVMValueRef f = LLVMGetNamedFunction(m->mod, name);
  if (f)
    return f;
  /* Function's constructor gives "llvm.*" names their intrinsic ID and
   * attributes. libdevice functions are pure: mark them so. */
  f = LLVMAddFunction(m->mod, name, LLVMFunctionType(ret, params, (unsigned)n, 0));
  if (strncmp(name, "__nv_", 5) == 0) {
    unsigned k = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, k, 0));
  }
  return f;
}

LLVMValueRef fgb_call(fgb_module *m, const char *name, LLVMTypeRef ret, int n, LLVMValueRef *args) {
  LLVMTypeRef pt[16];
  if (n > 16)
    abort(); /* no intrinsic or libdevice function takes more */
  for (int i = 0; i < n; i++)
    pt[i] = LLVMTypeOf(args[i]);
  LLVMValueRef f = fgb_declare(m, name, ret, n, pt);
  return LLVMBuildCall2(m->b, LLVMGlobalGetValueType(f), f, args, (unsigned)n, "");
}

/* ---- kernels ---- */

static void add_enum_attr(fgb_module *m, LLVMValueRef fn, unsigned idx, const char *name,
                          uint64_t val) {
  unsigned k = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(m->ctx, k, val));
}

LLVMValueRef fgb_kernel_begin(fgb_module *m, const char *name, int nparams,
                              const fgb_param_kind *kinds) {
  /* The caller bounds nparams (compile.c: 256 arguments, 2 KiB of the
   * 4 KiB kernel parameter space). */
  LLVMTypeRef pt[FGB_MAX_KERNEL_PARAMS];
  if (nparams > FGB_MAX_KERNEL_PARAMS)
    return NULL;
  for (int i = 0; i < nparams; i++) {
    switch (kinds[i]) {
    case FGB_PARAM_PTR:
    case FGB_PARAM_PTR_NOALIAS:
    case FGB_PARAM_PTR_NOALIAS_PLAIN:
    case FGB_PARAM_PTR_PLAIN:
      pt[i] = m->gptr;
      break;
    case FGB_PARAM_F64:
      pt[i] = m->f64;
      break;
    case FGB_PARAM_I64:
      pt[i] = m->i64;
      break;
    case FGB_PARAM_I32:
      pt[i] = m->i32;
      break;
    case FGB_PARAM_F32:
      pt[i] = m->f32;
      break;
    }
  }
  LLVMValueRef fn = LLVMAddFunction(m->mod, name, LLVMFunctionType(m->v, pt, (unsigned)nparams, 0));
  LLVMSetFunctionCallConv(fn, LLVMPTXKernelCallConv);
  m->nf8_codes = 0; /* codes of another kernel are not values of this one */
  m->ne8m0 = 0;
  add_enum_attr(m, fn, LLVMAttributeFunctionIndex, "nounwind", 0);
  for (int i = 0; i < nparams; i++) {
    if (kinds[i] == FGB_PARAM_PTR_NOALIAS || kinds[i] == FGB_PARAM_PTR_NOALIAS_PLAIN)
      add_enum_attr(m, fn, (unsigned)i + 1, "noalias", 0);
    if (kinds[i] == FGB_PARAM_PTR || kinds[i] == FGB_PARAM_PTR_NOALIAS)
      add_enum_attr(m, fn, (unsigned)i + 1, "align", 16);
  }
  if (m->nkernels == m->capkernels) {
    int nc = m->capkernels ? 2 * m->capkernels : 8;
    LLVMValueRef *k = realloc(m->kernels, (size_t)nc * sizeof *k);
    if (!k)
      abort();
    m->kernels = k;
    m->capkernels = nc;
  }
  m->kernels[m->nkernels++] = fn;
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(m->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(m->b, entry);
  return fn;
}

static void annotate(fgb_module *m, LLVMValueRef fn, const char *key, int val) {
  LLVMMetadataRef ops[3] = {
      LLVMValueAsMetadata(fn),
      LLVMMDStringInContext2(m->ctx, key, strlen(key)),
      LLVMValueAsMetadata(LLVMConstInt(m->i32, (unsigned long long)val, 0)),
  };
  LLVMAddNamedMetadataOperand(m->mod, "nvvm.annotations",
                              LLVMMetadataAsValue(m->ctx, LLVMMDNodeInContext2(m->ctx, ops, 3)));
}

void fgb_kernel_set_maxntid(fgb_module *m, LLVMValueRef k, int x) { annotate(m, k, "maxntidx", x); }
void fgb_kernel_set_minctasm(fgb_module *m, LLVMValueRef k, int n) {
  annotate(m, k, "minctasm", n);
}

/* ---- finish ---- */

static bool is_kernel(const fgb_module *m, LLVMValueRef f) {
  for (int i = 0; i < m->nkernels; i++)
    if (m->kernels[i] == f)
      return true;
  return false;
}

static bool uses_libdevice(fgb_module *m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *nm = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) && len > 5 && strncmp(nm, "__nv_", 5) == 0)
      return true;
  }
  return false;
}

static bool link_libdevice(fgb_module *m, const char *path, char *err, size_t cap) {
  LLVMMemoryBufferRef buf;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    set_err(err, cap, "cannot read libdevice '%s': %s", path, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMModuleRef ld;
  LLVMBool bad = LLVMParseBitcodeInContext2(m->ctx, buf, &ld);
  LLVMDisposeMemoryBuffer(buf);
  if (bad) {
    set_err(err, cap, "cannot parse libdevice '%s'", path);
    return false;
  }
  LLVMSetTarget(ld, LLVMGetTarget(m->mod));
  LLVMSetDataLayout(ld, LLVMGetDataLayoutStr(m->mod));
  if (LLVMLinkModules2(m->mod, ld)) { /* ld is destroyed either way */
    set_err(err, cap, "linking libdevice '%s' failed", path);
    return false;
  }
  return true;
}

/* Everything but the kernels becomes internal, so globaldce drops the
 * libdevice functions nobody calls and the inliner may absorb the rest. */
static void internalize(fgb_module *m, bool fast_math) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f))
      continue;
    if (!is_kernel(m, f))
      LLVMSetLinkage(f, LLVMInternalLinkage);
    if (fast_math)
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(m->ctx, "unsafe-fp-math", 14, "true", 4));
  }
  for (LLVMValueRef g = LLVMGetFirstGlobal(m->mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g))
      LLVMSetLinkage(g, LLVMInternalLinkage);
}

static char *dup_str(const char *s, size_t n) {
  char *r = malloc(n + 1);
  if (!r)
    return NULL;
  memcpy(r, s, n);
  r[n] = 0;
  return r;
}

bool fgb_module_setup_error(const fgb_module *m) { return m->setup_error; }

char *fgb_module_finish(fgb_module *m, const fgb_finish_opts *o, char *err, size_t cap) {
  fgb_finish_opts def = {.opt_level = 3};
  if (!o)
    o = &def;
  char *msg = NULL;
  if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg)) {
    set_err(err, cap, "invalid LLVM module: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  LLVMDisposeMessage(msg);
  /* Accuracy: libdevice must not flush subnormals (__nvvm_reflect("__CUDA_FTZ") -> 0). */
  LLVMAddModuleFlag(m->mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                    LLVMValueAsMetadata(LLVMConstInt(m->i32, 0, 0)));
  if (uses_libdevice(m)) {
    if (!o->libdevice_path || !*o->libdevice_path) {
      set_err(err, cap, "the kernels need libdevice (libdevice.10.bc) but no path was given");
      m->setup_error = true;
      return NULL;
    }
    if (!link_libdevice(m, o->libdevice_path, err, cap)) {
      m->setup_error = true;
      return NULL;
    }
  }
  internalize(m, o->fast_math);
  int lvl = o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level;
  /* globaldce first: libdevice's unused functions must not go through O3. */
  static const char *const pipes[4] = {"default<O0>,globaldce", "globaldce,default<O1>",
                                       "globaldce,default<O2>", "globaldce,default<O3>"};
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  /* The kernels' vector accesses are explicit; LLVM's vectorizers find
   * nothing on NVPTX but cost a large share of compile time. */
  LLVMPassBuilderOptionsSetSLPVectorization(po, 0);
  LLVMPassBuilderOptionsSetLoopVectorization(po, 0);
  LLVMErrorRef e = LLVMRunPasses(m->mod, pipes[lvl], m->tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *em = LLVMGetErrorMessage(e);
    set_err(err, cap, "LLVM pass pipeline failed: %s", em);
    LLVMDisposeErrorMessage(em);
    return NULL;
  }
  if (o->emit_llvm) {
    char *s = LLVMPrintModuleToString(m->mod);
    char *r = dup_str(s, strlen(s));
    LLVMDisposeMessage(s);
    if (!r)
      set_err(err, cap, "out of memory");
    return r;
  }
  LLVMMemoryBufferRef out;
  if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->mod, LLVMAssemblyFile, &msg, &out)) {
    set_err(err, cap, "PTX emission failed: %s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    return NULL;
  }
  char *r = dup_str(LLVMGetBufferStart(out), LLVMGetBufferSize(out));
  LLVMDisposeMemoryBuffer(out);
  if (!r)
    set_err(err, cap, "out of memory");
  return r;
}
