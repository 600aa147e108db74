#!/usr/bin/env python3
"""Training steps of GPT-2 small and a Llama-style stack under eager PyTorch,
torch.compile (default, optionally max-autotune-no-cudagraphs) and
torch.compile(backend="fusec") (issue 21, item 4).

Each mode starts from the same initial weights and sees the same batch
stream: forward and backward under bf16 autocast, AdamW. The script then
reports, per model and mode:
  - the loss at every step and its largest relative difference from eager's
    (bf16 tolerance, --loss-tol);
  - the first step's wall time (compilation included) and the step time
    after --warmup steps (CUDA events; median and mean), tokens/s;
  - for fusec: graphs, regions run by fusec, their ATen ops, compilations and
    cache hits, regions missing from the cache, graph breaks (Dynamo's
    counters), the ops left to PyTorch (matmuls apart), and from a
    torch.profiler trace of --profile-steps steps the share of CUDA time in
    fusec's kernels (entry names fg<N>_g_k<K>..., the backend's regions
    being graphs named `g`) and the largest kernels of the rest.
It writes the results as JSON (--out) and prints a summary.

On the GPU machine (no LLVM there, so no fusec binary: every region must be
in the cache, filled here beforehand at the same sizes):

  here:  FUSEC_BACKEND_CACHE=.gpu/models python3 examples/models/train_step.py --prepare [SIZE FLAGS]
  there: FUSEC_BACKEND_CACHE=$PWD/.gpu/models FGLOAD_LIBRARY=$PWD/build-gpu/loader/libfgload.so \\
             python3 examples/models/train_step.py [SIZE FLAGS] --out results.json

--prepare traces the same models at the same sizes with fake tensors on the
CPU (nothing computed) through the backend's runner "prepare", which
compiles every region into the cache. The regions' cache key names values
v0, v1, ..., so the CPU trace's regions and the GPU trace's are the same
entries even though PyTorch's CPU and CUDA attention kernels differ (both
flash kernels map to the same sdpa / sdpa_bwd text; docs/pytorch.md). A region missing there stays in
PyTorch and is counted ("missing" in the results).

--seqs 256,512,1024 gives step i the (i mod 3)th length and compiles every
mode with dynamic=True (one Dynamo graph for all lengths; fusec writes each
length's regions, fusec.specialize); the step times are also given by
length. On the GPU machine record the regions first (a short run with
$FUSEC_BACKEND_PENDING), fill them here (`python -m fusec.backend fill`).

--cpu-check runs the tiny configurations on the CPU with the regions run by
fusec's interpreter (the backend's runner "fgrun"), for the losses only.

On the GPU each model runs in a process of its own (--isolate model, the
default there; --isolate mode: each model and mode; none: all in this
process, the default with --cpu-check): step times measured after other
models ran in the same process varied by several ms with the same CUDA
time. The parent process merges the results and prints the summary.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("train_step: torch is not installed; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import fusec.backend as fb  # noqa: E402
from gpt2 import GPT, GPTConfig  # noqa: E402
from llama import Llama, LlamaConfig  # noqa: E402

MODELS = {
    "gpt2": (GPT, GPTConfig),
    "llama": (Llama, LlamaConfig),
}
MATMULS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"}
FUSEC_KERNEL = re.compile(r"^fg\d+_g(_[0-9a-f]+)?_k\d+")


def make_config(name, size):
    cls = MODELS[name][1]
    return cls.small() if size == "small" else cls.tiny()


def batches(cfg, n, batch, seq, device, seed=1234, seqs=None):
    """The batch stream: random token ids, the same for every mode; step i's
    sequence length seqs[i % len(seqs)] where seqs is given, else seq."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        t = seqs[i % len(seqs)] if seqs else seq
        x = torch.randint(0, cfg.vocab_size, (batch, t + 1), generator=g)
        out.append((x[:, :-1].contiguous().to(device), x[:, 1:].contiguous().to(device)))
    return out


def compiled(model, mode, stats, runner, dynamic=None):
    """The model as `mode` runs it; dynamic=True (--seqs): every compile
    with symbolic sizes from the start, as torch.compile(dynamic=True)."""
    if mode == "eager":
        return model
    if mode == "default":
        return torch.compile(model, dynamic=dynamic)
    if mode == "max-autotune":
        return torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=dynamic)
    if mode == "fusec":
        return torch.compile(model, backend=fb.make_backend(runner, stats), dynamic=dynamic)
    raise ValueError(mode)


