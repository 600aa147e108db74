#!/usr/bin/env python3
"""On the GPU machine: the Python binding's fast calls (issue 21, item 3).

- results of tests/graphs/python_fastcall.fg's graphs (static, symbolic,
  scalar parameters, view results) against eager PyTorch, allocated and
  with out=, through the fast path (fusec._fgcall) and through ctypes;
- the binding's and the loader's messages for a wrong dtype, device, shape;
- fusec.register: the custom operator captured into a CUDA graph and
  replayed on new inputs, and torch.compile(fullgraph=True) over a function
  calling it (static and dynamic sizes);
- host time per call (wall clock of back-to-back calls without a
  synchronization, as bench/bench.py measures host time; median over
  batches) of the 4-input 2-result graph: fast path with results allocated
  and with out=, the same with fgl_run stubbed (python/tests/fgl_stub_run.c,
  built with $CC or cc: the binding alone), the ctypes path, the registered
  operator, and PyTorch's own calls as the floor (among them one shared
  allocation with two views, and the tensor reads); printed as a table for
  docs/benchmarks.md;
- results written in place (the second artifact, from
  tests/graphs/python_inplace.fg: fastcall_inplace, fastcall_inplace_sym):
  the parameter's tensor returned, updated, on both paths; out=; the
  registered operator (its schema marks the parameters mutated), captured
  into a CUDA graph (each replay updates them again) and under
  torch.compile(fullgraph=True).

  FGLOAD_LIBRARY=build-gpu/loader/libfgload.so FUSEC_FGCALL=build-gpu/python/fusec/_fgcall*.so \\
      python3 tests/gpu/python_fastcall.py .gpu/ptx/tests_graphs__python_fastcall.ptx \
      [.gpu/ptx/tests_graphs__python_inplace.ptx]

Prints one line a check and a summary; exit 1 on a failure.
"""
import datetime
import statistics
import sys
import time

import torch

sys.path.insert(0, "python")
import fusec  # noqa: E402

FAILS = []


def check(ok, what):
    print("%s %s" % ("PASS" if ok else "FAIL", what))
    if not ok:
        FAILS.append(what)


def close(a, b, tol=1e-5):
    return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a.float(), b.float(), rtol=tol, atol=tol)


def ref4(x, y, w, b):
    h = x * w + b
    return h, h * y


def inputs4(t=64):
    return (torch.randn(t, 256, device="cuda"), torch.randn(t, 256, device="cuda"), torch.randn(256, device="cuda"),
            torch.randn(256, device="cuda"))


def refuse(fn, want, what):
    try:
        fn()
    except fusec.FusecError as e:
        check(want in str(e), "%s refused: %s" % (what, e))
        return
    check(False, "%s was not refused" % what)


def correctness(m):
    g = m.graph("fastcall4")
    check(g._fg_stats["ready"] if fusec.FAST_CALLS else True, "fast path bound (%s)" % fusec.FAST_CALLS)
    a = inputs4()
    want = ref4(*a)
    got = g(*a)
    check(all(close(p, q) for p, q in zip(got, want)), "fastcall4 fast path")
    got = g._call_ctypes(*a)
    check(all(close(p, q) for p, q in zip(got, want)), "fastcall4 ctypes path")
    o = (torch.full((64, 256), float("nan"), device="cuda"), torch.full((64, 256), float("nan"), device="cuda"))
    got = g(*a, out=o)
    check(got[0] is o[0] and got[1] is o[1] and all(close(p, q) for p, q in zip(o, want)), "fastcall4 out=")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        got = g(*a)
    s.synchronize()
    check(all(close(p, q) for p, q in zip(got, want)), "fastcall4 on a side stream (current stream)")
    got = g(*a, stream=s)
    s.synchronize()
    check(all(close(p, q) for p, q in zip(got, want)), "fastcall4 stream=torch.cuda.Stream")

    gs = m.graph("fastcall4_sym")
    for t in (1, 37, 64, 1000, 4097, 37):
        a = inputs4(t)
        got = gs(*a)
        check(all(close(p, q) for p, q in zip(got, ref4(*a))), "fastcall4_sym T=%d" % t)

    gv = m.graph("fastcall_views")
    x = torch.randn(37, 99, device="cuda", dtype=torch.bfloat16)
    y, s_, xt, ys = gv(x, 1.5)
    yr = x.float() * 1.5
    check(close(y, yr) and close(s_, yr.sum(1), 1e-4) and xt.data_ptr() == x.data_ptr() and torch.equal(xt, x.t())
          and ys.data_ptr() == y.data_ptr() + 4 and torch.equal(ys, y[:, 1:]), "fastcall_views (scalar, views)")

    gr = m.graph("fastcall_sym_rows")
    for t in (1, 5, 300):
        x = torch.randn(t, 99, device="cuda")
        y, mx = gr(x, 3)
        check(close(y, x + 3) and close(mx, (x + 3).amax(1)), "fastcall_sym_rows T=%d" % t)

    a = inputs4()
    refuse(lambda: g(a[0].double(), *a[1:]), "input 0 ('x'): expected f32[64,256] strides [256,1], got f64[64,256]",
           "wrong dtype")
    refuse(lambda: g(a[0], a[1].cpu(), *a[2:]), "input 1 ('y'): tensor on cpu, the module runs on cuda:0",
           "wrong device")
    refuse(lambda: g(a[0], a[1], a[2][:100], a[3]), "input 2 ('w'): expected f32[256] strides [1], got f32[100]",
           "wrong shape")
    refuse(lambda: g(*a, out=(torch.empty(64, 256, device="cuda"), torch.empty(64, 255, device="cuda"))),
           "output 1", "wrong out= shape")
    st = g._fg_stats
    check(st["fast"] > 0, "fast-path calls counted: %s" % st)


