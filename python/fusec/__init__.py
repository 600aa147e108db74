"""fusec: run fusec artifacts from Python on PyTorch CUDA tensors.

A binding of libfgload (loader/fgload.h): ctypes for loading and
introspection; calls go through the C extension fusec._fgcall (the fast
path, a few microseconds a call; docs/python.md) when it is built, and
through ctypes otherwise, with the same results and errors.

    import fusec, torch
    m = fusec.load("model.ptx")            # JIT through the driver, cubin cache on disk
    print(m.graphs())                      # ['layer_norm', ...]
    g = m.graph("layer_norm")              # one instance per thread
    y, mean, rstd = g(x, w, b)             # CUDA tensors in, tensors out

A call checks every argument against the launch plan (dtype, shape, strides,
device; the loader's own checks and messages), passes data pointers and
strides, runs on torch.cuda.current_stream() (or `stream=`), allocates the
written results with torch, and returns results that the plan describes as
views (of an input or of another result) as torch views sharing that storage.
A result written in place into a parameter (`return v -> p`, docs/format.md
6.1; plan version 3) gets no storage: the kernels update the tensor passed
for p, which is returned, the same object, as that result (its autograd
version counter bumped, as PyTorch's own in-place ops do).
One result is returned as a tensor, several as a tuple. Scalar parameters
are Python numbers. Any error raises FusecError with the loader's message.

Graphs with symbolic sizes (plan version 2: one artifact for every batch
and sequence length) are called the same way: the sizes come from the
tensors passed, and the results are allocated with the shapes the loader
computes for them (fgl_graph_result_shape, cached per input shapes). In
ParamInfo/ResultInfo such a dim reads as the sym's name ('T'), a size or
stride that is a formula as None; Graph.syms lists the syms.

The library is found, in order: load(..., lib=PATH), $FGLOAD_LIBRARY, a
libfgload.so next to this package, the system's library path. The
extension: $FUSEC_FGCALL (a path to _fgcall*.so; "0" turns the fast path
off), else next to this package; FAST_CALLS says which one was loaded.

fusec.register(module_or_path, graph) makes a graph a PyTorch custom op
(torch.library), with a fake implementation for torch.compile.
"""
import contextlib
import ctypes
import logging
import numbers
import os
import threading
import weakref
from collections import namedtuple

from . import _capi

__all__ = [
    "load", "library", "Module", "Graph", "FusecError", "ParamInfo", "ResultInfo", "GraphInfo", "SymInfo",
    "DTYPE_NAMES", "dtype_size", "torch_dtype", "torch_layout", "register", "FAST_CALLS",
]
__version__ = "0.1.0"

DTYPE_NAMES = _capi.DTYPE_NAMES
_log = logging.getLogger("fusec")


class FusecError(RuntimeError):
    """A libfgload failure. `status` is the fgl_status name ("FGL_ERR_MISMATCH",
    ...), `code` its value; str() is the loader's one-line message."""

    def __init__(self, code, msg):
        self.code = int(code)
        self.status = _capi.STATUS_NAMES[code] if 0 <= code < len(_capi.STATUS_NAMES) else "FGL_ERR_%d" % code
        self.msg = msg
        super().__init__(msg)

    def __str__(self):
        return "%s: %s" % (self.status, self.msg)


ParamInfo = namedtuple("ParamInfo", "index name dtype is_scalar shape strides")
ResultInfo = namedtuple("ResultInfo", "index dtype shape strides is_view base offset inplace", defaults=(None,))
ResultInfo.__doc__ = ("A graph result. For views (is_view), base is ('param', J) or ('result', J) and "
                      "offset is in elements from the base's address; otherwise base is None. inplace: "
                      "J when the result is written into parameter J's storage (plan version 3), else None.")
GraphInfo = namedtuple("GraphInfo", "name n_params n_results n_temps n_kernels")
SymInfo = namedtuple("SymInfo", "index name min max div")
SymInfo.__doc__ = "A sym of a graph: a size bound at each call, min <= value <= max, a multiple of div."

# ---- the library -----------------------------------------------------------

_libs = {}
_libs_lock = threading.Lock()


def library(lib=None):
    """(ctypes.CDLL, path) of libfgload, opened once per path (see the module doc)."""
    key = os.fspath(lib) if lib else os.environ.get("FGLOAD_LIBRARY") or ""
    with _libs_lock:
        if key not in _libs:
            _libs[key] = _capi.open_library(lib)
        return _libs[key]


