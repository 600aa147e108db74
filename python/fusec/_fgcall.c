/* _fgcall: the fast call path of the fusec Python binding (issue 21, item 3).
 *
 * A CPython extension (the Python C API only; no torch C++ API, no
 * pybind11) holding the base type of fusec.Graph. It is called by
 * vectorcall (no args tuple, no kwargs dict; fusec.Graph gets the flag
 * through enable_vectorcall on Python 3.11). Its call reads each torch
 * tensor through the cheapest calls the Python API offers: for a tensor
 * whose type is exactly torch.Tensor or nn.Parameter, TensorBase's own C
 * accessors called through their function pointers (the dtype and shape
 * getters, get_device(), is_contiguous(), data_ptr(); stride() only for a
 * non-contiguous tensor, the strides of a contiguous one being computed
 * from its sizes), for any other subclass attribute lookups (it may
 * override them). The dtype is compared by identity with a cached table.
 * It fills fgl_arg/fgl_tensor arrays on the stack, allocates the written
 * results with torch.empty_strided from argument tuples built once per
 * graph (per input sizes for a graph with syms), calls fgl_run through a
 * function pointer and builds view results with as_strided. A result
 * written in place into a parameter (plan version 3) is the tensor passed
 * for that parameter, its version counter bumped
 * (torch._C._increment_version). It takes libfgload's functions as
 * addresses from the ctypes library the package opened, so it never links
 * a second copy.
 *
 * Each result has its own allocation: one torch.empty for all of them with
 * the results as views of it would cost more (a view, as_strided, costs
 * about what a small allocation from torch's caching allocator does:
 * python/tests/bench_fastcall.py), and would tie their memory together
 * (a small result kept alive would keep a large one's memory).
 *
 * Anything it does not handle itself (an argument count or type the loader
 * would not get, a dtype fusec lacks, a tensor on another device, a closed
 * instance, an unknown keyword) goes to the Python path (Graph._call_ctypes),
 * which raises the binding's usual error: the messages are the same either
 * way. Everything the loader checks (shapes, strides, dtypes, overlaps,
 * syms) is reported from fgl_run's own message.
 *
 * Threads: an instance is guarded by a fusec._fgcall.Lock shared with the
 * Python path; torch releases the GIL inside its factory functions, so the
 * lock (not the GIL) keeps two threads off one fgl_graph. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <stdint.h>
#include <string.h>

#include "fgload.h"

typedef fgl_status (*run_fn)(fgl_graph *, const fgl_arg *, int, fgl_tensor *, int, fgl_stream,
                             fgl_error *);
typedef fgl_status (*result_shape_fn)(const fgl_graph *, const fgl_arg *, int, int,
                                      fgl_result_info *, fgl_error *);
typedef fgl_status (*param_fn)(const fgl_graph *, int, fgl_param_info *, fgl_error *);
typedef fgl_status (*result_fn)(const fgl_graph *, int, fgl_result_info *, fgl_error *);

/* Arguments kept on the stack up to this many; more go to the heap. */
#define FAST_ARGS 8

/* ---- Lock: a lock that waits without the GIL -------------------------------- */

typedef struct {
  PyObject_HEAD PyThread_type_lock lock;
} LockObject;

/* Takes the lock; when another thread holds it, waits with the GIL released
 * (that thread may need the GIL to finish). */
static void lock_take(PyThread_type_lock l) {
  if (PyThread_acquire_lock(l, NOWAIT_LOCK))
    return;
  Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(l, WAIT_LOCK);
  Py_END_ALLOW_THREADS
}

static PyObject *lock_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  (void)args;
  (void)kw;
  LockObject *self = (LockObject *)type->tp_alloc(type, 0);
  if (!self)
    return NULL;
  self->lock = PyThread_allocate_lock();
  if (!self->lock) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  return (PyObject *)self;
}

