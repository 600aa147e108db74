/* libfgload: the fusec deployment runtime.
 *
 * Loads a fusec artifact (PTX + launch plan, docs/artifact.md), JIT-compiles
 * it through the CUDA driver (loaded with dlopen; nothing links against
 * libcuda) with an on-disk cubin cache, and runs its graphs on a CUDA stream.
 *
 * Conventions
 * - Every function that can fail returns an fgl_status and takes a last
 *   argument `fgl_error *err`: when err is not NULL and the call fails, err
 *   receives the status and a one-line, NUL-terminated message naming what
 *   went wrong (never written on success). err may be NULL.
 * - Nothing here aborts, exits or prints; diagnostics about the cubin cache
 *   and the JIT go to the optional log callback of fgl_load_options.
 * - Thread safety: loading modules is thread-safe; one graph instance
 *   (fgl_graph) must be used by one thread at a time, distinct instances of
 *   the same module may run concurrently.
 * - fgl_run never synchronizes. It allocates nothing, except that it grows
 *   a temp whose size depends on the graph's syms (stream-ordered, on the
 *   run's stream) when the bound sizes need more than the instance holds:
 *   call fgl_graph_reserve with the largest sizes first, and a run can be
 *   captured into a CUDA graph and replayed.
 * - Symbolic sizes (plan version 2): a graph's sizes may be formulas of
 *   named syms, bound at each run from the sizes of the tensors passed
 *   (docs/artifact.md, docs/loader.md). Where a size, stride or offset
 *   below depends on syms, the info structures hold -1 there.
 */
#ifndef FGLOAD_H
#define FGLOAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#if defined(__GNUC__)
#pragma GCC visibility push(default) /* the library is built with hidden visibility */
#endif

#define FGL_ABI_VERSION 3 /* bumped on any change to this header's ABI */
#define FGL_MAX_RANK 8

typedef enum fgl_status {
  FGL_OK = 0,
  FGL_ERR_INVALID_ARGUMENT, /* a NULL handle/pointer, an index out of range */
  FGL_ERR_NO_DRIVER,        /* libcuda.so.1 missing, or no CUDA device */
  FGL_ERR_CUDA,             /* a CUDA driver call failed (message names it) */
  FGL_ERR_IO,               /* reading the artifact file failed */
  FGL_ERR_PLAN,             /* the artifact is malformed (message gives the line) */
  FGL_ERR_UNSUPPORTED,      /* artifact targets a newer GPU than the device, or needs more
                             * resident CTAs (kernel-resident) than it holds */
  FGL_ERR_NOT_FOUND,        /* no graph of that name */
  FGL_ERR_MISMATCH,         /* fgl_run: an argument does not match the plan */
  FGL_ERR_NO_MEMORY         /* host allocation failed */
} fgl_status;

typedef struct fgl_error {
  fgl_status status;
  char msg[512];
} fgl_error;

const char *fgl_status_name(fgl_status s); /* "FGL_ERR_PLAN", ... */

/* Element types, in the order of the compiler's fg_dtype. */
typedef enum fgl_dtype {
  FGL_BOOL,
  FGL_I8,
  FGL_U8,
  FGL_I16,
  FGL_I32,
  FGL_I64,
  FGL_F16,
  FGL_BF16,
  FGL_F32,
  FGL_F64,
  FGL_F8E4M3,
  FGL_F8E5M2,
  /* MX formats */
  FGL_F8E8M0, /* OCP MX scale, one byte */
  FGL_F4E2M1, /* packed two a byte, the even element in the low nibble; sizes
                 and strides count elements, pointers address bytes */
  FGL_DTYPE_COUNT
} fgl_dtype;

const char *fgl_dtype_name(fgl_dtype t); /* "bf16"; "?" when out of range */
int fgl_dtype_size(fgl_dtype t);         /* bytes per element; 0 when out of range;
                                            f4e2m1: 1, the byte that holds two */
/* Bytes that n elements occupy: n * size, f4e2m1 (n + 1) / 2. */
long long fgl_dtype_bytes(fgl_dtype t, long long n);
int fgl_dtype_is_float(fgl_dtype t); /* f16 bf16 f32 f64 and the f8, MX types */

typedef unsigned long long fgl_devptr; /* a CUdeviceptr */
typedef void *fgl_stream;              /* a CUstream; NULL is the default stream */
typedef struct fgl_module fgl_module;
typedef struct fgl_graph fgl_graph;
typedef struct fgl_event fgl_event;

/* ---- Loading ----------------------------------------------------------- */

typedef enum fgl_log_level { FGL_LOG_DEBUG, FGL_LOG_INFO, FGL_LOG_WARN } fgl_log_level;
typedef void (*fgl_log_fn)(void *user, fgl_log_level level, const char *msg);

