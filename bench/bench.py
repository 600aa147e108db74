#!/usr/bin/env python3
"""fusec vs PyTorch on the GPU: every workload of bench/workloads.py, in one
process (resumed in a fresh one if the CUDA context dies; see bench/run.sh).

Per workload: inputs from the graph's signature (seeded normal); the PyTorch
eager reference (bench/refs.py, the graph's ops one by one); fusec's artifact
(precompiled by bench/prepare.sh on the build machine) through the Python
binding (python/fusec) checked against eager BEFORE any timing;
torch.compile(dynamic=False) in the default mode, checked too; then the
timings. A second pass, in priority order while time is left, adds
torch.compile(mode="max-autotune-no-cudagraphs") (the workloads it has no
time for say so).

Timing (the same for every implementation):
- device time: CUDA events around each call, median of N calls (N for about
  0.25 s of device time, 10..200), after 3 warm-up calls; the calls are
  queued behind a torch.cuda._sleep kernel long enough for the host to
  enqueue the whole batch first, so host overhead never shows as device time
  (a batch whose sleep ran out before the host finished is measured again
  with a longer sleep). Inputs are the same every call and L2 is not
  flushed: steady state, small workloads partly run from the 50 MB L2.
  A workload with results written in place (`-> p`, e.g. adamw_inplace)
  updates its inputs at every timed call (the same work each call); its
  checks (fusec's and torch.compile's against eager) each start from a
  fresh copy of the original inputs.
- host overhead: wall-clock time per call of 20 back-to-back calls without
  synchronization (what the caller's thread spends per call: Python, guards,
  allocation of the results, launches), median of 5 repetitions.
- bytes = every input read once (a table read only through gathers, such as
  an embedding's: the rows the gathers read) + every written result written
  once, views nothing (fusec's plan says which results are views; when fusec has no plan
  for a workload, eager's outputs that share no storage with an input or an
  earlier output are counted). fraction = bytes / time / copy bandwidth.
- copy bandwidth: torch device-to-device copy of 512 MiB, (read + written) /
  time, median of 20, at the start of the run and at the end.
- compile time: fusec's, measured by bench/prepare.sh on the build machine
  (.gpu/bench/compile.json) plus the driver's JIT of the PTX here (fresh
  cubin cache, CUDA_CACHE_DISABLE=1); torch.compile's cold: the first call
  with a fresh TORCHINDUCTOR_CACHE_DIR (set by run.sh) after
  torch._dynamo.reset(), after one throw-away compile in the same process
  that absorbs one-time start-up costs (reported separately).

Outputs in --out: bench.json, bench.md, bench.png (written after every
workload, so a cut-off run still leaves its results).
Exit status: 0 done (workloads may have failed: see the outputs), 2 fatal
set-up error, 3 the CUDA context was lost (run.sh resumes in a new process).
"""
import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "16")

import workloads  # noqa: E402

T0 = time.time()
IMPLS = ("fusec", "eager", "compile_default", "compile_max_autotune")
IMPL_LABEL = {"fusec": "fusec", "eager": "eager", "compile_default": "torch.compile",
              "compile_max_autotune": "compile max-autotune"}


def log(msg):
    print("[%6.1f s] %s" % (time.time() - T0, msg), flush=True)


def fatal(msg):
    print("bench.py: FATAL: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(2)


# ---- state (saved after every workload; a resumed process continues it) ----

LOCK = threading.RLock()
STATE = {}
PHASE = [None, None, 0.0]  # workload, phase, start time (read by the watchdog)
PHASE_LIMIT_S = {"compile_default": 300.0, "compile_max_autotune": 300.0}
DEFAULT_PHASE_LIMIT_S = 120.0
if os.environ.get("FGBENCH_PHASE_LIMIT_S"):  # one limit for every phase (the hang self-test)
    DEFAULT_PHASE_LIMIT_S = float(os.environ["FGBENCH_PHASE_LIMIT_S"])
    PHASE_LIMIT_S = {}
# For the self-test of the hang handling (bench/run.sh with BENCH_DRY_RUN_CPU=1): a workload whose
# reference never returns.
TEST_HANG = os.environ.get("FGBENCH_TEST_HANG", "")
MA_SUFFIX = "#max-autotune"  # in_progress of phase 2


def phase(name, what):
    PHASE[:] = [name, what, time.time()]


def save_state(path):
    with LOCK:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(STATE, f, indent=1, default=str)
        os.replace(tmp, path)


def err_text(e):
    s = "%s: %s" % (type(e).__name__, str(e).strip())
    return s if len(s) < 1500 else s[:1500] + " ..."


# ---- device (CUDA; or the CPU for --dry-run-cpu, the self-test without a GPU) ----


class CudaDevice:
    name = "cuda"

    def __init__(self, torch):
        self.torch = torch
        self.sync = torch.cuda.synchronize
        self.empty_cache = torch.cuda.empty_cache
        self.sleep = getattr(torch.cuda, "_sleep", None)

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)


class _HostEvent:
    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3

    def query(self):
        return False


class CpuDevice:
    """Stands in for the GPU in --dry-run-cpu: host clocks, no sleep kernel."""
    name = "cpu"
    sleep = None

    def __init__(self, torch):
        self.torch = torch

    def sync(self):
        pass

    def empty_cache(self):
        pass

    def event(self):
        return _HostEvent()


