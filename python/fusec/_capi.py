"""ctypes declarations of libfgload's public API (loader/fgload.h, ABI 3).

Everything here mirrors fgload.h exactly: enum values in the header's order,
structures with the same fields in the same order and with the same C types
(ctypes then lays them out as the C compiler does). python/tests/test_plan.py
checks the enums against the library and, where a C compiler is available,
every structure's size and field offsets against the header itself.
"""
import ctypes
import ctypes.util
import os

ABI_VERSION = 3  # FGL_ABI_VERSION
MAX_RANK = 8  # FGL_MAX_RANK

# enum fgl_status, in the header's order (FGL_OK = 0).
STATUS_NAMES = (
    "FGL_OK",
    "FGL_ERR_INVALID_ARGUMENT",
    "FGL_ERR_NO_DRIVER",
    "FGL_ERR_CUDA",
    "FGL_ERR_IO",
    "FGL_ERR_PLAN",
    "FGL_ERR_UNSUPPORTED",
    "FGL_ERR_NOT_FOUND",
    "FGL_ERR_MISMATCH",
    "FGL_ERR_NO_MEMORY",
)
(FGL_OK, FGL_ERR_INVALID_ARGUMENT, FGL_ERR_NO_DRIVER, FGL_ERR_CUDA, FGL_ERR_IO, FGL_ERR_PLAN,
 FGL_ERR_UNSUPPORTED, FGL_ERR_NOT_FOUND, FGL_ERR_MISMATCH, FGL_ERR_NO_MEMORY) = range(len(STATUS_NAMES))

# enum fgl_dtype (the compiler's fg_dtype order): (name, bytes, is_float).
DTYPES = (
    ("bool", 1, False),
    ("i8", 1, False),
    ("u8", 1, False),
    ("i16", 2, False),
    ("i32", 4, False),
    ("i64", 8, False),
    ("f16", 2, True),
    ("bf16", 2, True),
    ("f32", 4, True),
    ("f64", 8, True),
    ("f8e4m3", 1, True),
    ("f8e5m2", 1, True),
    ("f8e8m0", 1, True),
    ("f4e2m1", 1, True),  # packed two a byte: fgl_dtype_bytes, not size * numel
)
DTYPE_NAMES = tuple(d[0] for d in DTYPES)
DTYPE_COUNT = len(DTYPES)  # FGL_DTYPE_COUNT
DTYPE_INDEX = {name: i for i, name in enumerate(DTYPE_NAMES)}
(FGL_BOOL, FGL_I8, FGL_U8, FGL_I16, FGL_I32, FGL_I64, FGL_F16, FGL_BF16, FGL_F32, FGL_F64,
 FGL_F8E4M3, FGL_F8E5M2, FGL_F8E8M0, FGL_F4E2M1) = range(DTYPE_COUNT)

# enum fgl_log_level
FGL_LOG_DEBUG, FGL_LOG_INFO, FGL_LOG_WARN = range(3)

# C enums are ints (4 bytes) on every ABI the loader targets.
c_enum = ctypes.c_int
fgl_devptr = ctypes.c_ulonglong  # typedef unsigned long long fgl_devptr
fgl_stream = ctypes.c_void_p  # typedef void *fgl_stream
Sizes = ctypes.c_int64 * MAX_RANK
Syms = ctypes.c_int * MAX_RANK


class fgl_error(ctypes.Structure):
    _fields_ = [("status", c_enum), ("msg", ctypes.c_char * 512)]


# typedef void (*fgl_log_fn)(void *user, fgl_log_level level, const char *msg);
fgl_log_fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_enum, ctypes.c_char_p)


class fgl_load_options(ctypes.Structure):
    _fields_ = [
        ("log", fgl_log_fn),
        ("log_user", ctypes.c_void_p),
        ("cache_dir", ctypes.c_char_p),
        ("cache", ctypes.c_int),
        ("jit_opt_level", ctypes.c_int),
    ]


class fgl_load_stats(ctypes.Structure):
    _fields_ = [("cache_hit", ctypes.c_int), ("jit_ms", ctypes.c_double), ("total_ms", ctypes.c_double)]


class fgl_device_info(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("cc_major", ctypes.c_int),
        ("cc_minor", ctypes.c_int),
        ("driver_version", ctypes.c_int),
    ]


class fgl_graph_info(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("n_params", ctypes.c_int),
        ("n_results", ctypes.c_int),
        ("n_temps", ctypes.c_int),
        ("n_kernels", ctypes.c_int),
    ]


