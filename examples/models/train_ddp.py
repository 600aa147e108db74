#!/usr/bin/env python3
"""GPT-2 small trained data-parallel under torchrun: eager, torch.compile
default and torch.compile(backend="fusec") (issue 21, item 5).

    torchrun --standalone --nproc_per_node=2 examples/models/train_ddp.py --out ddp2.json
    torchrun --standalone --nproc_per_node=1 examples/models/train_ddp.py --out ddp1.json   # the 1-GPU run

Every run trains the same global batch a step (--global-batch sequences of
--seq tokens, random token ids from a fixed seed, the same on every rank)
from the same initial weights (GPTConfig of examples/models/gpt2.py, seed
0): each rank takes its share of the global batch in micro-batches of
--micro-batch sequences, accumulating gradients over
global / (world * micro) of them. So a 2-GPU run with micro-batch 8 and
global batch 16 (one micro-batch a rank, DDP averaging the two ranks'
gradients) and a 1-GPU run at the same global batch (two micro-batches,
each loss halved) take the same step, and their losses match within bf16's
tolerance (--reference compares them). The per-rank shapes are the same in
both runs, so both run the same regions. A rank wraps the model in
DistributedDataParallel when the world has more than one process; the
1-GPU run is the model alone. bf16 autocast, AdamW (fused on CUDA).

Collectives stay in PyTorch: DDP's all-reduces run in its gradient hooks,
outside Dynamo's graphs. --optimize-ddp picks what Dynamo does with DDP:

  off (default)   torch._dynamo.config.optimize_ddp = False: one forward and
                  one backward graph, as the model alone gives, so the
                  regions are those of the 1-GPU run (and of
                  train_step.py's at the same micro-batch); DDP's buckets
                  are all-reduced once the backward graph has run, with no
                  overlap of communication and compute.
  ddp_optimizer   Dynamo's DDPOptimizer cuts the graph at DDP's bucket
                  boundaries (--bucket-mb) so that a bucket's all-reduce
                  overlaps the rest of the backward: other graphs, other
                  regions, which need their own cache fill.

torch.compile default and fusec run under the same setting.

Per mode, rank 0 prints the loss every step and the median step time (CUDA
events after --warmup steps, rank 0; every rank's median is in the JSON),
and writes --out: the losses, step times, tokens/s, world size, torch
version, GPU names, Dynamo's graph breaks and, for fusec, every rank's
counts (graphs, regions run by fusec, compilations, cache hits, regions
missing from the cache, refused) and from a torch.profiler trace of
--profile-steps steps (rank 0) the CUDA time a step, the share in fusec's
kernels, their launches a step and NCCL's time.

The region cache (the GPU machine has no fusec binary; docs/pytorch.md):
run with FUSEC_BACKEND_PENDING=DIR and every rank writes the regions it
lacks to DIR (each file whole, so ranks recording the same region do not
clash); `python3 -m fusec.backend fill DIR` on a machine with fusec
compiles them into $FUSEC_BACKEND_CACHE; the next run finds them all.
--require-cache stops after the fusec mode's first step when any rank
missed a region (exit 3), so that a run that has to go back for the cache
spends no time measuring.

--cpu runs on the CPU over gloo, the regions through fusec's interpreter
(the tests: python/tests/test_distributed.py).
"""
import argparse
import contextlib
import gc
import json
import os
import re
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("train_ddp: torch is not installed; skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import fusec.backend as fb  # noqa: E402
from gpt2 import GPT, GPTConfig  # noqa: E402

FUSEC_KERNEL = re.compile(r"^fg\d+_g_k\d+")
NCCL_KERNEL = re.compile(r"^nccl")
MATMULS = {"aten.mm.default", "aten.addmm.default", "aten.bmm.default", "aten.baddbmm.default"}


class MissingRegions(Exception):
    pass


def batches(cfg, steps, global_batch, seq, seed=1234):
    """The global batch of every step: random token ids, the same on every
    rank and in every run."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab_size, (global_batch, seq + 1), generator=g) for _ in range(steps)]


def share(batch, rank, world, micro, device):
    """This rank's micro-batches of one global batch: rows
    [rank * n, (rank + 1) * n), n = global / world, in slices of `micro`."""
    n = batch.shape[0] // world
    mine = batch[rank * n:(rank + 1) * n]
    return [(mine[i:i + micro, :-1].contiguous().to(device), mine[i:i + micro, 1:].contiguous().to(device))
            for i in range(0, n, micro)]


def gather(obj):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def set_optimize_ddp(value):
    torch._dynamo.config.optimize_ddp = {"off": False, "ddp_optimizer": "ddp_optimizer"}[value]


def run_mode(mode, cfg, init, data, args, env):
    """Trains args.steps steps in one mode; returns this rank's figures."""
    from torch._dynamo.utils import counters
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world, device, cuda = env["rank"], env["world"], env["device"], env["cuda"]
    torch._dynamo.reset()
    counters.clear()
    set_optimize_ddp(args.optimize_ddp)
    model = GPT(cfg).to(device)
    model.load_state_dict(init)
    net = model
    if world > 1:
        net = DDP(model, device_ids=[env["local_rank"]] if cuda else None, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, fused=cuda)
    stats = fb.Stats()
    if mode == "eager":
        m = net
    elif mode == "default":
        m = torch.compile(net)
    elif mode == "fusec":
        m = torch.compile(net, backend=fb.make_backend("loader" if cuda else "fgrun", stats))
    else:
        raise ValueError(mode)
    accum = args.accum

    def step(micro):
        opt.zero_grad(set_to_none=True)
        total = None
        for i, (x, y) in enumerate(micro):
            sync = world == 1 or i == len(micro) - 1  # DDP all-reduces on the last micro-batch only
            with contextlib.nullcontext() if sync else net.no_sync():
                with torch.autocast(device.type, dtype=torch.bfloat16):
                    loss = m(x, y)
                (loss / accum).backward()
            total = loss.detach() if total is None else total + loss.detach()
        opt.step()
        return total / accum

    losses, times = [], []
    t0 = time.perf_counter()
    first = None
    for i, batch in enumerate(data):
        micro = share(batch, rank, world, args.micro_batch, device)
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
        else:
            w0 = time.perf_counter()
        loss = step(micro)
        if cuda:
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            times.append((time.perf_counter() - w0) * 1e3)
        if first is None:
            first = time.perf_counter() - t0
            if mode == "fusec" and args.require_cache:
                missing = torch.tensor([stats.missing], dtype=torch.int64, device=device)
                dist.all_reduce(missing)
                if missing.item():
                    raise MissingRegions("%d regions missing from the cache over the ranks (this rank %d)"
                                         % (missing.item(), stats.missing))
        dist.all_reduce(loss)  # the global batch's mean loss (gloo has no AVG)
        losses.append(loss.item() / world)
        if rank == 0:
            print("  %-8s step %3d  loss %.5f  %.2f ms" % (mode, i, losses[-1], times[-1]), flush=True)
    t = times[args.warmup:] or times
    res = {"losses": losses, "first_step_s": first, "step_ms": times, "step_ms_median": statistics.median(t),
           "step_ms_mean": statistics.fmean(t)}
    res["tokens_per_s"] = args.global_batch * args.seq / (res["step_ms_median"] / 1e3)
    res["graph_breaks"] = sum(counters["graph_break"].values())
    res["break_reasons"] = sorted(counters["graph_break"].keys())[:10]
    res["unique_graphs"] = counters["stats"]["unique_graphs"]
    if mode == "fusec":
        res["fusec"] = stats.as_dict()
        res["left_not_matmul"] = {k: v for k, v in stats.left.items() if k not in MATMULS}
    if cuda and mode in args.profile_modes and args.profile_steps > 0:
        res["profile"] = profile(step, data, args, env)
    del m, net, model, opt
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return res


def profile(step, data, args, env):
    """CUDA kernel time over --profile-steps steps, rank 0's trace (every
    rank runs the steps): total, fusec's share and launches, NCCL's time."""
    from torch.profiler import ProfilerActivity, profile as prof

    n = min(args.profile_steps, len(data))
    ctx = prof(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) if env["rank"] == 0 else None
    with ctx or contextlib.nullcontext():
        for batch in data[:n]:
            step(share(batch, env["rank"], env["world"], args.micro_batch, env["device"]))
        torch.cuda.synchronize()
    if ctx is None:
        return None
    kern = {}
    for e in ctx.events():
        if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"):
            d = kern.setdefault(e.name, [0, 0.0])
            d[0] += 1
            d[1] += e.device_time_total
    total = sum(v[1] for v in kern.values())
    fus = [v for k, v in kern.items() if FUSEC_KERNEL.match(k)]
    nccl = [v for k, v in kern.items() if NCCL_KERNEL.match(k)]
    others = sorted(((k, v) for k, v in kern.items() if not FUSEC_KERNEL.match(k)), key=lambda kv: -kv[1][1])
    return {"steps": n, "cuda_us_per_step": total / n, "fusec_us_per_step": sum(v[1] for v in fus) / n,
            "fusec_share": sum(v[1] for v in fus) / total if total else 0.0,
            "fusec_kernel_launches_per_step": sum(v[0] for v in fus) / n, "fusec_distinct_kernels": len(fus),
            "nccl_us_per_step": sum(v[1] for v in nccl) / n, "nccl_launches_per_step": sum(v[0] for v in nccl) / n,
            "top_other_kernels": [{"name": k[:120], "calls": v[0] // n, "us_per_step": v[1] / n}
                                  for k, v in others[:10]]}


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def max_rel(a, b):
    return max(rel(x, y) for x, y in zip(a, b)) if a and b else None


def summary(res, args):
    lines = ["== GPT-2 %s, world %d (%s), global batch %d x %d tokens = %d a rank x %d micro-batches of %d, "
             "%d steps (warmup %d), optimize_ddp %s, torch %s" % (
                 args.size, res["world_size"], res["gpus"][0] if res["gpus"] else "cpu", args.global_batch,
                 args.seq, args.global_batch // res["world_size"], args.accum, args.micro_batch, args.steps,
                 args.warmup, args.optimize_ddp, res["torch"])]
    for mode, r in res["modes"].items():
        if "error" in r:
            lines.append("  %-8s FAILED: %s" % (mode, r["error"][:300]))
            continue
        cmp = []
        w = "world-%s run's" % (res["reference"] or {}).get("world_size")
        for what, d in (("eager", r.get("loss_vs_eager")), (w + " eager", r.get("loss_vs_reference")),
                        (w + " same mode", r.get("loss_vs_reference_mode"))):
            if d is not None:
                cmp.append("vs %s %.1e" % (what, d))
        lines.append("  %-8s loss %.4f -> %.4f (%s)%s; step %.2f ms median (ranks: %s), %.0f tokens/s; first step "
                     "%.1f s; graph breaks %d" % (
                         mode, r["losses"][0], r["losses"][-1], ", ".join(cmp) or "no reference",
                         "" if r.get("loss_ok", True) else " OVER %.0e" % args.loss_tol, r["step_ms_median"],
                         " ".join("%.2f" % t for t in r["step_ms_median_per_rank"]), r["tokens_per_s"],
                         r["first_step_s"], r["graph_breaks"]))
        if r["break_reasons"]:
            lines.append("      graph breaks: %s" % "; ".join(b.splitlines()[0][:100] for b in r["break_reasons"]))
        if mode == "fusec":
            f = r["fusec_per_rank"]
            lines.append("      fusec per rank: %s" % "; ".join(
                "%d graphs, %d regions (%d ATen ops), %d compiled, %d from the cache, %d missing, %d refused" % (
                    x["graphs"], x["regions"], x["region_ops"], x["compiled"], x["cache_hits"], x["missing"],
                    x["refused"]) for x in f))
            lines.append("      left to PyTorch, not matmuls: %s" % (", ".join(
                "%s x%d" % kv for kv in sorted(r["left_not_matmul"].items(), key=lambda kv: -kv[1])) or "none"))
        p = r.get("profile")
        if p:
            lines.append("      profile (rank 0): %.0f us CUDA a step, %.1f%% in fusec kernels (%.0f launches a "
                         "step), NCCL %.0f us a step" % (p["cuda_us_per_step"], 100 * p["fusec_share"],
                                                         p["fusec_kernel_launches_per_step"], p["nccl_us_per_step"]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=("small", "tiny"), default="small")
    ap.add_argument("--global-batch", type=int, default=None, help="sequences a step (default 16 small, 4 tiny)")
    ap.add_argument("--micro-batch", type=int, default=None, help="sequences a forward (default 8 small, 2 tiny)")
    ap.add_argument("--seq", type=int, default=None, help="default: the config's block size")
    ap.add_argument("--vocab-size", type=int, default=None, help="the config's vocabulary (tests: a tiny model "
                    "large enough for DDPOptimizer's buckets of at least 1 MB)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--modes", default="eager,default,fusec")
    ap.add_argument("--optimize-ddp", choices=("off", "ddp_optimizer"), default="off")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--profile-modes", default="default,fusec")
    ap.add_argument("--profile-steps", type=int, default=2)
    ap.add_argument("--loss-tol", type=float, default=2e-2, help="largest relative loss difference")
    ap.add_argument("--reference", default=None, help="JSON of a run to compare the losses with (the 1-GPU run)")
    ap.add_argument("--require-cache", action="store_true",
                    help="stop (exit 3) after fusec's first step when any rank missed a region")
    ap.add_argument("--cpu", action="store_true", help="CPU and gloo, regions through fusec's interpreter")
    ap.add_argument("--out", default=None, help="JSON results (rank 0)")
    args = ap.parse_args(argv)
    small = args.size == "small"
    args.global_batch = args.global_batch or (16 if small else 4)
    args.micro_batch = args.micro_batch or (8 if small else 2)
    args.modes = [m for m in args.modes.split(",") if m]
    args.profile_modes = set(args.profile_modes.split(","))
    cfg = GPTConfig.small() if small else GPTConfig.tiny()
    if args.vocab_size:
        cfg.vocab_size = args.vocab_size
    args.seq = args.seq or cfg.block_size

    cuda = not args.cpu
    if cuda and not torch.cuda.is_available():
        print("train_ddp: no CUDA device (--cpu runs on the CPU)")
        return 2
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.global_batch % (world * args.micro_batch):
        print("train_ddp: global batch %d is not a multiple of world %d x micro-batch %d"
              % (args.global_batch, world, args.micro_batch))
        return 2
    args.accum = args.global_batch // (world * args.micro_batch)
    if cuda:
        torch.cuda.set_device(local_rank)  # fusec.load takes the current device
        device = torch.device("cuda", local_rank)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        # PyTorch's flash SDPA kernels in every mode: the exporter maps them
        # to fusec's sdpa/sdpa_bwd (cuDNN's stay in PyTorch; train_step.py)
        torch.backends.cuda.enable_cudnn_sdp(False)
    else:
        device = torch.device("cpu")
    if "MASTER_ADDR" not in os.environ:  # one process without torchrun
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29517"))
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            **({"device_id": device} if cuda else {}))
    env = {"rank": rank, "world": world, "local_rank": local_rank, "device": device, "cuda": cuda}

    ref = None
    if args.reference:
        with open(args.reference) as f:
            ref = json.load(f)
    res = {"world_size": world, "torch": torch.__version__,
           "gpus": gather(torch.cuda.get_device_name(local_rank) if cuda else "cpu"),
           "optimize_ddp": args.optimize_ddp,
           "reference": {"path": args.reference, "world_size": ref["world_size"]} if ref else None,
           "args": {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items()}, "modes": {}}

    torch.manual_seed(0)
    init = {k: v.clone() for k, v in GPT(cfg).state_dict().items()}
    data = batches(cfg, args.steps, args.global_batch, args.seq)

    def write():
        if rank == 0 and args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1, default=str)

    status = 0
    for mode in args.modes:
        if rank == 0:
            print("-- %s (world %d) ..." % (mode, world), flush=True)
        try:
            r = run_mode(mode, cfg, init, data, args, env)
        except MissingRegions as ex:
            res["modes"][mode] = {"error": "MissingRegions: %s" % ex, "missing": True}
            if rank == 0:
                print("train_ddp: %s; stopped (--require-cache): fill the cache from $FUSEC_BACKEND_PENDING (%s)"
                      % (ex, os.environ.get("FUSEC_BACKEND_PENDING", "not set")), flush=True)
            status = 3
            break
        except Exception as ex:
            res["modes"][mode] = {"error": "%s: %s" % (type(ex).__name__, str(ex)[:2000])}
            write()
            raise
        r["step_ms_median_per_rank"] = gather(r["step_ms_median"])
        if mode == "fusec":
            r["fusec_per_rank"] = gather(r["fusec"])
        res["modes"][mode] = r
        write()
    eager = res["modes"].get("eager", {}).get("losses")
    for mode, r in res["modes"].items():  # the losses against eager's (any order of modes) and the reference's
        if "error" in r:
            continue
        r["loss_vs_eager"] = max_rel(r["losses"], eager) if mode != "eager" else None
        if ref:
            r["loss_vs_reference"] = max_rel(r["losses"], ref["modes"].get("eager", {}).get("losses"))
            r["loss_vs_reference_mode"] = max_rel(r["losses"], ref["modes"].get(mode, {}).get("losses"))
        diffs = [d for d in (r["loss_vs_eager"], r.get("loss_vs_reference"), r.get("loss_vs_reference_mode"))
                 if d is not None]
        r["loss_ok"] = all(d <= args.loss_tol for d in diffs)
    res["summary"] = summary(res, args)
    if rank == 0:
        print(res["summary"], flush=True)
    write()
    if status == 0:
        bad = [m for m, r in res["modes"].items()
               if not r.get("loss_ok") or m == "fusec" and any(x["regions"] == 0 or x["refused"]
                                                               for x in r["fusec_per_rank"])]
        if bad:
            if rank == 0:
                print("FAIL: %s" % ", ".join(bad))
            status = 1
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
