#!/usr/bin/env python3
"""CPU tests of the fusec Python binding (no GPU needed).

- the ctypes mirror of fgload.h: enum values against the library and the
  header text, every structure's size and field offsets against the C
  compiler's (when `cc` is there);
- library lookup (argument, $FGLOAD_LIBRARY, clean OSError);
- without a driver: a clean FusecError FGL_ERR_NO_DRIVER;
- with the loader's fake driver (tests/loader/fake_cuda.c, whose "device
  memory" is host memory and whose add.ptx kernel runs on the host): loading,
  graph listing and plan info, the loader's errors (I/O, plan, not found),
  the log callback, and — when torch is importable — whole calls on CPU
  tensors: results, views sharing storage, and the loader's mismatch
  messages.

Run: python3 python/tests/test_plan.py [-v]. Finds libfgload through
$FGLOAD_LIBRARY or build/loader/libfgload.so, the fake driver through
$FGL_FAKE_CUDA or build/loader/tests/libfake_cuda.so. Exit 77 (skipped) when
the library is not built; tests needing torch or the fake driver skip alone.
"""
import ctypes
import ctypes.util
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

import fusec  # noqa: E402
from fusec import _capi  # noqa: E402

CC = os.environ.get("CC") or "cc"
HEADER = os.path.join(ROOT, "loader", "fgload.h")
ADD_PTX = os.path.join(ROOT, "tests", "loader", "add.ptx")
SYM_PTX = os.path.join(ROOT, "tests", "loader", "sym.ptx")


def find_lib():
    env = os.environ.get("FGLOAD_LIBRARY")
    if env:
        return env if os.path.exists(env) else None
    p = os.path.join(ROOT, "build", "loader", "libfgload.so")
    return p if os.path.exists(p) else None


def find_fake():
    env = os.environ.get("FGL_FAKE_CUDA")
    if env:
        return env if os.path.exists(env) else None
    p = os.path.join(ROOT, "build", "loader", "tests", "libfake_cuda.so")
    return p if os.path.exists(p) else None


LIB = find_lib()
FAKE = find_fake()
HAVE_TORCH = importlib.util.find_spec("torch") is not None

# Scenario sub-suites run in child processes: libfgload opens the driver once
# per process, so "no driver" and "fake driver" cannot share one.
SCENARIO = os.environ.get("FUSEC_TEST_SCENARIO", "")


def run_scenario(test, name, extra_env, cls):
    env = dict(os.environ)
    env.update(extra_env)
    env["FUSEC_TEST_SCENARIO"] = name
    env["FGLOAD_LIBRARY"] = LIB
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "-v", cls], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    sys.stderr.write(p.stdout)
    test.assertEqual(p.returncode, 0, "scenario %s failed" % name)
    ran = re.findall(r"^Ran (\d+) tests?", p.stdout, re.M)
    skipped = re.findall(r"skipped=(\d+)", p.stdout)
    CHILD_COUNTS[0] += int(ran[-1]) if ran else 0
    CHILD_COUNTS[1] += int(skipped[-1]) if skipped else 0


CHILD_COUNTS = [0, 0]  # tests run and skipped in the scenario children