static void lock_dealloc(LockObject *self) {
  if (self->lock)
    PyThread_free_lock(self->lock);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *lock_enter(LockObject *self, PyObject *unused) {
  (void)unused;
  lock_take(self->lock);
  Py_INCREF(self);
  return (PyObject *)self;
}

static PyObject *lock_exit(LockObject *self, PyObject *args) {
  (void)args;
  PyThread_release_lock(self->lock);
  Py_RETURN_FALSE;
}

static PyMethodDef lock_methods[] = {
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, "Takes the lock (waits without the GIL)."},
    {"__exit__", (PyCFunction)lock_exit, METH_VARARGS, "Releases the lock."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fusec._fgcall.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The lock of a graph instance, shared by the fast and the ctypes call paths.",
    .tp_new = lock_new,
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_methods = lock_methods,
};

/* ---- GraphBase ------------------------------------------------------------------- */

typedef struct {
  fgl_dtype dtype;
  int is_view, base_is_param, base_index;
  int inplace_param; /* >= 0: written into this parameter's storage (the parameter is the result) */
  int64_t offset;    /* views: elements from the base's address */
  int rank;
  int64_t sizes[FGL_MAX_RANK], strides[FGL_MAX_RANK];
  PyObject *shape_args; /* (sizes, strides): torch.empty_strided's / as_strided's first two */
  PyObject *kwargs;     /* written: {"dtype": ..., "device": ...} */
} ResultSpec;

typedef struct {
  PyObject_HEAD vectorcallfunc vectorcall; /* graph_vectorcall: the call without an args tuple */
  fgl_graph *h;
  run_fn run;
  result_shape_fn result_shape;
  PyObject *open; /* the module's bytearray(b"\1"): cleared when it is closed */
  PyObject *lock_obj;
  PyThread_type_lock lock;
  int n_params, n_results, symbolic, dev_index, n_inplace;
  fgl_dtype *param_dtype;
  int *param_scalar;
  ResultSpec *res;
  PyObject *dtypes;        /* tuple: torch dtype of each fgl_dtype (None where torch lacks it) */
  PyObject *empty_strided; /* torch.empty_strided */
  PyObject *stream_fn;     /* torch._C._cuda_getCurrentRawStream, or None (host tensors) */
  PyObject *dev_arg;       /* the device index, as an int */
  PyObject *error_type;    /* fusec.FusecError */
  int have_key;            /* symbolic: key holds the sizes res[] were computed for */
  int64_t *key;            /* n_params * (1 + FGL_MAX_RANK) */
  unsigned long long n_fast, n_fallback;
} GraphBase;

static PyObject *s_dtype, *s_shape, *s_stride, *s_data_ptr, *s_get_device, *s_storage_offset,
    *s_as_strided, *s_record_stream, *s_is_contiguous, *s_cuda_stream, *s_call_ctypes, *s_stream,
    *s_out;
static PyTypeObject *tensor_type;
static PyObject *increment_version; /* torch._C._increment_version (a sequence of tensors) */

/* torch.Tensor's own C accessors, called directly (no attribute lookup, no
 * bound method) for tensors whose type is exactly torch.Tensor or
 * torch.nn.Parameter: dtype and shape are getset descriptors, data_ptr(),
 * get_device(), is_contiguous() and stride() method descriptors of
 * torch._C.TensorBase. Any
 * other subclass goes through attribute lookups (it may override them, as
 * test_fastcall's Elsewhere overrides get_device). */
typedef PyObject *(*fast_fn)(PyObject *, PyObject *const *, Py_ssize_t);
typedef PyObject *(*fast_kw_fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);

typedef struct {
  PyObject *descr; /* the descriptor (a strong reference) */
  getter get;      /* getset descriptors */
  void *closure;
  PyCFunction meth; /* method descriptors */
  int flags;
} Accessor;

static struct {
  int ready;
  PyTypeObject *exact[2]; /* torch.Tensor, torch.nn.Parameter (NULL: none) */
  Accessor dtype, shape, data_ptr, get_device, stride, is_contiguous;
} acc;

static PyObject *empty_tuple;

static PyObject *acc_get(const Accessor *a, PyObject *obj) { return a->get(obj, a->closure); }

static PyObject *acc_call0(const Accessor *a, PyObject *obj) {
  switch (a->flags & ~METH_COEXIST) {
  case METH_NOARGS:
    return a->meth(obj, NULL);
  case METH_VARARGS | METH_KEYWORDS:
    return ((PyCFunctionWithKeywords)(void (*)(void))a->meth)(obj, empty_tuple, NULL);
  case METH_FASTCALL:
    return ((fast_fn)(void (*)(void))a->meth)(obj, NULL, 0);
  case METH_FASTCALL | METH_KEYWORDS:
    return ((fast_kw_fn)(void (*)(void))a->meth)(obj, NULL, 0, NULL);
  default:
    return PyObject_Vectorcall(a->descr, &obj, 1, NULL);
  }
}

/* Takes tensor_type's descriptor for `name` (0), or 1 where it is not one
 * of a C getset/method of a base of tensor_type (then no direct calls). */
static int acc_find(Accessor *a, PyObject *name, int is_getset) {
  PyObject *d = PyObject_GetAttr((PyObject *)tensor_type, name);
  if (!d)
    return -1;
  Py_XSETREF(a->descr, d);
  if (is_getset && Py_IS_TYPE(d, &PyGetSetDescr_Type) &&
      ((PyGetSetDescrObject *)d)->d_getset->get) {
    a->get = ((PyGetSetDescrObject *)d)->d_getset->get;
    a->closure = ((PyGetSetDescrObject *)d)->d_getset->closure;
    return 0;
  }
  if (!is_getset && Py_IS_TYPE(d, &PyMethodDescr_Type)) {
    a->meth = ((PyMethodDescrObject *)d)->d_method->ml_meth;
    a->flags = ((PyMethodDescrObject *)d)->d_method->ml_flags;
    return (a->flags & METH_CLASS) || (a->flags & METH_STATIC) ? 1 : 0;
  }
  return 1;
}

/* Sets acc from tensor_type; a Parameter type gets the direct calls too
 * when it overrides none of them. */
static int acc_setup(PyTypeObject *param_type) {
  Accessor *all[] = {&acc.dtype,      &acc.shape,  &acc.data_ptr,
                     &acc.get_device, &acc.stride, &acc.is_contiguous};
  PyObject *names[] = {s_dtype, s_shape, s_data_ptr, s_get_device, s_stride, s_is_contiguous};
  enum { N_ACC = sizeof all / sizeof all[0] };
  acc.ready = 0;
  acc.exact[0] = acc.exact[1] = NULL;
  int off = 0;
  for (int k = 0; k < N_ACC; k++) {
    int r = acc_find(all[k], names[k], k < 2);
    if (r < 0)
      return -1;
    off |= r;
  }
  if (off)
    return 0; /* this torch's accessors are not what the direct calls expect: lookups */
  acc.exact[0] = tensor_type;
  if (param_type && PyType_IsSubtype(param_type, tensor_type)) {
    int same = 1;
    for (int k = 0; k < N_ACC && same; k++) {
      PyObject *d = PyObject_GetAttr((PyObject *)param_type, names[k]);
      if (!d)
        return -1;
      same = d == all[k]->descr;
      Py_DECREF(d);
    }
    if (same)
      acc.exact[1] = param_type;
  }
  acc.ready = 1;
  return 0;
}

static int is_exact_tensor(PyObject *obj) {
  return acc.ready && (Py_IS_TYPE(obj, acc.exact[0]) || Py_IS_TYPE(obj, acc.exact[1]));
}

static void graph_clear_specs(GraphBase *self) {
  if (self->res)
    for (int j = 0; j < self->n_results; j++) {
      Py_CLEAR(self->res[j].shape_args);
      Py_CLEAR(self->res[j].kwargs);
    }
  PyMem_Free(self->res);
  PyMem_Free(self->param_dtype);
  PyMem_Free(self->param_scalar);
  PyMem_Free(self->key);
  self->res = NULL;
  self->param_dtype = NULL;
  self->param_scalar = NULL;
  self->key = NULL;
}

static void graph_dealloc(GraphBase *self) {
  graph_clear_specs(self);
  Py_CLEAR(self->open);
  Py_CLEAR(self->lock_obj);
  Py_CLEAR(self->dtypes);
  Py_CLEAR(self->empty_strided);
  Py_CLEAR(self->stream_fn);
  Py_CLEAR(self->dev_arg);
  Py_CLEAR(self->error_type);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *raise_fusec(GraphBase *self, int code, const char *msg) {
  PyObject *e = PyObject_CallFunction(self->error_type, "is", code, msg);
  if (e) {
    PyErr_SetObject(self->error_type, e);
    Py_DECREF(e);
  }
  return NULL;
}

static PyObject *tuple_of(const int64_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  if (!t)
    return NULL;
  for (int k = 0; k < n; k++) {
    PyObject *x = PyLong_FromLongLong(v[k]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, k, x);
  }
  return t;
}

/* Rebuilds result j's (sizes, strides) tuple from its spec. */
static int spec_set_shape(ResultSpec *r) {
  PyObject *sz = tuple_of(r->sizes, r->rank), *st = sz ? tuple_of(r->strides, r->rank) : NULL;
  if (!st) {
    Py_XDECREF(sz);
    return -1;
  }
  Py_XSETREF(r->shape_args, PyTuple_Pack(2, sz, st));
  Py_DECREF(sz);
  Py_DECREF(st);
  return r->shape_args ? 0 : -1;
}

static void spec_from_info(ResultSpec *r, const fgl_result_info *ri) {
  r->dtype = ri->dtype;
  r->rank = ri->rank;
  memcpy(r->sizes, ri->sizes, sizeof r->sizes);
  memcpy(r->strides, ri->strides, sizeof r->strides);
  r->offset = ri->offset;
}

/* _fg_setup(handle, (fgl_run, fgl_graph_result_shape, fgl_graph_param,
 * fgl_graph_result) addresses, n_params, n_results, open flag, lock, torch
 * dtypes, empty_strided, stream getter or None, device index, torch device,
 * FusecError) */
static PyObject *graph_setup(GraphBase *self, PyObject *args) {
  unsigned long long h, f_run, f_rshape, f_param, f_result;
  PyObject *open, *lock, *dtypes, *empty, *stream_fn, *device, *err_type;
  int n_params, n_results, dev;
  if (!PyArg_ParseTuple(args, "K(KKKK)iiO!O!O!OOiOO", &h, &f_run, &f_rshape, &f_param, &f_result,
                        &n_params, &n_results, &PyByteArray_Type, &open, &LockType, &lock,
                        &PyTuple_Type, &dtypes, &empty, &stream_fn, &dev, &device, &err_type))
    return NULL;
  if (PyTuple_GET_SIZE(dtypes) != FGL_DTYPE_COUNT || PyByteArray_GET_SIZE(open) < 1 ||
      n_params < 0 || n_results < 0)
    return PyErr_Format(PyExc_ValueError, "_fg_setup: bad counts, dtype table or open flag");
  graph_clear_specs(self);
  self->h = NULL;
  Py_INCREF(err_type);
  Py_XSETREF(self->error_type, err_type);
  fgl_graph *g = (fgl_graph *)(uintptr_t)h;
  param_fn gparam = (param_fn)(uintptr_t)f_param;
  result_fn gresult = (result_fn)(uintptr_t)f_result;
  fgl_error e;
  fgl_param_info pi;
  fgl_result_info ri;
  self->n_params = n_params;
  self->n_results = n_results;
  self->param_dtype = PyMem_Calloc(n_params + 1, sizeof *self->param_dtype);
  self->param_scalar = PyMem_Calloc(n_params + 1, sizeof *self->param_scalar);
  self->res = PyMem_Calloc(n_results + 1, sizeof *self->res);
  self->key = PyMem_Calloc((size_t)(n_params + 1) * (1 + FGL_MAX_RANK), sizeof *self->key);
  if (!self->param_dtype || !self->param_scalar || !self->res || !self->key) {
    graph_clear_specs(self);
    return PyErr_NoMemory();
  }
  self->symbolic = 0;
  self->n_inplace = 0;
  for (int i = 0; i < n_params; i++) {
    if (gparam(g, i, &pi, &e) != FGL_OK) {
      raise_fusec(self, e.status, e.msg);
      goto fail;
    }
    self->param_dtype[i] = pi.dtype;
    self->param_scalar[i] = pi.is_scalar;
  }
  for (int j = 0; j < n_results; j++) {
    ResultSpec *r = &self->res[j];
    if (gresult(g, j, &ri, &e) != FGL_OK) {
      raise_fusec(self, e.status, e.msg);
      goto fail;
    }
    spec_from_info(r, &ri);
    r->is_view = ri.is_view;
    r->base_is_param = ri.base_is_param;
    r->base_index = ri.base_index;
    r->inplace_param = ri.inplace_param;
    if (r->inplace_param >= n_params ||
        (r->inplace_param >= 0 && self->param_scalar[r->inplace_param])) {
      PyErr_Format(PyExc_ValueError,
                   "_fg_setup: result %d is written into parameter %d, not a tensor "
                   "parameter",
                   j, r->inplace_param);
      goto fail;
    }
    if (r->inplace_param >= 0)
      self->n_inplace++;
    if (ri.symbolic)
      self->symbolic = 1;
    else if (spec_set_shape(r) < 0)
      goto fail;
    if (!r->is_view && r->inplace_param < 0) {
      PyObject *tdt = PyTuple_GET_ITEM(dtypes, ri.dtype);
      r->kwargs = Py_BuildValue("{sOsO}", "dtype", tdt, "device", device);
      if (!r->kwargs)
        goto fail;
    }
  }
  self->h = g;
  self->run = (run_fn)(uintptr_t)f_run;
  self->result_shape = (result_shape_fn)(uintptr_t)f_rshape;
  Py_INCREF(open);
  Py_XSETREF(self->open, open);
  Py_INCREF(lock);
  Py_XSETREF(self->lock_obj, lock);
  self->lock = ((LockObject *)lock)->lock;
  Py_INCREF(dtypes);
  Py_XSETREF(self->dtypes, dtypes);
  Py_INCREF(empty);
  Py_XSETREF(self->empty_strided, empty);
  Py_INCREF(stream_fn);
  Py_XSETREF(self->stream_fn, stream_fn);
  Py_XSETREF(self->dev_arg, PyLong_FromLong(dev));
  self->dev_index = dev;
  self->have_key = 0;
  if (!self->dev_arg)
    goto fail;
  Py_RETURN_NONE;
fail:
  self->h = NULL;
  graph_clear_specs(self);
  return NULL;
}

static PyObject *graph_detach(GraphBase *self, PyObject *unused) {
  (void)unused;
  self->h = NULL;
  Py_RETURN_NONE;
}

static PyObject *graph_stats(GraphBase *self, void *closure) {
  (void)closure;
  return Py_BuildValue("{sKsKsO}", "fast", self->n_fast, "fallback", self->n_fallback, "ready",
                       self->h ? Py_True : Py_False);
}

/* ---- reading tensors -------------------------------------------------------- */

enum { READ_OK = 0, READ_ERROR = -1, READ_FALLBACK = 1 };

static int read_int64_tuple(PyObject *t, int64_t *out, int rank) {
  for (int k = 0; k < rank; k++) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, k));
    if (v == -1 && PyErr_Occurred())
      return -1;
    out[k] = v;
  }
  return 0;
}

