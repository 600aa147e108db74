#!/usr/bin/env python3
"""Performance fuzzing (issue 17): random graphs of the differential tester
at realistic sizes (`fgdiff --large`), each timed as fusec, eager PyTorch
(the graph through bench/fg2torch.py) and torch.compile of that function,
after fusec's and torch.compile's results are checked against eager.

  build machine:  perf_fuzz.py prepare --fusec build/tools/fusec --seed S --count N --out .gpu/perf
                  (fgdiff --large writes the graphs; each is compiled, its exit status kept:
                  1 = not supported, 3 = an internal error, which is a finding)
  GPU machine:    FGLOAD_LIBRARY=.../libfgload.so perf_fuzz.py run --prep .gpu/perf --out DIR --budget S

  Graphs from elsewhere (the regions a model's run left in the backend's
  cache, say): perf_fuzz.py prepare-files --fusec F --out D FILE.fg...
  renames the first graph of each file g0, g1, ... (compile.json keeps the
  file each came from), compiles it for the --arch of its `# fusec --arch`
  line if it has one, and `run` times them the same way.

`run` writes DIR/perf_fuzz.json (every graph) and prints the distribution of
fusec's speed against torch.compile and against eager: median, 5th
percentile, count below 1.0x, and the worst graphs (candidates for the
benchmark suite). Timing: CUDA events around 20 calls after 3 warm-up calls,
median of 3 such batches (device and host time together: the graphs are
large enough that launches do not dominate; small ones are flagged).
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))


def prepare(args):
    os.makedirs(args.out, exist_ok=True)
    fgdiff = os.path.join(os.path.dirname(os.path.abspath(args.fusec)), "fgdiff")
    subprocess.run([fgdiff, "--large", "--seed", str(args.seed), "--count", str(args.count), "--out", args.out],
                   check=True, stdout=subprocess.DEVNULL)
    res = {}
    for src in sorted(glob.glob(os.path.join(args.out, "g*.fg"))):
        name = os.path.basename(src)[:-3]
        t0 = time.perf_counter()
        p = subprocess.run([args.fusec, src, "-o", src[:-3] + ".ptx"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        res[name] = dict(exit=p.returncode, seconds=time.perf_counter() - t0,
                         message=p.stdout.strip().splitlines()[0] if p.returncode else "")
        if p.returncode == 3:
            print("perf_fuzz prepare: %s: INTERNAL ERROR: %s" % (name, res[name]["message"]))
    with open(os.path.join(args.out, "compile.json"), "w") as f:
        json.dump(res, f, indent=1)
    ok = sum(1 for r in res.values() if r["exit"] == 0)
    print("perf_fuzz prepare: %d graphs, %d compiled, %d not supported (exit 1), %d internal errors" % (
        len(res), ok, sum(1 for r in res.values() if r["exit"] == 1), sum(1 for r in res.values() if r["exit"] == 3)))


def prepare_files(args):
    os.makedirs(args.out, exist_ok=True)
    res = {}
    for i, src in enumerate(args.files):
        name = "g%d" % i
        text = open(src).read()
        m = re.search(r"^#\s*fusec\s+--arch\s+(\S+)", text, re.M)
        text = re.sub(r"^(\s*graph\s+)\w+", lambda g: g.group(1) + name, text, count=1, flags=re.M)
        dst = os.path.join(args.out, name + ".fg")
        with open(dst, "w") as f:
            f.write(text)
        cmd = [args.fusec, dst, "-o", dst[:-3] + ".ptx"] + (["--arch", m.group(1)] if m else [])
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        res[name] = dict(exit=p.returncode, seconds=time.perf_counter() - t0, source=src,
                         message=p.stdout.strip().splitlines()[0] if p.returncode else "")
        if p.returncode:
            print("perf_fuzz prepare-files: %s (%s): exit %d: %s" % (name, src, p.returncode, res[name]["message"]))
    with open(os.path.join(args.out, "compile.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("perf_fuzz prepare-files: %d graphs, %d compiled" % (len(res), sum(1 for r in res.values() if not r["exit"])))


def _copy_gbs(torch):
    """Copy bandwidth (GB/s, read + write) of a 512 MiB device-to-device copy,
    median of 20, as bench.py measures it."""
    a = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    us = _time(torch, lambda: b.copy_(a), reps=20, batches=3)
    del a, b
    return 2 * (512 << 20) / us / 1e3


def _profile(torch, fn, calls=5):
    """The CUDA kernels of `calls` calls: [(name, count, total us a call)],
    longest first (torch.profiler)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = e.cuda_time_total
        if us > 0:
            rows.append((e.key[:80], e.count // calls, round(us / calls, 2)))
    return sorted(rows, key=lambda x: -x[2])[:30]


def _scalar(dt):
    """The value a scalar parameter of dtype dt is given."""
    return True if dt == "bool" else 0.75 if dt.startswith(("f", "bf")) else 3


def _time(torch, fn, reps=20, batches=3):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    meds = []
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        meds.append(a.elapsed_time(b) * 1000.0 / reps)
    return statistics.median(meds)


def run(args):
    import torch

    import fg2torch
    import fusec
    import refs

    deadline = time.time() + args.budget
    copy_gbs = _copy_gbs(torch)
    print("perf_fuzz: copy bandwidth %.0f GB/s" % copy_gbs)
    with open(os.path.join(args.prep, "compile.json")) as f:
        comp = json.load(f)
    out = {}
    dev = torch.device("cuda")
    only = set(args.only.split(",")) if args.only else None
    for name in sorted(comp, key=lambda n: int(n[1:])):
        if time.time() > deadline:
            break
        if only and name not in only:
            continue
        r = dict(compile=comp[name])
        out[name] = r
        if comp[name]["exit"] != 0:
            continue
        src = os.path.join(args.prep, name + ".fg")
        try:
            text = open(src).read()
            fn, sig = fg2torch.load(text)
            # scalar parameters: a fixed value of their dtype (tensors: refs.make_inputs)
            tens = iter(refs.make_inputs([s for s in sig if s[2] is not None], dev, seed=0))
            inputs = [next(tens) if shape is not None else _scalar(dt) for _, dt, shape in sig]
            inputs = fg2torch.with_layouts(fn, inputs)  # parameters with a layout: strided as declared
            want = fn(*inputs)  # a tuple: fg2torch returns every result
            r["bytes"] = sum(t.numel() * t.element_size() for t in inputs if hasattr(t, "numel")) + sum(
                t.numel() * t.element_size() for t in want if hasattr(t, "numel"))
            g = fusec.load(os.path.join(args.prep, name + ".ptx")).graph(name)
            got = g(*inputs)
            got = got if isinstance(got, tuple) else (got,)  # one result comes back bare
            cmp = [refs.compare(a, b) for a, b in zip(got, want)]
            r["fusec_check"] = all(ok for ok, _ in cmp)
            r["fusec_why"] = ["result %d: %s" % (j, why) for j, (ok, why) in enumerate(cmp) if not ok]
            if args.check_only:
                continue
            torch._dynamo.reset()
            cfn = torch.compile(fn, dynamic=False)
            cgot = cfn(*inputs)
            r["compile_check"] = all(refs.compare(a, b)[0] for a, b in zip(cgot, want))
            r["fusec_us"] = _time(torch, lambda: g(*inputs))
            r["eager_us"] = _time(torch, lambda: fn(*inputs))
            r["compile_us"] = _time(torch, lambda: cfn(*inputs))
            r["fusec_frac"] = r["bytes"] / r["fusec_us"] / 1e3 / copy_gbs
            if args.profile:
                for who, f in (("fusec", lambda: g(*inputs)), ("compile", lambda: cfn(*inputs)),
                               ("eager", lambda: fn(*inputs))):
                    r["profile_" + who] = _profile(torch, f)
            del got, cgot, want, inputs
            torch.cuda.empty_cache()
        except Exception as e:  # a graph PyTorch or the binding cannot run: recorded, not fatal
            r["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        print("%s: %s" % (name, {k: v for k, v in r.items() if k != "compile"}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "perf_fuzz.json"), "w") as f:
        json.dump(dict(copy_gbs=copy_gbs, graphs=out), f, indent=1)
    timed = [(n, r) for n, r in out.items() if r.get("fusec_us") and r.get("compile_us")]
    vs_c = sorted(r["compile_us"] / r["fusec_us"] for _, r in timed)
    vs_e = sorted(r["eager_us"] / r["fusec_us"] for _, r in timed)
    if not timed:
        print("perf_fuzz: nothing timed")
        return
    gm = math.exp(sum(map(math.log, vs_c)) / len(vs_c))
    print("perf_fuzz: %d graphs timed (%d compiled by fusec, %d not supported, %d internal errors, %d errors "
          "in PyTorch or the binding)" % (
              len(timed), sum(1 for r in out.values() if r["compile"]["exit"] == 0),
              sum(1 for r in out.values() if r["compile"]["exit"] == 1),
              sum(1 for r in out.values() if r["compile"]["exit"] == 3),
              sum(1 for r in out.values() if r.get("error"))))
    print("perf_fuzz: vs torch.compile: geomean %.3fx, median %.3fx, 5th percentile %.3fx, %d below 1.0x" % (
        gm, statistics.median(vs_c), vs_c[int(0.05 * len(vs_c))], sum(1 for x in vs_c if x < 1.0)))
    print("perf_fuzz: vs eager: median %.2fx, 5th percentile %.2fx, %d below 1.0x" % (
        statistics.median(vs_e), vs_e[int(0.05 * len(vs_e))], sum(1 for x in vs_e if x < 1.0)))
    print("perf_fuzz: checks: fusec wrong against eager %d, torch.compile wrong %d" % (
        sum(1 for _, r in timed if not r["fusec_check"]), sum(1 for _, r in timed if not r["compile_check"])))
    print("perf_fuzz: worst against torch.compile:")
    for n, r in sorted(timed, key=lambda x: x[1]["compile_us"] / x[1]["fusec_us"])[:args.worst]:
        print("  %-8s %.2fx (fusec %.1f us, compile %.1f us, eager %.1f us, %.1f MB, %.3f of copy bandwidth) %s" % (
            n, r["compile_us"] / r["fusec_us"], r["fusec_us"], r["compile_us"], r["eager_us"], r["bytes"] / 1e6,
            r["fusec_frac"], r["compile"].get("source", "")))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--fusec", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--out", required=True)
    f = sub.add_parser("prepare-files")
    f.add_argument("--fusec", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("files", nargs="+")
    r = sub.add_parser("run")
    r.add_argument("--prep", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--budget", type=float, default=400)
    r.add_argument("--only", default="", help="comma-separated graph names")
    r.add_argument("--worst", type=int, default=10, help="how many of the slowest graphs to list")
    r.add_argument("--profile", action="store_true", help="each graph's CUDA kernels under torch.profiler")
    r.add_argument("--check-only", action="store_true", help="fusec's check against eager, no timing")
    args = ap.parse_args()
    {"prepare": prepare, "prepare-files": prepare_files, "run": run}[args.cmd](args)


if __name__ == "__main__":
    main()