def custom_op(m):
    op = fusec.register(m, "fastcall4")
    a = inputs4()
    check(all(close(p, q) for p, q in zip(op(*a), ref4(*a))), "registered op fusec::fastcall4")

    # CUDA-graph capture and replay
    static = inputs4()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op(*static)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(s)
    cg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cg):
        outs = op(*static)
    ok = True
    for k in range(3):
        new = inputs4()
        for d, v in zip(static, new):
            d.copy_(v)
        cg.replay()
        torch.cuda.synchronize()
        ok &= all(close(p, q) for p, q in zip(outs, ref4(*new)))
    check(ok, "CUDA graph: capture of the registered op, 3 replays on new inputs")

    # torch.compile(fullgraph=True) over a function calling it
    def f(x, y, w, b):
        h, r = op(torch.relu(x), y, w, b)
        return r.sum(dim=1) + h[:, 0]

    def fref(x, y, w, b):
        h, r = ref4(torch.relu(x), y, w, b)
        return r.sum(dim=1) + h[:, 0]

    cf = torch.compile(f, fullgraph=True)
    a = inputs4()
    check(close(cf(*a), fref(*a), 1e-3), "torch.compile(fullgraph=True) over fusec::fastcall4")
    ops = fusec.register(m, "fastcall4_sym")
    cs = torch.compile(lambda x, y, w, b: ops(x, y, w, b)[1] * 2, fullgraph=True, dynamic=True)
    ok = True
    for t in (8, 100, 333):
        a = inputs4(t)
        ok &= close(cs(*a), ref4(*a)[1] * 2, 1e-4)
    check(ok, "torch.compile(fullgraph=True, dynamic=True) over fusec::fastcall4_sym, T = 8, 100, 333")
    vop = fusec.register(m, "fastcall_views")
    cv = torch.compile(lambda x: vop(x, 2.0)[3] + 1, fullgraph=True)
    x = torch.randn(37, 99, device="cuda", dtype=torch.bfloat16)
    try:  # a view of a parameter: refused under torch.compile (fusec._ops)
        cv(x)
        check(False, "torch.compile over a graph whose results view its parameters is refused")
    except Exception as e:  # Dynamo wraps the error
        check("views of its parameters" in str(e),
              "torch.compile over a graph whose results view its parameters is refused")
    rop = fusec.register(m, "fastcall_rview")
    cr = torch.compile(lambda x: rop(x, 2.0)[1] + 1, fullgraph=True)
    check(close(cr(x), (x.float() * 2)[:, 1:] + 1), "torch.compile over a registered graph with a view of a result")
    return op


def host_us(fn, calls=200, batches=60):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        per.append((t1 - t0) * 1e6 / calls)
    torch.cuda.synchronize()
    return statistics.median(per)