static PyObject *call0(PyObject *obj, PyObject *name) {
  return PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* t's strides from stride(): READ_FALLBACK (no error set) when it is not a
 * tuple of the rank's length. */
static int read_strides(PyObject *obj, int direct, fgl_tensor *t, int rank) {
  PyObject *stride = direct ? acc_call0(&acc.stride, obj) : call0(obj, s_stride);
  if (!stride)
    return READ_ERROR;
  if (!PyTuple_Check(stride) || PyTuple_GET_SIZE(stride) != rank) {
    Py_DECREF(stride);
    return READ_FALLBACK;
  }
  int bad = read_int64_tuple(stride, t->strides, rank);
  Py_DECREF(stride);
  return bad ? READ_ERROR : READ_OK;
}

/* Fills t from a torch tensor: READ_FALLBACK where the Python path must
 * report (a dtype fusec lacks, another device, rank above FGL_MAX_RANK).
 * With `computed` (not NULL), t's strides may be computed from its sizes
 * (contiguous), which sets *computed. */
static int read_tensor(GraphBase *self, PyObject *obj, fgl_tensor *t, int *computed) {
  int direct = is_exact_tensor(obj);
  PyObject *dt = direct ? acc_get(&acc.dtype, obj) : PyObject_GetAttr(obj, s_dtype);
  if (!dt)
    return READ_ERROR;
  int code = -1;
  for (int d = 0; d < FGL_DTYPE_COUNT; d++)
    if (PyTuple_GET_ITEM(self->dtypes, d) == dt) {
      code = d;
      break;
    }
  Py_DECREF(dt);
  if (code < 0)
    return READ_FALLBACK;
  PyObject *dev = direct ? acc_call0(&acc.get_device, obj) : call0(obj, s_get_device);
  if (!dev)
    return READ_ERROR;
  long di = PyLong_AsLong(dev);
  Py_DECREF(dev);
  if (di == -1 && PyErr_Occurred())
    return READ_ERROR;
  if (di != self->dev_index)
    return READ_FALLBACK;
  PyObject *shape = direct ? acc_get(&acc.shape, obj) : PyObject_GetAttr(obj, s_shape);
  if (!shape)
    return READ_ERROR;
  Py_ssize_t rank = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : FGL_MAX_RANK + 1;
  if (rank > FGL_MAX_RANK) {
    Py_DECREF(shape);
    return READ_FALLBACK;
  }
  int bad = read_int64_tuple(shape, t->sizes, (int)rank);
  Py_DECREF(shape);
  if (bad)
    return READ_ERROR;
  /* A contiguous tensor's strides are the row-major ones of its sizes in
   * every dim the loader compares (it skips dims of size 1 and empty
   * tensors, where torch's is_contiguous() does not look either): the
   * bool costs less than the tuple of stride(). *computed says so, for
   * graph_vectorcall's error path (a refusal shows the own strides). */
  int contiguous = 0;
  if (direct && computed) {
    PyObject *c = acc_call0(&acc.is_contiguous, obj);
    if (!c)
      return READ_ERROR;
    contiguous = c == Py_True;
    Py_DECREF(c);
  }
  if (contiguous) {
    int64_t st = 1;
    for (int k = (int)rank - 1; k >= 0; k--) {
      t->strides[k] = st;
      st *= t->sizes[k] > 1 ? t->sizes[k] : 1;
    }
    *computed = 1;
  } else {
    int r = read_strides(obj, direct, t, (int)rank);
    if (r != READ_OK)
      return r;
  }
  PyObject *ptr = direct ? acc_call0(&acc.data_ptr, obj) : call0(obj, s_data_ptr);
  if (!ptr)
    return READ_ERROR;
  t->ptr = PyLong_AsUnsignedLongLong(ptr);
  Py_DECREF(ptr);
  if (PyErr_Occurred())
    return READ_ERROR;
  t->dtype = (fgl_dtype)code;
  t->rank = (int)rank;
  return READ_OK;
}

/* Fills input i from a Python argument. */
static int read_arg(GraphBase *self, int i, PyObject *a, fgl_arg *out, int *computed) {
  if (PyObject_TypeCheck(a, tensor_type)) {
    memset(out, 0, sizeof *out);
    return read_tensor(self, a, &out->tensor, computed);
  }
  fgl_dtype pd = self->param_dtype[i];
  int is_float = pd == FGL_F16 || pd == FGL_BF16 || pd == FGL_F32 || pd == FGL_F64 ||
                 pd == FGL_F8E4M3 || pd == FGL_F8E5M2;
  if (PyFloat_CheckExact(a)) {
    if (!is_float)
      return READ_FALLBACK; /* the Python path names the non-integer */
    *out = fgl_arg_float(pd, PyFloat_AS_DOUBLE(a));
    return READ_OK;
  }
  if (PyLong_Check(a)) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return READ_FALLBACK;
    }
    *out = fgl_arg_int(pd, v);
    return READ_OK;
  }
  return READ_FALLBACK;
}