def _check(st, err):
    if st != _capi.FGL_OK:
        raise FusecError(st, err.msg.decode("utf-8", "replace"))


def _load_fgcall():
    """The fast-call extension (module, path), or (None, reason)."""
    import importlib.machinery
    import importlib.util

    env = os.environ.get("FUSEC_FGCALL")
    if env == "0":
        return None, "$FUSEC_FGCALL=0"
    if env:
        paths = [env]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        paths = [os.path.join(here, n) for n in sorted(os.listdir(here))
                 if n.startswith("_fgcall") and n.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
        if not paths:
            return None, "no _fgcall extension next to the package"
    try:
        spec = importlib.util.spec_from_file_location(__name__ + "._fgcall", paths[0])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except (ImportError, OSError) as e:
        return None, "%s: %s" % (paths[0], e)
    if mod.ABI_VERSION != _capi.ABI_VERSION or mod.MAX_RANK != _capi.MAX_RANK:
        return None, "%s: built for loader ABI %d, the binding is ABI %d" % (paths[0], mod.ABI_VERSION,
                                                                          _capi.ABI_VERSION)
    return mod, paths[0]


_fgcall, _fgcall_where = _load_fgcall()
if _fgcall is None:
    _log.debug("fusec: calls go through ctypes (%s)", _fgcall_where)
# The path of the fast-call extension in use, or None (calls go through ctypes).
FAST_CALLS = _fgcall_where if _fgcall is not None else None


def dtype_size(name, lib=None):
    """Bytes per element of a fusec dtype name, as the library says."""
    dll, _ = library(lib)
    return dll.fgl_dtype_size(_capi.DTYPE_INDEX[name])


# ---- torch (imported lazily: the package itself does not need it) ----------

_torch_mod = None
_fgl_of_torch = None
_torch_of_fgl = None

# For the CPU tests only (fake driver, where "device memory" is host memory):
# accept CPU tensors, allocate results on the CPU and run on stream 0.
_HOST_TENSORS_FOR_TESTS = False


def _torch():
    global _torch_mod, _fgl_of_torch, _torch_of_fgl
    if _torch_mod is None:
        import torch

        names = {
            "bool": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
            "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "f64": torch.float64, "f8e4m3": getattr(torch, "float8_e4m3fn", None),
            "f8e5m2": getattr(torch, "float8_e5m2", None),
            "f8e8m0": getattr(torch, "float8_e8m0fnu", None),
            # two elements a byte: the tensor's last dim is half fusec's (_packed)
            "f4e2m1": getattr(torch, "float4_e2m1fn_x2", None),
        }
        _torch_of_fgl = tuple(names[n] for n in _capi.DTYPE_NAMES)
        _fgl_of_torch = {t: i for i, t in enumerate(_torch_of_fgl) if t is not None}
        _torch_mod = torch
    return _torch_mod


def torch_dtype(name):
    """The torch dtype of a fusec dtype name (f8e4m3 is torch.float8_e4m3fn,
    f4e2m1 torch.float4_e2m1fn_x2: see torch_layout)."""
    _torch()
    return _torch_of_fgl[_capi.DTYPE_INDEX[name]]


_F4 = _capi.DTYPE_INDEX["f4e2m1"]


def _packed(shape, strides, offset=0):
    """An f4e2m1 tensor's element sizes, strides and offset (fusec's, in
    elements) as torch.float4_e2m1fn_x2's, which holds two elements a byte
    along the last dim (element 2k in the low nibble of byte k, as fusec
    stores them): the last size halved, the other strides and the offset
    halved. None where that is no float4_e2m1fn_x2 layout: an odd last
    size, a last dim of stride other than 1, an odd stride or offset."""
    if not shape:
        return None
    last, step = shape[-1], strides[-1]
    if not isinstance(last, int) or last % 2 or (step != 1 and last > 1) or offset % 2:
        return None
    if any(not isinstance(st, int) or st % 2 for st, sz in zip(strides[:-1], shape[:-1]) if sz != 1):
        return None
    return (tuple(shape[:-1]) + (last // 2,), tuple(st // 2 for st in strides[:-1]) + (1,), offset // 2)


def _unpacked(shape, strides):
    """A float4_e2m1fn_x2 tensor's sizes and strides as fusec's element
    sizes and strides (the inverse of _packed), None where its last dim
    is not of stride 1."""
    if not shape or (strides[-1] != 1 and shape[-1] > 1):
        return None
    return tuple(shape[:-1]) + (2 * shape[-1],), tuple(2 * st for st in strides[:-1]) + (1,)


def torch_layout(name, shape, strides):
    """(sizes, strides) of the torch tensor that holds a fusec tensor of
    dtype name with these element sizes and strides: the same, except for
    f4e2m1 (torch.float4_e2m1fn_x2: the last dim halved, see _packed);
    FusecError where f4e2m1's cannot be."""
    if _capi.DTYPE_INDEX[name] != _F4:
        return tuple(shape), tuple(strides)
    p = _packed(tuple(shape), tuple(strides))
    if p is None:
        raise FusecError(_capi.FGL_ERR_UNSUPPORTED, _F4_LAYOUT % (list(shape), list(strides)))
    return p[0], p[1]


_F4_LAYOUT = ("f4e2m1 %s strides %s: torch.float4_e2m1fn_x2 packs two elements a byte along the last "
              "dim, which must be even and of stride 1 (the other strides even)")


# ---- modules ----------------------------------------------------------------


def load(path, lib=None, *, device=None, cache=True, cache_dir=None, jit_opt_level=4):
    """Loads a fusec artifact (.ptx with its launch plan) and returns a Module.

    device: the CUDA device to load on (torch.device, "cuda:1" or an index;
    default torch.cuda.current_device()); its primary context, the one
    PyTorch uses, is made current for the load. cache / cache_dir /
    jit_opt_level are fgl_load_options (cubin cache on, $FUSEC_CACHE_DIR or
    ~/.cache/fusec, ptxas -O4)."""
    return Module(path, lib=lib, device=device, cache=cache, cache_dir=cache_dir, jit_opt_level=jit_opt_level)


def _on_log(user, level, msg):
    text = msg.decode("utf-8", "replace") if msg else ""
    _log.log({_capi.FGL_LOG_DEBUG: logging.DEBUG, _capi.FGL_LOG_INFO: logging.INFO}.get(level, logging.WARNING),
             "%s", text)


class Module:
    """A loaded artifact. Free it with close() (or let it be collected)."""

    def __init__(self, path, lib=None, *, device=None, cache=True, cache_dir=None, jit_opt_level=4):
        self._dll, self.library_path = library(lib)
        self.path = os.fspath(path)
        self._h = None
        # Cleared when the module is closed: the fast call path reads it.
        self._open = bytearray(b"\x00")
        # Graph instances are freed before the module, whatever order the
        # garbage collector finalizes the Python objects in (at exit, weak
        # references are cleared first): the module owns their handles.
        self._graph_handles = set()
        self._graphs = weakref.WeakSet()
        self._handles_lock = threading.Lock()
        self._log_cb = _capi.fgl_log_fn(_on_log)  # kept alive as long as the module
        opts = _capi.fgl_load_options()
        self._dll.fgl_load_options_init(ctypes.byref(opts))
        opts.log = self._log_cb
        opts.cache = 1 if cache else 0
        opts.jit_opt_level = int(jit_opt_level)
        if cache_dir is not None:
            self._cache_dir = os.fsencode(cache_dir)
            opts.cache_dir = self._cache_dir
        self.device = None  # torch.device the tensors must be on
        self._dev_index = 0
        h = ctypes.c_void_p()
        err = _capi.fgl_error()
        ctx = self._device_context(device)
        with ctx:
            st = self._dll.fgl_module_load_file(os.fsencode(self.path), ctypes.byref(opts), ctypes.byref(h),
                                                ctypes.byref(err))
        _check(st, err)
        self._h = h
        self._open[0] = 1

    def _device_context(self, device):
        """Makes torch's primary context of the device current for the load
        (the loader adopts the current context). Without torch/CUDA: nothing,
        and the loader picks (or fails to find) a driver itself."""
        if _HOST_TENSORS_FOR_TESTS:
            torch = _torch()
            self.device, self._dev_index = torch.device("cpu"), -1
            return contextlib.nullcontext()
        try:
            torch = _torch()
        except ImportError:
            return contextlib.nullcontext()
        if not torch.cuda.is_available():
            return contextlib.nullcontext()
        if device is None:
            idx = torch.cuda.current_device()
        elif isinstance(device, int):
            idx = device
        else:
            d = torch.device(device)
            if d.type != "cuda":
                raise ValueError("fusec.load: device must be a CUDA device, got %s" % d)
            idx = d.index if d.index is not None else torch.cuda.current_device()
        self.device, self._dev_index = torch.device("cuda", idx), idx

        @contextlib.contextmanager
        def ctx():
            with torch.cuda.device(idx):
                torch.cuda.synchronize(idx)  # creates the primary context and makes it current
                yield

        return ctx()

    def _handle(self):
        if not self._h:
            raise FusecError(_capi.FGL_ERR_INVALID_ARGUMENT, "module %s is closed" % self.path)
        return self._h

    def _call(self, fn, *args):
        err = _capi.fgl_error()
        _check(getattr(self._dll, fn)(self._handle(), *args, ctypes.byref(err)), err)

    def graphs(self):
        """Names of the artifact's graphs, in file order."""
        n = ctypes.c_int()
        self._call("fgl_module_num_graphs", ctypes.byref(n))
        out = []
        for i in range(n.value):
            gi = _capi.fgl_graph_info()
            self._call("fgl_module_graph_at", i, ctypes.byref(gi))
            out.append(gi.name.decode())
        return out

    def info(self, name):
        """GraphInfo(name, n_params, n_results, n_temps, n_kernels); FusecError
        (FGL_ERR_NOT_FOUND) when there is no such graph."""
        gi = _capi.fgl_graph_info()
        self._call("fgl_module_graph_info", name.encode(), ctypes.byref(gi))
        return GraphInfo(gi.name.decode(), gi.n_params, gi.n_results, gi.n_temps, gi.n_kernels)

    def graph(self, name):
        """A new runnable instance of a graph (owns its temps). An instance is
        used by one thread at a time; make one per thread."""
        return Graph(self, name)

    def __getitem__(self, name):
        return self.graph(name)

    def load_stats(self):
        s = _capi.fgl_load_stats()
        self._call("fgl_module_load_stats", ctypes.byref(s))
        return {"cache_hit": bool(s.cache_hit), "jit_ms": s.jit_ms, "total_ms": s.total_ms}

    def device_info(self):
        d = _capi.fgl_device_info()
        self._call("fgl_module_device_info", ctypes.byref(d))
        return {"name": d.name.decode("utf-8", "replace"), "cc": (d.cc_major, d.cc_minor),
                "driver_version": d.driver_version}

    def close(self):
        """Frees every graph instance of this module, then the module."""
        for g in list(self._graphs):
            g.close()
        with self._handles_lock:
            handles, self._graph_handles = self._graph_handles, set()
        for h in handles:
            self._dll.fgl_graph_free(ctypes.c_void_p(h), None)
        if self._h:
            self._open[0] = 0
            h, self._h = self._h, None
            self._dll.fgl_module_free(h, None)

    def _release_graph(self, h):
        with self._handles_lock:
            if h.value not in self._graph_handles:
                return  # freed with the module already
            self._graph_handles.discard(h.value)
        self._dll.fgl_graph_free(h, None)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<fusec.Module %s%s>" % (self.path, "" if self._h else " (closed)")


# ---- graphs -------------------------------------------------------------------


def _tuple(arr, rank):
    return tuple(int(arr[k]) for k in range(rank))


def _dims(arr, syms, rank, names):
    """Sizes (or strides) as the plan gives them: an int, the sym's name
    where the size is a sym, None where it is a formula."""
    out = []
    for k in range(rank):
        v = int(arr[k])
        if v >= 0:
            out.append(v)
        elif syms is not None and syms[k] >= 0:
            out.append(names[syms[k]])
        else:
            out.append(None)
    return tuple(out)


class Graph(_fgcall.GraphBase if _fgcall is not None else object):
    """A runnable instance of one graph of a Module (see Module.graph).

    Calling it runs the graph (see __call__). With the fast-call extension,
    the call is the extension's (fusec._fgcall.GraphBase); _call_ctypes is
    the same call through ctypes, which the extension hands anything it
    does not handle itself, so the errors are the same either way."""

    def __init__(self, module, name):
        self.module = module
        self._dll = module._dll
        self._dev_index = module._dev_index
        self._dev = module.device if module.device is not None else "cuda:%d" % module._dev_index
        self._h = None
        h = ctypes.c_void_p()
        err = _capi.fgl_error()
        _check(self._dll.fgl_graph_create(module._handle(), name.encode(), ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h
        with module._handles_lock:
            module._graph_handles.add(h.value)
        module._graphs.add(self)
        gi = _capi.fgl_graph_info()
        self._call("fgl_graph_get_info", ctypes.byref(gi))
        self.name = gi.name.decode()
        self.n_kernels, self.n_temps = gi.n_kernels, gi.n_temps
        n_syms = ctypes.c_int()
        self._call("fgl_graph_num_syms", ctypes.byref(n_syms))
        syms = []
        for s in range(n_syms.value):
            si = _capi.fgl_sym_info()
            self._call("fgl_graph_sym", s, ctypes.byref(si))
            syms.append(SymInfo(s, si.name.decode(), int(si.min), int(si.max), int(si.div)))
        self.syms = tuple(syms)
        names = [s.name for s in syms]
        params, results = [], []
        for i in range(gi.n_params):
            p = _capi.fgl_param_info()
            self._call("fgl_graph_param", i, ctypes.byref(p))
            params.append(ParamInfo(i, p.name.decode(), _capi.DTYPE_NAMES[p.dtype], bool(p.is_scalar),
                                    _dims(p.sizes, p.sym, p.rank, names), _dims(p.strides, None, p.rank, names)))
        for j in range(gi.n_results):
            r = _capi.fgl_result_info()
            self._call("fgl_graph_result", j, ctypes.byref(r))
            base = None
            if r.is_view:
                base = ("param" if r.base_is_param else "result", r.base_index)
            offset = 0
            if r.is_view:
                offset = int(r.offset) if r.offset >= 0 else None
            results.append(ResultInfo(j, _capi.DTYPE_NAMES[r.dtype], _dims(r.sizes, r.sym, r.rank, names),
                                      _dims(r.strides, None, r.rank, names), bool(r.is_view), base, offset,
                                      int(r.inplace_param) if r.inplace_param >= 0 else None))
        self.params = tuple(params)
        self.results = tuple(results)
        # f4e2m1 (two elements a byte) is torch.float4_e2m1fn_x2, whose last
        # dim is half fusec's (_packed): a graph whose f4e2m1 tensors have no
        # such layout (an odd last dim) is refused here, before anything is
        # allocated as another shape (run Y5: an [8192, 8192] float32 result
        # for NVFP4's packed bytes). Its calls go through ctypes (_set_tensor
        # and the allocations convert the shapes; the fast path does not).
        self._has_f4 = False
        for what, infos in (("parameter", params), ("result", results)):
            for x in infos:
                if x.dtype != "f4e2m1" or getattr(x, "is_scalar", False):
                    continue
                self._has_f4 = True
                why = None
                try:
                    _torch()
                    have = _torch_of_fgl[_F4] is not None
                except ImportError:
                    have = True  # no torch, no calls: the graph's description stays readable
                static = all(isinstance(v, int) for v in x.shape + x.strides)
                if not have:
                    why = "this torch has no float4_e2m1fn_x2"
                elif static and not getattr(x, "is_view", False) and _packed(x.shape, x.strides) is None:
                    why = _F4_LAYOUT % (list(x.shape), list(x.strides))
                if why:
                    h, self._h = self._h, None
                    module._release_graph(h)
                    raise FusecError(_capi.FGL_ERR_UNSUPPORTED,
                                     "graph '%s': %s %d ('%s'): %s" % (name, what, x.index,
                                                                      getattr(x, "name", x.dtype), why))
        # Symbolic graphs: the results' shapes per input shapes (written
        # results, views), from fgl_graph_result_shape.
        self.symbolic = bool(syms)
        self._shape_cache = {}
        self._lock = _fgcall.Lock() if _fgcall is not None else threading.Lock()
        self._err = _capi.fgl_error()
        self._err_ref = ctypes.byref(self._err)
        # Argument arrays reused by every call (the loader only reads inputs;
        # it fills the view entries of outputs).
        self._ins = (_capi.fgl_arg * max(1, len(params)))()
        self._in_shape = [None] * len(params)  # (shape, strides) last written into _ins[i]
        self._outs = (_capi.fgl_tensor * max(1, len(results)))()
        self._written = []  # (index, shape, strides, fgl dtype) of the results the caller allocates
        self._views = []  # (index, base is param, base index, shape, strides, offset)
        # (index, parameter index) of the results written in place: no storage
        self._inplace = tuple((r.index, r.inplace) for r in results if r.inplace is not None)
        for r in ([] if self.symbolic else results):
            t = self._outs[r.index]
            if r.inplace is not None:
                continue
            if r.is_view:
                self._views.append((r.index, r.base[0] == "param", r.base[1], r.shape, r.strides, r.offset))
                continue
            t.dtype = _capi.DTYPE_INDEX[r.dtype]
            t.rank = len(r.shape)
            for k, (s, st) in enumerate(zip(r.shape, r.strides)):
                t.sizes[k], t.strides[k] = s, st
            self._written.append((r.index, r.shape, r.strides, t.dtype))
        self._setup_fast()

    def _setup_fast(self):
        """Binds the extension's call to this instance (needs torch; not for
        f4e2m1 tensors, whose shapes the ctypes path converts)."""
        if _fgcall is None or self._has_f4:
            return
        try:
            torch = _torch()
        except ImportError:
            return
        dll = self._dll

        def addr(fn):
            return ctypes.cast(getattr(dll, fn), ctypes.c_void_p).value

        if self._dev_index < 0:
            stream_fn = None
        else:
            stream_fn = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
                (lambda idx: torch.cuda.current_stream(idx).cuda_stream)
        _fgcall.set_tensor_type(torch.Tensor, torch.nn.Parameter)
        _fgcall.set_increment_version(torch._C._increment_version)
        self._fg_setup(self._h.value, (addr("fgl_run"), addr("fgl_graph_result_shape"), addr("fgl_graph_param"),
                                       addr("fgl_graph_result")), len(self.params), len(self.results),
                       self.module._open, self._lock, _torch_of_fgl, torch.empty_strided, stream_fn,
                       self._dev_index, torch.device(self._dev), FusecError)

    def _call(self, fn, *args):
        if not self._h or not self.module._h:
            raise FusecError(_capi.FGL_ERR_INVALID_ARGUMENT, "graph instance is closed")
        err = _capi.fgl_error()
        _check(getattr(self._dll, fn)(self._h, *args, ctypes.byref(err)), err)

    def __repr__(self):
        sig = ", ".join("%s: %s%s" % (p.name, p.dtype, "" if p.is_scalar else
                                      "[%s]" % ", ".join("?" if s is None else str(s) for s in p.shape))
                        for p in self.params)
        return "<fusec.Graph %s(%s) -> %d results, %d kernels>" % (self.name, sig, len(self.results), self.n_kernels)

    def close(self):
        if self._h:
            if _fgcall is not None:
                self._fg_detach()
            h, self._h = self._h, None
            self.module._release_graph(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- arguments --

    def _shapes(self, ins, n_in):
        """(written, views) of a symbolic graph for the inputs in `ins`: the
        results' shapes the loader computes (the binding's errors raise)."""
        written, views = [], []
        for r in self.results:
            if r.inplace is not None:
                continue  # the parameter's storage, sizes and strides
            ri = _capi.fgl_result_info()
            st = self._dll.fgl_graph_result_shape(self._h, ins, n_in, r.index, ctypes.byref(ri), self._err_ref)
            if st != _capi.FGL_OK:
                _check(st, self._err)
            shape, strides = _tuple(ri.sizes, ri.rank), _tuple(ri.strides, ri.rank)
            if r.is_view:
                views.append((r.index, r.base[0] == "param", r.base[1], shape, strides, int(ri.offset)))
            else:
                written.append((r.index, shape, strides, _capi.DTYPE_INDEX[r.dtype]))
        return written, views

    def _set_scalar(self, a, i, v):
        p = self.params[i] if i < len(self.params) else None
        dt = _capi.DTYPE_INDEX[p.dtype] if p is not None else _capi.FGL_F64
        a.is_scalar = 1
        a.scalar_dtype = dt
        if _capi.DTYPES[dt][2]:
            a.f = float(v)
        else:
            if isinstance(v, numbers.Integral):
                a.i = int(v)
            elif isinstance(v, numbers.Real) and float(v).is_integer():
                a.i = int(v)
            else:
                raise FusecError(_capi.FGL_ERR_MISMATCH, "input %d ('%s'): expected an integer for the %s scalar, got %r"
                                 % (i, p.name, p.dtype, v))

    def _who(self, i):
        return "input %d ('%s')" % (i, self.params[i].name) if i < len(self.params) else "input %d" % i

    def _checked_dtype(self, who, t):
        """t's fgl dtype, after the checks the loader cannot make (a dtype
        fusec lacks, the device)."""
        dt = _fgl_of_torch.get(t.dtype)
        if dt is None:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: dtype %s has no fusec equivalent" % (who, t.dtype))
        if t.get_device() != self._dev_index:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: tensor on %s, the module runs on %s"
                             % (who, t.device, self._dev))
        return dt

    def _set_out(self, tt, j, t):
        """Describes the caller's tensor t for written result j (out=); the
        loader checks it against the plan."""
        who = "output %d" % j
        if not isinstance(t, _torch().Tensor):
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: expected a torch.Tensor in out=, got %s"
                             % (who, type(t).__name__))
        tt.dtype = self._checked_dtype(who, t)
        shape, strides = self._element_layout(who, tt.dtype, t)
        if len(shape) > _capi.MAX_RANK:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: rank %d is above the loader's maximum %d"
                             % (who, len(shape), _capi.MAX_RANK))
        tt.rank = len(shape)
        for k in range(len(shape)):
            tt.sizes[k], tt.strides[k] = shape[k], strides[k]
        tt.ptr = t.data_ptr()

    def _outs_given(self, out, args):
        """out= as one entry per result (None for the views; None or the
        parameter's own tensor for a result written in place)."""
        torch = _torch()
        n = len(self.results)
        outs = [out] if isinstance(out, torch.Tensor) and n == 1 else out
        if not isinstance(outs, (list, tuple)) or len(outs) != n:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "out=: expected %s with one entry per result (%d, None for "
                             "the views), got %s" % ("a tensor or a sequence" if n == 1 else "a sequence", n,
                                                     type(out).__name__ if not isinstance(out, (list, tuple))
                                                     else "%d entries" % len(out)))
        for r in self.results:
            if r.is_view and outs[r.index] is not None:
                raise FusecError(_capi.FGL_ERR_MISMATCH, "out=: result %d is a view (of %s %d): pass None for it"
                                 % (r.index, r.base[0], r.base[1]))
            o = outs[r.index]
            if r.inplace is not None and o is not None and not (r.inplace < len(args) and o is args[r.inplace]):
                raise FusecError(_capi.FGL_ERR_MISMATCH, "out=: result %d is written in place into input %d ('%s'): "
                                 "pass None (or that input's own tensor) for it"
                                 % (r.index, r.inplace, self.params[r.inplace].name))
        return outs

    @staticmethod
    def _element_layout(who, dt, t):
        """t's sizes and strides as fusec's elements (f4e2m1: _unpacked)."""
        if dt != _F4:
            return t.shape, t.stride()
        el = _unpacked(tuple(t.shape), tuple(t.stride()))
        if el is None:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: a float4_e2m1fn_x2 tensor must have stride 1 in its "
                             "last dim (two elements a byte along it), got strides %s" % (who, tuple(t.stride())))
        return el

    def _set_tensor(self, a, i, t, cached):
        dt = self._checked_dtype(self._who(i), t)
        a.is_scalar = 0
        tt = a.tensor
        tt.ptr = t.data_ptr()
        tt.dtype = dt
        shape, strides = self._element_layout(self._who(i), dt, t)
        if cached is not None and i < len(cached) and cached[i] is not None and cached[i][0] == shape \
                and cached[i][1] == strides:
            return
        rank = len(shape)
        if rank > _capi.MAX_RANK:
            raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: rank %d is above the loader's maximum %d"
                             % (self._who(i), rank, _capi.MAX_RANK))
        tt.rank = rank
        for k in range(rank):
            tt.sizes[k] = shape[k]
            tt.strides[k] = strides[k]
        if cached is not None and i < len(cached):
            cached[i] = (tuple(shape), tuple(strides))

    def _call_ctypes(self, *args, stream=None, out=None):
        """Runs the graph on `args` (one per parameter: CUDA tensors for tensor
        parameters, Python numbers for scalar ones) on `stream` (default:
        torch.cuda.current_stream() of the module's device; a torch.cuda.Stream
        or a raw CUstream int). Returns the results (a tensor, or a tuple of
        them when the graph has several); view results share their base's
        storage; a result written in place is the tensor passed for its
        parameter, updated. out=: the caller's tensors for the written
        results (a tensor for a graph of one result, else one entry per
        result, None for the views and for the results written in place),
        returned in their places. Raises FusecError on any
        mismatch, before anything runs."""
        torch = _torch()
        outs_given = self._outs_given(out, args) if out is not None else None
        dev = self._dev
        if stream is None:
            raw = 0 if self._dev_index < 0 else _raw_stream(torch, self._dev_index)
            custom = None
        elif isinstance(stream, int):
            raw, custom = stream, None
        else:
            raw, custom = stream.cuda_stream, stream
        with self._lock:
            if not self._h or not self.module._h:
                raise FusecError(_capi.FGL_ERR_INVALID_ARGUMENT, "graph instance %s is closed" % self.name)
            n_in = len(args)
            if n_in == len(self.params):
                ins, cached = self._ins, self._in_shape
            else:  # the loader reports the count; the arguments are still checked for what they are
                ins, cached = (_capi.fgl_arg * max(1, n_in))(), None
            Tensor = torch.Tensor
            for i, a in enumerate(args):
                if isinstance(a, Tensor):
                    self._set_tensor(ins[i], i, a, cached)
                elif isinstance(a, (numbers.Number, bool)):
                    self._set_scalar(ins[i], i, a)
                    if cached is not None:
                        cached[i] = None
                else:
                    raise FusecError(_capi.FGL_ERR_MISMATCH, "%s: expected a torch.Tensor or a number, got %s"
                                     % (self._who(i), type(a).__name__))
            outs = self._outs
            res = [None] * len(self.results)
            tdt = _torch_of_fgl
            written, views = self._written, self._views
            if self.symbolic:
                key = tuple(tuple(a.shape) if isinstance(a, Tensor) else None for a in args)
                shapes = self._shape_cache.get(key)
                if shapes is None:
                    shapes = self._shapes(ins, n_in)
                    if len(self._shape_cache) >= 64:
                        self._shape_cache.clear()
                    self._shape_cache[key] = shapes
                written, views = shapes
                for j, shape, strides, dt in written:
                    t = outs[j]
                    t.dtype, t.rank = dt, len(shape)
                    for k, (s, st) in enumerate(zip(shape, strides)):
                        t.sizes[k], t.strides[k] = s, st
            try:
                for j, shape, strides, dt in written:
                    if outs_given is not None:
                        t = outs_given[j]
                        self._set_out(outs[j], j, t)
                    else:
                        if dt == _F4:
                            t = torch.empty_strided(*torch_layout("f4e2m1", shape, strides), dtype=tdt[dt],
                                                    device=dev)
                        else:
                            t = torch.empty_strided(shape, strides, dtype=tdt[dt], device=dev)
                        outs[j].ptr = t.data_ptr()
                        if custom is not None:
                            t.record_stream(custom)
                    res[j] = t
                st = self._dll.fgl_run(self._h, ins, n_in, outs, len(self.results), raw, self._err_ref)
                if st != _capi.FGL_OK:
                    _check(st, self._err)
            finally:
                if outs_given is not None:  # the next call's written outputs are the plan's again
                    for j, shape, strides, dt in written:
                        t = outs[j]
                        t.dtype, t.rank = dt, len(shape)
                        for k, (sz, sd) in enumerate(zip(shape, strides)):
                            t.sizes[k], t.strides[k] = sz, sd
            for j, from_param, bi, shape, strides, off in views:
                base = args[bi] if from_param else res[bi]
                if base.dtype == tdt[_F4]:  # in bytes, as the base's
                    p = _packed(shape, strides, off)
                    if p is None:
                        raise FusecError(_capi.FGL_ERR_UNSUPPORTED, "result %d: a view of " % j +
                                         _F4_LAYOUT % (list(shape), list(strides)) + " at element %d" % off)
                    shape, strides, off = p
                v = base.as_strided(shape, strides, base.storage_offset() + off)
                if v.numel() and v.data_ptr() != outs[j].ptr:  # torch gives an empty tensor address 0
                    raise FusecError(_capi.FGL_ERR_INVALID_ARGUMENT, "result %d: the loader's view pointer 0x%x is "
                                     "not base + %d elements (0x%x)" % (j, outs[j].ptr, off, v.data_ptr()))
                res[j] = v
            if self._inplace:
                for j, pi in self._inplace:
                    res[j] = args[pi]
                torch._C._increment_version(tuple(res[j] for j, _ in self._inplace))
        return res[0] if len(res) == 1 else tuple(res)


if _fgcall is None:
    Graph.__call__ = Graph._call_ctypes
else:
    _fgcall.enable_vectorcall(Graph)  # calls without an args tuple or kwargs dict (Python 3.11)


def register(module, graph, name=None, *, namespace="fusec", lib=None):
    """Registers a graph as a PyTorch custom operator (see fusec._ops)."""
    from . import _ops

    return _ops.register(module, graph, name, namespace=namespace, lib=lib)


def _raw_stream(torch, idx):
    f = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if f is not None:
        return f(idx)
    return torch.cuda.current_stream(idx).cuda_stream


def __getattr__(name):
    """fusec.export and fusec.backend load on first use (they import torch)."""
    if name in ("export", "backend"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'fusec' has no attribute {name!r}")