class HeaderMirror(unittest.TestCase):
    """_capi against fgload.h and the library."""

    def setUp(self):
        self.dll, _ = fusec.library(LIB)

    def test_dtypes_match_library(self):
        self.assertEqual(_capi.DTYPE_COUNT, 14)
        for i, (name, size, is_float) in enumerate(_capi.DTYPES):
            self.assertEqual(self.dll.fgl_dtype_name(i).decode(), name)
            self.assertEqual(self.dll.fgl_dtype_size(i), size, name)
            self.assertEqual(bool(self.dll.fgl_dtype_is_float(i)), is_float, name)
            self.assertEqual(fusec.dtype_size(name, LIB), size)
        self.assertEqual(self.dll.fgl_dtype_name(_capi.DTYPE_COUNT).decode(), "?")
        self.assertEqual(self.dll.fgl_dtype_size(_capi.DTYPE_COUNT), 0)
        self.assertEqual(_capi.FGL_BF16, 7)
        self.assertEqual(_capi.FGL_F8E5M2, 11)

    def test_status_names_match_library(self):
        for i, name in enumerate(_capi.STATUS_NAMES):
            self.assertEqual(self.dll.fgl_status_name(i).decode(), name)
        self.assertEqual(_capi.FGL_ERR_MISMATCH, 8)

    @unittest.skipUnless(os.path.exists(HEADER), "loader/fgload.h not found")
    def test_enums_match_header(self):
        with open(HEADER) as f:
            text = f.read()

        def enum_body(name):
            m = re.search(r"typedef enum %s \{(.*?)\}" % name, text, re.S)
            self.assertIsNotNone(m, name)
            body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
            return [re.sub(r"\s*=.*", "", t).strip() for t in body.split(",") if t.strip()]

        self.assertEqual(enum_body("fgl_status"), list(_capi.STATUS_NAMES))
        dts = enum_body("fgl_dtype")
        self.assertEqual(dts[-1], "FGL_DTYPE_COUNT")
        self.assertEqual([d[len("FGL_"):].lower() for d in dts[:-1]], list(_capi.DTYPE_NAMES))
        self.assertEqual(enum_body("fgl_log_level"), ["FGL_LOG_DEBUG", "FGL_LOG_INFO", "FGL_LOG_WARN"])
        self.assertIn("#define FGL_ABI_VERSION %d " % _capi.ABI_VERSION, text)
        self.assertIn("#define FGL_MAX_RANK %d" % _capi.MAX_RANK, text)
        # Every exported function of the header has a prototype here.
        decl = set(re.findall(r"^(?:fgl_status|void|int|const char \*)\s*(fgl_\w+)\(", text, re.M))
        self.assertEqual(decl - set(_capi.PROTOTYPES), set())

    @unittest.skipUnless(shutil.which(CC) and os.path.exists(HEADER), "no C compiler or header")
    def test_struct_layouts_match_c(self):
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "fgload.h"', "int main(void) {"]
        for cname, cls in _capi.STRUCTS.items():
            lines.append('printf("%s size %%zu\\n", sizeof(%s));' % (cname, cname))
            for fname, _ in cls._fields_:
                lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (cname, fname, cname, fname))
        lines += ['printf("fgl_dtype size %zu\\n", sizeof(fgl_dtype));', "return 0; }"]
        d = tempfile.mkdtemp()
        try:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines))
            subprocess.run([CC, "-std=c11", "-I", os.path.dirname(HEADER), src, "-o", exe], check=True)
            out = subprocess.run([exe], check=True, stdout=subprocess.PIPE, text=True).stdout
        finally:
            shutil.rmtree(d)
        c = dict(line.rsplit(" ", 1) for line in out.splitlines())
        self.assertEqual(int(c["fgl_dtype size"]), ctypes.sizeof(_capi.c_enum))
        for cname, cls in _capi.STRUCTS.items():
            self.assertEqual(int(c[cname + " size"]), ctypes.sizeof(cls), cname)
            for fname, _ in cls._fields_:
                self.assertEqual(int(c["%s.%s" % (cname, fname)]), getattr(cls, fname).offset, cname + "." + fname)


class LibrarySearch(unittest.TestCase):
    def test_argument_wins_and_missing_is_oserror(self):
        with self.assertRaises(OSError) as cm:
            _capi.open_library("/nonexistent/libfgload.so")
        self.assertIn("/nonexistent/libfgload.so (argument)", str(cm.exception))
        self.assertIn("FGLOAD_LIBRARY", str(cm.exception))

    def test_env_variable(self):
        old = os.environ.get("FGLOAD_LIBRARY")
        try:
            os.environ["FGLOAD_LIBRARY"] = LIB
            dll, path = _capi.open_library()
            self.assertEqual(path, LIB)
            os.environ["FGLOAD_LIBRARY"] = "/nonexistent/x.so"
            with self.assertRaises(OSError) as cm:
                _capi.open_library()
            self.assertIn("$FGLOAD_LIBRARY", str(cm.exception))
        finally:
            if old is None:
                os.environ.pop("FGLOAD_LIBRARY", None)
            else:
                os.environ["FGLOAD_LIBRARY"] = old

    def test_not_libfgload(self):
        libc = ctypes.util.find_library("c")
        if not libc:
            self.skipTest("no libc name")
        with self.assertRaises(OSError) as cm:
            _capi.open_library(libc)
        self.assertIn("lacks fgl_", str(cm.exception))