typedef struct fgl_load_options {
  fgl_log_fn log; /* NULL: no logging */
  void *log_user;
  const char *cache_dir; /* NULL: $FUSEC_CACHE_DIR, $XDG_CACHE_HOME/fusec, ~/.cache/fusec */
  int cache;             /* 1: use the cubin cache (unless FUSEC_CACHE=0); 0: never */
  int jit_opt_level;     /* ptxas optimization level 0..4 (default 4) */
} fgl_load_options;

void fgl_load_options_init(fgl_load_options *o); /* the defaults above */

/* Load an artifact. The module uses the calling thread's current CUDA context,
 * or, when there is none, retains the primary context of device 0 (released
 * by fgl_module_free). opts may be NULL (defaults). load_data copies data. */
fgl_status fgl_module_load_file(const char *path, const fgl_load_options *opts, fgl_module **out,
                                fgl_error *err);
fgl_status fgl_module_load_data(const void *data, size_t len, const fgl_load_options *opts,
                                fgl_module **out, fgl_error *err);
/* Frees the module; every graph instance created from it must be freed first. */
fgl_status fgl_module_free(fgl_module *m, fgl_error *err);

typedef struct fgl_load_stats {
  int cache_hit;   /* 1: the cubin came from the cache */
  double jit_ms;   /* time in the JIT (0 on a cache hit) */
  double total_ms; /* the whole load */
} fgl_load_stats;
fgl_status fgl_module_load_stats(const fgl_module *m, fgl_load_stats *out, fgl_error *err);

/* Where a module's GPU code came from: the PTX compiled by the driver's JIT
 * (then stored in the cache when it is on), the cubin cache, or the SASS
 * that `fusec --cubin` put into the artifact for this device (no JIT, no
 * cache; docs/artifact.md). */
typedef enum fgl_load_source { FGL_LOAD_JIT = 0, FGL_LOAD_CACHE, FGL_LOAD_SASS } fgl_load_source;
fgl_status fgl_module_load_source(const fgl_module *m, fgl_load_source *out, fgl_error *err);

typedef struct fgl_device_info {
  char name[256];
  int cc_major, cc_minor; /* compute capability */
  int driver_version;     /* e.g. 12040 */
} fgl_device_info;
fgl_status fgl_module_device_info(const fgl_module *m, fgl_device_info *out, fgl_error *err);

/* ---- Graphs ----------------------------------------------------------------- */

typedef struct fgl_graph_info {
  const char *name; /* valid while the module lives */
  int n_params, n_results, n_temps, n_kernels;
} fgl_graph_info;

fgl_status fgl_module_num_graphs(const fgl_module *m, int *out, fgl_error *err);
/* By index (0..num_graphs-1) or by name (FGL_ERR_NOT_FOUND when absent). */
fgl_status fgl_module_graph_at(const fgl_module *m, int index, fgl_graph_info *out, fgl_error *err);
fgl_status fgl_module_graph_info(const fgl_module *m, const char *name, fgl_graph_info *out,
                                 fgl_error *err);

typedef struct fgl_temp_info {
  size_t bytes; /* 0 when symbolic */
  size_t align; /* required alignment of the storage */
  int zero;     /* 1: must be zero before the first run (the loader zeroes it) */
  int symbolic; /* 1: the byte count depends on the graph's syms (fgl_graph_create
                 * allocates it lazily; fgl_run and fgl_graph_reserve grow it) */
} fgl_temp_info;
fgl_status fgl_module_temp_info(const fgl_module *m, const char *graph, int index,
                                fgl_temp_info *out, fgl_error *err);

/* Create a runnable instance of a graph, allocating its constant-size temps
 * (zeroed where the plan says so; symbolic ones are allocated by the first
 * run or fgl_graph_reserve that binds their size). */
fgl_status fgl_graph_create(fgl_module *m, const char *name, fgl_graph **out, fgl_error *err);
/* Same, with temp storage supplied by the caller: temps[i] for temp i, of at
 * least fgl_temp_info.bytes at fgl_temp_info.align; the caller keeps
 * ownership. Temps marked zero are zeroed here (synchronously). For a
 * symbolic temp pass 0: the loader allocates and grows it as for
 * fgl_graph_create (a non-zero pointer is refused: its size is unknown). */
fgl_status fgl_graph_create_with_temps(fgl_module *m, const char *name, const fgl_devptr *temps,
                                       int n_temps, fgl_graph **out, fgl_error *err);
