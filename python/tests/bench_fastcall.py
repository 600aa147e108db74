#!/usr/bin/env python3
"""Host time of a fast call (fusec._fgcall) on the CPU, broken down.

The graph is tests/graphs/python_fastcall.fg's fastcall4 (4 inputs, 2
results, f32[64,256]): the one tests/gpu/python_fastcall.py times on the
GPU. Its fast path is rebound (_fg_setup) to python/tests/fgl_stub_run.c's
fgl_run, which checks and launches nothing, so what is timed is the
binding's own work: reading the tensors, allocating results, the lock, the
result tuple. The parts are timed alone as Python statements (timeit,
median of batches); the C extension calls the same torch methods, so they
cost about the same there, less the bytecode around them (~10-20 ns each).

On the GPU machine the tensors are CUDA tensors: dtype, shape, stride(),
data_ptr() cost the same; allocation goes through torch's caching
allocator (for these small sizes about what CPU empty costs, a free list);
the stream getter (_cuda_getCurrentRawStream) is extra, and fgl_run adds
its ~0.17 us of checks plus cuLaunchKernel.

  FGLOAD_LIBRARY=build/loader/libfgload.so FGL_FAKE_CUDA=build/loader/tests/libfake_cuda.so \\
  FUSEC_FGCALL=build/python/fusec/_fgcall*.so python3 python/tests/bench_fastcall.py [build/tools/fusec] [--calls] [--torch-cpp]

--calls times the calls only (not their parts).
--torch-cpp also builds python/tests/bench_torch_cpp.cpp (the same reads
and allocations through the torch C++ API; $CXX or g++, C++20, a few
minutes) and times it: the floor of a binding that would link libtorch.
"""
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

# glibc gives freed memory back to the system above 128 KiB at the top of the
# heap, so that the results' 2 x 64 KiB would page-fault again at each call;
# torch's caching allocator on the GPU keeps its blocks. Re-run with the
# trimming off so that CPU allocations cost what a free list costs.
if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(1 << 30)
    os.execv(sys.executable, [sys.executable] + sys.argv)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# $BENCH_FUSEC_DIR: another copy of the package (e.g. a checkout of the previous commit's python/)
sys.path.insert(0, os.environ.get("BENCH_FUSEC_DIR") or os.path.join(ROOT, "python"))
os.environ["FGL_LIBCUDA"] = os.environ["FGL_FAKE_CUDA"]
os.environ.setdefault("FUSEC_CACHE_DIR", tempfile.mkdtemp(prefix="fusec-bench-"))

import torch  # noqa: E402

import fusec  # noqa: E402

fusec._HOST_TENSORS_FOR_TESTS = True


def build(tmp, fusec_bin):
    ptx = os.path.join(tmp, "fastcall.ptx")
    subprocess.check_call([fusec_bin, os.path.join(ROOT, "tests", "graphs", "python_fastcall.fg"), "-o", ptx])
    so = os.path.join(tmp, "libfgl_stub_run.so")
    subprocess.check_call([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "loader"),
                           os.path.join(HERE, "fgl_stub_run.c"), "-o", so])
    return ptx, so


class StubRun:
    """The graph's library, but fgl_run is the stub's."""

    def __init__(self, dll, stub):
        self._dll, self.fgl_run = dll, stub.fgl_run

    def __getattr__(self, name):
        return getattr(self._dll, name)


def us(stmt, ns, number=2000, repeat=31):
    """(median, min) µs of the statement: thread CPU time, not wall clock,
    so that other processes on a loaded machine count less."""
    t = timeit.Timer(stmt, globals=ns, timer=time.thread_time)
    r = t.repeat(repeat=repeat, number=number)
    return statistics.median(r) * 1e6 / number, min(r) * 1e6 / number


