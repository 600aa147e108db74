#!/usr/bin/env python3
"""Collectives under torch.compile(backend=fusec) on the CPU (issue 21,
item 5): two processes (torch.multiprocessing, the gloo backend), the
regions run through fusec's interpreter (make_backend(runner="fgrun")).

- DDP around a small model (fixtures.MLP) compiled with the backend: DDP's
  all-reduces run in PyTorch, in its gradient hooks (Dynamo's DDPOptimizer
  would cut the graph at the buckets; this model fits one, and DDPOptimizer
  refuses buckets smaller than DDP's 1 MB first one), the forward and
  backward graphs' regions are fusec's; every gradient equals eager DDP's,
  and both ranks hold the same.
- A function with functional collectives (_c10d_functional.all_reduce and
  wait_tensor, as FSDP2 and tensor parallelism trace) between pointwise
  work: every collective is left to PyTorch (outside every region), the
  pointwise work on either side is fusec's, forward and backward equal
  eager on both ranks.

- examples/models/train_ddp.py under torchrun (2 processes, --cpu: gloo,
  the regions through the interpreter), tiny GPT-2: the region-cache flow
  of a machine without fusec (FUSEC_BACKEND_COMPILE=0: both ranks record
  the missing regions in one FUSEC_BACKEND_PENDING directory, the run stops
  at once with --require-cache, `python -m fusec.backend fill` compiles
  them, the second run finds every region), the 2-process losses against a
  1-process run at the same global batch (gradient accumulation), eager's
  and fusec's; and Dynamo's DDPOptimizer (graphs cut at the buckets).

Run: python3 python/tests/test_distributed.py [-v]. Exit 77 (skipped)
without torch, torch.distributed's gloo or the built tools.
"""
import json
import os
import subprocess
import sys
import tempfile
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("test_distributed: torch is not installed; skipped")
    sys.exit(77)

from fusec import export as fe  # noqa: E402

try:
    fe.find_tool("fgrun"), fe.find_tool("fusec")
except FileNotFoundError as err:
    print("test_distributed: %s; skipped" % err)
    sys.exit(77)
if not dist.is_available() or not dist.is_gloo_available():
    print("test_distributed: torch.distributed with gloo is not available; skipped")
    sys.exit(77)

WORLD = 2


def _close(a, b, tol=1e-5):
    return bool(((a - b).abs() <= tol * (1 + b.abs())).all())


def _ddp(rank, out):
    import fusec.backend as fb
    from fixtures import MLP
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    ref = MLP(d=32, h=64)
    m = MLP(d=32, h=64)
    m.load_state_dict(ref.state_dict())
    ddp_ref = DDP(ref)
    be = fb.make_backend("fgrun")
    ddp = torch.compile(DDP(m), backend=be, dynamic=False)
    torch.manual_seed(1 + rank)  # each rank its own batch: the all-reduce matters
    x = torch.randn(6, 32)
    for mod in (ddp, ddp_ref):
        mod(x).square().mean().backward()
    fails = []
    for (n, p), q in zip(m.named_parameters(), ref.parameters()):
        if not _close(p.grad, q.grad):
            fails.append("grad %s differs by %.3g" % (n, (p.grad - q.grad).abs().max()))
    # the gradients are the ranks' mean: equal on both ranks
    g = torch.cat([p.grad.flatten() for p in m.parameters()])
    gs = [torch.empty_like(g) for _ in range(WORLD)]
    dist.all_gather(gs, g)
    if not torch.equal(gs[0], gs[1]):
        fails.append("the ranks' gradients differ")
    out.update(fails=fails, graphs=be.stats.graphs, regions=be.stats.regions, refused=be.stats.refused)


def _funcol(rank, out):
    import fusec.backend as fb
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD

    def f(x, w):
        y = torch.nn.functional.gelu(x * w + 1.0, approximate="tanh")
        y = funcol.all_reduce(y, "sum", group)
        return torch.tanh(y * 0.5 - x).sum(-1)

    torch.manual_seed(3)
    w = torch.randn(16, requires_grad=True)
    torch.manual_seed(10 + rank)
    x = torch.randn(8, 16, requires_grad=True)
    be = fb.make_backend("fgrun")
    got = torch.compile(f, backend=be, dynamic=False)(x, w)
    got.sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ref = f(x, w)
    ref.sum().backward()
    fails = []
    for what, a, b in (("out", got.detach(), ref.detach()), ("dx", gx, x.grad), ("dw", gw, w.grad)):
        if not _close(a, b):
            fails.append("%s differs by %.3g" % (what, (a - b).abs().max()))
    coll = {k: v for k, v in be.stats.left.items() if "c10d_functional" in k}
    out.update(fails=fails, collectives=coll, regions=be.stats.regions, refused=be.stats.refused,
               region_ops=be.stats.region_ops, graphs=be.stats.graphs)


def _worker(rank, init, cache, what, results):
    os.environ["FUSEC_BACKEND_CACHE"] = cache
    out = {}
    try:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
        {"ddp": _ddp, "funcol": _funcol}[what](rank, out)
    except Exception:
        out["error"] = traceback.format_exc()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    results[rank] = out


def run(what):
    tmp = tempfile.mkdtemp(prefix="fusec-dist-")
    init = "file://" + os.path.join(tmp, "rendezvous")
    with mp.Manager() as mgr:
        results = mgr.dict()
        mp.start_processes(_worker, args=(init, os.path.join(tmp, "cache"), what, results), nprocs=WORLD,
                           join=True, start_method="spawn")
        return [dict(results[r]) for r in range(WORLD)]