def stub_graph(m):
    """An instance of fastcall4 whose fast path calls python/tests/fgl_stub_run.c's
    fgl_run (checks and launches nothing): the binding's own host time. None
    when no C compiler is here."""
    import ctypes
    import os
    import subprocess
    import tempfile

    so = os.path.join(tempfile.mkdtemp(prefix="fgl-stub-"), "libfgl_stub_run.so")
    try:
        subprocess.check_call([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-I", "loader",
                               "python/tests/fgl_stub_run.c", "-o", so])
    except (OSError, subprocess.CalledProcessError):
        return None
    if not fusec.FAST_CALLS:
        return None
    g = m.graph("fastcall4")
    stub, dll = ctypes.CDLL(so), g._dll

    class StubRun:
        fgl_run = stub.fgl_run

        def __getattr__(self, name):
            return getattr(dll, name)

    g._dll = StubRun()
    g._setup_fast()
    return g


def timing(m, op):
    g = m.graph("fastcall4")
    x, y, w, b = inputs4()
    o = (torch.empty(64, 256, device="cuda"), torch.empty(64, 256, device="cuda"))
    six = (x, y, w, b) + o
    gs = stub_graph(m)
    stub_rows = [] if gs is None else [
        ("fast path, fgl_run stubbed (the binding alone), results allocated", lambda: gs(x, y, w, b)),
        ("fast path, fgl_run stubbed (the binding alone), out=", lambda: gs(x, y, w, b, out=o)),
    ]
    rows = stub_rows + [
        ("fusec fast path, results allocated", lambda: g(x, y, w, b)),
        ("fusec fast path, out=", lambda: g(x, y, w, b, out=o)),
        ("fusec ctypes path, results allocated", lambda: g._call_ctypes(x, y, w, b)),
        ("fusec ctypes path, out=", lambda: g._call_ctypes(x, y, w, b, out=o)),
        ("torch.ops.fusec.fastcall4 (custom op)", lambda: op(x, y, w, b)),
        ("floor: torch.cuda._sleep(0) (one launch through torch)", lambda: torch.cuda._sleep(0)),
        ("floor: torch.add(x, y, out=o) (one op, no allocation)", lambda: torch.add(x, y, out=o[0])),
        ("floor: torch.empty_strided x2 (the allocations alone)",
         lambda: (torch.empty_strided((64, 256), (256, 1), dtype=torch.float32, device="cuda"),
                  torch.empty_strided((64, 256), (256, 1), dtype=torch.float32, device="cuda"))),
        ("floor: torch.empty of both + 2 as_strided views (one shared allocation)",
         lambda: (lambda base: (base.as_strided((64, 256), (256, 1), 0), base.as_strided((64, 256), (256, 1), 16384)))(
             torch.empty(32768, dtype=torch.float32, device="cuda"))),
        ("floor: reading 6 tensors (dtype, get_device(), shape, stride(), data_ptr() each)",
         lambda: [(t.dtype, t.get_device(), t.shape, t.stride(), t.data_ptr()) for t in six]),
        ("floor: the current stream's handle (_cuda_getCurrentRawStream, once a call)",
         lambda: fusec._raw_stream(torch, 0)),
        ("eager: the same graph in torch (3 ops)", lambda: ref4(x, y, w, b)),
    ]
    res = []
    for _ in range(2):  # two rounds, interleaved: the spread shows the noise
        for i, (name, fn) in enumerate(rows):
            t = host_us(fn)
            res.append((i, t))
    print()
    print("Host time per call, fastcall4 (4 inputs f32 [64,256]/[256], 2 results, 1 kernel): %s, %s, torch %s, "
          "Python %s, %s" % (datetime.date.today(), torch.cuda.get_device_name(), torch.__version__,
                             sys.version.split()[0], fusec.FAST_CALLS))
    print()
    print("| call | host µs (median of 60 batches of 200, two rounds) |")
    print("|---|---|")
    for i, (name, _) in enumerate(rows):
        ts = [t for k, t in res if k == i]
        print("| %s | %s |" % (name, ", ".join("%.2f" % t for t in ts)))
    fast = min(t for k, t in res if k == len(stub_rows))
    fast_out = min(t for k, t in res if k == len(stub_rows) + 1)
    print()
    print("fast path: %.2f µs allocated (target <= 5), %.2f µs with out= (target <= 3)" % (fast, fast_out))
    check(fast <= 5.0, "host time allocated %.2f µs <= 5" % fast)
    check(fast_out <= 3.0, "host time out= %.2f µs <= 3" % fast_out)


def ref_sgd(p, g, buf, lr):
    b1 = buf * 0.9 + g
    p1 = p - lr * b1
    return p1, b1, (p1 * p1).sum(dim=1)