def dynamo_counts():
    from torch._dynamo.utils import counters

    return {"graph_breaks": sum(counters["graph_break"].values()),
            "break_reasons": sorted(counters["graph_break"].keys())[:10],
            "unique_graphs": counters["stats"]["unique_graphs"]}


def run_mode(name, mode, cfg, init_state, data, args, device):
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    torch.manual_seed(0)
    model = MODELS[name][0](cfg).to(device)
    model.load_state_dict(init_state)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=(device == "cuda"))
    stats = fb.Stats()
    runner = "fgrun" if device == "cpu" else "loader"
    m = compiled(model, mode, stats, runner, dynamic=True if args.seqs else None)
    cuda = device == "cuda"

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = m(x, y)
        loss.backward()
        opt.step()
        return loss

    losses, times = [], []
    t0 = time.perf_counter()
    before_last = None
    for i, (x, y) in enumerate(data):
        if i == len(data) - 1:
            before_last = stats.copies()
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
        loss = step(x, y)
        if cuda:
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        losses.append(loss.item())
        if i == 0:
            first = time.perf_counter() - t0
    res = {"losses": losses, "first_step_s": first}
    if cuda:
        t = times[args.warmup:]
        timed = [x for x, _ in data][args.warmup:]
        res.update(step_ms_median=statistics.median(t), step_ms_mean=statistics.fmean(t),
                   # each step's tokens over its time, the median (batch x seq over the median step
                   # where every step has the same length)
                   tokens_per_s=statistics.median(x.numel() / (ms / 1e3) for x, ms in zip(timed, t)))
        if args.seqs:  # each length's steps apart: the median of each
            by = {}
            for x, ms in zip(timed, t):
                by.setdefault(x.shape[1], []).append(ms)
            res["step_ms_by_seq"] = {str(k): statistics.median(v) for k, v in sorted(by.items())}
    res.update(dynamo_counts())
    if mode == "fusec":
        res["fusec"] = stats.as_dict()
        res["left_not_matmul"] = {k: v for k, v in stats.left.items() if k not in MATMULS}
        res["copies_last_step"] = step_copies(before_last, stats.copies())
        import fusec  # which call path ran the regions: the C extension, or ctypes (slower a call)
        res["calls"] = ("C extension %s" % fusec.FAST_CALLS) if fusec.FAST_CALLS else (
            "ctypes (%s; set $FUSEC_FGCALL to the built _fgcall*.so)" % fusec._fgcall_where)
    if cuda and mode in args.profile_modes:
        res["profile"] = profile(step, data, args.profile_steps)
    del m, model, opt
    if cuda:
        torch.cuda.empty_cache()
    return res


def step_copies(a, b):
    """The backend's counts around its regions over one step (b - a, two
    Stats.copies() snapshots): region calls, inputs passed as they are,
    inputs copied and results restrided, by source."""
    if a is None:
        return b

    def sub(x, y):
        return {k: v - y.get(k, 0) for k, v in x.items() if v - y.get(k, 0)}

    return {"calls": b["calls"] - a["calls"], "inputs_passed": b["inputs_passed"] - a["inputs_passed"],
            "inputs_copied": sub(b["inputs_copied"], a["inputs_copied"]),
            "results_restrided": sub(b["results_restrided"], a["results_restrided"])}


