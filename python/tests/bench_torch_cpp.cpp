// bench_torch_cpp: what the fast call's torch work (reading the tensors,
// allocating the results) costs through the torch C++ API instead of the
// Python C API: THPVariable_Unpack, at::empty_strided, THPVariable_Wrap,
// called as METH_FASTCALL CPython functions (no pybind11). A measurement
// for python/tests/bench_fastcall.py --torch-cpp (issue 21 item 3: the
// "or anything as fast" alternative); no loader call, nothing checked.
// Built there with torch's headers (C++20) against its libraries.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>
#include <ATen/ATen.h>

static volatile int64_t sink;

static int64_t read(PyObject *o) {
  const at::Tensor &t = THPVariable_Unpack(o);
  int64_t acc = (int64_t)t.scalar_type() + t.get_device() + t.dim();
  auto sz = t.sizes();
  auto st = t.strides();
  for (size_t d = 0; d < sz.size(); d++)
    acc += sz[d] + st[d];
  acc += (int64_t)(intptr_t)t.data_ptr();
  return acc;
}

// call(x, y, w, b): reads 4 tensors, allocates 2 [64,256] f32 results
static PyObject *call_alloc(PyObject *, PyObject *const *args, Py_ssize_t n) {
  int64_t acc = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!THPVariable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "tensor");
      return nullptr;
    }
    acc += read(args[i]);
  }
  PyObject *r = PyTuple_New(2);
  {
    const at::Tensor &x = THPVariable_Unpack(args[0]);
    auto opt = at::TensorOptions().dtype(at::kFloat).device(x.device());
    for (int j = 0; j < 2; j++) {
      at::Tensor t = at::empty_strided({64, 256}, {256, 1}, opt);
      acc += (int64_t)(intptr_t)t.data_ptr();
      PyTuple_SET_ITEM(r, j, THPVariable_Wrap(std::move(t)));
    }
  }
  sink = acc;
  return r;
}

// call_out(x, y, w, b, o0, o1): reads 6 tensors, returns (o0, o1)
static PyObject *call_out(PyObject *, PyObject *const *args, Py_ssize_t n) {
  int64_t acc = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!THPVariable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "tensor");
      return nullptr;
    }
    acc += read(args[i]);
  }
  sink = acc;
  return PyTuple_Pack(2, args[n - 2], args[n - 1]);
}

static PyMethodDef methods[] = {
    {"call_alloc", (PyCFunction)(void (*)(void))call_alloc, METH_FASTCALL, ""},
    {"call_out", (PyCFunction)(void (*)(void))call_out, METH_FASTCALL, ""},
    {nullptr, nullptr, 0, nullptr}};
static PyModuleDef mod = {PyModuleDef_HEAD_INIT, "bench_torch_cpp", "", -1, methods};
PyMODINIT_FUNC PyInit_bench_torch_cpp(void) { return PyModule_Create(&mod); }