DEV = None

# ---- timing -------------------------------------------------------------------


class Timer:
    def __init__(self, torch):
        self.torch = torch
        self.have_sleep = DEV.sleep is not None
        self.cycles_per_us = 1500.0
        if self.have_sleep:
            e0, e1 = DEV.event(), DEV.event()
            DEV.sleep(1000)
            DEV.sync()
            e0.record()
            DEV.sleep(20_000_000)
            e1.record()
            DEV.sync()
            self.cycles_per_us = 20_000_000 / max(1.0, e0.elapsed_time(e1) * 1000.0)
        self.events = [DEV.event() for _ in range(26)]

    def host_us(self, fn, calls, reps):
        out = []
        for _ in range(reps):
            DEV.sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            DEV.sync()
            out.append((t1 - t0) * 1e6 / calls)
        return statistics.median(out)

    def measure(self, fn, target_s=0.25):
        """Returns a dict: device µs (median, p10, p90, n), host µs per call."""
        for _ in range(3):
            fn()
        DEV.sync()
        e0, e1 = self.events[0], self.events[1]
        e0.record()
        fn()
        e1.record()
        DEV.sync()
        est_ms = max(e0.elapsed_time(e1), 1e-3)
        big = est_ms > 0.5  # device-bound: fewer calls (the host figure does not need more)
        host = self.host_us(fn, 10 if big else 20, 3 if big else 5)
        n = int(min(200, max(10, target_s * 1000.0 / est_ms)))
        samples, starved, factor = [], 0, 1.5
        while len(samples) < n:
            k = min(25, n - len(samples))
            ev = self.events[:k + 1]
            for attempt in range(4):
                if self.have_sleep:
                    us = min(500_000.0, (host + 10.0) * k * factor + 200.0)  # + the event records
                    DEV.sleep(int(us * self.cycles_per_us))
                for i in range(k):
                    ev[i].record()
                    fn()
                ev[k].record()
                early = self.have_sleep and ev[0].query()  # the batch started before it was all queued
                DEV.sync()
                if not early or attempt == 3:
                    break
                starved += 1
                factor *= 2
            samples += [ev[i].elapsed_time(ev[i + 1]) * 1000.0 for i in range(k)]
        samples.sort()
        q = lambda p: samples[min(len(samples) - 1, int(p * len(samples)))]  # noqa: E731
        return dict(us=statistics.median(samples), us_p10=q(0.1), us_p90=q(0.9), n=len(samples),
                    host_us=host, starved_batches=starved)


def copy_bandwidth(torch, timer):
    nbytes = 512 << 20
    if DEV.name == "cpu":
        nbytes = 64 << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=DEV.name).fill_(0x3C)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ms = []
    e0, e1 = timer.events[0], timer.events[1]
    for _ in range(20):
        e0.record()
        dst.copy_(src)
        e1.record()
        DEV.sync()
        ms.append(e0.elapsed_time(e1))
    del src, dst
    DEV.empty_cache()
    med = statistics.median(ms)
    return dict(gbs=2.0 * nbytes / (med * 1e-3) / 1e9, median_ms=med, min_ms=min(ms), max_ms=max(ms))


# ---- one workload -----------------------------------------------------------------


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


def input_bytes(inputs, ref):
    """Every input read once; a table read only through gathers (fg2torch's
    ref.gathered: llm.c's encoder's wte) counts the rows read."""
    gathered = getattr(ref, "gathered", {})
    return sum(gathered.get(i, t.numel() * t.element_size()) for i, t in enumerate(inputs))


def eager_bytes(inputs, outs, ref=None):
    seen = {storage_ptr(t) for t in inputs}
    n = input_bytes(inputs, ref)
    for o in outs:
        p = storage_ptr(o)
        if p not in seen:
            seen.add(p)
            n += o.numel() * o.element_size()
    return n


def plan_bytes(g, inputs, ref=None):
    import fusec

    n = input_bytes(inputs, ref)
    for r in g.results:
        if not r.is_view:
            numel = 1
            for s in r.shape:
                numel *= s
            # f4e2m1: two elements a byte (the loader's fgl_dtype_bytes)
            n += (numel + 1) // 2 if r.dtype == "f4e2m1" else numel * fusec.dtype_size(r.dtype)
    return n


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,) if not isinstance(x, list) else tuple(x)


def check_outputs(refs, got, want, exact=()):
    """exact: the indices of the results compared bitwise (refs.EXACT)."""
    got = as_tuple(got)
    if len(got) != len(want):
        return dict(ok=False, detail=["%d results, expected %d" % (len(got), len(want))])
    detail, ok = [], True
    for j, (a, b) in enumerate(zip(got, want)):
        good, why = refs.compare(a, b, exact=j in exact)
        ok &= good
        detail.append("result %d: %s%s" % (j, why, "" if good else " MISMATCH"))
    return dict(ok=ok, detail=detail)


def check_timed(check, got, inputs):
    """A timed formulation's results (refs.TIMED) by its own check."""
    ok, detail = check(as_tuple(got), inputs)
    return dict(ok=bool(ok), detail=list(detail))