/* ---- the call ----------------------------------------------------------------- */

/* The call through Graph._call_ctypes, with the same arguments. */
static PyObject *fallback(GraphBase *self, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames) {
  self->n_fallback++;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf), total = n + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject *stack[1 + FAST_ARGS + 2], **argv = stack;
  if (total + 1 > (Py_ssize_t)(sizeof stack / sizeof stack[0])) {
    argv = PyMem_Malloc((size_t)(total + 1) * sizeof *argv);
    if (!argv)
      return PyErr_NoMemory();
  }
  argv[0] = (PyObject *)self;
  if (total)
    memcpy(argv + 1, args, (size_t)total * sizeof *argv);
  PyObject *r = PyObject_VectorcallMethod(s_call_ctypes, argv, (size_t)(n + 1), kwnames);
  if (argv != stack)
    PyMem_Free(argv);
  return r;
}

/* Symbolic graphs: the results' shapes for the sizes in `in`, recomputed
 * (fgl_graph_result_shape) only when they differ from the last call's. */
static int bind_shapes(GraphBase *self, const fgl_arg *in, int n_in) {
  int64_t *key = self->key, w = 1 + FGL_MAX_RANK;
  int same = self->have_key;
  for (int i = 0; i < n_in; i++) {
    int64_t k[1 + FGL_MAX_RANK] = {0};
    if (in[i].is_scalar)
      k[0] = -1;
    else {
      k[0] = in[i].tensor.rank;
      memcpy(k + 1, in[i].tensor.sizes, (size_t)in[i].tensor.rank * sizeof(int64_t));
    }
    if (same && memcmp(key + i * w, k, sizeof k) != 0)
      same = 0;
    memcpy(key + i * w, k, sizeof k);
  }
  if (same)
    return 0;
  self->have_key = 0;
  for (int j = 0; j < self->n_results; j++) {
    fgl_result_info ri;
    fgl_error e;
    if (self->result_shape(self->h, in, n_in, j, &ri, &e) != FGL_OK) {
      raise_fusec(self, e.status, e.msg);
      return -1;
    }
    spec_from_info(&self->res[j], &ri);
    if (spec_set_shape(&self->res[j]) < 0)
      return -1;
  }
  self->have_key = 1;
  return 0;
}