def inplace(m):
    """fastcall_inplace(p, g, buf, lr): p and buf updated in place, the sum
    of squares of the new p written."""
    def fresh():
        return [torch.randn(37, 99, device="cuda") for _ in range(3)]

    g = m.graph("fastcall_inplace")
    for path, call in (("fast path", g), ("ctypes path", g._call_ctypes)):
        p, gr, buf = fresh()
        want = ref_sgd(p, gr, buf, 0.1)
        v0 = p._version
        got = call(p, gr, buf, 0.1)
        check(got[0] is p and got[1] is buf and all(close(a, b, 1e-4) for a, b in zip(got, want)),
              "fastcall_inplace %s: p and buf updated in place and returned" % path)
        check(p._version > v0, "fastcall_inplace %s: p's version counter bumped" % path)
    p, gr, buf = fresh()
    want = ref_sgd(p, gr, buf, 0.1)
    o = torch.empty(37, device="cuda")
    got = g(p, gr, buf, 0.1, out=(p, None, o))
    check(got[0] is p and got[2] is o and all(close(a, b, 1e-4) for a, b in zip(got, want)),
          "fastcall_inplace out=(p, None, o)")
    refuse(lambda: g(p, gr, buf, 0.1, out=(p.clone(), None, o)), "is written in place into input 0 ('p')",
           "out= with another tensor for an in-place result")
    refuse(lambda: g(p, p, buf, 0.1), "overlaps input 1 ('g')", "an in-place parameter passed twice")
    gs = m.graph("fastcall_inplace_sym")
    ok = True
    for t in (1, 37, 1000):
        p, gr = torch.randn(t, 99, device="cuda"), torch.randn(t, 99, device="cuda")
        want = p - 0.01 * gr
        ok &= gs(p, gr) is p and close(p, want)
    check(ok, "fastcall_inplace_sym T = 1, 37, 1000: p updated in place")

    op = fusec.register(m, "fastcall_inplace")
    check(str(op.op._schema).startswith("fusec::fastcall_inplace(Tensor(a0!) p, Tensor g, Tensor(a2!) buf, float lr)"),
          "registered in-place op's schema: %s" % op.op._schema)
    p, gr, buf = fresh()
    want = ref_sgd(p, gr, buf, 0.1)
    got = op(p, gr, buf, 0.1)
    check(got[0] is p and got[1] is buf and all(close(a, b, 1e-4) for a, b in zip(got, want)),
          "registered op fusec::fastcall_inplace")
    # CUDA graph: each replay applies the update again
    p, gr, buf = fresh()
    p0, buf0 = p.clone(), buf.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op(p, gr, buf, 0.1)  # warm-up: one update
    torch.cuda.current_stream().wait_stream(s)
    cg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cg):
        op(p, gr, buf, 0.1)  # captured, not run
    wp, wb = p0, buf0
    for _ in range(3):
        wp, wb, _ = ref_sgd(wp, gr, wb, 0.1)
    cg.replay()
    cg.replay()
    torch.cuda.synchronize()
    check(close(p, wp, 1e-4) and close(buf, wb, 1e-4), "CUDA graph of the in-place op: warm-up + 2 replays = 3 updates")
    # torch.compile: functionalization of the mutating op, the caller's tensors updated
    def f(p, g, buf):
        p1, b1, ss = op(p, g, buf, 0.1)
        return ss * 2 + p1[:, 0], b1.sum()

    cf = torch.compile(f, fullgraph=True)
    p, gr, buf = fresh()
    wp, wb, ws = ref_sgd(p, gr, buf, 0.1)
    r, bs = cf(p, gr, buf)
    check(close(p, wp, 1e-4) and close(buf, wb, 1e-4) and close(r, ws * 2 + wp[:, 0], 1e-3)
          and close(bs, wb.sum(), 1e-3), "torch.compile(fullgraph=True) over fusec::fastcall_inplace")


def main():
    m = fusec.load(sys.argv[1])
    correctness(m)
    if len(sys.argv) > 2:
        inplace(fusec.load(sys.argv[2]))
    else:
        print("SKIP in-place results: no second artifact (tests/graphs/python_inplace.fg)")
    op = custom_op(m)
    timing(m, op)
    print("python_fastcall: %s" % ("all passed" if not FAILS else "%d failed: %s" % (len(FAILS), "; ".join(FAILS))))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
