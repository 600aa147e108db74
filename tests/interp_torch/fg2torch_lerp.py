#!/usr/bin/env python3
"""bench/fg2torch.py's `lerp` over narrow floats against the reference
interpreter on the CPU, bitwise: f16 and bf16 tensors with a 0-d f32 end
or weight are computed in f32 and rounded once (docs/format.md: lerp, the
narrow-float rule), not with the f32 operand rounded to f16 first as
torch.lerp over f16 tensors would (the suite's scan_col workload was
flagged WRONG for fusec and torch.compile alike by that rounding, run B1b).

  fg2torch_lerp.py FGRUN      (exit 77: skipped when torch is missing)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(77)

FGRUN = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fg2torch  # noqa: E402

TEXT = """
graph end0d(a: f16[2048], e: f32[]) {
  return lerp(a, e, a)
}
graph weight0d(a: bf16[2048], b: bf16[2048], w: f32[]) {
  return lerp(a, b, w)
}
"""


def npy(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


fails = 0
g = torch.Generator().manual_seed(5)
with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "lerp.fg")
    with open(src, "w") as f:
        f.write(TEXT)
    for name, ins in (("end0d", [torch.randn(2048, generator=g).half(), torch.tensor(-1.0167845)]),
                      ("weight0d", [torch.randn(2048, generator=g).bfloat16(),
                                    torch.randn(2048, generator=g).bfloat16(), torch.tensor(0.7303)])):
        paths = []
        for i, t in enumerate(ins):
            paths.append(os.path.join(d, "%s_in%d.npy" % (name, i)))
            np.save(paths[-1], npy(t))
        out = os.path.join(d, name)
        os.makedirs(out)
        p = subprocess.run([FGRUN, src, "--graph", name, "--inputs", ",".join(paths), "--out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            print("FAIL %s: fgrun: %s" % (name, p.stdout.strip()))
            fails += 1
            continue
        want = np.load(os.path.join(out, sorted(os.listdir(out))[0]))
        fn, _ = fg2torch.load(TEXT, name)
        got = fn(*ins)
        got = npy(got[0] if isinstance(got, tuple) else got)
        bad = int((got.view(np.uint16) != want.view(np.uint16)).sum())
        print("%s %s: %d of %d elements differ" % ("ok  " if not bad else "FAIL", name, bad, got.size))
        fails += bad > 0
sys.exit(1 if fails else 0)