class DistributedTest(unittest.TestCase):
    def check(self, res):
        for r, out in enumerate(res):
            self.assertNotIn("error", out, "rank %d:\n%s" % (r, out.get("error")))
            self.assertEqual(out["fails"], [], "rank %d" % r)
            self.assertEqual(out["refused"], 0, "rank %d" % r)

    def test_ddp_compiled(self):
        res = run("ddp")
        self.check(res)
        for out in res:
            self.assertGreaterEqual(out["regions"], 2, out)

    def test_functional_collectives_stay_in_pytorch(self):
        res = run("funcol")
        self.check(res)
        for out in res:
            # forward: all_reduce + wait_tensor; backward: none (all_reduce's gradient is the identity
            # in funcol) -- the collectives are left to PyTorch, never inside a region
            self.assertIn("_c10d_functional.all_reduce.default", out["collectives"], out)
            self.assertIn("_c10d_functional.wait_tensor.default", out["collectives"], out)
            self.assertGreaterEqual(out["regions"], 2, out)  # before and after the all-reduce


ROOT = os.path.dirname(os.path.dirname(HERE))
TRAIN_DDP = os.path.join(ROOT, "examples", "models", "train_ddp.py")


def torchrun(nproc, args, env=None, expect=0):
    """examples/models/train_ddp.py under torchrun on the CPU; the JSON it wrote."""
    out = os.path.join(tempfile.mkdtemp(prefix="fusec-ddp-"), "res.json")
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % nproc, TRAIN_DDP,
           "--cpu", "--size", "tiny", "--warmup", "1", "--profile-steps", "0", "--out", out] + args
    r = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=800)
    if r.returncode != expect:
        raise AssertionError("%s: exit %d (expected %d)\n%s\n%s" % (" ".join(cmd), r.returncode, expect,
                                                                     r.stdout[-4000:], r.stderr[-4000:]))
    with open(out) as f:
        return json.load(f)


class TrainDDPTest(unittest.TestCase):
    """examples/models/train_ddp.py on the CPU, 2 processes over gloo."""

    def test_cache_flow_and_losses(self):
        tmp = tempfile.mkdtemp(prefix="fusec-ddp-flow-")
        cache, pending = os.path.join(tmp, "cache"), os.path.join(tmp, "pending")
        nofusec = {"FUSEC_BACKEND_CACHE": cache, "FUSEC_BACKEND_PENDING": pending, "FUSEC_BACKEND_COMPILE": "0"}
        steps = ["--steps", "3"]
        # 1. a machine without fusec: both ranks record what they miss, the run stops after one step
        # (train_ddp exits 3; torchrun says 1 for any failed rank)
        res = torchrun(2, steps + ["--modes", "fusec", "--require-cache"], nofusec, expect=1)
        self.assertTrue(res["modes"]["fusec"].get("missing"), res["modes"])
        names = sorted(os.listdir(pending))
        self.assertGreater(len(names), 0)
        self.assertEqual([n for n in names if not n.endswith(".fg")], [], "left-over partial files")
        # 2. here: compile them
        import fusec.backend as fb

        self.assertEqual(fb.fill(pending, directory=cache), len(names))
        # 3. the 1-process reference (two micro-batches a step) and the 2-process run from the cache
        ref = torchrun(1, steps + ["--modes", "eager"], {"FUSEC_BACKEND_CACHE": cache})
        self.assertEqual(ref["args"]["accum"], 2)
        refpath = os.path.join(tmp, "ref.json")
        with open(refpath, "w") as f:
            json.dump(ref, f)
        res = torchrun(2, steps + ["--modes", "eager,fusec", "--require-cache", "--reference", refpath], nofusec)
        self.assertEqual(res["world_size"], 2)
        self.assertEqual(res["args"]["accum"], 1)
        # DDP's all-reduce of the mean gradient = the 1-process accumulation of halves: the same step
        self.assertLess(res["modes"]["eager"]["loss_vs_reference"], 1e-5, res["summary"])
        f = res["modes"]["fusec"]
        self.assertLess(f["loss_vs_eager"], 1e-3, res["summary"])
        self.assertLess(f["loss_vs_reference"], 1e-3, res["summary"])
        self.assertEqual(len(f["losses"]), 3)
        for r in f["fusec_per_rank"]:
            self.assertEqual((r["missing"], r["refused"], r["compiled"]), (0, 0, 0), r)
            self.assertGreater(r["regions"], 0, r)
            self.assertEqual(r["cache_hits"], r["regions"], r)
            self.assertEqual(r["graphs"], 2, r)  # optimize_ddp off: one forward, one backward
        self.assertEqual(f["unique_graphs"], 1)
        self.assertEqual(sorted(os.listdir(pending)), names, "the second run recorded more regions")

    def test_ddp_optimizer(self):
        # a vocabulary of 8192 makes the tiny model 2.6 MB: DDPOptimizer's buckets are at least 1 MB
        cache = tempfile.mkdtemp(prefix="fusec-ddp-opt-")
        res = torchrun(2, ["--steps", "2", "--modes", "eager,fusec", "--optimize-ddp", "ddp_optimizer",
                           "--bucket-mb", "1", "--vocab-size", "8192"], {"FUSEC_BACKEND_CACHE": cache})
        f = res["modes"]["fusec"]
        self.assertLess(f["loss_vs_eager"], 1e-3, res["summary"])
        for r in f["fusec_per_rank"]:
            self.assertGreaterEqual(r["graphs"], 4, r)  # cut at a bucket: forward and backward of each part
            self.assertEqual(r["refused"], 0, r)
            self.assertGreater(r["regions"], 0, r)


if __name__ == "__main__":
    unittest.main()