/* Same, with the bytes usable at each temps[i] (at least fgl_temp_info.bytes
 * for a constant temp; any amount for a symbolic one). A run whose bound
 * sizes need more than a caller's symbolic temp holds is refused
 * (FGL_ERR_MISMATCH, naming the temp and the bytes needed): the loader never
 * allocates storage for a temp the caller supplied. bytes[i] 0 with
 * temps[i] 0 for a symbolic temp: the loader owns it. Zero temps are zeroed
 * here over bytes[i] (synchronously). */
fgl_status fgl_graph_create_with_temp_sizes(fgl_module *m, const char *name,
                                            const fgl_devptr *temps, const size_t *bytes,
                                            int n_temps, fgl_graph **out, fgl_error *err);
fgl_status fgl_graph_free(fgl_graph *g, fgl_error *err);

fgl_status fgl_graph_get_info(const fgl_graph *g, fgl_graph_info *out, fgl_error *err);

typedef struct fgl_param_info {
  const char *name;
  fgl_dtype dtype;
  int is_scalar;                 /* passed by value (fgl_arg_scalar) */
  int rank;                      /* 0 for scalars */
  int64_t sizes[FGL_MAX_RANK];   /* -1 where the size is a sym */
  int64_t strides[FGL_MAX_RANK]; /* in elements; -1 where a formula of syms */
  int sym[FGL_MAX_RANK];         /* dim d's size is sym sym[d] (fgl_graph_sym), or -1 */
} fgl_param_info;

typedef struct fgl_result_info {
  fgl_dtype dtype;
  int rank;
  int64_t sizes[FGL_MAX_RANK];   /* -1 where a formula of syms */
  int64_t strides[FGL_MAX_RANK]; /* -1 where a formula of syms */
  int is_view;                   /* 1: returned as a view, the caller supplies no storage */
  int base_is_param; /* views: base is parameter base_index (1) or result base_index (0) */
  int base_index;
  int64_t offset;        /* views: in elements from the base's address; -1 where symbolic */
  int sym[FGL_MAX_RANK]; /* dim d's size is exactly sym sym[d], or -1 */
  int symbolic;          /* 1: some size, stride or the offset depends on syms */
  int inplace_param;     /* plan version 3: >= 0: written into this parameter's storage (the caller
                          * supplies no storage; fgl_run fills the entry as for a view); else -1 */
} fgl_result_info;

fgl_status fgl_graph_param(const fgl_graph *g, int index, fgl_param_info *out, fgl_error *err);
fgl_status fgl_graph_result(const fgl_graph *g, int index, fgl_result_info *out, fgl_error *err);

/* The graph's syms: named sizes bound at each run (plan version 2). A
 * bound value v must satisfy min <= v <= max and v % div == 0. */
typedef struct fgl_sym_info {
  const char *name; /* valid while the module lives */
  int64_t min, max, div;
} fgl_sym_info;
fgl_status fgl_graph_num_syms(const fgl_graph *g, int *out, fgl_error *err);
fgl_status fgl_graph_sym(const fgl_graph *g, int index, fgl_sym_info *out, fgl_error *err);

/* ---- Running ---------------------------------------------------------------- */

typedef struct fgl_tensor {
  fgl_devptr ptr;
  fgl_dtype dtype;
  int rank;
  int64_t sizes[FGL_MAX_RANK];
  int64_t strides[FGL_MAX_RANK]; /* in elements */
} fgl_tensor;

/* Which field of a scalar fgl_arg holds its value. */
typedef enum fgl_value_kind {
  FGL_VALUE_BY_DTYPE = 0, /* f for float dtypes, i for the others (an fgl_arg filled by hand) */
  FGL_VALUE_FLOAT = 1,    /* f (fgl_arg_float) */
  FGL_VALUE_INT = 2,      /* i (fgl_arg_int) */
} fgl_value_kind;

typedef struct fgl_arg {
  int is_scalar;
  fgl_tensor tensor;      /* tensor parameters */
  fgl_dtype scalar_dtype; /* scalar parameters: must equal the parameter's dtype */
  double f;               /* the value, for float dtypes */
  int64_t i;              /* the value, for integer and bool dtypes */
  /* fgl_run converts an integer value for a float parameter (as C does),
   * and a float value for an integer parameter when it is a whole number
   * in range; any other float is refused (FGL_ERR_MISMATCH). */
  fgl_value_kind value_kind;
} fgl_arg;

/* Fill a tensor description of contiguous row-major storage. */
void fgl_tensor_contiguous(fgl_tensor *t, fgl_devptr ptr, fgl_dtype dtype, int rank,
                           const int64_t *sizes);