/* out=: a tensor (a graph of one result) or a sequence with one entry per
 * result (None for view results; None or the parameter's own tensor for a
 * result written in place). Fills outs[] and given[] (the written results
 * only); READ_FALLBACK for anything else. */
static int read_outs(GraphBase *self, PyObject *const *args, PyObject *out, fgl_tensor *outs,
                     PyObject **given, int *computed) {
  int n = self->n_results;
  PyObject *seq = NULL;
  if (PyObject_TypeCheck(out, tensor_type)) {
    if (n != 1)
      return READ_FALLBACK;
  } else if (PyTuple_Check(out) || PyList_Check(out)) {
    if (PySequence_Fast_GET_SIZE(out) != n)
      return READ_FALLBACK;
    seq = out;
  } else
    return READ_FALLBACK;
  for (int j = 0; j < n; j++) {
    PyObject *o = seq ? PySequence_Fast_GET_ITEM(seq, j) : out;
    if (self->res[j].is_view) {
      if (o != Py_None)
        return READ_FALLBACK;
      continue;
    }
    if (self->res[j].inplace_param >= 0) {
      if (o != Py_None && o != args[self->res[j].inplace_param])
        return READ_FALLBACK;
      continue;
    }
    if (!PyObject_TypeCheck(o, tensor_type))
      return READ_FALLBACK;
    int st = read_tensor(self, o, &outs[j], computed);
    if (st != READ_OK)
      return st;
    given[j] = o;
  }
  return READ_OK;
}

