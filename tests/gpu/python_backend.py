#!/usr/bin/env python3
"""On the GPU machine: torch.compile(model, backend="fusec") against eager
PyTorch (issue 21, item 2). For an MLP block (LayerNorm, Linear, GELU,
residual) in f32 and in bf16, and nanoGPT's transformer block (causal
attention left to PyTorch's sdpa while fusec's code generator lacks it): the
forward output and, for training, the gradients of the input and of every
parameter, within a per-dtype tolerance; then the number of regions fusec
compiled and ran. A second process (run the script twice) finds every
region in the on-disk cache: the script prints the compile count.

Prints one line a check and a summary; exit 1 on a failure.

  FGLOAD_LIBRARY=build/loader/libfgload.so FUSEC_BIN_DIR=build/tools \\
      python3 tests/gpu/python_backend.py

A GPU machine without LLVM (no fusec binary there) runs on a cache filled
beforehand on the build machine, where --prepare runs the same models on the
CPU (regions through fusec's interpreter, checked against eager as well)
and compiles every region:

  here:  FUSEC_BACKEND_CACHE=.gpu/backend python3 tests/gpu/python_backend.py --prepare
  there: FUSEC_BACKEND_CACHE=.gpu/backend FGLOAD_LIBRARY=... python3 tests/gpu/python_backend.py
A region missing from the cache there (CUDA's attention kernels save other
tensors than the CPU's, so the regions around attention may differ) stays in
PyTorch and is counted as "missing"; a region fusec refuses is a failure.
"""
import sys

import torch

sys.path.insert(0, "python")
sys.path.insert(0, "python/tests")
import fusec.backend  # noqa: E402  (registers "fusec")
from fixtures import MLP, Block  # noqa: E402  (the models the Python tests share)


def rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / (b.norm() + 1e-12)).item()


def run(name, make_model, make_x, dtype, train, tol, backend, dev):
    torch.manual_seed(0)
    ref_m = make_model().to(dev, dtype)
    m = make_model().to(dev, dtype)
    m.load_state_dict(ref_m.state_dict())
    torch._dynamo.reset()
    cm = torch.compile(m, backend=backend)
    x = make_x().to(dev, dtype)
    fails = 0
    xs = [x.clone().requires_grad_(train), x.clone().requires_grad_(train)]
    outs = [cm(xs[0]), ref_m(xs[1])]
    checks = [("out", outs[0], outs[1])]
    if train:
        for o in outs:
            o.float().square().mean().backward()
        checks.append(("dx", xs[0].grad, xs[1].grad))
        for (pn, p), (_, q) in zip(m.named_parameters(), ref_m.named_parameters()):
            checks.append(("d" + pn, p.grad, q.grad))
    for what, a, b in checks:
        e = rel(a, b)
        ok = e <= tol
        fails += not ok
        print("%-4s %-26s %-14s rel err %.2e (tol %.0e)" % ("ok" if ok else "FAIL", name, what, e, tol))
    return fails


def main():
    prepare = "--prepare" in sys.argv[1:]
    if prepare:
        backend, dev = fusec.backend.make_backend("fgrun", fusec.backend.STATS), "cpu"
    elif not torch.cuda.is_available():
        print("python_backend: no CUDA device; skipped")
        return 0
    else:
        backend, dev = "fusec", "cuda"
    fails = 0
    mlp_x = lambda: torch.randn(512, 256)  # noqa: E731
    blk_x = lambda: torch.randn(4, 128, 256)  # noqa: E731
    fails += run("mlp f32 inference", MLP, mlp_x, torch.float32, False, 1e-5, backend, dev)
    fails += run("mlp f32 training", MLP, mlp_x, torch.float32, True, 1e-4, backend, dev)
    fails += run("mlp bf16 training", MLP, mlp_x, torch.bfloat16, True, 2e-2, backend, dev)
    fails += run("nanogpt block f32 training", Block, blk_x, torch.float32, True, 1e-4, backend, dev)
    fails += run("nanogpt block bf16 inference", Block, blk_x, torch.bfloat16, False, 2e-2, backend, dev)
    s = fusec.backend.STATS
    print("backend: %d graphs, %d regions run by fusec, %d compiled now, %d from the cache, %d refused by fusec, "
          "%d missing (no fusec here, not in the cache)" % (s.graphs, s.regions, s.compiled, s.cache_hits, s.refused,
                                                            s.missing))
    if s.refused:
        print("FAIL %d region(s) refused (see the warnings above)" % s.refused)
        fails += 1
    if s.regions == 0:
        print("FAIL no region ran through fusec")
        fails += 1
    print("%d failure(s)" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