class fgl_temp_info(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_size_t), ("align", ctypes.c_size_t), ("zero", ctypes.c_int),
                ("symbolic", ctypes.c_int)]


class fgl_param_info(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", c_enum),
        ("is_scalar", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("sizes", Sizes),
        ("strides", Sizes),
        ("sym", Syms),
    ]


class fgl_result_info(ctypes.Structure):
    _fields_ = [
        ("dtype", c_enum),
        ("rank", ctypes.c_int),
        ("sizes", Sizes),
        ("strides", Sizes),
        ("is_view", ctypes.c_int),
        ("base_is_param", ctypes.c_int),
        ("base_index", ctypes.c_int),
        ("offset", ctypes.c_int64),
        ("sym", Syms),
        ("symbolic", ctypes.c_int),
        ("inplace_param", ctypes.c_int),  # plan version 3: >= 0: written into this parameter's storage
    ]


class fgl_sym_info(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("min", ctypes.c_int64),
        ("max", ctypes.c_int64),
        ("div", ctypes.c_int64),
    ]


class fgl_tensor(ctypes.Structure):
    _fields_ = [
        ("ptr", fgl_devptr),
        ("dtype", c_enum),
        ("rank", ctypes.c_int),
        ("sizes", Sizes),
        ("strides", Sizes),
    ]


class fgl_arg(ctypes.Structure):
    _fields_ = [
        ("is_scalar", ctypes.c_int),
        ("tensor", fgl_tensor),
        ("scalar_dtype", c_enum),
        ("f", ctypes.c_double),
        ("i", ctypes.c_int64),
        ("value_kind", c_enum),
    ]


# The structures, by their C name (for the layout test).
STRUCTS = {
    "fgl_error": fgl_error,
    "fgl_load_options": fgl_load_options,
    "fgl_load_stats": fgl_load_stats,
    "fgl_device_info": fgl_device_info,
    "fgl_graph_info": fgl_graph_info,
    "fgl_temp_info": fgl_temp_info,
    "fgl_param_info": fgl_param_info,
    "fgl_result_info": fgl_result_info,
    "fgl_sym_info": fgl_sym_info,
    "fgl_tensor": fgl_tensor,
    "fgl_arg": fgl_arg,
}

_P = ctypes.POINTER
_vp = ctypes.c_void_p
_E = _P(fgl_error)
_st = c_enum

# name: (restype, argtypes). Every fgl_ function of fgload.h that is exported
# (fgl_arg_tensor/_float/_int are static inline in the header: see
# fusec/__init__.py for their Python equivalents).
PROTOTYPES = {
    "fgl_status_name": (ctypes.c_char_p, [_st]),
    "fgl_dtype_name": (ctypes.c_char_p, [c_enum]),
    "fgl_dtype_size": (ctypes.c_int, [c_enum]),
    "fgl_dtype_is_float": (ctypes.c_int, [c_enum]),
    "fgl_load_options_init": (None, [_P(fgl_load_options)]),
    "fgl_module_load_file": (_st, [ctypes.c_char_p, _P(fgl_load_options), _P(_vp), _E]),
    "fgl_module_load_data": (_st, [ctypes.c_void_p, ctypes.c_size_t, _P(fgl_load_options), _P(_vp), _E]),
    "fgl_module_free": (_st, [_vp, _E]),
    "fgl_module_load_stats": (_st, [_vp, _P(fgl_load_stats), _E]),
    "fgl_module_load_source": (_st, [_vp, _P(c_enum), _E]),
    "fgl_module_device_info": (_st, [_vp, _P(fgl_device_info), _E]),
    "fgl_module_num_graphs": (_st, [_vp, _P(ctypes.c_int), _E]),
    "fgl_module_graph_at": (_st, [_vp, ctypes.c_int, _P(fgl_graph_info), _E]),
    "fgl_module_graph_info": (_st, [_vp, ctypes.c_char_p, _P(fgl_graph_info), _E]),
    "fgl_module_temp_info": (_st, [_vp, ctypes.c_char_p, ctypes.c_int, _P(fgl_temp_info), _E]),
    "fgl_graph_create": (_st, [_vp, ctypes.c_char_p, _P(_vp), _E]),
    "fgl_graph_create_with_temps": (_st, [_vp, ctypes.c_char_p, _P(fgl_devptr), ctypes.c_int, _P(_vp), _E]),
    "fgl_graph_free": (_st, [_vp, _E]),
    "fgl_graph_get_info": (_st, [_vp, _P(fgl_graph_info), _E]),
    "fgl_graph_param": (_st, [_vp, ctypes.c_int, _P(fgl_param_info), _E]),
    "fgl_graph_result": (_st, [_vp, ctypes.c_int, _P(fgl_result_info), _E]),
    "fgl_graph_num_syms": (_st, [_vp, _P(ctypes.c_int), _E]),
    "fgl_graph_sym": (_st, [_vp, ctypes.c_int, _P(fgl_sym_info), _E]),
    "fgl_graph_param_shape": (_st, [_vp, _P(fgl_arg), ctypes.c_int, ctypes.c_int, _P(fgl_param_info), _E]),
    "fgl_graph_result_shape": (_st, [_vp, _P(fgl_arg), ctypes.c_int, ctypes.c_int, _P(fgl_result_info), _E]),
    "fgl_graph_reserve": (_st, [_vp, _P(fgl_arg), ctypes.c_int, fgl_stream, _E]),
    "fgl_graph_create_with_temp_sizes": (_st, [_vp, ctypes.c_char_p, _P(fgl_devptr), _P(ctypes.c_size_t),
                                               ctypes.c_int, _P(_vp), _E]),
    "fgl_tensor_contiguous": (None, [_P(fgl_tensor), fgl_devptr, c_enum, ctypes.c_int, _P(ctypes.c_int64)]),
    "fgl_run": (_st, [_vp, _P(fgl_arg), ctypes.c_int, _P(fgl_tensor), ctypes.c_int, fgl_stream, _E]),
    "fgl_malloc": (_st, [_vp, ctypes.c_size_t, _P(fgl_devptr), _E]),
    "fgl_free": (_st, [_vp, fgl_devptr, _E]),
    "fgl_memcpy_htod": (_st, [_vp, fgl_devptr, ctypes.c_void_p, ctypes.c_size_t, _E]),
    "fgl_memcpy_dtoh": (_st, [_vp, ctypes.c_void_p, fgl_devptr, ctypes.c_size_t, _E]),
    "fgl_memcpy_dtod_async": (_st, [_vp, fgl_devptr, fgl_devptr, ctypes.c_size_t, fgl_stream, _E]),
    "fgl_memset": (_st, [_vp, fgl_devptr, ctypes.c_ubyte, ctypes.c_size_t, _E]),
    "fgl_stream_sync": (_st, [_vp, fgl_stream, _E]),
    "fgl_event_create": (_st, [_vp, _P(_vp), _E]),
    "fgl_event_record": (_st, [_vp, fgl_stream, _E]),
    "fgl_event_elapsed_ms": (_st, [_vp, _vp, _P(ctypes.c_float), _E]),
    "fgl_event_destroy": (_st, [_vp, _E]),
}

LIBRARY_NAMES = ("libfgload.so", "libfgload.so.1")


def candidate_paths(lib=None):
    """Where fusec looks for libfgload, in order: the `lib` argument,
    $FGLOAD_LIBRARY, next to this package, then the system's search path."""
    if lib:
        return [("argument", os.fspath(lib))]
    env = os.environ.get("FGLOAD_LIBRARY")
    if env:
        return [("$FGLOAD_LIBRARY", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [("next to the package", os.path.join(here, n)) for n in LIBRARY_NAMES]
    out = [c for c in out if os.path.exists(c[1])]
    found = ctypes.util.find_library("fgload")
    if found:
        out.append(("system", found))
    out += [("system", n) for n in LIBRARY_NAMES]
    return out


def open_library(lib=None):
    """Opens libfgload and declares every prototype. Returns (CDLL, path).
    Raises OSError naming every place tried."""
    tried = []
    for where, path in candidate_paths(lib):
        try:
            dll = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
            continue
        missing = [n for n in PROTOTYPES if not hasattr(dll, n)]
        if missing:
            tried.append("%s (%s): not libfgload ABI %d: lacks %s" % (path, where, ABI_VERSION, ", ".join(missing)))
            continue
        for name, (res, args) in PROTOTYPES.items():
            fn = getattr(dll, name)
            fn.restype = res
            fn.argtypes = args
        return dll, path
    raise OSError("fusec: libfgload not found; tried:\n  " + "\n  ".join(tried) +
                  "\nBuild it (cmake -S . -B build -DFUSEC_LOADER_ONLY=ON && cmake --build build) and pass "
                  "lib=PATH or set FGLOAD_LIBRARY=PATH/libfgload.so")