static PyObject *make_view(GraphBase *self, int j, PyObject *base, fgl_devptr want) {
  ResultSpec *r = &self->res[j];
  PyObject *off = call0(base, s_storage_offset);
  if (!off)
    return NULL;
  long long so = PyLong_AsLongLong(off);
  Py_DECREF(off);
  if (so == -1 && PyErr_Occurred())
    return NULL;
  PyObject *o = PyLong_FromLongLong(so + r->offset);
  if (!o)
    return NULL;
  PyObject *argv[4] = {base, PyTuple_GET_ITEM(r->shape_args, 0), PyTuple_GET_ITEM(r->shape_args, 1),
                       o};
  PyObject *v =
      PyObject_VectorcallMethod(s_as_strided, argv, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  Py_DECREF(o);
  if (!v)
    return NULL;
  /* torch gives an empty tensor address 0 */
  int64_t numel = 1;
  for (int k = 0; k < r->rank; k++)
    numel *= r->sizes[k];
  if (numel) {
    PyObject *p = call0(v, s_data_ptr);
    unsigned long long got = p ? PyLong_AsUnsignedLongLong(p) : 0;
    Py_XDECREF(p);
    if (PyErr_Occurred()) {
      Py_DECREF(v);
      return NULL;
    }
    if (got != want) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "result %d: the loader's view pointer 0x%llx is not base + %lld elements (0x%llx)",
               j, (unsigned long long)want, (long long)r->offset, got);
      Py_DECREF(v);
      return raise_fusec(self, FGL_ERR_INVALID_ARGUMENT, msg);
    }
  }
  return v;
}