class Scenarios(unittest.TestCase):
    """Runs the driver-dependent suites below in child processes."""

    def test_no_driver(self):
        run_scenario(self, "nodriver", {"FGL_LIBCUDA": "/nonexistent/libcuda.so.1"}, "NoDriver")

    @unittest.skipUnless(FAKE, "the fake driver (build/loader/tests/libfake_cuda.so) is not built")
    def test_fake_driver_no_device(self):
        run_scenario(self, "nodevice", {"FGL_LIBCUDA": FAKE, "FAKE_CUDA_DEVICES": "0"}, "NoDevice")

    @unittest.skipUnless(FAKE, "the fake driver (build/loader/tests/libfake_cuda.so) is not built")
    def test_fake_driver(self):
        cache = tempfile.mkdtemp()
        try:
            run_scenario(self, "fake", {"FGL_LIBCUDA": FAKE, "FUSEC_CACHE_DIR": cache}, "FakeDriver")
        finally:
            shutil.rmtree(cache)


def scenario(name):
    return unittest.skipUnless(SCENARIO == name, "runs in a child process (scenario %s)" % name)


@scenario("nodriver")
class NoDriver(unittest.TestCase):
    def test_load_fails_cleanly(self):
        with self.assertRaises(fusec.FusecError) as cm:
            fusec.load(ADD_PTX, LIB)
        e = cm.exception
        self.assertEqual(e.status, "FGL_ERR_NO_DRIVER")
        self.assertEqual(e.code, _capi.FGL_ERR_NO_DRIVER)
        self.assertTrue(e.msg)
        self.assertIn("FGL_ERR_NO_DRIVER: ", str(e))
        # and again: the failure is stable, nothing leaks or crashes
        with self.assertRaises(fusec.FusecError):
            fusec.load(ADD_PTX, LIB)


@scenario("nodevice")
class NoDevice(unittest.TestCase):
    def test_no_device(self):
        with self.assertRaises(fusec.FusecError) as cm:
            fusec.load(ADD_PTX, LIB)
        self.assertEqual(cm.exception.status, "FGL_ERR_NO_DRIVER")
        self.assertIn("no CUDA device", cm.exception.msg)