static inline fgl_arg fgl_arg_tensor(fgl_tensor t) {
  fgl_arg a = {0};
  a.tensor = t;
  return a;
}
static inline fgl_arg fgl_arg_float(fgl_dtype dtype, double v) {
  fgl_arg a = {0};
  a.is_scalar = 1;
  a.scalar_dtype = dtype;
  a.f = v;
  a.value_kind = FGL_VALUE_FLOAT;
  return a;
}
static inline fgl_arg fgl_arg_int(fgl_dtype dtype, int64_t v) {
  fgl_arg a = {0};
  a.is_scalar = 1;
  a.scalar_dtype = dtype;
  a.i = v;
  a.value_kind = FGL_VALUE_INT;
  return a;
}

/* A parameter's or a result's concrete shape for these inputs: binds the
 * syms from the tensor inputs' sizes (as fgl_run does; only their dtype,
 * rank and sizes are read, pointers may be 0) and fills *out with every
 * size, stride and offset evaluated (sym[] and symbolic as in
 * fgl_graph_param / fgl_graph_result). What a caller allocates outputs
 * with. FGL_ERR_MISMATCH when the inputs do not bind (fgl_run's message). */
fgl_status fgl_graph_param_shape(const fgl_graph *g, const fgl_arg *inputs, int n_inputs,
                                 int param_index, fgl_param_info *out, fgl_error *err);
fgl_status fgl_graph_result_shape(const fgl_graph *g, const fgl_arg *inputs, int n_inputs,
                                  int result_index, fgl_result_info *out, fgl_error *err);

/* Binds the syms from the inputs (as fgl_graph_result_shape) and grows the
 * instance's symbolic temps to what these sizes need, stream-ordered on
 * `stream` (never shrinks them, never synchronizes). Reserve the largest
 * sizes before capturing runs into a CUDA graph: a captured run then
 * allocates nothing. A no-op for a graph without symbolic temps. */
fgl_status fgl_graph_reserve(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_stream stream,
                             fgl_error *err);

/* Run graph g on stream. inputs[i] is parameter i. outputs[j] is result j:
 * for `written` results the caller fills ptr/dtype/rank/sizes/strides of its
 * storage, which must match the plan; for view results the loader fills
 * outputs[j] (a view of the caller's storage, nothing is launched for it).
 * Checked before anything is launched: counts, dtypes, ranks, sizes, strides
 * (ignored where a size is 1 or the tensor is empty), non-NULL pointers
 * aligned to the element size; with syms, first the binding (every dim of a
 * sym gives the same size, inside the sym's min..max, a multiple of its
 * div) and every formula evaluated without overflow. On a mismatch:
 * FGL_ERR_MISMATCH with a message naming the argument, and nothing
 * launched. Never synchronizes; allocates nothing but the growth of a
 * symbolic temp (see fgl_graph_reserve); only one thread may run a given
 * instance at a time. */
fgl_status fgl_run(fgl_graph *g, const fgl_arg *inputs, int n_inputs, fgl_tensor *outputs,
                   int n_outputs, fgl_stream stream, fgl_error *err);

/* ---- Device helpers (in the module's context) --------------------------- */

fgl_status fgl_malloc(fgl_module *m, size_t bytes, fgl_devptr *out, fgl_error *err);
fgl_status fgl_free(fgl_module *m, fgl_devptr p, fgl_error *err);
fgl_status fgl_memcpy_htod(fgl_module *m, fgl_devptr dst, const void *src, size_t bytes,
                           fgl_error *err);
fgl_status fgl_memcpy_dtoh(fgl_module *m, void *dst, fgl_devptr src, size_t bytes, fgl_error *err);
/* Device-to-device copy queued on a stream (the copy-bandwidth reference of benchmarks). */
fgl_status fgl_memcpy_dtod_async(fgl_module *m, fgl_devptr dst, fgl_devptr src, size_t bytes,
                                 fgl_stream stream, fgl_error *err);
fgl_status fgl_memset(fgl_module *m, fgl_devptr dst, unsigned char value, size_t bytes,
                      fgl_error *err);
fgl_status fgl_stream_sync(fgl_module *m, fgl_stream stream, fgl_error *err);

/* Device-event timing: record two events around work, then elapsed. */
fgl_status fgl_event_create(fgl_module *m, fgl_event **out, fgl_error *err);
fgl_status fgl_event_record(fgl_event *e, fgl_stream stream, fgl_error *err);
/* Waits for `end`, then gives the time between the two records in ms. */
fgl_status fgl_event_elapsed_ms(fgl_event *start, fgl_event *end, float *ms, fgl_error *err);
fgl_status fgl_event_destroy(fgl_event *e, fgl_error *err);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#ifdef __cplusplus
}
#endif
#endif