static PyObject *graph_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
  GraphBase *self = (GraphBase *)callable;
  PyObject *stream = Py_None, *out = Py_None;
  if (!self->h || !PyByteArray_AS_STRING(self->open)[0])
    return fallback(self, args, nargsf, kwnames);
  int n_in = (int)PyVectorcall_NARGS(nargsf), n_out = self->n_results;
  if (kwnames)
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
      PyObject *name = PyTuple_GET_ITEM(kwnames, k);
      if (name == s_out || PyUnicode_Compare(name, s_out) == 0)
        out = args[n_in + k];
      else if (name == s_stream || PyUnicode_Compare(name, s_stream) == 0)
        stream = args[n_in + k];
      else
        return fallback(self, args, nargsf, kwnames);
    }
  if (n_in != self->n_params)
    return fallback(self, args, nargsf, kwnames);
  fgl_arg in_stack[FAST_ARGS], *in = in_stack;
  fgl_tensor out_stack[FAST_ARGS], *outs = out_stack;
  PyObject *res_stack[FAST_ARGS], **res = res_stack;
  PyObject *given_stack[FAST_ARGS], **given = given_stack;
  PyObject *ret = NULL;
  int locked = 0, st = READ_OK, computed = 0;
  if (n_in > FAST_ARGS || n_out > FAST_ARGS) {
    in = PyMem_Calloc(n_in + 1, sizeof *in);
    outs = PyMem_Calloc(n_out + 1, sizeof *outs);
    res = PyMem_Calloc(n_out + 1, sizeof *res);
    given = PyMem_Calloc(n_out + 1, sizeof *given);
    if (!in || !outs || !res || !given) {
      PyErr_NoMemory();
      goto done;
    }
  }
  for (int j = 0; j < n_out; j++)
    res[j] = given[j] = NULL;
  for (int i = 0; i < n_in && st == READ_OK; i++)
    st = read_arg(self, i, args[i], &in[i], &computed);
  if (st == READ_OK && out != Py_None)
    st = read_outs(self, args, out, outs, given, &computed);
  if (st == READ_FALLBACK) {
    ret = fallback(self, args, nargsf, kwnames);
    goto done;
  }
  if (st == READ_ERROR)
    goto done;

  /* the stream */
  fgl_stream raw = NULL;
  PyObject *custom = NULL;
  if (stream == Py_None) {
    if (self->stream_fn != Py_None) {
      PyObject *s = PyObject_CallOneArg(self->stream_fn, self->dev_arg);
      if (!s)
        goto done;
      raw = (fgl_stream)(uintptr_t)PyLong_AsUnsignedLongLong(s);
      Py_DECREF(s);
    }
  } else if (PyLong_Check(stream)) {
    raw = (fgl_stream)(uintptr_t)PyLong_AsUnsignedLongLong(stream);
  } else {
    PyObject *s = PyObject_GetAttr(stream, s_cuda_stream);
    if (!s)
      goto done;
    raw = (fgl_stream)(uintptr_t)PyLong_AsUnsignedLongLong(s);
    Py_DECREF(s);
    custom = stream;
  }
  if (PyErr_Occurred())
    goto done;

  lock_take(self->lock);
  locked = 1;
  if (!self->h) { /* closed while this thread waited */
    PyThread_release_lock(self->lock);
    locked = 0;
    ret = fallback(self, args, nargsf, kwnames);
    goto done;
  }
  if (self->symbolic && bind_shapes(self, in, n_in) < 0)
    goto done;
  for (int j = 0; j < n_out; j++) {
    ResultSpec *r = &self->res[j];
    if (r->is_view || r->inplace_param >= 0) { /* the loader fills the entry */
      memset(&outs[j], 0, sizeof outs[j]);
      continue;
    }
    if (given[j]) {
      Py_INCREF(given[j]);
      res[j] = given[j];
      continue;
    }
    res[j] = PyObject_Call(self->empty_strided, r->shape_args, r->kwargs);
    if (!res[j])
      goto done;
    PyObject *p = call0(res[j], s_data_ptr);
    if (!p)
      goto done;
    outs[j].ptr = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    outs[j].dtype = r->dtype;
    outs[j].rank = r->rank;
    memcpy(outs[j].sizes, r->sizes, sizeof r->sizes);
    memcpy(outs[j].strides, r->strides, sizeof r->strides);
    if (custom) {
      PyObject *argv[2] = {res[j], custom};
      PyObject *x = PyObject_VectorcallMethod(s_record_stream, argv,
                                              2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
      if (!x)
        goto done;
      Py_DECREF(x);
    }
  }
  fgl_error e;
  fgl_status rs = self->run(self->h, in, n_in, outs, n_out, raw, &e);
  if (rs != FGL_OK && computed) {
    /* the loader refused: again with every tensor's own strides, so that
     * its message shows them (it accepts the computed ones exactly where
     * it accepts these: it launched nothing) */
    for (int i = 0; i < n_in && st == READ_OK; i++)
      if (!in[i].is_scalar)
        st = read_strides(args[i], is_exact_tensor(args[i]), &in[i].tensor, in[i].tensor.rank);
    for (int j = 0; j < n_out && st == READ_OK; j++)
      if (given[j])
        st = read_strides(given[j], is_exact_tensor(given[j]), &outs[j], outs[j].rank);
    if (st == READ_ERROR)
      goto done;
    rs = self->run(self->h, in, n_in, outs, n_out, raw, &e);
  }
  if (rs != FGL_OK) {
    raise_fusec(self, e.status, e.msg);
    goto done;
  }
  if (self->n_inplace > 0) {
    PyObject *dirty = PyTuple_New(self->n_inplace);
    if (!dirty)
      goto done;
    for (int j = 0, k = 0; j < n_out; j++)
      if (self->res[j].inplace_param >= 0) {
        res[j] = args[self->res[j].inplace_param];
        Py_INCREF(res[j]);
        Py_INCREF(res[j]);
        PyTuple_SET_ITEM(dirty, k++, res[j]);
      }
    PyObject *x =
        increment_version ? PyObject_CallOneArg(increment_version, dirty) : Py_NewRef(Py_None);
    Py_DECREF(dirty);
    if (!x)
      goto done;
    Py_DECREF(x);
  }
  for (int j = 0; j < n_out; j++) {
    ResultSpec *r = &self->res[j];
    if (!r->is_view)
      continue;
    PyObject *base = r->base_is_param ? args[r->base_index] : res[r->base_index];
    res[j] = make_view(self, j, base, outs[j].ptr);
    if (!res[j])
      goto done;
  }
  PyThread_release_lock(self->lock);
  locked = 0;
  self->n_fast++;
  if (n_out == 1) {
    ret = res[0];
    res[0] = NULL;
  } else {
    ret = PyTuple_New(n_out);
    if (ret)
      for (int j = 0; j < n_out; j++) {
        PyTuple_SET_ITEM(ret, j, res[j]);
        res[j] = NULL;
      }
  }
done:
  if (locked)
    PyThread_release_lock(self->lock);
  if (res)
    for (int j = 0; j < n_out; j++)
      Py_XDECREF(res[j]);
  if (in != in_stack) {
    PyMem_Free(in);
    PyMem_Free(outs);
    PyMem_Free(res);
    PyMem_Free(given);
  }
  return ret;
}