class Budget:
    """Phase 1 (every workload: eager, fusec, torch.compile default) keeps
    time for the workloads after it; phase 2 (max-autotune, in priority
    order) gets what is left."""

    def __init__(self, deadline):
        self.deadline = deadline
        self.reserve = 20.0  # the final copy measurement and the outputs
        self.ma = []  # seconds per max-autotune compile + timing

    def left(self):
        return self.deadline - self.reserve - time.time()

    def est_ma(self):
        return max(self.ma) if self.ma else 45.0


CURRENT = [None]  # the result being filled (the watchdog saves it if a phase hangs)


def workload_io(wl, ctx):
    """(signature, reference, inputs, eager outputs, fresh) of a workload.
    fresh() gives the inputs to check an implementation with: `inputs`
    themselves, or for a workload that writes results in place into its
    parameters (`-> p`: every call changes its inputs) a new copy of the
    original inputs each time, which eager's outputs were computed from
    too (they share no storage with `inputs`, which the timings update)."""
    torch, refs = ctx["torch"], ctx["refs"]
    tiny = ctx["args"].dry_run_cpu
    text = workloads.fg_text(wl, tiny=tiny)
    sig = workloads.signature(text)
    ref = refs.ref_for_workload(wl, tiny)
    inputs = refs.make_inputs(sig, torch.device(DEV.name), seed=0)
    if workloads.writes_in_place(text):
        original = [t.clone() if torch.is_tensor(t) else t for t in inputs]

        def fresh():
            return [t.clone() if torch.is_tensor(t) else t for t in original]
    else:
        def fresh():
            return inputs
    DEV.sync()
    want = as_tuple(ref(*fresh()))
    DEV.sync()
    return sig, ref, inputs, want, fresh


def compile_and_time(ctx, name, r, mode, ref, inputs, want, fresh, check=None):
    """torch.compile(ref) in `mode` (None: default): cold compile time, check, timing, into r.
    check(outputs, inputs) -> (ok, detail) replaces the comparison with eager's
    outputs (`want`) for a timed formulation (refs.TIMED)."""
    torch, refs, timer = ctx["torch"], ctx["refs"], ctx["timer"]
    t_impl = time.time()
    impl = "compile_default" if mode is None else "compile_max_autotune"
    phase(name, impl)
    cfn = None
    try:
        torch._dynamo.reset()
        cfn = torch.compile(ref, dynamic=False) if mode is None else torch.compile(ref, dynamic=False, mode=mode)
        args = fresh()
        t0 = time.perf_counter()
        out = cfn(*args)
        DEV.sync()
        r["compile_s"] = time.perf_counter() - t0
        r["check"] = check_outputs(refs, out, want) if check is None else check_timed(check, out, args)
        del out
        r.update(timer.measure(lambda: cfn(*inputs)))
        log("%s: %s compiled in %.1f s, %s, %.2f us" % (name, impl, r["compile_s"],
                                                       "check ok" if r["check"]["ok"] else "CHECK FAILED", r["us"]))
    except Exception as e:
        r["error"] = err_text(e)
        log("%s: %s failed: %s" % (name, impl, r["error"][:300]))
    finally:
        cfn = None
        torch._dynamo.reset()
        r["phase_s"] = time.time() - t_impl