@scenario("fake")
class FakeDriver(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        fusec._HOST_TENSORS_FOR_TESTS = HAVE_TORCH
        cls.m = fusec.load(ADD_PTX, LIB)

    def test_graphs_and_info(self):
        m = self.m
        self.assertEqual(m.graphs(), ["axpy", "ident"])
        self.assertEqual(m.info("axpy"), fusec.GraphInfo("axpy", 3, 3, 1, 1))
        with self.assertRaises(fusec.FusecError) as cm:
            m.info("nope")
        self.assertEqual(cm.exception.status, "FGL_ERR_NOT_FOUND")
        with self.assertRaises(fusec.FusecError) as cm:
            m.graph("nope")
        self.assertEqual(cm.exception.status, "FGL_ERR_NOT_FOUND")
        d = m.device_info()
        self.assertEqual(d["name"], "Fake GPU")
        self.assertEqual(d["cc"], (9, 0))
        self.assertEqual(d["driver_version"], 12040)
        self.assertIn("cache_hit", m.load_stats())

    def test_params_results(self):
        g = self.m.graph("axpy")
        self.assertEqual(g.name, "axpy")
        self.assertEqual(g.n_kernels, 1)
        self.assertEqual(g.params, (
            fusec.ParamInfo(0, "x", "f32", False, (1048576,), (1,)),
            fusec.ParamInfo(1, "y", "f32", False, (1048576,), (1,)),
            fusec.ParamInfo(2, "alpha", "f32", True, (), ()),
        ))
        self.assertEqual(g.results, (
            fusec.ResultInfo(0, "f32", (1048576,), (1,), False, None, 0),
            fusec.ResultInfo(1, "f32", (1024, 1024), (1024, 1), True, ("param", 0), 0),
            fusec.ResultInfo(2, "f32", (1024,), (1,), True, ("result", 0), 1024),
        ))
        self.assertIn("axpy(x: f32[1048576]", repr(g))
        g.close()
        g.close()

    def test_symbolic_info(self):
        m = fusec.load(SYM_PTX, LIB)
        g = m.graph("axpy_n")
        self.assertTrue(g.symbolic)
        self.assertEqual(g.syms, (fusec.SymInfo(0, "N", 0, 1073741824, 4),))
        self.assertEqual(g.params, (
            fusec.ParamInfo(0, "x", "f32", False, ("N",), (1,)),
            fusec.ParamInfo(1, "y", "f32", False, ("N",), (1,)),
            fusec.ParamInfo(2, "alpha", "f32", True, (), ()),
        ))
        self.assertEqual(g.results, (
            fusec.ResultInfo(0, "f32", ("N",), (1,), False, None, 0),
            fusec.ResultInfo(1, "f32", (None,), (1,), True, ("result", 0), None),
        ))
        self.assertIn("axpy_n(x: f32[N], y: f32[N], alpha: f32)", repr(g))
        t = m.graph("tview")
        self.assertEqual([s.name for s in t.syms], ["B", "T"])
        self.assertEqual(t.params[0].shape, ("B", "T"))
        self.assertEqual(t.params[0].strides, (None, 1))
        self.assertEqual(t.results[0].shape, ("T", "B"))
        s = self.m.graph("axpy")
        self.assertFalse(s.symbolic)
        self.assertEqual(s.syms, ())
        m.close()

    def test_io_and_plan_errors(self):
        with self.assertRaises(fusec.FusecError) as cm:
            fusec.load("/nonexistent/model.ptx", LIB)
        self.assertEqual(cm.exception.status, "FGL_ERR_IO")
        d = tempfile.mkdtemp()
        try:
            bad = os.path.join(d, "bad.ptx")
            with open(bad, "w") as f:
                f.write("// fusec-plan 2\n// target sm_80\n// graph g params 1 results 0 temps 0 kernels 0 syms 0\n"
                        "// param 0 x f99 [4] strides [1]\n// end\n")
            with self.assertRaises(fusec.FusecError) as cm:
                fusec.load(bad, LIB)
            self.assertEqual(cm.exception.status, "FGL_ERR_PLAN")
            self.assertIn("line 4", cm.exception.msg)
            # an artifact of plan version 1 (before symbolic sizes)
            with open(bad, "w") as f:
                f.write("// fusec-plan 1\n// target sm_80\n// graph g params 0 results 0 temps 0 kernels 0\n// end\n")
            with self.assertRaises(fusec.FusecError) as cm:
                fusec.load(bad, LIB)
            self.assertEqual(cm.exception.status, "FGL_ERR_PLAN")
            self.assertIn("plan version 1, this loader reads versions 2 to 5: recompile the model with this fusec",
                          cm.exception.msg)
        finally:
            shutil.rmtree(d)

    def test_log_callback_reaches_logging(self):
        records = []

        class H(logging.Handler):
            def emit(self, r):
                records.append(r.getMessage())

        h = H()
        lg = logging.getLogger("fusec")
        lg.addHandler(h)
        lg.setLevel(logging.DEBUG)
        try:
            m = fusec.load(ADD_PTX, LIB)
            m.close()
        finally:
            lg.removeHandler(h)
        self.assertTrue(any(r.startswith("fgload: loaded") for r in records), records)

    def test_close_order(self):
        m = fusec.load(ADD_PTX, LIB)
        g = m.graph("ident")
        m.close()  # closes g first
        with self.assertRaises(fusec.FusecError):
            g._call("fgl_graph_get_info", ctypes.byref(_capi.fgl_graph_info()))
        with self.assertRaises(fusec.FusecError):
            m.graphs()

    def test_module_finalized_before_its_graphs(self):
        # As at interpreter exit, when the collector clears weak references
        # first and finalizes a module before its graphs: the module frees
        # the graph handles, and the graphs' own close() frees nothing twice.
        m = fusec.load(ADD_PTX, LIB)
        g1, g2 = m.graph("ident"), m.graph("axpy")
        m._graphs.discard(g1)
        m._graphs.discard(g2)
        m.close()
        g1.close()
        g2.__del__()
        self.assertIsNone(g1._h)
        # the same from a real reference cycle, in a child process that must exit cleanly
        code = ("import fusec, gc\n"
                "class C: pass\n"
                "for i in range(20):\n"
                "    c = C(); c.c = c; c.m = fusec.load(%r, %r); c.gs = [c.m.graph('ident') for _ in range(3)]\n"
                "    del c\n"
                "gc.collect()\n"
                "k = C(); k.k = k; k.m = fusec.load(%r, %r); k.g = k.m.graph('axpy')\n"
                "print('ok')\n" % (ADD_PTX, LIB, ADD_PTX, LIB))
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")), timeout=120)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "ok"), p.stdout)

    # -- calls (need torch; CPU tensors stand for device memory here) --

    def need_torch(self):
        if not HAVE_TORCH:
            self.skipTest("torch is not installed")

    def test_call_axpy_results_and_views(self):
        self.need_torch()
        import torch

        g = self.m.graph("axpy")
        n = 1 << 20
        x = torch.randn(n)
        y = torch.randn(n)
        for alpha in (2.0, 3):  # an int passes for a float scalar
            out, xv, ov = g(x, y, alpha)
            self.assertTrue(torch.equal(out, x + float(alpha) * y))
            self.assertEqual(out.dtype, torch.float32)
            self.assertEqual(xv.shape, (1024, 1024))
            self.assertEqual(xv.data_ptr(), x.data_ptr())
            self.assertEqual(xv.untyped_storage().data_ptr(), x.untyped_storage().data_ptr())
            self.assertTrue(torch.equal(xv, x.view(1024, 1024)))
            self.assertEqual(ov.data_ptr(), out.data_ptr() + 1024 * 4)
            self.assertTrue(torch.equal(ov, out[1024:2048]))
            x[5] = 42.0  # the view shares storage
            self.assertEqual(xv[0, 5].item(), 42.0)

    def test_view_of_offset_input(self):
        self.need_torch()
        import torch

        g = self.m.graph("ident")
        big = torch.arange(64, dtype=torch.float32)
        x = big[16:48].view(4, 8)  # storage_offset 16
        (t) = g(x)
        self.assertEqual(t.shape, (8, 4))
        self.assertEqual(t.stride(), (1, 8))
        self.assertTrue(torch.equal(t, x.t()))
        self.assertEqual(t.data_ptr(), x.data_ptr())

    def mismatch(self, g, *args, want):
        with self.assertRaises(fusec.FusecError) as cm:
            g(*args)
        self.assertEqual(cm.exception.status, "FGL_ERR_MISMATCH")
        self.assertIn(want, cm.exception.msg)
        return cm.exception

    def test_mismatches_use_the_loaders_messages(self):
        self.need_torch()
        import torch

        g = self.m.graph("axpy")
        n = 1 << 20
        x, y = torch.randn(n), torch.randn(n)
        self.mismatch(g, x.double(), y, 1.0,
                      want="input 0 ('x'): expected f32[1048576] strides [1], got f64[1048576] strides [1]")
        self.mismatch(g, x, y[:1000], 1.0, want="input 1 ('y'): expected f32[1048576] strides [1], got f32[1000]")
        strided = torch.randn(2 * n)[::2]
        self.mismatch(g, strided, y, 1.0, want="got f32[1048576] strides [2]")
        self.mismatch(g, x, y, want="graph 'axpy' takes 3 inputs, got 2")
        self.mismatch(g, x, y, 1.0, 2.0, want="graph 'axpy' takes 3 inputs, got 4")
        self.mismatch(g, x, y, torch.tensor(1.0), want="input 2 ('alpha'): expected a scalar f32, got f32[]")
        self.mismatch(g, x, 1.0, 1.0, want="input 1 ('y'): expected f32[1048576] strides [1], got a scalar f32")
        self.mismatch(g, x.view(1024, 1024), y, 1.0, want="got f32[1024,1024]")
        self.mismatch(g, x, y, "a", want="expected a torch.Tensor or a number, got str")
        self.mismatch(g, x.to(torch.complex64), y, 1.0, want="has no fusec equivalent")
        # the cached argument slots do not hide a later mismatch, nor a later match
        out = g(x, y, 1.0)[0]
        self.assertTrue(torch.equal(out, x + y))
        self.mismatch(g, strided, y, 1.0, want="strides [2]")
        out = g(x, y, 0.5)[0]
        self.assertTrue(torch.equal(out, x + 0.5 * y))

    def test_call_symbolic(self):
        self.need_torch()
        import torch

        m = fusec.load(SYM_PTX, LIB)
        g = m.graph("axpy_n")
        for n in (4096, 1024, 4096, 0, 12, 1 << 16):
            x, y = torch.randn(n), torch.randn(n)
            out, half = g(x, y, 2.0)
            self.assertEqual(out.shape, (n,))
            self.assertTrue(torch.equal(out, x + 2.0 * y), n)
            self.assertEqual(half.shape, (n // 2,))
            self.assertTrue(torch.equal(half, out[n // 2:]))
            if n:
                self.assertEqual(half.data_ptr(), out.data_ptr() + (n // 2) * 4)
        self.mismatch(g, torch.randn(8), torch.randn(12), 1.0,
                      want="size N: parameter 'y' dim 0 is 12, but parameter 'x' dim 0 bound N to 8")
        self.mismatch(g, torch.randn(6), torch.randn(6), 1.0,
                      want="size N = 6 (parameter 'x' dim 0) is not a multiple of 4")
        self.mismatch(g, torch.randn(8), torch.randn(8), want="graph 'axpy_n' takes 3 inputs, got 2")
        self.mismatch(g, torch.randn(8).double(), torch.randn(8), 1.0,
                      want="input 0 ('x'): expected f32[N] strides [1], got f64[8] strides [1]")
        t = m.graph("tview")
        for b, n in ((3, 8), (1, 2), (3, 8)):
            x, y = torch.randn(b, n), torch.randn(n)
            xt, y1 = t(x, y)
            self.assertTrue(torch.equal(xt, x.t()))
            self.assertEqual(xt.data_ptr(), x.data_ptr())
            self.assertTrue(torch.equal(y1, y[1:]))
        self.mismatch(t, torch.randn(3, 8), torch.randn(6),
                      want="size T: parameter 'y' dim 0 is 6, but parameter 'x' dim 1 bound T to 8")
        m.close()

    def test_size_one_dims_ignore_strides(self):
        self.need_torch()
        import torch

        g = self.m.graph("ident")
        x = torch.randn(4, 8)
        t = g(x)
        self.assertTrue(torch.equal(t, x.t()))


def load_tests(loader, tests, pattern):
    # The parent process runs the top-level classes; the scenario classes run
    # in children (named on their command line), so they are not listed here.
    suite = unittest.TestSuite()
    for cls in (HeaderMirror, LibrarySearch, Scenarios):
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


def main():
    if not LIB:
        print("SKIP: libfgload.so not found (set FGLOAD_LIBRARY or build build/loader/libfgload.so)")
        return 77
    prog = unittest.main(exit=False, argv=sys.argv)
    r = prog.result
    if not r.wasSuccessful():
        return 1
    if SCENARIO == "" and r.testsRun and len(r.skipped) == r.testsRun:
        return 77
    if SCENARIO == "":
        run, skipped = r.testsRun + CHILD_COUNTS[0], len(r.skipped) + CHILD_COUNTS[1]
        print("%d passed, 0 failed, %d skipped (scenario tests in child processes included)" % (run - skipped, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
