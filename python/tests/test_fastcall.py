#!/usr/bin/env python3
"""CPU tests of the fast call path (fusec._fgcall) and of fusec.register.

Runs through the loader's fake driver (tests/loader/fake_cuda.c: "device
memory" is host memory, its axpy kernels run on the host, other kernels
are recorded and not run), with CPU tensors standing for CUDA ones
(fusec._HOST_TENSORS_FOR_TESTS). Checks:

- the fast path gives the ctypes path's results (values, views sharing
  storage, symbolic sizes, out=, scalars), and reports the same errors:
  wrong dtype, device, shape (naming the parameter), count, type, out=;
- it is the path taken (the extension's call counters), and falls back to
  ctypes only where it must;
- fusec.register: the operator's schema, meta shapes (static, symbolic,
  views), the loader's messages from the fake implementation, a clash of
  names, and torch.compile(fullgraph=True) over a function calling it,
  static and dynamic;
- results written in place (tests/loader/inplace.ptx, plan version 3):
  the parameter's tensor, updated, returned as the result (the same
  object), nothing allocated for it, its version counter bumped; out= for
  it only None or that tensor; overlaps refused by the loader; as an
  operator, the parameter declared mutated (Tensor(a0!)), under
  torch.compile too.

Run with FGLOAD_LIBRARY, FGL_FAKE_CUDA and FUSEC_FGCALL set (ctest does);
exit 77 (skipped) when the library, the fake driver, the extension or
torch is missing. FUSEC_FGCALL=0 runs the same tests on the ctypes path.
"""
import importlib.util
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

LIB = os.environ.get("FGLOAD_LIBRARY")
FAKE = os.environ.get("FGL_FAKE_CUDA")
ADD_PTX = os.path.join(ROOT, "tests", "loader", "add.ptx")
SYM_PTX = os.path.join(ROOT, "tests", "loader", "sym.ptx")
INPLACE_PTX = os.path.join(ROOT, "tests", "loader", "inplace.ptx")
F4_PTX = os.path.join(ROOT, "tests", "loader", "f4.ptx")  # cast(x: f32[64], dtype=f4e2m1)

if not (LIB and FAKE and os.path.exists(LIB) and os.path.exists(FAKE)
        and importlib.util.find_spec("torch") is not None):
    print("SKIP: needs FGLOAD_LIBRARY, FGL_FAKE_CUDA and torch")
    sys.exit(77)
os.environ["FGL_LIBCUDA"] = FAKE
os.environ.setdefault("FUSEC_CACHE_DIR", tempfile.mkdtemp(prefix="fusec-fastcall-"))

import torch  # noqa: E402

import fusec  # noqa: E402

fusec._HOST_TENSORS_FOR_TESTS = True
FAST = fusec.FAST_CALLS is not None


class FastCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = fusec.load(ADD_PTX, LIB)
        cls.ms = fusec.load(SYM_PTX, LIB)

    def stats(self, g):
        return dict(g._fg_stats) if FAST else {"fast": 0, "fallback": 0}

    def test_extension_is_used(self):
        if os.environ.get("FUSEC_FGCALL", "") not in ("", "0"):
            self.assertTrue(FAST, "FUSEC_FGCALL is set but the extension was not loaded")
        if not FAST:
            self.skipTest("ctypes path (FUSEC_FGCALL=0)")
        g = self.m.graph("axpy")
        self.assertTrue(g._fg_stats["ready"])
        x, y = torch.randn(1 << 20), torch.randn(1 << 20)
        g(x, y, 2.0)
        self.assertEqual(g._fg_stats["fast"], 1)
        self.assertEqual(g._fg_stats["fallback"], 0)

    def test_same_results_as_ctypes(self):
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        for alpha in (2.0, 3, True):
            a = g(x, y, alpha)
            b = g._call_ctypes(x, y, alpha)
            for p, q in zip(a, b):
                self.assertTrue(torch.equal(p, q))
                self.assertEqual(p.stride(), q.stride())
            self.assertTrue(torch.equal(a[0], x + float(alpha) * y))
            self.assertEqual(a[1].data_ptr(), x.data_ptr())  # view of an input
            self.assertEqual(a[2].data_ptr(), a[0].data_ptr() + 1024 * 4)  # view of a result
            x[7] = 5.0
            self.assertEqual(a[1][0, 7].item(), 5.0)

    def test_out(self):
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        o = torch.full((n,), float("nan"))
        for call in (g, g._call_ctypes):
            o.fill_(float("nan"))
            r = call(x, y, 0.5, out=(o, None, None))
            self.assertIs(r[0], o)
            self.assertTrue(torch.equal(o, x + 0.5 * y))
            self.assertEqual(r[2].data_ptr(), o.data_ptr() + 4096)
        # a wrong out= tensor: the loader's message names the output
        for call in (g, g._call_ctypes):
            with self.assertRaises(fusec.FusecError) as cm:
                call(x, y, 0.5, out=(torch.empty(n - 4), None, None))
            self.assertIn("output 0", str(cm.exception))
            with self.assertRaises(fusec.FusecError) as cm:
                call(x, y, 0.5, out=(o, o, None))
            self.assertIn("result 1 is a view (of param 0): pass None for it", str(cm.exception))
            with self.assertRaises(fusec.FusecError) as cm:
                call(x, y, 0.5, out=(o,))
            self.assertIn("one entry per result (3", str(cm.exception))
        # out= overlapping an input: the loader's overlap check
        with self.assertRaises(fusec.FusecError) as cm:
            g(x, y, 0.5, out=(x, None, None))
        self.assertIn("overlaps input 0 ('x')", str(cm.exception))
        # afterwards, allocated results again
        r = g(x, y, 1.0)
        self.assertTrue(torch.equal(r[0], x + y))
        self.assertNotEqual(r[0].data_ptr(), o.data_ptr())

    def errors(self, g, args, want, kw=None):
        msgs = []
        for call in (g, g._call_ctypes):
            with self.assertRaises(fusec.FusecError) as cm:
                call(*args, **(kw or {}))
            self.assertEqual(cm.exception.status, "FGL_ERR_MISMATCH")
            self.assertIn(want, cm.exception.msg)
            msgs.append(str(cm.exception))
        self.assertEqual(msgs[0], msgs[1])  # the same message on both paths

    def test_errors_name_the_parameter(self):
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        before = self.stats(g)
        self.errors(g, (x.double(), y, 1.0), "input 0 ('x'): expected f32[1048576] strides [1], got f64[1048576]")
        self.errors(g, (x, y[:1000], 1.0), "input 1 ('y'): expected f32[1048576] strides [1], got f32[1000]")
        self.errors(g, (x, torch.randn(2 * n)[::2], 1.0), "input 1 ('y'): expected f32[1048576] strides [1], got "
                    "f32[1048576] strides [2]")
        self.errors(g, (x, y, torch.tensor(1.0)), "input 2 ('alpha'): expected a scalar f32, got f32[]")
        if FAST:  # the loader's checks came through the fast path
            self.assertEqual(self.stats(g)["fallback"], before["fallback"])
        # what the binding itself checks (the fast path hands these to ctypes)
        self.errors(g, (x, y.to(torch.complex64), 1.0), "input 1 ('y'): dtype torch.complex64 has no fusec equivalent")
        self.errors(g, (x, y), "graph 'axpy' takes 3 inputs, got 2")
        self.errors(g, (x, y, "a"), "input 2 ('alpha'): expected a torch.Tensor or a number, got str")
        self.errors(g, (x, y, 1.0), "out=: expected a sequence", kw={"out": 5})

    def test_contiguous_strides(self):
        """The fast path takes a contiguous tensor's strides from its sizes
        (is_contiguous(), cheaper than stride()); a refusal still shows the
        tensor's own strides (a size-1 dim's stride, which torch and the
        loader ignore) and a non-contiguous tensor is read as it is."""
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        odd = torch.randn(n, 1).t()  # [1, n] strides [1, 1]: contiguous to torch
        self.assertTrue(odd.is_contiguous())
        self.errors(g, (x, odd, 1.0), "input 1 ('y'): expected f32[1048576] strides [1], got f32[1,1048576] strides [1,1]")
        self.errors(g, (x, y, 1.0), "output 0: expected f32[1048576] strides [1], got f32[1,1048576] strides [1,1]",
                    kw={"out": (torch.randn(n, 1).t(), None, None)})
        m = fusec.load(ADD_PTX, LIB)
        t = m.graph("ident")
        for a in (torch.randn(4, 8), torch.randn(8, 4).t().contiguous(), torch.randn(1, 4, 8)[0]):
            self.assertTrue(torch.equal(t(a), a.t()))
        self.errors(t, (torch.randn(8, 4).t(),), "input 0 ('x'): expected f32[4,8] strides [8,1], got f32[4,8] strides [1,4]")
        self.errors(t, (torch.randn(8, 16)[:4, ::2],), "got f32[4,8] strides [16,2]")
        if FAST:
            self.assertEqual(self.stats(g)["fallback"], 0)

    def test_f4(self):
        """f4e2m1 tensors are torch.float4_e2m1fn_x2 (two elements a byte
        along the last dim): results allocated with the last dim halved,
        inputs and out= read as fusec's element shapes, calls through ctypes
        (the fast path does not convert the shapes)."""
        m = fusec.load(F4_PTX, LIB)
        f4 = torch.float4_e2m1fn_x2
        g = m.graph("f4_result")  # cast(x: f32[64], dtype=f4e2m1)
        r = g(torch.randn(64))
        self.assertEqual((r.dtype, tuple(r.shape), r.stride()), (f4, (32,), (1,)))
        o = torch.empty(32, dtype=f4)
        self.assertIs(g(torch.randn(64), out=o), o)
        self.errors(g, (torch.randn(64),), "output 0: expected f4e2m1[64] strides [1], got f4e2m1[128]",
                    kw={"out": torch.empty(64, dtype=f4)})
        io = m.graph("f4_io")  # (q: f4e2m1[4, 8], y: f32[4, 8]) -> cast(q, f32), cast(y, f4e2m1)
        q = torch.zeros(4, 4, dtype=torch.uint8).view(f4)
        a, b = io(q, torch.randn(4, 8))
        self.assertEqual((a.dtype, tuple(a.shape)), (torch.float32, (4, 8)))
        self.assertEqual((b.dtype, tuple(b.shape), b.stride()), (f4, (4, 4), (4, 1)))
        # a [4, 8] tensor of bytes holds [4, 16] elements
        self.errors(io, (torch.zeros(4, 8, dtype=torch.uint8).view(f4), torch.randn(4, 8)),
                    "input 0 ('q'): expected f4e2m1[4,8] strides [8,1], got f4e2m1[4,16] strides [16,1]")
        wide = torch.zeros(4, 8, dtype=torch.uint8).view(f4)
        self.errors(io, (wide[:, ::2], torch.randn(4, 8)),
                    "input 0 ('q'): a float4_e2m1fn_x2 tensor must have stride 1 in its last dim")
        self.errors(io, (torch.zeros(4, 8, dtype=torch.uint8), torch.randn(4, 8)),
                    "input 0 ('q'): expected f4e2m1[4,8] strides [8,1], got u8[4,8]")
        if FAST:  # f4e2m1 graphs take the ctypes path
            self.assertEqual(self.stats(io)["fast"], 0)

    def test_f4_layout(self):
        """The shape mapping on its own: element shapes to packed ones and
        back, and the layouts float4_e2m1fn_x2 cannot hold."""
        self.assertEqual(fusec.torch_layout("f4e2m1", (4, 8), (8, 1)), ((4, 4), (4, 1)))
        self.assertEqual(fusec.torch_layout("f4e2m1", (2, 3, 16), (48, 16, 1)), ((2, 3, 8), (24, 8, 1)))
        self.assertEqual(fusec.torch_layout("f4e2m1", (1, 2), (7, 1)), ((1, 1), (3, 1)))  # a size-1 dim's stride
        self.assertEqual(fusec.torch_layout("f32", (4, 7), (7, 1)), ((4, 7), (7, 1)))
        for shape, strides in (((4, 7), (7, 1)), ((4, 8), (1, 4)), ((3, 8), (9, 1)), ((), ())):
            with self.assertRaises(fusec.FusecError) as cm:
                fusec.torch_layout("f4e2m1", shape, strides)
            self.assertIn("packs two elements a byte along the last dim, which must be even",
                          str(cm.exception))
            self.assertEqual(cm.exception.status, "FGL_ERR_UNSUPPORTED")
        self.assertEqual(fusec._unpacked((4, 4), (4, 1)), ((4, 8), (8, 1)))
        self.assertEqual(fusec._unpacked((5,), (1,)), ((10,), (1,)))
        self.assertIsNone(fusec._unpacked((4, 4), (1, 4)))
        self.assertEqual(fusec._packed((4, 8), (8, 1), 16), ((4, 4), (4, 1), 8))
        self.assertIsNone(fusec._packed((4, 8), (8, 1), 3))  # a view from an odd element

    def test_wrong_device(self):
        # On the fake driver the module's device is the CPU (index -1); a
        # tensor whose get_device() differs stands for one on another GPU.
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)

        class Elsewhere(torch.Tensor):
            def get_device(self):
                return 1

            @property
            def device(self):
                return torch.device("cuda", 1)

        e = y.as_subclass(Elsewhere)
        self.errors(g, (x, e, 1.0), "input 1 ('y'): tensor on cuda:1, the module runs on cpu")

    def test_vectorcall(self):
        """fusec.Graph is called by vectorcall (no args tuple, no kwargs
        dict); keywords, *args/**kw, a bound __call__ and an unknown
        keyword (handed to the ctypes path: the same TypeError) all work."""
        if not FAST:
            self.skipTest("ctypes path (FUSEC_FGCALL=0)")
        self.assertTrue(type.__getattribute__(fusec.Graph, "__flags__") & (1 << 11))  # Py_TPFLAGS_HAVE_VECTORCALL
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
        before = self.stats(g)
        for r in (g(x, y, 2.0, out=(o, None, None), stream=0), g(*(x, y, 2.0), **{"stream": 0, "out": [o, None, None]}),
                  g.__call__(x, y, 2.0, out=(o, None, None))):
            self.assertIs(r[0], o)
            self.assertTrue(torch.equal(o, x + 2.0 * y))
        self.assertEqual(self.stats(g)["fast"], before["fast"] + 3)
        self.assertEqual(self.stats(g)["fallback"], before["fallback"])
        msgs = []
        for call in (g, g._call_ctypes):
            with self.assertRaises(TypeError) as cm:
                call(x, y, 2.0, bogus=1)
            msgs.append(str(cm.exception))
        self.assertEqual(msgs[0], msgs[1])
        self.assertIn("bogus", msgs[0])

    def test_parameters_and_subclasses(self):
        """nn.Parameter arguments take the fast path (TensorBase's accessors
        called directly), as exact tensors do; other subclasses too, read
        through attribute lookups (they may override them)."""
        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        if FAST:
            self.assertTrue(fusec._fgcall.direct_accessors())

        class Sub(torch.Tensor):
            pass

        before = self.stats(g)
        for a, b in ((torch.nn.Parameter(x), y), (x, torch.nn.Parameter(y, requires_grad=False)),
                     (x.as_subclass(Sub), y)):
            r = g(a, b, 2.0)
            self.assertTrue(torch.equal(r[0], x + 2.0 * y))
            self.assertEqual(r[1].data_ptr(), x.data_ptr())
        if FAST:
            self.assertEqual(self.stats(g)["fast"], before["fast"] + 3)
            self.assertEqual(self.stats(g)["fallback"], before["fallback"])

    def test_other_device_refused(self):
        """A tensor on another device than the module's is refused with the
        binding's message, whether it is a torch.Tensor, an nn.Parameter (read
        through the direct accessors) or an out= tensor: the fast path hands
        it to the ctypes path, which names it. (The module is made to look
        as if on cuda:0, so that the host tensors here are the foreign ones,
        as CPU tensors are on the GPU machine; stream=0: no CUDA here.)"""
        m = fusec.load(ADD_PTX, LIB)
        g = m.graph("axpy")
        g._dev_index, g._dev = 0, "cuda:0"
        g._setup_fast()
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        before = self.stats(g)
        for args in ((x, y, 1.0), (torch.nn.Parameter(x), y, 1.0)):
            self.errors(g, args, "input 0 ('x'): tensor on cpu, the module runs on cuda:0", kw={"stream": 0})
        if FAST:
            self.assertEqual(self.stats(g)["fast"], before["fast"])
            self.assertEqual(self.stats(g)["fallback"], before["fallback"] + 2)
        g.close()

    def test_symbolic(self):
        g = self.ms.graph("axpy_n")
        for n in (4096, 1024, 4096, 0, 12, 1 << 16, 12):
            x, y = torch.randn(n), torch.randn(n)
            out, half = g(x, y, 2.0)
            self.assertTrue(torch.equal(out, x + 2.0 * y), n)
            self.assertEqual(half.shape, (n // 2,))
            self.assertTrue(torch.equal(half, out[n // 2:]))
            o = torch.empty(n)
            r = g(x, y, 2.0, out=(o, None))
            self.assertIs(r[0], o)
            self.assertTrue(torch.equal(o, x + 2.0 * y))
        self.errors(g, (torch.randn(8), torch.randn(12), 1.0),
                    "size N: parameter 'y' dim 0 is 12, but parameter 'x' dim 0 bound N to 8")
        self.errors(g, (torch.randn(6), torch.randn(6), 1.0), "size N = 6 (parameter 'x' dim 0) is not a multiple of 4")
        t = self.ms.graph("tview")  # views only, no kernel
        for b, n in ((3, 8), (1, 2), (3, 8)):
            x, y = torch.randn(b, n), torch.randn(n)
            xt, y1 = t(x, y)
            self.assertTrue(torch.equal(xt, x.t()))
            self.assertEqual(xt.data_ptr(), x.data_ptr())
            self.assertTrue(torch.equal(y1, y[1:]))
        if FAST:
            self.assertEqual(g._fg_stats["fallback"], 0)

    def test_closed(self):
        m = fusec.load(ADD_PTX, LIB)
        g = m.graph("ident")
        x = torch.randn(4, 8)
        self.assertTrue(torch.equal(g(x), x.t()))
        m.close()
        with self.assertRaises(fusec.FusecError) as cm:
            g(x)
        self.assertIn("is closed", str(cm.exception))

    def test_threads(self):
        import threading

        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        want = x + 2.0 * y
        bad = []

        def work():
            for _ in range(20):
                if not torch.equal(g(x, y, 2.0)[0], want):
                    bad.append(1)

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(bad, [])


class Register(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = fusec.load(SYM_PTX, LIB)
        cls.ma = fusec.load(ADD_PTX, LIB)
        # (kept in a tuple: a function as a class attribute would bind self)
        cls.ops = (fusec.register(cls.m, "axpy_n", "test_axpy_n"), fusec.register(cls.ma, "axpy", "test_axpy"))

    @property
    def axpy_n(self):
        return self.ops[0]

    @property
    def axpy(self):
        return self.ops[1]

    def test_schema(self):
        op = self.axpy_n.op
        self.assertEqual(str(op._schema), "fusec::test_axpy_n(Tensor x, Tensor y, float alpha) -> Tensor")
        self.assertEqual(str(self.axpy.op._schema), "fusec::test_axpy(Tensor x, Tensor y, float alpha) -> Tensor")
        with self.assertRaises(ValueError) as cm:
            fusec.register(self.m, "axpy_n", "test_axpy_n")
        self.assertIn("fusec::test_axpy_n is registered already", str(cm.exception))

    def test_runs(self):
        x, y = torch.randn(64), torch.randn(64)
        out, half = self.axpy_n(x, y, 2.0)
        self.assertTrue(torch.equal(out, x + 2.0 * y))
        self.assertTrue(torch.equal(half, out[32:]))
        self.assertEqual(half.data_ptr(), out.data_ptr() + 32 * 4)
        out, xv, ov = self.axpy(torch.randn(1 << 20), torch.randn(1 << 20), 1.0)
        self.assertEqual(xv.shape, (1024, 1024))

    def test_meta_shapes(self):
        out, half = self.axpy_n(torch.empty(100, device="meta"), torch.empty(100, device="meta"), 1.0)
        self.assertEqual((out.shape, out.device.type, out.dtype), ((100,), "meta", torch.float32))
        self.assertEqual(half.shape, (50,))
        out, xv, ov = self.axpy(torch.empty(1 << 20, device="meta"), torch.empty(1 << 20, device="meta"), 1.0)
        self.assertEqual((out.shape, xv.shape, xv.stride(), ov.shape), ((1 << 20,), (1024, 1024), (1024, 1), (1024,)))

    def test_meta_errors(self):
        meta = lambda *s, **k: torch.empty(*s, device="meta", **k)  # noqa: E731
        cases = [
            ((meta(100, dtype=torch.float64), meta(100), 1.0),
             "input 0 ('x'): expected f32[N] strides [1], got f64[100] strides [1]"),
            ((meta(100), meta(104), 1.0), "size N: parameter 'y' dim 0 is 104, but parameter 'x' dim 0 bound N to 100"),
            ((meta(102), meta(102), 1.0), "size N = 102 (parameter 'x' dim 0) is not a multiple of 4"),
            ((meta(100), meta(100, 2), 1.0), "input 1 ('y'): expected f32[N] strides [1], got f32[100,2]"),
        ]
        for args, want in cases:
            with self.assertRaises(fusec.FusecError) as cm:
                self.axpy_n.op(*args)
            self.assertIn(want, str(cm.exception))

    def test_compile_fullgraph(self):
        def f(a, b):
            out, half = self.axpy_n(a, b, 2.0)
            return out * 2, half + 1

        for dynamic in (False, True):
            torch._dynamo.reset()
            cf = torch.compile(f, fullgraph=True, dynamic=dynamic, backend="aot_eager")
            for n in (64, 128, 256):
                x, y = torch.randn(n), torch.randn(n)
                o, h = cf(x, y)
                self.assertTrue(torch.allclose(o, (x + 2 * y) * 2), (dynamic, n))
                self.assertTrue(torch.allclose(h, (x + 2 * y)[n // 2:] + 1), (dynamic, n))


class InPlace(unittest.TestCase):
    """axpy_ip(x, y, alpha) -> (x + alpha * y written, x += alpha * y in
    place); axpy_ip_n: the in-place result alone, N symbolic."""

    @classmethod
    def setUpClass(cls):
        cls.m = fusec.load(INPLACE_PTX, LIB)

    def calls(self, g):
        return (("fast" if FAST else "ctypes", g), ("ctypes", g._call_ctypes))

    def test_info(self):
        g = self.m.graph("axpy_ip")
        self.assertEqual([(r.is_view, r.inplace) for r in g.results], [(False, None), (False, 0)])
        self.assertEqual(g.results[1].shape, (1 << 20,))
        self.assertEqual(self.m.graph("axpy_ip_n").results[0].inplace, 0)

    def test_updates_the_parameter(self):
        g = self.m.graph("axpy_ip")
        n = 1 << 20
        for name, call in self.calls(g):
            x, y = torch.randn(n), torch.randn(n)
            x0, ptr, v0 = x.clone(), x.data_ptr(), x._version
            out, xr = call(x, y, 2.0)
            self.assertIs(xr, x, name)  # the same object, updated
            self.assertEqual(x.data_ptr(), ptr)
            self.assertTrue(torch.equal(x, x0 + 2.0 * y), name)
            self.assertTrue(torch.equal(out, x0 + 2.0 * y), name)  # kernel 0 read x before the update
            self.assertNotEqual(out.data_ptr(), ptr)
            self.assertGreater(x._version, v0, name)  # autograd sees the write
            out, xr = call(x, y, -1.0)  # again: it accumulates
            self.assertIs(xr, x)
            self.assertTrue(torch.equal(x, (x0 + 2.0 * y) + -1.0 * y), name)
        if FAST:
            self.assertEqual(g._fg_stats["fallback"], 0)
            self.assertGreater(g._fg_stats["fast"], 0)

    def test_written_results_only_allocated(self):
        g = self.m.graph("axpy_ip")
        self.assertEqual([w[0] for w in g._written], [0])  # ctypes path: result 0 alone
        self.assertEqual(g._inplace, ((1, 0),))

    def test_one_result_in_place(self):
        g = self.m.graph("axpy_ip_n")
        for name, call in self.calls(g):
            for n in (4096, 12, 0, 1 << 16, 12):
                x, y = torch.randn(n), torch.randn(n)
                x0 = x.clone()
                r = call(x, y, 0.5)
                self.assertIs(r, x, (name, n))  # one result: the tensor itself
                self.assertTrue(torch.equal(x, x0 + 0.5 * y), (name, n))
        if FAST:
            self.assertEqual(g._fg_stats["fallback"], 0)

    def test_out(self):
        g = self.m.graph("axpy_ip")
        n = 1 << 20
        for name, call in self.calls(g):
            x, y, o = torch.randn(n), torch.randn(n), torch.full((n,), float("nan"))
            x0 = x.clone()
            out, xr = call(x, y, 2.0, out=(o, None))
            self.assertIs(out, o)
            self.assertIs(xr, x)
            self.assertTrue(torch.equal(o, x0 + 2.0 * y) and torch.equal(x, x0 + 2.0 * y), name)
            out, xr = call(x, y, 2.0, out=[o, x])  # the parameter's own tensor: accepted
            self.assertIs(xr, x)
            self.assertTrue(torch.equal(x, (x0 + 2.0 * y) + 2.0 * y), name)
        gn = self.m.graph("axpy_ip_n")
        for name, call in self.calls(gn):
            x, y = torch.randn(64), torch.randn(64)
            x0 = x.clone()
            self.assertIs(call(x, y, 1.0, out=x), x)
            self.assertTrue(torch.equal(x, x0 + y), name)
        # any other tensor for it: refused before anything runs
        x, y = torch.randn(n), torch.randn(n)
        x0 = x.clone()
        msgs = []
        for name, call in self.calls(g):
            for bad in (torch.empty(n), x.clone(), x.view(n)):
                with self.assertRaises(fusec.FusecError) as cm:
                    call(x, y, 2.0, out=(torch.empty(n), bad))
                self.assertEqual(cm.exception.status, "FGL_ERR_MISMATCH")
                self.assertIn("out=: result 1 is written in place into input 0 ('x'): pass None (or that "
                              "input's own tensor) for it", cm.exception.msg)
                msgs.append(str(cm.exception))
        self.assertEqual(len(set(msgs)), 1)
        self.assertTrue(torch.equal(x, x0))

    def test_overlap_refused(self):
        g = self.m.graph("axpy_ip")
        n = 1 << 20
        big = torch.randn(3 * n)
        x, y = big[n:2 * n], big[1:n + 1]  # y's last element is x's first
        x0 = x.clone()
        msgs = []
        for name, call in self.calls(g):
            with self.assertRaises(fusec.FusecError) as cm:
                call(x, y, 2.0)
            self.assertEqual(cm.exception.status, "FGL_ERR_MISMATCH")
            self.assertIn("input 0 ('x') [0x", cm.exception.msg)
            self.assertIn("which result 1 overwrites in place, overlaps input 1 ('y')", cm.exception.msg)
            msgs.append(str(cm.exception))
            with self.assertRaises(fusec.FusecError) as cm:
                call(x, y[:n - 1].new_empty(n), 2.0, out=(big[2 * n - 1:3 * n - 1], None))
            self.assertIn("output 0", cm.exception.msg)
            self.assertIn("overlaps input 0 ('x')", cm.exception.msg)
        self.assertEqual(msgs[0], msgs[1])
        self.assertTrue(torch.equal(x, x0))
        # the same tensor for both: refused too
        with self.assertRaises(fusec.FusecError) as cm:
            g(x, x, 1.0)
        self.assertIn("overlaps input 1 ('y')", str(cm.exception))


class RegisterInPlace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = fusec.load(INPLACE_PTX, LIB)
        cls.ops = (fusec.register(cls.m, "axpy_ip", "test_axpy_ip"), fusec.register(cls.m, "axpy_ip_n", "test_axpy_ip_n"))

    def test_schema(self):
        ip, ipn = self.ops
        self.assertEqual(str(ip.op._schema), "fusec::test_axpy_ip(Tensor(a0!) x, Tensor y, float alpha) -> Tensor")
        self.assertEqual(str(ipn.op._schema), "fusec::test_axpy_ip_n(Tensor(a0!) x, Tensor y, float alpha) -> ()")
        self.assertTrue(ip.op._schema.arguments[0].is_write)
        self.assertFalse(ip.op._schema.arguments[1].is_write)

    def test_runs(self):
        ip, ipn = self.ops
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        x0 = x.clone()
        out, xr = ip(x, y, 2.0)
        self.assertIs(xr, x)
        self.assertTrue(torch.equal(out, x0 + 2.0 * y) and torch.equal(x, x0 + 2.0 * y))
        x, y = torch.randn(100), torch.randn(100)
        x0 = x.clone()
        self.assertIs(ipn(x, y, 3.0), x)
        self.assertTrue(torch.equal(x, x0 + 3.0 * y))
        self.assertIsNone(ipn.op(x, y, 0.0))  # the operator itself returns nothing

    def test_meta(self):
        ip, ipn = self.ops
        x, y = torch.empty(1 << 20, device="meta"), torch.empty(1 << 20, device="meta")
        out, xr = ip(x, y, 1.0)
        self.assertEqual((out.shape, out.device.type), ((1 << 20,), "meta"))
        self.assertIs(xr, x)
        with self.assertRaises(fusec.FusecError) as cm:
            ipn.op(torch.empty(100, device="meta"), torch.empty(104, device="meta"), 1.0)
        self.assertIn("size N: parameter 'y' dim 0 is 104, but parameter 'x' dim 0 bound N to 100", str(cm.exception))

    def test_compile_fullgraph(self):
        ip, ipn = self.ops

        def f(a, b):
            out, xr = ip(a, b, 2.0)
            return out * 2, xr + 1

        def fn(a, b):
            r = ipn(a, b, 0.5)
            return r * 3

        torch._dynamo.reset()
        cf = torch.compile(f, fullgraph=True, backend="aot_eager")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        x0 = x.clone()
        o, r = cf(x, y)
        want = x0 + 2.0 * y
        self.assertTrue(torch.equal(x, want))  # the caller's tensor updated
        self.assertTrue(torch.allclose(o, want * 2) and torch.allclose(r, want + 1))
        for dynamic in (False, True):
            torch._dynamo.reset()
            cfn = torch.compile(fn, fullgraph=True, dynamic=dynamic, backend="aot_eager")
            for m in (64, 128, 256):
                x, y = torch.randn(m), torch.randn(m)
                x0 = x.clone()
                r = cfn(x, y)
                self.assertTrue(torch.equal(x, x0 + 0.5 * y), (dynamic, m))
                self.assertTrue(torch.allclose(r, (x0 + 0.5 * y) * 3), (dynamic, m))


if __name__ == "__main__":
    r = unittest.main(exit=False, argv=sys.argv).result
    sys.exit(0 if r.wasSuccessful() else 1)