def run_workload(wl, ctx, remaining_after):
    """Phase 1: eager, fusec (checked against eager), torch.compile default."""
    torch, refs, timer, budget, prep = ctx["torch"], ctx["refs"], ctx["timer"], ctx["budget"], ctx["prep"]
    import fusec

    name = wl["name"]
    t_start = time.time()
    sig = workloads.signature(workloads.fg_text(wl, tiny=ctx["args"].dry_run_cpu))
    res = dict(name=name, desc=wl["desc"], small=wl["small"], status="running",
               inputs=["%s: %s[%s]" % (n, d, ",".join(map(str, s))) for n, d, s in sig], notes=[])
    for impl in IMPLS:
        res[impl] = {}
    CURRENT[0] = res
    phase(name, "inputs and eager reference")
    if name == TEST_HANG:
        time.sleep(1e6)
    with torch.no_grad():
        sig, ref, inputs, want, fresh = workload_io(wl, ctx)
        res["outputs"] = ["%s[%s]" % (str(t.dtype).replace("torch.", ""), ",".join(map(str, t.shape))) for t in want]
        res["bytes_eager_outputs"] = eager_bytes(inputs, want, ref)
        res["bytes"], res["bytes_source"] = res["bytes_eager_outputs"], "eager outputs (no fusec plan)"

        # -- fusec: load, run once, check against eager
        fz = res["fusec"]
        cinfo = prep["workloads"].get(name)
        g = m = None
        phase(name, "fusec load and check")
        if not cinfo:
            fz.update(supported=False, error="not compiled by bench/prepare.sh (stale .gpu/bench?)")
        elif not cinfo.get("ok"):
            fz.update(supported=False, error="fusec does not compile it: " + cinfo.get("error", "?"))
            log("%s: fusec: NOT SUPPORTED (%s)" % (name, fz["error"]))
        else:
            fz.update(supported=True, compile_s=cinfo["seconds"], kernels=cinfo.get("kernels"))
            try:
                m = fusec.load(os.path.join(ctx["prep_dir"], "ptx", name + ".ptx"))
                with LOCK:
                    if "cuda_driver_version" not in STATE["meta"]:
                        STATE["meta"]["cuda_driver_version"] = m.device_info()["driver_version"]
                st = m.load_stats()
                fz.update(load_ms=st["total_ms"], jit_ms=st["jit_ms"], cache_hit=st["cache_hit"])
                g = m.graph(name)
                res["bytes"], res["bytes_source"] = plan_bytes(g, inputs, ref), "fusec plan"
                fz["views"] = [j for j, r in enumerate(g.results) if r.is_view]
                got = g(*fresh())
                DEV.sync()
                fz["check"] = check_outputs(refs, got, want, refs.EXACT.get(name, ()))
                del got
            except Exception as e:
                fz["error"] = err_text(e)
                if g is not None:
                    g.close()
                g = None
            log("%s: fusec %s" % (name, fz.get("error") or ("check ok" if fz["check"]["ok"] else
                                                             "CHECK FAILED: " + "; ".join(fz["check"]["detail"]))))
        impls = []
        if g is not None:
            impls.append(("fusec", lambda: g(*inputs)))
        timed = refs.timed_for_workload(wl)  # (fn, check, what): eager and compile timed on it
        tref = ref if timed is None else timed[0]
        if timed is not None:
            res["timed_formulation"] = timed[2]
            args = fresh()
            res["eager"]["check"] = check_timed(timed[1], tref(*args), args)
        impls.append(("eager", lambda: tref(*inputs)))
        for impl, fn in impls:
            phase(name, "timing " + impl)
            try:
                res[impl].update(timer.measure(fn))
            except Exception as e:
                res[impl]["error"] = err_text(e)
        if g is not None:
            g.close()
        if m is not None:
            m.close()

        # -- torch.compile, default mode (time-guarded: keeps time for the basic runs after it)
        r = res["compile_default"]
        need = 10.0 + remaining_after * 3.0
        if ctx["args"].skip_compile:
            r["skipped"] = "disabled on the command line"
        elif budget.left() < need:
            r["skipped"] = "time budget: %.0f s left, about %.0f s needed for it and the %d workloads after it" % (
                budget.left(), need, remaining_after)
            log("%s: torch.compile skipped (%s)" % (name, r["skipped"]))
        else:
            compile_and_time(ctx, name, r, None, tref, inputs, want, fresh, None if timed is None else timed[1])
    inputs = want = fresh = None
    gc.collect()
    DEV.sync()
    DEV.empty_cache()
    res["status"] = "done"
    res["seconds"] = time.time() - t_start
    return res


def run_max_autotune(wl, ctx, res):
    """Phase 2: torch.compile(mode="max-autotune-no-cudagraphs"), checked against eager, timed."""
    torch = ctx["torch"]
    r = res["compile_max_autotune"] = {}
    CURRENT[0] = res
    phase(wl["name"], "inputs and eager reference")
    with torch.no_grad():
        sig, ref, inputs, want, fresh = workload_io(wl, ctx)
        if wl["name"] + MA_SUFFIX == TEST_HANG:
            phase(wl["name"], "compile_max_autotune")
            time.sleep(1e6)
        timed = ctx["refs"].timed_for_workload(wl)
        compile_and_time(ctx, wl["name"], r, "max-autotune-no-cudagraphs", ref if timed is None else timed[0],
                         inputs, want, fresh, None if timed is None else timed[1])
    inputs = want = fresh = None
    gc.collect()
    DEV.sync()
    DEV.empty_cache()
    ctx["budget"].ma.append(r.get("phase_s", 0.0))


def derive(st):
    """GB/s and fraction of copy bandwidth of every timed implementation, and
    fusec's speedups (over the best checked torch.compile, and over eager)."""
    copy = st.get("copy_gbs_used") or 0
    empty = [e["us"] for e in st.get("empty_kernel", [])]
    empty_us = statistics.median(empty) if empty else None
    for res in st.get("workloads", {}).values():
        if res.get("status") != "done":
            continue
        res.pop("floor_us", None)
        if empty_us is not None and copy > 0:
            # floor = an empty kernel's device time + bytes at the copy bandwidth
            res["floor_us"] = empty_us + res["bytes"] / (copy * 1e9) * 1e6
        for impl in IMPLS:
            r = res.setdefault(impl, {})
            if r.get("us", 0) > 0 and copy > 0:
                r["gbs"] = res["bytes"] / (r["us"] * 1e-6) / 1e9
                r["fraction"] = r["gbs"] / copy
        ok = lambda r: "us" in r and r.get("check", {}).get("ok")  # noqa: E731
        fz = res["fusec"]
        comp = [res[i]["us"] for i in ("compile_default", "compile_max_autotune") if ok(res[i])]
        res.pop("speedup_vs_best_compile", None)
        res.pop("speedup_vs_eager", None)
        if ok(fz) and comp:
            res["speedup_vs_best_compile"] = min(comp) / fz["us"]
        if ok(fz) and "us" in res["eager"]:
            res["speedup_vs_eager"] = res["eager"]["us"] / fz["us"]


# ---- reports ------------------------------------------------------------------------


def fmt(v, f="%.2f", none="—"):
    return none if v is None else f % v


def impl_cell(r, key="us"):
    if r.get("supported") is False:
        return "unsupported"
    if r.get("skipped"):
        return "skipped"
    if r.get("error"):
        return "error"
    if key not in r:
        return "—"
    bad = r.get("check") and not r["check"]["ok"]
    return ("%.2f" if key == "us" else "%.3f") % r[key] + (" (WRONG)" if bad else "")


