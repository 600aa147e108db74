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

Run: python3 python/tests/test_distributed.py [-v]. Exit 77 (skipped)
without torch, torch.distributed's gloo or the built tools.
"""
import os
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


if __name__ == "__main__":
    unittest.main()