def profile(step, data, n):
    """CUDA kernel time over n steps: total, fusec's share, the largest others."""
    from torch.profiler import ProfilerActivity, profile as prof

    with prof(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        for x, y in data[:n]:
            step(x, y)
        torch.cuda.synchronize()
    if os.environ.get("FG_PROFILE_TRACE"):  # the profiler timeline (host time against kernels)
        profile.n = getattr(profile, "n", 0) + 1  # one file a profiled mode
        p.export_chrome_trace("%s.%d.%d.json" % (os.environ["FG_PROFILE_TRACE"], os.getpid(), profile.n))
    kern = {}
    for e in p.events():
        if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
            t = e.device_time_total  # a kernel's: its duration, us
            d = kern.setdefault(e.name, [0, 0.0])
            d[0] += 1
            d[1] += t
    total = sum(v[1] for v in kern.values())
    fus = {k: v for k, v in kern.items() if FUSEC_KERNEL.match(k)}
    fus_t = sum(v[1] for v in fus.values())
    others = sorted(((k, v) for k, v in kern.items() if not FUSEC_KERNEL.match(k)), key=lambda kv: -kv[1][1])
    return {"steps": n, "cuda_us_per_step": total / n, "fusec_us_per_step": fus_t / n,
            "fusec_share": fus_t / total if total else 0.0, "fusec_kernel_launches_per_step": sum(
                v[0] for v in fus.values()) / n, "fusec_distinct_kernels": len(fus),
            "top_other_kernels": [{"name": k[:120], "calls": v[0] // n, "us_per_step": v[1] / n}
                                  for k, v in others[:40]],
            "top_fusec_kernels": [{"name": k[:120], "calls": v[0] // n, "us_per_step": v[1] / n}
                                  for k, v in sorted(fus.items(), key=lambda kv: -kv[1][1])[:40]]}


def prepare(args):
    """Fills the cache with every region of the two models at the given
    sizes: fake tensors, traced through the backend's "prepare" runner."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    out = {}
    for name in args.models:
        cfg = make_config(name, args.size)
        torch._dynamo.reset()
        with torch.device("meta"):
            model = MODELS[name][0](cfg)
        stats = fb.Stats()
        t0 = time.perf_counter()
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = model.to_empty(device="cpu")
            if hasattr(model, "tie_weights"):  # to_empty unties GPT-2's lm_head and wte
                model.tie_weights()
            # two tensors (one passed twice would be one graph input, another graph)
            x = torch.zeros(args.batch, args.seq, dtype=torch.int64)
            y = torch.zeros(args.batch, args.seq, dtype=torch.int64)
            cm = torch.compile(model, backend=fb.make_backend("prepare", stats))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = cm(x, y)
            loss.backward()
        out[name] = dict(stats.as_dict(), seconds=time.perf_counter() - t0)
        print("prepare %s (%s, batch %d, seq %d): %d graphs, %d regions, %d compiled now, %d already cached, "
              "%d refused, %.1f s" % (name, args.size, args.batch, args.seq, stats.graphs, stats.regions,
                                      stats.compiled, stats.cache_hits, stats.refused, out[name]["seconds"]))
        print("  left to PyTorch: %s" % ", ".join("%s x%d" % kv for kv in stats.left.most_common()))
    return out


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def summary(results, args):
    lines = []
    for name, modes in results["models"].items():
        lines.append("== %s (%s: batch %d, seq %d, %d steps, warmup %d)" % (
            name, args.size, args.batch, args.seq, args.steps, args.warmup))
        eager = modes.get("eager", {}).get("losses")
        for mode, r in modes.items():
            if "error" in r:
                lines.append("  %-13s FAILED: %s" % (mode, r["error"]))
                continue
            d = max(rel(a, b) for a, b in zip(r["losses"], eager)) if eager else float("nan")
            r["loss_max_rel_diff"] = d
            r["loss_ok"] = bool(d <= args.loss_tol) if eager else None
            t = ("step %.2f ms (mean %.2f), %.0f tokens/s" % (r["step_ms_median"], r["step_ms_mean"],
                                                               r["tokens_per_s"])) if "step_ms_median" in r else ""
            if "step_ms_by_seq" in r:
                t += " (by length: %s)" % ", ".join("%s: %.2f ms" % kv for kv in r["step_ms_by_seq"].items())
            lines.append("  %-13s loss %.4f -> %.4f, max rel diff vs eager %.1e%s; first step %.1f s; %s; "
                         "graph breaks %d" % (mode, r["losses"][0], r["losses"][-1], d,
                                              "" if r["loss_ok"] in (None, True) else " (OVER %.0e)" % args.loss_tol,
                                              r["first_step_s"], t, r["graph_breaks"]))
            if mode == "fusec":
                f = r["fusec"]
                lines.append("      fusec: %d graphs, %d regions (%d ATen ops), %d compiled, %d from the cache, "
                             "%d missing, %d refused" % (f["graphs"], f["regions"], f["region_ops"], f["compiled"],
                                                         f["cache_hits"], f["missing"], f["refused"]))
                if f["missing"] or f["refused"]:
                    lines.append("      NOT A COMPARISON: %d regions ran in PyTorch (missing from the cache or "
                                 "refused); record them ($FUSEC_BACKEND_PENDING), fill, and run again"
                                 % (f["missing"] + f["refused"]))
                if f.get("specialized"):
                    lines.append("      written at each call's sizes: %d regions, %d shapes" % (f["specialized"],
                                                                                            f["shapes"]))
                c = r["copies_last_step"]
                lines.append("      a step: %d region calls, %d tensor inputs passed as they are, %d copied (%s), "
                             "%d results restrided (%s)" % (
                                 c["calls"], c["inputs_passed"], sum(c["inputs_copied"].values()),
                                 ", ".join("%s x%d" % kv for kv in c["inputs_copied"].items()) or "-",
                                 sum(c["results_restrided"].values()),
                                 ", ".join("%s x%d" % kv for kv in c["results_restrided"].items()) or "-"))
                lines.append("      calls: %s" % r.get("calls", "?"))
                lines.append("      left to PyTorch, not matmuls: %s" % (", ".join(
                    "%s x%d" % kv for kv in sorted(r["left_not_matmul"].items(), key=lambda kv: -kv[1])) or "none"))
            if "profile" in r:
                p = r["profile"]
                lines.append("      profile: %.0f us CUDA a step, %.1f%% in fusec kernels (%.0f launches a step, "
                             "%d distinct)" % (p["cuda_us_per_step"], 100 * p["fusec_share"],
                                               p["fusec_kernel_launches_per_step"], p["fusec_distinct_kernels"]))
                for k in p["top_other_kernels"][:6]:
                    lines.append("        %8.0f us x%-3d %s" % (k["us_per_step"], k["calls"], k["name"][:90]))
                for k in p.get("top_fusec_kernels", [])[:8]:
                    lines.append("        %8.0f us x%-3d fusec %s" % (k["us_per_step"], k["calls"], k["name"][:84]))
    return "\n".join(lines)


# the flags isolated() sets for each child itself
_PER_CHILD = ("--models", "--modes", "--isolate", "--out", "--max-autotune")


def child_argv(argv):
    """The command line a child of isolated() gets: every flag of this
    process's (`argv`, as given) but those it sets per child (_PER_CHILD;
    --max-autotune is in the modes it is given)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in _PER_CHILD:
            skip = "=" not in a and name != "--max-autotune"
            continue
        out.append(a)
    return out


def isolated(args):
    """{model: {mode: results}}, each model (--isolate model) or each model
    and mode (--isolate mode) run by this script in a process of its own
    (its output passed through); a process that fails without results
    (a crash) gives its modes an error."""
    import subprocess
    import tempfile

    # the sizes as this process resolved them (--seq defaults to the first model's block size)
    base = child_argv(args.argv) + ["--batch", str(args.batch), "--seq", str(args.seq)]
    jobs = [(name, args.modes) for name in args.models] if args.isolate == "model" else \
        [(name, [mode]) for name in args.models for mode in args.modes]
    out = {}
    with tempfile.TemporaryDirectory(prefix="train_step-") as tmp:
        for k, (name, modes) in enumerate(jobs):
            path = os.path.join(tmp, "%d.json" % k)
            cmd = [sys.executable, os.path.abspath(__file__)] + base + [
                "--models", name, "--modes", ",".join(modes), "--isolate", "none", "--out", path]
            print("== process: %s %s" % (name, ",".join(modes)), flush=True)
            rc = subprocess.run(cmd).returncode
            got = {}
            if os.path.exists(path):
                with open(path) as f:
                    got = json.load(f)["models"].get(name, {})
            for mode in modes:
                out.setdefault(name, {})[mode] = got.get(mode) or {
                    "error": "the process running it exited with status %d and no results" % rc}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--size", choices=("small", "tiny"), default="small")
    ap.add_argument("--batch", type=int, default=None, help="default: 8 (small), 2 (tiny)")
    ap.add_argument("--seq", type=int, default=None, help="default: the config's block size")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--modes", default="eager,default,fusec")
    ap.add_argument("--max-autotune", action="store_true", help="also max-autotune-no-cudagraphs (slow to compile)")
    ap.add_argument("--profile-modes", default="fusec,default")
    ap.add_argument("--profile-steps", type=int, default=3)
    ap.add_argument("--loss-tol", type=float, default=2e-2, help="largest relative loss difference vs eager")
    ap.add_argument("--prepare", action="store_true", help="fill $FUSEC_BACKEND_CACHE here (CPU, fake tensors)")
    ap.add_argument("--cpu-check", action="store_true", help="tiny models on the CPU, regions through fgrun")
    ap.add_argument("--cudnn-sdp", action="store_true",
                    help="leave PyTorch's cuDNN attention on (its default on Hopper) in every mode, else every "
                         "mode takes the flash kernels; fusec leaves cuDNN's kernels to PyTorch unless "
                         "FUSEC_BACKEND_ATTENTION=all (runs V2, V4)")
    ap.add_argument("--seqs", default=None,
                    help="comma-separated sequence lengths, step i taking the (i mod n)th: every compiled mode "
                         "with dynamic=True (one graph for all lengths; fusec writes each length's regions "
                         "static where its code generator does not take a symbolic size)")
    ap.add_argument("--out", default=None, help="JSON results")
    ap.add_argument("--isolate", choices=("model", "mode", "none"), default=None,
                    help="run each model (or each model and mode) in a process of its own, so that a step time "
                         "does not depend on what ran before it in the process (the allocator, Dynamo's caches); "
                         "default: model on the GPU, none with --cpu-check")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.models = [m for m in args.models.split(",") if m]
    args.modes = [m for m in args.modes.split(",") if m] + (["max-autotune"] if args.max_autotune else [])
    args.profile_modes = set(args.profile_modes.split(","))
    if args.cpu_check:
        args.size = "tiny"
    args.batch = args.batch or (8 if args.size == "small" else 2)
    args.seq = args.seq or make_config(args.models[0], args.size).block_size
    args.seqs = [int(t) for t in args.seqs.split(",") if t] if args.seqs else None
    if args.seqs and args.prepare:
        ap.error("--seqs takes the GPU's runs (record the regions with $FUSEC_BACKEND_PENDING), not --prepare")
    if args.prepare:
        res = {"prepare": prepare(args)}
    else:
        device = "cpu" if args.cpu_check else "cuda"
        if device == "cuda" and not torch.cuda.is_available():
            print("train_step: no CUDA device (use --prepare or --cpu-check here)")
            return 2
        if device == "cpu":
            args.modes = [m for m in args.modes if m in ("eager", "fusec")]
        else:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            # every mode uses PyTorch's flash SDPA kernels, which the exporter
            # maps to fusec's sdpa/sdpa_bwd since run X5 (docs/benchmarks.md);
            # --cudnn-sdp keeps cuDNN's (PyTorch's default on Hopper: faster
            # than flash, so Inductor's step with them is the stricter
            # baseline; runs V2, V4)
            if not args.cudnn_sdp:
                torch.backends.cuda.enable_cudnn_sdp(False)
        if args.isolate is None:
            args.isolate = "none" if device == "cpu" else "model"
        res = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
               "args": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()}, "models": {}}
        for name in args.models if args.isolate == "none" else ():
            cfg = make_config(name, args.size)
            torch.manual_seed(0)
            init = {k: v.clone() for k, v in MODELS[name][0](cfg).state_dict().items()}
            data = batches(cfg, args.steps, args.batch, args.seq, device, seqs=args.seqs)
            res["models"][name] = {}
            for mode in args.modes:
                print("-- %s %s ..." % (name, mode), flush=True)
                try:
                    res["models"][name][mode] = run_mode(name, mode, cfg, init, data, args, device)
                except Exception as ex:  # one mode failing must not lose the others' numbers
                    res["models"][name][mode] = {"error": "%s: %s" % (type(ex).__name__, str(ex)[:2000])}
                    print("   failed: %s" % res["models"][name][mode]["error"][:500], flush=True)
        if args.isolate != "none":
            res["models"] = isolated(args)
        text = summary(res, args)
        res["summary"] = text
        print(text)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    if not args.prepare:
        bad = [(n, m) for n, ms in res["models"].items() for m, r in ms.items()
               if "error" in r or r.get("loss_ok") is False
               or m == "fusec" and (r["fusec"]["regions"] == 0 or r["fusec"]["refused"])]
        if bad:
            print("FAIL: %s" % ", ".join("%s %s" % b for b in bad))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