def write_md(path):
    with LOCK:
        st = json.loads(json.dumps(STATE, default=str))
    meta = st.get("meta", {})
    L = []
    L.append("# fusec vs PyTorch: benchmark run")
    L.append("")
    L.append("- date: %s" % meta.get("date"))
    L.append("- GPU: %s (driver %s, CUDA driver API %s)" % (meta.get("gpu"), meta.get("driver"),
                                                           meta.get("cuda_driver_version")))
    L.append("- torch %s (CUDA %s), triton %s, Python %s" % (meta.get("torch"), meta.get("torch_cuda"),
                                                             meta.get("triton"), meta.get("python")))
    prep = meta.get("prepare", {})
    L.append("- fusec: commit %s%s, compiled on the build machine (%s CPUs) %s; arch %s, SASS in the artifacts: %s" % (
        prep.get("commit"), " + uncommitted changes" if prep.get("dirty") else "", prep.get("host_cpus"),
        prep.get("date"), prep.get("arch", "?"), prep.get("cubin", "none (PTX, JIT-compiled at load)")))
    cb = st.get("copy_bw", [])
    if cb:
        L.append("- copy bandwidth (torch D2D copy of 512 MiB, read + write, median of 20): %s GB/s; "
                 "fractions use %.0f GB/s" % (", ".join("%.0f (%s)" % (c["gbs"], c["when"]) for c in cb),
                                               st.get("copy_gbs_used", 0)))
    ek = st.get("empty_kernel", [])
    if ek:
        L.append("- empty kernel (torch.cuda._sleep(0), timed as the workloads): %s µs; floor = empty kernel + "
                 "bytes / copy bandwidth" % ", ".join("%.2f" % e["us"] for e in ek))
    if "compile_warmup_s" in meta:
        L.append("- torch.compile one-time start-up (a throw-away compile before the first workload): %.1f s"
                 % meta["compile_warmup_s"])
    L.append("- run: %s; %s" % (st.get("run_note", ""), "attempts (processes): %d" % st.get("attempts", 1)))
    L.append("")
    L.append("Device time: median of CUDA-event-timed calls queued behind a sleep kernel (host overhead excluded), "
             "same inputs every call, no L2 flush. Host: wall-clock per call of 20 back-to-back calls without "
             "synchronization. Fraction: (inputs read once (tables read only by gathers: the rows read) + written results written once, views nothing) / "
             "time / copy bandwidth. Eager = the graph's ops one by one in PyTorch. Speedup = best checked "
             "torch.compile time / fusec time. Every implementation is checked against eager before timing "
             "(relative L2: bf16 1e-2, f32 1e-4, f8 6e-2; WRONG = failed).")
    L.append("")
    L.append("## Device time (µs) and fraction of copy bandwidth")
    L.append("")
    L.append("| workload | shape | MB | fusec µs | floor µs | fusec / floor | eager µs | compile µs | max-autotune µs "
             "| fusec frac | eager frac | compile frac | max-at frac | speedup vs best compile | fusec check |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    wls = st.get("workloads", {})
    order = [w["name"] for w in workloads.W]
    for name in order:
        r = wls.get(name)
        if r is None:
            continue
        if r.get("status") != "done":
            L.append("| %s | %s | | %s | | | | | | | | | | | |" % (name, "; ".join(r.get("inputs", [])),
                                                             r.get("status")))
            continue
        fz = r["fusec"]
        chk = "unsupported" if fz.get("supported") is False else "error" if fz.get("error") else \
            ("ok" if fz.get("check", {}).get("ok") else "FAILED")
        floor = r.get("floor_us")
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, "; ".join(s.split(": ", 1)[1] for s in r["inputs"]),
            ("%.1f" if r["bytes"] >= 1e7 else "%.2f") % (r["bytes"] / 1e6),
            impl_cell(fz), fmt(floor), fmt(fz["us"] / floor if floor and fz.get("us") else None, "%.2fx"),
            impl_cell(r["eager"]), impl_cell(r["compile_default"]),
            impl_cell(r["compile_max_autotune"]),
            impl_cell(fz, "fraction"), impl_cell(r["eager"], "fraction"),
            impl_cell(r["compile_default"], "fraction"), impl_cell(r["compile_max_autotune"], "fraction"),
            fmt(r.get("speedup_vs_best_compile"), "%.2fx"), chk))
    L.append("")
    L.append("## Host overhead per call (µs) and compile time")
    L.append("")
    L.append("| workload | fusec host µs | eager host µs | compile host µs | max-at host µs | fusec kernels | "
             "fusec compile s (build machine) | fusec JIT ms (here) | torch.compile cold s | max-autotune cold s |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for name in order:
        r = wls.get(name)
        if r is None or r.get("status") != "done":
            continue
        fz = r["fusec"]
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, fmt(fz.get("host_us")) if "host_us" in fz else impl_cell(fz),
            fmt(r["eager"].get("host_us")), fmt(r["compile_default"].get("host_us")),
            fmt(r["compile_max_autotune"].get("host_us")), fmt(fz.get("kernels"), "%d"),
            fmt(fz.get("compile_s"), "%.3f"), fmt(fz.get("jit_ms"), "%.1f"),
            fmt(r["compile_default"].get("compile_s"), "%.1f"), fmt(r["compile_max_autotune"].get("compile_s"),
                                                                    "%.1f")))
    notes = []
    for name in order:
        r = wls.get(name)
        if r is None:
            continue
        if r.get("status") != "done":
            notes.append("- **%s**: %s%s" % (name, r.get("status"), (": " + r["error"]) if r.get("error") else ""))
            continue
        for impl in IMPLS:
            x = r[impl]
            if x.get("supported") is False:
                notes.append("- **%s**: fusec does not support it yet: %s" % (name, x.get("error")))
            elif x.get("error"):
                notes.append("- **%s** %s: error: %s" % (name, IMPL_LABEL[impl], x["error"].splitlines()[0][:400]))
            elif x.get("skipped"):
                notes.append("- **%s** %s: skipped: %s" % (name, IMPL_LABEL[impl], x["skipped"]))
            if impl == "eager" and r.get("timed_formulation"):
                notes.append("- **%s**: eager and torch.compile timed on %s, checked by its own properties (%s); "
                             "fusec checked exactly against the graph in eager PyTorch with fusec's random stream"
                             % (name, r["timed_formulation"], "; ".join(x.get("check", {}).get("detail", []))))
            if x.get("check") and not x["check"]["ok"]:
                notes.append("- **%s** %s: check against eager FAILED: %s" % (name, IMPL_LABEL[impl],
                                                                            "; ".join(x["check"]["detail"])))
            if x.get("starved_batches"):
                notes.append("- **%s** %s: %d batch(es) re-measured with a longer sleep" % (
                    name, IMPL_LABEL[impl], x["starved_batches"]))
    missing = [n for n in st.get("selected", order) if n not in wls]
    if missing:
        notes.append("- not run (time budget or earlier stop): %s" % ", ".join(missing))
    for n in dict.fromkeys(st.get("notes", [])):  # once each (a resumed run may repeat one)
        notes.append("- %s" % n)
    if notes:
        L += ["", "## Notes", ""] + notes
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def write_png(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    with LOCK:
        st = json.loads(json.dumps(STATE, default=str))
    wls = st.get("workloads", {})
    names = [w["name"] for w in workloads.W if wls.get(w["name"], {}).get("status") == "done"]
    if not names:
        return
    colors = {"fusec": "#d62728", "eager": "#7f7f7f", "compile_default": "#1f77b4",
              "compile_max_autotune": "#2ca02c"}
    fig, ax = plt.subplots(figsize=(max(12, 0.62 * len(names) + 3), 7))
    width = 0.2
    for k, impl in enumerate(IMPLS):
        for i, n in enumerate(names):
            r = wls[n][impl]
            x = i + (k - 1.5) * width
            if "fraction" in r:
                wrong = bool(r.get("check")) and not r["check"]["ok"]
                ax.bar([x], [r["fraction"]], width, color=colors[impl], hatch="xx" if wrong else None,
                       edgecolor="black" if wrong else None)
                if wrong:
                    ax.text(x, r["fraction"] + 0.01, "wrong", rotation=90, fontsize=7, ha="center", va="bottom")
            elif impl == "fusec" or r.get("skipped") or r.get("error"):
                why = "unsupported" if r.get("supported") is False else "skipped" if r.get("skipped") else \
                    "error" if r.get("error") else ""
                if why:
                    ax.text(x, 0.01, why, rotation=90, fontsize=6, ha="center", va="bottom", color=colors[impl])
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("fraction of copy bandwidth (higher is better)")
    meta = st.get("meta", {})
    ax.set_title("fusec vs PyTorch, %s, %s, torch %s (copy %.0f GB/s)" % (
        meta.get("gpu"), (meta.get("date") or "")[:10], meta.get("torch"), st.get("copy_gbs_used", 0)))
    ax.legend(handles=[Patch(color=colors[i], label=IMPL_LABEL[i]) for i in IMPLS], loc="upper right")
    top = max([1.1] + [wls[n][i].get("fraction", 0) * 1.05 for n in names for i in IMPLS])
    ax.set_ylim(0, min(top, 3.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(out, png=True):
    with LOCK:
        derive(STATE)
        data = json.loads(json.dumps(STATE, default=str))
    data.pop("in_progress", None)
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_md(os.path.join(out, "bench.md"))
    if png:
        try:
            write_png(os.path.join(out, "bench.png"))
        except Exception as e:
            log("bench.png not written: %s" % err_text(e))


# ---- main -----------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (bench.json, bench.md, bench.png)")
    ap.add_argument("--prep", default=os.path.join(ROOT, ".gpu", "bench"), help="bench/prepare.sh's folder")
    ap.add_argument("--state", default=None, help="state file for resuming (default OUT/../fgbench-state.json)")
    ap.add_argument("--deadline", type=float, default=None, help="epoch seconds by which everything is written")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds from now when --deadline is not given")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--skip-small", action="store_true")
    ap.add_argument("--skip-compile", action="store_true", help="no torch.compile at all")
    ap.add_argument("--skip-max-autotune", action="store_true")
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="self-test without a GPU: tiny shapes on the CPU, fusec through a fake driver "
                         "(FGL_LIBCUDA; its kernels do nothing, so fusec's checks fail); --prep from "
                         "`workloads.py prepare --tiny`")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    state_path = args.state or os.path.join(os.path.dirname(os.path.abspath(args.out)), "fgbench-state.json")
    deadline = args.deadline or time.time() + args.budget

    try:
        import torch
    except ImportError as e:
        fatal("cannot import torch: %s" % e)
    global DEV
    if args.dry_run_cpu:
        DEV = CpuDevice(torch)
    elif not torch.cuda.is_available():
        fatal("torch.cuda.is_available() is False: no GPU or driver")
    else:
        DEV = CudaDevice(torch)
    try:
        import fusec
        lib = fusec.library()
    except OSError as e:
        fatal("libfgload: %s" % e)
    fusec._HOST_TENSORS_FOR_TESTS = args.dry_run_cpu
    import refs

    prep_json = os.path.join(args.prep, "compile.json")
    if not os.path.exists(prep_json):
        fatal("%s is missing: run bench/prepare.sh on the build machine and carry .gpu/bench" % prep_json)
    with open(prep_json) as f:
        prep = json.load(f)

    global STATE
    if os.path.exists(state_path):
        with open(state_path) as f:
            STATE = json.load(f)
        STATE["attempts"] = STATE.get("attempts", 1) + 1
        ip = STATE.get("in_progress")
        why = "the process died or lost its CUDA context here (see bench.log); the run went on in a new process"
        if ip and ip.endswith(MA_SUFFIX):  # phase 2: only that max-autotune compile is lost
            STATE["workloads"][ip[:-len(MA_SUFFIX)]]["compile_max_autotune"] = dict(error=why)
        elif ip:
            STATE["workloads"][ip] = dict(name=ip, status="crashed", inputs=[], error=why)
        STATE["in_progress"] = None
        log("resuming from %s (attempt %d)" % (state_path, STATE["attempts"]))
    else:
        STATE = dict(meta={}, copy_bw=[], workloads={}, notes=[], attempts=1, in_progress=None)

    if args.dry_run_cpu:
        gpu_name, sm_count = "CPU (dry run)", 0
    else:
        gpu_name, sm_count = torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count
    smi = ""
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], stdout=subprocess.PIPE, text=True, timeout=30).stdout.strip()
    except Exception:
        pass
    try:
        import triton
        triton_v = triton.__version__
    except Exception:
        triton_v = "not importable"
    meta = STATE["meta"]
    meta.setdefault("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    meta.update(gpu=gpu_name, nvidia_smi=smi,
                driver=smi.split(", ")[1] if smi.count(", ") >= 1 else "?",
                sm_count=sm_count, torch=torch.__version__, torch_cuda=torch.version.cuda,
                triton=triton_v, python=platform.python_version(), libfgload=lib[1], prepare=prep.get("meta", {}),
                env={k: os.environ.get(k) for k in ("TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_CACHE_DIR",
                                                    "FUSEC_CACHE_DIR", "CUDA_CACHE_DISABLE")})
    log("GPU %s, driver %s, torch %s, triton %s; deadline in %.0f s" % (meta["gpu"], meta["driver"],
                                                                      meta["torch"], triton_v, deadline - time.time()))

    # a hard stop: whatever happens, the outputs are written before the deadline
    def watchdog():
        while time.time() < deadline - 5:
            time.sleep(1.0)
            name, what, t = PHASE
            if name and time.time() - t > PHASE_LIMIT_S.get(what, DEFAULT_PHASE_LIMIT_S):
                # a hung kernel or compile: record it, then let run.sh resume in a new process
                log("%s: %s has run %.0f s: giving up on it (exit 3: run.sh resumes)" % (name, what, time.time() - t))
                why = "%s did not finish in %.0f s (a hung kernel or compile?); the run went on in a new process" % (
                    what, time.time() - t)
                with LOCK:
                    res = CURRENT[0] if CURRENT[0] is not None and CURRENT[0].get("name") == name else None
                    if (STATE.get("in_progress") or "").endswith(MA_SUFFIX):  # phase 2: keep phase 1's results
                        STATE["workloads"][name]["compile_max_autotune"] = dict(error=why)
                    elif res is not None and what in IMPLS and "bytes" in res:
                        res[what] = dict(error=why)  # keep what was measured before
                        res["status"] = "done"
                        STATE["workloads"][name] = res
                    else:
                        STATE["workloads"][name] = dict(name=name, status="hung", inputs=[], error=why)
                    STATE["in_progress"] = None
                try:
                    save_state(state_path)
                    write_outputs(args.out, png=False)
                finally:
                    os._exit(3)
        with LOCK:
            STATE.setdefault("notes", []).append("the run hit its deadline during %s; later workloads were not run"
                                                 % (STATE.get("in_progress") or "the final steps"))
            STATE["run_note"] = "cut at the deadline"
        log("deadline reached: writing the outputs and stopping")
        try:
            write_outputs(args.out, png=True)
        finally:
            os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()

    timer = Timer(torch)
    cb = copy_bandwidth(torch, timer)
    cb["when"] = "start" if STATE["attempts"] == 1 else "start of attempt %d" % STATE["attempts"]
    STATE["copy_bw"].append(cb)
    STATE["copy_gbs_used"] = statistics.median(c["gbs"] for c in STATE["copy_bw"])
    log("copy bandwidth %.0f GB/s; sleep kernel %.0f cycles/us" % (cb["gbs"], timer.cycles_per_us))
    if timer.have_sleep:
        # The floor's fixed part (issue 17): an empty kernel (a sleep of 0 cycles), timed as
        # every workload is timed.
        ek = timer.measure(lambda: DEV.sleep(0))
        STATE.setdefault("empty_kernel", []).append(dict(us=ek["us"], us_p10=ek["us_p10"], us_p90=ek["us_p90"]))
        log("empty kernel %.2f us" % ek["us"])
    if not timer.have_sleep:
        STATE["notes"].append("torch.cuda._sleep is missing: device times of small workloads include host gaps")

    if not args.skip_compile:
        try:
            t0 = time.perf_counter()
            warm = torch.compile(lambda a: (a * 2.0 + 1.0).sum(dim=0), dynamic=False)
            warm(torch.randn(64, 64, device=DEV.name))
            DEV.sync()
            meta["compile_warmup_s"] = time.perf_counter() - t0
            torch._dynamo.reset()
            log("torch.compile warm-up (one-time start-up) %.1f s" % meta["compile_warmup_s"])
        except Exception as e:
            STATE["notes"].append("torch.compile warm-up failed: %s" % err_text(e))

    only = set(x for x in args.only.split(",") if x)
    todo = [w for w in workloads.W if (not only or w["name"] in only) and not (args.skip_small and w["small"])
            and w["name"] not in STATE["workloads"]]
    with LOCK:
        STATE["selected"] = [w["name"] for w in workloads.W if (not only or w["name"] in only)
                             and not (args.skip_small and w["small"])]
    budget = Budget(deadline)
    ctx = dict(torch=torch, refs=refs, timer=timer, budget=budget, prep=prep, prep_dir=args.prep, args=args)

    def finish(name, res, key=None):
        """Stores a result; if the CUDA context died, exits 3 (run.sh resumes)."""
        alive = True
        try:
            DEV.sync()
            torch.zeros(1, device=DEV.name).add_(1).item()
        except Exception as e:
            alive = False
            lost = "CUDA context lost: %s" % err_text(e)
            target = res if key is None else res.setdefault(key, {})
            target["error"] = (target.get("error", "") + " | " + lost).lstrip(" |")
            if key is None:
                res["status"] = "error"
        PHASE[:] = [None, None, 0.0]
        CURRENT[0] = None
        with LOCK:
            STATE["workloads"][name] = res
            STATE["in_progress"] = None
        save_state(state_path)
        write_outputs(args.out, png=False)
        if not alive:
            log("the CUDA context is lost after %s: exiting with 3 so that run.sh resumes in a new process" % name)
            sys.stdout.flush()
            os._exit(3)

    # Phase 1: every workload (eager, fusec, torch.compile default).
    for i, wl in enumerate(todo):
        name = wl["name"]
        if budget.left() < 8:
            with LOCK:
                STATE["workloads"][name] = dict(name=name, status="not run: time budget", inputs=[])
            continue
        with LOCK:
            STATE["in_progress"] = name
        save_state(state_path)
        log("== %s (%s)" % (name, wl["desc"]))
        try:
            res = run_workload(wl, ctx, len(todo) - i - 1)
        except Exception as e:
            res = dict(name=name, status="error", inputs=[], error=err_text(e), traceback=traceback.format_exc())
            log("%s: ERROR %s" % (name, res["error"]))
        finish(name, res)

    # Phase 2: max-autotune, in priority order, while time is left.
    for wl in workloads.W:
        name = wl["name"]
        res = STATE["workloads"].get(name)
        if name not in STATE["selected"] or not res or res.get("status") != "done" or res.get("compile_max_autotune"):
            continue
        if args.skip_compile or args.skip_max_autotune:
            res["compile_max_autotune"] = dict(skipped="disabled on the command line")
            continue
        if budget.left() < budget.est_ma():
            res["compile_max_autotune"] = dict(skipped="time budget: %.0f s left, a max-autotune compile takes up to "
                                                       "%.0f s here" % (max(0, budget.left()), budget.est_ma()))
            continue
        with LOCK:
            STATE["in_progress"] = name + MA_SUFFIX
        save_state(state_path)
        log("== %s: max-autotune" % name)
        try:
            run_max_autotune(wl, ctx, res)
        except Exception as e:
            res["compile_max_autotune"] = dict(error=err_text(e))
            log("%s: max-autotune ERROR %s" % (name, err_text(e)))
        finish(name, res, "compile_max_autotune")

    try:
        cb = copy_bandwidth(torch, timer)
        cb["when"] = "end"
        STATE["copy_bw"].append(cb)
        log("copy bandwidth at the end %.0f GB/s" % cb["gbs"])
    except Exception as e:
        STATE["notes"].append("final copy bandwidth failed: %s" % err_text(e))
    STATE["run_note"] = STATE.get("run_note") or "complete in %.0f s" % (time.time() - T0)
    save_state(state_path)
    write_outputs(args.out, png=True)
    done = [r for r in STATE["workloads"].values() if r.get("status") == "done"]
    log("done: %d workloads measured, outputs in %s" % (len(done), args.out))
    os._exit(0)  # skip interpreter teardown (compile workers)


if __name__ == "__main__":
    main()
