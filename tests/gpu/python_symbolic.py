#!/usr/bin/env python3
"""On the GPU machine: one artifact with a symbolic size, called from Python
at several sizes (issue 18: "the Python binding takes sizes from the
tensors; nothing changes for its caller"), each result compared with the
same graph in eager PyTorch, and a size that breaks the declared facts
refused with the loader's message. Prints one line a check and a summary;
exit 1 on a failure.

  FGLOAD_LIBRARY=.../libfgload.so python3 tests/gpu/python_symbolic.py .gpu/ptx/bench__symbolic.ptx
"""
import sys

import torch

sys.path.insert(0, "python")
import fusec  # noqa: E402


def rmsnorm(x, w):
    xf = x.float()
    r = torch.rsqrt((xf * xf).mean(dim=1, keepdim=True) + 1e-6)
    return (xf * r * w.float()).to(torch.bfloat16), r


def bias_grad(dy):
    return dy.float().sum(dim=0)


def main():
    m = fusec.load(sys.argv[1])
    fails = 0
    for name, ref, make in (
        ("rmsnorm_facts", rmsnorm, lambda t: (torch.randn(t, 4096, device="cuda", dtype=torch.bfloat16),
                                              torch.randn(4096, device="cuda", dtype=torch.bfloat16))),
        ("bias_grad_nofacts", bias_grad, lambda t: (torch.randn(t, 4096, device="cuda", dtype=torch.bfloat16),)),
    ):
        g = m.graph(name)
        for t in (8, 1000, 4104, 16384):
            args = make(t)
            got = g(*args)
            got = got if isinstance(got, tuple) else (got,)
            want = ref(*args)
            want = want if isinstance(want, tuple) else (want,)
            ok = len(got) == len(want)
            for a, b in zip(got, want):
                ok &= a.shape == b.shape and torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2)
            print("%s %s T=%d shapes %s" % ("PASS" if ok else "FAIL", name, t, [tuple(a.shape) for a in got]))
            fails += not ok
    g = m.graph("rmsnorm_facts")
    try:
        g(torch.randn(12, 4096, device="cuda", dtype=torch.bfloat16),
          torch.randn(4096, device="cuda", dtype=torch.bfloat16))
        print("FAIL rmsnorm_facts T=12 (not a multiple of 8) was not refused")
        fails += 1
    except fusec.FusecError as e:
        print("PASS rmsnorm_facts T=12 refused: %s" % e)
    print("python_symbolic: %s" % ("all passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