def torch_cpp(tmp):
    """python/tests/bench_torch_cpp.cpp, built against this torch."""
    import importlib.util
    import sysconfig

    tdir = os.path.dirname(torch.__file__)
    so = os.path.join(tmp, "bench_torch_cpp" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.check_call([os.environ.get("CXX", "g++"), "-O2", "-shared", "-fPIC", "-std=c++20",
                           "-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI),
                           "-I", os.path.join(tdir, "include"),
                           "-I", os.path.join(tdir, "include", "torch", "csrc", "api", "include"),
                           "-I", sysconfig.get_paths()["include"], os.path.join(HERE, "bench_torch_cpp.cpp"), "-o", so,
                           "-L", os.path.join(tdir, "lib"), "-ltorch", "-ltorch_cpu", "-lc10", "-ltorch_python",
                           "-Wl,-rpath," + os.path.join(tdir, "lib")])
    spec = importlib.util.spec_from_file_location("bench_torch_cpp", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    args = [a for a in sys.argv[1:] if a not in ("--torch-cpp", "--calls")]
    fusec_bin = args[0] if args else os.path.join(ROOT, "build", "tools", "fusec")
    tmp = tempfile.mkdtemp(prefix="fusec-bench-")
    ptx, so = build(tmp, fusec_bin)
    m = fusec.load(ptx, os.environ["FGLOAD_LIBRARY"])
    g = m.graph("fastcall4")
    g._dll = StubRun(g._dll, ctypes.CDLL(so))
    g._setup_fast()
    x, y, w, b = torch.randn(64, 256), torch.randn(64, 256), torch.randn(256), torch.randn(256)
    o = (torch.empty(64, 256), torch.empty(64, 256))
    lock = g._lock
    f32 = torch.float32
    ns = dict(globals(), g=g, x=x, y=y, w=w, b=b, o=o, lock=lock, f32=f32, cpu=torch.device("cpu"),
              sz=(64, 256), st=(256, 1), t=x.shape)
    ns["base"] = torch.empty(2 * 64 * 256)
    ns["ese"] = torch.empty_strided
    g(x, y, w, b)
    rows = [
        ("fast call, results allocated (stub fgl_run)", "g(x, y, w, b)"),
        ("fast call, out= (stub fgl_run)", "g(x, y, w, b, out=o)"),
        ("ctypes path, results allocated (stub fgl_run)", "g._call_ctypes(x, y, w, b)"),
        ("part: x.dtype", "x.dtype"),
        ("part: x.get_device()", "x.get_device()"),
        ("part: x.device", "x.device"),
        ("part: x.shape", "x.shape"),
        ("part: x.stride()", "x.stride()"),
        ("part: x.is_contiguous()", "x.is_contiguous()"),
        ("part: x.data_ptr()", "x.data_ptr()"),
        ("part: x.storage_offset()", "x.storage_offset()"),
        ("part: torch.empty_strided(sz, st, dtype=, device=)", "ese(sz, st, dtype=f32, device=cpu)"),
        ("part: torch.empty(2*n, dtype=, device=)", "torch.empty(32768, dtype=f32, device=cpu)"),
        ("part: x.new_empty_strided(sz, st)", "x.new_empty_strided(sz, st)"),
        ("part: base.as_strided(sz, st, off)", "base.as_strided(sz, st, 16384)"),
        ("part: base[off:off+n].view(sz)", "base[16384:32768].view(sz)"),
        ("part: base.view(2, 64, 256).unbind(0)", "base.view(2, 64, 256).unbind(0)"),
        ("part: lock enter/exit", "with lock: pass"),
        ("part: (a, b) tuple", "(x, y)"),
        ("floor: torch.add(x, y, out=o[0])", "torch.add(x, y, out=o[0])"),
    ]
    if "--calls" in sys.argv:  # the calls alone, not the parts
        rows = rows[:3]
    if "--torch-cpp" in sys.argv:
        ns["cpp"] = torch_cpp(tmp)
        rows += [
            ("torch C++ API: 4 reads + 2 allocations (bench_torch_cpp)", "cpp.call_alloc(x, y, w, b)"),
            ("torch C++ API: 6 reads, out= (bench_torch_cpp)", "cpp.call_out(x, y, w, b, o[0], o[1])"),
        ]
    print("| call | host µs on the CPU, thread CPU time: median | min |")
    print("|---|---|---|")
    for name, stmt in rows:
        print("| %s | %.3f | %.3f |" % ((name,) + us(stmt, ns)))
    print("stats:", g._fg_stats)


if __name__ == "__main__":
    main()