static PyMethodDef graph_methods[] = {
    {"_fg_setup", (PyCFunction)graph_setup, METH_VARARGS,
     "Binds the fast path to a graph instance (called by fusec.Graph)."},
    {"_fg_detach", (PyCFunction)graph_detach, METH_NOARGS,
     "Forgets the instance's handle (before it is freed)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"_fg_stats", (getter)graph_stats, NULL,
     "Calls taken by the fast path and by the ctypes path, and whether the fast path is bound.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *graph_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  GraphBase *self = (GraphBase *)PyType_GenericNew(type, args, kw);
  if (self)
    self->vectorcall = graph_vectorcall;
  return (PyObject *)self;
}

static PyTypeObject GraphBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fusec._fgcall.GraphBase",
    .tp_basicsize = sizeof(GraphBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Base of fusec.Graph: its call, in C.",
    .tp_new = graph_new,
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_vectorcall_offset = offsetof(GraphBase, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
};

/* ---- module ----------------------------------------------------------------------- */

/* set_tensor_type(torch.Tensor[, torch.nn.Parameter]) */
static PyObject *mod_set_tensor_type(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *t, *param = NULL;
  if (!PyArg_ParseTuple(args, "O|O", &t, &param))
    return NULL;
  if (!PyType_Check(t) || (param && !PyType_Check(param)))
    return PyErr_Format(PyExc_TypeError, "expected torch.Tensor (and torch.nn.Parameter)");
  if (acc.ready && (PyTypeObject *)t == tensor_type && (PyTypeObject *)param == acc.exact[1])
    Py_RETURN_NONE; /* each graph instance sets them: the same types */
  Py_INCREF(t);
  Py_XSETREF(tensor_type, (PyTypeObject *)t);
  if (acc_setup((PyTypeObject *)param) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *mod_direct_accessors(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyBool_FromLong(acc.ready);
}

static PyObject *mod_set_increment_version(PyObject *mod, PyObject *f) {
  (void)mod;
  if (!PyCallable_Check(f))
    return PyErr_Format(PyExc_TypeError, "expected torch._C._increment_version");
  Py_INCREF(f);
  Py_XSETREF(increment_version, f);
  Py_RETURN_NONE;
}

/* enable_vectorcall(cls): a Python subclass of GraphBase (fusec.Graph) that
 * keeps its call takes it by vectorcall too (no args tuple, no kwargs
 * dict). Python 3.12 passes the flag on to such heap types itself; 3.11
 * only to static ones, so the binding sets it on fusec.Graph. */
static PyObject *mod_enable_vectorcall(PyObject *mod, PyObject *cls) {
  (void)mod;
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &GraphBaseType))
    return PyErr_Format(PyExc_TypeError, "expected a subclass of fusec._fgcall.GraphBase");
  PyTypeObject *t = (PyTypeObject *)cls;
  if (t->tp_call != PyVectorcall_Call ||
      t->tp_vectorcall_offset != GraphBaseType.tp_vectorcall_offset)
    Py_RETURN_FALSE; /* it has its own __call__ */
  if (!(t->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL)) {
    t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    PyType_Modified(t);
  }
  Py_RETURN_TRUE;
}

static PyMethodDef mod_methods[] = {
    {"enable_vectorcall", mod_enable_vectorcall, METH_O,
     "Lets a subclass of GraphBase that keeps its call be called by vectorcall (Python 3.11)."},
    {"set_tensor_type", mod_set_tensor_type, METH_VARARGS,
     "Sets the tensor type (torch.Tensor) and optionally torch.nn.Parameter, whose accessors are "
     "then called directly."},
    {"direct_accessors", mod_direct_accessors, METH_NOARGS,
     "Whether exact torch.Tensor arguments are read through direct calls of their C accessors."},
    {"set_increment_version", mod_set_increment_version, METH_O,
     "Sets the function that marks tensors written in place (torch._C._increment_version)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fgcall_module = {
    PyModuleDef_HEAD_INIT,
    "_fgcall",
    "The fast call path of fusec.Graph (see _fgcall.c).",
    -1,
    mod_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__fgcall(void) {
  struct {
    PyObject **s;
    const char *text;
  } names[] = {
      {&s_dtype, "dtype"},
      {&s_shape, "shape"},
      {&s_stride, "stride"},
      {&s_data_ptr, "data_ptr"},
      {&s_get_device, "get_device"},
      {&s_storage_offset, "storage_offset"},
      {&s_as_strided, "as_strided"},
      {&s_is_contiguous, "is_contiguous"},
      {&s_record_stream, "record_stream"},
      {&s_cuda_stream, "cuda_stream"},
      {&s_call_ctypes, "_call_ctypes"},
      {&s_stream, "stream"},
      {&s_out, "out"},
  };
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (!*names[k].s && !(*names[k].s = PyUnicode_InternFromString(names[k].text)))
      return NULL;
  if (!empty_tuple && !(empty_tuple = PyTuple_New(0)))
    return NULL;
  if (PyType_Ready(&LockType) < 0 || PyType_Ready(&GraphBaseType) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&fgcall_module);
  if (!m)
    return NULL;
  if (PyModule_AddIntConstant(m, "ABI_VERSION", FGL_ABI_VERSION) < 0 ||
      PyModule_AddIntConstant(m, "MAX_RANK", FGL_MAX_RANK) < 0 ||
      PyModule_AddType(m, &LockType) < 0 || PyModule_AddType(m, &GraphBaseType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
